"""Storage units and disk status.

* OP_NODE_QUERY_STORAGE: rows of the storage units of a type (lvm-pv,
  lvm-vg, file, sharedfile) on nodes, fields ``node``, ``type``, ``name``,
  ``size``, ``used``, ``free``, ``allocatable`` (Ganeti's SF_* names);
* OP_NODE_QUERYVOLS: the logical volumes of nodes (``gnt-node volumes``),
  fields ``node``, ``phys``, ``vg``, ``name``, ``size``, ``instance``;
* OP_NODE_MODIFY_STORAGE: change a unit (lvm-pv ``allocatable``: ``pvchange
  -x``);
* OP_REPAIR_NODE_STORAGE: ``fix-consistency`` of a unit (lvm-vg:
  ``vgreduce --removemissing``; file directories: re-created).  A VG is only
  repaired when every instance that has disks on this node and on others
  has good data on those others (unless ``ignore_consistency``);
* :func:`instance_disk_status`: per disk and node of an instance, ``ok``,
  ``degraded`` or ``missing`` -- what automated disk repairs build on
  (docs/storage.rst, "Instance disk status").
"""

from ganeti import constants
from ganeti import errors
from ganeti import locking
from ganeti import storage
from ganeti.cmdlib import checks
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import node_calls
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance_migration import disks_for_node

__all__ = ["LUNodeQueryStorage", "LUNodeQueryvols", "LUNodeModifyStorage",
           "LURepairNodeStorage", "instance_disk_status", "storage_args",
           "DISK_OK", "DISK_DEGRADED", "DISK_MISSING"]

DISK_OK = storage.DISK_OK
DISK_DEGRADED = storage.DISK_DEGRADED
DISK_MISSING = storage.DISK_MISSING

SF_NODE = "node"
SF_TYPE = "type"
#: every field OP_NODE_QUERY_STORAGE knows
QUERY_FIELDS = frozenset([SF_NODE, SF_TYPE, storage.SF_NAME, storage.SF_SIZE,
                          storage.SF_USED, storage.SF_FREE,
                          storage.SF_ALLOCATABLE])
#: storage types with storage units on the nodes
UNIT_TYPES = frozenset([constants.ST_LVM_PV, constants.ST_LVM_VG,
                        constants.ST_FILE, constants.ST_SHARED_FILE])


def storage_args(cfg, storage_type):
    """``(su_args, default unit name)`` for a storage type: file kinds
    work on the cluster's directory (as Ganeti's _GetStorageTypeArgs)."""
    cluster = cfg.cluster
    if storage_type == constants.ST_FILE:
        directory = cluster.file_storage_dir
        what = "file_storage_dir"
    elif storage_type == constants.ST_SHARED_FILE:
        directory = cluster.shared_file_storage_dir
        what = "shared_file_storage_dir"
    else:
        return [], None
    if not directory:
        raise errors.OpPrereqError(
            "storage_type: the cluster has no %s, so there are no %s"
            " storage units" % (what, storage_type), errors.ECODE_STATE)
    return [[directory]], directory


def check_storage_type(storage_type, field="storage_type"):
    if storage_type not in UNIT_TYPES:
        raise errors.OpPrereqError(
            "%s: storage units of type '%s' are not supported (supported:"
            " %s)" % (field, storage_type, ", ".join(sorted(UNIT_TYPES))),
            errors.ECODE_INVAL)


def default_storage_type(cluster):
    """The storage type of the cluster's first enabled disk template."""
    by_template = {constants.DT_PLAIN: constants.ST_LVM_VG,
                   constants.DT_DRBD8: constants.ST_LVM_VG,
                   constants.DT_FILE: constants.ST_FILE,
                   constants.DT_SHARED_FILE: constants.ST_SHARED_FILE}
    for template in cluster.enabled_disk_templates or []:
        if template in by_template:
            return by_template[template]
    raise errors.OpPrereqError(
        "storage_type: none given and no enabled disk template has storage"
        " units", errors.ECODE_INVAL)


