"""``cluster-merge``: merge other clusters into this one (docs/merger.rst).

Run on this cluster's master::

    cluster-merge [options] ADDRESS=CERTFILE [ADDRESS=CERTFILE ...]

Each ``ADDRESS=CERTFILE`` names another cluster: the address of its
master's node daemon (a master candidate's works too) and a copy of that
cluster's certificate (its ``/var/lib/ganeti/server.pem``), which lets
this tool call every node daemon of that cluster as its master would.
``python -m ganeti.tools.cluster_merge`` is the same command.
"""

import argparse
import os
import signal
import sys
import time
import traceback

from twisted.logger import globalLogBeginner, textFileLogObserver

from ganeti import errors
from ganeti import pathutils
from ganeti.merge import configmerge
from ganeti.merge import flow

EXIT_SUCCESS = 0
#: refused, or failed and rolled back: every cluster is as it was
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: failed, and the rollback could not finish: see the instructions
EXIT_ROLLBACK_INCOMPLETE = 3


class _Parser(argparse.ArgumentParser):
    streams = (sys.stdout, sys.stderr)

    def _print_message(self, message, file=None):
        if message:
            out, err = self.streams
            (err if file is None or file is sys.stderr else out).write(
                message)


def parse_spec(text):
    """``ADDRESS=CERTFILE`` as an :class:`~ganeti.merge.flow.OtherSpec`;
    ArgumentTypeError saying what is wrong."""
    address, sep, cert_file = text.partition("=")
    address, cert_file = address.strip(), cert_file.strip()
    if not sep or not address or not cert_file:
        raise argparse.ArgumentTypeError(
            "%r: expected ADDRESS=CERTFILE (the other cluster's master"
            " address and a copy of its server.pem)" % text)
    return flow.OtherSpec(address, os.path.abspath(cert_file))


def _period(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number of seconds"
                                         % text)
    if value < 60:
        raise argparse.ArgumentTypeError(
            "%s seconds: the watchers must stay paused for the whole merge"
            " (at least 60 seconds)" % text)
    return value


def make_parser(streams):
    parser = type("Parser", (_Parser,), {"streams": streams})(
        prog="cluster-merge",
        description="Merge other clusters into this one: their nodes,"
        " instances (with their disks), node groups and networks join"
        " this cluster, and their instances keep running.  Run it on this"
        " cluster's master.")
    parser.add_argument(
        "clusters", nargs="+", type=parse_spec, metavar="ADDRESS=CERTFILE",
        help="another cluster: the address of its master's node daemon and"
        " a copy of its certificate (/var/lib/ganeti/server.pem there)")
    parser.add_argument(
        "--root", default=None, metavar="DIR",
        help="root directory of this node's files (virtual cluster mode);"
        " default: $GANETI_ROOTDIR, else /")
    parser.add_argument(
        "--groups", choices=configmerge.GROUPS_MODES, default=None,
        help="what to do with a node group whose name this cluster has too:"
        " merge it into this cluster's, or rename it (to NAME-CLUSTER);"
        " without it such a merge is refused")
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument(
        "--stop-instances", action="store_true",
        help="stop the other clusters' instances during the merge and start"
        " them again after it (default: they keep running)")
    stop.add_argument(
        "--skip-stop-instances", dest="stop_instances",
        action="store_false",
        help="keep the instances running during the merge (the default)")
    parser.add_argument(
        "--restart", choices=flow.RESTART_MODES, default=flow.RESTART_MASTER,
        help="master (default): restart this cluster's master daemon with"
        " the master candidates' vote at the end; all: also have every"
        " node start the daemons of its new role at once; none: leave the"
        " master daemon running as started for the merge (without a vote)")
    parser.add_argument(
        "--watcher-pause-period", type=_period, default=1800.0,
        metavar="SECONDS",
        help="the watchers are paused for at most this long (they are"
        " resumed at the end; default 1800)")
    parser.add_argument(
        "--dry-run", action="store_true",
        help="run the checks only; change nothing")
    parser.add_argument(
        "-f", "--force", action="store_true",
        help="do not ask for confirmation after the checks")
    parser.add_argument(
        "-v", "--verbose", action="store_true",
        help="also show the log messages of the merge")
    parser.add_argument(
        "-d", "--debug", action="store_true",
        help="show tracebacks of unexpected errors")
    return parser


def run(argv=None, stdout=None, stderr=None, stdin=None, env=None,
        reactor=None, merger_factory=flow.Merger):
    """Run the command line ``argv``; the exit code."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    stdin = stdin or sys.stdin
    env = os.environ if env is None else env
    parser = make_parser((stdout, stderr))
    try:
        opts = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    paths = pathutils.Paths(opts.root or env.get("GANETI_ROOTDIR") or "/")

    def out(text):
        stdout.write("%s\n" % text)
        stdout.flush()

    def err(text):
        stderr.write("%s\n" % text)
        stderr.flush()

    if opts.verbose:
        globalLogBeginner.beginLoggingTo([textFileLogObserver(stderr)],
                                         redirectStandardIO=False)

    def confirm(outcome_text):
        if opts.force or opts.dry_run:
            return True
        question = "%s\nMerge now?" % outcome_text
        if not getattr(stdin, "isatty", lambda: False)():
            err("%s\nNot a terminal, cannot ask: use --force to go ahead."
                % question)
            return False
        stdout.write("%s y/[n]: " % question)
        stdout.flush()
        return stdin.readline().strip().lower() in ("y", "yes")

    options = flow.Options(groups=opts.groups,
                           stop_instances=bool(opts.stop_instances),
                           watcher_pause_period=opts.watcher_pause_period,
                           restart=opts.restart, dry_run=opts.dry_run)
    started = time.monotonic()

    def work(reactor):
        merger = merger_factory(reactor, paths, opts.clusters, options,
                                report=out, confirm=confirm)
        return merger.run()
    from ganeti.utils.reactor_run import run_in_reactor

    def interrupted(signum, frame):
        # stopping half-way would leave the clusters neither merged nor
        # rolled back
        err("The merge is not interrupted: it ends, or rolls back, by"
            " itself")
    try:
        previous = signal.signal(signal.SIGINT, interrupted)
    except ValueError:          # not the main thread
        previous = None
    try:
        outcome = run_in_reactor(work, reactor)
    except flow.MergeError as error:
        err("Failure: %s" % error.message)
        if error.manual:
            err("What the admin must still do by hand:")
            for text in error.manual:
                err("  - %s" % text)
        if not error.rolled_back:
            return EXIT_ROLLBACK_INCOMPLETE
        err("Nothing was changed." if error.refused else
            "Every cluster is as it was before the merge.")
        return EXIT_FAILURE
    except (errors.GenericError, OSError) as error:
        err("Failure: %s" % error)
        if opts.debug:
            err(traceback.format_exc().rstrip())
        return EXIT_FAILURE
    except Exception as error:      # a bug: say so
        err("Unhandled error: %s: %s" % (type(error).__name__, error))
        if opts.debug:
            err(traceback.format_exc().rstrip())
        else:
            err("(run with --debug for the traceback)")
        return EXIT_FAILURE
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if outcome.dry_run:
        return EXIT_SUCCESS
    out("Merge done in %.1f s: cluster %s has %d node(s) and %d"
        " instance(s)" % (time.monotonic() - started, outcome.cluster_name,
                          len(outcome.nodes), len(outcome.instances)))
    if outcome.warnings:
        out("%d warning(s) above; read them." % len(outcome.warnings))
    return EXIT_SUCCESS


def main(argv=None):
    """Console script entry point."""
    sys.exit(run(argv))


if __name__ == "__main__":
    main()
