"""``gnt-cluster destroy --yes-do-it`` end to end: refused while an
instance exists, naming it; otherwise it stops the daemons and removes the
cluster's files, after which ``gnt-cluster init`` works again."""

import os

from ganeti import daemon_util

from tests.integration.test_cli import NODE, ClusterTestCase


class DestroyCommandTests(ClusterTestCase):
    """gnt-cluster destroy against the daemons gnt-cluster init started."""

    def test_refused_then_destroyed(self):
        self.init()
        pids = daemon_util.status(self.root)
        self.assertTrue(all(pids.values()), pids)
        self.ok("gnt-instance", "add", "-t", "diskless", "-o",
                "busybox+default", "-n", NODE, "--no-install",
                "--no-start", "--no-name-check", "--no-ip-check",
                "inst1")
        code, out = self.gnt("gnt-cluster", "destroy")
        self.assertEqual(code, 1)
        self.assertIn("--yes-do-it", out)
        code, out = self.gnt("gnt-cluster", "destroy", "--yes-do-it")
        self.assertEqual(code, 1, out)
        self.assertIn("There are still 1 instance(s) in this cluster: inst1",
                      out)
        # nothing was stopped or removed
        self.assertEqual(daemon_util.status(self.root), pids)
        self.assertTrue(os.path.exists(self.paths.config_file))

        self.ok("gnt-instance", "remove", "-f", "inst1")
        out = self.ok("gnt-cluster", "destroy", "--yes-do-it")
        for daemon, pid in pids.items():
            self.assertIn("Stopped %s (pid %d)" % (daemon, pid), out)
        self.assertEqual(set(daemon_util.status(self.root).values()), {None})
        self.assertEqual([n for n in os.listdir(self.paths.data_dir)
                          if n != "queue"], [])
        self.assertFalse(os.path.exists(self.paths.queue_dir))
        # a new cluster can be made in the same place
        self.init("--no-start")
        self.assertTrue(os.path.exists(self.paths.config_file))
