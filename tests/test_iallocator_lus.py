"""Logical units that place instances with an allocator: create (new,
forthcoming, committed), OP_TEST_ALLOCATOR, OP_INSTANCE_MULTI_ALLOC,
OP_GROUP_EVACUATE, OP_INSTANCE_CHANGE_GROUP, and the cluster's default
allocators."""

import json

from ganeti import cmdlib
from ganeti import errors
from ganeti import locking
from ganeti import mcpu
from ganeti import objects

from tests import allocator_fakes
from tests.test_cmdlib_instance import NODE1, NODE2, create_op
from tests.test_migration import MigrationRpc, MigrationTestCase, NODE3
from tests.test_migration_evacuate import FakeQueue, migrate_op

NODE4 = "node4.example.com"
NODE5 = "node5.example.com"


class AllocatorLUTestCase(MigrationTestCase):
    """Three nodes in group "default", two in "other"; scripted allocators
    ``fake`` and ``spare``; a fake job queue."""

    def setUp(self):
        MigrationTestCase.setUp(self)
        cfg = self.cfg
        cfg.add_nodegroup(objects.NodeGroup(name="other"))
        other = cfg.get_nodegroup("other").uuid
        for name, ip in ((NODE4, "127.0.0.4"), (NODE5, "127.0.0.5")):
            cfg.add_node(objects.Node(name=name, primary_ip=ip, group=other))
        self.rpc = MigrationRpc()
        for node in (NODE3, NODE4, NODE5):
            self.rpc.os_list[node] = list(self.rpc.os_list[NODE1])
        self.glm = mcpu.make_lock_manager(cfg, self.clock)
        self.ctx = mcpu.MasterContext(cfg=cfg, glm=self.glm,
                                      clock=self.clock, rpc=self.rpc)
        self.proc = mcpu.Processor(self.ctx, cmdlib.LOGICAL_UNITS)
        self.queue = FakeQueue()
        self.ctx.queue = self.queue
        fakes = allocator_fakes.install(self, self.ctx)
        self.fake, self.spare = fakes["fake"], fakes["spare"]

    def node_locks_held(self):
        return [lock for lock in self.glm.query_locks()
                if lock["owners"] and lock["name"].startswith("node")]


