"""Replication of config.data and ssconf (coalescing, order, failures),
fingerprints, and the pinned by-address client against a real node daemon
in bootstrap mode."""

import json
import os

from twisted.internet import defer, reactor, task, threads
from twisted.trial import unittest

from ganeti import crypto
from ganeti import errors
from ganeti import objects
from ganeti import pathutils
from ganeti import replication
from ganeti import rpc

from tests.fakes import ClockTestCase, FakeRpc
from tests.test_config import make_store
from tests.test_crypto import cluster_cert

NODE2 = "node2.example.com"
NODE3 = "node3.example.com"
NODE4 = "node4.example.com"


class ReplicationRpc(FakeRpc):
    """Nodes that take every file and ssconf upload."""

    def __init__(self):
        FakeRpc.__init__(self, answers={"upload_file": True,
                                        "write_ssconf_files": True})

    def serials(self, node):
        """The serial numbers of the config.data uploads to ``node``."""
        return [json.loads(replication.decode_data(c.args[1]))["serial_no"]
                for c in self.calls
                if c.node == node and c.procedure == "upload_file"]


class ReplicatorTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.cfg = make_store(self)
        for name, ip in ((NODE2, "127.0.0.2"), (NODE3, "127.0.0.3"),
                         (NODE4, "127.0.0.4")):
            self.cfg.add_node(objects.Node(name=name, primary_ip=ip,
                                           master_candidate=False))
        self.cfg.set_node_params(NODE2, master_candidate=True)
        self.cfg.set_node_params(NODE4, offline=True)
        self.rpc = ReplicationRpc()
        self.rep = replication.Replicator(self.cfg, self.rpc, self.clock)
        self.cfg.write_listeners.append(self.rep.config_written)

    def change(self, tag):
        self.cfg.add_tags("cluster", None, [tag])

    def test_who_gets_what(self):
        self.change("a")
        self.clock.advance(0)
        nodes = sorted({c[0] for c in self.rpc.calls})
        # not the master, not the offline node
        self.assertEqual(nodes, [NODE2, NODE3])
        self.assertEqual([c[1] for c in self.rpc.calls if c[0] == NODE2],
                         ["upload_file", "write_ssconf_files"])
        self.assertEqual([c[1] for c in self.rpc.calls if c[0] == NODE3],
                         ["write_ssconf_files"])
        self.assertEqual(self.rpc.serials(NODE2), [self.cfg.serial_no])
        self.assertEqual(self.rep.status[self.cfg.get_node(NODE3).uuid]
                         .delivered, self.cfg.serial_no)
        self.assertTrue(self.rep.status[self.cfg.get_node(NODE4).uuid]
                        .offline)
        self.assertEqual(self.rep.missed(), {})

    def test_burst_is_coalesced(self):
        for tag in "abcde":
            self.change(tag)
        self.assertEqual(self.rpc.calls, [])      # nothing until the turn
        self.clock.advance(0)
        self.assertEqual(self.rep.snapshots, 1)
        self.assertEqual(self.rpc.serials(NODE2), [self.cfg.serial_no])

    def test_never_older_after_newer(self):
        self.rpc.hold(NODE2)
        self.change("a")
        self.clock.advance(0)
        first = self.cfg.serial_no
        # three more snapshots while the first send is in flight
        for tag in "bcd":
            self.change(tag)
            self.clock.advance(0)
        self.assertEqual(self.rep.snapshots, 4)
        self.assertEqual(self.rpc.serials(NODE2), [first])
        # node3 was not held: it had every one
        self.assertEqual(len([c for c in self.rpc.calls if c[0] == NODE3]),
                         4)
        self.rpc.release(NODE2)   # the config upload of the first
        self.assertEqual(self.rpc.serials(NODE2), [first])
        self.rpc.release(NODE2)   # its ssconf: only the newest follows
        self.assertEqual(self.rpc.serials(NODE2), [first, self.cfg.serial_no])
        self.rpc.release(NODE2, keep=False)
        serials = self.rpc.serials(NODE2)
        self.assertEqual(serials, sorted(serials))
        self.assertEqual(self.rep.status[self.cfg.get_node(NODE2).uuid]
                         .delivered, self.cfg.serial_no)

    def test_flush_waits_for_every_node(self):
        self.rpc.hold(NODE3)
        self.change("a")
        d = self.rep.flush()
        self.assertNoResult(d)
        self.rpc.release(NODE3, keep=False)
        self.successResultOf(d)
        # nothing new: a flush sends nothing; force sends again
        calls = len(self.rpc.calls)
        self.successResultOf(self.rep.flush())
        self.assertEqual(len(self.rpc.calls), calls)
        self.successResultOf(self.rep.flush(force=True))
        self.assertEqual(len(self.rpc.calls), calls + 3)

    def test_failure_is_reported_and_healed(self):
        self.rpc.fail[NODE3] = "connection refused"
        self.change("a")
        self.successResultOf(self.rep.flush())
        serial = self.cfg.serial_no
        self.assertEqual(self.rep.missed(),
                         {NODE3: (None, "node %s: connection refused"
                                  % NODE3)})
        status = self.rep.status[self.cfg.get_node(NODE3).uuid]
        self.assertEqual(status.failed, serial)
        # the node comes back: the next change brings the newest state
        del self.rpc.fail[NODE3]
        self.change("b")
        self.successResultOf(self.rep.flush())
        self.assertEqual(self.rep.missed(), {})
        self.assertEqual(status.delivered, self.cfg.serial_no)
        # a failed node is retried even without a change
        self.rpc.fail[NODE3] = "down"
        self.successResultOf(self.rep.flush(force=True))
        del self.rpc.fail[NODE3]
        self.successResultOf(self.rep.flush())
        self.assertEqual(self.rep.missed(), {})

    def test_unchanged_ssconf_is_not_sent_again(self):
        self.change("a")
        self.successResultOf(self.rep.flush())
        # a node's tags are not in ssconf: only the candidate's config.data
        self.rpc.calls = []
        self.cfg.add_tags("node", NODE3, ["rack1"])
        self.successResultOf(self.rep.flush())
        self.assertEqual([c[:2] for c in self.rpc.calls],
                         [(NODE2, "upload_file")])
        self.assertEqual(self.rpc.serials(NODE2), [self.cfg.serial_no])
        for name in (NODE2, NODE3):
            self.assertEqual(self.rep.status[self.cfg.get_node(name).uuid]
                             .delivered, self.cfg.serial_no)
        # a node whose last send failed gets the ssconf files again
        self.rpc.fail[(NODE3, "write_ssconf_files")] = "disk full"
        self.change("b")
        self.successResultOf(self.rep.flush())
        self.assertIn(NODE3, self.rep.missed())
        del self.rpc.fail[(NODE3, "write_ssconf_files")]
        self.rpc.calls = []
        self.cfg.add_tags("node", NODE3, ["rack2"])
        self.successResultOf(self.rep.flush())
        self.assertEqual(sorted(c[:2] for c in self.rpc.calls),
                         [(NODE2, "upload_file"),
                          (NODE3, "write_ssconf_files")])
        self.assertEqual(self.rep.missed(), {})
        # the cluster's tags are: every node gets them; force sends all
        self.rpc.calls = []
        self.change("c")
        self.successResultOf(self.rep.flush())
        self.assertEqual(sorted(c[:2] for c in self.rpc.calls),
                         [(NODE2, "upload_file"),
                          (NODE2, "write_ssconf_files"),
                          (NODE3, "write_ssconf_files")])
        self.rpc.calls = []
        self.successResultOf(self.rep.flush(force=True))
        self.assertEqual(len(self.rpc.calls), 3)

    def ssconf_sent(self, node):
        return [c.args[0] for c in self.rpc.calls
                if c.node == node and c.procedure == "write_ssconf_files"]

    def test_only_changed_ssconf_values_are_sent(self):
        self.change("a")
        self.successResultOf(self.rep.flush())
        [full] = self.ssconf_sent(NODE3)
        self.assertIn("node_list", full)
        self.assertEqual(full["cluster_tags"], ["a"])
        self.rpc.calls = []
        self.change("b")
        self.successResultOf(self.rep.flush())
        for node in (NODE2, NODE3):
            self.assertEqual(self.ssconf_sent(node),
                             [{"cluster_tags": ["a", "b"]}])
        # a node that missed a change gets what changed since it last
        # took something
        self.rpc.fail[(NODE3, "write_ssconf_files")] = "disk full"
        self.change("c")
        self.successResultOf(self.rep.flush())
        del self.rpc.fail[(NODE3, "write_ssconf_files")]
        self.rpc.calls = []
        self.cfg.set_node_params(NODE2, master_candidate=False)
        self.successResultOf(self.rep.flush())
        sent = self.ssconf_sent(NODE3)
        self.assertEqual(sorted(sent[0]), ["cluster_tags",
                                           "master_candidates",
                                           "master_candidates_ips"])
        self.assertEqual(sent[0]["cluster_tags"], ["a", "b", "c"])
        self.assertEqual(self.rep.missed(), {})
        # redist-conf (force) sends every value
        self.rpc.calls = []
        self.successResultOf(self.rep.flush(force=True))
        self.assertEqual(sorted(self.ssconf_sent(NODE3)[0]), sorted(full))

    def test_removed_and_demoted_nodes(self):
        self.change("a")
        self.clock.advance(0)
        self.cfg.remove_node(NODE3)
        self.cfg.set_node_params(NODE2, master_candidate=False)
        self.rpc.calls = []
        self.clock.advance(0)
        self.assertEqual([c[:2] for c in self.rpc.calls],
                         [(NODE2, "write_ssconf_files")])
        self.assertEqual(sorted(s.name for s in self.rep.status.values()),
                         [NODE2, NODE4])

    def test_no_rpc_no_replication(self):
        rep = replication.Replicator(self.cfg, None, self.clock)
        rep.config_written(self.cfg)
        self.successResultOf(rep.flush())
        self.assertEqual(self.clock.getDelayedCalls(), [])


