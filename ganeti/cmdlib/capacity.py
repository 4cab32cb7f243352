"""Admitting resource demands against the nodes' live data.

Logical units ask the nodes exactly what a node query asks them (the same
live-data provider, :class:`ganeti.query.rpclive.RpcLiveData`), and
compute what a node can still take with the same rules
(:meth:`ganeti.config.ConfigStore.node_resources`): what the master admits
is what ``gnt-node list``, RAPI and luxi report, and what Ganeti's htools
plan with.
"""

from ganeti import errors
from ganeti.query import live
from ganeti.query.rpclive import RpcLiveData


async def node_resources(lu, node_uuids):
    """{node uuid: NodeResources} of ``node_uuids``, asking the nodes.

    Offline nodes are not asked; a node that does not answer has no live
    data (its resources say why).
    """
    cfg = lu.cfg
    node_uuids = sorted(set(node_uuids))
    rpc = lu.ctx.rpc
    if rpc is None:
        raise errors.OpPrereqError(
            "node RPC is not available on this master (no cluster"
            " certificate), the nodes' free resources cannot be checked",
            errors.ECODE_ENVIRON)
    provider = RpcLiveData(cfg, rpc)
    ask = [u for u in node_uuids if not cfg.get_node(u).offline]
    nodes, unreachable = await live.fetch_nodes_runtime(provider, ask)
    insts, unreachable2 = await live.fetch_instances_runtime(
        provider, [u for u in ask if u in nodes])
    reasons = {}
    for uuid in node_uuids:
        node = cfg.get_node(uuid)
        if node.offline:
            reasons[uuid] = "node %s is offline" % node.name
        elif uuid in unreachable or uuid in unreachable2:
            reasons[uuid] = ("node %s gave no live data (unreachable, or its"
                             " node daemon failed to answer)" % node.name)
            nodes.pop(uuid, None)
    return cfg.nodes_resources(node_uuids, nodes, insts, reasons)


async def check_instance_fits(lu, instance, disks=None, beparams=None,
                              only=None):
    """Refuse (OpPrereqError) unless ``instance``, with the given disks
    and beparams, fits on its nodes; what it holds there already counts as
    its own, so this checks adding it, changing it and moving it."""
    cfg = lu.cfg
    wants = cfg.instance_wants(instance, disks=disks, beparams=beparams)
    resources = await node_resources(lu, wants)
    cfg.check_instance_fits(instance, resources, disks=disks,
                            beparams=beparams, only=only)
    return resources


async def check_free_memory(lu, node_uuid, needed, what):
    """Refuse unless ``node_uuid`` has ``needed`` MiB free for a new
    demand (its free memory minus its reservations)."""
    res = (await node_resources(lu, [node_uuid]))[node_uuid]
    free = res.free_memory
    if free is None:
        raise errors.OpPrereqError(
            "Cannot check the free memory of node %s for %s: %s"
            % (res.node.name, what,
               res.reason or "the node does not report it"),
            errors.ECODE_ENVIRON)
    if needed > free:
        raise errors.OpPrereqError(
            "Not enough memory on node %s for %s: needed %s MiB, available"
            " %s MiB (free %s MiB, %s MiB reserved for stopped and"
            " forthcoming instances)" % (res.node.name, what, needed, free,
                                         res.mfree, res.reserved_memory),
            errors.ECODE_NORES)
    return free
