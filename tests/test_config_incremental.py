"""Configuration changes that cost what they change: the file written from
per-object encoded forms, verification of what a change can affect,
changes sharing writes, and the guarantees that must hold all the same."""

import json
import os
import random

from twisted.internet import defer, reactor
from twisted.trial import unittest
from zope.interface import implementer

from ganeti import errors
from ganeti import objects
from ganeti.config import ConfigStore
from ganeti.objects import NIC, Disk, Instance, Network, Node, NodeGroup
from ganeti.utils.writer import IFileWriter, OrderedWriter

from tests import ganeti_peer
from tests.test_config import make_store
from tests.test_writer import HeldWriter

#: what a refused change may raise
REFUSED = (errors.OpPrereqError, errors.ConfigVerifyError, errors.TagError,
           errors.ReservationError)


def disk_bytes(store):
    with open(store.path, "rb") as f:
        return f.read()


def small_cluster(testcase):
    """Three nodes in two groups, a network, a few instances."""
    store = make_store(testcase)
    store.add_nodegroup(NodeGroup(name="rack2"))
    store.add_network(Network(name="net1", network="10.1.0.0/24"))
    for i, group in ((2, "default"), (3, "rack2")):
        store.add_node(Node(name="node%d.example.com" % i,
                            primary_ip="127.0.0.%d" % i, group=group))
    for i in range(4):
        add_instance(store, "inst%d" % i, "node%d.example.com" % (i % 3 + 1))
    return store


def add_instance(store, name, node, **kw):
    inst = Instance(name=name, primary_node=node, os="debootstrap+default",
                    hypervisor="fake", beparams={"maxmem": 128},
                    nics=[NIC(mac=store.generate_mac())], **kw)
    disk = Disk(dev_type="plain", size=512, logical_id=["xenvg", name])
    return store.add_instance(inst, [disk])


