"""Disk parameters: checked when set, filled cluster < group < disk, sent
with every disk to the nodes, and applied by the storage drivers.

* the checks of ``gnt-cluster modify -D`` / ``gnt-group add|modify -D``
  (OP_CLUSTER_SET_PARAMS, OP_GROUP_ADD, OP_GROUP_SET_PARAMS): unknown
  parameters, wrong types, bad values are refused naming the parameter,
  and nothing changes; the command line's strings become typed values;
* the effective parameters of a disk and what a node gets (instance
  creation with a fake RPC);
* plain disks: ``stripes`` against recorded LVM outputs (fewer PVs than
  stripes, a failed striped lvcreate) and for real on a volume group of
  two loop devices (``lvs -o stripes``);
* drbd disks (no DRBD here): the drbdsetup options the parameters give,
  through a fake runner, and DRBD's own ``drbdadm --dry-run up`` of the
  generated resource agreeing with them.
"""

import json
import os
import shutil
import subprocess

from twisted.internet import defer, reactor
from twisted.logger import Logger, formatEvent
from twisted.trial import unittest

from ganeti import constants
from ganeti import diskparams
from ganeti import errors
from ganeti import objects
from ganeti import storage
from ganeti.backend import process
from ganeti.storage import drbd, lvm

from tests.fakes import FakeRunner
from tests.test_cmdlib_instance import InstanceTestCase, create_op
from tests.test_drbd import DrbdRunner, disk_dict
from tests.test_group_lus import GroupTestCase
from tests.test_storage_units import _run, make_vg


# ---------------------------------------------------------------------------
# Checks of what an admin sets

class CheckTests(unittest.TestCase):

    def test_strings_become_typed_values(self):
        self.assertEqual(
            diskparams.check_diskparams({
                "plain": {"stripes": "2"},
                "drbd": {"resync-rate": "1024", "dynamic-resync": "true",
                         "meta-barriers": "no", "disk-barriers": "bf",
                         "protocol": "A", "metavg": "metavg1",
                         "net-custom": "--max-buffers 8000"}}),
            {"plain": {"stripes": 2},
             "drbd": {"resync-rate": 1024, "dynamic-resync": True,
                      "meta-barriers": False, "disk-barriers": "bf",
                      "protocol": "A", "metavg": "metavg1",
                      "net-custom": "--max-buffers 8000"}})

    def test_refusals_name_the_parameter(self):
        cases = [
            ({"plain": {"stripes": "x"}},
             "diskparams/plain/stripes: 'x' is not an integer"),
            ({"plain": {"stripes": 0}},
             "diskparams/plain/stripes: 0 is below the smallest value, 1"),
            ({"plain": {"stripe": 2}},
             "diskparams/plain: unknown parameter stripe (known: stripes)"),
            ({"tape": {}}, "diskparams: 'tape' is not a disk template"),
            ({"drbd": {"protocol": "D"}},
             "diskparams/drbd/protocol: 'D' is not a DRBD replication"),
            ({"drbd": {"disk-barriers": "bx"}},
             "diskparams/drbd/disk-barriers: 'bx' is not 'n' or a"),
            ({"drbd": {"disk-barriers": "nb"}},
             "diskparams/drbd/disk-barriers: 'nb' is not 'n' or a"),
            ({"drbd": {"dynamic-resync": "maybe"}},
             "diskparams/drbd/dynamic-resync: 'maybe' is not a boolean"),
            ({"drbd": {"metavg": "-bad"}},
             "diskparams/drbd/metavg: '-bad' is not a volume group name"),
            ({"drbd": {"disk-custom": "'unbalanced"}},
             "diskparams/drbd/disk-custom: cannot split"),
            ({"drbd": {"dynamic-resync": True, "c-plan-ahead": 0}},
             "diskparams/drbd/c-plan-ahead: 0 switches the dynamic resync"),
            ({"rbd": {"access": "sideways"}},
             "diskparams/rbd/access: 'sideways' is not an access mode"),
        ]
        for value, message in cases:
            err = self.assertRaises(errors.OpPrereqError,
                                    diskparams.check_diskparams, value)
            self.assertIn(message, str(err))
            self.assertEqual(err.args[1], errors.ECODE_INVAL)

    def test_default_only_where_allowed(self):
        self.assertEqual(diskparams.check_diskparams(
            {"plain": {"stripes": "default"}}, allow_default=True),
            {"plain": {"stripes": "default"}})
        self.assertRaises(errors.OpPrereqError, diskparams.check_diskparams,
                          {"plain": {"stripes": "default"}})


