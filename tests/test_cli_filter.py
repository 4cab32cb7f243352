"""gnt-filter against a client answering from a real configuration (its
filter mutators and the query layer), as the master does."""

import json

from twisted.trial import unittest

from ganeti import errors
from ganeti import query
from ganeti.cli import gnt_filter

from tests.test_cli_fakes import run
from tests.test_config import make_store


def _sync(d):
    results = []
    d.addBoth(results.append)
    result = results[0]
    if hasattr(result, "raiseException"):
        result.raiseException()
    return result


class ConfigClient(object):
    """The filter luxi methods, over a ConfigStore."""

    def __init__(self, store):
        self.store = store
        self.highest_job_id = 0
        self.calls = []

    def close(self):
        pass

    def _ctx(self):
        return query.QueryContext(self.store, live=None)

    def query(self, what, fields, qfilter=None):
        return _sync(self._ctx().query(what, fields, qfilter))

    def query_fields(self, what, fields=None):
        return self._ctx().query_fields(what, fields)

    def query_filters(self, uuids, fields):
        return _sync(self._ctx().old_style("filter", uuids, fields))

    def replace_filter(self, uuid, priority, predicates, action, reason):
        self.calls.append(("ReplaceFilter", uuid, priority, predicates,
                           action, reason))
        return self.store.replace_filter(uuid, priority, predicates, action,
                                         reason, self.highest_job_id)

    def delete_filter(self, uuid):
        self.store.delete_filter(uuid)


class GntFilterTests(unittest.TestCase):

    def setUp(self):
        self.store = make_store(self)
        self.client = ConfigClient(self.store)

    def run_cmd(self, *argv):
        return run(gnt_filter.commands, argv, self.client)

    def test_add_info_list_replace_delete(self):
        self.client.highest_job_id = 41
        code, out, err = self.run_cmd(
            "add", "--priority", "3", "--action", "RATE_LIMIT 2",
            "--predicates", '[["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]',
            "--reason", "night batch")
        self.assertEqual((code, err), (0, ""))
        uuid = out.strip()
        self.assertEqual(list(self.store.filters), [uuid])
        rule = self.store.filters[uuid]
        self.assertEqual((rule["priority"], rule["action"], rule["watermark"]),
                         (3, ["RATE_LIMIT", 2], 41))
        self.assertEqual([r[:2] for r in rule["reason_trail"]],
                         [["gnt:client:gnt-filter", "add"],
                          ["gnt:user", "night batch"]])
        code, out, err = self.run_cmd("info", uuid)
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[:5], [
            "UUID: %s" % uuid, "  Watermark: 41", "  Priority: 3",
            '  Predicates: [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]',
            '  Action: ["RATE_LIMIT", 2]'])
        code, out, err = self.run_cmd("list", "--no-headers", "--separator",
                                      "|", "-o", "uuid,priority,action")
        self.assertEqual(out, '%s|3|["RATE_LIMIT", 2]\n' % uuid)
        code, out, err = self.run_cmd("replace", uuid, "--action", "PAUSE")
        self.assertEqual((code, out.strip()), (0, uuid))
        self.assertEqual((self.store.filters[uuid]["action"],
                          self.store.filters[uuid]["priority"],
                          self.store.filters[uuid]["predicates"]),
                         ("PAUSE", 0, []))
        code, out, err = self.run_cmd("delete", uuid)
        self.assertEqual((code, out, err), (0, "", ""))
        self.assertEqual(self.store.filters, {})

    def test_list_fields(self):
        code, out, err = self.run_cmd("list-fields", "--no-headers")
        self.assertEqual(code, 0, err)
        self.assertEqual(sorted(line.split()[0] for line in out.splitlines()),
                         sorted(gnt_filter.LIST_FIELDS))

    def test_bad_input_is_named_and_changes_nothing(self):
        for argv, field in (
                (["--priority", "-2"], "priority"),
                (["--action", "DROP"], "action"),
                (["--action", "RATE_LIMIT x"], "--action"),
                (["--predicates", "[[\"job\", 1]]"], "predicates[0]"),
                (["--predicates", "{"], "--predicates")):
            code, out, err = self.run_cmd("add", *argv)
            self.assertNotEqual(code, 0)
            self.assertIn(field, err)
        self.assertEqual(self.store.filters, {})
        code, out, err = self.run_cmd("delete", "nope")
        self.assertNotEqual(code, 0)
        self.assertIn("nope", err)

    def test_parse_action(self):
        self.assertEqual(gnt_filter.parse_action("RATE_LIMIT 5"),
                         ["RATE_LIMIT", 5])
        self.assertEqual(gnt_filter.parse_action('["RATE_LIMIT", 5]'),
                         ["RATE_LIMIT", 5])
        self.assertEqual(gnt_filter.parse_action("ACCEPT"), "ACCEPT")
        self.assertRaises(errors.ParameterError, gnt_filter.parse_action,
                          "[1")
        self.assertEqual(json.loads(gnt_filter._json([1])), [1])
