"""``ganeti-noded`` as real processes of a virtual cluster on 127.0.0.x
(random ports), called through ganeti.rpc."""

import os
import shutil

from twisted.internet import defer, reactor, task, utils
from twisted.trial import unittest

from ganeti import crypto
from ganeti import rpc
from ganeti.dev import vcluster
from ganeti.server import noded

from tests.integration.daemons import PROJECT
from tests.places import free_port
from tests.test_crypto import cluster_cert
from tests.test_noded import kill_fake_instances, spec
from tests.test_os import ETC_OS


class NodedProcessTests(unittest.TestCase):
    """``twist ganeti-noded`` processes on 127.0.0.1 and 127.0.0.2."""

    timeout = 120

    def setUp(self):
        self.base = os.path.abspath(self.mktemp())
        self.vc = vcluster.VirtualCluster(self.base, node_count=2)
        self.vc.create(hypervisors=("fake",))
        self.addCleanup(self.vc.stop_all)
        self.cert = cluster_cert(os.path.join(self.base, "certs"),
                                 self.vc.cluster_name)
        for node in self.vc.nodes:
            target = crypto.server_pem_path(node.paths)
            shutil.copy(self.cert.path, target)
            os.chmod(target, 0o400)
            self.addCleanup(kill_fake_instances, node.root)
        self.ports = {}

    def start(self, node, *extra):
        port = free_port(node.ip)
        self.ports[node.name] = port
        argv = self.vc.twistd_command(
            "ganeti-noded", node, "--port", str(port),
            "--os-search-path", ETC_OS, *extra)
        return self.vc.start("noded@" + node.name, argv)

    def resolver(self, name):
        node = [n for n in self.vc.nodes if n.name == name][0]
        return rpc.NodeAddress(node.ip, self.ports[name])

    async def wait_ready(self, client, names):
        for _ in range(200):
            results = await client.call_many(names, "version", timeout=5)
            if all(r.success for r in results.values()):
                return results
            await task.deferLater(reactor, 0.05, lambda: None)
        self.fail("node daemons did not answer: %s" % results)

    @defer.inlineCallbacks
    def test_daemons_serve_the_cluster(self):
        procs = [self.start(n) for n in self.vc.nodes]
        client = rpc.RpcClient(reactor, None, self.resolver, cert=self.cert)
        self.addCleanup(client.close)
        names = [n.name for n in self.vc.nodes]
        results = yield defer.Deferred.fromCoroutine(
            self.wait_ready(client, names))
        self.assertEqual({r.payload for r in results.values()}, {3000000})
        # the node daemon locked its memory (node daemon availability)
        with open("/proc/%d/status" % procs[0].pid) as f:
            locked = [line for line in f if line.startswith("VmLck:")]
        if os.geteuid() == 0:
            self.assertNotEqual(locked[0].split()[1], "0")
        node2 = names[1]
        result = yield client.call(node2, "instance_start", [spec()])
        self.assertTrue(result.success, result.fail_msg)
        result = yield client.call(node2, "instance_list", [["fake"]])
        self.assertEqual(result.payload, ["inst1.example.com"])
        result = yield client.call(names[0], "instance_list", [["fake"]])
        self.assertEqual(result.payload, [])       # each node its own root
        result = yield client.call(node2, "instance_shutdown",
                                   ["inst1.example.com", "fake", 10])
        self.assertTrue(result.success, result.fail_msg)
        self.assertEqual((yield client.call(
            node2, "instance_list", [["fake"]])).payload, [])
        # a stopped daemon is a failed result, not an exception
        self.vc.stop_all()
        result = yield client.call(node2, "version")
        self.assertFalse(result.success)
        self.assertIn(node2, result.fail_msg)

    @defer.inlineCallbacks
    def test_refuses_to_start_without_certificate(self):
        node = self.vc.nodes[0]
        os.chmod(crypto.server_pem_path(node.paths), 0o600)
        os.unlink(crypto.server_pem_path(node.paths))
        argv = self.vc.twistd_command("ganeti-noded", node, "--port",
                                      str(free_port(node.ip)))
        env = dict(os.environ, PYTHONPATH=PROJECT)
        out, err, code = yield utils.getProcessOutputAndValue(
            argv[0], argv[1:], env=env)
        self.assertNotEqual(code, 0)
        text = (out + err).decode()
        self.assertIn("ganeti-noded cannot start", text)
        self.assertIn("server.pem does not exist", text)

    def test_plugin_is_registered(self):
        from twisted.application.service import IServiceMaker
        from twisted.plugin import getPlugins
        names = [p.tapname for p in getPlugins(IServiceMaker)]
        self.assertIn("ganeti-noded", names)
        options = [p for p in getPlugins(IServiceMaker)
                   if p.tapname == "ganeti-noded"][0].options
        self.assertIs(options, noded.Options)

