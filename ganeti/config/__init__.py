"""The configuration store: config.data in memory and on disk.

The master changes the configuration only through the named methods of
:class:`ConfigStore`.  Each of them checks its input first, applies the
change, verifies that it introduced no inconsistency, bumps serial numbers and
writes the file atomically; if any step fails the in-memory state is rolled
back, so a rejected change changes nothing.  Only what the change touched
is verified (with the checks it takes part in) and encoded again, and in
the master daemon the changes accepted until a write starts share it
(docs/config.rst).

Writing is: temporary file in the same directory, fsync, rename over
config.data, fsync of the directory.  The file being replaced is kept as
``config.data.bak`` first, so a good copy survives even a file that is later
truncated or corrupted by something outside our control; such a file is
refused on load with an error that names the problem and the backup.

Resource accounting (:mod:`ganeti.config.accounting`) counts forthcoming
instances exactly like real ones, so a forthcoming instance that was placed can
always be turned into a real one; what a node can still take comes from its
live data (:meth:`ConfigStore.node_resources`).
"""

from ganeti.config.accounting import (  # noqa: F401
    InstanceNeeds, NodeResources, NodeUsage)
from ganeti.config.store import ConfigStore  # noqa: F401

__all__ = ["ConfigStore", "InstanceNeeds", "NodeResources", "NodeUsage"]
