"""User-id pool: uids reserved for running processes (e.g. KVM instances).

The pool is a cluster-wide parameter stored in the Cluster object as
``uid_pool``, a list of inclusive ``(low, high)`` pairs (a single uid is
``(uid, uid)``).  Its text form is ``N`` or ``LOW-HIGH`` items joined by a
separator: ``","`` on the command line (``"1000-1999,3000"``) and ``"\\n"`` in
the ssconf file ``ssconf_uid_pool``.

Pool values returned by this module are *normalised*: a new list of tuples,
sorted, with overlapping and adjacent ranges merged, so that one set of uids
has exactly one representation (``"1000-1999,2000"`` parses to
``[(1000, 2000)]``).  Inputs may be lists or tuples of lists or tuples (as
after a JSON round trip) and need not be normalised; they are never modified.

The second half of the module hands out unused uids on a node.  A uid is free
when nobody holds the lock on ``<lock_dir>/<uid>`` and no process runs with it
as real, effective, saved or filesystem uid.  The locks are ``flock(2)`` locks:
they belong to an open file description, not to a process, so two requests in
the same daemon exclude each other (``lockf``/``fcntl`` record locks would
not).  Everything here is plain blocking file IO meant to be quick: no threads.
"""

import fcntl
import os
import random
import re

from twisted.internet import defer
from twisted.logger import Logger

from ganeti import errors

__all__ = [
    "UID_MIN", "UID_MAX",
    "parse_uid_pool", "format_uid_pool", "check_uid_pool",
    "normalize_uid_pool", "add_to_uid_pool", "remove_from_uid_pool",
    "expand_uid_pool", "used_uids",
    "LockedUid", "UidAllocator",
    "request_unused_uid", "release_uid", "exec_with_unused_uid",
]

_log = Logger()

#: Smallest uid allowed in a pool.
UID_MIN = 0
#: Largest uid allowed in a pool: uid_t is 32 bits and (uid_t)-1 = 2**32-1
#: means "no change" to setresuid(2) and friends, so it is never a real uid.
UID_MAX = 2 ** 32 - 2

_RANGE_RE = re.compile(r"^(-?\d+)(?:\s*-\s*(-?\d+))?$", re.ASCII)
_NUMBER_RE = re.compile(r"^-?\d+$", re.ASCII)

# How often to retry a lock file that another node daemon unlinked while we
# were locking it before giving up on that uid for this request.
_LOCK_RETRIES = 10


# ---------------------------------------------------------------------------
# Pool values

def _range_problem(low, high):
    """Why ``(low, high)`` (ints) is not a valid uid range, or None."""
    if low < UID_MIN or high < UID_MIN:
        return "uids must not be negative"
    if low > high:
        return "lower bound %d is greater than upper bound %d" % (low, high)
    if high > UID_MAX:
        return "uid %d is above the maximum %d" % (high, UID_MAX)
    return None


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _merge(ranges):
    """Sort and merge overlapping/adjacent ``(low, high)`` ranges."""
    result = []
    for low, high in sorted(ranges):
        if result and low <= result[-1][1] + 1:
            if high > result[-1][1]:
                result[-1] = (result[-1][0], high)
        else:
            result.append((low, high))
    return result


def _fmt_range(low, high):
    return "%d" % low if low == high else "%d-%d" % (low, high)


def parse_uid_pool(text, separator=","):
    """Parse the text form of a uid pool into a normalised list of pairs.

    Items are separated by ``separator`` (``","`` on the command line,
    ``"\\n"`` for ssconf); each item is ``N`` or ``LOW-HIGH``.  Whitespace
    around items and around the dash is ignored, and so are empty items, so
    ``""`` and a trailing newline are fine.  Raises errors.ParseError naming
    the first bad item and why it is bad.
    """
    if not isinstance(text, str):
        raise errors.ParseError("uid pool must be a string, not %r" % (text,))
    ranges = []
    for raw in text.split(separator):
        item = raw.strip()
        if not item:
            continue
        match = _RANGE_RE.match(item)
        if match is None:
            parts = [p.strip() for p in item.split("-")]
            bad = [p for p in parts if p and not _NUMBER_RE.match(p)]
            if bad and len(parts) <= 2:
                reason = "%r is not a number" % bad[0]
            else:
                reason = "expected a uid N or a range LOW-HIGH"
            raise errors.ParseError("invalid uid pool item %r: %s"
                                    % (item, reason))
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        problem = _range_problem(low, high)
        if problem:
            raise errors.ParseError("invalid uid pool item %r: %s"
                                    % (item, problem))
        ranges.append((low, high))
    return _merge(ranges)


