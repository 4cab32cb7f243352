"""Authenticated writes under an anonymous flood: the real daemons.

A one-node cluster with 20 instances (written straight into config.data)
runs ganeti-noded, ganeti-masterd (its default query job budget and
archiving) and ganeti-rapi with ``--no-ssl`` (its default rate limits) on
a random 127.x.y.z address.  One authenticated client in this process
adds a cluster tag and removes it again, one job at a time, at most 10
jobs a second, each timed from the request until the job has finished
(``PUT``/``DELETE /2/tags``, then ``GET /2/jobs/ID/wait`` until it is
final).  Two rows, in the same run:

* baseline: nothing else talks to the cluster;
* flood: meanwhile a separate process (``python -m bench.flood
  --flood``) runs 32 anonymous clients, two on each of 16 loopback
  addresses, each sending as fast as it is answered: details of unknown
  instances (``GET /2/instances/NAME/info``, mostly), details of real
  ones and the OS list (both submit a query job).

Reported: the writes' p50/p99 (request -> job id, and request -> job
finished) and their ratio to the baseline, and what the flood got
(requests/s by answer status).
"""

import collections
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from bench.stats import percentile
from bench.table import table

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_INSTANCES = 20
PORT = 5081
USER, PASSWORD = "bench", "bench-pw"
DURATION = 10.0          # seconds per row
WARMUP = 2.0             # seconds of flood before the writes are timed
WRITE_PERIOD = 0.1       # at most 10 writes a second
FLOOD_ADDRESSES = 16
FLOOD_PER_ADDRESS = 2
FINAL = ("success", "error", "canceled")


def _auth_header():
    import base64
    token = base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode())
    return "Basic " + token.decode()


