"""Opportunistic locking: instance creation and multi-allocation with an
allocator take only the node locks that are free, never wait for the
others, and let the allocator choose among the nodes they got."""

from ganeti import errors
from ganeti import locking
from ganeti import opcodes

from tests.test_cmdlib_instance import NODE1, NODE2, create_op
from tests.test_iallocator_lus import AllocatorLUTestCase, NODE4, NODE5
from tests.test_migration import NODE3

OTHER = "job-other"


def first_usable(document):
    """An allocator's answer: the first nodes (by name) it may use, in
    the first group (by name) that has enough.  Like hail it places
    nothing on offline, drained or non-vm_capable nodes."""
    nodes = document["nodes"]

    def place(request):
        def usable(name):
            node = nodes[name]
            return not (node["offline"] or node["drained"]) and \
                node["vm_capable"]

        want = request["required_nodes"]
        groups = document["nodegroups"]
        for group in sorted(set(n["group"] for n in nodes.values()),
                            key=lambda g: groups[g]["name"]):
            names = sorted(n for n in nodes if nodes[n]["group"] == group
                           and usable(n))
            if len(names) >= want:
                return names[:want]
        return None

    request = document["request"]
    if request["type"] == "allocate":
        chosen = place(request)
        if chosen is None:
            return {"success": False, "info": "no usable node",
                    "result": []}
        return {"success": True, "info": "", "result": chosen}
    # multi-allocate: every instance on its own first usable node(s)
    allocated = [[inst["name"], place(inst)] for inst in
                 request["instances"]]
    return {"success": True, "info": "",
            "result": [[a for a in allocated if a[1] is not None],
                       [a[0] for a in allocated if a[1] is None]]}


class OpportunisticTestCase(AllocatorLUTestCase):

    def setUp(self):
        AllocatorLUTestCase.setUp(self)
        self.fake.reply_with(first_usable)
        self.glm.acquire(locking.LEVEL_CLUSTER, [locking.BGL], OTHER,
                         shared=True)

    def tearDown(self):
        for owner in (OTHER, "job-reader"):
            self.glm.release_all(owner)
        return AllocatorLUTestCase.tearDown(self)

    def busy(self, *names, level=locking.LEVEL_NODE):
        """Another job holds the (node or node-res) locks of ``names``."""
        got = self.successResultOf(self.glm.acquire(
            level, [self.node(n) for n in names], OTHER))
        self.assertEqual(len(got), len(names))

    def done(self):
        """The other job ends."""
        for level in (locking.LEVEL_NODE_RES, locking.LEVEL_NODE):
            if self.glm.is_owned(level, OTHER):
                self.glm.release(level, OTHER)

    def offline_in_input(self, index=-1):
        nodes = self.fake.inputs[index]["nodes"]
        return sorted(n for n in nodes if nodes[n]["offline"])

    def drained_in_input(self, index=-1):
        nodes = self.fake.inputs[index]["nodes"]
        return sorted(n for n in nodes if nodes[n]["drained"])

    def create(self, name="inst1.example.com", **kw):
        kw.setdefault("pnode", None)
        kw.setdefault("iallocator", "fake")
        return self.run_op(create_op(name, **kw))


