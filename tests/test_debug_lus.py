"""The test and debugging opcodes: OP_TEST_DUMMY, OP_TEST_JQUEUE (its
notifications over real UNIX sockets, timeouts on a Clock),
OP_TEST_OS_PARAMS, and OP_CLUSTER_POST_INIT's hooks."""

import os

from twisted.internet import defer, protocol, reactor, task
from twisted.internet.endpoints import UNIXClientEndpoint

from ganeti import cmdlib
from ganeti import errors
from ganeti import mcpu
from ganeti import opcodes
from ganeti import pathutils
from ganeti.cmdlib import cluster_post_init
from ganeti.cmdlib import test as test_lus

from tests.fakes import ClockTestCase, FakeRunner
from tests.test_config import make_store

SECRET = "s3cr3t-Pa55"


class Feedback(object):
    """The job's log as the queue's OpContext takes it (with types)."""

    def __init__(self):
        self.entries = []
        self.on_entry = None
        self.submitted = []

    def __call__(self, msg, type="message"):
        self.entries.append((type, msg))
        if self.on_entry is not None:
            self.on_entry(type, msg)

    def messages(self):
        return [m for t, m in self.entries if t == "message"]

    def submit_jobs(self, jobs):
        answer = []
        for ops in jobs:
            self.submitted.append([op.OP_ID for op in ops])
            answer.append([True, 100 + len(self.submitted)])
        return answer


