"""Locks for jobs: shared or exclusive locks, lock sets and the level manager.

Everything here is single-threaded and Deferred based: a job asks for a lock
and gets a Deferred that fires when the lock is granted.  Time (for timeouts)
comes from an injected ``IReactorTime`` so tests drive it with ``task.Clock``.

Error conventions, useful when building on top of this module:

* Misuse (acquiring a lock twice, releasing a lock one does not hold, taking
  levels out of order) raises :class:`LockUsageError` synchronously.  It is
  both a ``LockError`` and a ``ProgrammerError``.
* Run-time conditions arrive through the returned Deferred: a timeout fires
  ``False`` (:class:`SharedLock`) or ``None`` (:class:`LockSet`), a lock deleted
  before or while waiting errbacks with ``LockDeletedError``, a name missing
  from a set errbacks with ``LockError``.

Owners are any hashable value identifying the holder (a job, an opcode run).
"""

import collections

from twisted.internet import defer
from twisted.python.failure import Failure
from twisted.logger import Logger

from ganeti import errors

log = Logger()

#: Pass as ``names`` to mean "every lock in the set, including the set itself"
ALL_SET = None

MODE_SHARED = "shared"
MODE_EXCLUSIVE = "exclusive"

LEVEL_CLUSTER = 0
LEVEL_INSTANCE = 1
LEVEL_NODEGROUP = 2
LEVEL_NODE = 3
LEVEL_NODE_RES = 4
LEVEL_NETWORK = 5

LEVELS = [
    LEVEL_CLUSTER,
    LEVEL_INSTANCE,
    LEVEL_NODEGROUP,
    LEVEL_NODE,
    LEVEL_NODE_RES,
    LEVEL_NETWORK,
]

#: Levels whose set of names can change (everything but the cluster level)
LEVELS_MOD = [level for level in LEVELS if level != LEVEL_CLUSTER]

LEVEL_NAMES = {
    LEVEL_CLUSTER: "cluster",
    LEVEL_INSTANCE: "instance",
    LEVEL_NODEGROUP: "nodegroup",
    LEVEL_NODE: "node",
    LEVEL_NODE_RES: "node-res",
    LEVEL_NETWORK: "network",
}

#: The single lock at the cluster level (the "big ganeti lock")
BGL = "BGL"


def retry_timeouts(start=1.0, factor=1.5, cap=10.0, total=60.0):
    """Return the per-attempt timeouts used before a blocking acquire.

    Attempts start short so a job that cannot get everything quickly gives
    its partial locks back to others; they grow (by ``factor``, at most
    ``cap`` each) until ``total`` seconds were spent waiting.
    """
    if start <= 0 or factor < 1 or cap < start:
        raise errors.ProgrammerError("bad retry timeout parameters")
    result = []
    timeout = start
    while sum(result) < total:
        result.append(timeout)
        timeout = min(timeout * factor, cap)
    return tuple(result)


DEFAULT_RETRY_TIMEOUTS = retry_timeouts()


class LockUsageError(errors.LockError, errors.ProgrammerError):
    """A lock was used the wrong way (a bug in the caller, not a race)."""


def _default_clock():
    # Imported here: importing the reactor at module import would install
    # the default reactor before an application could choose another one.
    from twisted.internet import reactor
    return reactor


# Firing a waiter's Deferred runs the waiter's code, which often releases a
# lock and so fires the next waiter, and so on: without care the stack grows
# with every hand-over.  Wake-ups are therefore queued and fired by the
# outermost _fire call only, keeping the stack flat however long the chain.
_wakeups = collections.deque()
_draining = False


def _fire(deferred, result):
    global _draining
    _wakeups.append((deferred, result))
    if _draining:
        return
    _draining = True
    try:
        while _wakeups:
            d, res = _wakeups.popleft()
            if d.called:
                # Cancelled between being granted and being fired
                continue
            if isinstance(res, Failure):
                d.errback(res)
            else:
                d.callback(res)
    finally:
        _draining = False


