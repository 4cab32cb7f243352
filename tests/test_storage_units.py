"""Storage units: logical units with a fake RPC, the node side on
real LVM physical volumes and volume groups made on loop devices, and the
whole path through real daemons.

Loop-device tests need root, ``losetup`` and the lvm2 tools; they are
skipped with the reason otherwise.  Every loop device, PV and VG a test
makes is removed by name in cleanups, also when the test fails.
"""

import os
import random
import shutil
import subprocess

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti import errors
from ganeti import objects
from ganeti.server import noded
from ganeti.server.noded.procedure import INLINE

from tests.fakes import NodeFailure
from tests.test_cmdlib_instance import InstanceTestCase, NODE1, NODE2
from tests.test_migration import MigrationRpc

LVM_ENV = dict(os.environ, LVM_SUPPRESS_FD_WARNINGS="1")


# ---------------------------------------------------------------------------
# Loop devices with LVM on them

def _run(*argv):
    return subprocess.run(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=LVM_ENV, timeout=60)


def lvm_unavailable_reason():
    if os.geteuid() != 0:
        return "loop devices and LVM need root"
    for tool in ("losetup", "pvcreate", "vgcreate", "vgremove", "pvs"):
        if shutil.which(tool) is None:
            return "%s is not installed" % tool
    if not os.path.exists("/dev/loop-control"):
        return "no loop device support (/dev/loop-control is missing)"
    return None


def make_vg(testcase, pvs=2, size_mb=64):
    """A new VG on ``pvs`` new loop devices: (vg name, [devices])."""
    reason = lvm_unavailable_reason()
    if reason:
        raise unittest.SkipTest(reason)
    vg = "gnttest%06d" % random.randint(0, 999999)
    workdir = testcase.mktemp()
    os.makedirs(workdir)
    devices = []

    def cleanup():
        _run("vgreduce", "--removemissing", "--force", vg)
        _run("vgremove", "-f", vg)
        for dev in devices:
            _run("pvremove", "-ff", "-y", dev)
            _run("losetup", "-d", dev)
    testcase.addCleanup(cleanup)
    for idx in range(pvs):
        image = os.path.join(workdir, "pv%d.img" % idx)
        with open(image, "wb") as f:
            f.truncate(size_mb * 1024 * 1024)
        out = _run("losetup", "-f", "--show", image)
        if out.returncode != 0:
            raise unittest.SkipTest("cannot set up a loop device: %s"
                                    % out.stderr.decode().strip())
        devices.append(out.stdout.decode().strip())
    out = _run("pvcreate", "-q", *devices)
    if out.returncode != 0:
        raise unittest.SkipTest("pvcreate failed: %s"
                                % out.stderr.decode().strip())
    out = _run("vgcreate", "-q", vg, *devices)
    if out.returncode != 0:
        raise unittest.SkipTest("vgcreate failed: %s"
                                % out.stderr.decode().strip())
    return vg, devices


def pv_attr(dev):
    out = _run("pvs", "--noheadings", "-o", "pv_attr", dev)
    return out.stdout.decode().strip()


# ---------------------------------------------------------------------------
# Logical units with a fake RPC

class StorageRpc(MigrationRpc):

    def __init__(self):
        MigrationRpc.__init__(self)
        self.units = {
            NODE1: {"lvm-vg": [["xenvg", 1000, 400, 600, True]],
                    "lvm-pv": [["/dev/sdb", 500, 200, 300, True],
                               ["/dev/sda", 500, 200, 300, False]],
                    "file": [["/srv/ganeti/file-storage", 2000, 1000, 1000,
                              True]]},
            NODE2: {"lvm-vg": [["xenvg", 800, 0, 800, True]],
                    "lvm-pv": [["/dev/sdc", 800, 0, 800, True]]}}
        self.status = {}

    def _storage_list(self, node, su_name, su_args, name, fields):
        all_fields = ["name", "size", "used", "free", "allocatable"]
        rows = []
        for unit in self.units.get(node, {}).get(su_name, []):
            if name is not None and unit[0] != name:
                continue
            values = dict(zip(all_fields, unit))
            rows.append([values[f] for f in fields])
        return rows

    def _storage_modify(self, node, su_name, su_args, name, changes):
        for unit in self.units.get(node, {}).get(su_name, []):
            if unit[0] == name:
                unit[4] = changes["allocatable"]
                return True
        raise NodeFailure("physical volume %s does not exist" % name)

    def _storage_execute(self, node, su_name, su_args, name, op):
        return ["removed 1 missing physical volume(s) from volume group %s"
                % name]

    def _blockdev_status(self, node, disks):
        return [self.status.get((node, d.get("iv_name")),
                                {"status": "ok", "ldisk": 1,
                                 "path": "/dev/x"})
                for d in disks]


