"""Moving forthcoming instances (reservations): replace-disks with a new
secondary, move, recreate-disks with new nodes, node and group
evacuation.  Each is a configuration change: the tests look at the
configuration after the job, at the node calls (only the live data the
capacity checks ask for), and at the refusals (target full, wrong
target), which change nothing."""

from types import SimpleNamespace

from ganeti import errors
from ganeti import locking
from ganeti import objects
from ganeti.htools import moves as hbal_moves
from ganeti.iallocator.allocators import AllocatorRegistry

from tests import allocator_fakes
from tests.test_cmdlib_instance import NODE1, NODE2
from tests.test_iallocator_lus import AllocatorLUTestCase, NODE4, NODE5
from tests.test_migration import MigrationRpc, NODE3

#: what the capacity checks ask the nodes; nothing else may be called
LIVE_DATA = {"node_info", "all_instances_info"}


class PerNodeRpc(MigrationRpc):
    """MigrationRpc whose nodes report their own free memory and disk."""

    def __init__(self):
        MigrationRpc.__init__(self)
        self.disk_free_at = {}
        self.memory_free_at = {}

    def _node_info(self, node, storage_units, hv_specs):
        result = MigrationRpc._node_info(self, node, storage_units, hv_specs)
        for unit in result["storage"]:
            unit["storage_free"] = self.disk_free_at.get(node,
                                                         self.disk_free)
        return result

    def free_memory(self, node):
        base = self.memory_free_at.get(node, self.memory_free)
        return base - sum(
            self.memory.get(key, 128) for key, state in self.domains.items()
            if key[0] == node and state in ("running", "paused"))


class ReservationTestCase(AllocatorLUTestCase):
    """Nodes 1-3 in group "default", 4-5 in "other"."""

    def setUp(self):
        AllocatorLUTestCase.setUp(self)
        self.rpc = PerNodeRpc()
        for node in (NODE3, NODE4, NODE5):
            self.rpc.os_list[node] = list(self.rpc.os_list[NODE1])
        self.ctx.rpc = self.rpc

    def reservation(self, name, nodes, template="drbd", size=1024,
                    memory=512, logical_id=None):
        """A forthcoming instance on ``nodes`` (primary first), straight
        in the configuration."""
        uuids = [self.node(n) for n in nodes]
        inst = objects.Instance(
            name=name, primary_node=uuids[0] if uuids else None,
            secondary_nodes=uuids[1:], hypervisor="fake",
            admin_state="down", forthcoming=True,
            beparams={"maxmem": memory, "minmem": memory})
        disk = objects.Disk(dev_type=template, size=size, iv_name="disk/0",
                            logical_id=logical_id)
        self.cfg.add_instance(inst, [disk])
        self.glm.add(locking.LEVEL_INSTANCE, [inst.uuid])
        return inst.uuid

    def real_drbd(self, name, pnode, snode, minors=(0, 0)):
        p, s = self.node(pnode), self.node(snode)
        inst = objects.Instance(
            name=name, primary_node=p, secondary_nodes=[s],
            os="busybox+default", hypervisor="fake", admin_state="down",
            beparams={"maxmem": 128, "minmem": 128})
        disk = objects.Disk(
            dev_type="drbd", size=64, iv_name="disk/0", mode="rw",
            logical_id=[p, s, 11100, minors[0], minors[1], "x"],
            children=[objects.Disk(dev_type="plain", size=64,
                                   logical_id=["xenvg", name + ".data"]),
                      objects.Disk(dev_type="plain", size=128,
                                   logical_id=["xenvg", name + ".meta"])])
        self.cfg.add_instance(inst, [disk])
        self.glm.add(locking.LEVEL_INSTANCE, [inst.uuid])

    def placed(self, name):
        """(primary, secondaries, nodes of each disk) by node name."""
        inst = self.cfg.get_instance(name)

        def names(uuids):
            return [self.cfg.get_node(u).name for u in uuids]
        return (self.cfg.get_node(inst.primary_node).name,
                names(inst.secondary_nodes),
                [names(d.nodes) for d in self.cfg.instance_disks(inst)])

    def assert_config_only(self):
        called = set(self.rpc.procedures())
        self.assertTrue(called <= LIVE_DATA, sorted(called - LIVE_DATA))
        self.assertEqual(self.cfg.verify(), [])

    def refused(self, op, *texts, kind=errors.OpPrereqError):
        """Run ``op``, expect a refusal saying ``texts``; nothing may
        change."""
        before = self.cfg.to_dict()
        err = self.fails(op, kind)
        for text in texts:
            self.assertIn(text, str(err))
        self.assertEqual(self.cfg.to_dict(), before)
        return err