class CreateTests(OpportunisticTestCase):

    def test_a_busy_node_is_skipped_without_waiting(self):
        self.busy(NODE1)
        d = self.create(opportunistic_locking=True)
        # answered at once: no clock advance, the other job still running
        self.assertEqual(self.successResultOf(d), [NODE2])
        self.assertEqual(self.inst().primary_node, self.node(NODE2))
        # the allocator saw the busy node drained, with what it reports
        # (for its capacity checks), and the others as they are
        self.assertEqual(self.drained_in_input(), [NODE1])
        self.assertEqual(self.offline_in_input(), [])
        self.assertIn("total_memory", self.fake.inputs[-1]["nodes"][NODE1])
        self.assertIn("Opportunistic locking: 4 of 5 nodes locked; the"
                      " allocator chooses among them", self.log)
        # the other job's lock is untouched; ours are all given back
        (held,) = [lock for lock in self.node_locks_held()]
        self.assertEqual(held["owners"], [OTHER])
        self.assertEqual(held["name"], "node/%s" % self.node(NODE1))

    def test_without_the_flag_the_create_waits(self):
        self.busy(NODE1)
        d = self.create()
        self.clock.advance(600)      # past every retry: a blocking wait
        self.assertNoResult(d)
        self.assertEqual(self.fake.inputs, [])
        self.done()
        self.assertEqual(self.successResultOf(d), [NODE1])
        self.assertEqual(self.drained_in_input(), [])

    def test_busy_node_resources_are_skipped_too(self):
        self.busy(NODE1)
        self.busy(NODE2, level=locking.LEVEL_NODE_RES)
        d = self.create(opportunistic_locking=True)
        self.assertEqual(self.successResultOf(d), [NODE3])
        self.assertEqual(self.drained_in_input(), [NODE1, NODE2])

    def test_every_node_busy_is_a_temporary_error(self):
        self.busy(NODE1, NODE2, NODE3, NODE4, NODE5)
        before = self.cfg.to_dict()
        instance_locks = self.instance_locks()
        err = self.failureResultOf(
            self.create(opportunistic_locking=True),
            errors.OpPrereqError).value
        self.assertEqual(err.args[1], errors.ECODE_TEMP_NORES)
        self.assertIn("not all nodes could be locked (0 of 5 node locks"
                      " free, at least 1 needed)", err.args[0])
        self.assertIn("try again later", err.args[0])
        self.assertEqual(self.fake.inputs, [])
        self.assertEqual(self.cfg.to_dict(), before)
        # the new instance's lock made before the nodes is gone again
        self.assertEqual(self.instance_locks(), instance_locks)
        self.assertEqual(self.glm.owned_levels("job-%d/op-0" % self.job),
                         [])

    def test_drbd_needs_two_free_nodes(self):
        self.busy(NODE1, NODE2, NODE3, NODE4)
        err = self.failureResultOf(
            self.create(opportunistic_locking=True, disk_template="drbd"),
            errors.OpPrereqError).value
        self.assertEqual(err.args[1], errors.ECODE_TEMP_NORES)
        self.assertIn("1 of 5 node locks free, at least 2 needed",
                      err.args[0])

    def test_no_room_among_the_locked_nodes_is_temporary(self):
        self.fake._answers = []
        self.fake.reply([], success=False, info="FailMem: 4")
        self.busy(NODE1)
        err = self.failureResultOf(
            self.create(opportunistic_locking=True),
            errors.OpPrereqError).value
        self.assertEqual(err.args[1], errors.ECODE_TEMP_NORES)
        self.assertIn("Can't compute nodes using iallocator 'fake': FailMem:"
                      " 4 (opportunistic locking: not all nodes could be"
                      " locked, only 4 of 5 were offered to the allocator;"
                      " try again later)", err.args[0])
        self.assertEqual(self.cfg.instances, {})
        self.assertEqual(len(self.node_locks_held()), 1)   # the other's
        # every node locked: no room is no room, not a temporary lack
        self.done()
        err = self.failureResultOf(
            self.create(opportunistic_locking=True),
            errors.OpPrereqError).value
        self.assertEqual(err.args[1], errors.ECODE_NORES)
        self.assertNotIn("opportunistic", err.args[0])

    def test_the_answer_must_be_a_locked_node(self):
        self.fake._answers = []
        self.fake.reply([NODE1])
        self.busy(NODE1)
        err = self.failureResultOf(
            self.create(opportunistic_locking=True),
            errors.OpExecError).value
        self.assertIn("node '%s' is drained" % NODE1, str(err))
        self.assertEqual(self.cfg.instances, {})

    def test_the_flag_is_ignored_when_the_node_is_given(self):
        self.busy(NODE1)
        d = self.create(pnode=NODE1, iallocator=None,
                        opportunistic_locking=True)
        self.clock.advance(600)
        self.assertNoResult(d)
        self.done()
        self.assertEqual(self.successResultOf(d), [NODE1])
        self.assertEqual(self.fake.inputs, [])

    def test_a_dry_run_is_still_a_dry_run_after_the_error(self):
        self.busy(NODE1, NODE2, NODE3, NODE4, NODE5)
        op = create_op(pnode=None, iallocator="fake", dry_run=True,
                       opportunistic_locking=True)
        err = self.failureResultOf(self.run_op(op),
                                   errors.OpPrereqError).value
        self.assertEqual(err.args[1], errors.ECODE_TEMP_NORES)
        self.done()
        self.assertEqual(self.ok(op), [NODE1])
        self.assertEqual(self.cfg.instances, {})


    def test_a_dry_run_refused_early_stays_a_dry_run(self):
        # refused while the names are looked up, and while the arguments
        # are checked
        for spec in (create_op(pnode="no-such-node", dry_run=True),
                     create_op(pnode=None, iallocator="fake", dry_run=True,
                               tags=["bad tag " * 30])):
            op = opcodes.from_dict(spec)
            self.job += 1
            self.failureResultOf(
                self.proc.execute(self.job, 0, op, self.log.append),
                errors.OpPrereqError)
            self.assertIs(op.dry_run, True)
        self.assertEqual(self.cfg.instances, {})


