"""Tests for ganeti.locking, driven by a fake clock (nothing sleeps)."""

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import errors
from ganeti import locking
from ganeti.locking import (ALL_SET, LEVEL_CLUSTER, LEVEL_INSTANCE,
                            LEVEL_NODE, LEVEL_NODE_RES, LEVEL_NODEGROUP,
                            LEVEL_NETWORK, BGL)

from tests.fakes import ClockTestCase


class LockTestCase(ClockTestCase):
    """Each test has a Clock and leaves no timer behind."""

    def result(self, d):
        """The result of an already fired Deferred."""
        return self.successResultOf(d)

    def assertPending(self, d):
        self.assertNoResult(d)


class ModuleTests(unittest.TestCase):

    def test_levels(self):
        self.assertEqual(locking.LEVELS, [0, 1, 2, 3, 4, 5])
        self.assertEqual(
            (LEVEL_CLUSTER, LEVEL_INSTANCE, LEVEL_NODEGROUP, LEVEL_NODE,
             LEVEL_NODE_RES, LEVEL_NETWORK), (0, 1, 2, 3, 4, 5))
        self.assertEqual(locking.LEVEL_NAMES, {
            0: "cluster", 1: "instance", 2: "nodegroup", 3: "node",
            4: "node-res", 5: "network"})
        self.assertNotIn(LEVEL_CLUSTER, locking.LEVELS_MOD)

    def test_retry_timeouts(self):
        series = locking.retry_timeouts(start=1.0, factor=2.0, cap=5.0,
                                        total=20.0)
        self.assertEqual(series, (1.0, 2.0, 4.0, 5.0, 5.0, 5.0))
        default = locking.DEFAULT_RETRY_TIMEOUTS
        self.assertEqual(default[0], 1.0)
        self.assertEqual(list(default), sorted(default))
        self.assertGreaterEqual(sum(default), 60.0)

    def test_usage_error_is_lock_and_programmer_error(self):
        self.assertTrue(issubclass(locking.LockUsageError, errors.LockError))
        self.assertTrue(issubclass(locking.LockUsageError,
                                   errors.ProgrammerError))

    def test_import_does_not_install_reactor(self):
        # Importing the module must not import the global reactor
        import subprocess
        import sys
        code = ("import sys, ganeti.locking; "
                "print('twisted.internet.reactor' in sys.modules)")
        out = subprocess.check_output([sys.executable, "-c", code])
        self.assertEqual(out.strip(), b"False")


class SharedLockBasicsTests(LockTestCase):

    def setUp(self):
        LockTestCase.setUp(self)
        self.lock = locking.SharedLock("lk", self.clock)

    def test_uncontended_exclusive_is_synchronous(self):
        d = self.lock.acquire("a")
        self.assertIs(self.result(d), True)
        self.assertTrue(self.lock.is_owned("a"))
        self.assertTrue(self.lock.is_owned("a", shared=False))
        self.assertFalse(self.lock.is_owned("a", shared=True))
        self.assertFalse(self.lock.is_shared())
        self.assertEqual(self.lock.list_owners(), ["a"])
        self.lock.release("a")
        self.assertFalse(self.lock.is_owned("a"))
        self.assertEqual(self.lock.owner_count(), 0)

    def test_shared_holders_coexist(self):
        for owner in ("a", "b", "c"):
            self.assertTrue(self.result(self.lock.acquire(owner, shared=True)))
        self.assertTrue(self.lock.is_shared())
        self.assertEqual(self.lock.owner_count(), 3)
        self.assertEqual(self.lock.list_owners(), ["a", "b", "c"])
        self.assertTrue(self.lock.is_owned("b", shared=True))
        self.assertFalse(self.lock.is_owned("b", shared=False))

    def test_exclusive_waits_for_shared(self):
        self.lock.acquire("s1", shared=True)
        self.lock.acquire("s2", shared=True)
        d = self.lock.acquire("e")
        self.assertPending(d)
        self.assertEqual(self.lock.pending_count(), 1)
        self.lock.release("s1")
        self.assertPending(d)
        self.lock.release("s2")
        self.assertTrue(self.result(d))
        self.assertTrue(self.lock.is_owned("e", shared=False))
        self.assertEqual(self.lock.pending_count(), 0)

    def test_shared_waits_for_exclusive(self):
        self.lock.acquire("e")
        d = self.lock.acquire("s", shared=True)
        self.assertPending(d)
        self.lock.release("e")
        self.assertTrue(self.result(d))
        self.assertTrue(self.lock.is_shared())

    def test_double_acquire_is_an_error(self):
        self.lock.acquire("a")
        self.assertRaises(locking.LockUsageError, self.lock.acquire, "a")
        self.assertRaises(errors.ProgrammerError, self.lock.acquire, "a",
                          shared=True)

    def test_double_request_while_waiting_is_an_error(self):
        self.lock.acquire("a")
        self.lock.acquire("b")
        e = self.assertRaises(errors.LockError, self.lock.acquire, "b")
        self.assertIn("lk", str(e))

    def test_release_not_owned_is_an_error(self):
        e = self.assertRaises(errors.LockError, self.lock.release, "nobody")
        self.assertIn("nobody", str(e))
        self.assertIn("lk", str(e))
        self.lock.acquire("a")
        self.assertRaises(errors.LockError, self.lock.release, "b")
        self.assertTrue(self.lock.is_owned("a"))

    def test_waiter_cannot_release(self):
        self.lock.acquire("a")
        self.lock.acquire("b")
        self.assertRaises(errors.LockError, self.lock.release, "b")

    def test_any_hashable_owner(self):
        job = object()
        self.lock.acquire(job)
        self.assertTrue(self.lock.is_owned(job))
        self.lock.release(job)

    def test_get_info(self):
        self.assertEqual(self.lock.get_info(), {
            "name": "lk", "mode": None, "owners": [], "pending": [],
            "deleted": False})
        self.lock.acquire("x")
        self.lock.acquire("s1", shared=True)
        self.lock.acquire("e1")
        self.lock.acquire("s2", shared=True)
        info = self.lock.get_info()
        self.assertEqual(info["mode"], "exclusive")
        self.assertEqual(info["owners"], ["x"])
        self.assertEqual(info["pending"], [("shared", ["s1", "s2"]),
                                           ("exclusive", ["e1"])])
        self.lock.release("x")
        info = self.lock.get_info()
        self.assertEqual(info["mode"], "shared")
        self.assertEqual(sorted(info["owners"]), ["s1", "s2"])
        self.assertEqual(info["pending"], [("exclusive", ["e1"])])

    def test_try_acquire(self):
        self.assertTrue(self.lock.try_acquire("a", shared=True))
        self.assertTrue(self.lock.try_acquire("b", shared=True))
        self.assertFalse(self.lock.try_acquire("c"))
        self.assertEqual(self.lock.pending_count(), 0)
        self.assertRaises(locking.LockUsageError, self.lock.try_acquire, "a")
        # A queued exclusive request stops shared requests jumping ahead
        self.lock.acquire("e")
        self.assertFalse(self.lock.try_acquire("d", shared=True))

    def test_zero_timeout_is_a_try_lock(self):
        self.lock.acquire("a")
        self.assertIs(self.result(self.lock.acquire("b", timeout=0)), False)
        self.assertEqual(self.lock.pending_count(), 0)
        self.lock.release("a")
        self.assertIs(self.result(self.lock.acquire("b", timeout=0)), True)


