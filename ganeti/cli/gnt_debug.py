"""gnt-debug: looking into the master's machinery.

``gnt-debug iallocator`` (alias ``allocator``) submits OP_TEST_ALLOCATOR,
with Ganeti's options: ``--dir in`` prints the input document an
allocator would get for the request, ``--dir out`` what the allocator
(``-I NAME``, default the cluster's for the request type) answers, as it
answered it.  Nothing changes in the cluster either way.  For the
``balance`` and ``capacity`` request types, ``--dir out`` prints the
plan the allocator answered (the jobs of the moves, or where each
instance would go) instead of the raw document.
"""

import json

from ganeti import constants
from ganeti import errors
from ganeti import opcodes
from ganeti.cli import base
from ganeti.cli import common
from ganeti.cli.base import Opt

PROGRAM = "gnt-debug"
commands = base.CommandTable(PROGRAM, "Debugging commands.")

_MODES = sorted(opcodes.IALLOCATOR_MODES)
_EVAC_MODES = sorted(opcodes.NODE_EVAC_MODES)


def _disks(text):
    result = []
    for value in text.split(","):
        try:
            size = common.parse_unit(value)
        except errors.UnitParseError as err:
            raise errors.ParameterError("--disks", "invalid disk size '%s':"
                                        " %s" % (value, err))
        result.append({"size": size, "mode": constants.DISK_RDWR})
    return result


def _nics(text):
    """``mac/ip/bridge,...``: missing or empty parts are left out."""
    result = []
    for spec in text.split(","):
        parts = spec.split("/")
        if len(parts) > 3:
            raise errors.ParameterError("--nics", "'%s' is not MAC/IP/BRIDGE"
                                        % spec)
        parts += [""] * (3 - len(parts))
        nic = {}
        for key, value in zip(("mac", "ip", "bridge"), parts):
            nic[key] = value or None
        result.append(nic)
    return result


def _memory(text):
    try:
        return common.parse_unit(text)
    except errors.UnitParseError as err:
        raise errors.ParameterError("--memory", str(err))


@commands.command(
    "iallocator", aliases=["allocator"],
    opts=[Opt("--dir", dest="direction", default="in", choices=["in", "out"],
              help="show the allocator's input (in) or its answer (out)"),
          Opt("-I", "--iallocator", metavar="NAME",
              help="the allocator to run for --dir out (default: the"
              " cluster's first for the request type)"),
          Opt("-m", "--mode", default="relocate", choices=_MODES,
              help="request type (one of %s)" % ", ".join(_MODES)),
          Opt("--memory", default="128", help="memory of the instance"
              " (MiB, or with a unit)"),
          Opt("--disks", default="4096,4096",
              help="comma-separated disk sizes (MiB, or with a unit)"),
          Opt("-t", "--disk-template", metavar="TEMPLATE",
              choices=sorted(constants.DISK_TEMPLATES),
              help="disk template of the instance"),
          Opt("--nics", default="00:11:22:33:44:55",
              help="comma-separated NICs, each MAC/IP/BRIDGE (missing parts"
              " are left out)"),
          Opt("-o", "--os-type", metavar="OS", help="OS of the instance"),
          Opt("-p", "--vcpus", type=int, default=1,
              help="virtual CPUs of the instance"),
          Opt("--tags", help="comma-separated tags"),
          Opt("--evac-mode", default=opcodes.NODE_EVAC_ALL,
              choices=_EVAC_MODES,
              help="node evacuation mode (one of %s)"
              % ", ".join(_EVAC_MODES)),
          Opt("--target-groups", action="append", default=[],
              help="target groups of a change-group request (repeatable)"),
          Opt("--spindle-use", type=int, default=1,
              help="spindles the instance uses"),
          Opt("--count", type=int, default=2,
              help="how many instances a multi-allocate request places"),
          Opt("-g", "--group", metavar="GROUP",
              help="node group (allocate's group, the group a balance"
              " request balances; default: all, one after the other)"),
          Opt("--max-moves", type=int, metavar="N",
              help="balance: at most N moves"),
          Opt("--no-disk-moves", dest="disk_moves", action="store_false",
              default=True, help="balance: no moves that copy disks"
              " (failovers and migrations only)"),
          Opt("--balance-evac", action="store_true", default=False,
              help="balance: only move instances off offline and drained"
              " nodes"),
          base.IALLOCATOR_PARAMS_OPT, base.DRY_RUN_OPT, base.PRIORITY_OPT],
    args=[Opt("names", nargs="*", metavar="INSTANCE",
              help="the instance (allocate, relocate, ...) or instances"
              " (node-evacuate, change-group); none for balance, optional"
              " for capacity")],
    help="run an OP_TEST_ALLOCATOR opcode: an allocator's input or answer")
