"""Readers cannot crowd out writers in the job queue: query jobs have a
budget of their own (in all and per client, a client being a luxi peer's
uid or the RAPI client SubmitJobFor names) and at most half the run
slots.  A real queue directory, a fake clock and the fake executor of
tests.test_jqueue."""

import os

from twisted.trial import unittest

from ganeti import errors
from ganeti import luxi
from ganeti.jqueue import budget as jq_budget
from ganeti.server import masterd

from tests.test_jqueue import QueueTestCase, op
from tests.test_jqueue_archive import finish_everything


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