class SharedLockFairnessTests(LockTestCase):

    def setUp(self):
        LockTestCase.setUp(self)
        self.lock = locking.SharedLock("lk", self.clock)

    def test_exclusive_waiters_in_arrival_order(self):
        self.lock.acquire("x")
        ds = [(name, self.lock.acquire(name)) for name in ("e1", "e2", "e3")]
        order = []
        for name, d in ds:
            d.addCallback(lambda _, n=name: order.append(n))
        holder = "x"
        for name, _ in ds:
            self.lock.release(holder)
            self.assertEqual(order[-1], name)
            self.assertEqual(self.lock.list_owners(), [name])
            holder = name
        self.assertEqual(order, ["e1", "e2", "e3"])
        self.lock.release(holder)

    def test_shared_waiters_of_one_group_granted_together(self):
        # X holds; S1, E1, S2 wait.  S2 arrives while S1's shared group is
        # still waiting, so it joins it and both are granted at once.
        self.lock.acquire("x")
        s1 = self.lock.acquire("s1", shared=True)
        e1 = self.lock.acquire("e1")
        s2 = self.lock.acquire("s2", shared=True)
        self.lock.release("x")
        self.assertTrue(self.result(s1))
        self.assertTrue(self.result(s2))
        self.assertPending(e1)
        self.assertEqual(sorted(self.lock.list_owners()), ["s1", "s2"])

        # The group is granted: a new shared request queues behind E1
        s3 = self.lock.acquire("s3", shared=True)
        self.assertPending(s3)
        self.lock.release("s1")
        self.lock.release("s2")
        self.assertTrue(self.result(e1))
        self.assertPending(s3)
        self.lock.release("e1")
        self.assertTrue(self.result(s3))

    def test_shared_does_not_jump_waiting_exclusive_when_lock_shared(self):
        # Lock held shared with an exclusive waiter: a new shared request
        # must not be granted, or E would starve.
        self.lock.acquire("s0", shared=True)
        e = self.lock.acquire("e")
        s = self.lock.acquire("s", shared=True)
        self.assertPending(s)
        self.assertEqual(self.lock.list_owners(), ["s0"])
        self.lock.release("s0")
        self.assertTrue(self.result(e))
        self.assertPending(s)
        self.lock.release("e")
        self.assertTrue(self.result(s))

    def test_exclusive_then_shared_groups_alternate(self):
        self.lock.acquire("x")
        e1 = self.lock.acquire("e1")
        s1 = self.lock.acquire("s1", shared=True)
        e2 = self.lock.acquire("e2")
        s2 = self.lock.acquire("s2", shared=True)  # joins s1's group
        self.lock.release("x")
        self.assertTrue(self.result(e1))
        self.assertPending(s1)
        self.lock.release("e1")
        self.assertTrue(self.result(s1))
        self.assertTrue(self.result(s2))
        self.assertPending(e2)
        self.lock.release("s1")
        self.lock.release("s2")
        self.assertTrue(self.result(e2))
        self.lock.release("e2")

    def test_handover_chain_does_not_grow_the_stack(self):
        # Each waiter releases as soon as it gets the lock; 5000 hand-overs
        # must not hit the recursion limit.
        self.lock.acquire("x")
        done = []
        for i in range(5000):
            d = self.lock.acquire(i)
            d.addCallback(lambda _, i=i: (self.lock.release(i), done.append(i)))
        self.lock.release("x")
        self.assertEqual(len(done), 5000)
        self.assertEqual(done, sorted(done))
        self.assertEqual(self.lock.owner_count(), 0)


