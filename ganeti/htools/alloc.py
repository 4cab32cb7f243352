"""Instance allocation on the htools model, with Ganeti's rules.

A new instance goes on the node (one-node templates) or the primary and
secondary pair (drbd) that gives the lowest cluster score after the
placement, among the candidates that pass the instance policy and the
node capacity checks (``Node.add_pri``/``add_sec``).  Failed candidates
are counted per failure mode, as Ganeti reports them.  With capacity
checks on, a solution must also leave the cluster globally N+1
redundant (``capacity.redundant``); solutions that do not are dropped
in score order and counted as ``FailN1``.

Speed: a candidate is evaluated by applying it to its one or two nodes,
reading their new per-node values and computing the score incrementally
(``ScoreState.score_after``), then undoing it.  For drbd the exhaustive
search over all node pairs is used on small groups; on large ones the
primaries and secondaries are first ranked by their single-node score
change, the best few of each are paired, and the best pair is then
refined by trying every secondary for its primary and every primary for
its secondary until nothing improves.  Failure counts stay exact: they
are computed per node and combined, as a pair's failure depends only on
its primary, or on its secondary (and, for N+1, on whether the secondary
already holds instances of that primary).
"""

import attrs

from ganeti.htools import capacity
from ganeti.htools import model as M
from ganeti.htools import score as S
from ganeti.htools import types as T

FAIL_DISK_COUNT = "FailDiskCount"
#: the failure modes in Ganeti's order (used for counting and printing)
FAIL_MODES = (M.FAIL_MEM, M.FAIL_DISK, M.FAIL_CPU, M.FAIL_N1, M.FAIL_TAGS,
              M.FAIL_MIG, FAIL_DISK_COUNT, M.FAIL_SPINDLES, M.FAIL_INTERNAL)

#: group allocation policies, best first
POLICY_RANK = {"preferred": 0, "last_resort": 1, "unallocable": 2}


class AllocError(Exception):
    """An allocation request that cannot be answered at all (as opposed
    to one with no valid solution)."""


@attrs.define
class AllocOptions:
    ignore_soft_errors: bool = False
    #: global N+1 redundancy of every solution (hail's default)
    capacity: bool = True
    restrict_to_nodes: object = None
    accept_existing: bool = False
    capacity_ignore_groups: tuple = ()
    #: exhaustive pair search up to this many pairs, pruned beyond
    exhaustive_pairs: int = 3000
    #: primaries and secondaries paired in the pruned search
    prune_width: int = 12


@attrs.define
class Solution:
    """Ganeti's allocation solution: failure counts, number of valid
    candidates, the best one (score, primary, secondary) and the log."""
    failures: dict = attrs.Factory(dict)
    allocs: int = 0
    best: object = None
    log: list = attrs.Factory(list)
    #: the capacity checker that passed ``best`` (it was its last check)
    checker: object = None

    def add_failure(self, mode, count=1):
        if count:
            self.failures[mode] = self.failures.get(mode, 0) + count

    def failure_count(self):
        return sum(self.failures.values())

    def failure_stats(self):
        """[(mode, count)] for every mode, in Ganeti's order."""
        return [(m, self.failures.get(m, 0)) for m in FAIL_MODES]

    def describe(self, nodes):
        reasons = ", ".join("%s: %d" % (m, c)
                            for m, c in self.failure_stats() if c > 0)
        if self.best is None:
            return ("No valid allocation solutions, failure reasons: "
                    + (reasons if self.failures else "unknown reasons"))
        score, pdx, sdx = self.best
        names = [nodes[pdx].name]
        if sdx != M.NO_SECONDARY:
            names.append(nodes[sdx].name)
        return ("score: %s, successes %d, failures %d (%s) for node(s) %s"
                % (self.format_score(score), self.allocs,
                   self.failure_count(), reasons, "/".join(names)))

    @staticmethod
    def format_score(score):
        return "%.8f" % score


# -- instance policy -----------------------------------------------------

