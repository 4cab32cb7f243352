"""Instance query fields.

A forthcoming instance may lack every attribute but its UUID: its ``name``
field shows the UUID while it has no name (as htools expect), and other
missing attributes are RS_UNAVAIL.  It has no hypervisor presence and no
node is asked about it: ``oper_state`` is false, ``oper_ram`` and
``oper_vcpus`` are RS_UNAVAIL, and ``status`` follows the "not running"
rules (normally ``ADMIN_down``) even when its primary node is offline or
unreachable.
"""

import copy

from ganeti import constants
from ganeti import leases
from ganeti import objects
from ganeti.query import live
from ganeti.query import livecache
from ganeti.query.base import (Field, FieldTable, Resource, QFT_TEXT,
                               QFT_BOOL, QFT_NUMBER, QFT_UNIT, QFT_OTHER,
                               QFT_TIMESTAMP,
                               FF_HOSTNAME, NEED_LIVE_INST, UNAVAIL, NODATA,
                               OFFLINE, attr_getter, common_fields,
                               lookup_by_name, param_kind)

# --- per-query memoised lookups ---------------------------------------------


def _disks(run, inst):
    def compute():
        disks = run.cfg.disks
        return [disks[u] for u in inst.disks if u in disks]
    return run.memo(("disks", inst.uuid), compute)


def _hvparams(run, inst):
    """objects.fill_hvparams, with the cluster/OS part computed once."""
    def compute():
        key = ("hv_base", inst.hypervisor, inst.os)
        base = run.memo(key, lambda: objects.fill_hvparams(
            run.cluster, objects.Instance(hypervisor=inst.hypervisor,
                                          os=inst.os)))
        result = dict(base)
        if inst.hvparams:
            result.update(inst.hvparams)
            for name in constants.HVC_GLOBALS:
                result.pop(name, None)
        return result
    return run.memo(("hv", inst.uuid), compute)


def _beparams(run, inst):
    """objects.fill_beparams, with the cluster part computed once."""
    def compute():
        base = run.memo("be_base", lambda: objects.fill_beparams(
            run.cluster, objects.Instance()))
        result = dict(base)
        if inst.beparams:
            result.update(inst.beparams)
        return result
    return run.memo(("be", inst.uuid), compute)


def _pnode_group(run, inst):
    node = run.cfg.nodes.get(inst.primary_node)
    return run.cfg.nodegroups.get(node.group) if node is not None else None


def _nicparams(run, inst):
    def compute():
        group = _pnode_group(run, inst)
        return [objects.fill_nicparams(run.cluster, nic, group)
                for nic in inst.nics]
    return run.memo(("nic", inst.uuid), compute)


def _where(run, inst):
    return run.memo(("where", inst.uuid), lambda: live.locate_instance(
        inst, run.node_offline, run.unreachable, run.inst_runtime))


def _node_name(run, uuid):
    node = run.cfg.nodes.get(uuid)
    return node.name if node is not None else NODATA


# --- getters --------------------------------------------------------------

def _name(_run, inst):
    return inst.display_name


def _pnode(run, inst):
    if not inst.primary_node:
        return UNAVAIL
    return _node_name(run, inst.primary_node)


def _pnode_group_attr(attr):
    def get(run, inst):
        if not inst.primary_node:
            return UNAVAIL
        group = _pnode_group(run, inst)
        return NODATA if group is None else getattr(group, attr)
    return get


def _snodes(run, inst):
    names = [_node_name(run, u) for u in inst.secondary_nodes]
    return NODATA if NODATA in names else names


def _snodes_group_attr(attr):
    def get(run, inst):
        result = []
        for uuid in inst.secondary_nodes:
            node = run.cfg.nodes.get(uuid)
            group = run.cfg.nodegroups.get(node.group) if node else None
            if group is not None:
                result.append(getattr(group, attr))
        return result
    return get


def _disk_template(run, inst):
    disks = _disks(run, inst)
    if not disks and inst.disk_template:
        return inst.disk_template
    return objects.disk_template_of(disks)


