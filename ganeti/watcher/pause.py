"""The watcher pause: ``<root>/var/lib/ganeti/watcher.pause``.

The file holds the time (whole seconds since the epoch, as Ganeti writes
it: ``"%d\\n"``) until which the watcher does nothing.  ``gnt-cluster
watcher pause`` asks the master, which writes it on itself and on every
online node (node daemon procedure ``set_watcher_pause``), so each node's
watcher reads its own copy and the pause survives a master restart or
failover.  A pause that has ended is ignored, and its file removed an hour
later (as Ganeti does); a file whose content is not a number is reported
and removed.
"""

import os

from twisted.internet import defer
from twisted.logger import Logger

from ganeti.utils.io import atomic_write

__all__ = ["REMOVE_AFTER", "pause_path", "read_pause", "write_pause",
           "active_pause", "MasterPause"]

log = Logger(namespace="ganeti.watcher")

#: Seconds after its end when an ended pause's file is removed.
REMOVE_AFTER = 3600


def pause_path(paths):
    return os.path.join(paths.data_dir, "watcher.pause")


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def read_pause(path, now, remove_after=REMOVE_AFTER):
    """``(until, problem)``: the end of the pause written in ``path``
    (None if there is none, or it ended) and what was wrong with the file
    (None if nothing).  Removes a file that is unusable, or whose pause
    ended more than ``remove_after`` seconds before ``now``."""
    try:
        with open(path, "rb") as f:
            raw = f.read(4096)
    except FileNotFoundError:
        return None, None
    except OSError as err:
        return None, "cannot read %s: %s" % (path, err.strerror or err)
    try:
        until = int(raw.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        _remove(path)
        return None, ("%s does not hold a time (%r); removed it"
                      % (path, raw[:40]))
    if now > until + remove_after:
        _remove(path)
        return None, None
    if now > until:
        return None, None
    return until, None


def write_pause(path, until):
    """Pause until ``until`` (seconds since the epoch), or end the pause
    (``until`` None) by removing the file."""
    if until is None:
        _remove(path)
        return
    os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
    atomic_write(path, b"%d\n" % int(until), mode=0o644)


def active_pause(until, now):
    """``until`` if that pause is still on at ``now``, else None."""
    if until is None or now > until:
        return None
    return until


class MasterPause(object):
    """The master daemon's pause: read from its file at start, and on each
    change written there first (``write(fn, *args)``: the master's file
    writer) and then handed to the other nodes (``distribute(until)``:
    Deferred of ``{node: problem}``), each of which gets its own copy."""

    def __init__(self, path, clock, write=None, distribute=None):
        self.path = path
        self.clock = clock
        self._write = write or defer.maybeDeferred
        self._distribute = distribute
        self._until = None

    def load(self):
        """Read the file (at start); a problem with it is logged."""
        until, problem = read_pause(self.path, self.clock.seconds())
        if problem:
            log.warn("Watcher pause: {problem}", problem=problem)
        self._until = until
        if until is not None:
            log.info("The watcher is paused until {until}", until=until)

    @property
    def until(self):
        """The end of the pause, None if the watcher is not paused."""
        return active_pause(self._until, self.clock.seconds())

    def set(self, until):
        """Pause until ``until`` (None: no pause); Deferred of ``until``
        once the master's file is written and the nodes were asked."""
        return defer.Deferred.fromCoroutine(self._set(until))

    async def _set(self, until):
        await self._write(write_pause, self.path, until)
        self._until = until
        if self._distribute is not None:
            try:
                problems = await self._distribute(until)
            except Exception as err:
                problems = {"(all nodes)": str(err)}
            for node, problem in sorted((problems or {}).items()):
                log.warn("Could not set the watcher pause on node {node}:"
                         " {problem}; its watcher keeps its old setting",
                         node=node, problem=problem)
        return until