class RandomChanges(object):
    """Changes of every kind the store has, picked at random; some are
    refused (bad on purpose, or by chance)."""

    def __init__(self, store, rng, leave_out=()):
        self.s = store
        self.rng = rng
        self.n = 0
        self.ops = sorted(n for n in dir(self)
                          if n.startswith("op_") and n not in leave_out)

    def pick(self, values):
        values = sorted(values, key=lambda o: o.uuid) \
            if values and hasattr(values[0], "uuid") else sorted(values)
        return self.rng.choice(values) if values else None

    def name(self, prefix):
        self.n += 1
        return "%s%d" % (prefix, self.n)

    def instance(self):
        return self.pick(list(self.s.instances.values()))

    def node(self):
        return self.pick(list(self.s.nodes.values()))

    def group(self):
        return self.pick(list(self.s.nodegroups.values()))

    def network(self):
        return self.pick(list(self.s.networks.values()))

    def run_one(self):
        """Make one change; True if it was accepted."""
        op = self.rng.choice(self.ops)
        try:
            getattr(self, op)()
        except REFUSED:
            return op, False
        return op, True

    # --- the changes --------------------------------------------------

    def op_tag(self):
        kind, target = self.rng.choice([
            ("cluster", None),
            ("node", getattr(self.node(), "name", None)),
            ("instance", getattr(self.instance(), "name", None)),
            ("nodegroup", getattr(self.group(), "name", None)),
            ("network", getattr(self.network(), "name", None))])
        if self.rng.random() < 0.7:
            self.s.add_tags(kind, target, [self.name("tag")])
        else:
            obj = self.s._tag_target(kind, target)
            self.s.remove_tags(kind, target, [self.pick(list(obj.tags))
                                              or "missing"])

    def op_cluster_params(self):
        self.s.set_cluster_params(**self.rng.choice([
            {"candidate_pool_size": self.rng.randint(1, 10)},
            {"mac_prefix": self.rng.choice(["aa:00:00", "aa:00:01"])},
            # refused: the instances' hypervisor would not be enabled
            {"enabled_hypervisors": ["kvm"], "default_hypervisor": "kvm"},
            {"nicparams": {"default": {"mode": "bridged",
                                       "link": self.name("br")}}}]))

    def op_add_instance(self):
        node = self.node()
        add_instance(self.s, self.name("new"), node.name)

    def op_add_forthcoming_then_commit(self):
        uuid = self.s.add_instance(
            Instance(forthcoming=True, primary_node=self.node().uuid),
            [Disk(dev_type="plain", size=256)])
        if self.rng.random() < 0.5:
            self.s.rename_instance(uuid, self.name("fc"))
            self.s.modify_instance(uuid, os="debootstrap",
                                   hypervisor="fake",
                                   nics=[NIC(mac=self.s.generate_mac())])
            self.s.commit_forthcoming(uuid)

    def op_remove_instance(self):
        self.s.remove_instance(self.instance().uuid)

    def op_rename_instance(self):
        inst = self.instance()
        # sometimes the name of another one: refused
        other = self.instance()
        new = other.name if self.rng.random() < 0.2 and other.name \
            else self.name("ren")
        self.s.rename_instance(inst.uuid, new)

    def op_admin_state(self):
        self.s.set_instance_admin_state(
            self.instance().uuid, self.rng.choice(["up", "down", "offline"]))

    def op_disks_active(self):
        self.s.set_instance_disks_active(self.instance().uuid,
                                         self.rng.random() < 0.5)

    def op_modify_instance(self):
        inst = self.instance()
        choice = self.rng.randrange(5)
        if choice == 0:
            self.s.modify_instance(inst.uuid, beparams={
                "maxmem": self.rng.choice([128, 256])})
        elif choice == 1:
            # another instance's MAC: refused
            other = self.instance()
            mac = other.nics[0].mac if other.nics else None
            self.s.modify_instance(inst.uuid, nics=[NIC(mac=mac)])
        elif choice == 2:
            self.s.modify_instance(inst.uuid,
                                   primary_node=self.node().uuid)
        elif choice == 3:
            self.s.modify_instance(inst.uuid,
                                   network_port=self.s.allocate_port())
        else:
            net = self.network()
            self.s.modify_instance(inst.uuid, nics=[NIC(
                mac=self.s.generate_mac(),
                network=net.uuid if net else None,
                ip=self.rng.choice([None, "10.1.0.%d"
                                    % self.rng.randint(2, 250)]))])

    def op_disk(self):
        inst = self.instance()
        choice = self.rng.randrange(3)
        if choice == 0:
            self.s.add_instance_disk(inst.uuid, Disk(
                dev_type="plain", size=128, logical_id=["xenvg",
                                                        self.name("lv")]))
        elif choice == 1 and inst.disks:
            self.s.remove_instance_disk(inst.uuid,
                                        self.rng.choice(inst.disks))
        elif inst.disks:
            # a negative size is refused
            self.s.modify_disk(self.rng.choice(inst.disks),
                               size=self.rng.choice([1024, -1]))

    def op_node(self):
        node = self.node()
        choice = self.rng.randrange(6)
        if choice == 0:
            # offline and master candidate at once: refused
            self.s.set_node_params(node.uuid, offline=True)
        elif choice == 1:
            self.s.set_node_params(node.uuid, drained=not node.drained)
        elif choice == 2:
            self.s.assign_node_to_group(node.uuid, self.group().uuid)
        elif choice == 3:
            self.s.rename_node(node.uuid, self.name("node"))
        elif choice == 4:
            self.s.add_node(Node(name=self.name("node"),
                                 primary_ip="127.0.2.%d"
                                 % self.rng.randint(1, 250)))
        else:
            self.s.remove_node(node.uuid)

    def op_group(self):
        choice = self.rng.randrange(4)
        if choice == 0:
            self.s.add_nodegroup(NodeGroup(name=self.name("group")))
        elif choice == 1:
            self.s.remove_nodegroup(self.group().uuid)
        elif choice == 2:
            self.s.rename_nodegroup(self.group().uuid, self.name("group"))
        else:
            net = self.network()
            if net is not None:
                # routed NICs without an IP on that network: refused
                self.s.set_nodegroup_params(self.group().uuid, networks={
                    net.uuid: self.rng.choice([
                        {"mode": "bridged", "link": "br1"},
                        {"mode": "routed", "link": "100"}])})

    def op_network(self):
        choice = self.rng.randrange(3)
        if choice == 0:
            self.s.add_network(Network(name=self.name("net"),
                                       network="10.2.0.0/24"))
        elif choice == 1:
            net = self.network()
            if net is not None:
                self.s.remove_network(net.uuid)
        else:
            # a network only a node group has settings for: removing it
            # changes the group too
            uuid = self.s.add_network(Network(name=self.name("net"),
                                              network="10.3.0.0/24"))
            self.s.set_nodegroup_params(self.group().uuid, networks={
                uuid: {"mode": "bridged", "link": "br9"}})
            self.s.remove_network(uuid)

    def op_maintenance(self):
        choice = self.rng.randrange(3)
        if choice == 0:
            self.s.set_maintenance_params(balance=self.rng.random() < 0.5)
        elif choice == 1:
            self.s.update_maintenance(incidents=[{
                "uuid": self.name("incident"), "node": self.node().uuid,
                "original": {"status": "failure"},
                "repair_status": objects.INCIDENT_NOTED, "jobs": []}])
        else:
            incident = self.pick(list(self.s.maintenance.incidents))
            if incident is not None:
                self.s.cancel_incident(incident)