class LogicalUnitTests(GroupTestCase):
    """What gnt-cluster modify -D and gnt-group modify -D submit."""

    def test_cluster_modify(self):
        self.ok("OP_CLUSTER_SET_PARAMS",
                diskparams={"plain": {"stripes": "2"},
                            "drbd": {"resync-rate": "2048"}})
        self.assertEqual(self.cfg.cluster.diskparams["plain"]["stripes"], 2)
        self.assertEqual(
            self.cfg.cluster.diskparams["drbd"]["resync-rate"], 2048)
        serial = self.cfg.serial_no
        err = self.fails("OP_CLUSTER_SET_PARAMS",
                         diskparams={"plain": {"stripes": "x"}})
        self.assertIn("diskparams/plain/stripes: 'x' is not an integer",
                      str(err))
        err = self.fails("OP_CLUSTER_SET_PARAMS",
                         diskparams={"drbd": {"data-stripes": 2,
                                              "colour": "red"}})
        self.assertIn("diskparams/drbd: unknown parameter colour", str(err))
        # nothing changed, not even the valid half of the last one
        self.assertEqual(self.cfg.serial_no, serial)
        self.assertEqual(self.cfg.cluster.diskparams["plain"]["stripes"], 2)
        self.assertEqual(
            self.cfg.cluster.diskparams["drbd"]["data-stripes"], 1)

    def test_group_modify(self):
        self.ok("OP_GROUP_SET_PARAMS", group_name="default",
                diskparams={"plain": {"stripes": "3"}})
        group = self.cfg.get_nodegroup("default")
        self.assertEqual(group.diskparams, {"plain": {"stripes": 3}})
        serial = self.cfg.serial_no
        err = self.fails("OP_GROUP_SET_PARAMS", group_name="default",
                         diskparams={"plain": {"stripes": "three"}})
        self.assertIn("diskparams/plain/stripes: 'three' is not an integer",
                      str(err))
        err = self.fails("OP_GROUP_ADD", group_name="rack2",
                         diskparams={"drbd": {"protocol": "Z"}})
        self.assertIn("diskparams/drbd/protocol", str(err))
        self.assertEqual(self.cfg.serial_no, serial)
        self.assertEqual(group.diskparams, {"plain": {"stripes": 3}})
        self.assertEqual(len(self.cfg.nodegroups), 1)
        # "default" drops the group's value: the cluster's applies again
        self.ok("OP_GROUP_SET_PARAMS", group_name="default",
                diskparams={"plain": {"stripes": "default"}})
        self.assertEqual(self.cfg.get_nodegroup("default").diskparams, {})


# ---------------------------------------------------------------------------
# Effective parameters and what the nodes get

class EffectiveTests(unittest.TestCase):

    def setUp(self):
        self.cluster = objects.Cluster(diskparams={
            "plain": {"stripes": 2},
            "drbd": {"data-stripes": 2, "resync-rate": 1000}})
        self.group = objects.NodeGroup(name="g", diskparams={
            "plain": {"stripes": 3}, "drbd": {"meta-stripes": 2}})

    def test_cluster_group_disk(self):
        disk = objects.Disk(dev_type="plain", logical_id=["vg", "lv"])
        self.assertEqual(objects.disk_params(self.cluster, None, disk),
                         {"stripes": 2})
        self.assertEqual(objects.disk_params(self.cluster, self.group, disk),
                         {"stripes": 3})
        disk.params = {"stripes": 4}
        self.assertEqual(objects.disk_params(self.cluster, self.group, disk),
                         {"stripes": 4})

    def test_drbd_children_get_their_stripes(self):
        data = objects.annotate_disk_dict(self.cluster, self.group,
                                          disk_dict())
        self.assertEqual(data["params"]["resync-rate"], 1000)
        self.assertEqual(data["params"]["protocol"], "C")
        self.assertEqual([c["params"] for c in data["children"]],
                         [{"stripes": 2}, {"stripes": 2}])
        self.assertEqual(
            objects.annotate_disk_dict(self.cluster, self.group,
                                       {"dev_type": "diskless"}),
            {"dev_type": "diskless"})


