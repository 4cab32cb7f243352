"""Networks against real daemons: our gnt-network next to Ganeti 3.0's own,
and Ganeti's RAPI client adding, connecting, modifying and removing
networks through ganeti-rapi."""

import json
import subprocess
import textwrap

from tests import ganeti_peer
from tests.integration.test_cli import NODE, ClusterTestCase
from tests.integration.test_rapi import (PASSWORD, TLS_PORT, USER,
                                         RapiDaemonTestCase)


class GntNetworkTests(ClusterTestCase):

    def theirs(self, *args):
        return ganeti_peer.run_tool("gnt-network", args, self.root, NODE,
                                    timeout=60)

    def test_ours_and_ganetis(self):
        self.init()
        self.ok("gnt-network", "add", "--network", "192.0.2.0/28", "-g",
                "192.0.2.1", "--add-reserved-ips", "192.0.2.5,192.0.2.6",
                "--tags", "lab", "net1")
        self.ok("gnt-network", "connect", "-N", "mode=bridged,link=br0",
                "net1")
        # bad input: refused, naming the field, nothing changed
        for args, message in (
                (("--network", "192.0.2.0/24", "net2"),
                 "network: 192.0.2.0/24 overlaps network net1"),
                (("--network", "10.0.0.0/8", "net2"), "between /16 and /30"),
                (("--network", "10.0.0.0/24", "-g", "10.0.1.1", "net2"),
                 "gateway: 10.0.1.1 is outside")):
            code, out = self.gnt("gnt-network", "add", *args)
            self.assertNotEqual(code, 0, out)
            self.assertIn(message, out)
        code, out = self.gnt("gnt-network", "remove", "net1")
        self.assertNotEqual(code, 0)
        self.assertIn("connected to the node groups default", out)
        out = self.ok("gnt-network", "list", "--no-headers", "-o",
                      "name,free_count,reserved_count")
        self.assertEqual(out.split(), ["net1", "11", "5"])
        info = self.ok("gnt-network", "info", "net1")
        self.assertIn("  Free: 11 (68.75%)", info)
        self.assertIn("    default (mode:bridged link:br0 vlan:)", info)
        if ganeti_peer.unavailable_reason():
            return
        for args in (("list",), ("info", "net1"),
                     ("list", "-o", "name,network,free_count,map,"
                      "external_reservations,group_list,tags")):
            code, theirs = self.theirs(*args)
            self.assertEqual(code, 0, theirs)
            self.assertEqual(self.ok("gnt-network", *args), theirs, args)
        # Ganeti's tool drives our master
        code, out = self.theirs("add", "--network", "198.51.100.0/29",
                                "--gateway", "198.51.100.1", "net2")
        self.assertEqual(code, 0, out)
        code, out = self.theirs("modify", "--add-reserved-ips",
                                "198.51.100.3", "net2")
        self.assertEqual(code, 0, out)
        code, out = self.theirs("connect", "--nic-parameters",
                                "mode=routed,link=rt1", "net2")
        self.assertEqual(code, 0, out)
        out = self.ok("gnt-network", "list", "--no-headers", "-o",
                      "name,free_count,group_list", "net2")
        self.assertEqual(out.split(None, 2),
                         ["net2", "4", "default (routed, rt1, )\n"])
        code, out = self.theirs("add", "--network", "198.51.100.0/30", "n3")
        self.assertNotEqual(code, 0)
        self.assertIn("overlaps network net2", out)
        for tool in (self.theirs, lambda *a: self.gnt("gnt-network", *a)):
            code, out = tool("disconnect", "net2")
            self.assertEqual(code, 0, out)
        code, out = self.theirs("remove", "net2")
        self.assertEqual(code, 0, out)
        out = self.ok("gnt-network", "list", "--no-headers", "-o", "name")
        self.assertEqual(out.split(), ["net1"])

    def add_instance(self, name, *net):
        return self.gnt(
            "gnt-instance", "add", "-t", "file", "-o", "busybox+default",
            "-n", NODE, "-s", "1G", "-B", "memory=128M", "--no-name-check",
            "--no-ip-check", "--no-start", *(net + (name,)))

    def test_instances_take_addresses_from_the_pool(self):
        self.init()
        self.ok("gnt-network", "add", "--network", "192.0.2.0/29", "-g",
                "192.0.2.1", "net1")
        code, out = self.add_instance("inst0", "--net",
                                      "0:network=net1,ip=pool")
        self.assertNotEqual(code, 0)
        self.assertIn("network net1 is not connected to node group default",
                      out)
        self.ok("gnt-network", "connect", "-N", "mode=bridged,link=br0",
                "net1")
        code, out = self.add_instance("inst1", "--net",
                                      "0:network=net1,ip=pool")
        self.assertEqual(code, 0, out)
        code, out = self.add_instance("inst2", "--net",
                                      "0:network=net1,ip=192.0.2.2")
        self.assertNotEqual(code, 0)
        self.assertIn("192.0.2.2 is already in use by instance inst1", out)
        code, out = self.add_instance("inst2", "--net",
                                      "0:network=net1,ip=pool")
        self.assertEqual(code, 0, out)
        out = self.ok("gnt-instance", "list", "--no-headers", "-o",
                      "name,nic.ips,nic.networks.names")
        self.assertEqual(out.split(), ["inst1", "192.0.2.2", "net1",
                                       "inst2", "192.0.2.3", "net1"])
        info = self.ok("gnt-network", "info", "net1")
        self.assertIn("  Free: 3 (37.50%)", info)
        self.assertIn("  used by 2 instances:\n    inst1: 0:192.0.2.2\n"
                      "    inst2: 0:192.0.2.3", info)
        if not ganeti_peer.unavailable_reason():
            code, theirs = self.theirs("info", "net1")
            self.assertEqual(info, theirs)
        self.ok("gnt-instance", "remove", "-f", "inst1")
        out = self.ok("gnt-network", "list", "--no-headers", "-o",
                      "name,free_count,map,inst_list")
        self.assertEqual(out.split(), ["net1", "4", "XX.X...X", "inst2"])


