"""Cluster verification against real daemons: masterd + noded (fake
hypervisor, busybox OS, a file disk); the test breaks things the way they
break (a disk file deleted, a guest process killed) and reads the findings
from the jobs ``OP_CLUSTER_VERIFY`` submitted."""

import os
import signal

from ganeti.hypervisor import state

from tests.integration.daemons import FINAL, wait_for
from tests.integration.test_instance import INSTANCE, DaemonsTestCase


class RealDaemonsVerifyTests(DaemonsTestCase):
    """gnt-cluster verify's opcode against masterd + noded."""

    def status(self):
        answer = self.client.call("Query", "instance", ["status"],
                                  ["=", "name", INSTANCE])
        return answer["data"][0][0][1]

    def verify(self):
        """(config ok, group ok, group findings) of one OP_CLUSTER_VERIFY."""
        result, _ = self.run_job({"OP_ID": "OP_CLUSTER_VERIFY"})
        jobs = result["jobs"]
        self.assertEqual([ok for ok, _ in jobs], [True, True], jobs)
        answers = []
        for _, job in jobs:
            wait_for("job %s" % job, lambda: self.client.call(
                "QueryJobs", [job], ["status"])[0][0] in FINAL, timeout=120)
            status, opresult, oplog = self.client.call(
                "QueryJobs", [job], ["status", "opresult", "oplog"])[0]
            self.assertEqual(status, "success", opresult)
            answers.append((opresult[0], [e[3] for e in oplog[0]]))
        (config_ok, _), (group_ok, group_log) = answers
        return config_ok, group_ok, [line for line in group_log
                                     if line.startswith("  - ")]

    def test_missing_disk_and_killed_guest(self):
        self.run_job(self.create_op())
        node = self.vc.master.name
        self.assertEqual(self.verify(), (True, True, []))

        disk_file = self.query()["disks"][0]["logical_id"][1]
        os.unlink(disk_file)
        config_ok, group_ok, findings = self.verify()
        self.assertTrue(config_ok)
        self.assertFalse(group_ok)
        self.assertEqual(findings, [
            "  - ERROR: instance %s: disk/0 (%s) missing on node %s"
            % (INSTANCE, disk_file, node)])

        rt = state.RuntimeDir(self.vc.master.root, "fake")
        os.kill(state.read_pid_file(rt.pid_path(INSTANCE)), signal.SIGKILL)
        wait_for("the guest to die", lambda: self.status() == "ERROR_down")
        _, group_ok, findings = self.verify()
        self.assertFalse(group_ok)
        self.assertIn(
            "  - ERROR: instance %s: instance not running on its primary"
            " node %s (crashed, process-exited)" % (INSTANCE, node), findings)
        self.run_job({"OP_ID": "OP_INSTANCE_REMOVE",
                      "instance_name": INSTANCE, "ignore_failures": True})

    def test_ganetis_own_gnt_cluster_verify(self):
        """Ganeti 3.0's gnt-cluster verify: our OP_CLUSTER_VERIFY's jobs,
        its exit code, findings in its error-code format."""
        from tests import ganeti_peer
        ganeti_peer.skip_unless_available()
        node = self.vc.master

        def gnt_cluster_verify():
            return ganeti_peer.run_tool("gnt-cluster",
                                        ["verify", "--error-codes"],
                                        node.root, node.name)
        code, out = gnt_cluster_verify()
        self.assertEqual(code, 0, out)
        self.assertIn("* Verifying group 'default'", out)
        # an instance whose guest is gone: exit 1 and a parseable line
        self.run_job(self.create_op(disk_template="diskless", disks=[],
                                    no_install=True, pnode=node.name))
        self.run_job({"OP_ID": "OP_INSTANCE_STARTUP",
                      "instance_name": INSTANCE})
        rt = state.RuntimeDir(node.root, "fake")
        os.kill(state.read_pid_file(rt.pid_path(INSTANCE)), signal.SIGKILL)
        wait_for("the guest to die", lambda: self.status() == "ERROR_down")
        code, out = gnt_cluster_verify()
        self.assertEqual(code, 1, out)
        self.assertIn("  - ERROR:EINSTANCEDOWN:instance:%s:instance not"
                      " running on its primary node %s (crashed,"
                      " process-exited)" % (INSTANCE, node.name), out)
