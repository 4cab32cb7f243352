"""``gnt-cluster verify-disks`` against real node daemons: a two-node
virtual cluster with file disks; a disk file removed behind the cluster's
back is reported missing with its node, an unreachable node is reported
as such (``--strict``: also the disks of an instance whose disks are
down), and the watcher's pass verifies the group's disks too."""

import os
import signal

from tests.integration.daemons import ETC_OS, WatcherMixin
from tests.integration.test_migration import ClusterTestCase

WEB = "web1.example.com"


class VerifyDisksTests(WatcherMixin, ClusterTestCase):

    NODES = 2
    BASE_PREFIX = "gnt-vd-"

    def test_verify_disks(self):
        self.create(WEB, template="file", node=1)
        out = self.ok("gnt-cluster", "verify-disks")
        self.assertIn("No disks need to be activated.", out)
        disk = self.query(WEB)["disks"][0]["logical_id"][1]
        other = self.node(1)

        # the disk file disappears: a missing volume, exit 1
        os.rename(disk, disk + ".away")
        code, out = self.gnt("gnt-cluster", "verify-disks")
        self.assertEqual(code, 1, out)
        self.assertIn("Instance %s has missing logical volumes:" % WEB, out)
        self.assertIn("\t%s %s" % (other.name, disk), out)
        self.assertIn("You need to replace or recreate disks", out)
        os.rename(disk + ".away", disk)

        # the node daemon holding it stops: the node is broken
        noded = self.nodeds[other.name]
        noded.send_signal(signal.SIGTERM)
        noded.wait(30)
        code, out = self.gnt("gnt-cluster", "verify-disks",
                                  "--node-group", "default")
        self.assertEqual(code, 1, out)
        self.assertIn("Error gathering data on node %s: " % other.name, out)
        self.assertIn("Instance %s cannot be verified as it lives on broken"
                      " nodes" % WEB, out)
        self.nodeds[other.name] = self.start_noded(
            other, "--os-search-path", ETC_OS, "--file-storage-dir",
            self.fsd, "--file-storage-dir", self.shared)
        out = self.ok("gnt-cluster", "verify-disks")
        self.assertIn("No disks need to be activated.", out)

        # --strict: the disks of an instance whose disks are down must
        # exist too
        self.run_job({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": WEB})
        self.run_job({"OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS",
                      "instance_name": WEB})
        os.rename(disk, disk + ".away")
        out = self.ok("gnt-cluster", "verify-disks")
        self.assertIn("No disks need to be activated.", out)
        code, out = self.gnt("gnt-cluster", "verify-disks", "--strict")
        self.assertEqual(code, 1, out)
        self.assertIn("Instance %s has missing logical volumes:" % WEB, out)
        os.rename(disk + ".away", disk)
        out = self.ok("gnt-cluster", "verify-disks", "--strict")
        self.assertIn("No disks need to be activated.", out)
        self.assertNotIn("Activating disks", out)

        # an unknown group: refused, nothing submitted
        code, out = self.gnt("gnt-cluster", "verify-disks", "-g",
                                  "nosuch")
        self.assertNotEqual(code, 0)
        self.assertIn("nosuch", out)

        # the watcher verifies the group's disks in its pass, and archives
        # the job once read
        def verify_jobs():
            return sorted(job_id for job_id, ops in self.client.call(
                "QueryJobs", None, ["id", "ops"])
                if ops[0]["OP_ID"] == "OP_GROUP_VERIFY_DISKS")
        before = verify_jobs()
        code, log = self.watcher()
        self.assertEqual(code, 0, log)
        self.assertNotIn("disk verification", log)
        self.assertEqual(verify_jobs(), before)
        archived = []
        for top, _, files in os.walk(os.path.join(
                self.vc.master.paths.queue_dir, "archive")):
            for name in files:
                with open(os.path.join(top, name)) as f:
                    if "OP_GROUP_VERIFY_DISKS" in f.read():
                        archived.append(name)
        self.assertEqual(len(archived), 1, archived)
