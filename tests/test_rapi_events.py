"""GET /2/events: Server-Sent Events from the in-process RAPI app (StubTreq),
fed by an upstream stream the test drives; the hub's resubscription."""

import json
import os

import treq
from prometheus_client.parser import text_string_to_metric_families
from treq.testing import StubTreq
from twisted.internet import defer
from twisted.trial import unittest

from ganeti import errors
from ganeti import events
from ganeti import luxi
from ganeti.rapi import app as rapi_app
from ganeti.rapi import events as rapi_events
from ganeti.rapi import openapi

from tests import openapi_check
from tests.test_rapi import RapiTestCase, READER, WRITER, basic


class FakeUpstream(object):
    """The master's side of the hub's subscriptions: ``connect`` as
    :func:`ganeti.luxi.open_event_stream` would, ``send`` pushes events."""

    def __init__(self, head=1000, oldest=None):
        self.head = head
        self.oldest = oldest
        self.calls = []
        self.streams = []
        self.refuse = None

    def connect(self, on_events, since):
        self.calls.append(since)
        if self.refuse is not None:
            return defer.fail(self.refuse)
        stream = FakeStream({"head": self.head, "oldest": self.oldest},
                            on_events)
        self.streams.append(stream)
        return defer.succeed(stream)

    def event(self, kind="job", type="status", name="1", id=1, data=None):
        self.head += 1
        return {"seq": self.head, "time": 0, "kind": kind, "type": type,
                "name": name, "id": id, "data": data or {}}

    def send(self, *batch):
        self.streams[-1].on_events(list(batch))


class FakeStream(object):
    def __init__(self, greeting, on_events):
        self.greeting = greeting
        self.on_events = on_events
        self.closed = defer.Deferred()

    def close(self):
        if not self.closed.called:
            self.closed.callback(None)
        return defer.succeed(None)


def parse_sse(data):
    """[(id or None, event, data dict or comment text)]."""
    found = []
    for block in data.decode("utf-8").split("\n\n"):
        if not block:
            continue
        fields = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                fields.setdefault("comment", line[1:].strip())
                continue
            key, _, value = line.partition(": ")
            fields[key] = value
        if "event" in fields:
            found.append((int(fields["id"]) if "id" in fields else None,
                          fields["event"], json.loads(fields["data"])))
        else:
            found.append((None, None, fields.get("comment")))
    return found


class SseTestCase(RapiTestCase):

    openapi_checks = False

    def setUp(self):
        RapiTestCase.setUp(self)
        self.upstream = FakeUpstream()
        self.hub = rapi_events.EventHub(self.upstream.connect, self.clock,
                                        size=5, client_queue=4)
        self.rapi = rapi_app.RapiApp(self.master, self.users, self.clock,
                                     event_hub=self.hub, event_keepalive=15)
        self.stub = StubTreq(self.rapi.resource())

    def tearDown(self):
        self.hub.stop()
        self.stub.flush()
        RapiTestCase.tearDown(self)

    @defer.inlineCallbacks
    def open(self, query="", auth=READER, headers=None):
        """``(response, chunks)`` of a GET /2/events, the body read as it
        arrives."""
        hdrs = {"Authorization": [auth]} if auth else {}
        hdrs.update(headers or {})
        d = self.stub.get("http://rapi.test/2/events" + query, headers=hdrs)
        self.stub.flush()
        response = yield d
        chunks = []
        done = treq.collect(response, chunks.append)
        # the stream ends with the test (tearDown stops the hub)
        done.addErrback(lambda f: None)
        return response, chunks

    def received(self, chunks):
        self.clock.advance(0)
        self.stub.flush()
        return [e for e in parse_sse(b"".join(chunks)) if e[1] is not None]


