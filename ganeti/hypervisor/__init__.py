"""The node-side hypervisor seam: what the node daemon asks of a hypervisor.

:class:`IHypervisor` is implemented by one driver per hypervisor kind
(``fake``, ``kvm``); :func:`get_hypervisor` builds one for a node root and a
reactor.  Every operation that touches processes or files returns a Deferred.

Instance states reported by a driver (``InstanceInfo.state``):

``running``
    The instance is up and executing.
``paused``
    The instance exists and holds its resources but its CPUs are stopped
    (started paused, or stopped by an I/O error, or migrating).
``shutdown``
    The guest powered itself off cleanly (a *user* shutdown).  The
    domain is kept, still holding its memory, until ``cleanup_instance``; the
    master maps this to ``USER_down`` (or ``ERROR_down`` where user shutdown
    is not allowed) and must not simply restart it.
``crashed``
    The instance is gone or wedged without having been asked to stop: its
    process died (killed, qemu crashed) or the guest panicked.  The runtime
    files are kept until ``cleanup_instance`` so the watcher can see what
    happened; the watcher restarts such instances.

An instance stopped through ``stop_instance`` is not listed at all: nothing
of it remains on the node.  ``running`` and ``paused`` are "live" (the
master's ``oper_state``); ``shutdown`` and ``crashed`` are not.
"""

import os
import re

import attr
from zope.interface import Attribute, Interface

from ganeti import errors

__all__ = [
    "RUNNING", "PAUSED", "SHUTDOWN", "CRASHED", "INSTANCE_STATES",
    "LIVE_STATES", "DEFAULT_STOP_TIMEOUT",
    "DiskSpec", "NicSpec", "InstanceSpec", "InstanceInfo", "NodeInfo",
    "IHypervisor", "get_hypervisor", "check_parameter_syntax",
    "hypervisor_names", "check_instance_name", "read_meminfo", "host_cpu_info",
]

RUNNING = "running"
PAUSED = "paused"
SHUTDOWN = "shutdown"
CRASHED = "crashed"
INSTANCE_STATES = frozenset([RUNNING, PAUSED, SHUTDOWN, CRASHED])
LIVE_STATES = frozenset([RUNNING, PAUSED])

#: Seconds a soft stop waits for the guest before killing it (Ganeti's
#: default shutdown timeout).
DEFAULT_STOP_TIMEOUT = 120

DISK_MODES = frozenset(["rw", "ro"])
DISK_FORMATS = frozenset(["raw", "qcow2"])


def _one_of(allowed):
    def check(inst, attribute, value):
        if value not in allowed:
            raise errors.ParameterError(
                attribute.name, "%s must be one of %s, not %r" %
                (attribute.name, ", ".join(sorted(allowed)), value))
    return check


@attr.s(frozen=True)
class DiskSpec(object):
    """A block device handed to the instance, already activated."""
    path = attr.ib()
    mode = attr.ib(default="rw", validator=_one_of(DISK_MODES))
    format = attr.ib(default="raw", validator=_one_of(DISK_FORMATS))


@attr.s(frozen=True)
class NicSpec(object):
    """A network interface; mode/link are the filled nicparams."""
    mac = attr.ib()
    ip = attr.ib(default=None)
    mode = attr.ib(default="bridged")
    link = attr.ib(default="")
    vlan = attr.ib(default="")


def _tuple_of(cls):
    def convert(items):
        return tuple(i if isinstance(i, cls) else cls(**i) for i in items)
    return convert


