"""The maintenance daemon's looks against a fake master: an evacuation
from report to completed, live repairs, failures, cancels, and a daemon
that died between submitting a job and recording it."""

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import objects
from ganeti import query
from ganeti.maintd import daemon as D

NOW = 1_700_000_000.0
EVAC = {"status": "evacuate", "details": {"disk": "sda"}}


class FakeDiagnose(object):
    def __init__(self):
        self.reports = {}
        self.refused = {"bad-signature": 0}

    def fetch(self, nodes):
        return defer.succeed({n["uuid"]: self.reports[n["uuid"]]
                              for n in nodes if n["uuid"] in self.reports})


class FakeMaster(object):
    """Answers the daemon's luxi calls; jobs stay queued until
    ``finish``; ``apply`` makes a finished job's effect happen."""

    def __init__(self):
        self.nodes = {u: {"uuid": u, "name": "node%s.example.com" % u[-1],
                          "primary_ip": "127.0.0.%s" % u[-1],
                          "offline": False, "drained": False, "tags": [],
                          "group.uuid": "g1", "vm_capable": True}
                      for u in ("u1", "u2", "u3")}
        self.instances = {}
        self.jobs = {}
        self.maintenance = {"incidents": {}, "jobs": [], "evacuated": []}

    def add_instance(self, name, pnode, dt="sharedfile", snodes=()):
        self.instances[name] = {"uuid": "i-" + name, "name": name,
                                "pnode.uuid": pnode,
                                "snodes.uuid": list(snodes),
                                "disk_template": dt, "admin_state": "up",
                                "oper_state": True}

    def call(self, method, *args):
        return defer.maybeDeferred(getattr(self, "_" + method), *args)

    def _QueryClusterInfo(self):
        m = self.maintenance
        return {"default_iallocator": "hail", "maintenance": {
            "jobs": list(m["jobs"]), "evacuated": list(m["evacuated"]),
            "incidents": [
                {"id": i["uuid"], "node": i["node"],
                 "original": i["original"], "action": i["action"],
                 "repair-status": i["repair_status"], "jobs": i["jobs"],
                 "tag": i["tag"]} for i in m["incidents"].values()]}}

    def _Query(self, what, fields, qfilter):
        # only fields the real master knows (an unknown one would come
        # back as "unknown" there, silently)
        for f in fields:
            assert f in query.RESOURCES[what].fields, (what, f)
        names = {u: n["name"] for u, n in self.nodes.items()}

        def value(r, f):
            if f == "pip":
                return r["primary_ip"]
            if f == "pnode":
                return names[r["pnode.uuid"]]
            if f == "snodes":
                return [names[u] for u in r["snodes.uuid"]]
            return r[f]
        rows = (self.nodes.values() if what == "node"
                else self.instances.values())
        return {"fields": fields,
                "data": [[[0, value(r, f)] for f in fields] for r in rows]}

    def _QueryJobs(self, ids, fields):
        return [[{"id": j, "status": job["status"], "ops": job["ops"]}[f]
                 for f in fields] for j, job in sorted(self.jobs.items())]

    def _SubmitJob(self, ops):
        jid = len(self.jobs) + 1
        self.jobs[jid] = {"status": "queued", "ops": ops}
        return jid

    def _MaintenanceUpdate(self, incidents, removed, jobs, evacuated,
                           moves):
        m = self.maintenance
        for inc in incidents or []:
            m["incidents"][inc["uuid"]] = objects.Incident.from_dict(
                inc).to_dict()
        for uuid in removed or []:
            del m["incidents"][uuid]
        if jobs is not None:
            m["jobs"] = list(jobs)
        if evacuated is not None:
            m["evacuated"] = list(evacuated)
        return True

    def finish(self, jid, status="success"):
        job = self.jobs[jid]
        job["status"] = status
        if status != "success":
            return
        for op in job["ops"]:
            node = next((n for n in self.nodes.values()
                         if n["name"] == op.get("node_name")), None)
            if op["OP_ID"] == "OP_NODE_SET_PARAMS":
                for key in ("drained", "offline"):
                    if key in op:
                        node[key] = op[key]
            elif op["OP_ID"] == "OP_TAGS_SET":
                node = next(n for n in self.nodes.values()
                            if n["name"] == op["name"])
                node["tags"].extend(op["tags"])
            elif op["OP_ID"] in ("OP_INSTANCE_MIGRATE",
                                 "OP_INSTANCE_FAILOVER"):
                self.instances[op["instance_name"]]["pnode.uuid"] = "u2"

    def ops_of(self, jid):
        return [op["OP_ID"] for op in self.jobs[jid]["ops"]]


