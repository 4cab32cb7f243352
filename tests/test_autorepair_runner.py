"""Auto-repair passes over luxi: what is submitted, in which order, and
what is left alone (a fake master answering the luxi calls)."""

from twisted.internet import defer
from twisted.internet.testing import Clock
from twisted.trial import unittest

from ganeti import errors
from ganeti.watcher.autorepair import engine, runner, tags as T

P = T.PREFIX
NOW = 1_700_000_000.0


class FakeMaster:
    """Answers the luxi calls a pass makes; tag jobs change the tags at
    once, other jobs stay queued until ``finish`` is called."""

    def __init__(self):
        self.cluster_tags = []
        self.groups = {"g1": {"name": "default", "tags": [],
                              "ndparams": {"repair_max_parallel": 4,
                                           "repair_min_healthy": 0.5}}}
        self.nodes = {n: {"offline": False, "drained": False,
                          "powered": True, "ndparams": {},
                          "group.uuid": "g1"}
                      for n in ("n1", "n2", "n3")}
        self.instances = {}
        self.jobs = {}
        self.submitted = []
        #: tag jobs stay queued (as behind a repair holding the lock)
        self.hold_tags = False

    def add_instance(self, name, pnode="n1", snodes=("n2",), dt="drbd",
                     tags=()):
        self.instances[name] = {"disk_template": dt, "pnode": pnode,
                                "snodes": list(snodes), "admin_state": "up",
                                "tags": list(tags)}

    def finish(self, jid, status="success", opresult=None):
        self.jobs[jid].update(status=status, opresult=opresult or [],
                              end_ts=[int(NOW), 0])

    def call(self, method, *args):
        return defer.succeed(getattr(self, "_" + method)(*args))

    def _QueryClusterInfo(self):
        return {"tags": list(self.cluster_tags), "default_iallocator": None}

    def _Query(self, what, fields, qfilter):
        if what == "group":
            rows = [dict(uuid=u, **g) for u, g in self.groups.items()]
        elif what == "node":
            rows = [dict(name=n, **v) for n, v in self.nodes.items()]
        else:
            rows = [dict(name=n, **{"pnode.group.uuid": "g1"}, **v)
                    for n, v in self.instances.items()]
        return {"fields": fields,
                "data": [[[0, r[f]] for f in fields] for r in rows]}

    def _QueryJobs(self, ids, fields):
        if ids is None:
            ids = sorted(self.jobs)
        return [None if j not in self.jobs else
                [j if f == "id" else self.jobs[j].get(f) for f in fields]
                for j in ids]

    def _SubmitJob(self, ops):
        jid = len(self.submitted) + 100
        self.submitted.append((jid, ops))
        summary = ["%s(%s)" % (op["OP_ID"][3:], op.get("instance_name",
                                                        op.get("name")))
                   for op in ops]
        self.jobs[jid] = {"status": "queued", "summary": summary}
        if all(op["OP_ID"] in ("OP_TAGS_SET", "OP_TAGS_DEL") for op in ops) \
                and not self.hold_tags:
            for op in ops:
                if op["kind"] == "instance":
                    target = self.instances[op["name"]]["tags"]
                elif op["kind"] == "cluster":
                    target = self.cluster_tags
                else:
                    target = next(g["tags"] for g in self.groups.values()
                                  if g["name"] == op["name"])
                for tag in op["tags"]:
                    if op["OP_ID"] == "OP_TAGS_SET":
                        target.append(tag)
                    else:
                        target.remove(tag)
            self.finish(jid)
        return jid

    def repair_jobs(self):
        return [(jid, [op["OP_ID"] for op in ops])
                for jid, ops in self.submitted
                if ops[-1]["OP_ID"] not in ("OP_TAGS_SET", "OP_TAGS_DEL")]


