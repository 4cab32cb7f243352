"""The OS API: OS definitions on this node and running their scripts.

An OS definition is a directory named after the OS in one of the node's
OS search path directories (first match wins), holding:

``ganeti_api_version``
    the API versions it speaks, one per line (10, 15, 20 are known here).
``create``, ``export``, ``import``, ``rename``
    executable scripts; ``verify`` too from API 20 on.
``variants.list`` (API 15+, optional)
    one variant per line; an instance's OS is then named
    ``<os>+<variant>``.
``parameters.list`` (API 20, required there)
    ``<name> <description>`` per line: the OS parameters it accepts.

Scripts get everything through their environment; which variables an OS
sees depends on the highest API version both sides speak: variants and
INSTANCE_HYPERVISOR (with the hypervisor parameters) from 15 on,
OSP_<param> from 20 on.  Output of every run goes to a log file under
``<root>/var/log/ganeti/os/``; a failure reports the last lines.

Reading OS definitions and writing the logs is file work: :class:`OsBackend`
does it through its ``run_blocking`` (the node daemon's thread pool), the
module-level functions do it where they are called.
"""

import os
import re
import stat
import time

import attr
from twisted.internet import defer
from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti import storage
from ganeti.backend import process

__all__ = [
    "OsApiError", "OsDefinition", "OsBackend", "split_os_name",
    "default_search_path", "load_os", "find_os", "diagnose", "build_env",
    "SUPPORTED_API_VERSIONS",
]

log = Logger()

SUPPORTED_API_VERSIONS = frozenset(constants.OS_API_VERSIONS)
API_FILE = "ganeti_api_version"
VARIANTS_FILE = "variants.list"
PARAMETERS_FILE = "parameters.list"
SCRIPT_CREATE = "create"
SCRIPT_EXPORT = "export"
SCRIPT_IMPORT = "import"
SCRIPT_RENAME = "rename"
SCRIPT_VERIFY = "verify"
#: an OS that has this script is reported untrusted (as Ganeti 3.0 does)
SCRIPT_CREATE_UNTRUSTED = "create_untrusted"
BASE_SCRIPTS = (SCRIPT_CREATE, SCRIPT_EXPORT, SCRIPT_IMPORT, SCRIPT_RENAME)
#: os_validate's checks
CHECK_PARAMETERS = "parameters"
VALID_CHECKS = frozenset([CHECK_PARAMETERS])
#: lines of a failed script's output quoted in the error
TAIL_LINES = 20

_OS_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_VARIANT_RE = re.compile(r"^[A-Za-z0-9._-]+$")
_PARAM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class OsApiError(errors.GenericError):
    """An OS is missing or invalid, or one of its scripts failed."""


def split_os_name(name, field="os"):
    """``"busybox+default"`` -> ``("busybox", "default")``; no variant: None."""
    if not isinstance(name, str) or not name:
        raise errors.ParameterError(field, "%s must be an OS name, not %r"
                                    % (field, name))
    base, sep, variant = name.partition("+")
    # A name is a directory name: no path separators, no dot files.
    if not _OS_NAME_RE.match(base):
        raise errors.ParameterError(
            field, "%s: %r is not a valid OS name (letters, digits, '._-')"
            % (field, base))
    if sep and not _VARIANT_RE.match(variant):
        raise errors.ParameterError(
            field, "%s: %r is not a valid OS variant" % (field, variant))
    return base, (variant if sep else None)


def default_search_path(root="/"):
    """Ganeti's OS search path, under ``root``."""
    return [os.path.join(root, p) for p in ("srv/ganeti/os",
                                            "usr/local/lib/ganeti/os",
                                            "usr/lib/ganeti/os",
                                            "usr/share/ganeti/os")]


