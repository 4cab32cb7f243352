"""Tests for the QMP client protocol (no qemu needed)."""

import json
import os
import shutil
import tempfile

from twisted.internet import defer, reactor
from twisted.internet.protocol import Factory
from twisted.internet.testing import StringTransport
from twisted.protocols.basic import LineOnlyReceiver
from twisted.python.failure import Failure
from twisted.internet.error import ConnectionDone
from twisted.trial import unittest

from ganeti import errors
from ganeti.hypervisor import qmp

GREETING = (b'{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, '
            b'"major": 7}, "package": "Debian"}, "capabilities": ["oob"]}}\r\n')


class ProtocolTests(unittest.TestCase):

    def setUp(self):
        self.proto = qmp.QMPProtocol()
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)

    def sent(self):
        """Messages the client sent since the last call."""
        data = self.transport.value()
        self.transport.clear()
        return [json.loads(line) for line in data.splitlines() if line]

    def reply(self, obj):
        self.proto.dataReceived(json.dumps(obj).encode() + b"\r\n")

    def negotiate(self):
        ready = self.proto.when_ready()
        self.proto.dataReceived(GREETING)
        [caps] = self.sent()
        self.assertEqual(caps["execute"], "qmp_capabilities")
        self.assertNoResult(ready)
        self.reply({"return": {}, "id": caps["id"]})
        greeting = self.successResultOf(ready)
        self.assertEqual(greeting["version"]["qemu"]["major"], 7)

    def test_commands_wait_for_negotiation(self):
        d = self.proto.execute("query-status")
        self.assertEqual(self.sent(), [])  # nothing before the greeting
        self.negotiate()
        [cmd] = self.sent()
        self.assertEqual(cmd["execute"], "query-status")
        self.assertNotIn("arguments", cmd)
        self.reply({"return": {"status": "running", "running": True},
                    "id": cmd["id"]})
        self.assertEqual(self.successResultOf(d)["status"], "running")

    def test_replies_matched_by_id_and_arguments_sent(self):
        self.negotiate()
        d1 = self.proto.execute("query-status")
        d2 = self.proto.execute("set-action", {"reboot": "reset"})
        c1, c2 = self.sent()
        self.assertNotEqual(c1["id"], c2["id"])
        self.assertEqual(c2["arguments"], {"reboot": "reset"})
        self.reply({"return": {}, "id": c2["id"]})
        self.assertEqual(self.successResultOf(d2), {})
        self.assertNoResult(d1)
        self.reply({"return": {"status": "paused"}, "id": c1["id"]})
        self.assertEqual(self.successResultOf(d1), {"status": "paused"})

    def test_error_reply(self):
        self.negotiate()
        d = self.proto.execute("no-such-command")
        [cmd] = self.sent()
        self.reply({"error": {"class": "CommandNotFound",
                              "desc": "The command no-such-command has not "
                                      "been found"}, "id": cmd["id"]})
        err = self.failureResultOf(d, qmp.QMPError).value
        self.assertIsInstance(err, errors.HypervisorError)
        self.assertEqual(err.error_class, "CommandNotFound")
        self.assertIn("no-such-command", str(err))

    def test_events_go_to_listeners_and_waiters(self):
        self.negotiate()
        seen = []
        self.proto.add_event_listener(lambda *a: seen.append(a))
        waiter = self.proto.wait_for_event(
            "SHUTDOWN", lambda data: data.get("guest"))
        # an event between a command and its reply (qemu does this)
        d = self.proto.execute("system_powerdown")
        [cmd] = self.sent()
        self.reply({"timestamp": {"seconds": 100, "microseconds": 500000},
                    "event": "POWERDOWN"})
        self.reply({"return": {}, "id": cmd["id"]})
        self.successResultOf(d)
        self.reply({"timestamp": {"seconds": 101, "microseconds": 0},
                    "event": "SHUTDOWN",
                    "data": {"guest": False, "reason": "host-qmp-quit"}})
        self.assertNoResult(waiter)
        self.reply({"timestamp": {"seconds": 102, "microseconds": 0},
                    "event": "SHUTDOWN",
                    "data": {"guest": True, "reason": "guest-shutdown"}})
        self.assertEqual(self.successResultOf(waiter),
                         {"guest": True, "reason": "guest-shutdown"})
        self.assertEqual([(e, t) for e, _, t in seen],
                         [("POWERDOWN", 100.5), ("SHUTDOWN", 101.0),
                          ("SHUTDOWN", 102.0)])

    def test_event_waiter_cancel(self):
        self.negotiate()
        waiter = self.proto.wait_for_event("RESET")
        waiter.cancel()
        self.failureResultOf(waiter, defer.CancelledError)
        self.reply({"event": "RESET", "data": {}})  # nobody is hurt

    def test_connection_lost_fails_everything_pending(self):
        self.negotiate()
        d = self.proto.execute("query-status")
        waiter = self.proto.wait_for_event("SHUTDOWN")
        lost = self.proto.when_lost()
        self.proto.connectionLost(Failure(ConnectionDone("qemu exited")))
        self.failureResultOf(d, qmp.QMPConnectionLost)
        self.failureResultOf(waiter, qmp.QMPConnectionLost)
        self.successResultOf(lost)
        self.assertTrue(self.proto.lost)
        self.failureResultOf(self.proto.execute("cont"), qmp.QMPConnectionLost)

    def test_lost_before_greeting(self):
        ready = self.proto.when_ready()
        self.proto.connectionLost(Failure(ConnectionDone()))
        self.failureResultOf(ready, qmp.QMPConnectionLost)

    def test_garbage_drops_connection(self):
        self.negotiate()
        self.proto.dataReceived(b"this is not json\r\n")
        self.assertTrue(self.transport.disconnecting)

    def test_reply_without_pending_command_is_ignored(self):
        self.negotiate()
        self.reply({"error": {"class": "GenericError", "desc": "JSON parse"}})
        self.assertFalse(self.transport.disconnecting)


