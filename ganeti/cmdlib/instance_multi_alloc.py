"""OP_INSTANCE_MULTI_ALLOC: place several new instances with one request.

As in Ganeti: either every instance gives its nodes (``pnode``, and
``snode`` for drbd) or none does; then one multi-allocate request places
them all together (each placement counting the ones before it), and one
creation job per placed instance is submitted.  The result is
``{"jobs": [[true, job id], ...], "allocatable": [names], "failed":
[names]}`` (a dry run: the same with no jobs).  An instance the allocator
could not place is listed in ``failed``; it is not an error of the
opcode.

With ``opportunistic_locking`` (and an allocator), only the nodes whose
locks are free at that moment are locked, without waiting, and the
allocator places the instances among them (the others are drained in
its input).  No node free, or no answer at all among those locked, is a
temporary error (ECODE_TEMP_NORES); the creation jobs name their nodes,
so they lock just those.
"""

from ganeti import constants
from ganeti import errors
from ganeti import locking
from ganeti.cmdlib import allocation
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import instance_params
from ganeti.cmdlib.base import LogicalUnit
from ganeti.iallocator import requests as ia_requests

__all__ = ["LUInstanceMultiAlloc"]


def _template(op):
    if op.disk_template is not None:
        return op.disk_template
    kinds = set(d.get("dev_type") for d in op.disks)
    if op.disks and None not in kinds and len(kinds) == 1:
        return kinds.pop()
    if not op.disks:
        return constants.DT_DISKLESS
    raise errors.OpPrereqError(
        "instances: %s: disk_template: required unless every disk gives"
        " the same dev_type" % op.instance_name, errors.ECODE_INVAL)


class LUInstanceMultiAlloc(LogicalUnit):
    OP_ID = "OP_INSTANCE_MULTI_ALLOC"

    def check_arguments(self):
        op = self.op
        allocation.check_op_params(op)
        if not op.instances:
            raise errors.OpPrereqError("instances: no instance given",
                                       errors.ECODE_INVAL)
        given = []
        for inst in op.instances:
            if inst.iallocator is not None:
                raise errors.OpPrereqError(
                    "instances: %s: an allocator cannot be set on the"
                    " instances themselves (give it to the multi-allocation)"
                    % inst.instance_name, errors.ECODE_INVAL)
            given.append(bool(inst.pnode or inst.pnode_uuid))
            if inst.disk_template in constants.DTS_INT_MIRROR:
                given.append(bool(inst.snode or inst.snode_uuid))
        if any(given) and not all(given):
            raise errors.OpPrereqError(
                "instances: some give their nodes (pnode/snode) and others"
                " do not; either all or none must", errors.ECODE_INVAL)
        self.allocators = ()
        if not any(given):
            self.allocators = allocation.allocator_names(
                self.cfg, ia_requests.MODE_MULTI_ALLOC,
                allocation.explicit_allocator(op))
            if not self.allocators:
                raise allocation.no_allocator_error(
                    ia_requests.MODE_MULTI_ALLOC,
                    "nodes on the instances (pnode)")
        names = [i.instance_name for i in op.instances]
        dups = sorted(set(n for n in names if names.count(n) > 1))
        if dups:
            raise errors.OpPrereqError("instances: duplicate instance names:"
                                       " %s" % ", ".join(dups),
                                       errors.ECODE_INVAL)

    def expand_names(self):
        self.share_all()
        self.opportunistic = bool(self.allocators and
                                  self.op.opportunistic_locking)
        if self.allocators:
            self.needed_locks[locking.LEVEL_NODE] = locking.ALL_SET
            if self.opportunistic:
                self.opportunistic_locks[locking.LEVEL_NODE] = \
                    self._nodes_needed()
        else:
            nodes = set()
            for inst in self.op.instances:
                for node in (inst.pnode_uuid or inst.pnode,
                             inst.snode_uuid or inst.snode):
                    if node:
                        nodes.add(self.expand_node(node))
            self.needed_locks[locking.LEVEL_NODE] = sorted(nodes)

    def _nodes_needed(self):
        """The fewest nodes any of the instances needs (at least 1)."""
        needs = []
        for op in self.op.instances:
            try:
                template = _template(op)
            except errors.OpPrereqError:
                return 1    # refused later, with the other checks
            needs.append(2 if template in constants.DTS_INT_MIRROR else 1)
        return min(needs)

    async def check_prereq(self):
        cfg = self.cfg
        existing = set(i.name for i in cfg.instances.values())
        for inst in self.op.instances:
            if inst.instance_name in existing:
                raise errors.OpPrereqError(
                    "instances: instance '%s' is already in the cluster"
                    % inst.instance_name, errors.ECODE_EXISTS)
        if not self.allocators:
            self.allocated = [(op.instance_name, None)
                              for op in self.op.instances]
            self.failed = []
            return
        requests = []
        for op in self.op.instances:
            template = _template(op)
            instance_disks.check_template(cfg.cluster, template,
                                          "instances: %s: disk_template"
                                          % op.instance_name)
            be = instance_params.check_beparams(
                op.beparams, "instances: %s: beparams" % op.instance_name)
            requests.append(allocation.create_request(
                cfg, op, op.instance_name, template, be))
        request = ia_requests.MultiAllocateRequest(instances=requests)
        locked = None
        if self.opportunistic:
            locked = self.ctx.glm.list_owned(locking.LEVEL_NODE, self.owner)
            self.log_info("Opportunistic locking: %d of %d nodes locked;"
                          " the allocator chooses among them",
                          len(locked), len(cfg.nodes))
        found = await allocation.allocate(
            self, request, self.allocators, self.op.iallocator_params,
            hypervisor=requests[0].hypervisor, locked_nodes=locked)
        self.allocated, self.failed = found.result
        for name, nodes in self.allocated:
            self.log_info("Selected nodes for instance %s via iallocator"
                          " %s: %s", name, found.allocator, ", ".join(nodes))
        if self.failed:
            note = allocation.unlocked_note(cfg, locked)
            self.log_warning("The allocator could not place: %s%s",
                             ", ".join(self.failed),
                             " (%s)" % note if note else "")

    def _partial(self):
        return {"allocatable": [name for name, _ in self.allocated],
                "failed": list(self.failed)}

    def dry_run_result(self):
        result = self._partial()
        result["jobs"] = []
        return result

    async def exec_(self):
        by_name = {op.instance_name: op for op in self.op.instances}
        jobs = []
        for name, nodes in self.allocated:
            op = by_name[name].copy()
            if nodes is not None:
                op.pnode = nodes[0]
                op.pnode_uuid = None
                if len(nodes) > 1:
                    op.snode = nodes[1]
                    op.snode_uuid = None
            if self.op.reason:
                op.reason = list(self.op.reason) + list(op.reason or [])
            jobs.append([op])
        result = self._partial()
        result["jobs"] = await self.submit_jobs(
            jobs, lambda ops: "creation of %s" % ops[0].instance_name)
        return result
