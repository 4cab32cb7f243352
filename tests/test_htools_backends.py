"""The htools cluster sources: iallocator input, RAPI (http and
file://), luxi (with a fake client)."""

import http.server
import json
import os
import shutil
import tempfile

from twisted.trial import unittest

from ganeti.htools import backends, cluster, score, text
from ganeti.htools import types as T

from tests import jsonhttp

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "htools")


def load_text(fname):
    with open(os.path.join(FIXTURES, fname)) as f:
        return text.parse_text(f.read())


def group_scores(cd):
    return {cd.groups[g].name: round(score.compute_score(nodes), 9)
            for g, nodes, _ in cd.split_groups()}


class IallocTests(unittest.TestCase):

    def test_same_cluster_as_the_text_file(self):
        for fname in ("gen_location.txt", "gen_plain.txt", "tiny.txt",
                      "gen_exclstorage.txt", "gen_groups.txt"):
            ref = cluster.finalize(load_text(fname))
            js = json.dumps(backends.cluster_to_ialloc(load_text(fname)))
            cd = cluster.finalize(backends.parse_ialloc(js))
            self.assertEqual(group_scores(cd), group_scores(ref), fname)
            self.assertEqual([n.name for n in cd.nodes],
                             [n.name for n in ref.nodes])
            self.assertEqual(cd.tags, ref.tags)

    def test_offline_nodes_need_no_live_data(self):
        js = backends.cluster_to_ialloc(load_text("gen_offline.txt"))
        off = [n for n, d in js["nodes"].items() if d["offline"]]
        self.assertTrue(off)
        self.assertNotIn("total_memory", js["nodes"][off[0]])
        cd = backends.parse_ialloc(js)
        self.assertTrue(cd.node_by_name[off[0]].offline)

    def test_drained_nodes_count_as_offline(self):
        js = backends.cluster_to_ialloc(load_text("tiny.txt"))
        js["nodes"]["node2"]["drained"] = True
        cd = cluster.finalize(backends.parse_ialloc(js))
        self.assertTrue(cd.node_by_name["node2"].offline)

    def test_errors_name_object_and_field(self):
        js = backends.cluster_to_ialloc(load_text("tiny.txt"))
        del js["nodes"]["node1"]["free_memory"]
        e = self.assertRaises(T.HtoolsError, backends.parse_ialloc, js)
        self.assertIn("node 'node1'", str(e))
        self.assertIn("free_memory", str(e))
        js = backends.cluster_to_ialloc(load_text("tiny.txt"))
        js["instances"]["inst1"]["nodes"] = ["nowhere"]
        e = self.assertRaises(T.HtoolsError, backends.parse_ialloc, js)
        self.assertIn("Unknown node 'nowhere'", str(e))
        e = self.assertRaises(T.HtoolsError, backends.parse_ialloc, "{x")
        self.assertIn("Invalid JSON", str(e))


