"""OP_CLUSTER_REPAIR_DISK_SIZES against fake node daemons that keep file
disks (tests.test_cmdlib_instance); real file disks and LVM volumes:
tests/integration/test_repair_disk_sizes.py."""

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.cmdlib import repair_disk_sizes

from tests.test_cmdlib_instance import NODE1, NODE2, InstanceTestCase

MiB = 1024 * 1024


class RepairDiskSizesTests(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        #: real sizes (bytes) by disk path; unlisted: as recorded
        self.real = {}
        self.rpc.answers["blockdev_getdimensions"] = self._dimensions

    def _dimensions(self, node, disks):
        result = []
        for d in disks:
            path = d["logical_id"][1]
            if path not in self.rpc.files.get(node, set()):
                result.append(None)
            else:
                result.append({"size": self.real.get(path, d["size"] * MiB),
                               "spindles": None})
        return result

    def repair(self, *instances):
        self.rpc.calls = []
        return self.ok({"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES",
                        "instances": list(instances)})

    def disk(self, name="inst1.example.com", idx=0):
        return self.cfg.instance_disks(self.inst(name))[idx]

    def test_nothing_to_repair(self):
        self.create()
        self.create("inst2.example.com", pnode=NODE2)
        before = self.cfg.to_dict()["instances"]
        self.assertEqual(self.repair(), [])
        # each primary asked once, for its own disks
        self.assertEqual(sorted(c.node for c in self.rpc.calls),
                         [NODE1, NODE2])
        self.assertEqual(self.cfg.to_dict()["instances"], before)

    def test_sizes_corrected_and_listed(self):
        self.create(disks=[{"size": 1024}, {"size": 1536}])
        self.create("inst2.example.com", pnode=NODE2)
        self.real[self.disk(idx=1).logical_id[1]] = 600 * MiB + 12345
        self.real[self.disk("inst2.example.com").logical_id[1]] = 2048 * MiB
        result = self.repair()
        self.assertEqual(result, [["inst1.example.com", 1, "size", 600],
                                  ["inst2.example.com", 0, "size", 2048]])
        self.assertEqual(self.disk(idx=0).size, 1024)
        self.assertEqual(self.disk(idx=1).size, 600)
        self.assertEqual(self.disk("inst2.example.com").size, 2048)
        self.assertIn("Disk 1 of instance inst1.example.com has mismatched"
                      " size, correcting: recorded 1536, actual 600",
                      self.log)
        # a second run finds nothing
        self.assertEqual(self.repair(), [])

    def test_only_the_instances_named(self):
        self.create()
        self.create("inst2.example.com", pnode=NODE2)
        self.real[self.disk().logical_id[1]] = 100 * MiB
        self.real[self.disk("inst2.example.com").logical_id[1]] = 100 * MiB
        self.assertEqual(self.repair("inst2.example.com"),
                         [["inst2.example.com", 0, "size", 100]])
        self.assertEqual([c.node for c in self.rpc.calls], [NODE2])
        self.assertEqual(self.disk().size, 1024)

    def test_unknown_instance_is_refused(self):
        self.create()
        before = self.cfg.to_dict()
        err = self.fails({"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES",
                          "instances": ["nosuch.example.com"]})
        self.assertIn("nosuch.example.com", err.args[0])
        self.assertEqual(err.args[1], errors.ECODE_NOENT)
        self.assertEqual(self.cfg.to_dict(), before)

    def test_bad_instances_parameter(self):
        err = self.fails({"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES",
                          "instances": "inst1.example.com"})
        self.assertIn("instances", err.args[0])

    def test_node_failure_and_missing_disk_are_warnings(self):
        self.create()
        self.create("inst2.example.com", pnode=NODE2)
        self.real[self.disk().logical_id[1]] = 10 * MiB
        self.rpc.files[NODE2].clear()
        self.assertEqual(self.repair(),
                         [["inst1.example.com", 0, "size", 10]])
        self.assertIn("WARNING: Disk 0 of instance inst2.example.com did not"
                      " return size information, ignoring", self.log)
        self.rpc.fail[(NODE1, "blockdev_getdimensions")] = "refused"
        self.real[self.disk().logical_id[1]] = 20 * MiB
        self.assertEqual(self.repair(), [])
        self.assertEqual(self.disk().size, 10)
        self.assertTrue(any("Failure in blockdev_getdimensions call to node"
                            " %s" % NODE1 in m for m in self.log))

    def test_offline_primary_not_asked(self):
        self.create("inst2.example.com", pnode=NODE2)
        self.cfg.set_node_params(NODE2, offline=True,
                                 master_candidate=False)
        self.assertEqual(self.repair(), [])
        self.assertEqual(self.rpc.calls, [])


class DrbdChildrenTests(InstanceTestCase):
    """What is measured of a DRBD disk, and its children's sizes."""

    def drbd(self, size, data_size):
        data = objects.Disk(dev_type=constants.DT_PLAIN,
                            logical_id=["xenvg", "data"], size=data_size)
        meta = objects.Disk(dev_type=constants.DT_PLAIN,
                            logical_id=["xenvg", "meta"], size=128)
        return objects.Disk(dev_type=constants.DT_DRBD8, size=size,
                            children=[data, meta],
                            logical_id=["a", "b", 11000, 0, 0, "s"])

    def test_the_data_volume_is_measured(self):
        disk = self.drbd(1024, 1024)
        self.assertEqual(repair_disk_sizes.measured_disk(disk).logical_id,
                         ["xenvg", "data"])
        self.assertIsNone(repair_disk_sizes.measured_disk(
            objects.Disk(dev_type=constants.DT_DRBD8, size=1)))

    def test_smaller_data_child_grown(self):
        children = repair_disk_sizes._fixed_children(self.drbd(1024, 1000))
        self.assertEqual([c.size for c in children], [1024, 128])
        self.assertIsNone(repair_disk_sizes._fixed_children(
            self.drbd(1024, 1024)))
