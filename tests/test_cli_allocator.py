"""The commands around instance allocators: gnt-debug iallocator,
gnt-cluster's default allocators, gnt-group evacuate, gnt-instance
change-group and the --iallocator-params option."""

import json

from twisted.trial import unittest

from ganeti import config
from ganeti import errors
from ganeti.cli import gnt_cluster, gnt_debug, gnt_group, gnt_instance
from ganeti.cli import gnt_node
from ganeti.cmdlib.cluster import cluster_info

from tests.test_cli_fakes import FakeClient, encoded, run


class DebugTests(unittest.TestCase):

    def test_defaults_as_ganeti(self):
        client = FakeClient()
        client.results["OP_TEST_ALLOCATOR"] = '{"request": {}}'
        code, out, err = run(gnt_debug.commands, ["iallocator", "inst1"],
                             client)
        self.assertEqual(code, 0, err)
        self.assertEqual(out, '{"request": {}}\n')
        op = client.op()
        self.assertEqual(op["OP_ID"], "OP_TEST_ALLOCATOR")
        # Ganeti's defaults: relocate, in, 128 MiB, two 4 GiB disks, ...
        for key, value in (("direction", "in"), ("mode", "relocate"),
                           ("name", "inst1"), ("instances", ["inst1"]),
                           ("memory", 128), ("vcpus", 1),
                           ("disks", [{"size": 4096, "mode": "rw"},
                                      {"size": 4096, "mode": "rw"}]),
                           ("nics", [{"mac": "00:11:22:33:44:55",
                                      "ip": None, "bridge": None}]),
                           ("evac_mode", "all"), ("target_groups", []),
                           ("spindle_use", 1), ("count", 2), ("tags", []),
                           ("iallocator", None)):
            self.assertEqual(op[key], value, key)

    def test_options(self):
        client = FakeClient()
        code, _, err = run(gnt_debug.commands, [
            "allocator", "--dir", "out", "-I", "hail", "-m", "allocate",
            "--memory", "1G", "--disks", "1G,512", "-t", "plain",
            "--nics", "aa:bb:cc:dd:ee:ff/10.0.0.1/br0,/", "-o", "busybox",
            "-p", "2", "--tags", "a,b", "--target-groups", "g1",
            "--target-groups", "g2", "--count", "3",
            "--iallocator-params", "ignore-dynu,level=2", "new1"], client)
        self.assertEqual(code, 0, err)
        op = client.op()
        for key, value in (("direction", "out"), ("iallocator", "hail"),
                           ("mode", "allocate"), ("memory", 1024),
                           ("disks", [{"size": 1024, "mode": "rw"},
                                      {"size": 512, "mode": "rw"}]),
                           ("disk_template", "plain"),
                           ("nics", [{"mac": "aa:bb:cc:dd:ee:ff",
                                      "ip": "10.0.0.1", "bridge": "br0"},
                                     {"mac": None, "ip": None,
                                      "bridge": None}]),
                           ("os", "busybox"), ("vcpus", 2),
                           ("tags", ["a", "b"]),
                           ("target_groups", ["g1", "g2"]), ("count", 3),
                           ("iallocator_params", {"ignore-dynu": None,
                                                  "level": "2"})):
            self.assertEqual(op[key], value, key)
        code, _, err = run(gnt_debug.commands, ["iallocator", "--disks",
                                                "lots", "x"], client)
        self.assertNotEqual(code, 0)
        self.assertIn("--disks", err)


def _cluster_info(**params):
    store = config.ConfigStore.create(
        None, "cluster.example.com", "node1.example.com", "127.0.0.1",
        enabled_hypervisors=["fake"])
    store.cluster.default_iallocator = params.get("default_iallocator", "")
    return json.loads(json.dumps(cluster_info(store)))


class ClusterDefaultsTests(unittest.TestCase):

    def test_modify(self):
        client = FakeClient()
        code, _, err = run(gnt_cluster.commands, [
            "modify", "--default-iallocator", "hail,spare",
            "--default-iallocator-for", "relocate=spare",
            "--default-iallocator-for", "node-evacuate=none",
            "--default-iallocator-for", "allocate=default"], client)
        self.assertEqual(code, 0, err)
        op = client.op()
        self.assertEqual(op["default_iallocator"], "hail,spare")
        self.assertEqual(op["default_iallocators"], {
            "relocate": ["spare"], "node-evacuate": [], "allocate": None})
        code, _, err = run(gnt_cluster.commands, [
            "modify", "--default-iallocator-for", "rebalance=x"], client)
        self.assertNotEqual(code, 0)
        self.assertIn("--default-iallocator-for", err)
        self.assertIn("'rebalance=x' is not TYPE=NAME", err)
        # the request types this master added take defaults too
        code, _, err = run(gnt_cluster.commands, [
            "modify", "--default-iallocator-for", "balance=hail",
            "--default-iallocator-for", "capacity=hail"], client)
        self.assertEqual(code, 0, err)
        self.assertEqual(client.op()["default_iallocators"],
                         {"balance": ["hail"], "capacity": ["hail"]})

    def test_info_shows_the_lists(self):
        client = FakeClient()
        client.cluster_info = _cluster_info(
            default_iallocator="hail,spare;relocate=spare;node-evacuate=")
        code, out, err = run(gnt_cluster.commands, ["info"], client)
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        for expected in ("  default instance allocator: hail",
                         "  default instance allocators per request type: ",
                         "    allocate: hail, spare",
                         "    relocate: spare",
                         "    node-evacuate: (none)"):
            self.assertIn(expected, lines)


