"""Names, numbers and defaults shared by every part of the system.

Values that appear on the wire or in config.data match Ganeti 3.0's so that
its clients and tools interoperate with us.
"""

import re

RELEASE_VERSION = "3.0.2"  # what ssconf_release_version and /version report

# Version numbers are major * 1000000 + minor * 10000 + revision.
def build_version(major, minor, revision):
    return major * 1000000 + minor * 10000 + revision


def split_version(version):
    major, rest = divmod(version, 1000000)
    minor, revision = divmod(rest, 10000)
    return major, minor, revision


CONFIG_VERSION = build_version(3, 0, 0)
# Oldest config.data this code can upgrade (Ganeti 2.0's layout).
CONFIG_VERSION_MIN_UPGRADE = build_version(2, 0, 0)
PROTOCOL_VERSION = 3000000
LUXI_VERSION = 3000000
OS_API_V10 = 10
OS_API_V15 = 15
OS_API_V20 = 20
OS_API_VERSIONS = frozenset([OS_API_V10, OS_API_V15, OS_API_V20])
EXPORT_VERSION = 0
CONFD_PROTOCOL_VERSION = 1

# Ports
DEFAULT_NODED_PORT = 1811
DEFAULT_CONFD_PORT = 1814
DEFAULT_MOND_PORT = 1815
DEFAULT_MAINTD_PORT = 1816
#: the maintenance daemon's defaults (round delay and balancing threshold
#: as Ganeti 3.1's; the hold-down and the moves per hour are this
#: project's)
MAINTD_DEFAULT_ROUND_DELAY = 300
MAINTD_DEFAULT_BALANCE_THRESHOLD = 0.1
MAINTD_DEFAULT_BALANCE_HOLD_DOWN = 3600
MAINTD_DEFAULT_BALANCE_MAX_MOVES = 20
DEFAULT_RAPI_PORT = 5080

# The monitoring daemon (ganeti-mond): its API version, how often it
# collects and re-reads its collectors' configuration (seconds), as
# Ganeti's; and its data collectors.  Ganeti 3.0's names first, then the
# self-diagnose collector (as Ganeti 3.1 names it) and the instance status
# collectors of this project's hypervisors.
MOND_LATEST_API_VERSION = 1
MOND_TIME_INTERVAL = 5
MOND_CONFIG_REFRESH = 15
DATA_COLLECTOR_DIAGNOSE = "diagnose"
DATA_COLLECTOR_NAMES = ("cpu-avg-load", "diskstats", "drbd",
                        "inst-status-xen", "lv", "xen-cpu-avg-load",
                        DATA_COLLECTOR_DIAGNOSE, "inst-status-kvm",
                        "inst-status-fake")
#: microseconds, as the cluster's data_collectors setting counts them
DATA_COLLECTOR_INTERVAL = MOND_TIME_INTERVAL * 1000000
#: seconds the self-diagnose command may run before it is killed
DIAGNOSE_TIMEOUT = 10
FIRST_DRBD_PORT = 11000
LAST_DRBD_PORT = 14999
VNC_BASE_PORT = 5900

VALUE_DEFAULT = "default"
VALUE_AUTO = "auto"
PP_DEFAULT = "default"  # the single key of beparams / nicparams at cluster level

# Hypervisors
HT_XEN_PVM = "xen-pvm"
HT_XEN_HVM = "xen-hvm"
HT_FAKE = "fake"
HT_KVM = "kvm"
HT_CHROOT = "chroot"
HT_LXC = "lxc"
HYPER_TYPES = frozenset([HT_XEN_PVM, HT_XEN_HVM, HT_FAKE, HT_KVM, HT_CHROOT,
                         HT_LXC])

# Disk templates (also the dev_type of disks in 3.0's config)
DT_DISKLESS = "diskless"
DT_FILE = "file"
DT_SHARED_FILE = "sharedfile"
DT_PLAIN = "plain"
DT_DRBD8 = "drbd"
DT_BLOCK = "blockdev"
DT_RBD = "rbd"
DT_EXT = "ext"
DT_GLUSTER = "gluster"
DISK_TEMPLATES = frozenset([DT_DISKLESS, DT_FILE, DT_SHARED_FILE, DT_PLAIN,
                            DT_DRBD8, DT_BLOCK, DT_RBD, DT_EXT, DT_GLUSTER])
DTS_INT_MIRROR = frozenset([DT_DRBD8])
DTS_EXT_MIRROR = frozenset([DT_DISKLESS, DT_SHARED_FILE, DT_BLOCK, DT_RBD,
                            DT_EXT, DT_GLUSTER])
