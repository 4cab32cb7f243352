"""Network logical units and the address pool, with a Clock."""

import json

from twisted.trial import unittest

from ganeti import errors
from ganeti import locking
from ganeti import objects
from ganeti.network_pool import AddressPool, parse_subnet

from tests.test_group_lus import GroupTestCase, NODE2


def _bits(*indexes, size=8):
    return "".join("1" if i in indexes else "0" for i in range(size))


class PoolTests(unittest.TestCase):

    def test_new_pool_reserves_network_broadcast_gateway(self):
        pool = AddressPool.new(parse_subnet("192.0.2.0/29"), "192.0.2.1")
        self.assertEqual(pool.store(), ("0" * 8, _bits(0, 1, 7)))
        self.assertEqual(pool.free_count(), 5)
        self.assertEqual(pool.generate_free(), "192.0.2.2")

    def test_reserve_release(self):
        pool = AddressPool.new(parse_subnet("192.0.2.0/30"))
        pool.reserve("192.0.2.1")
        self.assertTrue(pool.is_reserved("192.0.2.1", external=False))
        self.assertFalse(pool.is_reserved("192.0.2.1", external=True))
        err = self.assertRaises(errors.OpPrereqError, pool.reserve,
                                "192.0.2.1", True, "add_reserved_ips")
        self.assertIn("add_reserved_ips: 192.0.2.1 is already in use",
                      str(err))
        pool.release("192.0.2.1")
        self.assertEqual(pool.reserved_count(), 2)
        err = self.assertRaises(errors.OpPrereqError, pool.release,
                                "192.0.2.2")
        self.assertIn("is not in use", str(err))

    def test_outside_and_full(self):
        pool = AddressPool.new(parse_subnet("192.0.2.0/30"))
        err = self.assertRaises(errors.OpPrereqError, pool.reserve,
                                "192.0.3.1", False, "ip")
        self.assertIn("ip: 192.0.3.1 is outside", str(err))
        pool.reserve(pool.generate_free())
        pool.reserve(pool.generate_free())
        self.assertRaises(errors.OpPrereqError, pool.generate_free)

    def test_subnet_sizes(self):
        parse_subnet("10.0.0.0/16")
        parse_subnet("10.0.0.0/30")
        for bad, why in (("10.0.0.0/15", "between /16 and /30"),
                         ("10.0.0.0/31", "between /16 and /30"),
                         ("10.0.0.1/24", "not an IPv4 subnet")):
            err = self.assertRaises(errors.OpPrereqError, parse_subnet, bad)
            self.assertIn("network: '%s'" % bad, str(err))
            self.assertIn(why, str(err))


