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

from ganeti.utils.io import atomic_write

__all__ = ["REMOVE_AFTER", "pause_path", "read_pause", "write_pause",
           "active_pause"]

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
