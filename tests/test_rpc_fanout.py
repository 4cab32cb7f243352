"""Calls to many nodes: a bounded number in flight, the arguments encoded
once, every answer delivered (RpcClient with its HTTP requests replaced
by Deferreds the test answers)."""

import json
import tempfile

from twisted.internet import defer, task
from twisted.trial import unittest

from ganeti import rpc
from tests.test_crypto import cluster_cert

_CERT = []


def the_cert():
    """One cluster certificate for every test here (never used on the
    wire: the requests are fakes)."""
    if not _CERT:
        with tempfile.TemporaryDirectory(prefix="gnt-fanout-") as base:
            _CERT.append(cluster_cert(base))
    return _CERT[0]


class HeldRequests(object):
    """Stands in for RpcClient._request: every request waits until the
    test answers it; counts how many are in flight."""

    def __init__(self):
        self.waiting = []         # (node address, procedure, body, Deferred)
        self.in_flight = 0
        self.most_in_flight = 0
        self.bodies = []

    def __call__(self, addr, procedure, body):
        d = defer.Deferred()
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.bodies.append(body)
        self.waiting.append((addr.address, procedure, body, d))
        return d

    def answer(self, count=None):
        """Answer the ``count`` oldest waiting requests (all by default)
        with the node's address as payload."""
        batch = self.waiting[:count] if count else list(self.waiting)
        del self.waiting[:len(batch)]
        for address, _, _, d in batch:
            self.in_flight -= 1
            d.callback((200, json.dumps([True, address]).encode()))


def client_for(nodes, clock, max_parallel=None):
    addresses = {n: rpc.NodeAddress("127.0.%d.%d" % (i // 250, i % 250 + 1))
                 for i, n in enumerate(nodes)}
    kwargs = {} if max_parallel is None else {"max_parallel": max_parallel}
    client = rpc.RpcClient(clock, None, addresses.__getitem__, clock=clock,
                           cert=the_cert(), **kwargs)
    held = HeldRequests()
    client._request = held
    return client, held, addresses


class CallManyTests(unittest.TestCase):

    NODES = ["node%d.example.com" % i for i in range(1, 101)]

    def test_bounded_and_every_answer_arrives(self):
        clock = task.Clock()
        client, held, addresses = client_for(self.NODES, clock,
                                             max_parallel=8)
        d = client.call_many(self.NODES, "upload_file",
                             ["/var/lib/ganeti/config.data", "x" * 1000])
        self.assertEqual(held.in_flight, 8)
        while held.waiting:
            self.assertNoResult(d)
            # answer a few at a time: the freed places are filled at once
            held.answer(3)
            self.assertLessEqual(held.in_flight, 8)
        results = self.successResultOf(d)
        self.assertEqual(held.most_in_flight, 8)
        self.assertEqual(sorted(results), sorted(self.NODES))
        for node, result in results.items():
            self.assertTrue(result.success, result.fail_msg)
            # each node's answer is its own (no mix-up in the queue)
            self.assertEqual(result.payload, addresses[node].address)
        self.assertEqual(len(held.bodies), 100)

    def test_arguments_encoded_once(self):
        clock = task.Clock()
        client, held, _ = client_for(self.NODES, clock)
        args = ["/var/lib/ganeti/config.data", ["zlib+base64", "A" * 10000]]
        d = client.call_many(self.NODES, "upload_file", args)
        while held.waiting:
            held.answer()
        self.successResultOf(d)
        self.assertEqual(len(held.bodies), 100)
        # one bytes object shared by every request
        self.assertEqual(len({id(b) for b in held.bodies}), 1)
        self.assertEqual(json.loads(held.bodies[0]), args)

    def test_default_bound(self):
        clock = task.Clock()
        client, held, _ = client_for(self.NODES, clock)
        d = client.call_many(self.NODES, "version")
        self.assertEqual(held.in_flight, rpc.DEFAULT_MAX_PARALLEL)
        while held.waiting:
            held.answer()
        self.assertEqual(len(self.successResultOf(d)), 100)

    def test_queued_call_timeout_starts_with_its_request(self):
        clock = task.Clock()
        client, held, _ = client_for(self.NODES[:2], clock, max_parallel=1)
        d = client.call_many(self.NODES[:2], "version", timeout=10)
        clock.advance(9)
        held.answer()                 # the first, after 9 s
        self.assertEqual(len(held.waiting), 1)
        clock.advance(9)              # the second has waited 18 s in all
        self.assertNoResult(d)
        clock.advance(1)              # 10 s since its request started
        results = self.successResultOf(d)
        self.assertTrue(results[self.NODES[0]].success)
        second = results[self.NODES[1]]
        self.assertFalse(second.success)
        self.assertIn("no answer to version within 10s", second.fail_msg)

    def test_prepared_arguments_for_single_calls(self):
        clock = task.Clock()
        client, held, _ = client_for(self.NODES[:3], clock)
        args = rpc.PreparedArgs([{"node_list": ["a", "b"]}])
        self.assertEqual(list(args), [{"node_list": ["a", "b"]}])
        calls = [client.call(n, "write_ssconf_files", args)
                 for n in self.NODES[:3]]
        held.answer()
        for d in calls:
            self.assertTrue(self.successResultOf(d).success)
        self.assertTrue(all(b is args.body for b in held.bodies))

    def test_bad_bound(self):
        self.assertRaises(ValueError, rpc.RpcClient, task.Clock(), None,
                          lambda n: None, cert=the_cert(), max_parallel=0)


class FanOutTests(unittest.TestCase):

    def test_order_and_bound(self):
        waiting = []
        running = []
        most = []

        async def work(item):
            running.append(item)
            most.append(len(running))
            d = defer.Deferred()
            waiting.append(d)
            await d
            running.remove(item)
            return item * 10
        d = rpc.fan_out(range(20), work, limit=3)
        while waiting:
            # answer the newest first: results still come in item order
            waiting.pop().callback(None)
        self.assertEqual(self.successResultOf(d), [i * 10 for i in range(20)])
        self.assertEqual(max(most), 3)

    def test_plain_functions_and_failures(self):
        def work(item):
            if item == 2:
                raise KeyError(item)
            return defer.succeed(item)
        f = self.failureResultOf(rpc.fan_out(range(4), work, limit=2),
                                 defer.FirstError)
        self.assertIsInstance(f.value.subFailure.value, KeyError)
        self.assertEqual(self.successResultOf(
            rpc.fan_out([], work)), [])
        self.assertRaises(ValueError, rpc.fan_out, [1], work, limit=0)
