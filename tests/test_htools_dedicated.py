"""Dedicated allocation (the lost-allocations metric on node groups with
exclusive storage) in the built-in hail, against the answers recorded
from Ganeti's hail (``tests/fixtures/htools/dedicated``, re-recorded by
its ``record.py``) and, when it is installed, against the real
program."""

import io
import json
import os
import subprocess

from twisted.trial import unittest

from ganeti.htools import alloc as A
from ganeti.htools import cluster, dedicated as D, hspace, iallocator
from ganeti.htools import model as M
from ganeti.htools import text
from ganeti.htools import types as T

from tests import htools_dedicated_cases as C

HAIL = "/usr/lib/ganeti/3.0/usr/lib/ganeti/iallocators/hail"
HSPACE = "/usr/lib/ganeti/3.0/usr/bin/hspace"


def recorded():
    with open(os.path.join(C.HERE, "answers.json")) as f:
        return json.load(f)


def load(name):
    return cluster.finalize(text.load_text_file(C.cluster_path(name)))


def answer(case):
    return iallocator.answer(C.document(case), params=C.params(case))


def replay(case, result):
    """Place a multi-allocate answer's instances in order with every
    check on: None if they all fit, else (instance, failure)."""
    cd, req = iallocator.load(C.document(case))
    bodies = {r["name"]: r for r in req["instances"]}
    ctx = A.Context(cd)
    for name, nodes in result[0]:
        inst = iallocator.new_instance(bodies[name], name, cd)
        ctx.attach(inst)
        pdx = cd.node_by_name[nodes[0]].idx
        sdx = cd.node_by_name[nodes[1]].idx if len(nodes) > 1 \
            else M.NO_SECONDARY
        f = cd.nodes[pdx].add_pri(inst)
        if f is None and sdx != M.NO_SECONDARY:
            f = cd.nodes[sdx].add_sec(inst, pdx)
        if f is not None:
            return name, f
        inst.pnode, inst.snode = pdx, sdx
    return None


class DecisionTests(unittest.TestCase):
    """When the lost-allocations metric is used, and its parts."""

    def test_dedicated_when_every_node_of_the_groups_is_exclusive(self):
        self.assertTrue(D.is_dedicated(load("single")))
        mixed = load("mixed")
        self.assertFalse(D.is_dedicated(mixed))
        self.assertTrue(D.is_dedicated(mixed, "group1"))
        self.assertFalse(D.is_dedicated(mixed, "group2"))
        # Ganeti compares names only: a UUID or an unknown name selects
        # no group, and the condition holds trivially
        self.assertTrue(D.is_dedicated(
            mixed, "00000002-0000-4000-8000-000000000002"))
        self.assertTrue(D.is_dedicated(mixed, "nosuch"))
        # an unallocable group does not count without a requested group
        self.assertTrue(D.is_dedicated(load("unallocable_mixed")))
        self.assertFalse(D.is_dedicated(load("unallocable_mixed"),
                                        "group2"))

    def test_test_instances_largest_disk_first(self):
        pol = load("quarters").groups[0].ipolicy
        self.assertEqual([s.disk_size for s in D.test_specs(pol)],
                         [1048000, 524000, 262000])
        a = T.ISpec(512, 1, 2048, 1, 1, 1)
        b = T.ISpec(1024, 2, 2048, 1, 1, 1)
        c = T.ISpec(128, 1, 4096, 1, 1, 1)
        pol = T.IPolicy(((a, a), (b, b), (c, c)), a, ("plain",), 4.0, 32.0)
        # equal disk sizes keep the policy's order
        self.assertEqual(D.test_specs(pol), (c, a, b))

    def test_fit_count_equals_adding_copies_one_by_one(self):
        checked = 0
        for name in ("single", "crowded", "offline", "quarters"):
            cd = load(name)
            for nd in cd.nodes:
                for spec in D.test_specs(nd.ipolicy):
                    saved = nd.save()
                    one = D._copies(spec, 1)
                    n = 0
                    while nd.add_pri(one) is None:
                        n += 1
                    nd.restore(saved)
                    self.assertEqual(D.fit_count(nd, spec), n,
                                     (name, nd.name, spec))
                    # and the node is left as it was
                    self.assertEqual(nd.save(), saved)
                    checked += 1
        self.assertGreater(checked, 60)

    def test_metric_is_shown_as_ganeti_shows_it(self):
        self.assertEqual(D.format_metric(((0, 1, 2), 1974272)),
                         "([0,1,2],1974272)")
        self.assertEqual(D.format_metric(((-1,), 5)), "([-1],5)")


