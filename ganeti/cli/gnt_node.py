"""gnt-node: look at and change the nodes of the cluster."""

from ganeti import constants
from ganeti import errors
from ganeti import opcodes
from ganeti import qlang
from ganeti.cli import base
from ganeti.cli import common
from ganeti.cli import gnt_group
from ganeti.cli.base import Group, Opt

PROGRAM = "gnt-node"
commands = base.CommandTable(PROGRAM, "Node administration.")

LIST_FIELDS = ["name", "dtotal", "dfree", "mtotal", "mnode", "mfree",
               "pinst_cnt", "sinst_cnt"]
INFO_FIELDS = ["name", "pip", "sip", "master_candidate", "drained",
               "offline", "master_capable", "vm_capable", "powered", "group",
               "ndparams", "custom_ndparams", "pinst_list", "sinst_list"]

STORAGE_FIELDS = ["node", "type", "name", "size", "used", "free",
                  "allocatable"]
_STORAGE_TITLES = {"node": "Node", "type": "Type", "name": "Name",
                   "size": "Size", "used": "Used", "free": "Free",
                   "allocatable": "Allocatable"}
_STORAGE_UNITS = frozenset(["size", "used", "free"])
_STORAGE_BOOLS = frozenset(["allocatable"])

#: The storage type behind each disk template (for list-storage's default)
DT_STORAGE_TYPE = {
    constants.DT_PLAIN: "lvm-vg", constants.DT_DRBD8: "lvm-vg",
    constants.DT_FILE: "file", constants.DT_SHARED_FILE: "sharedfile",
    constants.DT_GLUSTER: "gluster", constants.DT_RBD: "rados",
    constants.DT_EXT: "ext", constants.DT_BLOCK: "blockdev",
    constants.DT_DISKLESS: "diskless",
}

base.list_command(commands, "node", LIST_FIELDS, "list nodes", "NODE",
                  "nodes to show (names, globs, or one filter)")


def _yes_no_opt(*flags, **kwargs):
    dest = kwargs.pop("dest")
    return Opt(*flags, dest=dest, type=base.yes_no(flags[-1].lstrip("-")),
               metavar="yes|no", **kwargs)


_MASTER_CAPABLE_OPT = _yes_no_opt(
    "--master-capable", dest="master_capable",
    help="may the node become master (candidate)")
_VM_CAPABLE_OPT = _yes_no_opt("--vm-capable", dest="vm_capable",
                              help="may the node run instances")
_NDPARAMS_OPT = Opt("--node-parameters", dest="ndparams",
                    metavar="KEY=VAL[,...]", help="node parameters")


# --- info -------------------------------------------------------------------------

#: marks an info line that is a sentence, not "key: value"
_HEADLINE = object()


def _instances_item(label, names):
    if not names:
        return ("%s for no instances" % label, _HEADLINE)
    return ("%s for instances" % label, base.Items(names))


def node_info_items(values):
    """The ``gnt-node info`` report of one node (values of INFO_FIELDS)."""
    row = dict(zip(INFO_FIELDS, values))
    custom = row.get("custom_ndparams") or {}
    ndparams = [(key, value if key in custom else "default (%s)" % (value,))
                for key, value in sorted((row.get("ndparams") or {}).items())]
    items = [("primary ip", row.get("pip")),
             ("secondary ip", row.get("sip")),
             ("master candidate", row.get("master_candidate")),
             ("drained", row.get("drained")),
             ("offline", row.get("offline")),
             ("master_capable", row.get("master_capable")),
             ("vm_capable", row.get("vm_capable")),
             ("powered", row.get("powered")),
             ("node group", row.get("group"))]
    for label, key in (("primary", "pinst_list"),
                       ("secondary", "sinst_list")):
        items.append(_instances_item(label, row.get(key)))
    items.append(("node parameters", ndparams))
    return [("Node name", row.get("name"))], items


@commands.command("info", args=[Opt("names", nargs="*", metavar="NODE",
                                    help="nodes to show (default: all)")],
                  help="show details of nodes")
def info(ctx, opts):
    for values in base.query_values(ctx, "node", INFO_FIELDS, opts.names):
        head, items = node_info_items(values)
        ctx.out("Node name: %s" % head[0][1])
        for key, value in items:
            if value is _HEADLINE:
                ctx.out("  %s" % key)
            else:
                for line in base.format_info([(key, value)], indent=2):
                    ctx.out(line)


