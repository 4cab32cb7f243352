"""The balancer: a greedy search for the move that lowers the cluster
score most, repeated until no move helps enough (Ganeti's hbal
algorithm), made fast by

* an incremental score: a candidate move is evaluated from the old and
  new values of the 2-4 nodes it touches (``ScoreState``);
* candidate pruning: each step first looks only at the instances on the
  most loaded nodes and at the least loaded nodes as targets; when that
  finds no acceptable move the candidate sets widen, up to every
  instance and every node, so the search ends only where Ganeti's
  exhaustive search would end too;
* lazy greedy on pruned scans: a scan's other good moves are kept by
  gain and re-scored when their turn comes, instead of a new scan for
  every move;
* screening on pruned scans: every candidate is estimated from its
  nodes' first-order shares (one number per node share), and only the
  best few estimates are scored exactly;
* shapes: placing an instance on a node that does not hold it is
  computed once per node and instance shape, not per instance.
"""

import heapq
import math
from operator import add as _add, itemgetter, mul as _mul, sub as _sub

import attrs

from ganeti.htools import moves as MV
from ganeti.htools import score as S
from ganeti.htools.model import NO_SECONDARY
from ganeti.htools.types import MIRROR_EXTERNAL, MIRROR_INTERNAL

_NSTD = len(S.STD_COMPONENTS)
_NSUM = len(S.SUM_COMPONENTS)
_SUM_W = tuple(w for _, w in S.SUM_COMPONENTS)
_SUM_W_STD = S._STD_W
_first = itemgetter(0)


#: node shares that place an instance on a node not holding it
_ADD_ROLES = frozenset(("add_s", "add_p"))


def _no_location(_nodes, _inst, _pdx, _sdx):
    return 0


