"""Tests for ganeti.jqueue: a real queue directory, a fake clock and a fake
executor whose Deferreds the tests fire.  Jobs are OpCode objects, as luxi
hands them to the queue."""

import json
import os

from twisted.internet import defer, task
from twisted.trial import unittest

from ganeti import errors
from ganeti import jqueue
from ganeti import opcodes
from ganeti.jqueue import model as jq_model
from ganeti.jqueue import queue as jq_queue
from ganeti.jqueue import store as jq_store

from tests.fakes import ClockTestCase

T0 = 1000000.0


class _Call(object):
    """One ``execute`` call the fake executor received."""

    def __init__(self, job, index, op, ctx):
        self.job = job
        self.index = index
        self.op = op
        self.ctx = ctx
        self.cancelled = False
        self.deferred = defer.Deferred(self._cancel)

    def _cancel(self, d):
        self.cancelled = True
        d.errback(defer.CancelledError())

    def start(self):
        self.ctx.notify_running()
        return self

    def finish(self, result=True):
        self.deferred.callback(result)

    def fail(self, err):
        self.deferred.errback(err)


class FakeExecutor(object):
    """Records calls; with ``auto`` finishes opcodes immediately with their
    "result" parameter (OP_TEST_DUMMY), or True."""

    def __init__(self, auto=False):
        self.auto = auto
        self.calls = []

    def execute(self, job, op_index, op_input, feedback_fn):
        call = _Call(job, op_index, op_input, feedback_fn)
        self.calls.append(call)
        if self.auto:
            feedback_fn.notify_running()
            return defer.succeed(getattr(op_input, "result", True))
        return call.deferred

    def pending(self):
        return [c for c in self.calls if not c.deferred.called]

    def job_ids(self):
        return [c.job.id for c in self.calls]


def op(op_id="OP_TEST_DELAY", **params):
    """A new opcode (by default OP_TEST_DELAY of 0 seconds)."""
    if op_id == "OP_TEST_DELAY":
        params.setdefault("duration", 0)
    return opcodes.opcode_class(op_id)(**params)


class QueueTestCase(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.dir = os.path.abspath(self.mktemp())
        self.clock.advance(T0)
        self.executor = FakeExecutor()
        self.queues = []
        self.queue = self.make_queue()
        self.report = self.queue.load()

    def make_queue(self, executor=None, clock=None, **kwargs):
        # Another queue on the directory stands for a restarted master: the
        # old process is gone, and the queue's lock with it.
        for old in self.queues:
            old._store.unlock()
        queue = jqueue.JobQueue(self.dir, executor or self.executor,
                                clock=clock or self.clock, **kwargs)
        self.queues.append(queue)
        self.addCleanup(queue._store.unlock)
        return queue

    def submit(self, *ops, **kwargs):
        queue = kwargs.pop("queue", self.queue)
        return self.successResultOf(queue.submit_job(list(ops)))

    def turn(self):
        """Let the queue start jobs (it does so on the next reactor turn)."""
        self.clock.advance(0)

    def job_file(self, job_id):
        return os.path.join(self.dir, "job-%d" % job_id)

    def read_job(self, job_id):
        with open(self.job_file(job_id)) as f:
            return json.load(f)

    def field(self, job_id, name):
        return self.queue.query_jobs([job_id], [name])[0][0]

    def status(self, job_id):
        return self.field(job_id, "status")


class SubmitTests(QueueTestCase):

    def test_new_queue_files(self):
        with open(os.path.join(self.dir, "version")) as f:
            self.assertEqual(f.read(), "1\n")
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "archive")))
        self.assertEqual(self.report, jqueue.LoadReport())

    def test_submit_persists_before_returning(self):
        d = self.queue.submit_job([op(duration=0), op(duration=1)])
        job_id = self.successResultOf(d)
        self.assertEqual(job_id, 1)
        data = self.read_job(1)
        self.assertEqual(data["id"], 1)
        self.assertEqual([o["status"] for o in data["ops"]],
                         ["queued", "queued"])
        self.assertEqual(data["received_timestamp"], [int(T0), 0])
        self.assertEqual(data["ops"][0]["input"]["OP_ID"], "OP_TEST_DELAY")
        # nothing ran yet: jobs start on the next reactor turn
        self.assertEqual(self.executor.calls, [])
        self.assertEqual(self.status(1), "queued")
        self.turn()
        # the serial file follows on the next turn (load() also looks at
        # the job files, so it may lag behind them)
        with open(os.path.join(self.dir, "serial")) as f:
            self.assertEqual(f.read(), "1\n")
        self.assertEqual(len(self.executor.calls), 1)
        self.assertEqual(self.status(1), "waiting")
        self.assertEqual(self.read_job(1)["ops"][0]["status"], "waiting")
        self.executor.calls[0].finish()
        self.executor.calls[1].finish()
        self.assertEqual(self.status(1), "success")

    def test_ids_increase(self):
        self.assertEqual([self.submit(op()) for _ in range(3)], [1, 2, 3])
        self.turn()
        for call in self.executor.calls:
            call.finish()

    def test_refused_job_writes_nothing(self):
        failure = self.failureResultOf(
            self.queue.submit_job([op(), op(depends=[["1", []]])]),
            errors.OpPrereqError)
        self.assertIn("Opcode 1: parameter 'depends'", failure.value.args[0])
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["archive", "lock", "version"])
        self.turn()
        self.assertEqual(self.executor.calls, [])

    def test_generic_checks(self):
        cases = [
            [],
            "OP_TEST_DELAY",
            [op(depends=[[-1, []]])],                    # relative, alone
            [op(depends=[["1", []]])],                   # not a number
        ]
        for ops in cases:
            self.failureResultOf(self.queue.submit_job(ops),
                                 errors.OpPrereqError)
        # the queue takes OpCode objects only
        self.failureResultOf(self.queue.submit_job(
            [{"OP_ID": "OP_TEST_DELAY", "duration": 1}]),
            errors.ProgrammerError)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["archive", "lock", "version"])
        self.turn()

    def test_opcodes_are_checked_when_made(self):
        # what the queue no longer checks itself: a wrong priority,
        # dependency or a value that does not serialise
        for params in [{"priority": 20}, {"priority": "high"},
                       {"depends": [[1]]}, {"depends": [[1, ["running"]]]},
                       {"duration": object()}]:
            self.assertRaises(errors.OpPrereqError, op, **params)
        self.assertRaises(errors.OpPrereqError, op, "OP_TEST_DUMMY",
                          result={"x": object()})

    def test_opcode_priority_and_reason(self):
        job_id = self.submit(op(priority=-10, reason=[["gnt:client:x", "y",
                                                       5]]), op())
        self.assertEqual(self.field(job_id, "oppriority"), [-10, 0])
        self.assertEqual(self.field(job_id, "priority"), -10)
        reason = self.field(job_id, "ops")[0]["reason"]
        self.assertEqual(reason[0], ["gnt:client:x", "y", 5])
        self.assertEqual(reason[1][:2], ["gnt:opcode:op_test_delay",
                                         "job=1;index=0"])
        self.assertEqual(reason[1][2], int(T0) * 1000000000)
        self.queue.cancel_job(job_id)
        self.turn()

    def test_queries_and_executors_get_copies(self):
        job_id = self.submit(op(duration=1))
        self.field(job_id, "ops")[0]["duration"] = 42
        self.assertEqual(self.field(job_id, "ops")[0]["duration"], 1)
        self.turn()
        [call] = self.executor.calls
        call.op.duration = 99
        self.assertEqual(self.field(job_id, "ops")[0]["duration"], 1)
        self.queue.cancel_job(job_id)

    def test_dependencies_and_summary(self):
        result = self.successResultOf(self.queue.submit_many_jobs([
            [op(duration=0)], [op(duration=1, depends=[[-1, ["success"]]])]]))
        self.assertEqual(result, [[True, 1], [True, 2]])
        self.assertEqual(self.queue.query_jobs([2], ["summary"])[0][0],
                         ["TEST_DELAY(1.0)"])
        self.assertEqual(
            self.queue.query_jobs([2], ["ops"])[0][0][0]["depends"],
            [[1, ["success"]]])
        self.queue.cancel_job(1)
        self.turn()
        self.assertEqual(self.queue.query_jobs([2], ["status"]),
                         [["canceled"]])

    def test_queue_full(self):
        queue = self.make_queue(size_limit=2)
        queue.load()
        self.successResultOf(queue.submit_job([op()]))
        self.successResultOf(queue.submit_job([op()]))
        self.failureResultOf(queue.submit_job([op()]), errors.JobQueueFull)
        queue.cancel_job(1)
        queue.cancel_job(2)
        self.assertTrue(self.successResultOf(queue.archive_job(1)))
        self.successResultOf(queue.submit_job([op()]))
        queue.cancel_job(3)
        self.turn()

    def test_used_before_load(self):
        queue = self.make_queue()
        self.failureResultOf(queue.submit_job([op()]),
                             errors.ProgrammerError)

    def test_submit_many(self):
        result = self.successResultOf(self.queue.submit_many_jobs(
            [[op()], [op(depends=[[-5, []]])], [op(), op()]]))
        self.assertEqual(result[0], [True, 1])
        self.assertFalse(result[1][0])
        self.assertIn("relative job id -5", result[1][1])
        self.assertEqual(result[2], [True, 2])
        self.queue.cancel_job(1)
        self.queue.cancel_job(2)
        self.turn()
        with open(os.path.join(self.dir, "serial")) as f:
            self.assertEqual(f.read(), "2\n")

    def test_crash_before_serial_written(self):
        self.submit(op())
        self.submit(op())
        self.assertFalse(os.path.exists(os.path.join(self.dir, "serial")))
        clock = task.Clock()
        queue = self.make_queue(clock=clock)
        self.assertEqual(queue.load().requeued, (1, 2))
        job_id = self.successResultOf(queue.submit_job([op()]))
        self.assertEqual(job_id, 3)
        self.queue.shutdown()  # the old one must not run anything now


