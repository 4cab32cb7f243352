"""Helpers shared by the instance and OS logical units.

* RPC: :func:`call_node` calls one node and turns a failed result into an
  ``OpExecError`` (or ``OpPrereqError`` for checks) naming the node and what
  failed;
* what nodes are sent: :func:`instance_spec` (``instance_start`` /
  ``instance_reboot``: the InstanceSpec fields with filled parameters) and
  :func:`os_instance` (``instance_os_add`` / ``instance_run_rename``: the
  instance's config dict with filled parameters and its disks);
* disks: :func:`generate_disk` builds a new Disk with its ``logical_id``
  (``file``/``sharedfile``: ``[driver, <dir>/<instance>/<uuid>.disk<n>]``,
  ``plain``: ``[vg, <uuid>.disk<n>]``, as Ganeti names them);
* parameter checks (hvparams, beparams, nics) and instance state checks;
* lock bookkeeping an LU needs to create or delete instance locks.

Node names (not UUIDs) are what we hand to the RPC client (its resolver takes
either), so node-side messages name the node the way admins know it.
"""

import ipaddress
import os.path
import re

from ganeti import constants
from ganeti import errors
from ganeti import hypervisor
from ganeti import locking
from ganeti import objects

#: Ganeti's local disk status "okay" (LDS_OKAY) in query results
LDS_OKAY = 1

#: Admin states in which an instance is "online" (Ganeti's INSTANCE_ONLINE)
INSTANCE_ONLINE = frozenset([constants.ADMINST_UP, constants.ADMINST_DOWN])
#: ... and not supposed to run
INSTANCE_NOT_RUNNING = frozenset([constants.ADMINST_DOWN,
                                  constants.ADMINST_OFFLINE])

#: Disk templates this master can create
SUPPORTED_TEMPLATES = frozenset([constants.DT_FILE, constants.DT_SHARED_FILE,
                                 constants.DT_PLAIN, constants.DT_DISKLESS])
#: ... of which these can grow
GROWABLE_TEMPLATES = frozenset([constants.DT_FILE, constants.DT_SHARED_FILE,
                                constants.DT_PLAIN])

_MAC_RE = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
_SIZE_UNITS = {"": 1, "m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024,
               "gib": 1024, "t": 1024 ** 2, "tb": 1024 ** 2, "tib": 1024 ** 2}


# --- RPC --------------------------------------------------------------------

def rpc_client(lu):
    client = lu.ctx.rpc
    if client is None:
        raise errors.OpExecError(
            "node RPC is not available on this master (no cluster"
            " certificate), cannot talk to node daemons")
    return client


def node_name(cfg, node_uuid):
    node = cfg.nodes.get(node_uuid)
    return node.name if node is not None else node_uuid


def _strip_node_prefix(msg, name):
    """The RPC client starts messages with "node <name>: "; we name the node
    ourselves."""
    msg = msg or "unknown error"
    for prefix in ("node %s: " % name,):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    return msg


def rpc_error(result, what, name, prereq=False):
    """The exception for a failed RpcResult: names the node and the action."""
    text = "%s failed on node %s: %s" % (
        what, name, _strip_node_prefix(result.fail_msg, name))
    if prereq:
        return errors.OpPrereqError(text, errors.ECODE_ENVIRON)
    return errors.OpExecError(text)


async def call_node(lu, node_uuid, procedure, args, what, prereq=False,
                    timeout=None):
    """Call ``procedure`` on one node; its payload, or raise naming both."""
    name = node_name(lu.cfg, node_uuid)
    result = await rpc_client(lu).call(name, procedure, args, timeout)
    if not result.success:
        raise rpc_error(result, what, name, prereq)
    return result.payload


async def try_call_node(lu, node_uuid, procedure, args, timeout=None):
    """Call ``procedure`` on one node; the RpcResult, whatever happened."""
    name = node_name(lu.cfg, node_uuid)
    return await rpc_client(lu).call(name, procedure, args, timeout)


# --- locks ------------------------------------------------------------------

def lock_owner(glm, level, name):
    """The owner holding lock ``name`` at ``level`` exclusively, or None.

    Logical units are not told their lock owner; an LU that holds a lock
    exclusively is its only owner, which is how it finds itself (to delete
    an instance lock it holds, for instance).
    """
    lockset = glm.lockset(level)
    full = "%s/%s" % (lockset.name, name)
    for info in lockset.get_info():
        if info["name"] == full and info["mode"] == locking.MODE_EXCLUSIVE \
                and len(info["owners"]) == 1:
            return info["owners"][0]
    return None


