"""The ganeti-confd twistd service: ``twistd -n ganeti-confd [options]``.

Nothing happens at import time; :func:`makeService` builds a MultiService
that, when started, loads config.data (then polls it), listens on UDP and
logs its counters every ``--stats-interval`` seconds and on SIGUSR1; with
``--metrics-port`` it also serves them to Prometheus (plain HTTP, ``GET
/metrics``, on the same address).
"""

import signal

from twisted.application import internet, service, strports
from twisted.internet import endpoints
from twisted.internet import task
from twisted.logger import Logger
from twisted.python import usage
from twisted.web import server as web_server

from ganeti import pathutils
from ganeti.confd import guards
from ganeti.confd import keys
from ganeti.confd import metrics as confd_metrics
from ganeti.confd import pacing
from ganeti.confd import reloader
from ganeti.confd import server
from ganeti.confd import wire
from ganeti.server.options import check_listen, service_port

log = Logger()


def default_port():
    """The ``ganeti-confd/udp`` service port if the system has one, else
    1814."""
    return service_port(wire.SERVICE_NAME, "udp", wire.DEFAULT_PORT)


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = ("Answers read-only configuration queries from config.data"
                " over HMAC-signed UDP (Ganeti's confd protocol).")
    optParameters = [
        ["root", None, "/", "Root directory: files are under"
         " ROOT/var/lib/ganeti (virtual cluster mode)."],
        ["bind", "b", "0.0.0.0", "Address to listen on."],
        ["port", "p", None, "UDP port [default: the ganeti-confd/udp"
         " service, else %d]." % wire.DEFAULT_PORT, int],
        ["hmac-key-file", None, None, "The cluster HMAC key"
         " [default: ROOT/var/lib/ganeti/hmac.key]."],
        ["poll-interval", None, 1.0, "Seconds between checks of"
         " config.data for changes.", float],
        ["rate-limit", None, guards.DEFAULT_RATE, "Requests per second"
         " accepted from one source address, far above what one node asks"
         " (Ganeti's confd answers one client about 40,000 pings/s); 0"
         " disables the limit.", float],
        ["rate-burst", None, guards.DEFAULT_BURST, "Requests one source may"
         " send in a burst above the rate.", float],
        ["replay-cache-size", None, 500000, "Signed requests remembered"
         " against replays (about 70 bytes each); when full, the oldest"
         " timestamps are refused.", int],
        ["stats-interval", None, 300.0, "Seconds between log lines with the"
         " counters; 0 logs them only on SIGUSR1.", float],
        ["metrics-port", None, None, "TCP port serving the counters to"
         " Prometheus (plain HTTP, GET /metrics, on the --bind address)"
         " [default: none].", int],
    ]

    def postOptions(self):
        check_listen(self, default_port)
        if self["poll-interval"] <= 0:
            raise usage.UsageError("--poll-interval must be positive")
        if self["rate-burst"] < 1:
            raise usage.UsageError("--rate-burst must be at least 1")
        if self["replay-cache-size"] < 1:
            raise usage.UsageError("--replay-cache-size must be positive")
        if self["stats-interval"] < 0:
            raise usage.UsageError("--stats-interval must not be negative")
        if self["metrics-port"] is not None and \
                not 0 <= self["metrics-port"] <= 65535:
            raise usage.UsageError("--metrics-port must be a TCP port"
                                   " (0 to 65535), not %d"
                                   % self["metrics-port"])
        paths = pathutils.Paths(self["root"])
        key_file = self["hmac-key-file"] or paths.hmac_key_file
        try:
            self["hmac-key"] = wire.read_hmac_key(key_file)
        except OSError as err:
            raise usage.UsageError("cannot read the cluster HMAC key %s: %s"
                                   % (key_file, err.strerror))
        if not self["hmac-key"]:
            raise usage.UsageError("the cluster HMAC key %s is empty"
                                   % key_file)
        self["hmac-key-file"] = key_file
        self["config-file"] = paths.config_file


