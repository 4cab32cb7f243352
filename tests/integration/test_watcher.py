"""``ganeti-watcher --once`` as a real process on a virtual cluster.

Two nodes (node daemons, the master daemon), the fake hypervisor, the
busybox OS and file disks.  An instance whose guest died is started again
by the watcher; one whose guest powered itself off is recorded as shut
down by its user (``ADMIN_down``, source ``user``); the watcher on the
other node honours the pause and checks its node only; the pause survives
a restart of the master daemon.
"""

import os
import signal

from ganeti import luxi
from ganeti.hypervisor import state

from tests.integration.daemons import ETC_OS, WatcherMixin, wait_for
from tests.integration.test_migration import ClusterTestCase

WEB = "web1.example.com"
DB = "db1.example.com"


class WatcherTests(WatcherMixin, ClusterTestCase):

    NODES = 2
    BASE_PREFIX = "gnt-w-"

    def create(self, name):
        self.run_job({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
                      "mode": "create", "disk_template": "file",
                      "disks": [{"size": 1024}], "nics": [{}],
                      "os_type": "busybox+default",
                      "pnode": self.vc.master.name,
                      "beparams": {"memory": 128}, "name_check": False,
                      "ip_check": False})

    def guest_pid(self, name):
        rt = state.RuntimeDir(self.vc.master.root, "fake")
        return state.read_pid_file(rt.pid_path(name))

    def instance(self, name):
        fields = ["status", "admin_state", "admin_state_source",
                  "oper_hvstate"]
        result = self.client.call("Query", "instance", fields,
                                  ["==", "name", name])
        (row,) = result["data"]
        return dict(zip(fields, (cell[1] for cell in row)))

    def run_state_events(self):
        """(name, oper_state, status) of the run-state events the master
        keeps (WatchEvents from the oldest kept: one batch)."""
        client = luxi.BlockingClient(self.socket, 60)
        try:
            _, batches = client.watch_events(since=-1, kinds=["instance"])
            events = next(batches)
        finally:
            client.close()
        return [(e["name"], e["data"]["oper_state"], e["data"]["status"])
                for e in events if e["type"] == "state"
                and "oper_state" in e["data"]]

    def test_restart_and_user_shutdown(self):
        self.create(WEB)
        self.create(DB)
        self.run_job({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                      "enabled_user_shutdown": True})
        code, log = self.watcher(checks=True)
        self.assertEqual(code, 0, log)
        self.assertNotIn("Restarting", log)
        # a first pass takes every node for freshly rebooted
        for name in (WEB, DB):
            self.assertIn("activating the disks of instance %s" % name, log)
            self.assertIn("(activate-disks of %s) succeeded" % name, log)
        # the daemons of the master node: this cluster runs no RAPI and no
        # confd, which the watcher reports (and leaves alone)
        self.assertNotIn("daemons failed", log)
        self.assertNotIn("ganeti-noded does not answer", log)
        self.assertIn("ganeti-rapi does not answer: https://%s:5080/version"
                      % self.vc.master.ip, log)
        self.assertIn("ganeti-confd does not answer", log)

        # the guest of web1 dies: ERROR_down; the watcher starts it again
        old_pid = self.guest_pid(WEB)
        os.kill(old_pid, signal.SIGKILL)
        wait_for("crash seen", lambda: self.instance(WEB)["status"]
                 == "ERROR_down")
        # the user of db1 powers it off from inside: USER_down, still up
        os.kill(self.guest_pid(DB), signal.SIGUSR1)
        wait_for("poweroff seen", lambda: self.instance(DB)["status"]
                 == "USER_down")
        self.assertEqual(self.instance(DB)["admin_state"], "up")

        code, log = self.watcher()
        self.assertEqual(code, 0, log)
        self.assertIn("Restarting instance %s (attempt #1)" % WEB, log)
        self.assertIn("Instance %s was shut down by its user; recording it"
                      " as down" % DB, log)
        self.assertIn("(restart of %s) succeeded" % WEB, log)
        self.assertIn("(user-shutdown of %s) succeeded" % DB, log)
        web = self.instance(WEB)
        self.assertEqual((web["status"], web["oper_hvstate"]),
                         ("running", "running"))
        self.assertNotEqual(self.guest_pid(WEB), old_pid)
        db = self.instance(DB)
        self.assertEqual((db["status"], db["admin_state"],
                          db["admin_state_source"], db["oper_hvstate"]),
                         ("USER_down", "down", "user", None))
        # the watcher's jobs say who submitted them
        jobs = self.client.call("QueryJobs", None, ["ops"])
        sources = [op["reason"][0][0] for (ops,) in jobs for op in ops
                   if op["OP_ID"] in ("OP_INSTANCE_STARTUP",
                                      "OP_INSTANCE_SHUTDOWN")
                   and op.get("reason")]
        self.assertEqual(sources, ["gnt:watcher", "gnt:watcher"])
        out = self.ok("gnt-instance", "info", WEB)
        self.assertIn("Watcher restarts: 1 attempt so far by the watcher",
                      out)

        # the master announced the crash and the poweroff on its event
        # stream when its queries saw them; the watcher's jobs (restart,
        # user shutdown) are no run-state events
        self.assertEqual(self.run_state_events(), [
            (WEB, False, "ERROR_down"), (DB, False, "USER_down")])

        # running again: the next pass resets the counter
        code, log = self.watcher()
        self.assertIn("Instance %s runs again; its restart counter is reset"
                      % WEB, log)
        self.assertNotIn("Watcher restarts", self.ok("gnt-instance", "info",
                                                     WEB))

        # the master node "reboots" (in a virtual cluster: its node daemon
        # restarts; the guests live on): its instances' disks are activated
        master = self.vc.master
        noded = self.nodeds[master.name]
        noded.send_signal(signal.SIGTERM)
        noded.wait(30)
        self.nodeds[master.name] = self.start_noded(
            master, "--os-search-path", ETC_OS, "--file-storage-dir",
            self.fsd, "--file-storage-dir", self.shared)
        code, log = self.watcher()
        self.assertEqual(code, 0, log)
        self.assertIn("Node %s rebooted (boot id" % master.name, log)
        for name in (WEB, DB):        # DB: down by its user, disks active
            self.assertIn("(activate-disks of %s) succeeded" % name, log)
        code, log = self.watcher()
        self.assertNotIn("activate", log)

        # the watcher on the other node: no master there, its node daemon
        # answers
        other = self.vc.nodes[1]
        code, log = self.watcher(other, checks=True)
        self.assertEqual(code, 0, log)
        self.assertNotIn("daemons failed", log)
        self.assertNotIn("does not answer", log)
        self.assertNotIn("Restarting", log)

    def test_pause_survives_a_master_restart(self):
        self.create(WEB)
        out = self.ok("gnt-cluster", "watcher", "pause", "1h")
        self.assertIn("The watcher is paused until", out)
        # every node has its own copy
        for node in self.vc.nodes:
            path = os.path.join(node.paths.data_dir, "watcher.pause")
            self.assertTrue(os.path.exists(path), node.name)

        self.masterd.send_signal(signal.SIGTERM)
        self.masterd.wait(30)
        self.start_master()
        self.assertIn("The watcher is paused until",
                      self.ok("gnt-cluster", "watcher", "info"))

        os.kill(self.guest_pid(WEB), signal.SIGKILL)
        wait_for("crash seen", lambda: self.instance(WEB)["status"]
                 == "ERROR_down")
        for node in self.vc.nodes:
            code, log = self.watcher(node)
            self.assertEqual(code, 0, log)
            self.assertIn("The watcher is paused until", log)
        self.assertEqual(self.instance(WEB)["status"], "ERROR_down")

        self.ok("gnt-cluster", "watcher", "continue")
        for node in self.vc.nodes:
            path = os.path.join(node.paths.data_dir, "watcher.pause")
            self.assertFalse(os.path.exists(path), node.name)
        code, log = self.watcher()
        self.assertEqual(code, 0, log)
        self.assertEqual(self.instance(WEB)["status"], "running")

    def test_no_master_daemon_fails_a_once_pass_on_the_master(self):
        # (its socket is there but nobody answers: the pass cannot be done)
        self.masterd.send_signal(signal.SIGKILL)
        self.masterd.wait(30)
        code, log = self.watcher()
        self.assertEqual(code, 1, log)
        self.assertIn("The master daemon does not answer", log)