class CreateTests(AllocatorLUTestCase):

    def test_instance_placed_by_the_allocator(self):
        self.fake.reply([NODE2])
        result = self.ok(create_op(pnode=None, iallocator="fake",
                                   beparams={"memory": 512, "vcpus": 2},
                                   disks=[{"size": 1024},
                                          {"size": 1536, "mode": "ro"}],
                                   tags=["web"]))
        self.assertEqual(result, [NODE2])
        inst = self.inst()
        self.assertEqual(inst.primary_node, self.node(NODE2))
        self.assertEqual(self.rpc.domains[(NODE2, inst.name)], "running")
        (request,) = self.fake.requests
        self.assertEqual(request, {
            "type": "allocate", "name": "inst1.example.com",
            "disk_template": "file", "group_name": None, "tags": ["web"],
            "os": "busybox+default", "vcpus": 2, "memory": 512,
            "spindle_use": 1,
            "disks": [{"size": 1024, "mode": "rw", "dev_type": "file"},
                      {"size": 1536, "mode": "ro", "dev_type": "file"}],
            "disk_space_total": 2560, "nics": [{"mac": "auto", "ip": None}],
            "required_nodes": 1, "hypervisor": "fake"})
        # the document describes the whole cluster, live data included
        data = self.fake.inputs[0]
        self.assertEqual(sorted(data["nodes"]),
                         [NODE1, NODE2, NODE3, NODE4, NODE5])
        self.assertEqual(data["nodes"][NODE3]["total_memory"], 8192)
        self.assertEqual(data["nodes"][NODE3]["free_disk"],
                         self.rpc.disk_free)
        self.assertIn("Selected nodes for instance inst1.example.com via"
                      " iallocator fake: %s" % NODE2, self.log)
        self.assertEqual(self.node_locks_held(), [])

    def test_other_node_locks_are_released_once_placed(self):
        """While the instance is created, only its node stays locked."""
        self.fake.reply([NODE3])
        self.rpc.hold("instance_os_add")
        d = self.run_op(create_op(pnode=None, iallocator="fake"))
        held = sorted(set(lock["name"] for lock in self.node_locks_held()))
        self.assertEqual(held, ["node-res/%s" % self.node(NODE3),
                                "node/%s" % self.node(NODE3)])
        self.rpc.release("instance_os_add", keep=False)
        self.successResultOf(d)

    def test_defaults_in_order_and_the_rules(self):
        op = create_op(pnode=None)
        err = self.fails(op)
        self.assertIn("No instance allocator given and no default allocator"
                      " for 'allocate' requests is configured: give the"
                      " primary node (pnode / -n), or an allocator (-I NAME"
                      " / iallocator)", str(err))
        self.cfg.set_cluster_params(default_iallocator="fake,spare")
        self.fake.reply([], success=False, info="FailMem: 3")
        self.spare.reply([NODE3])
        self.assertEqual(self.ok(op), [NODE3])
        self.assertIn("iallocator 'fake' gave no usable answer (FailMem: 3);"
                      " trying 'spare'", [l[len("WARNING: "):]
                                          for l in self.log
                                          if l.startswith("WARNING: ")])
        # a node given wins over the defaults: nobody is asked
        asked = len(self.fake.inputs) + len(self.spare.inputs)
        self.ok(create_op("inst2.example.com", pnode=NODE1))
        self.assertEqual(len(self.fake.inputs) + len(self.spare.inputs),
                         asked)
        # "-I ." means the cluster's default
        self.spare._answers = []
        self.spare.reply([NODE2])
        self.assertEqual(self.ok(create_op("inst3.example.com", pnode=None,
                                           iallocator=".")), [NODE2])

    def test_bad_answers_change_nothing(self):
        before = self.cfg.to_dict()
        for answer, kind, reason in (
                ({"result": ["ghost.example.com"]}, errors.OpExecError,
                 "node 'ghost.example.com' does not exist"),
                ({"result": [NODE1, NODE2]}, errors.OpExecError,
                 "2 node(s) returned, 1 required"),
                ({"result": NODE1}, errors.OpExecError,
                 "expected a list of node names"),
                ({"success": False, "result": [], "info": "FailDisk: 5"},
                 errors.OpPrereqError,
                 "Can't compute nodes using iallocator 'fake': FailDisk: 5")):
            self.fake._answers = []
            self.fake.reply(**answer)
            err = self.fails(create_op(pnode=None, iallocator="fake"), kind)
            self.assertIn(reason, str(err))
            self.assertEqual(self.cfg.to_dict(), before)
            self.assertEqual(self.rpc.calls_of("blockdev_create"), [])
            self.assertEqual(self.node_locks_held(), [])
        self.cfg.set_node_params(NODE2, drained=True)
        self.fake._answers = []
        self.fake.reply([NODE2])
        err = self.fails(create_op(pnode=None, iallocator="fake"),
                         errors.OpExecError)
        self.assertIn("node '%s' is drained" % NODE2, str(err))
        self.assertEqual(self.instance_locks(), [])

    def test_unknown_and_unavailable_allocators(self):
        err = self.fails(create_op(pnode=None, iallocator="nope"),
                         errors.OpExecError)
        self.assertIn("iallocator module 'nope' not found in the search"
                      " path", str(err))
        # a built-in whose engine is not there
        self.ctx.allocators.builtins["engine"] = "ganeti.no_engine:answer"
        err = self.fails(create_op(pnode=None, iallocator="engine"),
                         errors.OpExecError)
        self.assertIn("built-in iallocator 'engine' is not available",
                      str(err))
        err = self.fails(create_op(pnode=None, iallocator="fake",
                                   iallocator_params={"a=b": "1"}))
        self.assertIn("iallocator_params: 'a=b' is not a valid allocator"
                      " parameter name", str(err))

    def test_dry_run_returns_the_nodes(self):
        self.fake.reply([NODE3])
        before = self.cfg.to_dict()
        self.assertEqual(self.ok(create_op(pnode=None, iallocator="fake",
                                           dry_run=True)), [NODE3])
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertEqual(self.rpc.calls_of("blockdev_create"), [])

    def test_forthcoming_placed_and_committed(self):
        self.fake.reply([NODE2])
        uuid = self.ok(create_op(pnode=None, iallocator="fake",
                                 forthcoming=True))
        inst = self.cfg.get_instance(uuid)
        self.assertTrue(inst.forthcoming)
        self.assertEqual(inst.primary_node, self.node(NODE2))
        # without an allocator, a reservation may stay without nodes
        uuid2 = self.ok({"OP_ID": "OP_INSTANCE_CREATE", "mode": "create",
                         "instance_name": "later.example.com",
                         "forthcoming": True, "disks": [{"size": 1088}],
                         "nics": [], "disk_template": "file",
                         "beparams": {"memory": 128}})
        self.assertIsNone(self.cfg.get_instance(uuid2).primary_node)
        # ... and is placed when committed
        commit = create_op("later.example.com", pnode=None, commit=True,
                           disks=[], nics=[{}])
        err = self.fails(commit)
        self.assertIn("primary node (pnode / -n) of forthcoming instance"
                      " later.example.com", str(err))
        self.fake._answers = []
        self.fake.reply([NODE3])
        commit["iallocator"] = "fake"
        self.assertEqual(self.ok(commit), [NODE3])
        inst = self.cfg.get_instance("later.example.com")
        self.assertFalse(inst.forthcoming)
        self.assertEqual(inst.primary_node, self.node(NODE3))
        request = self.fake.requests[-1]
        self.assertEqual((request["name"], request["memory"],
                          request["disks"][0]["size"]),
                         ("later.example.com", 128, 1088))
        # the placed reservation is in the document as reserved
        reserved = self.fake.inputs[-1]["instances"]["inst1.example.com"]
        self.assertEqual((reserved["nodes"], reserved["admin_state"]),
                         ([NODE2], "down"))


