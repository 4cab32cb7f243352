"""Moving instances between node groups: OP_GROUP_EVACUATE and
OP_INSTANCE_CHANGE_GROUP.

Both ask an instance allocator (the opcode's ``iallocator``, else the
cluster's defaults for change-group requests) where the instances go, as
Ganeti does: a change-group request naming the target groups
(``target_groups``, default every other group), whose answer is the jobs
to run (migrations, failovers and secondary replacements).  They submit
those jobs and return ``{"jobs": [[true, job id], ...]}``; an instance the
allocator cannot move fails the opcode before any job is submitted.
``force_failover`` turns the migrations into failovers, ``sequential``
makes each job wait for the one before it.  A dry run asks the allocator and submits nothing.

An instance whose NICs are on networks can only go to a group connected
to every one of those networks (``gnt-network connect``): only connected
groups are offered to the allocator (a group named in ``target_groups``
that lacks one is left out, and said so in the job's log), and an
instance no target group can take fails the opcode before anything is
submitted, naming the groups and networks.  Instances of an evacuated group that need
different networks are planned in separate requests, one per set of
networks; a plan that would still put an instance in a group lacking one
of its networks is refused.

A forthcoming instance (a reservation) changes group in one step: the
plan's jobs for it, which would pass it through both groups (a new
secondary in the target group, a failover, another new secondary), become
one OP_INSTANCE_RECREATE_DISKS with the nodes the plan gives it, a change
of the configuration only (:mod:`ganeti.cmdlib.reservations`) that checks
the target group's policy and the new nodes' free resources.
"""

from ganeti import errors
from ganeti import locking
from ganeti import opcodes
from ganeti.cmdlib import allocation
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.node_evacuate import evacuation_jobs
from ganeti.iallocator import requests as ia_requests

__all__ = ["LUGroupEvacuate", "LUInstanceChangeGroup"]


def _to_failover(op):
    if op.OP_ID != "OP_INSTANCE_MIGRATE":
        return op
    return opcodes.OpInstanceFailover(
        instance_name=op.instance_name, instance_uuid=op.instance_uuid,
        target_node=op.target_node, target_node_uuid=op.target_node_uuid,
        ignore_ipolicy=op.ignore_ipolicy, cleanup=op.cleanup,
        reason=list(op.reason or []))


def instance_networks(inst):
    """The uuids of the networks an instance's NICs are on (sorted)."""
    return sorted(set(nic.network for nic in inst.nics or []
                      if nic.network))


def missing_networks(cfg, group_uuid, networks):
    """The networks of ``networks`` group ``group_uuid`` is not
    connected to."""
    connected = cfg.nodegroups[group_uuid].networks or {}
    return [n for n in networks if n not in connected]


def _network_names(cfg, uuids):
    return ", ".join(cfg.networks[u].name if u in cfg.networks else u
                     for u in uuids)


def _job_name(ops):
    return "%s of %s" % (", ".join(op.OP_ID for op in ops),
                         ops[0].instance_name)