class FingerprintTests(unittest.TestCase):

    def test_forms(self):
        canonical = ":".join(["AB"] * 32)
        for text in ("SHA256:" + canonical, "sha256:" + canonical.lower(),
                     canonical, "ab" * 32, "  SHA256:" + "ab" * 32 + "\n",
                     "sha256 Fingerprint=" + canonical):
            self.assertEqual(crypto.parse_fingerprint(text), canonical)
        self.assertEqual(crypto.format_fingerprint(canonical),
                         "SHA256:" + canonical)
        for bad in ("", "SHA256:", "ab" * 31, "zz" * 32, "SHA1:" + "ab" * 32):
            self.assertRaises(errors.ParameterError,
                              crypto.parse_fingerprint, bad)


class FilesTests(unittest.TestCase):

    def setUp(self):
        self.root = os.path.abspath(self.mktemp())
        self.paths = pathutils.Paths(self.root)
        self.paths.ensure_dirs()
        self.cfg = make_store(self)

    def test_standard_paths_and_lists(self):
        self.assertEqual(replication.standard_path(
            self.paths, os.path.join(self.root, "etc/ganeti/x")),
            "/etc/ganeti/x")
        self.assertEqual(replication.standard_path(self.paths, "/etc/y"),
                         "/etc/y")
        self.assertEqual(replication.read_extra_files_list(self.paths), [])
        with open(os.path.join(self.paths.data_dir, "redist-extra-files"),
                  "w") as f:
            f.write("# comment\n\n/etc/xen/a\n/etc/xen/a\n%s/etc/b\n"
                    % self.root)
        self.assertEqual(replication.read_extra_files_list(self.paths),
                         ["/etc/xen/a", "/etc/b"])

    def test_vnc_password_files_in_use(self):
        self.cfg.set_cluster_params(hvparams={"kvm": {
            "vnc_password_file": "/etc/ganeti/vnc-cluster-password"}})
        inst = objects.Instance(name="i1", primary_node="node1.example.com",
                                os="b", hypervisor="kvm",
                                hvparams={"vnc_password_file":
                                          "/etc/ganeti/vnc-i1"},
                                nics=[objects.NIC(mac="aa:00:00:00:00:01")])
        self.cfg.add_instance(inst)
        self.assertEqual(replication.vnc_password_files(self.cfg, self.paths),
                         ["/etc/ganeti/vnc-cluster-password",
                          "/etc/ganeti/vnc-i1"])
        self.cfg.set_cluster_params(enabled_hypervisors=["fake", "kvm"])
        files = dict(replication.ancillary_files(self.cfg, self.paths))
        self.assertEqual(files["/etc/ganeti/vnc-i1"],
                         replication.TO_VM_CAPABLE)
        self.assertEqual(files["/var/lib/ganeti/rapi.pem"],
                         replication.TO_CANDIDATES)
        self.assertEqual(files["/var/lib/ganeti/hmac.key"], replication.TO_ALL)

    def test_encoding(self):
        data = bytes(range(256)) * 10
        self.assertEqual(replication.decode_data(
            replication.encode_data(data)), data)


