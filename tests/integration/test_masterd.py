"""ganeti-masterd as a real process: jobs over luxi, crash safety, Ganeti's CLI."""

import os
import signal

from ganeti import constants
from ganeti import luxi

from tests import ganeti_peer
from tests.integration.daemons import VirtualClusterTestCase, wait_for


class MasterdTestCase(VirtualClusterTestCase):

    HYPERVISORS = (constants.HT_FAKE, constants.HT_KVM)
    BASE_PREFIX = "gnt-m-"

    def setUp(self):
        VirtualClusterTestCase.setUp(self)
        self.socket = self.vc.master.paths.master_socket

    def client(self):
        c = luxi.BlockingClient(self.socket, 30)
        self.addCleanup(c.close)
        return c

    def job_status(self, c, job_id):
        return c.call("QueryJobs", [job_id], ["status"])[0][0]


class JobTests(MasterdTestCase):

    def test_job_runs_and_reports_like_ganeti(self):
        self.start_masterd()
        c = self.client()
        job = c.call("SubmitJob", [{"OP_ID": "OP_TEST_DELAY",
                                    "duration": 0.1, "repeat": 2}])
        wait_for("job end", lambda: self.job_status(c, job) == "success")
        # The master keeps its ssconf files current.
        c.call("SubmitJob", [{"OP_ID": "OP_TAGS_SET", "kind": "cluster",
                              "tags": ["ssconf-check"]}])
        path = self.vc.master.paths.ssconf_file("cluster_tags")
        wait_for("ssconf_cluster_tags", lambda: os.path.exists(path) and
                 "ssconf-check" in open(path).read())
        status, result, log, summary = c.call(
            "QueryJobs", [job], ["status", "opresult", "oplog",
                                 "summary"])[0]
        self.assertEqual(result, [True])
        self.assertEqual(summary, ["TEST_DELAY(0.1)"])
        self.assertEqual([entry[3] for entry in log[0]],
                         ["Test delay iteration 1/2",
                          "Test delay iteration 2/2"])

    def test_bad_opcode_is_refused_and_not_queued(self):
        self.start_masterd()
        c = self.client()
        from ganeti import errors
        err = self.assertRaises(errors.OpPrereqError, c.call, "SubmitJob",
                                [{"OP_ID": "OP_TEST_DELAY",
                                  "duration": "x"}])
        self.assertIn("duration", str(err))
        self.assertEqual(c.call("QueryJobs", None, ["id"]), [])

    def test_sigkill_loses_no_acknowledged_job(self):
        self.start_masterd("--max-running-jobs", "1")
        c = self.client()
        long_job = c.call("SubmitJob", [{"OP_ID": "OP_TEST_DELAY",
                                         "duration": 60.0}])
        short = [c.call("SubmitJob", [{"OP_ID": "OP_TEST_DELAY",
                                       "duration": 0.05}])
                 for _ in range(5)]
        wait_for("long job running",
                 lambda: self.job_status(c, long_job) == "running")
        self.assertEqual({self.job_status(c, j) for j in short}, {"queued"})
        # Crash: no chance to write anything more.
        for _, proc in self.vc.processes:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        self.vc.processes = []
        c.close()
        self.start_masterd()
        c = self.client()
        ids = [row[0] for row in c.call("QueryJobs", None, ["id"])]
        self.assertEqual(sorted(ids), sorted([long_job] + short))
        # The interrupted job is failed with a clear message ...
        status, result = c.call("QueryJobs", [long_job],
                                ["status", "opresult"])[0]
        self.assertEqual(status, "error")
        self.assertIn("master daemon stopped", str(result).lower())
        # ... and every queued one runs.
        for job in short:
            wait_for("job %s" % job,
                     lambda job=job: self.job_status(c, job) == "success")


class GanetiClientTests(MasterdTestCase):
    """Ganeti 3.0's own command-line tools drive our master."""

    def setUp(self):
        ganeti_peer.skip_unless_available()
        MasterdTestCase.setUp(self)

    def gnt(self, command, *args):
        return ganeti_peer.run_tool(command, args, self.vc.master.root,
                                    self.vc.master.name, timeout=60)

    def test_gnt_cluster_info_tags_and_debug_delay(self):
        self.start_masterd()
        code, out = self.gnt("gnt-cluster", "info")
        self.assertEqual(code, 0, out)
        self.assertIn("Cluster name: cluster.example.com", out)
        self.assertIn("Master node: node1.example.com", out)
        code, out = self.gnt("gnt-cluster", "add-tags", "env:test", "web")
        self.assertEqual(code, 0, out)
        code, out = self.gnt("gnt-cluster", "list-tags")
        self.assertEqual(out.split(), ["env:test", "web"])
        code, out = self.gnt("gnt-cluster", "add-tags", "bad tag")
        self.assertNotEqual(code, 0)
        code, out = self.gnt("gnt-debug", "delay", "0.2")
        self.assertEqual(code, 0, out)

    def test_gnt_list_commands_with_live_data(self):
        from ganeti.dev import demo
        store = self.vc.load()
        demo.populate(store)  # inst1 on node1 (noded runs) + a reservation
        self.vc.start("ganeti-noded", self.vc.twistd_command(
            "ganeti-noded", self.vc.master))
        self.start_masterd()
        code, out = self.gnt("gnt-debug", "delay", "0.1")
        self.assertEqual(code, 0, out)
        code, out = self.gnt("gnt-job", "list", "--no-headers")
        self.assertEqual(out.split(), ["1", "success", "TEST_DELAY(0.1)"])
        code, out = self.gnt("gnt-instance", "list", "--no-headers",
                             "-o", "name,pnode,status,be/maxmem,forthcoming")
        self.assertEqual(code, 0, out)
        rows = [line.split() for line in out.splitlines()]
        self.assertIn(["inst1.example.com", "node1.example.com",
                       "ADMIN_down", "512M", "N"], rows)
        forthcoming = [r for r in rows if r[-1] == "Y"]
        self.assertEqual(len(forthcoming), 1, rows)
        # Node memory comes from the node daemon over mutual TLS.
        code, out = self.gnt("gnt-node", "list", "--no-headers", "-o",
                             "name,mtotal,pinst_cnt", "--units", "m")
        self.assertEqual(code, 0, out)
        name, mtotal, pinst = out.split()
        self.assertEqual((name, pinst), ("node1.example.com", "2"))
        self.assertGreater(int(mtotal), 0)
