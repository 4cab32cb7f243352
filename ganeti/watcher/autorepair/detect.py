"""What is wrong with an instance, and the next step that repairs it.

An instance needs repair when one of its nodes is offline, or drained
while that matters: a drained primary of an instance that can migrate
(it should leave), a drained secondary of a drbd instance (its mirror
should move).  A non-redundant instance (plain, file) on a drained but
online node keeps running: draining asks to move away what can move
without loss, and its repair (a reinstall elsewhere) starts only once
the node is offline.  Diskless instances are left out: the allocator
cannot relocate them (they have no storage to follow).

A repair may take several steps, one per pass (a drbd instance whose
primary died is failed over, then gets a new secondary); each step is
a list of opcodes submitted as one job.  Targets are chosen by the
cluster's instance allocator.
"""

import attrs

from ganeti import constants
from ganeti import opcodes
from ganeti.watcher.autorepair import tags as T


@attrs.frozen
class Node:
    name: str
    offline: bool = False
    drained: bool = False
    #: False for an offline node that has an out-of-band program and is
    #: not known to be powered off: it may still run its instances
    fenced: bool = True

    @property
    def usable(self):
        return not self.offline and not self.drained


def is_fenced(offline, powered, oob_program):
    """Whether a node may be taken for dead: it is online (nothing to
    fence), or offline without an out-of-band program (the admin's word
    is trusted, as in Ganeti), or known to be powered off."""
    return not offline or not oob_program or powered is False


@attrs.frozen
class Instance:
    name: str
    disk_template: str
    pnode: str
    snodes: tuple = ()
    #: whether it should run (admin state up)
    admin_up: bool = True
    tags: tuple = ()
    group_tags: tuple = ()
    #: the uuid of its primary node's group (for the repair budget)
    group: str = None


@attrs.frozen
class Step:
    """The next step of a repair: its type and the opcodes (dicts) of the
    job that does it; ``why`` says what is wrong, for reports."""
    kind: str
    ops: tuple
    why: str
    #: why the step may not run yet (None: it may)
    blocked: str = None


def _op(op_id, **params):
    params["OP_ID"] = op_id
    return params


def next_step(inst, nodes, iallocator):
    """The repair step ``inst`` needs now (None when it is healthy or not
    repairable): ``nodes`` maps node names to Node."""
    pri = nodes.get(inst.pnode)
    return _fenced(_next_step(inst, nodes, iallocator, pri), pri)


def _next_step(inst, nodes, iallocator, pri):
    if pri is None:
        return None
    name = inst.name
    dt = inst.disk_template
    if dt in constants.DTS_INT_MIRROR:
        sec = nodes.get(inst.snodes[0]) if inst.snodes else None
        if sec is None:
            return None
        if pri.offline and sec.usable:
            return Step(T.FAILOVER, (
                _op("OP_INSTANCE_FAILOVER", instance_name=name,
                    ignore_consistency=True),),
                "primary node %s is offline" % pri.name)
        if pri.offline or (not sec.usable and not pri.usable):
            return Step(T.REINSTALL, _reinstall(inst, iallocator),
                        "nodes %s and %s are both unusable"
                        % (pri.name, sec.name))
        if not sec.usable:
            return Step(T.FIX_STORAGE, (
                _op("OP_INSTANCE_REPLACE_DISKS", instance_name=name,
                    mode=opcodes.REPLACE_DISK_CHG,
                    iallocator=iallocator),),
                "secondary node %s is %s" % (sec.name, _state(sec)))
        if pri.drained:
            return _leave(inst, pri, target=None, iallocator=None)
        return None
    if dt in constants.DTS_EXT_MIRROR and dt != constants.DT_DISKLESS:
        if pri.offline:
            return Step(T.FAILOVER, (
                _op("OP_INSTANCE_FAILOVER", instance_name=name,
                    ignore_consistency=True, iallocator=iallocator),),
                "primary node %s is offline" % pri.name)
        if pri.drained:
            return _leave(inst, pri, target=None, iallocator=iallocator)
        return None
    if dt in (constants.DT_PLAIN, constants.DT_FILE):
        if pri.offline:
            return Step(T.REINSTALL, _reinstall(inst, iallocator),
                        "primary node %s is offline and the disks exist"
                        " nowhere else" % pri.name)
        return None
    return None


def _fenced(step, pri):
    """A step that starts the instance elsewhere waits until its offline
    primary is known to be powered off, where it can be (it has an
    out-of-band program): the instance must never run twice."""
    if step is None or pri.fenced or not pri.offline:
        return step
    return attrs.evolve(step, blocked="node %s is offline but not known to"
                        " be powered off (fence it: gnt-node power off)"
                        % pri.name)


def _state(node):
    return "offline" if node.offline else "drained"


def _reinstall(inst, iallocator):
    """Recreating disks needs the instance marked down (its node is gone:
    nothing is asked of it); it is started again if it was up."""
    name = inst.name
    ops = []
    if inst.admin_up:
        ops.append(_op("OP_INSTANCE_SHUTDOWN", instance_name=name,
                       ignore_offline_nodes=True))
    ops += [_op("OP_INSTANCE_RECREATE_DISKS", instance_name=name,
                iallocator=iallocator),
            _op("OP_INSTANCE_REINSTALL", instance_name=name)]
    if inst.admin_up:
        ops.append(_op("OP_INSTANCE_STARTUP", instance_name=name))
    return tuple(ops)


def _leave(inst, pri, target, iallocator):
    """Moving a running instance off its drained primary is a migration;
    a stopped one loses nothing by a failover, so that needs no more
    than the migrate permission either."""
    why = "primary node %s is drained" % pri.name
    extra = {"iallocator": iallocator} if iallocator else {}
    if inst.admin_up:
        return Step(T.MIGRATE, (
            _op("OP_INSTANCE_MIGRATE", instance_name=inst.name, **extra),),
            why)
    return Step(T.MIGRATE, (
        _op("OP_INSTANCE_FAILOVER", instance_name=inst.name, **extra),),
        why)
