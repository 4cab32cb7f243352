"""The cluster merger with real daemons: two 2-node virtual clusters, each
built the real way (the master's node daemon starts its daemons, the other
node joins through OP_NODE_ADD), each node running a fake-hypervisor
instance.

* ``cluster-merge`` (the command, as a process on the first cluster's
  master) makes one 4-node cluster: every instance still runs, as the same
  process, and is listed by ``gnt-instance list``; jobs run on the nodes
  that came over; the other cluster's master daemons are gone.
* a merge that fails half-way (the node daemon of the other cluster's
  second node is killed right before its switch, and comes back a few
  seconds later, as its service manager would restart it) leaves both
  clusters as they were: their nodes, instances, running masters, and a
  job runs on each.
"""

import os
import shutil
import signal
import subprocess
import sys

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti import constants
from ganeti import daemon_util
from ganeti import luxi
from ganeti.dev.vcluster import (MANAGED_NODED_ARGS, VirtualCluster,
                                 master_answers)
from ganeti.hypervisor import state
from ganeti.merge import flow
from ganeti.server.noded import merge as noded_merge

from tests.integration.daemons import (ETC_OS, FINAL, GntCommandsMixin,
                                       command_env, random_ips,
                                       short_tmpdir, wait_for)
from tests.test_noded import kill_fake_instances

NODED_ARGS = ("--os-search-path", ETC_OS)


def fake_pid(node, name):
    rt = state.RuntimeDir(node.root, constants.HT_FAKE)
    pid = state.read_pid_file(rt.pid_path(name))
    if pid is not None and state.process_alive(pid, marker=rt.base):
        return pid
    return None


class TwoClustersTestCase(GntCommandsMixin, unittest.TestCase):

    timeout = 600
    GNT_TIMEOUT = 300

    def setUp(self):
        self.base = short_tmpdir(self, "gnt-cm-")
        ips = random_ips(6)
        self.a = self.make_cluster("a", ips[0], ips[4])
        self.b = self.make_cluster("b", ips[2], ips[5])
        self.gnt_root = self.a.master.root
        self.cert_copy = os.path.join(self.base, "b-server.pem")
        shutil.copy(os.path.join(self.b.master.paths.data_dir,
                                 "server.pem"), self.cert_copy)
        for vc in (self.a, self.b):
            for node in vc.nodes:
                self.create_instance(vc, self.instance_of(node), node)
        self.pids = self.instance_pids()
        self.assertEqual(len([p for p in self.pids.values() if p]), 4)

    def make_cluster(self, letter, first, master_ip):
        domain = "%s.example.com" % letter
        vc = VirtualCluster(os.path.join(self.base, letter), node_count=2,
                            cluster_name=domain, domain=domain,
                            first_address=first, master_ip=master_ip)
        self.addCleanup(vc.stop_all)
        for node in vc.nodes:
            self.addCleanup(kill_fake_instances, node.root)
        vc.create_master(hypervisors=(constants.HT_FAKE,))
        vc.start_managed_master(noded_args=NODED_ARGS)
        vc.join_nodes(noded_args=MANAGED_NODED_ARGS + NODED_ARGS)
        return vc

    def cluster_merge(self, *args):
        """``cluster-merge`` on the first cluster's master; (exit code,
        output)."""
        proc = subprocess.run(
            [sys.executable, "-m", "ganeti.tools.cluster_merge"] + list(args),
            env=command_env(self.gnt_root), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=self.GNT_TIMEOUT, cwd="/")
        return proc.returncode, proc.stdout.decode("utf-8", "replace")

    @staticmethod
    def instance_of(node):
        return "vm-" + node.name.split(".")[0] + "-" + \
            node.name.split(".")[1]

    def instance_pids(self):
        return {self.instance_of(n): fake_pid(n, self.instance_of(n))
                for vc in (self.a, self.b) for n in vc.nodes}

    def create_instance(self, vc, name, node):
        """A running diskless fake instance ``name`` on ``node``, made
        through the master of ``vc``."""
        with luxi.BlockingClient(vc.master.paths.master_socket, 60) as c:
            self.run_job(c, {
                "OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
                "mode": "create", "disk_template": "diskless", "disks": [],
                "nics": [{}], "os_type": "busybox+default",
                "no_install": True, "pnode": node.name,
                "beparams": {"memory": 128}, "name_check": False,
                "ip_check": False})
            self.run_job(c, {"OP_ID": "OP_INSTANCE_STARTUP",
                             "instance_name": name})

    def run_job(self, client, op, expect="success"):
        job = client.submit_job([op])
        wait_for("job %s" % job, lambda: client.query_jobs(
            [job], ["status"])[0][0] in FINAL, timeout=240)
        status, result = client.query_jobs([job], ["status", "opresult"])[0]
        self.assertEqual(status, expect, result)
        return result[0] if result else None

    def live_instances(self, vc):
        """``{name: (primary node, run state)}`` by a job that asks the
        nodes."""
        with luxi.BlockingClient(vc.master.paths.master_socket, 60) as c:
            result = self.run_job(c, {"OP_ID": "OP_INSTANCE_QUERY_DATA",
                                      "instances": [], "static": False})
        return {name: (info["pnode"], info["run_state"])
                for name, info in result.items()}

    def node_names(self, vc):
        with luxi.BlockingClient(vc.master.paths.master_socket, 60) as c:
            return sorted(row[0] for row in c.query_nodes(None, ["name"]))


