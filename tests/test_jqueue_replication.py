"""The job queue's copies on the master candidates (ganeti.jqueue.
replication): a real queue on a real directory, a fake clock, and
candidates that keep their copies with the node daemon's own procedures
(ganeti.server.noded.queue_replica), each under a root of its own,
behind a fake RPC client that can hold, fail or never answer calls."""

import os

from twisted.internet import defer
from twisted.logger import LogLevel, capturedLogs, formatEvent
from twisted.python.failure import Failure

from ganeti import jqueue
from ganeti import objects
from ganeti import pathutils
from ganeti import replication as cfg_replication
from ganeti.jqueue import replication
from ganeti.jqueue.journal import WriterJournal
from ganeti.jqueue.store import JobStore
from ganeti.server.noded.procedure import INLINE, ProcedureTable, \
    error_message
from ganeti.server.noded.queue_replica import QueueReplicaProcedures
from ganeti.utils.writer import InlineWriter

from tests.fakes import ClockTestCase, FakeRpc, NodeFailure
from tests.test_config import make_store
from tests.test_jqueue import FakeExecutor, T0, op

NODE2 = "node2.example.com"
NODE3 = "node3.example.com"
NODE4 = "node4.example.com"
QUEUE = "/var/lib/ganeti/queue/"


class _Node(QueueReplicaProcedures, ProcedureTable):
    """One node's queue procedures, file work done at once."""

    def __init__(self, root):
        self.paths = pathutils.Paths(root)
        ProcedureTable.__init__(self, INLINE)


class QueueCopies(FakeRpc):
    """Master candidates keeping their copies of the queue for real.

    ``hang(node)``: calls to it are never answered and fail once their
    timeout has passed on the clock, as RpcClient's do.  ``raw`` keeps
    every call's argument object as given (not a copy)."""

    def __init__(self, testcase, clock, names):
        FakeRpc.__init__(self)
        self.clock = clock
        self.nodes = {}
        for name in names:
            root = os.path.abspath(testcase.mktemp())
            os.makedirs(root)
            self.nodes[name] = _Node(root)
        self.hung = set()
        self.raw = []
        self.timeouts = []

    def queue_dir(self, node):
        return self.nodes[node].paths.queue_dir

    def hang(self, node):
        self.hung.add(node)

    def call(self, node, procedure, args=(), timeout=None):
        self.raw.append((node, procedure, args))
        self.timeouts.append(timeout)
        if node in self.hung:
            self.calls.append((node, procedure, list(args)))
            d = defer.Deferred()
            self.clock.callLater(timeout, lambda: d.callback(self.failed(
                node, procedure, "no answer to %s within %ss"
                % (procedure, timeout))))
            return d
        return FakeRpc.call(self, node, procedure, args, timeout)

    def payload(self, node, procedure, args):
        if node not in self.nodes:
            raise NodeFailure("no such node")
        outcome = []
        self.nodes[node].call(procedure, args).addBoth(outcome.append)
        if isinstance(outcome[0], Failure):
            raise NodeFailure(error_message(outcome[0].value))
        return outcome[0]

    def of(self, node, procedure=None):
        return [c for c in self.calls if c[0] == node and
                (procedure is None or c[1] == procedure)]


def tree(directory, skip=("lock", "journal")):
    """Every file below ``directory`` (relative name -> content), the lock
    file and the journal left out."""
    found = {}
    for dirpath, _, names in os.walk(directory):
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), directory)
            if rel in skip or name.startswith("."):
                continue
            with open(os.path.join(dirpath, name), "rb") as f:
                found[rel] = f.read()
    return found


