"""gnt-cluster: cluster-wide administration, including ``init`` (bootstrap).

``init`` is the one command that runs without a master: it writes
config.data, the HMAC key, the cluster certificate and the ssconf files of
the first node under ``--root``, then starts the node's daemons (node daemon,
master daemon, confd) and waits until the master answers.  Every other
command talks to the master over luxi.
"""

import os
import shutil
import socket
import time

from ganeti import config
from ganeti import constants
from ganeti import crypto
from ganeti import daemon_util
from ganeti import diskparams as diskparams_mod
from ganeti import errors
from ganeti import ipolicy
from ganeti import luxi
from ganeti import opcodes
from ganeti import rie
from ganeti import ssconf
from ganeti import uidpool
from ganeti.backend import files as backend_files
from ganeti.cli import base
from ganeti.cli import common
from ganeti.cli import gnt_group
from ganeti.cli.base import Opt
from ganeti.iallocator import defaults as ia_defaults

PROGRAM = "gnt-cluster"
commands = base.CommandTable(PROGRAM, "Cluster-wide administration.")

#: Hypervisors whose parameters always get an ssconf_hvparams_<hv> file

#: How long init waits for the master daemon to answer
MASTER_START_TIMEOUT = 60.0

# Options shared by init and modify
HV_LIST_OPT = Opt("-H", "--hypervisor-parameters", dest="hvparams",
                  action="append", metavar="HV:KEY=VAL[,...]",
                  help="default parameters of a hypervisor (repeatable)")
BE_OPT = Opt("-B", "--backend-parameters", dest="beparams",
             metavar="KEY=VAL[,...]",
             help="default backend parameters (maxmem, minmem, vcpus, ...)")
NIC_OPT = Opt("-N", "--nic-parameters", dest="nicparams",
              metavar="KEY=VAL[,...]",
              help="default NIC parameters (mode, link, vlan)")
DISKP_OPT = Opt("-D", "--disk-parameters", dest="diskparams",
                action="append", metavar="TEMPLATE:KEY=VAL[,...]",
                help="default parameters of a disk template (repeatable)")
ENABLED_HV_OPT = Opt("--enabled-hypervisors", metavar="HV[,HV...]",
                     help="hypervisors instances may use; the first is the"
                     " default")
ENABLED_DT_OPT = Opt("--enabled-disk-templates", metavar="TEMPLATE[,...]",
                     help="disk templates instances may use; the first is"
                     " the default")
FILE_DIR_OPT = Opt("--file-storage-dir", metavar="DIR",
                   help="directory of the disks of file instances")
SHARED_DIR_OPT = Opt("--shared-file-storage-dir", metavar="DIR",
                     help="directory of the disks of sharedfile instances")
GLUSTER_DIR_OPT = Opt("--gluster-storage-dir", metavar="DIR",
                      help="directory of gluster disks")
UID_POOL_OPT = Opt("--uid-pool", metavar="POOL",
                   help="user ids for instances: comma-separated uids and"
                   " ranges LOW-HIGH")
POOL_SIZE_OPT = Opt("-C", "--candidate-pool-size", type=int, metavar="N",
                    help="how many master candidates to keep")
MAC_PREFIX_OPT = Opt("-m", "--mac-prefix", metavar="XX:XX:XX",
                     help="prefix of generated MAC addresses")
NETDEV_OPT = Opt("--master-netdev", metavar="INTERFACE",
                 help="interface of the master IP")
NETMASK_OPT = Opt("--master-netmask", type=int, metavar="BITS",
                  help="netmask of the master IP (CIDR length)")
VG_OPT = Opt("--vg-name", metavar="VG", help="LVM volume group for disks")
IALLOC_OPT = Opt("-I", "--default-iallocator", metavar="NAME[,NAME...]",
                 help="default instance allocators, tried in order, for"
                 " every request type ('' for none; a new cluster uses"
                 " 'hail', the built-in allocator)")
IALLOC_FOR_OPT = Opt("--default-iallocator-for", action="append",
                     dest="default_iallocator_for",
                     metavar="TYPE=NAME[,NAME...]",
                     help="default allocators of one request type"
                     " (allocate, multi-allocate, relocate, change-group,"
                     " node-evacuate, allocate-secondary); TYPE=none: no"
                     " default for it, TYPE=default: the list for every"
                     " type again (repeatable)")
IALLOC_PARAMS_OPT = Opt("--default-iallocator-params", metavar="KEY=VAL",
                        help="parameters of the default allocator")
NODE_PARAMS_OPT = Opt("--node-parameters", dest="ndparams",
                      metavar="KEY=VAL[,...]",
                      help="default node parameters")
MNH_OPT = Opt("--maintain-node-health", type=base.yes_no("maintain node"
                                                         " health"),
              metavar="yes|no", help="automatic maintenance of nodes")
WIPE_OPT = Opt("--prealloc-wipe-disks", type=base.yes_no("prealloc wipe"
                                                         " disks"),
               metavar="yes|no", help="wipe disks before allocating them")
USER_SHUTDOWN_OPT = Opt("--user-shutdown", "--enabled-user-shutdown",
                        dest="enabled_user_shutdown",
                        type=base.yes_no("user shutdown"), metavar="yes|no",
                        help="tell a shutdown from inside an instance from"
                        " a crash")
MIP_SCRIPT_OPT = Opt("--use-external-mip-script",
                     type=base.yes_no("external mip script"),
                     metavar="yes|no",
                     help="use a site script to set up the master IP")
DRBD_HELPER_OPT = Opt("--drbd-usermode-helper", metavar="HELPER",
                      help="the DRBD usermode helper")
COMPRESSION_OPT = Opt("--compression-tools", metavar="TOOL[,...]",
                      help="tools usable to compress instance data")
INSTALL_IMAGE_OPT = Opt("--install-image", metavar="IMAGE",
                        help="image running OS scripts in a VM")
ZEROING_IMAGE_OPT = Opt("--zeroing-image", metavar="IMAGE",
                        help="image zeroing free space of instances")


# --- init ---------------------------------------------------------------------

#: the instance policy options (Ganeti's), for init and modify
IPOLICY_OPTS = [gnt_group.IPOLICY_BOUNDS_OPT, gnt_group.IPOLICY_STD_OPT,
                gnt_group.IPOLICY_DTS_OPT, gnt_group.VCPU_RATIO_OPT,
                gnt_group.SPINDLE_RATIO_OPT]


def _default_node_name():
    return socket.getfqdn() or socket.gethostname()


def _check_ip(value, what):
    import ipaddress
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise errors.ParameterError(what, "'%s' is not an IP address"
                                    % value)
    return value


def _known_list(text, option, known, what):
    """A comma-separated list of at least one ``what`` out of ``known``."""
    items = base.split_list(text)
    if not items:
        raise errors.ParameterError(option, "at least one %s is needed"
                                    % what)
    bad = [item for item in items if item not in known]
    if bad:
        raise errors.ParameterError(
            option, "unknown %s(s) %s (known: %s)"
            % (what, ", ".join(bad), ", ".join(sorted(known))))
    return items


def _hypervisor_list(text, option):
    return _known_list(text, option, constants.HYPER_TYPES, "hypervisor")


def _disk_template_list(text, option):
    return _known_list(text, option, constants.DISK_TEMPLATES,
                       "disk template")


def _diskparams(specs, option="-D"):
    result = {}
    for spec in specs or []:
        dt, params = common.parse_ident_keyval(spec, option)
        if dt not in constants.DISK_TEMPLATES:
            raise errors.ParameterError(option, "unknown disk template '%s'"
                                        % dt)
        result[dt] = params
    return result


