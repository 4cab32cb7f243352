"""The watcher's pass on a fake clock against a fake master (luxi client).

The fake master answers the queries the watcher makes from a table of
instances, nodes, jobs and locks, records the jobs submitted and lets the
test say how they end.  Every decision of a pass is checked: restarts and
their limit, user shutdowns, kept domains, disks after node reboots, the
pause, instances other jobs work on, old jobs archived, a corrupt state
file.
"""

import json
import os

from twisted.internet import defer

from ganeti import errors
from ganeti import luxi
from ganeti import pathutils
from ganeti import qlang
from ganeti.watcher import pause as wpause
from ganeti.watcher import service as wservice
from ganeti.watcher import state as wstate
from ganeti.watcher import watcher as wwatcher

from tests.fakes import ClockTestCase

G1 = "8f2b6c1e-0000-4000-8000-000000000001"
G2 = "8f2b6c1e-0000-4000-8000-000000000002"
START = 1700000000.0


def _cell(value):
    return [0, value] if value is not None else [3, None]


def _matches(row, qfilter):
    if qfilter is None:
        return True
    op = qfilter[0]
    if op == qlang.OP_OR:
        return any(_matches(row, sub) for sub in qfilter[1:])
    if op in (qlang.OP_EQUAL, qlang.OP_EQUAL_LEGACY):
        return row.get(qfilter[1]) == qfilter[2]
    raise AssertionError("the fake master does not know filter %r"
                         % (qfilter,))


class FakeMaster(object):
    """The luxi client the watcher is given: a cluster in tables."""

    def __init__(self):
        self.groups = [{"name": "default", "uuid": G1}]
        self.nodes = {}
        self.instances = {}
        self.jobs = []          # unfinished jobs: {"id", "status", "ops"}
        self.locks = []         # {"name", "mode", "pending"}
        self.submitted = []     # (job id, [ops])
        self.outcome = {}       # job id -> (status, opresult)
        self.calls = []
        self.master = True
        self.refuse = None      # message: SubmitManyJobs refuses every job
        self.archive_answer = [0, 0]
        self.next_id = 100
        self.fresh = True       # serves QueryFresh

    def add_node(self, name, group=G1, bootid="boot-1", offline=False):
        self.nodes[name] = {"name": name, "uuid": "uuid-" + name,
                            "bootid": bootid, "offline": offline,
                            "group.uuid": group}

    def add_instance(self, name, status="running", admin_state="up",
                     source="admin", pnode="node1", snodes=(),
                     disks_active=True, hvstate="running", group=G1):
        self.instances[name] = {
            "name": name, "uuid": "uuid-" + name, "status": status,
            "admin_state": admin_state, "admin_state_source": source,
            "disks_active": disks_active, "pnode": pnode,
            "snodes": list(snodes), "oper_hvstate": hvstate,
            "pnode.group.uuid": group}

    def set(self, name, **fields):
        renamed = {"hvstate": "oper_hvstate", "source": "admin_state_source"}
        self.instances[name].update((renamed.get(k, k), v)
                                    for k, v in fields.items())

    # -- luxi -------------------------------------------------------------

    def query_config_values(self, fields):
        self.calls.append("QueryConfigValues")
        if not self.master:
            return defer.fail(luxi.NoMasterError("no master socket"))
        return defer.succeed(["node1" if f == "master_node" else None
                              for f in fields])

    def query(self, what, fields, qfilter=None):
        self.calls.append("Query:%s" % what)
        table = {"group": self.groups, "node": list(self.nodes.values()),
                 "instance": list(self.instances.values()),
                 "job": self.jobs, "lock": self.locks}[what]
        data = [[_cell(row.get(f)) for f in fields]
                for row in table if _matches(row, qfilter)]
        return defer.succeed({"fields": [{"name": f} for f in fields],
                              "data": data})

    def query_fresh(self, what, fields, qfilter=None):
        if not self.fresh:
            return defer.fail(errors.LuxiError(
                "QueryFresh is not supported by this master"))
        self.calls.append("QueryFresh:%s" % what)
        return self.query(what, fields, qfilter)

    def auto_archive_jobs(self, age, timeout=None):
        self.calls.append("AutoArchiveJobs:%s" % age)
        return defer.succeed(list(self.archive_answer))

    def submit_many_jobs(self, jobs):
        self.calls.append("SubmitManyJobs")
        if self.refuse:
            return defer.fail(errors.JobQueueDrainError(self.refuse))
        result = []
        for ops in jobs:
            self.next_id += 1
            self.submitted.append((self.next_id, ops))
            result.append([True, self.next_id])
        return defer.succeed(result)

    def archive_job(self, job_id):
        self.calls.append("ArchiveJob:%s" % job_id)
        return defer.succeed(True)

    def query_jobs(self, ids, fields):
        self.calls.append("QueryJobs")
        rows = []
        for job_id in ids:
            status, result = self.outcome.get(job_id, ("success", [None]))
            rows.append([status, result])
        return defer.succeed(rows)

    # -- what the test looks at ---------------------------------------------

    def ops(self, op_id=None):
        found = []
        for _, ops in self.submitted:
            found.extend(op for op in ops
                         if op_id is None or op["OP_ID"] == op_id)
        return found

    def targets(self, op_id):
        return sorted(op["instance_name"] for op in self.ops(op_id))