class RandomChangesTests(unittest.TestCase):
    """After any sequence of changes, what is on disk is what a full
    serialisation gives, and the problems kept are what a full
    verification finds."""

    def setUp(self):
        # checked here explicitly, not by the automatic self-check
        self.patch(ConfigStore, "self_check", False)

    def run_changes(self, seed, count, leave_out=()):
        store = small_cluster(self)
        changes = RandomChanges(store, random.Random(seed), leave_out)
        seen = {}
        for step in range(count):
            op, accepted = changes.run_one()
            seen.setdefault(op, set()).add(accepted)
            self.assertEqual(disk_bytes(store), store.dumps(),
                             "step %d (%s): config.data differs from a full"
                             " serialisation" % (step, op))
            store.check_incremental()
            if step % 50 == 0:
                # a complete file, that loads
                self.assertEqual(ConfigStore.load(store.path).verify(),
                                 store.verify())
        return store, seen

    def test_file_and_problems_equal_full_ones_after_random_changes(self):
        store, seen = self.run_changes(seed=1, count=400)
        # every kind of change ran, accepted and refused ones
        kinds = [n for n in dir(RandomChanges) if n.startswith("op_")]
        self.assertEqual(sorted(seen), sorted(kinds))
        self.assertIn(False, set().union(*seen.values()))
        self.assertTrue(all(True in v for v in seen.values()), seen)
        self.assertEqual(store.written_bytes(), disk_bytes(store))
        self.assertEqual(ConfigStore.load(store.path).verify(),
                         store.verify())

    @defer.inlineCallbacks
    def test_ganeti_loads_the_file_after_random_changes(self):
        ganeti_peer.skip_unless_available()
        # (the maintenance entry is this project's own: Ganeti 3.0 refuses
        # a file that has it, see docs/maintd.rst)
        store, _ = self.run_changes(seed=2, count=150,
                                    leave_out=["op_maintenance"])
        script = (
            "import json, sys\n"
            "from ganeti import objects\n"
            "cd = objects.ConfigData.FromDict(json.load(open(sys.argv[1])))\n"
            "cd.UpgradeConfig()\n"
            "print(json.dumps([sorted(cd.instances), sorted(cd.nodes),"
            " sorted(cd.disks), sorted(cd.cluster.tags), cd.serial_no]))\n")
        out, err, code = yield ganeti_peer.run_python(script, [store.path])
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out), [
            sorted(store.instances), sorted(store.nodes),
            sorted(store.disks), sorted(store.cluster.tags),
            store.serial_no])


