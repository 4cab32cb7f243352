"""Node evacuate and node migrate: the jobs they plan (with a scripted
allocator, or a given node) and submit to a fake queue."""

from twisted.internet import defer

from ganeti import errors
from ganeti import locking
from ganeti import objects

from tests import allocator_fakes
from tests.test_cmdlib_instance import NODE1, NODE2
from tests.test_migration import MigrationTestCase, NODE3


class FakeQueue(object):
    def __init__(self):
        self.jobs = []

    def submit_many_jobs(self, jobs):
        result = []
        for ops in jobs:
            # OpCode objects: checked when the LU made them
            self.jobs.append([op.to_dict() for op in ops])
            result.append([True, len(self.jobs)])
        return defer.succeed(result)


def migrate_op(name, target):
    """An opcode as Ganeti's hail writes it in an evacuation plan."""
    return {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": name,
            "target_node": target, "allow_runtime_changes": False,
            "ignore_ipolicy": False, "cleanup": False,
            "allow_failover": True, "ignore_hvversions": True}


class EvacuateTestCase(MigrationTestCase):

    def setUp(self):
        MigrationTestCase.setUp(self)
        self.queue = FakeQueue()
        self.ctx.queue = self.queue
        fakes = allocator_fakes.install(self, self.ctx)
        self.fake, self.spare = fakes["fake"], fakes["spare"]

    def evacuate(self, mode="all", **kw):
        op = {"OP_ID": "OP_NODE_EVACUATE", "node_name": NODE1, "mode": mode}
        op.update(kw)
        return op

    def planned(self):
        return [(ops[0]["OP_ID"], ops[0]["instance_name"],
                 ops[0].get("target_node") or ops[0].get("remote_node"))
                for ops in self.queue.jobs]

    def drbd(self, name, pnode, snode):
        p, s = self.node(pnode), self.node(snode)
        inst = objects.Instance(
            name=name, primary_node=p, secondary_nodes=[s],
            os="busybox+default", hypervisor="fake", admin_state="up",
            beparams={"maxmem": 128, "minmem": 128})
        disk = objects.Disk(
            dev_type="drbd", size=64, iv_name="disk/0", mode="rw",
            logical_id=[p, s, 11000 + len(self.cfg.instances), 0, 0, "x"],
            children=[objects.Disk(dev_type="plain", size=64,
                                   logical_id=["xenvg", name + ".data"]),
                      objects.Disk(dev_type="plain", size=128,
                                   logical_id=["xenvg", name + ".meta"])])
        self.cfg.add_instance(inst, [disk])
        self.glm.add(locking.LEVEL_INSTANCE, [inst.uuid])


