"""Logical units: one module per object kind.

Importing this package registers every LU with the opcode processor
(``ganeti.mcpu.LU_REGISTRY``).
"""

from ganeti.cmdlib import cluster, instance, os, tags, test  # noqa: F401
from ganeti.cmdlib import group, node  # noqa: F401  (membership)
from ganeti.cmdlib import cluster_ops  # noqa: F401
from ganeti.cmdlib import instance_migration, instance_move, node_evacuate, storage  # noqa: F401,E501
