"""Auto-repair: the tags, their precedence, and the state machine from
every state on every transition."""

import itertools

from twisted.trial import unittest

from ganeti.watcher.autorepair import detect, engine, tags as T

P = T.PREFIX
NOW = 1_700_000_000.0


class TagTests(unittest.TestCase):

    def test_parse_each_kind(self):
        self.assertEqual(T.parse(P + "failover"), T.Allow("failover"))
        self.assertEqual(T.parse(P + "suspend").until, None)
        self.assertEqual(T.parse(P + "suspend:").until, None)
        self.assertEqual(T.parse(P + "suspend:1700000100").until,
                         1700000100.0)
        p = T.parse(P + "pending:failover:abc-1:1700000000:12+13")
        self.assertEqual(p, T.Pending("failover", "abc-1", 1700000000.0,
                                      (12, 13)))
        self.assertEqual(p.tag, P + "pending:failover:abc-1:1700000000:12+13")
        p = T.parse(P + "pending:reinstall:x:1700000000:")
        self.assertEqual(p.jobs, ())
        r = T.parse(P + "result:migrate:x:1700000000:enoperm:4")
        self.assertEqual(r, T.Result("migrate", "x", 1700000000.0,
                                     "enoperm", (4,)))
        self.assertEqual(r.tag, P + "result:migrate:x:1700000000:enoperm:4")
        self.assertIsNone(T.parse("ganeti:watcher:other"))
        self.assertIsNone(T.parse("web"))

    def test_malformed_tags_name_the_reason(self):
        cases = {
            "rebuild": "unknown auto-repair tag",
            "failover:now": "nothing after its type",
            "suspend:tomorrow": "not a unix time",
            "suspend:1:2": "suspend:<unix time>",
            "pending:failover:x:1700000000": "pending:<type>",
            "pending:explode:x:1700000000:": "unknown repair type",
            "pending:failover:x:1700000000:1+a": "not a job id",
            "pending:failover:x y:1700000000:": "repair id",
            "result:failover:x:1700000000:maybe:": "unknown result",
            "result:failover:x:1700000000:success": "result:<type>",
        }
        for rest, reason in cases.items():
            what = T.parse(P + rest)
            self.assertIsInstance(what, T.Malformed, rest)
            self.assertIn(reason, what.reason, rest)

    def test_least_destructive_within_an_object_nearest_across(self):
        # the example of the feature's documentation: I1 has failover,
        # the cluster both fix-storage and reinstall
        cluster = [P + "reinstall", P + "fix-storage"]
        pol, _ = T.policy(([P + "failover"], [], cluster), NOW)
        self.assertEqual((pol.state, pol.kind, pol.source),
                         (T.ENABLED, "failover", "instance"))
        pol, _ = T.policy(([], [], cluster), NOW)
        self.assertEqual((pol.kind, pol.source), ("fix-storage", "cluster"))
        pol, _ = T.policy(([], [P + "migrate", P + "reinstall"],
                           [P + "reinstall"]), NOW)
        self.assertEqual((pol.kind, pol.source), ("migrate", "group"))
        pol, _ = T.policy(([], [], []), NOW)
        self.assertEqual(pol.state, T.NOT_ENABLED)

    def test_suspension_precedence(self):
        future, later, past = NOW + 60, NOW + 600, NOW - 1
        sus = lambda ts=None: P + "suspend" + ("" if ts is None
                                               else ":%d" % ts)
        # permanent beats timed on one object; the latest timed counts
        pol, _ = T.policy(([sus(future), sus()], [], []), NOW)
        self.assertEqual((pol.state, pol.until), (T.SUSPENDED, None))
        pol, _ = T.policy(([sus(future), sus(later)], [], []), NOW)
        self.assertEqual(pol.until, later)
        # a passed suspension counts for nothing and is to be removed
        pol, expired = T.policy(([sus(past), P + "failover"], [],
                                 [sus(past - 5)]), NOW)
        self.assertEqual(pol.kind, "failover")
        self.assertEqual(expired, [("instance", sus(past)),
                                   ("cluster", sus(past - 5))])
        # nearest wins: a cluster suspension, re-enabled on an instance
        pol, _ = T.policy(([P + "fix-storage"], [], [sus()]), NOW)
        self.assertEqual(pol.state, T.ENABLED)
        # and a group suspension beats the cluster's permission
        pol, _ = T.policy(([], [sus(future)], [P + "reinstall"]), NOW)
        self.assertEqual((pol.state, pol.source), (T.SUSPENDED, "group"))


