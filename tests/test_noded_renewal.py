"""Renewing the cluster certificate and the HMAC key on a node daemon: the
three steps (stage, switch, forget) on the files, and the TLS trust of a
real in-process node daemon on 127.0.0.1 before, during and after a
renewal, with clients presenting the old, the new and a stranger's
certificate."""

import datetime
import functools
import os
import stat

from twisted.internet import defer, reactor
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.trial import unittest

from ganeti import crypto
from ganeti import errors
from ganeti import pathutils
from ganeti import rpc
from ganeti.backend import rotation
from ganeti.server import noded
from ganeti.server.noded import http
from ganeti.server.noded.blocking import BlockingPool
from ganeti.server.noded.procedure import INLINE
from ganeti.server.noded.renewal import ClusterTLS

from tests.test_crypto import cluster_cert


def _async_test(fn):
    @functools.wraps(fn)
    def run(self):
        return defer.Deferred.fromCoroutine(fn(self))
    return run


def _digest(data):
    return crypto.ClusterCertificate.from_pem(data).digest()


def _read(path):
    with open(path, "rb") as f:
        return f.read()


class RotationFileTests(unittest.TestCase):
    """ganeti.backend.rotation on plain files."""

    def setUp(self):
        self.dir = self.mktemp()
        os.makedirs(self.dir)
        self.path = os.path.join(self.dir, "hmac.key")
        with open(self.path, "wb") as f:
            f.write(b"old\n")
        os.chmod(self.path, 0o400)
        self.old = rotation.key_digest(b"old\n")
        self.new = rotation.key_digest(b"new\n")

    def state(self):
        return rotation.state(self.path, rotation.key_digest)

    def test_three_steps(self):
        rotation.stage(self.path, b"new\n")
        self.assertEqual(self.state(), {"current": self.old,
                                        "staged": self.new,
                                        "previous": None})
        self.assertEqual(stat.S_IMODE(os.stat(self.path + ".new").st_mode),
                         0o400)
        self.assertTrue(rotation.switch(self.path, rotation.key_digest,
                                        self.new))
        self.assertEqual(self.state(), {"current": self.new, "staged": None,
                                        "previous": self.old})
        # a repeated switch is harmless
        self.assertFalse(rotation.switch(self.path, rotation.key_digest,
                                         self.new))
        self.assertEqual(rotation.forget(self.path, rotation.key_digest,
                                         self.new), [self.path + ".old"])
        self.assertEqual(self.state(), {"current": self.new, "staged": None,
                                        "previous": None})
        self.assertEqual(rotation.forget(self.path, rotation.key_digest,
                                         self.new), [])

    def test_wrong_digests_change_nothing(self):
        err = self.assertRaises(errors.ParameterError, rotation.switch,
                                self.path, rotation.key_digest, self.new)
        self.assertIn("nothing with digest %s is staged" % self.new,
                      str(err))
        rotation.stage(self.path, b"other\n")
        err = self.assertRaises(errors.ParameterError, rotation.switch,
                                self.path, rotation.key_digest, self.new)
        self.assertIn("not the expected %s; stage it again" % self.new,
                      str(err))
        err = self.assertRaises(errors.ParameterError, rotation.forget,
                                self.path, rotation.key_digest, self.new)
        self.assertIn("refusing to forget the others", str(err))
        self.assertEqual(_read(self.path), b"old\n")
        self.assertEqual(_read(self.path + ".new"), b"other\n")
        # forgetting with the current digest drops what was staged: the
        # way back from a renewal given up
        self.assertEqual(rotation.forget(self.path, rotation.key_digest,
                                         self.old), [self.path + ".new"])


class CredentialsTests(unittest.TestCase):

    def test_companions_are_trusted_a_broken_one_is_not(self):
        base = self.mktemp()
        old = cluster_cert(base)
        new = cluster_cert(base)
        path = old.path
        self.assertEqual(crypto.load_node_credentials(path).digests(),
                         [old.digest()])
        with open(path + ".new", "wb") as f:
            f.write(new.pem)
        creds = crypto.load_node_credentials(path)
        self.assertEqual(creds.cert.digest(), old.digest())
        self.assertEqual(creds.digests(), [old.digest(), new.digest()])
        with open(path + ".old", "wb") as f:
            f.write(b"garbage")
        problems = []
        creds = crypto.load_node_credentials(path, problems)
        self.assertEqual(creds.digests(), [old.digest(), new.digest()])
        self.assertEqual(len(problems), 1)
        self.assertIn("Not trusting %s.old" % path, problems[0])


