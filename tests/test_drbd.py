"""The DRBD driver, tested without DRBD (no kernel module here).

* status: recorded ``drbdsetup status --json`` outputs (tests/fixtures/
  drbd, see its README) parsed and mapped to the disk status (ok,
  degraded, missing; sync percent, ETA, Ganeti's ldisk values);
* commands: what the driver runs (through a fake command runner) for
  create, assemble, shutdown, network changes and replacing the storage
  under a mirror;
* configuration: the resource section it generates is accepted by DRBD's
  own ``drbdadm dump``, and ``drbdadm --dry-run up`` of it prints the same
  drbdsetup commands our driver runs (skipped without drbd-utils).
"""

import os
import shutil
import subprocess

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import errors
from ganeti import storage
from ganeti.storage import drbd

from tests.fakes import FakeRunner

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "fixtures", "drbd")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


class DrbdRunner(FakeRunner):
    """Answers ``drbdsetup status`` from ``status`` and ``lvs`` from the
    logical volumes ``lvcreate``/``lvremove`` left in ``lvs``."""

    def __init__(self):
        FakeRunner.__init__(self)
        self.status = None          # fixture text, or None: no resource
        self.lvs = set()
        self.handle(["drbdsetup", "status"], self._drbdsetup_status)
        self.handle(["lvs"], self._lvs)
        self.handle(["lvcreate"], self._lvcreate)
        self.handle(["lvremove"], self._lvremove)

    def _drbdsetup_status(self, argv):
        if self.status is None:
            return 10, b"", b"resource0: No such resource\n"
        return 0, self.status.encode(), b""

    def _lvs(self, argv):
        name = argv[-1]
        if name in self.lvs:
            out = ('{"report":[{"lv":[{"lv_name":"%s","vg_name":"%s",'
                   '"lv_size":"1073741824","lv_attr":"-wi-a-----"}]}]}'
                   % (name.split("/")[1], name.split("/")[0]))
            return 0, out.encode(), b""
        return 5, b"", b"  Failed to find logical volume \"%s\"\n" % \
            name.encode()

    def _lvcreate(self, argv):
        name = argv[argv.index("-n") + 1]
        self.lvs.add("%s/%s" % (argv[-1], name))
        return 0, b"", b""

    def _lvremove(self, argv):
        self.lvs.discard(argv[-1])
        return 0, b"", b""

    def drbd_commands(self):
        return [c for c in self.commands
                if c[0] in ("drbdsetup", "drbdmeta") and
                c[1] != "status"]


def disk_dict(primary=True, node_id=0, secret="abcdef"):
    return {
        "dev_type": "drbd", "iv_name": "disk/0", "size": 1024,
        "logical_id": ["n1-uuid", "n2-uuid", 11000, 0, 1, secret],
        "children": [
            {"dev_type": "plain", "size": 1024,
             "logical_id": ["xenvg", "u1.disk0_data"]},
            {"dev_type": "plain", "size": 128,
             "logical_id": ["xenvg", "u1.disk0_meta"]}],
        "dynamic_params": {
            "local_ip": "192.0.2.1", "remote_ip": "192.0.2.2",
            "local_minor": 0, "remote_minor": 1, "local_node_id": node_id,
            "local_name": "node1.example.com",
            "remote_name": "node2.example.com", "primary": primary}}


class StatusTests(unittest.TestCase):

    def status(self, name):
        (res,) = drbd.parse_status(fixture(name))
        return res, drbd.disk_status(res, "/dev/drbd0")

    def test_connected_uptodate(self):
        res, st = self.status("connected_uptodate.json")
        self.assertEqual((res.name, res.role, res.node_id),
                         ("resource0", "Primary", 0))
        self.assertEqual(res.devices[0].size, 1048576)
        self.assertEqual(res.connections[0].peer_devices[0].percent_in_sync,
                         100.0)
        self.assertEqual((st["status"], st["degraded"], st["ldisk"],
                          st["sync_percent"], st["details"]),
                         ("ok", False, storage.LDS_OKAY, None, None))

    def test_sync_source(self):
        _, st = self.status("sync_source.json")
        self.assertEqual((st["status"], st["degraded"], st["ldisk"]),
                         ("degraded", True, storage.LDS_OKAY))
        self.assertEqual((st["sync_percent"], st["estimated_time"]),
                         (42.17, 9))
        self.assertIn("SyncSource", st["details"])

    def test_sync_target(self):
        _, st = self.status("sync_target.json")
        self.assertEqual((st["status"], st["ldisk"], st["sync_percent"]),
                         ("degraded", storage.LDS_SYNC, 42.17))
        self.assertIn("local disk is Inconsistent", st["details"])

    def test_disconnected(self):
        _, st = self.status("disconnected.json")
        self.assertEqual((st["status"], st["ldisk"], st["sync_percent"]),
                         ("degraded", storage.LDS_OKAY, None))
        self.assertIn("node2.example.com is Connecting", st["details"])

    def test_standalone_outdated(self):
        _, st = self.status("standalone.json")
        self.assertEqual((st["status"], st["ldisk"]),
                         ("degraded", storage.LDS_FAULTY))
        self.assertIn("Outdated", st["details"])
        self.assertIn("StandAlone", st["details"])

    def test_peer_diskless(self):
        _, st = self.status("peer_diskless.json")
        self.assertEqual((st["status"], st["ldisk"]),
                         ("degraded", storage.LDS_OKAY))
        self.assertIn("disk is Diskless", st["details"])

    def test_local_diskless_is_missing(self):
        res, st = self.status("local_diskless.json")
        self.assertIsNone(res.devices[0].size)
        self.assertEqual((st["status"], st["ldisk"]),
                         ("missing", storage.LDS_FAULTY))

    def test_garbage(self):
        self.assertRaises(errors.BlockDeviceError, drbd.parse_status,
                          "drbdsetup: not json")
        self.assertRaises(errors.BlockDeviceError, drbd.parse_status,
                          '[{"devices": []}]')


