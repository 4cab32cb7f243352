"""The config store itself: loading, atomic writing with rollback,
lookups, and the mutators of the cluster, tags, groups, nodes and
networks (instances and disks: :mod:`ganeti.config.instances`).

A change is checked, applied and verified in the calling (reactor) thread,
and serialised there.  Writing the bytes is done at once, or, when the
store has a ``writer`` (the master daemon's ordered writer thread), by that
writer: the mutator returns before the fsync, :meth:`ConfigStore.flushed`
tells when the changes so far are on disk, and the write listeners
(replication, ssconf) run once they are.  A write that fails there cannot
be rolled back any more: the store then refuses every further change until
the daemon is restarted and loads what is on disk.
"""

import contextlib
import copy
import json
import os
import time

from twisted.internet import defer
from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti import ipolicy
from ganeti import objects
from ganeti import uidpool
from ganeti.objects import (Cluster, Node, NodeGroup, new_uuid)
from ganeti.utils.io import BACKUP_SUFFIX, atomic_write
from ganeti.config.accounting import Accounting
from ganeti.config.instances import InstanceMutators
from ganeti.config.maintenance import MaintenanceMutators
from ganeti.config.upgrade import Upgrader
from ganeti.config.verify import Verifier

log = Logger()


#: the top-level keys of config.data this code models
def _no_pause():
    pass


_TOP_LEVEL = frozenset(["version", "cluster", "nodes", "nodegroups",
                        "instances", "networks", "disks", "filters",
                        "serial_no", "ctime", "mtime", "maintenance"])


