"""gnt-backup: instance exports (export, import, list, remove)."""

from ganeti import opcodes
from ganeti.cli import base
from ganeti.cli import gnt_instance
from ganeti.cli.base import Opt

PROGRAM = "gnt-backup"
commands = base.CommandTable(PROGRAM, "Instance export (backup)"
                             " administration.")

LIST_FIELDS = ["node", "export"]

_NODE_FILTER_OPT = Opt("--node", dest="nodes", action="append",
                       metavar="NODE", help="only the exports on this node"
                       " (repeatable)")


@commands.command("list", opts=[base.fields_opt(LIST_FIELDS),
                                _NODE_FILTER_OPT] + base.LIST_OPTS,
                  help="list the exports on the nodes")
def list_exports(ctx, opts):
    return base.generic_list(ctx, "export", LIST_FIELDS, opts.nodes or [],
                             opts, namefield="node")


@commands.command("list-fields", opts=[base.NOHDR_OPT, base.SEP_OPT],
                  args=[Opt("fields", nargs="*", metavar="FIELD",
                            help="fields to describe (default: all)")],
                  help="list the fields the list command can show")
def list_fields(ctx, opts):
    return base.generic_list_fields(ctx, "export", opts.fields, opts)


@commands.command(
    "export",
    opts=[Opt("-n", "--node", dest="node", required=True, metavar="NODE",
              help="the node to write the export to"),
          Opt("--noshutdown", dest="shutdown", action="store_false",
              default=True, help="export while the instance runs (the copy"
              " may be inconsistent)"),
          Opt("--shutdown-timeout", type=int, default=120,
              metavar="SECONDS",
              help="how long to wait for a clean shutdown (default 120)"),
          Opt("--remove-instance", action="store_true",
              help="remove the instance once it is exported"),
          Opt("--ignore-remove-failures", action="store_true",
              help="with --remove-instance: remove it from the"
              " configuration even if its disks cannot all be removed"),
          Opt("--compress", default="none", metavar="TOOL",
              help="how to compress the disk dumps: none (default) or"
              " gzip"),
          Opt("--zero-free-space", action="store_true",
              help="zero the instance's free space first (refused: not"
              " supported)"),
          base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("instance", metavar="INSTANCE")],
    help="export an instance (its disks and configuration) to a node")
def export(ctx, opts):
    result = ctx.run_op(ctx.opcode(
        "OP_BACKUP_EXPORT", instance_name=opts.instance,
        target_node=opts.node, shutdown=opts.shutdown,
        shutdown_timeout=opts.shutdown_timeout,
        remove_instance=opts.remove_instance,
        ignore_remove_failures=opts.ignore_remove_failures,
        compress=opts.compress, zero_free_space=opts.zero_free_space,
        mode=opcodes.EXPORT_MODE_LOCAL))
    if result is None:
        return base.EXIT_SUCCESS
    finalized, per_disk = result
    if not finalized:
        ctx.err("Export failed: the export could not be finalized")
        return base.EXIT_FAILURE
    bad = [str(idx) for idx, ok in enumerate(per_disk) if not ok]
    if bad:
        ctx.err("Export failed: disk(s) %s could not be exported"
                % ", ".join(bad))
        return base.EXIT_FAILURE
    return base.EXIT_SUCCESS


@commands.command(
    "import",
    opts=list(gnt_instance.ADD_OPTS) + [
        Opt("--src-node", metavar="NODE",
            help="the node holding the export (default: search all"
            " nodes)"),
        Opt("--src-dir", metavar="DIR",
            help="the export's directory or name (default: the instance"
            " name)")],
    args=[Opt("instance", metavar="INSTANCE",
              help="name of the new instance")],
    help="create an instance from an export")
def import_(ctx, opts):
    extra = {}
    if opts.src_node:
        extra["src_node"] = opts.src_node
    if opts.src_dir:
        extra["src_path"] = opts.src_dir
    ctx.run_op(gnt_instance.create_opcode(
        ctx, opts, mode=opcodes.INSTANCE_IMPORT, **extra))


@commands.command("remove", opts=base.JOB_OPTS,
                  args=[Opt("instance", metavar="INSTANCE",
                            help="the instance (or export) name")],
                  help="remove every export of an instance")
def remove(ctx, opts):
    ctx.run_op(ctx.opcode("OP_BACKUP_REMOVE", instance_name=opts.instance))


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
