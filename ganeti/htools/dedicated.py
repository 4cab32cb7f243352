"""Dedicated allocation: placing new instances on node groups whose
nodes all have exclusive storage, with Ganeti's "lost allocations"
metric instead of the cluster score.

Such groups hand out large slices of a node (a quarter, a half, a whole
node) to single instances; balancing them would spread small instances
over the empty nodes and leave no room for a big one.  Instead, a new
instance goes where it destroys the fewest future allocations:

* the test instances are the minimal instances of the instance policy's
  min/max ranges (memory, disk, vcpus and spindle use of each range's
  min spec, plain, no disk spindles), ordered by disk size, largest
  first (ranges with equal disk sizes keep the policy's order);
* a node's allocation vector counts, for each test instance, how many
  copies of it the node still accepts (``Node.add_pri``, strict);
* placing the new instance on a node loses some of them: the
  lost-allocations vector is the vector before less the vector after;
* a candidate's metric is (lost-allocations vector, free disk of the
  node after the placement); for drbd both vectors and both free disks
  are added (the secondary's test instances are the primary's).
  Vectors compare lexicographically, then the disk: a candidate that
  loses a big allocation is worse than any that loses only small ones,
  and among equals the fuller node wins.

The lowest metric wins; on a tie the later candidate in node order (the
later primary, then the later secondary).  There is no global N+1
check on this path (Ganeti's hail applies none), failures are counted
per candidate as in the normal path, and the answer names the metric
as Ganeti prints it (``score: ([0,1,2],1974272), ...``).

It is used for allocate and multi-allocate requests when the requested
group, or every group that is not unallocable when none is requested,
has only exclusive-storage nodes (``is_dedicated``).  Everything else
(relocations, evacuations, hspace) keeps the normal path.
"""

import attrs

from ganeti.htools import alloc as A
from ganeti.htools import model as M

#: a test instance that never stops fitting (a policy whose min spec is
#: all zeros) is counted up to this many copies
MAX_COPIES = 1 << 31

#: the index of the test instances while they are tried on a node (no
#: real instance has a negative index)
_TEST_IDX = -2


def is_dedicated(cdata, group_name=None):
    """Whether allocation uses the lost-allocations metric: every node of
    the named group (of every allocatable group when ``group_name`` is
    None) has exclusive storage.  As in Ganeti, a name that matches no
    group makes the condition hold trivially."""
    if group_name is None:
        wanted = {g.idx for g in cdata.groups
                  if g.alloc_policy != "unallocable"}
    else:
        wanted = {g.idx for g in cdata.groups if g.name == group_name}
    return all(nd.excl_storage for nd in cdata.nodes
               if nd.group in wanted)


def test_specs(ipolicy):
    """The min specs of the policy's ranges, largest disk first."""
    mins = [mn for mn, _mx in ipolicy.minmax]
    # sorted() is stable: equal disk sizes keep the policy's order
    return tuple(sorted(mins, key=lambda s: -s.disk_size))


def _copies(spec, k):
    """``k`` copies of the minimal instance of ``spec`` as one instance:
    every admission check of ``Node.add_pri`` is monotone in the
    resources taken, so a node accepts k copies one after the other
    exactly when it accepts this one."""
    inst = M.Instance("minimalspecinstance", spec.memory_size * k,
                      spec.disk_size * k, spec.cpu_count * k, "running", [],
                      False, M.NO_SECONDARY, M.NO_SECONDARY, "plain",
                      spec.spindle_use * k, disk_spindles=[0],
                      disk_sizes=[])
    inst.idx = _TEST_IDX
    return inst


def _accepts(nd, spec, k):
    inst = _copies(spec, k)
    saved = nd.save_for(inst)
    if nd.add_pri(inst) is not None:
        return False
    nd.restore_for(inst, saved)
    return True


def fit_count(nd, spec):
    """How many copies of the minimal instance of ``spec`` the node still
    accepts (Ganeti adds them one by one until one fails; the count is
    found here by doubling and bisection)."""
    if not _accepts(nd, spec, 1):
        return 0
    lo, hi = 1, 2
    while hi <= MAX_COPIES and _accepts(nd, spec, hi):
        lo, hi = hi, hi * 2
    if hi > MAX_COPIES:
        return MAX_COPIES
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _accepts(nd, spec, mid):
            lo = mid
        else:
            hi = mid
    return lo


def allocation_vector(nd, specs):
    return tuple(fit_count(nd, s) for s in specs)


