"""The node daemon's side of renewing the cluster's secrets without downtime.

``gnt-cluster renew-crypto`` (and ``gnt-cluster rename``, whose certificate
carries the new name) replaces the cluster certificate and the HMAC key on
every node in three steps (:mod:`ganeti.backend.rotation`): stage, switch,
forget.  docs/crypto.rst tells the whole story; here:

* :class:`ClusterTLS` is the TLS server side of a member node: it presents
  ``server.pem`` and accepts clients presenting any certificate it trusts
  (``server.pem`` and, during a renewal, ``server.pem.new`` or
  ``server.pem.old``).  The trusted set is consulted at every handshake, so
  a change applies to the next connection; connections authenticated with
  a certificate no longer trusted are cut.
* :class:`CryptoProcedures` are the procedures the master calls:
  ``cluster_cert_stage``, ``cluster_cert_switch``, ``cluster_cert_forget``,
  the same three for the HMAC key (``hmac_key_*``), and ``crypto_state``.
  The daemons using the HMAC key (confd, mond, maintd) read the key files
  themselves (:mod:`ganeti.confd.keys`).
"""

import datetime
import weakref

from OpenSSL import SSL
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from twisted.logger import Logger
from zope.interface import implementer

from ganeti import crypto
from ganeti import errors
from ganeti import ht
from ganeti.backend import rotation
from ganeti.server.noded.procedure import Arg, procedure

__all__ = ["ClusterTLS", "CryptoProcedures"]

log = Logger()

_DIGEST = ht.where(ht.NESTR, lambda v: len(v) <= 200, "a digest")


def _cert_digest(data):
    return crypto.ClusterCertificate.from_pem(data).digest()


@implementer(IOpenSSLServerConnectionCreator)
class ClusterTLS(object):
    """TLS of a member node: presents ``credentials.cert``, accepts any of
    ``credentials.trusted`` (see :class:`ganeti.crypto.NodeCredentials`).

    ``path`` is the node's ``server.pem`` (the companions are beside it).
    """

    def __init__(self, path, credentials=None):
        self.path = path
        self.credentials = None
        self.context = None
        self._pins = {}
        # one context per certificate presented; each asks _pins
        self._contexts = {}
        # the connections made, to cut those no longer trusted
        self._connections = weakref.WeakKeyDictionary()
        if credentials is not None:
            self.use(credentials)

    def use(self, credentials):
        """Present and trust what ``credentials`` say from now on."""
        self.credentials = credentials
        self._pins = {c.digest(): c.certificate
                      for c in credentials.trusted}
        digest = credentials.cert.digest()
        context = self._contexts.get(digest)
        if context is None:
            context = crypto.server_context_factory(
                credentials.cert, pins=lambda: self._pins).getContext()
            self._contexts[digest] = context
        if context is not self.context:
            log.info("Presenting the cluster certificate {digest} of {name}",
                     digest=digest[:23], name=credentials.cert.cluster_name)
        self.context = context
        self._cut_untrusted()

    def trusted_digests(self):
        return sorted(self._pins)

    def is_cluster_context(self, context):
        """Whether a connection's context is one of ours (not a bootstrap
        one)."""
        return any(context is c for c in self._contexts.values())

    def serverConnectionForTLS(self, tlsProtocol):
        conn = SSL.Connection(self.context, None)
        self._connections[tlsProtocol] = conn
        return conn

    def _cut_untrusted(self):
        """Close the connections whose client authenticated with a
        certificate we no longer trust (a handshake under way is checked
        against the new set anyway)."""
        for protocol, conn in list(self._connections.items()):
            try:
                peer = conn.get_peer_certificate()
            except SSL.Error:
                continue
            if peer is None:
                continue
            digest = crypto.certificate_digest(peer)
            if digest in self._pins:
                continue
            transport = getattr(protocol, "transport", None)
            if transport is None:
                continue
            log.info("Closing a connection authenticated with the"
                     " certificate {digest}, no longer trusted",
                     digest=digest[:23])
            transport.abortConnection()
            self._connections.pop(protocol, None)


def _check_cluster_pem(cluster_pem, now=None):
    """The ClusterCertificate of a staged PEM, or ParameterError."""
    try:
        cert = crypto.ClusterCertificate.from_pem(cluster_pem.encode("ascii"))
    except (errors.X509CertError, UnicodeEncodeError) as err:
        raise errors.ParameterError("cluster_pem", "cluster_pem: %s" % err)
    if now is None:
        now = datetime.datetime.now(datetime.timezone.utc)
    if not cert.not_valid_before <= now <= cert.not_valid_after:
        raise errors.ParameterError(
            "cluster_pem", "cluster_pem: the certificate is not valid now"
            " (valid from %s to %s)" % (cert.not_valid_before,
                                        cert.not_valid_after))
    return cert


