"""daemon_util: pidfiles, stopping by PID (TERM, then KILL), stale pidfiles."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from twisted.trial import unittest

from ganeti import daemon_util
from ganeti import pathutils

_SLEEPER = "import signal, time\n%s\ntime.sleep(60)\n"


class DaemonUtilTests(unittest.TestCase):

    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="gnt-", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.base, True)
        self.root = os.path.join(self.base, "node1")
        self.paths = pathutils.Paths(self.root)
        self.paths.ensure_dirs()

    def fake_daemon(self, daemon, root=None, ignore_term=False):
        """A process that looks like ``daemon`` (its command line names
        the plugin and --root), with a pidfile."""
        code = _SLEEPER % ("signal.signal(signal.SIGTERM, signal.SIG_IGN)"
                           if ignore_term else "")
        proc = subprocess.Popen([sys.executable, "-c", code, daemon,
                                 "--root", root or self.root])
        self.addCleanup(self._kill, proc)
        with open(daemon_util.pidfile_path(self.paths, daemon), "w") as f:
            f.write("%d\n" % proc.pid)
        # wait until the interpreter runs (the signal handler is set)
        time.sleep(0.3)
        return proc

    def _kill(self, proc):
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    def test_running_daemon_is_found_and_stopped_with_term(self):
        proc = self.fake_daemon(daemon_util.NODED)
        self.assertEqual(daemon_util.running_pid(self.root,
                                                 daemon_util.NODED),
                         proc.pid)
        expected = {d: None for d in daemon_util.MASTER_DAEMONS}
        expected[daemon_util.NODED] = proc.pid
        self.assertEqual(daemon_util.status(self.root), expected)
        self.assertEqual(daemon_util.stop_daemon(self.root,
                                                 daemon_util.NODED),
                         proc.pid)
        self.assertEqual(proc.wait(5), -signal.SIGTERM)
        self.assertFalse(os.path.exists(daemon_util.pidfile_path(
            self.paths, daemon_util.NODED)))

    def test_kill_when_term_is_ignored(self):
        proc = self.fake_daemon(daemon_util.MASTERD, ignore_term=True)
        start = time.monotonic()
        daemon_util.stop_daemon(self.root, daemon_util.MASTERD, timeout=0.5)
        self.assertEqual(proc.wait(5), -signal.SIGKILL)
        self.assertLess(time.monotonic() - start, 5)

    def test_stale_pidfile_is_never_signalled(self):
        # our own PID: alive, but not a ganeti-confd of this root
        with open(daemon_util.pidfile_path(self.paths, daemon_util.CONFD),
                  "w") as f:
            f.write("%d\n" % os.getpid())
        self.assertIsNone(daemon_util.running_pid(self.root,
                                                  daemon_util.CONFD))
        self.assertIsNone(daemon_util.stop_daemon(self.root,
                                                  daemon_util.CONFD))
        # the same daemon of another root is not ours either
        other = self.fake_daemon(daemon_util.CONFD,
                                 root=os.path.join(self.base, "node2"))
        self.assertIsNone(daemon_util.running_pid(self.root,
                                                  daemon_util.CONFD))
        self.assertIsNone(daemon_util.stop_daemon(self.root,
                                                  daemon_util.CONFD))
        self.assertIsNone(other.poll())
        # garbage and dead PIDs
        with open(daemon_util.pidfile_path(self.paths, daemon_util.NODED),
                  "w") as f:
            f.write("nonsense")
        self.assertIsNone(daemon_util.running_pid(self.root,
                                                  daemon_util.NODED))

    def test_start_refuses_a_running_daemon(self):
        proc = self.fake_daemon(daemon_util.NODED)
        err = self.assertRaises(daemon_util.DaemonError,
                                daemon_util.start_daemon, self.root,
                                daemon_util.NODED, "127.0.0.1")
        self.assertIn("already running (pid %d" % proc.pid, str(err))

    def test_daemon_that_dies_reports_its_output(self):
        # confd refuses to start without a configuration: its error is
        # kept and shown
        pid = daemon_util.start_daemon(self.root, daemon_util.CONFD,
                                       "127.0.0.1", ["--port", "0"])
        self.addCleanup(self._kill_pid, pid)
        deadline = time.monotonic() + 30
        while daemon_util.running_pid(self.root, daemon_util.CONFD):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)
        err = self.assertRaises(daemon_util.DaemonError,
                                daemon_util.check_alive, self.root,
                                daemon_util.CONFD)
        self.assertIn("ganeti-confd is not running", str(err))
        self.assertIn("its last output", str(err))

    def _kill_pid(self, pid):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (OSError, ChildProcessError):
            pass

    def test_command_line(self):
        argv = daemon_util.daemon_command(self.paths, daemon_util.NODED,
                                          "127.0.0.9", ["--os-search-path",
                                                        "/x"])
        self.assertEqual(argv[:3], [sys.executable, "-m", "twisted"])
        self.assertEqual(argv[-7:], ["ganeti-noded", "--root", self.root,
                                     "--bind", "127.0.0.9",
                                     "--os-search-path", "/x"])
        self.assertIn(os.path.join(self.paths.log_dir, "ganeti-noded.log"),
                      argv)