class EvacuationCommandTests(unittest.TestCase):

    def test_group_evacuate_follows_the_jobs(self):
        client = FakeClient()
        # the evacuation is job 1; the job it submitted is job 1 too here
        client.results["OP_GROUP_EVACUATE"] = {"jobs": [[True, 1]]}
        code, out, err = run(gnt_group.commands, [
            "evacuate", "-I", "hail", "--to", "g2", "--sequential",
            "--force-failover", "--iallocator-params", "x=1", "g1"], client)
        self.assertEqual(code, 0, err)
        op = client.op(1)
        for key, value in (("group_name", "g1"), ("iallocator", "hail"),
                           ("target_groups", ["g2"]), ("sequential", True),
                           ("force_failover", True),
                           ("iallocator_params", {"x": "1"})):
            self.assertEqual(op[key], value, key)
        self.assertIn("Waiting for job 1", err)
        self.assertIn("All instances evacuated successfully.", out)

    def test_group_evacuate_dry_run_prints_the_plan(self):
        client = FakeClient()
        client.results["OP_GROUP_EVACUATE"] = {
            "jobs": [], "moved": [["a", "other", ["n4"]]],
            "failed": [["b", "no space"]],
            "planned_jobs": [[{"OP_ID": "OP_INSTANCE_MIGRATE",
                               "instance_name": "a", "target_node": "n4"}]]}
        code, out, err = run(gnt_group.commands, ["evacuate", "--dry-run",
                                                  "g1"], client)
        self.assertEqual(code, 0, err)
        self.assertTrue(client.op()["dry_run"])
        self.assertIn("a: other (n4)", out)
        self.assertIn("b: cannot be moved (no space)", out)
        self.assertIn("job: OP_INSTANCE_MIGRATE(a -> n4)", out)

    def test_group_evacuate_error(self):
        client = FakeClient()
        client.errors["OP_GROUP_EVACUATE"] = encoded(errors.OpPrereqError(
            "No instance allocator given and no default allocator for"
            " 'change-group' requests is configured", "wrong_input"))
        code, _, err = run(gnt_group.commands, ["evacuate", "g1"], client)
        self.assertNotEqual(code, 0)
        self.assertIn("no default allocator for 'change-group'", err)

    def test_change_group_and_allocator_params(self):
        client = FakeClient()
        client.results["OP_INSTANCE_CHANGE_GROUP"] = {"jobs": []}
        code, out, err = run(gnt_instance.commands, [
            "change-group", "--to", "g2", "-I", "hail", "inst1"], client)
        self.assertEqual(code, 0, err)
        self.assertEqual(client.op()["target_groups"], ["g2"])
        self.assertIn("Instance 'inst1' changed group successfully.", out)
        for argv in (["migrate", "-f", "-I", "hail", "--iallocator-params",
                      "a=1", "inst1"],
                     ["failover", "-f", "--iallocator-params", "a=1",
                      "inst1"],
                     ["replace-disks", "-I", "hail", "--iallocator-params",
                      "a=1", "inst1"],
                     ["recreate-disks", "-I", "hail", "--iallocator-params",
                      "a=1", "inst1"]):
            code, _, err = run(gnt_instance.commands, argv, client)
            self.assertEqual(code, 0, (argv, err))
            self.assertEqual(client.op()["iallocator_params"], {"a": "1"},
                             argv)
        client.tables["node"] = (
            [{"name": "pinst_list", "title": "P", "kind": "other",
              "doc": ""}, {"name": "sinst_list", "title": "S",
                           "kind": "other", "doc": ""}],
            [[["inst1"], []]])
        client.results["OP_NODE_EVACUATE"] = {"jobs": []}
        code, _, err = run(gnt_node.commands, [
            "evacuate", "-f", "-I", "hail", "--iallocator-params", "x",
            "node1"], client)
        self.assertEqual(code, 0, err)
        self.assertEqual(client.op()["iallocator_params"], {"x": None})
