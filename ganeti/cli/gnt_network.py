"""gnt-network: networks with IPv4 address pools (add, modify, remove,
connect, disconnect, list, info, tags)."""

import textwrap

from ganeti import constants
from ganeti import errors
from ganeti.cli import base
from ganeti.cli import common
from ganeti.cli.base import Opt

PROGRAM = "gnt-network"
commands = base.CommandTable(PROGRAM, "Network administration.")

LIST_FIELDS = ["name", "network", "gateway", "mac_prefix", "group_list",
               "tags"]
INFO_FIELDS = ["name", "uuid", "serial_no", "network", "gateway",
               "network6", "gateway6", "mac_prefix", "free_count",
               "reserved_count", "map", "external_reservations",
               "group_list", "inst_list"]


def format_groups(value):
    return ", ".join("%s (%s, %s, %s)" % tuple(entry)
                     for entry in value or [])


def _plain(value):
    # Ganeti's tool prints an unset gateway or prefix as None
    return "%s" % (value,)


FORMATTERS = {
    "gateway": _plain,
    "network6": _plain,
    "gateway6": _plain,
    "mac_prefix": _plain,
    "group_list": format_groups,
    "inst_list": lambda value: ",".join(value or []),
    "tags": lambda value: ",".join(value or []),
}

base.list_command(commands, "network", LIST_FIELDS, "list networks",
                  "NETWORK", "networks to show (names, globs, or one filter)",
                  formatters=FORMATTERS)

GATEWAY_OPT = Opt("-g", "--gateway", metavar="IP",
                  help="IPv4 gateway (reserved in the pool)")
NETWORK6_OPT = Opt("--network6", metavar="SUBNET", help="IPv6 subnet")
GATEWAY6_OPT = Opt("--gateway6", metavar="IP", help="IPv6 gateway")
MAC_PREFIX_OPT = Opt("-m", "--mac-prefix", metavar="PREFIX",
                     help="MAC prefix of the network's NICs (aa:00:00)")
ADD_RESERVED_OPT = Opt("--add-reserved-ips", metavar="IP[,...]",
                       help="addresses to reserve for use outside the"
                       " cluster")
REMOVE_RESERVED_OPT = Opt("--remove-reserved-ips", metavar="IP[,...]",
                          help="external reservations to release")
NO_CONFLICTS_OPT = Opt("--no-conflicts-check", dest="conflicts_check",
                       action="store_false", default=True,
                       help="do not look for addresses already in use")


def _network_params(opts):
    params = {}
    for key in ("gateway", "network6", "gateway6", "mac_prefix"):
        value = getattr(opts, key)
        if value is not None:
            params[key] = value
    return params


@commands.command(
    "add",
    opts=[Opt("--network", required=True, metavar="SUBNET",
              help="IPv4 subnet, /16 to /30 (e.g. 192.0.2.0/24)"),
          GATEWAY_OPT, NETWORK6_OPT, GATEWAY6_OPT, MAC_PREFIX_OPT,
          ADD_RESERVED_OPT, NO_CONFLICTS_OPT,
          Opt("--tags", metavar="TAG[,...]", help="tags of the network"),
          base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("network_name", metavar="NETWORK")],
    help="create a network and its address pool")
def add(ctx, opts):
    params = _network_params(opts)
    reserved = base.split_list(opts.add_reserved_ips)
    if reserved:
        params["add_reserved_ips"] = reserved
    ctx.run_op(ctx.opcode("OP_NETWORK_ADD", network_name=opts.network_name,
                          network=opts.network,
                          conflicts_check=opts.conflicts_check,
                          tags=base.split_list(opts.tags) or [], **params))


@commands.command(
    "modify",
    opts=[GATEWAY_OPT, NETWORK6_OPT, GATEWAY6_OPT, MAC_PREFIX_OPT,
          ADD_RESERVED_OPT, REMOVE_RESERVED_OPT] + base.JOB_OPTS,
    args=[Opt("network_name", metavar="NETWORK")],
    help="change a network's gateway, IPv6 settings, MAC prefix or"
    " external reservations")
def modify(ctx, opts):
    params = _network_params(opts)
    for key in ("add_reserved_ips", "remove_reserved_ips"):
        value = base.split_list(getattr(opts, key))
        if value:
            params[key] = value
    if not params:
        raise base.CommandFailed("Please give at least one of the"
                                 " parameters.")
    result = ctx.run_op(ctx.opcode("OP_NETWORK_SET_PARAMS",
                                   network_name=opts.network_name, **params))
    if result:
        ctx.out("Modified network %s" % opts.network_name)
        for param, value in result:
            ctx.out(" - %-10s -> %s" % (param, value))


@commands.command("remove", opts=base.JOB_OPTS,
                  args=[Opt("network_name", metavar="NETWORK")],
                  help="remove a network no group or instance uses")
def remove(ctx, opts):
    ctx.run_op(ctx.opcode("OP_NETWORK_REMOVE",
                          network_name=opts.network_name))


def _groups(ctx, names):
    """The groups named, or every group."""
    if names:
        return list(names)
    return [row[0] for row in base.query_values(ctx, "group", ["name"], [])]


