"""Emptying a node: OP_NODE_EVACUATE and OP_NODE_MIGRATE.

As in Ganeti, these LUs do not move anything themselves: they plan, then
submit one job per instance (migrate, failover, move or replace-disks) and
return ``{"jobs": [[true, job id] or [false, error], ...]}``; the client
follows the jobs.  Nothing is locked exclusively while planning.

Node evacuation is planned by an instance allocator (the opcode's
``iallocator``, else the cluster's defaults for node-evacuate requests;
docs/allocator.rst), as Ganeti does: a node-evacuate request for the
instances whose disks are mirrored, whose answer is the list of jobs to
submit (migrations, failovers, secondary replacements).  Instances whose
disks live on the node only (``file``, ``plain``) cannot be relocated by
such a plan; for each of them the allocator is asked for a new primary in
the instance's group (an allocate request with the instance's spec, the
evacuated node excluded, earlier choices counted) and the instance is
moved there (copied).  With ``remote_node`` the admin names the target
and no allocator is asked:

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

Forthcoming instances (reservations) get the same jobs; each of them only
changes the configuration (see :mod:`ganeti.cmdlib.reservations`), so a
forthcoming ``file`` or ``plain`` instance leaves an offline node too.

Node migration submits a migration per primary instance; a shared-storage
instance's target is ``target_node`` or, in each migration job, what a
relocate request answers.

Both work on drained and offline nodes (that is what they are for).  A
dry run plans (the allocator is asked) and submits nothing.
"""

from ganeti import constants
from ganeti import errors
from ganeti import locking
from ganeti import opcodes
from ganeti.cmdlib import allocation
from ganeti.cmdlib import checks
from ganeti.cmdlib import node_calls
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance_migration import EXT, INT, template_kind
from ganeti.iallocator import requests as ia_requests

__all__ = ["LUNodeEvacuate", "LUNodeMigrate", "evacuation_jobs",
           "apply_move"]

NODE_EVAC_PRI = "primary-only"
NODE_EVAC_SEC = "secondary-only"
NODE_EVAC_ALL = "all"


def _instance_job(ops):
    """How a submitted job is named in the log: opcode and instance."""
    return "%s of %s" % (ops[0].OP_ID,
                         getattr(ops[0], "instance_name", None))


def _has_param(op, name):
    return any(p.name == name for p in op.PARAMS)


def evacuation_jobs(plan, early_release, reason=None):
    """An evacuation plan's jobs, each opcode with ``early_release`` (where
    it has one) and the reason trail of the opcode that asked."""
    jobs = []
    for ops in plan.jobs:
        job = []
        for op in ops:
            op = op.copy()
            if _has_param(op, "early_release"):
                op.early_release = bool(early_release)
            if reason:
                op.reason = list(reason) + list(op.reason or [])
            job.append(op)
        jobs.append(job)
    return jobs


def apply_move(data, name, nodes):
    """Count a planned placement in an input document, so that the next
    request of the same plan sees it: the instance on its new nodes, their
    free memory and local disk reduced."""
    inst = data["instances"].get(name)
    if inst is None:
        return
    inst["nodes"] = list(nodes)
    node = data["nodes"].get(nodes[0])
    if node is None or "free_memory" not in node:
        return
    node["i_pri_memory"] = node.get("i_pri_memory", 0) + inst["memory"]
    if inst["admin_state"] == constants.ADMINST_UP:
        # the allocator thinks a running instance's memory is already
        # taken on its node: take it
        node["free_memory"] -= inst["memory"]
        node["i_pri_up_memory"] = node.get("i_pri_up_memory", 0) + \
            inst["memory"]
    if inst["disk_template"] in constants.DTS_NODE_LOCAL:
        for name_ in nodes:
            target = data["nodes"].get(name_)
            if target is not None and "free_disk" in target:
                target["free_disk"] = max(
                    0, target["free_disk"] - inst["disk_space_total"])


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

    def _op(self, op_id, **params):
        reason = getattr(self.op, "reason", None)
        if reason:
            params["reason"] = list(reason)
        return opcodes.opcode_class(op_id)(**params)


