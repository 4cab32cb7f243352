"""Master failover on a virtual cluster whose node daemons start the other
daemons by role (``ganeti-noded --daemons process``).

The master is killed with SIGKILL (every daemon of its node), a candidate
takes over with ``gnt-cluster master-failover``: acknowledged jobs are all
there (finished ones as they were, the running one ended as after an
unclean stop, the queued one runs), the instances still run, ssconf,
confd and the remote API at the master IP follow the new master, and the
old master, restarted, stays a non-master.  A cluster split in two halves
elects no master on either side; a candidate with an older configuration
is not elected; ``--no-voting`` is for a two-node cluster.
"""

import json
import os
import signal
import subprocess
import sys
import time
import unittest
import urllib.request
import ssl

from ganeti import constants
from ganeti import daemon_util
from ganeti import luxi
from ganeti.backend import master_ip
from ganeti.dev.vcluster import (MANAGED_NODED_ARGS, VirtualCluster,
                                 master_answers)

from tests import ganeti_peer
from tests.integration.daemons import (ETC_OS, FINAL, PROJECT, command_env,
                                       wait_for)
from tests.places import random_ips, short_tmpdir
from tests.test_noded import kill_fake_instances

LONG_DELAY = 600


class ManagedClusterTestCase(unittest.TestCase):
    """``NODES`` nodes built the real way, every node daemon managing its
    node's daemons; the master IP is an address of its own."""

    NODES = 3
    timeout = 300

    def setUp(self):
        base = short_tmpdir(self, "gnt-mf-")
        ips = random_ips(self.NODES + 1)
        self.master_ip = ips[-1]
        self.vc = VirtualCluster(os.path.join(base, "vc"),
                                 node_count=self.NODES,
                                 master_ip=self.master_ip)
        for node, ip in zip(self.vc.nodes, ips):
            node.ip = ip
        self.addCleanup(self.vc.stop_all)
        for node in self.vc.nodes:
            self.addCleanup(kill_fake_instances, node.root)
        self.vc.create_master()
        self.noded_args = ["--os-search-path", ETC_OS]
        self.vc.start_managed_master(self.noded_args)
        self.vc.join_nodes(noded_args=list(MANAGED_NODED_ARGS)
                           + self.noded_args)
        for node in self.vc.nodes:
            self.wait_daemon(node, daemon_util.CONFD)

    # -- helpers
    def node(self, i):
        return self.vc.nodes[i]

    def wait_daemon(self, node, daemon, running=True, timeout=60):
        wait_for("%s %s on %s" % (daemon, "running" if running else
                                  "stopped", node.name),
                 lambda: (daemon_util.running_pid(node.paths, daemon)
                          is not None) == running, timeout=timeout)

    def client(self, node):
        c = luxi.BlockingClient(node.paths.master_socket, 60)
        self.addCleanup(c.close)
        return c

    def gnt(self, node, program, *args):
        env = command_env(node.root)
        env["GANETI_HOSTNAME"] = node.name
        module = "ganeti.cli.%s" % program.replace("-", "_")
        proc = subprocess.run([sys.executable, "-m", module] + list(args),
                              env=env, cwd=PROJECT, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=240)
        return proc.returncode, proc.stdout.decode("utf-8", "replace")

    def run_job(self, client, op, expect="success"):
        job = client.submit_job([op])
        wait_for("job %s" % job, lambda: client.query_jobs(
            [job], ["status"])[0][0] in FINAL, timeout=120)
        status, result = client.query_jobs([job], ["status", "opresult"])[0]
        self.assertEqual(status, expect, result)
        return job

    def create_instance(self, client, name, node):
        self.run_job(client, {
            "OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
            "mode": "create", "disk_template": "diskless", "disks": [],
            "nics": [{}], "os_type": "busybox+default", "no_install": True,
            "pnode": node.name, "beparams": {"memory": 128},
            "hypervisor": "fake", "name_check": False, "ip_check": False})
        # not installed, so not started by the creation
        self.run_job(client, {"OP_ID": "OP_INSTANCE_STARTUP",
                              "instance_name": name})

    def guest_pid(self, node, name):
        from ganeti.hypervisor import state
        rt = state.RuntimeDir(node.root, "fake")
        return state.read_pid_file(rt.pid_path(name))

    def restart_noded(self, node):
        """Start ``node``'s node daemon again (as after a reboot)."""
        self.vc.start("noded@" + node.name, self.vc.twistd_command(
            "ganeti-noded", node, "--no-mlock", *(list(MANAGED_NODED_ARGS)
                                                  + self.noded_args)))
        wait_for("noded on %s" % node.name, lambda: _port_open(
            node.ip, constants.DEFAULT_NODED_PORT))

    def stop_noded(self, node):
        """Only the node daemon of ``node`` (the node is out of reach)."""
        for desc, proc in self.vc.processes:
            if desc == "noded@" + node.name and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()

    def serial(self, node):
        with open(node.paths.config_file) as f:
            return json.load(f)["serial_no"]

    def ssconf(self, node, key):
        with open(node.paths.ssconf_file(key)) as f:
            return f.read().strip()

    def confd_master(self, node):
        # in a process of its own: the reactor runs once per process
        argv = [sys.executable, "-c",
                "import sys, json\n"
                "from ganeti.utils.reactor_run import run_in_reactor\n"
                "from ganeti.confd import client as c, wire\n"
                "key = wire.read_hmac_key(sys.argv[1])\n"
                "async def ask(reactor):\n"
                "    cl = c.ConfdClient(key, [sys.argv[2]], reactor=reactor,"
                " timeout=5)\n"
                "    try:\n"
                "        r = await cl.request(wire.REQ_CLUSTER_MASTER)\n"
                "    finally:\n"
                "        await cl.close()\n"
                "    return r.answer\n"
                "print(json.dumps(run_in_reactor(ask)))\n",
                node.paths.hmac_key_file, node.ip]
        out = subprocess.run(argv, env=command_env(node.root), cwd=PROJECT,
                             stdout=subprocess.PIPE, timeout=60, check=True)
        return json.loads(out.stdout)

    def rapi_info(self):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        url = "https://%s:%d/2/info" % (self.master_ip,
                                        constants.DEFAULT_RAPI_PORT)
        with urllib.request.urlopen(url, context=context, timeout=10) as r:
            return json.load(r)


