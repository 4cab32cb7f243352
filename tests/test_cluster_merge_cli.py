"""The ``cluster-merge`` command line: its options, its output and exit
codes, around a stand-in for the merge itself."""

import io
import os
import signal

from twisted.trial import unittest

from ganeti.merge import flow
from ganeti.tools import cluster_merge


class ImmediateReactor(object):
    """Enough of a reactor for run_in_reactor, running the work at once
    (the stand-in merges finish without waiting)."""

    def callWhenRunning(self, fn):
        fn()

    def run(self, installSignalHandlers=True):
        pass

    def stop(self):
        pass


class StandInMerger(object):
    """Records how it was made; ends as the test says."""

    made = []

    def __init__(self, reactor, paths, specs, options, report, confirm):
        self.made.append((paths, specs, options))
        self.report = report
        self.confirm = confirm

    async def run(self):
        self.report("Checking this cluster")
        if self.outcome == "interrupt":
            # the admin presses Ctrl-C half-way
            os.kill(os.getpid(), signal.SIGINT)
            self.outcome = "ok"
        outcome = self.outcome
        if isinstance(outcome, Exception):
            raise outcome
        if outcome == "ask" and not self.confirm("Merge b?"):
            error = flow.MergeError("Aborted")
            error.refused = True
            raise error
        return flow.MergeOutcome("a.example.com", ("n1", "n2", "n3"),
                                 ("i1",), ("a warning",),
                                 outcome == "dry")


class Terminal(io.StringIO):
    def isatty(self):
        return True


class CommandTests(unittest.TestCase):

    def setUp(self):
        StandInMerger.made = []
        StandInMerger.outcome = "ok"

    def run_command(self, *argv, stdin=None, env=None):
        out, err = io.StringIO(), io.StringIO()
        code = cluster_merge.run(list(argv), stdout=out, stderr=err,
                                 stdin=stdin or io.StringIO(),
                                 env=env or {}, reactor=ImmediateReactor(),
                                 merger_factory=StandInMerger)
        return code, out.getvalue(), err.getvalue()

    def test_options_reach_the_merge(self):
        code, out, err = self.run_command(
            "--root", "/r", "--groups", "rename", "--stop-instances",
            "--restart", "all", "--watcher-pause-period", "600", "-f",
            "192.0.2.21=b.pem", "192.0.2.31 = /etc/c.pem")
        self.assertEqual(code, 0, err)
        [(paths, specs, options)] = StandInMerger.made
        self.assertEqual(paths.root, "/r")
        self.assertEqual([s.address for s in specs],
                         ["192.0.2.21", "192.0.2.31"])
        self.assertTrue(specs[0].cert_file.endswith("/b.pem"))
        self.assertEqual(specs[1].cert_file, "/etc/c.pem")
        self.assertEqual((options.groups, options.stop_instances,
                          options.restart, options.watcher_pause_period),
                         ("rename", True, "all", 600.0))
        self.assertIn("Checking this cluster", out)
        self.assertIn("Merge done in", out)
        self.assertIn("cluster a.example.com has 3 node(s) and 1"
                      " instance(s)", out)
        self.assertIn("1 warning(s) above", out)

    def test_defaults(self):
        self.run_command("-f", "192.0.2.21=b.pem",
                         env={"GANETI_ROOTDIR": "/vc/node1"})
        [(paths, _, options)] = StandInMerger.made
        self.assertEqual(paths.root, "/vc/node1")
        self.assertEqual((options.groups, options.stop_instances,
                          options.restart, options.watcher_pause_period,
                          options.dry_run),
                         (None, False, "master", 1800.0, False))

    def test_usage_errors(self):
        for argv, text in (
                ([], "the following arguments are required"),
                (["192.0.2.21"], "expected ADDRESS=CERTFILE"),
                (["=b.pem"], "expected ADDRESS=CERTFILE"),
                (["--groups", "fold", "a=b"], "invalid choice: 'fold'"),
                (["--watcher-pause-period", "5", "a=b"],
                 "at least 60 seconds"),
                (["--watcher-pause-period", "soon", "a=b"],
                 "'soon' is not a number of seconds"),
                (["--stop-instances", "--skip-stop-instances", "a=b"],
                 "not allowed with argument")):
            code, out, err = self.run_command(*argv)
            self.assertEqual(code, cluster_merge.EXIT_USAGE, argv)
            self.assertIn(text, err, argv)
        self.assertEqual(StandInMerger.made, [])

    def test_refused_or_rolled_back(self):
        StandInMerger.outcome = flow.MergeError(
            "switching node n2: disk full",
            manual=["the watchers of b resumed: gnt-cluster watcher"
                    " continue on b"])
        code, out, err = self.run_command("-f", "a=b")
        self.assertEqual(code, cluster_merge.EXIT_FAILURE)
        self.assertIn("Failure: switching node n2: disk full", err)
        self.assertIn("  - the watchers of b resumed", err)
        self.assertIn("Every cluster is as it was before the merge.", err)

    def test_rollback_incomplete(self):
        StandInMerger.outcome = flow.MergeError(
            "switching node n2: disk full; the rollback did not finish",
            rolled_back=False, manual=["node n1 back in b: move the files"])
        code, out, err = self.run_command("-f", "a=b")
        self.assertEqual(code, cluster_merge.EXIT_ROLLBACK_INCOMPLETE)
        self.assertIn("What the admin must still do by hand:\n"
                      "  - node n1 back in b: move the files", err)
        self.assertNotIn("as it was", err)

    def test_confirmation(self):
        StandInMerger.outcome = "ask"
        code, out, err = self.run_command("a=b")
        self.assertEqual(code, cluster_merge.EXIT_FAILURE)
        self.assertIn("Not a terminal, cannot ask: use --force", err)
        code, out, err = self.run_command("a=b", stdin=Terminal("n\n"))
        self.assertEqual(code, cluster_merge.EXIT_FAILURE)
        self.assertIn("Merge b?\nMerge now? y/[n]:", out)
        self.assertIn("Failure: Aborted\nNothing was changed.", err)
        code, out, err = self.run_command("a=b", stdin=Terminal("y\n"))
        self.assertEqual(code, cluster_merge.EXIT_SUCCESS, err)

    def test_dry_run(self):
        StandInMerger.outcome = "dry"
        code, out, err = self.run_command("--dry-run", "a=b")
        self.assertEqual(code, 0)
        self.assertTrue(StandInMerger.made[0][2].dry_run)
        self.assertNotIn("Merge done", out)

    def test_an_unexpected_error_says_so(self):
        StandInMerger.outcome = KeyError("x")
        code, out, err = self.run_command("-f", "a=b")
        self.assertEqual(code, cluster_merge.EXIT_FAILURE)
        self.assertIn("Unhandled error: KeyError", err)
        self.assertIn("--debug", err)

    def test_ctrl_c_does_not_stop_it_half_way(self):
        StandInMerger.outcome = "interrupt"
        before = signal.getsignal(signal.SIGINT)
        code, out, err = self.run_command("-f", "a=b")
        self.assertEqual(code, 0, err)
        self.assertIn("The merge is not interrupted", err)
        self.assertIn("Merge done", out)
        self.assertIs(signal.getsignal(signal.SIGINT), before)
