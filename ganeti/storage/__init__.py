"""Node-side storage: instance block devices and the storage units behind them.

Two seams, following Ganeti's storage units model:

* :class:`IBlockDevice` -- one disk of an instance on this node (a file, a
  logical volume, nothing for diskless), built from the disk's config dict
  (``dev_type``, ``logical_id``, ``params``) by :func:`block_device`.
* :class:`IStorageUnitKind` -- one kind of storage pool (``file``
  directories, LVM volume groups, LVM physical volumes) with the generic
  methods every kind provides: list its units with their space, and report
  the space of one unit.  Kind-specific operations (allocatable flags on
  PVs, directory creation...) belong to the kind's own class.  Kinds are
  not stacked: a PV does not know its VG's devices.

Everything that runs a command goes through ``StorageContext.runner`` (an
object with ``run(argv, ...) -> Deferred[CommandResult]``), so tests can
check the commands and feed recorded outputs.  File work (file disks, the
allowed directories read from ssconf, statvfs) goes through
``StorageContext.run_blocking``: the node daemon's thread pool, so that a
slow disk does not stall the daemon.
"""

import os

import attr
from twisted.internet import defer
from zope.interface import Attribute, Interface, implementer

from ganeti import constants
from ganeti import errors

__all__ = [
    "IBlockDevice", "BlockDevice", "IStorageUnitKind", "StorageContext",
    "StorageUnitInfo",
    "block_device", "open_block_device", "storage_unit_kind",
    "STORAGE_FIELDS",
    "device_mapper_available", "check_size",
]

#: Fields storage_list may ask for (Ganeti's SF_* names).
SF_NAME = "name"
SF_TYPE = "type"
SF_SIZE = "size"
SF_USED = "used"
SF_FREE = "free"
SF_ALLOCATABLE = "allocatable"
SF_VG = "vg"
STORAGE_FIELDS = (SF_NAME, SF_TYPE, SF_SIZE, SF_USED, SF_FREE,
                  SF_ALLOCATABLE, SF_VG)


class IBlockDevice(Interface):
    """One disk on this node.  Sizes are MiB; methods return Deferreds."""

    dev_type = Attribute("The disk template, e.g. 'file'.")
    path = Attribute("Device or image path handed to the hypervisor, or None"
                     " (diskless).")
    format = Attribute("'raw' or 'qcow2': how the hypervisor must open it.")

    def create(size):
        """Create the device with ``size`` MiB; fires the path.  Refuses to
        overwrite an existing device."""

    def remove():
        """Delete the device and its data; a missing device is no error."""

    def assemble():
        """Make the device usable by an instance; fires its path."""

    def shutdown():
        """Undo :meth:`assemble` (data stays)."""

    def grow(amount, dryrun=False):
        """Add ``amount`` MiB; with ``dryrun`` only check it would work."""

    def dimensions():
        """Fires ``(size in bytes, spindles or None)``, or None if the
        device does not exist."""


@implementer(IBlockDevice)
class BlockDevice(object):
    """Base of the block devices whose work is written as coroutines.

    Each :class:`IBlockDevice` method returns a Deferred of the coroutine
    of the same name with a leading underscore (``grow`` runs ``_grow``);
    a device provides the coroutines, or overrides the method.
    ``shutdown`` does nothing unless a device has something to undo.
    """

    def create(self, size):
        return defer.Deferred.fromCoroutine(self._create(size))

    def remove(self):
        return defer.Deferred.fromCoroutine(self._remove())

    def assemble(self):
        return defer.Deferred.fromCoroutine(self._assemble())

    def shutdown(self):
        return defer.Deferred.fromCoroutine(self._shutdown())

    async def _shutdown(self):
        return None

    def grow(self, amount, dryrun=False):
        return defer.Deferred.fromCoroutine(self._grow(amount, dryrun))

    def dimensions(self):
        return defer.Deferred.fromCoroutine(self._dimensions())


