"""Config objects: config.data layout, tags, parameter inheritance."""

from twisted.trial import unittest

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.objects import (NIC, Cluster, Disk, Instance, Node, NodeGroup,
                            fill_beparams, fill_diskparams, fill_hvparams,
                            fill_ndparams, fill_nicparams, fill_osparams)


def _cluster(**kw):
    c = Cluster(cluster_name="c.example.com", uuid=objects.new_uuid(),
                enabled_hypervisors=[constants.HT_KVM, constants.HT_FAKE],
                default_hypervisor=constants.HT_KVM, **kw)
    c.fill_defaults()
    return c


class DictLayoutTests(unittest.TestCase):

    def test_instance_round_trip_keeps_every_field(self):
        inst = Instance(name="i1", uuid="u1", primary_node="n1",
                        os="debootstrap+default", hypervisor="kvm",
                        beparams={"maxmem": 512}, disks=["d1", "d2"],
                        nics=[NIC(mac="aa:00:00:01:02:03", ip="192.0.2.5",
                                  nicparams={"mode": "routed"}, uuid="nic1")],
                        tags={"b", "a"})
        d = inst.to_dict()
        self.assertEqual(d["tags"], ["a", "b"])
        self.assertEqual(d["nics"][0]["ip"], "192.0.2.5")
        self.assertEqual(d["disks"], ["d1", "d2"])
        again = Instance.from_dict(d)
        self.assertEqual(again.to_dict(), d)
        self.assertEqual(again.tags, {"a", "b"})
        self.assertIsInstance(again.nics[0], NIC)

    def test_none_fields_are_left_out_and_template_not_stored(self):
        inst = Instance(uuid="u1", forthcoming=True, disk_template="plain")
        d = inst.to_dict()
        self.assertNotIn("name", d)
        self.assertNotIn("primary_node", d)
        # Ganeti 3.0 derives the template from the disks.
        self.assertNotIn("disk_template", d)
        self.assertTrue(d["forthcoming"])

    def test_unknown_keys_survive_a_round_trip(self):
        d = {"name": "n1", "uuid": "u", "primary_ip": "127.0.0.2",
             "future_field": {"x": 1}}
        node = Node.from_dict(d)
        self.assertEqual(node.to_dict()["future_field"], {"x": 1})

    def test_wrong_container_type_names_the_object(self):
        err = self.assertRaises(errors.ConfigurationError,
                                Instance.from_dict, ["not", "a", "dict"])
        self.assertIn("Instance", str(err))

    def test_disk_children_are_objects(self):
        d = Disk(uuid="d", dev_type="drbd", size=1024,
                 children=[Disk(dev_type="plain", size=1024),
                           Disk(dev_type="plain", size=128)])
        again = Disk.from_dict(d.to_dict())
        self.assertIsInstance(again.children[1], Disk)
        self.assertEqual(again.children[1].size, 128)
        # DRBD metadata counts against the node's storage.
        self.assertEqual(d.storage_size(), 1024 + constants.DRBD_META_SIZE)


class TagTests(unittest.TestCase):

    def test_valid_tags(self):
        n = Node(name="n")
        n.add_tag("ganeti:watcher:autorepair:fix-storage")
        n.add_tag("a.b+c*d/e@f-g")
        self.assertEqual(len(n.tags), 2)

    def test_invalid_tags_give_the_reason(self):
        n = Node(name="n")
        self.assertIn("invalid characters",
                      str(self.assertRaises(errors.TagError, n.add_tag,
                                            "has space")))
        self.assertIn("too long",
                      str(self.assertRaises(errors.TagError, n.add_tag,
                                            "x" * 129)))
        self.assertIn("empty",
                      str(self.assertRaises(errors.TagError, n.add_tag, "")))
        self.assertEqual(n.tags, set())

    def test_remove_missing_tag(self):
        self.assertRaises(errors.TagError, Node(name="n").remove_tag, "x")


