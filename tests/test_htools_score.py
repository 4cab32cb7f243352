"""The cluster score and the balancer against values recorded from
Ganeti's hinfo and hbal (tests/fixtures/htools/record.py re-records
them)."""

import io
import json
import os
import re

from twisted.trial import unittest

from ganeti.htools import balance, cluster, generate, hbal, score, text
from ganeti.htools import moves as MV

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "htools")

with open(os.path.join(FIXTURES, "expected.json")) as _f:
    EXPECTED = json.load(_f)


def load(fname):
    with open(os.path.join(FIXTURES, fname)) as f:
        return cluster.finalize(text.parse_text(f.read()))


class ScoreTests(unittest.TestCase):

    def test_components_equal_hinfo(self):
        for fname, exp in EXPECTED.items():
            cd = load(fname)
            comps = score.components(cd.nodes)
            for name, value in exp["components"].items():
                self.assertAlmostEqual(comps[name], value, places=7,
                                       msg="%s %s" % (fname, name))
            self.assertAlmostEqual(score.compute_score(cd.nodes),
                                   exp["score"], places=6, msg=fname)

    def test_group_score_equals_hbal_initial_score(self):
        for fname, exp in EXPECTED.items():
            cd = load(fname)
            for gname, gexp in exp["groups"].items():
                g = cd.find_group(gname)
                nodes = cd.group_nodes(g.idx)
                self.assertAlmostEqual(score.compute_score(nodes),
                                       gexp["disk"]["initial"], places=6,
                                       msg="%s/%s" % (fname, gname))
                self.assertAlmostEqual(score.ScoreState(nodes).score(),
                                       gexp["disk"]["initial"], places=6)

    def test_incremental_score_follows_every_move(self):
        cd = load("gen_location.txt")
        g = cd.groups[0].idx
        nodes = cd.group_nodes(g)
        b = balance.Balancer(cd.nodes, nodes, cd.group_instances(g))

        def check(pl):
            full = score.compute_score(nodes)
            self.assertAlmostEqual(b.state.score(), full, places=9)
            self.assertAlmostEqual(pl.score, full, places=9)
        b.run(check)
        self.assertTrue(b.placements)

    def test_trial_leaves_the_model_unchanged(self):
        cd = load("gen_forthcoming.txt")
        nodes = cd.nodes
        def state():
            res = []
            for n in nodes:
                vals = score.node_values(n)
                st = n.save()
                res.append((st[:22] + st[23:], vals))
            return res
        before = state()
        b = balance.Balancer(nodes, nodes, cd.instances)
        for inst, move in b._candidates(None):
            b._delta(inst, move)
        for inst, move in [(i, (MV.CHANGE_ALL, 1, 2))
                           for i in cd.instances if i.forthcoming
                           and i.pnode not in (1, 2)
                           and i.snode not in (1, 2)]:
            b._delta(inst, move)
        self.assertEqual(before, state())


class MoveShareTests(unittest.TestCase):
    """A move's effect computed from per-node shares equals the effect of
    trying the whole move."""

    def test_shares_equal_whole_move(self):
        checked = 0
        for fname in ("gen_location.txt", "gen_offline.txt",
                      "gen_exclstorage.txt", "gen_forthcoming.txt"):
            cd = load(fname)
            b = balance.Balancer(cd.nodes, cd.group_nodes(0),
                                 cd.group_instances(0))
            for _ in range(2):
                for inst, move in b._candidates(None):
                    whole = b._delta(inst, move)
                    parts = b._delta_parts(inst, move)
                    self.assertEqual(whole is None, parts is None)
                    checked += 1
                    if whole is None:
                        continue
                    w = {k: (a, c) for k, a, c in whole[0]}
                    p = {k: (a, c) for k, a, c in parts[0]}
                    self.assertEqual(set(w), set(p))
                    for k in w:
                        self.assertAlmostEqual(w[k][0], p[k][0], places=12)
                        self.assertAlmostEqual(w[k][1], p[k][1], places=12)
                    self.assertAlmostEqual(whole[1], parts[1], places=12)
                    self.assertEqual(whole[2:4], parts[2:4])
                    self.assertEqual(
                        {k: v for k, v in (whole[4] or {}).items() if v},
                        parts[4] or {})
                b.step()
        self.assertGreater(checked, 1000)


