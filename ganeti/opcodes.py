"""Opcodes: the operations a job is made of.

An opcode travels as a JSON object holding every one of its parameters plus
``"OP_ID"`` (for example ``"OP_INSTANCE_STARTUP"``).  The ids, parameter
names, types and defaults below are Ganeti 3.0's, so opcodes built by
Ganeti's own ``gnt-*`` tools load here and ours load in Ganeti.

The module has two parts: the table of opcode definitions, whose parameter
types are written in :mod:`ganeti.ht` (``BOOL``, ``maybe(...)``,
``list_of(...)``, ...), and :class:`OpCode`, whose subclasses (one per OP_ID,
e.g. ``OpInstanceStartup``) are generated from the table.

Unknown parameters are rejected by :meth:`OpCode.from_dict` (``strict=False``
ignores them instead): every parameter Ganeti 3.0 defines for an opcode is
defined here too, so what the real clients send is always accepted, and a
typo in a hand-written request gets an error instead of a silent default.
"""

import re

import attr

from ganeti import constants
from ganeti import errors
from ganeti import leases
from ganeti.ht import (  # noqa: F401 (REDACTED: what redacting dumps show)
    ANY, BOOL, DICT, FLOAT, HIDE_SECRETS, HOST_NAME, INSTANCE_HOST_NAME, INT,
    IPV4_ADDR, IPV4_NET, IPV6_ADDR, IPV6_NET, NESTR, NONNEG_INT, OBJECT_NAME,
    NONNEG_NUMBER, OS_NAME, POS_INT, REDACTED, STR, Invalid, Type,
    copy_value, dict_of,
    either, integer, list_of, maybe, one_of, private, secret, show,
    tuple_of, where)


# --- Constants of the opcode and job format ------------------------------

# Priorities: lower is more urgent.  Clients may only submit the three
# "valid" values; the queue itself uses the whole range.
OP_PRIO_HIGHEST = -20
OP_PRIO_HIGH = -10
OP_PRIO_NORMAL = 0
OP_PRIO_LOW = 10
OP_PRIO_LOWEST = 19
OP_PRIO_DEFAULT = OP_PRIO_NORMAL
OP_PRIO_SUBMIT_VALID = frozenset([OP_PRIO_HIGH, OP_PRIO_NORMAL, OP_PRIO_LOW])

JOB_STATUS_QUEUED = "queued"
JOB_STATUS_WAITING = "waiting"
JOB_STATUS_CANCELING = "canceling"
JOB_STATUS_RUNNING = "running"
JOB_STATUS_CANCELED = "canceled"
JOB_STATUS_SUCCESS = "success"
JOB_STATUS_ERROR = "error"
JOBS_PENDING = frozenset([JOB_STATUS_QUEUED, JOB_STATUS_WAITING,
                          JOB_STATUS_CANCELING])
JOBS_FINALIZED = frozenset([JOB_STATUS_CANCELED, JOB_STATUS_SUCCESS,
                            JOB_STATUS_ERROR])
JOB_STATUS_ALL = JOBS_PENDING | JOBS_FINALIZED | {JOB_STATUS_RUNNING}

# Opcode statuses use the same words as job statuses.
OP_STATUS_QUEUED = JOB_STATUS_QUEUED
OP_STATUS_WAITING = JOB_STATUS_WAITING
OP_STATUS_CANCELING = JOB_STATUS_CANCELING
OP_STATUS_RUNNING = JOB_STATUS_RUNNING
OP_STATUS_CANCELED = JOB_STATUS_CANCELED
OP_STATUS_SUCCESS = JOB_STATUS_SUCCESS
OP_STATUS_ERROR = JOB_STATUS_ERROR
OPS_FINALIZED = JOBS_FINALIZED
OP_STATUS_ALL = JOB_STATUS_ALL

# Sources of reason trail entries ([source, text, epoch_ns]).
REASON_SRC_CLIENT = "gnt:client"
REASON_SRC_MASTERD = "gnt:daemon:masterd"
REASON_SRC_NODED = "gnt:daemon:noded"
REASON_SRC_OPCODE = "gnt:opcode"
REASON_SRC_PICKUP = "gnt:daemon:masterd:pickup"
REASON_SRC_WATCHER = "gnt:watcher"
REASON_SRC_RLIB2 = "gnt:library:rlib2"
REASON_SRC_USER = "gnt:user"

# Enumerations that appear only in opcodes.  Some are wider than what this
# project implements (e.g. storage types); the opcode format still accepts
# them so Ganeti's clients are never refused at the protocol level.
REBOOT_SOFT = "soft"
REBOOT_HARD = "hard"
REBOOT_FULL = "full"
REBOOT_TYPES = frozenset([REBOOT_SOFT, REBOOT_HARD, REBOOT_FULL])
INSTANCE_CREATE = "create"
INSTANCE_IMPORT = "import"
INSTANCE_REMOTE_IMPORT = "remote-import"
INSTANCE_CREATE_MODES = frozenset([INSTANCE_CREATE, INSTANCE_IMPORT,
                                   INSTANCE_REMOTE_IMPORT])
REPLACE_DISK_AUTO = "replace_auto"
REPLACE_DISK_PRI = "replace_on_primary"
REPLACE_DISK_SEC = "replace_on_secondary"
REPLACE_DISK_CHG = "replace_new_secondary"
REPLACE_MODES = frozenset([REPLACE_DISK_AUTO, REPLACE_DISK_PRI,
                           REPLACE_DISK_SEC, REPLACE_DISK_CHG])
NODE_EVAC_ALL = "all"
NODE_EVAC_PRI = "primary-only"
NODE_EVAC_SEC = "secondary-only"
NODE_EVAC_MODES = frozenset([NODE_EVAC_ALL, NODE_EVAC_PRI, NODE_EVAC_SEC])
EXPORT_MODE_LOCAL = "local"
EXPORT_MODE_REMOTE = "remote"
EXPORT_MODES = frozenset([EXPORT_MODE_LOCAL, EXPORT_MODE_REMOTE])
FILE_DRIVERS = frozenset(["loop", "blktap", "blktap2"])
STORAGE_TYPES = frozenset(["blockdev", "diskless", "ext", "file", "gluster",
                           "lvm-pv", "lvm-vg", "rados", "sharedfile"])
NETWORK_MODES = frozenset(["bridged", "routed", "openvswitch", "pool"])
INIC_PARAMS = frozenset(["bridge", "ip", "link", "mac", "mode", "name",
                         "network", "vlan"])
DDM_ADD = "add"
DDM_ATTACH = "attach"
DDM_MODIFY = "modify"
DDM_REMOVE = "remove"
DDM_DETACH = "detach"
DDMS_VALUES = frozenset([DDM_ADD, DDM_ATTACH, DDM_REMOVE, DDM_DETACH])
DDMS_VALUES_WITH_MODIFY = DDMS_VALUES | {DDM_MODIFY}
OOB_COMMANDS = frozenset(["power-on", "power-off", "power-cycle",
                          "power-status", "health"])
IALLOCATOR_DIRECTIONS = frozenset(["in", "out"])
IALLOCATOR_MODES = frozenset(["allocate", "allocate-secondary",
                              "multi-allocate", "relocate", "change-group",
                              "node-evacuate", "balance", "capacity"])