def _as_names(names):
    """Accept one name or an iterable of names; return a sorted unique list."""
    if isinstance(names, str):
        names = [names]
    names = list(names)
    for name in names:
        if not isinstance(name, str):
            raise errors.ProgrammerError("lock names must be strings, not %r"
                                         % (name,))
    return sorted(set(names))


class _Waiter(object):
    """One pending request in a SharedLock's queue."""

    __slots__ = ("owner", "deferred", "timer", "group", "granted")

    def __init__(self, owner):
        self.owner = owner
        self.deferred = None
        self.timer = None
        self.group = None
        self.granted = False

    def stop_timer(self):
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None


class _Group(object):
    """Queue entry: one exclusive waiter, or shared waiters granted together."""

    __slots__ = ("shared", "waiters")

    def __init__(self, shared):
        self.shared = shared
        self.waiters = {}  # owner -> _Waiter, in arrival order


class SharedLock(object):
    """A shared or exclusive lock with one fair FIFO queue.

    The head of the queue is granted as soon as it is compatible with the
    current holders.  Shared requests arriving while an earlier shared group
    is still waiting join that group (they are granted together with it);
    once it is granted, new shared requests queue behind any exclusive
    waiter, so exclusive waiters are never starved.
    """

    def __init__(self, name, clock=None):
        self.name = name
        self._clock = clock if clock is not None else _default_clock()
        self._owners = {}  # owner -> shared (bool), in grant order
        self._shared = False  # mode of the current owners, if any
        self._queue = collections.deque()  # of _Group
        self._open_group = None  # latest shared group not granted yet
        self._waiting = {}  # owner -> _Waiter
        self._deleted = False
        #: called (without arguments) each time an owner takes the lock
        #: exclusively, or None
        self.on_exclusive = None

    def __repr__(self):
        return "<SharedLock %s>" % (self.name,)

    def _deleted_error(self):
        return errors.LockDeletedError("lock %s deleted" % (self.name,))

    def _compatible(self, shared):
        return not self._owners or (shared and self._shared)

    def _add_owner(self, owner, shared):
        self._owners[owner] = shared
        self._shared = shared
        if not shared and self.on_exclusive is not None:
            try:
                self.on_exclusive()
            except Exception:
                # an observer never breaks locking
                log.failure("a lock observer failed")

    # Acquire and release

    def acquire(self, owner, shared=False, timeout=None):
        """Ask for the lock; return a Deferred firing True, or False on timeout.

        ``timeout`` is in seconds; None waits forever and 0 (or less) only
        takes the lock if it can be had right now.  An uncontended request
        returns an already fired Deferred.
        """
        if self._deleted:
            return defer.fail(self._deleted_error())
        shared = bool(shared)
        if self.try_acquire(owner, shared):
            return defer.succeed(True)
        if timeout is not None and timeout <= 0:
            return defer.succeed(False)

        waiter = _Waiter(owner)
        waiter.deferred = defer.Deferred(lambda _d: self._cancel(waiter))
        if shared and self._open_group is not None:
            group = self._open_group
        else:
            group = _Group(shared)
            self._queue.append(group)
            if shared:
                self._open_group = group
        group.waiters[owner] = waiter
        waiter.group = group
        self._waiting[owner] = waiter
        if timeout is not None:
            waiter.timer = self._clock.callLater(timeout, self._time_out,
                                                 waiter)
        return waiter.deferred

    def try_acquire(self, owner, shared=False):
        """Take the lock if that is possible right now; return whether it was.

        Never queues.  A deleted lock is simply not available (False).
        """
        if owner in self._owners:
            raise LockUsageError("%r already owns lock %s" % (owner, self.name))
        if owner in self._waiting:
            raise LockUsageError("%r is already waiting for lock %s"
                                 % (owner, self.name))
        # Jumping the queue is only allowed when there is no queue
        if self._deleted or self._queue or not self._compatible(shared):
            return False
        self._add_owner(owner, bool(shared))
        return True

    def release(self, owner):
        """Release the lock held by ``owner`` and wake whoever is next."""
        if owner not in self._owners:
            raise LockUsageError("%r does not own lock %s" % (owner, self.name))
        del self._owners[owner]
        self._grant_pending()

    def _grant_pending(self):
        granted = []
        while self._queue and self._compatible(self._queue[0].shared):
            group = self._queue.popleft()
            if group is self._open_group:
                self._open_group = None
            for waiter in group.waiters.values():
                del self._waiting[waiter.owner]
                waiter.stop_timer()
                waiter.granted = True
                self._add_owner(waiter.owner, group.shared)
                granted.append(waiter.deferred)
        # State is consistent before any waiter's code runs
        for d in granted:
            _fire(d, True)

    def _remove_waiter(self, waiter):
        group = waiter.group
        del group.waiters[waiter.owner]
        del self._waiting[waiter.owner]
        waiter.stop_timer()
        if not group.waiters:
            self._queue.remove(group)
            if group is self._open_group:
                self._open_group = None
        # The removed request may have been what blocked the ones behind it
        self._grant_pending()

    def _time_out(self, waiter):
        waiter.timer = None
        self._remove_waiter(waiter)
        _fire(waiter.deferred, False)

    def _cancel(self, waiter):
        if waiter.granted:
            # Granted, but the Deferred was still waiting to be fired
            if self._owners.get(waiter.owner) is not None:
                self.release(waiter.owner)
        elif self._waiting.get(waiter.owner) is waiter:
            self._remove_waiter(waiter)

    # Deletion

    def delete(self, owner, timeout=None):
        """Delete the lock; return a Deferred firing True, or False on timeout.

        ``owner`` must hold the lock exclusively, or it is acquired
        exclusively first.  Everybody still waiting gets LockDeletedError, as
        does every later acquire.
        """
        if self._deleted:
            return defer.fail(self._deleted_error())
        held = self._owners.get(owner)
        if held is not None:
            if held:
                raise LockUsageError("%r holds lock %s shared and cannot delete"
                                     " it" % (owner, self.name))
            self._delete_now()
            return defer.succeed(True)

        def acquired(ok):
            if ok:
                self._delete_now()
            return ok
        return self.acquire(owner, shared=False,
                            timeout=timeout).addCallback(acquired)

    def _delete_now(self):
        self._deleted = True
        self._owners.clear()
        waiters = list(self._waiting.values())
        self._waiting.clear()
        self._queue.clear()
        self._open_group = None
        for waiter in waiters:
            waiter.stop_timer()
            _fire(waiter.deferred, Failure(self._deleted_error()))

    # Queries

    @property
    def deleted(self):
        return self._deleted

    def is_owned(self, owner, shared=None):
        """Whether ``owner`` holds the lock (in the given mode, if not None)."""
        mode = self._owners.get(owner)
        if mode is None:
            return False
        return shared is None or mode == bool(shared)

    def is_shared(self):
        return bool(self._owners) and self._shared

    def is_exclusive(self):
        """Whether somebody holds the lock exclusively now."""
        return bool(self._owners) and not self._shared

    def owner_count(self):
        return len(self._owners)

    def list_owners(self):
        return list(self._owners)

    def pending_count(self):
        return len(self._waiting)

    def get_info(self):
        """Describe the lock: name, mode, owners and queued requests."""
        if not self._owners:
            mode = None
        elif self._shared:
            mode = MODE_SHARED
        else:
            mode = MODE_EXCLUSIVE
        pending = [(MODE_SHARED if group.shared else MODE_EXCLUSIVE,
                    list(group.waiters))
                   for group in self._queue]
        return {
            "name": self.name,
            "mode": mode,
            "owners": list(self._owners),
            "pending": pending,
            "deleted": self._deleted,
        }


