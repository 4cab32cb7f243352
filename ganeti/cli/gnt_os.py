"""gnt-os: the operating system definitions instances can be installed with.

Everything comes from OP_OS_DIAGNOSE, which asks every node daemon for the
OS definitions it finds.
"""

from ganeti import opcodes
from ganeti.cli import base
from ganeti.cli import common
from ganeti.cli.base import Opt

PROGRAM = "gnt-os"
commands = base.CommandTable(PROGRAM, "Operating system definitions.")

INFO_FIELDS = ["name", "valid", "variants", "parameters", "api_versions",
               "blacklisted", "hidden", "os_hvp", "osparams", "trusted"]
DIAGNOSE_FIELDS = ["name", "valid", "variants", "node_status", "hidden",
                   "blacklisted"]


def _diagnose(ctx, fields, names=()):
    op = ctx.opcode("OP_OS_DIAGNOSE", output_fields=list(fields),
                    names=list(names))
    return ctx.run_op(op) or []


def os_names(name, variants):
    """``busybox`` or ``debootstrap+default``, ``debootstrap+minimal``."""
    if not variants:
        return [name]
    return ["%s+%s" % (name, v) for v in variants]


@commands.command("list", opts=[base.NOHDR_OPT],
                  help="list the OSes usable for new instances (with their"
                  " variants)")
def list_os(ctx, opts):
    rows = _diagnose(ctx, ["name", "variants"])
    names = []
    for name, variants in rows:
        names.extend(os_names(name, variants))
    for line in common.format_table(["Name"], [[n] for n in sorted(names)],
                                    no_headers=opts.no_headers):
        ctx.out(line)


def _flag(value):
    return "True" if value else "False"


def os_info_items(row):
    data = dict(zip(INFO_FIELDS, row))
    items = [("valid", _flag(data.get("valid"))),
             ("hidden", _flag(data.get("hidden"))),
             ("blacklisted", _flag(data.get("blacklisted"))),
             ("trusted", _flag(data.get("trusted", True)))]
    if data.get("valid"):
        items.append(("API versions", ", ".join(
            "%s" % v for v in data.get("api_versions") or [])))
        items.append(("variants", ", ".join(data.get("variants") or [])))
        params = data.get("parameters") or []
        items.append(("parameters", [("%s" % p[0], "%s" % p[1])
                                     for p in params] or ""))
        os_hvp = data.get("os_hvp") or {}
        if os_hvp:
            items.append(("modified hypervisor parameters", os_hvp))
        osparams = data.get("osparams") or {}
        if osparams:
            items.append(("modified OS parameters", osparams))
    return items


@commands.command("info", args=[Opt("names", nargs="*", metavar="OS",
                                    help="OSes to show (default: all)")],
                  help="show details of OS definitions")
def info(ctx, opts):
    names = [n.split("+", 1)[0] for n in opts.names]
    rows = _diagnose(ctx, INFO_FIELDS, names)
    for row in rows:
        ctx.out("OS: %s" % row[0])
        for line in base.format_info(os_info_items(row), indent=2):
            ctx.out(line)
        ctx.out()


def _node_status_lines(node_status):
    lines = []
    has_bad = False
    for node in sorted(node_status or {}):
        entries = node_status[node] or []
        if not entries:
            lines.append("  Node: %s, status: not found" % node)
            has_bad = True
            continue
        path, valid, message = entries[0][0], entries[0][1], entries[0][2]
        if valid:
            text = "valid (path: %s)" % path
        else:
            text = "invalid - %s (path: %s)" % (message, path)
            has_bad = True
        lines.append("  Node: %s, status: %s" % (node, text))
        for other in entries[1:]:
            lines.append("    [hidden by the one above] path: %s, status:"
                         " %s" % (other[0], "valid" if other[1] else
                                  "invalid - %s" % other[2]))
    return lines, has_bad


@commands.command("diagnose",
                  help="show on which nodes each OS is valid, and why not;"
                  " exit 1 if some OS is not valid everywhere")
def diagnose(ctx, opts):
    rows = _diagnose(ctx, DIAGNOSE_FIELDS)
    any_bad = False
    for name, valid, variants, node_status, hidden, blacklisted in rows:
        lines, has_bad = _node_status_lines(node_status)
        any_bad = any_bad or has_bad or not valid
        notes = []
        if hidden:
            notes.append("hidden")
        if blacklisted:
            notes.append("blacklisted")
        ctx.out("OS: %s [global status: %s]%s"
                % (name, "valid" if valid else "invalid",
                   (" [%s]" % ", ".join(notes)) if notes else ""))
        if variants:
            ctx.out("  Variants: [%s]" % ", ".join(variants))
        for line in lines:
            ctx.out(line)
        ctx.out()
    return base.EXIT_FAILURE if any_bad else base.EXIT_SUCCESS


@commands.command(
    "modify",
    opts=[Opt("-H", "--hypervisor-parameters", dest="hvparams",
              action="append", metavar="HV:KEY=VAL[,...]",
              help="hypervisor parameters for this OS (repeatable)"),
          Opt("-O", "--os-parameters", dest="osparams", metavar="KEY=VAL",
              help="parameters for the OS scripts"),
          Opt("--os-parameters-private", dest="osparams_private",
              metavar="KEY=VAL", help="parameters kept out of logs"),
          Opt("--hidden", type=base.yes_no("hidden"), metavar="yes|no",
              help="hide the OS from gnt-os list"),
          Opt("--blacklisted", type=base.yes_no("blacklisted"),
              metavar="yes|no", help="refuse the OS for new instances")]
    + base.JOB_OPTS,
    args=[Opt("os", metavar="OS", help="the OS (it need not exist yet)")],
    help="change the cluster's settings for an OS")
def modify(ctx, opts):
    params = {}
    if opts.hvparams:
        params["os_hvp"] = {opts.os: base.parse_hv_list(opts.hvparams)}
    if opts.osparams is not None:
        params["osparams"] = {opts.os: common.parse_keyval(opts.osparams,
                                                           "-O")}
    if opts.osparams_private is not None:
        params["osparams_private_cluster"] = {opts.os: common.parse_keyval(
            opts.osparams_private, "--os-parameters-private")}
    for key, value in (("hidden_os", opts.hidden),
                       ("blacklisted_os", opts.blacklisted)):
        if value is not None:
            params[key] = [(opcodes.DDM_ADD if value else opcodes.DDM_REMOVE,
                            opts.os)]
    if not params:
        raise base.CommandFailed("Please give at least one of the"
                                 " parameters.")
    ctx.run_op(ctx.opcode("OP_CLUSTER_SET_PARAMS", **params))


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
