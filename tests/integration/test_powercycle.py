"""``gnt-node powercycle`` on a virtual cluster whose node daemons manage
their node's daemons: a virtual node is "power-cycled" by its node daemon
restarting in place; the daemons it manages are stopped and started again
(new PIDs), the node reports a new boot id, and it answers again.  The
master is refused without ``--force``."""

from ganeti import daemon_util

from tests.integration.daemons import wait_for
from tests.integration.test_master_failover import ManagedClusterTestCase


class PowercycleTests(ManagedClusterTestCase):

    NODES = 2

    def boot_id(self, client, node):
        result = client.call("QueryFresh", "node", ["bootid"],
                             ["==", "name", node.name])
        ((status, value),), = result["data"]
        return value if status == 0 else None

    def pids(self, node):
        return {d: daemon_util.running_pid(node.paths, d)
                for d in (daemon_util.CONFD, daemon_util.MOND)}

    def test_powercycle_restarts_the_node_daemons(self):
        master, other = self.node(0), self.node(1)
        client = self.client(master)
        for daemon in (daemon_util.CONFD, daemon_util.MOND):
            self.wait_daemon(other, daemon)
        before = self.pids(other)
        master_before = self.pids(master)
        boot = self.boot_id(client, other)
        self.assertTrue(boot)

        # the master: refused without --force, nothing happens
        code, out = self.gnt(master, "gnt-node", "powercycle", "--yes",
                             master.name)
        self.assertNotEqual(code, 0, out)
        self.assertIn("the node is the master and the force parameter was"
                      " not set", out)

        code, out = self.gnt(master, "gnt-node", "powercycle", "--yes",
                             other.name)
        self.assertEqual(code, 0, out)
        self.assertIn("Reboot scheduled in 1 seconds (virtual node: its"
                      " daemons restart)", out)

        def restarted():
            now = self.pids(other)
            return all(now[d] is not None and now[d] != before[d]
                       for d in now)
        wait_for("the daemons of %s restarted" % other.name, restarted,
                 timeout=90)
        # the node answers again, with a new boot id (a reboot to the
        # watcher)
        wait_for("%s answering" % other.name,
                 lambda: self.boot_id(client, other) not in (None, boot),
                 timeout=60)
        self.assertEqual(self.pids(master), master_before)
        # and it can be power-cycled again
        before = self.pids(other)
        code, out = self.gnt(master, "gnt-node", "powercycle", "--yes",
                             other.name)
        self.assertEqual(code, 0, out)
        wait_for("the daemons of %s restarted again" % other.name,
                 restarted, timeout=90)
