"""The node daemon, ``ganeti-noded``: HTTPS with mutual TLS on port 1811.

Run with ``twist ganeti-noded --root DIR --bind ADDR`` (or twistd).  A call
is ``POST /<procedure>`` (PUT, as Ganeti's own clients send, works too) with
a JSON body holding the argument list, or an object of named arguments.
The reply is JSON ``[true, result]`` on success, ``[false, message]``
otherwise, with HTTP status 200 (success), 400 (bad arguments: the message
names the argument), 404 (unknown procedure), 413 (body too big) or 500 (the
operation failed).  Nothing a caller sends can stop the daemon: every error
is logged and answered.

Only peers presenting the cluster certificate (``<data_dir>/server.pem``)
get past the TLS handshake; see :mod:`ganeti.crypto`.

At start the daemon locks its memory (``mlockall``), so that it keeps
answering -- for example a powercycle request -- on a node whose disks are
failing (seed 003, "Node daemon availability").
"""

import ctypes
import ctypes.util
import json
import os

from klein import Klein
from OpenSSL import SSL
from twisted.application import internet, service
from twisted.internet import defer, endpoints
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.logger import Logger, globalLogPublisher
from twisted.python import usage
from twisted.web import server
from zope.interface import implementer

from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import hypervisor as hv
from ganeti import pathutils
from ganeti import storage
from ganeti.backend import instances
from ganeti.backend import os_api
from ganeti.backend import process
from ganeti.server import fallbacklog
from ganeti.server import noded_procedures
from ganeti.server.options import check_listen, service_port

__all__ = ["Options", "makeService", "NodedHttpApi", "NodedService",
           "make_procedures", "make_site", "mlock_all", "MAX_BODY"]

log = Logger()

SERVICE_NAME = "ganeti-noded"
#: Biggest request body accepted (config.data uploads are the big ones).
MAX_BODY = 256 * 1024 * 1024
# From <sys/mman.h> on Linux.
MCL_CURRENT = 1
MCL_FUTURE = 2


def default_port():
    """The ``ganeti-noded/tcp`` service port if the system has one."""
    return service_port(SERVICE_NAME, "tcp", constants.DEFAULT_NODED_PORT)


