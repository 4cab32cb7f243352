"""OP_RESTRICTED_COMMAND and OP_REPAIR_COMMAND with fake node daemons:
results per node, node locks, refusals, the reason trail."""

from ganeti import errors
from ganeti import locking
from ganeti import opcodes

from tests.fakes import NodeFailure
from tests.test_cmdlib_instance import InstanceTestCase, NODE1, NODE2


def restricted(command, *nodes, **kw):
    op = {"OP_ID": "OP_RESTRICTED_COMMAND", "command": command,
          "nodes": list(nodes)}
    op.update(kw)
    return op


def repair(node, command, inp=None):
    return {"OP_ID": "OP_REPAIR_COMMAND", "node_name": node,
            "command": command, "input": inp}


class RestrictedCommandTests(InstanceTestCase):

    def test_result_per_node_in_the_order_given(self):
        self.rpc.answers["restricted_command"] = \
            lambda node, cmd: "%s ran %s\n" % (node, cmd)
        result = self.ok(restricted("uptime", NODE2, NODE1))
        self.assertEqual(result, [[True, "%s ran uptime\n" % NODE2],
                                  [True, "%s ran uptime\n" % NODE1]])
        self.assertEqual(sorted(c.node for c in self.rpc.calls),
                         [NODE1, NODE2])
        self.assertEqual({tuple(c.args) for c in self.rpc.calls},
                         {("uptime",)})

    def test_a_node_failing_does_not_hide_the_others(self):
        self.rpc.answers["restricted_command"] = lambda node, cmd: "ok\n"
        # as a node daemon answers: the procedure, then its message
        self.rpc.fail[(NODE2, "restricted_command")] = \
            "restricted_command: Executing command 'uptime' failed"
        result = self.ok(restricted("uptime", NODE1, NODE2))
        self.assertEqual(result, [
            [True, "ok\n"],
            [False, "Command 'uptime' on node '%s' failed: Executing command"
             " 'uptime' failed" % NODE2]])
        self.assertEqual(self.log, [])

    def test_a_node_named_twice_runs_the_command_once(self):
        self.rpc.answers["restricted_command"] = lambda node, cmd: "x"
        result = self.ok(restricted("uptime", NODE1, NODE1))
        self.assertEqual(result, [[True, "x"], [True, "x"]])
        self.assertEqual(len(self.rpc.calls), 1)

    def test_unknown_node_is_refused_before_any_call(self):
        err = self.fails(restricted("uptime", NODE1, "nosuch.example.com"))
        self.assertIn("nosuch.example.com", str(err))
        self.assertEqual(self.rpc.calls, [])

    def test_nodes_and_command_are_required(self):
        for op, field in ((restricted("", NODE1), "command"),
                          (restricted("uptime", NODE1, nodes=None), "nodes"),
                          ({"OP_ID": "OP_RESTRICTED_COMMAND",
                            "nodes": [NODE1]}, "command")):
            err = self.assertRaises(errors.OpPrereqError,
                                    opcodes.from_dict, op)
            self.assertIn(field, str(err))

    def node_lock_modes(self):
        return {lock["name"]: lock["mode"]
                for lock in self.glm.lockset(locking.LEVEL_NODE).get_info()
                if lock["owners"]}

    def test_node_locks_shared_unless_use_locking(self):
        n1 = self.cfg.get_node(NODE1).uuid
        self.rpc.answers["restricted_command"] = lambda node, cmd: ""
        for use_locking, mode in ((False, locking.MODE_SHARED),
                                  (True, locking.MODE_EXCLUSIVE)):
            self.rpc.hold("restricted_command")
            d = self.run_op(restricted("uptime", NODE1,
                                       use_locking=use_locking))
            self.assertEqual(self.node_lock_modes(), {"node/" + n1: mode})
            self.rpc.release("restricted_command", keep=False)
            self.assertEqual(self.successResultOf(d), [[True, ""]])

    def test_reason_trail_reaches_the_opcode(self):
        op = opcodes.from_dict(restricted(
            "uptime", NODE1,
            reason=[["gnt:client:gnt-node", "restricted-command", 1]]))
        self.assertEqual(op.reason[0][1], "restricted-command")
        self.assertEqual(op.summary(), "RESTRICTED_COMMAND")


class RepairCommandTests(InstanceTestCase):

    def test_output_and_input(self):
        self.rpc.answers["repair_command"] = \
            lambda node, cmd, inp: "%s got %r" % (cmd, inp)
        result = self.ok(repair(NODE2, "fix-disk", '{"disk": "sdb"}'))
        self.assertEqual(result, "fix-disk got '{\"disk\": \"sdb\"}'")
        self.assertEqual([tuple(c) for c in self.rpc.calls],
                         [(NODE2, "repair_command",
                           ["fix-disk", '{"disk": "sdb"}'])])

    def test_no_input(self):
        self.rpc.answers["repair_command"] = lambda node, cmd, inp: repr(inp)
        self.assertEqual(self.ok(repair(NODE1, "fix")), "None")

    def test_failed_command_fails_the_opcode_with_status_and_output(self):
        def fail(node, cmd, inp):
            raise NodeFailure("repair_command: Repair command 'fix' exited"
                              " with status 4;"
                              " output: controller missing\n")
        self.rpc.answers["repair_command"] = fail
        err = self.fails(repair(NODE1, "fix", "x"), errors.OpExecError)
        self.assertEqual(str(err), "Repair command 'fix' on node '%s' failed:"
                         " Repair command 'fix' exited with status 4;"
                         " output: controller missing\n" % NODE1)

    def test_node_locked_exclusively(self):
        n2 = self.cfg.get_node(NODE2).uuid
        self.rpc.answers["repair_command"] = lambda node, cmd, inp: "done"
        self.rpc.hold("repair_command")
        d = self.run_op(repair(NODE2, "fix"))
        modes = {lock["name"]: lock["mode"]
                 for lock in self.glm.lockset(locking.LEVEL_NODE).get_info()
                 if lock["owners"]}
        self.assertEqual(modes, {"node/" + n2: locking.MODE_EXCLUSIVE})
        self.rpc.release("repair_command", keep=False)
        self.assertEqual(self.successResultOf(d), "done")

    def test_bad_fields_are_named(self):
        for op, field in ((repair("", "fix"), "node_name"),
                          (repair(NODE1, ""), "command"),
                          (repair(NODE1, "fix", 7), "input")):
            err = self.assertRaises(errors.OpPrereqError,
                                    opcodes.from_dict, op)
            self.assertIn(field, str(err))

    def test_unknown_node(self):
        err = self.fails(repair("nosuch.example.com", "fix"))
        self.assertIn("nosuch.example.com", str(err))
        self.assertEqual(self.rpc.calls, [])
