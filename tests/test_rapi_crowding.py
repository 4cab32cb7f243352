"""RAPI readers cannot crowd out writers: reads of unknown objects answer
404 without a job, jobs are submitted for a client (luxi SubmitJobFor)
that the master budgets, and each client may submit only so fast (429
with Retry-After, on a fake clock).  The app and FakeMaster of
tests.test_rapi."""

from treq.testing import StubTreq
from twisted.internet import defer, task
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.python import usage
from twisted.trial import unittest
from twisted.web.test.requesthelper import DummyRequest

from ganeti import errors
from ganeti.jqueue import budget
from ganeti.rapi import app as rapi_app
from ganeti.rapi import auth
from ganeti.rapi import ratelimit
from ganeti.server import rapi as rapi_server

from tests.test_rapi import (FakeHandler, FakeMaster, I1, N1, RapiTestCase,
                             WRITER, basic)


class ClientHandler(FakeHandler):
    """A master that knows SubmitJobFor and records who each job is for;
    ``refuse`` (an error) is raised for the next submission."""

    def __init__(self, cfg, clock):
        FakeHandler.__init__(self, cfg, clock)
        self.clients = []
        self.refuse = None

    def submit_job_for(self, client, ops):
        if self.refuse is not None:
            err, self.refuse = self.refuse, None
            raise err
        self.clients.append(client)
        return self.submit_job(ops)


class CrowdingTestCase(RapiTestCase):
    USER_RATE = (5.0, 10)
    ANONYMOUS_RATE = (2.0, 4)

    def setUp(self):
        RapiTestCase.setUp(self)
        self.handler = ClientHandler(self.cfg, self.clock)
        self.master = FakeMaster(self.handler)
        self.rapi = rapi_app.RapiApp(
            self.master, self.users, self.clock, user_rate=self.USER_RATE,
            anonymous_rate=self.ANONYMOUS_RATE)
        self.stub = StubTreq(self.rapi.resource())


class ClientTests(CrowdingTestCase):

    @defer.inlineCallbacks
    def test_jobs_are_submitted_for_the_user_or_the_address(self):
        yield self.ok("GET", "/2/instances/%s/info" % I1, auth=None)
        yield self.ok("GET", "/2/nodes/%s/storage?output_fields=name" % N1,
                      auth=WRITER)
        yield self.ok("PUT", "/2/tags?tag=a", auth=WRITER)
        self.assertEqual(self.handler.clients, ["address=127.0.0.1",
                                                "user=writer",
                                                "user=writer"])
        self.assertEqual(len(self.handler.submitted), 3)


class RateLimitTests(CrowdingTestCase):

    @defer.inlineCallbacks
    def test_anonymous_clients_get_429_then_recover(self):
        path = "/2/instances/%s/info" % I1
        for _ in range(4):
            yield self.ok("GET", path, auth=None)
        err = yield self.error(429, "GET", path, auth=None)
        self.assertEqual(err["message"], "Too many jobs submitted by"
                         " address=127.0.0.1: at most 2 a second on average,"
                         " 4 at once (ganeti-rapi --anonymous-job-rate and"
                         " --anonymous-job-burst); retry in 1 s")
        self.assertEqual(self.last_headers.getRawHeaders("Retry-After"),
                         ["1"])
        self.assertEqual(len(self.handler.submitted), 4)
        # an authenticated user has a bucket of his own: writes go on
        yield self.ok("PUT", "/2/tags?tag=during", auth=WRITER)
        self.assertEqual(self.handler.clients[-1], "user=writer")
        # half a second later one token is back, not two
        self.clock.advance(0.5)
        yield self.ok("GET", path, auth=None)
        yield self.error(429, "GET", path, auth=None)
        self.clock.advance(10)
        for _ in range(4):
            yield self.ok("GET", path, auth=None)
        yield self.error(429, "GET", path, auth=None)
        self.assertEqual(len(self.handler.submitted), 4 + 1 + 1 + 4)

    @defer.inlineCallbacks
    def test_users_have_their_own_rate(self):
        for i in range(10):
            yield self.ok("PUT", "/2/tags?tag=t%d" % i, auth=WRITER)
        err = yield self.error(429, "PUT", "/2/tags?tag=x", auth=WRITER)
        self.assertIn("Too many jobs submitted by user=writer: at most 5 a"
                      " second on average, 10 at once (ganeti-rapi"
                      " --job-rate and --job-burst)", err["message"])
        # another user is not affected
        yield self.ok("PUT", "/2/tags?tag=y",
                      auth=basic("both", "bothpw"))
        self.clock.advance(0.2)
        yield self.ok("PUT", "/2/tags?tag=z", auth=WRITER)

    @defer.inlineCallbacks
    def test_reads_that_submit_nothing_are_not_limited(self):
        for _ in range(20):
            yield self.ok("GET", "/2/instances/%s" % I1, auth=None)
            yield self.ok("GET", "/2/jobs", auth=None)


