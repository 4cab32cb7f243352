"""Evacuating nodes: the maintenance daemon against an admin doing it by
hand.

A virtual cluster of ``MAINTD_BENCH_NODES`` nodes (default 10) holding
``MAINTD_BENCH_INSTANCES`` fake-hypervisor instances (default 100, 128 MiB,
one 1 GiB sharedfile disk, so they live-migrate), placed round-robin so
each node starts with the same share (the instance policy allows 64
virtual CPUs per CPU: with the default 4 the host's 2 CPUs hold only 6
instances a node).  Every node runs its node daemon, confd and a
monitoring daemon whose self-diagnosis is a whitelisted script printing a
JSON file (``gnt-cluster modify --diagnose-data-collector-filename health
--data-collector-interval diagnose=1``).  Three nodes (the last three;
the master is the first) are evacuated, twice, each time on a freshly
built cluster:

``by hand``
  a plain luxi client does what an admin would: drain the three nodes
  (``gnt-node modify --drained yes``, one job each), then, node after node,
  migrate each of its instances with the cluster's allocator, one job at
  a time (``gnt-instance migrate -f NAME``), and set the emptied node
  offline (``gnt-node modify --offline yes``).
``maintd``
  ganeti-maintd on the master (``--interval 1``); the three nodes' report
  files say ``{"status": "evacuate"}`` at once.  Done when its
  ``/1/status`` shows the three incidents ``completed`` and none of the
  cluster's instances is on those nodes.  ``rounds`` is ``/1/counters``'
  ``rounds`` (each round: one job per node, side by side).

The time runs from the first job (by hand) or the report files written
(maintd: it includes noticing the reports, up to a second for the
diagnosis and one for the daemon's look) to the end.  ``migrations`` is
the number of OP_INSTANCE_MIGRATE jobs, ``twice`` the instances migrated
more than once (must be 0), ``misplaced`` those not running on a healthy
node afterwards (must be 0).  ``vs by hand`` is the maintd time over the
by-hand time (below 1: the daemon is faster).

Reading the ratio: the jobs of one round run side by side, but a
migration left to the allocator locks every node of the group (the
target is not known before), so the three of a round still run one after
the other; a round then adds the wait for the daemon's next look (up to
``--interval``) and the look itself.  The daemon's first round only
drains the three nodes (so none becomes a target), its last sets them
offline and tags them.

``python -m bench maintd`` (``MAINTD_BENCH_INSTANCES``, default 100;
``MAINTD_BENCH_NODES``, default 10).
"""

import json
import os
import random
import shutil
import sys
import tempfile
import time
import urllib.request

from twisted.internet import threads

from bench.table import table

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVACUATED = 3
HEALTH = "health"
FINAL = ("success", "error", "canceled")
#: seconds one evacuation may take before the benchmark gives up
TIMEOUT = 300.0
#: instance policy's virtual CPUs per physical CPU (the default is 4)
VCPU_RATIO = 64.0


def _random_first_address():
    return "127.%d.%d.1" % (random.randint(100, 250), random.randint(1, 250))


