"""The job queue's journal: group commit, recovery after a crash that lost
the files written behind it, checkpoints."""

import os

from twisted.internet import defer, reactor
from twisted.internet.task import Clock
from twisted.trial import unittest

from ganeti import jqueue
from ganeti import opcodes
from ganeti.jqueue import journal as jjournal
from ganeti.jqueue.store import JobStore
from ganeti.utils.writer import OrderedWriter


class Immediate(object):
    def execute(self, job, op_index, op_input, feedback_fn):
        feedback_fn.notify_running()
        return defer.succeed(None)


def read(path):
    with open(path, "rb") as f:
        return f.read()


class JournalTests(unittest.TestCase):

    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.journal = jjournal.Journal(self.dir, 0o640)
        self.addCleanup(self.journal.close)

    def path(self, name):
        return os.path.join(self.dir, name)

    def commit(self, files):
        self.journal.commit(files)()

    def test_commit_writes_the_files_and_the_journal(self):
        self.commit({self.path("job-1"): b"one", self.path("job-2"): b"two"})
        self.assertEqual(read(self.path("job-1")), b"one")
        self.assertEqual(read(self.path("job-2")), b"two")
        records, end = jjournal.decode_records(read(self.journal.path))
        self.assertEqual(records, [("job-1", b"one"), ("job-2", b"two")])
        self.assertEqual(end, os.path.getsize(self.journal.path))
        self.assertEqual(os.stat(self.path("job-1")).st_mode & 0o777, 0o640)
        self.assertEqual([n for n in os.listdir(self.dir)
                          if n.startswith(".")], [])

    def test_recover_restores_files_the_crash_lost(self):
        self.commit({self.path("job-1"): b"queued"})
        self.commit({self.path("job-1"): b"running",
                             self.path("job-2"): b"queued"})
        self.commit({self.path("job-1"): b"success"})
        self.journal.close()
        # the files written behind the journal never reached the disk:
        # one is gone, one is empty, one is old
        os.unlink(self.path("job-2"))
        with open(self.path("job-1"), "wb") as f:
            f.write(b"")
        restored = jjournal.Journal(self.dir, 0o640).recover()
        self.assertEqual(restored, ["job-1", "job-2"])
        self.assertEqual(read(self.path("job-1")), b"success")
        self.assertEqual(read(self.path("job-2")), b"queued")
        self.assertEqual(os.path.getsize(self.journal.path), 0)

    def test_a_torn_last_record_is_ignored(self):
        self.commit({self.path("job-1"): b"queued"})
        self.commit({self.path("job-1"): b"success"})
        self.journal.close()
        size = os.path.getsize(self.journal.path)
        # the crash cut the second write short: never acknowledged
        with open(self.journal.path, "r+b") as f:
            f.truncate(size - 3)
        os.unlink(self.path("job-1"))
        jjournal.Journal(self.dir, 0o640).recover()
        self.assertEqual(read(self.path("job-1")), b"queued")

    def test_a_garbled_record_ends_the_replay(self):
        self.commit({self.path("job-1"): b"queued"})
        self.commit({self.path("job-2"): b"queued"})
        self.journal.close()
        raw = bytearray(read(self.journal.path))
        raw[-2] ^= 0xFF         # job-2's content no longer matches its CRC
        with open(self.journal.path, "wb") as f:
            f.write(raw)
        os.unlink(self.path("job-1"))
        os.unlink(self.path("job-2"))
        jjournal.Journal(self.dir, 0o640).recover()
        self.assertEqual(sorted(os.listdir(self.dir)), ["job-1", "journal"])

    def test_a_failed_write_in_place_keeps_the_journal(self):
        self.commit({self.path("job-1"): b"old"})
        write_behind = self.journal.commit({self.path("job-1"): b"new"})
        real_write = self.journal._files.write

        def disk_full(path, content, new=False):
            raise OSError(28, "No space left on device", path)
        self.journal._files.write = disk_full
        self.assertRaises(OSError, write_behind)
        self.assertRaises(OSError, self.journal.checkpoint)
        self.assertGreater(os.path.getsize(self.journal.path), 0)
        self.assertEqual(read(self.path("job-1")), b"old")
        self.journal._files.write = real_write
        self.journal.checkpoint()
        self.assertEqual(read(self.path("job-1")), b"new")
        self.assertEqual(os.path.getsize(self.journal.path), 0)

    def test_checkpoint_empties_the_journal(self):
        self.commit({self.path("job-1"): b"x"})
        self.journal.checkpoint()
        self.assertEqual(os.path.getsize(self.journal.path), 0)
        self.assertEqual(self.journal.checkpoints, 1)
        # nothing to recover: the files alone hold every change
        self.assertEqual(jjournal.Journal(self.dir, 0o640).recover(), [])
        self.assertEqual(read(self.path("job-1")), b"x")

    def test_checkpoint_when_the_journal_grows_past_its_limit(self):
        self.journal.checkpoint_bytes = 1000
        for n in range(20):
            self.commit({self.path("job-%d" % n): b"x" * 100})
        self.assertGreaterEqual(self.journal.checkpoints, 1)
        self.assertLess(os.path.getsize(self.journal.path), 1000)

    def test_a_rotation_checkpoints_while_commits_go_on(self):
        self.journal.background = True
        self.journal.checkpoint_bytes = 1000
        for n in range(40):
            self.commit({self.path("job-%d" % n): b"x" * 100,
                         self.path("job-0"): b"v%d" % n})
        self.journal._rotation.result(10)
        self.journal.commit({self.path("job-0"): b"last"})()
        self.assertGreaterEqual(self.journal.checkpoints, 1)
        self.assertLess(os.path.getsize(self.journal.path), 1000)
        self.journal.checkpoint()
        self.assertFalse(os.path.exists(self.journal.old_path))
        self.assertEqual(os.path.getsize(self.journal.path), 0)
        self.assertEqual(read(self.path("job-0")), b"last")

    def test_recovery_replays_a_cut_off_rotation_then_the_new_journal(self):
        self.commit({self.path("job-1"): b"queued",
                     self.path("job-2"): b"queued"})
        self.journal.close()
        os.rename(self.journal.path, self.journal.old_path)
        journal = jjournal.Journal(self.dir, 0o640)
        journal.commit({self.path("job-1"): b"success"})()
        journal.close()
        # the crash lost both files written behind the journals
        os.unlink(self.path("job-1"))
        os.unlink(self.path("job-2"))
        restored = jjournal.Journal(self.dir, 0o640).recover()
        self.assertEqual(restored, ["job-1", "job-2"])
        self.assertEqual(read(self.path("job-1")), b"success")
        self.assertEqual(read(self.path("job-2")), b"queued")
        self.assertFalse(os.path.exists(self.journal.old_path))

    def test_only_files_of_the_queue_directory(self):
        self.assertRaises(ValueError, self.journal.commit,
                          {"/etc/passwd": b"x"})
        self.assertFalse(os.path.exists("/etc/passwd.journal-test"))