class SharedLockTimeoutTests(LockTestCase):

    def setUp(self):
        LockTestCase.setUp(self)
        self.lock = locking.SharedLock("lk", self.clock)

    def test_timeout_fires_false_and_leaves_queue(self):
        self.lock.acquire("x")
        d = self.lock.acquire("a", timeout=5)
        self.clock.advance(4.9)
        self.assertPending(d)
        self.clock.advance(0.1)
        self.assertIs(self.result(d), False)
        self.assertEqual(self.lock.pending_count(), 0)
        self.assertFalse(self.lock.is_owned("a"))
        self.lock.release("x")
        self.assertEqual(self.lock.owner_count(), 0)

    def test_granted_before_timeout_cancels_timer(self):
        self.lock.acquire("x")
        d = self.lock.acquire("a", timeout=5)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.lock.release("x")
        self.assertTrue(self.result(d))
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.lock.release("a")

    def test_timed_out_exclusive_lets_shared_behind_it_in(self):
        self.lock.acquire("s0", shared=True)
        e = self.lock.acquire("e", timeout=1)
        s = self.lock.acquire("s", shared=True)
        self.assertPending(s)
        self.clock.advance(1)
        self.assertIs(self.result(e), False)
        # Nobody incompatible is queued in front any more
        self.assertTrue(self.result(s))
        self.assertEqual(sorted(self.lock.list_owners()), ["s", "s0"])

    def test_timed_out_head_lets_next_waiter_in(self):
        self.lock.acquire("s0", shared=True)
        e = self.lock.acquire("e", timeout=2)
        s = self.lock.acquire("s", shared=True, timeout=10)
        self.clock.advance(2)
        self.assertFalse(self.result(e))
        self.assertTrue(self.result(s))
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_timeout_of_one_group_member_keeps_the_others(self):
        self.lock.acquire("x")
        s1 = self.lock.acquire("s1", shared=True, timeout=1)
        s2 = self.lock.acquire("s2", shared=True)
        self.clock.advance(1)
        self.assertFalse(self.result(s1))
        self.assertPending(s2)
        self.lock.release("x")
        self.assertTrue(self.result(s2))
        self.assertEqual(self.lock.list_owners(), ["s2"])


class SharedLockCancelTests(LockTestCase):

    def setUp(self):
        LockTestCase.setUp(self)
        self.lock = locking.SharedLock("lk", self.clock)

    def test_cancel_removes_request(self):
        self.lock.acquire("x")
        d = self.lock.acquire("a", timeout=10)
        behind = self.lock.acquire("b")
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertEqual(self.lock.pending_count(), 1)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.lock.release("x")
        self.assertTrue(self.result(behind))
        self.assertFalse(self.lock.is_owned("a"))
        # The owner may ask again after cancelling
        self.assertPending(self.lock.acquire("a"))

    def test_cancel_head_unblocks_compatible_waiters(self):
        self.lock.acquire("s0", shared=True)
        e = self.lock.acquire("e")
        s = self.lock.acquire("s", shared=True)
        e.cancel()
        self.failureResultOf(e, defer.CancelledError)
        self.assertTrue(self.result(s))

    def test_cancel_after_grant_is_a_noop(self):
        d = self.lock.acquire("a")
        d.cancel()
        self.assertTrue(self.result(d))
        self.assertTrue(self.lock.is_owned("a"))

    def test_cancel_granted_but_not_yet_fired(self):
        # "e" releases from within its own grant callback, which grants "a";
        # a's Deferred only fires once that callback returns, and "e"
        # cancels it first: the lock must go on to "b".
        self.lock.acquire("x")
        e = self.lock.acquire("e")
        a = self.lock.acquire("a")
        b = self.lock.acquire("b")

        def on_e(_):
            self.lock.release("e")
            self.assertTrue(self.lock.is_owned("a"))
            self.assertNoResult(a)
            a.cancel()
        e.addCallback(on_e)
        self.lock.release("x")
        self.failureResultOf(a, defer.CancelledError)
        self.assertFalse(self.lock.is_owned("a"))
        self.assertTrue(self.result(b))
        self.assertEqual(self.lock.list_owners(), ["b"])


class SharedLockDeleteTests(LockTestCase):

    def setUp(self):
        LockTestCase.setUp(self)
        self.lock = locking.SharedLock("inst1", self.clock)

    def test_delete_fails_waiters(self):
        self.lock.acquire("owner")
        waiters = [self.lock.acquire("w1"),
                   self.lock.acquire("w2", shared=True, timeout=30),
                   self.lock.acquire("w3", shared=True)]
        self.assertTrue(self.result(self.lock.delete("owner")))
        for d in waiters:
            f = self.failureResultOf(d, errors.LockDeletedError)
            self.assertIn("inst1", str(f.value))
            self.assertIn("deleted", str(f.value))
        self.assertTrue(self.lock.deleted)
        self.assertEqual(self.lock.owner_count(), 0)
        self.assertEqual(self.lock.pending_count(), 0)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_acquire_after_delete_fails(self):
        self.result(self.lock.delete("owner"))
        self.failureResultOf(self.lock.acquire("late"),
                             errors.LockDeletedError)
        self.failureResultOf(self.lock.acquire("late", shared=True),
                             errors.LockDeletedError)
        self.failureResultOf(self.lock.delete("other"),
                             errors.LockDeletedError)
        self.assertRaises(errors.LockError, self.lock.release, "owner")

    def test_delete_while_held_shared_is_an_error(self):
        self.lock.acquire("owner", shared=True)
        self.assertRaises(locking.LockUsageError, self.lock.delete, "owner")
        self.assertFalse(self.lock.deleted)
        self.assertTrue(self.lock.is_owned("owner", shared=True))

    def test_delete_waits_for_holders(self):
        self.lock.acquire("holder", shared=True)
        d = self.lock.delete("deleter")
        self.assertPending(d)
        self.assertFalse(self.lock.deleted)
        self.lock.release("holder")
        self.assertTrue(self.result(d))
        self.assertTrue(self.lock.deleted)

    def test_delete_timeout(self):
        self.lock.acquire("holder")
        d = self.lock.delete("deleter", timeout=3)
        self.clock.advance(3)
        self.assertIs(self.result(d), False)
        self.assertFalse(self.lock.deleted)
        self.assertTrue(self.lock.is_owned("holder"))


