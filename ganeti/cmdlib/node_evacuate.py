"""Emptying a node: OP_NODE_EVACUATE and OP_NODE_MIGRATE.

As in Ganeti, these LUs do not move anything themselves: they plan, then
submit one job per instance (migrate, failover, move or replace-disks) and
return ``{"jobs": [[true, job id] or [false, error], ...]}``; the client
follows the jobs.  Nothing is locked exclusively while planning.

Ganeti plans node evacuations with an instance allocator (or, for
secondaries, a given ``remote_node``).  This master has no allocator yet,
so it plans itself: each instance goes to the eligible node of its group
(online, not drained, vm_capable, not the evacuated node) with the most
free memory after what was already planned, then the fewest instances;
``remote_node`` forces the target for every instance.

What each instance gets:

=================  ==========================  =============================
template           primary on the node         secondary on the node
=================  ==========================  =============================
sharedfile,        migrate (failover if the    --
diskless           node is offline or the
                   instance is not running)
drbd               migrate to the secondary    replace-disks with a new
                   (failover likewise)         secondary
file, plain        move (copy); impossible     --
                   when the node is offline
=================  ==========================  =============================

Both work on drained and offline nodes (that is what they are for).
"""

from ganeti import constants
from ganeti import errors
from ganeti import locking
from ganeti import opcodes
from ganeti.cmdlib import capacity
from ganeti.cmdlib import checks
from ganeti.cmdlib import node_calls
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance_migration import (
    EXT, INT, eligible_targets, template_kind)

__all__ = ["LUNodeEvacuate", "LUNodeMigrate", "Planner"]

NODE_EVAC_PRI = "primary-only"
NODE_EVAC_SEC = "secondary-only"
NODE_EVAC_ALL = "all"


class Planner(object):
    """Chooses targets, counting what it already placed."""

    def __init__(self, cfg, leaving, free=None):
        self.cfg = cfg
        self.leaving = leaving
        #: node uuid -> free memory (reported, minus reservations) or None
        self.free = dict(free or {})
        self.planned_mem = {}
        self.planned_count = {}

    def _key(self, node):
        free = self.free.get(node.uuid)
        planned = self.planned_mem.get(node.uuid, 0)
        count = len(self.cfg.node_instances(node.uuid, primary_only=True)) \
            + self.planned_count.get(node.uuid, 0)
        return (-(free - planned) if free is not None else 0, count,
                node.name)

    def choose(self, instance, exclude=(), memory=0):
        candidates = eligible_targets(self.cfg, instance,
                                      set(exclude) | {self.leaving})
        if not candidates:
            return None
        node = sorted(candidates, key=self._key)[0]
        self.place(node.uuid, memory)
        return node.uuid

    def place(self, node_uuid, memory=0):
        self.planned_mem[node_uuid] = \
            self.planned_mem.get(node_uuid, 0) + memory
        self.planned_count[node_uuid] = \
            self.planned_count.get(node_uuid, 0) + 1


def _instance_job(ops):
    """How a submitted job is named in the log: opcode and instance."""
    return "%s of %s" % (ops[0].OP_ID,
                         getattr(ops[0], "instance_name", None))


def _memory(cfg, inst):
    from ganeti import objects
    be = objects.fill_beparams(cfg.cluster, inst)
    return int(be.get(constants.BE_MAXMEM) or 0)


class _NodeJobsLU(LogicalUnit):

    def expand_names(self):
        op = self.op
        self.node_uuid = self.expand_node(op.node_uuid or op.node_name)
        self.share_all()
        node = self.cfg.get_node(self.node_uuid)
        # the node and the nodes of its group: read, not changed
        self.needed_locks[locking.LEVEL_NODE] = sorted(
            set([self.node_uuid]) |
            set(n.uuid for n in self.cfg.group_nodes(node.group)))
        self.needed_locks[locking.LEVEL_INSTANCE] = [
            i.uuid for i in self.cfg.node_instances(self.node_uuid)]

    async def _free_memory(self):
        """Free memory of the other nodes of the group (what they report,
        minus reservations), for choosing targets."""
        node = self.cfg.get_node(self.node_uuid)
        others = [n.uuid for n in self.cfg.group_nodes(node.group)
                  if n.uuid != self.node_uuid]
        resources = await capacity.node_resources(self, others)
        return {uuid: res.free_memory for uuid, res in resources.items()}

    def _op(self, op_id, **params):
        reason = getattr(self.op, "reason", None)
        if reason:
            params["reason"] = list(reason)
        return opcodes.opcode_class(op_id)(**params)