class _Token(object):
    """Private owner for the set-level lock while adding names."""

    def __init__(self, what):
        self.what = what

    def __repr__(self):
        return "<%s>" % (self.what,)


_NO_RESULT = object()


class _SetAcquire(object):
    """One LockSet.acquire call: takes locks one by one in sorted order.

    Written as an explicit loop rather than inlineCallbacks: it is the hot
    path, and it must keep going synchronously while locks come uncontended.
    """

    def __init__(self, lockset, owner, steps, all_set, shared, timeout):
        self.lockset = lockset
        self.owner = owner
        self.steps = steps  # [(name, SharedLock)]; name None is the set lock
        self.all_set = all_set
        self.shared = shared
        clock = lockset._clock
        self.clock = clock
        self.deadline = None if timeout is None else clock.seconds() + timeout
        self.index = -1  # step whose result is awaited
        self.acquired = {}  # name -> SharedLock
        self.set_lock_held = False
        self.pending = None
        self.in_loop = False
        self.sync_result = _NO_RESULT
        self.finished = False
        self.succeeded = False
        self.deferred = defer.Deferred(self._cancel)

    def start(self):
        self.lockset._busy.add(self.owner)
        self._advance(True)
        return self.deferred

    def _remaining(self):
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self.clock.seconds())

    def _on_result(self, result):
        self.pending = None
        if self.in_loop:
            self.sync_result = result
        else:
            self._advance(result)

    def _advance(self, result):
        while self._handle(result):
            self.index += 1
            if self.index >= len(self.steps):
                self._finish(set(self.acquired))
                return
            lock = self.steps[self.index][1]
            self.in_loop = True
            self.sync_result = _NO_RESULT
            try:
                d = lock.acquire(self.owner, self.shared, self._remaining())
                self.pending = d
                d.addBoth(self._on_result)
            except Exception:
                self.pending = None
                self.sync_result = Failure()
            finally:
                self.in_loop = False
            if self.sync_result is _NO_RESULT:
                return  # resumed by _on_result once the lock is granted
            result = self.sync_result

    def _handle(self, result):
        """Account for the result of the current step; False when done."""
        if self.finished:
            return False
        if self.index < 0:
            return True
        name, lock = self.steps[self.index]
        if isinstance(result, Failure):
            if self.all_set and result.check(errors.LockDeletedError):
                return True  # removed while we waited: no longer in the set
            self._rollback()
            if result.check(errors.LockDeletedError):
                result = Failure(errors.LockError(
                    "lock %s was removed from set %s while being acquired"
                    % (name, self.lockset.name)))
            self._finish(result)
            return False
        if not result:
            self._rollback()
            self._finish(None)
            return False
        if name is None:
            # Set lock held: no name can be added until we release, so the
            # list read now is the whole set.
            self.set_lock_held = True
            self.steps.extend(sorted(self.lockset._locks.items()))
        else:
            self.acquired[name] = lock
        return True

    def _rollback(self):
        for name in sorted(self.acquired, reverse=True):
            self.acquired[name].release(self.owner)
        self.acquired.clear()
        if self.set_lock_held:
            self.set_lock_held = False
            self.lockset._set_lock.release(self.owner)

    def _finish(self, result):
        self.finished = True
        self.lockset._busy.discard(self.owner)
        if self.acquired:
            self.lockset._owned[self.owner] = dict(self.acquired)
        self.succeeded = result is not None and not isinstance(result, Failure)
        _fire(self.deferred, result)

    def _cancel(self, _d):
        if self.finished:
            # Done, but our result was still waiting to be fired (see _fire):
            # the caller will see CancelledError, so it must not keep locks.
            if self.succeeded:
                self.lockset.release(self.owner)
            return
        self.finished = True  # results of the cancelled step are ignored
        if self.pending is not None:
            self.pending.cancel()
        self._rollback()
        self.lockset._busy.discard(self.owner)


