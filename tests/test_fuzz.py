"""Generated hostile input against every RAPI resource, every luxi method,
the node daemon's procedures (from a caller with the cluster certificate)
and confd (see tests/fuzz.py for the inputs and how to repeat a run).

What each asserts: no internal error (no 500 from RAPI, no "Internal
error" from luxi, no traceback logged: trial fails a test that logs one),
a refused request submits no job, and the daemon still answers afterwards.
"""

import base64
import json
import os
import re
import shutil
import tempfile
from urllib.parse import quote

import treq
from hypothesis import strategies as st
from twisted.internet import defer, endpoints, protocol, reactor, task
from twisted.trial import unittest
from twisted.web.server import Site

from ganeti import luxi
from ganeti.confd import guards, server, wire
from ganeti.confd import snapshot as snapshot_mod
from ganeti.rapi import app as rapi_app
from ganeti.rapi import auth
from ganeti.rapi import resources
from ganeti.rapi.master import LuxiPool

from tests import fuzz
from tests.inprocess import start_master
from tests.test_confd import _Config
from tests.test_confd_fixtures import KEY, T0, build_cluster, reply_of, request
from tests.test_crypto import cluster_cert, listen_noded, rpc_client

WRITER = b"Basic " + base64.b64encode(b"fuzz:fuzzpass")
#: statuses that are honest answers, not internal errors: 501 for an
#: operation this master does not implement, 502 when the node daemons an
#: answer needs cannot be reached (as Ganeti's; the master under test has
#: no node daemons), 503 when the queue refuses jobs (full, drained, over
#: a budget)
NOT_AN_ERROR = (501, 502, 503)


def _fill(path, value):
    return path.replace("{%s}" % value[0], quote(value[1], safe=""))


def rapi_cases(count):
    """(method, path, query args, body bytes or None, authenticated)."""
    def build(res, method, values, job_id, query, body, raw, authed):
        path = res.path
        for key in re.findall(r"\{(\w+)\}", path):
            # a real job id would make ``/wait`` wait its whole time
            value = job_id if key == "job_id" else values.pop()
            path = _fill(path, (key, value))
        data = raw if raw is not None else (
            None if body is None else fuzz.encode(body))
        return method, path, query, data, authed
    job_ids = st.sampled_from(["99999999", "-1", "abc", "1e3", "0x10",
                               "../1", ""])
    case = st.sampled_from(resources.RESOURCES).flatmap(
        lambda res: st.builds(
            build, st.just(res),
            st.sampled_from(sorted(res.methods) + ["PATCH"]),
            st.lists(fuzz.names, min_size=3, max_size=3),
            job_ids,
            st.dictionaries(
                st.sampled_from(["bulk", "dry-run", "fields", "reason",
                                 "force", "static", "tag", "names",
                                 "iallocator", "nodes", "remote_node",
                                 "mode", "ignore_size"]),
                fuzz.names, max_size=3),
            st.one_of(st.none(), fuzz.bodies),
            st.one_of(st.none(), st.none(), fuzz.raw_bodies),
            st.booleans()))
    return fuzz.draw(case, count)