QUERY_KINDS = frozenset(["cluster", "export", "extstorage", "filter", "group",
                         "instance", "job", "lock", "network", "node", "os"])
SSH_KEY_TYPES = frozenset(["dsa", "ecdsa", "rsa"])
VERIFY_OPTIONAL_CHECKS = frozenset(["nplusone_mem"])
VERIFY_ERROR_CODES = frozenset([
    "ECLUSTERCERT", "ECLUSTERCFG", "ECLUSTERCLIENTCERT",
    "ECLUSTERDANGLINGINST", "ECLUSTERDANGLINGNODES", "ECLUSTERFILECHECK",
    "EEXTAGS", "EGROUPDIFFERENTPVSIZE", "EINSTANCEBADNODE", "EINSTANCEDOWN",
    "EINSTANCEFAULTYDISK", "EINSTANCELAYOUT", "EINSTANCEMISSINGCFGPARAMETER",
    "EINSTANCEMISSINGDISK", "EINSTANCEPOLICY", "EINSTANCESPLITGROUPS",
    "EINSTANCEUNSUITABLENODE", "EINSTANCEWRONGNODE", "ENODEDRBD",
    "ENODEDRBDHELPER", "ENODEDRBDVERSION", "ENODEFILECHECK",
    "ENODEFILESTORAGEPATHS", "ENODEFILESTORAGEPATHUNUSABLE",
    "ENODEGLUSTERSTORAGEPATHUNUSABLE", "ENODEHOOKS", "ENODEHV", "ENODELVM",
    "ENODEN1", "ENODENET", "ENODEOOBPATH", "ENODEORPHANINSTANCE",
    "ENODEORPHANLV", "ENODEOS", "ENODERPC", "ENODESETUP",
    "ENODESHAREDFILESTORAGEPATHUNUSABLE", "ENODESSH", "ENODETIME",
    "ENODEUSERSCRIPTS", "ENODEVERSION",
])


# --- Types of opcode parameters ---------------------------------------------
# The type language is ganeti.ht; these are the types opcodes add to it.

# Names are plain strings on the wire; the aliases document intent.
INSTANCE_NAME = STR
NODE_NAME = NESTR

DISK_TEMPLATE = one_of(*constants.DISK_TEMPLATES)
HYPERVISOR = one_of(*constants.HYPER_TYPES)
TAG_KIND = one_of(*constants.VALID_TAG_TYPES)
ALLOC_POLICY = one_of(*constants.VALID_ALLOC_POLICIES)
ADMIN_STATE_SOURCE = one_of(*constants.ADMIN_STATE_SOURCES)
MIGRATION_MODE = one_of(*constants.HT_MIGRATION_MODES)
REBOOT_TYPE = one_of(*REBOOT_TYPES)
CREATE_MODE = one_of(*INSTANCE_CREATE_MODES)
REPLACE_MODE = one_of(*REPLACE_MODES)
EVAC_MODE = one_of(*NODE_EVAC_MODES)
EXPORT_MODE = one_of(*EXPORT_MODES)
FILE_DRIVER = one_of(*FILE_DRIVERS)
STORAGE_TYPE = one_of(*STORAGE_TYPES)
NETWORK_MODE = one_of(*NETWORK_MODES)
OOB_COMMAND = one_of(*OOB_COMMANDS)
IALLOCATOR_DIRECTION = one_of(*IALLOCATOR_DIRECTIONS)
IALLOCATOR_MODE = one_of(*IALLOCATOR_MODES)
QUERY_WHAT = one_of(*QUERY_KINDS)
SSH_KEY_TYPE = one_of(*SSH_KEY_TYPES)
VERIFY_OPTIONAL_CHECK = one_of(*VERIFY_OPTIONAL_CHECKS)
VERIFY_ERROR_CODE = one_of(*VERIFY_ERROR_CODES)
PRIORITY = one_of(*OP_PRIO_SUBMIT_VALID)

# One disk: {"size": 1024, "mode": "rw", ...}; sizes may be unit strings.
DISK_PARAMS = dict_of(NESTR, either(NESTR, INT), desc="disk parameters")
# One NIC: {"mac": "auto", "link": "br0", ...}; every value a string or null.
NIC_PARAMS = dict_of(one_of(*INIC_PARAMS), maybe(STR),
                     desc="NIC parameters")
DISK_INDEX = integer(0, constants.MAX_DISKS - 1,
                     desc="a disk index (0-%d)" % (constants.MAX_DISKS - 1))
# OS parameters whose values are private (kept in the configuration,
# shown nowhere) or secret (not even written to disk: see OpCode.to_dict)
PRIVATE_DICT = dict_of(ANY, private(ANY))
SECRET_DICT = dict_of(ANY, secret(ANY))
#: the parameters holding private or secret values, for opcodes known only
#: as JSON (a job file this master cannot load): Ganeti's list
PRIVATE_PARAMETERS = frozenset(["osparams_private", "osparams_secret",
                                "osparams_private_cluster"])
SECRET_PARAMETERS = frozenset(["osparams_secret"])
UID_RANGES = list_of(tuple_of(INT, INT))
# Extra parameters of an instance allocator, {"key": value, "flag": null}:
# given to an external allocator as --key=value / --flag (this project's
# addition; Ganeti has only the cluster's default_iallocator_params).
IALLOCATOR_PARAMS = dict_of(NESTR, ANY, desc="allocator parameters")
#: the end of a forthcoming instance's lease (ganeti.leases): epoch
#: seconds, an ISO 8601 UTC time, a duration from now (+2h) or none
LEASE_UNTIL = either(
    NONNEG_NUMBER,
    where(NESTR, leases.is_lease_text, "a time (%s, or none)" % leases.FORMS),
    desc="a time (epoch seconds, %s, or none)" % leases.FORMS)
# Default allocators per request type (null: back to the list for all)
DEFAULT_IALLOCATORS = dict_of(one_of(*IALLOCATOR_MODES),
                              maybe(list_of(NESTR)),
                              desc="allocator names per request type")
# [action, name] pairs editing the hidden/blacklisted OS lists
OS_LIST_MODS = list_of(tuple_of(one_of(*DDMS_VALUES), NESTR))
# recreate-disks: disk indices, or [index, new parameters] pairs
RECREATE_DISKS = either(list_of(NONNEG_INT),
                        list_of(tuple_of(NONNEG_INT, DISK_PARAMS)))


class _OpCodeList(Type):
    """A list of nested opcodes of one kind (OP_INSTANCE_MULTI_ALLOC)."""

    def __init__(self, op_id):
        self.op_id = op_id
        self.desc = "a list of %s opcodes" % op_id

    def check(self, value):
        if not isinstance(value, (list, tuple)):
            self.fail(value)
        result = []
        for (idx, item) in enumerate(value):
            if isinstance(item, OpCode) and item.OP_ID == self.op_id:
                result.append(item)     # checked when it was made
                continue
            if isinstance(item, OpCode):
                item = item.to_dict()
            if isinstance(item, dict):
                item = dict(item)
                item.setdefault("OP_ID", self.op_id)
            try:
                if not isinstance(item, dict) or item["OP_ID"] != self.op_id:
                    raise Invalid("expected an %s opcode, got %s"
                                  % (self.op_id, show(item)))
                result.append(OpCode.from_dict(item))
            except errors.OpPrereqError as err:
                raise Invalid("item %d: %s" % (idx, err.args[0]), 2)
            except Invalid as err:
                raise Invalid("item %d: %s" % (idx, err.reason), 1)
        return result

    def dump(self, value, redact=False):
        return [op.dump(redact) for op in value]


