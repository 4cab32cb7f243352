"""Node query fields.

Besides Ganeti's fields, nodes have this project's capacity fields:

* ``alloc.mem``, ``alloc.disk``, ``alloc.vcpus``, ``alloc.spindles``: what
  the instances placed on the node take, from the configuration
  (``ConfigStore.node_usage``; forthcoming instances count as if real);
* ``reserved.mem``, ``reserved.disk``: what is promised but does not show
  in the node's own figures: the ``maxmem`` of its primary instances that
  are down but may start and of forthcoming ones, and the node-local disks
  of forthcoming instances;
* ``avail.mem``, ``avail.disk``, ``avail.vcpus``, ``avail.spindles``: what
  the master still admits there (``mfree`` minus ``reserved.mem``, and so
  on: ``ganeti.config.accounting``); unavailable, like the live fields,
  when the node gave no live data;
* ``forthcoming_cnt`` and ``forthcoming_list``: the reservations counted.

The live fields ``mtotal mnode mfree dtotal dfree ctotal cnos`` are the
node's figures after the admin's overrides (``hv_state``/``disk_state``),
and ``dfree`` counts the disks of forthcoming instances as used: the
numbers Ganeti's htools read are the numbers the master admits against.
"""

import copy

from ganeti import constants
from ganeti import objects
from ganeti.query import live
from ganeti.query import livecache
from ganeti.query.base import (Field, FieldTable, Resource, QFT_TEXT,
                               QFT_BOOL, QFT_NUMBER, QFT_UNIT, QFT_OTHER,
                               QFT_NUMBER_FLOAT, FF_HOSTNAME, NEED_LIVE_NODE,
                               NEED_LIVE_INST, UNAVAIL, NODATA, OFFLINE,
                               attr_getter,
                               common_fields, lookup_by_name, param_kind,
                               nice_sort)

ROLE_MASTER = "M"
ROLE_CANDIDATE = "C"
ROLE_DRAINED = "D"
ROLE_OFFLINE = "O"
ROLE_REGULAR = "R"


def node_role(cluster, node):
    if node.uuid == cluster.master_node:
        return ROLE_MASTER
    if node.master_candidate:
        return ROLE_CANDIDATE
    if node.drained:
        return ROLE_DRAINED
    if node.offline:
        return ROLE_OFFLINE
    return ROLE_REGULAR


def _instances_by_node(run):
    """({node: [primary instances]}, {node: [secondary instances]})."""
    def compute():
        primary = {}
        secondary = {}
        for inst in run.cfg.instances.values():
            if inst.primary_node:
                primary.setdefault(inst.primary_node, []).append(inst)
            for uuid in inst.secondary_nodes:
                secondary.setdefault(uuid, []).append(inst)
        return primary, secondary
    return run.memo("instances_by_node", compute)


def _inst_names(instances):
    return nice_sort(i.display_name for i in instances)


def allocation(run):
    """Per node: [memory, disk, vcpus, spindles, counted, forthcoming].

    One pass over the instances, with ConfigStore.node_usage's rules.
    """
    def compute():
        cfg = run.cfg
        usage = {}
        for inst in cfg.instances.values():
            needs = cfg.instance_needs(inst)
            nodes = set(needs.disk_per_node)
            nodes.update(inst.secondary_nodes)
            if inst.primary_node:
                nodes.add(inst.primary_node)
            for uuid in nodes:
                entry = usage.setdefault(uuid, [0, 0, 0, 0, [], []])
                if uuid == inst.primary_node:
                    entry[0] += needs.memory
                    entry[2] += needs.vcpus
                    entry[3] += needs.spindles
                entry[1] += needs.disk_per_node.get(uuid, 0)
                entry[4].append(inst)
                if inst.forthcoming:
                    entry[5].append(inst)
        return usage
    return run.memo("allocation", compute)


_ALLOC_INDEX = {"mem": 0, "disk": 1, "vcpus": 2, "spindles": 3}


def _alloc(resource):
    index = _ALLOC_INDEX[resource]

    def get(run, node):
        entry = allocation(run).get(node.uuid)
        return entry[index] if entry else 0
    return get


def _live_status(run, node):
    """Why the node has no live data (a Status), or None."""
    if node.offline:
        return OFFLINE
    if not node.vm_capable:
        return UNAVAIL
    if run.node_runtime.get(node.uuid) is None:
        return NODATA
    return None


def _resources(run, node):
    """The node's NodeResources from what this query collected (every
    node's in one pass over the instances)."""
    return run.memo("resources", lambda: run.cfg.nodes_resources(
        list(run.cfg.nodes), run.node_runtime, run.inst_runtime))[node.uuid]


