"""Writes off the reactor: the ordered writer thread, and the job queue and
config store writing through a writer whose writes the test holds."""

import os
import threading

from twisted.internet import defer, reactor, task
from twisted.trial import unittest
from zope.interface import implementer
from zope.interface.verify import verifyObject

from ganeti import errors
from ganeti import jqueue
from ganeti import mcpu
from ganeti import opcodes
from ganeti.utils.writer import IFileWriter, InlineWriter, OrderedWriter

from tests.inprocess import start_master
from tests.test_config import make_store


@implementer(IFileWriter)
class HeldWriter(object):
    """Keeps every write until the test releases it (a slow disk)."""

    def __init__(self):
        self.held = []          # (fn, args, kwargs, deferred)

    def call(self, fn, *args, **kwargs):
        d = defer.Deferred()
        self.held.append((fn, args, kwargs, d))
        return d

    def commit(self, fn, key, item):
        # no grouping here: each item is a write of its own, written in
        # place at once
        def write(items):
            after = fn(items)
            if callable(after):
                after()
        d = defer.Deferred()
        self.held.append((write, ({key: item},), {}, d))
        return d.addCallback(lambda _: None)

    def drain(self):
        d = defer.Deferred()
        self.held.append((lambda: None, (), {}, d))
        return d

    def release(self, count=None):
        """Do the oldest ``count`` writes (all by default), in order."""
        count = len(self.held) if count is None else count
        for _ in range(count):
            fn, args, kwargs, d = self.held.pop(0)
            try:
                result = fn(*args, **kwargs)
            except Exception as err:
                d.errback(err)
            else:
                d.callback(result)

    def fail_next(self, err):
        self.held.pop(0)[3].errback(err)


class OrderedWriterTests(unittest.TestCase):

    def setUp(self):
        self.writer = OrderedWriter(reactor)
        verifyObject(IFileWriter, self.writer)

    @defer.inlineCallbacks
    def test_in_order_on_one_thread_not_the_reactor(self):
        seen = []

        def work(n):
            seen.append((n, threading.current_thread().name))
            return n * 10
        # asked for before the service starts: done once it has
        ds = [self.writer.call(work, n) for n in range(20)]
        self.writer.startService()
        results = yield defer.gatherResults(ds)
        yield self.writer.stopService()
        self.assertEqual(results, [n * 10 for n in range(20)])
        self.assertEqual([n for n, _ in seen], list(range(20)))
        threads = {name for _, name in seen}
        self.assertEqual(len(threads), 1)
        self.assertNotEqual(threads, {threading.current_thread().name})

    @defer.inlineCallbacks
    def test_failure_is_delivered_and_later_writes_still_run(self):
        self.writer.startService()
        self.addCleanup(self.writer.stopService)

        def fail():
            raise OSError(28, "No space left on device")
        first = self.writer.call(fail)
        second = self.writer.call(lambda: "ok")
        err = yield self.assertFailure(first, OSError)
        self.assertEqual(err.errno, 28)
        self.assertEqual((yield second), "ok")

    @defer.inlineCallbacks
    def test_stop_waits_for_the_writes_asked_for(self):
        gate = threading.Event()
        done = []
        self.writer.startService()
        d = self.writer.call(lambda: (gate.wait(10), done.append(1)))
        stopped = self.writer.stopService()
        self.assertFalse(stopped.called)
        self.assertEqual(self.writer.pending, 1)
        gate.set()
        yield stopped
        yield d
        self.assertEqual(done, [1])
        self.assertEqual(self.writer.pending, 0)

    def test_inline_writer(self):
        verifyObject(IFileWriter, InlineWriter())
        self.assertEqual(self.successResultOf(InlineWriter().call(
            lambda a, b=0: a + b, 1, b=2)), 3)
        self.failureResultOf(InlineWriter().call(lambda: 1 / 0),
                             ZeroDivisionError)


