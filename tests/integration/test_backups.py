"""Instance exports through real daemons: a 3-node virtual cluster, fake
hypervisor, busybox OS, file disks.

* ``gnt-backup export`` writes a file instance from node1 to node2 (the
  OS export script's output, copied through the master);
* ``gnt-backup list`` (ours and Ganeti 3.0's own) shows it;
* ``gnt-backup import`` makes a new instance on node3 from it: its disk
  is byte for byte the exported one;
* bad input is refused with a clear message and changes nothing;
* ``gnt-backup remove`` removes it: the list is empty.

And through ganeti-rapi, Ganeti's RAPI client's ExportInstance and
PrepareExport, and GET /2/query/export.

A real kvm guest (qemu TCG) is exported and imported: the imported
instance boots (skipped with the reason where qemu or the test guest
cannot be had).
"""

import json
import os
import subprocess
import textwrap

from tests import ganeti_peer
from tests.integration.daemons import wait_for
from tests.integration.test_instance import INSTANCE
from tests.integration.test_kvm import BOOT_DEADLINE, KvmClusterTestCase
from tests.integration.test_migration import ClusterTestCase
from tests.integration.test_rapi import (PASSWORD, TLS_PORT, USER,
                                         RapiDaemonTestCase)

SOURCE = "src1.example.com"
COPY = "copy1.example.com"


def _read(path):
    with open(path, "rb") as f:
        return f.read()


