"""Node failure benchmark: from a frozen node to its instances running
elsewhere.

A 3-node virtual cluster (fake hypervisor, instances on shared file
storage, the cluster tagged ``ganeti:watcher:autorepair:failover``, the
virtual cluster's out-of-band program as every node's fencing program):
the master checks its nodes every second (``--node-check-interval 1
--node-check-misses 2``) and the watcher on the master makes a pass every
second.  One node is frozen (SIGSTOP on its node daemon, its watcher and
its instances: a frozen node could come back).  Measured, from the
freeze:

* when the node is marked offline and powered off (fenced);
* when every one of its instances runs on another node;

and, sampled every 50 ms, the most copies of one instance seen running
at once (must be 1).  The table compares the time to all running with
the target of 10 s.

The same again with real qemu guests (kvm driver, software emulation,
the project's tiny guest) when qemu and the guest are available: an
instance "runs" when its qemu does.

``python -m bench failover`` (``FAILOVER_BENCH_INSTANCES``: instances on
the frozen node, default 3; ``FAILOVER_BENCH_ROUNDS``: default 2;
``FAILOVER_BENCH_HYPERVISORS``: default ``fake,kvm``).
"""

import os
import random
import shutil
import signal
import sys
import tempfile
import time

from twisted.internet import threads

from bench.table import table

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = 10.0


def _random_first_address():
    return "127.%d.%d.1" % (random.randint(100, 250), random.randint(1, 250))


class Scenario(object):

    def __init__(self, instances, hypervisor="fake", guest=None):
        from ganeti import constants
        from ganeti.dev.vcluster import VirtualCluster
        self.count = instances
        self.hypervisor = hypervisor
        self.guest = guest
        self.base = tempfile.mkdtemp(prefix="gnt-fo-", dir="/tmp")
        self.vc = VirtualCluster(os.path.join(self.base, "vc"), node_count=3,
                                 first_address=_random_first_address())
        store = self.vc.create(hypervisors=(constants.HT_FAKE,
                                            constants.HT_KVM))
        self.fsd = store.cluster.file_storage_dir
        self.shared = store.cluster.shared_file_storage_dir
        os.makedirs(self.shared, exist_ok=True)
        self.names = ["fo%d.example.com" % i for i in range(instances)]

    def wait(self, what, predicate, timeout=60.0):
        from ganeti.dev.vcluster import wait_for
        wait_for(what, predicate, timeout)

    def start(self):
        from ganeti import constants, luxi
        from ganeti.dev.vcluster import master_answers, port_open
        vc = self.vc
        etc_os = os.path.join(REPO, "etc", "os")
        for node in vc.nodes:
            vc.start("noded-" + node.name, vc.twistd_command(
                "ganeti-noded", node, "--no-mlock", "--os-search-path",
                etc_os, "--file-storage-dir", self.fsd,
                "--file-storage-dir", self.shared))
            self.wait("noded " + node.name, lambda node=node: port_open(
                node.ip, constants.DEFAULT_NODED_PORT))
        vc.start("masterd", vc.twistd_command(
            "ganeti-masterd", vc.master, "--node-check-interval", "1",
            "--node-check-misses", "2"))
        self.wait("masterd", lambda: master_answers(vc.master))
        self.client = luxi.BlockingClient(vc.master.paths.master_socket, 60)
        program = vc.install_oob()
        self.job({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                  "ndparams": {"oob_program": program}})
        self.job({"OP_ID": "OP_TAGS_SET", "kind": "cluster",
                  "tags": ["ganeti:watcher:autorepair:failover"]})
        for name in self.names:
            op = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
                  "mode": "create", "disk_template": "sharedfile",
                  "disks": [{"size": 1024}], "nics": [{}],
                  "os_type": "busybox+default", "hypervisor": "fake",
                  "pnode": vc.nodes[1].name, "beparams": {"memory": 128},
                  "name_check": False, "ip_check": False}
            if self.hypervisor == "kvm":
                # a real guest; no NIC (the kvm driver wants a bridge), a
                # small disk: below the default instance policy
                op.update(hypervisor="kvm", nics=[], disks=[{"size": 16}],
                          beparams={"memory": 256},
                          hvparams=self.guest.kvm_hvparams("idle"),
                          ignore_ipolicy=True)
            self.job(op)
        vc.start("watcher", vc.twistd_command(
            "ganeti-watcher", vc.master, "--interval", "1", "--job-wait",
            "0", "--no-daemon-checks"))

    def job(self, op):
        c = self.client
        jid = c.call("SubmitJob", [op])
        self.wait("job %s" % jid, lambda: c.call(
            "QueryJobs", [jid], ["status"])[0][0] in ("success", "error",
                                                      "canceled"), 120)
        status, result = c.call("QueryJobs", [jid], ["status", "opresult"])[0]
        if status != "success":
            raise RuntimeError("job %s (%s): %s %s" % (jid, op["OP_ID"],
                                                       status, result))

    def copies(self, name):
        from ganeti.hypervisor import state
        where = []
        for node in self.vc.nodes:
            rt = state.RuntimeDir(node.root, self.hypervisor)
            pid = state.read_pid_file(rt.pid_path(name))
            if pid is not None and state.process_alive(pid, marker=rt.base):
                where.append(node.name)
        return where

    def run_round(self):
        from ganeti.dev import oob
        lost = self.vc.nodes[1]
        before = {n: self.copies(n) for n in self.names}
        assert all(v == [lost.name] for v in before.values()), before
        pids = oob.node_processes(lost.root)
        start = time.monotonic()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        fenced = None
        done = None
        most = 1
        try:
            while time.monotonic() - start < 120:
                now = time.monotonic() - start
                where = {n: self.copies(n) for n in self.names}
                most = max([most] + [len(v) for v in where.values()])
                if fenced is None and not oob.node_processes(lost.root):
                    fenced = now
                if all(v and lost.name not in v for v in where.values()):
                    done = now
                    break
                time.sleep(0.05)
        finally:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        return fenced, done, most

    def stop(self):
        try:
            self.client.close()
        except Exception:
            pass
        self.vc.stop_all()
        shutil.rmtree(self.base, True)


