"""confd's counters on ``--metrics-port`` (GET /metrics): datagrams go
through the real pipeline (fake clock, fake UDP network), the scrape is
parsed as Prometheus would, and its counters move with what arrived."""

from prometheus_client.parser import text_string_to_metric_families
from treq.testing import StubTreq
from twisted.internet import defer
from twisted.python import usage
from twisted.trial import unittest

from ganeti import metrics
from ganeti.confd import wire
from ganeti.server import confd as confd_service

from tests.test_confd_fixtures import (KEY, T0, FakeUDPReactor,
                                       build_cluster, reply_of, request)

OTHER_KEY = b"another key, not the cluster's\n"


class _Port(object):
    def __init__(self, reactor, address):
        self.reactor = reactor
        self.address = address

    def stopListening(self):
        self.reactor.tcp.pop(self.address).doStop()
        return defer.succeed(None)


class FakeNetReactor(FakeUDPReactor):
    """The fake UDP network, and TCP listeners recorded in ``tcp``."""

    def __init__(self):
        FakeUDPReactor.__init__(self)
        self.tcp = {}

    def listenTCP(self, port, factory, backlog=50, interface=""):
        address = (interface, port)
        self.tcp[address] = factory
        factory.doStart()
        return _Port(self, address)


class ConfdMetricsTests(unittest.TestCase):

    def setUp(self):
        self.cluster = build_cluster(self.mktemp())
        self.reactor = FakeNetReactor()
        self.reactor.advance(T0)
        options = confd_service.Options()
        options.parseOptions(["--root", self.cluster.paths.root, "--bind",
                              "127.0.0.1", "--port", "18150",
                              "--metrics-port", "18151",
                              "--stats-interval", "0"])
        self.service = confd_service.makeService(options,
                                                 reactor=self.reactor)
        self.service.startService()
        self.addCleanup(self.service.stopService)
        self.client = ("127.0.0.9", 5555)

    def send(self, datagram):
        """Send to confd; its reply (or None)."""
        before = len(self.reactor.sent)
        self.reactor.network[("127.0.0.1", 18150)].datagramReceived(
            datagram, self.client)
        replies = [data for (_, to, data) in self.reactor.sent[before:]
                   if to == self.client]
        return replies[0] if replies else None

    def scrape(self):
        site = self.reactor.tcp[("127.0.0.1", 18151)]
        stub = StubTreq(site.resource)
        response = self.successResultOf(
            stub.get("http://127.0.0.1:18151/metrics"))
        self.assertEqual(response.code, 200)
        self.assertEqual(response.headers.getRawHeaders(b"content-type"),
                         [metrics.CONTENT_TYPE.encode("ascii")])
        body = self.successResultOf(response.content()).decode("utf-8")
        found = {}
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                found[(sample.name, tuple(sorted(sample.labels.items())))] \
                    = sample.value
        return found

    def test_listens_on_the_bind_address(self):
        self.assertEqual(list(self.reactor.tcp), [("127.0.0.1", 18151)])

    def test_counters_move_with_the_datagrams(self):
        before = self.scrape()
        bad_hmac = ("ganeti_confd_dropped_total", (("reason", "bad_hmac"),))
        pings = ("ganeti_confd_queries_total", (("type", "ping"),))
        self.assertEqual(before[bad_hmac], 0)
        self.assertEqual(before[pings], 0)
        # a good ping is answered
        reply = self.send(request(KEY, wire.REQ_PING, rsalt="r1"))
        self.assertIsNotNone(reply)
        self.assertEqual(reply_of(KEY, reply)[1].status, wire.STATUS_OK)
        # signed with another key: dropped
        self.assertIsNone(self.send(request(OTHER_KEY, wire.REQ_PING)))
        # the same request again: a replay
        again = request(KEY, wire.REQ_MC_PIP_LIST, rsalt="r2")
        self.assertIsNotNone(self.send(again))
        self.assertIsNone(self.send(again))
        # not confd's magic
        self.assertIsNone(self.send(b"hello"))
        # a type confd does not know: an error reply
        self.assertIsNotNone(self.send(request(KEY, 99, rsalt="r3")))
        now = self.scrape()
        self.assertEqual(now[bad_hmac], 1)
        self.assertEqual(now[pings], 1)
        self.assertEqual(now[("ganeti_confd_queries_total",
                              (("type", "mc-pip-list"),))], 1)
        self.assertEqual(now[("ganeti_confd_dropped_total",
                              (("reason", "replay"),))], 1)
        self.assertEqual(now[("ganeti_confd_dropped_total",
                              (("reason", "bad_magic"),))], 1)
        self.assertEqual(now[("ganeti_confd_errors_total",
                              (("reason", "unknown_type"),))], 1)
        self.assertEqual(now[("ganeti_confd_received_total", ())], 6)
        self.assertEqual(now[("ganeti_confd_answered_total", ())], 3)
        self.assertEqual(now[("ganeti_confd_config_serial", ())],
                         self.cluster.store.cluster.serial_no)

    def test_only_metrics_is_served(self):
        site = self.reactor.tcp[("127.0.0.1", 18151)]
        response = self.successResultOf(StubTreq(site.resource).get(
            "http://127.0.0.1:18151/other"))
        self.assertEqual(response.code, 404)


class OptionTests(unittest.TestCase):

    def setUp(self):
        self.cluster = build_cluster(self.mktemp())

    def options(self, *args):
        opts = confd_service.Options()
        opts.parseOptions(["--root", self.cluster.paths.root] + list(args))
        return opts

    def test_no_metrics_port_unless_asked(self):
        reactor = FakeNetReactor()
        svc = confd_service.makeService(
            self.options("--bind", "127.0.0.1", "--port", "18152"),
            reactor=reactor)
        svc.startService()
        self.addCleanup(svc.stopService)
        self.assertEqual(reactor.tcp, {})

    def test_bad_metrics_port(self):
        for value in ("70000", "-1"):
            err = self.assertRaises(usage.UsageError, self.options,
                                    "--metrics-port", value)
            self.assertIn("--metrics-port must be a TCP port", str(err))
        # not a number: twisted's own check, as for every int option
        self.assertRaises(usage.UsageError, self.options, "--metrics-port",
                          "x")
