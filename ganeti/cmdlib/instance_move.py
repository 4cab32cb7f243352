"""Moving an instance's data: move, recreate-disks, replace-disks.

* OP_INSTANCE_MOVE copies the disks of a non-mirrored instance (``file``,
  ``plain``) to another node: the instance is shut down, new disks are made
  on the target, the data is copied through the master in chunks
  (``blockdev_read_chunk``/``blockdev_write_chunk``; all-zero chunks are
  not sent, disks stay sparse), the configuration is switched, the old
  disks removed and the instance started again on the target if it is
  marked up.  A failure before the switch removes the new disks and starts
  the instance again where it was.  Disks on shared storage (``sharedfile``,
  ``diskless``) need no copy: only the primary changes.  The new disks get
  new names (file / LV names), so a source and a target that share a
  directory (a virtual cluster) never collide.
* OP_INSTANCE_RECREATE_DISKS makes missing disks again (empty), on the same
  nodes or on new ones (``nodes``, or those an instance allocator gives
  for the instance's spec with ``iallocator``: the instance moves there);
  like Ganeti's, it refuses disks that still exist.
* OP_INSTANCE_REPLACE_DISKS is for ``drbd`` instances (as in Ganeti): new
  storage under the mirror on the primary or the secondary (DRBD resyncs
  from the other side), or a new secondary node altogether (``remote_node``,
  or what a relocate request to an allocator answers).

A forthcoming instance has no data: moving it (move, recreate-disks with
new nodes, replace-disks with a new secondary) changes the configuration
only (:mod:`ganeti.cmdlib.reservations`).
"""

import copy

from ganeti import constants
from ganeti import errors
from ganeti import ipolicy
from ganeti import locking
from ganeti import objects
from ganeti.cmdlib import allocation
from ganeti.cmdlib import capacity
from ganeti.cmdlib import checks
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import instance_params
from ganeti.cmdlib import node_calls
from ganeti.cmdlib import kept_domains
from ganeti.cmdlib import reservations
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance_migration import (
    assemble_instance_disks, check_target_node, disk_for_node,
    start_spec, wait_for_sync)

__all__ = ["LUInstanceMove", "LUInstanceRecreateDisks",
           "LUInstanceReplaceDisks", "copy_disk", "CHUNK_SIZE"]

#: bytes per copied chunk
CHUNK_SIZE = 4 * 1024 * 1024
#: templates whose data moves by copying
COPYABLE = frozenset([constants.DT_FILE, constants.DT_PLAIN])
#: templates reachable from every node: a move changes the primary only
SHARED = frozenset([constants.DT_SHARED_FILE, constants.DT_DISKLESS])
#: templates recreate-disks makes for real
RECREATABLE = frozenset([constants.DT_FILE, constants.DT_SHARED_FILE,
                         constants.DT_PLAIN, constants.DT_DISKLESS,
                         constants.DT_DRBD8])


class _InstanceLU(LogicalUnit):

    def expand_names(self):
        op = self.op
        self.instance_uuid = self.expand_instance(op.instance_uuid
                                                  or op.instance_name)
        self.needed_locks[locking.LEVEL_INSTANCE] = [self.instance_uuid]

    @property
    def instance(self):
        return self.cfg.get_instance(self.instance_uuid)

    def _extra_nodes(self):
        return []

    def declare_locks(self, level):
        if level in (locking.LEVEL_NODE, locking.LEVEL_NODE_RES):
            inst = self.cfg.get_instance(self.instance_uuid)
            self.needed_locks[level] = sorted(set(inst.all_nodes) |
                                              set(self._extra_nodes()))


def renamed_disk(cfg, instance, disk, idx, node_uuid):
    """A copy of ``disk`` with a new place (new file/LV name) for
    ``node_uuid``."""
    new = disk.copy()
    new.uuid = disk.uuid
    if disk.dev_type in (constants.DT_FILE, constants.DT_PLAIN):
        unique = objects.new_uuid()
        if disk.dev_type == constants.DT_FILE:
            directory = "/".join((disk.logical_id[1]).split("/")[:-1])
            new.logical_id = [disk.logical_id[0], "%s/%s.disk%d"
                              % (directory, unique, idx)]
        else:
            new.logical_id = [disk.logical_id[0], "%s.disk%d" % (unique, idx)]
    new.nodes = [node_uuid]
    return new


