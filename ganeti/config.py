"""The configuration store: config.data in memory and on disk.

The master changes the configuration only through the named methods of
:class:`ConfigStore`.  Each of them checks its input first, applies the
change, verifies that it introduced no inconsistency, bumps serial numbers and
writes the file atomically; if any step fails the in-memory state is rolled
back, so a rejected change changes nothing.

Writing is: temporary file in the same directory, fsync, rename over
config.data, fsync of the directory.  The file being replaced is kept as
``config.data.bak`` first, so a good copy survives even a file that is later
truncated or corrupted by something outside our control; such a file is
refused on load with an error that names the problem and the backup.

Resource accounting (:meth:`ConfigStore.node_usage`) counts forthcoming
instances exactly like real ones, so a forthcoming instance that was placed can
always be turned into a real one.
"""

import contextlib
import copy
import json
import os
import tempfile
import time

import attr
from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti import uidpool
from ganeti.objects import (Cluster, Disk, Instance, Network, Node,
                            NodeGroup, new_uuid)

log = Logger()

BACKUP_SUFFIX = ".bak"

_OBJECT_MAPS = (
    ("nodes", Node),
    ("nodegroups", NodeGroup),
    ("instances", Instance),
    ("networks", Network),
    ("disks", Disk),
)

# Cluster attributes that set_cluster_params may change, with a checker each.
_DICT = "dict"


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path, data, mode=0o600, backup=False):
    """Write ``data`` (bytes) to ``path`` so that readers see old or new.

    With ``backup``, the current file (if any) is kept as ``path + .bak``.
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory,
                               prefix=".%s." % os.path.basename(path))
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if backup and os.path.exists(path):
            bak = path + BACKUP_SUFFIX
            # A hard link is atomic and costs no copy; replace any old backup.
            bak_tmp = bak + ".new"
            if os.path.lexists(bak_tmp):
                os.unlink(bak_tmp)
            os.link(path, bak_tmp)
            os.rename(bak_tmp, bak)
        os.rename(tmp, path)
        tmp = None
        _fsync_dir(directory)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


@attr.s(frozen=True)
class NodeUsage(object):
    """Resources that instances placed on a node take from it."""
    memory = attr.ib(default=0)     # MiB, maxmem of primary instances
    disk = attr.ib(default=0)       # MiB of node-local storage
    vcpus = attr.ib(default=0)      # vcpus of primary instances
    spindles = attr.ib(default=0)   # spindle_use of primary instances
    instances = attr.ib(default=())  # uuids of instances counted
    forthcoming = attr.ib(default=())  # the forthcoming ones among them


@attr.s(frozen=True)
class NodeCapacity(object):
    """What a node offers; None where the node never reported it."""
    memory = attr.ib(default=None)
    disk = attr.ib(default=None)
    vcpus = attr.ib(default=None)
    spindles = attr.ib(default=None)


@attr.s(frozen=True)
class InstanceNeeds(object):
    """Resources one instance takes, per node."""
    memory = attr.ib(default=0)
    vcpus = attr.ib(default=0)
    spindles = attr.ib(default=0)
    disk_per_node = attr.ib(factory=dict)  # node uuid -> MiB


class ConfigStore(object):
    """config.data, loaded, with named mutators that persist every change."""

    def __init__(self, path, cluster, nodes=None, nodegroups=None,
                 instances=None, networks=None, disks=None, filters=None,
                 serial_no=1, ctime=None, mtime=None,
                 version=constants.CONFIG_VERSION, now=time.time):
        self.path = path
        self.cluster = cluster
        self.nodes = nodes or {}
        self.nodegroups = nodegroups or {}
        self.instances = instances or {}
        self.networks = networks or {}
        self.disks = disks or {}
        self.filters = filters or {}
        self.serial_no = serial_no
        self.version = version
        self._now = now
        self.ctime = ctime if ctime is not None else now()
        self.mtime = mtime if mtime is not None else self.ctime
        self.upgraded = False
        # (bytes, verify problems or None) of the last write: the rollback
        # point of the next change.  None until the first write.
        self._persisted = None
        # Called with (store) after every successful write: replication to
        # master candidates, ssconf, confd reload hooks.
        self.write_listeners = []

    # --- serialisation --------------------------------------------------

    def to_dict(self, copy_values=True):
        """config.data as a dict; see ConfigObject.to_dict for copy_values."""
        cv = copy_values

        def objs(mapping):
            return {u: o.to_dict(cv) for u, o in mapping.items()}
        return {
            "version": self.version,
            "cluster": self.cluster.to_dict(cv),
            "nodes": objs(self.nodes),
            "nodegroups": objs(self.nodegroups),
            "instances": objs(self.instances),
            "networks": objs(self.networks),
            "disks": objs(self.disks),
            "filters": copy.deepcopy(self.filters) if cv else self.filters,
            "serial_no": self.serial_no,
            "ctime": self.ctime,
            "mtime": self.mtime,
        }

    def written_bytes(self):
        """What is on disk: the bytes of the last write (replication ships
        them); before the first write, a fresh serialisation."""
        if self._persisted is not None:
            return self._persisted[0]
        return self.dumps()

    def dumps(self):
        """config.data's bytes (serialised at once: no copies needed)."""
        return json.dumps(self.to_dict(copy_values=False),
                          sort_keys=True).encode("utf-8")

    @classmethod
    def from_dict(cls, data, path=None, now=time.time, copy_data=True):
        """Build a store from config.data's JSON, upgrading older layouts.

        The upgrade edits the dict in place; ``copy_data=False`` skips the
        protective copy when the caller's dict is not used afterwards.
        """
        if not isinstance(data, dict):
            raise errors.ConfigurationError(
                "config.data: top level must be a JSON object, got %s"
                % type(data).__name__)
        version = data.get("version")
        if not isinstance(version, int):
            raise errors.ConfigurationError(
                "config.data: 'version' is missing or not an integer")
        if version > constants.CONFIG_VERSION:
            raise errors.ConfigVersionMismatch(
                "config.data: version %s is newer than this software's %s"
                % (version, constants.CONFIG_VERSION))
        if version < constants.CONFIG_VERSION_MIN_UPGRADE:
            raise errors.ConfigVersionMismatch(
                "config.data: version %s is too old to upgrade (oldest is %s)"
                % (version, constants.CONFIG_VERSION_MIN_UPGRADE))
        if "cluster" not in data:
            raise errors.ConfigurationError("config.data: 'cluster' is missing")
        if copy_data:
            data = copy.deepcopy(data)
        upgrader = _Upgrader(data)
        upgrader.run()
        maps = {}
        for key, klass in _OBJECT_MAPS:
            raw = data.get(key) or {}
            if not isinstance(raw, dict):
                raise errors.ConfigurationError(
                    "config.data: '%s' must be an object keyed by UUID" % key)
            maps[key] = {}
            for ukey, value in raw.items():
                obj = klass.from_dict(value)
                maps[key][ukey] = obj
        store = cls(path, Cluster.from_dict(data["cluster"]),
                    filters=data.get("filters") or {},
                    serial_no=data.get("serial_no", 1),
                    ctime=data.get("ctime"), mtime=data.get("mtime"),
                    version=constants.CONFIG_VERSION, now=now, **maps)
        store.upgraded = upgrader.changed
        return store

    @classmethod
    def load(cls, path, now=time.time):
        """Load config.data; refuse a corrupt or truncated file clearly."""
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as err:
            raise errors.ConfigurationError(
                "cannot read configuration %s: %s" % (path, err.strerror))
        hint = cls._backup_hint(path)
        if not raw.strip():
            raise errors.ConfigurationError(
                "configuration %s is empty (truncated?)%s" % (path, hint))
        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as err:
            raise errors.ConfigurationError(
                "configuration %s is not valid JSON (%s); refusing to use it%s"
                % (path, err, hint))
        try:
            return cls.from_dict(data, path=path, now=now, copy_data=False)
        except errors.ConfigurationError as err:
            raise err.__class__("%s (in %s)%s" % (err.args[0], path, hint))

    @staticmethod
    def _backup_hint(path):
        bak = path + BACKUP_SUFFIX
        if os.path.exists(bak):
            return ("; the last good copy is %s (restore it with: cp %s %s)"
                    % (bak, bak, path))
        return ""

    @classmethod
    def create(cls, path, cluster_name, master_name, master_ip,
               enabled_hypervisors=(constants.HT_FAKE,),
               enabled_disk_templates=(constants.DT_FILE,
                                       constants.DT_DISKLESS),
               file_storage_dir=None, shared_file_storage_dir=None,
               uid_pool=(), now=time.time, **cluster_params):
        """A new cluster with its default node group and its master node."""
        t = now()
        cluster = Cluster(
            cluster_name=cluster_name, uuid=new_uuid(), ctime=t, mtime=t,
            enabled_hypervisors=list(enabled_hypervisors),
            default_hypervisor=list(enabled_hypervisors)[0],
            enabled_disk_templates=list(enabled_disk_templates),
            file_storage_dir=file_storage_dir,
            shared_file_storage_dir=shared_file_storage_dir,
            uid_pool=[list(r) for r in uid_pool], **cluster_params)
        cluster.fill_defaults()
        group = NodeGroup(name=constants.INITIAL_NODE_GROUP_NAME,
                          uuid=new_uuid(), ctime=t, mtime=t)
        master = Node(name=master_name, primary_ip=master_ip,
                      secondary_ip=master_ip, group=group.uuid,
                      uuid=new_uuid(), master_candidate=True, ctime=t, mtime=t)
        cluster.master_node = master.uuid
        cluster.master_ip = master_ip
        store = cls(path, cluster, nodes={master.uuid: master},
                    nodegroups={group.uuid: group}, now=now)
        problems = store.verify()
        if problems:
            raise errors.ConfigVerifyError(
                "the new configuration is not valid", problems)
        if path is not None:
            store._write()
        return store

    # --- writing --------------------------------------------------------

    def _write(self, problems=None):
        """Persist; remember the bytes (and their verify problems, when
        known) as the rollback point of the next change."""
        data = self.dumps()
        if self.path is not None:
            atomic_write(self.path, data, backup=True)
        self._persisted = (data, problems)

    @contextlib.contextmanager
    def _change(self, what):
        """Apply a change atomically: verify, persist, or roll back.

        The rollback point is the last write (so a failed change also drops
        anything modified behind the store's back since then); when there
        is none yet, the current state.
        """
        before, problems_before = self._persisted or (None, None)
        if before is None:
            before = self.dumps()
        if problems_before is None:
            problems_before = frozenset(self.verify())
        try:
            yield
            problems = self.verify()
            new_problems = [p for p in problems if p not in problems_before]
            if new_problems:
                raise errors.ConfigVerifyError(
                    "%s would make the configuration inconsistent: %s"
                    % (what, "; ".join(new_problems)), new_problems)
            self.serial_no += 1
            self.mtime = self._now()
            # confd answers carry the cluster's serial and clients keep the
            # highest one, so every change must move it forward.
            self.cluster.serial_no = (self.cluster.serial_no or 0) + 1
            self._write(frozenset(problems))
        except BaseException:
            self._restore(before)
            raise
        for listener in list(self.write_listeners):
            try:
                listener(self)
            except Exception:
                log.failure("configuration write listener failed")

    def _restore(self, data):
        if isinstance(data, bytes):
            data = json.loads(data.decode("utf-8"))
        other = ConfigStore.from_dict(data, path=self.path, now=self._now,
                                      copy_data=False)
        for name in ("cluster", "nodes", "nodegroups", "instances", "networks",
                     "disks", "filters", "serial_no", "ctime", "mtime"):
            setattr(self, name, getattr(other, name))

    def save(self):
        """Write the current state (after load/upgrade) without a change."""
        self.serial_no += 1
        self.mtime = self._now()
        self._write()

    def _touch(self, obj):
        obj.touch(self._now())

    # --- lookups ------------------------------------------------------------

    def _lookup(self, mapping, kind, name_or_uuid):
        if name_or_uuid in mapping:
            return mapping[name_or_uuid]
        if name_or_uuid is not None:
            for obj in mapping.values():
                if obj.name == name_or_uuid:
                    return obj
        raise errors.OpPrereqError("%s '%s' is not known" % (kind, name_or_uuid),
                                   errors.ECODE_NOENT)

    def get_node(self, name_or_uuid):
        return self._lookup(self.nodes, "node", name_or_uuid)

    def get_instance(self, name_or_uuid):
        return self._lookup(self.instances, "instance", name_or_uuid)

    def get_nodegroup(self, name_or_uuid):
        return self._lookup(self.nodegroups, "node group", name_or_uuid)

    def get_network(self, name_or_uuid):
        return self._lookup(self.networks, "network", name_or_uuid)

    def get_disk(self, uuid):
        return self._lookup(self.disks, "disk", uuid)

    def instance_disks(self, instance):
        return [self.disks[u] for u in instance.disks if u in self.disks]

    def node_instances(self, node_uuid, primary_only=False):
        result = []
        for inst in self.instances.values():
            if inst.primary_node == node_uuid or (
                    not primary_only and node_uuid in inst.secondary_nodes):
                result.append(inst)
        return result

    def group_nodes(self, group_uuid):
        return [n for n in self.nodes.values() if n.group == group_uuid]

    @property
    def master_node(self):
        return self.nodes.get(self.cluster.master_node)

    def _check_name_free(self, mapping, kind, name, except_uuid=None):
        for obj in mapping.values():
            if obj.name == name and obj.uuid != except_uuid:
                raise errors.OpPrereqError(
                    "%s name '%s' is already in use" % (kind, name),
                    errors.ECODE_EXISTS)

    # --- verification -------------------------------------------------------

    def verify(self):
        """Return every inconsistency, each naming the object and field."""
        return _Verifier(self).run()

    # --- resource accounting ------------------------------------------------

    def instance_needs(self, instance, beparams=None, disks=None):
        """Resources ``instance`` takes (with optional overrides)."""
        be = objects.fill_beparams(self.cluster, instance)
        if beparams:
            be.update(beparams)
        disk_per_node = {}
        for disk in (disks if disks is not None
                     else self.instance_disks(instance)):
            if disk.dev_type not in constants.DTS_NODE_LOCAL:
                continue
            nodes = disk.nodes or instance.all_nodes
            for node in nodes:
                disk_per_node[node] = (disk_per_node.get(node, 0)
                                       + disk.storage_size())
        return InstanceNeeds(memory=int(be[constants.BE_MAXMEM]),
                             vcpus=int(be[constants.BE_VCPUS]),
                             spindles=int(be[constants.BE_SPINDLE_USE]),
                             disk_per_node=disk_per_node)

    def node_usage(self, node_uuid, exclude_instance=None):
        """Sum of what instances on the node take, forthcoming ones included.

        Every instance counts, whatever its admin state: a stopped instance
        may be started at any time, and a forthcoming one has been promised
        its resources.
        """
        memory = disk = vcpus = spindles = 0
        counted = []
        forthcoming = []
        for inst in self.instances.values():
            if inst.uuid == exclude_instance:
                continue
            needs = self.instance_needs(inst)
            node_disk = needs.disk_per_node.get(node_uuid, 0)
            is_primary = inst.primary_node == node_uuid
            if not is_primary and not node_disk and \
                    node_uuid not in inst.secondary_nodes:
                continue
            if is_primary:
                memory += needs.memory
                vcpus += needs.vcpus
                spindles += needs.spindles
            disk += node_disk
            counted.append(inst.uuid)
            if inst.forthcoming:
                forthcoming.append(inst.uuid)
        return NodeUsage(memory=memory, disk=disk, vcpus=vcpus,
                         spindles=spindles, instances=tuple(counted),
                         forthcoming=tuple(forthcoming))

    def node_capacity(self, node_uuid):
        """Capacity from the node's reported (or admin-overridden) state."""
        node = self.get_node(node_uuid)
        group = self.nodegroups.get(node.group)
        hv = self.cluster.default_hypervisor
        hv_state = dict((node.hv_state or {}).get(hv, {}))
        hv_state.update((node.hv_state_static or {}).get(hv, {}))
        memory = vcpus = disk = None
        if "mem_total" in hv_state:
            memory = (hv_state["mem_total"] - hv_state.get("mem_node", 0)
                      - hv_state.get("mem_hv", 0))
        ipolicy = objects.fill_group_ipolicy(self.cluster, group)
        if "cpu_total" in hv_state:
            vcpus = int(hv_state["cpu_total"]
                        * ipolicy[constants.IPOLICY_VCPU_RATIO])
        disk_state = copy.deepcopy(node.disk_state or {})
        for stype, units in (node.disk_state_static or {}).items():
            for name, values in units.items():
                disk_state.setdefault(stype, {}).setdefault(name, {}).update(
                    values)
        for stype in (constants.ST_LVM_VG, constants.ST_FILE):
            for values in disk_state.get(stype, {}).values():
                if "total" in values:
                    disk = (disk or 0) + values["total"] - values.get(
                        "reserved", 0)
        nd = objects.fill_ndparams(self.cluster, group, node)
        spindles = int(nd[constants.ND_SPINDLE_COUNT]
                       * ipolicy[constants.IPOLICY_SPINDLE_RATIO])
        return NodeCapacity(memory=memory, disk=disk, vcpus=vcpus,
                            spindles=spindles)

    def node_free(self, node_uuid, exclude_instance=None):
        """Capacity minus usage, per resource (None where unknown)."""
        cap = self.node_capacity(node_uuid)
        use = self.node_usage(node_uuid, exclude_instance)
        return {k: (None if getattr(cap, k) is None
                    else getattr(cap, k) - getattr(use, k))
                for k in ("memory", "disk", "vcpus", "spindles")}

    def check_instance_fits(self, instance, disks=None, beparams=None):
        """Raise OpPrereqError(ECODE_NORES) unless ``instance`` fits.

        The instance itself is left out of the usage, so this is the check for
        adding it, for changing it, and for committing a forthcoming one.
        """
        needs = self.instance_needs(instance, beparams=beparams, disks=disks)
        wants = {}
        if instance.primary_node:
            wants[instance.primary_node] = {
                "memory": needs.memory, "vcpus": needs.vcpus,
                "spindles": needs.spindles}
        for node, size in needs.disk_per_node.items():
            wants.setdefault(node, {})["disk"] = size
        for node_uuid, want in sorted(wants.items()):
            if node_uuid not in self.nodes:
                continue  # verify() reports unknown nodes
            free = self.node_free(node_uuid, exclude_instance=instance.uuid)
            for res, amount in sorted(want.items()):
                if amount and free[res] is not None and amount > free[res]:
                    raise errors.OpPrereqError(
                        "not enough %s on node %s for instance %s: need %s,"
                        " free %s (forthcoming instances count as used)"
                        % (res, self.nodes[node_uuid].name,
                           instance.display_name, amount, free[res]),
                        errors.ECODE_NORES)

    # --- mutators: cluster ---------------------------------------------------

    _CLUSTER_DICT_PARAMS = frozenset([
        "hvparams", "beparams", "nicparams", "ndparams", "diskparams",
        "osparams", "os_hvp", "ipolicy", "default_iallocator_params",
        "hv_state_static", "disk_state_static", "data_collectors",
        "candidate_certs", "osparams_private_cluster"])
    _CLUSTER_SIMPLE_PARAMS = frozenset([
        "cluster_name", "enabled_hypervisors", "default_hypervisor",
        "enabled_disk_templates", "candidate_pool_size", "uid_pool",
        "default_iallocator", "maintain_node_health", "mac_prefix",
        "volume_group_name", "reserved_lvs", "drbd_usermode_helper",
        "file_storage_dir", "shared_file_storage_dir", "gluster_storage_dir",
        "master_netdev", "master_netmask", "master_ip", "max_running_jobs",
        "max_tracked_jobs", "prealloc_wipe_disks", "modify_etc_hosts",
        "modify_ssh_setup", "hidden_os", "blacklisted_os",
        "enabled_user_shutdown", "compression_tools", "install_image",
        "zeroing_image", "instance_communication_network",
        "use_external_mip_script", "default_bridge", "master_node",
        "rsahostkeypub", "dsahostkeypub"])

    def set_cluster_params(self, **changes):
        """Change cluster-level parameters; dicts are replaced whole.

        Per-hypervisor dicts (hvparams, diskparams, os_hvp, osparams) are
        merged one level down: ``hvparams={"kvm": {...}}`` replaces only the
        kvm entry.
        """
        for key in changes:
            if key not in self._CLUSTER_DICT_PARAMS | \
                    self._CLUSTER_SIMPLE_PARAMS:
                raise errors.OpPrereqError(
                    "cluster parameter '%s' is unknown or cannot be changed"
                    % key, errors.ECODE_INVAL)
            if key in self._CLUSTER_DICT_PARAMS and \
                    not isinstance(changes[key], dict):
                raise errors.OpPrereqError(
                    "cluster parameter '%s' must be a dictionary" % key,
                    errors.ECODE_INVAL)
        if "uid_pool" in changes:
            try:
                uidpool.check_uid_pool(changes["uid_pool"])
            except errors.ParameterError as err:
                raise errors.OpPrereqError("uid_pool: %s" % err.args[-1],
                                           errors.ECODE_INVAL)
            changes["uid_pool"] = uidpool.normalize_uid_pool(
                changes["uid_pool"])
        if "hvparams" in changes:
            for hv in changes["hvparams"]:
                if hv not in constants.HYPER_TYPES:
                    raise errors.OpPrereqError(
                        "hvparams: '%s' is not a hypervisor" % hv,
                        errors.ECODE_INVAL)
        with self._change("changing cluster parameters"):
            c = self.cluster
            for key, value in changes.items():
                value = copy.deepcopy(value)
                if key in ("hvparams", "diskparams", "os_hvp", "osparams"):
                    merged = getattr(c, key)
                    for sub, subval in value.items():
                        merged[sub] = subval
                elif key == "uid_pool":
                    c.uid_pool = [list(r) for r in value]
                else:
                    setattr(c, key, value)
            c.mtime = self._now()

    # --- mutators: tags ------------------------------------------------------

    def _tag_target(self, kind, name):
        if kind == constants.TAG_CLUSTER:
            return self.cluster
        getter = {constants.TAG_NODE: self.get_node,
                  constants.TAG_INSTANCE: self.get_instance,
                  constants.TAG_NODEGROUP: self.get_nodegroup,
                  constants.TAG_NETWORK: self.get_network}.get(kind)
        if getter is None:
            raise errors.OpPrereqError(
                "kind: '%s' is not a tag kind (one of %s)"
                % (kind, ", ".join(sorted(constants.VALID_TAG_TYPES))),
                errors.ECODE_INVAL)
        return getter(name)

    def add_tags(self, kind, name, tags):
        target = self._tag_target(kind, name)
        for tag in tags:
            objects.validate_tag(tag)
        if len(target.tags | set(tags)) > constants.MAX_TAGS_PER_OBJ:
            raise errors.TagError("too many tags (maximum %d)"
                                  % constants.MAX_TAGS_PER_OBJ)
        with self._change("adding tags"):
            for tag in tags:
                target.add_tag(tag)
            self._touch(target)

    def remove_tags(self, kind, name, tags):
        target = self._tag_target(kind, name)
        missing = sorted(set(tags) - target.tags)
        if missing:
            raise errors.OpPrereqError(
                "tags not found on %s %s: %s"
                % (kind, name or "", ", ".join(missing)), errors.ECODE_NOENT)
        with self._change("removing tags"):
            for tag in tags:
                target.remove_tag(tag)
            self._touch(target)

    # --- mutators: node groups and nodes ----------------------------------

    def add_nodegroup(self, group):
        if not group.name:
            raise errors.OpPrereqError("group_name: a node group needs a name",
                                       errors.ECODE_INVAL)
        self._check_name_free(self.nodegroups, "node group", group.name)
        group.uuid = group.uuid or new_uuid()
        with self._change("adding node group %s" % group.name):
            group.ctime = group.mtime = self._now()
            self.nodegroups[group.uuid] = group
        return group.uuid

    def remove_nodegroup(self, name_or_uuid):
        group = self.get_nodegroup(name_or_uuid)
        members = self.group_nodes(group.uuid)
        if members:
            raise errors.OpPrereqError(
                "node group %s still has nodes: %s"
                % (group.name, ", ".join(sorted(n.name for n in members))),
                errors.ECODE_STATE)
        if len(self.nodegroups) == 1:
            raise errors.OpPrereqError("cannot remove the last node group",
                                       errors.ECODE_STATE)
        with self._change("removing node group %s" % group.name):
            del self.nodegroups[group.uuid]

    def rename_nodegroup(self, name_or_uuid, new_name):
        group = self.get_nodegroup(name_or_uuid)
        self._check_name_free(self.nodegroups, "node group", new_name,
                              except_uuid=group.uuid)
        with self._change("renaming node group %s" % group.name):
            group.name = new_name
            self._touch(group)

    def set_nodegroup_params(self, name_or_uuid, **changes):
        group = self.get_nodegroup(name_or_uuid)
        allowed = {"ndparams", "diskparams", "ipolicy", "alloc_policy",
                   "hv_state_static", "disk_state_static", "networks"}
        for key in changes:
            if key not in allowed:
                raise errors.OpPrereqError(
                    "node group parameter '%s' is unknown" % key,
                    errors.ECODE_INVAL)
        if "alloc_policy" in changes and \
                changes["alloc_policy"] not in constants.VALID_ALLOC_POLICIES:
            raise errors.OpPrereqError(
                "alloc_policy: '%s' is not one of %s"
                % (changes["alloc_policy"],
                   ", ".join(constants.VALID_ALLOC_POLICIES)),
                errors.ECODE_INVAL)
        with self._change("changing node group %s" % group.name):
            for key, value in changes.items():
                setattr(group, key, copy.deepcopy(value))
            self._touch(group)

    def add_node(self, node):
        if not node.name:
            raise errors.OpPrereqError("node_name: a node needs a name",
                                       errors.ECODE_INVAL)
        self._check_name_free(self.nodes, "node", node.name)
        if node.group is None:
            node.group = sorted(self.nodegroups.values(),
                                key=lambda g: g.ctime or 0)[0].uuid
        else:
            node.group = self.get_nodegroup(node.group).uuid
        node.uuid = node.uuid or new_uuid()
        with self._change("adding node %s" % node.name):
            node.ctime = node.mtime = self._now()
            self.nodes[node.uuid] = node
            self.cluster.mtime = self._now()
        return node.uuid

    def remove_node(self, name_or_uuid):
        node = self.get_node(name_or_uuid)
        if node.uuid == self.cluster.master_node:
            raise errors.OpPrereqError(
                "node %s is the master node; it cannot be removed" % node.name,
                errors.ECODE_INVAL)
        users = self.node_instances(node.uuid)
        if users:
            raise errors.OpPrereqError(
                "node %s still has instances: %s"
                % (node.name, ", ".join(sorted(i.display_name
                                               for i in users))),
                errors.ECODE_STATE)
        with self._change("removing node %s" % node.name):
            del self.nodes[node.uuid]
            self.cluster.mtime = self._now()

    def rename_node(self, name_or_uuid, new_name):
        node = self.get_node(name_or_uuid)
        self._check_name_free(self.nodes, "node", new_name,
                              except_uuid=node.uuid)
        with self._change("renaming node %s" % node.name):
            node.name = new_name
            self._touch(node)

    _NODE_FLAGS = frozenset(["offline", "drained", "master_candidate",
                             "master_capable", "vm_capable", "powered",
                             "primary_ip", "secondary_ip", "ndparams",
                             "hv_state", "hv_state_static", "disk_state",
                             "disk_state_static"])

    def set_node_params(self, name_or_uuid, **changes):
        node = self.get_node(name_or_uuid)
        for key, value in changes.items():
            if key not in self._NODE_FLAGS:
                raise errors.OpPrereqError("node parameter '%s' is unknown"
                                           % key, errors.ECODE_INVAL)
        with self._change("changing node %s" % node.name):
            for key, value in changes.items():
                setattr(node, key, copy.deepcopy(value))
            self._touch(node)

    def assign_node_to_group(self, node_name_or_uuid, group_name_or_uuid):
        node = self.get_node(node_name_or_uuid)
        group = self.get_nodegroup(group_name_or_uuid)
        with self._change("assigning node %s to group %s"
                          % (node.name, group.name)):
            node.group = group.uuid
            self._touch(node)

    # --- mutators: networks --------------------------------------------------

    def add_network(self, network):
        if not network.name:
            raise errors.OpPrereqError("network_name: a network needs a name",
                                       errors.ECODE_INVAL)
        self._check_name_free(self.networks, "network", network.name)
        network.uuid = network.uuid or new_uuid()
        with self._change("adding network %s" % network.name):
            network.ctime = network.mtime = self._now()
            self.networks[network.uuid] = network
        return network.uuid

    def remove_network(self, name_or_uuid):
        net = self.get_network(name_or_uuid)
        for inst in self.instances.values():
            if any(nic.network == net.uuid for nic in inst.nics):
                raise errors.OpPrereqError(
                    "network %s is used by instance %s"
                    % (net.name, inst.display_name), errors.ECODE_STATE)
        with self._change("removing network %s" % net.name):
            del self.networks[net.uuid]
            for group in self.nodegroups.values():
                group.networks.pop(net.uuid, None)

    # --- mutators: instances -------------------------------------------------

    def generate_mac(self):
        """A MAC with the cluster prefix that no NIC uses yet."""
        import random
        used = {nic.mac for inst in self.instances.values()
                for nic in inst.nics}
        prefix = self.cluster.mac_prefix or constants.DEFAULT_MAC_PREFIX
        for _ in range(1000):
            mac = "%s:%02x:%02x:%02x" % (prefix, random.randrange(256),
                                         random.randrange(256),
                                         random.randrange(256))
            if mac not in used:
                return mac
        raise errors.ReservationError("no free MAC address with prefix %s"
                                      % prefix)

    def allocate_port(self):
        """A TCP/UDP port for an instance (VNC, DRBD), recorded in the pool.

        It changes the cluster without a write of its own (the next change
        persists it), so the rollback point is taken afresh then.
        """
        self._persisted = None
        c = self.cluster
        if c.tcpudp_port_pool:
            port = c.tcpudp_port_pool.pop(0)
        else:
            port = c.highest_used_port + 1
            if port > constants.LAST_DRBD_PORT:
                raise errors.ReservationError(
                    "no free port between %d and %d"
                    % (constants.FIRST_DRBD_PORT, constants.LAST_DRBD_PORT))
            c.highest_used_port = port
        return port

    def _check_instance_input(self, instance, disks):
        if instance.forthcoming:
            if not instance.uuid:
                raise errors.OpPrereqError(
                    "uuid: a forthcoming instance needs a uuid",
                    errors.ECODE_INVAL)
        else:
            for field in ("name", "primary_node", "os", "hypervisor"):
                if not getattr(instance, field):
                    raise errors.OpPrereqError(
                        "%s: required for instance %s"
                        % (field, instance.display_name), errors.ECODE_INVAL)
        if instance.name:
            self._check_name_free(self.instances, "instance", instance.name,
                                  except_uuid=instance.uuid)
        objects.check_instance_hvparams(instance.hvparams)
        for disk in disks:
            if disk.uuid in self.disks and \
                    disk.uuid not in instance.disks:
                raise errors.OpPrereqError("disk %s already exists"
                                           % disk.uuid, errors.ECODE_EXISTS)

    def add_instance(self, instance, disks=(), check_resources=True):
        """Add an instance (real or forthcoming) with its disks.

        Forthcoming instances and disks need only a UUID; whatever resources
        they do declare are reserved from now on.
        """
        instance.uuid = instance.uuid or new_uuid()
        if instance.uuid in self.instances:
            raise errors.OpPrereqError("instance %s already exists"
                                       % instance.uuid, errors.ECODE_EXISTS)
        disks = list(disks)
        for disk in disks:
            disk.uuid = disk.uuid or new_uuid()
            if instance.forthcoming:
                disk.forthcoming = True
        instance.disks = [d.uuid for d in disks]
        if instance.primary_node:
            instance.primary_node = self.get_node(instance.primary_node).uuid
        instance.secondary_nodes = [self.get_node(n).uuid
                                    for n in instance.secondary_nodes]
        for disk in disks:
            if not disk.nodes and disk.dev_type in constants.DTS_NODE_LOCAL:
                disk.nodes = list(instance.all_nodes)
            if disk.mode is None and not disk.forthcoming:
                disk.mode = constants.DISK_RDWR
        for nic in instance.nics:
            nic.uuid = nic.uuid or new_uuid()
        self._check_instance_input(instance, disks)
        if check_resources:
            self.check_instance_fits(instance, disks=disks)
        with self._change("adding instance %s" % instance.display_name):
            t = self._now()
            instance.ctime = instance.mtime = t
            for disk in disks:
                disk.ctime = disk.mtime = t
                self.disks[disk.uuid] = disk
            self.instances[instance.uuid] = instance
            self.cluster.mtime = self._now()
        return instance.uuid

    def remove_instance(self, name_or_uuid):
        inst = self.get_instance(name_or_uuid)
        with self._change("removing instance %s" % inst.display_name):
            for disk_uuid in inst.disks:
                self.disks.pop(disk_uuid, None)
            if inst.network_port:
                self.cluster.tcpudp_port_pool.append(inst.network_port)
            del self.instances[inst.uuid]
            self.cluster.mtime = self._now()

    def rename_instance(self, name_or_uuid, new_name):
        inst = self.get_instance(name_or_uuid)
        if not new_name:
            raise errors.OpPrereqError("new_name: must not be empty",
                                       errors.ECODE_INVAL)
        self._check_name_free(self.instances, "instance", new_name,
                              except_uuid=inst.uuid)
        with self._change("renaming instance %s" % inst.display_name):
            inst.name = new_name
            self._touch(inst)

    def set_instance_admin_state(self, name_or_uuid, state,
                                 source=constants.ADMIN_SOURCE):
        inst = self.get_instance(name_or_uuid)
        if state not in constants.ADMINST_ALL:
            raise errors.OpPrereqError(
                "admin_state: '%s' is not one of %s"
                % (state, ", ".join(sorted(constants.ADMINST_ALL))),
                errors.ECODE_INVAL)
        if source not in constants.ADMIN_STATE_SOURCES:
            raise errors.OpPrereqError(
                "admin_state_source: '%s' is not one of %s"
                % (source, ", ".join(sorted(constants.ADMIN_STATE_SOURCES))),
                errors.ECODE_INVAL)
        if inst.forthcoming:
            raise errors.OpPrereqError(
                "instance %s is forthcoming; create it first"
                % inst.display_name, errors.ECODE_STATE)
        with self._change("setting instance %s %s"
                          % (inst.display_name, state)):
            inst.admin_state = state
            inst.admin_state_source = source
            self._touch(inst)

    def set_instance_disks_active(self, name_or_uuid, active):
        inst = self.get_instance(name_or_uuid)
        with self._change("marking disks of %s %s"
                          % (inst.display_name,
                             "active" if active else "inactive")):
            inst.disks_active = bool(active)
            self._touch(inst)

    _INSTANCE_MODIFIABLE = frozenset([
        "hvparams", "beparams", "osparams", "osparams_private", "os",
        "hypervisor", "nics", "primary_node", "secondary_nodes",
        "network_port"])

    def modify_instance(self, name_or_uuid, check_resources=True, **changes):
        """Change instance fields; resource checks see the new values."""
        inst = self.get_instance(name_or_uuid)
        for key in changes:
            if key not in self._INSTANCE_MODIFIABLE:
                raise errors.OpPrereqError(
                    "instance field '%s' cannot be modified" % key,
                    errors.ECODE_INVAL)
        if "hvparams" in changes:
            objects.check_instance_hvparams(changes["hvparams"])
        candidate = inst.copy()
        for key, value in changes.items():
            setattr(candidate, key, copy.deepcopy(value))
        if candidate.primary_node:
            candidate.primary_node = self.get_node(candidate.primary_node).uuid
        candidate.secondary_nodes = [self.get_node(n).uuid
                                     for n in candidate.secondary_nodes]
        if check_resources:
            disks = []
            for d in self.instance_disks(inst):
                d = d.copy()
                if d.dev_type in constants.DTS_NODE_LOCAL and (
                        "primary_node" in changes
                        or "secondary_nodes" in changes):
                    d.nodes = list(candidate.all_nodes)
                disks.append(d)
            self.check_instance_fits(candidate, disks=disks)
        with self._change("modifying instance %s" % inst.display_name):
            old_nodes = list(inst.all_nodes)
            for key in changes:
                setattr(inst, key, getattr(candidate, key))
            if inst.all_nodes != old_nodes:
                for d in self.instance_disks(inst):
                    if d.dev_type in constants.DTS_NODE_LOCAL:
                        d.nodes = list(inst.all_nodes)
                        self._touch(d)
            self._touch(inst)

    def add_instance_disk(self, name_or_uuid, disk, index=None,
                          check_resources=True):
        inst = self.get_instance(name_or_uuid)
        disk.uuid = disk.uuid or new_uuid()
        if disk.uuid in self.disks:
            raise errors.OpPrereqError("disk %s already exists" % disk.uuid,
                                       errors.ECODE_EXISTS)
        if inst.forthcoming:
            disk.forthcoming = True
        if not disk.nodes and disk.dev_type in constants.DTS_NODE_LOCAL:
            disk.nodes = list(inst.all_nodes)
        if check_resources:
            self.check_instance_fits(inst,
                                     disks=self.instance_disks(inst) + [disk])
        with self._change("adding a disk to %s" % inst.display_name):
            disk.ctime = disk.mtime = self._now()
            self.disks[disk.uuid] = disk
            if index is None:
                inst.disks.append(disk.uuid)
            else:
                inst.disks.insert(index, disk.uuid)
            self._touch(inst)
        return disk.uuid

    def remove_instance_disk(self, name_or_uuid, disk_uuid):
        inst = self.get_instance(name_or_uuid)
        if disk_uuid not in inst.disks:
            raise errors.OpPrereqError("disk %s does not belong to %s"
                                       % (disk_uuid, inst.display_name),
                                       errors.ECODE_NOENT)
        with self._change("removing a disk from %s" % inst.display_name):
            inst.disks.remove(disk_uuid)
            self.disks.pop(disk_uuid, None)
            self._touch(inst)

    _DISK_MODIFIABLE = frozenset(["size", "mode", "name", "params",
                                  "spindles", "logical_id", "nodes",
                                  "children", "iv_name", "dev_type"])

    def modify_disk(self, disk_uuid, check_resources=True, **changes):
        disk = self.get_disk(disk_uuid)
        for key in changes:
            if key not in self._DISK_MODIFIABLE:
                raise errors.OpPrereqError("disk field '%s' cannot be modified"
                                           % key, errors.ECODE_INVAL)
        if "size" in changes and (not isinstance(changes["size"], int)
                                  or changes["size"] < 0):
            raise errors.OpPrereqError(
                "size: must be a non-negative number of MiB, got %r"
                % (changes["size"],), errors.ECODE_INVAL)
        owner = self._disk_owner(disk_uuid)
        if check_resources and owner is not None:
            candidate = disk.copy()
            for key, value in changes.items():
                setattr(candidate, key, copy.deepcopy(value))
            others = [d for d in self.instance_disks(owner)
                      if d.uuid != disk_uuid]
            self.check_instance_fits(owner, disks=others + [candidate])
        with self._change("modifying disk %s" % disk_uuid):
            for key, value in changes.items():
                setattr(disk, key, copy.deepcopy(value))
            self._touch(disk)
            if owner is not None:
                self._touch(owner)

    def _disk_owner(self, disk_uuid):
        for inst in self.instances.values():
            if disk_uuid in inst.disks:
                return inst
        return None

    def commit_forthcoming(self, name_or_uuid):
        """Turn a forthcoming instance and its disks into real ones.

        Its resources were reserved when it was placed, so no capacity check
        can fail here; only missing mandatory fields can stop it.
        """
        inst = self.get_instance(name_or_uuid)
        if not inst.forthcoming:
            raise errors.OpPrereqError("instance %s is not forthcoming"
                                       % inst.display_name, errors.ECODE_STATE)
        missing = [f for f in ("name", "primary_node", "os", "hypervisor")
                   if not getattr(inst, f)]
        for disk in self.instance_disks(inst):
            if disk.size is None and disk.dev_type != constants.DT_DISKLESS:
                missing.append("disks/%s/size" % disk.uuid)
            if not disk.dev_type:
                missing.append("disks/%s/dev_type" % disk.uuid)
        if missing:
            raise errors.OpPrereqError(
                "forthcoming instance %s lacks mandatory fields: %s"
                % (inst.display_name, ", ".join(missing)), errors.ECODE_INVAL)
        with self._change("creating forthcoming instance %s"
                          % inst.display_name):
            inst.forthcoming = False
            for disk in self.instance_disks(inst):
                disk.forthcoming = False
                if disk.mode is None:
                    disk.mode = constants.DISK_RDWR
                self._touch(disk)
            self._touch(inst)


