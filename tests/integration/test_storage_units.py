"""Storage units through the real daemons and the real gnt-node command.

One node (masterd + noded, random loopback address), an LVM volume group
on two loop devices made by the test (removed by name afterwards, also on
failure; skipped with the reason without root/losetup/lvm2):

* ``gnt-node list-storage -t lvm-pv`` shows the PVs, ``modify-storage
  --allocatable no`` stops allocations on one (``pvs`` agrees);
* one PV's loop device goes away; ``repair-storage ... lvm-vg`` removes
  it from the VG;
* the file storage directory is deleted; ``repair-storage ... file``
  makes it again.
"""

import os
import shutil

from tests.integration.test_migration import ClusterTestCase
from tests.test_storage_units import _run, make_vg, pv_attr


class StorageDaemonTests(ClusterTestCase):

    NODES = 1

    def setUp(self):
        self.vg, self.devices = make_vg(self)
        ClusterTestCase.setUp(self)

    def rows(self, storage_type, **kw):
        op = {"OP_ID": "OP_NODE_QUERY_STORAGE", "storage_type": storage_type,
              "output_fields": ["node", "name", "size", "free",
                                "allocatable"]}
        op.update(kw)
        result, _ = self.run_job(op)
        return result

    def test_lvm_units(self):
        node = self.node(0).name
        pvs = [r for r in self.rows("lvm-pv") if r[1] in self.devices]
        self.assertEqual(sorted(r[1] for r in pvs), sorted(self.devices))
        self.assertTrue(all(r[0] == node and r[4] is True for r in pvs))
        vgs = self.rows("lvm-vg", name=self.vg)
        self.assertEqual(len(vgs), 1)
        self.assertEqual(vgs[0][1], self.vg)

        out = self.ok("gnt-node", "list-storage", "-t", "lvm-pv",
                      "--no-headers", "--separator", "|", "-o",
                      "node,name,allocatable", node)
        lines = [l for l in out.splitlines()
                 if l.split("|")[1:2] and l.split("|")[1] in self.devices]
        self.assertEqual(sorted(lines), sorted("%s|%s|Y" % (node, d)
                                               for d in self.devices))

        dev = self.devices[0]
        self.ok("gnt-node", "modify-storage", "--allocatable", "no", node,
                "lvm-pv", dev)
        self.assertTrue(pv_attr(dev).startswith("u"), pv_attr(dev))
        out = self.ok("gnt-node", "list-storage", "-t", "lvm-pv",
                      "--no-headers", "--separator", "|", "-o",
                      "name,allocatable", node)
        self.assertIn("%s|N" % dev, out.splitlines())
        self.ok("gnt-node", "modify-storage", "--allocatable", "yes", node,
                "lvm-pv", dev)
        self.assertTrue(pv_attr(dev).startswith("a"), pv_attr(dev))

        # a disk of the VG dies
        self.assertEqual(_run("losetup", "-d", self.devices[1]).returncode,
                         0)
        out = self.ok("gnt-node", "repair-storage", node, "lvm-vg", self.vg)
        self.assertIn("removed 1 missing physical volume(s) from volume"
                      " group %s" % self.vg, out)
        out = _run("vgs", "--noheadings", "-o", "pv_count,"
                   "vg_missing_pv_count", self.vg)
        self.assertEqual(out.stdout.decode().split(), ["1", "0"])
        # PVs cannot be repaired, VGs cannot be modified: clear refusals
        code, out = self.gnt("gnt-node", "repair-storage", node, "lvm-pv",
                             dev)
        self.assertNotEqual(code, 0)
        self.assertIn("can not be repaired", out)
        code, out = self.gnt("gnt-node", "modify-storage", "--allocatable",
                             "no", node, "lvm-vg", self.vg)
        self.assertNotEqual(code, 0)
        self.assertIn("can not be modified", out)

    def test_file_directory_repair(self):
        node = self.node(0).name
        rows = self.rows("file")
        self.assertEqual([r[:2] for r in rows], [[node, self.fsd]])
        shutil.rmtree(self.fsd, ignore_errors=True)
        self.assertFalse(os.path.isdir(self.fsd))
        self.assertEqual(self.rows("file")[0][4], False)
        out = self.ok("gnt-node", "repair-storage", node, "file", self.fsd)
        self.assertIn("created the missing directory %s" % self.fsd, out)
        self.assertTrue(os.path.isdir(self.fsd))
        self.assertEqual(self.rows("file")[0][4], True)