async def copy_disk(lu, src_node, src_disk, dst_node, dst_disk, what,
                    chunk=None):
    """Copy a disk's data from one node to another through the master."""
    chunk = chunk or CHUNK_SIZE
    src = src_disk.to_dict()
    dst = dst_disk.to_dict()
    offset = 0
    size = None
    sent = 0
    last_pct = -1
    while True:
        data = await node_calls.call_node(
            lu, src_node, "blockdev_read_chunk", [src, offset, chunk],
            "Reading %s" % what)
        size = data.get("size") if size is None else size
        if data.get("data") == "" or (size is not None and offset >= size):
            break
        length = data.get("length") or chunk
        await node_calls.call_node(
            lu, dst_node, "blockdev_write_chunk",
            [dst, offset, data.get("data"), length], "Writing %s" % what)
        if data.get("data") is not None:
            sent += length
        offset += length
        if size:
            pct = int(100 * min(offset, size) / size) // 10 * 10
            if pct != last_pct:
                lu.log_info("  - %s: %d%% copied (%d of %d MiB, %d MiB"
                            " sent)", what, pct, min(offset, size) >> 20,
                            size >> 20, sent >> 20)
                last_pct = pct
        if size is not None and offset >= size:
            break
    if size is not None:
        await node_calls.call_node(lu, dst_node, "blockdev_truncate",
                                   [dst, size], "Finishing %s" % what)
    return size or 0


class LUInstanceMove(_InstanceLU):
    OP_ID = "OP_INSTANCE_MOVE"

    def expand_names(self):
        _InstanceLU.expand_names(self)
        op = self.op
        self.target_uuid = self.expand_node(op.target_node_uuid
                                            or op.target_node)

    def _extra_nodes(self):
        return [self.target_uuid]

    async def check_prereq(self):
        cfg = self.cfg
        inst = self.instance
        disks = cfg.instance_disks(inst)
        bad = sorted(set(d.dev_type for d in disks
                         if d.dev_type not in COPYABLE | SHARED and
                         (d.dev_type or not inst.forthcoming)))
        if bad:
            raise errors.OpPrereqError(
                "Instance '%s' has %s disks, which cannot be moved (%s:"
                " use migrate, failover or replace-disks)"
                % (inst.name, ", ".join(bad),
                   "copyable: %s" % ", ".join(sorted(COPYABLE))),
                errors.ECODE_STATE)
        if inst.forthcoming:
            # nothing to copy: the reservation changes its node
            reservations.check_placed(inst, "move it")
            reservations.check_node(cfg, inst, self.target_uuid,
                                    "target_node", "primary")
            await reservations.check_placement(self, inst,
                                               [self.target_uuid],
                                               self.op.ignore_ipolicy)
            return
        check_target_node(cfg, self.target_uuid, inst)
        ipolicy.check_target_group(self, inst, self.target_uuid,
                                   self.op.ignore_ipolicy)
        self.copy = [d for d in disks if d.dev_type in COPYABLE]
        if self.copy:
            checks.check_node_online(
                cfg, inst.primary_node,
                "the data of instance %s is there (use recreate-disks to"
                " make new disks elsewhere)" % inst.name)
        candidate = inst.copy()
        candidate.primary_node = self.target_uuid
        moved = []
        for d in disks:
            d = d.copy()
            if d.dev_type in constants.DTS_NODE_LOCAL:
                d.nodes = [self.target_uuid]
            moved.append(d)
        await capacity.check_instance_fits(self, candidate, disks=moved)

    async def exec_(self):
        op = self.op
        cfg = self.cfg
        inst = self.instance
        if inst.forthcoming:
            reservations.place(self, inst, [self.target_uuid])
            return None
        src, dst = inst.primary_node, self.target_uuid
        src_name = node_calls.node_name(cfg, src)
        dst_name = node_calls.node_name(cfg, dst)
        was_up = inst.admin_state == constants.ADMINST_UP
        if was_up:
            await kept_domains.clean_up(self, dst, skip={inst.uuid})
            be = objects.fill_beparams(cfg.cluster, inst)
            await node_calls.check_free_memory(
                self, dst, inst.hypervisor, be[constants.BE_MINMEM],
                "moving instance %s" % inst.name)
        src_offline = cfg.get_node(src).offline
        self.log_info("Shutting down instance %s on source node %s",
                      inst.name, src_name)
        result = await node_calls.try_call_node(
            self, src, "instance_shutdown",
            [inst.name, inst.hypervisor, op.shutdown_timeout])
        if not result.success:
            err = node_calls.rpc_error(result, "Shutting down instance %s"
                                       % inst.name, src_name)
            if op.ignore_consistency or src_offline:
                self.log_warning("Could not shutdown instance %s on node %s,"
                                 " proceeding anyway; please make sure node"
                                 " %s is down; error details: %s", inst.name,
                                 src_name, src_name, err)
            else:
                raise errors.OpExecError("Could not shutdown instance %s on"
                                         " node %s: %s"
                                         % (inst.name, src_name, err))
        await instance_disks.shutdown_disks(self, inst, ignore_failures=True)
        disks = cfg.instance_disks(inst)
        new_disks = {}
        created = []
        try:
            if self.copy:
                self.log_info("Creating the disks on target node %s",
                              dst_name)
            for idx, disk in enumerate(disks):
                if disk.dev_type not in COPYABLE:
                    continue
                new = renamed_disk(cfg, inst, disk, idx, dst)
                await instance_disks.create_disk(self, inst, new, dst)
                created.append((new, dst))
                new_disks[disk.uuid] = new
            for idx, disk in enumerate(disks):
                if disk.uuid not in new_disks:
                    continue
                self.log_info("Copying disk %s (%d MiB) from %s to %s",
                              disk.iv_name, disk.size, src_name, dst_name)
                await copy_disk(self, src, disk, dst, new_disks[disk.uuid],
                                "disk %s" % disk.iv_name)
        except errors.GenericError:
            self.log_warning("Moving the data failed; removing the new"
                             " disks on %s", dst_name)
            await instance_disks.remove_disks(self, inst, created)
            if was_up:
                self.log_info("Starting instance %s again on %s", inst.name,
                              src_name)
                try:
                    await assemble_instance_disks(self, inst)
                    await node_calls.call_node(
                        self, src, "instance_start",
                        [start_spec(cfg, inst), False],
                        "Starting instance %s" % inst.name)
                except errors.GenericError as err:
                    self.log_warning("Could not restart instance %s on %s:"
                                     " %s", inst.name, src_name, err)
            raise
        # the switch: from here on the instance lives on the target (the
        # config objects change in place: keep copies of the old disks)
        old = [(d.copy(), src) for d in disks if d.uuid in new_disks]
        cfg.modify_instance(inst.uuid, primary_node=dst)
        for uuid, new in new_disks.items():
            cfg.modify_disk(uuid, logical_id=new.logical_id)
        inst = self.instance
        if old:
            self.log_info("Removing the old disks on %s", src_name)
            await instance_disks.remove_disks(self, inst, old)
        if was_up:
            self.log_info("Starting instance %s on node %s", inst.name,
                          dst_name)
            await assemble_instance_disks(self, inst)
            result = await node_calls.try_call_node(
                self, dst, "instance_start", [start_spec(cfg, inst), False])
            if not result.success:
                await instance_disks.shutdown_disks(
                    self, inst, ignore_failures=True)
                raise errors.OpExecError(
                    "Could not start instance %s on node %s (it was moved"
                    " and stays stopped): %s"
                    % (inst.name, dst_name, node_calls.rpc_error(
                        result, "Starting", dst_name).args[0]))
        return None


