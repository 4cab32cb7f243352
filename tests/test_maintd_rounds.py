"""Round planning: conflict-free sets of jobs, evacuations first, then
auto-repairs away from them, then balancing on what is left."""

from twisted.trial import unittest

from ganeti.maintd import rounds as R


def task(kind, nodes, instances=(), what=None):
    return R.Task(kind, (), nodes, instances,
                  what=what or "%s %s" % (kind, "+".join(sorted(nodes))))


class PlanTests(unittest.TestCase):

    def test_first_fitting_evacuation_step_per_node(self):
        rnd = R.plan({
            "n1": [task("evacuation", {"n1", "n3"}, {"a"}),
                   task("evacuation", {"n1", "n4"}, {"b"})],
            "n2": [task("evacuation", {"n2", "n3"}, {"c"}),
                   task("evacuation", {"n2", "n5"}, {"d"})]})
        self.assertEqual([t.instances for t in rnd.tasks],
                         [frozenset("a"), frozenset("d")])
        # nothing taken touches a node twice
        seen = set()
        for t in rnd.tasks:
            self.assertFalse(t.nodes & seen)
            seen |= t.nodes
        self.assertEqual(len(rnd.deferred), 1)
        self.assertIn("conflicts with", rnd.deferred[0][1])

    def test_repairs_stay_off_nodes_under_repair(self):
        rnd = R.plan({"n1": [task("evacuation", {"n1", "n2"}, {"a"})]},
                     repairs=[task("auto-repair", {"n2", "n5"}, {"b"}),
                              task("auto-repair", {"n6", "n7"}, {"c"}),
                              task("auto-repair", {"n7", "n8"}, {"d"})])
        self.assertEqual(sorted(i for t in rnd.tasks for i in t.instances),
                         ["a", "c"])
        reasons = sorted(why for _, why in rnd.deferred)
        self.assertEqual(reasons[1], "touches a node under repair")
        self.assertTrue(reasons[0].startswith("conflicts with"))

    def test_balancing_on_the_remaining_nodes_only(self):
        rnd = R.plan({"n1": [task("evacuation", {"n1", "n2"}, {"a"})]},
                     repairs=[task("auto-repair", {"n3"}, {"b"})],
                     balancing=[task("balancing", {"n3", "n4"}, {"c"}),
                                task("balancing", {"n5", "n6"}, {"d"}),
                                task("balancing", {"n7", "n9"}, {"e"}),
                                task("balancing", {"n8", "n4"}, {"f"})],
                     blocked_nodes={"n9"})
        self.assertEqual(sorted(i for t in rnd.tasks for i in t.instances),
                         ["a", "b", "d", "f"])

    def test_same_instance_twice_is_a_conflict(self):
        rnd = R.plan({}, repairs=[task("auto-repair", {"n1"}, {"a"}),
                                  task("auto-repair", {"n2"}, {"a"})])
        self.assertEqual(len(rnd.tasks), 1)

    def test_balancing_moves_beyond_the_cap_wait(self):
        moves = [task("balancing", {"n%d" % i, "n%d" % (i + 10)}, {str(i)})
                 for i in range(4)]
        # the conflicting move does not use up the allowance
        moves.insert(1, task("balancing", {"n0", "n9"}, {"x"}))
        rnd = R.plan({}, balancing=moves, max_balancing=2)
        self.assertEqual([t.instances for t in rnd.tasks],
                         [frozenset("0"), frozenset("1")])
        why = [w for _, w in rnd.deferred]
        self.assertEqual(len(why), 3)
        self.assertIn("conflicts with", why[0])
        self.assertEqual(sum("hourly cap" in w for w in why), 2)
        rnd = R.plan({}, balancing=moves, max_balancing=None)
        self.assertEqual(len(rnd.tasks), 4)
