"""ganeti-masterd as a real process: jobs over luxi, crash safety, Ganeti's CLI."""

import os
import signal
import subprocess
import time

from twisted.trial import unittest

from ganeti import luxi
from ganeti.vcluster import VirtualCluster

from tests import ganeti_peer


def wait_for(what, predicate, timeout=30.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out waiting for %s" % what)


class MasterdTestCase(unittest.TestCase):

    def setUp(self):
        # Short base path: UNIX socket paths are limited to 108 bytes.
        import tempfile
        self.base = tempfile.mkdtemp(prefix="gnt-m-", dir="/tmp")
        self.vc = VirtualCluster(os.path.join(self.base, "vc"), node_count=1)
        self.vc.create()
        self.addCleanup(self._cleanup)
        self.socket = self.vc.master.paths.master_socket

    def _cleanup(self):
        self.vc.stop_all()
        import shutil
        shutil.rmtree(self.base, True)

    def start_master(self, *extra):
        proc = self.vc.start("ganeti-masterd", self.vc.twistd_command(
            "ganeti-masterd", self.vc.master, *extra))
        wait_for("master socket", lambda: self._answers(proc))
        return proc

    def _answers(self, proc):
        if proc.poll() is not None:
            raise AssertionError("masterd exited with %s" % proc.returncode)
        try:
            with luxi.BlockingClient(self.socket, 5) as c:
                c.call("QueryConfigValues", ["cluster_name"])
            return True
        except luxi.NoMasterError:
            return False

    def client(self):
        c = luxi.BlockingClient(self.socket, 30)
        self.addCleanup(c.close)
        return c

    def job_status(self, c, job_id):
        return c.call("QueryJobs", [job_id], ["status"])[0][0]


class JobTests(MasterdTestCase):

    def test_job_runs_and_reports_like_ganeti(self):
        self.start_master()
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
        self.start_master()
        c = self.client()
        from ganeti import errors
        err = self.assertRaises(errors.OpPrereqError, c.call, "SubmitJob",
                                [{"OP_ID": "OP_TEST_DELAY",
                                  "duration": "x"}])
        self.assertIn("duration", str(err))
        self.assertEqual(c.call("QueryJobs", None, ["id"]), [])

    def test_sigkill_loses_no_acknowledged_job(self):
        self.start_master("--max-running-jobs", "1")
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
        self.start_master()
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
        reason = ganeti_peer.unavailable_reason()
        if reason:
            raise unittest.SkipTest(reason)
        MasterdTestCase.setUp(self)

    def gnt(self, command, *args):
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ganeti_peer.GANETI_LIB,
               "GANETI_ROOTDIR": self.vc.master.root,
               "GANETI_HOSTNAME": self.vc.master.name, "LANG": "C.UTF-8"}
        out = subprocess.run(
            [ganeti_peer.GANETI_PYTHON,
             os.path.join(ganeti_peer.GANETI_LIB, command)] + list(args),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            timeout=60)
        return out.returncode, out.stdout.decode("utf-8", "replace")

    def test_gnt_cluster_info_tags_and_debug_delay(self):
        self.start_master()
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
        from ganeti import demo
        store = self.vc.load()
        demo.populate(store)  # inst1 on node1 (noded runs) + a reservation
        self.vc.start("ganeti-noded", self.vc.twistd_command(
            "ganeti-noded", self.vc.master))
        self.start_master()
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
