"""gnt-storage: ExtStorage providers (``diagnose``, ``info``), through
OP_EXT_STORAGE_DIAGNOSE."""

from ganeti.cli import base
from ganeti.cli import common
from ganeti.cli.base import Opt

PROGRAM = "gnt-storage"
commands = base.CommandTable(PROGRAM, "ExtStorage providers.")


def _diagnose(ctx, fields):
    rows = ctx.run_op(ctx.opcode("OP_EXT_STORAGE_DIAGNOSE",
                                 output_fields=list(fields), names=[]))
    if not rows:
        raise base.CommandFailed("Can't get the ExtStorage providers list")
    return rows


def _status(valid, message):
    return "valid" if valid else "invalid - %s" % message


def provider_lines(name, node_status, nodegroup_status):
    """(lines, whether the provider is valid on every node) of one
    provider for ``diagnose``."""
    good, bad = {}, {}
    hidden = {}
    for node, entries in (node_status or {}).items():
        entries = list(entries or [])
        if not entries:
            bad[node] = "ExtStorage provider not found"
            continue
        path, valid, message, _ = entries[0]
        text = "%s (path: %s)" % (_status(valid, message), path)
        (good if valid else bad)[node] = text
        hidden[node] = ["    [hidden] path: %s, status: %s"
                        % (p, _status(v, m)) for p, v, m, _ in entries[1:]]
    if good and not bad:
        overall = "valid"
    elif bad and not good:
        overall = "invalid"
    else:
        overall = "partial valid"
    lines = ["Provider: %s: %s" % (name, overall)]
    for group in common.nice_sort(nodegroup_status or {}):
        lines.append("  For nodegroup: %s --> %s"
                     % (group, "valid" if nodegroup_status[group]
                        else "invalid"))
    for texts in (good, bad):
        for node in common.nice_sort(texts):
            lines.append("  Node: %s, status: %s" % (node, texts[node]))
            lines.extend(hidden.get(node, []))
    return lines, overall == "valid"


@commands.command("diagnose",
                  help="show on which nodes and node groups each ExtStorage"
                  " provider is valid, and why not; exit 1 if one is not"
                  " valid everywhere")
def diagnose(ctx, opts):
    all_good = True
    for name, node_status, nodegroup_status in _diagnose(
            ctx, ["name", "node_status", "nodegroup_status"]):
        lines, good = provider_lines(name, node_status, nodegroup_status)
        all_good = all_good and good
        for line in lines:
            ctx.out(line)
        ctx.out()
    return base.EXIT_SUCCESS if all_good else base.EXIT_FAILURE


@commands.command("info",
                  args=[Opt("names", nargs="*", metavar="PROVIDER",
                            help="providers to show (default: all)")],
                  help="show the node groups each ExtStorage provider is"
                  " valid for, and its parameters")
def info(ctx, opts):
    wanted = list(opts.names)
    for name, nodegroup_status, parameters in _diagnose(
            ctx, ["name", "nodegroup_status", "parameters"]):
        if wanted:
            if name not in wanted:
                continue
            wanted.remove(name)
        valid = [g for g, ok in (nodegroup_status or {}).items() if ok]
        ctx.out("%s:" % name)
        if valid:
            ctx.out("  - Valid for nodegroups:")
            for group in common.nice_sort(valid):
                ctx.out("      %s" % group)
            ctx.out("  - Supported ExtStorage parameters:")
            for pname, doc in parameters or []:
                ctx.out("      %s: %s" % (pname, doc))
        else:
            ctx.out("  - Invalid for all nodegroups")
        ctx.out()
    for name in wanted:
        ctx.out("%s: Not Found" % name)
        ctx.out()
    return base.EXIT_SUCCESS


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