class BalanceTests(unittest.TestCase):

    def _balance(self, fname, gname, disk_moves):
        cd = load(fname)
        g = cd.find_group(gname)
        nodes = cd.group_nodes(g.idx)
        b = balance.Balancer(cd.nodes, nodes, cd.group_instances(g.idx),
                             balance.BalanceOptions(disk_moves=disk_moves))
        b.run()
        return score.compute_score(nodes), b

    def test_hbal_matches_ganeti(self):
        """Our hbal on every recorded cluster and group, with and without
        disk moves: the output is Ganeti's own (same moves, lines and
        commands) and the final score never worse.  Forthcoming
        instances are exempt from the byte comparison (we may prefer
        moving them on a tie)."""
        compared = 0
        for fname, exp in sorted(EXPECTED.items()):
            for gname, gexp in sorted(exp["groups"].items()):
                for mode in ("disk", "nodisk"):
                    out, err = io.StringIO(), io.StringIO()
                    argv = ["-t", os.path.join(FIXTURES, fname), "-G",
                            gname, "-C"]
                    if mode == "nodisk":
                        argv.append("--no-disk-moves")
                    self.assertEqual(hbal.main(argv, out, err), 0)
                    what = "%s/%s %s" % (fname, gname, mode)
                    want = gexp[mode]["stdout"]
                    if want is not None and not fname.startswith(
                            "gen_forth"):
                        self.assertEqual(out.getvalue(), want, what)
                        compared += 1
                    m = re.search(r"improved from [-\d.]+ to ([-\d.]+)",
                                  out.getvalue())
                    fin = float(m.group(1)) if m else gexp[mode]["initial"]
                    self.assertLessEqual(fin, gexp[mode]["final"] + 1e-7,
                                         what)
        self.assertGreater(compared, 10)

    def test_job_sets_touch_disjoint_nodes(self):
        _, b = self._balance("gen_plain.txt", "group1", True)
        jobsets = balance.split_jobs(b.placements)
        self.assertEqual(sum(len(js) for js in jobsets),
                         len(b.placements))
        self.assertEqual([pl for js in jobsets for pl in js],
                         b.placements)
        for js in jobsets:
            seen = set()
            for pl in js:
                self.assertFalse(seen.intersection(pl.involved()))
                seen.update(pl.involved())

    def test_min_gain_and_max_length(self):
        cd = load("gen_plain.txt")
        nodes = cd.group_nodes(0)
        b = balance.Balancer(cd.nodes, nodes, cd.group_instances(0),
                             balance.BalanceOptions(max_length=3))
        self.assertEqual(len(b.run()), 3)
        cd = load("gen_plain.txt")
        b = balance.Balancer(cd.nodes, cd.group_nodes(0),
                             cd.group_instances(0),
                             balance.BalanceOptions(min_gain=100.0,
                                                    min_gain_limit=1000.0))
        self.assertEqual(b.run(), [])

    def test_evac_mode_moves_only_instances_of_offline_nodes(self):
        cd = load("gen_offline.txt")
        off = {n.idx for n in cd.nodes if n.offline}
        self.assertTrue(off)
        b = balance.Balancer(cd.nodes, cd.group_nodes(0),
                             cd.group_instances(0),
                             balance.BalanceOptions(evac_mode=True))
        pls = b.run()
        self.assertTrue(pls)
        for pl in pls:
            self.assertTrue({pl.old_p, pl.old_s} & off)

    def test_exclusion_tags_are_separated(self):
        cd = load("gen_extags.txt")
        before = sum(n.n_ptags_conflicts for n in cd.nodes)
        b = balance.Balancer(cd.nodes, cd.group_nodes(0),
                             cd.group_instances(0))
        b.run()
        after = sum(n.n_ptags_conflicts for n in cd.nodes)
        self.assertGreater(before, 0)
        self.assertLess(after, before)

    def test_pruned_search_still_balances(self):
        # force the pruned candidate sets (as on big groups)
        cd = load("gen_plain.txt")
        nodes = cd.group_nodes(0)
        b = balance.Balancer(cd.nodes, nodes, cd.group_instances(0),
                             balance.BalanceOptions(full_budget=0,
                                                    prune_nodes=2))
        b.run()
        exp = EXPECTED["gen_plain.txt"]["groups"]["group1"]["disk"]
        self.assertLess(score.compute_score(nodes), exp["initial"] / 2)

    def test_pruned_search_takes_remembered_moves_lazily(self):
        """On big groups one scan's good moves are taken one after the
        other (each re-scored, the best first) before the next scan; the
        run still ends where no single move improves the score."""
        cd = cluster.finalize(text.parse_text(generate.generate_text(
            generate.GenSpec(nodes=20, inst_per_node=5, seed=5))))
        nodes = cd.group_nodes(0)
        opts = balance.BalanceOptions(full_budget=0, prune_nodes=4)
        b = balance.Balancer(cd.nodes, nodes, cd.group_instances(0), opts)
        initial = b.score
        b.run()
        scans = sum(b.level_hits.values())
        self.assertGreater(len(b.placements), scans)
        scores = [initial] + [pl.score for pl in b.placements]
        self.assertTrue(all(a > c for a, c in zip(scores, scores[1:])))
        self.assertAlmostEqual(score.compute_score(nodes), b.score, places=6)
        # nothing left: no move of the whole candidate set improves
        fresh = balance.Balancer(cd.nodes, nodes, cd.group_instances(0))
        best, sc = fresh._best(fresh._candidates(None))
        self.assertTrue(best is None or not fresh._acceptable(sc))
        # and the result is as good as the plain greedy search's
        cd2 = cluster.finalize(text.parse_text(generate.generate_text(
            generate.GenSpec(nodes=20, inst_per_node=5, seed=5))))
        opts2 = balance.BalanceOptions(full_budget=0, prune_nodes=4,
                                       lazy_greedy=False)
        b2 = balance.Balancer(cd2.nodes, cd2.group_nodes(0),
                              cd2.group_instances(0), opts2)
        b2.run()
        self.assertLess(b.score, b2.score * 1.05)


    def test_narrow_scans_pass_over_useless_nodes_until_they_change(self):
        cd = cluster.finalize(text.parse_text(generate.generate_text(
            generate.GenSpec(nodes=20, inst_per_node=5, seed=5))))
        b = balance.Balancer(cd.nodes, cd.group_nodes(0),
                             cd.group_instances(0),
                             balance.BalanceOptions(full_budget=0,
                                                    prune_nodes=4))
        b._candidates(4, True)
        top, targets = b._ranked
        # a scan that found nothing: all its ranked nodes are useless
        b._mark_barren([], top, targets)
        b._candidates(4, True)
        top2, targets2 = b._ranked
        self.assertFalse(set(top) & set(top2))
        self.assertFalse(set(targets) & set(targets2))
        # a changed node is ranked again; the widest scan skips nobody
        b.nodes[top[0]].version += 1
        b._candidates(4, True)
        self.assertIn(top[0], b._ranked[0])
        b._candidates(4, False)
        self.assertEqual(set(top), set(b._ranked[0]))
        self.assertEqual(set(targets), set(b._ranked[1]))


