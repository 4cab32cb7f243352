"""The master's RPC client against a real in-process node daemon."""

import socket

from twisted.internet import defer, protocol, reactor, task
from twisted.trial import unittest

from ganeti import config
from ganeti import errors
from ganeti import objects
from ganeti import rpc
from tests.test_crypto import cluster_cert, listen_noded, rpc_client


def closed_port():
    """A TCP port on 127.0.0.1 where nothing listens (just freed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class _Silent(protocol.Protocol):
    """Accepts a connection and never says anything."""


class RpcClientTests(unittest.TestCase):

    timeout = 30

    def setUp(self):
        self.base = self.mktemp()
        self.cert = cluster_cert(self.base)
        self.port, self.procs = listen_noded(self, self.cert)
        self.client = rpc_client(self, self.cert, self.port,
                                 offline={"offline1"})

    @defer.inlineCallbacks
    def test_success(self):
        result = yield self.client.call("node1", "version")
        self.assertEqual(result, rpc.RpcResult(
            node="node1", procedure="version", success=True,
            payload=3000000))
        self.assertEqual(result.raise_if_failed(), 3000000)

    @defer.inlineCallbacks
    def test_named_arguments(self):
        result = yield self.client.call(
            "node1", "instance_list", {"hvs": ["fake"]})
        self.assertTrue(result.success, result.fail_msg)
        self.assertEqual(result.payload, [])

    @defer.inlineCallbacks
    def test_node_error_names_the_argument(self):
        result = yield self.client.call("node1", "instance_shutdown",
                                        ["inst1", "fake", "soon"])
        self.assertFalse(result.success)
        self.assertIn("node node1", result.fail_msg)
        self.assertIn("argument 'timeout'", result.fail_msg)
        err = self.assertRaises(errors.RemoteError, result.raise_if_failed,
                                "stopping inst1")
        self.assertIn("stopping inst1: node node1", str(err))

    @defer.inlineCallbacks
    def test_unknown_procedure(self):
        result = yield self.client.call("node1", "no_such_thing")
        self.assertFalse(result.success)
        self.assertIn("unknown procedure 'no_such_thing'", result.fail_msg)

    @defer.inlineCallbacks
    def test_offline_node_is_not_contacted(self):
        connects = []
        original = reactor.connectTCP
        self.patch(reactor, "connectTCP",
                   lambda *a, **kw: connects.append(a) or original(*a, **kw))
        result = yield self.client.call("offline1", "version")
        self.assertFalse(result.success)
        self.assertTrue(result.offline)
        self.assertIn("offline1 is offline", result.fail_msg)
        self.assertEqual(connects, [])

    @defer.inlineCallbacks
    def test_connection_refused(self):
        client = rpc_client(self, self.cert, closed_port())
        result = yield client.call("node2", "version")
        self.assertFalse(result.success)
        self.assertFalse(result.offline)
        self.assertIn("node node2 (127.0.0.1:", result.fail_msg)
        self.assertIn("connection refused", result.fail_msg)

    @defer.inlineCallbacks
    def test_timeout_driven_by_clock(self):
        # A peer that accepts TCP and then never answers (not even TLS).
        factory = protocol.Factory.forProtocol(_Silent)
        silent = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(silent.stopListening)
        clock = task.Clock()
        client = rpc_client(self, self.cert, silent.getHost().port,
                            clock=clock)
        d = client.call("node3", "node_info", [], timeout=42)
        yield task.deferLater(reactor, 0.2, lambda: None)  # it connects
        self.assertNoResult(d)
        clock.advance(41)
        self.assertNoResult(d)
        clock.advance(1)
        result = yield d
        self.assertFalse(result.success)
        self.assertIn("node node3", result.fail_msg)
        self.assertIn("no answer to node_info within 42s", result.fail_msg)

    @defer.inlineCallbacks
    def test_resolver_failure(self):
        def resolve(node):
            raise KeyError(node)
        client = rpc.RpcClient(reactor, None, resolve, cert=self.cert)
        self.addCleanup(client.close)
        result = yield client.call("ghost", "version")
        self.assertFalse(result.success)
        self.assertIn("node ghost: cannot resolve", result.fail_msg)

    @defer.inlineCallbacks
    def test_call_many_in_parallel(self):
        down = closed_port()

        def resolve(node):
            return {"a": ("127.0.0.1", self.port),
                    "b": ("127.0.0.1", self.port),
                    "c": ("127.0.0.1", down),
                    "d": ("127.0.0.1", self.port, True)}[node]
        client = rpc.RpcClient(reactor, None, resolve, cert=self.cert)
        self.addCleanup(client.close)
        results = yield client.call_many(["a", "b", "c", "d"], "version")
        self.assertEqual(sorted(results), ["a", "b", "c", "d"])
        self.assertTrue(results["a"].success and results["b"].success)
        self.assertFalse(results["c"].success)
        self.assertIn("connection refused", results["c"].fail_msg)
        self.assertTrue(results["d"].offline)

    def test_config_resolver(self):
        store = config.ConfigStore.create(None, "cluster.example.com",
                                          "node1.example.com", "127.0.0.1")
        node2 = objects.Node(name="node2.example.com", primary_ip="127.0.0.2",
                             secondary_ip="127.0.0.2", offline=True,
                             master_candidate=False)
        store.add_node(node2)
        resolve = rpc.config_resolver(store, port=1999)
        self.assertEqual(resolve("node1.example.com"),
                         rpc.NodeAddress("127.0.0.1", 1999, False))
        self.assertEqual(resolve(node2.uuid),
                         rpc.NodeAddress("127.0.0.2", 1999, True))
        self.assertRaises(errors.OpPrereqError, resolve, "nope")