class FakeProbes(object):

    def __init__(self, problems=None):
        self.problems = problems or {}
        self.asked = []

    def check(self, master):
        self.asked.append(master)
        daemons = ["ganeti-noded"] + (["ganeti-rapi", "ganeti-confd"]
                                      if master else [])
        return defer.succeed([(d, self.problems.get(d)) for d in daemons])


class WatcherTestCase(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.clock.advance(START)
        self.root = os.path.abspath(self.mktemp())
        self.paths = pathutils.Paths(self.root)
        self.paths.ensure_dirs()
        self.master = FakeMaster()
        self.master.add_node("node1")
        self.master.add_node("node2")
        self.probes = FakeProbes()
        self.ignore_pause = False
        self.job_wait = 0
        # VerifyDisksTests turn it on: the others count the jobs of their
        # own checks
        self.verify_disks = False

    def watcher(self):
        return wwatcher.Watcher(self.master, self.paths, self.clock,
                                probes=self.probes, job_wait=self.job_wait,
                                ignore_pause=self.ignore_pause,
                                time_ns=lambda: 42,
                                verify_disks=self.verify_disks)

    def run_pass(self, advance=300):
        """One pass, ``advance`` seconds after the previous one."""
        self.clock.advance(advance)
        self.master.submitted = []
        report = self.successResultOf(self.watcher().run_pass())
        self.assertFalse(report.failed, report.messages)
        return report

    def notes(self, group=G1):
        return wstate.WatcherState.load(wstate.state_path(self.paths, group))

    def settle_boot_ids(self):
        """A first pass that records the nodes' boot ids (and activates the
        disks a first pass activates); the next pass starts clean."""
        self.run_pass()


class RestartTests(WatcherTestCase):

    def setUp(self):
        WatcherTestCase.setUp(self)
        self.master.add_instance("web1", status="ERROR_down",
                                 disks_active=False, hvstate=None)
        self.settle_boot_ids()

    def test_an_instance_that_should_run_is_started(self):
        report = self.run_pass()
        (op,) = self.master.ops()
        self.assertEqual(op["OP_ID"], "OP_INSTANCE_STARTUP")
        self.assertEqual((op["instance_name"], op["instance_uuid"]),
                         ("web1", "uuid-web1"))
        self.assertEqual(op["reason"],
                         [["gnt:watcher", "Restarting instance web1", 42]])
        self.assertIn("Restarting instance web1 (attempt #2)",
                      report.texts("info"))
        self.assertEqual(self.notes().restart_count("web1"), 2)

    def test_the_nodes_state_is_asked_now(self):
        # live data of the last seconds, not the master's cached view
        self.run_pass()
        self.assertIn("QueryFresh:instance", self.master.calls)
        self.assertIn("QueryFresh:node", self.master.calls)
        # a master without QueryFresh answers Query
        self.master.fresh = False
        self.master.calls[:] = []
        self.master.set("web1", status="ERROR_down")
        self.run_pass()
        self.assertNotIn("QueryFresh:instance", self.master.calls)
        self.assertIn("Query:instance", self.master.calls)
        self.assertEqual(self.master.targets("OP_INSTANCE_STARTUP"),
                         ["web1"])

    def test_gives_up_after_five_attempts_and_says_so(self):
        # the settling pass was attempt 1
        for attempt in range(2, 6):
            self.run_pass()
            self.assertEqual(self.master.targets("OP_INSTANCE_STARTUP"),
                             ["web1"], attempt)
        self.assertEqual(self.notes().restart_count("web1"), 5)
        report = self.run_pass()
        self.assertEqual(self.master.ops(), [])
        self.assertIn("Could not restart instance web1 after 5 attempts,"
                      " giving up", report.texts("error"))
        gave_up_at = self.clock.seconds()
        self.assertEqual(self.notes().gave_up("web1"), gave_up_at)
        # what gnt-instance info reads on the master
        record = wstate.read_instance_record(self.paths, G1, "web1")
        self.assertEqual((record["restart_count"], record["restart_gave_up"]),
                         (5, gave_up_at))
        report = self.run_pass()
        self.assertEqual(self.master.ops(), [])
        self.assertIn("Not restarting instance web1: gave up after 5"
                      " attempts", report.texts("warn"))
        self.assertEqual(report.texts("error"), [])

    def test_counter_reset_once_the_instance_runs_again(self):
        self.run_pass()
        self.master.set("web1", status="running", hvstate="running")
        report = self.run_pass()
        self.assertEqual(self.master.ops(), [])
        self.assertIn("Instance web1 runs again; its restart counter is"
                      " reset", report.texts("info"))
        self.assertEqual(self.notes().instance_record("web1"), {})
        self.master.set("web1", status="ERROR_down", hvstate=None)
        report = self.run_pass()
        self.assertIn("Restarting instance web1 (attempt #1)",
                      report.texts("info"))

    def test_given_up_instance_is_tried_again_after_the_record_expires(self):
        for _ in range(5):
            self.run_pass()
        self.assertIsNotNone(self.notes().gave_up("web1"))
        self.run_pass(advance=wstate.RETRY_EXPIRATION - 600)
        self.assertEqual(self.master.ops(), [])
        report = self.run_pass(advance=601)
        self.assertEqual(self.master.targets("OP_INSTANCE_STARTUP"),
                         ["web1"])
        self.assertIn("Restarting instance web1 (attempt #1)",
                      report.texts("info"))

    def test_an_admin_shutdown_forgets_the_counter(self):
        self.master.set("web1", status="ADMIN_down", admin_state="down")
        self.run_pass()
        self.assertEqual(self.master.ops(), [])
        self.assertEqual(self.notes().instance_record("web1"), {})

    def test_node_down_keeps_the_counter_and_does_nothing(self):
        self.master.set("web1", status="ERROR_nodedown")
        self.run_pass()
        self.assertEqual(self.master.ops(), [])
        self.assertEqual(self.notes().restart_count("web1"), 1)

    def test_a_refused_submission_is_no_attempt(self):
        self.master.refuse = "The job queue is drained"
        report = self.run_pass()
        self.assertTrue(any("Submitting the restart job of instance web1"
                            " failed" in t and "drained" in t
                            for t in report.texts("error")), report.messages)
        self.assertEqual(self.notes().restart_count("web1"), 1)

    def test_waits_for_its_jobs_and_logs_how_they_ended(self):
        self.job_wait = 30
        self.master.outcome[102] = ("queued", None)
        self.clock.advance(300)
        d = self.watcher().run_pass()
        self.assertNoResult(d)          # job 102 is not done yet ...
        self.master.outcome[102] = ("running", None)
        self.clock.advance(1)
        self.assertNoResult(d)
        self.master.outcome[102] = ("error", [["OpExecError",
                                               ["qemu died", "x"]]])
        self.clock.advance(1)
        report = self.successResultOf(d)
        (action,) = report.jobs("restart")
        self.assertEqual((action.job_id, action.status), (102, "error"))
        self.assertIn("Job 102 (restart of web1) ended error: qemu died",
                      report.texts("warn"))

    def test_stops_waiting_after_job_wait(self):
        self.job_wait = 5
        self.master.outcome[102] = ("running", None)
        self.clock.advance(300)
        d = self.watcher().run_pass()
        self.clock.pump([1] * 4)
        self.assertNoResult(d)
        self.clock.advance(1)
        report = self.successResultOf(d)
        self.assertIn("Not waiting longer for job(s) 102; they go on without"
                      " the watcher", report.texts("info"))


class UserShutdownTests(WatcherTestCase):

    def setUp(self):
        WatcherTestCase.setUp(self)
        self.settle_boot_ids()

    def test_user_down_while_up_is_recorded_as_a_user_shutdown(self):
        self.master.add_instance("db1", status="USER_down",
                                 hvstate="shutdown")
        report = self.run_pass()
        (op,) = self.master.ops()
        self.assertEqual(op["OP_ID"], "OP_INSTANCE_SHUTDOWN")
        self.assertEqual(op["admin_state_source"], "user")
        self.assertNotIn("no_remember", op)
        self.assertEqual(op["reason"][0][0], "gnt:watcher")
        self.assertIn("Instance db1 was shut down by its user; recording it"
                      " as down (attempt #1)", report.texts("info"))
        # once recorded (the LU marks it down, source user), nothing more
        self.master.set("db1", admin_state="down", source="user",
                        hvstate=None)
        self.run_pass()
        self.assertEqual(self.master.ops(), [])
        self.assertEqual(self.notes().instance_record("db1"), {})

    def test_recording_gives_up_after_five_failed_attempts(self):
        self.master.add_instance("db1", status="USER_down",
                                 hvstate="shutdown")
        for _ in range(5):
            self.run_pass()
            self.assertEqual(len(self.master.ops()), 1)
        report = self.run_pass()
        self.assertEqual(self.master.ops(), [])
        self.assertTrue(any("Not cleaning up instance db1" in t
                            for t in report.texts("warn")), report.messages)

    def test_kept_domain_of_an_instance_that_should_not_run(self):
        self.master.add_instance("old1", status="ADMIN_down",
                                 admin_state="down", hvstate="shutdown")
        self.master.add_instance("crashed1", status="ADMIN_down",
                                 admin_state="down", hvstate="crashed")
        self.master.add_instance("clean1", status="ADMIN_down",
                                 admin_state="down", hvstate=None)
        self.master.add_instance("off1", status="ADMIN_offline",
                                 admin_state="offline", hvstate="shutdown")
        report = self.run_pass()
        (op,) = self.master.ops()
        self.assertEqual((op["OP_ID"], op["instance_name"],
                          op["admin_state_source"], op["no_remember"]),
                         ("OP_INSTANCE_SHUTDOWN", "old1", "user", True))
        self.assertIn("Instance old1 is ADMIN_down but its domain is kept"
                      " (shutdown); cleaning it up (attempt #1)",
                      report.texts("info"))

    def test_error_down_after_a_poweroff_is_restarted(self):
        # user shutdown not allowed for it: the poweroff is a failure
        self.master.add_instance("web2", status="ERROR_down",
                                 hvstate="shutdown")
        self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_STARTUP"),
                         ["web2"])

    def test_offline_primary_is_left_alone(self):
        self.master.add_instance("db1", status="ERROR_nodeoffline",
                                 hvstate=None)
        self.master.add_instance("db2", status="ERROR_nodedown",
                                 admin_state="down", hvstate="shutdown")
        self.run_pass()
        self.assertEqual(self.master.ops(), [])