class LUNodeQueryStorage(LogicalUnit):
    OP_ID = "OP_NODE_QUERY_STORAGE"

    def check_arguments(self):
        op = self.op
        self.storage_type = op.storage_type or \
            default_storage_type(self.cfg.cluster)
        check_storage_type(self.storage_type)
        unknown = [f for f in op.output_fields if f not in QUERY_FIELDS]
        if unknown:
            raise errors.OpPrereqError(
                "output_fields: unknown field%s %s (known: %s)"
                % ("s" if len(unknown) > 1 else "", ", ".join(unknown),
                   ", ".join(sorted(QUERY_FIELDS))), errors.ECODE_INVAL)

    def expand_names(self):
        self.share_all()
        if self.op.nodes:
            self.node_uuids = []
            for name in self.op.nodes:
                uuid = self.expand_node(name)
                if uuid not in self.node_uuids:
                    self.node_uuids.append(uuid)
            self.needed_locks[locking.LEVEL_NODE] = list(self.node_uuids)
        else:
            self.node_uuids = None
            self.needed_locks[locking.LEVEL_NODE] = locking.ALL_SET

    def check_prereq(self):
        self.su_args, self.default_name = storage_args(self.cfg,
                                                       self.storage_type)

    async def exec_(self):
        cfg = self.cfg
        op = self.op
        uuids = self.node_uuids or list(cfg.nodes)
        nodes = sorted((cfg.nodes[u] for u in uuids), key=lambda n: n.name)
        fields = list(op.output_fields)
        # the name is always fetched (rows are sorted by it)
        wanted = [storage.SF_NAME] + [
            f for f in fields if f not in (SF_NODE, SF_TYPE, storage.SF_NAME)]
        name = op.name or self.default_name
        result = []
        for node in nodes:
            if node.offline:
                continue
            res = await node_calls.try_call_node(
                self, node.uuid, "storage_list",
                [self.storage_type, self.su_args, name, wanted])
            if not res.success:
                self.log_warning("Can't get storage data from node %s: %s",
                                 node.name, res.fail_msg)
                continue
            rows = sorted((dict(zip(wanted, row))
                           for row in res.payload or []),
                          key=lambda r: str(r.get(storage.SF_NAME)))
            for row in rows:
                out = []
                for field in fields:
                    if field == SF_NODE:
                        out.append(node.name)
                    elif field == SF_TYPE:
                        out.append(self.storage_type)
                    else:
                        out.append(row.get(field))
                result.append(out)
        return result


#: every field OP_NODE_QUERYVOLS knows (Ganeti's VF_* names)
VOLUME_FIELDS = ("node", "phys", "vg", "name", "size", "instance")


def _plain_lvs(disk, nodes):
    """``(node uuid, "vg/lv")`` of a disk's logical volumes."""
    if disk.dev_type == constants.DT_PLAIN and \
            isinstance(disk.logical_id, (list, tuple)) and \
            len(disk.logical_id) == 2:
        for node in nodes:
            yield node, "%s/%s" % tuple(disk.logical_id)
    for child in disk.children or []:
        yield from _plain_lvs(child, nodes)


def instance_lvs(cfg):
    """``{(node uuid, "vg/lv"): instance}`` for every instance's LVs."""
    result = {}
    for inst in cfg.instances.values():
        for disk in cfg.instance_disks(inst):
            nodes = list(disk.nodes or []) or [inst.primary_node]
            for key in _plain_lvs(disk, nodes):
                result[key] = inst
    return result


class LUNodeQueryvols(LogicalUnit):
    """OP_NODE_QUERYVOLS: one row per logical volume and physical volume
    it lies on, for each node asked (all when ``nodes`` is empty), the
    values as strings in ``output_fields`` order (as Ganeti's); the
    ``instance`` of a volume no instance owns is ``-``.  A node that cannot
    answer is a warning; offline nodes are left out."""
    OP_ID = "OP_NODE_QUERYVOLS"

    def check_arguments(self):
        unknown = [f for f in self.op.output_fields
                   if f not in VOLUME_FIELDS]
        if unknown:
            raise errors.OpPrereqError(
                "output_fields: unknown field%s %s (known: %s)"
                % ("s" if len(unknown) > 1 else "", ", ".join(unknown),
                   ", ".join(VOLUME_FIELDS)), errors.ECODE_INVAL)

    def expand_names(self):
        self.share_all()
        if self.op.nodes:
            self.node_uuids = []
            for name in self.op.nodes:
                uuid = self.expand_node(name)
                if uuid not in self.node_uuids:
                    self.node_uuids.append(uuid)
            self.needed_locks[locking.LEVEL_NODE] = list(self.node_uuids)
        else:
            self.node_uuids = None
            self.needed_locks[locking.LEVEL_NODE] = locking.ALL_SET

    async def exec_(self):
        cfg = self.cfg
        uuids = self.node_uuids or list(cfg.nodes)
        nodes = sorted((cfg.nodes[u] for u in uuids), key=lambda n: n.name)
        owners = instance_lvs(cfg)
        result = []
        for node in nodes:
            if node.offline:
                continue
            res = await node_calls.try_call_node(self, node.uuid,
                                                 "node_volumes", [])
            if not res.success:
                self.log_warning("Can't compute volume data on node %s: %s",
                                 node.name, res.fail_msg)
                continue
            vols = sorted(res.payload or [],
                          key=lambda v: (str(v.get("dev")),
                                         str(v.get("vg")),
                                         str(v.get("name"))))
            for vol in vols:
                row = []
                for field in self.op.output_fields:
                    if field == "node":
                        value = node.name
                    elif field == "phys":
                        value = vol.get("dev")
                    elif field == "size":
                        value = int(float(vol.get("size") or 0))
                    elif field == "instance":
                        inst = owners.get((node.uuid, "%s/%s" % (
                            vol.get("vg"), vol.get("name"))))
                        value = inst.name if inst is not None else "-"
                    else:
                        value = vol.get(field)
                    row.append(str(value))
                result.append(row)
        return result


