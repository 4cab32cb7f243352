"""Auto-repair on a 3-node virtual cluster (fake hypervisor, busybox OS),
driven as an admin would: tags with ``gnt-* add-tags``, node states with
``gnt-node modify``, passes with the ``harep`` command, results read
with ``gnt-instance info`` and ``list``.

* an instance on shared storage whose primary is drained is migrated
  (``migrate`` allowed), and the repair ends with success;
* a file instance whose node went offline is recreated elsewhere and
  reinstalled (``reinstall`` allowed on the cluster), while another one
  that only allows ``migrate`` is left with an ``enoperm`` result;
* a passed timed suspension on the cluster is removed;
* Ganeti's own harep reads the tags ours writes, and Ganeti's gnt-node
  power/health drive our out-of-band management.
"""

import os
import subprocess
import sys
import time

from tests import ganeti_peer
from tests.integration.daemons import command_env, wait_for
from tests.integration.test_migration import ClusterTestCase

P = "ganeti:watcher:autorepair:"


class AutoRepairTests(ClusterTestCase):

    BASE_PREFIX = "gnt-ar-"

    def harep(self, *args):
        proc = subprocess.run(
            [sys.executable, "-m", "ganeti.watcher.autorepair.harep"]
            + list(args), env=command_env(self.gnt_root),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        out = proc.stdout.decode("utf-8", "replace")
        self.assertEqual(proc.returncode, 0, out)
        return out

    def tags(self, name):
        return self.ok("gnt-instance", "list-tags", name).split()

    def settle(self):
        """Until no job is unfinished."""
        def idle():
            rows = self.client.call("QueryJobs", None, ["status"])
            return all(r[0] in ("success", "error", "canceled")
                       for r in rows)
        wait_for("the jobs to finish", idle, 120)

    def pnode(self, name):
        return self.ok("gnt-instance", "list", "--no-headers", "-o",
                       "pnode", name).strip()

    def test_drained_primary_migrated(self):
        n1 = self.node(1).name
        self.create("web1.example.com", template="sharedfile", node=1)
        self.ok("gnt-instance", "add-tags", "web1.example.com", P + "migrate")
        self.ok("gnt-node", "modify", "--drained", "yes", n1)

        out = self.harep("--dry-run")
        self.assertIn("web1.example.com: pending: repair", out)
        self.assertIn("would submit: OP_INSTANCE_MIGRATE", out)
        self.assertEqual(self.pnode("web1.example.com"), n1)

        out = self.harep()
        self.assertIn("web1.example.com: pending", out)
        self.settle()
        self.assertNotEqual(self.pnode("web1.example.com"), n1)
        state = self.ok("gnt-instance", "list", "--no-headers", "-o",
                        "status,autorepair.state", "web1.example.com")
        self.assertIn("running", state)
        self.assertIn("pending migrate", state)

        out = self.harep()
        self.assertIn("web1.example.com: healthy: repair", out)
        results = [t for t in self.tags("web1.example.com")
                   if t.startswith(P + "result:")]
        self.assertEqual(len(results), 1)
        self.assertIn(":success:", results[0])
        info = self.ok("gnt-instance", "info", "web1.example.com")
        self.assertIn("last result: success of migrate", info)

    def test_offline_node_reinstall_and_enoperm(self):
        n2 = self.node(2).name
        self.create("db1.example.com", template="file", node=2)
        self.create("db2.example.com", template="file", node=2)
        self.ok("gnt-cluster", "add-tags", P + "reinstall",
                P + "suspend:%d" % (time.time() - 60))
        self.ok("gnt-instance", "add-tags", "db2.example.com", P + "migrate")
        self.ok("gnt-node", "modify", "--offline", "yes", n2)
        # the node is gone, and its disks with it (in the virtual cluster
        # every node sees the same file storage directory)
        for name in ("db1.example.com", "db2.example.com"):
            path = self.query(name)["disks"][0]["logical_id"][1]
            os.unlink(path)

        out = self.harep()
        self.assertIn("db1.example.com: pending: repair", out)
        self.assertIn("db2.example.com: needs-repair: needs reinstall", out)
        self.assertIn("but only migrate is allowed", out)
        # the passed suspension is gone, the permission stays
        self.assertEqual(self.ok("gnt-cluster", "list-tags").split(),
                         [P + "reinstall"])
        self.settle()
        self.assertNotEqual(self.pnode("db1.example.com"), n2)
        status = self.ok("gnt-instance", "list", "--no-headers", "-o",
                         "status", "db1.example.com")
        self.assertEqual(status.strip(), "running")
        out = self.harep()
        self.assertIn("db1.example.com: healthy: repair", out)
        self.assertTrue(any(":result:reinstall:" in t and ":success:" in t
                            for t in self.tags("db1.example.com")))
        # db2 stays where it is, with one enoperm result
        self.assertEqual(self.pnode("db2.example.com"), n2)
        results = [t for t in self.tags("db2.example.com")
                   if t.startswith(P + "result:")]
        self.assertEqual(len(results), 1)
        self.assertIn(":migrate:", results[0])
        self.assertIn(":enoperm:", results[0])

    def test_ganeti_tools_against_our_master(self):
        ganeti_peer.skip_unless_available()
        harep = "/usr/lib/ganeti/3.0/usr/bin/harep"
        if not os.access(harep, os.X_OK):
            self.skipTest("Ganeti's harep is not installed")
        master = self.vc.master
        n1 = self.node(1).name
        # a finished repair of ours: pending, then success result tags
        self.create("web1.example.com", template="sharedfile", node=1)
        self.ok("gnt-instance", "add-tags", "web1.example.com",
                P + "migrate")
        self.ok("gnt-node", "modify", "--drained", "yes", n1)
        self.harep()
        self.settle()
        self.harep()
        tags = self.tags("web1.example.com")
        self.assertTrue(any(":result:migrate:" in t for t in tags), tags)
        # Ganeti's harep (luxi) reads the cluster and those tags
        env = dict(os.environ, GANETI_ROOTDIR=master.root,
                   GANETI_HOSTNAME=master.name)
        proc = subprocess.run([harep, "--luxi=" + master.paths.master_socket,
                               "--dry-run"], env=env,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=120)
        out = proc.stdout.decode("utf-8", "replace")
        self.assertEqual(proc.returncode, 0, out)
        self.assertNotIn("rror", out)
        # Ganeti's gnt-node power/health through our OP_OOB_COMMAND
        program = self.vc.install_oob()
        self.ok("gnt-cluster", "modify", "--node-parameters",
                "oob_program=%s" % program)
        code, out = ganeti_peer.run_tool("gnt-node", ["health", n1],
                                         master.root, master.name)
        self.assertEqual(code, 0, out)
        self.assertIn("processes", out)
        self.assertIn("OK", out)
        code, out = ganeti_peer.run_tool("gnt-node", ["power", "status", n1],
                                         master.root, master.name)
        self.assertEqual(code, 0, out)
        self.assertIn("on", out)
