"""Remote (inter-cluster) exports: the signed messages (ganeti.rie, in
Ganeti 3.0's formats) and the node-to-node transfer
(ganeti.backend.remote_transfer) over real TLS on 127.0.0.1."""

import hashlib
import hmac
import os

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti import errors
from ganeti import pathutils
from ganeti import rie
from ganeti.backend import remote_transfer as rt

CDS = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"


class SignedMessagesTests(unittest.TestCase):

    def setUp(self):
        self.paths = pathutils.Paths(os.path.abspath(self.mktemp()))
        self.name, self.pem = rt.make_key(self.paths, 3600,
                                          reactor.seconds())

    def test_hmac_is_sha1_over_salt_and_text(self):
        # Ganeti's Sha1Hmac: HMAC-SHA1(key, salt + text), hex
        self.assertEqual(
            rie.sha1_hmac("key", "text", "abcd"),
            hmac.new(b"key", b"abcdtext", hashlib.sha1).hexdigest())

    def test_handshake(self):
        hs = rie.compute_handshake(CDS)
        self.assertEqual(hs[0], 0)
        self.assertEqual(
            hs[1], rie.sha1_hmac(CDS, "0:Hi, I'm Ganeti", hs[2]))
        self.assertIsNone(rie.check_handshake(CDS, hs))
        self.assertIn("do not share the same cluster domain secret",
                      rie.check_handshake(OTHER, hs))
        self.assertIn("not a [version, hmac, salt]",
                      rie.check_handshake(CDS, "junk"))

    def test_signed_certificate(self):
        signed = rie.sign_certificate(self.pem, CDS, "00ff")
        header, _, rest = signed.partition("\n\n")
        self.assertEqual(header, "X-Ganeti-Signature: 00ff/%s"
                         % rie.sha1_hmac(CDS, self.pem, "00ff"))
        self.assertEqual(rest, self.pem)
        self.assertEqual(rie.load_signed_certificate(signed, CDS, "ca"),
                         self.pem)
        err = self.assertRaises(errors.OpPrereqError,
                                rie.load_signed_certificate, signed, OTHER,
                                "source_x509_ca")
        self.assertIn("source_x509_ca: the certificate's signature is"
                      " invalid", err.args[0])
        err = self.assertRaises(errors.OpPrereqError,
                                rie.load_signed_certificate, self.pem, CDS,
                                "source_x509_ca")
        self.assertIn("X-Ganeti-Signature", err.args[0])

    def test_key_name_and_disk_info(self):
        kn = rie.compute_key_name(CDS, self.name)
        self.assertEqual(rie.check_key_name(CDS, kn), self.name)
        self.assertRaises(errors.OpPrereqError, rie.check_key_name, OTHER,
                          kn)
        info = rie.compute_disk_info(CDS, "0a0b", 1, "127.0.0.5", 4000,
                                     "magic-1")
        self.assertEqual(info[3], rie.sha1_hmac(
            CDS, "1:127.0.0.5:4000:magic-1", "0a0b"))
        self.assertEqual(rie.check_disk_info(CDS, 1, info),
                         ("127.0.0.5", 4000, "magic-1"))
        # signed for another disk, or with another secret: refused
        err = self.assertRaises(errors.OpPrereqError, rie.check_disk_info,
                                CDS, 0, info)
        self.assertIn("target_node: disk/0: the HMAC is invalid",
                      err.args[0])
        self.assertRaises(errors.OpPrereqError, rie.check_disk_info, OTHER,
                          1, info)

    def test_key_store(self):
        key = rt.load_key(self.paths, self.name)
        self.assertEqual(key.cert_pem.decode(), self.pem)
        self.assertTrue(rt.remove_key(self.paths, self.name))
        self.assertRaises(errors.ExportError, rt.load_key, self.paths,
                          self.name)
        self.assertRaises(errors.ParameterError, rt.load_key, self.paths,
                          "../../etc")


