"""File disks (``file`` and ``sharedfile`` templates) and file storage units.

A file disk is an image file whose path is the second element of the
disk's ``logical_id`` (``["loop", "/srv/ganeti/file-storage/inst/disk0"]``,
as Ganeti stores it).  The path must lie inside one of the node's allowed
file storage directories; anything else is refused before any file is
touched, because the master's word alone must not let a disk operation
write or delete arbitrary files on a node.

Images are raw and sparse by default; ``params["format"] == "qcow2"``
makes qcow2 images with qemu-img (our extension: Ganeti's file disks are
raw only).  The metadata operations (open, truncate, stat, unlink, statvfs,
and the allowed directories, read from ssconf) are quick on a healthy disk
but hang on a failing one, so they run in ``ctx.run_blocking`` (the node
daemon's thread pool); qemu-img runs as a command, on the reactor.
"""

import errno
import json
import os
import stat

from twisted.internet import defer
from zope.interface import implementer

from ganeti import constants
from ganeti import errors
from ganeti.storage import (BlockDevice, IStorageUnitKind, StorageUnitInfo,
                            check_size, SO_FIX_CONSISTENCY)

__all__ = ["FileDevice", "FileStorageKind", "check_file_path",
           "FILE_DRIVERS", "FORMATS"]

#: First element of a file disk's logical_id (Ganeti's file drivers).
FILE_DRIVERS = frozenset(["loop", "blktap", "blktap2"])
FORMATS = frozenset(["raw", "qcow2"])
MiB = 1024 * 1024


def _inside(path, directory):
    return os.path.commonpath([path, directory]) == directory


def check_file_path(path, allowed_dirs, field="disk.logical_id"):
    """Return the real path of ``path`` if it lies in ``allowed_dirs``.

    The path must be absolute and normalised (no ``..``); symlinks in its
    directories are resolved before the check, so a link cannot lead out.
    """
    if not isinstance(path, str) or not path:
        raise errors.ParameterError(field, "%s: the file path must be a"
                                    " non-empty string, not %r" % (field, path))
    if not os.path.isabs(path):
        raise errors.ParameterError(field, "%s: file path %r is not absolute"
                                    % (field, path))
    if "\0" in path or os.path.normpath(path) != path:
        raise errors.ParameterError(field, "%s: file path %r is not"
                                    " normalised" % (field, path))
    if not allowed_dirs:
        raise errors.ParameterError(
            field, "%s: file path %r refused: this node has no file storage"
            " directory configured" % (field, path))
    real = os.path.join(os.path.realpath(os.path.dirname(path)),
                        os.path.basename(path))
    for directory in allowed_dirs:
        if real != directory and _inside(real, directory):
            return real
    raise errors.ParameterError(
        field, "%s: file path %s is outside the allowed file storage"
        " directories (%s)" % (field, path, ", ".join(allowed_dirs)))


class FileDevice(BlockDevice):
    """A ``file`` or ``sharedfile`` disk: its file work runs in
    ``ctx.run_blocking``, so ``remove`` and ``assemble`` are that work's
    Deferreds rather than coroutines."""

    def __init__(self, path, ctx, dev_type=constants.DT_FILE, fmt="raw"):
        self.dev_type = dev_type
        self.path = path
        self.format = fmt
        self._ctx = ctx

    def __repr__(self):
        return "<FileDevice %s (%s)>" % (self.path, self.format)

    @classmethod
    def from_disk(cls, disk, ctx):
        lid = disk.get("logical_id")
        if (not isinstance(lid, (list, tuple)) or len(lid) != 2):
            raise errors.ParameterError(
                "disk.logical_id", "disk.logical_id of a file disk must be"
                " [driver, path], not %r" % (lid,))
        if lid[0] not in FILE_DRIVERS:
            raise errors.ParameterError(
                "disk.logical_id", "disk.logical_id: file driver %r is not one"
                " of %s" % (lid[0], ", ".join(sorted(FILE_DRIVERS))))
        fmt = (disk.get("params") or {}).get("format", "raw")
        if fmt not in FORMATS:
            raise errors.ParameterError(
                "disk.params.format", "disk.params.format must be one of %s,"
                " not %r" % (", ".join(sorted(FORMATS)), fmt))
        path = check_file_path(lid[1], ctx.allowed_file_dirs())
        return cls(path, ctx, dev_type=disk["dev_type"], fmt=fmt)

    # -- helpers -------------------------------------------------------------

    async def _qemu_img(self, *args):
        argv = ["qemu-img"] + list(args)
        result = await self._ctx.runner.run(
            argv, timeout=self._ctx.command_timeout)
        if result.failed:
            raise errors.BlockDeviceError(
                "%s: %s" % (" ".join(argv[:2]), result.describe()))
        return result

    def _missing(self):
        return errors.BlockDeviceError("file disk %s does not exist"
                                       % self.path)

    # -- IBlockDevice --------------------------------------------------------

    def _blocking(self, fn, *args):
        return self._ctx.run_blocking(fn, *args)

    async def _create(self, size):
        size = check_size("size", size)
        if self.format == "qcow2":
            await self._blocking(self._prepare_create)
            await self._qemu_img("create", "-q", "-f", "qcow2", self.path,
                                 "%dM" % size)
            await self._blocking(os.chmod, self.path, 0o600)
            return self.path
        await self._blocking(self._create_raw, size)
        return self.path

    def _prepare_create(self):
        if os.path.lexists(self.path):
            raise errors.BlockDeviceError("file disk %s already exists"
                                          % self.path)
        os.makedirs(os.path.dirname(self.path), mode=0o750, exist_ok=True)

    def _create_raw(self, size):
        self._prepare_create()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, size * MiB)   # sparse: blocks come on write
        except OSError:
            os.close(fd)
            os.unlink(self.path)
            raise
        os.close(fd)

    def remove(self):
        return self._blocking(self._remove)

    def _remove(self):
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return
        # The per-instance directory goes with its last disk; never one of
        # the storage directories themselves.
        parent = os.path.dirname(self.path)
        if parent not in self._ctx.allowed_file_dirs():
            try:
                os.rmdir(parent)
            except OSError as err:
                if err.errno not in (errno.ENOTEMPTY, errno.EEXIST,
                                     errno.ENOENT):
                    raise

    def _check_exists(self):
        if not os.path.isfile(self.path):
            raise self._missing()

    def assemble(self):
        d = self._blocking(self._check_exists)
        return d.addCallback(lambda _: self.path)

    async def _grow(self, amount, dryrun):
        amount = check_size("amount", amount)
        if dryrun or self.format == "qcow2":
            await self._blocking(self._check_exists)
        if dryrun:
            return None
        if self.format == "qcow2":
            await self._qemu_img("resize", "-q", "-f", "qcow2", self.path,
                                 "+%dM" % amount)
        else:
            await self._blocking(self._grow_raw, amount)
        return None

    def _grow_raw(self, amount):
        self._check_exists()
        os.truncate(self.path, os.stat(self.path).st_size + amount * MiB)

    def _raw_size(self):
        """Size in bytes, or None if the file does not exist."""
        if not os.path.isfile(self.path):
            return None
        return os.stat(self.path).st_size

    async def _dimensions(self):
        size = await self._blocking(self._raw_size)
        if size is None:
            return None
        if self.format == "qcow2":
            result = await self._qemu_img("info", "--output=json", "-f",
                                          "qcow2", self.path)
            try:
                size = int(json.loads(result.stdout)["virtual-size"])
            except (ValueError, KeyError, TypeError) as err:
                raise errors.BlockDeviceError(
                    "cannot parse qemu-img info of %s: %s" % (self.path, err))
        return (size, None)