def lost(before, after):
    return tuple(b - a for b, a in zip(before, after))


def format_metric(metric):
    """The metric as Ganeti shows it: ``([1,0,2],1974272)``."""
    vec, dsk = metric
    return "([%s],%d)" % (",".join("%d" % v for v in vec), dsk)


@attrs.define
class Solution(A.Solution):
    """An allocation solution whose ``best`` is (metric, pdx, sdx); the
    group it was found in, for a multi-group allocation."""
    group: object = None

    @staticmethod
    def format_score(score):
        return format_metric(score)


class _Vectors:
    """Allocation vectors of the nodes in their current state, computed
    once per node and test instance list (the state does not change
    while one instance is being allocated)."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.cache = {}

    def specs(self, nd):
        return test_specs(nd.ipolicy)

    def before(self, idx, specs):
        key = (idx, specs)
        v = self.cache.get(key)
        if v is None:
            v = self.cache[key] = allocation_vector(self.nodes[idx], specs)
        return v


def _primary(ctx, vec, inst, pdx, specs):
    """(failure, lost vector, free disk after) of ``inst`` as primary on
    ``pdx``: the policy first, then the node (soft checks skipped with
    ``ignore_soft_errors``, as for the normal path)."""
    nd = ctx.nodes[pdx]
    f = A.policy_failure(inst, nd.ipolicy, nd.excl_storage)
    if f is not None:
        return f, None, None
    before = vec.before(pdx, specs)
    saved = nd.save_for(inst)
    f = nd.add_pri(inst, force=ctx.opts.ignore_soft_errors)
    if f is not None:
        return f, None, None
    after = allocation_vector(nd, specs)
    dsk = nd.f_dsk
    nd.restore_for(inst, saved)
    return None, lost(before, after), dsk


def _secondary(ctx, vec, inst, sdx, pdx, specs):
    """(failure, lost vector, free disk after) of ``inst`` as secondary
    on ``sdx`` for the primary ``pdx`` (always strict)."""
    nd = ctx.nodes[sdx]
    before = vec.before(sdx, specs)
    saved = nd.save_for(inst)
    f = nd.add_sec(inst, pdx)
    if f is not None:
        return f, None, None
    after = allocation_vector(nd, specs)
    dsk = nd.f_dsk
    nd.restore_for(inst, saved)
    return None, lost(before, after), dsk


def allocate_single(ctx, inst, cands):
    """Every candidate node; the lowest metric wins, the later one on a
    tie."""
    sol = Solution()
    vec = _Vectors(ctx.nodes)
    inst.snode = M.NO_SECONDARY
    for pdx in cands:
        inst.pnode = pdx
        specs = vec.specs(ctx.nodes[pdx])
        f, lv, dsk = _primary(ctx, vec, inst, pdx, specs)
        if f is not None:
            sol.add_failure(f)
            continue
        sol.allocs += 1
        metric = (lv, dsk)
        if sol.best is None or metric <= sol.best[0]:
            sol.best = (metric, pdx, M.NO_SECONDARY)
    return sol


def allocate_pairs(ctx, inst, pairs):
    """Every (primary, secondary) pair of ``pairs`` ([(primary,
    secondaries)], a secondaries list may contain its primary, which is
    skipped); the lowest metric wins, the later pair on a tie."""
    nodes = ctx.nodes
    sol = Solution()
    vec = _Vectors(nodes)
    # a secondary's outcome depends on the primary only when it already
    # holds instances of that primary (its failover reservation)
    sec_cache = {}

    def secondary(sdx, pdx, specs):
        key = (sdx, pdx if pdx in nodes[sdx].peers else None, specs)
        v = sec_cache.get(key)
        if v is None:
            inst.pnode, inst.snode = pdx, sdx
            v = sec_cache[key] = _secondary(ctx, vec, inst, sdx, pdx, specs)
        return v

    for pdx, ss in pairs:
        specs = vec.specs(nodes[pdx])
        inst.pnode, inst.snode = pdx, M.NO_SECONDARY
        pf, plv, pdsk = _primary(ctx, vec, inst, pdx, specs)
        if pf is not None:
            sol.add_failure(pf, sum(1 for s in ss if s != pdx))
            continue
        for sdx in ss:
            if sdx == pdx:
                continue
            sf, slv, sdsk = secondary(sdx, pdx, specs)
            if sf is not None:
                sol.add_failure(sf)
                continue
            sol.allocs += 1
            metric = (tuple(a + b for a, b in zip(plv, slv)), pdsk + sdsk)
            if sol.best is None or metric <= sol.best[0]:
                sol.best = (metric, pdx, sdx)
    return sol


def _try_group(ctx, inst, count, group):
    """The solution for one group (its log is the description line);
    AllocError for a group that cannot take the instance at all."""
    if not A.has_required_networks(group, inst):
        raise A.AllocError("The group %s is not connected to a network"
                           " required by instance %s"
                           % (group.name, inst.name))
    idxs = [nd.idx for nd in ctx.nodes if nd.group == group.idx]
    targets = A.alloc_targets(ctx, idxs, count)
    if count == 2:
        if not targets:
            raise A.AllocError("Not enough online nodes")
        sol = allocate_pairs(ctx, inst, targets)
    else:
        if not targets:
            raise A.AllocError("No online nodes")
        sol = allocate_single(ctx, inst, targets)
    sol.log = [sol.describe(ctx.nodes)]
    return sol


def find_group(ctx, group_name):
    """The group named (or with the UUID) ``group_name``; AllocError, in
    Ganeti's words, when there is none."""
    found = [g for g in ctx.groups if group_name in (g.name, g.uuid)]
    if len(found) != 1:
        raise A.AllocError("Wrong number of elems found with name %s"
                           % group_name)
    return found[0]


