"""Node daemon procedures for redundancy and storage units.

* live migration (Ganeti's names): ``migration_info``, ``accept_instance``,
  ``instance_migrate``, ``instance_get_migration_status``,
  ``instance_abort_migration``, ``instance_finalize_migration_dst``,
  ``instance_finalize_migration_src``; the sequence is described in
  :mod:`ganeti.hypervisor.migration`;
* copying a disk between nodes through the master (instance move):
  ``blockdev_read_chunk`` / ``blockdev_write_chunk`` / ``blockdev_truncate``;
  chunks that are all zeros are not sent (disks are sparse);
* disk status for mirror checks and automated repairs: ``blockdev_status``
  (per disk ok / degraded / missing, with the sync state of mirrors);
* storage units (seed 003): ``storage_modify`` (e.g. a PV's allocatable
  flag) and ``storage_execute`` (e.g. ``fix-consistency`` of a VG);
* DRBD network and sync control for replace-disks: ``drbd_disconnect_net``,
  ``drbd_attach_net``, ``drbd_wait_sync``, ``blockdev_replace_children``.

The procedures are added to :class:`ganeti.server.noded_procedures.
NodeProcedures` by :func:`install`.
"""

import base64
import os

from twisted.internet import threads

from ganeti import constants
from ganeti import errors
from ganeti import storage
from ganeti.server.noded_procedures import (
    Arg, anything, boolean, integer, list_of, mapping, optional, procedure,
    string)

__all__ = ["install", "RedundancyProcedures", "CHUNK_MAX"]

#: the biggest chunk one read may ask for (bytes)
CHUNK_MAX = 16 * 1024 * 1024


def _port(name, value):
    if value is None:
        return None
    return integer(0)(name, value)


