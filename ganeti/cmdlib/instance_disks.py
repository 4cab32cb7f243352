"""Instance disks: templates, where their files and volumes live, building
new disks (``logical_id`` as Ganeti names them: ``file``/``sharedfile``
``[driver, <dir>/<instance>/<uuid>.disk<n>]``, ``plain`` ``[vg,
<uuid>.disk<n>]``), and creating, assembling and removing them on nodes.
"""

import os.path

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.cmdlib import instance_params
from ganeti.cmdlib import node_calls


#: Ganeti's local disk status "okay" (LDS_OKAY) in query results
LDS_OKAY = 1


#: Disk templates this master can create
SUPPORTED_TEMPLATES = frozenset([constants.DT_FILE, constants.DT_SHARED_FILE,
                                 constants.DT_PLAIN, constants.DT_DISKLESS])


#: ... of which these can grow
GROWABLE_TEMPLATES = frozenset([constants.DT_FILE, constants.DT_SHARED_FILE,
                                constants.DT_PLAIN])


def check_template(cluster, template, field="disk_template"):
    if template not in cluster.enabled_disk_templates:
        raise errors.OpPrereqError(
            "%s: '%s' is not enabled in the cluster (enabled: %s)"
            % (field, template, ", ".join(cluster.enabled_disk_templates)),
            errors.ECODE_STATE)
    if template == constants.DT_DRBD8:
        raise errors.OpPrereqError(
            "%s: drbd is not supported yet (no DRBD on these nodes)" % field,
            errors.ECODE_INVAL)
    if template not in SUPPORTED_TEMPLATES:
        raise errors.OpPrereqError(
            "%s: '%s' is not supported yet (supported: %s)"
            % (field, template, ", ".join(sorted(SUPPORTED_TEMPLATES))),
            errors.ECODE_INVAL)


def file_storage_base(cluster, template):
    if template == constants.DT_SHARED_FILE:
        base, what = cluster.shared_file_storage_dir, \
            "shared_file_storage_dir"
    else:
        base, what = cluster.file_storage_dir, "file_storage_dir"
    if not base:
        raise errors.OpPrereqError(
            "disk_template: the cluster has no %s set, cannot create %s"
            " disks" % (what, template), errors.ECODE_STATE)
    return base


def check_relative_dir(subdir, field="file_storage_dir"):
    if subdir is None:
        return None
    norm = os.path.normpath(subdir)
    if os.path.isabs(subdir) or norm.startswith("..") or norm == ".":
        raise errors.OpPrereqError(
            "%s: '%s' must be a relative directory inside the cluster's file"
            " storage directory" % (field, subdir), errors.ECODE_INVAL)
    return norm


def disk_directory(cluster, template, instance_name, subdir=None):
    """Directory of an instance's file disks (Ganeti: base[/subdir]/name)."""
    parts = [file_storage_base(cluster, template)]
    if subdir:
        parts.append(subdir)
    parts.append(instance_name)
    return os.path.join(*parts)


def disk_logical_id(cluster, template, instance_name, idx, params=None,
                    subdir=None, file_driver=None, unique=None):
    """A new ``logical_id`` for disk ``idx`` of an instance."""
    unique = unique or objects.new_uuid()
    leaf = "%s.disk%d" % (unique, idx)
    if template in (constants.DT_FILE, constants.DT_SHARED_FILE):
        directory = disk_directory(cluster, template, instance_name, subdir)
        return [file_driver or "loop", os.path.join(directory, leaf)]
    if template == constants.DT_PLAIN:
        vg = (params or {}).get("vg") or cluster.volume_group_name
        if not vg:
            raise errors.OpPrereqError(
                "disks/%d: no volume group given and the cluster has none"
                " (volume_group_name)" % idx, errors.ECODE_INVAL)
        return [vg, leaf]
    return None


_DISK_KEYS = frozenset(["size", "mode", "name", "vg", "metavg", "spindles",
                        "adopt", "provider", "access", "dev_type"])


