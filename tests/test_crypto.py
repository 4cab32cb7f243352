"""The cluster certificate and mutual TLS, for real on 127.0.0.1.

Also home of the certificate helpers other node-daemon tests import
(:func:`cluster_cert`, :func:`listen_noded`).
"""

import datetime
import os
import stat

from cryptography import x509
from cryptography.x509.oid import NameOID
from twisted.internet import defer, reactor
from twisted.trial import unittest
from twisted.web import client as web_client

from ganeti import crypto
from ganeti import errors
from ganeti import rpc
from ganeti.server import noded
from ganeti.server.noded import http
from ganeti.server.noded.blocking import BlockingPool

_CERTS = {}


def cluster_cert(base, name="cluster.example.com", key_type="ec", **kw):
    """A cluster certificate written to ``<base>/<name>/server.pem``.

    EC keys by default: generating RSA keys for every test is slow.
    """
    path = os.path.join(base, "%s-%s" % (name, len(_CERTS)), "server.pem")
    cert = crypto.generate_cluster_certificate(path, name, key_type=key_type,
                                               **kw)
    _CERTS[path] = cert
    return cert


def listen_noded(testcase, cert, root=None, procedures=None, **kw):
    """An in-process node daemon on 127.0.0.1 (random port) serving with
    ``cert``, its file work in a thread pool as the daemon's; stopped at the
    end of the test.  Returns (port, procedures)."""
    if procedures is None:
        if root is None:
            root = testcase.mktemp()
            os.makedirs(root)
        pool = BlockingPool(reactor, 2)
        pool.startService()
        testcase.addCleanup(pool.stopService)
        procedures = noded.make_procedures(reactor, root,
                                           run_blocking=pool.run, **kw)
    site = http.make_site(reactor, procedures)
    port = reactor.listenSSL(0, site, crypto.server_context_factory(cert),
                             interface="127.0.0.1")
    testcase.addCleanup(port.stopListening)
    testcase.addCleanup(procedures.instances.close)
    return port.getHost().port, procedures


def rpc_client(testcase, cert, port, offline=(), clock=None,
               address="127.0.0.1"):
    """An RpcClient whose resolver maps every node to ``address:port``."""
    def resolve(node):
        return rpc.NodeAddress(address, port, node in offline)
    client = rpc.RpcClient(reactor, None, resolve, clock=clock, cert=cert)
    testcase.addCleanup(client.close)
    return client


class CertificateTests(unittest.TestCase):

    def setUp(self):
        self.base = self.mktemp()

    def test_generate_rsa_as_ganeti_stores_it(self):
        path = os.path.join(self.base, "var/lib/ganeti/server.pem")
        cert = crypto.generate_cluster_certificate(path, "cl.example.com")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o400)
        with open(path, "rb") as f:
            pem = f.read()
        # key first, then the certificate, in one file
        self.assertTrue(pem.startswith(b"-----BEGIN RSA PRIVATE KEY-----"))
        self.assertIn(b"-----BEGIN CERTIFICATE-----", pem)
        c = x509.load_pem_x509_certificate(pem)
        self.assertEqual(c.subject.get_attributes_for_oid(
            NameOID.COMMON_NAME)[0].value, "cl.example.com")
        self.assertEqual(c.public_key().key_size, 2048)
        san = c.extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value
        self.assertEqual(san.get_values_for_type(x509.DNSName),
                         ["cl.example.com"])
        years = (c.not_valid_after_utc - c.not_valid_before_utc).days / 365
        self.assertGreater(years, 4.9)
        self.assertEqual(cert.cluster_name, "cl.example.com")
        self.assertEqual(cert.digest(), crypto.load_cluster_certificate(
            path, "cl.example.com").digest())

    def test_digests(self):
        cert = cluster_cert(self.base)
        sha256 = cert.digest()
        self.assertEqual(len(sha256.split(":")), 32)
        self.assertRegex(sha256, r"^([0-9A-F]{2}:){31}[0-9A-F]{2}$")
        self.assertEqual(len(cert.digest("sha1").split(":")), 20)
        # same value as pyOpenSSL's own digest (what Ganeti uses)
        openssl = cert.private_certificate().original.digest("sha1").decode()
        self.assertEqual(cert.digest("sha1"), openssl)
        self.assertRaises(errors.X509CertError, cert.digest, "nope")

    def test_candidate_certs_lines(self):
        text = crypto.format_candidate_certs({"u2": "BB:CC", "u1": "AA:01"})
        self.assertEqual(text, "u1=AA:01\nu2=BB:CC\n")
        self.assertEqual(crypto.parse_candidate_certs(text),
                         {"u1": "AA:01", "u2": "BB:CC"})
        self.assertRaises(errors.X509CertError, crypto.parse_candidate_certs,
                          "garbage\n")

    def test_wrong_cluster_name(self):
        cert = cluster_cert(self.base, "one.example.com")
        err = self.assertRaises(errors.X509CertError,
                                crypto.load_cluster_certificate, cert.path,
                                "two.example.com")
        self.assertIn("two.example.com", str(err))

    def test_bad_inputs(self):
        missing = os.path.join(self.base, "nothing", "server.pem")
        err = self.assertRaises(errors.X509CertError,
                                crypto.load_cluster_certificate, missing)
        self.assertIn("does not exist", str(err))
        self.assertIn("gnt-cluster init", str(err))
        for name in ("", "192.0.2.1", "bad name!"):
            self.assertRaises(errors.X509CertError,
                              crypto.generate_cluster_certificate,
                              os.path.join(self.base, "x.pem"), name)
        self.assertRaises(errors.X509CertError,
                          crypto.generate_cluster_certificate,
                          os.path.join(self.base, "x.pem"), "a.example.com",
                          validity_days=0)
        os.makedirs(self.base, exist_ok=True)
        junk = os.path.join(self.base, "junk.pem")
        with open(junk, "wb") as f:
            f.write(b"not a pem")
        self.assertRaises(errors.X509CertError,
                          crypto.load_cluster_certificate, junk)

    def test_key_must_match_certificate(self):
        a = cluster_cert(self.base, "a.example.com")
        b = cluster_cert(self.base, "b.example.com")
        mixed = os.path.join(self.base, "mixed.pem")
        with open(mixed, "wb") as f:
            f.write(a.key_pem + b.cert_pem)
        err = self.assertRaises(errors.X509CertError,
                                crypto.load_cluster_certificate, mixed)
        self.assertIn("does not belong", str(err))

    def test_renewal_replaces_read_only_file(self):
        first = cluster_cert(self.base)
        second = crypto.generate_cluster_certificate(
            first.path, "cluster.example.com", key_type="ec")
        self.assertNotEqual(first.digest(), second.digest())
        self.assertEqual(crypto.load_cluster_certificate(first.path).digest(),
                         second.digest())


