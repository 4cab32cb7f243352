"""Job filter rules: their checks (ganeti.jobfilter), their place in
config.data (ConfigStore.replace_filter/delete_filter) and the master's
luxi methods QueryFilters, ReplaceFilter, DeleteFilter and Query."""

import json

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import errors
from ganeti import jobfilter
from ganeti import opcodes
from ganeti.config import ConfigStore

from tests.test_config import make_store


def delay(**params):
    params.setdefault("duration", 0)
    return opcodes.opcode_class("OP_TEST_DELAY")(**params)


class RuleCheckTests(unittest.TestCase):

    def refused(self, field, **changes):
        args = dict(uuid="u", watermark=0, priority=0, predicates=[],
                    action="ACCEPT", reason=[])
        args.update(changes)
        with self.assertRaises(errors.OpPrereqError) as ctx:
            jobfilter.make_rule(**args)
        self.assertIn(field, ctx.exception.args[0])
        return ctx.exception.args[0]

    def test_defaults(self):
        rule = jobfilter.make_rule("u", 3, None, [], "CONTINUE", [])
        self.assertEqual(rule, {"uuid": "u", "watermark": 3, "priority": 0,
                                "predicates": [], "action": "CONTINUE",
                                "reason_trail": []})

    def test_bad_priority(self):
        self.refused("priority", priority=-1)
        self.refused("priority", priority="1")
        self.refused("priority", priority=True)

    def test_bad_action(self):
        message = self.refused("action", action="DROP")
        self.assertIn("'DROP'", message)
        self.refused("action", action=["RATE_LIMIT", 0])
        self.refused("action", action=["RATE_LIMIT", "3"])
        self.refused("action", action=["RATE", 3])
        self.assertEqual(jobfilter.check_action(("RATE_LIMIT", 3)),
                         ["RATE_LIMIT", 3])

    def test_bad_predicates(self):
        self.refused("predicates: expected a list", predicates="jobid")
        message = self.refused("predicates[0]", predicates=[["name", []]])
        self.assertIn("unknown predicate 'name'", message)
        self.refused("predicates[1] (jobid)",
                     predicates=[["jobid", ["=", "id", 1]],
                                 ["jobid", ["=", "name", 1]]])
        self.refused("predicates[0] (reason)",
                     predicates=[["reason", ["~", "reason", "x"]]])
        self.refused("predicates[0] (opcode)", predicates=[["opcode", None]])
        self.refused("predicates[0]", predicates=[["opcode"]])

    def test_bad_reason(self):
        self.refused("reason[0]", reason=[["user", "x"]])
        self.refused("reason: expected a list", reason="x")


class MatchTests(unittest.TestCase):

    def rule(self, predicates, watermark=0, action="PAUSE"):
        return jobfilter.Rule(jobfilter.make_rule(
            "u", watermark, 0, predicates, action, []))

    def test_watermark(self):
        rule = self.rule([], watermark=4)
        self.assertFalse(rule.matches(4, [delay()]))
        self.assertTrue(rule.matches(5, [delay()]))

    def test_opcode_fields(self):
        rule = self.rule([["opcode", ["&", ["=", "OP_ID", "OP_TEST_DELAY"],
                                      [">", "duration", 5]]]])
        self.assertTrue(rule.matches(1, [delay(), delay(duration=10)]))
        self.assertFalse(rule.matches(1, [delay(duration=1)]))
        # a parameter the opcode does not have does not match
        absent = self.rule([["opcode", ["=", "instance_name", "x"]]])
        self.assertFalse(absent.matches(1, [delay()]))

    def test_reason_fields(self):
        rule = self.rule([["reason", ["&", ["=", "source", "user"],
                                      [">", "timestamp", 100]]]])
        self.assertTrue(rule.matches(1, [delay(reason=[["user", "", 200]])]))
        self.assertFalse(rule.matches(1, [delay(reason=[["user", "", 50]])]))
        self.assertFalse(rule.matches(1, [delay()]))

    def test_all_predicates_must_match(self):
        rule = self.rule([["jobid", ["=", "id", 7]],
                          ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]])
        self.assertTrue(rule.matches(7, [delay()]))
        self.assertFalse(rule.matches(8, [delay()]))

    def test_decide_first_non_continue_rule(self):
        rules, problems = jobfilter.compile_rules({
            "b": jobfilter.make_rule("b", 0, 1, [], "REJECT", []),
            "a": jobfilter.make_rule("a", 0, 0, [], "CONTINUE", []),
            "c": jobfilter.make_rule("c", 0, 1, [], ["RATE_LIMIT", 1], []),
        })
        self.assertEqual(problems, [])
        self.assertEqual([r.uuid for r in rules], ["a", "b", "c"])
        verdict = jobfilter.decide(rules, 1, [delay()], lambda rule: 0)
        self.assertEqual((verdict.action, verdict.rule.uuid), ("REJECT", "b"))
        verdict = jobfilter.decide(rules[2:], 1, [delay()], lambda rule: 0)
        self.assertEqual(verdict.action, "ACCEPT")
        verdict = jobfilter.decide(rules[2:], 1, [delay()], lambda rule: 1)
        self.assertEqual(verdict.action, "RATE_LIMIT")
        self.assertEqual(jobfilter.decide([], 1, [delay()], None),
                         jobfilter.RUN)


