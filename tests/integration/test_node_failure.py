"""A node that stops answering, on a 3-node virtual cluster (fake
hypervisor): the master notices within seconds, marks it offline and
fences it with the virtual cluster's out-of-band program (which kills
every process of the node), and auto-repair then fails its instance over
to another node; the instance never runs twice.  A node that cannot be
fenced is marked offline but nothing of it is started elsewhere.

The node is frozen, not killed (SIGSTOP on all its processes): a frozen
node could come back, which is what fencing is for.
"""

import os
import signal
import subprocess
import sys
import time

from ganeti.dev import oob

from tests.integration.daemons import command_env, wait_for
from tests.integration.test_migration import ClusterTestCase

P = "ganeti:watcher:autorepair:"
INSTANCE = "web1.example.com"


class NodeFailureTests(ClusterTestCase):

    BASE_PREFIX = "gnt-nf-"

    def start_master(self):
        self.masterd = self.start_masterd(
            "--node-check-interval", "1", "--node-check-misses", "2")
        from ganeti import luxi
        self.socket = self.vc.master.paths.master_socket
        self.client = luxi.BlockingClient(self.socket, 60)
        self.addCleanup(self.client.close)

    def harep(self):
        proc = subprocess.run(
            [sys.executable, "-m", "ganeti.watcher.autorepair.harep"],
            env=command_env(self.gnt_root), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=120)
        out = proc.stdout.decode("utf-8", "replace")
        self.assertEqual(proc.returncode, 0, out)
        return out

    def freeze(self, node):
        pids = oob.node_processes(node.root)
        self.assertTrue(pids)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        # whatever happens, nothing stays frozen after the test
        self.addCleanup(self.thaw, pids)
        return pids

    @staticmethod
    def thaw(pids):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def node_info(self, name):
        out = self.ok("gnt-node", "list", "--no-headers", "--separator", "|",
                      "-o", "offline,powered", name)
        return out.strip().split("|")

    def running_copies(self):
        """Nodes whose fake hypervisor has a live process of INSTANCE."""
        return [n.name for n in self.vc.nodes
                if self.fake_pid(n, INSTANCE) is not None]

    def setup_cluster(self):
        program = self.vc.install_oob()
        self.ok("gnt-cluster", "modify", "--node-parameters",
                "oob_program=%s" % program)
        self.ok("gnt-cluster", "add-tags", P + "failover")
        self.create(INSTANCE, template="sharedfile", node=1)
        self.assertEqual(self.running_copies(), [self.node(1).name])

    def test_frozen_node_fenced_then_its_instance_fails_over(self):
        self.setup_cluster()
        lost = self.node(1)
        start = time.monotonic()
        self.freeze(lost)

        def failed_over():
            self.harep()
            copies = self.running_copies()
            # never two copies at any moment
            self.assertLessEqual(len(copies), 1, copies)
            return copies and copies != [lost.name]
        wait_for("the instance to run elsewhere", failed_over, 60, 0.5)
        took = time.monotonic() - start
        self.assertEqual(self.node_info(lost.name), ["Y", "N"])
        # the frozen node's processes were killed, not left to wake up
        self.assertEqual(oob.node_processes(lost.root), [])
        status = self.ok("gnt-instance", "list", "--no-headers", "-o",
                         "pnode,status", INSTANCE).split()
        self.assertNotEqual(status[0], lost.name)
        self.assertEqual(status[1], "running")
        self.assertLess(took, 30, "the failover took %.1f s" % took)

    def test_a_node_that_cannot_be_fenced_fails_nothing_over(self):
        self.setup_cluster()
        lost = self.node(1)
        broken = os.path.join(self.vc.master.paths.oob_dir, "broken")
        with open(broken, "w") as f:
            f.write("#!/bin/sh\necho 'BMC not answering' >&2\nexit 1\n")
        os.chmod(broken, 0o755)
        self.ok("gnt-node", "modify", "--node-parameters",
                "oob_program=%s" % broken, lost.name)
        self.freeze(lost)
        wait_for("the node to be marked offline",
                 lambda: self.node_info(lost.name)[0] == "Y", 30, 0.5)
        for _ in range(3):
            out = self.harep()
            self.assertIn("not known to be powered off", out)
            time.sleep(1)
        self.assertEqual(self.node_info(lost.name), ["Y", "Y"])
        self.assertEqual(self.running_copies(), [lost.name])
