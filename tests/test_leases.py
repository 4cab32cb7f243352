"""Leases of forthcoming instances: setting them (create, modify), the
tag rules of the reserved namespace, the query fields, the removal opcode's
guard, and the master's lease keeper on a Clock (removal submitted once
when a lease ends, moved by an extension, warnings, restart, committed
instances untouched)."""

import json

from twisted.internet import defer
from twisted.logger import globalLogPublisher
from twisted.trial import unittest

from ganeti import constants
from ganeti import errors
from ganeti import leases
from ganeti import objects
from ganeti import query

from tests import ganeti_peer
from tests.test_cmdlib_instance import InstanceTestCase, create_op

#: 2026-09-21T...: the tests' "now"
NOW = 1790000000
HOUR = 3600


class ParseTests(unittest.TestCase):

    def test_forms(self):
        self.assertEqual(leases.parse("2026-12-01T12:00:00Z", NOW),
                         1796126400)
        self.assertEqual(leases.parse("2026-12-01T12:00Z", NOW), 1796126400)
        self.assertEqual(leases.parse("2026-12-01T12:00:00+00:00", NOW),
                         1796126400)
        self.assertEqual(leases.parse("+2h", NOW), NOW + 2 * HOUR)
        self.assertEqual(leases.parse("+3d", NOW), NOW + 3 * 86400)
        self.assertEqual(leases.parse("+90s", NOW), NOW + 90)
        self.assertEqual(leases.parse(NOW + 5, NOW), NOW + 5)
        self.assertEqual(leases.parse(str(NOW + 5), NOW), NOW + 5)
        self.assertIsNone(leases.parse("none", NOW))

    def refused(self, value, *texts, **kw):
        err = self.assertRaises(errors.OpPrereqError, leases.parse, value,
                                NOW, **kw)
        self.assertEqual(err.args[1], errors.ECODE_INVAL)
        for text in ("lease_until",) + texts:
            self.assertIn(text, err.args[0])
        return err

    def test_bad_values(self):
        self.refused("tomorrow", "'tomorrow' is not a time", "ISO 8601")
        self.refused("+2x", "is not a time")
        self.refused("+0h", "must be positive")
        self.refused("2026-02-30T12:00:00Z", "not a valid date")
        self.refused("2026-12-01T12:00:00+02:00", "is not a time")
        self.refused(True, "is not a time")
        self.refused("none", "needs an end", allow_unlimited=False)

    def test_past(self):
        err = self.refused("2020-01-01T00:00:00Z", "in the past")
        self.assertIn("2020-01-01T00:00:00Z", err.args[0])
        self.refused(NOW, "in the past")

    def test_field_named(self):
        err = self.assertRaises(errors.OpPrereqError, leases.parse, "x", NOW,
                                field="--lease-until")
        self.assertTrue(err.args[0].startswith("--lease-until: "))


