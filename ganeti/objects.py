"""Configuration objects and their config.data representation.

Every object kept in config.data has a ``uuid``, a ``serial_no``, ``ctime``,
``mtime`` and (where Ganeti has them) ``tags``.  ``to_dict``/``from_dict``
produce and read Ganeti 3.0's layout: attributes
that are None are left out, tags are a JSON list, NICs are embedded in their
instance, disks are top-level objects referred to by UUID.

Keys we do not know are kept aside and written back unchanged, so a file
written by a newer Ganeti survives a round trip through this code.

Parameter inheritance (``fill_*`` functions at the end) follows Ganeti:
cluster defaults, then node group where config.data gives groups that kind of
parameter (ndparams, diskparams, ipolicy), then the object itself.
"""

import copy
import time
import uuid as uuid_mod

import attr

from ganeti import constants
from ganeti import errors
from ganeti.ht import REDACTED


def _same(value):
    return value


_PLANS = {}


def _field_plan(cls):
    """[(attribute name, kind)] of an attrs class, computed once per class
    (to_dict runs for every object on every config write)."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = [(a.name, a.metadata.get("kind"))
                              for a in attr.fields(cls)]
    return plan


def new_uuid():
    return str(uuid_mod.uuid4())


def _meta(kind=None, cls=None):
    return {"kind": kind, "cls": cls}


def _tags_field():
    return attr.ib(factory=set, metadata=_meta("tags"))


def _dict_field():
    return attr.ib(factory=dict)


class ConfigObject(object):
    """Base of every config object (attrs classes below)."""

    # Keys found in a dict we read but do not model; written back as they were.
    def _extra(self):
        return self.__dict__.setdefault("_unknown_keys", {})

    def to_dict(self, copy_values=True):
        """The config.data form.

        With ``copy_values=False`` plain values (dicts, lists) are shared
        with the object, not copied: for serialising at once, where the
        copy would only cost time.
        """
        dup = copy.deepcopy if copy_values else _same
        result = {}
        for name, kind in _field_plan(type(self)):
            value = getattr(self, name)
            if value is None:
                continue
            if kind is None:
                result[name] = dup(value)
                continue
            if kind == "tags":
                value = sorted(value)
            elif kind == "object":
                value = value.to_dict(copy_values)
            elif kind == "objects":
                value = [v.to_dict(copy_values) for v in value]
            elif kind == "object_map":
                value = {k: v.to_dict(copy_values) for k, v in value.items()}
            result[name] = value
        for k, v in self._extra().items():
            result.setdefault(k, dup(v))
        return result

    @classmethod
    def from_dict(cls, data):
        if not isinstance(data, dict):
            raise errors.ConfigurationError(
                "%s: expected a JSON object, got %s"
                % (cls.__name__, type(data).__name__))
        known = {}
        unknown = {}
        fields = attr.fields_dict(cls)
        for key, value in data.items():
            a = fields.get(key)
            if a is None:
                unknown[key] = value
                continue
            kind = a.metadata.get("kind")
            sub = a.metadata.get("cls")
            if isinstance(sub, str):
                sub = globals()[sub]  # late binding: Disk children are Disks
            try:
                if value is None:
                    pass
                elif kind == "tags":
                    value = set(value)
                elif kind == "object":
                    value = sub.from_dict(value)
                elif kind == "objects":
                    value = [sub.from_dict(v) for v in value]
                elif kind == "object_map":
                    value = {k: sub.from_dict(v) for k, v in value.items()}
            except (TypeError, AttributeError) as err:
                raise errors.ConfigurationError(
                    "%s: field '%s' has a wrong type: %s"
                    % (cls.__name__, key, err))
            known[key] = value
        obj = cls(**known)
        if unknown:
            obj._extra().update(unknown)
        return obj

    def copy(self):
        return type(self).from_dict(self.to_dict())

    def touch(self, now=None):
        """Record a change: bump serial_no and mtime."""
        self.serial_no = (self.serial_no or 0) + 1
        self.mtime = time.time() if now is None else now


class TaggableObject(ConfigObject):

    def add_tag(self, tag):
        validate_tag(tag)
        if tag in self.tags:
            return
        if len(self.tags) >= constants.MAX_TAGS_PER_OBJ:
            raise errors.TagError("too many tags (maximum %d)"
                                  % constants.MAX_TAGS_PER_OBJ)
        self.tags.add(tag)

    def remove_tag(self, tag):
        if tag not in self.tags:
            raise errors.TagError("tag '%s' not found" % tag)
        self.tags.discard(tag)


def validate_tag(tag):
    """Raise TagError with the reason unless ``tag`` is a valid tag."""
    if not isinstance(tag, str):
        raise errors.TagError("tag must be a string, got %s"
                              % type(tag).__name__)
    if not tag:
        raise errors.TagError("tag must not be empty")
    if len(tag) > constants.MAX_TAG_LEN:
        raise errors.TagError("tag '%s...' is too long (maximum %d characters)"
                              % (tag[:20], constants.MAX_TAG_LEN))
    if not constants.TAG_RE.match(tag):
        raise errors.TagError("tag '%s' contains invalid characters" % tag)


@attr.s(eq=False, repr=False)
class NIC(ConfigObject):
    """A network interface, embedded in its instance."""
    name = attr.ib(default=None)
    mac = attr.ib(default=None)
    ip = attr.ib(default=None)
    network = attr.ib(default=None)  # uuid of a Network, or None
    nicparams = _dict_field()
    netinfo = attr.ib(default=None)
    pci = attr.ib(default=None)
    hvinfo = attr.ib(default=None)
    uuid = attr.ib(default=None)

    def __repr__(self):
        return "<NIC %s mac=%s ip=%s>" % (self.uuid, self.mac, self.ip)


@attr.s(eq=False, repr=False)
class Disk(ConfigObject):
    """A disk; top-level in config.data, referred to by its instance."""
    forthcoming = attr.ib(default=False)
    name = attr.ib(default=None)
    dev_type = attr.ib(default=None)
    logical_id = attr.ib(default=None)
    children = attr.ib(factory=list, metadata=_meta("objects", "Disk"))
    nodes = attr.ib(factory=list)  # node uuids
    iv_name = attr.ib(default=None)
    size = attr.ib(default=None)  # MiB
    mode = attr.ib(default=None)
    params = _dict_field()
    spindles = attr.ib(default=None)
    pci = attr.ib(default=None)
    hvinfo = attr.ib(default=None)
    dynamic_params = attr.ib(default=None)
    serial_no = attr.ib(default=1)
    ctime = attr.ib(default=None)
    mtime = attr.ib(default=None)
    uuid = attr.ib(default=None)

    def __repr__(self):
        return "<Disk %s %s size=%s>" % (self.uuid, self.dev_type, self.size)

    def storage_size(self):
        """MiB this disk takes on each of its nodes' storage."""
        size = self.size or 0
        if self.dev_type == constants.DT_DRBD8:
            size += constants.DRBD_META_SIZE
        return size


