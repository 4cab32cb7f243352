"""Nodes' measured CPU load (the monitoring daemons' cpu-avg-load) in
the balancing score: the same moves, scores and node loads as Ganeti's
``hbal --mond=yes`` for the same cluster and reports."""

from twisted.trial import unittest

from ganeti.htools import balance, cluster, dynload, score, text
from ganeti.htools import types as T

G = "11111111-1111-1111-1111-111111111111"


def cluster_text(os_cpus=1):
    node = "%s|32768|1024|%d|512000|480000|8|%s|" + G + "|1||N|0|%d|1.0"
    return "\n".join([
        "default|%s|preferred||" % G, "",
        node % ("node1", 20480, "M", os_cpus),
        node % ("node2", 29696, "N", 1),
        node % ("node3", 31744, "N", 1), "",
        "inst1|2048|10368|1|running|Y|node1|node2|drbd||1|-|N",
        "inst2|4096|10240|2|running|Y|node1||plain||1|-|N",
        "inst3|1024|10368|1|running|Y|node1|node3|drbd||1|-|N",
        "inst4|1024|10368|4|running|Y|node2|node3|drbd||1|-|N",
        "inst5|2048|10368|1|running|Y|node2|node1|drbd||1|-|N", "", "", ""])


def balanced(os_cpus, loads):
    cd = cluster.finalize(text.parse_text(cluster_text(os_cpus)))
    dynload.apply_node_cpu(cd, loads)
    before = [round(n.load_c, 3) for n in cd.nodes]
    bal = balance.Balancer(cd.nodes, cd.nodes, cd.instances)
    start = bal.initial_score
    moves = [(pl.inst.name, balance.MV.move_commands(
        pl.inst, pl.move, cd.nodes)[0], round(pl.score, 8))
        for pl in bal.run()]
    return (before, round(start, 8), moves,
            [round(n.load_c, 3) for n in cd.nodes],
            round(score.compute_score(cd.nodes), 8))


class NodeCpuLoadTests(unittest.TestCase):
    # expected values: hbal 3.0 -t CLUSTER --mond=yes --mond-data=FILE
    # --print-nodes=name,cload with cpu_total 4.0, 1.0, 0.0

    def test_same_as_hbal_with_the_monitoring_daemons(self):
        before, start, moves, after, final = balanced(
            1, {"node1": 4.0, "node2": 1.0, "node3": 0.0})
        self.assertEqual(before, [4.0, 1.0, 0.0])
        self.assertEqual(start, 5.50724562)
        self.assertEqual(moves, [("inst1", "f r:node3 f", 2.40442153),
                                 ("inst3", "f", 1.84124097)])
        self.assertEqual(after, [2.4, 1.0, 1.6])
        self.assertEqual(final, 1.84124097)

    def test_the_node_keeps_the_share_of_its_own_cpus(self):
        _, start, moves, after, final = balanced(
            3, {"node1": 4.0, "node2": 1.0, "node3": 0.0})
        self.assertEqual(start, 5.56529842)
        self.assertEqual([m[0] for m in moves], ["inst1", "inst3"])
        self.assertEqual(after, [2.857, 1.0, 1.143])
        self.assertEqual(final, 2.09068999)

    def test_nodes_without_a_report_keep_the_default_weights(self):
        before, start, _, _, _ = balanced(1, {"node1": 4.0})
        # node2 keeps one per primary instance
        self.assertEqual(before, [4.0, 2.0, 0.0])
        self.assertNotEqual(start, 5.50724562)

    def test_cpu_total_of_a_report(self):
        self.assertEqual(dynload.cpu_total(
            {"name": "cpu-avg-load", "data": {"cpu_number": 2,
                                              "cpus": [0.5, 1.0],
                                              "cpu_total": 1.5}}), 1.5)
        for bad in ({"data": {}}, {"data": {"cpu_total": "x"}},
                    {"data": {"cpu_total": -1}}, None):
            e = self.assertRaises(T.HtoolsError, dynload.cpu_total, bad)
            self.assertIn("cpu_total", str(e))
