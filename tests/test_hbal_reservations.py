"""``hbal -L -X`` against a real master (in this process): the moves of
forthcoming instances (reservations) run as jobs through luxi and change
the configuration only."""

import io
import re

from twisted.internet import defer, threads
from twisted.trial import unittest

from ganeti import objects
from ganeti.htools import hbal

from tests.inprocess import start_master
from tests.test_config import enable_templates
from tests.test_forthcoming_moves import PerNodeRpc

NODES = ["node%d.example.com" % i for i in range(1, 5)]
#: a move in hbal's solution: instance, new primary, new secondary
MOVE = re.compile(r"^ +\d+\. (\S+) \S+:\S+ => (\S+):(\S+) ", re.M)


def prepare(store):
    # drbd first: the nodes report the volume group's space
    enable_templates(store, ["drbd", "plain", "file", "diskless"],
                     volume_group_name="xenvg")
    for i, name in enumerate(NODES[1:], 2):
        store.add_node(objects.Node(name=name, primary_ip="127.0.0.%d" % i))
    n = [store.get_node(name).uuid for name in NODES]
    # three reservations crowd node1 and node2; node3 and node4 are empty
    for i in range(3):
        inst = objects.Instance(
            name="f%d" % i, primary_node=n[0], secondary_nodes=[n[1]],
            hypervisor="fake", admin_state="down", forthcoming=True,
            beparams={"maxmem": 1024, "minmem": 1024, "vcpus": 1})
        store.add_instance(inst, [objects.Disk(dev_type="drbd", size=10240,
                                               iv_name="disk/0")])


class HbalReservationTests(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        self.master, self.client = yield start_master(self, "hbal",
                                                      prepare=prepare)
        # the node daemons, for the nodes' live data
        self.rpc = PerNodeRpc()
        self.master.ctx.rpc = self.rpc

    def hbal(self, *args):
        out, err = io.StringIO(), io.StringIO()
        argv = ["-L", self.master.config.paths.master_socket] + list(args)
        # hbal is a blocking command-line tool: it runs in a thread while
        # the master answers on the reactor
        d = threads.deferToThread(hbal.main, argv, out, err)
        d.addCallback(lambda code: (code, out.getvalue(), err.getvalue()))
        return d

    def placement(self):
        cfg = self.master.cfg
        result = {}
        for inst in cfg.instances.values():
            nodes = [cfg.get_node(n).name for n in inst.all_nodes]
            disks = [[cfg.get_node(n).name for n in d.nodes]
                     for d in cfg.instance_disks(inst)]
            result[inst.name] = (nodes, disks)
        return result

    @defer.inlineCallbacks
    def test_exec_moves_reservations(self):
        code, out, err = yield self.hbal("-X")
        self.assertEqual(code, 0, out + err)
        # where hbal's solution puts each instance (its last move of it)
        planned = {}
        for name, pnode, snode in MOVE.findall(out):
            planned[name] = [pnode, snode]
        self.assertTrue(planned, out)
        self.assertIn("a=r:", out)      # at least one disk move
        placement = self.placement()
        for name, nodes in planned.items():
            self.assertEqual(placement[name], (nodes, [nodes]))
        self.assertIn("Instance %s is forthcoming: only the configuration"
                      " changes" % sorted(planned)[0], out)
        # the nodes were only asked for their free resources
        self.assertEqual(set(self.rpc.procedures()),
                         {"node_info", "all_instances_info"})
        self.assertEqual(self.master.cfg.verify(), [])

    @defer.inlineCallbacks
    def test_balanced_after_one_run(self):
        # our master's dfree already leaves out the reserved disks: read
        # over luxi, they are not taken off a second time, so the plan
        # executed is the whole plan
        code, out, err = yield self.hbal("-X")
        self.assertEqual(code, 0, out + err)
        self.assertTrue(MOVE.findall(out), out)
        code, out, err = yield self.hbal()
        self.assertEqual(code, 0, out + err)
        self.assertEqual(MOVE.findall(out), [], out)
