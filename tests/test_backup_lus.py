"""Export logical units (OP_BACKUP_EXPORT / _PREPARE / _REMOVE) and the
import mode of OP_INSTANCE_CREATE, with node daemons simulated in memory
(their export directories and transfer files) and a Clock; gnt-backup's
commands with a fake master."""

import base64
import hashlib
import os

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import cmdlib
from ganeti import errors
from ganeti import exportinfo
from ganeti import mcpu
from ganeti import objects
from ganeti import opcodes
from ganeti import pathutils
from ganeti import rie
from ganeti.backend import remote_transfer

from tests.fakes import NodeFailure
from tests.test_cmdlib_instance import (InstanceRpc, InstanceTestCase,
                                        NODE1, NODE2, create_op)

NODE3 = "node3.example.com"
INST = "inst1.example.com"


class ExportRpc(InstanceRpc):
    """Node daemons with export directories (``exports[node][name] =
    {"config": text, "dumps": {name: bytes}}``), transfer files
    (``transfers[node][id]``) and disk contents (``data[path]``, what the
    OS export script reads and the import script writes)."""

    def __init__(self):
        InstanceRpc.__init__(self)
        self.exports = {}
        self.transfers = {}
        self.data = {}
        self.os_list[NODE3] = list(self.os_list[NODE1])

    def _chunk(self, blob, offset, length):
        if offset >= len(blob):
            return {"size": len(blob), "data": ""}
        piece = bytes(blob[offset:offset + length])
        if not piece.strip(b"\0"):
            return {"size": len(blob), "data": None, "length": len(piece)}
        return {"size": len(blob), "length": len(piece),
                "data": base64.b64encode(piece).decode()}

    def _instance_os_export(self, node, instance, idx, compress, debug):
        path = instance["disks_info"][idx]["logical_id"][1]
        tid = "%032x" % (len(self.calls) + 1)
        self.transfers.setdefault(node, {})[tid] = bytearray(
            self.data.get(path, b""))
        return {"transfer_id": tid, "size": len(self.data.get(path, b""))}

    def _transfer_read_chunk(self, node, tid, offset, length):
        return self._chunk(self.transfers[node][tid], offset, length)

    def _transfer_write_chunk(self, node, tid, offset, data, length):
        blob = self.transfers.setdefault(node, {}).setdefault(
            tid, bytearray())
        raw = base64.b64decode(data)
        if len(blob) < offset + len(raw):
            blob.extend(b"\0" * (offset + len(raw) - len(blob)))
        blob[offset:offset + len(raw)] = raw
        return True

    def _transfer_finish(self, node, tid, size):
        blob = self.transfers.setdefault(node, {}).setdefault(
            tid, bytearray())
        del blob[size:]
        blob.extend(b"\0" * (size - len(blob)))
        return True

    def _transfer_remove(self, node, tid):
        self.transfers.get(node, {}).pop(tid, None)
        return True

    def _export_finalize(self, node, name, config, dumps):
        exportinfo.parse(config)
        self.exports.setdefault(node, {})[name] = {
            "config": config,
            "dumps": {d: bytes(self.transfers[node].pop(t))
                      for d, t in dumps.items()}}
        return "/var/lib/ganeti/export/" + name

    def _export_list(self, node):
        return sorted(self.exports.get(node, {}))

    def _export_remove(self, node, name):
        return self.exports.get(node, {}).pop(name, None) is not None

    def _export_info(self, node, path):
        found = self.exports.get(node, {}).get(path.split("/")[-1])
        if found is None:
            raise NodeFailure("there is no export %s on this node" % path)
        return found["config"]

    def _export_read_chunk(self, node, path, dump, offset, length):
        blob = self.exports[node][path.split("/")[-1]]["dumps"][dump]
        return self._chunk(blob, offset, length)

    def _instance_os_import(self, node, instance, idx, tid, compress,
                            debug):
        path = instance["disks_info"][idx]["logical_id"][1]
        self.data[path] = bytes(self.transfers[node].pop(tid))
        return "/var/log/ganeti/os/import.log"


def export_op(**kw):
    op = {"OP_ID": "OP_BACKUP_EXPORT", "instance_name": INST,
          "target_node": NODE2}
    op.update(kw)
    return op


