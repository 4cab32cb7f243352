"""gnt-instance: create, change, start, stop and look at instances.

We do no DNS lookups: instance and node names are sent as given and the
master resolves them against its configuration (``--no-name-check`` and
``--no-ip-check`` are accepted and passed on).
"""

import os
import shlex
import socket
import subprocess
import time

from ganeti import constants
from ganeti import errors
from ganeti import leases
from ganeti import opcodes
from ganeti.cli import base
from ganeti.cli import common
from ganeti.cli.base import Group, Opt

PROGRAM = "gnt-instance"
commands = base.CommandTable(PROGRAM, "Instance administration.")

LIST_FIELDS = ["name", "hypervisor", "os", "pnode", "status", "oper_ram"]

DEFAULT_SHUTDOWN_TIMEOUT = 120

#: Disk parameters that are sizes, and integers
_DISK_SIZES = ("size",)
_DISK_INTS = ("spindles",)

_DEVICE_ACTIONS = (opcodes.DDM_ADD, opcodes.DDM_ATTACH, opcodes.DDM_MODIFY,
                   opcodes.DDM_REMOVE, opcodes.DDM_DETACH)


# --- parsing --------------------------------------------------------------------

def _index(ident, option):
    try:
        value = int(ident)
    except ValueError:
        raise errors.ParameterError(option, "'%s' is not a device index"
                                    % ident)
    if value < 0:
        raise errors.ParameterError(option, "index %d is negative" % value)
    return value


def _indexed_specs(specs, option):
    """``["0:size=1G", "1:size=2G"]`` -> ``{0: {...}, 1: {...}}``."""
    result = {}
    for spec in specs or []:
        ident, params = common.parse_ident_keyval(spec, option)
        idx = _index(ident, option)
        if idx in result:
            raise errors.ParameterError(option, "index %d given twice" % idx)
        result[idx] = params
    return result


def _disk_params(params, option, index=None):
    where = option if index is None else "%s %d" % (option, index)
    result = {}
    for key, value in params.items():
        if value is True or value is False or value is None:
            raise errors.ParameterError(where, "'%s' needs a value (%s=...)"
                                        % (key, key))
        if key in _DISK_SIZES:
            try:
                value = common.parse_unit(value)
            except errors.UnitParseError as err:
                raise errors.ParameterError("%s %s" % (where, key), str(err))
        elif key in _DISK_INTS:
            try:
                value = int(value)
            except ValueError:
                raise errors.ParameterError("%s %s" % (where, key),
                                            "'%s' is not an integer" % value)
        result[key] = value
    return result


def parse_disks(disk_specs, os_size, template):
    """The ``disks`` of OP_INSTANCE_CREATE from --disk / -s."""
    if disk_specs and os_size:
        raise errors.ParameterError("--disk", "--disk and -s cannot be used"
                                    " together")
    if template == constants.DT_DISKLESS:
        if disk_specs or os_size:
            raise errors.ParameterError("--disk", "a diskless instance"
                                        " takes no disk information")
        return []
    if os_size:
        try:
            return [{"size": common.parse_unit(os_size)}]
        except errors.UnitParseError as err:
            raise errors.ParameterError("-s", str(err))
    if not disk_specs:
        raise errors.ParameterError(
            "--disk", "no disk information given (use --disk N:size=SIZE or"
            " -s SIZE, or -t diskless)")
    specs = _indexed_specs(disk_specs, "--disk")
    disks = []
    for idx in range(max(specs) + 1):
        if idx not in specs:
            raise errors.ParameterError("--disk", "disk %d is missing (disks"
                                        " are numbered from 0)" % idx)
        params = _disk_params(specs[idx], "--disk", idx)
        if "size" not in params and "adopt" not in params:
            raise errors.ParameterError("--disk %d" % idx, "a size (size=...)"
                                        " or an adoption source (adopt=...)"
                                        " is needed")
        disks.append(params)
    return disks


def _nic_params(params, where):
    result = {}
    for key, value in params.items():
        if key not in opcodes.INIC_PARAMS:
            raise errors.ParameterError(
                where, "unknown NIC parameter '%s' (known: %s)"
                % (key, ", ".join(sorted(opcodes.INIC_PARAMS))))
        if value is True or value is False:
            raise errors.ParameterError(where, "'%s' needs a value (%s=...)"
                                        % (key, key))
        result[key] = value
    return result


def parse_nics(net_specs, no_nics):
    """The ``nics`` of OP_INSTANCE_CREATE from --net / --no-nics."""
    if no_nics:
        if net_specs:
            raise errors.ParameterError("--net", "--net and --no-nics cannot"
                                        " be used together")
        return []
    if not net_specs:
        return [{}]
    specs = _indexed_specs(net_specs, "--net")
    return [_nic_params(specs.get(idx, {}), "--net %d" % idx)
            for idx in range(max(specs) + 1)]


def _all_hv_types():
    types = {}
    for hv in constants.HVC_DEFAULTS:
        types.update(base.hv_types(hv))
    return types


def parse_plain_hvparams(text, option="-H"):
    """``-H key=val,...`` of modify/startup: types from every hypervisor."""
    if text is None:
        return None
    return base._typed(common.parse_keyval(text, option), _all_hv_types(),
                       option)


_OSPARAMS_OPT = Opt("-O", "--os-parameters", dest="osparams",
                    metavar="KEY=VAL", help="OS parameters")
_OSPARAMS_PRIVATE_OPT = Opt("--os-parameters-private", dest="osparams_private",
                            metavar="KEY=VAL",
                            help="OS parameters kept out of logs")
_OSPARAMS_SECRET_OPT = Opt("--os-parameters-secret", dest="osparams_secret",
                           metavar="KEY=VAL",
                           help="OS parameters never stored")
_FORCE_VARIANT_OPT = Opt("--force-variant", action="store_true",
                         help="accept an unknown OS variant")
_FILE_DRIVER_OPT = Opt("--file-driver", choices=sorted(opcodes.FILE_DRIVERS),
                       help="driver of file disks")


def _file_storage_params(opts):
    """The file disk options of add and modify given, by opcode field."""
    return {key: getattr(opts, key)
            for key in ("file_storage_dir", "file_driver")
            if getattr(opts, key)}


def _osparams(text, option):
    if text is None:
        return None
    return common.parse_keyval(text, option)


def _all_osparams(opts):
    """The OS parameters of add and reinstall (-O, --os-parameters-private,
    --os-parameters-secret) given, by opcode field."""
    params = {}
    for key, option in (("osparams", "-O"),
                        ("osparams_private", "--os-parameters-private"),
                        ("osparams_secret", "--os-parameters-secret")):
        value = _osparams(getattr(opts, key), option)
        if value is not None:
            params[key] = value
    return params


