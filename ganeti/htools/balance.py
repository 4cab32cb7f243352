"""The balancer: a greedy search for the move that lowers the cluster
score most, repeated until no move helps enough (Ganeti's hbal
algorithm), made fast by

* an incremental score: a candidate move is evaluated from the old and
  new values of the 2-4 nodes it touches (``ScoreState``);
* candidate pruning: each step first looks only at the instances on the
  most loaded nodes and at the least loaded nodes as targets; when that
  finds no acceptable move the candidate sets widen, up to every
  instance and every node, so the search ends only where Ganeti's
  exhaustive search would end too.
"""

import math

import attrs

from ganeti.htools import moves as MV
from ganeti.htools import score as S
from ganeti.htools.model import NO_SECONDARY
from ganeti.htools.types import MIRROR_EXTERNAL, MIRROR_INTERNAL


@attrs.define
class BalanceOptions:
    disk_moves: bool = True
    inst_moves: bool = True
    evac_mode: bool = False
    ignore_soft_errors: bool = False
    restricted_migration: bool = False
    min_gain: float = 0.01
    min_gain_limit: float = 0.1
    max_length: int = -1
    min_score: float = 1e-9
    #: first candidate set: this many most/least loaded nodes
    prune_nodes: int = 8
    #: candidate evaluations below which a step simply tries everything
    full_budget: int = 4000


@attrs.define
class Placement:
    """One step of a solution."""
    inst: object          # the Instance (its name, for display)
    move: tuple
    old_p: int
    old_s: int
    new_p: int
    new_s: int
    score: float
    #: (description, gnt-instance commands), filled in by the tools
    commands: object = None

    def involved(self):
        res = []
        for x in (self.new_p, self.new_s, self.old_p, self.old_s):
            if x >= 0 and x not in res:
                res.append(x)
        return res


def optimal_score(nodes):
    """Lower bound of the score due to N+1 reservations (Ganeti's: the
    reserved memory total of a perfectly balanced group)."""
    if len(nodes) <= 1:
        return 0.0
    mems = [n.t_mem for n in nodes]
    total = sum(mems)
    less_one = total - max(mems)
    if less_one <= 0:
        return 0.0
    drbd = float(sum(sum(n.peers.values()) for n in nodes))
    return S.WEIGHTS["reserved_mem_rtotal"] * (drbd / less_one
                                                - drbd / total)