def _lease_until(_run, inst):
    until = leases.lease_of(inst)
    return UNAVAIL if until is None else until


def _lease_state(run, inst):
    # It changes with the time, not only with the configuration: the
    # master's lease service tells the query cache when it does
    # (QueryCache.time_changed), so it is not a volatile field.
    window = run.memo("lease_window",
                      lambda: leases.warning_window(run.cluster))
    return leases.state(inst, run.now(), window)


def _autorepair(run, inst):
    from ganeti.watcher.autorepair import report
    return run.memo(("autorepair", inst.uuid),
                    lambda: report.describe(run.cfg, inst))


def _autorepair_summary(run, inst):
    from ganeti.watcher.autorepair import report
    return report.summary(_autorepair(run, inst))


def _disk_usage(run, inst):
    return sum(d.storage_size() for d in _disks(run, inst))


def _disk_list(attr):
    return lambda run, inst: [getattr(d, attr) for d in _disks(run, inst)]


def _disk_index(index, attr):
    def get(run, inst):
        disks = _disks(run, inst)
        if index >= len(disks):
            return UNAVAIL
        value = getattr(disks[index], attr)
        return UNAVAIL if value is None else value
    return get


def _nic_network_name(run, uuid):
    if not uuid:
        return None
    net = run.cfg.networks.get(uuid)
    return net.name if net is not None else None


def _nic_values(kind, run, inst):
    """One value per NIC of ``kind`` (an attribute or a filled param)."""
    if kind in ("mac", "ip", "name", "uuid", "network"):
        return [getattr(nic, kind) for nic in inst.nics]
    if kind == "network.name":
        return [_nic_network_name(run, nic.network) for nic in inst.nics]
    params = _nicparams(run, inst)
    if kind == "bridge":
        return [p.get(constants.NIC_LINK)
                if p.get(constants.NIC_MODE) == constants.NIC_MODE_BRIDGED
                else None for p in params]
    return [p.get(kind) for p in params]


def _nic_list(kind):
    return lambda run, inst: _nic_values(kind, run, inst)


def _nic_index(index, kind):
    def get(run, inst):
        if index >= len(inst.nics):
            return UNAVAIL
        value = _nic_values(kind, run, inst)[index]
        return UNAVAIL if value is None else value
    return get


def _hv_param(name):
    def get(run, inst):
        params = _hvparams(run, inst)
        return params[name] if name in params else UNAVAIL
    return get


def _be_param(name):
    def get(run, inst):
        params = _beparams(run, inst)
        return params[name] if name in params else UNAVAIL
    return get


def _custom(attr):
    return lambda _run, inst: copy.deepcopy(getattr(inst, attr) or {})


def _oper_state(run, inst):
    where, info = _where(run, inst)
    if where in (live.WHERE_OFFLINE, live.WHERE_NODATA):
        return NODATA
    if where == live.WHERE_PRIMARY:
        return info.get("state") != live.HV_SHUTDOWN
    return where == live.WHERE_WRONGNODE


def _oper_hvstate(run, inst):
    """What the primary node's hypervisor says of the instance's domain,
    kept ones included (a crashed domain counts as not running for every
    other field)."""
    pnode = inst.primary_node
    if inst.forthcoming or not pnode:
        return None
    if run.node_offline(pnode):
        return OFFLINE
    if pnode in run.unreachable or pnode not in run.inst_runtime:
        return NODATA
    info = run.inst_runtime[pnode].get(inst.name)
    if not isinstance(info, dict):
        return None
    return info.get("state")


def _oper_value(key):
    def get(run, inst):
        where, info = _where(run, inst)
        if where == live.WHERE_OFFLINE:
            return OFFLINE
        if where == live.WHERE_NODATA:
            return NODATA
        if info is None or info.get(key) is None:
            return UNAVAIL
        try:
            return int(info[key])
        except (TypeError, ValueError):
            return UNAVAIL
    return get


