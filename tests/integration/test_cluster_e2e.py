"""End to end: a 3-node cluster over mutual TLS, run like an admin.

One scenario through real processes and our gnt-* commands:

* the master is made the way ``gnt-cluster init`` makes it
  (``VirtualCluster.create_master`` / ``start_master``); two more machines
  run ``ganeti-noded --bootstrap`` and join with ``gnt-node add
  --join-fingerprint`` (the fingerprint each logged);
* three sharedfile instances (fake hypervisor, busybox OS) are made with
  ``gnt-instance add``, one per node;
* ``gnt-instance migrate`` moves one live; ``gnt-cluster verify`` is clean,
  then warns about a file nobody owns in the shared storage directory and
  reports a master candidate whose config.data is behind (until
  ``gnt-cluster redist-conf``);
* a joined node daemon refuses TLS clients without the cluster certificate
  (no client certificate, another cluster's);
* node2 dies: verify reports it unreachable; ``gnt-node modify --offline
  yes`` and ``gnt-instance failover`` bring its instances up elsewhere;
* node3 is drained and ``gnt-node evacuate``\\ d: its primaries move.

Every process (daemons and fake guests) is stopped by PID at the end,
whatever happened.  Nodes live on random 127.x.y.z addresses (noded's port
is fixed) under a short /tmp directory (UNIX socket paths < 108 bytes).
"""

import json
import os
import re
import signal
import sys
import time

from twisted.trial import unittest

from ganeti import constants
from ganeti import crypto
from ganeti.dev.vcluster import VirtualCluster

from tests.integration.daemons import (ETC_OS, GntCommandsMixin,
                                       noded_version, random_ips,
                                       short_tmpdir, wait_for)

#: a finding line of gnt-cluster verify (after the job log's timestamp)
FINDING_RE = re.compile(r"^.*?  (- (?:ERROR|WARNING): .*)$", re.M)
INSTANCES = ["web1.example.com", "web2.example.com", "web3.example.com"]


def fake_guest_pids(node):
    """{instance name: pid} of the live fake guests under a node's root."""
    from ganeti.hypervisor import state
    rt = state.RuntimeDir(node.root, constants.HT_FAKE)
    result = {}
    try:
        names = os.listdir(rt.pid_dir)
    except FileNotFoundError:
        return result
    for entry in names:
        if not entry.endswith(".pid"):
            continue
        pid = state.read_pid_file(os.path.join(rt.pid_dir, entry))
        if pid is not None and state.process_alive(pid, marker=rt.base):
            result[entry[:-len(".pid")]] = pid
    return result