class PinnedClientTests(unittest.TestCase):
    """AddressRpc against a node daemon in bootstrap mode, in process."""

    timeout = 60

    def setUp(self):
        from ganeti.server import noded
        from ganeti.server.noded import bootstrap, http, membership
        from ganeti.server.noded.procedure import INLINE
        from twisted.internet import endpoints
        from twisted.protocols.tls import TLSMemoryBIOFactory
        self.root = os.path.abspath(self.mktemp())
        self.paths = pathutils.Paths(self.root)
        self.cert = cluster_cert(os.path.join(self.root, "certs"))
        procs = noded.make_procedures(reactor, self.root,
                                       run_blocking=INLINE)
        self.procs = procs
        self.membership = bootstrap.Membership(self.paths, procs, None)
        self.left = []
        procs.on_leave = lambda: (self.left.append(True),
                                  self.membership.left())
        factory = TLSMemoryBIOFactory(
            self.membership, False,
            http.make_site(reactor, procs, self.membership.procedures_for))
        endpoint = endpoints.TCP4ServerEndpoint(reactor, 0,
                                                interface="127.0.0.1")
        d = endpoint.listen(factory)

        def listening(port):
            self.port = port
            self.addCleanup(port.stopListening)
            self.client = replication.AddressRpc(
                reactor, self.cert, port=port.getHost().port)
        self.assertIsInstance(membership.BootstrapProcedures,
                              type)
        return d.addCallback(listening)

    @defer.inlineCallbacks
    def test_join_switches_to_the_cluster_certificate(self):
        one_time = crypto.parse_fingerprint(self.membership.fingerprint)
        with open(os.path.join(self.paths.run_dir,
                               "ganeti-noded.fingerprint")) as f:
            self.assertEqual(f.read().strip(), self.membership.fingerprint)
        # pinned to the cluster certificate: refused, saying what it saw
        result = yield self.client.call("127.0.0.1", self.cert.digest(),
                                        "version")
        self.assertFalse(result.success)
        self.assertEqual(result.seen_digest, one_time)
        self.assertIn("presents the certificate %s"
                      % self.membership.fingerprint, result.fail_msg)
        # bootstrap mode serves version and join only
        result = yield self.client.call("127.0.0.1", one_time, "version")
        self.assertEqual(result.payload, 3000000)
        result = yield self.client.call("127.0.0.1", one_time,
                                        "instance_list", [["fake"]])
        self.assertFalse(result.success)
        self.assertIn("unknown procedure", result.fail_msg)
        # a certificate that is not the caller's is refused
        other = cluster_cert(os.path.join(self.root, "other"))
        args = [(other.key_pem + other.cert_pem).decode(), "k" * 40 + "\n",
                "cluster.example.com", "node2", {}, None]
        result = yield self.client.call("127.0.0.1", one_time, "join", args)
        self.assertFalse(result.success)
        self.assertIn("not the one the caller presented", result.fail_msg)
        self.assertFalse(os.path.exists(os.path.join(self.paths.data_dir,
                                                     "server.pem")))
        # ... and one issued for another cluster name
        args[0] = (self.cert.key_pem + self.cert.cert_pem).decode()
        args[2] = "other.example.com"
        result = yield self.client.call("127.0.0.1", one_time, "join", args)
        self.assertFalse(result.success)
        self.assertIn("not issued for cluster other.example.com",
                      result.fail_msg)
        args[2] = "cluster.example.com"
        args[4] = {"cluster_name": "cluster.example.com"}
        result = yield self.client.call("127.0.0.1", one_time, "join", args)
        self.assertTrue(result.success, result.fail_msg)
        pem = os.path.join(self.paths.data_dir, "server.pem")
        self.assertEqual(os.stat(pem).st_mode & 0o777, 0o400)
        self.assertEqual(os.stat(self.paths.hmac_key_file).st_mode & 0o777,
                         0o400)
        with open(self.paths.ssconf_file("cluster_name")) as f:
            self.assertEqual(f.read(), "cluster.example.com\n")
        self.assertFalse(os.path.exists(os.path.join(
            self.paths.run_dir, "ganeti-noded.fingerprint")))
        # from now on: the cluster certificate, every procedure
        result = yield self.client.call("127.0.0.1", self.cert.digest(),
                                        "instance_list", [["fake"]])
        self.assertTrue(result.success, result.fail_msg)
        self.assertEqual(result.payload, [])
        result = yield self.client.call("127.0.0.1", one_time, "version")
        self.assertFalse(result.success)
        # a caller with another certificate is refused by the TLS layer
        stranger = replication.AddressRpc(reactor, other,
                                          port=self.port.getHost().port)
        result = yield stranger.call("127.0.0.1", self.cert.digest(),
                                     "version")
        self.assertFalse(result.success)
        # extra files: only below the allowed directories
        result = yield self.client.call(
            "127.0.0.1", self.cert.digest(), "upload_file",
            ["/etc/ganeti/extra.conf", "x=1\n", 0o644])
        self.assertTrue(result.success, result.fail_msg)
        with open(os.path.join(self.root, "etc/ganeti/extra.conf")) as f:
            self.assertEqual(f.read(), "x=1\n")
        for bad, words in (("/etc/passwd", "not a file the master may"
                            " upload"),
                           ("/var/lib/ganeti/server.pem", "node's data"
                            " directory"),
                           ("/etc/ganeti/../passwd", "normalised")):
            result = yield self.client.call(
                "127.0.0.1", self.cert.digest(), "upload_file",
                [bad, "x", 0o644])
            self.assertFalse(result.success, bad)
            self.assertIn(words, result.fail_msg)
        os.makedirs(os.path.join(self.root, "etc/ganeti"), exist_ok=True)
        os.symlink("/tmp", os.path.join(self.root, "etc/ganeti/out"))
        result = yield self.client.call(
            "127.0.0.1", self.cert.digest(), "upload_file",
            ["/etc/ganeti/out/x", "x", 0o644])
        self.assertFalse(result.success)
        self.assertIn("leads outside /etc/ganeti", result.fail_msg)
        # leaving: files gone, back in bootstrap mode with a new certificate
        result = yield self.client.call("127.0.0.1", self.cert.digest(),
                                        "node_leave")
        self.assertTrue(result.success, result.fail_msg)
        self.assertFalse(os.path.exists(pem))
        self.assertFalse(os.path.exists(self.paths.ssconf_file(
            "cluster_name")))
        yield task.deferLater(reactor, 0.7, lambda: None)
        self.assertEqual(self.left, [True])
        self.assertNotEqual(crypto.parse_fingerprint(
            self.membership.fingerprint), one_time)
        result = yield self.client.call("127.0.0.1", self.cert.digest(),
                                        "version")
        self.assertFalse(result.success)

    def listing(self, cert):
        """GET / over TLS presenting ``cert``: the procedure names."""
        import http.client
        import ssl
        pem = os.path.join(self.root, "client-%s.pem" % cert.digest()[:8])
        with open(pem, "wb") as f:
            f.write(cert.key_pem + cert.cert_pem)

        def get():
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.load_cert_chain(pem)
            conn = http.client.HTTPSConnection(
                "127.0.0.1", self.port.getHost().port, context=ctx,
                timeout=10)
            try:
                conn.request("GET", "/")
                return json.loads(conn.getresponse().read())
            finally:
                conn.close()
        return threads.deferToThread(get)

    @defer.inlineCallbacks
    def test_listing_names_only_what_the_caller_may_call(self):
        # any certificate gets through the handshake of a node not joined:
        # it learns of version and join, nothing more
        stranger = cluster_cert(os.path.join(self.root, "stranger"))
        self.assertEqual((yield self.listing(stranger)),
                         [True, ["join", "version"]])
        # once joined, the cluster certificate sees every procedure
        one_time = crypto.parse_fingerprint(self.membership.fingerprint)
        args = [(self.cert.key_pem + self.cert.cert_pem).decode(),
                "k" * 40 + "\n", "cluster.example.com", "node2",
                {"cluster_name": "cluster.example.com"}, None]
        result = yield self.client.call("127.0.0.1", one_time, "join", args)
        self.assertTrue(result.success, result.fail_msg)
        (ok, names) = yield self.listing(self.cert)
        self.assertEqual(names, self.procs.names())
        self.assertIn("instance_list", names)

    @defer.inlineCallbacks
    def test_master_fingerprint_restricts_the_join(self):
        from ganeti.server.noded import bootstrap
        other = cluster_cert(os.path.join(self.root, "other"))
        self.membership.master_digest = other.digest()
        self.membership.bootstrap()
        one_time = crypto.parse_fingerprint(self.membership.fingerprint)
        result = yield self.client.call("127.0.0.1", one_time, "version")
        self.assertFalse(result.success)
        self.assertIsInstance(self.membership, bootstrap.Membership)
        self.membership.master_digest = self.cert.digest()
        self.membership.bootstrap()
        one_time = crypto.parse_fingerprint(self.membership.fingerprint)
        result = yield self.client.call("127.0.0.1", one_time, "version")
        self.assertTrue(result.success, result.fail_msg)