async def remove_instance_lock(lu, instance_uuid):
    """Delete the lock of an instance the LU holds exclusively."""
    glm = lu.ctx.glm
    owner = lock_owner(glm, locking.LEVEL_INSTANCE, instance_uuid)
    if owner is None:
        if instance_uuid in glm.lockset(locking.LEVEL_INSTANCE).list_names():
            lu.log_warning("Lock of instance %s is not held exclusively; it"
                           " is left in place", instance_uuid)
        return
    await glm.remove(locking.LEVEL_INSTANCE, [instance_uuid], owner)


# --- state checks -----------------------------------------------------------

def check_node_online(cfg, node_uuid, msg=None):
    node = cfg.get_node(node_uuid)
    if node.offline:
        raise errors.OpPrereqError(
            "Can't use offline node %s%s" % (node.name,
                                            (", " + msg) if msg else ""),
            errors.ECODE_STATE)


def check_node_vm_capable(cfg, node_uuid, role="primary"):
    node = cfg.get_node(node_uuid)
    if node.offline:
        raise errors.OpPrereqError("Cannot use offline %s node '%s'"
                                   % (role, node.name), errors.ECODE_STATE)
    if node.drained:
        raise errors.OpPrereqError("Cannot use drained %s node '%s'"
                                   % (role, node.name), errors.ECODE_STATE)
    if not node.vm_capable:
        raise errors.OpPrereqError("Cannot use non-vm_capable %s node '%s'"
                                   % (role, node.name), errors.ECODE_STATE)


def check_instance_state(instance, states, msg):
    if instance.admin_state not in states:
        raise errors.OpPrereqError(
            "Instance '%s' is marked to be %s, %s"
            % (instance.display_name, instance.admin_state, msg),
            errors.ECODE_STATE)


def check_not_forthcoming(instance, what):
    if instance.forthcoming:
        raise errors.OpPrereqError(
            "Instance '%s' is forthcoming (it exists only in the"
            " configuration), cannot %s" % (instance.display_name, what),
            errors.ECODE_STATE)


async def live_info(lu, instance, prereq=True):
    """What the primary node knows of the instance (None: not there)."""
    return await call_node(lu, instance.primary_node, "instance_info",
                           [instance.name, instance.hypervisor],
                           "Checking instance %s" % instance.name,
                           prereq=prereq)


def is_live(info):
    return bool(info) and info.get("state") in hypervisor.LIVE_STATES


def user_shutdown_allowed(cluster, instance):
    """Whether a guest poweroff counts as a user shutdown for this instance."""
    if instance.hypervisor != constants.HT_KVM:
        return True
    hvp = objects.fill_hvparams(cluster, instance)
    return bool(hvp.get(constants.HV_KVM_USER_SHUTDOWN))


def is_user_down(cluster, instance, info):
    """The node reports the domain kept in the hypervisor's shutdown state."""
    return (bool(info) and info.get("state") == hypervisor.SHUTDOWN
            and user_shutdown_allowed(cluster, instance))


async def check_not_running(lu, instance, msg):
    """Refuse (OpPrereqError) if the primary node runs the instance."""
    if lu.cfg.get_node(instance.primary_node).offline:
        lu.log_warning("Primary node offline, ignoring check that instance"
                       " is down")
        return
    info = await live_info(lu, instance)
    if is_live(info):
        raise errors.OpPrereqError("Instance %s is running, %s"
                                   % (instance.name, msg), errors.ECODE_STATE)


# --- parameters -------------------------------------------------------------

def parse_size(value, field):
    """A size in MiB from an int or a string with an optional unit."""
    if isinstance(value, bool):
        raise errors.OpPrereqError("%s: expected a size, got %r"
                                   % (field, value), errors.ECODE_INVAL)
    if isinstance(value, int):
        size = value
    elif isinstance(value, float) and value == int(value):
        size = int(value)
    else:
        m = _SIZE_RE.match(str(value))
        factor = _SIZE_UNITS.get(m.group(2).lower()) if m else None
        if m is None or factor is None:
            raise errors.OpPrereqError(
                "%s: invalid size %r (a number of MiB, or with a unit M, G"
                " or T)" % (field, value), errors.ECODE_INVAL)
        size = float(m.group(1)) * factor
        size = int(size) if size == int(size) else int(size) + 1
    if size <= 0:
        raise errors.OpPrereqError("%s: the size must be positive, got %r"
                                   % (field, value), errors.ECODE_INVAL)
    return size