# --- recreate-disks ----------------------------------------------------------

class LUInstanceRecreateDisks(_InstanceLU):
    OP_ID = "OP_INSTANCE_RECREATE_DISKS"

    def check_arguments(self):
        op = self.op
        allocation.check_op_params(op)
        allocation.check_not_both(op, "nodes", op.nodes or op.node_uuids)
        self.changes = {}
        indices = []
        for item in op.disks:
            if isinstance(item, (list, tuple)):
                idx, params = item
                unknown = sorted(set(params) - {"size", "mode"})
                if unknown:
                    raise errors.OpPrereqError(
                        "disks/%d: cannot change %s when recreating (only"
                        " size and mode)" % (idx, ", ".join(unknown)),
                        errors.ECODE_INVAL)
                change = {}
                if "size" in params:
                    change["size"] = instance_params.parse_size(
                        params["size"], "disks/%d/size" % idx)
                if "mode" in params:
                    if params["mode"] not in constants.DISK_ACCESS_SET:
                        raise errors.OpPrereqError(
                            "disks/%d/mode: '%s' is not one of %s"
                            % (idx, params["mode"], ", ".join(sorted(
                                constants.DISK_ACCESS_SET))),
                            errors.ECODE_INVAL)
                    change["mode"] = params["mode"]
                self.changes[idx] = change
            else:
                idx = item
            if idx in indices:
                raise errors.OpPrereqError("disks: disk %d given twice" % idx,
                                           errors.ECODE_INVAL)
            indices.append(idx)
        self.indices = indices

    def expand_names(self):
        _InstanceLU.expand_names(self)
        op = self.op
        names = op.node_uuids or op.nodes or []
        self.new_nodes = [self.expand_node(n) for n in names]
        # only an explicit allocator: without nodes, the disks are made
        # again where they were
        self.allocator = allocation.explicit_allocator(op)

    def _extra_nodes(self):
        if self.allocator:
            return list(self.cfg.nodes)     # the allocator may pick any
        return self.new_nodes

    async def check_prereq(self):
        inst = self.instance
        if inst.forthcoming:
            self._check_forthcoming_args(inst)
        if self.allocator:
            await self._allocate(inst)
        if inst.forthcoming:
            await self._check_forthcoming(inst)
        else:
            self._check(inst)

    def _check_forthcoming_args(self, inst):
        if self.changes:
            idx = sorted(self.changes)[0]
            raise errors.OpPrereqError(
                "disks/%d: instance %s is forthcoming, its disks exist only"
                " in the configuration: there is no disk to recreate with"
                " another size or mode" % (idx, inst.display_name),
                errors.ECODE_INVAL)
        if not self.new_nodes and not self.allocator:
            raise errors.OpPrereqError(
                "Instance '%s' is forthcoming, its disks exist only in the"
                " configuration: there is nothing to recreate (give nodes"
                " or an allocator to place its reservation elsewhere)"
                % inst.display_name, errors.ECODE_STATE)

    async def _check_forthcoming(self, inst):
        """Re-placing a reservation: the new nodes must be able to
        take it, as when it was placed."""
        cfg = self.cfg
        disks = cfg.instance_disks(inst)
        needed = 2 if any(d.dev_type == constants.DT_DRBD8
                          for d in disks) else 1
        if len(self.new_nodes) != needed:
            raise errors.OpPrereqError(
                "nodes: instance %s needs %d node%s, %d given"
                % (inst.display_name, needed, "s" if needed > 1 else "",
                   len(self.new_nodes)), errors.ECODE_INVAL)
        if len(set(self.new_nodes)) != len(self.new_nodes):
            raise errors.OpPrereqError("nodes: a node is given twice",
                                       errors.ECODE_INVAL)
        if self.indices and sorted(self.indices) != list(range(len(disks))):
            raise errors.OpPrereqError(
                "disks: when changing nodes, all disks must be recreated",
                errors.ECODE_INVAL)
        for idx, node_uuid in enumerate(self.new_nodes):
            reservations.check_node(
                cfg, inst, node_uuid, "nodes/%d" % idx,
                "primary" if idx == 0 else "secondary", allow_current=True)
        reservations.check_one_group(cfg, inst, self.new_nodes, "nodes",
                                     keep_group=False)
        self.wanted = list(range(len(disks)))
        if self.new_nodes != inst.all_nodes:
            await reservations.check_placement(self, inst, self.new_nodes)

    async def _allocate(self, inst):
        cfg = self.cfg
        disks = cfg.instance_disks(inst)
        template = objects.disk_template_of(disks)
        if template not in RECREATABLE:
            return      # _check refuses it
        request = allocation.instance_spec_request(cfg, inst)
        found = await allocation.allocate(
            self, request, allocation.allocator_names(
                cfg, "allocate", self.allocator),
            self.op.iallocator_params, hypervisor=request.hypervisor)
        self.new_nodes = [cfg.get_node(n).uuid for n in found.result]
        self.log_info("Selected nodes for instance %s via iallocator %s: %s",
                      inst.display_name, found.allocator,
                      ", ".join(found.result))
        allocation.release_other_nodes(
            self, set(self.new_nodes) | set(inst.all_nodes))

    def dry_run_result(self):
        nodes = self.new_nodes or self.instance.all_nodes
        return allocation.node_names(self.cfg, nodes)

    def _check(self, inst):
        cfg = self.cfg
        disks = cfg.instance_disks(inst)
        bad = sorted(set(d.dev_type for d in disks
                         if d.dev_type not in RECREATABLE))
        if bad:
            raise errors.OpPrereqError("Instance '%s' has %s disks, which"
                                       " cannot be recreated"
                                       % (inst.name, ", ".join(bad)),
                                       errors.ECODE_INVAL)
        for idx in self.indices:
            if idx >= len(disks):
                raise errors.OpPrereqError(
                    "disks: instance %s has no disk %d (it has %d)"
                    % (inst.name, idx, len(disks)), errors.ECODE_INVAL)
        self.wanted = self.indices or list(range(len(disks)))
        if self.new_nodes:
            needed = 2 if any(d.dev_type == constants.DT_DRBD8
                              for d in disks) else 1
            if len(self.new_nodes) != needed:
                raise errors.OpPrereqError(
                    "nodes: instance %s needs %d node%s, %d given"
                    % (inst.name, needed, "s" if needed > 1 else "",
                       len(self.new_nodes)), errors.ECODE_INVAL)
            if len(set(self.new_nodes)) != len(self.new_nodes):
                raise errors.OpPrereqError("nodes: a node is given twice",
                                           errors.ECODE_INVAL)
            if self.indices and sorted(self.indices) != \
                    list(range(len(disks))):
                raise errors.OpPrereqError(
                    "disks: when changing nodes, all disks must be"
                    " recreated", errors.ECODE_INVAL)
            for idx, node_uuid in enumerate(self.new_nodes):
                checks.check_node_vm_capable(
                    cfg, node_uuid, "primary" if idx == 0 else "secondary")
        else:
            for node_uuid in inst.all_nodes:
                node = cfg.get_node(node_uuid)
                if node.offline:
                    raise errors.OpPrereqError(
                        "Instance '%s' has disks on offline node %s; give"
                        " nodes to recreate them elsewhere"
                        % (inst.name, node.name), errors.ECODE_STATE)
        checks.check_instance_state(inst, checks.INSTANCE_NOT_RUNNING,
                                    "cannot recreate disks")

    async def exec_(self):
        cfg = self.cfg
        inst = self.instance
        if inst.forthcoming:
            if self.new_nodes == inst.all_nodes:
                self.log_info("Instance %s is forthcoming and already on"
                              " these nodes: nothing changes",
                              inst.display_name)
            else:
                reservations.place(self, inst, self.new_nodes)
            return None
        if not cfg.get_node(inst.primary_node).offline:
            await checks.check_not_running(self, inst,
                                           "cannot recreate disks")
        disks = cfg.instance_disks(inst)
        if self.new_nodes:
            changes = {"primary_node": self.new_nodes[0]}
            if len(self.new_nodes) > 1:
                changes["secondary_nodes"] = self.new_nodes[1:]
            old_nodes = list(inst.all_nodes)
            if changes["primary_node"] != inst.primary_node or \
                    changes.get("secondary_nodes", inst.secondary_nodes) != \
                    inst.secondary_nodes:
                self.log_info("Instance %s moves to %s", inst.name,
                              ", ".join(node_calls.node_name(cfg, n)
                                        for n in self.new_nodes))
                for disk in disks:
                    if disk.dev_type == constants.DT_DRBD8:
                        lid = list(disk.logical_id)
                        lid[0], lid[1] = self.new_nodes[0], self.new_nodes[1]
                        lid[3] = instance_disks.free_drbd_minor(cfg, lid[0])
                        lid[4] = instance_disks.free_drbd_minor(cfg, lid[1])
                        cfg.modify_disk(disk.uuid, logical_id=lid)
                cfg.modify_instance(inst.uuid, **changes)
                inst = self.instance
                disks = cfg.instance_disks(inst)
                self.log_info("The old nodes (%s) may still hold stale disks"
                              " of the instance; they are left alone",
                              ", ".join(node_calls.node_name(cfg, n)
                                        for n in old_nodes))
        for idx, change in sorted(self.changes.items()):
            cfg.modify_disk(disks[idx].uuid, **change)
        disks = cfg.instance_disks(inst)
        targets = [disks[idx] for idx in self.wanted]
        # refuse disks that are still there: this is for missing ones
        for node_uuid in inst.all_nodes:
            wanted = [d for d in targets
                      if d.dev_type != constants.DT_DISKLESS and
                      node_uuid in instance_disks.disk_nodes(inst, d)]
            if not wanted:
                continue
            dims = await node_calls.call_node(
                self, node_uuid, "blockdev_status",
                [[disk_for_node(cfg, inst, d, node_uuid) for d in wanted]],
                "Looking for the disks of %s" % inst.name, prereq=True)
            for disk, st in zip(wanted, dims or []):
                if st is not None and disk.dev_type != constants.DT_DRBD8:
                    raise errors.OpPrereqError(
                        "Disk %s of instance %s still exists on node %s;"
                        " recreate-disks is for missing disks (remove it"
                        " first)" % (disk.iv_name, inst.name,
                                     node_calls.node_name(cfg, node_uuid)),
                        errors.ECODE_EXISTS)
        created = []
        try:
            for disk in targets:
                if disk.dev_type == constants.DT_DISKLESS:
                    continue
                nodes = instance_disks.disk_nodes(inst, disk)
                for node_uuid in reversed(nodes):
                    self.log_info("Creating disk %s (%d MiB) on node %s",
                                  disk.iv_name, disk.size,
                                  node_calls.node_name(cfg, node_uuid))
                    await node_calls.call_node(
                        self, node_uuid, "blockdev_create",
                        [disk_for_node(cfg, inst, disk, node_uuid),
                         disk.size, inst.name,
                         node_uuid == inst.primary_node,
                         "originstname+%s" % inst.name],
                        "Creating disk %s of instance %s"
                        % (disk.iv_name, inst.name))
                    created.append((disk, node_uuid))
        except errors.GenericError:
            self.log_warning("Recreating the disks failed; removing those"
                             " made")
            await instance_disks.remove_disks(self, inst, created)
            raise
        self.log_info("Recreated %d disk(s) of instance %s; their content is"
                      " empty (reinstall the OS or restore a backup)",
                      len(targets), inst.name)
        return None


