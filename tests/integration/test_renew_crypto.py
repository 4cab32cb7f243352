"""gnt-cluster renew-crypto and rename on a 3-node virtual cluster built the
real way (the master made, two nodes joined with their one-time
fingerprints), with confd on two master candidates, ganeti-rapi on the
master and a running fake-hypervisor instance on node2.

While the renewal runs, another client keeps asking the master for live
node data (a query naming its nodes: the master calls every node daemon
for it): no answer may lack a node's data.  Afterwards jobs run on every
node, the instance still runs with the same PID, confd answers signed with
the new key only, ganeti-rapi presents its new certificate and the node
daemons refuse the old cluster certificate.  Every process is stopped by
PID at the end.
"""

import json
import os
import ssl
import subprocess
import sys
import threading
import time

from twisted.trial import unittest

from ganeti import constants
from ganeti import crypto
from ganeti import luxi
from ganeti.backend import rotation
from ganeti.dev.vcluster import VirtualCluster
from ganeti.hypervisor import state

from tests import ganeti_peer
from tests.integration.daemons import (ETC_OS, FINAL, GntCommandsMixin,
                                       PROJECT,
                                       noded_version, port_open, random_ips,
                                       short_tmpdir, wait_for)
from tests.test_noded import kill_fake_instances

INSTANCE = "inst1.example.com"
RS_NORMAL = 0


def read(path):
    with open(path, "rb") as f:
        return f.read()


class LiveQueries(threading.Thread):
    """Asks the master for live data of every node, again and again; what
    went wrong is in ``problems``."""

    def __init__(self, socket_path, names):
        threading.Thread.__init__(self, daemon=True)
        self.socket_path = socket_path
        self.filter = ["|"] + [["=", "name", n] for n in names]
        self.stop = threading.Event()
        self.answers = 0
        self.problems = []

    def run(self):
        with luxi.BlockingClient(self.socket_path, 60) as client:
            while not self.stop.is_set():
                try:
                    answer = client.call("Query", "node", ["name", "mfree"],
                                         self.filter)
                except Exception as err:
                    self.problems.append("query failed: %s" % err)
                    continue
                self.answers += 1
                for (_, name), (status, value) in answer["data"]:
                    if status != RS_NORMAL:
                        self.problems.append("%s: live data status %s"
                                             % (name, status))
                time.sleep(0.02)

    def finish(self):
        self.stop.set()
        self.join(60)
        return self.answers, self.problems


