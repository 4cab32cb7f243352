"""DRBD disks (the ``drbd`` template), written against DRBD 9's tools.

DRBD does NOT run on the machines this project is developed on (no kernel
module).  This driver is therefore written against the interface of
drbd-utils 9 (``drbdsetup``, ``drbdmeta``; the command sequences are those
``drbdadm --dry-run`` prints for the same resource) and tested against
recorded ``drbdsetup status --json`` outputs and ``drbdadm dump`` checks of
the configuration it generates (``tests/test_drbd.py``).

The disk's config, as Ganeti stores it:

* ``logical_id``: ``[primary node, secondary node, port, primary minor,
  secondary minor, shared secret]``;
* ``children``: ``[data LV disk, metadata LV disk]`` (``plain`` disks);
* ``dynamic_params`` (added by the master for the node it calls, like
  Ganeti's): ``local_ip``, ``remote_ip``, ``local_minor``,
  ``remote_minor``, ``local_node_id`` (0 on the primary, 1 on the
  secondary), ``local_name``, ``remote_name`` and ``primary`` (whether this
  node should hold the primary role);
* ``params``: the disk parameters in effect (the master fills them from
  the cluster's and the group's ``diskparams``): barriers, custom options,
  protocol and resync speed become drbdsetup options (see
  :func:`disk_options`, :func:`sync_options`); the children's ``params``
  carry their ``stripes`` (``data-stripes``, ``meta-stripes``).

A resource is named ``resource<local minor>`` and its device is
``/dev/drbd<local minor>``.
"""

import json
import shlex

import attr
from twisted.internet import defer

from ganeti import constants
from ganeti import errors
from ganeti.storage import (DISK_DEGRADED, DISK_MISSING, DISK_OK,
                            BlockDevice, LDS_FAULTY, LDS_OKAY, LDS_SYNC,
                            LDS_UNKNOWN, check_size)

__all__ = ["DrbdDevice", "DrbdParams", "ResourceStatus", "parse_status",
           "disk_status", "resource_name", "resource_config",
           "META_SIZE", "DRBDSETUP", "DRBDMETA", "disk_options", "sync_options",
           "check_barriers"]

DRBDSETUP = "drbdsetup"
DRBDMETA = "drbdmeta"
#: metadata LV size in MiB (Ganeti's DRBD_META_SIZE)
META_SIZE = 128
#: how many peers the metadata is made for (one: Ganeti's two-node mirror)
MAX_PEERS = 1
#: drbdsetup's exit code for an unknown resource
EXIT_NO_RESOURCE = 10

# Replication states of a peer device that mean a resync is going on.
SYNC_STATES = frozenset(["SyncSource", "SyncTarget", "PausedSyncS",
                         "PausedSyncT", "StartingSyncS", "StartingSyncT",
                         "WFBitMapS", "WFBitMapT", "WFSyncUUID"])
# Local disk states in which this node has no usable data.
NO_DATA_STATES = frozenset(["Diskless", "Failed", "Detaching", "Attaching",
                            "DUnknown"])


def resource_name(minor):
    return "resource%d" % minor


def _address(ip, port):
    family = "ipv6" if ":" in ip else "ipv4"
    host = "[%s]" % ip if family == "ipv6" else ip
    return "%s:%s:%d" % (family, host, port)


@attr.s(frozen=True)
class DrbdParams(object):
    """What a node needs to run its side of one DRBD disk."""
    port = attr.ib()
    secret = attr.ib()
    local_ip = attr.ib()
    remote_ip = attr.ib()
    local_minor = attr.ib()
    remote_minor = attr.ib()
    local_node_id = attr.ib(default=0)
    local_name = attr.ib(default="local")
    remote_name = attr.ib(default="peer")
    primary = attr.ib(default=False)
    protocol = attr.ib(default="C")
    #: options of ``drbdsetup attach`` from the disk parameters (barriers,
    #: disk-custom)
    disk_options = attr.ib(default=(), converter=tuple)
    #: options of ``drbdsetup new-peer`` from net-custom
    net_options = attr.ib(default=(), converter=tuple)
    #: options of ``drbdsetup peer-device-options`` (resync speed)
    sync_options = attr.ib(default=(), converter=tuple)

    @property
    def remote_node_id(self):
        return 1 - self.local_node_id

    @property
    def resource(self):
        return resource_name(self.local_minor)

    @property
    def device(self):
        return "/dev/drbd%d" % self.local_minor