@attr.s(frozen=True)
class OsDefinition(object):
    name = attr.ib()
    path = attr.ib()
    api_versions = attr.ib(converter=tuple)
    variants = attr.ib(converter=tuple, default=())
    parameters = attr.ib(converter=tuple, default=())   # ((name, doc), ...)
    #: False when the OS has a create_untrusted script
    trusted = attr.ib(default=True)

    @property
    def api_version(self):
        """The highest version both we and the OS speak."""
        return max(SUPPORTED_API_VERSIONS.intersection(self.api_versions))

    @property
    def parameter_names(self):
        return frozenset(p for p, _ in self.parameters)

    def script(self, name):
        return os.path.join(self.path, name)

    def full_names(self):
        """The names an instance can use: ``os+variant`` for each variant."""
        if self.variants and self.api_version >= constants.OS_API_V15:
            return ["%s+%s" % (self.name, v) for v in self.variants]
        return [self.name]

    def to_dict(self):
        return {"name": self.name, "path": self.path,
                "api_versions": list(self.api_versions),
                "variants": list(self.variants),
                "parameters": [list(p) for p in self.parameters],
                "trusted": self.trusted}


def _read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f
                if line.strip() and not line.lstrip().startswith("#")]


def load_os(name, directory):
    """Read and check the OS ``name`` in ``directory``; OsApiError if bad."""
    path = os.path.join(directory, name)
    if not os.path.isdir(path):
        raise OsApiError("OS %s: %s is not a directory" % (name, path))
    try:
        raw_versions = _read_lines(os.path.join(path, API_FILE))
    except OSError as err:
        raise OsApiError("OS %s: cannot read %s: %s"
                         % (name, API_FILE, err.strerror))
    try:
        versions = tuple(int(v) for v in raw_versions)
    except ValueError:
        raise OsApiError("OS %s: %s must hold integers, one per line, got %r"
                         % (name, API_FILE, raw_versions))
    if not SUPPORTED_API_VERSIONS.intersection(versions):
        raise OsApiError(
            "OS %s: API version mismatch: it speaks %s, this node %s"
            % (name, ", ".join(map(str, versions)) or "nothing",
               ", ".join(map(str, sorted(SUPPORTED_API_VERSIONS)))))
    api = max(SUPPORTED_API_VERSIONS.intersection(versions))
    scripts = list(BASE_SCRIPTS)
    if api >= constants.OS_API_V20:
        scripts.append(SCRIPT_VERIFY)
    for script in scripts:
        spath = os.path.join(path, script)
        try:
            st = os.stat(spath)
        except OSError as err:
            raise OsApiError("OS %s: script %s is missing: %s"
                             % (name, script, err.strerror))
        if not stat.S_ISREG(st.st_mode) or not st.st_mode & stat.S_IXUSR:
            raise OsApiError("OS %s: script %s is not an executable file"
                             % (name, script))
    variants = ()
    if api >= constants.OS_API_V15:
        try:
            variants = tuple(_read_lines(os.path.join(path, VARIANTS_FILE)))
        except FileNotFoundError:
            pass
        except OSError as err:
            raise OsApiError("OS %s: cannot read %s: %s"
                             % (name, VARIANTS_FILE, err.strerror))
        bad = [v for v in variants if not _VARIANT_RE.match(v)]
        if bad:
            raise OsApiError("OS %s: invalid variant names in %s: %s"
                             % (name, VARIANTS_FILE, ", ".join(bad)))
    parameters = ()
    if api >= constants.OS_API_V20:
        try:
            lines = _read_lines(os.path.join(path, PARAMETERS_FILE))
        except OSError as err:
            raise OsApiError("OS %s: cannot read %s (required from API 20"
                             " on): %s" % (name, PARAMETERS_FILE,
                                           err.strerror))
        parsed = []
        for line in lines:
            pname, _, doc = line.partition(" ")
            if not _PARAM_RE.match(pname):
                raise OsApiError("OS %s: invalid parameter name %r in %s"
                                 % (name, pname, PARAMETERS_FILE))
            parsed.append((pname, doc.strip()))
        parameters = tuple(parsed)
    trusted = not os.path.lexists(os.path.join(path,
                                               SCRIPT_CREATE_UNTRUSTED))
    return OsDefinition(name=name, path=path, api_versions=versions,
                        variants=variants, parameters=parameters,
                        trusted=trusted)


