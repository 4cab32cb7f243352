"""Tests for ganeti.uidpool."""

import fcntl
import os
import random

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import errors
from ganeti import uidpool


class ParseFormatTests(unittest.TestCase):

    def test_round_trip_command_line(self):
        pool = uidpool.parse_uid_pool("1000-1999,3000")
        self.assertEqual(pool, [(1000, 1999), (3000, 3000)])
        text = uidpool.format_uid_pool(pool)
        self.assertEqual(text, "1000-1999, 3000")
        self.assertEqual(uidpool.parse_uid_pool(text), pool)
        self.assertEqual(uidpool.format_uid_pool(pool, ","), "1000-1999,3000")

    def test_round_trip_ssconf_newlines(self):
        pool = [(1000, 1999), (3000, 3000), (4000, 4010)]
        text = uidpool.format_uid_pool(pool, "\n")
        self.assertEqual(text, "1000-1999\n3000\n4000-4010")
        self.assertEqual(uidpool.parse_uid_pool(text, "\n"), pool)
        # as read back from a file: trailing newline, blank lines, CRs
        self.assertEqual(
            uidpool.parse_uid_pool("1000-1999\r\n\n3000\n4000-4010\n", "\n"),
            pool)

    def test_whitespace_and_empty(self):
        self.assertEqual(uidpool.parse_uid_pool(""), [])
        self.assertEqual(uidpool.parse_uid_pool("  \t "), [])
        self.assertEqual(uidpool.parse_uid_pool("\n", "\n"), [])
        self.assertEqual(uidpool.parse_uid_pool(" 1000 - 1999 ,  3000 "),
                         [(1000, 1999), (3000, 3000)])
        self.assertEqual(uidpool.format_uid_pool([]), "")

    def test_normalised(self):
        # sorted; overlapping and adjacent ranges merged; duplicates gone
        self.assertEqual(
            uidpool.parse_uid_pool("3000,1500-2500,1000-1999,2501,3000,5"),
            [(5, 5), (1000, 2501), (3000, 3000)])

    def test_bounds_accepted(self):
        top = uidpool.UID_MAX
        self.assertEqual(uidpool.parse_uid_pool("0,%d" % top),
                         [(0, 0), (top, top)])

    def test_bad_items_name_the_item(self):
        cases = [
            ("1000,abc", "abc", "not a number"),
            ("1.5", "1.5", "not a number"),
            ("1000-x", "1000-x", "not a number"),
            ("-5", "-5", "negative"),
            ("10--3", "10--3", "negative"),
            ("2000-1000", "2000-1000", "greater than"),
            ("%d" % (uidpool.UID_MAX + 1), "%d" % (uidpool.UID_MAX + 1),
             "maximum"),
            ("1-%d" % 2 ** 32, "1-%d" % 2 ** 32, "maximum"),
            ("1-2-3", "1-2-3", "LOW-HIGH"),
            ("5-", "5-", "LOW-HIGH"),
        ]
        for text, item, reason in cases:
            err = self.assertRaises(errors.ParseError,
                                    uidpool.parse_uid_pool, text)
            self.assertIn(repr(item), str(err), text)
            self.assertIn(reason, str(err), text)

    def test_non_ascii_digits_rejected(self):
        self.assertRaises(errors.ParseError, uidpool.parse_uid_pool,
                          "\u0661\u0662")

    def test_format_rejects_bad_pool(self):
        self.assertRaises(errors.ParameterError, uidpool.format_uid_pool,
                          [(5, 1)])


class CheckTests(unittest.TestCase):

    def test_valid(self):
        uidpool.check_uid_pool([])
        uidpool.check_uid_pool([[1000, 1999], (3000, 3000)])

    def test_invalid(self):
        for pool in ["1000-2000", [1000], [(1, 2, 3)], [("1", 2)],
                     [(True, 2)], [(1.0, 2)], [(-1, 5)], [(9, 8)],
                     [(0, 2 ** 32)]]:
            err = self.assertRaises(errors.ParameterError,
                                    uidpool.check_uid_pool, pool)
            self.assertEqual(err.args[0], "uid_pool", pool)