# --- add, remove, modify ----------------------------------------------------------

def _state_params(opts):
    """hv_state / disk_state from --hypervisor-state / --disk-state: the
    admin's overrides of what the node offers (docs/capacity.rst)."""
    params = {}
    hv_state = gnt_group.parse_hv_state(opts.hv_state)
    if hv_state:
        params["hv_state"] = hv_state
    disk_state = gnt_group.parse_disk_state(opts.disk_state)
    if disk_state:
        params["disk_state"] = disk_state
    return params


@commands.command(
    "add",
    opts=[Opt("--readd", action="store_true",
              help="add a node that was in the cluster before"),
          Opt("-p", "--primary-ip", metavar="IP",
              help="the node's primary IP (we do no DNS lookups)"),
          Opt("-s", "--secondary-ip", metavar="IP",
              help="the node's IP on the replication network"),
          Opt("-g", "--node-group", metavar="GROUP",
              help="node group of the new node"),
          _MASTER_CAPABLE_OPT,
          _VM_CAPABLE_OPT,
          _NDPARAMS_OPT, gnt_group.HV_STATE_OPT, gnt_group.DISK_STATE_OPT,
          Opt("--join-fingerprint", metavar="SHA256:...",
              help="fingerprint of the one-time certificate the node's"
              " ganeti-noded --bootstrap logged; the master joins the node"
              " over TLS pinned to it (without it, on a terminal, you are"
              " shown the node's fingerprint to confirm)")] + base.JOB_OPTS,
    args=[Opt("node", metavar="NODE", help="name of the new node")],
    help="add a node to the cluster")
def add(ctx, opts):
    params = {"node_name": opts.node, "readd": opts.readd}
    for key in ("primary_ip", "secondary_ip", "master_capable",
                "vm_capable"):
        value = getattr(opts, key)
        if value is not None:
            params[key] = value
    if opts.node_group:
        params["group"] = opts.node_group
    ndparams = base.parse_ndparams(opts.ndparams)
    if ndparams:
        params["ndparams"] = ndparams
    params.update(_state_params(opts))
    if opts.join_fingerprint:
        params["join_fingerprint"] = opts.join_fingerprint
    elif opts.primary_ip and getattr(ctx.stdin, "isatty", lambda: False)():
        fingerprint = _confirm_fingerprint(ctx, opts.primary_ip)
        if fingerprint:
            params["join_fingerprint"] = fingerprint
    ctx.run_op(ctx.opcode("OP_NODE_ADD", **params))


def _confirm_fingerprint(ctx, address):
    """Show the certificate the node at ``address`` presents and ask the
    admin to confirm it (compare with what its ganeti-noded --bootstrap
    logged); None if it already holds the cluster certificate or cannot
    be reached (the master then explains)."""
    import socket
    import ssl
    from ganeti import crypto
    pem = crypto.server_pem_path(ctx.paths)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE   # we only look: the master pins it
    try:
        tls.load_cert_chain(pem)
        with socket.create_connection(
                (address, constants.DEFAULT_NODED_PORT), 10) as sock:
            with tls.wrap_socket(sock) as conn:
                der = conn.getpeercert(binary_form=True)
        ours = crypto.load_cluster_certificate(pem).digest()
    except (OSError, ssl.SSLError, errors.GenericError):
        return None
    digest = crypto.certificate_digest(der)
    if digest == ours:
        return None
    fingerprint = crypto.format_fingerprint(digest)
    ctx.confirm("The node daemon at %s presents the certificate\n  %s\n"
                "Is this the fingerprint its ganeti-noded --bootstrap"
                " logged? Join it to the cluster?" % (address, fingerprint))
    return fingerprint


@commands.command(
    "powercycle",
    opts=[Opt("--yes", dest="confirm", action="store_true",
              help="do not ask for confirmation"),
          Opt("-f", "--force", action="store_true",
              help="power-cycle the master node too"),
          base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("node", metavar="NODE")],
    help="hard reboot a node through its node daemon (the master node only"
    " with --force)")
