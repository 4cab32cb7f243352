"""Procedures about the node itself: version, resources (memory,
storage space), hypervisor checks and the files ``gnt-cluster verify``
compares with the configuration."""

import hashlib
import json
import os

from ganeti import constants
from ganeti import errors
from ganeti import ht
from ganeti import storage
from ganeti.backend import files
from ganeti.watcher import pause
from ganeti.server.noded.procedure import Arg, error_message, procedure


def _read_boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def boot_id(paths, start_id):
    """What this node reports as its boot id (the watcher activates disks
    again when it changes): the kernel's on a normal node (``--root /``).
    In a virtual cluster several node daemons share one kernel, and
    restarting a node's daemon is what stands for rebooting that node, so
    the daemon's ``start_id`` (new at each start) is added."""
    kernel = _read_boot_id()
    if paths.root == "/":
        return kernel
    return "%s/%s" % (kernel, start_id) if kernel else start_id


class _StorageUnit(ht.Type):
    """``[type, key, params]`` or ``{"type", "key", "params"}``, handed on
    as ``(type, key, params)``."""

    desc = "a storage unit [storage type, key, params]"
    _TYPE = ht.one_of(*constants.STORAGE_TYPES)

    def check(self, value):
        if isinstance(value, dict):
            value = [value.get("type"), value.get("key"),
                     value.get("params", [])]
        if not isinstance(value, (list, tuple)) or len(value) not in (2, 3):
            self.fail(value)
        try:
            st_type = self._TYPE.check(value[0])
        except ht.Invalid as err:
            raise ht.Invalid("item 0: %s" % err.reason, 1)
        params = value[2] if len(value) == 3 else []
        return st_type, value[1], params or []


_STORAGE_UNIT = _StorageUnit()


class NodeProcedures(object):
    """This node: version, resources, hypervisor checks, what verify
    compares."""

    @procedure()
    def version(self):
        """The RPC protocol version of this node daemon."""
        return constants.PROTOCOL_VERSION

    @procedure(Arg("storage_units", ht.list_of(_STORAGE_UNIT), []),
               Arg("hv_specs", ht.list_of(ht.ANY), []))
    async def node_info(self, storage_units, hv_specs):
        """Space of the given storage units, resources per hypervisor.

        Returns ``{"boot_id", "storage": [{"type", "name", "storage_size",
        "storage_free"[, "error"]}], "hypervisors": [NodeInfo fields +
        "name"]}``.  A broken storage unit is reported in its entry (with
        ``error``) instead of failing the whole call.
        """
        units = []
        for st_type, key, params in storage_units:
            try:
                kind = storage.storage_unit_kind(st_type, self.storage_ctx)
                units.append(await kind.space_info(key, params))
            except (errors.GenericError, OSError) as err:
                units.append({"type": st_type, "name": key,
                              "storage_size": None, "storage_free": None,
                              "error": error_message(err)})
        hvs = await self.instances.node_info(hv_specs)
        return {"boot_id": boot_id(self.paths, self.start_id),
                "storage": units, "hypervisors": hvs}

    @procedure(Arg("until", ht.maybe(ht.NUMBER)), blocking=True,
               ordered=True)
    def set_watcher_pause(self, until):
        """Pause this node's watcher until ``until`` (seconds since the
        epoch), or end the pause (null): the master hands every node its
        own copy (docs/watcher.rst)."""
        pause.write_pause(pause.pause_path(self.paths), until)
        return True

    @procedure(Arg("hv", ht.NESTR), Arg("hvparams", ht.DICT))
    async def hypervisor_validate_params(self, hv, hvparams):
        """Check hypervisor parameters on this node (files, binaries)."""
        await self.instances.validate_params(hv, hvparams)
        return True

    @procedure(Arg("hvs", ht.list_of(ht.NESTR)), Arg("hvparams", ht.DICT, {}))
    async def hypervisor_verify(self, hvs, hvparams):
        """``{hv: [problems]}``: each hypervisor's own check of this node
        (binary present and working, runtime directory); ``hvparams`` maps
        a hypervisor to its filled cluster parameters."""
        result = {}
        for name, driver in zip(hvs, self.instances.hypervisors(hvs)):
            result[name] = list(await driver.verify(hvparams.get(name) or {}))
        return result

    #: at most this many files are listed per storage directory
    VERIFY_MAX_FILES = 10000

    @procedure(Arg("storage_dirs", ht.list_of(ht.NESTR), []),
               Arg("vgs", ht.list_of(ht.NESTR), []),
               Arg("checksums", ht.list_of(ht.NESTR), []))
    async def verify_node_files(self, storage_dirs, vgs, checksums):
        """What ``gnt-cluster verify`` compares with the configuration:
        ``{"config_serial": serial of this node's config.data or null,
        "config_error": why it could not be read or null, "files": {dir:
        [paths of the files below it]}, "lvs": {vg: ["vg/lv", ...]},
        "errors": {dir or vg: message}, "checksums": {path: SHA-1 of the
        file or null if it is missing}}``.  Each directory must be one of
        the node's file storage directories (a missing one lists nothing);
        paths are given below the directory as named.  ``checksums`` names
        cluster files by their standard paths (the master compares the
        files it distributes)."""
        for path in checksums:
            if not path.startswith("/") or os.path.normpath(path) != path:
                raise errors.ParameterError(
                    "checksums", "argument 'checksums': %r is not an"
                    " absolute, normalised path" % (path,))
        result = await self.run_blocking(
            _verify_files, self.paths, self.storage_ctx, storage_dirs,
            self.VERIFY_MAX_FILES)
        result["checksums"] = await self.run_blocking(
            file_checksums, self.paths.root, checksums)
        result["lvs"] = {}
        if vgs:
            from ganeti.storage import lvm
            command = lvm._LvmCommands(self.storage_ctx)
        for vg in vgs:
            try:
                lvm.check_lvm_name("vgs", vg)
                answer = await command.run(
                    "lvs", "--reportformat", "json", "-o", "lv_name,vg_name",
                    vg)
                result["lvs"][vg] = sorted(
                    "%s/%s" % (row.get("vg_name"), row.get("lv_name"))
                    for row in lvm.parse_report(answer.stdout, "lv"))
            except (errors.GenericError, OSError) as err:
                result["errors"][vg] = error_message(err)
        return result