class LeaseTestCase(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.clock.advance(NOW)

    def reserve(self, name="inst1.example.com", lease="+2h", **kw):
        kw.setdefault("os_type", None)
        kw.setdefault("nics", [])
        if lease is not None:
            kw["lease_until"] = lease
        uuid = self.ok(create_op(name, forthcoming=True, **kw))
        self.rpc.calls = []
        self.log[:] = []
        return uuid

    def lease_tags(self, uuid):
        return sorted(t for t in self.cfg.get_instance(uuid).tags
                      if t.startswith("lease:"))

    def query(self, fields, now=None):
        ctx = query.QueryContext(self.cfg, clock=self.clock)
        answer = self.successResultOf(ctx.query("instance", ["name"] +
                                                fields))
        return {row[0][1]: [v for _, v in row[1:]] for row in answer["data"]}

    def assert_unchanged(self, op, *texts, **kw):
        """``op`` is refused naming ``texts``; config.data did not change."""
        serial = self.cfg.serial_no
        before = json.dumps(self.cfg.to_dict(), sort_keys=True)
        err = self.fails(op, kw.get("kind", errors.OpPrereqError))
        for text in texts:
            self.assertIn(text, str(err))
        self.assertEqual(self.cfg.serial_no, serial)
        self.assertEqual(json.dumps(self.cfg.to_dict(), sort_keys=True),
                         before)
        return err


class CreateAndModifyTests(LeaseTestCase):

    def test_create_with_lease(self):
        uuid = self.reserve(lease="+2h")
        self.assertEqual(self.lease_tags(uuid),
                         ["lease:until:%d" % (NOW + 2 * HOUR)])
        self.assertEqual(leases.lease_of(self.cfg.get_instance(uuid)),
                         NOW + 2 * HOUR)
        self.assertEqual(self.query(["lease_until", "lease_state"]),
                         {"inst1.example.com": [NOW + 2 * HOUR, "active"]})
        self.assertEqual(self.cfg.verify(), [])

    def test_instance_info(self):
        uuid = self.reserve(lease="+2h")
        info = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA",
                        "instances": [uuid], "static": True})
        [data] = info.values()
        self.assertEqual((data["lease_until"], data["lease_state"]),
                         (NOW + 2 * HOUR, "active"))

    def test_create_iso(self):
        uuid = self.reserve(lease="2026-12-01T12:00:00Z")
        self.assertEqual(self.lease_tags(uuid), ["lease:until:1796126400"])

    def test_create_without_lease(self):
        uuid = self.reserve(lease=None)
        self.assertEqual(self.lease_tags(uuid), [])
        self.assertEqual(self.query(["lease_until", "lease_state"]),
                         {"inst1.example.com": [None, ""]})

    def test_create_refusals_change_nothing(self):
        self.assert_unchanged(create_op(lease_until="+2h"), "lease_until",
                              "only a forthcoming instance")
        self.assert_unchanged(
            create_op(forthcoming=True, lease_until="2020-01-01T00:00:00Z"),
            "lease_until", "in the past")
        self.assert_unchanged(
            create_op(forthcoming=True, lease_until="soon"),
            "lease_until", "'soon'")
        self.assert_unchanged(
            create_op(forthcoming=True,
                      tags=["lease:until:%d" % (NOW + 60)]),
            "tags", "--lease-until")
        self.assertEqual(self.cfg.instances, {})

    def test_modify_moves_and_drops_the_lease(self):
        uuid = self.reserve(lease="+2h")
        result = self.ok({"OP_ID": "OP_INSTANCE_SET_PARAMS",
                          "instance_name": uuid, "lease_until": "+5h"})
        self.assertEqual(result, [["lease_until", leases.format_time(
            NOW + 5 * HOUR)]])
        self.assertEqual(self.lease_tags(uuid),
                         ["lease:until:%d" % (NOW + 5 * HOUR)])
        # shortened
        self.ok({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": uuid,
                 "lease_until": "+30m"})
        self.assertEqual(self.lease_tags(uuid),
                         ["lease:until:%d" % (NOW + 1800)])
        self.assertEqual(self.query(["lease_state"]),
                         {"inst1.example.com": ["expiring"]})
        # unlimited
        result = self.ok({"OP_ID": "OP_INSTANCE_SET_PARAMS",
                          "instance_name": uuid, "lease_until": "none"})
        self.assertEqual(result, [["lease_until", "none"]])
        self.assertEqual(self.lease_tags(uuid), [])
        # and a lease again on an unlimited one
        self.ok({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": uuid,
                 "lease_until": "+1d"})
        self.assertEqual(self.lease_tags(uuid),
                         ["lease:until:%d" % (NOW + 86400)])

    def test_modify_refusals_change_nothing(self):
        uuid = self.reserve(lease="+2h")
        self.assert_unchanged({"OP_ID": "OP_INSTANCE_SET_PARAMS",
                               "instance_name": uuid,
                               "lease_until": "2020-01-01T00:00:00Z"},
                              "lease_until", "in the past")
        self.assert_unchanged({"OP_ID": "OP_INSTANCE_SET_PARAMS",
                               "instance_name": uuid,
                               "lease_until": "later"},
                              "lease_until", "'later'")
        self.create("real.example.com")
        self.assert_unchanged({"OP_ID": "OP_INSTANCE_SET_PARAMS",
                               "instance_name": "real.example.com",
                               "lease_until": "+1h"},
                              "lease_until", "not forthcoming")

    def test_commit_drops_the_lease(self):
        uuid = self.reserve(lease="+2h", os_type="busybox+default",
                            nics=[{}])
        self.ok(create_op(commit=True, disks=[], nics=[]))
        inst = self.cfg.get_instance(uuid)
        self.assertFalse(inst.forthcoming)
        self.assertEqual(self.lease_tags(uuid), [])
        self.assertEqual(self.query(["lease_until", "lease_state"]),
                         {"inst1.example.com": [None, ""]})

    def test_commit_with_a_lease_refused(self):
        self.reserve(lease="+2h", os_type="busybox+default", nics=[{}])
        self.assert_unchanged(create_op(commit=True, disks=[], nics=[],
                                        lease_until="+3h"),
                              "lease_until", "committing drops the lease")