def powercycle(ctx, opts):
    ctx.confirm("Are you sure you want to hard powercycle node %s?"
                % opts.node, skip=opts.confirm, option="--yes")
    result = ctx.run_op(ctx.opcode("OP_NODE_POWERCYCLE",
                                   node_name=opts.node, force=opts.force))
    if result:
        ctx.err(str(result))


@commands.command("remove", opts=base.JOB_OPTS,
                  args=[Opt("node", metavar="NODE")],
                  help="remove a node (it must have no instances)")
def remove(ctx, opts):
    ctx.run_op(ctx.opcode("OP_NODE_REMOVE", node_name=opts.node))


@commands.command(
    "modify",
    opts=[base.FORCE_OPT,
          _yes_no_opt("-C", "--master-candidate", dest="master_candidate",
                      help="make the node a master candidate or not"),
          _yes_no_opt("-D", "--drained", dest="drained",
                      help="no new instances on the node"),
          _yes_no_opt("-O", "--offline", dest="offline",
                      help="the node is out of service"),
          _MASTER_CAPABLE_OPT,
          _VM_CAPABLE_OPT,
          Opt("--auto-promote", action="store_true",
              help="promote another node when demoting a candidate"),
          Opt("-s", "--secondary-ip", metavar="IP",
              help="new secondary IP"),
          _NDPARAMS_OPT, gnt_group.HV_STATE_OPT, gnt_group.DISK_STATE_OPT,
          _yes_no_opt("--node-powered", dest="powered",
                      help="record whether the node is powered")]
    + [base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("node", metavar="NODE")],
    help="change the role and parameters of a node")
def modify(ctx, opts):
    params = {}
    for key in ("master_candidate", "drained", "offline", "master_capable",
                "vm_capable", "secondary_ip", "powered"):
        value = getattr(opts, key)
        if value is not None:
            params[key] = value
    ndparams = base.parse_ndparams(opts.ndparams)
    if ndparams:
        params["ndparams"] = ndparams
    params.update(_state_params(opts))
    if not params:
        raise base.CommandFailed("Please give at least one of the"
                                 " parameters.")
    if sum(1 for key in ("master_candidate", "drained", "offline")
           if params.get(key)) > 1:
        raise errors.ParameterError(
            "roles", "only one of --master-candidate, --drained and"
            " --offline can be yes")
    if opts.force:
        params["force"] = True
    if opts.auto_promote:
        params["auto_promote"] = True
    result = ctx.run_op(ctx.opcode("OP_NODE_SET_PARAMS",
                                   node_name=opts.node, **params))
    if result:
        ctx.out("Modified node %s" % opts.node)
        for change in result:
            if isinstance(change, (list, tuple)) and len(change) == 2:
                ctx.out(" - %-5s -> %s" % (change[0], change[1]))
            else:
                ctx.out(" - %s" % (change,))


# --- out-of-band management -------------------------------------------------

_POWER_COMMANDS = {"on": "power-on", "off": "power-off",
                   "cycle": "power-cycle", "status": "power-status"}


def _oob_rows(ctx, result):
    """(node, ok, data) per node of an OP_OOB_COMMAND result."""
    rows = []
    for entry in result or ():
        (_, node), (status, data) = entry
        rows.append((node, status == 0, data))
    return rows


@commands.command(
    "power",
    opts=[base.FORCE_OPT,
          Opt("--ignore-status", action="store_true",
              help="power off even a node that is not marked offline"),
          Opt("--power-delay", type=float, default=2.0, metavar="SECONDS",
              help="pause between nodes when powering on several"),
          Opt("--all", action="store_true", help="every node")]
    + base.JOB_OPTS,
    args=[Opt("command", choices=sorted(_POWER_COMMANDS),
              metavar="on|off|cycle|status"),
          Opt("nodes", nargs="*", metavar="NODE")],
    help="power nodes on, off, cycle them or show their power state"
         " through their out-of-band program")