class _ChangeGroupLU(LogicalUnit):
    """What both share: the request, the plan, the jobs."""

    def check_arguments(self):
        allocation.check_op_params(self.op)

    def _targets(self, exclude):
        cfg = self.cfg
        targets = []
        for name in self.op.target_groups or []:
            uuid = cfg.get_nodegroup(name).uuid
            if uuid in exclude:
                raise errors.OpPrereqError(
                    "target_groups: group %s is where the instances are; it"
                    " cannot be a target" % cfg.nodegroups[uuid].name,
                    errors.ECODE_INVAL)
            if uuid not in targets:
                targets.append(uuid)
        return targets

    def _lock_everything_read(self):
        self.share_all()
        self.needed_locks[locking.LEVEL_NODEGROUP] = locking.ALL_SET
        self.needed_locks[locking.LEVEL_NODE] = locking.ALL_SET

    def _network_batches(self, instances, targets, explicit):
        """``[(instances, target groups)]``: the instances grouped by the
        networks their NICs are on, each batch with the targets connected
        to all of them.  An explicit target lacking a network, or an
        instance no target can take, is refused."""
        cfg = self.cfg
        batches = {}
        for inst in instances:
            nets = tuple(instance_networks(inst))
            if nets not in batches:
                batches[nets] = []
            batches[nets].append(inst)
        result = []
        for nets, members in sorted(batches.items()):
            usable = []
            refused = []
            for group in targets:
                lacking = missing_networks(cfg, group, nets)
                if lacking:
                    refused.append("node group %s is not connected to"
                                   " network %s"
                                   % (cfg.nodegroups[group].name,
                                      _network_names(cfg, lacking)))
                else:
                    usable.append(group)
            if explicit and refused:
                if not usable:
                    raise errors.OpPrereqError(
                        "target_groups: %s, which instance%s %s use%s"
                        " (gnt-network connect)"
                        % ("; ".join(refused),
                           "s" if len(members) > 1 else "",
                           ", ".join(i.name for i in members),
                           "" if len(members) > 1 else "s"),
                        errors.ECODE_STATE)
                self.log_info("Not moving %s to every group named: %s",
                              ", ".join(i.name for i in members),
                              "; ".join(refused))
            if not usable:
                raise errors.OpPrereqError(
                    "No target node group is connected to network%s %s,"
                    " which instance%s %s use%s (gnt-network connect)"
                    % ("s" if len(nets) > 1 else "",
                       _network_names(cfg, nets),
                       "s" if len(members) > 1 else "",
                       ", ".join(i.name for i in members),
                       "" if len(members) > 1 else "s"),
                    errors.ECODE_STATE)
            result.append((members, usable))
        return result

    def _check_plan_networks(self, instances):
        """Refuse a plan that puts an instance into a group lacking one of
        its networks (an allocator that does not look at networks)."""
        cfg = self.cfg
        by_name = dict((i.name, i) for i in instances)
        for name, group, _ in self.moved:
            inst = by_name.get(name)
            if inst is None:
                continue
            try:
                group_uuid = cfg.get_nodegroup(group).uuid
            except errors.OpPrereqError:
                continue
            lacking = missing_networks(cfg, group_uuid,
                                       instance_networks(inst))
            if lacking:
                raise errors.OpPrereqError(
                    "The allocator %s would move instance %s to node group"
                    " %s, which is not connected to network %s"
                    % (self.allocator, name, cfg.nodegroups[group_uuid].name,
                       _network_names(cfg, lacking)), errors.ECODE_STATE)

    async def _plan(self, instances, targets, explicit=False):
        cfg = self.cfg
        op = self.op
        names = allocation.allocator_names(
            cfg, ia_requests.MODE_CHG_GROUP,
            allocation.explicit_allocator(op))
        if not names:
            raise allocation.no_allocator_error(
                ia_requests.MODE_CHG_GROUP,
                "an allocator for change-group requests")
        self.moved, self.failed, jobs = [], [], []
        for members, usable in self._network_batches(instances, targets,
                                                     explicit):
            request = ia_requests.ChangeGroupRequest(
                instances=[i.name for i in members], target_groups=usable)
            found = await allocation.allocate(self, request, names,
                                              op.iallocator_params)
            plan = found.result
            self.allocator = found.allocator
            self.moved.extend(plan.moved)
            self.failed.extend(plan.failed)
            jobs.extend(evacuation_jobs(plan, op.early_release, op.reason))
        self._check_plan_networks(instances)
        jobs = self._reservation_jobs(instances, jobs)
        if getattr(op, "force_failover", False):
            jobs = [[_to_failover(o) for o in ops] for ops in jobs]
        if getattr(op, "sequential", False):
            for ops in jobs[1:]:
                for o in ops:
                    o.depends = [[-1, ["success", "error"]]]
        self.jobs = jobs

    def _reservation_jobs(self, instances, jobs):
        """``jobs`` with those of forthcoming instances replaced by one
        re-placement each (see the module's doc)."""
        reserved = set(i.name for i in instances if i.forthcoming)
        if not reserved:
            return jobs
        targets = dict((name, nodes) for name, _, nodes in self.moved)
        result = []
        done = set()
        for ops in jobs:
            name = ops[0].instance_name
            if name not in reserved or name not in targets:
                result.append(ops)
                continue
            if name in done:
                continue
            done.add(name)
            result.append([opcodes.OpInstanceRecreateDisks(
                instance_name=name, nodes=list(targets[name]),
                reason=list(ops[0].reason or []))])
        return result

    def dry_run_result(self):
        return {"jobs": [],
                "moved": [[n, g, list(t)] for n, g, t in self.moved],
                "failed": [[n, r] for n, r in self.failed],
                "planned_jobs": [[o.to_dict() for o in ops]
                                 for ops in self.jobs]}

    async def _submit(self, what):
        if self.failed:
            text = ", ".join("%s (%s)" % (n, r) for n, r in self.failed)
            self.log_warning("Unable to evacuate instances %s", text)
            raise errors.OpExecError("Unable to evacuate instances %s" % text)
        if self.moved:
            self.log_info("Instances to be moved: %s", ", ".join(
                "%s (to %s)" % (n, g) for n, g, _ in self.moved))
        self.log_info("Iallocator %s returned %d job(s) for %s",
                      self.allocator, len(self.jobs), what)
        if getattr(self.op, "force_failover", False):
            self.log_info("Will insist on failovers")
        if getattr(self.op, "sequential", False):
            self.log_info("Jobs will be submitted to run sequentially")
        return {"jobs": await self.submit_jobs(self.jobs, _job_name)}