class VerifyWhatChangesTests(unittest.TestCase):
    """A change is checked with everything it can affect, not more: what
    it breaks is refused and rolled back, what was broken before does
    not block it."""

    def setUp(self):
        self.store = small_cluster(self)
        self.file = disk_bytes(self.store)
        self.state = self.store.to_dict()
        self.serial = self.store.serial_no

    def assertRefused(self, fn, *args, **kwargs):
        err = self.assertRaises(errors.ConfigVerifyError, fn, *args,
                                **kwargs)
        self.assertEqual(self.store.to_dict(), self.state)
        self.assertEqual(disk_bytes(self.store), self.file)
        self.assertEqual(self.store.serial_no, self.serial)
        # and the store goes on working
        self.store.add_tags("cluster", None, ["after"])
        self.assertEqual(disk_bytes(self.store), self.store.dumps())
        return str(err)

    def test_rule_of_the_changed_object_alone(self):
        node = self.store.get_node("node2.example.com")
        text = self.assertRefused(self.store.set_node_params, node.uuid,
                                  offline=True)
        self.assertIn("node node2.example.com master_candidate: an offline"
                      " node cannot be a master candidate", text)
        self.assertFalse(self.store.get_node(node.uuid).offline)

    def test_duplicate_found_in_the_index(self):
        i0 = self.store.get_instance("inst0")
        i1 = self.store.get_instance("inst1")
        text = self.assertRefused(self.store.modify_instance, i1.uuid,
                                  nics=[NIC(mac=i0.nics[0].mac)])
        self.assertIn("instance inst1 nic/0/mac: %s is also used by inst0"
                      % i0.nics[0].mac, text)
        # the refused change left nothing in the index: the MAC it tried
        # is free again once inst0 gives it up
        mac = i0.nics[0].mac
        self.store.modify_instance(i0.uuid, nics=[NIC(mac="aa:00:00:99:99:"
                                                      "99")])
        self.store.modify_instance(i1.uuid, nics=[NIC(mac=mac)])
        self.store.check_incremental()

    def test_cluster_change_checks_the_instances_it_affects(self):
        text = self.assertRefused(self.store.set_cluster_params,
                                  enabled_hypervisors=["kvm"],
                                  default_hypervisor="kvm")
        for i in range(4):
            self.assertIn("instance inst%d hypervisor: 'fake' is not enabled"
                          " in the cluster" % i, text)

    def test_group_setting_checks_the_instances_of_its_nodes(self):
        store = self.store
        net = store.get_network("net1")
        inst = store.get_instance("inst2")      # on node3, in rack2
        store.modify_instance(inst.uuid, nics=[NIC(mac=store.generate_mac(),
                                                   network=net.uuid)])
        self.state, self.serial = store.to_dict(), store.serial_no
        self.file = disk_bytes(store)
        # the other group's setting does not concern it ...
        store.set_nodegroup_params("default", networks={
            net.uuid: {"mode": "routed", "link": "100"}})
        self.state, self.serial = store.to_dict(), store.serial_no
        self.file = disk_bytes(store)
        # ... its own group's does, and so does moving its node there
        text = self.assertRefused(store.set_nodegroup_params, "rack2",
                                  networks={net.uuid: {"mode": "routed",
                                                       "link": "100"}})
        self.assertIn("instance inst2 nic/0: an IP address is required in"
                      " routed mode", text)
        self.state, self.serial = store.to_dict(), store.serial_no
        self.file = disk_bytes(store)
        self.assertRefused(store.assign_node_to_group, "node3.example.com",
                           "default")

    def test_problem_from_before_does_not_block_a_change(self):
        data = self.store.to_dict()
        uuid = self.store.get_instance("inst1").uuid
        data["instances"][uuid]["beparams"]["colour"] = "blue"
        store = ConfigStore.from_dict(data, path=self.store.path)
        problem = "instance inst1 beparams: unknown parameter 'colour'"
        self.assertEqual(store.track(), [problem])
        store.set_instance_admin_state("inst1", "up")
        store.add_tags("cluster", None, ["unrelated"])
        self.assertEqual(store.verify(), [problem])
        # a second object with a problem is refused
        self.assertRaises(errors.ConfigVerifyError, store.modify_instance,
                          "inst0", beparams={"colour": "red"})

    def test_a_duplicate_from_before_follows_both_holders(self):
        data = self.store.to_dict()
        i0 = self.store.get_instance("inst0")
        i1 = self.store.get_instance("inst1")
        mac = i0.nics[0].mac
        data["instances"][i1.uuid]["nics"][0]["mac"] = mac
        store = ConfigStore.from_dict(data, path=self.store.path)
        self.assertEqual(sorted(store.track()), [
            "instance inst0 nic/0/mac: %s is also used by inst1" % mac,
            "instance inst1 nic/0/mac: %s is also used by inst0" % mac])
        # renaming one would change what the problems say: new ones, as
        # a full verification would find them
        err = self.assertRaises(errors.ConfigVerifyError,
                                store.rename_instance, "inst0", "inst0b")
        self.assertIn("instance inst1 nic/0/mac: %s is also used by inst0b"
                      % mac, str(err))
        store.check_incremental()
        # giving one another MAC clears both
        store.modify_instance("inst1", nics=[NIC(mac=store.generate_mac())])
        self.assertEqual(store.verify(), [])
        store.check_incremental()

    def test_removing_what_others_refer_to(self):
        store = self.store
        disk = store.get_instance("inst0").disks[0]
        # a disk that belongs to two instances
        data = store.to_dict()
        uuid = store.get_instance("inst1").uuid
        data["instances"][uuid]["disks"].append(disk)
        store = ConfigStore.from_dict(data, path=store.path)
        before = sorted(store.track())
        self.assertIn("instance inst1 disks/1: disk %s also belongs to"
                      " inst0" % disk, before)
        # once inst0 is gone, the disk went with it: inst1 now names a
        # disk that does not exist (found although inst1 was not touched)
        err = self.assertRaises(errors.ConfigVerifyError,
                                store.remove_instance, "inst0")
        self.assertIn("instance inst1 disks/1: disk %s does not exist"
                      % disk, str(err))
        self.assertEqual(sorted(store.verify()), before)