class LUTestCase(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.cfg = make_store(self)
        self.glm = mcpu.make_lock_manager(self.cfg, self.clock)
        self.runner = FakeRunner()
        self.root = os.path.abspath(self.mktemp())
        os.makedirs(self.root)
        self.ctx = mcpu.MasterContext(cfg=self.cfg, glm=self.glm,
                                      clock=self.clock, runner=self.runner,
                                      paths=pathutils.Paths(self.root))
        self.proc = mcpu.Processor(self.ctx, cmdlib.LOGICAL_UNITS)
        self.feedback = Feedback()

    def run_op(self, **data):
        op = opcodes.from_dict(data)
        return self.proc.execute(1, 0, op, self.feedback)

    def ok(self, **data):
        return self.successResultOf(self.run_op(**data))

    def fails(self, kind, **data):
        return self.failureResultOf(self.run_op(**data), kind).value


class TestDummyTests(LUTestCase):

    def test_result_and_messages(self):
        self.assertEqual(self.ok(OP_ID="OP_TEST_DUMMY",
                                 result={"answer": 42},
                                 messages=["one", "two"]), {"answer": 42})
        self.assertEqual(self.feedback.messages(), ["one", "two"])

    def test_fail(self):
        err = self.fails(errors.OpExecError, OP_ID="OP_TEST_DUMMY",
                         result=1, fail=True, messages=["before"])
        self.assertEqual(err.args[0], "Opcode failure was requested")
        self.assertEqual(self.feedback.messages(), ["before"])

    def test_submit_jobs(self):
        result = self.ok(OP_ID="OP_TEST_DUMMY", result="r", submit_jobs=[
            [{"OP_ID": "OP_TEST_DELAY", "duration": 0}],
            [{"OP_ID": "OP_TEST_DUMMY"}, {"OP_ID": "OP_TEST_DUMMY"}]])
        self.assertEqual(result, {"jobs": [[True, 101], [True, 102]],
                                  "result": "r"})
        self.assertEqual(self.feedback.submitted,
                         [["OP_TEST_DELAY"], ["OP_TEST_DUMMY",
                                              "OP_TEST_DUMMY"]])

    def test_bad_input_named(self):
        err = self.fails(errors.OpPrereqError, OP_ID="OP_TEST_DUMMY",
                         submit_jobs=[[{"OP_ID": "OP_NOSUCH"}]])
        self.assertIn("submit_jobs[0][0]", err.args[0])
        err = self.fails(errors.OpPrereqError, OP_ID="OP_TEST_DUMMY",
                         messages="not a list")
        self.assertIn("messages", err.args[0])
        err = self.fails(errors.OpPrereqError, OP_ID="OP_TEST_DUMMY",
                         submit_jobs=[[]])
        self.assertIn("submit_jobs[0]", err.args[0])
        self.assertEqual(self.feedback.submitted, [])


class _Peer(protocol.Protocol):
    pass


@defer.inlineCallbacks
def until(predicate, turns=1000):
    """Let the real reactor turn until ``predicate()`` is true."""
    for _ in range(turns):
        if predicate():
            return
        yield task.deferLater(reactor, 0, lambda: None)
    raise AssertionError("condition not reached")


class TestJqueueTests(LUTestCase):

    def test_without_notifications(self):
        self.assertIs(self.ok(OP_ID="OP_TEST_JQUEUE"), True)
        self.assertEqual(self.feedback.entries, [
            ("message", "Expanding names"), ("message", "Executing")])

    def connect_on_notification(self, seen, close=True):
        """Answer each "jqueue-test" entry as gnt-debug test-jobqueue
        does: connect to the socket named, then close it."""
        def on_entry(kind, msg):
            if kind != "jqueue-test":
                return
            path, test, arg = msg
            seen.append((test, arg, os.path.exists(path)))
            d = UNIXClientEndpoint(reactor, path).connect(
                protocol.Factory.forProtocol(_Peer))
            if close:
                d.addCallback(lambda p: p.transport.loseConnection())
            else:
                self.open = d
        self.feedback.on_entry = on_entry

    @defer.inlineCallbacks
    def test_notifications_over_unix_sockets(self):
        seen = []
        self.connect_on_notification(seen)
        result = yield self.run_op(OP_ID="OP_TEST_JQUEUE",
                                   notify_waitlock=True, notify_exec=True,
                                   log_messages=["x", "y"])
        self.assertIs(result, True)
        self.assertEqual(seen, [("expandnames", None, True),
                                ("exec", None, True),
                                ("startmsg", 2, True),
                                ("logmsg", 1, True), ("logmsg", 2, True)])
        msgs = self.feedback.messages()
        self.assertIn("TESTMSG=x", msgs)
        self.assertLess(msgs.index("TESTMSG=x"), msgs.index("TESTMSG=y"))
        # the sockets are gone
        for kind, msg in self.feedback.entries:
            if kind == "jqueue-test":
                self.assertFalse(os.path.exists(os.path.dirname(msg[0])))

    @defer.inlineCallbacks
    def test_fail_after_the_messages(self):
        seen = []
        self.connect_on_notification(seen)
        d = self.run_op(OP_ID="OP_TEST_JQUEUE", notify_exec=True,
                        log_messages=["only"], fail=True)
        err = yield self.assertFailure(d, errors.OpExecError)
        self.assertEqual(err.args[0], "Opcode failure was requested")
        self.assertIn("TESTMSG=only", self.feedback.messages())

    @defer.inlineCallbacks
    def test_client_not_connecting(self):
        d = self.run_op(OP_ID="OP_TEST_JQUEUE", notify_waitlock=True)
        self.assertNoResult(d)
        self.clock.advance(test_lus.JQT_CONNECT_TIMEOUT)
        err = yield self.assertFailure(d, errors.OpPrereqError)
        self.assertIn("Client didn't connect in time", err.args[0])
        self.assertEqual(self.glm.query_locks()[0]["owners"], [])

    @defer.inlineCallbacks
    def test_client_not_closing(self):
        seen = []
        self.connect_on_notification(seen, close=False)
        d = self.run_op(OP_ID="OP_TEST_JQUEUE", notify_exec=True)
        peer = yield self.open
        # once the opcode has the connection, it waits for the close
        yield until(lambda: [c for c in self.clock.getDelayedCalls()
                             if c.getTime() == test_lus.JQT_CONFIRM_TIMEOUT])
        self.assertNoResult(d)
        self.clock.advance(test_lus.JQT_CONFIRM_TIMEOUT)
        err = yield self.assertFailure(d, errors.OpExecError)
        self.assertIn("failed to confirm", err.args[0])
        peer.transport.loseConnection()


class TestOsParamsTests(LUTestCase):

    def test_names_logged_values_never(self):
        self.assertIsNone(self.ok(OP_ID="OP_TEST_OS_PARAMS",
                                  osparams_secret={"root_pw": SECRET}))
        (msg,) = self.feedback.messages()
        self.assertIn("root_pw", msg)
        self.assertIn("<redacted>", msg)
        self.assertNotIn(SECRET, repr(self.feedback.entries))

    def test_without_secrets_fails(self):
        err = self.fails(errors.OpExecError, OP_ID="OP_TEST_OS_PARAMS")
        self.assertEqual(err.args[0], "Opcode needs secret parameters")


class PostInitTests(LUTestCase):

    def hooks_dir(self):
        d = cluster_post_init.hooks_dir(self.root, "cluster-init", "post")
        os.makedirs(d, exist_ok=True)
        return d

    def script(self, name, mode=0o755):
        path = os.path.join(self.hooks_dir(), name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(path, mode)
        return path

    def test_no_hooks(self):
        self.assertIs(self.ok(OP_ID="OP_CLUSTER_POST_INIT"), True)
        self.assertEqual(self.runner.commands, [])

    def test_hooks_run_in_order_with_their_environment(self):
        b = self.script("20-b")
        a = self.script("10-a")
        self.script("not.run")            # not a run-parts name
        self.script("30-off", mode=0o644)  # not executable
        envs = []

        def run(argv, env=None, **kw):
            envs.append(env)
            return FakeRunner.run(self.runner, argv, env=env, **kw)
        self.runner.run = run
        self.runner.answer([b], stdout=b"broken\n", code=1)
        self.assertIs(self.ok(OP_ID="OP_CLUSTER_POST_INIT"), True)
        self.assertEqual(self.runner.commands, [[a], [b]])
        self.assertEqual(envs[0]["GANETI_HOOKS_PHASE"], "post")
        self.assertEqual(envs[0]["GANETI_HOOKS_PATH"], "cluster-init")
        self.assertEqual(envs[0]["GANETI_OP_CODE"], "OP_CLUSTER_POST_INIT")
        self.assertEqual(envs[0]["GANETI_CLUSTER"], "cluster.example.com")
        self.assertEqual(envs[0]["GANETI_MASTER"], "node1.example.com")
        # a failing post hook is a warning, not a failure
        self.assertTrue(any(m.startswith("WARNING: Post hook of cluster-init")
                            and "broken" in m
                            for m in self.feedback.messages()))
