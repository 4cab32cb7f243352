"""The maintenance daemon acting on real self-diagnosis, on a 3-node
virtual cluster: confd and a monitoring daemon on every node, each node's
whitelisted diagnose script printing what the test puts in a file, and
ganeti-maintd on the master looking every second.

An evacuate report gets the node drained, its instances moved, the node
offlined and tagged; a live-repair report runs the whitelisted repair
command with the report on stdin; a badly signed report and a command
that is not whitelisted change nothing but are counted or reported; a
canceled incident gets no more jobs; a maintenance daemon killed in the
middle of a round and started again submits nothing twice.
"""

import json
import os
import signal
import time
import urllib.request

from ganeti import constants
from ganeti.mond import diagnose

from tests import jsonhttp
from tests.integration.daemons import port_open, wait_for
from tests.integration.test_migration import ClusterTestCase

HEALTH = "health"


def wire_sign(key, diagnosis):
    """A diagnose report's data, signed with ``key``."""
    return diagnose.sign(key, diagnosis, int(time.time()))


class MaintdRepairTests(ClusterTestCase):

    NODES = 3
    BASE_PREFIX = "gnt-mr-"

    def setUp(self):
        ClusterTestCase.setUp(self)
        self.run_job({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        for node in self.vc.nodes:
            wait_for("ssconf on %s" % node.name, lambda: os.path.exists(
                node.paths.ssconf_file("master_candidates_ips")), 30)
            self.install_script(node)
            self.vc.start("confd-%s" % node.name, self.vc.twistd_command(
                "ganeti-confd", node))
        self.ok("gnt-cluster", "modify", "--diagnose-data-collector-filename",
                HEALTH, "--data-collector-interval", "diagnose=1")
        for node in self.vc.nodes:
            self.start_mond(node)
        self.maintd = self.start_maintd()

    # --- the cluster's pieces ----------------------------------------------

    def install_script(self, node):
        directory = node.paths.diagnose_commands_dir
        os.makedirs(directory, mode=0o755, exist_ok=True)
        os.chmod(directory, 0o755)
        script = os.path.join(directory, HEALTH)
        with open(script, "w") as f:
            f.write("#!/bin/sh\nif [ -f %s ]; then cat %s; else echo"
                    " '{\"status\": \"Ok\"}'; fi\n"
                    % (self.report_path(node), self.report_path(node)))
        os.chmod(script, 0o755)

    @staticmethod
    def report_path(node):
        return os.path.join(node.root, "report.json")

    def report(self, node, value):
        with open(self.report_path(node) + ".new", "w") as f:
            json.dump(value, f)
        os.rename(self.report_path(node) + ".new", self.report_path(node))

    def start_mond(self, node, *args):
        proc = self.vc.start("mond-%s" % node.name, self.vc.twistd_command(
            "ganeti-mond", node, "--refresh", "0.5", "--dbus-address",
            "unix:path=%s" % os.path.join(self.base, "no-bus"), *args))
        wait_for("mond on %s" % node.name, lambda: self.alive(proc) and
                 port_open(node.ip, constants.DEFAULT_MOND_PORT))
        return proc

    def start_maintd(self):
        master = self.vc.master
        proc = self.vc.start("maintd", self.vc.twistd_command(
            "ganeti-maintd", master, "--interval", "1"))
        wait_for("maintd", lambda: self.alive(proc) and port_open(
            master.ip, constants.DEFAULT_MAINTD_PORT))
        return proc

    def status(self, what="status"):
        url = "http://%s:%d/1/%s" % (self.vc.master.ip,
                                     constants.DEFAULT_MAINTD_PORT, what)
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read().decode("utf-8"))

    def incident_on(self, node):
        found = [i for i in self.status() if i["node_name"] == node.name]
        return found[0] if found else None

    def wait_status(self, node, wanted, timeout=90):
        def check():
            inc = self.incident_on(node)
            return inc is not None and inc["repair-status"] == wanted
        wait_for("incident on %s %s" % (node.name, wanted), check, timeout,
                 0.3)
        return self.incident_on(node)

    def node_row(self, node, fields="offline,drained,tags"):
        return self.ok("gnt-node", "list", "--no-headers", "--separator",
                       "|", "-o", fields, node.name).strip().split("|")

    def jobs(self):
        """[(id, status, [OP_IDs], reason of the first opcode)]"""
        rows = self.client.call("QueryJobs", None,
                                ["id", "status", "ops"])
        return [(r[0], r[1], [op["OP_ID"] for op in r[2]],
                 r[2][0].get("reason") or []) for r in rows if r]

    def maintd_jobs(self):
        return [j for j in self.jobs()
                if any(e[0] == "gnt:daemon:maintd" for e in j[3])]

    def serve(self, ip, reports):
        """A stand-in monitoring daemon on ``ip`` serving ``reports``."""
        jsonhttp.serve_json(self, lambda path, _: reports,
                            (ip, constants.DEFAULT_MOND_PORT))

    # --- the tests ---------------------------------------------------------

    def test_evacuate_then_acknowledge(self):
        sick = self.node(1)
        self.create("web1.example.com", node=1)
        self.create("web2.example.com", node=1)
        self.report(sick, {"status": "evacuate",
                           "details": {"disk": "sdb", "bay": 3}})
        inc = self.wait_status(sick, "completed")
        tag = "maintd:repairready:%s" % inc["id"]
        self.assertEqual(inc["tag"], tag)
        self.assertEqual(inc["original"]["details"], {"disk": "sdb",
                                                      "bay": 3})
        offline, _, tags = self.node_row(sick)
        self.assertEqual(offline, "Y")
        self.assertIn(tag, tags.split(","))
        for name in ("web1.example.com", "web2.example.com"):
            pnode = self.ok("gnt-instance", "list", "--no-headers", "-o",
                            "pnode", name).strip()
            self.assertNotEqual(pnode, sick.name)
        # every job of it is visible, with the incident in its reason
        ours = self.maintd_jobs()
        self.assertEqual(sorted(j[0] for j in ours), sorted(inc["jobs"]))
        for j in ours:
            self.assertEqual(j[1], "success", j)
            self.assertEqual(j[3][0][1], "incident %s" % inc["id"])
        # one instance moved per round, never one twice
        moved = [j for j in ours if "OP_INSTANCE_MIGRATE" in j[2]]
        self.assertEqual(len(moved), 2, ours)
        listed = self.ok("gnt-cluster", "repair-list", "--no-headers")
        self.assertIn("completed", listed)
        # acknowledged: the tag goes; the node (offline) no longer reports
        self.ok("gnt-node", "remove-tags", sick.name, tag)
        wait_for("the incident forgotten",
                 lambda: self.incident_on(sick) is None, 30, 0.3)

    def test_live_repair_runs_the_repair_command_with_the_report(self):
        node = self.node(2)
        directory = os.path.join(node.root, "etc", "ganeti",
                                 "node-repair-commands")
        os.makedirs(directory, mode=0o755, exist_ok=True)
        os.chmod(directory, 0o755)
        got = os.path.join(node.root, "repair-input.json")
        with open(os.path.join(directory, "fix-raid"), "w") as f:
            f.write("#!/bin/sh\ncat > %s\necho rebuilt\n" % got)
        os.chmod(os.path.join(directory, "fix-raid"), 0o755)
        report = {"status": "live-repair", "command": "fix-raid",
                  "details": {"md": "md0"}}
        self.report(node, report)
        inc = self.wait_status(node, "completed")
        with open(got) as f:
            self.assertEqual(json.load(f), report)
        self.assertEqual(self.node_row(node)[:2], ["N", "N"])
        self.assertIn(inc["tag"], self.node_row(node)[2])
        repair = [j for j in self.maintd_jobs()
                  if "OP_REPAIR_COMMAND" in j[2]]
        self.assertEqual(len(repair), 1)

    def test_forged_and_unwhitelisted_change_nothing(self):
        forger = self.node(1)
        # something else answers on the node's monitoring port, with an
        # evacuate report signed with another key: refused and counted
        self.stop_process(dict(self.vc.processes)["mond-%s" % forger.name])
        forged = {"name": "diagnose", "version": "B", "format_version": 1,
                  "timestamp": 0, "category": "node", "kind": 1,
                  "data": wire_sign(b"not-the-cluster-key",
                                    {"status": "evacuate"})}
        self.serve(forger.ip, [forged])
        wait_for("a refused report", lambda: self.status("counters")[
            "refused"].get("bad-signature", 0) > 0, 30, 0.3)
        # a live repair whose command is not whitelisted: the job fails,
        # the incident fails and says so on the node, nothing else runs
        other = self.node(2)
        self.report(other, {"status": "live-repair", "command": "rm-rf"})
        inc = self.wait_status(other, "failed")
        self.assertIn("maintd:repairfailed:%s" % inc["id"],
                      self.node_row(other)[2])
        self.assertIsNone(self.incident_on(forger))
        self.assertEqual(self.node_row(forger)[:2], ["N", "N"])
        time.sleep(3)
        self.assertEqual(len(self.incident_on(other)["jobs"]), 2)

    def test_cancel_stops_further_jobs(self):
        sick = self.node(1)
        for i in range(1, 4):
            self.create("db%d.example.com" % i, node=1)
        self.report(sick, {"status": "evacuate-failover"})
        inc = self.wait_status(sick, "pending")
        self.ok("gnt-cluster", "repair-cancel", inc["id"])
        self.wait_status(sick, "canceled", 30)
        time.sleep(1)
        before = sorted(j[0] for j in self.maintd_jobs())
        time.sleep(4)
        self.assertEqual(sorted(j[0] for j in self.maintd_jobs()), before)
        # evacuate-failover never live-migrates
        self.assertFalse([j for j in self.maintd_jobs()
                          if "OP_INSTANCE_MIGRATE" in j[2]])

    def test_killed_mid_round_then_restarted_submits_nothing_twice(self):
        sick = self.node(1)
        for i in range(1, 4):
            self.create("app%d.example.com" % i, node=1)
        self.report(sick, {"status": "evacuate"})
        self.wait_status(sick, "pending")
        os.kill(self.maintd.pid, signal.SIGKILL)
        self.maintd.wait(30)
        self.maintd = self.start_maintd()
        inc = self.wait_status(sick, "completed", 120)
        migrations = {}
        for j in self.maintd_jobs():
            if "OP_INSTANCE_MIGRATE" in j[2]:
                ops = self.client.call("QueryJobs", [j[0]], ["ops"])[0][0]
                name = [op["instance_name"] for op in ops
                        if op["OP_ID"] == "OP_INSTANCE_MIGRATE"][0]
                migrations[name] = migrations.get(name, 0) + 1
        self.assertEqual(migrations, {"app%d.example.com" % i: 1
                                      for i in range(1, 4)})
        self.assertEqual(self.node_row(sick)[0], "Y")
        self.assertTrue(inc["jobs"])