class LockSet(object):
    """A named collection of SharedLocks, acquired in sorted name order.

    A set-level lock guards the list of names: ``add`` takes it exclusively,
    acquiring ``ALL_SET`` takes it (in the requested mode) before reading the
    list, so no name can slip in while somebody holds or takes the whole
    set.  Acquiring individual names does not touch it.
    """

    def __init__(self, names, name, clock=None):
        self.name = name
        self._clock = clock if clock is not None else _default_clock()
        self._set_lock = SharedLock("%s/[lockset]" % (name,), self._clock)
        self._locks = {}  # name -> SharedLock
        for lock_name in _as_names(names):
            self._locks[lock_name] = self._new_lock(lock_name)
        self._owned = {}  # owner -> {name: SharedLock}
        self._busy = set()  # owners with an acquire/add/remove under way
        #: called with a lock's name each time an owner takes it
        #: exclusively (ganeti.runstate: a job may act on that instance)
        self.exclusive_listeners = []

    def __repr__(self):
        return "<LockSet %s>" % (self.name,)

    def _new_lock(self, lock_name):
        lock = SharedLock("%s/%s" % (self.name, lock_name), self._clock)
        lock.on_exclusive = lambda: self._exclusive_taken(lock_name)
        return lock

    def _exclusive_taken(self, lock_name):
        for listener in list(self.exclusive_listeners):
            listener(lock_name)

    def held_exclusively(self, lock_name):
        """Whether somebody holds the lock ``lock_name`` exclusively now
        (False for a name not in the set)."""
        lock = self._locks.get(lock_name)
        return lock is not None and lock.is_exclusive()

    def _check_idle(self, owner):
        if owner in self._busy:
            raise LockUsageError("%r has a lock operation under way in set %s"
                                 % (owner, self.name))

    # Acquire and release

    def acquire(self, names, owner, shared=False, timeout=None):
        """Acquire ``names`` (or ALL_SET); return a Deferred.

        It fires with the set of names acquired, or None if ``timeout``
        seconds (for the whole call) passed first; in that case nothing stays
        acquired.  A name missing from the set, or removed while waiting,
        errbacks with LockError unless acquiring ALL_SET, which skips it.
        An owner acquires in a set only once until it releases.
        """
        self._check_idle(owner)
        if self.is_owned(owner):
            raise LockUsageError("%r already holds locks in set %s; acquire"
                                 " them in one call" % (owner, self.name))
        if names is ALL_SET:
            steps = [(None, self._set_lock)]
        else:
            wanted = _as_names(names)
            missing = [n for n in wanted if n not in self._locks]
            if missing:
                return defer.fail(errors.LockError(
                    "lock %s does not exist in set %s"
                    % (", ".join(missing), self.name)))
            steps = [(n, self._locks[n]) for n in wanted]
            if self._try_acquire_now(steps, owner, shared):
                return defer.succeed(set(wanted))
        op = _SetAcquire(self, owner, steps, names is ALL_SET, bool(shared),
                         timeout)
        return op.start()

    def _try_acquire_now(self, steps, owner, shared):
        # Fast path for the common uncontended case: take every lock at once
        # or none (nobody is queued on those we took, so giving them back
        # wakes nobody).
        taken = []
        for lock_name, lock in steps:
            if not lock.try_acquire(owner, shared):
                for held in reversed(taken):
                    held.release(owner)
                return False
            taken.append(lock)
        if steps:
            self._owned[owner] = dict(steps)
        return True

    def acquire_opportunistic(self, names, owner, shared=False):
        """Take those of ``names`` (or of the whole set) that are free now.

        Never waits and never takes the set-level lock: with ALL_SET it
        tries every name in the set at this moment, one by one.  A lock
        that is held in a conflicting mode, or that others already queue
        for, is skipped.  Returns the set of names taken (possibly empty:
        then ``owner`` holds nothing in the set).
        """
        self._check_idle(owner)
        if self.is_owned(owner):
            raise LockUsageError("%r already holds locks in set %s; acquire"
                                 " them in one call" % (owner, self.name))
        if names is ALL_SET:
            wanted = sorted(self._locks)
        else:
            wanted = [n for n in _as_names(names) if n in self._locks]
        taken = {}
        for lock_name in wanted:
            lock = self._locks[lock_name]
            if lock.try_acquire(owner, shared):
                taken[lock_name] = lock
        if taken:
            self._owned[owner] = taken
        return set(taken)

    def acquire_with_retries(self, names, owner, shared=False, timeouts=None):
        """Acquire with growing timeouts, giving everything back in between.

        Each attempt uses the next timeout of ``timeouts`` (default
        DEFAULT_RETRY_TIMEOUTS); a failed attempt releases what it took, so
        jobs waiting for part of our locks can run meanwhile.  After the last
        one, a blocking acquire.  Fires with the set of names acquired.
        """
        self._check_idle(owner)
        if self.is_owned(owner):
            raise LockUsageError("%r already holds locks in set %s; acquire"
                                 " them in one call" % (owner, self.name))
        if timeouts is None:
            timeouts = DEFAULT_RETRY_TIMEOUTS
        return self._acquire_with_retries(names, owner, shared, list(timeouts))

    @defer.inlineCallbacks
    def _acquire_with_retries(self, names, owner, shared, timeouts):
        for attempt, timeout in enumerate(timeouts):
            result = yield self.acquire(names, owner, shared, timeout)
            if result is not None:
                return result
            log.debug("{owner!r}: attempt {attempt} at set {lockset} timed out"
                      " after {timeout}s", owner=owner, attempt=attempt + 1,
                      lockset=self.name, timeout=timeout)
        log.info("{owner!r}: giving up retries at set {lockset}, waiting for"
                 " the locks", owner=owner, lockset=self.name)
        result = yield self.acquire(names, owner, shared, None)
        return result

    def release(self, owner, names=None):
        """Release the given names, or everything ``owner`` holds in the set.

        Holding the whole set ends with any release, even of some names only.
        """
        self._check_idle(owner)
        owned = self._owned.get(owner, {})
        holds_set = self._set_lock.is_owned(owner)
        if names is None:
            to_release = sorted(owned)
            if not to_release and not holds_set:
                raise LockUsageError("%r holds no lock in set %s"
                                     % (owner, self.name))
        else:
            to_release = _as_names(names)
            not_owned = [n for n in to_release if n not in owned]
            if not_owned:
                raise LockUsageError("%r does not hold %s in set %s"
                                     % (owner, ", ".join(not_owned), self.name))
        if holds_set:
            self._set_lock.release(owner)
        for lock_name in to_release:
            owned.pop(lock_name).release(owner)
        if not owned:
            self._owned.pop(owner, None)

    # Changing the set

    def add(self, names, owner=None, shared=False):
        """Add locks; return a Deferred firing with the sorted names added.

        Waits while somebody holds or is taking the whole set.  With an
        ``owner``, the new locks are created held by it (shared or not); it
        must then hold nothing in the set or hold the whole set exclusively.
        An existing name errbacks with LockError and nothing is added.
        """
        names = _as_names(names)
        if owner is not None:
            self._check_idle(owner)
            if (self.is_owned(owner)
                    and not self._set_lock.is_owned(owner, shared=False)):
                raise LockUsageError(
                    "%r cannot add to set %s while holding part of it or"
                    " holding it shared" % (owner, self.name))
            if self._set_lock.is_owned(owner, shared=False):
                return defer.maybeDeferred(self._add_now, names, owner, shared)
        token = _Token("add to %s by %r" % (self.name, owner))
        if owner is not None:
            self._busy.add(owner)

        def locked(_):
            try:
                return self._add_now(names, owner, shared)
            finally:
                self._set_lock.release(token)

        def done(result):
            self._busy.discard(owner)
            return result
        return self._set_lock.acquire(token).addCallback(locked).addBoth(done)

    def _add_now(self, names, owner, shared):
        existing = [n for n in names if n in self._locks]
        if existing:
            raise errors.LockError("lock %s already exists in set %s"
                                   % (", ".join(existing), self.name))
        for lock_name in names:
            lock = self._new_lock(lock_name)
            self._locks[lock_name] = lock
            if owner is not None:
                lock.acquire(owner, shared)  # new, so granted at once
                self._owned.setdefault(owner, {})[lock_name] = lock
        return names

    def remove(self, names, owner):
        """Delete locks; return a Deferred firing with the names removed.

        Names held exclusively by ``owner`` go at once.  Others are acquired
        exclusively (one at a time) and deleted, which is only allowed when
        the owner holds nothing else in the set: waiting while holding locks
        out of order could deadlock.  Missing names are skipped.
        """
        names = _as_names(names)
        self._check_idle(owner)
        owned = self._owned.get(owner, {})
        for lock_name in names:
            if lock_name in owned and not owned[lock_name].is_owned(
                    owner, shared=False):
                raise LockUsageError("%r holds %s in set %s shared and cannot"
                                     " remove it" % (owner, lock_name,
                                                     self.name))
        not_owned = [n for n in names if n in self._locks and n not in owned]
        if not_owned and self.is_owned(owner):
            raise LockUsageError("%r must hold %s in set %s to remove them, as"
                                 " it already holds other locks there"
                                 % (owner, ", ".join(not_owned), self.name))
        self._busy.add(owner)
        d = self._remove(names, owner)

        def done(result):
            self._busy.discard(owner)
            return result
        return d.addBoth(done)

    @defer.inlineCallbacks
    def _remove(self, names, owner):
        removed = []
        for lock_name in names:
            lock = self._locks.get(lock_name)
            if lock is None:
                continue
            try:
                yield lock.delete(owner)
            except errors.LockDeletedError:
                continue  # somebody else removed it first
            if self._locks.get(lock_name) is lock:
                del self._locks[lock_name]
            owned = self._owned.get(owner)
            if owned is not None:
                owned.pop(lock_name, None)
                if not owned:
                    del self._owned[owner]
            removed.append(lock_name)
        return removed

    # Queries

    def list_names(self):
        return sorted(self._locks)

    def list_owned(self, owner):
        return set(self._owned.get(owner, ()))

    # The queries below report completed acquisitions: while an acquire call
    # is under way its owner holds some locks but owns nothing yet.

    def is_owned(self, owner):
        """Whether ``owner`` holds any lock in the set (or the set itself)."""
        return owner in self._owned or self.owns_all(owner)

    def owns_all(self, owner, shared=None):
        """Whether ``owner`` acquired the whole set (ALL_SET) and holds it."""
        return (owner not in self._busy
                and self._set_lock.is_owned(owner, shared))

    def get_info(self):
        """State of the set-level lock and of every lock, sorted by name."""
        return ([self._set_lock.get_info()]
                + [self._locks[n].get_info() for n in sorted(self._locks)])


