"""hbal against Ganeti's hbal on the same generated clusters.

Clusters of 50, 200 and 1,000 nodes (8 instances per node, most
primaries on half of the nodes, drbd and plain instances) are written as
htools text files; both balancers run on each, with and without disk
moves, as separate processes.  The table shows the moves, the final
score, the seconds per move and in total, and the per-move speed-up.
Ganeti's runs get a time limit and show "timeout" past it (its hbal
needs minutes per move with disk moves on hundreds of nodes).

Options (environment, for ``python -m bench htools``; or flags with
``python -m bench.htools``):

* ``HTOOLS_BENCH_SIZES`` / ``--sizes``: node counts, default 50,200,1000
* ``HTOOLS_BENCH_MODES`` / ``--modes``: nodisk,disk
* ``HTOOLS_BENCH_GANETI_TIMEOUT`` / ``--ganeti-timeout``: seconds, 300
* ``HTOOLS_BENCH_TIMEOUT`` / ``--timeout``: seconds for ours, 1800
* ``HTOOLS_BENCH_GANETI`` / ``--ganeti``: Ganeti's hbal binary
"""

import argparse
import os
import re
import shutil
import signal
import sys
import tempfile
import time

from twisted.internet import defer, error, protocol

from bench.table import table
from ganeti.htools import generate

GANETI_HBAL = "/usr/lib/ganeti/3.0/usr/bin/hbal"


class _Collect(protocol.ProcessProtocol):

    def __init__(self, done):
        self.done = done
        self.out = []

    def outReceived(self, data):
        self.out.append(data)

    def errReceived(self, data):
        pass  # the tools' progress on stderr is not measured

    def processEnded(self, reason):
        self.done.callback(b"".join(self.out).decode("utf-8", "replace"))


async def run_timed(reactor, argv, timeout, env=None):
    """(stdout, seconds, timed out) of a command, killed after
    ``timeout`` seconds."""
    done = defer.Deferred()
    start = time.monotonic()
    proc = reactor.spawnProcess(_Collect(done), argv[0], argv,
                                env=env or os.environ.copy())
    timed_out = []

    def kill():
        timed_out.append(True)
        try:
            proc.signalProcess(signal.SIGKILL)
        except error.ProcessExitedAlready:
            pass
    killer = reactor.callLater(timeout, kill)
    out = await done
    if killer.active():
        killer.cancel()
    return out, time.monotonic() - start, bool(timed_out)


def parse(out):
    ini = re.search(r"Initial score: ([-\d.]+)", out)
    fin = re.search(r"improved from [-\d.]+ to ([-\d.]+)", out)
    n = re.search(r"Solution length=(\d+)", out)
    moves = len(re.findall(r"^\s+\d+\. ", out, re.M))
    return {"initial": float(ini.group(1)) if ini else None,
            "final": float(fin.group(1)) if fin else None,
            "moves": int(n.group(1)) if n else moves}


def options(argv=None):
    env = os.environ
    p = argparse.ArgumentParser(prog="python -m bench.htools")
    p.add_argument("--sizes", default=env.get("HTOOLS_BENCH_SIZES",
                                              "50,200,1000"))
    p.add_argument("--modes", default=env.get("HTOOLS_BENCH_MODES",
                                              "nodisk,disk"))
    p.add_argument("--ganeti-timeout", type=float,
                   default=float(env.get("HTOOLS_BENCH_GANETI_TIMEOUT",
                                         300)))
    p.add_argument("--timeout", type=float,
                   default=float(env.get("HTOOLS_BENCH_TIMEOUT", 1800)))
    p.add_argument("--ganeti", default=env.get("HTOOLS_BENCH_GANETI",
                                               GANETI_HBAL))
    return p.parse_args(argv or [])


def _fmt(res, timeout):
    if res is None:
        return ["n/a"] * 4
    if res["timeout"]:
        return ["timeout", "-", "%d moves/%.0fs" % (res["moves"], timeout)
                if res["moves"] else "-", ">%.0f" % timeout]
    per = res["seconds"] / res["moves"] if res["moves"] else 0.0
    return [str(res["moves"]),
            "%.6f" % res["final"] if res["final"] is not None else "-",
            "%.4f" % per, "%.1f" % res["seconds"]]


async def _bench(reactor, opts):
    tmp = tempfile.mkdtemp(prefix="htools-bench-")
    sizes = [int(x) for x in opts.sizes.split(",") if x]
    modes = [m for m in opts.modes.split(",") if m]
    have_ganeti = os.access(opts.ganeti, os.X_OK)
    env = os.environ.copy()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
    rows = []
    try:
        for n in sizes:
            path = os.path.join(tmp, "cluster%d.txt" % n)
            with open(path, "w") as f:
                f.write(generate.generate_text(generate.GenSpec(
                    nodes=n, inst_per_node=8, seed=1, drbd=0.5,
                    crowd=0.8)))
            for mode in modes:
                extra = ["--no-disk-moves"] if mode == "nodisk" else []
                res = {}
                for who, argv, limit in (
                        ("ganeti", [opts.ganeti, "-t", path] + extra,
                         opts.ganeti_timeout),
                        ("ours", [sys.executable, "-m", "ganeti.htools.hbal",
                                  "-t", path] + extra, opts.timeout)):
                    if who == "ganeti" and not have_ganeti:
                        res[who] = None
                        continue
                    out, secs, to = await run_timed(reactor, argv, limit,
                                                    env)
                    r = parse(out)
                    r.update(seconds=secs, timeout=to)
                    res[who] = r
                g, o = res["ganeti"], res["ours"]
                speed = "-"
                if g and o and o["moves"] and not o["timeout"]:
                    o_per = o["seconds"] / o["moves"]
                    if g["timeout"]:
                        if g["moves"]:
                            speed = ">%.0fx" % (opts.ganeti_timeout /
                                                g["moves"] / o_per)
                    elif g["moves"]:
                        speed = "%.1fx" % (g["seconds"] / g["moves"]
                                           / o_per)
                better = "-"
                if g and o and g["final"] is not None and \
                        o["final"] is not None and not g["timeout"]:
                    better = "yes" if o["final"] <= g["final"] + 1e-7 \
                        else "NO"
                rows.append([str(n), mode] + _fmt(g, opts.ganeti_timeout)
                            + _fmt(o, opts.timeout) + [speed, better])
                print("  ... %d nodes %s done" % (n, mode), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    table(["nodes", "mode", "G moves", "G final", "G s/move", "G total s",
           "moves", "final", "s/move", "total s", "speed-up/move",
           "final<=G"], rows)
    if not have_ganeti:
        print("(Ganeti's hbal not found at %s: only ours measured)"
              % opts.ganeti)


def run(reactor, argv=None):
    return defer.Deferred.fromCoroutine(_bench(reactor, options(argv)))


if __name__ == "__main__":
    from twisted.internet import task as _task
    _args = sys.argv[1:]
    _task.react(lambda reactor: run(reactor, _args))