class BackupTestCase(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.rpc = ExportRpc()
        self.ctx.rpc = self.rpc
        self.cfg.add_node(objects.Node(name=NODE3, primary_ip="127.0.0.3"))
        # a lock manager that knows the new node
        self.glm = self.ctx.glm = mcpu.make_lock_manager(self.cfg,
                                                         self.clock)
        self.proc = mcpu.Processor(self.ctx, cmdlib.LOGICAL_UNITS)
        self.create(beparams={"memory": 256, "vcpus": 2},
                    osparams={"motd": "hello"})
        self.disk = self.cfg.instance_disks(self.inst())[0]
        self.content = b"GANETI-BUSYBOX-OS v1\n" + bytes(range(256)) * 64
        self.rpc.data[self.disk.logical_id[1]] = self.content
        self.rpc.calls = []
        self.log[:] = []


class ExportTests(BackupTestCase):

    def test_export_of_a_running_instance(self):
        result = self.ok(export_op())
        self.assertEqual(result, [True, [True]])
        procs = self.rpc.procedures()
        # stopped while its disk is exported, started again afterwards
        self.assertLess(procs.index("instance_shutdown"),
                        procs.index("instance_os_export"))
        self.assertLess(procs.index("instance_os_export"),
                        procs.index("instance_start"))
        self.assertEqual(self.rpc.domains[(NODE1, INST)], "running")
        export = self.rpc.exports[NODE2][INST]
        self.assertEqual(export["dumps"], {self.disk.uuid: self.content})
        info = exportinfo.parse(export["config"])
        self.assertEqual(info.name, INST)
        self.assertEqual(info.os, "busybox+default")
        self.assertEqual(info.source, NODE1)
        self.assertEqual(info.disk_template, "file")
        self.assertEqual(info.disks(), [{"size": 1024, "dump": self.disk.uuid,
                                         "iv_name": "disk/0", "name": None}])
        self.assertEqual(info.nics()[0]["mac"], self.inst().nics[0].mac)
        self.assertEqual(info.beparams()["vcpus"], "2")
        self.assertEqual(info.section("os"), {"motd": "hello"})
        # no transfer file left on either node
        self.assertEqual(self.rpc.transfers[NODE1], {})
        self.assertEqual(self.rpc.transfers[NODE2], {})
        self.assertEqual(self.cfg.verify(), [])

    def test_noshutdown_keeps_it_running(self):
        self.ok(export_op(shutdown=False))
        self.assertNotIn("instance_shutdown", self.rpc.procedures())
        self.assertTrue(any("exported while in use" in m for m in self.log))
        self.assertIn(INST, self.rpc.exports[NODE2])

    def test_stopped_instance_stays_stopped(self):
        self.ok({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": INST})
        self.assertFalse(self.inst().disks_active)
        self.rpc.calls = []
        self.ok(export_op())
        self.assertNotIn("instance_start", self.rpc.procedures())
        self.assertNotIn((NODE1, INST), self.rpc.domains)
        # its disks were activated for the export only
        procs = self.rpc.procedures()
        self.assertLess(procs.index("blockdev_assemble"),
                        procs.index("instance_os_export"))
        self.assertLess(procs.index("instance_os_export"),
                        procs.index("blockdev_shutdown"))
        self.assertFalse(self.inst().disks_active)

    def test_older_export_elsewhere_is_removed(self):
        self.ok(export_op(target_node=NODE3))
        self.ok(export_op(target_node=NODE2, compress="gzip"))
        self.assertNotIn(INST, self.rpc.exports.get(NODE3, {}))
        info = exportinfo.parse(self.rpc.exports[NODE2][INST]["config"])
        self.assertEqual(info.compression, "gzip")
        self.assertIn("Removing the older export of %s on %s"
                      % (INST, NODE3), self.log)

    def test_remove_instance(self):
        self.ok(export_op(remove_instance=True))
        self.assertIn(INST, self.rpc.exports[NODE2])
        self.assertEqual(self.cfg.instances, {})
        self.assertEqual(self.rpc.files[NODE1], set())
        self.assertNotIn("instance_start", self.rpc.procedures())
        self.assertNotIn((NODE1, INST), self.rpc.domains)

    def test_failed_export_leaves_nothing_and_restarts(self):
        self.rpc.fail["transfer_write_chunk"] = "No space left on device"
        err = self.fails(export_op(), errors.OpExecError)
        self.assertIn("No space left on device", str(err))
        self.assertEqual(self.rpc.exports, {})
        self.assertEqual(self.rpc.transfers.get(NODE1, {}), {})
        self.assertEqual(self.rpc.transfers.get(NODE2, {}), {})
        self.assertEqual(self.rpc.domains[(NODE1, INST)], "running")
        self.assertIn(INST, [i.name for i in self.cfg.instances.values()])

    def test_bad_input_changes_nothing(self):
        self.create("diskless1.example.com", disk_template="diskless",
                    disks=[])
        self.cfg.set_node_params(NODE3, offline=True, master_candidate=False)
        before = self.cfg.to_dict()
        for op, kind, words, code in (
                (export_op(target_node="ghost.example.com"),
                 errors.OpPrereqError, "target_node", errors.ECODE_NOENT),
                (export_op(target_node=NODE3), errors.OpPrereqError,
                 "node %s is offline" % NODE3, errors.ECODE_STATE),
                (export_op(instance_name="diskless1.example.com"),
                 errors.OpPrereqError, "Cannot export diskless instance",
                 errors.ECODE_INVAL),
                (export_op(compress="lzma"), errors.OpPrereqError,
                 "compress: 'lzma' is not supported", errors.ECODE_INVAL),
                (export_op(zero_free_space=True), errors.OpPrereqError,
                 "zero_free_space", errors.ECODE_INVAL),
                (export_op(shutdown=False, remove_instance=True),
                 errors.OpPrereqError, "without shutting it down",
                 errors.ECODE_INVAL),
                (export_op(mode="remote", target_node=[]),
                 errors.OpPrereqError, "x509_key_name: missing",
                 errors.ECODE_INVAL),
                (export_op(mode="remote", x509_key_name=["a", "b", "c"],
                           destination_x509_ca="x"),
                 errors.OpPrereqError, "target_node: a remote export needs"
                 " the destination's per-disk information",
                 errors.ECODE_INVAL)):
            err = self.fails(op, kind)
            self.assertIn(words, err.args[0])
            self.assertEqual(err.args[1], code, op)
        self.assertEqual(self.rpc.calls, [])
        self.assertEqual(self.rpc.exports, {})
        self.assertEqual(self.cfg.to_dict(), before)

    def test_prepare(self):
        self.assertIsNone(self.ok({"OP_ID": "OP_BACKUP_PREPARE",
                                   "instance_name": INST, "mode": "local"}))
        # no cluster domain secret here
        err = self.fails({"OP_ID": "OP_BACKUP_PREPARE",
                          "instance_name": INST, "mode": "remote"})
        self.assertIn("cannot read the cluster domain secret", err.args[0])


class RemoveTests(BackupTestCase):

    def test_removes_every_export_also_of_a_removed_instance(self):
        self.ok(export_op())
        # an export made by hand elsewhere too
        self.rpc.exports.setdefault(NODE3, {})[INST] = \
            self.rpc.exports[NODE2][INST]
        self.ok({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": INST})
        self.ok({"OP_ID": "OP_BACKUP_REMOVE", "instance_name": INST})
        self.assertEqual(self.rpc.exports[NODE2], {})
        self.assertEqual(self.rpc.exports[NODE3], {})
        err = self.fails({"OP_ID": "OP_BACKUP_REMOVE",
                          "instance_name": INST}, errors.OpExecError)
        self.assertIn("No export found for instance %s" % INST, str(err))


class ImportTests(BackupTestCase):

    def import_op(self, name="copy1.example.com", **kw):
        op = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
              "mode": "import", "src_node": NODE2, "src_path": INST,
              "pnode": NODE3, "disks": [], "nics": [{"mac": "generate"}]}
        op.update(kw)
        return op

    def test_import_takes_the_exports_settings_and_data(self):
        self.ok(export_op())
        self.rpc.calls = []
        self.assertEqual(self.ok(self.import_op()), [NODE3])
        copy = self.inst("copy1.example.com")
        self.assertEqual(copy.os, "busybox+default")
        self.assertEqual(copy.beparams["vcpus"], 2)
        self.assertEqual(copy.beparams["maxmem"], 256)
        self.assertEqual(copy.osparams, {"motd": "hello"})
        (disk,) = self.cfg.instance_disks(copy)
        self.assertEqual((disk.dev_type, disk.size), ("file", 1024))
        self.assertEqual(self.rpc.data[disk.logical_id[1]], self.content)
        self.assertNotIn("instance_os_add", self.rpc.procedures())
        self.assertEqual(self.rpc.transfers[NODE3], {})
        self.assertEqual(self.rpc.domains[(NODE3, "copy1.example.com")],
                         "running")
        self.assertEqual(self.cfg.verify(), [])

    def kvm_export(self):
        """The export as if the instance had been a kvm one."""
        export = self.rpc.exports[NODE2][INST]
        export["config"] = export["config"].replace(
            "hypervisor = fake", "hypervisor = kvm").replace(
            "[hypervisor]\n", "[hypervisor]\nboot_order = cdrom\n"
            "acpi = False\n")

    def test_hypervisor_parameters_come_from_the_export(self):
        self.ok(export_op())
        self.kvm_export()
        self.ok(self.import_op())
        copy = self.inst("copy1.example.com")
        self.assertEqual(copy.hypervisor, "kvm")
        self.assertEqual(copy.hvparams, {"boot_order": "cdrom",
                                         "acpi": False})

    def test_what_the_opcode_gives_wins(self):
        self.ok(export_op())
        self.kvm_export()
        self.ok(self.import_op(beparams={"memory": 512},
                               disks=[{"size": 2048}], hypervisor="fake",
                               osparams={"motd": "mine"}))
        copy = self.inst("copy1.example.com")
        self.assertEqual((copy.beparams["maxmem"], copy.beparams["minmem"],
                          copy.beparams["vcpus"]), (512, 512, 2))
        self.assertEqual(copy.hypervisor, "fake")
        # the export's kvm parameters do not go to another hypervisor
        self.assertEqual(copy.hvparams, {})
        self.assertEqual(copy.osparams, {"motd": "mine"})
        (disk,) = self.cfg.instance_disks(copy)
        self.assertEqual(disk.size, 2048)
        # the exported disk's data is imported onto the bigger disk
        self.assertEqual(self.rpc.data[disk.logical_id[1]], self.content)

    def test_import_without_src_node_finds_the_export(self):
        self.ok(export_op())
        op = self.import_op()
        del op["src_node"]
        self.ok(op)
        self.assertIn("Found export %s on node %s" % (INST, NODE2),
                      self.log)

    def test_nics_come_from_the_export(self):
        self.ok(export_op(remove_instance=True))
        mac = exportinfo.parse(
            self.rpc.exports[NODE2][INST]["config"]).nics()[0]["mac"]
        self.ok(self.import_op(INST, nics=[]))
        self.assertEqual(self.inst(INST).nics[0].mac, mac)

    def test_bad_imports_change_nothing(self):
        self.ok(export_op())
        broken = self.rpc.exports[NODE2][INST]["config"].replace(
            "disk0_size = 1024", "disk0_size = lots")
        self.rpc.exports.setdefault(NODE1, {})["broken"] = {
            "config": broken, "dumps": {}}
        before = self.cfg.to_dict()
        self.rpc.calls = []
        for op, words, code in (
                (self.import_op(src_node=NODE1),
                 "there is no export %s" % INST, errors.ECODE_ENVIRON),
                (self.import_op(src_node=NODE1, src_path="broken"),
                 "[instance] disk0_size: 'lots' is not a whole number",
                 errors.ECODE_INVAL),
                (self.import_op(src_node="ghost.example.com"),
                 "src_node", errors.ECODE_NOENT),
                (self.import_op(mode="remote-import"),
                 "source_handshake: missing", errors.ECODE_INVAL),
                (create_op("x1.example.com", src_node=NODE2),
                 "only for mode 'import'", errors.ECODE_INVAL)):
            err = self.fails(op)
            self.assertIn(words, err.args[0])
            self.assertEqual(err.args[1], code, op)
        op = self.import_op(src_path="nothere.example.com")
        del op["src_node"]
        err = self.fails(op)
        self.assertIn("no export found for nothere.example.com",
                      err.args[0])
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertNotIn("blockdev_create", self.rpc.procedures())

    def test_failed_import_removes_the_new_instance(self):
        self.ok(export_op())
        self.rpc.fail["instance_os_import"] = "import script failed"
        err = self.fails(self.import_op(), errors.OpExecError)
        self.assertIn("import script failed", str(err))
        self.assertNotIn("copy1.example.com",
                         [i.name for i in self.cfg.instances.values()])
        self.assertEqual(self.rpc.files.get(NODE3, set()), set())


class CommandLineTests(unittest.TestCase):
    """gnt-backup -> opcodes and output, with a fake master."""

    def setUp(self):
        from tests.test_cli_fakes import FakeClient, field
        self.client = FakeClient()
        self.client.tables["export"] = (
            [field("node", "Node"), field("export", "Export")],
            [[NODE2, INST], [NODE3, "web1.example.com"]])

    def backup(self, *argv):
        from ganeti.cli import gnt_backup
        from tests.test_cli_fakes import run
        return run(gnt_backup.commands, argv, self.client)

    def test_export(self):
        self.client.results["OP_BACKUP_EXPORT"] = [True, [True, True]]
        code, out, err = self.backup("export", "-n", NODE2, "--noshutdown",
                                     "--compress", "gzip", INST)
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual(
            {k: op[k] for k in ("OP_ID", "instance_name", "target_node",
                                "shutdown", "compress", "mode",
                                "remove_instance")},
            {"OP_ID": "OP_BACKUP_EXPORT", "instance_name": INST,
             "target_node": NODE2, "shutdown": False, "compress": "gzip",
             "mode": "local", "remove_instance": False})
        # a disk that was not exported is a failure
        self.client.results["OP_BACKUP_EXPORT"] = [True, [True, False]]
        code, out, err = self.backup("export", "-n", NODE2, INST)
        self.assertEqual(code, 1)
        self.assertIn("disk(s) 1 could not be exported", err)
        code, out, err = self.backup("export", INST)
        self.assertNotEqual(code, 0)
        self.assertIn("-n", err)

    def test_import(self):
        code, out, err = self.backup(
            "import", "-n", NODE3, "--src-node", NODE2, "--src-dir", INST,
            "--no-name-check", "copy1.example.com")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual(
            {k: op[k] for k in ("OP_ID", "instance_name", "mode", "pnode",
                                "src_node", "src_path", "disks", "nics")},
            {"OP_ID": "OP_INSTANCE_CREATE",
             "instance_name": "copy1.example.com", "mode": "import",
             "pnode": NODE3, "src_node": NODE2, "src_path": INST,
             "disks": [], "nics": []})
        # what is given is given: a disk, a NIC
        code, out, err = self.backup(
            "import", "-n", NODE3, "--src-node", NODE2, "--disk",
            "0:size=2g", "--net", "0:mac=generate", "copy2.example.com")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual(op["disks"], [{"size": 2048}])
        self.assertEqual(op["nics"], [{"mac": "generate"}])

    def test_list_and_remove(self):
        code, out, err = self.backup("list")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines()[0].split(), ["Node", "Export"])
        self.assertIn(INST, out)
        code, out, err = self.backup("list", "--node", NODE2,
                                     "--no-headers")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.client.calls[-1][1][2],
                         ["|", ["==", "node", NODE2]])
        code, out, err = self.backup("remove", INST)
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["instance_name"]),
                         ("OP_BACKUP_REMOVE", INST))