class LUNodeEvacuate(_NodeJobsLU):
    OP_ID = "OP_NODE_EVACUATE"

    def check_arguments(self):
        checks.check_no_iallocator(
            self.op.iallocator, "leave it out (the master plans the"
            " evacuation) or give remote_node")

    def expand_names(self):
        _NodeJobsLU.expand_names(self)
        op = self.op
        remote = op.remote_node_uuid or op.remote_node
        self.remote_uuid = self.expand_node(remote) if remote else None
        if self.remote_uuid == self.node_uuid:
            raise errors.OpPrereqError(
                "remote_node: cannot use the evacuated node as a target",
                errors.ECODE_INVAL)

    def check_prereq(self):
        cfg = self.cfg
        mode = self.op.mode
        if self.remote_uuid is not None:
            checks.check_node_vm_capable(cfg, self.remote_uuid, "target")
        insts = []
        for inst in cfg.node_instances(self.node_uuid):
            primary = inst.primary_node == self.node_uuid
            if mode == NODE_EVAC_PRI and not primary:
                continue
            if mode == NODE_EVAC_SEC and primary:
                continue
            insts.append(inst)
        self.instances = sorted(insts, key=lambda i: i.name or i.uuid)
        if self.remote_uuid is not None:
            for inst in self.instances:
                if inst.primary_node == self.remote_uuid:
                    raise errors.OpPrereqError(
                        "remote_node: node %s is the primary node of"
                        " instance %s, cannot use it as a target"
                        % (node_calls.node_name(cfg, self.remote_uuid),
                           inst.name), errors.ECODE_INVAL)

    async def _plan(self):
        cfg = self.cfg
        node = cfg.get_node(self.node_uuid)
        planner = Planner(cfg, self.node_uuid,
                          await self._free_memory())
        early = bool(self.op.early_release)
        jobs, moved, failed = [], [], []
        for inst in self.instances:
            kind = template_kind(cfg.instance_disks(inst))
            primary = inst.primary_node == self.node_uuid
            mem = _memory(cfg, inst) if primary else 0
            if kind == "mixed":
                failed.append((inst.name, "it mixes drbd and shared disks"))
                continue
            if not primary:
                if kind != INT:
                    continue    # only drbd instances have secondaries
                target = self.remote_uuid or planner.choose(
                    inst, exclude=inst.all_nodes)
                if target is None:
                    failed.append((inst.name, "no node can be its new"
                                   " secondary"))
                    continue
                if self.remote_uuid:
                    planner.place(target)
                jobs.append([self._op(
                    "OP_INSTANCE_REPLACE_DISKS", instance_name=inst.name,
                    mode="replace_new_secondary",
                    remote_node=node_calls.node_name(cfg, target), disks=[],
                    early_release=early)])
                moved.append((inst.name, target, "new secondary"))
                continue
            down = inst.admin_state != constants.ADMINST_UP
            if kind == INT:
                target = inst.secondary_nodes[0] \
                    if inst.secondary_nodes else None
                if target is None:
                    failed.append((inst.name, "it has no secondary node"))
                    continue
                if self.remote_uuid not in (None, target):
                    failed.append((inst.name, "drbd instances can only go"
                                   " to their secondary node"))
                    continue
                planner.place(target, mem)
            else:
                target = self.remote_uuid or planner.choose(inst,
                                                            memory=mem)
                if target is None:
                    failed.append((inst.name, "no node of its group can"
                                   " take it"))
                    continue
                if self.remote_uuid:
                    planner.place(target, mem)
            tname = node_calls.node_name(cfg, target)
            if kind in (EXT, INT):
                if node.offline or down:
                    jobs.append([self._op(
                        "OP_INSTANCE_FAILOVER", instance_name=inst.name,
                        target_node=None if kind == INT else tname,
                        ignore_consistency=bool(node.offline))])
                    how = "failover"
                else:
                    jobs.append([self._op(
                        "OP_INSTANCE_MIGRATE", instance_name=inst.name,
                        target_node=None if kind == INT else tname,
                        allow_failover=True)])
                    how = "migrate"
            else:
                if node.offline:
                    failed.append((inst.name, "its disks are only on the"
                                   " offline node (use recreate-disks with"
                                   " new nodes)"))
                    continue
                jobs.append([self._op("OP_INSTANCE_MOVE",
                                      instance_name=inst.name,
                                      target_node=tname)])
                how = "move"
            moved.append((inst.name, target, how))
        return jobs, moved, failed

    async def exec_(self):
        cfg = self.cfg
        name = node_calls.node_name(cfg, self.node_uuid)
        if not self.instances:
            self.log_info("No instances to evacuate from node '%s'", name)
            return {"jobs": []}
        self.log_info("Evacuating instances from node '%s': %s", name,
                      ", ".join(i.name for i in self.instances))
        jobs, moved, failed = await self._plan()
        if failed:
            text = ", ".join("%s (%s)" % f for f in failed)
            self.log_warning("Unable to evacuate instances %s", text)
            if not self.op.ignore_soft_errors or not jobs:
                raise errors.OpExecError("Unable to evacuate instances %s"
                                         % text)
        self.log_info("Instances to be moved: %s", ", ".join(
            "%s (%s to %s)" % (n, how, node_calls.node_name(cfg, t))
            for n, t, how in moved))
        return {"jobs": await self.submit_jobs(jobs, _instance_job)}


