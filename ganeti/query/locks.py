"""Lock query rows, from the lock manager's ``query_locks()``.

Each entry of ``query_locks()`` is a dict with ``name``, ``mode`` (None,
"shared" or "exclusive"), ``owners`` and ``pending`` (``[(mode, [owners])]``
per waiting group).  Owners are shown as strings, nicely sorted; an empty
owner or pending list is shown as null.
"""

from ganeti.query.base import (Field, FieldTable, Resource, QFT_TEXT,
                               QFT_OTHER, nice_sort)


def _owner_name(owner):
    return owner if isinstance(owner, str) else str(owner)


def _owners(_run, lock):
    owners = lock.get("owners")
    if not owners:
        return None
    return nice_sort(_owner_name(o) for o in owners)


def _pending(_run, lock):
    pending = lock.get("pending")
    if not pending:
        return None
    return [[mode, nice_sort(_owner_name(o) for o in owners)]
            for (mode, owners) in pending]


def build_fields():
    t = FieldTable()
    t.extend([
        Field("name", "Name", QFT_TEXT, "Lock name (level/name)",
              lambda run, lock: lock["name"]),
        Field("mode", "Mode", QFT_OTHER,
              "How the lock is held now: exclusive, shared, or null",
              lambda run, lock: lock.get("mode")),
        Field("owner", "Owner", QFT_OTHER, "Current owners, or null",
              _owners),
        Field("pending", "Pending", QFT_OTHER,
              "Waiting acquires as [mode, [owners]] in queue order, or null",
              _pending),
    ])
    return t


class LockResource(Resource):
    name = "lock"
    noun = "lock"
    provider = "locks"
    fields = build_fields()

    def items(self, run, names):
        source = self.rows_provider(run)
        getter = getattr(source, "query_locks", source)
        return list(getter())

    def item_name(self, lock):
        return lock["name"]
