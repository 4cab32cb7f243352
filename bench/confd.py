"""confd benchmark: our daemon and Ganeti 3.0's, side by side.

A config.data of 100 nodes and 2,000 instances (one NIC with an IP and one
DRBD disk each) is generated.  Our ganeti-confd runs on it as its own process
on 127.0.0.1 with its default options (the default per-source rate limit
included), except a poll interval of 0.25 s so that it sees every rewrite of
the reload scenario, as Ganeti's inotify does.  When Debian's
``ganeti-haskell-3.0`` is installed, Ganeti's own (Haskell) ganeti-confd runs
beside it on a copy of the same configuration (with the few cluster fields
Ganeti's parser insists on added and our extra fields removed) and the same
key.

A load generator, a third process, sends pre-signed requests over UDP with
plain blocking sockets, one in flight and 32 in flight, for

* ping                      (the baseline: the whole pipeline, trivial answer)
* node-role-by-name         (index lookup by name)
* node-PIP-by-instance-IP   (instance IP -> primary node index)
* instance-IPs-list         (2,000 IPs, ~30 KB reply, memoised per version)

taking turns between the two daemons round by round, so that both see the
same machine; each row is the best round of each.  ``x Ganeti`` is our
queries/s over Ganeti's.

Then ping again in 1 s segments, alternately while config.data is rewritten
every 0.25 s (a reload of a 2 MB config each time) and while it is not, so
that both kinds see the same moment's load on the machine: p99, p99.9 and
max latency during reloads next to the same without.  The goal is that no
answer waits more than 10 ms for a reload.
"""

import copy
import hashlib
import hmac
import json
import os
import random
import re
import shutil
import signal
import socket
import sys
import tempfile
import time

from bench.stats import percentile
from bench.table import table

SEED = 20261121
N_NODES = 100
N_INSTANCES = 2000
DURATION = 2.0   # seconds per scenario and daemon, split into ROUNDS rounds
WARMUP = 0.2
WINDOWS = (1, 32)
ROUNDS = 3
MAX_RATE = 60000  # requests signed per second of a round (more than either
#                   daemon answers here; a faster one ends its round early)
RELOAD_SEGMENTS = 3    # per window: 1 s with rewrites, then 1 s without,
RELOAD_SEGMENT = 1.0   # three times (the same moment's noise for both)
RELOAD_SETTLE = 0.5    # after the last rewrite, before measuring "without"
RELOAD_EVERY = 0.25
POLL_INTERVAL = 0.25
SCENARIOS = ("ping", "node-role-by-name", "node-PIP-by-instance-IP",
             "instance-IPs-list")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GANETI_CONFD = "/usr/lib/ganeti/3.0/usr/sbin/ganeti-confd"
GANETI_HOSTNAME = "node000.example.com"
OURS, GANETI = "ours", "Ganeti"


# --- the configuration ------------------------------------------------------

def _node_name(i):
    return "node%03d.example.com" % i