class IStorageUnitKind(Interface):
    """One kind of storage unit (the generic methods every kind has)."""

    storage_type = Attribute("e.g. 'lvm-vg', 'lvm-pv', 'file'.")

    def list_units(name=None):
        """Fires a list of :class:`StorageUnitInfo`, all units of this kind
        on the node, or only ``name``."""

    def space_info(key, params=()):
        """Fires ``{"type", "name", "storage_size", "storage_free"}`` (MiB)
        of the unit ``key`` (a VG name, a directory)."""

    def modify_unit(name, changes):
        """Change fields of unit ``name`` (``MODIFIABLE_FIELDS`` of the
        kind, e.g. lvm-pv ``allocatable``); ParameterError for others."""

    def execute(name, op):
        """Run operation ``op`` (``VALID_OPERATIONS`` of the kind, e.g.
        ``fix-consistency``) on unit ``name``; fires a list of messages."""


@attr.s(frozen=True)
class StorageUnitInfo(object):
    """A storage unit and its space in MiB (``None`` where unknown)."""
    type = attr.ib()
    name = attr.ib()
    size = attr.ib(default=None)
    used = attr.ib(default=None)
    free = attr.ib(default=None)
    allocatable = attr.ib(default=True)
    vg = attr.ib(default=None)   # lvm-pv only

    def field(self, name):
        if name not in STORAGE_FIELDS:
            raise errors.ParameterError(
                "fields", "unknown storage field %r (known: %s)"
                % (name, ", ".join(STORAGE_FIELDS)))
        return getattr(self, name)


#: Storage unit operation repairing a unit (Ganeti's SO_FIX_CONSISTENCY)
SO_FIX_CONSISTENCY = "fix-consistency"
#: fields each storage type can change (Ganeti's MODIFIABLE_STORAGE_FIELDS)
MODIFIABLE_STORAGE_FIELDS = {constants.ST_LVM_PV: frozenset([SF_ALLOCATABLE])}
#: operations per storage type (Ganeti has lvm-vg's; file directories can
#: be re-created here too)
VALID_STORAGE_OPERATIONS = {
    constants.ST_LVM_VG: frozenset([SO_FIX_CONSISTENCY]),
    constants.ST_FILE: frozenset([SO_FIX_CONSISTENCY]),
    constants.ST_SHARED_FILE: frozenset([SO_FIX_CONSISTENCY]),
}

#: The state of one disk on one node (what automated repairs build on)
DISK_OK = "ok"
DISK_DEGRADED = "degraded"
DISK_MISSING = "missing"
DISK_STATES = (DISK_OK, DISK_DEGRADED, DISK_MISSING)
#: Ganeti's local disk status values (LDS_*)
LDS_OKAY = 1
LDS_SYNC = 2
LDS_UNKNOWN = 3
LDS_FAULTY = 4


def ok_status(path):
    """The status of a device that exists and has no mirror to watch."""
    return {"path": path, "status": DISK_OK, "degraded": False,
            "sync_percent": None, "estimated_time": None,
            "ldisk": LDS_OKAY, "details": None}


async def device_status(dev):
    """Status dict of a block device (see ``blockdev_status``), or None if
    it does not exist on this node.  Mirrors (drbd) report their own; other
    devices are ok when they exist."""
    status = getattr(dev, "status", None)
    if status is not None:
        return await status()
    if await dev.dimensions() is None:
        return None
    return ok_status(dev.path)


def device_mapper_available(misc="/proc/misc"):
    """Whether the kernel has device-mapper (LVs can be activated)."""
    try:
        with open(misc) as f:
            return any(line.split()[1:2] == ["device-mapper"] for line in f)
    except OSError:
        return False


@attr.s
class StorageContext(object):
    """What storage code needs from the node daemon."""
    #: object with run(argv, env=, timeout=...) -> Deferred[CommandResult]
    runner = attr.ib()
    #: directories file disks may live in: a list, or a callable returning
    #: one (so ssconf changes apply without a restart)
    file_storage_dirs = attr.ib(default=())
    #: True/False, or None to probe /proc/misc once
    device_mapper = attr.ib(default=None)
    #: seconds an LVM or qemu-img command may take
    command_timeout = attr.ib(default=300)
    #: ``run_blocking(f, *args)`` -> Deferred of ``f(*args)`` run where file
    #: work may block (the node daemon's thread pool); by default at once
    run_blocking = attr.ib(default=defer.maybeDeferred)

    def allowed_file_dirs(self):
        """The allowed file storage directories, symlinks resolved (file
        work: may read ssconf; call it from ``run_blocking`` work)."""
        dirs = self.file_storage_dirs
        if callable(dirs):
            dirs = dirs()
        return [os.path.realpath(d) for d in dirs if d]

    def has_device_mapper(self):
        if self.device_mapper is None:
            self.device_mapper = device_mapper_available()
        return self.device_mapper


