"""Event stream benchmark: 200 clients following jobs through ``GET
/2/events`` against the same 200 clients polling ``GET /2/jobs/ID``.

A one-node virtual cluster on a random 127.x.y.z address runs
ganeti-noded, ganeti-masterd and ganeti-rapi (HTTPS, with room for the
200 connections from one address).  A load generator in a process of its
own (``python -m bench.events --loadgen``, one Twisted reactor) runs one
scenario at a time:

* ``poll``: 200 clients; job J belongs to client J mod 200, which asks
  ``GET /2/jobs/J`` every second (one new HTTPS connection per request, as
  the server closes each) until the job is finished;
* ``sse``: 200 clients, each with one ``GET /2/events?kind=job``
  connection open, each seeing every job finish.

Meanwhile it submits 500 jobs (OP_TEST_DELAY, 0 s) over luxi, 50 a
second.  A job's latency is when a client learns it finished (the poll
answer showing a final status, the ``finished`` event arriving) minus the
job's end time as the master recorded it (``end_ts``).  The master's and
the RAPI daemon's CPU seconds (``/proc/PID/stat``) are taken around each
scenario.  The table gives ratios of the stream against the polling
measured in the same run.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

CLIENTS = 200
JOBS = 500
SUBMIT_RATE = 50.0      # jobs a second
POLL_INTERVAL = 1.0
PORT = 5080
USER, PASSWORD = "bench", "b3nch"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINAL = ("success", "error", "canceled")


# --- the load generator (its own process) --------------------------------------

def _end_time(ts):
    return ts[0] + ts[1] / 1e6


def loadgen(host, socket_path, mode, clients=CLIENTS, jobs=JOBS):
    """Run one scenario; its measurements (a dict)."""
    from twisted.internet import task
    result = {}
    from twisted.internet import defer
    try:
        task.react(lambda reactor: defer.Deferred.fromCoroutine(_scenario(
            reactor, host, socket_path, mode, clients, jobs, result)))
    except SystemExit as stop:
        if stop.code:
            raise
    return result


def _agent(reactor):
    from twisted.web import client as web_client
    from ganeti import crypto
    pool = web_client.HTTPConnectionPool(reactor, persistent=False)
    pool.maxPersistentPerHost = 0
    return web_client.Agent(reactor, contextFactory=crypto.AnyServerPolicy(),
                            pool=pool, connectTimeout=60)


def _auth():
    import base64
    return [b"Basic " + base64.b64encode(("%s:%s" % (USER, PASSWORD))
                                         .encode())]


async def _scenario(reactor, host, socket_path, mode, clients, jobs, result):
    from twisted.internet import defer
    from ganeti import luxi
    agent = _agent(reactor)
    latencies = []
    errors = []
    requests = [0]
    submitted = []
    done = defer.Deferred()
    pending = set()
    state = {"stop": False}

    seen_finished = set()

    def finished_one(job_id):
        # (a job may end before its SubmitJob answer is read)
        seen_finished.add(job_id)
        pending.discard(job_id)
        if not pending and len(submitted) == jobs and not done.called:
            done.callback(None)

    if mode == "sse":
        seen = {}
        streams = []
        ready = []
        for index in range(clients):
            ready.append(defer.Deferred.fromCoroutine(_sse_client(
                reactor, agent, host, index, latencies, errors, seen,
                clients, finished_one, streams)))
        await defer.gatherResults(ready)
    else:
        async def poll(job_id):
            from twisted.web import client as web_client
            url = ("https://%s:%d/2/jobs/%d" % (host, PORT, job_id)).encode()
            while not state["stop"]:
                await _sleep(reactor, POLL_INTERVAL)
                requests[0] += 1
                try:
                    response = await agent.request(
                        b"GET", url, _headers({b"authorization": _auth()}))
                    body = json.loads(await web_client.readBody(response))
                except Exception as err:
                    errors.append(str(err))
                    continue
                if body.get("status") in FINAL:
                    latencies.append(reactor.seconds()
                                     - _end_time(body["end_ts"]))
                    finished_one(job_id)
                    return

    client = luxi.LuxiClient(reactor, socket_path)
    started = reactor.seconds()
    for n in range(jobs):
        job_id = await client.call("SubmitJob", [{"OP_ID": "OP_TEST_DELAY",
                                                  "duration": 0.0}])
        submitted.append(job_id)
        if job_id not in seen_finished:
            pending.add(job_id)
        if mode == "poll":
            # client job_id mod CLIENTS follows it
            defer.Deferred.fromCoroutine(poll(job_id))
        delay = started + (n + 1) / SUBMIT_RATE - reactor.seconds()
        if delay > 0:
            await _sleep(reactor, delay)
    if not pending and not done.called:
        done.callback(None)
    done.addTimeout(300, reactor)
    try:
        await done
    except defer.TimeoutError:
        errors.append("%d job(s) never seen finished" % len(pending))
    state["stop"] = True
    result.update({"mode": mode, "latencies": latencies,
                   "errors": len(errors), "error_sample": errors[:3],
                   "requests": requests[0], "jobs": len(submitted),
                   "seconds": reactor.seconds() - started})
    await client.close()
    if mode == "sse":
        for stream in streams:
            stream.stopProducing()


def _headers(values):
    from twisted.web.http_headers import Headers
    return Headers(values)


def _sleep(reactor, seconds):
    from twisted.internet import task
    return task.deferLater(reactor, seconds, lambda: None)


async def _sse_client(reactor, agent, host, index, latencies, errors, seen,
                      clients, finished_one, streams):
    from twisted.internet import defer
    from twisted.internet.protocol import Protocol

    url = ("https://%s:%d/2/events?kind=job" % (host, PORT)).encode()
    response = await agent.request(b"GET", url,
                                   _headers({b"authorization": _auth()}))
    if response.code != 200:
        errors.append("GET /2/events: %d" % response.code)
        return

    class Reader(Protocol):
        def __init__(self):
            self.buffer = b""

        def dataReceived(self, data):
            self.buffer += data
            while b"\n\n" in self.buffer:
                block, self.buffer = self.buffer.split(b"\n\n", 1)
                for line in block.split(b"\n"):
                    if not line.startswith(b"data: "):
                        continue
                    event = json.loads(line[6:])
                    if event.get("type") != "finished":
                        if event.get("kind") == "cut":
                            errors.append("cut: %s" % event["data"])
                        continue
                    latencies.append(reactor.seconds() - _end_time(
                        event["data"]["end_ts"]))
                    job_id = event["id"]
                    seen[job_id] = seen.get(job_id, 0) + 1
                    if seen[job_id] == clients:
                        finished_one(job_id)

        def connectionLost(self, reason):
            pass
    reader = Reader()
    response.deliverBody(reader)
    streams.append(reader.transport)
    await defer.succeed(None)


# --- the benchmark -------------------------------------------------------------

def _cpu_seconds(proc):
    with open("/proc/%d/stat" % proc.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_loadgen(host, socket_path, mode):
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run(
        [sys.executable, "-m", "bench.events", "--loadgen", host,
         socket_path, mode], env=env, cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, timeout=900)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError("load generator failed:\n%s"
                           % proc.stderr.decode("utf-8", "replace")[-3000:])
    return json.loads(proc.stdout.decode("utf-8"))


def bench():
    from bench import rapi as rapi_bench
    from bench.stats import percentile
    from bench.table import table
    from ganeti import crypto
    from ganeti.dev.vcluster import port_open, wait_for
    from ganeti.server.rapi import rapi_pem_path

    base = tempfile.mkdtemp(prefix="evb-", dir="/tmp")
    vc = None
    results = []
    try:
        vc = rapi_bench.build_cluster(base, count=0)
        node = vc.master
        crypto.generate_cluster_certificate(rapi_pem_path(node.paths),
                                            vc.cluster_name)
        os.makedirs(os.path.dirname(node.paths.rapi_users_file),
                    exist_ok=True)
        with open(node.paths.rapi_users_file, "w") as f:
            f.write("%s {cleartext}%s read\n" % (USER, PASSWORD))
        os_dir = os.path.join(REPO, "etc", "os")
        noded = vc.start("noded", vc.twistd_command(
            "ganeti-noded", node, "--no-mlock", "--os-search-path", os_dir))
        from ganeti import constants
        wait_for("noded", lambda: port_open(
            node.ip, constants.DEFAULT_NODED_PORT), 60.0)
        master = rapi_bench._start_master(vc, ["--node-check-interval",
                                               "0"])
        rapi = vc.start("rapi", vc.twistd_command(
            "ganeti-rapi", node, "--port", str(PORT),
            "--max-connections", "1024", "--max-client-connections",
            "1024"))
        wait_for("rapi", lambda: port_open(node.ip, PORT), 60.0)
        del noded
        for mode in ("poll", "sse"):
            before = [_cpu_seconds(p) for p in (master, rapi)]
            r = _run_loadgen(node.ip, node.paths.master_socket, mode)
            after = [_cpu_seconds(p) for p in (master, rapi)]
            r["cpu"] = [a - b for a, b in zip(after, before)]
            results.append(r)
    finally:
        if vc is not None:
            vc.stop_all()
        shutil.rmtree(base, ignore_errors=True)
    by_mode = {r["mode"]: r for r in results}
    poll, sse = by_mode["poll"], by_mode["sse"]
    print("%d clients, %d jobs (OP_TEST_DELAY 0 s) submitted at %g/s;"
          " polling every %g s" % (CLIENTS, JOBS, SUBMIT_RATE,
                                   POLL_INTERVAL))

    def ms(value):
        return "%.1f" % (value * 1000.0)

    rows = []
    for r in (poll, sse):
        lat = r["latencies"]
        rows.append((r["mode"], r["jobs"], len(lat), r["requests"],
                     ms(percentile(lat, 50)), ms(percentile(lat, 99)),
                     "%.2f" % r["cpu"][0], "%.2f" % r["cpu"][1],
                     "%.1f" % r["seconds"], r["errors"]))
    table(("scenario", "jobs", "deliveries", "http requests", "p50 ms",
           "p99 ms", "master cpu s", "rapi cpu s", "wall s", "errors"),
          rows)

    def ratio(a, b):
        return "%.3f" % (a / b) if b else "n/a"
    print()
    table(("sse / poll", "ratio"), [
        ("latency p50", ratio(percentile(sse["latencies"], 50),
                              percentile(poll["latencies"], 50))),
        ("latency p99", ratio(percentile(sse["latencies"], 99),
                              percentile(poll["latencies"], 99))),
        ("master cpu", ratio(sse["cpu"][0], poll["cpu"][0])),
        ("rapi cpu", ratio(sse["cpu"][1], poll["cpu"][1])),
        ("rapi cpu per delivery", ratio(
            sse["cpu"][1] / max(len(sse["latencies"]), 1),
            poll["cpu"][1] / max(len(poll["latencies"]), 1))),
        ("master cpu per delivery", ratio(
            sse["cpu"][0] / max(len(sse["latencies"]), 1),
            poll["cpu"][0] / max(len(poll["latencies"]), 1))),
    ])
    print("(a delivery: one client learning that one job finished; with"
          " polling each job is followed by one client, with the stream"
          " every client sees every job)")
    for r in results:
        if r["errors"]:
            print("errors of %s: %s" % (r["mode"], r["error_sample"]))


def run(reactor):
    from twisted.internet import threads
    return threads.deferToThread(bench)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--loadgen"]:
        host, socket_path, mode = sys.argv[2:5]
        json.dump(loadgen(host, socket_path, mode), sys.stdout)
    else:
        bench()
