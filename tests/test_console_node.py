"""The node's end of the browser console: serial console sessions
(:mod:`ganeti.backend.console`) and their procedures, on a Clock, with
fake console sockets."""

import base64
import itertools

from twisted.internet import defer
from twisted.internet.testing import StringTransport

from ganeti.backend import console
from ganeti.server.noded.console import ConsoleProcedures
from ganeti.server.noded.procedure import INLINE, ProcedureTable
from ganeti import pathutils

from tests.fakes import ClockTestCase


class FakeSockets(object):
    """``connect(path, protocol)``: a StringTransport per connection, or
    a refusal for paths in ``missing``."""

    def __init__(self):
        self.links = {}
        self.missing = set()

    def connect(self, path, proto):
        if path in self.missing:
            return defer.fail(OSError(2, "No such file or directory"))
        transport = StringTransport()
        proto.makeConnection(transport)
        self.links.setdefault(path, []).append(proto)
        return defer.succeed(proto)

    def last(self, path):
        return self.links[path][-1]


def b64(data):
    return base64.b64encode(data).decode("ascii")


class SessionTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.sockets = FakeSockets()
        ids = itertools.count(1)
        self.sessions = console.ConsoleSessions(
            self.clock, self.sockets.connect, max_sessions=2,
            buffer_size=16, idle_timeout=100,
            new_id=lambda: "s%d" % next(ids))
        self.addCleanup(self.sessions.close_all)

    def open(self, instance="vm1", owner="alice"):
        return self.successResultOf(defer.Deferred.fromCoroutine(
            self.sessions.open(instance, "/run/%s.serial" % instance, owner)))

    def read(self, sid, offset, timeout=0, owner="alice"):
        return self.successResultOf(self.sessions.read(sid, owner, offset,
                                                       timeout))

    def test_output_write_and_close(self):
        self.assertEqual(self.open(), {"session": "s1"})
        link = self.sockets.last("/run/vm1.serial")
        link.dataReceived(b"login: \x1b[1m")
        answer = self.read("s1", 0)
        self.assertEqual(answer, {"offset": 0, "next": 11,
                                  "data": b64(b"login: \x1b[1m"),
                                  "dropped": 0, "closed": None})
        self.assertEqual(self.read("s1", 7)["data"], b64(b"\x1b[1m"))
        self.assertEqual(self.sessions.write("s1", "alice", b"root\r\x00"),
                         {"written": 6})
        self.assertEqual(link.transport.value(), b"root\r\x00")
        self.assertEqual(self.sessions.close("s1", "alice"),
                         {"closed": "s1"})
        self.assertTrue(link.transport.disconnecting)
        self.assertEqual(self.sessions.read("s1", "alice", 0, 0).result[
            "error"], console.NOT_FOUND)

    def test_long_poll_waits_for_output(self):
        self.open()
        d = self.sessions.read("s1", "alice", 0, 20)
        self.assertNoResult(d)
        self.clock.advance(5)
        self.sockets.last("/run/vm1.serial").dataReceived(b"hi")
        self.assertEqual(self.successResultOf(d)["data"], b64(b"hi"))
        # nothing comes: an empty answer after the timeout
        d = self.sessions.read("s1", "alice", 2, 20)
        self.clock.advance(20)
        answer = self.successResultOf(d)
        self.assertEqual((answer["data"], answer["next"]), ("", 2))
        # waits are capped
        d = self.sessions.read("s1", "alice", 2, 3600)
        self.clock.advance(console.MAX_READ_WAIT)
        self.assertEqual(self.successResultOf(d)["next"], 2)
        # a cancelled read leaves no timer behind
        d = self.sessions.read("s1", "alice", 2, 20)
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)

    def test_bounded_buffer_reports_a_gap(self):
        self.open()
        link = self.sockets.last("/run/vm1.serial")
        link.dataReceived(b"0123456789")
        link.dataReceived(b"abcdefghij")
        answer = self.read("s1", 0)
        self.assertEqual((answer["offset"], answer["dropped"],
                          answer["next"]), (4, 4, 20))
        self.assertEqual(base64.b64decode(answer["data"]),
                         b"456789abcdefghij")
        self.assertEqual(self.read("s1", 18)["dropped"], 0)
        err = self.read("s1", 21)
        self.assertEqual(err["error"], "offset")
        self.assertIn("offset 21 is beyond the output", err["message"])

    def test_idle_sessions_close(self):
        self.open()
        link = self.sockets.last("/run/vm1.serial")
        self.clock.advance(60)
        self.read("s1", 0)      # used: the idle time starts again
        self.clock.advance(60)
        self.assertIn("s1", self.sessions.sessions)
        # a reader waiting keeps it open
        d = self.sessions.read("s1", "alice", 0, 30)
        self.clock.advance(30)
        self.successResultOf(d)
        self.clock.advance(100)
        self.assertNotIn("s1", self.sessions.sessions)
        self.assertTrue(link.transport.disconnecting)
        self.assertEqual(self.sessions.write("s1", "alice", b"x")["error"],
                         console.NOT_FOUND)

    def test_limit_per_node(self):
        self.open("vm1")
        self.open("vm2")
        err = self.open("vm3")
        self.assertEqual(err["error"], console.LIMIT)
        self.assertIn("2 console sessions open", err["message"])
        # a new session of an instance replaces its old one
        self.assertEqual(self.open("vm1", "bob"), {"session": "s3"})
        old = self.sockets.links["/run/vm1.serial"][0]
        self.assertTrue(old.transport.disconnecting)
        answer = self.read("s1", 0)
        self.assertIn("taken over by a new session of bob",
                      answer["closed"])
        self.assertEqual(self.sessions.write("s1", "alice", b"x")["error"],
                         console.CLOSED)

    def test_other_owner_and_unknown_session(self):
        self.open()
        for result in (self.read("s1", 0, owner="mallory"),
                       self.sessions.write("s1", "mallory", b"x"),
                       self.sessions.close("s1", "mallory"),
                       self.read("nope", 0),
                       self.sessions.read("s1", "alice", 0, 0,
                                          instance="vm2").result):
            self.assertEqual(result["error"], console.NOT_FOUND)
            self.assertIn("is not yours", result["message"])
        self.assertIn("s1", self.sessions.sessions)

    def test_console_going_away(self):
        self.open()
        link = self.sockets.last("/run/vm1.serial")
        link.dataReceived(b"bye")
        d = self.sessions.read("s1", "alice", 3, 30)
        link.connectionLost(None)
        answer = self.successResultOf(d)
        self.assertIn("went away", answer["closed"])
        self.assertEqual(base64.b64decode(self.read("s1", 0)["data"]),
                         b"bye")
        # kept a while for the last reads, then forgotten
        self.clock.advance(console.CLOSED_GRACE)
        self.assertNotIn("s1", self.sessions.sessions)

    def test_not_running(self):
        self.sockets.missing.add("/run/vm1.serial")
        err = self.open()
        self.assertEqual(err["error"], console.NOT_RUNNING)
        self.assertIn("cannot connect to the serial console of vm1",
                      err["message"])
        self.assertEqual(self.sessions.sessions, {})

    def test_big_write_refused(self):
        self.open()
        err = self.sessions.write("s1", "alice",
                                  b"x" * (console.MAX_WRITE_SIZE + 1))
        self.assertEqual(err["error"], "data")