class AddRemoveExpandTests(unittest.TestCase):

    def test_add(self):
        pool = [[1000, 1999]]  # as stored after a JSON round trip
        new = uidpool.add_to_uid_pool(pool, [(2000, 2010), (500, 500)])
        self.assertEqual(new, [(500, 500), (1000, 2010)])
        self.assertEqual(pool, [[1000, 1999]])  # untouched

    def test_add_existing_is_harmless(self):
        self.assertEqual(uidpool.add_to_uid_pool([(1, 10)], [(3, 4)]),
                         [(1, 10)])

    def test_add_invalid(self):
        self.assertRaises(errors.ParameterError, uidpool.add_to_uid_pool,
                          [(1, 10)], [(20, 15)])

    def test_remove_whole_range(self):
        self.assertEqual(
            uidpool.remove_from_uid_pool([(1000, 1999), (3000, 3000)],
                                         [(3000, 3000)]),
            [(1000, 1999)])

    def test_remove_splits_range(self):
        pool = [(1000, 1999)]
        self.assertEqual(uidpool.remove_from_uid_pool(pool, [(1500, 1509)]),
                         [(1000, 1499), (1510, 1999)])
        self.assertEqual(
            uidpool.remove_from_uid_pool(pool, [(1000, 1000), (1999, 1999),
                                                (1200, 1300), (1250, 1400)]),
            [(1001, 1199), (1401, 1998)])
        self.assertEqual(pool, [(1000, 1999)])

    def test_remove_across_adjacent_stored_ranges(self):
        # stored un-normalised as two ranges; the uids are all in the pool
        self.assertEqual(
            uidpool.remove_from_uid_pool([(1, 5), (6, 10)], [(4, 7)]),
            [(1, 3), (8, 10)])

    def test_remove_absent_is_error_and_changes_nothing(self):
        pool = [(1000, 1999), (3000, 3000)]
        for removals, name in [([(5000, 5000)], "5000"),
                               ([(1900, 2100)], "1900-2100"),
                               ([(1000, 1000), (2999, 3000)], "2999-3000")]:
            err = self.assertRaises(errors.ParameterError,
                                    uidpool.remove_from_uid_pool,
                                    pool, removals)
            self.assertEqual(err.args[0], "uid_pool")
            self.assertIn(name, err.args[1])
        self.assertEqual(pool, [(1000, 1999), (3000, 3000)])

    def test_expand(self):
        self.assertEqual(uidpool.expand_uid_pool([]), [])
        self.assertEqual(
            uidpool.expand_uid_pool([(10, 12), (5, 5), (11, 13)]),
            [5, 10, 11, 12, 13])
        self.assertEqual(len(uidpool.expand_uid_pool(
            uidpool.parse_uid_pool("1000-1999,3000"))), 1001)