def parse_device_mods(specs, option, params_fn):
    """``--disk``/``--net`` of modify as ``[action, index, params]``.

    Forms: ``add:size=1G``, ``2:add,size=1G``, ``1:remove``, ``remove``,
    ``0:modify,mode=ro``, ``0:mode=ro`` (modify), ``name:remove``.
    """
    mods = []
    for spec in specs or []:
        ident, params = common.parse_ident_keyval(spec, option)
        if ident in _DEVICE_ACTIONS:
            action = ident
            index = -1
        else:
            actions = [a for a in _DEVICE_ACTIONS if params.get(a) is True]
            if len(actions) > 1:
                raise errors.ParameterError(option, "more than one action in"
                                            " '%s'" % spec)
            action = actions[0] if actions else opcodes.DDM_MODIFY
            for a in actions:
                del params[a]
            index = int(ident) if ident.lstrip("-").isdigit() else ident
        if action in (opcodes.DDM_REMOVE, opcodes.DDM_DETACH) and params:
            raise errors.ParameterError(option, "'%s' takes no parameters"
                                        % action)
        if action == opcodes.DDM_MODIFY and not params:
            raise errors.ParameterError(option, "nothing to modify in '%s'"
                                        % spec)
        mods.append([action, index, params_fn(params, option)])
    return mods


def _mod_nic_params(params, option):
    return _nic_params(params, option)


def _mod_disk_params(params, option):
    return _disk_params(params, option)


# --- selecting several instances -----------------------------------------------

_SELECT_OPTS = [
    base.select_opt("instance", "the arguments are instance names (default)"),
    base.select_opt("node", "the instances with a node in the arguments"),
    base.select_opt("primary",
                    "the instances whose primary node is an argument"),
    base.select_opt("secondary",
                    "the instances whose secondary node is an argument"),
    base.select_opt("all", "every instance (no arguments)"),
    base.select_opt("tags",
                    "the instances with any of the tags in the arguments"),
    Opt("--force-multiple", action="store_true",
        help="do not ask before acting on several instances"),
]


def select_instances(ctx, opts, action):
    """The instance names a multi-instance command works on."""
    mode = getattr(opts, "select", None) or "instance"
    args = list(opts.names)
    if mode == "instance":
        if not args:
            raise base.UsageError("no instance name given")
        names = args
    else:
        if mode == "all":
            if args:
                raise base.UsageError("--all takes no arguments")
            qfilter = None
        elif not args:
            raise base.UsageError("--%s needs at least one argument" % mode)
        elif mode == "primary":
            qfilter = ["|"] + [["=", "pnode", a] for a in args]
        elif mode == "secondary":
            qfilter = ["|"] + [["=[]", "snodes", a] for a in args]
        elif mode == "node":
            qfilter = ["|"] + [["=", "pnode", a] for a in args] + \
                [["=[]", "snodes", a] for a in args]
        else:
            qfilter = ["|"] + [["=[]", "tags", a] for a in args]
        response = ctx.client.query("instance", ["name"], qfilter)
        names = [row[0][1] for row in response["data"] if row[0][0] == 0]
        if not names:
            raise base.CommandFailed("Failure: no instance selected")
    if len(names) > 1:
        ctx.confirm("The %s will operate on %d instances:\n%s\nContinue?"
                    % (action, len(names),
                       "\n".join("  %s" % n for n in names)),
                    skip=getattr(opts, "force_multiple", False))
    return names


def _run_per_instance(ctx, names, make_op):
    jobs = [(name, [make_op(name)]) for name in names]
    results = ctx.run_jobs(jobs)
    if len(names) == 1:
        return base.EXIT_SUCCESS
    if any(not ok for _, ok, _ in results):
        return base.EXIT_FAILURE
    return base.EXIT_SUCCESS


# --- add ------------------------------------------------------------------------

#: the options of ``add`` (``gnt-backup import`` takes them too)
ADD_OPTS = [
        Opt("-t", "--disk-template", choices=sorted(constants.DISK_TEMPLATES),
            help="disk template (default: the cluster's first enabled one)"),
        Opt("--disk", action="append", metavar="N:size=SIZE[,KEY=VAL...]",
            help="disk N (repeatable): size, mode (rw/ro), name, vg,"
            " metavg, spindles, adopt, provider, access"),
        Opt("-s", "--os-size", metavar="SIZE",
            help="one disk of this size (instead of --disk)"),
        Opt("--no-ip-check", dest="ip_check", action="store_false",
            help="do not check that the instance's IP is unused"),
        Opt("--no-name-check", dest="name_check", action="store_false",
            help="do not resolve the instance name"),
        Opt("--no-conflicts-check", dest="conflicts_check",
            action="store_false", help="do not check for IP conflicts"),
        Opt("--no-start", dest="start", action="store_false",
            help="leave the instance stopped after creating it"),
        Opt("--no-install", action="store_true",
            help="do not run the OS install scripts (implies --no-start)"),
        base.Group(Opt("--forthcoming", action="store_true",
                       help="only reserve the resources (a forthcoming"
                       " instance)"),
                   Opt("--commit", action="store_true",
                       help="create the forthcoming instance of this name"
                       " for real")),
        Opt("--lease-until", metavar="TIME",
            help="with --forthcoming: the reservation ends (is removed) at"
            " TIME, an ISO 8601 UTC time like 2026-12-01T12:00:00Z or a"
            " duration from now like +2h or +3d"),
        Opt("--net", action="append", metavar="N[:KEY=VAL,...]",
            help="NIC N (repeatable): mac, ip, mode, link, network, name,"
            " vlan"),
        Opt("--no-nics", action="store_true", help="create no NIC"),
        Opt("-B", "--backend-parameters", dest="beparams",
            metavar="KEY=VAL[,...]",
            help="backend parameters: maxmem, minmem, memory, vcpus, ..."),
        Opt("-H", "--hypervisor-parameters", dest="hypervisor",
            metavar="HV[:KEY=VAL,...]",
            help="hypervisor and its parameters for this instance"),
        _OSPARAMS_OPT,
        _OSPARAMS_PRIVATE_OPT,
        _OSPARAMS_SECRET_OPT,
        Opt("--file-storage-dir", metavar="DIR",
            help="directory of file disks (relative to the cluster's)"),
        _FILE_DRIVER_OPT,
        Opt("-n", "--node", metavar="PNODE[:SNODE]",
            help="primary (and secondary) node"),
        Opt("-I", "--iallocator", metavar="NAME",
            help="let this allocator choose the nodes (default without"
            " -n: the cluster's for allocate requests)"),
        base.IALLOCATOR_PARAMS_OPT,
        Opt("--opportunistic-locking", action="store_true",
            help="with an allocator: lock only the nodes free right now,"
            " without waiting for the others, and place the instance among"
            " them (fails with a temporary error if none fits)"),
        Opt("-g", "--node-group", metavar="GROUP",
            help="node group to place the instance in"),
        Opt("-o", "--os-type", metavar="OS[+VARIANT]",
            help="operating system to install"),
        base.IGNORE_IPOLICY_OPT,
        Opt("--no-wait-for-sync", dest="wait_for_sync", action="store_false",
            help="do not wait for mirrored disks to sync"),
        Opt("--tags", metavar="TAG[,TAG...]", help="tags of the instance"),
        base.DRY_RUN_OPT,
    ] + base.JOB_OPTS