class MultiAllocTests(OpportunisticTestCase):

    def multi(self, *names, **kw):
        op = {"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "iallocator": "fake",
              "instances": []}
        for name in names:
            inst = create_op(name, pnode=None)
            del inst["OP_ID"]
            op["instances"].append(inst)
        op.update(kw)
        return self.run_op(op)

    def test_busy_nodes_are_skipped_without_waiting(self):
        self.busy(NODE1, NODE2)
        d = self.multi("a.example.com", "b.example.com",
                       opportunistic_locking=True)
        result = self.successResultOf(d)
        self.assertEqual(result["allocatable"], ["a.example.com",
                                                 "b.example.com"])
        self.assertEqual(self.drained_in_input(), [NODE1, NODE2])
        self.assertEqual(self.offline_in_input(), [])
        self.assertEqual([j[0]["pnode"] for j in self.queue.jobs],
                         [NODE3, NODE3])
        self.assertEqual(len(self.node_locks_held()), 2)   # the other's

    def test_the_answer_must_be_a_locked_node(self):
        self.fake._answers = []
        self.fake.reply([[["a.example.com", [NODE1]]], []])
        self.busy(NODE1)
        err = self.failureResultOf(
            self.multi("a.example.com", opportunistic_locking=True),
            errors.OpExecError).value
        self.assertIn("node '%s' is drained" % NODE1, str(err))
        self.assertEqual(self.queue.jobs, [])

    def test_without_the_flag_it_waits(self):
        self.busy(NODE1)
        d = self.multi("a.example.com")
        self.clock.advance(600)
        self.assertNoResult(d)
        self.done()
        self.assertEqual(self.successResultOf(d)["allocatable"],
                         ["a.example.com"])
        self.assertEqual(self.drained_in_input(), [])

    def test_every_node_busy_is_a_temporary_error(self):
        self.busy(NODE1, NODE2, NODE3, NODE4, NODE5)
        err = self.failureResultOf(
            self.multi("a.example.com", opportunistic_locking=True),
            errors.OpPrereqError).value
        self.assertEqual(err.args[1], errors.ECODE_TEMP_NORES)
        self.assertIn("not all nodes could be locked", err.args[0])
        self.assertEqual(self.queue.jobs, [])
        self.assertEqual(self.fake.inputs, [])

    def test_shared_holders_do_not_stop_it(self):
        """Multi-allocation locks nodes shared: another shared holder is
        no obstacle, an exclusive one is."""
        self.busy(NODE2)
        reader = "job-reader"
        self.glm.acquire(locking.LEVEL_CLUSTER, [locking.BGL], reader,
                         shared=True)
        self.successResultOf(self.glm.acquire(
            locking.LEVEL_NODE, [self.node(NODE1)], reader, shared=True))
        self.successResultOf(self.multi("a.example.com",
                                        opportunistic_locking=True))
        self.assertEqual(self.drained_in_input(), [NODE2])
        self.assertEqual([j[0]["pnode"] for j in self.queue.jobs], [NODE1])