class CreationTests(InstanceTestCase):

    def test_plain_disk_goes_out_with_the_group_stripes(self):
        self.cfg.set_cluster_params(diskparams={"plain": {"stripes": 2}})
        self.create(disk_template="plain")
        inst = self.inst()
        disk = self.cfg.instance_disks(inst)[0]
        # the config keeps only the disk's own parameters (as Ganeti)...
        self.assertEqual(disk.params, {})
        # ...the node gets the effective ones
        self.ok(create_op("inst2.example.com", disk_template="plain"))
        created = self.rpc.calls_of("blockdev_create")[0][2][0]
        self.assertEqual(created["params"], {"stripes": 2})
        group = self.cfg.get_nodegroup("default")
        self.cfg.set_nodegroup_params(group.uuid,
                                      diskparams={"plain": {"stripes": 3}})
        self.rpc.calls = []
        self.ok({"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS",
                 "instance_name": inst.name})
        assembled = self.rpc.calls_of("blockdev_assemble")[0][2][0]
        self.assertEqual(assembled["params"], {"stripes": 3})


# ---------------------------------------------------------------------------
# plain: stripes

def _pvs(*rows):
    return json.dumps({"report": [{"pv": [
        {"pv_name": name, "vg_name": vg, "pv_free": "%d.00" % free,
         "pv_attr": attr} for name, vg, free, attr in rows]}]}).encode()


LV_MISSING = b'  Failed to find logical volume "xenvg/lv1"\n'


class RecordedStripesTests(unittest.TestCase):

    def setUp(self):
        self.runner = FakeRunner()
        self.runner.answer(["lvs"], stderr=LV_MISSING, code=5)
        self.runner.answer(["pvs"], stdout=_pvs(
            ("/dev/loop0", "xenvg", 100, "a--"),
            ("/dev/loop1", "xenvg", 300, "a--"),
            ("/dev/loop2", "xenvg", 500, "u--"),     # not allocatable
            ("/dev/loop3", "othervg", 900, "a--")))
        self.ctx = storage.StorageContext(runner=self.runner,
                                          device_mapper=True)

    def lv(self, **params):
        return storage.block_device(
            {"dev_type": "plain", "logical_id": ["xenvg", "lv1"],
             "params": params}, self.ctx)

    def lvcreates(self):
        return [c for c in self.runner.commands if c[0] == "lvcreate"]

    @defer.inlineCallbacks
    def test_two_stripes(self):
        dev = self.lv(stripes=2)
        yield dev.create(64)
        # the allocatable PVs of the VG, most free space first
        self.assertEqual(self.lvcreates(), [
            ["lvcreate", "-L", "64m", "-n", "lv1", "-Wn", "-i", "2", "xenvg",
             "/dev/loop1", "/dev/loop0"]])
        self.assertEqual(dev.stripes_used, 2)

    @defer.inlineCallbacks
    def test_more_stripes_than_pvs(self):
        events = []
        self.patch(lvm, "log", Logger(observer=events.append))
        dev = self.lv(stripes=4)
        yield dev.create(64)
        self.assertEqual(self.lvcreates()[0][6:8], ["-i", "2"])
        self.assertEqual(dev.stripes_used, 2)
        self.assertEqual([formatEvent(e) for e in events], [
            "Could not use 4 stripes for logical volume xenvg/lv1: volume"
            " group xenvg has only 2 allocatable physical volumes; using 2",
            "Created logical volume xenvg/lv1 with 2 stripe(s) instead of"
            " 4"])

    @defer.inlineCallbacks
    def test_fewer_stripes_when_lvm_cannot(self):
        self.runner.answer(["lvcreate", "-L", "64m", "-n", "lv1", "-Wn",
                            "-i", "2"], code=5, stderr=b"  Insufficient"
                           b" suitable allocatable extents\n")
        dev = self.lv(stripes=2)
        yield dev.create(64)
        self.assertEqual([c[6:8] for c in self.lvcreates()],
                         [["-i", "2"], ["-i", "1"]])
        self.assertEqual(dev.stripes_used, 1)

    @defer.inlineCallbacks
    def test_all_attempts_fail(self):
        self.runner.answer(["lvcreate"], code=5, stderr=b"  no way\n")
        err = yield self.assertFailure(self.lv(stripes=2).create(64),
                                       errors.BlockDeviceError)
        self.assertIn("no way", str(err))
        self.assertEqual(len(self.lvcreates()), 2)

    @defer.inlineCallbacks
    def test_not_enough_space(self):
        err = yield self.assertFailure(self.lv(stripes=2).create(1000),
                                       errors.BlockDeviceError)
        self.assertIn("not enough free space in volume group xenvg (1000"
                      " MiB needed, 400 MiB free)", str(err))
        self.assertEqual(self.lvcreates(), [])

    @defer.inlineCallbacks
    def test_one_stripe_lists_no_pvs(self):
        yield self.lv(stripes=1).create(64)
        self.assertNotIn("pvs", [c[0] for c in self.runner.commands])
        self.assertEqual(self.lvcreates(), [
            ["lvcreate", "-L", "64m", "-n", "lv1", "-Wn", "xenvg"]])

    def test_bad_stripes(self):
        for value in (0, "2", True, -1):
            err = self.assertRaises(errors.ParameterError, self.lv,
                                    stripes=value)
            self.assertIn("disk.params/stripes must be a positive integer",
                          str(err))