class LUNodeMigrate(_NodeJobsLU):
    OP_ID = "OP_NODE_MIGRATE"

    def check_arguments(self):
        op = self.op
        checks.check_no_iallocator(op.iallocator)
        if op.live is not None and op.mode is not None:
            raise errors.OpPrereqError(
                "live, mode: only one of the 'live' and 'mode' parameters"
                " can be given", errors.ECODE_INVAL)

    def expand_names(self):
        _NodeJobsLU.expand_names(self)
        op = self.op
        target = op.target_node_uuid or op.target_node
        self.target_uuid = self.expand_node(target) if target else None
        if self.target_uuid == self.node_uuid:
            raise errors.OpPrereqError(
                "target_node: cannot migrate instances to the node they"
                " leave", errors.ECODE_INVAL)

    def check_prereq(self):
        self.instances = sorted(
            self.cfg.node_instances(self.node_uuid, primary_only=True),
            key=lambda i: i.name or i.uuid)

    async def exec_(self):
        cfg = self.cfg
        op = self.op
        node = cfg.get_node(self.node_uuid)
        planner = Planner(cfg, self.node_uuid,
                          await self._free_memory())
        jobs = []
        for inst in self.instances:
            kind = template_kind(cfg.instance_disks(inst))
            if kind not in (EXT, INT):
                self.log_warning("Instance %s has %s disks and cannot be"
                                 " migrated; use gnt-node evacuate (it is"
                                 " moved there)", inst.name,
                                 ", ".join(sorted(set(
                                     d.dev_type for d in
                                     cfg.instance_disks(inst)))))
                continue
            target = None
            if kind == EXT:
                target = self.target_uuid or planner.choose(
                    inst, memory=_memory(cfg, inst))
                if self.target_uuid:
                    planner.place(target, _memory(cfg, inst))
            tname = node_calls.node_name(cfg, target) if target else None
            if node.offline:
                jobs.append([self._op(
                    "OP_INSTANCE_FAILOVER", instance_name=inst.name,
                    target_node=tname, ignore_consistency=True)])
            else:
                jobs.append([self._op(
                    "OP_INSTANCE_MIGRATE", instance_name=inst.name,
                    mode=op.mode, live=op.live, target_node=tname,
                    allow_runtime_changes=op.allow_runtime_changes,
                    ignore_ipolicy=op.ignore_ipolicy,
                    allow_failover=inst.admin_state !=
                    constants.ADMINST_UP)])
        if node.offline and jobs:
            self.log_info("Node %s is offline: failing over its instances"
                          " instead of migrating them", node.name)
        if not jobs:
            self.log_info("No instances to migrate from node '%s'",
                          node.name)
        return {"jobs": await self.submit_jobs(jobs, _instance_job)}
