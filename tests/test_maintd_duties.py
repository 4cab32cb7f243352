"""The maintenance daemon's harep duties and balancing, against a fake
master: the same auto-repair tags and steps as harep, tasks deferred by
conflicts, hbal's first job set, and no thrashing under fluctuating load
(hold-down and hourly cap)."""

import random

from twisted.internet import defer
from twisted.trial import unittest

from ganeti.maintd import daemon as D
from ganeti.watcher.autorepair import runner, tags as T

from tests.maintd_fakes import FakeCluster

P = T.PREFIX
NOW = 1_700_000_000.0


class FakeDiagnose(object):
    def __init__(self):
        self.reports = {}
        self.refused = {}

    def fetch(self, nodes):
        return defer.succeed({n["uuid"]: self.reports[n["uuid"]]
                              for n in nodes if n["uuid"] in self.reports})


class FakeLoad(object):
    """The nodes' CPU load, changed by the test between looks."""

    def __init__(self):
        self.loads = {}
        self.asked = 0

    def fetch(self, nodes):
        self.asked += 1
        return defer.succeed({n["uuid"]: self.loads[n["name"]]
                              for n in nodes if n["name"] in self.loads})


def ids(prefix):
    it = iter("%s%d" % (prefix, i) for i in range(1, 10000))
    return lambda: next(it)


class Base(unittest.TestCase):

    def setUp(self):
        self.now = [NOW]
        self.diagnose = FakeDiagnose()
        self.load = FakeLoad()

    def daemon(self, cluster):
        return D.MaintenanceDaemon(cluster, self.diagnose,
                                   wallclock=lambda: self.now[0],
                                   new_id=ids("inc"), load=self.load,
                                   repair_id=ids("rep"))

    def look(self, daemon):
        return self.successResultOf(defer.Deferred.fromCoroutine(
            daemon.run_once()))


def without_reason(ops):
    return [{k: v for k, v in op.items() if k != "reason"} for op in ops]


