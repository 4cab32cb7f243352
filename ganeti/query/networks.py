"""Network query fields.

Address counts come from the network's reservation bitmaps in config.data
(``reservations`` and ``ext_reservations``, strings of 0/1 with one
character per address of the IPv4 subnet).
"""

import ipaddress

from ganeti import constants
from ganeti.query.base import (Field, FieldTable, Resource, QFT_TEXT,
                               QFT_NUMBER, QFT_OTHER, UNAVAIL, attr_getter,
                               common_fields, lookup_by_name, nice_sort)


def _bitmap(text, size):
    text = text or ""
    text = "".join("1" if c == "1" else "0" for c in text[:size])
    return text + "0" * (size - len(text))


def _pool(run, net):
    """(subnet, internal bitmap, external bitmap) or None if invalid."""
    def compute():
        try:
            subnet = ipaddress.IPv4Network(net.network, strict=False)
        except (ValueError, TypeError, ipaddress.AddressValueError):
            return None
        size = subnet.num_addresses
        return (subnet, _bitmap(net.reservations, size),
                _bitmap(net.ext_reservations, size))
    return run.memo(("pool", net.uuid), compute)


def _stat(kind):
    def get(run, net):
        pool = _pool(run, net)
        if pool is None:
            return UNAVAIL
        subnet, internal, external = pool
        combined = ["1" if "1" in pair else "0"
                    for pair in zip(internal, external)]
        if kind == "reserved_count":
            return combined.count("1")
        if kind == "free_count":
            return combined.count("0")
        if kind == "map":
            return "".join("X" if c == "1" else "." for c in combined)
        # external_reservations
        return ", ".join(str(subnet[i]) for i, c in enumerate(external)
                         if c == "1")
    return get


def _groups(run, net):
    result = []
    for group in run.cfg.nodegroups.values():
        if net.uuid in (group.networks or {}):
            params = group.networks[net.uuid] or {}
            result.append([group.name, params.get(constants.NIC_MODE),
                           params.get(constants.NIC_LINK),
                           params.get(constants.NIC_VLAN, "")])
    return nice_sort(result, key=lambda entry: entry[0])


def _instances(run, net):
    def compute():
        users = {}
        for inst in run.cfg.instances.values():
            for nic in inst.nics:
                if nic.network:
                    users.setdefault(nic.network, set()).add(
                        inst.display_name)
        return users
    return nice_sort(run.memo("network_users", compute).get(net.uuid, ()))


def build_fields():
    t = FieldTable()
    t.extend([
        Field("name", "Network", QFT_TEXT, "Network name",
              attr_getter("name")),
        Field("network", "Subnet", QFT_TEXT, "IPv4 subnet (CIDR)",
              attr_getter("network")),
        Field("gateway", "Gateway", QFT_OTHER, "IPv4 gateway, or null",
              lambda run, net: net.gateway),
        Field("network6", "IPv6Subnet", QFT_OTHER, "IPv6 subnet, or null",
              lambda run, net: net.network6),
        Field("gateway6", "IPv6Gateway", QFT_OTHER, "IPv6 gateway, or null",
              lambda run, net: net.gateway6),
        Field("mac_prefix", "MacPrefix", QFT_OTHER,
              "MAC prefix for NICs in this network, or null",
              lambda run, net: net.mac_prefix),
        Field("group_cnt", "NodeGroups", QFT_NUMBER,
              "Number of node groups connected",
              lambda run, net: len(_groups(run, net))),
        Field("group_list", "GroupList", QFT_OTHER,
              "Connected node groups as [name, NIC mode, NIC link, VLAN]", _groups),
        Field("inst_cnt", "Instances", QFT_NUMBER,
              "Number of instances with a NIC in the network",
              lambda run, net: len(_instances(run, net))),
        Field("inst_list", "InstanceList", QFT_OTHER,
              "Instances with a NIC in the network", _instances),
        Field("free_count", "FreeCount", QFT_NUMBER,
              "Addresses neither reserved nor in use", _stat("free_count")),
        Field("reserved_count", "ReservedCount", QFT_NUMBER,
              "Addresses reserved or in use", _stat("reserved_count")),
        Field("map", "Map", QFT_TEXT,
              "One character per address: X taken, . free", _stat("map")),
        Field("external_reservations", "ExternalReservations", QFT_TEXT,
              "Addresses reserved for use outside the cluster",
              _stat("external_reservations")),
    ])
    t.extend(common_fields("Network"))
    return t


class NetworkResource(Resource):
    name = "network"
    noun = "network"
    fields = build_fields()
    cacheable = True

    def items(self, run, names):
        nets = run.cfg.networks.values()
        if names is None:
            return list(nets)
        return lookup_by_name(nets, names, self.noun, hostname=False)

    def item_name(self, net):
        return net.name or net.uuid