def _check_key(hmac_key):
    try:
        data = hmac_key.encode("ascii")
    except UnicodeEncodeError:
        raise errors.ParameterError("hmac_key", "hmac_key must be ASCII text")
    if not data.strip():
        raise errors.ParameterError("hmac_key", "hmac_key must not be empty")
    return data


class CryptoProcedures(object):
    """Staging, switching to and forgetting the cluster certificate and
    the HMAC key (a mixin of the node's procedures)."""

    #: the daemon's :class:`ClusterTLS` (None where no daemon serves: the
    #: files are then all there is)
    cluster_tls = None

    def _cert_path(self):
        if self.cluster_tls is not None:
            return self.cluster_tls.path
        return crypto.server_pem_path(self.paths)

    def _reload_credentials(self, problems=None):
        """File work: the credentials as the files say now."""
        return crypto.load_node_credentials(self._cert_path(), problems)

    def _apply(self, credentials, problems):
        for problem in problems:
            log.warn("{problem}", problem=problem)
        if self.cluster_tls is not None:
            self.cluster_tls.use(credentials)

    async def _cert_step(self, step, *args):
        problems = []

        def work():
            result = step(self._cert_path(), *args)
            return result, self._reload_credentials(problems)
        result, credentials = await self.run_ordered(work)
        self._apply(credentials, problems)
        return result

    @procedure(Arg("cluster_pem", ht.NESTR))
    async def cluster_cert_stage(self, cluster_pem):
        """Stage a new cluster certificate (key and certificate, PEM):
        clients presenting it are accepted from now on; this daemon
        still presents the current one.  Returns its SHA-256 digest."""
        cert = _check_cluster_pem(cluster_pem)
        await self._cert_step(rotation.stage, cert.pem)
        log.info("Staged the cluster certificate {digest} of {name}",
                 digest=cert.digest()[:23], name=cert.cluster_name)
        return cert.digest()

    @procedure(Arg("digest", _DIGEST))
    async def cluster_cert_switch(self, digest):
        """Present the staged certificate (SHA-256 ``digest``) from now on;
        the one it replaces stays trusted until cluster_cert_forget.
        Returns False if it was presented already."""
        switched = await self._cert_step(rotation.switch, _cert_digest,
                                         digest)
        return switched

    @procedure(Arg("digest", _DIGEST))
    async def cluster_cert_forget(self, digest):
        """Trust only the certificate presented, which must have
        ``digest`` (also the way to drop a staged certificate that will
        not be switched to); connections of other certificates are
        closed.  Returns the files removed."""
        removed = await self._cert_step(rotation.forget, _cert_digest,
                                        digest)
        if removed:
            log.info("Trusting only the cluster certificate {digest} now",
                     digest=digest[:23])
        return removed

    # --- the HMAC key ------------------------------------------------------

    @procedure(Arg("hmac_key", ht.NESTR))
    async def hmac_key_stage(self, hmac_key):
        """Stage a new HMAC key: the daemons using the key accept it from
        now on, still signing with the current one.  Returns its digest
        (hex SHA-256)."""
        data = _check_key(hmac_key)
        await self.run_ordered(rotation.stage, self.paths.hmac_key_file,
                               data)
        log.info("Staged a new HMAC key")
        return rotation.key_digest(data)

    @procedure(Arg("digest", _DIGEST))
    async def hmac_key_switch(self, digest):
        """The staged key (hex SHA-256 ``digest``) becomes the key daemons
        sign with; the old one stays accepted until hmac_key_forget."""
        switched = await self.run_ordered(
            rotation.switch, self.paths.hmac_key_file, rotation.key_digest,
            digest)
        if switched:
            log.info("Switched to the new HMAC key")
        return switched

    @procedure(Arg("digest", _DIGEST))
    async def hmac_key_forget(self, digest):
        """Accept only the current key (which must have ``digest``)."""
        return await self.run_ordered(
            rotation.forget, self.paths.hmac_key_file, rotation.key_digest,
            digest)

    @procedure()
    async def crypto_state(self):
        """What this node holds: ``{"cluster_certificate": {...},
        "hmac_key": {...}}``, each ``{"current", "staged", "previous"}``
        digests (None: no such file), and the certificates the daemon
        trusts now."""
        def work():
            return {
                "cluster_certificate": rotation.state(self._cert_path(),
                                                      _cert_digest),
                "hmac_key": rotation.state(self.paths.hmac_key_file,
                                           rotation.key_digest)}
        result = await self.run_blocking(work)
        if self.cluster_tls is not None:
            result["trusted"] = self.cluster_tls.trusted_digests()
        return result