@implementer(IFileWriter)
class StagedWriter(HeldWriter):
    """Like HeldWriter, and a write can also be started (it takes what it
    writes, the file is written) and finished later (its caller hears)."""

    def start(self):
        fn, args, kwargs, d = self.held.pop(0)
        result = fn(*args, **kwargs)
        return lambda: d.callback(result)


class SharedWritesTests(unittest.TestCase):
    """Changes accepted until a write starts share it; every caller hears
    only once a write holding its change is on disk."""

    def setUp(self):
        self.store = make_store(self)
        self.writer = StagedWriter()
        self.store.writer = self.writer
        self.heard = []
        self.store.write_listeners.append(
            lambda s: self.heard.append(json.loads(disk_bytes(s))
                                        ["serial_no"]))

    def change(self, tag):
        self.store.add_tags("cluster", None, [tag])
        d = self.store.flushed()
        d.addCallback(lambda _: self.assertIn(
            tag, json.loads(disk_bytes(self.store))["cluster"]["tags"]))
        return d

    def test_changes_before_the_write_starts_share_it(self):
        writes = self.store.writes
        waiting = [self.change("t%d" % i) for i in range(5)]
        self.assertEqual(len(self.writer.held), 1)
        for d in waiting:
            self.assertNoResult(d)
        self.writer.release()
        for d in waiting:
            self.successResultOf(d)
        self.assertEqual(self.store.writes, writes + 1)
        self.assertEqual(disk_bytes(self.store), self.store.dumps())
        self.assertEqual(self.heard, [self.store.serial_no])

    def test_changes_during_a_write_share_the_next(self):
        first = self.change("a")
        finish = self.writer.start()        # "a" is being written
        later = [self.change("b"), self.change("c")]
        self.assertEqual(len(self.writer.held), 1)   # one more write
        on_disk = json.loads(disk_bytes(self.store))["cluster"]["tags"]
        self.assertEqual((sorted(on_disk)), ["a"])
        self.assertNoResult(first)
        finish()
        self.successResultOf(first)
        for d in later:
            self.assertNoResult(d)
        self.writer.release()
        for d in later:
            self.successResultOf(d)
        self.assertEqual(self.store.writes, 3)   # create, a, b+c
        self.assertEqual(self.heard, [self.store.serial_no - 2,
                                      self.store.serial_no])
        self.assertEqual(self.store.flushed().called, True)

    def test_a_refused_change_shares_nothing(self):
        waiting = self.change("a")
        node = self.store.master_node
        self.assertRaises(errors.ConfigVerifyError,
                          self.store.set_node_params, node.uuid,
                          offline=True)
        self.writer.release()
        self.successResultOf(waiting)
        self.assertFalse(json.loads(disk_bytes(self.store))["nodes"]
                         [node.uuid]["offline"])

    def test_a_failed_shared_write_fails_every_caller(self):
        waiting = [self.change("t%d" % i) for i in range(3)]
        self.writer.fail_next(OSError(28, "No space left on device"))
        for d in waiting:
            self.failureResultOf(d, errors.ConfigurationError)
        self.assertEqual(self.heard, [])
        self.assertRaises(errors.ConfigurationError, self.change, "more")


