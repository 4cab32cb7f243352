"""The iallocator input document, from the configuration and the nodes.

Top level (protocol version 2): ``version``, ``cluster_name``,
``cluster_tags``, ``enabled_hypervisors``, ``ipolicy``, ``nodegroups``
(by UUID), ``nodes`` (by name), ``instances`` (by name) and ``request``.

Nodes carry their configuration (tags, addresses, flags, group, filled
ndparams) and, when they answered, what they report: memory and CPUs from
the hypervisor, disk from the storage of the request's disk template.  As
Ganeti computes it, a node's ``free_memory`` is what its hypervisor reports
minus what its running instances may still grow into (their maximum memory
minus what they use now).  Stopped instances are left to the allocator,
which counts their memory as taken.

Forthcoming instances (reservations) count as if they were real: they are
listed like the others (a nameless one by its UUID), marked stopped, so
their memory is taken, and the disks they reserve are taken off their
nodes' ``free_disk`` (they do not exist on the node yet, so the node
cannot know).  A forthcoming instance without a node reserves nothing
anywhere and is left out.

A node that should have answered but did not is given to the allocator as
offline: nothing is placed on it.  A node the logical unit could not lock
(opportunistic locking: ``only_nodes``) is shown drained, with what it
reports: nothing new goes there, and the allocator's capacity checks still
see it as it is (docs/allocator.rst).
"""

import attr

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.config import accounting
from ganeti.iallocator import requests

__all__ = ["VERSION", "NodeLive", "storage_unit", "data_template",
           "build_input",
           "IPOLICY_KEYS"]

#: iallocator protocol version
VERSION = 2

#: the instance policy keys of Ganeti 3.0's protocol (Ganeti's hail refuses
#: any other)
IPOLICY_KEYS = (constants.ISPECS_MINMAX, constants.ISPECS_STD,
                constants.IPOLICY_DTS, constants.IPOLICY_VCPU_RATIO,
                constants.IPOLICY_SPINDLE_RATIO)

#: storage type of each disk template whose space is reported (Ganeti
#: reports file and LVM storage only; the others count as 0)
_REPORTED_STORAGE = {
    constants.DT_FILE: constants.ST_FILE,
    constants.DT_PLAIN: constants.ST_LVM_VG,
    constants.DT_DRBD8: constants.ST_LVM_VG,
}


@attr.s
class NodeLive(object):
    """What one node reported."""
    #: the hypervisor's node_info entry (memory_total, memory_free, ...)
    hv = attr.ib()
    #: node_info's storage entries ({"type", "name", "storage_size",
    #: "storage_free"[, "error"]})
    storage = attr.ib(factory=list)
    #: running instances: name -> {"memory": MiB, ...}; None if unknown
    instances = attr.ib(default=None)


def storage_unit(cluster, disk_template):
    """The ``[type, key, params]`` node_info is asked for, or None."""
    st = _REPORTED_STORAGE.get(disk_template)
    if st == constants.ST_FILE and cluster.file_storage_dir:
        return [st, cluster.file_storage_dir, []]
    if st == constants.ST_LVM_VG and cluster.volume_group_name:
        return [st, cluster.volume_group_name, []]
    return None


def data_template(cluster, request):
    """The disk template whose storage the nodes' disk figures are about:
    the request's, else the cluster's default (first enabled) one."""
    return request.template_for_data or (
        cluster.enabled_disk_templates[0]
        if cluster.enabled_disk_templates else None)


def _ipolicy(policy):
    return {k: policy[k] for k in IPOLICY_KEYS if k in policy}


def _int_attr(hv, node_name, key, default=None):
    value = hv.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.OpExecError(
            "Node '%s' returned an invalid value for '%s': %r (instance"
            " allocation needs it)" % (node_name, key, value))
    return value


