"""Ganeti's real hail as an external allocator: it reads the documents
this master writes for every request type, and the logical units act on
its answers.  Skipped (with the reason) where Ganeti's hail is not
installed."""

import json
import os

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti import locking
from ganeti import objects
from ganeti.cmdlib import allocation
from ganeti.iallocator import cluster_data
from ganeti.iallocator import requests as rq
from ganeti.iallocator.allocators import AllocatorRegistry, ExternalAllocator

from tests.test_cmdlib_instance import NODE1, NODE2, create_op
from tests.test_iallocator_lus import AllocatorLUTestCase, NODE4, NODE5
from tests.test_migration import NODE3

HAIL_DIR = "/usr/lib/ganeti/3.0/usr/lib/ganeti/iallocators"
HAIL = os.path.join(HAIL_DIR, "hail")


def skip_without_hail():
    if not os.access(HAIL, os.X_OK):
        raise unittest.SkipTest("Ganeti's hail is not installed at %s"
                                " (apt-get install ganeti-htools-3.0)"
                                % HAIL)


class HailTestCase(AllocatorLUTestCase):
    """The LU test cluster (three nodes in "default", two in "other"),
    with hail found on the master's extra search path."""

    timeout = 120

    def setUp(self):
        skip_without_hail()
        AllocatorLUTestCase.setUp(self)
        self.ctx.allocators = AllocatorRegistry(
            reactor, root=os.path.abspath(self.mktemp()),
            extra_path=[HAIL_DIR], builtins={})

    def drbd(self, name, pnode, snode, size=1024):
        p, s = self.node(pnode), self.node(snode)
        inst = objects.Instance(
            name=name, primary_node=p, secondary_nodes=[s],
            os="busybox+default", hypervisor="fake", admin_state="up",
            beparams={"maxmem": 128, "minmem": 128})
        disk = objects.Disk(
            dev_type="drbd", size=size, iv_name="disk/0", mode="rw",
            logical_id=[p, s, 11000 + len(self.cfg.instances), 0, 0, "x"],
            children=[objects.Disk(dev_type="plain", size=size,
                                   logical_id=["xenvg", name + ".data"]),
                      objects.Disk(dev_type="plain", size=128,
                                   logical_id=["xenvg", name + ".meta"])])
        self.cfg.add_instance(inst, [disk])
        self.glm.add(locking.LEVEL_INSTANCE, [inst.uuid])

    def live(self):
        result = {}
        for node in self.cfg.nodes.values():
            result[node.uuid] = cluster_data.NodeLive(
                hv={"memory_total": 8192, "memory_free": 7000,
                    "memory_dom0": 1024, "cpu_total": 8},
                storage=[{"type": "file", "name": "x",
                          "storage_size": 200000, "storage_free": 150000},
                         {"type": "lvm-vg", "name": "xenvg",
                          "storage_size": 200000, "storage_free": 150000}],
                instances={})
        return result

    @defer.inlineCallbacks
    def ask(self, request, only_nodes=None):
        """hail's checked answer to ``request`` about this cluster
        (the nodes outside ``only_nodes`` shown offline, as opportunistic
        locking does with the nodes it could not lock)."""
        data = cluster_data.build_input(
            self.cfg, request, self.live(),
            only_nodes=None if only_nodes is None else
            [self.node(n) for n in only_nodes])
        hail = ExternalAllocator("hail", HAIL, reactor, timeout=60)
        text = yield hail.run(data, json.dumps(data), {})
        answer = allocation.parse_answer("hail", text)
        self.assertTrue(answer["success"], answer["info"])
        return request.check_result(answer["result"], data)


