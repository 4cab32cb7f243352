"""OP_CLUSTER_VERIFY_DISKS and OP_GROUP_VERIFY_DISKS against fake node
daemons that keep file disks (tests.test_cmdlib_instance)."""

from ganeti import errors
from ganeti import locking
from ganeti import objects
from ganeti import opcodes
from ganeti.cmdlib import verify_disks

from tests.test_cluster_verify import FakeFeedback
from tests.test_cmdlib_instance import NODE1, NODE2, InstanceTestCase


class VerifyDisksTestCase(InstanceTestCase):

    def add_group(self, name):
        uuid = self.cfg.add_nodegroup(objects.NodeGroup(name=name))
        self.glm.add(locking.LEVEL_NODEGROUP, [uuid])


class GroupVerifyDisksTests(VerifyDisksTestCase):

    def verify(self, group="default"):
        self.rpc.calls = []
        return self.ok({"OP_ID": "OP_GROUP_VERIFY_DISKS",
                        "group_name": group})

    def disk_path(self, name="inst1.example.com", idx=0):
        return self.cfg.instance_disks(self.inst(name))[idx].logical_id[1]

    def test_healthy_cluster(self):
        self.create()
        self.create("inst2.example.com", pnode=NODE2)
        self.assertEqual(self.verify(), [{}, [], {}])
        # one call per node, for the disks it holds
        self.assertEqual(sorted(c[0] for c in self.rpc.calls),
                         [NODE1, NODE2])
        self.assertEqual(self.rpc.procedures(),
                         ["blockdev_status", "blockdev_status"])

    def test_missing_disk_named_with_its_node(self):
        self.create(disks=[{"size": 1024}, {"size": 1024}])
        path = self.disk_path(idx=1)
        self.rpc.files[NODE1].discard(path)
        before = self.cfg.to_dict()
        self.assertEqual(self.verify(), [
            {}, [], {"inst1.example.com": [[NODE1, path]]}])
        self.assertEqual(self.cfg.to_dict(), before)

    def test_inactive_disk_listed_a_resync_is_not(self):
        self.create()
        self.create("inst2.example.com")
        states = {self.disk_path(): {"status": "degraded",
                                     "sync_percent": None},
                  self.disk_path("inst2.example.com"):
                  {"status": "degraded", "sync_percent": 40.5}}

        def status(node, disks):
            return [dict(states[d["logical_id"][1]], path=None)
                    for d in disks]
        self.rpc.answers["blockdev_status"] = status
        self.assertEqual(self.verify(), [{}, ["inst1.example.com"], {}])

    def test_unreachable_node_is_a_node_error(self):
        self.create()
        self.rpc.fail[(NODE1, "blockdev_status")] = "connection refused"
        errs, inactive, missing = self.verify()
        self.assertEqual(errs, {NODE1: "connection refused"})
        self.assertEqual(inactive, [])
        self.assertEqual(missing,
                         {"inst1.example.com": [[NODE1, self.disk_path()]]})

    def test_inactive_disks_and_offline_nodes_not_asked(self):
        self.create()
        self.create("inst2.example.com", pnode=NODE2)
        self.cfg.set_instance_disks_active("inst1.example.com", False)
        self.cfg.set_node_params(NODE2, offline=True,
                                 master_candidate=False)
        self.assertEqual(self.verify(), [{}, [], {}])
        self.assertEqual(self.rpc.calls, [])

    def test_strict_checks_inactive_instances_disks_exist(self):
        self.create()
        self.create("inst2.example.com")
        self.cfg.set_instance_disks_active("inst1.example.com", False)
        path = self.disk_path()
        # not active where they are is no fault, but missing is
        self.rpc.answers["blockdev_status"] = lambda node, disks: [
            {"path": None, "status": "degraded", "sync_percent": None}
            if d["logical_id"][1] in self.rpc.files[node] else None
            for d in disks]
        self.assertEqual(self.verify(), [{}, ["inst2.example.com"], {}])
        self.rpc.calls = []
        result = self.ok({"OP_ID": "OP_GROUP_VERIFY_DISKS",
                          "group_name": "default", "is_strict": True})
        self.assertEqual(result, [{}, ["inst2.example.com"], {}])
        self.rpc.files[NODE1].discard(path)
        result = self.ok({"OP_ID": "OP_GROUP_VERIFY_DISKS",
                          "group_name": "default", "is_strict": True})
        self.assertEqual(result, [{}, ["inst2.example.com"],
                                  {"inst1.example.com": [[NODE1, path]]}])
        # without strict, the inactive instance is not looked at
        self.assertEqual(self.verify(), [{}, ["inst2.example.com"], {}])

    def test_other_group_not_looked_at(self):
        self.create()
        self.add_group("rack2")
        self.assertEqual(self.verify("rack2"), [{}, [], {}])
        self.assertEqual(self.rpc.calls, [])

    def test_unknown_group_refused(self):
        err = self.fails({"OP_ID": "OP_GROUP_VERIFY_DISKS",
                          "group_name": "nosuch"})
        self.assertIn("nosuch", str(err))
        self.assertEqual(self.rpc.calls, [])

    def test_volume_names(self):
        lv = objects.Disk(dev_type="plain", logical_id=["xenvg", "d0"],
                          size=1)
        drbd = objects.Disk(dev_type="drbd", size=1, children=[
            lv, objects.Disk(dev_type="plain", logical_id=["xenvg", "m"],
                             size=128)])
        self.assertEqual(verify_disks.volume_name(lv), "xenvg/d0")
        self.assertEqual(verify_disks.volume_name(drbd), "xenvg/d0")


class ClusterVerifyDisksTests(VerifyDisksTestCase):

    def run_cluster_op(self, **params):
        fb = FakeFeedback()
        d = self.proc.execute(1, 0, opcodes.opcode_class(
            "OP_CLUSTER_VERIFY_DISKS")(**params), fb)
        return d, fb

    def test_one_job_per_group(self):
        self.add_group("rack2")
        d, fb = self.run_cluster_op()
        self.assertEqual(self.successResultOf(d),
                         {"jobs": [[True, 100], [True, 101]]})
        self.assertEqual([[op["OP_ID"] for op in job]
                          for job in fb.submitted],
                         [["OP_GROUP_VERIFY_DISKS"]] * 2)
        self.assertEqual(sorted(job[0]["group_name"]
                                for job in fb.submitted),
                         ["default", "rack2"])

    def test_one_group(self):
        self.add_group("rack2")
        d, fb = self.run_cluster_op(group_name="rack2")
        self.assertEqual(self.successResultOf(d), {"jobs": [[True, 100]]})
        self.assertEqual(fb.submitted[0][0]["group_name"], "rack2")

    def test_strict_passed_on_to_the_group_jobs(self):
        d, fb = self.run_cluster_op(is_strict=True)
        self.successResultOf(d)
        self.assertIs(fb.submitted[0][0]["is_strict"], True)
        d, fb = self.run_cluster_op()
        self.successResultOf(d)
        # left out, so Ganeti's loaders take the job
        self.assertNotIn("is_strict", fb.submitted[0][0])

    def test_unknown_group_submits_nothing(self):
        d, fb = self.run_cluster_op(group_name="nosuch")
        err = self.failureResultOf(d, errors.OpPrereqError).value
        self.assertIn("nosuch", str(err))
        self.assertEqual(fb.submitted, [])