DTS_MIRRORED = DTS_INT_MIRROR | DTS_EXT_MIRROR
# Templates whose disks live on node-local storage and count against a node.
DTS_NODE_LOCAL = frozenset([DT_PLAIN, DT_DRBD8, DT_FILE])
DEFAULT_ENABLED_DISK_TEMPLATES = [DT_DRBD8, DT_PLAIN]
DISK_RDONLY = "ro"
DISK_RDWR = "rw"
DISK_ACCESS_SET = frozenset([DISK_RDONLY, DISK_RDWR])
DRBD_META_SIZE = 128  # MiB of metadata per DRBD disk

# Storage unit types
ST_LVM_PV = "lvm-pv"
ST_LVM_VG = "lvm-vg"
ST_FILE = "file"
ST_SHARED_FILE = "sharedfile"
ST_DISKLESS = "diskless"
STORAGE_TYPES = frozenset([ST_LVM_PV, ST_LVM_VG, ST_FILE, ST_SHARED_FILE,
                           ST_DISKLESS])

# Instance admin state and who set it
ADMINST_UP = "up"
ADMINST_DOWN = "down"
ADMINST_OFFLINE = "offline"
ADMINST_ALL = frozenset([ADMINST_UP, ADMINST_DOWN, ADMINST_OFFLINE])
ADMIN_SOURCE = "admin"
USER_SOURCE = "user"
ADMIN_STATE_SOURCES = frozenset([ADMIN_SOURCE, USER_SOURCE])

# Instance status as shown by queries
INSTST_RUNNING = "running"
INSTST_ADMINDOWN = "ADMIN_down"
INSTST_ADMINOFFLINE = "ADMIN_offline"
INSTST_ERRORUP = "ERROR_up"
INSTST_ERRORDOWN = "ERROR_down"
INSTST_NODEDOWN = "ERROR_nodedown"
INSTST_NODEOFFLINE = "ERROR_nodeoffline"
INSTST_WRONGNODE = "ERROR_wrongnode"
INSTST_USERDOWN = "USER_down"
INSTST_ALL = frozenset([INSTST_RUNNING, INSTST_ADMINDOWN, INSTST_ADMINOFFLINE,
                        INSTST_ERRORUP, INSTST_ERRORDOWN, INSTST_NODEDOWN,
                        INSTST_NODEOFFLINE, INSTST_WRONGNODE, INSTST_USERDOWN])

# NICs
NIC_MODE = "mode"
NIC_LINK = "link"
NIC_VLAN = "vlan"
NIC_MODE_BRIDGED = "bridged"
NIC_MODE_ROUTED = "routed"
NIC_MODE_OVS = "openvswitch"
NIC_VALID_MODES = frozenset([NIC_MODE_BRIDGED, NIC_MODE_ROUTED, NIC_MODE_OVS])
NIC_IP_POOL = "pool"  # value of a NIC's ip meaning "take one from the network"
MAX_NICS = 8
MAX_DISKS = 16

# Backend parameters
BE_MAXMEM = "maxmem"
BE_MINMEM = "minmem"
BE_MEMORY = "memory"  # legacy: sets both maxmem and minmem
BE_VCPUS = "vcpus"
BE_AUTO_BALANCE = "auto_balance"
BE_ALWAYS_FAILOVER = "always_failover"
BE_SPINDLE_USE = "spindle_use"

BEC_DEFAULTS = {
    BE_MINMEM: 128,
    BE_MAXMEM: 128,
    BE_VCPUS: 1,
    BE_AUTO_BALANCE: True,
    BE_ALWAYS_FAILOVER: False,
    BE_SPINDLE_USE: 1,
}
BES_PARAMETER_TYPES = {
    BE_MINMEM: "size", BE_MAXMEM: "size", BE_VCPUS: "int",
    BE_AUTO_BALANCE: "bool", BE_ALWAYS_FAILOVER: "bool", BE_SPINDLE_USE: "int",
}