@attr.s(eq=False, repr=False)
class Instance(TaggableObject):
    forthcoming = attr.ib(default=False)
    name = attr.ib(default=None)
    primary_node = attr.ib(default=None)  # node uuid
    secondary_nodes = attr.ib(factory=list)
    os = attr.ib(default=None)
    hypervisor = attr.ib(default=None)
    hvparams = _dict_field()
    beparams = _dict_field()
    osparams = _dict_field()
    osparams_private = _dict_field()
    admin_state = attr.ib(default=constants.ADMINST_DOWN)
    admin_state_source = attr.ib(default=constants.ADMIN_SOURCE)
    nics = attr.ib(factory=list, metadata=_meta("objects", "NIC"))
    disks = attr.ib(factory=list)  # disk uuids, in index order
    disks_info = attr.ib(default=None)
    disk_template = attr.ib(default=None)  # derived in 3.0; never written
    disks_active = attr.ib(default=False)
    network_port = attr.ib(default=None)
    serial_no = attr.ib(default=1)
    ctime = attr.ib(default=None)
    mtime = attr.ib(default=None)
    uuid = attr.ib(default=None)
    tags = _tags_field()

    def __repr__(self):
        return "<Instance %s (%s)%s>" % (self.name, self.uuid,
                                         " forthcoming" if self.forthcoming
                                         else "")

    def to_dict(self, copy_values=True):
        result = super().to_dict(copy_values)
        # Ganeti 3.0 derives the template from the disks and does not store it.
        result.pop("disk_template", None)
        return result

    @property
    def display_name(self):
        """The name, or the UUID for a forthcoming instance without one."""
        return self.name or self.uuid

    @property
    def all_nodes(self):
        nodes = [self.primary_node] if self.primary_node else []
        return nodes + [n for n in self.secondary_nodes if n not in nodes]