class _Server(LineOnlyReceiver):
    delimiter = b"\n"

    def connectionMade(self):
        self.factory.clients.append(self)
        if self.factory.greet:
            self.transport.write(GREETING)

    def lineReceived(self, line):
        cmd = json.loads(line)
        self.factory.commands.append(cmd["execute"])
        self.sendLine(json.dumps({"return": {"status": "running"},
                                  "id": cmd["id"]}).encode())


class ConnectTests(unittest.TestCase):
    """connect_qmp against a server on a real UNIX socket."""

    def listen(self, greet=True):
        factory = Factory.forProtocol(_Server)
        factory.greet = greet
        factory.commands = []
        factory.clients = []
        # UNIX socket paths are limited to 108 bytes; trial's temp dirs
        # inside a tox env are longer than that.
        tmp = tempfile.mkdtemp(prefix="gnt-qmp-", dir="/tmp")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "qmp.sock")
        port = reactor.listenUNIX(path, factory)
        self.addCleanup(port.stopListening)
        return path, factory

    def disconnect(self, proto):
        lost = proto.when_lost()
        proto.transport.loseConnection()
        return lost

    @defer.inlineCallbacks
    def test_connect_and_query(self):
        path, factory = self.listen()
        proto = yield qmp.connect_qmp(reactor, path, timeout=5)
        result = yield proto.execute("query-status")
        self.assertEqual(result["status"], "running")
        self.assertEqual(factory.commands, ["qmp_capabilities", "query-status"])
        yield self.disconnect(proto)

    @defer.inlineCallbacks
    def test_no_greeting_times_out(self):
        path, factory = self.listen(greet=False)
        err = yield self.assertFailure(
            qmp.connect_qmp(reactor, path, timeout=0.2), errors.HypervisorError)
        self.assertIn("no QMP greeting", str(err))
        # the half-open connection is closed again
        for client in factory.clients:
            if client.transport.connected:
                yield defer.Deferred.fromCoroutine(self._wait_closed(client))

    async def _wait_closed(self, client):
        from ganeti.hypervisor import state
        await state.wait_until(reactor, lambda: not client.transport.connected,
                               5, 0.01)

    @defer.inlineCallbacks
    def test_no_socket(self):
        err = yield self.assertFailure(
            qmp.connect_qmp(reactor, "/nonexistent/qmp.sock", timeout=1),
            errors.HypervisorError)
        self.assertIn("/nonexistent/qmp.sock", str(err))
