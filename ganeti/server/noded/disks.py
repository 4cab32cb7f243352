"""Block device procedures: create, assemble, grow, remove, status, and
copying a disk between nodes in chunks through the master (instance move;
chunks that are all zeros are not sent: disks are sparse)."""

import os

from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti import ht
from ganeti import storage
from ganeti.backend import files
from ganeti.backend.exports import read_chunk as _read_chunk
from ganeti.storage import filestorage
from ganeti.server.noded.procedure import Arg, procedure

log = Logger()


#: the biggest chunk one read may ask for (bytes)
CHUNK_MAX = 16 * 1024 * 1024


class DiskProcedures(object):
    """Disks of instances on this node."""

    async def _device(self, disk, field="disk"):
        # a file disk's path is checked in the pool (ssconf, symlinks)
        try:
            return await storage.open_block_device(disk, self.storage_ctx)
        except errors.ParameterError as err:
            raise errors.ParameterError(field, "argument '%s': %s"
                                        % (field, err.args[-1]))

    @procedure(Arg("disk", ht.DICT), Arg("size", ht.number(1)),
               Arg("owner", ht.maybe(ht.STR), None),
               Arg("on_primary", ht.BOOL, True),
               Arg("info", ht.maybe(ht.STR), None))
    async def blockdev_create(self, disk, size, owner, on_primary, info):
        """Create a disk of ``size`` MiB; returns its path (null: diskless)."""
        dev = await self._device(disk)
        path = await dev.create(storage.check_size("size", size))
        log.info("Created {dev} ({size} MiB) for {owner}", dev=dev,
                 size=size, owner=owner)
        return path

    @procedure(Arg("disk", ht.DICT))
    async def blockdev_remove(self, disk):
        """Delete a disk and its data; a missing disk is no error."""
        dev = await self._device(disk)
        await dev.remove()
        log.info("Removed {dev}", dev=dev)
        return True

    @procedure(Arg("old_dir", ht.NESTR), Arg("new_dir", ht.NESTR))
    async def file_storage_dir_rename(self, old_dir, new_dir):
        """Rename an instance's directory of file disks (instance rename).

        Both must lie inside this node's file storage directories; the new
        one must not exist.  A missing old directory is no error (the
        instance has no file disks on this node).
        """
        renamed = await self.run_blocking(
            _rename_dir, self.storage_ctx, old_dir, new_dir)
        if renamed is None:
            return False
        log.info("Renamed file storage directory {old} to {new}",
                 old=renamed[0], new=renamed[1])
        return True

    @procedure(Arg("disk", ht.DICT), Arg("owner", ht.maybe(ht.NESTR), None),
               Arg("on_primary", ht.BOOL, True),
               Arg("idx", ht.maybe(ht.NONNEG_INT), None))
    async def blockdev_assemble(self, disk, owner, on_primary, idx):
        """Make a disk usable: ``{"path", "format", "mode"}``."""
        dev = await self._device(disk)
        path = await dev.assemble()
        return {"path": path, "format": dev.format,
                "mode": disk.get("mode") or constants.DISK_RDWR}

    @procedure(Arg("disk", ht.DICT))
    async def blockdev_shutdown(self, disk):
        dev = await self._device(disk)
        await dev.shutdown()
        return True

    @procedure(Arg("disk", ht.DICT), Arg("amount", ht.number(1)),
               Arg("dryrun", ht.BOOL, False))
    async def blockdev_grow(self, disk, amount, dryrun):
        """Grow a disk by ``amount`` MiB."""
        dev = await self._device(disk)
        await dev.grow(storage.check_size("amount", amount), dryrun)
        return True

    @procedure(Arg("disks", ht.list_of(ht.DICT)))
    async def blockdev_getdimensions(self, disks):
        """Per disk ``{"size": bytes, "spindles"}``, or null if missing."""
        result = []
        for idx, disk in enumerate(disks):
            dev = await self._device(disk, "disks[%d]" % idx)
            dims = await dev.dimensions()
            result.append(None if dims is None else
                          {"size": dims[0], "spindles": dims[1]})
        return result

    @procedure(Arg("disks", ht.list_of(ht.DICT)))
    async def blockdev_status(self, disks):
        """Per disk: null if it does not exist here, else ``{"path",
        "status": ok|degraded|missing, "degraded", "sync_percent",
        "estimated_time", "ldisk", "details"}``."""
        result = []
        for idx, disk in enumerate(disks):
            dev = await self._device(disk, "disks[%d]" % idx)
            result.append(await storage.device_status(dev))
        return result

    async def _data_path(self, disk):
        dev = await self._device(disk)
        path = await dev.assemble()
        if path is None:
            raise errors.BlockDeviceError("disk %s has no data to copy"
                                          % disk.get("iv_name"))
        return path

    @procedure(Arg("disk", ht.DICT), Arg("offset", ht.NONNEG_INT),
               Arg("length", ht.POS_INT))
    async def blockdev_read_chunk(self, disk, offset, length):
        """``{"size", "data"}``: the data (base64) at ``offset``; ``data``
        is null when the chunk is all zeros, ``""`` past the end."""
        if length > CHUNK_MAX:
            raise errors.ParameterError(
                "length", "argument 'length' must be at most %d, not %d"
                % (CHUNK_MAX, length))
        path = await self._data_path(disk)
        return await self.run_blocking(_read_chunk, path, offset, length)

    @procedure(Arg("disk", ht.DICT), Arg("offset", ht.NONNEG_INT),
               Arg("data", ht.maybe(ht.NESTR), None),
               Arg("length", ht.NONNEG_INT, 0))
    async def blockdev_write_chunk(self, disk, offset, data, length):
        """Write base64 ``data`` at ``offset``; null ``data`` means
        ``length`` zero bytes (written only where the disk is not a new
        sparse file, i.e. block devices)."""
        path = await self._data_path(disk)
        await self.run_blocking(_write_chunk, path, offset, data, length)
        return True

    @procedure(Arg("disk", ht.DICT), Arg("size", ht.NONNEG_INT))
    async def blockdev_truncate(self, disk, size):
        """Make a file disk exactly ``size`` bytes (end of a copy)."""
        path = await self._data_path(disk)
        await self.run_blocking(_truncate, path, size)
        return True


def _rename_dir(storage_ctx, old_dir, new_dir):
    """(old, new) real paths once renamed; None if old does not exist."""
    allowed = storage_ctx.allowed_file_dirs()
    old_real = filestorage.check_file_path(old_dir, allowed, "old_dir")
    new_real = filestorage.check_file_path(new_dir, allowed, "new_dir")
    if not os.path.exists(old_real):
        return None
    if not os.path.isdir(old_real):
        raise errors.ParameterError(
            "old_dir", "old_dir: %s is not a directory" % old_dir)
    if os.path.lexists(new_real):
        raise errors.ParameterError(
            "new_dir", "new_dir: %s already exists" % new_dir)
    os.rename(old_real, new_real)
    return old_real, new_real


def _truncate(path, size):
    if os.path.isfile(path):
        os.truncate(path, size)


def _write_chunk(path, offset, data, length):
    # decoded here: up to 16 MiB of base64 is CPU work too
    data = files.b64decode(data) if data else None
    with open(path, "r+b") as f:
        if data is None:
            if os.path.isfile(path):
                return      # a new file disk is sparse: zeros already
            data = b"\0" * length
        f.seek(offset)
        f.write(data)