class SseTests(SseTestCase):

    @defer.inlineCallbacks
    def test_live_events_as_sse(self):
        response, chunks = yield self.open()
        self.assertEqual(response.code, 200)
        self.assertEqual(response.headers.getRawHeaders("content-type"),
                         ["text/event-stream; charset=utf-8"])
        self.assertEqual(self.upstream.calls, [-1])
        one = self.upstream.event()
        two = self.upstream.event(kind="tags", name="c", id=None)
        self.upstream.send(one, two)
        got = self.received(chunks)
        self.assertEqual(got, [(one["seq"], "job", one),
                               (two["seq"], "tags", two)])

    @defer.inlineCallbacks
    def test_filters(self):
        response, chunks = yield self.open("?kind=job&id=7")
        self.upstream.send(self.upstream.event(id=6, name="6"),
                           self.upstream.event(id=7, name="7"),
                           self.upstream.event(kind="instance", name="7"))
        got = self.received(chunks)
        self.assertEqual([(e[1], e[2]["id"]) for e in got], [("job", 7)])

    @defer.inlineCallbacks
    def test_resume_with_last_event_id(self):
        yield self.open()
        sent = [self.upstream.event(id=i) for i in range(4)]
        self.upstream.send(*sent)
        response, chunks = yield self.open(
            headers={"Last-Event-ID": [str(sent[1]["seq"])]})
        got = self.received(chunks)
        self.assertEqual([e[0] for e in got],
                         [sent[2]["seq"], sent[3]["seq"]])
        # ?since= does the same
        response, chunks = yield self.open("?since=%d" % sent[2]["seq"])
        self.assertEqual([e[0] for e in self.received(chunks)],
                         [sent[3]["seq"]])

    @defer.inlineCallbacks
    def test_resume_too_old_gets_reset_then_live(self):
        yield self.open()
        sent = [self.upstream.event(id=i) for i in range(8)]
        self.upstream.send(*sent)     # the hub keeps the last 5
        response, chunks = yield self.open(
            headers={"Last-Event-ID": [str(sent[0]["seq"])]})
        live = self.upstream.event(id=99)
        self.upstream.send(live)
        got = self.received(chunks)
        self.assertEqual([(e[0], e[1]) for e in got],
                         [(sent[-1]["seq"], "reset"),
                          (live["seq"], "job")])

    @defer.inlineCallbacks
    def test_slow_client_is_cut_with_reason(self):
        response, chunks = yield self.open()
        (stream,) = [s for s in self.hub.bus._subscribers]
        stream.pauseProducing()        # what a full socket buffer does
        self.upstream.send(*[self.upstream.event(id=i) for i in range(6)])
        got = self.received(chunks)
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0][0], None)             # no id: resume from
        self.assertEqual(got[0][1], "cut")            # the last one seen
        self.assertIn("too slow", got[0][2]["data"]["reason"])
        self.assertEqual(self.hub.bus.subscriber_count, 0)

    @defer.inlineCallbacks
    def test_keepalive_comments_on_the_clock(self):
        response, chunks = yield self.open()
        self.stub.flush()
        before = len(parse_sse(b"".join(chunks)))
        self.clock.advance(15)
        self.stub.flush()
        after = parse_sse(b"".join(chunks))
        self.assertEqual(len(after), before + 1)
        self.assertEqual(after[-1], (None, None, "keep-alive"))

    @defer.inlineCallbacks
    def test_upstream_drop_resubscribes_from_the_last_event(self):
        response, chunks = yield self.open()
        first = self.upstream.event()
        self.upstream.send(first)
        self.upstream.streams[-1].close()
        self.clock.advance(rapi_events.RETRY_FIRST)
        self.assertEqual(self.upstream.calls, [-1, first["seq"]])
        second = self.upstream.event()
        self.upstream.send(second)
        got = self.received(chunks)
        self.assertEqual([e[0] for e in got], [first["seq"], second["seq"]])

    @defer.inlineCallbacks
    def test_master_restart_resets_clients(self):
        response, chunks = yield self.open()
        self.upstream.send(self.upstream.event())
        self.upstream.streams[-1].close()
        self.clock.advance(rapi_events.RETRY_FIRST)
        reset = {"seq": 5000000, "time": 0, "kind": "reset", "type": "reset",
                 "name": None, "id": None, "data": {"reason": "gone"}}
        self.upstream.send(reset)
        got = self.received(chunks)
        self.assertEqual([(e[0], e[1]) for e in got][-1], (5000000, "reset"))