def _generated(**kw):
    spec = dict(nodes=40, inst_per_node=6, seed=3)
    spec.update(kw)
    return cluster.finalize(text.parse_text(generate.generate_text(
        generate.GenSpec(**spec))))


class ScreeningTests(unittest.TestCase):
    """On big groups the pruned scans first estimate every candidate from
    first-order node shares, then score only the best few exactly."""

    def _balancer(self, cd, **kw):
        return balance.Balancer(cd.nodes, cd.group_nodes(0),
                                cd.group_instances(0),
                                balance.BalanceOptions(**kw))

    def test_estimates_follow_the_exact_scores(self):
        b = self._balancer(_generated())
        base = b.score
        est = {(i.idx, m): e for e, i, m in b._screen(*b._scan_sets(None))}
        self.assertGreater(len(est), 100)
        exact = {}
        for inst, move in b._candidates(None):
            sc = b.evaluate(inst, move)
            if sc is not None:
                exact[(inst.idx, move)] = sc
        # only real candidates, each estimated close to its exact score
        # (within 2% of the best gain: enough to find the best) and never
        # better than it (the square root is concave)
        self.assertLessEqual(set(est), set(exact))
        best = min(exact.values())
        for key, e in est.items():
            self.assertLess(abs(exact[key] - e), 0.02 * (base - best), key)
            self.assertLessEqual(exact[key], e + 1e-9, key)
        # and no clearly improving candidate is left out
        for key, sc in exact.items():
            if sc < base - 0.05 * (base - best):
                self.assertIn(key, est)

    def test_screened_choice_is_the_exact_best(self):
        for seed in (3, 4, 5):
            b = self._balancer(_generated(seed=seed))
            want = b._best(b._candidates(None))
            got = b._screened_best(*b._scan_sets(None))
            self.assertEqual(got, want, seed)
            self.assertIsNotNone(got[0])

    def test_a_screened_run_ends_where_no_move_improves(self):
        cd = _generated(nodes=30, seed=6)
        b = self._balancer(cd, full_budget=0, prune_nodes=4)
        b.run()
        self.assertTrue(b.placements)
        fresh = self._balancer(cd)
        best, sc = fresh._best(fresh._candidates(None))
        self.assertTrue(best is None or not fresh._acceptable(sc))
        # as good as scoring every candidate exactly, give or take the
        # different paths greedy searches take
        exact = self._balancer(_generated(nodes=30, seed=6), full_budget=0,
                               prune_nodes=4, screen_exact=0)
        exact.run()
        self.assertLess(b.score, exact.score * 1.05)

    def test_one_shape_shares_its_target_shares(self):
        """Placing an instance on a node that does not hold it is computed
        once per instance shape; instances that differ in anything such
        a placement reads get shares of their own."""
        base = generate.generate_text(generate.GenSpec(
            nodes=6, inst_per_node=2, seed=3, drbd=1.0))
        lines = base.splitlines()
        first = next(n for n, ln in enumerate(lines)
                     if ln.startswith("inst00001|"))
        a = lines[first].split("|")
        # inst00002 becomes inst00001's twin, on other nodes
        twin = lines[first + 1].split("|")
        for field in (1, 2, 3, 4, 10):
            twin[field] = a[field]
        variants = {"same": None, "mem": (1, "8192"), "disk": (2, "1024"),
                    "vcpus": (3, "7"), "status": (4, "ADMIN_down"),
                    "spindles": (10, "5")}
        for what, change in variants.items():
            fields = list(twin)
            if change is not None:
                fields[change[0]] = change[1]
            lines[first + 1] = "|".join(fields)
            cd = cluster.finalize(text.parse_text("\n".join(lines) + "\n"))
            b = self._balancer(cd)
            i1, i2 = cd.instances[0], cd.instances[1]
            target = next(n.idx for n in cd.nodes
                          if n.idx not in (i1.pnode, i1.snode, i2.pnode,
                                           i2.snode))
            move = (MV.REPLACE_SECONDARY, target, None)
            b._delta_parts(i1, move)
            before = b.evaluations
            got = b._delta_parts(i2, move)
            # the twin's own nodes are new shares; the target's is shared
            self.assertEqual(b.evaluations - before,
                             2 if change is None else 3, what)
            want = b._delta(i2, move)
            self.assertEqual(want is None, got is None, what)
            if want is None:
                continue
            w = {k: (d1, d2) for k, d1, d2 in want[0]}
            g = {k: (d1, d2) for k, d1, d2 in got[0]}
            self.assertEqual(set(w), set(g), what)
            for k in w:
                self.assertAlmostEqual(w[k][0], g[k][0], places=12)
                self.assertAlmostEqual(w[k][1], g[k][1], places=12)
            self.assertAlmostEqual(want[1], got[1], places=12)