class TagRuleTests(LeaseTestCase):

    def tags_set(self, kind, name, tags):
        return {"OP_ID": "OP_TAGS_SET", "kind": kind, "name": name,
                "tags": tags}

    def test_instance_lease_tag_only_through_the_option(self):
        uuid = self.reserve(lease="+2h")
        self.assert_unchanged(
            self.tags_set("instance", uuid, ["lease:until:%d" % (NOW + 9)]),
            "tags", "lease:until:", "--lease-until")
        self.assert_unchanged(self.tags_set("node", "node1.example.com",
                                            ["lease:x"]),
                              "reserved for leases")
        # other tags are fine
        self.ok(self.tags_set("instance", uuid, ["team:web"]))
        # removing the lease tag makes the reservation unlimited
        self.ok({"OP_ID": "OP_TAGS_DEL", "kind": "instance", "name": uuid,
                 "tags": self.lease_tags(uuid)})
        self.assertEqual(self.query(["lease_until", "lease_state"]),
                         {"inst1.example.com": [None, ""]})

    def test_cluster_warning_window(self):
        self.assert_unchanged(self.tags_set("cluster", None,
                                            ["lease:warning:soon"]),
                              "tags", "whole seconds")
        self.ok(self.tags_set("cluster", None, ["lease:warning:600"]))
        self.assertEqual(leases.warning_window(self.cfg.cluster), 600)
        self.assert_unchanged(self.tags_set("cluster", None,
                                            ["lease:warning:60"]),
                              "more than one", "remove the old one")
        # the window moves the expiring state
        uuid = self.reserve(lease="+15m")
        self.assertEqual(self.query(["lease_state"]),
                         {"inst1.example.com": ["active"]})
        self.clock.advance(5 * 60 + 1)
        self.assertEqual(self.query(["lease_state"]),
                         {"inst1.example.com": ["expiring"]})
        self.assertTrue(uuid)


class RemovalGuardTests(LeaseTestCase):

    def removal(self, uuid):
        return {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": uuid,
                "expired_lease": True}

    def test_not_before_the_end(self):
        uuid = self.reserve(lease="+2h")
        self.assert_unchanged(self.removal(uuid), "expired_lease",
                              "now ends at")
        self.clock.advance(2 * HOUR)
        self.assertIsNone(self.ok(self.removal(uuid)))
        self.assertEqual(self.cfg.instances, {})
        self.assertIn("ended at %s" % leases.format_time(NOW + 2 * HOUR),
                      " ".join(self.log))

    def test_never_a_committed_instance(self):
        uuid = self.reserve(lease="+2h", os_type="busybox+default",
                            nics=[{}])
        self.ok(create_op(commit=True, disks=[], nics=[]))
        self.clock.advance(3 * HOUR)
        self.assert_unchanged(self.removal(uuid), "no longer forthcoming")
        self.assertIn(uuid, self.cfg.instances)

    def test_not_an_unlimited_one(self):
        uuid = self.reserve(lease=None)
        self.assert_unchanged(self.removal(uuid), "unlimited")


class FakeQueue(object):
    """Submits jobs by running their opcodes in the test's processor."""

    def __init__(self, case, fail=0):
        self.case = case
        self.jobs = []
        self.fail = fail

    def submit(self, ops):
        if self.fail:
            self.fail -= 1
            return defer.fail(errors.JobQueueDrainError("queue drained"))
        self.jobs.append(ops)
        return defer.succeed(len(self.jobs))

    def run_all(self):
        for ops in self.jobs:
            for op in ops:
                self.case.ok(op)


