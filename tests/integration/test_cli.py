"""The gnt-* tools as real commands against real daemons.

``gnt-cluster init`` bootstraps a one-node cluster under a short temporary
root and starts ganeti-noded, ganeti-masterd and ganeti-confd on a random
127.x.y.z address (so the fixed ports of noded and confd do not collide with
other tests); every daemon is stopped by PID when the test ends, also when it
fails.
"""

import os
import re

from twisted.trial import unittest

from ganeti import daemon_util
from ganeti import luxi
from ganeti import pathutils

from tests import ganeti_peer
from tests.integration.daemons import (ETC_OS, GntCommandsMixin, random_ips,
                                       short_tmpdir)
from tests.integration.demo_process import kill_processes_below

NODE = "node1.example.com"
CLUSTER = "cluster.example.com"


class ClusterTestCase(GntCommandsMixin, unittest.TestCase):

    def setUp(self):
        self.base = short_tmpdir(self, "gnt-")
        # last of all: whatever a failed test left running under it (its
        # fake guests outlive the daemons)
        self.addCleanup(kill_processes_below, self.base)
        # the last component is the node name, as Ganeti's own tools want
        self.root = os.path.join(self.base, NODE)
        self.paths = pathutils.Paths(self.root)
        self.ip = random_ips(1)[0]
        self.gnt_root = self.root
        # registered before init: daemons are stopped whatever happens
        self.addCleanup(daemon_util.stop_all, self.root)

    def init(self, *extra):
        return self.ok("gnt-cluster", "init", "--node-name", NODE,
                       "--node-ip", self.ip, "--enabled-hypervisors", "fake",
                       "--enabled-disk-templates", "file,diskless",
                       "--os-search-path", ETC_OS, *(extra + (CLUSTER,)))

    def client(self):
        c = luxi.BlockingClient(self.paths.master_socket, 30)
        self.addCleanup(c.close)
        return c


