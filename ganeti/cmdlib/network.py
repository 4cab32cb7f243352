"""Network logical units: add, remove, modify, connect to and disconnect
from node groups.  The address pool itself is :mod:`ganeti.network_pool`.
"""

import ipaddress
import re

from ganeti import constants
from ganeti import errors
from ganeti import locking
from ganeti import objects
from ganeti import qlang
from ganeti.cmdlib.base import LogicalUnit
from ganeti.network_pool import AddressPool, parse_subnet

_MAC_PREFIX_RE = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$")


def _prereq(msg, code=errors.ECODE_INVAL):
    return errors.OpPrereqError(msg, code)


def check_mac_prefix(value):
    value = value.lower()
    if not _MAC_PREFIX_RE.match(value):
        raise _prereq("mac_prefix: '%s' is not three hex octets such as"
                      " aa:00:00" % value)
    return value


def _check_ipv6(network6, gateway6):
    """Both given: the gateway must lie in the IPv6 subnet."""
    if network6 is None or gateway6 is None:
        return
    net = ipaddress.IPv6Network(network6, strict=False)
    if ipaddress.IPv6Address(gateway6) not in net:
        raise _prereq("gateway6: %s is outside the IPv6 subnet %s"
                      % (gateway6, network6))


def _check_overlap(cfg, subnet, except_uuid=None):
    for net in cfg.networks.values():
        if net.uuid == except_uuid or not net.network:
            continue
        try:
            other = ipaddress.IPv4Network(net.network, strict=False)
        except ValueError:
            continue
        if subnet.overlaps(other):
            raise _prereq("network: %s overlaps network %s (%s)"
                          % (subnet, net.name, net.network),
                          errors.ECODE_NOTUNIQUE)


def _nic_users(cfg, net_uuid):
    return qlang.nice_sort(
        inst.display_name for inst in cfg.instances.values()
        if any(nic.network == net_uuid for nic in inst.nics))


class _NetworkLU(LogicalUnit):
    """A unit on one existing network (``op.network_name``), locked."""

    def expand_names(self):
        net = self.cfg.get_network(self.op.network_name)
        self.net_uuid = net.uuid
        self.needed_locks[locking.LEVEL_NETWORK] = [net.uuid]

    @property
    def net(self):
        return self.cfg.networks[self.net_uuid]


class LUNetworkAdd(LogicalUnit):
    """gnt-network add"""
    OP_ID = "OP_NETWORK_ADD"

    def check_arguments(self):
        op = self.op
        self.subnet = parse_subnet(op.network)
        self.mac_prefix = (check_mac_prefix(op.mac_prefix)
                           if op.mac_prefix else None)
        _check_ipv6(op.network6, op.gateway6)
        pool = AddressPool.new(self.subnet)
        if op.gateway is not None:
            pool.reserve(op.gateway, external=True, field="gateway")
        for ip in op.add_reserved_ips or ():
            pool.reserve(ip, external=True, field="add_reserved_ips")
        self.pool = pool

    def _check_free(self):
        cfg = self.cfg
        if any(n.name == self.op.network_name for n in cfg.networks.values()):
            raise _prereq("network_name: network '%s' already exists"
                          % self.op.network_name, errors.ECODE_EXISTS)
        _check_overlap(cfg, self.subnet)

    def check_prereq(self):
        cfg = self.cfg
        self._check_free()
        if self.op.conflicts_check:
            # a node's own address inside the pool would be handed to NICs
            for node in cfg.nodes.values():
                for ip in (node.primary_ip, node.secondary_ip):
                    if ip and self.pool.contains(ip) and \
                            not self.pool.is_reserved(ip):
                        self.log_warning(
                            "IP address %s of node %s is inside the network;"
                            " reserving it externally", ip, node.name)
                        self.pool.reserve(ip, external=True)

    async def exec_(self):
        op = self.op
        self._check_free()      # another job may have added one meanwhile
        reservations, ext_reservations = self.pool.store()
        net = objects.Network(
            name=op.network_name, network=str(self.subnet),
            gateway=op.gateway, network6=op.network6, gateway6=op.gateway6,
            mac_prefix=self.mac_prefix, reservations=reservations,
            ext_reservations=ext_reservations, tags=list(op.tags or []))
        uuid = self.cfg.add_network(net)
        await self.ctx.glm.add(locking.LEVEL_NETWORK, [uuid])
        self.log_info("Added network %s (%s), %d addresses free",
                      op.network_name, uuid, self.pool.free_count())
        return None


