"""Ganeti 3.0's own clients against the demo cluster: every call of the
compatibility sweep (its command line tools and its RAPI client, reads and
changes that undo themselves) works."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

from twisted.trial import unittest

from ganeti.dev import compat
from tests import ganeti_peer
from tests.integration.daemons import PROJECT, random_ips, wait_for
from tests.integration.test_demo import kill_processes_below


class GanetiClientsTests(unittest.TestCase):

    def setUp(self):
        ganeti_peer.skip_unless_available()

    def test_every_call_of_the_sweep_works(self):
        base = tempfile.mkdtemp(prefix="gnt-compat-", dir="/tmp")
        self.addCleanup(shutil.rmtree, base, True)
        log_path = os.path.join(base, "demo.log")
        env = dict(os.environ, PYTHONPATH=PROJECT)
        # two nodes and the master IP after them
        first = random_ips(3)[0]
        with open(log_path, "wb") as log:
            demo = subprocess.Popen(
                [sys.executable, "-m", "ganeti.dev.demo", "--base",
                 os.path.join(base, "vc"), "--nodes", "2",
                 "--first-address", first],
                env=env, stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(kill_processes_below, base)
        self.addCleanup(lambda: demo.poll() is None and demo.kill())

        def text():
            with open(log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        wait_for("the demo running", lambda: "Running; press Ctrl-C"
                 in text() or demo.poll() is not None, timeout=180)
        self.assertIsNone(demo.poll(), text())
        root = os.path.join(base, "vc", "node1.example.com")
        lines = []
        results = compat.sweep(root, writes=True, report=lines.append)
        failed = [r for r in results if not r[2]]
        print("\n%d of %d calls of Ganeti's clients worked"
              % (len(results) - len(failed), len(results)))
        self.assertEqual(failed, [], "\n".join(lines))
        # the sweep covers what users meet first
        calls = [r[1] for r in results]
        for expected in ("gnt-backup export", "gnt-backup import",
                         "gnt-network add", "gnt-filter add",
                         "gnt-instance console --show-cmd",
                         "c.ExportInstance", "c.GetInstanceConsole",
                         "c.GetNetworks", "c.GetFilters"):
            self.assertTrue(any(expected in c for c in calls),
                            expected)
        demo.send_signal(signal.SIGINT)
        self.assertEqual(demo.wait(90), 0, text())
