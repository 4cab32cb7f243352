"""Global N+1 redundancy (Ganeti's capacity checks).

A cluster is globally N+1 redundant when every node can be evacuated:
its drbd primaries failed over to their secondaries, its shared-storage
instances moved to the best other node of the group, and its other
instances (plain, file, diskless) re-created on other nodes of the group,
largest memory first, each on the node with the best score, all ignoring
soft errors.

The check runs for every allocation solution, so it has a fast path: the
failovers only need, per secondary, the memory of the instances it
receives; and the re-creation surely succeeds when at least as many other
nodes of the group as there are instances to re-create can each take the
largest of them (then whatever node the score picks, a free one is left
for the next instance).  Only when that does not hold is the evacuation
simulated exactly, with the score choosing the targets.  A candidate
placement re-checks only the evacuations that relied on its nodes
(:meth:`Checker.redundant_with`).
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

    def redundant_with(self, changed):
        """Redundancy after a candidate was placed on the nodes
        ``changed``, the cluster being redundant before: only the
        evacuations that relied on a changed node (or were simulated in
        full) are checked again.  Placing an instance only takes room
        from its nodes, so an evacuation that used none of them still
        works."""
        deps = self._base_deps
        if deps is None:
            return self.redundant()
        self._sort_by_mem()
        for ndx in self.checked:
            d = deps[ndx]
            if ndx in changed or d is None or not d.isdisjoint(changed):
                if not self.can_evacuate(ndx):
                    return False
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
        """Whether node ``ndx`` can be evacuated; ``self._deps`` is then
        the set of nodes the answer relied on (None: all of them)."""
        self._deps = None
        nodes = self.nodes
        n = nodes[ndx]
        drbd, shared, other = [], [], []
        for i in n.plist:
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
        used = set(need)
        if not other:
            self._deps = used
            return True
        # re-creation: the policy is the group's, the same for all targets
        members = self.by_group[n.group]
        if len(members) < 2:
            return False
        first = nodes[members[0] if members[0] != ndx else members[1]]
        from ganeti.htools.alloc import policy_failure
        for inst in other:
            if policy_failure(inst, first.ipolicy, first.excl_storage):
                return False
        if self._excl_count[n.group] - (1 if n.excl_storage else 0):
            return self._exact(ndx, drbd, shared, other)
        req_mem = max((i.mem for i in other if i.uses_memory), default=0)
        req_dsk = max((i.dsk for i in other if i.uses_local_storage),
                      default=None)
        k = len(other)
        found = 0
        for mem_bound, i in self.sorted_by_mem[n.group]:
            if mem_bound - req_mem <= 0:
                break
            if i == ndx:
                continue
            nd = nodes[i]
            if nd.unallocated_mem() - need.get(i, 0) - req_mem <= 0:
                continue
            if req_dsk is not None and nd.f_dsk - req_dsk <= 0:
                continue
            found += 1
            used.add(i)
            if found >= k:
                self._deps = used
                return True
        return self._exact(ndx, drbd, shared, other)

    # -- the exact simulation ---------------------------------------------

    def _exact(self, ndx, drbd, shared, other):
        nodes = self.nodes
        n = nodes[ndx]
        gidx = self.by_group[n.group]
        escape = [i for i in gidx if i != ndx]
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
                from ganeti.htools.alloc import policy_failure
                scope_nodes = [nodes[i] for i in self.scope]
                state = S.ScoreState(scope_nodes)
                for inst in sorted(other, key=lambda x: -x.mem):
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
                            verdicts[pkey] = policy_failure(
                                inst, nd.ipolicy, nd.excl_storage)
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


def redundant(ctx, scope_idxs=None):
    if scope_idxs is None:
        scope_idxs = range(len(ctx.nodes))
    return Checker(ctx, scope_idxs).redundant()