class RapiFuzzTests(unittest.TestCase):
    """A RAPI daemon's application over HTTP on loopback, with a real
    master daemon (in this process) behind it."""

    timeout = 600

    @defer.inlineCallbacks
    def setUp(self):
        self.master, self.client = yield start_master(self, "fzr-")
        users = os.path.join(tempfile.mkdtemp(prefix="fzr-users-"), "users")
        self.addCleanup(shutil.rmtree, os.path.dirname(users), True)
        with open(users, "w") as f:
            f.write("fuzz fuzzpass write\n")
        pool = LuxiPool(reactor, self.master.config.paths.master_socket,
                        size=4)
        self.addCleanup(pool.close)
        app = rapi_app.RapiApp(pool, auth.UsersFile(users), reactor,
                               long_poll=pool)
        site = Site(app.resource())
        site.displayTracebacks = False
        port = reactor.listenTCP(0, site, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.base = "http://127.0.0.1:%d" % port.getHost().port

    def job_ids(self):
        return set(self.master.queue._ids)

    @defer.inlineCallbacks
    def request(self, method, path, query, data, authed):
        headers = {b"Content-Type": [b"application/json"]}
        if authed:
            headers[b"Authorization"] = [WRITER]
        response = yield treq.request(
            method, self.base + path, params=query, data=data,
            headers=headers, persistent=False, allow_redirects=False)
        text = yield response.content()
        return response.code, text

    @defer.inlineCallbacks
    def test_every_resource_survives_hostile_requests(self):
        cases = rapi_cases(fuzz.CASES * 2)
        statuses = {}
        for case in cases:
            before = self.job_ids()
            code, text = yield self.request(*case)
            statuses[code] = statuses.get(code, 0) + 1
            what = "seed %d: %s %s %r -> %d %r" % (
                fuzz.SEED, case[0], case[1], (case[2], (case[3] or b"")[:200]),
                code, text[:300])
            self.assertTrue(code < 500 or code in NOT_AN_ERROR, what)
            if code >= 500:
                self.assertIn(b"message", text, what)
            if 400 <= code < 500:
                self.assertEqual(self.job_ids(), before,
                                 "a refused request made a job; " + what)
        # still answering, reads and writes
        code, text = yield self.request("GET", "/2/info", {}, None, False)
        self.assertEqual(code, 200, text)
        code, text = yield self.request("PUT", "/2/tags",
                                        {"tag": "fuzz-survived"}, None, True)
        self.assertEqual(code, 200, (statuses, text))


class _RawLuxi(protocol.Protocol):
    """Sends bytes as they are; collects answers up to the terminator."""

    def __init__(self):
        self.buf = b""
        self.waiting = []
        self.closed = defer.Deferred()

    def dataReceived(self, data):
        self.buf += data
        while luxi.EOM in self.buf and self.waiting:
            answer, self.buf = self.buf.split(luxi.EOM, 1)
            self.waiting.pop(0).callback(answer)

    def connectionLost(self, reason):
        for d in self.waiting:
            d.callback(None)
        self.waiting = []
        self.closed.callback(None)

    def ask(self, raw):
        d = defer.Deferred()
        self.waiting.append(d)
        self.transport.write(raw + luxi.EOM)
        return d


def luxi_cases(count):
    """Raw luxi requests: every method with generated arguments, and
    requests no client library would make."""
    method_names = sorted(luxi.METHODS) + ["NoSuchMethod", ""]

    def request(method, args, version):
        message = {"method": method, "args": args}
        if version is not None:
            message["version"] = version
        return fuzz.encode(message)
    framed = st.builds(
        request, st.sampled_from(method_names),
        st.one_of(st.lists(fuzz.json_values, max_size=5), fuzz.json_values),
        st.one_of(st.none(), st.integers(), fuzz.names))
    raw = st.one_of(fuzz.raw_bodies.filter(lambda b: luxi.EOM not in b),
                    st.builds(fuzz.encode, fuzz.json_values))
    return fuzz.draw(st.one_of(framed, framed, framed, raw), count, salt=1)


def _is_stream_greeting(raw, decoded):
    """Whether ``decoded`` accepted the WatchEvents request ``raw``."""
    try:
        method = json.loads(raw.rstrip(luxi.EOM)).get("method")
    except (ValueError, AttributeError):
        return False
    return method == luxi.REQ_WATCH_EVENTS and decoded.get("success")


class LuxiFuzzTests(unittest.TestCase):
    """The master daemon's socket (a real master in this process)."""

    timeout = 600

    @defer.inlineCallbacks
    def setUp(self):
        self.master, self.client = yield start_master(self, "fzl-")
        self.path = self.master.config.paths.master_socket

    @defer.inlineCallbacks
    def connect(self):
        endpoint = endpoints.UNIXClientEndpoint(reactor, self.path)
        proto = yield endpoints.connectProtocol(endpoint, _RawLuxi())
        self.addCleanup(lambda: proto.transport.loseConnection() or
                        proto.closed)
        return proto

    @defer.inlineCallbacks
    def test_every_method_survives_hostile_requests(self):
        proto = yield self.connect()
        for raw in luxi_cases(fuzz.CASES * 2):
            if not proto.transport.connected:
                proto = yield self.connect()
            before = set(self.master.queue._ids)
            answer = yield proto.ask(raw)
            what = "seed %d: %r -> %r" % (fuzz.SEED, raw[:300],
                                          (answer or b"")[:300])
            if answer is None:
                continue        # refused and closed (a garbled frame)
            self.assertNotIn(b"Internal error", answer, what)
            decoded = json.loads(answer)
            if not decoded.get("success"):
                self.assertEqual(set(self.master.queue._ids), before,
                                 "a refused request made a job; " + what)
            elif _is_stream_greeting(raw, decoded):
                # a WatchEvents that was accepted: the connection now
                # carries only the event stream, it answers no request
                yield proto.transport.loseConnection() or proto.closed
                proto = yield self.connect()
        # still answering
        values = yield self.client.query_config_values(["cluster_name"])
        self.assertEqual(values, ["cluster.example.com"])


#: procedures left out: they act on the host's devices by name (LVM,
#: DRBD) or end the node's membership, whatever the arguments' checks
NODED_EXCLUDED = {"node_leave", "storage_modify", "storage_execute",
                  "drbd_attach_net", "drbd_disconnect_net",
                  "drbd_wait_sync", "blockdev_replace_children"}


class NodedFuzzTests(unittest.TestCase):
    """A node daemon (in this process, on loopback) called by a peer with
    the cluster certificate."""

    timeout = 600

    def setUp(self):
        self.root = os.path.abspath(self.mktemp())
        os_dir = os.path.join(self.root, "os")
        os.makedirs(os_dir)
        self.cert = cluster_cert(os.path.join(self.root, "certs"))
        self.port, self.procs = listen_noded(
            self, self.cert, root=self.root, os_search_path=[os_dir])
        self.client = rpc_client(self, self.cert, self.port)

    @defer.inlineCallbacks
    def test_every_procedure_survives_hostile_arguments(self):
        names = [n for n in self.procs.names() if n not in NODED_EXCLUDED]
        cases = fuzz.draw(st.tuples(
            st.sampled_from(names + ["no_such_procedure"]),
            # the client sends a list; its items are the hostile part
            st.lists(fuzz.json_values, max_size=6)), fuzz.CASES * 2, salt=2)
        for name, args in cases:
            result = yield self.client.call("node1", name, args)
            what = "seed %d: %s %r -> %r" % (fuzz.SEED, name, args,
                                             result.fail_msg)
            self.assertNotIn("unexpected error", result.fail_msg or "", what)
        result = yield self.client.call("node1", "version", [])
        self.assertTrue(result.success, result.fail_msg)


class ConfdFuzzTests(unittest.TestCase):
    """confd's processor given datagrams: garbage, forged signatures and
    well-signed requests with hostile queries."""

    def setUp(self):
        cluster = build_cluster(self.mktemp())
        snap = snapshot_mod.ConfigSnapshot(cluster.store)
        self.clock = task.Clock()
        self.clock.advance(T0)
        self.processor = server.ConfdProcessor(
            KEY, _Config(snap), self.clock,
            rate_limiter=guards.RateLimiter(self.clock, rate=0))

    def test_datagrams_never_break_the_processor(self):
        # signed with the cluster's key: the hostile part is the query
        signed = st.builds(
            lambda req_type, query, rsalt: request(
                KEY, req_type, query, rsalt=rsalt),
            st.one_of(st.integers(min_value=-5, max_value=40), fuzz.names),
            fuzz.json_values, st.one_of(st.none(), fuzz.names))
        # forged: a known envelope with a wrong key or mangled bytes
        forged = st.builds(
            lambda req_type, key: request(key, req_type),
            st.integers(min_value=0, max_value=20), st.binary(max_size=32))
        cases = fuzz.draw(st.one_of(
            st.binary(max_size=512), st.sampled_from(fuzz.RAW_BODIES[:12]),
            st.builds(fuzz.encode, fuzz.json_values), forged,
            signed, signed), fuzz.CASES * 5, salt=3)
        for data in cases:
            if isinstance(data, str):
                data = data.encode("utf-8")
            self.processor.handle(data, ("127.0.0.9", 1814))
            self.assertEqual(
                self.processor.counters["dropped_internal_error"], 0,
                "seed %d: %r" % (fuzz.SEED, data[:300]))
        # nothing forged was answered, and a ping still is
        answer = self.processor.handle(request(KEY, wire.REQ_PING),
                                       ("127.0.0.9", 1814))
        self.assertEqual(reply_of(KEY, answer)[1].status, 0)