class LUNodeEvacuate(_NodeJobsLU):
    OP_ID = "OP_NODE_EVACUATE"

    def check_arguments(self):
        op = self.op
        allocation.check_op_params(op)
        allocation.check_not_both(op, "remote_node",
                                  op.remote_node or op.remote_node_uuid)

    def expand_names(self):
        _NodeJobsLU.expand_names(self)
        op = self.op
        remote = op.remote_node_uuid or op.remote_node
        self.remote_uuid = self.expand_node(remote) if remote else None
        if self.remote_uuid == self.node_uuid:
            raise errors.OpPrereqError(
                "remote_node: cannot use the evacuated node as a target",
                errors.ECODE_INVAL)

    async def check_prereq(self):
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
        self.jobs, self.moved, self.failed = [], [], []
        if not self.instances:
            return
        if self.remote_uuid is not None:
            for inst in self.instances:
                if inst.primary_node == self.remote_uuid:
                    raise errors.OpPrereqError(
                        "remote_node: node %s is the primary node of"
                        " instance %s, cannot use it as a target"
                        % (node_calls.node_name(cfg, self.remote_uuid),
                           inst.display_name), errors.ECODE_INVAL)
            self._plan_remote()
        else:
            names = allocation.allocator_names(
                cfg, ia_requests.MODE_NODE_EVAC,
                allocation.explicit_allocator(self.op))
            if not names:
                raise allocation.no_allocator_error(
                    ia_requests.MODE_NODE_EVAC,
                    "the node to move the instances to (remote_node / -n)")
            await self._plan_allocator(names)

    # --- planning with a given node ------------------------------------------

    def _plan_remote(self):
        cfg = self.cfg
        node = cfg.get_node(self.node_uuid)
        early = bool(self.op.early_release)
        target = self.remote_uuid
        tname = node_calls.node_name(cfg, target)
        for inst in self.instances:
            kind = template_kind(cfg.instance_disks(inst))
            primary = inst.primary_node == self.node_uuid
            if kind == "mixed":
                self.failed.append((inst.display_name, "it mixes drbd and"
                                    " shared disks"))
                continue
            if not primary:
                if kind != INT:
                    continue    # only drbd instances have secondaries
                self.jobs.append([self._op(
                    "OP_INSTANCE_REPLACE_DISKS",
                    instance_name=inst.display_name,
                    mode="replace_new_secondary", remote_node=tname,
                    disks=[], early_release=early)])
                self.moved.append((inst.display_name, [tname],
                                   "new secondary"))
                continue
            if kind == INT:
                secondary = inst.secondary_nodes[0] \
                    if inst.secondary_nodes else None
                if secondary != target:
                    self.failed.append((inst.display_name, "drbd instances"
                                        " can only go to their secondary"
                                        " node"))
                    continue
            if kind in (EXT, INT):
                self._migrate_job(inst, node, kind, tname)
            else:
                self._move_job(inst, node, tname)

    def _migrate_job(self, inst, node, kind, tname):
        down = inst.admin_state != constants.ADMINST_UP
        target = None if kind == INT else tname
        if node.offline or down:
            self.jobs.append([self._op(
                "OP_INSTANCE_FAILOVER", instance_name=inst.display_name,
                target_node=target, ignore_consistency=bool(node.offline))])
            how = "failover"
        else:
            self.jobs.append([self._op(
                "OP_INSTANCE_MIGRATE", instance_name=inst.display_name,
                target_node=target, allow_failover=True)])
            how = "migrate"
        self.moved.append((inst.display_name, [tname], how))

    def _move_job(self, inst, node, tname):
        # a forthcoming instance has no data: its move is a configuration
        # change, also away from an offline node
        if node.offline and not inst.forthcoming:
            self.failed.append((inst.display_name, "its disks are only on the"
                                " offline node (use recreate-disks with new"
                                " nodes)"))
            return
        self.jobs.append([self._op("OP_INSTANCE_MOVE",
                                   instance_name=inst.display_name,
                                   target_node=tname)])
        self.moved.append((inst.display_name, [tname], "move"))

    # --- planning with an allocator ------------------------------------------

    async def _plan_allocator(self, names):
        cfg = self.cfg
        op = self.op
        node = cfg.get_node(self.node_uuid)
        relocatable, movers = [], []
        for inst in self.instances:
            kind = template_kind(cfg.instance_disks(inst))
            if kind == "mixed":
                self.failed.append((inst.display_name, "it mixes drbd and"
                                    " shared disks"))
            elif kind in (EXT, INT):
                relocatable.append(inst)
            elif inst.primary_node == self.node_uuid:
                movers.append(inst)
        data = None
        if relocatable:
            request = ia_requests.NodeEvacuateRequest(
                instances=[i.display_name for i in relocatable],
                evac_mode=op.mode, leaving=[node.name],
                ignore_soft_errors=bool(op.ignore_soft_errors))
            found = await allocation.allocate(self, request, names,
                                              op.iallocator_params)
            plan = found.result
            data = found.data
            self.jobs.extend(evacuation_jobs(plan, op.early_release,
                                             op.reason))
            for name, group, nodes in plan.moved:
                self.moved.append((name, nodes, "group %s" % group))
                apply_move(data, name, nodes)
            self.failed.extend(plan.failed)
        for inst in movers:
            if node.offline and not inst.forthcoming:
                self._move_job(inst, node, None)
                continue
            data = await self._place_mover(inst, names, data)

    async def _place_mover(self, inst, names, data):
        """A new primary for an instance that is copied (file, plain)."""
        cfg = self.cfg
        node = cfg.get_node(self.node_uuid)
        group = cfg.nodegroups.get(node.group)
        allowed = sorted(n.name for n in cfg.group_nodes(node.group)
                         if n.uuid != self.node_uuid and not n.offline
                         and not n.drained and n.vm_capable)
        if not allowed:
            self.failed.append((inst.display_name, "no other node of its"
                                " group can take it"))
            return data
        request = allocation.instance_spec_request(
            cfg, inst, restrict_to_nodes=allowed,
            group_name=group.name if group else None)
        try:
            found = await allocation.allocate(
                self, request, names, self.op.iallocator_params,
                hypervisor=request.hypervisor, data=data)
        except errors.OpPrereqError as err:
            self.failed.append((inst.display_name, err.args[0]))
            return data
        target = found.result[0]
        apply_move(found.data, inst.display_name, [target])
        self._move_job(inst, node, target)
        return found.data

    # --- results -------------------------------------------------------------

    def dry_run_result(self):
        """The plan: what would move where, what cannot, and the jobs
        that would be submitted."""
        return {"jobs": [],
                "moved": [[n, list(t), how] for n, t, how in self.moved],
                "failed": [[n, r] for n, r in self.failed],
                "planned_jobs": [[op.to_dict() for op in ops]
                                 for ops in self.jobs]}

    async def exec_(self):
        cfg = self.cfg
        name = node_calls.node_name(cfg, self.node_uuid)
        if not self.instances:
            self.log_info("No instances to evacuate from node '%s'", name)
            return {"jobs": []}
        self.log_info("Evacuating instances from node '%s': %s", name,
                      ", ".join(i.display_name for i in self.instances))
        if self.failed:
            text = ", ".join("%s (%s)" % (n, r) for n, r in self.failed)
            self.log_warning("Unable to evacuate instances %s", text)
            if not self.op.ignore_soft_errors or not self.jobs:
                raise errors.OpExecError("Unable to evacuate instances %s"
                                         % text)
        if self.moved:
            self.log_info("Instances to be moved: %s", ", ".join(
                "%s (%s to %s)" % (n, how, ", ".join(t))
                for n, t, how in self.moved))
        return {"jobs": await self.submit_jobs(self.jobs, _instance_job)}


