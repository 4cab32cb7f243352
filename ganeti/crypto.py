"""The cluster certificate and the mutual-TLS contexts built on it.

``gnt-cluster init`` creates one self-signed certificate for the cluster
(CN and subjectAltName = the cluster name) and every node keeps it, key and
certificate together, in ``<data_dir>/server.pem`` (mode 0400), as Ganeti
does.  Node daemons serve with it and the master calls them with it.

Why pinning authenticates here: every node presents the *same* certificate,
and nodes are called by IP address, so neither a CA chain nor a host name
tells one node from another or from an impostor.  What proves membership of
the cluster is possession of the cluster's private key.  So both ends
require the peer to present exactly our certificate (compared by SHA-256
digest of its DER encoding) and to complete the TLS handshake with it, which
only a holder of the key can do.  OpenSSL also checks the certificate itself
(signature, validity dates) against our certificate as the only trust root,
and the client checks with service-identity that the server's certificate is
issued for the cluster name; those are sanity checks, the pin is the proof.

Renewing the certificate without stopping anything (``gnt-cluster
renew-crypto``, docs/crypto.rst) needs a while in which two certificates
are good: both ends may then trust a *set* of pinned certificates.  Next to
``server.pem`` a node may hold ``server.pem.new`` (staged: trusted, not yet
presented) and ``server.pem.old`` (the one just replaced: still trusted);
:func:`load_node_credentials` reads all three.
"""

import binascii
import datetime
import hashlib
import ipaddress
import os
import re

import attr
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from OpenSSL import SSL
from service_identity import VerificationError
from service_identity.cryptography import verify_certificate_hostname
from service_identity.hazmat import DNS_ID, verify_service_identity
from service_identity.pyopenssl import extract_patterns
from twisted.internet import ssl
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator
from twisted.logger import Logger
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

from ganeti import errors
from ganeti.utils import io

__all__ = [
    "SERVER_PEM", "DEFAULT_VALIDITY_DAYS", "ClusterCertificate",
    "server_pem_path", "generate_cluster_certificate", "new_cluster_certificate",
    "load_cluster_certificate", "NodeCredentials", "load_node_credentials",
    "STAGED_SUFFIX", "PREVIOUS_SUFFIX",
    "certificate_digest", "format_candidate_certs", "parse_candidate_certs",
    "server_context_factory", "ClientPolicy", "AnyServerPolicy",
    "parse_fingerprint", "peer_pinned_options", "new_private_key",
    "format_fingerprint", "write_domain_secret", "write_hmac_key",
]

log = Logger()

#: File name of the cluster certificate (key + certificate) in the data dir.
SERVER_PEM = "server.pem"
#: Ganeti's default validity of the cluster certificate: five years.
DEFAULT_VALIDITY_DAYS = 5 * 365
KEY_TYPES = ("rsa", "ec")


def server_pem_path(paths):
    """Where the cluster certificate lives for a :class:`Paths`."""
    return os.path.join(paths.data_dir, SERVER_PEM)


def _new_key(key_type):
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    raise errors.X509CertError("key_type must be one of %s, not %r"
                               % (", ".join(KEY_TYPES), key_type))


def _build_certificate(cluster_name, key, validity_days, now):
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cluster_name)])
    # Allow a little clock skew between nodes for a brand new certificate.
    not_before = now - datetime.timedelta(days=1)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(now + datetime.timedelta(days=validity_days))
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(cluster_name)]), critical=False)
        # Both ends of every connection use this one certificate.
        .add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.SERVER_AUTH,
             ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(
            key.public_key()), critical=False))
    return builder.sign(key, hashes.SHA256())


def _check_cluster_name(cluster_name):
    if not isinstance(cluster_name, str) or not cluster_name:
        raise errors.X509CertError("cluster_name must be a non-empty string")
    try:
        ipaddress.ip_address(cluster_name)
    except ValueError:
        pass
    else:
        raise errors.X509CertError(
            "cluster_name must be a DNS name, not an IP address (%s)"
            % cluster_name)
    try:
        DNS_ID(cluster_name)
    except ValueError as err:
        raise errors.X509CertError("cluster_name %r is not a valid DNS name:"
                                   " %s" % (cluster_name, err))


