"""Basic value types of the htools model: instance policies, dynamic
utilisation, disk templates and instance statuses."""

import attrs


class HtoolsError(Exception):
    """Bad cluster data or options; printed as ``Error: ...`` by the tools."""


#: instance run states, as Ganeti reports them
INSTANCE_STATUSES = (
    "ADMIN_down", "ADMIN_offline", "ERROR_down", "ERROR_nodedown",
    "ERROR_nodeoffline", "ERROR_up", "ERROR_wrongnode", "running",
    "USER_down",
)
RUNNING_STATUSES = frozenset(["running", "ERROR_up"])
OFFLINE_STATUS = "ADMIN_offline"

#: disk templates in Ganeti's enumeration order (the order used when
#: printing policies)
DISK_TEMPLATES = ("diskless", "file", "sharedfile", "plain", "blockdev",
                  "drbd", "rbd", "ext", "gluster")
DT_DRBD = "drbd"
#: templates whose disks live on the node's local storage (accounted)
LOCAL_STORAGE_TEMPLATES = frozenset(["drbd", "plain"])
#: templates an instance can be moved with at all
MOVABLE_TEMPLATES = frozenset(["drbd", "blockdev", "sharedfile", "rbd",
                               "ext", "gluster"])
#: templates mirrored by shared storage (any node can take over)
EXTERNAL_MIRROR_TEMPLATES = frozenset(["sharedfile", "blockdev", "rbd",
                                       "ext", "gluster"])

MIRROR_NONE = "none"
MIRROR_INTERNAL = "internal"
MIRROR_EXTERNAL = "external"


def mirror_type(disk_template):
    if disk_template == DT_DRBD:
        return MIRROR_INTERNAL
    if disk_template in EXTERNAL_MIRROR_TEMPLATES:
        return MIRROR_EXTERNAL
    return MIRROR_NONE


ALLOC_POLICIES = ("preferred", "last_resort", "unallocable")

#: cluster tag prefixes with a meaning for htools
EXTAGS_PREFIX = "htools:iextags:"
LOCATION_PREFIX = "htools:nlocation:"
DESIRED_LOCATION_PREFIX = "htools:desiredlocation:"
MIGRATION_PREFIX = "htools:migration:"
ALLOW_MIGRATION_PREFIX = "htools:allowmigration:"


@attrs.frozen
class ISpec:
    """One instance spec: the six resources an instance policy bounds."""
    memory_size: int
    cpu_count: int
    disk_size: int
    disk_count: int
    nic_count: int
    spindle_use: int

    def serialize(self):
        return "%d,%d,%d,%d,%d,%d" % (
            self.memory_size, self.cpu_count, self.disk_size,
            self.disk_count, self.nic_count, self.spindle_use)

    def to_dict(self):
        return {"memory-size": self.memory_size,
                "cpu-count": self.cpu_count,
                "disk-size": self.disk_size,
                "disk-count": self.disk_count,
                "nic-count": self.nic_count,
                "spindle-use": self.spindle_use}


@attrs.frozen
class IPolicy:
    """An instance policy (cluster-wide or of one node group)."""
    minmax: tuple        # of (min ISpec, max ISpec)
    std: ISpec
    disk_templates: tuple
    vcpu_ratio: float
    spindle_ratio: float


DEFAULT_MIN_SPEC = ISpec(128, 1, 1024, 1, 1, 1)
DEFAULT_MAX_SPEC = ISpec(32768, 8, 1024 * 1024, 16, 8, 12)
DEFAULT_IPOLICY = IPolicy(
    minmax=((DEFAULT_MIN_SPEC, DEFAULT_MAX_SPEC),),
    std=ISpec(128, 1, 1024, 1, 1, 1),
    disk_templates=DISK_TEMPLATES,
    vcpu_ratio=4.0,
    spindle_ratio=32.0,
)

#: default free disk ratio a node keeps (``--min-disk``)
DEFAULT_RESERVED_DISK_RATIO = 0.0


@attrs.frozen
class DynUtil:
    """Dynamic utilisation (cpu, memory, disk, network weights)."""
    cpu: float = 1.0
    mem: float = 1.0
    dsk: float = 1.0
    net: float = 1.0


BASE_UTIL = DynUtil(1.0, 1.0, 1.0, 1.0)
ZERO_UTIL = DynUtil(0.0, 0.0, 0.0, 0.0)


def read_input(path):
    """The text of an input file; HtoolsError naming the file and the
    reason when it cannot be read."""
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise HtoolsError("cannot read %s: %s" % (path, e.strerror))