class ExecutionTests(QueueTestCase):

    def test_two_opcodes_success(self):
        job_id = self.submit(op(duration=0), op(duration=1))
        self.clock.advance(1)                                   # T0 + 1
        [call] = self.executor.calls
        self.assertEqual((call.job.id, call.index), (job_id, 0))
        self.assertEqual(call.op.duration, 0)
        self.assertEqual(self.field(job_id, "opstatus"),
                         ["waiting", "queued"])
        self.assertEqual(self.field(job_id, "start_ts"), [int(T0) + 1, 0])
        self.clock.advance(0.5)
        call.start()
        self.assertEqual(self.status(job_id), "running")
        self.assertEqual(self.read_job(job_id)["ops"][0]["status"],
                         "running")
        self.assertEqual(self.field(job_id, "opexec"),
                         [[int(T0) + 1, 500000], None])
        self.clock.advance(0.5)
        call.finish({"slept": 0})
        self.assertEqual(self.field(job_id, "opstatus"),
                         ["success", "waiting"])
        self.assertEqual(self.status(job_id), "waiting")
        call2 = self.executor.calls[1]
        self.assertEqual(call2.index, 1)
        call2.start()
        self.clock.advance(1)
        call2.finish(None)
        row = self.queue.query_jobs([job_id], [
            "status", "opstatus", "opresult", "opstart", "opexec", "opend",
            "received_ts", "start_ts", "end_ts"])[0]
        t = int(T0)
        self.assertEqual(row, [
            "success", ["success", "success"], [{"slept": 0}, None],
            [[t + 1, 0], [t + 2, 0]],
            [[t + 1, 500000], [t + 2, 0]],
            [[t + 2, 0], [t + 3, 0]],
            [t, 0], [t + 1, 0], [t + 3, 0]])
        data = self.read_job(job_id)
        self.assertEqual([o["status"] for o in data["ops"]],
                         ["success", "success"])
        self.assertEqual(data["end_timestamp"], [t + 3, 0])

    def test_error_in_first_opcode(self):
        job_id = self.submit(op(), op())
        self.turn()
        [call] = self.executor.calls
        call.start()
        call.fail(errors.OpPrereqError("Instance inst1 is down",
                                       errors.ECODE_STATE))
        self.assertEqual(len(self.executor.calls), 1)
        self.assertEqual(self.status(job_id), "error")
        self.assertEqual(self.field(job_id, "opstatus"), ["error", "error"])
        self.assertEqual(self.field(job_id, "opresult"), [
            ["OpPrereqError", ["Instance inst1 is down", "wrong_state"]],
            ["OpExecError", ["Error in previous opcode"]]])
        self.assertEqual(self.read_job(job_id)["ops"][1]["status"], "error")
        self.assertIsNotNone(self.field(job_id, "end_ts"))

    def test_unexpected_exception(self):
        job_id = self.submit(op())
        self.turn()
        self.executor.calls[0].fail(ValueError("boom"))
        self.assertEqual(self.field(job_id, "opresult"),
                         [["OpExecError", ["boom"]]])
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 1)

    def test_synchronous_exception(self):
        class Broken(object):
            def execute(self, *args):
                raise errors.OpExecError("no such opcode")
        queue = self.make_queue(executor=Broken())
        queue.load()
        job_id = self.successResultOf(queue.submit_job([op()]))
        self.turn()
        self.assertEqual(queue.query_jobs([job_id], ["opresult"])[0][0],
                         [["OpExecError", ["no such opcode"]]])

    def test_result_not_serialisable(self):
        job_id = self.submit(op())
        self.turn()
        self.executor.calls[0].finish(object())
        self.assertEqual(self.status(job_id), "error")
        self.assertEqual(self.field(job_id, "opresult")[0][0],
                         "OpExecError")

    def test_log_entries(self):
        job_id = self.submit(op(), op())
        self.turn()
        ctx = self.executor.calls[0].ctx
        ctx("acquiring locks")
        ctx.notify_running()
        ctx(["one", "two"], type=jqueue.ELOG_MESSAGE_LIST)
        ctx({"x": 1}, type="remote-import")
        t = [int(T0), 0]
        self.assertEqual(self.field(job_id, "oplog"), [[
            [1, t, "message", "acquiring locks"],
            [2, t, "message", "one"],
            [3, t, "message", "two"],
            [4, t, "remote-import", {"x": 1}]], []])
        # log entries reach the disk in a batch, shortly after
        self.assertEqual(len(self.read_job(job_id)["ops"][0]["log"]), 1)
        self.clock.advance(jq_queue.LOG_FLUSH_DELAY)
        self.assertEqual(len(self.read_job(job_id)["ops"][0]["log"]), 4)
        self.executor.calls[0].finish()
        ctx("too late")   # ignored
        ctx2 = self.executor.calls[1].ctx
        ctx2("second opcode")
        self.executor.calls[1].finish()
        log = self.field(job_id, "oplog")
        self.assertEqual(log[1], [[5, [int(T0) + 1, 0], "message",
                                   "second opcode"]])
        # the finished job was written with all entries, timer gone
        self.assertEqual(self.read_job(job_id)["ops"][1]["log"], log[1])

    def test_retry_goes_back_to_waiting(self):
        job_id = self.submit(op())
        self.turn()
        ctx = self.executor.calls[0].ctx
        ctx.notify_running()
        ctx.notify_waiting()
        self.assertEqual(self.status(job_id), "waiting")
        self.assertEqual(self.read_job(job_id)["ops"][0]["status"], "waiting")
        ctx.notify_running()
        self.assertEqual(self.status(job_id), "running")
        self.assertEqual(ctx.priority, 0)
        self.executor.calls[0].finish()
        self.assertRaises(errors.ProgrammerError, ctx.notify_running)

    def test_unbatched_log(self):
        queue = self.make_queue(log_flush_delay=0)
        queue.load()
        job_id = self.successResultOf(queue.submit_job([op()]))
        self.turn()
        self.executor.calls[0].ctx("now")
        self.assertEqual(len(self.read_job(job_id)["ops"][0]["log"]), 1)
        self.executor.calls[0].finish()

    def test_opcode_submits_jobs(self):
        job_id = self.submit(op())
        self.turn()
        d = self.executor.calls[0].ctx.submit_jobs([[op()], [op()]])
        self.assertEqual(self.successResultOf(d), [[True, 2], [True, 3]])
        self.executor.calls[0].finish([[True, 2], [True, 3]])
        self.turn()
        self.assertEqual(self.executor.job_ids(), [job_id, 2, 3])
        self.executor.calls[1].finish()
        self.executor.calls[2].finish()

    def test_summary(self):
        job_id = self.submit(op("OP_INSTANCE_STARTUP", instance_name="inst1"),
                             op("OP_NODE_SET_PARAMS", node_name="node2"),
                             op("OP_CLUSTER_VERIFY"),
                             op(duration=2.5))
        self.assertEqual(self.field(job_id, "summary"), [
            "INSTANCE_STARTUP(inst1)", "NODE_SET_PARAMS(node2)",
            "CLUSTER_VERIFY", "TEST_DELAY(2.5)"])
        self.queue.cancel_job(job_id)
        self.turn()


