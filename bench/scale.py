"""Scale benchmark: what grows when a cluster goes from 10 to 100 nodes.

For each size N (SIZES, default 10 and 100) a virtual cluster of N nodes
on consecutive 127.x addresses runs the real daemons: ganeti-noded on
every node, ganeti-masterd on the first, ganeti-confd on the master
candidates (candidate_pool_size CANDIDATES, 10).  The nodes join the way
an admin joins them: every node starts ``ganeti-noded --bootstrap`` (all
at once), then one OP_NODE_ADD per node, pinned to the fingerprint its
daemon logged, all submitted together.  Each node then carries
INSTANCES_PER_NODE instances (fake hypervisor, diskless, stopped; the
cluster's instance policy allows instances without disks and NICs, and
64 vCPUs per CPU):
JOB_INSTANCES of them are created through OP_INSTANCE_CREATE jobs
submitted together (timed: instances per second), the rest are written
into config.data in bulk while the master daemon is stopped (creating
thousands through jobs takes too long for a benchmark), before the jobs,
so the jobs run against the full configuration.

Measured for each size, and the growth factor from the smallest to the
largest size (linear growth is the size ratio, 10):

* seconds until every node daemon is up in bootstrap mode, and until
  every node joined;
* OP_INSTANCE_CREATE jobs per second;
* memory (RSS) of the node daemons (mean and largest) and of the master;
* ``gnt-cluster verify`` (our CLI, a process; median of REPEATS);
* replication: after a change, the time from the job's end (its end
  timestamp) until the last other master candidate's config.data has the
  new serial (the file's modification time); median of REPEATS; for a
  change of the ssconf files (a cluster tag: every node gets them) and
  for one outside them (a node's tag: only the candidates get
  config.data);
* ``gnt-instance list`` (our CLI; live fields: every node is asked);
  median of REPEATS;
* the master daemon's CPU at idle over IDLE_SECONDS (from
  /proc/<pid>/stat; it checks every node every 5 s);
* the baseline: ``gnt-cluster getmaster`` (CLI start-up and one luxi
  query), which should not grow.

Every process started is stopped by PID and the temporary directory
removed, also on failure and Ctrl-C.

``python -m bench scale``; sizes and counts from the environment:
``SCALE_BENCH_SIZES`` (default ``10,100``), ``SCALE_BENCH_INSTANCES``
(per node, default 20), ``SCALE_BENCH_JOB_INSTANCES`` (created through
jobs, default 100, ``all`` for every instance), ``SCALE_BENCH_REPEATS``
(default 3), ``SCALE_BENCH_IDLE`` (seconds, default 10).  Also
``python -m bench.scale [--sizes 10,100] ...`` (see ``--help``).
"""

import argparse
import contextlib
import copy
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from twisted.internet import defer

from bench.table import table

SIZES = (10, 100)
INSTANCES_PER_NODE = 20
#: instances created through jobs (the rest in bulk); None: all
JOB_INSTANCES = 100
CANDIDATES = 10
REPEATS = 3
IDLE_SECONDS = 10.0
#: seconds between two measured changes
SETTLE_SECONDS = 2.0
#: seconds any one wait may take (a join, a batch of jobs, a command)
TIMEOUT = 1800.0
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINAL = ("success", "error", "canceled")


# --- processes -------------------------------------------------------------

def rss_mib(pid):
    """Resident memory of ``pid`` in MiB (VmRSS)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS for pid %d" % pid)


def cpu_seconds(pid):
    """User plus system CPU seconds ``pid`` used so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after the command: state is field 3, utime 14 and stime 15
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / float(os.sysconf("SC_CLK_TCK"))


def _free_addresses(count):
    """A first address with ``count`` consecutive loopback addresses
    after it on which no node daemon listens."""
    from ganeti import constants
    from ganeti.dev.vcluster import port_open
    for _ in range(20):
        a, b = random.randint(100, 250), random.randint(1, 250)
        first = random.randint(1, 254 - count)
        ips = ["127.%d.%d.%d" % (a, b, first + i) for i in range(count)]
        if not any(port_open(ip, constants.DEFAULT_NODED_PORT)
                   for ip in ips[:3]):
            return ips[0]
    raise RuntimeError("no free loopback addresses found")


