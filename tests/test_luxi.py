"""Tests for ganeti.luxi: framing, server, both clients, Ganeti's clients."""

import json
import os
import shutil
import socket
import tempfile
import threading

from twisted.internet import defer, endpoints, protocol, reactor, threads
from twisted.internet import error, task, utils
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.trial import unittest

from ganeti import constants
from ganeti import errors
from ganeti import luxi
from ganeti import opcodes

from tests import ganeti_peer


def _async_test(fn):
    """Let a test be an ``async def``."""
    def wrapper(self, *args, **kwargs):
        return defer.Deferred.fromCoroutine(fn(self, *args, **kwargs))
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


class FramingTests(unittest.TestCase):

    def test_split_and_join(self):
        buf = luxi.MessageBuffer(100)
        self.assertEqual(buf.feed(b'{"a": 1}\x03{"b"'), [b'{"a": 1}'])
        self.assertEqual(buf.feed(b': 2}'), [])
        self.assertEqual(buf.feed(b'\x03\x03x\x03'), [b'{"b": 2}', b"", b"x"])

    def test_trailing_newline_tolerated(self):
        self.assertEqual(luxi.decode_message(b'{"a": 1}\n'), {"a": 1})
        self.assertEqual(luxi.decode_message(b'{"a": 1}'), {"a": 1})
        self.assertRaises(luxi.ProtocolError, luxi.decode_message, b"{nope")
        self.assertRaises(luxi.ProtocolError, luxi.decode_message, b"\xff")

    def test_encode_never_contains_eom(self):
        raw = luxi.encode_message({"text": "a\x03b", "n": "\u00e9"})
        self.assertTrue(raw.endswith(b"\x03"))
        self.assertNotIn(b"\x03", raw[:-1])
        self.assertEqual(luxi.decode_message(raw[:-1]),
                         {"text": "a\x03b", "n": "\u00e9"})

    def test_too_large(self):
        buf = luxi.MessageBuffer(10)
        self.assertEqual(buf.feed(b"0123456789\x03"), [b"0123456789"])
        self.assertRaises(luxi.MessageTooLarge, buf.feed, b"01234567890\x03")
        buf = luxi.MessageBuffer(10)
        buf.feed(b"012345")
        err = self.assertRaises(luxi.MessageTooLarge, buf.feed, b"67890")
        self.assertIn("limit of 10 bytes", str(err))
        self.assertIsInstance(err, errors.LuxiError)

    def test_many_small_chunks(self):
        buf = luxi.MessageBuffer(10 ** 6)
        for _ in range(1000):
            self.assertEqual(buf.feed(b"x" * 100), [])
        self.assertEqual(buf.feed(b"\x03"), [b"x" * 100000])


class StubHandler(object):
    """Records calls; answers like a small master would."""

    def __init__(self):
        self.calls = []
        self.waits = []       # Deferreds of pending WaitForJobChange
        self.cancelled = []

    def submit_job(self, ops):
        self.calls.append(("submit_job", ops))
        return 17

    def submit_many_jobs(self, jobs):
        self.calls.append(("submit_many_jobs", jobs))
        return [[True, 20 + i] for i in range(len(jobs))]

    def wait_for_job_change(self, job_id, fields, prev_job_info,
                            prev_log_serial, timeout):
        self.calls.append(("wait_for_job_change", job_id, fields,
                           prev_job_info, prev_log_serial, timeout))
        d = defer.Deferred(lambda d: self.cancelled.append(job_id))
        self.waits.append(d)
        if timeout <= 1:
            # short polls (Ganeti's client test) see a change at once
            d.callback([["running"], [[1, [1700000000, 5], "message",
                                       "Starting"]]])
        return d

    def query_jobs(self, job_ids, fields):
        self.calls.append(("query_jobs", job_ids, fields))
        return [["success", ["success"], [None]] if i == 17 else None
                for i in job_ids]

    def cancel_job(self, job_id, kill):
        self.calls.append(("cancel_job", job_id, kill))
        return [True, "Job %d will be canceled" % job_id]

    def query_cluster_info(self):
        return {"name": "cluster.example.com", "protocol_version":
                constants.PROTOCOL_VERSION}

    async def query_tags(self, kind, name):
        # a coroutine handler
        await defer.succeed(None)
        if name == "missing":
            raise errors.OpPrereqError("Instance 'missing' not known",
                                       errors.ECODE_NOENT)
        return ["tag1", "tag2"]

    def query_config_values(self, fields):
        raise ValueError("boom")

    def query(self, what, fields, qfilter):
        self.calls.append(("query", what, fields, qfilter))
        return {"fields": [{"name": f, "title": f.title(), "kind": "text",
                            "doc": f} for f in fields],
                "data": [[[0, "node1"]], [[0, "node2"]]]}

    def query_instances(self, names, fields, use_locking):
        self.calls.append(("query_instances", names, fields, use_locking))
        return [[n] for n in names]

    def set_drain_flag(self, flag):
        self.calls.append(("set_drain_flag", flag))
        return True

    def archive_job(self, job_id):
        return set([1, 2])    # not JSON, but made so

    def change_job_priority(self, job_id, priority):
        return object()       # not JSON at all