class LockSetTests(LockTestCase):

    def setUp(self):
        LockTestCase.setUp(self)
        self.ls = locking.LockSet(["c", "a", "b"], "test", self.clock)

    def test_list_names_sorted(self):
        self.assertEqual(self.ls.list_names(), ["a", "b", "c"])

    def test_acquire_single_and_release(self):
        self.assertEqual(self.result(self.ls.acquire("b", "o")), {"b"})
        self.assertTrue(self.ls.is_owned("o"))
        self.assertEqual(self.ls.list_owned("o"), {"b"})
        self.ls.release("o")
        self.assertFalse(self.ls.is_owned("o"))
        self.assertEqual(self.ls.list_owned("o"), set())

    def test_acquire_in_sorted_order(self):
        # Hold "b" so the acquisition of [c, a, b] stops there: "a" must
        # already be taken and "c" must not be requested yet.
        self.ls.acquire("b", "holder")
        d = self.ls.acquire(["c", "a", "b"], "o")
        self.assertPending(d)
        info = dict((i["name"], i) for i in self.ls.get_info())
        self.assertEqual(info["test/a"]["owners"], ["o"])
        self.assertEqual(info["test/b"]["pending"], [("exclusive", ["o"])])
        self.assertEqual(info["test/c"]["owners"], [])
        self.assertEqual(info["test/c"]["pending"], [])
        self.ls.release("holder")
        self.assertEqual(self.result(d), {"a", "b", "c"})

    def test_acquire_twice_in_a_set_is_an_error(self):
        self.ls.acquire("a", "o")
        self.assertRaises(locking.LockUsageError, self.ls.acquire, "b", "o")

    def test_acquire_while_acquiring_is_an_error(self):
        self.ls.acquire("a", "holder")
        self.ls.acquire("a", "o")
        self.assertRaises(locking.LockUsageError, self.ls.acquire, "b", "o")
        self.assertRaises(locking.LockUsageError, self.ls.release, "o")

    def test_nonexistent_name(self):
        f = self.failureResultOf(self.ls.acquire(["a", "zzz"], "o"),
                                 errors.LockError)
        self.assertIn("zzz", str(f.value))
        self.assertFalse(self.ls.is_owned("o"))
        # Nothing was taken: another owner can have "a"
        self.assertEqual(self.result(self.ls.acquire("a", "p")), {"a"})

    def test_shared_acquisition(self):
        self.assertEqual(self.result(self.ls.acquire(["a", "b"], "o1",
                                                     shared=True)), {"a", "b"})
        self.assertEqual(self.result(self.ls.acquire(["b", "c"], "o2",
                                                     shared=True)), {"b", "c"})
        d = self.ls.acquire("b", "o3")
        self.assertPending(d)
        self.ls.release("o1")
        self.assertPending(d)
        self.ls.release("o2")
        self.assertEqual(self.result(d), {"b"})

    def test_release_some(self):
        self.ls.acquire(["a", "b", "c"], "o")
        self.ls.release("o", ["a", "c"])
        self.assertEqual(self.ls.list_owned("o"), {"b"})
        self.assertRaises(locking.LockUsageError, self.ls.release, "o", "a")
        self.ls.release("o", "b")
        self.assertFalse(self.ls.is_owned("o"))
        self.assertRaises(locking.LockUsageError, self.ls.release, "o")

    def test_timeout_releases_partial_locks(self):
        self.ls.acquire("c", "holder")
        d = self.ls.acquire(["a", "b", "c"], "o", timeout=5)
        self.clock.advance(2)
        # While waiting for "c", "a" and "b" are held
        self.assertPending(self.ls.acquire("a", "other", timeout=0.5))
        self.clock.advance(3)
        self.assertIsNone(self.result(d))
        self.assertFalse(self.ls.is_owned("o"))
        self.assertEqual(self.result(self.ls.acquire(["a", "b"], "p")),
                         {"a", "b"})

    def test_zero_timeout_takes_all_or_nothing(self):
        self.ls.acquire("c", "holder")
        self.assertIsNone(self.result(self.ls.acquire(["a", "b", "c"], "o",
                                                      timeout=0)))
        for name in ("a", "b"):
            self.assertEqual(self.ls._locks[name].owner_count(), 0)
        self.assertFalse(self.ls.is_owned("o"))
        self.assertEqual(self.result(self.ls.acquire(["a", "b"], "o",
                                                     timeout=0)), {"a", "b"})

    def test_timeout_covers_the_whole_call(self):
        self.ls.acquire("a", "h1")
        self.ls.acquire("b", "h2")
        d = self.ls.acquire(["a", "b"], "o", timeout=10)
        self.clock.advance(6)
        self.ls.release("h1")  # "a" granted after 6s; 4s left for "b"
        self.assertPending(d)
        self.clock.advance(3.9)
        self.assertPending(d)
        self.clock.advance(0.1)
        self.assertIsNone(self.result(d))
        self.ls.release("h2")

    def test_name_deleted_while_waiting_is_an_error(self):
        self.ls.acquire("b", "holder")
        d = self.ls.acquire(["a", "b"], "o")
        self.assertEqual(self.result(self.ls.remove("b", "holder")), ["b"])
        f = self.failureResultOf(d, errors.LockError)
        self.assertIn("b", str(f.value))
        self.assertFalse(self.ls.is_owned("o"))
        # "a", taken on the way, was given back
        self.assertEqual(self.result(self.ls.acquire("a", "p")), {"a"})

    def test_cancel_releases_partial_locks(self):
        self.ls.acquire("c", "holder")
        d = self.ls.acquire(["a", "b", "c"], "o", timeout=5)
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertFalse(self.ls.is_owned("o"))
        self.assertEqual(self.ls._locks["c"].pending_count(), 0)
        self.assertEqual(self.result(self.ls.acquire(["a", "b"], "p")),
                         {"a", "b"})

    def test_cancel_after_completion_before_firing(self):
        # O's acquisition completes inside a chain of hand-overs, and W,
        # woken in the same chain, cancels it before O's Deferred has fired:
        # O must not be left holding "a".
        trigger_lock = locking.SharedLock("trigger", self.clock)
        w_lock = locking.SharedLock("w", self.clock)
        trigger_lock.acquire("starter")
        w_lock.acquire("H")
        self.ls.acquire(["a"], "H")
        o = self.ls.acquire("a", "O")
        w = w_lock.acquire("W")

        def trigger(_):
            self.ls.release("H")  # O gets "a": its result is queued
            w_lock.release("H")   # W is woken after O completes
        trigger_lock.acquire("T").addCallback(trigger)
        w.addCallback(lambda _: o.cancel())
        trigger_lock.release("starter")
        self.failureResultOf(o, defer.CancelledError)
        self.assertFalse(self.ls.is_owned("O"))
        self.assertEqual(self.ls._locks["a"].owner_count(), 0)

    def test_empty_names(self):
        self.assertEqual(self.result(self.ls.acquire([], "o")), set())
        self.assertFalse(self.ls.is_owned("o"))


