"""Instance disk operations: activate, deactivate, grow."""

from ganeti import errors
from ganeti import ipolicy
from ganeti import locking
from ganeti.cmdlib import capacity
from ganeti.cmdlib import checks
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import node_calls
from ganeti.cmdlib.base import LogicalUnit


class _DiskLU(LogicalUnit):
    """Locks the instance and all its nodes (node and node-res levels)."""

    LOCK_NODE_RES = False

    def expand_names(self):
        name = self.op.instance_uuid or self.op.instance_name
        self.instance_uuid = self.expand_instance(name)
        self.needed_locks[locking.LEVEL_INSTANCE] = [self.instance_uuid]

    def declare_locks(self, level):
        if level == locking.LEVEL_NODE or (
                level == locking.LEVEL_NODE_RES and self.LOCK_NODE_RES):
            inst = self.cfg.get_instance(self.instance_uuid)
            self.needed_locks[level] = list(inst.all_nodes)

    @property
    def instance(self):
        return self.cfg.get_instance(self.instance_uuid)


class LUInstanceActivateDisks(_DiskLU):
    """Assemble the disks on their nodes; [(node, iv_name, path)]."""
    OP_ID = "OP_INSTANCE_ACTIVATE_DISKS"

    def check_prereq(self):
        inst = self.instance
        checks.check_not_forthcoming(inst, "activate its disks")
        checks.check_node_online(self.cfg, inst.primary_node,
                                 "cannot activate the disks of %s"
                                 % inst.name)

    async def exec_(self):
        inst = self.instance
        self.log_info("Activating the disks of instance %s", inst.name)
        info = await instance_disks.assemble_disks(self, inst)
        return [list(entry) for entry in info]


class LUInstanceDeactivateDisks(_DiskLU):
    OP_ID = "OP_INSTANCE_DEACTIVATE_DISKS"

    def check_prereq(self):
        inst = self.instance
        checks.check_not_forthcoming(inst, "deactivate its disks")
        if not self.op.force:
            checks.check_instance_state(inst, checks.INSTANCE_NOT_RUNNING,
                                        "cannot shutdown disks")

    async def exec_(self):
        inst = self.instance
        if not self.op.force:
            await checks.check_not_running(self, inst,
                                           "cannot shutdown disks")
        self.log_info("Deactivating the disks of instance %s", inst.name)
        await instance_disks.shutdown_disks(self, inst,
                                            ignore_failures=self.op.force)
        return None


class LUInstanceGrowDisk(_DiskLU):
    OP_ID = "OP_INSTANCE_GROW_DISK"
    LOCK_NODE_RES = True

    async def check_prereq(self):
        op = self.op
        cfg = self.cfg
        inst = self.instance
        checks.check_not_forthcoming(inst, "grow its disks")
        for node_uuid in inst.all_nodes:
            checks.check_node_online(cfg, node_uuid,
                                     "cannot grow the disks of %s"
                                     % inst.name)
        disks = cfg.instance_disks(inst)
        if op.disk >= len(disks):
            raise errors.OpPrereqError(
                "disk: instance %s has no disk %d (it has %d)"
                % (inst.name, op.disk, len(disks)), errors.ECODE_INVAL)
        disk = disks[op.disk]
        if disk.dev_type not in instance_disks.GROWABLE_TEMPLATES:
            raise errors.OpPrereqError(
                "Instance's disk layout %s does not support growing"
                % disk.dev_type, errors.ECODE_INVAL)
        if op.absolute:
            target = op.amount
            delta = target - disk.size
            if delta < 0:
                raise errors.OpPrereqError(
                    "amount: requested size (%d MiB) is smaller than the"
                    " current disk size (%d MiB)" % (target, disk.size),
                    errors.ECODE_STATE)
        else:
            delta = op.amount
            target = disk.size + delta
        candidate = disk.copy()
        candidate.size = target
        grown = [candidate if d.uuid == disk.uuid else d for d in disks]
        group, policy = ipolicy.group_policy(cfg, inst.primary_node)
        violations = ipolicy.spec_violations(
            policy, disk_sizes=[d.size for d in grown],
            disk_templates=sorted(set(d.dev_type for d in grown)))
        if violations:
            ipolicy.enforce(self, "Growing disk %d violates policy: %s"
                            % (op.disk, ", ".join(violations)),
                            op.ignore_ipolicy)
        if delta > 0:
            await capacity.check_instance_fits(self, inst, disks=grown,
                                               only=("disk",))
        self.disk = disk
        self.delta = delta
        self.target = target

    async def exec_(self):
        inst = self.instance
        disk = self.disk
        if self.delta == 0:
            self.log_info("Disk %d of instance %s already has %d MiB,"
                          " nothing to do", self.op.disk, inst.name,
                          disk.size)
            return None
        self.log_info("Growing disk %d of instance '%s' by %d MiB to %d MiB",
                      self.op.disk, inst.name, self.delta, self.target)
        nodes = instance_disks.disk_nodes(inst, disk)
        for dryrun in (True, False):
            for node_uuid in nodes:
                await node_calls.call_node(
                    self, node_uuid, "blockdev_grow",
                    [instance_disks.rpc_disk(self.cfg, inst, disk),
                     self.delta, dryrun],
                    "%s disk %d of instance %s"
                    % ("Checking the growth of" if dryrun else "Growing",
                       self.op.disk, inst.name))
        self.cfg.modify_disk(disk.uuid, size=self.target)
        return None