def measure(instances, rounds, hypervisors):
    rows = []
    for hv in hypervisors:
        guest = None
        if hv == "kvm":
            from ganeti.dev import tinyguest
            if tinyguest.qemu_binary() is None:
                rows.append((hv, "-", None, None, "qemu not installed"))
                continue
            try:
                guest = tinyguest.get_guest()
            except tinyguest.GuestUnavailable as err:
                rows.append((hv, "-", None, None, "no guest: %s" % err))
                continue
        for r in range(rounds):
            sc = Scenario(instances, hv, guest)
            try:
                sc.start()
                fenced, done, most = sc.run_round()
            finally:
                sc.stop()
            rows.append((hv, r + 1, fenced, done, most))
    return rows


def fmt(x):
    return "timeout" if x is None else "%.1f" % x


def run(reactor):
    instances = int(os.environ.get("FAILOVER_BENCH_INSTANCES", "3"))
    rounds = int(os.environ.get("FAILOVER_BENCH_ROUNDS", "2"))
    hypervisors = [h for h in os.environ.get(
        "FAILOVER_BENCH_HYPERVISORS", "fake,kvm").split(",") if h]
    d = threads.deferToThread(measure, instances, rounds, hypervisors)

    def show(rows):
        table(["hypervisor", "round", "instances", "fenced s",
               "all running elsewhere s", "vs 10 s target", "most copies"],
              [[hv, r, instances, fmt(f), fmt(d_),
                "-" if d_ is None else "%.2fx" % (d_ / TARGET), m]
               for hv, r, f, d_, m in rows])
    return d.addCallback(show)


if __name__ == "__main__":
    from twisted.internet import task
    sys.exit(task.react(lambda reactor: run(reactor)))
