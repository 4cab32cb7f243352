"""The README's first command: the demo cluster comes up and answers."""

import base64
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import urllib.request

from twisted.trial import unittest

from tests.integration.daemons import PROJECT, random_ips, wait_for
from tests.integration.demo_process import RunningDemo, processes_below


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
        # a monitoring daemon on every node, and where to ask it
        self.assertEqual(text.count("ganeti-mond       pid"), 2, text)
        self.assertEqual(text.count("ganeti-maintd     pid"), 1, text)
        self.assertIn("curl http://%s:1816/1/status" % ips[0], text)
        for ip in ips:
            self.assertIn("curl http://%s:1815/1/report/all" % ip, text)
            # Prometheus' scrapes: mond on every node, confd on candidates
            self.assertIn("curl http://%s:1815/metrics" % ip, text)
            self.assertIn("curl http://%s:1817/metrics" % ip, text)
        self.assertIn(":5080/metrics", text)
        self.assertEqual(text.count("\n  job "), 4, text)
        # Every node got the cluster's secrets and configuration (node2 by
        # the join and the replication).
        for node in ("node1.example.com", "node2.example.com"):
            data = os.path.join(base, node, "var", "lib", "ganeti")
            for name in ("config.data", "hmac.key", "server.pem"):
                self.assertTrue(os.path.exists(os.path.join(data, name)),
                                (node, name))

    def test_running_demo_shows_where_to_look_and_ctrl_c_stops_it_all(self):
        env = dict(os.environ)
        env.pop("PYTHONUNBUFFERED", None)   # as in a user's shell
        # its output goes to a file, yet "where to look" is there at once
        running = RunningDemo(self, nodes=1, env=env, timeout=120)
        demo, base, text = running.process, running.base, running.text
        env = dict(env, PYTHONPATH=PROJECT)
        self.assertIn("Where to look:", text())
        # what it says to look at answers: the node's monitoring daemon
        url = re.search(r"curl (http://\S+:1815/1/report/all)",
                        text()).group(1)
        def report_names():
            with urllib.request.urlopen(url, timeout=30) as r:
                return [rep["name"] for rep in json.loads(r.read())]
        # the diagnose collector is active once mond has its settings from
        # confd, which may start after it: wait for that, not for ever
        wait_for("mond's diagnose report",
                 lambda: "diagnose" in report_names(), timeout=60)
        self.assertIn("cpu-avg-load", report_names())
        # and the maintenance daemon on the master, voted in by confd
        url = re.search(r"curl (http://\S+:1816/1/status)",
                        text()).group(1)
        with urllib.request.urlopen(url, timeout=30) as r:
            self.assertEqual(json.loads(r.read()), [])
        # the remote API user it prints may write
        user, password, url = re.search(
            r"curl -k -u (\w+):(\S+) -X PUT '(https://\S+)'",
            text()).groups()
        request = urllib.request.Request(url, method="PUT", headers={
            "Authorization": "Basic " + base64.b64encode(
                ("%s:%s" % (user, password)).encode()).decode()})
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE    # the demo's own certificate
        with urllib.request.urlopen(request, timeout=30,
                                    context=insecure) as r:
            self.assertIsInstance(json.loads(r.read()), int)    # a job id
        # a fresh demo cluster verifies clean
        root = re.search(r"GANETI_ROOTDIR=(\S+)", text()).group(1)
        verify = subprocess.run(
            [sys.executable, "-m", "ganeti.cli.gnt_cluster", "--root", root,
             "verify"], env=dict(env, GANETI_ROOTDIR=root),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        output = verify.stdout.decode("utf-8", "replace")
        self.assertEqual(verify.returncode, 0, output)
        self.assertNotIn("ERROR", output)
        ours = set(processes_below(base)) - {demo.pid}
        self.assertTrue(ours)       # its daemons and guest
        # an impatient user presses Ctrl-C again while the demo stops its
        # daemons: everything still stops
        demo.send_signal(signal.SIGINT)
        wait_for("the stop under way",
                 lambda: not ours <= set(processes_below(base)), timeout=30)
        demo.send_signal(signal.SIGINT)
        self.assertEqual(demo.wait(60), 0, text())
        wait_for("the demo's processes gone",
                 lambda: not processes_below(base), timeout=30)

