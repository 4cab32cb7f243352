"""Instance policies: the checks, and every operation enforcing them
(create, forthcoming reservations and their commit, modify, grow-disk,
moves to another group, cluster and group policy changes)."""

from twisted.trial import unittest

from ganeti import constants
from ganeti import errors
from ganeti import ipolicy
from ganeti import objects

from tests.test_cmdlib_instance import (NODE1, NODE2, InstanceTestCase,
                                        create_op)
from tests.test_migration import NODE3, MigrationTestCase

POLICY = objects.fill_ipolicy(constants.IPOLICY_DEFAULTS, {})


class SpecViolationTests(unittest.TestCase):

    def test_each_spec_names_the_field_and_the_range(self):
        self.assertEqual(ipolicy.spec_violations(
            POLICY, memory=64, vcpus=9, nic_count=0, spindle_use=13,
            disk_sizes=[100, 2048]), [
            "memory-size value 64 is not in range [128, 32768]",
            "cpu-count value 9 is not in range [1, 8]",
            "nic-count value 0 is not in range [1, 8]",
            "spindle-use value 13 is not in range [1, 12]",
            "disk-size/0 value 100 is not in range [1024, 1048576]"])
        self.assertEqual(ipolicy.spec_violations(
            POLICY, memory=128, vcpus=1, nic_count=1, spindle_use=1,
            disk_sizes=[1024] * 17),
            ["disk-count value 17 is not in range [1, 16]"])

    def test_unknown_values_are_not_checked(self):
        self.assertEqual(ipolicy.spec_violations(POLICY), [])
        self.assertEqual(ipolicy.spec_violations(
            POLICY, memory=None, disk_sizes=[None, 2048]), [])

    def test_disk_templates(self):
        policy = dict(POLICY, **{"disk-templates": ["plain", "file"]})
        self.assertEqual(ipolicy.spec_violations(
            policy, disk_sizes=[1024], disk_templates=["drbd"]),
            ["Disk template drbd is not allowed (allowed templates: file,"
             " plain)"])
        # no disks: only if diskless is allowed; no disk count check then
        self.assertEqual(ipolicy.spec_violations(policy, disk_sizes=[]),
                         ["Disk template diskless is not allowed (allowed"
                          " templates: file, plain)"])
        self.assertEqual(ipolicy.spec_violations(POLICY, disk_sizes=[]), [])

    def test_the_closest_minmax_pair_is_reported(self):
        small = {"min": dict(POLICY["minmax"][0]["min"]),
                 "max": dict(POLICY["minmax"][0]["max"],
                             **{"memory-size": 1024})}
        big = {"min": dict(POLICY["minmax"][0]["min"],
                           **{"memory-size": 4096, "cpu-count": 4}),
               "max": dict(POLICY["minmax"][0]["max"])}
        policy = dict(POLICY, minmax=[small, big])
        self.assertEqual(ipolicy.spec_violations(policy, memory=2048,
                                                 vcpus=2), [
            "memory-size value 2048 is not in range [128, 1024]"])
        self.assertEqual(ipolicy.spec_violations(policy, memory=8192,
                                                 vcpus=4), [])

    def test_restrict_and_check_templates(self):
        cut = ipolicy.restrict_templates(POLICY, ["plain", "file"])
        self.assertEqual(cut["disk-templates"], ["plain", "file"])
        self.assertEqual(len(POLICY["disk-templates"]), 9)   # untouched
        ipolicy.check_templates_enabled(cut, ["file", "plain", "drbd"])
        err = self.assertRaises(errors.OpPrereqError,
                                ipolicy.check_templates_enabled, cut,
                                ["file"])
        self.assertIn("the following disk templates are allowed by the"
                      " ipolicy, but not enabled on the cluster: plain",
                      str(err))

    def test_malformed_policies_are_refused(self):
        for policy, words in [
                ({"minmax": []}, ["ipolicy/minmax", "non-empty"]),
                ({"minmax": [{"min": {}}]}, ["exactly the keys min and max"]),
                ({"minmax": [{"min": POLICY["minmax"][0]["max"],
                              "max": POLICY["minmax"][0]["min"]}]},
                 ["ipolicy/minmax/0/cpu-count: min 8 is greater than"
                  " max 1"]),
                ({"std": {"memory-size": "lots"}},
                 ["ipolicy/std/memory-size", "non-negative integer"]),
                ({"vcpu-ratio": 0}, ["ipolicy/vcpu-ratio", "positive"]),
                ({"disk-templates": ["floppy"]}, ["list of disk templates"]),
                ({"colour": "blue"}, ["unknown key 'colour'"])]:
            err = self.assertRaises(errors.OpPrereqError,
                                    ipolicy.check_policy, policy)
            for word in words:
                self.assertIn(word, str(err))
        err = self.assertRaises(errors.OpPrereqError, ipolicy.check_policy,
                                {"std": {}}, group=True)
        self.assertIn("only be set for the cluster", str(err))


