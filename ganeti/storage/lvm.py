"""LVM: ``plain`` disks (logical volumes) and the lvm-vg / lvm-pv units.

Written against the real lvm2 commands and their JSON reports
(``--reportformat json``).  A plain disk's ``logical_id`` is
``[vg name, lv name]`` and its device is ``/dev/<vg>/<lv>``.

Where the kernel has no device-mapper (see ``/proc/misc``), LVs cannot be
activated: we then still manage their metadata (create, grow, remove, list,
with ``--config global/activation=0``) so space accounting works, but
assembling one for an instance fails with a clear error.
"""

import json
import re

from twisted.internet import defer
from twisted.logger import Logger
from zope.interface import implementer

from ganeti import constants
from ganeti import errors
from ganeti.storage import (BlockDevice, IStorageUnitKind, StorageUnitInfo,
                            check_size, SF_ALLOCATABLE, SO_FIX_CONSISTENCY)

__all__ = ["LogicalVolume", "VolumeGroupKind", "PhysicalVolumeKind",
           "check_lvm_name", "check_stripes", "parse_report", "NO_DM_CONFIG"]

log = Logger()

_NAME_RE = re.compile(r"^[A-Za-z0-9+_.][A-Za-z0-9+_.-]*$")
#: Extra option of LVM commands when device-mapper is missing.
NO_DM_CONFIG = ["--config", "global/activation=0"]
# Commands are run from a daemon with pipes open; LVM would warn about them.
_LVM_ENV = {"LVM_SUPPRESS_FD_WARNINGS": "1"}
_NOT_FOUND = ("Failed to find logical volume", "not found")


def check_lvm_name(field, name):
    """LVM's rules for VG and LV names; ParameterError naming ``field``."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or \
            name in (".", "..") or len(name) > 127:
        raise errors.ParameterError(
            field, "%s: %r is not a valid LVM name (letters, digits, '+_.-',"
            " not starting with '-')" % (field, name))
    return name


def check_stripes(params):
    """The ``stripes`` disk parameter (1 if not given): a positive integer,
    else ParameterError naming it."""
    value = params.get(constants.LDP_STRIPES, 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.ParameterError(
            "disk.params", "disk.params/stripes must be a positive integer,"
            " not %r" % (value,))
    return value


def parse_report(stdout, kind):
    """The rows of an LVM JSON report (``kind``: "lv", "vg" or "pv")."""
    try:
        data = json.loads(stdout.decode("utf-8") if isinstance(stdout, bytes)
                          else stdout)
        rows = []
        for report in data["report"]:
            rows.extend(report.get(kind, []))
        return rows
    except (ValueError, KeyError, TypeError) as err:
        raise errors.StorageError("cannot parse the LVM %s report: %s"
                                  % (kind, err))


def _mib(value):
    """LVM prints sizes like "196.00" with --units m --nosuffix."""
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def _is_not_found(result):
    err = result.stderr.decode("utf-8", "replace")
    return any(marker in err for marker in _NOT_FOUND)


class _LvmCommands(object):
    """Runs LVM commands through the context's runner."""

    def __init__(self, ctx):
        self._ctx = ctx

    def argv(self, command, *args, mutates=False):
        argv = [command]
        if mutates and not self._ctx.has_device_mapper():
            argv += NO_DM_CONFIG
        return argv + list(args)

    async def run(self, command, *args, mutates=False, check=True):
        argv = self.argv(command, *args, mutates=mutates)
        result = await self._ctx.runner.run(
            argv, env=_LVM_ENV, timeout=self._ctx.command_timeout)
        if check and result.failed:
            raise errors.StorageError("%s: %s" % (command, result.describe()))
        return result


