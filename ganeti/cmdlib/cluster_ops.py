"""Cluster-wide operations: destroy, and (in :mod:`verify`) verification.

``OP_CLUSTER_DESTROY`` only checks and agrees: the cluster must be down to
its master node with no instance left (forthcoming ones included).  Its
result is the master node's UUID, as Ganeti 3.0 returns it; the client
(``gnt-cluster destroy --yes-do-it``) then stops the daemons and removes
the cluster's files.
"""

from ganeti import errors
from ganeti import mcpu
from ganeti.cmdlib.base import LogicalUnit

# Importing this module registers the verification LUs too.
from ganeti.cmdlib import verify  # noqa: F401

#: at most this many names are listed in an error
_MAX_LISTED = 10


def _listing(names):
    names = sorted(names)
    text = ", ".join(names[:_MAX_LISTED])
    if len(names) > _MAX_LISTED:
        text += " and %d more" % (len(names) - _MAX_LISTED)
    return text


@mcpu.register
class LUClusterDestroy(LogicalUnit):
    """Agree to destroy an empty one-node cluster."""
    OP_ID = "OP_CLUSTER_DESTROY"
    # nothing else may run (or start) while we decide
    REQ_BGL = True

    def check_prereq(self):
        cfg = self.cfg
        master = cfg.cluster.master_node
        others = [n.name for n in cfg.nodes.values() if n.uuid != master]
        if others or master not in cfg.nodes:
            raise errors.OpPrereqError(
                "There are still %d node(s) in this cluster besides the"
                " master: %s; remove them first (gnt-node remove)"
                % (len(others), _listing(others)), errors.ECODE_INVAL)
        instances = [i.display_name + (" (forthcoming)" if i.forthcoming
                                       else "")
                     for i in cfg.instances.values()]
        if instances:
            raise errors.OpPrereqError(
                "There are still %d instance(s) in this cluster: %s; remove"
                " them first (gnt-instance remove)"
                % (len(instances), _listing(instances)), errors.ECODE_INVAL)

    async def exec_(self):
        master = self.cfg.nodes[self.cfg.cluster.master_node]
        self.log_info("The cluster can be destroyed; its master node is %s",
                      master.name)
        return master.uuid