class QueryTests(QueueTestCase):

    def test_all_fields(self):
        job_id = self.submit(op())
        fields = ["id", "status", "priority", "archived", "ops", "opresult",
                  "opstatus", "oplog", "opstart", "opexec", "opend",
                  "oppriority", "summary", "received_ts", "start_ts",
                  "end_ts"]
        self.assertEqual(sorted(fields), sorted(jqueue.JOB_FIELDS))
        row = self.queue.query_jobs([job_id], fields)[0]
        self.assertEqual(row[:4], [1, "queued", 0, False])
        self.assertEqual(row[5:], [[None], ["queued"], [[]], [None], [None],
                                   [None], [0], ["TEST_DELAY(0.0)"],
                                   [int(T0), 0], None, None])
        self.queue.cancel_job(job_id)
        self.turn()

    def test_unknown_field(self):
        failure = self.assertRaises(errors.OpPrereqError,
                                    self.queue.query_jobs, None,
                                    ["id", "colour"])
        self.assertIn("colour", failure.args[0])
        self.failureResultOf(self.queue.wait_for_job_change(
            1, ["colour"], None, None, 10), errors.OpPrereqError)

    def test_unknown_ids_and_all(self):
        self.submit(op())
        self.submit(op())
        self.assertEqual(self.queue.query_jobs([2, 7, "1"], ["id"]),
                         [[2], None, [1]])
        self.assertEqual(self.queue.query_jobs(None, ["id"]), [[1], [2]])
        self.assertEqual(self.queue.query_jobs([], ["id"]), [[1], [2]])
        self.assertRaises(errors.OpPrereqError, self.queue.query_jobs,
                          ["x"], ["id"])
        self.queue.cancel_job(1)
        self.queue.cancel_job(2)
        self.turn()

    def test_finalized_jobs_reread_from_disk(self):
        queue = self.make_queue(executor=FakeExecutor(auto=True),
                                cache_size=2)
        queue.load()
        ids = [self.successResultOf(queue.submit_job(
            [op("OP_TEST_DUMMY", result=i)]))
               for i in range(5)]
        self.turn()
        self.assertEqual(len(queue._cache), 2)
        self.assertEqual(queue.query_jobs(ids, ["opresult"]),
                         [[[i]] for i in range(5)])
        self.assertEqual(len(queue._cache), 2)