class ClusterEndToEndTest(GntCommandsMixin, unittest.TestCase):

    timeout = 240

    def setUp(self):
        self.started = time.monotonic()
        self.base = short_tmpdir(self, "gnt-e-")
        self.vc = VirtualCluster(os.path.join(self.base, "vc"), node_count=3)
        for node, ip in zip(self.vc.nodes, random_ips(3)):
            node.ip = ip
        self.gnt_root = self.vc.master.root
        # registered before anything starts: every daemon and every guest
        # goes, by PID, whatever happens
        self.addCleanup(self.vc.stop_all)

    # --- helpers -----------------------------------------------------------

    def table(self, program, fields, *args):
        out = self.ok(program, "list", "--no-headers", "--separator", "|",
                      "-o", fields, *args)
        return [line.split("|") for line in out.splitlines() if line]

    def instances(self):
        """{name: (primary node, status)} as gnt-instance list shows."""
        return {row[0]: (row[1], row[2])
                for row in self.table("gnt-instance", "name,pnode,status")}

    def nodes(self):
        """{name: (master candidate, drained, offline, primaries)}."""
        return {row[0]: tuple(row[1:]) for row in self.table(
            "gnt-node", "name,master_candidate,drained,offline,pinst_cnt")}

    def verify(self):
        """(exit code, the findings) of gnt-cluster verify."""
        code, out = self.gnt("gnt-cluster", "verify")
        return code, out, [match.group(1) for match in FINDING_RE.finditer(
            out)]

    def noded_process(self, node):
        for description, proc in self.vc.processes:
            if description == "noded@" + node.name:
                return proc
        raise AssertionError("no node daemon for %s" % node.name)

    # --- the scenario -------------------------------------------------------

    def test_three_node_cluster(self):
        vc = self.vc
        n1, n2, n3 = vc.nodes
        shared = os.path.join(vc.base, "shared")
        noded_args = ("--os-search-path", ETC_OS,
                      "--file-storage-dir", shared)
        store = vc.create_master()
        self.assertEqual(store.cluster.shared_file_storage_dir, shared)
        os.makedirs(shared)
        vc.start_master(noded_args)

        # --- the other machines join with the fingerprint they logged
        for node in (n2, n3):
            fingerprint = vc.start_bootstrap_noded(node, noded_args)
            self.assertTrue(fingerprint.startswith("SHA256:"), fingerprint)
            out = self.ok("gnt-node", "add", "--primary-ip", node.ip,
                          "--join-fingerprint", fingerprint, node.name)
        self.assertEqual(self.nodes(), {
            n.name: ("Y", "N", "N", "0") for n in vc.nodes})
        for node in (n2, n3):
            with open(crypto.server_pem_path(node.paths), "rb") as f, \
                    open(crypto.server_pem_path(n1.paths), "rb") as g:
                self.assertEqual(f.read(), g.read())

        # --- instances on shared storage, one per node
        for name, node in zip(INSTANCES, vc.nodes):
            self.ok("gnt-instance", "add", "-t", "sharedfile", "--disk",
                    "0:size=1G", "-o", "busybox+default", "-B",
                    "memory=128", "--no-name-check", "--no-ip-check", "-n",
                    node.name, name)
        self.assertEqual(self.instances(), {
            name: (node.name, "running")
            for name, node in zip(INSTANCES, vc.nodes)})
        for name, node in zip(INSTANCES, vc.nodes):
            self.assertIn(name, fake_guest_pids(node))
        self.assertEqual(len(os.listdir(shared)), 3)

        # --- live migration: web1 node1 -> node2
        out = self.ok("gnt-instance", "migrate", "-f", "-n", n2.name,
                      INSTANCES[0])
        self.assertIn("memory transfer complete", out)
        self.assertEqual(self.instances()[INSTANCES[0]], (n2.name, "running"))
        wait_for("web1 to leave node1",
                 lambda: INSTANCES[0] not in fake_guest_pids(n1))
        self.assertIn(INSTANCES[0], fake_guest_pids(n2))

        # --- a healthy cluster verifies clean ...
        code, out, findings = self.verify()
        self.assertEqual((code, findings), (0, []), out)
        # ... a file nobody owns in the shared directory is a warning
        stray = os.path.join(shared, "stray.img")
        with open(stray, "wb") as f:
            f.write(b"\0" * 4096)
        code, out, findings = self.verify()
        self.assertEqual(code, 0, out)
        self.assertEqual(len(findings), 1, out)
        self.assertTrue(findings[0].startswith("- WARNING: node "), out)
        self.assertIn("volume %s is unknown" % stray, findings[0])
        os.unlink(stray)
        # ... and a master candidate's copy of config.data that is behind
        # (changed behind the master's back) is an error naming both serials
        with open(n3.paths.config_file) as f:
            data = json.load(f)
        master_serial = data["serial_no"]
        data["serial_no"] = master_serial - 1
        with open(n3.paths.config_file, "w") as f:
            json.dump(data, f)
        code, out, findings = self.verify()
        self.assertEqual(code, 1, out)
        self.assertEqual(findings, [
            "- ERROR: node %s: configuration serial of the node's copy is %d,"
            " the master's is %d" % (n3.name, master_serial - 1,
                                     master_serial)], out)
        self.ok("gnt-cluster", "redist-conf")
        code, out, findings = self.verify()
        self.assertEqual((code, findings), (0, []), out)

        # --- a joined node daemon serves the cluster certificate only
        master_pem = crypto.server_pem_path(n1.paths)
        answer = noded_version(n3.ip, master_pem)
        self.assertIsInstance(answer, bytes, answer)
        self.assertIn(b"200 OK", answer.split(b"\r\n", 1)[0])
        # no client certificate: the handshake fails (or the daemon hangs
        # up without an answer)
        refused = noded_version(n3.ip)
        self.assertTrue(not isinstance(refused, bytes) or refused == b"",
                        refused)
        other = crypto.generate_cluster_certificate(
            os.path.join(self.base, "other", "server.pem"),
            "other.example.com")
        refused = noded_version(n3.ip, other.path)
        self.assertFalse(isinstance(refused, bytes) and b"200 OK" in refused,
                         refused)

        # --- node2 dies (daemon and guests): verify says so ...
        proc = self.noded_process(n2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        for pid in fake_guest_pids(n2).values():
            os.kill(pid, signal.SIGKILL)
        wait_for("node2's guests to die", lambda: not fake_guest_pids(n2))
        code, out, findings = self.verify()
        self.assertEqual(code, 1, out)
        self.assertTrue(any(line.startswith("- ERROR: node %s: while"
                                            " contacting node" % n2.name)
                            for line in findings), out)
        # ... the admin marks it offline and fails its instances over
        out = self.ok("gnt-node", "modify", "--offline", "yes",
                      "--auto-promote", n2.name)
        self.assertIn("offline -> True", out)
        self.assertEqual(self.nodes()[n2.name][2], "Y")
        moved = sorted(INSTANCES[:2])
        for name in moved:
            self.ok("gnt-instance", "failover", "-f", name)
        now = self.instances()
        for name in moved:
            pnode, status = now[name]
            self.assertIn(pnode, (n1.name, n3.name), name)
            self.assertEqual(status, "running", name)
            node = n1 if pnode == n1.name else n3
            self.assertIn(name, fake_guest_pids(node))
        self.assertEqual(self.nodes()[n2.name][3], "0")

        # --- node3 is drained and evacuated: its primaries go to node1
        on_n3 = sorted(name for name, (pnode, _) in now.items()
                       if pnode == n3.name)
        self.assertIn(INSTANCES[2], on_n3)
        self.ok("gnt-node", "modify", "--drained", "yes", "--auto-promote",
                n3.name)
        self.assertEqual(self.nodes()[n3.name][1], "Y")
        out = self.ok("gnt-node", "evacuate", "-f", n3.name)
        self.assertIn("Evacuating instances from node '%s'" % n3.name, out)
        self.assertEqual(self.instances(), {
            name: (n1.name, "running") for name in INSTANCES})
        self.assertEqual(self.nodes()[n3.name][3], "0")
        wait_for("node3's guests to leave", lambda: not fake_guest_pids(n3))
        self.assertEqual(sorted(fake_guest_pids(n1)), INSTANCES)

        # the cluster is healthy again (node2 offline, skipped)
        code, out, findings = self.verify()
        self.assertEqual((code, findings), (0, []), out)
        self.log_duration()

    def log_duration(self):
        sys.stderr.write("\n[e2e scenario: %.1f s] "
                         % (time.monotonic() - self.started))
