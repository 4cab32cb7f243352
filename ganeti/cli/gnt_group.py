"""gnt-group: node groups (add, assign-nodes, modify, remove, rename, list,
info, tags)."""

from ganeti import constants
from ganeti import errors
from ganeti.cli import base
from ganeti.cli import common
from ganeti.cli.base import Opt

PROGRAM = "gnt-group"
commands = base.CommandTable(PROGRAM, "Node group administration.")

LIST_FIELDS = ["name", "node_cnt", "pinst_cnt", "alloc_policy", "ndparams"]
INFO_FIELDS = ["name", "ndparams", "custom_ndparams", "diskparams",
               "custom_diskparams", "ipolicy", "custom_ipolicy"]


def _format_dict(value):
    if not value:
        return "(empty)"
    return ", ".join("%s=%s" % (k, value[k]) for k in sorted(value))


FORMATTERS = {
    "node_list": lambda value: ",".join(value or []),
    "pinst_list": lambda value: ",".join(value or []),
    "ndparams": _format_dict,
}

base.list_command(commands, "group", LIST_FIELDS, "list node groups",
                  "GROUP", "groups to show (names, globs, or one filter)",
                  formatters=FORMATTERS)


# --- parameters --------------------------------------------------------------

ALLOC_POLICY_OPT = Opt("--alloc-policy",
                       choices=constants.VALID_ALLOC_POLICIES,
                       help="allocation policy of the group")
NDPARAMS_OPT = Opt("--node-parameters", dest="ndparams",
                   metavar="KEY=VAL[,...]",
                   help="node parameters of the group's nodes")
DISKPARAMS_OPT = Opt("-D", "--disk-parameters", dest="diskparams",
                     action="append", metavar="TEMPLATE:KEY=VAL[,...]",
                     help="disk parameters of a disk template (repeatable)")
HV_STATE_OPT = Opt("--hypervisor-state", dest="hv_state", action="append",
                   metavar="HV:KEY=VAL[,...]",
                   help="hypervisor resources, Ganeti's keys mem_total,"
                   " mem_node, mem_hv, cpu_total, cpu_node (repeatable)")
DISK_STATE_OPT = Opt("--disk-state", dest="disk_state", action="append",
                     metavar="KIND/NAME:KEY=VAL[,...]",
                     help="storage resources, e.g."
                     " plain/xenvg:disk_reserved=1024 (keys disk_total,"
                     " disk_reserved, disk_overhead; repeatable)")
VCPU_RATIO_OPT = Opt("--ipolicy-vcpu-ratio", type=float, metavar="RATIO",
                     help="instance policy: virtual CPUs per physical one")
SPINDLE_RATIO_OPT = Opt("--ipolicy-spindle-ratio", type=float,
                        metavar="RATIO",
                        help="instance policy: instances per spindle")
IPOLICY_DTS_OPT = Opt("--ipolicy-disk-templates", metavar="TEMPLATE[,...]",
                      help="instance policy: allowed disk templates")
IPOLICY_BOUNDS_OPT = Opt(
    "--ipolicy-bounds-specs", metavar="min:SPEC=V,.../max:SPEC=V,...[//...]",
    help="instance policy: the range(s) an instance's specs must lie in"
    " (memory-size, cpu-count, disk-size, disk-count, nic-count,"
    " spindle-use; all of them in min and max); 'default' resets")
IPOLICY_STD_OPT = Opt(
    "--ipolicy-std-specs", metavar="SPEC=V,...",
    help="instance policy: the standard instance specs (capacity planning)")

PARAM_OPTS = [NDPARAMS_OPT, ALLOC_POLICY_OPT, DISKPARAMS_OPT, HV_STATE_OPT,
              DISK_STATE_OPT, VCPU_RATIO_OPT, SPINDLE_RATIO_OPT,
              IPOLICY_DTS_OPT, IPOLICY_BOUNDS_OPT]

_SIZE_SPECS = (constants.ISPEC_MEM_SIZE, constants.ISPEC_DISK_SIZE)