class GntBackupTests(ClusterTestCase):

    BASE_PREFIX = "gnt-b-"

    def disk_path(self, name):
        return self.query(name)["disks"][0]["logical_id"][1]

    def export_dir(self, node, name=SOURCE):
        return os.path.join(node.root, "var/lib/ganeti/export", name)

    def theirs(self, *args):
        return ganeti_peer.run_tool("gnt-backup", args, self.root,
                                    self.node(0).name, timeout=60)

    @property
    def root(self):
        return self.vc.master.root

    def list_rows(self, *args):
        out = self.ok("gnt-backup", "list", "--no-headers", *args)
        return [line.split() for line in out.splitlines() if line.strip()]

    def test_export_list_import_remove(self):
        n1, n2, n3 = (self.node(i) for i in range(3))
        self.create(SOURCE, template="file", node=0, disks=[{"size": 8}],
                    ignore_ipolicy=True)
        src_disk = self.disk_path(SOURCE)
        # data beyond the OS's install record, as a user would have
        with open(src_disk, "r+b") as f:
            f.seek(3 * 1024 * 1024)
            f.write(os.urandom(100 * 1024))
        original = _read(src_disk)
        self.assertTrue(original.startswith(b"GANETI-BUSYBOX-OS v1"))

        # bad input first: refused, clearly, nothing written anywhere
        for args, message in (
                (("-n", "nosuchnode", SOURCE), "target_node"),
                (("-n", n2.name, "--compress", "lzma", SOURCE),
                 "compress: 'lzma' is not supported"),
                (("-n", n2.name, "--zero-free-space", SOURCE),
                 "zero_free_space"),
                (("-n", n2.name, "--noshutdown", "--remove-instance",
                  SOURCE), "without shutting it down")):
            code, out = self.gnt("gnt-backup", "export", *args)
            self.assertNotEqual(code, 0, out)
            self.assertIn(message, out)
        self.assertFalse(os.path.exists(self.export_dir(n2)))

        out = self.ok("gnt-backup", "export", "-n", n2.name, SOURCE)
        self.assertIn("Shutting down instance %s" % SOURCE, out)
        self.assertIn("Copying disk/0 to %s" % n2.name, out)
        # restarted afterwards: it was running
        info = self.query(SOURCE)
        self.assertEqual(info["run_state"], "up")
        self.assertIsNotNone(self.fake_pid(n1, SOURCE))
        directory = self.export_dir(n2)
        config = _read(os.path.join(directory, "config.ini")).decode()
        self.assertIn("[export]\nversion = 0\n", config)
        self.assertIn("name = %s\n" % SOURCE, config)
        self.assertIn("disk0_size = 8\n", config)
        self.assertIn("os = busybox+default\n", config)
        # nothing else but the dump, and no temporary files left
        self.assertEqual(len(os.listdir(directory)), 2)
        self.assertEqual(
            [n for n in os.listdir(os.path.dirname(directory))
             if n.startswith(".") and n != ".transfer"], [])

        self.assertEqual(self.list_rows(), [[n2.name, SOURCE]])
        self.assertEqual(self.list_rows("--node", n3.name), [])
        self.assertEqual(self.client.call("QueryExports", None, False),
                         {n1.name: [], n2.name: [SOURCE], n3.name: []})
        if not ganeti_peer.unavailable_reason():
            code, theirs = self.theirs("list")
            self.assertEqual(code, 0, theirs)
            self.assertEqual(theirs, self.ok("gnt-backup", "list"))
            code, theirs = self.theirs("list", "--node", n2.name,
                                       "--no-headers")
            self.assertEqual(code, 0, theirs)
            self.assertEqual(theirs.split(), [n2.name, SOURCE])

        # import: a missing export, then the real one on node3
        code, out = self.gnt(
            "gnt-backup", "import", "-n", n3.name, "--src-node", n1.name,
            "--src-dir", SOURCE, "--no-name-check", "--no-ip-check",
            "--net", "0:mac=generate", COPY)
        self.assertNotEqual(code, 0, out)
        self.assertIn("no export %s" % SOURCE, out)
        code, out = self.gnt("gnt-instance", "list", "--no-headers", "-o",
                             "name")
        self.assertNotIn(COPY, out)
        out = self.ok("gnt-backup", "import", "-n", n3.name, "--src-node",
                      n2.name, "--src-dir", SOURCE, "--no-name-check",
                      "--no-ip-check", "--net", "0:mac=generate",
                      "--ignore-ipolicy", COPY)
        self.assertIn("Importing disk/0", out)
        info = self.query(COPY)
        self.assertEqual((info["pnode"], info["run_state"]), (n3.name, "up"))
        self.assertEqual(info["os"], "busybox+default")
        self.assertEqual(info["disk_template"], "file")
        self.assertEqual(info["disks"][0]["size"], 8)
        copy_disk = self.disk_path(COPY)
        self.assertNotEqual(copy_disk, src_disk)
        self.assertEqual(_read(copy_disk), original)

        # an export again (gzip this time) to node3 replaces the one on
        # node2: Ganeti keeps one export per instance
        self.ok("gnt-backup", "export", "-n", n3.name, "--compress", "gzip",
                SOURCE)
        self.assertEqual(self.list_rows(), [[n3.name, SOURCE]])
        self.assertFalse(os.path.exists(self.export_dir(n2)))
        self.assertIn("compression = gzip", _read(os.path.join(
            self.export_dir(n3), "config.ini")).decode())

        if not ganeti_peer.unavailable_reason():
            # Ganeti's own gnt-backup drives our master
            code, out = self.theirs("export", "-n", n1.name, SOURCE)
            self.assertEqual(code, 0, out)
            self.assertEqual(self.list_rows(), [[n1.name, SOURCE]])
            code, out = self.theirs(
                "import", "-n", n2.name, "--src-node", n1.name,
                "--src-dir", SOURCE, "--no-name-check", "--no-ip-check",
                "--net", "0:mac=generate", "--ignore-ipolicy",
                "copy2.example.com")
            self.assertEqual(code, 0, out)
            self.assertEqual(_read(self.disk_path("copy2.example.com")),
                             original)
            code, out = self.theirs("remove", SOURCE)
            self.assertEqual(code, 0, out)
            self.assertEqual(self.list_rows(), [])
            self.ok("gnt-backup", "export", "-n", n3.name, SOURCE)
        self.ok("gnt-backup", "remove", SOURCE)
        self.assertEqual(self.list_rows(), [])
        self.assertFalse(os.path.exists(self.export_dir(n3)))
        code, out = self.gnt("gnt-backup", "remove", SOURCE)
        self.assertNotEqual(code, 0)
        self.assertIn("No export found for instance %s" % SOURCE, out)