class WaitForJobChangeTests(QueueTestCase):

    def test_immediate_when_different(self):
        job_id = self.submit(op())
        d = self.queue.wait_for_job_change(job_id, ["status"], None, None,
                                           10)
        self.assertEqual(self.successResultOf(d), [["queued"], []])
        d = self.queue.wait_for_job_change(job_id, ["status"], ["running"],
                                           None, 10)
        self.assertEqual(self.successResultOf(d), [["queued"], []])
        self.queue.cancel_job(job_id)
        self.turn()

    def test_waits_then_fires_on_feedback(self):
        job_id = self.submit(op())
        self.turn()
        d = self.queue.wait_for_job_change(job_id, ["status"], ["waiting"],
                                           None, 60)
        self.assertNoResult(d)
        self.assertEqual(self.queue.waiter_count(job_id), 1)
        self.clock.advance(5)
        self.executor.calls[0].ctx("hello")
        info, entries = self.successResultOf(d)
        self.assertEqual(info, ["waiting"])
        self.assertEqual(entries,
                         [[1, [int(T0) + 5, 0], "message", "hello"]])
        self.assertEqual(self.queue.waiter_count(), 0)
        # only newer entries are returned
        d = self.queue.wait_for_job_change(job_id, ["status"], ["waiting"],
                                           1, 60)
        self.assertNoResult(d)
        self.executor.calls[0].start()
        self.assertEqual(self.successResultOf(d), [["running"], []])
        self.executor.calls[0].finish()
        self.clock.advance(jq_queue.LOG_FLUSH_DELAY)

    def test_status_change_wakes(self):
        job_id = self.submit(op())
        d = self.queue.wait_for_job_change(job_id, ["status", "opstatus"],
                                           ["queued", ["queued"]], None, 60)
        self.assertNoResult(d)
        self.turn()
        self.assertEqual(self.successResultOf(d),
                         [["waiting", ["waiting"]], []])
        self.executor.calls[0].finish()

    def test_nochange_after_timeout(self):
        job_id = self.submit(op())
        self.turn()
        d = self.queue.wait_for_job_change(job_id, ["status"], ["waiting"],
                                           None, 10)
        self.clock.advance(9.9)
        self.assertNoResult(d)
        self.clock.advance(0.1)
        self.assertEqual(self.successResultOf(d), "nochange")
        self.assertEqual(self.queue.waiter_count(), 0)
        self.assertEqual(self.successResultOf(self.queue.wait_for_job_change(
            job_id, ["status"], ["waiting"], None, 0)), "nochange")
        self.executor.calls[0].finish()

    def test_timeout_capped(self):
        job_id = self.submit(op())
        self.turn()
        d = self.queue.wait_for_job_change(job_id, ["status"], ["waiting"],
                                           None, 3600)
        self.clock.advance(jqueue.WFJC_TIMEOUT - 0.5)
        self.assertNoResult(d)
        self.clock.advance(0.5)
        self.assertEqual(self.successResultOf(d), jqueue.JOB_NOTCHANGED)
        self.executor.calls[0].finish()

    def test_cancelled_waiter_removed(self):
        job_id = self.submit(op())
        d = self.queue.wait_for_job_change(job_id, ["status"], ["queued"],
                                           None, 60)
        self.assertEqual(self.queue.waiter_count(job_id), 1)
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertEqual(self.queue.waiter_count(), 0)
        self.queue.cancel_job(job_id)   # no waiter left to fire
        self.turn()

    def test_finished_job_answers_immediately(self):
        job_id = self.submit(op())
        self.turn()
        self.executor.calls[0].finish()
        d = self.queue.wait_for_job_change(job_id, ["status"], ["success"],
                                           None, 60)
        self.assertEqual(self.successResultOf(d), [["success"], []])

    def test_finalize_wakes_waiter_after_write(self):
        job_id = self.submit(op())
        self.turn()
        seen = []

        def on_change(result):
            seen.append(self.read_job(job_id)["ops"][0]["status"])
            return result
        d = self.queue.wait_for_job_change(job_id, ["status"], ["waiting"],
                                           None, 60)
        d.addCallback(on_change)
        self.executor.calls[0].finish()
        self.assertEqual(self.successResultOf(d), [["success"], []])
        self.assertEqual(seen, ["success"])

    def test_unknown_job(self):
        self.failureResultOf(self.queue.wait_for_job_change(
            42, ["status"], None, None, 10), errors.JobLost)

    def test_shutdown_releases_waiters(self):
        job_id = self.submit(op())
        d = self.queue.wait_for_job_change(job_id, ["status"], ["queued"],
                                           None, 60)
        self.queue.shutdown()
        self.assertEqual(self.successResultOf(d), "nochange")
        self.turn()
        self.assertEqual(self.executor.calls, [])


class SchedulingTests(QueueTestCase):

    def finish_all(self):
        while self.executor.pending():
            for call in self.executor.pending():
                call.finish()

    def test_priority_order(self):
        self.queue.set_max_running(1)
        first = self.submit(op())
        self.turn()
        low = self.submit(op(priority=10))
        normal = self.submit(op())
        high = self.submit(op(priority=-10))
        normal2 = self.submit(op())
        self.turn()
        self.assertEqual(self.executor.job_ids(), [first])
        self.finish_all()
        self.assertEqual(self.executor.job_ids(),
                         [first, high, normal, normal2, low])

    def test_change_priority(self):
        self.queue.set_max_running(1)
        first = self.submit(op())
        a = self.submit(op())
        b = self.submit(op(), op())
        self.turn()
        result = self.queue.change_job_priority(b, -10)
        self.assertTrue(result[0], result)
        self.assertEqual(self.field(b, "oppriority"), [-10, -10])
        self.assertEqual(self.read_job(b)["ops"][0]["priority"], -10)
        # waiting for locks: still changeable; running: nothing pending
        self.assertTrue(self.queue.change_job_priority(first, 5)[0])
        self.assertEqual(self.field(first, "priority"), 5)
        self.executor.calls[0].start()
        self.assertEqual(self.queue.change_job_priority(first, 0),
                         [False, "Job %d has no pending opcodes" % first])
        self.assertRaises(errors.GenericError,
                          self.queue.change_job_priority, a, 100)
        self.assertEqual(self.queue.change_job_priority(99, 0),
                         [False, "Job 99 not found"])
        self.finish_all()
        self.assertEqual(self.executor.job_ids(), [first, b, b, a])
        self.assertEqual(self.queue.change_job_priority(a, 0),
                         [False, "Job %d is finished" % a])

    def test_max_running(self):
        ids = [self.submit(op()) for _ in range(21)]
        self.turn()
        self.assertEqual(self.executor.job_ids(), ids[:20])
        self.assertEqual(self.status(ids[20]), "queued")
        self.executor.calls[5].finish()
        self.assertEqual(self.executor.job_ids()[-1], ids[20])
        self.assertEqual(self.status(ids[20]), "waiting")
        self.finish_all()

    def test_max_running_changes_at_runtime(self):
        ids = [self.submit(op()) for _ in range(4)]
        self.queue.set_max_running(1)
        self.turn()
        self.assertEqual(len(self.executor.calls), 1)
        self.queue.set_max_running(3)
        self.assertEqual(self.executor.job_ids(), ids[:3])
        self.finish_all()
        self.assertEqual(self.executor.job_ids(), ids)

    def test_synchronous_executor_many_jobs(self):
        queue = self.make_queue(executor=FakeExecutor(auto=True))
        queue.load()
        ids = [self.successResultOf(queue.submit_job([op(), op()]))
               for _ in range(300)]
        self.turn()
        self.assertEqual(queue.query_jobs(ids, ["status"]),
                         [["success"]] * 300)