def _param_error(msg):
    return errors.ParameterError("disk.logical_id", "disk.logical_id: " + msg)


def params_from_disk(disk):
    lid = disk.get("logical_id")
    if not isinstance(lid, (list, tuple)) or len(lid) != 6:
        raise _param_error("a drbd disk's logical_id must be [primary node,"
                           " secondary node, port, primary minor, secondary"
                           " minor, secret], not %r" % (lid,))
    dyn = disk.get("dynamic_params")
    if not isinstance(dyn, dict):
        raise errors.ParameterError(
            "disk.dynamic_params", "disk.dynamic_params: a drbd disk needs"
            " the addresses and minors of both nodes (given by the master)")
    missing = [k for k in ("local_ip", "remote_ip", "local_minor",
                           "remote_minor") if dyn.get(k) is None]
    if missing:
        raise errors.ParameterError(
            "disk.dynamic_params", "disk.dynamic_params lacks %s"
            % ", ".join(missing))
    port, secret = lid[2], lid[5]
    if not isinstance(port, int) or not 0 < port < 65536:
        raise _param_error("port %r is not a port number" % (port,))
    for key in ("local_minor", "remote_minor"):
        if not isinstance(dyn[key], int) or dyn[key] < 0:
            raise errors.ParameterError(
                "disk.dynamic_params", "disk.dynamic_params.%s must be a"
                " minor number, not %r" % (key, dyn[key]))
    params = disk.get("params") or {}
    if not isinstance(params, dict):
        raise errors.ParameterError(
            "disk.params", "disk.params must be a dict, not %r" % (params,))
    return DrbdParams(
        port=port, secret=secret or "", local_ip=dyn["local_ip"],
        remote_ip=dyn["remote_ip"], local_minor=dyn["local_minor"],
        remote_minor=dyn["remote_minor"],
        local_node_id=int(dyn.get("local_node_id", 0)),
        local_name=dyn.get("local_name") or "local",
        remote_name=dyn.get("remote_name") or "peer",
        primary=bool(dyn.get("primary")),
        protocol=_protocol(params),
        disk_options=disk_options(params),
        net_options=_custom(params, constants.DRBD_NET_CUSTOM),
        sync_options=sync_options(params))


# ---------------------------------------------------------------------------
# Disk parameters -> drbdsetup options.  Only the parameters the disk dict
# carries are turned into options (the master sends all of them, filled
# from the cluster and group diskparams); without one DRBD's default holds.

def _dp_error(key, msg):
    return errors.ParameterError("disk.params",
                                 "disk.params/%s: %s" % (key, msg))


def _int_param(params, key, minimum=0):
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int) or \
            value < minimum:
        raise _dp_error(key, "must be an integer of at least %d, not %r"
                        % (minimum, value))
    return value


def _bool_param(params, key):
    value = params[key]
    if not isinstance(value, bool):
        raise _dp_error(key, "must be true or false, not %r" % (value,))
    return value


def _protocol(params):
    value = params.get(constants.DRBD_PROTOCOL, "C")
    if value not in constants.DRBD_VALID_PROTOCOLS:
        raise _dp_error(constants.DRBD_PROTOCOL, "%r is not a DRBD"
                        " replication protocol (one of %s)"
                        % (value, ", ".join(sorted(
                            constants.DRBD_VALID_PROTOCOLS))))
    return value


