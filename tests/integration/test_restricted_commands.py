"""Restricted and repair commands on a 2-node virtual cluster (real node
daemons and master): ``gnt-node restricted-command`` runs a program each
node whitelists, ``gnt-node repair-command`` gives a repair program its
input on stdin, a name no node whitelists is refused (after the node's
delay, naming nothing), and Ganeti 3.0's own ``gnt-node
restricted-command`` works against our master."""

import os
import time

from ganeti.backend import restricted

from tests import ganeti_peer
from tests.integration.daemons import GntCommandsMixin, RunningClusterTestCase

SEP = "-" * 48


def write_program(directory, name, body):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755)
    return path


class RestrictedCommandTests(GntCommandsMixin, RunningClusterTestCase):

    NODES = 2
    BASE_PREFIX = "gnt-rc-"
    timeout = 240

    def setUp(self):
        RunningClusterTestCase.setUp(self)
        self.gnt_root = self.vc.master.root
        # each node's administrator whitelists its own programs
        for node in self.vc.nodes:
            for d in (node.paths.restricted_commands_dir,
                      node.paths.repair_commands_dir):
                os.makedirs(d, exist_ok=True)
                os.chmod(d, 0o755)
            write_program(node.paths.restricted_commands_dir, "whoami-node",
                          "echo node %s; echo args $#" % node.name)
            write_program(node.paths.repair_commands_dir, "echo-input",
                          "echo got:; cat")
            write_program(node.paths.repair_commands_dir, "broken",
                          "echo controller missing; exit 3")
        self.n1, self.n2 = [n.name for n in self.vc.nodes]

    def test_restricted_and_repair_commands(self):
        out = self.ok("gnt-node", "restricted-command", "whoami-node",
                      self.n1, self.n2)
        self.assertEqual(out, "\n".join([
            SEP, "Node: %s" % self.n1, "node %s\nargs 0\n" % self.n1,
            SEP, "Node: %s" % self.n2, "node %s\nargs 0\n" % self.n2, ""]))
        out = self.ok("gnt-node", "restricted-command", "-M", "-g",
                      "default", "whoami-node")
        self.assertIn("%s: node %s" % (self.n2, self.n2), out.splitlines())

        text = '{"status": "live-repair", "details": {"disk": "sdb"}}'
        out = self.ok("gnt-node", "repair-command", "--input", text,
                      self.n2, "echo-input")
        self.assertEqual(out, "got:\n%s\n" % text)
        code, out = self.gnt("gnt-node", "repair-command", self.n1, "broken")
        self.assertNotEqual(code, 0, out)
        self.assertIn("Repair command 'broken' exited with status 3;"
                      " output: controller missing", out)

        # only what a node whitelists: another list's program, a path
        started = time.monotonic()
        code, out = self.gnt("gnt-node", "restricted-command", "echo-input",
                             self.n1)
        self.assertEqual(code, 1, out)
        self.assertIn("Command 'echo-input' on node '%s' failed: Executing"
                      " command 'echo-input' failed" % self.n1, out)
        self.assertGreaterEqual(time.monotonic() - started,
                                restricted.FAILURE_DELAY - 1)
        # the reason is in the node's log only
        self.assertNotIn("stat", out)
        log = os.path.join(self.vc.nodes[0].paths.log_dir,
                           "ganeti-noded.log")
        with open(log, errors="replace") as f:
            self.assertIn("Restricted command 'echo-input' not run: cannot"
                          " stat", f.read())

    def test_ganeti_gnt_node_restricted_command(self):
        ganeti_peer.skip_unless_available()
        master = self.vc.master
        code, out = ganeti_peer.run_tool(
            "gnt-node", ["restricted-command", "whoami-node", self.n1,
                         self.n2], master.root, master.name)
        self.assertEqual(code, 0, out)
        self.assertIn("Node: %s\nnode %s\nargs 0\n" % (self.n1, self.n1),
                      out)
        self.assertIn("Node: %s\nnode %s\nargs 0\n" % (self.n2, self.n2),
                      out)
        code, out = ganeti_peer.run_tool(
            "gnt-node", ["restricted-command", "-M", "--sync", "-g",
                         "default", "whoami-node"], master.root, master.name)
        self.assertEqual(code, 0, out)
        self.assertIn("%s: node %s" % (self.n1, self.n1), out.splitlines())
