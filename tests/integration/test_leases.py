"""A reservation with a lease, end to end: ``gnt-instance add --forthcoming
--lease-until +Ns`` against real daemons (one-node cluster on a random
127.x address); when the lease ends the master removes the reservation by
itself, the node's reserved memory is free again, and the removal job's
reason trail says why."""

import time

from twisted.trial import unittest

from ganeti import leases

from tests import ganeti_peer
from tests.integration.daemons import FINAL, wait_for
from tests.integration.test_cli import NODE, ClusterTestCase

#: seconds the test's lease lasts (long enough for the checks made
#: before it ends, also on a loaded machine)
LEASE = 10


class LeaseTests(ClusterTestCase):

    def reserved_mem(self):
        out = self.ok("gnt-node", "list", "--no-headers", "--units", "m",
                      "-o", "name,reserved.mem", NODE)
        return out.split()[1]

    def instances(self):
        return self.ok("gnt-instance", "list", "--no-headers", "-o",
                       "name").split()

    def test_lease_ends_and_reservation_is_released(self):
        self.init()
        before = self.reserved_mem()
        start = time.time()
        code, out = self.gnt(
            "gnt-instance", "add", "--forthcoming", "-t", "file", "-n", NODE,
            "-s", "1G", "-B", "maxmem=256M,minmem=256M", "--no-name-check",
            "--no-ip-check", "--lease-until", "+%ds" % LEASE, "res1")
        if code != 0 and "OP_INSTANCE_CREATE is not implemented" in out:
            raise unittest.SkipTest("instance logical units not available")
        self.assertEqual(code, 0, out)
        out = self.ok("gnt-instance", "list", "--no-headers",
                      "--separator=|", "-o",
                      "name,lease_until,lease_state", "res1")
        name, until, state = out.strip().split("|")
        # a lease of a few seconds is within the warning window at once
        self.assertEqual((name, state), ("res1", "expiring"))
        self.assertIn(time.strftime("%Y", time.localtime(start)), until)
        self.assertEqual(self.reserved_mem(), "256")
        # bad input: named, nothing changed
        code, out = self.gnt("gnt-instance", "modify", "--lease-until",
                             "2001-01-01T00:00:00Z", "res1")
        self.assertNotEqual(code, 0)
        self.assertIn("--lease-until", out)
        self.assertIn("in the past", out)

        wait_for("the reservation removed when its lease ended",
                 lambda: "res1" not in self.instances(), timeout=60)
        self.assertGreaterEqual(time.time() - start, LEASE - 1)
        self.assertEqual(self.reserved_mem(), before)

        client = self.client()
        rows = client.call("QueryJobs", None, ["id", "status", "ops"])
        removals = [(job_id, status, op) for job_id, status, ops in rows
                    for op in ops if op["OP_ID"] == "OP_INSTANCE_REMOVE"]
        self.assertEqual(len(removals), 1, rows)
        job_id, status, op = removals[0]
        wait_for("the removal job done", lambda: client.call(
            "QueryJobs", [job_id], ["status"])[0][0] in FINAL)
        self.assertEqual(client.call("QueryJobs", [job_id], ["status"]),
                         [["success"]])
        trail = [entry for entry in op["reason"]
                 if entry[0] == leases.REASON_SOURCE]
        self.assertEqual(len(trail), 1, op["reason"])
        self.assertIn("lease expired", trail[0][1])

    def test_ganeti_clients_with_a_leased_reservation(self):
        """Ganeti's own gnt-instance reads a cluster with a lease (its
        lease fields are ours, the tag is a tag), and its add-tags meets
        the reserved namespace."""
        ganeti_peer.skip_unless_available()
        self.init()
        self.ok("gnt-instance", "add", "--forthcoming", "-t", "file", "-n",
                NODE, "-s", "1G", "--no-name-check", "--no-ip-check",
                "--lease-until", "+1d", "res1")
        code, out = ganeti_peer.run_tool(
            "gnt-instance", ["list", "--no-headers", "--separator=|", "-o",
                             "name,tags,lease_state"], self.root, NODE,
            timeout=60)
        self.assertEqual(code, 0, out)
        name, tags, state = out.strip().split("|")
        self.assertEqual((name, state), ("res1", "active"))
        self.assertTrue(tags.startswith(leases.TAG_PREFIX), tags)
        code, out = ganeti_peer.run_tool(
            "gnt-instance", ["add-tags", "res1", "lease:until:1"],
            self.root, NODE, timeout=60)
        self.assertNotEqual(code, 0, out)
        self.assertIn("--lease-until", out)