def find_allocation(ctx, inst, count, group_name):
    """Allocation in the named group; the log is the group's line."""
    group = find_group(ctx, group_name)
    sol = _try_group(ctx, inst, count, group)
    sol.log = A.solution_lines(group, sol, None)
    return sol


def find_mg_allocation(ctx, inst, count, only_groups=None):
    """Allocation in the best group: every group with nodes (of
    ``only_groups`` when given) is tried; preferred groups before
    last_resort ones, then the lowest metric (the earlier group on a
    tie), never an unallocable group.  AllocError, with every group's
    line, when no group has a solution."""
    results = []
    for gidx in A.group_node_idxs(ctx):
        if only_groups is not None and gidx not in only_groups:
            continue
        g = ctx.groups[gidx]
        try:
            results.append((g, _try_group(ctx, inst, count, g), None))
        except A.AllocError as e:
            results.append((g, None, str(e)))
    msgs = []
    for g, sol, err in results:
        msgs.extend(A.solution_lines(g, sol, err))
    good = [(g, sol) for g, sol, err in results
            if err is None and sol.best is not None
            and g.alloc_policy != "unallocable"]
    good.reverse()
    good.sort(key=lambda gs: (A.POLICY_RANK[gs[0].alloc_policy],
                              gs[1].best[0]))
    if not good:
        raise A.AllocError(", ".join(msgs))
    g, sol = good[0]
    sol.group = g
    sol.log = ["Selected group: %s" % g.name] + msgs
    return sol


def allocate(ctx, inst, count, group_name=None):
    """Allocate ``inst`` with the lost-allocations metric and, on
    success, place it.  Returns the Solution (``best`` None when the
    named group has no valid placement); AllocError when nothing can be
    answered (unknown group, no online nodes, no group fits)."""
    if group_name is None:
        return A.place_found(ctx, inst,
                      lambda: find_mg_allocation(ctx, inst, count))
    return A.place_found(ctx, inst,
                  lambda: find_allocation(ctx, inst, count, group_name))


def multi_allocate(ctx, items, group_name=None):
    """Allocate ``items`` ([(instance, node count)]) one after the other:
    ([(instance, nodes)], [(instance, reason)]); AllocError fails the
    whole request.

    As Ganeti's hail does here: without a group, the first instance
    placed fixes the group of the following ones, and one that fits
    nowhere fails the request; with a group, an instance that does not
    fit is reported (its reason without the group's name) and the next
    ones are still tried.  Unlike Ganeti's hail, which computes every
    instance of a request naming a group against the cluster as it was
    before the request (and can so put them all on one node, beyond its
    capacity), each instance here sees the ones placed before it."""
    done, failed = [], []
    only = None
    for inst, count in items:
        if group_name is None:
            sol = A.place_found(ctx, inst, lambda: find_mg_allocation(
                ctx, inst, count, only))
            only = {sol.group.idx}
        else:
            group = find_group(ctx, group_name)
            sol = A.place_found(ctx, inst, lambda: _try_group(
                ctx, inst, count, group))
        if sol.best is None:
            failed.append((inst, ", ".join(sol.log)))
        else:
            done.append((inst, [ctx.nodes[i].name
                                for i in inst.all_nodes()]))
    return done, failed