def _custom(params, key):
    value = params.get(key) or ""
    if not isinstance(value, str):
        raise _dp_error(key, "must be a string of drbdsetup options, not %r"
                        % (value,))
    try:
        words = shlex.split(value)
    except ValueError as err:
        raise _dp_error(key, "cannot split %r into options: %s"
                        % (value, err))
    # "--name value" as drbdadm writes it: "--name=value"
    options = []
    for word in words:
        if options and options[-1].startswith("--") and \
                "=" not in options[-1] and not word.startswith("-"):
            options[-1] += "=" + word
        else:
            options.append(word)
    return tuple(options)


def check_barriers(value):
    """The set of barrier letters of a ``disk-barriers`` value: "n" (none
    disabled) or a combination of b (disk barriers), d (drain) and f
    (flushes); ParameterError otherwise."""
    letters = set(value) if isinstance(value, str) else None
    if not value or letters is None or \
            not letters <= BARRIER_LETTERS or \
            (constants.DRBD_B_NONE in letters and len(letters) > 1):
        raise _dp_error(constants.DRBD_DISK_BARRIERS, "%r is not 'n' or a"
                        " combination of b (disk barriers), d (drain) and f"
                        " (flushes)" % (value,))
    return letters - {constants.DRBD_B_NONE}


BARRIER_LETTERS = frozenset([constants.DRBD_B_DISK_BARRIERS,
                             constants.DRBD_B_DISK_DRAIN,
                             constants.DRBD_B_DISK_FLUSH,
                             constants.DRBD_B_NONE])


def disk_options(params):
    """``drbdsetup attach`` options: what ``disk-barriers`` disables,
    ``meta-barriers`` (no metadata flushes), then ``disk-custom``.  The
    order is the one ``drbdadm`` uses for the same disk section."""
    options = []
    if constants.DRBD_META_BARRIERS in params and \
            _bool_param(params, constants.DRBD_META_BARRIERS):
        options.append("--md-flushes=no")
    if constants.DRBD_DISK_BARRIERS in params:
        disabled = check_barriers(params[constants.DRBD_DISK_BARRIERS])
        for letter, option in ((constants.DRBD_B_DISK_DRAIN, "disk-drain"),
                               (constants.DRBD_B_DISK_FLUSH, "disk-flushes"),
                               (constants.DRBD_B_DISK_BARRIERS,
                                "disk-barrier")):
            if letter in disabled:
                options.append("--%s=no" % option)
    return tuple(options) + _custom(params, constants.DRBD_DISK_CUSTOM)


#: the dynamic resync controller's parameters, in drbdadm's order
_DYNAMIC_KEYS = (constants.DRBD_PLAN_AHEAD, constants.DRBD_FILL_TARGET,
                 constants.DRBD_DELAY_TARGET, constants.DRBD_MAX_RATE,
                 constants.DRBD_MIN_RATE)


def sync_options(params):
    """``drbdsetup peer-device-options`` options for the resync speed.

    With ``dynamic-resync`` the dynamic controller's ``c-*`` parameters
    (``c-plan-ahead`` must then be above 0: 0 switches the controller off);
    without it the fixed ``resync-rate`` (KiB/s), with ``c-plan-ahead=0``
    so that DRBD 9, whose controller is on by default, keeps to it."""
    dynamic = constants.DRBD_DYNAMIC_RESYNC in params and \
        _bool_param(params, constants.DRBD_DYNAMIC_RESYNC)
    if dynamic:
        options = []
        for key in _DYNAMIC_KEYS:
            if key in params:
                options.append("--%s=%d" % (key, _int_param(params, key)))
        if params.get(constants.DRBD_PLAN_AHEAD) == 0:
            raise _dp_error(constants.DRBD_PLAN_AHEAD, "0 switches the"
                            " dynamic resync speed controller off; set"
                            " dynamic-resync to false instead")
        return tuple(options)
    if constants.DRBD_RESYNC_RATE not in params:
        return ()
    return ("--resync-rate=%d" % _int_param(params,
                                             constants.DRBD_RESYNC_RATE, 1),
            "--c-plan-ahead=0")


# ---------------------------------------------------------------------------
# Commands (what ``drbdadm -d`` prints for the equivalent resource file)