class SseAccessTests(SseTestCase):
    """An open stream ends when its client may no longer read: a user
    removed from the users file, a session that ended."""

    def write_users(self, text):
        with open(self.users_path, "w") as f:
            f.write(text)
        # the users file is re-read when its stamp changes
        st = os.stat(self.users_path)
        os.utime(self.users_path, ns=(st.st_atime_ns,
                                      st.st_mtime_ns + 10 ** 9))

    @defer.inlineCallbacks
    def test_removed_user_is_cut_off(self):
        _, chunks = yield self.open(auth=READER)
        _, writer_chunks = yield self.open(auth=WRITER)
        one = self.upstream.event(id=1)
        self.upstream.send(one)
        self.assertEqual([e[1] for e in self.received(chunks)], ["job"])
        with open(self.users_path) as f:
            users = f.read()
        self.write_users(users.replace("reader {cleartext}readpw read\n",
                                       ""))
        # checked at most every few seconds: a batch right away still goes
        self.upstream.send(self.upstream.event(id=2))
        self.assertEqual(len(self.received(chunks)), 2)
        self.clock.advance(rapi_events.ACCESS_RECHECK)
        self.upstream.send(self.upstream.event(id=3))
        got = self.received(chunks)
        self.assertEqual([e[1] for e in got], ["job", "job", "cut"])
        self.assertIn("access ended: 401", got[-1][2]["data"]["reason"])
        # the other user's stream goes on
        self.assertEqual([e[1] for e in self.received(writer_chunks)],
                         ["job", "job", "job"])
        self.assertEqual(self.hub.bus.subscriber_count, 1)

    @defer.inlineCallbacks
    def test_ended_session_is_cut_off_at_the_keepalive(self):
        response = yield self.stub.post(
            "http://rapi.test/2/sessions",
            data=json.dumps({"username": "reader", "password": "readpw"}),
            headers={"Content-Type": ["application/json"]})
        login = yield response.json()
        self.assertEqual(response.code, 200, login)
        bearer = "Bearer " + login["token"]
        _, chunks = yield self.open(auth=bearer)
        response = yield self.stub.delete(
            "http://rapi.test/2/sessions",
            headers={"Authorization": [bearer]})
        self.assertEqual(response.code, 200)
        yield response.content()
        self.clock.advance(15)          # the keep-alive: no events needed
        got = self.received(chunks)
        self.assertEqual([e[1] for e in got], ["cut"])
        self.assertIn("access ended: 401 Session ended",
                      got[-1][2]["data"]["reason"])
        self.assertEqual(self.hub.bus.subscriber_count, 0)


class SseRefusalTests(SseTestCase):

    @defer.inlineCallbacks
    def test_needs_read_right(self):
        yield self.error(401, "GET", "/2/events", auth=None)
        yield self.error(401, "GET", "/2/events",
                         auth=basic("reader", "wrong"))
        yield self.error(403, "GET", "/2/events",
                         auth=basic("nobody", "nopw"))
        self.assertEqual(self.upstream.calls, [])
        response, _ = yield self.open(auth=WRITER)
        self.assertEqual(response.code, 200)

    @defer.inlineCallbacks
    def test_bad_parameters_name_the_field(self):
        value = yield self.error(400, "GET", "/2/events?kind=jobs",
                                 auth=READER)
        self.assertIn("kind", value["message"])
        self.assertIn("jobs", value["message"])
        value = yield self.error(400, "GET", "/2/events?since=abc",
                                 auth=READER)
        self.assertIn("since", value["message"])
        value = yield self.error(400, "GET", "/2/events", auth=READER,
                                 headers={"Last-Event-ID": ["-4"]})
        self.assertIn("Last-Event-ID", value["message"])
        self.assertEqual(self.upstream.calls, [])

    @defer.inlineCallbacks
    def test_other_methods_501(self):
        yield self.error(501, "POST", "/2/events", auth=WRITER)

    @defer.inlineCallbacks
    def test_master_unreachable_502(self):
        self.upstream.refuse = luxi.NoMasterError("no master here")
        yield self.error(502, "GET", "/2/events", auth=READER)
        self.hub.stop()