def power(ctx, opts):
    if opts.all == bool(opts.nodes):
        raise base.UsageError("give node names or --all")
    command = _POWER_COMMANDS[opts.command]
    if command in ("power-off", "power-cycle") and not opts.force:
        ctx.out("Nodes %s will be %s." % (
            ", ".join(opts.nodes) or "(all)",
            "powered off" if command == "power-off" else "power cycled"))
    result = ctx.run_op(ctx.opcode(
        "OP_OOB_COMMAND", command=command, node_names=list(opts.nodes),
        ignore_status=opts.ignore_status, power_delay=opts.power_delay))
    failed = False
    for node, ok, data in _oob_rows(ctx, result):
        if not ok:
            failed = True
            ctx.out("%s: %s failed: %s" % (node, command, data))
        elif command == "power-status":
            ctx.out("%s: power %s" % (node, "on" if data.get("powered")
                                      else "off"))
        else:
            ctx.out("%s: %s done" % (node, command))
    return base.EXIT_FAILURE if failed else base.EXIT_SUCCESS


@commands.command(
    "health", opts=base.JOB_OPTS,
    args=[Opt("nodes", nargs="*", metavar="NODE")],
    help="show what the nodes' out-of-band programs say of their health")
def health(ctx, opts):
    result = ctx.run_op(ctx.opcode("OP_OOB_COMMAND", command="health",
                                   node_names=list(opts.nodes)))
    failed = False
    for node, ok, data in _oob_rows(ctx, result):
        if not ok:
            failed = True
            ctx.out("%s: health failed: %s" % (node, data))
            continue
        ctx.out("%s: %s" % (node, ", ".join("%s=%s" % (item, status)
                                             for item, status in data)))
    return base.EXIT_FAILURE if failed else base.EXIT_SUCCESS


# --- restricted and repair commands ------------------------------------------

#: what separates the nodes' outputs (as Ganeti's gnt-node prints)
_SEPARATOR = "-" * 48


def _online_nodes(ctx, names, group):
    """The online nodes among ``names`` (all if none) in ``group`` (if
    given), as the master names them; a note on stderr for offline ones."""
    filters = []
    if names:
        filters.append(base.make_query_filter(names))
    if group:
        filters.append([qlang.OP_OR, [qlang.OP_EQUAL, "group", group],
                        [qlang.OP_EQUAL, "group.uuid", group]])
    qfilter = (None if not filters else filters[0] if len(filters) == 1
               else [qlang.OP_AND] + filters)
    rows = [[value if status == 0 else None for status, value in row]
            for row in ctx.client.query("node", ["name", "offline"],
                                        qfilter)["data"]]
    found = [name for name, _ in rows]
    unknown = [n for n in names if not qlang.is_glob(n) and not any(
        f == n or f.startswith(n + ".") for f in found)]
    if unknown:
        raise errors.OpPrereqError(
            "Node%s %s not known%s" % ("s" if len(unknown) > 1 else "",
                                       ", ".join(unknown),
                                       " in node group %s" % group
                                       if group else ""),
            errors.ECODE_NOENT)
    offline = [name for name, off in rows if off]
    if offline:
        ctx.err("Note: skipping offline node(s): %s" % ", ".join(offline))
    online = [name for name, off in rows if not off]
    if not online:
        raise errors.OpPrereqError(
            "No online node to run the command on%s"
            % (" in node group %s" % group if group else ""),
            errors.ECODE_STATE)
    return online


@commands.command(
    "restricted-command",
    opts=[Opt("--sync", dest="do_locking", action="store_true",
              help="lock the nodes exclusively while the command runs"),
          Opt("-M", "--show-machine-names", action="store_true",
              help="start every output line with the node's name"),
          Opt("-g", "--node-group", dest="nodegroup", metavar="GROUP",
              help="run on the online nodes of this node group")]
    + base.JOB_OPTS,
    args=[Opt("rcommand", metavar="COMMAND"),
          Opt("nodes", nargs="*", metavar="NODE")],
    help="run a restricted command (a program the nodes whitelist in"
         " /etc/ganeti/restricted-commands) on nodes")
def restricted_command(ctx, opts):
    if not opts.nodes and not opts.nodegroup:
        raise base.UsageError("give the nodes to run %s on, or a node group"
                              " (-g GROUP)" % opts.rcommand)
    nodes = _online_nodes(ctx, opts.nodes, opts.nodegroup)
    result = ctx.run_op(ctx.opcode(
        "OP_RESTRICTED_COMMAND", command=opts.rcommand, nodes=nodes,
        use_locking=opts.do_locking))
    if result is None:      # --submit
        return base.EXIT_SUCCESS
    code = base.EXIT_SUCCESS
    for node, (ok, text) in zip(nodes, result):
        ctx.out(_SEPARATOR)
        if not ok:
            code = base.EXIT_FAILURE
            ctx.out(text)
        elif opts.show_machine_names:
            for line in text.splitlines():
                ctx.out("%s: %s" % (node, line))
        else:
            ctx.out("Node: %s" % node)
            ctx.out(text)
    return code