class TestAllocatorTests(AllocatorLUTestCase):
    """OP_TEST_ALLOCATOR: the document in, the answer out, every type."""

    def alloc_op(self, **kw):
        op = {"OP_ID": "OP_TEST_ALLOCATOR", "direction": "in",
              "mode": "allocate", "name": "new.example.com",
              "memory": 256, "vcpus": 1, "disk_template": "file",
              "disks": [{"size": 1024, "mode": "rw"}], "os": "busybox",
              "nics": [{"mac": "aa:00:00:11:22:33"}]}
        op.update(kw)
        return op

    def test_every_type_in(self):
        self.create_shared("s.example.com")
        for mode, extra, check in (
                ("allocate", {}, {"name": "new.example.com",
                                  "required_nodes": 1}),
                ("multi-allocate", {"count": 2}, None),
                ("relocate", {"name": "s.example.com"},
                 {"relocate_from": [NODE1], "required_nodes": 1}),
                ("node-evacuate", {"instances": ["s.example.com"],
                                   "evac_mode": "primary-only"},
                 {"instances": ["s.example.com"],
                  "evac_mode": "primary-only"}),
                ("change-group", {"instances": ["s.example.com"],
                                  "target_groups": ["other"]},
                 {"target_groups": [self.cfg.get_nodegroup("other").uuid]}),
                ("allocate-secondary", {"name": "s.example.com"},
                 {"name": "s.example.com"})):
            text = self.ok(self.alloc_op(mode=mode, **extra))
            data = json.loads(text)
            self.assertEqual(data["request"]["type"], mode)
            self.assertEqual(data["version"], 2)
            self.assertIn("s.example.com", data["instances"])
            for key, value in (check or {}).items():
                self.assertEqual(data["request"][key], value, (mode, key))
            if mode == "multi-allocate":
                self.assertEqual([i["name"] for i in
                                  data["request"]["instances"]],
                                 ["new.example.com0", "new.example.com1"])
        self.assertEqual(self.fake.inputs, [])     # nobody was asked

    def test_out_is_the_unchecked_answer(self):
        self.fake.reply(["not-even-a-node"])
        text = self.ok(self.alloc_op(direction="out", iallocator="fake"))
        self.assertEqual(json.loads(text)["result"], ["not-even-a-node"])
        err = self.fails(self.alloc_op(direction="out"))
        self.assertIn("missing allocator name", str(err))
        self.cfg.set_cluster_params(default_iallocator="spare")
        self.spare.reply([NODE1])
        self.assertEqual(json.loads(self.ok(self.alloc_op(
            direction="out")))["result"], [NODE1])

    def test_refusals(self):
        self.create_shared("s.example.com")
        for extra, reason in (
                ({"name": "s.example.com"}, "already in the cluster"),
                ({"disks": [{"size": "big"}]}, "disks/0"),
                ({"memory": None}, "memory: required"),
                ({"mode": "relocate", "name": "ghost"}, "ghost"),
                ({"mode": "node-evacuate"}, "instances: missing"),
                ({"mode": "change-group", "instances": ["s.example.com"],
                  "target_groups": ["nogroup"]}, "nogroup")):
            err = self.fails(self.alloc_op(**extra))
            self.assertIn(reason, str(err))