class FakeProcMixin:
    """A lock directory and a fake /proc to hand out uids from."""

    def setUp(self):
        self.lock_dir = self.mktemp()
        os.makedirs(self.lock_dir)
        self.proc_dir = self.mktemp()
        os.makedirs(os.path.join(self.proc_dir, "self"))
        os.makedirs(os.path.join(self.proc_dir, "sys"))
        # a pid directory whose process vanished before we read its status
        os.makedirs(os.path.join(self.proc_dir, "77"))
        self.next_pid = 100
        self.alloc = uidpool.UidAllocator(self.lock_dir, self.proc_dir,
                                          rng=random.Random(42))

    def add_process(self, real, effective=None, saved=None, fs=None):
        uids = [real] + [u if u is not None else real
                         for u in (effective, saved, fs)]
        pid_dir = os.path.join(self.proc_dir, str(self.next_pid))
        self.next_pid += 1
        os.makedirs(pid_dir)
        with open(os.path.join(pid_dir, "status"), "w") as fh:
            fh.write("Name:\tqemu\nState:\tS (sleeping)\nPid:\t%s\n"
                     "Uid:\t%s\nGid:\t0\t0\t0\t0\n"
                     % (os.path.basename(pid_dir),
                        "\t".join(str(u) for u in uids)))

    def lock_path(self, uid):
        return os.path.join(self.lock_dir, str(uid))

    def is_locked(self, uid):
        """Whether someone holds the flock on uid's lock file."""
        fd = os.open(self.lock_path(uid), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


class RequestTests(FakeProcMixin, unittest.TestCase):

    def test_used_uids_reads_all_four_fields(self):
        self.add_process(1, 2, 3, 4)
        self.add_process(0)
        self.assertEqual(uidpool.used_uids(self.proc_dir), {0, 1, 2, 3, 4})

    def test_real_proc_sees_ourselves(self):
        if not os.path.exists("/proc/self/status"):
            raise unittest.SkipTest("no /proc")
        self.assertIn(os.getuid(), uidpool.used_uids("/proc"))

    def test_uid_in_use_is_never_handed_out(self):
        self.add_process(0, 0, 5000, 0)  # 5000 only as saved uid
        self.add_process(5002, 0, 0, 0)  # 5002 only as real uid
        got = set()
        for _ in range(30):
            locked = self.alloc.request([5000, 5001, 5002, 5003])
            self.assertTrue(os.path.exists(self.lock_path(locked.uid)))
            self.assertTrue(self.is_locked(locked.uid))
            got.add(locked.as_int())
            locked.unlock()
            self.assertFalse(locked.locked)
            self.assertTrue(os.path.exists(self.lock_path(locked.uid)))
        # both free uids come up: the candidates are randomised
        self.assertEqual(got, {5001, 5003})

    def test_all_in_use(self):
        self.add_process(5000)
        err = self.assertRaises(errors.ReservationError,
                                self.alloc.request, [5000])
        self.assertIn("no free uid", str(err))
        # the lock it took while checking was given back
        self.assertFalse(self.is_locked(5000))

    def test_empty_pool(self):
        self.assertRaises(errors.ReservationError, self.alloc.request, [])
        self.assertRaises(errors.ReservationError,
                          uidpool.request_unused_uid,
                          uidpool.expand_uid_pool([]), self.lock_dir)

    def test_concurrent_requests_get_different_uids(self):
        # flock locks belong to an open file description, so two requests
        # in this one process exclude each other just as two node daemon
        # processes would; lockf (POSIX record) locks are per process and
        # would let the second request re-take the first one's lock.
        uids = [7000, 7001]
        first = self.alloc.request(uids)
        second = self.alloc.request(uids)
        self.assertNotEqual(first.uid, second.uid)
        self.assertRaises(errors.ReservationError, self.alloc.request, uids)
        first.unlock()
        third = self.alloc.request(uids)
        self.assertEqual(third.uid, first.uid)
        second.unlock()
        third.unlock()

    def test_existing_lock_file_is_fine(self):
        open(self.lock_path(6000), "w").close()
        locked = self.alloc.request([6000])
        self.assertEqual(locked.uid, 6000)
        locked.unlock()

    def test_missing_lock_dir(self):
        alloc = uidpool.UidAllocator(self.mktemp(), self.proc_dir)
        self.assertRaises(OSError, alloc.request, [6000])

    def test_invalid_candidates(self):
        self.assertRaises(errors.ParameterError, self.alloc.request, [-1])
        self.assertRaises(errors.ParameterError, self.alloc.request, ["12"])


class ReleaseTests(FakeProcMixin, unittest.TestCase):

    def test_release_locked_uid_removes_file_and_unlocks(self):
        locked = self.alloc.request([8000])
        uidpool.release_uid(locked, self.lock_dir)
        self.assertFalse(os.path.exists(self.lock_path(8000)))
        self.assertFalse(locked.locked)
        # and can be handed out again
        self.alloc.request([8000]).unlock()

    def test_release_int_removes_file(self):
        self.alloc.request([8000]).unlock()
        self.assertTrue(os.path.exists(self.lock_path(8000)))
        uidpool.release_uid(8000, self.lock_dir)
        self.assertFalse(os.path.exists(self.lock_path(8000)))
        uidpool.release_uid(8000, self.lock_dir)  # nothing left: no error

    def test_release_does_not_check_processes(self):
        self.alloc.request([8000]).unlock()
        self.add_process(8000)
        self.alloc.release(8000)
        self.assertFalse(os.path.exists(self.lock_path(8000)))

    def test_release_int_while_being_handed_out(self):
        locked = self.alloc.request([8000])
        self.assertRaises(errors.LockError, self.alloc.release, 8000)
        self.assertTrue(os.path.exists(self.lock_path(8000)))
        self.assertTrue(self.is_locked(8000))
        locked.unlock()


class ExecTests(FakeProcMixin, unittest.TestCase):

    def setUp(self):
        FakeProcMixin.setUp(self)
        self.calls = []

    def test_sync_success_keeps_uid_unlocked(self):
        def start(uid, name, memory=None):
            self.calls.append((uid, name, memory))
            self.assertTrue(self.is_locked(uid))
            return "started"
        result = self.alloc.exec_with_unused_uid(start, [9000, 9001],
                                                 "inst1", memory=128)
        self.assertEqual(result, "started")
        [(uid, name, memory)] = self.calls
        self.assertIn(uid, (9000, 9001))
        self.assertEqual((name, memory), ("inst1", 128))
        self.assertTrue(os.path.exists(self.lock_path(uid)))
        self.assertFalse(self.is_locked(uid))

    def test_sync_failure_gives_uid_back(self):
        def start(uid):
            self.calls.append(uid)
            raise RuntimeError("kvm failed")
        err = self.assertRaises(RuntimeError, self.alloc.exec_with_unused_uid,
                                start, [9000])
        self.assertEqual(str(err), "kvm failed")
        self.assertEqual(self.calls, [9000])
        self.assertFalse(os.path.exists(self.lock_path(9000)))
        self.alloc.request([9000]).unlock()  # free again

    def test_module_function(self):
        # the module-level helper reads the real /proc; a uid near the top
        # of the range is not used by anything on a test machine
        uid = uidpool.UID_MAX - 1
        result = uidpool.exec_with_unused_uid(lambda u, x: (u, x), [uid],
                                              self.lock_dir, "x")
        self.assertEqual(result, (uid, "x"))
        self.assertTrue(os.path.exists(self.lock_path(uid)))

    def test_deferred_success_unlocks_when_fired(self):
        d = defer.Deferred()

        def start(uid):
            self.calls.append(uid)
            return d
        result = self.alloc.exec_with_unused_uid(start, [9000])
        self.assertIsInstance(result, defer.Deferred)
        # still starting: the uid stays locked, nobody else gets it
        self.assertTrue(self.is_locked(9000))
        self.assertRaises(errors.ReservationError, self.alloc.request, [9000])
        d.callback("running")
        self.assertEqual(self.successResultOf(result), "running")
        self.assertTrue(os.path.exists(self.lock_path(9000)))
        self.assertFalse(self.is_locked(9000))

    def test_deferred_failure_gives_uid_back(self):
        d = defer.Deferred()
        result = self.alloc.exec_with_unused_uid(lambda uid: d, [9000])
        self.assertTrue(self.is_locked(9000))
        d.errback(RuntimeError("boom"))
        self.failureResultOf(result, RuntimeError)
        self.assertFalse(os.path.exists(self.lock_path(9000)))
        self.alloc.request([9000]).unlock()

    def test_already_failed_deferred(self):
        result = self.alloc.exec_with_unused_uid(
            lambda uid: defer.fail(ValueError("no")), [9000])
        return self.assertFailure(result, ValueError).addCallback(
            lambda _: self.assertFalse(
                os.path.exists(self.lock_path(9000))))

    def test_no_free_uid_does_not_call(self):
        self.add_process(9000)
        self.assertRaises(errors.ReservationError,
                          self.alloc.exec_with_unused_uid,
                          self.calls.append, [9000])
        self.assertEqual(self.calls, [])
