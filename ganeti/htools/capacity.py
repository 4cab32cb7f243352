"""Global N+1 redundancy (Ganeti's capacity checks).

A cluster is globally N+1 redundant when every node can be evacuated:
its drbd primaries failed over to their secondaries, its shared-storage
instances moved to the best other node of the group, and its other
instances (plain, file, diskless) re-created on other nodes of the group,
largest memory first (of equal memory, the one added to the cluster
later first), each on the node with the best score, all ignoring soft
errors.

The check runs for every allocation solution, so it has a fast path: the
failovers only need, per secondary, the memory of the instances it
receives; and the re-creation surely succeeds, whatever nodes the score
picks, when the other nodes of the group can take more copies of each
instance than the instances re-created before it can use up (placing an
instance of size s on a node takes at most ceil(s / size) copies of an
instance of that size).  Only when that does not hold is the evacuation
simulated, with the score choosing the targets, and the same test ends
the simulation as soon as the rest surely fits.

A candidate placement re-checks only the evacuations that relied on its
nodes, and of those that counted copies on them only the ones whose
slack does not cover what the new instance takes
(:meth:`Checker.redundant_with`); when the candidate is placed,
that work is carried over to the next allocation
(:meth:`Checker.carry`, ``alloc.Context(reuse_checks=True)``).
"""

from ganeti.htools import model as M
from ganeti.htools import moves as MV
from ganeti.htools import score as S
from ganeti.htools import types as T


