"""A node daemon started with ``--bootstrap``: joining a cluster.

See docs/membership.rst.  Until it holds the cluster certificate, the daemon
serves a one-time self-signed certificate and only the bootstrap procedures.
"""

import os

from OpenSSL import SSL
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from twisted.logger import Logger
from zope.interface import implementer

from ganeti import crypto
from ganeti.server.noded.renewal import ClusterTLS
from ganeti.server.noded.membership import BootstrapProcedures

log = Logger()

FINGERPRINT_FILE = "ganeti-noded.fingerprint"


def one_time_certificate(now=None, days=7):
    """A fresh self-signed key and certificate, kept in memory only:
    ``(key_pem, cert_pem)``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import datetime
    if now is None:
        now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                         "ganeti-noded-bootstrap")])
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .sign(key, hashes.SHA256()))
    enc = serialization.Encoding.PEM
    return (key.private_bytes(enc, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()),
            cert.public_bytes(enc))


def bootstrap_context(key_pem, cert_pem, master_digest=None):
    """TLS server context of a node not yet joined: serves the one-time
    certificate; requires a client certificate, which must be the one with
    ``master_digest`` if given (else any: first come, first joined)."""
    from twisted.internet import ssl as tssl
    private = tssl.PrivateCertificate.loadPEM(key_pem + cert_pem)
    options = tssl.CertificateOptions(
        privateKey=private.privateKey.original,
        certificate=private.original,
        raiseMinimumTo=tssl.TLSVersion.TLSv1_2)
    ctx = options.getContext()

    def verify(conn, x509cert, errno, depth, ok):
        if depth != 0 or master_digest is None:
            return True
        digest = crypto.certificate_digest(x509cert)
        if digest != master_digest:
            log.warn("bootstrap: refusing client certificate {digest}: not"
                     " the master's (--master-fingerprint)",
                     digest=digest[:23])
            return False
        return True
    ctx.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT |
                   SSL.VERIFY_CLIENT_ONCE, verify)
    return ctx


def _tls_connection(request):
    transport = getattr(request, "transport", None)
    get_handle = getattr(transport, "getHandle", None)
    if get_handle is None:
        return None
    handle = get_handle()
    return handle if isinstance(handle, SSL.Connection) else None


@implementer(IOpenSSLServerConnectionCreator)
class Membership(object):
    """TLS and procedures of a node daemon started with ``--bootstrap``.

    Without the cluster certificate it serves a one-time self-signed one
    (fingerprint logged and written to ``<run dir>/ganeti-noded.fingerprint``)
    and only ``version`` and ``join``.  Once joined, new connections get the
    cluster certificate's context (mutual TLS, the cluster certificate only)
    and every procedure; a connection made in bootstrap mode never gets
    more than the bootstrap procedures.  After ``node_leave`` it starts over
    with a new one-time certificate.
    """

    def __init__(self, paths, procedures, certificate, master_digest=None,
                 credentials=None):
        self.paths = paths
        self.procedures = procedures
        self.master_digest = master_digest
        self.context = None
        self.member = False
        # the cluster side, as a daemon started without --bootstrap has it
        # (certificate renewals included)
        self.tls = ClusterTLS(crypto.server_pem_path(paths))
        procedures.cluster_tls = self.tls
        self.fingerprint = None
        procedures.on_leave = self.left
        if certificate is None:
            self.bootstrap()
        else:
            self.joined(certificate, credentials)

    @property
    def fingerprint_file(self):
        return os.path.join(self.paths.run_dir, FINGERPRINT_FILE)

    def bootstrap(self):
        key_pem, cert_pem = one_time_certificate()
        from cryptography import x509
        digest = crypto.certificate_digest(
            x509.load_pem_x509_certificate(cert_pem))
        self.fingerprint = crypto.format_fingerprint(digest)
        self.context = bootstrap_context(key_pem, cert_pem,
                                         self.master_digest)
        self.member = False
        try:
            os.makedirs(self.paths.run_dir, mode=0o750, exist_ok=True)
            with open(self.fingerprint_file + ".new", "w") as f:
                f.write(self.fingerprint + "\n")
            os.rename(self.fingerprint_file + ".new", self.fingerprint_file)
        except OSError as err:
            log.warn("cannot write {path}: {err}", path=self.fingerprint_file,
                     err=err)
        log.info("Not a cluster member yet (bootstrap mode). One-time"
                 " certificate fingerprint: {fp} -- on the master: gnt-node"
                 " add --primary-ip <this node's IP> --join-fingerprint {fp}"
                 " <node name>", fp=self.fingerprint)

    def joined(self, cert, credentials=None):
        # the cluster side keeps one context per certificate: connections
        # made before a node_leave are good again once it joins the same
        # cluster
        if credentials is None:
            credentials = crypto.NodeCredentials(cert, [cert])
        self.tls.use(credentials)
        self.member = True
        self.context = None
        self.fingerprint = None
        try:
            os.unlink(self.fingerprint_file)
        except OSError:
            pass
        log.info("Serving with the cluster certificate of {name}",
                 name=cert.cluster_name)

    def left(self):
        log.info("Left the cluster; back in bootstrap mode")
        self.bootstrap()

    def serverConnectionForTLS(self, tlsProtocol):
        if self.member:
            return self.tls.serverConnectionForTLS(tlsProtocol)
        return SSL.Connection(self.context, None)

    def procedures_for(self, request):
        conn = _tls_connection(request)
        if conn is None:
            return self.procedures
        if self.tls.is_cluster_context(conn.get_context()):
            return self.procedures
        peer = conn.get_peer_certificate()
        digest = crypto.certificate_digest(peer) if peer is not None else None
        return BootstrapProcedures(self.paths, digest, self.joined,
                                   self.procedures.run_blocking,
                                   self.procedures.ordered_lock)