class HailAnswersTests(HailTestCase):
    """Every request type, as hail answers it."""

    def setUp(self):
        HailTestCase.setUp(self)
        self.cfg.set_cluster_params(enabled_disk_templates=[
            "file", "sharedfile", "plain", "diskless", "drbd"])
        self.create_shared("s1.example.com")
        self.create("f1.example.com")
        self.drbd("d1.example.com", NODE2, NODE3)

    def alloc(self, name, template="plain", **kw):
        return rq.AllocateRequest(
            name=name, disk_template=template, memory=256, vcpus=1,
            disks=[{"size": 1024, "mode": "rw"}], hypervisor="fake",
            os="busybox", **kw)

    @defer.inlineCallbacks
    def test_allocate(self):
        nodes = yield self.ask(self.alloc("new.example.com"))
        self.assertEqual(len(nodes), 1)
        nodes = yield self.ask(self.alloc("new.example.com", "drbd"))
        self.assertEqual(len(nodes), 2)
        nodes = yield self.ask(self.alloc("new.example.com",
                                          group_name="other"))
        self.assertIn(nodes[0], (NODE4, NODE5))
        nodes = yield self.ask(self.alloc("new.example.com",
                                          restrict_to_nodes=[NODE3]))
        self.assertEqual(nodes, [NODE3])

    @defer.inlineCallbacks
    def test_opportunistic_locking_limits(self):
        """The nodes not locked (shown drained) are never chosen, and
        hail's capacity checks still pass."""
        for locked in ([NODE1, NODE2], [NODE3], [NODE4, NODE5]):
            nodes = yield self.ask(self.alloc("new.example.com"),
                                   only_nodes=locked)
            self.assertIn(nodes[0], locked)
            allocated, failed = yield self.ask(rq.MultiAllocateRequest(
                [self.alloc("m1.example.com"),
                 self.alloc("m2.example.com")]), only_nodes=locked)
            self.assertEqual(failed, [])
            self.assertEqual(len(allocated), 2)
            for _, nodes in allocated:
                self.assertIn(nodes[0], locked)
        nodes = yield self.ask(self.alloc("new.example.com", "drbd"),
                               only_nodes=[NODE1, NODE3, NODE4])
        self.assertEqual(sorted(nodes), [NODE1, NODE3])

    @defer.inlineCallbacks
    def test_offline_marks_upset_the_capacity_checks(self):
        """Why the nodes not locked are not shown offline (Ganeti's way):
        d1's secondary on a node shown offline fails hail's N+1 check
        for every placement."""
        data = cluster_data.build_input(
            self.cfg, self.alloc("new.example.com"), self.live())
        for name in (NODE3, NODE4, NODE5):
            data["nodes"][name] = dict(
                (k, v) for k, v in data["nodes"][name].items()
                if k not in ("total_memory", "free_memory", "total_disk",
                             "free_disk", "total_cpus", "reserved_memory",
                             "i_pri_memory", "i_pri_up_memory",
                             "total_spindles", "free_spindles"))
            data["nodes"][name]["offline"] = True
        hail = ExternalAllocator("hail", HAIL, reactor, timeout=60)
        answer = allocation.parse_answer(
            "hail", (yield hail.run(data, json.dumps(data), {})))
        self.assertFalse(answer["success"])
        self.assertIn("FailN1", answer["info"])
        nodes = yield self.ask(self.alloc("new.example.com"),
                               only_nodes=[NODE1, NODE2])
        self.assertIn(nodes[0], (NODE1, NODE2))

    @defer.inlineCallbacks
    def test_multi_allocate(self):
        allocated, failed = yield self.ask(rq.MultiAllocateRequest(
            [self.alloc("m1.example.com"), self.alloc("m2.example.com")]))
        self.assertEqual(sorted(n for n, _ in allocated),
                         ["m1.example.com", "m2.example.com"])
        self.assertEqual(failed, [])

    @defer.inlineCallbacks
    def test_relocate(self):
        inst = self.cfg.get_instance("s1.example.com")
        nodes = yield self.ask(allocation.relocate_request(
            self.cfg, inst, [inst.primary_node]))
        self.assertIn(nodes[0], (NODE2, NODE3))
        drbd = self.cfg.get_instance("d1.example.com")
        nodes = yield self.ask(allocation.relocate_request(
            self.cfg, drbd, list(drbd.secondary_nodes)))
        self.assertEqual(nodes, [NODE1])

    @defer.inlineCallbacks
    def test_node_evacuate(self):
        plan = yield self.ask(rq.NodeEvacuateRequest(
            ["s1.example.com", "f1.example.com"], "all", leaving=[NODE1]))
        self.assertEqual([m[0] for m in plan.moved], ["s1.example.com"])
        self.assertEqual(plan.jobs[0][0].OP_ID, "OP_INSTANCE_MIGRATE")
        self.assertIn(plan.jobs[0][0].target_node, (NODE2, NODE3))
        # hail cannot relocate a file instance: it says so, per instance
        self.assertEqual([f[0] for f in plan.failed], ["f1.example.com"])
        plan = yield self.ask(rq.NodeEvacuateRequest(
            ["d1.example.com"], "secondary-only", leaving=[NODE3]))
        (op,) = plan.jobs[0]
        self.assertEqual((op.OP_ID, op.mode, op.remote_node),
                         ("OP_INSTANCE_REPLACE_DISKS",
                          "replace_new_secondary", NODE1))

    @defer.inlineCallbacks
    def test_change_group(self):
        other = self.cfg.get_nodegroup("other").uuid
        plan = yield self.ask(rq.ChangeGroupRequest(
            ["s1.example.com", "d1.example.com"], [other]))
        self.assertEqual(sorted(m[0] for m in plan.moved),
                         ["d1.example.com", "s1.example.com"])
        for name, group, nodes in plan.moved:
            self.assertEqual(group, "other")
            self.assertTrue(set(nodes) <= {NODE4, NODE5})
        kinds = [[op.OP_ID for op in ops] for ops in plan.jobs]
        self.assertIn(["OP_INSTANCE_REPLACE_DISKS", "OP_INSTANCE_MIGRATE",
                       "OP_INSTANCE_REPLACE_DISKS"], kinds)

    @defer.inlineCallbacks
    def test_allocate_secondary(self):
        node = yield self.ask(rq.AllocateSecondaryRequest(
            "f1.example.com", NODE1))
        self.assertIn(node, (NODE2, NODE3))