NODES = {"n1": detect.Node("n1"), "n2": detect.Node("n2"),
         "n3": detect.Node("n3"),
         "off": detect.Node("off", offline=True),
         "dr": detect.Node("dr", drained=True),
         # offline, with an out-of-band program, not known to be off
         "unfenced": detect.Node("unfenced", offline=True, fenced=False)}


def inst(tags=(), pnode="n1", snodes=("n2",), dt="drbd", up=True,
         group_tags=()):
    return detect.Instance("web1", dt, pnode, tuple(snodes), up,
                           tuple(tags), tuple(group_tags))


class EngineTests(unittest.TestCase):

    def decide(self, i, jobs=None, cluster=(), now=NOW, **kw):
        ids = ("r%d" % n for n in itertools.count(1))
        return engine.decide(i, NODES, list(cluster), jobs or {}, now,
                             lambda: next(ids), "hail", **kw)

    # -- what is broken, and how it is repaired ---------------------------

    def test_detection(self):
        cases = [
            (dict(), None),
            (dict(pnode="off"), ("failover", "OP_INSTANCE_FAILOVER")),
            (dict(snodes=("off",)), ("fix-storage",
                                     "OP_INSTANCE_REPLACE_DISKS")),
            (dict(snodes=("dr",)), ("fix-storage",
                                    "OP_INSTANCE_REPLACE_DISKS")),
            (dict(pnode="dr"), ("migrate", "OP_INSTANCE_MIGRATE")),
            (dict(pnode="dr", up=False), ("migrate", "OP_INSTANCE_FAILOVER")),
            (dict(pnode="off", snodes=("dr",)),
             ("reinstall", "OP_INSTANCE_SHUTDOWN")),
            (dict(dt="plain", snodes=(), pnode="off", up=False),
             ("reinstall", "OP_INSTANCE_RECREATE_DISKS")),
            # a plain instance on a drained node keeps running
            (dict(dt="plain", snodes=(), pnode="dr"), None),
            (dict(dt="sharedfile", snodes=(), pnode="off"),
             ("failover", "OP_INSTANCE_FAILOVER")),
            (dict(dt="sharedfile", snodes=(), pnode="dr"),
             ("migrate", "OP_INSTANCE_MIGRATE")),
            (dict(dt="diskless", snodes=(), pnode="off"), None),
        ]
        for kw, want in cases:
            step = detect.next_step(inst(**kw), NODES, "hail")
            got = None if step is None else (step.kind, step.ops[0]["OP_ID"])
            self.assertEqual(got, want, kw)
        # a reinstall marks the instance down (its node is not asked),
        # recreates its disks where the allocator says, and starts it
        # again if it was to run
        step = detect.next_step(inst(dt="plain", snodes=(), pnode="off"),
                                NODES, "hail")
        self.assertEqual([op["OP_ID"] for op in step.ops],
                         ["OP_INSTANCE_SHUTDOWN",
                          "OP_INSTANCE_RECREATE_DISKS",
                          "OP_INSTANCE_REINSTALL", "OP_INSTANCE_STARTUP"])
        self.assertTrue(step.ops[0]["ignore_offline_nodes"])
        self.assertEqual(step.ops[1]["iallocator"], "hail")

    # -- healthy ----------------------------------------------------------

    def test_healthy_stays_healthy(self):
        d = self.decide(inst([P + "reinstall"]))
        self.assertEqual(d.state, engine.HEALTHY)
        self.assertEqual((d.add_tags, d.remove_tags, d.step), ((), (), None))

    def test_healthy_closes_pending_tags_with_success(self):
        old = T.Pending("failover", "a", NOW - 100, (5,))
        ext = T.Pending("reinstall", "b", NOW - 50, ())
        d = self.decide(inst([ext.tag, old.tag]),
                        jobs={5: engine.Job("success")})
        self.assertEqual(d.state, engine.HEALTHY)
        self.assertEqual(set(d.remove_tags), {old.tag, ext.tag})
        self.assertEqual(set(d.add_tags), {
            P + "result:failover:a:%d:success:5" % NOW,
            P + "result:reinstall:b:%d:success:" % NOW})

    # -- needs repair -----------------------------------------------------

    def test_not_enabled_does_nothing(self):
        d = self.decide(inst(pnode="off"))
        self.assertEqual(d.state, engine.NEEDS_REPAIR)
        self.assertIn("not enabled", d.message)
        self.assertEqual((d.add_tags, d.step), ((), None))

    def test_allowed_repair_starts_pending(self):
        d = self.decide(inst([P + "failover"], pnode="off"))
        self.assertEqual(d.state, engine.PENDING)
        self.assertEqual(d.step.kind, "failover")
        self.assertEqual(d.pending, T.Pending("failover", "r1", NOW, ()))
        self.assertIsNone(d.replaces)
        # the nearest permission counts: the group allows it here
        d = self.decide(inst(pnode="off", group_tags=[P + "reinstall"]),
                        cluster=[P + "fix-storage"])
        self.assertEqual(d.pending.kind, "reinstall")

    def test_too_weak_permission_records_enoperm_once(self):
        d = self.decide(inst([P + "fix-storage"], pnode="off"))
        self.assertEqual(d.state, engine.NEEDS_REPAIR)
        self.assertIsNone(d.step)
        self.assertEqual(d.add_tags,
                         (P + "result:fix-storage:r1:%d:enoperm:" % NOW,))
        again = self.decide(inst([P + "fix-storage"] + list(d.add_tags),
                                 pnode="off"), now=NOW + 60)
        self.assertEqual(again.state, engine.NEEDS_REPAIR)
        self.assertEqual(again.add_tags, ())

    def test_suspended_starts_nothing(self):
        d = self.decide(inst([P + "reinstall", P + "suspend"], pnode="off"))
        self.assertEqual(d.state, engine.SUSPENDED)
        self.assertIsNone(d.step)
        # a passed suspension is removed and the repair starts
        tag = P + "suspend:%d" % (NOW - 1)
        d = self.decide(inst([P + "reinstall", tag], pnode="off"))
        self.assertEqual(d.state, engine.PENDING)
        self.assertEqual(d.remove_tags, (tag,))
        # outer ones are handed to the runner
        d = self.decide(inst([P + "reinstall"], pnode="off"),
                        cluster=[tag])
        self.assertEqual(d.expired, (("cluster", tag),))

    # -- pending ----------------------------------------------------------

    def test_pending_waits_for_its_jobs(self):
        cur = T.Pending("failover", "a", NOW - 10, (7,))
        for status in ("queued", "waiting", "running", "canceling"):
            d = self.decide(inst([cur.tag], pnode="off"),
                            jobs={7: engine.Job(status)})
            self.assertEqual(d.state, engine.PENDING, status)
            self.assertIsNone(d.step)
            self.assertEqual((d.add_tags, d.remove_tags), ((), ()))

    def test_pending_submits_the_next_step(self):
        # the failover succeeded; the secondary is now the dead node
        cur = T.Pending("failover", "a", NOW - 10, (7,))
        d = self.decide(inst([cur.tag], pnode="n2", snodes=("off",)),
                        jobs={7: engine.Job("success")})
        self.assertEqual(d.state, engine.PENDING)
        self.assertEqual(d.step.kind, "fix-storage")
        self.assertEqual((d.pending, d.replaces), (cur, cur.tag))
        self.assertEqual(cur.with_jobs([9]).tag,
                         P + "pending:failover:a:%d:7+9" % (NOW - 10))

    def test_external_pending_tag_without_jobs_is_honoured(self):
        cur = T.Pending("reinstall", "ext", NOW - 10, ())
        d = self.decide(inst([cur.tag], dt="plain", snodes=(), pnode="off"))
        self.assertEqual(d.step.kind, "reinstall")
        # the pending tag's own type is the permission: no policy tag here
        self.assertEqual(d.policy.state, T.NOT_ENABLED)

    def test_pending_tags_are_taken_oldest_first(self):
        new = T.Pending("reinstall", "new", NOW - 5, ())
        old = T.Pending("fix-storage", "old", NOW - 50, ())
        d = self.decide(inst([new.tag, old.tag], pnode="off"))
        # the oldest allows too little: it ends with enoperm
        self.assertEqual(d.state, engine.NEEDS_REPAIR)
        self.assertEqual(d.remove_tags, (old.tag,))
        self.assertEqual(d.add_tags,
                         (P + "result:fix-storage:old:%d:enoperm:" % NOW,))
        # the next pass takes the newer one
        d = self.decide(inst([new.tag] + list(d.add_tags), pnode="off"))
        self.assertEqual(d.state, engine.PENDING)
        self.assertEqual(d.pending, new)

    def test_failed_job_fails_the_repair(self):
        cur = T.Pending("failover", "a", NOW - 10, (7,))
        for status in ("error", "canceled"):
            d = self.decide(inst([cur.tag], pnode="off"),
                            jobs={7: engine.Job(status)})
            self.assertEqual(d.state, engine.FAILED, status)
            self.assertEqual(d.remove_tags, (cur.tag,))
            self.assertEqual(d.add_tags, (
                P + "result:failover:a:%d:failure:7" % NOW,))

    def test_lack_of_resources_is_retried_later(self):
        cur = T.Pending("failover", "a", NOW - 100, (7,))
        job = engine.Job("error", nores=True, end=NOW - 30)
        d = self.decide(inst([cur.tag], snodes=("off",)), jobs={7: job})
        self.assertEqual(d.state, engine.PENDING)
        self.assertIsNone(d.step)
        self.assertIn("waits for resources", d.message)
        d = self.decide(inst([cur.tag], snodes=("off",)), jobs={7: job},
                        now=NOW + 300)
        self.assertEqual(d.step.kind, "fix-storage")
        self.assertEqual(d.replaces, cur.tag)

    def test_archived_jobs_count_as_done(self):
        cur = T.Pending("failover", "a", NOW - 10, (7,))
        d = self.decide(inst([cur.tag]), jobs={})
        self.assertEqual(d.state, engine.HEALTHY)

    # -- fencing ----------------------------------------------------------

    def test_no_instance_starts_elsewhere_before_its_node_is_fenced(self):
        for kw in (dict(pnode="unfenced"),
                   dict(dt="plain", snodes=(), pnode="unfenced"),
                   dict(dt="sharedfile", snodes=(), pnode="unfenced")):
            d = self.decide(inst([P + "reinstall"], **kw))
            self.assertEqual(d.state, engine.NEEDS_REPAIR, kw)
            self.assertIsNone(d.step)
            self.assertIn("not known to be powered off", d.message)
            self.assertEqual((d.add_tags, d.remove_tags), ((), ()))
        # a pending repair waits too, without failing
        cur = T.Pending("failover", "a", NOW - 10, ())
        d = self.decide(inst([cur.tag], pnode="unfenced"))
        self.assertEqual(d.state, engine.PENDING)
        self.assertIsNone(d.step)
        self.assertIn("waits", d.message)
        # an unfenced secondary is no danger: the mirror moves
        d = self.decide(inst([P + "fix-storage"], snodes=("unfenced",)))
        self.assertEqual(d.step.kind, "fix-storage")

    # -- failed -----------------------------------------------------------

    def test_failed_repair_blocks_until_the_tag_is_removed(self):
        res = T.Result("failover", "a", NOW - 10, "failure", (7,))
        d = self.decide(inst([P + "reinstall", res.tag], pnode="off"))
        self.assertEqual(d.state, engine.FAILED)
        self.assertIsNone(d.step)
        self.assertIn(res.tag, d.message)
        # a success or enoperm result does not block
        ok = T.Result("failover", "a", NOW - 10, "success", (7,))
        d = self.decide(inst([P + "reinstall", ok.tag], pnode="off"))
        self.assertEqual(d.state, engine.PENDING)

    def test_malformed_tags_are_reported_not_acted_on(self):
        bad = P + "pending:failover:a:yesterday:"
        d = self.decide(inst([bad], pnode="off"))
        self.assertEqual(d.state, engine.NEEDS_REPAIR)
        self.assertEqual([m.tag for m in d.malformed], [bad])
        self.assertEqual((d.add_tags, d.remove_tags, d.step), ((), (), None))