@commands.command(
    "connect",
    opts=[Opt("-N", "--nic-parameters", dest="nicparams", required=True,
              metavar="mode=MODE,link=LINK[,vlan=VLAN]",
              help="how the group's NICs reach the network"),
          NO_CONFLICTS_OPT] + base.JOB_OPTS,
    args=[Opt("network_name", metavar="NETWORK"),
          Opt("groups", nargs="*", metavar="GROUP",
              help="node groups (default: all)")],
    help="connect a network to node groups")
def connect(ctx, opts):
    params = common.parse_keyval(opts.nicparams, "--nic-parameters")
    unknown = sorted(set(params) - {constants.NIC_MODE, constants.NIC_LINK,
                                    constants.NIC_VLAN})
    if unknown:
        raise errors.ParameterError("--nic-parameters", "unknown key(s) %s"
                                    % ", ".join(unknown))
    for key in (constants.NIC_MODE, constants.NIC_LINK):
        if not params.get(key):
            raise errors.ParameterError("--nic-parameters", "%s is missing"
                                        % key)
    ops = [ctx.opcode("OP_NETWORK_CONNECT", network_name=opts.network_name,
                      group_name=group,
                      network_mode=params[constants.NIC_MODE],
                      network_link=params[constants.NIC_LINK],
                      network_vlan=params.get(constants.NIC_VLAN, ""),
                      conflicts_check=opts.conflicts_check)
           for group in _groups(ctx, opts.groups)]
    for op in ops:
        ctx.run_op(op)


@commands.command(
    "disconnect", opts=base.JOB_OPTS,
    args=[Opt("network_name", metavar="NETWORK"),
          Opt("groups", nargs="*", metavar="GROUP",
              help="node groups (default: all)")],
    help="disconnect a network from node groups")
def disconnect(ctx, opts):
    for group in _groups(ctx, opts.groups):
        ctx.run_op(ctx.opcode("OP_NETWORK_DISCONNECT",
                              network_name=opts.network_name,
                              group_name=group))


def network_info_lines(values, nic_ips=None):
    """The ``info`` lines of one network (Ganeti's layout); ``nic_ips``:
    instance name -> ["IDX:IP", ...] of its NICs in the network."""
    row = dict(zip(INFO_FIELDS, values))
    free = row.get("free_count") or 0
    size = free + (row.get("reserved_count") or 0)
    pct = (100.0 * free / size) if size else 0.0
    lines = ["Network name: %s" % row["name"],
             "UUID: %s" % row.get("uuid"),
             "Serial number: %s" % row.get("serial_no"),
             "  Subnet: %s" % row.get("network"),
             "  Gateway: %s" % row.get("gateway"),
             "  IPv6 Subnet: %s" % row.get("network6"),
             "  IPv6 Gateway: %s" % row.get("gateway6"),
             "  Mac Prefix: %s" % row.get("mac_prefix"),
             "  Size: %d" % size,
             "  Free: %d (%.2f%%)" % (free, pct),
             "  Usage map:"]
    usage = row.get("map") or ""
    for start in range(0, len(usage), 64):
        lines.append("     %4d %-64s %d" % (start, usage[start:start + 64],
                                            start + 63))
    lines.append("         (X) used    (.) free")
    external = row.get("external_reservations")
    if external:
        lines.append("  externally reserved IPs:")
        lines.extend("    %s" % part
                     for part in textwrap.wrap(external, width=64))
    groups = row.get("group_list") or []
    if groups:
        lines.append("  connected to node groups:")
        for name, mode, link, vlan in groups:
            lines.append("    %s (mode:%s link:%s vlan:%s)"
                         % (name, mode, link, vlan))
    else:
        lines.append("  not connected to any node group")
    insts = row.get("inst_list") or []
    if insts:
        lines.append("  used by %d instances:" % len(insts))
        for name in insts:
            lines.append("    %s: %s" % (name, ", ".join(
                (nic_ips or {}).get(name, []))))
    else:
        lines.append("  not used by any instances")
    return lines


def _nic_ips(ctx, net_uuid, instances):
    """instance -> ["IDX:IP"] for its NICs in the network."""
    if not instances:
        return {}
    rows = base.query_values(ctx, "instance",
                             ["name", "nic.ips", "nic.networks"],
                             list(instances))
    result = {}
    for name, ips, nets in rows:
        result[name] = ["%d:%s" % (idx, ip) for idx, (ip, net)
                        in enumerate(zip(ips or [], nets or []))
                        if net == net_uuid]
    return result


@commands.command("info", args=[Opt("names", nargs="*", metavar="NETWORK",
                                    help="networks to show (default: all)")],
                  help="show networks, their pools and connections")
def info(ctx, opts):
    for values in base.query_values(ctx, "network", INFO_FIELDS, opts.names):
        row = dict(zip(INFO_FIELDS, values))
        nic_ips = _nic_ips(ctx, row["uuid"], row.get("inst_list"))
        for line in network_info_lines(values, nic_ips):
            ctx.out(line)


base.tag_commands(commands, constants.TAG_NETWORK, "NETWORK")


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