def parse_ispec(text, where, option, required):
    """``memory-size=1G,cpu-count=2`` as an instance spec (sizes with
    units, the rest integers); ``required``: every spec must be given."""
    spec = {}
    for key, value in common.parse_keyval(text, option).items():
        if key not in constants.ISPECS_PARAMETERS:
            raise errors.ParameterError(
                option, "%s: unknown spec '%s' (known: %s)"
                % (where, key, ", ".join(sorted(
                    constants.ISPECS_PARAMETERS))))
        try:
            spec[key] = (common.parse_unit(value) if key in _SIZE_SPECS
                         else int(value))
        except (TypeError, ValueError, errors.UnitParseError) as err:
            raise errors.ParameterError(option, "%s/%s: %s"
                                        % (where, key, err))
    missing = sorted(constants.ISPECS_PARAMETERS - set(spec))
    if required and missing:
        raise errors.ParameterError(option, "%s: missing %s"
                                    % (where, ", ".join(missing)))
    return spec


def parse_bounds_specs(text, option="--ipolicy-bounds-specs"):
    """``min:...,/max:...`` pairs separated by ``//`` as the policy's
    ``minmax`` list (Ganeti's syntax); ``default`` as itself."""
    if text.strip() == constants.VALUE_DEFAULT:
        return constants.VALUE_DEFAULT
    result = []
    for idx, pair_text in enumerate(text.split("//")):
        pair = {}
        for part in pair_text.split("/"):
            bound, _, rest = part.partition(":")
            bound = bound.strip()
            if bound not in (constants.ISPECS_MIN, constants.ISPECS_MAX):
                raise errors.ParameterError(
                    option, "'%s' is not min:SPECS or max:SPECS" % part)
            if bound in pair:
                raise errors.ParameterError(option, "%s given twice in"
                                            " '%s'" % (bound, pair_text))
            pair[bound] = parse_ispec(rest, "%s/%d" % (bound, idx), option,
                                      required=True)
        if len(pair) != 2:
            raise errors.ParameterError(option, "'%s' needs both min and max"
                                        % pair_text)
        result.append(pair)
    return result


def ipolicy_params(opts, cluster=False):
    """The ``ipolicy`` opcode parameter the --ipolicy-* options give."""
    ipolicy = {}
    if opts.ipolicy_vcpu_ratio is not None:
        ipolicy[constants.IPOLICY_VCPU_RATIO] = opts.ipolicy_vcpu_ratio
    if opts.ipolicy_spindle_ratio is not None:
        ipolicy[constants.IPOLICY_SPINDLE_RATIO] = opts.ipolicy_spindle_ratio
    if opts.ipolicy_disk_templates is not None:
        dts = base.split_list(opts.ipolicy_disk_templates)
        ipolicy[constants.IPOLICY_DTS] = (
            constants.VALUE_DEFAULT if dts == [constants.VALUE_DEFAULT]
            else dts)
    if opts.ipolicy_bounds_specs is not None:
        ipolicy[constants.ISPECS_MINMAX] = parse_bounds_specs(
            opts.ipolicy_bounds_specs)
    if cluster and opts.ipolicy_std_specs is not None:
        ipolicy[constants.ISPECS_STD] = parse_ispec(
            opts.ipolicy_std_specs, "std", "--ipolicy-std-specs",
            required=False)
    return ipolicy


def _typed(value, default):
    if value is None or value == constants.VALUE_DEFAULT:
        return value
    if isinstance(default, bool):
        return base.parse_bool(value)
    if isinstance(default, int):
        return int(value)
    if isinstance(default, float):
        return float(value)
    return value


def parse_diskparams(specs, option="-D"):
    result = {}
    for spec in specs or []:
        template, params = common.parse_ident_keyval(spec, option)
        defaults = constants.DISK_DT_DEFAULTS.get(template)
        if defaults is None:
            raise errors.ParameterError(option, "unknown disk template '%s'"
                                        % template)
        try:
            result[template] = {k: _typed(v, defaults.get(k))
                                for k, v in params.items()}
        except ValueError as err:
            raise errors.ParameterError(option, "%s: %s" % (template, err))
    return result