class LUGroupEvacuate(_ChangeGroupLU):
    OP_ID = "OP_GROUP_EVACUATE"

    def expand_names(self):
        cfg = self.cfg
        self.group_uuid = cfg.get_nodegroup(self.op.group_name).uuid
        self.req_targets = self._targets({self.group_uuid})
        self._lock_everything_read()
        members = set(n.uuid for n in cfg.group_nodes(self.group_uuid))
        self.needed_locks[locking.LEVEL_INSTANCE] = sorted(
            i.uuid for i in cfg.instances.values()
            if members & set(i.all_nodes))

    async def check_prereq(self):
        cfg = self.cfg
        group = cfg.nodegroups[self.group_uuid]
        members = set(n.uuid for n in cfg.group_nodes(self.group_uuid))
        self.instances = sorted(
            (i for i in cfg.instances.values()
             if members & set(i.all_nodes)), key=lambda i: i.name or i.uuid)
        self.moved, self.failed, self.jobs = [], [], []
        if not self.instances:
            return
        unnamed = [i.uuid for i in self.instances if not i.name]
        if unnamed:
            raise errors.OpPrereqError(
                "Forthcoming instances without a name are in group %s (%s);"
                " name or remove them first" % (group.name,
                                                ", ".join(unnamed)),
                errors.ECODE_STATE)
        targets = self.req_targets or [g for g in cfg.nodegroups
                                       if g != self.group_uuid]
        if not targets:
            raise errors.OpPrereqError("There are no possible target groups"
                                       " (group %s is the only one)"
                                       % group.name, errors.ECODE_INVAL)
        await self._plan(self.instances, targets,
                         explicit=bool(self.req_targets))

    async def exec_(self):
        name = self.cfg.nodegroups[self.group_uuid].name
        if not self.instances:
            self.log_info("No instances in node group %s", name)
            return {"jobs": []}
        self.log_info("Evacuating node group %s: %s", name,
                      ", ".join(i.name for i in self.instances))
        return await self._submit("evacuating node group %s" % name)


class LUInstanceChangeGroup(_ChangeGroupLU):
    OP_ID = "OP_INSTANCE_CHANGE_GROUP"

    def expand_names(self):
        cfg = self.cfg
        op = self.op
        inst = cfg.get_instance(op.instance_uuid or op.instance_name)
        self.instance_uuid = inst.uuid
        current = set(cfg.nodes[n].group for n in inst.all_nodes
                      if n in cfg.nodes)
        self.req_targets = self._targets(current)
        self._lock_everything_read()
        self.needed_locks[locking.LEVEL_INSTANCE] = [inst.uuid]

    async def check_prereq(self):
        cfg = self.cfg
        inst = cfg.get_instance(self.instance_uuid)
        if not inst.primary_node:
            raise errors.OpPrereqError(
                "Instance '%s' is forthcoming and not placed on any node: it"
                " is in no group yet" % inst.display_name, errors.ECODE_STATE)
        if not inst.name:
            raise errors.OpPrereqError(
                "Instance '%s' is forthcoming without a name; name it first"
                " (the allocator's plan names instances)" % inst.display_name,
                errors.ECODE_STATE)
        current = set(cfg.nodes[n].group for n in inst.all_nodes
                      if n in cfg.nodes)
        targets = self.req_targets or [g for g in cfg.nodegroups
                                       if g not in current]
        if not targets:
            raise errors.OpPrereqError(
                "There are no possible target groups for instance %s"
                % inst.name, errors.ECODE_INVAL)
        self.moved, self.failed, self.jobs = [], [], []
        await self._plan([inst], targets, explicit=bool(self.req_targets))

    async def exec_(self):
        inst = self.cfg.get_instance(self.instance_uuid)
        self.log_info("Moving instance %s (now on %s) to another node group",
                      inst.name, ", ".join(allocation.node_names(
                          self.cfg, inst.all_nodes)))
        return await self._submit("changing the group of instance %s"
                                  % inst.name)