class _Builder(object):

    def __init__(self, cfg, request, live, warn, only_nodes=None):
        self.cfg = cfg
        self.only_nodes = only_nodes
        self.cluster = cfg.cluster
        self.request = request
        self.live = live
        self.warn = warn or (lambda msg: None)
        self.template = data_template(self.cluster, request)
        # per instance and per node once, not once per node and instance
        self.be = {i.uuid: objects.fill_beparams(self.cluster, i)
                   for i in cfg.instances.values()}
        self.primaries = {}
        for inst in cfg.instances.values():
            self.primaries.setdefault(inst.primary_node, []).append(inst)
        self._reserved = None

    def build(self):
        c = self.cluster
        data = {
            "version": VERSION,
            "cluster_name": c.cluster_name,
            "cluster_tags": sorted(c.tags),
            "enabled_hypervisors": list(c.enabled_hypervisors),
            "ipolicy": _ipolicy(objects.fill_ipolicy(
                constants.IPOLICY_DEFAULTS, c.ipolicy)),
            "nodegroups": self.nodegroups(),
            "nodes": self.nodes(),
            "instances": self.instances(),
        }
        data["request"] = self.request.to_dict()
        return data

    # --- groups --------------------------------------------------------------

    def nodegroups(self):
        result = {}
        for group in self.cfg.nodegroups.values():
            result[group.uuid] = {
                "name": group.name,
                "alloc_policy": group.alloc_policy,
                "networks": sorted(group.networks or {}),
                "ipolicy": _ipolicy(objects.fill_group_ipolicy(
                    self.cluster, group)),
                "tags": sorted(group.tags),
            }
        return result

    # --- nodes ---------------------------------------------------------------

    def nodes(self):
        result = {}
        for node in sorted(self.cfg.nodes.values(), key=lambda n: n.name):
            group = self.cfg.nodegroups.get(node.group)
            static = {
                "tags": sorted(node.tags),
                "primary_ip": node.primary_ip,
                "secondary_ip": node.secondary_ip or node.primary_ip,
                "offline": bool(node.offline),
                "drained": bool(node.drained),
                "master_candidate": bool(node.master_candidate),
                "group": node.group,
                "master_capable": bool(node.master_capable),
                "vm_capable": bool(node.vm_capable),
                "ndparams": objects.fill_ndparams(self.cluster, group, node),
            }
            if self.only_nodes is not None and \
                    node.uuid not in self.only_nodes:
                # not locked by the caller: it must not be chosen
                static["drained"] = True
            if not node.offline and node.vm_capable:
                live = self.live.get(node.uuid)
                if live is None:
                    self.warn("Node %s did not report its resources; the"
                              " allocator sees it as offline" % node.name)
                    static["offline"] = True
                else:
                    static.update(self.dynamic(node, live))
            result[node.name] = static
        return result

    def dynamic(self, node, live):
        hv = live.hv or {}
        name = node.name
        mem_total = _int_attr(hv, name, "memory_total")
        mem_free = _int_attr(hv, name, "memory_free")
        mem_node = _int_attr(hv, name, "memory_dom0", 0)
        cpu_total = _int_attr(hv, name, "cpu_total")
        cpu_node = _int_attr(hv, name, "cpu_dom0", cpu_total)
        # the admin's overrides lower what the node offers, as node queries
        # and the master's own checks see it (docs/capacity.rst)
        adjusted = accounting.apply_overrides(
            {"mtotal": mem_total, "mnode": mem_node, "mfree": mem_free,
             "ctotal": cpu_total, "cnos": cpu_node},
            (node.hv_state_static or {}).get(
                self.cluster.default_hypervisor, {}), None)
        mem_total, mem_node, mem_free, cpu_total, cpu_node = (
            adjusted[k] for k in ("mtotal", "mnode", "mfree", "ctotal",
                                  "cnos"))
        pri_mem = pri_up_mem = 0
        running = live.instances or {}
        for inst in self.primaries.get(node.uuid, ()):
            maxmem = int(self.be[inst.uuid][constants.BE_MAXMEM])
            pri_mem += maxmem
            if inst.admin_state == constants.ADMINST_UP and \
                    not inst.forthcoming:
                used = (running.get(inst.name) or {}).get("memory") or 0
                mem_free -= max(0, maxmem - int(used))
                pri_up_mem += maxmem
        total_disk, free_disk = self.disk_space(node, live)
        return {
            "total_memory": mem_total,
            "reserved_memory": mem_node,
            "free_memory": mem_free,
            "total_disk": total_disk,
            "free_disk": free_disk,
            "total_spindles": 0,
            "free_spindles": 0,
            "total_cpus": cpu_total,
            "reserved_cpus": cpu_node,
            "i_pri_memory": pri_mem,
            "i_pri_up_memory": pri_up_mem,
        }

    def disk_space(self, node, live):
        st = _REPORTED_STORAGE.get(self.template)
        if st is None:
            return 0, 0
        for unit in live.storage or []:
            if unit.get("type") != st:
                continue
            size, free = unit.get("storage_size"), unit.get("storage_free")
            if not isinstance(size, int) or not isinstance(free, int):
                self.warn("Node %s could not report its %s storage %s (%s);"
                          " the allocator sees none"
                          % (node.name, st, unit.get("name"),
                             unit.get("error") or "no size: missing?"))
                return 0, 0
            kept = accounting.apply_overrides(
                {"dfree": free}, None, node.disk_state_static)["dfree"]
            return size, max(0, kept - self.reserved_disk(node, st))
        self.warn("Node %s did not report its %s storage; the allocator sees"
                  " none" % (node.name, st))
        return 0, 0

    def reserved_disk(self, node, storage_type):
        """MiB that forthcoming disks reserve on ``node`` in storage of
        ``storage_type``: they do not exist yet, the node does not know."""
        if self._reserved is None:
            self._reserved = {}
            for inst in self.cfg.instances.values():
                for disk in self.cfg.instance_disks(inst):
                    if not (disk.forthcoming or inst.forthcoming):
                        continue
                    kind = _REPORTED_STORAGE.get(disk.dev_type)
                    for uuid in disk.nodes or inst.all_nodes:
                        key = (uuid, kind)
                        self._reserved[key] = self._reserved.get(key, 0) + \
                            disk.storage_size()
        return self._reserved.get((node.uuid, storage_type), 0)

    # --- instances -----------------------------------------------------------

    def instances(self):
        result = {}
        c = self.cluster
        for inst in self.cfg.instances.values():
            nodes = [self.cfg.nodes[n].name for n in inst.all_nodes
                     if n in self.cfg.nodes]
            if not nodes:
                continue    # a reservation not placed anywhere
            be = self.be[inst.uuid]
            nics = []
            for nic in inst.nics:
                group = self.cfg.nodegroups.get(
                    self.cfg.nodes[inst.primary_node].group) \
                    if inst.primary_node in self.cfg.nodes else None
                filled = objects.fill_nicparams(c, nic, group)
                entry = {"mac": nic.mac, "ip": nic.ip,
                         "mode": filled.get(constants.NIC_MODE),
                         "link": filled.get(constants.NIC_LINK)}
                if entry["mode"] == constants.NIC_MODE_BRIDGED:
                    entry["bridge"] = entry["link"]
                nics.append(entry)
            disks = [{"dev_type": d.dev_type, "size": d.size or 0,
                      "mode": d.mode or constants.DISK_RDWR,
                      "spindles": d.spindles}
                     for d in self.cfg.instance_disks(inst)]
            template = objects.disk_template_of(
                self.cfg.instance_disks(inst))
            result[inst.name or inst.uuid] = {
                "tags": sorted(inst.tags),
                "admin_state": inst.admin_state,
                "vcpus": int(be[constants.BE_VCPUS]),
                "memory": int(be[constants.BE_MAXMEM]),
                "spindle_use": int(be[constants.BE_SPINDLE_USE]),
                "os": inst.os or "",
                "nodes": nodes,
                "nics": nics,
                "disks": disks,
                "disk_template": template,
                "disks_active": bool(inst.disks_active),
                "hypervisor": inst.hypervisor or c.default_hypervisor,
                "disk_space_total": requests.disk_space_total(disks),
            }
        return result


def build_input(cfg, request, live, warn=None, only_nodes=None):
    """The input document for ``request``.

    ``live`` maps node UUIDs to :class:`NodeLive` (None: the node did not
    answer); ``warn(text)`` is told about nodes that could not report;
    nodes outside ``only_nodes`` (UUIDs; None: all) are shown drained.
    """
    return _Builder(cfg, request, live, warn, only_nodes).build()