class HubTests(unittest.TestCase):

    def test_ready_times_out(self):
        from twisted.internet import task
        clock = task.Clock()

        def connect(on_events, since):
            return defer.Deferred()      # never answers
        hub = rapi_events.EventHub(connect, clock)
        d = hub.ready(timeout=3)
        clock.advance(3)
        failure = self.failureResultOf(d)
        self.assertTrue(failure.check(luxi.LuxiTimeoutError))
        self.assertIsInstance(failure.value, errors.GenericError)
        hub.stop()

    def test_format_event(self):
        text = rapi_events.format_event({"seq": 3, "kind": "job",
                                         "type": "log", "data": {"m": "a\nb"}})
        self.assertEqual(text.split(b"\n")[:2], [b"id: 3", b"event: job"])
        self.assertTrue(text.endswith(b"\n\n"))
        self.assertEqual(text.count(b"\n"), 4)
        cut = rapi_events.format_event({"seq": None, "kind": events.KIND_CUT,
                                        "data": {}})
        self.assertTrue(cut.startswith(b"event: cut\n"))


class SseOpenApiTests(SseTestCase):
    """GET /2/events in the OpenAPI document: its parameters, header and
    answers; refusals and events validate against it."""

    openapi_checks = True

    def setUp(self):
        SseTestCase.setUp(self)
        self.checker = openapi_check.shared_checker()
        if self.checker is None:
            raise unittest.SkipTest("OpenAPI validators not installed")

    def operation(self):
        template, op = self.checker.operation("GET", "/2/events?kind=job")
        self.assertEqual(template, rapi_app.EVENTS_PATH)
        self.assertEqual(openapi.EVENTS_PATH, rapi_app.EVENTS_PATH)
        return op

    def test_parameters_and_answers(self):
        op = self.operation()
        params = {(p["in"], p["name"]): p for p in op["parameters"]}
        self.assertEqual(sorted(params), [
            ("header", "Last-Event-ID"), ("query", "id"), ("query", "kind"),
            ("query", "name"), ("query", "since")])
        self.assertEqual(sorted(params["query", "kind"]["schema"]["items"]
                                ["enum"]), sorted(events.KINDS))
        self.assertEqual(list(op["responses"]["200"]["content"]),
                         ["text/event-stream"])
        for code in ("400", "401", "403", "501", "502", "504"):
            self.assertIn(code, op["responses"])
        self.assertEqual(op["x-ganeti-access"], ["read", "write"])
        self.assertIsNone(self.checker.operation("POST", "/2/events"))

    @defer.inlineCallbacks
    def test_refusals_match_the_document(self):
        # every answer here is checked against the document (check_openapi)
        yield self.error(400, "GET", "/2/events?kind=jobs", auth=READER)
        yield self.error(400, "GET", "/2/events?since=-1", auth=READER)
        yield self.error(400, "GET", "/2/events", auth=READER,
                         headers={"Last-Event-ID": ["x"]})
        yield self.error(401, "GET", "/2/events", auth=None)
        yield self.error(403, "GET", "/2/events",
                         auth=basic("nobody", "nopw"))
        self.upstream.refuse = luxi.NoMasterError("no master here")
        yield self.error(502, "GET", "/2/events", auth=READER)
        self.hub.stop()

    @defer.inlineCallbacks
    def test_events_match_the_event_schema(self):
        response, chunks = yield self.open()
        sent = [self.upstream.event(),
                self.upstream.event(kind="instance", type="state",
                                    name="inst1", id="uuid-1",
                                    data={"running": False})]
        self.upstream.send(*sent)
        schema = {"$ref": "#/components/schemas/Event"}
        got = [e[2] for e in self.received(chunks)]
        self.assertEqual(got, sent)
        for event in got:
            self.assertEqual(self.checker.errors(schema, event), [])
        cut = dict(sent[0], seq=None, kind="cut", type="cut", id=None)
        self.assertEqual(self.checker.errors(schema, cut), [])
        self.assertNotEqual(self.checker.errors(
            schema, dict(sent[0], kind="jobs")), [])