class RawClient(protocol.Protocol):
    """Sends bytes, collects framed answers."""

    def __init__(self):
        self.buffer = luxi.MessageBuffer(10 ** 7)
        self.answers = []
        self.waiting = []
        self.lost = defer.Deferred()

    def dataReceived(self, data):
        for raw in self.buffer.feed(data):
            self.answers.append(json.loads(raw))
        while self.waiting and len(self.answers) >= self.waiting[0][0]:
            self.waiting.pop(0)[1].callback(self.answers)

    def wait_for(self, count):
        if len(self.answers) >= count:
            return defer.succeed(self.answers)
        d = defer.Deferred()
        self.waiting.append((count, d))
        return d

    def connectionLost(self, reason):
        self.lost.callback(None)


class ServerTestCase(unittest.TestCase):

    def setUp(self):
        self.handler = StubHandler()
        # Laid out as Ganeti's virtual cluster mode wants: <dir>/<host>/...
        # Short, because a UNIX socket path has at most 107 bytes.
        top = tempfile.mkdtemp(prefix="luxi")
        self.addCleanup(shutil.rmtree, top, True)
        self.root = os.path.join(top, "node1")
        self.path = os.path.join(self.root, "var", "run", "ganeti", "socket",
                                 "ganeti-query")

        def listening(port):
            self.port = port
            self.addCleanup(port.stopListening)
        return luxi.listen(reactor, self.path, self.handler,
                           max_request_size=4096).addCallback(listening)

    def tearDown(self):
        self.port.factory.disconnect_all()

    async def raw_connect(self):
        client = RawClient()
        await endpoints.connectProtocol(
            endpoints.UNIXClientEndpoint(reactor, self.path), client)
        self.addCleanup(lambda: (client.transport.loseConnection(),
                                 client.lost)[1])
        return client

    async def raw_call(self, request):
        client = await self.raw_connect()
        client.transport.write(json.dumps(request).encode() + b"\x03")
        (answer,) = await client.wait_for(1)
        return answer


