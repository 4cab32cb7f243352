"""ganeti-rapi follows rapi.pem on disk: a renewed certificate is served
from the next connection on (ganeti.rapi.certificate)."""

import os

from OpenSSL import SSL
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import globalLogPublisher

from ganeti import crypto
from ganeti.rapi import certificate
from ganeti.utils import io

from tests.fakes import ClockTestCase
from tests.test_crypto import cluster_cert


def served_digest(served):
    """The certificate a new connection gets (SHA-256 digest)."""
    conn = served.serverConnectionForTLS(None)
    return crypto.certificate_digest(conn.get_certificate())


class ServedCertificateTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        base = self.mktemp()
        self.first = cluster_cert(base, "rapi.example.com")
        self.second = cluster_cert(base, "rapi.example.com")
        self.path = os.path.join(os.path.abspath(self.mktemp()), "rapi.pem")
        os.makedirs(os.path.dirname(self.path))
        io.atomic_write(self.path, self.first.pem, mode=0o400)
        self.served = certificate.ServedCertificate(self.path, self.path,
                                                    self.clock)

    def test_new_file_served_from_the_next_connection(self):
        self.assertEqual(served_digest(self.served), self.first.digest())
        io.atomic_write(self.path, self.second.pem, mode=0o400)
        # looked at once a second at most
        self.assertEqual(served_digest(self.served), self.first.digest())
        self.clock.advance(1)
        self.assertEqual(served_digest(self.served), self.second.digest())
        self.assertEqual(self.served.reloads, 1)
        self.assertIsInstance(self.served.serverConnectionForTLS(None),
                              SSL.Connection)

    def test_broken_file_keeps_the_certificate_served(self):
        logged = EventLoggingObserver.createWithCleanup(self,
                                                        globalLogPublisher)
        io.atomic_write(self.path, self.second.cert_pem, mode=0o400)  # no key
        self.clock.advance(1)
        self.assertEqual(served_digest(self.served), self.first.digest())
        self.assertTrue(any("does not load" in e.get("log_format", "")
                            for e in logged), list(logged))
        io.atomic_write(self.path, self.second.pem, mode=0o400)
        self.clock.advance(1)
        self.assertEqual(served_digest(self.served), self.second.digest())