def _config_resources(run, node):
    """The node's NodeResources as far as the configuration says."""
    return run.memo("config-resources", lambda: run.cfg.nodes_resources(
        list(run.cfg.nodes), {}, {}))[node.uuid]


def _capacity(value_of):
    """A getter of a NodeResources value (UNAVAIL when it is unknown)."""
    def get(run, node):
        status = _live_status(run, node)
        if status is not None:
            return status
        value = value_of(_resources(run, node))
        return UNAVAIL if value is None else value
    return get


def _group(run, node):
    return run.cfg.nodegroups.get(node.group)


def _group_attr(attr):
    def get(run, node):
        group = _group(run, node)
        return NODATA if group is None else getattr(group, attr)
    return get


def _ndparams(run, node):
    return run.memo(("nd", node.uuid), lambda: objects.fill_ndparams(
        run.cluster, _group(run, node), node))


def _ndp(name):
    def get(run, node):
        params = _ndparams(run, node)
        return params[name] if name in params else UNAVAIL
    return get


def _powered(run, node):
    # Only meaningful with an out-of-band program to switch the power.
    if not _ndparams(run, node).get(constants.ND_OOB_PROGRAM):
        return UNAVAIL
    return bool(node.powered)


#: live fields reported after overrides and reservations (NodeResources)
_ADJUSTED = frozenset(["mtotal", "mnode", "mfree", "dtotal", "dfree",
                       "ctotal", "cnos"])


def _live(key, kind):
    if key in _ADJUSTED:
        return _capacity(lambda res: getattr(res, key))

    def get(run, node):
        status = _live_status(run, node)
        if status is not None:
            return status
        value = run.node_runtime[node.uuid].get(key)
        if value is None:
            return UNAVAIL
        if kind in (QFT_NUMBER, QFT_UNIT):
            try:
                return int(value)
            except (TypeError, ValueError):
                return UNAVAIL
        return value
    return get


_LIVE_FIELDS = [
    ("bootid", "BootID", QFT_TEXT,
     "Random id the node picks at each boot (tells reboots apart)"),
    ("cnodes", "CNodes", QFT_NUMBER, "NUMA domains (if the hypervisor says)"),
    ("cnos", "CNOs", QFT_NUMBER,
     "Logical CPUs kept for the node's own OS (dom0 on Xen)"),
    ("csockets", "CSockets", QFT_NUMBER,
     "Physical CPU sockets (if the hypervisor says)"),
    ("ctotal", "CTotal", QFT_NUMBER, "Logical CPUs"),
    ("dfree", "DFree", QFT_UNIT,
     "Free space in the storage for instance disks (MiB)"),
    ("dtotal", "DTotal", QFT_UNIT,
     "Size of the storage for instance disks (MiB)"),
    ("spfree", "SpFree", QFT_NUMBER,
     "Free spindles (exclusive storage only)"),
    ("sptotal", "SpTotal", QFT_NUMBER,
     "Total spindles (exclusive storage only)"),
    ("mfree", "MFree", QFT_UNIT, "Memory free for instances (MiB)"),
    ("mnode", "MNode", QFT_UNIT,
     "Memory the node itself uses (dom0 on Xen) (MiB)"),
    ("mtotal", "MTotal", QFT_UNIT, "Physical memory of the node (MiB)"),
]

_NDP_TITLES = {
    constants.ND_EXCLUSIVE_STORAGE: "ExclusiveStorage",
    constants.ND_OOB_PROGRAM: "OutOfBandProgram",
    constants.ND_OVS: "OpenvSwitch",
    constants.ND_OVS_LINK: "OpenvSwitchLink",
    constants.ND_OVS_NAME: "OpenvSwitchName",
    constants.ND_SPINDLE_COUNT: "SpindleCount",
}


def ndp_fields(getter_for):
    """``ndp/<param>`` fields (shared with node groups)."""
    fields = []
    for name in sorted(constants.NDC_DEFAULTS):
        ptype = constants.NDS_PARAMETER_TYPES.get(name)
        if ptype == "float":
            kind = QFT_NUMBER_FLOAT
        elif ptype == "string":
            kind = QFT_OTHER
        else:
            kind = param_kind(constants.NDC_DEFAULTS[name])
        fields.append(Field("ndp/%s" % name,
                            _NDP_TITLES.get(name, "ndp/%s" % name), kind,
                            "Node parameter \"%s\" in effect" % name,
                            getter_for(name)))
    return fields