class BusyTests(WatcherTestCase):
    """Instances other jobs or locks hold are left for the next pass."""

    def setUp(self):
        WatcherTestCase.setUp(self)
        for name in ("a", "b", "c", "d"):
            self.master.add_instance(name, status="ERROR_down",
                                     hvstate=None, disks_active=False,
                                     pnode="node1" if name != "d"
                                     else "node2")
        self.master.add_instance("u", status="USER_down",
                                 hvstate="shutdown", pnode="node1")

    def test_unfinished_jobs_and_locks(self):
        self.master.jobs = [
            {"id": 7, "status": "running", "ops": [
                {"OP_ID": "OP_INSTANCE_REBOOT", "instance_name": "a"}]},
            {"id": 8, "status": "queued", "ops": [
                {"OP_ID": "OP_INSTANCE_MULTI_ALLOC",
                 "instances": [{"instance_name": "x"}]},
                {"OP_ID": "OP_TAGS_SET", "kind": "instance", "name": "q"}]},
            {"id": 9, "status": "waiting", "ops": [
                {"OP_ID": "OP_NODE_EVACUATE", "node_name": "node2"}]},
        ]
        self.master.locks = [
            {"name": "instance/uuid-b", "mode": "exclusive",
             "pending": None},
            {"name": "instance/uuid-c", "mode": None, "pending": None},
            {"name": "instance/uuid-u", "mode": None,
             "pending": [["exclusive", ["job 10"]]]},
        ]
        report = self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_STARTUP"), ["c"])
        self.assertEqual(self.master.targets("OP_INSTANCE_SHUTDOWN"), [])
        infos = report.texts("info")
        self.assertIn("Leaving instance a (ERROR_down) alone in this pass:"
                      " an unfinished job or a lock holds it", infos)
        self.assertIn("Leaving instance d (ERROR_down) alone in this pass:"
                      " an unfinished job works on its node node2", infos)
        self.assertIn("Leaving instance u (USER_down) alone in this pass:"
                      " an unfinished job or a lock holds it", infos)
        # nothing was counted for the instances left alone
        notes = self.notes()
        self.assertEqual([notes.restart_count(n) for n in "abcd"],
                         [0, 0, 1, 0])
        # only unfinished jobs were asked for
        self.assertEqual(wwatcher.busy_from_jobs(self.master.jobs),
                         ({"a", "x"}, set(), {"node2"}))

    def test_the_job_filter_asks_for_unfinished_jobs_only(self):
        seen = []
        query = self.master.query

        def spy(what, fields, qfilter=None):
            if what == "job":
                seen.append(qfilter)
            return query(what, fields, qfilter)
        self.master.query = spy
        self.run_pass()
        (qfilter,) = seen
        self.assertEqual(qfilter[0], "|")
        self.assertEqual(sorted(sub[2] for sub in qfilter[1:]),
                         ["canceling", "queued", "running", "waiting"])