class _NodeStorageLU(LogicalUnit):

    def expand_names(self):
        op = self.op
        self.node_uuid = self.expand_node(op.node_uuid or op.node_name)
        self.needed_locks[locking.LEVEL_NODE] = [self.node_uuid]

    def _common_checks(self, allowed, what):
        op = self.op
        check_storage_type(op.storage_type)
        if op.storage_type not in allowed:
            raise errors.OpPrereqError(
                "storage_type: storage units of type '%s' can not be %s"
                % (op.storage_type, what), errors.ECODE_INVAL)
        self.su_args, default = storage_args(self.cfg, op.storage_type)
        self.unit_name = op.name or default
        if not self.unit_name:
            raise errors.OpPrereqError(
                "name: the name of the %s storage unit is required"
                % op.storage_type, errors.ECODE_INVAL)
        checks.check_node_online(self.cfg, self.node_uuid,
                                 "cannot %s its storage"
                                 % ("change" if what == "modified"
                                    else "repair"))


class LUNodeModifyStorage(_NodeStorageLU):
    OP_ID = "OP_NODE_MODIFY_STORAGE"

    def check_prereq(self):
        op = self.op
        self._common_checks(storage.MODIFIABLE_STORAGE_FIELDS, "modified")
        modifiable = storage.MODIFIABLE_STORAGE_FIELDS[op.storage_type]
        bad = sorted(set(op.changes) - modifiable)
        if bad:
            raise errors.OpPrereqError(
                "changes: the following fields can not be modified for"
                " storage units of type '%s': %s (modifiable: %s)"
                % (op.storage_type, ", ".join(bad),
                   ", ".join(sorted(modifiable))), errors.ECODE_INVAL)
        if not op.changes:
            raise errors.OpPrereqError("changes: nothing to change",
                                       errors.ECODE_INVAL)
        for key, value in op.changes.items():
            if key == storage.SF_ALLOCATABLE and not isinstance(value, bool):
                raise errors.OpPrereqError(
                    "changes/allocatable: expected true or false, got %r"
                    % (value,), errors.ECODE_INVAL)

    async def exec_(self):
        op = self.op
        name = node_calls.node_name(self.cfg, self.node_uuid)
        self.log_info("Changing %s of %s storage unit %s on node %s",
                      ", ".join("%s=%s" % kv for kv in
                                sorted(op.changes.items())),
                      op.storage_type, self.unit_name, name)
        await node_calls.call_node(
            self, self.node_uuid, "storage_modify",
            [op.storage_type, self.su_args, self.unit_name,
             dict(op.changes)],
            "Modifying storage unit %s" % self.unit_name)
        return None


