"""The remote API's TLS certificate, followed on disk.

``gnt-cluster renew-crypto --new-rapi-certificate`` (or
``--rapi-certificate FILE``) replaces ``rapi.pem`` on the master
candidates; the daemon serves the new certificate from the next
connection on, without a restart.  The files are looked at (``stat``) when
a connection comes, at most once every ``interval`` seconds; connections
already open keep the certificate they were made with.  A new file that
does not load (half written by hand, key and certificate not matching) is
logged and the certificate served so far stays.
"""

import os

from OpenSSL import SSL
from twisted.internet import ssl
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from twisted.logger import Logger
from zope.interface import implementer

__all__ = ["ServedCertificate", "load_options"]

log = Logger()


def load_options(cert_path, key_path):
    """The TLS server options of a certificate and key file (the same file
    for both, as rapi.pem holds them)."""
    with open(cert_path, "rb") as f:
        cert_pem = f.read()
    with open(key_path, "rb") as f:
        key_pem = f.read()
    private = ssl.PrivateCertificate.loadPEM(cert_pem + b"\n" + key_pem)
    return ssl.CertificateOptions(privateKey=private.privateKey.original,
                                  certificate=private.original)


def _stamp(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@implementer(IOpenSSLServerConnectionCreator)
class ServedCertificate(object):
    """The TLS side of ganeti-rapi's port: each new connection gets the
    certificate the files hold now."""

    def __init__(self, cert_path, key_path, clock, interval=1.0):
        self.cert_path = cert_path
        self.key_path = key_path
        self.clock = clock
        self.interval = interval
        self.reloads = 0
        self._stamps = self._current_stamps()
        self.context = load_options(cert_path, key_path).getContext()
        self._checked = clock.seconds()

    def _current_stamps(self):
        return (_stamp(self.cert_path), _stamp(self.key_path))

    def maybe_reload(self):
        now = self.clock.seconds()
        if now - self._checked < self.interval:
            return
        self._checked = now
        stamps = self._current_stamps()
        if stamps == self._stamps:
            return
        self._stamps = stamps
        try:
            self.context = load_options(self.cert_path,
                                        self.key_path).getContext()
        except Exception as err:
            log.error("The remote API certificate {path} changed but does"
                      " not load ({err}); still serving the previous one",
                      path=self.cert_path, err=err)
            return
        self.reloads += 1
        log.info("Serving the new remote API certificate of {path}",
                 path=self.cert_path)

    def serverConnectionForTLS(self, tlsProtocol):
        self.maybe_reload()
        return SSL.Connection(self.context, None)
