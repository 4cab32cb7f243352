"""Resource accounting: what instances take from their nodes.

Forthcoming instances count exactly like real ones, so a forthcoming
instance that was placed can always be turned into a real one."""

import copy

import attr

from ganeti import constants
from ganeti import errors
from ganeti import objects


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
