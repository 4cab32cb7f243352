"""Instance operations on this node, on top of the hypervisor drivers.

The master sends an *instance specification*: the fields of
:class:`ganeti.hypervisor.InstanceSpec` plus ``hypervisor`` (the driver's
name).  Each disk in it is either already a path (``{"path", "mode",
"format"}``) or the disk's config dict (``dev_type``, ``logical_id``...),
which this node resolves to its assembled path itself, so the master does
not need to know node-local paths.
"""

import attr
from twisted.internet import defer

from ganeti import errors
from ganeti import hypervisor as hv
from ganeti import storage

__all__ = ["InstanceBackend", "REBOOT_TYPES", "info_to_dict"]

REBOOT_SOFT = "soft"
REBOOT_HARD = "hard"
REBOOT_FULL = "full"
REBOOT_TYPES = (REBOOT_SOFT, REBOOT_HARD, REBOOT_FULL)

_SPEC_FIELDS = frozenset(a.name for a in attr.fields(hv.InstanceSpec))


def info_to_dict(info):
    """An InstanceInfo as sent to the master (``live`` included)."""
    if info is None:
        return None
    result = attr.asdict(info)
    result["live"] = info.live
    return result


class InstanceBackend(object):

    def __init__(self, reactor, root, storage_ctx,
                 get_hypervisor=hv.get_hypervisor):
        self._reactor = reactor
        self._root = root
        self._storage_ctx = storage_ctx
        self._get_hypervisor = get_hypervisor
        self._drivers = {}

    def hypervisor(self, name, field="hv"):
        """The driver ``name`` (one per daemon, so runtime state is shared)."""
        if not isinstance(name, str) or name not in hv.hypervisor_names():
            raise errors.ParameterError(
                field, "%s: unknown hypervisor %r (known: %s)"
                % (field, name, ", ".join(hv.hypervisor_names())))
        driver = self._drivers.get(name)
        if driver is None:
            try:
                driver = self._get_hypervisor(name, self._root, self._reactor)
            except ImportError as err:
                raise errors.HypervisorError(
                    "the %s hypervisor driver is not available on this node:"
                    " %s" % (name, err))
            self._drivers[name] = driver
        return driver

    def hypervisors(self, names, field="hvs"):
        if not isinstance(names, (list, tuple)) or not names:
            raise errors.ParameterError(
                field, "%s must be a non-empty list of hypervisor names"
                % field)
        return [self.hypervisor(n, field) for n in names]

    # -- the instance specification ------------------------------------------

    async def _disk_spec(self, idx, disk):
        field = "instance.disks[%d]" % idx
        if not isinstance(disk, dict):
            raise errors.ParameterError(
                "instance.disks", "%s must be a dict, not %s"
                % (field, type(disk).__name__))
        if "dev_type" not in disk:
            if not isinstance(disk.get("path"), str) or \
                    not disk["path"].startswith("/"):
                raise errors.ParameterError(
                    "instance.disks", "%s: path must be an absolute path"
                    % field)
            extra = sorted(set(disk) - {"path", "mode", "format"})
            if extra:
                raise errors.ParameterError(
                    "instance.disks", "%s: unknown fields %s"
                    % (field, ", ".join(extra)))
            return hv.DiskSpec(**disk)
        try:
            # a file disk's path is checked by the storage context's
            # run_blocking work (ssconf read, symlinks resolved)
            dev = await storage.open_block_device(disk, self._storage_ctx)
        except errors.ParameterError as err:
            raise errors.ParameterError("instance.disks", "%s: %s"
                                        % (field, err.args[-1]))
        path = await dev.assemble()
        if path is None:
            return None   # diskless: nothing to attach
        return hv.DiskSpec(path=path, mode=disk.get("mode") or "rw",
                           format=dev.format)

    async def parse_spec(self, data, field="instance"):
        """(driver, InstanceSpec) from the wire form; ParameterError if bad."""
        if not isinstance(data, dict):
            raise errors.ParameterError(field, "%s must be a dict (the"
                                        " instance specification), not %s"
                                        % (field, type(data).__name__))
        data = dict(data)
        driver = self.hypervisor(data.pop("hypervisor", None),
                                 "%s.hypervisor" % field)
        unknown = sorted(set(data) - _SPEC_FIELDS)
        if unknown:
            raise errors.ParameterError(field, "%s: unknown fields %s"
                                        % (field, ", ".join(unknown)))
        for key in ("name", "uuid"):
            if not isinstance(data.get(key), str) or not data.get(key):
                raise errors.ParameterError(
                    "%s.%s" % (field, key), "%s.%s is missing or not a"
                    " string" % (field, key))
        for key, kind in (("hvparams", dict), ("beparams", dict),
                          ("disks", list), ("nics", list)):
            if key in data and not isinstance(data[key], kind):
                raise errors.ParameterError(
                    "%s.%s" % (field, key), "%s.%s must be a %s"
                    % (field, key, kind.__name__))
        disks = []
        for idx, disk in enumerate(data.get("disks", [])):
            spec = await self._disk_spec(idx, disk)
            if spec is not None:
                disks.append(spec)
        data["disks"] = disks
        for idx, nic in enumerate(data.get("nics", [])):
            if not isinstance(nic, dict) or "mac" not in nic:
                raise errors.ParameterError(
                    "%s.nics" % field, "%s.nics[%d] must be a dict with a mac"
                    % (field, idx))
        try:
            spec = hv.InstanceSpec(**data)
        except TypeError as err:
            raise errors.ParameterError(field, "%s: %s" % (field, err))
        return driver, spec

    # -- operations ----------------------------------------------------------

    def start(self, spec, startup_paused=False):
        return defer.Deferred.fromCoroutine(self._start(spec, startup_paused))

    async def _start(self, data, startup_paused):
        driver, spec = await self.parse_spec(data)
        await driver.start_instance(spec, startup_paused)

    def shutdown(self, name, hv_name, timeout=hv.DEFAULT_STOP_TIMEOUT):
        """Stop softly, killing after ``timeout`` s; 0 kills at once."""
        driver = self.hypervisor(hv_name)
        return driver.stop_instance(name, force=(timeout == 0),
                                    timeout=timeout)

    def reboot(self, instance, hv_name, reboot_type, shutdown_timeout):
        return defer.Deferred.fromCoroutine(
            self._reboot(instance, hv_name, reboot_type, shutdown_timeout))

    async def _reboot(self, instance, hv_name, reboot_type, shutdown_timeout):
        if reboot_type not in REBOOT_TYPES:
            raise errors.ParameterError(
                "reboot_type", "reboot_type must be one of %s, not %r"
                % (", ".join(REBOOT_TYPES), reboot_type))
        if reboot_type == REBOOT_FULL:
            raise errors.ParameterError(
                "reboot_type", "reboot_type 'full' is done by the master"
                " (shutdown, disks deactivated and reactivated, start); a node"
                " does soft and hard reboots")
        if isinstance(instance, dict):
            spec_data = dict(instance)
            spec_data.setdefault("hypervisor", hv_name)
            driver, spec = await self.parse_spec(spec_data)
            name = spec.name
        elif isinstance(instance, str) and instance:
            if reboot_type == REBOOT_HARD:
                raise errors.ParameterError(
                    "instance", "a hard reboot starts the instance again, so"
                    " it needs the instance specification (a dict), not only"
                    " its name")
            driver, spec, name = self.hypervisor(hv_name), None, instance
        else:
            raise errors.ParameterError(
                "instance", "instance must be a name or an instance"
                " specification, not %r" % (instance,))
        if reboot_type == REBOOT_SOFT:
            await driver.reboot_instance(name)
            return
        info = await driver.get_instance_info(name)
        if info is None or not info.live:
            raise errors.HypervisorError(
                "cannot reboot instance %s: it is not running on this node"
                % name)
        await driver.stop_instance(name, force=(shutdown_timeout == 0),
                                   timeout=shutdown_timeout)
        await driver.start_instance(spec, False)

    def cleanup(self, name, hv_name):
        return self.hypervisor(hv_name).cleanup_instance(name)

    def info(self, name, hv_name):
        d = self.hypervisor(hv_name).get_instance_info(name)
        return d.addCallback(info_to_dict)

    def all_info(self, hv_names):
        return defer.Deferred.fromCoroutine(self._all_info(hv_names))

    async def _all_info(self, hv_names):
        result = {}
        for name, driver in zip(hv_names, self.hypervisors(hv_names)):
            for info in await driver.get_all_instances_info():
                entry = info_to_dict(info)
                entry["hypervisor"] = name
                result[info.name] = entry
        return result

    def list(self, hv_names):
        return defer.Deferred.fromCoroutine(self._list(hv_names))

    async def _list(self, hv_names):
        names = set()
        for driver in self.hypervisors(hv_names):
            names.update(await driver.list_instances())
        return sorted(names)

    def node_info(self, hv_specs):
        return defer.Deferred.fromCoroutine(self._node_info(hv_specs))

    async def _node_info(self, hv_specs):
        result = []
        for idx, item in enumerate(hv_specs):
            name = item[0] if isinstance(item, (list, tuple)) and item \
                else item
            info = await self.hypervisor(
                name, "hv_specs[%d]" % idx).get_node_info()
            entry = attr.asdict(info)
            entry["hv_version"] = list(info.hv_version)
            entry["name"] = name
            result.append(entry)
        return result

    def validate_params(self, hv_name, hvparams):
        return self.hypervisor(hv_name).validate_parameters(hvparams)

    def verify(self, hv_name):
        return self.hypervisor(hv_name).verify()

    def close(self):
        return defer.DeferredList([d.close() for d in self._drivers.values()],
                                  consumeErrors=True)