class KeeperTestCase(LeaseTestCase):

    def setUp(self):
        LeaseTestCase.setUp(self)
        self.queue = FakeQueue(self)
        self.logged = []
        globalLogPublisher.addObserver(self.logged.append)
        self.addCleanup(globalLogPublisher.removeObserver,
                        self.logged.append)
        self.keeper = None

    def tearDown(self):
        if self.keeper is not None:
            self.keeper.stop()
        LeaseTestCase.tearDown(self)

    def start(self):
        self.keeper = leases.LeaseKeeper(self.cfg, self.queue.submit,
                                         self.clock)
        self.keeper.start()
        return self.keeper

    def warnings(self):
        return [e for e in self.logged
                if "ends at" in e.get("log_format", "")
                and e.get("log_namespace") == "ganeti.leases"]


class KeeperTests(KeeperTestCase):

    def test_expiry_submits_the_removal_once(self):
        uuid = self.reserve(lease="+2h")
        keeper = self.start()
        self.clock.advance(0)
        self.assertEqual(self.queue.jobs, [])
        # armed for the warning window first, then for the end
        self.assertEqual(keeper.next_check, NOW + HOUR)
        self.clock.advance(2 * HOUR - 1)
        self.assertEqual(self.queue.jobs, [])
        self.clock.advance(1)
        self.assertEqual(len(self.queue.jobs), 1)
        (op,) = self.queue.jobs[0]
        self.assertEqual(op["OP_ID"], "OP_INSTANCE_REMOVE")
        self.assertEqual(op["instance_uuid"], uuid)
        self.assertTrue(op["expired_lease"])
        ((source, text, _ts),) = op["reason"]
        self.assertEqual(source, leases.REASON_SOURCE)
        self.assertIn("lease expired", text)
        # nothing more, however often the config changes or time passes
        self.ok({"OP_ID": "OP_TAGS_SET", "kind": "instance",
                 "name": uuid, "tags": ["x"]})
        self.clock.advance(10 * HOUR)
        self.assertEqual(len(self.queue.jobs), 1)
        self.assertIsNone(keeper.next_check)
        # the job releases the reservation: the memory is free again
        self.queue.run_all()
        self.assertEqual(self.cfg.instances, {})
        self.clock.advance(0)
        self.assertIsNone(keeper.next_check)

    def test_extension_moves_the_deadline(self):
        uuid = self.reserve(lease="+2h")
        keeper = self.start()
        self.clock.advance(90 * 60)
        self.assertEqual(len(self.warnings()), 1)
        self.ok({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": uuid,
                 "lease_until": "+4h"})
        self.clock.advance(0)
        end = NOW + 90 * 60 + 4 * HOUR
        self.assertEqual(keeper.next_check, end - HOUR)
        self.clock.advance(HOUR)   # past the old end
        self.assertEqual(self.queue.jobs, [])
        self.clock.advance(end - HOUR - self.clock.seconds())
        self.assertEqual(self.queue.jobs, [])
        self.clock.advance(HOUR)
        self.assertEqual(len(self.queue.jobs), 1)
        # the new end was warned about too
        self.assertEqual(len(self.warnings()), 2)

    def test_unlimited_and_shortened(self):
        uuid = self.reserve(lease="+2h")
        keeper = self.start()
        self.ok({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": uuid,
                 "lease_until": "none"})
        self.clock.advance(0)
        self.assertIsNone(keeper.next_check)
        self.clock.advance(5 * HOUR)
        self.assertEqual(self.queue.jobs, [])
        self.ok({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": uuid,
                 "lease_until": "+10s"})
        self.clock.advance(0)
        # already in its warning window: warned at once
        self.assertEqual(len(self.warnings()), 1)
        self.clock.advance(10)
        self.assertEqual(len(self.queue.jobs), 1)

    def test_warning_window(self):
        self.reserve(lease="+3h")
        self.start()
        self.clock.advance(2 * HOUR - 1)
        self.assertEqual(self.warnings(), [])
        self.assertEqual(self.query(["lease_state"]),
                         {"inst1.example.com": ["active"]})
        self.clock.advance(1)
        (warning,) = self.warnings()
        self.assertEqual(warning["name"], "inst1.example.com")
        self.assertEqual(warning["log_level"].name, "warn")
        self.assertEqual(self.query(["lease_state"]),
                         {"inst1.example.com": ["expiring"]})
        self.clock.advance(HOUR - 1)
        self.assertEqual(len(self.warnings()), 1)
        self.assertEqual(self.queue.jobs, [])

    def test_restart_with_an_expired_lease(self):
        uuid = self.reserve(lease="+2h")
        # no master ran while it ended
        self.clock.advance(3 * HOUR)
        self.assertEqual(self.query(["lease_state"]),
                         {"inst1.example.com": ["expired"]})
        self.start()
        self.assertEqual(len(self.queue.jobs), 1)
        self.assertEqual(self.queue.jobs[0][0]["instance_uuid"], uuid)
        self.queue.run_all()
        self.assertEqual(self.cfg.instances, {})

    def test_restart_with_the_removal_still_queued(self):
        uuid = self.reserve(lease="+2h")
        self.clock.advance(3 * HOUR)
        rows = [[4, "success", [leases.removal_op(
                    self.cfg.get_instance(uuid), NOW)]],
                [7, "queued", [leases.removal_op(
                    self.cfg.get_instance(uuid), NOW)]],
                [8, "queued", [{"OP_ID": "OP_INSTANCE_REMOVE",
                                "instance_name": "other"}]]]
        pending = leases.pending_removals(rows)
        self.assertEqual(pending, {uuid: 7})
        self.keeper = leases.LeaseKeeper(self.cfg, self.queue.submit,
                                         self.clock)
        self.keeper.start(pending)
        self.assertEqual(self.queue.jobs, [])
        self.assertEqual(self.keeper.jobs, {uuid: 7})

    def test_committed_instance_untouched(self):
        uuid = self.reserve(lease="+2h", os_type="busybox+default",
                            nics=[{}])
        keeper = self.start()
        self.ok(create_op(commit=True, disks=[], nics=[]))
        self.clock.advance(0)
        self.assertIsNone(keeper.next_check)
        self.clock.advance(10 * HOUR)
        self.assertEqual(self.queue.jobs, [])
        self.assertFalse(self.cfg.get_instance(uuid).forthcoming)

    def test_failed_submission_retried(self):
        self.reserve(lease="+2h")
        self.queue.fail = 1
        keeper = self.start()
        self.clock.advance(2 * HOUR)
        self.assertEqual(self.queue.jobs, [])
        self.assertEqual(keeper.next_check,
                         self.clock.seconds() + keeper.RETRY)
        self.clock.advance(keeper.RETRY)
        self.assertEqual(len(self.queue.jobs), 1)
        self.clock.advance(keeper.RETRY)
        self.assertEqual(len(self.queue.jobs), 1)

    def test_two_leases(self):
        first = self.reserve("a.example.com", lease="+1h")
        second = self.reserve("b.example.com", lease="+5h")
        self.start()
        self.clock.advance(HOUR)
        self.assertEqual([ops[0]["instance_uuid"]
                          for ops in self.queue.jobs], [first])
        self.clock.advance(4 * HOUR)
        self.assertEqual([ops[0]["instance_uuid"]
                          for ops in self.queue.jobs], [first, second])


