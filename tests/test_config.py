"""The configuration store: persistence, verification, upgrade, accounting."""

import json
import os

from twisted.trial import unittest

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.config import ConfigStore
from ganeti.objects import NIC, Disk, Instance, Node

from tests import ganeti_peer


class FakeTime(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        self.now += 1
        return self.now


def make_store(testcase, path=None, **kw):
    if path is None:
        d = testcase.mktemp()
        os.makedirs(d)
        path = os.path.join(d, "config.data")
    return ConfigStore.create(path, "cluster.example.com",
                              "node1.example.com", "127.0.0.1",
                              enabled_hypervisors=["fake", "kvm"],
                              enabled_disk_templates=["file", "plain",
                                                      "drbd", "diskless"],
                              now=FakeTime(), **kw)


def enable_templates(store, templates, **params):
    """Enable disk templates straight in the configuration, with the
    cluster's instance policy allowing them (as gnt-cluster modify does)."""
    policy = dict(store.cluster.ipolicy)
    policy["disk-templates"] = list(templates)
    store.set_cluster_params(enabled_disk_templates=list(templates),
                             ipolicy=policy, **params)


#: a node's live data (as node queries report it)
LIVE = {"mtotal": 2048, "mnode": 256, "mfree": 1024, "dtotal": 20000,
        "dfree": 10000, "ctotal": 2, "cnos": 1}


def real_instance(store, name, node="node1.example.com", maxmem=128, vcpus=1,
                  disk_sizes=(), template="plain", **kw):
    inst = Instance(name=name, primary_node=node, os="debootstrap+default",
                    hypervisor="fake",
                    beparams={"maxmem": maxmem, "minmem": maxmem,
                              "vcpus": vcpus},
                    nics=[NIC(mac=store.generate_mac())], **kw)
    disks = [Disk(dev_type=template, size=s, logical_id=["xenvg", "lv%d" % i])
             for i, s in enumerate(disk_sizes)]
    return inst, disks


def read_file(path):
    with open(path) as f:
        return json.load(f)


class PersistenceTests(unittest.TestCase):

    def test_create_writes_a_valid_file(self):
        store = make_store(self)
        data = read_file(store.path)
        self.assertEqual(data["version"], constants.CONFIG_VERSION)
        self.assertEqual(list(data["nodes"]),
                         [store.cluster.master_node])
        self.assertEqual(store.verify(), [])
        # Only the owner may read it.
        self.assertEqual(os.stat(store.path).st_mode & 0o777, 0o600)

    def test_every_change_bumps_serials_and_persists(self):
        store = make_store(self)
        serial = read_file(store.path)["serial_no"]
        cserial = store.cluster.serial_no
        uuid = store.add_node(Node(name="node2.example.com",
                                   primary_ip="127.0.0.2"))
        data = read_file(store.path)
        self.assertEqual(data["serial_no"], serial + 1)
        self.assertIn(uuid, data["nodes"])
        self.assertEqual(data["cluster"]["serial_no"], cserial + 1)
        node_serial = store.nodes[uuid].serial_no
        cserial = store.cluster.serial_no
        store.set_node_params("node2.example.com", drained=True)
        self.assertEqual(store.nodes[uuid].serial_no, node_serial + 1)
        # confd answers carry the cluster serial: it moves on every change.
        self.assertEqual(store.cluster.serial_no, cserial + 1)
        self.assertTrue(read_file(store.path)["nodes"][uuid]["drained"])

    def test_load_round_trip(self):
        store = make_store(self)
        inst, disks = real_instance(store, "inst1", disk_sizes=[1024])
        store.add_instance(inst, disks)
        again = ConfigStore.load(store.path)
        self.assertEqual(again.to_dict(), store.to_dict())
        self.assertFalse(again.upgraded)

    def test_rejected_change_leaves_memory_and_file_unchanged(self):
        store = make_store(self)
        store.add_node(Node(name="node2.example.com", primary_ip="127.0.0.2"))
        before_file = open(store.path, "rb").read()
        before = store.to_dict()
        # Same primary IP as node2: verification refuses the result.
        err = self.assertRaises(errors.ConfigVerifyError, store.add_node,
                                Node(name="node3.example.com",
                                     primary_ip="127.0.0.2"))
        self.assertIn("primary_ip", str(err))
        self.assertEqual(store.to_dict(), before)
        self.assertEqual(open(store.path, "rb").read(), before_file)
        # A bad argument is refused before anything is touched.
        self.assertRaises(errors.OpPrereqError, store.set_cluster_params,
                          no_such_param=1)
        self.assertRaises(errors.OpPrereqError, store.add_node,
                          Node(name="node2.example.com",
                               primary_ip="127.0.0.9"))
        self.assertEqual(open(store.path, "rb").read(), before_file)

    def test_failed_write_rolls_back(self):
        store = make_store(self)
        before = store.to_dict()

        def broken_write(*args):
            raise OSError(28, "No space left on device")
        store._write = broken_write
        self.assertRaises(OSError, store.add_node,
                          Node(name="node2.example.com",
                               primary_ip="127.0.0.2"))
        self.assertEqual(store.to_dict(), before)

    def test_rollback_point_is_the_last_write(self):
        store = make_store(self)
        store.add_node(Node(name="node2.example.com", primary_ip="127.0.0.2"))
        # A change made behind the store's back, then a refused change:
        # memory goes back to what is on disk.
        store.cluster.mac_prefix = "bb:00:00"
        self.assertRaises(errors.ConfigVerifyError, store.add_node,
                          Node(name="node3.example.com",
                               primary_ip="127.0.0.2"))
        self.assertEqual(store.cluster.mac_prefix, "aa:00:00")
        self.assertEqual(store.to_dict(), ConfigStore.load(store.path)
                         .to_dict())
        # The store goes on working after the refusal.
        store.add_node(Node(name="node3.example.com", primary_ip="127.0.0.3"))
        self.assertEqual(store.to_dict(), ConfigStore.load(store.path)
                         .to_dict())
        # A port handed out before a refused change is not lost silently:
        # the rollback point is taken afresh after allocate_port.
        port = store.allocate_port()
        self.assertRaises(errors.ConfigVerifyError, store.add_node,
                          Node(name="node4.example.com",
                               primary_ip="127.0.0.3"))
        self.assertEqual(store.cluster.highest_used_port, port)

    def test_write_keeps_previous_copy(self):
        store = make_store(self)
        first = open(store.path, "rb").read()
        store.add_tags("cluster", None, ["t1"])
        self.assertEqual(open(store.path + ".bak", "rb").read(), first)
        # No temporary files are left behind.
        leftovers = [f for f in os.listdir(os.path.dirname(store.path))
                     if f.startswith(".")]
        self.assertEqual(leftovers, [])

    def test_truncated_file_is_refused_and_backup_named(self):
        store = make_store(self)
        store.add_tags("cluster", None, ["t1"])
        good = open(store.path, "rb").read()
        with open(store.path, "wb") as f:
            f.write(good[:len(good) // 2])
        err = self.assertRaises(errors.ConfigurationError, ConfigStore.load,
                                store.path)
        self.assertIn("not valid JSON", str(err))
        self.assertIn(store.path + ".bak", str(err))
        # The backup itself is a good, loadable copy.
        ConfigStore.load(store.path + ".bak")

    def test_empty_and_missing_files(self):
        d = self.mktemp()
        os.makedirs(d)
        path = os.path.join(d, "config.data")
        err = self.assertRaises(errors.ConfigurationError, ConfigStore.load,
                                path)
        self.assertIn("cannot read", str(err))
        open(path, "w").close()
        err = self.assertRaises(errors.ConfigurationError, ConfigStore.load,
                                path)
        self.assertIn("empty", str(err))

    def test_newer_version_is_refused(self):
        store = make_store(self)
        data = store.to_dict()
        data["version"] = constants.CONFIG_VERSION + 10000
        err = self.assertRaises(errors.ConfigVersionMismatch,
                                ConfigStore.from_dict, data)
        self.assertIn("newer", str(err))


class VerifyTests(unittest.TestCase):

    def test_reports_every_problem_with_object_and_field(self):
        store = make_store(self)
        inst, disks = real_instance(store, "inst1", disk_sizes=[100])
        store.add_instance(inst, disks)
        data = store.to_dict()
        iuuid = inst.uuid
        data["instances"][iuuid]["primary_node"] = "no-such-node"
        data["instances"][iuuid]["admin_state"] = "sideways"
        data["instances"][iuuid]["nics"][0]["nicparams"] = {"mode": "routed"}
        data["cluster"]["default_hypervisor"] = "xen-pvm"
        data["disks"]["orphan"] = {"uuid": "orphan", "dev_type": "plain",
                                   "size": -5}
        problems = ConfigStore.from_dict(data).verify()
        text = "\n".join(problems)
        self.assertIn("instance inst1 primary_node: node no-such-node does"
                      " not exist", text)
        self.assertIn("instance inst1 admin_state: 'sideways'", text)
        self.assertIn("instance inst1 nic/0: an IP address is required in"
                      " routed mode", text)
        self.assertIn("cluster default_hypervisor: 'xen-pvm' is not enabled",
                      text)
        self.assertIn("instance inst1 disks/0/nodes: node %s is not a node of"
                      " the instance" % store.master_node.uuid, text)
        self.assertIn("disk orphan instance: belongs to no instance", text)
        self.assertIn("disk orphan size: must be a non-negative integer",
                      text)
        self.assertEqual(len(problems), 7, problems)

    def test_duplicate_names_and_macs(self):
        store = make_store(self)
        i1, _ = real_instance(store, "inst1")
        store.add_instance(i1)
        data = store.to_dict()
        copy_ = json.loads(json.dumps(data["instances"][i1.uuid]))
        copy_["uuid"] = "other"
        data["instances"]["other"] = copy_
        text = "\n".join(ConfigStore.from_dict(data).verify())
        self.assertIn("name: 'inst1' is also used by", text)
        self.assertIn("mac: %s is also used by inst1" % i1.nics[0].mac, text)

    def test_global_hvparam_on_instance_is_dropped_on_load(self):
        # Loading cleans inadvertently customised global
        # parameters, so a restart of the master is all that is needed.
        store = make_store(self)
        i1, _ = real_instance(store, "inst1")
        store.add_instance(i1)
        data = store.to_dict()
        data["instances"][i1.uuid]["hvparams"] = {"migration_port": 1,
                                                  "acpi": False}
        loaded = ConfigStore.from_dict(data)
        self.assertTrue(loaded.upgraded)
        self.assertEqual(loaded.instances[i1.uuid].hvparams, {"acpi": False})
        # Set in memory behind the store's back, verify reports it.
        loaded.instances[i1.uuid].hvparams["migration_port"] = 1
        self.assertIn("instance inst1 hvparams: global parameters"
                      " migration_port can only be set at cluster level",
                      loaded.verify())

    def test_routed_nic_without_ip_is_refused_on_add(self):
        store = make_store(self)
        inst, _ = real_instance(store, "inst1")
        inst.nics[0].nicparams = {"mode": "routed", "link": "100"}
        err = self.assertRaises(errors.ConfigVerifyError, store.add_instance,
                                inst)
        self.assertIn("IP address is required", str(err))
        self.assertEqual(store.instances, {})


class InstanceChangeTests(unittest.TestCase):

    def test_add_rename_state_remove(self):
        store = make_store(self)
        inst, disks = real_instance(store, "inst1", disk_sizes=[512, 256])
        uuid = store.add_instance(inst, disks)
        self.assertEqual(len(store.disks), 2)
        node = store.master_node.uuid
        for d in store.instance_disks(inst):
            self.assertEqual(d.nodes, [node])
            self.assertEqual(d.mode, "rw")
        store.rename_instance("inst1", "inst1b")
        self.assertEqual(store.get_instance(uuid).name, "inst1b")
        store.set_instance_admin_state("inst1b", "up")
        store.set_instance_admin_state("inst1b", "down", source="user")
        self.assertEqual(store.instances[uuid].admin_state_source, "user")
        err = self.assertRaises(errors.OpPrereqError,
                                store.set_instance_admin_state, "inst1b",
                                "paused")
        self.assertIn("admin_state", str(err))
        store.remove_instance(uuid)
        self.assertEqual((store.instances, store.disks), ({}, {}))

    def test_real_instance_needs_mandatory_fields(self):
        store = make_store(self)
        err = self.assertRaises(errors.OpPrereqError, store.add_instance,
                                Instance(name="x", hypervisor="fake",
                                         os="debootstrap"))
        self.assertIn("primary_node", str(err))

    def test_instance_cannot_set_global_hvparams(self):
        store = make_store(self)
        inst, _ = real_instance(store, "inst1",
                                hvparams={"migration_mode": "non-live"})
        self.assertRaises(errors.OpPrereqError, store.add_instance, inst)
        inst.hvparams = {}
        store.add_instance(inst)
        self.assertRaises(errors.OpPrereqError, store.modify_instance,
                          "inst1", hvparams={"migration_port": 1})

    def test_nodes_and_groups(self):
        store = make_store(self)
        g = store.add_nodegroup(objects.NodeGroup(name="rack2"))
        n2 = store.add_node(Node(name="node2", primary_ip="127.0.0.2",
                                 group="rack2"))
        self.assertEqual(store.nodes[n2].group, g)
        err = self.assertRaises(errors.OpPrereqError, store.remove_nodegroup,
                                "rack2")
        self.assertIn("node2", str(err))
        inst, _ = real_instance(store, "inst1", node="node2")
        store.add_instance(inst)
        err = self.assertRaises(errors.OpPrereqError, store.remove_node,
                                "node2")
        self.assertIn("inst1", str(err))
        self.assertRaises(errors.OpPrereqError, store.remove_node,
                          "node1.example.com")  # the master

    def test_tags(self):
        store = make_store(self)
        store.add_tags("node", "node1.example.com", ["a", "b"])
        self.assertEqual(store.master_node.tags, {"a", "b"})
        self.assertRaises(errors.TagError, store.add_tags, "node",
                          "node1.example.com", ["ok", "not ok"])
        self.assertEqual(store.master_node.tags, {"a", "b"})
        err = self.assertRaises(errors.OpPrereqError, store.remove_tags,
                                "node", "node1.example.com", ["zzz"])
        self.assertIn("zzz", str(err))
        self.assertRaises(errors.OpPrereqError, store.add_tags, "planet",
                          "x", ["a"])

    def test_uid_pool_validated_and_normalised(self):
        store = make_store(self)
        store.set_cluster_params(uid_pool=[[3000, 3000], [1000, 1999],
                                           [2000, 2100]])
        self.assertEqual(store.cluster.uid_pool, [[1000, 2100],
                                                  [3000, 3000]])
        err = self.assertRaises(errors.OpPrereqError,
                                store.set_cluster_params,
                                uid_pool=[[5, 1]])
        self.assertIn("uid_pool", str(err))


class ForthcomingTests(unittest.TestCase):

    def test_only_uuid_is_mandatory(self):
        store = make_store(self)
        uuid = store.add_instance(Instance(forthcoming=True))
        self.assertEqual(store.verify(), [])
        data = read_file(store.path)["instances"][uuid]
        self.assertTrue(data["forthcoming"])
        self.assertNotIn("name", data)
        self.assertEqual(ConfigStore.load(store.path).verify(), [])

    def test_resources_are_reserved_and_commit_cannot_fail(self):
        store = make_store(self)
        node = store.master_node.uuid
        # A forthcoming instance with a name-less, partial definition.
        f = Instance(forthcoming=True, primary_node=node,
                     beparams={"maxmem": 768, "vcpus": 2})
        fuuid = store.add_instance(
            f, [Disk(dev_type="plain", size=6000)])
        usage = store.node_usage(node)
        self.assertEqual((usage.memory, usage.disk, usage.vcpus),
                         (768, 6000, 2))
        self.assertEqual(usage.forthcoming, (fuuid,))
        # What the node reports, minus the reservation
        res = store.node_resources(node, live=LIVE, hv_instances={})
        self.assertEqual((res.mfree, res.reserved_memory, res.free_memory),
                         (1024, 768, 256))
        self.assertEqual((res.dfree, res.reserved_disk), (4000, 6000))
        self.assertEqual(res.free_vcpus, 2 * 4 - 1 - 2)
        # A real instance that would only fit without the reservation.
        inst, disks = real_instance(store, "late", maxmem=512)
        err = self.assertRaises(errors.OpPrereqError,
                                store.check_instance_fits, inst,
                                {node: res}, disks=disks)
        self.assertEqual(err.args[1], errors.ECODE_NORES)
        self.assertIn("Not enough memory on node node1.example.com for"
                      " instance late: needed 512 MiB, available 256 MiB"
                      " (free 1024 MiB, 768 MiB reserved for stopped and"
                      " forthcoming instances)", str(err))
        inst2, disks2 = real_instance(store, "late2", maxmem=128,
                                      disk_sizes=[5000])
        err = self.assertRaises(errors.OpPrereqError,
                                store.check_instance_fits, inst2,
                                {node: res}, disks=disks2)
        self.assertIn("Not enough disk on node node1.example.com for"
                      " instance late2: needed 5000 MiB, available 4000 MiB"
                      " (6000 MiB reserved for forthcoming instances)",
                      str(err))
        # the reservation itself fits: what it holds is its own
        store.check_instance_fits(store.instances[fuuid], {node: res})
        # Committing the forthcoming one needs its mandatory fields ...
        err = self.assertRaises(errors.OpPrereqError,
                                store.commit_forthcoming, fuuid)
        for field in ("name", "os", "hypervisor"):
            self.assertIn(field, str(err))
        store.rename_instance(fuuid, "reserved1")
        store.modify_instance(fuuid, os="debootstrap", hypervisor="fake")
        # ... and then succeeds although the node is nearly full.
        store.commit_forthcoming("reserved1")
        inst = store.get_instance("reserved1")
        self.assertFalse(inst.forthcoming)
        self.assertFalse(store.instance_disks(inst)[0].forthcoming)
        self.assertEqual(store.verify(), [])
        # now its disk is on the node (the node reports it used) and the
        # stopped instance may start: the same room is left
        res = store.node_resources(node, live=dict(LIVE, dfree=4000),
                                   hv_instances={})
        self.assertEqual((res.free_memory, res.free_disk), (256, 4000))
        # running, it holds its memory in the node's own figures
        res = store.node_resources(
            node, live=dict(LIVE, dfree=4000, mfree=256),
            hv_instances={"reserved1": {"state": "running", "memory": 768}})
        self.assertEqual((res.reserved_memory, res.free_memory), (0, 256))

    def test_growing_counts_only_the_growth(self):
        store = make_store(self)
        node = store.master_node.uuid
        fuuid = store.add_instance(Instance(forthcoming=True,
                                            primary_node=node,
                                            beparams={"maxmem": 512}))
        res = {node: store.node_resources(node, live=LIVE, hv_instances={})}
        self.assertEqual(res[node].free_memory, 1024 - 512)
        inst = store.instances[fuuid]
        self.assertEqual(store.instance_growth(
            inst, beparams={"maxmem": 1024}), {"memory"})
        store.check_instance_fits(inst, res, beparams={"maxmem": 1024})
        err = self.assertRaises(errors.OpPrereqError,
                                store.check_instance_fits, inst, res,
                                beparams={"maxmem": 2048})
        self.assertIn("needed 1536 MiB, available 512 MiB", str(err))
        self.assertEqual(store.instance_growth(inst,
                                               beparams={"maxmem": 256}),
                         set())

    def test_which_instances_reserve_memory(self):
        store = make_store(self)
        node = store.master_node.uuid
        for name, state in (("up", "up"), ("down", "down"),
                            ("off", "offline"), ("crashed", "up")):
            inst, disks = real_instance(store, name, maxmem=100,
                                        admin_state=state)
            store.add_instance(inst, disks)
        res = store.node_resources(node, live=LIVE, hv_instances={
            "up": {"state": "running", "memory": 100},
            "crashed": {"state": "crashed", "memory": 100}})
        # running: in mfree already; down and crashed: may start; offline:
        # may not
        self.assertEqual(res.reserved_memory, 200)
        self.assertEqual(res.vcpus_used, 3)

    def test_admin_overrides_lower_what_a_node_offers(self):
        store = make_store(self)
        node = store.master_node.uuid
        store.set_node_params(node, hv_state_static={"fake": {
            "mem_total": 1536, "mem_node": 512, "cpu_node": 2}},
            disk_state_static={"plain": {"xenvg": {"disk_reserved": 1000}}})
        res = store.node_resources(node, live=LIVE, hv_instances={})
        # mtotal 2048 -> 1536 (512 less free), mnode 256 -> 512 (256 less)
        self.assertEqual((res.mtotal, res.mnode, res.mfree),
                         (1536, 512, 1024 - 512 - 256))
        self.assertEqual((res.dfree, res.cnos), (10000 - 1000, 2))
        # overrides never add: a larger mem_total is ignored
        store.set_node_params(node, hv_state_static={"fake": {
            "mem_total": 99999}}, disk_state_static={})
        res = store.node_resources(node, live=LIVE, hv_instances={})
        self.assertEqual((res.mtotal, res.mfree), (2048, 1024))

    def test_drbd_counts_on_both_nodes_with_metadata(self):
        store = make_store(self)
        n2 = store.add_node(Node(name="node2", primary_ip="127.0.0.2"))
        inst, disks = real_instance(store, "mirror", template="drbd",
                                    disk_sizes=[1000],
                                    secondary_nodes=["node2"])
        store.add_instance(inst, disks)
        for node in (store.master_node.uuid, n2):
            self.assertEqual(store.node_usage(node).disk,
                             1000 + constants.DRBD_META_SIZE)
        self.assertEqual(store.node_usage(n2).memory, 0)
        self.assertEqual(store.node_usage(store.master_node.uuid).memory,
                         128)

    def test_no_live_data_refuses_naming_why(self):
        store = make_store(self)
        node = store.master_node.uuid
        res = store.node_resources(node, live=None,
                                   reason="node node1.example.com is"
                                   " unreachable")
        self.assertIsNone(res.free_memory)
        self.assertIsNone(res.free_disk)
        inst, _ = real_instance(store, "big", maxmem=128)
        err = self.assertRaises(errors.OpPrereqError,
                                store.check_instance_fits, inst, {node: res})
        self.assertEqual(err.args[1], errors.ECODE_ENVIRON)
        self.assertIn("Cannot check the free memory of node"
                      " node1.example.com for instance big: node"
                      " node1.example.com is unreachable", str(err))


class UpgradeTests(unittest.TestCase):

    def _old_config(self):
        """A Ganeti 2.x style file: maps keyed by name, embedded disks."""
        return {
            "version": constants.build_version(2, 1, 0),
            "cluster": {"cluster_name": "old.example.com",
                        "master_node": "node1.example.com",
                        "enabled_hypervisors": ["kvm"],
                        "default_hypervisor": "kvm",
                        "hvparams": {"kvm": {"kernel_args": "ro"}},
                        "beparams": {"default": {"memory": 128}},
                        "highest_used_port": 11005, "tags": ["old"]},
            "nodes": {"node1.example.com": {"name": "node1.example.com",
                                            "primary_ip": "127.0.0.1",
                                            "secondary_ip": "127.0.0.1"}},
            "instances": {"inst1.example.com": {
                "name": "inst1.example.com",
                "primary_node": "node1.example.com",
                "os": "debootstrap", "hypervisor": "kvm",
                "hvparams": {"migration_port": 1234, "acpi": False},
                "admin_up": True, "disk_template": "plain",
                "nics": [{"mac": "aa:00:00:00:00:01", "bridge": "br0"}],
                "disks": [{"dev_type": "lvm", "size": 1024,
                           "logical_id": ["xenvg", "disk0"],
                           "iv_name": "disk/0"}]}},
            "serial_no": 10,
        }

    def test_upgrade_from_2x_layout(self):
        store = ConfigStore.from_dict(self._old_config())
        self.assertTrue(store.upgraded)
        self.assertEqual(store.verify(), [])
        node = store.get_node("node1.example.com")
        self.assertTrue(constants.UUID_RE.match(node.uuid))
        self.assertIn(node.uuid, store.nodes)
        self.assertEqual(store.cluster.master_node, node.uuid)
        self.assertEqual(store.nodegroups[node.group].name, "default")
        inst = store.get_instance("inst1.example.com")
        self.assertEqual(inst.primary_node, node.uuid)
        self.assertEqual(inst.admin_state, "up")
        self.assertEqual(inst.admin_state_source, "admin")
        self.assertEqual(inst.hvparams, {"acpi": False})  # global dropped
        self.assertEqual(inst.nics[0].nicparams, {"link": "br0"})
        self.assertTrue(inst.nics[0].uuid)
        disk = store.instance_disks(inst)[0]
        self.assertEqual((disk.dev_type, disk.size, disk.nodes),
                         ("plain", 1024, [node.uuid]))
        # Parameter families the old file lacked are filled in.
        self.assertEqual(store.cluster.nicparams["default"]["mode"],
                         "bridged")
        self.assertEqual(store.cluster.hvparams["kvm"]["kernel_args"], "ro")
        self.assertEqual(store.cluster.beparams["default"]["maxmem"], 128)
        self.assertNotIn("memory", store.cluster.beparams["default"])
        self.assertIn("fake", store.cluster.hvparams)
        self.assertEqual(store.version, constants.CONFIG_VERSION)

    def test_upgraded_config_saves_and_reloads(self):
        d = self.mktemp()
        os.makedirs(d)
        path = os.path.join(d, "config.data")
        with open(path, "w") as f:
            json.dump(self._old_config(), f)
        store = ConfigStore.load(path)
        store.save()
        again = ConfigStore.load(path)
        self.assertFalse(again.upgraded)
        self.assertEqual(again.to_dict(), store.to_dict())

    def test_missing_uuid_in_current_version(self):
        store = make_store(self)
        data = store.to_dict()
        node = data["nodes"].pop(store.cluster.master_node)
        del node["uuid"]
        data["nodes"]["node1.example.com"] = node
        data["cluster"]["master_node"] = "node1.example.com"
        again = ConfigStore.from_dict(data)
        self.assertTrue(again.upgraded)
        # The master reference by name is also followed to the new UUID.
        self.assertEqual(again.master_node.name, "node1.example.com")
        self.assertEqual(again.verify(), [])


class GanetiCompatibilityTests(unittest.TestCase):
    """config.data files move both ways between us and Ganeti 3.0."""

    def setUp(self):
        ganeti_peer.skip_unless_available()

    _LOAD = r"""
import json, sys
from ganeti import objects
cd = objects.ConfigData.FromDict(json.load(open(sys.argv[1])))
cd.UpgradeConfig()
out = {"instances": sorted((i.name or i.uuid, bool(i.forthcoming),
                            i.admin_state, len(i.disks))
                           for i in cd.instances.values()),
       "nodes": sorted(n.name for n in cd.nodes.values()),
       "cluster": cd.cluster.cluster_name,
       "uid_pool": [list(r) for r in cd.cluster.uid_pool],
       "disks": len(cd.disks),
       "ndparams": [cd.cluster.ndparams] +
                   [g.ndparams for g in cd.nodegroups.values()]}
print(json.dumps(out))
"""

    def test_ganeti_loads_our_file(self):
        store = make_store(self)
        # with this project's own node parameters (the repair budget)
        store.set_cluster_params(uid_pool=[[1000, 1999]], ndparams=dict(
            store.cluster.ndparams, repair_max_parallel=2))
        store.set_nodegroup_params("default",
                                   ndparams={"repair_min_healthy": 0.75})
        store.add_node(Node(name="node2.example.com",
                            primary_ip="127.0.0.2"))
        inst, disks = real_instance(store, "inst1.example.com",
                                    disk_sizes=[1024])
        store.add_instance(inst, disks)
        store.set_instance_admin_state("inst1.example.com", "up")
        store.add_instance(Instance(forthcoming=True),
                           [Disk(size=512)])
        d = ganeti_peer.run_python(self._LOAD, [store.path])

        def check(result):
            out, err, code = result
            self.assertEqual(code, 0, err)
            got = json.loads(out)
            self.assertEqual(got["nodes"], ["node1.example.com",
                                            "node2.example.com"])
            names = [i[0] for i in got["instances"]]
            self.assertIn(["inst1.example.com", False, "up", 1],
                          got["instances"])
            self.assertEqual(len(names), 2)
            self.assertEqual(got["disks"], 2)
            self.assertEqual(got["uid_pool"], [[1000, 1999]])
            cluster_nd, group_nd = got["ndparams"]
            self.assertEqual(cluster_nd["repair_max_parallel"], 2)
            self.assertEqual(group_nd, {"repair_min_healthy": 0.75})
        return d.addCallback(check)

    _MAKE = r"""
import json, sys
from ganeti import objects, constants
c = objects.Cluster(cluster_name="g.example.com", uuid="c0c0c0c0-0000-4000-8000-000000000001",
    master_node="11111111-0000-4000-8000-000000000001", master_ip="127.0.0.1",
    master_netdev="lo", enabled_hypervisors=["fake"],
    enabled_disk_templates=["file", "diskless"], highest_used_port=11000,
    tcpudp_port_pool=[], mac_prefix="aa:00:00", volume_group_name="",
    file_storage_dir="/srv/ganeti/file-storage", default_iallocator="",
    tags=set(["ctag"]), candidate_pool_size=10, uid_pool=[(1000, 1999)],
    hvparams={}, beparams={}, ndparams={}, diskparams={}, ipolicy={},
    os_hvp={}, osparams={}, serial_no=5, ctime=1.0, mtime=2.0,
    nicparams={"default": {"mode": "bridged", "link": "br0"}})
c.UpgradeConfig()
g = objects.NodeGroup(name="default", uuid="22222222-0000-4000-8000-000000000001",
    members=[], ndparams={}, diskparams={}, ipolicy={}, alloc_policy="preferred",
    networks={}, serial_no=1, tags=set())
n = objects.Node(name="node1.example.com", uuid="11111111-0000-4000-8000-000000000001",
    primary_ip="127.0.0.1", secondary_ip="127.0.0.1", group=g.uuid,
    master_candidate=True, offline=False, drained=False, master_capable=True,
    vm_capable=True, ndparams={}, serial_no=1, tags=set(["ntag"]))
d = objects.Disk(dev_type="file", size=1024, logical_id=("loop", "/srv/x/disk0"),
    iv_name="disk/0", mode="rw", uuid="33333333-0000-4000-8000-000000000001",
    nodes=[n.uuid], params={}, serial_no=1)
nic = objects.NIC(mac="aa:00:00:11:22:33", nicparams={"mode": "bridged", "link": "br0"},
    uuid="44444444-0000-4000-8000-000000000001")
i = objects.Instance(name="inst1.example.com", uuid="55555555-0000-4000-8000-000000000001",
    primary_node=n.uuid, secondary_nodes=[], os="debootstrap+default",
    hypervisor="fake", hvparams={}, beparams={"maxmem": 256, "minmem": 256},
    osparams={}, admin_state="up", admin_state_source="user", nics=[nic],
    disks=[d.uuid], disks_active=True, serial_no=3, tags=set(["itag"]))
cd = objects.ConfigData(version=constants.CONFIG_VERSION, cluster=c,
    nodes={n.uuid: n}, nodegroups={g.uuid: g}, instances={i.uuid: i},
    networks={}, disks={d.uuid: d}, filters={}, serial_no=7, ctime=1.0, mtime=2.0)
sys.stdout.write(json.dumps(cd.ToDict(), default=list))
"""

    def test_we_load_a_file_written_by_ganeti(self):
        d = ganeti_peer.run_python(self._MAKE)

        def check(result):
            out, err, code = result
            self.assertEqual(code, 0, err)
            path = os.path.join(self.mktemp())
            with open(path, "w") as f:
                f.write(out)
            store = ConfigStore.load(path)
            self.assertEqual(store.verify(), [])
            inst = store.get_instance("inst1.example.com")
            self.assertEqual(inst.admin_state_source, "user")
            self.assertEqual(store.get_node(inst.primary_node).name,
                             "node1.example.com")
            self.assertEqual(store.instance_disks(inst)[0].size, 1024)
            self.assertEqual(store.cluster.uid_pool, [[1000, 1999]])
            self.assertEqual(store.cluster.tags, {"ctag"})
            # Written back, Ganeti's own loader still accepts it.
            store.save()
            return ganeti_peer.run_python(self._LOAD, [path])

        def check_back(result):
            out, err, code = result
            self.assertEqual(code, 0, err)
            self.assertEqual(json.loads(out)["cluster"], "g.example.com")
        return d.addCallback(check).addCallback(check_back)
