"""Resource accounting: what instances take from their nodes, and what a
node can still take.

There is one truth about a node's capacity: what the node reports (its
live data, the node query fields ``mtotal mnode mfree dtotal dfree ctotal
cnos``), lowered by the admin's overrides, minus what is promised but does
not show in those figures yet.  The master admits instances against it,
and Ganeti's htools, reading the same fields, plan with it:

* memory: ``mfree`` minus the ``maxmem`` of the primary instances that do
  not run but may start (admin state up or down; offline ones may not)
  and of the forthcoming ones (``reserved.mem``);
* disk: ``dfree``, which already counts the node-local disks of forthcoming
  instances as if they existed (and the admin's ``disk_reserved``);
* vCPUs: ``ctotal`` times the group policy's ``vcpu-ratio``, minus
  ``cnos``, minus the vCPUs of the primary instances that are not offline
  (forthcoming ones included);
* spindles: the node's ``spindle_count`` times the ``spindle-ratio``, minus
  the ``spindle_use`` of its primary instances (from the configuration).

Forthcoming instances count exactly like real ones, so a forthcoming
instance that was placed can always be turned into a real one.  A node
without live data (offline, unreachable) has unknown capacity: nothing is
admitted there blindly.

Admin overrides (``hv_state_static`` of the default hypervisor and
``disk_state_static``, Ganeti's keys) can only lower what a node offers:
``mem_total`` caps ``mtotal`` (``mfree`` loses the difference),
``mem_node`` raises ``mnode`` (likewise), ``cpu_total`` caps ``ctotal``,
``cpu_node`` sets ``cnos``, and each ``disk_reserved`` is kept free
(taken off ``dfree``).  Node queries report the values after overrides.
"""

import math

import attr

from ganeti import constants
from ganeti import errors
from ganeti import objects

#: hypervisor states in which an instance holds its memory on the node
RUNNING_STATES = frozenset(["running", "paused"])


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
class NodeResources(object):
    """A node as the master admits against it (see the module's doc).

    The reported fields (after admin overrides) are None when the node
    gave no live data; ``reason`` then says why.
    """
    node = attr.ib()                    # the Node
    mtotal = attr.ib(default=None)
    mnode = attr.ib(default=None)
    mfree = attr.ib(default=None)
    dtotal = attr.ib(default=None)
    dfree = attr.ib(default=None)      # net of forthcoming disks
    ctotal = attr.ib(default=None)
    cnos = attr.ib(default=None)
    #: maxmem of primary instances down but startable, and forthcoming
    reserved_memory = attr.ib(default=0)
    #: node-local disks of forthcoming instances (already off dfree)
    reserved_disk = attr.ib(default=0)
    vcpus_used = attr.ib(default=0)
    vcpu_ratio = attr.ib(default=1.0)
    spindles_total = attr.ib(default=None)
    spindles_used = attr.ib(default=0)
    #: the hypervisor's instances (which run), as the node reported them
    hv_instances = attr.ib(default=None)
    reason = attr.ib(default=None)     # why there is no live data

    @property
    def free_memory(self):
        if self.mfree is None:
            return None
        return self.mfree - self.reserved_memory

    @property
    def free_disk(self):
        return self.dfree

    @property
    def free_vcpus(self):
        if self.ctotal is None:
            return None
        return (int(math.floor(self.ctotal * self.vcpu_ratio))
                - (self.cnos or 0) - self.vcpus_used)

    @property
    def free_spindles(self):
        if self.spindles_total is None:
            return None
        return self.spindles_total - self.spindles_used

    def free(self, resource):
        return getattr(self, "free_" + resource)


def _number(data, key):
    """``data[key]`` as an int (numeric strings too), None if unusable."""
    value = (data or {}).get(key)
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def apply_overrides(live, hv_static, disk_static):
    """The node's reported figures after the admin's overrides (a dict with
    the same keys as ``live``; see the module's doc)."""
    result = dict(live or {})
    mtotal, mnode, mfree = (_number(live, k)
                            for k in ("mtotal", "mnode", "mfree"))
    cut = 0
    cap = _number(hv_static, constants.HVST_MEMORY_TOTAL)
    if cap is not None and mtotal is not None and cap < mtotal:
        cut += mtotal - cap
        result["mtotal"] = cap
    node_mem = _number(hv_static, constants.HVST_MEMORY_NODE)
    if node_mem is not None and mnode is not None and node_mem > mnode:
        cut += node_mem - mnode
        result["mnode"] = node_mem
    if mfree is not None and cut:
        result["mfree"] = max(0, mfree - cut)
    cpus = _number(hv_static, constants.HVST_CPU_TOTAL)
    ctotal = _number(live, "ctotal")
    if cpus is not None and ctotal is not None and cpus < ctotal:
        result["ctotal"] = cpus
    cpu_node = _number(hv_static, constants.HVST_CPU_NODE)
    if cpu_node is not None and ctotal is not None:
        result["cnos"] = cpu_node
    reserved = sum(_number(values, constants.DS_DISK_RESERVED) or 0
                   for units in (disk_static or {}).values()
                   if isinstance(units, dict)
                   for values in units.values() if isinstance(values, dict))
    dfree = _number(live, "dfree")
    if dfree is not None and reserved:
        result["dfree"] = max(0, dfree - reserved)
    return result


