"""The job queue's journal helper process (ganeti.jqueue.journal_helper):
its frames, its loop, and the master's end of it with a real process."""

import errno
import os
import signal
import subprocess
import sys
import threading
import time

from twisted.internet import defer, reactor, task
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial import unittest

from ganeti import errors
from ganeti.jqueue import journal_helper as jh
from ganeti.jqueue import journal_process as jp
from ganeti.jqueue.journal import Journal, decode_records, encode_record
from ganeti.jqueue.store import JobStore


def read(path):
    with open(path, "rb") as f:
        return f.read()


def records(**files):
    return b"".join(encode_record(name.replace("_", "-"), data)
                    for name, data in files.items())


class FrameTests(unittest.TestCase):

    def test_complete_frames_are_taken_a_partial_one_stays(self):
        buf = bytearray(jh.frame(jh.COMMIT, 1, b"abc") +
                        jh.frame(jh.CHECKPOINT, 2))
        tail = jh.frame(jh.DONE, 3, b"xyz")
        buf += tail[:-1]
        self.assertEqual(jh.parse_frames(buf),
                         [(jh.COMMIT, 1, b"abc"), (jh.CHECKPOINT, 2, b"")])
        self.assertEqual(bytes(buf), tail[:-1])
        buf += tail[-1:]
        self.assertEqual(jh.parse_frames(buf), [(jh.DONE, 3, b"xyz")])
        self.assertEqual(buf, bytearray())