def update_params(current, changes):
    """``current`` updated by ``changes``; "default" removes a key."""
    result = dict(current or {})
    for key, value in (changes or {}).items():
        if value == constants.VALUE_DEFAULT:
            result.pop(key, None)
        else:
            result[key] = value
    return result


_BE_INT = (constants.BE_MAXMEM, constants.BE_MINMEM, constants.BE_VCPUS,
           constants.BE_SPINDLE_USE)
_BE_BOOL = (constants.BE_AUTO_BALANCE, constants.BE_ALWAYS_FAILOVER)


def check_beparams(beparams, field="beparams"):
    """Normalised backend parameters (memory -> maxmem/minmem, sizes in
    MiB); OpPrereqError naming the parameter otherwise."""
    be = dict(beparams or {})
    unknown = sorted(set(be) - set(constants.BEC_DEFAULTS)
                     - {constants.BE_MEMORY})
    if unknown:
        raise errors.OpPrereqError(
            "%s: unknown parameter%s %s (known: %s)"
            % (field, "s" if len(unknown) > 1 else "", ", ".join(unknown),
               ", ".join(sorted(constants.BEC_DEFAULTS))), errors.ECODE_INVAL)
    if constants.BE_MEMORY in be:
        mem = be.pop(constants.BE_MEMORY)
        be.setdefault(constants.BE_MAXMEM, mem)
        be.setdefault(constants.BE_MINMEM, mem)
    for key, value in list(be.items()):
        if value == constants.VALUE_DEFAULT:
            continue
        if key in (constants.BE_MAXMEM, constants.BE_MINMEM):
            be[key] = parse_size(value, "%s/%s" % (field, key))
        elif key in _BE_INT:
            if isinstance(value, bool) or not isinstance(value, int) \
                    or value < 1:
                raise errors.OpPrereqError(
                    "%s/%s: expected a positive integer, got %r"
                    % (field, key, value), errors.ECODE_INVAL)
        elif key in _BE_BOOL and not isinstance(value, bool):
            raise errors.OpPrereqError("%s/%s: expected true or false, got %r"
                                       % (field, key, value),
                                       errors.ECODE_INVAL)
    return be


def check_memory_range(filled_be, field="beparams"):
    if filled_be[constants.BE_MINMEM] > filled_be[constants.BE_MAXMEM]:
        raise errors.OpPrereqError(
            "%s: minimum memory (%s MiB) is greater than maximum memory (%s"
            " MiB)" % (field, filled_be[constants.BE_MINMEM],
                       filled_be[constants.BE_MAXMEM]), errors.ECODE_INVAL)


def check_hypervisor_enabled(cluster, hv_name):
    if hv_name not in cluster.enabled_hypervisors:
        raise errors.OpPrereqError(
            "hypervisor: '%s' is not enabled in the cluster (enabled: %s)"
            % (hv_name, ", ".join(cluster.enabled_hypervisors)),
            errors.ECODE_STATE)


def full_hvparams(cluster, instance, overrides=None):
    """What the hypervisor gets: filled instance parameters, the cluster's
    global ones, then ``overrides`` (a start with other parameters)."""
    result = objects.fill_hvparams(cluster, instance)
    result.update(objects.cluster_global_hvparams(cluster,
                                                  instance.hypervisor))
    result.update(overrides or {})
    return result


def check_hvparams(cluster, instance, field="hvparams", overrides=None,
                   log_warning=None):
    """Check an instance's hypervisor parameters as its hypervisor would.

    Global parameters are refused (they belong to the cluster); the filled
    set goes through the driver's syntax check.
    """
    for params in (instance.hvparams, overrides):
        bad = sorted(set(params or {}) & constants.HVC_GLOBALS)
        if bad:
            raise errors.OpPrereqError(
                "%s: %s can only be set at cluster level (global hypervisor"
                " parameter%s)" % (field, ", ".join(bad),
                                   "s" if len(bad) > 1 else ""),
                errors.ECODE_INVAL)
    hv_name = instance.hypervisor
    filled = full_hvparams(cluster, instance, overrides)
    try:
        hypervisor.check_parameter_syntax(hv_name, filled)
    except errors.HypervisorError:
        if log_warning is not None:
            log_warning("No %s driver on the master; hypervisor parameters"
                        " are checked on the node only" % hv_name)
    except errors.ParameterError as err:
        raise errors.OpPrereqError("%s: %s" % (field, err.args[-1]),
                                   errors.ECODE_INVAL)
    return filled


