"""Node evacuate and node migrate: the jobs they plan, with a fake queue."""

from twisted.internet import defer

from ganeti import locking
from ganeti import objects

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


class EvacuateTestCase(MigrationTestCase):

    def setUp(self):
        MigrationTestCase.setUp(self)
        self.queue = FakeQueue()
        self.ctx.queue = self.queue

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

    def test_primaries_spread_over_the_group(self):
        for name in ("a.example.com", "b.example.com", "c.example.com"):
            self.create_shared(name)
        self.create("d.example.com")                     # a file disk
        result = self.ok(self.evacuate(mode="primary-only"))
        self.assertEqual(result, {"jobs": [[True, 1], [True, 2], [True, 3],
                                           [True, 4]]})
        planned = self.planned()
        self.assertEqual([p[:2] for p in planned], [
            ("OP_INSTANCE_MIGRATE", "a.example.com"),
            ("OP_INSTANCE_MIGRATE", "b.example.com"),
            ("OP_INSTANCE_MIGRATE", "c.example.com"),
            ("OP_INSTANCE_MOVE", "d.example.com")])
        targets = [p[2] for p in planned]
        self.assertEqual(set(targets), {NODE2, NODE3})   # spread
        self.assertTrue(all(ops[0].get("allow_failover")
                            for ops in self.queue.jobs[:3]))
        self.assertIn("Evacuating instances from node '%s': a.example.com,"
                      " b.example.com, c.example.com, d.example.com" % NODE1,
                      self.log)
        # nothing changed by the LU itself
        self.assertEqual(self.inst("a.example.com").primary_node,
                         self.node(NODE1))

    def test_remote_node_and_drained_targets(self):
        self.create_shared("a.example.com")
        self.ok(self.evacuate(remote_node=NODE3))
        self.assertEqual(self.planned(),
                         [("OP_INSTANCE_MIGRATE", "a.example.com", NODE3)])
        self.queue.jobs = []
        self.cfg.set_node_params(NODE3, drained=True)
        self.ok(self.evacuate())
        self.assertEqual(self.planned(),
                         [("OP_INSTANCE_MIGRATE", "a.example.com", NODE2)])

    def test_drained_node_itself(self):
        self.create_shared("a.example.com")
        self.cfg.set_node_params(NODE1, drained=True)
        self.ok(self.evacuate())
        self.assertEqual(len(self.queue.jobs), 1)

    def test_offline_node_fails_over(self):
        self.create_shared("a.example.com")
        self.create("d.example.com", start=False)
        self.cfg.set_node_params(NODE1, master_candidate=False, offline=True)
        err = self.fails(self.evacuate(), errors_exec())
        self.assertIn("d.example.com (its disks are only on the offline"
                      " node", str(err))
        self.assertEqual(self.queue.jobs, [])
        self.ok(self.evacuate(ignore_soft_errors=True))
        self.assertEqual([p[:2] for p in self.planned()],
                         [("OP_INSTANCE_FAILOVER", "a.example.com")])
        self.assertTrue(self.queue.jobs[0][0]["ignore_consistency"])

    def test_stopped_instance_fails_over(self):
        self.create_shared("a.example.com", start=False)
        self.ok(self.evacuate())
        self.assertEqual([p[0] for p in self.planned()],
                         ["OP_INSTANCE_FAILOVER"])

    def test_drbd_primaries_and_secondaries(self):
        self.drbd("p.example.com", NODE1, NODE2)
        self.drbd("s.example.com", NODE2, NODE1)
        self.ok(self.evacuate(mode="secondary-only"))
        self.assertEqual(self.planned(), [
            ("OP_INSTANCE_REPLACE_DISKS", "s.example.com", NODE3)])
        self.assertEqual(self.queue.jobs[0][0]["mode"],
                         "replace_new_secondary")
        self.queue.jobs = []
        self.ok(self.evacuate(mode="primary-only"))
        self.assertEqual(self.planned(), [
            ("OP_INSTANCE_MIGRATE", "p.example.com", None)])
        self.queue.jobs = []
        self.ok(self.evacuate(mode="all"))
        self.assertEqual(len(self.queue.jobs), 2)

    def test_nothing_to_do_and_refusals(self):
        self.assertEqual(self.ok(self.evacuate()), {"jobs": []})
        self.assertIn("No instances to evacuate from node '%s'" % NODE1,
                      self.log)
        err = self.fails(self.evacuate(remote_node=NODE1))
        self.assertIn("remote_node", str(err))
        err = self.fails(self.evacuate(iallocator="hail"))
        self.assertIn("iallocator", str(err))
        self.drbd("s.example.com", NODE2, NODE1)
        err = self.fails(self.evacuate(remote_node=NODE2,
                                       mode="secondary-only"))
        self.assertIn("node %s is the primary node of instance"
                      " s.example.com" % NODE2, str(err))

    def test_no_target_left(self):
        self.create_shared("a.example.com")
        self.cfg.set_node_params(NODE2, drained=True)
        self.cfg.set_node_params(NODE3, drained=True)
        err = self.fails(self.evacuate(), errors_exec())
        self.assertIn("no node of its group can take it", str(err))


class NodeMigrateTests(EvacuateTestCase):

    def migrate_node(self, **kw):
        op = {"OP_ID": "OP_NODE_MIGRATE", "node_name": NODE1}
        op.update(kw)
        return op

    def test_all_primaries_migrate(self):
        self.create_shared("a.example.com")
        self.create_shared("b.example.com")
        self.create("f.example.com")    # file: cannot be migrated
        result = self.ok(self.migrate_node(mode="live"))
        self.assertEqual(len(result["jobs"]), 2)
        self.assertEqual([p[:2] for p in self.planned()], [
            ("OP_INSTANCE_MIGRATE", "a.example.com"),
            ("OP_INSTANCE_MIGRATE", "b.example.com")])
        self.assertEqual(self.queue.jobs[0][0]["mode"], "live")
        self.assertTrue(any("f.example.com has file disks and cannot be"
                            " migrated" in l for l in self.log))

    def test_target_node(self):
        self.create_shared("a.example.com")
        self.ok(self.migrate_node(target_node=NODE3))
        self.assertEqual(self.planned()[0][2], NODE3)
        err = self.fails(self.migrate_node(target_node=NODE1))
        self.assertIn("target_node", str(err))
        err = self.fails(self.migrate_node(live=True, mode="live"))
        self.assertIn("only one of", str(err))

    def test_offline_node_fails_over(self):
        self.create_shared("a.example.com")
        self.cfg.set_node_params(NODE1, master_candidate=False, offline=True)
        self.ok(self.migrate_node())
        self.assertEqual(self.planned()[0][0], "OP_INSTANCE_FAILOVER")
        self.assertIn("Node %s is offline: failing over its instances"
                      " instead of migrating them" % NODE1, self.log)


def errors_exec():
    from ganeti import errors
    return errors.OpExecError
