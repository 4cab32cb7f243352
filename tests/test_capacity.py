"""The master admits against what the nodes report, minus reservations:
the logical units' checks, and that they agree with node queries."""

from ganeti import errors
from ganeti import query
from ganeti.query.rpclive import RpcLiveData

from tests.test_cmdlib_instance import NODE1, NODE2, create_op
from tests.test_migration import MigrationTestCase


class AdmissionTests(MigrationTestCase):

    def node_field(self, node, field):
        ctx = query.QueryContext(self.cfg, live=RpcLiveData(
            self.cfg, self.rpc))
        answer = self.successResultOf(ctx.query("node", ["name", field]))
        return dict((row[0][1], row[1][1]) for row in answer["data"])[node]

    def test_create_admits_exactly_what_the_node_query_reports(self):
        self.rpc.memory_free = 3000
        self.create("stopped.example.com", beparams={"memory": 1000},
                    start=False)
        # reported free 3000, 1000 reserved for the stopped instance
        self.assertEqual(self.node_field(NODE1, "mfree"), 3000)
        self.assertEqual(self.node_field(NODE1, "reserved.mem"), 1000)
        avail = self.node_field(NODE1, "avail.mem")
        self.assertEqual(avail, 2000)
        before = self.cfg.to_dict()
        err = self.fails(create_op("big.example.com",
                                   beparams={"memory": avail + 4}))
        self.assertEqual(err.args[1], errors.ECODE_NORES)
        self.assertIn("Not enough memory on node %s for instance"
                      " big.example.com: needed 2004 MiB, available 2000 MiB"
                      " (free 3000 MiB, 1000 MiB reserved for stopped and"
                      " forthcoming instances)" % NODE1, str(err))
        self.assertEqual(self.cfg.to_dict(), before)
        self.ok(create_op("big.example.com", beparams={"memory": avail}))

    def test_forthcoming_disks_count_as_used(self):
        self.rpc.disk_free = 5000
        self.ok(create_op("", forthcoming=True, os_type=None,
                          disks=[{"size": 3000}]))
        self.assertEqual(self.node_field(NODE1, "dfree"), 2000)
        self.assertEqual(self.node_field(NODE1, "reserved.disk"), 3000)
        err = self.fails(create_op(disks=[{"size": 2048}]))
        self.assertIn("Not enough disk on node %s for instance"
                      " inst1.example.com: needed 2048 MiB, available 2000"
                      " MiB (3000 MiB reserved for forthcoming instances)"
                      % NODE1, str(err))
        self.ok(create_op(disks=[{"size": 2000}]))

    def test_a_node_without_live_data_admits_nothing(self):
        self.rpc.fail[(NODE1, "node_info")] = "connection refused"
        before = self.cfg.to_dict()
        err = self.fails(create_op())
        self.assertEqual(err.args[1], errors.ECODE_ENVIRON)
        self.assertIn("Cannot check the free disk of node %s for instance"
                      " inst1.example.com: node %s gave no live data"
                      " (unreachable, or its node daemon failed to answer)"
                      % (NODE1, NODE1), str(err))
        self.assertEqual(self.cfg.to_dict(), before)

    def test_migration_target_counts_its_reservations(self):
        self.create_shared()
        self.rpc.memory_free = 4096
        # a stopped instance on node2 holds 3900 MiB there
        self.create("held.example.com", pnode=NODE2,
                    beparams={"memory": 3900}, start=False)
        err = self.fails(self.migrate(target_node=NODE2))
        self.assertIn("Not enough memory on node %s for migrating instance"
                      " inst1.example.com: needed 256 MiB, available 196 MiB"
                      " (free 4096 MiB, 3900 MiB reserved for stopped and"
                      " forthcoming instances)" % NODE2, str(err))
        self.ok({"OP_ID": "OP_INSTANCE_REMOVE",
                 "instance_name": "held.example.com"})
        self.ok(self.migrate(target_node=NODE2))
        self.assertEqual(self.inst().primary_node, self.node(NODE2))