class ClusterMergeTests(TwoClustersTestCase):

    def test_merge_two_clusters_into_one(self):
        b_master = self.b.master
        code, out = self.cluster_merge("--groups", "merge", "-f",
                             "%s=%s" % (b_master.ip, self.cert_copy))
        self.assertEqual(code, 0, out)
        self.assertIn("Checks passed", out)
        self.assertIn("Switching node node1.b.example.com", out)
        self.assertIn("Merge done in", out)
        all_nodes = sorted(n.name for vc in (self.a, self.b)
                           for n in vc.nodes)
        self.assertEqual(self.node_names(self.a), all_nodes)
        # every instance listed, running as the same process
        out = self.ok("gnt-instance", "list", "--no-headers", "-o",
                      "name,pnode,status")
        rows = sorted(line.split() for line in out.splitlines())
        self.assertEqual(rows, sorted(
            [self.instance_of(n), n.name, "running"]
            for vc in (self.a, self.b) for n in vc.nodes))
        self.assertEqual(self.instance_pids(), self.pids)
        # the other cluster's nodes serve this one now
        for node in self.b.nodes:
            with open(node.paths.ssconf_file("cluster_name")) as f:
                self.assertEqual(f.read().strip(), "a.example.com")
            self.assertFalse(os.path.exists(
                noded_merge.backup_path(node.paths)))
        # their node daemons restarted in place: the same processes
        for desc, proc in self.b.processes:
            if desc.startswith("noded@"):
                self.assertIsNone(proc.poll(), desc)
        # its master daemons are gone; the pool took its nodes in
        wait_for("the old master daemon gone", lambda: self.b.daemon_pid(
            b_master, daemon_util.MASTERD) is None)
        out = self.ok("gnt-node", "list", "--no-headers", "-o",
                      "name,master_candidate")
        self.assertEqual(sorted(line.split() for line in out.splitlines()),
                         [[name, "Y"] for name in all_nodes])
        # jobs run on the nodes that came over
        self.create_instance(self.a, "vm-new", self.b.nodes[1])
        live = self.live_instances(self.a)
        self.assertEqual(live["vm-new"], (self.b.nodes[1].name, "up"))
        self.assertEqual(sorted(live), sorted(list(self.pids) + ["vm-new"]))
        self.ok("gnt-cluster", "verify")


class FailedMergeTests(TwoClustersTestCase):

    def restart_noded(self, node):
        self.b.start("noded@" + node.name, self.b.twistd_command(
            "ganeti-noded", node, "--no-mlock", "--bootstrap",
            *(MANAGED_NODED_ARGS + NODED_ARGS)))

    def kill_noded(self, node):
        for desc, proc in self.b.processes:
            if desc == "noded@" + node.name and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()

    @defer.inlineCallbacks
    def test_a_merge_failing_half_way_leaves_both_clusters(self):
        victim = self.b.nodes[1]
        killed = []

        def hooks(step, node=None, **info):
            if step == "switch" and node == victim.name:
                self.kill_noded(victim)
                killed.append(node)
                # back after a while, as its service manager restarts it
                reactor.callLater(3, self.restart_noded, victim)
        reports = []
        merger = flow.Merger(
            reactor, self.a.master.paths,
            [flow.OtherSpec(self.b.master.ip, self.cert_copy)],
            flow.Options(groups="merge"), report=reports.append,
            hooks=hooks)
        try:
            yield defer.Deferred.fromCoroutine(merger.run())
        except flow.MergeError as err:
            error = err
        else:
            self.fail("the merge did not fail:\n%s" % "\n".join(reports))
        text = "\n".join(reports)
        self.assertEqual(killed, [victim.name])
        self.assertTrue(error.rolled_back, (error.manual, text))
        self.assertEqual(error.manual, [], text)
        self.assertIn("switching node %s" % victim.name, error.message)
        self.assertIn("node node1.b.example.com is back in cluster"
                      " b.example.com", text)
        self.assertIn("node %s was not switched" % victim.name, text)
        yield self.check_both_as_before()

    @defer.inlineCallbacks
    def check_both_as_before(self):
        from twisted.internet import threads
        for vc in (self.a, self.b):
            wait = threads.deferToThread(
                wait_for, "the master of %s" % vc.cluster_name,
                lambda vc=vc: master_answers(vc.master), 120)
            yield wait
            names = yield threads.deferToThread(self.node_names, vc)
            self.assertEqual(names, sorted(n.name for n in vc.nodes))
            live = yield threads.deferToThread(self.live_instances, vc)
            self.assertEqual(live, {self.instance_of(n): (n.name, "up")
                                    for n in vc.nodes})
            for node in vc.nodes:
                with open(node.paths.ssconf_file("cluster_name")) as f:
                    self.assertEqual(f.read().strip(), vc.cluster_name)
                self.assertFalse(os.path.exists(
                    noded_merge.backup_path(node.paths)))
        self.assertEqual(self.instance_pids(), self.pids)
        # a job that changes something runs on each
        for vc in (self.a, self.b):
            node = vc.nodes[1]
            yield threads.deferToThread(
                self.create_instance, vc,
                "vm-after-%s" % vc.cluster_name[0], node)