class Balancer:
    """Balance the nodes of one node group.

    ``nodes`` is the cluster's full node list (indexed by node idx),
    ``gnodes`` the group's nodes, ``instances`` the group's instances.
    """

    def __init__(self, nodes, gnodes, instances, opts=None):
        self.opts = opts or BalanceOptions()
        self.nodes = nodes
        self.gnodes = list(gnodes)
        self.instances = list(instances)
        self.state = S.ScoreState(self.gnodes)
        #: the exact initial score (two-pass), for display
        self.initial_score = S.compute_score(self.gnodes)
        #: the running score the candidates are compared with
        self.score = self.state.score()
        self.online = [n.idx for n in self.gnodes if not n.offline]
        self.online_set = set(self.online)
        self.has_pairs = any(n.location_tags for n in self.gnodes) and \
            any(i.excl_tags for i in self.instances)
        self.placements = []
        self.evaluations = 0

    # -- evaluating one candidate ---------------------------------------

    def evaluate(self, inst, move):
        """Score after ``move`` (None when the move is not possible);
        the model is left unchanged."""
        nodes = self.nodes
        idxs = MV.touched_nodes(inst, move)
        olds = []
        for i in idxs:
            nd = nodes[i]
            if nd.offline:
                olds.append((len(nd.plist), len(nd.slist), None))
            else:
                olds.append((0, 0, S.node_values(nd)))
        tr = MV.Trial(nodes, inst, move, self.opts.ignore_soft_errors)
        self.evaluations += 1
        if not tr.ok:
            return None
        changes = []
        off_all = off_pri = 0
        map_delta = 0
        pair_d = {} if self.has_pairs else None
        for (nd, st), (op, os_, ov) in zip(tr.saved, olds):
            if ov is None:
                np_ = len(nd.plist)
                off_all += np_ + len(nd.slist) - op - os_
                off_pri += np_ - op
            else:
                changes.append((ov, (S.node_std_values(nd),
                                     S.node_sum_values(nd))))
                if pair_d is not None:
                    old_map = st[-1]
                    for k in set(old_map) | set(nd.instance_map):
                        d = nd.instance_map.get(k, 0) - old_map.get(k, 0)
                        if d:
                            pair_d[k] = pair_d.get(k, 0) + d
        if pair_d:
            for k, d in pair_d.items():
                map_delta += self.state.pair_map_delta(k, d)
        tr.undo()
        return self.state.score_after(changes, (off_all, off_pri),
                                      map_delta)

    def commit(self, inst, move):
        """Apply ``move`` for good and update the running sums."""
        nodes = self.nodes
        idxs = MV.touched_nodes(inst, move)
        olds = []
        for i in idxs:
            nd = nodes[i]
            if nd.offline:
                olds.append((nd, len(nd.plist), len(nd.slist), None,
                             dict(nd.instance_map)))
            else:
                olds.append((nd, 0, 0, S.node_values(nd),
                             dict(nd.instance_map)))
        old_p, old_s = inst.pnode, inst.snode
        MV.apply_move(nodes, inst, move, self.opts.ignore_soft_errors)
        changes = []
        off_all = off_pri = 0
        pairs = []
        for nd, op, os_, ov, omap in olds:
            if ov is None:
                off_all += len(nd.plist) + len(nd.slist) - op - os_
                off_pri += len(nd.plist) - op
            else:
                changes.append((ov, S.node_values(nd)))
                for k in set(omap) | set(nd.instance_map):
                    d = nd.instance_map.get(k, 0) - omap.get(k, 0)
                    if d:
                        pairs.append((k, d))
        self.state.commit(changes, (off_all, off_pri), pairs)
        return old_p, old_s

    # -- candidates -------------------------------------------------------

    def _movable(self):
        opts = self.opts
        insts = [i for i in self.instances if i.movable and i.auto_balance]
        if opts.evac_mode:
            bad = {n.idx for n in self.gnodes if n.offline}
            insts = [i for i in insts
                     if i.pnode in bad or (i.has_secondary and
                                           i.snode in bad)]
        return insts

    def _node_pressure(self):
        """Per online node, how much it pushes the score up (higher =
        a better source, lower = a better target)."""
        st = self.state
        n = st.n
        res = {}
        if n <= 0:
            return res
        # signs: +1 when a higher value means a more loaded node
        signs = (-1, -1, 1, 1, 1, 1, 1, 1, 1, -1, -1, 1, 1)
        coefs = []
        for k in range(len(S.STD_COMPONENTS)):
            m = st.s1[k] / n
            var = st.s2[k] / n - m * m
            sd = math.sqrt(var) if var > 1e-18 else 0.0
            coefs.append((k, m, sd))
        w = S._STD_W
        for idx in self.online:
            nd = self.nodes[idx]
            sv, su = S.node_values(nd)
            p = 0.0
            for k, m, sd in coefs:
                if sd:
                    p += w[k] * signs[k] * (sv[k] - m) / sd
            # sum components: N+1 failures, tag conflicts, locations
            p += 10.0 * (su[0] + su[1] + su[2])
            res[idx] = p
        return res

    def _candidate_moves(self, inst, targets, full):
        """(move) candidates for one instance towards ``targets``."""
        opts = self.opts
        online = self.online_set
        p, s = inst.pnode, inst.snode
        res = []
        mir = inst.mirror
        if mir == MIRROR_INTERNAL:
            use_sec = s in online and opts.inst_moves
            if use_sec:
                res.append((MV.FAILOVER, None, None))
            if opts.disk_moves:
                pdrained = self.nodes[p].offline
                if not opts.inst_moves:
                    kinds = (MV.REPLACE_SECONDARY,)
                elif opts.restricted_migration and not pdrained:
                    kinds = (MV.REPLACE_SECONDARY,)
                elif use_sec and opts.restricted_migration:
                    kinds = (MV.REPLACE_SECONDARY,
                             MV.REPLACE_AND_FAILOVER,
                             MV.FAILOVER_AND_REPLACE)
                elif use_sec:
                    kinds = (MV.REPLACE_SECONDARY,
                             MV.REPLACE_AND_FAILOVER,
                             MV.REPLACE_PRIMARY,
                             MV.FAILOVER_AND_REPLACE)
                else:
                    kinds = (MV.REPLACE_SECONDARY,
                             MV.REPLACE_AND_FAILOVER)
                for t in targets:
                    if t == p or t == s:
                        continue
                    for k in kinds:
                        res.append((k, t, None))
                if inst.forthcoming and opts.inst_moves:
                    tl = [t for t in targets]
                    for t in tl:
                        for t2 in tl:
                            if t2 == t:
                                continue
                            if t in (p, s) and t2 in (p, s):
                                continue  # a failover, or no change
                            if t2 == s or t == p or t == s or t2 == p:
                                continue  # one of the moves above
                            res.append((MV.CHANGE_ALL, t, t2))
        elif mir == MIRROR_EXTERNAL and opts.inst_moves:
            for t in targets:
                if t != p:
                    res.append((MV.FAILOVER_TO_ANY, t, None))
        return res

    def _candidates(self, k):
        """All (inst, move) pairs to try with ``k`` source and target
        nodes (None = all)."""
        insts = self._movable()
        if k is None:
            targets = self.online
            return [(i, m) for i in insts
                    for m in self._candidate_moves(i, targets, True)]
        press = self._node_pressure()
        ranked = sorted(self.online, key=lambda x: press[x])
        targets = ranked[:k]
        sources = set(ranked[-k:])
        for nd in self.gnodes:
            if nd.offline:
                sources.add(nd.idx)
            elif nd.fail_n1 and (nd.plist or nd.slist):
                sources.add(nd.idx)
            else:
                su = S.node_values(nd)[1]
                if su[1] or su[2]:
                    sources.add(nd.idx)
        res = []
        for i in insts:
            if i.pnode in sources or (i.snode != NO_SECONDARY and
                                      i.snode in sources):
                res.extend((i, m) for m in
                           self._candidate_moves(i, targets, False))
        return res

    def _full_size(self):
        insts = self._movable()
        n = len(self.online)
        total = 0
        for i in insts:
            if i.mirror == MIRROR_INTERNAL:
                total += 1
                if self.opts.disk_moves:
                    total += 4 * n
                    if i.forthcoming:
                        total += n * n
            elif i.mirror == MIRROR_EXTERNAL:
                total += n
        return total

    # -- the search -------------------------------------------------------

    def _best(self, cands):
        best = None
        best_score = self.score
        best_cost = None
        for inst, move in cands:
            sc = self.evaluate(inst, move)
            if sc is None:
                continue
            cost = 0 if inst.forthcoming else MV.COST[move[0]]
            if best is None:
                if sc < best_score:
                    best, best_score, best_cost = (inst, move), sc, cost
                continue
            if sc < best_score - 1e-12 or (sc <= best_score + 1e-12 and
                                           cost < best_cost):
                best, best_score, best_cost = (inst, move), sc, cost
        return best, best_score

    def _acceptable(self, new_score):
        opts = self.opts
        ini = self.score
        return new_score < ini and (ini > opts.min_gain_limit or
                                    ini - new_score >= opts.min_gain)

    def step(self):
        """Find and apply one move; returns the Placement or None."""
        opts = self.opts
        full = self._full_size() <= opts.full_budget
        levels = [None] if full else []
        if not full:
            k = opts.prune_nodes
            while k < len(self.online):
                levels.append(k)
                k *= 4
            levels.append(None)
        for k in levels:
            best, sc = self._best(self._candidates(k))
            if best is not None and self._acceptable(sc):
                inst, move = best
                old_p, old_s = self.commit(inst, move)
                pl = Placement(inst, move, old_p, old_s, inst.pnode,
                               inst.snode, sc)
                self.score = sc
                self.placements.append(pl)
                return pl
        return None

    def run(self, on_move=None):
        """Balance until done; returns the placements.  ``on_move`` is
        called with each Placement as it is found."""
        opts = self.opts
        min_score = optimal_score(self.gnodes) + opts.min_score
        while ((opts.max_length < 0 or
                len(self.placements) < opts.max_length)
               and self.score > min_score):
            pl = self.step()
            if pl is None:
                break
            if on_move is not None:
                on_move(pl)
        return self.placements


def split_jobs(placements):
    """Group the moves into job sets whose moves touch disjoint nodes
    (Ganeti's rule, which groups from the last move backwards): a list of
    lists of Placements, to run set after set."""
    jobsets = []
    busy = set()
    for pl in reversed(placements):
        inv = pl.involved()
        if jobsets and not busy.intersection(inv):
            jobsets[0].insert(0, pl)
            busy.update(inv)
        else:
            jobsets.insert(0, [pl])
            busy = set(inv)
    return jobsets