@attr.s(eq=False, repr=False)
class Node(TaggableObject):
    name = attr.ib(default=None)
    primary_ip = attr.ib(default=None)
    secondary_ip = attr.ib(default=None)
    serial_no = attr.ib(default=1)
    master_candidate = attr.ib(default=True)
    offline = attr.ib(default=False)
    drained = attr.ib(default=False)
    group = attr.ib(default=None)  # node group uuid
    master_capable = attr.ib(default=True)
    vm_capable = attr.ib(default=True)
    ndparams = _dict_field()
    powered = attr.ib(default=True)
    hv_state = _dict_field()
    hv_state_static = _dict_field()
    disk_state = _dict_field()
    disk_state_static = _dict_field()
    ctime = attr.ib(default=None)
    mtime = attr.ib(default=None)
    uuid = attr.ib(default=None)
    tags = _tags_field()

    def __repr__(self):
        return "<Node %s (%s)>" % (self.name, self.uuid)


@attr.s(eq=False, repr=False)
class NodeGroup(TaggableObject):
    name = attr.ib(default=None)
    ndparams = _dict_field()
    diskparams = _dict_field()
    ipolicy = _dict_field()
    serial_no = attr.ib(default=1)
    hv_state_static = _dict_field()
    disk_state_static = _dict_field()
    alloc_policy = attr.ib(default=constants.ALLOC_POLICY_PREFERRED)
    networks = _dict_field()  # network uuid -> nicparams
    ctime = attr.ib(default=None)
    mtime = attr.ib(default=None)
    uuid = attr.ib(default=None)
    tags = _tags_field()

    def __repr__(self):
        return "<NodeGroup %s (%s)>" % (self.name, self.uuid)


@attr.s(eq=False, repr=False)
class Network(TaggableObject):
    name = attr.ib(default=None)
    serial_no = attr.ib(default=1)
    mac_prefix = attr.ib(default=None)
    network = attr.ib(default=None)
    network6 = attr.ib(default=None)
    gateway = attr.ib(default=None)
    gateway6 = attr.ib(default=None)
    reservations = attr.ib(default=None)
    ext_reservations = attr.ib(default=None)
    ctime = attr.ib(default=None)
    mtime = attr.ib(default=None)
    uuid = attr.ib(default=None)
    tags = _tags_field()

    def __repr__(self):
        return "<Network %s (%s)>" % (self.name, self.uuid)