class SseMetricsTests(SseTestCase):
    """/metrics counts the /2/events clients and those cut off."""

    @defer.inlineCallbacks
    def scrape(self):
        response = yield self.stub.get("http://rapi.test/metrics")
        body = yield response.content()
        self.assertEqual(response.code, 200, body)
        found = {}
        for family in text_string_to_metric_families(body.decode("utf-8")):
            for sample in family.samples:
                found[(sample.name, tuple(sorted(sample.labels.items())))] \
                    = sample.value
        return found

    SUBSCRIBERS = ("ganeti_rapi_event_subscribers", ())

    @staticmethod
    def cut(reason):
        return ("ganeti_rapi_event_subscribers_cut_total",
                (("reason", reason),))

    @defer.inlineCallbacks
    def test_subscribers_and_cuts(self):
        found = yield self.scrape()
        self.assertEqual(found[self.SUBSCRIBERS], 0)
        self.assertEqual(found[self.cut("slow")], 0)
        self.assertEqual(found[self.cut("stopping")], 0)
        _, slow_chunks = yield self.open()
        _, chunks = yield self.open("?kind=tags")
        found = yield self.scrape()
        self.assertEqual(found[self.SUBSCRIBERS], 2)
        # the first one stops reading: cut off once its queue overflows
        slow = [s for s in self.hub.bus._subscribers if s.kinds is None]
        slow[0].pauseProducing()
        self.upstream.send(*[self.upstream.event(id=i) for i in range(6)])
        self.assertEqual(self.received(slow_chunks)[-1][1], "cut")
        found = yield self.scrape()
        self.assertEqual(found[self.SUBSCRIBERS], 1)
        self.assertEqual(found[self.cut("slow")], 1)
        self.assertEqual(found[self.cut("stopping")], 0)
        # the daemon stops: the other one is cut off too
        self.hub.stop()
        self.assertEqual(self.received(chunks)[-1][1], "cut")
        found = yield self.scrape()
        self.assertEqual(found[self.SUBSCRIBERS], 0)
        self.assertEqual(found[self.cut("slow")], 1)
        self.assertEqual(found[self.cut("stopping")], 1)

    @defer.inlineCallbacks
    def test_a_client_going_away_is_no_cut(self):
        response, _ = yield self.open()
        found = yield self.scrape()
        self.assertEqual(found[self.SUBSCRIBERS], 1)
        (stream,) = list(self.hub.bus._subscribers)
        stream.stopProducing()      # what the connection's loss does
        self.clock.advance(15)      # its keep-alive timer finds it closed
        found = yield self.scrape()
        self.assertEqual(found[self.SUBSCRIBERS], 0)
        self.assertEqual(found[self.cut("slow")], 0)
        self.assertEqual(found[self.cut("stopping")], 0)


class _GoneRequest(object):
    """A request whose connection is already lost (no channel left)."""

    channel = None

    def __init__(self):
        self.written = []
        self.producer = None

    def registerProducer(self, producer, streaming):
        self.producer = producer

    def unregisterProducer(self):
        raise AssertionError("unregisterProducer without a channel")

    def write(self, data):
        self.written.append(data)


class StreamOfGoneClientTests(unittest.TestCase):

    def test_stop_after_the_connection_is_lost(self):
        from twisted.internet.task import Clock
        clock = Clock()
        bus = events.EventBus(clock)
        stream = rapi_events.SseStream(_GoneRequest(), bus, clock)
        # the browser closed the page: the request's Deferred is cancelled
        stream.done.cancel()
        self.failureResultOf(stream.done, defer.CancelledError)
        self.assertTrue(stream.subscription.closed)
        self.assertEqual(bus.subscriber_count, 0)
