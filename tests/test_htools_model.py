"""The htools model and text format: loading, writing, placing and
removing instances."""

import os

from twisted.trial import unittest

from ganeti.htools import cluster, score, text
from ganeti.htools import types as T

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "htools")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


def load(name):
    return cluster.finalize(text.parse_text(fixture(name)))


class TextFormatTests(unittest.TestCase):

    def test_round_trip_is_exact(self):
        for name in ("tiny.txt", "mixed.txt"):
            raw = fixture(name)
            self.assertEqual(text.serialize_cluster(text.parse_text(raw)),
                             raw, name)

    def test_short_lines_get_ganeti_defaults(self):
        cd = text.parse_text(
            "g|u1|preferred|\n\n"
            "n1|1024|100|900|1000|900|4|M|u1\n\n"
            "i1|128|10|1|running|Y|n1||plain|\n\n\n")
        out = text.serialize_cluster(cd).split("\n")
        self.assertEqual(out[2], "n1|1024|100|900|1000|900|4|M|u1|1||N|0"
                                 "|1|1.0")
        self.assertEqual(out[4], "i1|128|10|1|running|Y|n1||plain||1|-|N")

    def test_unknown_values_make_an_empty_offline_node(self):
        cd = text.parse_text(
            "g|u1|preferred|\n\nn1|?|100|900|1000|900|4|N|u1|2|t|N|0|1|1.0"
            "\n\n\n\n")
        nd = cd.nodes[0]
        self.assertTrue(nd.offline)
        self.assertEqual((nd.t_mem, nd.n_cpu, nd.tags), (0, 0, []))

    def test_bad_data_names_the_problem(self):
        bad = {
            "g|u1|preferred|\n\nn1|1|1|1|1|1|1|N|u2\n\n\n\n": "Unknown group",
            "g|u1|preferred|\n\nn1|x|1|1|1|1|1|N|u1\n\n\n\n": "n1",
            "g|u1|preferred|\n\nn1|1|1|1|1|1|1|N|u1\n\n"
            "i|1|1|1|running|Y|n2||plain|\n\n\n": "Unknown node 'n2'",
            "g|u1|preferred|\n\nn1|1|1|1|1|1|1|N|u1\n\n"
            "i|1|1|1|flying|Y|n1||plain|\n\n\n": "Invalid instance status",
            "g|u1|preferred|\n\n": "sections",
        }
        for data, msg in bad.items():
            e = self.assertRaises(T.HtoolsError, text.parse_text, data)
            self.assertIn(msg, str(e))

    def test_show_double(self):
        for v, s in [(1.0, "1.0"), (0.1, "0.1"), (1000.0, "1000.0"),
                     (1.5, "1.5"), (1e7, "1.0e7"), (0.01, "1.0e-2"),
                     (12345.678, "12345.678"), (2.5e-5, "2.5e-5")]:
            self.assertEqual(text.show_double(v), s)


class NodeAccountingTests(unittest.TestCase):

    def test_loaded_memory_accounting(self):
        cd = load("mixed.txt")
        n1 = cd.node_by_name["node1"]
        # only the running instance counts as state-of-record memory
        self.assertEqual(n1.i_mem, 2048)
        self.assertEqual(n1.x_mem, 32768 - 1024 - 20000 - 2048)
        self.assertEqual(n1.unallocated_mem(), 20000)
        self.assertIn("node node1 is missing 9696 MB ram and -10 GB disk",
                      cd.warnings)

    def test_add_then_remove_restores_every_metric(self):
        cd = load("tiny.txt")
        nodes = cd.nodes
        inst = cd.instance_by_name["inst2"]
        before = [score.node_values(n) for n in nodes]
        nodes[0].remove_pri(inst)
        self.assertNotEqual(score.node_values(nodes[0]), before[0])
        self.assertIsNone(nodes[0].add_pri(inst))
        self.assertEqual([score.node_values(n) for n in nodes], before)

    def test_secondary_reservation_and_n1(self):
        cd = load("tiny.txt")
        n2 = cd.node_by_name["node2"]
        self.assertEqual(n2.r_mem, 2048)
        inst1 = cd.instance_by_name["inst1"]
        n2.remove_sec(inst1)
        self.assertEqual((n2.r_mem, n2.peers), (0, {}))
        self.assertIsNone(n2.add_sec(inst1, inst1.pnode))
        self.assertEqual(n2.r_mem, 2048)

    def test_failed_placement_changes_nothing(self):
        cd = load("tiny.txt")
        n3 = cd.node_by_name["node3"]
        inst = cd.instance_by_name["inst2"]
        big = type(inst)("big", 40000, 10, 1, "running", [], True, 2, -1,
                         "plain", idx=99)
        before = n3.save()
        self.assertEqual(n3.add_pri(big), "FailMem")
        self.assertEqual(n3.save(), before)
        self.assertNotIn(99, n3.plist)


class AllocationStyleTests(unittest.TestCase):
    """How an allocator uses the model: place a new instance on a pair
    of nodes, read the incremental score, undo."""

    def test_incremental_score_of_a_new_instance(self):
        from ganeti.htools.model import Instance
        cd = load("tiny.txt")
        nodes = cd.nodes
        state = score.ScoreState(nodes)
        before = [n.save() for n in nodes]
        seen = 0
        for p in nodes:
            for s in nodes:
                if p is s:
                    continue
                inst = Instance("new", 1024, 10240, 1, "running", [],
                                True, p.idx, s.idx, "drbd",
                                idx=len(cd.instances))
                old = [score.node_values(p), score.node_values(s)]
                saved = [p.save(), s.save()]
                if p.add_pri(inst) is None and \
                        s.add_sec(inst, p.idx) is None:
                    new = [score.node_values(p), score.node_values(s)]
                    self.assertAlmostEqual(
                        state.score_after(list(zip(old, new))),
                        score.compute_score(nodes), places=9)
                    seen += 1
                p.restore(saved[0])
                s.restore(saved[1])
        self.assertEqual(seen, 6)
        self.assertEqual([n.save() for n in nodes], before)
