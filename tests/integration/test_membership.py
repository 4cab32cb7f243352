"""A 3-node virtual cluster built the real way, through the gnt-* commands.

The master is made by ``gnt-cluster init`` (noded, masterd, confd, rapi);
two more nodes run ``ganeti-noded --bootstrap`` under their own roots on
their own random 127.x.y.z addresses (noded's port is fixed), and join with
``gnt-node add --join-fingerprint`` using the fingerprint each logged.
Every daemon is stopped by PID (its pidfile) when the test ends.
"""

import json
import os
import re
import subprocess
import sys

from twisted.trial import unittest

from ganeti import config
from ganeti import constants
from ganeti import crypto
from ganeti import daemon_util
from ganeti import pathutils
from ganeti.dev.vcluster import VirtualCluster

from tests.integration.daemons import (GntCommandsMixin, command_env,
                                       noded_version, port_open, random_ips,
                                       short_tmpdir, wait_for)

CLUSTER = "cluster.example.com"
NAMES = ["node1.example.com", "node2.example.com", "node3.example.com"]
FP_RE = re.compile(r"One-time certificate fingerprint: (SHA256:[0-9A-F:]{95})")


def serial_of(paths):
    try:
        with open(paths.config_file) as f:
            return json.load(f)["serial_no"]
    except (OSError, ValueError):
        return None


def ssconf(paths, key):
    try:
        with open(paths.ssconf_file(key)) as f:
            return f.read().splitlines()
    except OSError:
        return None


