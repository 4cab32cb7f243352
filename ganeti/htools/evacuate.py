"""Moving existing instances for the iallocator: node evacuation,
relocation and group change (Ganeti's rules and messages), and the
opcodes that carry the moves out."""

from ganeti.htools import alloc as A
from ganeti.htools import model as M
from ganeti.htools import moves as MV
from ganeti.htools import score as S
from ganeti.htools import types as T

CHANGE_PRIMARY = "primary-only"
CHANGE_SECONDARY = "secondary-only"
CHANGE_ALL = "all"
EVAC_MODES = (CHANGE_PRIMARY, CHANGE_SECONDARY, CHANGE_ALL)

DEFAULT_SHUTDOWN_TIMEOUT = 120


class EvacFailed(Exception):
    pass


def move_opcodes(inst, move, nodes):
    """The opcodes of a move; a forthcoming instance is failed over
    (it only exists in the configuration), not migrated."""
    ops = MV.move_opcodes(inst, move, nodes)
    if not inst.forthcoming:
        return ops
    res = []
    for op in ops:
        if op["OP_ID"] == "OP_INSTANCE_MIGRATE":
            fo = {"OP_ID": "OP_INSTANCE_FAILOVER",
                  "instance_name": inst.name,
                  "shutdown_timeout": DEFAULT_SHUTDOWN_TIMEOUT,
                  "ignore_consistency": False, "ignore_ipolicy": False,
                  "cleanup": False}
            if "target_node" in op:
                fo["target_node"] = op["target_node"]
            op = fo
        res.append(op)
    return res


class _GroupScore:
    """Score of one group's nodes after a trial, incrementally."""

    def __init__(self, nodes, gidx):
        self.nodes = nodes
        self.members = [n for n in nodes if n.group == gidx]
        self.ids = {n.idx for n in self.members}
        self.state = S.ScoreState(self.members)

    def after(self, touched_before):
        """Score now, given {idx: (values or None, counts, instance_map)}
        of the touched nodes before the trial."""
        changes = []
        off_all = off_pri = 0
        map_d = 0
        keyd = {}
        for idx, (vals, counts, imap) in touched_before.items():
            if idx not in self.ids:
                continue
            nd = self.nodes[idx]
            if nd.offline:
                off_all += len(nd.plist) + len(nd.slist) - counts[0]
                off_pri += len(nd.plist) - counts[1]
                continue
            changes.append((vals, S.node_values(nd)))
            for k, v in nd.instance_map.items():
                keyd[k] = keyd.get(k, 0) + v
            for k, v in imap.items():
                keyd[k] = keyd.get(k, 0) - v
        for k, d in keyd.items():
            if d:
                map_d += self.state.pair_map_delta(k, d)
        return self.state.score_after(changes, (off_all, off_pri), map_d)


def _before(nodes, idxs):
    res = {}
    for i in idxs:
        if i < 0 or i in res:
            continue
        nd = nodes[i]
        vals = None if nd.offline else S.node_values(nd)
        res[i] = (vals, (len(nd.plist) + len(nd.slist), len(nd.plist)),
                  dict(nd.instance_map))
    return res


class _Snapshot:
    """Save nodes and an instance, restore on demand."""

    def __init__(self, nodes, inst, idxs):
        self.nodes = nodes
        self.inst = inst
        self.saved = [(nodes[i], nodes[i].save()) for i in set(idxs)
                      if i >= 0]
        self.isaved = (inst.pnode, inst.snode, inst.location_score)

    def restore(self):
        for nd, st in self.saved:
            nd.restore(st)
        self.inst.pnode, self.inst.snode, self.inst.location_score = \
            self.isaved


def _one_node_only(ctx, inst, gidx, avail, force):
    """Change the secondary (drbd) or the primary (shared storage) to
    the best of ``avail``; returns the opcodes."""
    nodes = ctx.nodes
    if inst.mirror == T.MIRROR_NONE:
        raise EvacFailed("Can't relocate/evacuate non-mirrored instances")
    kind = MV.REPLACE_SECONDARY if inst.mirror == T.MIRROR_INTERNAL \
        else MV.FAILOVER_TO_ANY
    gs = _GroupScore(nodes, gidx)
    best = None
    msg = ""
    for t in avail:
        move = (kind, t, None)
        touched = MV.touched_nodes(inst, move)
        before = _before(nodes, touched)
        snap = _Snapshot(nodes, inst, touched)
        try:
            MV.apply_move(nodes, inst, move, force)
        except MV.MoveFailed as e:
            snap.restore()
            if best is None:
                msg += " Node %s failed: %s;" % (nodes[t].name, e.args[0])
            continue
        sc = gs.after(before)
        snap.restore()
        if best is None or not best[0] < sc:
            best = (sc, t)
    if best is None:
        raise EvacFailed("Can't find any good node: %s" % msg)
    move = (kind, best[1], None)
    MV.apply_move(nodes, inst, move, force)
    return move_opcodes(inst, move, nodes)


