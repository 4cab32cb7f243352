"""The global N+1 check's shortcuts give the answers of the full
simulation: the counting test only says "fits" when no choice of nodes
can get stuck, and a checker carried from one allocation to the next
agrees with a fresh one."""

import io
import itertools
import random
import re
import types

from twisted.trial import unittest

from ganeti.htools import alloc as A
from ganeti.htools import capacity, capplan, cluster, generate, hspace
from ganeti.htools import text
from ganeti.htools import model as M


def _node(fm, fd):
    # free memory fm: what Node.unallocated_mem() gives
    return types.SimpleNamespace(t_mem=fm, n_mem=0, i_mem=0, x_mem=0,
                                 f_dsk=fd, unallocated_mem=lambda: fm)


def _inst(mem, dsk, uses_disk=True, forthcoming=False):
    return types.SimpleNamespace(mem=mem, dsk=dsk, uses_memory=True,
                                 uses_local_storage=uses_disk,
                                 forthcoming=forthcoming)


def _checker(nodes):
    chk = capacity.Checker.__new__(capacity.Checker)
    chk.nodes = nodes
    return chk


def _can_get_stuck(frees, insts):
    """Whether some choice of nodes (any node with room, as the score
    may pick) leaves an instance without a node: every choice tried."""
    if not insts:
        return False
    inst, rest = insts[0], insts[1:]
    if inst.forthcoming:
        return _can_get_stuck(frees, rest)
    fits = [i for i, (fm, fd) in enumerate(frees)
            if fm - inst.mem > 0
            and (not inst.uses_local_storage or fd - inst.dsk > 0)]
    if not fits:
        return True
    for i in fits:
        fm, fd = frees[i]
        after = list(frees)
        after[i] = (fm - inst.mem,
                    fd - inst.dsk if inst.uses_local_storage else fd)
        if _can_get_stuck(after, rest):
            return True
    return False


class CountingShortcutTests(unittest.TestCase):

    def test_never_says_fits_when_a_choice_gets_stuck(self):
        rnd = random.Random(7)
        said_fits = said_not = absorbed = 0
        for _case in range(1500):
            frees = [(rnd.choice([0, 1, 1000, 2000, 2500, 4096, 8193]),
                      rnd.choice([0, 10, 5000, 10000, 20001]))
                     for _n in range(rnd.randint(1, 4))]
            insts = [_inst(rnd.choice([0, 512, 1000, 1024, 2048, 4096]),
                           rnd.choice([0, 1000, 5000, 10000]),
                           uses_disk=rnd.random() < 0.8,
                           forthcoming=rnd.random() < 0.1)
                     for _i in range(rnd.randint(1, 5))]
            insts.sort(key=lambda i: -i.mem)
            nodes = [_node(fm, fd) for fm, fd in frees]
            fit = _checker(nodes)._rest_fits(insts, range(len(nodes)))
            if fit is None:
                said_not += 1
                continue
            said_fits += 1
            self.assertFalse(_can_get_stuck(frees, insts),
                             "counted as fitting but can get stuck: nodes"
                             " %r, instances %r" % (frees, [
                                 (i.mem, i.dsk, i.uses_local_storage,
                                  i.forthcoming) for i in insts]))
            relied = fit[0]
            # the nodes it did not rely on do not matter: emptying them
            # keeps the answer
            emptied = [_node(fm, fd) if i in relied else _node(0, 0)
                       for i, (fm, fd) in enumerate(frees)]
            self.assertIsNotNone(
                _checker(emptied)._rest_fits(insts, range(len(nodes))))
            if not relied:
                continue  # nothing to re-create
            # a new instance on a counted node: when the counts' slack
            # covers it, no choice gets stuck either
            t = rnd.choice(sorted(relied))
            placed = _inst(rnd.choice([0, 512, 1024, 3000]),
                           rnd.choice([0, 1000, 6000]),
                           uses_disk=rnd.random() < 0.8)
            fm, fd = frees[t]
            after = list(frees)
            after[t] = (fm - placed.mem,
                        fd - placed.dsk if placed.uses_local_storage else fd)
            if capacity._absorb(fit[1], placed, 1) is not None:
                absorbed += 1
                self.assertFalse(_can_get_stuck(after, insts),
                                 "slack %r covers %r on node %d: nodes %r,"
                                 " instances %r" % (
                                     fit[1], (placed.mem, placed.dsk), t,
                                     frees, [(i.mem, i.dsk) for i in insts]))
        # both answers occur, so the test looks at something
        self.assertGreater(said_fits, 300)
        self.assertGreater(said_not, 300)
        self.assertGreater(absorbed, 100)

    def test_mixed_sizes_fit_where_the_largest_alone_does_not(self):
        # two nodes of 5000 MiB take only two 4096 MiB instances; the
        # count per instance sees room for small ones beside them
        nodes = [_node(5000, 10 ** 6), _node(5000, 10 ** 6)]
        insts = [_inst(4096, 100), _inst(4096, 100), _inst(512, 100)]
        self.assertIsNotNone(_checker(nodes)._rest_fits(insts, [0, 1]))
        # 904 MiB are left on each: one more 512 MiB fits, two do not
        self.assertIsNotNone(_checker(nodes)._rest_fits(
            insts + [_inst(512, 100)], [0, 1]))
        self.assertIsNone(_checker(nodes)._rest_fits(
            insts + [_inst(512, 100), _inst(512, 100)], [0, 1]))
        self.assertIsNone(_checker(nodes)._rest_fits(
            insts, [0, 1], quick=True))

    def test_failover_memory_is_taken_first(self):
        nodes = [_node(5000, 10 ** 6), _node(5000, 10 ** 6)]
        insts = [_inst(2048, 100), _inst(2048, 100)]
        self.assertIsNotNone(_checker(nodes)._rest_fits(insts, [0, 1]))
        self.assertIsNone(_checker(nodes)._rest_fits(
            insts, [0, 1], need={0: 4000, 1: 4000}))