# Node parameters
ND_OOB_PROGRAM = "oob_program"
ND_SPINDLE_COUNT = "spindle_count"
ND_EXCLUSIVE_STORAGE = "exclusive_storage"
ND_OVS = "ovs"
ND_OVS_NAME = "ovs_name"
ND_OVS_LINK = "ovs_link"
ND_SSH_PORT = "ssh_port"
ND_CPU_SPEED = "cpu_speed"
# This project's own, set for the cluster or a node group (Ganeti 3.0 keeps
# unknown node parameters when it reads the configuration).
ND_REPAIR_MAX_PARALLEL = "repair_max_parallel"
ND_REPAIR_MIN_HEALTHY = "repair_min_healthy"
NDC_DEFAULTS = {
    ND_OOB_PROGRAM: "",
    ND_SPINDLE_COUNT: 1,
    ND_EXCLUSIVE_STORAGE: False,
    ND_OVS: False,
    ND_OVS_NAME: "switch1",
    ND_OVS_LINK: "",
    ND_SSH_PORT: 22,
    ND_CPU_SPEED: 1.0,
    ND_REPAIR_MAX_PARALLEL: 4,
    ND_REPAIR_MIN_HEALTHY: 0.5,
}
NDS_PARAMETER_TYPES = {
    ND_OOB_PROGRAM: "string", ND_SPINDLE_COUNT: "int",
    ND_EXCLUSIVE_STORAGE: "bool", ND_OVS: "bool", ND_OVS_NAME: "string",
    ND_OVS_LINK: "string", ND_SSH_PORT: "int", ND_CPU_SPEED: "float",
    ND_REPAIR_MAX_PARALLEL: "int", ND_REPAIR_MIN_HEALTHY: "float",
}

DEFAULT_BRIDGE = "xen-br0"
NICC_DEFAULTS = {
    NIC_MODE: NIC_MODE_BRIDGED,
    NIC_LINK: DEFAULT_BRIDGE,
    NIC_VLAN: "",
}
NICS_PARAMETER_TYPES = {NIC_MODE: "string", NIC_LINK: "string",
                        NIC_VLAN: "string"}

# Hypervisor parameters.  Only the hypervisors this project drives get their
# full parameter set; the others keep the keys admins set.
HV_MIGRATION_PORT = "migration_port"
HV_MIGRATION_BANDWIDTH = "migration_bandwidth"
HV_MIGRATION_MODE = "migration_mode"
HV_MIGRATION_DOWNTIME = "migration_downtime"
HT_MIGRATION_LIVE = "live"
HT_MIGRATION_NONLIVE = "non-live"
HT_MIGRATION_MODES = frozenset([HT_MIGRATION_LIVE, HT_MIGRATION_NONLIVE])
HV_KVM_FLAG = "kvm_flag"
HV_KVM_USER_SHUTDOWN = "user_shutdown"
HV_REBOOT_BEHAVIOR = "reboot_behavior"

# "Global" hypervisor parameters exist only at cluster level: an instance can
# neither set nor see them.
HVC_GLOBALS = frozenset([HV_MIGRATION_PORT, HV_MIGRATION_BANDWIDTH,
                         HV_MIGRATION_MODE, "xen_cmd"])

HVC_DEFAULTS = {
    HT_FAKE: {
        HV_MIGRATION_MODE: HT_MIGRATION_LIVE,
    },
    HT_KVM: {
        "acpi": True,
        "boot_order": "disk",
        "cdrom_image_path": "",
        "cpu_mask": "all",
        "disk_cache": "default",
        "disk_type": "paravirtual",
        "initrd_path": "",
        "kernel_args": "ro",
        "kernel_path": "/boot/vmlinuz-3-kvmU",
        "kvm_extra": "",
        HV_KVM_FLAG: "",
        "kvm_path": "/usr/bin/kvm",
        "machine_version": "",
        "mem_path": "",
        HV_MIGRATION_BANDWIDTH: 32,
        HV_MIGRATION_DOWNTIME: 30,
        HV_MIGRATION_MODE: HT_MIGRATION_LIVE,
        HV_MIGRATION_PORT: 8102,
        "nic_type": "paravirtual",
        HV_REBOOT_BEHAVIOR: "reboot",
        "root_path": "/dev/vda1",
        "serial_console": True,
        "serial_speed": 38400,
        "use_chroot": False,
        # Ganeti's default is False (its KVM needed a helper daemon to tell
        # a poweroff from a crash; our qemu always can): a guest's own
        # poweroff follows the user's will once the cluster enables user
        # shutdown (docs/watcher.rst)
        HV_KVM_USER_SHUTDOWN: True,
        "vhost_net": False,
        "vnc_bind_address": "",
        "vnc_password_file": "",
    },
    HT_XEN_PVM: {
        "kernel_path": "/boot/vmlinuz-3-xenU",
        "kernel_args": "ro",
        "root_path": "/dev/xvda1",
        HV_MIGRATION_MODE: HT_MIGRATION_LIVE,
        HV_MIGRATION_PORT: 8002,
        HV_REBOOT_BEHAVIOR: "reboot",
        "xen_cmd": "xm",
    },
    HT_XEN_HVM: {
        "boot_order": "cd",
        HV_MIGRATION_MODE: "non-live",
        HV_MIGRATION_PORT: 8002,
        HV_REBOOT_BEHAVIOR: "reboot",
        "xen_cmd": "xm",
    },
    HT_CHROOT: {"init_script": "/ganeti-chroot"},
    HT_LXC: {"startup_timeout": 30},
}
HV_KVM_FLAG_VALUES = frozenset(["", "enabled", "disabled"])
HV_REBOOT_BEHAVIORS = frozenset(["reboot", "exit"])