def find_os(name, search_path):
    """The OS ``name`` (no variant) from the first directory that has it."""
    for directory in search_path:
        if os.path.isdir(os.path.join(directory, name)):
            return load_os(name, directory)
    raise OsApiError("OS %s not found in the OS search path (%s)"
                     % (name, ", ".join(search_path)))


def diagnose(search_path):
    """Every OS in the search path (first one of a name wins), as dicts:
    name, path, valid, status message, variants, parameters, api_versions,
    trusted (false when the OS has a create_untrusted script)."""
    seen = set()
    result = []
    for directory in search_path:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if name in seen or not _OS_NAME_RE.match(name) or \
                    not os.path.isdir(os.path.join(directory, name)):
                continue
            seen.add(name)
            try:
                osdef = load_os(name, directory)
            except OsApiError as err:
                result.append({"name": name,
                               "path": os.path.join(directory, name),
                               "valid": False, "status": str(err),
                               "variants": [], "parameters": [],
                               "api_versions": [], "trusted": True})
                continue
            entry = osdef.to_dict()
            entry.update(valid=True, status="")
            result.append(entry)
    return result


def check_variant(osdef, variant, force=False, field="os"):
    """The variant to use for ``osdef``; ParameterError if it is unknown."""
    if osdef.api_version < constants.OS_API_V15 or not osdef.variants:
        if variant:
            raise errors.ParameterError(
                field, "%s: OS %s has no variants, but variant %r was given"
                % (field, osdef.name, variant))
        return ""
    if not variant:
        # As Ganeti: an OS with variants run without one gets its first.
        return osdef.variants[0]
    if variant not in osdef.variants and not force:
        raise errors.ParameterError(
            field, "%s: OS %s has no variant %r (its variants: %s)"
            % (field, osdef.name, variant, ", ".join(osdef.variants)))
    return variant


# ---------------------------------------------------------------------------
# The environment

def _env_name(text):
    return re.sub(r"[^A-Za-z0-9_]", "_", str(text)).upper()


def core_env(osdef, variant, osparams, debug):
    """Variables every script run gets (os_validate's verify gets only
    these)."""
    api = osdef.api_version
    env = {
        "OS_API_VERSION": "%d" % api,
        "OS_NAME": osdef.name,
        "DEBUG_LEVEL": "%d" % debug,
        "OS_VARIANT": variant if api >= constants.OS_API_V15 else "",
        "PATH": process.DEFAULT_PATH,
    }
    if api >= constants.OS_API_V20:
        for key, value in (osparams or {}).items():
            env["OSP_%s" % _env_name(key)] = _str(value)
    return env


def _str(value):
    if isinstance(value, bool):
        return "True" if value else "False"
    return "" if value is None else str(value)