def _drbd_all(ctx, inst, gidx, avail, force):
    """Change both nodes of a drbd instance (replace the secondary by
    the new primary, fail over, replace the secondary again)."""
    nodes = ctx.nodes
    gs = _GroupScore(nodes, gidx)
    best = None
    err = "no nodes available"
    for tp in avail:
        for ts in avail:
            if tp == ts:
                continue
            idxs = [inst.pnode, inst.snode, tp, ts]
            before = _before(nodes, idxs)
            snap = _Snapshot(nodes, inst, idxs)
            steps = []
            try:
                if nodes[inst.pnode].offline:
                    _step(nodes, inst, (MV.FAILOVER, None, None), force,
                          "Failing over to the secondary")
                    steps.append((MV.FAILOVER, None, None))
                for move, what in (
                        ((MV.REPLACE_SECONDARY, tp, None),
                         "Changing secondary to new primary"),
                        ((MV.FAILOVER, None, None),
                         "Failing over to new primary"),
                        ((MV.REPLACE_SECONDARY, ts, None),
                         "Changing secondary to final secondary")):
                    _step(nodes, inst, move, force, what)
                    steps.append(move)
            except EvacFailed as e:
                snap.restore()
                if best is None:
                    err = "Allocation failed: %s" % e
                continue
            sc = gs.after(before)
            snap.restore()
            if best is None or not best[0] < sc:
                best = (sc, tp, ts, steps)
    if best is None:
        raise EvacFailed("Can't find any good nodes for relocation: %s"
                         % err)
    ops = []
    for move in best[3]:
        MV.apply_move(nodes, inst, move, force)
    for move in best[3]:
        ops.extend(move_opcodes(inst, move, nodes))
    return ops


def _step(nodes, inst, move, force, what):
    try:
        MV.apply_move(nodes, inst, move, force)
    except MV.MoveFailed as e:
        raise EvacFailed("%s: %s" % (what, e.args[0]))


def evac_instance(ctx, inst, mode, gidx, avail, force=False):
    """Ganeti's evacuation of one instance; applies the moves to the
    model and returns the opcodes, or raises EvacFailed."""
    dt = inst.disk_template
    if dt == "plain" or dt == "file":
        raise EvacFailed("Instances of type %s cannot be relocated" % dt)
    if dt != T.DT_DRBD:
        if mode == CHANGE_SECONDARY:
            raise EvacFailed("Instances with disk template '%s' can't"
                             " execute change secondary" % dt)
        return _one_node_only(ctx, inst, gidx, avail, force)
    if mode == CHANGE_PRIMARY:
        move = (MV.FAILOVER, None, None)
        try:
            MV.apply_move(ctx.nodes, inst, move, force)
        except MV.MoveFailed as e:
            raise EvacFailed(e.args[0])
        return move_opcodes(inst, move, ctx.nodes)
    if mode == CHANGE_SECONDARY:
        return _one_node_only(ctx, inst, gidx, avail, force)
    return _drbd_all(ctx, inst, gidx, avail, force)


class EvacResult:
    def __init__(self):
        self.moved = []     # (inst, group idx, [node idx])
        self.failed = []    # (inst, message)
        self.jobs = []

    def to_json(self, ctx):
        nodes = ctx.nodes
        return [[[i.name, ctx.groups[g].name, [nodes[n].name for n in ns]]
                 for i, g, ns in self.moved],
                [[i.name, msg] for i, msg in self.failed],
                self.jobs]

    def info(self):
        return ("%d instances failed to move and %d were moved"
                " successfully" % (len(self.failed), len(self.moved)))


def _record(ctx, res, inst, fn):
    try:
        ops = fn()
    except EvacFailed as e:
        res.failed.append((inst, str(e)))
        return
    res.moved.append((inst, ctx.nodes[inst.pnode].group,
                      inst.all_nodes()))
    res.jobs.append(ops)


