"""GET /metrics on the RAPI daemon (StubTreq, fake master): Prometheus'
text format with RAPI's own request counters by path class and the master
daemon's metrics fetched over luxi (QueryMetrics)."""

from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import defer

from ganeti import errors
from ganeti import luxi
from ganeti import metrics
from ganeti.rapi import app as rapi_app

from tests.test_rapi import (FakeHandler, FakeMaster, RapiTestCase, READER,
                             WRITER, I1)

MASTER_TEXT = ("# HELP ganeti_config_serial The serial number.\n"
               "# TYPE ganeti_config_serial gauge\n"
               "ganeti_config_serial 42.0\n")


class MetricsHandler(FakeHandler):
    """A master with metrics (the other fake answers no QueryMetrics)."""

    metrics_text = MASTER_TEXT

    def query_metrics(self):
        return self.metrics_text


class MetricsTestCase(RapiTestCase):

    def setUp(self):
        RapiTestCase.setUp(self)
        self.handler = MetricsHandler(self.cfg, self.clock)
        self.master = FakeMaster(self.handler)
        self.rapi = rapi_app.RapiApp(self.master, self.users, self.clock,
                                     require_auth=self.require_auth)
        from treq.testing import StubTreq
        self.stub = StubTreq(self.rapi.resource())

    @defer.inlineCallbacks
    def scrape(self, auth=None, expect=200):
        headers = {}
        if auth:
            headers["Authorization"] = [auth]
        response = yield self.stub.request("GET", "http://rapi.test/metrics",
                                           headers=headers)
        body = yield response.content()
        self.assertEqual(response.code, expect, body)
        if expect != 200:
            return None
        self.assertEqual(
            response.headers.getRawHeaders(b"content-type"),
            [metrics.CONTENT_TYPE.encode("ascii")])
        found = {}
        for family in text_string_to_metric_families(body.decode("utf-8")):
            for sample in family.samples:
                found[(sample.name, tuple(sorted(sample.labels.items())))] \
                    = sample.value
        return found


class MetricsTests(MetricsTestCase):

    @defer.inlineCallbacks
    def test_requests_are_counted_by_path_class_and_code(self):
        yield self.ok("GET", "/2/instances/%s" % I1, auth=None)
        yield self.error(404, "GET", "/2/instances/nosuchinstance",
                         auth=None)
        yield self.error(404, "GET", "/no/such/path", auth=None)
        found = yield self.scrape()
        # the resource's pattern, never the path asked for
        one = "/2/instances/{name}"
        self.assertEqual(found[("ganeti_rapi_requests_total",
                                (("code", "200"), ("path", one)))], 1)
        self.assertEqual(found[("ganeti_rapi_requests_total",
                                (("code", "404"), ("path", one)))], 1)
        self.assertEqual(found[("ganeti_rapi_requests_total",
                                (("code", "404"), ("path", "other")))], 1)
        self.assertFalse([k for k in found if I1 in str(k) or
                          "nosuchinstance" in str(k)])
        self.assertEqual(found[("ganeti_rapi_request_duration_seconds_count",
                                (("path", one),))], 2)
        # the master daemon's metrics come along
        self.assertEqual(found[("ganeti_config_serial", ())], 42)
        self.assertEqual(found[("ganeti_rapi_master_metrics_up", ())], 1)
        # the scrape itself counts from the next one on
        again = yield self.scrape()
        self.assertEqual(again[("ganeti_rapi_requests_total",
                                (("code", "200"), ("path", "/metrics")))], 1)

    @defer.inlineCallbacks
    def test_refused_writes_are_counted(self):
        yield self.error(401, "PUT", "/2/instances/%s/startup" % I1,
                         auth=None)
        yield self.error(403, "PUT", "/2/instances/%s/startup" % I1,
                         auth=READER)
        # check_head answers these before the app sees them, in the daemon
        err = self.rapi.check_head(
            b"PUT", b"/2/instances/%s/startup" % I1.encode(),
            _Headers({}))
        self.assertEqual(err.code, 401)
        found = yield self.scrape()
        path = "/2/instances/{name}/startup"
        self.assertEqual(found[("ganeti_rapi_requests_total",
                                (("code", "401"), ("path", path)))], 2)
        self.assertEqual(found[("ganeti_rapi_requests_total",
                                (("code", "403"), ("path", path)))], 1)

    @defer.inlineCallbacks
    def test_request_durations_follow_the_clock(self):
        # a job submission waits for the master; the clock moves meanwhile
        held = defer.Deferred()
        call = self.master.call

        def slow(method, *args):
            if method in (luxi.REQ_SUBMIT_JOB_FOR, luxi.REQ_SUBMIT_JOB) \
                    and not held.called:
                return held.addCallback(lambda _: call(method, *args))
            return call(method, *args)
        self.master.call = slow
        d = self.request("PUT", "/2/instances/%s/startup" % I1, auth=WRITER)
        self.clock.advance(3)
        held.callback(None)
        self.stub.flush()
        code, _ = yield d
        self.assertEqual(code, 200)
        self.master.call = call
        found = yield self.scrape()
        key = (("path", "/2/instances/{name}/startup"),)
        self.assertEqual(
            found[("ganeti_rapi_request_duration_seconds_sum", key)], 3)
        self.assertEqual(
            found[("ganeti_rapi_request_duration_seconds_bucket",
                   (("le", "2.5"),) + key)], 0)

    @defer.inlineCallbacks
    def test_without_the_master_rapi_still_answers_its_own(self):
        self.handler.fail_next = luxi.NoMasterError("no master here")
        found = yield self.scrape()
        self.assertEqual(found[("ganeti_rapi_master_metrics_up", ())], 0)
        self.assertNotIn(("ganeti_config_serial", ()), found)
        self.handler.fail_next = errors.LuxiError(
            "Unknown method QueryMetrics")
        found = yield self.scrape()
        self.assertEqual(found[("ganeti_rapi_master_metrics_up", ())], 0)

    @defer.inlineCallbacks
    def test_a_failing_scrape_is_a_500_and_counted(self):
        self.handler.fail_next = RuntimeError("a bug")
        yield self.scrape(expect=500)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        found = yield self.scrape()
        self.assertEqual(found[("ganeti_rapi_requests_total",
                                (("code", "500"), ("path", "/metrics")))], 1)

    @defer.inlineCallbacks
    def test_reads_need_what_other_reads_need(self):
        # wrong credentials are refused, as on every resource
        yield self.scrape(auth="Basic d3Jvbmc6d3Jvbmc=", expect=401)
        yield self.scrape(auth=READER)
        response = yield self.stub.request("POST",
                                           "http://rapi.test/metrics")
        self.assertEqual(response.code, 501)


class RequireAuthMetricsTests(MetricsTestCase):

    require_auth = True

    @defer.inlineCallbacks
    def test_reads_need_what_other_reads_need(self):
        yield self.scrape(expect=401)
        found = yield self.scrape(auth=READER)
        self.assertEqual(found[("ganeti_rapi_master_metrics_up", ())], 1)


class _Headers(object):
    def __init__(self, headers):
        self.headers = headers

    def getRawHeaders(self, name):
        return self.headers.get(name)