class RebootTests(WatcherTestCase):

    def setUp(self):
        WatcherTestCase.setUp(self)
        self.master.add_instance("drbd1", pnode="node1", snodes=["node2"])
        self.master.add_instance("plain2", pnode="node2")
        self.master.add_instance("idle", pnode="node2", status="ADMIN_down",
                                 admin_state="down", disks_active=False,
                                 hvstate=None)

    def test_first_pass_treats_every_node_as_rebooted(self):
        self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_ACTIVATE_DISKS"),
                         ["drbd1", "plain2"])
        notes = self.notes()
        self.assertEqual((notes.boot_id("node1"), notes.boot_id("node2")),
                         ("boot-1", "boot-1"))
        self.run_pass()
        self.assertEqual(self.master.ops(), [])

    def test_a_rebooted_node_gets_its_instances_disks_activated(self):
        self.run_pass()
        self.master.nodes["node2"]["bootid"] = "boot-2"
        report = self.run_pass()
        ops = self.master.ops()
        self.assertEqual(sorted(op["instance_name"] for op in ops),
                         ["drbd1", "plain2"])
        self.assertTrue(all(op["OP_ID"] == "OP_INSTANCE_ACTIVATE_DISKS"
                            and op["reason"][0][0] == "gnt:watcher"
                            for op in ops))
        self.assertIn("Node node2 rebooted (boot id boot-1 -> boot-2)",
                      report.texts("info"))
        self.assertEqual(self.notes().boot_id("node2"), "boot-2")

    def test_restarted_instances_need_no_activation(self):
        self.run_pass()
        self.master.set("plain2", status="ERROR_down", hvstate=None)
        self.master.nodes["node2"]["bootid"] = "boot-2"
        self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_STARTUP"),
                         ["plain2"])
        self.assertEqual(self.master.targets("OP_INSTANCE_ACTIVATE_DISKS"),
                         ["drbd1"])

    def test_busy_instance_keeps_the_reboot_pending(self):
        self.run_pass()
        self.master.nodes["node2"]["bootid"] = "boot-2"
        self.master.jobs = [{"id": 3, "status": "running", "ops": [
            {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "drbd1"}]}]
        self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_ACTIVATE_DISKS"),
                         ["plain2"])
        self.assertEqual(self.notes().boot_id("node2"), "boot-1")
        self.master.jobs = []
        self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_ACTIVATE_DISKS"),
                         ["drbd1", "plain2"])
        self.assertEqual(self.notes().boot_id("node2"), "boot-2")

    def test_offline_or_silent_nodes_are_skipped(self):
        self.run_pass()
        self.master.nodes["node2"].update(bootid=None)
        self.master.nodes["node1"].update(bootid="boot-9", offline=True)
        self.run_pass()
        self.assertEqual(self.master.ops(), [])