class RedundancyProcedures(object):
    """Mixed into NodeProcedures (uses ``instances`` and ``storage_ctx``)."""

    # -- migration ----------------------------------------------------------

    @procedure(Arg("name", string), Arg("hv", string))
    async def migration_info(self, name, hv):
        """What the target needs to accept the instance (source side)."""
        return await self.instances.hypervisor(hv).migration_info(name)

    @procedure(Arg("instance", mapping), Arg("info", mapping),
               Arg("address", string), Arg("port", _port, None))
    async def accept_instance(self, instance, info, address, port):
        """Prepare to receive the instance (target side); its disks are
        assembled here.  ``{"address", "port"}`` to migrate to."""
        driver, spec = await self.instances.parse_spec(instance)
        return await driver.accept_instance(spec, info, address, port)

    @procedure(Arg("name", string), Arg("hv", string), Arg("address", string),
               Arg("port", integer(0)), Arg("live", boolean, True))
    async def instance_migrate(self, name, hv, address, port, live):
        """Start sending the instance to ``address``:``port``."""
        await self.instances.hypervisor(hv).migrate_instance(
            name, address, port, live)
        return True

    @procedure(Arg("name", string), Arg("hv", string))
    async def instance_get_migration_status(self, name, hv):
        status = await self.instances.hypervisor(hv).get_migration_status(
            name)
        return status.to_dict()

    @procedure(Arg("name", string), Arg("hv", string))
    async def instance_abort_migration(self, name, hv):
        await self.instances.hypervisor(hv).abort_migration(name)
        return True

    @procedure(Arg("name", string), Arg("hv", string),
               Arg("info", optional(mapping), None),
               Arg("success", boolean, True))
    async def instance_finalize_migration_dst(self, name, hv, info,
                                              success):
        await self.instances.hypervisor(hv).finalize_migration_dst(
            name, info, success)
        return True

    @procedure(Arg("name", string), Arg("hv", string),
               Arg("success", boolean, True), Arg("live", boolean, True))
    async def instance_finalize_migration_src(self, name, hv, success, live):
        await self.instances.hypervisor(hv).finalize_migration_src(
            name, success, live)
        return True

    # -- copying disks ------------------------------------------------------

    def _dev(self, disk, field="disk"):
        try:
            return storage.block_device(disk, self.storage_ctx)
        except errors.ParameterError as err:
            raise errors.ParameterError(field, "argument '%s': %s"
                                        % (field, err.args[-1]))

    async def _data_path(self, disk):
        dev = self._dev(disk)
        path = await dev.assemble()
        if path is None:
            raise errors.BlockDeviceError("disk %s has no data to copy"
                                          % disk.get("iv_name"))
        return path

    @procedure(Arg("disk", mapping), Arg("offset", integer(0)),
               Arg("length", integer(1)))
    async def blockdev_read_chunk(self, disk, offset, length):
        """``{"size", "data"}``: the data (base64) at ``offset``; ``data``
        is null when the chunk is all zeros, ``""`` past the end."""
        if length > CHUNK_MAX:
            raise errors.ParameterError(
                "length", "argument 'length' must be at most %d, not %d"
                % (CHUNK_MAX, length))
        path = await self._data_path(disk)
        return await threads.deferToThread(_read_chunk, path, offset, length)

    @procedure(Arg("disk", mapping), Arg("offset", integer(0)),
               Arg("data", optional(string), None),
               Arg("length", integer(0), 0))
    async def blockdev_write_chunk(self, disk, offset, data, length):
        """Write base64 ``data`` at ``offset``; null ``data`` means
        ``length`` zero bytes (written only where the disk is not a new
        sparse file, i.e. block devices)."""
        path = await self._data_path(disk)
        raw = base64.b64decode(data) if data else None
        await threads.deferToThread(_write_chunk, path, offset, raw, length)
        return True

    @procedure(Arg("disk", mapping), Arg("size", integer(0)))
    async def blockdev_truncate(self, disk, size):
        """Make a file disk exactly ``size`` bytes (end of a copy)."""
        path = await self._data_path(disk)
        if os.path.isfile(path):
            os.truncate(path, size)
        return True

    # -- disk status ----------------------------------------------------------

    @procedure(Arg("disks", list_of(mapping)))
    async def blockdev_status(self, disks):
        """Per disk: null if it does not exist here, else ``{"path",
        "status": ok|degraded|missing, "degraded", "sync_percent",
        "estimated_time", "ldisk", "details"}``."""
        result = []
        for idx, disk in enumerate(disks):
            dev = self._dev(disk, "disks[%d]" % idx)
            result.append(await storage.device_status(dev))
        return result

    # -- storage units (seed 003) ---------------------------------------------

    @procedure(Arg("su_name", string), Arg("su_args", list_of(anything), []),
               Arg("name", string), Arg("changes", mapping))
    async def storage_modify(self, su_name, su_args, name, changes):
        """Change fields of one storage unit (lvm-pv: allocatable)."""
        kind = self._kind(su_name)
        await kind.modify_unit(name, changes)
        return True

    @procedure(Arg("su_name", string), Arg("su_args", list_of(anything), []),
               Arg("name", string), Arg("op", string))
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

    # -- DRBD (replace-disks) -------------------------------------------------

    def _drbd(self, disk, field="disk"):
        dev = self._dev(disk, field)
        if dev.dev_type != constants.DT_DRBD8:
            raise errors.ParameterError(
                field, "argument '%s': disk %s is %s, not drbd"
                % (field, disk.get("iv_name"), dev.dev_type))
        return dev

    @procedure(Arg("disks", list_of(mapping)))
    async def drbd_disconnect_net(self, disks):
        """Put the DRBD disks into standalone mode (no peer)."""
        for idx, disk in enumerate(disks):
            await self._drbd(disk, "disks[%d]" % idx).disconnect_net()
        return True

    @procedure(Arg("disks", list_of(mapping)),
               Arg("multimaster", boolean, False))
    async def drbd_attach_net(self, disks, multimaster):
        """Connect the DRBD disks to the peers their config names."""
        for idx, disk in enumerate(disks):
            await self._drbd(disk, "disks[%d]" % idx).attach_net(multimaster)
        return True

    @procedure(Arg("disks", list_of(mapping)))
    async def drbd_wait_sync(self, disks):
        """``[all done, lowest sync percent or null]`` (one look, the master
        polls)."""
        done, lowest = True, None
        for idx, disk in enumerate(disks):
            st = await storage.device_status(
                self._drbd(disk, "disks[%d]" % idx))
            if st is None:
                raise errors.BlockDeviceError("DRBD disk %s does not exist"
                                              % disk.get("iv_name"))
            pct = st.get("sync_percent")
            if pct is not None:
                done = False
                lowest = pct if lowest is None else min(lowest, pct)
        return [done, lowest]

    @procedure(Arg("disk", mapping), Arg("new_children", list_of(mapping)),
               Arg("old_children", list_of(mapping), []))
    async def blockdev_replace_children(self, disk, new_children,
                                        old_children):
        """Detach a DRBD disk's local storage and attach ``new_children``
        (data LV, metadata LV) instead; DRBD resyncs from the peer."""
        await self._drbd(disk).replace_children(new_children)
        return True


def _read_chunk(path, offset, length):
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if offset >= size:
            return {"size": size, "data": ""}
        f.seek(offset)
        data = f.read(length)
    if not data.strip(b"\0"):
        return {"size": size, "data": None, "length": len(data)}
    return {"size": size, "data": base64.b64encode(data).decode("ascii"),
            "length": len(data)}


def _write_chunk(path, offset, data, length):
    with open(path, "r+b") as f:
        if data is None:
            if os.path.isfile(path):
                return      # a new file disk is sparse: zeros already
            data = b"\0" * length
        f.seek(offset)
        f.write(data)


def install(cls):
    """Add the procedures above (and their helpers) to the NodeProcedures
    class ``cls``; names it already has are left alone."""
    for name, member in vars(RedundancyProcedures).items():
        if name.startswith("__") or hasattr(cls, name):
            continue
        setattr(cls, name, member)
    return cls