def _instance_ip(i):
    return "10.0.%d.%d" % (i // 250, i % 250 + 1)


def generate_cluster(root):
    """Write hmac.key and a 100-node, 2,000-instance config.data under root.

    Objects are put into the store directly and written once: going through
    the store's mutators would verify and rewrite the file 2,100 times.
    """
    from ganeti import config, objects, pathutils
    from ganeti.utils import io

    rng = random.Random(SEED)
    paths = pathutils.Paths(root)
    paths.ensure_dirs()
    with open(paths.hmac_key_file, "wb") as f:
        f.write(("%040x\n" % rng.getrandbits(160)).encode("ascii"))
    store = config.ConfigStore.create(
        None, "bench.example.com", _node_name(0), "192.0.2.0",
        enabled_disk_templates=("drbd", "plain"))
    group = next(iter(store.nodegroups))
    nodes = [store.master_node]
    for i in range(1, N_NODES):
        node = objects.Node(name=_node_name(i), uuid=objects.new_uuid(),
                            primary_ip="192.0.%d.%d" % (2 + i // 250, i % 250),
                            secondary_ip="198.51.%d.%d" % (i // 250, i % 250),
                            group=group, master_candidate=i < 10)
        store.nodes[node.uuid] = node
        nodes.append(node)
    minors = [0] * N_NODES
    for i in range(N_INSTANCES):
        p, s = i % N_NODES, (i * 7 + 1) % N_NODES
        if s == p:
            s = (s + 1) % N_NODES
        disk = objects.Disk(
            uuid=objects.new_uuid(), dev_type="drbd", size=10240, mode="rw",
            nodes=[nodes[p].uuid, nodes[s].uuid], iv_name="disk/0",
            logical_id=[nodes[p].uuid, nodes[s].uuid, 11000 + i, minors[p],
                        minors[s], "secret%d" % i])
        minors[p] += 1
        minors[s] += 1
        inst = objects.Instance(
            uuid=objects.new_uuid(), name="inst%04d.example.com" % i,
            primary_node=nodes[p].uuid, secondary_nodes=[nodes[s].uuid],
            os="debootstrap", hypervisor="fake", disks=[disk.uuid],
            nics=[objects.NIC(uuid=objects.new_uuid(), ip=_instance_ip(i),
                              mac="aa:00:00:%02x:%02x:%02x" % (
                                  i // 65536, (i // 256) % 256, i % 256))])
        store.disks[disk.uuid] = disk
        store.instances[inst.uuid] = inst
    store.cluster.serial_no = 42
    io.atomic_write(paths.config_file, store.dumps())
    return paths


def ganeti_config(data):
    """config.data as Ganeti 3.0's Haskell parser accepts it.

    Its parser requires some cluster fields we leave out when unset and
    refuses fields it does not know (found by running it on our file).
    """
    data = copy.deepcopy(data)
    cluster = data["cluster"]
    for key, value in (("rsahostkeypub", ""), ("master_netdev", "lo"),
                       ("master_netmask", 32),
                       ("file_storage_dir", "/srv/ganeti/file-storage"),
                       ("shared_file_storage_dir",
                        "/srv/ganeti/shared-file-storage"),
                       ("gluster_storage_dir", "/var/run/ganeti/gluster")):
        cluster.setdefault(key, value)
    cluster.pop("default_hypervisor", None)
    for key in ("repair_max_parallel", "repair_min_healthy"):
        cluster.get("ndparams", {}).pop(key, None)
    for node in data["nodes"].values():
        node.pop("disk_state", None)
        node.pop("hv_state", None)
    for inst in data["instances"].values():
        inst.pop("secondary_nodes", None)
    return data


def write_ganeti_root(paths, root):
    """A root for Ganeti's confd: the same key, config.data as it parses."""
    from ganeti import pathutils
    from ganeti.utils import io
    gpaths = pathutils.Paths(root)
    gpaths.ensure_dirs()
    shutil.copyfile(paths.hmac_key_file, gpaths.hmac_key_file)
    with open(paths.config_file) as f:
        data = json.load(f)
    io.atomic_write(gpaths.config_file,
                    json.dumps(ganeti_config(data)).encode("utf-8"))
    return gpaths


def measure_load(paths):
    """Seconds of CPU to load config.data and build confd's indexes."""
    from ganeti.confd.reloader import build_snapshot
    best = None
    for _ in range(3):
        start = time.perf_counter()
        build_snapshot(paths.config_file)
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
    return best


# --- the load generator (runs in its own process) ---------------------------

_SALT = re.compile(rb'"salt": ?"([^"]*)"')


class _Signer(object):
    """Signs request messages fast: the salt (a timestamp) is fixed, so the
    HMAC state after it is computed once and copied."""

    def __init__(self, key, stamp):
        from ganeti.confd import wire
        self._magic = wire.MAGIC
        self._mac = hmac.new(key, str(stamp).encode("ascii"), hashlib.sha1)
        self._salt = (', "salt": "%d", "hmac": "' % stamp).encode("ascii")

    def pack(self, msg):
        mac = self._mac.copy()
        mac.update(msg.encode("utf-8"))
        return b"".join([self._magic, b'{"msg": ',
                         json.dumps(msg).encode("utf-8"), self._salt,
                         mac.hexdigest().encode("ascii"), b'"}'])


class _Requests(object):
    """Signed request datagrams of one scenario, each with its own rsalt
    (the daemon answers a given signed datagram only once), stamped with the
    time they are made, as a client stamps them: a daemon remembers what it
    answered per timestamp, up to its replay cache's size."""

    def __init__(self, name, key):
        self.name = name
        self.key = key
        self.rng = random.Random(SEED)
        self.templates = {}
        self.n = 0

    def _template(self, req_type, query):
        from ganeti.confd import wire
        tkey = (req_type, json.dumps(query))
        found = self.templates.get(tkey)
        if found is None:
            text = wire.encode_request(req_type, "\0", query)
            found = self.templates[tkey] = text.split('"\\u0000"')
        return found

    def _next_query(self):
        from ganeti.confd import wire
        if self.name == "ping":
            return wire.REQ_PING, None
        if self.name == "node-role-by-name":
            return (wire.REQ_NODE_ROLE_BYNAME,
                    _node_name(self.rng.randrange(N_NODES)))
        if self.name == "node-PIP-by-instance-IP":
            return (wire.REQ_NODE_PIP_BY_INSTANCE_IP,
                    {wire.REQQ_IP: _instance_ip(
                        self.rng.randrange(N_INSTANCES))})
        return wire.REQ_INSTANCES_IPS_LIST, None

    def make(self, count, tag):
        signer = _Signer(self.key, int(time.time()))
        result = []
        for _ in range(count):
            self.n += 1
            rsalt = "%s-%s-%d" % (self.name, tag, self.n)
            before, after = self._template(*self._next_query())
            msg = '%s"%s"%s' % (before, rsalt, after)
            result.append((rsalt.encode("ascii"), signer.pack(msg)))
        return result


def _socket():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for option in ("SO_RCVBUFFORCE", "SO_RCVBUF"):  # 32 x 30 KB replies
        try:
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, option),
                            8 * 1024 * 1024)
            break
        except (AttributeError, OSError):
            continue
    sock.bind(("127.0.0.1", 0))
    return sock


def _check_reply(key, data, rsalt):
    from ganeti.confd import wire
    env = wire.unpack(data, key)
    reply = wire.decode_reply(env.msg)
    if env.salt != rsalt.decode() or reply.status != wire.STATUS_OK:
        raise AssertionError("bad reply to %s: %r" % (rsalt, reply))


def _run_window(sock, address, requests, window, duration, key):
    """Send with ``window`` requests in flight for ``duration`` seconds."""
    latencies = []
    lost = 0
    sent = {}
    it = iter(requests)
    checked = False
    sock.settimeout(0.5)
    start = time.perf_counter()
    deadline = start + duration
    for _ in range(window):
        rsalt, data = next(it)
        sent[rsalt] = time.perf_counter()
        sock.sendto(data, address)
    while True:
        try:
            reply = sock.recv(65536)
        except socket.timeout:
            now = time.perf_counter()
            stale = [r for r, t in sent.items() if now - t > 0.5]
            lost += len(stale)
            for r in stale:
                del sent[r]
            reply = None
        now = time.perf_counter()
        if reply is not None:
            # the salt is near the end: last but one in our replies, last in
            # Ganeti's
            match = _SALT.search(reply, max(0, len(reply) - 120))
            rsalt = match.group(1) if match else None
            t0 = sent.pop(rsalt, None)
            if t0 is None:
                continue
            latencies.append(now - t0)
            if not checked:  # verify one reply fully; the rest by salt
                _check_reply(key, reply, rsalt)
                checked = True
        if now >= deadline:
            break
        while len(sent) < window:
            try:
                rsalt, data = next(it)
            except StopIteration:
                break
            sent[rsalt] = time.perf_counter()
            sock.sendto(data, address)
        if not sent:
            break
    elapsed = time.perf_counter() - start
    return latencies, elapsed, lost


def loadgen(root, targets, duration=DURATION, scenarios=SCENARIOS,
            windows=WINDOWS, rounds=ROUNDS):
    """Run the scenarios against each (label, port) of ``targets`` on
    127.0.0.1, taking turns round by round; a list of result dicts.

    Writes "measuring" to stderr when measuring starts.
    """
    from ganeti import pathutils
    from ganeti.confd import wire
    key = wire.read_hmac_key(pathutils.Paths(root).hmac_key_file)
    sock = _socket()
    results = []
    per_round = duration / rounds
    for window in windows:
        for name in scenarios:
            gens = {label: _Requests(name, key) for label, _ in targets}
            for label, port in targets:
                _run_window(sock, ("127.0.0.1", port),
                            gens[label].make(int(WARMUP * MAX_RATE), "warm"),
                            window, WARMUP, key)
            sys.stderr.write("measuring\n")
            sys.stderr.flush()
            best = {}
            for r in range(rounds):
                # alternate who goes first: neither always follows the other
                order = targets if r % 2 == 0 else targets[::-1]
                for label, port in order:
                    requests = gens[label].make(
                        int(per_round * MAX_RATE) + window, "w%d" % window)
                    run = _run_window(sock, ("127.0.0.1", port), requests,
                                      window, per_round, key)
                    old = best.get(label)
                    if old is None or len(run[0]) / run[1] > \
                            len(old[0]) / old[1]:
                        best[label] = run
            for label, _ in targets:
                latencies, elapsed, lost = best[label]
                results.append({
                    "daemon": label, "query": name, "window": window,
                    "qps": len(latencies) / elapsed,
                    "p50": percentile(latencies, 50) * 1000,
                    "p99": percentile(latencies, 99) * 1000,
                    "max": (max(latencies) * 1000 if latencies
                            else float("nan")),
                    "lost": lost, "count": len(latencies)})
    return results


def loadgen_reloads(root, label, port, windows=WINDOWS):
    """Ping ``port`` in segments, alternately while config.data is being
    rewritten ("measuring reloads" on stderr) and not ("measuring quiet");
    a list of result dicts, one per window and kind."""
    from ganeti import pathutils
    from ganeti.confd import wire
    key = wire.read_hmac_key(pathutils.Paths(root).hmac_key_file)
    sock = _socket()
    address = ("127.0.0.1", port)
    gen = _Requests("ping", key)
    results = []
    for window in windows:
        _run_window(sock, address, gen.make(int(WARMUP * MAX_RATE), "warm"),
                    window, WARMUP, key)
        runs = {"reloads": [], "quiet": []}
        for _ in range(RELOAD_SEGMENTS):
            for kind in ("reloads", "quiet"):
                sys.stderr.write("measuring %s\n" % kind)
                sys.stderr.flush()
                if kind == "quiet":
                    time.sleep(RELOAD_SETTLE)  # the last build ends
                runs[kind].append(_run_window(
                    sock, address, gen.make(int(RELOAD_SEGMENT * MAX_RATE)
                                            + window, "r%d" % window),
                    window, RELOAD_SEGMENT, key))
        for kind, segments in runs.items():
            latencies = [x for run in segments for x in run[0]]
            elapsed = sum(run[1] for run in segments)
            results.append({
                "daemon": label, "kind": kind, "window": window,
                "qps": len(latencies) / elapsed,
                "p50": percentile(latencies, 50) * 1000,
                "p99": percentile(latencies, 99) * 1000,
                "p999": percentile(latencies, 99.9) * 1000,
                "max": (max(latencies) * 1000 if latencies
                        else float("nan")),
                "lost": sum(run[2] for run in segments),
                "count": len(latencies)})
    return results


def _rewriter(path):
    """A function writing config.data again with bumped serials."""
    from ganeti.utils import io
    with open(path) as f:
        data = json.load(f)

    def rewrite():
        data["serial_no"] += 1
        data["cluster"]["serial_no"] += 1
        io.atomic_write(path, json.dumps(data).encode("utf-8"))
        return data["cluster"]["serial_no"]
    return rewrite


# --- orchestration (inside the bench reactor) --------------------------------

def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _count_lines(path, text):
    try:
        with open(path, errors="replace") as f:
            return sum(1 for line in f if text in line)
    except OSError:
        return 0


def _last_stats(log_file):
    """The counters of the last ``confd stats:`` line of our daemon's log."""
    stats = {}
    try:
        with open(log_file, errors="replace") as f:
            for line in f:
                if "confd stats:" in line:
                    stats = dict(item.split("=", 1) for item in line.split(
                        "confd stats:", 1)[1].split() if "=" in item)
    except OSError:
        pass
    return stats


class _Daemon(object):
    """One confd process: how to start it and what tells it reloaded."""

    def __init__(self, label, argv, env, config_file, log_file, reload_text):
        self.label = label
        self.argv = argv
        self.env = env
        self.config_file = config_file
        self.log_file = log_file
        self.reload_text = reload_text
        self.port = None
        self.process = None
        self.ended = None
        self.error = None

    def reloads(self):
        return _count_lines(self.log_file, self.reload_text)


async def _start(reactor, daemon, key):
    """Start ``daemon``; True once it answers a ping with status OK."""
    from twisted.internet import defer, protocol
    from ganeti.confd import client as confd_client, wire
    daemon.ended = ended = defer.Deferred()

    class Proto(protocol.ProcessProtocol):
        def processEnded(self, reason):
            ended.callback(None)

    daemon.process = reactor.spawnProcess(
        Proto(), daemon.argv[0], daemon.argv, env=daemon.env, path=REPO)
    client = confd_client.ConfdClient(key, ["127.0.0.1"], port=daemon.port,
                                      timeout=0.3, reactor=reactor)
    try:
        for _ in range(100):
            if ended.called:
                daemon.error = "exited; see %s" % daemon.log_file
                return False
            try:
                result = await client.request(wire.REQ_PING)
            except confd_client.ConfdTimeoutError:
                continue
            if result.ok:
                return True
            daemon.error = "answers %r" % (result.answer,)
            return False
        daemon.error = "did not answer; see %s" % daemon.log_file
        return False
    finally:
        await client.close()


async def _stop(daemon):
    from twisted.internet import error
    if daemon.process is not None and daemon.process.pid is not None:
        try:
            daemon.process.signalProcess("TERM")
        except error.ProcessExitedAlready:
            pass
        await daemon.ended


async def _bench(reactor):
    from twisted.internet import task
    from ganeti.confd import client as confd_client, wire
    from ganeti.server import confd as confd_service

    tmp = tempfile.mkdtemp(prefix="bench-confd-")
    daemons = []
    try:
        t0 = time.perf_counter()
        paths = generate_cluster(os.path.join(tmp, "node000.example.com"))
        generated = time.perf_counter() - t0
        load = measure_load(paths)
        size = os.path.getsize(paths.config_file)
        key = wire.read_hmac_key(paths.hmac_key_file)

        ours = _Daemon(OURS, None, _env(), paths.config_file,
                       os.path.join(tmp, "confd.log"),
                       "loaded configuration")
        ours.port = _free_port()
        ours.argv = [
            sys.executable, "-m", "twisted", "--log-format", "text",
            "--log-file", ours.log_file, "ganeti-confd", "--root", paths.root,
            "--bind", "127.0.0.1", "--port", str(ours.port),
            "--poll-interval", str(POLL_INTERVAL), "--stats-interval", "0"]
        daemons.append(ours)
        if not await _start(reactor, ours, key):
            raise RuntimeError("ganeti-confd %s" % ours.error)

        ganeti = None
        if os.path.exists(GANETI_CONFD):
            groot = os.path.join(tmp, "ganeti")
            gpaths = write_ganeti_root(paths, groot)
            ganeti = _Daemon(GANETI, None, {
                "PATH": "/usr/bin:/bin", "GANETI_ROOTDIR": groot,
                "GANETI_HOSTNAME": GANETI_HOSTNAME},
                gpaths.config_file,
                os.path.join(gpaths.log_dir, "conf-daemon.log"),
                "Loaded new config")
            ganeti.port = _free_port()
            ganeti.argv = [GANETI_CONFD, "-f", "--no-user-checks",
                           "-b", "127.0.0.1", "-p", str(ganeti.port)]
            daemons.append(ganeti)
            if not await _start(reactor, ganeti, key):
                skipped = "Ganeti's ganeti-confd %s" % ganeti.error
                ganeti = None
        else:
            skipped = ("Ganeti's ganeti-confd is not installed (%s;"
                       " apt-get install ganeti-haskell-3.0)" % GANETI_CONFD)
        live = [d for d in (ours, ganeti) if d is not None]
        targets = [[d.label, d.port] for d in live]

        results = await _loadgen(reactor, {
            "root": paths.root, "targets": targets})

        # Ping again, in segments while config.data is rewritten every
        # RELOAD_EVERY seconds and segments while it is not, one daemon at a
        # time (each rewrite only its file).
        reload_results = {}
        rewrites = {}
        for daemon in live:
            rewrite = _rewriter(daemon.config_file)
            written = []
            loop = task.LoopingCall(lambda: written.append(rewrite()))
            loop.clock = reactor

            def measuring(kind, loop=loop):
                if kind == "reloads" and not loop.running:
                    loop.start(RELOAD_EVERY, now=True)
                elif kind == "quiet" and loop.running:
                    loop.stop()
            before = daemon.reloads()
            try:
                reload_results[daemon.label] = await _loadgen(reactor, {
                    "root": paths.root, "label": daemon.label,
                    "port": daemon.port}, measuring, mode="--loadgen-reloads")
            finally:
                if loop.running:
                    loop.stop()
            await task.deferLater(reactor, 2 * POLL_INTERVAL, lambda: None)
            rewrites[daemon.label] = (len(written),
                                      daemon.reloads() - before,
                                      written[-1] if written else None)

        client = confd_client.ConfdClient(key, ["127.0.0.1"], port=ours.port,
                                          timeout=2, reactor=reactor)
        try:
            served = (await client.request(wire.REQ_CONFIG_QUERY,
                                           "/cluster/serial_no")).answer
        finally:
            await client.close()
        ours.process.signalProcess(signal.SIGUSR1)
        await task.deferLater(reactor, 0.5, lambda: None)
        stats = _last_stats(ours.log_file)
    finally:
        for daemon in daemons:
            await _stop(daemon)
        shutil.rmtree(tmp, ignore_errors=True)

    defaults = confd_service.Options()
    print("config: %d nodes, %d instances, config.data %d KiB (generated in"
          " %.1f s); load + index build (a reload's CPU): %.0f ms"
          % (N_NODES, N_INSTANCES, size // 1024, generated, load * 1000))
    print("daemons and load generator are separate processes on 127.0.0.1;"
          " each row is the best of %d rounds of %.2f s per daemon, the"
          " daemons taking turns" % (ROUNDS, DURATION / ROUNDS))
    if ganeti is None:
        print("no comparison: %s" % skipped)
    dropped = ", ".join("%s %s" % (k[len("dropped_"):], v)
                        for k, v in sorted(stats.items())
                        if k.startswith("dropped_") and v != "0")
    print("ours runs with its default rate limit (%g requests/s per source,"
          " bursts of %g); datagrams it dropped: %s (rate_limited %s)"
          % (defaults["rate-limit"], defaults["rate-burst"],
             dropped or "none", stats.get("dropped_rate_limited", "?")))
    print()
    by = {(r["daemon"], r["query"], r["window"]): r for r in results}
    headers = ["query", "in flight", "queries/s", "p50 ms", "p99 ms",
               "max ms", "lost"]
    if ganeti is not None:
        headers += ["Ganeti q/s", "p50 ms", "p99 ms", "max ms", "lost",
                    "x Ganeti"]

    def cells(r):
        return ["%.0f" % r["qps"], "%.3f" % r["p50"], "%.3f" % r["p99"],
                "%.1f" % r["max"], r["lost"]]
    rows = []
    for window in WINDOWS:
        for name in SCENARIOS:
            mine = by[(OURS, name, window)]
            row = [name, window] + cells(mine)
            if ganeti is not None:
                theirs = by[(GANETI, name, window)]
                row += cells(theirs) + ["%.2f" % (mine["qps"]
                                                  / theirs["qps"])]
            rows.append(row)
    table(headers, rows)
    print()
    print("ping in 1 s segments, alternately while config.data is rewritten"
          " every %.2f s and not (from %.1f s after the last rewrite), %d of"
          " each per window; ours polls every %.2f s, Ganeti's uses inotify"
          % (RELOAD_EVERY, RELOAD_SETTLE, RELOAD_SEGMENTS, POLL_INTERVAL))
    rows = []
    for daemon in live:
        count, reloads, last = rewrites[daemon.label]
        got = {(r["kind"], r["window"]): r
               for r in reload_results[daemon.label]}
        for window in WINDOWS:
            for kind in ("reloads", "quiet"):
                r = got[(kind, window)]
                rows.append([daemon.label, window,
                             "rewritten" if kind == "reloads" else "not",
                             "%.0f" % r["qps"], "%.3f" % r["p50"],
                             "%.3f" % r["p99"], "%.1f" % r["p999"],
                             "%.1f" % r["max"], r["lost"]])
    table(["daemon", "in flight", "config.data", "queries/s", "p50 ms",
           "p99 ms", "p99.9 ms", "max ms", "lost"], rows)
    print("rewrites / reloads: %s; ours then serves serial %s, the last"
          " written is %s" % (", ".join(
              "%s %d / %d" % (label, c, n)
              for label, (c, n, _) in sorted(rewrites.items())),
              served, rewrites[OURS][2]))


async def _loadgen(reactor, args, on_measuring=None, mode="--loadgen"):
    """Run the load generator process with ``args``; its results.
    ``on_measuring(kind)`` is called as it says "measuring KIND"."""
    from twisted.internet import defer, protocol

    class LoadGen(protocol.ProcessProtocol):
        def __init__(self):
            self.out, self.err = [], []
            self.ended = defer.Deferred()

        def outReceived(self, data):
            self.out.append(data)

        def errReceived(self, data):
            self.err.append(data)
            said = [line.split()[-1] for line in data.decode(
                "ascii", "replace").splitlines()
                if line.startswith("measuring")]
            if on_measuring is not None and said:
                on_measuring(said[-1])

        def processEnded(self, reason):
            self.ended.callback(reason.value.exitCode)

    proto = LoadGen()
    reactor.spawnProcess(proto, sys.executable, [
        sys.executable, "-m", "bench.confd", mode, json.dumps(args)],
        env=_env(), path=REPO)
    code = await proto.ended
    if code != 0:
        raise RuntimeError("load generator failed:\n%s" % b"".join(
            proto.err).decode("utf-8", "replace"))
    return json.loads(b"".join(proto.out))


def run(reactor):
    from twisted.internet import defer
    return defer.Deferred.fromCoroutine(_bench(reactor))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--loadgen"]:
        json.dump(loadgen(**json.loads(sys.argv[2])), sys.stdout)
    elif sys.argv[1:2] == ["--loadgen-reloads"]:
        json.dump(loadgen_reloads(**json.loads(sys.argv[2])), sys.stdout)
    else:
        from twisted.internet import task
        task.react(run)