class NetworkLUTests(GroupTestCase):

    def add(self, name="net1", network="192.0.2.0/29", **params):
        return self.ok("OP_NETWORK_ADD", network_name=name, network=network,
                       **params)

    def net(self, name="net1"):
        return self.cfg.get_network(name)

    def pool(self, name="net1"):
        return AddressPool.of(self.net(name))

    def test_add(self):
        self.add(gateway="192.0.2.1", add_reserved_ips=["192.0.2.5"],
                 network6="2001:db8::/64", gateway6="2001:db8::1",
                 mac_prefix="AA:00:01", tags=["t1"])
        net = self.net()
        self.assertEqual(net.network, "192.0.2.0/29")
        self.assertEqual(net.gateway, "192.0.2.1")
        self.assertEqual(net.mac_prefix, "aa:00:01")
        self.assertEqual(net.reservations, "0" * 8)
        self.assertEqual(net.ext_reservations, _bits(0, 1, 5, 7))
        self.assertEqual(net.tags, ["t1"])
        self.assertIn(net.uuid, self.glm.lockset(
            locking.LEVEL_NETWORK).list_names())
        stored = json.loads(self.cfg.dumps())["networks"][net.uuid]
        self.assertEqual(stored["ext_reservations"], "11000101")
        self.assertEqual(stored["reservations"], "00000000")

    def test_add_refusals_change_nothing(self):
        self.add()
        serial = self.cfg.serial_no
        cases = [
            (dict(name="net1", network="198.51.100.0/24"),
             "network_name: network 'net1' already exists"),
            (dict(name="n2", network="192.0.2.0/24"),
             "network: 192.0.2.0/24 overlaps network net1"),
            (dict(name="n2", network="10.0.0.0/8"), "between /16 and /30"),
            (dict(name="n2", network="10.0.0.0/24", gateway="10.0.1.1"),
             "gateway: 10.0.1.1 is outside"),
            (dict(name="n2", network="10.0.0.0/24",
                  add_reserved_ips=["10.0.0.255"]),
             "add_reserved_ips: 10.0.0.255 is already reserved"),
            (dict(name="n2", network="10.0.0.0/24", mac_prefix="zz:00:00"),
             "mac_prefix: 'zz:00:00'"),
            (dict(name="n2", network="10.0.0.0/24", network6="2001:db8::/64",
                  gateway6="2001:db9::1"), "gateway6: 2001:db9::1"),
        ]
        for params, message in cases:
            name = params.pop("name")
            err = self.fails("OP_NETWORK_ADD", network_name=name, **params)
            self.assertIn(message, str(err))
        self.assertEqual(self.cfg.serial_no, serial)
        self.assertEqual(sorted(n.name for n in self.cfg.networks.values()),
                         ["net1"])

    def test_add_reserves_node_addresses(self):
        self.ok("OP_NETWORK_ADD", network_name="lo", network="127.0.0.0/29")
        self.assertTrue(self.pool("lo").is_reserved("127.0.0.2",
                                                    external=True))
        self.ok("OP_NETWORK_ADD", network_name="lo2",
                network="127.0.1.0/29", conflicts_check=False)

    def test_modify(self):
        self.add(gateway="192.0.2.1", add_reserved_ips=["192.0.2.5"])
        result = self.ok("OP_NETWORK_SET_PARAMS", network_name="net1",
                         gateway="192.0.2.6", add_reserved_ips=["192.0.2.2"],
                         remove_reserved_ips=["192.0.2.5"],
                         mac_prefix="aa:00:02", network6="2001:db8::/64")
        self.assertEqual([k for k, _ in result],
                         ["gateway", "mac_prefix", "network6"])
        net = self.net()
        self.assertEqual(net.gateway, "192.0.2.6")
        self.assertEqual(net.ext_reservations, _bits(0, 2, 6, 7))
        self.assertEqual(net.mac_prefix, "aa:00:02")
        self.assertEqual(net.serial_no, 2)

    def test_modify_refusals_change_nothing(self):
        self.add(gateway="192.0.2.1")
        before = self.cfg.dumps()
        cases = [
            ({}, "at least one modification"),
            (dict(remove_reserved_ips=["192.0.2.1"]),
             "remove_reserved_ips: 192.0.2.1 is the network's own"),
            (dict(remove_reserved_ips=["192.0.2.0"]),
             "remove_reserved_ips: 192.0.2.0 is the network's own"),
            (dict(remove_reserved_ips=["192.0.2.3"]),
             "remove_reserved_ips: 192.0.2.3 is not an external"),
            (dict(add_reserved_ips=["192.0.2.9"]),
             "add_reserved_ips: 192.0.2.9 is outside"),
            (dict(add_reserved_ips=["192.0.2.3"], gateway="192.0.2.7"),
             "gateway: 192.0.2.7 is already reserved"),
            (dict(add_reserved_ips=["192.0.2.3"],
                  remove_reserved_ips=["192.0.2.3"]), "also given in"),
        ]
        for params, message in cases:
            err = self.fails("OP_NETWORK_SET_PARAMS", network_name="net1",
                             **params)
            self.assertIn(message, str(err))
        err = self.fails("OP_NETWORK_SET_PARAMS", network_name="nope",
                         mac_prefix="aa:00:00")
        self.assertIn("network 'nope' is not known", str(err))
        self.assertEqual(self.cfg.dumps(), before)

    def test_modify_address_in_use(self):
        self.add()
        net = self.net()
        pool = self.pool()
        pool.reserve("192.0.2.3")
        self.cfg.set_network_params("net1", reservations=pool.store()[0])
        err = self.fails("OP_NETWORK_SET_PARAMS", network_name=net.name,
                         add_reserved_ips=["192.0.2.3"])
        self.assertIn("add_reserved_ips: 192.0.2.3 is already in use by an"
                      " instance", str(err))

    def connect(self, group="default", mode="bridged", link="br0", **kw):
        return self.ok("OP_NETWORK_CONNECT", network_name="net1",
                       group_name=group, network_mode=mode,
                       network_link=link, **kw)

    def test_connect_disconnect_remove(self):
        self.add()
        uuid = self.net().uuid
        self.connect()
        group = self.cfg.get_nodegroup("default")
        self.assertEqual(group.networks[uuid],
                         {"mode": "bridged", "link": "br0", "vlan": ""})
        self.connect()          # the same again: nothing changes
        err = self.fails("OP_NETWORK_CONNECT", network_name="net1",
                         group_name="default", network_mode="routed",
                         network_link="rt")
        self.assertIn("already connected to node group 'default' with mode"
                      " bridged", str(err))
        err = self.fails("OP_NETWORK_REMOVE", network_name="net1")
        self.assertIn("connected to the node groups default", str(err))
        self.ok("OP_NETWORK_DISCONNECT", network_name="net1",
                group_name="default")
        self.assertEqual(self.cfg.get_nodegroup("default").networks, {})
        self.ok("OP_NETWORK_DISCONNECT", network_name="net1",
                group_name="default")
        self.ok("OP_NETWORK_REMOVE", network_name="net1")
        self.assertEqual(self.cfg.networks, {})
        self.assertNotIn(uuid, self.glm.lockset(
            locking.LEVEL_NETWORK).list_names())

    def test_connect_refusals(self):
        self.add()
        err = self.fails("OP_NETWORK_CONNECT", network_name="net1",
                         group_name="default", network_mode="bridged",
                         network_link="br0", network_vlan="100")
        self.assertIn("network_vlan: a VLAN needs the mode openvswitch",
                      str(err))
        err = self.fails("OP_NETWORK_CONNECT", network_name="net1",
                         group_name="nogroup", network_mode="bridged",
                         network_link="br0")
        self.assertIn("nogroup", str(err))
        self.assertEqual(self.cfg.get_nodegroup("default").networks, {})

    def _instance_with_nic(self, **nic):
        inst = objects.Instance(
            name="inst1.example.com", os="debian", hypervisor="fake",
            primary_node=self.cfg.get_node(NODE2).uuid, disk_template="diskless",
            nics=[objects.NIC(mac="aa:00:00:00:00:01", **nic)],
            beparams={}, hvparams={}, osparams={})
        self.cfg.add_instance(inst)
        return inst

    def test_connect_conflict_and_users(self):
        self.add()
        self._instance_with_nic(ip="192.0.2.3")
        err = self.fails("OP_NETWORK_CONNECT", network_name="net1",
                         group_name="default", network_mode="bridged",
                         network_link="br0")
        self.assertIn("conflicts_check: NICs of the node group 'default'"
                      " have addresses inside network 'net1' without being"
                      " in it: inst1.example.com/nic.0 (192.0.2.3)", str(err))
        self.assertEqual(self.cfg.get_nodegroup("default").networks, {})
        self.connect(conflicts_check=False)

    def test_disconnect_and_remove_refused_while_used(self):
        self.add()
        self.connect()
        self._instance_with_nic(ip="192.0.2.3", network=self.net().uuid)
        err = self.fails("OP_NETWORK_DISCONNECT", network_name="net1",
                         group_name="default")
        self.assertIn("instances of node group 'default' have NICs in"
                      " network 'net1': inst1.example.com", str(err))
        err = self.fails("OP_NETWORK_REMOVE", network_name="net1")
        self.assertIn("used by the instances inst1.example.com", str(err))
        self.assertIn(self.net().uuid,
                      self.cfg.get_nodegroup("default").networks)

    def query(self, fields):
        from ganeti.query import QueryContext
        answer = self.successResultOf(
            QueryContext(self.cfg).query("network", fields))
        return [[value for _, value in row] for row in answer["data"]]

    def test_query_fields(self):
        self.add(gateway="192.0.2.1", add_reserved_ips=["192.0.2.6"])
        self.connect()
        # the store takes the NIC's address in the pool with the instance
        self._instance_with_nic(ip="192.0.2.3", network=self.net().uuid)
        fields = ["name", "network", "gateway", "free_count",
                  "reserved_count", "map", "external_reservations",
                  "group_list", "inst_list"]
        self.assertEqual(self.query(fields), [[
            "net1", "192.0.2.0/29", "192.0.2.1", 3, 5, "XX.X..XX",
            "192.0.2.0, 192.0.2.1, 192.0.2.6, 192.0.2.7",
            [["default", "bridged", "br0", ""]], ["inst1.example.com"]]])