class ReplicationTestCase(ClockTestCase):
    """A master (node1) whose queue is copied to node2 and node3, the
    master candidates; node4 is neither candidate nor offline."""

    CANDIDATES = (NODE2, NODE3)

    def setUp(self):
        ClockTestCase.setUp(self)
        self.clock.advance(T0)
        self.cfg = make_store(self)
        for name, ip in ((NODE2, "127.0.0.2"), (NODE3, "127.0.0.3"),
                         (NODE4, "127.0.0.4")):
            self.cfg.add_node(objects.Node(name=name, primary_ip=ip,
                                           master_candidate=False))
        for name in self.CANDIDATES:
            self.cfg.set_node_params(name, master_candidate=True)
        self.rpc = QueueCopies(self, self.clock, [NODE2, NODE3, NODE4])
        self.dir = os.path.abspath(self.mktemp())
        self.executor = FakeExecutor()
        self.queue, self.rep = self.make_queue()

    def make_queue(self):
        store = JobStore(self.dir)
        self.addCleanup(store.unlock)
        writer = InlineWriter()
        rep = replication.QueueReplicator(
            WriterJournal(store, writer), self.dir, self.cfg, self.rpc,
            self.clock, writer.call)
        self.cfg.write_listeners.append(rep.config_written)
        queue = jqueue.JobQueue(self.dir, self.executor, clock=self.clock,
                                store=store, writer=writer, journal=rep)
        queue.load()
        return queue, rep

    def tearDown(self):
        # every call answered, the queue and the copies stopped
        for key in list(self.rpc._held):
            self.rpc.release(key, keep=False)
        self.rpc.hung.clear()
        shutdown = self.queue.shutdown()
        self.clock.advance(replication.UPDATE_TIMEOUT)
        self.successResultOf(shutdown)
        if not self.rep.stopped:
            self.successResultOf(self.rep.stop())
        ClockTestCase.tearDown(self)

    def start(self):
        """The master started: full copies, answered at once."""
        self.rep.start(self.queue.drained)
        self.turn()

    def turn(self):
        self.clock.advance(0)

    def submit(self, *ops):
        """A job's submission; its id comes once the copies answered (on
        the next turn, at the earliest)."""
        return self.queue.submit_job(list(ops) or [op()])

    def submitted(self, *ops):
        """Submit a job, answered by every candidate; its id."""
        d = self.submit(*ops)
        self.turn()
        return self.successResultOf(d)

    def master_files(self):
        return tree(self.dir)

    def assertSameQueue(self, node):
        self.assertEqual(tree(self.rpc.queue_dir(node)), self.master_files())

    def updates(self, node):
        """The files of each jobqueue_update call to ``node``: [{name:
        content}]."""
        return [{path[len(QUEUE):]: cfg_replication.decode_data(data)
                 for path, data in call[2][0]}
                for call in self.rpc.of(node, "jobqueue_update")]


class FullCopyTests(ReplicationTestCase):

    def test_start_copies_the_queue_in_the_background(self):
        # a copy an older master left: replaced entirely
        old = self.rpc.queue_dir(NODE2)
        os.makedirs(old)
        with open(os.path.join(old, "job-99"), "w") as f:
            f.write("stale")
        with open(os.path.join(old, "journal"), "w") as f:
            f.write("a journal of that master")
        self.submitted()
        self.rpc.hold(NODE3)
        self.start()
        # what the master lacks goes first; the rest is replaced
        self.assertEqual(self.rpc.of(NODE2)[0],
                         (NODE2, "jobqueue_purge",
                          [[QUEUE + "job-1", QUEUE + "serial",
                            QUEUE + "version"]]))
        self.assertSameQueue(NODE2)
        self.assertFalse(os.path.exists(os.path.join(old, "journal")))
        self.assertEqual(self.rep.status_of(NODE2).state,
                         replication.SYNCED)
        # node3 is still being copied: nobody waits for it
        self.assertEqual(self.rep.status_of(NODE3).state,
                         replication.RESYNCING)
        job = self.submit()
        self.turn()
        self.assertEqual(self.successResultOf(job), 2)
        self.rpc.release(NODE3, keep=False)
        self.assertSameQueue(NODE2)
        self.assertSameQueue(NODE3)
        # not a candidate, the master: nothing
        self.assertEqual(self.rpc.of(NODE4), [])
        self.assertEqual(self.rpc.of("node1.example.com"), [])
        self.assertEqual(self.rep.missed(), {})

    def test_a_full_copy_is_sent_in_chunks(self):
        self.patch(replication, "CHUNK_FILES", 3)
        for _ in range(7):
            self.submitted()
        self.turn()
        self.start()
        chunks = self.updates(NODE2)
        self.assertEqual([len(c) for c in chunks], [3, 3, 3])
        self.assertEqual(sorted(chunks[2]), ["job-7", "serial", "version"])
        self.assertEqual(self.rpc.procedures(NODE2)[-1],
                         "jobqueue_set_drain_flag")
        self.assertSameQueue(NODE2)
        for timeout in self.rpc.timeouts:
            self.assertEqual(timeout, replication.RESYNC_TIMEOUT)

    def test_forced_copy_reports_failures(self):
        self.start()
        self.rpc.fail[(NODE3, "jobqueue_purge")] = "disk on fire"
        missed = self.successResultOf(self.rep.resync())
        self.assertEqual(missed, {NODE3: "node %s: disk on fire" % NODE3})
        self.assertEqual(self.rep.missed(), missed)
        self.assertEqual(self.rpc.procedures(NODE2).count("jobqueue_purge"),
                         2)
        del self.rpc.fail[(NODE3, "jobqueue_purge")]
        self.assertEqual(self.successResultOf(self.rep.resync()), {})
        self.assertEqual(self.rep.missed(), {})
        self.assertSameQueue(NODE3)