class LockManager(object):
    """Lock sets for every level, enforcing Ganeti's acquisition rules.

    An owner takes levels in increasing order, each level in one call, and
    must hold the BGL (cluster level) before taking any other level.
    """

    def __init__(self, node_uuids=(), nodegroup_uuids=(), instance_names=(),
                 network_uuids=(), clock=None):
        clock = clock if clock is not None else _default_clock()
        self._clock = clock
        #: called ``(level name, seconds)`` after an acquisition that had
        #: to wait, or None (:class:`ganeti.metrics.master.MasterMetrics`)
        self.wait_observer = None
        initial = {
            LEVEL_CLUSTER: [BGL],
            LEVEL_INSTANCE: instance_names,
            LEVEL_NODEGROUP: nodegroup_uuids,
            LEVEL_NODE: node_uuids,
            LEVEL_NODE_RES: node_uuids,
            LEVEL_NETWORK: network_uuids,
        }
        self._sets = dict((level, LockSet(initial[level], LEVEL_NAMES[level],
                                          clock))
                          for level in LEVELS)

    def lockset(self, level):
        self._check_level(level)
        return self._sets[level]

    def _check_level(self, level, modifiable=False):
        if level not in self._sets:
            raise LockUsageError("unknown lock level %r" % (level,))
        if modifiable and level not in LEVELS_MOD:
            raise LockUsageError("lock level %s cannot be modified"
                                 % LEVEL_NAMES[level])

    def _higher_owned(self, level, owner):
        return [lvl for lvl in LEVELS
                if lvl > level and self._sets[lvl].is_owned(owner)]

    def _check_bgl(self, level, owner, what):
        if level != LEVEL_CLUSTER and not self._sets[LEVEL_CLUSTER].is_owned(
                owner):
            raise LockUsageError("%r must hold the BGL before %s %s locks"
                                 % (owner, what, LEVEL_NAMES[level]))

    def _check_order(self, level, owner, what):
        higher = self._higher_owned(level, owner)
        if higher:
            raise LockUsageError(
                "%r cannot %s %s locks while holding %s locks (levels are"
                " acquired in order)"
                % (owner, what, LEVEL_NAMES[level],
                   ", ".join(LEVEL_NAMES[lvl] for lvl in higher)))

    def _check_acquire(self, level, owner):
        self._check_level(level)
        for lockset in self._sets.values():
            lockset._check_idle(owner)
        self._check_bgl(level, owner, "acquiring")
        if self._sets[level].is_owned(owner):
            raise LockUsageError("%r already holds %s locks; a level is"
                                 " acquired in one call"
                                 % (owner, LEVEL_NAMES[level]))
        self._check_order(level, owner, "acquire")

    def acquire(self, level, names, owner, shared=False, timeout=None):
        """Acquire ``names`` (or ALL_SET) at ``level``; see LockSet.acquire."""
        self._check_acquire(level, owner)
        return self._observed(level, self._sets[level].acquire(
            names, owner, shared, timeout))

    def _observed(self, level, d):
        """``d``, telling the wait observer how long it waited (an
        acquisition granted at once is no wait)."""
        observer = self.wait_observer
        if observer is None or d.called:
            return d
        started = self._clock.seconds()

        def done(result):
            observer(LEVEL_NAMES[level], self._clock.seconds() - started)
            return result
        return d.addBoth(done)

    def acquire_opportunistic(self, level, names, owner, shared=False):
        """Take, without waiting, those of ``names`` (or ALL_SET) at
        ``level`` that are free right now; the set of names taken.

        See LockSet.acquire_opportunistic.  The usual rules apply (BGL
        held, levels in order, a level in one call).
        """
        self._check_acquire(level, owner)
        return self._sets[level].acquire_opportunistic(names, owner, shared)

    def acquire_with_retries(self, level, names, owner, shared=False,
                             timeouts=None):
        """As acquire, retrying with growing timeouts then blocking.

        See LockSet.acquire_with_retries.
        """
        self._check_acquire(level, owner)
        return self._observed(level, self._sets[level].acquire_with_retries(
            names, owner, shared, timeouts))

    def release(self, level, owner, names=None):
        """Release (some of) ``owner``'s locks at ``level``.

        Levels may be released in any order, except that the BGL goes last.
        """
        self._check_level(level)
        if level == LEVEL_CLUSTER:
            others = [LEVEL_NAMES[lvl] for lvl in LEVELS_MOD
                      if self._sets[lvl].is_owned(owner)
                      or owner in self._sets[lvl]._busy]
            if others:
                raise LockUsageError("%r cannot release the BGL while holding"
                                     " %s locks" % (owner, ", ".join(others)))
        self._sets[level].release(owner, names)

    def release_all(self, owner):
        """Release everything ``owner`` holds, highest level first."""
        for level in reversed(LEVELS):
            if self._sets[level].is_owned(owner):
                self._sets[level].release(owner)

    def add(self, level, names, owner=None, shared=False):
        """Add locks at a modifiable level; see LockSet.add.

        With an ``owner`` the new locks are acquired by it, so the usual
        rules apply (BGL held, no higher level held).
        """
        self._check_level(level, modifiable=True)
        if owner is not None:
            self._check_bgl(level, owner, "adding")
            self._check_order(level, owner, "add")
        return self._sets[level].add(names, owner, shared)

    def remove(self, level, names, owner):
        """Remove locks at a modifiable level; see LockSet.remove."""
        self._check_level(level, modifiable=True)
        self._check_bgl(level, owner, "removing")
        if not self._sets[level].is_owned(owner):
            # Removing means acquiring them, so the level order applies
            self._check_order(level, owner, "remove")
        return self._sets[level].remove(names, owner)

    def list_owned(self, level, owner):
        self._check_level(level)
        return self._sets[level].list_owned(owner)

    def is_owned(self, level, owner):
        self._check_level(level)
        return self._sets[level].is_owned(owner)

    def owned_levels(self, owner):
        return [lvl for lvl in LEVELS if self._sets[lvl].is_owned(owner)]

    def query_locks(self):
        """Every lock's state (level, name, mode, owners, pending), in order."""
        result = []
        for level in LEVELS:
            for info in self._sets[level].get_info():
                info["level"] = LEVEL_NAMES[level]
                result.append(info)
        return result

    get_info = query_locks
