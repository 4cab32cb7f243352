"""Instance moves: applying them to the model, undoing them, and turning
them into commands and opcodes.

A move is a tuple ``(kind, target, target2)``:

* ``f``    failover/migrate (primary and secondary swap)
* ``fa``   failover to any node (shared storage), target = new primary
* ``rp``   replace the primary: migrate, replace disks, migrate back
           (``f r:T f``), target = new primary
* ``rs``   replace the secondary (``r:T``), target = new secondary
* ``raf``  replace the secondary then migrate (``r:T f``): target becomes
           primary, the old primary secondary
* ``far``  migrate then replace the secondary (``f r:T``): the old
           secondary becomes primary, target secondary
* ``ca``   change both nodes of a forthcoming instance in one step
           (it only exists in the configuration): target primary,
           target2 secondary
"""

from ganeti.htools import model as M

FAILOVER = "f"
FAILOVER_TO_ANY = "fa"
REPLACE_PRIMARY = "rp"
REPLACE_SECONDARY = "rs"
REPLACE_AND_FAILOVER = "raf"
FAILOVER_AND_REPLACE = "far"
CHANGE_ALL = "ca"

#: relative cost of a move kind, used to prefer cheaper moves with the
#: same resulting score (forthcoming instances cost nothing)
COST = {FAILOVER: 1, FAILOVER_TO_ANY: 1, REPLACE_SECONDARY: 2,
        REPLACE_AND_FAILOVER: 3, FAILOVER_AND_REPLACE: 3,
        REPLACE_PRIMARY: 4, CHANGE_ALL: 0}


class MoveFailed(Exception):
    pass


def location_score_for(nodes, inst, pdx, sdx):
    if not inst.has_secondary or sdx == M.NO_SECONDARY:
        return 0
    return len(nodes[pdx].location_tags & nodes[sdx].location_tags)


def _check(res):
    if res is not None:
        raise MoveFailed(res)


def _check_mig(src, dst):
    if not src.mig_tags <= dst.rmig_tags:
        raise MoveFailed(M.FAIL_MIG)


def touched_nodes(inst, move):
    """Indices of the nodes a move changes (old and new)."""
    kind, t, t2 = move
    res = [inst.pnode]
    if inst.snode != M.NO_SECONDARY:
        res.append(inst.snode)
    for x in (t, t2):
        if x is not None and x != M.NO_SECONDARY and x not in res:
            res.append(x)
    return res


def apply_move(nodes, inst, move, force=False):
    """Apply ``move`` to the model: nodes and the instance's own fields.
    Raises MoveFailed (leaving the model partially changed: callers
    snapshot the touched nodes first, see ``Trial``).  Returns the new
    (primary, secondary)."""
    kind, t, t2 = move
    opdx = inst.pnode
    osdx = inst.snode
    old_p = nodes[opdx]
    if kind == FAILOVER:
        old_s = nodes[osdx]
        _check_mig(old_p, old_s)
        old_p.remove_pri(inst)
        old_s.remove_sec(inst)
        _check(old_s.add_pri(inst, force=old_p.offline or force))
        _check(old_p.add_sec(inst, osdx, force=force))
        inst.pnode, inst.snode = osdx, opdx
    elif kind == FAILOVER_TO_ANY:
        tgt = nodes[t]
        _check_mig(old_p, tgt)
        _check(tgt.add_pri(inst, force=old_p.offline or force))
        old_p.remove_pri(inst)
        inst.pnode = t
    elif kind == REPLACE_PRIMARY:
        old_s = nodes[osdx]
        tgt = nodes[t]
        force_p = old_p.offline or force
        _check_mig(old_p, old_s)
        _check_mig(old_s, tgt)
        old_p.remove_pri(inst)
        old_s.remove_sec(inst)
        inst.location_score = location_score_for(nodes, inst, t, osdx)
        # the secondary must be able to run the instance meanwhile
        _check(old_s.add_pri(inst, force=force_p))
        old_s.remove_pri(inst)
        _check(tgt.add_pri(inst, force=force_p))
        inst.pnode = t
        _check(old_s.add_sec(inst, t, force=force_p))
    elif kind == REPLACE_SECONDARY:
        old_s = nodes[osdx]
        tgt = nodes[t]
        force_s = old_s.offline or force
        old_p.remove_pri(inst)
        old_s.remove_sec(inst)
        inst.location_score = location_score_for(nodes, inst, opdx, t)
        _check(tgt.add_sec(inst, opdx, force=force_s))
        _check(old_p.add_pri(inst, force=True))
        inst.snode = t
    elif kind == REPLACE_AND_FAILOVER:
        old_s = nodes[osdx]
        tgt = nodes[t]
        force_s = old_s.offline or force
        old_p.remove_pri(inst)
        old_s.remove_sec(inst)
        _check_mig(old_p, tgt)
        inst.location_score = location_score_for(nodes, inst, t, opdx)
        _check(tgt.add_pri(inst, force=force))
        _check(old_p.add_sec(inst, t, force=force_s))
        inst.pnode, inst.snode = t, opdx
    elif kind == FAILOVER_AND_REPLACE:
        old_s = nodes[osdx]
        tgt = nodes[t]
        force_p = old_p.offline or force
        old_p.remove_pri(inst)
        old_s.remove_sec(inst)
        _check_mig(old_p, old_s)
        inst.location_score = location_score_for(nodes, inst, osdx, t)
        _check(old_s.add_pri(inst, force=force_p))
        _check(tgt.add_sec(inst, osdx, force=force_p))
        inst.pnode, inst.snode = osdx, t
    elif kind == CHANGE_ALL:
        force_a = old_p.offline or force
        old_p.remove_pri(inst)
        if osdx != M.NO_SECONDARY:
            nodes[osdx].remove_sec(inst)
        inst.location_score = location_score_for(nodes, inst, t, t2)
        _check(nodes[t].add_pri(inst, force=force_a))
        if t2 is not None and t2 != M.NO_SECONDARY:
            _check(nodes[t2].add_sec(inst, t, force=force_a))
        inst.pnode = t
        inst.snode = t2 if t2 is not None else M.NO_SECONDARY
    else:
        raise ValueError("unknown move kind %r" % (kind,))
    return inst.pnode, inst.snode


