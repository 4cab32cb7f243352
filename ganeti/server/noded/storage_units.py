"""Storage unit procedures: list, modify (e.g. a PV's allocatable flag)
and execute (e.g. ``fix-consistency`` of a VG)."""

from ganeti import errors
from ganeti import ht
from ganeti import storage
from ganeti.server.noded.procedure import Arg, procedure


class StorageUnitProcedures(object):
    """The node's storage units (file, lvm-vg, lvm-pv, ...)."""

    @procedure(Arg("su_name", ht.NESTR),
               Arg("su_args", ht.list_of(ht.ANY), []),
               Arg("name", ht.maybe(ht.NESTR), None),
               Arg("fields", ht.list_of(ht.NESTR),
                   [storage.SF_NAME, storage.SF_SIZE, storage.SF_USED,
                    storage.SF_FREE, storage.SF_ALLOCATABLE]))
    async def storage_list(self, su_name, su_args, name, fields):
        """Rows (lists, in ``fields`` order) for the storage units of type
        ``su_name`` (file, sharedfile, lvm-vg, lvm-pv), or only ``name``."""
        for field in fields:
            if field not in storage.STORAGE_FIELDS:
                raise errors.ParameterError(
                    "fields", "unknown storage field %r (known: %s)"
                    % (field, ", ".join(storage.STORAGE_FIELDS)))
        try:
            kind = storage.storage_unit_kind(su_name, self.storage_ctx)
        except errors.ParameterError as err:
            raise errors.ParameterError("su_name", "argument 'su_name': %s"
                                        % err.args[-1])
        units = await kind.list_units(name)
        return [[u.field(f) for f in fields] for u in units]

    @procedure(Arg("su_name", ht.NESTR),
               Arg("su_args", ht.list_of(ht.ANY), []),
               Arg("name", ht.NESTR), Arg("changes", ht.DICT))
    async def storage_modify(self, su_name, su_args, name, changes):
        """Change fields of one storage unit (lvm-pv: allocatable)."""
        kind = self._kind(su_name)
        await kind.modify_unit(name, changes)
        return True

    @procedure(Arg("su_name", ht.NESTR),
               Arg("su_args", ht.list_of(ht.ANY), []),
               Arg("name", ht.NESTR), Arg("op", ht.NESTR))
    async def storage_execute(self, su_name, su_args, name, op):
        """Run a storage operation (``fix-consistency``) on one unit; the
        messages of what was done."""
        kind = self._kind(su_name)
        return await kind.execute(name, op)

    def _kind(self, su_name):
        try:
            return storage.storage_unit_kind(su_name, self.storage_ctx)
        except errors.ParameterError as err:
            raise errors.ParameterError("su_name", "argument 'su_name': %s"
                                        % err.args[-1])

    @procedure()
    async def node_volumes(self):
        """Every logical volume of this node, one row per physical volume
        it lies on: ``{"name": lv, "vg": vg, "size": MiB, "dev": pv}``
        (``gnt-node volumes``)."""
        from ganeti.storage import lvm
        command = lvm._LvmCommands(self.storage_ctx)
        answer = await command.run(
            "lvs", "--reportformat", "json", "--units", "m", "--nosuffix",
            "-o", "lv_name,lv_size,devices,vg_name")
        return volume_rows(lvm.parse_report(answer.stdout, "lv"))


def volume_rows(report):
    """``node_volumes`` rows from the rows of an ``lvs`` JSON report."""
    result = []
    for row in report:
        try:
            size = int(float(row.get("lv_size") or 0))
        except ValueError:
            size = 0
        devices = [d.split("(", 1)[0].strip()
                   for d in (row.get("devices") or "").split(",")]
        devices = [d for d in devices if d] or ["-"]
        for dev in devices:
            result.append({"name": row.get("lv_name"),
                           "vg": row.get("vg_name"), "size": size,
                           "dev": dev})
    return result