class DualTrustTests(unittest.TestCase):
    """A node daemon (ClusterTLS, the real procedures) during a renewal."""

    timeout = 60

    def setUp(self):
        base = self.mktemp()
        self.old = cluster_cert(base)
        self.new = cluster_cert(base)
        self.stranger = cluster_cert(base)   # same name, another key
        self.root = os.path.abspath(self.mktemp())
        self.paths = pathutils.Paths(self.root)
        self.paths.ensure_dirs()
        self.pem = crypto.server_pem_path(self.paths)
        with open(self.pem, "wb") as f:
            f.write(self.old.pem)
        pool = BlockingPool(reactor, 2)
        pool.startService()
        self.addCleanup(pool.stopService)
        self.procs = noded.make_procedures(reactor, self.root,
                                           run_blocking=pool.run)
        self.addCleanup(self.procs.instances.close)
        self.tls = ClusterTLS(self.pem, crypto.load_node_credentials(
            self.pem))
        self.procs.cluster_tls = self.tls
        factory = TLSMemoryBIOFactory(self.tls, False, http.make_site(
            reactor, self.procs))
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.port = port.getHost().port

    def client(self, cert, trusted=()):
        """An RPC client presenting ``cert``, accepting a server that
        presents it or one of ``trusted``."""
        client = rpc.RpcClient(
            reactor, None, lambda node: rpc.NodeAddress("127.0.0.1",
                                                        self.port),
            cert=cert, trusted=trusted)
        self.addCleanup(client.close)
        return client

    async def answers(self, client):
        result = await client.call("node1", "version")
        return result.success

    async def who_gets_in(self):
        """Which of the old, new and stranger's certificates the daemon
        accepts (each client accepting either server certificate)."""
        both = [self.old, self.new]
        return [await self.answers(self.client(cert, both))
                for cert in (self.old, self.new, self.stranger)]

    async def presented(self):
        """The certificate the daemon presents: old or new."""
        if await self.answers(self.client(self.old)):
            return "old"
        if await self.answers(self.client(self.new, [self.old])):
            return "new"
        return None

    async def ok(self, client, procedure, *args):
        result = await client.call("node1", procedure, list(args))
        self.assertTrue(result.success, result.fail_msg)
        return result.payload

    @_async_test
    async def test_before_during_after(self):
        master_old = self.client(self.old, [self.new])
        master_new = self.client(self.new, [self.old])
        self.assertEqual(await self.who_gets_in(), [True, False, False])
        self.assertEqual(await self.presented(), "old")

        digest = await self.ok(master_old, "cluster_cert_stage",
                               self.new.pem.decode())
        self.assertEqual(digest, self.new.digest())
        self.assertEqual(stat.S_IMODE(os.stat(self.pem + ".new").st_mode),
                         0o400)
        self.assertEqual(await self.who_gets_in(), [True, True, False])
        self.assertEqual(await self.presented(), "old")
        self.assertEqual((await self.ok(master_new, "crypto_state"))[
            "trusted"], sorted([self.old.digest(), self.new.digest()]))

        self.assertIs(await self.ok(master_new, "cluster_cert_switch",
                                    self.new.digest()), True)
        self.assertEqual(_read(self.pem), self.new.pem)
        self.assertEqual(_read(self.pem + ".old"), self.old.pem)
        self.assertFalse(os.path.exists(self.pem + ".new"))
        self.assertEqual(await self.who_gets_in(), [True, True, False])
        self.assertEqual(await self.presented(), "new")
        # a client that kept its connection (keep-alive) from before
        keeper = self.client(self.old, [self.new])
        self.assertTrue(await self.answers(keeper))

        removed = await self.ok(master_new, "cluster_cert_forget",
                                self.new.digest())
        self.assertEqual(removed, [self.pem + ".old"])
        self.assertEqual(await self.who_gets_in(), [False, True, False])
        self.assertEqual(await self.presented(), "new")
        # the old certificate's open connection was closed too
        self.assertFalse(await self.answers(keeper))
        state = await self.ok(master_new, "crypto_state")
        self.assertEqual(state["cluster_certificate"], {
            "current": self.new.digest(), "staged": None, "previous": None})
        self.assertEqual(state["trusted"], [self.new.digest()])

    @_async_test
    async def test_a_restart_during_the_renewal_trusts_both(self):
        master_old = self.client(self.old, [self.new])
        await self.ok(master_old, "cluster_cert_stage",
                      self.new.pem.decode())
        # what a daemon started now would use
        self.tls.use(crypto.load_node_credentials(self.pem))
        self.assertEqual(await self.who_gets_in(), [True, True, False])

    @_async_test
    async def test_bad_calls_change_nothing(self):
        master = self.client(self.old, [self.new])
        result = await master.call("node1", "cluster_cert_stage",
                                   ["not a certificate"])
        self.assertFalse(result.success)
        self.assertIn("cluster_pem: ", result.fail_msg)
        # a certificate without its key
        result = await master.call("node1", "cluster_cert_stage",
                                   [self.new.cert_pem.decode()])
        self.assertFalse(result.success)
        self.assertIn("no usable private key", result.fail_msg)
        long_ago = datetime.datetime.now(datetime.timezone.utc) - \
            datetime.timedelta(days=30)
        expired = cluster_cert(self.mktemp(), validity_days=2, now=long_ago)
        result = await master.call("node1", "cluster_cert_stage",
                                   [expired.pem.decode()])
        self.assertFalse(result.success)
        self.assertIn("the certificate is not valid now", result.fail_msg)
        result = await master.call("node1", "cluster_cert_switch",
                                   [self.new.digest()])
        self.assertFalse(result.success)
        self.assertIn("nothing with digest %s is staged" % self.new.digest(),
                      result.fail_msg)
        result = await master.call("node1", "cluster_cert_forget",
                                   [self.new.digest()])
        self.assertFalse(result.success)
        self.assertIn("refusing to forget", result.fail_msg)
        self.assertEqual(_read(self.pem), self.old.pem)
        self.assertEqual([n for n in os.listdir(self.paths.data_dir)
                          if n.startswith("server.pem")], ["server.pem"])
        self.assertEqual(await self.who_gets_in(), [True, False, False])


