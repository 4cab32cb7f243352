"""ganeti-rapi: the remote API daemon (RAPI v2 over HTTPS, port 5080).

Serves the Klein app of :mod:`ganeti.rapi.app` with the cluster's RAPI
certificate (``<data_dir>/rapi.pem``, key and certificate in one file,
created by ``gnt-cluster init``); plain HTTP only with ``--no-ssl``.  Users
and their rights come from ``<data_dir>/rapi/users``, re-read when it
changes.  Queries and jobs go to the master daemon over its luxi socket.
"""

import os

from twisted.application import service
from twisted.application.internet import StreamServerEndpointService
from twisted.internet import endpoints, ssl
from twisted.logger import Logger
from twisted.python import usage
from twisted.web.server import Site

from ganeti import constants
from ganeti import pathutils
from ganeti.server import options

log = Logger()


def rapi_pem_path(paths):
    """Where the RAPI certificate (key and certificate) lives."""
    return os.path.join(paths.data_dir, "rapi.pem")


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = ("The remote API daemon: Ganeti's RAPI v2 over HTTPS for"
                " tools and web front ends; jobs and queries go to the"
                " master daemon.")
    optParameters = [
        ["root", None, "/", "Root directory: files are under"
         " ROOT/var/lib/ganeti (virtual cluster mode)."],
        ["bind", "b", "0.0.0.0", "Address to listen on."],
        ["port", "p", constants.DEFAULT_RAPI_PORT, "TCP port.", int],
        ["ssl-key", "K", None, "PEM file with the TLS key (default: the"
         " RAPI certificate, ROOT/var/lib/ganeti/rapi.pem)."],
        ["ssl-cert", "C", None, "PEM file with the TLS certificate"
         " (default: the RAPI certificate)."],
        ["users-file", None, None, "The users file (default:"
         " ROOT/var/lib/ganeti/rapi/users)."],
        ["luxi-connections", None, 16, "Luxi connections to the master at"
         " most for queries and jobs; as many again carry the"
         " /2/jobs/ID/wait long polls.", int],
    ]
    optFlags = [
        ["no-ssl", None, "Serve plain HTTP (no TLS)."],
        ["require-authentication", None, "Every request needs valid"
         " credentials, even those open to anonymous users."],
    ]

    def postOptions(self):
        # Where it listens is checked in both modes (HTTPS and --no-ssl).
        options.check_listen(self, lambda: constants.DEFAULT_RAPI_PORT)
        paths = pathutils.Paths(self["root"])
        self["paths"] = paths
        if self["users-file"] is None:
            self["users-file"] = paths.rapi_users_file
        if self["no-ssl"]:
            return
        self["ssl-cert"] = self["ssl-cert"] or rapi_pem_path(paths)
        self["ssl-key"] = self["ssl-key"] or self["ssl-cert"]
        for what in ("ssl-cert", "ssl-key"):
            if not os.path.exists(self[what]):
                raise usage.UsageError(
                    "%s does not exist: the RAPI daemon needs its"
                    " certificate (gnt-cluster init creates"
                    " var/lib/ganeti/rapi.pem), or --no-ssl for plain HTTP"
                    % self[what])


def tls_options(cert_path, key_path):
    """CertificateOptions from PEM files (one file may hold both)."""
    with open(cert_path, "rb") as f:
        data = f.read()
    if key_path != cert_path:
        with open(key_path, "rb") as f:
            data = f.read() + b"\n" + data
    return ssl.PrivateCertificate.loadPEM(data).options()


class RapiService(service.MultiService):
    """Builds the app when started (nothing listens at import time)."""

    def __init__(self, options, reactor=None):
        service.MultiService.__init__(self)
        if reactor is None:
            from twisted.internet import reactor
        self.reactor = reactor
        self.options = options
        self.master = None
        self.app = None

    def startService(self):
        from ganeti.rapi import app as rapi_app
        from ganeti.rapi import auth
        from ganeti.rapi.master import LuxiPool
        opts = self.options
        paths = opts["paths"]
        self.master = LuxiPool(self.reactor, paths.master_socket,
                               size=opts["luxi-connections"])
        self.long_poll = LuxiPool(self.reactor, paths.master_socket,
                                  size=opts["luxi-connections"])
        users = auth.UsersFile(opts["users-file"])
        self.app = rapi_app.RapiApp(
            self.master, users, self.reactor,
            require_auth=opts["require-authentication"],
            long_poll=self.long_poll)
        site = Site(self.app.resource())
        site.displayTracebacks = False
        if opts["no-ssl"]:
            endpoint = endpoints.TCP4ServerEndpoint(
                self.reactor, opts["port"], interface=opts["bind"])
            scheme = "http"
        else:
            endpoint = endpoints.SSL4ServerEndpoint(
                self.reactor, opts["port"],
                tls_options(opts["ssl-cert"], opts["ssl-key"]),
                interface=opts["bind"])
            scheme = "https"
        StreamServerEndpointService(endpoint, site).setServiceParent(self)
        log.info("remote API on {scheme}://{bind}:{port}/ (users file"
                 " {users}, master socket {sock})", scheme=scheme,
                 bind=opts["bind"], port=opts["port"],
                 users=opts["users-file"], sock=paths.master_socket)
        service.MultiService.startService(self)

    def stopService(self):
        d = service.MultiService.stopService(self)
        for pool in (self.master, getattr(self, "long_poll", None)):
            if pool is not None:
                d.addCallback(lambda _, p=pool: p.close())
        return d


def makeService(options):
    return RapiService(options)
