"""``gnt-storage diagnose`` and ``info`` against real node daemons: each
node of a two-node virtual cluster has its own ExtStorage search path
under its root; a provider broken on one node is partially valid."""

import os

from ganeti.backend import extstorage

from tests.integration.test_migration import ClusterTestCase
from tests.test_extstorage import make_provider


class ExtStorageTests(ClusterTestCase):

    NODES = 2
    BASE_PREFIX = "gnt-es-"

    def test_diagnose_and_info(self):
        first, second = self.node(0), self.node(1)
        dirs = [extstorage.default_search_path(n.root)[0]
                for n in (first, second)]
        for top in dirs:
            make_provider(top, "rbd", "pool the pool to use\n")
        make_provider(dirs[0], "gluster")
        make_provider(dirs[1], "gluster", skip=("attach",))

        code, out = self.gnt("gnt-storage", "diagnose")
        self.assertEqual(code, 1, out)
        lines = out.splitlines()
        self.assertIn("Provider: gluster: partial valid", lines)
        self.assertIn("  For nodegroup: default --> invalid", lines)
        self.assertIn("  Node: %s, status: valid (path: %s/gluster)"
                      % (first.name, dirs[0]), lines)
        self.assertIn("  Node: %s, status: invalid - script %s/gluster/attach"
                      " is missing" % (second.name, dirs[1]),
                      " ".join(lines))
        self.assertIn("Provider: rbd: valid", lines)
        self.assertIn("  For nodegroup: default --> valid", lines)

        out = self.ok("gnt-storage", "info", "rbd")
        self.assertEqual(out.splitlines(), [
            "rbd:", "  - Valid for nodegroups:", "      default",
            "  - Supported ExtStorage parameters:",
            "      pool: the pool to use", ""])

        # repaired on the second node: valid everywhere
        os.unlink(os.path.join(dirs[1], "gluster", "create"))
        os.symlink(os.path.join(dirs[0], "gluster", "create"),
                   os.path.join(dirs[1], "gluster", "create"))
        os.symlink(os.path.join(dirs[0], "gluster", "attach"),
                   os.path.join(dirs[1], "gluster", "attach"))
        out = self.ok("gnt-storage", "diagnose")
        self.assertIn("Provider: gluster: valid", out.splitlines())