def _shape_key(inst):
    """What placing ``inst`` on a node that does not hold it depends on
    (everything ``Node.add_pri``/``add_sec`` read of the instance, but
    its index and nodes)."""
    u = inst.util
    return (inst.mem, inst.dsk, inst.vcpus, inst.spindle_use,
            inst.total_spindles, inst.not_offline, inst.uses_memory,
            inst.uses_sec_mem, inst.uses_local_storage, inst.has_secondary,
            inst.forthcoming, u.cpu, u.mem, u.dsk, u.net,
            tuple(inst.excl_tags), inst.dsrd_loc_tags)


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
    full_budget: int = 60000
    #: largest exhaustive search done when pruned searches find nothing
    exhaustive_limit: int = 2000000
    #: pruned searches only: after a scan, the other moves it found that
    #: gain at least ``lazy_gain_share`` of its best move's gain are taken
    #: lazily greedy (largest re-scored gain first) before the next scan
    lazy_greedy: bool = True
    lazy_gain_share: float = 0.5
    #: narrow pruned scans pass over nodes that one of them found useless
    #: (as source or target) for this many moves, unless they change
    barren_moves: int = 30
    #: pruned searches only: candidates are screened by a first-order
    #: estimate of their score, and at most this many of the best
    #: estimates are scored exactly (0: score every candidate exactly)
    screen_exact: int = 64
    #: ... the first ``screen_min`` of them always, the others while
    #: their estimate is within ``screen_margin`` of the best estimate's
    #: gain
    screen_min: int = 16
    screen_margin: float = 0.1


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
        self._cache = {}
        self._parts = {}
        self._extended = False
        #: how many moves each candidate level found (None: exhaustive)
        self.level_hits = {}
        #: entries of the move-effect cache before it is emptied
        self.cache_limit = 1500000
        self._start_level = 0
        #: improving moves of the last pruned scan not taken yet
        self._pending = []
        #: node idx -> (version, moves made) when a narrow pruned scan
        #: found no improving move from (to) it
        self._barren_src = {}
        self._barren_tgt = {}
        self._ranked = ([], [])
        #: instance idx -> key of its shape (see ``_shape_key``)
        self._shape_of = {}
        shapes = {}
        for inst in self.instances:
            self._shape_of[inst.idx] = shapes.setdefault(
                _shape_key(inst), -1 - len(shapes))
        self._has_locations = any(n.location_tags for n in self.gnodes)
        self._movable_cache = None
        self._size_cache = None
        self._refresh_base()

    # -- evaluating one candidate ---------------------------------------

    def _delta(self, inst, move):
        """The effect of ``move`` on the running sums, computed by trying
        it on the touched nodes and undoing it: None when the move is
        not possible, else (std items, weighted sum-components delta,
        offline all/primary deltas, pair changes)."""
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
        d1 = [0.0] * _NSTD
        d2 = [0.0] * _NSTD
        dsum = 0.0
        off_all = off_pri = 0
        pair_d = {} if self.has_pairs else None
        for (nd, st), (op, os_, ov) in zip(tr.saved, olds):
            if ov is None:
                np_ = len(nd.plist)
                off_all += np_ + len(nd.slist) - op - os_
                off_pri += np_ - op
                continue
            nv = S.node_std_values(nd)
            ns = S.node_sum_values(nd)
            o = ov[0]
            for k in range(_NSTD):
                a = o[k]
                b = nv[k]
                if a != b:
                    d1[k] += b - a
                    d2[k] += b * b - a * a
            os2 = ov[1]
            for k in range(_NSUM):
                if ns[k] != os2[k]:
                    dsum += _SUM_W[k] * (ns[k] - os2[k])
            if pair_d is not None and st[-1] is not None:
                old_map = st[-1]
                for key in set(old_map) | set(nd.instance_map):
                    d = nd.instance_map.get(key, 0) - old_map.get(key, 0)
                    if d:
                        pair_d[key] = pair_d.get(key, 0) + d
        tr.undo()
        items = [(k, d1[k], d2[k]) for k in range(_NSTD)
                 if d1[k] != 0.0 or d2[k] != 0.0]
        return items, dsum, off_all, off_pri, pair_d

    # -- per-node shares of a move ----------------------------------------
    #
    # A move is a sequence of operations on each of its nodes, and what
    # happens on one node depends only on that node and the instance
    # (plus, for a new secondary, the reservation the node already holds
    # for the new primary).  Each node's share is computed once and
    # cached until the node changes: a candidate then costs at most one
    # single-node trial (its target), not a trial of the whole move.

    _FAIL = object()

    def _part(self, nd, inst, role, force=False, newloc=None, pdx=None):
        peer = nd.peers.get(pdx, 0) if pdx is not None else None
        # adding to a node that does not hold the instance depends on the
        # instance's shape only: instances of one shape share the result
        who = self._shape_of.get(inst.idx, inst.idx) \
            if role in _ADD_ROLES else inst.idx
        key = (nd.idx, who, role, force, newloc, peer)
        ent = self._parts.get(key)
        if ent is not None and ent[0] == nd.version:
            return ent[1]
        offline = nd.offline
        if offline:
            op_, os_ = len(nd.plist), len(nd.slist)
        else:
            ov = S.node_values(nd)
        st = nd.save_for(inst)
        loc = inst.location_score
        res = None
        try:
            if role == "rm_p":
                nd.remove_pri(inst)
            elif role == "rm_s":
                nd.remove_sec(inst)
            elif role == "p_reloc":
                nd.remove_pri(inst)
                inst.location_score = newloc
                res = nd.add_pri(inst, force=True)
            elif role == "add_s":
                res = nd.add_sec(inst, pdx, force=force)
            elif role == "add_p":
                inst.location_score = newloc
                res = nd.add_pri(inst, force=force)
            elif role == "rp_as":
                nd.remove_pri(inst)
                res = nd.add_sec(inst, pdx, force=force)
            elif role == "rs_ap":
                nd.remove_sec(inst)
                inst.location_score = newloc
                res = nd.add_pri(inst, force=force)
            elif role == "rs_ap_rp_as":
                nd.remove_sec(inst)
                inst.location_score = newloc
                res = nd.add_pri(inst, force=force)
                if res is None:
                    nd.remove_pri(inst)
                    res = nd.add_sec(inst, pdx, force=force)
            else:
                raise ValueError(role)
            if res is not None:
                part = self._FAIL
            elif offline:
                np_ = len(nd.plist)
                part = (None, None, 0.0, np_ + len(nd.slist) - op_ - os_,
                        np_ - op_, None)
            else:
                nv = S.node_std_values(nd)
                ns = S.node_sum_values(nd)
                o = ov[0]
                d1 = list(map(_sub, nv, o))
                d2 = [b * b - a * a for a, b in zip(o, nv)]
                os2 = ov[1]
                dsum = 0.0
                for k in range(_NSUM):
                    if ns[k] != os2[k]:
                        dsum += _SUM_W[k] * (ns[k] - os2[k])
                pairs = None
                if self.has_pairs and st[-1] is not None:
                    old_map = st[-1]
                    pairs = {}
                    for pk in set(old_map) | set(nd.instance_map):
                        d = nd.instance_map.get(pk, 0) - old_map.get(pk, 0)
                        if d:
                            pairs[pk] = d
                part = (d1, d2, dsum, 0, 0, pairs or None)
        finally:
            inst.location_score = loc
            nd.restore_for(inst, st)
        self.evaluations += 1
        if len(self._parts) >= self.cache_limit:
            self._parts.clear()
        self._parts[key] = (nd.version, part)
        return part

    def _delta_parts(self, inst, move):
        """``_delta`` from the per-node shares (same result)."""
        kind, t, _t2 = move
        nodes = self.nodes
        force = self.opts.ignore_soft_errors
        p = inst.pnode
        s = inst.snode
        pn = nodes[p]
        part = self._part
        if kind == MV.FAILOVER:
            sn = nodes[s]
            if not pn.mig_tags <= sn.rmig_tags:
                return None
            parts = (part(pn, inst, "rp_as", force, None, s),
                     part(sn, inst, "rs_ap", pn.offline or force,
                          inst.location_score))
        elif kind == MV.REPLACE_SECONDARY:
            sn = nodes[s]
            tn = nodes[t]
            loc = MV.location_score_for(nodes, inst, p, t)
            parts = (part(pn, inst, "p_reloc", True, loc),
                     part(sn, inst, "rm_s"),
                     part(tn, inst, "add_s", sn.offline or force, None, p))
        elif kind == MV.REPLACE_AND_FAILOVER:
            sn = nodes[s]
            tn = nodes[t]
            if not pn.mig_tags <= tn.rmig_tags:
                return None
            loc = MV.location_score_for(nodes, inst, t, p)
            parts = (part(pn, inst, "rp_as", sn.offline or force, None, t),
                     part(sn, inst, "rm_s"),
                     part(tn, inst, "add_p", force, loc))
        elif kind == MV.FAILOVER_AND_REPLACE:
            sn = nodes[s]
            tn = nodes[t]
            if not pn.mig_tags <= sn.rmig_tags:
                return None
            force_p = pn.offline or force
            loc = MV.location_score_for(nodes, inst, s, t)
            parts = (part(pn, inst, "rm_p"),
                     part(sn, inst, "rs_ap", force_p, loc),
                     part(tn, inst, "add_s", force_p, None, s))
        elif kind == MV.REPLACE_PRIMARY:
            sn = nodes[s]
            tn = nodes[t]
            if not (pn.mig_tags <= sn.rmig_tags and
                    sn.mig_tags <= tn.rmig_tags):
                return None
            force_p = pn.offline or force
            loc = MV.location_score_for(nodes, inst, t, s)
            parts = (part(pn, inst, "rm_p"),
                     part(sn, inst, "rs_ap_rp_as", force_p, loc, t),
                     part(tn, inst, "add_p", force_p, loc))
        elif kind == MV.FAILOVER_TO_ANY:
            tn = nodes[t]
            if not pn.mig_tags <= tn.rmig_tags:
                return None
            parts = (part(tn, inst, "add_p", pn.offline or force,
                          inst.location_score),
                     part(pn, inst, "rm_p"))
        else:
            return self._delta(inst, move)
        fail = self._FAIL
        d1 = None
        dsum = 0.0
        off_all = off_pri = 0
        pairs = None
        for pt in parts:
            if pt is fail:
                return None
            a1, a2, ds, oa, op_, pp = pt
            dsum += ds
            off_all += oa
            off_pri += op_
            if a1 is not None:
                if d1 is None:
                    d1, d2 = a1, a2
                else:
                    d1 = list(map(_add, d1, a1))
                    d2 = list(map(_add, d2, a2))
            if pp:
                if pairs is None:
                    pairs = dict(pp)
                else:
                    for pk, d in pp.items():
                        pairs[pk] = pairs.get(pk, 0) + d
        if pairs is not None:
            pairs = {pk: d for pk, d in pairs.items() if d} or None
        if self.has_pairs and pairs is None:
            pairs = {}
        items = [] if d1 is None else \
            [(k, d1[k], d2[k]) for k in range(_NSTD)
             if d1[k] != 0.0 or d2[k] != 0.0]
        return items, dsum, off_all, off_pri, pairs

    # -- screening: a first-order score of every candidate ----------------
    #
    # On a big group a move changes the sum and the sum of squares of each
    # std-dev component by little, so the component's change is very
    # nearly linear in them: d(sqrt(var)) = d(var) / (2 sqrt(var)).  Then
    # a move's score change is the sum of its nodes' shares, each one a
    # single number for the current state, and a candidate costs one
    # share (its target's) instead of combining three vectors.  Screening
    # only orders candidates: the few best are then scored exactly.

    def _linear_weights(self):
        """Per std component, the weights of a node share's (sum, sum of
        squares) deltas in the first-order score change."""
        st = self.state
        n = st.n
        w1 = []
        w2 = []
        for k in range(_NSTD):
            m = st.s1[k] / n
            var = st.s2[k] / n - m * m
            # a component at zero can only grow: leaving it out keeps the
            # estimate optimistic, and the exact score judges
            c = _SUM_W_STD[k] / (2.0 * n * math.sqrt(var)) if var > 0 else 0.0
            w1.append(-2.0 * m * c)
            w2.append(c)
        return w1, w2

    def _screen(self, insts, targets):
        """(estimated score, inst, move) of the candidate moves of
        ``insts`` towards ``targets`` (see ``_candidate_moves``) whose
        estimate, the sum of the nodes' first-order shares, improves the
        score."""
        nodes = self.nodes
        force = self.opts.ignore_soft_errors
        part = self._part
        fail = self._FAIL
        w1, w2 = self._linear_weights()
        base = self.score
        loc_for = MV.location_score_for if self._has_locations \
            else _no_location
        disk_moves = self.opts.disk_moves
        inst_moves = self.opts.inst_moves
        shape_of = self._shape_of
        shares = {}

        def share(pt):
            # parts are shared (by instances of one shape, by move kinds):
            # each one's share is computed once per scan; the memo holds
            # the part, so its id is not reused meanwhile
            if pt is fail:
                return None
            ent = shares.get(id(pt))
            if ent is not None:
                return ent[1]
            a1, a2, ds, oa, op_, _pp = pt
            v = ds + 4.0 * oa + 16.0 * op_
            if a1 is not None:
                v += sum(map(_mul, w1, a1)) + sum(map(_mul, w2, a2))
            shares[id(pt)] = (pt, v)
            return v

        # target shares by (node, shape, role, force, location, peer):
        # the same for every instance of a shape during the scan
        tshares = {}

        def tshare(tn, inst, role, frc, loc, pdx):
            peer = tn.peers.get(pdx, 0) if pdx is not None else None
            key = (tn.idx, shape_of[inst.idx], role, frc, loc, peer)
            v = tshares.get(key, tshares)
            if v is tshares:
                v = tshares[key] = share(part(tn, inst, role, frc, loc,
                                              pdx))
            return v

        out = []
        add = out.append
        for inst in insts:
            p = inst.pnode
            pn = nodes[p]
            mir = inst.mirror
            if mir == MIRROR_EXTERNAL:
                if not inst_moves:
                    continue
                a = share(part(pn, inst, "rm_p"))
                if a is None:
                    continue
                src = base + a
                fp = pn.offline or force
                loc = inst.location_score
                for t in targets:
                    if t == p:
                        continue
                    tn = nodes[t]
                    if not pn.mig_tags <= tn.rmig_tags:
                        continue
                    b = tshare(tn, inst, "add_p", fp, loc, None)
                    if b is not None and src + b < base:
                        add((src + b, inst, (MV.FAILOVER_TO_ANY, t, None)))
                continue
            if mir != MIRROR_INTERNAL:
                continue
            s = inst.snode
            sn = nodes[s]
            use_sec, kinds = self._mirrored_kinds(inst)
            mig_ps = pn.mig_tags <= sn.rmig_tags
            if use_sec and mig_ps:
                a = share(part(pn, inst, "rp_as", force, None, s))
                b = share(part(sn, inst, "rs_ap", pn.offline or force,
                               inst.location_score))
                if a is not None and b is not None and a + b < 0:
                    add((base + a + b, inst, (MV.FAILOVER, None, None)))
            if not disk_moves or not kinds:
                continue
            fp = pn.offline or force
            fs = sn.offline or force
            rm_s = share(part(sn, inst, "rm_s"))
            rm_p = share(part(pn, inst, "rm_p"))
            do_rs = MV.REPLACE_SECONDARY in kinds and rm_s is not None
            do_raf = MV.REPLACE_AND_FAILOVER in kinds and rm_s is not None
            do_far = MV.FAILOVER_AND_REPLACE in kinds and \
                rm_p is not None and mig_ps
            do_rp = MV.REPLACE_PRIMARY in kinds and rm_p is not None and \
                mig_ps
            # source shares that depend on the target only through the
            # location score or the peer reservation the target names.
            # The four move kinds below are written out, not shared
            # through a helper: this loop is the balancer's hot path
            memo = {}
            for t in targets:
                if t == p or t == s:
                    continue
                tn = nodes[t]
                if do_rs:
                    loc = loc_for(nodes, inst, p, t)
                    mk = (0, loc, None)
                    a = memo.get(mk, memo)
                    if a is memo:
                        a = memo[mk] = share(part(pn, inst, "p_reloc",
                                                  True, loc))
                    if a is not None:
                        b = tshare(tn, inst, "add_s", fs, None, p)
                        if b is not None:
                            est = base + a + rm_s + b
                            if est < base:
                                add((est, inst,
                                     (MV.REPLACE_SECONDARY, t, None)))
                if do_raf and pn.mig_tags <= tn.rmig_tags:
                    mk = (1, None, pn.peers.get(t, 0))
                    a = memo.get(mk, memo)
                    if a is memo:
                        a = memo[mk] = share(part(pn, inst, "rp_as", fs,
                                                  None, t))
                    if a is not None:
                        b = tshare(tn, inst, "add_p", force,
                                   loc_for(nodes, inst, t, p), None)
                        if b is not None:
                            est = base + a + rm_s + b
                            if est < base:
                                add((est, inst,
                                     (MV.REPLACE_AND_FAILOVER, t, None)))
                if do_rp and sn.mig_tags <= tn.rmig_tags:
                    loc = loc_for(nodes, inst, t, s)
                    mk = (3, loc, sn.peers.get(t, 0))
                    a = memo.get(mk, memo)
                    if a is memo:
                        a = memo[mk] = share(part(sn, inst, "rs_ap_rp_as",
                                                  fp, loc, t))
                    if a is not None:
                        b = tshare(tn, inst, "add_p", fp, loc, None)
                        if b is not None:
                            est = base + rm_p + a + b
                            if est < base:
                                add((est, inst,
                                     (MV.REPLACE_PRIMARY, t, None)))
                if do_far:
                    loc = loc_for(nodes, inst, s, t)
                    mk = (2, loc, None)
                    a = memo.get(mk, memo)
                    if a is memo:
                        a = memo[mk] = share(part(sn, inst, "rs_ap", fp,
                                                  loc))
                    if a is not None:
                        b = tshare(tn, inst, "add_s", fp, None, s)
                        if b is not None:
                            est = base + rm_p + a + b
                            if est < base:
                                add((est, inst,
                                     (MV.FAILOVER_AND_REPLACE, t, None)))
        return out

    def evaluate(self, inst, move):
        """Score after ``move`` (None when the move is not possible); the
        model is left unchanged.  The move's effect is cached until one
        of the nodes it touches changes."""
        nodes = self.nodes
        key = (inst.idx, move)
        ent = self._cache.get(key)
        if ent is not None:
            idxs, vers, delta = ent
            for i, v in zip(idxs, vers):
                if nodes[i].version != v:
                    ent = None
                    break
        if ent is None:
            delta = self._remember_delta(key, inst, move)
        if delta is None:
            return None
        items, dsum, off_all, off_pri, pairs = delta
        return self.state.score_delta(self._base_total, self._terms,
                                      items, dsum, off_all, off_pri, pairs)

    def _remember_delta(self, key, inst, move):
        """The move's effect (``_delta_parts``), cached with the versions
        of the nodes it touches."""
        delta = self._delta_parts(inst, move)
        idxs = tuple(MV.touched_nodes(inst, move))
        cache = self._cache
        if len(cache) >= self.cache_limit:
            cache.clear()
        nodes = self.nodes
        cache[key] = (idxs, tuple([nodes[i].version for i in idxs]), delta)
        return delta

    def _refresh_base(self):
        self._base_total = self.state.score()
        self._terms = self.state.base_terms()

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
        for nd, _, _, _, _ in olds:
            nd.version += 1
        self._refresh_base()
        return old_p, old_s

    # -- candidates -------------------------------------------------------

    def _movable(self):
        # outside evacuation mode (where what may move is what sits on
        # an offline node now) the movable instances are fixed for a run
        if self.opts.evac_mode:
            return self._find_movable()
        if self._movable_cache is None:
            self._movable_cache = self._find_movable()
        return self._movable_cache

    def _find_movable(self):
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

    def _mirrored_kinds(self, inst):
        """(failover allowed, the kinds of moves with a target node) for
        an instance with an internally mirrored disk template."""
        opts = self.opts
        use_sec = inst.snode in self.online_set and opts.inst_moves
        if not opts.disk_moves:
            kinds = ()
        elif not opts.inst_moves:
            kinds = (MV.REPLACE_SECONDARY,)
        elif opts.restricted_migration and not self.nodes[inst.pnode].offline:
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
        return use_sec, kinds

    def _candidate_moves(self, inst, targets, full):
        """(move) candidates for one instance towards ``targets``."""
        opts = self.opts
        p, s = inst.pnode, inst.snode
        res = []
        mir = inst.mirror
        if mir == MIRROR_INTERNAL:
            use_sec, kinds = self._mirrored_kinds(inst)
            if use_sec:
                res.append((MV.FAILOVER, None, None))
            if opts.disk_moves:
                for t in targets:
                    if t == p or t == s:
                        continue
                    for k in kinds:
                        res.append((k, t, None))
                if inst.forthcoming and opts.inst_moves and \
                        self._extended:
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

    def _barren(self, table, idx):
        ent = table.get(idx)
        return ent is not None and ent[0] == self.nodes[idx].version and \
            len(self.placements) - ent[1] < self.opts.barren_moves

    def _mark_barren(self, record, sources, targets):
        """Remember the ranked sources and targets of a pruned scan that
        took part in no improving move."""
        base = self.score
        good_src = set()
        good_tgt = set()
        for sc, inst, move in record:
            if sc < base:
                good_src.add(inst.pnode)
                good_src.add(inst.snode)
                good_tgt.add(move[1])
        now = len(self.placements)
        nodes = self.nodes
        for table, idxs, good in ((self._barren_src, sources, good_src),
                                  (self._barren_tgt, targets, good_tgt)):
            for x in idxs:
                if x not in good:
                    table[x] = (nodes[x].version, now)

    def _candidates(self, k, skip_barren=False):
        """All (inst, move) pairs to try with ``k`` source and target
        nodes (None = all); with ``skip_barren`` the ranking passes over
        nodes that a recent scan found useless and that did not change
        since."""
        insts, targets = self._scan_sets(k, skip_barren)
        full = k is None
        return [(i, m) for i in insts
                for m in self._candidate_moves(i, targets, full)]

    def _scan_sets(self, k, skip_barren=False):
        """(instances to move, target nodes) of a scan with ``k`` source
        and target nodes (see ``_candidates``)."""
        insts = self._movable()
        self._ranked = ([], [])
        if k is None:
            return insts, self.online
        press = self._node_pressure()
        ranked = sorted(self.online, key=lambda x: press[x])
        if skip_barren:
            bt, bs = self._barren_tgt, self._barren_src
            targets = [x for x in ranked if not self._barren(bt, x)][:k]
            top = [x for x in reversed(ranked)
                   if not self._barren(bs, x)][:k]
        else:
            targets = ranked[:k]
            top = ranked[-k:]
        self._ranked = (top, targets)
        sources = set(top)
        for nd in self.gnodes:
            if nd.offline:
                sources.add(nd.idx)
            elif nd.fail_n1 and (nd.plist or nd.slist):
                sources.add(nd.idx)
            else:
                su = S.node_values(nd)[1]
                if su[1] or su[2]:
                    sources.add(nd.idx)
        return [i for i in insts
                if i.pnode in sources or (i.snode != NO_SECONDARY and
                                          i.snode in sources)], targets

    def _full_size(self):
        if self.opts.evac_mode:
            return self._count_full()
        key = self.opts.disk_moves
        ent = self._size_cache
        if ent is None or ent[0] != key:
            ent = self._size_cache = (key, self._count_full())
        return ent[1]

    def _count_full(self):
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

    def _best(self, cands, record=None):
        """The best (instance, move) among ``cands`` and its score
        (Ganeti's choice: the first lowest score; on a tie a forthcoming
        instance's move is preferred, it costs nothing)."""
        nodes = self.nodes
        cache = self._cache
        state = self.state
        n = state.n
        s1 = state.s1
        s2 = state.s2
        terms = self._terms
        wts = S._STD_W
        sqrt = math.sqrt
        base = self._base_total
        best = None
        best_score = self.score
        best_forth = False
        for inst, move in cands:
            key = (inst.idx, move)
            ent = cache.get(key)
            if ent is not None:
                idxs, vers, delta = ent
                for i, v in zip(idxs, vers):
                    if nodes[i].version != v:
                        ent = None
                        break
            if ent is None:
                delta = self._remember_delta(key, inst, move)
            if delta is None:
                continue
            items, dsum, off_all, off_pri, pairs = delta
            sc = base + dsum + 4.0 * off_all + 16.0 * off_pri
            for k, d1, d2 in items:
                m = (s1[k] + d1) / n
                var = (s2[k] + d2) / n - m * m
                if var > 0:
                    sc += wts[k] * sqrt(var) - terms[k]
                else:
                    sc -= terms[k]
            if pairs:
                for pk, d in pairs.items():
                    sc += state.pair_map_delta(pk, d)
            if record is not None:
                record.append((sc, inst, move))
            if sc < best_score:
                if best is None or sc < best_score - 1e-12 or \
                        (inst.forthcoming and not best_forth):
                    best, best_score = (inst, move), sc
                    best_forth = inst.forthcoming
            elif best is not None and inst.forthcoming and \
                    not best_forth and sc <= best_score + 1e-12:
                best, best_score = (inst, move), sc
                best_forth = True
        return best, best_score

    def _screened_best(self, insts, targets, record=None):
        """As ``_best`` over the candidates of ``insts`` towards
        ``targets``, from their screening estimates: the best few by
        estimate are scored exactly and the best of those is returned.
        ``record`` gets (estimate, inst, move) of every candidate whose
        estimate improves the score."""
        base = self.score
        good = self._screen(insts, targets)
        if record is not None:
            record.extend(good)
        if not good:
            return None, base
        opts = self.opts
        top = heapq.nsmallest(opts.screen_exact, good, key=_first)
        # past the first few, a candidate is scored exactly only while
        # its estimate is near the best estimate
        reach = top[0][0] + opts.screen_margin * (base - top[0][0])
        cands = [(inst, move) for n, (est, inst, move) in enumerate(top)
                 if n < opts.screen_min or est <= reach]
        return self._best(cands)

    def _acceptable(self, new_score):
        opts = self.opts
        ini = self.score
        return new_score < ini and (ini > opts.min_gain_limit or
                                    ini - new_score >= opts.min_gain)

    def _apply(self, inst, move, sc):
        old_p, old_s = self.commit(inst, move)
        pl = Placement(inst, move, old_p, old_s, inst.pnode, inst.snode, sc)
        self.score = sc
        self.placements.append(pl)
        return pl

    def step(self):
        """Find and apply one move; returns the Placement or None."""
        opts = self.opts
        size = self._full_size()
        if size <= opts.full_budget:
            levels = [None]
        else:
            # widening candidate sets, each at most exhaustive_limit
            # candidates (estimated), the last one everything if that fits
            levels = []
            n = max(1, len(self.online))
            k = opts.prune_nodes
            while k < n:
                if size * (k / n) ** 2 > opts.exhaustive_limit:
                    break
                levels.append(k)
                k *= 4
            if size <= opts.exhaustive_limit or not levels:
                levels.append(None)
        if levels != [None]:
            pl = self._take_pending()
            if pl is not None:
                return pl
        # start one level below the one that found the last move: near
        # the end only the wide searches still find moves
        first = max(0, min(self._start_level, len(levels) - 1) - 1)
        # below the full budget every candidate is scored exactly, as
        # Ganeti does, so that the moves are Ganeti's
        screened = levels != [None] and opts.screen_exact > 0 and \
            not self.has_pairs
        for pos in range(first, len(levels)):
            k = levels[pos]
            record = [] if k is not None else None
            narrow = pos < len(levels) - 1
            if screened:
                best, sc = self._screened_best(
                    *self._scan_sets(k, narrow), record=record)
                if not narrow and (best is None or
                                   not self._acceptable(sc)):
                    # the run ends only where no move of the widest
                    # scan improves the score: make sure exactly
                    record = [] if k is not None else None
                    best, sc = self._best(self._candidates(k), record)
            else:
                best, sc = self._best(self._candidates(k, narrow), record)
            if narrow:
                self._mark_barren(record, *self._ranked)
            if best is not None and self._acceptable(sc):
                self.level_hits[k] = self.level_hits.get(k, 0) + 1
                self._start_level = pos
                if record:
                    self._keep_pending(record, best, sc)
                return self._apply(best[0], best[1], sc)
        # moves Ganeti does not know (both nodes of a forthcoming instance
        # at once) only once its moves are exhausted: the result is then
        # never worse than Ganeti's
        if self.opts.disk_moves and any(i.forthcoming
                                        for i in self._movable()):
            self._extended = True
            try:
                for k in levels:
                    cands = [(i, m) for i, m in self._candidates(k)
                             if m[0] == MV.CHANGE_ALL]
                    best, sc = self._best(cands)
                    if best is not None and self._acceptable(sc):
                        return self._apply(best[0], best[1], sc)
            finally:
                self._extended = False
        return None

    def _keep_pending(self, record, best, best_score):
        """Remember the scan's other improving moves with their gains, for
        :meth:`_take_pending`."""
        if not self.opts.lazy_greedy:
            return
        base = self.score
        # gains are negative deltas; keep those within the share
        limit = self.opts.lazy_gain_share * (best_score - base)
        heap = [(sc - base, n, inst, move, inst.pnode, inst.snode)
                for n, (sc, inst, move) in enumerate(record)
                if sc - base <= limit and inst is not best[0]]
        heapq.heapify(heap)
        self._pending = heap
        self._pending_limit = limit
        self._seq = len(heap)

    def _take_pending(self):
        """Lazy greedy: the remembered move with the largest gain, its gain
        recomputed; taken when it is still at least as good as the next
        one's last known gain (gains mostly shrink as the group evens
        out), else put back with its new gain.  None when none is left
        that still improves the score: time for a new scan."""
        heap = self._pending
        while heap:
            _, _, inst, move, p, s = heapq.heappop(heap)
            if inst.pnode != p or inst.snode != s:
                continue  # moved since the scan
            sc = self.evaluate(inst, move)
            if sc is None or not self._acceptable(sc):
                continue
            delta = sc - self.score
            if delta > self._pending_limit:
                continue
            if not heap or delta <= heap[0][0] + 1e-12:
                return self._apply(inst, move, sc)
            self._seq += 1
            heapq.heappush(heap, (delta, self._seq, inst, move, p, s))
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