DISK_DT_DEFAULTS = {
    DT_DISKLESS: {},
    DT_FILE: {},
    DT_SHARED_FILE: {},
    DT_PLAIN: {"stripes": 1},
    DT_BLOCK: {},
    DT_DRBD8: {
        "resync-rate": 61440, "data-stripes": 1, "meta-stripes": 1,
        "disk-barriers": "n", "meta-barriers": False, "metavg": "xenvg",
        "disk-custom": "", "net-custom": "", "protocol": "C",
        "dynamic-resync": False, "c-plan-ahead": 20, "c-fill-target": 0,
        "c-delay-target": 1, "c-max-rate": 61440, "c-min-rate": 4096,
    },
    DT_RBD: {"pool": "rbd", "access": "kernelspace"},
    DT_EXT: {"access": "kernelspace"},
    DT_GLUSTER: {"host": "127.0.0.1", "port": 24007, "volume": "gv0",
                 "access": "kernelspace"},
}

# Disk parameter names (as in Ganeti's DISK_DT_PARAMETERS)
LDP_STRIPES = "stripes"
DRBD_RESYNC_RATE = "resync-rate"
DRBD_DATA_STRIPES = "data-stripes"
DRBD_META_STRIPES = "meta-stripes"
DRBD_DISK_BARRIERS = "disk-barriers"
DRBD_META_BARRIERS = "meta-barriers"
DRBD_DEFAULT_METAVG = "metavg"
DRBD_DISK_CUSTOM = "disk-custom"
DRBD_NET_CUSTOM = "net-custom"
DRBD_PROTOCOL = "protocol"
DRBD_DYNAMIC_RESYNC = "dynamic-resync"
DRBD_PLAN_AHEAD = "c-plan-ahead"
DRBD_FILL_TARGET = "c-fill-target"
DRBD_DELAY_TARGET = "c-delay-target"
DRBD_MAX_RATE = "c-max-rate"
DRBD_MIN_RATE = "c-min-rate"
#: The type of each disk parameter (Ganeti's DISK_DT_TYPES)
DISK_DT_TYPES = {
    "access": "string", "c-delay-target": "int", "c-fill-target": "int",
    "c-max-rate": "int", "c-min-rate": "int", "c-plan-ahead": "int",
    "data-stripes": "int", "disk-barriers": "string", "disk-custom": "string",
    "dynamic-resync": "bool", "host": "string", "meta-barriers": "bool",
    "meta-stripes": "int", "metavg": "string", "net-custom": "string",
    "pool": "string", "port": "int", "protocol": "string",
    "resync-rate": "int", "stripes": "int", "volume": "string",
}
#: DRBD barrier letters: b (disk barriers), d (drain), f (flushes), n (none)
DRBD_B_DISK_BARRIERS = "b"
DRBD_B_DISK_DRAIN = "d"
DRBD_B_DISK_FLUSH = "f"
DRBD_B_NONE = "n"
DRBD_VALID_PROTOCOLS = frozenset(["A", "B", "C"])
DISK_VALID_ACCESS_MODES = frozenset(["kernelspace", "userspace"])

# Instance policy
ISPEC_MEM_SIZE = "memory-size"
ISPEC_CPU_COUNT = "cpu-count"
ISPEC_DISK_COUNT = "disk-count"
ISPEC_DISK_SIZE = "disk-size"
ISPEC_NIC_COUNT = "nic-count"
ISPEC_SPINDLE_USE = "spindle-use"
ISPECS_PARAMETERS = frozenset([ISPEC_MEM_SIZE, ISPEC_CPU_COUNT,
                               ISPEC_DISK_COUNT, ISPEC_DISK_SIZE,
                               ISPEC_NIC_COUNT, ISPEC_SPINDLE_USE])