def _spec_failure(inst, spec, excl, sign):
    """Failure mode if ``inst`` is below (sign -1) the min or above
    (sign 1) the max ``spec``, else None (Ganeti's check order)."""
    def bad(v, s):
        return (v - s) * sign > 0
    if bad(inst.mem, spec.memory_size):
        return M.FAIL_MEM
    if any(bad(d, spec.disk_size) for d in inst.disk_sizes):
        return M.FAIL_DISK
    if bad(inst.vcpus, spec.cpu_count):
        return M.FAIL_CPU
    if excl:
        ts = inst.total_spindles
        if ts is None or bad(ts, spec.spindle_use):
            return M.FAIL_SPINDLES
    elif bad(inst.spindle_use, spec.spindle_use):
        return M.FAIL_SPINDLES
    if inst.disk_template != "diskless" and \
            bad(len(inst.disk_sizes), spec.disk_count):
        return FAIL_DISK_COUNT
    return None


def policy_failure(inst, ipol, excl):
    """Why ``inst`` violates the instance policy (None if it fits): it
    must fit one of the min/max ranges (the first range's failure is
    reported) and use an allowed disk template."""
    if ipol.minmax:
        first = None
        for mn, mx in ipol.minmax:
            f = _spec_failure(inst, mn, excl, -1) or \
                _spec_failure(inst, mx, excl, 1)
            if f is None:
                first = None
                break
            if first is None:
                first = f
        if first is not None:
            return first
    if inst.disk_template not in ipol.disk_templates:
        return M.FAIL_DISK
    return None


# -- evaluating one candidate ---------------------------------------------

class Evaluator:
    """Scores candidate placements of one instance against a fixed node
    set (the score's scope)."""

    def __init__(self, nodes, scope, opts):
        self.nodes = nodes
        self.opts = opts
        self.state = S.ScoreState(scope)
        self.old = {}
        self._verdicts = {}

    def old_values(self, nd):
        v = self.old.get(nd.idx)
        if v is None:
            v = self.old[nd.idx] = S.node_values(nd)
        return v

    def _map_delta(self, nd, inst):
        if not (nd.location_tags and inst.excl_tags):
            return 0
        d = 0
        for key in nd._excl_pairs(inst):
            d += self.state.pair_map_delta(key, 1)
        return d

    def primary(self, inst, pdx, loc_score=0):
        """(failure, new values, map delta) of ``inst`` as primary."""
        nd = self.nodes[pdx]
        # the policy is a group's: judged once per policy for the instance
        pkey = (id(inst), id(nd.ipolicy), nd.excl_storage)
        hit = self._verdicts.get(pkey)
        if hit is None or hit[0] is not inst:
            hit = self._verdicts[pkey] = (
                inst, policy_failure(inst, nd.ipolicy, nd.excl_storage))
        f = hit[1]
        if f is not None:
            return f, None, 0
        self.old_values(nd)
        saved = nd.save()
        inst.location_score = loc_score
        f = nd.add_pri(inst, force=self.opts.ignore_soft_errors)
        if f is not None:
            return f, None, 0
        new = S.node_values(nd)
        md = self._map_delta(nd, inst)
        nd.restore(saved)
        return None, new, md

    def secondary(self, inst, sdx, pdx):
        """(failure, new values) of ``inst`` as secondary for ``pdx``
        (always strict, as in Ganeti)."""
        nd = self.nodes[sdx]
        self.old_values(nd)
        saved = nd.save()
        f = nd.add_sec(inst, pdx)
        if f is not None:
            return f, None
        new = S.node_values(nd)
        nd.restore(saved)
        return None, new

    def score1(self, pdx, new, md=0):
        return self.state.score_after(
            [(self.old[pdx], new)], map_delta=md)

    def score2(self, pdx, pnew, md, sdx, snew):
        return self.state.score_after(
            [(self.old[pdx], pnew), (self.old[sdx], snew)], map_delta=md)


def _loc_score(nodes, pdx, sdx):
    return len(nodes[pdx].location_tags & nodes[sdx].location_tags)


# -- placing for real -----------------------------------------------------

def place(nodes, inst, pdx, sdx):
    """Put ``inst`` on its nodes for good (the checks passed before)."""
    inst.pnode = pdx
    inst.snode = sdx
    inst.location_score = _loc_score(nodes, pdx, sdx) \
        if sdx != M.NO_SECONDARY else 0
    nodes[pdx].add_pri(inst, force=True)
    if sdx != M.NO_SECONDARY:
        nodes[sdx].add_sec(inst, pdx, force=True)


def unplace(nodes, inst):
    if inst.snode != M.NO_SECONDARY:
        nodes[inst.snode].remove_sec(inst)
    nodes[inst.pnode].remove_pri(inst)