class ClusterTests(ClusterTestCase):

    def test_init_info_tags_jobs_verify(self):
        # a cluster-init post hook, run by init's OP_CLUSTER_POST_INIT
        hooks = os.path.join(self.root, "etc", "ganeti", "hooks",
                             "cluster-init-post.d")
        os.makedirs(hooks)
        seen = os.path.join(self.base, "hook-ran")
        with open(os.path.join(hooks, "10-record"), "w") as f:
            f.write("#!/bin/sh\necho \"$GANETI_HOOKS_PHASE $GANETI_CLUSTER"
                    " $GANETI_MASTER\" > %s\n" % seen)
        os.chmod(os.path.join(hooks, "10-record"), 0o755)
        out = self.init()
        with open(seen) as f:
            self.assertEqual(f.read(), "post %s %s\n" % (CLUSTER, NODE))
        self.assertIn("Initialised cluster %s" % CLUSTER, out)
        pids = daemon_util.status(self.root)
        self.assertTrue(all(pids.values()), pids)
        for daemon in daemon_util.MASTER_DAEMONS:
            self.assertIn("Started %s (pid %d)" % (daemon, pids[daemon]),
                          out)

        out = self.ok("gnt-cluster", "info")
        self.assertIn("Cluster name: %s\n" % CLUSTER, out)
        self.assertIn("Master node: %s\n" % NODE, out)
        self.assertIn("Enabled hypervisors: fake\n", out)
        self.assertEqual(self.ok("gnt-cluster", "getmaster"), NODE + "\n")
        self.assertIn("Software version: 3.0.2", self.ok("gnt-cluster",
                                                         "version"))

        self.ok("gnt-cluster", "add-tags", "env:test", "web")
        self.assertEqual(self.ok("gnt-cluster", "list-tags"),
                         "env:test\nweb\n")
        code, out = self.gnt("gnt-cluster", "add-tags", "bad tag")
        self.assertEqual(code, 1)
        self.assertIn("Failure", out)
        self.assertEqual(self.ok("gnt-cluster", "search-tags", "^web"),
                         "/cluster web\n")

        out = self.ok("gnt-cluster", "verify")
        self.assertRegex(out, r"\d{4} Verifying cluster config\n")

        self.ok("gnt-cluster", "queue", "drain")
        self.assertEqual(self.ok("gnt-cluster", "queue", "info"),
                         "The drain flag is set\n")
        code, out = self.gnt("gnt-cluster", "add-tags", "x")
        self.assertEqual(code, 1)
        self.assertIn("drain", out)
        self.ok("gnt-cluster", "queue", "undrain")

        out = self.ok("gnt-cluster", "modify", "--candidate-pool-size", "4",
                      "--enabled-user-shutdown", "yes")
        info = self.ok("gnt-cluster", "info")
        self.assertIn("  candidate pool size: 4\n", info)
        self.assertIn("  enabled user shutdown: True\n", info)

        out = self.ok("gnt-job", "list")
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["ID", "Status", "Summary"])
        self.assertIn("TAGS_SET", out)
        self.assertTrue(all(re.match(r"^ *\d+ (success|error) ", line)
                            for line in lines[1:]), out)
        # job 1 is init's OP_CLUSTER_POST_INIT (the cluster-init hooks)
        out = self.ok("gnt-job", "info", "1")
        self.assertIn("OP_ID: OP_CLUSTER_POST_INIT\n", out)
        out = self.ok("gnt-job", "info", "2")
        self.assertTrue(out.startswith("- Job ID: 2\n  Status: success\n"),
                        out)
        self.assertIn("      Input fields: \n        OP_ID: OP_TAGS_SET\n",
                      out)

        out = self.ok("gnt-node", "list", "-o", "name,pinst_cnt")
        self.assertEqual(out.splitlines()[1].split(), [NODE, "0"])
        out = self.ok("gnt-node", "info")
        self.assertIn("  primary ip: %s\n" % self.ip, out)

        # a second init is refused, the cluster keeps running
        code, out = self.gnt("gnt-cluster", "init", "--node-name", NODE,
                             "--node-ip", self.ip, CLUSTER)
        self.assertEqual(code, 1)
        self.assertIn("already part of a cluster", out)
        self.assertEqual(daemon_util.status(self.root), pids)

    def test_watch_shows_progress_of_a_running_job(self):
        self.init()
        job = self.client().submit_job([{"OP_ID": "OP_TEST_DELAY",
                                         "duration": 0.3, "repeat": 3}])
        out = self.ok("gnt-job", "watch", str(job))
        lines = out.splitlines()
        self.assertEqual(lines[0], "Output from job %s follows" % job)
        self.assertEqual(
            [re.sub(r"^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} ", "", line)
             for line in lines[2:]],
            ["Test delay iteration %d/3" % i for i in (1, 2, 3)])
        self.ok("gnt-job", "wait", str(job))
        # --submit, then wait
        code, out = self.gnt("gnt-cluster", "verify", "--submit")
        self.assertEqual(code, 0, out)
        job = re.match(r"^JobID: (\d+)\n$", out).group(1)
        self.ok("gnt-job", "wait", job)

    def test_destroy(self):
        self.init()
        pids = daemon_util.status(self.root)
        code, out = self.gnt("gnt-cluster", "destroy", "--yes-do-it")
        if code == 0:
            # the master implements OP_CLUSTER_DESTROY
            self.assertEqual(set(daemon_util.status(self.root).values()),
                             {None})
            self.assertFalse(os.path.exists(self.paths.config_file))
        else:
            self.assertIn("does not implement cluster destruction", out)
            self.assertEqual(daemon_util.status(self.root), pids)
            self.assertTrue(os.path.exists(self.paths.config_file))

    def test_master_not_running(self):
        self.init("--no-start")
        code, out = self.gnt("gnt-instance", "list")
        self.assertEqual(code, 1)
        self.assertEqual(out, "Failure: cannot connect to the master daemon"
                         " (is ganeti-masterd running? socket %s)\n"
                         % self.paths.master_socket)