def _port_open(address, port):
    import socket
    try:
        socket.create_connection((address, port), 1).close()
        return True
    except OSError:
        return False


class MasterFailoverTests(ManagedClusterTestCase):

    def test_dead_master_replaced(self):
        old, new, other = self.node(0), self.node(1), self.node(2)
        c = self.client(old)
        self.create_instance(c, "web1.example.com", new)
        self.create_instance(c, "db1.example.com", other)
        pids = {"web1.example.com": self.guest_pid(new, "web1.example.com"),
                "db1.example.com": self.guest_pid(other, "db1.example.com")}
        self.assertTrue(all(pids.values()), pids)
        self.assertEqual(self.rapi_info()["master"], old.name)
        # one job running at a time: finished, running and queued jobs
        self.run_job(c, {"OP_ID": "OP_CLUSTER_SET_PARAMS",
                         "max_running_jobs": 1})
        finished = [self.run_job(c, {"OP_ID": "OP_TEST_DELAY",
                                     "duration": 0}) for _ in range(3)]
        running = c.submit_job([{"OP_ID": "OP_TEST_DELAY",
                                 "duration": LONG_DELAY}])
        wait_for("a running job", lambda: c.query_jobs(
            [running], ["status"])[0][0] == "running")
        queued = c.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
        self.assertEqual(c.query_jobs([queued], ["status"])[0][0], "queued")
        c.close()

        self.vc.kill_node(old)
        started = time.monotonic()
        code, out = self.gnt(new, "gnt-cluster", "master-failover")
        self.assertEqual(code, 0, out)
        self.assertIn("2 of 3 master candidates answered", out)
        nc = self.client(new)
        first = nc.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
        took = time.monotonic() - started
        sys.stderr.write("\n[dead master to first job accepted: %.1f s]\n"
                         % took)
        # every acknowledged job is there
        wait_for("the queued job", lambda: nc.query_jobs(
            [queued], ["status"])[0][0] == "success", timeout=120)
        rows = nc.query_jobs(finished + [running, first],
                             ["status", "opresult"])
        self.assertEqual([r[0] for r in rows[:3]], ["success"] * 3)
        self.assertEqual(rows[3][0], "error")
        self.assertIn("The master daemon stopped while this opcode was"
                      " running", str(rows[3][1]))
        # instances: still running, same processes
        for name, node in (("web1.example.com", new),
                           ("db1.example.com", other)):
            self.assertEqual(self.guest_pid(node, name), pids[name])
        # everyone follows the new master
        for node in (new, other):
            self.assertEqual(self.ssconf(node, "master_node"), new.name)
            code, out = self.gnt(node, "gnt-cluster", "getmaster")
            self.assertEqual(out.strip(), new.name)
        self.assertEqual(self.confd_master(other), new.name)
        self.assertEqual(self.rapi_info()["master"], new.name)
        code, out = self.gnt(new, "gnt-cluster", "master-ping")
        self.assertEqual(code, 0, out)
        if not ganeti_peer.unavailable_reason():
            # Ganeti's own tools, on the new master, as on any master
            code, out = ganeti_peer.run_tool("gnt-cluster", ["getmaster"],
                                             new.root, new.name)
            self.assertEqual((code, out.strip()), (0, new.name))
            code, out = ganeti_peer.run_tool(
                "gnt-job", ["list", "--no-headers", "-o", "id,status"],
                new.root, new.name)
            self.assertEqual(code, 0, out)
            self.assertIn("%d error" % running, out)
        for daemon in (daemon_util.MASTERD, daemon_util.RAPI,
                       daemon_util.MAINTD):
            self.wait_daemon(new, daemon)

        # the old master comes back: it does not become a master again
        self.restart_noded(old)
        wait_for("the old master's vote", lambda: os.path.exists(
            os.path.join(old.paths.run_dir, "master-role.held")), timeout=90)
        with open(daemon_util.stderr_path(old.paths,
                                          daemon_util.MASTERD)) as f:
            self.assertIn("not the master", f.read())
        self.assertIsNone(daemon_util.running_pid(old.paths,
                                                  daemon_util.MASTERD))
        self.assertIsNone(daemon_util.running_pid(old.paths,
                                                  daemon_util.RAPI))
        self.assertFalse(master_answers(old))
        self.assertEqual(self.rapi_info()["master"], new.name)
        # once the new master reaches it, it is an ordinary candidate
        self.run_job(nc, {"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        self.assertEqual(self.ssconf(old, "master_node"), new.name)
        self.wait_daemon(old, daemon_util.CONFD)

    def test_failover_from_a_live_master(self):
        old, new = self.node(0), self.node(1)
        code, out = self.gnt(new, "gnt-cluster", "master-failover")
        self.assertEqual(code, 0, out)
        self.assertIn("3 of 3 master candidates answered", out)
        self.assertFalse(master_answers(old))
        for daemon in (daemon_util.MASTERD, daemon_util.RAPI,
                       daemon_util.MAINTD):
            self.wait_daemon(old, daemon, running=False)
        self.assertEqual(self.rapi_info()["master"], new.name)
        # the master IP moved
        self.assertIsNone(master_ip.held_address(old.paths))
        self.assertEqual(master_ip.held_address(new.paths), self.master_ip)
        code, out = self.gnt(new, "gnt-cluster", "deactivate-master-ip",
                             "-f")
        self.assertEqual(code, 0, out)
        self.assertIsNone(master_ip.held_address(new.paths))
        code, out = self.gnt(new, "gnt-cluster", "activate-master-ip")
        self.assertEqual(code, 0, out)
        self.assertEqual(master_ip.held_address(new.paths), self.master_ip)
        c = self.client(new)
        self.run_job(c, {"OP_ID": "OP_TEST_DELAY", "duration": 0})
        # and back again
        code, out = self.gnt(old, "gnt-cluster", "master-failover")
        self.assertEqual(code, 0, out)
        self.assertTrue(master_answers(old))
        self.assertEqual(self.rapi_info()["master"], old.name)

    def test_not_on_a_non_candidate_or_the_master(self):
        code, out = self.gnt(self.node(0), "gnt-cluster", "master-failover")
        self.assertEqual(code, 0, out)
        self.assertIn("already the master", out)
        c = self.client(self.node(0))
        self.run_job(c, {"OP_ID": "OP_NODE_SET_PARAMS",
                         "node_name": self.node(2).name,
                         "master_candidate": False, "auto_promote": False})
        # a demoted candidate's node daemon stops its confd
        self.wait_daemon(self.node(2), daemon_util.CONFD, running=False)
        serial = self.serial(self.node(0))
        code, out = self.gnt(self.node(2), "gnt-cluster", "master-failover")
        self.assertNotEqual(code, 0, out)
        self.assertIn("not a master candidate", out)
        self.assertEqual(self.serial(self.node(0)), serial)
        self.assertTrue(master_answers(self.node(0)))


class SplitClusterTests(ManagedClusterTestCase):

    NODES = 4

    def test_neither_half_elects_a_master(self):
        a, b, c, d = self.vc.nodes
        serials = [self.serial(n) for n in (b, c, d)]
        # c and d cannot reach a and b (the master still runs on a)
        self.stop_noded(a)
        self.stop_noded(b)
        code, out = self.gnt(c, "gnt-cluster", "master-failover")
        self.assertNotEqual(code, 0, out)
        self.assertIn("only 2 of 4 master candidates answered", out)
        # the other way round: a and b cannot reach c and d
        self.restart_noded(a)
        self.restart_noded(b)
        self.stop_noded(c)
        self.stop_noded(d)
        code, out = self.gnt(b, "gnt-cluster", "master-failover")
        self.assertNotEqual(code, 0, out)
        self.assertIn("only 2 of 4 master candidates answered", out)
        self.assertEqual([self.serial(n) for n in (b, c, d)], serials)
        for node in (b, c, d):
            self.assertEqual(self.ssconf(node, "master_node"), a.name)
            self.assertFalse(master_answers(node))
        self.assertTrue(master_answers(a))

    def test_a_candidate_with_an_older_config_is_not_elected(self):
        a, b, c, d = self.vc.nodes
        # d misses a change
        self.stop_noded(d)
        client = self.client(a)
        self.run_job(client, {"OP_ID": "OP_TAGS_SET", "kind": "cluster",
                              "tags": ["before-failover"]})
        wait_for("the change on b", lambda: self.serial(b) == self.serial(a))
        self.assertLess(self.serial(d), self.serial(a))
        client.close()
        self.restart_noded(d)
        self.vc.kill_node(a)
        code, out = self.gnt(d, "gnt-cluster", "master-failover")
        self.assertNotEqual(code, 0, out)
        self.assertIn("holds a newer configuration", out)
        self.assertFalse(master_answers(d))
        code, out = self.gnt(b, "gnt-cluster", "master-failover")
        self.assertEqual(code, 0, out)
        c2 = self.client(b)
        tags = c2.call("QueryTags", "cluster", "")
        self.assertIn("before-failover", tags)


class TwoNodeTests(ManagedClusterTestCase):

    NODES = 2

    def test_no_voting(self):
        a, b = self.vc.nodes
        self.vc.kill_node(a)
        code, out = self.gnt(b, "gnt-cluster", "master-failover")
        self.assertNotEqual(code, 0, out)
        self.assertIn("only 1 of 2 master candidates answered", out)
        code, out = self.gnt(b, "gnt-cluster", "master-failover",
                             "--no-voting", "--yes-do-it")
        self.assertEqual(code, 0, out)
        self.assertIn("Not asking the master candidates", out)
        self.assertTrue(master_answers(b))
        self.assertEqual(self.rapi_info()["master"], b.name)
