"""OP_RESTRICTED_COMMAND and OP_REPAIR_COMMAND: run a program a node has
whitelisted (``gnt-node restricted-command``, ``gnt-node repair-command``).

The master only names the command; each node decides whether it may run
(see :mod:`ganeti.backend.restricted`).  A restricted command runs on
several nodes at once and its result is ``[success, output or error]``
per node, in the order the nodes were given; the node locks are shared
unless ``use_locking`` asks for them exclusively.  A repair command runs
on one node, with the node locked exclusively, gets ``input`` on its
stdin, and its failure fails the opcode with the command's exit status
and output.

Neither logs job messages: what the CLI prints is the commands' output
alone, which scripts read (``-M`` prefixes each line with its node).
"""

from ganeti import errors
from ganeti import locking
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.node_calls import (node_name, rpc_client,
                                      strip_node_prefix, try_call_node)


def node_message(result, name):
    """The node's own words: without the "node N: " and "procedure: "
    the RPC layers put before them."""
    msg = strip_node_prefix(result.fail_msg, name)
    prefix = result.procedure + ": "
    return msg[len(prefix):] if msg.startswith(prefix) else msg


class LURestrictedCommand(LogicalUnit):
    OP_ID = "OP_RESTRICTED_COMMAND"

    def expand_names(self):
        # one call per node, one result per node given (names may repeat)
        self.wanted = [self.expand_node(n) for n in self.op.nodes]
        self.op.node_uuids = list(self.wanted)
        self.needed_locks[locking.LEVEL_NODE] = sorted(set(self.wanted))
        self.share_locks[locking.LEVEL_NODE] = not self.op.use_locking

    async def exec_(self):
        cfg = self.cfg
        command = self.op.command
        unique = sorted(set(self.wanted))
        names = [node_name(cfg, u) for u in unique]
        results = await rpc_client(self).call_many(
            names, "restricted_command", [command])
        by_uuid = dict(zip(unique, (results[n] for n in names)))
        out = []
        for uuid in self.wanted:
            res = by_uuid[uuid]
            name = node_name(cfg, uuid)
            if res.success:
                out.append([True, res.payload])
            else:
                msg = ("Command '%s' on node '%s' failed: %s"
                       % (command, name, node_message(res, name)))
                out.append([False, msg])
        return out


class LURepairCommand(LogicalUnit):
    OP_ID = "OP_REPAIR_COMMAND"

    def expand_names(self):
        self.node_uuid = self.expand_node(self.op.node_name)
        self.needed_locks[locking.LEVEL_NODE] = [self.node_uuid]

    async def exec_(self):
        res = await try_call_node(self, self.node_uuid, "repair_command",
                                  [self.op.command, self.op.input])
        if not res.success:
            name = node_name(self.cfg, self.node_uuid)
            raise errors.OpExecError(
                "Repair command '%s' on node '%s' failed: %s"
                % (self.op.command, name, node_message(res, name)))
        return res.payload