class _Applied:
    """Context: a candidate applied to the model for the capacity check,
    undone on exit."""

    def __init__(self, nodes, inst, pdx, sdx):
        self.nodes = nodes
        self.inst = inst
        self.pdx = pdx
        self.sdx = sdx

    def __enter__(self):
        idxs = [self.pdx] + ([self.sdx] if self.sdx != M.NO_SECONDARY
                             else [])
        self.saved = [(self.nodes[i], self.nodes[i].save()) for i in idxs]
        self.inst_saved = (self.inst.pnode, self.inst.snode,
                           self.inst.location_score)
        place(self.nodes, self.inst, self.pdx, self.sdx)
        return self

    def __exit__(self, *exc):
        for nd, st in self.saved:
            nd.restore(st)
        (self.inst.pnode, self.inst.snode,
         self.inst.location_score) = self.inst_saved
        return False


# -- the allocation of one instance ---------------------------------------

class Context:
    """A cluster being allocated on: nodes, instances (the new instance
    is appended while it is tried), groups and options."""

    def __init__(self, cdata, opts=None, reuse_checks=False):
        self.cdata = cdata
        self.nodes = cdata.nodes
        self.instances = cdata.instances
        self.groups = cdata.groups
        self.opts = opts or AllocOptions()
        #: bumped by every change of the model made through this context
        #: (``commit``, ``changed``)
        self.generation = 0
        # With ``reuse_checks`` (only for callers that change the model
        # through this context alone) the capacity checker of a state is
        # kept for the next allocation on the same state, and carried
        # over a placement it verified.
        self._reuse = reuse_checks
        self._checkers = {}

    # the new instance takes the next index while it is being tried
    def attach(self, inst):
        inst.idx = len(self.instances)
        self.instances.append(inst)

    def detach(self, inst):
        assert self.instances[-1] is inst
        self.instances.pop()

    def commit(self, inst, pdx, sdx, sol=None):
        """Place ``inst``; ``sol``, the Solution that chose the place,
        lets its capacity checker carry its work over."""
        place(self.nodes, inst, pdx, sdx)
        self.cdata.instance_by_name[inst.name] = inst
        keep = None
        if self._reuse and sol is not None and sol.checker is not None:
            changed = {pdx} if sdx == M.NO_SECONDARY else {pdx, sdx}
            if sol.checker.carry(changed):
                keep = sol.checker
        self.changed()
        if keep is not None:
            self._checkers[self._checker_key(keep.scope)] = (
                self.generation, keep)

    def changed(self):
        """The model was changed (or restored) outside ``commit``."""
        self.generation += 1
        self._checkers = {}

    def _checker_key(self, scope_idxs):
        return (tuple(scope_idxs), tuple(self.opts.capacity_ignore_groups),
                self.opts.accept_existing)

    def online_candidates(self, node_idxs):
        rst = self.opts.restrict_to_nodes
        res = [i for i in node_idxs if not self.nodes[i].offline]
        if rst is not None:
            allowed = set(rst)
            res = [i for i in res if self.nodes[i].name in allowed]
        return res

    def n1_predicate(self, scope_idxs):
        if not self.opts.capacity:
            return None
        if not self._reuse:
            return capacity.Checker(self, scope_idxs)
        key = self._checker_key(scope_idxs)
        hit = self._checkers.get(key)
        if hit is not None and hit[0] == self.generation:
            return hit[1]
        chk = capacity.Checker(self, scope_idxs)
        self._checkers[key] = (self.generation, chk)
        return chk


def _collect(sol, cands, checker, nodes, inst):
    """Ganeti's collection step: the best candidate that keeps the
    cluster N+1 redundant; the ones dropped before it count as FailN1.
    ``cands`` are (score, -order, pdx, sdx)."""
    if checker is not None and not checker.base_redundant():
        # an instance more never makes a node easier to evacuate: when
        # the cluster is not redundant now, no solution is
        sol.add_failure(M.FAIL_N1, sol.allocs)
        sol.allocs = 0
        return sol
    cands.sort()
    dropped = 0
    for score, _o, pdx, sdx in cands:
        if checker is not None:
            with _Applied(nodes, inst, pdx, sdx):
                ok = checker.redundant_with(
                    {pdx} if sdx == M.NO_SECONDARY else {pdx, sdx}, inst)
            if not ok:
                dropped += 1
                continue
        sol.best = (score, pdx, sdx)
        sol.checker = checker
        break
    sol.add_failure(M.FAIL_N1, dropped)
    sol.allocs -= dropped
    return sol