CLIENT_SCRIPT = textwrap.dedent("""
    import json, sys
    from ganeti.rapi import client

    host, port, group, user, password = sys.argv[1:6]
    c = client.GanetiRapiClient(host, port=int(port), username=user,
                                password=password)
    out = {}

    def wait(job):
        c.WaitForJobCompletion(job, period=0.2, retries=600)
        status = c.GetJobStatus(job)
        return [status["status"], status["opresult"]]

    out["add"] = wait(c.CreateNetwork("net1", "192.0.2.0/28",
                                      gateway="192.0.2.1",
                                      add_reserved_ips="192.0.2.9",
                                      tags="a,b"))
    out["overlap"] = wait(c.CreateNetwork("net2", "192.0.2.0/24"))
    out["connect"] = wait(c.ConnectNetwork("net1", group, "bridged", "br0"))
    out["modify"] = wait(c.ModifyNetwork("net1", gateway="192.0.2.14",
                                         mac_prefix="aa:00:05"))
    out["list"] = c.GetNetworks()
    net = c.GetNetwork("net1")
    out["net"] = dict((k, net[k]) for k in (
        "name", "network", "gateway", "mac_prefix", "free_count",
        "reserved_count", "map", "group_list", "tags"))
    out["remove_connected"] = wait(c.DeleteNetwork("net1"))
    out["disconnect"] = wait(c.DisconnectNetwork("net1", group))
    out["remove"] = wait(c.DeleteNetwork("net1"))
    out["after"] = c.GetNetworks()
    print(json.dumps(out))
""")


class GanetiRapiClientNetworkTests(RapiDaemonTestCase):

    def setUp(self):
        ganeti_peer.skip_unless_available()
        RapiDaemonTestCase.setUp(self)

    def test_network_life_cycle(self):
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ganeti_peer.GANETI_LIB,
               "LANG": "C.UTF-8"}
        proc = subprocess.run(
            [ganeti_peer.GANETI_PYTHON, "-c", CLIENT_SCRIPT,
             self.vc.master.ip, str(TLS_PORT), "default", USER, PASSWORD],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode())
        out = json.loads(proc.stdout.decode())
        for step in ("add", "connect", "modify", "disconnect", "remove"):
            self.assertEqual(out[step][0], "success", (step, out[step]))
        self.assertEqual(out["overlap"][0], "error")
        self.assertIn("network: 192.0.2.0/24 overlaps network net1",
                      json.dumps(out["overlap"][1]))
        self.assertEqual(out["remove_connected"][0], "error")
        self.assertIn("connected to the node groups default",
                      json.dumps(out["remove_connected"][1]))
        self.assertEqual(out["list"], ["net1"])
        self.assertEqual(out["net"], {
            "name": "net1", "network": "192.0.2.0/28",
            "gateway": "192.0.2.14", "mac_prefix": "aa:00:05",
            "free_count": 12, "reserved_count": 4,
            "map": "X" + "." * 8 + "X" + "." * 4 + "XX",
            "group_list": [["default", "bridged", "br0", ""]],
            "tags": ["a", "b"]})
        self.assertEqual(out["after"], [])