class GroupCommitTests(unittest.TestCase):
    """Items committed close together share one call of the batch
    function; order with other calls is kept."""

    def setUp(self):
        self.writer = OrderedWriter(reactor)
        self.gate = threading.Event()
        self.calls = []

    def tearDown(self):
        self.gate.set()
        return self.writer.stopService()

    def hold(self):
        """A call that blocks the writer thread until the gate opens."""
        return self.writer.call(lambda: (self.gate.wait(10),
                                         self.calls.append("held")))

    def batch(self, items):
        self.calls.append(("batch", dict(items)))

    @defer.inlineCallbacks
    def test_items_join_the_batch_in_line_newest_per_key_wins(self):
        self.writer.startService()
        self.hold()
        ds = [self.writer.commit(self.batch, "job-%d" % (n % 3), n)
              for n in range(7)]
        self.assertEqual([d.called for d in ds], [False] * 7)
        self.gate.set()
        results = yield defer.gatherResults(ds)
        self.assertEqual(results, [None] * 7)
        self.assertEqual(self.calls, [
            "held", ("batch", {"job-0": 6, "job-1": 4, "job-2": 5})])
        self.assertEqual((self.writer.batches, self.writer.batched_items),
                         (1, 3))

    @defer.inlineCallbacks
    def test_no_item_jumps_ahead_of_an_earlier_call(self):
        self.writer.startService()
        self.hold()
        first = self.writer.commit(self.batch, "job-1", "queued")
        config = self.writer.call(self.calls.append, "config.data")
        second = self.writer.commit(self.batch, "job-1", "success")
        self.gate.set()
        yield defer.gatherResults([first, config, second])
        self.assertEqual(self.calls, [
            "held", ("batch", {"job-1": "queued"}), "config.data",
            ("batch", {"job-1": "success"})])

    @defer.inlineCallbacks
    def test_a_batch_being_written_takes_no_more_items(self):
        self.writer.startService()
        started = threading.Event()

        def slow_batch(items):
            started.set()
            self.gate.wait(10)
            self.batch(items)
        first = self.writer.commit(slow_batch, "job-1", 1)
        yield threads_wait(started)
        second = self.writer.commit(slow_batch, "job-2", 2)
        self.gate.set()
        yield defer.gatherResults([first, second])
        self.assertEqual(self.calls, [("batch", {"job-1": 1}),
                                      ("batch", {"job-2": 2})])

    @defer.inlineCallbacks
    def test_a_failed_batch_fails_each_of_its_items_only(self):
        self.writer.startService()
        self.hold()

        def full_disk(items):
            raise OSError(28, "No space left on device")
        failing = [self.writer.commit(full_disk, k, 0) for k in "ab"]
        self.writer.call(lambda: None)
        later = self.writer.commit(self.batch, "c", 1)
        self.gate.set()
        for d in failing:
            err = yield self.assertFailure(d, OSError)
            self.assertEqual(err.errno, 28)
        yield later
        self.assertEqual(self.calls[-1], ("batch", {"c": 1}))

    @defer.inlineCallbacks
    def test_work_a_batch_leaves_runs_after_its_answers(self):
        self.writer.startService()

        def batch(items):
            self.batch(items)
            return lambda: self.calls.append("after")
        yield self.writer.commit(batch, "job-1", 1)
        # the answer came first; the rest is in line before later calls
        yield self.writer.call(self.calls.append, "next")
        self.assertEqual(self.calls, [("batch", {"job-1": 1}), "after",
                                      "next"])

    def test_inline_writer_commits_at_once(self):
        writer = InlineWriter()
        self.assertIsNone(self.successResultOf(
            writer.commit(self.batch, "k", 1)))
        self.assertEqual(self.calls, [("batch", {"k": 1})])


def threads_wait(event):
    """A Deferred firing once ``event`` (set by another thread) is set."""
    from twisted.internet import threads
    return threads.deferToThread(event.wait, 10)