def build_env(osdef, variant, instance, disk_paths, debug=0):
    """The full environment of create/rename/import/export for an instance.

    ``instance`` is the instance dict (see :meth:`OsBackend.create`),
    ``disk_paths`` the assembled path of each of its disks (None for none).
    """
    api = osdef.api_version
    # public, private and secret OS parameters alike (OSP_*)
    osparams = {}
    for key in ("osparams", "osparams_private", "osparams_secret"):
        osparams.update(instance.get(key) or {})
    env = core_env(osdef, variant, osparams, debug)
    hv = instance.get("hypervisor") or ""
    env.update({
        "INSTANCE_NAME": instance["name"],
        "INSTANCE_OS": instance.get("os") or osdef.name,
        "INSTANCE_UUID": _str(instance.get("uuid")),
        "INSTANCE_PRIMARY_NODE": _str(instance.get("primary_node")),
        "INSTANCE_SECONDARY_NODES": " ".join(
            instance.get("secondary_nodes") or []),
        "HYPERVISOR": hv,
    })
    if api >= constants.OS_API_V15:
        env["INSTANCE_HYPERVISOR"] = hv
    disks = instance.get("disks_info") or []
    env["DISK_COUNT"] = "%d" % len(disks)
    for idx, (disk, path) in enumerate(zip(disks, disk_paths)):
        prefix = "DISK_%d_" % idx
        env[prefix + "ACCESS"] = disk.get("mode") or constants.DISK_RDWR
        env[prefix + "UUID"] = _str(disk.get("uuid"))
        env[prefix + "SIZE"] = _str(disk.get("size"))
        if path:
            env[prefix + "PATH"] = path
        if disk.get("name"):
            env[prefix + "NAME"] = disk["name"]
        dev_type = disk.get("dev_type")
        if dev_type in (constants.DT_FILE, constants.DT_SHARED_FILE):
            env[prefix + "BACKEND_TYPE"] = "file:%s" % disk["logical_id"][0]
        elif dev_type == constants.DT_PLAIN:
            env[prefix + "BACKEND_TYPE"] = "block"
    nics = instance.get("nics") or []
    env["NIC_COUNT"] = "%d" % len(nics)
    for idx, nic in enumerate(nics):
        prefix = "NIC_%d_" % idx
        params = nic.get("nicparams") or {}
        mode = params.get(constants.NIC_MODE, constants.NIC_MODE_BRIDGED)
        link = params.get(constants.NIC_LINK, "")
        env[prefix + "MAC"] = _str(nic.get("mac"))
        env[prefix + "MODE"] = mode
        if nic.get("uuid"):
            env[prefix + "UUID"] = nic["uuid"]
        if nic.get("name"):
            env[prefix + "NAME"] = nic["name"]
        if nic.get("ip"):
            env[prefix + "IP"] = nic["ip"]
        if link:
            env[prefix + "LINK"] = link
            if mode == constants.NIC_MODE_BRIDGED:
                env[prefix + "BRIDGE"] = link
        if params.get(constants.NIC_VLAN):
            env[prefix + "VLAN"] = params[constants.NIC_VLAN]
    for kind, key in (("BE", "beparams"), ("HV", "hvparams")):
        if kind == "HV" and api < constants.OS_API_V15:
            continue   # hypervisor parameters are an API 15 addition
        for pname, value in (instance.get(key) or {}).items():
            env["INSTANCE_%s_%s" % (kind, _env_name(pname))] = _str(value)
    return env


# ---------------------------------------------------------------------------
# Running scripts

def _check_instance_dict(instance, field="instance"):
    if not isinstance(instance, dict):
        raise errors.ParameterError(field, "%s must be a dict, not %s"
                                    % (field, type(instance).__name__))
    for key in ("name", "os"):
        if not isinstance(instance.get(key), str) or not instance.get(key):
            raise errors.ParameterError(
                "%s.%s" % (field, key), "%s.%s is missing or not a string"
                % (field, key))
    for key, kind in (("disks_info", list), ("nics", list),
                      ("hvparams", dict), ("beparams", dict),
                      ("osparams", dict), ("osparams_private", dict),
                      ("osparams_secret", dict)):
        value = instance.get(key)
        if value is not None and not isinstance(value, kind):
            raise errors.ParameterError(
                "%s.%s" % (field, key), "%s.%s must be a %s, not %s"
                % (field, key, kind.__name__, type(value).__name__))
    for idx, nic in enumerate(instance.get("nics") or []):
        if not isinstance(nic, dict):
            raise errors.ParameterError(
                "%s.nics" % field, "%s.nics[%d] must be a dict" % (field, idx))


def _log_name(*parts):
    return "-".join(re.sub(r"[^A-Za-z0-9.+_-]", "_", p) for p in parts)