def new_cluster_certificate(cluster_name,
                            validity_days=DEFAULT_VALIDITY_DAYS,
                            key_type="rsa", now=None):
    """A new cluster certificate (key included), in memory only: a
    :class:`ClusterCertificate` without a path."""
    _check_cluster_name(cluster_name)
    if isinstance(validity_days, bool) or \
            not isinstance(validity_days, int) or validity_days < 1:
        raise errors.X509CertError("validity_days must be a positive integer,"
                                   " not %r" % (validity_days,))
    if now is None:
        now = datetime.datetime.now(datetime.timezone.utc)
    key = _new_key(key_type)
    cert = _build_certificate(cluster_name, key, validity_days, now)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()) + cert.public_bytes(
            serialization.Encoding.PEM)
    return ClusterCertificate.from_pem(pem)


def generate_cluster_certificate(path, cluster_name,
                                 validity_days=DEFAULT_VALIDITY_DAYS,
                                 key_type="rsa", now=None):
    """Create the cluster certificate and write it to ``path`` (mode 0400).

    An existing file is replaced atomically.  Returns the
    :class:`ClusterCertificate`.
    """
    cert = new_cluster_certificate(cluster_name, validity_days, key_type, now)
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o750,
                exist_ok=True)
    io.atomic_write(path, cert.pem, mode=0o400)
    return attr.evolve(cert, path=path)


def certificate_digest(cert, algorithm="sha256"):
    """Digest of a certificate's DER form as ``AB:CD:...`` (pyOpenSSL style).

    ``cert`` is a cryptography or pyOpenSSL certificate, or DER bytes.
    Ganeti writes SHA-1 digests into ``ssconf_master_candidates_certs``.
    """
    if isinstance(cert, bytes):
        der = cert
    elif isinstance(cert, x509.Certificate):
        der = cert.public_bytes(serialization.Encoding.DER)
    else:  # OpenSSL.crypto.X509
        der = cert.to_cryptography().public_bytes(serialization.Encoding.DER)
    try:
        h = hashlib.new(algorithm, der)
    except ValueError:
        raise errors.X509CertError("unknown digest algorithm %r" % algorithm)
    return ":".join("%02X" % b for b in h.digest())


def format_candidate_certs(digests):
    """``{node uuid: digest}`` as ssconf_master_candidates_certs text."""
    return "".join("%s=%s\n" % (uuid, digests[uuid]) for uuid in
                   sorted(digests))


