"""``harep``: one auto-repair pass, for cron (Ganeti's harep options).

    harep [-L|--luxi[=SOCKET]] [--job-delay=SECONDS] [--dry-run]

It reads the cluster from the master over luxi, prints each instance
that is not simply healthy with its repair state and why, and (unless
``--dry-run``) submits the repair jobs and tag changes that the
instances' auto-repair tags allow.  The watcher runs the same passes on
the master continuously.
"""

import argparse
import os
import sys

from twisted.internet import defer, task
from twisted.logger import globalLogBeginner, textFileLogObserver

from ganeti import errors, luxi
from ganeti import pathutils
from ganeti.watcher.autorepair import engine, runner

VERSION = "harep (ganeti-twisted auto-repair) 1"


def build_parser():
    p = argparse.ArgumentParser(
        prog="harep", description="Ganeti auto-repair tool: one pass.")
    p.add_argument("-L", "--luxi", nargs="?", const="", default="",
                   metavar="SOCKET",
                   help="the master's luxi socket (default: the standard"
                        " one, under $GANETI_ROOTDIR if set)")
    p.add_argument("--job-delay", type=float, default=0.0,
                   metavar="SECONDS",
                   help="delay the execution of each repair job by this"
                        " much (an OP_TEST_DELAY first in the job)")
    p.add_argument("--dry-run", action="store_true",
                   help="only show what would be done")
    p.add_argument("--max-parallel", type=int, default=None, metavar="N",
                   help="repairs running at once per node group; a new"
                        " one waits beyond it (0: no limit; default: each"
                        " group's node parameter repair_max_parallel)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also log each step as it is taken")
    p.add_argument("--version", action="version", version=VERSION)
    return p


def report(decisions, out, dry_run):
    """The pass's result, one line per instance that is not healthy (or
    whose tags changed)."""
    for d in decisions:
        if d.state == engine.HEALTHY and not d.add_tags and \
                not d.remove_tags:
            continue
        what = d.message
        if dry_run and d.step is not None:
            ops = ", ".join(op["OP_ID"] for op in d.step.ops)
            what += " [would submit: %s]" % ops
        out.write("%s: %s: %s\n" % (d.instance, d.state, what))
        for bad in d.malformed:
            out.write("%s: ignoring malformed tag %s: %s\n"
                      % (d.instance, bad.tag, bad.reason))
    counts = {}
    for d in decisions:
        counts[d.state] = counts.get(d.state, 0) + 1
    out.write("%d instances: %s\n" % (len(decisions), ", ".join(
        "%d %s" % (n, s) for s, n in sorted(counts.items())) or "none"))


async def _run(reactor, opts, out):
    path = opts.luxi or pathutils.Paths(
        os.environ.get("GANETI_ROOTDIR") or "/").master_socket
    client = luxi.LuxiClient(reactor, path)
    try:
        ar = runner.AutoRepair(client, reactor, dry_run=opts.dry_run,
                               job_delay=opts.job_delay,
                               reason_source="gnt:client:harep",
                               max_parallel=opts.max_parallel)
        decisions = await ar.run_once()
    finally:
        client.close()
    report(decisions, out, opts.dry_run)


def main(argv=None, out=None, err=None):
    out = out or sys.stdout
    err = err or sys.stderr
    opts = build_parser().parse_args(argv)
    if opts.job_delay < 0:
        err.write("Error: --job-delay must not be negative\n")
        return 2
    if opts.max_parallel is not None and opts.max_parallel < 0:
        err.write("Error: --max-parallel must not be negative\n")
        return 2
    if opts.verbose:
        globalLogBeginner.beginLoggingTo([textFileLogObserver(err)],
                                         redirectStandardIO=False)
    result = []

    def go(reactor):
        d = defer.Deferred.fromCoroutine(_run(reactor, opts, out))

        def failed(f):
            if f.check(errors.GenericError, OSError):
                err.write("Error: %s\n" % f.value)
                result.append(1)
                return None
            return f
        return d.addErrback(failed)
    try:
        task.react(go)
    except SystemExit as e:
        if e.code:
            return e.code
    return result[0] if result else 0


if __name__ == "__main__":
    sys.exit(main())