class StorageLUTests(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.rpc = StorageRpc()
        self.ctx.rpc = self.rpc

    def query(self, **kw):
        op = {"OP_ID": "OP_NODE_QUERY_STORAGE",
              "output_fields": ["node", "type", "name", "size", "used",
                                "free", "allocatable"]}
        op.update(kw)
        return op

    def test_query_all_nodes_sorted(self):
        rows = self.ok(self.query(storage_type="lvm-pv"))
        self.assertEqual(rows, [
            [NODE1, "lvm-pv", "/dev/sda", 500, 200, 300, False],
            [NODE1, "lvm-pv", "/dev/sdb", 500, 200, 300, True],
            [NODE2, "lvm-pv", "/dev/sdc", 800, 0, 800, True]])
        # the node is always asked for the name (rows are sorted by it)
        self.assertEqual(self.rpc.calls_of("storage_list")[0][2][3],
                         ["name", "size", "used", "free", "allocatable"])

    def test_query_fields_nodes_and_name(self):
        rows = self.ok(self.query(storage_type="lvm-vg", nodes=[NODE2],
                                  output_fields=["free", "node"]))
        self.assertEqual(rows, [[800, NODE2]])
        rows = self.ok(self.query(storage_type="lvm-pv", name="/dev/sdb",
                                  output_fields=["name"]))
        self.assertEqual(rows, [["/dev/sdb"]])

    def test_query_file_uses_the_cluster_directory(self):
        rows = self.ok(self.query(storage_type="file", nodes=[NODE1],
                                  output_fields=["name", "free"]))
        self.assertEqual(rows, [["/srv/ganeti/file-storage", 1000]])
        args = self.rpc.calls_of("storage_list")[0][2]
        self.assertEqual(args[1:3], [[["/srv/ganeti/file-storage"]],
                                     "/srv/ganeti/file-storage"])

    def test_query_default_type_from_templates(self):
        # enabled templates start with "file"
        self.ok(self.query(nodes=[NODE1]))
        self.assertEqual(self.rpc.calls_of("storage_list")[0][2][0], "file")

    def test_query_skips_offline_and_warns_for_failed_nodes(self):
        self.cfg.set_node_params(NODE2, master_candidate=False,
                                 offline=True)
        rows = self.ok(self.query(storage_type="lvm-vg"))
        self.assertEqual([r[0] for r in rows], [NODE1])
        self.assertEqual([c[0] for c in self.rpc.calls], [NODE1])
        self.cfg.set_node_params(NODE2, offline=False)
        self.rpc.fail["storage_list"] = lambda node, args: (
            "vgs failed" if node == NODE2 else None)
        rows = self.ok(self.query(storage_type="lvm-vg"))
        self.assertEqual([r[0] for r in rows], [NODE1])
        self.assertTrue(any("Can't get storage data from node %s" % NODE2
                            in line for line in self.log))

    def test_query_bad_arguments(self):
        err = self.fails(self.query(storage_type="lvm-vg",
                                    output_fields=["name", "colour"]))
        self.assertIn("output_fields", str(err))
        self.assertIn("colour", str(err))
        err = self.fails(self.query(storage_type="diskless"))
        self.assertIn("storage_type", str(err))
        err = self.fails(self.query(storage_type="lvm-vg",
                                    nodes=["nosuchnode"]))
        self.assertIn("nosuchnode", str(err))

    def modify(self, **kw):
        op = {"OP_ID": "OP_NODE_MODIFY_STORAGE", "node_name": NODE1,
              "storage_type": "lvm-pv", "name": "/dev/sdb",
              "changes": {"allocatable": False}}
        op.update(kw)
        return op

    def test_modify_allocatable(self):
        self.ok(self.modify())
        node, _, args = self.rpc.calls_of("storage_modify")[0]
        self.assertEqual((node, args[0], args[2], args[3]),
                         (NODE1, "lvm-pv", "/dev/sdb",
                          {"allocatable": False}))
        self.assertFalse(self.rpc.units[NODE1]["lvm-pv"][0][4])

    def test_modify_refusals(self):
        err = self.fails(self.modify(storage_type="lvm-vg", name="xenvg"))
        self.assertIn("can not be modified", str(err))
        err = self.fails(self.modify(changes={"size": 5}))
        self.assertIn("size", str(err))
        self.assertIn("can not be modified", str(err))
        err = self.fails(self.modify(changes={"allocatable": "no"}))
        self.assertIn("changes/allocatable", str(err))
        err = self.fails(self.modify(changes={}))
        self.assertIn("nothing to change", str(err))
        err = self.fails(self.modify(name=None))
        self.assertIn("name", str(err))
        self.cfg.set_node_params(NODE1, master_candidate=False,
                                 offline=True)
        err = self.fails(self.modify())
        self.assertIn("offline", str(err))
        self.assertEqual(self.rpc.calls_of("storage_modify"), [])

    def test_modify_node_error_names_the_node(self):
        err = self.fails(self.modify(name="/dev/nosuch"), errors.OpExecError)
        self.assertIn(NODE1, str(err))
        self.assertIn("/dev/nosuch does not exist", str(err))

    def repair(self, **kw):
        op = {"OP_ID": "OP_REPAIR_NODE_STORAGE", "node_name": NODE1,
              "storage_type": "lvm-vg", "name": "xenvg"}
        op.update(kw)
        return op

    def test_repair_vg(self):
        self.ok(self.repair())
        node, _, args = self.rpc.calls_of("storage_execute")[0]
        self.assertEqual((node, args[0], args[2], args[3]),
                         (NODE1, "lvm-vg", "xenvg", "fix-consistency"))
        self.assertIn("%s: removed 1 missing physical volume(s) from volume"
                      " group xenvg" % NODE1, self.log)

    def test_repair_refusals(self):
        err = self.fails(self.repair(storage_type="lvm-pv", name="/dev/sda"))
        self.assertIn("can not be repaired", str(err))

    def drbd_instance(self):
        n1, n2 = (self.cfg.get_node(n).uuid for n in (NODE1, NODE2))
        inst = objects.Instance(
            name="inst1.example.com", primary_node=n1, secondary_nodes=[n2],
            os="busybox+default", hypervisor="fake",
            beparams={"maxmem": 128, "minmem": 128})
        disk = objects.Disk(
            dev_type="drbd", size=1024, iv_name="disk/0", mode="rw",
            logical_id=[n1, n2, 11000, 0, 0, "secret"],
            children=[objects.Disk(dev_type="plain", size=1024,
                                   logical_id=["xenvg", "d.data"]),
                      objects.Disk(dev_type="plain", size=128,
                                   logical_id=["xenvg", "d.meta"])])
        self.cfg.add_instance(inst, [disk])
        self.glm = __import__("ganeti.mcpu").mcpu.make_lock_manager(
            self.cfg, self.clock)
        self.ctx.glm = self.glm
        return inst

    def test_repair_refused_while_the_other_copy_is_bad(self):
        self.drbd_instance()
        self.rpc.status[(NODE2, "disk/0")] = {
            "status": "degraded", "ldisk": 4, "details": "Outdated"}
        err = self.fails(self.repair())
        self.assertIn("Instance 'inst1.example.com' has faulty disks on node"
                      " '%s'" % NODE2, str(err))
        self.assertEqual(self.rpc.calls_of("storage_execute"), [])
        # the admin knows better
        self.ok(self.repair(ignore_consistency=True))
        self.assertEqual(len(self.rpc.calls_of("storage_execute")), 1)
        # the other copy is fine: repair goes ahead
        del self.rpc.status[(NODE2, "disk/0")]
        self.ok(self.repair())

    def test_instance_disk_status(self):
        from ganeti.cmdlib.storage import instance_disk_status
        inst = self.drbd_instance()

        class LU(object):
            ctx = self.ctx
            cfg = self.cfg
        lu = LU()
        status = self.successResultOf(defer.ensureDeferred(
            instance_disk_status(lu, inst)))
        self.assertEqual([(s["node"], s["status"]) for s in status],
                         [(NODE1, "ok"), (NODE2, "ok")])
        # the node was sent its own side of the mirror
        args = self.rpc.calls_of("blockdev_status")[1][2][0][0]
        self.assertEqual(args["dynamic_params"]["local_node_id"], 1)
        self.rpc.status[(NODE1, "disk/0")] = None
        self.rpc.status[(NODE2, "disk/0")] = {"status": "degraded",
                                              "sync_percent": 42.5}
        status = self.successResultOf(defer.ensureDeferred(
            instance_disk_status(lu, inst)))
        self.assertEqual([(s["status"], s["sync_percent"]) for s in status],
                         [("missing", None), ("degraded", 42.5)])
        self.rpc.fail["blockdev_status"] = "connection refused"
        status = self.successResultOf(defer.ensureDeferred(
            instance_disk_status(lu, inst)))
        self.assertEqual([s["status"] for s in status],
                         ["missing", "missing"])
        self.assertIn("connection refused", status[0]["details"])


# ---------------------------------------------------------------------------
# The node side on real LVM

class NodeLvmTests(unittest.TestCase):

    timeout = 120

    def setUp(self):
        self.vg, self.devices = make_vg(self)
        root = self.mktemp()
        os.makedirs(root)
        self.fsd = os.path.join(root, "file-storage")
        self.procs = noded.make_procedures(reactor, root,
                                           file_storage_dirs=[self.fsd],
                                           run_blocking=INLINE)

    def call(self, name, *args):
        return self.procs.call(name, list(args))

    @defer.inlineCallbacks
    def test_list_units(self):
        rows = yield self.call("storage_list", "lvm-vg", [], self.vg,
                               ["name", "size", "free", "allocatable"])
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0][0], self.vg)
        self.assertGreater(rows[0][1], 100)
        self.assertEqual(rows[0][1], rows[0][2])
        rows = yield self.call("storage_list", "lvm-pv", [], None,
                               ["name", "vg", "allocatable"])
        mine = sorted(r for r in rows if r[1] == self.vg)
        self.assertEqual(mine, sorted([d, self.vg, True]
                                      for d in self.devices))

    @defer.inlineCallbacks
    def test_pv_allocatable(self):
        dev = self.devices[0]
        yield self.call("storage_modify", "lvm-pv", [], dev,
                        {"allocatable": False})
        self.assertTrue(pv_attr(dev).startswith("u"), pv_attr(dev))
        rows = yield self.call("storage_list", "lvm-pv", [], dev,
                               ["name", "allocatable"])
        self.assertEqual(rows, [[dev, False]])
        yield self.call("storage_modify", "lvm-pv", [], dev,
                        {"allocatable": True})
        self.assertTrue(pv_attr(dev).startswith("a"), pv_attr(dev))
        err = yield self.assertFailure(
            self.call("storage_modify", "lvm-pv", [], dev, {"size": 1}),
            errors.ParameterError)
        self.assertEqual(err.args[0], "changes")
        err = yield self.assertFailure(
            self.call("storage_modify", "lvm-vg", [], self.vg,
                      {"allocatable": False}), errors.ParameterError)

    @defer.inlineCallbacks
    def test_vg_fix_consistency(self):
        msgs = yield self.call("storage_execute", "lvm-vg", [], self.vg,
                               "fix-consistency")
        self.assertIn("consistent, nothing to do", msgs[0])
        # a disk dies: its PV goes missing from the VG
        gone = self.devices[1]
        self.assertEqual(_run("losetup", "-d", gone).returncode, 0)
        out = _run("vgs", "--noheadings", "-o", "vg_missing_pv_count",
                   self.vg)
        self.assertEqual(out.stdout.decode().strip(), "1")
        msgs = yield self.call("storage_execute", "lvm-vg", [], self.vg,
                               "fix-consistency")
        self.assertEqual(msgs, ["removed 1 missing physical volume(s) from"
                                " volume group %s" % self.vg])
        out = _run("vgs", "--noheadings", "-o", "pv_count,"
                   "vg_missing_pv_count", self.vg)
        self.assertEqual(out.stdout.decode().split(), ["1", "0"])
        err = yield self.assertFailure(
            self.call("storage_execute", "lvm-vg", [], self.vg, "explode"),
            errors.ParameterError)
        self.assertEqual(err.args[0], "op")

    @defer.inlineCallbacks
    def test_missing_vg(self):
        yield self.assertFailure(
            self.call("storage_execute", "lvm-vg", [], "nosuchvg0",
                      "fix-consistency"), errors.StorageError)