class VerifyDisksTests(WatcherTestCase):

    def setUp(self):
        WatcherTestCase.setUp(self)
        self.verify_disks = True
        self.master.add_instance("drbd1", pnode="node1", snodes=["node2"])
        self.master.add_instance("plain2", pnode="node2")
        self.master.add_instance("down3", pnode="node2",
                                 status="ERROR_nodedown")
        self.verdict = [{}, [], {}]
        submit = self.master.submit_many_jobs

        def submit_many_jobs(jobs):
            d = submit(jobs)
            job_id = self.master.next_id
            if jobs[0][0]["OP_ID"] == "OP_GROUP_VERIFY_DISKS":
                self.master.outcome[job_id] = ("success", [self.verdict])
            return d
        self.master.submit_many_jobs = submit_many_jobs
        self.settle_boot_ids()

    def test_clean_group_only_verified(self):
        self.run_pass()
        (op,) = self.master.ops()
        self.assertEqual((op["OP_ID"], op["group_name"], op["priority"]),
                         ("OP_GROUP_VERIFY_DISKS", "default", 10))
        self.assertEqual(op["reason"][0][0], "gnt:watcher")
        # the verification job is archived once read
        self.assertIn("ArchiveJob:%d" % self.master.next_id,
                      self.master.calls)

    def test_inactive_disks_activated(self):
        self.verdict = [{}, ["drbd1", "down3", "gone"], {}]
        report = self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_ACTIVATE_DISKS"),
                         ["drbd1"])
        self.assertIn("Verify-disks found inactive disks; activating the"
                      " disks of instance drbd1", report.texts("info"))
        self.assertEqual([a.instance for a in report.jobs(
            wwatcher.ACTIVATE_DISKS)], ["drbd1"])

    def test_offline_node_and_busy_instances_left_alone(self):
        self.verdict = [{"node3": "connection refused"},
                        ["drbd1", "plain2"], {}]
        self.master.nodes["node1"]["offline"] = True
        self.master.jobs = [{"id": 3, "status": "running", "ops": [
            {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "plain2"}]}]
        report = self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_ACTIVATE_DISKS"),
                         [])
        self.assertIn("Verifying disks: node node3 could not be asked:"
                      " connection refused", report.texts("warn"))

    def test_no_double_activation_after_a_reboot(self):
        self.verdict = [{}, ["plain2"], {}]
        self.master.nodes["node2"]["bootid"] = "boot-2"
        self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_ACTIVATE_DISKS"),
                         ["drbd1", "plain2"])

    def test_failed_verification_is_reported(self):
        submit = self.master.submit_many_jobs

        def failing(jobs):
            d = submit(jobs)
            if jobs[0][0]["OP_ID"] == "OP_GROUP_VERIFY_DISKS":
                self.master.outcome[self.master.next_id] = (
                    "error", [["OpPrereqError", ["no such group"]]])
            return d
        self.master.submit_many_jobs = failing
        report = self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_ACTIVATE_DISKS"),
                         [])
        self.assertTrue(any("ended error" in t and "no such group" in t
                            for t in report.texts("warn")), report.messages)

    def test_slow_verification_is_not_waited_for_forever(self):
        submit = self.master.submit_many_jobs

        def slow(jobs):
            d = submit(jobs)
            self.master.outcome[self.master.next_id] = ("running", None)
            return d
        self.master.submit_many_jobs = slow
        self.clock.advance(300)
        d = self.watcher().run_pass()
        self.assertNoResult(d)
        self.clock.pump([wwatcher.JOB_POLL_INTERVAL] * int(
            wwatcher.VERIFY_DISKS_WAIT + 2))
        report = self.successResultOf(d)
        self.assertTrue(any("Not waiting longer for the disk verification"
                            in t for t in report.texts("info")))

    def test_switched_off(self):
        self.verify_disks = False
        self.run_pass()
        self.assertEqual(self.master.ops(), [])


