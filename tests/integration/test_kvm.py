"""A real VM through the master: masterd + noded, kvm hypervisor, qemu TCG.

A one-node virtual cluster (random 127.x.y.z, short /tmp root: the QMP and
serial socket paths must fit in 108 bytes) with kvm enabled and
``enabled_user_shutdown`` on.  Instances boot the tiny real guest
(:mod:`ganeti.dev.tinyguest`) by direct kernel boot, software emulation
(``kvm_flag`` disabled), with a file disk installed by the busybox OS.

* ``ganeti_test=poweroff``: the guest powers itself off; the instance's
  ``status`` becomes ``USER_down`` (not ``ERROR_down``), and the watcher's
  step (OP_INSTANCE_SHUTDOWN with ``admin_state_source`` "user") records
  it: admin_state down, source user (user shutdown detection,
  docs/instances.rst).
* ``ganeti_test=idle``: the qemu process is SIGKILLed; that is a crash:
  ``ERROR_down``.
* ``security_model=pool``: with the cluster's uid pool set, the instance's
  qemu runs as a pool uid; the uid is released when it is shut down.

Skipped with the reason when qemu or the guest cannot be had.  The guests
boot one at a time (each takes a core for a few seconds).
"""

import os
import signal
import subprocess
import sys

from twisted.trial import unittest

from ganeti import constants
from ganeti.hypervisor import state

from tests.integration import guest as test_guest
from tests.integration.daemons import (PROJECT, RunningClusterTestCase,
                                       WatcherMixin,
                                       random_ips, short_tmpdir, wait_for)

#: seconds a TCG boot may take on a busy machine
BOOT_DEADLINE = 90