class ServerTests(ServerTestCase):

    def test_socket_mode(self):
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o660)

    @_async_test
    async def test_stale_socket_replaced_live_one_kept(self):
        path = os.path.join(self.root, "other-socket")
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(path)       # left behind, as by a crashed master
        stale.close()
        port = await luxi.listen(reactor, path, self.handler)
        self.addCleanup(port.stopListening)
        self.addCleanup(port.factory.disconnect_all)
        client = luxi.LuxiClient(reactor, path)
        answer = await client.query_cluster_info()
        self.assertEqual(answer["name"], "cluster.example.com")
        await client.close()
        # a second master on the same socket is refused
        await self.assertFailure(
            luxi.listen(reactor, self.path, StubHandler()),
            error.CannotListenError)

    def test_errors_sent_as_known_classes(self):
        self.assertEqual(luxi._failure(luxi.NoMasterError("x")),
                         {"success": False, "result": ["LuxiError", ["x"]]})
        self.assertEqual(
            luxi._failure(errors.OpPrereqError("y", errors.ECODE_STATE)),
            {"success": False, "result": ["OpPrereqError",
                                          ["y", errors.ECODE_STATE]]})

    @_async_test
    async def test_submit_job_gets_opcodes(self):
        answer = await self.raw_call({
            "method": "SubmitJob", "version": 3000000,
            "args": [[{"OP_ID": "OP_INSTANCE_STARTUP",
                       "instance_name": "inst1"}]]})
        self.assertEqual(answer, {"success": True, "result": 17})
        (name, ops) = self.handler.calls[0]
        self.assertEqual(name, "submit_job")
        self.assertEqual(ops, [opcodes.OpInstanceStartup(
            instance_name="inst1")])

    @_async_test
    async def test_both_framings_and_several_requests(self):
        client = await self.raw_connect()
        # Python client style (newline before 0x03), then Haskell style
        client.transport.write(
            b'{"method": "QueryClusterInfo", "args": [], '
            b'"version": 3000000}\n\x03'
            b'{"method":"QueryClusterInfo","args":[]}\x03')
        answers = await client.wait_for(2)
        self.assertEqual([a["result"]["name"] for a in answers],
                         ["cluster.example.com"] * 2)

    @_async_test
    async def test_answers_stay_in_order_behind_a_long_poll(self):
        client = await self.raw_connect()
        client.transport.write(
            luxi.format_request("WaitForJobChange",
                                [17, ["status"], None, None, 89]) +
            luxi.format_request("QueryClusterInfo", []))
        await task.deferLater(reactor, 0.05, lambda: None)
        self.assertEqual(client.answers, [])
        self.handler.waits[0].callback([["running"], []])
        answers = await client.wait_for(2)
        self.assertEqual(answers[0], {"success": True,
                                      "result": [["running"], []]})
        self.assertEqual(answers[1]["result"]["name"], "cluster.example.com")

    @_async_test
    async def test_disconnect_cancels_long_poll(self):
        client = await self.raw_connect()
        client.transport.write(luxi.format_request(
            "WaitForJobChange", [17, ["status"], None, None, 30]) +
            luxi.format_request("QueryClusterInfo", []))
        while not self.handler.waits:
            await task.deferLater(reactor, 0.01, lambda: None)
        client.transport.loseConnection()
        await client.lost
        while self.port.factory.connections:
            await task.deferLater(reactor, 0.01, lambda: None)
        self.assertEqual(self.handler.cancelled, [17])
        # the queued request behind it was dropped, not run
        self.assertEqual([c[0] for c in self.handler.calls],
                         ["wait_for_job_change"])

    @_async_test
    async def test_wait_timeout_is_capped(self):
        client = await self.raw_connect()
        client.transport.write(luxi.format_request(
            "WaitForJobChange", ["17", ["status"], [["queued"]], 3, 600]))
        while not self.handler.waits:
            await task.deferLater(reactor, 0.01, lambda: None)
        self.assertEqual(self.handler.calls[0],
                         ("wait_for_job_change", 17, ["status"], [["queued"]],
                          3, luxi.WFJC_TIMEOUT))
        self.handler.waits[0].callback(luxi.JOB_NOTCHANGED)
        (answer,) = await client.wait_for(1)
        self.assertEqual(answer["result"], "nochange")

    def assertFailure_(self, answer, cls_name, *fragments):
        self.assertFalse(answer["success"])
        (name, args) = answer["result"]
        self.assertEqual(name, cls_name)
        for fragment in fragments:
            self.assertIn(fragment, args[0])
        return args

    @_async_test
    async def test_version_mismatch(self):
        answer = await self.raw_call({"method": "QueryClusterInfo",
                                      "args": [], "version": 2160000})
        self.assertFailure_(answer, "LuxiError", "version mismatch",
                            "2160000")

    @_async_test
    async def test_unknown_and_internal_methods(self):
        answer = await self.raw_call({"method": "MakeCoffee", "args": []})
        self.assertFailure_(answer, "LuxiError", "Unknown", "MakeCoffee")
        answer = await self.raw_call({"method": "PickupJob", "args": [1]})
        self.assertFailure_(answer, "LuxiError", "PickupJob", "internal")
        answer = await self.raw_call({"method": "DeleteFilter",
                                      "args": ["u"]})
        self.assertFailure_(answer, "LuxiError", "DeleteFilter",
                            "not supported")

    @_async_test
    async def test_malformed_requests(self):
        client = await self.raw_connect()
        client.transport.write(b"{not json\x03[1, 2]\x03"
                               b'{"method": "Query"}\x03'
                               b'{"method": "QueryClusterInfo", "args": []}'
                               b'\x03')
        answers = await client.wait_for(4)
        self.assertFailure_(answers[0], "LuxiError", "not valid UTF-8 JSON")
        self.assertFailure_(answers[1], "LuxiError", "expected an object")
        self.assertFailure_(answers[2], "LuxiError", "'args'")
        # the connection survived all that
        self.assertTrue(answers[3]["success"])

    @_async_test
    async def test_arity_and_argument_types(self):
        answer = await self.raw_call({"method": "CancelJob", "args": []})
        self.assertFailure_(answer, "LuxiError", "CancelJob",
                            "expected 1 to 2 arguments", "job_id, kill",
                            "got 0")
        answer = await self.raw_call({"method": "QueryJobs",
                                      "args": [[1], ["id"], 3]})
        self.assertFailure_(answer, "LuxiError", "QueryJobs",
                            "expected 2 arguments")
        answer = await self.raw_call({"method": "CancelJob",
                                      "args": ["x1", False]})
        self.assertFailure_(answer, "LuxiError", "CancelJob",
                            "argument 0 (job_id)", "'x1'")
        answer = await self.raw_call({"method": "Query",
                                      "args": ["node", ["name", 3], None]})
        self.assertFailure_(answer, "LuxiError", "argument 1 (fields)",
                            "item 1")
        answer = await self.raw_call({"method": "SetDrainFlag",
                                      "args": ["yes"]})
        self.assertFailure_(answer, "LuxiError", "argument 0 (flag)")
        answer = await self.raw_call({"method": "QueryTags",
                                      "args": ["planet", "earth"]})
        args = self.assertFailure_(answer, "OpPrereqError", "QueryTags",
                                   "kind", "planet")
        self.assertEqual(args[1], errors.ECODE_INVAL)
        answer = await self.raw_call({"method": "ChangeJobPriority",
                                      "args": [1, 7]})
        self.assertFailure_(answer, "OpPrereqError", "priority", "7")
        answer = await self.raw_call({"method": "QueryInstances",
                                      "args": [[], ["name"], True]})
        self.assertFailure_(answer, "OpPrereqError", "use_locking")

    @_async_test
    async def test_optional_argument(self):
        answer = await self.raw_call({"method": "CancelJob", "args": [5]})
        self.assertTrue(answer["success"])
        self.assertEqual(self.handler.calls[-1], ("cancel_job", 5, False))

    @_async_test
    async def test_invalid_opcode(self):
        answer = await self.raw_call({
            "method": "SubmitJob",
            "args": [[{"OP_ID": "OP_CLUSTER_QUERY"},
                      {"OP_ID": "OP_INSTANCE_REBOOT",
                       "instance_name": "i", "reboot_type": "warm"}]]})
        args = self.assertFailure_(answer, "OpPrereqError", "SubmitJob",
                                   "opcode 1 (OP_INSTANCE_REBOOT)",
                                   "reboot_type", "warm")
        self.assertEqual(args[1], errors.ECODE_INVAL)
        answer = await self.raw_call({
            "method": "SubmitManyJobs",
            "args": [[[{"OP_ID": "OP_CLUSTER_QUERY"}], [{"OP_ID": "OP_X"}]]]})
        self.assertFailure_(answer, "OpCodeUnknown", "job 1, opcode 0",
                            "OP_X")
        answer = await self.raw_call({"method": "SubmitJob", "args": [[]]})
        self.assertFailure_(answer, "LuxiError", "non-empty list")
        self.assertEqual(self.handler.calls, [])

    @_async_test
    async def test_ganeti_error_from_handler(self):
        answer = await self.raw_call({"method": "QueryTags",
                                      "args": ["instance", "missing"]})
        self.assertEqual(answer, {"success": False, "result": [
            "OpPrereqError", ["Instance 'missing' not known",
                              errors.ECODE_NOENT]]})

    @_async_test
    async def test_unexpected_exception_is_contained(self):
        answer = await self.raw_call({"method": "QueryConfigValues",
                                      "args": [["cluster_name"]]})
        self.assertFailure_(answer, "GenericError", "QueryConfigValues",
                            "ValueError", "boom")
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 1)
        answer = await self.raw_call({"method": "ChangeJobPriority",
                                      "args": [1, 10]})
        self.assertFailure_(answer, "GenericError", "not serialisable")
        answer = await self.raw_call({"method": "ArchiveJob", "args": [1]})
        self.assertEqual(answer["result"], [1, 2])

    @_async_test
    async def test_oversized_request_closes_connection(self):
        client = await self.raw_connect()
        client.transport.write(luxi.format_request("QueryClusterInfo", []) +
                               b"[" + b" " * 5000)
        await client.lost
        self.assertTrue(client.answers[0]["success"])
        self.assertFailure_(client.answers[1], "LuxiError", "limit of 4096")
        # the server is fine
        answer = await self.raw_call({"method": "QueryClusterInfo",
                                      "args": []})
        self.assertTrue(answer["success"])

    @_async_test
    async def test_deep_requests_get_a_clear_error(self):
        from twisted.logger import LogLevel, globalLogPublisher
        logged = []

        def observer(event):
            if event.get("log_level") in (LogLevel.error,
                                          LogLevel.critical):
                logged.append(event)
        globalLogPublisher.addObserver(observer)
        self.addCleanup(globalLogPublisher.removeObserver, observer)
        self.port.factory.max_request_size = 10 ** 6
        client = await self.raw_connect()
        client.transport.write(b"[" * 100000 + b"\x03")
        # a query filter 5000 levels deep
        qfilter = b'["!", ' * 5000 + b'["=", "name", "x"]' + b"]" * 5000
        client.transport.write(b'{"method": "Query", "args": ["node",'
                               b' ["name"], %s]}\x03' % qfilter)
        (deep, deep_filter) = await client.wait_for(2)
        for answer in (deep, deep_filter):
            self.assertFailure_(answer, "LuxiError",
                                "Invalid LUXI request: the JSON text nests"
                                " lists and objects deeper than the limit"
                                " of 72 levels")
        # the connection still serves
        answer = await self.raw_call({"method": "QueryClusterInfo",
                                      "args": []})
        self.assertTrue(answer["success"])
        self.assertEqual(logged, [])
        self.assertEqual([c for c in self.handler.calls
                          if c[0] == "query"], [])

    @_async_test
    async def test_numbers_no_parameter_can_hold(self):
        client = await self.raw_connect()
        op = (b'{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "i1",'
              b' "beparams": {"memory": %s}}')
        cases = [(b"1e400", "1e400 is not a finite number"),
                 (b"NaN", "NaN is not a finite number"),
                 (b"-Infinity", "-Infinity is not a finite number"),
                 (b"18446744073709551616",
                  "18446744073709551616 is out of range")]
        for (number, _) in cases:
            client.transport.write(b'{"method": "SubmitJob", "args": [[%s]]}'
                                   b'\x03' % (op % number))
        answers = await client.wait_for(len(cases))
        for (answer, (_, text)) in zip(answers, cases):
            self.assertFailure_(answer, "LuxiError",
                                "Invalid LUXI request:"
                                " args/0/0/beparams/memory: " + text)
        self.assertEqual(self.handler.calls, [])
        # checked again where opcodes are loaded (jobs from elsewhere)
        err = self.assertRaises(
            errors.OpPrereqError, opcodes.OpCode.from_dict,
            {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "i1",
             "beparams": {"memory": float("inf")}})
        self.assertIn("beparams: 'memory'", err.args[0])
        self.assertIn("not a finite number", err.args[0])

    @_async_test
    async def test_read_ahead_is_bounded(self):
        self.port.factory.max_queued_requests = 2
        client = await self.raw_connect()
        client.transport.write(
            luxi.format_request("WaitForJobChange",
                                [17, ["status"], None, None, 10]) +
            luxi.format_request("QueryClusterInfo", []) * 5)
        while not self.handler.waits:
            await task.deferLater(reactor, 0.01, lambda: None)
        self.handler.waits[0].callback(luxi.JOB_NOTCHANGED)
        answers = await client.wait_for(6)
        self.assertTrue(all(a["success"] for a in answers))