def build_fields():
    t = FieldTable()
    t.extend([
        Field("name", "Node", QFT_TEXT, "Node name", attr_getter("name"),
              flags=[FF_HOSTNAME]),
        Field("pip", "PrimaryIP", QFT_TEXT, "Primary IP address",
              attr_getter("primary_ip")),
        Field("sip", "SecondaryIP", QFT_TEXT,
              "Secondary IP address (replication network)",
              attr_getter("secondary_ip")),
        Field("master", "IsMaster", QFT_BOOL, "True for the master node",
              lambda run, node: node.uuid == run.cluster.master_node),
        Field("master_candidate", "MasterC", QFT_BOOL,
              "Whether the node is a master candidate",
              lambda run, node: bool(node.master_candidate)),
        Field("master_capable", "MasterCapable", QFT_BOOL,
              "Whether the node may become a master candidate",
              lambda run, node: bool(node.master_capable)),
        Field("vm_capable", "VMCapable", QFT_BOOL,
              "Whether the node may host instances",
              lambda run, node: bool(node.vm_capable)),
        Field("offline", "Offline", QFT_BOOL, "Whether the node is offline",
              lambda run, node: bool(node.offline)),
        Field("drained", "Drained", QFT_BOOL,
              "Whether the node is drained (gets no new instances)",
              lambda run, node: bool(node.drained)),
        Field("role", "Role", QFT_TEXT,
              "Role: M (master), C (master candidate), R (regular),"
              " D (drained), O (offline)",
              lambda run, node: node_role(run.cluster, node)),
        Field("group", "Group", QFT_TEXT, "Name of the node's group",
              _group_attr("name")),
        Field("group.uuid", "GroupUUID", QFT_TEXT, "UUID of the node's group",
              _group_attr("uuid")),
        Field("powered", "Powered", QFT_BOOL,
              "Whether the node is believed to be powered on (only with an"
              " out-of-band program)", _powered),
        Field("ndparams", "NodeParameters", QFT_OTHER,
              "Node parameters in effect (cluster, group and node merged)",
              lambda run, node: copy.deepcopy(_ndparams(run, node))),
        Field("custom_ndparams", "CustomNodeParameters", QFT_OTHER,
              "Node parameters set on the node itself",
              lambda run, node: copy.deepcopy(node.ndparams or {})),
        Field("hv_state", "HypervisorState", QFT_OTHER,
              "Hypervisor state as last recorded",
              lambda run, node: copy.deepcopy(node.hv_state or {})),
        Field("disk_state", "DiskState", QFT_OTHER,
              "Storage state as last recorded",
              lambda run, node: copy.deepcopy(node.disk_state or {})),
        Field("pinst_cnt", "Pinst", QFT_NUMBER,
              "Number of instances with this node as primary",
              lambda run, node: len(_instances_by_node(run)[0]
                                    .get(node.uuid, ()))),
        Field("sinst_cnt", "Sinst", QFT_NUMBER,
              "Number of instances with this node as secondary",
              lambda run, node: len(_instances_by_node(run)[1]
                                    .get(node.uuid, ()))),
        Field("pinst_list", "PriInstances", QFT_OTHER,
              "Instances with this node as primary",
              lambda run, node: _inst_names(_instances_by_node(run)[0]
                                            .get(node.uuid, ()))),
        Field("sinst_list", "SecInstances", QFT_OTHER,
              "Instances with this node as secondary",
              lambda run, node: _inst_names(_instances_by_node(run)[1]
                                            .get(node.uuid, ()))),
    ])
    t.extend(ndp_fields(_ndp))
    for key, title, kind, doc in _LIVE_FIELDS:
        t.add(Field(key, title, kind, doc, _live(key, kind),
                    needs=NEED_LIVE_NODE))
    # This project's allocation fields (from the configuration only)
    t.extend([
        Field("alloc.mem", "AllocMem", QFT_UNIT,
              "Memory (maxmem) of the instances with this node as primary,"
              " forthcoming ones included (MiB)", _alloc("mem")),
        Field("alloc.disk", "AllocDisk", QFT_UNIT,
              "Node-local disk space of the instances on this node,"
              " forthcoming ones included (MiB)", _alloc("disk")),
        Field("alloc.vcpus", "AllocVCPUs", QFT_NUMBER,
              "VCPUs of the instances with this node as primary,"
              " forthcoming ones included", _alloc("vcpus")),
        Field("alloc.spindles", "AllocSpindles", QFT_NUMBER,
              "Spindles used by the instances with this node as primary,"
              " forthcoming ones included", _alloc("spindles")),
        Field("reserved.mem", "ReservedMem", QFT_UNIT,
              "Memory (maxmem) of the primary instances that are down but"
              " may start, and of forthcoming ones: promised, not in mfree"
              " (MiB)", _capacity(lambda res: res.reserved_memory),
              needs=NEED_LIVE_INST),
        Field("reserved.disk", "ReservedDisk", QFT_UNIT,
              "Node-local disks of forthcoming instances (already taken off"
              " dfree) (MiB)",
              lambda run, node: _config_resources(run, node).reserved_disk),
        Field("avail.mem", "AvailMem", QFT_UNIT,
              "Memory the master admits new demands against: mfree minus"
              " reserved.mem (MiB)",
              _capacity(lambda res: res.free_memory), needs=NEED_LIVE_INST),
        Field("avail.disk", "AvailDisk", QFT_UNIT,
              "Disk space the master admits new node-local disks against"
              " (dfree) (MiB)", _capacity(lambda res: res.free_disk),
              needs=NEED_LIVE_NODE),
        Field("avail.vcpus", "AvailVCPUs", QFT_NUMBER,
              "VCPUs still admitted: ctotal times the vcpu-ratio, minus"
              " cnos, minus the VCPUs of instances that are not offline",
              _capacity(lambda res: res.free_vcpus), needs=NEED_LIVE_NODE),
        Field("avail.spindles", "AvailSpindles", QFT_NUMBER,
              "Spindles (spindle_count times the spindle-ratio) minus"
              " alloc.spindles",
              lambda run, node: _config_resources(run, node).free_spindles),
        Field("forthcoming_cnt", "Forthcoming", QFT_NUMBER,
              "Number of forthcoming instances holding resources here",
              lambda run, node: len((allocation(run).get(node.uuid)
                                     or [[]] * 6)[5])),
        Field("forthcoming_list", "ForthcomingList", QFT_OTHER,
              "Forthcoming instances holding resources here (names, or"
              " UUIDs where unnamed)",
              lambda run, node: _inst_names((allocation(run).get(node.uuid)
                                             or [[]] * 6)[5])),
    ])
    t.extend(common_fields("Node"))
    return t


