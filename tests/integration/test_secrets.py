"""Secret and private OS parameters through the real daemons.

An instance created over RAPI with a secret (``osparams_secret``) and a
private (``osparams_private``) OS parameter: the OS create script on the
node gets both, and afterwards no file of the queue directory (job file,
journal, archive) holds the secret, no answer (RAPI anonymous and
authenticated, luxi QueryJobs / Query / WaitForJobChange, gnt-job info,
instance and cluster information) holds either, no daemon's log holds
either, and the queue's files are for their owner only.  A job holding a
secret that is still queued when the master daemon restarts fails, asking
to be submitted again.
"""

import json
import os
import signal

from tests import ganeti_peer
from tests.integration.daemons import GntCommandsMixin, wait_for
from tests.integration.test_rapi import PASSWORD, USER, RapiDaemonTestCase
from tests.test_jqueue_secrets import loose_modes, tree_holds
from tests.test_os import read_install_record

INSTANCE = "inst1.example.com"
SECRET = "root-pw-4f9a1c77"
PRIVATE = "motd-private-b83e02"


class SecretParametersTests(GntCommandsMixin, RapiDaemonTestCase):

    timeout = 300

    def setUp(self):
        RapiDaemonTestCase.setUp(self)
        self.gnt_root = self.vc.master.root
        self.queue_dir = self.vc.master.paths.queue_dir

    def stop_master(self):
        """SIGTERM to the master daemon: a clean stop."""
        os.kill(self.masterd.pid, signal.SIGTERM)
        self.masterd.wait(60)
        self.vc.processes = [(d, p) for d, p in self.vc.processes
                             if p is not self.masterd]

    def assert_hidden(self, what, value):
        text = value if isinstance(value, str) else json.dumps(value)
        self.assertNotIn(SECRET, text, what)
        self.assertNotIn(PRIVATE, text, what)

    def test_create_over_rapi_leaks_nothing(self):
        auth = (USER, PASSWORD)
        resp, job = self.http("POST", "/2/instances", {
            "__version__": 1, "mode": "create", "name": INSTANCE,
            "disk_template": "file", "disks": [{"size": 1024}],
            "nics": [{}], "os": "busybox+default",
            "pnode": self.vc.master.name, "beparams": {"memory": 128},
            "name_check": False, "ip_check": False,
            "osparams": {"fail_create": "no"},
            "osparams_private": {"motd": PRIVATE},
            "osparams_secret": {"root_password": SECRET}}, user=auth)
        self.assertEqual(resp.status, 200, job)
        done = self.wait_job(job)
        self.assertEqual(done["status"], "success", done)

        # the OS create script on the node had the values
        info = self.client.call("Query", "instance", ["disk.names", "uuid"],
                                None)
        self.assertEqual(len(info["data"]), 1)
        disk_dir = os.path.join(self.fsd, INSTANCE)
        (disk,) = [os.path.join(disk_dir, n) for n in os.listdir(disk_dir)]
        header, env = read_install_record(disk)
        self.assertEqual(env["OSP_ROOT_PASSWORD"], SECRET)
        self.assertEqual(env["OSP_MOTD"], PRIVATE)
        self.assertEqual(env["OSP_FAIL_CREATE"], "no")
        self.assertIn("motd=" + PRIVATE, header)

        # RAPI, anonymous (plain HTTP) and authenticated (HTTPS)
        for tls, user in ((False, None), (True, auth)):
            resp, shown = self.http("GET", "/2/jobs/%s" % job, tls=tls,
                                    user=user)
            self.assertEqual(resp.status, 200)
            self.assert_hidden("GET /2/jobs/ID", shown)
            op = shown["ops"][0]
            self.assertEqual(op["osparams_secret"],
                             {"root_password": "<redacted>"})
            self.assertEqual(op["osparams_private"], {"motd": "<redacted>"})
            self.assertEqual(op["osparams"], {"fail_create": "no"})
            resp, shown = self.http("GET", "/2/jobs?bulk=1", tls=tls,
                                    user=user)
            self.assert_hidden("GET /2/jobs?bulk=1", shown)
        # luxi
        rows = self.client.call("QueryJobs", [job], ["ops", "oplog",
                                                     "opresult", "summary"])
        self.assert_hidden("QueryJobs", rows)
        self.assertIn("<redacted>", json.dumps(rows))
        self.assert_hidden("Query job", self.client.call(
            "Query", "job", ["ops", "oplog"], None))
        self.assert_hidden("WaitForJobChange", self.client.call(
            "WaitForJobChange", job, ["ops", "status"], None, None, 5))
        # our gnt-job info, and Ganeti's where it is installed
        out = self.ok("gnt-job", "info", str(job))
        self.assertIn("OP_INSTANCE_CREATE", out)
        self.assertIn("<redacted>", out)
        self.assert_hidden("gnt-job info", out)
        if ganeti_peer.unavailable_reason() is None:
            code, out = ganeti_peer.run_tool(
                "gnt-job", ["info", str(job)], self.vc.master.root,
                self.vc.master.name, timeout=60)
            self.assertEqual(code, 0, out)
            # Ganeti's client shows private values by name ("<motd>")
            self.assertIn("OP_INSTANCE_CREATE", out)
            self.assert_hidden("Ganeti's gnt-job info", out)
        # the instance and the cluster
        for path in ("/2/instances/%s" % INSTANCE, "/2/instances?bulk=1",
                     "/2/info"):
            resp, shown = self.http("GET", path)
            self.assertEqual(resp.status, 200, path)
            self.assert_hidden(path, shown)
        resp, info_job = self.http("GET", "/2/instances/%s/info" % INSTANCE,
                                   user=auth)
        self.assert_hidden("instance info", self.wait_job(info_job))
        self.assert_hidden("gnt-instance info",
                           self.ok("gnt-instance", "info", INSTANCE))
        self.assert_hidden("gnt-cluster info", self.ok("gnt-cluster", "info"))

        # the disk: the queue never had the secret; config.data keeps the
        # private value (reinstalls need it), never the secret one
        self.assertEqual(tree_holds(self.queue_dir, SECRET), [])
        with open(self.vc.master.paths.config_file) as f:
            config = f.read()
        self.assertIn(PRIVATE, config)
        self.assertNotIn(SECRET, config)
        self.assertEqual(os.stat(self.vc.master.paths.config_file).st_mode
                         & 0o777, 0o600)
        # archived too, after a clean stop of the master
        self.assertTrue(self.client.call("ArchiveJob", job))
        self.stop_master()
        self.assertTrue(os.path.exists(os.path.join(
            self.queue_dir, "archive", "0", "job-%d" % job)))
        self.assertEqual(tree_holds(self.queue_dir, SECRET), [])
        self.assertEqual(loose_modes(self.queue_dir), {})
        logs = set()
        for base, _, names in os.walk(self.vc.base):
            for name in names:
                if name.endswith(".log"):
                    logs.add(name)
                    with open(os.path.join(base, name), errors="replace") as f:
                        self.assert_hidden(name, f.read())
        self.assertTrue({"ganeti-masterd.log", "ganeti-noded.log",
                         "ganeti-rapi.log"} <= logs, logs)
        self.assertTrue(any(n.startswith("add-busybox") for n in logs), logs)

    def test_a_queued_job_with_secrets_fails_after_a_restart(self):
        blocker = self.client.call("SubmitJob", [{
            "OP_ID": "OP_TEST_DELAY", "duration": 120.0}])
        wait_for("the first job running", lambda: self.client.call(
            "QueryJobs", [blocker], ["status"])[0][0] == "running")
        job = self.client.call("SubmitJob", [{
            "OP_ID": "OP_INSTANCE_CREATE", "instance_name": INSTANCE,
            "mode": "create", "disk_template": "file",
            "disks": [{"size": 1024}], "nics": [{}],
            "os_type": "busybox+default", "pnode": self.vc.master.name,
            "name_check": False, "ip_check": False,
            "osparams_secret": {"root_password": SECRET},
            "depends": [[blocker, []]]}])
        wait_for("the second job waiting", lambda: self.client.call(
            "QueryJobs", [job], ["status"])[0][0] == "waiting")
        self.client.close()
        self.stop_master()
        self.assertEqual(tree_holds(self.queue_dir, SECRET), [])
        self.start_master()
        status, result = self.client.call("QueryJobs", [job],
                                          ["status", "opresult"])[0]
        self.assertEqual(status, "error")
        self.assertEqual(result[0][0], "OpExecError")
        self.assertIn("secret parameters (osparams_secret)", result[0][1][0])
        self.assertIn("submit the job again", result[0][1][0])
        # nothing was created with a placeholder for a password
        self.assertEqual(self.client.call(
            "Query", "instance", ["name"], None)["data"], [])
        self.assertEqual(self.client.call("QueryJobs", [blocker],
                                          ["status"])[0][0], "error")
        out = self.ok("gnt-job", "info", str(job))
        self.assertIn("submit the job again", out)
