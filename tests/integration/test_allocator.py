"""Placement by Ganeti's real hail, through real daemons and commands.

A 3-node virtual cluster (see test_migration), fake hypervisor, busybox
OS; the master daemon finds Ganeti's hail on the directory given with
``--iallocator-search-path``:

* ``gnt-instance add -I hail`` without a node: hail places it;
* ``gnt-debug iallocator`` shows the document hail gets, and its answer;
* with hail as the cluster's default allocator, a drained node is emptied
  by ``gnt-node evacuate`` as hail plans it: its sharedfile instance is
  migrated by the job hail's plan holds, its file instance moved to the
  node hail chose for it.

Skipped (with the reason) where Ganeti's hail is not installed.

The same cluster with our own tools, no search path: the built-in hail
(a new cluster's default allocator) places instances, and our hbal
balances the cluster through the master's socket (``hbal -L SOCKET -X``),
after which ``hbal -C`` finds nothing left to do.
"""

import json
import os
import subprocess
import sys

from twisted.trial import unittest

from tests.integration.daemons import command_env
from tests.integration.test_migration import ClusterTestCase

HAIL_DIR = "/usr/lib/ganeti/3.0/usr/lib/ganeti/iallocators"


class HailPlacementTests(ClusterTestCase):

    BASE_PREFIX = "gnt-ia-"

    def setUp(self):
        if not os.access(os.path.join(HAIL_DIR, "hail"), os.X_OK):
            raise unittest.SkipTest("Ganeti's hail is not installed in %s"
                                    " (apt-get install ganeti-htools-3.0)"
                                    % HAIL_DIR)
        ClusterTestCase.setUp(self)

    def start_master(self):
        self.masterd = self.start_masterd("--iallocator-search-path",
                                          HAIL_DIR)
        from ganeti import luxi
        self.socket = self.vc.master.paths.master_socket
        self.client = luxi.BlockingClient(self.socket, 60)
        self.addCleanup(self.client.close)

    def add(self, name, *args):
        # within the cluster's instance policy (at least 128 MiB of memory
        # and 1 GiB of disk), which hail enforces
        return self.ok("gnt-instance", "add", "-o", "busybox+default",
                       "-s", "1G", "-B", "memory=128M", "--no-name-check",
                       "--no-ip-check", *(args + (name,)))

    @staticmethod
    def json_part(out):
        """The printed document, after the job's log lines."""
        lines = out.splitlines()
        start = [i for i, line in enumerate(lines) if line.startswith("{")]
        return "\n".join(lines[start[0]:]) if start else out

    def test_add_and_evacuate_with_hail(self):
        names = [n.name for n in self.vc.nodes]
        drained = self.node(1).name       # the master cannot be drained

        # no node, no allocator: told what to give
        self.ok("gnt-cluster", "modify", "--default-iallocator", "")
        code, out = self.gnt("gnt-instance", "add", "-o", "busybox+default",
                             "-t", "sharedfile", "-s", "16M",
                             "--no-name-check", "--no-ip-check",
                             "nowhere.example.com")
        self.assertNotEqual(code, 0)
        self.assertIn("give the primary node (pnode / -n), or an allocator"
                      " (-I NAME / iallocator)", out)

        # hail places a new instance
        out = self.add("placed.example.com", "-t", "sharedfile", "-I", "hail")
        self.assertIn("Selected nodes for instance placed.example.com via"
                      " iallocator hail", out)
        info = self.query("placed.example.com")
        self.assertIn(info["pnode"], names)
        self.assertEqual(info["run_state"], "up")

        # what hail is given, and what it answers
        out = self.ok("gnt-debug", "iallocator", "--dir", "in", "-m",
                      "allocate", "-t", "file", "--disks", "1G", "new1")
        document = json.loads(self.json_part(out))
        self.assertEqual(sorted(document["nodes"]), sorted(names))
        self.assertIn("placed.example.com", document["instances"])
        self.assertEqual(document["request"]["type"], "allocate")
        out = self.ok("gnt-debug", "allocator", "--dir", "out", "-I", "hail",
                      "-m", "allocate", "-t", "file", "--disks", "1G",
                      "new1")
        self.assertTrue(json.loads(self.json_part(out))["success"], out)

        # hail as the default: a drained node emptied as hail plans it
        self.add("shared2.example.com", "-t", "sharedfile", "-n", drained)
        self.add("file2.example.com", "-t", "file", "-n", drained)
        self.ok("gnt-cluster", "modify", "--default-iallocator", "hail")
        out = self.ok("gnt-cluster", "info")
        self.assertIn("default instance allocator: hail", out)
        self.ok("gnt-node", "modify", "-D", "yes", drained)
        out = self.ok("gnt-node", "evacuate", "-f", drained)
        self.assertIn("Asking iallocator 'hail' (node-evacuate request)", out)
        self.assertIn("Asking iallocator 'hail' (allocate request)", out)
        self.assertIn("memory transfer complete", out)
        self.assertIn("Copying disk disk/0", out)
        for name in ("shared2.example.com", "file2.example.com"):
            info = self.query(name)
            self.assertIn(info["pnode"], set(names) - {drained}, name)
            self.assertEqual(info["run_state"], "up", name)
            self.assertIsNone(self.fake_pid(self.node(1), name))
        answer = self.client.call("Query", "node", ["name", "pinst_cnt"],
                                  ["=", "name", drained])
        self.assertEqual(answer["data"][0][1][1], 0)


