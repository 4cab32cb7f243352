"""Export descriptions (config.ini), a node's export directory, and the
node daemon's export procedures running the busybox OS's real export and
import scripts."""

import gzip
import os
import textwrap

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti import errors
from ganeti import exportinfo
from ganeti import pathutils
from ganeti import storage
from ganeti.backend import exports
from ganeti.backend import os_api
from ganeti.backend import process
from ganeti.server.noded.exports import ExportProcedures
from ganeti.server.noded.procedure import INLINE, ProcedureTable

from tests.test_os import ETC_OS, MiB, instance_dict

#: config.ini as Ganeti 3.0 writes it for a plain instance with one NIC
#: and two disks (written here by hand from its documented fields)
GANETI_CONFIG = textwrap.dedent("""\
    [export]
    version = 0
    timestamp = 1700000000
    source = 0c8a5c6e-1111-4222-8333-444455556666
    os = debootstrap+default
    compression = none

    [instance]
    name = web1.example.com
    maxmem = 512
    minmem = 256
    memory = 512
    vcpus = 2
    disk_template = plain
    hypervisor = kvm
    tags = web production
    nic0_mac = aa:00:00:35:d0:f4
    nic0_ip = None
    nic0_network = None
    nic0_name = None
    nic0_mode = bridged
    nic0_link = br0
    nic0_vlan =
    nic_count = 1
    disk0_ivname = disk/0
    disk0_dump = 8e1b7a0a-aaaa-4bbb-8ccc-ddddeeeeffff
    disk0_size = 10240
    disk0_name = None
    disk1_ivname = disk/1
    disk1_dump = 1f2e3d4c-aaaa-4bbb-8ccc-ddddeeeeffff
    disk1_size = 2048
    disk1_name = data
    disk_count = 2

    [hypervisor]
    kernel_path =
    boot_order = disk

    [backend]
    auto_balance = True
    maxmem = 512
    minmem = 256
    vcpus = 2
    always_failover = False
    spindle_use = 1

    [os]
    dhcp = yes

    [os_private]

    """)