class Procs(ConsoleProcedures, ProcedureTable):

    def __init__(self, clock, sockets, root):
        self.reactor = clock
        self.paths = pathutils.Paths(root)
        ProcedureTable.__init__(self, INLINE)
        self._consoles = console.ConsoleSessions(clock, sockets.connect,
                                                 new_id=lambda: "s1")


class ProcedureTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.sockets = FakeSockets()
        self.procs = Procs(self.clock, self.sockets, "/tmp/work/none")
        self.addCleanup(self.procs.consoles.close_all)

    def call(self, name, body):
        return self.successResultOf(self.procs.call(name, body))

    def test_through_the_table(self):
        self.assertEqual(self.call("console_open", ["vm1", "user=alice"]),
                         {"session": "s1"})
        [path] = self.sockets.links
        self.assertTrue(path.endswith("/kvm-hypervisor/ctrl/vm1.serial"),
                        path)
        self.assertEqual(self.call("console_write", {
            "session": "s1", "owner": "user=alice",
            "data": b64(b"\x03ls\r")}), {"written": 4})
        self.assertEqual(self.sockets.last(path).transport.value(),
                         b"\x03ls\r")
        self.assertEqual(self.call("console_read", ["s1", "user=alice", 0, 0,
                                                    "vm1"])["next"], 0)
        self.assertEqual(self.call("console_close", ["s1", "user=alice"]),
                         {"closed": "s1"})

    def test_bad_arguments_name_the_field(self):
        for name, body, field in [
                ("console_open", ["../etc", "a"], "instance"),
                ("console_write", ["s1", "a", "!!"], "data"),
                ("console_read", ["s1", "a", -1], "offset")]:
            err = self.failureResultOf(self.procs.call(name, body)).value
            self.assertEqual(err.args[0], field)


class OptionTests(ClockTestCase):

    def test_limits_are_options(self):
        from twisted.python import usage
        from ganeti.server import noded
        opts = noded.Options()
        err = self.assertRaises(usage.UsageError, opts.parseOptions,
                                ["--console-sessions", "0", "--bootstrap"])
        self.assertEqual(str(err), "--console-sessions must be positive,"
                         " not 0")
        procs = Procs(self.clock, FakeSockets(), "/tmp/work/none")
        procs._consoles = None
        procs.console_settings = {"max_sessions": 3, "idle_timeout": 10.0,
                                  "buffer_size": 99}
        sessions = procs.consoles
        self.assertEqual((sessions.max_sessions, sessions.idle_timeout,
                          sessions.buffer_size), (3, 10.0, 99))
