"""RAPI and luxi query benchmark: the real daemons, a separate load generator.

A one-node cluster with 2,000 instances (one file disk and one NIC each;
written straight into config.data) runs ganeti-noded, ganeti-masterd and
ganeti-rapi (HTTPS with its certificate, and a second ganeti-rapi with
``--no-ssl``) on a random 127.x.y.z address.  A second process
(``python -m bench.rapi --loadgen``) runs 16 concurrent clients (threads,
one new connection per HTTP request, as the server closes every connection
like Ganeti's; one luxi connection per client) for a fixed time per row:

* ``GET /2/instances?bulk=1`` -- every field of 2,000 instances, live state
  from the node daemon included (one luxi query, ~2.2 MB of JSON);
* ``GET /2/nodes?bulk=1`` -- every field of the nodes, live data included;
* ``GET /2/jobs/ID`` -- a finished job (one luxi QueryJobs);
* ``GET /version`` -- the baseline: HTTP, TLS and the app, no master;
* luxi ``Query`` of instances and of nodes with the fields ``gnt-instance
  list`` / ``gnt-node list`` show, each client adding one field of its own
  (16 different field lists).

Requests/s and p50/p99 latency are reported for HTTPS and plain HTTP, and
for HTTPS once more with every client using its own URL ("unshared": no two
concurrent requests are identical, so none share an answer).  The query
rows are measured twice in the same run: first against a master started
with ``--no-query-cache`` (every query computed from scratch, as before the
query cache), then against a master with its default query cache (live
data reused for 2 s); the ratio of the two is printed.  Each row also
shows the CPU time the master and the HTTPS RAPI daemon spent per request.
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
#: seconds for rows whose requests take several seconds each (the 2,000
#: instance list without the caches): several rounds of 16 must end inside
SLOW_DURATION = 30.0
WARMUP = 1.0
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TLS_PORT = 5080
PLAIN_PORT = 5081


# --- the cluster -------------------------------------------------------------

def build_cluster(base, count=N_INSTANCES):
    """A one-node virtual cluster holding ``count`` instances."""
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
    for i in range(count):
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


def _alive(vc, proc):
    if proc.poll() is not None:
        raise RuntimeError("%s exited; see %s" % (proc.args, vc.base))
    return True


def _start_master(vc, master_args):
    from ganeti.dev.vcluster import master_answers, wait_for
    node = vc.master
    master = vc.start("masterd", vc.twistd_command("ganeti-masterd", node,
                                                   *master_args))
    wait_for("masterd", lambda: _alive(vc, master) and master_answers(node),
             60.0)
    return master


def _start_rapis(vc, rapi_args):
    from ganeti.dev.vcluster import port_open, wait_for
    node = vc.master
    tls = vc.start("rapi", vc.twistd_command(
        "ganeti-rapi", node, "--port", str(TLS_PORT), *rapi_args))
    plain = vc.start("rapi-plain", vc.twistd_command(
        "ganeti-rapi", node, "--port", str(PLAIN_PORT), "--no-ssl",
        *rapi_args))
    for proc, port in ((tls, TLS_PORT), (plain, PLAIN_PORT)):
        wait_for("rapi on %d" % port, lambda: _alive(vc, proc) and
                 port_open(node.ip, port), 60.0)
    return tls, plain


def start_daemons(vc, master_args=(), rapi_args=()):
    """Start the daemons; ``{"noded", "masterd", "rapi", "rapi-plain"}``
    (their processes)."""
    from ganeti import constants
    from ganeti.dev.vcluster import port_open, wait_for
    node = vc.master
    os_dir = os.path.join(REPO, "etc", "os")
    noded = vc.start("noded", vc.twistd_command(
        "ganeti-noded", node, "--no-mlock", "--os-search-path", os_dir))
    wait_for("noded", lambda: _alive(vc, noded) and port_open(
        node.ip, constants.DEFAULT_NODED_PORT), 60.0)
    master = _start_master(vc, master_args)
    tls, plain = _start_rapis(vc, rapi_args)
    return {"noded": noded, "masterd": master, "rapi": tls,
            "rapi-plain": plain}


def restart_queries(vc, daemons, master_args=(), rapi_args=()):
    """Stop the master and RAPI daemons (by their pids) and start them
    with these arguments."""
    from ganeti.dev.vcluster import port_open, wait_for
    for name in ("rapi", "rapi-plain", "masterd"):
        proc = daemons[name]
        proc.terminate()
        proc.wait(30)
    for port in (TLS_PORT, PLAIN_PORT):
        wait_for("port %d closed" % port,
                 lambda: not port_open(vc.master.ip, port), 30.0)
    daemons["masterd"] = _start_master(vc, master_args)
    daemons["rapi"], daemons["rapi-plain"] = _start_rapis(vc, rapi_args)


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

#: fields of gnt-instance list / gnt-node list by default; each luxi client
#: adds one of the extras (16 clients, 16 different field lists)
LUXI_FIELDS = {
    "instance": ["name", "hypervisor", "os", "pnode", "status", "oper_ram"],
    "node": ["name", "dtotal", "dfree", "mtotal", "mnode", "mfree",
             "pinst_cnt", "sinst_cnt"],
}
LUXI_EXTRAS = {
    "instance": ["admin_state", "oper_vcpus", "be/maxmem", "tags", "uuid",
                 "disk_usage", "nic.ips", "nic.macs", "ctime", "mtime",
                 "serial_no", "disk.sizes", "snodes", "oper_state",
                 "network_port", "disk_template"],
    "node": ["role", "ctotal", "pinst_list", "uuid", "tags", "offline",
             "drained", "master_candidate", "pip", "sip", "group",
             "serial_no", "ctime", "mtime", "vm_capable", "avail.mem"],
}


def _measure(clients, duration, warmup, make_request):
    """Run ``clients`` threads, each calling its ``make_request(index)()``
    (which returns ``(ok, size, error text)``) in a loop for ``duration``
    s after ``warmup`` s; statistics of the measured part."""
    start = time.monotonic() + warmup
    end = start + duration
    lock = threading.Lock()
    latencies, failures, sizes = [], [], []

    def client(index):
        request = make_request(index)
        while True:
            t0 = time.monotonic()
            if t0 >= end:
                return
            ok, size, error = request()
            t1 = time.monotonic()
            if t1 < start or t1 > end:
                continue
            with lock:
                if ok:
                    latencies.append(t1 - t0)
                    sizes.append(size)
                else:
                    failures.append(error[:200])

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
    return {"clients": clients, "requests": len(latencies),
            "failures": len(failures), "failure_sample": failures[:3],
            "rps": len(latencies) / duration, "p50": pct(50), "p99": pct(99),
            "max": latencies[-1] if latencies else None,
            "bytes": (sum(sizes) // len(sizes)) if sizes else 0}


def loadgen(host, port, use_tls, path, clients=CLIENTS, duration=DURATION,
            warmup=WARMUP, distinct=False):
    """HTTP GETs of ``path``.  With ``distinct`` each client adds its own
    (ignored) query argument, so no two concurrent requests are identical
    and none share an answer."""
    import http.client
    ctx = None
    if use_tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE

    def make_request(index):
        url = path
        if distinct:
            url += ("&" if "?" in path else "?") + "client=%d" % index

        def request():
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
                if resp.status == 200:
                    return True, len(body), ""
                return False, 0, body.decode("utf-8", "replace")
            except (OSError, http.client.HTTPException) as err:
                return False, 0, str(err)
        return request
    result = _measure(clients, duration, warmup, make_request)
    result.update(path=path, tls=use_tls, distinct=distinct)
    return result


def luxi_loadgen(socket_path, what, clients=CLIENTS, duration=DURATION,
                 warmup=WARMUP):
    """luxi Query of ``what`` over one connection per client, each client
    with its own field list."""
    from ganeti import errors, luxi

    def make_request(index):
        client = luxi.BlockingClient(socket_path, 60)
        extras = LUXI_EXTRAS[what]
        fields = LUXI_FIELDS[what] + [extras[index % len(extras)]]

        def request():
            try:
                answer = client.call("Query", what, fields, None)
                return True, len(answer["data"]), ""
            except (OSError, errors.GenericError) as err:
                client.close()
                return False, 0, str(err)
        return request
    result = _measure(clients, duration, warmup, make_request)
    result.update(path="luxi Query %s" % what, tls=False, distinct=True)
    return result


def _run_loadgen(*args):
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run(
        [sys.executable, "-m", "bench.rapi"] + [str(a) for a in args],
        env=env, cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        timeout=SLOW_DURATION + WARMUP + 300)
    if proc.returncode != 0:
        raise RuntimeError("load generator failed:\n%s"
                           % proc.stderr.decode("utf-8", "replace"))
    return json.loads(proc.stdout.decode("utf-8"))


def _http(host, port, use_tls, path, distinct=False, duration=DURATION):
    return _run_loadgen("--loadgen", host, port, "1" if use_tls else "0",
                        path, "1" if distinct else "0", duration)


def _luxi(socket_path, what):
    return _run_loadgen("--luxi-loadgen", socket_path, what)


def _cpu_seconds(proc):
    """User and system CPU seconds of a running process so far."""
    with open("/proc/%d/stat" % proc.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _table(headers, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = "| " + " | ".join("%%-%ds" % w for w in widths) + " |"
    print(fmt % tuple(headers))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print(fmt % tuple(row))


#: the rows measured against both masters: (kind, path or resource,
#: https?, unshared?, seconds measured without the caches)
QUERY_ROWS = [
    ("http", "/2/instances?bulk=1", True, True, SLOW_DURATION),
    ("http", "/2/nodes?bulk=1", True, True, DURATION),
    ("luxi", "instance", False, True, DURATION),
    ("luxi", "node", False, True, DURATION),
]


def bench():
    base = tempfile.mkdtemp(prefix="rapib-", dir="/tmp")
    vc = None
    try:
        t0 = time.monotonic()
        vc = build_cluster(base)
        # the query path without caches first
        daemons = start_daemons(vc, ["--no-query-cache"],
                                ["--no-answer-cache"])
        job = finished_job(vc)
        setup = time.monotonic() - t0
        ip = vc.master.ip
        sock = vc.master.paths.master_socket
        results = []

        def measure(cache, kind, path, use_tls=True, distinct=False,
                    duration=DURATION):
            procs = (daemons["masterd"],
                     daemons["rapi" if use_tls else "rapi-plain"])
            before = [_cpu_seconds(p) for p in procs]
            if kind == "luxi":
                r = _luxi(sock, path)
            else:
                r = _http(ip, TLS_PORT if use_tls else PLAIN_PORT, use_tls,
                          path, distinct, duration)
            after = [_cpu_seconds(p) for p in procs]
            total = r["requests"]
            r["cache"] = cache
            r["seconds"] = duration
            r["cpu"] = [(a - b) / total * 1000.0 if total else None
                        for a, b in zip(after, before)]
            if kind == "luxi":
                r["cpu"][1] = None
            results.append(r)

        for kind, path, use_tls, distinct, seconds in QUERY_ROWS:
            measure(False, kind, path, use_tls, distinct, seconds)
        restart_queries(vc, daemons)
        for path in ("/2/instances?bulk=1", "/2/nodes?bulk=1",
                     "/2/jobs/%d" % job, "/version"):
            for use_tls in (True, False):
                measure(True, "http", path, use_tls)
            if path != "/version":
                measure(True, "http", path, True, True)
        for what in ("instance", "node"):
            measure(True, "luxi", what)
    finally:
        if vc is not None:
            vc.stop_all()
        shutil.rmtree(base, ignore_errors=True)
    print("%d instances on one node (fake hypervisor); setup %.1f s"
          % (N_INSTANCES, setup))
    print("load generator: a separate process, %d concurrent clients, a new"
          " HTTP connection per request (the server closes each, as"
          " Ganeti's), one luxi connection per client, %.0f s per row (or as"
          " marked) after %.0f s warm-up" % (CLIENTS, DURATION, WARMUP))
    print("\"unshared\": every client sends its own URL (luxi: its own field"
          " list), so concurrent requests never share one answer")
    print("query cache \"off\": masterd --no-query-cache and ganeti-rapi"
          " --no-answer-cache (every query computed and rendered from"
          " scratch, live data asked from the node daemon each time, as"
          " before the caches); \"on\": the defaults (live data reused for"
          " up to 2 s)")
    print("CPU ms/req: CPU time of masterd and of the ganeti-rapi that"
          " served the row (HTTPS or plain), per answered request")
    print()

    def label(r):
        if "/jobs/" in r["path"]:
            return r["path"].replace("/%d" % job, "/ID")
        return r["path"]

    def ms(value):
        return "%.1f" % (value * 1000) if value is not None else "-"

    def cpu(value):
        return "%.1f" % value if value is not None else "-"

    rows = []
    for r in results:
        scheme = "luxi" if r["path"].startswith("luxi") else (
            ("https" if r["tls"] else "http")
            + (", unshared" if r["distinct"] else ""))
        rows.append((label(r), scheme, "on" if r["cache"] else "off",
                     "%.1f" % r["rps"] + (" (%.0f s)" % r["seconds"]
                                          if r["seconds"] != DURATION
                                          else ""),
                     ms(r["p50"]), ms(r["p99"]),
                     "%d" % r["bytes"], r["failures"], cpu(r["cpu"][0]),
                     cpu(r["cpu"][1])))
    _table(("request", "scheme", "query cache", "requests/s", "p50 ms",
            "p99 ms", "body bytes/rows", "failed", "masterd CPU ms/req",
            "rapi CPU ms/req"), rows)
    print()
    for r in results:
        if r["cache"]:
            continue
        on = [o for o in results if o["cache"] and o["path"] == r["path"]
              and o["tls"] == r["tls"] and o["distinct"] == r["distinct"]]
        if on and not r["rps"]:
            print("%s: no request without the caches ended within %.0f s"
                  % (label(r), r["seconds"]))
        elif on:
            print("%s (%s): %.1f requests/s with the query cache, %.1f"
                  " without: %.1fx" % (label(r), "luxi" if r["path"]
                                       .startswith("luxi") else "https,"
                                       " unshared", on[0]["rps"], r["rps"],
                                       on[0]["rps"] / r["rps"]))
    for r in results:
        if r["failures"]:
            print("failures of %s: %s" % (r["path"], r["failure_sample"]))


def run(reactor):
    from twisted.internet import threads
    return threads.deferToThread(bench)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--loadgen"]:
        host, port, use_tls, path, distinct, seconds = sys.argv[2:8]
        json.dump(loadgen(host, int(port), use_tls == "1", path,
                          distinct=distinct == "1",
                          duration=float(seconds)), sys.stdout)
    elif sys.argv[1:2] == ["--luxi-loadgen"]:
        socket_path, what = sys.argv[2:4]
        json.dump(luxi_loadgen(socket_path, what), sys.stdout)
    else:
        bench()