class ExportInfoTests(unittest.TestCase):

    def test_round_trip(self):
        text = exportinfo.build(
            {"name": "inst1.example.com", "os": "busybox+default",
             "hypervisor": "fake", "disk_template": "file",
             "beparams": {"maxmem": 256, "minmem": 128, "vcpus": 2,
                          "auto_balance": True},
             "hvparams": {"migration_mode": "live"},
             "osparams": {"motd": "hi there"},
             "osparams_private": {"secret": "s3"}},
            [{"iv_name": "disk/0", "size": 1024, "name": "root"},
             {"iv_name": "disk/1", "size": 512, "name": None}],
            [{"mac": "aa:00:00:00:00:01", "ip": "192.0.2.4",
              "network": None, "name": "eth0",
              "nicparams": {"mode": "bridged", "link": "br0"}}],
            source="node1.example.com", timestamp=1700000000.5,
            compression="gzip", dump_names=["d0", "d1"],
            tags=["b", "a"])
        info = exportinfo.parse(text)
        self.assertEqual(info.version, 0)
        self.assertEqual(info.timestamp, 1700000000)
        self.assertEqual(info.name, "inst1.example.com")
        self.assertEqual(info.os, "busybox+default")
        self.assertEqual(info.source, "node1.example.com")
        self.assertEqual(info.compression, "gzip")
        self.assertEqual(info.hypervisor, "fake")
        self.assertEqual(info.disk_template, "file")
        self.assertEqual(info.tags, ["a", "b"])
        self.assertEqual(info.disks(), [
            {"size": 1024, "dump": "d0", "iv_name": "disk/0",
             "name": "root"},
            {"size": 512, "dump": "d1", "iv_name": "disk/1", "name": None}])
        self.assertEqual(info.nics(), [
            {"mac": "aa:00:00:00:00:01", "ip": "192.0.2.4", "network": None,
             "name": "eth0", "mode": "bridged", "link": "br0",
             "vlan": None}])
        self.assertEqual(info.beparams(), {
            "maxmem": "256", "minmem": "128", "vcpus": "2",
            "auto_balance": "True"})
        self.assertEqual(info.section("hypervisor"),
                         {"migration_mode": "live"})
        self.assertEqual(info.section("os"), {"motd": "hi there"})
        self.assertEqual(info.section("os_private"), {"secret": "s3"})
        # what Ganeti's readers look for, as Ganeti writes it
        self.assertIn("[export]\nversion = 0\ntimestamp = 1700000000\n",
                      text)
        self.assertIn("memory = 256\n", text)
        self.assertIn("nic0_network = None\n", text)
        self.assertIn("disk_count = 2\n", text)

    def test_reads_ganetis_format(self):
        info = exportinfo.parse(GANETI_CONFIG)
        self.assertEqual(info.name, "web1.example.com")
        self.assertEqual(info.disk_template, "plain")
        self.assertEqual([d["size"] for d in info.disks()], [10240, 2048])
        self.assertEqual(info.disks()[1]["name"], "data")
        self.assertEqual(info.disks()[0]["dump"],
                         "8e1b7a0a-aaaa-4bbb-8ccc-ddddeeeeffff")
        nic = info.nics()[0]
        self.assertEqual((nic["mac"], nic["ip"], nic["mode"], nic["link"]),
                         ("aa:00:00:35:d0:f4", None, "bridged", "br0"))
        self.assertEqual(info.beparams()["maxmem"], "512")
        self.assertEqual(info.section("hypervisor")["boot_order"], "disk")
        self.assertEqual(info.section("os"), {"dhcp": "yes"})
        self.assertEqual(info.tags, ["web", "production"])

    def test_old_style_memory_in_the_instance_section(self):
        text = GANETI_CONFIG.split("[backend]")[0]
        be = exportinfo.parse(text).beparams()
        self.assertEqual(be, {"maxmem": "512", "minmem": "256",
                              "vcpus": "2"})

    def test_corrupt_descriptions_are_refused_naming_the_key(self):
        for change, words in (
                (lambda t: t.replace("[export]", "[exported]"),
                 "[export]: section missing"),
                (lambda t: t.replace("version = 0", "version = 7"),
                 "[export] version: version 7 is not supported"),
                (lambda t: t.replace("disk1_size = 2048", "disk1_size = x"),
                 "[instance] disk1_size: 'x' is not a whole number"),
                (lambda t: t.replace("disk1_size = 2048", ""),
                 "[instance] disk1_size: missing"),
                (lambda t: t.replace(
                    "disk0_dump = 8e1b7a0a-aaaa-4bbb-8ccc-ddddeeeeffff",
                    "disk0_dump = ../../etc/passwd"),
                 "[instance] disk0_dump: '../../etc/passwd' is not a plain"
                 " file name"),
                (lambda t: t.replace("compression = none",
                                     "compression = zstd"),
                 "[export] compression: 'zstd' is not one of none, gzip"),
                (lambda t: t.replace("nic_count = 1\n", ""),
                 "[instance] nic_count: missing"),
                (lambda t: "garbage without a section\n" + t,
                 "cannot be parsed")):
            err = self.assertRaises(errors.OpPrereqError, exportinfo.parse,
                                    change(GANETI_CONFIG))
            self.assertIn("config.ini", err.args[0])
            self.assertIn(words, err.args[0])
            self.assertEqual(err.args[1], errors.ECODE_INVAL)