CLIENT_SCRIPT = textwrap.dedent("""
    import json, sys
    from ganeti.rapi import client

    host, port, user, password, instance, node = sys.argv[1:7]
    c = client.GanetiRapiClient(host, port=int(port), username=user,
                                password=password)
    out = {}

    def wait(job):
        c.WaitForJobCompletion(job, period=0.2, retries=600)
        status = c.GetJobStatus(job)
        return [status["status"], status["opresult"]]

    out["prepare"] = wait(c.PrepareExport(instance, "local"))
    out["prepare_remote"] = wait(c.PrepareExport(instance, "remote"))
    out["export"] = wait(c.ExportInstance(instance, "local", node,
                                          shutdown=False, compress="gzip"))
    out["export_bad"] = wait(c.ExportInstance(instance, "local", "ghost"))
    print(json.dumps(out))
""")


class GanetiRapiClientExportTests(RapiDaemonTestCase):

    def setUp(self):
        ganeti_peer.skip_unless_available()
        RapiDaemonTestCase.setUp(self)

    def test_export_through_rapi(self):
        self.run_job(self.create_op(disks=[{"size": 4}],
                                    ignore_ipolicy=True))
        node = self.vc.master
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ganeti_peer.GANETI_LIB,
               "LANG": "C.UTF-8"}
        proc = subprocess.run(
            [ganeti_peer.GANETI_PYTHON, "-c", CLIENT_SCRIPT, node.ip,
             str(TLS_PORT), USER, PASSWORD, INSTANCE, node.name],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode())
        out = json.loads(proc.stdout.decode())
        self.assertEqual(out["prepare"], ["success", [None]])
        # the cluster's domain secret (made with the cluster) signs what a
        # remote export hands to the destination cluster
        status, result = out["prepare_remote"]
        self.assertEqual(status, "success", result)
        self.assertEqual(sorted(result[0]),
                         ["handshake", "x509_ca", "x509_key_name"])
        self.assertIn("X-Ganeti-Signature:", result[0]["x509_ca"])
        self.assertEqual(out["export"], ["success", [[True, [True]]]])
        self.assertEqual(out["export_bad"][0], "error")
        self.assertIn("target_node", json.dumps(out["export_bad"][1]))
        config = os.path.join(node.root, "var/lib/ganeti/export", INSTANCE,
                              "config.ini")
        self.assertTrue(os.path.isfile(config))
        resp, body = self.http("GET", "/2/query/export?fields=node,export",
                               tls=True, user=(USER, PASSWORD))
        self.assertEqual(resp.status, 200, body)
        self.assertEqual(body["data"], [[[0, node.name], [0, INSTANCE]]])




class KvmExportImportTests(KvmClusterTestCase):
    """A real kvm guest (qemu TCG, the tiny test guest) exported and
    imported: the imported instance boots.  One node: the export is
    written to the instance's own node, as Ganeti allows."""

    BASE_PREFIX = "gnt-kb-"

    def test_exported_guest_boots_when_imported(self):
        self.create("vm1", "idle")
        self.wait_status("vm1", "running")
        wait_for("the guest to boot", lambda: "ganeti-test: booted" in
                 self.console("vm1"), BOOT_DEADLINE, 0.25)
        node = self.vc.master.name
        result = self.run_job({"OP_ID": "OP_BACKUP_EXPORT",
                               "instance_name": "vm1", "target_node": node,
                               "shutdown_timeout": 10, "compress": "gzip"})
        self.assertEqual(result, [True, [True]])
        # restarted after the export
        self.wait_status("vm1", "running")
        self.run_job({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "vm2",
                      "mode": "import", "src_node": node, "src_path": "vm1",
                      "pnode": node, "disks": [], "nics": [],
                      "name_check": False, "ip_check": False,
                      "ignore_ipolicy": True})
        info = self.run_job({"OP_ID": "OP_INSTANCE_QUERY_DATA",
                             "instances": ["vm1", "vm2"]})
        self.assertEqual(info["vm2"]["hypervisor"], "kvm")
        self.assertEqual(info["vm2"]["hv_instance"]["kernel_args"],
                         "quiet ganeti_test=idle")
        disks = [_read(info[n]["disks"][0]["logical_id"][1])
                 for n in ("vm1", "vm2")]
        self.assertEqual(disks[0], disks[1])
        self.wait_status("vm2", "running")
        wait_for("the imported guest to boot",
                 lambda: "ganeti-test: booted, mode=idle" in
                 self.console("vm2"), BOOT_DEADLINE, 0.25)
        for name in ("vm1", "vm2"):
            self.run_job({"OP_ID": "OP_INSTANCE_REMOVE",
                          "instance_name": name, "shutdown_timeout": 10})