@attr.s(frozen=True)
class InstanceSpec(object):
    """Everything a driver needs to start an instance.

    ``hvparams`` and ``beparams`` are already filled (cluster, group and
    instance values merged); the driver does not look up defaults.
    """
    name = attr.ib()
    uuid = attr.ib()
    hvparams = attr.ib(factory=dict)
    beparams = attr.ib(factory=dict)
    disks = attr.ib(default=(), converter=_tuple_of(DiskSpec))
    nics = attr.ib(default=(), converter=_tuple_of(NicSpec))
    #: The instance's network_port (VNC display) or None.
    network_port = attr.ib(default=None)

    @property
    def memory(self):
        """Memory in MiB given to the instance: its maximum memory."""
        return int(self.beparams.get("maxmem", self.beparams.get("memory", 128)))

    @property
    def vcpus(self):
        return int(self.beparams.get("vcpus", 1))

    def to_dict(self):
        return attr.asdict(self, recurse=True, retain_collection_types=False)

    @classmethod
    def from_dict(cls, data):
        return cls(**data)


@attr.s(frozen=True)
class InstanceInfo(object):
    """What a driver knows about one instance on this node."""
    name = attr.ib()
    state = attr.ib(validator=_one_of(INSTANCE_STATES))
    memory = attr.ib()          # MiB
    vcpus = attr.ib()
    pid = attr.ib(default=None)  # None once the process is gone
    uptime = attr.ib(default=None)  # seconds since start, None if unknown
    #: Why the instance is in its state when not obvious, e.g.
    #: "guest-shutdown", "guest-reset", "process-exited", "guest-panicked".
    reason = attr.ib(default=None)

    @property
    def live(self):
        return self.state in LIVE_STATES


@attr.s(frozen=True)
class NodeInfo(object):
    """The node's resources as this hypervisor sees them (MiB, counts)."""
    memory_total = attr.ib()
    memory_free = attr.ib()
    memory_dom0 = attr.ib()   # used by the node itself, not by instances
    memory_hv = attr.ib()     # held by instances of this hypervisor
    cpu_total = attr.ib()
    cpu_nodes = attr.ib()
    cpu_sockets = attr.ib()
    hv_version = attr.ib()    # tuple of ints, e.g. (7, 2, 22)


class IHypervisor(Interface):
    """A hypervisor driver bound to one node root.

    Runtime state lives under ``<root>/var/run/ganeti/<name>-hypervisor/`` so
    that a new driver object (after a node daemon restart) sees the instances
    an earlier one started.
    """

    name = Attribute("The hypervisor kind, e.g. 'kvm'.")

    def check_parameter_syntax(hvparams):
        """Check filled hvparams without touching the node.

        Synchronous; raises :class:`errors.ParameterError` whose first
        argument names the parameter and whose second says what is wrong.
        """

    def validate_parameters(hvparams):
        """Syntax check plus node-local checks (files, binaries).

        Deferred firing None or failing with ParameterError.
        """

    def start_instance(spec, startup_paused=False):
        """Start an :class:`InstanceSpec`; Deferred firing None once it runs.

        A kept ``shutdown``/``crashed`` domain of the same name is cleaned up
        first; a live one is an error.
        """

    def stop_instance(name, force=False, timeout=DEFAULT_STOP_TIMEOUT):
        """Stop an instance and remove everything it left on the node.

        Soft (default): ask the guest to power off, wait up to ``timeout``
        seconds, then kill it.  ``force``: kill it at once.  Stopping an
        instance that does not exist succeeds (it is already stopped).
        """

    def reboot_instance(name):
        """Reset a live instance in place (the guest sees a reboot)."""

    def resume_instance(name):
        """Let a paused instance (e.g. started paused) run."""

    def cleanup_instance(name):
        """Remove a kept (shutdown or crashed) domain and its runtime files.

        Also works on a live instance (it is destroyed).  Unknown names are
        ignored.
        """

    def list_instances():
        """Deferred list of names of instances on this node, in any state."""

    def get_instance_info(name):
        """Deferred :class:`InstanceInfo`, or None if the name is unknown."""

    def get_all_instances_info():
        """Deferred list of :class:`InstanceInfo`, one per listed instance."""

    def get_node_info():
        """Deferred :class:`NodeInfo`."""

    def verify(hvparams=None):
        """Deferred list of problems found on this node (empty if fine);
        ``hvparams`` (filled, cluster level) say e.g. which binary to use."""

    def close():
        """Drop connections to instances (not the instances); Deferred."""

    # -- migration (see ganeti.hypervisor.migration for the sequence) --------

    def migration_info(name):
        """On the source: Deferred JSON-able dict the target needs
        (``spec``: the specification the instance runs with, ``started``);
        HypervisorError if the instance is not live here."""

    def accept_instance(spec, info, address, port=None):
        """On the target: prepare ``spec`` to receive the instance's state on
        ``address``:``port`` (``port`` None: the driver picks one); fires
        ``{"address", "port"}``."""

    def migrate_instance(name, address, port, live=True):
        """On the source: start sending the instance to the target
        (non-live: pause it first); fires once the transfer has started."""

    def get_migration_status(name):
        """On the source: Deferred :class:`migration.MigrationStatus`."""

    def abort_migration(name):
        """On the source: cancel a transfer in progress."""

    def finalize_migration_dst(name, info, success):
        """On the target: success lets the received instance run; failure
        removes it."""

    def finalize_migration_src(name, success, live=True):
        """On the source: success removes the instance left behind; failure
        lets it run again."""


