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
import ipaddress
import json
import os
import socket

from klein import Klein
from twisted.application import internet, service
from twisted.internet import defer, endpoints
from twisted.logger import Logger
from twisted.python import usage
from twisted.web import server

from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import hypervisor as hv
from ganeti import pathutils
from ganeti import storage
from ganeti.backend import instances
from ganeti.backend import os as osapi
from ganeti.backend import process
from ganeti.server import noded_procedures

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
    try:
        return socket.getservbyname(SERVICE_NAME, "tcp")
    except OSError:
        return constants.DEFAULT_NODED_PORT


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
    ]
    optParameters = [
        ["root", None, "/", "Root directory: files are under"
         " ROOT/var/lib/ganeti (virtual cluster mode)."],
        ["bind", "b", "0.0.0.0", "Address to listen on."],
        ["port", "p", None, "TCP port [default: the ganeti-noded/tcp"
         " service, else %d]." % constants.DEFAULT_NODED_PORT, int],
        ["cert-file", None, None, "The cluster certificate (key and"
         " certificate) [default: ROOT/var/lib/ganeti/server.pem]."],
        ["os-create-timeout", None, 24 * 3600.0, "Seconds an OS create"
         " script may run.", float],
    ]

    def __init__(self):
        usage.Options.__init__(self)
        self["os-search-path"] = []
        self["file-storage-dir"] = []

    def opt_os_search_path(self, directory):
        """Also look for OS definitions in this directory (repeatable; after
        ROOT/srv/ganeti/os and Ganeti's other standard directories)."""
        self["os-search-path"].append(directory)

    def opt_file_storage_dir(self, directory):
        """Also allow file disks in this directory (repeatable)."""
        self["file-storage-dir"].append(directory)

    def postOptions(self):
        if self["port"] is None:
            self["port"] = default_port()
        if not 0 <= self["port"] <= 65535:
            raise usage.UsageError("--port: %d is not a port number (0-65535)"
                                   % self["port"])
        try:
            ipaddress.ip_address(self["bind"])
        except ValueError:
            raise usage.UsageError("--bind: %r is not an IP address"
                                   % self["bind"])
        if self["os-create-timeout"] <= 0:
            raise usage.UsageError("--os-create-timeout must be positive")
        paths = pathutils.Paths(self["root"])
        cert_file = self["cert-file"] or crypto.server_pem_path(paths)
        try:
            self["certificate"] = crypto.load_cluster_certificate(cert_file)
        except errors.X509CertError as err:
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

    def __init__(self, reactor, procedures, max_body=MAX_BODY):
        self._reactor = reactor
        self._procedures = procedures
        self._max_body = max_body

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
        if name not in self._procedures.table:
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
            result = await self._procedures.call(name, body)
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
    search_path = osapi.default_search_path(paths.root) + list(os_search_path)
    os_backend = osapi.OsBackend(reactor, search_path, storage_ctx,
                                 paths.log_dir,
                                 create_timeout=os_create_timeout)
    inst = instances.InstanceBackend(reactor, paths.root, storage_ctx,
                                     get_hypervisor=get_hypervisor)
    return noded_procedures.NodeProcedures(reactor, paths, storage_ctx, inst,
                                           os_backend)


def make_site(reactor, procedures):
    site = server.Site(NodedHttpApi(reactor, procedures).resource(),
                       reactor=reactor)
    site.displayTracebacks = False
    return site


class NodedService(service.MultiService):

    def __init__(self, procedures, bind, port, mlock=True):
        service.MultiService.__init__(self)
        self.procedures = procedures
        self.bind = bind
        self.port = port
        self.mlock = mlock

    def startService(self):
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
        return d


def makeService(options, reactor=None):
    if reactor is None:
        from twisted.internet import reactor
    procedures = make_procedures(
        reactor, options["root"], os_search_path=options["os-search-path"],
        file_storage_dirs=options["file-storage-dir"],
        os_create_timeout=options["os-create-timeout"])
    top = NodedService(procedures, options["bind"], options["port"],
                       mlock=not options["no-mlock"])
    endpoint = endpoints.SSL4ServerEndpoint(
        reactor, options["port"],
        crypto.server_context_factory(options["certificate"]),
        interface=options["bind"])
    https = internet.StreamServerEndpointService(
        endpoint, make_site(reactor, procedures))
    https.setName("https")
    https.setServiceParent(top)
    return top