class HailLogicalUnitTests(HailTestCase):
    """Our logical units acting on hail's answers."""

    @defer.inlineCallbacks
    def test_create_without_a_node(self):
        result = yield self.run_op(create_op(pnode=None, iallocator="hail"))
        self.assertEqual(len(result), 1)
        inst = self.inst()
        self.assertEqual(self.cfg.nodes[inst.primary_node].name, result[0])
        self.assertIn(result[0], (NODE1, NODE2, NODE3, NODE4, NODE5))
        self.assertTrue(any(l.startswith("iallocator 'hail': Request"
                                         " successful") for l in self.log),
                        self.log)

    @defer.inlineCallbacks
    def test_drained_node_evacuated_by_hails_plan(self):
        self.create_shared("a.example.com")
        self.create("f.example.com")
        self.cfg.set_node_params(NODE1, drained=True)
        self.cfg.set_cluster_params(default_iallocator="hail")
        result = yield self.run_op({"OP_ID": "OP_NODE_EVACUATE",
                                    "node_name": NODE1, "mode": "all"})
        self.assertEqual(len(result["jobs"]), 2)
        kinds = sorted((ops[0]["OP_ID"], ops[0]["instance_name"])
                       for ops in self.queue.jobs)
        self.assertEqual(kinds, [("OP_INSTANCE_MIGRATE", "a.example.com"),
                                 ("OP_INSTANCE_MOVE", "f.example.com")])
        for ops in self.queue.jobs:
            self.assertIn(ops[0]["target_node"], (NODE2, NODE3))

    @defer.inlineCallbacks
    def test_migrate_without_a_target(self):
        self.create_shared()
        yield self.run_op({"OP_ID": "OP_INSTANCE_MIGRATE",
                           "instance_name": "inst1.example.com",
                           "iallocator": "hail"})
        # hail keeps the instance in its group
        self.assertIn(self.cfg.nodes[self.inst().primary_node].name,
                      (NODE2, NODE3))

    @defer.inlineCallbacks
    def test_test_allocator_out(self):
        text = yield self.run_op({
            "OP_ID": "OP_TEST_ALLOCATOR", "direction": "out",
            "mode": "allocate", "name": "new.example.com", "memory": 128,
            "vcpus": 1, "disk_template": "file", "iallocator": "hail",
            "disks": [{"size": 1024, "mode": "rw"}]})
        answer = json.loads(text)
        self.assertTrue(answer["success"], answer)
