"""Finished jobs leave the queue directory without anyone asking: the
oldest are archived when the queue nears its limit (so a queue full of
finished jobs still accepts new ones), and the master archives those that
ended long enough ago on a timer.  A real queue directory, a fake clock
and the fake executor of tests.test_jqueue."""

import os

from twisted.internet import defer

from ganeti import errors
from ganeti.server import masterd
from ganeti.utils.writer import InlineWriter

from tests.test_jqueue import QueueTestCase, T0, op


def finish_everything(test):
    """Let every job run and end (none is left on the clock)."""
    test.turn()
    while test.executor.pending():
        for call in test.executor.pending():
            call.finish()
        test.turn()


class HeldArchives(InlineWriter):
    """Writes at once, except archivings: they wait for :meth:`release`."""

    def __init__(self):
        self.held = []

    def call(self, fn, *args, **kwargs):
        if getattr(fn, "__name__", None) != "archive_jobs":
            return InlineWriter.call(self, fn, *args, **kwargs)
        d = defer.Deferred()
        self.held.append((d, fn, args, kwargs))
        return d

    def release(self):
        held, self.held = self.held, []
        for d, fn, args, kwargs in held:
            d.callback(fn(*args, **kwargs))


class ArchiveAtTheLimitTests(QueueTestCase):
    """A queue at its limit with finished jobs accepts a new job by
    archiving the oldest finished ones (by end time) first."""

    LIMIT = 10

    def tearDown(self):
        finish_everything(self)
        QueueTestCase.tearDown(self)

    def fill(self, count, finish_order=None, writer=None):
        """``count`` jobs, finished in ``finish_order`` (indices), one
        second apart, in the queue's directory; then ``self.queue`` a
        queue of LIMIT jobs at most on it.  The jobs' ids."""
        queue = self.make_queue(size_limit=100)
        queue.load()
        ids = [self.successResultOf(queue.submit_job([op()]))
               for _ in range(count)]
        self.clock.advance(0)
        calls = {c.job.id: c for c in self.executor.calls}
        for index in finish_order or range(count):
            self.clock.advance(1)
            calls[ids[index]].finish()
        self.successResultOf(queue.shutdown())
        self.queue = self.make_queue(size_limit=self.LIMIT, writer=writer)
        self.queue.load()
        return ids

    def archived(self, job_id):
        return os.path.exists(os.path.join(self.dir, "archive", "0",
                                           "job-%d" % job_id))

    def test_full_of_finished_jobs_accepts_a_new_one(self):
        # the jobs end in another order than their ids
        order = [3, 7, 0, 9, 1, 2, 4, 5, 6, 8]
        ids = self.fill(10, order)
        new = self.submit(op())
        self.assertEqual(new, 11)
        # archived down to a fifth below the limit: the three that ended
        # first, whatever their ids
        oldest = sorted(ids[i] for i in order[:3])
        self.assertEqual([j for j in ids if self.archived(j)], oldest)
        self.assertEqual(sorted(r[0] for r in
                                self.queue.query_jobs(None, ["id"])),
                         sorted(set(ids) - set(oldest)) + [new])
        # still found by id, in the archive
        self.assertEqual(self.queue.query_jobs([oldest[0]],
                                               ["status", "archived"]),
                         [["success", True]])

    def test_nearing_the_limit_archives_in_the_background(self):
        self.fill(8)
        # 9 of 10: below the high-water mark, nothing archived
        self.submit(op())
        self.assertFalse(os.path.exists(os.path.join(self.dir, "archive",
                                                     "0")))
        # 10 of 10: past it, the two oldest finished go
        self.submit(op())
        self.assertEqual(len(os.listdir(os.path.join(self.dir, "archive",
                                                     "0"))), 2)

    def test_full_of_unfinished_jobs_refuses(self):
        queue = self.make_queue(size_limit=3)
        queue.load()
        for _ in range(3):
            self.successResultOf(queue.submit_job([op()]))
        failure = self.failureResultOf(queue.submit_job([op()]),
                                       errors.JobQueueFull)
        self.assertEqual(failure.value.args[0],
                         "The job queue holds 3 jobs (limit 3), 3 of them"
                         " unfinished; new jobs are refused until some"
                         " finish")
        self.assertEqual(sorted(n for n in os.listdir(self.dir)
                                if n.startswith("job-")),
                         ["job-1", "job-2", "job-3"])
        self.queue = queue

    def test_a_submitter_waits_for_the_archive_that_makes_room(self):
        writer = HeldArchives()
        ids = self.fill(10, writer=writer)
        waiting = self.queue.submit_job([op()])
        self.assertNoResult(waiting)
        # asked for a job already on its way, ArchiveJob waits for it too
        asked = self.queue.archive_job(ids[0])
        self.assertNoResult(asked)
        # the jobs being archived count as gone: the next submission does
        # not wait
        self.assertEqual(self.successResultOf(
            self.queue.submit_job([op()])), 11)
        # the first client went away: the archive goes on all the same
        waiting.cancel()
        self.failureResultOf(waiting, defer.CancelledError)
        writer.release()
        self.assertTrue(self.successResultOf(asked))
        self.assertEqual([j for j in ids if self.archived(j)], ids[:3])
        names = [n for n in os.listdir(self.dir) if n.startswith("job-")]
        self.assertEqual(len(names), 8)
        self.assertEqual(len(self.queue.query_jobs(None, ["id"])), 8)
        # and the room it made is free again
        for _ in range(2):
            self.successResultOf(self.queue.submit_job([op()]))


class ArchiveTimerTests(QueueTestCase):
    """The master archives jobs that ended long enough ago on a timer."""

    class _Jobs(object):
        queue = None

    def test_old_finished_jobs_archived_by_the_timer(self):
        jobs = self._Jobs()
        jobs.queue = self.queue
        first = self.submit(op())
        second = self.submit(op())
        running = self.submit(op())
        self.turn()
        self.executor.calls[0].finish()            # ends at T0
        self.clock.advance(5 * 3600)
        self.executor.calls[1].finish()            # ends at T0 + 5 h
        timer = masterd.JobArchiveService(jobs, self.clock, interval=300,
                                          age=6 * 3600)
        timer.startService()
        self.addCleanup(timer.stopService)
        self.assertEqual(self.queue.query_jobs(None, ["id"]),
                         [[first], [second], [running]])
        # an hour later the first ended six hours ago: archived at the
        # next run
        self.clock.advance(3600)
        self.assertEqual(self.queue.query_jobs(None, ["id"]),
                         [[second], [running]])
        self.assertTrue(os.path.exists(os.path.join(
            self.dir, "archive", "0", "job-%d" % first)))
        # the second's turn five hours later; the unfinished one stays
        self.clock.advance(5 * 3600)
        self.assertEqual(self.queue.query_jobs(None, ["id"]), [[running]])
        self.executor.calls[2].finish()
        self.assertEqual(self.clock.seconds() - T0, 11 * 3600)
