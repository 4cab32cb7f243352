"""hspace's tiered and standard allocation against outputs recorded from
Ganeti's hspace (tests/fixtures/htools/hspace/record.py re-records
them): every ``HTS_*`` key must be the same, in particular the specs
tiered allocation ends on (``HTS_TSPEC``) with capacity checks on."""

import io
import json
import os
import re
import unittest

from ganeti.htools import hspace

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "fixtures", "htools", "hspace")


def keys(out):
    return dict(re.findall(r"^HTS_([A-Z_0-9]+)=(.*)$", out, re.M))


class TieredAllocationTests(unittest.TestCase):

    def setUp(self):
        with open(os.path.join(HERE, "expected.json")) as f:
            self.expected = json.load(f)

    def run_case(self, name):
        case = self.expected[name]
        path = os.path.join(HERE, case["cluster"] + ".txt")
        out, err = io.StringIO(), io.StringIO()
        rc = hspace.main(["-t", path, "--machine-readable"] + case["args"],
                         out=out, err=err)
        self.assertEqual(rc, 0, err.getvalue())
        want, got = keys(case["output"]), keys(out.getvalue())
        # the spec list first: the clearest message when it differs
        self.assertEqual(got.get("TSPEC"), want.get("TSPEC"), name)
        self.assertEqual(got, want, name)

    def test_failn1_most_frequent_ends_the_tiers(self):
        # FailN1 alone cannot be shrunk: Ganeti stops there
        self.run_case("s0-plain")
        self.run_case("s2-plain")

    def test_second_chance_shrinks_another_resource(self):
        self.run_case("s1-plain")
        self.run_case("s2n8-plain")

    def test_drbd_with_capacity_checks(self):
        for name in ("s1-drbd", "s2i4-drbd", "s3-drbd", "s3n5-drbd",
                     "w-groups-drbd"):
            self.run_case(name)

    def test_success_below_specs_failing_everywhere(self):
        # the walk must not skip a success that sits above the policy's
        # minimum memory (where everything fails again)
        self.run_case("s2i4-plain-nocap")

    def test_tied_failure_counts(self):
        # FailMem and FailDisk equally frequent: disk shrinks first, and
        # the second chance comes from a spec the walk passed through
        self.run_case("w-drbd-nocap")

    def test_policy_specs(self):
        self.run_case("w-drbd-policy")
        self.run_case("tiny-policy")

    def test_groups_and_tags(self):
        self.run_case("w-groups-plain")
        self.run_case("w-tags-plain")

    def test_capacity_checks_recreate_later_instances_first(self):
        # a failed node's instances of equal memory are re-created the
        # later one first: here that order leaves no room for the last
        # one at the larger disk size, so the third tier is smaller
        self.run_case("s12-plain-policy")

    def test_walk_past_the_policy_minimum(self):
        # memory shrinks towards the policy's minimum, below which every
        # node fails on memory again: the successes just above it must
        # not be skipped
        for name in ("s19-plain-nocap", "s19-drbd", "s21-drbd",
                     "s21-drbd-nocap"):
            self.run_case(name)