class TwistedClientTests(ServerTestCase):

    def client(self, **kwargs):
        client = luxi.LuxiClient(reactor, self.path, **kwargs)
        self.addCleanup(client.close)
        return client

    @_async_test
    async def test_calls_and_convenience_methods(self):
        client = self.client()
        job_id = await client.submit_job(
            [opcodes.OpInstanceStartup(instance_name="inst1"),
             {"OP_ID": "OP_CLUSTER_QUERY"}])
        self.assertEqual(job_id, 17)
        self.assertEqual(self.handler.calls[-1][1][1],
                         opcodes.OpClusterQuery())
        self.assertEqual(await client.submit_many_jobs(
            [[opcodes.OpClusterQuery()], [opcodes.OpClusterVerify()]]),
            [[True, 20], [True, 21]])
        self.assertEqual(await client.query_jobs([17, 18], ["status"]),
                         [["success", ["success"], [None]], None])
        self.assertEqual(await client.query_tags("instance", "i1"),
                         ["tag1", "tag2"])
        self.assertEqual(await client.call("SetDrainFlag", True), True)
        result = await client.query("node", ["name"])
        self.assertEqual(result["data"], [[[0, "node1"]], [[0, "node2"]]])

    @_async_test
    async def test_concurrent_calls_share_one_connection(self):
        client = self.client()
        results = await defer.gatherResults(
            [client.query_cluster_info() for _ in range(5)])
        self.assertEqual(len(results), 5)
        self.assertEqual(len(self.port.factory.connections), 1)

    @_async_test
    async def test_errors_are_raised_as_ganeti_errors(self):
        client = self.client()
        try:
            await client.query_tags("instance", "missing")
        except errors.OpPrereqError as err:
            self.assertEqual(err.args, ("Instance 'missing' not known",
                                        errors.ECODE_NOENT))
        else:
            self.fail("no error")
        try:
            await client.call("Bogus")
        except errors.LuxiError as err:
            self.assertIn("Bogus", str(err))
        else:
            self.fail("no error")

    @_async_test
    async def test_reconnects_on_demand(self):
        client = self.client()
        await client.query_cluster_info()
        self.port.factory.disconnect_all()
        while self.port.factory.connections:
            await task.deferLater(reactor, 0.01, lambda: None)
        info = await client.query_cluster_info()
        self.assertEqual(info["name"], "cluster.example.com")

    @_async_test
    async def test_no_master(self):
        client = luxi.LuxiClient(reactor, self.path + ".missing")
        try:
            await client.query_cluster_info()
        except luxi.NoMasterError as err:
            self.assertIn(self.path + ".missing", str(err))
            self.assertIn("does not exist", str(err))
        else:
            self.fail("no error")

    @_async_test
    async def test_timeout_drops_connection(self):
        client = self.client(timeout=0.2)
        try:
            await client.wait_for_job_change(17, ["status"], None, None, 10)
        except luxi.LuxiTimeoutError as err:
            self.assertIn("WaitForJobChange", str(err))
        else:
            self.fail("no timeout")
        while self.port.factory.connections:
            await task.deferLater(reactor, 0.01, lambda: None)
        self.assertEqual(self.handler.cancelled, [17])
        # and the next call works on a fresh connection
        self.assertEqual((await client.query_cluster_info())["name"],
                         "cluster.example.com")


