"""Node failure detection on the master, on a fake clock: lost nodes are
marked offline and fenced in one job; nodes that cannot be fenced are
only reported; a master that loses too many nodes at once does
nothing."""

from twisted.internet import defer
from twisted.internet.testing import Clock
from twisted.trial import unittest

from ganeti import objects, rpc as rpc_mod
from ganeti.watcher import nodehealth

from tests.test_config import make_store

NODES = ["node%d.example.com" % i for i in range(1, 6)]


class FakeRpc:
    def __init__(self):
        self.down = set()
        self.calls = []

    def call(self, node, procedure, args=(), timeout=None):
        self.calls.append((node, procedure))
        ok = node not in self.down
        return defer.succeed(rpc_mod.RpcResult(
            node=node, procedure=procedure, success=ok,
            payload=3000000 if ok else None,
            fail_msg=None if ok else "connection refused"))


class NodeHealthTests(unittest.TestCase):

    def setUp(self):
        self.cfg = make_store(self)
        for i, name in enumerate(NODES[1:], 2):
            self.cfg.add_node(objects.Node(name=name,
                                           primary_ip="127.0.0.%d" % i))
        self.cfg.set_cluster_params(ndparams=dict(
            self.cfg.cluster.ndparams, oob_program="/etc/ganeti/oob/ipmi"))
        self.clock = Clock()
        self.rpc = FakeRpc()
        self.jobs = []
        self.seen = []
        self.health = nodehealth.NodeHealth(self.cfg, self.rpc, self.submit,
                                            self.clock)
        self.health.log = nodehealth.Logger(observer=self.seen.append)
        self.health.start()
        self.addCleanup(self.health.stop)

    def submit(self, ops):
        self.jobs.append(ops)
        return defer.succeed(len(self.jobs))

    def tick(self, n=1):
        for _ in range(n):
            self.clock.advance(self.health.opts.interval)

    def messages(self):
        from twisted.logger import formatEvent
        return [formatEvent(e) for e in self.seen]

    def test_a_lost_node_is_offlined_and_fenced_once(self):
        self.tick()
        self.assertEqual({n for n, _ in self.rpc.calls}, set(NODES[1:]))
        self.rpc.down.add(NODES[2])
        self.tick(2)
        self.assertEqual(self.jobs, [])
        self.tick()
        [ops] = self.jobs
        # fenced first (whatever its offline flag), then marked offline
        self.assertEqual([op["OP_ID"] for op in ops],
                         ["OP_OOB_COMMAND", "OP_NODE_SET_PARAMS"])
        self.assertEqual((ops[0]["command"], ops[0]["node_names"],
                          ops[0]["ignore_status"]),
                         ("power-off", [NODES[2]], True))
        self.assertEqual((ops[1]["node_name"], ops[1]["offline"]),
                         (NODES[2], True))
        self.assertEqual(ops[0]["reason"][0][0], "gnt:watcher:nodehealth")
        self.tick(5)
        self.assertEqual(len(self.jobs), 1)
        # once offline it is no longer checked
        self.cfg.set_node_params(self.cfg.get_node(NODES[2]).uuid,
                                 offline=True, master_candidate=False)
        self.rpc.calls[:] = []
        self.tick()
        self.assertNotIn(NODES[2], {n for n, _ in self.rpc.calls})

    def test_a_node_that_answers_again_is_forgiven(self):
        self.rpc.down.add(NODES[1])
        self.tick(2)
        self.rpc.down.clear()
        self.tick()
        self.rpc.down.add(NODES[1])
        self.tick(2)
        self.assertEqual(self.jobs, [])

    def test_a_node_that_cannot_be_fenced_is_only_reported(self):
        node = self.cfg.get_node(NODES[3])
        self.cfg.set_node_params(node.uuid, ndparams={"oob_program": ""})
        self.rpc.down.add(NODES[3])
        self.tick(4)
        self.assertEqual(self.jobs, [])
        self.assertTrue(any("cannot be fenced" in m
                            for m in self.messages()))

    def test_losing_too_many_nodes_at_once_does_nothing(self):
        # 5 online nodes (the master answers): 3 lost leaves 2 < 2.5
        self.rpc.down.update(NODES[1:4])
        self.tick(4)
        self.assertEqual(self.jobs, [])
        self.assertEqual(sum("may be the one cut off" in m
                             for m in self.messages()), 1)
        # two of them come back: the one still lost is handled
        self.rpc.down.difference_update(NODES[1:3])
        self.tick()
        [ops] = self.jobs
        self.assertEqual(ops[1]["node_name"], NODES[3])

    def test_the_groups_repair_min_healthy_sets_the_share(self):
        # 5 online nodes, one lost leaves 4 answering: enough by default,
        # not once the group asks for 90% of its nodes
        group = self.cfg.get_node(NODES[0]).group
        self.cfg.set_nodegroup_params(group, ndparams={"repair_min_healthy": 0.9})
        self.rpc.down.add(NODES[4])
        self.tick(4)
        self.assertEqual(self.jobs, [])
        self.assertTrue(any("may be the one cut off" in m
                            for m in self.messages()))
        # the cluster's value counts where the group sets none
        self.cfg.set_nodegroup_params(group, ndparams={})
        self.cfg.set_cluster_params(ndparams=dict(
            self.cfg.cluster.ndparams, repair_min_healthy=0.7))
        self.tick()
        [ops] = self.jobs
        self.assertEqual(ops[1]["node_name"], NODES[4])