@attr.s(eq=False, repr=False)
class Cluster(TaggableObject):
    serial_no = attr.ib(default=1)
    rsahostkeypub = attr.ib(default=None)
    dsahostkeypub = attr.ib(default=None)
    highest_used_port = attr.ib(default=constants.FIRST_DRBD_PORT - 1)
    tcpudp_port_pool = attr.ib(factory=list)
    mac_prefix = attr.ib(default=constants.DEFAULT_MAC_PREFIX)
    volume_group_name = attr.ib(default=None)
    reserved_lvs = attr.ib(factory=list)
    drbd_usermode_helper = attr.ib(default=None)
    default_bridge = attr.ib(default=None)
    default_hypervisor = attr.ib(default=None)
    master_node = attr.ib(default=None)  # node uuid
    master_ip = attr.ib(default=None)
    master_netdev = attr.ib(default=None)
    master_netmask = attr.ib(default=None)
    use_external_mip_script = attr.ib(default=False)
    cluster_name = attr.ib(default=None)
    file_storage_dir = attr.ib(default=None)
    shared_file_storage_dir = attr.ib(default=None)
    gluster_storage_dir = attr.ib(default=None)
    enabled_hypervisors = attr.ib(factory=lambda: [constants.HT_FAKE])
    hvparams = _dict_field()
    ipolicy = _dict_field()
    os_hvp = _dict_field()
    beparams = _dict_field()
    osparams = _dict_field()
    osparams_private_cluster = _dict_field()
    nicparams = _dict_field()
    ndparams = _dict_field()
    diskparams = _dict_field()
    candidate_pool_size = attr.ib(default=constants.MASTER_POOL_SIZE_DEFAULT)
    modify_etc_hosts = attr.ib(default=False)
    modify_ssh_setup = attr.ib(default=False)
    maintain_node_health = attr.ib(default=False)
    uid_pool = attr.ib(factory=list)
    default_iallocator = attr.ib(default="")
    default_iallocator_params = _dict_field()
    hidden_os = attr.ib(factory=list)
    blacklisted_os = attr.ib(factory=list)
    primary_ip_family = attr.ib(default=constants.IP4_FAMILY)
    prealloc_wipe_disks = attr.ib(default=False)
    hv_state_static = _dict_field()
    disk_state_static = _dict_field()
    enabled_disk_templates = attr.ib(
        factory=lambda: [constants.DT_FILE, constants.DT_DISKLESS])
    candidate_certs = _dict_field()
    max_running_jobs = attr.ib(default=constants.DEFAULT_MAX_RUNNING_JOBS)
    max_tracked_jobs = attr.ib(default=constants.DEFAULT_MAX_TRACKED_JOBS)
    install_image = attr.ib(default="")
    instance_communication_network = attr.ib(default="")
    zeroing_image = attr.ib(default="")
    compression_tools = attr.ib(factory=lambda: ["gzip", "gzip-fast",
                                                 "gzip-slow"])
    enabled_user_shutdown = attr.ib(default=False)
    data_collectors = _dict_field()
    ssh_key_type = attr.ib(default="rsa")
    ssh_key_bits = attr.ib(default=2048)
    ctime = attr.ib(default=None)
    mtime = attr.ib(default=None)
    uuid = attr.ib(default=None)
    tags = _tags_field()

    def __repr__(self):
        return "<Cluster %s (%s)>" % (self.cluster_name, self.uuid)

    def fill_defaults(self):
        """Give every parameter family its complete default set.

        Called on new clusters and on upgrade, so that values an admin did not
        set are explicit in config.data, as Ganeti writes them.
        """
        for hv, defaults in constants.HVC_DEFAULTS.items():
            self.hvparams[hv] = fill_dict(defaults, self.hvparams.get(hv, {}))
        self.beparams[constants.PP_DEFAULT] = fill_dict(
            constants.BEC_DEFAULTS,
            self.beparams.get(constants.PP_DEFAULT, {}))
        self.nicparams[constants.PP_DEFAULT] = fill_dict(
            constants.NICC_DEFAULTS,
            self.nicparams.get(constants.PP_DEFAULT, {}))
        self.ndparams = fill_dict(constants.NDC_DEFAULTS, self.ndparams)
        for dt, defaults in constants.DISK_DT_DEFAULTS.items():
            self.diskparams[dt] = fill_dict(defaults,
                                            self.diskparams.get(dt, {}))
        self.ipolicy = fill_ipolicy(constants.IPOLICY_DEFAULTS, self.ipolicy)