def _request(host, method, path, body=None, auth=False, source=None):
    conn = http.client.HTTPConnection(
        host, PORT, timeout=60,
        source_address=(source, 0) if source else None)
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = _auth_header()
    try:
        conn.request(method, path, body=None if body is None
                     else json.dumps(body), headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, raw
    finally:
        conn.close()


# --- the flood (its own process) ---------------------------------------------

def flood(host, seconds, addresses, instances):
    """Anonymous GETs from ``addresses`` for ``seconds``; answers counted
    by status."""
    end = time.monotonic() + seconds
    counts = collections.Counter()
    lock = threading.Lock()

    def client(source, index):
        n = 0
        while time.monotonic() < end:
            n += 1
            if n % 10 == 0:
                path = "/2/os"
            elif n % 5 == 0:
                path = "/2/instances/%s/info" % random.choice(instances)
            else:
                path = "/2/instances/nope-%d-%d/info" % (index, n)
            try:
                status, _ = _request(host, "GET", path, source=source)
            except (OSError, http.client.HTTPException):
                status = "error"
            with lock:
                counts[status] += 1

    threads = [threading.Thread(target=client, args=(source, i))
               for i, source in enumerate(addresses * FLOOD_PER_ADDRESS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {str(k): v for k, v in counts.items()}


# --- the writer ----------------------------------------------------------------

def write_latencies(host, seconds):
    """Tag jobs one at a time for ``seconds``: (submit latencies, job
    latencies, refusals)."""
    submit, done, refused = [], [], collections.Counter()
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
        t0 = time.monotonic()
        method = "PUT" if n % 2 else "DELETE"
        status, raw = _request(host, method, "/2/tags?tag=bench", auth=True)
        t1 = time.monotonic()
        if status != 200:
            refused[status] += 1
            time.sleep(WRITE_PERIOD)
            continue
        job = json.loads(raw)
        prev = None
        while True:
            # the long poll needs the write right
            status, raw = _request(host, "GET", "/2/jobs/%d/wait" % job,
                                   {"fields": ["status"],
                                    "previous_job_info": prev,
                                    "previous_log_serial": None}, auth=True)
            if status != 200:
                raise RuntimeError("waiting for job %s: %s %s"
                                   % (job, status, raw[:200]))
            answer = json.loads(raw)
            if answer:
                prev = answer["job_info"]
                if prev[0] in FINAL:
                    break
        t2 = time.monotonic()
        submit.append(t1 - t0)
        done.append(t2 - t0)
        pause = WRITE_PERIOD - (t2 - t0)
        if pause > 0:
            time.sleep(pause)
    return submit, done, refused


# --- orchestration -------------------------------------------------------------

def bench():
    from bench import rapi as rapi_bench
    from ganeti.dev.vcluster import port_open, wait_for
    base = tempfile.mkdtemp(prefix="floodb-", dir="/tmp")
    vc = None
    try:
        vc = rapi_bench.build_cluster(base, N_INSTANCES)
        node = vc.master
        users = node.paths.rapi_users_file
        os.makedirs(os.path.dirname(users), exist_ok=True)
        with open(users, "w") as f:
            f.write("%s %s write\n" % (USER, PASSWORD))
        os_dir = os.path.join(REPO, "etc", "os")
        noded = vc.start("noded", vc.twistd_command(
            "ganeti-noded", node, "--no-mlock", "--os-search-path", os_dir))
        wait_for("noded", lambda: noded.poll() is None and port_open(
            node.ip, 1811), 60.0)
        rapi_bench._start_master(vc, ())
        rapi = vc.start("rapi", vc.twistd_command(
            "ganeti-rapi", node, "--port", str(PORT), "--no-ssl"))
        wait_for("rapi", lambda: rapi.poll() is None and port_open(
            node.ip, PORT), 60.0)
        host = node.ip
        instances = ["inst%04d.example.com" % i for i in range(N_INSTANCES)]

        baseline = write_latencies(host, DURATION)
        prefix = host.rsplit(".", 1)[0]
        sources = ["%s.%d" % (prefix, 200 + i) for i in range(
            FLOOD_ADDRESSES)]
        env = dict(os.environ, PYTHONPATH=REPO)
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.flood", "--flood", host,
             str(DURATION + WARMUP), json.dumps(sources),
             json.dumps(instances)], env=env, cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            time.sleep(WARMUP)
            flooded = write_latencies(host, DURATION)
            out, err = proc.communicate(timeout=DURATION + 300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode != 0:
            raise RuntimeError("flood failed:\n%s" % err.decode())
        flood_counts = json.loads(out.decode())
    finally:
        if vc is not None:
            vc.stop_all()
        shutil.rmtree(base, ignore_errors=True)

    def ms(values, pct):
        return "%.1f" % (percentile(values, pct) * 1000) if values else "-"

    def ratio(values, base_values, pct):
        if not values or not base_values:
            return "-"
        return "%.2fx" % (percentile(values, pct)
                          / percentile(base_values, pct))

    print("one node, %d instances; ganeti-rapi --no-ssl with its default"
          " rate limits, ganeti-masterd with its default query job budget"
          % N_INSTANCES)
    print("writes: one authenticated client, PUT/DELETE /2/tags one job at"
          " a time (at most %d a second), timed to the job id and to the"
          " job's end; %.0f s per row" % (1 / WRITE_PERIOD, DURATION))
    print("flood: %d anonymous clients on %d loopback addresses in another"
          " process, as fast as answered: 80%% unknown instance details,"
          " 10%% real ones, 10%% OS lists" % (FLOOD_ADDRESSES
                                             * FLOOD_PER_ADDRESS,
                                             FLOOD_ADDRESSES))
    print()
    rows = []
    for label, (submit, done, refused) in (("baseline", baseline),
                                           ("anonymous flood", flooded)):
        rows.append((label, len(done), ms(submit, 50), ms(submit, 99),
                     ms(done, 50), ms(done, 99),
                     ratio(done, baseline[1], 50),
                     ratio(done, baseline[1], 99),
                     sum(refused.values())))
    table(("writes", "jobs", "id p50 ms", "id p99 ms", "done p50 ms",
           "done p99 ms", "done p50 vs baseline", "done p99 vs baseline",
           "refused"), rows)
    print()
    total = sum(flood_counts.values())
    seconds = DURATION + WARMUP
    print("flood answers: %d requests, %.0f/s: %s" % (
        total, total / seconds, ", ".join(
            "%s: %d" % (k, v) for k, v in sorted(flood_counts.items()))))


def run(reactor):
    from twisted.internet import threads
    return threads.deferToThread(bench)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--flood"]:
        host, seconds, sources, instances = sys.argv[2:6]
        json.dump(flood(host, float(seconds), json.loads(sources),
                        json.loads(instances)), sys.stdout)
    else:
        bench()
