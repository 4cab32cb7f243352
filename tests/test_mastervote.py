"""Master voting: the verdicts at masterd's start and at a master failover,
from ballots, and the asking (a fake RPC caller and a fake clock)."""

import json
import os

from twisted.internet import defer, task
from twisted.trial import unittest

from ganeti import mastervote
from ganeti import rpc
from ganeti.mastervote import Ballot


def ballot(node, master, serial=5):
    return Ballot(node, master, serial)


def silent(node):
    return Ballot(node, error="connection refused")


class StartupVerdictTests(unittest.TestCase):

    def test_alone(self):
        verdict = mastervote.startup_verdict("a", 5, [])
        self.assertTrue(verdict.ok)

    def test_majority_names_me(self):
        verdict = mastervote.startup_verdict(
            "a", 5, [ballot("b", "a"), silent("c")])
        self.assertTrue(verdict.ok)
        self.assertIn("2 of 3", verdict.reason)

    def test_majority_names_another(self):
        verdict = mastervote.startup_verdict(
            "a", 5, [ballot("b", "b", 6), ballot("c", "b", 6)])
        self.assertFalse(verdict.ok)
        self.assertTrue(verdict.decided)
        self.assertIn("name b the master", verdict.reason)

    def test_too_few_answers_is_undecided(self):
        verdict = mastervote.startup_verdict(
            "a", 5, [silent("b"), silent("c")])
        self.assertFalse(verdict.ok)
        self.assertFalse(verdict.decided)
        self.assertIn("only 1 of 3", verdict.reason)

    def test_two_nodes_need_both(self):
        verdict = mastervote.startup_verdict("a", 5, [silent("b")])
        self.assertFalse(verdict.ok)
        self.assertIn("2 needed", verdict.reason)

    def test_newer_configuration_elsewhere_refuses(self):
        verdict = mastervote.startup_verdict(
            "a", 5, [ballot("b", "a", 9), ballot("c", "a", 5)])
        self.assertFalse(verdict.ok)
        self.assertTrue(verdict.decided)
        self.assertIn("b holds a newer configuration (serial 9)",
                      verdict.reason)


class FailoverVerdictTests(unittest.TestCase):

    def test_dead_master_majority_agrees(self):
        verdict = mastervote.failover_verdict(
            "b", 7, "a", [silent("a"), ballot("c", "a", 7)])
        self.assertTrue(verdict.ok)
        self.assertIn("2 of 3", verdict.reason)

    def test_half_is_not_enough(self):
        # 2 of 4: the other half could do the same
        verdict = mastervote.failover_verdict(
            "c", 7, "a", [silent("a"), silent("b"), ballot("d", "a", 7)])
        self.assertFalse(verdict.ok)
        self.assertIn("only 2 of 4 master candidates answered",
                      verdict.reason)

    def test_older_candidate_is_not_elected(self):
        verdict = mastervote.failover_verdict(
            "d", 6, "a", [silent("a"), ballot("b", "a", 7),
                          ballot("c", "a", 7)])
        self.assertFalse(verdict.ok)
        self.assertIn("b holds a newer configuration (serial 7) than this"
                      " node's (serial 6)", verdict.reason)

    def test_disagreement_about_the_master(self):
        verdict = mastervote.failover_verdict(
            "c", 7, "a", [ballot("a", "b", 7), ballot("b", "b", 7)])
        self.assertFalse(verdict.ok)
        self.assertIn("names a the master, but only 1 of 3", verdict.reason)

    def test_live_master_agrees(self):
        verdict = mastervote.failover_verdict(
            "b", 7, "a", [ballot("a", "a", 7)])
        self.assertTrue(verdict.ok)


class LocalViewTests(unittest.TestCase):

    def write(self, nodes, master="u1", serial=12):
        path = self.mktemp()
        with open(path, "w") as f:
            json.dump({"serial_no": serial,
                       "cluster": {"master_node": master},
                       "nodes": nodes}, f)
        return path

    def test_view(self):
        path = self.write({
            "u1": {"name": "a", "primary_ip": "127.0.0.1",
                   "master_candidate": True},
            "u2": {"name": "b", "primary_ip": "127.0.0.2",
                   "master_candidate": True},
            "u3": {"name": "c", "primary_ip": "127.0.0.3",
                   "master_candidate": True, "offline": True},
            "u4": {"name": "d", "primary_ip": "127.0.0.4",
                   "master_candidate": False}})
        view = mastervote.local_view(path, my_address="127.0.0.2")
        self.assertEqual((view.me, view.master, view.serial),
                         ("b", "a", 12))
        self.assertTrue(view.is_candidate)
        # offline candidates and non-candidates do not vote
        self.assertEqual(view.voters, {"a": "127.0.0.1"})
        view = mastervote.local_view(path, my_name="d")
        self.assertFalse(view.is_candidate)
        self.assertEqual(sorted(view.voters), ["a", "b"])
        self.assertFalse(os.path.exists(path + ".new"))


class AskingTests(unittest.TestCase):

    def setUp(self):
        self.clock = task.Clock()
        self.answers = {}
        self.asked = []

    def call(self, name, timeout):
        self.asked.append(name)
        answer = self.answers.get(name)
        if answer is None:
            return defer.succeed(rpc.RpcResult(
                node=name, procedure="master_vote_info", success=False,
                fail_msg="no answer"))
        return defer.succeed(rpc.RpcResult(
            node=name, procedure="master_vote_info", success=True,
            payload=answer))

    def test_gather(self):
        self.answers = {"b": {"master": "a", "serial": 4},
                        "c": {"master": None}}
        d = mastervote.gather(self.call, ["b", "c"])
        ballots = self.successResultOf(defer.ensureDeferred(d))
        self.assertEqual(ballots[0], Ballot("b", "a", 4))
        self.assertIsNone(ballots[1].master)

    def test_startup_vote_waits_for_candidates(self):
        view = mastervote.LocalView(me="a", master="a", serial=3,
                                    voters={"b": "x", "c": "y"},
                                    is_candidate=True)
        d = defer.ensureDeferred(mastervote.startup_vote(
            self.clock, view, self.call, patience=10, every=2))
        self.assertNoResult(d)
        # b starts after a while
        self.clock.advance(2)
        self.assertNoResult(d)
        self.answers["b"] = {"master": "a", "serial": 3}
        self.clock.advance(2)
        verdict = self.successResultOf(d)
        self.assertTrue(verdict.ok)
        self.assertEqual(self.asked.count("b"), 3)

    def test_startup_vote_gives_up(self):
        view = mastervote.LocalView(me="a", master="a", serial=3,
                                    voters={"b": "x", "c": "y"},
                                    is_candidate=True)
        d = defer.ensureDeferred(mastervote.startup_vote(
            self.clock, view, self.call, patience=5, every=2))
        self.clock.pump([2, 2, 2])
        verdict = self.successResultOf(d)
        self.assertFalse(verdict.ok)
        self.assertEqual(self.clock.getDelayedCalls(), [])