def iallocator(ctx, opts):
    if not opts.names and opts.mode not in _NAMELESS:
        raise errors.ParameterError("INSTANCE", "%s requests need an"
                                    " instance name" % opts.mode)
    if opts.max_moves is not None and opts.max_moves < 0:
        raise errors.ParameterError("--max-moves", "must not be negative")
    name = opts.names[0] if opts.names else _NAMELESS[opts.mode]
    params = {
        "direction": opts.direction, "mode": opts.mode,
        "name": name, "instances": list(opts.names) or None,
        "memory": _memory(opts.memory), "disks": _disks(opts.disks),
        "disk_template": opts.disk_template, "nics": _nics(opts.nics),
        "os": opts.os_type, "vcpus": opts.vcpus,
        "tags": base.split_list(opts.tags) if opts.tags else [],
        "iallocator": opts.iallocator, "evac_mode": opts.evac_mode,
        "target_groups": list(opts.target_groups),
        "spindle_use": opts.spindle_use, "count": opts.count,
    }
    if opts.group is not None:
        params["group_name"] = opts.group
    if opts.mode == "balance":
        params.update(max_moves=opts.max_moves, disk_moves=opts.disk_moves,
                      balance_evac=opts.balance_evac)
    allocator_params = base.parse_iallocator_params(opts.iallocator_params)
    if allocator_params is not None:
        params["iallocator_params"] = allocator_params
    result = ctx.run_op(ctx.opcode("OP_TEST_ALLOCATOR", **params))
    if opts.direction == "out" and opts.mode in _NAMELESS:
        result = format_plan(opts.mode, result)
    ctx.out("%s" % (result,))


#: the request types without an instance, and the name they are sent with
_NAMELESS = {"balance": "balance", "capacity": "new-instance"}


def _op_command(op):
    """An opcode of a plan as the gnt-instance command doing it."""
    name = op.get("instance_name")
    kind = op.get("OP_ID")
    if kind == "OP_INSTANCE_REPLACE_DISKS":
        return "gnt-instance replace-disks -n %s %s" % (op.get("remote_node"),
                                                         name)
    verb = "migrate" if kind == "OP_INSTANCE_MIGRATE" else "failover"
    target = op.get("target_node")
    return "gnt-instance %s -f %s%s" % (
        verb, "-n %s " % target if target else "", name)


def format_plan(mode, text):
    """A balance or capacity answer as text for people; anything that is
    not a successful answer of that shape is shown as it came."""
    try:
        answer = json.loads(text)
        result = answer["result"]
        if not answer["success"]:
            return text
        lines = [str(answer.get("info", ""))]
        if mode == "balance":
            moved, failed, jobs = result
            lines.append("%d jobs, to run in order:" % len(jobs))
            for idx, job in enumerate(jobs, 1):
                for pos, op in enumerate(job):
                    lines.append("  %s %s" % (("%3d." % idx) if pos == 0
                                              else "    ", _op_command(op)))
            if moved:
                lines.append("Instances moved (group: nodes after):")
                for name, group, nodes in moved:
                    lines.append("  %s (%s): %s" % (name, group,
                                                    ", ".join(nodes)))
            for name, reason in failed:
                lines.append("  not moved: %s: %s" % (name, reason))
        else:
            lines.append("%d instances fit, in allocation order:"
                         % result["count"])
            for idx, nodes in enumerate(result["allocations"], 1):
                lines.append("  %3d. %s" % (idx, ", ".join(nodes)))
        return "\n".join(lines)
    except (ValueError, KeyError, TypeError, AttributeError):
        return text


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