class NodedOptionsTests(unittest.TestCase):
    """ganeti-noded's bootstrap options."""

    def parse(self, *argv):
        from ganeti.server import noded
        options = noded.Options()
        options.parseOptions(["--root", self.root, "--bind", "127.0.0.1"]
                             + list(argv))
        return options

    def setUp(self):
        self.root = os.path.abspath(self.mktemp())

    def test_bootstrap_without_certificate(self):
        from twisted.python import usage
        err = self.assertRaises(usage.UsageError, self.parse)
        self.assertIn("server.pem does not exist", str(err))
        options = self.parse("--bootstrap", "--master-fingerprint",
                             "sha256:" + "ab" * 32, "--extra-file-dir",
                             "/srv/conf")
        self.assertIsNone(options["certificate"])
        self.assertEqual(options["master-fingerprint"],
                         ":".join(["AB"] * 32))
        self.assertEqual(options["extra-file-dir"], ["/srv/conf"])
        err = self.assertRaises(usage.UsageError, self.parse, "--bootstrap",
                                "--master-fingerprint", "zz")
        self.assertIn("--master-fingerprint", str(err))
        err = self.assertRaises(usage.UsageError, self.parse, "--bootstrap",
                                "--extra-file-dir", "relative")
        self.assertIn("not an absolute path", str(err))

    def test_bootstrap_with_certificate_is_a_member(self):
        cert = cluster_cert(os.path.join(self.root, "certs"))
        paths = pathutils.Paths(self.root)
        os.makedirs(paths.data_dir)
        with open(os.path.join(paths.data_dir, "server.pem"), "wb") as f:
            f.write(cert.key_pem + cert.cert_pem)
        options = self.parse("--bootstrap")
        self.assertEqual(options["certificate"].digest(), cert.digest())