class LockSetAllTests(LockTestCase):

    def setUp(self):
        LockTestCase.setUp(self)
        self.ls = locking.LockSet(["a", "b", "c"], "test", self.clock)

    def test_acquire_all(self):
        self.assertEqual(self.result(self.ls.acquire(ALL_SET, "o")),
                         {"a", "b", "c"})
        self.assertTrue(self.ls.owns_all("o"))
        self.assertEqual(self.ls.list_owned("o"), {"a", "b", "c"})
        self.ls.release("o")
        self.assertFalse(self.ls.is_owned("o"))
        self.assertFalse(self.ls.owns_all("o"))

    def test_all_set_blocks_add_until_released(self):
        self.ls.acquire(ALL_SET, "o", shared=True)
        added = self.ls.add("d")
        self.assertPending(added)
        self.assertEqual(self.ls.list_names(), ["a", "b", "c"])
        self.ls.release("o")
        self.assertEqual(self.result(added), ["d"])
        self.assertEqual(self.ls.list_names(), ["a", "b", "c", "d"])

    def test_add_waits_for_all_set_acquisition_in_progress(self):
        # "o" is taking the whole set and waits for "b": a name added now
        # would be missed, so add waits for "o" to finish.
        self.ls.acquire("b", "holder")
        d = self.ls.acquire(ALL_SET, "o")
        self.assertFalse(self.ls.is_owned("o"))
        self.assertFalse(self.ls.owns_all("o"))
        added = self.ls.add("aa")
        self.assertPending(added)
        self.ls.release("holder")
        self.assertEqual(self.result(d), {"a", "b", "c"})
        self.assertPending(added)
        self.ls.release("o")
        self.assertEqual(self.result(added), ["aa"])

    def test_add_while_adding_name_gets_in_first(self):
        # An add queued before ALL_SET goes first, and ALL_SET then sees it
        self.ls.acquire(ALL_SET, "first")
        added = self.ls.add("d")
        d = self.ls.acquire(ALL_SET, "o", shared=True)
        self.ls.release("first")
        self.assertEqual(self.result(added), ["d"])
        self.assertEqual(self.result(d), {"a", "b", "c", "d"})

    def test_deleted_while_waiting_is_skipped_for_all_set(self):
        self.ls.acquire("b", "holder")
        d = self.ls.acquire(ALL_SET, "o")
        self.assertEqual(self.result(self.ls.remove("b", "holder")), ["b"])
        self.assertEqual(self.result(d), {"a", "c"})
        self.assertEqual(self.ls.list_names(), ["a", "c"])

    def test_all_set_timeout_releases_everything(self):
        self.ls.acquire("c", "holder")
        d = self.ls.acquire(ALL_SET, "o", timeout=1)
        self.clock.advance(1)
        self.assertIsNone(self.result(d))
        self.assertFalse(self.ls.is_owned("o"))
        # The set lock was released too: adding works at once
        self.assertEqual(self.result(self.ls.add("d")), ["d"])

    def test_exclusive_all_set_owner_can_add(self):
        self.ls.acquire(ALL_SET, "o")
        self.assertEqual(self.result(self.ls.add(["e", "d"], owner="o")),
                         ["d", "e"])
        self.assertEqual(self.ls.list_owned("o"), {"a", "b", "c", "d", "e"})
        self.ls.release("o")
        self.assertEqual(self.ls.get_info()[0]["owners"], [])

    def test_partial_owner_cannot_add(self):
        self.ls.acquire("a", "o")
        self.assertRaises(locking.LockUsageError, self.ls.add, "d", owner="o")
        self.ls.release("o")
        self.ls.acquire(ALL_SET, "o", shared=True)
        self.assertRaises(locking.LockUsageError, self.ls.add, "d", owner="o")

    def test_release_some_ends_whole_set_ownership(self):
        self.ls.acquire(ALL_SET, "o")
        added = self.ls.add("d")
        self.ls.release("o", "a")
        self.assertFalse(self.ls.owns_all("o"))
        self.assertEqual(self.result(added), ["d"])
        self.assertEqual(self.ls.list_owned("o"), {"b", "c"})

    def test_empty_set(self):
        ls = locking.LockSet([], "empty", self.clock)
        self.assertEqual(self.result(ls.acquire(ALL_SET, "o")), set())
        self.assertTrue(ls.is_owned("o"))
        ls.release("o")
        self.assertFalse(ls.is_owned("o"))


