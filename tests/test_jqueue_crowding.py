"""Readers cannot crowd out writers in the job queue: query jobs have a
budget of their own (in all and per client) and at most half the run
slots; finished jobs are archived when the queue nears its limit, so a
queue full of finished jobs still accepts new ones.  A real queue
directory, a fake clock and the fake executor of tests.test_jqueue."""

import os

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import errors
from ganeti import luxi
from ganeti.jqueue import budget as jq_budget
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


def query_op(name="inst1.example.com"):
    """A query-only opcode, as GET /2/instances/NAME/info submits."""
    return op("OP_INSTANCE_QUERY_DATA", instances=[name])


class QueryBudgetTests(QueueTestCase):

    def setUp(self):
        QueueTestCase.setUp(self)
        self.queue = self.make_queue(
            max_running=4, query_budget=jq_budget.QueryBudget(
                total=6, per_client=3))
        self.queue.load()

    def tearDown(self):
        finish_everything(self)
        QueueTestCase.tearDown(self)

    def submit_as(self, client, *ops):
        return self.successResultOf(self.queue.submit_job(list(ops),
                                                          client=client))

    def refused_as(self, client, *ops):
        failure = self.failureResultOf(
            self.queue.submit_job(list(ops), client=client),
            errors.JobQueueFull)
        return failure.value

    def test_a_query_flood_leaves_writes_accepted_and_running(self):
        for _ in range(3):
            self.submit_as("rapi address=192.0.2.1", query_op())
        err = self.refused_as("rapi address=192.0.2.1", query_op())
        self.assertEqual(err.args[1], jq_budget.OVER_CLIENT)
        self.assertIn("Too many unfinished query jobs of rapi"
                      " address=192.0.2.1: 3 (limit 3 per client,"
                      " ganeti-masterd --max-query-jobs-per-client)",
                      err.args[0])
        for _ in range(3):
            self.submit_as("rapi address=192.0.2.2", query_op())
        err = self.refused_as("rapi address=192.0.2.3", query_op())
        self.assertEqual(err.args[1], jq_budget.OVER_TOTAL)
        self.assertIn("Too many unfinished query jobs: 6 (limit 6,"
                      " ganeti-masterd --max-query-jobs); jobs that change"
                      " the cluster are still accepted", err.args[0])
        # the refused ones left no file
        self.assertEqual(len([n for n in os.listdir(self.dir)
                              if n.startswith("job-")]), 6)
        # a write of the flooding client itself is accepted ...
        write = self.submit_as("rapi address=192.0.2.1", op(duration=1))
        self.turn()
        # ... and runs: query jobs hold two of the four slots
        started = self.executor.job_ids()
        self.assertIn(write, started)
        self.assertEqual(len(started), 3)
        [call] = [c for c in self.executor.calls if c.job.id == write]
        call.start()
        self.assertEqual(self.status(write), "running")
        self.assertEqual(self.read_job(write)["ops"][0]["status"], "running")

    def test_finished_query_jobs_free_the_budget(self):
        ids = [self.submit_as("luxi uid=1000", query_op()) for _ in range(3)]
        self.refused_as("luxi uid=1000", query_op())
        # another client is not affected by this one's
        self.submit_as("luxi uid=1001", query_op())
        self.turn()
        first = [c for c in self.executor.calls if c.job.id == ids[0]][0]
        first.finish()
        self.assertEqual(self.status(ids[0]), "success")
        self.submit_as("luxi uid=1000", query_op())
        self.assertEqual(self.queue.query_budget.count("luxi uid=1000"), 3)

    def test_canceled_query_jobs_free_the_budget(self):
        ids = [self.submit_as("luxi uid=1000", query_op()) for _ in range(3)]
        self.assertEqual(self.queue.cancel_job(ids[2])[0], True)
        self.submit_as("luxi uid=1000", query_op())

    def test_jobs_that_change_something_are_never_refused(self):
        for client in ("luxi uid=0", "luxi uid=1"):
            for _ in range(3):
                self.submit_as(client, query_op())
        self.refused_as("luxi uid=0", query_op())
        # a job mixing a query and a change is not a query job
        for _ in range(10):
            self.submit_as("luxi uid=0", query_op(), op(duration=0))
        self.submit_as("luxi uid=0", op("OP_TEST_DELAY", duration=0))
        self.submit_as("luxi uid=0", op("OP_TAGS_SET", kind="cluster",
                                        tags=["a"]))

    def test_the_master_s_own_query_jobs_are_never_refused(self):
        for _ in range(8):
            self.submit_as(None, query_op())
        self.refused_as("luxi uid=0", query_op())

    def test_submit_many_refuses_only_the_jobs_over_budget(self):
        result = self.successResultOf(self.queue.submit_many_jobs(
            [[query_op()] for _ in range(4)] + [[op(duration=0)]],
            client="rapi user=alice"))
        self.assertEqual([r[0] for r in result],
                         [True, True, True, False, True])
        self.assertIn("limit 3 per client", result[3][1])

    def test_query_jobs_hold_at_most_half_the_run_slots(self):
        ids = [self.submit_as(None, query_op()) for _ in range(5)]
        self.turn()
        self.assertEqual(self.executor.job_ids(), ids[:2])
        write = self.submit_as(None, op(duration=0))
        later = self.submit_as(None, op(duration=0))
        self.turn()
        self.assertEqual(self.executor.job_ids(), ids[:2] + [write, later])
        # a query job that ends lets the next one start
        self.executor.calls[0].finish()
        self.turn()
        self.assertEqual(self.executor.job_ids()[-1], ids[2])

    def test_unfinished_query_jobs_found_at_start_count(self):
        ids = [self.submit_as(None, query_op()) for _ in range(6)]
        self.queue.shutdown()
        queue = self.make_queue(max_running=4,
                                query_budget=jq_budget.QueryBudget(
                                    total=6, per_client=3))
        report = queue.load()
        self.assertEqual(sorted(report.requeued), ids)
        self.queue = queue
        self.refused_as("luxi uid=1000", query_op())