NESTED_INSTANCE_CREATE = _OpCodeList("OP_INSTANCE_CREATE")


def device_mods(params):
    """Disk/NIC changes of OP_INSTANCE_SET_PARAMS.

    The current form is ``[action, index, params]`` (index an int, possibly
    negative, or a device name); the older ``[action-or-index, params]``
    form is still accepted, as Ganeti does.
    """
    return either(
        list_of(tuple_of(one_of(*DDMS_VALUES_WITH_MODIFY), either(INT, STR),
                         params)),
        list_of(tuple_of(either(one_of(*DDMS_VALUES), NONNEG_INT), params)))


# Job ids are non-negative integers (or their decimal strings); inside one
# SubmitManyJobs call, negative numbers refer to earlier jobs of that call.
JOB_ID = either(INT, where(STR, re.compile(r"[0-9]+\Z").match, "a job id"))
DEPENDENCIES = list_of(tuple_of(JOB_ID, list_of(one_of(*JOBS_FINALIZED))))
# [source, text, timestamp in ns]
REASON_TRAIL = list_of(tuple_of(STR, STR, either(INT, FLOAT)))


class _ReasonTrail(Type):
    """The reason trail; null (as Ganeti allows) is read as empty."""

    desc = REASON_TRAIL.desc

    def check(self, value):
        return [] if value is None else REASON_TRAIL.check(value)


# --- Parameters and opcode definitions -------------------------------------

_REQUIRED = object()


@attr.s(frozen=True, slots=True)
class Param(object):
    name = attr.ib()
    type = attr.ib()
    default = attr.ib(default=None)
    required = attr.ib(default=False)
    #: this project's addition: left out of to_dict() while unset, so
    #: Ganeti's strict loaders still take our opcodes
    extension = attr.ib(default=False)

    def default_value(self):
        # defaults like [] and {} must not be shared between opcodes
        return copy_value(self.default)


def P(name, typ, default=None):
    """An optional parameter with its default."""
    return Param(name, typ, default)


def R(name, typ):
    """A parameter every opcode of its kind must carry."""
    return Param(name, typ, None, required=True)


def X(name, typ):
    """An optional extension parameter Ganeti does not have (None: unset)."""
    return Param(name, typ, None, extension=True)


# Every opcode also carries these.
GENERIC_PARAMS = (
    P("dry_run", maybe(BOOL)),
    P("debug_level", maybe(NONNEG_INT)),
    P("priority", PRIORITY, OP_PRIO_DEFAULT),
    P("depends", maybe(DEPENDENCIES)),
    P("comment", maybe(STR)),
    P("reason", _ReasonTrail(), []),
)

_DEFINITIONS = []
_EXTENSIONS = set()


def _op(op_id, summary_field, *params):
    _DEFINITIONS.append((op_id, summary_field, params))


def _ext(op_id, summary_field, *params):
    """An opcode of this project's that Ganeti 3.0 does not have."""
    _EXTENSIONS.add(op_id)
    _op(op_id, summary_field, *params)


# --- Cluster ---------------------------------------------------------------

_op("OP_CLUSTER_ACTIVATE_MASTER_IP", None)
_op("OP_CLUSTER_CONFIG_QUERY", None,
    R("output_fields", list_of(NESTR)))
_op("OP_CLUSTER_DEACTIVATE_MASTER_IP", None)
_op("OP_CLUSTER_DESTROY", None)
_op("OP_CLUSTER_POST_INIT", None)
_op("OP_CLUSTER_QUERY", None)
_op("OP_CLUSTER_REDIST_CONF", None)
_op("OP_CLUSTER_RENAME", "name",
    R("name", HOST_NAME))
_op("OP_CLUSTER_RENEW_CRYPTO", None,
    P("node_certificates", BOOL, False),
    P("renew_ssh_keys", BOOL, False),
    P("ssh_key_type", maybe(SSH_KEY_TYPE)),
    P("ssh_key_bits", maybe(POS_INT)),
    P("verbose", BOOL, False),
    P("debug", BOOL, False),
    # What Ganeti's client renews itself, by ssh with the daemons stopped,
    # this project's opcode does without stopping anything
    # (docs/crypto.rst); the PEM and the secret never reach the disk.
    X("new_cluster_certificate", maybe(BOOL)),
    X("new_rapi_certificate", maybe(BOOL)),
    X("rapi_certificate", maybe(secret(NESTR))),
    X("new_confd_hmac_key", maybe(BOOL)),
    X("new_cluster_domain_secret", maybe(BOOL)),
    X("cluster_domain_secret", maybe(secret(NESTR))))
_ext("OP_CLUSTER_REPAIR_CANCEL", "incident_id",
    R("incident_id", NESTR))
_op("OP_CLUSTER_REPAIR_DISK_SIZES", None,
    P("instances", list_of(NESTR), []))
_op("OP_CLUSTER_SET_PARAMS", None,
    P("force", BOOL, False),
    P("hv_state", maybe(DICT)),
    P("disk_state", maybe(DICT)),
    P("vg_name", maybe(STR)),
    P("enabled_hypervisors", maybe(list_of(HYPERVISOR))),
    P("hvparams", maybe(dict_of(STR, DICT))),
    P("beparams", maybe(DICT)),
    P("os_hvp", maybe(dict_of(STR, DICT))),
    P("osparams", maybe(dict_of(STR, DICT))),
    P("osparams_private_cluster", maybe(dict_of(STR, PRIVATE_DICT))),
    P("diskparams", maybe(dict_of(DISK_TEMPLATE, DICT))),
    P("candidate_pool_size", maybe(POS_INT)),
    P("max_running_jobs", maybe(POS_INT)),
    P("max_tracked_jobs", maybe(POS_INT)),
    P("uid_pool", maybe(UID_RANGES)),
    P("add_uids", maybe(UID_RANGES)),
    P("remove_uids", maybe(UID_RANGES)),
    P("maintain_node_health", maybe(BOOL)),
    P("prealloc_wipe_disks", maybe(BOOL)),
    P("nicparams", maybe(NIC_PARAMS)),
    P("ndparams", maybe(DICT)),
    P("ipolicy", maybe(DICT)),
    P("drbd_helper", maybe(STR)),
    P("default_iallocator", maybe(STR)),
    P("default_iallocator_params", maybe(DICT)),
    X("default_iallocators", maybe(DEFAULT_IALLOCATORS)),
    P("mac_prefix", maybe(NESTR)),
    P("master_netdev", maybe(STR)),
    P("master_netmask", maybe(NONNEG_INT)),
    P("reserved_lvs", maybe(list_of(NESTR))),
    P("hidden_os", maybe(OS_LIST_MODS)),
    P("blacklisted_os", maybe(OS_LIST_MODS)),
    P("use_external_mip_script", maybe(BOOL)),
    P("enabled_disk_templates", maybe(list_of(DISK_TEMPLATE))),
    P("modify_etc_hosts", maybe(BOOL)),
    P("file_storage_dir", maybe(STR)),
    P("shared_file_storage_dir", maybe(STR)),
    P("gluster_storage_dir", maybe(STR)),
    P("install_image", maybe(STR)),
    P("instance_communication_network", maybe(STR)),
    P("zeroing_image", maybe(STR)),
    P("compression_tools", maybe(list_of(NESTR))),
    P("enabled_user_shutdown", maybe(BOOL)),
    P("enabled_data_collectors", maybe(dict_of(STR, BOOL))),
    P("data_collector_interval", maybe(dict_of(STR, INT))),
    # the nodes' self-diagnose command (as Ganeti 3.1's; "" = built in)
    X("diagnose_data_collector_filename", maybe(STR)),
    # the maintenance daemon's switches (the first three as Ganeti 3.1's)
    X("maint_round_delay", maybe(POS_INT)),
    X("maint_balance", maybe(BOOL)),
    X("maint_balance_threshold", maybe(FLOAT)),
    X("maint_harep", maybe(BOOL)),
    X("maint_balance_disk_moves", maybe(BOOL)),
    X("maint_balance_load", maybe(BOOL)),
    X("maint_balance_hold_down", maybe(NONNEG_INT)),
    X("maint_balance_max_moves", maybe(NONNEG_INT)))