class PassTests(WatcherTestCase):

    def pause_until(self, until):
        wpause.write_pause(wpause.pause_path(self.paths), until)

    def test_paused_watcher_does_nothing(self):
        self.master.add_instance("web1", status="ERROR_down", hvstate=None)
        self.pause_until(START + 3600)
        report = self.run_pass()
        self.assertEqual(report.paused_until, START + 3600)
        self.assertEqual(self.master.calls, [])
        self.assertEqual(self.probes.asked, [])
        self.assertTrue(any(t.startswith("The watcher is paused until")
                            for t in report.texts("info")))

    def test_ignore_pause(self):
        self.master.add_instance("web1", status="ERROR_down", hvstate=None)
        self.pause_until(START + 3600)
        self.ignore_pause = True
        self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_STARTUP"),
                         ["web1"])

    def test_ended_pause_is_ignored_then_removed(self):
        self.master.add_instance("web1", status="ERROR_down", hvstate=None)
        self.pause_until(START + 100)
        path = wpause.pause_path(self.paths)
        self.run_pass(advance=200)
        self.assertEqual(self.master.targets("OP_INSTANCE_STARTUP"),
                         ["web1"])
        self.assertTrue(os.path.exists(path))
        self.run_pass(advance=wpause.REMOVE_AFTER)
        self.assertFalse(os.path.exists(path))

    def test_unreadable_pause_file_is_reported_and_removed(self):
        path = wpause.pause_path(self.paths)
        with open(path, "w") as f:
            f.write("tomorrow\n")
        report = self.run_pass()
        self.assertTrue(any(path in t and "does not hold a time" in t
                            for t in report.texts("warn")), report.messages)
        self.assertFalse(os.path.exists(path))
        self.assertIn("AutoArchiveJobs:21600", self.master.calls)

    def test_corrupt_state_file_is_reported_and_replaced(self):
        self.master.add_instance("web1", status="ERROR_down", hvstate=None)
        path = wstate.state_path(self.paths, G1)
        for content in ("{not json", '["a list"]',
                        '{"instance": {"web1": {"restart_count": "many"}}}',
                        '{"node": {"node1": {"bootid": 7}}}', "\xff"):
            with open(path, "w", encoding="latin-1") as f:
                f.write(content)
            report = self.run_pass()
            self.assertTrue(any(t.startswith("Watcher state file %s is not"
                                             " usable" % path)
                                for t in report.texts("error")),
                            (content, report.messages))
            self.assertEqual(self.master.targets("OP_INSTANCE_STARTUP"),
                             ["web1"], content)
            with open(path) as f:
                data = json.load(f)
            self.assertEqual(data["instance"]["web1"]["restart_count"], 1)
            self.assertEqual(wstate.WatcherState.load(path).problem, None)

    def test_old_jobs_are_archived(self):
        self.master.archive_answer = [12, 3]
        report = self.run_pass()
        self.assertIn("AutoArchiveJobs:21600", self.master.calls)
        self.assertEqual(report.archived, (12, 3))
        self.assertIn("Archived 12 job(s) older than 21600s, 3 left",
                      report.texts("info"))

    def test_not_the_master_checks_this_node_only(self):
        self.master.master = False
        self.master.add_instance("web1", status="ERROR_down", hvstate=None)
        self.probes.problems["ganeti-noded"] = "connection refused"
        report = self.run_pass()
        self.assertFalse(report.master)
        self.assertEqual(self.master.calls, ["QueryConfigValues"])
        self.assertEqual(self.probes.asked, [False])
        self.assertIn("ganeti-noded does not answer: connection refused",
                      report.texts("warn"))

    def test_a_master_socket_nobody_answers_fails_the_pass(self):
        self.master.master = False
        with open(self.paths.master_socket, "w"):
            pass        # left by a master daemon that crashed
        self.clock.advance(300)
        report = self.successResultOf(self.watcher().run_pass())
        self.assertTrue(report.failed)
        self.assertEqual(self.probes.asked, [False])
        self.assertTrue(any(t.startswith("The master daemon does not answer")
                            for t in report.texts("error")), report.messages)

    def test_master_daemons_that_do_not_answer_are_reported(self):
        self.probes.problems["ganeti-rapi"] = "no answer within 10s"
        report = self.run_pass()
        self.assertEqual(self.probes.asked, [True])
        self.assertIn("ganeti-rapi does not answer: no answer within 10s",
                      report.texts("warn"))

    def test_every_group_has_its_state_file(self):
        self.master.groups.append({"name": "rack2", "uuid": G2})
        self.master.add_node("node3", group=G2)
        self.master.add_instance("web1", status="ERROR_down", hvstate=None)
        self.master.add_instance("web3", status="ERROR_down", hvstate=None,
                                 pnode="node3", group=G2)
        self.run_pass()
        self.assertEqual(self.master.targets("OP_INSTANCE_STARTUP"),
                         ["web1", "web3"])
        self.assertEqual(self.notes(G1).restart_count("web1"), 1)
        self.assertEqual(self.notes(G1).restart_count("web3"), 0)
        self.assertEqual(self.notes(G2).restart_count("web3"), 1)
        self.assertEqual(self.notes(G2).boot_id("node3"), "boot-1")
        self.assertIsNone(self.notes(G2).boot_id("node1"))

    def test_auto_repair_pass_on_the_master_only(self):
        passes = []

        class Decision(object):
            def __init__(self, state):
                self.state = state

        def autorepair(client):
            passes.append(client)
            return defer.succeed([Decision("healthy"), Decision("pending"),
                                  Decision("healthy")])
        watcher = self.watcher()
        watcher.autorepair = autorepair
        self.clock.advance(300)
        report = self.successResultOf(watcher.run_pass())
        self.assertEqual(passes, [self.master])
        self.assertEqual(report.autorepair, {"healthy": 2, "pending": 1})
        self.assertIn("Auto-repair: 2 healthy, 1 pending",
                      report.texts("info"))
        # a failing auto-repair pass is reported; the watcher's pass is done
        watcher.autorepair = lambda client: defer.fail(
            luxi.ConnectionClosedError("gone"))
        report = self.successResultOf(watcher.run_pass())
        self.assertFalse(report.failed)
        self.assertIn("Auto-repair pass failed: ConnectionClosedError: gone",
                      report.texts("warn"))
        # not on other nodes
        self.master.master = False
        watcher.autorepair = autorepair
        self.successResultOf(watcher.run_pass())
        self.assertEqual(len(passes), 1)

    def test_a_failing_master_fails_the_pass_not_the_watcher(self):
        def broken(*args):
            return defer.fail(luxi.LuxiTimeoutError("no answer"))
        self.master.query = broken
        self.clock.advance(300)
        report = self.successResultOf(self.watcher().run_pass())
        self.assertTrue(report.failed)
        self.assertIn("Watcher pass failed: LuxiTimeoutError: no answer",
                      report.texts("error"))