# ---------------------------------------------------------------------------
# Registry

_DRIVERS = {
    "fake": ("ganeti.hypervisor.fake", "FakeHypervisor"),
    "kvm": ("ganeti.hypervisor.kvm", "KvmHypervisor"),
}


def hypervisor_names():
    return sorted(_DRIVERS)


def _driver_class(name):
    try:
        module_name, class_name = _DRIVERS[name]
    except KeyError:
        raise errors.HypervisorError(
            "unknown hypervisor %r (known: %s)" %
            (name, ", ".join(hypervisor_names())))
    module = __import__(module_name, fromlist=[class_name])
    return getattr(module, class_name)


def get_hypervisor(name, root="/", reactor=None):
    """Build the driver ``name`` for the node rooted at ``root``.

    ``reactor`` must provide IReactorTime and IReactorProcess (and
    IReactorUNIX for kvm); the global reactor by default.
    """
    if reactor is None:
        from twisted.internet import reactor
    return _driver_class(name)(root=root, reactor=reactor)


def check_parameter_syntax(name, hvparams):
    """Syntax check of filled hvparams for hypervisor ``name`` (no node)."""
    _driver_class(name).check_parameter_syntax(hvparams)


# ---------------------------------------------------------------------------
# Helpers shared by the drivers

# Instance names become file names in the runtime directory.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")


def check_instance_name(name):
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise errors.HypervisorError(
            "invalid instance name %r: letters, digits, '.', '_' and '-' "
            "only, starting with a letter or digit" % (name,))


def read_meminfo(path="/proc/meminfo"):
    """``(total, available)`` memory of the host in MiB."""
    values = {}
    with open(path) as f:
        for line in f:
            key, _, rest = line.partition(":")
            fields = rest.split()
            if fields:
                values[key] = int(fields[0])
    total = values["MemTotal"]
    # MemAvailable is the kernel's own estimate (since 3.14); older kernels
    # get the classic free + reclaimable caches.
    avail = values.get("MemAvailable",
                       values.get("MemFree", 0) + values.get("Buffers", 0) +
                       values.get("Cached", 0))
    return total // 1024, avail // 1024


def host_cpu_info(sys_root="/sys", cpuinfo="/proc/cpuinfo"):
    """``(cpu_total, numa_nodes, sockets)`` of the host."""
    cpus = os.cpu_count() or 1
    try:
        nodes = len([n for n in os.listdir(
            os.path.join(sys_root, "devices", "system", "node"))
            if re.match(r"^node\d+$", n)]) or 1
    except OSError:
        nodes = 1
    sockets = set()
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("physical id"):
                    sockets.add(line.split(":", 1)[1].strip())
    except OSError:
        pass
    return cpus, nodes, len(sockets) or 1