class RunnerTests(unittest.TestCase):

    def setUp(self):
        self.master = FakeMaster()
        self.clock = Clock()
        self.now = [NOW]
        self.ar = runner.AutoRepair(self.master, self.clock,
                                    wallclock=lambda: self.now[0])

    def run_pass(self, **kw):
        for k, v in kw.items():
            setattr(self.ar, k, v)
        return self.successResultOf(defer.Deferred.fromCoroutine(
            self.ar.run_once()))

    def tags(self, name):
        return self.master.instances[name]["tags"]

    def test_a_failover_then_a_new_secondary_then_success(self):
        m = self.master
        m.add_instance("web1", tags=[P + "failover"])
        m.nodes["n1"]["offline"] = True
        self.run_pass()
        [(jid, ops)] = m.repair_jobs()
        self.assertEqual(ops, ["OP_INSTANCE_FAILOVER"])
        [op] = m.submitted[0][1]
        self.assertEqual(op["reason"][0][0], "gnt:watcher")
        self.assertIn("harep", op["comment"])
        [pending] = [t for t in self.tags("web1") if ":pending:" in t]
        self.assertTrue(pending.startswith(P + "pending:failover:"))
        self.assertTrue(pending.endswith(":%d:%d" % (NOW, jid)))
        # while the job runs nothing more happens
        before = len(m.submitted)
        self.run_pass()
        self.assertEqual(len(m.submitted), before)
        # the failover is done: the dead node is now the secondary
        m.finish(jid)
        m.instances["web1"].update(pnode="n2", snodes=["n1"])
        self.now[0] = NOW + 60
        self.run_pass()
        jid2, ops = m.repair_jobs()[-1]
        self.assertEqual(ops, ["OP_INSTANCE_REPLACE_DISKS"])
        self.assertEqual(m.submitted[-2][1][0]["iallocator"], "hail")
        [pending] = [t for t in self.tags("web1") if ":pending:" in t]
        self.assertTrue(pending.endswith(":%d:%d+%d" % (NOW, jid, jid2)))
        m.finish(jid2)
        m.instances["web1"].update(snodes=["n3"])
        self.run_pass()
        self.assertEqual([t for t in self.tags("web1") if ":pending:" in t],
                         [])
        [result] = [t for t in self.tags("web1") if ":result:" in t]
        self.assertIn(":success:%d+%d" % (jid, jid2), result)

    def test_waits_for_fencing_where_a_node_can_be_fenced(self):
        m = self.master
        m.add_instance("web1", tags=[P + "failover"])
        m.nodes["n1"].update(offline=True,
                             ndparams={"oob_program": "/etc/ganeti/oob/x"})
        decisions = self.run_pass()
        self.assertIn("not known to be powered off", decisions[0].message)
        self.assertEqual(m.submitted, [])
        m.nodes["n1"]["powered"] = False
        self.run_pass()
        [(_, ops)] = m.repair_jobs()
        self.assertEqual(ops, ["OP_INSTANCE_FAILOVER"])

    def test_repair_budget_per_node_group(self):
        m = self.master
        for i in range(3):
            m.add_instance("web%d" % i, tags=[P + "failover"])
        m.nodes["n1"]["offline"] = True
        self.run_pass(max_parallel=2)
        first = m.repair_jobs()
        self.assertEqual(len(first), 2)
        # the third waits while two run; their next steps may still go
        self.run_pass()
        self.assertEqual(len(m.repair_jobs()), 2)
        m.finish(first[0][0])
        repaired = next(n for n, v in m.instances.items()
                        if any(":%d" % first[0][0] in t for t in v["tags"]))
        m.instances[repaired].update(pnode="n2", snodes=["n3"])
        self.run_pass()
        self.assertEqual(len(m.repair_jobs()), 3)
        # 0: no limit
        m2 = FakeMaster()
        for i in range(5):
            m2.add_instance("db%d" % i, tags=[P + "failover"])
        m2.nodes["n1"]["offline"] = True
        ar = runner.AutoRepair(m2, self.clock, max_parallel=0,
                               wallclock=lambda: NOW)
        self.successResultOf(defer.Deferred.fromCoroutine(ar.run_once()))
        self.assertEqual(len(m2.repair_jobs()), 5)

    def test_the_groups_parameters_set_the_budget(self):
        m = self.master
        for i in range(3):
            m.add_instance("web%d" % i, tags=[P + "failover"])
        m.nodes["n1"]["offline"] = True
        m.groups["g1"]["ndparams"]["repair_max_parallel"] = 1
        self.run_pass()
        self.assertEqual(len(m.repair_jobs()), 1)
        self.run_pass()
        self.assertEqual(len(m.repair_jobs()), 1)
        # a group that lost more than repair_min_healthy allows starts
        # no new repair, whatever its budget
        m.groups["g1"]["ndparams"]["repair_max_parallel"] = 0
        m.nodes["n3"]["offline"] = True
        decisions = self.run_pass()
        self.assertEqual(len(m.repair_jobs()), 1)
        self.assertEqual(len(decisions), 3)
        m.groups["g1"]["ndparams"]["repair_min_healthy"] = 0.3
        self.run_pass()
        self.assertEqual(len(m.repair_jobs()), 3)

    def test_a_loop_pass_does_not_wait_for_its_tag_jobs(self):
        m = self.master
        m.hold_tags = True
        m.add_instance("web1", tags=[P + "failover"])
        m.nodes["n1"]["offline"] = True
        unconfirmed = {}
        seen = []

        def run():
            ar = runner.AutoRepair(m, self.clock, wait_tags=False,
                                   unconfirmed=unconfirmed,
                                   wallclock=lambda: NOW)
            ar.log = runner.Logger(observer=seen.append)
            return self.successResultOf(
                defer.Deferred.fromCoroutine(ar.run_once()))
        run()
        [(repair, _)] = m.repair_jobs()
        tag_job = repair + 1
        self.assertEqual(unconfirmed, {tag_job: ("instance", "web1")})
        # not recorded yet, but the repair job names the instance: left
        # alone, nothing submitted twice
        run()
        self.assertEqual(len(m.submitted), 2)
        m.finish(repair)
        m.finish(tag_job, "error")
        run()
        self.assertNotIn(tag_job, unconfirmed)
        from twisted.logger import formatEvent
        self.assertTrue(any("(job %d) ended error" % tag_job in
                            formatEvent(e) for e in seen))

    def test_failed_job_records_failure_and_stops(self):
        m = self.master
        m.add_instance("web1", tags=[P + "failover"])
        m.nodes["n1"]["offline"] = True
        self.run_pass()
        [(jid, _)] = m.repair_jobs()
        m.finish(jid, "error", [["OpExecError", ["could not start"]]])
        self.run_pass()
        self.assertTrue(any(":result:failover:" in t and ":failure:" in t
                            for t in self.tags("web1")))
        before = len(m.submitted)
        self.run_pass()
        self.run_pass()
        self.assertEqual(len(m.submitted), before)

    def test_lack_of_resources_is_retried_not_failed(self):
        m = self.master
        m.add_instance("web1", tags=[P + "fix-storage"], snodes=("n3",))
        m.nodes["n3"]["offline"] = True
        self.run_pass()
        [(jid, _)] = m.repair_jobs()
        m.finish(jid, "error", [["OpPrereqError", [
            "no node has room", errors.ECODE_NORES]]])
        self.run_pass()
        self.assertEqual(len(m.repair_jobs()), 1)
        self.assertFalse(any(":result:" in t for t in self.tags("web1")))
        self.now[0] = NOW + 400
        self.run_pass()
        self.assertEqual(len(m.repair_jobs()), 2)

    def test_instances_with_other_jobs_are_left_alone(self):
        m = self.master
        m.add_instance("web1", tags=[P + "failover"])
        m.nodes["n1"]["offline"] = True
        m.jobs[7] = {"status": "running",
                     "summary": ["INSTANCE_MIGRATE(web1)"]}
        decisions = self.run_pass()
        self.assertEqual(decisions[0].state, engine.PENDING)
        self.assertEqual(m.submitted, [])
        m.jobs[7]["status"] = "success"
        self.run_pass()
        self.assertEqual(len(m.repair_jobs()), 1)

    def test_dry_run_changes_nothing(self):
        m = self.master
        m.add_instance("web1", tags=[P + "failover"])
        m.nodes["n1"]["offline"] = True
        decisions = self.run_pass(dry_run=True)
        self.assertEqual(decisions[0].step.kind, "failover")
        self.assertEqual(m.submitted, [])
        self.assertEqual(self.tags("web1"), [P + "failover"])

    def test_job_delay_goes_first(self):
        m = self.master
        m.add_instance("web1", tags=[P + "failover"])
        m.nodes["n1"]["offline"] = True
        self.run_pass(job_delay=30)
        [(jid, ops)] = m.repair_jobs()
        self.assertEqual(ops, ["OP_TEST_DELAY", "OP_INSTANCE_FAILOVER"])
        self.assertEqual(m.submitted[0][1][0]["duration"], 30.0)

    def test_passed_suspensions_are_removed_everywhere(self):
        m = self.master
        old = P + "suspend:%d" % (NOW - 10)
        m.cluster_tags.append(old)
        m.groups["g1"]["tags"].append(old)
        m.add_instance("web1", tags=[P + "reinstall", old])
        self.run_pass()
        self.assertEqual(m.cluster_tags, [])
        self.assertEqual(m.groups["g1"]["tags"], [])
        self.assertEqual(self.tags("web1"), [P + "reinstall"])
        # a suspension still running stays
        m.cluster_tags.append(P + "suspend:%d" % (NOW + 100))
        self.run_pass()
        self.assertEqual(len(m.cluster_tags), 1)

    def test_malformed_tags_are_logged_and_ignored(self):
        m = self.master
        bad = P + "pending:failover:x:soon:"
        m.add_instance("web1", tags=[P + "failover", bad])
        m.nodes["n1"]["offline"] = True
        seen = []
        self.ar.log = runner.Logger(observer=seen.append)
        decisions = self.run_pass()
        self.assertEqual(decisions[0].malformed[0].tag, bad)
        self.assertTrue(any(e.get("tag") == bad for e in seen))
        # the bad tag is not a pending repair: a new one starts
        self.assertEqual(len(m.repair_jobs()), 1)
        self.assertIn(bad, self.tags("web1"))