_op("OP_CLUSTER_VERIFY", None,
    P("debug_simulate_errors", BOOL, False),
    P("error_codes", BOOL, False),
    P("skip_checks", list_of(VERIFY_OPTIONAL_CHECK), []),
    P("ignore_errors", list_of(VERIFY_ERROR_CODE), []),
    P("verbose", BOOL, False),
    P("group_name", maybe(NESTR)),
    P("verify_clutter", BOOL, False))
_op("OP_CLUSTER_VERIFY_CONFIG", None,
    P("debug_simulate_errors", BOOL, False),
    P("error_codes", BOOL, False),
    P("ignore_errors", list_of(VERIFY_ERROR_CODE), []),
    P("verbose", BOOL, False))
_op("OP_CLUSTER_VERIFY_DISKS", None,
    P("group_name", maybe(NESTR)),
    # strict: the disks of instances whose disks are not active must
    # exist too (gnt-cluster verify-disks --strict)
    X("is_strict", maybe(BOOL)))
_op("OP_CLUSTER_VERIFY_GROUP", "group_name",
    R("group_name", NESTR),
    P("debug_simulate_errors", BOOL, False),
    P("error_codes", BOOL, False),
    P("skip_checks", list_of(VERIFY_OPTIONAL_CHECK), []),
    P("ignore_errors", list_of(VERIFY_ERROR_CODE), []),
    P("verbose", BOOL, False),
    P("verify_clutter", BOOL, False))

# --- Queries ---------------------------------------------------------------

_op("OP_QUERY", "what",
    R("what", QUERY_WHAT),
    P("use_locking", BOOL, False),
    R("fields", list_of(NESTR)),
    P("qfilter", maybe(list_of(ANY))))
_op("OP_QUERY_FIELDS", "what",
    R("what", QUERY_WHAT),
    P("fields", maybe(list_of(NESTR))))

# --- Nodes and their storage -----------------------------------------------

_op("OP_NODE_ADD", "node_name",
    R("node_name", HOST_NAME),
    P("hv_state", maybe(DICT)),
    P("disk_state", maybe(DICT)),
    P("primary_ip", maybe(NESTR)),
    P("secondary_ip", maybe(NESTR)),
    P("readd", BOOL, False),
    P("group", maybe(NESTR)),
    P("master_capable", maybe(BOOL)),
    P("vm_capable", maybe(BOOL)),
    P("ndparams", maybe(DICT)),
    P("node_setup", BOOL, False),
    # SHA-256 fingerprint of the one-time certificate of a node daemon
    # started with --bootstrap: the master joins the node over TLS pinned
    # to it (docs/membership.rst)
    X("join_fingerprint", maybe(NESTR)))
_op("OP_NODE_EVACUATE", "node_name",
    P("early_release", BOOL, False),
    R("node_name", NESTR),
    P("node_uuid", maybe(NESTR)),
    P("remote_node", maybe(NESTR)),
    P("remote_node_uuid", maybe(NESTR)),
    P("iallocator", maybe(NESTR)),
    R("mode", EVAC_MODE),
    P("ignore_soft_errors", maybe(BOOL)),
    X("iallocator_params", maybe(IALLOCATOR_PARAMS)))
_op("OP_NODE_MIGRATE", "node_name",
    R("node_name", NESTR),
    P("node_uuid", maybe(NESTR)),
    P("mode", maybe(MIGRATION_MODE)),
    P("live", maybe(BOOL)),
    P("target_node", maybe(NESTR)),
    P("target_node_uuid", maybe(NESTR)),
    P("allow_runtime_changes", BOOL, True),
    P("ignore_ipolicy", BOOL, False),
    P("iallocator", maybe(NESTR)),
    X("iallocator_params", maybe(IALLOCATOR_PARAMS)))
_op("OP_NODE_MODIFY_STORAGE", "node_name",
    R("node_name", NESTR),
    P("node_uuid", maybe(NESTR)),
    R("storage_type", STORAGE_TYPE),
    P("name", maybe(NESTR)),
    R("changes", DICT))
_op("OP_NODE_POWERCYCLE", "node_name",
    R("node_name", NESTR),
    P("node_uuid", maybe(NESTR)),
    P("force", BOOL, False))
_op("OP_NODE_QUERYVOLS", None,
    R("output_fields", list_of(NESTR)),
    P("nodes", list_of(NESTR), []))
_op("OP_NODE_QUERY_STORAGE", None,
    R("output_fields", list_of(NESTR)),
    P("storage_type", maybe(STORAGE_TYPE)),
    P("nodes", list_of(NESTR), []),
    P("name", maybe(NESTR)))
_op("OP_NODE_REMOVE", "node_name",
    R("node_name", NESTR),
    P("node_uuid", maybe(NESTR)))
_op("OP_NODE_SET_PARAMS", "node_name",
    R("node_name", NESTR),
    P("node_uuid", maybe(NESTR)),
    P("force", BOOL, False),
    P("hv_state", maybe(DICT)),
    P("disk_state", maybe(DICT)),
    P("master_candidate", maybe(BOOL)),
    P("offline", maybe(BOOL)),
    P("drained", maybe(BOOL)),
    P("auto_promote", BOOL, False),
    P("master_capable", maybe(BOOL)),
    P("vm_capable", maybe(BOOL)),
    P("secondary_ip", maybe(NESTR)),
    P("ndparams", maybe(DICT)),
    P("powered", maybe(BOOL)))
_op("OP_OOB_COMMAND", None,
    P("node_names", list_of(NESTR), []),
    P("node_uuids", maybe(list_of(NESTR))),
    R("command", OOB_COMMAND),
    P("timeout", INT, 60),
    P("ignore_status", BOOL, False),
    P("power_delay", FLOAT, 2.0))
