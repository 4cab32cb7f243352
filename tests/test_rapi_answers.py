"""RAPI's kept answers: a bulk list rendered once is sent again while the
master says its answer is unchanged (luxi QueryVersioned), and rendered
anew as soon as the configuration changes; a master without
QueryVersioned is asked with Query."""

from twisted.internet import defer

from ganeti import constants
from ganeti import query
from ganeti.query import QueryCache
from ganeti.rapi import answers
from ganeti.rapi import app as rapi_app

from tests.test_rapi import I1, FakeHandler, FakeMaster, RapiTestCase


class CountingHandler(FakeHandler):
    """FakeHandler counting Query calls (a master without QueryVersioned)."""

    def __init__(self, cfg, clock):
        FakeHandler.__init__(self, cfg, clock)
        self.plain_queries = 0

    def query(self, what, fields, qfilter):
        self.plain_queries += 1
        return FakeHandler.query(self, what, fields, qfilter)


class VersionedHandler(CountingHandler):
    """... with the master's query cache and QueryVersioned."""

    def __init__(self, cfg, clock):
        CountingHandler.__init__(self, cfg, clock)
        self.cache = QueryCache(clock)
        self.versions = []      # the version of each QueryVersioned

    def _ctx(self):
        return query.QueryContext(self.cfg, live=None, jobs=self._job_rows,
                                  cache=self.cache)

    def query_versioned(self, what, fields, qfilter, version):
        self.versions.append(version)
        return self._ctx().query_versioned(what, fields, qfilter, version)


class AnswerCacheTests(RapiTestCase):

    def setUp(self):
        RapiTestCase.setUp(self)
        self.handler = VersionedHandler(self.cfg, self.clock)
        self.master = FakeMaster(self.handler)
        self.use_app(rapi_app.RapiApp(self.master, self.users, self.clock))

    def use_app(self, app):
        from treq.testing import StubTreq
        self.rapi = app
        self.stub = StubTreq(app.resource())

    @defer.inlineCallbacks
    def test_bulk_lists_are_rendered_once_while_unchanged(self):
        first = yield self.ok("GET", "/2/instances?bulk=1", auth=None)
        # other URLs asking the same query share it (unshared clients)
        for i in range(3):
            again = yield self.ok("GET", "/2/instances?bulk=1&client=%d" % i,
                                  auth=None)
            self.assertEqual(again, first)
        self.assertEqual(self.rapi.answers.rendered_count, 1)
        self.assertEqual(self.rapi.answers.reused, 3)
        version = self.handler.versions[1]
        self.assertIsNotNone(version)
        self.assertEqual(self.handler.versions, [None] + [version] * 3)
        self.assertEqual(self.handler.plain_queries, 0)

    @defer.inlineCallbacks
    def test_a_change_is_in_the_next_answer(self):
        first = yield self.ok("GET", "/2/instances?bulk=1", auth=None)
        [one] = [row for row in first if row["name"] == I1]
        self.assertEqual(one["tags"], ["itag"])
        self.cfg.add_tags(constants.TAG_INSTANCE, I1, ["new"])
        second = yield self.ok("GET", "/2/instances?bulk=1", auth=None)
        [one] = [row for row in second if row["name"] == I1]
        self.assertEqual(one["tags"], ["itag", "new"])
        # and the node list, built from the same configuration
        nodes = yield self.ok("GET", "/2/nodes?bulk=1", auth=None)
        self.cfg.add_tags(constants.TAG_NODE, nodes[0]["name"], ["ntag"])
        nodes = yield self.ok("GET", "/2/nodes?bulk=1", auth=None)
        self.assertEqual(nodes[0]["tags"], ["ntag"])
        self.assertEqual(self.rapi.answers.reused, 0)

    @defer.inlineCallbacks
    def test_generic_queries(self):
        path = "/2/query/instance?fields=name,tags"
        first = yield self.ok("GET", path)
        again = yield self.ok("GET", path)
        self.assertEqual(again, first)
        self.assertEqual(self.rapi.answers.reused, 1)
        self.assertEqual([f["name"] for f in first["fields"]],
                         ["name", "tags"])
        self.assertIn([[0, I1], [0, ["itag"]]], first["data"])
        filtered = yield self.ok("PUT", "/2/query/instance", {
            "fields": ["name"], "qfilter": ["=[]", "tags", "itag"]})
        self.assertEqual(filtered["data"], [[[0, I1]]])
        # exports are asked from the nodes (none answer here): one row
        # per node
        exports = yield self.ok("GET", "/2/query/export?fields=node,export")
        self.assertEqual(sorted(row[0][1] for row in exports["data"]),
                         ["node1.example.com", "node2.example.com"])
        self.assertEqual(set(row[1][0] for row in exports["data"]),
                         {query.RS_NODATA})

    @defer.inlineCallbacks
    def test_a_master_without_versions_is_asked_with_query(self):
        old = CountingHandler(self.cfg, self.clock)
        self.master.factory.handler = old
        for _ in range(2):
            rows = yield self.ok("GET", "/2/instances?bulk=1", auth=None)
            self.assertIn(I1, [r["name"] for r in rows])
        self.assertEqual(old.plain_queries, 2)
        # upgraded: asked again whether it has them after a while
        self.master.factory.handler = self.handler
        yield self.ok("GET", "/2/instances?bulk=1", auth=None)
        self.assertEqual((self.handler.plain_queries, self.handler.versions),
                         (1, []))
        self.clock.advance(answers.RETRY_UNSUPPORTED)
        yield self.ok("GET", "/2/instances?bulk=1", auth=None)
        self.assertEqual((self.handler.plain_queries, self.handler.versions),
                         (1, [None]))

    @defer.inlineCallbacks
    def test_without_the_answer_cache_every_answer_is_rendered(self):
        self.use_app(rapi_app.RapiApp(self.master, self.users, self.clock,
                                      answer_cache=False))
        for _ in range(2):
            rows = yield self.ok("GET", "/2/instances?bulk=1", auth=None)
            self.assertIn(I1, [r["name"] for r in rows])
        self.assertEqual(self.handler.plain_queries, 2)
        self.assertEqual(self.handler.versions, [])

    def test_kept_answers_are_bounded(self):
        cache = answers.AnswerCache(self.master, self.clock, max_entries=2)
        shape = dict
        for fields in (["name"], ["uuid"], ["tags"], ["name"]):
            self.successResultOf(cache.rendered("instance", fields, None,
                                                shape))
        self.assertEqual((cache.rendered_count, cache.reused), (4, 0))
        self.successResultOf(cache.rendered("instance", ["name"], None,
                                            shape))
        self.assertEqual((cache.rendered_count, cache.reused), (4, 1))