def _console(run, inst):
    """The console description of an instance its primary node runs."""
    from ganeti.cmdlib import instance_console
    where, info = _where(run, inst)
    if where != live.WHERE_PRIMARY or info is None or \
            info.get("state") not in (live.HV_RUNNING, live.HV_PAUSED):
        return UNAVAIL
    node = run.cfg.nodes.get(inst.primary_node)
    return instance_console.console_description(
        run.cluster, inst, node, _pnode_group(run, inst),
        _hvparams(run, inst), root=getattr(run.ctx, "root", "/"))


def _status(run, inst):
    where, info = _where(run, inst)
    hvparams = None
    if where == live.WHERE_PRIMARY:
        hvparams = _hvparams(run, inst)
    return live.instance_status(run.cluster, inst, where, info, hvparams)


# --- the table ------------------------------------------------------------

_ORDINALS = {1: "st", 2: "nd", 3: "rd"}


def _ordinal(n):
    suffix = "th" if 10 <= n % 100 <= 20 else _ORDINALS.get(n % 10, "th")
    return "%d%s" % (n, suffix)


# Column titles Ganeti's command line shows for hypervisor parameters
_HV_TITLES = {
    "acpi": "ACPI", "boot_order": "Boot_order",
    "cdrom_image_path": "CDROM_image_path", "disk_type": "Disk_type",
    "initrd_path": "Initrd_path", "kernel_path": "Kernel_path",
    "nic_type": "NIC_type", "pae": "PAE", "vnc_bind_address":
    "VNC_bind_address", "cpu_type": "cpu_type", "pci_pass": "pci_pass",
}
_BE_TITLES = {
    constants.BE_AUTO_BALANCE: "Auto_balance",
    constants.BE_MAXMEM: "ConfigMaxMem",
    constants.BE_MINMEM: "ConfigMinMem",
    constants.BE_VCPUS: "ConfigVCPUs",
}

_NIC_INDEXED = [
    # (field prefix, value kind, title prefix, what)
    ("nic.ip", "ip", "NicIP", "IP address"),
    ("nic.mac", "mac", "NicMAC", "MAC address"),
    ("nic.name", "name", "NicName", "name"),
    ("nic.uuid", "uuid", "NicUUID", "UUID"),
    ("nic.mode", constants.NIC_MODE, "NicMode", "mode"),
    ("nic.link", constants.NIC_LINK, "NicLink", "link"),
    ("nic.bridge", "bridge", "NicBridge", "bridge (bridged mode only)"),
    ("nic.vlan", constants.NIC_VLAN, "NicVLAN", "VLAN"),
    ("nic.network", "network", "NicNetwork", "network UUID"),
    ("nic.network.name", "network.name", "NicNetworkName", "network name"),
]
_NIC_LISTS = [
    ("nic.macs", "mac", "NIC_MACs", "MAC address"),
    ("nic.ips", "ip", "NIC_IPs", "IP address (null if none)"),
    ("nic.names", "name", "NIC_Names", "name"),
    ("nic.uuids", "uuid", "NIC_UUIDs", "UUID"),
    ("nic.modes", constants.NIC_MODE, "NIC_modes", "mode"),
    ("nic.links", constants.NIC_LINK, "NIC_links", "link"),
    ("nic.vlans", constants.NIC_VLAN, "NIC_VLANs", "VLAN"),
    ("nic.bridges", "bridge", "NIC_bridges",
     "bridge (null unless in bridged mode)"),
    ("nic.networks", "network", "NIC_networks", "network UUID (or null)"),
    ("nic.networks.names", "network.name", "NIC_networks_names",
     "network name (or null)"),
]


def _hv_param_kinds():
    kinds = {}
    for params in constants.HVC_DEFAULTS.values():
        for name, value in params.items():
            if name not in constants.HVC_GLOBALS:
                kinds.setdefault(name, param_kind(value))
    return kinds