class LURepairNodeStorage(_NodeStorageLU):
    OP_ID = "OP_REPAIR_NODE_STORAGE"

    def expand_names(self):
        _NodeStorageLU.expand_names(self)
        self.share_locks[locking.LEVEL_INSTANCE] = True
        self.needed_locks[locking.LEVEL_INSTANCE] = [
            inst.uuid for inst in self.cfg.node_instances(self.node_uuid)]

    def declare_locks(self, level):
        if level == locking.LEVEL_NODE:
            # the other nodes of those instances are looked at, not changed
            nodes = {self.node_uuid}
            for uuid in self.needed_locks.get(locking.LEVEL_INSTANCE, []):
                inst = self.cfg.instances.get(uuid)
                if inst is not None:
                    nodes.update(inst.all_nodes)
            self.needed_locks[level] = sorted(nodes)

    def check_prereq(self):
        self._common_checks(storage.VALID_STORAGE_OPERATIONS, "repaired")

    async def _check_instances(self):
        """The repair's safeguard: every instance with disks here and on
        other nodes has good data on those other nodes."""
        cfg = self.cfg
        for inst in sorted(cfg.node_instances(self.node_uuid),
                           key=lambda i: i.name or i.uuid):
            others = [n for n in inst.all_nodes if n != self.node_uuid]
            if not others or inst.forthcoming:
                continue
            status = await instance_disk_status(self, inst, others)
            bad = [s for s in status if s["status"] != DISK_OK]
            if bad:
                first = bad[0]
                raise errors.OpPrereqError(
                    "Instance '%s' has faulty disks on node '%s' (disk %s:"
                    " %s); repairing node %s could lose its data (use"
                    " ignore_consistency to repair anyway)"
                    % (inst.name, first["node"], first["iv_name"],
                       first["status"], node_calls.node_name(cfg,
                                                             self.node_uuid)),
                    errors.ECODE_STATE)

    async def exec_(self):
        op = self.op
        name = node_calls.node_name(self.cfg, self.node_uuid)
        if op.ignore_consistency:
            self.log_warning("Not checking the instances' disks on other"
                             " nodes (ignore_consistency)")
        else:
            await self._check_instances()
        self.log_info("Repairing %s storage unit %s on node %s",
                      op.storage_type, self.unit_name, name)
        messages = await node_calls.call_node(
            self, self.node_uuid, "storage_execute",
            [op.storage_type, self.su_args, self.unit_name,
             storage.SO_FIX_CONSISTENCY],
            "Repairing storage unit %s" % self.unit_name)
        for msg in messages or []:
            self.log_info("%s: %s", name, msg)
        return None


# --- instance disk status ----------------------------------------------------

async def instance_disk_status(lu, instance, node_uuids=None):
    """Per disk and node: ``{"index", "iv_name", "node", "node_uuid",
    "status" (ok/degraded/missing), "details", "sync_percent", "ldisk",
    "path"}``.

    A disk on an offline or unreachable node, or one the node does not
    have, is ``missing``; mirrors report ``degraded`` while not redundant
    or resyncing.  Diskless disks are not listed.
    """
    cfg = lu.cfg
    disks = cfg.instance_disks(instance)
    if node_uuids is None:
        node_uuids = instance.all_nodes
    result = []
    for node_uuid in node_uuids:
        pairs = [(idx, d) for idx, d in enumerate(disks)
                 if d.dev_type != constants.DT_DISKLESS and
                 node_uuid in instance_disks.disk_nodes(instance, d)]
        if not pairs:
            continue
        node = cfg.nodes.get(node_uuid)
        name = node_calls.node_name(cfg, node_uuid)
        answers = None
        why = None
        if node is None or node.offline:
            why = "node %s is offline" % name
        else:
            res = await node_calls.try_call_node(
                lu, node_uuid, "blockdev_status",
                [disks_for_node(cfg, instance, node_uuid,
                                [d for _, d in pairs])])
            if res.success and isinstance(res.payload, list):
                answers = res.payload
            else:
                why = "node %s cannot be asked: %s" % (
                    name, res.fail_msg or "bad answer")
        for pos, (idx, disk) in enumerate(pairs):
            st = answers[pos] if answers and pos < len(answers) else None
            entry = {"index": idx, "iv_name": disk.iv_name, "node": name,
                     "node_uuid": node_uuid, "path": None,
                     "sync_percent": None, "ldisk": None}
            if st is None:
                entry["status"] = DISK_MISSING
                entry["details"] = why or "the disk does not exist on the" \
                    " node"
            else:
                entry["status"] = st.get("status") or DISK_MISSING
                entry["details"] = st.get("details")
                entry["path"] = st.get("path")
                entry["sync_percent"] = st.get("sync_percent")
                entry["ldisk"] = st.get("ldisk")
            result.append(entry)
    result.sort(key=lambda e: (e["index"], e["node_uuid"] !=
                               instance.primary_node, e["node"]))
    return result
