"""Capacity planning (what ``hspace`` computes): how many instances of a
spec fit on the cluster (standard allocation), and how many when the
spec shrinks whenever it no longer fits (tiered allocation), with
Ganeti's algorithms so the counts are the same as Ganeti's.
"""

import attrs

from ganeti.htools import alloc as A
from ganeti.htools import capacity
from ganeti.htools import model as M
from ganeti.htools import score as S
from ganeti.htools import types as T
from ganeti.htools.model import Instance

UNIT_MEM = 64
UNIT_DSK = 256
UNIT_CPU = 1
UNIT_SPINDLE = 1


@attrs.frozen
class RSpec:
    mem: int
    dsk: int
    cpu: int
    spn: int = 1


def rspec_from_ispec(ispec):
    return RSpec(ispec.memory_size, ispec.disk_size, ispec.cpu_count,
                 ispec.spindle_use)


def make_instance(spec, disk_template, spindle_use, name="new"):
    return Instance(name, spec.mem, spec.dsk, spec.cpu, "running", [],
                    True, -1, -1, disk_template, spindle_use,
                    disk_spindles=[spec.spn], disk_sizes=[spec.dsk])


def spec_of(inst):
    sp = inst.disk_spindles
    spn = sp[0] if len(sp) == 1 and sp[0] is not None else 0
    return RSpec(inst.mem, inst.dsk, inst.vcpus, spn)


def underlying(mode):
    return M.FAIL_MEM if mode == M.FAIL_N1 else mode


def shrink(inst, mode):
    """Ganeti's shrinking of an instance spec by one unit of the
    resource that failed; None when it cannot shrink further."""
    spec = spec_of(inst)
    if mode == M.FAIL_MEM:
        v = spec.mem - UNIT_MEM
        if v < UNIT_MEM:
            return None
        spec = attrs.evolve(spec, mem=v)
    elif mode == M.FAIL_DISK:
        v = spec.dsk - UNIT_DSK
        if v < UNIT_DSK:
            return None
        spec = attrs.evolve(spec, dsk=v)
    elif mode == M.FAIL_CPU:
        v = spec.cpu - UNIT_CPU
        if v < UNIT_CPU:
            return None
        spec = attrs.evolve(spec, cpu=v)
    elif mode == M.FAIL_SPINDLES:
        if len(inst.disk_spindles) != 1 or inst.disk_spindles[0] is None:
            return None
        v = spec.spn - UNIT_SPINDLE
        if v < UNIT_SPINDLE:
            return None
        spec = attrs.evolve(spec, spn=v)
    else:
        return None
    return make_instance(spec, inst.disk_template, inst.spindle_use)


# -- cluster statistics ---------------------------------------------------

@attrs.define
class CStats:
    fmem: int = 0
    fdsk: int = 0
    fspn: int = 0
    amem: int = 0
    adsk: int = 0
    acpu: int = 0
    mmem: int = 0
    mdsk: int = 0
    mcpu: int = 0
    imem: int = 0
    idsk: int = 0
    ispn: int = 0
    icpu: int = 0
    tmem: float = 0.0
    tdsk: float = 0.0
    tspn: float = 0.0
    tcpu: float = 0.0
    vcpu: int = 0
    ncpu: float = 0.0
    xmem: int = 0
    nmem: int = 0
    score: float = 0.0
    ninst: int = 0


def free_mem(nd):
    return int(nd.t_mem) - nd.n_mem - nd.i_mem - nd.x_mem


def total_resources(nodes):
    cs = CStats()
    for nd in nodes:
        fm = free_mem(nd)
        amem = max(fm - nd.r_mem, 0)
        adsk = nd.avail_disk()
        acpu = nd.avail_cpu()
        cs.fmem += fm
        cs.fdsk += nd.f_dsk
        cs.fspn += nd.f_spindles
        cs.amem += amem
        cs.adsk += adsk
        cs.acpu += acpu
        cs.mmem = max(cs.mmem, amem)
        cs.mdsk = max(cs.mdsk, adsk)
        cs.mcpu = max(cs.mcpu, acpu)
        cs.imem += int(nd.t_mem) - nd.n_mem - nd.x_mem - fm
        cs.idsk += int(nd.t_dsk) - nd.f_dsk
        cs.ispn += nd.t_spindles - nd.f_spindles
        cs.icpu += nd.u_cpu
        cs.tmem += nd.t_mem
        cs.tdsk += nd.t_dsk
        cs.tspn += nd.t_spindles
        cs.tcpu += nd.t_cpu
        cs.vcpu += nd.hi_cpu
        cs.ncpu += nd.u_cpu / nd.ipolicy.vcpu_ratio
        cs.xmem += nd.x_mem
        cs.nmem += nd.n_mem
        cs.ninst += len(nd.plist)
    cs.score = S.compute_score(nodes)
    return cs


