"""The ganeti-maintd twistd service: ``twistd -n ganeti-maintd [options]``.

Runs on the master only.  When started it asks the master candidates
whether this node (the one whose primary address is ``--bind``) is the
master; if not, it exits with status 11, as Ganeti's master-only daemons
do.  Otherwise it serves its status over HTTP (``--port``, default 1816,
on ``--bind``) and looks at the cluster every ``--interval`` seconds
(default: the cluster's maintenance round delay), see docs/maintd.rst.
Nothing listens at import time.
"""

import atexit
import os

from twisted.application import service, strports
from twisted.internet import defer
from twisted.logger import Logger
from twisted.python import usage
from twisted.web import server as web_server

from ganeti import constants
from ganeti import luxi
from ganeti import pathutils
from ganeti.confd import keys
from ganeti.confd import wire
from ganeti.maintd import daemon as mdaemon
from ganeti.maintd import status as mstatus
from ganeti.maintd import vote as mvote
from ganeti.server.options import check_listen, service_port

log = Logger()


def default_port():
    return service_port("ganeti-maintd", "tcp", constants.DEFAULT_MAINTD_PORT)


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = ("The maintenance daemon: acts on the nodes' self-diagnosis,"
                " does harep's auto-repairs and balances the cluster (as"
                " its switches say) in rounds of jobs, and serves its"
                " status over HTTP.")
    optFlags = [
        ["no-voting", None, "Do not ask the master candidates whether this"
         " node is the master (with --yes-do-it; for a one-node test)."],
        ["yes-do-it", None, "Confirm --no-voting."],
    ]
    optParameters = [
        ["root", None, "/", "Root directory: files are under"
         " ROOT/var/lib/ganeti (virtual cluster mode)."],
        ["bind", "b", None, "This node's primary address: the status page"
         " listens there and it identifies this node [default: the master"
         " address from ssconf]."],
        ["port", "p", None, "TCP port [default: the ganeti-maintd/tcp"
         " service, else %d]." % constants.DEFAULT_MAINTD_PORT, int],
        ["interval", None, None, "Seconds between looks at the cluster"
         " [default: the cluster's maintenance round delay].", float],
        ["mond-port", None, constants.DEFAULT_MOND_PORT, "Port of the nodes'"
         " monitoring daemons.", int],
        ["report-max-age", None, 60.0, "Diagnose reports signed longer ago"
         " than this many seconds are refused as stale.", float],
        ["confd-port", None, wire.DEFAULT_PORT, "Port of the master"
         " candidates' confd (the vote).", int],
        ["vote-patience", None, 60.0, "While no node has a majority of the"
         " master candidates (some still starting), ask again for up to"
         " this many seconds before exiting.", float],
    ]

    def postOptions(self):
        paths = pathutils.Paths(self["root"])
        if self["bind"] is None:
            values = mvote.read_ssconf(paths, "master_ip")
            self["bind"] = values[0] if values else "127.0.0.1"
        check_listen(self, default_port)
        if self["vote-patience"] < 0:
            raise usage.UsageError("--vote-patience must not be negative")
        if self["interval"] is not None and self["interval"] <= 0:
            raise usage.UsageError("--interval must be positive")
        if self["no-voting"] and not self["yes-do-it"]:
            raise usage.UsageError("--no-voting needs --yes-do-it: a"
                                   " maintenance daemon on a node that is"
                                   " not the master would act on a stale"
                                   " view of the cluster")
        key_file = paths.hmac_key_file
        try:
            self["hmac-key"] = wire.read_hmac_key(key_file)
        except OSError as err:
            raise usage.UsageError("cannot read the cluster HMAC key %s: %s"
                                   % (key_file, err.strerror))


class MaintenanceLoop(service.Service):
    """Looks at the cluster every ``interval`` seconds (None: the
    cluster's round delay, read at every look)."""

    name = "maintenance-loop"

    def __init__(self, daemon, clock, interval=None):
        self.daemon = daemon
        self.clock = clock
        self.interval = interval
        self._call = None
        self._delay = constants.MAINTD_DEFAULT_ROUND_DELAY

    def startService(self):
        service.Service.startService(self)
        self._schedule(0)

    def stopService(self):
        service.Service.stopService(self)
        if self._call is not None and self._call.active():
            self._call.cancel()

    def _schedule(self, delay):
        if self.running:
            self._call = self.clock.callLater(delay, self._look)

    def _look(self):
        d = defer.Deferred.fromCoroutine(self.daemon.run_once())

        def done(_):
            delay = self.interval if self.interval is not None else \
                getattr(self.daemon, "round_delay", self._delay)
            self._schedule(delay)

        def failed(f):
            log.failure("Maintenance look failed", f)
            done(None)
        d.addCallbacks(done, failed)
        return d


class _VotingStart(service.MultiService):
    """Start the children only once the vote says this is the master."""

    def __init__(self, reactor, options, paths):
        service.MultiService.__init__(self)
        self.reactor = reactor
        self.options = options
        self.paths = paths

    def privilegedStartService(self):
        # nothing listens before the vote
        pass

    def startService(self):
        service.Service.startService(self)
        d = defer.Deferred.fromCoroutine(self._start())
        d.addErrback(lambda f: log.failure("maintd start failed", f))

    async def _start(self):
        opts = self.options
        if not opts["no-voting"]:
            me = mvote.this_node(self.paths, opts["bind"])
            result = await mvote.ask_until_decided(
                self.reactor, opts["hmac-key"], self.paths, me,
                port=opts["confd-port"], patience=opts["vote-patience"])
            if not result.master:
                log.error("Not the master ({reason}); exiting",
                          reason=result.reason)
                atexit.register(os._exit, mvote.EXIT_NOTMASTER)
                self.reactor.stop()
                return
            log.info("Master confirmed: {reason}", reason=result.reason)
        for child in list(self):
            child.startService()

    def stopService(self):
        service.Service.stopService(self)
        return defer.DeferredList([defer.maybeDeferred(c.stopService)
                                   for c in reversed(list(self))
                                   if c.running])


def makeService(options, reactor=None):
    if reactor is None:
        from twisted.internet import reactor
    from ganeti.maintd import diagnose_source
    paths = pathutils.Paths(options["root"])
    client = luxi.LuxiClient(reactor, paths.master_socket)
    # the key files are followed: reports signed with a renewed key count
    source = diagnose_source.MondDiagnoseSource(
        reactor, keys.HmacKeys(paths.hmac_key_file, reactor),
        port=options["mond-port"],
        max_age=options["report-max-age"])
    from ganeti.maintd import load as mload
    # balancing with load data reads the same monitoring daemons
    loads = mload.MondLoadSource(reactor, port=options["mond-port"])
    daemon = mdaemon.MaintenanceDaemon(client, source, load=loads)
    top = _VotingStart(reactor, options, paths)
    site = web_server.Site(mstatus.StatusApp(daemon).app.resource())
    strports.service("tcp:%d:interface=%s" % (options["port"],
                                              options["bind"]),
                     site).setServiceParent(top)
    MaintenanceLoop(daemon, reactor, options["interval"]).setServiceParent(top)
    return top