class ConfigFilterTests(unittest.TestCase):

    def setUp(self):
        self.store = make_store(self)

    def on_disk(self):
        with open(self.store.path) as f:
            return json.load(f)["filters"]

    def test_added_replaced_deleted_on_disk(self):
        uuid = self.store.replace_filter(None, 3, [["jobid", ["=", "id", 9]]],
                                         "PAUSE", [["user", "why", 1]], 8)
        self.assertEqual(self.on_disk()[uuid], {
            "uuid": uuid, "watermark": 8, "priority": 3,
            "predicates": [["jobid", ["=", "id", 9]]], "action": "PAUSE",
            "reason_trail": [["user", "why", 1]]})
        self.assertEqual(ConfigStore.load(self.store.path).filters,
                         self.store.filters)
        self.store.replace_filter(uuid, 0, [], ["RATE_LIMIT", 2], [], 12)
        self.assertEqual(self.on_disk()[uuid]["watermark"], 12)
        self.assertEqual(self.on_disk()[uuid]["action"], ["RATE_LIMIT", 2])
        self.store.replace_filter("given-uuid", 0, [], "ACCEPT", [], 12)
        self.store.delete_filter(uuid)
        self.assertEqual(list(self.on_disk()), ["given-uuid"])

    def test_bad_input_changes_nothing(self):
        self.store.replace_filter("f", 0, [], "ACCEPT", [], 1)
        before = self.on_disk()
        serial = self.store.serial_no
        for args in ((-1, [], "ACCEPT", []), (0, [["x", 1]], "ACCEPT", []),
                     (0, [], "STOP", []), (0, [], "ACCEPT", ["x"])):
            self.assertRaises(errors.OpPrereqError, self.store.replace_filter,
                              "f", *(args + (5,)))
        with self.assertRaises(errors.OpPrereqError) as ctx:
            self.store.delete_filter("nope")
        self.assertEqual(ctx.exception.args[1], errors.ECODE_NOENT)
        self.assertEqual(self.on_disk(), before)
        self.assertEqual(self.store.serial_no, serial)

    def test_refused_change_puts_filters_back(self):
        self.store.replace_filter("f", 0, [], "ACCEPT", [], 1)

        def broken_write():
            raise errors.ConfigurationError("disk full")
        self.patch(self.store, "_write", broken_write)
        self.assertRaises(errors.ConfigurationError,
                          self.store.replace_filter, "g", 0, [], "ACCEPT",
                          [], 1)
        self.assertEqual(list(self.store.filters), ["f"])


class MasterLuxiTests(unittest.TestCase):
    """A real master daemon in this process."""

    @defer.inlineCallbacks
    def test_filters_over_luxi(self):
        from tests.inprocess import start_master
        master, client = yield start_master(self, "/tmp/gnt-flt-")
        path = master.config.paths.config_file
        fields = list(jobfilter.FIELDS)
        self.assertEqual((yield client.call("QueryFilters", None, fields)),
                         [])
        job = yield client.call("SubmitJob", [{"OP_ID": "OP_TEST_DELAY",
                                               "duration": 0}])
        uuid = yield client.call("ReplaceFilter", None, 2,
                                 [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]],
                                 "PAUSE", [["user", "maintenance", 1]])
        rows = yield client.call("QueryFilters", [uuid], fields)
        self.assertEqual(rows, [[uuid, job, 2, [["opcode", ["=", "OP_ID",
                                                            "OP_TEST_DELAY"]]],
                                 "PAUSE", [["user", "maintenance", 1]]]])
        # written before the answer
        self.assertIn(uuid, ConfigStore.load(path).filters)
        # the generic query knows the resource
        answer = yield client.call("Query", "filter", ["uuid", "action"],
                                   ["=", "action", "PAUSE"])
        self.assertEqual(answer["data"], [[[0, uuid], [0, "PAUSE"]]])
        fields_answer = yield client.call("QueryFields", "filter", None)
        self.assertEqual(sorted(f["name"] for f in fields_answer["fields"]),
                         sorted(fields))
        # the queue applies it: a new job waits
        paused = yield client.call("SubmitJob", [{"OP_ID": "OP_TEST_DELAY",
                                                  "duration": 0}])
        yield _wait(lambda: master.queue._held.get(paused) == "PAUSE")
        status = yield client.call("QueryJobs", [paused], ["status"])
        self.assertEqual(status, [["queued"]])
        # bad input: named, nothing changed
        for args, field in (((uuid, -1, [], "ACCEPT", []), "priority"),
                            ((uuid, 0, [["bad", []]], "ACCEPT", []),
                             "predicates[0]"),
                            ((uuid, 0, [], "NOPE", []), "action")):
            with self.assertRaises(errors.OpPrereqError) as ctx:
                yield client.call("ReplaceFilter", *args)
            self.assertIn(field, str(ctx.exception))
        self.assertEqual((yield client.call("QueryFilters", [uuid],
                                            ["action"])), [["PAUSE"]])
        with self.assertRaises(errors.OpPrereqError):
            yield client.call("QueryFilters", ["nope"], ["uuid"])
        # deleted: the paused job runs
        self.assertIsNone((yield client.call("DeleteFilter", uuid)))
        self.assertEqual(ConfigStore.load(path).filters, {})
        yield _wait(lambda: master.queue.query_jobs(
            [paused], ["status"])[0][0] == "success")
        with self.assertRaises(errors.OpPrereqError):
            yield client.call("DeleteFilter", uuid)


@defer.inlineCallbacks
def _wait(predicate, timeout=10.0):
    """Until ``predicate()`` (real daemons, real reactor)."""
    from twisted.internet import reactor, task
    waited = 0.0
    while not predicate():
        if waited > timeout:
            raise AssertionError("condition not reached in %ss" % timeout)
        yield task.deferLater(reactor, 0.05, lambda: None)
        waited += 0.05