class LogicalVolume(BlockDevice):
    """A ``plain`` disk.  Its ``shutdown`` is the base's, which does nothing:
    as Ganeti, LVs stay active; deactivating them buys nothing and races
    with other users of the VG."""

    dev_type = constants.DT_PLAIN
    format = "raw"

    def __init__(self, vg, lv, ctx, params=None):
        self.vg = vg
        self.lv = lv
        #: the disk's effective parameters (``stripes``)
        self.params = dict(params or {})
        #: stripes the last create used (None before one)
        self.stripes_used = None
        self._ctx = ctx
        self._cmd = _LvmCommands(ctx)

    def __repr__(self):
        return "<LogicalVolume %s>" % self.name

    @property
    def name(self):
        return "%s/%s" % (self.vg, self.lv)

    @property
    def path(self):
        return "/dev/%s/%s" % (self.vg, self.lv)

    @classmethod
    def from_disk(cls, disk, ctx):
        lid = disk.get("logical_id")
        if not isinstance(lid, (list, tuple)) or len(lid) != 2:
            raise errors.ParameterError(
                "disk.logical_id", "disk.logical_id of a plain disk must be"
                " [vg name, lv name], not %r" % (lid,))
        params = disk.get("params") or {}
        if not isinstance(params, dict):
            raise errors.ParameterError(
                "disk.params", "disk.params must be a dict, not %r"
                % (params,))
        check_stripes(params)
        return cls(check_lvm_name("disk.logical_id", lid[0]),
                   check_lvm_name("disk.logical_id", lid[1]), ctx, params)

    async def _lv_row(self):
        """This LV's report row, or None if it does not exist."""
        result = await self._cmd.run(
            "lvs", "--reportformat", "json", "--units", "b", "--nosuffix",
            "-o", "lv_name,vg_name,lv_size,lv_attr", self.name, check=False)
        if result.failed:
            if _is_not_found(result):
                return None
            raise errors.StorageError("lvs: %s" % result.describe())
        rows = parse_report(result.stdout, "lv")
        return rows[0] if rows else None

    async def _allocatable_pvs(self):
        """``[(pv name, free MiB)]`` of this VG's PVs that allow
        allocation, the one with most free space first."""
        result = await self._cmd.run(
            "pvs", "--reportformat", "json", "--units", "m", "--nosuffix",
            "-o", "pv_name,vg_name,pv_free,pv_attr", check=False)
        if result.failed:
            raise errors.BlockDeviceError(
                "cannot list the physical volumes of volume group %s: %s"
                % (self.vg, result.describe()))
        pvs = [(row.get("pv_name"), _mib(row.get("pv_free")) or 0)
               for row in parse_report(result.stdout, "pv")
               if row.get("vg_name") == self.vg and
               (row.get("pv_attr") or "")[:1] == "a"]
        pvs.sort(key=lambda pv: -pv[1])
        return pvs

    async def _create(self, size):
        size = check_size("size", size)
        stripes = check_stripes(self.params)
        if await self._lv_row() is not None:
            raise errors.BlockDeviceError("logical volume %s already exists"
                                          % self.name)
        args = ["-L", "%dm" % size, "-n", self.lv, "-Wn"]
        if not self._ctx.has_device_mapper():
            args += ["-an", "-Zn"]   # metadata only: nothing to activate
        if stripes == 1:
            attempts = [(1, args + [self.vg])]
        else:
            attempts = await self._striped_attempts(args, size, stripes)
        for used, argv in attempts:
            result = await self._cmd.run("lvcreate", *argv, mutates=True,
                                         check=False)
            if not result.failed:
                break
        if result.failed:
            raise errors.BlockDeviceError(
                "cannot create logical volume %s: %s"
                % (self.name, result.describe()))
        if used < stripes:
            log.warn("Created logical volume {name} with {used} stripe(s)"
                     " instead of {stripes}", name=self.name, used=used,
                     stripes=stripes)
        self.stripes_used = used
        return self.path

    async def _striped_attempts(self, args, size, stripes):
        """The lvcreate arguments to try for a striped LV: as many stripes
        as asked, but no more than the VG has allocatable PVs (a warning
        then), and, when the free space is spread so that LVM cannot stripe
        that wide, one stripe fewer each time down to one.  The PVs are
        named, the one with most free space first."""
        pvs = await self._allocatable_pvs()
        if not pvs:
            raise errors.BlockDeviceError(
                "cannot create logical volume %s: volume group %s has no"
                " allocatable physical volume" % (self.name, self.vg))
        usable = min(stripes, len(pvs))
        if usable < stripes:
            msg = ("Could not use %d stripes for logical volume %s: volume"
                   " group %s has only %d allocatable physical volume%s;"
                   " using %d" % (stripes, self.name, self.vg, len(pvs),
                                  "" if len(pvs) == 1 else "s", usable))
            log.warn("{msg}", msg=msg)
        free = sum(f for _, f in pvs)
        if free < size:
            raise errors.BlockDeviceError(
                "cannot create logical volume %s: not enough free space in"
                " volume group %s (%d MiB needed, %d MiB free)"
                % (self.name, self.vg, size, free))
        names = [name for name, _ in pvs]
        return [(n, args + ["-i", str(n), self.vg] + names)
                for n in range(usable, 0, -1)]

    async def _remove(self):
        if await self._lv_row() is None:
            return
        result = await self._cmd.run("lvremove", "-f", self.name,
                                     mutates=True, check=False)
        if result.failed and not _is_not_found(result):
            raise errors.BlockDeviceError(
                "cannot remove logical volume %s: %s"
                % (self.name, result.describe()))

    async def _assemble(self):
        if not self._ctx.has_device_mapper():
            raise errors.BlockDeviceError(
                "cannot activate logical volume %s: this node's kernel has no"
                " device-mapper (not in /proc/misc)" % self.name)
        result = await self._cmd.run("lvchange", "-ay", self.name,
                                     check=False)
        if result.failed:
            raise errors.BlockDeviceError(
                "cannot activate logical volume %s: %s"
                % (self.name, result.describe()))
        return self.path

    async def _grow(self, amount, dryrun):
        amount = check_size("amount", amount)
        args = ["-L", "+%dm" % amount]
        if dryrun:
            args.append("--test")
        result = await self._cmd.run("lvextend", *(args + [self.name]),
                                     mutates=not dryrun, check=False)
        if result.failed:
            raise errors.BlockDeviceError(
                "cannot grow logical volume %s by %d MiB: %s"
                % (self.name, amount, result.describe()))

    async def _dimensions(self):
        row = await self._lv_row()
        if row is None:
            return None
        try:
            return (int(row["lv_size"]), None)
        except (KeyError, ValueError) as err:
            raise errors.StorageError("cannot parse the size of %s: %s"
                                      % (self.name, err))