class RealStripesTests(unittest.TestCase):
    """lvm2 for real: a VG on two loop devices; ``lvs -o stripes`` of the
    LVs made.  Without device-mapper, LVs are metadata only (enough
    here)."""

    timeout = 120

    def setUp(self):
        self.vg, self.devices = make_vg(self, pvs=2, size_mb=64)
        self.ctx = storage.StorageContext(
            runner=process.CommandRunner(reactor))

    def stripes(self, lv):
        out = _run("lvs", "--noheadings", "-o", "stripes",
                   "%s/%s" % (self.vg, lv))
        self.assertEqual(out.returncode, 0, out.stderr)
        return int(out.stdout.decode().strip())

    @defer.inlineCallbacks
    def test_stripes_and_fallback(self):
        for lv, asked, got in (("two", 2, 2), ("three", 3, 2),
                               ("one", 1, 1)):
            dev = storage.block_device(
                {"dev_type": "plain", "logical_id": [self.vg, lv],
                 "params": {"stripes": asked}}, self.ctx)
            yield dev.create(16)
            self.assertEqual(self.stripes(lv), got, lv)
            self.assertEqual(dev.stripes_used, got)


# ---------------------------------------------------------------------------
# drbd: the options the parameters give

def drbd_disk(**params):
    data = disk_dict()
    full = dict(constants.DISK_DT_DEFAULTS["drbd"])
    full.update(params)
    data["params"] = full
    return data


