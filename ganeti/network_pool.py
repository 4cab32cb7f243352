"""The IPv4 address pool of a network.

A network keeps two strings of "0"/"1", one character per address of its
subnet: ``reservations`` (addresses the cluster handed out, to NICs) and
``ext_reservations`` (addresses used outside the cluster: the network's
own address, its broadcast address, the gateway, and whatever the admin
reserves).  An address is free when neither string marks it.
"""

import ipaddress

from ganeti import errors

#: the smallest and the largest subnet a network may have (prefix lengths)
MIN_PREFIXLEN = 16
MAX_PREFIXLEN = 30


def _prereq(msg, code=errors.ECODE_INVAL):
    return errors.OpPrereqError(msg, code)


def parse_subnet(text, field="network"):
    """The IPv4 subnet of ``text``; refuses host bits and sizes outside
    /16../30 (a pool of more than 65536 addresses is not kept)."""
    try:
        subnet = ipaddress.IPv4Network(text, strict=True)
    except ValueError as exc:
        raise _prereq("%s: '%s' is not an IPv4 subnet (%s)"
                      % (field, text, exc))
    if not MIN_PREFIXLEN <= subnet.prefixlen <= MAX_PREFIXLEN:
        raise _prereq("%s: '%s' is a /%d; a network must be between /%d"
                      " and /%d" % (field, text, subnet.prefixlen,
                                    MIN_PREFIXLEN, MAX_PREFIXLEN))
    return subnet


def _bits(text, size):
    text = "".join("1" if c == "1" else "0" for c in (text or "")[:size])
    return list(text + "0" * (size - len(text)))


class AddressPool(object):
    """A working copy of a network's pool; :meth:`store` gives the two
    strings to write back."""

    def __init__(self, subnet, reservations=None, ext_reservations=None):
        self.subnet = subnet
        size = subnet.num_addresses
        self.internal = _bits(reservations, size)
        self.external = _bits(ext_reservations, size)

    @classmethod
    def of(cls, net):
        return cls(ipaddress.IPv4Network(net.network, strict=False),
                   net.reservations, net.ext_reservations)

    @classmethod
    def new(cls, subnet, gateway=None):
        """A fresh pool: network address, broadcast and gateway external."""
        pool = cls(subnet)
        pool.external[0] = pool.external[-1] = "1"
        if gateway is not None:
            pool.reserve(gateway, external=True, field="gateway")
        return pool

    def store(self):
        """(reservations, ext_reservations) strings."""
        return "".join(self.internal), "".join(self.external)

    def index(self, address, field="ip"):
        try:
            addr = ipaddress.IPv4Address(address)
        except ValueError:
            raise _prereq("%s: '%s' is not an IPv4 address" % (field, address))
        if addr not in self.subnet:
            raise _prereq("%s: %s is outside the network's subnet %s"
                          % (field, addr, self.subnet))
        return int(addr) - int(self.subnet.network_address)

    def contains(self, address):
        try:
            return ipaddress.IPv4Address(address) in self.subnet
        except ValueError:
            return False

    def is_reserved(self, address, external=None):
        """Taken in either bitmap (``external`` None) or in the one named."""
        idx = self.index(address)
        if external is None:
            return "1" in (self.internal[idx], self.external[idx])
        return (self.external if external else self.internal)[idx] == "1"

    def reserve(self, address, external=False, field="ip"):
        idx = self.index(address, field)
        if self.internal[idx] == "1":
            raise _prereq("%s: %s is already in use by an instance"
                          % (field, address), errors.ECODE_NOTUNIQUE)
        if self.external[idx] == "1":
            raise _prereq("%s: %s is already reserved" % (field, address),
                          errors.ECODE_NOTUNIQUE)
        (self.external if external else self.internal)[idx] = "1"

    def release(self, address, external=False, field="ip"):
        idx = self.index(address, field)
        bits = self.external if external else self.internal
        if bits[idx] != "1":
            raise _prereq("%s: %s is not %s" % (
                field, address,
                "an external reservation" if external else "in use"))
        bits[idx] = "0"

    def generate_free(self):
        """The first free address; the pool is left unchanged."""
        for idx, pair in enumerate(zip(self.internal, self.external)):
            if pair == ("0", "0"):
                return str(self.subnet[idx])
        raise _prereq("network %s has no free address left" % self.subnet,
                      errors.ECODE_STATE)

    def free_count(self):
        return sum(1 for pair in zip(self.internal, self.external)
                   if pair == ("0", "0"))

    def reserved_count(self):
        return self.subnet.num_addresses - self.free_count()