@commands.command(
    "add", opts=ADD_OPTS,
    args=[Opt("instance", metavar="INSTANCE", help="name of the instance")],
    help="create an instance")
def add(ctx, opts):
    ctx.run_op(create_opcode(ctx, opts))


def create_opcode(ctx, opts, mode=opcodes.INSTANCE_CREATE, **extra):
    """OP_INSTANCE_CREATE for ``gnt-instance add`` options (``mode``
    import: ``gnt-backup import``; disks and NICs not given then come from
    the export)."""
    template = opts.disk_template
    importing = mode == opcodes.INSTANCE_IMPORT
    if importing and not (opts.disk or opts.os_size):
        disks = []
    else:
        disks = parse_disks(opts.disk, opts.os_size, template)
    if importing and not (opts.net or opts.no_nics):
        nics = []
    else:
        nics = parse_nics(opts.net, opts.no_nics)
    params = {
        "instance_name": opts.instance,
        "mode": mode,
        "disks": disks,
        "nics": nics,
        "disk_template": template,
        "beparams": base.parse_beparams(opts.beparams) or {},
        "os_type": opts.os_type,
        "start": opts.start,
        "name_check": opts.name_check,
        "ip_check": opts.ip_check,
        "conflicts_check": opts.conflicts_check,
        "wait_for_sync": opts.wait_for_sync,
        "ignore_ipolicy": opts.ignore_ipolicy,
        "forthcoming": opts.forthcoming,
        "commit": opts.commit,
    }
    if opts.no_install:
        params["no_install"] = True
    if opts.hypervisor:
        hv, hvparams = base.parse_hv_spec(opts.hypervisor, "-H")
        params["hypervisor"] = hv
        params["hvparams"] = hvparams
    params.update(_all_osparams(opts))
    if opts.node and opts.iallocator:
        raise errors.ParameterError("-n", "give either -n or -I, not both")
    if opts.node:
        pnode, _, snode = opts.node.partition(":")
        if not pnode:
            raise errors.ParameterError("-n", "no primary node in '%s'"
                                        % opts.node)
        params["pnode"] = pnode
        if snode:
            params["snode"] = snode
    if opts.iallocator:
        params["iallocator"] = opts.iallocator
    params.update(_allocator_params(opts))
    params["opportunistic_locking"] = opts.opportunistic_locking
    if opts.node_group:
        params["group_name"] = opts.node_group
    params.update(_file_storage_params(opts))
    if opts.tags:
        params["tags"] = base.split_list(opts.tags)
    lease = getattr(opts, "lease_until", None)
    if lease is not None:
        if not opts.forthcoming:
            raise errors.ParameterError(
                "--lease-until", "only a forthcoming instance (a"
                " reservation, --forthcoming) can have a lease")
        params["lease_until"] = _lease_until(lease, allow_unlimited=False)
    params.update(extra)
    return ctx.opcode("OP_INSTANCE_CREATE", **params)


def _lease_until(text, allow_unlimited):
    """``--lease-until`` checked here (form, not in the past); the master
    resolves a duration from its own clock when the job runs."""
    try:
        leases.parse(text, time.time(), field="--lease-until",
                     allow_unlimited=allow_unlimited)
    except errors.OpPrereqError as err:
        raise errors.ParameterError("--lease-until",
                                    str(err.args[0]).split(": ", 1)[-1])
    return text.strip()


# --- remove, start, stop, reboot ---------------------------------------------------