class QueryCacheTests(KeeperTestCase):
    """lease_state follows the clock in the master's query cache: the
    lease keeper moves the cache's versions when a state changes."""

    def setUp(self):
        KeeperTestCase.setUp(self)
        from ganeti.query.cache import QueryCache
        self.cache = QueryCache(self.clock)

    def versioned(self, version=None):
        ctx = query.QueryContext(self.cfg, clock=self.clock,
                                 cache=self.cache)
        answer = self.successResultOf(ctx.query_versioned(
            "instance", ["name", "lease_state"], None, version))
        return answer.decode()

    def test_cached_answers_follow_the_lease(self):
        self.reserve(lease="+2h")
        self.keeper = leases.LeaseKeeper(self.cfg, self.queue.submit,
                                         self.clock,
                                         state_changed=self.cache.time_changed)
        self.keeper.start()
        first = self.versioned()
        self.assertIsNotNone(first["version"])
        self.assertEqual(first["data"],
                         [[[0, "inst1.example.com"], [0, "active"]]])
        self.assertEqual(self.versioned(first["version"]),
                         {"version": first["version"], "unchanged": True})
        self.clock.advance(HOUR)
        second = self.versioned(first["version"])
        self.assertNotEqual(second["version"], first["version"])
        self.assertEqual(second["data"],
                         [[[0, "inst1.example.com"], [0, "expiring"]]])
        self.clock.advance(HOUR)
        third = self.versioned(second["version"])
        self.assertEqual(third["data"],
                         [[[0, "inst1.example.com"], [0, "expired"]]])