class TransferTests(unittest.TestCase):
    """A listener and a sender on 127.0.0.1 with freshly made keys."""

    def setUp(self):
        self.paths = pathutils.Paths(os.path.abspath(self.mktemp()))
        now = reactor.seconds()
        self.src = rt.load_key(self.paths,
                               rt.make_key(self.paths, 3600, now)[0])
        self.dst = rt.load_key(self.paths,
                               rt.make_key(self.paths, 3600, now)[0])
        self.data = os.urandom(300 * 1024) + b"end"
        self.source = os.path.join(self.paths.data_dir, "dump")
        with open(self.source, "wb") as f:
            f.write(self.data)
        self.target = os.path.join(self.paths.data_dir, "received")

    def listen(self, magic="good-magic-0", peer=None):
        listener = rt.ImportListener(
            reactor, self.dst, (peer or self.src).certificate, "127.0.0.1",
            magic, self.target, 60)
        listener.start()
        self.addCleanup(listener.stop)
        return listener

    def send(self, listener, magic="good-magic-0", own=None, peer=None):
        return rt.send_file(reactor, own or self.src,
                            (peer or self.dst).certificate, "127.0.0.1",
                            listener.port, magic, self.source)

    @defer.inlineCallbacks
    def test_transfer(self):
        listener = self.listen()
        result = yield self.send(listener)
        self.assertEqual(result["size"], len(self.data))
        with open(self.target, "rb") as f:
            self.assertEqual(f.read(), self.data)
        self.assertTrue(listener.status()["done"])
        self.assertEqual(listener.status()["sha256"],
                         hashlib.sha256(self.data).hexdigest())

    @defer.inlineCallbacks
    def test_wrong_magic_is_refused(self):
        listener = self.listen()
        err = yield self.assertFailure(self.send(listener, "bad-magic-0"),
                                       errors.ExportError)
        self.assertIn("refused the transfer: wrong magic", str(err))
        self.assertFalse(os.path.exists(self.target))
        self.assertFalse(listener.status()["done"])
        # the right one still gets through
        yield self.send(listener)
        self.assertTrue(listener.status()["done"])

    @defer.inlineCallbacks
    def test_one_sender_at_a_time(self):
        listener = self.listen()
        first = self.send(listener)
        second = self.send(listener)
        results = yield defer.DeferredList([first, second],
                                           consumeErrors=True)
        oks = [r for ok, r in results if ok]
        errs = [r.value for ok, r in results if not ok]
        # one got through, the other was refused (busy, received already,
        # or no longer listening)
        self.assertEqual(len(oks), 1, results)
        self.assertIsInstance(errs[0], errors.ExportError)
        with open(self.target, "rb") as f:
            self.assertEqual(f.read(), self.data)

    @defer.inlineCallbacks
    def test_wrong_client_certificate_is_refused(self):
        listener = self.listen()
        # a sender holding another key than the one announced
        yield self.assertFailure(self.send(listener, own=self.dst),
                                 errors.ExportError)
        self.assertFalse(os.path.exists(self.target))
        self.assertFalse(listener.status()["done"])

    @defer.inlineCallbacks
    def test_wrong_server_certificate_is_refused(self):
        # the sender expects another destination than the one listening
        listener = self.listen()
        yield self.assertFailure(self.send(listener, peer=self.src),
                                 errors.ExportError)
        self.assertFalse(os.path.exists(self.target))


class KeyCleanupTests(unittest.TestCase):

    def test_expired_keys_go(self):
        paths = pathutils.Paths(os.path.abspath(self.mktemp()))
        old = rt.make_key(paths, 60, 1000000)[0]
        new = rt.make_key(paths, 3600, 1000000)[0]
        self.assertEqual(rt.clean_keys(paths, 1000000 + 600), [old])
        self.assertRaises(errors.ExportError, rt.load_key, paths, old)
        rt.load_key(paths, new)