def parse_candidate_certs(text):
    """The inverse of :func:`format_candidate_certs`."""
    result = {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        uuid, sep, digest = line.partition("=")
        if not sep:
            raise errors.X509CertError(
                "candidate certificate line %r is not <uuid>=<digest>" % line)
        result[uuid] = digest
    return result


@attr.s(frozen=True, repr=False)
class ClusterCertificate(object):
    """The loaded cluster certificate: what a TLS context needs of it."""
    key_pem = attr.ib()
    cert_pem = attr.ib()
    certificate = attr.ib()       # cryptography x509.Certificate
    path = attr.ib(default=None)

    def __repr__(self):
        return "<ClusterCertificate %s %s>" % (self.cluster_name,
                                               self.digest()[:23])

    @classmethod
    def from_pem(cls, pem, path=None):
        where = path or "the certificate data"
        try:
            cert = x509.load_pem_x509_certificate(pem)
        except ValueError as err:
            raise errors.X509CertError("%s holds no PEM certificate: %s"
                                       % (where, err))
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError) as err:
            raise errors.X509CertError("%s holds no usable private key: %s"
                                       % (where, err))
        pub = serialization.PublicFormat.SubjectPublicKeyInfo
        enc = serialization.Encoding.PEM
        if (key.public_key().public_bytes(enc, pub)
                != cert.public_key().public_bytes(enc, pub)):
            raise errors.X509CertError("%s: the private key does not belong to"
                                       " the certificate" % where)
        key_pem = key.private_bytes(
            enc, serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption())
        return cls(key_pem=key_pem, cert_pem=cert.public_bytes(enc),
                   certificate=cert, path=path)

    @property
    def pem(self):
        """Key and certificate as ``server.pem`` holds them."""
        return self.key_pem + self.cert_pem

    @property
    def cluster_name(self):
        names = self.certificate.subject.get_attributes_for_oid(
            NameOID.COMMON_NAME)
        return names[0].value if names else None

    @property
    def not_valid_after(self):
        return self.certificate.not_valid_after_utc

    @property
    def not_valid_before(self):
        return self.certificate.not_valid_before_utc

    def digest(self, algorithm="sha256"):
        return certificate_digest(self.certificate, algorithm)

    def check_cluster_name(self, cluster_name):
        """Raise X509CertError unless issued for ``cluster_name``."""
        try:
            verify_certificate_hostname(self.certificate, cluster_name)
        except VerificationError as err:
            raise errors.X509CertError(
                "the cluster certificate %s is not issued for cluster %s: %s"
                % (self.path or "", cluster_name, err))

    def private_certificate(self):
        """The twisted.internet.ssl.PrivateCertificate of key + certificate."""
        return ssl.PrivateCertificate.loadPEM(self.key_pem + self.cert_pem)


def load_cluster_certificate(path, cluster_name=None):
    """Read ``server.pem``; refuse a missing, broken or foreign one clearly."""
    try:
        with open(path, "rb") as f:
            pem = f.read()
    except FileNotFoundError:
        raise errors.X509CertError(
            "the cluster certificate %s does not exist (it is created by"
            " 'gnt-cluster init' and copied to nodes by 'gnt-node add')"
            % path)
    except OSError as err:
        raise errors.X509CertError("cannot read the cluster certificate %s: %s"
                                   % (path, err.strerror))
    cert = ClusterCertificate.from_pem(pem, path=path)
    if cluster_name is not None:
        cert.check_cluster_name(cluster_name)
    return cert


#: Beside server.pem during a renewal: the staged certificate (trusted,
#: not yet presented) and the one just replaced (still trusted).
STAGED_SUFFIX = ".new"
PREVIOUS_SUFFIX = ".old"


@attr.s(frozen=True)
class NodeCredentials(object):
    """The certificate a node presents and every one it trusts (the
    presented one first)."""
    cert = attr.ib()
    trusted = attr.ib(converter=tuple)

    def digests(self):
        return [c.digest() for c in self.trusted]


def load_node_credentials(path, problems=None):
    """``server.pem`` at ``path`` and, when a renewal left them there, the
    staged and the previous certificate beside it.  A missing or broken
    ``server.pem`` is an error; a broken companion is left out (trusting
    less is the safe side) and logged, or added to the list ``problems``
    (in a worker thread, which must not log)."""
    cert = load_cluster_certificate(path)
    trusted = [cert]
    for suffix in (STAGED_SUFFIX, PREVIOUS_SUFFIX):
        other = path + suffix
        if not os.path.exists(other):
            continue
        try:
            extra = load_cluster_certificate(other)
        except errors.X509CertError as err:
            if problems is None:
                log.warn("Not trusting {path}: {err}", path=other, err=err)
            else:
                problems.append("Not trusting %s: %s" % (other, err))
            continue
        if extra.digest() not in [c.digest() for c in trusted]:
            trusted.append(extra)
    return NodeCredentials(cert, trusted)


# ---------------------------------------------------------------------------
# TLS contexts

def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