_op("OP_REPAIR_NODE_STORAGE", "node_name",
    R("node_name", NESTR),
    P("node_uuid", maybe(NESTR)),
    R("storage_type", STORAGE_TYPE),
    P("name", maybe(NESTR)),
    P("ignore_consistency", BOOL, False))
_op("OP_RESTRICTED_COMMAND", None,
    P("use_locking", BOOL, False),
    R("nodes", list_of(NESTR)),
    P("node_uuids", maybe(list_of(NESTR))),
    R("command", NESTR))
# Ganeti 3.1's: a repair command of a node, with an input on its stdin
_ext("OP_REPAIR_COMMAND", "node_name",
    R("node_name", NESTR),
    R("command", NESTR),
    P("input", maybe(STR)))

# --- Instances -------------------------------------------------------------

_op("OP_INSTANCE_ACTIVATE_DISKS", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("ignore_size", BOOL, False),
    P("wait_for_sync", BOOL, False))
_op("OP_INSTANCE_CHANGE_GROUP", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("early_release", BOOL, False),
    P("iallocator", maybe(NESTR)),
    P("target_groups", maybe(list_of(NESTR))),
    X("iallocator_params", maybe(IALLOCATOR_PARAMS)))
_op("OP_INSTANCE_CONSOLE", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)))
_op("OP_INSTANCE_CREATE", "instance_name",
    R("instance_name", INSTANCE_HOST_NAME),
    P("force_variant", BOOL, False),
    P("wait_for_sync", BOOL, True),
    P("name_check", BOOL, True),
    P("ignore_ipolicy", BOOL, False),
    P("opportunistic_locking", BOOL, False),
    P("beparams", DICT, {}),
    R("disks", list_of(DISK_PARAMS)),
    P("disk_template", maybe(DISK_TEMPLATE)),
    P("group_name", maybe(NESTR)),
    P("file_driver", maybe(FILE_DRIVER)),
    P("file_storage_dir", maybe(NESTR)),
    P("hvparams", DICT, {}),
    P("hypervisor", maybe(HYPERVISOR)),
    P("iallocator", maybe(NESTR)),
    P("identify_defaults", BOOL, False),
    P("ip_check", BOOL, True),
    P("conflicts_check", BOOL, True),
    R("mode", CREATE_MODE),
    R("nics", list_of(NIC_PARAMS)),
    P("no_install", maybe(BOOL)),
    P("osparams", DICT, {}),
    P("osparams_private", maybe(PRIVATE_DICT)),
    P("osparams_secret", maybe(SECRET_DICT)),
    P("os_type", maybe(OS_NAME)),
    P("pnode", maybe(NESTR)),
    P("pnode_uuid", maybe(NESTR)),
    P("snode", maybe(NESTR)),
    P("snode_uuid", maybe(NESTR)),
    P("source_handshake", maybe(list_of(ANY))),
    P("source_instance_name", maybe(NESTR)),
    P("source_shutdown_timeout", NONNEG_INT, 120),
    P("source_x509_ca", maybe(NESTR)),
    P("src_node", maybe(NESTR)),
    P("src_node_uuid", maybe(NESTR)),
    P("src_path", maybe(NESTR)),
    P("compress", STR, "none"),
    P("start", BOOL, True),
    P("forthcoming", BOOL, False),
    P("commit", BOOL, False),
    P("tags", list_of(NESTR), []),
    P("instance_communication", BOOL, False),
    P("helper_startup_timeout", maybe(INT)),
    P("helper_shutdown_timeout", maybe(INT)),
    X("iallocator_params", maybe(IALLOCATOR_PARAMS)),
    X("lease_until", maybe(LEASE_UNTIL)))
_op("OP_INSTANCE_DEACTIVATE_DISKS", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("force", BOOL, False))
_op("OP_INSTANCE_FAILOVER", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("shutdown_timeout", NONNEG_INT, 120),
    P("ignore_consistency", BOOL, False),
    P("target_node", maybe(NESTR)),
    P("target_node_uuid", maybe(NESTR)),
    P("ignore_ipolicy", BOOL, False),
    P("cleanup", BOOL, False),
    P("iallocator", maybe(NESTR)),
    X("iallocator_params", maybe(IALLOCATOR_PARAMS)))
_op("OP_INSTANCE_GROW_DISK", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("wait_for_sync", BOOL, True),
    R("disk", DISK_INDEX),
    R("amount", NONNEG_INT),
    P("absolute", BOOL, False),
    P("ignore_ipolicy", BOOL, False))
_op("OP_INSTANCE_MIGRATE", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("mode", maybe(MIGRATION_MODE)),
    P("live", maybe(BOOL)),
    P("target_node", maybe(NESTR)),
    P("target_node_uuid", maybe(NESTR)),
    P("allow_runtime_changes", BOOL, True),
    P("ignore_ipolicy", BOOL, False),
    P("cleanup", BOOL, False),
    P("iallocator", maybe(NESTR)),
    P("allow_failover", BOOL, False),
    P("ignore_hvversions", BOOL, False),
    X("iallocator_params", maybe(IALLOCATOR_PARAMS)))
_op("OP_INSTANCE_MOVE", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("shutdown_timeout", NONNEG_INT, 120),
    P("ignore_ipolicy", BOOL, False),
    R("target_node", NESTR),
    P("target_node_uuid", maybe(NESTR)),
    P("compress", STR, "none"),
    P("ignore_consistency", BOOL, False))
_op("OP_INSTANCE_MULTI_ALLOC", None,
    P("opportunistic_locking", BOOL, False),
    P("iallocator", maybe(NESTR)),
    P("instances", NESTED_INSTANCE_CREATE, []),
    X("iallocator_params", maybe(IALLOCATOR_PARAMS)))
_op("OP_INSTANCE_QUERY_DATA", None,
    P("use_locking", BOOL, False),
    P("instances", list_of(NESTR), []),
    P("static", BOOL, False))
_op("OP_INSTANCE_REBOOT", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("shutdown_timeout", NONNEG_INT, 120),
    P("ignore_secondaries", BOOL, False),
    R("reboot_type", REBOOT_TYPE))
_op("OP_INSTANCE_RECREATE_DISKS", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("disks", RECREATE_DISKS, []),
    P("nodes", list_of(NESTR), []),
    P("node_uuids", maybe(list_of(NESTR))),
    P("iallocator", maybe(NESTR)),
    X("iallocator_params", maybe(IALLOCATOR_PARAMS)))
_op("OP_INSTANCE_REINSTALL", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("force_variant", BOOL, False),
    P("os_type", maybe(OS_NAME)),
    P("osparams", maybe(DICT)),
    P("osparams_private", maybe(PRIVATE_DICT)),
    P("osparams_secret", maybe(SECRET_DICT)))
_op("OP_INSTANCE_REMOVE", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("shutdown_timeout", NONNEG_INT, 120),
    P("ignore_failures", BOOL, False),
    X("expired_lease", maybe(BOOL)))
_op("OP_INSTANCE_RENAME", None,
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    R("new_name", HOST_NAME),
    P("name_check", BOOL, True),
    P("ip_check", BOOL, True))
