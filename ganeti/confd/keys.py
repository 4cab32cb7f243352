"""The cluster HMAC key as the daemons using it see it: re-read on change.

The key signs confd's messages and the nodes' self-diagnosis reports.  A
key renewal (``gnt-cluster renew-crypto --new-confd-hmac-key``,
docs/crypto.rst) replaces ``hmac.key`` in three steps
(:mod:`ganeti.backend.rotation`), and the daemons follow the files:

* ``hmac.key`` is the key to sign with (and to accept);
* ``hmac.key.new`` (staged) and ``hmac.key.old`` (the key just replaced)
  are accepted too, so that a message signed by a process that has not
  followed yet is still good.

:class:`HmacKeys` looks at the files (``stat``) when asked, at most once
every ``interval`` seconds of its clock, so a busy confd pays one clock
reading per datagram and a few ``stat`` calls a second.  A key file that
becomes unreadable or empty keeps the keys known before it (logged): a
node being removed from the cluster must not start signing with nothing.
"""

import os

from twisted.logger import Logger

from ganeti.backend import rotation

__all__ = ["HmacKeys", "FixedKeys", "as_keys", "CHECK_INTERVAL"]

log = Logger()

#: Seconds between looks at the key files: a renewal waits a little longer
#: than this between its steps, so every daemon has followed.
CHECK_INTERVAL = 1.0


def _stamp(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


class FixedKeys(object):
    """One key, never re-read (tests, and callers given a key)."""

    def __init__(self, key):
        self._key = key.encode("utf-8") if isinstance(key, str) else key

    def signing(self):
        return self._key

    def accepted(self):
        return (self._key,)


class HmacKeys(object):
    """The keys of ``path`` (``hmac.key``) and its companions."""

    def __init__(self, path, clock, interval=CHECK_INTERVAL):
        self.path = path
        self.clock = clock
        self.interval = interval
        self._checked = None
        self._stamps = None
        self._signing = None
        self._accepted = ()
        self.reloads = 0
        self._refresh()

    def signing(self):
        """The key to sign with."""
        self._maybe_refresh()
        return self._signing

    def accepted(self):
        """The keys a signature may be made with, the signing key first."""
        self._maybe_refresh()
        return self._accepted

    def _maybe_refresh(self):
        if self.clock.seconds() - self._checked >= self.interval:
            self._refresh()

    def _refresh(self):
        self._checked = self.clock.seconds()
        paths = (self.path, self.path + rotation.STAGED,
                 self.path + rotation.PREVIOUS)
        stamps = tuple(_stamp(p) for p in paths)
        if stamps == self._stamps:
            return
        current, staged, previous = (_read(p) if s is not None else None
                                     for p, s in zip(paths, stamps))
        if not current:
            if self._signing is None:
                raise OSError("the cluster HMAC key %s is missing or empty"
                              % self.path)
            if self._stamps is None or self._stamps[0] is not None:
                log.warn("The cluster HMAC key {path} is gone or empty;"
                         " keeping the key read before", path=self.path)
            self._stamps = (None,) + stamps[1:]
            return
        accepted = [current]
        for key in (staged, previous):
            if key and key not in accepted:
                accepted.append(key)
        if self._signing is not None and (current != self._signing or
                                          tuple(accepted) != self._accepted):
            log.info("Cluster HMAC key files changed: signing with {which}"
                     " key, accepting {count}",
                     which="the same" if current == self._signing
                     else "a new", count=len(accepted))
        self._stamps = stamps
        self._signing = current
        self._accepted = tuple(accepted)
        self.reloads += 1


def as_keys(value):
    """``value`` if it has keys (HmacKeys, FixedKeys), else FixedKeys of
    the key bytes it is."""
    if hasattr(value, "accepted"):
        return value
    return FixedKeys(value)
