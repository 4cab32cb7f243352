"""Instance NICs on networks: addresses from the pool (ip=pool), given
addresses checked against the network, and the pool following the
instance's create, modify and remove."""

from ganeti import errors
from ganeti import objects
from ganeti.network_pool import AddressPool

from tests.test_cmdlib_instance import NODE1, InstanceTestCase, create_op


class PoolNicTests(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.ok({"OP_ID": "OP_NETWORK_ADD", "network_name": "net1",
                 "network": "192.0.2.0/29", "gateway": "192.0.2.1"})
        self.ok({"OP_ID": "OP_NETWORK_CONNECT", "network_name": "net1",
                 "group_name": "default", "network_mode": "bridged",
                 "network_link": "br0"})

    def pool(self):
        return AddressPool.of(self.cfg.get_network("net1"))

    def taken(self):
        pool = self.pool()
        return [str(pool.subnet[i]) for i, bit in enumerate(pool.internal)
                if bit == "1"]

    def modify(self, name="inst1.example.com", **kw):
        kw.update(OP_ID="OP_INSTANCE_SET_PARAMS", instance_name=name)
        return kw

    def test_create_from_pool_modify_and_remove(self):
        self.create(nics=[{"network": "net1", "ip": "pool"},
                          {"network": "net1", "ip": "pool"}])
        inst = self.inst()
        self.assertEqual([n.ip for n in inst.nics],
                         ["192.0.2.2", "192.0.2.3"])
        self.assertEqual(self.taken(), ["192.0.2.2", "192.0.2.3"])
        self.assertEqual(self.pool().free_count(), 3)
        # a second instance gets the next address
        self.create("inst2.example.com",
                    nics=[{"network": "net1", "ip": "pool"}])
        self.assertEqual(self.inst("inst2.example.com").nics[0].ip,
                         "192.0.2.4")
        # modify: a given address, a NIC leaves the network
        self.ok(self.modify(nics=[["modify", 0, {"ip": "192.0.2.5"}],
                                  ["modify", 1, {"network": "none"}]]))
        self.assertEqual(self.taken(), ["192.0.2.4", "192.0.2.5"])
        self.ok(self.modify(nics=[["add", -1, {"network": "net1",
                                               "ip": "pool"}]]))
        self.assertEqual(self.inst().nics[-1].ip, "192.0.2.2")
        self.create("inst3.example.com",
                    nics=[{"network": "net1", "ip": "pool"},
                          {"network": "net1", "ip": "pool"}])
        self.assertEqual(self.pool().free_count(), 0)
        err = self.fails(create_op(
            "inst4.example.com", nics=[{"network": "net1", "ip": "pool"}]))
        self.assertIn("nics/0/ip: network net1 has no free address left",
                      str(err))
        # removal gives the addresses back
        for name in ("inst1.example.com", "inst3.example.com"):
            self.ok({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": name})
        self.assertEqual(self.taken(), ["192.0.2.4"])
        err = self.fails({"OP_ID": "OP_NETWORK_REMOVE",
                          "network_name": "net1"})
        self.assertIn("used by the instances inst2.example.com", str(err))

    def test_refusals_change_nothing(self):
        self.create(nics=[{"network": "net1", "ip": "192.0.2.2"}])
        before = self.cfg.dumps()
        for nic, words in [
                ({"network": "net1", "ip": "192.0.2.2"},
                 "IP address 192.0.2.2 is already in use by instance"
                 " inst1.example.com"),
                ({"network": "net1", "ip": "192.0.2.1"},
                 "nics/0/ip: 192.0.2.1 is reserved in network net1"),
                ({"network": "net1", "ip": "10.0.0.1"},
                 "nics/0/ip: 10.0.0.1 is outside network net1"),
                ({"ip": "pool"}, "nics/0/ip: 'pool' takes an address"),
                ({"network": "nonet", "ip": "pool"},
                 "network 'nonet' does not exist")]:
            err = self.fails(create_op("inst2.example.com", nics=[nic]))
            self.assertIn(words, str(err))
        err = self.fails(self.modify(nics=[["modify", 0,
                                            {"ip": "192.0.2.7"}]]))
        self.assertIn("192.0.2.7 is reserved", str(err))
        self.assertEqual(self.cfg.dumps(), before)

    def test_network_must_be_connected(self):
        self.ok({"OP_ID": "OP_NETWORK_ADD", "network_name": "net2",
                 "network": "198.51.100.0/29"})
        err = self.fails(create_op(nics=[{"network": "net2", "ip": "pool"}]))
        self.assertIn("nics/0/network: network net2 is not connected to node"
                      " group default", str(err))

    def test_address_taken_meanwhile_is_refused_by_the_store(self):
        # as if another job had taken 192.0.2.2 after this one chose it
        self.create(nics=[{"network": "net1", "ip": "192.0.2.2"}])
        net = self.cfg.get_network("net1")
        before = self.cfg.dumps()
        inst = objects.Instance(
            name="late.example.com", os="busybox+default", hypervisor="fake",
            primary_node=self.cfg.get_node(NODE1).uuid,
            disk_template="diskless", beparams={}, hvparams={}, osparams={},
            nics=[objects.NIC(mac="aa:00:00:00:00:09", ip="192.0.2.2",
                              network=net.uuid)])
        err = self.assertRaises(errors.OpPrereqError, self.cfg.add_instance,
                                inst)
        self.assertIn("address 192.0.2.2 of network net1 was taken"
                      " meanwhile by instance inst1.example.com", str(err))
        self.assertEqual(self.cfg.dumps(), before)
        self.assertNotIn("late.example.com",
                         [i.name for i in self.cfg.instances.values()])