# --- remote (inter-cluster) exports and imports ------------------------------

CDS = "0123456789abcdef0123456789abcdef01234567"
OTHER_CDS = "fedcba9876543210fedcba9876543210fedcba98"


class RemoteRpc(ExportRpc):
    """Adds import/export keys (real certificates, made under
    ``key_paths``), listeners and sending.  ``sent[(host, port, magic)]``
    is what a source sent; a listener's data (``incoming``, in the order
    of the listen calls) has arrived when the master first asks, unless
    ``arrival_error`` says why not."""

    def __init__(self, key_paths):
        ExportRpc.__init__(self)
        self.key_paths = key_paths
        self.keys = {}
        self.sent = {}
        self.listeners = {}
        self.incoming = []
        self.arrival_error = None

    def _x509_cert_create(self, node, validity):
        name, pem = remote_transfer.make_key(self.key_paths, validity, 0)
        self.keys.setdefault(node, {})[name] = pem
        return [name, pem]

    def _x509_cert_remove(self, node, name):
        return self.keys.get(node, {}).pop(name, None) is not None

    def _remote_export_send(self, node, key_name, peer_ca, host, port, magic,
                            tid, connect_timeout=60):
        if key_name not in self.keys.get(node, {}):
            raise NodeFailure("there is no import/export key %s" % key_name)
        data = bytes(self.transfers[node][tid])
        self.sent[(host, port, magic)] = (data, peer_ca)
        return {"size": len(data),
                "sha256": hashlib.sha256(data).hexdigest()}

    def _remote_import_listen(self, node, key_name, peer_ca, host, magic,
                              tid, timeout):
        port = 40000 + len(self.listeners)
        self.listeners[tid] = {"node": node, "key": key_name, "peer": peer_ca,
                               "host": host, "magic": magic, "port": port,
                               "done": False}
        return port

    def _remote_import_status(self, node, tids):
        result = {}
        for tid in tids:
            listener = self.listeners.get(tid)
            if listener is None:
                result[tid] = None
                continue
            if not listener["done"] and self.arrival_error is None:
                data = self.incoming.pop(0)
                self.transfers.setdefault(node, {})[tid] = bytearray(data)
                listener.update(done=True, size=len(data),
                                sha256=hashlib.sha256(data).hexdigest())
            result[tid] = {"port": listener["port"],
                           "done": listener["done"],
                           "size": listener.get("size"),
                           "sha256": listener.get("sha256"),
                           "error": self.arrival_error,
                           "last_attempt": None}
        return result

    def _remote_import_end(self, node, tid):
        listener = self.listeners.pop(tid, None)
        if listener is not None and not listener["done"]:
            self.transfers.get(node, {}).pop(tid, None)
        return listener is not None