def file_checksums(root, standard_paths):
    """``{standard path: SHA-1 hex digest, or None if missing}`` of files
    below ``root`` (file work)."""
    result = {}
    for path in standard_paths:
        try:
            with open(os.path.join(root, path.lstrip("/")), "rb") as f:
                result[path] = hashlib.sha1(f.read()).hexdigest()
        except OSError:
            result[path] = None
    return result


def _verify_files(paths, storage_ctx, storage_dirs, max_files):
    """verify_node_files' file work: its result but for the LVs."""
    result = {"config_serial": None, "config_error": None, "files": {},
              "errors": {}}
    try:
        with open(paths.config_file, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
        serial = data.get("serial_no") if isinstance(data, dict) else None
        if isinstance(serial, int) and not isinstance(serial, bool):
            result["config_serial"] = serial
        else:
            result["config_error"] = "no serial_no in %s" % (
                paths.config_file)
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as err:
        result["config_error"] = error_message(err)
    allowed = storage_ctx.allowed_file_dirs()
    for directory in storage_dirs:
        if not os.path.isabs(directory) or \
                os.path.realpath(directory) not in allowed:
            result["errors"][directory] = (
                "%s is not a file storage directory of this node"
                % directory)
            continue
        found = []
        for top, _, names in os.walk(directory):
            found.extend(os.path.join(top, n) for n in sorted(names))
            if len(found) >= max_files:
                break
        result["files"][directory] = sorted(found)[:max_files]
    return result


def node_file_storage_dirs(paths, extra=()):
    """A callable listing the node's allowed file storage directories.

    Read at each call so ssconf updates apply at once (file work: the
    callers run in the daemon's thread pool): the standard dirs
    under the root, ssconf_file_storage_dir / ssconf_shared_file_storage_dir
    (as given, and under the root: in a virtual cluster config paths may be
    either), Ganeti's ``etc/ganeti/file-storage-paths`` and ``extra``.
    """
    def dirs():
        root = paths.root
        result = [os.path.join(root, "srv/ganeti/file-storage"),
                  os.path.join(root, "srv/ganeti/shared-file-storage")]
        result.extend(extra)
        configured = []
        for key in ("file_storage_dir", "shared_file_storage_dir"):
            value = files.read_ssconf_value(paths, key)
            if value:
                configured.append(value)
        try:
            with open(os.path.join(root, "etc/ganeti/file-storage-paths")) \
                    as f:
                configured.extend(line.strip() for line in f
                                  if line.strip() and
                                  not line.startswith("#"))
        except OSError:
            pass
        for value in configured:
            if not os.path.isabs(value) or value == "/":
                continue
            result.append(value)
            if root != "/" and os.path.commonpath([value, root]) != root:
                result.append(os.path.join(root, value.lstrip("/")))
        seen = []
        for d in result:
            if d not in seen:
                seen.append(d)
        return seen
    return dirs