# -- the allocation loops -------------------------------------------------

class Planner:
    """Allocation runs on one cluster; every run starts from the state
    the planner was created with (``reset``)."""

    def __init__(self, cdata, opts, disk_template, allocable_groups):
        self.cdata = cdata
        self.opts = opts
        self.dt = disk_template
        self.count = A.required_nodes(disk_template)
        self.ctx = A.Context(cdata, opts, reuse_checks=True)
        self.scope = list(range(len(cdata.nodes)))
        cands = [nd.idx for nd in cdata.nodes
                 if nd.group in allocable_groups]
        self.targets = A.alloc_targets(self.ctx, cands, self.count)
        self.initial = self.snapshot()
        # the instance policies the allocation judges by: their bounds
        # split the shrinking walks (see _ShrinkSeq.segments)
        pols = {}
        for nd in cdata.nodes:
            pols.setdefault(id(nd.ipolicy), nd.ipolicy)
        self.policies = tuple(pols.values())
        self._memo = {}
        self._memo_version = None

    def snapshot(self):
        return ([(nd, nd.save()) for nd in self.cdata.nodes],
                len(self.cdata.instances))

    def restore(self, snap):
        saved, ninst = snap
        for nd, st in saved:
            nd.restore(st)
        insts = self.cdata.instances
        for inst in insts[ninst:]:
            self.cdata.instance_by_name.pop(inst.name, None)
        del insts[ninst:]
        self.ctx.changed()

    def reset(self):
        self.restore(self.initial)

    def try_alloc(self, inst, capacity_on):
        """The Solution for ``inst`` (attached while tried)."""
        saved = self.ctx.opts.capacity
        self.ctx.opts.capacity = capacity_on
        self.ctx.attach(inst)
        try:
            if not self.targets:
                return None
            if self.count == 2:
                return A.try_alloc_pairs(self.ctx, inst, self.targets,
                                         self.scope)
            return A.try_alloc_single(self.ctx, inst, self.targets,
                                      self.scope)
        finally:
            self.ctx.detach(inst)
            self.ctx.opts.capacity = saved

    def _small_steps(self, spec_inst, limit, capacity_on, placed):
        """Allocate copies of ``spec_inst`` until one fails or the limit
        is reached; returns the failure stats of the last attempt."""
        if self.dt == T.DT_DRBD:
            capacity_on = False
        while True:
            inst = make_instance(spec_of(spec_inst), self.dt,
                                 spec_inst.spindle_use,
                                 "new-%d" % len(placed))
            sol = self.try_alloc(inst, capacity_on)
            if sol is None:
                raise A.AllocError("No online nodes" if self.count == 1
                                   else "Not enough online nodes")
            stats = sol.failure_stats()
            if sol.best is None or limit == 0:
                return stats
            _sc, pdx, sdx = sol.best
            self.ctx.attach(inst)
            self.ctx.commit(inst, pdx, sdx, sol)
            placed.append(inst)
            if limit is not None:
                limit -= 1

    def _bigstep_size(self, inst):
        nodes = self.cdata.nodes
        unused = sum(free_mem(nd) for nd in nodes)
        reserved = int(round(max(nd.t_mem for nd in nodes)))
        guess = (unused - reserved) // inst.mem - len(nodes) \
            if inst.mem else 20
        return max(guess, 20)

    def iterate(self, spec_inst, limit, placed):
        """Ganeti's standard allocation (with its speed-up: big steps
        without capacity checks, kept when the result is redundant)."""
        if not self.opts.capacity:
            return self._small_steps(spec_inst, limit, False, placed)
        return self._iterate(True, spec_inst, limit, placed)

    def _iterate(self, huge, spec_inst, limit, placed):
        while True:
            step = self._bigstep_size(spec_inst) if huge else 10
            if limit is None:
                lim, newlimit = step, None
            else:
                lim, newlimit = min(step, limit), max(0, limit - step)
            snap = self.snapshot()
            before = len(placed)
            stats = self._small_steps(spec_inst, lim, False, placed)
            if capacity.redundant(self.ctx, self.scope):
                if newlimit == 0 or len(placed) == before:
                    return stats
                limit = newlimit
                continue
            self.restore(snap)
            del placed[before:]
            if huge:
                huge = False
                continue
            return self._small_steps(spec_inst, limit, True, placed)

    def alloc_fn(self, inst):
        sol = self.try_alloc(inst, self.opts.capacity)
        return sol if sol is not None else A.Solution()

    # -- tiered allocation ----------------------------------------------

    def _outcome(self, inst, capacity_on):
        """(failure counts, success) of allocating ``inst`` on the
        current cluster, remembered while the cluster does not change
        (tiered allocation asks for the same specs many times)."""
        version = self.ctx.generation
        if self._memo_version != version:
            self._memo = {}
            self._memo_version = version
        key = (inst.mem, inst.dsk, inst.vcpus, tuple(inst.disk_spindles),
               capacity_on)
        res = self._memo.get(key)
        if res is None:
            sol = self.try_alloc(inst, capacity_on)
            if sol is None:
                raise A.AllocError("No online nodes" if self.count == 1
                                   else "Not enough online nodes")
            res = self._memo[key] = (dict(sol.failures),
                                     sol.best is not None)
        return res

    def _probe(self, inst):
        """The outcome of the iteration's first allocation of ``inst``
        (drbd without capacity checks, as the iteration does)."""
        return self._outcome(inst, self.opts.capacity
                             and self.dt != T.DT_DRBD)

    def tiered(self, spec_inst, limit, placed):
        """Ganeti's tiered allocation from ``spec_inst``: allocate the
        spec until it no longer fits, then shrink it by its most frequent
        failure, one unit at a time, until something fits again (and go
        on from there).  When that walk ends (a spec that cannot shrink)
        without anything placed, the specs of the walk, last first, get
        a second chance: shrinking one resource (most frequent failure
        first) while the allocation keeps failing on it, until it
        succeeds (``_suffices_shrinking``).

        The walk does not try every unit: it looks ahead
        (``_monotone_find``) for where the outcome changes (a success,
        or another most frequent failure); the specs it skips are only
        looked at for their second chance, when needed."""
        stats = self.iterate(spec_inst, limit, placed)
        while True:
            start = len(placed)
            walk = self._walk(spec_inst, _counts(stats), limit, start)
            if walk[0] == "placed":
                _tag, spec_inst, limit = walk
                stats = self.iterate(spec_inst, limit, placed)
                continue
            for lvl_inst, lvl_counts, lvl_lim in walk[1]:
                big = None
                for m in _errs_most_first(lvl_counts):
                    big = self._suffices_shrinking(lvl_inst, m)
                    if big is not None:
                        break
                if big is None:
                    continue
                res = self.tiered(big, lvl_lim, placed)
                if len(placed) > start or lvl_inst is spec_inst:
                    return res
            return stats

    def _walk(self, cur, counts, lim, cnt):
        """The shrinking walk from ``cur`` (whose iteration failed with
        ``counts``): ("placed", spec, limit) where an allocation
        succeeds, or ("end", levels) with every spec of the walk, last
        first, as (spec, failure counts, limit), generated lazily.

        A limit is reduced by the instance count at every unit (as in
        Ganeti)."""
        segments = []
        unit = 0
        while True:
            if lim is not None and lim <= cnt + unit * cnt:
                return "end", self._levels(segments, lim, cnt)
            head = _most_frequent(counts)
            seq = _ShrinkSeq(cur, head, self.policies)
            if lim is not None and cnt > 0:
                # units allowed from here before the limit stops the walk
                seq.cap = (lim - unit * cnt - cnt - 1) // cnt + 1
            seq.first_counts = counts
            segments.append((seq, unit))

            def changed(i):
                if i == 0:
                    return False
                c, ok = self._probe(seq[i])
                return ok or _most_frequent(c) != head

            k = _monotone_find(seq, changed, 0)
            if k is None:
                seq.end = seq.length()
                return "end", self._levels(segments, lim, cnt)
            seq.end = k
            c, ok = self._probe(seq[k])
            unit += k
            if ok:
                return "placed", seq[k], _sub(lim, cnt * unit)
            cur, counts = seq[k], c

    def _levels(self, segments, lim, cnt):
        """The walk's specs, last first, with their failure counts and
        the limit each passes on; the ones stopped by the limit are
        left out."""
        for seq, unit0 in reversed(segments):
            for i in range(seq.end - 1, -1, -1):
                unit = unit0 + i
                if lim is not None and lim - unit * cnt <= cnt:
                    continue
                inst = seq[i]
                counts = seq.first_counts if i == 0 else \
                    self._probe(inst)[0]
                yield inst, counts, _sub(lim, (unit + 1) * cnt)

    def _suffices_shrinking(self, inst, mode):
        """The first spec shrunk by ``mode`` from ``inst`` that can be
        allocated, as long as every spec before it fails on ``mode``;
        None otherwise.  Looked for like the walk (``_monotone_find``)."""
        seq = _ShrinkSeq(inst, mode, self.policies)

        def stop(i):
            failures, ok = self._outcome(seq[i], self.opts.capacity)
            return ok or mode not in failures

        def fits(i):
            return self._outcome(seq[i], self.opts.capacity)[1]

        k = _monotone_find(seq, stop, 0, bisect=True, wanted=fits)
        if k is None:
            return None
        return seq[k] if fits(k) else None


