"""The shared fakes of tests/fakes.py behave as their users rely on."""

from twisted.internet import task
from twisted.trial import reporter, unittest

from tests import fakes

NODE1 = "node1.example.com"
NODE2 = "node2.example.com"


class FakeRpcTests(unittest.TestCase):

    def setUp(self):
        self.rpc = fakes.FakeRpc()

    def result(self, node, procedure, args=()):
        return self.successResultOf(self.rpc.call(node, procedure, args))

    def test_records_calls_with_copies_of_the_arguments(self):
        args = [{"size": 1}]
        self.rpc.answers["blockdev_create"] = True
        self.rpc.call(NODE1, "blockdev_create", args)
        args[0]["size"] = 2
        self.assertEqual(self.rpc.calls,
                         [(NODE1, "blockdev_create", [{"size": 1}])])
        self.assertEqual(self.rpc.calls[0].procedure, "blockdev_create")
        self.rpc.call(NODE2, "version")
        self.assertEqual(self.rpc.procedures(), ["blockdev_create", "version"])
        self.assertEqual(self.rpc.procedures(NODE2), ["version"])
        self.assertEqual(self.rpc.calls_of("version"),
                         [(NODE2, "version", [])])

    def test_answers_by_most_specific_key(self):
        self.rpc.answers.update({
            "version": 1, NODE2: "any procedure on node2",
            (NODE2, "version"): 2})
        self.assertEqual(self.result(NODE1, "version").payload, 1)
        self.assertEqual(self.result(NODE2, "version").payload, 2)
        self.assertEqual(self.result(NODE2, "node_info").payload,
                         "any procedure on node2")

    def test_answer_functions_and_node_failures(self):
        def grow(node, disk, amount):
            if amount > 10:
                raise fakes.NodeFailure("no space for %d" % amount)
            return [node, disk, amount]
        self.rpc.answers["blockdev_grow"] = grow
        self.assertEqual(self.result(NODE1, "blockdev_grow", ["d", 5]).payload,
                         [NODE1, "d", 5])
        result = self.result(NODE1, "blockdev_grow", ["d", 50])
        self.assertFalse(result.success)
        self.assertEqual(result.fail_msg, "node %s: no space for 50" % NODE1)

    def test_fixed_answers_are_copies(self):
        self.rpc.answers["node_info"] = {"storage": []}
        self.result(NODE1, "node_info").payload["storage"].append("changed")
        self.assertEqual(self.result(NODE1, "node_info").payload,
                         {"storage": []})

    def test_subclass_methods_answer_and_unknown_procedures_fail(self):
        class Nodes(fakes.FakeRpc):
            def _instance_list(self, node, hypervisors):
                return ["%s on %s" % (hypervisors[0], node)]
        rpc = Nodes()
        result = self.successResultOf(rpc.call(NODE1, "instance_list",
                                               [["fake"]]))
        self.assertEqual(result.payload, ["fake on %s" % NODE1])
        result = self.successResultOf(rpc.call(NODE1, "no_such_thing"))
        self.assertFalse(result.success)
        self.assertIn("unknown procedure 'no_such_thing'", result.fail_msg)

    def test_fail_by_message_or_function(self):
        self.rpc.answers["version"] = 1
        self.rpc.fail[NODE2] = "connection refused"
        self.rpc.fail["instance_start"] = (
            lambda node, args: "no memory" if args == ["big"] else None)
        self.rpc.answers["instance_start"] = True
        result = self.result(NODE2, "version")
        self.assertEqual((result.success, result.fail_msg),
                         (False, "node %s: connection refused" % NODE2))
        self.assertTrue(self.result(NODE1, "version").success)
        self.assertTrue(self.result(NODE1, "instance_start", ["small"])
                        .success)
        self.assertEqual(self.result(NODE1, "instance_start", ["big"])
                         .fail_msg, "node %s: no memory" % NODE1)

    def test_hold_and_release(self):
        state = {"payload": "before"}
        self.rpc.answers["version"] = lambda node: state["payload"]
        self.rpc.hold(NODE1)
        first = self.rpc.call(NODE1, "version")
        self.assertTrue(self.rpc.call(NODE2, "version").called)
        self.assertNoResult(first)
        self.assertEqual(len(self.rpc.calls), 2)
        state["payload"] = "after"
        self.rpc.release(NODE1)         # answered as things are now
        self.assertEqual(self.successResultOf(first).payload, "after")
        second = self.rpc.call(NODE1, "version")
        self.assertNoResult(second)     # still held
        self.rpc.release(NODE1, keep=False)
        self.successResultOf(second)
        self.successResultOf(self.rpc.call(NODE1, "version"))

    def test_call_many(self):
        self.rpc.answers["version"] = lambda node: node.upper()
        self.rpc.fail[NODE2] = "down"
        results = self.successResultOf(self.rpc.call_many(
            iter([NODE1, NODE2]), "version"))
        self.assertEqual(results[NODE1].payload, NODE1.upper())
        self.assertFalse(results[NODE2].success)