def nodes_to_evacuate(insts, mode):
    res = set()
    for i in insts:
        if mode in (CHANGE_PRIMARY, CHANGE_ALL):
            res.add(i.pnode)
        if mode in (CHANGE_SECONDARY, CHANGE_ALL) and \
                i.disk_template == T.DT_DRBD and i.snode >= 0:
            res.add(i.snode)
    return res


def node_evacuate(ctx, insts, mode):
    """Evacuate ``insts`` (in order) within their groups."""
    force = ctx.opts.ignore_soft_errors
    excl = nodes_to_evacuate(insts, mode)
    excl.update(nd.idx for nd in ctx.nodes if nd.offline)
    groups = A.group_node_idxs(ctx)
    res = EvacResult()
    for inst in insts:
        gidx = ctx.nodes[inst.pnode].group
        avail = [i for i in groups.get(gidx, [])
                 if i not in excl and i != inst.pnode]
        _record(ctx, res, inst, lambda: evac_instance(
            ctx, inst, mode, gidx, avail, force))
    return res


def change_group(ctx, insts, target_gidxs):
    """Move ``insts`` to the best of the target groups (all groups the
    instances are not in, when none are given)."""
    evac_g = []
    for i in insts:
        g = ctx.nodes[i.pnode].group
        if g not in evac_g:
            evac_g.append(g)
    targets = [g for g in (target_gidxs or range(len(ctx.groups)))
               if g not in evac_g]
    groups = A.group_node_idxs(ctx)
    res = EvacResult()
    for inst in insts:
        def one(inst=inst):
            saved = (inst.pnode, inst.snode, inst.location_score)
            try:
                g, _sol, _msgs = A.find_best_group(
                    ctx, inst, A.required_nodes(inst.disk_template),
                    allowed_groups=targets)
            except A.AllocError as e:
                raise EvacFailed(str(e))
            finally:
                inst.pnode, inst.snode, inst.location_score = saved
            avail = [i for i in groups.get(g.idx, [])
                     if not ctx.nodes[i].offline]
            return evac_instance(ctx, inst, CHANGE_ALL, g.idx, avail,
                                 force=False)
        _record(ctx, res, inst, one)
    return res


def relocate(ctx, inst, required, reloc_from):
    """Change the secondary (drbd) or primary (shared storage) of one
    instance; returns the new node names."""
    if required != 1:
        raise EvacFailed("Exchange %d nodes mode is not implemented"
                         % required)
    if inst.mirror == T.MIRROR_NONE:
        raise EvacFailed("Can't relocate non-mirrored instances")
    if inst.mirror == T.MIRROR_INTERNAL:
        exp, what, mode = inst.snode, "secondary", CHANGE_SECONDARY
    else:
        exp, what, mode = inst.pnode, "primary", CHANGE_PRIMARY
    if reloc_from != [exp]:
        raise EvacFailed(
            "Unsupported request: excluded nodes not equal to instance's "
            "%s(%s versus %s)" % (
                what, ctx.nodes[exp].name if exp >= 0 else exp,
                [ctx.nodes[i].name for i in reloc_from]))
    res = node_evacuate(ctx, [inst], mode)
    if res.failed:
        raise EvacFailed(res.failed[0][1])
    if inst.mirror == T.MIRROR_INTERNAL:
        return [ctx.nodes[inst.snode].name]
    return [ctx.nodes[inst.pnode].name]


def allocate_secondary(ctx, inst):
    """A secondary node for an instance that has none (it becomes a
    drbd instance); returns the Solution."""
    if inst.snode >= 0:
        raise A.AllocError("Instance already has a secondary")
    nodes = ctx.nodes
    pidx = inst.pnode
    p = nodes[pidx]
    saved_p = p.save()
    saved_t = inst.disk_template
    p.remove_pri(inst)
    inst.disk_template = T.DT_DRBD
    inst._derive()
    try:
        sidxs = [nd.idx for nd in nodes if nd.group == p.group
                 and nd.idx != pidx]
        sol = A.try_alloc_pairs(ctx, inst, [(pidx, sidxs)],
                                list(range(len(nodes))))
        sol.log.insert(0, sol.describe(nodes))
    finally:
        inst.disk_template = saved_t
        inst._derive()
        p.restore(saved_p)
        inst.pnode, inst.snode = pidx, M.NO_SECONDARY
    return sol