class RecordedAnswersTests(unittest.TestCase):

    def test_answers_equal_hails_recorded_answers(self):
        n = 0
        for key, case in sorted(recorded().items()):
            if case["deviation"]:
                continue
            self.assertEqual(answer(case), case["answer"], key)
            n += 1
        self.assertGreater(n, 100)

    def test_dedicated_groups_use_the_metric_others_the_score(self):
        rec = recorded()

        def score(key):
            info = answer(rec[key])["info"]
            return info.split("score: ", 1)[1].split(",", 1)[0]
        self.assertTrue(score("single/drbd-small").startswith("(["))
        self.assertTrue(score("mixed/plain-small-group1").startswith("(["))
        # the mixed cluster without a group, and its group without
        # exclusive storage, keep the cluster score
        float(score("mixed/plain-small-None"))
        float(score("mixed/drbd-small-group2"))

    def test_ganetis_example(self):
        """A quarter-node instance prefers the three-quarter-filled node
        (nothing left over), then the quarter-filled one; a half-node
        instance the half-filled one.  The cluster score would have
        chosen the empty node."""
        rec = recorded()
        for key, node in (("quarters/plain-quarter", "node4"),
                          ("quarters/plain-quarter-no-node4", "node2"),
                          ("quarters/plain-half", "node3")):
            self.assertEqual(answer(rec[key])["result"], [node], key)
        cd, req = iallocator.load(C.document(rec["quarters/plain-quarter"]))
        inst = iallocator.new_instance(req, "request", cd)
        sol = A.allocate(A.Context(cd), inst, 1)
        self.assertEqual(cd.nodes[sol.best[1]].name, "node1")

    def test_multi_allocate_with_a_group_sees_earlier_placements(self):
        """Ganeti's hail computes every instance of a multi-allocate
        request naming a group against the cluster before the request:
        all go where the first went, beyond the nodes' capacity.  Each
        instance here sees the ones placed before it."""
        cases = [(k, c) for k, c in sorted(recorded().items())
                 if c["deviation"]]
        self.assertEqual(len(cases), 6)
        for key, case in cases:
            theirs = case["answer"]["result"]
            ours = answer(case)
            self.assertTrue(ours["success"], key)
            self.assertEqual(ours["result"][0][0], theirs[0][0], key)
            self.assertEqual({tuple(n) for _i, n in theirs[0]},
                             {tuple(theirs[0][0][1])}, key)
            self.assertIsNotNone(replay(case, theirs), key)
            self.assertIsNone(replay(case, ours["result"]), key)
            # what does not fit any more is reported, as Ganeti does it
            for _name, why in ours["result"][1]:
                self.assertTrue(why.startswith("No valid allocation"), why)

    def test_failures_are_counted_per_candidate(self):
        ans = answer(recorded()["crowded/drbd-large"])
        self.assertFalse(ans["success"])
        # 8 nodes: 56 pairs, each failing once
        counts = [int(x.split(": ")[1])
                  for x in ans["info"].split("reasons: ")[1].split(", ")]
        self.assertEqual(sum(counts), 56)


def run_hspace(args):
    out, err = io.StringIO(), io.StringIO()
    rc = hspace.main(args, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


class HspaceTests(unittest.TestCase):
    """Ganeti's hspace places with the cluster score also on dedicated
    clusters; so does ours."""

    def args(self):
        return ["-t", C.cluster_path(C.HSPACE_CLUSTER)] + C.HSPACE_ARGS

    def test_hspace_keeps_the_score_on_dedicated_clusters(self):
        prefix = self.mktemp()
        rc, out, err = run_hspace(self.args() + ["--machine-readable",
                                                 "-S", prefix])
        self.assertEqual(rc, 0, err)
        with open(os.path.join(C.HERE, "hspace-larger.out")) as f:
            self.assertEqual(out, f.read())
        with open(prefix + ".standard") as f:
            ours = [ln for ln in f.read().split("\n\n")[2].splitlines()
                    if ln.startswith("new-")]
        with open(os.path.join(C.HERE, "hspace-larger.placed")) as f:
            theirs = f.read().splitlines()
        self.assertEqual(ours, theirs)
        self.assertGreater(len(ours), 3)
        # the lost-allocations metric would have started elsewhere
        cd = load(C.HSPACE_CLUSTER)
        first = ours[0].split("|")
        inst = M.Instance("new-0", int(first[1]), int(first[2]),
                          int(first[3]), "running", [], True, -1, -1,
                          "plain", 1, disk_spindles=[int(first[11])],
                          disk_sizes=[int(first[2])])
        sol = D.allocate(A.Context(cd), inst, 1)
        self.assertNotEqual(cd.nodes[sol.best[1]].name, first[6])


class LiveDedicatedHailTests(unittest.TestCase):
    """The recorded requests given to Ganeti's hail and hspace, when
    they are installed."""

    def setUp(self):
        if not os.access(HAIL, os.X_OK):
            raise unittest.SkipTest("Ganeti's hail is not installed")

    def hail(self, case):
        p = subprocess.run([HAIL, "-"] + ["--" + x for x in case["params"]],
                           input=json.dumps(C.document(case)),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_same_answers_as_hail(self):
        n = 0
        for key, case in sorted(C.cases().items()):
            if case["deviation"] or case["cluster"] not in (
                    "single", "mixed", "quarters", "two_groups"):
                continue
            self.assertEqual(answer(case), self.hail(case), key)
            n += 1
        self.assertGreater(n, 40)

    def test_same_hspace_output(self):
        if not os.access(HSPACE, os.X_OK):
            raise unittest.SkipTest("Ganeti's hspace is not installed")
        args = self.args() + ["--machine-readable"]
        real = subprocess.run([HSPACE] + args, capture_output=True,
                              text=True, timeout=120)
        self.assertEqual(real.returncode, 0, real.stderr)
        self.assertEqual(run_hspace(args)[1], real.stdout)

    args = HspaceTests.args
