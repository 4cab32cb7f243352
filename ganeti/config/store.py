"""The config store itself: loading, atomic writing with rollback,
lookups, and the mutators of the cluster, tags, groups, nodes and
networks (instances and disks: :mod:`ganeti.config.instances`).

A change is checked, applied and verified in the calling (reactor) thread.
It costs what it changes: the mutators record the objects they change,
only those are verified again (with the checks they take part in,
:mod:`ganeti.config.verify`) and encoded again
(:mod:`ganeti.config.encoding`); the file is put together from every
object's encoded form.  Writing the bytes is done at once, or, when the
store has a ``writer`` (the master daemon's ordered writer thread), by
that writer: the mutator returns before the fsync, every change accepted
until the writer starts a write shares that write, :meth:`ConfigStore.flushed`
tells when the changes so far are on disk, and the write listeners
(replication, ssconf) run once they are.  A write that fails there cannot
be rolled back any more: the store then refuses every further change until
the daemon is restarted and loads what is on disk.
"""

import contextlib
import copy
import json
import os
import threading
import time

from twisted.internet import defer
from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti import ipolicy
from ganeti import objects
from ganeti import uidpool
from ganeti.network_pool import AddressPool
from ganeti.objects import (Cluster, Node, NodeGroup, new_uuid)
from ganeti.utils.io import BACKUP_SUFFIX, atomic_write
from ganeti.config.accounting import Accounting
from ganeti.config.encoding import CLUSTER, MAINTENANCE, EncodedConfig
from ganeti.config.instances import InstanceMutators
from ganeti.config.filters import FilterMutators
from ganeti.config.maintenance import MaintenanceMutators
from ganeti.config.upgrade import Upgrader
from ganeti.config.verify import Checks, Verifier

log = Logger()


def _no_pause():
    pass


#: the top-level keys of config.data this code models
_TOP_LEVEL = frozenset(["version", "cluster", "nodes", "nodegroups",
                        "instances", "networks", "disks", "filters",
                        "serial_no", "ctime", "mtime", "maintenance"])

_KINDS = {klass: name for name, klass in objects.CONFIG_MAPS}


def _pool_addresses(inst):
    """(network uuid, ip) of an instance's NICs on networks."""
    if inst is None:
        return set()
    return {(nic.network, nic.ip) for nic in inst.nics
            if nic.network and nic.ip}


def unit_of(obj):
    """The unit (see :mod:`ganeti.config.encoding`) a config object is
    written as part of."""
    if isinstance(obj, Cluster):
        return CLUSTER
    if isinstance(obj, (objects.Maintenance, objects.Incident)):
        return MAINTENANCE
    return (_KINDS[type(obj)], obj.uuid)


class _Tracking(object):
    """What a change needs of the objects as the last change left them."""

    def __init__(self, encoded, checks):
        self.encoded = encoded
        self.checks = checks