def check_size(name, value, allow_zero=False):
    """A size in MiB: an int (or integral float) > 0; else ParameterError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise errors.ParameterError(
            name, "%s must be a size in MiB (a number), not %r"
            % (name, value))
    if value != int(value):
        raise errors.ParameterError(
            name, "%s must be a whole number of MiB, not %r" % (name, value))
    value = int(value)
    if value < 0 or (value == 0 and not allow_zero):
        raise errors.ParameterError(
            name, "%s must be %s, not %d"
            % (name, "zero or more" if allow_zero else "positive", value))
    return value


def _check_disk_dict(disk):
    if not isinstance(disk, dict):
        raise errors.ParameterError(
            "disk", "a disk must be a dict (its config object), not %s"
            % type(disk).__name__)
    dev_type = disk.get("dev_type")
    if dev_type is None:
        raise errors.ParameterError("disk.dev_type", "disk.dev_type is missing")
    return dev_type


def open_block_device(disk, ctx):
    """Deferred :func:`block_device`: a file disk's path is checked
    against the allowed directories (ssconf read, symlinks resolved) in
    ``ctx.run_blocking``; other disks need no file work."""
    try:
        dev_type = _check_disk_dict(disk)
    except errors.ParameterError:
        return defer.fail()
    if dev_type in (constants.DT_FILE, constants.DT_SHARED_FILE):
        return ctx.run_blocking(block_device, disk, ctx)
    return defer.maybeDeferred(block_device, disk, ctx)


def block_device(disk, ctx):
    """The :class:`IBlockDevice` for a disk config dict (a file disk's path
    is checked here: file work, see :func:`open_block_device`)."""
    dev_type = _check_disk_dict(disk)
    if dev_type in (constants.DT_FILE, constants.DT_SHARED_FILE):
        from ganeti.storage import filestorage
        return filestorage.FileDevice.from_disk(disk, ctx)
    if dev_type == constants.DT_PLAIN:
        from ganeti.storage import lvm
        return lvm.LogicalVolume.from_disk(disk, ctx)
    if dev_type == constants.DT_DISKLESS:
        from ganeti.storage import diskless
        return diskless.DisklessDevice.from_disk(disk, ctx)
    if dev_type == constants.DT_DRBD8:
        from ganeti.storage import drbd
        return drbd.DrbdDevice.from_disk(disk, ctx)
    raise errors.ParameterError(
        "disk.dev_type", "disk type %r is not supported on this node (supported:"
        " %s)" % (dev_type, ", ".join(sorted(SUPPORTED_DEV_TYPES))))


SUPPORTED_DEV_TYPES = frozenset([constants.DT_FILE, constants.DT_SHARED_FILE,
                                 constants.DT_PLAIN, constants.DT_DISKLESS,
                                 constants.DT_DRBD8])


def storage_unit_kind(storage_type, ctx):
    """The :class:`IStorageUnitKind` for a storage type name."""
    if storage_type in (constants.ST_FILE, constants.ST_SHARED_FILE):
        from ganeti.storage import filestorage
        return filestorage.FileStorageKind(ctx, storage_type)
    if storage_type == constants.ST_LVM_VG:
        from ganeti.storage import lvm
        return lvm.VolumeGroupKind(ctx)
    if storage_type == constants.ST_LVM_PV:
        from ganeti.storage import lvm
        return lvm.PhysicalVolumeKind(ctx)
    raise errors.ParameterError(
        "storage_type", "storage type %r has no storage units here (known:"
        " %s)" % (storage_type, ", ".join(sorted(STORAGE_UNIT_TYPES))))


STORAGE_UNIT_TYPES = frozenset([constants.ST_FILE, constants.ST_SHARED_FILE,
                                constants.ST_LVM_VG, constants.ST_LVM_PV])
