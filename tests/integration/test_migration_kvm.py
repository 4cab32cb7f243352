"""A real live migration: qemu to qemu between two nodes, through the master.

A 2-node virtual cluster (one noded per node, masterd on the first), kvm
under TCG, the tiny real guest (ganeti.dev.tinyguest) booted by direct
kernel boot with a ``sharedfile`` disk in the cluster's shared directory.
The guest boots once on node1 and is then live-migrated to node2 (qemu
``-incoming`` there, QMP ``migrate`` + ``query-migrate`` on node1) and
back non-live.  That it was migrated and not restarted shows in the target's
console log: it never printed a boot line there.

Skipped with the reason when qemu or the guest cannot be had.  One boot.
"""

import os

from ganeti import constants
from ganeti.hypervisor import state

from tests.integration import guest as test_guest
from tests.integration.daemons import wait_for
from tests.integration.test_migration import ClusterTestCase

BOOT_DEADLINE = 90
NAME = "vm1"


class KvmMigrationTests(ClusterTestCase):

    timeout = 300
    NODES = 2
    HYPERVISORS = (constants.HT_KVM,)

    def setUp(self):
        self.qemu, self.guest = test_guest.guest_or_skip()
        ClusterTestCase.setUp(self)
        self.run_job({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                      "hvparams": {"kvm": {
                          "kernel_path": self.guest.kernel,
                          "initrd_path": self.guest.initrd,
                          "root_path": "", "kvm_flag": "disabled"}}})

    def rt(self, idx):
        return state.RuntimeDir(self.node(idx).root, constants.HT_KVM)

    def console(self, idx):
        try:
            with open(self.rt(idx).ctrl_path(NAME, "serial.log"), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def qemu_pid(self, idx):
        rt = self.rt(idx)
        pid = state.read_pid_file(rt.pid_path(NAME))
        if pid is not None and state.process_alive(
                pid, marker=rt.ctrl_path(NAME, "qmp")):
            return pid
        return None

    def fields(self, *names):
        answer = self.client.call("Query", "instance", list(names),
                                  ["=", "name", NAME])
        return [value for _, value in answer["data"][0]]

    def test_live_migration_between_two_qemus(self):
        n1, n2 = self.node(0).name, self.node(1).name
        # no NIC (the kvm driver wants a bridge): below the default
        # instance policy
        self.create(NAME, template="sharedfile", node=0, nics=[],
                    ignore_ipolicy=True, hypervisor=constants.HT_KVM,
                    beparams={"memory": 256, "vcpus": 1},
                    hvparams={"kernel_path": self.guest.kernel,
                              "initrd_path": self.guest.initrd,
                              "root_path": "", "kvm_flag": "disabled",
                              "kernel_args": "quiet ganeti_test=idle",
                              "serial_speed": 115200})
        try:
            wait_for("the guest to boot", lambda: "ganeti-test: idle" in
                     self.console(0), BOOT_DEADLINE, 0.25)
        except AssertionError:
            self.fail("no boot; console:\n%s" % self.console(0))
        pid1 = self.qemu_pid(0)
        self.assertIsNotNone(pid1)

        _, log = self.run_job({"OP_ID": "OP_INSTANCE_MIGRATE",
                               "instance_name": NAME, "target_node": n2,
                               "mode": "live"})
        self.assertIn("* memory transfer complete", log)
        self.assertIn("* migrating instance to %s (live)" % n2, log)
        self.assertEqual(self.fields("pnode", "status"), [n2, "running"])
        wait_for("the old qemu to go", lambda: self.qemu_pid(0) is None, 20)
        self.assertIsNotNone(self.qemu_pid(1))
        # node2's qemu received a running guest: it never booted there
        self.assertNotIn("ganeti-test: booted", self.console(1))
        self.assertFalse(os.path.exists(self.rt(0).record_path(NAME)))

        _, log = self.run_job({"OP_ID": "OP_INSTANCE_MIGRATE",
                               "instance_name": NAME, "target_node": n1,
                               "mode": "non-live"})
        self.assertIn("* migrating instance to %s (non-live)" % n1, log)
        self.assertEqual(self.fields("pnode", "status"), [n1, "running"])
        wait_for("node2's qemu to go", lambda: self.qemu_pid(1) is None, 20)
        self.assertIsNotNone(self.qemu_pid(0))
        self.assertNotEqual(self.qemu_pid(0), pid1)

        self.run_job({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": NAME,
                      "shutdown_timeout": 10})