def _repair_input(ctx, opts):
    if opts.input_file is None:
        return opts.input
    if opts.input_file == "-":
        return ctx.stdin.read()
    try:
        with open(opts.input_file) as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as err:
        raise base.UsageError("--input-file: cannot read %s: %s"
                              % (opts.input_file,
                                 getattr(err, "strerror", None) or err))


@commands.command(
    "repair-command",
    opts=[Group(Opt("--input", metavar="TEXT",
                    help="give TEXT to the command on its stdin"),
                Opt("--input-file", metavar="FILE",
                    help="give FILE's content (- for stdin) to the command"
                    " on its stdin"))]
    + base.JOB_OPTS,
    args=[Opt("node", metavar="NODE"), Opt("rcommand", metavar="COMMAND")],
    help="run a repair command (a program the node whitelists in"
         " /etc/ganeti/node-repair-commands) on a node, with an input")
def repair_command(ctx, opts):
    text = _repair_input(ctx, opts)
    result = ctx.run_op(ctx.opcode(
        "OP_REPAIR_COMMAND", node_name=opts.node, command=opts.rcommand,
        input=text))
    if result:
        ctx.stdout.write(result if result.endswith("\n") else result + "\n")
        ctx.stdout.flush()


# --- storage ------------------------------------------------------------------------

VOLUME_FIELDS = ["node", "phys", "vg", "name", "size", "instance"]
_VOLUME_TITLES = {"node": "Node", "phys": "PhysDev", "vg": "VG",
                  "name": "Name", "size": "Size", "instance": "Instance"}


@commands.command(
    "volumes",
    opts=[base.NOHDR_OPT, base.SEP_OPT, base.UNITS_OPT,
          base.fields_opt(VOLUME_FIELDS)] + base.JOB_OPTS,
    args=[Opt("names", nargs="*", metavar="NODE",
              help="nodes to show (default: all)")],
    help="list the logical volumes of nodes (OP_NODE_QUERYVOLS)")
def volumes(ctx, opts):
    fields = common.select_fields(VOLUME_FIELDS, opts.output)
    unknown = [f for f in fields if f not in _VOLUME_TITLES]
    if unknown:
        raise errors.ParameterError(
            "-o", "unknown field%s %s (known: %s)"
            % ("s" if len(unknown) > 1 else "", ", ".join(unknown),
               ", ".join(VOLUME_FIELDS)))
    result = ctx.run_op(ctx.opcode("OP_NODE_QUERYVOLS",
                                   nodes=list(opts.names),
                                   output_fields=fields))
    if opts.submit_only:
        return
    units = base.default_units(opts.separator, opts.units)
    rows = []
    for row in result or []:
        cells = []
        for field, value in zip(fields, row):
            if field == "size":
                try:
                    value = common.format_unit(int(value), units)
                except (TypeError, ValueError):
                    pass
            cells.append(value)
        rows.append(cells)
    numeric = set(i for i, f in enumerate(fields) if f == "size")
    for line in common.format_table(
            [_VOLUME_TITLES[f] for f in fields], rows,
            separator=opts.separator, no_headers=opts.no_headers,
            numeric=numeric):
        ctx.out(line)


def _default_storage_type(ctx):
    info = ctx.client.query_cluster_info()
    templates = info.get("enabled_disk_templates") or []
    if not templates:
        raise base.CommandFailed("Failure: the cluster has no enabled disk"
                                 " template; give --storage-type")
    return DT_STORAGE_TYPE.get(templates[0], templates[0])


@commands.command(
    "list-storage",
    opts=[base.NOHDR_OPT, base.SEP_OPT, base.UNITS_OPT,
          Opt("--human-readable", action="store_true",
              help="sizes with units even with --separator"),
          Opt("-t", "--storage-type", choices=sorted(opcodes.STORAGE_TYPES),
              help="storage type (default: that of the cluster's default"
              " disk template)"),
          base.fields_opt(STORAGE_FIELDS)],
    args=[Opt("names", nargs="*", metavar="NODE",
              help="nodes to show (default: all)")],
    help="list the storage units of nodes")
