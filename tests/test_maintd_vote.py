"""The maintenance daemon's vote: is this node the master?  Against
in-memory confd servers of the master candidates and a fake clock."""

import json
import os

from twisted.internet import defer
from twisted.internet.protocol import DatagramProtocol
from twisted.trial import unittest

from ganeti import pathutils
from ganeti.confd import wire
from ganeti.maintd import vote
from ganeti.server import maintd as maintd_server

from tests.test_confd_fixtures import KEY, FakeUDPReactor

CANDIDATES = {"node1": "127.0.0.11", "node2": "127.0.0.12",
              "node3": "127.0.0.13"}


class _Candidate(DatagramProtocol):
    """A candidate's confd that names ``master`` the master."""

    def __init__(self, master):
        self.master = master
        self.asked = 0

    def datagramReceived(self, data, addr):
        self.asked += 1
        request = json.loads(wire.unpack(data, KEY).msg)
        self.transport.write(wire.pack(KEY, request["rsalt"], wire.encode_reply(
            wire.STATUS_OK, self.master, 1)), addr)


class VoteTests(unittest.TestCase):

    def setUp(self):
        self.reactor = FakeUDPReactor()
        self.paths = pathutils.Paths(self.mktemp())
        os.makedirs(self.paths.data_dir)
        with open(self.paths.ssconf_file("master_candidates_ips"), "w") as f:
            f.write("".join(ip + "\n" for ip in CANDIDATES.values()))
        with open(self.paths.ssconf_file("node_primary_ips"), "w") as f:
            f.write("".join("%s %s\n" % i for i in CANDIDATES.items()))

    def tearDown(self):
        # nothing may still be waiting: no retry, no request timeout
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def candidate(self, name, master):
        protocol = _Candidate(master)
        self.reactor.attach((CANDIDATES[name], wire.DEFAULT_PORT), protocol)
        return protocol

    def decide(self, **kwargs):
        me = vote.this_node(self.paths, CANDIDATES["node1"])
        self.assertEqual(me, "node1")
        d = defer.Deferred.fromCoroutine(vote.ask_until_decided(
            self.reactor, KEY, self.paths, me, **kwargs))
        results = []
        d.addCallback(results.append)
        return results

    def run_until(self, results, limit=120):
        """Advance the clock to each next timer until the vote is done."""
        while not results:
            calls = self.reactor.getDelayedCalls()
            if not calls or self.reactor.seconds() > limit:
                self.fail("no decision, at %g s" % self.reactor.seconds())
            self.reactor.advance(
                min(c.getTime() for c in calls) - self.reactor.seconds())
        return results[0]

    def test_majority_names_this_node(self):
        self.candidate("node1", "node1")
        self.candidate("node2", "node1")
        self.candidate("node3", "node2")
        result = self.run_until(self.decide())
        self.assertTrue(result.master)
        self.assertIn("2 of 3", result.reason)

    def test_another_node_has_the_majority_no_retry(self):
        self.candidate("node1", "node1")
        others = [self.candidate("node2", "node2"),
                  self.candidate("node3", "node2")]
        result = self.run_until(self.decide())
        self.assertFalse(result.master)
        self.assertTrue(result.decided)
        self.assertEqual(result.reason,
                         "2 of 3 master candidates name node2 the master")
        self.assertEqual(self.reactor.seconds(), 0)
        self.assertEqual([c.asked for c in others], [1, 1])

    def test_candidates_starting_late_are_waited_for(self):
        # only this node's confd answers: 1 of 3 is no majority for anyone
        self.candidate("node1", "node1")
        results = self.decide()
        self.reactor.advance(2)
        self.assertEqual(results, [])
        # the others come up (as after a whole-cluster power cut)
        self.reactor.advance(10)
        late = self.candidate("node2", "node1")
        result = self.run_until(results)
        self.assertTrue(result.master)
        self.assertEqual(late.asked, 1)

    def test_gives_up_after_its_patience(self):
        me = self.candidate("node1", "node1")
        self.candidate("node2", "node2")
        result = self.run_until(self.decide(patience=20, every=5))
        self.assertFalse(result.master)
        self.assertFalse(result.decided)
        self.assertIn("only 1 of 3", result.reason)
        # each vote waits out node3's 2 s timeout; asked at 0, 7 and 14,
        # none started later than 20 s after the first
        self.assertEqual(me.asked, 3)
        self.assertEqual(self.reactor.seconds(), 16)

    def test_no_patience_asks_once(self):
        self.candidate("node1", "node1")
        result = self.run_until(self.decide(patience=0))
        self.assertFalse(result.master)
        self.assertEqual(self.reactor.seconds(), 2)


class OptionsTests(unittest.TestCase):

    def test_negative_patience_is_refused(self):
        options = maintd_server.Options()
        e = self.assertRaises(
            Exception, options.parseOptions,
            ["--root", self.mktemp(), "--vote-patience", "-1"])
        self.assertIn("--vote-patience", str(e))
