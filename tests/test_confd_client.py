"""Tests of the confd client library, against in-memory servers."""

import json

from twisted.internet import defer, reactor
from twisted.internet.protocol import DatagramProtocol
from twisted.trial import unittest

from ganeti import config
from ganeti import errors
from ganeti.confd import client as confd_client
from ganeti.confd import guards
from ganeti.confd import server
from ganeti.confd import snapshot as snapshot_mod
from ganeti.confd import wire

from tests.fakes import ClockTestCase
from tests.test_confd_fixtures import (KEY, MASTER, NODE3, T0, FakeUDPReactor,
                                       build_cluster)


class _Config(object):
    def __init__(self, snap):
        self.snapshot = snap


class ClientTests(ClockTestCase):

    def make_clock(self):
        return FakeUDPReactor()

    def setUp(self):
        ClockTestCase.setUp(self)
        self.cluster = build_cluster(self.mktemp())
        self.store = self.cluster.store
        self.snap = snapshot_mod.ConfigSnapshot(self.store)
        self.reactor = self.clock
        self.reactor.advance(T0)
        self.processors = {}

    def add_server(self, host, snap=None, key=KEY, port=1814,
                   loaded=True):
        if snap is None and loaded:
            snap = self.snap
        processor = server.ConfdProcessor(
            key, _Config(snap),
            self.reactor, rate_limiter=guards.RateLimiter(self.reactor, 0))
        self.reactor.attach((host, port), server.ConfdProtocol(processor))
        self.processors[(host, port)] = processor
        return processor

    def make_client(self, peers, **kwargs):
        client = confd_client.ConfdClient(KEY, peers, reactor=self.reactor,
                                          **kwargs)
        self.addCleanup(client.close)
        return client

    def test_needed_replies(self):
        self.assertEqual([confd_client.needed_replies(n) for n in range(1, 9)],
                         [1, 2, 2, 3, 3, 4, 4, 5])

    def test_single_server(self):
        self.add_server("127.0.0.1")
        client = self.make_client(["127.0.0.1"])
        result = self.successResultOf(client.request(wire.REQ_CLUSTER_MASTER))
        self.assertTrue(result.ok)
        self.assertEqual((result.answer, result.serial),
                         (MASTER, self.store.cluster.serial_no))
        self.assertTrue(result.consistent)
        self.assertTrue(result.complete)
        self.assertEqual(result.peer, ("127.0.0.1", 1814))
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_request_is_what_ganeti_sends(self):
        self.add_server("127.0.0.1")
        client = self.make_client(["127.0.0.1"],
                                  new_rsalt=lambda: "fixed-rsalt")
        client.request(wire.REQ_NODE_ROLE_BYNAME, NODE3)
        src, dst, data = self.reactor.sent[0]
        env = wire.unpack(data, KEY)
        self.assertEqual(env.salt, str(T0))
        self.assertEqual(json.loads(env.msg), {
            "protocol": 1, "type": 1, "query": NODE3,
            "rsalt": "fixed-rsalt"})
        # the reply came back signed with our rsalt
        self.assertEqual(wire.unpack(self.reactor.sent[1][2], KEY).salt,
                         "fixed-rsalt")

    def test_coverage_and_early_completion(self):
        hosts = ["127.0.0.%d" % i for i in range(1, 9)]
        for host in hosts:
            self.add_server(host)
        client = self.make_client(hosts)
        result = self.successResultOf(client.request(wire.REQ_PING))
        asked = {dst for src, dst, _ in self.reactor.sent
                 if dst[1] == 1814}
        self.assertEqual(len(asked), 6)  # default coverage
        self.assertEqual(sorted(result.queried), sorted(asked))
        self.assertEqual(len(result.replies), 4)  # 6 // 2 + 1 settle it
        self.assertEqual(client.counters["unknown_salt"], 2)

    def test_explicit_coverage(self):
        hosts = ["127.0.0.%d" % i for i in range(1, 5)]
        for host in hosts:
            self.add_server(host)
        client = self.make_client(hosts)
        result = self.successResultOf(client.request(wire.REQ_PING,
                                                     coverage=2))
        self.assertEqual(len(result.queried), 2)
        result = self.successResultOf(client.request(wire.REQ_PING,
                                                     coverage=0))
        self.assertEqual(len(result.queried), 4)

    def copy_snapshot(self):
        """A snapshot of an independent copy of the current store."""
        return snapshot_mod.ConfigSnapshot(
            config.ConfigStore.from_dict(self.store.to_dict()))

    def test_highest_serial_wins(self):
        old = self.copy_snapshot()
        self.store.set_node_params(NODE3, offline=True)
        self.store.set_cluster_params(master_ip="192.0.2.200")
        new = self.copy_snapshot()
        self.assertGreater(new.serial, old.serial)
        self.add_server("127.0.0.1", old)
        self.add_server("127.0.0.2", new)
        self.add_server("127.0.0.3", old)
        client = self.make_client(["127.0.0.1", "127.0.0.2", "127.0.0.3"])
        result = self.successResultOf(
            client.request(wire.REQ_NODE_ROLE_BYNAME, NODE3, coverage=0))
        self.assertEqual((result.answer, result.serial),
                         (wire.NODE_ROLE_OFFLINE, new.serial))
        self.assertEqual(result.peer, ("127.0.0.2", 1814))
        self.assertTrue(result.consistent)

    def test_same_serial_different_answers_is_inconsistent(self):
        a = self.copy_snapshot()
        self.store.get_node(NODE3).offline = True  # not a real write
        b = self.copy_snapshot()
        self.assertEqual(a.serial, b.serial)
        self.add_server("127.0.0.1", a)
        self.add_server("127.0.0.2", b)
        client = self.make_client(["127.0.0.1", "127.0.0.2"])
        result = self.successResultOf(
            client.request(wire.REQ_NODE_ROLE_BYNAME, NODE3))
        self.assertFalse(result.consistent)
        self.assertEqual(result.answer, wire.NODE_ROLE_REGULAR)  # first kept

    def test_ok_beats_error(self):
        self.add_server("127.0.0.1", loaded=False)  # answers "not loaded"
        self.add_server("127.0.0.2")
        client = self.make_client(["127.0.0.1", "127.0.0.2"])
        result = self.successResultOf(client.request(wire.REQ_PING))
        self.assertTrue(result.ok)
        self.assertEqual(result.peer, ("127.0.0.2", 1814))
        self.assertEqual(result.replies[("127.0.0.1", 1814)].status, 1)

    def test_error_status_is_a_result(self):
        self.add_server("127.0.0.1")
        client = self.make_client(["127.0.0.1"])
        result = self.successResultOf(
            client.request(wire.REQ_NODE_ROLE_BYNAME, "nope"))
        self.assertFalse(result.ok)
        self.assertEqual((result.status, result.serial), (1, 0))

    def test_timeout_without_reply(self):
        client = self.make_client(["127.0.0.1", "127.0.0.2"], timeout=3)
        d = client.request(wire.REQ_PING)
        self.assertNoResult(d)
        self.reactor.advance(2.9)
        self.assertNoResult(d)
        self.reactor.advance(0.1)
        failure = self.failureResultOf(d, confd_client.ConfdTimeoutError)
        self.assertIn("127.0.0.1:1814", str(failure.value))

    def test_timeout_with_some_replies(self):
        self.add_server("127.0.0.1")
        self.add_server("127.0.0.2")
        self.reactor.lost.add(("127.0.0.2", 1814))
        client = self.make_client(["127.0.0.1", "127.0.0.2"])
        d = client.request(wire.REQ_PING)
        self.assertNoResult(d)
        self.reactor.advance(wire.CLIENT_EXPIRE_TIMEOUT)
        result = self.successResultOf(d)
        self.assertFalse(result.complete)
        self.assertEqual(list(result.replies), [("127.0.0.1", 1814)])

    def test_wrongly_signed_reply_ignored(self):
        self.add_server("127.0.0.1", key=b"other key\n")
        client = self.make_client(["127.0.0.1"], timeout=1)
        d = client.request(wire.REQ_PING)
        # the server drops our request (bad hmac for it) -- and a forged
        # reply signed with another key does not count either
        proto = client._listening.protocol
        forged = wire.pack(b"other key\n", "x",
                           wire.encode_reply(0, 1, 1))
        proto.datagramReceived(forged, ("127.0.0.1", 1814))
        self.assertEqual(client.counters["bad_signature"], 1)
        self.reactor.advance(1)
        self.failureResultOf(d, confd_client.ConfdTimeoutError)

    def test_reply_checks(self):
        client = self.make_client(["127.0.0.1", "127.0.0.2"],
                                  new_rsalt=lambda: "rs")
        d = client.request(wire.REQ_PING)
        proto = client._listening.protocol
        good = wire.pack(KEY, "rs", wire.encode_reply(0, 3000000, 0))
        proto.datagramReceived(good, ("127.0.0.9", 1814))        # not asked
        proto.datagramReceived(good, ("127.0.0.1", 9999))        # wrong port
        proto.datagramReceived(wire.pack(KEY, "other", wire.encode_reply(
            0, 1, 0)), ("127.0.0.1", 1814))                     # unknown salt
        proto.datagramReceived(wire.pack(KEY, "rs", "{bad"),
                               ("127.0.0.1", 1814))             # bad inner
        proto.datagramReceived(b"garbage", ("127.0.0.1", 1814))
        self.assertEqual((client.counters["wrong_peer"],
                          client.counters["unknown_salt"],
                          client.counters["bad_reply"],
                          client.counters["bad_signature"]), (2, 1, 1, 1))
        self.assertNoResult(d)
        proto.datagramReceived(good, ("127.0.0.1", 1814))
        proto.datagramReceived(good, ("127.0.0.1", 1814))        # duplicate
        self.assertEqual(client.counters["duplicate"], 1)
        self.assertNoResult(d)
        proto.datagramReceived(good, ("127.0.0.2", 1814))
        self.assertEqual(self.successResultOf(d).answer, 3000000)

    def test_cancel(self):
        client = self.make_client(["127.0.0.1"])
        d = client.request(wire.REQ_PING)
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertEqual(self.reactor.getDelayedCalls(), [])
        self.assertEqual(client._pending, {})

    def test_close_stops_listening_and_cancels(self):
        client = self.make_client(["127.0.0.1"])
        d = client.request(wire.REQ_PING)
        transport = client._listening
        self.successResultOf(client.close())
        self.assertTrue(transport.closed)
        self.failureResultOf(d, defer.CancelledError)

    def test_listens_on_loopback_for_loopback_peers(self):
        client = self.make_client(["127.0.0.1"])
        client.request(wire.REQ_PING).addErrback(lambda f: None)
        self.assertEqual(client._listening.address[0], "127.0.0.1")

    def test_peer_validation(self):
        for peers in (["localhost"], [], ["127.0.0.1", "::1"], ["1.2.3"]):
            self.assertRaises(errors.ConfdClientError,
                              confd_client.ConfdClient, KEY, peers,
                              reactor=self.reactor)
        client = confd_client.ConfdClient(KEY, [("::1", 5), "127.1.2.3"][1:],
                                          reactor=self.reactor, port=7)
        self.assertEqual(client.peers, [("127.1.2.3", 7)])

    def test_request_validation(self):
        client = self.make_client(["127.0.0.1"])
        self.assertRaises(errors.ConfdClientError, client.request, "0")
        self.assertRaises(errors.UdpDataSizeError, client.request,
                          wire.REQ_CONFIG_QUERY, "/" + "x" * 5000)

    def test_query_once(self):
        self.add_server("127.0.0.1")
        d = confd_client.query_once(KEY, ["127.0.0.1"], wire.REQ_MC_PIP_LIST,
                                    reactor=self.reactor)
        result = self.successResultOf(d)
        self.assertEqual(result.answer, ["192.0.2.1", "192.0.2.2"])
        self.assertEqual(self.reactor.network.keys(),
                         {("127.0.0.1", 1814)})