class MultiAllocTests(AllocatorLUTestCase):

    def multi(self, *names, **kw):
        op = {"OP_ID": "OP_INSTANCE_MULTI_ALLOC",
              "instances": [dict(create_op(n, pnode=None), OP_ID=None)
                            for n in names]}
        for inst in op["instances"]:
            del inst["OP_ID"]
        op.update(kw)
        return op

    def test_one_request_then_the_jobs(self):
        self.fake.reply([[["a.example.com", [NODE2]],
                          ["b.example.com", [NODE3]]], ["c.example.com"]])
        result = self.ok(self.multi("a.example.com", "b.example.com",
                                    "c.example.com", iallocator="fake"))
        self.assertEqual(result, {"jobs": [[True, 1], [True, 2]],
                                  "allocatable": ["a.example.com",
                                                  "b.example.com"],
                                  "failed": ["c.example.com"]})
        (request,) = self.fake.requests
        self.assertEqual(request["type"], "multi-allocate")
        self.assertEqual([i["name"] for i in request["instances"]],
                         ["a.example.com", "b.example.com", "c.example.com"])
        jobs = self.queue.jobs
        self.assertEqual([(j[0]["OP_ID"], j[0]["instance_name"],
                           j[0]["pnode"]) for j in jobs],
                         [("OP_INSTANCE_CREATE", "a.example.com", NODE2),
                          ("OP_INSTANCE_CREATE", "b.example.com", NODE3)])
        self.assertEqual(self.cfg.instances, {})   # the jobs create them

    def test_dry_run_and_refusals(self):
        self.fake.reply([[["a.example.com", [NODE2]]], []])
        self.assertEqual(self.ok(self.multi("a.example.com",
                                            iallocator="fake",
                                            dry_run=True)),
                         {"jobs": [], "allocatable": ["a.example.com"],
                          "failed": []})
        self.assertEqual(self.queue.jobs, [])
        err = self.fails(self.multi("a.example.com"))
        self.assertIn("no default allocator for 'multi-allocate'", str(err))
        op = self.multi("a.example.com", "b.example.com", iallocator="fake")
        op["instances"][0]["pnode"] = NODE1
        err = self.fails(op)
        self.assertIn("either all or none", str(err))
        op = self.multi("a.example.com", "a.example.com", iallocator="fake")
        self.assertIn("duplicate instance names", str(self.fails(op)))
        op = self.multi("a.example.com", iallocator="fake")
        op["instances"][0]["iallocator"] = "fake"
        self.assertIn("cannot be set on the instances",
                      str(self.fails(op)))
        self.fake._answers = []
        self.fake.reply([[["a.example.com", [NODE2]]], []])   # b missing
        err = self.fails(self.multi("a.example.com", "b.example.com",
                                    iallocator="fake"), errors.OpExecError)
        self.assertIn("instances b.example.com are neither allocated nor"
                      " failed", str(err))

    def test_nodes_given(self):
        op = self.multi("a.example.com", "b.example.com")
        op["instances"][0]["pnode"] = NODE1
        op["instances"][1]["pnode"] = NODE2
        result = self.ok(op)
        self.assertEqual(result["allocatable"], ["a.example.com",
                                                 "b.example.com"])
        self.assertEqual(self.fake.inputs, [])