class ConfigStore(InstanceMutators, MaintenanceMutators, FilterMutators,
                  Accounting):
    """config.data, loaded, with named mutators that persist every change."""

    #: After every change, compare what is kept up to date (encoded
    #: objects, problems) with a full serialisation and verification, and
    #: raise AssertionError if they differ: a mutator that changed an
    #: object without recording it.  The tests turn it on; it costs what
    #: a change cost before the incremental work.
    self_check = os.environ.get("GANETI_CONFIG_SELF_CHECK", "") not in ("",
                                                                       "0")

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
        # Per-object encoded forms and checks, from the first change on
        self._tracking = None
        # Objects recorded as changed by the change under way (else None)
        self._touched = None
        # Changes accepted, and how many of them are on disk
        self._generation = 0
        self._disk_generation = 0
        # (generation, Deferred) of the callers of flushed() still waiting
        self._waiters = []
        # The newest snapshot for the writer, and whether a write waits in
        # the writer's queue for it (both shared with the writer thread)
        self._lock = threading.Lock()
        self._latest = None
        self._queued = False
        # (generation, bytes) put together last: written_bytes()
        self._joined = None
        #: config.data writes done (several changes may share one)
        self.writes = 0
        # Called with (store) after every successful write: replication to
        # master candidates, ssconf, confd reload hooks.
        self.write_listeners = []
        #: called with (what, [(unit, before, after)]) after every accepted
        #: change: the objects it added, changed or removed as dicts
        #: (before None: added; after None: removed); the event stream
        self.change_listeners = []
        #: called with the seconds each write of the file took (measured
        #: by ``write_timer``, where the write happens)
        self.write_observers = []
        self.write_timer = time.monotonic
        # ganeti.utils.writer.IFileWriter, or None: write at once
        self.writer = None
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
        """The bytes of the last accepted change (replication ships them:
        the file the write under way puts on disk); before the first
        change, a fresh serialisation."""
        if self._tracking is None:
            return self.dumps()
        generation = self._generation
        if self._joined is None or self._joined[0] != generation:
            self._joined = (generation, self._tracking.encoded.snapshot(
                generation).join())
        return self._joined[1]

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

    def track(self):
        """Start keeping the per-object state a change needs (the encoded
        objects, the verification of each); a full check of the
        configuration, whose problems are returned.  Done at the first
        change otherwise."""
        if self._tracking is None:
            self._tracking = _Tracking(EncodedConfig(self), Checks(self))
        return self._tracking.checks.problems()

    def _tracked(self):
        if self._tracking is None:
            self.track()
        return self._tracking

    @property
    def generation(self):
        """How many changes (and saves) were accepted since loading."""
        return self._generation

    def _write(self):
        """Write what was accepted so far: at once without a writer (or
        nothing without a path), else by the writer, sharing the write
        with every change accepted until the writer starts it."""
        snapshot = self._tracked().encoded.snapshot(self._generation)
        if self.path is None:
            self._on_disk(snapshot, None)
            return
        if self.writer is None:
            started = self.write_timer()
            data = snapshot.join()
            atomic_write(self.path, data, backup=True)
            self._observe_write(self.write_timer() - started)
            self._on_disk(snapshot, data)
            return
        with self._lock:
            self._latest = snapshot
            if self._queued:
                return          # the write waiting in the writer takes it
            self._queued = True
        d = self.writer.call(self._write_latest)
        d.addCallbacks(self._written, self._write_failed)

    def _write_latest(self):
        # in the writer's thread: the newest accepted state, taken when
        # the write starts (changes accepted meanwhile come along)
        with self._lock:
            snapshot = self._latest
            self._queued = False
        started = self.write_timer()
        data = snapshot.join()
        atomic_write(self.path, data, backup=True)
        return snapshot, data, self.write_timer() - started

    def _observe_write(self, seconds):
        for observer in self.write_observers:
            try:
                observer(seconds)
            except Exception:
                log.failure("a config write observer failed")

    def _on_disk(self, snapshot, data):
        if data is not None:
            self.writes += 1
        if snapshot.generation > self._disk_generation:
            self._disk_generation = snapshot.generation
        if data is not None and (self._joined is None or
                                 snapshot.generation >= self._joined[0]):
            self._joined = (snapshot.generation, data)

    def _written(self, result):
        snapshot, data, seconds = result
        self._observe_write(seconds)
        self._on_disk(snapshot, data)
        if self._broken is not None:
            self._fire_waiters()
            return
        # replication and ssconf follow the file on disk, then whoever
        # waits for it hears (in the order the old per-change writes had)
        self._notify_listeners()
        self._fire_waiters()

    def _write_failed(self, failure):
        if self._broken is None:
            self._broken = failure.value
            log.critical("config.data could not be written: {err}; no"
                         " further configuration change is accepted until"
                         " the master daemon is restarted",
                         err=failure.getErrorMessage())
        self._fire_waiters()

    def _fire_waiters(self):
        waiting, ready = [], []
        for generation, d in self._waiters:
            if self._broken is not None or \
                    generation <= self._disk_generation:
                ready.append(d)
            else:
                waiting.append((generation, d))
        self._waiters = waiting
        for d in ready:
            if self._broken is not None:
                d.errback(self._broken_error())
            else:
                d.callback(None)

    def _broken_error(self):
        return errors.ConfigurationError(
            "%s could not be written: %s" % (self.path, self._broken))

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
            return defer.fail(self._broken_error())
        if self._generation <= self._disk_generation:
            return defer.succeed(None)
        d = defer.Deferred()
        self._waiters.append((self._generation, d))
        return d

    @contextlib.contextmanager
    def _change(self, what):
        """Apply a change atomically: verify, persist, or roll back.

        The mutator records the objects it changes, adds or removes
        (``_touch``, ``_mark``); an addition or removal it did not record
        is still found (the maps' sizes do not add up), and the cluster
        changes with every change (its serial).  Only those are checked
        and encoded again; a refused change puts exactly those back as the
        last accepted change left them.
        """
        self._check_writable()
        if self._touched is not None:
            raise RuntimeError("%s: a configuration change is already under"
                               " way" % what)
        tracking = self._tracked()
        self._touched = touched = set()
        saved = (self.serial_no, self.mtime, self._generation)
        checked = ()
        staged = None
        before = None
        try:
            yield
            self._sync_address_pools(tracking, touched)
            units = self._changed_units(touched)
            new_problems, checked = tracking.checks.update(units)
            if new_problems:
                raise errors.ConfigVerifyError(
                    "%s would make the configuration inconsistent: %s"
                    % (what, "; ".join(new_problems)), new_problems)
            self.serial_no += 1
            self.mtime = self._now()
            # confd answers carry the cluster's serial and clients keep the
            # highest one, so every change must move it forward.
            self.cluster.serial_no = (self.cluster.serial_no or 0) + 1
            before = ({unit: tracking.encoded.stored_dict(unit)
                       for unit in units} if self.change_listeners else None)
            staged = tracking.encoded.update(units)
            self._generation += 1
            self._write()
        except BaseException:
            if staged is not None:
                tracking.encoded.undo(staged)
            units = self._changed_units(touched)
            self._put_back(units)
            self.serial_no, self.mtime, self._generation = saved
            tracking.checks.update(units, extra=checked)
            self._touched = None
            if self.self_check:
                self.check_incremental()
            raise
        self._touched = None
        if self.self_check:
            self.check_incremental()
        if before is not None:
            self._report_changes(what, tracking, before)
        if self._disk_generation >= self._generation:
            self._notify_listeners()      # written at once

    def _sync_address_pools(self, tracking, touched):
        """A NIC's address on a network is taken in that network's pool:
        the instances this change adds, changes or removes take and give
        back addresses, in the same change (and its rollback)."""
        gone, taken = set(), {}
        for unit in self._changed_units(touched):
            if unit[0] != "instances":
                continue
            before = _pool_addresses(tracking.encoded.stored(unit))
            after = _pool_addresses(self.instances.get(unit[1]))
            gone |= before - after
            for address in after - before:
                taken[address] = unit[1]
        if taken:
            # two jobs that chose the same address before either was
            # written: the later one is refused here
            for inst in self.instances.values():
                for address in _pool_addresses(inst):
                    owner = taken.get(address)
                    if owner is not None and owner != inst.uuid:
                        raise errors.OpPrereqError(
                            "nics: address %s of network %s was taken"
                            " meanwhile by instance %s"
                            % (address[1], self.networks[address[0]].name
                               if address[0] in self.networks
                               else address[0], inst.display_name),
                            errors.ECODE_NOTUNIQUE)
        nets = {net for net, _ in gone | set(taken)}
        for uuid in nets:
            net = self.networks.get(uuid)
            if net is None or not net.network:
                continue
            pool = AddressPool.of(net)
            for net_uuid, ip in gone:
                if net_uuid == uuid and pool.contains(ip):
                    pool.internal[pool.index(ip)] = "0"
            for net_uuid, ip in taken:
                if net_uuid == uuid and pool.contains(ip):
                    pool.internal[pool.index(ip)] = "1"
            reservations = pool.store()[0]
            if reservations != net.reservations:
                net.reservations = reservations
                self._touch(net)

    def _changed_units(self, touched):
        units = set(touched)
        units.add(CLUSTER)
        units.update(self._tracking.encoded.membership_changes(touched))
        return units

    def _put_back(self, units):
        encoded = self._tracking.encoded
        for unit in units:
            obj = encoded.stored(unit)
            kind, key = unit
            if unit == CLUSTER:
                self.cluster = obj
            elif unit == MAINTENANCE:
                self.maintenance = obj
            elif obj is None:
                getattr(self, kind).pop(key, None)
            else:
                getattr(self, kind)[key] = obj

    def _report_changes(self, what, tracking, before):
        changes = []
        for unit in sorted(before, key=lambda u: (u[0], u[1] or "")):
            after = tracking.encoded.stored_dict(unit)
            if after != before[unit]:
                changes.append((unit, before[unit], after))
        if not changes:
            return
        for listener in list(self.change_listeners):
            try:
                listener(what, changes)
            except Exception:
                log.failure("configuration change listener failed")

    def _notify_listeners(self):
        for listener in list(self.write_listeners):
            try:
                listener(self)
            except Exception:
                log.failure("configuration write listener failed")

    def check_incremental(self):
        """Compare what is kept up to date with a full serialisation and
        a full verification; AssertionError naming what differs (a
        mutator that changed an object without recording it).  For tests
        and debugging: ``self_check`` runs it after every change."""
        tracking = self._tracking
        if tracking is None:
            return
        stale = tracking.encoded.stale()
        if stale:
            raise AssertionError(
                "configuration objects changed without the store knowing"
                " (their encoded form is out of date): %s" % stale)
        data = tracking.encoded.snapshot(self._generation).join()
        if data != self.dumps():
            raise AssertionError("config.data put together from the"
                                 " objects differs from a full serialisation")
        kept = sorted(tracking.checks.problems())
        full = sorted(self.verify())
        if kept != full:
            raise AssertionError("verification kept up to date differs from"
                                 " a full one: %r != %r" % (kept, full))

    def _absorb(self, *units):
        """``units`` were changed outside a change (allocate_port): their
        state now is the rollback point, written with the next write."""
        if self._touched is not None:
            self._touched.update(units)
        elif self._tracking is not None:
            self._tracking.encoded.update(units)
            self._tracking.checks.update(units)
            self._joined = None

    def audit(self):
        """Objects changed without a mutator recording them (a bug: such a
        change would not be written): the units found, which are then
        taken as they are now and written (a Deferred, see :meth:`save`,
        is not waited for).  Costs a full serialisation; the master daemon
        runs it now and then as a safety net."""
        if self._tracking is None or self._touched is not None or \
                self._broken is not None:
            return []
        stale = self._tracking.encoded.stale()
        if stale:
            self._absorb(*stale)
            self.save().addErrback(lambda f: log.failure(
                "writing the configuration after the audit failed", f))
        return stale

    def save(self):
        """Write the current state (after load/upgrade) without a change;
        a Deferred firing once it is on disk."""
        self._check_writable()
        self._tracked()
        self.serial_no += 1
        self.mtime = self._now()
        self._generation += 1
        self._write()
        return self.flushed()

    def _touch(self, obj):
        """Record that ``obj`` changes (serial, mtime) in this change."""
        obj.touch(self._now())
        self._mark(obj)

    def _mark(self, obj):
        """Record that ``obj`` changes in this change, without touching
        its serial (outside a change: see _absorb)."""
        if self._touched is None:
            self._absorb(unit_of(obj))
        else:
            self._touched.add(unit_of(obj))

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
        for obj in self._named(mapping, name):
            if obj.uuid != except_uuid:
                raise errors.OpPrereqError(
                    "%s name '%s' is already in use" % (kind, name),
                    errors.ECODE_EXISTS)

    def _named(self, mapping, name):
        """The objects of ``mapping`` called ``name``: from the names
        verification keeps (no scan) once changes are tracked."""
        kind = next((k for k, _ in objects.CONFIG_MAPS
                     if getattr(self, k) is mapping), None)
        if self._tracking is None or kind is None:
            return [o for o in mapping.values() if o.name == name]
        found = []
        for _, key in self._tracking.checks.holders(("name", kind, name)):
            obj = mapping.get(key)
            if obj is not None and obj.name == name:
                found.append(obj)
        return found

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

        Per-hypervisor and per-OS dicts (hvparams, diskparams, os_hvp,
        osparams, osparams_private_cluster) are merged one level down: ``hvparams={"kvm": {...}}`` replaces only the
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
                if key in ("hvparams", "diskparams", "os_hvp", "osparams",
                           "osparams_private_cluster"):
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
            self._mark(group)
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
            self._mark(group)

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
            self._mark(node)
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
            self._mark(node)
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
            self._mark(network)
        return network.uuid

    def set_network_params(self, name_or_uuid, **changes):
        """Change a network's settings and pool (the LU checks values)."""
        net = self.get_network(name_or_uuid)
        allowed = {"gateway", "network6", "gateway6", "mac_prefix",
                   "reservations", "ext_reservations"}
        for key in changes:
            if key not in allowed:
                raise errors.OpPrereqError(
                    "network parameter '%s' is unknown" % key,
                    errors.ECODE_INVAL)
        with self._change("modifying network %s" % net.name):
            for key, value in changes.items():
                setattr(net, key, value)
            self._touch(net)

    def remove_network(self, name_or_uuid):
        net = self.get_network(name_or_uuid)
        for inst in self.instances.values():
            if any(nic.network == net.uuid for nic in inst.nics):
                raise errors.OpPrereqError(
                    "network %s is used by instance %s"
                    % (net.name, inst.display_name), errors.ECODE_STATE)
        with self._change("removing network %s" % net.name):
            del self.networks[net.uuid]
            self._mark(net)
            for group in self.nodegroups.values():
                if net.uuid in group.networks:
                    del group.networks[net.uuid]
                    self._mark(group)