class FakeRunnerTests(unittest.TestCase):

    def setUp(self):
        self.runner = fakes.FakeRunner()

    def run_command(self, *argv):
        return self.successResultOf(self.runner.run(argv, timeout=5))

    def test_records_and_succeeds_by_default(self):
        result = self.run_command("lvremove", "-f", "xenvg/lv1")
        self.assertEqual((result.exit_code, result.stdout, result.failed),
                         (0, b"", False))
        self.assertEqual(self.runner.commands,
                         [["lvremove", "-f", "xenvg/lv1"]])

    def test_answers_by_prefix_newest_first(self):
        self.runner.answer(["lvs"], stdout=b"report")
        self.runner.answer(["lvs", "--units"], stderr=b"bad unit\n", code=5)
        self.assertEqual(self.run_command("lvs", "-o", "name").stdout,
                         b"report")
        result = self.run_command("lvs", "--units", "x")
        self.assertEqual((result.exit_code, result.stderr, result.output),
                         (5, b"bad unit\n", b"bad unit\n"))
        self.assertEqual(self.run_command("vgs").exit_code, 0)
        # a later answer for the same prefix replaces the earlier one
        self.runner.answer(["lvs"], code=3)
        self.assertEqual(self.run_command("lvs", "-o", "name").exit_code, 3)

    def test_handler_sees_the_command(self):
        self.runner.handle(["drbdsetup"],
                           lambda argv: (1, b"", " ".join(argv).encode()))
        result = self.run_command("drbdsetup", "down", "resource0")
        self.assertTrue(result.failed)
        self.assertEqual(result.stderr, b"drbdsetup down resource0")


def expire(name):
    """A timer's function, for the message to name."""


class ClockTestCaseTests(unittest.SynchronousTestCase):
    """A ClockTestCase fails a test that leaves timers on its clock."""

    def run_test(self, body):
        """Run ``body(case)`` as the test method of a ClockTestCase; the
        trial result."""
        class Case(fakes.ClockTestCase):
            def test_it(self):
                body(self)
        result = reporter.TestResult()
        Case("test_it").run(result)
        return result

    def test_a_pending_timer_fails_the_test_naming_it(self):
        def leave_a_timer(case):
            case.clock.advance(10)
            case.clock.callLater(5, expire, "lock-a")
        result = self.run_test(leave_a_timer)
        self.assertFalse(result.wasSuccessful())
        problems = result.errors + result.failures
        self.assertEqual(len(problems), 1)
        message = str(problems[0][1].value)
        self.assertIn("1 timer(s) left on the clock (now 10.000)", message)
        self.assertIn("tests.test_fakes.expire('lock-a') at 15.000", message)

    def test_timers_that_ran_or_were_cancelled_pass(self):
        def clean_up_timers(case):
            case.clock.callLater(5, expire, "ran")
            case.clock.callLater(50, expire, "cancelled").cancel()
            case.clock.advance(5)
        result = self.run_test(clean_up_timers)
        self.assertTrue(result.wasSuccessful(), result.errors)
        self.assertEqual(result.successes, 1)

    def test_subclasses_choose_the_clock(self):
        seen = []

        class OwnClock(task.Clock):
            pass

        class Case(fakes.ClockTestCase):
            def make_clock(self):
                return OwnClock()

            def test_it(self):
                seen.append(self.clock)
                self.clock.callLater(1, expire, "left")
        result = reporter.TestResult()
        Case("test_it").run(result)
        self.assertIsInstance(seen[0], OwnClock)
        self.assertFalse(result.wasSuccessful())
