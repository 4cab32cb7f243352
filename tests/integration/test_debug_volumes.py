"""The debugging, volume and disk size commands through the real daemons,
with our commands and Ganeti's own (tests/ganeti_peer.py, skipped with
the reason when Ganeti 3.0 is not installed).

One node (masterd + noded on a random loopback address) with an LVM
volume group on a loop device made by the test (removed by name
afterwards, also on failure; skipped with the reason without
root/losetup/lvm2):

* ``gnt-node volumes`` lists the logical volume of a plain instance with
  the instance's name, ours and Ganeti's alike;
* a file disk and a logical volume grow behind the cluster's back;
  ``gnt-cluster repair-disk-sizes`` records their real sizes (Ganeti's
  command then finds nothing to correct);
* ``gnt-debug test-jobqueue`` (Ganeti's, and ours) passes against our
  job queue; ``gnt-debug test-osparams`` never shows the secret;
* OP_QUERY answers what luxi's Query answers.
"""

import os

from tests import ganeti_peer
from tests.integration.test_migration import ClusterTestCase
from tests.test_storage_units import _run, make_vg

MiB = 1024 * 1024
FILE_INST = "inst1.example.com"
PLAIN_INST = "inst2.example.com"
SECRET = "pw-7d1f0c93"


class DebugVolumesTests(ClusterTestCase):

    NODES = 1

    def peer(self, tool, *args):
        code, out = ganeti_peer.run_tool(tool, list(args),
                                         self.vc.master.root,
                                         self.vc.master.name, timeout=240)
        self.assertEqual(code, 0, "Ganeti's %s %s failed:\n%s"
                         % (tool, " ".join(args), out))
        return out

    def disk_sizes(self, name):
        info = self.query(name)
        return [d["size"] for d in info["disks"]]

    def test_volumes_and_repair_disk_sizes(self):
        vg, _ = make_vg(self, pvs=1, size_mb=128)
        node = self.node(0).name
        self.run_job({"OP_ID": "OP_CLUSTER_SET_PARAMS", "vg_name": vg,
                      "enabled_disk_templates": ["file", "sharedfile",
                                                 "diskless", "plain"]})
        self.create(FILE_INST, template="file", disks=[{"size": 16}],
                    ignore_ipolicy=True, start=False)
        self.create(PLAIN_INST, template="plain", disks=[{"size": 16}],
                    ignore_ipolicy=True, start=False, no_install=True)
        lv = self.query(PLAIN_INST)["disks"][0]["logical_id"][1]

        out = self.ok("gnt-node", "volumes", "--no-headers",
                      "--separator", "|", node)
        mine = [l for l in out.splitlines() if "|%s|" % vg in l]
        self.assertEqual(len(mine), 1, out)
        fields = mine[0].split("|")
        self.assertEqual(fields[0], node)
        self.assertTrue(fields[1].startswith("/dev/loop"), fields)
        self.assertEqual(fields[2:], [vg, lv, "16", PLAIN_INST])
        if ganeti_peer.unavailable_reason() is None:
            out = self.peer("gnt-node", "volumes", "--no-headers",
                            "--separator", "|", "--units", "m", node)
            self.assertIn("|".join(fields), out.splitlines())

        # the disks grow behind the cluster's back
        path = self.query(FILE_INST)["disks"][0]["logical_id"][1]
        with open(path, "r+b") as f:
            f.truncate(20 * MiB)
        res = _run("lvextend", "--config", "global/activation=0", "-L",
                   "+8m", "%s/%s" % (vg, lv))
        self.assertEqual(res.returncode, 0, res.stderr)
        out = self.ok("gnt-cluster", "repair-disk-sizes")
        self.assertIn("Disk 0 of instance %s has mismatched size, correcting:"
                      " recorded 16, actual 20" % FILE_INST, out)
        self.assertIn("Disk 0 of instance %s has mismatched size, correcting:"
                      " recorded 16, actual 24" % PLAIN_INST, out)
        self.assertEqual(self.disk_sizes(FILE_INST), [20])
        self.assertEqual(self.disk_sizes(PLAIN_INST), [24])
        result, _ = self.run_job({"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES",
                                  "instances": [PLAIN_INST]})
        self.assertEqual(result, [])
        code, out = self.gnt("gnt-cluster", "repair-disk-sizes",
                             "nosuch.example.com")
        self.assertNotEqual(code, 0)
        self.assertIn("nosuch.example.com", out)
        if ganeti_peer.unavailable_reason() is None:
            with open(path, "r+b") as f:
                f.truncate(22 * MiB)
            out = self.peer("gnt-cluster", "repair-disk-sizes", FILE_INST)
            self.assertIn("recorded 20, actual 22", out)
            self.assertEqual(self.disk_sizes(FILE_INST), [22])

    def test_debug_commands(self):
        out = self.ok("gnt-debug", "test-jobqueue")
        self.assertIn("Job queue test successful", out)
        if ganeti_peer.unavailable_reason() is None:
            out = self.peer("gnt-debug", "test-jobqueue")
            self.assertIn("Job queue test successful", out)
        out = self.ok("gnt-debug", "test-osparams",
                      "--os-parameters-secret", "root_pw=%s" % SECRET)
        self.assertIn("root_pw", out)
        self.assertNotIn(SECRET, out)
        code, out = self.gnt("gnt-debug", "test-osparams")
        self.assertNotEqual(code, 0)
        self.assertIn("Opcode needs secret parameters", out)
        out = self.ok("gnt-debug", "delay", "0")
        if ganeti_peer.unavailable_reason() is None:
            out = self.peer("gnt-debug", "test-osparams",
                            "--os-parameters-secret", "root_pw=%s" % SECRET)
            self.assertIn("root_pw", out)
            self.assertNotIn(SECRET, out)
            self.peer("gnt-debug", "delay", "0.1")
        queue = self.vc.master.paths.queue_dir
        for dirpath, _, files in os.walk(queue):
            for name in files:
                with open(os.path.join(dirpath, name), "rb") as f:
                    self.assertNotIn(SECRET.encode(), f.read(), name)

    def test_query_opcodes_answer_as_luxi(self):
        self.create(FILE_INST, template="file", disks=[{"size": 16}],
                    ignore_ipolicy=True, start=False)
        fields = ["name", "pnode", "disk_template", "admin_state"]
        result, _ = self.run_job({"OP_ID": "OP_QUERY", "what": "instance",
                                  "fields": fields,
                                  "qfilter": ["=", "name", FILE_INST]})
        self.assertEqual(result, self.client.call(
            "Query", "instance", fields, ["=", "name", FILE_INST]))
        result, _ = self.run_job({"OP_ID": "OP_QUERY_FIELDS",
                                  "what": "node", "fields": ["name"]})
        self.assertEqual(result, self.client.call("QueryFields", "node",
                                                  ["name"]))
        result, _ = self.run_job({"OP_ID": "OP_CLUSTER_CONFIG_QUERY",
                                  "output_fields": ["cluster_name",
                                                    "master_node",
                                                    "drain_flag"]})
        self.assertEqual(result[1:], [self.node(0).name, False])