def up_commands(p, data_dev, meta_dev):
    """Bring the resource up: resource, minor, peer, path, disk, connect."""
    return [
        [DRBDSETUP, "new-resource", p.resource, str(p.local_node_id)],
        [DRBDSETUP, "new-minor", p.resource, str(p.local_minor), "0"],
    ] + net_commands(p) + [
        [DRBDMETA, str(p.local_minor), "v09", meta_dev, "flex-external",
         "apply-al"],
        [DRBDSETUP, "attach", str(p.local_minor), data_dev, meta_dev,
         "flexible"] + list(p.disk_options),
        [DRBDSETUP, "connect", p.resource, str(p.remote_node_id)],
    ]


def net_commands(p, multimaster=False):
    """The peer and the path to it (not yet connected)."""
    peer = [DRBDSETUP, "new-peer", p.resource, str(p.remote_node_id),
            "--_name=%s" % p.remote_name] + list(p.net_options)
    if p.secret:
        peer += ["--shared-secret=%s" % p.secret, "--cram-hmac-alg=sha1"]
    peer.append("--protocol=%s" % p.protocol)
    if multimaster:
        peer.append("--allow-two-primaries=yes")
    commands = [peer,
                [DRBDSETUP, "new-path", p.resource, str(p.remote_node_id),
                 _address(p.local_ip, p.port), _address(p.remote_ip,
                                                        p.port)]]
    if p.sync_options:
        commands.append([DRBDSETUP, "peer-device-options", p.resource,
                         str(p.remote_node_id), "0"] + list(p.sync_options))
    return commands


def create_md_command(p, meta_dev):
    return [DRBDMETA, "--force", str(p.local_minor), "v09", meta_dev,
            "flex-external", "create-md", str(MAX_PEERS)]


def resource_config(p, local_host, remote_host, data_dev, meta_dev,
                    remote_data_dev=None, remote_meta_dev=None):
    """The resource as a drbd.conf section (for ``drbdadm dump`` checks and
    for admins who want to look at it with DRBD's own tools)."""
    net = ["    protocol %s;" % p.protocol]
    if p.secret:
        net += ["    cram-hmac-alg sha1;",
                "    shared-secret \"%s\";" % p.secret]
    # drbdadm hands net and disk options to drbdsetup in the reverse order
    # of the file; written reversed, its commands equal ours
    net += _conf_lines(p.net_options)[::-1]
    disk = _conf_lines(p.disk_options)[::-1] + _conf_lines(p.sync_options)

    def host(name, node_id, minor, disk, meta, ip):
        family = "ipv6" if ":" in ip else "ipv4"
        addr = "[%s]" % ip if family == "ipv6" else ip
        return ["  on %s {" % name,
                "    node-id %d;" % node_id,
                "    device /dev/drbd%d minor %d;" % (minor, minor),
                "    disk %s;" % disk,
                "    meta-disk %s;" % meta,
                "    address %s %s:%d;" % (family, addr, p.port),
                "  }"]
    lines = ["resource %s {" % p.resource, "  net {"] + net + ["  }"]
    if disk:
        # drbd.conf has the resync speed in the disk section too
        lines += ["  disk {"] + disk + ["  }"]
    lines += host(local_host, p.local_node_id, p.local_minor, data_dev,
                  meta_dev, p.local_ip)
    lines += host(remote_host, p.remote_node_id, p.remote_minor,
                  remote_data_dev or data_dev, remote_meta_dev or meta_dev,
                  p.remote_ip)
    lines += ["  connection-mesh { hosts %s %s; }" % (local_host,
                                                      remote_host), "}"]
    return "\n".join(lines) + "\n"


def _conf_lines(options):
    """drbd.conf lines ("    name value;") of drbdsetup options written
    ``--name=value`` or ``--name value``."""
    lines = []
    options = list(options)
    while options:
        option = options.pop(0)
        name, sep, value = option.lstrip("-").partition("=")
        if not sep:
            value = options.pop(0) if options and \
                not options[0].startswith("-") else "yes"
        lines.append("    %s %s;" % (name, value))
    return lines