class AtomicWriteManyTests(unittest.TestCase):

    def test_all_files_written_no_temporary_left(self):
        from ganeti.utils.io import atomic_write_many
        d = self.mktemp()
        os.makedirs(d)
        files = {os.path.join(d, "job-%d" % n): b"%d" % n for n in range(5)}
        with open(os.path.join(d, "job-0"), "wb") as f:
            f.write(b"old")
        atomic_write_many(files, 0o640)
        self.assertEqual(sorted(os.listdir(d)), sorted(
            "job-%d" % n for n in range(5)))
        for path, data in files.items():
            with open(path, "rb") as f:
                self.assertEqual(f.read(), data)
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o640)

    def test_failure_leaves_no_temporary_files_and_old_contents(self):
        from ganeti.utils.io import atomic_write_many
        d = self.mktemp()
        os.makedirs(d)
        with open(os.path.join(d, "job-1"), "wb") as f:
            f.write(b"old")
        files = {os.path.join(d, "job-1"): b"new",
                 os.path.join(d, "missing-dir", "job-2"): b"x"}
        self.assertRaises(OSError, atomic_write_many, files)
        self.assertEqual(os.listdir(d), ["job-1"])
        with open(os.path.join(d, "job-1"), "rb") as f:
            self.assertEqual(f.read(), b"old")


class Executor(object):
    """Marks each opcode running (waiting for that write) and succeeds."""

    def __init__(self):
        self.started = []

    @defer.inlineCallbacks
    def execute(self, job, op_index, op_input, feedback_fn):
        self.started.append(job.id)
        yield feedback_fn.notify_running()
        self.started.append("%s running on disk" % job.id)
        return None


def job_file(queue, job_id):
    path = os.path.join(queue.queue_dir, "job-%d" % job_id)
    return path if os.path.exists(path) else None