class GanetiLoadsLeasesTests(LeaseTestCase):
    """config.data with leases stays loadable by Ganeti 3.0's tools."""

    _LOAD = r"""
import json, sys
from ganeti import objects
cd = objects.ConfigData.FromDict(json.load(open(sys.argv[1])))
cd.UpgradeConfig()
for obj in [cd.cluster] + list(cd.instances.values()):
    for tag in obj.GetTags():
        obj.ValidateTag(tag)
print(json.dumps({"instances": sorted([i.uuid, bool(i.forthcoming),
                                       sorted(i.GetTags())]
                                      for i in cd.instances.values()),
                  "cluster_tags": sorted(cd.cluster.GetTags())}))
"""

    def setUp(self):
        ganeti_peer.skip_unless_available()
        LeaseTestCase.setUp(self)

    def test_ganeti_loads_leases(self):
        uuid = self.reserve(lease="+2h")
        self.ok({"OP_ID": "OP_TAGS_SET", "kind": constants.TAG_CLUSTER,
                 "name": None, "tags": ["lease:warning:900"]})
        d = self.cfg.flushed().addCallback(
            lambda _: ganeti_peer.run_python(self._LOAD, [self.cfg.path]))

        def check(result):
            out, err, code = result
            self.assertEqual(code, 0, err)
            got = json.loads(out)
            self.assertEqual(got["instances"], [
                [uuid, True, ["lease:until:%d" % (NOW + 2 * HOUR)]]])
            self.assertEqual(got["cluster_tags"], ["lease:warning:900"])
        return d.addCallback(check)


class ObjectsTests(unittest.TestCase):

    def test_state(self):
        inst = objects.Instance(forthcoming=True,
                                tags={leases.tag(NOW + 100)})
        self.assertEqual(leases.state(inst, NOW, 50), "active")
        self.assertEqual(leases.state(inst, NOW + 50, 50), "expiring")
        self.assertEqual(leases.state(inst, NOW + 100, 50), "expired")
        inst.forthcoming = False
        self.assertEqual(leases.state(inst, NOW + 100, 50), "")
        self.assertIsNone(leases.lease_of(inst))


class LeaseEventTests(KeeperTestCase):

    def test_expiring_and_expired_events(self):
        from ganeti import events
        bus = events.EventBus(self.clock, first_seq=0)
        uuid = self.reserve(lease="+2h")
        self.keeper = leases.LeaseKeeper(self.cfg, self.queue.submit,
                                         self.clock, event_bus=bus)
        self.keeper.start()
        self.clock.advance(HOUR)
        (expiring,) = bus.backlog(-1)[0]
        self.assertEqual((expiring["kind"], expiring["type"], expiring["id"]),
                         ("lease", "expiring", uuid))
        self.assertEqual(expiring["name"], "inst1.example.com")
        self.assertEqual(expiring["data"]["until"], NOW + 2 * HOUR)
        self.clock.advance(HOUR)
        found = bus.backlog(-1)[0]
        self.assertEqual([e["type"] for e in found], ["expiring", "expired"])
        self.assertEqual(found[1]["data"]["job"], self.keeper.jobs[uuid])
        # once only, whatever happens later
        self.clock.advance(10 * HOUR)
        self.assertEqual(len(bus), 2)
        self.keeper.stop()