class DrbdOptionTests(unittest.TestCase):

    def setUp(self):
        self.runner = DrbdRunner()
        self.ctx = storage.StorageContext(runner=self.runner,
                                          device_mapper=True)

    def dev(self, **params):
        return storage.block_device(drbd_disk(**params), self.ctx)

    @defer.inlineCallbacks
    def test_defaults(self):
        yield self.dev().assemble()
        cmds = self.runner.drbd_commands()
        self.assertIn(["drbdsetup", "peer-device-options", "resource0", "1",
                       "0", "--resync-rate=61440", "--c-plan-ahead=0"], cmds)
        attach = [c for c in cmds if c[1] == "attach"][0]
        self.assertEqual(attach[2:], ["0", "/dev/xenvg/u1.disk0_data",
                                      "/dev/xenvg/u1.disk0_meta",
                                      "flexible"])
        peer = [c for c in cmds if c[1] == "new-peer"][0]
        self.assertEqual(peer[-1], "--protocol=C")

    @defer.inlineCallbacks
    def test_all_options(self):
        dev = self.dev(**{"disk-barriers": "bdf", "meta-barriers": True,
                          "disk-custom": "--al-extents 1237",
                          "net-custom": "--max-buffers=8000",
                          "protocol": "A", "dynamic-resync": True,
                          "c-plan-ahead": 30, "c-fill-target": 100,
                          "c-delay-target": 5, "c-max-rate": 102400,
                          "c-min-rate": 1024})
        yield dev.assemble()
        cmds = self.runner.drbd_commands()
        self.assertEqual(
            [c for c in cmds if c[1] == "attach"][0][6:],
            ["--md-flushes=no", "--disk-drain=no", "--disk-flushes=no",
             "--disk-barrier=no", "--al-extents=1237"])
        self.assertEqual(
            [c for c in cmds if c[1] == "new-peer"][0][4:],
            ["--_name=node2.example.com", "--max-buffers=8000",
             "--shared-secret=abcdef", "--cram-hmac-alg=sha1",
             "--protocol=A"])
        self.assertEqual(
            [c for c in cmds if c[1] == "peer-device-options"][0][5:],
            ["--c-plan-ahead=30", "--c-fill-target=100",
             "--c-delay-target=5", "--c-max-rate=102400",
             "--c-min-rate=1024"])
        # reconnecting sets the peer's options again
        self.runner.commands = []
        self.runner.status = '[{"name": "resource0", "connections": []}]'
        yield dev.attach_net()
        self.assertEqual([c[1] for c in self.runner.drbd_commands()],
                         ["new-peer", "new-path", "peer-device-options",
                          "connect"])

    @defer.inlineCallbacks
    def test_data_and_meta_stripes(self):
        self.runner.answer(["pvs"], stdout=_pvs(
            ("/dev/loop0", "xenvg", 4000, "a--"),
            ("/dev/loop1", "xenvg", 4000, "a--")))
        cluster = objects.Cluster(diskparams={
            "drbd": {"data-stripes": 2, "meta-stripes": 1}})
        data = objects.annotate_disk_dict(cluster, None, disk_dict())
        yield storage.block_device(data, self.ctx).create(1024)
        creates = [c for c in self.runner.commands if c[0] == "lvcreate"]
        self.assertEqual(creates[0][:9], [
            "lvcreate", "-L", "1024m", "-n", "u1.disk0_data", "-Wn", "-i",
            "2", "xenvg"])
        self.assertEqual(creates[1], [
            "lvcreate", "-L", "128m", "-n", "u1.disk0_meta", "-Wn", "xenvg"])

    def test_bad_values_are_refused_on_the_node(self):
        for params, message in (
                ({"protocol": "Q"}, "disk.params/protocol"),
                ({"disk-barriers": "x"}, "disk.params/disk-barriers"),
                ({"resync-rate": "fast"}, "disk.params/resync-rate"),
                ({"dynamic-resync": True, "c-plan-ahead": 0},
                 "disk.params/c-plan-ahead"),
                ({"disk-custom": "'open"}, "disk.params/disk-custom")):
            err = self.assertRaises(errors.ParameterError, self.dev,
                                    **params)
            self.assertIn(message, str(err))


class DrbdadmOptionTests(unittest.TestCase):
    """DRBD's own tool reads the generated resource, options included, and
    runs the same commands (dry run: no kernel module needed)."""

    def setUp(self):
        self.drbdadm = shutil.which("drbdadm")
        if self.drbdadm is None:
            raise unittest.SkipTest("drbdadm is not installed (apt-get"
                                    " install drbd-utils)")
        self.host = os.uname().nodename

    def check(self, **params):
        p = drbd.params_from_disk(drbd_disk(**params))
        conf = self.mktemp()
        with open(conf, "w") as f:
            f.write(drbd.resource_config(
                p, self.host, "node2.example.com",
                "/dev/xenvg/u1.disk0_data", "/dev/xenvg/u1.disk0_meta"))
        proc = subprocess.run([self.drbdadm, "-c", conf, "-d", "up",
                               "resource0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        theirs = []
        for line in proc.stdout.decode().splitlines():
            words = line.split()
            if words and os.path.basename(words[0]) in ("drbdsetup",
                                                        "drbdmeta"):
                theirs.append([os.path.basename(words[0])] + words[1:])
        ours = drbd.up_commands(p, "/dev/xenvg/u1.disk0_data",
                                "/dev/xenvg/u1.disk0_meta")
        self.assertEqual(ours, theirs)

    def test_fixed_rate(self):
        self.check(**{"resync-rate": 30720, "disk-barriers": "bf",
                      "meta-barriers": True,
                      "disk-custom": "--al-extents 1237 --on-io-error=detach",
                      "net-custom": "--max-buffers=8000 --ko-count 3"})

    def test_dynamic(self):
        self.check(**{"dynamic-resync": True, "c-plan-ahead": 30,
                      "c-max-rate": 102400, "disk-barriers": "d",
                      "protocol": "B"})