def mlock_all():
    """Lock the daemon's memory, present and future; False (and a warning)
    if that is not possible here."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                           use_errno=True)
        mlockall = libc.mlockall
    except (OSError, AttributeError) as err:
        log.warn("Cannot lock memory: libc's mlockall is unavailable ({err});"
                 " continuing unlocked", err=err)
        return False
    if mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
        err = ctypes.get_errno()
        log.warn("Cannot lock memory: mlockall failed: {err}; continuing"
                 " unlocked (the daemon may be swapped out)",
                 err=errno_text(err))
        return False
    log.info("Memory locked (mlockall)")
    return True


def errno_text(err):
    return "%s (errno %d)" % (os.strerror(err), err)


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = ("The node daemon: does the node-local work (hypervisor,"
                " storage, OS installs, files) the master asks for over"
                " mutually authenticated HTTPS.")
    optFlags = [
        ["no-mlock", None, "Do not lock the daemon's memory (mlockall)."],
        ["bootstrap", None, "Run even without the cluster certificate: serve"
         " a one-time certificate (fingerprint in the log) until the master"
         " joins this node (gnt-node add --join-fingerprint)."],
    ]
    optParameters = [
        ["log-file", None, None, "Also log to this file, falling back to"
         " the console when it cannot be written (a failing system disk)."],
        ["console", None, fallbacklog.DEFAULT_CONSOLE, "Where log messages"
         " go when the log file cannot be written."],
        ["root", None, "/", "Root directory: files are under"
         " ROOT/var/lib/ganeti (virtual cluster mode)."],
        ["bind", "b", "0.0.0.0", "Address to listen on."],
        ["port", "p", None, "TCP port [default: the ganeti-noded/tcp"
         " service, else %d]." % constants.DEFAULT_NODED_PORT, int],
        ["cert-file", None, None, "The cluster certificate (key and"
         " certificate) [default: ROOT/var/lib/ganeti/server.pem]."],
        ["os-create-timeout", None, 24 * 3600.0, "Seconds an OS create"
         " script may run.", float],
        ["master-fingerprint", None, None, "With --bootstrap: accept a join"
         " only from a master presenting the cluster certificate with this"
         " SHA-256 fingerprint (on the master: openssl x509 -noout"
         " -fingerprint -sha256 -in /var/lib/ganeti/server.pem)."],
    ]

    def __init__(self):
        usage.Options.__init__(self)
        self["os-search-path"] = []
        self["file-storage-dir"] = []
        self["extra-file-dir"] = []

    def opt_extra_file_dir(self, directory):
        """Also accept admin-listed extra files (gnt-cluster redist-conf)
        below this standard directory (repeatable; default /etc/ganeti and
        /etc/xen)."""
        self["extra-file-dir"].append(directory)

    def opt_os_search_path(self, directory):
        """Also look for OS definitions in this directory (repeatable; after
        ROOT/srv/ganeti/os and Ganeti's other standard directories)."""
        self["os-search-path"].append(directory)

    def opt_file_storage_dir(self, directory):
        """Also allow file disks in this directory (repeatable)."""
        self["file-storage-dir"].append(directory)

    def postOptions(self):
        check_listen(self, default_port)
        if self["os-create-timeout"] <= 0:
            raise usage.UsageError("--os-create-timeout must be positive")
        paths = pathutils.Paths(self["root"])
        cert_file = self["cert-file"] or crypto.server_pem_path(paths)
        if self["master-fingerprint"] is not None:
            try:
                self["master-fingerprint"] = crypto.parse_fingerprint(
                    self["master-fingerprint"])
            except errors.ParameterError as err:
                raise usage.UsageError("--master-fingerprint: %s"
                                       % err.args[-1])
        for directory in self["extra-file-dir"]:
            if not directory.startswith("/"):
                raise usage.UsageError("--extra-file-dir: %r is not an"
                                       " absolute path" % directory)
        try:
            self["certificate"] = crypto.load_cluster_certificate(cert_file)
        except errors.X509CertError as err:
            if self["bootstrap"] and not os.path.exists(cert_file):
                self["certificate"] = None  # not a member yet
            else:
                raise usage.UsageError("ganeti-noded cannot start: %s" % err)


# ---------------------------------------------------------------------------
# HTTP

def _reply(request, code, success, payload):
    try:
        body = json.dumps([success, payload])
    except (TypeError, ValueError) as err:
        code, body = 500, json.dumps(
            [False, "the result cannot be encoded as JSON: %s" % err])
    request.setResponseCode(code)
    request.setHeader(b"content-type", b"application/json")
    return body.encode("utf-8")


class NodedHttpApi(object):
    """The Klein application: routes ``POST /<procedure>`` to procedures."""

    app = Klein()

    def __init__(self, reactor, procedures, max_body=MAX_BODY,
                 procedures_for=None):
        self._reactor = reactor
        self._procedures = procedures
        self._max_body = max_body
        # request -> the procedures this caller may use (bootstrap mode)
        self._procedures_for = procedures_for

    def resource(self):
        return self.app.resource()

    @app.route("/", methods=["GET"])
    def index(self, request):
        """The procedure names (handy when exploring with curl)."""
        return _reply(request, 200, True, self._procedures.names())

    @app.route("/<string:procedure>", methods=["POST", "PUT"])
    def call(self, request, procedure):
        return defer.Deferred.fromCoroutine(self._call(request, procedure))

    async def _call(self, request, name):
        started = self._reactor.seconds()
        peer = request.getClientAddress()
        peer = getattr(peer, "host", str(peer))
        procedures = (self._procedures if self._procedures_for is None
                      else self._procedures_for(request))
        if name not in procedures.table:
            log.warn("RPC from {peer}: unknown procedure {name!r}", peer=peer,
                     name=name)
            return _reply(request, 404, False,
                          "unknown procedure %r" % name)
        length = request.getHeader(b"content-length")
        if length is not None and length.isdigit() and \
                int(length) > self._max_body:
            return _reply(request, 413, False, "request body of %s bytes is"
                          " bigger than the %d allowed" % (length,
                                                           self._max_body))
        raw = request.content.read() if request.content is not None else b""
        try:
            body = json.loads(raw.decode("utf-8")) if raw.strip() else []
        except (ValueError, UnicodeDecodeError) as err:
            return _reply(request, 400, False,
                          "%s: the request body is not JSON: %s" % (name, err))
        try:
            result = await procedures.call(name, body)
        except errors.ParameterError as err:
            msg = noded_procedures.error_message(err)
            log.info("RPC {name} from {peer}: bad arguments: {msg}",
                     name=name, peer=peer, msg=msg)
            return _reply(request, 400, False, "%s: %s" % (name, msg))
        except (errors.GenericError, OSError) as err:
            msg = noded_procedures.error_message(err)
            log.warn("RPC {name} from {peer} failed: {msg}", name=name,
                     peer=peer, msg=msg)
            return _reply(request, 500, False, "%s: %s" % (name, msg))
        except Exception as err:
            log.failure("RPC {name} from {peer}: unexpected error",
                        name=name, peer=peer)
            return _reply(request, 500, False,
                          "%s: internal error in the node daemon: %s: %s"
                          " (details in its log)" % (name,
                                                     type(err).__name__, err))
        log.debug("RPC {name} from {peer} done in {secs:.3f}s", name=name,
                  peer=peer, secs=self._reactor.seconds() - started)
        return _reply(request, 200, True, result)


# ---------------------------------------------------------------------------
# Bootstrap mode (--bootstrap): joining a cluster, see docs/membership.rst

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

    def __init__(self, paths, procedures, certificate, master_digest=None):
        self.paths = paths
        self.procedures = procedures
        self.master_digest = master_digest
        self.context = None
        self.cluster_context = None
        self._cluster_contexts = {}
        self.fingerprint = None
        procedures.on_leave = self.left
        if certificate is None:
            self.bootstrap()
        else:
            self.joined(certificate)

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
        self.cluster_context = None
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

    def joined(self, cert):
        # one context per certificate: connections made before a
        # node_leave are good again once it joins the same cluster
        digest = cert.digest()
        if digest not in self._cluster_contexts:
            self._cluster_contexts[digest] = crypto.server_context_factory(
                cert).getContext()
        self.cluster_context = self._cluster_contexts[digest]
        self.context = self.cluster_context
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
        return SSL.Connection(self.context, None)

    def procedures_for(self, request):
        conn = _tls_connection(request)
        if conn is None:
            return self.procedures
        if self.cluster_context is not None and \
                conn.get_context() is self.cluster_context:
            return self.procedures
        peer = conn.get_peer_certificate()
        digest = crypto.certificate_digest(peer) if peer is not None else None
        return noded_procedures.BootstrapProcedures(self.paths, digest,
                                                    self.joined)


# ---------------------------------------------------------------------------
# Assembly

def make_procedures(reactor, root="/", os_search_path=(),
                    file_storage_dirs=(), get_hypervisor=hv.get_hypervisor,
                    os_create_timeout=24 * 3600.0, device_mapper=None):
    """The node's :class:`NodeProcedures` (no network involved)."""
    paths = pathutils.Paths(root)
    storage_ctx = storage.StorageContext(
        runner=process.CommandRunner(reactor),
        file_storage_dirs=noded_procedures.node_file_storage_dirs(
            paths, list(file_storage_dirs)),
        device_mapper=device_mapper)
    search_path = os_api.default_search_path(paths.root) + list(os_search_path)
    os_backend = os_api.OsBackend(reactor, search_path, storage_ctx,
                                 paths.log_dir,
                                 create_timeout=os_create_timeout)
    inst = instances.InstanceBackend(reactor, paths.root, storage_ctx,
                                     get_hypervisor=get_hypervisor)
    return noded_procedures.NodeProcedures(reactor, paths, storage_ctx, inst,
                                           os_backend)


def make_site(reactor, procedures, procedures_for=None):
    site = server.Site(NodedHttpApi(reactor, procedures,
                                    procedures_for=procedures_for).resource(),
                       reactor=reactor)
    site.displayTracebacks = False
    return site


class NodedService(service.MultiService):

    def __init__(self, procedures, bind, port, mlock=True, log_file=None,
                 console=fallbacklog.DEFAULT_CONSOLE):
        service.MultiService.__init__(self)
        self.procedures = procedures
        self.bind = bind
        self.port = port
        self.mlock = mlock
        self.log_observer = None
        if log_file:
            self.log_observer = fallbacklog.ConsoleFallbackObserver(
                log_file, console)

    def startService(self):
        if self.log_observer is not None:
            globalLogPublisher.addObserver(self.log_observer)
        if self.mlock:
            mlock_all()
        log.info("ganeti-noded starting: HTTPS {bind}:{port}, root {root},"
                 " {count} procedures", bind=self.bind, port=self.port,
                 root=self.procedures.paths.root,
                 count=len(self.procedures.names()))
        service.MultiService.startService(self)

    def stopService(self):
        d = defer.maybeDeferred(service.MultiService.stopService, self)
        d.addBoth(lambda r: self.procedures.instances.close())
        d.addBoth(self._stop_logging)
        return d

    def _stop_logging(self, result):
        if self.log_observer is not None:
            globalLogPublisher.removeObserver(self.log_observer)
            self.log_observer.close()
        return result


def makeService(options, reactor=None):
    if reactor is None:
        from twisted.internet import reactor
    procedures = make_procedures(
        reactor, options["root"], os_search_path=options["os-search-path"],
        file_storage_dirs=options["file-storage-dir"],
        os_create_timeout=options["os-create-timeout"])
    if options["extra-file-dir"]:
        procedures.extra_file_dirs = (tuple(procedures.extra_file_dirs)
                                      + tuple(options["extra-file-dir"]))
    top = NodedService(procedures, options["bind"], options["port"],
                       mlock=not options["no-mlock"],
                       log_file=options["log-file"],
                       console=options["console"])
    if options["bootstrap"]:
        membership = Membership(procedures.paths, procedures,
                                options["certificate"],
                                options["master-fingerprint"])
        endpoint = endpoints.TCP4ServerEndpoint(
            reactor, options["port"], interface=options["bind"])
        factory = TLSMemoryBIOFactory(
            membership, False,
            make_site(reactor, procedures, membership.procedures_for))
    else:
        # a node that leaves the cluster stops its daemon (as Ganeti's)
        procedures.on_leave = reactor.stop
        endpoint = endpoints.SSL4ServerEndpoint(
            reactor, options["port"],
            crypto.server_context_factory(options["certificate"]),
            interface=options["bind"])
        factory = make_site(reactor, procedures)
    https = internet.StreamServerEndpointService(endpoint, factory)
    https.setName("https")
    https.setServiceParent(top)
    return top