def check_disk_params(params, idx, field="disks"):
    """Checked (size, mode, name, vg, spindles) of one disk's parameters."""
    where = "%s/%d" % (field, idx)
    unknown = sorted(set(params) - _DISK_KEYS)
    if unknown:
        raise errors.OpPrereqError("%s: unknown disk parameter%s %s"
                                   % (where, "s" if len(unknown) > 1 else "",
                                      ", ".join(unknown)), errors.ECODE_INVAL)
    if params.get("adopt"):
        raise errors.OpPrereqError("%s: disk adoption is not supported yet"
                                   % where, errors.ECODE_INVAL)
    if "size" not in params:
        raise errors.OpPrereqError("%s: missing disk size" % where,
                                   errors.ECODE_INVAL)
    size = instance_params.parse_size(params["size"], where + "/size")
    mode = params.get("mode", constants.DISK_RDWR)
    if mode not in constants.DISK_ACCESS_SET:
        raise errors.OpPrereqError("%s/mode: '%s' is not one of %s"
                                   % (where, mode,
                                      ", ".join(sorted(
                                          constants.DISK_ACCESS_SET))),
                                   errors.ECODE_INVAL)
    spindles = params.get("spindles")
    if spindles is not None:
        try:
            spindles = int(spindles)
        except (TypeError, ValueError):
            raise errors.OpPrereqError("%s/spindles: expected an integer,"
                                       " got %r" % (where, spindles),
                                       errors.ECODE_INVAL)
    return size, mode, params.get("name") or None, spindles


def generate_disk(cfg, template, instance_name, idx, params, subdir=None,
                  file_driver=None, forthcoming=False):
    """A new Disk (not yet in the config) from checked creation parameters."""
    size, mode, name, spindles = check_disk_params(params, idx)
    if params.get("dev_type") not in (None, template):
        raise errors.OpPrereqError(
            "disks/%d/dev_type: '%s' differs from the disk template '%s'"
            % (idx, params["dev_type"], template), errors.ECODE_INVAL)
    unique = objects.new_uuid()
    # A forthcoming disk gets its place on storage when it is committed
    # (its instance may not even have a name yet).
    logical_id = None if forthcoming else disk_logical_id(
        cfg.cluster, template, instance_name, idx, params, subdir,
        file_driver, unique)
    disk = objects.Disk(
        uuid=unique, dev_type=template, size=size, mode=mode, name=name,
        spindles=spindles, iv_name="disk/%d" % idx, forthcoming=forthcoming,
        logical_id=logical_id)
    if template == constants.DT_DISKLESS:
        disk.size = 0
    return disk


def disk_path(disk):
    """Where a disk lives on its node, as far as the config tells."""
    lid = disk.logical_id or []
    if disk.dev_type in (constants.DT_FILE, constants.DT_SHARED_FILE) and \
            len(lid) == 2:
        return lid[1]
    if disk.dev_type == constants.DT_PLAIN and len(lid) == 2:
        return "/dev/%s/%s" % (lid[0], lid[1])
    return None


def free_drbd_minor(cfg, node_uuid):
    """The lowest DRBD minor no drbd disk of the configuration uses on
    ``node_uuid``."""
    used = set()
    for disk in cfg.disks.values():
        if disk.dev_type != constants.DT_DRBD8 or \
                len(disk.logical_id or []) != 6:
            continue
        lid = disk.logical_id
        if lid[0] == node_uuid:
            used.add(lid[3])
        if lid[1] == node_uuid:
            used.add(lid[4])
    minor = 0
    while minor in used:
        minor += 1
    return minor


def instance_group(cfg, instance):
    """The node group whose disk parameters apply to an instance's disks:
    its primary node's (None if unknown)."""
    node = cfg.nodes.get(instance.primary_node) if instance else None
    return cfg.nodegroups.get(node.group) if node is not None else None


def rpc_disk(cfg, instance, disk):
    """A disk's config dict as a node gets it: ``params`` filled with the
    effective disk parameters (cluster, then the primary node's group,
    then the disk's own), as Ganeti annotates the disks it sends."""
    return objects.annotate_disk_dict(cfg.cluster,
                                      instance_group(cfg, instance),
                                      disk.to_dict())


def rpc_children(cfg, instance, disk, children):
    """The dicts of new ``children`` (data LV, metadata LV) of a drbd
    ``disk`` as a node gets them: with the stripes of the disk's
    ``data-stripes`` and ``meta-stripes``."""
    data = disk.to_dict()
    data["children"] = [c.to_dict() for c in children]
    return rpc_disk_dict(cfg, instance, data)["children"]


def rpc_disk_dict(cfg, instance, data):
    return objects.annotate_disk_dict(cfg.cluster,
                                      instance_group(cfg, instance), data)


def disk_nodes(instance, disk):
    return list(disk.nodes or instance.all_nodes)


async def create_disk(lu, instance, disk, node_uuid):
    """blockdev_create one disk on one node; returns its path."""
    return await node_calls.call_node(
        lu, node_uuid, "blockdev_create",
        [rpc_disk(lu.cfg, instance, disk), disk.size,
         instance.name or instance.uuid,
         node_uuid == instance.primary_node,
         "originstname+%s" % (instance.name or instance.uuid)],
        "Creating disk %s (%s, %s MiB) of instance %s"
        % (disk.iv_name, disk.dev_type, disk.size, instance.display_name))