def _check_ip(ip, field):
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        raise errors.OpPrereqError("%s: '%s' is not a valid IP address"
                                   % (field, ip), errors.ECODE_INVAL)


def build_nic(cfg, params, field, group=None, used_macs=(), old=None):
    """A NIC object from OP_INSTANCE_CREATE / SET_PARAMS nic parameters.

    ``old`` is the NIC being modified (its values are kept unless given).
    MACs "auto"/"generate" get a fresh cluster MAC not in ``used_macs``.
    """
    params = dict(params or {})
    nic = old.copy() if old is not None else objects.NIC(
        uuid=objects.new_uuid())
    if "bridge" in params:
        bridge = params.pop("bridge")
        if params.get(constants.NIC_LINK) not in (None, bridge):
            raise errors.OpPrereqError(
                "%s: bridge and link are the same setting; give only one"
                % field, errors.ECODE_INVAL)
        params[constants.NIC_LINK] = bridge
    if "name" in params:
        nic.name = params["name"] or None
    if "network" in params:
        net = params["network"]
        if net in (None, "", "none"):
            nic.network = None
        else:
            try:
                nic.network = cfg.get_network(net).uuid
            except errors.OpPrereqError:
                raise errors.OpPrereqError("%s: network '%s' does not exist"
                                           % (field, net), errors.ECODE_NOENT)
        if nic.network and (params.get(constants.NIC_MODE)
                            or params.get(constants.NIC_LINK)):
            raise errors.OpPrereqError(
                "%s: with a network, mode and link come from the network's"
                " settings in the node group; do not give them" % field,
                errors.ECODE_INVAL)
    nicparams = dict(nic.nicparams or {})
    for key in (constants.NIC_MODE, constants.NIC_LINK, constants.NIC_VLAN):
        if key in params:
            value = params[key]
            if value in (None, constants.VALUE_DEFAULT):
                nicparams.pop(key, None)
            else:
                nicparams[key] = value
    if nic.network:
        nicparams.pop(constants.NIC_MODE, None)
        nicparams.pop(constants.NIC_LINK, None)
    nic.nicparams = nicparams
    if "ip" in params:
        ip = params["ip"]
        if ip in (None, "", "none"):
            nic.ip = None
        elif ip == constants.NIC_IP_POOL:
            raise errors.OpPrereqError(
                "%s: ip 'pool' (an address from the network's pool) is not"
                " supported yet; give an address" % field, errors.ECODE_INVAL)
        else:
            _check_ip(ip, field + "/ip")
            nic.ip = ip
    mac = params.get("mac")
    if mac is None and old is None:
        mac = constants.VALUE_AUTO
    if mac in (constants.VALUE_AUTO, "generate"):
        while True:
            candidate = cfg.generate_mac()
            if candidate not in used_macs:
                break
        nic.mac = candidate
    elif mac is not None:
        mac = mac.lower()
        if not _MAC_RE.match(mac):
            raise errors.OpPrereqError("%s: '%s' is not a valid MAC address"
                                       % (field, params["mac"]),
                                       errors.ECODE_INVAL)
        if mac in used_macs:
            raise errors.OpPrereqError("%s: MAC address %s is already in use"
                                       % (field, mac), errors.ECODE_NOTUNIQUE)
        nic.mac = mac
    filled = objects.fill_nicparams(cfg.cluster, nic, group)
    objects.check_nic(nic, filled, where=field)
    return nic


def used_macs(cfg, except_instance=None):
    return {nic.mac for inst in cfg.instances.values()
            if inst.uuid != except_instance for nic in inst.nics if nic.mac}