class RapiTests(unittest.TestCase):

    def test_url_rules(self):
        self.assertEqual(backends.rapi_url("cluster"),
                         "https://cluster:5080")
        self.assertEqual(backends.rapi_url("127.0.0.1:18080"),
                         "http://127.0.0.1:18080")
        self.assertEqual(backends.rapi_url("https://127.0.0.1:8443"),
                         "https://127.0.0.1:8443")

    def test_parse_equals_text(self):
        for fname in ("gen_location.txt", "mixed.txt", "gen_offline.txt"):
            ref = cluster.finalize(load_text(fname))
            cd = cluster.finalize(backends.parse_rapi(
                *backends.cluster_to_rapi(load_text(fname))))
            self.assertEqual(group_scores(cd), group_scores(ref), fname)

    def test_file_directory(self):
        answers = backends.cluster_to_rapi(load_text("tiny.txt"))
        d = tempfile.mkdtemp(prefix="htools-rapi-")
        self.addCleanup(shutil.rmtree, d)
        for name, data in zip(("groups", "nodes", "instances", "info"),
                              answers):
            with open(os.path.join(d, name + ".json"), "w") as f:
                json.dump(data, f)
        cd = cluster.finalize(backends.load_rapi("file://" + d))
        self.assertAlmostEqual(group_scores(cd)["default"], 5.60268753,
                               places=8)
        self.assertTrue(cd.node_by_name["node1"].is_master)
        os.unlink(os.path.join(d, "info.json"))
        e = self.assertRaises(T.HtoolsError, backends.load_rapi,
                              "file://" + d)
        self.assertIn("info.json", str(e))

    def test_http_requests_in_ganeti_order(self):
        answers = dict(zip(("/2/groups?bulk=1", "/2/nodes?bulk=1",
                            "/2/instances?bulk=1", "/2/info"),
                           backends.cluster_to_rapi(load_text("tiny.txt"))))
        seen = []

        def answer(path, headers):
            seen.append((path, headers.get("Authorization")))
            return answers[path]
        cd = cluster.finalize(backends.load_rapi(
            jsonhttp.serve_json(self, answer)))
        self.assertEqual([p for p, _ in seen], list(answers))
        self.assertEqual({a for _, a in seen}, {None})
        self.assertEqual(len(cd.instances), 3)

    def test_kvm_node_memory_is_static(self):
        g, n, i, info = backends.cluster_to_rapi(load_text("tiny.txt"))
        info["default_hypervisor"] = "kvm"
        cd = backends.parse_rapi(g, n, i, info)
        self.assertEqual({nd.n_mem for nd in cd.nodes}, {4096})

    def test_unreachable_server_is_an_error(self):
        srv = http.server.HTTPServer(("127.0.0.1", 0),
                                     http.server.BaseHTTPRequestHandler)
        port = srv.server_address[1]
        srv.server_close()
        e = self.assertRaises(T.HtoolsError, backends.load_rapi,
                              "127.0.0.1:%d" % port)
        self.assertIn("/2/groups", str(e))


class FakeLuxi:
    """Answers the luxi queries from RAPI-shaped data."""

    def __init__(self, cdata):
        self.groups, self.nodes, self.insts, self.info = \
            backends.cluster_to_rapi(cdata)
        self.calls = []

    @staticmethod
    def _rows(objs, fields, getter):
        data = []
        for o in objs:
            row = []
            for f in fields:
                v = getter(o, f)
                row.append([0, v] if v is not None else [2, None])
            data.append(row)
        return {"fields": [{"name": f} for f in fields], "data": data}

    def query(self, what, fields, qfilter):
        self.calls.append((what, list(fields), qfilter))

        def node_get(n, f):
            if f.startswith("ndp/"):
                return n["ndparams"].get(f[4:])
            return n.get(f)

        def inst_get(i, f):
            if f.startswith("be/"):
                return i["beparams"].get(f[3:])
            return i.get(f)
        if what == "node":
            return self._rows(self.nodes, fields, node_get)
        if what == "instance":
            return self._rows(self.insts, fields, inst_get)
        return self._rows(self.groups, fields, lambda g, f: g.get(f))

    def query_cluster_info(self):
        self.calls.append(("info",))
        return self.info

    def close(self):
        pass


class LuxiTests(unittest.TestCase):

    def test_ganeti_queries_and_same_cluster(self):
        fake = FakeLuxi(load_text("gen_location.txt"))
        cd = cluster.finalize(backends.load_luxi("/nonexistent",
                                                 lambda _p: fake))
        ref = cluster.finalize(load_text("gen_location.txt"))
        self.assertEqual(group_scores(cd), group_scores(ref))
        self.assertEqual(fake.calls, [
            ("node", backends.LUXI_NODE_FIELDS
             + backends.LUXI_NODE_EXTRA_FIELDS, None),
            ("instance", backends.LUXI_INSTANCE_FIELDS, None),
            ("info",),
            ("group", backends.LUXI_GROUP_FIELDS, None)])
        self.assertEqual(backends.LUXI_NODE_FIELDS[:3],
                         ["name", "mtotal", "mnode"])

    def test_no_master_is_an_error(self):
        e = self.assertRaises(T.HtoolsError, backends.load_luxi,
                              "/nonexistent/socket")
        self.assertIn("/nonexistent/socket", str(e))
