"""Where the virtual cluster's nodes listen: consecutive loopback addresses
from a first one, and the demo's ``--first-address`` that chooses it."""

import io
import os
import sys

from twisted.trial import unittest

from ganeti.dev import demo
from ganeti.dev import vcluster


class NodeAddressTests(unittest.TestCase):

    def test_consecutive_from_the_first(self):
        self.assertEqual(vcluster.node_addresses("127.0.0.1", 3),
                         ["127.0.0.1", "127.0.0.2", "127.0.0.3"])
        self.assertEqual(vcluster.node_addresses("127.4.0.254", 3),
                         ["127.4.0.254", "127.4.0.255", "127.4.1.0"])
        self.assertEqual(vcluster.node_addresses("127.255.255.254", 1),
                         ["127.255.255.254"])

    def refused(self, first, count):
        return str(self.assertRaises(ValueError, vcluster.node_addresses,
                                     first, count))

    def test_refusals_say_why(self):
        self.assertEqual(self.refused("node1", 1),
                         "'node1' is not an IPv4 address")
        self.assertEqual(self.refused("::1", 1),
                         "'::1' is not an IPv4 address")
        self.assertEqual(self.refused("192.0.2.1", 1),
                         "192.0.2.1 is not a loopback address (127.0.0.1 to"
                         " 127.255.255.254)")
        self.assertIn("127.0.0.0 is the loopback network's own address",
                      self.refused("127.0.0.0", 1))
        self.assertIn("127.255.255.255 is the loopback network's broadcast"
                      " address", self.refused("127.255.255.255", 1))
        self.assertEqual(self.refused("127.255.255.253", 3),
                         "no room for 3 nodes from 127.255.255.253: the last"
                         " loopback address for a node is 127.255.255.254")

    def test_cluster_nodes_listen_on_them(self):
        vc = vcluster.VirtualCluster(self.mktemp(), node_count=2,
                                     first_address="127.9.8.7")
        self.assertEqual([n.ip for n in vc.nodes], ["127.9.8.7", "127.9.8.8"])
        argv = vc.twistd_command("ganeti-noded", vc.nodes[1])
        self.assertEqual(argv[argv.index("--bind") + 1], "127.9.8.8")
        default = vcluster.VirtualCluster(self.mktemp(), node_count=3)
        self.assertEqual([n.ip for n in default.nodes],
                         ["127.0.0.1", "127.0.0.2", "127.0.0.3"])


class DemoFirstAddressTests(unittest.TestCase):

    def refused(self, *argv):
        """The demo's exit status and error output for ``argv``."""
        err = io.StringIO()
        self.patch(sys, "stderr", err)
        stopped = self.assertRaises(SystemExit, demo.main, list(argv))
        return stopped.code, err.getvalue()

    def test_bad_first_address_is_refused_before_anything_starts(self):
        base = os.path.abspath(self.mktemp())
        code, err = self.refused("--base", base, "--first-address",
                                 "10.0.0.1", "--once")
        self.assertEqual(code, 2)
        self.assertIn("--first-address: 10.0.0.1 is not a loopback address",
                      err)
        self.assertFalse(os.path.exists(base))

    def test_no_room_for_the_nodes(self):
        code, err = self.refused("--first-address", "127.255.255.250",
                                 "--nodes", "6", "--once")
        self.assertEqual(code, 2)
        self.assertIn("no room for 6 nodes from 127.255.255.250", err)

    def test_help_describes_it(self):
        out = io.StringIO()
        self.patch(sys, "stdout", out)
        self.assertRaises(SystemExit, demo.main, ["--help"])
        self.assertIn("--first-address ADDR", out.getvalue())
        self.assertIn("loopback IPv4 address of the first node",
                      " ".join(out.getvalue().split()))