class DaemonTests(unittest.TestCase):

    def setUp(self):
        self.master = FakeMaster()
        self.diagnose = FakeDiagnose()
        ids = iter("inc%d" % i for i in range(1, 100))
        self.daemon = D.MaintenanceDaemon(self.master, self.diagnose,
                                          wallclock=lambda: NOW,
                                          new_id=lambda: next(ids))

    def look(self):
        return self.successResultOf(defer.Deferred.fromCoroutine(
            self.daemon.run_once()))

    def incident(self, uuid="inc1"):
        return self.master.maintenance["incidents"][uuid]

    def test_evacuation_from_report_to_completed(self):
        m = self.master
        m.add_instance("web1", "u1")
        self.diagnose.reports["u1"] = EVAC
        self.look()
        self.assertEqual(list(m.jobs), [1])
        self.assertEqual(m.ops_of(1), ["OP_NODE_SET_PARAMS",
                                       "OP_INSTANCE_MIGRATE"])
        inc = self.incident()
        self.assertEqual((inc["repair_status"], inc["jobs"], inc["node"]),
                         ("pending", [1], "u1"))
        self.assertEqual(m.maintenance["jobs"], [1])
        self.assertEqual(m.maintenance["evacuated"], ["u1"])
        # every job says who sent it and for which incident
        reason = m.jobs[1]["ops"][0]["reason"][0]
        self.assertEqual(reason[:2], ["gnt:daemon:maintd", "incident inc1"])
        # while the round's job runs, nothing new
        self.look()
        self.assertEqual(list(m.jobs), [1])
        m.finish(1)
        self.look()
        self.assertEqual(m.ops_of(2), ["OP_NODE_SET_PARAMS", "OP_TAGS_SET"])
        self.assertTrue(m.jobs[2]["ops"][0]["offline"])
        m.finish(2)
        self.look()
        self.assertEqual(self.incident()["repair_status"], "completed")
        self.assertEqual(len(m.jobs), 2)
        [shown] = self.daemon.status()
        self.assertEqual((shown["id"], shown["repair-status"], shown["jobs"],
                          shown["tag"]),
                         ("inc1", "completed", [1, 2],
                          "maintd:repairready:inc1"))
        # acknowledged (tag removed) and no longer reported: forgotten
        self.look()
        self.assertEqual(m.maintenance["evacuated"], ["u1"])
        m.nodes["u1"]["tags"].clear()
        del self.diagnose.reports["u1"]
        self.look()
        self.assertEqual(m.maintenance["incidents"], {})
        self.assertEqual(m.maintenance["evacuated"], [])

    def test_several_nodes_to_empty_are_all_drained_before_moves(self):
        # were one node's instance moved while another node to empty is
        # still undrained, the allocator could send it there, and it
        # would move twice
        m = self.master
        m.add_instance("web1", "u1")
        m.add_instance("web3", "u3")
        self.diagnose.reports["u1"] = EVAC
        self.diagnose.reports["u3"] = EVAC
        self.look()
        self.assertEqual(sorted(m.jobs), [1, 2])
        for jid in (1, 2):
            self.assertEqual(m.ops_of(jid), ["OP_NODE_SET_PARAMS"])
            self.assertTrue(m.jobs[jid]["ops"][0]["drained"])
        drained = sorted(m.jobs[j]["ops"][0]["node_name"] for j in (1, 2))
        self.assertEqual(drained, ["node1.example.com", "node3.example.com"])
        self.assertEqual(m.maintenance["evacuated"], ["u1", "u3"])
        # one drain done, the other not yet: still nothing moves
        m.finish(1)
        self.look()
        self.assertEqual(sorted(m.jobs), [1, 2])
        m.finish(2)
        self.look()
        self.assertEqual(sorted(m.jobs), [1, 2, 3, 4])
        moved = sorted(m.jobs[j]["ops"][0]["instance_name"] for j in (3, 4))
        self.assertEqual(moved, ["web1", "web3"])
        for jid in (3, 4):
            self.assertEqual(m.ops_of(jid), ["OP_INSTANCE_MIGRATE"])
        # a node that reports later (the fake master migrated web1 and
        # web3 to it) is drained first too; meanwhile the other nodes'
        # instances wait, an empty node is set offline
        m.add_instance("web1b", "u1")
        m.finish(3)
        m.finish(4)
        self.diagnose.reports["u2"] = EVAC
        self.look()
        new = {m.jobs[j]["ops"][0]["node_name"]: m.ops_of(j) for j in (5, 6)}
        self.assertEqual(new, {
            "node2.example.com": ["OP_NODE_SET_PARAMS"],
            "node3.example.com": ["OP_NODE_SET_PARAMS", "OP_TAGS_SET"]})
        self.assertEqual(len(m.jobs), 6)

    def test_live_repair_runs_the_command_with_the_report(self):
        m = self.master
        report = {"status": "live-repair", "command": "fix-raid",
                  "details": ["md0"]}
        self.diagnose.reports["u3"] = report
        self.look()
        [op] = m.jobs[1]["ops"]
        self.assertEqual((op["OP_ID"], op["node_name"], op["command"]),
                         ("OP_REPAIR_COMMAND", "node3.example.com",
                          "fix-raid"))
        import json
        self.assertEqual(json.loads(op["input"]), report)
        m.finish(1)
        self.look()
        self.assertEqual(m.ops_of(2), ["OP_TAGS_SET"])
        m.finish(2)
        self.look()
        self.assertEqual(self.incident()["repair_status"], "completed")

    def test_first_failure_stops_the_incident(self):
        m = self.master
        m.add_instance("web1", "u1")
        m.add_instance("web2", "u1")
        self.diagnose.reports["u1"] = EVAC
        self.look()
        m.finish(1, "error")
        self.look()
        inc = self.incident()
        self.assertEqual((inc["repair_status"], inc["tag"]),
                         ("failed", "maintd:repairfailed:inc1"))
        # only the failure tag is submitted, nothing more for it
        self.assertEqual(m.ops_of(2), ["OP_TAGS_SET"])
        self.assertEqual(m.jobs[2]["ops"][0]["tags"],
                         ["maintd:repairfailed:inc1"])
        m.finish(2)
        self.look()
        self.look()
        self.assertEqual(len(m.jobs), 2)

    def test_a_canceled_incident_gets_no_jobs(self):
        m = self.master
        m.add_instance("web1", "u1")
        self.diagnose.reports["u1"] = EVAC
        self.look()
        m.finish(1)
        self.incident()["repair_status"] = "canceled"
        self.look()
        self.assertEqual(len(m.jobs), 1)
        del self.diagnose.reports["u1"]
        self.look()
        self.assertEqual(m.maintenance["incidents"], {})

    def test_a_job_submitted_but_not_recorded_is_adopted(self):
        m = self.master
        m.add_instance("web1", "u1")
        self.diagnose.reports["u1"] = EVAC
        self.look()
        # as if the daemon died after submitting job 1 but before
        # recording it: the state does not name it
        self.incident()["jobs"] = []
        self.incident()["repair_status"] = "noted"
        m.maintenance["jobs"] = []
        restarted = D.MaintenanceDaemon(m, self.diagnose,
                                        wallclock=lambda: NOW)
        self.successResultOf(defer.Deferred.fromCoroutine(
            restarted.run_once()))
        # web1 is not migrated twice: job 1 is the incident's again
        migrations = [j for j in m.jobs
                      if "OP_INSTANCE_MIGRATE" in m.ops_of(j)]
        self.assertEqual(migrations, [1])
        self.assertEqual(self.incident()["jobs"], [1])

    def test_counters(self):
        self.look()
        self.assertEqual(self.daemon.counters(),
                         {"rounds": 0, "jobs": 0,
                          "refused": {"bad-signature": 0}})