class BlockingClientTests(ServerTestCase):
    """The blocking client runs in a thread; the server in the reactor."""

    def in_thread(self, fn, *args):
        return threads.deferToThread(fn, *args)

    @_async_test
    async def test_call_and_errors(self):
        client = luxi.BlockingClient(self.path)
        self.addCleanup(client.close)
        self.assertEqual(await self.in_thread(
            client.submit_job, [opcodes.OpClusterQuery()]), 17)
        self.assertEqual(await self.in_thread(
            client.query_instances, ["i1"], ["name"]), [["i1"]])
        err = await self.assertFailure(
            self.in_thread(client.query_tags, "instance", "missing"),
            errors.OpPrereqError)
        self.assertEqual(err.args[1], errors.ECODE_NOENT)
        err = await self.assertFailure(
            self.in_thread(client.call, "QueryJobs", "x"), errors.LuxiError)
        self.assertIn("QueryJobs", str(err))

    @_async_test
    async def test_resends_after_server_closed_idle_connection(self):
        client = luxi.BlockingClient(self.path)
        self.addCleanup(client.close)
        await self.in_thread(client.query_cluster_info)
        self.port.factory.disconnect_all()
        while self.port.factory.connections:
            await task.deferLater(reactor, 0.01, lambda: None)
        info = await self.in_thread(client.query_cluster_info)
        self.assertEqual(info["name"], "cluster.example.com")

    @_async_test
    async def test_timeout(self):
        client = luxi.BlockingClient(self.path, timeout=0.2)
        self.addCleanup(client.close)
        await self.assertFailure(self.in_thread(
            client.wait_for_job_change, 17, ["status"], None, None),
            luxi.LuxiTimeoutError)
        while self.port.factory.connections:
            await task.deferLater(reactor, 0.01, lambda: None)
        self.assertEqual(self.handler.cancelled, [17])

    def test_socket_missing(self):
        path = os.path.join(self.root, "no-such-socket")
        client = luxi.BlockingClient(path)
        err = self.assertRaises(luxi.NoMasterError,
                                client.query_cluster_info)
        self.assertIn(path, str(err))
        self.assertIn("does not exist", str(err))

    def test_nobody_listening(self):
        path = os.path.join(self.root, "not-listening")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)       # a socket file nobody listens on
        self.addCleanup(sock.close)
        err = self.assertRaises(luxi.NoMasterError,
                                luxi.BlockingClient(path).call,
                                "QueryClusterInfo")
        self.assertIn(path, str(err))


