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
        self.ctx = A.Context(cdata, opts)
        self.scope = list(range(len(cdata.nodes)))
        cands = [nd.idx for nd in cdata.nodes
                 if nd.group in allocable_groups]
        self.targets = A.alloc_targets(self.ctx, cands, self.count)
        self.initial = self.snapshot()

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
            self.ctx.commit(inst, pdx, sdx)
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

    def tiered(self, spec_inst, limit, placed):
        """Ganeti's tiered allocation from ``spec_inst``: allocate the
        spec until it no longer fits, then shrink it by its most frequent
        failure, one unit at a time, until something fits again (and go
        on from there).  When that walk ends (a spec that cannot shrink)
        without anything placed, the specs of the walk, last first, get
        a second chance: shrinking one resource (most frequent failure
        first) while the allocation keeps failing on it, until it
        succeeds.

        The walk is not done unit by unit: the allocation is tried ahead
        (``_monotone_find``) and only where the outcome changes (a
        success, or another most frequent failure) are the units in
        between tried one by one."""
        stats = self.iterate(spec_inst, limit, placed)
        while True:
            start = len(placed)
            walk = self._walk(spec_inst, stats, limit, start)
            if walk[0] == "placed":
                _tag, nxt, lim = walk
                spec_inst, limit = nxt, lim
                stats = self.iterate(nxt, lim, placed)
                continue
            levels = walk[1]
            for lvl_inst, lvl_stats, lvl_lim in reversed(levels):
                big = None
                for m in _errs_most_first(lvl_stats):
                    big = self._suffices_shrinking(lvl_inst, m)
                    if big is not None:
                        break
                if big is None:
                    continue
                res = self.tiered(big, lvl_lim, placed)
                if len(placed) > start or lvl_inst is spec_inst:
                    return res
            return stats

    def _probe(self, inst):
        """The failure statistics and success of allocating ``inst`` as
        the iteration's first step would (drbd without capacity
        checks)."""
        cap = self.opts.capacity and self.dt != T.DT_DRBD
        sol = self.try_alloc(inst, cap)
        if sol is None:
            raise A.AllocError("No online nodes" if self.count == 1
                               else "Not enough online nodes")
        return sol.failure_stats(), sol.best is not None

    def _walk(self, cur, cur_stats, lim, cnt):
        """The shrinking walk from ``cur`` (whose iteration gave
        ``cur_stats``): ("placed", spec, limit) where an allocation
        succeeds, or ("end", levels) with the specs where the walk
        turned and the last one, as (spec, stats, limit)."""
        levels = []
        while True:
            if lim is not None and lim <= cnt:
                return "end", levels
            levels.append((cur, cur_stats, _sub(lim, cnt)))
            head = _most_frequent(cur_stats)
            seq = _ShrinkSeq(cur, head)
            # a limit shrinks by the instance count at every unit
            if lim is not None and cnt > 0:
                seq.cap = (lim - cnt - 1) // cnt + 1
            probed = {}

            def changed(i):
                st, ok = probed.get(i) or probed.setdefault(
                    i, self._probe(seq[i]))
                return ok or _most_frequent(st) != head

            k = _monotone_find(seq, changed, 1)
            if k is None:
                n = seq.length()
                if n <= 1:
                    return "end", levels
                last = n - 1
                st, _ok = probed.get(last) or self._probe(seq[last])
                llim = _sub(lim, cnt * last)
                if llim is not None and llim <= cnt:
                    return "end", levels
                levels.append((seq[last], st, _sub(llim, cnt)))
                return "end", levels
            st, ok = probed[k]
            nlim = _sub(lim, cnt * k)
            if ok:
                return "placed", seq[k], nlim
            cur, cur_stats, lim = seq[k], st, nlim

    def _suffices_shrinking(self, inst, mode):
        cur = inst
        while cur is not None:
            sol = self.alloc_fn(cur)
            if sol.best is not None:
                return cur
            if mode not in sol.failures:
                return None
            cur = shrink(cur, mode)
        return None


def _sorted_errs(stats):
    """Failure modes by count, fewest first (ties in Ganeti's order)."""
    return [m for m, _c in sorted(stats, key=lambda mc: mc[1])]


def _most_frequent(stats):
    return _sorted_errs(stats)[-1]


def _errs_most_first(stats):
    return list(reversed(_sorted_errs(stats)))


def _sub(lim, n):
    return None if lim is None else lim - n


class _ShrinkSeq:
    """The instance and its successive shrinks, built on demand."""

    def __init__(self, inst, mode):
        self.items = [inst]
        self.mode = mode
        self.done = False
        #: the last index allowed (None: as far as the spec shrinks)
        self.cap = None

    def _extend_to(self, i):
        if self.cap is not None and i > self.cap:
            i = self.cap
        while len(self.items) <= i and not self.done:
            nxt = shrink(self.items[-1], self.mode)
            if nxt is None:
                self.done = True
            else:
                self.items.append(nxt)

    def has(self, i):
        if self.cap is not None and i > self.cap:
            return False
        self._extend_to(i)
        return i < len(self.items)

    def length(self):
        i = len(self.items)
        while self.has(i):
            i += 1
        return i

    def __getitem__(self, i):
        self._extend_to(i)
        return self.items[i]


LOOK_AHEAD = 50


def _monotone_find(seq, pred, start):
    """Index of the first element from ``start`` satisfying ``pred``,
    assumed monotone: probe ``LOOK_AHEAD`` elements ahead (half the rest
    once fewer remain); when the probe satisfies it, the answer is the
    first satisfying element before it, found by a linear scan."""
    lo = start
    while True:
        if not seq.has(lo):
            return None
        if seq.has(lo + LOOK_AHEAD):
            step = LOOK_AHEAD
        else:
            n = 0
            while seq.has(lo + n):
                n += 1
            step = n // 2
        probe = lo + step
        if pred(probe):
            for i in range(lo, probe):
                if pred(i):
                    return i
            return probe
        lo = probe + 1