class _LargeAnswerServer(DatagramProtocol):
    """Answers every request with a signed reply of ``size`` characters of
    answer (the node-instances answer of a node with many instances is
    this long)."""

    def __init__(self, size):
        self.size = size

    def datagramReceived(self, data, addr):
        rsalt = json.loads(wire.unpack(data, KEY).msg)["rsalt"]
        self.transport.write(wire.pack(KEY, rsalt, wire.encode_reply(
            wire.STATUS_OK, "x" * self.size, 7)), addr)


class RealSocketTests(unittest.TestCase):
    """The client over real loopback sockets."""

    def test_reply_larger_than_twisteds_default_datagram_size(self):
        # Twisted reads at most 8192 bytes of a datagram unless told more;
        # a server may send up to wire.MAX_REPLY_SIZE
        size = 20000
        port = reactor.listenUDP(0, _LargeAnswerServer(size),
                                 interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        client = confd_client.ConfdClient(
            KEY, [("127.0.0.1", port.getHost().port)], reactor=reactor,
            timeout=2)
        self.addCleanup(client.close)

        def check(result):
            self.assertTrue(result.complete)
            self.assertEqual((result.answer, result.serial), ("x" * size, 7))
            self.assertEqual(client.counters["bad_signature"], 0)
        return client.request(wire.REQ_PING).addCallback(check)
