"""The query cache: answers equal to computed ones, live data kept for its
TTL on a fake clock, everything config-derived dropped at a configuration
change, values shared by field lists, filters, explicit and locking
queries answered fresh, versions."""

import json

from twisted.internet import defer

from ganeti import constants
from ganeti import luxi
from ganeti import query
from ganeti.query import QueryCache, QueryContext
from ganeti.query import livecache
from ganeti.utils.rawjson import RawJSON

from tests.fakes import ClockTestCase
from tests.test_query import N1, build_cluster, node_uuid, standard_live

WEB1 = "web1.example.com"
TTL = 2.0


def wire_bytes(value):
    """What the luxi server sends for a handler's ``value``."""
    return luxi._encode_answer({"success": True, "result": value})


def every_field(what):
    """Every field of a resource that the cache may keep, and an unknown
    one (answered [1, null])."""
    table = query.RESOURCES[what].fields
    return [f.name for f in table if not f.volatile] + ["no.such.field"]


class CacheTestCase(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.store = build_cluster(self)
        self.live = standard_live(self.store)
        self.cache = QueryCache(self.clock, live_ttl=TTL)
        self.ctx = QueryContext(self.store, live=self.live, cache=self.cache)
        self.plain = QueryContext(self.store, live=self.live)

    def instance_calls(self):
        return len([c for c in self.live.calls if c[0] == "instances"])

    def rows(self, fields, qfilter=None, ctx=None, fresh=False):
        """{name: {field: value}} of an instance query."""
        result = self.successResultOf((ctx or self.ctx).query(
            "instance", ["name"] + fields, qfilter, fresh=fresh))
        return {row[0][1]: {f: v[1] for f, v in zip(fields, row[1:])}
                for row in result["data"]}

    def status(self, name=WEB1, **kw):
        return self.rows(["status"], **kw)[name]["status"]

    def stop_web1_behind_the_masters_back(self):
        del self.live.instances[node_uuid(self.store, N1)][WEB1]


class AnswerTests(CacheTestCase):

    def test_answers_are_the_computed_answers_byte_for_byte(self):
        for what in ("instance", "node", "group", "network"):
            fields = every_field(what)
            expected = self.successResultOf(self.plain.query(what, fields))
            for _ in range(2):      # built, then kept
                got = self.successResultOf(self.ctx.query_wire(what, fields))
                self.assertIsInstance(got, RawJSON)
                self.assertEqual(wire_bytes(got), wire_bytes(expected), what)
            known = fields[:-1]
            expected = self.successResultOf(
                self.plain.old_style(what, None, known))
            got = self.successResultOf(
                self.ctx.old_style_wire(what, None, known))
            self.assertIsInstance(got, RawJSON)
            self.assertEqual(wire_bytes(got), wire_bytes(expected), what)
            # the dict interface gives what a luxi client decodes
            self.assertEqual(
                self.successResultOf(self.ctx.old_style(what, None, known)),
                json.loads(json.dumps(expected)))
        # per resource: the repeated query and the repeated old-style one
        self.assertEqual(self.cache.hits, 8)

    def test_the_luxi_server_sends_kept_answers_as_they_are(self):
        ctx = self.ctx

        class Handler(object):
            def query(self, what, fields, qfilter):
                return ctx.query_wire(what, fields, qfilter)

        factory = luxi.LuxiServerFactory(Handler())
        raw = luxi.format_request("Query", ["node", ["name", "mfree"],
                                            None])[:-1]
        answer = self.successResultOf(
            defer.Deferred.fromCoroutine(factory.answer(raw)))
        result = luxi.parse_response(answer[:-1])
        self.assertEqual(result, self.successResultOf(
            self.plain.query("node", ["name", "mfree"])))

    def test_field_lists_share_values_and_keep_their_order(self):
        field = query.RESOURCES["instance"].fields.get("tags")
        calls = []
        getter = field.getter

        def counting(run, inst):
            calls.append(inst.uuid)
            return getter(run, inst)
        self.patch(field, "getter", counting)
        first = ["name", "tags", "status"]
        second = ["status", "uuid", "tags", "name", "tags"]
        for fields in (first, second, list(reversed(second))):
            got = self.successResultOf(self.ctx.query("instance", fields))
            want = self.successResultOf(self.plain.query("instance", fields))
            self.assertEqual(got, json.loads(json.dumps(want)))
            self.assertEqual([d["name"] for d in got["fields"]], fields)
        # the cache computed each instance's tags once; the plain queries
        # once per column (1, 2 and 2 columns)
        self.assertEqual(sorted(calls),
                         sorted(list(self.store.instances) * (1 + 5)))
        self.assertEqual(self.instance_calls(), 1 + 3)

    def test_filters_are_applied(self):
        web2 = self.store.get_instance("web2.example.com").uuid
        for qfilter in (["=~", "name", "^web"],
                        ["==", "status", "running"],
                        ["&", ["=", "admin_state", "up"],
                         ["!", ["=", "oper_state", True]]],
                        ["=[]", "tags", "prod"],
                        ["|", ["=", "pnode", N1], [">", "oper_ram", 200]],
                        ["=", "uuid", web2]):
            got = self.rows(["status", "tags"], qfilter)
            want = self.rows(["status", "tags"], qfilter, ctx=self.plain)
            self.assertEqual(got, json.loads(json.dumps(want)), qfilter)
            self.assertTrue(got, qfilter)
        self.assertEqual(sorted(self.rows([], ["=[]", "tags", "web"])),
                         [WEB1])
        self.store.add_tags(constants.TAG_INSTANCE, "db2.example.com",
                            ["web"])
        self.assertEqual(sorted(self.rows([], ["=[]", "tags", "web"])),
                         ["db2.example.com", WEB1])

    def test_bad_queries_are_refused_as_without_the_cache(self):
        for args in (("instance", "name"), ("planet", ["name"]),
                     ("instance", ["name"], ["=", "no.such.field", 1])):
            got = self.failureResultOf(self.ctx.query_wire(*args))
            want = self.failureResultOf(self.plain.query(*args))
            self.assertEqual(got.type, want.type)
            self.assertEqual(str(got.value), str(want.value))


class LiveDataTests(CacheTestCase):

    def test_live_data_is_kept_for_its_ttl_then_asked_again(self):
        self.live.deferred = True
        first = self.ctx.query("instance", ["name", "status"])
        self.live.fire()
        self.assertIn([[0, WEB1], [0, "running"]],
                      self.successResultOf(first)["data"])
        self.stop_web1_behind_the_masters_back()
        self.clock.advance(TTL / 2 - 0.01)
        self.assertEqual(self.status(), "running")
        self.assertEqual(self.instance_calls(), 1)
        # no query for a while: the data expires, the next query waits
        # for the nodes' answer
        self.clock.advance(TTL / 2 + 0.01)
        d = self.ctx.query("instance", ["name", "status"])
        self.assertNoResult(d)
        self.live.fire()
        self.assertIn([[0, WEB1], [0, "ERROR_down"]],
                      self.successResultOf(d)["data"])
        self.assertEqual(self.instance_calls(), 2)

    def test_data_in_use_is_refreshed_before_it_expires(self):
        self.live.deferred = True
        first = self.ctx.query("instance", ["name", "status"])
        self.live.fire()
        self.successResultOf(first)
        self.stop_web1_behind_the_masters_back()
        # in the second half of its life, a query is answered from the
        # data at once and starts asking the nodes again
        self.clock.advance(TTL / 2)
        self.assertEqual(self.status(), "running")
        self.assertEqual(self.instance_calls(), 2)
        self.assertEqual(self.status(), "running")
        self.assertEqual(self.instance_calls(), 2)
        self.live.fire()
        self.assertEqual(self.status(), "ERROR_down")
        # the new data is TTL seconds good from when it was asked for
        self.clock.advance(TTL / 2 - 0.01)
        self.assertEqual(self.status(), "ERROR_down")
        self.assertEqual(self.instance_calls(), 2)

    def test_config_only_queries_do_not_ask_the_nodes(self):
        self.rows(["tags", "admin_state", "be/maxmem"])
        self.clock.advance(10 * TTL)
        self.rows(["tags"])
        self.assertEqual(self.live.calls, [])

    def test_a_config_change_shows_at_once(self):
        self.assertEqual(self.rows(["tags", "status"])[WEB1],
                         {"tags": ["prod", "web"], "status": "running"})
        self.store.add_tags(constants.TAG_INSTANCE, WEB1, ["new"])
        self.assertEqual(self.rows(["tags"])[WEB1]["tags"],
                         ["new", "prod", "web"])
        # the change of the desired state, and live data asked again
        # (the instance may have stopped with it), within the TTL
        self.stop_web1_behind_the_masters_back()
        self.store.set_instance_admin_state(WEB1, constants.ADMINST_DOWN)
        self.assertEqual(self.rows(["admin_state", "status"])[WEB1],
                         {"admin_state": "down", "status": "ADMIN_down"})
        self.assertEqual(self.instance_calls(), 2)

    def test_node_live_data(self):
        fields = ["name", "mfree", "reserved.mem", "avail.mem", "pinst_cnt"]
        first = self.successResultOf(self.ctx.query("node", fields))
        self.live.nodes[node_uuid(self.store, N1)]["mfree"] = 1000
        self.clock.advance(1)
        self.assertEqual(self.successResultOf(self.ctx.query("node", fields)),
                         first)
        self.clock.advance(1)
        self.assertEqual(
            self.successResultOf(self.ctx.query("node", fields)),
            json.loads(json.dumps(self.successResultOf(
                self.plain.query("node", fields)))))
        self.assertNotEqual(
            self.successResultOf(self.ctx.query("node", fields)), first)

    def test_named_and_locking_queries_ask_the_nodes_at_once(self):
        self.assertEqual(self.status(), "running")
        self.stop_web1_behind_the_masters_back()
        # within the TTL, a list of everything shows what was asked
        self.assertEqual(self.status(), "running")
        # ... while asking about the instance by name or UUID asks its node
        uuid = self.store.get_instance(WEB1).uuid
        for qfilter in (["=", "name", WEB1],
                        ["|", ["=", "name", WEB1], ["=", "uuid", WEB1]],
                        ["==", "uuid", uuid]):
            self.assertEqual(self.status(qfilter=qfilter), "ERROR_down")
        self.assertEqual(self.successResultOf(self.ctx.old_style(
            "instance", [WEB1], ["status"])), [["ERROR_down"]])
        # and so does a locking query of everything
        self.assertEqual(self.status(fresh=True), "ERROR_down")
        self.assertIn([WEB1, "ERROR_down"], self.successResultOf(
            self.ctx.old_style("instance", None, ["name", "status"],
                               fresh=True)))

    def test_queries_share_a_fetch_under_way(self):
        self.live.deferred = True
        first = self.ctx.query_wire("instance", ["name", "status"])
        second = self.ctx.query_wire("instance", ["status", "name"])
        self.assertNoResult(first)
        self.assertEqual(len(self.live.pending), 1)
        self.live.fire()
        self.successResultOf(first)
        self.successResultOf(second)
        self.assertEqual(self.instance_calls(), 1)

    def test_a_cancelled_query_leaves_the_others_alone(self):
        # (luxi cancels the query of a client that went away)
        self.live.deferred = True
        gone = self.ctx.query_wire("instance", ["name", "status"])
        staying = self.ctx.query_wire("instance", ["status"])
        gone.cancel()
        self.failureResultOf(gone, defer.CancelledError)
        self.live.fire()
        self.assertIsInstance(self.successResultOf(staying), RawJSON)
        self.assertEqual(self.instance_calls(), 1)

    def test_a_fetch_from_before_a_config_change_is_not_used(self):
        self.live.deferred = True
        d = self.ctx.query("instance", ["name", "status", "tags"],
                           ["=", "pnode", N1])
        self.store.add_tags(constants.TAG_INSTANCE, WEB1, ["late"])
        self.stop_web1_behind_the_masters_back()
        self.live.fire()
        # the answer taken before the change is not good enough: asked again
        self.assertNoResult(d)
        self.assertEqual(len(self.live.pending), 1)
        self.live.fire()
        rows = {r[0][1]: r for r in self.successResultOf(d)["data"]}
        self.assertEqual(rows[WEB1][1:], [[0, "ERROR_down"],
                                          [0, ["late", "prod", "web"]]])

    def test_ttl_zero_asks_every_time(self):
        cache = QueryCache(self.clock, live_ttl=0)
        ctx = QueryContext(self.store, live=self.live, cache=cache)
        for _ in range(3):
            self.successResultOf(ctx.query("instance", ["status"]))
        self.assertEqual(self.instance_calls(), 3)
        self.assertEqual(cache.builds, 1)

    def test_unreachable_nodes(self):
        self.live.down.add(node_uuid(self.store, N1))
        self.assertEqual(self.status(), "ERROR_nodedown")
        self.live.down.clear()
        self.clock.advance(TTL)
        self.assertEqual(self.status(), "running")

    def test_negative_ttl_is_refused(self):
        self.assertRaises(ValueError, QueryCache, self.clock, live_ttl=-1)


class VersionTests(CacheTestCase):

    def versioned(self, version=None, what="instance",
                  fields=("name", "status")):
        value = self.successResultOf(self.ctx.query_versioned(
            what, list(fields), None, version))
        return value.decode() if isinstance(value, RawJSON) else value

    def test_unchanged_while_the_answer_is_the_same(self):
        first = self.versioned()
        version = first["version"]
        self.assertEqual(first["data"], self.successResultOf(
            self.ctx.query("instance", ["name", "status"]))["data"])
        self.assertEqual(self.versioned(version),
                         {"version": version, "unchanged": True})
        # newer live data that says the same: still the same answer
        self.clock.advance(TTL)
        self.assertEqual(self.versioned(version),
                         {"version": version, "unchanged": True})
        self.assertEqual(self.instance_calls(), 2)
        # other live data
        self.stop_web1_behind_the_masters_back()
        self.clock.advance(TTL)
        second = self.versioned(version)
        self.assertNotEqual(second["version"], version)
        self.assertIn([[0, WEB1], [0, "ERROR_down"]], second["data"])
        # a configuration change, even one that changes no value shown
        self.store.add_tags(constants.TAG_CLUSTER, None, ["x"])
        third = self.versioned(second["version"])
        self.assertNotEqual(third["version"], second["version"])
        self.assertEqual(third["data"], second["data"])
        # a version of another master (or of this one before a restart)
        self.assertNotIn("unchanged", self.versioned("other-" + version))

    def test_answers_not_kept_have_no_version(self):
        for what, fields in (("instance", ["name", "autorepair.state"]),
                             ("cluster", ["name"])):
            first = self.versioned(None, what, fields)
            self.assertIsNone(first["version"])
            again = self.versioned(None, what, fields)
            self.assertIn("data", again)
        named = self.successResultOf(self.ctx.query_versioned(
            "instance", ["name"], ["=", "name", WEB1], None))
        self.assertEqual(named, {"version": None,
                                 "fields": named["fields"],
                                 "data": [[[0, WEB1]]]})


class BoundsTests(CacheTestCase):

    def test_kept_answers_are_bounded(self):
        cache = QueryCache(self.clock, max_answers=2)
        ctx = QueryContext(self.store, live=self.live, cache=cache)
        for fields in (["name"], ["uuid"], ["tags"], ["name"]):
            self.successResultOf(ctx.query("instance", fields))
        self.assertEqual((cache.builds, cache.hits), (4, 0))
        self.successResultOf(ctx.query("instance", ["name"]))
        self.assertEqual((cache.builds, cache.hits), (4, 1))

    def test_snapshots_cover_every_node_that_may_have_data(self):
        store = self.store
        names = lambda uuids: sorted(  # noqa: E731
            store.nodes[u].name for u in uuids)
        # the offline node3 is never asked; node4 is not vm-capable and
        # hosts no instance
        self.assertEqual(names(livecache.nodes_for(
            livecache.KIND_INSTANCES, store)),
            ["node1.example.com", "node10.example.com", "node2.example.com"])
        self.assertEqual(names(livecache.nodes_for(
            livecache.KIND_NODES, store)),
            ["node1.example.com", "node10.example.com", "node2.example.com"])