class MutualTlsTests(unittest.TestCase):
    """A real node daemon on 127.0.0.1 and clients with various certs."""

    timeout = 30

    def setUp(self):
        self.base = self.mktemp()
        self.cert = cluster_cert(self.base)
        self.port, _ = listen_noded(self, self.cert)

    async def version(self, cert):
        client = rpc_client(self, cert, self.port)
        return await client.call("node1", "version")

    async def assert_still_serving(self):
        result = await self.version(self.cert)
        self.assertTrue(result.success, result.fail_msg)

    @defer.inlineCallbacks
    def test_cluster_certificate_gets_answers(self):
        result = yield defer.Deferred.fromCoroutine(self.version(self.cert))
        self.assertTrue(result.success, result.fail_msg)
        self.assertEqual(result.payload, 3000000)

    @defer.inlineCallbacks
    def test_client_without_certificate_is_refused(self):
        pool = web_client.HTTPConnectionPool(reactor, persistent=False)
        agent = web_client.Agent(reactor, contextFactory=crypto.AnyServerPolicy(),
                                 pool=pool)
        url = ("https://127.0.0.1:%d/version" % self.port).encode()
        with self.assertRaises(Exception) as caught:
            response = yield agent.request(b"POST", url)
            yield web_client.readBody(response)
        self.assertNotIsInstance(caught.exception, AssertionError)
        yield defer.Deferred.fromCoroutine(self.assert_still_serving())

    @defer.inlineCallbacks
    def test_other_clusters_certificate_is_refused(self):
        other = cluster_cert(self.base, "cluster.example.com")  # same name!
        result = yield defer.Deferred.fromCoroutine(self.version(other))
        self.assertFalse(result.success)
        self.assertIn("node1", result.fail_msg)
        self.assertIn("TLS", result.fail_msg)
        yield defer.Deferred.fromCoroutine(self.assert_still_serving())

    @defer.inlineCallbacks
    def test_client_refuses_impostor_server(self):
        impostor = cluster_cert(self.base)
        port, _ = listen_noded(self, impostor)
        client = rpc_client(self, self.cert, port)
        result = yield client.call("node9", "version")
        self.assertFalse(result.success)
        self.assertIn("TLS handshake refused", result.fail_msg)

    @defer.inlineCallbacks
    def test_expired_certificate_is_refused(self):
        long_ago = datetime.datetime.now(datetime.timezone.utc) - \
            datetime.timedelta(days=30)
        old = cluster_cert(self.base, validity_days=2, now=long_ago)
        port, _ = listen_noded(self, old)
        client = rpc_client(self, old, port)
        result = yield client.call("node1", "version")
        self.assertFalse(result.success)