class ConcurrentCallersTests(unittest.TestCase):
    """Callers changing the configuration at the same time through the
    master's writer thread: each hears only when its change is on disk."""

    timeout = 60

    @defer.inlineCallbacks
    def test_each_caller_hears_after_its_change_is_on_disk(self):
        store = make_store(self)
        writer = OrderedWriter(reactor)
        writer.startService()
        self.addCleanup(writer.stopService)
        store.writer = writer
        writes = store.writes

        @defer.inlineCallbacks
        def caller(n):
            for i in range(5):
                tag = "c%dn%d" % (n, i)
                store.add_tags("cluster", None, [tag])
                yield store.flushed()
                with open(store.path, "rb") as f:
                    self.assertIn(tag, json.load(f)["cluster"]["tags"])
        yield defer.gatherResults([caller(n) for n in range(10)])
        self.assertEqual(disk_bytes(store), store.dumps())
        self.assertLessEqual(store.writes - writes, 50)


class CrashTests(unittest.TestCase):
    """Whatever happens to a write, config.data is a complete
    configuration: the last one written."""

    def setUp(self):
        self.store = small_cluster(self)

    def crash_in(self, name):
        """Make ``os.<name>`` fail for config.data's directory as if the
        disk died there; returns the patch (``restore()`` ends it)."""
        real = getattr(os, name)
        config_dir = os.path.dirname(self.store.path)

        def dying(*args):
            if name == "fsync" or any(isinstance(a, str) and
                                      a.startswith(config_dir)
                                      for a in args):
                raise OSError(5, "Input/output error")
            return real(*args)
        return self.patch(os, name, dying)

    def assertCompleteAndOld(self, before):
        loaded = ConfigStore.load(self.store.path)
        self.assertEqual(loaded.to_dict(), before)
        self.assertEqual(loaded.verify(), [])
        left = [f for f in os.listdir(os.path.dirname(self.store.path))
                if f.startswith(".")]
        self.assertEqual(left, [])

    def test_a_write_dying_anywhere_leaves_the_last_file(self):
        for name in ("fsync", "rename"):
            before = self.store.to_dict()
            crash = self.crash_in(name)
            self.assertRaises(OSError, self.store.add_tags, "cluster",
                              None, ["lost"])
            crash.restore()
            self.assertCompleteAndOld(before)
            # rolled back as well: memory is what is on disk
            self.assertEqual(self.store.to_dict(), before)
            self.store.add_tags("cluster", None, ["kept-" + name])
            self.assertEqual(disk_bytes(self.store), self.store.dumps())

    def test_a_failed_write_in_the_writer_leaves_the_last_file(self):
        writer = HeldWriter()
        self.store.writer = writer
        before = self.store.to_dict()
        self.store.add_tags("cluster", None, ["lost"])
        self.store.add_instance(Instance(forthcoming=True))
        d = self.store.flushed()
        crash = self.crash_in("rename")
        writer.release()
        crash.restore()
        self.failureResultOf(d, errors.ConfigurationError)
        self.assertCompleteAndOld(before)
        # the backup is a complete configuration too
        ConfigStore.load(self.store.path + ".bak")


class AuditTests(unittest.TestCase):
    """The master's safety net: a change no mutator recorded is found,
    logged and written."""

    def test_an_unrecorded_change_is_found_and_written(self):
        from twisted.internet.task import Clock
        from ganeti.server import masterd
        store = small_cluster(self)
        inst = store.get_instance("inst1")
        # behind the store's back (a bug the audit is there for)
        inst.beparams["maxmem"] = 4096
        written = json.loads(disk_bytes(store))
        self.assertEqual(
            written["instances"][inst.uuid]["beparams"]["maxmem"], 128)

        class Config(object):
            cfg = store
        clock = Clock()
        audit = masterd.ConfigAuditService(Config(), clock, interval=60)
        audit.startService()
        self.addCleanup(audit.stopService)
        written = json.loads(disk_bytes(store))
        self.assertEqual(
            written["instances"][inst.uuid]["beparams"]["maxmem"], 4096)
        self.assertEqual(store.audit(), [])
        # found at the next run too, without a restart
        inst.beparams["maxmem"] = 2048
        clock.advance(60)
        written = json.loads(disk_bytes(store))
        self.assertEqual(
            written["instances"][inst.uuid]["beparams"]["maxmem"], 2048)

    def test_nothing_to_find_writes_nothing(self):
        store = small_cluster(self)
        before = disk_bytes(store)
        self.assertEqual(store.audit(), [])
        self.assertEqual(disk_bytes(store), before)