@implementer(IStorageUnitKind)
class VolumeGroupKind(object):
    storage_type = constants.ST_LVM_VG

    def __init__(self, ctx):
        self._cmd = _LvmCommands(ctx)

    async def _list(self, name):
        args = ["--reportformat", "json", "--units", "m", "--nosuffix",
                "-o", "vg_name,vg_size,vg_free"]
        if name is not None:
            args.append(check_lvm_name("name", name))
        result = await self._cmd.run("vgs", *args, check=False)
        if result.failed:
            if name is not None and _is_not_found(result):
                raise errors.StorageError("volume group %s does not exist"
                                          % name)
            raise errors.StorageError("vgs: %s" % result.describe())
        units = []
        for row in parse_report(result.stdout, "vg"):
            size, free = _mib(row.get("vg_size")), _mib(row.get("vg_free"))
            used = size - free if None not in (size, free) else None
            units.append(StorageUnitInfo(type=self.storage_type,
                                         name=row.get("vg_name"), size=size,
                                         free=free, used=used))
        return units

    def list_units(self, name=None):
        return defer.Deferred.fromCoroutine(self._list(name))

    async def _space(self, key):
        unit = (await self._list(key))[0]
        return {"type": self.storage_type, "name": key,
                "storage_size": unit.size, "storage_free": unit.free}

    def space_info(self, key, params=()):
        return defer.Deferred.fromCoroutine(self._space(key))

    def modify_unit(self, name, changes):
        return defer.fail(errors.ParameterError(
            "changes", "storage units of type %s have no modifiable fields"
            % self.storage_type))

    def execute(self, name, op):
        return defer.Deferred.fromCoroutine(self._execute(name, op))

    async def _missing_pvs(self, name):
        result = await self._cmd.run(
            "vgs", "--reportformat", "json", "-o", "vg_name,vg_missing_pv_count",
            check_lvm_name("name", name), check=False)
        if result.failed:
            if _is_not_found(result):
                raise errors.StorageError("volume group %s does not exist"
                                          % name)
            raise errors.StorageError("vgs: %s" % result.describe())
        rows = parse_report(result.stdout, "vg")
        return int(rows[0].get("vg_missing_pv_count") or 0) if rows else 0

    async def _execute(self, name, op):
        if op != SO_FIX_CONSISTENCY:
            raise errors.ParameterError(
                "op", "operation %r is not valid for %s storage units (valid:"
                " %s)" % (op, self.storage_type, SO_FIX_CONSISTENCY))
        missing = await self._missing_pvs(name)
        if not missing:
            return ["volume group %s is consistent, nothing to do" % name]
        # Drops the PVs that are gone from the VG's metadata.  LVs with
        # extents on them make this fail: their instances need
        # replace-disks first (or the removal of those LVs).
        result = await self._cmd.run("vgreduce", "--removemissing", name,
                                     mutates=True, check=False)
        if result.failed:
            raise errors.StorageError(
                "cannot remove the %d missing physical volume(s) of volume"
                " group %s (logical volumes on them must be replaced or"
                " removed first): %s" % (missing, name, result.describe()))
        left = await self._missing_pvs(name)
        if left:
            raise errors.StorageError(
                "volume group %s still misses %d physical volume(s) after"
                " vgreduce" % (name, left))
        return ["removed %d missing physical volume(s) from volume group %s"
                % (missing, name)]