@contextlib.contextmanager
def interruptible():
    """SIGINT and SIGTERM raise KeyboardInterrupt in the measuring code
    (the reactor's own handlers would only stop the reactor later), so
    the cleanup runs at once."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    previous = {s: signal.signal(s, interrupt)
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


# --- one cluster -----------------------------------------------------------

class ScaleCluster(object):
    """A virtual cluster of ``size`` nodes with its daemons; ``close``
    stops every process by PID and removes the directory."""

    def __init__(self, size, per_node, job_instances, log=print):
        from ganeti.dev.vcluster import VirtualCluster
        self.size = size
        self.per_node = per_node
        total = size * per_node
        self.job_instances = total if job_instances is None else min(
            total, job_instances)
        self.log = log
        # short: the master's socket path must fit in 108 bytes
        self.base = tempfile.mkdtemp(prefix="gnt-scale-", dir="/tmp")
        self.vc = VirtualCluster(os.path.join(self.base, "vc"),
                                 node_count=size,
                                 first_address=_free_addresses(size))
        self.client = None
        self.results = {}

    def close(self):
        try:
            if self.client is not None:
                self.client.close()
        finally:
            try:
                self.vc.stop_all()
            finally:
                shutil.rmtree(self.base, ignore_errors=True)

    # --- helpers -----------------------------------------------------------

    def proc(self, description):
        for desc, proc in self.vc.processes:
            if desc == description:
                return proc
        raise KeyError(description)

    def nodeds(self):
        return [p for d, p in self.vc.processes if d.startswith("noded@")]

    def luxi(self):
        from ganeti import luxi
        if self.client is None:
            self.client = luxi.BlockingClient(
                self.vc.master.paths.master_socket, 300)
        return self.client

    def wait_jobs(self, jobs, what):
        """Wait until every job ended; RuntimeError naming the first that
        did not succeed."""
        from ganeti.dev.vcluster import wait_for
        c = self.luxi()
        pending = list(jobs)

        def done():
            chunk = pending[:500]
            statuses = c.call("QueryJobs", chunk, ["status"])
            for job, (status,) in zip(chunk, statuses):
                if status in FINAL:
                    if status != "success":
                        result = c.call("QueryJobs", [job],
                                        ["opresult"])[0][0]
                        raise RuntimeError("%s: job %s ended %s: %s"
                                           % (what, job, status, result))
                    pending.remove(job)
            return not pending
        wait_for(what, done, TIMEOUT, interval=0.1)

    def submit_many(self, ops):
        ids = []
        for start in range(0, len(ops), 200):
            answers = self.luxi().call("SubmitManyJobs",
                                       [[op] for op in ops[start:start + 200]])
            for ok, value in answers:
                if not ok:
                    raise RuntimeError("job refused: %s" % value)
                ids.append(value)
        return ids

    def cli(self, tool, *args):
        """Run one of our gnt-* tools on the master; (seconds, output)."""
        argv = [sys.executable, "-m", "ganeti.cli.%s" % tool.replace(
            "-", "_"), "--root", self.vc.master.root] + list(args)
        env = dict(os.environ, LANG="C.UTF-8")
        env["PYTHONPATH"] = os.pathsep.join(
            [REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                      if p])
        start = time.monotonic()
        out = subprocess.run(argv, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=TIMEOUT)
        elapsed = time.monotonic() - start
        text = out.stdout.decode("utf-8", "replace")
        if out.returncode != 0:
            raise RuntimeError("%s %s exited %d:\n%s" % (
                tool, " ".join(args), out.returncode, text[-3000:]))
        return elapsed, text

    # --- building ----------------------------------------------------------

    def build(self):
        from ganeti import constants
        vc = self.vc
        store = vc.create_master(hypervisors=(constants.HT_FAKE,))
        policy = copy.deepcopy(constants.IPOLICY_DEFAULTS)
        policy["minmax"][0]["min"]["disk-count"] = 0
        policy["minmax"][0]["min"]["nic-count"] = 0
        # 20 one-vCPU instances on a node of 2 CPUs
        policy["vcpu-ratio"] = 64.0
        store.set_cluster_params(candidate_pool_size=CANDIDATES,
                                 ipolicy=policy)
        self.noded_args = ["--os-search-path", os.path.join(REPO, "etc", "os"),
                           "--file-storage-dir",
                           store.cluster.file_storage_dir]
        vc.start_master(self.noded_args)
        self._join()
        bulk = self.size * self.per_node - self.job_instances
        if bulk:
            self._bulk_instances(bulk)
        self._job_instances()
        self._start_confd()

    def _join(self):
        from ganeti.dev.vcluster import wait_for, port_open
        from ganeti import constants
        vc = self.vc
        others = vc.nodes[1:]
        start = time.monotonic()
        procs = {}
        for node in others:
            procs[node.name] = vc.start(
                "noded@" + node.name, vc.twistd_command(
                    "ganeti-noded", node, "--no-mlock", "--bootstrap",
                    *self.noded_args))
        fingerprints = {}

        def ready():
            for node in others:
                if node.name in fingerprints:
                    continue
                proc = procs[node.name]
                if proc.poll() is not None:
                    raise RuntimeError("ganeti-noded of %s exited with %s"
                                       % (node.name, proc.returncode))
                fp_file = os.path.join(node.paths.run_dir,
                                       "ganeti-noded.fingerprint")
                if os.path.exists(fp_file) and port_open(
                        node.ip, constants.DEFAULT_NODED_PORT):
                    with open(fp_file) as f:
                        fp = f.read().strip()
                    if fp:
                        fingerprints[node.name] = fp
            return len(fingerprints) == len(others)
        wait_for("%d bootstrap node daemons" % len(others), ready, TIMEOUT,
                 interval=0.2)
        self.results["noded_start"] = time.monotonic() - start
        self.log("  %d node daemons up in bootstrap mode: %.1f s"
                 % (len(others), self.results["noded_start"]))
        start = time.monotonic()
        jobs = self.submit_many([
            {"OP_ID": "OP_NODE_ADD", "node_name": node.name,
             "primary_ip": node.ip,
             "join_fingerprint": fingerprints[node.name]}
            for node in others])
        self.wait_jobs(jobs, "joining %d nodes" % len(others))
        self.results["join"] = time.monotonic() - start
        self.log("  %d nodes joined: %.1f s" % (len(others),
                                                 self.results["join"]))

    def _instance_names(self):
        for i in range(self.size * self.per_node):
            yield i, "inst%d.example.com" % (i + 1)

    def _bulk_instances(self, count):
        """``count`` instances straight into config.data, the master
        daemon stopped meanwhile; then the master replicates it."""
        from ganeti import config, constants, objects
        from ganeti.dev.vcluster import master_answers, wait_for
        vc = self.vc
        start = time.monotonic()
        if self.client is not None:
            self.client.close()
            self.client = None
        masterd = self.proc("masterd@" + vc.master.name)
        masterd.terminate()
        masterd.wait(60)
        vc.processes = [(d, p) for d, p in vc.processes if p is not masterd]
        store = config.ConfigStore.load(vc.master.paths.config_file)
        nodes = sorted(store.nodes.values(), key=lambda n: n.name)
        for i, name in self._instance_names():
            if i >= count:
                break
            node = nodes[i % len(nodes)]
            inst = objects.Instance(
                name=name, uuid=objects.new_uuid(), primary_node=node.uuid,
                os="busybox+default", hypervisor=constants.HT_FAKE,
                admin_state=constants.ADMINST_DOWN,
                beparams={"maxmem": 128, "minmem": 128, "vcpus": 1},
                disks=[], nics=[])
            store.instances[inst.uuid] = inst
        store.save()
        proc = vc.start("masterd@" + vc.master.name,
                        vc.twistd_command("ganeti-masterd", vc.master))

        def answers():
            if proc.poll() is not None:
                raise RuntimeError("ganeti-masterd exited with %s"
                                   % proc.returncode)
            return master_answers(vc.master)
        wait_for("the master daemon", answers, 120)
        # the candidates get the new config.data, every node its ssconf
        self.wait_jobs(self.submit_many([{"OP_ID": "OP_CLUSTER_REDIST_CONF"}]),
                       "redistributing the configuration")
        self.log("  %d instances written in bulk (master stopped, then"
                 " redist-conf): %.1f s" % (count, time.monotonic() - start))

    def _job_instances(self):
        from ganeti import constants
        count = self.job_instances
        if not count:
            return
        names = list(self._instance_names())[-count:]
        nodes = self.vc.nodes
        ops = [{"OP_ID": "OP_INSTANCE_CREATE", "mode": "create",
                "instance_name": name, "pnode": nodes[i % len(nodes)].name,
                "disk_template": constants.DT_DISKLESS, "disks": [],
                "nics": [], "os_type": "busybox+default",
                "hypervisor": constants.HT_FAKE,
                "beparams": {"memory": 128}, "no_install": True,
                "start": False, "name_check": False, "ip_check": False}
               for i, name in names]
        start = time.monotonic()
        self.wait_jobs(self.submit_many(ops),
                       "creating %d instances" % count)
        elapsed = time.monotonic() - start
        self.results["create_rate"] = count / elapsed
        self.log("  %d instances created through jobs: %.1f s (%.1f/s)"
                 % (count, elapsed, count / elapsed))

    def candidates(self):
        store = self.vc.load()
        return [n for n in self.vc.nodes
                if store.get_node(n.name).master_candidate]

    def _start_confd(self):
        from ganeti import constants
        self.confds = []
        for node in self.candidates():
            self.confds.append(self.vc.start(
                "confd@" + node.name, self.vc.twistd_command(
                    "ganeti-confd", node, "--port",
                    str(constants.DEFAULT_CONFD_PORT))))
        time.sleep(3)
        for proc in self.confds:
            if proc.poll() is not None:
                raise RuntimeError("a confd exited with %s; see %s"
                                   % (proc.returncode, self.vc.base))
        self.log("  confd on %d master candidates" % len(self.confds))

    # --- measuring ---------------------------------------------------------

    def measure(self):
        r = self.results
        r["getmaster"] = statistics.median(
            self.cli("gnt-cluster", "getmaster")[0] for _ in range(REPEATS))
        times = []
        for _ in range(REPEATS):
            elapsed, out = self.cli("gnt-cluster", "verify")
            times.append(elapsed)
        r["verify"] = statistics.median(times)
        problems = [line for line in out.splitlines()
                    if "ERROR" in line or "WARNING" in line]
        if problems:
            self.log("  gnt-cluster verify reported %d problem(s), first:"
                     " %s" % (len(problems), problems[0]))
        times = []
        for _ in range(REPEATS):
            elapsed, out = self.cli("gnt-instance", "list")
            times.append(elapsed)
        r["list"] = statistics.median(times)
        listed = len(out.splitlines()) - 1
        if listed != self.size * self.per_node:
            raise RuntimeError("gnt-instance list showed %d instances, not"
                               " %d" % (listed, self.size * self.per_node))
        r["replication"] = statistics.median(
            self.replication_latency(i) for i in range(REPEATS))
        r["replication_node"] = statistics.median(
            self.replication_latency(i, "node") for i in range(REPEATS))
        masterd = self.proc("masterd@" + self.vc.master.name)
        time.sleep(2)     # let the last change's work settle
        before = cpu_seconds(masterd.pid)
        time.sleep(IDLE_SECONDS)
        r["idle_cpu"] = (cpu_seconds(masterd.pid) - before) / IDLE_SECONDS
        rss = [rss_mib(p.pid) for p in self.nodeds()]
        r["noded_rss"] = statistics.mean(rss)
        r["noded_rss_max"] = max(rss)
        r["masterd_rss"] = rss_mib(masterd.pid)
        return r

    def replication_latency(self, round_no, kind="cluster"):
        """Seconds from a change's job end (a tag of the cluster, or of a
        node: ``kind``) until the last other master candidate's
        config.data has its serial (by the file's mtime)."""
        from ganeti.dev.vcluster import wait_for
        master = self.vc.master
        others = [n for n in self.candidates() if n.name != master.name]
        c = self.luxi()
        # the candidates' confd reload the previous change's config.data
        # (CPU the candidates' node daemons would otherwise compete for)
        time.sleep(SETTLE_SECONDS)
        job = c.call("SubmitJob", [{
            "OP_ID": "OP_TAGS_SET", "kind": kind,
            "name": None if kind == "cluster" else self.vc.nodes[-1].name,
            "tags": ["scale-%d-%d" % (round_no, random.randint(0, 10**9))]}])
        self.wait_jobs([job], "the tag change")
        end_ts = c.call("QueryJobs", [job], ["end_ts"])[0][0]
        end = end_ts[0] + end_ts[1] / 1e6
        with open(master.paths.config_file, "rb") as f:
            serial = json.loads(f.read())["serial_no"]
        arrived = {}

        def arrived_everywhere():
            for node in others:
                if node.name in arrived:
                    continue
                path = node.paths.config_file
                try:
                    mtime = os.stat(path).st_mtime
                    with open(path, "rb") as f:
                        theirs = json.loads(f.read())["serial_no"]
                except (OSError, ValueError):
                    continue
                if theirs >= serial:
                    arrived[node.name] = mtime
            return len(arrived) == len(others)
        wait_for("configuration serial %d on %d candidates"
                 % (serial, len(others)), arrived_everywhere, 120,
                 interval=0.02)
        return max(arrived.values()) - end


# --- the report ------------------------------------------------------------

#: (key, label, format)
FIGURES = [
    ("getmaster", "baseline: gnt-cluster getmaster (s)", "%.2f"),
    ("noded_start", "start N-1 noded --bootstrap (s)", "%.1f"),
    ("join", "join N-1 nodes, OP_NODE_ADD (s)", "%.1f"),
    ("create_rate", "OP_INSTANCE_CREATE jobs/s", "%.1f"),
    ("noded_rss", "noded RSS, mean (MiB)", "%.1f"),
    ("noded_rss_max", "noded RSS, largest (MiB)", "%.1f"),
    ("masterd_rss", "masterd RSS (MiB)", "%.1f"),
    ("verify", "gnt-cluster verify (s)", "%.2f"),
    ("replication", "replication, cluster tag (s)", "%.3f"),
    ("replication_node", "replication, node tag (s)", "%.3f"),
    ("list", "gnt-instance list (s)", "%.2f"),
    ("idle_cpu", "masterd CPU at idle (%% of a core)", "%.1f"),
]


def report(sizes, results, per_node):
    headers = ["figure"] + ["%d nodes, %d inst." % (s, s * per_node)
                            for s in sizes]
    if len(sizes) > 1:
        headers.append("growth %d -> %d" % (sizes[0], sizes[-1]))
    rows = []
    for key, label, fmt in FIGURES:
        values = [results[s].get(key) for s in sizes]
        if key == "idle_cpu":
            values = [None if v is None else v * 100 for v in values]
        row = [label.replace("%%", "%")] + [
            "-" if v is None else fmt % v for v in values]
        if len(sizes) > 1:
            first, last = values[0], values[-1]
            row.append("-" if not first or last is None
                       else "%.1fx" % (last / first))
        rows.append(row)
    table(headers, rows)
    if len(sizes) > 1:
        print("(linear growth would be %.0fx; the machine is shared: figures"
              " are noisy)" % (sizes[-1] / float(sizes[0])))


def measure(sizes, per_node, job_instances, log=print):
    results = {}
    with interruptible():
        for size in sizes:
            log("-- %d nodes, %d instances" % (size, size * per_node))
            cluster = ScaleCluster(size, per_node, job_instances, log=log)
            try:
                cluster.build()
                results[size] = cluster.measure()
            finally:
                cluster.close()
    return results


def _env_settings():
    sizes = [int(s) for s in os.environ.get(
        "SCALE_BENCH_SIZES", ",".join(map(str, SIZES))).split(",") if s]
    per_node = int(os.environ.get("SCALE_BENCH_INSTANCES",
                                  INSTANCES_PER_NODE))
    jobs = os.environ.get("SCALE_BENCH_JOB_INSTANCES", str(JOB_INSTANCES))
    return sizes, per_node, None if jobs == "all" else int(jobs)


_configured = []


def _configure(repeats=None, idle=None):
    global REPEATS, IDLE_SECONDS
    _configured.append(True)
    REPEATS = int(os.environ.get("SCALE_BENCH_REPEATS", REPEATS)) \
        if repeats is None else repeats
    IDLE_SECONDS = float(os.environ.get("SCALE_BENCH_IDLE", IDLE_SECONDS)) \
        if idle is None else idle


def run(reactor, sizes=None, per_node=None, job_instances=-1):
    if not _configured:
        _configure()
    env_sizes, env_per_node, env_jobs = _env_settings()
    sizes = sizes or env_sizes
    per_node = env_per_node if per_node is None else per_node
    job_instances = env_jobs if job_instances == -1 else job_instances
    results = measure(sizes, per_node, job_instances)
    report(sizes, results, per_node)
    return defer.succeed(None)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", help="node counts, comma-separated"
                        " (default %s)" % ",".join(map(str, SIZES)))
    parser.add_argument("--instances", type=int, help="instances per node"
                        " (default %d)" % INSTANCES_PER_NODE)
    parser.add_argument("--job-instances", help="instances created through"
                        " jobs, or 'all' (default %d)" % JOB_INSTANCES)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--idle", type=float, help="seconds of idle CPU"
                        " measurement")
    args = parser.parse_args(argv)
    _configure(args.repeats, args.idle)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    jobs = -1
    if args.job_instances is not None:
        jobs = None if args.job_instances == "all" else int(
            args.job_instances)
    from twisted.internet import task
    task.react(lambda reactor: run(reactor, sizes, args.instances, jobs))


if __name__ == "__main__":
    main()