class HmacKeyProcedureTests(unittest.TestCase):
    """The hmac_key_* procedures on the files, without a network."""

    def setUp(self):
        root = self.mktemp()
        self.paths = pathutils.Paths(os.path.abspath(root))
        self.paths.ensure_dirs()
        with open(self.paths.hmac_key_file, "w") as f:
            f.write("a" * 40 + "\n")
        self.procs = noded.make_procedures(reactor, self.paths.root,
                                           run_blocking=INLINE)
        self.addCleanup(self.procs.instances.close)

    def call(self, name, *args):
        return self.successResultOf(self.procs.call(name, list(args)))

    def test_steps(self):
        key = "b" * 40 + "\n"
        digest = self.call("hmac_key_stage", key)
        self.assertEqual(digest, rotation.key_digest(key.encode()))
        self.assertEqual(_read(self.paths.hmac_key_file), b"a" * 40 + b"\n")
        self.assertTrue(self.call("hmac_key_switch", digest))
        self.assertEqual(_read(self.paths.hmac_key_file), key.encode())
        self.assertEqual(stat.S_IMODE(os.stat(
            self.paths.hmac_key_file).st_mode), 0o400)
        self.assertEqual(self.call("hmac_key_forget", digest),
                         [self.paths.hmac_key_file + ".old"])
        state = self.call("crypto_state")["hmac_key"]
        self.assertEqual(state, {"current": digest, "staged": None,
                                 "previous": None})

    def test_bad_keys(self):
        for bad, text in (("", "argument 'hmac_key'"),
                          (" \n", "hmac_key must not be empty"),
                          ("k\u00e9y", "hmac_key must be ASCII")):
            failure = self.failureResultOf(self.procs.call(
                "hmac_key_stage", [bad]), errors.ParameterError)
            self.assertIn(text, str(failure.value))
        self.assertFalse(os.path.exists(self.paths.hmac_key_file + ".new"))

    def test_leaving_removes_the_companions(self):
        key = "c" * 40 + "\n"
        self.call("hmac_key_stage", key)
        removed = self.call("node_leave")
        self.assertIn(self.paths.hmac_key_file + ".new", removed)
        self.assertFalse(os.path.exists(self.paths.hmac_key_file + ".new"))