class ConfigStore(InstanceMutators, MaintenanceMutators, Accounting):
    """config.data, loaded, with named mutators that persist every change."""

    def __init__(self, path, cluster, nodes=None, nodegroups=None,
                 instances=None, networks=None, disks=None, filters=None,
                 serial_no=1, ctime=None, mtime=None,
                 version=constants.CONFIG_VERSION, now=time.time,
                 maintenance=None, unknown=None):
        self.path = path
        self.cluster = cluster
        self.nodes = nodes or {}
        self.nodegroups = nodegroups or {}
        self.instances = instances or {}
        self.networks = networks or {}
        self.disks = disks or {}
        self.filters = filters or {}
        #: the maintenance daemon's switches and state (docs/maintd.rst)
        self.maintenance = maintenance or objects.Maintenance()
        #: top-level keys of config.data we do not model, written back
        self.unknown = unknown or {}
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
        # ganeti.utils.writer.IFileWriter, or None: write at once
        self.writer = None
        # Fires once the last write asked for is done (with its failure)
        self._last_write = defer.succeed(None)
        # The error of a write that failed in the writer: no more changes
        self._broken = None

    # --- serialisation --------------------------------------------------

    def to_dict(self, copy_values=True):
        """config.data as a dict; see ConfigObject.to_dict for copy_values."""
        cv = copy_values

        def objs(mapping):
            return {u: o.to_dict(cv) for u, o in mapping.items()}
        data = {
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
        # Left out while it holds nothing: Ganeti 3.0 refuses top-level
        # keys it does not know (docs/maintd.rst)
        if not self.maintenance.is_default():
            data["maintenance"] = self.maintenance.to_dict(cv)
        for key, value in self.unknown.items():
            data.setdefault(key, copy.deepcopy(value) if cv else value)
        return data

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
    def from_dict(cls, data, path=None, now=time.time, copy_data=True,
                  pause=None):
        """Build a store from config.data's JSON, upgrading older layouts.

        The upgrade edits the dict in place; ``copy_data=False`` skips the
        protective copy when the caller's dict is not used afterwards.
        ``pause``, if given, is called after each object: a worker thread
        building a store lets other threads run there (confd's reloader).
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
        pause = pause or _no_pause
        upgrader = Upgrader(data, pause=pause)
        upgrader.run()
        maps = {}
        for key, klass in objects.CONFIG_MAPS:
            raw = data.get(key) or {}
            if not isinstance(raw, dict):
                raise errors.ConfigurationError(
                    "config.data: '%s' must be an object keyed by UUID" % key)
            maps[key] = {}
            for ukey, value in raw.items():
                obj = klass.from_dict(value)
                maps[key][ukey] = obj
                pause()
        maintenance = data.get("maintenance")
        if maintenance is not None:
            maintenance = objects.Maintenance.from_dict(maintenance)
        unknown = {k: v for k, v in data.items() if k not in _TOP_LEVEL}
        store = cls(path, Cluster.from_dict(data["cluster"]),
                    filters=data.get("filters") or {},
                    maintenance=maintenance, unknown=unknown,
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
        return cls.from_bytes(raw, path, now=now)

    @classmethod
    def from_bytes(cls, raw, path, now=time.time, decode=json.loads,
                   pause=None):
        """A store from ``raw``, the bytes of config.data read from
        ``path``; ``decode`` parses the text, ``pause`` see from_dict."""
        hint = cls._backup_hint(path)
        if not raw.strip():
            raise errors.ConfigurationError(
                "configuration %s is empty (truncated?)%s" % (path, hint))
        try:
            data = decode(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as err:
            raise errors.ConfigurationError(
                "configuration %s is not valid JSON (%s); refusing to use it%s"
                % (path, err, hint))
        try:
            return cls.from_dict(data, path=path, now=now, copy_data=False,
                                 pause=pause)
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
        # as Ganeti's init: the policy allows only enabled disk templates
        cluster.ipolicy = ipolicy.restrict_templates(
            cluster.ipolicy, cluster.enabled_disk_templates)
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
        known) as the rollback point of the next change.  A Deferred firing
        once they are on disk."""
        data = self.dumps()
        if self.path is None:
            self._persisted = (data, problems)
            return defer.succeed(None)
        if self.writer is None:
            atomic_write(self.path, data, backup=True)
            self._persisted = (data, problems)
            return defer.succeed(None)
        # accepted now; on disk a little later, in order
        self._persisted = (data, problems)
        d = self.writer.call(atomic_write, self.path, data, backup=True)
        d.addErrback(self._write_failed)
        self._last_write = d
        return d

    def _write_failed(self, failure):
        if self._broken is None:
            self._broken = failure.value
            log.critical("config.data could not be written: {err}; no"
                         " further configuration change is accepted until"
                         " the master daemon is restarted",
                         err=failure.getErrorMessage())
        return failure

    def _check_writable(self):
        if self._broken is not None:
            raise errors.ConfigurationError(
                "%s could not be written (%s); no further change is accepted"
                " until the master daemon is restarted"
                % (self.path, self._broken))

    def flushed(self):
        """A Deferred firing once every change made so far is on disk;
        failing (ConfigurationError) if a write failed."""
        if self._broken is not None:
            return defer.fail(errors.ConfigurationError(
                "%s could not be written: %s" % (self.path, self._broken)))
        d = defer.Deferred()

        def settled(result):
            if self._broken is not None:
                d.errback(errors.ConfigurationError(
                    "%s could not be written: %s" % (self.path,
                                                     self._broken)))
            else:
                d.callback(None)
            return result
        self._last_write.addBoth(settled)
        return d

    @contextlib.contextmanager
    def _change(self, what):
        """Apply a change atomically: verify, persist, or roll back.

        The rollback point is the last write (so a failed change also drops
        anything modified behind the store's back since then); when there
        is none yet, the current state.
        """
        self._check_writable()
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
            written = self._write(frozenset(problems))
        except BaseException:
            self._restore(before)
            raise
        # replication and ssconf follow the file on disk
        written.addCallback(self._written)
        written.addErrback(lambda f: None)     # reported by _write_failed

    def _written(self, _):
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
                     "disks", "filters", "serial_no", "ctime", "mtime",
                     "maintenance", "unknown"):
            setattr(self, name, getattr(other, name))

    def save(self):
        """Write the current state (after load/upgrade) without a change;
        a Deferred firing once it is on disk."""
        self._check_writable()
        self.serial_no += 1
        self.mtime = self._now()
        return self._write()

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
        return Verifier(self).run()

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