class HarepDutyTests(Base):

    def broken_cluster(self):
        # repairs that do not share a node: harep's passes and the
        # daemon's rounds submit the same jobs
        c = FakeCluster(("n1", "n2", "n3", "n4", "n5", "n6"))
        c.add_instance("web1", "n1", "n2", tags=[P + "failover"])
        # needs a reinstall, only fix-storage allowed: enoperm
        c.add_instance("db1", "n3", None, dt="plain",
                       tags=[P + "fix-storage"])
        # not enabled: left alone
        c.add_instance("app1", "n5", "n1")
        c.add_instance("ok1", "n4", "n6", tags=[P + "reinstall"])
        c.nodes["n1"]["offline"] = True
        c.nodes["n3"]["offline"] = True
        return c

    def test_same_tags_and_steps_as_harep(self):
        ours = self.broken_cluster()
        ours.maintenance["harep"] = True
        theirs = self.broken_cluster()
        harep = runner.AutoRepair(theirs, None, wallclock=lambda: self.now[0],
                                  reason_source="gnt:client:harep",
                                  wait_tags=False, new_id=ids("rep"))
        daemon = self.daemon(ours)
        for _ in range(4):
            before = len(theirs.jobs)
            self.successResultOf(defer.Deferred.fromCoroutine(
                harep.run_once()))
            self.look(daemon)
            self.assertEqual(
                [without_reason(ours.jobs[j]["ops"])
                 for j in ours.jobs_since(before + 1)],
                [without_reason(theirs.jobs[j]["ops"])
                 for j in theirs.jobs_since(before + 1)])
            ours.finish_all()
            theirs.finish_all()
            self.now[0] += 60
        for name in ours.instances:
            self.assertEqual(ours.instances[name]["tags"],
                             theirs.instances[name]["tags"], name)
        tags = ours.instances["web1"]["tags"]
        # failed over, then a new secondary, then success
        self.assertEqual(ours.instances["web1"]["pnode"], "n2")
        self.assertEqual(ours.instances["web1"]["snodes"], ["n4"])
        self.assertEqual([t.split(":")[4:8:3] for t in tags
                          if ":result:" in t], [["failover", "success"]])
        self.assertTrue(any(":result:fix-storage:" in t and ":enoperm:" in t
                            for t in ours.instances["db1"]["tags"]))
        self.assertEqual(ours.instances["app1"]["tags"], [])
        # every job says it is the daemon's auto-repair
        for job in ours.jobs.values():
            self.assertEqual(job["ops"][0]["reason"][0][:2],
                             ["gnt:daemon:maintd", "auto-repair"])

    def test_repairs_wait_for_the_nodes_of_other_tasks(self):
        c = FakeCluster(("n1", "n2", "n3", "n4", "n5"))
        c.maintenance["harep"] = True
        # two repairs sharing the dead node n5, an evacuation of n2
        c.add_instance("a", "n5", "n1", tags=[P + "failover"])
        c.add_instance("b", "n5", "n4", tags=[P + "failover"])
        c.add_instance("c", "n3", "n5", tags=[P + "failover"])
        c.add_instance("d", "n2", "n3")
        c.nodes["n5"]["offline"] = True
        self.diagnose.reports["u-n2"] = {"status": "evacuate"}
        daemon = self.daemon(c)
        rnd = self.look(daemon)
        self.assertEqual([(t.kind, sorted(t.instances)) for t in rnd.tasks],
                         [("evacuation", ["i-d"]), ("auto-repair", ["i-a"])])
        why = {sorted(t.instances)[0]: w for t, w in rnd.deferred}
        self.assertIn("conflicts with auto-repair of a", why["i-b"])
        self.assertEqual(why["i-c"], "touches a node under repair")
        # deferred repairs leave no trace; the taken one has its tag job
        self.assertEqual(c.instances["b"]["tags"], [P + "failover"])
        self.assertEqual(c.instances["c"]["tags"], [P + "failover"])
        self.assertEqual([c.job_ops(j) for j in sorted(c.jobs)],
                         [["OP_NODE_SET_PARAMS", "OP_INSTANCE_MIGRATE"],
                          ["OP_INSTANCE_FAILOVER"], ["OP_TAGS_SET"]])
        self.assertEqual(c.maintenance["jobs"], [1, 2, 3])
        # while any of these runs, nothing new
        c.finish(1)
        c.finish(2)
        self.look(daemon)
        self.assertEqual(len(c.jobs), 3)
        c.finish_all()
        # a and b share the dead node: b waits while a's repair goes on
        # (failover, new secondary), c while n2/n3 are evacuated
        rounds = []
        for _ in range(8):
            rnd = self.look(daemon)
            rounds.append([t.nodes for t in rnd.tasks])
            c.finish_all()
            self.now[0] += 60
        for name in "abc":
            self.assertEqual(
                [t.split(":")[4:8:3] for t in c.instances[name]["tags"]
                 if ":result:" in t], [["failover", "success"]], name)
            self.assertEqual(c.instances[name]["snodes"] and
                             c.nodes[c.instances[name]["snodes"][0]][
                                 "offline"], False)
        # no two jobs of a round touch the same node
        for nodes in rounds:
            self.assertEqual(sum(len(n) for n in nodes),
                             len(set().union(*nodes)))
        self.assertTrue(c.nodes["n2"]["offline"])

    def test_off_switch_leaves_instances_alone(self):
        c = self.broken_cluster()
        self.look(self.daemon(c))
        self.assertEqual(c.jobs, {})


def unbalanced():
    c = FakeCluster(("n1", "n2", "n3", "n4"))
    for i in range(6):
        c.add_instance("i%d" % i, "n1", "n2", mem=2048, vcpus=2)
    c.add_instance("j0", "n3", "n4", mem=1024)
    c.maintenance["balance"] = True
    return c