# --- A full queue of connections -------------------------------------------

def fill_queue(path):
    """Connect to the listening socket ``path`` until its queue of
    connections waiting to be accepted is full; the sockets that got in."""
    held = []
    for _ in range(16):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        if sock.connect_ex(path) != 0:
            sock.close()
            return held
        held.append(sock)
    raise AssertionError("the queue of %s never filled" % path)


class AdoptingReactor(MemoryReactorClock):
    """A memory reactor that, as a real one, connects an adopted socket's
    protocol at once, here to a string transport."""

    def adoptStreamConnection(self, fd, family, factory):
        MemoryReactorClock.adoptStreamConnection(self, fd, family, factory)
        proto = factory.buildProtocol(None)
        proto.makeConnection(StringTransport())
        self.connected = proto


class BusySocketTestCase(unittest.TestCase):
    """A listening socket whose queue of waiting connections is full
    (nobody accepts)."""

    def setUp(self):
        top = tempfile.mkdtemp(prefix="luxi")
        self.addCleanup(shutil.rmtree, top, True)
        self.path = os.path.join(top, "sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(self.server.close)
        self.server.bind(self.path)
        self.server.listen(0)
        self.held = fill_queue(self.path)
        self.addCleanup(lambda: [s.close() for s in self.held])

    def make_room(self):
        """The server accepts one waiting connection."""
        conn, _ = self.server.accept()
        self.addCleanup(conn.close)


class BusyMasterSocketKeptTests(BusySocketTestCase):

    def test_live_socket_with_a_full_queue_is_kept_at_once(self):
        # a second master's start looks at the socket without waiting
        d = threads.deferToThread(luxi.prepare_socket_path, self.path)
        d.addTimeout(10, reactor)
        return d.addCallback(lambda _: self.assertTrue(
            os.path.exists(self.path)))


class TwistedClientRetryTests(BusySocketTestCase):

    def test_retries_until_accepted(self):
        reactor = AdoptingReactor()
        client = luxi.LuxiClient(reactor, self.path)
        d = client.query_cluster_info()
        # refused at once (EAGAIN): a new attempt is planned, nothing fails
        self.assertNoResult(d)
        self.assertEqual(reactor.adoptedStreamConnections, [])
        reactor.advance(luxi.CONNECT_RETRY_MAX)
        self.assertNoResult(d)
        self.make_room()
        reactor.advance(luxi.CONNECT_RETRY_MAX)
        self.assertEqual(len(reactor.adoptedStreamConnections), 1)
        proto = reactor.connected
        self.assertEqual(json.loads(proto.transport.value()[:-1]),
                         {"method": "QueryClusterInfo", "args": [],
                          "version": constants.LUXI_VERSION})
        proto.dataReceived(b'{"success": true, "result": {"name": "c"}}'
                           b"\x03")
        self.assertEqual(self.successResultOf(d), {"name": "c"})

    def test_gives_up_after_the_connect_timeout(self):
        reactor = AdoptingReactor()
        client = luxi.LuxiClient(reactor, self.path, connect_timeout=5)
        d = client.query_cluster_info()
        attempts = 1
        while not d.called:
            reactor.advance(luxi.CONNECT_RETRY_MAX)
            attempts += 1
        err = self.failureResultOf(d, luxi.LuxiTimeoutError).value
        self.assertIn("accepted no connection for 5 seconds", str(err))
        self.assertIn(self.path, str(err))
        self.assertLessEqual(reactor.seconds(), 5)
        self.assertGreater(attempts, 5)
        self.assertEqual(reactor.getDelayedCalls(), [])

    def test_missing_or_dead_socket_is_no_master_at_once(self):
        reactor = AdoptingReactor()
        err = self.failureResultOf(luxi.LuxiClient(
            reactor, self.path + ".missing").query_cluster_info(),
            luxi.NoMasterError).value
        self.assertIn("does not exist", str(err))
        dead = self.path + ".dead"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(dead)
        sock.close()
        err = self.failureResultOf(luxi.LuxiClient(
            reactor, dead).query_cluster_info(), luxi.NoMasterError).value
        self.assertIn("Connection refused", str(err))
        self.assertEqual(reactor.getDelayedCalls(), [])


class BlockingClientRetryTests(BusySocketTestCase):

    def client(self, on_sleep, **kwargs):
        """A blocking client whose waits only advance a fake clock (and
        call ``on_sleep(delays so far)``)."""
        client = luxi.BlockingClient(self.path, **kwargs)
        self.addCleanup(client.close)
        clock = task.Clock()
        self.delays = []

        def sleep(delay):
            self.delays.append(delay)
            clock.advance(delay)
            on_sleep(self.delays)
        client._sleep = sleep
        client._monotonic = clock.seconds
        return client

    def test_retries_until_accepted(self):
        answer = luxi.encode_message({"success": True, "result": 2})

        def serve():
            conn, _ = self.server.accept()
            conn.settimeout(10)
            with conn:
                buf = luxi.MessageBuffer(10 ** 6)
                while not buf.feed(conn.recv(65536)):
                    pass
                conn.sendall(answer)
        server = threading.Thread(target=serve)

        def on_sleep(delays):
            # after three refusals the server accepts the waiting
            # connection, then serves the next one
            if len(delays) == 3:
                self.make_room()
                server.start()
        client = self.client(on_sleep, timeout=10)
        try:
            self.assertEqual(client.call("QueryClusterInfo"), 2)
        finally:
            if server.ident is not None:
                server.join(10)
        self.assertEqual(len(self.delays), 3)
        self.assertLessEqual(max(self.delays), luxi.CONNECT_RETRY_MAX)

    def test_gives_up_after_the_connect_timeout(self):
        client = self.client(lambda delays: None, connect_timeout=3)
        err = self.assertRaises(luxi.LuxiTimeoutError, client.call,
                                "QueryClusterInfo")
        self.assertIn("accepted no connection for 3 seconds", str(err))
        self.assertLessEqual(sum(self.delays), 3)
        self.assertGreater(len(self.delays), 3)
        self.assertLessEqual(max(self.delays), luxi.CONNECT_RETRY_MAX)


class ListenQueueTests(unittest.TestCase):
    """The master's socket queues many clients connecting at once."""

    @_async_test
    async def test_hundreds_of_clients_at_once_are_queued(self):
        from ganeti.server import masterd
        top = tempfile.mkdtemp(prefix="luxi")
        self.addCleanup(shutil.rmtree, top, True)
        path = os.path.join(top, "ganeti-query")
        service = masterd.LuxiService(reactor, path, StubHandler())
        service.privilegedStartService()
        service.startService()
        self.addCleanup(service.stopService)
        # all of them connect before the master accepts any
        clients, busy = [], 0
        try:
            for _ in range(300):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.setblocking(False)
                if sock.connect_ex(path) == 0:
                    clients.append(sock)
                else:
                    busy += 1
                    sock.close()
        finally:
            for sock in clients:
                sock.close()
        self.assertEqual((len(clients), busy), (300, 0))
        # and the master still answers
        client = luxi.LuxiClient(reactor, path)
        self.addCleanup(client.close)
        info = await client.query_cluster_info()
        self.assertEqual(info["name"], "cluster.example.com")


# --- Ganeti's own clients against our server -------------------------------

_GANETI_CLIENT = """
import json, sys
from ganeti import errors, luxi, opcodes
client = luxi.Client(address=sys.argv[1])
out = {}
out["info"] = client.QueryClusterInfo()
out["job"] = client.SubmitJob([opcodes.OpInstanceStartup(
    instance_name="inst1", force=True)])
out["many"] = client.SubmitManyJobs([[opcodes.OpClusterQuery()],
                                     [opcodes.OpTestDelay(duration=1.0)]])
out["jobs"] = client.QueryJobs([17], ["status", "opstatus", "opresult"])
out["cancel"] = client.CancelJob(17)
out["wfjc"] = client.WaitForJobChangeOnce(17, ["status"], None, None,
                                          timeout=1)
out["drain"] = client.SetQueueDrainFlag(True)
out["instances"] = client.QueryInstances(["inst1"], ["name"], False)
response = client.Query("node", ["name"], None)
out["query"] = [row[0][1] for row in response.data]
try:
    client.QueryTags("instance", "missing")
except errors.OpPrereqError as err:
    out["prereq"] = list(err.args)
try:
    client.CallMethod("MakeCoffee", [])
except errors.LuxiError as err:
    out["unknown"] = str(err)
try:
    client.SubmitJob([opcodes.OpInstanceReboot(instance_name="i")])
except errors.OpPrereqError as err:
    out["badop"] = list(err.args)
print(json.dumps(out))
"""


class CallerHandler(StubHandler):
    """Records who submits (the peer credentials luxi passes)."""

    def __init__(self):
        StubHandler.__init__(self)
        self.callers = []

    def submit_job(self, ops, caller=None):
        self.callers.append(caller)
        return StubHandler.submit_job(self, ops)

    def submit_job_for(self, client, ops, caller=None):
        self.callers.append((client, caller))
        return 18


class CallerTests(ServerTestCase):
    """Handlers of job submissions learn who is at the other end of the
    socket (SO_PEERCRED): the budget of query jobs counts per user."""

    def setUp(self):
        d = ServerTestCase.setUp(self)
        self.handler = CallerHandler()
        return d.addCallback(lambda _: setattr(self.port.factory, "handler",
                                               self.handler))

    @_async_test
    async def test_peer_credentials_and_submit_job_for(self):
        client = luxi.LuxiClient(reactor, self.path)
        self.addCleanup(client.close)
        await client.submit_job([opcodes.OpClusterQuery()])
        self.assertEqual(self.handler.callers,
                         [luxi.Caller(pid=os.getpid(), uid=os.getuid(),
                                      gid=os.getgid())])
        self.assertEqual(await client.submit_job_for(
            "user=jack", [opcodes.OpClusterQuery()]), 18)
        self.assertEqual(self.handler.callers[-1][0], "user=jack")
        with self.assertRaises(errors.OpPrereqError) as caught:
            await client.submit_job_for("user jack",
                                        [opcodes.OpClusterQuery()])
        self.assertIn("SubmitJobFor: client: expected a printable text of 1"
                      " to 256 characters without spaces",
                      str(caught.exception))

    @_async_test
    async def test_handlers_without_caller_or_submit_job_for(self):
        self.port.factory.handler = StubHandler()
        client = luxi.LuxiClient(reactor, self.path)
        self.addCleanup(client.close)
        self.assertEqual(await client.submit_job([opcodes.OpClusterQuery()]),
                         17)
        with self.assertRaises(errors.LuxiError) as caught:
            await client.submit_job_for("user=jack",
                                        [opcodes.OpClusterQuery()])
        self.assertTrue(luxi.is_unsupported_method(caught.exception))

    def test_no_credentials_without_a_unix_socket(self):
        from twisted.internet.testing import StringTransport
        self.assertIsNone(luxi.peer_caller(StringTransport()))


class GanetiClientTests(ServerTestCase):

    if ganeti_peer.unavailable_reason():
        skip = ganeti_peer.unavailable_reason()

    @_async_test
    async def test_ganeti_python_client(self):
        (out, err, code) = await ganeti_peer.run_python(_GANETI_CLIENT,
                                                        [self.path])
        self.assertEqual(code, 0, out + err)
        result = json.loads(out)
        self.assertEqual(result["info"]["name"], "cluster.example.com")
        self.assertEqual(result["job"], 17)
        self.assertEqual(result["many"], [[True, 20], [True, 21]])
        self.assertEqual(result["jobs"], [["success", ["success"], [None]]])
        self.assertEqual(result["cancel"], [True, "Job 17 will be canceled"])
        self.assertEqual(result["wfjc"], [["running"], [[
            1, [1700000000, 5], "message", "Starting"]]])
        self.assertTrue(result["drain"])
        self.assertEqual(result["instances"], [["inst1"]])
        self.assertEqual(result["query"], ["node1", "node2"])
        self.assertEqual(result["prereq"], ["Instance 'missing' not known",
                                            errors.ECODE_NOENT])
        self.assertIn("MakeCoffee", result["unknown"])
        # reboot_type is required: our validation, their error class
        self.assertEqual(result["badop"][1], errors.ECODE_INVAL)
        self.assertIn("reboot_type", result["badop"][0])
        submitted = [c[1] for c in self.handler.calls
                     if c[0] == "submit_job"]
        self.assertEqual(submitted, [[opcodes.OpInstanceStartup(
            instance_name="inst1", force=True)]])

    @_async_test
    async def test_real_gnt_instance_add(self):
        """gnt-instance add --submit, unmodified, submits its job here."""
        script = os.path.join(ganeti_peer.GANETI_LIB, "gnt-instance")
        if not os.path.exists(script):
            raise unittest.SkipTest("%s is not installed" % script)
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ganeti_peer.GANETI_LIB,
               "LANG": "C.UTF-8", "GANETI_ROOTDIR": self.root,
               "GANETI_HOSTNAME": "node1"}
        (out, err, code) = await utils.getProcessOutputAndValue(
            ganeti_peer.GANETI_PYTHON,
            [script, "add", "--submit", "-t", "plain",
             "-o", "debootstrap+default", "-n", "node1",
             "--disk", "0:size=1G", "-B", "memory=512M",
             "--no-name-check", "--no-ip-check", "inst9"],
            env=env, path=self.root)
        (out, err) = (out.decode(), err.decode())
        self.assertEqual(code, 0, out + err)
        self.assertIn("JobID: 17", out + err)
        ((name, (op,)),) = self.handler.calls
        self.assertEqual(op.OP_ID, "OP_INSTANCE_CREATE")
        self.assertEqual((op.instance_name, op.mode, op.disks, op.nics,
                          op.disk_template, op.beparams, op.os_type,
                          op.pnode, op.name_check, op.ip_check),
                         ("inst9", "create", [{"size": 1024}], [{}], "plain",
                          {"memory": 512}, "debootstrap+default", "node1",
                          False, False))
        (source, text, stamp) = op.reason[0]
        self.assertEqual((source, text), ("gnt:client:gnt-instance", "add"))