class MembershipTests(GntCommandsMixin, unittest.TestCase):

    timeout = 300
    GNT_TIMEOUT = 180

    def setUp(self):
        self.base = short_tmpdir(self, "gnt-m-")
        self.ips = random_ips(3)
        self.paths = [pathutils.Paths(os.path.join(self.base, n))
                      for n in NAMES]
        self.gnt_root = self.paths[0].root
        for paths in self.paths:
            paths.ensure_dirs()
            # registered first: daemons are stopped whatever happens
            self.addCleanup(daemon_util.stop_all, paths)

    # --- helpers ---------------------------------------------------------

    def gnt_on_terminal(self, answer, program, *args):
        """Run a command with a terminal as its stdin and output, typing
        ``answer``; (code, output)."""
        import pty
        master, slave = pty.openpty()
        os.write(master, answer.encode())
        module = "ganeti.cli." + program.replace("-", "_")
        proc = subprocess.Popen([sys.executable, "-m", module] + list(args),
                                env=command_env(self.gnt_root),
                                stdin=slave, stdout=slave, stderr=slave,
                                cwd="/")
        os.close(slave)
        output = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:   # EIO: the command closed the terminal
                break
            if not chunk:
                break
            output += chunk
        os.close(master)
        return proc.wait(180), output.decode("utf-8", "replace")

    def bootstrap(self, node):
        """Start node's noded in bootstrap mode; the fingerprint it logs."""
        paths = self.paths[node]
        log = os.path.join(paths.log_dir, "ganeti-noded.log")
        seen = set()
        if os.path.exists(log):
            with open(log) as f:
                seen = set(FP_RE.findall(f.read()))
        daemon_util.start_daemon(paths, daemon_util.NODED, self.ips[node],
                                 ["--bootstrap", "--no-mlock"])
        return self.new_fingerprint(node, seen)

    def new_fingerprint(self, node, seen=()):
        paths = self.paths[node]
        log = os.path.join(paths.log_dir, "ganeti-noded.log")

        def logged():
            daemon_util.check_alive(paths, daemon_util.NODED)
            try:
                with open(log) as f:
                    found = [fp for fp in FP_RE.findall(f.read())
                             if fp not in seen]
            except OSError:
                return None
            if not found or not port_open(self.ips[node],
                                          constants.DEFAULT_NODED_PORT):
                return None
            return found[-1]
        return wait_for("the fingerprint of %s" % NAMES[node], logged)

    def master_serial(self):
        return serial_of(self.paths[0])

    def wait_replicated(self, node, config_too=True):
        def current():
            master = self.master_serial()
            if config_too:
                return serial_of(self.paths[node]) == master
            return ssconf(self.paths[node], "node_list") == \
                ssconf(self.paths[0], "node_list")
        wait_for("replication to %s" % NAMES[node], current, timeout=30)

    def node_list(self):
        out = self.ok("gnt-node", "list", "--no-headers", "-o",
                      "name,master_candidate,offline,group")
        return [line.split() for line in out.splitlines()]

    # --- the scenario ------------------------------------------------------

    def test_three_node_cluster(self):
        out = self.ok("gnt-cluster", "init", "--node-name", NAMES[0],
                      "--node-ip", self.ips[0], "--enabled-hypervisors",
                      "fake", "--enabled-disk-templates", "file,diskless",
                      "--candidate-pool-size", "2", CLUSTER)
        self.assertIn("Initialised cluster %s" % CLUSTER, out)
        fp2 = self.bootstrap(1)
        fp3 = self.bootstrap(2)
        self.assertNotEqual(fp2, fp3)
        # the fingerprint file says the same as the log
        with open(os.path.join(self.paths[1].run_dir,
                               "ganeti-noded.fingerprint")) as f:
            self.assertEqual(f.read().strip(), fp2)

        # a wrong fingerprint is refused and changes nothing
        serial = self.master_serial()
        code, out = self.gnt("gnt-node", "add", "--primary-ip", self.ips[2],
                             "--join-fingerprint", fp2, NAMES[2])
        self.assertEqual(code, 1, out)
        self.assertIn("presents the certificate %s, not %s" % (fp3, fp2),
                      out)
        self.assertEqual(self.master_serial(), serial)
        self.assertFalse(os.path.exists(crypto.server_pem_path(
            self.paths[2])))
        # without a fingerprint (and no terminal): told what to do
        code, out = self.gnt("gnt-node", "add", "--primary-ip", self.ips[2],
                             NAMES[2])
        self.assertEqual(code, 1, out)
        self.assertIn("does not hold this cluster's certificate (it presents"
                      " %s)" % fp3, out)
        self.assertIn("--join-fingerprint", out)

        out = self.ok("gnt-node", "add", "--primary-ip", self.ips[1],
                      "--join-fingerprint", fp2, NAMES[1])
        self.assertIn("Node %s is a master candidate" % NAMES[1], out)
        self.ok("gnt-node", "add", "--primary-ip", self.ips[2],
                "--join-fingerprint", fp3.lower().replace(":", "")
                .replace("sha256", "SHA256:"), NAMES[2])
        self.assertEqual(self.node_list(), [
            [NAMES[0], "Y", "N", "default"], [NAMES[1], "Y", "N", "default"],
            [NAMES[2], "N", "N", "default"]])
        # the nodes hold the cluster's files, replicated by the master
        for node in (1, 2):
            paths = self.paths[node]
            pem = crypto.server_pem_path(paths)
            self.assertEqual(os.stat(pem).st_mode & 0o777, 0o400)
            with open(pem, "rb") as f, open(crypto.server_pem_path(
                    self.paths[0]), "rb") as g:
                self.assertEqual(crypto.ClusterCertificate.from_pem(
                    f.read()).digest(), crypto.ClusterCertificate.from_pem(
                        g.read()).digest())
            self.assertEqual(os.stat(paths.hmac_key_file).st_mode & 0o777,
                             0o400)
            self.assertFalse(os.path.exists(os.path.join(
                paths.run_dir, "ganeti-noded.fingerprint")))
        self.wait_replicated(1)
        self.wait_replicated(2, config_too=False)
        # node3 is not a candidate: ssconf, no config.data
        self.assertIsNone(serial_of(self.paths[2]))
        self.assertEqual(ssconf(self.paths[2], "master_candidates"),
                         NAMES[:2])
        self.assertEqual(ssconf(self.paths[1], "node_list"), NAMES)
        # the replicated config.data loads, with the same nodes
        store = config.ConfigStore.load(self.paths[1].config_file)
        self.assertEqual(sorted(n.name for n in store.nodes.values()), NAMES)

        # a change replicates
        self.ok("gnt-cluster", "add-tags", "replicated")
        wait_for("the tag on node2", lambda: ssconf(
            self.paths[1], "cluster_tags") == ["replicated"])
        wait_for("the tag on node3", lambda: ssconf(
            self.paths[2], "cluster_tags") == ["replicated"])
        self.wait_replicated(1)

        # a joined node daemon serves the cluster certificate only
        master_pem = crypto.server_pem_path(self.paths[0])
        answer = noded_version(self.ips[1], master_pem)
        self.assertIsInstance(answer, bytes, answer)
        self.assertIn(b"[true, 3000000]", answer)
        self.assertNotIsInstance(noded_version(self.ips[1]), bytes)
        other = crypto.generate_cluster_certificate(
            os.path.join(self.base, "other", "server.pem"),
            "other.example.com", key_type="ec")
        refused = noded_version(self.ips[1], other.path)
        self.assertFalse(isinstance(refused, bytes) and b"true" in refused,
                         refused)

        # offline on a candidate: refused unless another can be promoted
        code, out = self.gnt("gnt-node", "modify", "--offline", "yes",
                             NAMES[1])
        self.assertEqual(code, 1, out)
        self.assertIn("--auto-promote", out)
        out = self.ok("gnt-node", "modify", "--offline", "yes",
                      "--auto-promote", NAMES[1])
        self.assertIn("offline -> True", out)
        self.assertEqual(self.node_list(), [
            [NAMES[0], "Y", "N", "default"], [NAMES[1], "N", "Y", "default"],
            [NAMES[2], "Y", "N", "default"]])
        self.wait_replicated(2)       # node3 now gets config.data

        # node groups
        self.ok("gnt-group", "add", "rack2")
        self.ok("gnt-group", "assign-nodes", "rack2", NAMES[2])
        out = self.ok("gnt-group", "list", "--no-headers", "-o",
                      "name,node_cnt,node_list")
        self.assertEqual([line.split() for line in out.splitlines()],
                         [["default", "2", ",".join(NAMES[:2])],
                          ["rack2", "1", NAMES[2]]])
        self.assertEqual(self.node_list()[2][3], "rack2")
        wait_for("the groups on node3", lambda: sorted(
            line.split()[1] for line in ssconf(self.paths[2], "nodegroups")
            or []) == ["default", "rack2"])
        self.ok("gnt-group", "rename", "rack2", "rack9")
        self.assertEqual(self.node_list()[2][3], "rack9")
        code, out = self.gnt("gnt-group", "remove", "rack9")
        self.assertEqual(code, 1, out)
        self.assertIn("not empty", out)

        # redist-conf ships the extra files listed by the admin
        extra = os.path.join(self.paths[0].root, "etc/ganeti/extra.conf")
        os.makedirs(os.path.dirname(extra), exist_ok=True)
        with open(extra, "w") as f:
            f.write("setting=1\n")
        with open(os.path.join(self.paths[0].data_dir, "redist-extra-files"),
                  "w") as f:
            f.write("/etc/ganeti/extra.conf\n")
        self.ok("gnt-cluster", "redist-conf")
        with open(os.path.join(self.paths[2].root,
                               "etc/ganeti/extra.conf")) as f:
            self.assertEqual(f.read(), "setting=1\n")
        self.assertFalse(os.path.exists(os.path.join(
            self.paths[1].root, "etc/ganeti/extra.conf")))  # offline

        # removing a node: it leaves (files gone, back in bootstrap mode)
        out = self.ok("gnt-node", "remove", NAMES[2])
        self.assertEqual([row[0] for row in self.node_list()], NAMES[:2])
        fp3b = self.new_fingerprint(2, {fp3})
        self.assertFalse(os.path.exists(crypto.server_pem_path(
            self.paths[2])))
        self.assertIsNone(ssconf(self.paths[2], "node_list"))
        self.assertIsNone(serial_of(self.paths[2]))
        # ... and can join again with its new one-time certificate, which
        # the admin confirms on a terminal this time
        code, out = self.gnt_on_terminal("y\n", "gnt-node", "add",
                                         "--primary-ip", self.ips[2],
                                         NAMES[2])
        self.assertEqual(code, 0, out)
        self.assertIn("presents the certificate\r\n  %s\r\n" % fp3b, out)
        self.wait_replicated(2)
        self.assertEqual(self.node_list()[2][:2], [NAMES[2], "Y"])

        # node2 comes back online: it answers, gets the newest files
        self.ok("gnt-node", "modify", "--offline", "no", NAMES[1])
        self.wait_replicated(1, config_too=False)
        self.assertEqual(ssconf(self.paths[1], "node_list"), NAMES)


class VirtualClusterJoinTests(unittest.TestCase):
    """VirtualCluster.join_nodes: what the demo and other tests use."""

    timeout = 180

    def test_join_nodes(self):
        base = short_tmpdir(self, "gnt-v-")
        vc = VirtualCluster(os.path.join(base, "vc"), node_count=3)
        for node, ip in zip(vc.nodes, random_ips(3)):
            node.ip = ip
        self.addCleanup(vc.stop_all)
        vc.create_master()
        vc.start_master()
        jobs = vc.join_nodes()
        self.assertEqual(sorted(jobs), [n.name for n in vc.nodes[1:]])
        master = config.ConfigStore.load(vc.master.paths.config_file)
        self.assertEqual(len(master.nodes), 3)
        for node in vc.nodes[1:]:
            wait_for("config on %s" % node.name, lambda node=node: serial_of(
                node.paths) == serial_of(vc.master.paths), timeout=30)
            self.assertEqual(ssconf(node.paths, "node_list"),
                             [n.name for n in vc.nodes])
