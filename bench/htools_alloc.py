"""hspace and hail against Ganeti's on the same generated clusters.

For 50, 200 and 1,000 nodes (see ``ganeti.htools.generate``): hspace
(standard and tiered allocation, plain disks) by both, with the number
of instances allocated and the seconds per allocation; then one
allocate request (plain and drbd) on the largest cluster to Ganeti's
hail and to ours.  Ganeti's runs get a time limit ("timeout" past it).

Options: ``--sizes`` (HTOOLS_ALLOC_BENCH_SIZES, default 50,200,1000),
``--ganeti-timeout`` (HTOOLS_ALLOC_BENCH_GANETI_TIMEOUT, default 300),
``--parts`` (HTOOLS_ALLOC_BENCH_PARTS: ``hspace``, ``hail`` or both, the
default; Ganeti's hspace takes many minutes on the bigger clusters).
"""

import argparse
import json
import os
import re
import shutil
import sys
import tempfile

from twisted.internet import defer

from bench.htools import run_timed
from bench.table import table
from ganeti.htools import generate, text

GANETI = "/usr/lib/ganeti/3.0/usr"
HSPACE_ARGS = ["--disk-template=plain", "--standard-alloc=20480,2048,2",
               "--tiered-alloc=40960,8192,4", "--machine-readable"]


def options(argv=None):
    p = argparse.ArgumentParser(prog="bench.htools_alloc")
    p.add_argument("--sizes", default=os.environ.get(
        "HTOOLS_ALLOC_BENCH_SIZES", "50,200,1000"))
    p.add_argument("--ganeti-timeout", type=float, default=float(
        os.environ.get("HTOOLS_ALLOC_BENCH_GANETI_TIMEOUT", "300")))
    p.add_argument("--parts", default=os.environ.get(
        "HTOOLS_ALLOC_BENCH_PARTS", "hspace,hail"))
    return p.parse_args(argv or [])


def _keys(out):
    return dict(re.findall(r"^HTS_([A-Z_]+)=(.*)$", out, re.M))


def _count(keys):
    n = keys.get("ALLOC_INSTANCES")
    t = keys.get("TSPEC", "").strip("'")
    tiered = sum(int(x.split("=")[1]) for x in t.split() if "=" in x)
    return (int(n) if n is not None else None), tiered


async def _bench(reactor, opts):
    tmp = tempfile.mkdtemp(prefix="htools-alloc-bench-")
    py = sys.executable
    try:
        rows = []
        files = {}
        for n in [int(x) for x in opts.sizes.split(",") if x]:
            path = os.path.join(tmp, "c%d.txt" % n)
            with open(path, "w") as f:
                f.write(generate.generate_text(generate.GenSpec(
                    nodes=n, seed=1, crowd=0.3, inst_per_node=4)))
            files[n] = path
            if "hspace" not in opts.parts:
                continue
            ours, t_ours, _ = await run_timed(
                reactor, [py, "-m", "ganeti.htools.hspace", "-t", path]
                + HSPACE_ARGS, 3600)
            theirs, t_theirs, to = await run_timed(
                reactor, [GANETI + "/bin/hspace", "-t", path]
                + HSPACE_ARGS, opts.ganeti_timeout)
            o_std, o_tier = _count(_keys(ours))
            g_std, g_tier = (None, None) if to else _count(_keys(theirs))
            o_total = (o_std or 0) + o_tier
            rows.append([
                "%d" % n, "%s/%s" % (o_std, o_tier),
                "timeout" if to else "%s/%s" % (g_std, g_tier),
                "%.4f" % (t_ours / max(o_total, 1)),
                "timeout" if to else "%.4f" % (t_theirs / max(o_total, 1)),
                "%.1f" % t_ours,
                "> %.0f" % t_theirs if to else "%.1f" % t_theirs,
                "-" if to else "%.0fx" % (t_theirs / t_ours)])
        if rows:
            table(["nodes", "ours std/tiered", "ganeti std/tiered",
                   "s/alloc ours", "s/alloc ganeti", "s ours", "s ganeti",
                   "speed-up"], rows)
        if "hail" not in opts.parts:
            return
        big = max(files)
        from tests import htools_requests as R
        cd = text.load_text_file(files[big])
        rows = []
        for dt in ("plain", "drbd"):
            doc = R.request_for(cd, R.alloc_request("bench", 2048, 20480,
                                                    2, dt))
            req = os.path.join(tmp, "req-%s.json" % dt)
            with open(req, "w") as f:
                json.dump(doc, f)
            ours, t_ours, _ = await run_timed(
                reactor, [py, "-c", _TIME_ONE, req], 600)
            theirs, t_theirs, to = await run_timed(
                reactor, [GANETI + "/lib/ganeti/iallocators/hail", req],
                opts.ganeti_timeout)
            m = re.search(r"answer_s=([0-9.]+) (.*)", ours)
            rows.append([dt, "%d" % big, "%.1f ms" % (float(m.group(1))
                                                       * 1000),
                         "> %.0f s" % t_theirs if to
                         else "%.2f s" % t_theirs,
                         m.group(2)[:60],
                         "timeout" if to else theirs.strip()[:60]])
        table(["template", "nodes", "ours (answer)", "ganeti hail",
               "ours", "ganeti"], rows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# time answer() alone (not the interpreter start and the JSON parsing)
_TIME_ONE = """
import json, sys, time
from ganeti.htools import iallocator
doc = json.load(open(sys.argv[1]))
t = time.perf_counter()
ans = iallocator.answer(doc)
dt = time.perf_counter() - t
print("answer_s=%f %s" % (dt, ans["info"][:200]))
"""


def run(reactor, argv=None):
    return defer.ensureDeferred(_bench(reactor, options(argv)))


if __name__ == "__main__":
    from twisted.internet import task
    task.react(lambda reactor: run(reactor, sys.argv[1:]))
