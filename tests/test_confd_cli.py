"""Tests of the ganeti-confd-client command (in memory)."""

import io
import json
import os

from twisted.internet import defer
from twisted.trial import unittest

from ganeti.confd import cli
from ganeti.confd import guards
from ganeti.confd import server
from ganeti.confd import snapshot as snapshot_mod
from ganeti.confd import wire

from tests.test_confd_fixtures import (KEY, MASTER, NODE2, T0, FakeUDPReactor,
                                       build_cluster)


class _Config(object):
    def __init__(self, snap):
        self.snapshot = snap


class BuildRequestTests(unittest.TestCase):

    def build(self, *argv):
        return cli.build_request(cli.parse_args(list(argv)))

    def test_every_request_name(self):
        cases = [
            (["ping"], (0, None)),
            (["node-role", "n1"], (1, "n1")),
            (["node-pip-by-ip", "10.0.0.1"], (2, {"1": "10.0.0.1"})),
            (["node-pip-by-ip", "10.0.0.1", "10.0.0.2"],
             (2, {"2": ["10.0.0.1", "10.0.0.2"]})),
            (["node-pip-by-ip", "--link", "br0", "10.0.0.1"],
             (2, {"0": "br0", "1": "10.0.0.1"})),
            (["master"], (3, None)),
            (["master", "name", "ip", "mnode-pip"], (3, {"3": [0, 1, 2]})),
            (["node-pip-list"], (4, None)),
            (["mc-pip-list"], (5, None)),
            (["instance-ips"], (6, None)),
            (["instance-ips", "br0"], (6, "br0")),
            (["node-drbd", "n1"], (7, "n1")),
            (["node-instances", "n1"], (8, "n1")),
            (["instance-disks", "i1"], (9, "i1")),
            (["config-query", "/cluster/cluster_name"],
             (10, "/cluster/cluster_name")),
            (["data-collectors"], (11, None)),
        ]
        for argv, expected in cases:
            self.assertEqual(self.build(*argv), expected, argv)
        self.assertEqual({argv[0] for argv, _ in cases},
                         set(wire.REQUEST_NAMES.values()))

    def test_usage_errors_exit_2(self):
        for argv in ([], ["nope"], ["node-role"], ["node-pip-by-ip"],
                     ["master", "bogus"], ["ping", "extra"]):
            self.patch(cli.sys, "stderr", io.StringIO())
            err = self.assertRaises(SystemExit, cli.parse_args, argv)
            self.assertEqual(err.code, 2, argv)

    def test_options(self):
        opts = cli.parse_args(["--root", "/r", "-a", "192.0.2.1",
                               "--address", "192.0.2.2", "--port", "18140",
                               "--timeout", "2.5", "ping"])
        self.assertEqual((opts.root, opts.address, opts.port, opts.timeout),
                         ("/r", ["192.0.2.1", "192.0.2.2"], 18140, 2.5))


class RunTests(unittest.TestCase):

    def setUp(self):
        self.cluster = build_cluster(self.mktemp())
        self.root = self.cluster.paths.root
        self.reactor = FakeUDPReactor()
        self.reactor.advance(T0)
        self.snap = snapshot_mod.ConfigSnapshot(self.cluster.store)
        processor = server.ConfdProcessor(
            KEY, _Config(self.snap), self.reactor,
            rate_limiter=guards.RateLimiter(self.reactor, 0))
        self.reactor.attach(("127.0.0.1", 18140),
                            server.ConfdProtocol(processor))

    def run_cli(self, *argv, **kwargs):
        address = kwargs.get("address", ["-a", "127.0.0.1"])
        opts = cli.parse_args(["--root", self.root, "--port", "18140",
                               "--timeout", "1"] + address + list(argv))
        out, err = io.StringIO(), io.StringIO()
        d = defer.Deferred.fromCoroutine(cli.run(self.reactor, opts, out,
                                                 err))
        self.reactor.advance(1)
        code = self.successResultOf(d)
        return code, out.getvalue(), err.getvalue()

    def test_prints_answer_and_serial(self):
        code, out, err = self.run_cli("node-role", NODE2)
        self.assertEqual((code, err), (0, ""))
        result = json.loads(out)
        self.assertEqual(result["answer"], wire.NODE_ROLE_CANDIDATE)
        self.assertEqual(result["serial"],
                         self.cluster.store.cluster.serial_no)
        self.assertEqual(result["server"], "127.0.0.1:18140")
        self.assertTrue(result["consistent"])

    def test_every_request_runs(self):
        inst = "inst1.example.com"
        for argv in (["ping"], ["node-role", MASTER],
                     ["node-pip-by-ip", "10.0.0.1"], ["master", "ip"],
                     ["node-pip-list"], ["mc-pip-list"], ["instance-ips"],
                     ["node-drbd", MASTER], ["node-instances", MASTER],
                     ["instance-disks", inst],
                     ["config-query", "/cluster/cluster_name"],
                     ["data-collectors"]):
            code, out, err = self.run_cli(*argv)
            self.assertEqual(code, 0, (argv, err))
            self.assertIn("answer", json.loads(out))

    def test_error_answer_exits_1(self):
        code, out, err = self.run_cli("node-role", "nope")
        self.assertEqual((code, out), (1, ""))
        self.assertIn("Node 'nope' not found", err)
        code, out, err = self.run_cli("node-pip-by-ip", "10.9.9.9")
        self.assertEqual(code, 1)
        self.assertIn("unknown entry", err)

    def test_timeout_exits_1(self):
        code, out, err = self.run_cli("ping", address=["-a", "127.0.0.7"])
        self.assertEqual(code, 1)
        self.assertIn("no reply from 127.0.0.7:18140 within 1 s", err)

    def test_missing_key_exits_1(self):
        os.chmod(self.cluster.paths.hmac_key_file, 0o600)
        os.unlink(self.cluster.paths.hmac_key_file)
        code, out, err = self.run_cli("ping")
        self.assertEqual(code, 1)
        self.assertIn("cannot read the cluster HMAC key", err)

    def test_servers_from_ssconf(self):
        with open(self.cluster.paths.ssconf_file("master_candidates_ips"),
                  "w") as f:
            f.write("127.0.0.1\n")
        code, out, err = self.run_cli("ping", address=[])
        self.assertEqual(code, 0, err)

    def test_no_servers_exits_2(self):
        code, out, err = self.run_cli("ping", address=[])
        self.assertEqual(code, 2)
        self.assertIn("-a/--address", err)

    def test_bad_address_exits_2(self):
        code, out, err = self.run_cli("ping", address=["-a", "localhost"])
        self.assertEqual(code, 2)
        self.assertIn("not an IP address", err)