def parse_hv_state(specs, option="--hypervisor-state"):
    result = {}
    for spec in specs or []:
        hv, params = common.parse_ident_keyval(spec, option)
        if hv not in constants.HYPER_TYPES:
            raise errors.ParameterError(option, "unknown hypervisor '%s'"
                                        % hv)
        try:
            result[hv] = {k: (v if v == constants.VALUE_DEFAULT else int(v))
                          for k, v in params.items()}
        except (TypeError, ValueError) as err:
            raise errors.ParameterError(option, "%s: %s" % (hv, err))
    return result


def parse_disk_state(specs, option="--disk-state"):
    """``KIND/NAME:KEY=VAL,...`` (Ganeti's syntax, e.g.
    ``plain/xenvg:disk_reserved=1024``) or ``KIND:NAME:KEY=VAL,...``."""
    result = {}
    for spec in specs or []:
        kind, _, rest = spec.partition(":")
        if "/" in kind:
            kind, name = kind.split("/", 1)
            params = common.parse_keyval(rest, option)
        else:
            name, params = common.parse_ident_keyval(rest, option)
        if not kind or not name:
            raise errors.ParameterError(option, "'%s' is not"
                                        " TYPE:NAME:KEY=VAL" % spec)
        try:
            result.setdefault(kind, {})[name] = {
                k: (v if v == constants.VALUE_DEFAULT else int(v))
                for k, v in params.items()}
        except (TypeError, ValueError) as err:
            raise errors.ParameterError(option, "%s: %s" % (spec, err))
    return result


def group_params(opts):
    """The OP_GROUP_ADD / OP_GROUP_SET_PARAMS parameters the options give."""
    params = {}
    ndparams = base.parse_ndparams(opts.ndparams)
    if ndparams:
        params["ndparams"] = ndparams
    if opts.alloc_policy:
        params["alloc_policy"] = opts.alloc_policy
    for key, value in (("diskparams", parse_diskparams(opts.diskparams)),
                       ("hv_state", parse_hv_state(opts.hv_state)),
                       ("disk_state", parse_disk_state(opts.disk_state))):
        if value:
            params[key] = value
    ipolicy = ipolicy_params(opts)
    if ipolicy:
        params["ipolicy"] = ipolicy
    return params


# --- commands ----------------------------------------------------------------

@commands.command("add", opts=PARAM_OPTS + [base.DRY_RUN_OPT] + base.JOB_OPTS,
                  args=[Opt("group", metavar="GROUP",
                            help="name of the new group")],
                  help="create a node group (empty; see assign-nodes)")
def add(ctx, opts):
    ctx.run_op(ctx.opcode("OP_GROUP_ADD", group_name=opts.group,
                          **group_params(opts)))


@commands.command("assign-nodes",
                  opts=[Opt("--force", action="store_true",
                            help="move the nodes even if that splits"
                            " instances between groups")] + base.JOB_OPTS,
                  args=[Opt("group", metavar="GROUP"),
                        Opt("nodes", nargs="+", metavar="NODE")],
                  help="move nodes into a group")
def assign_nodes(ctx, opts):
    ctx.run_op(ctx.opcode("OP_GROUP_ASSIGN_NODES", group_name=opts.group,
                          nodes=list(opts.nodes), force=opts.force))


@commands.command("modify", opts=PARAM_OPTS + base.JOB_OPTS,
                  args=[Opt("group", metavar="GROUP")],
                  help="change the parameters of a group")
def modify(ctx, opts):
    params = group_params(opts)
    if not params:
        raise base.CommandFailed("Please give at least one of the"
                                 " parameters.")
    result = ctx.run_op(ctx.opcode("OP_GROUP_SET_PARAMS",
                                   group_name=opts.group, **params))
    if result:
        ctx.out("Modified node group %s" % opts.group)
        for param, value in result:
            ctx.out(" - %-5s -> %s" % (param, value))


