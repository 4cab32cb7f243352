"""Daemons that cannot start stop at once, change nothing and say why.

Real processes (``python -m twisted <daemon>``, as ``gnt-cluster init``
starts them): a second master daemon on the job queue of a running one, and
daemons whose port or socket is taken.  Each test takes a few seconds.
"""

import errno
import json
import os
import socket
import subprocess
import sys
import time

from ganeti import constants
from ganeti import crypto
from ganeti import luxi
from ganeti.server.rapi import rapi_pem_path

from tests.integration.daemons import (FINAL, VirtualClusterTestCase, command_env,
                           snapshot, wait_for)

#: seconds a daemon that cannot start may take to exit
EXIT_TIMEOUT = 60
#: the long job: running while the second master starts and exits
DELAY = 12.0


class DaemonStartTestCase(VirtualClusterTestCase):

    BASE_PREFIX = "gnt-s-"

    def run_daemon(self, plugin, *args, twistd=False):
        """Run ``plugin`` on the master node until it exits, with ``twist``
        (as the cluster's commands do) or ``twistd -n``; (exit code,
        output, seconds it took)."""
        node = self.vc.master
        argv = self.vc.twistd_command(plugin, node, *args)
        if twistd:
            # twistd starts the services in privilegedStartService first
            argv = [sys.executable, "-c", "import sys; from twisted.scripts"
                    ".twistd import run; sys.argv[0] = 'twistd'; run()",
                    "--nodaemon", "--pidfile=", "--logfile=-"] + argv[
                        argv.index(plugin):]
        start = time.monotonic()
        proc = subprocess.run(argv, env=command_env(node.root), cwd="/",
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT,
                              timeout=EXIT_TIMEOUT)
        return (proc.returncode, proc.stdout.decode("utf-8", "replace"),
                time.monotonic() - start)


class SecondMasterTests(DaemonStartTestCase):

    def test_second_master_exits_and_changes_nothing(self):
        node = self.vc.master
        first = self.start_masterd()
        client = luxi.BlockingClient(node.paths.master_socket, 30)
        self.addCleanup(client.close)
        job = client.call("SubmitJob", [{"OP_ID": "OP_TEST_DELAY",
                                         "duration": DELAY}])

        def status():
            return client.call("QueryJobs", [job], ["status"])[0][0]
        wait_for("job running", lambda: status() == "running")
        queue_dir = node.paths.queue_dir

        def running_on_disk():
            try:
                with open(os.path.join(queue_dir, "job-%d" % job),
                          "rb") as f:
                    return b'"status":"running"' in f.read()
            except FileNotFoundError:
                return False      # written in place a moment later
        wait_for("job file says running", running_on_disk)
        lock_file = os.path.join(queue_dir, "lock")
        # everything the master keeps under var/lib/ganeti: config,
        # ssconf files, the queue; job files and the other files are
        # written by different writers, so wait until all have settled
        seen = [None]

        def settled():
            now = snapshot(node.paths.data_dir)
            same, seen[0] = now == seen[0], now
            return same
        wait_for("the master's files settled", settled, interval=0.5)
        before = seen[0]
        self.assertIn("queue/job-%d" % job, before)

        for twistd in (False, True):
            code, output, took = self.run_daemon("ganeti-masterd",
                                                 twistd=twistd)
            after = snapshot(node.paths.data_dir)
            self.assertNotEqual(code, 0, output)
            self.assertLess(took, 30, output)
            self.assertIn("is in use by another process (pid %d holds the"
                          " lock file %s)" % (first.pid, lock_file), output)
            self.assertIn("only one master daemon may use a job queue",
                          output)
            # nothing written, the running job not failed: the second
            # master stopped before reading the queue
            self.assertEqual(sorted(after), sorted(before))
            for name in before:
                self.assertEqual(after[name], before[name], name)
        self.assertEqual(status(), "running",
                         "the job ended before the check: raise DELAY")
        self.alive(first)

        wait_for("job end", lambda: status() in FINAL,
                 timeout=DELAY + 60)
        status_, result = client.call("QueryJobs", [job],
                                      ["status", "opresult"])[0]
        self.assertEqual((status_, result), ("success", [True]))
        final = snapshot(node.paths.data_dir)
        # the job file is the first master's: the running state it wrote
        # (unchanged by the second master), then the success it wrote
        job_name = "queue/job-%d" % job
        running = json.loads(before[job_name][0])
        done = json.loads(final[job_name][0])
        self.assertEqual(running["ops"][0]["status"], "running")
        self.assertEqual(done["ops"][0]["status"], "success")
        self.assertEqual(done["ops"][0]["exec_timestamp"],
                         running["ops"][0]["exec_timestamp"])
        self.assertEqual([n for n in final if n.startswith("queue/job-")],
                         [job_name])
        for name in ("queue/lock", "queue/version"):
            self.assertEqual(final[name], before[name], name)
        self.assertEqual(final["queue/lock"][0], b"%d\n" % first.pid)
        self.alive(first)


class BindFailureTests(DaemonStartTestCase):
    """A port or socket in use: non-zero exit, the address in the error."""

    def occupy_tcp(self, address, port):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(sock.close)
        sock.bind((address, port))
        sock.listen(1)

    def test_rapi_port_in_use(self):
        node = self.vc.master
        crypto.generate_cluster_certificate(rapi_pem_path(node.paths),
                                            self.vc.cluster_name)
        self.occupy_tcp(node.ip, 5080)
        for extra, twistd in (([], False), (["--no-ssl"], False),
                              ([], True)):
            code, output, _ = self.run_daemon("ganeti-rapi", "--port",
                                              "5080", *extra, twistd=twistd)
            self.assertNotEqual(code, 0, output)
            self.assertIn("Couldn't listen on %s:5080" % node.ip, output)
            self.assertIn("Address already in use", output)

    def test_masterd_socket_in_use(self):
        node = self.vc.master
        path = node.paths.master_socket
        os.makedirs(os.path.dirname(path), exist_ok=True)
        other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(other.close)
        other.bind(path)
        other.listen(1)
        code, output, _ = self.run_daemon("ganeti-masterd")
        self.assertNotEqual(code, 0, output)
        self.assertIn("Cannot listen on the master socket %s: [Errno %d]"
                      " Address already in use" % (path, errno.EADDRINUSE),
                      output)

    def test_noded_port_in_use(self):
        node = self.vc.master
        self.occupy_tcp(node.ip, constants.DEFAULT_NODED_PORT)
        code, output, _ = self.run_daemon("ganeti-noded", "--no-mlock")
        self.assertNotEqual(code, 0, output)
        self.assertIn("Couldn't listen on %s:%d" % (
            node.ip, constants.DEFAULT_NODED_PORT), output)

