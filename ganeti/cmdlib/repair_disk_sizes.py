"""OP_CLUSTER_REPAIR_DISK_SIZES (``gnt-cluster repair-disk-sizes``): make
the configuration's disk sizes those the nodes really have.

For each instance asked (all when ``instances`` is empty) the primary
node measures every disk (``blockdev_getdimensions``): a plain disk's
logical volume, a file disk's file, and for a DRBD disk its data volume
(DRBD sits on it and is as big).  Where the measured size (whole MiB)
differs from the recorded one, the record is corrected, and so are DRBD
children smaller than their disk.  On nodes with exclusive storage the
spindles are corrected too.  The result lists each correction as
``[instance name, disk index, "size" or "spindles", new value]``, as
Ganeti's does.  A node that cannot answer, and a disk it cannot measure,
are warnings: those disks are left as they are.
"""

from ganeti import constants
from ganeti import locking
from ganeti import objects
from ganeti.cmdlib import node_calls
from ganeti.cmdlib.base import LogicalUnit

MiB = 1024 * 1024


def measured_disk(disk):
    """The disk a node measures for ``disk``: a DRBD disk's data volume,
    else the disk itself; None when it cannot be measured."""
    if disk.dev_type == constants.DT_DRBD8:
        if not disk.children:
            return None
        return measured_disk(disk.children[0])
    if disk.dev_type == constants.DT_DISKLESS:
        return None
    return disk


def _fixed_children(disk):
    """A copy of the DRBD disk's children with the data child (and its own
    data children) grown to the disk's size; None if nothing is smaller."""
    if disk.dev_type != constants.DT_DRBD8 or not disk.children:
        return None
    children = [c.copy() for c in disk.children]
    child = children[0]
    changed = False
    parent_size = disk.size
    while child is not None:
        if child.size is not None and child.size < parent_size:
            child.size = parent_size
            changed = True
        if child.dev_type != constants.DT_DRBD8 or not child.children:
            break
        child.children = [c.copy() for c in child.children]
        parent_size = child.size
        child = child.children[0]
    return children if changed else None


class LUClusterRepairDiskSizes(LogicalUnit):
    OP_ID = "OP_CLUSTER_REPAIR_DISK_SIZES"

    def expand_names(self):
        if self.op.instances:
            self.wanted = []
            for name in self.op.instances:
                uuid = self.expand_instance(name)
                if uuid not in self.wanted:
                    self.wanted.append(uuid)
            self.needed_locks[locking.LEVEL_INSTANCE] = list(self.wanted)
        else:
            self.wanted = None
            self.needed_locks[locking.LEVEL_INSTANCE] = locking.ALL_SET
        self.share_locks[locking.LEVEL_NODE_RES] = True

    def declare_locks(self, level):
        if level != locking.LEVEL_NODE_RES:
            return
        if self.wanted is None:
            self.needed_locks[level] = locking.ALL_SET
        else:
            self.needed_locks[level] = sorted(set(
                self.cfg.get_instance(u).primary_node for u in self.wanted
                if self.cfg.get_instance(u).primary_node))

    def check_prereq(self):
        cfg = self.cfg
        uuids = self.wanted if self.wanted is not None \
            else list(cfg.instances)
        self.instances = sorted(
            (cfg.instances[u] for u in uuids
             if u in cfg.instances and not cfg.instances[u].forthcoming),
            key=lambda i: i.name)

    def _exclusive_storage(self, node_uuid):
        node = self.cfg.nodes.get(node_uuid)
        if node is None:
            return False
        return bool(objects.fill_ndparams(
            self.cfg.cluster, self.cfg.nodegroups.get(node.group),
            node).get(constants.ND_EXCLUSIVE_STORAGE))

    async def exec_(self):
        cfg = self.cfg
        per_node = {}
        for inst in self.instances:
            if not inst.primary_node:
                continue
            for idx, disk in enumerate(cfg.instance_disks(inst)):
                per_node.setdefault(inst.primary_node, []).append(
                    (inst, idx, disk))
        changed = []
        for node_uuid in sorted(per_node,
                                key=lambda u: node_calls.node_name(cfg, u)):
            entries = per_node[node_uuid]
            node_name = node_calls.node_name(cfg, node_uuid)
            node = cfg.nodes.get(node_uuid)
            if node is not None and node.offline:
                self.log_warning("Node %s is offline, not checking the disks"
                                 " of %s", node_name, ", ".join(sorted(
                                     set(i.name for i, _, _ in entries))))
                continue
            measured = [(inst, idx, disk, measured_disk(disk))
                        for inst, idx, disk in entries]
            asked = [m for m in measured if m[3] is not None]
            if not asked:
                continue
            res = await node_calls.try_call_node(
                self, node_uuid, "blockdev_getdimensions",
                [[m[3].to_dict() for m in asked]])
            if not res.success:
                self.log_warning("Failure in blockdev_getdimensions call to"
                                 " node %s, ignoring: %s", node_name,
                                 res.fail_msg)
                continue
            if not isinstance(res.payload, list) or \
                    len(res.payload) != len(asked):
                self.log_warning("Invalid result from node %s, ignoring node"
                                 " results", node_name)
                continue
            exclusive = self._exclusive_storage(node_uuid)
            for (inst, idx, disk, _), dims in zip(asked, res.payload):
                changed.extend(self._repair(inst, idx, disk, dims,
                                            exclusive))
        return changed

    def _repair(self, inst, idx, disk, dims, exclusive):
        changed = []
        if dims is None:
            self.log_warning("Disk %d of instance %s did not return size"
                             " information, ignoring", idx, inst.name)
            return changed
        size = dims.get("size") if isinstance(dims, dict) else None
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            self.log_warning("Disk %d of instance %s did not return valid"
                             " size information, ignoring", idx, inst.name)
            return changed
        size //= MiB
        if size != disk.size:
            self.log_info("Disk %d of instance %s has mismatched size,"
                          " correcting: recorded %s, actual %d", idx,
                          inst.name, disk.size, size)
            self.cfg.modify_disk(disk.uuid, size=size)
            changed.append([inst.name, idx, "size", size])
            disk = self.cfg.get_disk(disk.uuid)
        if exclusive:
            spindles = dims.get("spindles")
            if spindles is None:
                self.log_warning("Disk %d of instance %s did not return"
                                 " valid spindles information, ignoring",
                                 idx, inst.name)
            elif disk.spindles != spindles:
                self.log_info("Disk %d of instance %s has mismatched"
                              " spindles, correcting: recorded %s, actual"
                              " %s", idx, inst.name, disk.spindles, spindles)
                self.cfg.modify_disk(disk.uuid, spindles=spindles)
                changed.append([inst.name, idx, "spindles", spindles])
                disk = self.cfg.get_disk(disk.uuid)
        children = _fixed_children(disk)
        if children is not None:
            self.log_info("Child disk of disk %d of instance %s is smaller"
                          " than %d MiB, fixing", idx, inst.name, disk.size)
            self.cfg.modify_disk(disk.uuid, children=children)
            changed.append([inst.name, idx, "size", disk.size])
        return changed