class LockSetAddRemoveTests(LockTestCase):

    def setUp(self):
        LockTestCase.setUp(self)
        self.ls = locking.LockSet(["a", "b"], "test", self.clock)

    def test_add_existing_is_an_error(self):
        f = self.failureResultOf(self.ls.add(["c", "a"]), errors.LockError)
        self.assertIn("a", str(f.value))
        self.assertEqual(self.ls.list_names(), ["a", "b"])

    def test_add_acquired(self):
        self.assertEqual(self.result(self.ls.add("c", owner="o",
                                                 shared=True)), ["c"])
        self.assertEqual(self.ls.list_owned("o"), {"c"})
        self.assertTrue(self.ls._locks["c"].is_owned("o", shared=True))
        self.ls.release("o")

    def test_remove_owned(self):
        self.ls.acquire(["a", "b"], "o")
        self.assertEqual(self.result(self.ls.remove("a", "o")), ["a"])
        self.assertEqual(self.ls.list_names(), ["b"])
        self.assertEqual(self.ls.list_owned("o"), {"b"})

    def test_remove_not_owned_acquires_first(self):
        self.ls.acquire("b", "holder", shared=True)
        d = self.ls.remove(["a", "b", "nope"], "o")
        # "a" went at once, "b" waits for its holder
        self.assertPending(d)
        self.assertEqual(self.ls.list_names(), ["b"])
        self.ls.release("holder")
        self.assertEqual(self.result(d), ["a", "b"])
        self.assertEqual(self.ls.list_names(), [])
        self.assertFalse(self.ls.is_owned("o"))

    def test_remove_shared_is_an_error(self):
        self.ls.acquire("a", "o", shared=True)
        self.assertRaises(locking.LockUsageError, self.ls.remove, "a", "o")

    def test_remove_unowned_while_holding_others_is_an_error(self):
        self.ls.acquire("a", "o")
        self.assertRaises(locking.LockUsageError, self.ls.remove, "b", "o")

    def test_removed_name_can_be_added_again(self):
        self.ls.acquire("a", "o")
        self.result(self.ls.remove("a", "o"))
        self.assertEqual(self.result(self.ls.add("a")), ["a"])
        self.assertEqual(self.result(self.ls.acquire("a", "p")), {"a"})


class RetryTests(LockTestCase):
    """Release-and-retry: release everything and retry, growing timeouts."""

    def test_small_job_not_stuck_behind_big_job(self):
        ls = locking.LockSet(["inst1", "inst2", "inst3", "inst4"], "instance",
                             self.clock)
        # A holds inst4 for a long time
        self.result(ls.acquire("inst4", "A"))
        # B wants everything, with timeouts 1, 2, 4 then blocking
        b = ls.acquire_with_retries(["inst1", "inst2", "inst3", "inst4"], "B",
                                    timeouts=[1.0, 2.0, 4.0])
        self.assertPending(b)
        self.assertEqual(ls._locks["inst1"].list_owners(), ["B"])
        # C wants inst1, currently held by B
        c = ls.acquire("inst1", "C")
        self.assertPending(c)

        # B's first attempt times out and gives inst1..inst3 back: C runs
        # now, long before A is done.
        self.clock.advance(1.0)
        self.assertEqual(self.result(c), {"inst1"})
        self.assertPending(b)
        self.assertFalse(ls.is_owned("B"))

        # C finishes; B's second attempt (2s) gets inst1..3 and waits for
        # inst4, times out again, the third (4s) too; then it blocks.
        self.clock.advance(0.5)
        ls.release("C")
        self.assertEqual(ls._locks["inst3"].list_owners(), ["B"])
        self.clock.advance(1.5)  # second attempt ends at t=3
        # The third one took inst1..inst3 again and waits for inst4
        self.assertEqual(ls._locks["inst1"].list_owners(), ["B"])
        self.assertEqual(ls._locks["inst4"].get_info()["pending"],
                         [("exclusive", ["B"])])
        self.assertFalse(ls.is_owned("B"))  # not until the call completes
        self.assertPending(b)
        self.clock.advance(4.0)  # third attempt ends at t=7
        self.assertPending(b)
        self.assertEqual(self.clock.getDelayedCalls(), [])  # blocking now
        self.clock.advance(1000)
        self.assertPending(b)

        # A finishes: B gets everything
        ls.release("A")
        self.assertEqual(self.result(b),
                         {"inst1", "inst2", "inst3", "inst4"})

    def test_success_on_first_attempt(self):
        ls = locking.LockSet(["x", "y"], "s", self.clock)
        self.assertEqual(self.result(ls.acquire_with_retries(
            ALL_SET, "o", shared=True)), {"x", "y"})
        self.assertTrue(ls.owns_all("o", shared=True))

    def test_success_on_later_attempt(self):
        ls = locking.LockSet(["x", "y"], "s", self.clock)
        ls.acquire("y", "h")
        d = ls.acquire_with_retries(["x", "y"], "o", timeouts=[1, 1, 1])
        self.clock.advance(1.5)
        ls.release("h")
        self.assertEqual(self.result(d), {"x", "y"})
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_default_timeouts_then_blocking(self):
        ls = locking.LockSet(["x"], "s", self.clock)
        ls.acquire("x", "h")
        d = ls.acquire_with_retries("x", "o")
        total = sum(locking.DEFAULT_RETRY_TIMEOUTS)
        self.clock.pump([t for t in locking.DEFAULT_RETRY_TIMEOUTS])
        self.assertGreaterEqual(self.clock.seconds(), total)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertPending(d)
        ls.release("h")
        self.assertEqual(self.result(d), {"x"})

    def test_cancel_during_retries(self):
        ls = locking.LockSet(["x", "y"], "s", self.clock)
        ls.acquire("y", "h")
        d = ls.acquire_with_retries(["x", "y"], "o", timeouts=[1, 2])
        self.clock.advance(1.5)
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertFalse(ls.is_owned("o"))
        self.assertEqual(ls._locks["y"].pending_count(), 0)
        self.assertEqual(self.result(ls.acquire("x", "p")), {"x"})