class DependencyTests(QueueTestCase):

    def test_success_chain(self):
        first = self.submit(op())
        second = self.submit(op(depends=[[first, ["success"]]]))
        self.turn()
        self.assertEqual(self.executor.job_ids(), [first])
        # waiting for the dependency, without holding a run slot
        self.assertEqual(self.status(second), "waiting")
        self.assertEqual(self.read_job(second)["ops"][0]["status"],
                         "waiting")
        self.executor.calls[0].finish()
        self.assertEqual(self.executor.job_ids(), [first, second])
        self.executor.calls[1].finish()
        self.assertEqual(self.status(second), "success")

    def test_dependency_waiting_does_not_take_a_slot(self):
        self.queue.set_max_running(1)
        blocker = self.submit(op())
        self.turn()
        dependent = self.submit(op(depends=[[blocker, []]]))
        self.queue.set_max_running(2)
        self.turn()
        other = self.submit(op())
        self.turn()
        self.assertEqual(self.executor.job_ids(), [blocker, other])
        self.assertEqual(self.status(dependent), "waiting")
        self.executor.calls[1].finish()
        self.executor.calls[0].finish()
        self.assertEqual(self.executor.job_ids(), [blocker, other, dependent])
        self.executor.calls[2].finish()

    def test_failing_dependency(self):
        first = self.submit(op())
        second = self.submit(op(depends=[[first, ["success"]]]), op())
        self.turn()
        self.executor.calls[0].fail(errors.OpExecError("broken"))
        self.assertEqual(self.status(second), "error")
        result = self.field(second, "opresult")
        self.assertEqual(result[0][0], "OpExecError")
        self.assertIn("Dependency job %d finished with status 'error'"
                      % first, result[0][1][0])
        self.assertEqual(result[1], ["OpExecError",
                                     ["Error in previous opcode"]])
        self.assertEqual(len(self.executor.calls), 1)

    def test_any_final_status_with_empty_list(self):
        first = self.submit(op())
        second = self.submit(op(depends=[[first, []]]))
        self.turn()
        self.executor.calls[0].fail(errors.OpExecError("broken"))
        self.assertEqual(self.executor.job_ids(), [first, second])
        self.executor.calls[1].finish()
        self.assertEqual(self.status(second), "success")

    def test_error_status_accepted(self):
        first = self.submit(op())
        second = self.submit(op(depends=[[first, ["error"]]]))
        self.turn()
        self.executor.calls[0].fail(errors.OpExecError("broken"))
        self.executor.calls[1].finish()
        self.assertEqual(self.status(second), "success")

    def test_canceled_dependency_cancels(self):
        first = self.submit(op())
        second = self.submit(op(depends=[[first, ["success", "error"]]]))
        third = self.submit(op(depends=[[first, ["canceled"]]]))
        self.queue.cancel_job(first)
        self.turn()
        self.assertEqual(self.status(second), "canceled")
        self.assertEqual(self.executor.job_ids(), [third])
        self.executor.calls[0].finish()

    def test_unknown_and_self_dependency(self):
        a = self.submit(op(depends=[[77, []]]))
        b = self.submit(op(depends=[[2, []]]))
        self.turn()
        self.assertEqual(self.executor.calls, [])
        self.assertEqual(self.field(a, "opresult"),
                         [["OpExecError",
                           ["Dependency error: job 77 not found"]]])
        self.assertIn("itself", self.field(b, "opresult")[0][1][0])

    def test_archived_dependency(self):
        first = self.submit(op())
        self.turn()
        self.executor.calls[0].finish()
        self.assertTrue(self.successResultOf(self.queue.archive_job(first)))
        second = self.submit(op(depends=[[first, ["success"]]]))
        self.turn()
        self.assertEqual(self.executor.job_ids(), [first, second])
        self.executor.calls[1].finish()

    def test_relative_ids_in_submit_many(self):
        result = self.successResultOf(self.queue.submit_many_jobs([
            [op()],
            [op(depends=[[-1, ["success"]]])],
            [op(depends=[[-2, []], [-1, ["success"]]])],
            [op(depends=[[-9, []]])],
        ]))
        self.assertEqual(result[:3], [[True, 1], [True, 2], [True, 3]])
        self.assertFalse(result[3][0])
        self.assertIn("-9", result[3][1])
        self.assertEqual(self.field(2, "ops")[0]["depends"],
                         [[1, ["success"]]])
        self.assertEqual(self.read_job(3)["ops"][0]["input"]["depends"],
                         [[1, []], [2, ["success"]]])
        self.turn()
        self.assertEqual(self.executor.job_ids(), [1])
        self.executor.calls[0].finish()
        self.assertEqual(self.executor.job_ids(), [1, 2])
        self.executor.calls[1].finish()
        self.executor.calls[2].finish()
        self.assertEqual(self.status(3), "success")

    def test_relative_id_to_rejected_job(self):
        result = self.successResultOf(self.queue.submit_many_jobs([
            [op(depends=[["1", []]])],                 # refused
            [op(depends=[[-1, []]])],
        ]))
        self.assertFalse(result[0][0])
        self.assertFalse(result[1][0])
        self.assertIn("rejected", result[1][1])
        self.assertEqual(self.queue.query_jobs(None, ["id"]), [])