def check_unique_ips(cfg, nics, except_instance=None):
    """Ganeti refuses an IP another instance's NIC on the same network has."""
    taken = {}
    for inst in cfg.instances.values():
        if inst.uuid == except_instance:
            continue
        for nic in inst.nics:
            if nic.ip and nic.network:
                taken[(nic.network, nic.ip)] = inst.display_name
    for idx, nic in enumerate(nics):
        owner = taken.get((nic.network, nic.ip))
        if nic.ip and nic.network and owner:
            raise errors.OpPrereqError(
                "nics/%d: IP address %s is already in use by instance %s"
                % (idx, nic.ip, owner), errors.ECODE_NOTUNIQUE)


# --- disks ------------------------------------------------------------------

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
    size = parse_size(params["size"], where + "/size")
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


def disk_nodes(instance, disk):
    return list(disk.nodes or instance.all_nodes)


async def create_disk(lu, instance, disk, node_uuid):
    """blockdev_create one disk on one node; returns its path."""
    return await call_node(
        lu, node_uuid, "blockdev_create",
        [disk.to_dict(), disk.size, instance.name or instance.uuid,
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


async def remove_disks(lu, instance, pairs, ignore_failures=True):
    """blockdev_remove each (disk, node); failures are warnings (or, with
    ``ignore_failures`` false, all tried, then an OpExecError)."""
    failed = []
    for disk, node_uuid in pairs:
        if disk.dev_type == constants.DT_DISKLESS:
            continue
        result = await try_call_node(lu, node_uuid, "blockdev_remove",
                                     [disk.to_dict()])
        if not result.success:
            name = node_name(lu.cfg, node_uuid)
            msg = ("Could not remove disk %s of instance %s on node %s: %s"
                   % (disk.iv_name, instance.display_name, name,
                      _strip_node_prefix(result.fail_msg, name)))
            lu.log_warning(msg)
            failed.append(msg)
    if failed and not ignore_failures:
        raise errors.OpExecError("; ".join(failed))
    return not failed


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
            result = await try_call_node(
                lu, node_uuid, "blockdev_assemble",
                [disk.to_dict(), instance.name, primary,
                 instance.disks.index(disk.uuid)
                 if disk.uuid in instance.disks else idx])
            if not result.success:
                if ignore_failures:
                    lu.log_warning("Could not activate disk %s on node %s: %s"
                                   % (disk.iv_name,
                                      node_name(cfg, node_uuid),
                                      result.fail_msg))
                    continue
                await shutdown_disks(lu, instance, done, ignore_failures=True)
                raise rpc_error(result, "Activating disk %s of instance %s"
                                % (disk.iv_name, instance.name),
                                node_name(cfg, node_uuid))
            done.append((disk, node_uuid))
            if primary:
                info.append((node_name(cfg, node_uuid), disk.iv_name,
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
    failed = []
    for disk, node_uuid in pairs:
        if disk.dev_type == constants.DT_DISKLESS:
            continue
        result = await try_call_node(lu, node_uuid, "blockdev_shutdown",
                                     [disk.to_dict()])
        if not result.success:
            name = node_name(lu.cfg, node_uuid)
            msg = ("Could not shut down disk %s on node %s: %s"
                   % (disk.iv_name, name,
                      _strip_node_prefix(result.fail_msg, name)))
            lu.log_warning(msg)
            failed.append(msg)
    if failed and not ignore_failures:
        raise errors.OpExecError("; ".join(failed))
    if mark and instance.uuid in lu.cfg.instances and \
            lu.cfg.instances[instance.uuid].disks_active:
        lu.cfg.set_instance_disks_active(instance.uuid, False)
    return not failed


# --- what nodes get ---------------------------------------------------------

def instance_spec(cfg, instance, hvparams=None, beparams=None, disks=None):
    """The ``instance_start``/``instance_reboot`` specification.

    InstanceSpec fields + ``hypervisor``: filled hvparams (with the cluster's
    global ones) and beparams, ``hvparams``/``beparams`` overriding them
    for this start only; disks as their config dicts (the node assembles
    them); NICs with their filled mode/link/vlan.
    """
    cluster = cfg.cluster
    group = None
    if instance.primary_node in cfg.nodes:
        group = cfg.nodegroups.get(cfg.nodes[instance.primary_node].group)
    be = objects.fill_beparams(cluster, instance)
    be.update(beparams or {})
    if disks is None:
        disks = cfg.instance_disks(instance)
    nics = []
    for nic in instance.nics:
        filled = objects.fill_nicparams(cluster, nic, group)
        nics.append({"mac": nic.mac, "ip": nic.ip,
                     "mode": filled.get(constants.NIC_MODE),
                     "link": filled.get(constants.NIC_LINK) or "",
                     "vlan": filled.get(constants.NIC_VLAN) or ""})
    return {
        "name": instance.name,
        "uuid": instance.uuid,
        "hypervisor": instance.hypervisor,
        "hvparams": full_hvparams(cluster, instance, hvparams),
        "beparams": be,
        "disks": [d.to_dict() for d in disks
                  if d.dev_type != constants.DT_DISKLESS],
        "nics": nics,
        "network_port": instance.network_port,
    }


def os_instance(cfg, instance, os_name=None, osparams=None, disks=None):
    """The instance dict of ``instance_os_add``/``instance_run_rename``:
    its config dict with filled parameters, node names and its disks."""
    cluster = cfg.cluster
    group = None
    if instance.primary_node in cfg.nodes:
        group = cfg.nodegroups.get(cfg.nodes[instance.primary_node].group)
    data = instance.to_dict()
    if os_name is not None:
        data["os"] = os_name
    candidate = instance.copy()
    candidate.os = data.get("os")
    if osparams is not None:
        candidate.osparams = osparams
    data["hvparams"] = full_hvparams(cluster, instance)
    data["beparams"] = objects.fill_beparams(cluster, instance)
    data["osparams"] = objects.fill_osparams(cluster, candidate)
    data.pop("osparams_private", None)
    nics = []
    for nic in instance.nics:
        entry = nic.to_dict()
        entry["nicparams"] = objects.fill_nicparams(cluster, nic, group)
        nics.append(entry)
    data["nics"] = nics
    data["primary_node"] = node_name(cfg, instance.primary_node)
    data["secondary_nodes"] = [node_name(cfg, n)
                               for n in instance.secondary_nodes]
    if disks is None:
        disks = cfg.instance_disks(instance)
    data["disks_info"] = [d.to_dict() for d in disks]
    data.pop("disks", None)
    data.pop("tags", None)
    return data


async def check_os_on_node(lu, node_uuid, os_name, osparams,
                           force_variant=False, field="os_type"):
    """Ask the node whether ``os_name`` (os+variant) is valid and accepts
    the (filled) ``osparams``; OpPrereqError naming the node if not."""
    name = node_name(lu.cfg, node_uuid)
    result = await try_call_node(
        lu, node_uuid, "os_validate",
        [True, os_name, ["parameters"], osparams, force_variant])
    if not result.success:
        raise errors.OpPrereqError(
            "%s: OS '%s' cannot be used on node %s: %s"
            % (field, os_name, name,
               _strip_node_prefix(result.fail_msg, name)),
            errors.ECODE_INVAL)


def check_os_name(os_name, field="os_type"):
    if not os_name or not isinstance(os_name, str):
        raise errors.OpPrereqError("%s: an OS (os or os+variant) is required"
                                   % field, errors.ECODE_INVAL)
    base, _, variant = os_name.partition("+")
    if not base or ("+" in os_name and not variant):
        raise errors.OpPrereqError("%s: '%s' is not an OS name (os or"
                                   " os+variant)" % (field, os_name),
                                   errors.ECODE_INVAL)


def check_os_allowed(cluster, os_name, field="os_type"):
    base = os_name.partition("+")[0]
    if base in (cluster.blacklisted_os or []) or \
            os_name in (cluster.blacklisted_os or []):
        raise errors.OpPrereqError("%s: guest OS '%s' is not allowed for"
                                   " installation (blacklisted)"
                                   % (field, os_name), errors.ECODE_STATE)


async def check_free_memory(lu, node_uuid, hv_name, needed, what):
    """Refuse if the node's hypervisor reports less free memory."""
    payload = await call_node(lu, node_uuid, "node_info",
                              [[], [[hv_name, {}]]],
                              "Querying free memory", prereq=True)
    hvs = (payload or {}).get("hypervisors") or []
    free = hvs[0].get("memory_free") if hvs else None
    if not isinstance(free, int):
        raise errors.OpPrereqError(
            "Can't compute free memory on node %s, result was %r"
            % (node_name(lu.cfg, node_uuid), free), errors.ECODE_ENVIRON)
    if needed > free:
        raise errors.OpPrereqError(
            "Not enough memory on node %s for %s: needed %s MiB, available"
            " %s MiB" % (node_name(lu.cfg, node_uuid), what, needed, free),
            errors.ECODE_NORES)