class QueueWithHeldWritesTests(unittest.TestCase):

    def setUp(self):
        self.clock = task.Clock()
        self.writer = HeldWriter()
        self.executor = Executor()
        self.queue = jqueue.JobQueue(os.path.abspath(self.mktemp()),
                                     self.executor, clock=self.clock,
                                     writer=self.writer, log_flush_delay=0)
        self.queue.load()
        self.addCleanup(self.queue._store.unlock)

    def submit(self, **params):
        return self.queue.submit_job([opcodes.OpTestDelay(duration=0,
                                                          **params)])

    def test_job_id_answered_once_its_file_is_on_disk(self):
        d = self.submit()
        self.assertNoResult(d)
        self.assertIsNone(job_file(self.queue, 1))
        self.assertEqual(self.queue.query_jobs(None, ["id"]), [None])
        self.clock.advance(0)
        # the job may start (take its locks) but not go on to run
        self.assertEqual(self.executor.started, [1])
        self.writer.release(1)
        self.assertEqual(self.successResultOf(d), 1)
        self.assertIsNotNone(job_file(self.queue, 1))
        self.assertEqual(self.queue.query_jobs(None, ["id"]), [[1]])

    def test_a_job_whose_file_fails_is_not_accepted(self):
        d = self.submit()
        self.writer.fail_next(OSError(5, "Input/output error"))
        err = self.failureResultOf(d, errors.JobQueueError).value
        self.assertIn("Job 1 could not be written", str(err))
        self.assertIn("Input/output error", str(err))
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 1)
        self.clock.advance(0)
        self.writer.release()
        self.assertEqual(self.executor.started, [])
        self.assertEqual(self.queue.query_jobs(None, ["id"]), [])

    def test_a_started_job_whose_file_fails_does_not_run(self):
        d = self.submit()
        self.clock.advance(0)                 # starts, waits for "running"
        self.assertEqual(self.executor.started, [1])
        self.writer.fail_next(OSError(5, "Input/output error"))
        self.failureResultOf(d, errors.JobQueueError)
        self.flushLoggedErrors(OSError)
        # the disk works again: "running" is written, yet the opcode is
        # not told to go on (its submitter was told the job failed)
        self.writer.release()
        self.clock.advance(0)
        self.writer.release()
        self.assertEqual(self.executor.started, [1])
        status = self.queue.query_jobs([1], ["status", "opresult"])[0]
        self.assertEqual(status[0], "error")
        self.assertIn("could not be written when it was submitted",
                      str(status[1]))
        self.flushLoggedErrors(errors.JobQueueError)

    def test_running_and_success_reported_after_the_writes(self):
        d = self.submit()
        self.writer.release()
        self.assertEqual(self.successResultOf(d), 1)
        waiter = self.queue.wait_for_job_change(1, ["status"], ["queued"],
                                                None, 60)
        self.clock.advance(0)      # the job starts
        self.writer.release(1)     # the serial file
        self.assertEqual(self.executor.started, [1])
        # notify_running waits for "running" to reach the disk
        self.writer.release()
        self.assertEqual(self.executor.started, [1, "1 running on disk"])
        self.successResultOf(waiter)
        # finished in memory, not yet on disk: waiters hear nothing yet,
        # queries show the job as written
        waiter = self.queue.wait_for_job_change(1, ["status"], ["running"],
                                                None, 60)
        self.assertNoResult(waiter)
        self.assertEqual(self.queue.query_jobs([1], ["status"]),
                         [["running"]])
        self.assertEqual(self.queue.get_job(1).status, "running")
        self.writer.release()
        self.assertEqual(self.successResultOf(waiter), [["success"], []])
        self.assertEqual(self.queue.query_jobs([1], ["status"]),
                         [["success"]])
        self.clock.advance(60)

    def run_until(self, predicate):
        """Let the writes through one at a time until ``predicate()``."""
        for _ in range(50):
            self.clock.advance(0)
            if predicate():
                return
            self.writer.release(1)
        self.fail("never happened")

    def status(self, job_id):
        row = self.queue.query_jobs([job_id], ["status"])[0]
        return row and row[0]

    def final_write_held(self, job_id):
        return any(path.endswith("/job-%d" % job_id)
                   and b'"status":"success"' in data
                   for _, args, _, _ in self.writer.held if args
                   and isinstance(args[0], dict)
                   for path, data in args[0].items())

    def test_dependent_job_waits_for_the_final_write(self):
        self.submit()
        self.submit(depends=[[1, ["success"]]])
        self.run_until(lambda: self.final_write_held(1))
        # job 1's success is in memory and waits to be written; its file
        # still says running, and so do queries
        self.assertEqual(self.status(1), "running")
        with open(job_file(self.queue, 1), "rb") as f:
            self.assertIn(b'"status":"running"', f.read())
        self.clock.advance(0)
        self.assertNotIn(2, self.executor.started)
        self.run_until(lambda: self.status(2) == "success")
        self.assertEqual(self.executor.started[2:],
                         [2, "2 running on disk"])

    def test_shutdown_waits_for_the_writes(self):
        self.submit()
        d = self.queue.shutdown()
        self.assertNoResult(d)
        self.writer.release()
        self.successResultOf(d)