class CancelTests(QueueTestCase):

    def test_cancel_queued(self):
        job_id = self.submit(op(), op())
        self.assertEqual(self.queue.cancel_job(job_id),
                         [True, "Job %d canceled" % job_id])
        self.assertEqual(self.status(job_id), "canceled")
        self.assertEqual(self.field(job_id, "opstatus"),
                         ["canceled", "canceled"])
        self.assertEqual(self.read_job(job_id)["ops"][1]["status"],
                         "canceled")
        self.turn()
        self.assertEqual(self.executor.calls, [])
        self.assertEqual(self.queue.cancel_job(job_id),
                         [False, "Job %d is no longer waiting in the queue"
                          % job_id])

    def test_cancel_waiting_for_locks(self):
        job_id = self.submit(op(), op())
        self.turn()
        call = self.executor.calls[0]
        result = self.queue.cancel_job(job_id)
        self.assertTrue(result[0])
        self.assertTrue(call.cancelled)
        self.assertEqual(self.field(job_id, "opstatus"),
                         ["canceled", "canceled"])
        self.assertEqual(self.read_job(job_id)["ops"][0]["status"],
                         "canceled")
        self.assertEqual(len(self.executor.calls), 1)
        self.assertIsNotNone(self.field(job_id, "opend")[0])

    def test_cancel_waiting_for_dependency(self):
        first = self.submit(op())
        second = self.submit(op(depends=[[first, []]]))
        self.turn()
        self.assertEqual(self.queue.cancel_job(second),
                         [True, "Job %d canceled" % second])
        self.executor.calls[0].finish()
        self.assertEqual(self.executor.job_ids(), [first])
        self.assertEqual(self.status(second), "canceled")

    def test_cancel_running(self):
        job_id = self.submit(op())
        self.turn()
        call = self.executor.calls[0].start()
        self.assertEqual(self.queue.cancel_job(job_id),
                         [False, "Job %d is no longer waiting in the queue"
                          % job_id])
        self.assertFalse(call.cancelled)
        self.assertEqual(self.status(job_id), "running")
        call.finish()
        self.assertEqual(self.status(job_id), "success")

    def test_kill_running(self):
        job_id = self.submit(op(), op())
        self.turn()
        call = self.executor.calls[0].start()
        result = self.queue.cancel_job(job_id, True)
        self.assertTrue(result[0])
        self.assertTrue(call.cancelled)
        self.assertEqual(self.status(job_id), "canceled")

    def test_cancel_with_ignoring_canceller(self):
        # Deferred.cancel errbacks even if the canceller does nothing, so
        # a job waiting for locks is always canceled at once
        class Stubborn(object):
            def __init__(self):
                self.d = None

            def execute(self, job, index, op_input, ctx):
                self.d = defer.Deferred(lambda d: None)
                return self.d
        executor = Stubborn()
        queue = self.make_queue(executor=executor)
        queue.load()
        job_id = self.successResultOf(queue.submit_job([op(), op()]))
        self.turn()
        result = queue.cancel_job(job_id)
        self.assertEqual(result, [True, "Job %d canceled" % job_id])
        self.assertTrue(executor.d.called)
        self.assertEqual(queue.query_jobs([job_id], ["opstatus"]),
                         [[["canceled", "canceled"]]])

    def test_notify_running_when_canceling(self):
        job_id = self.submit(op())
        self.turn()
        job = self.queue.get_job(job_id)
        call = self.executor.calls[0]
        job.mark_unfinished("canceling", None)   # as cancel_job does first
        self.assertRaises(errors.JobCanceled, call.ctx.notify_running)
        call.fail(errors.JobCanceled("stop"))
        self.assertEqual(self.status(job_id), "canceled")

    def test_cancel_unknown(self):
        self.assertEqual(self.queue.cancel_job(5), [False, "Job 5 not found"])


class ArchiveTests(QueueTestCase):

    def run_jobs(self, count):
        ids = [self.submit(op()) for _ in range(count)]
        self.turn()
        return ids

    def test_archive_job(self):
        [a, b] = self.run_jobs(2)
        self.assertFalse(self.successResultOf(self.queue.archive_job(a)))       # not finalized
        self.executor.calls[0].finish()
        self.assertTrue(self.successResultOf(self.queue.archive_job(a)))
        self.assertFalse(os.path.exists(self.job_file(a)))
        path = os.path.join(self.dir, "archive", "0", "job-%d" % a)
        self.assertTrue(os.path.exists(path))
        self.assertFalse(self.successResultOf(self.queue.archive_job(a)))       # already archived
        self.assertFalse(self.successResultOf(self.queue.archive_job(99)))
        self.assertEqual(self.queue.query_jobs([a], ["id", "status",
                                                     "archived"]),
                         [[a, "success", True]])
        self.assertEqual(self.queue.query_jobs(None, ["id"]), [[b]])
        self.executor.calls[1].finish()

    def test_archive_subdirectory(self):
        queue_dir = os.path.join(self.mktemp(), "queue")
        os.makedirs(queue_dir)
        with open(os.path.join(queue_dir, "serial"), "w") as f:
            f.write("12344\n")
        queue = jqueue.JobQueue(queue_dir, FakeExecutor(auto=True),
                                clock=self.clock)
        self.addCleanup(queue._store.unlock)
        queue.load()
        job_id = self.successResultOf(queue.submit_job([op()]))
        self.assertEqual(job_id, 12345)
        self.turn()
        self.assertTrue(self.successResultOf(queue.archive_job(job_id)))
        self.assertTrue(os.path.exists(os.path.join(
            queue_dir, "archive", "1", "job-12345")))

    def test_auto_archive(self):
        ids = self.run_jobs(4)
        self.executor.calls[0].finish()
        self.clock.advance(100)
        self.executor.calls[1].finish()
        self.executor.calls[2].finish()
        self.clock.advance(10)
        self.assertEqual(self.successResultOf(self.queue.auto_archive_jobs(50, 60)), [1, 0])
        self.assertTrue(os.path.exists(os.path.join(
            self.dir, "archive", "0", "job-%d" % ids[0])))
        self.assertEqual(self.successResultOf(self.queue.auto_archive_jobs(-1, 60)), [2, 0])
        self.assertEqual(self.queue.query_jobs(None, ["id"]), [[ids[3]]])
        self.executor.calls[3].finish()
        self.assertEqual(self.successResultOf(self.queue.auto_archive_jobs(-1, 60)), [1, 0])

    def test_auto_archive_timeout(self):
        self.run_jobs(3)
        for call in self.executor.calls:
            call.finish()
        self.assertEqual(self.successResultOf(self.queue.auto_archive_jobs(-1, -1)), [0, 3])

    def test_serial_survives_archive_and_lost_serial_file(self):
        ids = self.run_jobs(3)
        for call in self.executor.calls:
            call.finish()
        self.successResultOf(self.queue.auto_archive_jobs(-1, 60))
        os.unlink(os.path.join(self.dir, "serial"))
        queue = self.make_queue()
        queue.load()
        self.assertEqual(self.successResultOf(queue.submit_job([op()])),
                         ids[-1] + 1)
        queue.cancel_job(ids[-1] + 1)
        self.turn()