class LockManagerTests(LockTestCase):

    def setUp(self):
        LockTestCase.setUp(self)
        self.lm = locking.LockManager(
            node_uuids=["n1", "n2"], nodegroup_uuids=["g1"],
            instance_names=["i1", "i2", "i3"], network_uuids=["net1"],
            clock=self.clock)

    def bgl(self, owner, shared=True):
        return self.result(self.lm.acquire(LEVEL_CLUSTER, [BGL], owner,
                                           shared=shared))

    def test_initial_names(self):
        self.assertEqual(self.lm.lockset(LEVEL_CLUSTER).list_names(), [BGL])
        self.assertEqual(self.lm.lockset(LEVEL_NODE).list_names(),
                         ["n1", "n2"])
        self.assertEqual(self.lm.lockset(LEVEL_NODE_RES).list_names(),
                         ["n1", "n2"])
        self.assertEqual(self.lm.lockset(LEVEL_INSTANCE).list_names(),
                         ["i1", "i2", "i3"])
        self.assertEqual(self.lm.lockset(LEVEL_NODEGROUP).list_names(),
                         ["g1"])
        self.assertEqual(self.lm.lockset(LEVEL_NETWORK).list_names(),
                         ["net1"])

    def test_bgl_required(self):
        e = self.assertRaises(locking.LockUsageError, self.lm.acquire,
                              LEVEL_INSTANCE, ["i1"], "job1")
        self.assertIn("BGL", str(e))
        self.assertIn("instance", str(e))
        self.assertIn("job1", str(e))
        self.bgl("job1")
        self.assertEqual(self.result(self.lm.acquire(LEVEL_INSTANCE, ["i1"],
                                                     "job1")), {"i1"})

    def test_level_order(self):
        self.bgl("job")
        self.result(self.lm.acquire(LEVEL_NODE, ["n1"], "job"))
        e = self.assertRaises(locking.LockUsageError, self.lm.acquire,
                              LEVEL_INSTANCE, ["i1"], "job")
        self.assertIn("node", str(e))
        self.assertRaises(locking.LockUsageError, self.lm.acquire,
                          LEVEL_NODE, ["n2"], "job")
        self.assertRaises(locking.LockUsageError, self.lm.acquire,
                          LEVEL_CLUSTER, [BGL], "job")
        # Higher levels are fine
        self.result(self.lm.acquire(LEVEL_NODE_RES, ALL_SET, "job"))
        self.result(self.lm.acquire(LEVEL_NETWORK, ["net1"], "job",
                                    shared=True))
        self.assertEqual(self.lm.owned_levels("job"),
                         [LEVEL_CLUSTER, LEVEL_NODE, LEVEL_NODE_RES,
                          LEVEL_NETWORK])
        self.assertEqual(self.lm.list_owned(LEVEL_NODE_RES, "job"),
                         {"n1", "n2"})

    def test_release_rules(self):
        self.bgl("job")
        self.result(self.lm.acquire(LEVEL_INSTANCE, ["i1", "i2"], "job"))
        self.result(self.lm.acquire(LEVEL_NODE, ["n1"], "job"))
        e = self.assertRaises(locking.LockUsageError, self.lm.release,
                              LEVEL_CLUSTER, "job")
        self.assertIn("BGL", str(e))
        # Any order for the other levels
        self.lm.release(LEVEL_INSTANCE, "job", ["i1"])
        self.assertEqual(self.lm.list_owned(LEVEL_INSTANCE, "job"), {"i2"})
        self.lm.release(LEVEL_INSTANCE, "job")
        self.lm.release(LEVEL_NODE, "job")
        self.lm.release(LEVEL_CLUSTER, "job")
        self.assertEqual(self.lm.owned_levels("job"), [])

    def test_bgl_not_released_during_acquisition(self):
        self.bgl("holder")
        self.result(self.lm.acquire(LEVEL_INSTANCE, ["i1"], "holder"))
        self.bgl("job")
        d = self.lm.acquire(LEVEL_INSTANCE, ["i1"], "job")
        self.assertRaises(locking.LockUsageError, self.lm.release,
                          LEVEL_CLUSTER, "job")
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.lm.release(LEVEL_CLUSTER, "job")

    def test_release_all(self):
        self.bgl("job")
        self.result(self.lm.acquire(LEVEL_INSTANCE, ALL_SET, "job"))
        self.result(self.lm.acquire(LEVEL_NODE, ["n2"], "job"))
        self.lm.release_all("job")
        self.assertEqual(self.lm.owned_levels("job"), [])

    def test_exclusive_bgl_blocks_others(self):
        self.bgl("big", shared=False)
        d = self.lm.acquire(LEVEL_CLUSTER, [BGL], "small", shared=True)
        self.assertPending(d)
        self.lm.release(LEVEL_CLUSTER, "big")
        self.assertEqual(self.result(d), {BGL})

    def test_unknown_level(self):
        self.assertRaises(locking.LockUsageError, self.lm.acquire, 99, ["x"],
                          "job")

    def test_add_and_remove(self):
        self.assertRaises(locking.LockUsageError, self.lm.add, LEVEL_CLUSTER,
                          ["BGL2"])
        # Without an owner (e.g. loading the configuration): no checks
        self.assertEqual(self.result(self.lm.add(LEVEL_INSTANCE, ["i4"])),
                         ["i4"])
        # With an owner the new lock is held: BGL needed, order applies
        self.assertRaises(locking.LockUsageError, self.lm.add,
                          LEVEL_INSTANCE, ["i5"], "job")
        self.bgl("job")
        self.assertEqual(self.result(self.lm.add(LEVEL_INSTANCE, ["i5"],
                                                 "job")), ["i5"])
        self.assertEqual(self.lm.list_owned(LEVEL_INSTANCE, "job"), {"i5"})
        self.result(self.lm.acquire(LEVEL_NODE, ["n1"], "job"))
        self.assertRaises(locking.LockUsageError, self.lm.add,
                          LEVEL_INSTANCE, ["i6"], "job")
        self.assertRaises(locking.LockUsageError, self.lm.remove,
                          LEVEL_NODEGROUP, ["g1"], "job")
        # Removing at a level it holds is fine
        self.assertEqual(self.result(self.lm.remove(LEVEL_INSTANCE, ["i5"],
                                                    "job")), ["i5"])
        self.assertEqual(self.lm.lockset(LEVEL_INSTANCE).list_names(),
                         ["i1", "i2", "i3", "i4"])
        self.assertRaises(locking.LockUsageError, self.lm.remove,
                          LEVEL_CLUSTER, [BGL], "job")

    def test_remove_requires_bgl(self):
        self.assertRaises(locking.LockUsageError, self.lm.remove,
                          LEVEL_NODE, ["n1"], "job")

    def test_acquire_with_retries(self):
        self.bgl("A")
        self.bgl("B")
        self.result(self.lm.acquire(LEVEL_INSTANCE, ["i3"], "A"))
        d = self.lm.acquire_with_retries(LEVEL_INSTANCE, ALL_SET, "B",
                                         timeouts=[0.5, 1.0])
        self.assertRaises(locking.LockUsageError, self.lm.acquire,
                          LEVEL_NODE, ["n1"], "B")
        # Each attempt takes i1, i2 and waits for i3; between attempts
        # they are given back, so another job can slip in.
        self.clock.advance(0.5)
        self.assertFalse(self.lm.is_owned(LEVEL_INSTANCE, "B"))
        self.assertEqual(self.lm.lockset(LEVEL_INSTANCE)._locks[
            "i1"].list_owners(), ["B"])
        self.clock.advance(1.0)
        self.assertPending(d)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.lm.release(LEVEL_INSTANCE, "A")
        self.assertEqual(self.result(d), {"i1", "i2", "i3"})
        self.assertRaises(locking.LockUsageError, self.lm.acquire_with_retries,
                          LEVEL_INSTANCE, ["i1"], "B")

    def test_query_locks(self):
        self.bgl("job")
        self.result(self.lm.acquire(LEVEL_INSTANCE, ["i2"], "job"))
        self.bgl("other")
        self.lm.acquire(LEVEL_INSTANCE, ["i2"], "other", shared=True)
        rows = self.lm.query_locks()
        by_name = dict((r["name"], r) for r in rows)
        self.assertEqual(by_name["cluster/BGL"]["mode"], "shared")
        self.assertEqual(by_name["cluster/BGL"]["owners"], ["job", "other"])
        self.assertEqual(by_name["cluster/BGL"]["level"], "cluster")
        i2 = by_name["instance/i2"]
        self.assertEqual((i2["level"], i2["mode"], i2["owners"],
                          i2["pending"]),
                         ("instance", "exclusive", ["job"],
                          [("shared", ["other"])]))
        self.assertEqual(by_name["instance/i1"]["mode"], None)
        self.assertIn("instance/[lockset]", by_name)
        self.assertIn("node-res/n1", by_name)
        levels = [r["level"] for r in rows]
        self.assertEqual(levels[0], "cluster")
        self.assertEqual(levels[-1], "network")
        self.assertEqual(self.lm.get_info(), rows)


