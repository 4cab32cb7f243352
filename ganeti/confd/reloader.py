"""Keeping confd's view of config.data current.

The master replaces config.data by an atomic rename, so a change shows in
``stat`` as a new inode (and usually a new size or mtime).  We poll ``stat``
with a LoopingCall on the injected clock -- cheap, and it works the same on
every file system and in tests -- and build a new snapshot when the file
changed.  Queries keep being answered from the old snapshot until the new one
is complete; a file that fails to load is logged and the old snapshot stays
(the failed version is not retried until the file changes again).

Parsing and indexing a big config takes a while (about 150 ms for 2,000
instances, two thirds of it in ConfigStore.from_dict).  By default this
happens in the caller's (the reactor's) thread; queries arriving meanwhile
wait in the socket buffer and are answered from the new snapshot.  A
``runner`` can move the build elsewhere (it touches nothing shared; the swap
always happens in the reactor thread) -- a worker thread does not help in
CPython, the build holds the GIL.  The very first load is synchronous, so
the daemon never opens its port without a configuration.
"""

import os

from twisted.internet import defer, task
from twisted.logger import Logger

from ganeti import config
from ganeti.confd.snapshot import ConfigSnapshot

log = Logger()


def _file_signature(path):
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def build_snapshot(path):
    """Load config.data and index it (safe to run in a worker thread)."""
    return ConfigSnapshot(config.ConfigStore.load(path))


class ConfigWatcher(object):
    """Holds the current :class:`ConfigSnapshot` of ``path``.

    ``runner(f, *args)`` returns a Deferred of ``f(*args)``; e.g.
    ``lambda f, *a: threads.deferToThreadPool(reactor, pool, f, *a)``.
    """

    def __init__(self, path, clock, interval=1.0, runner=None):
        self.path = path
        self.interval = interval
        self._clock = clock
        self._runner = runner or defer.maybeDeferred
        self._lock = defer.DeferredLock()  # one load at a time
        self._loop = None
        self._attempted = False
        self._signature = None         # of the file behind self.snapshot
        self._failed_signature = None  # of the last file that failed
        self._missing_logged = False
        self.snapshot = None
        self.reloads = 0
        self.reload_failures = 0
        self.last_error = None

    # --- life cycle ---------------------------------------------------------

    def start(self):
        """Load (synchronously, once) and then poll every ``interval`` s."""
        if not self._attempted:
            self.load_now()
        if self._loop is None:
            self._loop = task.LoopingCall(self.check)
            self._loop.clock = self._clock
            self._loop.start(self.interval, now=False).addErrback(
                lambda f: log.failure("config poller stopped", f))

    def stop(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    # --- loading ------------------------------------------------------------

    def _stat(self):
        """The file's signature, or None (logged once) if it cannot be had."""
        try:
            signature = _file_signature(self.path)
        except OSError as err:
            if not self._missing_logged:
                self._missing_logged = True
                log.error("cannot stat configuration {path}: {error};"
                          " {what}", path=self.path, error=err.strerror,
                          what=self._keeping())
            return None
        self._missing_logged = False
        return signature

    def load_now(self):
        """Load synchronously if the file is there; True if loaded."""
        self._attempted = True
        signature = self._stat()
        if signature is None:
            return False
        try:
            snapshot = build_snapshot(self.path)
        except Exception as err:
            return self._failed(err, signature)
        return self._install(snapshot, signature)

    def check(self):
        """Reload if the file changed since the last (attempted) load.

        Returns a Deferred firing with True if a new snapshot was installed.
        """
        signature = self._stat()
        if signature is None or signature in (self._signature,
                                              self._failed_signature):
            return defer.succeed(False)
        return self._lock.run(self._load, signature)

    def reload(self):
        """Load the file now, changed or not; Deferred firing True if so."""
        try:
            signature = _file_signature(self.path)
        except OSError:
            signature = None
        return self._lock.run(self._load, signature)

    def _load(self, signature):
        self._attempted = True
        d = self._runner(build_snapshot, self.path)
        d.addCallbacks(lambda snapshot: self._install(snapshot, signature),
                       lambda failure: self._failed(failure.value, signature))
        return d

    def _keeping(self):
        if self.snapshot is None:
            return "no configuration loaded yet"
        return "still serving serial %d" % self.snapshot.serial

    def _failed(self, err, signature):
        self.reload_failures += 1
        self._failed_signature = signature
        self.last_error = str(err)
        log.error("failed to load configuration {path}: {error}; {what}",
                  path=self.path, error=err, what=self._keeping())
        return False

    def _install(self, snapshot, signature):
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