# ---------------------------------------------------------------------------
# Status: ``drbdsetup status --json``

@attr.s(frozen=True)
class PeerDevice(object):
    volume = attr.ib()
    replication_state = attr.ib()
    peer_disk_state = attr.ib()
    out_of_sync = attr.ib(default=0)      # KiB
    percent_in_sync = attr.ib(default=None)
    percent_resync_done = attr.ib(default=None)
    eta = attr.ib(default=None)           # seconds


@attr.s(frozen=True)
class Connection(object):
    peer_node_id = attr.ib()
    name = attr.ib()
    connection_state = attr.ib()
    peer_role = attr.ib()
    peer_devices = attr.ib(factory=tuple)


@attr.s(frozen=True)
class Device(object):
    volume = attr.ib()
    minor = attr.ib()
    disk_state = attr.ib()
    size = attr.ib(default=None)          # KiB


@attr.s(frozen=True)
class ResourceStatus(object):
    name = attr.ib()
    node_id = attr.ib()
    role = attr.ib()
    suspended = attr.ib(default=False)
    devices = attr.ib(factory=tuple)
    connections = attr.ib(factory=tuple)


def _num(value):
    return value if isinstance(value, (int, float)) and \
        not isinstance(value, bool) else None


def parse_status(text):
    """The resources in ``drbdsetup status --json`` output."""
    try:
        data = json.loads(text.decode("utf-8") if isinstance(text, bytes)
                          else text)
        resources = []
        for res in data:
            devices = tuple(Device(volume=d.get("volume", 0),
                                   minor=d.get("minor"),
                                   disk_state=d.get("disk-state"),
                                   size=_num(d.get("size")))
                            for d in res.get("devices", []))
            conns = []
            for c in res.get("connections", []):
                peers = tuple(PeerDevice(
                    volume=pd.get("volume", 0),
                    replication_state=pd.get("replication-state"),
                    peer_disk_state=pd.get("peer-disk-state"),
                    out_of_sync=_num(pd.get("out-of-sync")) or 0,
                    percent_in_sync=_num(pd.get("percent-in-sync")),
                    percent_resync_done=_num(pd.get("percent-resync-done")),
                    eta=_num(pd.get("estimated-seconds-to-finish")))
                    for pd in c.get("peer_devices", []))
                conns.append(Connection(
                    peer_node_id=c.get("peer-node-id"), name=c.get("name"),
                    connection_state=c.get("connection-state"),
                    peer_role=c.get("peer-role"), peer_devices=peers))
            resources.append(ResourceStatus(
                name=res["name"], node_id=res.get("node-id"),
                role=res.get("role"), suspended=bool(res.get("suspended")),
                devices=devices, connections=tuple(conns)))
        return resources
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise errors.BlockDeviceError("cannot parse drbdsetup status --json"
                                      " output: %s" % err)