def build_fields():
    t = FieldTable()
    t.extend([
        Field("name", "Instance", QFT_TEXT,
              "Instance name (the UUID for a forthcoming instance that has"
              " no name yet)", _name, flags=[FF_HOSTNAME]),
        Field("os", "OS", QFT_TEXT, "Operating system (OS definition name)",
              attr_getter("os")),
        Field("hypervisor", "Hypervisor", QFT_TEXT,
              "Hypervisor the instance runs under", attr_getter("hypervisor")),
        Field("pnode", "Primary_node", QFT_TEXT, "Name of the primary node",
              _pnode, flags=[FF_HOSTNAME]),
        Field("pnode.group", "PrimaryNodeGroup", QFT_TEXT,
              "Node group of the primary node", _pnode_group_attr("name")),
        Field("pnode.group.uuid", "PrimaryNodeGroupUUID", QFT_TEXT,
              "UUID of the primary node's group", _pnode_group_attr("uuid")),
        Field("snodes", "Secondary_Nodes", QFT_OTHER,
              "Names of the secondary nodes (one for DRBD)", _snodes),
        Field("snodes.group", "SecondaryNodesGroups", QFT_OTHER,
              "Node groups of the secondary nodes",
              _snodes_group_attr("name")),
        Field("snodes.group.uuid", "SecondaryNodesGroupsUUID", QFT_OTHER,
              "UUIDs of the secondary nodes' groups",
              _snodes_group_attr("uuid")),
        Field("admin_state", "InstanceState", QFT_TEXT,
              "Desired state: up, down or offline",
              attr_getter("admin_state")),
        Field("admin_up", "Autostart", QFT_BOOL,
              "True if the desired state is up",
              lambda run, inst: inst.admin_state == constants.ADMINST_UP),
        Field("admin_state_source", "InstanceStateSource", QFT_TEXT,
              "Who set the desired state last: admin or user",
              attr_getter("admin_state_source")),
        Field("disks_active", "DisksActive", QFT_BOOL,
              "Whether the instance's disks should be active",
              lambda run, inst: bool(inst.disks_active)),
        Field("forthcoming", "Forthcoming", QFT_BOOL,
              "True for a reservation (forthcoming instance) that does not"
              " exist yet", lambda run, inst: bool(inst.forthcoming)),
        Field("lease_until", "LeaseUntil", QFT_TIMESTAMP,
              "When the lease of a forthcoming instance ends (the"
              " reservation is then removed); unavailable without a lease",
              _lease_until),
        Field("lease_state", "LeaseState", QFT_TEXT,
              "State of a forthcoming instance's lease: active, expiring"
              " (within the cluster's warning window of its end), expired"
              " (its removal is due), or empty without a lease",
              _lease_state),
        Field("disk_template", "Disk_template", QFT_TEXT,
              "Disk template, derived from the disks (\"mixed\" if they"
              " differ)", _disk_template),
        Field("autorepair.state", "AutoRepair", QFT_TEXT,
              "Auto-repair state: healthy, needs <type>, pending <type>"
              " (jobs), failed or suspended", _autorepair_summary,
              volatile=True),
        Field("autorepair", "AutoRepairInfo", QFT_OTHER,
              "Auto-repair: state, policy, allowed type and where it comes"
              " from, what is needed, the pending repair and the last"
              " result", _autorepair, volatile=True),
        Field("network_port", "Network_port", QFT_OTHER,
              "Port allocated to the instance (e.g. for VNC), or null",
              lambda run, inst: inst.network_port),
        # live data
        Field("oper_state", "Running", QFT_BOOL,
              "Whether the hypervisor runs the instance", _oper_state,
              needs=NEED_LIVE_INST),
        Field("console", "Console", QFT_OTHER,
              "How to reach the console of the running instance (kind"
              " ssh, vnc, spice or msg; see docs/instances.rst)",
              _console, needs=NEED_LIVE_INST),
        Field("oper_hvstate", "HvState", QFT_TEXT,
              "The state of the instance's domain on its primary node:"
              " running, paused, shutdown (kept after the guest powered"
              " itself off), crashed (kept after a failure), or null if the"
              " hypervisor has none", _oper_hvstate, needs=NEED_LIVE_INST),
        Field("oper_ram", "Memory", QFT_UNIT,
              "Memory the hypervisor reports for the instance (MiB)",
              _oper_value("memory"), needs=NEED_LIVE_INST),
        Field("oper_vcpus", "VCPUs", QFT_NUMBER,
              "Virtual CPUs the hypervisor reports for the instance",
              _oper_value("vcpus"), needs=NEED_LIVE_INST),
        Field("status", "Status", QFT_TEXT,
              "Desired and actual state combined: running, ADMIN_down,"
              " ADMIN_offline, USER_down, ERROR_up, ERROR_down,"
              " ERROR_nodedown, ERROR_nodeoffline or ERROR_wrongnode",
              _status, needs=NEED_LIVE_INST),
        # disks
        Field("disk_usage", "DiskUsage", QFT_UNIT,
              "Storage the disks take on each of their nodes (MiB, DRBD"
              " metadata included)", _disk_usage),
        Field("disk.count", "Disks", QFT_NUMBER, "Number of disks",
              lambda run, inst: len(_disks(run, inst))),
        Field("disk.sizes", "Disk_sizes", QFT_OTHER,
              "Size of each disk (MiB)", _disk_list("size")),
        Field("disk.spindles", "Disk_spindles", QFT_OTHER,
              "Spindles of each disk (null where not set)",
              _disk_list("spindles")),
        Field("disk.names", "Disk_names", QFT_OTHER, "Name of each disk",
              _disk_list("name")),
        Field("disk.uuids", "Disk_UUIDs", QFT_OTHER, "UUID of each disk",
              _disk_list("uuid")),
        # NICs
        Field("nic.count", "NICs", QFT_NUMBER, "Number of network interfaces",
              lambda run, inst: len(inst.nics)),
    ])
    for name, kind, title, what in _NIC_LISTS:
        t.add(Field(name, title, QFT_OTHER,
                    "The %s of each network interface" % what,
                    _nic_list(kind)))
    # parameters
    t.extend([
        Field("hvparams", "HypervisorParameters", QFT_OTHER,
              "Hypervisor parameters in effect (defaults filled in)",
              lambda run, inst: copy.deepcopy(_hvparams(run, inst))),
        Field("beparams", "BackendParameters", QFT_OTHER,
              "Backend parameters in effect (defaults filled in)",
              lambda run, inst: copy.deepcopy(_beparams(run, inst))),
        Field("osparams", "OpSysParameters", QFT_OTHER,
              "OS parameters in effect (defaults filled in)",
              lambda run, inst: objects.fill_osparams(run.cluster, inst)),
        Field("custom_hvparams", "CustomHypervisorParameters", QFT_OTHER,
              "Hypervisor parameters set on the instance itself",
              _custom("hvparams")),
        Field("custom_beparams", "CustomBackendParameters", QFT_OTHER,
              "Backend parameters set on the instance itself",
              _custom("beparams")),
        Field("custom_osparams", "CustomOpSysParameters", QFT_OTHER,
              "OS parameters set on the instance itself",
              _custom("osparams")),
        Field("custom_nicparams", "CustomNicParameters", QFT_OTHER,
              "NIC parameters set on each network interface",
              lambda run, inst: [copy.deepcopy(n.nicparams or {})
                                 for n in inst.nics]),
    ])
    for name, kind in sorted(_hv_param_kinds().items()):
        t.add(Field("hv/%s" % name, _HV_TITLES.get(name, "hv/%s" % name),
                    kind, "Hypervisor parameter \"%s\" in effect" % name,
                    _hv_param(name)))
    for name in sorted(constants.BEC_DEFAULTS):
        kind = param_kind(constants.BEC_DEFAULTS[name],
                          size=constants.BES_PARAMETER_TYPES.get(name)
                          == "size")
        t.add(Field("be/%s" % name, _BE_TITLES.get(name, "be/%s" % name),
                    kind, "Backend parameter \"%s\" in effect" % name,
                    _be_param(name)))
    t.extend(common_fields("Instance"))
    # indexed disk and NIC fields
    for index in range(constants.MAX_DISKS):
        nth = _ordinal(index + 1)
        t.extend([
            Field("disk.size/%d" % index, "Disk/%d" % index, QFT_UNIT,
                  "Size of the %s disk (MiB)" % nth,
                  _disk_index(index, "size")),
            Field("disk.spindles/%d" % index, "DiskSpindles/%d" % index,
                  QFT_NUMBER, "Spindles of the %s disk" % nth,
                  _disk_index(index, "spindles")),
            Field("disk.name/%d" % index, "DiskName/%d" % index, QFT_TEXT,
                  "Name of the %s disk" % nth, _disk_index(index, "name")),
            Field("disk.uuid/%d" % index, "DiskUUID/%d" % index, QFT_TEXT,
                  "UUID of the %s disk" % nth, _disk_index(index, "uuid")),
        ])
    for index in range(constants.MAX_NICS):
        nth = _ordinal(index + 1)
        for prefix, kind, title, what in _NIC_INDEXED:
            t.add(Field("%s/%d" % (prefix, index), "%s/%d" % (title, index),
                        QFT_TEXT, "The %s of the %s network interface"
                        % (what, nth), _nic_index(index, kind)))
    # Ganeti's aliases
    for alias, target in [
            ("vcpus", "be/vcpus"), ("be/memory", "be/maxmem"),
            ("sda_size", "disk.size/0"), ("sdb_size", "disk.size/1"),
            ("ip", "nic.ip/0"), ("mac", "nic.mac/0"),
            ("bridge", "nic.bridge/0"), ("nic_mode", "nic.mode/0"),
            ("nic_link", "nic.link/0"), ("nic_network", "nic.network/0")]:
        t.alias(alias, target)
    return t