class DeviceTests(unittest.TestCase):

    def setUp(self):
        self.runner = DrbdRunner()
        self.ctx = storage.StorageContext(runner=self.runner,
                                          device_mapper=True)

    def dev(self, **kw):
        return storage.block_device(disk_dict(**kw), self.ctx)

    def test_bad_dicts(self):
        for disk, field in (
                (dict(disk_dict(), logical_id=[1, 2]), "disk.logical_id"),
                (dict(disk_dict(), dynamic_params=None),
                 "disk.dynamic_params"),
                (dict(disk_dict(), children=[]), "disk.children")):
            err = self.assertRaises(errors.ParameterError,
                                    storage.block_device, disk, self.ctx)
            self.assertEqual(err.args[0], field)

    @defer.inlineCallbacks
    def test_create(self):
        dev = self.dev()
        self.assertEqual(dev.path, "/dev/drbd0")
        path = yield dev.create(1024)
        self.assertEqual(path, "/dev/drbd0")
        self.assertEqual(self.runner.lvs, {"xenvg/u1.disk0_data",
                                           "xenvg/u1.disk0_meta"})
        self.assertEqual(self.runner.drbd_commands(), [
            ["drbdmeta", "--force", "0", "v09", "/dev/xenvg/u1.disk0_meta",
             "flex-external", "create-md", "1"]])

    @defer.inlineCallbacks
    def test_create_failure_removes_the_volumes(self):
        self.runner.answer(["drbdmeta", "--force"], code=1,
                           stderr=b"no such device")
        yield self.assertFailure(self.dev().create(1024),
                                 errors.BlockDeviceError)
        self.assertEqual(self.runner.lvs, set())

    @defer.inlineCallbacks
    def test_assemble_brings_it_up(self):
        dev = self.dev(primary=False)
        path = yield dev.assemble()
        self.assertEqual(path, "/dev/drbd0")
        self.assertEqual(self.runner.drbd_commands(), [
            ["drbdsetup", "new-resource", "resource0", "0"],
            ["drbdsetup", "new-minor", "resource0", "0", "0"],
            ["drbdsetup", "new-peer", "resource0", "1",
             "--_name=node2.example.com", "--shared-secret=abcdef",
             "--cram-hmac-alg=sha1", "--protocol=C"],
            ["drbdsetup", "new-path", "resource0", "1",
             "ipv4:192.0.2.1:11000", "ipv4:192.0.2.2:11000"],
            ["drbdmeta", "0", "v09", "/dev/xenvg/u1.disk0_meta",
             "flex-external", "apply-al"],
            ["drbdsetup", "attach", "0", "/dev/xenvg/u1.disk0_data",
             "/dev/xenvg/u1.disk0_meta", "flexible"],
            ["drbdsetup", "connect", "resource0", "1"]])

    @defer.inlineCallbacks
    def test_assemble_primary(self):
        # already up and in sync: only the role changes
        self.runner.status = fixture("connected_uptodate.json").replace(
            '"role": "Primary"', '"role": "Secondary"')
        yield self.dev(primary=True).assemble()
        self.assertEqual(self.runner.drbd_commands(),
                         [["drbdsetup", "primary", "resource0"]])
        # a new mirror nobody has good data for: forced, it becomes the
        # sync source
        self.runner.commands = []
        self.runner.status = fixture("connected_uptodate.json").replace(
            '"role": "Primary"', '"role": "Secondary"').replace(
            "UpToDate", "Inconsistent")
        yield self.dev(primary=True).assemble()
        self.assertEqual(self.runner.drbd_commands(),
                         [["drbdsetup", "primary", "resource0", "--force"]])

    @defer.inlineCallbacks
    def test_status_and_missing(self):
        dev = self.dev()
        st = yield storage.device_status(dev)
        self.assertIsNone(st)                      # no LV, no resource
        self.runner.lvs.add("xenvg/u1.disk0_data")
        st = yield storage.device_status(dev)
        self.assertEqual((st["status"], st["ldisk"]),
                         ("degraded", storage.LDS_UNKNOWN))
        self.assertIn("not active", st["details"])
        self.runner.status = fixture("sync_target.json")
        st = yield storage.device_status(dev)
        self.assertEqual((st["status"], st["sync_percent"], st["path"]),
                         ("degraded", 42.17, "/dev/drbd0"))
        dims = yield dev.dimensions()
        self.assertEqual(dims, (1048576 * 1024, None))

    @defer.inlineCallbacks
    def test_shutdown_and_remove(self):
        dev = self.dev()
        yield dev.shutdown()                     # not up: nothing to do
        self.assertEqual(self.runner.drbd_commands(), [])
        self.runner.status = fixture("connected_uptodate.json")
        self.runner.lvs.update(["xenvg/u1.disk0_data", "xenvg/u1.disk0_meta"])
        yield dev.remove()
        self.assertEqual(self.runner.drbd_commands(),
                         [["drbdsetup", "down", "resource0"]])
        self.assertEqual(self.runner.lvs, set())

    @defer.inlineCallbacks
    def test_network_changes(self):
        dev = self.dev()
        self.runner.status = fixture("connected_uptodate.json")
        yield dev.disconnect_net()
        self.assertEqual(self.runner.drbd_commands(), [
            ["drbdsetup", "disconnect", "resource0", "1"],
            ["drbdsetup", "del-peer", "resource0", "1"]])
        self.runner.commands = []
        self.runner.status = fixture("standalone.json").replace(
            '"peer-node-id": 0', '"peer-node-id": 7')
        yield dev.attach_net(multimaster=True)
        self.assertEqual(self.runner.drbd_commands(), [
            ["drbdsetup", "new-peer", "resource0", "1",
             "--_name=node2.example.com", "--shared-secret=abcdef",
             "--cram-hmac-alg=sha1", "--protocol=C",
             "--allow-two-primaries=yes"],
            ["drbdsetup", "new-path", "resource0", "1",
             "ipv4:192.0.2.1:11000", "ipv4:192.0.2.2:11000"],
            ["drbdsetup", "connect", "resource0", "1"]])
        self.runner.status = None
        yield self.assertFailure(dev.disconnect_net(),
                                 errors.BlockDeviceError)

    @defer.inlineCallbacks
    def test_replace_children(self):
        dev = self.dev()
        new = [{"dev_type": "plain", "logical_id": ["xenvg", "n.data"]},
               {"dev_type": "plain", "logical_id": ["xenvg", "n.meta"]}]
        yield dev.replace_children(new)
        self.assertEqual(self.runner.drbd_commands(), [
            ["drbdsetup", "detach", "0"],
            ["drbdmeta", "--force", "0", "v09", "/dev/xenvg/n.meta",
             "flex-external", "create-md", "1"],
            ["drbdmeta", "0", "v09", "/dev/xenvg/n.meta", "flex-external",
             "apply-al"],
            ["drbdsetup", "attach", "0", "/dev/xenvg/n.data",
             "/dev/xenvg/n.meta", "flexible"]])
        self.assertEqual(dev.data.path, "/dev/xenvg/n.data")


