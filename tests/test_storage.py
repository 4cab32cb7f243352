"""Node-side storage: file disks for real, LVM against recorded outputs and,
where this machine allows it, against real lvm2 on a loop device."""

import json
import os
import shutil
import subprocess

from twisted.internet import defer, reactor
from twisted.trial import unittest
from zope.interface.verify import verifyObject

from ganeti import errors
from ganeti import storage
from ganeti.backend import process

from tests.fakes import FakeRunner

MiB = 1024 * 1024


def file_disk(path, fmt=None, dev_type="file"):
    disk = {"dev_type": dev_type, "logical_id": ["loop", path], "size": 0,
            "mode": "rw", "uuid": "d1"}
    if fmt:
        disk["params"] = {"format": fmt}
    return disk


class FileDiskTests(unittest.TestCase):

    def setUp(self):
        self.base = os.path.abspath(self.mktemp())
        self.store = os.path.join(self.base, "file-storage")
        os.makedirs(self.store)
        self.ctx = storage.StorageContext(
            runner=process.CommandRunner(reactor),
            file_storage_dirs=lambda: [self.store])

    def dev(self, rel="inst1/disk0", **kw):
        return storage.block_device(
            file_disk(os.path.join(self.store, rel), **kw), self.ctx)

    @defer.inlineCallbacks
    def test_raw_life_cycle(self):
        dev = self.dev()
        self.assertTrue(verifyObject(storage.IBlockDevice, dev))
        path = yield dev.create(64)
        self.assertEqual(path, os.path.join(self.store, "inst1", "disk0"))
        self.assertEqual(os.stat(path).st_size, 64 * MiB)
        # sparse: no data blocks were written
        self.assertLess(os.stat(path).st_blocks * 512, MiB)
        self.assertEqual((yield dev.dimensions()), (64 * MiB, None))
        self.assertEqual((yield dev.assemble()), path)
        yield dev.grow(16, dryrun=True)
        self.assertEqual(os.stat(path).st_size, 64 * MiB)
        yield dev.grow(16)
        self.assertEqual((yield dev.dimensions()), (80 * MiB, None))
        yield dev.shutdown()
        yield dev.remove()
        self.assertFalse(os.path.exists(path))
        # the instance directory went with its last disk, the storage not
        self.assertFalse(os.path.exists(os.path.dirname(path)))
        self.assertTrue(os.path.isdir(self.store))
        yield dev.remove()   # removing again is fine
        self.assertIsNone((yield dev.dimensions()))

    @defer.inlineCallbacks
    def test_refusals(self):
        dev = self.dev()
        yield dev.create(1)
        yield self.assertFailure(dev.create(1), errors.BlockDeviceError)
        missing = self.dev("inst2/disk0")
        err = yield self.assertFailure(missing.assemble(),
                                       errors.BlockDeviceError)
        self.assertIn("does not exist", str(err))
        yield self.assertFailure(missing.grow(1), errors.BlockDeviceError)
        yield self.assertFailure(dev.grow(0), errors.ParameterError)
        yield self.assertFailure(dev.grow(-5), errors.ParameterError)
        err = yield self.assertFailure(self.dev("x").create(2.5),
                                       errors.ParameterError)
        self.assertEqual(err.args[0], "size")

    def test_paths_outside_storage_dirs_are_refused(self):
        outside = os.path.join(self.base, "elsewhere")
        os.makedirs(outside)
        os.symlink(outside, os.path.join(self.store, "link"))
        for path in ["/etc/passwd",
                     os.path.join(outside, "disk0"),
                     os.path.join(self.store, "..", "elsewhere", "disk0"),
                     os.path.join(self.store, "link", "disk0"),  # symlink out
                     "relative/disk0",
                     self.store,          # the directory itself
                     self.store + "/"]:
            err = self.assertRaises(errors.ParameterError,
                                    storage.block_device, file_disk(path),
                                    self.ctx)
            self.assertEqual(err.args[0], "disk.logical_id", path)
        self.assertFalse(os.path.exists(os.path.join(outside, "disk0")))

    def test_bad_disk_dicts(self):
        cases = [
            ("not a dict", "disk"),
            ({}, "disk.dev_type"),
            ({"dev_type": "rbd"}, "disk.dev_type"),
            ({"dev_type": "file", "logical_id": "x"}, "disk.logical_id"),
            ({"dev_type": "file", "logical_id": ["nfs", "/a"]},
             "disk.logical_id"),
            (file_disk(os.path.join(self.store, "a"), fmt="vmdk"),
             "disk.params.format"),
            ({"dev_type": "plain", "logical_id": ["vg", "-bad"]},
             "disk.logical_id"),
        ]
        for disk, field in cases:
            err = self.assertRaises(errors.ParameterError,
                                    storage.block_device, disk, self.ctx)
            self.assertEqual(err.args[0], field, disk)

    @defer.inlineCallbacks
    def test_qcow2(self):
        if shutil.which("qemu-img") is None:
            raise unittest.SkipTest("qemu-img is not installed")
        dev = self.dev(fmt="qcow2")
        self.assertEqual(dev.format, "qcow2")
        path = yield dev.create(100)
        with open(path, "rb") as f:
            self.assertEqual(f.read(4), b"QFI\xfb")
        self.assertEqual((yield dev.dimensions()), (100 * MiB, None))
        yield dev.grow(28)
        self.assertEqual((yield dev.dimensions()), (128 * MiB, None))
        yield dev.remove()
        self.assertFalse(os.path.exists(path))

    @defer.inlineCallbacks
    def test_diskless(self):
        dev = storage.block_device({"dev_type": "diskless"}, self.ctx)
        self.assertTrue(verifyObject(storage.IBlockDevice, dev))
        self.assertIsNone((yield dev.create(10)))
        self.assertIsNone((yield dev.assemble()))
        self.assertEqual((yield dev.dimensions()), (0, None))

    @defer.inlineCallbacks
    def test_file_storage_units(self):
        kind = storage.storage_unit_kind("file", self.ctx)
        self.assertTrue(verifyObject(storage.IStorageUnitKind, kind))
        units = yield kind.list_units()
        self.assertEqual([u.name for u in units], [self.store])
        st = os.statvfs(self.store)
        self.assertEqual(units[0].size, st.f_blocks * st.f_frsize // MiB)
        self.assertEqual(units[0].used, units[0].size - units[0].free)
        space = yield kind.space_info(self.store)
        self.assertEqual(space["type"], "file")
        self.assertGreater(space["storage_size"], 0)
        yield self.assertFailure(kind.space_info("/etc"),
                                 errors.ParameterError)
        self.assertRaises(errors.ParameterError, storage.storage_unit_kind,
                          "tape", self.ctx)

    @defer.inlineCallbacks
    def test_file_space_counts_what_sparse_images_were_promised(self):
        kind = storage.storage_unit_kind("file", self.ctx)
        before = (yield kind.space_info(self.store))["storage_free"]
        inst_dir = os.path.join(self.store, "inst1")
        os.makedirs(inst_dir)
        with open(os.path.join(inst_dir, "disk0"), "wb") as f:
            f.truncate(1024 * MiB)          # sparse: nothing written yet
        after = (yield kind.space_info(self.store))["storage_free"]
        # (other writers on this filesystem may move it a little)
        self.assertAlmostEqual(before - after, 1024, delta=32)
        (unit,) = yield kind.list_units()
        self.assertAlmostEqual(unit.free - after, 1024, delta=32)
        # a directory not made yet: the filesystem it will be made on
        shutil.rmtree(self.store)
        space = yield kind.space_info(self.store)
        st = os.statvfs(os.path.dirname(self.store))
        self.assertEqual(space["storage_size"],
                         st.f_blocks * st.f_frsize // MiB)
        self.assertGreater(space["storage_free"], 0)


# ---------------------------------------------------------------------------
# LVM against recorded outputs

def _report(kind, rows):
    return json.dumps({"report": [{kind: rows}]}, indent=2).encode()


LV_MISSING = b'  Failed to find logical volume "xenvg/lv1"\n'
LVS_ROW = _report("lv", [{"lv_name": "lv1", "vg_name": "xenvg",
                          "lv_size": "134217728", "lv_attr": "-wi-a-----"}])


class RecordedLvmTests(unittest.TestCase):

    def ctx(self, dm):
        self.runner = FakeRunner()
        return storage.StorageContext(runner=self.runner, device_mapper=dm)

    def lv(self, dm=True):
        return storage.block_device(
            {"dev_type": "plain", "logical_id": ["xenvg", "lv1"]},
            self.ctx(dm))

    @defer.inlineCallbacks
    def test_create_with_device_mapper(self):
        dev = self.lv()
        self.assertEqual(dev.path, "/dev/xenvg/lv1")
        self.runner.answer(["lvs"], stderr=LV_MISSING, code=5)
        self.assertEqual((yield dev.create(128)), "/dev/xenvg/lv1")
        self.assertEqual(self.runner.commands[-1],
                         ["lvcreate", "-L", "128m", "-n", "lv1", "-Wn",
                          "xenvg"])

    @defer.inlineCallbacks
    def test_create_metadata_only_without_device_mapper(self):
        dev = self.lv(dm=False)
        self.runner.answer(["lvs"], stderr=LV_MISSING, code=5)
        yield dev.create(64)
        self.assertEqual(self.runner.commands[-1],
                         ["lvcreate", "--config", "global/activation=0",
                          "-L", "64m", "-n", "lv1", "-Wn", "-an", "-Zn",
                          "xenvg"])
        err = yield self.assertFailure(dev.assemble(), errors.BlockDeviceError)
        self.assertIn("device-mapper", str(err))

    @defer.inlineCallbacks
    def test_create_existing_refused(self):
        dev = self.lv()
        self.runner.answer(["lvs"], stdout=LVS_ROW)
        yield self.assertFailure(dev.create(64), errors.BlockDeviceError)
        self.assertNotIn("lvcreate", [c[0] for c in self.runner.commands])

    @defer.inlineCallbacks
    def test_lvcreate_failure_is_reported(self):
        dev = self.lv()
        self.runner.answer(["lvs"], stderr=LV_MISSING, code=5)
        self.runner.answer(["lvcreate"], code=5, stderr=(
            b'  Volume group "xenvg" has insufficient free space (10 extents)'
            b': 32 required.\n'))
        err = yield self.assertFailure(dev.create(128),
                                       errors.BlockDeviceError)
        self.assertIn("insufficient free space", str(err))

    @defer.inlineCallbacks
    def test_dimensions_grow_remove(self):
        dev = self.lv()
        self.runner.answer(["lvs"], stdout=LVS_ROW)
        self.assertEqual((yield dev.dimensions()), (134217728, None))
        self.assertIn("xenvg/lv1", self.runner.commands[-1])
        self.assertIn("json", self.runner.commands[-1])
        yield dev.grow(32)
        self.assertEqual(self.runner.commands[-1],
                         ["lvextend", "-L", "+32m", "xenvg/lv1"])
        yield dev.grow(32, dryrun=True)
        self.assertEqual(self.runner.commands[-1],
                         ["lvextend", "-L", "+32m", "--test", "xenvg/lv1"])
        yield dev.remove()
        self.assertEqual(self.runner.commands[-1],
                         ["lvremove", "-f", "xenvg/lv1"])

    @defer.inlineCallbacks
    def test_remove_missing_is_fine(self):
        dev = self.lv()
        self.runner.answer(["lvs"], stderr=LV_MISSING, code=5)
        yield dev.remove()
        self.assertNotIn("lvremove", [c[0] for c in self.runner.commands])
        self.assertIsNone((yield dev.dimensions()))

    @defer.inlineCallbacks
    def test_vg_and_pv_units(self):
        ctx = self.ctx(True)
        self.runner.answer(["vgs"], stdout=_report("vg", [
            {"vg_name": "xenvg", "vg_size": "196.00", "vg_free": "184.00"}]))
        self.runner.answer(["pvs"], stdout=_report("pv", [
            {"pv_name": "/dev/loop0", "vg_name": "xenvg", "pv_size": "196.00",
             "pv_free": "184.00", "pv_used": "12.00", "pv_attr": "a--"},
            {"pv_name": "/dev/loop1", "vg_name": "xenvg", "pv_size": "100.00",
             "pv_free": "100.00", "pv_used": "0", "pv_attr": "---"},
            {"pv_name": "/dev/loop2", "vg_name": "", "pv_size": "50.00",
             "pv_free": "50.00", "pv_used": "0", "pv_attr": "---"}]))
        vgs = storage.storage_unit_kind("lvm-vg", ctx)
        units = yield vgs.list_units()
        self.assertEqual(units, [storage.StorageUnitInfo(
            type="lvm-vg", name="xenvg", size=196, used=12, free=184)])
        self.assertEqual((yield vgs.space_info("xenvg")),
                         {"type": "lvm-vg", "name": "xenvg",
                          "storage_size": 196, "storage_free": 184})
        pvs = storage.storage_unit_kind("lvm-pv", ctx)
        units = yield pvs.list_units()
        self.assertEqual([(u.name, u.allocatable, u.vg) for u in units],
                         [("/dev/loop0", True, "xenvg"),
                          ("/dev/loop1", False, "xenvg"),
                          ("/dev/loop2", False, None)])
        # only allocatable PVs count for the VG's usable space
        self.assertEqual((yield pvs.space_info("xenvg"))["storage_free"], 184)

    @defer.inlineCallbacks
    def test_unparsable_report(self):
        ctx = self.ctx(True)
        self.runner.answer(["vgs"], stdout=b"garbage")
        err = yield self.assertFailure(
            storage.storage_unit_kind("lvm-vg", ctx).list_units(),
            errors.StorageError)
        self.assertIn("cannot parse", str(err))


# ---------------------------------------------------------------------------
# LVM for real, on a loop device

def _sh(*argv):
    return subprocess.run(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, LVM_SUPPRESS_FD_WARNINGS="1"))


def real_lvm_unavailable():
    if os.geteuid() != 0:
        return "LVM on loop devices needs root"
    for tool in ("losetup", "pvcreate", "vgcreate", "lvcreate"):
        if shutil.which(tool) is None:
            return "%s is not installed" % tool
    return None


class RealLvmTests(unittest.TestCase):
    """lvm2 for real on a 200 MiB loop device.  Without device-mapper
    (see /proc/misc) LVs exist as metadata only: activation is skipped."""

    timeout = 120

    def setUp(self):
        reason = real_lvm_unavailable()
        if reason:
            raise unittest.SkipTest(reason)
        self.vg = "gnttest%d" % os.getpid()
        image = os.path.abspath(self.mktemp())
        with open(image, "wb") as f:
            f.truncate(200 * MiB)
        self.addCleanup(os.unlink, image)
        result = _sh("losetup", "-f", "--show", image)
        if result.returncode != 0:
            raise unittest.SkipTest("cannot set up a loop device: %s"
                                    % result.stderr.strip())
        self.loop = result.stdout.strip()
        self.addCleanup(_sh, "losetup", "-d", self.loop)
        self.addCleanup(_sh, "pvremove", "-q", "-f", self.loop)
        self.addCleanup(_sh, "vgremove", "-q", "-f", self.vg)
        for argv in (["pvcreate", "-q", self.loop],
                     ["vgcreate", "-q", self.vg, self.loop]):
            result = _sh(*argv)
            if result.returncode != 0:
                raise unittest.SkipTest("%s failed: %s"
                                        % (argv[0], result.stderr.strip()))
        self.ctx = storage.StorageContext(
            runner=process.CommandRunner(reactor))

    @defer.inlineCallbacks
    def test_plain_disk_life_cycle(self):
        dev = storage.block_device(
            {"dev_type": "plain", "logical_id": [self.vg, "disk0"]}, self.ctx)
        self.assertEqual((yield dev.create(12)),
                         "/dev/%s/disk0" % self.vg)
        self.assertEqual((yield dev.dimensions()), (12 * MiB, None))
        yield self.assertFailure(dev.create(12), errors.BlockDeviceError)
        yield dev.grow(8)
        self.assertEqual((yield dev.dimensions()), (20 * MiB, None))
        if self.ctx.has_device_mapper():
            self.assertEqual((yield dev.assemble()), dev.path)
        else:
            yield self.assertFailure(dev.assemble(), errors.BlockDeviceError)
        vg = (yield storage.storage_unit_kind("lvm-vg", self.ctx)
              .list_units(self.vg))[0]
        self.assertEqual((vg.name, vg.size, vg.used), (self.vg, 196, 20))
        pvs = yield storage.storage_unit_kind("lvm-pv", self.ctx).list_units(
            self.loop)
        self.assertEqual([(p.name, p.vg, p.allocatable) for p in pvs],
                         [(self.loop, self.vg, True)])
        yield dev.remove()
        self.assertIsNone((yield dev.dimensions()))
        yield dev.remove()

    @defer.inlineCallbacks
    def test_missing_vg(self):
        kind = storage.storage_unit_kind("lvm-vg", self.ctx)
        err = yield self.assertFailure(kind.space_info(self.vg + "x"),
                                       errors.StorageError)
        self.assertIn("does not exist", str(err))


class ProcessTests(unittest.TestCase):
    """The command runner the storage and OS code use."""

    timeout = 30

    @defer.inlineCallbacks
    def test_output_and_exit_code(self):
        result = yield process.run_command(
            reactor, ["sh", "-c", "echo out; echo err >&2; exit 3"])
        self.assertEqual((result.exit_code, result.stdout, result.stderr),
                         (3, b"out\n", b"err\n"))
        self.assertTrue(result.failed)
        self.assertIn("exit code 3", result.describe())
        self.assertIn("err", result.describe())

    @defer.inlineCallbacks
    def test_timeout_kills_the_whole_group(self):
        marker = os.path.abspath(self.mktemp())
        # the child sleeps in the background: it must die too
        result = yield process.run_command(
            reactor, ["sh", "-c", "sleep 30 & echo $! > %s; wait" % marker],
            timeout=0.5)
        self.assertTrue(result.timed_out)
        self.assertIn("timed out", result.describe())
        with open(marker) as f:
            child = int(f.read())
        from ganeti.hypervisor.state import process_alive
        self.assertFalse(process_alive(child))

    @defer.inlineCallbacks
    def test_missing_program(self):
        result = yield process.run_command(reactor, ["/nonexistent/prog"])
        self.assertTrue(result.failed)