def _instance_nodes(cfg):
    """The nodes the engine asks about instances: every existing, online
    node of an instance that is not forthcoming."""
    nodes = set()
    for inst in cfg.instances.values():
        if not inst.forthcoming:
            nodes.update(inst.all_nodes)
    return {u for u in nodes
            if u in cfg.nodes and not cfg.nodes[u].offline}


class InstanceResource(Resource):
    name = "instance"
    noun = "instance"
    fields = build_fields()
    cacheable = True

    def items(self, run, names):
        instances = run.cfg.instances.values()
        if names is None:
            return list(instances)
        return lookup_by_name(instances, names, self.noun,
                              display=lambda i: i.display_name)

    def item_name(self, inst):
        return inst.display_name

    def collect(self, run, items, needs):
        if NEED_LIVE_INST not in needs:
            return None
        # Ask the primary nodes, and the secondaries too: an instance that
        # runs on one of them (after a failed migration) is ERROR_wrongnode.
        node_uuids = set()
        for inst in items:
            if inst.forthcoming:
                continue
            for uuid in inst.all_nodes:
                if uuid in run.cfg.nodes and not run.node_offline(uuid):
                    node_uuids.add(uuid)

        def store(answer):
            data, unreachable = answer
            run.inst_runtime.update(data)
            run.unreachable.update(unreachable)
            run.collected.add(NEED_LIVE_INST)
        d = live.fetch_instances_runtime(run.ctx.live, node_uuids)
        return d.addCallback(store)

    def live_kinds(self, needs):
        if NEED_LIVE_INST in needs:
            return frozenset([livecache.KIND_INSTANCES])
        return frozenset()

    def load_snapshots(self, run, snapshots):
        snapshot = snapshots.get(livecache.KIND_INSTANCES)
        if snapshot is None:
            return
        # the nodes a query of every instance asks (a domain found on one
        # of them but not on its primary is ERROR_wrongnode)
        nodes = _instance_nodes(run.cfg)
        run.inst_runtime.update((u, d) for u, d in snapshot.data.items()
                                if u in nodes)
        run.unreachable.update(snapshot.unreachable & nodes)
        run.collected.add(NEED_LIVE_INST)