#: the repair states of a maintenance incident
INCIDENT_NOTED = "noted"
INCIDENT_PENDING = "pending"
INCIDENT_CANCELED = "canceled"
INCIDENT_FAILED = "failed"
INCIDENT_COMPLETED = "completed"
INCIDENT_STATES = frozenset([INCIDENT_NOTED, INCIDENT_PENDING,
                             INCIDENT_CANCELED, INCIDENT_FAILED,
                             INCIDENT_COMPLETED])


@attr.s(eq=False, repr=False)
class Incident(ConfigObject):
    """One problem a node reported through its self-diagnosis, as the
    maintenance daemon tracks it (docs/maintd.rst)."""
    #: the node it was observed on (uuid)
    node = attr.ib(default=None)
    #: the diagnose report as the node gave it (a JSON object)
    original = _dict_field()
    #: the report's status: live-repair, evacuate or evacuate-failover
    action = attr.ib(default=None)
    repair_status = attr.ib(default=INCIDENT_NOTED)
    #: ids of the jobs submitted for it
    jobs = attr.ib(factory=list)
    #: the node tag it gets (maintd:repairready:ID) or got
    tag = attr.ib(default=None)
    serial_no = attr.ib(default=1)
    ctime = attr.ib(default=None)
    mtime = attr.ib(default=None)
    uuid = attr.ib(default=None)

    def __repr__(self):
        return "<Incident %s on %s (%s)>" % (self.uuid, self.node,
                                             self.repair_status)


@attr.s(eq=False, repr=False)
class Maintenance(ConfigObject):
    """The maintenance daemon's switches and state: config.data's
    top-level ``maintenance`` entry (docs/maintd.rst)."""
    #: seconds between the daemon's looks at the cluster
    round_delay = attr.ib(default=constants.MAINTD_DEFAULT_ROUND_DELAY)
    #: the jobs of the round under way
    jobs = attr.ib(factory=list)
    #: nodes the daemon evacuated (uuids)
    evacuated = attr.ib(factory=list)
    #: whether it balances the cluster, and from which score improvement
    balance = attr.ib(default=False)
    balance_threshold = attr.ib(
        default=constants.MAINTD_DEFAULT_BALANCE_THRESHOLD)
    #: whether it does harep's duties (the auto-repair tags)
    harep = attr.ib(default=False)
    #: balancing: disk moves allowed, load data from the nodes' monitoring
    #: daemons used
    balance_disk_moves = attr.ib(default=True)
    balance_load = attr.ib(default=False)
    #: balancing: seconds an instance it moved stays put, moves per hour
    balance_hold_down = attr.ib(
        default=constants.MAINTD_DEFAULT_BALANCE_HOLD_DOWN)
    balance_max_moves = attr.ib(
        default=constants.MAINTD_DEFAULT_BALANCE_MAX_MOVES)
    #: [[instance uuid, unix time]] of its recent balancing moves
    moves = attr.ib(factory=list)
    incidents = attr.ib(factory=dict,
                        metadata=_meta("object_map", Incident))
    serial_no = attr.ib(default=1)
    ctime = attr.ib(default=None)
    mtime = attr.ib(default=None)

    def is_default(self):
        """True while it holds nothing that differs from a fresh one (it
        is then left out of config.data)."""
        fresh = Maintenance().to_dict()
        mine = self.to_dict()
        for key in ("serial_no", "ctime", "mtime"):
            fresh.pop(key, None)
            mine.pop(key, None)
        return mine == fresh


#: The object maps of config.data: top-level key -> class of its values.
CONFIG_MAPS = (
    ("nodes", Node),
    ("nodegroups", NodeGroup),
    ("instances", Instance),
    ("networks", Network),
    ("disks", Disk),
)