def _pinned_verifier(pinned, role, names=None, now=_utcnow,
                     what="the cluster certificate"):
    """An OpenSSL verify callback accepting only the pinned certificates.

    ``pinned()`` returns a dict of SHA-256 digests to the certificates
    (cryptography x509) we trust, asked at each handshake; ``names`` maps some of them to the cluster name the
    peer's certificate must be issued for.  OpenSSL calls the callback once
    per certificate of the peer's chain, root first; only the leaf (depth
    0) is what the peer proved it holds the key of.  OpenSSL's own verdict
    on the leaf is not used: with two trusted certificates of one subject
    (during a renewal) it picks one as the issuer of both and fails the
    other.  The leaf is one of ours byte for byte, so what is left to check
    is its validity dates, done here.
    """
    def verify(conn, x509cert, errno, depth, ok):
        if depth != 0:
            return bool(ok)
        try:
            digest = certificate_digest(x509cert)
            cert = pinned().get(digest)
            if cert is None:
                log.warn("TLS: refusing {role} certificate {digest}: it is"
                         " not {what}", role=role, digest=digest[:23],
                         what=what)
                return False
            moment = now()
            if not (cert.not_valid_before_utc <= moment <=
                    cert.not_valid_after_utc):
                log.warn("TLS: the {role} presented {what} but it is not"
                         " valid now (valid {start} to {end})", what=what,
                         role=role, start=cert.not_valid_before_utc,
                         end=cert.not_valid_after_utc)
                return False
            name = (names or {}).get(digest)
            if name is not None:
                verify_service_identity(extract_patterns(x509cert),
                                        [DNS_ID(name)], [])
            return True
        except VerificationError as err:
            log.warn("TLS: {role} certificate is not for cluster {name}:"
                     " {err}", role=role, name=name, err=err)
            return False
        except Exception:
            # An exception escaping an OpenSSL callback is lost; log it here.
            log.failure("TLS: error while verifying the {role} certificate",
                        role=role)
            return False
    return verify


def _pins(cert, trusted):
    """{digest: x509 certificate} of ``cert`` and ``trusted``."""
    pins = {cert.digest(): cert.certificate}
    for other in trusted:
        pins[other.digest()] = other.certificate
    return pins


def _options(cert):
    # Our own certificate as the trust root makes OpenSSL ask the peer for
    # its certificate; the verify callback decides (see _pinned_verifier).
    private = cert.private_certificate()
    return ssl.CertificateOptions(
        privateKey=private.privateKey.original,
        certificate=private.original,
        verify=True, requireCertificate=True,
        caCerts=[ssl.Certificate.loadPEM(cert.cert_pem).original],
        raiseMinimumTo=ssl.TLSVersion.TLSv1_2)


def peer_pinned_options(own, peer, role):
    """For a connection between two parties each holding a key of its own
    (not the cluster's, e.g. the nodes of two clusters during a move):
    CertificateOptions presenting ``own`` (a :class:`ClusterCertificate`)
    and an OpenSSL verify callback accepting only ``peer`` (a cryptography
    certificate), valid now.  The caller installs the callback."""
    pins = {certificate_digest(peer): peer}
    return _options(own), _pinned_verifier(
        lambda: pins, role, what="the certificate given for it")


def new_private_key(key_type="rsa"):
    """A new private key (``rsa``: 2048 bits, ``ec``: P-256)."""
    return _new_key(key_type)


def server_context_factory(cert, trusted=(), pins=None):
    """Context factory for a server presenting ``cert`` and demanding it
    (or one of ``trusted``, during a renewal) from its clients; or, given
    ``pins``, whatever ``pins()`` returns at each handshake ({SHA-256
    digest: x509 certificate}).

    A client without a certificate, or with any other certificate, fails the
    handshake; the listening server is not affected.
    """
    options = _options(cert)
    ctx = options.getContext()  # CertificateOptions caches its context
    if pins is None:
        fixed = _pins(cert, trusted)

        def pins():
            return fixed
    ctx.set_verify(
        SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT |
        SSL.VERIFY_CLIENT_ONCE,
        _pinned_verifier(pins, "client"))
    return options