def replace(mode, name="f1", **kw):
    op = {"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": name,
          "mode": mode}
    op.update(kw)
    return op


class ReplaceDisksTests(ReservationTestCase):

    def setUp(self):
        ReservationTestCase.setUp(self)
        self.reservation("f1", [NODE1, NODE2])
        self.rpc.calls = []

    def test_new_secondary_changes_the_configuration_only(self):
        self.ok(replace("replace_new_secondary", remote_node=NODE3))
        self.assertEqual(self.placed("f1"),
                         (NODE1, [NODE3], [[NODE1, NODE3]]))
        self.assertIn("Instance f1 is forthcoming: only the configuration"
                      " changes, its reservation moves from %s, %s to %s,"
                      " %s" % (NODE1, NODE2, NODE1, NODE3), self.log)
        self.assert_config_only()
        # the new secondary now holds the disk: node3 reports it reserved
        self.assertEqual(self.cfg.node_usage(self.node(NODE3)).disk,
                         1024 + 128)
        self.assertEqual(self.cfg.node_usage(self.node(NODE2)).disk, 0)

    def test_ganeti_logical_id_gets_the_new_node_and_a_free_minor(self):
        self.cfg.remove_instance("f1")
        n1, n2, n3 = self.node(NODE1), self.node(NODE2), self.node(NODE3)
        self.real_drbd("real.example.com", NODE3, NODE1, minors=(0, 0))
        self.reservation("f1", [NODE1, NODE2],
                         logical_id=[n1, n2, 11005, 1, 0, "secret"])
        self.ok(replace("replace_new_secondary", remote_node=NODE3))
        disk = self.cfg.instance_disks(self.inst("f1"))[0]
        # the primary's side and minor stay, node3's minor 0 is taken
        self.assertEqual(disk.logical_id, [n1, n3, 11005, 1, 1, "secret"])
        self.assert_config_only()

    def test_new_secondary_from_the_allocator(self):
        self.fake.reply([NODE3])
        self.ok(replace("replace_new_secondary", iallocator="fake"))
        self.assertEqual(self.placed("f1"),
                         (NODE1, [NODE3], [[NODE1, NODE3]]))
        (request,) = self.fake.requests
        self.assertEqual((request["type"], request["name"],
                          request["relocate_from"]),
                         ("relocate", "f1", [NODE2]))
        self.assert_config_only()

    def test_both_nodes_change_as_hbal_submits_it(self):
        # hbal's "change all" move of a reservation: r:node3 f r:node2
        nodes = [SimpleNamespace(name=n) for n in (NODE1, NODE2, NODE3)]
        inst = SimpleNamespace(name="f1")
        ops = hbal_moves.move_opcodes(inst, (hbal_moves.CHANGE_ALL, 2, 1),
                                      nodes)
        self.assertEqual([op["OP_ID"] for op in ops],
                         ["OP_INSTANCE_REPLACE_DISKS", "OP_INSTANCE_MIGRATE",
                          "OP_INSTANCE_REPLACE_DISKS"])
        for op in ops:
            self.ok(op)
        self.assertEqual(self.placed("f1"),
                         (NODE3, [NODE2], [[NODE3, NODE2]]))
        self.assert_config_only()

    def test_target_full_changes_nothing(self):
        self.rpc.disk_free_at[NODE3] = 1000
        err = self.refused(
            replace("replace_new_secondary", remote_node=NODE3),
            "Not enough disk on node %s for instance f1: needed 1152 MiB,"
            " available 1000 MiB" % NODE3)
        self.assertEqual(err.args[1], errors.ECODE_NORES)
        # what is reserved there counts: another reservation on node3
        self.rpc.disk_free_at[NODE3] = 2000
        self.reservation("f2", [NODE3, NODE2], size=1000)
        self.refused(replace("replace_new_secondary", remote_node=NODE3),
                     "needed 1152 MiB, available 872 MiB (1128 MiB"
                     " reserved for forthcoming instances)")
        self.rpc.disk_free_at[NODE3] = 3000
        self.ok(replace("replace_new_secondary", remote_node=NODE3))

    def test_wrong_targets_are_refused(self):
        self.refused(replace("replace_new_secondary", remote_node=NODE1),
                     "remote_node: node %s is already the primary node of"
                     " instance f1" % NODE1)
        self.refused(replace("replace_new_secondary", remote_node=NODE2),
                     "remote_node: node %s is already the secondary node of"
                     " instance f1" % NODE2)
        self.refused(replace("replace_new_secondary", remote_node=NODE4),
                     "remote_node: node %s is in node group other, instance"
                     " f1 is in group default" % NODE4)
        self.set_offline(NODE3)
        self.refused(replace("replace_new_secondary", remote_node=NODE3),
                     "remote_node: node %s is offline, the reservation of"
                     " instance f1 cannot move there" % NODE3)
        self.set_offline(NODE3, False)
        self.cfg.set_node_params(NODE3, drained=True)
        self.refused(replace("replace_new_secondary", remote_node=NODE3),
                     "node %s is drained" % NODE3)

    def test_an_allocator_answering_a_wrong_node_changes_nothing(self):
        self.set_offline(NODE3)
        self.fake.reply([NODE3])
        # the allocator's input already says node3 is offline; a bad
        # answer is still refused
        err = self.fails(replace("replace_new_secondary", iallocator="fake"),
                         errors.GenericError)
        self.assertIn(NODE3, str(err))
        self.assertEqual(self.placed("f1"),
                         (NODE1, [NODE2], [[NODE1, NODE2]]))

    def test_replacing_on_a_node_is_refused(self):
        for mode, role in (("replace_on_primary", "primary"),
                           ("replace_on_secondary", "secondary")):
            self.refused(replace(mode),
                         "Instance 'f1' is forthcoming, it exists only in the"
                         " configuration: it has no data and no disks on its"
                         " nodes, so there is nothing to replace on its %s"
                         " node" % role)
        self.assertEqual(self.rpc.calls, [])

    def test_auto_has_nothing_to_repair(self):
        before = self.cfg.to_dict()
        self.ok(replace("replace_auto"))
        self.assertIn("Instance 'f1' is forthcoming, it has no data: no"
                      " disks need replacement", self.log)
        self.assertEqual(self.rpc.calls, [])
        self.assertEqual(self.cfg.to_dict(), before)

    def test_a_reservation_without_nodes(self):
        self.reservation("nowhere", [])
        self.refused(replace("replace_new_secondary", name="nowhere",
                             remote_node=NODE3),
                     "Instance 'nowhere' is forthcoming and not placed on"
                     " any node yet")