class EvacuateTests(EvacuateTestCase):

    def test_allocator_plan_and_moves_are_submitted(self):
        for name in ("a.example.com", "b.example.com"):
            self.create_shared(name)
        self.create("d.example.com")                     # a file disk
        self.fake.reply([
            [["a.example.com", "default", [NODE2]],
             ["b.example.com", "default", [NODE3]]], [],
            [[migrate_op("a.example.com", NODE2)],
             [migrate_op("b.example.com", NODE3)]]])
        self.fake.reply([NODE2])                         # for the move
        before = self.cfg.to_dict()
        result = self.ok(self.evacuate(mode="primary-only",
                                       iallocator="fake"))
        self.assertEqual(result, {"jobs": [[True, 1], [True, 2],
                                           [True, 3]]})
        # the plan's jobs, then the move of the file instance
        self.assertEqual(self.planned(), [
            ("OP_INSTANCE_MIGRATE", "a.example.com", NODE2),
            ("OP_INSTANCE_MIGRATE", "b.example.com", NODE3),
            ("OP_INSTANCE_MOVE", "d.example.com", NODE2)])
        self.assertTrue(self.queue.jobs[0][0]["allow_failover"])
        # what the allocator was asked
        evac, alloc = self.fake.requests
        self.assertEqual(evac, {"type": "node-evacuate",
                                "instances": ["a.example.com",
                                              "b.example.com"],
                                "evac_mode": "primary-only"})
        self.assertEqual(alloc["type"], "allocate")
        self.assertEqual(alloc["name"], "d.example.com")
        self.assertEqual(alloc["restrict-to-nodes"], [NODE2, NODE3])
        self.assertEqual(alloc["group_name"], "default")
        self.assertEqual(alloc["disks"][0]["size"], 1024)
        # the second question counts the first answer
        second = self.fake.inputs[1]
        self.assertEqual(second["instances"]["a.example.com"]["nodes"],
                         [NODE2])
        self.assertEqual(second["nodes"][NODE2]["free_memory"],
                         self.fake.inputs[0]["nodes"][NODE2]["free_memory"]
                         - 256)
        self.assertIn("Evacuating instances from node '%s': a.example.com,"
                      " b.example.com, d.example.com" % NODE1, self.log)
        # the LU itself changed nothing
        self.assertEqual(self.cfg.to_dict(), before)

    def test_cluster_default_and_fallback(self):
        self.create_shared("a.example.com")
        err = self.fails(self.evacuate())
        self.assertIn("no default allocator for 'node-evacuate' requests",
                      str(err))
        self.assertIn("remote_node", str(err))
        self.cfg.set_cluster_params(default_iallocator="fake,spare")
        self.fake.fail_with(RuntimeError("engine exploded"))
        self.spare.reply([[["a.example.com", "default", [NODE3]]], [],
                          [[migrate_op("a.example.com", NODE3)]]])
        self.ok(self.evacuate())
        self.assertEqual(self.planned(), [
            ("OP_INSTANCE_MIGRATE", "a.example.com", NODE3)])
        self.assertTrue(any("iallocator 'fake' gave no usable answer"
                            " (built-in iallocator 'fake' failed:"
                            " RuntimeError: engine exploded); trying"
                            " 'spare'" in line for line in self.log),
                        self.log)

    def test_bad_plans_change_nothing(self):
        self.create_shared("a.example.com")
        before = self.cfg.to_dict()
        for result, reason in (
                ([[], [], [[{"OP_ID": "OP_INSTANCE_REMOVE",
                             "instance_name": "a.example.com"}]]],
                 "opcode 'OP_INSTANCE_REMOVE' is not allowed"),
                ([[], [], [[migrate_op("a.example.com", NODE1)]]],
                 "is the node being evacuated"),
                ([[], [], [[migrate_op("a.example.com", "ghost")]]],
                 "node 'ghost' does not exist"),
                ({"moved": []}, "expected [moved, failed, jobs]")):
            self.fake.reply(result)
            err = self.fails(self.evacuate(iallocator="fake"),
                             errors.OpExecError)
            self.assertIn("iallocator 'fake' returned an invalid answer",
                          str(err))
            self.assertIn(reason, str(err))
            self.assertIn("nothing was changed", str(err))
            self.fake._answers = []
        self.assertEqual(self.queue.jobs, [])
        self.assertEqual(self.cfg.to_dict(), before)

    def test_no_solution_and_failed_instances(self):
        self.create_shared("a.example.com")
        self.create_shared("b.example.com")
        self.fake.reply([], success=False, info="FailMem: 2")
        err = self.fails(self.evacuate(iallocator="fake"))
        self.assertEqual(err.args, ("Can't compute nodes using iallocator"
                                    " 'fake': FailMem: 2",
                                    "insufficient_resources"))
        self.fake._answers = []
        self.fake.reply([[["a.example.com", "default", [NODE2]]],
                         [["b.example.com", "FailN1"]],
                         [[migrate_op("a.example.com", NODE2)]]])
        err = self.fails(self.evacuate(iallocator="fake"),
                         errors.OpExecError)
        self.assertIn("Unable to evacuate instances b.example.com (FailN1)",
                      str(err))
        self.assertEqual(self.queue.jobs, [])
        self.ok(self.evacuate(iallocator="fake", ignore_soft_errors=True))
        self.assertEqual(self.planned(), [
            ("OP_INSTANCE_MIGRATE", "a.example.com", NODE2)])

    def test_remote_node_needs_no_allocator(self):
        self.create_shared("a.example.com")
        self.create("d.example.com")
        self.ok(self.evacuate(remote_node=NODE3))
        self.assertEqual(self.planned(), [
            ("OP_INSTANCE_MIGRATE", "a.example.com", NODE3),
            ("OP_INSTANCE_MOVE", "d.example.com", NODE3)])
        self.assertEqual(self.fake.inputs, [])
        err = self.fails(self.evacuate(remote_node=NODE3, iallocator="fake"))
        self.assertIn("give either an allocator or a node", str(err))

    def test_offline_node(self):
        self.create_shared("a.example.com")
        self.create("d.example.com", start=False)
        self.cfg.set_node_params(NODE1, master_candidate=False, offline=True)
        self.fake.reply([[["a.example.com", "default", [NODE2]]], [],
                         [[migrate_op("a.example.com", NODE2)]]])
        err = self.fails(self.evacuate(iallocator="fake"),
                         errors.OpExecError)
        self.assertIn("d.example.com (its disks are only on the offline"
                      " node", str(err))
        self.assertEqual(self.queue.jobs, [])
        self.ok(self.evacuate(iallocator="fake", ignore_soft_errors=True))
        self.assertEqual([p[:2] for p in self.planned()],
                         [("OP_INSTANCE_MIGRATE", "a.example.com")])
        # the offline node is given to the allocator as such
        self.assertTrue(self.fake.inputs[-1]["nodes"][NODE1]["offline"])

    def test_drbd_secondaries_and_early_release(self):
        self.drbd("s.example.com", NODE2, NODE1)
        self.fake.reply([[["s.example.com", "default", [NODE2, NODE3]]], [],
                         [[{"OP_ID": "OP_INSTANCE_REPLACE_DISKS",
                            "instance_name": "s.example.com",
                            "mode": "replace_new_secondary",
                            "remote_node": NODE3, "disks": [],
                            "early_release": False}]]])
        self.ok(self.evacuate(mode="secondary-only", iallocator="fake",
                              early_release=True))
        self.assertEqual(self.fake.requests[0]["evac_mode"],
                         "secondary-only")
        self.assertEqual(self.planned(), [
            ("OP_INSTANCE_REPLACE_DISKS", "s.example.com", NODE3)])
        self.assertTrue(self.queue.jobs[0][0]["early_release"])

    def test_dry_run_plans_only(self):
        self.create_shared("a.example.com")
        self.fake.reply([[["a.example.com", "default", [NODE2]]], [],
                         [[migrate_op("a.example.com", NODE2)]]])
        result = self.ok(self.evacuate(iallocator="fake", dry_run=True))
        self.assertEqual(result["jobs"], [])
        self.assertEqual(result["moved"], [["a.example.com", [NODE2],
                                            "group default"]])
        self.assertEqual(result["planned_jobs"][0][0]["target_node"], NODE2)
        self.assertEqual(self.queue.jobs, [])

    def test_nothing_to_do_and_refusals(self):
        self.assertEqual(self.ok(self.evacuate()), {"jobs": []})
        self.assertIn("No instances to evacuate from node '%s'" % NODE1,
                      self.log)
        err = self.fails(self.evacuate(remote_node=NODE1))
        self.assertIn("remote_node", str(err))
        self.drbd("s.example.com", NODE2, NODE1)
        err = self.fails(self.evacuate(remote_node=NODE2,
                                       mode="secondary-only"))
        self.assertIn("node %s is the primary node of instance"
                      " s.example.com" % NODE2, str(err))
        err = self.fails(self.evacuate(iallocator="fake",
                                       iallocator_params={"-x": "1"}))
        self.assertIn("iallocator_params: '-x' is not a valid allocator"
                      " parameter name", str(err))

    def test_mover_without_a_place(self):
        self.create("d.example.com")
        self.cfg.set_node_params(NODE2, drained=True)
        self.cfg.set_node_params(NODE3, drained=True)
        err = self.fails(self.evacuate(iallocator="fake"),
                         errors.OpExecError)
        self.assertIn("d.example.com (no other node of its group can take"
                      " it)", str(err))


