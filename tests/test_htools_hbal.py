"""The hbal command: options, messages, saved states, command scripts and
job submission (-X, with a fake master)."""

import io
import os
import shutil
import tempfile

from twisted.trial import unittest

from ganeti.htools import hbal, text
from tests.test_cli_fakes import FakeClient
from tests.test_htools_backends import FakeLuxi

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "htools")


def fixture(name):
    return os.path.join(FIXTURES, name)


def run(argv, luxi_client=None):
    out, err = io.StringIO(), io.StringIO()
    code = hbal.main(argv, out, err, luxi_client=luxi_client)
    return code, out.getvalue(), err.getvalue()


class MasterFake(FakeClient):
    """The master for hbal -L -X: cluster queries and job handling."""

    def __init__(self, cdata):
        FakeClient.__init__(self)
        self.luxi = FakeLuxi(cdata)

    def query(self, what, fields, qfilter=None):
        self.calls.append(("Query", what))
        return self.luxi.query(what, fields, qfilter)

    def query_cluster_info(self):
        return self.luxi.query_cluster_info()


class HbalTests(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="htools-hbal-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_dynamic_utilization_as_ganeti(self):
        """-U: the loads change the score, the moves and the node tables
        exactly as in Ganeti's hbal (recorded by record.py)."""
        argv = ["-t", fixture("gen_plain.txt"), "-C", "-p"]
        code, out, err = run(argv + ["-U", fixture("gen_plain.util")])
        self.assertEqual(code, 0)
        with open(fixture("expected/hbal-dynload.out")) as f:
            self.assertEqual(out, f.read())
        with open(fixture("expected/hbal-dynload.err")) as f:
            self.assertEqual(err, f.read())
        _, plain, _ = run(argv)
        self.assertNotEqual(plain.splitlines()[4], out.splitlines()[4])

    def test_dynamic_utilization_errors(self):
        cases = [("inst00001 1 2 3\n", "Cannot parse line inst00001 1 2 3"),
                 ("inst00001 1 2 3 4\n\n", "Cannot parse line "),
                 ("inst00001 1 x 3 4\n",
                  "inst00001: cannot parse string 'x'"),
                 ("inst00001 1  3 4\n", "inst00001: cannot parse string ''")]
        for text_, msg in cases:
            path = os.path.join(self.tmp, "util")
            with open(path, "w") as f:
                f.write(text_)
            code, out, err = run(["-t", fixture("gen_plain.txt"), "-U", path])
            self.assertEqual(code, 1)
            self.assertEqual(
                err, "Error: can't parse utilisation data: %s\n" % msg)
            self.assertNotIn("Initial score", out)
        code, _, err = run(["-t", fixture("gen_plain.txt"), "-U",
                            os.path.join(self.tmp, "missing")])
        self.assertEqual(code, 1)
        self.assertIn("No such file or directory", err)

    def test_tiny_output(self):
        code, out, err = run(["-t", fixture("tiny.txt"), "-C"])
        self.assertEqual(code, 0)
        self.assertIn("Initial score: 5.60268753\n", out)
        self.assertIn("    1. inst1 node1:node2 => node2:node3"
                      "   3.21736253 a=f r:node3\n", out)
        self.assertIn("Cluster score improved from 5.60268753 to"
                      " 0.64952415\n", out)
        self.assertTrue(out.endswith(
            "  echo jobset 2, 1 jobs\n    echo job 2/1\n"
            "    gnt-instance migrate -f inst3\n"))
        self.assertIn("node node2 is missing 0 MB ram and 21 GB disk", err)

    def test_save_writes_text_states(self):
        prefix = os.path.join(self.tmp, "state")
        code, _, err = run(["-t", fixture("tiny.txt"), "-S", prefix])
        self.assertEqual(code, 0)
        with open(fixture("tiny.txt")) as f:
            self.assertEqual(open(prefix + ".original").read(), f.read())
        bal = text.parse_text(open(prefix + ".balanced").read())
        inst1 = bal.instance_by_name["inst1"]
        self.assertEqual((bal.nodes[inst1.pnode].name,
                          bal.nodes[inst1.snode].name), ("node2", "node3"))
        self.assertIn("has been written to file '%s.balanced'" % prefix,
                      err)

    def test_command_script(self):
        path = os.path.join(self.tmp, "cmds.sh")
        code, out, _ = run(["-t", fixture("tiny.txt"), "-C" + path])
        self.assertEqual(code, 0)
        script = open(path).read()
        self.assertTrue(script.startswith("#!/bin/sh"))
        self.assertIn("  check\n  gnt-instance migrate -f inst1\n", script)
        self.assertIn("written to file '%s'" % path, out)

    def test_print_nodes(self):
        code, _, err = run(["-t", fixture("tiny.txt"), "-p"])
        self.assertEqual(code, 0)
        self.assertIn(" F Name  t_mem n_mem i_mem x_mem f_mem u_mem r_mem",
                      err)
        self.assertIn("   node1 32768  1024  7168     0 24576 24576     0"
                      "   500   468    8    5    3    0 0.7500 0.9375  0.62"
                      " 3.000 3.000 3.000 3.000", err)
        self.assertIn("Final cluster status:", err)

    def test_bad_input_is_error_exit_1(self):
        bad = os.path.join(self.tmp, "bad.txt")
        with open(bad, "w") as f:
            f.write("g|u|preferred|\n\nn1|1|1|1|1|1|1|N|u\n\n"
                    "i|1|1|1|running|Y|n1|n9|drbd|\n\n\n")
        code, out, err = run(["-t", bad])
        self.assertEqual(code, 1)
        self.assertEqual(err, "Error: failed to load data, aborting:"
                              " Unknown node 'n9' for instance i\n")
        self.assertEqual(out, "")
        code, _, err = run(["-t", os.path.join(self.tmp, "missing")])
        self.assertEqual(code, 1)
        self.assertIn("Error: failed to load data", err)

    def test_several_groups_need_a_group(self):
        code, _, err = run(["-t", fixture("gen_groups.txt")])
        self.assertEqual(code, 1)
        self.assertEqual(err, "Found multiple node groups:\n  group1\n"
                              "  group2\nError: Aborting.\n")
        code, out, _ = run(["-t", fixture("gen_groups.txt"), "-G",
                            "group2", "-l", "2"])
        self.assertEqual(code, 0)
        self.assertIn("Selected node group: group2\n", out)
        self.assertIn("Solution length=2\n", out)
        code, _, err = run(["-t", fixture("gen_groups.txt"), "-G", "nope"])
        self.assertEqual(code, 1)
        self.assertIn("Node group nope not found", err)

    def test_well_balanced_cluster(self):
        code, out, _ = run(["-t", fixture("mixed.txt"), "-G", "other"])
        self.assertEqual(code, 0)
        self.assertIn("minimum score 1.000000e-9).\nNothing to do", out)

    def test_exec_needs_luxi(self):
        code, _, err = run(["-t", fixture("tiny.txt"), "-X"])
        self.assertEqual(code, 1)
        self.assertIn("only on LUXI", err)

    def test_exec_submits_job_sets_in_order(self):
        master = MasterFake(text.parse_text(open(fixture("tiny.txt"))
                                            .read()))
        code, out, err = run(["-L", "/fake/socket", "-X"], master)
        self.assertEqual(code, 0, err)
        submitted = [c for c in master.calls
                     if c[0] in ("SubmitJob", "SubmitManyJobs")]
        # two job sets of one job each, the second after the first ended
        self.assertEqual(len(submitted), 2)
        first = submitted[0][1]
        self.assertEqual([op["OP_ID"] for op in first],
                         ["OP_INSTANCE_MIGRATE",
                          "OP_INSTANCE_REPLACE_DISKS"])
        self.assertEqual(first[0]["instance_name"], "inst1")
        self.assertTrue(first[0]["allow_failover"])
        self.assertEqual(first[1]["mode"], "replace_new_secondary")
        self.assertEqual(first[1]["remote_node"], "node3")
        methods = master.methods()
        i1 = methods.index("SubmitJob")
        i2 = methods.index("SubmitJob", i1 + 1)
        self.assertIn("WaitForJobChange", methods[i1:i2])
        self.assertIn("Executing jobset for instances inst1", out)

    def test_exec_stops_at_a_failed_job_set(self):
        master = MasterFake(text.parse_text(open(fixture("tiny.txt"))
                                            .read()))
        master.errors["OP_INSTANCE_REPLACE_DISKS"] = [
            "OpExecError", ["disk failure"]]
        code, _, err = run(["-L", "/fake/socket", "-X"], master)
        self.assertEqual(code, 1)
        self.assertEqual(len([c for c in master.calls
                              if c[0] == "SubmitJob"]), 1)
        self.assertIn("disk failure", err)
