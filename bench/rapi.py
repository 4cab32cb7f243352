"""RAPI benchmark: the real daemons, a separate load-generator process.

A one-node cluster with 2,000 instances (one file disk and one NIC each;
written straight into config.data) runs ganeti-noded, ganeti-masterd and
ganeti-rapi (HTTPS with its certificate, and a second ganeti-rapi with
``--no-ssl``) on a random 127.x.y.z address.  A second process
(``python -m bench.rapi --loadgen``) runs 16 concurrent clients (threads,
one new connection per request, as the server closes every connection
like Ganeti's) for a fixed time per scenario:

* ``GET /2/instances?bulk=1`` -- every field of 2,000 instances, live state
  from the node daemon included (one luxi Query, ~2.5 MB of JSON);
* ``GET /2/jobs/ID`` -- a finished job (one luxi QueryJobs);
* ``GET /version`` -- the baseline: HTTP, TLS and the app, no master.

Requests/s and p50/p99 latency are reported for HTTPS and plain HTTP, and
for HTTPS once more with every client using its own URL ("unshared": no two
concurrent requests are identical, so none share an answer).
"""

import json
import os
import random
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time

N_INSTANCES = 2000
CLIENTS = 16
DURATION = 8.0        # seconds per scenario
WARMUP = 1.0
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TLS_PORT = 5080
PLAIN_PORT = 5081


# --- the cluster -------------------------------------------------------------