class BuiltinPlacementTests(ClusterTestCase):
    """Our own hail and hbal against the running master."""

    BASE_PREFIX = "gnt-ib-"

    def add(self, name, *args):
        return self.ok("gnt-instance", "add", "-o", "busybox+default",
                       "-t", "sharedfile", "-s", "1G", "-B",
                       "memory=128M,vcpus=1", "--no-name-check",
                       "--no-ip-check", *(args + (name,)))

    def hbal(self, *args):
        proc = subprocess.run(
            [sys.executable, "-m", "ganeti.htools.hbal", "-L", self.socket]
            + list(args), env=command_env(self.gnt_root),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            timeout=self.GNT_TIMEOUT)
        out = proc.stdout.decode("utf-8", "replace")
        self.assertEqual(proc.returncode, 0, "hbal %s:\n%s"
                         % (" ".join(args), out))
        return out

    def primaries(self):
        answer = self.client.call("Query", "node", ["name", "pinst_cnt"],
                                  None)
        return {row[0][1]: row[1][1] for row in answer["data"]}

    def test_builtin_hail_places_and_hbal_balances(self):
        names = [n.name for n in self.vc.nodes]
        self.assertIn("default instance allocator: hail",
                      self.ok("gnt-cluster", "info"))
        # no node, no -I: the cluster's default, our built-in hail
        out = self.add("placed.example.com")
        self.assertIn("Selected nodes for instance placed.example.com via"
                      " iallocator hail", out)
        self.assertIn(self.query("placed.example.com")["pnode"], names)

        # crowd the master's node, then let hbal spread the instances
        crowded = self.node(0).name
        for i in range(4):
            self.add("crowd%d.example.com" % i, "-n", crowded)
        before = self.primaries()[crowded]
        self.assertGreaterEqual(before, 4)
        out = self.hbal("-X")
        self.assertIn("Initial score:", out)
        self.assertIn("Cluster score improved from", out)
        self.assertIn("Executing jobset for instances", out)
        after = self.primaries()
        self.assertLess(after[crowded], before, out)
        self.assertEqual(sum(after.values()), 5)
        for i in range(4):
            info = self.query("crowd%d.example.com" % i)
            self.assertEqual(info["run_state"], "up", info)
        # balanced: nothing left to do
        out = self.hbal("-C")
        self.assertIn("No solution found", out)
        self.assertIn("Solution length=0", out)