class StateFileTests(ClockTestCase):

    def test_round_trip_and_maintenance(self):
        path = os.path.join(os.path.abspath(self.mktemp()))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        notes = wstate.WatcherState.load(path)
        self.assertIsNone(notes.problem)
        notes.record_restart("a", 100.0)
        notes.record_restart("a", 200.0)
        notes.record_cleanup("b", 150.0)
        notes.set_boot_id("node1", "x")
        self.assertTrue(notes.save(path))
        self.assertFalse(notes.save(path))      # unchanged: not rewritten
        again = wstate.WatcherState.load(path)
        self.assertEqual((again.restart_count("a"), again.cleanup_count("b"),
                          again.boot_id("node1")), (2, 1, "x"))
        # "b" is gone from the cluster, "a" expires 8 hours after 200
        self.assertEqual(again.maintain(["a"], 200 + 8 * 3600), ["b"])
        self.assertEqual(again.instance_names(), ["a"])
        self.assertEqual(again.maintain(["a"], 201 + 8 * 3600), ["a"])
        with open(path) as f:
            self.assertEqual(set(json.load(f)), {"instance", "node"})

    def test_unusable_files_name_the_problem(self):
        base = os.path.abspath(self.mktemp())
        os.makedirs(base)
        cases = [
            ("[]", "expected an object, got list"),
            ('{"instance": [], "node": {}}', "instance: expected an object"),
            ('{"instance": {"a": {"restart_count": -1}}}',
             "instance 'a': restart_count must be a non-negative integer"),
            ('{"instance": {"a": {"restart_when": "noon"}}}',
             "instance 'a': restart_when must be a time"),
            ('{"instance": {"a": {"colour": 1}}}',
             "instance 'a': unknown key 'colour'"),
            ('{"node": {"n": {"bootid": 1}}}',
             "node 'n': bootid must be a string"),
            ('{"extra": 1}', "unknown key(s) extra"),
            ("{", "not JSON"),
        ]
        for text, expected in cases:
            path = os.path.join(base, "state")
            with open(path, "w") as f:
                f.write(text)
            notes = wstate.WatcherState.load(path)
            self.assertIn(expected, notes.problem or "", text)
            self.assertEqual(notes.instance_names(), [])
            self.assertTrue(notes.changed)      # will be replaced
        # gnt-instance info never fails on such a file
        paths = pathutils.Paths(base)
        os.makedirs(paths.data_dir)
        with open(wstate.state_path(paths, G1), "w") as f:
            f.write("garbage")
        self.assertEqual(wstate.read_instance_record(paths, G1, "a"), {})


class PauseFileTests(ClockTestCase):

    def test_format_and_expiry(self):
        path = os.path.join(os.path.abspath(self.mktemp()), "watcher.pause")
        wpause.write_pause(path, 1000.7)
        with open(path) as f:
            self.assertEqual(f.read(), "1000\n")    # Ganeti's format
        self.assertEqual(wpause.read_pause(path, 999), (1000, None))
        self.assertEqual(wpause.read_pause(path, 1001), (None, None))
        self.assertTrue(os.path.exists(path))
        self.assertEqual(wpause.read_pause(path, 1000 + 3601), (None, None))
        self.assertFalse(os.path.exists(path))
        wpause.write_pause(path, None)              # nothing to remove: fine
        self.assertEqual(wpause.read_pause(path, 0), (None, None))


class _Lock(object):

    def __init__(self, free=True):
        self.free = free
        self.path = "/x/ganeti-watcher.lock"
        self.held = 0

    def acquire(self):
        if self.free:
            self.held += 1
        return self.free

    def release(self):
        self.held -= 1