def check_uid_pool(pool):
    """Validate a pool value; raise errors.ParameterError("uid_pool", why).

    A pool is a list or tuple of ``[low, high]`` pairs of ints with
    ``UID_MIN <= low <= high <= UID_MAX``.  Overlaps are allowed (the
    functions here normalise them away).
    """
    if not isinstance(pool, (list, tuple)):
        raise errors.ParameterError(
            "uid_pool", "must be a list of [low, high] pairs, not %r" % (pool,))
    for item in pool:
        if (not isinstance(item, (list, tuple)) or len(item) != 2
                or not _is_int(item[0]) or not _is_int(item[1])):
            raise errors.ParameterError(
                "uid_pool", "%r is not a pair of integers [low, high]"
                % (item,))
        problem = _range_problem(item[0], item[1])
        if problem:
            raise errors.ParameterError(
                "uid_pool", "invalid range %s: %s"
                % (_fmt_range(item[0], item[1]), problem))


def normalize_uid_pool(pool):
    """Validated, sorted, merged copy of ``pool`` as a list of tuples."""
    check_uid_pool(pool)
    return _merge((low, high) for low, high in pool)


def format_uid_pool(pool, separator=", "):
    """Text form of ``pool`` (in the given order): ``N`` or ``LOW-HIGH``.

    The result is accepted by :func:`parse_uid_pool` with the same separator
    (surrounding whitespace is ignored, so ``", "`` parses with ``","``).
    """
    check_uid_pool(pool)
    return separator.join(_fmt_range(low, high) for low, high in pool)


def add_to_uid_pool(pool, additions):
    """New normalised pool with the uids of ``additions`` added.

    Adding uids already in the pool is not an error.
    """
    check_uid_pool(additions)
    return _merge(list(normalize_uid_pool(pool)) +
                  [(low, high) for low, high in additions])


def remove_from_uid_pool(pool, removals):
    """New normalised pool without the uids of ``removals``.

    Ranges are split as needed (removing 1500 from 1000-1999 leaves
    1000-1499 and 1501-1999).  Every uid to remove must be in the pool:
    otherwise errors.ParameterError("uid_pool", ...) names the first removal
    that is not entirely in it, and nothing is removed.
    """
    current = normalize_uid_pool(pool)
    check_uid_pool(removals)
    for low, high in removals:
        # ``current`` is merged, so a covered range lies within one element.
        if not any(plow <= low and high <= phigh for plow, phigh in current):
            raise errors.ParameterError(
                "uid_pool", "cannot remove %s: not (entirely) in the uid pool"
                % _fmt_range(low, high))
    result = []
    cuts = _merge((low, high) for low, high in removals)
    for plow, phigh in current:
        start = plow
        for rlow, rhigh in cuts:
            if rhigh < start or rlow > phigh:
                continue
            if rlow > start:
                result.append((start, rlow - 1))
            start = rhigh + 1
        if start <= phigh:
            result.append((start, phigh))
    return result


def expand_uid_pool(pool):
    """Sorted list of every uid in ``pool`` (no duplicates)."""
    uids = []
    for low, high in normalize_uid_pool(pool):
        uids.extend(range(low, high + 1))
    return uids


# ---------------------------------------------------------------------------
# Node side: handing out unused uids

def used_uids(proc_dir="/proc"):
    """Set of uids some process runs with, read from ``<proc_dir>/*/status``.

    All four ``Uid:`` fields (real, effective, saved, filesystem) count.
    Processes that exit while we read are skipped.
    """
    uids = set()
    for name in os.listdir(proc_dir):
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc_dir, name, "status"), "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        uids.update(int(f) for f in line.split()[1:])
                        break
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
            continue  # the process went away
    return uids


