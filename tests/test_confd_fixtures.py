"""Shared helpers of the confd tests (no tests here).

``build_cluster`` writes a small but complete virtual-cluster root: an
hmac.key in Ganeti's format and a config.data with master, candidates, an
offline and a drained node, instances with NICs on two links, DRBD and plain
disks.
"""

import json
import os
import socket
import uuid

import attr
from twisted.internet import task
from twisted.internet.testing import FakeDatagramTransport

from ganeti import config
from ganeti import objects
from ganeti import pathutils
from ganeti.confd import wire

KEY = b"0123456789abcdef0123456789abcdef01234567\n"  # as hmac.key holds it
T0 = 1795259755  # a fixed "now" for the fake clocks

MASTER = "node1.example.com"
NODE2 = "node2.example.com"
NODE3 = "node3.example.com"
OFFLINE = "node4.example.com"
DRAINED = "node5.example.com"


@attr.s
class Cluster(object):
    paths = attr.ib()
    store = attr.ib()
    key = attr.ib()

    def node(self, name):
        return self.store.get_node(name)

    def instance(self, name):
        return self.store.get_instance(name)


def write_key(paths, key=KEY):
    os.makedirs(paths.data_dir, exist_ok=True)
    with open(paths.hmac_key_file, "wb") as f:
        f.write(key)
    os.chmod(paths.hmac_key_file, 0o400)


def build_cluster(root, key=KEY):
    """A root directory with hmac.key and config.data; returns a Cluster."""
    paths = pathutils.Paths(root)
    paths.ensure_dirs()
    write_key(paths, key)
    store = config.ConfigStore.create(
        paths.config_file, "cluster.example.com", MASTER, "192.0.2.1",
        enabled_disk_templates=("drbd", "plain", "file", "diskless"))
    store.set_cluster_params(master_ip="192.0.2.254")
    master = store.master_node.uuid
    n2 = store.add_node(objects.Node(name=NODE2, primary_ip="192.0.2.2"))
    n3 = store.add_node(objects.Node(name=NODE3, primary_ip="192.0.2.3",
                                     master_candidate=False))
    store.add_node(objects.Node(name=OFFLINE, primary_ip="192.0.2.4",
                                master_candidate=False, offline=True))
    store.add_node(objects.Node(name=DRAINED, primary_ip="192.0.2.5",
                                master_candidate=False, drained=True))

    def nic(ip, link=None, n=[0]):
        n[0] += 1
        return objects.NIC(ip=ip, mac="aa:00:00:00:00:%02x" % n[0],
                           nicparams={"link": link} if link else {})

    def drbd(a, b, minor_a, minor_b, port):
        return objects.Disk(dev_type="drbd", size=1024,
                            logical_id=[a, b, port, minor_a, minor_b, "s3"],
                            children=[objects.Disk(dev_type="plain",
                                                   size=1024,
                                                   logical_id=["xenvg", "d"]),
                                      objects.Disk(dev_type="plain", size=128,
                                                   logical_id=["xenvg", "m"])])

    store.add_instance(objects.Instance(
        name="inst1.example.com", primary_node=MASTER,
        secondary_nodes=[NODE2], os="debootstrap", hypervisor="fake",
        nics=[nic("10.0.0.1")]),
        disks=[drbd(master, n2, 0, 1, 11000),
               objects.Disk(dev_type="plain", size=512,
                            logical_id=["xenvg", "inst1-disk1"])])
    store.add_instance(objects.Instance(
        name="inst2.example.com", primary_node=NODE2,
        secondary_nodes=[MASTER], os="debootstrap", hypervisor="fake",
        nics=[nic("10.0.0.2"), nic("10.1.0.2", link="br-storage"),
              nic(None)]),
        disks=[drbd(n2, master, 2, 3, 11001)])
    store.add_instance(objects.Instance(
        name="inst3.example.com", primary_node=NODE3, os="debootstrap",
        hypervisor="fake", nics=[nic("10.0.0.3")]),
        disks=[objects.Disk(dev_type="plain", size=256,
                            logical_id=["xenvg", "inst3-disk0"])])
    assert n3
    return Cluster(paths=paths, store=store, key=key)


def request(key, req_type, query=None, rsalt=None, stamp=T0, msg=None,
            salt=None):
    """A request datagram as Ganeti's Python client builds it."""
    rsalt = rsalt or str(uuid.uuid4())
    if msg is None:
        msg = wire.encode_request(req_type, rsalt, query) + "\n"
    salt = str(stamp) if salt is None else salt
    return wire.pack(key, salt, msg)


def reply_of(key, datagram):
    """(salt, Reply) of a reply datagram, checking its signature."""
    env = wire.unpack(datagram, key)
    return env.salt, wire.decode_reply(env.msg)


def free_udp_port(host="127.0.0.1"):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class FakeUDPReactor(task.Clock):
    """A Clock whose listenUDP connects protocols to a fake network.

    ``network`` maps (host, port) to a protocol; a write to an address that
    has a protocol there is delivered synchronously, with the sender's
    address, so a client and several servers can talk in memory.
    """

    def __init__(self):
        task.Clock.__init__(self)
        self.network = {}
        self.sent = []  # (from, to, data) of every datagram
        self.lost = set()  # destinations whose datagrams vanish
        self._next_port = 40000

    def listenUDP(self, port, protocol, interface="", maxPacketSize=8192):
        if not port:
            self._next_port += 1
            port = self._next_port
        address = (interface or "127.0.0.1", port)
        protocol.transport = _FakeUDP(self, address, protocol)
        self.network[address] = protocol
        protocol.doStart()
        return protocol.transport

    def callFromThread(self, f, *args, **kwargs):
        self.callLater(0, f, *args, **kwargs)

    def attach(self, address, protocol):
        protocol.transport = _FakeUDP(self, address, protocol)
        self.network[address] = protocol


class _FakeUDP(FakeDatagramTransport):

    def __init__(self, reactor, address, protocol):
        FakeDatagramTransport.__init__(self)
        self.reactor = reactor
        self.address = address
        self.protocol = protocol
        self.closed = False

    def getHost(self):
        return self.address

    def write(self, packet, addr=None):
        FakeDatagramTransport.write(self, packet, addr)
        addr = tuple(addr)
        self.reactor.sent.append((self.address, addr, packet))
        target = self.reactor.network.get(addr)
        if target is not None and addr not in self.reactor.lost:
            target.datagramReceived(packet, self.address)

    def stopListening(self):
        self.closed = True
        self.reactor.network.pop(self.address, None)
        self.protocol.doStop()
        return None

    loseConnection = stopListening


def dumps(value):
    return json.dumps(value, sort_keys=True)