class ExportDirectoryTests(unittest.TestCase):

    def setUp(self):
        self.paths = pathutils.Paths(os.path.abspath(self.mktemp()))
        self.base = exports.export_dir(self.paths)
        exports.ensure_transfer_dir(self.paths)

    def transfer(self, data):
        tid = exports.new_transfer_id()
        with open(exports.transfer_path(self.paths, tid), "wb") as f:
            f.write(data)
        return tid

    def test_finalize_replaces_an_older_export_only_when_complete(self):
        exports.finalize(self.paths, "web1.example.com", GANETI_CONFIG,
                         {"d0": self.transfer(b"old")})
        # a finalize that fails (a missing transfer) changes nothing
        self.assertRaises(errors.ParameterError, exports.finalize,
                          self.paths, "web1.example.com", GANETI_CONFIG,
                          {"d0": "0" * 32})
        self.assertRaises(errors.OpPrereqError, exports.finalize,
                          self.paths, "web1.example.com", "[export]\n",
                          {"d0": self.transfer(b"x")})
        directory = os.path.join(self.base, "web1.example.com")
        with open(os.path.join(directory, "d0"), "rb") as f:
            self.assertEqual(f.read(), b"old")
        exports.finalize(self.paths, "web1.example.com", GANETI_CONFIG,
                         {"d0": self.transfer(b"new")})
        with open(os.path.join(directory, "d0"), "rb") as f:
            self.assertEqual(f.read(), b"new")
        self.assertEqual(sorted(os.listdir(directory)), ["config.ini", "d0"])
        # hidden work directories are not exports
        self.assertEqual(sorted(n for n in os.listdir(self.base)
                                if n != ".transfer"), ["web1.example.com"])
        self.assertEqual(exports.list_exports(self.paths),
                         ["web1.example.com"])
        self.assertEqual(exports.read_info(self.paths, directory),
                         GANETI_CONFIG)
        self.assertTrue(exports.remove(self.paths, "web1.example.com"))
        self.assertFalse(exports.remove(self.paths, "web1.example.com"))
        self.assertEqual(exports.list_exports(self.paths), [])

    def test_a_failing_switch_keeps_the_older_export(self):
        exports.finalize(self.paths, "web1.example.com", GANETI_CONFIG,
                         {"d0": self.transfer(b"old")})
        real_rename = os.rename

        def rename(src, dst):
            if os.path.basename(src).startswith(".web1.example.com.new-"):
                raise OSError(5, "Input/output error")
            return real_rename(src, dst)
        self.patch(os, "rename", rename)
        self.assertRaises(OSError, exports.finalize, self.paths,
                          "web1.example.com", GANETI_CONFIG,
                          {"d0": self.transfer(b"new")})
        self.assertEqual(exports.list_exports(self.paths),
                         ["web1.example.com"])
        with open(os.path.join(self.base, "web1.example.com", "d0"),
                  "rb") as f:
            self.assertEqual(f.read(), b"old")
        self.assertEqual(sorted(n for n in os.listdir(self.base)
                                if n != ".transfer"), ["web1.example.com"])

    def test_paths_outside_the_export_directory_are_refused(self):
        for path in ("/etc", "../etc", os.path.join(self.base, ".transfer"),
                     os.path.join(self.base, "a", "..", "..")):
            self.assertRaises(errors.ParameterError, exports.export_path,
                              self.paths, path)
        self.assertRaises(errors.ParameterError, exports.transfer_path,
                          self.paths, "../../config.data")
        self.assertRaises(errors.ParameterError, exports.dump_path,
                          self.paths, "web1", "../config.data")
        self.assertRaises(errors.ParameterError, exports.check_name,
                          "a/b")

    def test_standard_paths_are_inside_the_nodes_root(self):
        # a virtual cluster's node: /var/lib/ganeti/export/NAME is its own
        self.assertEqual(
            exports.export_path(self.paths,
                                "/var/lib/ganeti/export/web1.example.com"),
            os.path.join(os.path.realpath(self.base), "web1.example.com"))
        self.assertRaises(errors.ParameterError, exports.export_path,
                          self.paths, "/var/lib/ganeti/config.data")

    def test_missing_and_corrupt_exports(self):
        err = self.assertRaises(errors.ExportError, exports.read_info,
                                self.paths, "nothere")
        self.assertIn("there is no export nothere", str(err))
        os.makedirs(os.path.join(self.base, "bad"))
        with open(os.path.join(self.base, "bad", "config.ini"), "w") as f:
            f.write(GANETI_CONFIG.replace("disk_count = 2", "disk_count = "))
        err = self.assertRaises(errors.ExportError, exports.read_info,
                                self.paths, "bad")
        self.assertIn("disk_count: missing", str(err))

    def test_stale_transfer_files_are_cleaned(self):
        old = self.transfer(b"left over")
        new = self.transfer(b"in progress")
        now = os.stat(exports.transfer_path(self.paths, new)).st_mtime
        os.utime(exports.transfer_path(self.paths, old),
                 (now - 3 * 86400, now - 3 * 86400))
        self.assertEqual(exports.clean_transfers(self.paths, now), [old])
        self.assertTrue(os.path.exists(exports.transfer_path(self.paths,
                                                             new)))
        self.assertFalse(os.path.exists(exports.transfer_path(self.paths,
                                                              old)))

    def test_compression_round_trip(self):
        data = b"abc" * 100000
        tid = self.transfer(data)
        path = exports.transfer_path(self.paths, tid)
        size = exports.compress(path, "gzip")
        self.assertLess(size, len(data))
        with gzip.open(path) as f:
            self.assertEqual(f.read(), data)
        with open(exports.decompress(path, "gzip"), "rb") as f:
            self.assertEqual(f.read(), data)
        exports.remove_transfer(self.paths, tid)
        self.assertEqual(os.listdir(os.path.dirname(path)), [])
        bad = self.transfer(b"not gzip at all")
        self.assertRaises(errors.ExportError, exports.decompress,
                          exports.transfer_path(self.paths, bad), "gzip")


