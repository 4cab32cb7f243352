"""Allocation (the built-in hail) and capacity planning (hspace),
against answers recorded from Ganeti's hail and hspace and, when they
are installed, against the real programs."""

import io
import json
import os
import re
import subprocess

from twisted.trial import unittest

from ganeti.htools import alloc as A
from ganeti.htools import hail, hspace, iallocator, text

from tests import htools_requests as R
from tests.htools_alloc_requests import REQS

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "htools")
EXPECTED = os.path.join(FIXTURES, "expected")
GANETI = "/usr/lib/ganeti/3.0/usr"
HAIL = GANETI + "/lib/ganeti/iallocators/hail"
HSPACE = GANETI + "/bin/hspace"


def cluster_doc(name, req):
    cd = text.load_text_file(os.path.join(FIXTURES, name + ".txt"))
    return R.request_for(cd, req)


def recorded_hail():
    with open(os.path.join(EXPECTED, "hail-answers.json")) as f:
        return json.load(f)


def score_of(ans):
    m = re.search(r"score: ([0-9.]+)", ans["info"])
    return float(m.group(1)) if m else None


class IAllocatorModesTests(unittest.TestCase):
    """Every mode, same request as Ganeti's hail got."""

    def test_answers_equal_hails_recorded_answers(self):
        rec = recorded_hail()
        for cl, reqs in REQS.items():
            for name, req in reqs.items():
                key = "%s/%s" % (cl, name)
                ours = iallocator.answer(cluster_doc(cl, req))
                self.assertEqual(ours, rec[key], key)

    def test_allocate_score_no_worse_than_hail(self):
        rec = recorded_hail()
        for key, theirs in rec.items():
            if "/alloc-" not in key or not theirs["success"]:
                continue
            cl, name = key.split("/")
            ours = iallocator.answer(cluster_doc(cl, REQS[cl][name]))
            self.assertTrue(ours["success"], key)
            self.assertLessEqual(score_of(ours), score_of(theirs) + 1e-8,
                                 key)

    def test_pruned_pair_search_finds_the_exhaustive_optimum(self):
        doc = cluster_doc("gen50", REQS["gen50"]["alloc-drbd"])
        full = iallocator.answer(doc)
        pruned = iallocator.answer(doc, A.AllocOptions(exhaustive_pairs=0))
        self.assertEqual(pruned["result"], full["result"])
        self.assertEqual(score_of(pruned), score_of(full))
        # the failure counts are exact in both
        self.assertEqual(pruned["info"], full["info"])

    def test_failure_reasons_counted_per_candidate(self):
        ans = iallocator.answer(cluster_doc(
            "tiny", R.alloc_request("big", 1024000, 1024, 1, "drbd")))
        self.assertFalse(ans["success"])
        self.assertIn("No valid allocation solutions, failure reasons:"
                      " FailMem: 6", ans["info"])
        self.assertEqual(ans["result"], [])

    def test_restrict_to_nodes(self):
        ans = iallocator.answer(cluster_doc(
            "tiny", R.alloc_request("r", 512, 1024, 1, "plain",
                                    restrict=["node1"])))
        self.assertEqual(ans["result"], ["node1"])

    def test_policy_disk_templates_are_enforced(self):
        ans = iallocator.answer(cluster_doc(
            "tiny", R.alloc_request("r", 512, 1024, 1, "file")))
        self.assertFalse(ans["success"])
        self.assertIn("FailDisk: 3", ans["info"])

    def test_offline_nodes_get_nothing(self):
        doc = cluster_doc("tiny", R.alloc_request("r", 512, 1024, 1,
                                                  "plain"))
        for n in ("node2", "node3"):
            doc["nodes"][n]["offline"] = True
        # instances on offline nodes break global N+1: check placement only
        ans = iallocator.answer(doc, A.AllocOptions(capacity=False))
        self.assertEqual(ans["result"], ["node1"])
        self.assertIn("successes 1,", ans["info"])

    def test_unallocable_group_is_never_used(self):
        doc = cluster_doc("tiny", R.alloc_request("r", 512, 1024, 1,
                                                  "plain"))
        for g in doc["nodegroups"].values():
            g["alloc_policy"] = "unallocable"
        ans = iallocator.answer(doc)
        self.assertFalse(ans["success"])


