"""OP_CLUSTER_DESTROY: the LU refuses while another node or any instance
(forthcoming ones too) exists, naming them, and otherwise returns the
master node's UUID (what Ganeti 3.0 returns).  ``gnt-cluster destroy``
end to end: tests/integration/test_cluster_destroy.py.
"""

from ganeti import cmdlib
from ganeti import errors
from ganeti import mcpu
from ganeti import objects
from ganeti import opcodes

from tests.fakes import ClockTestCase
from tests.test_config import make_store


class DestroyLUTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.cfg = make_store(self, file_storage_dir="/srv/ganeti/fs")
        self.glm = mcpu.make_lock_manager(self.cfg, self.clock)
        self.proc = mcpu.Processor(mcpu.MasterContext(
            cfg=self.cfg, glm=self.glm, clock=self.clock),
            cmdlib.LOGICAL_UNITS)
        self.log = []

    def run_op(self):
        return self.proc.execute(1, 0, opcodes.OpClusterDestroy(),
                                 self.log.append)

    def refused(self):
        return self.failureResultOf(self.run_op(), errors.OpPrereqError).value

    def test_empty_one_node_cluster(self):
        result = self.successResultOf(self.run_op())
        self.assertEqual(result, self.cfg.cluster.master_node)
        self.assertIn("The cluster can be destroyed; its master node is"
                      " node1.example.com", self.log)

    def test_refused_with_other_nodes(self):
        for i in (2, 3):
            self.cfg.add_node(objects.Node(name="node%d.example.com" % i,
                                           primary_ip="127.0.0.%d" % i))
        err = self.refused()
        self.assertIn("There are still 2 node(s) in this cluster besides the"
                      " master: node2.example.com, node3.example.com",
                      str(err))
        self.assertEqual(err.args[1], errors.ECODE_INVAL)

    def test_refused_with_instances(self):
        master = self.cfg.cluster.master_node
        self.cfg.add_instance(objects.Instance(
            name="web.example.com", primary_node=master, os="busybox",
            hypervisor="fake", beparams={"maxmem": 128, "minmem": 128}))
        self.cfg.add_instance(objects.Instance(
            forthcoming=True, name="res.example.com", primary_node=master,
            beparams={"maxmem": 128}))
        err = self.refused()
        self.assertIn("There are still 2 instance(s) in this cluster:"
                      " res.example.com (forthcoming), web.example.com",
                      str(err))
