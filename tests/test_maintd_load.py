"""The nodes' CPU load as the maintenance daemon reads it: the
``cpu-avg-load`` report of each node's monitoring daemon over HTTP."""

import json

from twisted.internet import defer, reactor
from twisted.trial import unittest
from twisted.web import resource, server

from ganeti.maintd import load as L

from tests.places import random_ips


class Report(resource.Resource):
    isLeaf = True

    def __init__(self, body):
        resource.Resource.__init__(self)
        self.body = body
        self.paths = []

    def render_GET(self, request):
        self.paths.append(request.path)
        return self.body


def report(total):
    return json.dumps({"name": "cpu-avg-load", "version": "B",
                       "format_version": 1, "timestamp": 0,
                       "category": None, "kind": 0,
                       "data": {"cpu_number": 2, "cpus": [total / 2] * 2,
                                "cpu_total": total}}).encode()


class MondLoadSourceTests(unittest.TestCase):

    @defer.inlineCallbacks
    def test_figures_of_the_nodes_that_answer(self):
        good_ip, bad_ip, silent_ip = random_ips(3)
        good = Report(report(1.5))
        bad = Report(b'{"name": "cpu-avg-load", "data": {}}')
        port = reactor.listenTCP(0, server.Site(good), interface=good_ip)
        self.addCleanup(port.stopListening)
        number = port.getHost().port
        other = reactor.listenTCP(number, server.Site(bad),
                                  interface=bad_ip)
        self.addCleanup(other.stopListening)
        source = L.MondLoadSource(reactor, number, timeout=2.0)
        self.assertTrue(L.ILoadSource.providedBy(source))
        loads = yield source.fetch([
            {"uuid": "u1", "name": "node1", "primary_ip": good_ip},
            {"uuid": "u2", "name": "node2", "primary_ip": bad_ip},
            {"uuid": "u3", "name": "node3", "primary_ip": silent_ip}])
        self.assertEqual(loads, {"u1": 1.5})
        self.assertEqual(good.paths, [b"/1/report/default/cpu-avg-load"])
        self.assertEqual(source.missing, {"malformed": 1, "unreachable": 1})