class Trial:
    """Apply a move with everything needed to undo it exactly."""

    __slots__ = ("nodes", "inst", "saved", "inst_saved", "ok", "reason")

    def __init__(self, nodes, inst, move, force=False):
        self.nodes = nodes
        self.inst = inst
        idxs = touched_nodes(inst, move)
        self.saved = [(nodes[i], nodes[i].save_for(inst)) for i in idxs]
        self.inst_saved = (inst.pnode, inst.snode, inst.location_score)
        try:
            apply_move(nodes, inst, move, force)
            self.ok = True
            self.reason = None
        except MoveFailed as e:
            self.ok = False
            self.reason = e.args[0]
            self.undo()

    def undo(self):
        inst = self.inst
        for nd, st in self.saved:
            nd.restore_for(inst, st)
        (self.inst.pnode, self.inst.snode,
         self.inst.location_score) = self.inst_saved


def move_commands(inst, move, nodes):
    """(Ganeti's short description "a=..." text, gnt-instance commands)
    of a move, with node names from ``nodes`` (after the move)."""
    kind, t, t2 = move
    name = inst.alias
    morf = "migrate" if inst.is_running() else "failover"
    mig = "%s -f %s" % (morf, name)

    def rep(n):
        return "replace-disks -n %s %s" % (nodes[n].alias, name)

    if kind == FAILOVER:
        return "f", [mig]
    if kind == FAILOVER_TO_ANY:
        return "fa:%s" % nodes[t].alias, \
            ["%s -f -n %s %s" % (morf, nodes[t].alias, name)]
    if kind == FAILOVER_AND_REPLACE:
        return "f r:%s" % nodes[t].alias, [mig, rep(t)]
    if kind == REPLACE_SECONDARY:
        return "r:%s" % nodes[t].alias, [rep(t)]
    if kind == REPLACE_AND_FAILOVER:
        return "r:%s f" % nodes[t].alias, [rep(t), mig]
    if kind == REPLACE_PRIMARY:
        return "f r:%s f" % nodes[t].alias, [mig, rep(t), mig]
    if kind == CHANGE_ALL:
        if t2 is None or t2 == M.NO_SECONDARY:
            return "fa:%s" % nodes[t].alias, \
                ["%s -f -n %s %s" % (morf, nodes[t].alias, name)]
        return "r:%s f r:%s" % (nodes[t].alias, nodes[t2].alias), \
            [rep(t), mig, rep(t2)]
    raise ValueError(kind)


def move_opcodes(inst, move, nodes):
    """The opcodes (as dicts, ``OP_ID`` included) Ganeti's hbal submits
    for a move."""
    kind, t, t2 = move
    name = inst.name

    def op_f(target=None):
        op = {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": name,
              "allow_failover": True, "ignore_hvversions": True,
              "cleanup": False, "allow_runtime_changes": False,
              "ignore_ipolicy": False}
        if target is not None:
            op["target_node"] = nodes[target].name
        return op

    def op_r(n):
        return {"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": name,
                "early_release": False, "ignore_ipolicy": False,
                "mode": "replace_new_secondary", "disks": [],
                "remote_node": nodes[n].name}

    if kind == FAILOVER:
        return [op_f()]
    if kind == FAILOVER_TO_ANY:
        return [op_f(t)]
    if kind == REPLACE_PRIMARY:
        return [op_f(), op_r(t), op_f()]
    if kind == REPLACE_SECONDARY:
        return [op_r(t)]
    if kind == REPLACE_AND_FAILOVER:
        return [op_r(t), op_f()]
    if kind == FAILOVER_AND_REPLACE:
        return [op_f(), op_r(t)]
    if kind == CHANGE_ALL:
        if t2 is None or t2 == M.NO_SECONDARY:
            return [op_f(t)]
        return [op_r(t), op_f(), op_r(t2)]
    raise ValueError(kind)