_op("OP_INSTANCE_REPLACE_DISKS", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("early_release", BOOL, False),
    P("ignore_ipolicy", BOOL, False),
    R("mode", REPLACE_MODE),
    P("disks", list_of(DISK_INDEX), []),
    P("remote_node", maybe(NESTR)),
    P("remote_node_uuid", maybe(NESTR)),
    P("iallocator", maybe(NESTR)),
    X("iallocator_params", maybe(IALLOCATOR_PARAMS)))
_op("OP_INSTANCE_SET_PARAMS", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("force", BOOL, False),
    P("force_variant", BOOL, False),
    P("ignore_ipolicy", BOOL, False),
    P("nics", device_mods(NIC_PARAMS), []),
    P("disks", device_mods(DISK_PARAMS), []),
    P("beparams", DICT, {}),
    P("runtime_mem", maybe(POS_INT)),
    P("hvparams", DICT, {}),
    P("disk_template", maybe(DISK_TEMPLATE)),
    P("ext_params", DICT, {}),
    P("file_driver", maybe(FILE_DRIVER)),
    P("file_storage_dir", maybe(NESTR)),
    P("pnode", maybe(NESTR)),
    P("pnode_uuid", maybe(NESTR)),
    P("remote_node", maybe(NESTR)),
    P("remote_node_uuid", maybe(NESTR)),
    P("iallocator", maybe(NESTR)),
    P("os_name", maybe(OS_NAME)),
    P("osparams", DICT, {}),
    P("osparams_private", maybe(PRIVATE_DICT)),
    P("wait_for_sync", BOOL, True),
    P("offline", maybe(BOOL)),
    P("conflicts_check", BOOL, True),
    P("hotplug", BOOL, False),
    P("hotplug_if_possible", BOOL, False),
    P("instance_communication", maybe(BOOL)),
    X("lease_until", maybe(LEASE_UNTIL)))
_op("OP_INSTANCE_SHUTDOWN", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("force", BOOL, False),
    P("ignore_offline_nodes", BOOL, False),
    P("timeout", NONNEG_INT, 120),
    P("no_remember", BOOL, False),
    P("admin_state_source", maybe(ADMIN_STATE_SOURCE)))
_op("OP_INSTANCE_STARTUP", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("force", BOOL, False),
    P("ignore_offline_nodes", BOOL, False),
    P("hvparams", DICT, {}),
    P("beparams", DICT, {}),
    P("no_remember", BOOL, False),
    P("startup_paused", BOOL, False),
    P("shutdown_timeout", NONNEG_INT, 120))

# --- Node groups -----------------------------------------------------------

_op("OP_GROUP_ADD", "group_name",
    R("group_name", OBJECT_NAME),
    P("alloc_policy", maybe(ALLOC_POLICY)),
    P("ndparams", maybe(DICT)),
    P("diskparams", maybe(dict_of(DISK_TEMPLATE, DICT))),
    P("hv_state", maybe(DICT)),
    P("disk_state", maybe(DICT)),
    P("ipolicy", maybe(DICT)))
_op("OP_GROUP_ASSIGN_NODES", "group_name",
    R("group_name", NESTR),
    P("force", BOOL, False),
    R("nodes", list_of(NESTR)),
    P("node_uuids", maybe(list_of(NESTR))))
_op("OP_GROUP_EVACUATE", "group_name",
    R("group_name", NESTR),
    P("early_release", BOOL, False),
    P("iallocator", maybe(NESTR)),
    P("target_groups", maybe(list_of(NESTR))),
    P("sequential", BOOL, False),
    P("force_failover", BOOL, False),
    X("iallocator_params", maybe(IALLOCATOR_PARAMS)))
_op("OP_GROUP_REMOVE", "group_name",
    R("group_name", NESTR))
_op("OP_GROUP_RENAME", None,
    R("group_name", NESTR),
    R("new_name", OBJECT_NAME))
_op("OP_GROUP_SET_PARAMS", "group_name",
    R("group_name", NESTR),
    P("alloc_policy", maybe(ALLOC_POLICY)),
    P("ndparams", maybe(DICT)),
    P("diskparams", maybe(dict_of(DISK_TEMPLATE, DICT))),
    P("hv_state", maybe(DICT)),
    P("disk_state", maybe(DICT)),
    P("ipolicy", maybe(DICT)))
_op("OP_GROUP_VERIFY_DISKS", "group_name",
    R("group_name", NESTR),
    X("is_strict", maybe(BOOL)))

# --- Operating systems and external storage providers ----------------------

_op("OP_EXT_STORAGE_DIAGNOSE", None,
    R("output_fields", list_of(NESTR)),
    P("names", list_of(NESTR), []))
_op("OP_OS_DIAGNOSE", None,
    R("output_fields", list_of(NESTR)),
    P("names", list_of(NESTR), []))

# --- Exports ---------------------------------------------------------------

_op("OP_BACKUP_EXPORT", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    P("compress", STR, "none"),
    P("shutdown_timeout", NONNEG_INT, 120),
    R("target_node", either(NESTR, list_of(ANY))),
    P("target_node_uuid", maybe(NESTR)),
    P("shutdown", BOOL, True),
    P("remove_instance", BOOL, False),
    P("ignore_remove_failures", BOOL, False),
    P("mode", EXPORT_MODE, "local"),
    P("x509_key_name", maybe(list_of(ANY))),
    P("destination_x509_ca", maybe(NESTR)),
    P("zero_free_space", BOOL, False),
    P("zeroing_timeout_fixed", maybe(INT)),
    P("zeroing_timeout_per_mib", maybe(FLOAT)),
    P("long_sleep", BOOL, False))
_op("OP_BACKUP_PREPARE", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)),
    R("mode", EXPORT_MODE))
_op("OP_BACKUP_REMOVE", "instance_name",
    R("instance_name", STR),
    P("instance_uuid", maybe(NESTR)))

# --- Tags ------------------------------------------------------------------

_op("OP_TAGS_DEL", None,
    R("kind", TAG_KIND),
    R("tags", list_of(STR)),
    P("name", maybe(STR)))
_op("OP_TAGS_GET", "name",
    R("kind", TAG_KIND),
    P("use_locking", BOOL, False),
    P("name", maybe(STR)))
_op("OP_TAGS_SEARCH", "pattern",
    R("pattern", NESTR))
_op("OP_TAGS_SET", None,
    R("kind", TAG_KIND),
    R("tags", list_of(STR)),
    P("name", maybe(STR)))

# --- Networks --------------------------------------------------------------

_op("OP_NETWORK_ADD", "network_name",
    R("network_name", OBJECT_NAME),
    R("network", IPV4_NET),
    P("gateway", maybe(IPV4_ADDR)),
    P("network6", maybe(IPV6_NET)),
    P("gateway6", maybe(IPV6_ADDR)),
    P("mac_prefix", maybe(NESTR)),
    P("add_reserved_ips", maybe(list_of(IPV4_ADDR))),
    P("conflicts_check", BOOL, True),
    # Ganeti's RAPI client sends null when no tags are given
    P("tags", maybe(list_of(NESTR)), []))
_op("OP_NETWORK_CONNECT", "network_name",
    R("group_name", NESTR),
    R("network_name", NESTR),
    R("network_mode", NETWORK_MODE),
    R("network_link", NESTR),
    P("network_vlan", STR, ""),
    P("conflicts_check", BOOL, True))