def try_alloc_single(ctx, inst, cands, scope_idxs):
    """Ganeti's allocation on one node: every candidate is tried."""
    sol = Solution()
    ev = Evaluator(ctx.nodes, [ctx.nodes[i] for i in scope_idxs], ctx.opts)
    found = []
    inst.snode = M.NO_SECONDARY
    for order, pdx in enumerate(cands):
        inst.pnode = pdx
        f, new, md = ev.primary(inst, pdx)
        if f is not None:
            sol.add_failure(f)
            continue
        found.append((ev.score1(pdx, new, md), -order, pdx,
                      M.NO_SECONDARY))
    sol.allocs = len(found)
    return _collect(sol, found, ctx.n1_predicate(scope_idxs), ctx.nodes,
                    inst)


def try_alloc_pairs(ctx, inst, pairs, scope_idxs):
    """Ganeti's allocation on a primary/secondary pair. ``pairs`` is
    [(primary, secondaries)]: the secondaries list may contain the
    primary itself, which is skipped (groups share one list)."""
    nodes = ctx.nodes
    opts = ctx.opts
    sol = Solution()
    ev = Evaluator(nodes, [nodes[i] for i in scope_idxs], opts)
    has_loc = any(nodes[i].location_tags for i in scope_idxs)
    # primaries: failure or values (without location score)
    prim = {}
    for pdx, _ss in pairs:
        inst.pnode = pdx
        prim[pdx] = ev.primary(inst, pdx)
    # secondaries for a primary they hold no instance of
    GENERIC = -2
    sec = {}
    lists = {}
    for _p, ss in pairs:
        if id(ss) not in lists:
            lists[id(ss)] = ss
            for sdx in ss:
                if sdx not in sec:
                    sec[sdx] = ev.secondary(inst, sdx, GENERIC)
    # exact failure counts and number of valid pairs, per secondaries
    # list: the generic counts, less the primary itself, corrected for
    # the secondaries that already hold instances of the primary
    generic = {}
    for key, ss in lists.items():
        cnt = {}
        for sdx in ss:
            f = sec[sdx][0]
            cnt[f] = cnt.get(f, 0) + 1
        generic[key] = cnt
    peer_fix = {}
    for key, ss in lists.items():
        members = set(ss)
        for sdx in ss:
            for pdx in nodes[sdx].peers:
                if pdx in members and pdx != sdx and pdx in prim:
                    peer_fix.setdefault((key, pdx), []).append(sdx)
    valid = 0
    npairs = 0
    for pdx, ss in pairs:
        key = id(ss)
        cnt = dict(generic[key])
        n_ss = len(ss)
        if pdx in ss:
            g = sec[pdx][0]
            cnt[g] -= 1
            n_ss -= 1
        npairs += n_ss
        f = prim[pdx][0]
        if f is not None:
            sol.add_failure(f, n_ss)
            continue
        for sdx in peer_fix.get((key, pdx), ()):
            cnt[sec[sdx][0]] -= 1
            sf = ev.secondary(inst, sdx, pdx)[0]
            cnt[sf] = cnt.get(sf, 0) + 1
        for mode, c in cnt.items():
            if mode is None:
                valid += c
            else:
                sol.add_failure(mode, c)
    sol.allocs = valid
    if not valid:
        return sol
    pos_p = {pdx: i for i, (pdx, _ss) in enumerate(pairs)}
    pos_s = {}
    for key, ss in lists.items():
        pos_s[key] = {sdx: i for i, sdx in enumerate(ss)}
    secs_of = {pdx: ss for pdx, ss in pairs}

    def order_of(pdx, sdx):
        ss = secs_of[pdx]
        return pos_p[pdx] * (len(ss) + 1) + pos_s[id(ss)][sdx]

    prim_cache = {}

    def pvals(pdx, sdx):
        ls = _loc_score(nodes, pdx, sdx) if has_loc else 0
        if ls == 0:
            return prim[pdx]
        key = (pdx, ls)
        v = prim_cache.get(key)
        if v is None:
            inst.pnode = pdx
            v = prim_cache[key] = ev.primary(inst, pdx, ls)
        return v

    def svals(sdx, pdx):
        if pdx in nodes[sdx].peers:
            return ev.secondary(inst, sdx, pdx)
        return sec[sdx]

    evaluated = {}

    def evaluate(pdx, sdx):
        if pdx == sdx:
            return None
        key = (pdx, sdx)
        if key in evaluated:
            return evaluated[key]
        pf, pnew, md = pvals(pdx, sdx)
        if pf is not None:
            evaluated[key] = None
            return None
        sf, snew = svals(sdx, pdx)
        if sf is not None:
            evaluated[key] = None
            return None
        sc = ev.score2(pdx, pnew, md, sdx, snew)
        evaluated[key] = sc
        return sc

    def all_pairs():
        for pdx, ss in pairs:
            if prim[pdx][0] is not None:
                continue
            for sdx in ss:
                evaluate(pdx, sdx)

    if npairs <= opts.exhaustive_pairs:
        all_pairs()
    else:
        _pruned_search(ev, pairs, secs_of, prim, sec, evaluate, opts)

    def cands():
        return [(sc, -order_of(p_, s_), p_, s_)
                for (p_, s_), sc in evaluated.items() if sc is not None]

    checker = ctx.n1_predicate(scope_idxs)
    _collect(sol, cands(), checker, nodes, inst)
    if sol.best is None and sol.allocs and checker is not None and \
            len(evaluated) < npairs:
        # every pruned candidate broke redundancy: look at all of them
        all_pairs()
        sol.failures.pop(M.FAIL_N1, None)
        sol.allocs = valid
        _collect(sol, cands(), checker, nodes, inst)
    return sol