class InStepTests(ReplicationTestCase):

    def setUp(self):
        ReplicationTestCase.setUp(self)
        self.start()
        self.rpc.calls[:] = []
        self.rpc.raw[:] = []
        self.rpc.timeouts[:] = []

    def test_acknowledged_only_once_every_candidate_answered(self):
        self.rpc.hold(NODE3)
        job = self.submit()
        self.turn()
        # in the master's journal, on node2, not yet answered by node3
        self.assertTrue(os.path.exists(os.path.join(self.dir, "job-1")))
        self.assertIn("job-1", self.updates(NODE2)[0])
        self.assertNoResult(job)
        self.rpc.release(NODE3, keep=False)
        self.assertEqual(self.successResultOf(job), 1)
        self.assertSameQueue(NODE3)
        self.assertEqual(set(self.rpc.timeouts),
                         {replication.UPDATE_TIMEOUT})

    def test_opcode_waits_for_its_running_state_on_the_copies(self):
        self.submitted()
        self.turn()
        self.turn()
        call = self.executor.calls[0]
        self.rpc.hold(NODE2)
        running = call.ctx.notify_running()
        self.turn()
        self.assertNoResult(running)
        self.rpc.release(NODE2, keep=False)
        self.successResultOf(running)
        copy = self.rpc.nodes[NODE2].paths.queue_dir
        with open(os.path.join(copy, "job-1")) as f:
            self.assertIn('"status":"running"', f.read())

    def test_one_call_per_turn_encoded_once(self):
        jobs = [self.submit() for _ in range(5)]
        self.turn()
        for job in jobs:
            self.successResultOf(job)
        # the jobs of that turn in one call; the serial (and the jobs
        # starting) in calls of the turns after
        for node in (NODE2, NODE3):
            first = self.updates(node)[0]
            self.assertEqual(sorted(n for n in first if n != "serial"),
                             ["job-%d" % i for i in range(1, 6)])
        args = [a for n, p, a in self.rpc.raw if p == "jobqueue_update"]
        self.assertIs(args[0], args[1])
        self.assertEqual([n for n, p, a in self.rpc.raw][:2], [NODE2, NODE3])

    def test_one_call_in_flight_and_newer_contents_coalesced(self):
        self.rpc.hold(NODE2)
        first = self.submit()
        self.turn()
        self.assertEqual(len(self.rpc.of(NODE2)), 1)
        # while it is in flight: job 1 changes (its serial too) and more
        # jobs come, over several turns
        self.turn()
        self.turn()
        second = self.submit()
        self.turn()
        third = self.submit()
        self.turn()
        self.assertEqual(len(self.rpc.of(NODE2)), 1)
        self.assertNoResult(third)
        self.rpc.release(NODE2)
        self.successResultOf(first)
        # the rest in one call, each file once, with its newest content
        self.assertEqual(len(self.rpc.of(NODE2)), 2)
        self.assertEqual(sorted(self.updates(NODE2)[1]),
                         ["job-1", "job-2", "job-3", "serial"])
        self.assertNoResult(third)
        self.rpc.release(NODE2, keep=False)
        self.successResultOf(second)
        self.successResultOf(third)
        self.assertSameQueue(NODE2)

    def test_unreachable_node_costs_one_timeout_then_is_skipped(self):
        self.rpc.hang(NODE3)
        first = self.submit()
        self.turn()
        self.assertNoResult(first)
        second = self.submit()
        self.turn()
        self.clock.advance(replication.UPDATE_TIMEOUT - 0.5)
        self.assertNoResult(first)
        self.assertNoResult(second)
        with capturedLogs() as events:
            self.clock.advance(0.5)
        self.assertEqual(self.successResultOf(first), 1)
        self.assertEqual(self.successResultOf(second), 2)
        warnings = [formatEvent(e) for e in events
                    if e["log_level"] == LogLevel.warn]
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("Job queue replication to node %s failed" % NODE3,
                      warnings[0])
        status = self.rep.status_of(NODE3)
        self.assertEqual(status.state, replication.MISSED)
        self.assertEqual(status.failures, 1)
        self.assertIn("no answer", self.rep.missed()[NODE3])
        # later jobs do not wait for it at all, and it is not sent them
        calls = len(self.rpc.of(NODE3))
        self.assertEqual(self.submitted(), 3)
        self.assertEqual(len(self.rpc.of(NODE3)), calls)
        # the full copy is tried again in the background, less and less
        # often, while jobs go on
        self.rpc.hung.discard(NODE3)
        self.rpc.fail[NODE3] = "connection refused"
        self.clock.advance(replication.RETRY_MIN)
        self.assertEqual(status.failures, 2)
        self.clock.advance(replication.RETRY_MIN)
        self.assertEqual(status.failures, 2)
        self.clock.advance(replication.RETRY_MIN)
        self.assertEqual(status.failures, 3)
        self.assertEqual(self.submitted(), 4)
        # it answers again: a full copy, then it is in step
        del self.rpc.fail[NODE3]
        self.clock.advance(4 * replication.RETRY_MIN)
        self.assertEqual(status.state, replication.SYNCED)
        self.assertIsNone(status.error)
        self.assertEqual(self.rep.missed(), {})
        self.assertSameQueue(NODE3)
        self.rpc.hold(NODE3)
        job = self.submit()
        self.turn()
        self.assertNoResult(job)
        self.rpc.release(NODE3, keep=False)
        self.successResultOf(job)

    def test_retry_delay_is_bounded(self):
        self.rpc.fail[NODE3] = "down"
        self.submitted()
        status = self.rep.status_of(NODE3)
        delays = []
        for _ in range(8):
            before = status.failures
            waited = 0.0
            while status.failures == before:
                self.clock.advance(0.5)
                waited += 0.5
            delays.append(waited)
        self.assertEqual(delays, [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0,
                                  30.0])

    def test_archive_is_replicated_as_moves(self):
        self.executor.auto = True
        for _ in range(2):
            self.submitted()
        self.turn()
        self.turn()
        self.assertEqual(self.queue.query_jobs([], ["status"]),
                         [["success"], ["success"]])
        self.rpc.hold(NODE2)
        archived = self.queue.archive_job(1)
        self.assertNoResult(archived)
        self.assertEqual(self.rpc.of(NODE2, "jobqueue_rename")[-1][2],
                         [[[QUEUE + "job-1", QUEUE + "archive/0/job-1"]]])
        self.rpc.release(NODE2, keep=False)
        self.assertTrue(self.successResultOf(archived))
        for node in (NODE2, NODE3):
            self.assertSameQueue(node)
            self.assertIn("archive/0/job-1", tree(self.rpc.queue_dir(node)))
        self.assertEqual(self.successResultOf(
            self.queue.auto_archive_jobs(-1, 60)), [1, 0])
        self.assertIn("archive/0/job-2", tree(self.rpc.queue_dir(NODE3)))
        self.assertSameQueue(NODE3)

    def test_moves_come_after_the_last_contents(self):
        # (the queue archives only jobs whose final state the copies
        # have; the replicator keeps that order whatever it is given)
        path = os.path.join(self.dir, "job-5")
        self.rpc.hold(NODE2)
        self.rep.commit(path, b"first")
        self.turn()
        self.rep.commit(path, b"last")
        moved = self.rep.archived([5])
        self.assertEqual(self.rpc.procedures(NODE2), ["jobqueue_update"])
        self.rpc.release(NODE2)
        self.assertEqual(self.rpc.procedures(NODE2), ["jobqueue_update"] * 2)
        self.assertEqual(self.updates(NODE2)[1], {"job-5": b"last"})
        self.rpc.release(NODE2, keep=False)
        self.successResultOf(moved)
        self.assertEqual(self.rpc.procedures(NODE2)[2:], ["jobqueue_rename"])
        self.assertEqual(tree(self.rpc.queue_dir(NODE2))["archive/0/job-5"],
                         b"last")
        self.assertEqual(tree(self.rpc.queue_dir(NODE3))["archive/0/job-5"],
                         b"last")

    def test_archive_while_missed_comes_with_the_full_copy(self):
        self.executor.auto = True
        self.submitted()
        self.turn()
        self.turn()
        self.rpc.fail[NODE3] = "down"
        self.submitted()
        self.turn()
        self.turn()
        self.assertTrue(self.successResultOf(self.queue.archive_job(1)))
        self.assertEqual(self.rpc.of(NODE3, "jobqueue_rename"), [])
        del self.rpc.fail[NODE3]
        self.clock.advance(replication.RETRY_MIN)
        self.assertIn("archive/0/job-1",
                      self.updates(NODE3)[-1])
        self.assertSameQueue(NODE3)

    def test_drain_flag(self):
        self.rpc.hold(NODE3)
        done = self.queue.set_drain_flag(True)
        self.assertNoResult(done)
        self.rpc.release(NODE3, keep=False)
        self.assertTrue(self.successResultOf(done))
        for node in (NODE2, NODE3):
            self.assertEqual(self.rpc.of(node, "jobqueue_set_drain_flag"),
                             [(node, "jobqueue_set_drain_flag", [True])])
            self.assertSameQueue(node)
            self.assertTrue(os.path.exists(os.path.join(
                self.rpc.queue_dir(node), "drain")))
        # a missed node gets the flag as it is by the time of its copy
        self.rpc.fail[NODE3] = "down"
        self.successResultOf(self.queue.set_drain_flag(False))
        del self.rpc.fail[NODE3]
        self.clock.advance(replication.RETRY_MIN)
        self.assertEqual(self.rpc.of(NODE3, "jobqueue_set_drain_flag")[-1],
                         (NODE3, "jobqueue_set_drain_flag", [False]))
        self.assertSameQueue(NODE3)

    def test_promotion_gets_a_full_copy_and_demotion_stops_sends(self):
        self.submitted()
        self.cfg.set_node_params(NODE4, master_candidate=True)
        self.turn()
        self.assertEqual(self.rpc.procedures(NODE4)[0], "jobqueue_purge")
        self.assertSameQueue(NODE4)
        # demoted while a call is in flight: its answer is not waited for
        self.rpc.hold(NODE2)
        job = self.submit()
        self.turn()
        self.assertNoResult(job)
        self.cfg.set_node_params(NODE2, master_candidate=False)
        self.turn()
        self.successResultOf(job)
        self.rpc.release(NODE2, keep=False)
        calls = len(self.rpc.of(NODE2))
        self.submitted()
        self.turn()
        self.assertEqual(len(self.rpc.of(NODE2)), calls)
        self.assertNotIn(self.cfg.get_node(NODE2).uuid, self.rep.status)
        # offline is out as well; back online, a full copy again
        self.cfg.set_node_params(NODE3, offline=True, master_candidate=False)
        self.turn()
        self.cfg.set_node_params(NODE3, offline=False,
                                 master_candidate=True)
        self.turn()
        self.assertEqual(self.rpc.procedures(NODE3)[-1],
                         "jobqueue_set_drain_flag")
        self.assertSameQueue(NODE3)

    def test_stop_sends_what_is_pending(self):
        self.rpc.hold(NODE2)
        job = self.submit()
        self.turn()
        stopped = self.rep.stop()
        self.assertNoResult(stopped)
        self.rpc.release(NODE2, keep=False)
        self.successResultOf(stopped)
        self.successResultOf(job)
        self.assertSameQueue(NODE2)
        # what comes after the stop goes to the journal alone
        calls = len(self.rpc.calls)
        path = os.path.join(self.dir, "job-9")
        self.successResultOf(self.rep.commit(path, b"late"))
        self.assertEqual(len(self.rpc.calls), calls)


class NoCandidateTests(ReplicationTestCase):

    CANDIDATES = ()

    def test_no_other_candidate_costs_nothing(self):
        self.start()
        calls = []
        journal = self.rep.journal
        original = journal.commit

        def commit(path, data):
            d = original(path, data)
            calls.append(d)
            return d
        journal.commit = commit
        path = os.path.join(self.dir, "job-7")
        d = self.rep.commit(path, b"{}")
        # the journal's own Deferred, nothing scheduled, nobody called
        self.assertIs(d, calls[0])
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.rpc.calls, [])
        self.successResultOf(d)

    def test_a_first_candidate_gets_a_full_copy(self):
        self.start()
        self.submitted()
        self.turn()
        self.cfg.set_node_params(NODE3, master_candidate=True)
        self.turn()
        self.assertSameQueue(NODE3)
        self.rpc.hold(NODE3)
        job = self.submit()
        self.turn()
        self.assertNoResult(job)
        self.rpc.release(NODE3, keep=False)
        self.successResultOf(job)