class DrainTests(QueueTestCase):

    def test_drain_flag(self):
        drain_file = os.path.join(self.dir, "drain")
        self.assertFalse(self.queue.drained)
        self.assertIs(self.successResultOf(self.queue.set_drain_flag(True)),
                      True)
        self.assertTrue(os.path.exists(drain_file))
        self.failureResultOf(self.queue.submit_job([op()]),
                             errors.JobQueueDrainError)
        self.failureResultOf(self.queue.submit_many_jobs([[op()]]),
                             errors.JobQueueDrainError)
        job_id = self.successResultOf(
            self.queue.submit_to_drained_queue([op()]))
        # a restarted master stays drained
        queue = self.make_queue()
        queue.load()
        self.assertTrue(queue.drained)
        queue.shutdown()
        self.successResultOf(self.queue.set_drain_flag(False))
        self.assertFalse(os.path.exists(drain_file))
        self.successResultOf(self.queue.submit_job([op()]))
        self.turn()
        for call in self.executor.calls:
            call.finish()
        self.assertEqual(self.status(job_id), "success")


class CrashRecoveryTests(QueueTestCase):

    def test_load_after_crash(self):
        old_clock = task.Clock()
        old_clock.advance(T0)
        old_exec = FakeExecutor()
        old = self.make_queue(old_exec, clock=old_clock, max_running=3)
        old.load()
        ids = [self.successResultOf(old.submit_job([op(), op()]))
               for _ in range(5)]
        old_clock.advance(0)
        old_exec.calls[0].finish()            # job 1: op 0 done, op 1 waits
        old_exec.calls[3].start()             # job 1 op 1: running
        old_exec.calls[1].start()             # job 2: running
        # job 3: waiting for locks; jobs 4, 5: queued
        old_exec.calls[2].ctx("waiting for locks")
        old_clock.advance(jq_queue.LOG_FLUSH_DELAY)
        self.assertEqual(old.query_jobs(ids, ["status"]),
                         [["running"], ["running"], ["waiting"], ["queued"],
                          ["queued"]])
        # ... and the master dies here; a new one starts on the same dir
        self.clock.advance(60)
        queue = self.make_queue()
        report = queue.load()
        self.assertEqual(report.failed, (1, 2))
        self.assertEqual(report.requeued, (3, 4, 5))
        self.assertEqual(report.corrupt, ())
        rows = queue.query_jobs(ids[:2], ["status", "opstatus", "opresult",
                                          "end_ts"])
        self.assertEqual(rows[0][:2], ["error", ["success", "error"]])
        self.assertEqual(rows[0][2][1][0], "OpExecError")
        self.assertIn("master daemon stopped while this opcode was running",
                      rows[0][2][1][1][0])
        self.assertEqual(rows[1][1], ["error", "error"])
        self.assertIn("earlier opcode", rows[1][2][1][1][0])
        self.assertEqual(rows[1][3], [int(T0) + 60, 0])
        on_disk = self.read_job(2)
        self.assertEqual([o["status"] for o in on_disk["ops"]],
                         ["error", "error"])
        self.assertIsNotNone(on_disk["end_timestamp"])
        # waiting job 3 kept its log and is queued again
        self.assertEqual(queue.query_jobs([3], ["status"]), [["queued"]])
        self.assertEqual(self.read_job(3)["ops"][0]["status"], "queued")
        self.assertEqual(len(queue.query_jobs([3], ["oplog"])[0][0][0]), 1)
        self.turn()
        self.assertEqual(sorted(self.executor.job_ids()), [3, 4, 5])
        while self.executor.pending():
            for call in self.executor.pending():
                call.finish()
        self.assertEqual(queue.query_jobs(ids, ["status"]),
                         [["error"], ["error"], ["success"], ["success"],
                          ["success"]])
        # new ids continue after the old ones
        new_id = self.successResultOf(queue.submit_job([op()]))
        self.assertEqual(new_id, 6)
        queue.cancel_job(new_id)
        # log serials continue too
        job3 = queue.get_job(3)
        self.assertEqual([e[0] for e in job3.log_entries(None)], [1])
        self.turn()

    def test_corrupt_file_moved_aside(self):
        a = self.submit(op())
        self.queue.cancel_job(a)
        with open(os.path.join(self.dir, "job-7"), "w") as f:
            f.write('{"id": 7, "ops": [{"input": {"OP_ID": "OP_TE')
        with open(os.path.join(self.dir, "job-8"), "w") as f:
            f.write('{"id": 8, "ops": []}')
        with open(os.path.join(self.dir, ".job-9.tmp123"), "w") as f:
            f.write("partial")
        queue = self.make_queue()
        report = queue.load()
        self.assertEqual(report.corrupt, (7, 8))
        self.assertEqual(report.finalized, 1)
        self.turn()
        # (spare files the queue writes through are hidden: ".spare.N")
        names = sorted(n for n in os.listdir(self.dir)
                       if not n.startswith(".spare."))
        self.assertEqual(names, ["archive", "job-1", "job-7.corrupt",
                                 "job-8.corrupt", "journal", "lock",
                                 "serial", "version"])
        self.assertEqual(queue.query_jobs([7, 1], ["id"]), [None, [1]])
        # ids of corrupt jobs are not reused
        self.assertEqual(self.successResultOf(queue.submit_job([op()])), 9)
        queue.cancel_job(9)
        self.turn()

    def write_job_file(self, job_id, ops, statuses):
        entries = [{"input": data, "status": status, "result": None,
                    "log": [], "priority": 0, "start_timestamp": None,
                    "exec_timestamp": None, "end_timestamp": None}
                   for (data, status) in zip(ops, statuses)]
        with open(self.job_file(job_id), "w") as f:
            json.dump({"id": job_id, "ops": entries,
                       "received_timestamp": [int(T0), 0],
                       "start_timestamp": None, "end_timestamp": None}, f)

    def test_unloadable_opcodes_are_kept_and_reported(self):
        future = {"OP_ID": "OP_FROM_THE_FUTURE", "x": 1}
        colour = {"OP_ID": "OP_TEST_DELAY", "duration": 1.0,
                  "colour": "red"}
        good = op().to_dict()
        self.write_job_file(1, [future], ["success"])
        self.write_job_file(2, [colour], ["queued"])
        self.write_job_file(3, [good, future], ["waiting", "queued"])
        self.write_job_file(4, [future, good], ["success", "queued"])
        queue = self.make_queue()
        report = queue.load()
        self.assertEqual(report.unreadable, (1, 2, 3, 4))
        self.assertEqual(report.failed, (2, 3))
        self.assertEqual(report.requeued, (4,))
        self.assertEqual(report.corrupt, ())
        # shown as they are in the file
        self.assertEqual(queue.query_jobs([1], ["ops", "summary", "status"]),
                         [[[future], ["FROM_THE_FUTURE"], "success"]])
        (opstatus, opresult), = queue.query_jobs([2], ["opstatus",
                                                       "opresult"])
        self.assertEqual(opstatus, ["error"])
        self.assertIn("cannot be loaded: colour: unknown parameter",
                      opresult[0][1][0])
        (opstatus, opresult), = queue.query_jobs([3], ["opstatus",
                                                       "opresult"])
        self.assertEqual(opstatus, ["error", "error"])
        self.assertIn("opcode 1 of this job cannot be loaded",
                      opresult[0][1][0])
        self.assertIn("Unknown opcode 'OP_FROM_THE_FUTURE'",
                      opresult[1][1][0])
        # the files keep them
        self.assertEqual(self.read_job(2)["ops"][0]["input"], colour)
        self.assertEqual(self.read_job(2)["ops"][0]["status"], "error")
        # job 4's readable opcode runs; nothing else does
        self.turn()
        self.assertEqual([(c.job.id, c.index) for c in self.executor.calls],
                         [(4, 1)])
        self.executor.calls[0].finish()
        self.assertEqual(queue.query_jobs([4], ["status"]), [["success"]])
        self.assertEqual(self.read_job(4)["ops"][0]["input"], future)

    def test_wrong_queue_version(self):
        with open(os.path.join(self.dir, "version"), "w") as f:
            f.write("7\n")
        self.assertRaises(errors.JobQueueError, self.make_queue().load)

    def test_shutdown_flushes_log(self):
        job_id = self.submit(op())
        self.turn()
        self.executor.calls[0].ctx("msg")
        self.queue.shutdown()
        self.assertEqual(len(self.read_job(job_id)["ops"][0]["log"]), 1)
        self.assertEqual(self.clock.getDelayedCalls(), [])


