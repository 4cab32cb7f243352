"""Incident identity and life cycle (docs/maintd.rst)."""

import itertools

from twisted.trial import unittest

from ganeti import objects
from ganeti.maintd import incidents as I

N1, N2 = "node-uuid-1", "node-uuid-2"
DISK = {"status": "evacuate", "details": {"disk": "sda"}}


class ReconcileTests(unittest.TestCase):

    def setUp(self):
        self.ids = ("inc%d" % i for i in itertools.count(1))
        self.tracked = {}
        self.tags = {N1: set(), N2: set()}

    def look(self, reports):
        res = I.reconcile(self.tracked, reports, self.tags,
                          lambda: next(self.ids))
        for uuid in res.forget:
            del self.tracked[uuid]
        for inc in res.new:
            self.tracked[inc.uuid] = inc
        return res

    def test_same_report_same_incident(self):
        res = self.look({N1: DISK, N2: {"status": "Ok"}})
        [inc] = res.new
        self.assertEqual((inc.uuid, inc.node, inc.action, inc.repair_status,
                          inc.tag),
                         ("inc1", N1, "evacuate", "noted",
                          "maintd:repairready:inc1"))
        # the same object again, keys in another order: the same incident
        res = self.look({N1: {"details": {"disk": "sda"},
                              "status": "evacuate"}})
        self.assertEqual((res.new, res.forget), ([], []))
        # another object is another incident
        res = self.look({N1: dict(DISK, details={"disk": "sdb"})})
        self.assertEqual([i.uuid for i in res.new], ["inc2"])
        # the first is no longer reported and nothing was done: forgotten
        self.assertEqual(res.forget, ["inc1"])

    def test_completed_forgotten_once_untagged_and_unreported(self):
        [inc] = self.look({N1: DISK}).new
        inc.repair_status = objects.INCIDENT_COMPLETED
        self.tags[N1].add(I.ready_tag(inc.uuid))
        self.assertEqual(self.look({}).forget, [])
        self.tags[N1].clear()
        # still reported: kept (and not reported again as new)
        res = self.look({N1: DISK})
        self.assertEqual((res.new, res.forget), ([], []))
        self.assertEqual(self.look({}).forget, [inc.uuid])

    def test_failed_forgotten_when_its_tag_goes_even_if_reported(self):
        [inc] = self.look({N1: DISK}).new
        inc.repair_status = objects.INCIDENT_FAILED
        self.tags[N1].add(I.failed_tag(inc.uuid))
        self.assertEqual(self.look({N1: DISK}).forget, [])
        self.tags[N1].clear()
        res = self.look({N1: DISK})
        # the repair starts over, as a new incident
        self.assertEqual(res.forget, [inc.uuid])
        self.assertEqual([i.uuid for i in res.new], ["inc2"])

    def test_canceled_stays_while_reported(self):
        [inc] = self.look({N1: DISK}).new
        inc.repair_status = objects.INCIDENT_CANCELED
        res = self.look({N1: DISK})
        self.assertEqual((res.new, res.forget), ([], []))
        self.assertEqual(self.look({}).forget, [inc.uuid])

    def test_pending_kept_and_removed_nodes_forgotten(self):
        [inc] = self.look({N1: DISK}).new
        inc.repair_status = objects.INCIDENT_PENDING
        inc.jobs = [4]
        self.assertEqual(self.look({}).forget, [])
        del self.tags[N1]
        self.assertEqual(self.look({}).forget, [inc.uuid])

    def test_ok_is_no_incident(self):
        self.assertEqual(self.look({N1: {"status": "Ok"}}).new, [])


class ActionTests(unittest.TestCase):

    def test_most_invasive_active_action_wins(self):
        incs = {u: objects.Incident(uuid=u, node=N1, action=a,
                                    repair_status=s)
                for u, a, s in (("a", "live-repair", "pending"),
                                ("b", "evacuate-failover", "canceled"),
                                ("c", "evacuate", "noted"))}
        action, mine = I.node_action(incs, N1)
        self.assertEqual((action, sorted(i.uuid for i in mine)),
                         ("evacuate", ["a", "c"]))
        self.assertEqual(I.node_action(incs, N2), ("Ok", []))

    def test_first_failed_job_fails_the_incident(self):
        inc = objects.Incident(uuid="a", node=N1, jobs=[1, 2],
                               repair_status="pending")
        self.assertEqual(I.after_jobs(inc, {1: "success", 2: "running"}),
                         "pending")
        self.assertTrue(I.jobs_running(inc, {1: "success", 2: "running"}))
        self.assertEqual(I.after_jobs(inc, {1: "success", 2: "error"}),
                         "failed")
        self.assertFalse(I.jobs_running(inc, {1: "success", 2: None}))