class LUNetworkRemove(_NetworkLU):
    """gnt-network remove: only a network no group or NIC uses."""
    OP_ID = "OP_NETWORK_REMOVE"

    def check_prereq(self):
        net = self.net
        users = _nic_users(self.cfg, net.uuid)
        if users:
            raise _prereq("network_name: network '%s' is used by the"
                          " instances %s" % (net.name, ", ".join(users)),
                          errors.ECODE_STATE)
        groups = qlang.nice_sort(g.name for g in self.cfg.nodegroups.values()
                                 if net.uuid in (g.networks or {}))
        if groups:
            raise _prereq("network_name: network '%s' is connected to the"
                          " node groups %s; disconnect it first"
                          % (net.name, ", ".join(groups)),
                          errors.ECODE_STATE)

    async def exec_(self):
        self.cfg.remove_network(self.net_uuid)
        await self.ctx.glm.remove(locking.LEVEL_NETWORK, [self.net_uuid],
                                  self.owner)
        return None


class LUNetworkSetParams(_NetworkLU):
    """gnt-network modify"""
    OP_ID = "OP_NETWORK_SET_PARAMS"

    def check_arguments(self):
        op = self.op
        if all(v is None for v in (op.gateway, op.network6, op.gateway6,
                                   op.mac_prefix, op.add_reserved_ips,
                                   op.remove_reserved_ips)):
            raise _prereq("Please give at least one modification")
        if op.mac_prefix:
            self.mac_prefix = check_mac_prefix(op.mac_prefix)
        both = set(op.add_reserved_ips or ()) & \
            set(op.remove_reserved_ips or ())
        if both:
            raise _prereq("add_reserved_ips: %s also given in"
                          " remove_reserved_ips" % ", ".join(sorted(both)))

    def check_prereq(self):
        self.changes = self._plan()

    def _plan(self):
        op = self.op
        net = self.net
        pool = AddressPool.of(net)
        changes = {}
        if op.gateway is not None and op.gateway != net.gateway:
            if net.gateway:
                pool.release(net.gateway, external=True, field="gateway")
            pool.reserve(op.gateway, external=True, field="gateway")
            changes["gateway"] = op.gateway
        for ip in op.add_reserved_ips or ():
            pool.reserve(ip, external=True, field="add_reserved_ips")
        gateway = changes.get("gateway", net.gateway)
        subnet = pool.subnet
        for ip in op.remove_reserved_ips or ():
            idx = pool.index(ip, "remove_reserved_ips")
            if idx in (0, subnet.num_addresses - 1) or ip == gateway:
                raise _prereq("remove_reserved_ips: %s is the network's"
                              " own, broadcast or gateway address" % ip)
            pool.release(ip, external=True, field="remove_reserved_ips")
        if op.network6 is not None:
            changes["network6"] = op.network6
        if op.gateway6 is not None:
            changes["gateway6"] = op.gateway6
        _check_ipv6(changes.get("network6", net.network6),
                    changes.get("gateway6", net.gateway6))
        if op.mac_prefix:
            changes["mac_prefix"] = self.mac_prefix
        ext_reservations = pool.store()[1]
        if ext_reservations != net.ext_reservations:
            changes["ext_reservations"] = ext_reservations
        return changes

    async def exec_(self):
        # planned again from the pool as it is now: instances do not lock
        # the network when they take addresses
        self.changes = self._plan()
        if self.changes:
            self.cfg.set_network_params(self.net_uuid, **self.changes)
        return [(key, value) for key, value in sorted(self.changes.items())
                if key != "ext_reservations"]