class InstanceTests(ClusterTestCase):
    """An instance's life through the CLI: fake hypervisor, busybox OS."""

    def status(self, name):
        out = self.ok("gnt-instance", "list", "--no-headers", "-o",
                      "name,status", name)
        return out.split()[1]

    def test_add_shutdown_startup_reboot_remove(self):
        self.init()
        code, out = self.gnt(
            "gnt-instance", "add", "-t", "file", "-o", "busybox+default",
            "-n", NODE, "-s", "1G", "-B", "memory=128M", "--no-name-check",
            "--no-ip-check", "inst1")
        if code != 0 and "OP_INSTANCE_CREATE is not implemented" in out:
            raise unittest.SkipTest("instance logical units not available")
        self.assertEqual(code, 0, out)
        # progress messages, with Ganeti's timestamps
        self.assertRegex(out, r"(?m)^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d"
                         r" \d{4} .+$")
        self.assertEqual(self.status("inst1"), "running")
        out = self.ok("gnt-instance", "list")
        self.assertEqual(out.splitlines()[0].split(),
                         ["Instance", "Hypervisor", "OS", "Primary_node",
                          "Status", "Memory"])
        self.assertEqual(out.splitlines()[1].split(),
                         ["inst1", "fake", "busybox+default", NODE,
                          "running", "128M"])

        self.ok("gnt-instance", "shutdown", "--timeout", "10", "inst1")
        self.assertEqual(self.status("inst1"), "ADMIN_down")
        self.ok("gnt-instance", "startup", "inst1")
        self.assertEqual(self.status("inst1"), "running")
        self.ok("gnt-instance", "reboot", "-t", "hard", "inst1")
        self.assertEqual(self.status("inst1"), "running")
        code, out = self.gnt("gnt-instance", "stop", "--submit", "inst1")
        self.assertEqual(code, 0, out)
        self.ok("gnt-job", "wait", re.match(r"JobID: (\d+)", out).group(1))
        self.assertEqual(self.status("inst1"), "ADMIN_down")
        self.ok("gnt-instance", "start", "inst1")

        out = self.ok("gnt-instance", "info", "inst1")
        self.assertIn("- Instance name: inst1\n", out)
        self.assertIn("  State: configured to be up, actual state is up\n",
                      out)
        self.assertIn("    - disk/0: file, size 1.0G\n", out)

        out = self.ok("gnt-instance", "modify", "-B", "vcpus=2", "inst1")
        self.assertIn("Modified instance inst1", out)
        out = self.ok("gnt-instance", "list", "--no-headers", "-o",
                      "be/vcpus", "inst1")
        self.assertEqual(out.strip(), "2")

        self.ok("gnt-instance", "add-tags", "inst1", "role:web")
        self.assertEqual(self.ok("gnt-instance", "list-tags", "inst1"),
                         "role:web\n")

        # errors of the master come back Ganeti-style
        code, out = self.gnt("gnt-instance", "startup", "nosuch")
        self.assertEqual(code, 1)
        self.assertIn("Failure: prerequisites not met for this operation",
                      out)

        self.compare_with_ganeti()

        code, out = self.gnt("gnt-instance", "remove", "inst1")
        self.assertEqual(code, 13)
        self.ok("gnt-instance", "remove", "-f", "inst1")
        out = self.ok("gnt-instance", "list", "--no-headers")
        self.assertEqual(out, "")

    def compare_with_ganeti(self):
        """Ganeti's own gnt-instance/gnt-job list print what ours print."""
        if ganeti_peer.unavailable_reason():
            return
        tz = {"TZ": os.environ.get("TZ", "UTC")}
        for program, args in (("gnt-instance", ["list"]),
                              ("gnt-instance", ["list", "-o",
                                                "name,admin_up,disk.sizes,"
                                                "be/maxmem", "--separator",
                                                ":"]),
                              ("gnt-job", ["list"])):
            _, theirs = ganeti_peer.run_tool(program, args, self.root, NODE,
                                             timeout=60, env=tz)
            ours = self.ok(program, *args)
            self.assertEqual(ours, theirs, "%s %s" % (program, args))

    def test_forthcoming_instance_is_listed(self):
        self.init()
        code, out = self.gnt(
            "gnt-instance", "add", "--forthcoming", "-t", "file", "-o",
            "busybox", "-n", NODE, "-s", "1G", "--no-name-check",
            "--no-ip-check", "res1")
        if code != 0 and "OP_INSTANCE_CREATE is not implemented" in out:
            raise unittest.SkipTest("instance logical units not available")
        self.assertEqual(code, 0, out)
        out = self.ok("gnt-instance", "list", "--no-headers", "-o",
                      "name,forthcoming")
        self.assertEqual(out.split(), ["res1", "Y"])
        # The default listing says what it is.
        out = self.ok("gnt-instance", "list", "--no-headers", "-o",
                      "name,pnode,status")
        self.assertEqual(out.split(), ["res1", NODE, "forthcoming"])