def build_cluster(base):
    """A one-node virtual cluster holding N_INSTANCES instances."""
    from ganeti import config, constants, objects
    from ganeti.dev.vcluster import VirtualCluster
    from ganeti.utils import io

    vc = VirtualCluster(os.path.join(base, "vc"), node_count=1)
    node = vc.master
    node.ip = "127.%d.%d.%d" % (random.randint(1, 254),
                                random.randint(1, 254),
                                random.randint(2, 254))
    store = vc.create(hypervisors=(constants.HT_FAKE,))
    master = store.master_node
    fdir = store.cluster.file_storage_dir
    for i in range(N_INSTANCES):
        name = "inst%04d.example.com" % i
        disk = objects.Disk(
            uuid=objects.new_uuid(), dev_type=constants.DT_FILE, size=1024,
            mode="rw", nodes=[master.uuid], iv_name="disk/0",
            logical_id=["loop", "%s/%s/disk0" % (fdir, name)])
        inst = objects.Instance(
            uuid=objects.new_uuid(), name=name, primary_node=master.uuid,
            os="busybox+default", hypervisor=constants.HT_FAKE,
            admin_state="down", admin_state_source="admin",
            disks=[disk.uuid], disks_active=False,
            beparams={"maxmem": 128, "minmem": 128, "vcpus": 1},
            nics=[objects.NIC(uuid=objects.new_uuid(),
                              mac="aa:00:00:%02x:%02x:%02x" % (
                                  i // 65536, (i // 256) % 256, i % 256),
                              nicparams={"mode": "routed", "link": "100"},
                              ip="10.%d.%d.%d" % (i // 65536,
                                                  (i // 256) % 256,
                                                  i % 256))],
            tags=["bench"], ctime=time.time(), mtime=time.time())
        store.disks[disk.uuid] = disk
        store.instances[inst.uuid] = inst
    io.atomic_write(node.paths.config_file, store.dumps())
    store = config.ConfigStore.load(node.paths.config_file)
    store.verify()
    return vc


def start_daemons(vc):
    from ganeti import constants
    from ganeti.dev.vcluster import master_answers, port_open, wait_for
    node = vc.master
    os_dir = os.path.join(REPO, "etc", "os")
    procs = []

    def start(desc, argv):
        proc = vc.start(desc, argv)
        procs.append(proc)
        return proc

    def alive(proc):
        if proc.poll() is not None:
            raise RuntimeError("%s exited; see %s" % (proc.args, vc.base))
        return True

    noded = start("noded", vc.twistd_command(
        "ganeti-noded", node, "--no-mlock", "--os-search-path", os_dir))
    wait_for("noded", lambda: alive(noded) and port_open(
        node.ip, constants.DEFAULT_NODED_PORT), 60.0)
    master = start("masterd", vc.twistd_command("ganeti-masterd", node))
    wait_for("masterd", lambda: alive(master) and master_answers(node), 60.0)
    tls = start("rapi", vc.twistd_command("ganeti-rapi", node, "--port",
                                          str(TLS_PORT)))
    plain = start("rapi-plain", vc.twistd_command(
        "ganeti-rapi", node, "--port", str(PLAIN_PORT), "--no-ssl"))
    for proc, port in ((tls, TLS_PORT), (plain, PLAIN_PORT)):
        wait_for("rapi on %d" % port, lambda: alive(proc) and
                 port_open(node.ip, port), 60.0)


def finished_job(vc):
    """The id of a finished job (OP_TEST_DELAY of 0 s)."""
    from ganeti import luxi
    from ganeti.dev.vcluster import wait_for
    with luxi.BlockingClient(vc.master.paths.master_socket, 60) as c:
        job = c.call("SubmitJob", [{"OP_ID": "OP_TEST_DELAY",
                                    "duration": 0.0}])
        wait_for("job %s" % job, lambda: c.call("QueryJobs", [job], [
            "status"])[0][0] in ("success", "error", "canceled"), 60.0)
    return job


# --- the load generator (its own process) ------------------------------------

def loadgen(host, port, use_tls, path, clients=CLIENTS, duration=DURATION,
            warmup=WARMUP, distinct=False):
    """Run ``clients`` threads GETting ``path`` for ``duration`` s after
    ``warmup`` s; statistics of the measured part.  With ``distinct`` each
    client adds its own (ignored) query argument, so no two concurrent
    requests are identical and none share an answer."""
    import http.client
    ctx = None
    if use_tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    start = time.monotonic() + warmup
    end = start + duration
    lock = threading.Lock()
    latencies, failures, sizes = [], [], []

    def client(index):
        url = path
        if distinct:
            url += ("&" if "?" in path else "?") + "client=%d" % index
        while True:
            t0 = time.monotonic()
            if t0 >= end:
                return
            try:
                if ctx is not None:
                    conn = http.client.HTTPSConnection(host, port,
                                                       context=ctx,
                                                       timeout=60)
                else:
                    conn = http.client.HTTPConnection(host, port, timeout=60)
                conn.request("GET", url)
                resp = conn.getresponse()
                body = resp.read()
                conn.close()
                ok = resp.status == 200
            except (OSError, http.client.HTTPException) as err:
                ok, body = False, str(err).encode()
            t1 = time.monotonic()
            if t1 < start or t1 > end:
                continue
            with lock:
                if ok:
                    latencies.append(t1 - t0)
                    sizes.append(len(body))
                else:
                    failures.append(body[:200].decode("utf-8", "replace"))

    threads = [threading.Thread(target=client, args=(i,))
               for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    latencies.sort()

    def pct(p):
        if not latencies:
            return None
        return latencies[min(len(latencies) - 1,
                             int(round(p / 100.0 * (len(latencies) - 1))))]
    return {"path": path, "tls": use_tls, "clients": clients,
            "distinct": distinct,
            "requests": len(latencies), "failures": len(failures),
            "failure_sample": failures[:3],
            "rps": len(latencies) / duration, "p50": pct(50), "p99": pct(99),
            "max": latencies[-1] if latencies else None,
            "bytes": (sum(sizes) // len(sizes)) if sizes else 0}


def _run_loadgen(host, port, use_tls, path, distinct=False):
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run(
        [sys.executable, "-m", "bench.rapi", "--loadgen", host, str(port),
         "1" if use_tls else "0", path, "1" if distinct else "0"],
        env=env, cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        timeout=DURATION + WARMUP + 300)
    if proc.returncode != 0:
        raise RuntimeError("load generator failed:\n%s"
                           % proc.stderr.decode("utf-8", "replace"))
    return json.loads(proc.stdout.decode("utf-8"))


def _table(headers, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = "| " + " | ".join("%%-%ds" % w for w in widths) + " |"
    print(fmt % tuple(headers))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print(fmt % tuple(row))


def bench():
    base = tempfile.mkdtemp(prefix="rapib-", dir="/tmp")
    vc = None
    try:
        t0 = time.monotonic()
        vc = build_cluster(base)
        start_daemons(vc)
        job = finished_job(vc)
        setup = time.monotonic() - t0
        ip = vc.master.ip
        results = []
        for path in ("/2/instances?bulk=1", "/2/jobs/%d" % job, "/version"):
            for use_tls, port in ((True, TLS_PORT), (False, PLAIN_PORT)):
                results.append(_run_loadgen(ip, port, use_tls, path))
            if path != "/version":
                results.append(_run_loadgen(ip, TLS_PORT, True, path,
                                            distinct=True))
    finally:
        if vc is not None:
            vc.stop_all()
        shutil.rmtree(base, ignore_errors=True)
    print("%d instances on one node (fake hypervisor; live state asked from"
          " the node daemon on every bulk query); setup %.1f s"
          % (N_INSTANCES, setup))
    print("load generator: a separate process, %d concurrent clients, a new"
          " connection per request (the server closes each, as Ganeti's),"
          " %.0f s per row after %.0f s warm-up" % (CLIENTS, DURATION,
                                                    WARMUP))
    print("\"unshared\": every client sends its own URL, so concurrent"
          " requests never share one answer (the worst case)")
    print()
    rows = []
    for r in results:
        rows.append((r["path"].replace("/%d" % job, "/ID")
                     if "/jobs/" in r["path"] else r["path"],
                     ("https" if r["tls"] else "http")
                     + (", unshared" if r["distinct"] else ""),
                     "%.1f" % r["rps"],
                     "%.1f" % (r["p50"] * 1000) if r["p50"] else "-",
                     "%.1f" % (r["p99"] * 1000) if r["p99"] else "-",
                     "%d" % r["bytes"], r["failures"]))
    _table(("request", "scheme", "requests/s", "p50 ms", "p99 ms",
            "body bytes", "failed"), rows)
    for r in results:
        if r["failures"]:
            print("failures of %s: %s" % (r["path"], r["failure_sample"]))


def run(reactor):
    from twisted.internet import threads
    return threads.deferToThread(bench)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--loadgen"]:
        host, port, use_tls, path, distinct = sys.argv[2:7]
        json.dump(loadgen(host, int(port), use_tls == "1", path,
                          distinct=distinct == "1"), sys.stdout)
    else:
        bench()
