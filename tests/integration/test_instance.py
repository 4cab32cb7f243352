"""Instance life cycle through real daemons: masterd + noded, fake hypervisor.

A one-node virtual cluster on a random loopback address (the master calls
node daemons on port 1811, so each test run gets its own address), the
busybox OS from ``etc/os`` and file disks in the cluster's file storage
directory.  Jobs go in over luxi like ``gnt-instance`` sends them.
"""

import os
import signal

from ganeti.hypervisor import state

from tests import ganeti_peer
from tests.integration.daemons import RunningClusterTestCase, wait_for

INSTANCE = "inst1.example.com"


class DaemonsTestCase(RunningClusterTestCase):
    """A one-node cluster with its node daemon and master daemon running."""

    timeout = 240
    BASE_PREFIX = "gnt-i-"

    def setUp(self):
        RunningClusterTestCase.setUp(self)
        self.file_storage_dir = self.fsd

    def create_op(self, **params):
        """OP_INSTANCE_CREATE of INSTANCE on the master node: a 1 GiB file
        disk (sparse), one NIC, the busybox OS (``params`` change that)."""
        op = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": INSTANCE,
              "mode": "create", "disk_template": "file",
              "disks": [{"size": 1024}], "nics": [{}],
              "os_type": "busybox+default", "pnode": self.vc.master.name,
              "beparams": {"memory": 128}, "name_check": False,
              "ip_check": False}
        op.update(params)
        return op

    def query(self):
        result, _ = self.run_job({"OP_ID": "OP_INSTANCE_QUERY_DATA",
                                  "instances": [INSTANCE]})
        return result[INSTANCE]


class InstanceLifeCycleTests(DaemonsTestCase):

    def test_create_use_and_remove(self):
        result, log = self.run_job(self.create_op())
        self.assertEqual(result, [self.vc.master.name])
        self.assertIn("* running the instance OS create scripts...", log)
        info = self.query()
        self.assertEqual(info["config_state"], "up")
        self.assertEqual(info["run_state"], "up")
        self.assertEqual(info["os"], "busybox+default")
        disk_file = info["disks"][0]["logical_id"][1]
        self.assertTrue(disk_file.startswith(self.file_storage_dir + "/"))
        self.assertEqual(info["disks"][0]["pstatus"][0], disk_file)
        self.assertTrue(os.path.isfile(disk_file))
        self.assertEqual(os.path.getsize(disk_file), 1024 * 1024 * 1024)
        with open(disk_file, "rb") as f:
            head = f.read(8192).decode("utf-8", "replace")
        # the OS create script ran on the node with the instance's data
        self.assertTrue(head.startswith("GANETI-BUSYBOX-OS v1"), head[:80])
        self.assertIn("INSTANCE_NAME=%s" % INSTANCE, head)

        self.run_job({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                      "instance_name": INSTANCE, "timeout": 10})
        info = self.query()
        self.assertEqual((info["config_state"], info["run_state"]),
                         ("down", "down"))

        self.run_job({"OP_ID": "OP_INSTANCE_STARTUP",
                      "instance_name": INSTANCE})
        self.assertEqual(self.query()["run_state"], "up")

        for rtype in ("soft", "hard", "full"):
            self.run_job({"OP_ID": "OP_INSTANCE_REBOOT",
                          "instance_name": INSTANCE, "reboot_type": rtype,
                          "shutdown_timeout": 10})
            self.assertEqual(self.query()["run_state"], "up", rtype)

        # a user shutdown cannot be recorded while the guest runs
        self.run_job({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                      "enabled_user_shutdown": True})
        _, log = self.run_job({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                               "instance_name": INSTANCE,
                               "admin_state_source": "user"},
                              expect="error")

        # the user powers the guest off from inside: the domain is kept,
        # the watcher's opcode records it and cleans up
        rt = state.RuntimeDir(self.vc.master.root, "fake")
        os.kill(state.read_pid_file(rt.pid_path(INSTANCE)), signal.SIGUSR1)
        wait_for("user shutdown",
                 lambda: self.query()["run_state"] == "user down")
        self.run_job({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                      "instance_name": INSTANCE,
                      "admin_state_source": "user"})
        info = self.query()
        self.assertEqual((info["config_state"], info["run_state"],
                          info["admin_state_source"]),
                         ("down", "user down", "user"))
        self.run_job({"OP_ID": "OP_INSTANCE_STARTUP",
                      "instance_name": INSTANCE})
        self.assertEqual(self.query()["run_state"], "up")

        # Rename (stopped): the disk file moves with the name, and back.
        self.run_job({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                      "instance_name": INSTANCE})
        self.run_job({"OP_ID": "OP_INSTANCE_RENAME",
                      "instance_name": INSTANCE,
                      "new_name": "renamed.example.com",
                      "name_check": False, "ip_check": False})
        result, _ = self.run_job({"OP_ID": "OP_INSTANCE_QUERY_DATA",
                                  "instances": ["renamed.example.com"]})
        moved = result["renamed.example.com"]["disks"][0]["logical_id"][1]
        self.assertEqual(os.path.basename(os.path.dirname(moved)),
                         "renamed.example.com")
        self.assertTrue(os.path.isfile(moved))
        self.assertFalse(os.path.exists(disk_file))
        self.run_job({"OP_ID": "OP_INSTANCE_RENAME",
                      "instance_name": "renamed.example.com",
                      "new_name": INSTANCE, "name_check": False,
                      "ip_check": False})
        self.assertTrue(os.path.isfile(disk_file))
        self.run_job({"OP_ID": "OP_INSTANCE_STARTUP",
                      "instance_name": INSTANCE})

        self.run_job({"OP_ID": "OP_INSTANCE_REMOVE",
                      "instance_name": INSTANCE, "shutdown_timeout": 10})
        self.assertFalse(os.path.exists(disk_file))
        self.run_job({"OP_ID": "OP_INSTANCE_QUERY_DATA",
                      "instances": [INSTANCE]}, expect="error")


