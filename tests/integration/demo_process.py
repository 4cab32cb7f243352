"""The demo cluster (``python -m ganeti.dev.demo``) running in the
background for an integration test, as a user starts it: on random
loopback addresses under a short temp directory, its output in a file,
stopped (and anything it left killed) when the test ends, passed or not.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

from tests.integration.daemons import PROJECT, random_ips, wait_for

#: what the demo prints once everything is up
RUNNING = "Running; press Ctrl-C"


def processes_below(base):
    """PIDs of the processes whose command line names ``base``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if base in args:
            found.append(int(pid))
    return found


def kill_processes_below(base):
    """SIGKILL whatever a failed test left running under ``base``."""
    for pid in processes_below(base):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass            # gone meanwhile


class RunningDemo(object):
    """A demo of ``nodes`` nodes started for ``testcase``: ``ips`` are its
    nodes' addresses and, after them, the master IP; ``base`` the temp
    directory (the cluster under ``base/vc``)."""

    def __init__(self, testcase, nodes, prefix="gnt-demo-", env=None,
                 timeout=240):
        self.testcase = testcase
        # short: the master's socket path must fit in 108 bytes
        self.base = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
        testcase.addCleanup(shutil.rmtree, self.base, True)
        self.ips = random_ips(nodes + 1)
        self.log_path = os.path.join(self.base, "demo.log")
        env = dict(env if env is not None else os.environ,
                   PYTHONPATH=PROJECT)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ganeti.dev.demo", "--base",
                 os.path.join(self.base, "vc"), "--nodes", str(nodes),
                 "--first-address", self.ips[0]],
                env=env, stdout=log, stderr=subprocess.STDOUT)
        # cleanups run last first: the demo is asked to stop, then what
        # is left of it is killed
        testcase.addCleanup(kill_processes_below, self.base)
        testcase.addCleanup(self._stop_quietly)
        wait_for("the demo running", lambda: RUNNING in self.text() or
                 self.process.poll() is not None, timeout=timeout)
        testcase.assertIsNone(self.process.poll(), self.text())

    def text(self):
        """What the demo printed so far."""
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def root(self, node="node1.example.com"):
        """The root directory of ``node``'s files."""
        return os.path.join(self.base, "vc", node)

    def stop(self, timeout=90):
        """Ctrl-C, as a user stops it; its exit status."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout)

    def _stop_quietly(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