class GroupEvacuateTests(AllocatorLUTestCase):

    def evacuate(self, **kw):
        op = {"OP_ID": "OP_GROUP_EVACUATE", "group_name": "default"}
        op.update(kw)
        return op

    def plan(self, *names, target=NODE4):
        return [[[n, "other", [target]] for n in names], [],
                [[migrate_op(n, target)] for n in names]]

    def test_change_group_plan_is_submitted(self):
        self.create_shared("a.example.com")
        self.create_shared("b.example.com")
        self.fake.reply(self.plan("a.example.com", "b.example.com"))
        result = self.ok(self.evacuate(iallocator="fake", sequential=True))
        self.assertEqual(result, {"jobs": [[True, 1], [True, 2]]})
        (request,) = self.fake.requests
        self.assertEqual(request, {
            "type": "change-group",
            "instances": ["a.example.com", "b.example.com"],
            "target_groups": [self.cfg.get_nodegroup("other").uuid]})
        jobs = self.queue.jobs
        self.assertEqual([j[0]["target_node"] for j in jobs], [NODE4, NODE4])
        self.assertIsNone(jobs[0][0]["depends"])
        self.assertEqual(jobs[1][0]["depends"], [[-1, ["success", "error"]]])
        self.assertIn("Iallocator fake returned 2 job(s) for evacuating node"
                      " group default", self.log)

    def test_force_failover_dry_run_and_refusals(self):
        self.create_shared("a.example.com")
        self.fake.reply(self.plan("a.example.com"))
        result = self.ok(self.evacuate(iallocator="fake", dry_run=True))
        self.assertEqual(result["moved"], [["a.example.com", "other",
                                            [NODE4]]])
        self.assertEqual(self.queue.jobs, [])
        self.ok(self.evacuate(iallocator="fake", force_failover=True))
        self.assertEqual(self.queue.jobs[0][0]["OP_ID"],
                         "OP_INSTANCE_FAILOVER")
        self.assertEqual(self.queue.jobs[0][0]["target_node"], NODE4)
        err = self.fails(self.evacuate(target_groups=["default"]))
        self.assertIn("cannot be a target", str(err))
        err = self.fails(self.evacuate())
        self.assertIn("no default allocator for 'change-group'", str(err))
        # an answer moving into the evacuated group is refused
        self.fake._answers = []
        self.fake.reply(self.plan("a.example.com", target=NODE2))
        err = self.fails(self.evacuate(iallocator="fake"),
                         errors.OpExecError)
        self.assertIn("is not in a target group", str(err))
        self.fake._answers = []
        self.fake.reply([[], [["a.example.com", "no space"]], []])
        err = self.fails(self.evacuate(iallocator="fake"),
                         errors.OpExecError)
        self.assertIn("Unable to evacuate instances a.example.com (no"
                      " space)", str(err))

    def test_empty_group(self):
        self.assertEqual(self.ok(self.evacuate(group_name="other")),
                         {"jobs": []})

    def test_instance_change_group(self):
        self.create_shared("a.example.com")
        self.fake.reply(self.plan("a.example.com", target=NODE5))
        self.ok({"OP_ID": "OP_INSTANCE_CHANGE_GROUP",
                 "instance_name": "a.example.com", "iallocator": "fake"})
        self.assertEqual(self.fake.requests[0]["instances"],
                         ["a.example.com"])
        self.assertEqual(self.queue.jobs[0][0]["target_node"], NODE5)