class InheritanceTests(unittest.TestCase):

    def test_hvparams_cluster_then_os_then_instance(self):
        c = _cluster(hvparams={"kvm": {"kernel_args": "ro quiet",
                                       "serial_speed": 9600}},
                     os_hvp={"debootstrap": {"kvm": {"serial_speed": 19200}}})
        c.fill_defaults()
        inst = Instance(hypervisor="kvm", os="debootstrap+minimal",
                        hvparams={"kernel_args": "ro single"})
        hv = fill_hvparams(c, inst)
        self.assertEqual(hv["kernel_args"], "ro single")  # instance wins
        self.assertEqual(hv["serial_speed"], 19200)       # OS beats cluster
        self.assertEqual(hv["root_path"], "/dev/vda1")    # Ganeti default

    def test_global_hvparams_are_invisible_to_instances(self):
        c = _cluster(hvparams={"kvm": {"migration_port": 9999}})
        c.fill_defaults()
        hv = fill_hvparams(c, Instance(hypervisor="kvm"))
        for key in constants.HVC_GLOBALS:
            self.assertNotIn(key, hv)
        self.assertEqual(
            objects.cluster_global_hvparams(c, "kvm")["migration_port"], 9999)

    def test_instance_may_not_set_global_hvparams(self):
        err = self.assertRaises(errors.OpPrereqError,
                                objects.check_instance_hvparams,
                                {"migration_port": 1, "acpi": False})
        self.assertIn("migration_port", str(err))
        self.assertIn("cluster level", str(err))
        self.assertEqual(err.args[1], errors.ECODE_INVAL)

    def test_beparams_and_osparams(self):
        c = _cluster(beparams={"default": {"maxmem": 1024, "vcpus": 2}},
                     osparams={"debootstrap": {"dhcp": "no"},
                               "debootstrap+min": {"suite": "bookworm"}})
        inst = Instance(os="debootstrap+min", beparams={"vcpus": 4})
        be = fill_beparams(c, inst)
        self.assertEqual((be["maxmem"], be["vcpus"]), (1024, 4))
        self.assertEqual(be["auto_balance"], True)
        self.assertEqual(fill_osparams(c, inst),
                         {"dhcp": "no", "suite": "bookworm"})

    def test_ndparams_cluster_group_node(self):
        c = _cluster(ndparams={"spindle_count": 2, "ssh_port": 2222})
        g = NodeGroup(name="g", ndparams={"spindle_count": 4})
        n = Node(name="n", ndparams={"oob_program": "/bin/oob"})
        nd = fill_ndparams(c, g, n)
        self.assertEqual(nd["spindle_count"], 4)
        self.assertEqual(nd["ssh_port"], 2222)
        self.assertEqual(nd["oob_program"], "/bin/oob")

    def test_diskparams_cluster_then_group(self):
        c = _cluster(diskparams={"plain": {"stripes": 2}})
        c.fill_defaults()
        g = NodeGroup(name="g", diskparams={"drbd": {"resync-rate": 1000}})
        self.assertEqual(fill_diskparams(c, g, "plain")["stripes"], 2)
        drbd = fill_diskparams(c, g, "drbd")
        self.assertEqual(drbd["resync-rate"], 1000)
        self.assertEqual(drbd["protocol"], "C")

    def test_nicparams_cluster_group_network_nic(self):
        c = _cluster(nicparams={"default": {"mode": "bridged",
                                            "link": "br0"}})
        g = NodeGroup(name="g", networks={"net1": {"mode": "routed",
                                                   "link": "rt100"}})
        nic = NIC(network="net1", ip="192.0.2.9")
        self.assertEqual(fill_nicparams(c, nic, g)["mode"], "routed")
        self.assertEqual(fill_nicparams(c, NIC(), g)["link"], "br0")
        own = NIC(nicparams={"link": "br7"})
        self.assertEqual(fill_nicparams(c, own, g)["link"], "br7")


class NicModeTests(unittest.TestCase):

    def test_routed_needs_an_ip(self):
        nic = NIC(nicparams={"mode": "routed"})
        err = self.assertRaises(errors.OpPrereqError, objects.check_nic, nic,
                                {"mode": "routed", "link": ""}, "nic/0")
        self.assertIn("nic/0", str(err))
        self.assertIn("IP address is required", str(err))
        objects.check_nic(NIC(ip="192.0.2.1"), {"mode": "routed", "link": ""})

    def test_openvswitch_and_bridged(self):
        objects.check_nic(NIC(), {"mode": "openvswitch", "link": "switch1"})
        objects.check_nic(NIC(), {"mode": "bridged", "link": "br0"})
        self.assertRaises(errors.OpPrereqError, objects.check_nic, NIC(),
                          {"mode": "bridged", "link": ""})
        err = self.assertRaises(errors.OpPrereqError, objects.check_nic, NIC(),
                                {"mode": "tunnel", "link": "x"})
        self.assertIn("'tunnel'", str(err))

    def test_template_is_derived_from_disks(self):
        self.assertEqual(objects.disk_template_of([]), "diskless")
        self.assertEqual(objects.disk_template_of(
            [Disk(dev_type="plain"), Disk(dev_type="plain")]), "plain")
        self.assertEqual(objects.disk_template_of(
            [Disk(dev_type="plain"), Disk(dev_type="file")]), "mixed")