@commands.command(
    "remove",
    opts=[Opt("--ignore-failures", action="store_true",
              help="go on even if shutting down or removing disks fails"),
          Opt("--shutdown-timeout", type=int,
              default=DEFAULT_SHUTDOWN_TIMEOUT, metavar="SECONDS",
              help="how long to wait for a clean shutdown (default 120)"),
          base.FORCE_OPT, base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE")],
    help="remove an instance and all its data")
def remove(ctx, opts):
    ctx.confirm("This removes the instance %s and all its disks, for"
                " good. Continue?" % opts.instance, skip=opts.force)
    ctx.run_op(ctx.opcode("OP_INSTANCE_REMOVE", instance_name=opts.instance,
                          ignore_failures=opts.ignore_failures,
                          shutdown_timeout=opts.shutdown_timeout))


_NAMES_ARG = Opt("names", nargs="*", metavar="INSTANCE",
                 help="instances (or nodes/tags, see the selection options)")


@commands.command(
    "startup", aliases=["start"],
    opts=[base.FORCE_OPT,
          Opt("--ignore-offline", action="store_true",
              help="mark as started even if the primary node is offline"),
          Opt("--no-remember", action="store_true",
              help="start without recording it in the configuration"),
          Opt("-H", "--hypervisor-parameters", dest="hvparams",
              metavar="KEY=VAL[,...]",
              help="hypervisor parameters for this start only"),
          Opt("-B", "--backend-parameters", dest="beparams",
              metavar="KEY=VAL[,...]",
              help="backend parameters for this start only"),
          Opt("--paused", action="store_true",
              help="start paused (unpause from the console)"),
          base.DRY_RUN_OPT] + _SELECT_OPTS + base.JOB_OPTS,
    args=[_NAMES_ARG],
    help="start instances")
def startup(ctx, opts):
    names = select_instances(ctx, opts, "startup")
    hvparams = parse_plain_hvparams(opts.hvparams) or {}
    beparams = base.parse_beparams(opts.beparams) or {}
    return _run_per_instance(ctx, names, lambda name: ctx.opcode(
        "OP_INSTANCE_STARTUP", instance_name=name, force=opts.force,
        ignore_offline_nodes=opts.ignore_offline,
        no_remember=opts.no_remember, hvparams=hvparams,
        beparams=beparams, startup_paused=opts.paused))


@commands.command(
    "shutdown", aliases=["stop"],
    opts=[Opt("--timeout", type=int, default=DEFAULT_SHUTDOWN_TIMEOUT,
              metavar="SECONDS",
              help="how long to wait for a clean shutdown before forcing it"
              " (default 120)"),
          base.FORCE_OPT,
          Opt("--ignore-offline", action="store_true",
              help="mark as stopped even if the primary node is offline"),
          Opt("--no-remember", action="store_true",
              help="stop without recording it in the configuration"),
          base.DRY_RUN_OPT] + _SELECT_OPTS + base.JOB_OPTS,
    args=[_NAMES_ARG],
    help="stop instances")
def shutdown(ctx, opts):
    if opts.timeout < 0:
        raise errors.ParameterError("--timeout", "must not be negative")
    names = select_instances(ctx, opts, "shutdown")
    return _run_per_instance(ctx, names, lambda name: ctx.opcode(
        "OP_INSTANCE_SHUTDOWN", instance_name=name, force=opts.force,
        ignore_offline_nodes=opts.ignore_offline, timeout=opts.timeout,
        no_remember=opts.no_remember))


@commands.command(
    "reboot",
    opts=[Opt("-t", "--type", dest="reboot_type",
              choices=sorted(opcodes.REBOOT_TYPES),
              default=opcodes.REBOOT_HARD,
              help="soft: inside the hypervisor; hard (default): stop and"
              " start the VM; full: shutdown and startup"),
          Opt("--ignore-secondaries", action="store_true",
              help="ignore errors of secondary nodes"),
          Opt("--shutdown-timeout", type=int,
              default=DEFAULT_SHUTDOWN_TIMEOUT, metavar="SECONDS",
              help="how long to wait for a clean shutdown (default 120)"),
          base.DRY_RUN_OPT] + _SELECT_OPTS + base.JOB_OPTS,
    args=[_NAMES_ARG],
    help="reboot instances")
def reboot(ctx, opts):
    names = select_instances(ctx, opts, "reboot")
    return _run_per_instance(ctx, names, lambda name: ctx.opcode(
        "OP_INSTANCE_REBOOT", instance_name=name,
        reboot_type=opts.reboot_type,
        ignore_secondaries=opts.ignore_secondaries,
        shutdown_timeout=opts.shutdown_timeout))


@commands.command(
    "rename",
    opts=[Opt("--no-ip-check", dest="ip_check", action="store_false",
              help="do not check that the new IP is unused"),
          Opt("--no-name-check", dest="name_check", action="store_false",
              help="do not resolve the new name"),
          base.FORCE_OPT, base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE"),
          Opt("new_name", metavar="NEW_NAME")],
    help="rename a (stopped) instance")
def rename(ctx, opts):
    result = ctx.run_op(ctx.opcode(
        "OP_INSTANCE_RENAME", instance_name=opts.instance,
        new_name=opts.new_name, name_check=opts.name_check,
        ip_check=opts.ip_check))
    if result and result != opts.new_name:
        ctx.out("Instance '%s' renamed to '%s'" % (opts.instance, result))


# --- modify, reinstall -------------------------------------------------------------

@commands.command(
    "modify",
    opts=[Opt("-H", "--hypervisor-parameters", dest="hvparams",
              metavar="KEY=VAL[,...]", help="hypervisor parameters"),
          Opt("-B", "--backend-parameters", dest="beparams",
              metavar="KEY=VAL[,...]", help="backend parameters"),
          Opt("-m", "--runtime-memory", metavar="SIZE",
              help="balloon the running instance to this memory size"),
          Opt("--net", action="append", metavar="ACTION",
              help="add[:KEY=VAL,...], N:add,..., ID:remove,"
              " ID:modify,KEY=VAL (repeatable)"),
          Opt("--disk", action="append", metavar="ACTION",
              help="add:size=SIZE[,...], N:add,size=..., ID:remove,"
              " ID:modify,mode=ro (repeatable)"),
          Opt("-t", "--disk-template", choices=sorted(
              constants.DISK_TEMPLATES), help="convert the disks"),
          Opt("-n", "--node", dest="remote_node", metavar="NODE",
              help="new secondary node (with -t drbd)"),
          Opt("--new-primary", metavar="NODE",
              help="set the primary node (disks already moved)"),
          Opt("--os-type", "-o", dest="os_type", metavar="OS",
              help="change the OS (no reinstall)"),
          _FORCE_VARIANT_OPT,
          _OSPARAMS_OPT,
          _OSPARAMS_PRIVATE_OPT,
          base.Group(Opt("--offline", dest="offline", action="store_const",
                         const=True, help="mark the (stopped) instance"
                         " offline"),
                     Opt("--online", dest="offline", action="store_const",
                         const=False, help="bring an offline instance back"
                         " (stopped)")),
          base.IGNORE_IPOLICY_OPT,
          Opt("--hotplug", action="store_true",
              help="apply disk/NIC changes to the running instance"),
          Opt("--hotplug-if-possible", action="store_true",
              help="hotplug where the hypervisor can"),
          Opt("--no-wait-for-sync", dest="wait_for_sync",
              action="store_false", help="do not wait for disks to sync"),
          Opt("--file-storage-dir", metavar="DIR",
              help="directory of file disks (with -t file)"),
          _FILE_DRIVER_OPT,
          Opt("--lease-until", metavar="TIME",
              help="move the end of a forthcoming instance's lease to TIME"
              " (ISO 8601 UTC like 2026-12-01T12:00:00Z, or +2h, +3d from"
              " now), or none for an unlimited reservation"),
          base.FORCE_OPT, base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE")],
    help="change instance parameters, disks and NICs")
def modify(ctx, opts):
    params = {}
    hvparams = parse_plain_hvparams(opts.hvparams)
    if hvparams:
        params["hvparams"] = hvparams
    beparams = base.parse_beparams(opts.beparams)
    if beparams:
        params["beparams"] = beparams
    if opts.runtime_memory:
        try:
            params["runtime_mem"] = common.parse_unit(opts.runtime_memory)
        except errors.UnitParseError as err:
            raise errors.ParameterError("-m", str(err))
    nics = parse_device_mods(opts.net, "--net", _mod_nic_params)
    if nics:
        params["nics"] = nics
    disks = parse_device_mods(opts.disk, "--disk", _mod_disk_params)
    if disks:
        params["disks"] = disks
    if opts.disk_template:
        params["disk_template"] = opts.disk_template
    if opts.remote_node:
        params["remote_node"] = opts.remote_node
    if opts.new_primary:
        params["pnode"] = opts.new_primary
    if opts.os_type:
        params["os_name"] = opts.os_type
    osparams = _osparams(opts.osparams, "-O")
    if osparams:
        params["osparams"] = osparams
    private = _osparams(opts.osparams_private, "--os-parameters-private")
    if private:
        params["osparams_private"] = private
    if opts.offline is not None:
        params["offline"] = opts.offline
    if opts.lease_until is not None:
        params["lease_until"] = _lease_until(opts.lease_until,
                                             allow_unlimited=True)
    params.update(_file_storage_params(opts))
    if not params:
        raise base.CommandFailed("Please give at least one of the"
                                 " parameters.")
    for flag in ("force", "force_variant", "ignore_ipolicy", "hotplug",
                 "hotplug_if_possible"):
        if getattr(opts, flag):
            params[flag] = True
    if not opts.wait_for_sync:
        params["wait_for_sync"] = False
    result = ctx.run_op(ctx.opcode("OP_INSTANCE_SET_PARAMS",
                                   instance_name=opts.instance, **params))
    if result is None:
        return base.EXIT_SUCCESS
    if result:
        ctx.out("Modified instance %s" % opts.instance)
        for change in result:
            if isinstance(change, (list, tuple)) and len(change) == 2:
                ctx.out(" - %-5s -> %s" % (change[0], change[1]))
            else:
                ctx.out(" - %s" % (change,))
        ctx.out("Most changes take effect at the next start of the instance"
                " by Ganeti (a reboot from inside it is not enough).")
    else:
        ctx.out("Nothing changed on instance %s" % opts.instance)


@commands.command(
    "reinstall",
    opts=[Opt("-o", "--os-type", metavar="OS",
              help="install this OS instead of the current one"),
          _OSPARAMS_OPT,
          _OSPARAMS_PRIVATE_OPT,
          _OSPARAMS_SECRET_OPT,
          _FORCE_VARIANT_OPT,
          base.FORCE_OPT] + _SELECT_OPTS + base.JOB_OPTS,
    args=[_NAMES_ARG],
    help="reinstall the OS of (stopped) instances, erasing their disks")
def reinstall(ctx, opts):
    names = select_instances(ctx, opts, "reinstall")
    if len(names) == 1:
        ctx.confirm("This reinstalls the OS of %s, erasing its disks."
                    " Continue?" % names[0], skip=opts.force)
    params = {"force_variant": opts.force_variant}
    if opts.os_type:
        params["os_type"] = opts.os_type
    params.update(_all_osparams(opts))
    return _run_per_instance(ctx, names, lambda name: ctx.opcode(
        "OP_INSTANCE_REINSTALL", instance_name=name, **params))


# --- disks --------------------------------------------------------------------------

@commands.command(
    "activate-disks",
    opts=[Opt("--ignore-size", action="store_true",
              help="ignore the recorded disk sizes"),
          Opt("--wait-for-sync", action="store_true",
              help="wait until mirrored disks are in sync")] + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE")],
    help="make the disks of a stopped instance available on its node")
def activate_disks(ctx, opts):
    result = ctx.run_op(ctx.opcode(
        "OP_INSTANCE_ACTIVATE_DISKS", instance_name=opts.instance,
        ignore_size=opts.ignore_size, wait_for_sync=opts.wait_for_sync))
    for entry in result or []:
        ctx.out(":".join("%s" % (v,) for v in entry))


@commands.command(
    "deactivate-disks", opts=[base.FORCE_OPT] + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE")],
    help="release the disks of a stopped instance")
def deactivate_disks(ctx, opts):
    ctx.run_op(ctx.opcode("OP_INSTANCE_DEACTIVATE_DISKS",
                          instance_name=opts.instance, force=opts.force))


@commands.command(
    "grow-disk",
    opts=[Opt("--absolute", action="store_true",
              help="AMOUNT is the new size, not the increase"),
          Opt("--no-wait-for-sync", dest="wait_for_sync",
              action="store_false", help="do not wait for the resync"),
          base.IGNORE_IPOLICY_OPT] + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE"),
          Opt("disk", metavar="DISK", help="disk index"),
          Opt("amount", metavar="AMOUNT", help="size (M, G, T suffixes)")],
    help="grow a disk of an instance")
def grow_disk(ctx, opts):
    disk = _index(opts.disk, "DISK")
    try:
        amount = common.parse_unit(opts.amount)
    except errors.UnitParseError as err:
        raise errors.ParameterError("AMOUNT", str(err))
    ctx.run_op(ctx.opcode(
        "OP_INSTANCE_GROW_DISK", instance_name=opts.instance, disk=disk,
        amount=amount, absolute=opts.absolute,
        wait_for_sync=opts.wait_for_sync,
        ignore_ipolicy=opts.ignore_ipolicy))


#: how ``gnt-instance console`` runs a console command (argv -> exit
#: code), with the terminal of the caller
RUN_CONSOLE_COMMAND = subprocess.call


def _ssh_command(ctx, console, cluster_name):
    """The ssh command line (argv) reaching a console of kind ssh, in
    the form Ganeti's ``gnt-instance console --show-cmd`` prints."""
    command = console.get("command")
    if not isinstance(command, str):
        command = " ".join(shlex.quote(str(a)) for a in command or [])
    argv = ["ssh", "-oEscapeChar=none", "-oHashKnownHosts=no",
            "-oGlobalKnownHostsFile=%s"
            % os.path.join(ctx.paths.data_dir, "known_hosts"),
            "-oUserKnownHostsFile=/dev/null", "-oCheckHostIp=no",
            "-oConnectTimeout=10", "-oHostKeyAlias=%s" % cluster_name]
    if console.get("port"):
        argv.append("-oPort=%d" % console["port"])
    argv += ["-oBatchMode=yes", "-oStrictHostKeyChecking=yes", "-t", "-t",
             "%s@%s" % (console.get("user"), console.get("host")), command]
    return argv


def _local_node_name(ctx):
    return ctx.env.get("GANETI_HOSTNAME") or socket.getfqdn()


@commands.command(
    "console", opts=[Opt("--show-cmd", dest="show_command",
                         action="store_true",
                         help="only print the command that connects")],
    args=[Opt("instance", metavar="INSTANCE")],
    help="connect to the console of an instance (serial: on its primary"
    " node; Ctrl-] ends the session)")
def console(ctx, opts):
    name = opts.instance
    answer = ctx.client.query("instance", ["console", "oper_state"],
                              ["=", "name", name])
    if not answer["data"]:
        raise errors.OpPrereqError("Instance '%s' does not exist" % name,
                                   errors.ECODE_NOENT)
    (_, data), (_, running) = answer["data"][0]
    if not isinstance(data, dict):
        if running:
            raise errors.OpExecError("Console information for instance %s"
                                     " is unavailable" % name)
        raise errors.OpExecError("Instance %s is not running, can't get"
                                 " console" % name)
    kind = data.get("kind")
    if kind == "msg":
        ctx.out(data.get("message") or "")
    elif kind == "vnc":
        ctx.out("Instance %s has VNC listening on %s:%s (display %s), URL"
                " <vnc://%s:%s/>" % (data.get("instance"), data.get("host"),
                                     data.get("port"), data.get("display"),
                                     data.get("host"), data.get("port")))
    elif kind == "spice":
        ctx.out("Instance %s has SPICE listening on %s:%s"
                % (data.get("instance"), data.get("host"), data.get("port")))
    elif kind == "ssh":
        if opts.show_command:
            cluster_name = ctx.client.query_config_values(
                ["cluster_name"])[0]
            ctx.out(" ".join(shlex.quote(a) for a in
                             _ssh_command(ctx, data, cluster_name)))
            return
        _connect(ctx, data)
    else:
        raise errors.OpExecError("Unknown console type '%s'" % (kind,))


def _connect(ctx, data):
    """Run a console command of kind ssh.  There is no ssh between nodes:
    the command runs here when this is the instance's primary node."""
    here = _local_node_name(ctx)
    command = data.get("command")
    if isinstance(command, str):
        command = shlex.split(command)
    if data.get("host") != here:
        raise errors.OpExecError(
            "The console of instance %s is on node %s, this is %s: run"
            " 'gnt-instance console %s' on that node (it runs: %s)"
            % (data.get("instance"), data.get("host"), here,
               data.get("instance"),
               " ".join(shlex.quote(a) for a in command)))
    try:
        code = RUN_CONSOLE_COMMAND(command)
    except OSError as err:
        raise errors.OpExecError("Connection to console of instance %s"
                                 " failed: %s" % (data.get("instance"), err))
    if code != 0:
        raise errors.OpExecError("Connection to console of instance %s"
                                 " failed (%s exited with code %s), please"
                                 " check cluster configuration"
                                 % (data.get("instance"), command[0], code))


# --- redundancy: migrate, failover, move, replace-disks, recreate-disks -----------

_TARGET_NODE_OPT = Opt("-n", "--target-node", dest="target_node",
                       metavar="NODE",
                       help="target node (default: an instance allocator"
                       " picks a node of the group; drbd: the secondary)")
_IALLOCATOR_OPT = Opt("-I", "--iallocator", metavar="NAME",
                      help="the instance allocator that chooses the node"
                      " (default: the cluster's for the request type)")


def _allocator_params(opts):
    params = base.parse_iallocator_params(
        getattr(opts, "iallocator_params", None))
    return {} if params is None else {"iallocator_params": params}
_SHUTDOWN_TIMEOUT_OPT = Opt(
    "--shutdown-timeout", type=int, default=DEFAULT_SHUTDOWN_TIMEOUT,
    metavar="SECONDS", help="how long to wait for a clean shutdown"
    " (default 120)")


@commands.command(
    "migrate",
    opts=[base.FORCE_OPT,
          Opt("--non-live", dest="live", action="store_false", default=None,
              help="pause the instance while its memory is copied"),
          Opt("--migration-mode", choices=["live", "non-live"],
              help="live or non-live (default: the migration_mode"
              " hypervisor parameter)"),
          Opt("--cleanup", action="store_true",
              help="repair an interrupted migration instead"),
          Opt("--allow-failover", action="store_true",
              help="fail over when the instance cannot be migrated"),
          Opt("--no-runtime-changes", dest="allow_runtime_changes",
              action="store_false", help="do not change the instance's"
              " memory to make it fit"),
          base.IGNORE_IPOLICY_OPT,
          Opt("--ignore-hvversions", action="store_true",
              help="migrate between different hypervisor versions"),
          _TARGET_NODE_OPT, _IALLOCATOR_OPT, base.IALLOCATOR_PARAMS_OPT,
          base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE")],
    help="move a running instance to another node without stopping it")
def migrate(ctx, opts):
    if opts.live is not None and opts.migration_mode:
        raise errors.ParameterError(
            "--non-live", "--non-live and --migration-mode are exclusive")
    if opts.cleanup:
        question = ("Instance %s will be recovered from a failed migration."
                    " Note that the migration procedure (including cleanup)"
                    " might impact the instance if anything goes wrong"
                    " (e.g. due to bugs in the hypervisor). Continue?"
                    % opts.instance)
    else:
        question = ("Instance %s will be migrated. Note that migration might"
                    " impact the instance if anything goes wrong (e.g. due"
                    " to bugs in the hypervisor). Continue?" % opts.instance)
    ctx.confirm(question, skip=opts.force)
    ctx.run_op(ctx.opcode(
        "OP_INSTANCE_MIGRATE", instance_name=opts.instance,
        mode=opts.migration_mode, live=opts.live, cleanup=opts.cleanup,
        target_node=opts.target_node, iallocator=opts.iallocator,
        allow_failover=opts.allow_failover,
        allow_runtime_changes=opts.allow_runtime_changes,
        ignore_ipolicy=opts.ignore_ipolicy,
        ignore_hvversions=opts.ignore_hvversions, **_allocator_params(opts)))


@commands.command(
    "failover",
    opts=[base.FORCE_OPT,
          Opt("--ignore-consistency", action="store_true",
              help="go on even if the source cannot stop the instance or"
              " the disks are degraded"),
          base.IGNORE_IPOLICY_OPT,
          _SHUTDOWN_TIMEOUT_OPT, _TARGET_NODE_OPT, _IALLOCATOR_OPT,
          base.IALLOCATOR_PARAMS_OPT, base.DRY_RUN_OPT]
    + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE")],
    help="stop an instance and start it on another node")
def failover(ctx, opts):
    ctx.confirm("Failover will happen to instance %s. This requires a"
                " shutdown of the instance. Continue?" % opts.instance,
                skip=opts.force)
    ctx.run_op(ctx.opcode(
        "OP_INSTANCE_FAILOVER", instance_name=opts.instance,
        ignore_consistency=opts.ignore_consistency,
        shutdown_timeout=opts.shutdown_timeout,
        target_node=opts.target_node, iallocator=opts.iallocator,
        ignore_ipolicy=opts.ignore_ipolicy, **_allocator_params(opts)))


@commands.command(
    "move",
    opts=[base.FORCE_OPT,
          Opt("--ignore-consistency", action="store_true",
              help="go on even if the source cannot stop the instance"),
          base.IGNORE_IPOLICY_OPT,
          Opt("--compress", default="none",
              help="compression of the copy (accepted, not used)"),
          _SHUTDOWN_TIMEOUT_OPT,
          Opt("-n", "--target-node", dest="target_node", metavar="NODE",
              required=True, help="the node to move the instance to")]
    + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE")],
    help="copy a stopped (or stopped for it) instance to another node")
def move(ctx, opts):
    ctx.confirm("Instance %s will be moved. This requires a shutdown of the"
                " instance. Continue?" % opts.instance, skip=opts.force)
    ctx.run_op(ctx.opcode(
        "OP_INSTANCE_MOVE", instance_name=opts.instance,
        target_node=opts.target_node,
        shutdown_timeout=opts.shutdown_timeout,
        ignore_consistency=opts.ignore_consistency,
        ignore_ipolicy=opts.ignore_ipolicy, compress=opts.compress))


def _disk_indices(text):
    if not text:
        return []
    return [_index(item, "--disks") for item in text.split(",") if item]


@commands.command(
    "replace-disks",
    opts=[Group(Opt("-p", "--on-primary", dest="mode", action="store_const",
                    const=opcodes.REPLACE_DISK_PRI,
                    help="new storage under the mirror on the primary"),
                Opt("-s", "--on-secondary", dest="mode",
                    action="store_const", const=opcodes.REPLACE_DISK_SEC,
                    help="new storage under the mirror on the secondary"),
                Opt("-a", "--auto", dest="mode", action="store_const",
                    const=opcodes.REPLACE_DISK_AUTO,
                    help="replace where the disks are faulty"),
                Opt("-n", "--new-secondary", dest="new_secondary",
                    metavar="NODE", help="a new secondary node"),
                _IALLOCATOR_OPT, required=True),
          Opt("--disks", metavar="IDX[,IDX...]",
              help="only these disks (default: all)"),
          Opt("--early-release", action="store_true",
              help="release locks early (accepted)"),
          base.IALLOCATOR_PARAMS_OPT, base.DRY_RUN_OPT,
          base.IGNORE_IPOLICY_OPT] + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE")],
    help="replace the storage of a drbd instance's disks")
def replace_disks(ctx, opts):
    mode = opts.mode
    if opts.new_secondary or opts.iallocator:
        mode = opcodes.REPLACE_DISK_CHG
    ctx.run_op(ctx.opcode(
        "OP_INSTANCE_REPLACE_DISKS", instance_name=opts.instance, mode=mode,
        disks=_disk_indices(opts.disks), remote_node=opts.new_secondary,
        iallocator=opts.iallocator, early_release=opts.early_release,
        ignore_ipolicy=opts.ignore_ipolicy, **_allocator_params(opts)))


@commands.command(
    "recreate-disks",
    opts=[Opt("--disk", action="append", dest="disk_specs",
              metavar="IDX[:size=SIZE,mode=MODE]",
              help="a disk to recreate, with new parameters (repeatable;"
              " default: all disks)"),
          Opt("-n", "--node", dest="nodes", metavar="NODE[:SECONDARY]",
              help="recreate on these nodes (the instance moves there)"),
          Opt("-I", "--iallocator", metavar="NAME",
              help="recreate on the nodes this instance allocator chooses"
              " for the instance (it moves there)"),
          base.IALLOCATOR_PARAMS_OPT, base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE")],
    help="make missing disks of a stopped instance again (empty)")
def recreate_disks(ctx, opts):
    disks = []
    for spec in opts.disk_specs or []:
        ident, params = common.parse_ident_keyval(spec, "--disk")
        idx = _index(ident, "--disk")
        if params:
            disks.append([idx, _disk_params(params, "--disk", idx)])
        else:
            disks.append(idx)
    if any(isinstance(d, list) for d in disks):
        disks = [d if isinstance(d, list) else [d, {}] for d in disks]
    nodes = opts.nodes.split(":") if opts.nodes else []
    ctx.run_op(ctx.opcode(
        "OP_INSTANCE_RECREATE_DISKS", instance_name=opts.instance,
        disks=disks, nodes=nodes, iallocator=opts.iallocator,
        **_allocator_params(opts)))


@commands.command(
    "change-group",
    opts=[Opt("--to", dest="to", action="append", metavar="GROUP",
              help="a group the instance may go to (repeatable; default:"
              " every other group)"),
          _IALLOCATOR_OPT, base.IALLOCATOR_PARAMS_OPT,
          Opt("--early-release", action="store_true",
              help="release the locks on the secondary node(s) early"),
          base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE")],
    help="move an instance to another node group (planned by an instance"
    " allocator)")
def change_group(ctx, opts):
    result = ctx.run_op(ctx.opcode(
        "OP_INSTANCE_CHANGE_GROUP", instance_name=opts.instance,
        iallocator=opts.iallocator, target_groups=opts.to,
        early_release=opts.early_release, **_allocator_params(opts)))
    if result is None:
        return base.EXIT_SUCCESS       # --submit
    if opts.dry_run:
        base.print_evacuation_plan(ctx, result)
        return base.EXIT_SUCCESS
    failed = base.follow_jobs(ctx, result)
    if failed:
        ctx.out("There were %s errors while changing group of instance"
                " '%s'." % (failed, opts.instance))
        return base.EXIT_FAILURE
    ctx.out("Instance '%s' changed group successfully." % opts.instance)
    return base.EXIT_SUCCESS


# --- info and list -------------------------------------------------------------------

def _param_items(custom, actual):
    items = []
    for key in sorted(actual or {}):
        value = actual[key]
        if key in (custom or {}):
            items.append((key, _plain(value)))
        else:
            items.append((key, "default (%s)" % (_plain(value),)))
    return items


def _plain(value):
    if isinstance(value, (list, tuple)):
        return ", ".join("%s" % (v,) for v in value)
    return value


#: Local disk status values (Ganeti's LDS_*) in words
_LDISK_TEXT = {1: "ok", 2: "syncing", 3: "unknown", 4: "faulty"}


def _disk_status(status):
    if not status:
        return "N/A"
    path, major, minor = status[0], status[1], status[2]
    text = "%s" % (path,)
    if major is not None and minor is not None:
        text += " (%s:%s)" % (major, minor)
    degraded = status[5] if len(status) > 5 else False
    ldisk = status[6] if len(status) > 6 else None
    text += " *DEGRADED*" if degraded else " in sync"
    if ldisk is not None:
        text += ", status %s" % _LDISK_TEXT.get(ldisk, ldisk)
    return text


def _disk_items(disks):
    items = []
    for idx, disk in enumerate(disks or []):
        size = disk.get("size")
        head = "%s, size %s" % (disk.get("dev_type"),
                                common.format_unit(size) if size is not None
                                else "?")
        entry = [("access mode", disk.get("mode")),
                 ("logical_id", _plain(disk.get("logical_id")))]
        if disk.get("spindles") is not None:
            entry.append(("spindles", disk.get("spindles")))
        entry.append(("on primary", _disk_status(disk.get("pstatus"))))
        if disk.get("sstatus"):
            entry.append(("on secondary", _disk_status(disk.get("sstatus"))))
        entry.append(("name", disk.get("name")))
        entry.append(("UUID", disk.get("uuid")))
        label = disk.get("iv_name") or "disk/%d" % idx
        items.append([("%s" % label, head)] + entry)
    return items


def _nic_items(nics):
    items = []
    for idx, nic in enumerate(nics or []):
        if isinstance(nic, dict):
            nic = [nic.get(k) for k in ("name", "uuid", "ip", "mac", "mode",
                                        "link", "vlan", "network")]
        nic = list(nic) + [None] * (9 - len(nic))
        name, uuid, ip, mac, mode, link, vlan, network = nic[:8]
        items.append([("nic/%d" % idx, [
            ("MAC", mac), ("IP", ip), ("mode", mode), ("link", link),
            ("vlan", vlan or ""), ("network", network), ("UUID", uuid),
            ("name", name)])])
    return items


def _watcher_restarts(record):
    """The watcher's restarts of the instance, in words (None if none)."""
    if not isinstance(record, dict) or not record.get("attempts"):
        return None
    attempts = record["attempts"]
    if record.get("gave_up") is not None:
        return ("the watcher gave up restarting it after %d attempts (%s)"
                % (attempts, base.format_time(record["gave_up"])))
    last = record.get("last_attempt")
    return ("%d attempt%s so far by the watcher%s"
            % (attempts, "" if attempts == 1 else "s",
               ", the last %s" % base.format_time(last) if last else ""))


def instance_info_items(data):
    """The ``gnt-instance info`` report of one OP_INSTANCE_QUERY_DATA
    entry."""
    config_state = data.get("config_state")
    run_state = data.get("run_state")
    if run_state is None:
        state = "configured to be %s" % config_state
    else:
        state = "configured to be %s, actual state is %s" % (config_state,
                                                             run_state)
    if data.get("forthcoming"):
        state += " (forthcoming)"
    lease = []
    if data.get("lease_until") is not None:
        lease = [("Lease", "until %s (%s); the reservation is then removed"
                  % (base.format_time(data["lease_until"]),
                     data.get("lease_state") or "active"))]
    restarts = _watcher_restarts(data.get("watcher_restarts"))
    pgroup = data.get("pnode_group_name")
    nodes = [[("primary", data.get("pnode")),
              ("group", "%s (UUID %s)" % (pgroup, data.get(
                  "pnode_group_uuid")) if pgroup else None)],
             [("secondaries", base.Items(
                 "%s (group %s)" % (node, group) for node, group in
                 zip(data.get("snodes") or [],
                     data.get("snodes_group_names") or [])))]]
    return [
        ("Instance name", data.get("name")),
        ("UUID", data.get("uuid")),
        ("Serial number", data.get("serial_no")),
        ("Creation time", base.format_time(data.get("ctime"))),
        ("Modification time", base.format_time(data.get("mtime"))),
        ("State", state),
    ] + lease + ([("Watcher restarts", restarts)] if restarts else []) + [
        ("Nodes", nodes),
        ("Operating system", data.get("os")),
        ("Operating system parameters",
         _param_items(data.get("os_instance"), data.get("os_actual"))),
        ("Allocated network port", data.get("network_port")),
        ("Hypervisor", data.get("hypervisor")),
        ("Hypervisor parameters",
         _param_items(data.get("hv_instance"), data.get("hv_actual"))),
        ("Back-end parameters",
         _param_items(data.get("be_instance"), data.get("be_actual"))),
        ("NICs", _nic_items(data.get("nics"))),
        ("Disk template", data.get("disk_template")),
        ("Disks", _disk_items(data.get("disks"))),
    ] + _autorepair_items(data.get("autorepair"))


def _autorepair_items(ar):
    """The auto-repair section of ``gnt-instance info`` (a master that
    does not report it gets none)."""
    if not ar:
        return []
    if ar["policy"] == "enabled":
        policy = "up to %s (%s tag)" % (ar["allowed"], ar["source"])
    elif ar["policy"] == "suspended":
        until = ar.get("suspended_until")
        policy = "suspended (%s tag)%s" % (
            ar["source"], "" if until is None else
            " until %s" % base.format_time(until))
    else:
        policy = "not enabled"
    items = [("state", ar["state"]), ("repairs allowed", policy)]
    if ar.get("needs"):
        items.append(("needs", ar["needs"]))
    pend = ar.get("pending")
    if pend:
        items.append(("pending repair", "%s %s since %s, jobs %s" % (
            pend["type"], pend["id"], base.format_time(pend["since"]),
            ", ".join(str(j) for j in pend["jobs"]) or "none yet")))
    last = ar.get("last_result")
    if last:
        items.append(("last result", "%s of %s %s at %s, jobs %s" % (
            last["result"], last["type"], last["id"],
            base.format_time(last["time"]),
            ", ".join(str(j) for j in last["jobs"]) or "none")))
    for tag, reason in ar.get("malformed") or ():
        items.append(("ignored tag", "%s: %s" % (tag, reason)))
    return [("Auto-repair", items)]


@commands.command(
    "info",
    opts=[Opt("-s", "--static", action="store_true",
              help="only what the configuration says (no node queries)"),
          Opt("--all", action="store_true", help="every instance"),
          Opt("--roman", action="store_true",
              help="accepted for compatibility; numbers stay arabic")],
    args=[Opt("names", nargs="*", metavar="INSTANCE")],
    help="show everything about instances")
def info(ctx, opts):
    if opts.all and opts.names:
        raise base.UsageError("give instance names or --all, not both")
    if not opts.all and not opts.names:
        raise base.UsageError("no instance name given (or use --all)")
    result = ctx.run_op(ctx.opcode("OP_INSTANCE_QUERY_DATA",
                                   instances=list(opts.names),
                                   static=opts.static,
                                   use_locking=not opts.static))
    if result is None:
        return base.EXIT_SUCCESS
    if isinstance(result, dict):
        entries = [result[k] for k in sorted(result)]
    else:
        entries = list(result)
    for data in entries:
        lines = base.format_info(instance_info_items(data))
        ctx.out("- " + lines[0])
        for line in lines[1:]:
            ctx.out("  " + line)


def _mark_forthcoming(fields, row, values):
    """Show a forthcoming instance's status as "forthcoming".

    Queries (and so RAPI and htools) keep Ganeti's status values; only this
    listing says what the instance really is.
    """
    status = values.get("forthcoming")
    if status and status[0] == 0 and status[1] and "status" in fields:
        row[fields.index("status")] = [0, "forthcoming"]


base.list_command(commands, "instance", LIST_FIELDS,
                  "list instances (forthcoming ones included)", "INSTANCE",
                  "instances to show (names, globs, or one filter)",
                  hidden_fields=["forthcoming"], row_hook=_mark_forthcoming)


# --- tags ------------------------------------------------------------------------

base.tag_commands(commands, constants.TAG_INSTANCE, "INSTANCE")


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
