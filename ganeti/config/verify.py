"""Consistency checks of a config store: every problem names the
object, the field and the reason.

The checks are made per object (a unit: the cluster, or one node, node
group, instance, disk or network), so that a change needs to check again
only what it can affect (:class:`Checks`):

* every unit it touched (added, removed, changed);
* every unit whose check read a fact the change altered.  A check records
  the facts it reads: whether a node exists and its group, a node group's
  existence and NIC settings, a network's existence, a disk's existence,
  nodes and forthcoming flag, the cluster's enabled hypervisors and NIC
  defaults, and the holders of a value that must be unique (names, MACs,
  primary IPs, network ports, disk owners);
* uniqueness is kept in indices (value -> holders) updated for the units
  touched, so a duplicate is found without looking at every object.

:class:`Verifier` runs every check from scratch (``ConfigStore.verify``);
the incremental state is built by the same code, so both agree.
"""

import collections
import copy
import json

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.config.encoding import CLUSTER

#: units in the order a full check reports them
_ORDER = ("cluster", "nodegroups", "nodes", "instances", "disks",
          "networks")
_MISSING = ("missing",)
_EMPTY = {}
_UNSET = object()


class Verifier(object):
    """Collect every inconsistency of a ConfigStore (a full check)."""

    def __init__(self, store):
        self.s = store

    def run(self):
        return Checks(self.s, keep=False).problems()


class _Check(object):
    """The problems and the facts read while checking one unit."""

    __slots__ = ("checks", "unit", "problems", "deps")

    def __init__(self, checks, unit):
        self.checks = checks
        self.unit = unit
        self.problems = []
        self.deps = set()

    def bad(self, what, field, reason):
        self.problems.append("%s %s: %s" % (what, field, reason))

    def others(self, key):
        """Label of another holder of index ``key`` (the one with the
        smallest key; this unit's own label if it holds the value
        twice), or None if it is the only holder."""
        self.deps.add(("idx", key))
        holders = self.checks._index.get(key)
        if holders is None or len(holders) == 1 and self.unit in holders:
            if holders and holders[self.unit] > 1:
                return self.checks._label(self.unit, key)
            return None
        if holders.get(self.unit, 0) > 1:
            return self.checks._label(self.unit, key)
        rest = [u for u in holders if u != self.unit]
        return self.checks._label(min(rest, key=_sort_key), key)


def _sort_key(unit):
    return (unit[0], str(unit[1]))