def _nicparams(text):
    if text is None:
        return None
    params = common.parse_keyval(text, "-N")
    mode = params.get(constants.NIC_MODE)
    if mode is not None and mode not in constants.NIC_VALID_MODES:
        raise errors.ParameterError(
            "-N mode", "'%s' is not a NIC mode (one of %s)"
            % (mode, ", ".join(sorted(constants.NIC_VALID_MODES))))
    return params


def _uid_pool(text, option="--uid-pool"):
    if text is None:
        return None
    try:
        return uidpool.parse_uid_pool(text)
    except errors.ParseError as err:
        raise errors.ParameterError(option, str(err))


def _mac_prefix(text):
    import re
    if text is not None and not re.match(
            r"^[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$", text.lower()):
        raise errors.ParameterError("--mac-prefix", "'%s' is not of the form"
                                    " XX:XX:XX" % text)
    return text.lower() if text else text


def _wait_for_master(ctx, paths, timeout=MASTER_START_TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        daemon_util.check_alive(paths, daemon_util.NODED)
        try:
            with luxi.BlockingClient(paths.master_socket, 5) as c:
                c.call(luxi.REQ_QUERY_CONFIG_VALUES, ["cluster_name"])
            return
        except (luxi.NoMasterError, luxi.LuxiTimeoutError,
                luxi.ConnectionClosedError):
            pass
        if time.monotonic() > deadline:
            tail = daemon_util.stderr_tail(paths, daemon_util.MASTERD)
            raise daemon_util.DaemonError(
                "the master daemon did not answer on %s within %d seconds"
                " (see %s)%s" % (paths.master_socket, timeout, paths.log_dir,
                                 ("; its last output:\n" + tail) if tail
                                 else ""))
        time.sleep(0.1)


#: what the node daemon of a node set up by init starts by role
#: (docs/master-failover.rst)
NODED_DAEMONS_ARGS = ["--daemons", "process"]


def start_node_daemons(paths, node_ip, os_search_path=(),
                       file_storage_dirs=(), wait=True, ctx=None):
    """Start the node daemon, which starts the master's other daemons by
    the node's role (masterd, confd, rapi, mond, maintd); wait for luxi."""
    noded_args = list(NODED_DAEMONS_ARGS)
    for directory in os_search_path or ():
        noded_args += ["--os-search-path", directory]
    for directory in file_storage_dirs or ():
        noded_args += ["--file-storage-dir", directory]
    try:
        pid = daemon_util.start_daemon(paths, daemon_util.NODED, node_ip,
                                       noded_args)
        if ctx is not None:
            ctx.out("Started %s (pid %d); it starts the master's other"
                    " daemons" % (daemon_util.NODED, pid))
        if wait:
            _wait_for_master(ctx, paths)
            # then the rest of the master's daemons, started after it
            deadline = time.monotonic() + 30
            wanted = (daemon_util.CONFD, daemon_util.RAPI, daemon_util.MOND)
            while time.monotonic() < deadline and not all(
                    daemon_util.running_pid(paths, d) for d in wanted):
                time.sleep(0.1)
            if ctx is not None:
                for daemon in daemon_util.MANAGED_DAEMONS:
                    pid = daemon_util.running_pid(paths, daemon)
                    if pid:
                        ctx.out("Started %s (pid %d)" % (daemon, pid))
    except BaseException:
        stop_node_daemons(paths)
        raise
    return [daemon_util.NODED]


def stop_node_daemons(paths):
    """Stop the node daemon first (it would start the others again), then
    every daemon it started; ``{daemon: pid}``."""
    stopped = daemon_util.stop_all(paths, (daemon_util.NODED,))
    stopped.update(daemon_util.stop_all(paths, daemon_util.MANAGED_DAEMONS))
    return stopped


def domain_secret_path(paths):
    return os.path.join(paths.data_dir, rie.DOMAIN_SECRET_FILE)


def cluster_files(paths):
    """The files init writes and destroy removes (ssconf ones included)."""
    result = [paths.config_file, paths.config_file + ".bak",
              paths.hmac_key_file, crypto.server_pem_path(paths),
              os.path.join(paths.data_dir, "rapi.pem"),
              domain_secret_path(paths)]
    try:
        names = os.listdir(paths.data_dir)
    except OSError:
        names = []
    result.extend(os.path.join(paths.data_dir, n) for n in sorted(names)
                  if n.startswith("ssconf_"))
    return result


def remove_cluster_files(paths, queue=True):
    for path in cluster_files(paths):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if queue and os.path.isdir(paths.queue_dir):
        shutil.rmtree(paths.queue_dir, ignore_errors=True)


@commands.command(
    "init",
    opts=[
        Opt("--node-name", metavar="NAME",
            help="name of this (the first) node; default: this host's"
            " name"),
        Opt("--node-ip", default="127.0.0.1", metavar="IP",
            help="primary IP of this node; the daemons bind to it"
            " (default 127.0.0.1)"),
        Opt("-s", "--secondary-ip", metavar="IP",
            help="secondary IP of this node (default: the primary)"),
        Opt("--master-ip", metavar="IP",
            help="the cluster's master IP (default: the node IP; we do"
            " no DNS lookups)"),
        NETDEV_OPT, NETMASK_OPT, VG_OPT, MAC_PREFIX_OPT, FILE_DIR_OPT,
        SHARED_DIR_OPT, GLUSTER_DIR_OPT, ENABLED_HV_OPT, HV_LIST_OPT, BE_OPT,
        NIC_OPT, DISKP_OPT, MNH_OPT, UID_POOL_OPT, IALLOC_OPT,
        IALLOC_PARAMS_OPT, WIPE_OPT, NODE_PARAMS_OPT, POOL_SIZE_OPT,
        DRBD_HELPER_OPT, ENABLED_DT_OPT, INSTALL_IMAGE_OPT,
        ZEROING_IMAGE_OPT, COMPRESSION_OPT, USER_SHUTDOWN_OPT,
        MIP_SCRIPT_OPT] + IPOLICY_OPTS + [
        Opt("--no-start", action="store_true",
            help="write the configuration but start no daemon"),
        Opt("--os-search-path", action="append", metavar="DIR",
            help="extra directory where the node daemon looks for OS"
            " definitions (repeatable)"),
        Opt("--noded-file-storage-dir", action="append", metavar="DIR",
            help="extra directory the node daemon allows file disks in"
            " (repeatable)"),
    ],
    args=[Opt("cluster_name", metavar="CLUSTER_NAME",
              help="name of the new cluster")],
    help="create a one-node cluster on this node and start its daemons")
def init(ctx, opts):
    paths = ctx.paths
    name = opts.cluster_name
    node_name = opts.node_name or _default_node_name()
    node_ip = _check_ip(opts.node_ip, "--node-ip")
    secondary_ip = _check_ip(opts.secondary_ip, "--secondary-ip") \
        if opts.secondary_ip else node_ip
    master_ip = _check_ip(opts.master_ip, "--master-ip") \
        if opts.master_ip else node_ip
    # Ganeti's defaults: xen-pvm; drbd and plain (with volume group xenvg)
    hvs = _hypervisor_list(
        constants.HT_XEN_PVM if opts.enabled_hypervisors is None
        else opts.enabled_hypervisors, "--enabled-hypervisors")
    dts = _disk_template_list(
        ",".join(constants.DEFAULT_ENABLED_DISK_TEMPLATES)
        if opts.enabled_disk_templates is None
        else opts.enabled_disk_templates, "--enabled-disk-templates")
    hvparams = base.parse_hv_list(opts.hvparams)
    beparams = base.parse_beparams(opts.beparams) or {}
    if constants.BE_MEMORY in beparams:
        memory = beparams.pop(constants.BE_MEMORY)
        beparams.setdefault(constants.BE_MAXMEM, memory)
        beparams.setdefault(constants.BE_MINMEM, memory)
    unknown = sorted(set(beparams) - set(constants.BEC_DEFAULTS))
    if unknown:
        raise errors.ParameterError("-B", "unknown backend parameter(s) %s"
                                    % ", ".join(unknown))
    nicparams = _nicparams(opts.nicparams) or {}
    ndparams = base.parse_ndparams(opts.ndparams) or {}
    diskparams = _diskparams(opts.diskparams)
    try:
        diskparams = diskparams_mod.check_diskparams(diskparams, "-D")
    except errors.OpPrereqError as err:
        raise errors.ParameterError("-D", err.args[0])
    pool = _uid_pool(opts.uid_pool) or []
    if opts.candidate_pool_size is not None and opts.candidate_pool_size < 1:
        raise errors.ParameterError("--candidate-pool-size",
                                    "must be a positive integer")
    root = paths.root
    file_dir = opts.file_storage_dir or os.path.join(
        root, "srv", "ganeti", "file-storage")
    shared_dir = opts.shared_file_storage_dir or os.path.join(
        root, "srv", "ganeti", "shared-file-storage")
    for what, d in (("--file-storage-dir", file_dir),
                    ("--shared-file-storage-dir", shared_dir)):
        if not os.path.isabs(d):
            raise errors.ParameterError(what, "'%s' is not an absolute path"
                                        % d)
    vg_name = opts.vg_name
    if vg_name is None and set(dts) & {constants.DT_PLAIN,
                                       constants.DT_DRBD8}:
        vg_name = "xenvg"
    cluster_params = {
        "hvparams": hvparams,
        "beparams": {constants.PP_DEFAULT: beparams},
        "nicparams": {constants.PP_DEFAULT: nicparams},
        "ndparams": ndparams,
        "diskparams": diskparams,
        "master_netdev": opts.master_netdev or "lo",
        "master_netmask": (opts.master_netmask
                           if opts.master_netmask is not None else 32),
        "volume_group_name": vg_name,
        "mac_prefix": _mac_prefix(opts.mac_prefix) or
        constants.DEFAULT_MAC_PREFIX,
    }
    if opts.default_iallocator:
        try:
            ia_defaults.parse_spec(opts.default_iallocator)
        except errors.OpPrereqError as err:
            raise errors.ParameterError("--default-iallocator", err.args[0])
    optional = {
        "gluster_storage_dir": opts.gluster_storage_dir,
        "candidate_pool_size": opts.candidate_pool_size,
        "maintain_node_health": opts.maintain_node_health,
        "prealloc_wipe_disks": opts.prealloc_wipe_disks,
        # as Ganeti's init: the built-in allocator unless told otherwise
        "default_iallocator": (constants.DEFAULT_IALLOCATOR
                               if opts.default_iallocator is None
                               else opts.default_iallocator),
        "default_iallocator_params": (common.parse_keyval(
            opts.default_iallocator_params, "--default-iallocator-params")
            if opts.default_iallocator_params is not None else None),
        "drbd_usermode_helper": opts.drbd_usermode_helper,
        "install_image": opts.install_image,
        "zeroing_image": opts.zeroing_image,
        "compression_tools": base.split_list(opts.compression_tools),
        "enabled_user_shutdown": opts.enabled_user_shutdown,
        "use_external_mip_script": opts.use_external_mip_script,
    }
    cluster_params.update((k, v) for k, v in optional.items()
                          if v is not None)
    policy = gnt_group.ipolicy_params(opts, cluster=True)
    if policy:
        if policy.get(constants.ISPECS_MINMAX) == constants.VALUE_DEFAULT:
            del policy[constants.ISPECS_MINMAX]
        try:
            ipolicy.check_policy(policy)
        except errors.OpPrereqError as err:
            raise errors.ParameterError("--ipolicy-*", err.args[0])
        # (only enabled disk templates stay allowed, as in Ganeti)
        cluster_params["ipolicy"] = policy

    try:
        # the certificate needs a DNS name; check before writing anything
        crypto._check_cluster_name(name)
    except errors.X509CertError as err:
        raise errors.ParameterError("cluster name", str(err))
    if os.path.exists(paths.config_file):
        raise base.CommandFailed(
            "Failure: this node is already part of a cluster: %s exists"
            " (gnt-cluster destroy --yes-do-it removes it)"
            % paths.config_file)
    running = [d for d, pid in daemon_util.status(paths).items() if pid]
    if running:
        raise base.CommandFailed(
            "Failure: daemons are already running under %s: %s"
            % (root, ", ".join(running)))
    try:
        store = config.ConfigStore.create(
            None, name, node_name, master_ip, enabled_hypervisors=hvs,
            enabled_disk_templates=dts, file_storage_dir=file_dir,
            shared_file_storage_dir=shared_dir, uid_pool=pool,
            **cluster_params)
    except errors.ConfigVerifyError as err:
        problems = err.args[1] if len(err.args) > 1 else []
        raise base.CommandFailed(
            "Failure: the new configuration would not be valid:\n%s"
            % "\n".join("  - %s" % p for p in problems))
    master = store.master_node
    master.secondary_ip = secondary_ip
    master.primary_ip = node_ip

    # Everything is checked: write the files.
    paths.ensure_dirs()
    written = False
    try:
        cert = crypto.generate_cluster_certificate(
            crypto.server_pem_path(paths), name)
        written = True
        # the remote API's own certificate (ganeti-rapi serves HTTPS with it)
        rapi_pem = os.path.join(paths.data_dir, "rapi.pem")
        if not os.path.exists(rapi_pem):
            crypto.generate_cluster_certificate(rapi_pem, name)
        crypto.write_hmac_key(paths.hmac_key_file)
        # as Ganeti's init: clusters given the same one (renew-crypto
        # --cluster-domain-secret) may move instances between them
        crypto.write_domain_secret(domain_secret_path(paths))
        store.set_cluster_params(candidate_certs={
            master.uuid: crypto.certificate_digest(cert.certificate,
                                                   "sha1")})
        store.path = paths.config_file
        store.save()
        ssconf.write_ssconf(paths, store)
        for d in (file_dir, shared_dir):
            os.makedirs(d, mode=0o750, exist_ok=True)
    except errors.X509CertError as err:
        if written:
            remove_cluster_files(paths, queue=False)
        raise base.CommandFailed("Failure: cannot create the cluster"
                                 " certificate: %s" % err)
    except BaseException:
        remove_cluster_files(paths, queue=False)
        raise
    ctx.out("Initialised cluster %s: node %s (%s), files under %s"
            % (name, node_name, node_ip, paths.data_dir))
    if opts.no_start:
        ctx.out("Daemons not started (--no-start)")
        return base.EXIT_SUCCESS
    storage_dirs = list(opts.noded_file_storage_dir or [])
    for d in (file_dir, shared_dir):
        if d not in storage_dirs:
            storage_dirs.append(d)
    try:
        start_node_daemons(paths, node_ip, opts.os_search_path or (),
                           storage_dirs, ctx=ctx)
    except (daemon_util.DaemonError, errors.GenericError) as err:
        remove_cluster_files(paths)
        raise base.CommandFailed(
            "Failure: cannot start the daemons: %s\nThe configuration was"
            " removed again." % err)
    ctx.out("The master daemon answers on %s" % paths.master_socket)
    # as Ganeti's init: the cluster-init post hooks (OP_CLUSTER_POST_INIT)
    try:
        ctx.run_op(ctx.opcode("OP_CLUSTER_POST_INIT"))
    except errors.GenericError as err:
        msg, _ = common.format_error(err)
        ctx.err("Warning: the post-init job failed: %s" % msg)
    return base.EXIT_SUCCESS


@commands.command(
    "destroy",
    opts=[Opt("--yes-do-it", action="store_true",
              help="really destroy the cluster (required)")],
    help="remove the cluster's configuration and stop its daemons")
def destroy(ctx, opts):
    if not opts.yes_do_it:
        raise base.CommandFailed(
            "Destroying the cluster removes its configuration for good;"
            " give --yes-do-it to really do it.")
    op = ctx.opcode("OP_CLUSTER_DESTROY")
    try:
        ctx.run_op(op)
    except errors.OpCodeUnknown:
        raise base.CommandFailed(
            "Failure: this master daemon does not implement cluster"
            " destruction (OP_CLUSTER_DESTROY); nothing was changed")
    ctx.client.close()
    stopped = stop_node_daemons(ctx.paths)
    for daemon, pid in sorted(stopped.items()):
        if pid:
            ctx.out("Stopped %s (pid %d)" % (daemon, pid))
    remove_cluster_files(ctx.paths)
    return base.EXIT_SUCCESS


# --- information ------------------------------------------------------------------

def _tags_text(tags):
    return ", ".join(sorted(tags)) if tags else "(none)"


def _or_empty(value):
    return "" if value is None else value


def _ipolicy_items(ipolicy):
    items = []
    bounds = []
    for idx, minmax in enumerate(ipolicy.get(constants.ISPECS_MINMAX, [])):
        bounds.append([("%s/%d" % (key, idx), minmax.get(key, {}))
                       for key in (constants.ISPECS_MAX,
                                   constants.ISPECS_MIN)])
    items.append(("bounds specs", bounds))
    if constants.ISPECS_STD in ipolicy:
        items.append(("std", ipolicy[constants.ISPECS_STD]))
    items.append(("allowed disk templates",
                  ", ".join(ipolicy.get(constants.IPOLICY_DTS, []))))
    for key in (constants.IPOLICY_VCPU_RATIO,
                constants.IPOLICY_SPINDLE_RATIO):
        if key in ipolicy:
            items.append((key, ipolicy[key]))
    return items


def cluster_info_items(info):
    """The ``gnt-cluster info`` report of a QueryClusterInfo answer."""
    arch = info.get("architecture") or ["?", "?"]
    pool = info.get("uid_pool") or []
    collectors = info.get("enabled_data_collectors") or {}
    intervals = info.get("data_collector_interval") or {}
    cluster_params = [
        ("candidate pool size", info.get("candidate_pool_size")),
        ("maximal number of jobs running simultaneously",
         info.get("max_running_jobs")),
        ("maximal number of jobs simultaneously tracked by the scheduler",
         info.get("max_tracked_jobs")),
        ("mac prefix", info.get("mac_prefix")),
        ("master netdev", info.get("master_netdev")),
        ("master netmask", info.get("master_netmask")),
        ("use external master IP address setup script",
         info.get("use_external_mip_script")),
        ("lvm volume group", info.get("volume_group_name")),
        ("lvm reserved volumes", _tags_text(info.get("reserved_lvs"))),
        ("drbd usermode helper", info.get("drbd_usermode_helper")),
        ("file storage path", info.get("file_storage_dir")),
        ("shared file storage path", info.get("shared_file_storage_dir")),
        ("gluster storage path", info.get("gluster_storage_dir")),
        ("maintenance of node health", info.get("maintain_node_health")),
        ("uid pool", uidpool.format_uid_pool([tuple(r) for r in pool])
         if pool else ""),
        ("default instance allocator",
         _or_empty(info.get("default_iallocator"))),
        ("default instance allocators per request type",
         [(mode, ", ".join(names) or "(none)") for mode, names in
          _allocator_lists(info.get("default_iallocators"))]),
        ("default instance allocator parameters",
         ",".join("%s=%s" % kv for kv in sorted(
             (info.get("default_iallocator_params") or {}).items()))),
        ("primary ip version", info.get("primary_ip_version")),
        ("preallocation wipe disks", info.get("prealloc_wipe_disks")),
        ("enabled disk templates",
         ", ".join(info.get("enabled_disk_templates") or [])),
        ("install image", _or_empty(info.get("install_image"))),
        ("instance communication network",
         _or_empty(info.get("instance_communication_network"))),
        ("zeroing image", _or_empty(info.get("zeroing_image"))),
        ("compression tools", base.Items(info.get("compression_tools") or [])),
        ("enabled user shutdown", info.get("enabled_user_shutdown")),
        ("modify ssh setup", info.get("modify_ssh_setup")),
        ("ssh_key_type", info.get("ssh_key_type")),
        ("ssh_key_bits", info.get("ssh_key_bits")),
    ]
    return [
        ("Cluster name", info.get("name")),
        ("Cluster UUID", info.get("uuid")),
        ("Creation time", base.format_time(info.get("ctime"))),
        ("Modification time", base.format_time(info.get("mtime"))),
        ("Master node", info.get("master")),
        ("Architecture (this node)", "%s (%s)" % (arch[0], arch[1])),
        ("Tags", _tags_text(info.get("tags"))),
        ("Default hypervisor", info.get("default_hypervisor")),
        ("Enabled hypervisors",
         ", ".join(info.get("enabled_hypervisors") or [])),
        ("Hypervisor parameters", info.get("hvparams") or {}),
        ("OS-specific hypervisor parameters", info.get("os_hvp") or {}),
        ("OS parameters", info.get("osparams") or {}),
        ("Hidden OSes", ", ".join(info.get("hidden_os") or [])),
        ("Blacklisted OSes", ", ".join(info.get("blacklisted_os") or [])),
        ("Cluster parameters", cluster_params),
        ("Default node parameters", info.get("ndparams") or {}),
        ("Default instance parameters", info.get("beparams") or {}),
        ("Default nic parameters", info.get("nicparams") or {}),
        ("Default disk parameters", info.get("diskparams") or {}),
        ("Instance policy - limits for instances",
         _ipolicy_items(info.get("ipolicy") or {})),
        ("Data collectors", [
            (name, [("active", collectors[name]),
                    ("interval", "%.3fs" % (intervals[name] / 1e6)
                     if isinstance(intervals.get(name), (int, float))
                     else intervals.get(name))])
            for name in sorted(collectors)]),
        ("Diagnose data collector filename",
         _or_empty(info.get("diagnose_data_collector_filename"))),
        ("Maintenance daemon", _maintenance_items(info.get("maintenance"))),
    ]


def _maintenance_items(m):
    """The maintenance daemon's switches and how many incidents it has."""
    if not isinstance(m, dict):
        return []
    incidents = m.get("incidents") or []
    return [
        ("round delay", "%ss" % m.get("round_delay")),
        ("harep's duties", m.get("harep")),
        ("balancing", m.get("balance")),
        ("balancing threshold", m.get("balance_threshold")),
        ("balancing with disk moves", m.get("balance_disk_moves")),
        ("balancing with load data", m.get("balance_load")),
        ("balancing hold-down", "%ss" % m.get("balance_hold_down")),
        ("balancing moves per hour", m.get("balance_max_moves")),
        ("incidents", len(incidents)),
        ("evacuated nodes", ", ".join(m.get("evacuated_names") or
                                      m.get("evacuated") or [])),
        # the hold-down and the hourly cap count these
        ("recent balancing moves", len(m.get("moves") or [])),
    ]


@commands.command("info", opts=[Opt("--roman", action="store_true",
                                    help="accepted for compatibility;"
                                    " numbers stay arabic")],
                  help="show the cluster's configuration")
def info(ctx, opts):
    base.print_info(ctx, cluster_info_items(ctx.client.query_cluster_info()))


@commands.command("version", help="show the software and protocol versions")
def version(ctx, opts):
    info = ctx.client.query_cluster_info()
    ctx.out("Software version: %s" % info.get("software_version"))
    ctx.out("Internode protocol: %s" % info.get("protocol_version"))
    ctx.out("Configuration format: %s" % info.get("config_version"))
    ctx.out("OS api version: %s" % info.get("os_api_version"))
    ctx.out("Export interface: %s" % info.get("export_version"))
    ctx.out("VCS version: %s" % info.get("vcs_version"))


@commands.command("getmaster", help="show the master node")
def getmaster(ctx, opts):
    master = backend_files.read_ssconf_value(ctx.paths, "master_node")
    if not master:
        master = ctx.client.query_config_values(["master_node"])[0]
    ctx.out(master)


@commands.command("master-ping",
                  help="exit 0 if the master daemon answers, else 1")
def master_ping(ctx, opts):
    try:
        ctx.client.query_config_values(["cluster_name"])
    except errors.GenericError:
        return base.EXIT_FAILURE
    return base.EXIT_SUCCESS


def _volume_text(volume):
    """A missing volume as the admin looks for it: ``/dev/vg/lv`` for a
    logical volume, a file disk's path as it is."""
    return volume if volume.startswith("/") else "/dev/%s" % volume


@commands.command(
    "verify-disks",
    opts=[Opt("-g", "--node-group", metavar="GROUP",
              help="verify only the disks of this node group"),
          Opt("--strict", action="store_true",
              help="also check that the disks of instances whose disks"
              " are not active exist, and fail when a node could not be"
              " asked")]
    + base.JOB_OPTS,
    help="find instances whose disks are not active or missing; activate"
    " the disks of the first")
def verify_disks(ctx, opts):
    # As Ganeti: the master submits one job per node group; this command
    # follows them and activates the disks each one found inactive.
    extra = {"is_strict": True} if opts.strict else {}
    result = ctx.run_op(ctx.opcode("OP_CLUSTER_VERIFY_DISKS",
                                   group_name=opts.node_group, **extra))
    if result is None and opts.submit_only:
        return base.EXIT_SUCCESS
    code = base.EXIT_SUCCESS
    for ok, job_id in (result or {}).get("jobs", []):
        if not ok:
            ctx.out("Job failed: %s" % job_id)
            code = base.EXIT_FAILURE
            continue
        try:
            ((bad_nodes, instances, missing),) = ctx.poll_job(job_id)
        except errors.GenericError as err:
            msg, _ = common.format_error(err)
            ctx.out("Job failed: %s" % msg)
            code = base.EXIT_FAILURE
            continue
        for node in sorted(bad_nodes):
            ctx.out("Error gathering data on node %s: %s"
                    % (node, bad_nodes[node][-400:]))
            if opts.strict:
                code = base.EXIT_FAILURE
        for name in instances:
            if name in missing:
                continue
            ctx.out("Activating disks for instance '%s'" % name)
            try:
                ctx.run_op(ctx.opcode("OP_INSTANCE_ACTIVATE_DISKS",
                                      instance_name=name))
            except errors.GenericError as err:
                msg, _ = common.format_error(err)
                ctx.err("Error activating disks for instance %s: %s"
                        % (name, msg))
                code = base.EXIT_FAILURE
        if missing:
            for name in sorted(missing):
                volumes = sorted(missing[name])
                if all(node in bad_nodes for node, _ in volumes):
                    ctx.out("Instance %s cannot be verified as it lives on"
                            " broken nodes" % name)
                    continue
                ctx.out("Instance %s has missing logical volumes:" % name)
                for node, volume in volumes:
                    where = ("broken node %s" % node if node in bad_nodes
                             else node)
                    ctx.out("\t%s %s" % (where, _volume_text(volume)))
            ctx.out("You need to replace or recreate disks for all the above"
                    " instances if this message persists after fixing"
                    " broken nodes.")
            code = base.EXIT_FAILURE
        elif not instances:
            ctx.out("No disks need to be activated.")
    return code


@commands.command(
    "verify",
    opts=[Opt("--error-codes", action="store_true",
              help="print errors in a machine-readable form"),
          Opt("-I", "--ignore-errors", action="append", default=[],
              metavar="ECODE", choices=sorted(opcodes.VERIFY_ERROR_CODES),
              help="treat this error code as a warning (repeatable)"),
          Opt("--verbose", action="store_true", help="say more"),
          Opt("--debug-simulate-errors", action="store_true",
              help="report errors that do not exist (for testing)"),
          Opt("-g", "--node-group", metavar="GROUP",
              help="verify only this node group (and not the"
              " configuration)"),
          Opt("--no-nplus1-mem", dest="skip_nplusone_mem",
              action="store_true", help="skip the N+1 memory checks"),
          Opt("--verify-ssh-clutter", action="store_true",
              help="also check the authorized_keys files")]
    + base.JOB_OPTS,
    help="check the configuration and every node; exit 1 if there are"
    " problems")
def verify(ctx, opts):
    # As Ganeti: the master submits one job for the configuration and one
    # per node group; we follow them and fail if any job or check failed.
    op = ctx.opcode("OP_CLUSTER_VERIFY", error_codes=opts.error_codes,
                    ignore_errors=opts.ignore_errors, verbose=opts.verbose,
                    debug_simulate_errors=opts.debug_simulate_errors,
                    group_name=opts.node_group,
                    skip_checks=(["nplusone_mem"] if opts.skip_nplusone_mem
                                 else []),
                    verify_clutter=opts.verify_ssh_clutter)
    result = ctx.run_op(op)
    if result is None and opts.submit_only:
        return base.EXIT_SUCCESS
    if isinstance(result, bool):
        # a master verifying in the opcode itself
        return base.EXIT_SUCCESS if result else base.EXIT_FAILURE
    bad_jobs = bad_results = 0
    for ok, job_id in (result or {}).get("jobs", []):
        if not ok:
            ctx.err("Failed to submit a verification job: %s" % job_id)
            bad_jobs += 1
            continue
        try:
            results = ctx.poll_job(job_id)
        except errors.GenericError as err:
            msg, _ = common.format_error(err)
            ctx.err("Job %s failed: %s" % (job_id, msg))
            bad_jobs += 1
            continue
        if not (results and results[0]):
            bad_results += 1
    if bad_jobs:
        ctx.out("%s job(s) failed while verifying the cluster." % bad_jobs)
    if bad_jobs or bad_results:
        return base.EXIT_FAILURE
    return base.EXIT_SUCCESS


@commands.command(
    "master-failover",
    opts=[Opt("--no-voting", action="store_true",
              help="do not ask the other master candidates (a two-node"
              " cluster whose master is down); dangerous, see the manual"),
          Opt("--yes-do-it", action="store_true",
              help="with --no-voting: do not ask for confirmation"),
          Opt("--ignore-offline-nodes", action="store_true",
              help="accepted for compatibility (offline nodes are never"
              " asked)")],
    help="make this master candidate the master (run it on the node that"
    " is to become the master)")
def master_failover(ctx, opts):
    from ganeti import masterfailover
    from ganeti.utils.reactor_run import run_in_reactor
    if opts.no_voting and not opts.yes_do_it:
        if not ctx.confirm(
                "Without the vote, this node becomes the master even if the"
                " other master candidates are only out of reach (a split"
                " cluster would then have two masters) or hold a newer"
                " configuration than this node. Use it only when the"
                " master is down for good and too few candidates are left"
                " for a vote (a two-node cluster). Continue?"):
            return base.EXIT_FAILURE
    name = os.environ.get("GANETI_HOSTNAME") or _default_node_name()

    def work(reactor):
        return masterfailover.master_failover(
            reactor, ctx.paths, my_name=name, no_voting=opts.no_voting,
            report=ctx.out)
    started = time.monotonic()
    try:
        result = run_in_reactor(work)
    except masterfailover.FailoverError as err:
        ctx.err("Failure: %s" % err)
        return base.EXIT_FAILURE
    ctx.out("Master failover done in %.1f s: %s is the master (it was %s)"
            % (time.monotonic() - started, result.new_master,
               result.old_master))
    return base.EXIT_SUCCESS


@commands.command("activate-master-ip", opts=base.JOB_OPTS,
                  help="take the cluster's master IP on the master node")
def activate_master_ip(ctx, opts):
    ctx.run_op(ctx.opcode("OP_CLUSTER_ACTIVATE_MASTER_IP"))


@commands.command("deactivate-master-ip",
                  opts=base.JOB_OPTS + [base.FORCE_OPT],
                  help="give the master IP up (clients cannot reach the"
                  " master at it until it is activated again)")
def deactivate_master_ip(ctx, opts):
    if not ctx.confirm("Clients of the remote API and other tools reach the"
                       " master at its master IP; they cannot until"
                       " activate-master-ip. Continue?",
                       skip=opts.force):
        return base.EXIT_FAILURE
    ctx.run_op(ctx.opcode("OP_CLUSTER_DEACTIVATE_MASTER_IP"))


@commands.command("redist-conf", opts=base.JOB_OPTS,
                  help="push the configuration files to every node again")
def redist_conf(ctx, opts):
    ctx.run_op(ctx.opcode("OP_CLUSTER_REDIST_CONF"))


@commands.command(
    "repair-disk-sizes", opts=[base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("instances", nargs="*", metavar="INSTANCE",
              help="instances to check (default: all)")],
    help="make the recorded disk sizes those the nodes measure")
def repair_disk_sizes(ctx, opts):
    # what was corrected is in the job's log, printed as it runs
    ctx.run_op(ctx.opcode("OP_CLUSTER_REPAIR_DISK_SIZES",
                          instances=list(opts.instances)))


# --- renew-crypto and rename -------------------------------------------------

def _read_file(path, option):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise errors.ParameterError(option, "cannot read %s: %s"
                                    % (path, err.strerror))
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise errors.ParameterError(option, "%s is not a text (PEM) file"
                                    % path)


def _refused(opts):
    """What renew-crypto refuses, with the reason (None: nothing)."""
    spice = [name for name, given in (
        ("--new-spice-certificate", opts.new_spice_cert),
        ("--spice-certificate", opts.spice_cert),
        ("--spice-ca-certificate", opts.spice_cacert)) if given]
    if spice:
        return ("%s: this cluster manager has no SPICE consoles, so there is"
                " no SPICE certificate to renew" % ", ".join(spice))
    if opts.new_ssh_keys or opts.ssh_key_type or opts.ssh_key_bits:
        return ("--new-ssh-keys: this cluster manager keeps no SSH keys (its"
                " nodes trust each other by the cluster certificate), so"
                " there are none to renew")
    if opts.new_rapi_cert and opts.rapi_cert:
        return ("Only one of the --new-rapi-certificate and"
                " --rapi-certificate options can be specified at the same"
                " time.")
    if opts.new_cluster_domain_secret and opts.cluster_domain_secret:
        return ("Only one of the --new-cluster-domain-secret and"
                " --cluster-domain-secret options can be specified at the"
                " same time.")
    return None


@commands.command(
    "renew-crypto",
    opts=[Opt("--new-cluster-certificate", dest="new_cluster_cert",
              action="store_true",
              help="generate a new cluster certificate (what every node"
              " daemon presents) and roll it out to every node"),
          Opt("--new-node-certificates", dest="new_node_cert",
              action="store_true",
              help="nodes present the cluster certificate here: the same as"
              " --new-cluster-certificate"),
          Opt("--new-rapi-certificate", dest="new_rapi_cert",
              action="store_true",
              help="generate a new certificate for the remote API"),
          Opt("--rapi-certificate", dest="rapi_cert", metavar="FILE",
              help="use this certificate (with its key, PEM) for the remote"
              " API"),
          Opt("--new-confd-hmac-key", action="store_true",
              help="generate a new HMAC key (confd, self-diagnosis"
              " reports)"),
          Opt("--new-cluster-domain-secret", action="store_true",
              help="generate a new cluster domain secret"),
          Opt("--cluster-domain-secret", metavar="FILE",
              help="use the cluster domain secret in this file"),
          Opt("--new-spice-certificate", dest="new_spice_cert",
              action="store_true", help="refused: there are no SPICE"
              " consoles here"),
          Opt("--spice-certificate", dest="spice_cert", metavar="FILE",
              help="refused: there are no SPICE consoles here"),
          Opt("--spice-ca-certificate", dest="spice_cacert", metavar="FILE",
              help="refused: there are no SPICE consoles here"),
          Opt("--new-ssh-keys", action="store_true",
              help="refused: this cluster manager keeps no SSH keys"),
          Opt("--ssh-key-type", metavar="TYPE",
              help="refused with --new-ssh-keys"),
          Opt("--ssh-key-bits", type=int, metavar="BITS",
              help="refused with --new-ssh-keys"),
          Opt("--no-ssh-key-check", action="store_true",
              help="accepted for compatibility; no effect"),
          base.VERBOSE_OPT, base.FORCE_OPT] + base.JOB_OPTS,
    help="renew the cluster's certificates, keys and secrets on every node,"
    " without stopping daemons or instances")
def renew_crypto(ctx, opts):
    refused = _refused(opts)
    if refused:
        raise base.CommandFailed(refused)
    params = {}
    if opts.new_cluster_cert:
        params["new_cluster_certificate"] = True
    if opts.new_node_cert:
        ctx.out("Nodes present the cluster certificate here:"
                " --new-node-certificates renews it.")
        params["node_certificates"] = True
    if opts.new_rapi_cert:
        params["new_rapi_certificate"] = True
    if opts.rapi_cert:
        params["rapi_certificate"] = _read_file(opts.rapi_cert,
                                                "--rapi-certificate")
    if opts.new_confd_hmac_key:
        params["new_confd_hmac_key"] = True
    if opts.new_cluster_domain_secret:
        params["new_cluster_domain_secret"] = True
    if opts.cluster_domain_secret:
        params["cluster_domain_secret"] = _read_file(
            opts.cluster_domain_secret, "--cluster-domain-secret")
    if not params:
        raise base.CommandFailed(
            "Nothing to renew: give at least one of --new-cluster-certificate"
            " (or --new-node-certificates), --new-confd-hmac-key,"
            " --new-rapi-certificate, --rapi-certificate,"
            " --new-cluster-domain-secret, --cluster-domain-secret")
    if opts.verbose:
        params["verbose"] = True
    op = ctx.opcode("OP_CLUSTER_RENEW_CRYPTO", **params)
    ctx.confirm("This renews the cluster's secrets on every node; daemons and"
                " instances keep running. Continue?", skip=opts.force)
    ctx.out("Updating certificates now. Running \"gnt-cluster verify\" is"
            " recommended after this operation.")
    ctx.run_op(op)
    if opts.submit_only:
        return base.EXIT_SUCCESS
    ctx.out("All requested certificates and keys have been replaced."
            " Running \"gnt-cluster verify\" now is recommended.")
    return base.EXIT_SUCCESS


@commands.command(
    "rename", opts=[base.FORCE_OPT, base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("new_name", metavar="NEW_NAME",
              help="the cluster's new name")],
    help="rename the cluster (its certificate is renewed for the new name"
    " on every node; the master IP stays)")
def rename(ctx, opts):
    try:
        op = ctx.opcode("OP_CLUSTER_RENAME", name=opts.new_name)
    except errors.OpPrereqError as err:
        raise errors.ParameterError("NEW_NAME", err.args[0])
    old_name = ctx.client.query_config_values(["cluster_name"])[0]
    ctx.confirm("This will rename the cluster from '%s' to '%s' and renew"
                " the cluster certificate, which carries the name, on every"
                " node. Continue?" % (old_name, op.name), skip=opts.force)
    result = ctx.run_op(op)
    if result:
        ctx.out("Cluster renamed from '%s' to '%s'" % (old_name, result))
    return base.EXIT_SUCCESS


# --- modify -----------------------------------------------------------------

def _os_mods(text, option):
    if text is None:
        return None
    mods = []
    for item in base.split_list(text):
        action, _, name = item.partition(":")
        if action not in (opcodes.DDM_ADD, opcodes.DDM_REMOVE) or not name:
            raise errors.ParameterError(option, "'%s' is not add:OS or"
                                        " remove:OS" % item)
        mods.append((action, name))
    return mods


def _collectors(text, option, convert):
    if text is None:
        return None
    result = {}
    for key, value in common.parse_keyval(text, option).items():
        try:
            result[key] = convert(value)
        except (ValueError, errors.ParameterError):
            raise errors.ParameterError(option, "invalid value '%s' for %s"
                                        % (value, key))
    return result


def _interval_usec(value):
    if isinstance(value, bool):
        raise ValueError(value)
    return int(float(value) * 1000000)


def _allocators_per_type(specs, option="--default-iallocator-for"):
    """``["relocate=a,b", "node-evacuate=none"]`` as OP_CLUSTER_SET_PARAMS'
    default_iallocators (None: nothing given)."""
    if not specs:
        return None
    result = {}
    for spec in specs:
        mode, sep, names = spec.partition("=")
        mode = mode.strip()
        if not sep or mode not in opcodes.IALLOCATOR_MODES:
            raise errors.ParameterError(
                option, "'%s' is not TYPE=NAME[,NAME...] with TYPE one of %s"
                % (spec, ", ".join(sorted(opcodes.IALLOCATOR_MODES))))
        names = names.strip()
        if names == "default":
            result[mode] = None
        elif names in ("", "none"):
            result[mode] = []
        else:
            result[mode] = base.split_list(names)
    return result


def _allocator_lists(per_type):
    """The per request type lists in the protocol's order (a master that
    does not give them gives none)."""
    order = ["allocate", "multi-allocate", "relocate", "change-group",
             "node-evacuate", "allocate-secondary"]
    per_type = per_type or {}
    return [(mode, per_type[mode]) for mode in order if mode in per_type]


@commands.command(
    "modify",
    opts=IPOLICY_OPTS + [
          VG_OPT, ENABLED_HV_OPT, HV_LIST_OPT, BE_OPT, NIC_OPT, DISKP_OPT,
          UID_POOL_OPT,
          Opt("--add-uids", metavar="POOL", help="add uids to the pool"),
          Opt("--remove-uids", metavar="POOL",
              help="remove uids from the pool"),
          POOL_SIZE_OPT,
          Opt("--max-running-jobs", type=int, metavar="N",
              help="jobs that may run at the same time"),
          Opt("--max-tracked-jobs", type=int, metavar="N",
              help="jobs the scheduler tracks at the same time"),
          MNH_OPT, WIPE_OPT, IALLOC_OPT, IALLOC_FOR_OPT, IALLOC_PARAMS_OPT,
          Opt("--reserved-lvs", metavar="NAMES",
              help="logical volumes verify ignores ('' for none)"),
          NODE_PARAMS_OPT, MAC_PREFIX_OPT, NETDEV_OPT, NETMASK_OPT,
          Opt("--modify-etc-hosts", type=base.yes_no("modify etc hosts"),
              metavar="yes|no", help="maintain /etc/hosts"),
          MIP_SCRIPT_OPT, ENABLED_DT_OPT, DRBD_HELPER_OPT, FILE_DIR_OPT,
          SHARED_DIR_OPT, GLUSTER_DIR_OPT, COMPRESSION_OPT,
          Opt("--instance-communication-network", metavar="NETWORK",
              help="network for instance communication"),
          INSTALL_IMAGE_OPT, ZEROING_IMAGE_OPT, USER_SHUTDOWN_OPT,
          Opt("--enabled-data-collectors", metavar="NAME=BOOL[,...]",
              help="switch data collectors on or off"),
          Opt("--data-collector-interval", metavar="NAME=SECONDS[,...]",
              help="how often data collectors run"),
          Opt("--diagnose-data-collector-filename", metavar="NAME",
              help="the nodes' self-diagnose command: a file of their"
              " /etc/ganeti/node-diagnose-commands ('' for the built-in"
              " diagnose)"),
          Opt("--maintenance-interval", type=int, metavar="SECONDS",
              help="maintenance daemon: seconds between rounds"),
          Opt("--auto-balance-cluster", metavar="yes|no",
              type=base.yes_no("auto balance cluster"),
              help="maintenance daemon: balance the cluster"),
          Opt("--auto-balance-threshold", type=float, metavar="SCORE",
              help="maintenance daemon: balance only for a score gain"
              " above this"),
          Opt("--maintd-harep", metavar="yes|no",
              type=base.yes_no("maintd harep"),
              help="maintenance daemon: do harep's auto-repairs"),
          Opt("--auto-balance-disk-moves", metavar="yes|no",
              type=base.yes_no("auto balance disk moves"),
              help="maintenance daemon: balancing may move disks"),
          Opt("--auto-balance-load", metavar="yes|no",
              type=base.yes_no("auto balance load"),
              help="maintenance daemon: balance with the nodes' load data"),
          Opt("--auto-balance-hold-down", type=int, metavar="SECONDS",
              help="maintenance daemon: an instance moved stays put this"
              " long"),
          Opt("--auto-balance-max-moves", type=int, metavar="N",
              help="maintenance daemon: balancing moves per hour (0: no"
              " limit)"),
          Opt("--hidden-os", metavar="add:OS|remove:OS[,...]",
              help="hide or unhide OSes"),
          Opt("--blacklisted-os", metavar="add:OS|remove:OS[,...]",
              help="blacklist or unblacklist OSes"),
          base.FORCE_OPT, base.DRY_RUN_OPT] + base.JOB_OPTS,
    help="change cluster parameters")
def modify(ctx, opts):
    params = {}

    def put(key, value):
        if value is not None:
            params[key] = value

    put("vg_name", opts.vg_name)
    if opts.enabled_hypervisors is not None:
        params["enabled_hypervisors"] = _hypervisor_list(
            opts.enabled_hypervisors, "--enabled-hypervisors")
    if opts.hvparams:
        params["hvparams"] = base.parse_hv_list(opts.hvparams)
    put("beparams", base.parse_beparams(opts.beparams))
    put("nicparams", _nicparams(opts.nicparams))
    if opts.diskparams:
        params["diskparams"] = _diskparams(opts.diskparams)
    put("uid_pool", _uid_pool(opts.uid_pool))
    put("add_uids", _uid_pool(opts.add_uids, "--add-uids"))
    put("remove_uids", _uid_pool(opts.remove_uids, "--remove-uids"))
    put("candidate_pool_size", opts.candidate_pool_size)
    put("max_running_jobs", opts.max_running_jobs)
    put("max_tracked_jobs", opts.max_tracked_jobs)
    put("maintain_node_health", opts.maintain_node_health)
    put("prealloc_wipe_disks", opts.prealloc_wipe_disks)
    put("default_iallocator", opts.default_iallocator)
    put("default_iallocators", _allocators_per_type(
        opts.default_iallocator_for))
    if opts.default_iallocator_params is not None:
        params["default_iallocator_params"] = common.parse_keyval(
            opts.default_iallocator_params, "--default-iallocator-params")
    put("reserved_lvs", base.split_list(opts.reserved_lvs))
    put("ndparams", base.parse_ndparams(opts.ndparams))
    put("mac_prefix", _mac_prefix(opts.mac_prefix))
    put("master_netdev", opts.master_netdev)
    put("master_netmask", opts.master_netmask)
    put("modify_etc_hosts", opts.modify_etc_hosts)
    put("use_external_mip_script", opts.use_external_mip_script)
    if opts.enabled_disk_templates is not None:
        params["enabled_disk_templates"] = _disk_template_list(
            opts.enabled_disk_templates, "--enabled-disk-templates")
    put("drbd_helper", opts.drbd_usermode_helper)
    put("file_storage_dir", opts.file_storage_dir)
    put("shared_file_storage_dir", opts.shared_file_storage_dir)
    put("gluster_storage_dir", opts.gluster_storage_dir)
    put("compression_tools", base.split_list(opts.compression_tools))
    put("instance_communication_network",
        opts.instance_communication_network)
    put("install_image", opts.install_image)
    put("zeroing_image", opts.zeroing_image)
    put("enabled_user_shutdown", opts.enabled_user_shutdown)
    put("enabled_data_collectors", _collectors(
        opts.enabled_data_collectors, "--enabled-data-collectors",
        lambda v: base.parse_bool(v, "--enabled-data-collectors")))
    put("data_collector_interval", _collectors(
        opts.data_collector_interval, "--data-collector-interval",
        _interval_usec))
    put("diagnose_data_collector_filename",
        opts.diagnose_data_collector_filename)
    put("ipolicy", gnt_group.ipolicy_params(opts, cluster=True) or None)
    put("hidden_os", _os_mods(opts.hidden_os, "--hidden-os"))
    put("blacklisted_os", _os_mods(opts.blacklisted_os, "--blacklisted-os"))
    put("maint_round_delay", opts.maintenance_interval)
    put("maint_balance", opts.auto_balance_cluster)
    put("maint_balance_threshold", opts.auto_balance_threshold)
    put("maint_harep", opts.maintd_harep)
    put("maint_balance_disk_moves", opts.auto_balance_disk_moves)
    put("maint_balance_load", opts.auto_balance_load)
    put("maint_balance_hold_down", opts.auto_balance_hold_down)
    put("maint_balance_max_moves", opts.auto_balance_max_moves)
    if not params:
        raise base.CommandFailed("Please give at least one of the"
                                 " parameters.")
    if opts.force:
        params["force"] = True
    ctx.run_op(ctx.opcode("OP_CLUSTER_SET_PARAMS", **params))


# --- the maintenance daemon's incidents ---------------------------------------

@commands.command(
    "repair-list", opts=[base.NOHDR_OPT, base.SEP_OPT],
    help="list the incidents the maintenance daemon tracks")
def repair_list(ctx, opts):
    m = ctx.client.query_cluster_info().get("maintenance") or {}
    rows = [[inc["id"], inc.get("node_name") or inc.get("node"),
             inc.get("action"), inc.get("repair-status"),
             ",".join(str(j) for j in inc.get("jobs") or []),
             inc.get("tag") or ""]
            for inc in m.get("incidents") or []]
    for line in common.format_table(
            ["ID", "Node", "Action", "Status", "Jobs", "Tag"], rows,
            separator=opts.separator, no_headers=opts.no_headers):
        ctx.out(line)


@commands.command(
    "repair-cancel", args=[Opt("incident", metavar="ID",
                               help="the incident (gnt-cluster"
                               " repair-list)")],
    opts=base.JOB_OPTS,
    help="make the maintenance daemon take no more action for an incident")
def repair_cancel(ctx, opts):
    ctx.run_op(ctx.opcode("OP_CLUSTER_REPAIR_CANCEL",
                          incident_id=opts.incident))


# --- the job queue and the watcher --------------------------------------------

@commands.command(
    "queue", args=[Opt("action", choices=["drain", "undrain", "info"],
                       help="drain: accept no new jobs; undrain: accept"
                       " them again; info: show the drain flag")],
    help="change or show the job queue's drain flag")
def queue(ctx, opts):
    if opts.action == "drain":
        ctx.client.set_drain_flag(True)
    elif opts.action == "undrain":
        ctx.client.set_drain_flag(False)
    else:
        drained = ctx.client.query_config_values(["drain_flag"])[0]
        ctx.out("The drain flag is %s" % ("set" if drained else "unset"))


@commands.command(
    "watcher",
    args=[Opt("action", choices=["pause", "continue", "info"],
              help="pause DURATION, continue, or info"),
          Opt("duration", nargs="?", metavar="DURATION",
              help="seconds to pause (pause only; s, m, h, d, w suffixes)")],
    help="pause the watcher, let it continue, or show its state")
def watcher(ctx, opts):
    if opts.action == "pause":
        if not opts.duration:
            raise base.UsageError("watcher pause needs a duration")
        until = time.time() + _parse_duration(opts.duration)
        result = ctx.client.set_watcher_pause(until)
        ctx.out("The watcher is paused until %s."
                % time.ctime(result if isinstance(result, (int, float))
                             else until))
    elif opts.action == "continue":
        ctx.client.set_watcher_pause(None)
        ctx.out("The watcher is no longer paused.")
    else:
        until = ctx.client.query_config_values(["watcher_pause"])[0]
        if until is None or until < time.time():
            ctx.out("The watcher is not paused.")
        else:
            ctx.out("The watcher is paused until %s." % time.ctime(until))


def _parse_duration(text):
    factors = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    text = text.strip()
    factor = 1
    if text and text[-1].lower() in factors:
        factor = factors[text[-1].lower()]
        text = text[:-1]
    try:
        value = float(text)
    except ValueError:
        raise errors.ParameterError("duration", "'%s' is not a duration"
                                    % text)
    if value < 0:
        raise errors.ParameterError("duration", "must not be negative")
    return value * factor


# --- tags ---------------------------------------------------------------------

base.tag_commands(commands, constants.TAG_CLUSTER)


@commands.command("search-tags",
                  args=[Opt("pattern", help="regular expression")],
                  help="find objects whose tags match a regular expression;"
                  " exit 1 if none does")
def search_tags(ctx, opts):
    result = ctx.run_op(ctx.opcode("OP_TAGS_SEARCH", pattern=opts.pattern))
    if not result:
        return base.EXIT_FAILURE
    for path, tag in sorted(result):
        ctx.out("%s %s" % (path, tag))
    return base.EXIT_SUCCESS


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