def list_storage(ctx, opts):
    storage_type = opts.storage_type or _default_storage_type(ctx)
    fields = common.select_fields(STORAGE_FIELDS, opts.output)
    result = ctx.run_op(ctx.opcode(
        "OP_NODE_QUERY_STORAGE", nodes=list(opts.names),
        storage_type=storage_type, output_fields=fields))
    units = opts.units or ("h" if opts.human_readable else
                           base.default_units(opts.separator, None))
    rows = []
    for row in result or []:
        cells = []
        for field, value in zip(fields, row):
            if field in _STORAGE_UNITS and isinstance(value, (int, float)) \
                    and not isinstance(value, bool):
                cells.append(common.format_unit(value, units))
            elif field in _STORAGE_BOOLS:
                cells.append(base.format_bool(value))
            else:
                cells.append("" if value is None else "%s" % (value,))
        rows.append(cells)
    numeric = set(i for i, f in enumerate(fields) if f in _STORAGE_UNITS)
    for line in common.format_table(
            [_STORAGE_TITLES.get(f, f) for f in fields], rows,
            separator=opts.separator, no_headers=opts.no_headers,
            numeric=numeric):
        ctx.out(line)


# --- evacuate, migrate ----------------------------------------------------------

def _follow_jobs(ctx, result):
    """Wait for the jobs an opcode submitted (``{"jobs": [...]}``)."""
    if result is None:
        return base.EXIT_SUCCESS       # --submit
    failed = base.follow_jobs(ctx, result)
    if failed:
        ctx.err("%d job(s) failed" % failed)
        return base.EXIT_FAILURE
    return base.EXIT_SUCCESS


def _primary_names(ctx, node, secondaries=False):
    fields = ["pinst_list", "sinst_list"]
    answer = ctx.client.query("node", fields, ["=", "name", node])
    rows = answer.get("data") or []
    if not rows:
        raise base.CommandFailed("Failure: node %s is not known" % node)
    pinst, sinst = [value if status == 0 else [] for status, value in rows[0]]
    return list(pinst or []) + (list(sinst or []) if secondaries else [])


@commands.command(
    "evacuate",
    opts=[base.FORCE_OPT,
          Group(Opt("-p", "--primary-only", dest="mode",
                    action="store_const", const=opcodes.NODE_EVAC_PRI,
                    help="only the instances whose primary is the node"),
                Opt("-s", "--secondary-only", dest="mode",
                    action="store_const", const=opcodes.NODE_EVAC_SEC,
                    help="only the instances whose secondary is the node")),
          Group(Opt("-n", "--new-secondary", dest="remote_node",
                    metavar="NODE", help="the node to move instances to"),
                Opt("-I", "--iallocator", metavar="NAME",
                    help="the instance allocator that plans the moves"
                    " (default: the cluster's for node-evacuate"
                    " requests)")),
          base.IALLOCATOR_PARAMS_OPT,
          Opt("--early-release", action="store_true",
              help="release locks early (accepted)"),
          Opt("--ignore-soft-errors", action="store_true",
              help="go on with the instances that can be moved"),
          base.DRY_RUN_OPT]
    + base.JOB_OPTS,
    args=[Opt("node", metavar="NODE")],
    help="move every instance off a node (migrate, fail over, move or"
    " replace the secondary)")
def evacuate(ctx, opts):
    mode = opts.mode or opcodes.NODE_EVAC_ALL
    names = _primary_names(ctx, opts.node,
                           secondaries=mode != opcodes.NODE_EVAC_PRI)
    if mode == opcodes.NODE_EVAC_SEC:
        names = [n for n in names
                 if n not in _primary_names(ctx, opts.node)]
    if not names:
        ctx.out("No instances to evacuate on node(s) %s, exiting."
                % opts.node)
        return base.EXIT_SUCCESS
    ctx.confirm("Relocate instance(s) %s from node(s) %s?"
                % (", ".join("'%s'" % n for n in sorted(names)), opts.node),
                skip=opts.force)
    params = {"node_name": opts.node, "mode": mode,
              "remote_node": opts.remote_node,
              "iallocator": opts.iallocator,
              "early_release": opts.early_release}
    if opts.ignore_soft_errors:
        params["ignore_soft_errors"] = True
    allocator_params = base.parse_iallocator_params(opts.iallocator_params)
    if allocator_params is not None:
        params["iallocator_params"] = allocator_params
    result = ctx.run_op(ctx.opcode("OP_NODE_EVACUATE", **params))
    if opts.dry_run and result is not None:
        base.print_evacuation_plan(ctx, result)
        return base.EXIT_SUCCESS
    return _follow_jobs(ctx, result)