_op("OP_NETWORK_DISCONNECT", "network_name",
    R("group_name", NESTR),
    R("network_name", NESTR))
_op("OP_NETWORK_REMOVE", "network_name",
    R("network_name", NESTR),
    P("force", BOOL, False))
_op("OP_NETWORK_SET_PARAMS", "network_name",
    R("network_name", NESTR),
    P("gateway", maybe(IPV4_ADDR)),
    P("network6", maybe(IPV6_NET)),
    P("gateway6", maybe(IPV6_ADDR)),
    P("mac_prefix", maybe(NESTR)),
    P("add_reserved_ips", maybe(list_of(IPV4_ADDR))),
    P("remove_reserved_ips", maybe(list_of(IPV4_ADDR))))

# --- Testing ---------------------------------------------------------------

_op("OP_TEST_ALLOCATOR", "iallocator",
    R("direction", IALLOCATOR_DIRECTION),
    R("mode", IALLOCATOR_MODE),
    R("name", NESTR),
    P("nics", maybe(list_of(NIC_PARAMS))),
    P("disks", maybe(list_of(ANY))),
    P("hypervisor", maybe(HYPERVISOR)),
    P("iallocator", maybe(NESTR)),
    P("tags", list_of(NESTR), []),
    P("memory", maybe(NONNEG_INT)),
    P("vcpus", maybe(NONNEG_INT)),
    P("os", maybe(NESTR)),
    P("disk_template", maybe(DISK_TEMPLATE)),
    P("instances", maybe(list_of(NESTR))),
    P("evac_mode", maybe(EVAC_MODE)),
    P("target_groups", maybe(list_of(NESTR))),
    P("spindle_use", NONNEG_INT, 1),
    P("count", NONNEG_INT, 1),
    P("group_name", maybe(NESTR)),
    X("iallocator_params", maybe(IALLOCATOR_PARAMS)),
    # the balance request's options (hbal's -l, --no-disk-moves and
    # --evac-mode)
    X("max_moves", maybe(NONNEG_INT)),
    X("disk_moves", maybe(BOOL)),
    X("balance_evac", maybe(BOOL)))
_op("OP_TEST_DELAY", "duration",
    R("duration", FLOAT),
    P("on_master", BOOL, True),
    P("on_nodes", list_of(NESTR), []),
    P("on_node_uuids", maybe(list_of(NESTR))),
    P("repeat", NONNEG_INT, 0),
    P("interruptible", BOOL, False),
    P("no_locks", BOOL, True))
_op("OP_TEST_DUMMY", None,
    P("result", ANY),
    P("messages", ANY),
    P("fail", ANY),
    P("submit_jobs", ANY))
_op("OP_TEST_JQUEUE", None,
    P("notify_waitlock", BOOL, False),
    P("notify_exec", BOOL, False),
    P("log_messages", list_of(STR), []),
    P("fail", BOOL, False))
_op("OP_TEST_OS_PARAMS", None,
    P("osparams_secret", maybe(SECRET_DICT)))


# --- OpCode objects ---------------------------------------------------------