class QueueJournalTests(unittest.TestCase):
    """The queue with the master daemon's writer, after a crash that lost
    what was written behind the journal."""

    @defer.inlineCallbacks
    def test_acknowledged_jobs_survive_lost_job_files(self):
        qdir = os.path.abspath(self.mktemp())
        writer = OrderedWriter(reactor)
        writer.startService()
        queue = jqueue.JobQueue(qdir, Immediate(), clock=reactor,
                                writer=writer)
        queue.load()
        ids = yield defer.gatherResults([
            queue.submit_job([opcodes.OpTestDelay(duration=0)])
            for _ in range(30)])
        for job_id in ids:
            status = yield queue.wait_for_job_change(
                job_id, ["status"], ["queued"], None, 5)
            while status[0][0] not in jqueue.FINALIZED:
                status = yield queue.wait_for_job_change(
                    job_id, ["status"], status[0], None, 5)
        yield writer.drain()
        # several jobs shared each flush
        self.assertLess(queue._store.journal.commits, 60)
        # the crash: no shutdown; the page cache lost the job files
        store = queue._store
        store.unlock()
        yield writer.stopService()
        for job_id in ids:
            os.unlink(store.job_path(job_id))
        os.unlink(store.serial_file)
        queue2 = jqueue.JobQueue(qdir, Immediate(), clock=Clock())
        report = queue2.load()
        self.addCleanup(queue2._store.unlock)
        self.assertEqual(report.finalized, 30)
        self.assertEqual(queue2.query_jobs(ids, ["status"]),
                         [["success"]] * 30)
        # no id is handed out twice
        new_id = yield queue2.submit_job([opcodes.OpTestDelay(duration=0)])
        self.assertEqual(new_id, max(ids) + 1)

    @defer.inlineCallbacks
    def test_archived_jobs_do_not_come_back(self):
        qdir = os.path.abspath(self.mktemp())
        queue = jqueue.JobQueue(qdir, Immediate(), clock=reactor)
        queue.load()
        job_id = yield queue.submit_job([opcodes.OpTestDelay(duration=0)])
        status = ["queued"]
        while status[0] != "success":
            answer = yield queue.wait_for_job_change(job_id, ["status"],
                                                     status, None, 5)
            status = answer[0]
        archived = yield queue.archive_job(job_id)
        self.assertTrue(archived)
        queue._store.unlock()
        store = JobStore(qdir)
        store.lock()
        self.addCleanup(store.unlock)
        store.initialize()
        self.assertEqual(store.list_job_ids(), [])
        self.assertIsNotNone(store.read_job(job_id))