async def create_disks(lu, instance, disks):
    """Create disks on their nodes; on failure remove what was created and
    raise.  Returns the list of (disk, node_uuid) created."""
    created = []
    try:
        for disk in disks:
            if disk.dev_type == constants.DT_DISKLESS:
                continue
            for node_uuid in disk_nodes(instance, disk):
                await create_disk(lu, instance, disk, node_uuid)
                created.append((disk, node_uuid))
    except errors.GenericError:
        lu.log_warning("Disk creation failed; removing the disks created")
        await remove_disks(lu, instance, created)
        raise
    return created


async def _each_disk(lu, instance, pairs, procedure, what, ignore_failures):
    """Call ``procedure`` with each (disk, node) but diskless ones; a
    failure is a warning "Could not <what(disk)> on node ..." (or, with
    ``ignore_failures`` false, all are tried, then an OpExecError).  True
    when all succeeded."""
    failed = []
    for disk, node_uuid in pairs:
        if disk.dev_type == constants.DT_DISKLESS:
            continue
        result = await node_calls.try_call_node(
            lu, node_uuid, procedure, [rpc_disk(lu.cfg, instance, disk)])
        if not result.success:
            name = node_calls.node_name(lu.cfg, node_uuid)
            msg = ("Could not %s on node %s: %s"
                   % (what(disk), name,
                      node_calls.strip_node_prefix(result.fail_msg, name)))
            lu.log_warning(msg)
            failed.append(msg)
    if failed and not ignore_failures:
        raise errors.OpExecError("; ".join(failed))
    return not failed


async def remove_disks(lu, instance, pairs, ignore_failures=True):
    """blockdev_remove each (disk, node); failures are warnings (or, with
    ``ignore_failures`` false, all tried, then an OpExecError)."""
    return await _each_disk(
        lu, instance, pairs, "blockdev_remove",
        lambda disk: "remove disk %s of instance %s"
        % (disk.iv_name, instance.display_name), ignore_failures)


def all_disk_pairs(cfg, instance, disks=None):
    if disks is None:
        disks = cfg.instance_disks(instance)
    return [(d, n) for d in disks for n in disk_nodes(instance, d)]


async def assemble_disks(lu, instance, disks=None, ignore_failures=False):
    """blockdev_assemble every disk on its nodes; marks disks active.

    Returns [(node name, iv_name, path)] for the primary node.  On failure
    what was assembled is shut down again and OpExecError raised.
    """
    cfg = lu.cfg
    if disks is None:
        disks = cfg.instance_disks(instance)
    info = []
    done = []
    for idx, disk in enumerate(disks):
        if disk.dev_type == constants.DT_DISKLESS:
            continue
        for node_uuid in disk_nodes(instance, disk):
            primary = node_uuid == instance.primary_node
            result = await node_calls.try_call_node(
                lu, node_uuid, "blockdev_assemble",
                [rpc_disk(cfg, instance, disk), instance.name, primary,
                 instance.disks.index(disk.uuid)
                 if disk.uuid in instance.disks else idx])
            if not result.success:
                if ignore_failures:
                    lu.log_warning("Could not activate disk %s on node %s: %s"
                                   % (disk.iv_name,
                                      node_calls.node_name(cfg, node_uuid),
                                      result.fail_msg))
                    continue
                await shutdown_disks(lu, instance, done, ignore_failures=True)
                raise node_calls.rpc_error(
                    result, "Activating disk %s of instance %s"
                    % (disk.iv_name, instance.name),
                    node_calls.node_name(cfg, node_uuid))
            done.append((disk, node_uuid))
            if primary:
                info.append((node_calls.node_name(cfg, node_uuid),
                             disk.iv_name,
                             (result.payload or {}).get("path")))
    current = cfg.instances.get(instance.uuid)
    if current is not None and not current.disks_active:
        cfg.set_instance_disks_active(instance.uuid, True)
    return info


async def shutdown_disks(lu, instance, pairs=None, ignore_failures=False):
    """blockdev_shutdown; with ``pairs`` None, every disk (and mark the
    instance's disks inactive)."""
    mark = pairs is None
    if pairs is None:
        pairs = all_disk_pairs(lu.cfg, instance)
    ok = await _each_disk(
        lu, instance, pairs, "blockdev_shutdown",
        lambda disk: "shut down disk %s" % disk.iv_name, ignore_failures)
    if mark and instance.uuid in lu.cfg.instances and \
            lu.cfg.instances[instance.uuid].disks_active:
        lu.cfg.set_instance_disks_active(instance.uuid, False)
    return ok