class Scenario(object):
    """One virtual cluster with its instances; ``stop`` ends every process
    and removes the temporary directory."""

    def __init__(self, instances, nodes):
        from ganeti import constants
        from ganeti.dev.vcluster import VirtualCluster
        self.base = tempfile.mkdtemp(prefix="gnt-mb-", dir="/tmp")
        self.vc = VirtualCluster(os.path.join(self.base, "vc"),
                                 node_count=nodes,
                                 first_address=_random_first_address())
        store = self.vc.create(hypervisors=(constants.HT_FAKE,))
        self.fsd = store.cluster.file_storage_dir
        self.shared = store.cluster.shared_file_storage_dir
        os.makedirs(self.shared, exist_ok=True)
        self.names = ["mb%03d.example.com" % i for i in range(instances)]
        self.sick = self.vc.nodes[-EVACUATED:]
        self.client = None

    # --- building the cluster ------------------------------------------------

    def wait(self, what, predicate, timeout=60.0, interval=0.05):
        from ganeti.dev.vcluster import wait_for
        return wait_for(what, predicate, timeout, interval)

    def alive(self, proc, what):
        if proc.poll() is not None:
            raise RuntimeError("%s exited with %s; see %s"
                               % (what, proc.returncode, self.base))
        return True

    def start(self):
        from ganeti import constants, luxi
        from ganeti.dev.vcluster import master_answers, port_open
        vc = self.vc
        etc_os = os.path.join(REPO, "etc", "os")
        for node in vc.nodes:
            proc = vc.start("noded-" + node.name, vc.twistd_command(
                "ganeti-noded", node, "--no-mlock", "--os-search-path",
                etc_os, "--file-storage-dir", self.fsd,
                "--file-storage-dir", self.shared))
            self.wait("noded " + node.name, lambda node=node, proc=proc:
                      self.alive(proc, "noded") and port_open(
                          node.ip, constants.DEFAULT_NODED_PORT))
        proc = vc.start("masterd", vc.twistd_command("ganeti-masterd",
                                                     vc.master))
        self.wait("masterd", lambda: self.alive(proc, "masterd") and
                  master_answers(vc.master))
        self.client = luxi.BlockingClient(vc.master.paths.master_socket, 60)
        # ssconf on every node, for confd and the monitoring daemons
        self.job({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        for node in vc.nodes:
            self.wait("ssconf on " + node.name, lambda node=node: os.path.
                      exists(node.paths.ssconf_file("master_candidates_ips")))
            self.install_script(node)
            vc.start("confd-" + node.name, vc.twistd_command(
                "ganeti-confd", node))
        self.job({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                  "diagnose_data_collector_filename": HEALTH,
                  "data_collector_interval": {"diagnose": 1000000},
                  # the host's 2 CPUs times the default 4 fit 6 one-vcpu
                  # instances a node; the fake guests hardly use a CPU
                  "ipolicy": {"vcpu-ratio": VCPU_RATIO}})
        for node in vc.nodes:
            proc = vc.start("mond-" + node.name, vc.twistd_command(
                "ganeti-mond", node, "--refresh", "0.5", "--dbus-address",
                "unix:path=%s" % os.path.join(self.base, "no-bus")))
            self.wait("mond on " + node.name, lambda node=node, proc=proc:
                      self.alive(proc, "mond") and port_open(
                          node.ip, constants.DEFAULT_MOND_PORT))
        self.create_instances()

    def install_script(self, node):
        directory = node.paths.diagnose_commands_dir
        os.makedirs(directory, mode=0o755, exist_ok=True)
        os.chmod(directory, 0o755)
        script = os.path.join(directory, HEALTH)
        report = self.report_path(node)
        with open(script, "w") as f:
            f.write("#!/bin/sh\nif [ -f %s ]; then cat %s; else echo"
                    " '{\"status\": \"Ok\"}'; fi\n" % (report, report))
        os.chmod(script, 0o755)

    @staticmethod
    def report_path(node):
        return os.path.join(node.root, "report.json")

    def report(self, node, value):
        path = self.report_path(node)
        with open(path + ".new", "w") as f:
            json.dump(value, f)
        os.rename(path + ".new", path)

    def create_instances(self):
        """All creation jobs at once (they lock different nodes), placed
        round-robin."""
        nodes = self.vc.nodes
        jobs = []
        for i, name in enumerate(self.names):
            jobs.append(self.submit({
                "OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
                "mode": "create", "disk_template": "sharedfile",
                "disks": [{"size": 1024}], "nics": [{}],
                "os_type": "busybox+default", "hypervisor": "fake",
                "pnode": nodes[i % len(nodes)].name,
                "beparams": {"memory": 128},
                "name_check": False, "ip_check": False}))
        self.wait_jobs(jobs, 60 + 3 * len(jobs))

    # --- jobs and queries ----------------------------------------------------

    def submit(self, op):
        return self.client.call("SubmitJob", [op])

    def wait_jobs(self, jobs, timeout=120.0):
        c = self.client

        def done():
            rows = c.call("QueryJobs", jobs, ["status"])
            return all(r is not None and r[0] in FINAL for r in rows)
        self.wait("%d jobs" % len(jobs), done, timeout, 0.2)
        rows = c.call("QueryJobs", jobs, ["id", "status", "opresult"])
        bad = [r for r in rows if r[1] != "success"]
        if bad:
            raise RuntimeError("%d of %d jobs failed; the first: %s"
                               % (len(bad), len(jobs), bad[0]))

    def job(self, op):
        self.wait_jobs([self.submit(op)])

    def instances(self):
        """{name: (primary node, status)}"""
        answer = self.client.call("Query", "instance",
                                  ["name", "pnode", "status"], None)
        return {row[0][1]: (row[1][1], row[2][1]) for row in answer["data"]}

    def migrations(self):
        """{instance: number of OP_INSTANCE_MIGRATE jobs naming it}"""
        count = {}
        for row in self.client.call("QueryJobs", None, ["ops"]):
            if row is None:
                continue
            for op in row[0] or ():
                if op.get("OP_ID") == "OP_INSTANCE_MIGRATE":
                    name = op["instance_name"]
                    count[name] = count.get(name, 0) + 1
        return count

    def check(self):
        """(migrations, instances migrated twice or more, instances not
        running on a healthy node)"""
        sick = {n.name for n in self.sick}
        where = self.instances()
        misplaced = [n for n in self.names
                     if n not in where or where[n][0] in sick or
                     where[n][1] != "running"]
        moves = self.migrations()
        twice = [n for n, c in moves.items() if c > 1]
        return sum(moves.values()), twice, misplaced

    def empty(self):
        sick = {n.name for n in self.sick}
        return not any(p in sick for p, _ in self.instances().values())

    # --- the two ways to evacuate --------------------------------------------

    def by_hand(self):
        """Seconds for the admin's way."""
        start = time.monotonic()
        for node in self.sick:
            self.job({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node.name,
                      "drained": True})
        for node in self.sick:
            mine = sorted(n for n, (p, _) in self.instances().items()
                          if p == node.name)
            for name in mine:
                self.job({"OP_ID": "OP_INSTANCE_MIGRATE",
                          "instance_name": name})
            self.job({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node.name,
                      "offline": True, "auto_promote": True})
        return time.monotonic() - start

    def maintd(self):
        """(seconds, rounds) for the maintenance daemon's way."""
        from ganeti import constants
        from ganeti.dev.vcluster import port_open
        master = self.vc.master
        proc = self.vc.start("maintd", self.vc.twistd_command(
            "ganeti-maintd", master, "--interval", "1"))
        self.wait("maintd", lambda: self.alive(proc, "maintd") and
                  port_open(master.ip, constants.DEFAULT_MAINTD_PORT))
        before = self.maintd_get("counters")["rounds"]
        start = time.monotonic()
        for node in self.sick:
            self.report(node, {"status": "evacuate"})
        names = {n.name for n in self.sick}

        def done():
            self.alive(proc, "maintd")
            incidents = [i for i in self.maintd_get("status")
                         if i["node_name"] in names]
            failed = [i for i in incidents if i["repair-status"] in
                      ("failed", "canceled")]
            if failed:
                raise RuntimeError("incident %s" % failed[0])
            return len(incidents) == len(names) and all(
                i["repair-status"] == "completed" for i in incidents) and \
                self.empty()
        self.wait("the maintenance daemon's evacuation", done, TIMEOUT, 0.2)
        seconds = time.monotonic() - start
        return seconds, self.maintd_get("counters")["rounds"] - before

    def maintd_get(self, what):
        from ganeti import constants
        url = "http://%s:%d/1/%s" % (self.vc.master.ip,
                                     constants.DEFAULT_MAINTD_PORT, what)
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read().decode("utf-8"))

    def stop(self):
        if self.client is not None:
            try:
                self.client.close()
            except Exception:
                pass
        self.vc.stop_all()
        shutil.rmtree(self.base, True)


def measure(instances, nodes):
    rows = []
    for way in ("by hand", "maintd"):
        sc = Scenario(instances, nodes)
        try:
            started = time.monotonic()
            sc.start()
            setup = time.monotonic() - started
            if way == "by hand":
                seconds, rounds = sc.by_hand(), None
            else:
                seconds, rounds = sc.maintd()
            moves, twice, misplaced = sc.check()
        finally:
            sc.stop()
        rows.append((way, setup, seconds, rounds, moves, twice, misplaced))
    return rows


def run(reactor):
    instances = int(os.environ.get("MAINTD_BENCH_INSTANCES", "100"))
    nodes = int(os.environ.get("MAINTD_BENCH_NODES", "10"))
    if nodes <= EVACUATED:
        raise SystemExit("MAINTD_BENCH_NODES: at least %d nodes, got %d"
                         % (EVACUATED + 1, nodes))
    d = threads.deferToThread(measure, instances, nodes)

    def show(rows):
        hand = rows[0][2]
        table(["way", "nodes", "instances", "evacuated", "set-up s",
               "evacuation s", "rounds", "migrations", "twice", "misplaced",
               "vs by hand"],
              [[way, nodes, instances, EVACUATED, "%.1f" % setup,
                "%.1f" % s, "-" if r is None else r, m, len(tw), len(mis),
                "%.2fx" % (s / hand) if hand else "-"]
               for way, setup, s, r, m, tw, mis in rows])
        for way, _, _, _, _, twice, misplaced in rows:
            if twice:
                print("%s: migrated twice: %s" % (way, ", ".join(twice)))
            if misplaced:
                print("%s: not running on a healthy node: %s"
                      % (way, ", ".join(misplaced)))
    return d.addCallback(show)


if __name__ == "__main__":
    from twisted.internet import task
    sys.exit(task.react(lambda reactor: run(reactor)))