class LUNodeMigrate(_NodeJobsLU):
    OP_ID = "OP_NODE_MIGRATE"

    def check_arguments(self):
        op = self.op
        allocation.check_op_params(op)
        allocation.check_not_both(op, "target_node",
                                  op.target_node or op.target_node_uuid)
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
        cfg = self.cfg
        self.instances = sorted(
            cfg.node_instances(self.node_uuid, primary_only=True),
            key=lambda i: i.name or i.uuid)
        shared = [i for i in self.instances
                  if template_kind(cfg.instance_disks(i)) == EXT]
        if shared and self.target_uuid is None and \
                not allocation.has_allocator(
                    cfg, ia_requests.MODE_RELOC,
                    allocation.explicit_allocator(self.op)):
            # each migration would fail the same way: say it once, now
            raise allocation.no_allocator_error(
                ia_requests.MODE_RELOC, "a target node (-n) for instances %s"
                % ", ".join(i.display_name for i in shared))

    async def exec_(self):
        cfg = self.cfg
        op = self.op
        node = cfg.get_node(self.node_uuid)
        tname = node_calls.node_name(cfg, self.target_uuid) \
            if self.target_uuid else None
        jobs = []
        for inst in self.instances:
            kind = template_kind(cfg.instance_disks(inst))
            if kind not in (EXT, INT):
                self.log_warning("Instance %s has %s disks and cannot be"
                                 " migrated; use gnt-node evacuate (it is"
                                 " moved there)", inst.display_name,
                                 ", ".join(sorted(set(
                                     d.dev_type for d in
                                     cfg.instance_disks(inst)))))
                continue
            placement = {}
            if kind == EXT:
                # the target, or the allocator each migration asks
                placement = {"target_node": tname,
                             "iallocator": None if tname else op.iallocator}
                if op.iallocator_params and not tname:
                    placement["iallocator_params"] = op.iallocator_params
            if node.offline:
                jobs.append([self._op(
                    "OP_INSTANCE_FAILOVER", instance_name=inst.display_name,
                    ignore_consistency=True, **placement)])
            else:
                jobs.append([self._op(
                    "OP_INSTANCE_MIGRATE", instance_name=inst.display_name,
                    mode=op.mode, live=op.live,
                    allow_runtime_changes=op.allow_runtime_changes,
                    ignore_ipolicy=op.ignore_ipolicy,
                    allow_failover=inst.admin_state !=
                    constants.ADMINST_UP, **placement)])
        if node.offline and jobs:
            self.log_info("Node %s is offline: failing over its instances"
                          " instead of migrating them", node.name)
        if not jobs:
            self.log_info("No instances to migrate from node '%s'",
                          node.name)
        return {"jobs": await self.submit_jobs(jobs, _instance_job)}