class MoveTests(ReservationTestCase):

    def move(self, target, name="f1", **kw):
        op = {"OP_ID": "OP_INSTANCE_MOVE", "instance_name": name,
              "target_node": target}
        op.update(kw)
        return op

    def test_move_changes_the_configuration_only(self):
        self.reservation("f1", [NODE1], template="file")
        self.ok(self.move(NODE2))
        self.assertEqual(self.placed("f1"), (NODE2, [], [[NODE2]]))
        self.assert_config_only()
        # its memory is reserved on the new node now
        self.assertEqual(self.cfg.node_usage(self.node(NODE2)).memory, 512)

    def test_refusals(self):
        self.reservation("f1", [NODE1], template="file", memory=2048)
        self.rpc.memory_free_at[NODE2] = 2000
        err = self.refused(self.move(NODE2),
                           "Not enough memory on node %s for instance f1:"
                           " needed 2048 MiB, available 2000 MiB" % NODE2)
        self.assertEqual(err.args[1], errors.ECODE_NORES)
        self.refused(self.move(NODE1), "target_node: node %s is already the"
                     " primary node of instance f1" % NODE1)
        self.set_offline(NODE3)
        self.refused(self.move(NODE3), "target_node: node %s is offline"
                     % NODE3)

    def test_other_group_meets_its_policy(self):
        self.reservation("f1", [NODE1], template="file")
        other = self.cfg.get_nodegroup("other")
        policy = dict(other.ipolicy or {})
        policy["minmax"] = [{"min": {"memory-size": 1024},
                             "max": {"memory-size": 4096}}]
        self.cfg.set_nodegroup_params("other", ipolicy=policy)
        self.refused(self.move(NODE4), "violates policy")
        self.ok(self.move(NODE4, ignore_ipolicy=True))
        self.assertEqual(self.placed("f1"), (NODE4, [], [[NODE4]]))


def recreate(name="f1", **kw):
    op = {"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": name}
    op.update(kw)
    return op