class ConfigWithHeldWritesTests(unittest.TestCase):

    def setUp(self):
        self.cfg = make_store(self)
        self.writer = HeldWriter()
        self.cfg.writer = self.writer
        self.heard = []
        self.cfg.write_listeners.append(
            lambda store: self.heard.append(store.serial_no))
        with open(self.cfg.path, "rb") as f:
            self.on_disk = f.read()

    def disk(self):
        with open(self.cfg.path, "rb") as f:
            return f.read()

    def test_change_accepted_now_written_later_listeners_after(self):
        self.cfg.add_tags("cluster", None, ["one"])
        self.assertIn("one", self.cfg.cluster.tags)
        flushed = self.cfg.flushed()
        self.assertNoResult(flushed)
        self.assertEqual(self.disk(), self.on_disk)
        self.assertEqual(self.heard, [])
        self.writer.release()
        self.successResultOf(flushed)
        self.assertIn(b'"one"', self.disk())
        self.assertEqual(self.heard, [self.cfg.serial_no])

    def test_failed_write_refuses_further_changes(self):
        self.cfg.add_tags("cluster", None, ["one"])
        flushed = self.cfg.flushed()
        self.writer.fail_next(OSError(28, "No space left on device"))
        err = self.failureResultOf(flushed, errors.ConfigurationError).value
        self.assertIn("No space left on device", str(err))
        self.assertEqual(self.heard, [])
        self.assertEqual(self.disk(), self.on_disk)
        err = self.assertRaises(errors.ConfigurationError,
                                self.cfg.add_tags, "cluster", None, ["two"])
        self.assertIn("no further change is accepted until the master"
                      " daemon is restarted", str(err))
        self.assertNotIn("two", self.cfg.cluster.tags)
        self.failureResultOf(self.cfg.flushed(), errors.ConfigurationError)

    def test_verify_failure_still_rolls_back_at_once(self):
        serial = self.cfg.serial_no
        node = next(iter(self.cfg.nodes.values()))
        self.assertRaises(errors.GenericError, self.cfg.set_node_params,
                          node.uuid, group="no-such-group")
        self.assertEqual(self.cfg.serial_no, serial)
        self.assertEqual(self.writer.held, [])

    def test_node_calls_wait_for_the_configuration(self):
        calls = []

        class Rpc(object):
            def call(self, node, procedure, args=(), timeout=None):
                calls.append((node, procedure))
                return defer.succeed("answer")
        rpc = mcpu.ConfigFirstRpc(Rpc(), self.cfg)
        self.assertEqual(self.successResultOf(rpc.call("n1", "version")),
                         "answer")
        self.cfg.add_tags("cluster", None, ["one"])
        d = rpc.call("n1", "instance_start")
        self.assertEqual(calls, [("n1", "version")])
        self.writer.release()
        self.assertEqual(self.successResultOf(d), "answer")
        self.assertEqual(calls, [("n1", "version"), ("n1", "instance_start")])


class MasterWithSlowDiskTests(unittest.TestCase):
    """A real master daemon (in-process) whose config.data write hangs, as
    on a failing disk: it keeps answering queries; the job that changed
    the configuration succeeds once the write is done, not before."""

    timeout = 60

    @defer.inlineCallbacks
    def setUp(self):
        from ganeti.config import store as store_module
        self.gate = threading.Event()
        self.addCleanup(self.gate.set)
        self.blocked = threading.Event()
        real_write = store_module.atomic_write
        reactor_thread = threading.get_ident()

        def slow_write(path, data, **kwargs):
            # config.data as the writer thread writes it: hangs until the
            # test lets it go (the first one, made by the test, does not)
            if path.endswith("/config.data") and not self.gate.is_set() \
                    and threading.get_ident() != reactor_thread:
                self.blocked.set()
                self.gate.wait(30)
            return real_write(path, data, **kwargs)
        self.patch(store_module, "atomic_write", slow_write)
        self.master, self.client = yield start_master(self, "slow")

    @defer.inlineCallbacks
    def test_queries_answered_while_config_write_hangs(self):
        job_id = yield self.client.submit_job([
            {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": ["slow"]}])
        # wait (on the reactor, not blocking it) for the stuck write
        for _ in range(500):
            if self.blocked.is_set():
                break
            yield task.deferLater(reactor, 0.01, lambda: None)
        self.assertTrue(self.blocked.is_set(), "config.data was not written")
        latencies = []
        for _ in range(20):
            start = reactor.seconds()
            info = yield self.client.query_cluster_info()
            latencies.append(reactor.seconds() - start)
            self.assertIn("slow", info["tags"])     # accepted in memory
            (status,), = yield self.client.query_jobs([job_id], ["status"])
            self.assertEqual(status, "running")     # not success yet
        latencies.sort()
        # the figure, for the record (a query while config.data hangs)
        print("query latency while config.data's write hangs: median"
              " %.2f ms, max %.2f ms" % (latencies[10] * 1000,
                                         latencies[-1] * 1000))
        self.gate.set()
        prev = None
        while True:
            answer = yield self.client.wait_for_job_change(
                job_id, ["status"], prev, None, 10)
            if answer != "nochange":
                prev = answer[0]
                if prev[0] in ("success", "error", "canceled"):
                    break
        self.assertEqual(prev, ["success"])
        with open(self.master.cfg.path, "rb") as f:
            self.assertIn(b'"slow"', f.read())