class _WatcherService(service.Service):
    name = "config-watcher"

    def __init__(self, watcher):
        self.watcher = watcher

    def privilegedStartService(self):
        # twistd opens ports in privilegedStartService, before any
        # startService: load here so the first query already has an answer.
        self.watcher.load_now()

    def startService(self):
        service.Service.startService(self)
        self.watcher.start()

    def stopService(self):
        self.watcher.stop()
        return service.Service.stopService(self)


class _StatsService(service.Service):
    """Logs the counters periodically and when SIGUSR1 arrives."""
    name = "stats"

    def __init__(self, processor, interval, reactor):
        self.processor = processor
        self.interval = interval
        self.reactor = reactor
        self._loop = None
        self._old_handler = None

    def startService(self):
        service.Service.startService(self)
        if self.interval > 0:
            self._loop = task.LoopingCall(self.processor.log_stats)
            self._loop.clock = self.reactor
            self._loop.start(self.interval, now=False)
        try:
            self._old_handler = signal.signal(signal.SIGUSR1, self._on_signal)
        except ValueError:  # not the main thread (embedded use)
            self._old_handler = None

    def _on_signal(self, signum, frame):
        # Signal handlers run between bytecodes; do the work in the reactor.
        self.reactor.callFromThread(self.processor.log_stats)

    def stopService(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._old_handler is not None:
            signal.signal(signal.SIGUSR1, self._old_handler)
            self._old_handler = None
        return service.Service.stopService(self)


class ConfdService(service.MultiService):
    """The daemon; ``processor`` and ``watcher`` are exposed for tests."""

    def __init__(self, processor, watcher, bind, port):
        service.MultiService.__init__(self)
        self.processor = processor
        self.watcher = watcher
        self.bind = bind
        self.port = port

    def privilegedStartService(self):
        log.info("ganeti-confd starting: UDP {bind}:{port}, configuration"
                 " {path}", bind=self.bind, port=self.port,
                 path=self.watcher.path)
        service.MultiService.privilegedStartService(self)


def makeService(options, reactor=None):
    if reactor is None:
        from twisted.internet import reactor
    # Reloads are built in a worker thread, paced so that answers keep
    # flowing meanwhile (see ganeti.confd.reloader and pacing).
    watcher = reloader.ConfigWatcher(
        options["config-file"], reactor, interval=options["poll-interval"],
        runner=reloader.ThreadRunner(reactor),
        pace=lambda: pacing.Pacer(yield_to=pacing.ReactorTurn(reactor)),
        collector=reloader.CollectorFreeze())
    # the key files are followed: a key renewal needs no restart
    processor = server.ConfdProcessor(
        keys.HmacKeys(options["hmac-key-file"], reactor), watcher, reactor,
        rate_limiter=guards.RateLimiter(reactor, rate=options["rate-limit"],
                                        burst=options["rate-burst"]),
        replay_cache=guards.ReplayCache(
            reactor, wire.MAX_CLOCK_SKEW,
            max_entries=options["replay-cache-size"]))
    top = ConfdService(processor, watcher, options["bind"], options["port"])
    # Children start in order: the configuration is loaded before the port
    # opens (with twistd, and with a plain startService as twist does).
    _WatcherService(watcher).setServiceParent(top)
    udp = internet.UDPServer(options["port"], server.ConfdProtocol(processor),
                             interface=options["bind"], reactor=reactor)
    udp.setName("udp")
    udp.setServiceParent(top)
    _StatsService(processor, options["stats-interval"],
                  reactor).setServiceParent(top)
    if options.get("metrics-port") is not None:
        site = web_server.Site(confd_metrics.MetricsResource(
            confd_metrics.make_registry(processor)), reactor=reactor)
        site.noisy = False
        http = strports.service(
            "tcp:port=%d:interface=%s" % (
                options["metrics-port"],
                endpoints.quoteStringArgument(options["bind"])),
            site, reactor=reactor)
        http.setName("metrics")
        http.setServiceParent(top)
    return top
