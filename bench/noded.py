"""Node daemon benchmark: does a ping wait for the disk?

A real ganeti-noded (``python -m twisted ganeti-noded``, its own process, on
a random 127.x.y.z address with a temporary root and an EC cluster
certificate) answers ``version`` calls sent one after the other by this
process (RpcClient, mutual TLS, persistent connections) for DURATION
seconds per scenario:

* idle                      -- the baseline (1.00x);
* 1 call blocked            -- os_validate of an OS definition whose API
                               version file is a FIFO nobody writes (an open
                               FIFO without data blocks its reader like a
                               hung disk);
* pool full                 -- as many blocked calls as the pool has
                               threads, plus one queued;
* 32 MiB uploads            -- a separate process keeps UPLOADERS
                               upload_file calls of 32 MiB bodies going
                               (config.data, base64): receiving, parsing,
                               decoding and writing them (atomic_write:
                               fsync) happens meanwhile.

The daemon runs twice: with its thread pool (``--blocking-threads``
POOL_SIZE) and with ``--blocking-threads 0`` (the file work on the reactor,
as before the pool existed).  p50/p99 ping latency is compared with the
idle baseline of the pool run; a ping the daemon does not answer within
PING_TIMEOUT counts as unanswered.
"""

import json
import os
import random
import shutil
import sys
import tempfile
import time

from twisted.internet import defer, task, utils

from bench.stats import percentile
from bench.table import table
from ganeti.dev.stall import StalledFile, opened_by

POOL_SIZE = 8
DURATION = 3.0          # seconds of pings per scenario
PING_TIMEOUT = 2.0
UPLOAD_MIB = 32         # request body size
UPLOADERS = 2           # concurrent uploads
WARMUP = 1.0            # seconds of uploads before pinging
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROTOCOL_VERSION = 3000000


# --- the daemon ---------------------------------------------------------------