def violation(cfg, node_name, text):
    group = cfg.nodegroups[cfg.get_node(node_name).group]
    return ("Instance allocation to group %s (%s) violates policy: %s"
            % (group.uuid, group.name, text))


class CreateTests(InstanceTestCase):

    def test_refused_naming_field_and_range_and_nothing_changes(self):
        before = self.cfg.to_dict()
        err = self.fails(create_op(beparams={"memory": 64},
                                   disks=[{"size": 100}]))
        self.assertEqual(err.args[1], errors.ECODE_INVAL)
        self.assertEqual(str(err.args[0]), violation(
            self.cfg, NODE1, "memory-size value 64 is not in range"
            " [128, 32768], disk-size/0 value 100 is not in range"
            " [1024, 1048576]"))
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertEqual(self.rpc.calls, [])
        self.assertEqual(self.instance_locks(), [])

    def test_ignore_ipolicy_makes_it_a_warning(self):
        self.ok(create_op(beparams={"memory": 64}, ignore_ipolicy=True))
        self.assertEqual(self.inst().beparams["maxmem"], 64)
        self.assertIn("WARNING: " + violation(
            self.cfg, NODE1, "memory-size value 64 is not in range"
            " [128, 32768]") + " (ignored: --ignore-ipolicy)", self.log)

    def test_disk_template_must_be_allowed(self):
        policy = dict(self.cfg.cluster.ipolicy)
        policy["disk-templates"] = ["plain"]
        self.cfg.set_cluster_params(ipolicy=policy)
        err = self.fails(create_op())
        self.assertIn("Disk template file is not allowed (allowed templates:"
                      " plain)", str(err))
        err = self.fails(create_op(disk_template="diskless", disks=[]))
        self.assertIn("Disk template diskless is not allowed", str(err))

    def test_group_policy_overrides_the_clusters(self):
        group = self.cfg.nodegroups[self.cfg.get_node(NODE1).group]
        bounds = [{"min": dict(POLICY["minmax"][0]["min"],
                               **{"memory-size": 512}),
                   "max": dict(POLICY["minmax"][0]["max"])}]
        self.cfg.set_nodegroup_params(group.uuid, ipolicy={"minmax": bounds})
        err = self.fails(create_op(beparams={"memory": 256}))
        self.assertIn("memory-size value 256 is not in range [512, 32768]",
                      str(err))
        self.ok(create_op(beparams={"memory": 512}))

    def test_diskless_instance_has_no_disk_count(self):
        self.ok(create_op(disk_template="diskless", disks=[]))


class ForthcomingTests(InstanceTestCase):

    def test_only_declared_values_are_checked(self):
        # nothing declared but a size: only that is checked
        err = self.fails(create_op(forthcoming=True, os_type=None, nics=[],
                                   beparams={}, disks=[{"size": 100}]))
        self.assertIn("disk-size/0 value 100 is not in range", str(err))
        self.assertNotIn("nic-count", str(err))
        self.assertEqual(self.cfg.instances, {})
        uuid = self.ok(create_op("", forthcoming=True, os_type=None,
                                 nics=[], beparams={}, disks=[]))
        self.assertTrue(self.cfg.instances[uuid].forthcoming)
        err = self.fails(create_op("res2.example.com", forthcoming=True,
                                   beparams={"vcpus": 16}, disks=[]))
        self.assertIn("cpu-count value 16 is not in range [1, 8]", str(err))

    def test_commit_checks_the_complete_instance(self):
        uuid = self.ok(create_op(forthcoming=True, os_type=None, nics=[]))
        # the reservation declared no NIC; the real instance needs one
        before = self.cfg.to_dict()
        err = self.fails(create_op(commit=True, nics=[]))
        self.assertIn("nic-count value 0 is not in range [1, 8]", str(err))
        self.assertEqual(self.cfg.to_dict(), before)
        self.ok(create_op(commit=True))
        self.assertFalse(self.cfg.instances[uuid].forthcoming)


