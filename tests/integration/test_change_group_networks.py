"""Changing an instance's node group with its NIC on a network, through
the real daemons and the cluster's default allocator: two nodes, each in
its own group; ``gnt-instance change-group`` is refused while the other
group is not connected to the instance's network (the job fails, no move
is submitted), and asks the allocator for a plan into that group once it
is."""

from tests.integration.test_migration import ClusterTestCase

INSTANCE = "inst1.example.com"


class ChangeGroupNetworkTests(ClusterTestCase):

    NODES = 2

    def test_change_group_needs_the_network(self):
        node1 = self.node(0)
        rack2 = [self.node(1).name]
        self.run_job({"OP_ID": "OP_GROUP_ADD", "group_name": "rack2"})
        self.run_job({"OP_ID": "OP_GROUP_ASSIGN_NODES",
                      "group_name": "rack2", "nodes": rack2})
        self.run_job({"OP_ID": "OP_NETWORK_ADD", "network_name": "net1",
                      "network": "192.0.2.0/28", "gateway": "192.0.2.1"})
        connect = {"OP_ID": "OP_NETWORK_CONNECT", "network_name": "net1",
                   "group_name": "default", "network_mode": "bridged",
                   "network_link": "br0"}
        self.run_job(connect)
        self.create(template="diskless", no_install=True,
                    nics=[{"network": "net1", "ip": "pool"}],
                    ignore_ipolicy=True)
        jobs_before = self.client.call("QueryJobs", None, ["id"])

        code, out = self.gnt("gnt-instance", "change-group", INSTANCE)
        self.assertNotEqual(code, 0, out)
        self.assertIn("No target node group is connected to network net1,"
                      " which instance %s uses" % INSTANCE, out)
        code, out = self.gnt("gnt-instance", "change-group", "--to",
                             "rack2", INSTANCE)
        self.assertNotEqual(code, 0, out)
        self.assertIn("target_groups: node group rack2 is not connected to"
                      " network net1", out)
        # two failed jobs, nothing else submitted
        self.assertEqual(len(self.client.call("QueryJobs", None, ["id"])),
                         len(jobs_before) + 2)
        self.assertEqual(self.query()["pnode"], node1.name)

        self.run_job(dict(connect, group_name="rack2"))
        # now the allocator is asked, with rack2 as the target (a plan,
        # nothing run: whether this one-node group can take the instance
        # is the allocator's business)
        out = self.ok("gnt-instance", "change-group", "--dry-run", INSTANCE)
        self.assertNotIn("not connected", out)
        self.assertIn("Asking iallocator", out)
        self.assertIn("rack2", out)
        self.assertEqual(self.query()["pnode"], node1.name)