def _cluster(seed, drbd):
    return cluster.finalize(text.parse_text(generate.generate_text(
        generate.GenSpec(nodes=10, inst_per_node=6, seed=seed, drbd=drbd,
                         crowd=0.5, node_mem=32768))))


class CarriedCheckerTests(unittest.TestCase):

    def allocate_all(self, reuse, seed, drbd, template):
        cd = _cluster(seed, drbd)
        ctx = A.Context(cd, A.AllocOptions(), reuse_checks=reuse)
        count = A.required_nodes(template)
        targets = A.alloc_targets(ctx, list(range(len(cd.nodes))), count)
        scope = list(range(len(cd.nodes)))
        placed = []
        dropped = 0
        for n in itertools.count():
            inst = capplan.make_instance(capplan.RSpec(
                2048 + 512 * (n % 5), 10240, 1, 1),
                                         template, 1, "new-%d" % n)
            ctx.attach(inst)
            if count == 2:
                sol = A.try_alloc_pairs(ctx, inst, targets, scope)
            else:
                sol = A.try_alloc_single(ctx, inst, targets, scope)
            dropped += sol.failures.get(M.FAIL_N1, 0)
            if sol.best is None:
                ctx.detach(inst)
                return placed, sol.failure_stats(), dropped
            _sc, p, s = sol.best
            ctx.commit(inst, p, s, sol)
            placed.append((p, s))

    def test_same_placements_with_and_without_carrying(self):
        dropped = 0
        for seed, drbd, template in ((1, 0.0, "plain"), (2, 0.5, "plain"),
                                     (3, 1.0, "plain"), (4, 0.5, "drbd")):
            fresh = self.allocate_all(False, seed, drbd, template)
            carried = self.allocate_all(True, seed, drbd, template)
            self.assertEqual(carried, fresh)
            self.assertGreater(len(fresh[0]), 40)
            dropped += fresh[2]
        # the N+1 check turned candidates down on the way
        self.assertGreater(dropped, 5)

    def test_hspace_answers_the_same_with_and_without_carrying(self):
        # tiered allocation shrinks its specs where the N+1 check
        # refuses, probing the same state many times
        path = self.mktemp()
        with open(path, "w") as f:
            f.write(generate.generate_text(generate.GenSpec(
                nodes=16, seed=3, crowd=0.3, inst_per_node=4)))
        args = ["-t", path, "--disk-template=plain",
                "--standard-alloc=20480,2048,2",
                "--tiered-alloc=40960,8192,4", "--machine-readable"]

        def run():
            out = io.StringIO()
            try:
                hspace.main(args, out=out, err=io.StringIO())
            except SystemExit as e:
                self.assertEqual(e.code, 0)
            return out.getvalue()

        carried = run()

        class Fresh(A.Context):
            def __init__(self, cdata, opts=None, reuse_checks=False):
                super().__init__(cdata, opts, False)

        self.patch(capplan.A, "Context", Fresh)
        self.assertEqual(carried, run())
        tspec = re.search(r"^HTS_TSPEC='(.*)'$", carried, re.M).group(1)
        self.assertGreater(len(tspec.split()), 5)

    def test_a_model_changed_outside_is_checked_again(self):
        cd = _cluster(5, 0.0)
        ctx = A.Context(cd, A.AllocOptions(), reuse_checks=True)
        scope = list(range(len(cd.nodes)))
        first = ctx.n1_predicate(scope)
        self.assertIs(ctx.n1_predicate(scope), first)
        ctx.changed()
        self.assertIsNot(ctx.n1_predicate(scope), first)