def _pruned_search(ev, pairs, secs_of, prim, sec, evaluate, opts):
    width = opts.prune_width
    p_rank = sorted((ev.score1(p, v[1], v[2]), p)
                    for p, v in prim.items() if v[0] is None)
    s_rank = sorted((ev.score1(s, v[1]), s)
                    for s, v in sec.items() if v[0] is None)
    top_p = [p for _s, p in p_rank[:width]]
    top_s = {s for _s, s in s_rank[:width]}
    best = None
    for pdx in top_p:
        for sdx in secs_of[pdx]:
            if sdx in top_s and sdx != pdx:
                sc = evaluate(pdx, sdx)
                if sc is not None and (best is None or sc < best[0]):
                    best = (sc, pdx, sdx)
    if best is None:
        # the top nodes do not combine (other groups...): all pairs of
        # the best primaries
        for pdx in top_p:
            for sdx in secs_of[pdx]:
                sc = evaluate(pdx, sdx)
                if sc is not None and (best is None or sc < best[0]):
                    best = (sc, pdx, sdx)
    if best is None:
        return
    members = {}
    for _p, ss in pairs:
        if id(ss) not in members:
            members[id(ss)] = set(ss)

    def prims_for(sdx):
        return [p for p, ss in pairs if p != sdx and sdx in members[id(ss)]]
    for _round in range(4):
        old = best
        _sc, bp, bs = best
        for sdx in secs_of[bp]:
            sc = evaluate(bp, sdx)
            if sc is not None and sc < best[0]:
                best = (sc, bp, sdx)
        _sc, bp, bs = best
        for pdx in prims_for(bs):
            sc = evaluate(pdx, bs)
            if sc is not None and sc < best[0]:
                best = (sc, pdx, bs)
        if best == old:
            break


def alloc_targets(ctx, group_node_idxs, count):
    """Ganeti's candidate generation for one group: online nodes
    (restricted if asked), single nodes or (primary, [secondaries])."""
    cands = ctx.online_candidates(group_node_idxs)
    if count == 1:
        return cands
    if count == 2:
        nodes = ctx.nodes
        by_group = {}
        for i in cands:
            by_group.setdefault(nodes[i].group, []).append(i)
        # one shared secondaries list per group (the primary is skipped)
        return [(p, by_group[nodes[p].group]) for p in cands
                if len(by_group[nodes[p].group]) > 1]
    raise AllocError("Unsupported number of nodes, only one or two "
                     " supported")


def try_alloc(ctx, inst, count, group_node_idxs, scope_idxs):
    """A solution for one group, or AllocError (no online nodes)."""
    targets = alloc_targets(ctx, group_node_idxs, count)
    if count == 2:
        if not targets:
            raise AllocError("Not enough online nodes")
        sol = try_alloc_pairs(ctx, inst, targets, scope_idxs)
    else:
        if not targets:
            raise AllocError("No online nodes")
        sol = try_alloc_single(ctx, inst, targets, scope_idxs)
    sol.log.insert(0, sol.describe(ctx.nodes))
    return sol


