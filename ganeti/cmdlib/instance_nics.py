"""Network interfaces of instances: building and checking NICs, MAC and IP
uniqueness.
"""

import ipaddress
import re

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.network_pool import AddressPool


_MAC_RE = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")


def _check_ip(ip, field):
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        raise errors.OpPrereqError("%s: '%s' is not a valid IP address"
                                   % (field, ip), errors.ECODE_INVAL)


def _from_pool(net, field, pool_taken):
    """The first free address of ``net``'s pool that no other NIC of the
    same opcode took (``pool_taken``: network uuid -> addresses)."""
    pool = AddressPool.of(net)
    taken = (pool_taken or {}).get(net.uuid, set())
    for idx, pair in enumerate(zip(pool.internal, pool.external)):
        address = str(pool.subnet[idx])
        if pair == ("0", "0") and address not in taken:
            return address
    raise errors.OpPrereqError("%s/ip: network %s has no free address left"
                               % (field, net.name), errors.ECODE_NORES)


def _check_network_ip(net, ip, field):
    """An address given for a NIC on ``net``: inside it, not reserved for
    use outside the cluster (taken by a NIC: check_unique_ips)."""
    pool = AddressPool.of(net)
    if not pool.contains(ip):
        raise errors.OpPrereqError("%s/ip: %s is outside network %s (%s)"
                                   % (field, ip, net.name, net.network),
                                   errors.ECODE_INVAL)
    if pool.is_reserved(ip, external=True):
        raise errors.OpPrereqError(
            "%s/ip: %s is reserved in network %s (network, broadcast,"
            " gateway or external reservation)" % (field, ip, net.name),
            errors.ECODE_NOTUNIQUE)


def build_nic(cfg, params, field, group=None, used_macs=(), old=None,
              pool_taken=None):
    """A NIC object from OP_INSTANCE_CREATE / SET_PARAMS nic parameters.

    ``old`` is the NIC being modified (its values are kept unless given).
    MACs "auto"/"generate" get a fresh cluster MAC not in ``used_macs``.
    ip "pool" takes a free address of the NIC's network (``pool_taken``
    collects the addresses the opcode's NICs take, so two differ); the
    network's pool itself changes with the instance, in the config store.
    """
    params = dict(params or {})
    nic = old.copy() if old is not None else objects.NIC(
        uuid=objects.new_uuid())
    if "bridge" in params:
        bridge = params.pop("bridge")
        if params.get(constants.NIC_LINK) not in (None, bridge):
            raise errors.OpPrereqError(
                "%s: bridge and link are the same setting; give only one"
                % field, errors.ECODE_INVAL)
        params[constants.NIC_LINK] = bridge
    if "name" in params:
        nic.name = params["name"] or None
    if "network" in params:
        net = params["network"]
        if net in (None, "", "none"):
            nic.network = None
        else:
            try:
                nic.network = cfg.get_network(net).uuid
            except errors.OpPrereqError:
                raise errors.OpPrereqError("%s: network '%s' does not exist"
                                           % (field, net), errors.ECODE_NOENT)
        if nic.network and (params.get(constants.NIC_MODE)
                            or params.get(constants.NIC_LINK)):
            raise errors.OpPrereqError(
                "%s: with a network, mode and link come from the network's"
                " settings in the node group; do not give them" % field,
                errors.ECODE_INVAL)
    nicparams = dict(nic.nicparams or {})
    for key in (constants.NIC_MODE, constants.NIC_LINK, constants.NIC_VLAN):
        if key in params:
            value = params[key]
            if value in (None, constants.VALUE_DEFAULT):
                nicparams.pop(key, None)
            else:
                nicparams[key] = value
    if nic.network:
        nicparams.pop(constants.NIC_MODE, None)
        nicparams.pop(constants.NIC_LINK, None)
    nic.nicparams = nicparams
    if "ip" in params:
        ip = params["ip"]
        if ip in (None, "", "none"):
            nic.ip = None
        elif ip == constants.NIC_IP_POOL:
            if not nic.network:
                raise errors.OpPrereqError(
                    "%s/ip: 'pool' takes an address from a network's pool;"
                    " give the NIC a network" % field, errors.ECODE_INVAL)
            nic.ip = _from_pool(cfg.networks[nic.network], field,
                                pool_taken)
        else:
            _check_ip(ip, field + "/ip")
            nic.ip = ip
    mac = params.get("mac")
    if mac is None and old is None:
        mac = constants.VALUE_AUTO
    if mac in (constants.VALUE_AUTO, "generate"):
        while True:
            candidate = cfg.generate_mac()
            if candidate not in used_macs:
                break
        nic.mac = candidate
    elif mac is not None:
        mac = mac.lower()
        if not _MAC_RE.match(mac):
            raise errors.OpPrereqError("%s: '%s' is not a valid MAC address"
                                       % (field, params["mac"]),
                                       errors.ECODE_INVAL)
        if mac in used_macs:
            raise errors.OpPrereqError("%s: MAC address %s is already in use"
                                       % (field, mac), errors.ECODE_NOTUNIQUE)
        nic.mac = mac
    if nic.network and group is not None and \
            nic.network not in (group.networks or {}) and (
                old is None or old.network != nic.network):
        raise errors.OpPrereqError(
            "%s/network: network %s is not connected to node group %s"
            " (gnt-network connect)" % (field, cfg.networks[nic.network].name,
                                        group.name), errors.ECODE_INVAL)
    if nic.network and nic.ip and (old is None or (
            old.network, old.ip) != (nic.network, nic.ip)):
        _check_network_ip(cfg.networks[nic.network], nic.ip, field)
    if nic.network and nic.ip and pool_taken is not None:
        pool_taken.setdefault(nic.network, set()).add(nic.ip)
    filled = objects.fill_nicparams(cfg.cluster, nic, group)
    objects.check_nic(nic, filled, where=field)
    return nic


def used_macs(cfg, except_instance=None):
    return {nic.mac for inst in cfg.instances.values()
            if inst.uuid != except_instance for nic in inst.nics if nic.mac}


def check_unique_ips(cfg, nics, except_instance=None):
    """Ganeti refuses an IP another instance's NIC on the same network has."""
    taken = {}
    for inst in cfg.instances.values():
        if inst.uuid == except_instance:
            continue
        for nic in inst.nics:
            if nic.ip and nic.network:
                taken[(nic.network, nic.ip)] = inst.display_name
    for idx, nic in enumerate(nics):
        owner = taken.get((nic.network, nic.ip))
        if nic.ip and nic.network and owner:
            raise errors.OpPrereqError(
                "nics/%d: IP address %s is already in use by instance %s"
                % (idx, nic.ip, owner), errors.ECODE_NOTUNIQUE)