class _Verifier(object):
    """Collect every inconsistency of a ConfigStore."""

    def __init__(self, store):
        self.s = store
        self.problems = []

    def bad(self, what, field, reason):
        self.problems.append("%s %s: %s" % (what, field, reason))

    def run(self):
        self._check_maps()
        self._check_cluster()
        self._check_nodegroups()
        self._check_nodes()
        self._check_instances()
        self._check_disks()
        self._check_networks()
        return self.problems

    def _check_maps(self):
        s = self.s
        for key, _ in _OBJECT_MAPS:
            names = {}
            for ukey, obj in getattr(s, key).items():
                what = "%s %s" % (key[:-1], ukey)
                if not obj.uuid:
                    self.bad(what, "uuid", "missing")
                elif obj.uuid != ukey:
                    self.bad(what, "uuid", "object's uuid %s differs from its"
                             " key" % obj.uuid)
                name = getattr(obj, "name", None)
                if name and key != "disks":
                    if name in names:
                        self.bad(what, "name", "'%s' is also used by %s"
                                 % (name, names[name]))
                    names[name] = ukey
                for tag in getattr(obj, "tags", ()):
                    try:
                        objects.validate_tag(tag)
                    except errors.TagError as err:
                        self.bad(what, "tags", str(err))

    def _check_cluster(self):
        c = self.s.cluster
        what = "cluster"
        if not c.cluster_name:
            self.bad(what, "cluster_name", "missing")
        if not c.uuid:
            self.bad(what, "uuid", "missing")
        if c.master_node not in self.s.nodes:
            self.bad(what, "master_node", "node %s is not in the configuration"
                     % c.master_node)
        bad_hv = sorted(set(c.enabled_hypervisors) - constants.HYPER_TYPES)
        if bad_hv:
            self.bad(what, "enabled_hypervisors", "unknown hypervisors %s"
                     % ", ".join(bad_hv))
        if not c.enabled_hypervisors:
            self.bad(what, "enabled_hypervisors", "empty")
        if c.default_hypervisor and \
                c.default_hypervisor not in c.enabled_hypervisors:
            self.bad(what, "default_hypervisor", "'%s' is not enabled"
                     % c.default_hypervisor)
        bad_dt = sorted(set(c.enabled_disk_templates)
                        - constants.DISK_TEMPLATES)
        if bad_dt:
            self.bad(what, "enabled_disk_templates", "unknown templates %s"
                     % ", ".join(bad_dt))
        if not isinstance(c.candidate_pool_size, int) or \
                c.candidate_pool_size < 1:
            self.bad(what, "candidate_pool_size", "must be a positive integer")
        for rng in c.uid_pool or []:
            if (not isinstance(rng, (list, tuple)) or len(rng) != 2
                    or not all(isinstance(x, int) for x in rng)
                    or rng[0] > rng[1] or rng[0] < constants.UIDPOOL_UID_MIN
                    or rng[1] > constants.UIDPOOL_UID_MAX):
                self.bad(what, "uid_pool", "invalid range %r" % (rng,))
        for hv, params in (c.hvparams or {}).items():
            if not isinstance(params, dict):
                self.bad(what, "hvparams/%s" % hv, "must be a dictionary")
        for key in (c.beparams or {}).get(constants.PP_DEFAULT, {}):
            if key not in constants.BEC_DEFAULTS:
                self.bad(what, "beparams/default", "unknown parameter '%s'"
                         % key)
        nic_mode = (c.nicparams or {}).get(constants.PP_DEFAULT, {}).get(
            constants.NIC_MODE)
        if nic_mode is not None and nic_mode not in constants.NIC_VALID_MODES:
            self.bad(what, "nicparams/default/mode", "'%s' is not a valid mode"
                     % nic_mode)
        if not (constants.FIRST_DRBD_PORT - 1 <= c.highest_used_port
                <= constants.LAST_DRBD_PORT):
            self.bad(what, "highest_used_port", "%s is outside %d-%d"
                     % (c.highest_used_port, constants.FIRST_DRBD_PORT,
                        constants.LAST_DRBD_PORT))

    def _check_nodegroups(self):
        if not self.s.nodegroups:
            self.bad("cluster", "nodegroups", "there is no node group")
        for g in self.s.nodegroups.values():
            what = "node group %s" % (g.name or g.uuid)
            if not g.name:
                self.bad(what, "name", "missing")
            if g.alloc_policy not in constants.VALID_ALLOC_POLICIES:
                self.bad(what, "alloc_policy", "'%s' is not one of %s"
                         % (g.alloc_policy,
                            ", ".join(constants.VALID_ALLOC_POLICIES)))
            for net in g.networks or {}:
                if net not in self.s.networks:
                    self.bad(what, "networks", "unknown network %s" % net)

    def _check_nodes(self):
        ips = {}
        for n in self.s.nodes.values():
            what = "node %s" % (n.name or n.uuid)
            if not n.name:
                self.bad(what, "name", "missing")
            if n.group not in self.s.nodegroups:
                self.bad(what, "group", "node group %s does not exist"
                         % n.group)
            if not n.primary_ip:
                self.bad(what, "primary_ip", "missing")
            elif n.primary_ip in ips:
                self.bad(what, "primary_ip", "%s is also used by node %s"
                         % (n.primary_ip, ips[n.primary_ip]))
            else:
                ips[n.primary_ip] = n.name
            if n.master_candidate and n.offline:
                self.bad(what, "master_candidate",
                         "an offline node cannot be a master candidate")
            if n.drained and n.offline:
                self.bad(what, "drained", "a node cannot be both drained and"
                         " offline")

    def _check_instances(self):
        s = self.s
        macs = {}
        ports = {}
        disk_owner = {}
        for inst in s.instances.values():
            what = "instance %s" % inst.display_name
            real = not inst.forthcoming
            for field in ("name", "primary_node", "os", "hypervisor"):
                if real and not getattr(inst, field):
                    self.bad(what, field, "missing")
            if inst.primary_node and inst.primary_node not in s.nodes:
                self.bad(what, "primary_node", "node %s does not exist"
                         % inst.primary_node)
            for sec in inst.secondary_nodes or []:
                if sec not in s.nodes:
                    self.bad(what, "secondary_nodes", "node %s does not exist"
                             % sec)
                if sec == inst.primary_node:
                    self.bad(what, "secondary_nodes", "the primary node is"
                             " also listed as secondary")
            if inst.hypervisor and \
                    inst.hypervisor not in s.cluster.enabled_hypervisors:
                self.bad(what, "hypervisor", "'%s' is not enabled in the"
                         " cluster" % inst.hypervisor)
            if inst.admin_state not in constants.ADMINST_ALL:
                self.bad(what, "admin_state", "'%s' is not one of %s"
                         % (inst.admin_state,
                            ", ".join(sorted(constants.ADMINST_ALL))))
            if inst.admin_state_source not in constants.ADMIN_STATE_SOURCES:
                self.bad(what, "admin_state_source", "'%s' is not one of %s"
                         % (inst.admin_state_source,
                            ", ".join(sorted(constants.ADMIN_STATE_SOURCES))))
            if inst.forthcoming and inst.admin_state == constants.ADMINST_UP:
                self.bad(what, "admin_state", "a forthcoming instance cannot"
                         " be up")
            glob = sorted(set(inst.hvparams or {}) & constants.HVC_GLOBALS)
            if glob:
                self.bad(what, "hvparams", "global parameters %s can only be"
                         " set at cluster level" % ", ".join(glob))
            for key in inst.beparams or {}:
                if key not in constants.BEC_DEFAULTS:
                    self.bad(what, "beparams", "unknown parameter '%s'" % key)
            if inst.network_port is not None:
                if inst.network_port in ports:
                    self.bad(what, "network_port", "%s is also used by %s"
                             % (inst.network_port, ports[inst.network_port]))
                ports[inst.network_port] = inst.display_name
            group = None
            if inst.primary_node in s.nodes:
                group = s.nodegroups.get(s.nodes[inst.primary_node].group)
            for idx, nic in enumerate(inst.nics):
                nwhat = "nic/%d" % idx
                if nic.mac:
                    if nic.mac in macs:
                        self.bad(what, nwhat + "/mac", "%s is also used by %s"
                                 % (nic.mac, macs[nic.mac]))
                    macs[nic.mac] = inst.display_name
                elif real:
                    self.bad(what, nwhat + "/mac", "missing")
                if nic.network and nic.network not in s.networks:
                    self.bad(what, nwhat + "/network", "network %s does not"
                             " exist" % nic.network)
                filled = objects.fill_nicparams(s.cluster, nic, group)
                try:
                    objects.check_nic(nic, filled, where=nwhat)
                except errors.OpPrereqError as err:
                    self.bad(what, nwhat, err.args[0].split(": ", 1)[-1])
            for idx, disk_uuid in enumerate(inst.disks):
                if disk_uuid not in s.disks:
                    self.bad(what, "disks/%d" % idx, "disk %s does not exist"
                             % disk_uuid)
                    continue
                if disk_uuid in disk_owner:
                    self.bad(what, "disks/%d" % idx, "disk %s also belongs to"
                             " %s" % (disk_uuid, disk_owner[disk_uuid]))
                disk_owner[disk_uuid] = inst.display_name
                disk = s.disks[disk_uuid]
                if real and disk.forthcoming:
                    self.bad(what, "disks/%d" % idx, "a real instance has the"
                             " forthcoming disk %s" % disk_uuid)
                for node in disk.nodes or []:
                    if inst.all_nodes and node not in inst.all_nodes:
                        self.bad(what, "disks/%d/nodes" % idx,
                                 "node %s is not a node of the instance"
                                 % node)
        self._disk_owner = disk_owner

    def _check_disks(self):
        for disk in self.s.disks.values():
            what = "disk %s" % disk.uuid
            if disk.uuid not in self._disk_owner:
                self.bad(what, "instance", "belongs to no instance")
            real = not disk.forthcoming
            if disk.dev_type is not None and \
                    disk.dev_type not in constants.DISK_TEMPLATES:
                self.bad(what, "dev_type", "'%s' is not a disk template"
                         % disk.dev_type)
            elif real and disk.dev_type is None:
                self.bad(what, "dev_type", "missing")
            if disk.size is not None:
                if not isinstance(disk.size, int) or disk.size < 0:
                    self.bad(what, "size", "must be a non-negative integer"
                             " (MiB), got %r" % (disk.size,))
            elif real and disk.dev_type != constants.DT_DISKLESS:
                self.bad(what, "size", "missing")
            if disk.mode is not None and \
                    disk.mode not in constants.DISK_ACCESS_SET:
                self.bad(what, "mode", "'%s' is not ro or rw" % disk.mode)
            for node in disk.nodes or []:
                if node not in self.s.nodes:
                    self.bad(what, "nodes", "node %s does not exist" % node)

    def _check_networks(self):
        for net in self.s.networks.values():
            if not net.network:
                self.bad("network %s" % (net.name or net.uuid), "network",
                         "missing (an IPv4 range is required)")


