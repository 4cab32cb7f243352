"""ganeti-mond as a real process on a one-node virtual cluster with confd:
Ganeti's resources, collectors switched with gnt-cluster modify, a
whitelisted diagnose script's signed report, and Ganeti's hbal reading
the CPU load with --mond."""

import json
import os
import subprocess
import urllib.error
import urllib.request

from ganeti import constants
from ganeti.confd import wire
from ganeti.mond import diagnose

from tests.integration.daemons import (GntCommandsMixin,
                                       RunningClusterTestCase, port_open,
                                       wait_for)

HBAL = "/usr/lib/ganeti/3.0/usr/bin/hbal"


class MondTests(GntCommandsMixin, RunningClusterTestCase):

    NODES = 1
    BASE_PREFIX = "gnt-mond-"

    def setUp(self):
        RunningClusterTestCase.setUp(self)
        self.node = self.vc.master
        self.gnt_root = self.node.root
        self.run_job({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        self.vc.start("confd", self.vc.twistd_command(
            "ganeti-confd", self.node))
        wait_for("ssconf", lambda: os.path.exists(
            self.node.paths.ssconf_file("master_candidates_ips")))
        # no system bus: the built-in diagnosis must say so, not fail
        self.proc = self.vc.start("mond", self.vc.twistd_command(
            "ganeti-mond", self.node, "--refresh", "0.5",
            "--dbus-address", "unix:path=%s" % os.path.join(self.base,
                                                            "no-bus")))
        wait_for("mond", lambda: self.alive(self.proc) and port_open(
            self.node.ip, constants.DEFAULT_MOND_PORT))
        self.key = wire.read_hmac_key(self.node.paths.hmac_key_file)

    def get(self, path):
        url = "http://%s:%d%s" % (self.node.ip, constants.DEFAULT_MOND_PORT,
                                  path)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return r.status, json.loads(r.read().decode("utf-8"))
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode("utf-8")

    def listed(self):
        return [entry[0] for entry in self.get("/1/list/collectors")[1]]

    def diagnosis(self):
        """The node's diagnosis as the maintenance daemon opens it (or the
        reason it refuses it)."""
        code, report = self.get("/1/report/node/diagnose")
        if code != 200:
            return None
        try:
            return diagnose.open_report(report["data"], self.key,
                                        __import__("time").time(), 60)
        except diagnose.BadReport as err:
            return err.reason

    def test_resources_and_switching_collectors(self):
        self.assertEqual(self.get("/"), (200, [1]))
        self.assertEqual(self.get("/1"), (200, None))
        # the settings come from confd: the diagnosis appears with them,
        # and only the enabled hypervisor's instance collector is there
        wait_for("diagnose listed", lambda: "diagnose" in self.listed())
        listed = self.listed()
        for name in ("cpu-avg-load", "diskstats", "lv", "inst-status-fake"):
            self.assertIn(name, listed)
        for name in ("inst-status-kvm", "inst-status-xen", "drbd"):
            self.assertNotIn(name, listed)
        code, reports = self.get("/1/report/all")
        self.assertEqual(code, 200)
        by_name = {r["name"]: r for r in reports}
        self.assertEqual(sorted(by_name), sorted(listed))
        for r in reports:
            self.assertEqual((r["version"], r["format_version"]), ("B", 1))
        inst = by_name["inst-status-fake"]
        self.assertEqual((inst["category"], inst["kind"]), ("instance", 1))
        self.assertEqual(inst["data"], {"instances": [], "status": {
            "code": 0, "message": ""}})
        # the built-in diagnosis without a bus: Ok, saying why
        self.assertEqual(self.diagnosis()["status"], "Ok")
        self.assertIn("dbus", by_name["diagnose"]["data"]["msg"])

        self.ok("gnt-cluster", "modify", "--enabled-data-collectors",
                "inst-status-fake=false,lv=no")
        wait_for("collectors off", lambda: "lv" not in self.listed())
        self.assertNotIn("inst-status-fake", self.listed())
        self.assertEqual(self.get("/1/report/storage/lv"),
                         (404, "Unable to produce a report for the"
                          " requested resource"))
        self.ok("gnt-cluster", "modify", "--enabled-data-collectors",
                "lv=yes")
        wait_for("lv on again", lambda: "lv" in self.listed())
        self.assertEqual(self.get("/nothing"), (404, "Resource not found"))

    def test_a_whitelisted_diagnose_script(self):
        directory = self.node.paths.diagnose_commands_dir
        os.makedirs(directory, mode=0o755)
        os.chmod(directory, 0o755)
        script = os.path.join(directory, "health")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho '{\"status\": \"evacuate\","
                    " \"details\": {\"disk\": \"sdb\"}}'\n")
        os.chmod(script, 0o755)
        self.ok("gnt-cluster", "modify", "--diagnose-data-collector-filename",
                "health", "--data-collector-interval", "diagnose=1")
        self.assertIn("health", self.ok("gnt-cluster", "info"))
        wait_for("the script's diagnosis", lambda: self.diagnosis() ==
                 {"status": "evacuate", "details": {"disk": "sdb"}})
        # signed with the cluster key, as confd signs
        report = self.get("/1/report/node/diagnose")[1]
        env = report["data"]
        self.assertEqual(env["hmac"], wire.sign(self.key, env["salt"],
                                                env["msg"]))
        self.assertEqual(report["category"], "node")
        # a script others may change is not run
        os.chmod(script, 0o777)
        wait_for("refused", lambda: self.diagnosis() == "unknown")
        msg = json.loads(self.get("/1/report/node/diagnose")[1]["data"]
                         ["msg"])
        self.assertIn("refused", msg["details"]["reason"])
        self.assertIn("more permissive", msg["details"]["reason"])

    def test_hbal_reads_the_cpu_load(self):
        """Ganeti's hbal asks http://<node name>:1815/1/report/default/
        cpu-avg-load; a text backend naming the node by its address
        points it at this mond."""
        if not os.access(HBAL, os.X_OK):
            self.skipTest("Ganeti's hbal is not installed (apt-get install"
                          " ganeti-htools-3.0)")
        # two samples, 5 s apart, make the first average
        wait_for("cpu load", lambda: "cpu_total" in self.get(
            "/1/report/default/cpu-avg-load")[1]["data"], timeout=30)
        ip = self.node.ip
        text = os.path.join(self.base, "cluster.txt")
        with open(text, "w") as f:
            f.write("default|11111111-1111-1111-1111-111111111111|"
                    "preferred||\n\n"
                    "%s|32768|1024|24576|512000|480000|8|N|11111111-1111-"
                    "1111-1111-111111111111|1||N|0|1|1.0\n\n"
                    "inst1|2048|10240|2|running|Y|%s||plain||1|-|N\n\n"
                    % (ip, ip))

        def hbal(*args):
            out = subprocess.run([HBAL, "-t", text, "-p"] + list(args),
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, timeout=60)
            return out.returncode, out.stdout.decode("utf-8", "replace")

        def l_cpu(output):
            lines = output.splitlines()
            header = next(i for i, line in enumerate(lines)
                          if " lCpu " in line)
            names = lines[header].split()
            # counted from the end: the flag column ("F") may be empty
            column = names.index("lCpu") - len(names)
            return float(lines[header + 1].split()[column])

        def cpu_total():
            return self.get("/1/report/default/cpu-avg-load")[1]["data"][
                "cpu_total"]

        before = cpu_total()
        code, out = hbal("--mond=yes", "--exit-on-missing-mond-data")
        after = cpu_total()
        self.assertEqual(code, 0, out)
        self.assertNotIn("Didn't receive an answer", out)
        # the node's CPU load is what mond measured (hbal prints three
        # decimals; a new sample may come between our reads)
        self.assertGreaterEqual(l_cpu(out), min(before, after) - 0.001)
        self.assertLessEqual(l_cpu(out), max(before, after) + 0.001)
        # without mond, hbal assumes one unit of load per instance
        code, plain = hbal("--mond=no")
        self.assertEqual(l_cpu(plain), 1.0)