class DrbdadmTests(unittest.TestCase):
    """The generated configuration against DRBD's own tool (dry run only:
    no kernel module is needed for these)."""

    def setUp(self):
        self.drbdadm = shutil.which("drbdadm")
        if self.drbdadm is None:
            raise unittest.SkipTest("drbdadm is not installed (apt-get"
                                    " install drbd-utils)")
        # drbdadm picks the "on" section by the host's name
        self.host = os.uname().nodename
        p = drbd.params_from_disk(disk_dict())
        self.params = p
        self.conf = os.path.join(self.mktemp())
        with open(self.conf, "w") as f:
            f.write(drbd.resource_config(
                p, self.host, "node2.example.com",
                "/dev/xenvg/u1.disk0_data", "/dev/xenvg/u1.disk0_meta"))

    def drbdadm_run(self, *args):
        proc = subprocess.run([self.drbdadm, "-c", self.conf] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=30)
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    def test_dump_accepts_it(self):
        code, out, err = self.drbdadm_run("dump", "resource0")
        self.assertEqual(code, 0, err)
        self.assertIn("resource resource0", out)
        self.assertIn("address          ipv4 192.0.2.1:11000;", out)
        self.assertIn("shared-secret    abcdef;", out)

    def test_dry_run_up_runs_our_commands(self):
        code, out, err = self.drbdadm_run("-d", "up", "resource0")
        self.assertEqual(code, 0, err)
        theirs = []
        for line in (out + err).splitlines():
            words = line.split()
            if words and os.path.basename(words[0]) in ("drbdsetup",
                                                        "drbdmeta"):
                theirs.append([os.path.basename(words[0])] + words[1:])
        ours = drbd.up_commands(self.params, "/dev/xenvg/u1.disk0_data",
                                "/dev/xenvg/u1.disk0_meta")
        self.assertEqual(ours, theirs)

    def test_dry_run_create_md(self):
        code, out, err = self.drbdadm_run("-d", "create-md", "resource0")
        self.assertEqual(code, 0, err)
        theirs = out.split()
        theirs[0] = os.path.basename(theirs[0])
        ours = drbd.create_md_command(self.params,
                                      "/dev/xenvg/u1.disk0_meta")
        # ours adds --force (no questions from a daemon)
        self.assertEqual([a for a in ours if a != "--force"], theirs)