class Checker:
    """``redundant()`` for the current state of ``ctx``'s model, over
    the nodes ``scope_idxs``."""

    def __init__(self, ctx, scope_idxs):
        self.ctx = ctx
        self.nodes = ctx.nodes
        self.instances = ctx.instances
        self.scope = list(scope_idxs)
        opts = ctx.opts
        ign = set(opts.capacity_ignore_groups)
        self.checked = [i for i in self.scope
                        if self.nodes[i].group not in ign
                        and not (opts.accept_existing
                                 and self.nodes[i].offline)]
        self.last_bad = None
        self._base = None
        self._verdicts = {}
        #: (changed nodes, their rechecked dependencies) of the last
        #: ``redundant_with`` that passed
        self._verified = None
        self.by_group = {}
        for i in self.scope:
            self.by_group.setdefault(self.nodes[i].group, []).append(i)
        #: exclusive-storage nodes per group (their evacuation is simulated)
        self._excl_count = {
            g: sum(1 for i in idxs if self.nodes[i].excl_storage)
            for g, idxs in self.by_group.items()}

    def base_redundant(self):
        """Redundancy before the candidate is placed (computed once, with
        what each node's evacuation relied on, for
        :meth:`redundant_with`)."""
        if self._base is None:
            self._sort_by_mem()
            deps = {}
            ok = True
            for ndx in self.checked:
                if not self.can_evacuate(ndx):
                    ok = False
                    break
                deps[ndx] = self._deps
            self._base = ok
            self._base_deps = deps if ok else None
        return self._base

    def redundant_with(self, changed, placed=None):
        """Redundancy after the instance ``placed`` (None: unknown) was
        placed on the nodes ``changed``, the cluster being redundant
        before: only the evacuations that relied on a changed node (or
        were simulated in full) are checked again.  Placing an instance
        only takes room from its nodes, so an evacuation that used none
        of them still works; one that counted copies on them still works
        while its slack covers the copies the instance can take."""
        self._verified = None
        deps = self._base_deps
        if deps is None:
            return self.redundant()
        sorted_yet = False
        rechecked = {}
        for ndx in self.checked:
            d = deps[ndx]
            if ndx not in changed and d is not None:
                hard, soft, keys = d
                if hard.isdisjoint(changed):
                    hit = sum(1 for c in changed if c in soft)
                    if not hit:
                        continue
                    left = _absorb(keys, placed, hit)
                    if left is not None:
                        rechecked[ndx] = (hard, soft, left)
                        continue
            if not sorted_yet:
                self._sort_by_mem()
                sorted_yet = True
            if not self.can_evacuate(ndx):
                return False
            rechecked[ndx] = self._deps
        self._verified = (frozenset(changed), rechecked)
        return True

    def carry(self, changed):
        """The placement last passed by :meth:`redundant_with` (on the
        nodes ``changed``) was made: it becomes the base state, and the
        work of the check is kept.  False when there is nothing to
        carry (the checker is then not valid for the new state)."""
        v = self._verified
        self._verified = None
        if v is None or v[0] != frozenset(changed) or not self._base \
                or self._base_deps is None:
            return False
        self._base_deps.update(v[1])
        return True

    def _sort_by_mem(self):
        # memory-sorted escape nodes per group (upper bounds for the scan)
        self.sorted_by_mem = {}
        for g, idxs in self.by_group.items():
            self.sorted_by_mem[g] = sorted(
                ((self.nodes[i].unallocated_mem(), i) for i in idxs),
                reverse=True)

    def redundant(self):
        self._sort_by_mem()
        # the node that failed last time is the likeliest to fail again
        last = self.last_bad
        if last is not None and not self.can_evacuate(last):
            return False
        for ndx in self.checked:
            if ndx != last and not self.can_evacuate(ndx):
                self.last_bad = ndx
                return False
        return True

    def can_evacuate(self, ndx):
        """Whether node ``ndx`` can be evacuated; ``self._deps`` then
        says what the answer relied on: None (everything), or (nodes
        that must not change, nodes whose copies were counted, the
        counts' slack: ``[(mem, dsk, slack)]``)."""
        self._deps = None
        nodes = self.nodes
        n = nodes[ndx]
        drbd, shared, other = [], [], []
        # the later instance first: with equal memory that is the order
        # of re-creation (Ganeti keeps a node's newest instance first)
        for i in sorted(n.plist, reverse=True):
            inst = self.instances[i]
            if inst.disk_template == T.DT_DRBD:
                drbd.append(inst)
            elif inst.disk_template in T.MOVABLE_TEMPLATES:
                shared.append(inst)
            else:
                other.append(inst)
        if shared:
            return self._exact(ndx, drbd, shared, other)
        # failovers: each secondary runs what it receives
        need = {}
        for inst in drbd:
            s = nodes[inst.snode]
            if not n.mig_tags <= s.rmig_tags:
                return False
            if s.excl_storage and inst.uses_local_storage and \
                    (inst.total_spindles is None or s.f_spindles < 0):
                return False
            if inst.uses_local_storage and s.f_dsk <= 0:
                return False
            need[inst.snode] = need.get(inst.snode, 0) + \
                (inst.mem if inst.uses_memory else 0)
        for sdx, mem in need.items():
            if nodes[sdx].unallocated_mem() - mem <= 0:
                return False
        used = frozenset(need)
        if not other:
            self._deps = (used, _NOTHING, ())
            return True
        # re-creation: the policy is the group's, the same for all targets
        members = self.by_group[n.group]
        if len(members) < 2:
            return False
        first = nodes[members[0] if members[0] != ndx else members[1]]
        for inst in other:
            if self._policy_failure(inst, first):
                return False
        if self._excl_count[n.group] - (1 if n.excl_storage else 0):
            return self._exact(ndx, drbd, shared, other)
        todo = sorted(other, key=lambda x: -x.mem)
        # the nodes with most memory first: the quick test ends sooner
        # (lazily: the count mostly stops after a few nodes)
        escape = (i for _m, i in self.sorted_by_mem[n.group] if i != ndx)
        fit = self._rest_fits(todo, escape, need)
        if fit is not None:
            self._deps = (used, fit[0], fit[1])
            return True
        return self._exact(ndx, drbd, shared, other)

    def _policy_failure(self, inst, nd):
        """The instance policy's verdict on ``inst`` on ``nd``,
        remembered (the same instances are judged over and over)."""
        key = (id(inst), id(nd.ipolicy), nd.excl_storage)
        spec = _policy_key(inst)
        hit = self._verdicts.get(key)
        # the entry keeps the instance alive: its id is not reused
        if hit is None or hit[0] is not inst or hit[1] != spec:
            from ganeti.htools.alloc import policy_failure
            hit = (inst, spec,
                   policy_failure(inst, nd.ipolicy, nd.excl_storage))
            self._verdicts[key] = hit
        return hit[2]

    def _rest_fits(self, insts, escape, need=None, quick=False):
        """Whether the instances ``insts``, re-created in this order, all
        find a node of ``escape`` whatever nodes the score picks: None,
        or (the nodes whose copies were counted, ``[(mem, dsk, slack)]``:
        how many copies of each size were counted beyond the need).
        ``need``: memory the nodes still have to give to failovers.
        (Only memory and disk are looked at: the policy and spindles
        are the caller's.)

        Instance j surely finds a node when the nodes can take more
        copies of it than the instances placed before it can use up:
        placing an instance of size s on a node takes away at most
        ceil(s / size_j) of that node's copies (per resource).  First
        the quick form: copies of the largest instance against the
        number of instances.  ``quick``: only that."""
        sizes = [(i.mem if i.uses_memory else 0,
                  i.dsk if i.uses_local_storage else None)
                 for i in insts if not i.forthcoming]
        if not sizes:
            return _NOTHING, ()
        nodes = self.nodes
        k = len(sizes)
        req_mem = max(m for m, _d in sizes)
        dsks = [d for _m, d in sizes if d is not None]
        req_dsk = max(dsks) if dsks else None
        frees = []
        found = 0
        # Counting stops once there is a slack of k copies (enough for
        # most placements to be absorbed; only the nodes counted are
        # relied on), at once for the quick form.
        stop = k if quick else 2 * k
        # _copies of both resources, inline (this loop is hot)
        inf = 1 << 30
        for t in escape:
            nd = nodes[t]
            xm = nd.x_mem
            fm = int(nd.t_mem) - nd.n_mem - nd.i_mem - (xm if xm > 0 else 0)
            if need:
                fm -= need.get(t, 0)
            if fm <= 0:
                continue
            fd = nd.f_dsk
            frees.append((t, fm, fd))
            copies = -(-fm // req_mem) - 1 if req_mem > 0 else inf
            if copies and req_dsk is not None:
                if fd <= 0:
                    copies = 0
                elif req_dsk > 0:
                    cd = -(-fd // req_dsk) - 1
                    if cd < copies:
                        copies = cd
            found += copies
            if found >= stop:
                break
        if found >= k:
            # a size of 0 counts "unlimited" copies, which one placement
            # can all take: no slack then
            slack = found - k if req_mem > 0 and \
                (req_dsk is None or req_dsk > 0) else 0
            return (frozenset(t for t, _m, _d in frees),
                    ((req_mem, req_dsk, slack),))
        if k == 1 or quick:
            return None
        # each size's copies needed: one more than the instances before
        # the last one of that size can use up
        wanted = {}
        spoilt = 0
        prev = None
        for j, (mj, dj) in enumerate(sizes):
            key = (mj, dj)
            if key == prev and mj > 0:
                # the same size again: the one before takes one copy
                spoilt += 1
            else:
                spoilt = 0
                for ml, dl in sizes[:j]:
                    sp = _spoils(ml, mj)
                    if dj is not None and dl is not None:
                        sp = max(sp, _spoils(dl, dj))
                    spoilt += sp
            prev = key
            if wanted.get(key, 0) <= spoilt:
                wanted[key] = spoilt + 1
        keys = []
        for (mj, dj), want in wanted.items():
            if mj > 0 and dj is not None and dj > 0:
                # _room1's usual case, inline
                room = 0
                for _t, fm, fd in frees:
                    c = -(-fm // mj)
                    cd = -(-fd // dj)
                    if cd < c:
                        c = cd
                    if c > 1:
                        room += c - 1
            else:
                room = sum(_room1(fm, fd, mj, dj) for _t, fm, fd in frees)
            if room < want:
                return None
            keys.append((mj, dj, room - want))
        return frozenset(t for t, _m, _d in frees), tuple(keys)

    # -- the exact simulation ---------------------------------------------

    def _exact(self, ndx, drbd, shared, other):
        """Simulate the evacuation of ``ndx``, the score choosing the
        targets."""
        nodes = self.nodes
        n = nodes[ndx]
        gidx = self.by_group[n.group]
        escape = [i for i in gidx if i != ndx]
        todo = sorted(other, key=lambda x: -x.mem)
        # the counting shortcut knows memory and disk only
        plain_fit = bool(escape) and not (
            self._excl_count[n.group] - (1 if n.excl_storage else 0))
        if plain_fit and todo:
            pol = nodes[escape[0]]
            plain_fit = not any(
                self._policy_failure(i, pol)
                for i in todo)
        saved_nodes = {}
        saved_insts = {}

        def touch(idxs):
            for i in idxs:
                if i not in saved_nodes:
                    saved_nodes[i] = nodes[i].save()

        def keep(inst):
            if inst.idx not in saved_insts:
                saved_insts[inst.idx] = (inst.pnode, inst.snode,
                                         inst.location_score)

        try:
            for inst in drbd:
                touch([inst.pnode, inst.snode])
                keep(inst)
                try:
                    MV.apply_move(nodes, inst, (MV.FAILOVER, None, None),
                                  force=True)
                except MV.MoveFailed:
                    return False
            if shared:
                gstate = None
                for inst in shared:
                    gstate = S.ScoreState([nodes[i] for i in gidx])
                    best = None
                    for t in escape:
                        if t == inst.pnode:
                            continue
                        touch([inst.pnode, t])
                        keep(inst)
                        trial = MV.Trial(nodes, inst,
                                         (MV.FAILOVER_TO_ANY, t, None),
                                         force=True)
                        if trial.ok:
                            sc = S.compute_score([nodes[i] for i in gidx])
                            if best is None or not best[0] < sc:
                                best = (sc, t)
                            trial.undo()
                    if best is None:
                        return False
                    MV.apply_move(nodes, inst,
                                  (MV.FAILOVER_TO_ANY, best[1], None),
                                  force=True)
                del gstate
            if other:
                state = None
                for pos, inst in enumerate(todo):
                    # once the rest surely fits, the choices do not matter
                    if plain_fit and \
                            self._rest_fits(todo[pos:], escape,
                                            quick=True) is not None:
                        return True
                    if state is None:
                        state = S.ScoreState(
                            [nodes[i] for i in self.scope])
                    best = None
                    # the policy is the group's: judged once per kind
                    verdicts = {}
                    real = not inst.forthcoming
                    uses_mem = real and inst.uses_memory
                    uses_dsk = real and inst.uses_local_storage
                    mem, dsk = inst.mem, inst.dsk
                    for t in escape:
                        nd = nodes[t]
                        pkey = (id(nd.ipolicy), nd.excl_storage)
                        if pkey not in verdicts:
                            verdicts[pkey] = self._policy_failure(inst, nd)
                        if verdicts[pkey]:
                            continue
                        # add_pri's own hard checks, without a snapshot
                        if uses_mem and int(nd.t_mem) - nd.n_mem - \
                                nd.i_mem - max(nd.x_mem, 0) - mem <= 0:
                            continue
                        if uses_dsk and nd.f_dsk - dsk <= 0:
                            continue
                        old = S.node_values(nd)
                        st = nd.save()
                        if nd.add_pri(inst, force=True) is not None:
                            continue
                        new = S.node_values(nd)
                        sc = state.score_after([(old, new)])
                        nd.restore(st)
                        if best is None or not best[0] < sc:
                            best = (sc, t, old)
                    if best is None:
                        return False
                    _sc, t, old = best
                    touch([t])
                    nodes[t].add_pri(inst, force=True)
                    state.commit([(old, S.node_values(nodes[t]))])
            return True
        finally:
            for i, st in saved_nodes.items():
                nodes[i].restore(st)
            for idx, st in saved_insts.items():
                inst = self.instances[idx]
                inst.pnode, inst.snode, inst.location_score = st


def _copies(free, size):
    """How many instances of ``size`` fit one after the other in
    ``free`` (each must leave more than nothing, as ``add_pri`` wants)."""
    if free <= 0:
        return 0
    if size <= 0:
        return 1 << 30
    # the largest m with free - m * size > 0
    return -(-free // size) - 1


def _room1(fm, fd, mem, dsk):
    """The copies of an instance of ``mem``/``dsk`` (None: no local
    disk) a node with free memory ``fm`` (> 0) and disk ``fd`` can take;
    a size of 0 counts as one copy (a bigger instance placed before may
    use up all of it)."""
    if dsk is None:
        return -(-fm // mem) - 1 if mem > 0 else 1
    if dsk <= 0:
        return 1 if fd > 0 and fm > mem else 0
    if mem <= 0:
        return 1 if fd > dsk else 0
    c = min(-(-fm // mem), -(-fd // dsk)) - 1
    return c if c > 0 else 0


def _policy_key(inst):
    """What the instance policy looks at."""
    return (inst.mem, tuple(inst.disk_sizes), inst.vcpus, inst.spindle_use,
            inst.total_spindles, inst.disk_template)


_NOTHING = frozenset()


def _absorb(keys, placed, hits):
    """The counts' slack ``keys`` after ``placed`` took copies on
    ``hits`` counted nodes; None when some slack does not cover it (or
    the instance is unknown)."""
    if placed is None:
        return None
    if placed.forthcoming:
        return keys
    mem = placed.mem if placed.uses_memory else 0
    dsk = placed.dsk if placed.uses_local_storage else 0
    left = []
    for mj, dj, slack in keys:
        sp = _spoils(mem, mj)
        if dj is not None:
            sp = max(sp, _spoils(dsk, dj))
        sp *= hits
        if sp > slack:
            return None
        left.append((mj, dj, slack - sp))
    return tuple(left)


def _spoils(placed, size):
    """At most how many copies of ``size`` placing ``placed`` takes from
    a node (a size of 0 counts a node as one copy)."""
    if placed <= 0:
        return 0
    if size <= 0:
        return 1
    return -(-placed // size)


def redundant(ctx, scope_idxs=None):
    if scope_idxs is None:
        scope_idxs = range(len(ctx.nodes))
    return Checker(ctx, scope_idxs).redundant()