class DefaultClockTests(unittest.TestCase):

    def test_default_clock_is_the_reactor(self):
        from twisted.internet import reactor
        lock = locking.SharedLock("x")
        self.assertIs(lock._clock, reactor)


class OpportunisticTests(LockTestCase):
    """Taking only the locks that are free now."""

    def setUp(self):
        LockTestCase.setUp(self)
        self.ls = locking.LockSet(["a", "b", "c", "d"], "test", self.clock)

    def test_busy_and_queued_locks_are_skipped(self):
        self.ls.acquire("b", "holder")
        self.ls.acquire("c", "reader", shared=True)
        waiting = self.ls.acquire(["c"], "writer")   # queued behind reader
        self.assertPending(waiting)
        got = self.ls.acquire_opportunistic(locking.ALL_SET, "o")
        self.assertEqual(got, {"a", "d"})
        self.assertEqual(self.ls.list_owned("o"), {"a", "d"})
        # a shared request does not jump the exclusive waiter on "c"
        self.assertEqual(self.ls.acquire_opportunistic(["b", "c"], "s",
                                                       shared=True), set())
        self.assertFalse(self.ls.is_owned("s"))
        # nobody waited, the queue is as it was
        info = dict((i["name"], i) for i in self.ls.get_info())
        self.assertEqual(info["test/c"]["pending"],
                         [("exclusive", ["writer"])])
        self.ls.release("o")
        self.ls.release("reader")
        self.assertEqual(self.result(waiting), {"c"})
        self.ls.release("writer")
        self.ls.release("holder")

    def test_shared_with_shared_holders(self):
        self.ls.acquire(["a", "b"], "reader", shared=True)
        got = self.ls.acquire_opportunistic(["a", "b", "ghost"], "o",
                                            shared=True)
        self.assertEqual(got, {"a", "b"})
        self.ls.release("o")
        self.ls.release("reader")

    def test_all_set_leaves_the_set_lock_alone(self):
        """Adding names is not blocked, unlike after acquiring ALL_SET."""
        self.assertEqual(self.ls.acquire_opportunistic(locking.ALL_SET, "o"),
                         {"a", "b", "c", "d"})
        self.assertFalse(self.ls.owns_all("o"))
        self.assertEqual(self.result(self.ls.add(["e"])), ["e"])
        self.ls.release("o")

    def test_misuse(self):
        self.ls.acquire("a", "o")
        self.assertRaises(locking.LockUsageError,
                          self.ls.acquire_opportunistic, ["b"], "o")
        self.ls.release("o")

    def test_lock_manager_rules_apply(self):
        lm = locking.LockManager(node_uuids=["n1", "n2"], clock=self.clock)
        self.assertRaises(locking.LockUsageError, lm.acquire_opportunistic,
                          LEVEL_NODE, locking.ALL_SET, "job")
        lm.acquire(LEVEL_CLUSTER, [BGL], "other", shared=True)
        lm.acquire(LEVEL_NODE, ["n1"], "other")
        lm.acquire(LEVEL_CLUSTER, [BGL], "job", shared=True)
        self.assertEqual(lm.acquire_opportunistic(LEVEL_NODE,
                                                  locking.ALL_SET, "job"),
                         {"n2"})
        self.assertEqual(lm.list_owned(LEVEL_NODE, "job"), {"n2"})
        self.assertRaises(locking.LockUsageError, lm.acquire_opportunistic,
                          LEVEL_NODE, ["n1"], "job")
        lm.release_all("job")
        lm.release_all("other")
