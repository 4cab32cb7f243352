"""Ganeti's own htools on a fresh demo cluster: ``hcheck -m`` finds it
healthy, ``hspace -m`` plans, and what it plans is what the master admits.

The demo (three nodes, one instance each and a forthcoming reservation) runs
as a user starts it; the tools read its remote API like any Ganeti
cluster's.
"""

import os
import subprocess

from twisted.trial import unittest

from ganeti import luxi
from tests.integration.daemons import wait_for
from tests.integration.demo_process import RunningDemo

BINDIR = "/usr/lib/ganeti/3.0/usr/bin"
RAPI_PORT = 5080


def run_tool(tool, *args):
    proc = subprocess.run([os.path.join(BINDIR, tool)] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=120, env={"PATH": "/usr/bin:/bin",
                                            "LANG": "C.UTF-8"})
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def machine_readable(text):
    """``KEY=value`` lines as a dict."""
    return dict(line.split("=", 1) for line in text.splitlines()
                if "=" in line and not line.startswith(" "))


class DemoHtoolsTests(unittest.TestCase):

    def setUp(self):
        for tool in ("hcheck", "hspace"):
            if not os.access(os.path.join(BINDIR, tool), os.X_OK):
                raise unittest.SkipTest("%s is missing (apt-get install"
                                        " ganeti-htools-3.0)" % tool)
        self.demo = RunningDemo(self, nodes=3, timeout=180)
        self.target = "https://%s:%d" % (self.demo.ips[0], RAPI_PORT)
        self.socket = os.path.join(self.demo.root(), "var", "run", "ganeti",
                                   "socket", "ganeti-query")

    def luxi(self, method, *args):
        with luxi.BlockingClient(self.socket, 60) as c:
            return c.call(method, *args)

    def run_job(self, op):
        with luxi.BlockingClient(self.socket, 60) as c:
            job = c.submit_job([op])
            wait_for("job %s" % job, lambda: c.query_jobs(
                [job], ["status"])[0][0] in ("success", "error",
                                             "canceled"), timeout=120)
            return c.query_jobs([job], ["status", "opresult", "oplog"])[0]

    def test_healthy_and_hspace_plans_what_the_master_admits(self):
        code, out = run_tool("hcheck", "-m", self.target)
        self.assertEqual(code, 0, out)
        self.assertIn("Cluster is not healthy: False", out)
        self.assertNotIn("Cluster is not healthy: True", out)
        self.assertIn("Nodes not directly evacuateable: 0", out)

        # the reservation counts like a stopped instance: 4 instances
        code, out = run_tool("hspace", "-m", self.target,
                             "--machine-readable")
        self.assertEqual(code, 0, out)
        hts = machine_readable(out)
        self.assertEqual(hts.get("HTS_OK"), "1", out)
        self.assertEqual(hts["HTS_INI_INST_CNT"], "4", out)
        allocated = int(hts["HTS_ALLOC_INSTANCES"])
        self.assertGreater(allocated, 0, out)
        # only enabled disk templates are planned with
        self.assertEqual(hts["HTS_SPEC_DISK_TEMPLATE"], "file", out)

        # What the master reports available is what hspace counts: the
        # standard instance (1 vCPU, HTS_SPEC_MEM MiB) fits that often.
        answer = self.luxi("Query", "node",
                           ["name", "avail.vcpus", "avail.mem"], None)
        vcpus = [row[1][1] for row in answer["data"]]
        mems = [row[2][1] for row in answer["data"]]
        spec_mem = int(hts["HTS_SPEC_MEM"])
        per_node = [min(v, m // spec_mem) for v, m in zip(vcpus, mems)]
        if hts["HTS_ALLOC_FAIL_REASON"] in ("FAILCPU", "FAILMEM"):
            self.assertEqual(allocated, sum(per_node), (answer, out))

        # ... and the master admits such an instance where hspace would put
        # one; an instance below the policy's minimum it refuses.
        node = "node%d.example.com" % (per_node.index(max(per_node)) + 1)
        op = {"OP_ID": "OP_INSTANCE_CREATE", "mode": "create",
              "instance_name": "planned.example.com", "pnode": node,
              "disk_template": hts["HTS_SPEC_DISK_TEMPLATE"],
              "disks": [{"size": int(hts["HTS_SPEC_DSK"])}],
              "nics": [{"mode": "routed", "link": "100",
                        "ip": "192.0.2.99"}],
              "os_type": "busybox+default", "hypervisor": "fake",
              "beparams": {"memory": spec_mem,
                           "vcpus": int(hts["HTS_SPEC_CPU"])},
              "name_check": False, "ip_check": False, "start": False}
        status, result, _ = self.run_job(op)
        self.assertEqual(status, "success", result)
        small = dict(op, instance_name="small.example.com",
                     disks=[{"size": 100}], beparams={"memory": 64},
                     nics=[{"mode": "routed", "link": "100",
                            "ip": "192.0.2.98"}])
        status, result, _ = self.run_job(small)
        self.assertEqual(status, "error")
        self.assertIn("violates policy", str(result))
        self.assertIn("memory-size value 64 is not in range [128, 32768]",
                      str(result))
        self.assertIn("disk-size/0 value 100 is not in range"
                      " [1024, 1048576]", str(result))
