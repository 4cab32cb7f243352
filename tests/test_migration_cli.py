"""gnt-instance migrate/failover/move/replace-disks/recreate-disks and
gnt-node evacuate/migrate/modify-storage/repair-storage: arguments ->
opcodes, confirmations and following the submitted jobs."""

from twisted.trial import unittest

from ganeti.cli import gnt_instance
from ganeti.cli import gnt_node

from tests.test_cli_fakes import FakeClient, run
from tests.test_cli_node_os import NODE_FIELDS, NODE_ROWS


def inst(client, *argv):
    return run(gnt_instance.commands, argv, client)


def node(client, *argv):
    return run(gnt_node.commands, argv, client)


class InstanceCommandTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()

    def test_migrate(self):
        code, out, err = inst(self.client, "migrate", "-f", "-n", "node2",
                              "--non-live", "--allow-failover", "inst1")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual(
            (op["OP_ID"], op["instance_name"], op["target_node"],
             op["live"], op["mode"], op["allow_failover"], op["cleanup"]),
            ("OP_INSTANCE_MIGRATE", "inst1", "node2", False, None, True,
             False))
        inst(self.client, "migrate", "-f", "--cleanup",
             "--migration-mode", "live", "inst1")
        op = self.client.op()
        self.assertEqual((op["cleanup"], op["mode"], op["live"],
                          op["target_node"]), (True, "live", None, None))
        code, _, err = inst(self.client, "migrate", "-f", "--non-live",
                            "--migration-mode", "live", "inst1")
        self.assertNotEqual(code, 0)
        self.assertIn("--non-live", err)

    def test_migrate_asks_first(self):
        code, _, err = run(gnt_instance.commands, ["migrate", "inst1"],
                           self.client, stdin="n\n")
        self.assertNotEqual(code, 0)
        self.assertEqual(self.client.jobs, {})

    def test_failover_and_move(self):
        code, _, err = inst(self.client, "failover", "-f",
                            "--ignore-consistency", "--shutdown-timeout",
                            "30", "-n", "node3", "inst1")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["ignore_consistency"],
                          op["shutdown_timeout"], op["target_node"]),
                         ("OP_INSTANCE_FAILOVER", True, 30, "node3"))
        code, _, err = inst(self.client, "move", "-f", "-n", "node2",
                            "inst1")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["target_node"]),
                         ("OP_INSTANCE_MOVE", "node2"))
        code, _, err = inst(self.client, "move", "-f", "inst1")
        self.assertNotEqual(code, 0)

    def test_replace_disks(self):
        inst(self.client, "replace-disks", "-s", "--disks", "0,2", "inst1")
        op = self.client.op()
        self.assertEqual((op["mode"], op["disks"], op["remote_node"]),
                         ("replace_on_secondary", [0, 2], None))
        inst(self.client, "replace-disks", "-n", "node3", "inst1")
        op = self.client.op()
        self.assertEqual((op["mode"], op["remote_node"]),
                         ("replace_new_secondary", "node3"))
        inst(self.client, "replace-disks", "-a", "inst1")
        self.assertEqual(self.client.op()["mode"], "replace_auto")
        code, _, _ = inst(self.client, "replace-disks", "inst1")
        self.assertNotEqual(code, 0)

    def test_recreate_disks(self):
        inst(self.client, "recreate-disks", "inst1")
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["disks"], op["nodes"]),
                         ("OP_INSTANCE_RECREATE_DISKS", [], []))
        inst(self.client, "recreate-disks", "--disk", "1", "--disk",
             "0:size=2G,mode=ro", "-n", "node2:node3", "inst1")
        op = self.client.op()
        self.assertEqual(op["disks"], [[1, {}],
                                       [0, {"size": 2048, "mode": "ro"}]])
        self.assertEqual(op["nodes"], ["node2", "node3"])


class NodeCommandTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()
        rows = [list(r) for r in NODE_ROWS]
        rows[0][-2:] = [["inst1", "inst2"], ["inst3"]]
        self.client.tables["node"] = (NODE_FIELDS, rows)

    def test_evacuate_follows_the_jobs(self):
        jobs = [self.client.submit_job([{"OP_ID": "OP_INSTANCE_MIGRATE",
                                         "instance_name": name}])
                for name in ("inst1", "inst2")]
        self.client.results["OP_NODE_EVACUATE"] = {
            "jobs": [[True, j] for j in jobs]}
        code, out, err = node(self.client, "evacuate", "-f", "-p",
                              "node1.example.com")
        self.assertEqual(code, 0, err)
        ops = [o for o in self.client.ops() if o["OP_ID"] ==
               "OP_NODE_EVACUATE"]
        self.assertEqual((ops[-1]["mode"], ops[-1]["remote_node"]),
                         ("primary-only", None))
        for job in jobs:
            self.assertIn("Waiting for job %s" % job, err)

    def test_evacuate_default_mode_and_target(self):
        self.client.results["OP_NODE_EVACUATE"] = {"jobs": []}
        code, _, err = node(self.client, "evacuate", "-f", "-n", "node3",
                            "node1.example.com")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["mode"], op["remote_node"]), ("all", "node3"))

    def test_evacuate_nothing(self):
        self.client.tables["node"] = (NODE_FIELDS, [NODE_ROWS[1]])
        code, out, _ = node(self.client, "evacuate", "-f",
                            "node2.example.com")
        self.assertEqual(code, 0)
        self.assertIn("No instances to evacuate", out)

    def test_evacuate_failed_submission(self):
        self.client.results["OP_NODE_EVACUATE"] = {
            "jobs": [[False, "queue drained"]]}
        code, _, err = node(self.client, "evacuate", "-f",
                            "node1.example.com")
        self.assertEqual(code, 1)
        self.assertIn("queue drained", err)

    def test_migrate(self):
        job = self.client.submit_job([{"OP_ID": "OP_INSTANCE_MIGRATE",
                                       "instance_name": "inst1"}])
        self.client.results["OP_NODE_MIGRATE"] = {"jobs": [[True, job]]}
        code, _, err = node(self.client, "migrate", "-f", "--non-live",
                            "node1.example.com")
        self.assertEqual(code, 0, err)
        op = [o for o in self.client.ops()
              if o["OP_ID"] == "OP_NODE_MIGRATE"][-1]
        self.assertEqual((op["node_name"], op["live"]),
                         ("node1.example.com", False))

    def test_modify_and_repair_storage(self):
        code, _, err = node(self.client, "modify-storage",
                            "--allocatable", "no", "node1", "lvm-pv",
                            "/dev/sdb")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["storage_type"], op["name"],
                          op["changes"]),
                         ("OP_NODE_MODIFY_STORAGE", "lvm-pv", "/dev/sdb",
                          {"allocatable": False}))
        code, _, _ = node(self.client, "modify-storage", "node1", "lvm-pv",
                          "/dev/sdb")
        self.assertNotEqual(code, 0)
        code, _, err = node(self.client, "repair-storage",
                            "--ignore-consistency", "node1", "lvm-vg",
                            "xenvg")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["name"], op["ignore_consistency"]),
                         ("OP_REPAIR_NODE_STORAGE", "xenvg", True))