@commands.command("remove", opts=base.JOB_OPTS,
                  args=[Opt("group", metavar="GROUP")],
                  help="remove an empty group (never the last one)")
def remove(ctx, opts):
    ctx.run_op(ctx.opcode("OP_GROUP_REMOVE", group_name=opts.group))


@commands.command("rename", opts=base.JOB_OPTS,
                  args=[Opt("group", metavar="OLD_NAME"),
                        Opt("new_name", metavar="NEW_NAME")],
                  help="rename a group")
def rename(ctx, opts):
    ctx.run_op(ctx.opcode("OP_GROUP_RENAME", group_name=opts.group,
                          new_name=opts.new_name))


def _params_info(custom, actual):
    custom = custom or {}
    return [(key, actual[key] if key in custom
             else "default (%s)" % (actual[key],))
            for key in sorted(actual or {})]


def group_info_items(values):
    row = dict(zip(INFO_FIELDS, values))
    disk = []
    for template in sorted(row.get("diskparams") or {}):
        disk.append((template, _params_info(
            (row.get("custom_diskparams") or {}).get(template),
            row["diskparams"][template])))
    policy = []
    actual = row.get("ipolicy") or {}
    custom = row.get("custom_ipolicy") or {}
    for key in sorted(actual):
        value = actual[key]
        if key not in custom and not isinstance(value, (dict, list)):
            value = "default (%s)" % (value,)
        policy.append((key, value))
    return [("Node group", row.get("name")),
            ("Node parameters", _params_info(row.get("custom_ndparams"),
                                             row.get("ndparams") or {})),
            ("Disk parameters", disk),
            ("Instance policy", policy)]


@commands.command("info", args=[Opt("names", nargs="*", metavar="GROUP",
                                    help="groups to show (default: all)")],
                  help="show the parameters of groups")
def info(ctx, opts):
    for values in base.query_values(ctx, "group", INFO_FIELDS, opts.names):
        items = group_info_items(values)
        ctx.out("Node group: %s" % items[0][1])
        for line in base.format_info(items[1:], indent=2):
            ctx.out(line)


@commands.command(
    "evacuate",
    opts=[Opt("--to", dest="to", action="append", metavar="GROUP",
              help="a group to move the instances to (repeatable; default:"
              " every other group)"),
          Opt("-I", "--iallocator", metavar="NAME",
              help="the instance allocator that plans the moves (default:"
              " the cluster's for change-group requests)"),
          base.IALLOCATOR_PARAMS_OPT,
          Opt("--early-release", action="store_true",
              help="release the locks on the secondary node(s) early"),
          Opt("--sequential", action="store_true",
              help="run the resulting jobs one after the other"),
          Opt("--force-failover", action="store_true",
              help="fail instances over instead of migrating them"),
          base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("group", metavar="GROUP", help="the group to empty")],
    help="move every instance out of a group (planned by an instance"
    " allocator)")
def evacuate(ctx, opts):
    params = {"group_name": opts.group, "iallocator": opts.iallocator,
              "target_groups": opts.to, "early_release": opts.early_release,
              "sequential": opts.sequential,
              "force_failover": opts.force_failover}
    allocator_params = base.parse_iallocator_params(opts.iallocator_params)
    if allocator_params is not None:
        params["iallocator_params"] = allocator_params
    result = ctx.run_op(ctx.opcode("OP_GROUP_EVACUATE", **params))
    if result is None:
        return base.EXIT_SUCCESS       # --submit
    if opts.dry_run:
        base.print_evacuation_plan(ctx, result)
        return base.EXIT_SUCCESS
    failed = base.follow_jobs(ctx, result)
    if failed:
        ctx.out("There were %s errors during the evacuation." % failed)
        return base.EXIT_FAILURE
    ctx.out("All instances evacuated successfully.")
    return base.EXIT_SUCCESS


base.tag_commands(commands, constants.TAG_NODEGROUP, "GROUP")


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
