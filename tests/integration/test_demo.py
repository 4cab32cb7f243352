"""The README's first command: the demo cluster comes up and answers."""

import os
import shutil
import subprocess
import sys
import tempfile

from twisted.trial import unittest

from tests.integration.daemons import PROJECT, random_ips


class DemoTests(unittest.TestCase):

    def test_demo_once_starts_daemons_and_confd_answers(self):
        # Short path: the master's UNIX socket path must fit 108 bytes.
        base = tempfile.mkdtemp(prefix="gnt-demo-", dir="/tmp")
        self.addCleanup(shutil.rmtree, base, True)
        env = dict(os.environ, PYTHONPATH=PROJECT)
        # random addresses: a demo on 127.0.0.1-3 may be running
        ips = random_ips(2)
        out = subprocess.run([sys.executable, "-m", "ganeti.dev.demo", "--base",
                              base, "--once", "--nodes", "2",
                              "--first-address", ips[0]],
                             env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=120)
        text = out.stdout.decode("utf-8", "replace")
        self.assertEqual(out.returncode, 0, text)
        self.assertIn('"answer": "node1.example.com"', text)
        self.assertIn("inst2.example.com", text)
        self.assertIn("(forthcoming)", text)
        # node2 joined through the master (bootstrap noded, OP_NODE_ADD)
        self.assertIn("job 1 (node2.example.com): success", text)
        rows = [line.split() for line in text.splitlines()]
        self.assertIn(["node1.example.com", ips[0], "master"],
                      [row[:3] for row in rows])
        self.assertIn(["node2.example.com", ips[1], "candidate"],
                      [row[:3] for row in rows])
        node_rows = [row for row in rows
                     if row[:1] == ["node2.example.com"] and len(row) > 5]
        self.assertTrue(node_rows, text)      # in gnt-node list
        # Instances were created through jobs and run on their nodes.
        self.assertIn("job 4 (a forthcoming reservation): success", text)
        self.assertIn(["inst2.example.com", "fake", "busybox+default",
                       "node2.example.com", "running", "512M"], rows)
        self.assertEqual(text.count("ganeti-noded      pid"), 2, text)
        self.assertEqual(text.count("\n  job "), 4, text)
        # Every node got the cluster's secrets and configuration (node2 by
        # the join and the replication).
        for node in ("node1.example.com", "node2.example.com"):
            data = os.path.join(base, node, "var", "lib", "ganeti")
            for name in ("config.data", "hmac.key", "server.pem"):
                self.assertTrue(os.path.exists(os.path.join(data, name)),
                                (node, name))