def fill_dict(defaults, custom, skip_keys=()):
    """Return ``defaults`` overridden by ``custom``, minus ``skip_keys``."""
    result = copy.deepcopy(defaults)
    result.update(copy.deepcopy(custom or {}))
    for key in skip_keys:
        result.pop(key, None)
    return result


def fill_ipolicy(defaults, custom):
    """Instance policies are filled key by key; ``minmax`` is replaced whole."""
    result = copy.deepcopy(defaults)
    for key, value in (custom or {}).items():
        if key == constants.ISPECS_STD:
            result[key] = fill_dict(result.get(key, {}), value)
        else:
            result[key] = copy.deepcopy(value)
    return result


# --- parameter resolution -------------------------------------------------

def fill_hvparams(cluster, instance):
    """Hypervisor parameters an instance runs with.

    cluster.hvparams[hv] <- cluster.os_hvp[os][hv] <- instance.hvparams.
    Global parameters (HVC_GLOBALS) are cluster-only: they are left out here,
    because an instance can neither set nor see them.
    """
    hv = instance.hypervisor or cluster.default_hypervisor
    result = fill_dict(constants.HVC_DEFAULTS.get(hv, {}),
                       cluster.hvparams.get(hv, {}))
    os_name = instance.os
    if os_name:
        base = os_name.split("+", 1)[0]
        for name in (base, os_name):
            result.update(cluster.os_hvp.get(name, {}).get(hv, {}))
    result.update(instance.hvparams or {})
    for key in constants.HVC_GLOBALS:
        result.pop(key, None)
    return result


def cluster_global_hvparams(cluster, hv):
    """The cluster-level values of the global parameters of ``hv``."""
    full = fill_dict(constants.HVC_DEFAULTS.get(hv, {}),
                     cluster.hvparams.get(hv, {}))
    return {k: v for k, v in full.items() if k in constants.HVC_GLOBALS}


def fill_beparams(cluster, instance):
    result = fill_dict(constants.BEC_DEFAULTS,
                       cluster.beparams.get(constants.PP_DEFAULT, {}))
    result.update(instance.beparams or {})
    return result


def fill_nicparams(cluster, nic, group=None):
    """cluster default <- node group's network settings <- the NIC's own."""
    result = fill_dict(constants.NICC_DEFAULTS,
                       cluster.nicparams.get(constants.PP_DEFAULT, {}))
    if group is not None and nic.network and nic.network in group.networks:
        result.update(group.networks[nic.network] or {})
    result.update(nic.nicparams or {})
    return result


def fill_osparams(cluster, instance):
    result = {}
    if instance.os:
        base = instance.os.split("+", 1)[0]
        for name in (base, instance.os):
            result.update(cluster.osparams.get(name, {}))
    result.update(instance.osparams or {})
    return result


def redact_private_values(params):
    """``{key: "<redacted>"}`` for a dict of private OS parameters: what
    an answer shows of them (only their names)."""
    return {key: REDACTED for key in params or {}}


def redact_config(data):
    """Hide the private OS parameters of a config.data dict (or of one
    instance's dict) in place; returns it.  config.data keeps them, no
    answer made from it shows them."""
    if "osparams_private" in data:
        data["osparams_private"] = redact_private_values(
            data["osparams_private"])
    cluster = data.get("cluster")
    if isinstance(cluster, dict) and cluster.get("osparams_private_cluster"):
        cluster["osparams_private_cluster"] = {
            os_name: redact_private_values(params) for os_name, params
            in cluster["osparams_private_cluster"].items()}
    for inst in (data.get("instances") or {}).values():
        if isinstance(inst, dict):
            redact_config(inst)
    return data


def fill_osparams_private(cluster, instance):
    """The private OS parameters, as :func:`fill_osparams` the public
    ones: cluster (os, then os+variant) <- instance."""
    result = {}
    if instance.os:
        base = instance.os.split("+", 1)[0]
        for name in (base, instance.os):
            result.update(cluster.osparams_private_cluster.get(name) or {})
    result.update(instance.osparams_private or {})
    return result