class NodeFileStorageTests(unittest.TestCase):

    def setUp(self):
        root = self.mktemp()
        os.makedirs(root)
        self.fsd = os.path.join(root, "file-storage")
        self.procs = noded.make_procedures(reactor, root,
                                           file_storage_dirs=[self.fsd],
                                           run_blocking=INLINE)

    @defer.inlineCallbacks
    def test_missing_directory_is_recreated(self):
        rows = yield self.procs.call("storage_list", [
            "file", [[self.fsd]], self.fsd, ["name", "allocatable"]])
        self.assertEqual(rows, [[self.fsd, False]])  # missing: unusable
        msgs = yield self.procs.call("storage_execute", [
            "file", [[self.fsd]], self.fsd, "fix-consistency"])
        self.assertEqual(msgs, ["created the missing directory %s"
                                % self.fsd])
        self.assertTrue(os.path.isdir(self.fsd))
        rows = yield self.procs.call("storage_list", [
            "file", [[self.fsd]], self.fsd, ["name", "allocatable"]])
        self.assertEqual(rows, [[self.fsd, True]])
        msgs = yield self.procs.call("storage_execute", [
            "file", [[self.fsd]], self.fsd, "fix-consistency"])
        self.assertIn("nothing to do", msgs[0])
        # only the node's own storage directories
        err = yield self.assertFailure(self.procs.call("storage_execute", [
            "file", [], "/etc", "fix-consistency"]), errors.ParameterError)
        self.assertIn("not a file storage directory", str(err))
