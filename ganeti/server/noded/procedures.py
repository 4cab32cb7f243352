"""Every procedure of the node daemon, bound to one node.

The procedures are grouped by what they act on, one module each:
:mod:`~ganeti.server.noded.node` (this node), :mod:`~.instances`,
:mod:`~.disks`, :mod:`~.os_scripts`, :mod:`~.migration`, :mod:`~.drbd`,
:mod:`~.storage_units`, :mod:`~.commands` (restricted and repair
commands), :mod:`~.membership`, :mod:`~.renewal` (renewing the
cluster's secrets), :mod:`~.merge` (the cluster merger),
:mod:`~.queue_replica` (a master candidate's copy of the job queue),
:mod:`~.powercycle` (``gnt-node powercycle``), :mod:`~.extstorage`
(ExtStorage providers), :mod:`~.exports` (instance exports),
:mod:`~.remote_transfer` (moves between clusters) and :mod:`~.console`
(serial consoles relayed to the master).  The
work itself is in ``ganeti.backend`` and ``ganeti.storage``.
"""

import uuid

from ganeti.server.noded.commands import CommandProcedures
from ganeti.server.noded.console import ConsoleProcedures
from ganeti.server.noded.daemons import DaemonProcedures
from ganeti.server.noded.disks import DiskProcedures
from ganeti.server.noded.drbd import DrbdProcedures
from ganeti.server.noded.exports import ExportProcedures
from ganeti.server.noded.extstorage import ExtStorageProcedures
from ganeti.server.noded.instances import InstanceProcedures
from ganeti.server.noded.membership import MembershipProcedures
from ganeti.server.noded.merge import MergeProcedures
from ganeti.server.noded.migration import MigrationProcedures
from ganeti.server.noded.node import NodeProcedures as _ThisNode
from ganeti.server.noded.os_scripts import OsProcedures
from ganeti.server.noded.powercycle import PowercycleProcedures
from ganeti.server.noded.procedure import ProcedureTable
from ganeti.server.noded.queue_replica import QueueReplicaProcedures
from ganeti.server.noded.remote_transfer import RemoteTransferProcedures
from ganeti.server.noded.renewal import CryptoProcedures
from ganeti.server.noded.storage_units import StorageUnitProcedures

__all__ = ["NodeProcedures"]


class NodeProcedures(_ThisNode, InstanceProcedures, DiskProcedures,
                     OsProcedures, MigrationProcedures, DrbdProcedures,
                     StorageUnitProcedures, CommandProcedures,
                     MembershipProcedures, DaemonProcedures,
                     CryptoProcedures, MergeProcedures,
                     QueueReplicaProcedures, PowercycleProcedures,
                     ExtStorageProcedures, ExportProcedures,
                     RemoteTransferProcedures, ConsoleProcedures,
                     ProcedureTable):
    """The procedures of one node: ``table`` maps each name to its
    argument spec and bound method; :meth:`call` runs one.

    ``run_blocking`` runs file work (see :class:`ProcedureTable`); the
    storage context and the OS backend get the same one from
    ``make_procedures``.
    """

    def __init__(self, reactor, paths, storage_ctx, instances, os_backend,
                 *, run_blocking):
        self.reactor = reactor
        self.paths = paths
        self.storage_ctx = storage_ctx
        self.instances = instances
        self.os = os_backend
        #: new at each start: part of a virtual node's boot id
        self.start_id = uuid.uuid4().hex
        ProcedureTable.__init__(self, run_blocking)