def fill_ndparams(cluster, group, node):
    """cluster <- node group <- node."""
    result = fill_dict(constants.NDC_DEFAULTS, cluster.ndparams)
    if group is not None:
        result.update(group.ndparams or {})
    if node is not None:
        result.update(node.ndparams or {})
    return result


def fill_diskparams(cluster, group, template):
    """cluster.diskparams[template] <- group.diskparams[template]."""
    result = fill_dict(constants.DISK_DT_DEFAULTS.get(template, {}),
                       cluster.diskparams.get(template, {}))
    if group is not None:
        result.update((group.diskparams or {}).get(template, {}))
    return result


def disk_params(cluster, group, disk):
    """A disk's effective parameters: its template's defaults <- the
    cluster's diskparams <- the group's <- the disk's own ``params``."""
    result = fill_diskparams(cluster, group, disk.dev_type)
    result.update(disk.params or {})
    return result


def annotate_disk_dict(cluster, group, data):
    """Fill the ``params`` of a disk's config dict (and of its children)
    with the effective disk parameters, as the node needs them: a plain
    disk gets ``stripes``; a drbd disk gets the drbd parameters and its
    data and metadata LVs ``stripes`` from ``data-stripes`` and
    ``meta-stripes``.  What the disk's own params say wins.  ``data`` is
    changed in place and returned."""
    dev_type = data.get("dev_type")
    if dev_type in (None, constants.DT_DISKLESS):
        return data
    own = data.get("params") or {}
    filled = fill_diskparams(cluster, group, dev_type)
    filled.update(own)
    data["params"] = filled
    children = data.get("children") or []
    if dev_type == constants.DT_DRBD8 and len(children) == 2:
        for child, key in zip(children, (constants.DRBD_DATA_STRIPES,
                                         constants.DRBD_META_STRIPES)):
            if not isinstance(child, dict):
                continue
            child_params = {constants.LDP_STRIPES: filled.get(key, 1)}
            child_params.update(child.get("params") or {})
            child["params"] = child_params
    return data


def fill_group_ipolicy(cluster, group):
    base = fill_ipolicy(constants.IPOLICY_DEFAULTS, cluster.ipolicy)
    if group is None:
        return base
    return fill_ipolicy(base, group.ipolicy)


def check_instance_hvparams(hvparams):
    """An instance may not set global hypervisor parameters."""
    bad = sorted(set(hvparams or {}) & constants.HVC_GLOBALS)
    if bad:
        raise errors.OpPrereqError(
            "hvparams: %s can only be set at cluster level (global hypervisor"
            " parameter%s)" % (", ".join(bad), "s" if len(bad) > 1 else ""),
            errors.ECODE_INVAL)


def check_nic(nic, filled_nicparams, where="nic"):
    """Check a NIC against its resolved parameters; raise OpPrereqError."""
    mode = filled_nicparams.get(constants.NIC_MODE)
    if mode not in constants.NIC_VALID_MODES:
        raise errors.OpPrereqError(
            "%s: mode '%s' is not one of %s"
            % (where, mode, ", ".join(sorted(constants.NIC_VALID_MODES))),
            errors.ECODE_INVAL)
    if mode == constants.NIC_MODE_ROUTED and not nic.ip:
        raise errors.OpPrereqError(
            "%s: an IP address is required in routed mode" % where,
            errors.ECODE_INVAL)
    if mode == constants.NIC_MODE_BRIDGED and \
            not filled_nicparams.get(constants.NIC_LINK):
        raise errors.OpPrereqError(
            "%s: bridged mode needs a link (the bridge name)" % where,
            errors.ECODE_INVAL)


def disk_template_of(disks):
    """The template of an instance, derived from its disks as in 3.0."""
    kinds = set(d.dev_type for d in disks if d.dev_type)
    if not disks or not kinds:
        return constants.DT_DISKLESS
    if len(kinds) == 1:
        return kinds.pop()
    return "mixed"