class RecreateDisksTests(ReservationTestCase):

    def setUp(self):
        ReservationTestCase.setUp(self)
        self.reservation("f1", [NODE1, NODE2])
        self.rpc.calls = []

    def test_new_nodes_re_place_the_reservation(self):
        self.ok(recreate(nodes=[NODE3, NODE1]))
        self.assertEqual(self.placed("f1"),
                         (NODE3, [NODE1], [[NODE3, NODE1]]))
        self.assert_config_only()
        # into another group, in one step
        self.ok(recreate(nodes=[NODE4, NODE5]))
        self.assertEqual(self.placed("f1"),
                         (NODE4, [NODE5], [[NODE4, NODE5]]))
        self.assert_config_only()

    def test_nodes_from_the_allocator(self):
        self.fake.reply([NODE2, NODE3])
        self.assertEqual(self.ok(recreate(iallocator="fake",
                                          dry_run=True)), [NODE2, NODE3])
        self.assertEqual(self.placed("f1")[0], NODE1)
        self.ok(recreate(iallocator="fake"))
        self.assertEqual(self.placed("f1"),
                         (NODE2, [NODE3], [[NODE2, NODE3]]))
        request = self.fake.requests[-1]
        self.assertEqual((request["type"], request["name"],
                          request["disk_template"], request["memory"]),
                         ("allocate", "f1", "drbd", 512))
        self.assert_config_only()

    def test_target_full_changes_nothing(self):
        self.rpc.memory_free_at[NODE3] = 100
        err = self.refused(recreate(nodes=[NODE3, NODE2]),
                           "Not enough memory on node %s for instance f1:"
                           " needed 512 MiB, available 100 MiB" % NODE3)
        self.assertEqual(err.args[1], errors.ECODE_NORES)

    def test_refusals(self):
        self.refused(recreate(), "Instance 'f1' is forthcoming, its disks"
                     " exist only in the configuration: there is nothing to"
                     " recreate")
        self.refused(recreate(nodes=[NODE3]), "nodes: instance f1 needs 2"
                     " nodes, 1 given")
        self.refused(recreate(nodes=[NODE3, NODE3]), "given twice")
        self.refused(recreate(nodes=[NODE3, NODE4]),
                     "nodes: the nodes %s, %s are in different node groups"
                     " (default, other)" % (NODE3, NODE4))
        self.refused(recreate(disks=[[0, {"size": 2048}]],
                              nodes=[NODE3, NODE1]),
                     "disks/0: instance f1 is forthcoming")
        self.set_offline(NODE3)
        self.refused(recreate(nodes=[NODE3, NODE1]),
                     "nodes/0: node %s is offline" % NODE3)

    def test_same_nodes_change_nothing(self):
        before = self.cfg.to_dict()
        self.ok(recreate(nodes=[NODE1, NODE2]))
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertEqual(self.rpc.calls, [])

    def test_places_a_reservation_without_nodes(self):
        self.reservation("nowhere", [], template="file")
        self.ok(recreate(name="nowhere", nodes=[NODE2]))
        self.assertEqual(self.placed("nowhere"), (NODE2, [], [[NODE2]]))
        self.assert_config_only()