class _Procedures(ExportProcedures, ProcedureTable):

    def __init__(self, paths, os_backend):
        self.reactor = reactor
        self.paths = paths
        self.os = os_backend
        ProcedureTable.__init__(self, INLINE)


class ExportProcedureTests(unittest.TestCase):
    """The procedures with the busybox OS's real scripts (``dd``)."""

    timeout = 60

    def setUp(self):
        root = os.path.abspath(self.mktemp())
        self.paths = pathutils.Paths(root)
        self.store = os.path.join(root, "srv/ganeti/file-storage")
        os.makedirs(os.path.join(self.store, "inst1"))
        self.disk = os.path.join(self.store, "inst1", "disk0")
        self.data = os.urandom(64 * 1024) + b"\0" * (3 * MiB) + b"tail"
        with open(self.disk, "wb") as f:
            f.write(self.data)
            f.truncate(8 * MiB)
        ctx = storage.StorageContext(runner=process.CommandRunner(reactor),
                                     file_storage_dirs=[self.store])
        backend = os_api.OsBackend(reactor, [ETC_OS], ctx,
                                   os.path.join(root, "var/log/ganeti"))
        self.procs = _Procedures(self.paths, backend)

    def call(self, name, *args):
        return self.procs.call(name, list(args))

    @defer.inlineCallbacks
    def copy(self, read, write_tid):
        """Copy chunk by chunk, as the master does."""
        offset = 0
        while True:
            chunk = yield self.call(read[0], *(read[1] + [offset, MiB]))
            if chunk["data"] == "":
                break
            if chunk["data"] is not None:
                yield self.call("transfer_write_chunk", write_tid, offset,
                                chunk["data"], chunk["length"])
            offset += chunk["length"]
            if offset >= chunk["size"]:
                break
        yield self.call("transfer_finish", write_tid, chunk["size"])

    @defer.inlineCallbacks
    def test_export_then_import_through_the_os_scripts(self):
        for compress in ("none", "gzip"):
            instance = instance_dict(self.disk)
            made = yield self.call("instance_os_export", instance, 0,
                                   compress)
            tid = "%032x" % 7
            yield self.copy(("transfer_read_chunk", [made["transfer_id"]]),
                            tid)
            yield self.call("transfer_remove", made["transfer_id"])
            yield self.call("export_finalize", "inst1.example.com",
                            GANETI_CONFIG, {"disk0": tid})
            self.assertEqual((yield self.call("export_list")),
                             ["inst1.example.com"])
            # import onto a new, empty disk
            target = os.path.join(self.store, "inst1", "disk-new")
            with open(target, "wb") as f:
                f.truncate(8 * MiB)
            tid2 = "%032x" % 8
            yield self.copy(("export_read_chunk", ["inst1.example.com",
                                                   "disk0"]), tid2)
            yield self.call("instance_os_import", instance_dict(target), 0,
                            tid2, compress)
            with open(target, "rb") as f, open(self.disk, "rb") as g:
                self.assertEqual(f.read(), g.read(), compress)
            # transfer files are gone, the export stays
            self.assertEqual(os.listdir(os.path.join(
                exports.export_dir(self.paths), exports.TRANSFER_DIR)), [])
            os.unlink(target)

    @defer.inlineCallbacks
    def test_failing_export_script_leaves_no_transfer(self):
        instance = instance_dict(os.path.join(self.store, "inst1", "gone"))
        with self.assertRaises(Exception):
            yield self.call("instance_os_export", instance, 0, "none")
        self.assertEqual(os.listdir(os.path.join(
            exports.export_dir(self.paths), exports.TRANSFER_DIR)), [])

    @defer.inlineCallbacks
    def test_bad_arguments_are_refused(self):
        for name, args, words in (
                ("instance_os_export", [instance_dict(self.disk), 0, "xz"],
                 "compress"),
                ("instance_os_export", [instance_dict(self.disk), 3],
                 "no disk 3"),
                ("transfer_read_chunk", ["../x", 0, 10], "transfer id"),
                ("export_info", ["/etc"], "not an export of this node"),
                ("export_read_chunk", ["inst1", "disk0", 0, 1 << 30],
                 "at most")):
            with self.assertRaises(errors.ParameterError) as caught:
                yield self.call(name, *args)
            self.assertIn(words, str(caught.exception))