class RenewCryptoTests(GntCommandsMixin, unittest.TestCase):

    timeout = 600
    GNT_TIMEOUT = 240

    def setUp(self):
        base = short_tmpdir(self, "gnt-rc-")
        self.vc = vc = VirtualCluster(os.path.join(base, "vc"), node_count=3)
        for node, ip in zip(vc.nodes, random_ips(3)):
            node.ip = ip
        self.addCleanup(vc.stop_all)
        for node in vc.nodes:
            self.addCleanup(kill_fake_instances, node.root)
        self.master, self.node2, self.node3 = vc.nodes
        self.gnt_root = self.master.root
        vc.create_master(hypervisors=(constants.HT_FAKE,))
        crypto.generate_cluster_certificate(self.rapi_pem(self.master),
                                            vc.cluster_name, key_type="ec")
        os_args = ("--os-search-path", ETC_OS)
        vc.start_master(noded_args=os_args)
        vc.join_nodes(noded_args=os_args)
        self.client = luxi.BlockingClient(self.master.paths.master_socket, 60)
        self.addCleanup(self.client.close)
        wait_for("config.data on node2", lambda: os.path.exists(
            self.node2.paths.config_file))
        for node in (self.master, self.node2):
            vc.start("confd@" + node.name, vc.twistd_command(
                "ganeti-confd", node))
        vc.start("rapi", vc.twistd_command("ganeti-rapi", self.master))
        wait_for("ganeti-rapi", lambda: port_open(
            self.master.ip, constants.DEFAULT_RAPI_PORT))
        for node in (self.master, self.node2):
            wait_for("confd on %s" % node.name,
                     lambda node=node: self.confd(node, "ping") is not None)
        self.run_job({"OP_ID": "OP_INSTANCE_CREATE",
                      "instance_name": INSTANCE, "mode": "create",
                      "disk_template": "diskless", "disks": [],
                      "nics": [{}], "os_type": "busybox+default",
                      "no_install": True, "pnode": self.node2.name,
                      "hypervisor": "fake", "beparams": {"memory": 128},
                      "name_check": False, "ip_check": False})
        # (no installation: not started by the creation)
        self.run_job({"OP_ID": "OP_INSTANCE_STARTUP",
                      "instance_name": INSTANCE})
        self.pid = self.instance_pid()
        self.assertTrue(self.pid)

    # --- helpers -----------------------------------------------------------

    def rapi_pem(self, node):
        return os.path.join(node.paths.data_dir, "rapi.pem")

    def run_job(self, op, expect="success"):
        job = self.client.call("SubmitJob", [op])
        wait_for("job %s" % job, lambda: self.client.call(
            "QueryJobs", [job], ["status"])[0][0] in FINAL, timeout=240)
        status, result, oplog = self.client.call(
            "QueryJobs", [job], ["status", "opresult", "oplog"])[0]
        messages = [entry[3] for entry in oplog[0]] if oplog else []
        self.assertEqual(status, expect, (result, messages))
        return (result[0] if result else None), messages

    def instance_pid(self):
        rt = state.RuntimeDir(self.node2.root, "fake")
        pid = state.read_pid_file(rt.pid_path(INSTANCE))
        if pid is None or not state.process_alive(pid, marker=rt.base):
            return None
        return pid

    def confd(self, node, *request, key_file=None):
        """Ask ``node``'s confd with our confd client (the cluster's key
        from the master's files, or ``key_file``): the parsed answer, or
        None if it did not answer."""
        argv = [sys.executable, "-m", "ganeti.confd.cli", "--root",
                self.master.root, "-a", node.ip, "--timeout", "3",
                "--coverage", "0"]
        if key_file:
            argv += ["--hmac-file", key_file]
        env = dict(os.environ, PYTHONPATH=PROJECT)
        proc = subprocess.run(argv + list(request), env=env,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=60)
        if proc.returncode != 0:
            return None
        return json.loads(proc.stdout.decode())

    def rapi_digest(self):
        pem = ssl.get_server_certificate((self.master.ip,
                                          constants.DEFAULT_RAPI_PORT))
        return crypto.certificate_digest(ssl.PEM_cert_to_DER_cert(pem))

    def with_live_queries(self, *command):
        """Run a gnt command while LiveQueries asks; its output."""
        poller = LiveQueries(self.master.paths.master_socket,
                             [n.name for n in self.vc.nodes])
        poller.start()
        try:
            out = self.ok(*command)
        finally:
            answers, problems = poller.finish()
        self.assertEqual(problems, [])
        self.assertGreater(answers, 5)
        return out

    def keep_old(self, path):
        """A copy of a file as it is now, outside the cluster's roots."""
        copy = os.path.join(self.vc.base, "..", "old-" +
                            os.path.basename(path))
        with open(copy, "wb") as f:
            f.write(read(path))
        return copy

    def assert_everything_works(self):
        _, log = self.run_job({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        self.assertFalse([m for m in log if m.startswith("WARNING")], log)
        out = self.ok("gnt-node", "list", "--no-headers", "-o",
                      "name,mfree")
        self.assertEqual(len(out.splitlines()), 3, out)
        self.assertNotIn("?", out)
        self.assertEqual(self.instance_pid(), self.pid)
        self.run_job({"OP_ID": "OP_INSTANCE_REBOOT",
                      "instance_name": INSTANCE, "reboot_type": "soft",
                      "shutdown_timeout": 10})

    # --- the scenario --------------------------------------------------------

    def test_renew_everything_then_rename(self):
        master = self.master
        old_pem = self.keep_old(crypto.server_pem_path(master.paths))
        old_key = self.keep_old(master.paths.hmac_key_file)
        old_rapi = self.rapi_digest()
        old_cert = crypto.load_cluster_certificate(old_pem)
        serial = json.loads(read(master.paths.config_file))["serial_no"]

        # bad input: refused, nothing changed
        code, out = self.gnt("gnt-cluster", "renew-crypto", "-f")
        self.assertEqual(code, 1, out)
        self.assertIn("Nothing to renew", out)
        cert_only = os.path.join(self.vc.base, "..", "cert-only.pem")
        with open(cert_only, "wb") as f:
            f.write(old_cert.cert_pem)
        code, out = self.gnt("gnt-cluster", "renew-crypto", "-f",
                             "--rapi-certificate", cert_only)
        self.assertEqual(code, 1, out)
        self.assertIn("rapi_certificate: ", out)
        code, out = self.gnt("gnt-cluster", "rename", "-f",
                             "cluster.example.com")
        self.assertEqual(code, 1, out)
        self.assertIn("Neither the name nor the IP address of the cluster"
                      " has changed", out)
        code, out = self.gnt("gnt-cluster", "rename", "-f", "10.1.2.3")
        self.assertEqual(code, 1, out)
        self.assertIn("not an IP address", out)
        for node in self.vc.nodes:
            self.assertEqual(read(crypto.server_pem_path(node.paths)),
                             read(old_pem))
        self.assertEqual(json.loads(read(master.paths.config_file))[
            "serial_no"], serial)

        # the renewal, while queries keep calling every node
        out = self.with_live_queries(
            "gnt-cluster", "renew-crypto", "-f", "--new-cluster-certificate",
            "--new-confd-hmac-key", "--new-rapi-certificate",
            "--new-cluster-domain-secret")
        for text in ("Staging the new cluster certificate",
                     "The master presents the new certificate",
                     "Cluster certificate renewed", "HMAC key renewed",
                     "ganeti-rapi serves the new certificate",
                     "All requested certificates and keys have been"
                     " replaced."):
            self.assertIn(text, out)
        self.assertNotIn("WARNING", out)

        new_pem = read(crypto.server_pem_path(master.paths))
        new_cert = crypto.ClusterCertificate.from_pem(new_pem)
        self.assertNotEqual(new_cert.digest(), old_cert.digest())
        new_key = read(master.paths.hmac_key_file)
        self.assertNotEqual(new_key, read(old_key))
        secret = read(os.path.join(master.paths.data_dir,
                                   "cluster-domain-secret"))
        rapi = read(self.rapi_pem(master))
        for node in self.vc.nodes:
            data = node.paths.data_dir
            self.assertEqual(read(crypto.server_pem_path(node.paths)),
                             new_pem, node.name)
            self.assertEqual(read(node.paths.hmac_key_file), new_key)
            self.assertEqual(read(os.path.join(
                data, "cluster-domain-secret")), secret)
            self.assertEqual(read(self.rapi_pem(node)), rapi)  # candidates
            left = [n for n in os.listdir(data)
                    if n.endswith((rotation.STAGED, rotation.PREVIOUS))]
            self.assertEqual(left, [], node.name)
        # ssconf names the new certificate for the candidates
        sha1 = crypto.certificate_digest(new_cert.certificate, "sha1")
        certs = read(self.node3.paths.ssconf_file(
            "master_candidates_certs")).decode()
        self.assertEqual(set(crypto.parse_candidate_certs(certs).values()),
                         {sha1})

        self.assert_everything_works()
        out = self.ok("gnt-cluster", "verify")
        self.assertNotIn("renew-crypto", out)
        self.assertNotIn("HMAC key", out)
        # confd: the new key gets answers, the old one none
        for node in (master, self.node2):
            self.assertEqual(self.confd(node, "ping")["status"], 0)
            self.assertIsNone(self.confd(node, "ping", key_file=old_key))
        # ganeti-rapi presents the new certificate
        wait_for("the new RAPI certificate", lambda: self.rapi_digest() ==
                 crypto.ClusterCertificate.from_pem(rapi).digest())
        self.assertNotEqual(self.rapi_digest(), old_rapi)
        # the node daemons refuse the old certificate, take the new one
        master_pem = crypto.server_pem_path(master.paths)
        for node in self.vc.nodes:
            refused = noded_version(node.ip, old_pem)
            self.assertFalse(isinstance(refused, bytes) and
                             b"true" in refused, (node.name, refused))
            answer = noded_version(node.ip, master_pem)
            self.assertIsInstance(answer, bytes, (node.name, answer))
            self.assertIn(b"[true, %d]" % constants.PROTOCOL_VERSION, answer)

        # rename: a certificate for the new name, rolled out the same way
        before_rename = read(crypto.server_pem_path(master.paths))
        out = self.with_live_queries("gnt-cluster", "rename", "-f",
                                     "Renamed.Example.com")
        self.assertIn("Cluster renamed from 'cluster.example.com' to"
                      " 'renamed.example.com'", out)
        out = self.ok("gnt-cluster", "info")
        self.assertIn("Cluster name: renamed.example.com", out)
        for node in self.vc.nodes:
            wait_for("ssconf_cluster_name on %s" % node.name,
                     lambda node=node: read(node.paths.ssconf_file(
                         "cluster_name")) == b"renamed.example.com\n")
            cert = crypto.load_cluster_certificate(
                crypto.server_pem_path(node.paths), "renamed.example.com")
            self.assertEqual(cert.cluster_name, "renamed.example.com")
        self.assertNotEqual(read(crypto.server_pem_path(master.paths)),
                            before_rename)
        for node in (master, self.node2):
            wait_for("confd on %s with the new name" % node.name,
                     lambda node=node: (self.confd(
                         node, "config-query", "/cluster/cluster_name")
                         or {}).get("answer") == "renamed.example.com")
        self.assert_everything_works()
        self.assertEqual(self.instance_pid(), self.pid)
        os.kill(self.pid, 0)   # (still there, by its PID)

        # Ganeti 3.0's own gnt-cluster rename speaks to our master
        if ganeti_peer.unavailable_reason() is None:
            code, out = ganeti_peer.run_tool(
                "gnt-cluster", ["rename", "-f", "ganeti.example.com"],
                master.root, master.name)
            self.assertEqual(code, 0, out)
            self.assertIn("Cluster renamed from 'renamed.example.com' to"
                          " 'ganeti.example.com'", out)
            self.assertEqual(crypto.load_cluster_certificate(
                crypto.server_pem_path(self.node3.paths)).cluster_name,
                "ganeti.example.com")
            code, out = ganeti_peer.run_tool(
                "gnt-cluster", ["rename", "-f", "ganeti.example.com"],
                master.root, master.name)
            self.assertNotEqual(code, 0, out)
            self.assertIn("Neither the name nor the IP address of the"
                          " cluster has changed", out)
            self.assert_everything_works()

        # a node that was offline during a renewal comes back the way the
        # warning says
        node3 = self.node3
        self.ok("gnt-node", "modify", "--offline", "yes", "--auto-promote",
                node3.name)
        out = self.ok("gnt-cluster", "renew-crypto", "-f",
                      "--new-cluster-certificate")
        self.assertIn("WARNING: Node %s could not be updated: cluster"
                      " certificate (offline)" % node3.name, out)
        self.assertIn("gnt-node add --readd --join-fingerprint", out)
        current = read(crypto.server_pem_path(master.paths))
        self.assertNotEqual(read(crypto.server_pem_path(node3.paths)),
                            current)
        for description, proc in self.vc.processes:
            if description == "noded@" + node3.name:
                proc.terminate()
                proc.wait(30)
        os.unlink(crypto.server_pem_path(node3.paths))
        fingerprint = self.vc.start_bootstrap_noded(
            node3, ("--os-search-path", ETC_OS))
        self.ok("gnt-node", "add", "--readd", "--join-fingerprint",
                fingerprint, node3.name)
        self.assertEqual(read(crypto.server_pem_path(node3.paths)), current)
        self.assertEqual(read(node3.paths.hmac_key_file),
                         read(master.paths.hmac_key_file))
        self.assert_everything_works()
