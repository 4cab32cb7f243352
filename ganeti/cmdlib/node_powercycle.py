"""OP_NODE_POWERCYCLE: ask a node's daemon to power-cycle its node
(``gnt-node powercycle``).

The node is the one that may be stuck, so nothing is locked (a wedged
node's locks may be held by the very jobs it stalls) and nothing changes
in the configuration; the master node is refused unless ``force``.  The
node daemon answers before it acts; its answer is the result.
"""

from ganeti import errors
from ganeti.cmdlib import node_calls
from ganeti.cmdlib.base import LogicalUnit


class LUNodePowercycle(LogicalUnit):
    OP_ID = "OP_NODE_POWERCYCLE"

    def expand_names(self):
        node = self.cfg.get_node(self.op.node_uuid or self.op.node_name)
        self.op.node_uuid = node.uuid
        self.op.node_name = node.name
        if node.uuid == self.cfg.cluster.master_node and not self.op.force:
            raise errors.OpPrereqError(
                "node_name: the node is the master and the force parameter"
                " was not set", errors.ECODE_INVAL)

    async def exec_(self):
        cluster = self.cfg.cluster
        hypervisor = cluster.enabled_hypervisors[0]
        hvparams = dict(cluster.hvparams.get(hypervisor) or {})
        return await node_calls.call_node(
            self, self.op.node_uuid, "node_powercycle",
            [hypervisor, hvparams], "Scheduling the reboot")
