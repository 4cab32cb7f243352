"""Cross-check against Ganeti's own htools when they are installed
(skipped otherwise): random clusters scored and balanced by both."""

import json
import os
import re
import shutil
import subprocess
import tempfile

from twisted.trial import unittest

from ganeti.htools import backends, balance, cluster, generate, score, text

from tests import jsonhttp

BIN = os.environ.get("GANETI_HTOOLS_BIN", "/usr/lib/ganeti/3.0/usr/bin")
HBAL = os.path.join(BIN, "hbal")


def _ganeti(args):
    r = subprocess.run([HBAL] + args, capture_output=True, text=True,
                       timeout=120)
    ini = re.search(r"Initial score: ([-\d.]+)", r.stdout)
    fin = re.search(r"improved from [-\d.]+ to ([-\d.]+)", r.stdout)
    ini = float(ini.group(1)) if ini else None
    return ini, float(fin.group(1)) if fin else ini, r


class OracleTests(unittest.TestCase):

    def setUp(self):
        if not os.access(HBAL, os.X_OK):
            raise unittest.SkipTest("Ganeti's hbal is not installed at %s"
                                    % HBAL)
        self.tmp = tempfile.mkdtemp(prefix="htools-oracle-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def _write(self, name, data):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(data)
        return path

    def test_random_clusters(self):
        kinds = [{}, {"offline": 0.2}, {"forthcoming": 0.2},
                 {"down": 0.3, "no_auto_balance": 0.2},
                 {"excl_tags": 0.5, "locations": 2},
                 {"excl_storage": True, "varied_nodes": True,
                  "cpu_speed": True, "diskless": 0.1}]
        for seed, kw in enumerate(kinds, 100):
            spec = generate.GenSpec(nodes=6, inst_per_node=4, seed=seed,
                                    **kw)
            data = generate.generate_text(spec)
            path = self._write("c%d.txt" % seed, data)
            for extra, disk in (([], True), (["--no-disk-moves"], False)):
                g_ini, g_fin, r = _ganeti(["-t", path] + extra)
                self.assertIsNotNone(g_ini, r.stdout + r.stderr)
                cd = cluster.finalize(text.parse_text(data))
                nodes = cd.group_nodes(0)
                self.assertAlmostEqual(score.compute_score(nodes), g_ini,
                                       places=6, msg=str(kw))
                b = balance.Balancer(
                    cd.nodes, nodes, cd.group_instances(0),
                    balance.BalanceOptions(disk_moves=disk))
                b.run()
                self.assertLessEqual(score.compute_score(nodes),
                                     g_fin + 1e-7, "%s %s" % (kw, extra))

    def test_iallocator_input_scores_like_the_text_file(self):
        # (Ganeti's own hbal -I places every instance twice - its
        # iallocator parser already places them and the common loader
        # does it again - so the text file is the reference here.)
        spec = generate.GenSpec(nodes=6, inst_per_node=4, seed=5,
                                locations=2, excl_tags=0.5)
        data = generate.generate_text(spec)
        cd = text.parse_text(data)
        path = self._write("ialloc.json",
                           json.dumps(backends.cluster_to_ialloc(cd)))
        g_ini, _, r = _ganeti(["-t", self._write("ialloc.txt", data)])
        self.assertIsNotNone(g_ini, r.stdout + r.stderr)
        ours = cluster.finalize(backends.load_ialloc_file(path))
        self.assertAlmostEqual(score.compute_score(ours.group_nodes(0)),
                               g_ini, places=6)

    def test_round_trip_of_ganeti_saved_state(self):
        spec = generate.GenSpec(nodes=5, inst_per_node=3, seed=9,
                                forthcoming=0.2, locations=2)
        path = self._write("s.txt", generate.generate_text(spec))
        prefix = os.path.join(self.tmp, "saved")
        _, _, r = _ganeti(["-t", path, "-S", prefix])
        for suffix in ("original", "balanced"):
            with open("%s.%s" % (prefix, suffix)) as f:
                raw = f.read()
            self.assertEqual(text.serialize_cluster(text.parse_text(raw)),
                             raw, suffix)

    def test_rapi_source_gives_ganeti_output(self):
        import io
        from ganeti.htools import hbal
        spec = generate.GenSpec(nodes=6, inst_per_node=4, seed=11,
                                locations=2, excl_tags=0.4, offline=0.2)
        cd = text.parse_text(generate.generate_text(spec))
        answers = dict(zip(("/2/groups?bulk=1", "/2/nodes?bulk=1",
                            "/2/instances?bulk=1", "/2/info"),
                           backends.cluster_to_rapi(cd)))

        url = jsonhttp.serve_json(self, lambda path, _: answers[path])
        _, _, r = _ganeti(["-m", url, "-C"])
        out, err = io.StringIO(), io.StringIO()
        self.assertEqual(hbal.main(["-m", url, "-C"], out, err), 0)
        self.assertEqual(out.getvalue(), r.stdout)