class SetParamsTests(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.create()

    def modify(self, **kw):
        kw.update(OP_ID="OP_INSTANCE_SET_PARAMS",
                  instance_name="inst1.example.com")
        return kw

    def test_refusals_name_field_and_range_and_change_nothing(self):
        before = self.cfg.to_dict()
        for op, text in [
                (self.modify(beparams={"memory": 64}),
                 "memory-size value 64 is not in range [128, 32768]"),
                (self.modify(beparams={"vcpus": 9}),
                 "cpu-count value 9 is not in range [1, 8]"),
                # Ganeti checks the minimum memory too
                (self.modify(beparams={"minmem": 64}),
                 "memory-size value 64 is not in range [128, 32768]"),
                (self.modify(disks=[["add", -1, {"size": 100}]]),
                 "disk-size/1 value 100 is not in range [1024, 1048576]"),
                (self.modify(nics=[["remove", 0, {}]]),
                 "nic-count value 0 is not in range [1, 8]")]:
            err = self.fails(op)
            self.assertEqual(str(err.args[0]),
                             violation(self.cfg, NODE1, text))
            self.assertEqual(self.cfg.to_dict(), before)

    def test_ignore_ipolicy_makes_it_a_warning(self):
        self.ok(self.modify(beparams={"vcpus": 9}, ignore_ipolicy=True))
        self.assertEqual(self.inst().beparams["vcpus"], 9)
        self.assertTrue(any("cpu-count value 9 is not in range [1, 8]" in line
                            and line.startswith("WARNING: ")
                            for line in self.log), self.log)

    def test_unrelated_changes_are_not_held_up(self):
        self.ok(self.modify(beparams={"vcpus": 9}, ignore_ipolicy=True))
        self.ok(self.modify(osparams={"motd": "hi"}))


class GrowDiskTests(InstanceTestCase):

    def test_growing_past_the_maximum(self):
        self.create()
        self.rpc.disk_free = 4 * 1024 * 1024
        before = self.cfg.to_dict()
        op = {"OP_ID": "OP_INSTANCE_GROW_DISK",
              "instance_name": "inst1.example.com", "disk": 0,
              "amount": 2 * 1024 * 1024, "absolute": True}
        err = self.fails(op)
        self.assertEqual(str(err.args[0]),
                         "Growing disk 0 violates policy: disk-size/0 value"
                         " 2097152 is not in range [1024, 1048576]")
        self.assertEqual(self.cfg.to_dict(), before)
        self.ok(dict(op, ignore_ipolicy=True))
        self.assertEqual(self.cfg.instance_disks(self.inst())[0].size,
                         2 * 1024 * 1024)
        self.assertIn("WARNING: Growing disk 0 violates policy: disk-size/0"
                      " value 2097152 is not in range [1024, 1048576]"
                      " (ignored: --ignore-ipolicy)", self.log)


class TargetGroupTests(MigrationTestCase):
    """Moving an instance to a node of another group: that group's policy
    applies."""

    def setUp(self):
        MigrationTestCase.setUp(self)
        self.ok({"OP_ID": "OP_GROUP_ADD", "group_name": "small",
                 "ipolicy": {"minmax": [{
                     "min": dict(POLICY["minmax"][0]["min"]),
                     "max": dict(POLICY["minmax"][0]["max"],
                                 **{"memory-size": 128})}]}})
        self.small = self.cfg.get_nodegroup("small").uuid
        self.ok({"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "small",
                 "nodes": [NODE3]})

    def test_migrate_failover_to_a_stricter_group(self):
        self.create_shared()
        before = self.cfg.to_dict()
        for op in (self.migrate(target_node=NODE3),
                   self.failover(target_node=NODE3)):
            err = self.fails(op)
            self.assertEqual(str(err.args[0]),
                             "Instance does not meet target node group's (%s)"
                             " instance policy: memory-size value 256 is not"
                             " in range [128, 128]" % self.small)
            self.assertEqual(self.cfg.to_dict(), before)
        # same group: no check
        self.ok(self.migrate(target_node=NODE2))
        self.ok(self.migrate(target_node=NODE3, ignore_ipolicy=True))
        self.assertEqual(self.inst().primary_node, self.node(NODE3))
        self.assertTrue(any("Instance does not meet target node group's"
                            in line for line in self.log))

    def test_move_to_a_stricter_group(self):
        self.create(start=False)
        err = self.fails({"OP_ID": "OP_INSTANCE_MOVE",
                          "instance_name": "inst1.example.com",
                          "target_node": NODE3})
        self.assertIn("Instance does not meet target node group's (%s)"
                      % self.small, str(err))

    def test_assigning_nodes_warns(self):
        self.create(pnode=NODE2, start=False)
        self.ok({"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "small",
                 "nodes": [NODE2]})
        self.assertIn("WARNING: These instances do not meet the instance"
                      " policy of group small: inst1.example.com", self.log)


class ClusterPolicyTests(InstanceTestCase):

    def set_params(self, **kw):
        kw["OP_ID"] = "OP_CLUSTER_SET_PARAMS"
        return kw

    def dts(self):
        return self.cfg.cluster.ipolicy["disk-templates"]

    def test_init_allows_only_enabled_templates(self):
        # make_store enables file, plain, drbd, diskless
        self.assertEqual(self.dts(), ["file", "plain", "drbd", "diskless"])

    def test_disabling_templates_cuts_them_from_the_policies(self):
        group = self.cfg.nodegroups[self.cfg.get_node(NODE1).group]
        self.cfg.set_nodegroup_params(group.uuid, ipolicy={
            "disk-templates": ["plain", "drbd"]})
        self.ok(self.set_params(enabled_disk_templates=["file", "plain",
                                                        "diskless"]))
        self.assertEqual(self.dts(), ["file", "plain", "diskless"])
        self.assertEqual(self.cfg.nodegroups[group.uuid].ipolicy,
                         {"disk-templates": ["plain"]})
        self.assertIn("The cluster's instance policy no longer allows disk"
                      " template drbd", self.log)

    def test_enabling_follows_a_policy_allowing_all_enabled(self):
        self.ok(self.set_params(enabled_disk_templates=[
            "file", "plain", "drbd", "diskless", "sharedfile"]))
        self.assertEqual(self.dts(), ["file", "plain", "drbd", "diskless",
                                      "sharedfile"])
        # a narrowed policy stays narrow
        self.ok(self.set_params(ipolicy={"disk-templates": ["file"]}))
        self.ok(self.set_params(enabled_disk_templates=["file", "plain"]))
        self.assertEqual(self.dts(), ["file"])

    def test_policy_templates_must_be_enabled(self):
        before = self.cfg.to_dict()
        for op in (self.set_params(ipolicy={"disk-templates": ["rbd"]}),
                   self.set_params(enabled_disk_templates=["file"],
                                   ipolicy={"disk-templates": ["file",
                                                               "plain"]})):
            err = self.fails(op)
            self.assertIn("the following disk templates are allowed by the"
                          " ipolicy, but not enabled on the cluster",
                          str(err))
            self.assertEqual(self.cfg.to_dict(), before)
        self.ok(self.set_params(enabled_disk_templates=["file"],
                                ipolicy={"disk-templates": ["file"]}))
        self.assertEqual(self.dts(), ["file"])

    def test_template_in_use_cannot_be_disabled(self):
        self.create()
        err = self.fails(self.set_params(enabled_disk_templates=["plain"]))
        self.assertIn("cannot disable disk template 'file', instances use"
                      " it: inst1.example.com", str(err))

    def test_policy_is_merged_and_new_violations_warned(self):
        self.create()
        bounds = [{"min": dict(POLICY["minmax"][0]["min"],
                               **{"memory-size": 512}),
                   "max": dict(POLICY["minmax"][0]["max"])}]
        # the standard specs must stay within the bounds
        err = self.fails(self.set_params(ipolicy={"minmax": bounds}))
        self.assertIn("ipolicy/std: the standard specs must lie within the"
                      " bounds: memory-size value 128 is not in range"
                      " [512, 32768]", str(err))
        self.ok(self.set_params(ipolicy={"minmax": bounds,
                                         "std": {"memory-size": 512}}))
        policy = self.cfg.cluster.ipolicy
        self.assertEqual(policy["minmax"], bounds)
        self.assertEqual(policy["std"]["memory-size"], 512)
        self.assertEqual(policy["std"]["disk-size"], 1024)   # merged
        self.assertEqual(policy["vcpu-ratio"], 4.0)      # kept
        self.assertEqual(policy["disk-templates"],
                         ["file", "plain", "drbd", "diskless"])
        self.assertIn("WARNING: After the ipolicy change the following"
                      " instances violate it: inst1.example.com", self.log)
        err = self.fails(self.set_params(ipolicy={"spindle-ratio": -1}))
        self.assertIn("ipolicy/spindle-ratio", str(err))

    def test_group_policy_templates_must_be_enabled(self):
        err = self.fails({"OP_ID": "OP_GROUP_ADD", "group_name": "g2",
                          "ipolicy": {"disk-templates": ["rbd"]}})
        self.assertIn("not enabled on the cluster: rbd", str(err))
        self.assertNotIn("g2", [g.name for g in
                                self.cfg.nodegroups.values()])
        group = self.cfg.nodegroups[self.cfg.get_node(NODE2).group].name
        err = self.fails({"OP_ID": "OP_GROUP_SET_PARAMS",
                          "group_name": group,
                          "ipolicy": {"disk-templates": ["sharedfile"]}})
        self.assertIn("not enabled on the cluster: sharedfile", str(err))