# --- replace-disks (drbd) ----------------------------------------------------

class LUInstanceReplaceDisks(_InstanceLU):
    OP_ID = "OP_INSTANCE_REPLACE_DISKS"

    def check_arguments(self):
        op = self.op
        allocation.check_op_params(op)
        remote = op.remote_node_uuid or op.remote_node
        allocation.check_not_both(op, "remote_node", remote)
        self.allocators = ()
        if op.mode == "replace_new_secondary":
            if not remote:
                self.allocators = allocation.allocator_names(
                    self.cfg, "relocate", allocation.explicit_allocator(op))
                if not self.allocators:
                    raise allocation.no_allocator_error(
                        "relocate", "the new secondary node (remote_node /"
                        " -n)")
        elif remote or allocation.explicit_allocator(op):
            raise errors.OpPrereqError(
                "%s: only with mode replace_new_secondary"
                % ("remote_node" if remote else "iallocator"),
                errors.ECODE_INVAL)

    def expand_names(self):
        _InstanceLU.expand_names(self)
        op = self.op
        remote = op.remote_node_uuid or op.remote_node
        self.remote_uuid = self.expand_node(remote) if remote else None

    def _extra_nodes(self):
        if self.allocators:
            # the new secondary stays in the instance's group
            pnode = self.cfg.nodes.get(self.instance.primary_node)
            if pnode is not None:
                return [n.uuid for n in self.cfg.group_nodes(pnode.group)]
        return [self.remote_uuid] if self.remote_uuid else []

    async def check_prereq(self):
        self._check_layout()
        if self.allocators:
            inst = self.instance
            request = allocation.relocate_request(
                self.cfg, inst, list(inst.secondary_nodes))
            found = await allocation.allocate(
                self, request, self.allocators, self.op.iallocator_params,
                hypervisor=inst.hypervisor)
            self.remote_uuid = self.cfg.get_node(found.result[0]).uuid
            self.log_info("Selected new secondary for instance '%s': %s"
                          " (via iallocator %s)", inst.display_name,
                          found.result[0], found.allocator)
            allocation.release_other_nodes(
                self, set(inst.all_nodes) | {self.remote_uuid})
        await self._check_nodes()

    def dry_run_result(self):
        if self.remote_uuid is None:
            return None
        return node_calls.node_name(self.cfg, self.remote_uuid)

    def _check_layout(self):
        cfg = self.cfg
        op = self.op
        inst = self.instance
        if inst.forthcoming:
            if op.mode in ("replace_on_primary", "replace_on_secondary"):
                raise errors.OpPrereqError(
                    "Instance '%s' is forthcoming, it exists only in the"
                    " configuration: it has no data and no disks on its"
                    " nodes, so there is nothing to replace on its %s node"
                    " (mode replace_new_secondary moves its reservation to"
                    " another node)" % (inst.display_name, "primary"
                                        if op.mode == "replace_on_primary"
                                        else "secondary"),
                    errors.ECODE_STATE)
            reservations.check_placed(inst, "replace its disks")
        disks = cfg.instance_disks(inst)
        if not disks or any(d.dev_type != constants.DT_DRBD8 for d in disks):
            raise errors.OpPrereqError(
                "Can only run replace disks for DRBD8-based instances"
                " (instance %s has %s disks; use recreate-disks or move)"
                % (inst.name, objects.disk_template_of(disks)),
                errors.ECODE_INVAL)
        if len(inst.secondary_nodes) != 1:
            raise errors.OpPrereqError(
                "The instance has a strange layout, expected one secondary"
                " but found %d" % len(inst.secondary_nodes),
                errors.ECODE_FAULT)
        for idx in op.disks:
            if idx >= len(disks):
                raise errors.OpPrereqError(
                    "disks: instance %s has no disk %d (it has %d)"
                    % (inst.name, idx, len(disks)), errors.ECODE_INVAL)
        self.wanted = list(op.disks) or list(range(len(disks)))

    async def _check_nodes(self):
        cfg = self.cfg
        op = self.op
        inst = self.instance
        if inst.forthcoming:
            # a configuration change: only the new secondary matters
            if self.remote_uuid is not None:
                reservations.check_node(cfg, inst, self.remote_uuid,
                                        "remote_node", "secondary")
                reservations.check_one_group(cfg, inst, [self.remote_uuid],
                                             "remote_node", keep_group=True)
                await reservations.check_placement(
                    self, inst, [inst.primary_node, self.remote_uuid],
                    op.ignore_ipolicy)
            return
        if self.remote_uuid is not None:
            if self.remote_uuid in inst.all_nodes:
                raise errors.OpPrereqError(
                    "remote_node: node %s is already a node of instance %s"
                    % (node_calls.node_name(cfg, self.remote_uuid), inst.name),
                    errors.ECODE_INVAL)
            checks.check_node_vm_capable(cfg, self.remote_uuid, "secondary")
            ipolicy.check_target_group(self, inst, self.remote_uuid,
                                       op.ignore_ipolicy)
            # the new secondary must hold the mirrors (only what comes
            # there is checked: the instance as seen from that node)
            candidate = inst.copy()
            candidate.primary_node = None
            candidate.secondary_nodes = [self.remote_uuid]
            moved = []
            for d in cfg.instance_disks(inst):
                d = d.copy()
                d.nodes = [self.remote_uuid]
                moved.append(d)
            await capacity.check_instance_fits(self, candidate, disks=moved,
                                               only=("disk",))
        if op.mode != "replace_new_secondary":
            checks.check_node_online(cfg, inst.primary_node)
            checks.check_node_online(cfg, inst.secondary_nodes[0])
        else:
            checks.check_node_online(cfg, inst.primary_node)

    async def exec_(self):
        op = self.op
        inst = self.instance
        if inst.forthcoming:
            if op.mode == "replace_new_secondary":
                reservations.place(self, inst,
                                   [inst.primary_node, self.remote_uuid])
            else:
                self.log_info("Instance '%s' is forthcoming, it has no data:"
                              " no disks need replacement",
                              inst.display_name)
            return None
        if op.mode == "replace_new_secondary":
            return await self._change_secondary()
        if op.mode == "replace_auto":
            node = await self._faulty_node()
            if node is None:
                self.log_info("No disks need replacement for instance '%s'",
                              inst.name)
                return None
        elif op.mode == "replace_on_primary":
            node = inst.primary_node
        else:
            node = inst.secondary_nodes[0]
        return await self._replace_on(node)

    async def _faulty_node(self):
        from ganeti.cmdlib.storage import instance_disk_status
        inst = self.instance
        status = await instance_disk_status(self, inst)
        faulty = sorted(set(s["node_uuid"] for s in status
                            if s["index"] in self.wanted and
                            (s["status"] == "missing" or
                             s.get("ldisk") == 4)))
        if len(faulty) > 1:
            raise errors.OpPrereqError(
                "Instance %s has faulty disks on more than one node (%s);"
                " cannot repair automatically"
                % (inst.name, ", ".join(node_calls.node_name(self.cfg, n)
                                        for n in faulty)),
                errors.ECODE_STATE)
        if faulty:
            self.log_info("Replacing disks on faulty node %s",
                          node_calls.node_name(self.cfg, faulty[0]))
            return faulty[0]
        return None

    def _new_children(self, disk):
        """New data and metadata LVs for a drbd disk: in the VGs of the
        current ones (without those, the cluster's VG and the drbd
        ``metavg`` disk parameter)."""
        cfg = self.cfg
        if len(disk.children or []) == 2:
            vg = disk.children[0].logical_id[0]
            metavg = disk.children[1].logical_id[0]
        else:
            vg = cfg.cluster.volume_group_name
            metavg = objects.disk_params(
                cfg.cluster, instance_disks.instance_group(
                    cfg, self.instance), disk).get(
                        constants.DRBD_DEFAULT_METAVG) or vg
        unique = objects.new_uuid()
        return [objects.Disk(dev_type=constants.DT_PLAIN, size=disk.size,
                             logical_id=[vg, "%s.disk_data" % unique]),
                objects.Disk(dev_type=constants.DT_PLAIN,
                             size=constants.DRBD_META_SIZE,
                             logical_id=[metavg, "%s.disk_meta" % unique])]

    async def _replace_on(self, node_uuid):
        cfg = self.cfg
        inst = self.instance
        name = node_calls.node_name(cfg, node_uuid)
        disks = cfg.instance_disks(inst)
        other = [n for n in inst.all_nodes if n != node_uuid][0]
        self.log_info("Replacing disk(s) %s for instance '%s' on node %s",
                      ", ".join(str(i) for i in self.wanted), inst.name,
                      name)
        self.log_info("STEP 1/5 Check device existence and consistency")
        status = await node_calls.call_node(
            self, other, "blockdev_status",
            [[disk_for_node(cfg, inst, disks[i], other)
              for i in self.wanted]],
            "Checking the disks on the peer", prereq=True)
        for idx, st in zip(self.wanted, status or []):
            if st is None or st.get("ldisk") != 1:
                raise errors.OpExecError(
                    "Disk %s is not usable on peer node %s (%s); replacing"
                    " its storage on %s would lose the data"
                    % (idx, node_calls.node_name(cfg, other),
                       "missing" if st is None else st.get("details"), name))
        self.log_info("STEP 2/5 Allocate new storage")
        new = {}
        created = []
        try:
            for idx in self.wanted:
                children = self._new_children(disks[idx])
                dicts = instance_disks.rpc_children(cfg, inst, disks[idx],
                                                    children)
                for child, data in zip(children, dicts):
                    await node_calls.call_node(
                        self, node_uuid, "blockdev_create",
                        [data, child.size, inst.name, False,
                         "replace-disks"],
                        "Creating new storage for disk %d" % idx)
                    created.append(child)
                new[idx] = children
            self.log_info("STEP 3/5 Change the storage under the mirror")
            for idx in self.wanted:
                await node_calls.call_node(
                    self, node_uuid, "blockdev_replace_children",
                    [disk_for_node(cfg, inst, disks[idx], node_uuid),
                     instance_disks.rpc_children(cfg, inst, disks[idx],
                                                 new[idx]),
                     [c.to_dict() for c in disks[idx].children]],
                    "Replacing the storage of disk %d on %s" % (idx, name))
        except errors.GenericError:
            self.log_warning("Replacing failed; removing the new storage")
            for child in created:
                await node_calls.try_call_node(
                    self, node_uuid, "blockdev_remove", [child.to_dict()])
            raise
        old = {idx: disks[idx].children for idx in self.wanted}
        for idx in self.wanted:
            cfg.modify_disk(disks[idx].uuid, children=new[idx])
        self.log_info("STEP 4/5 Sync devices")
        await wait_for_sync(self, self.instance, [node_uuid])
        self.log_info("STEP 5/5 Removing old storage")
        for idx in self.wanted:
            for child in old[idx]:
                res = await node_calls.try_call_node(
                    self, node_uuid, "blockdev_remove", [child.to_dict()])
                if not res.success:
                    self.log_warning("Can't remove old storage %s of disk %d"
                                     " on %s: %s", "/".join(child.logical_id),
                                     idx, name, res.fail_msg)
        return None

    async def _change_secondary(self):
        cfg = self.cfg
        inst = self.instance
        pnode = inst.primary_node
        old = inst.secondary_nodes[0]
        new = self.remote_uuid
        new_name = node_calls.node_name(cfg, new)
        disks = cfg.instance_disks(inst)
        # the old secondary's side of each mirror, before the config moves
        old_sides = [disk_for_node(cfg, inst, d, old) for d in disks]
        self.log_info("Replacing the secondary of instance '%s': %s -> %s",
                      inst.name, node_calls.node_name(cfg, old), new_name)
        self.log_info("STEP 1/6 Check device existence and consistency")
        status = await node_calls.call_node(
            self, pnode, "blockdev_status",
            [[disk_for_node(cfg, inst, d, pnode) for d in disks]],
            "Checking the disks on the primary", prereq=True)
        for idx, st in enumerate(status or []):
            if st is None or st.get("ldisk") != 1:
                raise errors.OpExecError(
                    "Disk %d is not usable on the primary node (%s); it is"
                    " the only copy left" % (idx, "missing" if st is None
                                             else st.get("details")))
        self.log_info("STEP 2/6 Allocate new storage and mirrors on %s",
                      new_name)
        minor = instance_disks.free_drbd_minor(cfg, new)
        new_disks = []
        for disk in disks:
            nd = copy.deepcopy(disk)
            lid = list(disk.logical_id)
            if lid[0] == pnode:
                lid[1], lid[4] = new, minor
            else:
                lid[0], lid[3] = new, minor
            minor += 1
            nd.logical_id = lid
            nd.children = self._new_children(disk)
            new_disks.append(nd)
        target = inst.copy()
        target.secondary_nodes = [new]
        created = []
        try:
            for nd in new_disks:
                await node_calls.call_node(
                    self, new, "blockdev_create",
                    [disk_for_node(cfg, target, nd, new), nd.size, inst.name,
                     False, "replace-disks"],
                    "Creating disk %s on %s" % (nd.iv_name, new_name))
                created.append(nd)
        except errors.GenericError:
            for nd in created:
                await node_calls.try_call_node(
                    self, new, "blockdev_remove",
                    [disk_for_node(cfg, target, nd, new)])
            raise
        self.log_info("STEP 3/6 Disconnect the primary from the old"
                      " secondary")
        await node_calls.call_node(
            self, pnode, "drbd_disconnect_net",
            [[disk_for_node(cfg, inst, d, pnode) for d in disks]],
            "Disconnecting the mirrors on the primary")
        self.log_info("STEP 4/6 Updating the configuration")
        for disk, nd in zip(disks, new_disks):
            cfg.modify_disk(disk.uuid, logical_id=nd.logical_id,
                            children=nd.children)
        cfg.modify_instance(inst.uuid, secondary_nodes=[new])
        inst = self.instance
        self.log_info("STEP 5/6 Connect the mirrors to %s and sync",
                      new_name)
        for disk in cfg.instance_disks(inst):
            await node_calls.call_node(
                self, new, "blockdev_assemble",
                [disk_for_node(cfg, inst, disk, new), inst.name, False,
                 inst.disks.index(disk.uuid)],
                "Activating disk %s on %s" % (disk.iv_name, new_name))
        await node_calls.call_node(
            self, pnode, "drbd_attach_net",
            [[disk_for_node(cfg, inst, d, pnode)
              for d in cfg.instance_disks(inst)], False],
            "Connecting the mirrors of the primary to %s" % new_name)
        await wait_for_sync(self, inst, [pnode])
        self.log_info("STEP 6/6 Removing old storage on %s",
                      node_calls.node_name(cfg, old))
        for side in old_sides:
            res = await node_calls.try_call_node(self, old, "blockdev_remove",
                                                 [side])
            if not res.success:
                self.log_warning("Can't remove the old storage of disk %s on"
                                 " %s (remove it by hand): %s",
                                 side.get("iv_name"),
                                 node_calls.node_name(cfg, old), res.fail_msg)
        return None