class HelperLoopTests(unittest.TestCase):
    """The helper's loop on pipes, in this process."""

    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.journal = Journal(self.dir, 0o640)
        self.addCleanup(self.journal.close)

    def serve(self, *frames):
        """Run the loop over ``frames`` (then EOF); its answers."""
        rfd, to_helper = os.pipe()
        from_helper, wfd = os.pipe()
        os.write(to_helper, b"".join(frames))
        os.close(to_helper)
        jh._Helper(self.journal, rfd, wfd).serve()
        os.close(rfd)
        os.close(wfd)
        answers = bytearray()
        while True:
            chunk = os.read(from_helper, 65536)
            if not chunk:
                break
            answers += chunk
        os.close(from_helper)
        return jh.parse_frames(answers)

    def test_commits_arriving_together_share_one_flush(self):
        answers = self.serve(
            jh.frame(jh.COMMIT, 1, records(job_1=b"queued")),
            jh.frame(jh.COMMIT, 2, records(job_2=b"queued",
                                           job_1=b"running")))
        self.assertEqual(answers, [(jh.DONE, 1, b""), (jh.DONE, 2, b"")])
        self.assertEqual(self.journal.commits, 1)
        names = [n for n, _ in decode_records(read(self.journal.path))[0]]
        self.assertEqual(sorted(names), ["job-1", "job-2"])
        # the newest content of job-1 is the one made durable
        self.assertEqual(dict(decode_records(
            read(self.journal.path))[0])["job-1"], b"running")

    def test_a_checkpoint_after_commits_empties_the_journal(self):
        answers = self.serve(jh.frame(jh.COMMIT, 7, records(job_1=b"a")),
                             jh.frame(jh.CHECKPOINT, 8))
        self.assertEqual([a[:2] for a in answers],
                         [(jh.DONE, 7), (jh.DONE, 8)])
        self.assertEqual(read(os.path.join(self.dir, "job-1")), b"a")
        self.assertEqual(os.path.getsize(self.journal.path), 0)

    def start(self):
        """The loop in a thread, with the master's ends of its pipes."""
        rfd, to_helper = os.pipe()
        from_helper, wfd = os.pipe()
        thread = threading.Thread(
            target=jh._Helper(self.journal, rfd, wfd).serve)
        thread.start()

        def stop():
            os.close(to_helper)
            thread.join(10)
            for fd in (rfd, wfd, from_helper):
                os.close(fd)
        self.addCleanup(stop)
        return to_helper, from_helper

    def answer(self, fd):
        buf = bytearray()
        while True:
            buf += os.read(fd, 65536)
            frames = jh.parse_frames(buf)
            if frames:
                return frames

    def wait_for(self, path):
        deadline = time.monotonic() + 10
        while not os.path.exists(path):
            self.assertLess(time.monotonic(), deadline, path)
            time.sleep(0.005)
        return read(path)

    def test_files_are_written_in_place_while_no_commit_waits(self):
        to_helper, from_helper = self.start()
        os.write(to_helper, jh.frame(jh.COMMIT, 1, records(
            **{"job_%d" % n: b"queued %d" % n for n in range(1, 21)})))
        self.assertEqual(self.answer(from_helper), [(jh.DONE, 1, b"")])
        # the master stays connected and sends nothing more
        for n in range(1, 21):
            self.assertEqual(self.wait_for(os.path.join(
                self.dir, "job-%d" % n)), b"queued %d" % n)

    def test_many_files_behind_are_written_before_the_next_commit(self):
        self.patch(jh, "MAX_BEHIND", 3)
        calls = []
        real = self.journal.write_behind

        def write_behind(limit=None):
            calls.append(limit)
            return real(limit)
        self.journal.write_behind = write_behind
        to_helper, from_helper = self.start()
        # four commits arriving together: one round, four files behind
        os.write(to_helper, b"".join(
            jh.frame(jh.COMMIT, n, records(**{"job_%d" % n: b"queued"}))
            for n in range(1, 5)))
        answers = []
        while len(answers) < 4:
            answers += self.answer(from_helper)
        self.assertEqual([a[:2] for a in answers],
                         [(jh.DONE, n) for n in range(1, 5)])
        self.assertEqual(self.wait_for(os.path.join(self.dir, "job-4")),
                         b"queued")
        # all of them at once, not a slice at a time while idle
        self.assertEqual(calls, [None])

    def test_files_that_cannot_be_written_wait_for_the_next_commit(self):
        writes = []
        real = self.journal._files.write
        full = [True]

        def write(path, content, new=False):
            writes.append(os.path.basename(path))
            if full[0]:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(path, content, new)
        self.journal._files.write = write
        to_helper, from_helper = self.start()
        os.write(to_helper, jh.frame(jh.COMMIT, 1, records(job_1=b"one")))
        self.assertEqual(self.answer(from_helper), [(jh.DONE, 1, b"")])
        # one failed try, not a loop of them, and the helper still serves
        deadline = time.monotonic() + 10
        while not writes:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.005)
        time.sleep(0.05)
        self.assertEqual(writes, ["job-1"])
        full[0] = False
        os.write(to_helper, jh.frame(jh.COMMIT, 2, records(job_2=b"two")))
        self.assertEqual(self.answer(from_helper), [(jh.DONE, 2, b"")])
        self.assertEqual(self.wait_for(os.path.join(self.dir, "job-1")),
                         b"one")
        self.assertEqual(self.wait_for(os.path.join(self.dir, "job-2")),
                         b"two")

    def test_bad_requests_are_refused_by_number(self):
        answers = self.serve(jh.frame(jh.COMMIT, 1, b"garbage"),
                             jh.frame(b"X", 2),
                             jh.frame(jh.COMMIT, 3, records(job_1=b"ok")))
        self.assertEqual([a[:2] for a in answers],
                         [(jh.FAILED, 1), (jh.FAILED, 2), (jh.DONE, 3)])
        self.assertIn(b"garbled", answers[0][2])
        self.assertIn(b"unknown request", answers[1][2])

    def test_a_failed_flush_is_reported_and_leaves_no_torn_record(self):
        self.serve(jh.frame(jh.COMMIT, 1, records(job_1=b"first")))
        size = os.path.getsize(self.journal.path)
        real = os.fdatasync

        def broken(fd):
            raise OSError(5, "Input/output error")
        self.patch(os, "fdatasync", broken)
        answers = self.serve(jh.frame(jh.COMMIT, 2, records(job_1=b"x")))
        self.patch(os, "fdatasync", real)
        self.assertEqual(answers[0][:2], (jh.FAILED, 2))
        self.assertIn(b"Input/output error", answers[0][2])
        self.assertEqual(os.path.getsize(self.journal.path), size)


