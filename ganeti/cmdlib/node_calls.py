"""Calling node daemons from logical units: one node, one procedure, and
an error that names the node and what failed.

Node names (not UUIDs) are what we hand to the RPC client (its resolver
takes either), so node-side messages name the node the way admins know it.
"""


from ganeti import errors


def rpc_client(lu):
    client = lu.ctx.rpc
    if client is None:
        raise errors.OpExecError(
            "node RPC is not available on this master (no cluster"
            " certificate), cannot talk to node daemons")
    return client


def node_name(cfg, node_uuid):
    node = cfg.nodes.get(node_uuid)
    return node.name if node is not None else node_uuid


def strip_node_prefix(msg, name):
    """The RPC client starts messages with "node <name>: "; we name the node
    ourselves."""
    msg = msg or "unknown error"
    for prefix in ("node %s: " % name,):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    return msg


def rpc_error(result, what, name, prereq=False):
    """The exception for a failed RpcResult: names the node and the action."""
    text = "%s failed on node %s: %s" % (
        what, name, strip_node_prefix(result.fail_msg, name))
    if prereq:
        return errors.OpPrereqError(text, errors.ECODE_ENVIRON)
    return errors.OpExecError(text)


async def call_node(lu, node_uuid, procedure, args, what, prereq=False,
                    timeout=None):
    """Call ``procedure`` on one node; its payload, or raise naming both."""
    name = node_name(lu.cfg, node_uuid)
    result = await rpc_client(lu).call(name, procedure, args, timeout)
    if not result.success:
        raise rpc_error(result, what, name, prereq)
    return result.payload


async def try_call_node(lu, node_uuid, procedure, args, timeout=None):
    """Call ``procedure`` on one node; the RpcResult, whatever happened."""
    name = node_name(lu.cfg, node_uuid)
    return await rpc_client(lu).call(name, procedure, args, timeout)


async def live_info(lu, instance, prereq=True):
    """What the primary node knows of the instance (None: not there)."""
    return await call_node(lu, instance.primary_node, "instance_info",
                           [instance.name, instance.hypervisor],
                           "Checking instance %s" % instance.name,
                           prereq=prereq)


async def check_free_memory(lu, node_uuid, hv_name, needed, what):
    """Refuse if the node's hypervisor reports less free memory."""
    payload = await call_node(lu, node_uuid, "node_info",
                              [[], [[hv_name, {}]]],
                              "Querying free memory", prereq=True)
    hvs = (payload or {}).get("hypervisors") or []
    free = hvs[0].get("memory_free") if hvs else None
    if not isinstance(free, int):
        raise errors.OpPrereqError(
            "Can't compute free memory on node %s, result was %r"
            % (node_name(lu.cfg, node_uuid), free), errors.ECODE_ENVIRON)
    if needed > free:
        raise errors.OpPrereqError(
            "Not enough memory on node %s for %s: needed %s MiB, available"
            " %s MiB" % (node_name(lu.cfg, node_uuid), what, needed, free),
            errors.ECODE_NORES)