class GanetiReadsTheFilesTests(unittest.TestCase):
    """The job files written behind the journal stay in Ganeti's queue
    format: Ganeti 3.0's own job loader reads them."""

    SCRIPT = """
import json, sys
from ganeti import jqueue, serializer
for path in sys.argv[1:]:
    with open(path) as f:
        state = serializer.LoadJson(f.read())
    job = jqueue._QueuedJob.Restore(None, state, False, False)
    print(job.id, job.CalcStatus(), [op.input.OP_ID for op in job.ops])
"""

    def setUp(self):
        from tests import ganeti_peer
        ganeti_peer.skip_unless_available()
        self.peer = ganeti_peer

    @defer.inlineCallbacks
    def test_ganeti_loads_jobs_written_through_the_journal(self):
        qdir = os.path.abspath(self.mktemp())
        writer = OrderedWriter(reactor)
        writer.startService()
        self.addCleanup(writer.stopService)
        queue = jqueue.JobQueue(qdir, Immediate(), clock=reactor,
                                writer=writer)
        queue.load()
        self.addCleanup(queue._store.unlock)
        ids = yield defer.gatherResults([
            queue.submit_job([opcodes.OpTestDelay(duration=0)])
            for _ in range(3)])
        for job_id in ids:
            answer = yield queue.wait_for_job_change(
                job_id, ["status"], ["queued"], None, 5)
            while answer[0][0] != "success":
                answer = yield queue.wait_for_job_change(
                    job_id, ["status"], answer[0], None, 5)
        yield writer.drain()
        out, err, code = yield self.peer.run_python(
            self.SCRIPT, [queue._store.job_path(j) for j in ids])
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines(), [
            "%d success ['OP_TEST_DELAY']" % j for j in ids])


class WriteBehindTests(unittest.TestCase):

    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.path = os.path.join(self.dir, "job-1")
        self.journal = jjournal.Journal(self.dir, 0o640)
        self.addCleanup(self.journal.close)

    def test_files_are_written_in_place_after_the_answer(self):
        path = self.path
        write_behind = self.journal.commit({path: b"queued"})
        # durable in the journal, not yet in place: the caller answers
        # first (a crash now is repaired by recovery)
        self.assertFalse(os.path.exists(path))
        write_behind()
        self.assertEqual(read(path), b"queued")
        write_behind = self.journal.commit({path: b"running"})
        self.assertEqual(read(path), b"queued")
        write_behind()
        self.assertEqual(read(path), b"running")

    def test_the_latest_of_several_commits_is_written_once(self):
        written = []
        real = self.journal._files.write

        def write(path, content, new=False):
            written.append(content)
            return real(path, content, new)
        self.journal._files.write = write
        self.journal.commit({self.path: b"queued"})
        write_behind = self.journal.commit({self.path: b"success"})
        write_behind()
        self.assertEqual(read(self.path), b"success")
        self.assertEqual(written, [b"success"])

    def test_a_new_file_lost_before_its_write_comes_back(self):
        self.journal.commit({self.path: b"queued"})
        # the process dies before writing the file in place
        self.journal.close()
        self.assertEqual(jjournal.Journal(self.dir, 0o640).recover(),
                         ["job-1"])
        self.assertEqual(read(self.path), b"queued")