def disk_status(res, path=None):
    """The disk status (``blockdev_status`` entry) of one resource's
    volume 0: ok, degraded (no redundancy, resyncing) or missing (this node
    has no usable data: diskless, failed)."""
    dev = res.devices[0] if res.devices else None
    local = dev.disk_state if dev else "Diskless"
    problems = []
    sync_percent = eta = None
    syncing = False
    peer_ok = False
    for conn in res.connections:
        if conn.connection_state != "Connected":
            problems.append("peer %s is %s" % (conn.name,
                                               conn.connection_state))
            continue
        for pd in conn.peer_devices:
            if pd.replication_state in SYNC_STATES:
                syncing = True
                done = pd.percent_resync_done
                if done is None:
                    done = pd.percent_in_sync
                if done is not None:
                    sync_percent = done if sync_percent is None else \
                        min(sync_percent, done)
                if pd.eta is not None and pd.eta != 987654321:
                    eta = pd.eta if eta is None else max(eta, pd.eta)
                problems.append("resync with %s (%s)" %
                                (conn.name, pd.replication_state))
            elif pd.peer_disk_state != "UpToDate":
                problems.append("peer %s disk is %s" % (conn.name,
                                                        pd.peer_disk_state))
            else:
                peer_ok = True
    if not res.connections:
        problems.append("no peer configured")
    if local in NO_DATA_STATES:
        ldisk, status = LDS_FAULTY, DISK_MISSING
        problems.insert(0, "local disk is %s" % local)
    elif local == "UpToDate":
        ldisk = LDS_OKAY
        status = DISK_OK if peer_ok and not problems else DISK_DEGRADED
    elif syncing and local == "Inconsistent":
        ldisk, status = LDS_SYNC, DISK_DEGRADED
        problems.insert(0, "local disk is %s" % local)
    else:
        # Outdated, Inconsistent without a resync, Consistent, Negotiating
        ldisk, status = LDS_FAULTY, DISK_DEGRADED
        problems.insert(0, "local disk is %s" % local)
    if res.suspended:
        problems.append("I/O suspended")
        status = DISK_DEGRADED if status == DISK_OK else status
    return {"path": path, "status": status,
            "degraded": status != DISK_OK,
            "sync_percent": sync_percent if syncing else None,
            "estimated_time": int(eta) if syncing and eta is not None
            else None,
            "ldisk": ldisk, "details": "; ".join(problems) or None,
            "role": res.role}


# ---------------------------------------------------------------------------