class ChangeGroupNetworkTests(AllocatorLUTestCase):
    """An instance on a network goes only to groups connected to it."""

    evacuate = GroupEvacuateTests.evacuate
    plan = GroupEvacuateTests.plan

    def setUp(self):
        AllocatorLUTestCase.setUp(self)
        self.ok({"OP_ID": "OP_NETWORK_ADD", "network_name": "net1",
                 "network": "192.0.2.0/28", "gateway": "192.0.2.1"})
        self.connect("default")
        self.create_shared("a.example.com",
                           nics=[{"network": "net1", "ip": "pool"}])

    def connect(self, group):
        self.ok({"OP_ID": "OP_NETWORK_CONNECT", "network_name": "net1",
                 "group_name": group, "network_mode": "bridged",
                 "network_link": "br0"})

    def change_group(self, **kw):
        op = {"OP_ID": "OP_INSTANCE_CHANGE_GROUP",
              "instance_name": "a.example.com", "iallocator": "fake"}
        op.update(kw)
        return op

    def test_refused_without_a_connected_group(self):
        err = self.fails(self.change_group())
        self.assertIn("No target node group is connected to network net1,"
                      " which instance a.example.com uses", str(err))
        self.assertEqual(err.args[1], errors.ECODE_STATE)
        err = self.fails(self.change_group(target_groups=["other"]))
        self.assertIn("target_groups: node group other is not connected to"
                      " network net1, which instance a.example.com uses",
                      str(err))
        # the allocator was not asked, nothing submitted
        self.assertEqual(self.fake.requests, [])
        self.assertEqual(self.queue.jobs, [])
        err = self.fails(self.evacuate(iallocator="fake"))
        self.assertIn("network net1", str(err))

    def test_named_groups_lacking_the_network_left_out(self):
        third = self.cfg.add_nodegroup(objects.NodeGroup(name="third"))
        self.glm.add(locking.LEVEL_NODEGROUP, [third])
        self.cfg.add_node(objects.Node(name="node6.example.com",
                                       primary_ip="127.0.0.6", group=third))
        self.glm.add(locking.LEVEL_NODE,
                     [self.cfg.get_node("node6.example.com").uuid])
        self.rpc.os_list["node6.example.com"] = list(
            self.rpc.os_list[NODE1])
        self.connect("third")
        self.fake.reply([[["a.example.com", "third", ["node6.example.com"]]],
                         [], [[migrate_op("a.example.com",
                                          "node6.example.com")]]])
        self.ok(self.change_group(target_groups=["other", "third"]))
        self.assertEqual(self.fake.requests[0]["target_groups"],
                         [self.cfg.get_nodegroup("third").uuid])
        self.assertIn("Not moving a.example.com to every group named: node"
                      " group other is not connected to network net1",
                      self.log)

    def test_connected_group_offered(self):
        self.cfg.add_nodegroup(objects.NodeGroup(name="third"))
        self.connect("other")
        self.fake.reply(self.plan("a.example.com", target=NODE5))
        self.ok(self.change_group())
        # "third" lacks net1: not offered
        self.assertEqual(self.fake.requests[0]["target_groups"],
                         [self.cfg.get_nodegroup("other").uuid])
        self.assertEqual(self.queue.jobs[0][0]["target_node"], NODE5)

    def test_evacuation_plans_per_set_of_networks(self):
        self.connect("other")
        self.create_shared("b.example.com")
        # one request per set of networks: none (b), net1 (a)
        self.fake.reply(self.plan("b.example.com"))
        self.fake.reply(self.plan("a.example.com"))
        result = self.ok(self.evacuate(iallocator="fake"))
        self.assertEqual(len(result["jobs"]), 2)
        self.assertEqual([r["instances"] for r in self.fake.requests],
                         [["b.example.com"], ["a.example.com"]])