@implementer(IStorageUnitKind)
class PhysicalVolumeKind(object):
    storage_type = constants.ST_LVM_PV

    def __init__(self, ctx):
        self._cmd = _LvmCommands(ctx)

    async def _list(self, name=None, vg=None):
        args = ["--reportformat", "json", "--units", "m", "--nosuffix",
                "-o", "pv_name,vg_name,pv_size,pv_free,pv_used,pv_attr"]
        if name is not None:
            if not isinstance(name, str) or not name.startswith("/dev/"):
                raise errors.ParameterError(
                    "name", "a physical volume is named by its device path"
                    " (/dev/...), not %r" % (name,))
            args.append(name)
        result = await self._cmd.run("pvs", *args, check=False)
        if result.failed:
            raise errors.StorageError("pvs: %s" % result.describe())
        units = []
        for row in parse_report(result.stdout, "pv"):
            if vg is not None and row.get("vg_name") != vg:
                continue
            attrs = row.get("pv_attr") or ""
            units.append(StorageUnitInfo(
                type=self.storage_type, name=row.get("pv_name"),
                size=_mib(row.get("pv_size")), free=_mib(row.get("pv_free")),
                used=_mib(row.get("pv_used")),
                # first attribute letter: "a" while allocation is allowed
                allocatable=attrs[:1] == "a", vg=row.get("vg_name") or None))
        return units

    def list_units(self, name=None):
        return defer.Deferred.fromCoroutine(self._list(name))

    async def _space(self, key):
        # key: a VG; its PVs' space where allocation is allowed (the space
        # exclusive storage can use).
        pvs = await self._list(vg=check_lvm_name("key", key))
        usable = [p for p in pvs if p.allocatable]
        return {"type": self.storage_type, "name": key,
                "storage_size": sum(p.size or 0 for p in usable),
                "storage_free": sum(p.free or 0 for p in usable)}

    def space_info(self, key, params=()):
        return defer.Deferred.fromCoroutine(self._space(key))

    def modify_unit(self, name, changes):
        return defer.Deferred.fromCoroutine(self._modify(name, changes))

    async def _modify(self, name, changes):
        unknown = sorted(set(changes) - {SF_ALLOCATABLE})
        if unknown:
            raise errors.ParameterError(
                "changes", "fields %s of %s storage units cannot be modified"
                " (modifiable: %s)" % (", ".join(unknown), self.storage_type,
                                       SF_ALLOCATABLE))
        if SF_ALLOCATABLE not in changes:
            return
        value = changes[SF_ALLOCATABLE]
        if not isinstance(value, bool):
            raise errors.ParameterError(
                "changes", "changes/allocatable must be true or false, not %r"
                % (value,))
        units = await self._list(name)
        if not units:
            raise errors.StorageError("physical volume %s does not exist"
                                      % name)
        if units[0].vg is None:
            raise errors.StorageError(
                "physical volume %s is in no volume group; only PVs of a"
                " volume group have an allocatable flag" % name)
        await self._cmd.run("pvchange", "-x", "y" if value else "n", name,
                            mutates=True)

    def execute(self, name, op):
        return defer.fail(errors.ParameterError(
            "op", "storage units of type %s have no operations (%r)"
            % (self.storage_type, op)))