def _existing_parent(path):
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _unwritten(directory):
    """Bytes the regular files below ``directory`` may still grow into
    their apparent size (sparse images); symlinks are not followed."""
    total = 0
    for root, dirs, files in os.walk(directory):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue        # removed meanwhile
            if stat.S_ISREG(st.st_mode):
                total += max(0, st.st_size - st.st_blocks * 512)
    return total


@implementer(IStorageUnitKind)
class FileStorageKind(object):
    """File storage directories: a unit is a directory, its space is the
    space of the filesystem it is on."""

    def __init__(self, ctx, storage_type=constants.ST_FILE):
        self.storage_type = storage_type
        self._ctx = ctx

    def _unit(self, directory):
        allowed = self._ctx.allowed_file_dirs()
        real = os.path.realpath(directory) if isinstance(directory, str) \
            else None
        if real not in allowed:
            raise errors.ParameterError(
                "name", "%r is not a file storage directory of this node"
                " (known: %s)" % (directory, ", ".join(allowed) or "none"))
        try:
            st = os.statvfs(real)
        except FileNotFoundError:
            return StorageUnitInfo(type=self.storage_type, name=directory,
                                   allocatable=False)
        size = st.f_blocks * st.f_frsize // MiB
        free = st.f_bavail * st.f_frsize // MiB
        return StorageUnitInfo(type=self.storage_type, name=directory,
                               size=size, free=free, used=size - free,
                               allocatable=True)

    # _unit reads the allowed directories and statvfs: file work

    def list_units(self, name=None):
        return self._ctx.run_blocking(self._list_units, name)

    def _list_units(self, name):
        if name is not None:
            return [self._unit(name)]
        return [self._unit(d) for d in self._ctx.allowed_file_dirs()]

    def space_info(self, key, params=()):
        return self._ctx.run_blocking(self._space_info, key)

    def _space_info(self, key):
        """What the node reports for capacity: the filesystem's size and
        free space, less what its sparse images were promised but have not
        written yet (a file disk takes its full size sooner or later, as an
        LVM volume does at once).  A directory not made yet (the first disk
        makes it) reports the filesystem it will be made on."""
        unit = self._unit(key)
        real = os.path.realpath(key)
        size, free = unit.size, unit.free
        if size is None:
            st = os.statvfs(_existing_parent(real))
            size = st.f_blocks * st.f_frsize // MiB
            free = st.f_bavail * st.f_frsize // MiB
        else:
            free = max(0, free - _unwritten(real) // MiB)
        return {"type": self.storage_type, "name": key,
                "storage_size": size, "storage_free": free}

    def modify_unit(self, name, changes):
        return defer.fail(errors.ParameterError(
            "changes", "storage units of type %s have no modifiable fields"
            % self.storage_type))

    def execute(self, name, op):
        if op != SO_FIX_CONSISTENCY:
            return defer.fail(errors.ParameterError(
                "op", "operation %r is not valid for %s storage units (valid:"
                " %s)" % (op, self.storage_type, SO_FIX_CONSISTENCY)))
        return self._ctx.run_blocking(self._execute, name)

    def _execute(self, name):
        self._unit(name)        # one of this node's directories, or refused
        real = os.path.realpath(name)
        if os.path.isdir(real):
            return ["directory %s exists, nothing to do" % name]
        if os.path.lexists(real):
            raise errors.StorageError(
                "%s exists but is not a directory; move it away first"
                % name)
        os.makedirs(real, mode=0o750)
        return ["created the missing directory %s" % name]
