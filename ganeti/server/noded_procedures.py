"""The node daemon's RPC procedures: their arguments and what they do.

Each procedure declares its arguments (name, check, default); a call's JSON
body is the argument list (Ganeti style) or an object of named arguments.
Checks run before anything is done and fail with a
:class:`ganeti.errors.ParameterError` naming the argument, which the HTTP
layer reports as a bad request.  The work itself is in ``ganeti.backend``
and ``ganeti.storage``.
"""

import inspect
import json
import os

import attr
from twisted.internet import defer
from twisted.logger import Logger

from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import hypervisor as hv
from ganeti import storage
from ganeti.backend import files
from ganeti.storage import filestorage
from ganeti.utils import io

__all__ = ["Arg", "procedure", "NodeProcedures", "bind_arguments"]

log = Logger()

_REQUIRED = object()


# ---------------------------------------------------------------------------
# Argument checks: callable(name, value) -> value, or ParameterError

def _fail(name, what, value):
    raise errors.ParameterError(
        name, "argument '%s' must be %s, not %s" % (name, what,
                                                    _show(value)))


def _show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def anything(name, value):
    return value


def string(name, value):
    if not isinstance(value, str) or not value:
        _fail(name, "a non-empty string", value)
    return value


def text(name, value):
    """A string, possibly empty."""
    if not isinstance(value, str):
        _fail(name, "a string", value)
    return value


def boolean(name, value):
    if not isinstance(value, bool):
        _fail(name, "true or false", value)
    return value


def integer(minimum=None):
    def check(name, value):
        if isinstance(value, bool) or not isinstance(value, int) or \
                (minimum is not None and value < minimum):
            _fail(name, "an integer" + (" >= %d" % minimum
                                        if minimum is not None else ""),
                  value)
        return value
    return check