class LuxiClientTests(QueueTestCase):
    """The master's luxi handler names the client of a job: the uid of the
    connection's peer, or the RAPI client SubmitJobFor names."""

    class _Master(object):
        def __init__(self, queue):
            self.queue = queue

    def setUp(self):
        QueueTestCase.setUp(self)
        self.queue = self.make_queue(query_budget=jq_budget.QueryBudget(
            total=10, per_client=1))
        self.queue.load()
        self.handler = masterd.MasterLuxiHandler(self._Master(self.queue))

    def tearDown(self):
        finish_everything(self)
        QueueTestCase.tearDown(self)

    def test_budget_per_uid_and_per_rapi_client(self):
        alice = luxi.Caller(pid=1, uid=1000, gid=1000)
        bob = luxi.Caller(pid=2, uid=1001, gid=1001)
        self.successResultOf(self.handler.submit_job([query_op()],
                                                     caller=alice))
        failure = self.failureResultOf(
            self.handler.submit_job([query_op()], caller=alice),
            errors.JobQueueFull)
        self.assertIn("query jobs of luxi uid=1000", failure.value.args[0])
        self.successResultOf(self.handler.submit_job([query_op()],
                                                     caller=bob))
        # RAPI submits for its clients over one connection: each counts
        self.successResultOf(self.handler.submit_job_for(
            "address=192.0.2.7", [query_op()], caller=alice))
        self.successResultOf(self.handler.submit_job_for(
            "user=jack", [query_op()], caller=alice))
        failure = self.failureResultOf(self.handler.submit_job_for(
            "user=jack", [query_op()], caller=alice), errors.JobQueueFull)
        self.assertIn("query jobs of rapi user=jack", failure.value.args[0])
        result = self.successResultOf(self.handler.submit_many_jobs(
            [[query_op()]], caller=bob))
        self.assertFalse(result[0][0])


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


class MasterdOptionTests(unittest.TestCase):

    def parse(self, *args):
        options = masterd.Options()
        # postOptions wants a config.data: check what it checks first
        options.parseArgs = lambda: None
        try:
            options.parseOptions(list(args))
        except Exception as err:
            return err
        return options

    def test_defaults_and_bad_values(self):
        from twisted.python import usage
        options = masterd.Options()
        self.assertEqual(options["max-query-jobs"], 200)
        self.assertEqual(options["max-query-jobs-per-client"], 20)
        for args, text in (
                (["--max-query-jobs", "-1"], "--max-query-jobs: must not be"
                 " negative (0: no limit), got -1"),
                (["--max-query-jobs-per-client", "-5"],
                 "--max-query-jobs-per-client: must not be negative"),
                (["--job-archive-age", "soon"], "--job-archive-age: 'soon'"
                 " is not a duration"),
                (["--job-archive-interval", "-1m"],
                 "--job-archive-interval: '-1m' must not be negative")):
            err = self.parse(*args)
            self.assertIsInstance(err, usage.UsageError, args)
            self.assertIn(text, str(err))