class ClusterDefaultsTests(AllocatorLUTestCase):

    def modify(self, **kw):
        op = {"OP_ID": "OP_CLUSTER_SET_PARAMS"}
        op.update(kw)
        return self.ok(op)

    def info(self):
        return self.ok({"OP_ID": "OP_CLUSTER_QUERY"})

    def test_lists_per_request_type(self):
        self.modify(default_iallocator="fake,spare")
        info = self.info()
        self.assertEqual(info["default_iallocator"], "fake")
        self.assertEqual(info["default_iallocators"]["relocate"],
                         ["fake", "spare"])
        self.modify(default_iallocators={"relocate": ["spare"],
                                         "node-evacuate": []})
        info = self.info()
        self.assertEqual(info["default_iallocators"]["relocate"], ["spare"])
        self.assertEqual(info["default_iallocators"]["node-evacuate"], [])
        self.assertEqual(info["default_iallocators"]["allocate"],
                         ["fake", "spare"])
        # config.data keeps Ganeti's one field
        self.assertEqual(self.cfg.cluster.default_iallocator,
                         "fake,spare;relocate=spare;node-evacuate=")
        self.modify(default_iallocators={"relocate": None})
        self.assertEqual(self.cfg.cluster.default_iallocator,
                         "fake,spare;node-evacuate=")
        self.modify(default_iallocator="")
        self.assertEqual(self.info()["default_iallocator"], "")

    def test_only_what_changed_is_reported_changed(self):
        # Ganeti's gnt-cluster modify sends its defaults along
        del self.log[:]
        policy = dict(self.cfg.cluster.ipolicy)
        self.modify(default_iallocator="fake", nicparams={},
                    ipolicy=policy)
        said = [str(entry) for entry in self.log]
        self.assertTrue(any("Changed default_iallocator" in s
                            for s in said), said)
        self.assertFalse(any("Changed nicparams" in s or
                             "Changed ipolicy" in s for s in said), said)
        serial = self.cfg.cluster.serial_no
        del self.log[:]
        self.modify(default_iallocator="fake")
        self.assertFalse(any("Changed" in str(s) for s in self.log),
                         self.log)
        self.assertEqual(self.cfg.cluster.serial_no, serial)

    def test_unknown_names_are_refused(self):
        op = {"OP_ID": "OP_CLUSTER_SET_PARAMS", "default_iallocator": "nope"}
        err = self.fails(op)
        self.assertIn("default_iallocator: iallocator module 'nope' not"
                      " found", str(err))
        op["default_iallocator"] = "fake;relocate=x/y"
        self.assertIn("not a valid allocator name", str(self.fails(op)))
        op = {"OP_ID": "OP_CLUSTER_SET_PARAMS",
              "default_iallocators": {"allocate": ["nope"]}}
        self.assertIn("'nope' not found", str(self.fails(op)))
        op = {"OP_ID": "OP_CLUSTER_SET_PARAMS",
              "default_iallocator_params": {"--bad": "1"}}
        self.assertIn("default_iallocator_params", str(self.fails(op)))
        self.assertEqual(self.cfg.cluster.default_iallocator, "")

    def test_params_reach_external_allocators_only_by_name(self):
        """The cluster's parameters, the request's and the opcode's, the
        opcode's winning."""
        from ganeti.cmdlib import allocation
        from ganeti.iallocator import requests
        self.cfg.set_cluster_params(
            default_iallocator_params={"a": "1", "b": "2"})
        req = requests.NodeEvacuateRequest(["x"], "all",
                                           ignore_soft_errors=True)
        self.assertEqual(allocation.allocator_params(self.cfg, req,
                                                     {"b": "3"}),
                         {"a": "1", "b": "3", "ignore-soft-errors": None})


# the lock names the tests look for
assert locking.LEVEL_NAMES[locking.LEVEL_NODE] == "node"