class Checks(object):
    """Every unit's problems, kept current change by change.

    :meth:`update` takes the units a change touched and returns the
    problems it introduced (none known before it) and the units it
    checked again; after the store puts the touched objects back (a
    refused change), ``update(touched, extra=checked)`` restores the
    state.
    """

    def __init__(self, store, keep=True):
        """Check everything; ``keep=False``: only for :meth:`problems`
        (what :meth:`update` needs is not recorded)."""
        self.s = store
        self._problems = {}      # unit -> [problem]
        self._deps = {}          # unit -> facts read
        self._dependents = collections.defaultdict(set)  # fact -> units
        self._members = {}       # unit -> Counter of index keys held
        self._labels = {}        # unit -> how others name it
        self._index = {}         # index key -> {unit: count}
        self._facts = {}         # fact -> value when last looked at
        self._counts = collections.Counter()   # problem -> units with it
        self._nic_base = None
        # everything from scratch: the index first (checks read it)
        units = list(self._all_units())
        index = self._index
        for unit in units:
            obj = self._lookup(unit)
            members = self._members_of(unit, obj)
            if members:
                self._members[unit] = members
                for key, count in members.items():
                    holders = index.get(key)
                    if holders is None:
                        index[key] = {unit: count}
                    else:
                        holders[unit] = count
            self._labels[unit] = self._own_label(unit, obj)
            if keep:
                for fact in self._facts_of(unit):
                    self._facts[fact] = self._fact_value(fact)
        self._facts[("nodegroups-any",)] = bool(store.nodegroups)
        dependents = self._dependents
        for unit in units:
            check = self._check(unit)
            if check.problems:
                self._problems[unit] = check.problems
                if keep:
                    self._counts.update(check.problems)
            if keep:
                self._deps[unit] = check.deps
                for fact in check.deps:
                    dependents[fact].add(unit)

    def _all_units(self):
        yield CLUSTER
        for kind in _ORDER[1:]:
            for key in getattr(self.s, kind):
                yield (kind, key)

    def problems(self):
        """Every problem, unit by unit (cluster, groups, nodes,
        instances, disks, networks)."""
        result = []
        for unit in self._all_units():
            result.extend(self._problems.get(unit, ()))
        return result

    def update(self, touched, extra=()):
        # the maintenance state has no checks
        touched = [u for u in touched if u[0] in _ORDER]
        changed = set()
        for unit in touched:
            obj = self._lookup(unit)
            changed.update(self._set_members(unit, obj))
            for fact in self._facts_of(unit):
                value = self._fact_value(fact)
                if self._facts.get(fact, _UNSET) != value:
                    self._facts[fact] = value
                    changed.add(fact)
        if any(kind == "nodegroups" for kind, _ in touched):
            fact = ("nodegroups-any",)
            value = bool(self.s.nodegroups)
            if self._facts.get(fact) != value:
                self._facts[fact] = value
                changed.add(fact)
        recheck = set(touched)
        recheck.update(extra)
        for fact in changed:
            recheck.update(self._dependents.get(fact, ()))
        results = {u: self._check(u) for u in recheck}
        new = []
        for unit in recheck:
            if results[unit] is not None:
                new.extend(p for p in results[unit].problems
                           if not self._counts[p])
        for unit in recheck:
            self._store_result(unit, results[unit])
        return new, recheck

    def holders(self, key):
        """The units holding index ``key`` (e.g. ``("name", "instances",
        name)``) as of the last update."""
        return list(self._index.get(key, ()))

    # --- bookkeeping -----------------------------------------------------

    def _store_result(self, unit, check):
        for p in self._problems.pop(unit, ()):
            self._counts[p] -= 1
            if not self._counts[p]:
                del self._counts[p]
        for fact in self._deps.pop(unit, ()):
            dependents = self._dependents[fact]
            dependents.discard(unit)
            if not dependents:
                del self._dependents[fact]
        if check is None:
            return
        if check.problems:
            self._problems[unit] = check.problems
            self._counts.update(check.problems)
        self._deps[unit] = check.deps
        for fact in check.deps:
            self._dependents[fact].add(unit)

    def _set_members(self, unit, obj):
        """Put ``unit``'s index entries in place; the index facts that
        changed."""
        old = self._members.get(unit, _EMPTY)
        new = self._members_of(unit, obj) if obj is not None else _EMPTY
        label = self._own_label(unit, obj)
        old_label = self._labels.get(unit)
        if old == new and label == old_label:
            return ()
        for key, count in old.items():
            holders = self._index[key]
            del holders[unit]
            if not holders:
                del self._index[key]
        for key, count in new.items():
            self._index.setdefault(key, {})[unit] = count
        if new:
            self._members[unit] = new
        else:
            self._members.pop(unit, None)
        if obj is None:
            self._labels.pop(unit, None)
        else:
            self._labels[unit] = label
        if label != old_label:
            keys = set(old) | set(new)
        else:
            keys = {k for k in set(old) | set(new)
                    if old.get(k) != new.get(k)}
        return [("idx", k) for k in keys]

    def _lookup(self, unit):
        kind, key = unit
        if unit == CLUSTER:
            return self.s.cluster
        return getattr(self.s, kind).get(key)

    @staticmethod
    def _members_of(unit, obj):
        kind = unit[0]
        if kind == "cluster" or kind == "disks":
            return _EMPTY
        keys = {}
        name = obj.name
        if name:
            keys[("name", kind, name)] = 1
        if kind == "nodes":
            if obj.primary_ip:
                keys[("ip", obj.primary_ip)] = 1
        elif kind == "instances":
            for nic in obj.nics:
                if nic.mac:
                    k = ("mac", nic.mac)
                    keys[k] = keys.get(k, 0) + 1
            if obj.network_port is not None:
                keys[("port", obj.network_port)] = 1
            for disk in obj.disks:
                k = ("owner", disk)
                keys[k] = keys.get(k, 0) + 1
        return keys

    @staticmethod
    def _own_label(unit, obj):
        if obj is None:
            return None
        if unit[0] == "instances":
            return obj.display_name
        if unit[0] == "nodes":
            return obj.name
        return None

    def _label(self, unit, key):
        """How a message about index ``key`` names its holder ``unit``."""
        if key[0] == "name":
            return unit[1]
        return self._labels.get(unit)

    @staticmethod
    def _facts_of(unit):
        kind, key = unit
        if kind == "nodes":
            return (("node", key),)
        if kind == "nodegroups":
            return (("group", key),)
        if kind == "networks":
            return (("network", key),)
        if kind == "disks":
            return (("disk", key),)
        if kind == "cluster":
            return (("cluster",),)
        return ()

    def _fact_value(self, fact):
        s = self.s
        kind = fact[0]
        if kind == "cluster":
            c = s.cluster
            return (tuple(c.enabled_hypervisors or ()),
                    json.dumps((c.nicparams or {}).get(constants.PP_DEFAULT),
                               sort_keys=True, default=repr))
        obj = {"node": s.nodes, "group": s.nodegroups,
               "network": s.networks, "disk": s.disks}[kind].get(fact[1])
        if obj is None:
            return _MISSING
        if kind == "node":
            return ("node", obj.group)
        if kind == "group":
            return ("group", json.dumps(obj.networks, sort_keys=True,
                                        default=repr))
        if kind == "disk":
            return ("disk", obj.forthcoming, tuple(obj.nodes or ()))
        return ("network",)

    # --- the checks --------------------------------------------------------

    def _nic_defaults(self):
        """The cluster's NIC parameters filled with the defaults (what
        objects.fill_nicparams starts from), computed once per value."""
        c = self.s.cluster
        default = (c.nicparams or {}).get(constants.PP_DEFAULT, {})
        cached = self._nic_base
        if cached is None or cached[0] != default:
            cached = self._nic_base = (copy.deepcopy(default),
                                       objects.fill_dict(
                                           constants.NICC_DEFAULTS, default))
        return cached[1]

    def _check(self, unit):
        obj = self._lookup(unit)
        if obj is None:
            return None
        c = _Check(self, unit)
        kind = unit[0]
        if kind == "cluster":
            self._check_cluster(c, obj)
            return c
        self._check_object(c, kind, unit[1], obj)
        getattr(self, "_check_" + kind)(c, obj)
        return c

    @staticmethod
    def _check_object(c, kind, ukey, obj):
        what = "%s %s" % (kind[:-1], ukey)
        if not obj.uuid:
            c.bad(what, "uuid", "missing")
        elif obj.uuid != ukey:
            c.bad(what, "uuid", "object's uuid %s differs from its key"
                  % obj.uuid)
        name = getattr(obj, "name", None)
        if name and kind != "disks":
            other = c.others(("name", kind, name))
            if other is not None:
                c.bad(what, "name", "'%s' is also used by %s" % (name, other))
        for tag in getattr(obj, "tags", ()):
            try:
                objects.validate_tag(tag)
            except errors.TagError as err:
                c.bad(what, "tags", str(err))

    def _check_cluster(self, ch, c):
        s = self.s
        what = "cluster"
        if not c.cluster_name:
            ch.bad(what, "cluster_name", "missing")
        if not c.uuid:
            ch.bad(what, "uuid", "missing")
        ch.deps.add(("node", c.master_node))
        if c.master_node not in s.nodes:
            ch.bad(what, "master_node", "node %s is not in the configuration"
                   % c.master_node)
        bad_hv = sorted(set(c.enabled_hypervisors) - constants.HYPER_TYPES)
        if bad_hv:
            ch.bad(what, "enabled_hypervisors", "unknown hypervisors %s"
                   % ", ".join(bad_hv))
        if not c.enabled_hypervisors:
            ch.bad(what, "enabled_hypervisors", "empty")
        if c.default_hypervisor and \
                c.default_hypervisor not in c.enabled_hypervisors:
            ch.bad(what, "default_hypervisor", "'%s' is not enabled"
                   % c.default_hypervisor)
        bad_dt = sorted(set(c.enabled_disk_templates)
                        - constants.DISK_TEMPLATES)
        if bad_dt:
            ch.bad(what, "enabled_disk_templates", "unknown templates %s"
                   % ", ".join(bad_dt))
        if not isinstance(c.candidate_pool_size, int) or \
                c.candidate_pool_size < 1:
            ch.bad(what, "candidate_pool_size", "must be a positive integer")
        for rng in c.uid_pool or []:
            if (not isinstance(rng, (list, tuple)) or len(rng) != 2
                    or not all(isinstance(x, int) for x in rng)
                    or rng[0] > rng[1] or rng[0] < constants.UIDPOOL_UID_MIN
                    or rng[1] > constants.UIDPOOL_UID_MAX):
                ch.bad(what, "uid_pool", "invalid range %r" % (rng,))
        for hv, params in (c.hvparams or {}).items():
            if not isinstance(params, dict):
                ch.bad(what, "hvparams/%s" % hv, "must be a dictionary")
        for key in (c.beparams or {}).get(constants.PP_DEFAULT, {}):
            if key not in constants.BEC_DEFAULTS:
                ch.bad(what, "beparams/default", "unknown parameter '%s'"
                       % key)
        nic_mode = (c.nicparams or {}).get(constants.PP_DEFAULT, {}).get(
            constants.NIC_MODE)
        if nic_mode is not None and nic_mode not in constants.NIC_VALID_MODES:
            ch.bad(what, "nicparams/default/mode", "'%s' is not a valid mode"
                   % nic_mode)
        if not (constants.FIRST_DRBD_PORT - 1 <= c.highest_used_port
                <= constants.LAST_DRBD_PORT):
            ch.bad(what, "highest_used_port", "%s is outside %d-%d"
                   % (c.highest_used_port, constants.FIRST_DRBD_PORT,
                      constants.LAST_DRBD_PORT))
        ch.deps.add(("nodegroups-any",))
        if not s.nodegroups:
            ch.bad("cluster", "nodegroups", "there is no node group")

    def _check_nodegroups(self, c, g):
        what = "node group %s" % (g.name or g.uuid)
        if not g.name:
            c.bad(what, "name", "missing")
        if g.alloc_policy not in constants.VALID_ALLOC_POLICIES:
            c.bad(what, "alloc_policy", "'%s' is not one of %s"
                  % (g.alloc_policy,
                     ", ".join(constants.VALID_ALLOC_POLICIES)))
        for net in g.networks or {}:
            c.deps.add(("network", net))
            if net not in self.s.networks:
                c.bad(what, "networks", "unknown network %s" % net)

    def _check_nodes(self, c, n):
        what = "node %s" % (n.name or n.uuid)
        if not n.name:
            c.bad(what, "name", "missing")
        c.deps.add(("group", n.group))
        if n.group not in self.s.nodegroups:
            c.bad(what, "group", "node group %s does not exist" % n.group)
        if not n.primary_ip:
            c.bad(what, "primary_ip", "missing")
        else:
            other = c.others(("ip", n.primary_ip))
            if other is not None:
                c.bad(what, "primary_ip", "%s is also used by node %s"
                      % (n.primary_ip, other))
        if n.master_candidate and n.offline:
            c.bad(what, "master_candidate",
                  "an offline node cannot be a master candidate")
        if n.drained and n.offline:
            c.bad(what, "drained", "a node cannot be both drained and"
                  " offline")

    def _check_instances(self, c, inst):
        s = self.s
        what = "instance %s" % inst.display_name
        real = not inst.forthcoming
        for field in ("name", "primary_node", "os", "hypervisor"):
            if real and not getattr(inst, field):
                c.bad(what, field, "missing")
        if inst.primary_node:
            c.deps.add(("node", inst.primary_node))
            if inst.primary_node not in s.nodes:
                c.bad(what, "primary_node", "node %s does not exist"
                      % inst.primary_node)
        for sec in inst.secondary_nodes or []:
            c.deps.add(("node", sec))
            if sec not in s.nodes:
                c.bad(what, "secondary_nodes", "node %s does not exist"
                      % sec)
            if sec == inst.primary_node:
                c.bad(what, "secondary_nodes", "the primary node is"
                      " also listed as secondary")
        c.deps.add(("cluster",))
        if inst.hypervisor and \
                inst.hypervisor not in s.cluster.enabled_hypervisors:
            c.bad(what, "hypervisor", "'%s' is not enabled in the"
                  " cluster" % inst.hypervisor)
        if inst.admin_state not in constants.ADMINST_ALL:
            c.bad(what, "admin_state", "'%s' is not one of %s"
                  % (inst.admin_state,
                     ", ".join(sorted(constants.ADMINST_ALL))))
        if inst.admin_state_source not in constants.ADMIN_STATE_SOURCES:
            c.bad(what, "admin_state_source", "'%s' is not one of %s"
                  % (inst.admin_state_source,
                     ", ".join(sorted(constants.ADMIN_STATE_SOURCES))))
        if inst.forthcoming and inst.admin_state == constants.ADMINST_UP:
            c.bad(what, "admin_state", "a forthcoming instance cannot"
                  " be up")
        glob = sorted(set(inst.hvparams or {}) & constants.HVC_GLOBALS)
        if glob:
            c.bad(what, "hvparams", "global parameters %s can only be"
                  " set at cluster level" % ", ".join(glob))
        for key in inst.beparams or {}:
            if key not in constants.BEC_DEFAULTS:
                c.bad(what, "beparams", "unknown parameter '%s'" % key)
        if inst.network_port is not None:
            other = c.others(("port", inst.network_port))
            if other is not None:
                c.bad(what, "network_port", "%s is also used by %s"
                      % (inst.network_port, other))
        group = None
        if inst.primary_node in s.nodes:
            group_uuid = s.nodes[inst.primary_node].group
            c.deps.add(("group", group_uuid))
            group = s.nodegroups.get(group_uuid)
        for idx, nic in enumerate(inst.nics):
            nwhat = "nic/%d" % idx
            if nic.mac:
                other = c.others(("mac", nic.mac))
                if other is not None:
                    c.bad(what, nwhat + "/mac", "%s is also used by %s"
                          % (nic.mac, other))
            elif real:
                c.bad(what, nwhat + "/mac", "missing")
            if nic.network:
                c.deps.add(("network", nic.network))
                if nic.network not in s.networks:
                    c.bad(what, nwhat + "/network", "network %s does not"
                          " exist" % nic.network)
            filled = dict(self._nic_defaults())
            if group is not None and nic.network and \
                    nic.network in group.networks:
                filled.update(group.networks[nic.network] or {})
            filled.update(nic.nicparams or {})
            try:
                objects.check_nic(nic, filled, where=nwhat)
            except errors.OpPrereqError as err:
                c.bad(what, nwhat, err.args[0].split(": ", 1)[-1])
        for idx, disk_uuid in enumerate(inst.disks):
            c.deps.add(("disk", disk_uuid))
            if disk_uuid not in s.disks:
                c.bad(what, "disks/%d" % idx, "disk %s does not exist"
                      % disk_uuid)
                continue
            other = c.others(("owner", disk_uuid))
            if other is not None:
                c.bad(what, "disks/%d" % idx, "disk %s also belongs to"
                      " %s" % (disk_uuid, other))
            disk = s.disks[disk_uuid]
            if real and disk.forthcoming:
                c.bad(what, "disks/%d" % idx, "a real instance has the"
                      " forthcoming disk %s" % disk_uuid)
            for node in disk.nodes or []:
                if inst.all_nodes and node not in inst.all_nodes:
                    c.bad(what, "disks/%d/nodes" % idx,
                          "node %s is not a node of the instance" % node)

    def _check_disks(self, c, disk):
        what = "disk %s" % disk.uuid
        c.deps.add(("idx", ("owner", disk.uuid)))
        if not self._index.get(("owner", disk.uuid)):
            c.bad(what, "instance", "belongs to no instance")
        real = not disk.forthcoming
        if disk.dev_type is not None and \
                disk.dev_type not in constants.DISK_TEMPLATES:
            c.bad(what, "dev_type", "'%s' is not a disk template"
                  % disk.dev_type)
        elif real and disk.dev_type is None:
            c.bad(what, "dev_type", "missing")
        if disk.size is not None:
            if not isinstance(disk.size, int) or disk.size < 0:
                c.bad(what, "size", "must be a non-negative integer"
                      " (MiB), got %r" % (disk.size,))
        elif real and disk.dev_type != constants.DT_DISKLESS:
            c.bad(what, "size", "missing")
        if disk.mode is not None and \
                disk.mode not in constants.DISK_ACCESS_SET:
            c.bad(what, "mode", "'%s' is not ro or rw" % disk.mode)
        for node in disk.nodes or []:
            c.deps.add(("node", node))
            if node not in self.s.nodes:
                c.bad(what, "nodes", "node %s does not exist" % node)

    @staticmethod
    def _check_networks(c, net):
        if not net.network:
            c.bad("network %s" % (net.name or net.uuid), "network",
                  "missing (an IPv4 range is required)")
