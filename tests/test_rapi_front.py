"""The RAPI daemon's HTTP front (ganeti.rapi.front), in process.

Connections are the daemon's own channel objects on string transports, fed
bytes as a client would send them; the app behind is the RAPI app over the
fake master of tests.test_rapi; time is a fake clock.  What is checked is
what a client sees: when an answer comes (before the body was sent), its
status and message, whether the connection is closed.
"""

import json
import os

from twisted.internet import error
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.python import failure
from twisted.trial import unittest

from ganeti.rapi import app as rapi_app
from ganeti.rapi import auth
from ganeti.rapi import front

from tests.fakes import ClockTestCase
from tests.test_rapi import (FakeHandler, FakeMaster, READER, USERS,
                             WRITER, make_config)

GIB = 1024 ** 3


def parse_response(data):
    """``(status, headers dict (lower-case names), JSON body)`` of the one
    response in ``data``; None if nothing was answered."""
    if not data:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = _unchunk(body)
    value = json.loads(body.decode("utf-8")) if body.strip() else None
    return status, headers, value


def _unchunk(data):
    out = b""
    while data:
        size, _, rest = data.partition(b"\r\n")
        size = int(size, 16)
        if not size:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return out


def head(method, path, headers=()):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: rapi.test"]
    lines.extend("%s: %s" % h for h in headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Connection(object):
    """One client connection to the front."""

    #: every connection made, for the test's end
    made = []

    def __init__(self, factory, host="127.0.0.7", port=40000):
        addr = IPv4Address("TCP", host, port)
        self.proto = factory.buildProtocol(addr)
        self.transport = StringTransport(peerAddress=addr)
        self.lost = False
        if self.proto is not None:
            self.proto.makeConnection(self.transport)
            self.made.append(self)

    def send(self, data):
        self.proto.dataReceived(data)

    def answer(self):
        return parse_response(self.transport.value())

    @property
    def closed(self):
        return self.transport.disconnecting

    def lose(self):
        if not self.lost:
            self.lost = True
            self.proto.connectionLost(failure.Failure(
                error.ConnectionDone()))


class FrontTestCase(ClockTestCase):

    limits = front.Limits()

    def setUp(self):
        ClockTestCase.setUp(self)
        root = os.path.abspath(self.mktemp())
        os.makedirs(root)
        users_path = os.path.join(root, "users")
        with open(users_path, "w") as f:
            f.write(USERS)
        self.handler = FakeHandler(make_config(), self.clock)
        self.rapi = rapi_app.RapiApp(FakeMaster(self.handler),
                                     auth.UsersFile(users_path), self.clock)
        self.site = front.RapiSite(self.rapi.resource(), self.rapi.check_head,
                                   self.limits, reactor=self.clock)
        Connection.made = []

    def tearDown(self):
        # the client goes: every connection's timers with it
        for conn in Connection.made:
            conn.lose()
        ClockTestCase.tearDown(self)

    def connect(self, **kwargs):
        return Connection(self.site, **kwargs)

    def request(self, method, path, body=None, headers=()):
        conn = self.connect()
        hdrs = list(headers)
        if body is not None:
            hdrs += [("Content-Type", "application/json"),
                     ("Content-Length", str(len(body)))]
        conn.send(head(method, path, hdrs) + (body or b""))
        return conn


class BodyBeforeReadingTests(FrontTestCase):
    """Rights and size are checked on the head: the answer comes before
    the client sent its body, and what it sends then is not kept."""

    def test_anonymous_post_answered_401_before_its_body(self):
        conn = self.connect()
        conn.send(head("POST", "/2/instances", [
            ("Content-Type", "application/json"),
            ("Content-Length", str(GIB))]))
        status, headers, err = conn.answer()
        self.assertEqual(status, 401)
        self.assertEqual(err["message"], "Unauthorized")
        self.assertEqual(headers["www-authenticate"],
                         'Basic realm="Ganeti Remote API"')
        self.assertEqual(headers["connection"], "close")
        # what comes after is dropped, not kept anywhere
        request = conn.proto.requests[0]
        conn.send(b"x" * 65536)
        self.assertIsNone(request.content)
        self.assertEqual(conn.answer()[0], 401)    # nothing more written
        self.assertFalse(conn.closed)
        # the connection goes shortly after (the client read its answer)
        self.clock.advance(front.LINGER)
        self.assertTrue(conn.closed)
        self.assertEqual(self.handler.submitted, [])

    def test_wrong_password_and_missing_right_before_the_body(self):
        from tests.test_rapi import basic
        conn = self.connect()
        conn.send(head("PUT", "/2/tags?tag=a", [
            ("Authorization", basic("writer", "wrong")),
            ("Content-Length", str(GIB))]))
        self.assertEqual(conn.answer()[0], 401)
        conn = self.connect()
        conn.send(head("PUT", "/2/tags?tag=a", [
            ("Authorization", READER), ("Content-Length", str(GIB))]))
        status, _, err = conn.answer()
        self.assertEqual(status, 403)
        self.assertEqual(err["message"], "Forbidden")
        self.assertEqual(self.handler.submitted, [])

    def test_body_over_the_limit_answered_413_without_100_continue(self):
        conn = self.connect()
        size = self.limits.max_body + 1
        conn.send(head("POST", "/2/instances", [
            ("Authorization", WRITER), ("Content-Type", "application/json"),
            ("Content-Length", str(size)), ("Expect", "100-continue")]))
        data = conn.transport.value()
        self.assertNotIn(b"100 Continue", data)
        status, _, err = conn.answer()
        self.assertEqual(status, 413)
        self.assertEqual(err["explain"], "The request body of %d bytes is"
                         " larger than the limit of %d bytes"
                         % (size, self.limits.max_body))
        # more than a little after the answer: cut at once
        conn.send(b"x" * (front.LINGER_BYTES + 1))
        self.assertTrue(conn.closed)
        self.assertEqual(self.handler.submitted, [])

    def test_chunked_body_cut_at_the_limit(self):
        conn = self.connect()
        conn.send(head("PUT", "/2/modify", [
            ("Authorization", WRITER), ("Content-Type", "application/json"),
            ("Transfer-Encoding", "chunked")]))
        self.assertIsNone(conn.answer())
        chunk = b"x" * 65536
        sent = 0
        while conn.answer() is None:
            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
        self.assertEqual(sent, self.limits.max_body + len(chunk) -
                         self.limits.max_body % len(chunk))
        status, _, err = conn.answer()
        self.assertEqual(status, 413)
        self.assertIn("larger than the limit of %d bytes"
                      % self.limits.max_body, err["explain"])
        # what was kept never passed the limit
        self.assertLessEqual(len(conn.proto.requests[0].content.getvalue()),
                             self.limits.max_body)
        self.assertEqual(self.handler.submitted, [])

    def test_bodies_within_the_limit_are_served(self):
        # a big instance creation (many disks and NICs) is a few kB
        body = json.dumps({
            "__version__": 1, "mode": "create", "name": "big.example.com",
            "disk_template": "plain", "os_type": "busybox",
            "pnode": "node1.example.com", "beparams": {"memory": 512},
            "disks": [{"size": 1024, "name": "disk%d" % i}
                      for i in range(16)],
            "nics": [{"mac": "aa:00:00:00:00:%02x" % i} for i in range(8)],
            "osparams": {"key%d" % i: "v" * 100 for i in range(100)},
        }).encode()
        self.assertGreater(len(body), 10000)
        conn = self.request("POST", "/2/instances", body,
                            [("Authorization", WRITER)])
        status, headers, job = conn.answer()
        self.assertEqual(status, 200, job)
        self.assertEqual(headers["connection"], "close")
        self.assertEqual(self.handler.submitted[-1][0]["instance_name"],
                         "big.example.com")
        # a chunked one too
        conn = self.connect()
        conn.send(head("PUT", "/2/modify", [
            ("Authorization", WRITER), ("Content-Type", "application/json"),
            ("Transfer-Encoding", "chunked")]) +
            b"2\r\n{}\r\n0\r\n\r\n")
        self.assertEqual(conn.answer()[0], 200)
        self.assertEqual(len(self.handler.submitted), 2)

    def test_anonymous_reads_and_unknown_paths_still_answered(self):
        status, _, value = self.request("GET", "/version").answer()
        self.assertEqual((status, value), (200, 2))
        status, _, err = self.request("GET", "/nothing").answer()
        self.assertEqual(status, 404)
        status, _, err = self.request("PATCH", "/version").answer()
        self.assertEqual(status, 501)


class SmallBodyTests(FrontTestCase):
    """The limit is the daemon's option."""

    limits = front.Limits(max_body=100)

    def test_limit_from_the_option(self):
        body = json.dumps({"tags": ["t" * 50, "u" * 50]}).encode()
        conn = self.request("PUT", "/2/modify", body,
                            [("Authorization", WRITER)])
        self.assertEqual(conn.answer()[0], 413)
        conn = self.request("PUT", "/2/modify", b"{}",
                            [("Authorization", WRITER)])
        self.assertEqual(conn.answer()[0], 200)


class HeadTests(FrontTestCase):

    def test_slow_head_times_out(self):
        conn = self.connect()
        conn.send(b"GET /version HTTP/1.1\r\n")
        for i in range(2):
            self.clock.advance(10)
            conn.send(b"X-Slow-%d: a\r\n" % i)
        self.assertIsNone(conn.answer())
        self.clock.advance(10)
        status, _, err = conn.answer()
        self.assertEqual(status, 408)
        self.assertEqual(err["explain"], "The request head did not arrive"
                         " within 30 seconds")
        self.clock.advance(front.LINGER)
        self.assertTrue(conn.closed)

    def test_idle_connection_times_out(self):
        conn = self.connect()
        self.clock.advance(self.limits.head_timeout)
        self.assertEqual(conn.answer()[0], 408)

    def test_slow_body_times_out(self):
        conn = self.connect()
        conn.send(head("PUT", "/2/modify", [
            ("Authorization", WRITER), ("Content-Type", "application/json"),
            ("Content-Length", "100")]) + b"{")
        self.clock.advance(self.limits.body_timeout - 1)
        self.assertIsNone(conn.answer())
        self.clock.advance(1)
        status, _, err = conn.answer()
        self.assertEqual(status, 408)
        self.assertEqual(err["explain"], "The request body did not arrive"
                         " within 60 seconds")
        self.assertEqual(self.handler.submitted, [])

    def test_long_request_line_414(self):
        for length in (self.limits.max_request_line + 1, 100000):
            conn = self.connect()
            conn.send(b"GET /2/instances?x=" + b"a" * length)
            status, _, err = conn.answer()
            self.assertEqual(status, 414)
            self.assertEqual(err["explain"], "The request line is longer"
                             " than the limit of 8192 bytes")

    def test_too_many_or_too_large_headers_431(self):
        conn = self.connect()
        conn.send(head("GET", "/version", [("X-H%d" % i, "v")
                                           for i in range(101)]))
        status, _, err = conn.answer()
        self.assertEqual(status, 431)
        self.assertEqual(err["explain"],
                         "The request has more than 100 header lines")
        conn = self.connect()
        conn.send(head("GET", "/version", [("X-H%d" % i, "v" * 1000)
                                           for i in range(20)]))
        status, _, err = conn.answer()
        self.assertEqual(status, 431)
        self.assertEqual(err["explain"],
                         "The request has more than 16384 bytes of headers")
        conn = self.connect()
        conn.send(b"GET /version HTTP/1.1\r\nX-Long: " + b"v" * 100000)
        status, _, err = conn.answer()
        self.assertEqual(status, 431)
        # within the limits: served
        conn = self.connect()
        conn.send(head("GET", "/version", [("X-H%d" % i, "v" * 100)
                                           for i in range(90)]))
        self.assertEqual(conn.answer()[0], 200)

    def test_one_request_per_connection(self):
        conn = self.connect()
        conn.send(head("GET", "/version") + head("GET", "/2/info"))
        data = conn.transport.value()
        self.assertEqual(data.count(b"HTTP/1.1 "), 1)
        self.assertEqual(conn.answer()[0], 200)
        self.assertTrue(conn.closed)


class ConnectionLimitTests(FrontTestCase):

    limits = front.Limits(max_connections=6, max_client_connections=4)

    def setUp(self):
        FrontTestCase.setUp(self)
        self.limiter = front.ConnectionLimiter(self.site, self.limits,
                                               self.clock)

    def test_per_client_cap_leaves_room_for_others(self):
        hog = [Connection(self.limiter, "127.0.0.5", 1000 + i)
               for i in range(4)]
        self.assertTrue(all(c.proto is not None for c in hog))
        # the fifth from the same address is refused at once
        self.assertIsNone(Connection(self.limiter, "127.0.0.5", 2000).proto)
        # another client is served
        other = Connection(self.limiter, "127.0.0.6", 3000)
        other.send(head("GET", "/version"))
        status, _, value = other.answer()
        self.assertEqual((status, value), (200, 2))
        # a connection that ends frees its place
        hog[0].lose()
        again = Connection(self.limiter, "127.0.0.5", 2001)
        self.assertIsNotNone(again.proto)

    def test_total_cap(self):
        conns = [Connection(self.limiter, "127.0.1.%d" % i, 1000)
                 for i in range(6)]
        self.assertTrue(all(c.proto is not None for c in conns))
        self.assertIsNone(Connection(self.limiter, "127.0.2.1", 1000).proto)
        conns[3].lose()
        self.assertIsNotNone(Connection(self.limiter, "127.0.2.1",
                                        1000).proto)

    def test_refusals_logged_once_a_minute(self):
        from twisted.logger import globalLogPublisher
        seen = []

        def observer(event):
            if "connection(s)" in event.get("log_format", ""):
                seen.append(event)
        globalLogPublisher.addObserver(observer)
        self.addCleanup(globalLogPublisher.removeObserver, observer)
        [Connection(self.limiter, "127.0.0.5", 1000 + i) for i in range(4)]
        for i in range(50):
            Connection(self.limiter, "127.0.0.5", 2000 + i)
        self.assertEqual(len(seen), 1)
        self.clock.advance(front.REFUSAL_LOG_INTERVAL)
        Connection(self.limiter, "127.0.0.5", 3000)
        self.assertEqual(len(seen), 2)
        self.assertEqual(seen[-1]["count"], 50)


class DaemonOptionTests(unittest.TestCase):

    def test_documented_defaults(self):
        from ganeti.server import rapi as rapi_server
        opts = rapi_server.Options()
        opts.parseOptions(["--root", self.mktemp(), "--no-ssl"])
        self.assertEqual(rapi_server.limits(opts), front.Limits(
            max_body=4 * 1024 * 1024, max_connections=256,
            max_client_connections=32, head_timeout=30.0,
            body_timeout=60.0, max_request_line=8192,
            max_header_bytes=16384, max_headers=100))

    def test_limits_from_options(self):
        from twisted.python import usage
        from ganeti.server import rapi as rapi_server
        opts = rapi_server.Options()
        opts.parseOptions(["--root", self.mktemp(), "--no-ssl",
                           "--max-body-size", "1000",
                           "--max-connections", "10",
                           "--max-client-connections", "3",
                           "--request-head-timeout", "5",
                           "--request-body-timeout", "7"])
        self.assertEqual(rapi_server.limits(opts), front.Limits(
            max_body=1000, max_connections=10, max_client_connections=3,
            head_timeout=5.0, body_timeout=7.0))
        opts = rapi_server.Options()
        err = self.assertRaises(usage.UsageError, opts.parseOptions,
                                ["--root", self.mktemp(), "--no-ssl",
                                 "--max-body-size", "0"])
        self.assertIn("--max-body-size", str(err))