class Daemon(object):
    """A ganeti-noded process with ``threads`` pool threads."""

    def __init__(self, base, threads, stalled):
        from ganeti import crypto
        from ganeti.dev.vcluster import VirtualCluster
        self.threads = threads
        self.vc = VirtualCluster(os.path.join(base, "threads%d" % threads),
                                 node_count=1)
        self.node = self.vc.nodes[0]
        self.node.ip = "127.%d.%d.%d" % (random.randint(1, 254),
                                         random.randint(1, 254),
                                         random.randint(2, 254))
        self.node.paths.ensure_dirs()
        self.cert_path = crypto.server_pem_path(self.node.paths)
        self.cert = crypto.generate_cluster_certificate(
            self.cert_path, self.vc.cluster_name, key_type="ec")
        self.os_dir = os.path.join(self.vc.base, "os")
        etc_os = os.path.join(REPO, "etc", "os", "busybox")
        self.fifos = []
        for i in range(stalled):
            path = os.path.join(self.os_dir, "stalled%d" % i)
            shutil.copytree(etc_os, path)
            os.unlink(os.path.join(path, "ganeti_api_version"))
            self.fifos.append(
                StalledFile(os.path.join(path, "ganeti_api_version"),
                            hold=False))
        self.proc = None
        self.client = None
        self.port = None

    async def start(self, reactor):
        from ganeti import constants, rpc
        self.port = constants.DEFAULT_NODED_PORT
        self.proc = self.vc.start("noded", self.vc.twistd_command(
            "ganeti-noded", self.node, "--port", str(self.port),
            "--os-search-path", self.os_dir,
            "--blocking-threads", str(self.threads)))
        self.client = rpc.RpcClient(
            reactor, None,
            lambda n: rpc.NodeAddress(self.node.ip, self.port),
            cert=self.cert)
        for _ in range(600):
            if self.proc.poll() is not None:
                raise RuntimeError("ganeti-noded exited; see %s"
                                   % self.vc.base)
            result = await self.client.call("n", "version", timeout=5)
            if result.success:
                return
            await task.deferLater(reactor, 0.05, lambda: None)
        raise RuntimeError("ganeti-noded does not answer: %s"
                           % result.fail_msg)

    async def stop(self):
        for fifo in self.fifos:
            fifo.release()
        self.vc.stop_all()
        if self.client is not None:
            await self.client.close()

    async def wait_opened(self, reactor, fifo, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not opened_by(self.proc.pid, fifo.path):
            if time.monotonic() > deadline:
                raise RuntimeError("ganeti-noded never opened %s"
                                   % fifo.path)
            await task.deferLater(reactor, 0.01, lambda: None)

    async def block(self, reactor, count):
        """``count`` os_validate calls waiting on FIFOs; their Deferreds."""
        calls = []
        for fifo in self.fifos[:count]:
            fifo.hold()
        for i, fifo in enumerate(self.fifos[:count]):
            calls.append(self.client.call(
                "n", "os_validate", [True, "stalled%d" % i], timeout=600))
            if i < max(1, self.threads):
                await self.wait_opened(reactor, fifo)
        return calls

    async def release(self, reactor, calls):
        """Unblock the calls one by one (queued ones open their FIFO once
        they get a thread); they must succeed."""
        for fifo in self.fifos[:len(calls)]:
            await self.wait_opened(reactor, fifo, timeout=60.0)
            fifo.release(b"20\n")
        for result in await defer.gatherResults(calls):
            if not result.success:
                raise RuntimeError("blocked call failed: %s"
                                   % result.fail_msg)

    async def pings(self, reactor, duration):
        """Latencies (s) of answered pings, and the unanswered count."""
        latencies, unanswered = [], 0
        end = time.monotonic() + duration
        while time.monotonic() < end:
            t0 = time.monotonic()
            result = await self.client.call("n", "version",
                                            timeout=PING_TIMEOUT)
            if result.success and result.payload == PROTOCOL_VERSION:
                latencies.append(time.monotonic() - t0)
            else:
                unanswered += 1
        return latencies, unanswered


# --- the uploader (its own process) -------------------------------------------

def uploader(host, port, cert_path, duration, clients=UPLOADERS,
             mib=UPLOAD_MIB):
    """``clients`` threads POSTing upload_file bodies of ``mib`` MiB for
    ``duration`` seconds; counts."""
    import base64
    import http.client
    import ssl
    import threading
    raw = os.urandom(mib * 1024 * 1024 * 3 // 4)
    body = json.dumps(["/var/lib/ganeti/config.data",
                       ["base64", base64.b64encode(raw).decode()],
                       0o600]).encode()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(cert_path)
    end = time.monotonic() + duration
    done, failed = [], []

    def client():
        conn = None
        while time.monotonic() < end:
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection(host, port,
                                                       context=ctx,
                                                       timeout=120)
                conn.request("POST", "/upload_file", body,
                             {"Content-Type": "application/json"})
                resp = conn.getresponse()
                reply = resp.read()
                if resp.status == 200:
                    done.append(1)
                else:
                    failed.append(reply[:200].decode("utf-8", "replace"))
            except (OSError, http.client.HTTPException) as err:
                failed.append(str(err))
                conn = None
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"uploads": len(done), "failures": len(failed),
            "failure_sample": failed[:3], "body_bytes": len(body)}


async def _uploads(daemon, duration):
    env = dict(os.environ, PYTHONPATH=REPO)
    out, err, code = await utils.getProcessOutputAndValue(
        sys.executable, ["-m", "bench.noded", "--upload", daemon.node.ip,
                         str(daemon.port), daemon.cert_path, str(duration)],
        env=env, path=REPO)
    if code != 0:
        raise RuntimeError("uploader failed:\n%s"
                           % err.decode("utf-8", "replace"))
    return json.loads(out.decode("utf-8"))


# --- the scenarios ------------------------------------------------------------

async def _scenarios(reactor, daemon):
    """[(scenario, latencies, unanswered, note)]"""
    rows = []
    rows.append(("idle",) + await daemon.pings(reactor, DURATION) + ("",))
    calls = await daemon.block(reactor, 1)
    rows.append(("1 call blocked",) +
                await daemon.pings(reactor, DURATION) + ("",))
    await daemon.release(reactor, calls)
    if daemon.threads:
        calls = await daemon.block(reactor, daemon.threads + 1)
        rows.append(("pool full: %d blocked + 1 queued" % daemon.threads,) +
                     await daemon.pings(reactor, DURATION) + ("",))
        await daemon.release(reactor, calls)
    uploads = defer.Deferred.fromCoroutine(
        _uploads(daemon, WARMUP + DURATION))
    await task.deferLater(reactor, WARMUP, lambda: None)
    latencies, unanswered = await daemon.pings(reactor, DURATION)
    up = await uploads
    note = "%.1f uploads/s" % (up["uploads"] / (WARMUP + DURATION))
    if up["failures"]:
        note += ", %d failed: %s" % (up["failures"], up["failure_sample"])
    rows.append(("%d x %d MiB uploads" % (UPLOADERS, UPLOAD_MIB), latencies,
                 unanswered, note))
    return rows


def _ms(seconds):
    return "%.1f" % (seconds * 1000) if seconds == seconds else "-"


def _ratio(value, base):
    if value != value or not base:
        return "-"
    return "%.2fx" % (value / base)


async def _bench(reactor):
    base = tempfile.mkdtemp(prefix="nodedb-", dir="/tmp")
    results = []
    try:
        for threads in (POOL_SIZE, 0):
            daemon = Daemon(base, threads, stalled=POOL_SIZE + 1)
            try:
                await daemon.start(reactor)
                for row in await _scenarios(reactor, daemon):
                    results.append((threads,) + row)
            finally:
                await daemon.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    base_p50 = percentile(results[0][2], 50)
    base_p99 = percentile(results[0][2], 99)
    print("ganeti-noded on 127.x, `version` pings one after the other for"
          " %.0f s per row (unanswered: no reply within %.0f s);"
          " ratios against the idle row of the pool run" % (DURATION,
                                                            PING_TIMEOUT))
    print()
    rows = []
    for threads, scenario, latencies, unanswered, note in results:
        p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
        rows.append(("%d" % threads if threads else "0 (inline)", scenario,
                     "%d/%d" % (len(latencies), len(latencies) + unanswered),
                     _ms(p50), _ms(p99), _ratio(p50, base_p50),
                     _ratio(p99, base_p99), note))
    table(("threads", "scenario", "answered", "p50 ms", "p99 ms", "p50 x",
           "p99 x", "note"), rows)


def run(reactor):
    return defer.Deferred.fromCoroutine(_bench(reactor))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--upload"]:
        host, port, cert_path, duration = sys.argv[2:6]
        json.dump(uploader(host, int(port), cert_path, float(duration)),
                  sys.stdout)
    else:
        from twisted.internet import task as _task
        _task.react(lambda reactor: run(reactor))