class EvacuationTests(ReservationTestCase):
    """Evacuations planned by the built-in hail; their jobs then run one
    after the other, as the job queue would run them."""

    def setUp(self):
        ReservationTestCase.setUp(self)
        self.ctx.allocators = AllocatorRegistry(
            self.clock, root=self.mktemp(),
            builtins={"hail": "ganeti.htools.iallocator:answer",
                      "fake": "tests.allocator_fakes:fake"},
            run_in_thread=allocator_fakes.sync_runner)

    def run_jobs(self):
        jobs, self.queue.jobs = self.queue.jobs, []
        for ops in jobs:
            for op in ops:
                op = dict(op)
                op.pop("depends", None)
                self.ok(op)
        return jobs

    def evacuate_node(self, mode, **kw):
        op = {"OP_ID": "OP_NODE_EVACUATE", "node_name": NODE1, "mode": mode,
              "iallocator": "hail"}
        op.update(kw)
        self.ok(op)
        return self.run_jobs()

    def test_node_evacuation_moves_reservations(self):
        self.reservation("f1", [NODE2, NODE1])
        self.reservation("f2", [NODE1], template="file")
        self.reservation("f3", [NODE1, NODE2])
        self.rpc.calls = []
        jobs = self.evacuate_node("secondary-only")
        self.assertEqual([[op["OP_ID"] for op in ops] for ops in jobs],
                         [["OP_INSTANCE_REPLACE_DISKS"]])
        self.assertEqual(self.placed("f1"),
                         (NODE2, [NODE3], [[NODE2, NODE3]]))
        jobs = self.evacuate_node("primary-only")
        # the plan's failover of f3, then the move of the file instance
        self.assertEqual([(ops[0]["OP_ID"], ops[0]["instance_name"])
                          for ops in jobs],
                         [("OP_INSTANCE_MIGRATE", "f3"),
                          ("OP_INSTANCE_MOVE", "f2")])
        self.assertEqual(self.placed("f3"),
                         (NODE2, [NODE1], [[NODE2, NODE1]]))
        self.assertEqual(self.placed("f2"), (NODE3, [], [[NODE3]]))
        self.assertIn("Instance is forthcoming, just updating the"
                      " configuration", self.log)
        self.assert_config_only()

    def test_reservations_leave_an_offline_node(self):
        self.reservation("f2", [NODE1], template="file")
        self.set_offline(NODE1)
        self.rpc.calls = []
        self.evacuate_node("primary-only")
        self.assertEqual(self.placed("f2"), (NODE3, [], [[NODE3]]))
        self.assert_config_only()

    def test_given_target_full(self):
        self.reservation("f1", [NODE2, NODE1])
        self.rpc.disk_free_at[NODE3] = 1000
        self.ok({"OP_ID": "OP_NODE_EVACUATE", "node_name": NODE1,
                 "mode": "secondary-only", "remote_node": NODE3})
        (ops,) = self.queue.jobs
        before = self.cfg.to_dict()
        err = self.fails(ops[0])
        self.assertIn("Not enough disk on node %s for instance f1: needed"
                      " 1152 MiB, available 1000 MiB" % NODE3, str(err))
        self.assertEqual(self.cfg.to_dict(), before)

    def test_group_evacuation_moves_reservations(self):
        self.reservation("f1", [NODE1, NODE2])
        self.create_shared("real.example.com", start=False)
        self.rpc.calls = []
        self.ok({"OP_ID": "OP_GROUP_EVACUATE", "group_name": "default",
                 "iallocator": "hail"})
        jobs = self.queue.jobs
        # the reservation moves in one step; the real instance as planned
        byname = dict((ops[0]["instance_name"], ops) for ops in jobs)
        (op,) = byname["f1"]
        self.assertEqual(op["OP_ID"], "OP_INSTANCE_RECREATE_DISKS")
        self.assertEqual(sorted(op["nodes"]), [NODE4, NODE5])
        self.assertEqual(byname["real.example.com"][0]["OP_ID"],
                         "OP_INSTANCE_MIGRATE")
        self.queue.jobs = [byname["f1"]]
        self.run_jobs()
        primary, secondaries, disk_nodes = self.placed("f1")
        self.assertEqual((primary, secondaries), tuple(op["nodes"][:1]) +
                         (op["nodes"][1:],))
        self.assertEqual(disk_nodes, [op["nodes"]])
        self.assert_config_only()

    def test_group_evacuation_target_full(self):
        self.reservation("f1", [NODE1, NODE2])
        # the allocator's plan, but node5 is full when the job runs
        self.fake.reply([[["f1", "other", [NODE4, NODE5]]], [],
                         [[{"OP_ID": "OP_INSTANCE_REPLACE_DISKS",
                            "instance_name": "f1", "disks": [],
                            "mode": "replace_new_secondary",
                            "remote_node": NODE4}]]])
        self.ok({"OP_ID": "OP_GROUP_EVACUATE", "group_name": "default",
                 "iallocator": "fake"})
        (ops,) = self.queue.jobs
        self.rpc.disk_free_at[NODE5] = 1000
        before = self.cfg.to_dict()
        err = self.fails(ops[0])
        self.assertEqual(err.args[1], errors.ECODE_NORES)
        self.assertIn("Not enough disk on node %s for instance f1" % NODE5,
                      str(err))
        self.assertEqual(self.cfg.to_dict(), before)

    def test_change_group_of_a_reservation(self):
        self.reservation("f1", [NODE1, NODE2])
        self.rpc.calls = []
        self.ok({"OP_ID": "OP_INSTANCE_CHANGE_GROUP", "instance_name": "f1",
                 "iallocator": "hail"})
        self.run_jobs()
        self.assertEqual(sorted(self.placed("f1")[2][0]), [NODE4, NODE5])
        self.assert_config_only()
        self.reservation("nowhere", [], template="file")
        self.refused({"OP_ID": "OP_INSTANCE_CHANGE_GROUP",
                      "instance_name": "nowhere", "iallocator": "hail"},
                     "Instance 'nowhere' is forthcoming and not placed on"
                     " any node: it is in no group yet")