class MasterBudgetTests(CrowdingTestCase):

    @defer.inlineCallbacks
    def test_query_budget_refusals(self):
        path = "/2/instances/%s/info" % I1
        self.handler.refuse = errors.JobQueueFull(
            "Too many unfinished query jobs of rapi address=127.0.0.1: 20"
            " (limit 20 per client, ganeti-masterd"
            " --max-query-jobs-per-client); retry when some have finished",
            budget.OVER_CLIENT)
        err = yield self.error(429, "GET", path, auth=None)
        self.assertIn("limit 20 per client", err["message"])
        self.handler.refuse = errors.JobQueueFull(
            "Too many unfinished query jobs: 200 (limit 200, ganeti-masterd"
            " --max-query-jobs); jobs that change the cluster are still"
            " accepted", budget.OVER_TOTAL)
        err = yield self.error(503, "GET", path, auth=None)
        self.assertIn("limit 200", err["message"])
        # the whole queue full stays a 503
        self.handler.refuse = errors.JobQueueFull("The job queue holds 5000"
                                                  " jobs (limit 5000)")
        yield self.error(503, "PUT", "/2/tags?tag=a", auth=WRITER)
        self.assertEqual(self.handler.submitted, [])

    @defer.inlineCallbacks
    def test_a_master_without_submit_job_for(self):
        handler = FakeHandler(self.cfg, self.clock)
        self.rapi.master = FakeMaster(handler)
        yield self.ok("PUT", "/2/tags?tag=a", auth=WRITER)
        self.assertEqual(len(handler.submitted), 1)
        # asked again a minute later (the master may have been upgraded)
        self.rapi.master = FakeMaster(self.handler)
        yield self.ok("PUT", "/2/tags?tag=b", auth=WRITER)
        self.assertEqual(self.handler.clients, [])
        self.clock.advance(61)
        yield self.ok("PUT", "/2/tags?tag=c", auth=WRITER)
        self.assertEqual(self.handler.clients, ["user=writer"])


class ClientNameTests(unittest.TestCase):

    def request(self, address):
        request = DummyRequest([b""])
        request.client = address
        return request

    def test_users_and_addresses(self):
        client_of = rapi_app.RapiApp.client_of
        user = auth.User("jack", "pw", ["write"])
        self.assertEqual(client_of(self.request(IPv4Address(
            "TCP", "192.0.2.9", 4000)), user), "user=jack")
        self.assertEqual(client_of(self.request(IPv4Address(
            "TCP", "192.0.2.9", 4000)), None), "address=192.0.2.9")
        # IPv6 clients by their /64, an IPv4-mapped one as IPv4
        self.assertEqual(client_of(self.request(IPv6Address(
            "TCP", "2001:db8:1:2:3:4:5:6", 4000)), None),
            "address=2001:db8:1:2::/64")
        self.assertEqual(client_of(self.request(IPv6Address(
            "TCP", "::ffff:192.0.2.9", 4000)), None), "address=192.0.2.9")
        odd = auth.User("a b\x01", "pw", [])
        self.assertEqual(client_of(self.request(None), odd), "user=a?b?")


class TokenBucketTests(unittest.TestCase):

    def test_refill_burst_and_many_clients(self):
        clock = task.Clock()
        buckets = ratelimit.TokenBuckets(clock, 4.0, 2, max_clients=3)
        self.assertEqual([buckets.take("a") for _ in range(3)],
                         [0, 0, 0.25])
        clock.advance(0.25)
        self.assertEqual(buckets.take("a"), 0)
        self.assertEqual(buckets.take("a"), 0.25)
        # never more than the burst, however long the wait
        clock.advance(3600)
        self.assertEqual([buckets.take("a") for _ in range(3)],
                         [0, 0, 0.25])
        for name in ("b", "c", "d", "e"):
            buckets.take(name)
        self.assertLessEqual(len(buckets), 3)
        # rate 0: no limit
        free = ratelimit.TokenBuckets(clock, 0, 1)
        self.assertEqual([free.take("a") for _ in range(100)], [0] * 100)
        self.assertEqual(ratelimit.retry_after(0.01), "1")
        self.assertEqual(ratelimit.retry_after(2.5), "3")


class RapiOptionTests(unittest.TestCase):

    def test_defaults_and_bad_values(self):
        options = rapi_server.Options()
        self.assertEqual((options["job-rate"], options["job-burst"],
                          options["anonymous-job-rate"],
                          options["anonymous-job-burst"]),
                         (20.0, 100, 2.0, 20))
        for args, text in (
                (["--job-rate", "-1"], "--job-rate: must be a non-negative"
                 " number (0: no limit), got -1.0"),
                (["--anonymous-job-rate", "nan"], "--anonymous-job-rate:"),
                (["--job-burst", "0"], "--job-burst: must be at least 1,"
                 " got 0"),
                (["--anonymous-job-burst", "-3"],
                 "--anonymous-job-burst: must be at least 1")):
            options = rapi_server.Options()
            err = self.assertRaises(usage.UsageError, options.parseOptions,
                                    ["--no-ssl"] + args)
            self.assertIn(text, str(err))
