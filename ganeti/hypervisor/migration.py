"""Moving a live instance between two nodes: the common vocabulary.

A migration is driven by the master, one step per node call (the same
sequence as Ganeti's):

1. ``migration_info(name)`` on the source: what the target must know (the
   specification the instance runs with, when it started);
2. ``accept_instance(spec, info, address, port)`` on the target: prepare an
   empty instance waiting for the incoming state (kvm: a qemu started with
   ``-incoming tcp:ADDRESS:PORT``); fires ``{"address", "port"}``, the
   place the source must send to;
3. ``migrate_instance(name, address, port, live)`` on the source: start
   sending (non-live: the source is paused first);
4. ``get_migration_status(name)`` on the source, polled until the status is
   not active any more (:data:`ACTIVE_STATUSES`);
5. ``finalize_migration_src(name, success, live)`` and
   ``finalize_migration_dst(name, info, success)``: on success the source
   copy is removed and the target runs; on failure the target copy is
   removed and the source keeps (or resumes) running.

``abort_migration(name)`` cancels a transfer in progress on the source.
"""

import attr

__all__ = ["MigrationStatus", "ACTIVE_STATUSES", "FAILED_STATUSES",
           "COMPLETED", "ACTIVE", "SETUP", "FAILED", "CANCELLED", "NONE"]

NONE = "none"
SETUP = "setup"
ACTIVE = "active"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
CANCELLING = "cancelling"
# qemu's other in-flight states (query-migrate)
PRE_SWITCHOVER = "pre-switchover"
DEVICE = "device"
POSTCOPY_ACTIVE = "postcopy-active"
WAIT_UNPLUG = "wait-unplug"

#: statuses in which the transfer is still going on (poll again)
ACTIVE_STATUSES = frozenset([SETUP, ACTIVE, PRE_SWITCHOVER, DEVICE,
                             POSTCOPY_ACTIVE, WAIT_UNPLUG, CANCELLING])
#: statuses meaning the transfer did not happen
FAILED_STATUSES = frozenset([FAILED, CANCELLED, NONE])


@attr.s(frozen=True)
class MigrationStatus(object):
    """Where a migration stands, as the source node sees it."""
    status = attr.ib()
    #: bytes of guest memory sent so far / in total (None if unknown)
    transferred_ram = attr.ib(default=None)
    total_ram = attr.ib(default=None)
    #: qemu's error text of a failed migration
    error = attr.ib(default=None)

    @property
    def active(self):
        return self.status in ACTIVE_STATUSES

    @property
    def failed(self):
        return self.status in FAILED_STATUSES

    def to_dict(self):
        return attr.asdict(self)

    @classmethod
    def from_dict(cls, data):
        return cls(**{k: data.get(k) for k in
                      ("status", "transferred_ram", "total_ram", "error")})
