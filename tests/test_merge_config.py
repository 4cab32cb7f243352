"""The configuration merge of the cluster merger, on stores in memory:
clashes refused naming the cluster and the item, node groups merged or
renamed, UUIDs kept, DRBD and console ports, parameters kept, serials."""

from twisted.trial import unittest

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.config import ConfigStore
from ganeti.merge import configmerge
from ganeti.objects import NIC, Disk, Instance, Network, NodeGroup, Node


class FakeTime(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        self.now += 1
        return self.now


def make_cluster(name, domain, net, nodes=2, **params):
    """A cluster of ``nodes`` nodes ``nodeN.<domain>`` at ``<net>.N``
    (node 1 the master), built in memory."""
    cluster_params = dict(
        enabled_hypervisors=["fake", "kvm"],
        enabled_disk_templates=["diskless", "file", "plain", "drbd"],
        file_storage_dir="/srv/ganeti/file-storage",
        volume_group_name="xenvg")
    cluster_params.update(params)
    store = ConfigStore.create(None, name, "node1.%s" % domain,
                               "%s.1" % net, now=FakeTime(),
                               **cluster_params)
    for i in range(2, nodes + 1):
        store.add_node(Node(name="node%d.%s" % (i, domain),
                            primary_ip="%s.%d" % (net, i),
                            secondary_ip="%s.%d" % (net, i),
                            master_candidate=True))
    return store


def add_instance(store, name, node, template="diskless", mac=None,
                 **kw):
    disks = []
    if template == "file":
        disks = [Disk(dev_type="file", size=1024,
                      logical_id=["loop", "%s/%s.disk0" % (
                          store.cluster.file_storage_dir, name)])]
    elif template == "plain":
        disks = [Disk(dev_type="plain", size=1024,
                      logical_id=[store.cluster.volume_group_name,
                                  "%s.disk0" % name])]
    inst = Instance(name=name, primary_node=node, os="busybox+default",
                    hypervisor=kw.pop("hypervisor", "fake"),
                    admin_state=constants.ADMINST_UP,
                    nics=[NIC(mac=mac or store.generate_mac())], **kw)
    store.add_instance(inst, disks)
    return inst


def add_drbd_instance(store, name, primary, secondary, port):
    pnode, snode = store.get_node(primary), store.get_node(secondary)
    children = [Disk(dev_type="plain", size=1024,
                     logical_id=["xenvg", "%s.data" % name]),
                Disk(dev_type="plain", size=128,
                     logical_id=["xenvg", "%s.meta" % name])]
    disk = Disk(dev_type="drbd", size=1024, children=children,
                logical_id=[pnode.uuid, snode.uuid, port, 0, 0, "secret"])
    inst = Instance(name=name, primary_node=primary,
                    secondary_nodes=[secondary], os="busybox+default",
                    hypervisor="fake", nics=[NIC(mac=store.generate_mac())])
    store.add_instance(inst, [disk])
    if port > store.cluster.highest_used_port:
        store.cluster.highest_used_port = port
    return inst


class MergeTestCase(unittest.TestCase):

    def setUp(self):
        self.ours = make_cluster("a.example.com", "a.example.com",
                                 "10.0.1")
        self.theirs = make_cluster("b.example.com", "b.example.com",
                                   "10.0.2")

    def problems(self, *others, groups=configmerge.GROUPS_MERGE):
        problems, _ = configmerge.check(self.ours, others or [self.theirs],
                                        groups)
        return problems

    def merge(self, *others, groups=configmerge.GROUPS_MERGE):
        return configmerge.merge(self.ours, others or [self.theirs], groups,
                                 now=FakeTime())

    def assertRefused(self, text, *others, groups=configmerge.GROUPS_MERGE):
        before = [s.dumps() for s in (self.ours,) + (others or
                                                     (self.theirs,))]
        err = self.assertRaises(configmerge.MergeConflict, self.merge,
                                *others, groups=groups)
        self.assertTrue(any(text in p for p in err.problems),
                        "%r not in %r" % (text, err.problems))
        # nothing changed in any store given
        self.assertEqual([s.dumps() for s in (self.ours,) +
                          (others or (self.theirs,))], before)
        return err


class MergedContentTests(MergeTestCase):

    def test_nodes_instances_disks_keep_their_uuids(self):
        add_instance(self.ours, "a-inst", "node1.a.example.com", "file")
        inst = add_instance(self.theirs, "b-inst", "node2.b.example.com",
                            "file")
        disk_uuid = inst.disks[0]
        merged = self.merge().store
        self.assertEqual(merged.verify(), [])
        for store in (self.ours, self.theirs):
            for kind in ("nodes", "instances", "disks"):
                for uuid in getattr(store, kind):
                    self.assertIn(uuid, getattr(merged, kind), kind)
        self.assertEqual(len(merged.nodes), 4)
        b_inst = merged.instances[inst.uuid]
        self.assertEqual(b_inst.name, "b-inst")
        self.assertEqual(b_inst.disks, [disk_uuid])
        self.assertEqual(merged.nodes[b_inst.primary_node].name,
                         "node2.b.example.com")
        self.assertEqual(b_inst.admin_state, constants.ADMINST_UP)
        # this cluster's master, name and certificate digests stay
        self.assertEqual(merged.master_node.name, "node1.a.example.com")
        self.assertEqual(merged.cluster.cluster_name, "a.example.com")
        self.assertEqual(merged.cluster.uuid, self.ours.cluster.uuid)
        self.assertEqual(merged.path, self.ours.path)

    def test_their_nodes_are_no_master_candidates(self):
        merged = self.merge().store
        for node in merged.nodes.values():
            self.assertEqual(node.master_candidate,
                             node.name.endswith(".a.example.com"),
                             node.name)
        # their master is one of the nodes now
        self.assertEqual(merged.cluster.master_node,
                         self.ours.cluster.master_node)

    def test_serial_above_every_cluster(self):
        for _ in range(5):
            self.theirs.add_tags(constants.TAG_NODE, "node2.b.example.com",
                                 ["t%d" % _])
        self.assertGreater(self.theirs.serial_no, self.ours.serial_no)
        merged = self.merge().store
        self.assertEqual(merged.serial_no, self.theirs.serial_no + 1)
        self.assertEqual(merged.cluster.serial_no,
                         max(self.ours.cluster.serial_no,
                             self.theirs.cluster.serial_no) + 1)

    def test_the_merged_configuration_loads_back(self):
        add_instance(self.theirs, "b-inst", "node1.b.example.com")
        merged = self.merge().store
        again = ConfigStore.from_bytes(merged.dumps(), "config.data")
        self.assertEqual(again.to_dict(), merged.to_dict())
        self.assertEqual(again.verify(), [])

    def test_networks_come_along(self):
        uuid = self.theirs.add_network(Network(name="b-net",
                                               network="192.0.2.0/24"))
        merged = self.merge().store
        self.assertEqual(merged.networks[uuid].name, "b-net")

    def test_two_clusters_at_once(self):
        third = make_cluster("c.example.com", "c.example.com", "10.0.3",
                             nodes=1)
        add_instance(third, "c-inst", "node1.c.example.com")
        merged = self.merge(self.theirs, third).store
        self.assertEqual(len(merged.nodes), 5)
        self.assertIn("c-inst", [i.name for i in merged.instances.values()])
        self.assertEqual(merged.serial_no,
                         max(s.serial_no for s in (self.ours, self.theirs,
                                                   third)) + 1)

    def test_their_cluster_tags_are_a_warning(self):
        self.theirs.add_tags(constants.TAG_CLUSTER, None, ["b-only"])
        problems, warnings = configmerge.check(self.ours, [self.theirs],
                                               "merge")
        self.assertEqual(problems, [])
        self.assertTrue(any("cluster tags of cluster b.example.com are not"
                            " kept: b-only" in w for w in warnings),
                        warnings)


class GroupTests(MergeTestCase):

    def test_same_named_group_refused_without_groups(self):
        err = self.assertRefused("node group default of cluster"
                                 " b.example.com has the name of a node"
                                 " group of this cluster", groups=None)
        self.assertIn("--groups merge", err.problems[0])
        self.assertIn("--groups rename (it becomes default-b)",
                      err.problems[0])

    def test_merge_puts_their_nodes_into_our_group(self):
        ours_default = self.ours.get_nodegroup("default").uuid
        theirs_default = self.theirs.get_nodegroup("default").uuid
        result = self.merge(groups="merge")
        merged = result.store
        self.assertEqual(sorted(g.name for g in merged.nodegroups.values()),
                         ["default"])
        self.assertNotIn(theirs_default, merged.nodegroups)
        for node in merged.nodes.values():
            self.assertEqual(node.group, ours_default)
        self.assertIn("node group default of cluster b.example.com is"
                      " merged into this cluster's", result.notes)

    def test_merge_connects_their_networks_to_our_group(self):
        net = self.theirs.add_network(Network(name="b-net",
                                              network="192.0.2.0/24"))
        self.theirs.set_nodegroup_params("default", networks={
            net: {"mode": "bridged", "link": "br-b", "vlan": ""}})
        merged = self.merge(groups="merge").store
        self.assertEqual(merged.get_nodegroup("default").networks[net],
                         {"mode": "bridged", "link": "br-b", "vlan": ""})

    def test_rename_keeps_their_group_under_a_new_name(self):
        theirs_default = self.theirs.get_nodegroup("default").uuid
        result = self.merge(groups="rename")
        merged = result.store
        self.assertEqual(merged.nodegroups[theirs_default].name,
                         "default-b")
        for node in merged.nodes.values():
            self.assertEqual(
                merged.nodegroups[node.group].name,
                "default" if node.name.endswith("a.example.com")
                else "default-b")
        self.assertEqual(result.renamed_groups,
                         {("b.example.com", "default"): "default-b"})

    def test_rename_finds_a_free_name(self):
        self.ours.add_nodegroup(NodeGroup(name="default-b"))
        result = self.merge(groups="rename")
        names = sorted(g.name for g in result.store.nodegroups.values())
        self.assertEqual(names, ["default", "default-b", "default-b-2"])

    def test_a_group_of_a_new_name_comes_as_it_is(self):
        uuid = self.theirs.add_nodegroup(NodeGroup(name="rack7"))
        self.theirs.assign_node_to_group("node2.b.example.com", "rack7")
        merged = self.merge(groups="merge").store
        self.assertEqual(merged.nodegroups[uuid].name, "rack7")
        self.assertEqual(merged.get_node("node2.b.example.com").group, uuid)

    def test_unknown_groups_mode(self):
        self.assertRaises(errors.ParameterError, configmerge.check,
                          self.ours, [self.theirs], "fold")


class ClashTests(MergeTestCase):

    def test_node_name(self):
        self.theirs.add_node(Node(name="node2.a.example.com",
                                  primary_ip="10.0.2.9"))
        self.assertRefused("node name node2.a.example.com of cluster"
                           " b.example.com is in use in this cluster"
                           " (a.example.com)")

    def test_instance_name(self):
        add_instance(self.ours, "web", "node1.a.example.com")
        add_instance(self.theirs, "web", "node1.b.example.com")
        self.assertRefused("instance name web of cluster b.example.com is in"
                           " use in this cluster (a.example.com)")

    def test_network_name(self):
        self.ours.add_network(Network(name="lan", network="192.0.2.0/24"))
        self.theirs.add_network(Network(name="lan",
                                        network="198.51.100.0/24"))
        self.assertRefused("network name lan of cluster b.example.com is in"
                           " use in this cluster (a.example.com)")

    def test_node_address(self):
        self.theirs.add_node(Node(name="node3.b.example.com",
                                  primary_ip="10.0.1.2",
                                  secondary_ip="10.0.1.2"))
        self.assertRefused("IP address 10.0.1.2 of node node3.b.example.com"
                           " of cluster b.example.com is that of node"
                           " node2.a.example.com of this cluster")

    def test_our_master_ip(self):
        self.ours.set_cluster_params(master_ip="10.0.1.100")
        self.theirs.add_node(Node(name="node3.b.example.com",
                                  primary_ip="10.0.1.100",
                                  secondary_ip="10.0.1.100"))
        self.assertRefused("IP address 10.0.1.100 of node node3.b.example.com"
                           " of cluster b.example.com is that of the master"
                           " IP of this cluster")

    def test_mac_address(self):
        add_instance(self.ours, "a-inst", "node1.a.example.com",
                     mac="aa:00:00:11:22:33")
        add_instance(self.theirs, "b-inst", "node1.b.example.com",
                     mac="aa:00:00:11:22:33")
        self.assertRefused("MAC address aa:00:00:11:22:33 of instance b-inst"
                           " of cluster b.example.com is that of instance"
                           " a-inst of this cluster")

    def test_between_two_other_clusters(self):
        third = make_cluster("c.example.com", "b.example.com", "10.0.3",
                             nodes=1)
        self.assertRefused("node name node1.b.example.com of cluster"
                           " c.example.com is in use in cluster"
                           " b.example.com", self.theirs, third)

    def test_the_same_cluster_twice(self):
        self.assertRefused("cluster a.example.com is the same cluster as"
                           " this cluster", self.ours)

    def test_offline_node(self):
        self.theirs.set_node_params("node2.b.example.com", offline=True,
                                    master_candidate=False)
        self.assertRefused("node node2.b.example.com of cluster b.example.com"
                           " is offline")

    def test_secondary_network_mismatch(self):
        self.theirs.add_node(Node(name="node3.b.example.com",
                                  primary_ip="10.0.2.3",
                                  secondary_ip="10.9.2.3"))
        self.assertRefused("node node3.b.example.com of cluster b.example.com"
                           " has a secondary IP, but this cluster's master"
                           " has none")

    def test_every_problem_is_listed(self):
        add_instance(self.ours, "web", "node1.a.example.com")
        add_instance(self.theirs, "web", "node1.b.example.com",
                     hypervisor="kvm")
        self.ours.set_cluster_params(enabled_hypervisors=["fake"],
                                     default_hypervisor="fake")
        problems = self.problems(groups=None)
        self.assertEqual(len(problems), 3, problems)


class CompatibilityTests(MergeTestCase):

    def test_hypervisor_not_enabled_here(self):
        add_instance(self.theirs, "vm1", "node1.b.example.com",
                     hypervisor="kvm")
        self.ours.set_cluster_params(enabled_hypervisors=["fake"],
                                     default_hypervisor="fake")
        self.assertRefused("hypervisor kvm of cluster b.example.com"
                           " (instances vm1) is not enabled in this cluster"
                           " (enabled: fake)")

    def test_disk_template_not_enabled_here(self):
        add_instance(self.theirs, "vm1", "node1.b.example.com", "plain")
        self.ours.set_cluster_params(
            enabled_disk_templates=["diskless", "file"])
        self.assertRefused("disk template plain of cluster b.example.com"
                           " (instances vm1) is not enabled in this cluster"
                           " (enabled: diskless, file)")

    def test_volume_group(self):
        add_instance(self.theirs, "vm1", "node1.b.example.com", "plain")
        self.ours.set_cluster_params(volume_group_name="othervg")
        self.assertRefused("cluster b.example.com keeps its instances' disks"
                           " in volume group xenvg, this cluster uses"
                           " othervg")

    def test_volume_group_of_an_unused_template_does_not_matter(self):
        add_instance(self.theirs, "vm1", "node1.b.example.com", "file")
        self.ours.set_cluster_params(volume_group_name="othervg")
        self.assertEqual(self.problems(), [])

    def test_file_storage_dir(self):
        add_instance(self.theirs, "vm1", "node1.b.example.com", "file")
        self.ours.set_cluster_params(file_storage_dir="/srv/other")
        self.assertRefused("cluster b.example.com keeps its file disks below"
                           " file_storage_dir=/srv/ganeti/file-storage, this"
                           " cluster's is /srv/other")

    def test_global_hypervisor_parameters_are_a_warning(self):
        add_instance(self.theirs, "vm1", "node1.b.example.com",
                     hypervisor="kvm")
        self.theirs.set_cluster_params(hvparams={"kvm": dict(
            self.theirs.cluster.hvparams["kvm"], migration_port=9999)})
        problems, warnings = configmerge.check(self.ours, [self.theirs],
                                               "merge")
        self.assertEqual(problems, [])
        self.assertTrue(any("global kvm parameters migration_port=9999 of"
                            " cluster b.example.com differ" in w
                            for w in warnings), warnings)


class PortTests(MergeTestCase):

    def setUp(self):
        MergeTestCase.setUp(self)
        for store, domain in ((self.ours, "a"), (self.theirs, "b")):
            store.set_cluster_params(
                enabled_disk_templates=["diskless", "file", "plain",
                                        "drbd"])

    def test_drbd_disks_get_ports_from_our_pool(self):
        add_drbd_instance(self.ours, "a-mirror", "node1.a.example.com",
                          "node2.a.example.com", 11005)
        theirs = add_drbd_instance(self.theirs, "b-mirror",
                                   "node1.b.example.com",
                                   "node2.b.example.com", 11005)
        self.ours.cluster.tcpudp_port_pool = [11001]
        disk_uuid = theirs.disks[0]
        old = list(self.theirs.disks[disk_uuid].logical_id)
        result = self.merge()
        disk = result.store.disks[disk_uuid]
        # the pool first, and nothing else of the logical id changes
        self.assertEqual(disk.logical_id[2], 11001)
        self.assertEqual(disk.logical_id[:2] + disk.logical_id[3:],
                         old[:2] + old[3:])
        self.assertEqual(result.ports, {disk_uuid: (11005, 11001)})
        self.assertEqual(result.store.cluster.tcpudp_port_pool, [])
        # the other cluster's store is untouched
        self.assertEqual(self.theirs.disks[disk_uuid].logical_id[2], 11005)

    def test_every_drbd_disk_gets_a_new_port_even_a_free_one(self):
        theirs = add_drbd_instance(self.theirs, "b-mirror",
                                   "node1.b.example.com",
                                   "node2.b.example.com", 11300)
        highest = self.ours.cluster.highest_used_port
        result = self.merge()
        disk = result.store.disks[theirs.disks[0]]
        self.assertEqual(disk.logical_id[2], highest + 1)
        self.assertEqual(result.store.cluster.highest_used_port, highest + 1)

    def test_console_ports(self):
        a = add_instance(self.ours, "a-vm", "node1.a.example.com")
        self.ours.modify_instance("a-vm", network_port=11010)
        self.ours.cluster.highest_used_port = 11010
        self.ours.cluster.tcpudp_port_pool = [11002, 11003]
        add_instance(self.theirs, "b-clash", "node1.b.example.com")
        self.theirs.modify_instance("b-clash", network_port=11010)
        add_instance(self.theirs, "b-free", "node1.b.example.com")
        self.theirs.modify_instance("b-free", network_port=11002)
        add_instance(self.theirs, "b-high", "node1.b.example.com")
        self.theirs.modify_instance("b-high", network_port=11020)
        result = self.merge()
        ports = {i.name: i.network_port
                 for i in result.store.instances.values()}
        # a free port is kept and leaves the pool; a taken one is replaced
        # from the pool
        self.assertEqual(ports, {"a-vm": 11010, "b-clash": 11003,
                                 "b-free": 11002, "b-high": 11020})
        self.assertEqual(result.store.cluster.tcpudp_port_pool, [])
        self.assertEqual(result.store.cluster.highest_used_port, 11020)
        self.assertIn("instance b-clash of cluster b.example.com: console"
                      " port 11010 is taken here, it gets 11003 (from its"
                      " next start)", result.notes)
        self.assertEqual(self.ours.instances[a.uuid].network_port, 11010)


class ParameterTests(MergeTestCase):

    def test_instances_keep_inherited_backend_parameters(self):
        self.theirs.set_cluster_params(beparams={"default": dict(
            self.theirs.cluster.beparams["default"], maxmem=512, minmem=512,
            vcpus=2)})
        inst = add_instance(self.theirs, "b-vm", "node1.b.example.com")
        own = add_instance(self.theirs, "b-own", "node1.b.example.com",
                           beparams={"maxmem": 256, "minmem": 256,
                                     "vcpus": 2})
        result = self.merge()
        merged = result.store
        mine = merged.instances[inst.uuid]
        self.assertEqual(objects.fill_beparams(merged.cluster, mine),
                         objects.fill_beparams(self.theirs.cluster, inst))
        self.assertEqual(mine.beparams, {"maxmem": 512, "minmem": 512,
                                         "vcpus": 2})
        self.assertIn("instance b-vm of cluster b.example.com keeps beparams"
                      " maxmem=512, minmem=512, vcpus=2 (this cluster's"
                      " defaults differ)", result.notes)
        # what the instance sets itself needs nothing
        self.assertEqual(merged.instances[own.uuid].beparams,
                         {"maxmem": 256, "minmem": 256, "vcpus": 2})

    def test_nics_keep_their_link(self):
        self.theirs.set_cluster_params(nicparams={"default": {
            "mode": "bridged", "link": "br-b", "vlan": ""}})
        inst = add_instance(self.theirs, "b-vm", "node1.b.example.com")
        merged = self.merge().store
        nic = merged.instances[inst.uuid].nics[0]
        self.assertEqual(objects.fill_nicparams(merged.cluster, nic)["link"],
                         "br-b")

    def test_nodes_keep_their_parameters(self):
        self.theirs.set_cluster_params(ndparams=dict(
            self.theirs.cluster.ndparams, oob_program="/bin/b-oob"))
        merged = self.merge().store
        node = merged.get_node("node2.b.example.com")
        group = merged.nodegroups[node.group]
        self.assertEqual(objects.fill_ndparams(merged.cluster, group,
                                               node)["oob_program"],
                         "/bin/b-oob")
        ours = merged.get_node("node2.a.example.com")
        self.assertEqual(objects.fill_ndparams(
            merged.cluster, merged.nodegroups[ours.group],
            ours)["oob_program"], self.ours.cluster.ndparams["oob_program"])

    def test_private_parameters_are_named_not_shown(self):
        self.theirs.set_cluster_params(osparams_private_cluster={
            "busybox": {"secret": "hunter2"}})
        inst = add_instance(self.theirs, "b-vm", "node1.b.example.com")
        result = self.merge()
        self.assertEqual(result.store.instances[inst.uuid].osparams_private,
                         {"secret": "hunter2"})
        text = "\n".join(result.notes)
        self.assertIn("keeps osparams_private secret", text)
        self.assertNotIn("hunter2", text)
