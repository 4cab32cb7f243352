"""ganeti-rapi: the remote API daemon (RAPI v2 over HTTPS, port 5080).

Serves the Klein app of :mod:`ganeti.rapi.app` with the cluster's RAPI
certificate (``<data_dir>/rapi.pem``, key and certificate in one file,
created by ``gnt-cluster init``, followed on disk: a renewed one is served
from the next connection on); plain HTTP only with ``--no-ssl``.  The
HTTP front (:mod:`ganeti.rapi.front`) bounds connections and requests
before the app sees them.  Users
and their rights come from ``<data_dir>/rapi/users``, re-read when it
changes.  Queries and jobs go to the master daemon over its luxi socket.
"""

import ipaddress
import os

from twisted.application import service, strports
from twisted.internet import endpoints
from twisted.logger import Logger
from twisted.python import usage
from twisted.protocols.tls import TLSMemoryBIOFactory

from ganeti import constants
from ganeti import events
from ganeti import pathutils
from ganeti.rapi import app as rapi_app
from ganeti.rapi import auth
from ganeti.rapi import certificate
from ganeti.rapi import events as rapi_events
from ganeti.rapi import front
from ganeti.rapi import ratelimit
from ganeti.rapi import sessions
from ganeti.rapi.master import LuxiPool
from ganeti.server.options import check_listen

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
        ["also-bind", None, None, "A second address to listen on (the"
         " cluster's master IP; the node daemon passes it on the"
         " master)."],
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
        ["max-body-size", None, front.DEFAULTS.max_body, "Largest request"
         " body in bytes; a bigger one is answered 413 before it is"
         " read.", int],
        ["max-connections", None, front.DEFAULTS.max_connections,
         "Simultaneous client connections at most; more are closed when"
         " accepted.", int],
        ["max-client-connections", None,
         front.DEFAULTS.max_client_connections, "Simultaneous connections"
         " from one client address at most.", int],
        ["request-head-timeout", None, front.DEFAULTS.head_timeout, "Seconds"
         " a client has for the head of its request (request line and"
         " headers; the TLS handshake included).", float],
        ["request-body-timeout", None, front.DEFAULTS.body_timeout, "Seconds"
         " a client has for the body of its request, after the head.",
         float],
        ["event-keepalive", None, rapi_events.DEFAULT_KEEPALIVE, "Seconds"
         " between keep-alive comments on an idle /2/events stream (0:"
         " none).", float],
        ["event-queue", None, rapi_events.DEFAULT_CLIENT_QUEUE, "Events"
         " that may wait for one /2/events client before it is cut off.",
         int],
        ["event-buffer", None, events.DEFAULT_BUFFER_SIZE, "Events kept"
         " for /2/events clients resuming with Last-Event-ID.", int],
        ["job-rate", None, ratelimit.DEFAULT_USER_RATE, "Jobs an"
         " authenticated user may submit a second, on average (0: no"
         " limit); more answer 429 with Retry-After.", float],
        ["job-burst", None, ratelimit.DEFAULT_USER_BURST, "Jobs an"
         " authenticated user may submit at once beyond that rate.", int],
        ["anonymous-job-rate", None, ratelimit.DEFAULT_ANONYMOUS_RATE,
         "Jobs anonymous requests from one address (IPv6: one /64) may"
         " submit a second, on average (0: no limit).", float],
        ["anonymous-job-burst", None, ratelimit.DEFAULT_ANONYMOUS_BURST,
         "Jobs anonymous requests from one address may submit at once"
         " beyond that rate.", int],
        ["session-idle-timeout", None, sessions.DEFAULT_IDLE_TIMEOUT,
         "Seconds without a request after which a web console session"
         " ends.", float],
        ["session-max-age", None, sessions.DEFAULT_MAX_AGE, "Seconds after"
         " its login after which a web console session ends, used or"
         " not.", float],
    ]
    optFlags = [
        ["no-ssl", None, "Serve plain HTTP (no TLS)."],
        ["require-authentication", None, "Every request needs valid"
         " credentials, even those open to anonymous users."],
        ["no-answer-cache", None, "Render every query answer anew (no"
         " rendered answers kept, no sharing of one query's check by"
         " different URLs)."],
    ]

    def postOptions(self):
        # Where it listens is checked in both modes (HTTPS and --no-ssl).
        check_listen(self, lambda: constants.DEFAULT_RAPI_PORT)
        if self["also-bind"] is not None:
            try:
                ipaddress.ip_address(self["also-bind"])
            except ValueError:
                raise usage.UsageError("--also-bind: %r is not an IP"
                                       " address" % self["also-bind"])
        for name in ("max-body-size", "max-connections",
                     "max-client-connections", "request-head-timeout",
                     "request-body-timeout", "session-idle-timeout",
                     "session-max-age"):
            if self[name] <= 0:
                raise usage.UsageError("--%s must be positive, not %s"
                                       % (name, self[name]))
        if self["event-keepalive"] < 0:
            raise usage.UsageError("--event-keepalive: must not be negative"
                                   " (0: none), got %s"
                                   % self["event-keepalive"])
        for name in ("event-queue", "event-buffer"):
            if self[name] < 1:
                raise usage.UsageError("--%s: must be at least 1, got %d"
                                       % (name, self[name]))
        for prefix in ("job", "anonymous-job"):
            rate, burst = self[prefix + "-rate"], self[prefix + "-burst"]
            if not rate >= 0 or rate == float("inf"):
                raise usage.UsageError("--%s-rate: must be a non-negative"
                                       " number (0: no limit), got %s"
                                       % (prefix, rate))
            if burst < 1:
                raise usage.UsageError("--%s-burst: must be at least 1, got"
                                       " %d" % (prefix, burst))
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


