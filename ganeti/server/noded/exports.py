"""Instance export procedures: the OS export/import scripts, the export
directory, and transfer files (disk data moving between nodes in chunks
through the master).  See :mod:`ganeti.backend.exports`."""

from twisted.logger import Logger

from ganeti import errors
from ganeti import exportinfo
from ganeti import ht
from ganeti.backend import exports
from ganeti.server.noded.disks import CHUNK_MAX
from ganeti.server.noded.procedure import Arg, procedure

log = Logger()

_COMPRESSION = ht.one_of(*exportinfo.COMPRESSIONS)


def _check_length(length):
    if length > CHUNK_MAX:
        raise errors.ParameterError(
            "length", "argument 'length' must be at most %d, not %d"
            % (CHUNK_MAX, length))


class ExportProcedures(object):
    """Exports of instances on this node."""

    @procedure(blocking=True)
    def export_list(self):
        """The names of the exports on this node."""
        return exports.list_exports(self.paths)

    @procedure(Arg("path", ht.NESTR), blocking=True)
    def export_info(self, path):
        """The config.ini text of an export (by name, or its directory's
        absolute path inside the export directory)."""
        return exports.read_info(self.paths, path)

    @procedure(Arg("name", ht.NESTR), blocking=True)
    def export_remove(self, name):
        """Remove an export; False if this node has none of that name."""
        return exports.remove(self.paths, name)

    @procedure(Arg("name", ht.NESTR), Arg("config", ht.NESTR),
               Arg("dumps", ht.DICT), blocking=True)
    def export_finalize(self, name, config, dumps):
        """Make export ``name`` from transfer files (``dumps``: dump file
        name -> transfer id) and its config.ini text; replaces an older
        export of the same name.  Returns the export's directory."""
        return exports.finalize(self.paths, name, config, dumps)

    @procedure(Arg("path", ht.NESTR), Arg("dump", ht.NESTR),
               Arg("offset", ht.NONNEG_INT), Arg("length", ht.POS_INT),
               blocking=True)
    def export_read_chunk(self, path, dump, offset, length):
        """A chunk of an export's dump file, as ``blockdev_read_chunk``."""
        _check_length(length)
        name = exports.dump_path(self.paths, path, dump)
        try:
            return exports.read_chunk(name, offset, length)
        except FileNotFoundError:
            raise errors.ExportError("export %s has no dump file %s"
                                     % (path, dump))

    @procedure(Arg("transfer_id", ht.NESTR), Arg("offset", ht.NONNEG_INT),
               Arg("length", ht.POS_INT), blocking=True)
    def transfer_read_chunk(self, transfer_id, offset, length):
        """A chunk of a transfer file, as ``blockdev_read_chunk``."""
        _check_length(length)
        path = exports.transfer_path(self.paths, transfer_id)
        try:
            return exports.read_chunk(path, offset, length)
        except FileNotFoundError:
            raise errors.ExportError("no transfer %s on this node"
                                     % transfer_id)

    @procedure(Arg("transfer_id", ht.NESTR), Arg("offset", ht.NONNEG_INT),
               Arg("data", ht.maybe(ht.NESTR), None),
               Arg("length", ht.NONNEG_INT, 0), blocking=True)
    def transfer_write_chunk(self, transfer_id, offset, data, length):
        """Write a chunk (base64; null: zeros) into a transfer file."""
        path = exports.transfer_path(self.paths, transfer_id)
        exports.ensure_transfer_dir(self.paths)
        exports.write_chunk(path, offset, data, length)
        return True

    @procedure(Arg("transfer_id", ht.NESTR), Arg("size", ht.NONNEG_INT),
               blocking=True)
    def transfer_finish(self, transfer_id, size):
        """The transfer file is complete: make it exactly ``size``
        bytes."""
        path = exports.transfer_path(self.paths, transfer_id)
        exports.ensure_transfer_dir(self.paths)
        exports.truncate(path, size)
        return True

    @procedure(Arg("transfer_id", ht.NESTR), blocking=True)
    def transfer_remove(self, transfer_id):
        """Remove a transfer file (no error if there is none)."""
        return exports.remove_transfer(self.paths, transfer_id)

    @procedure(Arg("instance", ht.DICT), Arg("disk_index", ht.NONNEG_INT),
               Arg("compress", _COMPRESSION, "none"),
               Arg("debug", ht.NONNEG_INT, 0))
    async def instance_os_export(self, instance, disk_index, compress,
                                 debug):
        """Run the OS export script for one disk into a new transfer
        file (compressed as asked); ``{"transfer_id", "size"}``."""
        transfer_id = exports.new_transfer_id()
        path = exports.transfer_path(self.paths, transfer_id)
        await self.run_blocking(exports.ensure_transfer_dir, self.paths)
        stale = await self.run_blocking(exports.clean_transfers, self.paths,
                                        self.reactor.seconds())
        if stale:
            log.info("Removed {count} stale transfer files: {names}",
                     count=len(stale), names=", ".join(stale))
        try:
            await self.os.export_disk(instance, disk_index, path, debug)
            size = await self.run_blocking(exports.compress, path, compress)
        except BaseException:
            await self.run_blocking(exports.remove_transfer, self.paths,
                                    transfer_id)
            raise
        log.info("Exported disk {idx} of {name}: {size} bytes ({how})",
                 idx=disk_index, name=instance.get("name"), size=size,
                 how=compress)
        return {"transfer_id": transfer_id, "size": size}

    @procedure(Arg("instance", ht.DICT), Arg("disk_index", ht.NONNEG_INT),
               Arg("transfer_id", ht.NESTR),
               Arg("compress", _COMPRESSION, "none"),
               Arg("debug", ht.NONNEG_INT, 0))
    async def instance_os_import(self, instance, disk_index, transfer_id,
                                 compress, debug):
        """Run the OS import script for one disk on the dump in a transfer
        file; the transfer file is removed afterwards.  Returns the
        script's log path."""
        path = exports.transfer_path(self.paths, transfer_id)
        try:
            raw = await self.run_blocking(exports.decompress, path, compress)
            return await self.os.import_disk(instance, disk_index, raw,
                                             debug)
        finally:
            await self.run_blocking(exports.remove_transfer, self.paths,
                                    transfer_id)