class NodeResource(Resource):
    name = "node"
    noun = "node"
    fields = build_fields()
    cacheable = True

    def items(self, run, names):
        nodes = run.cfg.nodes.values()
        if names is None:
            return list(nodes)
        return lookup_by_name(nodes, names, self.noun)

    def item_name(self, node):
        return node.name

    def collect(self, run, items, needs):
        """Node runtime data for the live fields; for the fields counting
        reservations also the hypervisors' instances (which are running)."""
        if NEED_LIVE_NODE not in needs and NEED_LIVE_INST not in needs:
            return None
        wanted = set(n.uuid for n in items
                     if not n.offline and n.vm_capable)

        def store(answer):
            data, unreachable = answer
            run.node_runtime.update(data)
            run.unreachable.update(unreachable)
            run.collected.add(NEED_LIVE_NODE)
            if NEED_LIVE_INST not in needs:
                return None
            return live.fetch_instances_runtime(
                run.ctx.live, set(data)).addCallback(store_instances)

        def store_instances(answer):
            data, unreachable = answer
            run.inst_runtime.update(data)
            run.unreachable.update(unreachable)
            for uuid in unreachable:
                # without its instances, the node's reservations are unknown
                run.node_runtime.pop(uuid, None)
            run.collected.add(NEED_LIVE_INST)
        d = live.fetch_nodes_runtime(run.ctx.live, wanted)
        return d.addCallback(store)

    def live_kinds(self, needs):
        if NEED_LIVE_NODE not in needs and NEED_LIVE_INST not in needs:
            return frozenset()
        kinds = set([livecache.KIND_NODES])
        if NEED_LIVE_INST in needs:
            kinds.add(livecache.KIND_INSTANCES)
        return frozenset(kinds)

    def load_snapshots(self, run, snapshots):
        """As :meth:`collect` for every node: the resources of the online
        vm-capable ones; the hypervisors' instances of those that gave
        them (a node whose instances are unknown has no live data)."""
        nodes = snapshots.get(livecache.KIND_NODES)
        if nodes is None:
            return
        wanted = {u for u, n in run.cfg.nodes.items()
                  if not n.offline and n.vm_capable}
        run.node_runtime.update((u, d) for u, d in nodes.data.items()
                                if u in wanted)
        run.unreachable.update(nodes.unreachable & wanted)
        run.collected.add(NEED_LIVE_NODE)
        instances = snapshots.get(livecache.KIND_INSTANCES)
        if instances is None:
            return
        answered = set(run.node_runtime)
        run.inst_runtime.update((u, d) for u, d in instances.data.items()
                                if u in answered)
        for uuid in instances.unreachable & answered:
            run.unreachable.add(uuid)
            run.node_runtime.pop(uuid, None)
        run.collected.add(NEED_LIVE_INST)


assert set(k for k, _, _, _ in _LIVE_FIELDS) == set(live.NODE_LIVE_KEYS)