class CountingRpc(ReplicationRpc):
    """Every call waits for :meth:`reply`; records the argument objects
    as given (before FakeRpc copies them) and the most calls in flight."""

    def __init__(self):
        ReplicationRpc.__init__(self)
        self.given = []           # (node, procedure, args object)
        self.waiting = []
        self.most_in_flight = 0

    def call(self, node, procedure, args=(), timeout=None):
        self.given.append((node, procedure, args))
        d = defer.Deferred()
        self.waiting.append((d, node, procedure, args))
        self.most_in_flight = max(self.most_in_flight, len(self.waiting))
        FakeRpc.call(self, node, procedure, args, timeout)   # recorded
        return d

    def reply(self, count):
        """Answer the ``count`` oldest calls waiting."""
        batch, self.waiting = self.waiting[:count], self.waiting[count:]
        for d, node, procedure, args in batch:
            d.callback(self.answer(node, procedure, list(args)))


class ManyNodesReplicationTests(ClockTestCase):
    """40 nodes, 5 of them master candidates besides the master."""

    def setUp(self):
        ClockTestCase.setUp(self)
        self.cfg = make_store(self)
        self.cfg.set_cluster_params(candidate_pool_size=6)
        self.names = ["node%d.example.com" % i for i in range(2, 42)]
        for i, name in enumerate(self.names):
            self.cfg.add_node(objects.Node(
                name=name, primary_ip="127.0.1.%d" % (i + 2),
                master_candidate=False))
        # the candidates sort last by name: they must still go first
        self.candidates = self.names[-5:]
        for name in self.candidates:
            self.cfg.set_node_params(name, master_candidate=True)
        self.rpc = CountingRpc()

    def test_encoded_once_for_every_node(self):
        encoded = []
        original = replication.encode_data
        self.patch(replication, "encode_data",
                   lambda data: encoded.append(data) or original(data))
        rep = replication.Replicator(self.cfg, self.rpc, self.clock)
        d = rep.flush()
        while self.rpc.waiting:
            self.rpc.reply(len(self.rpc.waiting))
        self.successResultOf(d)
        self.assertEqual(len(encoded), 1)
        uploads = [a for _, p, a in self.rpc.given if p == "upload_file"]
        ssconfs = [a for _, p, a in self.rpc.given
                   if p == "write_ssconf_files"]
        self.assertEqual(len(uploads), 5)
        self.assertEqual(len(ssconfs), 40)
        # one prepared argument list each, its JSON made once
        for sent in (uploads, ssconfs):
            self.assertTrue(all(a is sent[0] for a in sent))
            self.assertIsInstance(sent[0], rpc.PreparedArgs)
        self.assertEqual(json.loads(uploads[0].body)[0],
                         replication.CONFIG_FILE)
        for name in self.candidates:
            self.assertEqual(self.rpc.serials(name), [self.cfg.serial_no])
        # the next change: only the changed value, encoded once for all
        self.rpc.given = []
        self.cfg.add_tags("cluster", None, ["rack1"])
        d = rep.flush()
        while self.rpc.waiting:
            self.rpc.reply(len(self.rpc.waiting))
        self.successResultOf(d)
        ssconfs = [a for _, p, a in self.rpc.given
                   if p == "write_ssconf_files"]
        self.assertEqual(len(ssconfs), 40)
        self.assertTrue(all(a is ssconfs[0] for a in ssconfs))
        self.assertEqual(list(ssconfs[0]), [{"cluster_tags": ["rack1"]}])

    def test_bounded_sends_candidates_first(self):
        rep = replication.Replicator(self.cfg, self.rpc, self.clock,
                                     max_parallel=4)
        d = rep.flush()
        # the first nodes sent to are the candidates (config.data first)
        self.assertEqual(sorted(n for n, _, _ in self.rpc.given[:4]),
                         sorted(self.candidates[:4]))
        self.assertEqual({p for _, p, _ in self.rpc.given[:4]},
                         {"upload_file"})
        while self.rpc.waiting:
            self.assertNoResult(d)
            self.rpc.reply(3)
        self.successResultOf(d)
        self.assertEqual(self.rpc.most_in_flight, 4)
        self.assertEqual(rep.missed(), {})
        delivered = {s.name: s.delivered for s in rep.status.values()}
        self.assertEqual(delivered, {n: self.cfg.serial_no
                                     for n in self.names})
