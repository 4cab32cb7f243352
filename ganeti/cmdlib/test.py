"""Logical units that exist for testing: the job machinery (delays) and
the instance allocators (what they get and answer)."""

import json

from twisted.internet import task

from ganeti import constants
from ganeti import errors
from ganeti import locking
from ganeti.cmdlib import allocation
from ganeti.cmdlib.base import LogicalUnit
from ganeti.iallocator import requests as ia_requests


class LUTestDelay(LogicalUnit):
    """Sleep for ``duration`` seconds, ``repeat`` times (OP_TEST_DELAY).

    The sleep is a reactor delayed call, so other jobs run meanwhile; with
    ``no_locks`` false the named nodes are locked for the whole time, which is
    what lock tests use it for.
    """
    OP_ID = "OP_TEST_DELAY"

    def check_arguments(self):
        if self.op.duration < 0:
            raise errors.OpPrereqError("duration: must not be negative",
                                       errors.ECODE_INVAL)

    def expand_names(self):
        self.node_uuids = [self.expand_node(n) for n in self.op.on_nodes]
        if not self.op.no_locks and self.node_uuids:
            self.needed_locks[locking.LEVEL_NODE] = self.node_uuids

    async def exec_(self):
        rounds = max(1, self.op.repeat)
        for i in range(rounds):
            if self.op.repeat:
                self.log_info("Test delay iteration %d/%d", i + 1, rounds)
            if self.op.duration:
                await task.deferLater(self.ctx.clock, self.op.duration,
                                      lambda: None)
        return True


class LUTestAllocator(LogicalUnit):
    """OP_TEST_ALLOCATOR: the input document an allocator would get for a
    request of any type (direction "in"), or what an allocator answers to
    it, unchecked (direction "out"), as ``gnt-debug iallocator`` shows
    them.  Nothing is locked and nothing changes."""
    OP_ID = "OP_TEST_ALLOCATOR"

    def check_arguments(self):
        allocation.check_op_params(self.op)

    def check_prereq(self):
        op = self.op
        cfg = self.cfg
        mode = op.mode
        if mode == ia_requests.MODE_BALANCE:
            if op.group_name is not None:
                self.group_name = cfg.get_nodegroup(op.group_name).name
        elif mode in (ia_requests.MODE_ALLOC, ia_requests.MODE_MULTI_ALLOC,
                      ia_requests.MODE_CAPACITY):
            if mode != ia_requests.MODE_CAPACITY:
                for inst in cfg.instances.values():
                    if inst.name == op.name:
                        raise errors.OpPrereqError(
                            "Instance '%s' already in the cluster" % op.name,
                            errors.ECODE_EXISTS)
            for idx, row in enumerate(op.disks or []):
                if not (isinstance(row, dict) and
                        isinstance(row.get("size"), int) and
                        not isinstance(row.get("size"), bool) and
                        row.get("mode", constants.DISK_RDWR)
                        in constants.DISK_ACCESS_SET):
                    raise errors.OpPrereqError(
                        "disks/%d: expected {\"size\": MiB, \"mode\": \"rw\""
                        " or \"ro\"}, got %r" % (idx, row),
                        errors.ECODE_INVAL)
            for field in ("memory", "vcpus", "disk_template"):
                if getattr(op, field) is None:
                    raise errors.OpPrereqError(
                        "%s: required for %s requests" % (field, mode),
                        errors.ECODE_INVAL)
        elif mode in (ia_requests.MODE_RELOC,
                      ia_requests.MODE_ALLOC_SECONDARY):
            self.instance = cfg.get_instance(op.name)
            if not self.instance.primary_node:
                raise errors.OpPrereqError(
                    "name: instance %s has no node" % op.name,
                    errors.ECODE_STATE)
        else:
            if not op.instances:
                raise errors.OpPrereqError("instances: missing (%s requests"
                                           " name the instances)" % mode,
                                           errors.ECODE_INVAL)
            self.instance_names = [cfg.get_instance(n).name
                                   for n in op.instances]
            self.target_groups = [cfg.get_nodegroup(g).uuid
                                  for g in op.target_groups or []]
        self.request = self._request()
        if op.direction == "out":
            names = allocation.allocator_names(
                cfg, mode, allocation.explicit_allocator(op))
            if not names:
                raise errors.OpPrereqError(
                    "iallocator: missing allocator name (and no default"
                    " allocator for %s requests)" % mode, errors.ECODE_INVAL)
            self.allocator = names[0]

    def _alloc_request(self, name):
        op = self.op
        disks = [{"size": d["size"], "mode": d.get("mode",
                                                   constants.DISK_RDWR)}
                 for d in op.disks or []]
        return ia_requests.AllocateRequest(
            name=name, disk_template=op.disk_template, memory=op.memory,
            vcpus=op.vcpus, disks=disks,
            hypervisor=op.hypervisor or self.cfg.cluster.default_hypervisor,
            os=op.os or "", tags=list(op.tags), nics=list(op.nics or []),
            spindle_use=op.spindle_use, group_name=op.group_name)

    def _request(self):
        op = self.op
        cfg = self.cfg
        mode = op.mode
        if mode == ia_requests.MODE_ALLOC:
            return self._alloc_request(op.name)
        if mode == ia_requests.MODE_MULTI_ALLOC:
            return ia_requests.MultiAllocateRequest(instances=[
                self._alloc_request("%s%d" % (op.name, idx))
                for idx in range(op.count)])
        if mode == ia_requests.MODE_RELOC:
            inst = self.instance
            disks = cfg.instance_disks(inst)
            source = list(inst.secondary_nodes) if any(
                d.dev_type in constants.DTS_INT_MIRROR for d in disks) \
                else [inst.primary_node]
            return allocation.relocate_request(cfg, inst, source)
        if mode == ia_requests.MODE_BALANCE:
            return ia_requests.BalanceRequest(
                max_moves=op.max_moves,
                group=(self.group_name if op.group_name is not None
                       else None),
                disk_moves=op.disk_moves is not False,
                evac_mode=bool(op.balance_evac))
        if mode == ia_requests.MODE_CAPACITY:
            return ia_requests.CapacityRequest(
                disk_template=op.disk_template, memory=op.memory,
                vcpus=op.vcpus, spindle_use=op.spindle_use, name=op.name,
                disks=[{"size": d["size"],
                        "mode": d.get("mode", constants.DISK_RDWR)}
                       for d in op.disks or []],
                hypervisor=(op.hypervisor or
                            self.cfg.cluster.default_hypervisor))
        if mode == ia_requests.MODE_ALLOC_SECONDARY:
            return ia_requests.AllocateSecondaryRequest(
                name=self.instance.name,
                primary=cfg.get_node(self.instance.primary_node).name)
        if mode == ia_requests.MODE_NODE_EVAC:
            return ia_requests.NodeEvacuateRequest(
                instances=self.instance_names,
                evac_mode=op.evac_mode or "all")
        return ia_requests.ChangeGroupRequest(
            instances=self.instance_names, target_groups=self.target_groups)

    def _hypervisor(self):
        request = self.request
        if isinstance(request, (ia_requests.AllocateRequest,
                                ia_requests.CapacityRequest)):
            return request.hypervisor
        if self.op.mode == ia_requests.MODE_RELOC:
            return self.instance.hypervisor
        return None

    async def exec_(self):
        if self.op.direction == "in":
            data = await allocation.input_data(self, self.request,
                                               self._hypervisor())
            return json.dumps(data, indent=2, sort_keys=True)
        return await allocation.run_for_test(
            self, self.request, self.allocator, self.op.iallocator_params,
            self._hypervisor())
