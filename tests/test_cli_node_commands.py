"""gnt-node restricted-command and repair-command: arguments -> opcodes,
node selection, and the output per node."""

import io
import os

from twisted.trial import unittest

from ganeti import errors
from ganeti import qlang
from ganeti.cli import gnt_node

from tests.test_cli_fakes import FakeClient, encoded, field, run

N1, N2, N3 = ("node1.example.com", "node2.example.com", "node3.example.com")
FIELDS = [field("name", "Node"), field("offline", "Offline", "bool")]


def node(client, *argv, **kw):
    return run(gnt_node.commands, argv, client, **kw)


class RestrictedCommandTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()
        self.client.tables["node"] = (FIELDS, [[N1, False], [N2, False]])

    def test_output_per_node(self):
        self.client.results["OP_RESTRICTED_COMMAND"] = [
            [True, "up 3 days\nload 0.1\n"], [True, "up 1 day\n"]]
        code, out, err = node(self.client, "restricted-command", "uptime",
                              "node1", "node2")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["command"], op["nodes"],
                          op["use_locking"]),
                         ("OP_RESTRICTED_COMMAND", "uptime", [N1, N2],
                          False))
        self.assertEqual(op["reason"][0][:2], ["gnt:client:gnt-node",
                                               "restricted-command"])
        sep = "-" * 48
        self.assertEqual(out, "\n".join([
            sep, "Node: " + N1, "up 3 days\nload 0.1\n",
            sep, "Node: " + N2, "up 1 day\n", ""]))
        # the nodes were looked up by name first
        query = [c for c in self.client.calls if c[0] == "Query"][0][1]
        self.assertEqual(query[:2], ["node", ["name", "offline"]])
        self.assertEqual(query[2], [qlang.OP_OR,
                                    [qlang.OP_EQUAL, "name", "node1"],
                                    [qlang.OP_EQUAL, "name", "node2"]])

    def test_machine_names_and_sync(self):
        self.client.results["OP_RESTRICTED_COMMAND"] = [
            [True, "a\nb\n"],
            [False, "Command 'uptime' on node '%s' failed: Executing"
             " command 'uptime' failed" % N2]]
        code, out, err = node(self.client, "restricted-command", "-M",
                              "--sync", "uptime", "node1", "node2")
        self.assertEqual(code, 1)
        self.assertTrue(self.client.op()["use_locking"])
        self.assertEqual(out.splitlines(), [
            "-" * 48, N1 + ": a", N1 + ": b", "-" * 48,
            "Command 'uptime' on node '%s' failed: Executing command"
            " 'uptime' failed" % N2])

    def test_node_group(self):
        self.client.results["OP_RESTRICTED_COMMAND"] = [[True, ""],
                                                        [True, ""]]
        code, out, err = node(self.client, "restricted-command", "-g",
                              "rack1", "uptime")
        self.assertEqual(code, 0, err)
        query = [c for c in self.client.calls if c[0] == "Query"][0][1]
        self.assertEqual(query[2], [qlang.OP_OR,
                                    [qlang.OP_EQUAL, "group", "rack1"],
                                    [qlang.OP_EQUAL, "group.uuid", "rack1"]])
        self.assertEqual(self.client.op()["nodes"], [N1, N2])

    def test_offline_nodes_are_skipped_with_a_note(self):
        self.client.tables["node"] = (FIELDS, [[N1, False], [N3, True]])
        self.client.results["OP_RESTRICTED_COMMAND"] = [[True, "x\n"]]
        code, out, err = node(self.client, "restricted-command", "uptime",
                              "node1", "node3")
        self.assertEqual(code, 0, err)
        self.assertIn("Note: skipping offline node(s): %s" % N3, err)
        self.assertEqual(self.client.op()["nodes"], [N1])

    def test_nodes_or_group_required(self):
        code, out, err = node(self.client, "restricted-command", "uptime")
        self.assertEqual(code, 2)
        self.assertIn("node group (-g GROUP)", err)
        self.assertFalse(any(c[0] == "SubmitJob" for c in self.client.calls))

    def test_unknown_node_is_named(self):
        code, out, err = node(self.client, "restricted-command", "uptime",
                              "node1", "node7")
        self.assertNotEqual(code, 0)
        self.assertIn("Node node7 not known", err)
        self.assertFalse(any(c[0] == "SubmitJob" for c in self.client.calls))

    def test_submit_prints_the_job(self):
        code, out, err = node(self.client, "restricted-command", "--submit",
                              "uptime", "node1")
        self.assertEqual((code, out), (0, "JobID: 1\n"))


class RepairCommandTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()

    def test_input_option(self):
        self.client.results["OP_REPAIR_COMMAND"] = "replaced sdb\n"
        code, out, err = node(self.client, "repair-command", "--input",
                              '{"disk": "sdb"}', "node1", "fix-disk")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["node_name"], op["command"],
                          op["input"]),
                         ("OP_REPAIR_COMMAND", "node1", "fix-disk",
                          '{"disk": "sdb"}'))
        self.assertEqual(out, "replaced sdb\n")

    def test_input_file_and_stdin(self):
        path = self.mktemp()
        with open(path, "w") as f:
            f.write("line1\nline2\n")
        self.client.results["OP_REPAIR_COMMAND"] = "ok"
        code, out, err = node(self.client, "repair-command", "--input-file",
                              path, "node1", "fix")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.client.op()["input"], "line1\nline2\n")
        self.assertEqual(out, "ok\n")
        code, out, err = node(self.client, "repair-command", "--input-file",
                              "-", "node1", "fix",
                              stdin=io.StringIO("from stdin"))
        self.assertEqual(self.client.op()["input"], "from stdin")

    def test_no_input(self):
        code, out, err = node(self.client, "repair-command", "node1", "fix")
        self.assertEqual(code, 0, err)
        self.assertIsNone(self.client.op()["input"])

    def test_unreadable_input_file_is_named(self):
        missing = os.path.join(self.mktemp(), "nope")
        code, out, err = node(self.client, "repair-command", "--input-file",
                              missing, "node1", "fix")
        self.assertEqual(code, 2)
        self.assertIn("--input-file: cannot read %s" % missing, err)
        self.assertFalse(any(c[0] == "SubmitJob" for c in self.client.calls))

    def test_input_and_input_file_exclude_each_other(self):
        code, out, err = node(self.client, "repair-command", "--input", "a",
                              "--input-file", "b", "node1", "fix")
        self.assertEqual(code, 2)
        self.assertIn("not allowed with argument", err)

    def test_failed_command_fails_with_its_output(self):
        self.client.errors["OP_REPAIR_COMMAND"] = encoded(errors.OpExecError(
            "Repair command 'fix' failed on node %s: Repair command 'fix'"
            " exited with status 4; output: controller missing" % N1))
        code, out, err = node(self.client, "repair-command", "node1", "fix")
        self.assertEqual(code, 1)
        self.assertIn("exited with status 4; output: controller missing",
                      err)