class _ConnectionLU(_NetworkLU):
    """A unit on a network and a node group, both locked."""

    def expand_names(self):
        _NetworkLU.expand_names(self)
        group = self.cfg.get_nodegroup(self.op.group_name)
        self.group_uuid = group.uuid
        self.needed_locks[locking.LEVEL_NODEGROUP] = [group.uuid]
        self.share_locks[locking.LEVEL_NETWORK] = 1

    @property
    def group(self):
        return self.cfg.nodegroups[self.group_uuid]

    def group_instances(self):
        nodes = set(n.uuid for n in self.cfg.group_nodes(self.group_uuid))
        return [inst for inst in self.cfg.instances.values()
                if inst.primary_node in nodes]


class LUNetworkConnect(_ConnectionLU):
    """gnt-network connect: the group's NICs in the network get the mode
    and link given here."""
    OP_ID = "OP_NETWORK_CONNECT"

    def check_arguments(self):
        op = self.op
        if op.network_mode not in constants.NIC_VALID_MODES:
            raise _prereq("network_mode: '%s' is not one of %s"
                          % (op.network_mode,
                             ", ".join(sorted(constants.NIC_VALID_MODES))))
        if op.network_vlan and op.network_mode != constants.NIC_MODE_OVS:
            raise _prereq("network_vlan: a VLAN needs the mode %s"
                          % constants.NIC_MODE_OVS)

    def check_prereq(self):
        op = self.op
        net, group = self.net, self.group
        params = {constants.NIC_MODE: op.network_mode,
                  constants.NIC_LINK: op.network_link,
                  constants.NIC_VLAN: op.network_vlan or ""}
        current = (group.networks or {}).get(net.uuid)
        if current is not None:
            if current == params:
                self.params = None     # nothing to do
                return
            raise _prereq("network_name: network '%s' is already connected"
                          " to node group '%s' with mode %s and link %s;"
                          " disconnect it first"
                          % (net.name, group.name,
                             current.get(constants.NIC_MODE),
                             current.get(constants.NIC_LINK)),
                          errors.ECODE_STATE)
        if op.conflicts_check:
            pool = AddressPool.of(net)
            clashes = []
            for inst in self.group_instances():
                for idx, nic in enumerate(inst.nics):
                    if nic.ip and nic.network != net.uuid and \
                            pool.contains(nic.ip):
                        clashes.append("%s/nic.%d (%s)"
                                       % (inst.display_name, idx, nic.ip))
            if clashes:
                raise _prereq(
                    "conflicts_check: NICs of the node group '%s' have"
                    " addresses inside network '%s' without being in it:"
                    " %s" % (group.name, net.name, ", ".join(
                        qlang.nice_sort(clashes))), errors.ECODE_STATE)
        self.params = params

    async def exec_(self):
        if self.params is None:
            self.log_info("Network %s is already connected to node group %s",
                          self.net.name, self.group.name)
            return None
        networks = dict(self.group.networks or {})
        networks[self.net_uuid] = self.params
        self.cfg.set_nodegroup_params(self.group_uuid, networks=networks)
        return None


class LUNetworkDisconnect(_ConnectionLU):
    """gnt-network disconnect: refused while the group's instances have
    NICs in the network."""
    OP_ID = "OP_NETWORK_DISCONNECT"

    def check_prereq(self):
        net, group = self.net, self.group
        self.connected = net.uuid in (group.networks or {})
        if not self.connected:
            return
        users = qlang.nice_sort(
            inst.display_name for inst in self.group_instances()
            if any(nic.network == net.uuid for nic in inst.nics))
        if users:
            raise _prereq("network_name: instances of node group '%s' have"
                          " NICs in network '%s': %s"
                          % (group.name, net.name, ", ".join(users)),
                          errors.ECODE_STATE)

    async def exec_(self):
        if not self.connected:
            self.log_info("Network %s is not connected to node group %s",
                          self.net.name, self.group.name)
            return None
        networks = dict(self.group.networks or {})
        del networks[self.net_uuid]
        self.cfg.set_nodegroup_params(self.group_uuid, networks=networks)
        return None