class ServiceTests(WatcherTestCase):

    def make_service(self, **kw):
        self.stopped = []
        self.exit = []
        kw.setdefault("lock", _Lock())
        return wservice.WatcherService(
            self.watcher, self.clock, stop=lambda: self.stopped.append(1),
            exit_status=self.exit.append, **kw)

    def test_once_runs_one_pass_and_stops(self):
        self.master.add_instance("web1", status="ERROR_down", hvstate=None)
        svc = self.make_service(once=True)
        svc.startService()
        self.assertEqual(self.stopped, [1])
        self.assertEqual(self.exit, [])
        self.assertEqual(self.master.targets("OP_INSTANCE_STARTUP"),
                         ["web1"])
        self.assertEqual(svc.lock.held, 0)
        svc.stopService()

    def test_once_exits_non_zero_when_the_pass_failed(self):
        self.master.query = lambda *a: defer.fail(
            luxi.ConnectionClosedError("gone"))
        svc = self.make_service(once=True)
        svc.startService()
        self.assertEqual((self.stopped, self.exit), ([1], [1]))
        svc.stopService()

    def test_periodic_passes(self):
        self.master.add_instance("web1", status="ERROR_down", hvstate=None)
        svc = self.make_service(interval=300)
        svc.startService()
        self.assertEqual(len(svc.reports), 1)
        self.clock.advance(299)
        self.assertEqual(len(svc.reports), 1)
        self.clock.advance(1)
        self.assertEqual(len(svc.reports), 2)
        self.assertEqual(self.notes().restart_count("web1"), 2)
        svc.stopService()
        self.clock.advance(600)
        self.assertEqual(len(svc.reports), 2)
        self.assertEqual(self.stopped, [])

    def test_another_watcher_holding_the_lock_skips_the_pass(self):
        self.master.add_instance("web1", status="ERROR_down", hvstate=None)
        svc = self.make_service(once=True, lock=_Lock(free=False))
        svc.startService()
        self.assertEqual(self.master.calls, [])
        self.assertEqual((self.stopped, self.exit), ([1], []))
        self.assertTrue(svc.reports[-1].skipped)
        svc.stopService()

    def test_pass_lock_is_exclusive(self):
        path = os.path.join(self.root, "var", "lock", "ganeti-watcher.lock")
        first, second = wservice.PassLock(path), wservice.PassLock(path)
        self.assertTrue(first.acquire())
        self.assertFalse(second.acquire())
        first.release()
        self.assertTrue(second.acquire())
        second.release()

    def test_options(self):
        opts = wservice.Options()
        opts.parseOptions(["--root", self.root, "--once", "--job-age", "2h",
                           "--interval", "1m"])
        self.assertEqual((opts["once"], opts["job-age"], opts["interval"],
                          opts["job-wait"], opts["no-auto-repair"]),
                         (True, 7200, 60, 300, False))
        for args, message in (
                (["--interval", "0"], "--interval must be positive"),
                (["--job-age", "soon"], "--job-age: 'soon' is not a"
                 " duration"),
                (["--job-wait", "-1"], "--job-wait: '-1' must not be"
                 " negative"),
                (["--bind", "node1"], "--bind: 'node1' is not an IP")):
            opts = wservice.Options()
            with self.assertRaises(wservice.usage.UsageError) as ctx:
                opts.parseOptions(args)
            self.assertIn(message, str(ctx.exception))


class RepairLoopTests(ClockTestCase):
    """On the master, auto-repair passes every few seconds between the
    watcher's full passes: never while paused, off the master, or while
    another pass holds the watcher lock."""

    def setUp(self):
        ClockTestCase.setUp(self)
        self.paths = pathutils.Paths(self.mktemp())
        self.paths.ensure_dirs()
        self.calls = []
        self.clients = []

        def autorepair(client):
            self.calls.append(client)
            return defer.succeed([])

        class Client(object):
            def close(client):
                self.clients.append(client)
        self.loop = wservice.RepairLoop(
            autorepair, self.paths, self.clock, 5,
            wservice.PassLock(wservice.lock_path(self.paths)),
            make_client=Client, now=lambda: 1000.0)
        self.loop.startService()
        self.addCleanup(self.loop.stopService)

    def master_socket(self):
        with open(self.paths.master_socket, "w"):
            pass

    def test_passes_every_interval_on_the_master_only(self):
        self.clock.advance(5)
        self.assertEqual(self.calls, [])        # no master socket here
        self.master_socket()
        self.clock.advance(5)
        self.clock.advance(5)
        self.assertEqual(len(self.calls), 2)
        self.assertEqual(len(self.clients), 2)  # each client closed

    def test_not_while_paused_or_while_a_pass_holds_the_lock(self):
        self.master_socket()
        wpause.write_pause(wpause.pause_path(self.paths), 2000)
        self.clock.advance(5)
        self.assertEqual(self.calls, [])
        wpause.write_pause(wpause.pause_path(self.paths), None)
        other = wservice.PassLock(wservice.lock_path(self.paths))
        self.assertTrue(other.acquire())
        self.clock.advance(5)
        self.assertEqual(self.calls, [])
        other.release()
        self.clock.advance(5)
        self.assertEqual(len(self.calls), 1)

    def test_service_tree_and_option(self):
        opts = wservice.Options()
        opts.parseOptions(["--root", self.paths.root])
        self.assertEqual(opts["auto-repair-interval"], 5)
        top = wservice.makeService(opts, reactor=self.clock)
        self.assertEqual(sorted(s.name for s in top),
                         ["auto-repair", "watcher"])
        for args in (["--once"], ["--no-auto-repair"],
                     ["--auto-repair-interval", "0"]):
            opts = wservice.Options()
            opts.parseOptions(["--root", self.paths.root] + args)
            self.assertIsInstance(wservice.makeService(opts,
                                                       reactor=self.clock),
                                  wservice.WatcherService, args)