def listen_description(options, address=None):
    """The server endpoint string for ``--bind`` (or ``address``) and
    ``--port`` (TCP; TLS, if any, is layered on by
    :func:`listening_factory`)."""
    quote = endpoints.quoteStringArgument
    return "tcp:port=%d:interface=%s" % (
        options["port"], quote(address or options["bind"]))


def tls_options(options):
    """The TLS server options of the certificate and key files."""
    return certificate.load_options(options["ssl-cert"], options["ssl-key"])


def limits(options):
    return front.Limits(
        max_body=options["max-body-size"],
        max_connections=options["max-connections"],
        max_client_connections=options["max-client-connections"],
        head_timeout=options["request-head-timeout"],
        body_timeout=options["request-body-timeout"])


def listening_factory(options, site, reactor):
    """What the port serves: ``site`` (over TLS unless ``--no-ssl``),
    behind the connection limits, which come first: a connection over
    them costs no TLS work."""
    factory = site
    if not options["no-ssl"]:
        # a renewed certificate is served from the next connection on
        served = certificate.ServedCertificate(
            options["ssl-cert"], options["ssl-key"], reactor)
        factory = TLSMemoryBIOFactory(served, False, site, clock=reactor)
    return front.ConnectionLimiter(factory, site.limits, reactor)


class RapiService(service.MultiService):
    """The remote API daemon; stopping closes its luxi connections to the
    master once the port is closed."""

    def __init__(self, app, pools, url, users_file, master_socket,
                 event_hub=None):
        service.MultiService.__init__(self)
        self.app = app
        self.event_hub = event_hub
        self.pools = pools
        self.url = url
        self.users_file = users_file
        self.master_socket = master_socket

    def startService(self):
        log.info("remote API on {url} (users file {users}, master socket"
                 " {sock})", url=self.url, users=self.users_file,
                 sock=self.master_socket)
        service.MultiService.startService(self)

    def stopService(self):
        d = service.MultiService.stopService(self)
        if self.event_hub is not None:
            d.addCallback(lambda _: self.event_hub.stop())
        for pool in self.pools:
            d.addCallback(lambda _, p=pool: p.close())
        return d


def makeService(options, reactor=None):
    if reactor is None:
        from twisted.internet import reactor
    socket_path = options["paths"].master_socket
    # Queries and jobs; the /2/jobs/ID/wait long polls on connections of
    # their own, so that waiting clients never hold up the others.
    master = LuxiPool(reactor, socket_path, size=options["luxi-connections"])
    long_poll = LuxiPool(reactor, socket_path,
                         size=options["luxi-connections"])
    # open browser consoles keep a read going each: a pool of their own
    # (beyond its size further reads wait their turn)
    console_poll = LuxiPool(reactor, socket_path,
                            size=options["luxi-connections"])
    # one subscription to the master's event stream for every /2/events
    # client, made when the first one comes
    hub = rapi_events.EventHub(
        rapi_events.luxi_connector(reactor, socket_path), reactor,
        size=_option(options, "event-buffer", events.DEFAULT_BUFFER_SIZE),
        client_queue=_option(options, "event-queue",
                             rapi_events.DEFAULT_CLIENT_QUEUE))
    app = rapi_app.RapiApp(master, auth.UsersFile(options["users-file"]),
                           reactor,
                           require_auth=options["require-authentication"],
                           long_poll=long_poll,
                           answer_cache=not options["no-answer-cache"],
                           user_rate=(options["job-rate"],
                                      options["job-burst"]),
                           anonymous_rate=(options["anonymous-job-rate"],
                                           options["anonymous-job-burst"]),
                           event_hub=hub, console_poll=console_poll,
                           event_keepalive=_option(
                               options, "event-keepalive",
                               rapi_events.DEFAULT_KEEPALIVE),
                           sessions=sessions.SessionStore(
                               reactor,
                               idle_timeout=_option(
                                   options, "session-idle-timeout",
                                   sessions.DEFAULT_IDLE_TIMEOUT),
                               max_age=_option(
                                   options, "session-max-age",
                                   sessions.DEFAULT_MAX_AGE)))
    site = front.RapiSite(app.resource(), app.check_head, limits(options),
                          reactor=reactor)
    url = "%s://%s:%d/" % ("http" if options["no-ssl"] else "https",
                           options["bind"], options["port"])
    top = RapiService(app, [master, long_poll, console_poll], url,
                      options["users-file"],
                      socket_path, event_hub=hub)
    # A port that cannot be bound stops the daemon (non-zero exit, the
    # error names the address) instead of being only logged.
    http = strports.service(listen_description(options),
                            listening_factory(options, site, reactor),
                            reactor=reactor)
    http.setName("http")
    http.setServiceParent(top)
    also = options.get("also-bind")
    if also and also != options["bind"]:
        second = strports.service(listen_description(options, also),
                                  listening_factory(options, site, reactor),
                                  reactor=reactor)
        second.setName("http-master-ip")
        second.setServiceParent(top)
    return top


def _option(options, name, default):
    # tests may hand over options without the newer names
    value = options.get(name)
    return default if value is None else value
