"""The browser console's RAPI resources (``/2/instances/NAME/console/
sessions...``): rights, owners, errors, the long poll and the event
stream, through the real luxi server code and the master's console relay
to the node's session logic over fake sockets (tests.test_console_master).
"""

import base64
import json
import os

from twisted.internet import defer

from ganeti import constants
from ganeti.server.masterd import MasterLuxiHandler

from tests.test_console_master import FakeMaster, NodeConsoles, make_config
from tests.test_rapi import READER, WRITER, RapiTestCase, basic

JACK = basic("jack", "abc123")
SESSIONS = "/2/instances/vm1/console/sessions"


class ConsoleResourceTests(RapiTestCase):

    def setUp(self):
        RapiTestCase.setUp(self)
        self.kvm_cfg = make_config()
        self.rpc = NodeConsoles(self.clock)
        relay = MasterLuxiHandler(FakeMaster(self.kvm_cfg, self.rpc))
        for name in ("console_open", "console_read", "console_write",
                     "console_close"):
            setattr(self.handler, name, getattr(relay, name))
        self.addCleanup(lambda: [s.close_all()
                                 for s in self.rpc.nodes.values()])

    def link(self, instance="vm1"):
        return self.rpc.sockets.last("/run/%s" % instance)

    @defer.inlineCallbacks
    def open(self, auth=WRITER):
        answer = yield self.ok("POST", SESSIONS, auth=auth)
        self.assertEqual(answer["instance"], "vm1")
        return answer["session"]

    @defer.inlineCallbacks
    def test_open_type_read_close(self):
        sid = yield self.open()
        path = "%s/%s" % (SESSIONS, sid)
        answer = yield self.ok("POST", path + "/input",
                               {"data": "echo h\u00e9\r"})
        self.assertEqual(answer, {"written": 9})
        self.assertEqual(self.link().transport.value(),
                         "echo h\u00e9\r".encode("utf-8"))
        yield self.ok("POST", path + "/input", {
            "data": base64.b64encode(b"\x1b[A\x00").decode(),
            "encoding": "base64"})
        self.assertTrue(self.link().transport.value().endswith(
            b"\x1b[A\x00"))
        # a long poll: waits, then answers what came
        d = self.request("GET", path + "/output?offset=0", auth=WRITER)
        self.assertNoResult(d)
        self.link().dataReceived(b"h\xc3\xa9\r\n\x1b[0m")
        self.stub.flush()
        code, answer = yield d
        self.assertEqual(code, 200, answer)
        self.assertEqual(base64.b64decode(answer["data"]),
                         b"h\xc3\xa9\r\n\x1b[0m")
        self.assertEqual((answer["offset"], answer["next"],
                          answer["dropped"], answer["closed"]),
                         (0, 9, 0, None))
        # nothing new: an empty answer after the wait
        d = self.request("GET", path + "/output?offset=9&wait=5",
                         auth=WRITER)
        self.clock.advance(5)
        self.stub.flush()
        code, answer = yield d
        self.assertEqual((code, answer["data"], answer["next"]),
                         (200, "", 9))
        self.assertEqual((yield self.ok("DELETE", path)), {"closed": sid})
        yield self.error(404, "GET", path + "/output", auth=WRITER)
        self.assertEqual(self.handler.submitted, [])

    @defer.inlineCallbacks
    def test_rights(self):
        yield self.error(401, "POST", SESSIONS, auth=None)
        yield self.error(403, "POST", SESSIONS, auth=READER)
        sid = yield self.open()
        path = "%s/%s" % (SESSIONS, sid)
        for verb, sub, body in (("GET", "/output", None),
                                ("POST", "/input", {"data": "x"}),
                                ("DELETE", "", None)):
            yield self.error(403, verb, path + sub, body, auth=READER)
            # another user with the write right: not their session
            err = yield self.error(404, verb, path + sub, body, auth=JACK)
            self.assertIn("is not yours", err["explain"])
        self.assertEqual(self.link().transport.value(), b"")
        # a session of another instance's path is not found either
        self.kvm_cfg.get_instance("vm-noserial").hvparams[
            "serial_console"] = True
        yield self.error(404, "GET", "/2/instances/vm-noserial/console/"
                         "sessions/%s/output" % sid, auth=WRITER)

    @defer.inlineCallbacks
    def test_instances_without_a_console(self):
        err = yield self.error(404, "POST",
                               "/2/instances/nope/console/sessions")
        self.assertIn("instance 'nope' is not known", err["explain"])
        err = yield self.error(409, "POST",
                               "/2/instances/vm-down/console/sessions")
        self.assertIn("is not running (state ADMIN_down)", err["message"])
        err = yield self.error(400, "POST",
                               "/2/instances/fake1/console/sessions")
        self.assertIn("only kvm instances have a serial console",
                      err["message"])
        err = yield self.error(400, "POST",
                               "/2/instances/vm-noserial/console/sessions")
        self.assertIn("serial_console is off", err["message"])
        self.rpc.sockets.missing.add("/run/vm1")
        err = yield self.error(409, "POST", SESSIONS)
        self.assertIn("cannot connect to the serial console of vm1",
                      err["message"])
        self.rpc.fail["console_open"] = "connection refused"
        err = yield self.error(502, "POST", SESSIONS)
        self.assertIn("connection refused", err["message"])

    @defer.inlineCallbacks
    def test_session_limit(self):
        node = self.kvm_cfg.get_instance("vm1").primary_node
        self.rpc.sessions(node).max_sessions = 0
        err = yield self.error(503, "POST", SESSIONS)
        self.assertIn("console sessions open", err["message"])

    @defer.inlineCallbacks
    def test_bad_input(self):
        sid = yield self.open()
        path = "%s/%s/input" % (SESSIONS, sid)
        for body, text in [({}, "data: expected a non-empty string"),
                           ({"data": 5}, "data: expected a non-empty"),
                           ({"data": "x", "encoding": "latin-1"},
                            "encoding: 'latin-1' is not one of"),
                           ({"data": "!!", "encoding": "base64"},
                            "data: not base64"),
                           ({"data": "x" * 20000}, "at most 16384")]:
            code, value = yield self.request("POST", path, body,
                                             auth=WRITER, raw=json.dumps(
                                                 body).encode())
            self.assertEqual(code, 400, value)
            self.assertIn(text, value["message"])
        yield self.error(400, "GET", "%s/%s/output?offset=-1"
                         % (SESSIONS, sid), auth=WRITER)

    @defer.inlineCallbacks
    def stream(self, path, last_event_id=None):
        headers = {"Authorization": [WRITER],
                   "Accept": ["text/event-stream"]}
        if last_event_id is not None:
            headers["Last-Event-ID"] = [str(last_event_id)]
        response = yield self.stub.request("GET", "http://rapi.test" + path,
                                           headers=headers)
        text = yield response.content()
        return response, text.decode("utf-8")

    @staticmethod
    def events(text):
        result = []
        for block in text.split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.splitlines()
                          if not line.startswith(":") and ": " in line)
            if fields:
                result.append(fields)
        return result

    @defer.inlineCallbacks
    def test_event_stream(self):
        node = self.kvm_cfg.get_instance("vm1").primary_node
        self.rpc.sessions(node).buffer_size = 8
        sid = yield self.open()
        path = "%s/%s/output" % (SESSIONS, sid)
        self.link().dataReceived(b"0123456789")
        self.link().dataReceived(b"\x1b[1mab")
        # the console goes away: the stream ends with why
        self.link().connectionLost(None)
        response, text = yield self.stream(path)
        self.assertEqual(response.code, 200)
        self.assertEqual(response.headers.getRawHeaders("content-type"),
                         ["text/event-stream; charset=utf-8"])
        events = self.events(text)
        self.assertEqual([e["event"] for e in events],
                         ["gap", "output", "closed"])
        self.assertEqual(json.loads(events[0]["data"]),
                         {"dropped": 8, "offset": 8})
        self.assertEqual(base64.b64decode(events[1]["data"]),
                         b"89\x1b[1mab")
        self.assertEqual(events[1]["id"], "16")
        self.assertIn("went away", json.loads(events[2]["data"])["reason"])
        # resuming from the last event id: only the end
        response, text = yield self.stream(path, last_event_id=14)
        events = self.events(text)
        self.assertEqual([(e["event"], e.get("id")) for e in events],
                         [("output", "16"), ("closed", None)])
        self.assertEqual(base64.b64decode(events[0]["data"]), b"ab")
        # an unknown session is an error answer, not a stream
        response, text = yield self.stream("%s/nope/output" % SESSIONS)
        self.assertEqual(response.code, 404, text)
        self.clock.advance(60)

    @defer.inlineCallbacks
    def test_event_stream_waits_and_keeps_alive(self):
        sid = yield self.open()
        path = "%s/%s/output" % (SESSIONS, sid)
        d = self.stream(path)
        self.stub.flush()
        self.clock.advance(15)
        self.stub.flush()
        self.link().dataReceived(b"late")
        self.stub.flush()
        yield self.ok("DELETE", "%s/%s" % (SESSIONS, sid))
        self.stub.flush()
        response, text = yield d
        self.assertIn(": keep-alive", text)
        events = self.events(text)
        self.assertEqual([e["event"] for e in events],
                         ["output", "closed"])
        self.assertEqual(base64.b64decode(events[0]["data"]), b"late")

    @defer.inlineCallbacks
    def test_event_stream_ends_with_access(self):
        sid = yield self.open()
        path = "%s/%s/output" % (SESSIONS, sid)
        d = self.stream(path)
        self.stub.flush()
        self.link().dataReceived(b"before")
        self.stub.flush()
        # the writer leaves the users file while the stream is open
        with open(self.users_path) as f:
            users = f.read()
        with open(self.users_path, "w") as f:
            f.write(users.replace("writer secret write\n", ""))
        st = os.stat(self.users_path)
        os.utime(self.users_path, ns=(st.st_atime_ns,
                                      st.st_mtime_ns + 10 ** 9))
        self.link().dataReceived(b"after")
        self.stub.flush()
        response, text = yield d
        events = self.events(text)
        self.assertEqual([e["event"] for e in events],
                         ["output", "output", "error"])
        self.assertEqual(base64.b64decode(events[1]["data"]), b"after")
        self.assertIn("access ended: 401",
                      json.loads(events[2]["data"])["message"])
        # and the node's session is closed: the socket is free again
        node = self.kvm_cfg.get_instance("vm1").primary_node
        self.assertEqual(self.rpc.sessions(node).sessions, {})

    def test_documented(self):
        from ganeti.rapi import openapi
        doc = openapi.document()
        op = doc["paths"][SESSIONS.replace("vm1", "{name}")
                          + "/{session}/output"]["get"]
        self.assertEqual(op["x-ganeti-access"], [constants.RAPI_ACCESS_WRITE]
                         if hasattr(constants, "RAPI_ACCESS_WRITE")
                         else ["write"])
        self.assertIn("text/event-stream",
                      op["responses"]["200"]["content"])
