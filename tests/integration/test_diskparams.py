"""Disk parameters through the real daemons and commands.

One node (masterd + noded on a random loopback address) and an LVM volume
group on two loop devices made by the test (removed by name afterwards,
also on failure; skipped with the reason without root/losetup/lvm2):

* ``gnt-cluster modify -D plain:stripes=x`` is refused naming the
  parameter, nothing changes;
* ``gnt-cluster modify -D plain:stripes=2``: a plain instance's disk is
  an LV of two stripes (``lvs -o stripes``);
* ``gnt-group modify -D plain:stripes=3`` (more than the VG's two PVs): the
  next disk falls back to two stripes;
* the same with Ganeti 3.0's own gnt-cluster and gnt-group (skipped when
  it is not installed).

Without device-mapper the LVs exist as metadata only, so the instances are
created without OS installation and not started.
"""

from tests import ganeti_peer
from tests.integration.test_migration import ClusterTestCase
from tests.test_storage_units import _run, make_vg


class DiskParamsDaemonTests(ClusterTestCase):

    NODES = 1

    def setUp(self):
        # sparse images; without device-mapper nothing is written to them
        self.vg, self.devices = make_vg(self, pvs=2, size_mb=2048)
        ClusterTestCase.setUp(self)
        self.ok("gnt-cluster", "modify", "--vg-name", self.vg,
                "--enabled-disk-templates", "file,sharedfile,plain")

    def add(self, name):
        self.ok("gnt-instance", "add", "-t", "plain", "-o", "busybox+default",
                "-n", self.node(0).name, "--disk", "0:size=1G",
                "-B", "memory=128M", "--no-name-check", "--no-ip-check",
                "--no-install", "--no-start", name)
        info = self.query(name)
        vg, lv = info["disks"][0]["logical_id"]
        self.assertEqual(vg, self.vg)
        out = _run("lvs", "--noheadings", "-o", "stripes,devices",
                   "%s/%s" % (vg, lv))
        self.assertEqual(out.returncode, 0, out.stderr)
        # one line per segment: its stripes and devices
        stripes, devices = set(), set()
        for line in out.stdout.decode().splitlines():
            count, devs = line.split()
            stripes.add(int(count))
            devices.update(d.split("(")[0] for d in devs.split(","))
        return sorted(stripes), sorted(devices)

    def test_stripes(self):
        code, out = self.gnt("gnt-cluster", "modify", "-D",
                             "plain:stripes=x")
        self.assertNotEqual(code, 0)
        self.assertIn("diskparams/plain/stripes: 'x' is not an integer",
                      out)
        self.assertIn("stripes: 1", self.ok("gnt-cluster", "info"))

        self.ok("gnt-cluster", "modify", "-D", "plain:stripes=2")
        self.assertEqual(self.add("inst1.example.com"),
                         ([2], sorted(self.devices)))

        self.ok("gnt-group", "modify", "-D", "plain:stripes=3", "default")
        self.assertEqual(self.add("inst2.example.com"),
                         ([2], sorted(self.devices)))

        self.ok("gnt-group", "modify", "-D", "plain:stripes=1", "default")
        self.assertEqual(self.add("inst3.example.com")[0], [1])

    def test_with_ganetis_own_commands(self):
        ganeti_peer.skip_unless_available()
        node = self.vc.master

        def ganeti(tool, *args):
            return ganeti_peer.run_tool(tool, args, node.root, node.name)
        code, out = ganeti("gnt-cluster", "modify", "-D", "plain:stripes=2")
        self.assertEqual(code, 0, out)
        self.assertEqual(self.add("inst1.example.com"),
                         ([2], sorted(self.devices)))
        code, out = ganeti("gnt-group", "modify", "-D", "plain:stripes=1",
                           "default")
        self.assertEqual(code, 0, out)
        self.assertEqual(self.add("inst2.example.com")[0], [1])
        # what Ganeti's tools show: the typed values
        code, out = ganeti("gnt-group", "info", "default")
        self.assertEqual(code, 0, out)
        self.assertIn("stripes: 1", out)
        code, out = ganeti("gnt-cluster", "modify", "-D",
                           "drbd:protocol=D")
        self.assertNotEqual(code, 0, out)
        self.assertIn("diskparams/drbd/protocol: 'D' is not a DRBD"
                      " replication protocol", out)