class CommandLineTests(unittest.TestCase):
    """gnt-network -> opcodes and output, with a fake master."""

    def setUp(self):
        from tests.test_cli_fakes import FakeClient, field
        self.client = FakeClient()
        self.client.tables["group"] = ([field("name")],
                                       [["default"], ["rack2"]])

    def network(self, *argv):
        from ganeti.cli import gnt_network
        from tests.test_cli_fakes import run
        return run(gnt_network.commands, argv, self.client)

    def test_add(self):
        code, out, err = self.network(
            "add", "--network", "192.0.2.0/24", "-g", "192.0.2.1",
            "--network6", "2001:db8::/64", "--mac-prefix", "aa:00:01",
            "--add-reserved-ips", "192.0.2.2,192.0.2.3",
            "--no-conflicts-check", "--tags", "a,b", "net1")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual(
            {k: op[k] for k in ("OP_ID", "network_name", "network", "gateway",
                                "network6", "mac_prefix", "add_reserved_ips",
                                "conflicts_check", "tags")},
            {"OP_ID": "OP_NETWORK_ADD", "network_name": "net1",
             "network": "192.0.2.0/24", "gateway": "192.0.2.1",
             "network6": "2001:db8::/64", "mac_prefix": "aa:00:01",
             "add_reserved_ips": ["192.0.2.2", "192.0.2.3"],
             "conflicts_check": False, "tags": ["a", "b"]})

    def test_add_needs_network(self):
        code, out, err = self.network("add", "net1")
        self.assertNotEqual(code, 0)
        self.assertIn("--network", err)

    def test_modify(self):
        self.client.results["OP_NETWORK_SET_PARAMS"] = [
            ["gateway", "192.0.2.254"]]
        code, out, err = self.network(
            "modify", "--gateway", "192.0.2.254", "--add-reserved-ips",
            "192.0.2.9", "--remove-reserved-ips", "192.0.2.2", "net1")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual(op["OP_ID"], "OP_NETWORK_SET_PARAMS")
        self.assertEqual(op["add_reserved_ips"], ["192.0.2.9"])
        self.assertEqual(op["remove_reserved_ips"], ["192.0.2.2"])
        self.assertIn("gateway    -> 192.0.2.254", out)
        code, out, err = self.network("modify", "net1")
        self.assertNotEqual(code, 0)
        self.assertIn("at least one", err)

    def test_connect_disconnect(self):
        code, out, err = self.network(
            "connect", "-N", "mode=bridged,link=br100", "net1", "rack2")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["group_name"], op["network_mode"],
                          op["network_link"], op["network_vlan"]),
                         ("OP_NETWORK_CONNECT", "rack2", "bridged", "br100",
                          ""))
        code, out, err = self.network("disconnect", "net1")
        self.assertEqual(code, 0, err)
        groups = [op["group_name"] for job in self.client.jobs.values()
                  for op in job.ops if op["OP_ID"] == "OP_NETWORK_DISCONNECT"]
        self.assertEqual(groups, ["default", "rack2"])
        code, out, err = self.network("connect", "-N", "link=br0", "net1")
        self.assertNotEqual(code, 0)
        self.assertIn("mode is missing", err)
        code, out, err = self.network("connect", "-N", "mode=bridged,"
                                      "link=br0,speed=1", "net1")
        self.assertIn("unknown key(s) speed", err)

    def test_remove(self):
        code, out, err = self.network("remove", "net1")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.client.op()["OP_ID"], "OP_NETWORK_REMOVE")

    def test_info(self):
        from ganeti.cli import gnt_network
        from tests.test_cli_fakes import field
        self.client.tables["network"] = (
            [field(name) for name in gnt_network.INFO_FIELDS],
            [["net1", "u-1", 3, "192.0.2.0/29", "192.0.2.1", None, None,
              "aa:00:01", 3, 5, "XX.X..XX",
              "192.0.2.0, 192.0.2.1, 192.0.2.6, 192.0.2.7",
              [["default", "bridged", "br0", ""]], ["inst1"]]])
        self.client.tables["instance"] = (
            [field("name"), field("nic.ips"), field("nic.networks")],
            [["inst1", ["10.0.0.1", "192.0.2.3"], [None, "u-1"]]])
        code, out, err = self.network("info", "net1")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines(), [
            "Network name: net1", "UUID: u-1", "Serial number: 3",
            "  Subnet: 192.0.2.0/29", "  Gateway: 192.0.2.1",
            "  IPv6 Subnet: None", "  IPv6 Gateway: None",
            "  Mac Prefix: aa:00:01", "  Size: 8", "  Free: 3 (37.50%)",
            "  Usage map:", "        0 " + "XX.X..XX".ljust(64) + " 63",
            "         (X) used    (.) free",
            "  externally reserved IPs:",
            "    192.0.2.0, 192.0.2.1, 192.0.2.6, 192.0.2.7",
            "  connected to node groups:",
            "    default (mode:bridged link:br0 vlan:)",
            "  used by 1 instances:",
            "    inst1: 1:192.0.2.3"])

    def test_list(self):
        from tests.test_cli_fakes import field
        self.client.tables["network"] = (
            [field("name", "Network"), field("network", "Subnet"),
             field("gateway", "Gateway", "other"),
             field("mac_prefix", "MacPrefix", "other"),
             field("group_list", "GroupList", "other"),
             field("tags", "Tags", "other")],
            [["net1", "192.0.2.0/29", "192.0.2.1", None,
              [["default", "bridged", "br0", ""]], ["a"]]])
        code, out, err = self.network("list")
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["Network", "Subnet", "Gateway",
                                            "MacPrefix", "GroupList", "Tags"])
        self.assertIn("default (bridged, br0, )", lines[1])