def is_running(instance, hv_instances):
    """Whether the hypervisor data of its primary node shows ``instance``
    holding its memory there (unknown data: it does not)."""
    if instance.forthcoming or not instance.name or not hv_instances:
        return False
    info = hv_instances.get(instance.name)
    return isinstance(info, dict) and info.get("state") in RUNNING_STATES


@attr.s(frozen=True)
class InstanceNeeds(object):
    """Resources one instance takes, per node."""
    memory = attr.ib(default=0)
    vcpus = attr.ib(default=0)
    spindles = attr.ib(default=0)
    disk_per_node = attr.ib(factory=dict)  # node uuid -> MiB


class Accounting(object):
    """Mixin of ConfigStore: resources per node and instance."""

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

    def node_resources(self, node_uuid, live=None, hv_instances=None,
                       reason=None):
        """:class:`NodeResources` of a node from its live data (a
        ``nodes_runtime`` answer, None if it gave none) and its hypervisor's
        instances (an ``instances_runtime`` answer); ``reason`` says why
        there is no live data."""
        node = self.get_node(node_uuid)
        return self.nodes_resources(
            [node.uuid], {node.uuid: live}, {node.uuid: hv_instances},
            {node.uuid: reason})[node.uuid]

    def nodes_resources(self, node_uuids, live, hv_instances, reasons=None):
        """:meth:`node_resources` of several nodes, in one pass over the
        instances; ``live``, ``hv_instances`` and ``reasons`` map node
        UUIDs to what :meth:`node_resources` takes."""
        wanted = set(node_uuids)
        tally = {uuid: [0, 0, 0, 0] for uuid in wanted}  # mem disk cpu spn
        for inst in self.instances.values():
            nodes = set(inst.all_nodes)
            for disk in self.instance_disks(inst):
                nodes.update(disk.nodes or ())
            for uuid in nodes & wanted:
                held = self._held(inst, uuid, hv_instances.get(uuid))
                entry = tally[uuid]
                if not held.running:
                    entry[0] += held.memory
                entry[1] += held.reserved_disk
                entry[2] += held.vcpus
                entry[3] += held.spindles
        result = {}
        for uuid in node_uuids:
            result[uuid] = self._resources(
                self.get_node(uuid), live.get(uuid), hv_instances.get(uuid),
                (reasons or {}).get(uuid), tally[uuid])
        return result

    def _resources(self, node, live, hv_instances, reason, tally):
        group = self.nodegroups.get(node.group)
        policy = objects.fill_group_ipolicy(self.cluster, group)
        nd = objects.fill_ndparams(self.cluster, group, node)
        hv_static = (node.hv_state_static or {}).get(
            self.cluster.default_hypervisor, {})
        reported = apply_overrides(live, hv_static, node.disk_state_static)
        reserved_mem, reserved_disk, vcpus, spindles = tally
        dfree = _number(reported, "dfree")
        if dfree is not None:
            dfree -= reserved_disk
        if live is None and reason is None:
            reason = ("node %s is offline" % node.name if node.offline
                      else "node %s gave no live data" % node.name)
        return NodeResources(
            node=node, mtotal=_number(reported, "mtotal"),
            mnode=_number(reported, "mnode"),
            mfree=_number(reported, "mfree"),
            dtotal=_number(reported, "dtotal"), dfree=dfree,
            ctotal=_number(reported, "ctotal"),
            cnos=_number(reported, "cnos"),
            reserved_memory=reserved_mem, reserved_disk=reserved_disk,
            vcpus_used=vcpus,
            vcpu_ratio=policy[constants.IPOLICY_VCPU_RATIO],
            spindles_total=int(nd[constants.ND_SPINDLE_COUNT]
                               * policy[constants.IPOLICY_SPINDLE_RATIO]),
            spindles_used=spindles, hv_instances=hv_instances,
            reason=reason if live is None else None)

    def _held(self, inst, node_uuid, hv_instances):
        """What ``inst`` takes from ``node_uuid`` in the node's figures."""
        disks = [d for d in self.instance_disks(inst)
                 if d.dev_type in constants.DTS_NODE_LOCAL and
                 node_uuid in (d.nodes or inst.all_nodes)]
        disk = sum(d.storage_size() for d in disks)
        reserved_disk = sum(d.storage_size() for d in disks
                            if d.forthcoming or inst.forthcoming)
        if inst.primary_node != node_uuid:
            return _Held(disk=disk, reserved_disk=reserved_disk)
        needs = self.instance_needs(inst)
        if inst.admin_state == constants.ADMINST_OFFLINE and \
                not inst.forthcoming:
            # may not start: only its disks and spindles count
            return _Held(disk=disk, reserved_disk=reserved_disk,
                         spindles=needs.spindles)
        running = is_running(inst, hv_instances)
        memory = needs.memory
        if running:
            memory = int(hv_instances[inst.name].get("memory") or 0)
        return _Held(memory=memory, running=running, disk=disk,
                     reserved_disk=reserved_disk, vcpus=needs.vcpus,
                     spindles=needs.spindles)

    def check_instance_fits(self, instance, resources, disks=None,
                            beparams=None, only=None):
        """Raise OpPrereqError(ECODE_NORES) unless ``instance`` (with the
        given disks and beparams) fits on its nodes.

        ``resources`` maps node UUID to :class:`NodeResources`.  What the
        instance already holds on a node (as configured now) counts as
        available to it, so this checks adding an instance, changing it,
        and moving it to other nodes alike.  A node without live data
        refuses (ECODE_ENVIRON), naming why.  ``only`` limits the check to
        some resources (memory, disk, vcpus, spindles).
        """
        current = self.instances.get(instance.uuid)
        for node_uuid, want in sorted(self.instance_wants(
                instance, disks=disks, beparams=beparams).items()):
            res = resources[node_uuid]
            held = (self._held(current, node_uuid, res.hv_instances)
                    if current is not None else _Held())
            for what, amount in sorted(want.items()):
                if only is not None and what not in only:
                    continue
                needed = amount - getattr(held, what)
                if needed <= 0:
                    continue
                free = res.free(what)
                if free is None:
                    raise errors.OpPrereqError(
                        "Cannot check the free %s of node %s for instance %s:"
                        " %s" % (what, res.node.name, instance.display_name,
                                 res.reason or "the node does not report it"),
                        errors.ECODE_ENVIRON if res.reason
                        else errors.ECODE_NORES)
                if needed > free:
                    raise errors.OpPrereqError(
                        "Not enough %s on node %s for instance %s: needed"
                        " %s, available %s%s"
                        % (what, res.node.name, instance.display_name,
                           _amount(what, needed), _amount(what, free),
                           _explain(what, res)), errors.ECODE_NORES)

    def instance_growth(self, instance, disks=None, beparams=None):
        """The resources ``instance`` (as changed) would take more of than
        it holds as configured now (a stopped instance's memory counts as
        held): what a change must be checked for, without asking nodes."""
        current = self.instances.get(instance.uuid)
        grown = set()
        for node_uuid, want in self.instance_wants(
                instance, disks=disks, beparams=beparams).items():
            held = (self._held(current, node_uuid, None)
                    if current is not None else _Held())
            grown.update(what for what, amount in want.items()
                         if amount > getattr(held, what))
        return grown

    def instance_wants(self, instance, disks=None, beparams=None):
        """{node uuid: {resource: amount}} ``instance`` takes."""
        needs = self.instance_needs(instance, beparams=beparams, disks=disks)
        wants = {}

        def uuid(node):         # a node named by name or UUID
            return node if node in self.nodes else self.get_node(node).uuid
        if instance.primary_node:
            wants[uuid(instance.primary_node)] = {
                "memory": needs.memory, "vcpus": needs.vcpus,
                "spindles": needs.spindles}
        for node, size in needs.disk_per_node.items():
            wants.setdefault(uuid(node), {})["disk"] = size
        return wants


@attr.s(frozen=True)
class _Held(object):
    """What one instance takes from one node (see Accounting._held)."""
    memory = attr.ib(default=0)     # live memory if running, else maxmem
    running = attr.ib(default=False)
    disk = attr.ib(default=0)
    reserved_disk = attr.ib(default=0)  # of it, disks not created yet
    vcpus = attr.ib(default=0)
    spindles = attr.ib(default=0)


def _amount(what, value):
    return "%s MiB" % value if what in ("memory", "disk") else str(value)


def _explain(what, res):
    """How the available amount came about, for the refusal."""
    if what == "memory":
        return (" (free %d MiB, %d MiB reserved for stopped and forthcoming"
                " instances)" % (res.mfree, res.reserved_memory))
    if what == "disk" and res.reserved_disk:
        return (" (%d MiB reserved for forthcoming instances)"
                % res.reserved_disk)
    if what == "vcpus":
        return (" (%d CPUs times %s, minus %d for the node, minus %d in use)"
                % (res.ctotal, res.vcpu_ratio, res.cnos or 0,
                   res.vcpus_used))
    return ""