def _kind(value):
    """What a value is, without showing it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object whose keys are not all strings"
    return "a %s" % type(value).__name__


def _invalid(name, reason):
    return errors.OpPrereqError("%s: %s" % (name, reason), errors.ECODE_INVAL)


class OpCode(object):
    """Base of the generated opcode classes.

    Parameters are attributes.  Constructing an opcode (``OpFoo(**params)``
    or :meth:`from_dict`) validates every parameter and fills in defaults;
    after changing attributes, :meth:`validate` checks again.
    """

    OP_ID = None
    PARAMS = ()            # tuple of Param, generic ones included
    SUMMARY_FIELD = None   # parameter shown by summary()
    _BY_NAME = {}
    __slots__ = ()

    def __init__(self, **params):
        if self.OP_ID is None:
            raise errors.ProgrammerError("OpCode is abstract; use"
                                         " opcode_class(op_id)")
        self._load(params, strict=True)

    def _load(self, params, strict):
        known = self._BY_NAME
        if strict:
            for name in sorted(params):
                if name not in known:
                    raise _invalid(name, "unknown parameter of %s"
                                   % self.OP_ID)
        values = {}
        for param in self.PARAMS:
            if param.name in params:
                value = params[param.name]
            elif param.required:
                raise _invalid(param.name, "missing required parameter of %s"
                               % self.OP_ID)
            else:
                value = param.default_value()
            try:
                values[param.name] = param.type.check(value)
            except Invalid as err:
                if param.name in PRIVATE_PARAMETERS:
                    # the reason would quote the value
                    raise _invalid(param.name, "expected %s, got %s (its"
                                   " value is not shown)"
                                   % (param.type.desc, _kind(value)))
                raise _invalid(param.name, err.reason)
        # all or nothing; check() may hand back the caller's own containers
        for (name, value) in values.items():
            setattr(self, name, copy_value(value))

    @classmethod
    def from_dict(cls, data, strict=True):
        """Build and validate an opcode from its JSON form.

        On OpCode itself the class is chosen by ``data["OP_ID"]``; on a
        subclass ``OP_ID`` may be omitted.  With ``strict=False`` unknown
        keys are ignored instead of rejected.
        """
        if not isinstance(data, dict):
            raise _invalid("opcode", "expected an object, got %s"
                           % show(data))
        params = dict(data)
        op_id = params.pop("OP_ID", cls.OP_ID)
        if op_id is None:
            raise _invalid("OP_ID", "missing")
        klass = opcode_class(op_id)
        if cls.OP_ID is not None and klass is not cls:
            raise _invalid("OP_ID", "expected %s, got %s"
                           % (cls.OP_ID, show(op_id)))
        op = klass.__new__(klass)
        op._load(params, strict)
        return op

    def to_dict(self, redact_private=False, redact_secret=False):
        """The JSON form: every parameter plus ``OP_ID``.

        ``redact_private`` replaces private and secret values (private
        and secret OS parameters) with ``"<redacted>"``, for answers and
        logs; ``redact_secret`` only the secret ones, for the job files.
        """
        return self.dump(True if redact_private
                         else HIDE_SECRETS if redact_secret else False)

    def dump(self, redact=False):
        """:meth:`to_dict` with ``redact`` as :meth:`ganeti.ht.Type.dump`
        takes it."""
        data = {p.name: p.type.dump(getattr(self, p.name), redact)
                for p in self.PARAMS
                if not (p.extension and getattr(self, p.name) is None)}
        data["OP_ID"] = self.OP_ID
        return data

    @classmethod
    def _secret_params(cls):
        """The parameters that can hold secret values (computed once)."""
        if cls not in _SECRET_HOLDERS:
            _SECRET_HOLDERS[cls] = tuple(p for p in cls.PARAMS
                                         if _has_secret(p.type))
        return _SECRET_HOLDERS[cls]

    @classmethod
    def may_hold_secrets(cls):
        """Whether a parameter of this opcode can hold secret values."""
        return bool(cls._secret_params())

    def secret_values(self):
        """``{parameter: [its secret values]}`` for the parameters that
        hold any."""
        found = {}
        for param in self._secret_params():
            values = []

            def collect(value, is_secret):
                if is_secret:
                    values.append(value)
                return value
            param.type.dump(getattr(self, param.name), collect)
            if values:
                found[param.name] = values
        return found

    def lost_secrets(self):
        """The parameters whose secret values were left on disk as
        ``"<redacted>"`` (this opcode was read back from a job file): it
        cannot run without them being given again."""
        return sorted(name for name, values in self.secret_values().items()
                      if REDACTED in values)

    def validate(self):
        """Check (and normalise) the current attribute values again."""
        self._load({p.name: getattr(self, p.name) for p in self.PARAMS},
                   strict=True)

    def copy(self):
        """An independent copy (the values are already checked: no second
        validation)."""
        klass = type(self)
        op = klass.__new__(klass)
        for param in self.PARAMS:
            setattr(op, param.name,
                    copy_value(getattr(self, param.name)))
        return op

    def __deepcopy__(self, memo):
        return self.copy()

    def summary(self):
        """Short form as in job listings: ``INSTANCE_STARTUP(inst1)``."""
        text = self.OP_ID[len("OP_"):]
        if self.SUMMARY_FIELD:
            param = self._BY_NAME[self.SUMMARY_FIELD]
            value = param.type.dump(getattr(self, param.name), True)
            if isinstance(value, (list, tuple)):
                value = ",".join(str(v) for v in value)
            text = "%s(%s)" % (text, value)
        return text

    def tiny_summary(self):
        """Even shorter: ``I_STARTUP``, ``N_EVACUATE``, ``TEST_DELAY``."""
        text = self.OP_ID[len("OP_"):]
        for (prefix, short) in _TINY_PREFIXES:
            if text.startswith(prefix):
                return short + text[len(prefix):]
        return text

    def __eq__(self, other):
        if not isinstance(other, OpCode):
            return NotImplemented
        return self.OP_ID == other.OP_ID and self.to_dict() == other.to_dict()

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None

    def __repr__(self):
        # only what differs from the defaults, to keep it readable; never
        # a private value (a repr ends up in logs)
        shown = ["%s=%r" % (p.name, p.type.dump(getattr(self, p.name), True))
                 for p in self.PARAMS
                 if p.required or getattr(self, p.name) != p.default]
        return "%s(%s)" % (type(self).__name__, ", ".join(shown))


#: opcode class -> its parameters that may hold secret values
_SECRET_HOLDERS = {}


def _has_secret(typ):
    """Whether values of ``typ`` can contain secret values."""
    if isinstance(typ, _OpCodeList):
        return opcode_class(typ.op_id).may_hold_secrets()
    if getattr(typ, "secret", False) is True:
        return True
    for value in vars(typ).values():
        parts = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(part, Type) and _has_secret(part)
               for part in parts):
            return True
    return False


_TINY_PREFIXES = (("CLUSTER_", "C_"), ("GROUP_", "G_"), ("NODE_", "N_"),
                  ("INSTANCE_", "I_"))

_CLASSES = {}


def class_name(op_id):
    """``OP_INSTANCE_STARTUP`` -> ``OpInstanceStartup``."""
    return "Op" + "".join(w.capitalize() for w in op_id[3:].split("_"))


def _make_class(op_id, summary_field, params):
    all_params = tuple(params) + GENERIC_PARAMS
    by_name = {p.name: p for p in all_params}
    assert len(by_name) == len(all_params), "duplicate parameter in " + op_id
    assert summary_field is None or summary_field in by_name, op_id
    namespace = {
        "OP_ID": op_id,
        "PARAMS": all_params,
        "SUMMARY_FIELD": summary_field,
        "_BY_NAME": by_name,
        "__slots__": tuple(by_name),
        "__doc__": "Opcode %s." % op_id,
        "__module__": __name__,
    }
    return type(class_name(op_id), (OpCode,), namespace)


for (_op_id, _summary_field, _params) in _DEFINITIONS:
    _CLASSES[_op_id] = _make_class(_op_id, _summary_field, _params)
    globals()[class_name(_op_id)] = _CLASSES[_op_id]
del _op_id, _summary_field, _params

ALL_OP_IDS = frozenset(_CLASSES)
#: the opcodes Ganeti 3.0 does not have (its clients cannot send them)
EXTENSION_OP_IDS = frozenset(_EXTENSIONS)

#: Opcodes that only read: they change neither the configuration nor a
#: node.  A job made of these alone is a query job, which the queue gives
#: a budget of its own (docs/jobs.rst, "Query jobs").  OP_TEST_DELAY is
#: not one (it sleeps, and may do so on nodes), nor are the cluster
#: verification opcodes (they submit jobs and may repair).
QUERY_ONLY_OP_IDS = frozenset([
    "OP_QUERY", "OP_QUERY_FIELDS", "OP_CLUSTER_QUERY",
    "OP_CLUSTER_CONFIG_QUERY", "OP_INSTANCE_QUERY_DATA",
    "OP_INSTANCE_CONSOLE", "OP_NODE_QUERYVOLS", "OP_NODE_QUERY_STORAGE",
    "OP_OS_DIAGNOSE", "OP_EXT_STORAGE_DIAGNOSE", "OP_TAGS_GET",
    "OP_TAGS_SEARCH",
])
assert QUERY_ONLY_OP_IDS <= ALL_OP_IDS, QUERY_ONLY_OP_IDS - ALL_OP_IDS


def is_query_only(ops):
    """True for a non-empty list of opcodes that all only read."""
    return bool(ops) and all(getattr(op, "OP_ID", None) in QUERY_ONLY_OP_IDS
                             for op in ops)


def opcode_class(op_id):
    """The class of ``op_id``; errors.OpCodeUnknown if there is none."""
    try:
        return _CLASSES[op_id]
    except (KeyError, TypeError):
        raise errors.OpCodeUnknown("Unknown opcode %s" % show(op_id))


def from_dict(data, strict=True):
    """Shortcut for :meth:`OpCode.from_dict`."""
    return OpCode.from_dict(data, strict=strict)


def redact_data(data, secret_only=False):
    """A copy of an opcode's JSON form (or of any JSON value holding
    opcodes) whose private values (only the secret ones with
    ``secret_only``) are ``"<redacted>"``, found by parameter name: for
    opcodes this master cannot load, whose types are unknown."""
    names = SECRET_PARAMETERS if secret_only else PRIVATE_PARAMETERS
    if isinstance(data, list):
        return [redact_data(item, secret_only) for item in data]
    if not isinstance(data, dict):
        return copy_value(data)
    result = {}
    for key, value in data.items():
        if key in names and isinstance(value, dict):
            if key.endswith("_cluster"):
                # {os name: {parameter: value}}
                value = {os_name: _redact_values(params)
                         for os_name, params in value.items()}
            else:
                value = _redact_values(value)
            result[key] = value
        else:
            result[key] = redact_data(value, secret_only)
    return result


def _redact_values(params):
    if not isinstance(params, dict):
        return REDACTED
    return {key: REDACTED for key in params}


def make_reason(source, text, timestamp_ns):
    """One reason trail entry, e.g. ``("gnt:client:gnt-instance", "add")``."""
    return [source, text, int(timestamp_ns)]
