"""A node that stops answering, on a 3-node virtual cluster (fake
hypervisor): the master notices within seconds, marks it offline and
fences it with the virtual cluster's out-of-band program (which kills
every process of the node), and auto-repair then fails its instance over
to another node; the instance never runs twice.  A node that cannot be
fenced is marked offline but nothing of it is started elsewhere.  The
repair budget (node parameters repair_max_parallel, repair_min_healthy)
runs a mass failover one repair at a time, or stops it.

The node is frozen, not killed (SIGSTOP on all its processes): a frozen
node could come back, which is what fencing is for.
"""

import os
import signal
import subprocess
import sys
import threading
import time

from ganeti.dev import oob

from tests.integration.daemons import FINAL, command_env, wait_for
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

    def harep(self, *args):
        proc = subprocess.run(
            [sys.executable, "-m", "ganeti.watcher.autorepair.harep"] +
            list(args),
            env=command_env(self.gnt_root), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=120)
        out = proc.stdout.decode("utf-8", "replace")
        self.assertEqual(proc.returncode, 0, out)
        return out

    def masterd_log(self):
        path = os.path.join(self.vc.master.paths.log_dir,
                            "ganeti-masterd.log")
        with open(path, errors="replace") as f:
            return f.read()

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

    def running_copies(self, name=INSTANCE):
        """Nodes whose fake hypervisor has a live process of ``name``."""
        return [n.name for n in self.vc.nodes
                if self.fake_pid(n, name) is not None]

    def setup_cluster(self, instances=(INSTANCE,)):
        program = self.vc.install_oob()
        self.ok("gnt-cluster", "modify", "--node-parameters",
                "oob_program=%s" % program)
        self.ok("gnt-cluster", "add-tags", P + "failover")
        for name in instances:
            self.create(name, template="sharedfile", node=1)
            self.assertEqual(self.running_copies(name), [self.node(1).name])

    def failover_jobs(self, client=None):
        """The status of every failover job so far."""
        rows = (client or self.client).call("QueryJobs", None,
                                            ["summary", "status"])
        # (a job archived while being read is None)
        return [row[1] for row in rows if row is not None and
                any(s.startswith("INSTANCE_FAILOVER") for s in row[0])]

    def watch_failovers(self):
        """Sample, every 50 ms until the test ends, how many failover
        jobs are unfinished at once; the list of samples."""
        from ganeti import luxi
        samples = []
        stop = threading.Event()
        client = luxi.BlockingClient(self.socket, 60)

        def sample():
            while not stop.wait(0.05):
                samples.append(sum(st not in FINAL
                                   for st in self.failover_jobs(client)))
        thread = threading.Thread(target=sample, daemon=True)
        thread.start()

        def done():
            stop.set()
            thread.join(10)
            client.close()
        self.addCleanup(done)
        return samples

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

    def test_the_budget_runs_a_mass_failover_one_repair_at_a_time(self):
        names = ["web%d.example.com" % i for i in range(1, 4)]
        self.setup_cluster(names)
        self.ok("gnt-cluster", "modify", "--node-parameters",
                "repair_max_parallel=1")
        lost = self.node(1)
        self.freeze(lost)
        waited = []
        unfinished = self.watch_failovers()

        def all_moved():
            out = self.harep("-v")
            if "waits, 1 repairs already run" in out:
                waited.append(out)
            for name in names:
                self.assertLessEqual(len(self.running_copies(name)), 1)
            return all(self.running_copies(name) not in ([], [lost.name])
                       for name in names)
        wait_for("every instance to run elsewhere", all_moved, 120, 0.3)
        self.assertTrue(waited, "no repair waited for the budget")
        # one at a time: never more than one failover queued or running
        # (without the budget the first pass submits three at once)
        self.assertTrue(unfinished)
        self.assertLessEqual(max(unfinished), 1)
        self.assertEqual(self.failover_jobs(), ["success"] * 3)

    def test_a_group_below_its_healthy_share_repairs_nothing(self):
        self.setup_cluster()
        group = "default"
        self.ok("gnt-group", "modify", "--node-parameters",
                "repair_min_healthy=0.9", group)
        lost = self.node(1)
        self.freeze(lost)
        # 2 of 3 nodes answering is below 0.9: the master takes itself for
        # the one cut off and marks nothing offline
        time.sleep(5)
        self.assertEqual(self.node_info(lost.name), ["N", "Y"])
        self.assertIn("may be the one cut off", self.masterd_log())
        self.assertEqual(self.running_copies(), [lost.name])
        # lowered, the lost node is fenced and the instance failed over;
        # then the group (2 of 3 online) is below 0.9 again, for verify
        self.ok("gnt-group", "modify", "--node-parameters",
                "repair_min_healthy=0.5", group)
        wait_for("the node to be fenced",
                 lambda: self.node_info(lost.name) == ["Y", "N"], 30, 0.5)
        self.ok("gnt-group", "modify", "--node-parameters",
                "repair_min_healthy=0.9", group)
        out = self.harep("-v")
        self.assertIn("only 2 of the 3 nodes of its node group are online",
                      out)
        self.assertEqual(self.running_copies(), [])
        _, verify = self.gnt("gnt-cluster", "verify", "--error-codes")
        self.assertIn("EGROUPHEALTH", verify)
        self.ok("gnt-group", "modify", "--node-parameters",
                "repair_min_healthy=default", group)

        def failed_over():
            self.harep()
            copies = self.running_copies()
            return copies and copies != [lost.name]
        wait_for("the instance to run elsewhere", failed_over, 60, 0.5)