class GanetiClientTests(DaemonsTestCase):
    """Ganeti 3.0's own gnt-instance / gnt-os drive our master."""

    def setUp(self):
        ganeti_peer.skip_unless_available()
        DaemonsTestCase.setUp(self)

    def gnt(self, command, *args):
        node = self.vc.master
        return ganeti_peer.run_tool(command, args, node.root, node.name)

    def test_gnt_instance_and_gnt_os(self):
        code, out = self.gnt("gnt-os", "diagnose")
        self.assertEqual(code, 0, out)
        self.assertIn("OS: busybox [global status: valid]", out)
        code, out = self.gnt(
            "gnt-instance", "add", "-t", "file", "-o", "busybox+default",
            "-n", self.vc.master.name, "--disk", "0:size=1G",
            "-B", "memory=128M", "--no-name-check", "--no-ip-check", INSTANCE)
        self.assertEqual(code, 0, out)
        code, out = self.gnt("gnt-instance", "info", INSTANCE)
        self.assertEqual(code, 0, out)
        self.assertIn("Instance name: %s" % INSTANCE, out)
        self.assertIn("State: configured to be up, actual state is up", out)
        self.assertIn("Operating system: busybox+default", out)
        self.assertIn("on primary: %s/%s/" % (self.file_storage_dir,
                                              INSTANCE), out)
        for args in (("shutdown", "--timeout", "10"), ("startup",),
                     ("reboot", "--type", "hard")):
            code, out = self.gnt("gnt-instance", args[0], *(
                list(args[1:]) + [INSTANCE]))
            self.assertEqual(code, 0, out)
        code, out = self.gnt("gnt-instance", "remove", "-f",
                             "--shutdown-timeout", "10", INSTANCE)
        self.assertEqual(code, 0, out)