@commands.command(
    "migrate",
    opts=[base.FORCE_OPT,
          Opt("--non-live", dest="live", action="store_false", default=None,
              help="pause the instances while their memory is copied"),
          Opt("--migration-mode", choices=["live", "non-live"],
              help="live or non-live"),
          Opt("--no-runtime-changes", dest="allow_runtime_changes",
              action="store_false", help="do not change instances' memory"),
          base.IGNORE_IPOLICY_OPT,
          Group(Opt("-n", "--target-node", dest="target_node",
                    metavar="NODE", help="migrate every instance there"),
                Opt("-I", "--iallocator", metavar="NAME",
                    help="the instance allocator each migration asks for"
                    " its target (default: the cluster's for relocate"
                    " requests)")),
          base.IALLOCATOR_PARAMS_OPT]
    + base.JOB_OPTS,
    args=[Opt("node", metavar="NODE")],
    help="migrate every primary instance of a node (failover if the node"
    " is offline)")
def migrate(ctx, opts):
    if opts.live is not None and opts.migration_mode:
        raise errors.ParameterError(
            "--non-live", "--non-live and --migration-mode are exclusive")
    names = _primary_names(ctx, opts.node)
    if not names:
        ctx.out("No primary instances on node %s, exiting." % opts.node)
        return base.EXIT_SUCCESS
    ctx.confirm("Migrate instance(s) %s?"
                % ", ".join("'%s'" % n for n in sorted(names)),
                skip=opts.force)
    result = ctx.run_op(ctx.opcode(
        "OP_NODE_MIGRATE", node_name=opts.node, mode=opts.migration_mode,
        live=opts.live, target_node=opts.target_node,
        iallocator=opts.iallocator,
        allow_runtime_changes=opts.allow_runtime_changes,
        ignore_ipolicy=opts.ignore_ipolicy,
        **_allocator_params(opts)))
    return _follow_jobs(ctx, result)


def _allocator_params(opts):
    params = base.parse_iallocator_params(opts.iallocator_params)
    return {} if params is None else {"iallocator_params": params}


# --- modify-storage, repair-storage -------------------------------------------------

_STORAGE_ARGS = [Opt("node", metavar="NODE"),
                 Opt("storage_type", metavar="STORAGE_TYPE",
                     choices=sorted(opcodes.STORAGE_TYPES)),
                 Opt("name", metavar="NAME")]


@commands.command(
    "modify-storage",
    opts=[_yes_no_opt("--allocatable", dest="allocatable",
                      help="may new data be put on the unit (lvm-pv)")]
    + base.JOB_OPTS,
    args=_STORAGE_ARGS,
    help="change a storage unit (e.g. stop allocations on a PV)")
def modify_storage(ctx, opts):
    changes = {}
    if opts.allocatable is not None:
        changes["allocatable"] = opts.allocatable
    if not changes:
        raise base.CommandFailed("No changes to storage unit %s given"
                                 % opts.name)
    ctx.run_op(ctx.opcode("OP_NODE_MODIFY_STORAGE", node_name=opts.node,
                          storage_type=opts.storage_type, name=opts.name,
                          changes=changes))


@commands.command(
    "repair-storage",
    opts=[Opt("--ignore-consistency", action="store_true",
              help="repair even if instances have bad data on other"
              " nodes")] + base.JOB_OPTS,
    args=_STORAGE_ARGS,
    help="repair a storage unit (e.g. drop missing PVs from a VG)")
def repair_storage(ctx, opts):
    ctx.run_op(ctx.opcode("OP_REPAIR_NODE_STORAGE", node_name=opts.node,
                          storage_type=opts.storage_type, name=opts.name,
                          ignore_consistency=opts.ignore_consistency))


# --- tags ------------------------------------------------------------------------

base.tag_commands(commands, constants.TAG_NODE, "NODE")


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