class LiveHailTests(unittest.TestCase):
    """The same requests to Ganeti's hail, when it is installed."""

    def setUp(self):
        if not os.access(HAIL, os.X_OK):
            raise unittest.SkipTest("Ganeti's hail is not installed")

    def hail(self, doc):
        p = subprocess.run([HAIL, "-"], input=json.dumps(doc),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_every_mode_on_the_small_cluster(self):
        for name, req in REQS["tiny"].items():
            doc = cluster_doc("tiny", req)
            self.assertEqual(iallocator.answer(doc), self.hail(doc), name)

    def test_allocation_in_two_groups(self):
        for dt in ("plain", "drbd"):
            doc = cluster_doc("mixed", R.alloc_request("n", 256, 1024, 1,
                                                       dt))
            theirs = self.hail(doc)
            ours = iallocator.answer(doc)
            self.assertEqual(ours["success"], theirs["success"], dt)
            if theirs["success"]:
                self.assertLessEqual(score_of(ours),
                                     score_of(theirs) + 1e-8, dt)


class MalformedRequestTests(unittest.TestCase):

    def base(self):
        return cluster_doc("tiny", R.alloc_request("n", 512, 1024, 1,
                                                   "plain"))

    def assertRejected(self, doc, *words):
        ans = iallocator.answer(doc)
        self.assertFalse(ans["success"])
        self.assertEqual(ans["result"], [])
        for w in words:
            self.assertIn(w, ans["info"])

    def test_missing_and_wrong_fields_are_named(self):
        doc = self.base()
        del doc["request"]["memory"]
        self.assertRejected(doc, "'memory'", "missing")
        doc = self.base()
        doc["request"]["vcpus"] = "two"
        self.assertRejected(doc, "'vcpus'", "integer")
        doc = self.base()
        doc["request"]["type"] = "explode"
        self.assertRejected(doc, "explode", "invalid type")
        doc = self.base()
        del doc["nodes"]["node2"]["free_memory"]
        self.assertRejected(doc, "node2", "free_memory")
        doc = self.base()
        del doc["nodegroups"]
        self.assertRejected(doc, "nodegroups")
        self.assertRejected([], "JSON object")
        doc = self.base()
        doc["request"] = {"type": "relocate", "name": "nosuch",
                          "relocate_from": [], "required_nodes": 1}
        self.assertRejected(doc, "unknown instance 'nosuch'")

    def test_hail_command_exit_codes(self):
        out, err = io.StringIO(), io.StringIO()
        rc = hail.main(["-"], out=out, err=err,
                       stdin=io.StringIO(json.dumps(self.base())))
        self.assertEqual(rc, 0)
        ans = json.loads(out.getvalue())
        self.assertTrue(ans["success"])
        self.assertEqual(out.getvalue().count("\n"), 1)
        out, err = io.StringIO(), io.StringIO()
        rc = hail.main(["-"], out=out, err=err,
                       stdin=io.StringIO("{not json"))
        self.assertEqual(rc, 1)
        self.assertEqual(out.getvalue(), "")
        self.assertIn("Error", err.getvalue())
        doc = self.base()
        del doc["nodes"]["node1"]["group"]
        out, err = io.StringIO(), io.StringIO()
        rc = hail.main(["-"], out=out, err=err,
                       stdin=io.StringIO(json.dumps(doc)))
        self.assertEqual(rc, 1)
        self.assertIn("'group'", err.getvalue())


HSPACE_CASES = {
    "hspace-tiny-plain.out": ["-t", "tiny.txt",
                              "--standard-alloc=10240,1024,1",
                              "--tiered-alloc=20480,4096,2",
                              "--disk-template=plain",
                              "--no-capacity-checks"],
    "hspace-gen50-plain.out": ["-t", "gen50.txt",
                               "--standard-alloc=20480,2048,2",
                               "--tiered-alloc=20480,4096,2",
                               "--disk-template=plain",
                               "--no-capacity-checks"],
}


def run_hspace(args):
    args = [os.path.join(FIXTURES, a) if a.endswith(".txt") else a
            for a in args]
    out, err = io.StringIO(), io.StringIO()
    rc = hspace.main(args + ["--machine-readable"], out=out, err=err)
    return rc, out.getvalue()


class HspaceTests(unittest.TestCase):

    def test_machine_readable_output_equals_ganetis(self):
        for fname, args in HSPACE_CASES.items():
            with open(os.path.join(EXPECTED, fname)) as f:
                expected = f.read()
            rc, got = run_hspace(args)
            self.assertEqual(rc, 0)
            self.assertEqual(got, expected, fname)

    def test_standard_allocation_with_capacity_checks_and_default_spec(self):
        with open(os.path.join(EXPECTED, "hspace-tiny-drbd.out")) as f:
            expected = f.read()
        rc, got = run_hspace(["-t", "tiny.txt"])
        self.assertEqual(rc, 0)

        def standard(s):
            return [ln for ln in s.splitlines()
                    if re.match(r"HTS_(CLUSTER|INI|SPEC|FIN|ALLOC|OK)", ln)]
        self.assertEqual(standard(got), standard(expected))
        self.assertIn("HTS_ALLOC_INSTANCES=45", got)

    def test_human_output(self):
        out, err = io.StringIO(), io.StringIO()
        rc = hspace.main(["-t", os.path.join(FIXTURES, "tiny.txt"),
                          "--standard-alloc=10240,1024,1",
                          "--disk-template=drbd"], out=out, err=err)
        self.assertEqual(rc, 0)
        s = out.getvalue()
        self.assertIn("The cluster has 3 nodes and the following"
                      " resources:\n  MEM 98304, DSK 1536000, CPU 24,"
                      " VCPU 96.\n", s)
        self.assertIn("  -  45 instances allocated\n", s)
        self.assertIn("  - most likely failure reason: FailDisk\n", s)

    def test_bad_spec_is_an_error(self):
        out, err = io.StringIO(), io.StringIO()
        rc = hspace.main(["-t", os.path.join(FIXTURES, "tiny.txt"),
                          "--standard-alloc=1,2"], out=out, err=err)
        self.assertEqual(rc, 1)
        self.assertIn("disk,ram,cpu", err.getvalue())

    def test_live_cross_check(self):
        if not os.access(HSPACE, os.X_OK):
            raise unittest.SkipTest("Ganeti's hspace is not installed")
        args = HSPACE_CASES["hspace-tiny-plain.out"]
        real = subprocess.run(
            [HSPACE] + [os.path.join(FIXTURES, a) if a.endswith(".txt")
                        else a for a in args] + ["--machine-readable"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(real.returncode, 0)
        self.assertEqual(run_hspace(args)[1], real.stdout)


class IncrementalCapacityCheckTests(unittest.TestCase):
    """The N+1 check after a candidate placement, re-checking only the
    evacuations that relied on its nodes, agrees with the full check."""

    def test_agrees_with_the_full_check(self):
        from ganeti.htools import capacity, cluster, generate
        from ganeti.htools import model as M
        from ganeti.htools.alloc import _Applied
        checked = disagree = 0
        outcomes = set()
        for seed in (1, 2, 3):
            for drbd in (0.0, 0.5, 1.0):
                cd = cluster.finalize(text.parse_text(
                    generate.generate_text(generate.GenSpec(
                        nodes=8, inst_per_node=6, seed=seed, drbd=drbd,
                        crowd=0.5, node_mem=32768))))
                ctx = A.Context(cd)
                for template, mem in (("plain", 12000), ("drbd", 12000),
                                      ("plain", 4096)):
                    inst = M.Instance("new", mem, 10240, 1, "running", [],
                                      True, -1, -1, template, 1)
                    ctx.attach(inst)
                    try:
                        scope = range(len(cd.nodes))
                        checker = capacity.Checker(ctx, scope)
                        if not checker.base_redundant():
                            continue
                        for p in scope:
                            for s in ([M.NO_SECONDARY] if template == "plain"
                                      else [x for x in scope if x != p]):
                                with _Applied(cd.nodes, inst, p, s):
                                    changed = {p} if s < 0 else {p, s}
                                    fast = checker.redundant_with(
                                        changed, inst)
                                    full = capacity.Checker(
                                        ctx, scope).redundant()
                                checked += 1
                                outcomes.add(full)
                                disagree += fast != full
                    finally:
                        ctx.detach(inst)
        self.assertEqual(disagree, 0)
        self.assertGreater(checked, 300)
        self.assertEqual(outcomes, {True, False})