class NodeMigrateTests(EvacuateTestCase):

    def migrate_node(self, **kw):
        op = {"OP_ID": "OP_NODE_MIGRATE", "node_name": NODE1}
        op.update(kw)
        return op

    def test_all_primaries_migrate(self):
        self.create_shared("a.example.com")
        self.create_shared("b.example.com")
        self.create("f.example.com")    # file: cannot be migrated
        result = self.ok(self.migrate_node(mode="live", target_node=NODE2))
        self.assertEqual(len(result["jobs"]), 2)
        self.assertEqual(self.planned(), [
            ("OP_INSTANCE_MIGRATE", "a.example.com", NODE2),
            ("OP_INSTANCE_MIGRATE", "b.example.com", NODE2)])
        self.assertEqual(self.queue.jobs[0][0]["mode"], "live")
        self.assertTrue(any("f.example.com has file disks and cannot be"
                            " migrated" in l for l in self.log))

    def test_each_migration_asks_the_allocator(self):
        self.create_shared("a.example.com")
        self.drbd("p.example.com", NODE1, NODE2)
        err = self.fails(self.migrate_node())
        self.assertIn("no default allocator for 'relocate' requests",
                      str(err))
        self.assertIn("a.example.com", str(err))
        self.ok(self.migrate_node(iallocator="fake",
                                  iallocator_params={"x": "1"}))
        jobs = {ops[0]["instance_name"]: ops[0] for ops in self.queue.jobs}
        self.assertEqual((jobs["a.example.com"]["iallocator"],
                          jobs["a.example.com"]["target_node"],
                          jobs["a.example.com"]["iallocator_params"]),
                         ("fake", None, {"x": "1"}))
        # drbd goes to its secondary: no allocator
        self.assertIsNone(jobs["p.example.com"]["iallocator"])
        self.queue.jobs = []
        self.cfg.set_cluster_params(default_iallocator=";relocate=fake")
        self.ok(self.migrate_node())
        self.assertIsNone(self.queue.jobs[0][0]["iallocator"])

    def test_target_node(self):
        self.create_shared("a.example.com")
        err = self.fails(self.migrate_node(target_node=NODE1))
        self.assertIn("target_node", str(err))
        err = self.fails(self.migrate_node(live=True, mode="live"))
        self.assertIn("only one of", str(err))
        err = self.fails(self.migrate_node(target_node=NODE2,
                                           iallocator="fake"))
        self.assertIn("give either", str(err))

    def test_offline_node_fails_over(self):
        self.create_shared("a.example.com")
        self.cfg.set_node_params(NODE1, master_candidate=False, offline=True)
        self.ok(self.migrate_node(target_node=NODE3))
        self.assertEqual(self.planned()[0][:3],
                         ("OP_INSTANCE_FAILOVER", "a.example.com", NODE3))
        self.assertIn("Node %s is offline: failing over its instances"
                      " instead of migrating them" % NODE1, self.log)