@implementer(IOpenSSLClientConnectionCreator)
class _PinnedClientCreator(object):
    def __init__(self, context, verifier):
        self._context = context
        self._verifier = verifier

    def clientConnectionForTLS(self, tlsProtocol):
        conn = SSL.Connection(self._context, None)
        conn.set_app_data(tlsProtocol)
        conn.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT,
                        self._verifier)
        return conn


@implementer(IPolicyForHTTPS)
class ClientPolicy(object):
    """HTTPS policy for the master's RPC client (and anything else calling
    node daemons): presents the cluster certificate and accepts only a
    server presenting the same one, issued for ``cluster_name`` (by default
    the name in our own certificate), or one of ``trusted`` (during a
    renewal; each issued for the name it carries).  The host name we
    connect to (an IP address) plays no part, see the module docstring.
    """

    def __init__(self, cert, cluster_name=None, trusted=()):
        self.cert = cert
        self.trusted = tuple(trusted)
        names = {other.digest(): other.cluster_name for other in trusted}
        names[cert.digest()] = cluster_name or cert.cluster_name
        pins = _pins(cert, trusted)
        self._creator = _PinnedClientCreator(
            _options(cert).getContext(),
            _pinned_verifier(lambda: pins, "server", names=names))

    def creatorForNetloc(self, hostname, port):
        return self._creator


@implementer(IOpenSSLClientConnectionCreator)
class _PlainClientCreator(object):
    def __init__(self, context):
        self._context = context

    def clientConnectionForTLS(self, tlsProtocol):
        conn = SSL.Connection(self._context, None)
        conn.set_app_data(tlsProtocol)
        return conn


@implementer(IPolicyForHTTPS)
class AnyServerPolicy(object):
    """HTTPS policy that presents no certificate and accepts any server:
    only for checking that a daemon answers (the watcher's probes), never
    for talking to it."""

    def creatorForNetloc(self, hostname, port):
        ctx = SSL.Context(SSL.TLS_METHOD)
        ctx.set_verify(SSL.VERIFY_NONE, lambda *a: True)
        return _PlainClientCreator(ctx)


# --- fingerprints as admins type them --------------------------------------

_HEX_RE = re.compile(r"^[0-9a-fA-F]{64}$")


def parse_fingerprint(text):
    """A SHA-256 certificate fingerprint as the admin types it
    (``SHA256:AB:CD:...``, with or without the prefix and the colons) in
    the form :func:`certificate_digest` gives (``AB:CD:...``);
    ParameterError otherwise."""
    if not isinstance(text, str):
        raise errors.ParameterError("join_fingerprint",
                                    "a fingerprint must be a string")
    value = text.strip()
    if value.lower().startswith("sha256 fingerprint="):   # openssl x509
        value = value.split("=", 1)[1]
    if value.lower().startswith("sha256:"):
        value = value[len("sha256:"):]
    hexdigits = value.replace(":", "")
    if not _HEX_RE.match(hexdigits):
        raise errors.ParameterError(
            "join_fingerprint",
            "'%s' is not a SHA-256 certificate fingerprint (SHA256: and 64"
            " hexadecimal digits, colons allowed)" % text)
    hexdigits = hexdigits.upper()
    return ":".join(hexdigits[i:i + 2] for i in range(0, 64, 2))


def format_fingerprint(digest):
    """``SHA256:AB:CD:...`` for a digest as certificate_digest gives it."""
    return "SHA256:" + digest


# --- the cluster HMAC key ----------------------------------------------------

def write_hmac_key(path):
    """A new cluster HMAC key as Ganeti writes it: 40 hex chars + newline.

    The key signs confd's messages (and maintenance reports); it is shared
    by every node of the cluster.
    """
    key = binascii.hexlify(os.urandom(20)) + b"\n"
    io.atomic_write(path, key, mode=0o400)
    return key


def write_domain_secret(path):
    """A new cluster domain secret, in the HMAC key's format.

    Clusters sharing it trust each other's signed messages when instances
    move between them (remote export and import).
    """
    return write_hmac_key(path)
