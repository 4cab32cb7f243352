"""Keeping confd's view of config.data current.

The master replaces config.data by an atomic rename, so a change shows in
``stat`` as a new inode (and usually a new size or mtime).  We poll ``stat``
with a LoopingCall on the injected clock -- cheap, and it works the same on
every file system and in tests -- and build a new snapshot when the file
changed.  Queries keep being answered from the old snapshot until the new one
is complete; a file that fails to load is logged and the old snapshot stays
(the failed version is not retried until the file changes again).
"""

import os

from twisted.internet import task
from twisted.logger import Logger

from ganeti import config
from ganeti.confd.snapshot import ConfigSnapshot

log = Logger()


def _file_signature(path):
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class ConfigWatcher(object):
    """Holds the current :class:`ConfigSnapshot` of ``path``."""

    def __init__(self, path, clock, interval=1.0):
        self.path = path
        self.interval = interval
        self._clock = clock
        self._loop = None
        self._signature = None         # of the file behind self.snapshot
        self._failed_signature = None  # of the last file that failed
        self._missing_logged = False
        self.snapshot = None
        self.reloads = 0
        self.reload_failures = 0
        self.last_error = None

    # --- life cycle ---------------------------------------------------------

    def start(self):
        """Load now and then poll every ``interval`` seconds."""
        if self._loop is None:
            self._loop = task.LoopingCall(self.check)
            self._loop.clock = self._clock
            self._loop.start(self.interval, now=True).addErrback(
                lambda f: log.failure("config poller stopped", f))

    def stop(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    # --- loading ------------------------------------------------------------

    def check(self):
        """Reload if the file changed since the last (attempted) load."""
        try:
            signature = _file_signature(self.path)
        except OSError as err:
            if not self._missing_logged:
                self._missing_logged = True
                log.error("cannot stat configuration {path}: {error};"
                          " {what}", path=self.path, error=err.strerror,
                          what=self._keeping())
            return False
        self._missing_logged = False
        if signature in (self._signature, self._failed_signature):
            return False
        return self._load(signature)

    def reload(self):
        """Load the file now, changed or not; True if it was loaded."""
        try:
            signature = _file_signature(self.path)
        except OSError:
            signature = None
        return self._load(signature)

    def _keeping(self):
        if self.snapshot is None:
            return "no configuration loaded yet"
        return "still serving serial %d" % self.snapshot.serial

    def _load(self, signature):
        try:
            store = config.ConfigStore.load(self.path)
            snapshot = ConfigSnapshot(store)
        except Exception as err:  # any failure: keep serving the old one
            self.reload_failures += 1
            self._failed_signature = signature
            self.last_error = str(err)
            log.error("failed to load configuration {path}: {error}; {what}",
                      path=self.path, error=err, what=self._keeping())
            return False
        old = self.snapshot
        self.snapshot = snapshot
        self._signature = signature
        self._failed_signature = None
        self.last_error = None
        self.reloads += 1
        log.info("loaded configuration {path}: cluster serial {serial},"
                 " file serial {file_serial}{was}", path=self.path,
                 serial=snapshot.serial, file_serial=snapshot.file_serial,
                 was=("" if old is None else
                      " (was %d/%d)" % (old.serial, old.file_serial)))
        for warning in snapshot.warnings:
            log.warn("configuration: {warning}", warning=warning)
        return True

    def stats(self):
        snap = self.snapshot
        return {
            "config_loaded": snap is not None,
            "config_serial": snap.serial if snap is not None else None,
            "config_file_serial": (snap.file_serial if snap is not None
                                   else None),
            "config_reloads": self.reloads,
            "config_reload_failures": self.reload_failures,
        }