def _counts(stats):
    return {m: c for m, c in stats if c}


def _sorted_errs(counts):
    """Failure modes by count, fewest first (ties in Ganeti's order)."""
    return sorted(A.FAIL_MODES, key=lambda m: counts.get(m, 0))


def _most_frequent(stats):
    return _sorted_errs(stats)[-1]


def _errs_most_first(stats):
    return list(reversed(_sorted_errs(stats)))


def _sub(lim, n):
    return None if lim is None else lim - n


_UNITS = {M.FAIL_MEM: ("mem", UNIT_MEM), M.FAIL_DISK: ("dsk", UNIT_DSK),
          M.FAIL_CPU: ("cpu", UNIT_CPU),
          M.FAIL_SPINDLES: ("spn", UNIT_SPINDLE)}

#: the instance policy's bound on each shrinkable field
_POLICY_FIELD = {"mem": "memory_size", "dsk": "disk_size",
                 "cpu": "cpu_count", "spn": "spindle_use"}


class _ShrinkSeq:
    """The instance and its successive shrinks by one mode (``shrink``
    applied again and again), built on demand by index."""

    def __init__(self, inst, mode, policies=()):
        self.inst = inst
        self.items = {0: inst}
        self.spec = spec_of(inst)
        self.policies = policies
        unit = _UNITS.get(mode)
        if unit is None or (mode == M.FAIL_SPINDLES and (
                len(inst.disk_spindles) != 1
                or inst.disk_spindles[0] is None)):
            self.n = 1
            self.field = None
        else:
            self.field, self.unit = unit
            v = getattr(self.spec, self.field)
            self.n = 1 + max(0, (v - self.unit) // self.unit)
        #: the last index allowed (None: as far as the spec shrinks)
        self.cap = None

    def length(self):
        return self.n if self.cap is None else min(self.n, self.cap + 1)

    def has(self, i):
        return 0 <= i < self.length()

    def __getitem__(self, i):
        it = self.items.get(i)
        if it is None:
            v = getattr(self.spec, self.field) - i * self.unit
            it = self.items[i] = make_instance(
                attrs.evolve(self.spec, **{self.field: v}),
                self.inst.disk_template, self.inst.spindle_use)
        return it

    def next_grid(self, i):
        """The first index after ``i`` whose value is a multiple of
        ``LOOK_AHEAD`` units: searches along the same line (other start
        points, other predicates) look at the same specs, which the
        planner remembers."""
        if self.field is None:
            return i + 1
        q = getattr(self.spec, self.field) // self.unit - i
        return i + (q - 1) % LOOK_AHEAD + 1

    def segments(self, start):
        """The index ranges ``[a, b)`` from ``start`` on which the
        instance policies judge the shrunk field the same way: split
        where the field falls below a range's minimum or to its
        maximum.  Below a minimum every node fails on the field again,
        so the outcome along the walk is only monotone within one
        range."""
        n = self.length()
        cuts = set()
        if self.field is not None:
            v0 = getattr(self.spec, self.field)
            pfield = _POLICY_FIELD[self.field]
            for pol in self.policies:
                for mn, mx in pol.minmax:
                    lo, hi = getattr(mn, pfield), getattr(mx, pfield)
                    # the first index below the minimum, the first at
                    # or under the maximum
                    cuts.add((v0 - lo) // self.unit + 1)
                    cuts.add(-(-(v0 - hi) // self.unit))
        edges = [start] + sorted(c for c in cuts if start < c < n) + [n]
        return [(a, b) for a, b in zip(edges, edges[1:]) if a < b]


LOOK_AHEAD = 50


def _monotone_find(seq, pred, start, bisect=False, wanted=None):
    """Index of the first element from ``start`` satisfying ``pred``,
    assumed monotone within each of the sequence's segments (the
    instance policy's ranges): look ahead to the next grid point
    (``LOOK_AHEAD`` units) or the segment's last element; when that
    one satisfies it, the answer is the first satisfying element up to
    it, else go on after it.  That first element is found by a linear
    scan, or by bisection (``bisect``: for predicates monotone within
    the look-ahead too).

    ``wanted``: only an element satisfying it is of use (None is
    returned otherwise); it is assumed monotone like ``pred``, so an
    element that satisfies ``pred`` but not ``wanted`` ends the search
    without narrowing down."""
    if bisect and seq.has(start) and pred(start):
        return start if wanted is None or wanted(start) else None
    for a, b in seq.segments(start):
        lo = a
        while lo < b:
            probe = min(seq.next_grid(lo), b - 1)
            if pred(probe):
                if wanted is not None and not wanted(probe):
                    return None
                if bisect:
                    hi = probe
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if pred(mid):
                            hi = mid
                        else:
                            lo = mid + 1
                    return hi
                for i in range(lo, probe):
                    if pred(i):
                        return i if wanted is None or wanted(i) else None
                return probe
            lo = probe + 1
    return None