@attr.s
class OsBackend(object):
    """OS operations of one node.

    ``search_path``: list of directories (or a callable returning one);
    ``storage_ctx``: a :class:`ganeti.storage.StorageContext` to find the
    instance's disks; ``log_dir``: where script logs go.
    """
    reactor = attr.ib()
    search_path = attr.ib()
    storage_ctx = attr.ib()
    log_dir = attr.ib()
    #: seconds a create/import may run (Ganeti allows a day)
    create_timeout = attr.ib(default=24 * 3600)
    #: seconds rename/verify may run
    short_timeout = attr.ib(default=300)
    #: ``run_blocking(f, *args)`` -> Deferred of ``f(*args)`` run where file
    #: work may block (the node daemon's thread pool); by default at once
    run_blocking = attr.ib(default=defer.maybeDeferred)

    def _search_path(self):
        sp = self.search_path
        return list(sp() if callable(sp) else sp)

    async def get_os(self, full_name, force_variant=False, field="os"):
        """(OsDefinition, variant) for ``os+variant``; errors name ``field``.

        The name is checked at once; the definition is read by
        ``run_blocking`` work."""
        base, variant = split_os_name(full_name, field)
        osdef = await self.run_blocking(find_os, base, self._search_path())
        return osdef, check_variant(osdef, variant, force_variant, field)

    def diagnose(self):
        """Every OS of the search path (file work: see :func:`diagnose`)."""
        return diagnose(self._search_path())

    def _log_path(self, action, os_name, instance_name):
        stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(
            self.reactor.seconds()))
        return os.path.join(self.log_dir, "os", _log_name(
            action, os_name, instance_name, stamp) + ".log")

    async def _run(self, osdef, script, env, what, log_path, timeout,
                   args=(), redirect=None):
        log.info("Running OS {os} {script} for {what} (log {log_path})",
                 os=osdef.name, script=script, what=what, log_path=log_path)
        argv = [osdef.script(script)] + list(args)
        if redirect is not None:
            # export: stdout into a file; import: stdin from one (the
            # shell opens the file, the script replaces it)
            direction, path = redirect
            argv = ["/bin/sh", "-c", 'exec "$0" %s "$1"' % direction,
                    osdef.script(script), path]
        result = await process.run_command(
            self.reactor, argv, env=env,
            cwd=osdef.path, timeout=timeout, log_path=log_path,
            run_blocking=self.run_blocking)
        if result.failed:
            if result.timed_out:
                how = "timed out after %ss" % timeout
            elif result.signal is not None:
                how = "was killed by signal %s" % result.signal
            else:
                how = "failed with exit code %s" % result.exit_code
            tail = result.tail(TAIL_LINES)
            raise OsApiError(
                "OS %s %s script for %s %s%s" % (
                    osdef.name, script, what, how,
                    ("; last lines of its output (full log %s):\n%s"
                     % (log_path, tail)) if tail else
                    " without output (log %s)" % log_path))
        return result

    async def _disk_paths(self, instance):
        paths = []
        for idx, disk in enumerate(instance.get("disks_info") or []):
            try:
                dev = await storage.open_block_device(disk, self.storage_ctx)
            except errors.ParameterError as err:
                raise errors.ParameterError(
                    "instance.disks_info", "instance.disks_info[%d]: %s"
                    % (idx, err.args[-1]))
            paths.append(await dev.assemble())
        return paths

    async def _prepare(self, instance, debug):
        _check_instance_dict(instance)
        osdef, variant = await self.get_os(instance["os"],
                                           field="instance.os")
        paths = await self._disk_paths(instance)
        return osdef, build_env(osdef, variant, instance, paths, debug)

    def create(self, instance, reinstall=False, debug=0):
        """Run the OS create script for ``instance``; fires the log path.

        ``instance``: the instance's config dict with filled ``hvparams``,
        ``beparams``, ``osparams`` and NIC ``nicparams``, a ``hypervisor``,
        and ``disks_info``: the config dicts of its disks in index order.
        """
        return defer.Deferred.fromCoroutine(
            self._create(instance, reinstall, debug))

    async def _create(self, instance, reinstall, debug):
        osdef, env = await self._prepare(instance, debug)
        if reinstall:
            env["INSTANCE_REINSTALL"] = "1"
        log_path = self._log_path("add", instance["os"], instance["name"])
        await self._run(osdef, SCRIPT_CREATE, env,
                        "instance %s" % instance["name"], log_path,
                        self.create_timeout)
        return log_path

    def rename(self, instance, old_name, debug=0):
        """Run the OS rename script (``instance`` has the new name)."""
        return defer.Deferred.fromCoroutine(
            self._rename(instance, old_name, debug))

    async def _rename(self, instance, old_name, debug):
        if not isinstance(old_name, str) or not old_name:
            raise errors.ParameterError("old_name", "old_name must be the"
                                        " instance's previous name")
        osdef, env = await self._prepare(instance, debug)
        env["OLD_INSTANCE_NAME"] = old_name
        log_path = self._log_path("rename", instance["os"], "%s-%s" % (
            old_name, instance["name"]))
        await self._run(osdef, SCRIPT_RENAME, env,
                        "instance %s (was %s)" % (instance["name"], old_name),
                        log_path, self.short_timeout)
        return log_path

    def export_disk(self, instance, index, out_path, debug=0):
        """Run the OS export script for disk ``index`` of ``instance``
        (the dict of :meth:`create`), its output into ``out_path``."""
        return defer.Deferred.fromCoroutine(
            self._import_export(SCRIPT_EXPORT, instance, index, out_path,
                                debug))

    def import_disk(self, instance, index, in_path, debug=0):
        """Run the OS import script for disk ``index`` of ``instance``,
        reading the dump in ``in_path``."""
        return defer.Deferred.fromCoroutine(
            self._import_export(SCRIPT_IMPORT, instance, index, in_path,
                                debug))

    async def _import_export(self, script, instance, index, path, debug):
        osdef, env = await self._prepare(instance, debug)
        disks = instance.get("disks_info") or []
        if not 0 <= index < len(disks):
            raise errors.ParameterError(
                "disk_index", "disk_index: instance %s has no disk %d"
                % (instance["name"], index))
        device = env.get("DISK_%d_PATH" % index)
        if not device:
            raise OsApiError("disk %d of instance %s has no data path on"
                             " this node" % (index, instance["name"]))
        prefix = "EXPORT" if script == SCRIPT_EXPORT else "IMPORT"
        env[prefix + "_DEVICE"] = device
        env[prefix + "_DISK_PATH"] = device
        env[prefix + "_INDEX"] = "%d" % index
        log_path = self._log_path(script, instance["os"], "%s-disk%d" % (
            instance["name"], index))
        await self._run(osdef, script, env, "disk %d of instance %s"
                        % (index, instance["name"]), log_path,
                        self.create_timeout,
                        redirect=(">" if script == SCRIPT_EXPORT else "<",
                                  path))
        return log_path

    def validate(self, required, name, checks, osparams, force_variant=False):
        """Check that OS ``name`` exists here and accepts ``osparams``.

        Fires True if valid, False if the OS is missing and not
        ``required``; fails with a ParameterError / OsApiError otherwise.
        """
        return defer.Deferred.fromCoroutine(
            self._validate(required, name, checks, osparams, force_variant))

    async def _validate(self, required, name, checks, osparams,
                        force_variant):
        bad = sorted(set(checks) - VALID_CHECKS)
        if bad:
            raise errors.ParameterError(
                "checks", "unknown OS checks %s (known: %s)"
                % (", ".join(bad), ", ".join(sorted(VALID_CHECKS))))
        base, variant = split_os_name(name, "name")
        try:
            osdef = await self.run_blocking(find_os, base,
                                            self._search_path())
        except OsApiError:
            if not required:
                return False
            raise
        variant = check_variant(osdef, variant, force_variant, "name")
        if CHECK_PARAMETERS not in checks or \
                osdef.api_version < constants.OS_API_V20:
            return True
        unknown = sorted(set(osparams) - osdef.parameter_names)
        if unknown:
            raise errors.ParameterError(
                "osparams", "OS %s does not accept the parameter%s %s (it"
                " knows: %s)" % (osdef.name, "s" if len(unknown) > 1 else "",
                                 ", ".join(unknown),
                                 ", ".join(sorted(osdef.parameter_names))
                                 or "none"))
        # As Ganeti: the checks are the verify script's arguments.
        env = core_env(osdef, variant, osparams, 0)
        log_path = self._log_path("verify", name, "validate")
        await self._run(osdef, SCRIPT_VERIFY, env, "parameter validation",
                        log_path, self.short_timeout, args=sorted(checks))
        return True