def group_node_idxs(ctx):
    """{group idx: [node idx]} for the groups that have nodes."""
    res = {}
    for nd in ctx.nodes:
        res.setdefault(nd.group, []).append(nd.idx)
    return dict(sorted(res.items()))


def has_required_networks(group, inst):
    for nic in getattr(inst, "nics", None) or []:
        net = nic.get("network") if isinstance(nic, dict) else None
        if net is not None and net not in group.networks:
            return False
    return True


def solution_lines(group, sol, err):
    """A group's lines of an answer: its solution's log, or its error."""
    if err is not None:
        return ["Group %s: error %s" % (group.name, err)]
    return ["Group %s (%s): %s" % (group.name, group.alloc_policy, line)
            for line in sol.log]


def find_best_group(ctx, inst, count, allowed_groups=None):
    """(group, solution, messages) over all (or the allowed) groups,
    Ganeti's way: preferred before last_resort, then by score; the
    score's scope is the whole cluster.  AllocError when none fits."""
    by_group = group_node_idxs(ctx)
    all_idxs = list(range(len(ctx.nodes)))
    groups = [(ctx.groups[g], idxs) for g, idxs in by_group.items()]
    if allowed_groups is not None:
        groups = [(g, i) for g, i in groups if g.idx in allowed_groups]
    msgs = []
    valid = []
    for g, idxs in groups:
        if has_required_networks(g, inst):
            valid.append((g, idxs))
        else:
            msgs.append("group %s is not connected to a network required"
                        " by instance %s" % (g.name, inst.name))
    results = []
    for g, idxs in valid:
        try:
            sol = try_alloc(ctx, inst, count, idxs, all_idxs)
            results.append((g, sol, None))
        except AllocError as e:
            results.append((g, None, str(e)))
    for g, sol, err in results:
        msgs.extend(solution_lines(g, sol, err))
    good = [(g, sol) for g, sol, err in results
            if err is None and sol.best is not None
            and g.alloc_policy != "unallocable"]
    good.reverse()
    good.sort(key=lambda gs: (POLICY_RANK[gs[0].alloc_policy],
                              gs[1].best[0]))
    if not good:
        if not groups:
            raise AllocError("no groups for evacuation: allowed groups"
                             " was %s, all groups: %s"
                             % (sorted(allowed_groups or []),
                                [ctx.groups[g].name for g in by_group]))
        raise AllocError(", ".join(msgs))
    g, sol = good[0]
    return g, sol, msgs


def try_mg_alloc(ctx, inst, count):
    """Allocate on the best group (no group requested)."""
    g, sol, msgs = find_best_group(ctx, inst, count)
    sol.log = ["Selected group: %s" % g.name] + msgs
    return sol


def try_group_alloc(ctx, inst, count, group_name):
    """Allocate in the named group; the score's scope is the group."""
    g = ctx.cdata.find_group(group_name)
    if g is None:
        raise AllocError("Unknown group '%s'" % group_name)
    if not has_required_networks(g, inst):
        raise AllocError("The group %s is not connected to a network"
                         " required by instance %s" % (g.name, inst.name))
    idxs = [nd.idx for nd in ctx.nodes if nd.group == g.idx]
    sol = try_alloc(ctx, inst, count, idxs, idxs)
    sol.log = solution_lines(g, sol, None)
    return sol


def allocate(ctx, inst, count, group_name=None):
    """Allocate ``inst`` and, on success, place it (the cluster keeps
    it). Returns the Solution; raises AllocError when nothing fits."""
    if group_name is None:
        return place_found(ctx, inst,
                           lambda: try_mg_alloc(ctx, inst, count))
    return place_found(ctx, inst, lambda: try_group_alloc(
        ctx, inst, count, group_name))


def place_found(ctx, inst, find):
    """Run ``find`` (it returns a Solution) with ``inst`` attached, and
    place the instance where the solution says, if anywhere."""
    ctx.attach(inst)
    try:
        sol = find()
    except Exception:
        ctx.detach(inst)
        raise
    if sol.best is None:
        ctx.detach(inst)
        return sol
    _score, pdx, sdx = sol.best
    ctx.commit(inst, pdx, sdx)
    return sol


def required_nodes(disk_template):
    return 2 if disk_template == T.DT_DRBD else 1