class JournalProcessTests(unittest.TestCase):
    """The master's end, with a real helper process."""

    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())
        self.store = JobStore(self.dir)
        self.store.lock()
        self.store.initialize()
        self.addCleanup(self.store.unlock)
        self.journal = jp.JournalProcess(reactor, self.store, 0o640)
        self.journal.startService()
        self.addCleanup(self.stop)

    def stop(self):
        if self.journal.running:
            return self.journal.stopService()

    def path(self, name):
        return os.path.join(self.dir, name)

    @defer.inlineCallbacks
    def test_commits_are_durable_files_in_place_after_a_stop(self):
        done = [self.journal.commit(self.path("job-%d" % n), b"job %d" % n)
                for n in range(1, 6)]
        done.append(self.journal.commit(self.path("job-1"), b"job 1 ran"))
        yield defer.gatherResults(done)
        yield self.journal.stopService()
        self.assertEqual(read(self.path("job-3")), b"job 3")
        self.assertEqual(read(self.path("job-1")), b"job 1 ran")
        self.assertEqual(os.path.getsize(self.path("journal")), 0)
        self.assertEqual(self.journal.started_helpers, 1)

    @defer.inlineCallbacks
    def test_the_helper_holds_the_queue_lock(self):
        yield self.journal.commit(self.path("job-1"), b"x")
        pid = self.journal._proto.transport.pid
        lock = os.readlink("/proc/%d/fd/%d" % (pid, jh.LOCK_FD))
        self.assertEqual(lock, self.store.lock_file)

    @defer.inlineCallbacks
    def test_a_dead_helper_fails_its_commits_and_a_new_one_starts(self):
        yield self.journal.commit(self.path("job-1"), b"one")
        proto = self.journal._proto
        proto.transport.signalProcess("KILL")
        yield proto.ended
        # the next commit starts another helper
        yield self.journal.commit(self.path("job-2"), b"two")
        self.assertEqual(self.journal.started_helpers, 2)
        self.flushLoggedErrors()
        # in flight when the helper dies: failed, not left hanging
        proto = self.journal._proto
        os.kill(proto.transport.pid, signal.SIGSTOP)
        d = self.journal.commit(self.path("job-3"), b"three")
        yield task.deferLater(reactor, 0.05, lambda: None)
        os.kill(proto.transport.pid, signal.SIGKILL)
        yield self.assertFailure(d, errors.JobQueueError)
        self.flushLoggedErrors()

    @defer.inlineCallbacks
    def test_no_helper_after_the_stop(self):
        yield self.journal.stopService()
        yield self.assertFailure(
            self.journal.commit(self.path("job-1"), b"late"),
            errors.JobQueueError)

    @defer.inlineCallbacks
    def test_the_helpers_warnings_reach_the_masters_log(self):
        yield self.journal.stopService()
        # a previous run's spares, the oldest turned into a link
        victim = self.path("victim")
        with open(victim, "wb") as f:
            f.write(b"precious")
        os.symlink(victim, self.path(".spare.0"))
        for n in range(1, 17):
            with open(self.path(".spare.%d" % n), "wb") as f:
                f.write(b"old")
        events = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        journal = jp.JournalProcess(reactor, self.store, 0o640)
        journal.startService()
        yield journal.commit(self.path("job-1"), b"one")
        yield journal.stopService()
        self.assertEqual(read(victim), b"precious")
        self.assertEqual(read(self.path("job-1")), b"one")
        texts = [formatEvent(e) for e in events]
        self.assertTrue(any("journal helper: warn: Not using" in t
                            and ".spare.0" in t for t in texts), texts)

    def test_a_path_outside_the_queue_is_refused(self):
        self.failureResultOf(self.journal.commit("/etc/passwd", b"x"),
                             ValueError)


class HelperStartTests(unittest.TestCase):

    def test_the_helper_starts_without_twisted_or_the_queue(self):
        # the master's first jobs wait for the helper's start
        code = ("import sys, ganeti.jqueue.journal_helper\n"
                "print(sorted(m for m in sys.modules if m.split('.')[0] =="
                " 'twisted' or m.startswith('ganeti.jqueue.q')))\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run([sys.executable, "-c", code], env=env,
                             check=True, capture_output=True, text=True)
        self.assertEqual(out.stdout.strip(), "[]")


class LockAfterHelperTests(unittest.TestCase):

    def test_a_new_master_waits_for_the_helper_of_a_dead_one(self):
        d = os.path.abspath(self.mktemp())
        code = ("import os, subprocess, sys\n"
                "from ganeti.jqueue.store import JobStore\n"
                "s = JobStore(sys.argv[1]); s.lock()\n"
                "subprocess.Popen(['sleep', '0.6'], pass_fds=[s.lock_fd])\n"
                "os._exit(0)\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        subprocess.run([sys.executable, "-c", code, d], env=env, check=True)
        store = JobStore(d)
        start = time.monotonic()
        store.lock()
        self.addCleanup(store.unlock)
        self.assertGreater(time.monotonic() - start, 0.2)

    def test_a_live_master_is_not_waited_for(self):
        d = os.path.abspath(self.mktemp())
        first = JobStore(d)
        first.lock()
        self.addCleanup(first.unlock)
        start = time.monotonic()
        self.assertRaises(errors.JobQueueLocked, JobStore(d).lock)
        self.assertLess(time.monotonic() - start, 1.0)