_OLD_DEV_TYPES = {"lvm": constants.DT_PLAIN, "drbd8": constants.DT_DRBD8,
                  "file": constants.DT_FILE, "blockdev": constants.DT_BLOCK,
                  "rbd": constants.DT_RBD, "ext": constants.DT_EXT}


class _Upgrader(object):
    """Bring an older config.data dict to 3.0's layout, in place.

    Handles: objects without UUIDs (seed 003 "persistent UUIDs"), maps keyed
    by name, nodes referred to by name, disks embedded in instances (2.x),
    ``admin_up`` booleans, missing ``admin_state_source``, global hypervisor
    parameters set on instances, nodes without a group, and parameter
    families missing from the cluster.
    """

    def __init__(self, data):
        self.data = data
        self.changed = False

    def run(self):
        d = self.data
        if d.get("version") != constants.CONFIG_VERSION:
            self.changed = True
        for key, _ in _OBJECT_MAPS:
            d.setdefault(key, {})
        d.setdefault("filters", {})
        cluster = d["cluster"]
        if not isinstance(cluster, dict):
            raise errors.ConfigurationError("config.data: 'cluster' must be"
                                            " an object")
        if not cluster.get("uuid"):
            cluster["uuid"] = new_uuid()
            self.changed = True
        for key in ("nodegroups", "nodes", "networks", "instances", "disks"):
            self._rekey(key)
        self._groups()
        node_by_name = {n.get("name"): u for u, n in d["nodes"].items()}
        if cluster.get("master_node") in node_by_name:
            cluster["master_node"] = node_by_name[cluster["master_node"]]
            self.changed = True
        self._memory_param(cluster.get("beparams", {}).get(
            constants.PP_DEFAULT))
        for inst in d["instances"].values():
            self._instance(inst, node_by_name)
            self._memory_param(inst.get("beparams"))
        for disk in d["disks"].values():
            self._disk(disk, node_by_name)
        # Parameter families a 2.x file may lack.
        cobj = Cluster.from_dict(cluster)
        before = json.dumps(cluster, sort_keys=True)
        cobj.fill_defaults()
        new = cobj.to_dict()
        if json.dumps(new, sort_keys=True) != before:
            d["cluster"] = new
            self.changed = True

    def _memory_param(self, beparams):
        """Ganeti < 2.6 had one "memory"; it became maxmem and minmem."""
        if beparams and constants.BE_MEMORY in beparams:
            mem = beparams.pop(constants.BE_MEMORY)
            beparams.setdefault(constants.BE_MAXMEM, mem)
            beparams.setdefault(constants.BE_MINMEM, mem)
            self.changed = True

    def _rekey(self, key):
        """Re-key a map by UUID, giving objects without one a new UUID."""
        old = self.data[key]
        if not isinstance(old, dict):
            raise errors.ConfigurationError(
                "config.data: '%s' must be an object, got %s"
                % (key, type(old).__name__))
        new = {}
        for k, obj in old.items():
            if not isinstance(obj, dict):
                raise errors.ConfigurationError(
                    "config.data: %s/%s must be an object" % (key, k))
            if not obj.get("uuid"):
                obj["uuid"] = k if constants.UUID_RE.match(k) else new_uuid()
                self.changed = True
            if obj["uuid"] != k:
                self.changed = True
            new[obj["uuid"]] = obj
        self.data[key] = new

    def _groups(self):
        d = self.data
        groups = d["nodegroups"]
        by_name = {g.get("name"): u for u, g in groups.items()}
        for node in d["nodes"].values():
            grp = node.get("group")
            if grp in groups:
                continue
            if grp in by_name:
                node["group"] = by_name[grp]
            else:
                if not groups:
                    u = new_uuid()
                    groups[u] = {"name": constants.INITIAL_NODE_GROUP_NAME,
                                 "uuid": u, "serial_no": 1,
                                 "alloc_policy":
                                     constants.ALLOC_POLICY_PREFERRED}
                    by_name[constants.INITIAL_NODE_GROUP_NAME] = u
                node["group"] = sorted(groups)[0] if grp is None or \
                    grp not in by_name else by_name[grp]
            self.changed = True
        for g in groups.values():
            if "members" in g:
                del g["members"]  # recomputed, never stored

    def _node_ref(self, value, node_by_name):
        if value in node_by_name and value not in self.data["nodes"]:
            self.changed = True
            return node_by_name[value]
        return value

    def _instance(self, inst, node_by_name):
        inst["primary_node"] = self._node_ref(inst.get("primary_node"),
                                              node_by_name)
        inst["secondary_nodes"] = [self._node_ref(n, node_by_name)
                                   for n in inst.get("secondary_nodes") or []]
        if "admin_up" in inst:
            up = inst.pop("admin_up")
            inst.setdefault("admin_state", constants.ADMINST_UP if up
                            else constants.ADMINST_DOWN)
            self.changed = True
        if inst.get("admin_state") is None and not inst.get("forthcoming"):
            inst["admin_state"] = constants.ADMINST_DOWN
            self.changed = True
        if "admin_state_source" not in inst:
            inst["admin_state_source"] = constants.ADMIN_SOURCE
            self.changed = True
        hvp = inst.get("hvparams") or {}
        for key in list(hvp):
            if key in constants.HVC_GLOBALS:
                del hvp[key]
                self.changed = True
        template = inst.pop("disk_template", None)
        nodes = [inst["primary_node"]] if inst.get("primary_node") else []
        nodes += [n for n in inst["secondary_nodes"] if n not in nodes]
        disk_uuids = []
        for disk in inst.get("disks") or []:
            if isinstance(disk, dict):  # 2.x: disks embedded in the instance
                self.changed = True
                disk.setdefault("uuid", new_uuid())
                if not disk.get("dev_type") and template:
                    disk["dev_type"] = template
                if not disk.get("nodes") and \
                        _OLD_DEV_TYPES.get(disk.get("dev_type"),
                                           disk.get("dev_type")) \
                        in constants.DTS_NODE_LOCAL:
                    disk["nodes"] = list(nodes)
                self.data["disks"][disk["uuid"]] = disk
                disk_uuids.append(disk["uuid"])
            else:
                disk_uuids.append(disk)
        inst["disks"] = disk_uuids
        for nic in inst.get("nics") or []:
            if isinstance(nic, dict) and not nic.get("uuid"):
                nic["uuid"] = new_uuid()
                self.changed = True
            if isinstance(nic, dict) and "nicparams" not in nic:
                # Ganeti 2.0 kept bridge on the NIC itself.
                bridge = nic.pop("bridge", None)
                nic["nicparams"] = ({constants.NIC_LINK: bridge}
                                    if bridge else {})
                self.changed = True

    def _disk(self, disk, node_by_name):
        if disk.get("dev_type") in _OLD_DEV_TYPES and \
                _OLD_DEV_TYPES[disk["dev_type"]] != disk["dev_type"]:
            disk["dev_type"] = _OLD_DEV_TYPES[disk["dev_type"]]
            self.changed = True
        if disk.get("nodes"):
            disk["nodes"] = [self._node_ref(n, node_by_name)
                             for n in disk["nodes"]]
        for child in disk.get("children") or []:
            if isinstance(child, dict):
                self._disk(child, node_by_name)