class KvmClusterTestCase(WatcherMixin, RunningClusterTestCase):
    """The one-node kvm cluster and its helpers (no tests)."""

    timeout = 300
    HYPERVISORS = (constants.HT_KVM,)
    BASE_PREFIX = "gnt-k-"

    def setUp(self):
        self.qemu, self.guest = test_guest.guest_or_skip()
        RunningClusterTestCase.setUp(self)
        # the cluster's kvm defaults name files this node has, so that
        # verification has nothing to say about them
        self.run_job({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                      "enabled_user_shutdown": True,
                      "hvparams": {"kvm": {
                          "kernel_path": self.guest.kernel,
                          "initrd_path": self.guest.initrd,
                          "root_path": "", "kvm_flag": "disabled"}}})
        self.rt = state.RuntimeDir(self.vc.master.root, constants.HT_KVM)

    def run_job(self, op, expect="success"):
        return RunningClusterTestCase.run_job(self, op, expect)[0]

    def fields(self, name, *names):
        answer = self.client.call("Query", "instance", list(names),
                                  ["=", "name", name])
        return [value for _, value in answer["data"][0]]

    def status(self, name):
        return self.fields(name, "status")[0]

    def console(self, name):
        try:
            with open(self.rt.ctrl_path(name, "serial.log"), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return "(no console log)"

    def wait_status(self, name, wanted, deadline=BOOT_DEADLINE):
        seen = []

        def check():
            current = self.status(name)
            if not seen or seen[-1] != current:
                seen.append(current)
            return current == wanted
        try:
            wait_for("%s to be %s" % (name, wanted), check, deadline, 0.25)
        except AssertionError:
            self.fail("%s never became %s (seen: %s); console:\n%s"
                      % (name, wanted, " -> ".join(seen),
                         self.console(name)))
        return seen

    def qemu_pid_or_none(self, name):
        return state.read_pid_file(self.rt.pid_path(name))

    def create(self, name, mode, user_shutdown=True, **hvparams):
        self.run_job({
            "OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
            "mode": "create", "hypervisor": constants.HT_KVM,
            "disk_template": "file", "disks": [{"size": 16}], "nics": [],
            "os_type": "busybox+default", "pnode": self.vc.master.name,
            "beparams": {"memory": 256, "vcpus": 1},
            "hvparams": {"kernel_path": self.guest.kernel,
                         "initrd_path": self.guest.initrd,
                         "root_path": "", "kvm_flag": "disabled",
                         "kernel_args": "quiet ganeti_test=%s" % mode,
                         "serial_speed": 115200,
                         "user_shutdown": user_shutdown, **hvparams},
            "name_check": False, "ip_check": False,
            # no NIC (it would change the host's network: a bridge or
            # routes), a small disk: below the default instance policy
            "ignore_ipolicy": True})

    def qemu_pid(self, name):
        pid = state.read_pid_file(self.rt.pid_path(name))
        self.assertTrue(state.process_alive(pid), "no qemu for %s" % name)
        return pid


class KvmClusterTests(KvmClusterTestCase):

    def test_guest_poweroff_is_a_user_shutdown(self):
        self.create("vm1", "poweroff")
        seen = self.wait_status("vm1", "USER_down")
        self.assertNotIn("ERROR_down", seen)
        self.assertIn("ganeti-test: booted, mode=poweroff",
                      self.console("vm1"))
        # the domain is kept (qemu still there, in its shutdown state)
        pid = self.qemu_pid("vm1")
        self.assertEqual(self.fields("vm1", "admin_state", "oper_state"),
                         ["up", False])
        # cluster verify: a user shutdown is no error, only a warning
        ok = self.run_job({"OP_ID": "OP_CLUSTER_VERIFY_GROUP",
                           "group_name": "default"})
        self.assertTrue(ok)
        # the watcher records the user's will: down, by the user
        code, log = self.watcher()
        self.assertEqual(code, 0, log)
        self.assertEqual(
            self.fields("vm1", "admin_state", "admin_state_source",
                        "status"), ["down", "user", "USER_down"])
        wait_for("qemu to be gone", lambda: not state.process_alive(pid),
                 10)
        self.run_job({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "vm1",
                      "shutdown_timeout": 10})
        self.assertEqual(self.client.call("Query", "instance", ["name"],
                                          None)["data"], [])

    def test_killed_qemu_is_a_crash(self):
        self.create("vm2", "idle")
        self.wait_status("vm2", "running")
        wait_for("the guest to boot", lambda: "ganeti-test: booted" in
                 self.console("vm2"), BOOT_DEADLINE, 0.25)
        os.kill(self.qemu_pid("vm2"), signal.SIGKILL)
        seen = self.wait_status("vm2", "ERROR_down", 30)
        self.assertNotIn("USER_down", seen)
        # the watcher's user-shutdown step refuses a crashed instance
        self.run_job({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                      "instance_name": "vm2", "admin_state_source": "user"},
                     expect="error")
        self.assertEqual(self.fields("vm2", "admin_state"), ["up"])
        # the watcher restarts it: a new qemu, the guest boots again
        dead = self.qemu_pid_or_none("vm2")
        code, log = self.watcher()
        self.assertEqual(code, 0, log)
        self.wait_status("vm2", "running")
        self.assertNotEqual(self.qemu_pid("vm2"), dead)
        self.run_job({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "vm2",
                      "shutdown_timeout": 10})

    def test_poweroff_without_user_shutdown_is_restarted(self):
        # the other setting: the guest's poweroff is not the user's will
        # (hvparam user_shutdown off): a failure, restarted by the watcher
        self.create("vm3", "poweroff", user_shutdown=False)
        self.wait_status("vm3", "ERROR_down")
        dead = self.qemu_pid_or_none("vm3")
        code, log = self.watcher()
        self.assertEqual(code, 0, log)
        self.assertIn("Restarting instance vm3 (attempt #1)", log)
        # a new qemu was started for it (its guest powers off again: this
        # one always does)
        wait_for("a new qemu for vm3", lambda: self.qemu_pid_or_none(
            "vm3") not in (None, dead), BOOT_DEADLINE, 0.25)
        self.assertEqual(self.fields("vm3", "admin_state"), ["up"])
        self.run_job({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "vm3",
                      "shutdown_timeout": 10})

    def test_security_model_pool(self):
        # the cluster's uid pool reaches the node (ssconf_uid_pool); the
        # instance's qemu runs as one of its uids, released at shutdown
        low = 3500000 + os.getpid() % 100000
        self.run_job({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                      "uid_pool": [[low, low + 1]]})
        self.create("vm4", "idle", security_model="pool")
        self.wait_status("vm4", "running")
        pid = self.qemu_pid("vm4")
        with open("/proc/%d/status" % pid) as f:
            uids = [line.split()[1:] for line in f
                    if line.startswith("Uid:")][0]
        self.assertIn(int(uids[0]), (low, low + 1))
        self.assertEqual(len(set(uids)), 1, uids)
        wait_for("the guest to boot as the pool uid", lambda: "ganeti-test: "
                 "booted" in self.console("vm4"), BOOT_DEADLINE, 0.25)
        lock_dir = self.vc.master.paths.uid_pool_lock_dir
        self.assertEqual(os.listdir(lock_dir), [uids[0]])
        self.run_job({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "vm4",
                      "timeout": 0})
        self.assertEqual(os.listdir(lock_dir), [])
        self.run_job({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "vm4",
                      "shutdown_timeout": 10})


class KvmDemoTests(unittest.TestCase):
    """``python -m ganeti.dev.demo --kvm --once`` boots a real guest."""

    timeout = 180

    def test_demo_kvm_once(self):
        test_guest.guest_or_skip()
        base = short_tmpdir(self, "gnt-dk-")
        out = subprocess.run(
            [sys.executable, "-m", "ganeti.dev.demo", "--base", base, "--once",
             "--nodes", "1", "--kvm", "--first-address", random_ips(1)[0]],
            env=dict(os.environ, PYTHONPATH=PROJECT),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=150)
        text = out.stdout.decode("utf-8", "replace")
        self.assertEqual(out.returncode, 0, text)
        log = os.path.join(base, "node1.example.com", "var", "run", "ganeti",
                           "kvm-hypervisor", "ctrl",
                           "inst1.example.com.serial.log")
        self.assertIn("inst1.example.com    log    %s\n" % log, text)
        self.assertIn("says   ganeti-test: booted, mode=idle", text)
        rows = [line.split() for line in text.splitlines()]
        self.assertIn(["inst1.example.com", "kvm", "busybox+default",
                       "node1.example.com", "running", "256M"], rows)