ISPECS_MINMAX = "minmax"
ISPECS_MIN = "min"
ISPECS_MAX = "max"
ISPECS_STD = "std"
IPOLICY_DTS = "disk-templates"
IPOLICY_VCPU_RATIO = "vcpu-ratio"
IPOLICY_SPINDLE_RATIO = "spindle-ratio"
IPOLICY_DEFAULTS = {
    ISPECS_MINMAX: [{
        ISPECS_MIN: {ISPEC_MEM_SIZE: 128, ISPEC_CPU_COUNT: 1,
                     ISPEC_DISK_COUNT: 1, ISPEC_DISK_SIZE: 1024,
                     ISPEC_NIC_COUNT: 1, ISPEC_SPINDLE_USE: 1},
        ISPECS_MAX: {ISPEC_MEM_SIZE: 32768, ISPEC_CPU_COUNT: 8,
                     ISPEC_DISK_COUNT: MAX_DISKS, ISPEC_DISK_SIZE: 1024 * 1024,
                     ISPEC_NIC_COUNT: MAX_NICS, ISPEC_SPINDLE_USE: 12},
    }],
    ISPECS_STD: {ISPEC_MEM_SIZE: 128, ISPEC_CPU_COUNT: 1, ISPEC_DISK_COUNT: 1,
                 ISPEC_DISK_SIZE: 1024, ISPEC_NIC_COUNT: 1,
                 ISPEC_SPINDLE_USE: 1},
    IPOLICY_DTS: sorted(DISK_TEMPLATES),
    IPOLICY_VCPU_RATIO: 4.0,
    IPOLICY_SPINDLE_RATIO: 32.0,
}

# Hypervisor and disk state (admin overrides: hv_state / disk_state of
# nodes; Ganeti's keys)
HVST_MEMORY_TOTAL = "mem_total"
HVST_MEMORY_NODE = "mem_node"
HVST_MEMORY_HV = "mem_hv"
HVST_CPU_TOTAL = "cpu_total"
HVST_CPU_NODE = "cpu_node"
HVSTS_PARAMETERS = frozenset([HVST_MEMORY_TOTAL, HVST_MEMORY_NODE,
                              HVST_MEMORY_HV, HVST_CPU_TOTAL, HVST_CPU_NODE])
DS_DISK_TOTAL = "disk_total"
DS_DISK_RESERVED = "disk_reserved"
DS_DISK_OVERHEAD = "disk_overhead"
DSS_PARAMETERS = frozenset([DS_DISK_TOTAL, DS_DISK_RESERVED,
                            DS_DISK_OVERHEAD])

# Node groups
ALLOC_POLICY_PREFERRED = "preferred"
ALLOC_POLICY_LAST_RESORT = "last_resort"
ALLOC_POLICY_UNALLOCABLE = "unallocable"
VALID_ALLOC_POLICIES = [ALLOC_POLICY_PREFERRED, ALLOC_POLICY_LAST_RESORT,
                        ALLOC_POLICY_UNALLOCABLE]
INITIAL_NODE_GROUP_NAME = "default"

# Tags
TAG_CLUSTER = "cluster"
TAG_NODEGROUP = "nodegroup"
TAG_NODE = "node"
TAG_INSTANCE = "instance"
TAG_NETWORK = "network"
VALID_TAG_TYPES = frozenset([TAG_CLUSTER, TAG_NODEGROUP, TAG_NODE,
                             TAG_INSTANCE, TAG_NETWORK])
MAX_TAG_LEN = 128
MAX_TAGS_PER_OBJ = 4096
TAG_RE = re.compile(r"^[\w.+*/:@-]+$")

# Cluster defaults
DEFAULT_VG = "xenvg"
DEFAULT_MAC_PREFIX = "aa:00:00"
MASTER_POOL_SIZE_DEFAULT = 10
DEFAULT_ENABLED_HYPERVISOR = HT_FAKE
DEFAULT_MAX_RUNNING_JOBS = 20
DEFAULT_MAX_TRACKED_JOBS = 25
IP4_FAMILY = 2
IP6_FAMILY = 10
UIDPOOL_UID_MIN = 0
UIDPOOL_UID_MAX = 2 ** 32 - 1

UUID_RE = re.compile(
    r"^[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$")

#: the allocator a new cluster uses by default (the built-in one)
DEFAULT_IALLOCATOR = "hail"