class DrbdDevice(BlockDevice):

    dev_type = constants.DT_DRBD8
    format = "raw"

    def __init__(self, params, data, meta, ctx):
        self.params = params
        self.data = data        # lvm.LogicalVolume
        self.meta = meta
        self._ctx = ctx

    def __repr__(self):
        return "<DrbdDevice %s (%s)>" % (self.params.resource, self.path)

    @property
    def path(self):
        return self.params.device

    @classmethod
    def from_disk(cls, disk, ctx):
        from ganeti.storage import lvm
        params = params_from_disk(disk)
        children = disk.get("children") or []
        if len(children) != 2 or not all(isinstance(c, dict)
                                         for c in children):
            raise errors.ParameterError(
                "disk.children", "disk.children of a drbd disk must be"
                " [data LV, metadata LV]")
        data, meta = [lvm.LogicalVolume.from_disk(c, ctx) for c in children]
        return cls(params, data, meta, ctx)

    # -- commands -------------------------------------------------------------

    async def _run(self, argv, check=True):
        result = await self._ctx.runner.run(
            argv, timeout=self._ctx.command_timeout)
        if check and result.failed:
            raise errors.BlockDeviceError(
                "DRBD %s: %s failed: %s" % (self.params.resource,
                                            " ".join(argv[:3]),
                                            result.describe()))
        return result

    async def _run_all(self, commands):
        for argv in commands:
            await self._run(argv)

    async def resource_status(self):
        """The ResourceStatus, or None if the resource is not up here."""
        result = await self._run([DRBDSETUP, "status", self.params.resource,
                                  "--json"], check=False)
        if result.failed:
            err = result.stderr.decode("utf-8", "replace")
            if result.exit_code == EXIT_NO_RESOURCE or \
                    "No such resource" in err or "not defined" in err:
                return None
            raise errors.BlockDeviceError(
                "DRBD %s: status failed: %s" % (self.params.resource,
                                                result.describe()))
        for res in parse_status(result.stdout):
            if res.name == self.params.resource:
                return res
        return None

    # -- IBlockDevice ---------------------------------------------------------

    async def _create(self, size):
        size = check_size("size", size)
        await self.data.create(size)
        try:
            await self.meta.create(META_SIZE)
            await self._run(create_md_command(self.params, self.meta.path))
        except Exception:
            await self.data.remove()
            await self.meta.remove()
            raise
        return self.path

    async def _assemble(self):
        res = await self.resource_status()
        if res is None:
            await self._run_all(up_commands(self.params, self.data.path,
                                            self.meta.path))
            res = await self.resource_status()
        if self.params.primary and res is not None and \
                res.role != "Primary":
            argv = [DRBDSETUP, "primary", self.params.resource]
            if not any(d.disk_state == "UpToDate" for d in res.devices) and \
                    not any(pd.peer_disk_state == "UpToDate"
                            for c in res.connections
                            for pd in c.peer_devices):
                # a new mirror: nobody has good data yet, this side
                # becomes the sync source
                argv.append("--force")
            await self._run(argv)
        return self.path

    async def _shutdown(self):
        if await self.resource_status() is None:
            return
        await self._run([DRBDSETUP, "down", self.params.resource])

    async def _remove(self):
        await self._shutdown()
        await self.data.remove()
        await self.meta.remove()

    async def _grow(self, amount, dryrun):
        await self.data.grow(amount, dryrun)
        if not dryrun and await self.resource_status() is not None:
            await self._run([DRBDSETUP, "resize",
                             str(self.params.local_minor)])

    async def _dimensions(self):
        res = await self.resource_status()
        if res is not None and res.devices and res.devices[0].size:
            return (int(res.devices[0].size) * 1024, None)
        return await self.data.dimensions()

    # -- mirror operations ----------------------------------------------------

    def status(self):
        return defer.Deferred.fromCoroutine(self._status())

    async def _status(self):
        res = await self.resource_status()
        if res is None:
            if await self.data.dimensions() is None:
                return None
            return {"path": self.path, "status": DISK_DEGRADED,
                    "degraded": True, "sync_percent": None,
                    "estimated_time": None, "ldisk": LDS_UNKNOWN,
                    "details": "DRBD resource %s is not active"
                    % self.params.resource, "role": None}
        return disk_status(res, self.path)

    def disconnect_net(self):
        """Standalone: drop the peer (Deferred)."""
        return defer.Deferred.fromCoroutine(self._disconnect_net())

    async def _disconnect_net(self):
        res = await self.resource_status()
        if res is None:
            raise errors.BlockDeviceError("DRBD %s is not active"
                                          % self.params.resource)
        for conn in res.connections:
            if conn.connection_state != "StandAlone":
                await self._run([DRBDSETUP, "disconnect",
                                 self.params.resource,
                                 str(conn.peer_node_id)])
            await self._run([DRBDSETUP, "del-peer", self.params.resource,
                             str(conn.peer_node_id)])

    def attach_net(self, multimaster=False):
        """Connect to the peer the config names (Deferred); with
        ``multimaster`` both sides may be primary (live migration)."""
        return defer.Deferred.fromCoroutine(self._attach_net(multimaster))

    async def _attach_net(self, multimaster):
        res = await self.resource_status()
        if res is None:
            raise errors.BlockDeviceError("DRBD %s is not active"
                                          % self.params.resource)
        if any(c.peer_node_id == self.params.remote_node_id
               for c in res.connections):
            await self._disconnect_net()
        await self._run_all(net_commands(self.params, multimaster) + [
            [DRBDSETUP, "connect", self.params.resource,
             str(self.params.remote_node_id)]])

    def replace_children(self, new_children):
        """Swap the local storage for new LVs (replace-disks on this node);
        the peer's data is copied over by DRBD's resync (Deferred)."""
        return defer.Deferred.fromCoroutine(
            self._replace_children(new_children))

    async def _replace_children(self, new_children):
        from ganeti.storage import lvm
        if len(new_children) != 2:
            raise errors.ParameterError(
                "new_children", "new_children must be [data LV, meta LV]")
        data, meta = [lvm.LogicalVolume.from_disk(c, self._ctx)
                      for c in new_children]
        minor = str(self.params.local_minor)
        await self._run([DRBDSETUP, "detach", minor])
        await self._run(create_md_command(self.params, meta.path))
        await self._run([DRBDMETA, minor, "v09", meta.path, "flex-external",
                         "apply-al"])
        await self._run([DRBDSETUP, "attach", minor, data.path, meta.path,
                         "flexible"] + list(self.params.disk_options))
        self.data, self.meta = data, meta
