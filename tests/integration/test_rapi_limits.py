"""ganeti-rapi as a real daemon against clients that misbehave.

Two RAPI daemons of a virtual cluster's master node (no master daemon is
needed: everything here is answered before a request would reach it), on a
random loopback address: plain HTTP, and HTTPS with the RAPI certificate
and a short deadline for request heads.  Raw sockets play the clients, from
loopback addresses of their own where the test needs two clients.
"""

import base64
import json
import socket
import ssl
import time

from tests.integration.daemons import VirtualClusterTestCase, port_open, \
    prepare_rapi, random_ips, wait_for
from tests.places import free_port

GIB = 1024 ** 3
#: the daemon's default limits (docs/rapi.rst): bytes of a body,
#: connections from one client address
MAX_BODY = 4 * 1024 * 1024
CLIENT_CAP = 32
#: the HTTPS daemon's deadline for request heads (seconds)
HEAD_TIMEOUT = 3
WRITER = "Basic " + base64.b64encode(b"writer:s3cret").decode()


def read_all(sock, timeout=20):
    """What the server sends until it closes (a reset counts as closing)."""
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return data
        if not chunk:
            return data
        data += chunk


def parse(data):
    """``(status, JSON body)`` of a response."""
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def request_head(method, path, headers):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: rapi"]
    lines += ["%s: %s" % item for item in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class RapiLimitsTests(VirtualClusterTestCase):

    BASE_PREFIX = "gnt-rl-"

    def setUp(self):
        VirtualClusterTestCase.setUp(self)
        node = self.vc.master
        prepare_rapi(self.vc, ["writer s3cret write"])
        self.plain_port = free_port(node.ip)
        self.tls_port = free_port(node.ip)
        plain = self.vc.start("rapi-plain", self.vc.twistd_command(
            "ganeti-rapi", node, "--port", str(self.plain_port),
            "--no-ssl"))
        tls = self.vc.start("rapi-tls", self.vc.twistd_command(
            "ganeti-rapi", node, "--port", str(self.tls_port),
            "--request-head-timeout", str(HEAD_TIMEOUT)))
        for proc, port in ((plain, self.plain_port), (tls, self.tls_port)):
            wait_for("RAPI on %d" % port, lambda: self.alive(proc) and
                     port_open(node.ip, port))

    def connect(self, tls=False, source=None):
        sock = socket.create_connection(
            (self.vc.master.ip, self.tls_port if tls else self.plain_port),
            10, source_address=(source, 0) if source else None)
        self.addCleanup(sock.close)
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            sock = ctx.wrap_socket(sock)
            self.addCleanup(sock.close)
        return sock

    def test_huge_bodies_answered_before_they_are_sent(self):
        for tls in (False, True):
            # a writer's body over the limit: 413 on the head alone
            sock = self.connect(tls)
            sock.sendall(request_head("POST", "/2/instances", [
                ("Authorization", WRITER),
                ("Content-Type", "application/json"),
                ("Content-Length", str(GIB))]))
            sock.settimeout(20)
            status, err = parse(sock.recv(65536))
            self.assertEqual(status, 413)
            self.assertEqual(err["explain"], "The request body of %d bytes"
                             " is larger than the limit of %d bytes"
                             % (GIB, MAX_BODY))
            # what follows is dropped and the connection closed
            try:
                sock.sendall(b"x" * 65536)
            except OSError:
                pass
            self.assertEqual(read_all(sock), b"")
            # nobody's body: 401 before it, whatever its size
            sock = self.connect(tls)
            sock.sendall(request_head("POST", "/2/instances", [
                ("Content-Type", "application/json"),
                ("Content-Length", str(GIB))]))
            status, err = parse(read_all(sock))
            self.assertEqual(status, 401)
            self.assertEqual(err["message"], "Unauthorized")

    def test_a_crowd_from_one_address_leaves_room_for_others(self):
        (hog, other) = random_ips(2)
        held = [self.connect(source=hog) for _ in range(CLIENT_CAP)]
        # one more from the same address: closed without a word
        extra = self.connect(source=hog)
        self.assertEqual(read_all(extra), b"")
        # another client is served meanwhile
        sock = self.connect(source=other)
        sock.sendall(request_head("GET", "/version", []))
        status, version = parse(read_all(sock))
        self.assertEqual((status, version), (200, 2))
        # the crowd's connections were never cut
        for sock in held:
            sock.setblocking(False)
            self.assertRaises(BlockingIOError, sock.recv, 1)

    def test_slow_head_gets_408(self):
        sock = self.connect(tls=True)
        sock.sendall(b"GET /version HTTP/1.1\r\n")
        # a header line a second: more than the deadline allows in all
        sock.settimeout(20)
        answer = b""
        for i in range(HEAD_TIMEOUT * 5):
            try:
                sock.sendall(b"X-Slow-%d: a\r\n" % i)
            except OSError:
                break
            time.sleep(1)
            sock.setblocking(False)
            try:
                answer = sock.recv(65536)
            except (BlockingIOError, ssl.SSLWantReadError):
                pass
            sock.settimeout(20)
            if answer:
                break
        status, err = parse(answer)
        self.assertEqual(status, 408)
        self.assertEqual(err["explain"], "The request head did not arrive"
                         " within %d seconds" % HEAD_TIMEOUT)

    def test_long_request_line_and_headers(self):
        sock = self.connect()
        sock.sendall(b"GET /2/instances?x=" + b"a" * 100000)
        status, err = parse(read_all(sock))
        self.assertEqual(status, 414)
        sock = self.connect()
        sock.sendall(request_head("GET", "/version", [
            ("X-H%d" % i, "v") for i in range(200)]))
        status, err = parse(read_all(sock))
        self.assertEqual(status, 431)