class StatusMoveTests(unittest.TestCase):
    """The one rule for changes of an opcode's status."""

    LEGAL = [
        ("queued", "waiting"), ("queued", "canceling"),
        ("queued", "canceled"), ("queued", "error"),
        ("waiting", "queued"), ("waiting", "running"),
        ("waiting", "canceling"), ("waiting", "canceled"),
        ("waiting", "success"), ("waiting", "error"),
        ("running", "waiting"), ("running", "canceling"),
        ("running", "success"), ("running", "error"),
        ("canceling", "canceled"), ("canceling", "success"),
        ("canceling", "error"),
    ]

    def test_every_legal_move_is_accepted(self):
        for (old, new) in self.LEGAL:
            jq_model.check_op_move(old, new)
            op = jqueue.QueuedOpCode(input=None, status=old)
            op.move_to(new)
            self.assertEqual(op.status, new)

    def test_everything_else_is_refused(self):
        statuses = sorted(jqueue.STATUS_ALL)
        refused = [(old, new) for old in statuses for new in statuses
                   if (old, new) not in self.LEGAL]
        # among them: staying put, leaving a final status, skipping ahead
        for move in [("queued", "queued"), ("success", "error"),
                     ("canceled", "queued"), ("error", "running"),
                     ("queued", "running"), ("queued", "success"),
                     ("running", "queued"), ("running", "canceled"),
                     ("canceling", "running"), ("canceling", "waiting")]:
            self.assertIn(move, refused)
        for (old, new) in refused:
            self.assertRaises(errors.ProgrammerError,
                              jq_model.check_op_move, old, new)
            op = jqueue.QueuedOpCode(input=None, status=old)
            self.assertRaises(errors.ProgrammerError, op.move_to, new)
            self.assertEqual(op.status, old)


class JobFileTests(unittest.TestCase):
    """Opcodes become JSON in the job file and OpCode objects again when
    it is read."""

    def test_written_and_read_back_equal(self):
        store = jq_store.JobStore(os.path.abspath(self.mktemp()))
        store.initialize()
        inputs = [
            op(duration=2.5, depends=[[3, ["success"]]],
               reason=[["gnt:client:test", "x", 5]], priority=-10),
            opcodes.OpInstanceCreate(
                instance_name="inst1", mode="create", disk_template="plain",
                disks=[{"size": 1024}], nics=[{"link": "br0"}],
                osparams_private={"password": "secret"}),
            opcodes.OpInstanceMultiAlloc(instances=[
                opcodes.OpInstanceCreate(instance_name="inst2",
                                         mode="create", disks=[], nics=[],
                                         disk_template="diskless")]),
        ]
        job = jqueue.QueuedJob(
            id=5, received_timestamp=[1, 2],
            ops=[jqueue.QueuedOpCode(input=i.copy()) for i in inputs])
        store.write_job(job)
        again = store.read_job(5)
        self.assertEqual([o.input for o in again.ops], inputs)
        for (read, made) in zip(again.ops, inputs):
            self.assertIs(type(read.input), type(made))
        # the file holds each opcode's JSON form, secrets included (the
        # job must be able to run after a restart)
        with open(store.job_path(5)) as f:
            data = json.load(f)
        self.assertEqual([o["input"] for o in data["ops"]],
                         [i.to_dict() for i in inputs])
        self.assertEqual(data["ops"][1]["input"]["osparams_private"],
                         {"password": "secret"})