class BalancingTests(Base):

    def test_first_job_set_of_hbal_and_recorded_moves(self):
        c = unbalanced()
        rnd = self.look(self.daemon(c))
        self.assertTrue(rnd.tasks)
        seen = set()
        for task in rnd.tasks:
            self.assertEqual(task.kind, "balancing")
            # a job set: no node in two moves
            self.assertFalse(task.nodes & seen)
            seen |= task.nodes
        for jid, job in c.jobs.items():
            self.assertTrue(set(c.job_ops(jid)) <= {
                "OP_INSTANCE_MIGRATE", "OP_INSTANCE_REPLACE_DISKS"})
            self.assertEqual(job["ops"][0]["reason"][0][:2],
                             ["gnt:daemon:maintd", "balancing"])
        moved = sorted(uuid for t in rnd.tasks for uuid in t.instances)
        self.assertEqual(sorted(u for u, _ in c.maintenance["moves"]), moved)
        self.assertEqual({ts for _, ts in c.maintenance["moves"]}, {NOW})

    def test_threshold_and_failed_incidents_hold_moves_back(self):
        c = unbalanced()
        c.maintenance["balance_threshold"] = 100.0
        self.assertEqual(self.look(self.daemon(c)).tasks, [])
        c = unbalanced()
        c.maintenance["incidents"]["x"] = {
            "uuid": "x", "node": "u-n1", "original": {"status": "evacuate"},
            "action": "evacuate", "repair_status": "failed", "jobs": [],
            "tag": "maintd:repairfailed:x"}
        c.nodes["n1"]["tags"].append("maintd:repairfailed:x")
        self.diagnose.reports["u-n1"] = {"status": "evacuate"}
        rnd = self.look(self.daemon(c))
        self.assertEqual(rnd.tasks, [])
        self.assertTrue(rnd.deferred)
        self.assertEqual({w for _, w in rnd.deferred},
                         {"touches a node under repair"})

    def test_load_data_only_with_its_switch(self):
        c = unbalanced()
        self.load.loads = {"n1": 1.0, "n2": 1.0, "n3": 8.0, "n4": 8.0}
        self.look(self.daemon(c))
        self.assertEqual(self.load.asked, 0)
        c = unbalanced()
        c.maintenance["balance_load"] = True
        self.look(self.daemon(c))
        self.assertEqual(self.load.asked, 1)

    def run_looks(self, hold_down, max_moves, looks=48, delay=300):
        """Looks every ``delay`` seconds with the nodes' load jumping
        about; (time, instance uuid) of every balancing move."""
        c = FakeCluster(("n1", "n2", "n3", "n4"))
        for i in range(8):
            nodes = ("n1", "n2", "n3", "n4")
            c.add_instance("i%d" % i, nodes[i % 4], nodes[(i + 1) % 4],
                           vcpus=1 + i % 3)
        c.maintenance.update(balance=True, balance_load=True,
                             balance_threshold=0.01,
                             balance_hold_down=hold_down,
                             balance_max_moves=max_moves)
        rng = random.Random(1)
        daemon = self.daemon(c)
        moves = []
        for _ in range(looks):
            self.load.loads = {n: rng.choice([0.0, 0.5, 6.0, 8.0])
                               for n in c.nodes}
            rnd = self.look(daemon)
            for t in rnd.tasks:
                moves.extend((self.now[0], u) for u in t.instances)
            c.finish_all()
            self.now[0] += delay
            # the recorded moves are pruned to what the windows need
            keep = max(hold_down, 3600)
            self.assertTrue(all(self.now[0] - delay - ts < keep
                                for _, ts in c.maintenance["moves"]))
        return moves

    def test_fluctuating_load_does_not_thrash(self):
        hold_down, cap = 1800, 3
        moves = self.run_looks(hold_down, cap)
        self.assertGreater(len(moves), 5)
        last = {}
        for ts, uuid in moves:
            if uuid in last:
                self.assertGreaterEqual(ts - last[uuid], hold_down, uuid)
            last[uuid] = ts
        for ts, _ in moves:
            in_hour = [t for t, _ in moves if ts <= t < ts + 3600]
            self.assertLessEqual(len(in_hour), cap)

    def test_without_the_guards_the_same_load_thrashes(self):
        # the guards above matter: unguarded, instances move back and
        # forth within the hold-down and beyond the cap
        moves = self.run_looks(0, 0)
        last = {}
        quick = 0
        for ts, uuid in moves:
            if uuid in last and ts - last[uuid] < 1800:
                quick += 1
            last[uuid] = ts
        self.assertGreater(quick, 0)
        self.assertTrue(any(
            len([t for t, _ in moves if ts <= t < ts + 3600]) > 3
            for ts, _ in moves))

