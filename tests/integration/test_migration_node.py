"""Emptying nodes through real daemons and the real gnt-* commands.

A 3-node virtual cluster (see test_migration_integration), fake
hypervisor, busybox OS:

* ``gnt-instance move`` copies a file instance's disk node2 -> node3 and
  back through the master (the OS's marker at the start of the disk
  survives);
* a drained node is emptied with ``gnt-node evacuate -n NODE``: its
  sharedfile instance is live-migrated and its file instance moved, each
  by a job the evacuation submitted, which the command follows;
* ``gnt-node migrate`` moves the primaries back.
"""

import os

from ganeti import constants

from tests.integration.test_migration import ClusterTestCase


class NodeEvacuationTests(ClusterTestCase):

    def disk_head(self, name):
        path = self.query(name)["disks"][0]["logical_id"][1]
        with open(path, "rb") as f:
            return path, f.read(64)

    def test_move_evacuate_and_migrate_back(self):
        # node2 is the one emptied (the master's node cannot be drained)
        n1, n2, n3 = (self.node(i).name for i in (1, 2, 0))
        self.create("shared1.example.com", node=1)
        # a small disk, quick to copy (below the policy's minimum size)
        self.create("file1.example.com", template="file", node=1,
                    disks=[{"size": 16}], ignore_ipolicy=True)
        path, head = self.disk_head("file1.example.com")
        self.assertTrue(head.startswith(b"GANETI-BUSYBOX-OS v1"), head)

        # gnt-instance move: the data goes with it
        out = self.ok("gnt-instance", "move", "-f", "-n", n2,
                      "file1.example.com")
        self.assertIn("Copying disk disk/0", out)
        info = self.query("file1.example.com")
        self.assertEqual((info["pnode"], info["run_state"]), (n2, "up"))
        new_path, new_head = self.disk_head("file1.example.com")
        self.assertNotEqual(new_path, path)
        self.assertFalse(os.path.exists(path))
        self.assertEqual(new_head, head)
        self.assertEqual(os.path.getsize(new_path), 16 * 1024 * 1024)
        self.assertEqual(info["disks"][0]["node_status"], {n2: "ok"})
        self.assertIsNotNone(self.fake_pid(self.node(2),
                                           "file1.example.com"))
        # and back to node1 for the evacuation
        self.ok("gnt-instance", "move", "-f", "-n", n1, "file1.example.com")

        # node1 is drained: nothing new goes there; evacuate it
        self.run_job({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": n1,
                      "drained": True})
        # the target named (test_allocator has the allocator plan it)
        out = self.ok("gnt-node", "evacuate", "-f", "-n", n3, n1)
        self.assertIn("Evacuating instances from node '%s'" % n1, out)
        for name in ("shared1.example.com", "file1.example.com"):
            info = self.query(name)
            self.assertEqual(info["pnode"], n3, name)
            self.assertEqual(info["run_state"], "up", name)
        self.assertIn("memory transfer complete", out)
        self.assertIn("Copying disk disk/0", out)
        answer = self.client.call("Query", "node", ["name", "pinst_cnt"],
                                  ["=", "name", n1])
        self.assertEqual(answer["data"][0][1][1], 0)
        for name in ("shared1.example.com", "file1.example.com"):
            self.assertIsNone(self.fake_pid(self.node(1), name))

        # undrained, node1 takes the sharedfile instance back by migration
        self.run_job({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": n1,
                      "drained": False})
        source = self.query("shared1.example.com")["pnode"]
        out = self.ok("gnt-node", "migrate", "-f", "-n", n1, source)
        info = self.query("shared1.example.com")
        self.assertEqual((info["pnode"], info["run_state"]), (n1, "up"))
        self.assertIsNotNone(self.fake_pid(self.node(1),
                                           "shared1.example.com"))
        self.assertEqual(
            self.fields("shared1.example.com", "status"), ["running"])

    def fields(self, name, *names):
        answer = self.client.call("Query", "instance", list(names),
                                  ["=", "name", name])
        return [value for _, value in answer["data"][0]]


# the constant is used by the base class; keep the import visible
assert constants.HT_FAKE