def number(minimum=None):
    def check(name, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                (minimum is not None and value < minimum):
            _fail(name, "a number" + (" >= %s" % minimum
                                      if minimum is not None else ""), value)
        return value
    return check


def mapping(name, value):
    if not isinstance(value, dict):
        _fail(name, "an object (dict)", value)
    return value


def list_of(item_check=anything):
    def check(name, value):
        if not isinstance(value, (list, tuple)):
            _fail(name, "a list", value)
        return [item_check("%s[%d]" % (name, i), v)
                for i, v in enumerate(value)]
    return check


def one_of(*allowed):
    def check(name, value):
        if value not in allowed:
            _fail(name, "one of %s" % ", ".join(map(repr, allowed)), value)
        return value
    return check


def optional(inner):
    def check(name, value):
        return None if value is None else inner(name, value)
    return check


def string_or_mapping(name, value):
    if isinstance(value, dict) or (isinstance(value, str) and value):
        return value
    _fail(name, "an instance name or an instance specification (dict)", value)


@attr.s(frozen=True)
class Arg(object):
    name = attr.ib()
    check = attr.ib(default=anything)
    default = attr.ib(default=_REQUIRED)

    @property
    def required(self):
        return self.default is _REQUIRED


def procedure(*args):
    """Mark a method of :class:`NodeProcedures` as an RPC procedure named
    like the method, taking ``args`` (:class:`Arg`)."""
    def mark(fn):
        fn.rpc_args = tuple(args)
        return fn
    return mark


def bind_arguments(name, spec, body):
    """Check a call's JSON body against ``spec``; the argument values."""
    if body is None:
        body = []
    if isinstance(body, dict):
        unknown = sorted(set(body) - set(a.name for a in spec))
        if unknown:
            raise errors.ParameterError(
                unknown[0], "procedure %s has no argument%s %s (its arguments:"
                " %s)" % (name, "s" if len(unknown) > 1 else "",
                          ", ".join(unknown),
                          ", ".join(a.name for a in spec) or "none"))
        given = body
    elif isinstance(body, list):
        if len(body) > len(spec):
            raise errors.ParameterError(
                "arguments", "procedure %s takes at most %d argument%s (%s),"
                " got %d" % (name, len(spec), "" if len(spec) == 1 else "s",
                             ", ".join(a.name for a in spec), len(body)))
        given = dict(zip((a.name for a in spec), body))
    else:
        raise errors.ParameterError(
            "arguments", "the request body must be a JSON list of arguments"
            " or an object of named arguments, not %s" % type(body).__name__)
    values = []
    for arg in spec:
        if arg.name in given:
            values.append(arg.check(arg.name, given[arg.name]))
        elif arg.required:
            raise errors.ParameterError(
                arg.name, "argument '%s' of %s is missing" % (arg.name, name))
        else:
            values.append(arg.default)
    return values


def _read_boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def _storage_unit(name, value):
    """``[type, key, params]`` or ``{"type", "key", "params"}``."""
    if isinstance(value, dict):
        value = [value.get("type"), value.get("key"), value.get("params", [])]
    if not isinstance(value, (list, tuple)) or len(value) not in (2, 3):
        _fail(name, "[storage type, key, params]", value)
    st_type, key = value[0], value[1]
    params = value[2] if len(value) == 3 else []
    if st_type not in constants.STORAGE_TYPES:
        _fail(name + "[0]", "a storage type (%s)"
              % ", ".join(sorted(constants.STORAGE_TYPES)), st_type)
    return st_type, key, params or []


# ---------------------------------------------------------------------------

def _resolve_existing(path):
    """realpath of the longest existing prefix of ``path``, plus the rest."""
    rest = []
    existing = path
    while not os.path.lexists(existing):
        existing, tail = os.path.split(existing)
        rest.insert(0, tail)
    return os.path.join(os.path.realpath(existing), *rest)


class NodeProcedures(object):
    """Every procedure of the node daemon, bound to one node."""

    def __init__(self, reactor, paths, storage_ctx, instances, os_backend):
        self.reactor = reactor
        self.paths = paths
        self.storage_ctx = storage_ctx
        self.instances = instances
        self.os = os_backend
        self.table = {}
        for attr_name, member in inspect.getmembers(type(self)):
            spec = getattr(member, "rpc_args", None)
            if spec is not None:
                self.table[attr_name] = (spec, getattr(self, attr_name))

    def names(self):
        return sorted(self.table)

    def call(self, name, body):
        """Deferred result of procedure ``name`` for the decoded JSON body.

        KeyError for an unknown procedure; ParameterError for bad
        arguments (before anything is done), other errors from the work.
        """
        spec, method = self.table[name]

        def run():
            result = method(*bind_arguments(name, spec, body))
            if inspect.iscoroutine(result):
                return defer.Deferred.fromCoroutine(result)
            return result
        return defer.maybeDeferred(run)

    # -- node ------------------------------------------------------------------

    @procedure()
    def version(self):
        """The RPC protocol version of this node daemon."""
        return constants.PROTOCOL_VERSION

    @procedure(Arg("storage_units", list_of(_storage_unit), []),
               Arg("hv_specs", list_of(anything), []))
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
                              "error": _message(err)})
        hvs = await self.instances.node_info(hv_specs)
        return {"boot_id": _read_boot_id(), "storage": units,
                "hypervisors": hvs}

    @procedure(Arg("su_name", string), Arg("su_args", list_of(anything), []),
               Arg("name", optional(string), None),
               Arg("fields", list_of(string),
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

    @procedure(Arg("hv", string), Arg("hvparams", mapping))
    async def hypervisor_validate_params(self, hv, hvparams):
        """Check hypervisor parameters on this node (files, binaries)."""
        await self.instances.validate_params(hv, hvparams)
        return True

    @procedure(Arg("hvs", list_of(string)), Arg("hvparams", mapping, {}))
    async def hypervisor_verify(self, hvs, hvparams):
        """``{hv: [problems]}``: each hypervisor's own check of this node
        (binary present and working, runtime directory); ``hvparams`` maps
        a hypervisor to its filled cluster parameters."""
        result = {}
        for name, driver in zip(hvs, self.instances.hypervisors(hvs)):
            result[name] = list(await driver.verify(hvparams.get(name) or {}))
        return result

    # -- instances ----------------------------------------------------------------

    @procedure(Arg("instance", mapping), Arg("startup_paused", boolean, False))
    async def instance_start(self, instance, startup_paused):
        """Start an instance specification (InstanceSpec fields +
        ``hypervisor``; disks as paths or disk config dicts)."""
        await self.instances.start(instance, startup_paused)
        return True

    @procedure(Arg("name", string), Arg("hv", string),
               Arg("timeout", number(0), hv.DEFAULT_STOP_TIMEOUT))
    async def instance_shutdown(self, name, hv, timeout):
        """Stop softly, killing after ``timeout`` seconds (0: at once)."""
        await self.instances.shutdown(name, hv, timeout)
        return True

    @procedure(Arg("instance", string_or_mapping),
               Arg("hv", optional(string), None),
               Arg("reboot_type", string),
               Arg("shutdown_timeout", number(0), hv.DEFAULT_STOP_TIMEOUT))
    async def instance_reboot(self, instance, hv, reboot_type,
                              shutdown_timeout):
        """soft: the hypervisor resets the guest; hard: stop and start again
        (needs the specification); full is the master's business."""
        await self.instances.reboot(instance, hv, reboot_type,
                                    shutdown_timeout)
        return True

    @procedure(Arg("name", string), Arg("hv", string))
    def instance_info(self, name, hv):
        """InstanceInfo fields + ``live``, or null if not on this node."""
        return self.instances.info(name, hv)

    @procedure(Arg("hvs", list_of(string)))
    def all_instances_info(self, hvs):
        """``{name: InstanceInfo fields + live + hypervisor}``."""
        return self.instances.all_info(hvs)

    @procedure(Arg("hvs", list_of(string)))
    def instance_list(self, hvs):
        """Sorted names of the instances of these hypervisors, any state."""
        return self.instances.list(hvs)

    @procedure(Arg("name", string), Arg("hv", string))
    async def instance_cleanup(self, name, hv):
        """Remove a kept (user-shutdown or crashed) domain (seed 004)."""
        await self.instances.cleanup(name, hv)
        return True

    # -- block devices --------------------------------------------------------------

    def _device(self, disk, field="disk"):
        try:
            return storage.block_device(disk, self.storage_ctx)
        except errors.ParameterError as err:
            raise errors.ParameterError(field, "argument '%s': %s"
                                        % (field, err.args[-1]))

    @procedure(Arg("disk", mapping), Arg("size", number(1)),
               Arg("owner", optional(text), None),
               Arg("on_primary", boolean, True),
               Arg("info", optional(text), None))
    async def blockdev_create(self, disk, size, owner, on_primary, info):
        """Create a disk of ``size`` MiB; returns its path (null: diskless)."""
        dev = self._device(disk)
        path = await dev.create(storage.check_size("size", size))
        log.info("Created {dev} ({size} MiB) for {owner}", dev=dev,
                 size=size, owner=owner)
        return path

    @procedure(Arg("disk", mapping))
    async def blockdev_remove(self, disk):
        """Delete a disk and its data; a missing disk is no error."""
        dev = self._device(disk)
        await dev.remove()
        log.info("Removed {dev}", dev=dev)
        return True

    @procedure(Arg("old_dir", string), Arg("new_dir", string))
    def file_storage_dir_rename(self, old_dir, new_dir):
        """Rename an instance's directory of file disks (instance rename).

        Both must lie inside this node's file storage directories; the new
        one must not exist.  A missing old directory is no error (the
        instance has no file disks on this node).
        """
        allowed = self.storage_ctx.allowed_file_dirs()
        old_real = filestorage.check_file_path(old_dir, allowed, "old_dir")
        new_real = filestorage.check_file_path(new_dir, allowed, "new_dir")
        if not os.path.exists(old_real):
            return False
        if not os.path.isdir(old_real):
            raise errors.ParameterError(
                "old_dir", "old_dir: %s is not a directory" % old_dir)
        if os.path.lexists(new_real):
            raise errors.ParameterError(
                "new_dir", "new_dir: %s already exists" % new_dir)
        os.rename(old_real, new_real)
        log.info("Renamed file storage directory {old} to {new}",
                 old=old_real, new=new_real)
        return True

    @procedure(Arg("disk", mapping), Arg("owner", optional(string), None),
               Arg("on_primary", boolean, True),
               Arg("idx", optional(integer(0)), None))
    async def blockdev_assemble(self, disk, owner, on_primary, idx):
        """Make a disk usable: ``{"path", "format", "mode"}``."""
        dev = self._device(disk)
        path = await dev.assemble()
        return {"path": path, "format": dev.format,
                "mode": disk.get("mode") or constants.DISK_RDWR}

    @procedure(Arg("disk", mapping))
    async def blockdev_shutdown(self, disk):
        dev = self._device(disk)
        await dev.shutdown()
        return True

    @procedure(Arg("disk", mapping), Arg("amount", number(1)),
               Arg("dryrun", boolean, False))
    async def blockdev_grow(self, disk, amount, dryrun):
        """Grow a disk by ``amount`` MiB."""
        dev = self._device(disk)
        await dev.grow(storage.check_size("amount", amount), dryrun)
        return True

    @procedure(Arg("disks", list_of(mapping)))
    async def blockdev_getdimensions(self, disks):
        """Per disk ``{"size": bytes, "spindles"}``, or null if missing."""
        result = []
        for idx, disk in enumerate(disks):
            dims = await self._device(disk, "disks[%d]" % idx).dimensions()
            result.append(None if dims is None else
                          {"size": dims[0], "spindles": dims[1]})
        return result

    # -- OS API -----------------------------------------------------------------------

    @procedure()
    def os_diagnose(self):
        """Every OS in the search path: name, path, valid, status,
        variants, parameters, api_versions."""
        return self.os.diagnose()

    @procedure(Arg("required", boolean), Arg("name", string),
               Arg("checks", list_of(string), []),
               Arg("params", mapping, {}),
               Arg("force_variant", boolean, False))
    def os_validate(self, required, name, checks, params, force_variant):
        """True if OS ``name`` (os+variant) is valid here and accepts
        ``params``; False if missing and not ``required``."""
        return self.os.validate(required, name, checks, params, force_variant)

    @procedure(Arg("instance", mapping), Arg("reinstall", boolean, False),
               Arg("debug", integer(0), 0))
    def instance_os_add(self, instance, reinstall, debug):
        """Run the OS create script; returns the log file's path."""
        return self.os.create(instance, reinstall, debug)

    @procedure(Arg("instance", mapping), Arg("old_name", string),
               Arg("debug", integer(0), 0))
    def instance_run_rename(self, instance, old_name, debug):
        """Run the OS rename script; returns the log file's path."""
        return self.os.rename(instance, old_name, debug)

    # -- files ------------------------------------------------------------------------

    @procedure(Arg("path", string), Arg("data", anything),
               Arg("mode", integer(0), 0o600), Arg("uid", anything, None),
               Arg("gid", anything, None),
               Arg("atime", optional(number()), None),
               Arg("mtime", optional(number()), None))
    def upload_file(self, path, data, mode, uid, gid, atime, mtime):
        """Write an allow-listed file (standard path) under the node root,
        or an admin-listed extra file (below :attr:`extra_file_dirs`)."""
        if path not in files.ALLOWED_UPLOADS and \
                not str(path).startswith(DATA_DIR + "/ssconf_"):
            self._upload_extra_file(path, data, mode)
            return True
        files.upload_file(self.paths.root, path, data, mode, uid, gid,
                          atime, mtime)
        return True

    @procedure(Arg("values", mapping))
    def write_ssconf_files(self, values):
        """Write ``ssconf_<key>`` files."""
        files.write_ssconf_files(self.paths, values)
        return True

    # -- verification ------------------------------------------------------

    #: at most this many files are listed per storage directory
    VERIFY_MAX_FILES = 10000

    @procedure(Arg("storage_dirs", list_of(string), []),
               Arg("vgs", list_of(string), []))
    async def verify_node_files(self, storage_dirs, vgs):
        """What ``gnt-cluster verify`` compares with the configuration:
        ``{"config_serial": serial of this node's config.data or null,
        "config_error": why it could not be read or null, "files": {dir:
        [paths of the files below it]}, "lvs": {vg: ["vg/lv", ...]},
        "errors": {dir or vg: message}}``.  Each directory must be one of
        the node's file storage directories (a missing one lists nothing);
        paths are given below the directory as named."""
        result = {"config_serial": None, "config_error": None, "files": {},
                  "lvs": {}, "errors": {}}
        try:
            with open(self.paths.config_file, "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
            serial = data.get("serial_no") if isinstance(data, dict) \
                else None
            if isinstance(serial, int) and not isinstance(serial, bool):
                result["config_serial"] = serial
            else:
                result["config_error"] = "no serial_no in %s" % (
                    self.paths.config_file)
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as err:
            result["config_error"] = _message(err)
        allowed = self.storage_ctx.allowed_file_dirs()
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
                if len(found) >= self.VERIFY_MAX_FILES:
                    break
            result["files"][directory] = sorted(found)[:self.VERIFY_MAX_FILES]
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
                result["errors"][vg] = _message(err)
        return result

    # -- membership (docs/membership.rst) ---------------------------------------------

    #: Standard directories an admin-listed extra file may be written to
    #: (``gnt-cluster redist-conf``); ganeti-noded --extra-file-dir adds more.
    extra_file_dirs = ("/etc/ganeti", "/etc/xen")
    #: Called (by the daemon) once this node has left the cluster.
    on_leave = None

    def _extra_file_target(self, path):
        """Where an admin-listed extra file goes under the root, or
        ParameterError: only below :attr:`extra_file_dirs`, never into the
        node's data directory (its certificate, config, keys)."""
        if path == REDIST_EXTRA_LIST:
            return os.path.join(self.paths.root, path.lstrip("/"))
        if path.startswith(DATA_DIR + "/") or path == DATA_DIR:
            raise errors.ParameterError(
                "path", "path %s is in the node's data directory; only the"
                " cluster files the master distributes go there" % path)
        dirs = [d.rstrip("/") for d in self.extra_file_dirs if d]
        parent = next((d for d in dirs if path.startswith(d + "/")), None)
        if parent is None:
            raise errors.ParameterError(
                "path", "path %s is not a file the master may upload: not"
                " a cluster file (%s, /var/lib/ganeti/ssconf_*) and not below"
                " a directory this node accepts extra files in (%s;"
                " ganeti-noded --extra-file-dir)"
                % (path, ", ".join(sorted(files.ALLOWED_UPLOADS)),
                   ", ".join(dirs) or "none"))
        allowed = _resolve_existing(os.path.join(self.paths.root,
                                                 parent.lstrip("/")))
        target = os.path.join(self.paths.root, path.lstrip("/"))
        # No symlink may lead out of the allowed directory: resolve what
        # exists of the target's directory (what does not exist yet will be
        # created as plain directories) and compare with the allowed one.
        real = _resolve_existing(os.path.dirname(target))
        if not (real + "/").startswith(allowed + "/"):
            raise errors.ParameterError(
                "path", "path %s leads outside %s (symbolic link)"
                % (path, parent))
        return target

    def _upload_extra_file(self, path, data, mode):
        if not isinstance(path, str) or not path.startswith("/") or \
                os.path.normpath(path) != path:
            raise errors.ParameterError(
                "path", "path must be an absolute, normalised file path, not"
                " %r" % (path,))
        target = self._extra_file_target(path)
        content = files.decode_data(data)
        if isinstance(mode, bool) or not 0 <= mode <= 0o7777:
            raise errors.ParameterError("mode", "mode must be a permission"
                                        " number, not %r" % (mode,))
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        self._extra_file_target(path)  # again, now that the dirs exist
        io.atomic_write(target, content, mode=mode)
        log.info("Wrote extra file {path}", path=path)
        return target

    @procedure()
    def node_leave(self):
        """Leave the cluster: remove the cluster's files (certificate,
        keys, config.data, ssconf, RAPI files); the daemon then stops, or
        goes back to bootstrap mode if it was started with --bootstrap."""
        removed = remove_cluster_files(self.paths)
        log.info("Left the cluster; removed {count} files",
                 count=len(removed))
        if self.on_leave is not None:
            # after the answer has gone out
            self.reactor.callLater(0.5, self.on_leave)
        return removed

    @procedure()
    def node_demote_from_mc(self):
        """No longer a master candidate: config.data goes away (ssconf
        stays), so nothing on this node can serve a stale configuration."""
        removed = []
        for name in ("config.data", "config.data.bak"):
            path = os.path.join(self.paths.data_dir, name)
            if os.path.exists(path):
                os.unlink(path)
                removed.append(path)
        return removed


def _message(err):
    if isinstance(err, errors.ParameterError) and len(err.args) > 1:
        return str(err.args[-1])
    if isinstance(err, OSError) and err.strerror:
        return "%s%s" % (err.strerror, (": %s" % err.filename)
                         if err.filename else "")
    return str(err) or err.__class__.__name__


def error_message(err):
    """The text reported to the caller for an exception."""
    return _message(err)


def node_file_storage_dirs(paths, extra=()):
    """A callable listing the node's allowed file storage directories.

    Read at each call so ssconf updates apply at once: the standard dirs
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


# ---------------------------------------------------------------------------
# Membership: leaving, and the procedures of a node not yet joined

DATA_DIR = "/var/lib/ganeti"
#: The admin's list of extra files (gnt-cluster redist-conf), also shipped.
REDIST_EXTRA_LIST = DATA_DIR + "/redist-extra-files"


def cluster_file_paths(paths):
    """Every file that makes a node a member of its cluster."""
    result = [os.path.join(paths.root, p.lstrip("/"))
              for p in sorted(files.ALLOWED_UPLOADS)]
    result += [os.path.join(paths.data_dir, name) for name in
               ("server.pem", "config.data.bak", "redist-extra-files")]
    try:
        names = sorted(os.listdir(paths.data_dir))
    except OSError:
        names = []
    result += [os.path.join(paths.data_dir, n) for n in names
               if n.startswith("ssconf_")]
    return result


def remove_cluster_files(paths):
    removed = []
    for path in cluster_file_paths(paths):
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


class BootstrapProcedures(object):
    """What a node daemon started with ``--bootstrap`` serves before it
    holds the cluster certificate: ``version`` and ``join``.

    ``peer_digest`` is the SHA-256 digest of the certificate the caller
    presented in the TLS handshake; ``joined(cert)`` is called once the
    cluster's files are written (the daemon then serves with the cluster
    certificate only).
    """

    def __init__(self, paths, peer_digest, joined):
        self.paths = paths
        self.peer_digest = peer_digest
        self._joined = joined
        self.table = {}
        for attr_name, member in inspect.getmembers(type(self)):
            spec = getattr(member, "rpc_args", None)
            if spec is not None:
                self.table[attr_name] = (spec, getattr(self, attr_name))

    names = NodeProcedures.names
    call = NodeProcedures.call

    @procedure()
    def version(self):
        return constants.PROTOCOL_VERSION

    @procedure(Arg("cluster_pem", string), Arg("hmac_key", string),
               Arg("cluster_name", string), Arg("node_name", string),
               Arg("ssconf", mapping, {}), Arg("config", anything, None))
    def join(self, cluster_pem, hmac_key, cluster_name, node_name, ssconf,
             config):
        """Become a member: write the cluster certificate (key included),
        the HMAC key, ssconf and (for a master candidate) config.data.

        The certificate must be the one the caller proved it holds in the
        TLS handshake and must be issued for ``cluster_name``.
        """
        try:
            cert = crypto.ClusterCertificate.from_pem(
                cluster_pem.encode("ascii"))
            cert.check_cluster_name(cluster_name)
        except (errors.X509CertError, UnicodeEncodeError) as err:
            raise errors.ParameterError("cluster_pem", "cluster_pem: %s"
                                        % err)
        if cert.digest() != self.peer_digest:
            raise errors.ParameterError(
                "cluster_pem", "cluster_pem: the certificate is not the one"
                " the caller presented; refusing to join")
        content = None
        if config is not None:
            content = files.decode_data(config, "config")
        pem_path = crypto.server_pem_path(self.paths)
        if os.path.exists(pem_path):
            raise errors.GenericError("this node already holds a cluster"
                                      " certificate (%s)" % pem_path)
        self.paths.ensure_dirs()
        files.write_ssconf_files(self.paths, ssconf)
        io.atomic_write(self.paths.hmac_key_file,
                                  hmac_key.encode("ascii"), mode=0o400)
        if content is not None:
            io.atomic_write(self.paths.config_file, content,
                                      mode=0o600)
        # last: the certificate decides whether this node is a member
        io.atomic_write(pem_path, cert.key_pem + cert.cert_pem,
                                  mode=0o400)
        log.info("Joined cluster {cluster} as {node}", cluster=cluster_name,
                 node=node_name)
        self._joined(cert)
        return True


# Migration, disk copy, disk status and storage unit procedures live in
# their own module (issue 4); they join the table here.
from ganeti.server import noded_redundancy  # noqa: E402
noded_redundancy.install(NodeProcedures)