class RemoteTests(BackupTestCase):

    def setUp(self):
        BackupTestCase.setUp(self)
        self.ctx.paths = pathutils.Paths(os.path.abspath(self.mktemp()))
        os.makedirs(self.ctx.paths.data_dir)
        with open(os.path.join(self.ctx.paths.data_dir,
                               "cluster-domain-secret"), "w") as f:
            f.write(CDS + "\n")
        rpc = RemoteRpc(pathutils.Paths(os.path.abspath(self.mktemp())))
        rpc.__dict__.update({k: v for k, v in self.rpc.__dict__.items()
                             if k not in rpc.__dict__ or k in
                             ("domains", "files", "data", "memory",
                              "calls", "os_list")})
        self.rpc = self.ctx.rpc = rpc

    def run_op(self, op):
        self.job += 1

        def feedback(msg, type="message"):
            self.log.append(msg if type == "message" else (type, msg))
        return defer.maybeDeferred(opcodes.from_dict, op).addCallback(
            lambda op: self.proc.execute(self.job, 0, op, feedback))

    def prepare(self):
        return self.ok({"OP_ID": "OP_BACKUP_PREPARE", "instance_name": INST,
                        "mode": "remote"})

    def destination(self, disks=1, cds=CDS):
        """What a destination cluster would answer: its signed
        certificate and per-disk information."""
        _, pem = remote_transfer.make_key(self.rpc.key_paths, 3600, 0)
        infos = [rie.compute_disk_info(cds, "abcd", idx, "127.0.9.1",
                                       5000 + idx, "magic-%d" % idx)
                 for idx in range(disks)]
        return pem, rie.sign_certificate(pem, cds), infos

    def remote_export(self, expinfo, dest, **kw):
        op = export_op(mode="remote", target_node=dest[2],
                       x509_key_name=expinfo["x509_key_name"],
                       destination_x509_ca=dest[1])
        op.update(kw)
        return op

    def test_prepare_signs_a_new_key(self):
        expinfo = self.prepare()
        self.assertIsNone(rie.check_handshake(CDS, expinfo["handshake"]))
        name = rie.check_key_name(CDS, expinfo["x509_key_name"])
        pem = rie.load_signed_certificate(expinfo["x509_ca"], CDS, "x")
        # the key is on the primary node
        self.assertEqual(self.rpc.keys[NODE1], {name: pem})
        # a destination without our secret rejects all of it
        self.assertIsNotNone(rie.check_handshake(OTHER_CDS,
                                                 expinfo["handshake"]))
        self.assertRaises(errors.OpPrereqError, rie.load_signed_certificate,
                          expinfo["x509_ca"], OTHER_CDS, "x")

    def test_export_sends_each_disk_and_removes_the_instance(self):
        expinfo = self.prepare()
        dest = self.destination()
        self.rpc.calls = []
        self.assertEqual(self.ok(self.remote_export(
            expinfo, dest, remove_instance=True, compress="gzip")),
            [True, [True]])
        data, peer = self.rpc.sent[("127.0.9.1", 5000, "magic-0")]
        self.assertEqual(data, self.content)
        # the node accepts only the destination's certificate
        self.assertEqual(peer, dest[0])
        procs = self.rpc.procedures()
        self.assertLess(procs.index("instance_shutdown"),
                        procs.index("instance_os_export"))
        export_call = self.rpc.calls_of("instance_os_export")[0]
        self.assertEqual(export_call.args[2], "gzip")
        self.assertEqual(self.cfg.instances, {})
        self.assertEqual(self.rpc.keys[NODE1], {})
        self.assertEqual(self.rpc.transfers[NODE1], {})
        # nothing written as a local export anywhere
        self.assertEqual(self.rpc.exports, {})

    def test_export_keeps_a_running_instance_running(self):
        expinfo = self.prepare()
        self.ok(self.remote_export(expinfo, self.destination()))
        self.assertEqual(self.rpc.domains[(NODE1, INST)], "running")
        self.assertIn(INST, [i.name for i in self.cfg.instances.values()])

    def test_export_bad_input_changes_nothing(self):
        expinfo = self.prepare()
        good = self.destination()
        foreign = self.destination(cds=OTHER_CDS)
        name, _, salt = expinfo["x509_key_name"]
        forged_key = [name, rie.sha1_hmac(OTHER_CDS, name, salt), salt]
        self.rpc.calls = []
        before = self.cfg.to_dict()
        for kw, words in (
                ({"target_node": foreign[2]},
                 "target_node: disk/0: the HMAC is invalid"),
                ({"target_node": good[2] * 2},
                 "target_node: the destination gave information for 2"
                 " disks, instance %s has 1" % INST),
                ({"destination_x509_ca": foreign[1]},
                 "destination_x509_ca: the certificate's signature is"
                 " invalid"),
                ({"destination_x509_ca": good[0]},
                 "destination_x509_ca: the certificate carries no"
                 " X-Ganeti-Signature header"),
                ({"x509_key_name": forged_key},
                 "x509_key_name: the HMAC is invalid"),
                ({"x509_key_name": ["a", "b"]},
                 "x509_key_name: not a [name, hmac, salt] triple")):
            err = self.fails(self.remote_export(expinfo, good, **kw))
            self.assertIn(words, err.args[0])
            self.assertEqual(err.args[1], errors.ECODE_INVAL)
        self.assertEqual(self.rpc.calls, [])
        self.assertEqual(self.cfg.to_dict(), before)

    def test_failed_send_restarts_the_instance(self):
        expinfo = self.prepare()
        self.rpc.fail["remote_export_send"] = ("the destination refused the"
                                               " transfer: wrong magic")
        err = self.fails(self.remote_export(expinfo, self.destination()),
                         errors.OpExecError)
        self.assertIn("wrong magic", str(err))
        self.assertEqual(self.rpc.domains[(NODE1, INST)], "running")
        self.assertEqual(self.rpc.transfers[NODE1], {})
        self.assertIn(INST, [i.name for i in self.cfg.instances.values()])

    def import_op(self, expinfo, name="moved1.example.com", **kw):
        op = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
              "mode": "remote-import", "pnode": NODE2,
              "disk_template": "file", "disks": [{"size": 1024}],
              "nics": [{"mac": "generate"}], "os_type": "busybox+default",
              "source_handshake": expinfo["handshake"],
              "source_x509_ca": expinfo["x509_ca"],
              "source_instance_name": INST}
        op.update(kw)
        return op

    def test_remote_import(self):
        expinfo = self.prepare()
        self.rpc.incoming = [b"moved data" * 1000]
        self.rpc.calls = []
        self.assertEqual(self.ok(self.import_op(expinfo)), [NODE2])
        # the log entry move-instance waits for
        (entry,) = [m for t, m in (e for e in self.log
                                   if isinstance(e, tuple))
                    if t == "remote-import"]
        self.assertEqual(sorted(entry), ["disks", "x509_ca"])
        pem = rie.load_signed_certificate(entry["x509_ca"], CDS, "x")
        host, port, magic = rie.check_disk_info(CDS, 0, entry["disks"][0])
        self.assertEqual(host, "127.0.0.2")   # the new primary node's
        (call,) = self.rpc.calls_of("remote_import_listen")
        self.assertEqual(call.node, NODE2)
        self.assertEqual(call.args[3], magic)
        # the listener accepts only the source's certificate
        self.assertEqual(call.args[1], rie.load_signed_certificate(
            expinfo["x509_ca"], CDS, "x"))
        # its own key is the one whose certificate went to the source
        self.assertNotIn(call.args[0], self.rpc.keys.get(NODE2, {}))
        self.assertNotIn(pem, self.rpc.keys.get(NODE2, {}).values())
        copy = self.inst("moved1.example.com")
        (disk,) = self.cfg.instance_disks(copy)
        self.assertEqual(self.rpc.data[disk.logical_id[1]],
                         b"moved data" * 1000)
        self.assertNotIn("instance_os_add", self.rpc.procedures())
        self.assertEqual(self.rpc.listeners, {})
        self.assertEqual(self.rpc.transfers[NODE2], {})
        self.assertEqual(self.cfg.verify(), [])

    def test_remote_import_with_another_domain_secret(self):
        expinfo = self.prepare()
        with open(os.path.join(self.ctx.paths.data_dir,
                               "cluster-domain-secret"), "w") as f:
            f.write(OTHER_CDS)
        self.rpc.calls = []
        before = self.cfg.to_dict()
        err = self.fails(self.import_op(expinfo))
        self.assertIn("source_handshake: invalid: the HMAC does not match:"
                      " the two clusters do not share the same cluster"
                      " domain secret", err.args[0])
        self.assertEqual(err.args[1], errors.ECODE_INVAL)
        self.assertEqual(self.rpc.calls, [])
        self.assertEqual(self.cfg.to_dict(), before)

    def test_remote_import_forged_certificate(self):
        expinfo = dict(self.prepare())
        _, pem = remote_transfer.make_key(self.rpc.key_paths, 3600, 0)
        expinfo["x509_ca"] = rie.sign_certificate(pem, OTHER_CDS)
        self.rpc.calls = []
        err = self.fails(self.import_op(expinfo))
        self.assertIn("source_x509_ca: the certificate's signature is"
                      " invalid", err.args[0])
        self.assertEqual(self.rpc.calls, [])

    def test_remote_import_without_data_removes_the_instance(self):
        expinfo = self.prepare()
        self.rpc.arrival_error = "no complete transfer within 21600 seconds"
        d = self.run_op(self.import_op(expinfo))
        # the master looks again every few seconds
        self.clock.advance(10)
        err = self.failureResultOf(d, errors.OpExecError).value
        self.assertIn("Disk/0 of moved1.example.com was not received: no"
                      " complete transfer", str(err))
        self.assertNotIn("moved1.example.com",
                         [i.name for i in self.cfg.instances.values()])
        self.assertEqual(self.rpc.listeners, {})
        self.assertEqual(self.rpc.keys.get(NODE2, {}), {})
