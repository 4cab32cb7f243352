"""Logical units: one module per object kind.

:data:`LOGICAL_UNITS` maps each OP_ID to the logical unit that runs it; the
opcode processor (:class:`ganeti.mcpu.Processor`) is given this table.  A
new logical unit is found once its module is listed in ``_MODULES``.
"""

from ganeti import errors
from ganeti.cmdlib import (
    backup, cluster, cluster_crypto, cluster_post_init, extstorage, group,
    group_evacuate, instance, instance_console, instance_create,
    instance_migration, instance_move, instance_multi_alloc,
    instance_set_params, instance_storage, network, node, node_commands,
    node_evacuate, node_oob, node_powercycle, operating_system, query,
    repair_disk_sizes, storage, tags, test, verify, verify_disks)
from ganeti.cmdlib.base import LogicalUnit

__all__ = ["LOGICAL_UNITS", "logical_units"]

_MODULES = (backup, cluster, cluster_crypto, cluster_post_init,
            repair_disk_sizes, query, verify, verify_disks, group,
            group_evacuate, network, node,
            node_evacuate, node_oob, node_commands, node_powercycle,
            instance, instance_console, instance_create, instance_multi_alloc,
            instance_set_params, instance_storage, instance_migration,
            instance_move, operating_system, extstorage, storage, tags,
            test)


def logical_units(modules=_MODULES):
    """OP_ID -> logical unit class, for every LU defined in ``modules``."""
    table = {}
    for module in modules:
        for value in vars(module).values():
            if not (isinstance(value, type) and issubclass(value, LogicalUnit)
                    and value.__module__ == module.__name__
                    and value.OP_ID):
                continue
            if value.OP_ID in table:
                raise errors.ProgrammerError(
                    "two logical units for %s: %s and %s"
                    % (value.OP_ID, table[value.OP_ID].__name__,
                       value.__name__))
            table[value.OP_ID] = value
    return table


#: OP_ID -> LogicalUnit subclass: what this master can run
LOGICAL_UNITS = logical_units()