class LockedUid:
    """A uid handed out by a request, with the open, flock'ed lock file.

    The lock stops other requests from handing out the same uid until the
    process using it runs (after which the process itself shows the uid as
    used).  :meth:`unlock` releases the lock and keeps the lock file.
    """

    def __init__(self, uid, fd, path):
        self.uid = uid
        self.path = path
        self._fd = fd

    @property
    def locked(self):
        return self._fd is not None

    def as_int(self):
        return self.uid

    __int__ = as_int

    def unlock(self):
        """Release the lock (idempotent); the lock file stays."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor drops the flock

    def __repr__(self):
        return "<LockedUid %d%s>" % (self.uid, "" if self.locked
                                     else " (unlocked)")


def _lock_file(path, create):
    """Open and flock ``path`` exclusively without blocking.

    Returns the fd; None if someone else holds the lock (or, with
    ``create=False``, if the file does not exist).  Retries when the file was
    unlinked or replaced between our open and our lock, so the lock we return
    is always on the file currently at ``path``.
    """
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
    if create:
        flags |= os.O_CREAT
    for _ in range(_LOCK_RETRIES):
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            if create:
                raise  # the lock directory is missing
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fst = os.fstat(fd)
            try:
                st = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                st = None
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if st is not None and (st.st_dev, st.st_ino) == (fst.st_dev,
                                                         fst.st_ino):
            return fd
        os.close(fd)
    return None


class UidAllocator:
    """Hands out unused uids using lock files in ``lock_dir``.

    ``lock_dir`` must exist (``<root>/var/run/ganeti/uid-pool`` on a node).
    ``proc_dir`` is where processes are looked up; ``rng`` (a
    ``random.Random``) orders the candidates.
    """

    def __init__(self, lock_dir, proc_dir="/proc", rng=None):
        self.lock_dir = lock_dir
        self.proc_dir = proc_dir
        self._rng = rng if rng is not None else random.SystemRandom()

    def _path(self, uid):
        if not _is_int(uid) or _range_problem(uid, uid):
            raise errors.ParameterError("uid_pool", "invalid uid %r" % (uid,))
        return os.path.join(self.lock_dir, "%d" % uid)

    def request(self, all_uids):
        """Lock and return a :class:`LockedUid` for a random unused uid.

        ``all_uids`` is an iterable of candidate uids (see
        :func:`expand_uid_pool`).  Raises errors.ReservationError when every
        candidate is locked or used by a process.
        """
        candidates = list(all_uids)
        for uid in candidates:
            if not _is_int(uid) or _range_problem(uid, uid):
                raise errors.ParameterError("uid_pool",
                                            "invalid uid %r" % (uid,))
        self._rng.shuffle(candidates)
        # Uids seen in use are skipped without locking them (a uid in use
        # a moment ago is not worth trying); a uid that looked free must be
        # checked again *after* locking it, as another allocator may have
        # started a process with it and unlocked in the meantime.
        known_used = None
        for uid in candidates:
            if known_used is not None and uid in known_used:
                continue
            path = os.path.join(self.lock_dir, "%d" % uid)
            fd = _lock_file(path, create=True)
            if fd is None:
                continue
            try:
                known_used = used_uids(self.proc_dir)
            except BaseException:
                os.close(fd)
                raise
            if uid not in known_used:
                return LockedUid(uid, fd, path)
            os.close(fd)
        raise errors.ReservationError(
            "no free uid in pool (%d candidate uids, all locked or in use)"
            % len(candidates))

    def release(self, uid):
        """Give ``uid`` (an int or a :class:`LockedUid`) back: remove its file.

        Processes are not checked.  A LockedUid that is still locked is
        unlocked after its file is removed.  For a bare uid the lock is taken
        first, so a uid that another request holds right now is not pulled
        from under it: that raises errors.LockError.  Releasing a uid without
        a lock file does nothing.
        """
        if isinstance(uid, LockedUid):
            if uid.locked:
                try:
                    os.unlink(self._path(uid.uid))
                except FileNotFoundError:
                    pass
                finally:
                    uid.unlock()
                return
            uid = uid.uid
        path = self._path(uid)
        fd = _lock_file(path, create=False)
        if fd is None:
            if not os.path.lexists(path):
                return
            raise errors.LockError(
                "cannot release uid %d: it is being handed out right now"
                % uid)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)

    def exec_with_unused_uid(self, fn, all_uids, *args, **kwargs):
        """Call ``fn(uid, *args, **kwargs)`` with a freshly locked unused uid.

        If ``fn`` raises, the uid is released and the error re-raised; if it
        returns, the lock is dropped (the process now runs with the uid) and
        the file kept.  If ``fn`` returns a Deferred the same happens when it
        fires, and a Deferred with its result is returned; the lock is held
        until then.  A synchronous ``fn`` gives a synchronous call.
        """
        locked = self.request(all_uids)
        try:
            result = fn(locked.uid, *args, **kwargs)
        except BaseException:
            self._release_quietly(locked)
            raise
        if not isinstance(result, defer.Deferred):
            locked.unlock()
            return result

        def succeeded(value):
            locked.unlock()
            return value

        def failed(failure):
            self._release_quietly(locked)
            return failure

        return result.addCallbacks(succeeded, failed)

    def _release_quietly(self, locked):
        # Called while an error propagates: never replace that error.
        try:
            self.release(locked)
        except Exception:
            _log.failure("Could not release uid {uid}", uid=locked.uid)
            locked.unlock()


def request_unused_uid(all_uids, lock_dir, proc_dir="/proc"):
    """Module-level form of :meth:`UidAllocator.request`."""
    return UidAllocator(lock_dir, proc_dir).request(all_uids)


def release_uid(uid, lock_dir):
    """Module-level form of :meth:`UidAllocator.release`."""
    UidAllocator(lock_dir).release(uid)


def exec_with_unused_uid(fn, all_uids, lock_dir, *args, **kwargs):
    """Module-level form of :meth:`UidAllocator.exec_with_unused_uid`
    (processes are looked up in ``/proc``)."""
    return UidAllocator(lock_dir).exec_with_unused_uid(fn, all_uids,
                                                       *args, **kwargs)
