"""Running the data collectors as the cluster's configuration says.

Which collectors are active and how often they collect is the cluster's
``data_collectors`` setting (``gnt-cluster modify
--enabled-data-collectors / --data-collector-interval``), which the
daemon asks its configuration servers for (the master candidates'
confd, request "data collectors") when it starts and every
``refresh`` seconds after.  Until the first answer the collectors run
with their defaults (active, every 5 s) except the self-diagnosis, whose
command is part of that answer: a node never reports a diagnosis made
with a command the cluster did not choose.  When no server answers, the
last known settings stay.

Collectors marked ``sampled`` (the performance collectors and the
self-diagnosis) collect on a timer at their interval and the last result
is served; the others (the status of DRBD and of the instances) collect
when asked.  Either way one collection of a collector runs at a time:
requests arriving meanwhile share its result.  An inactive collector is
neither run nor listed, and asking for its report finds nothing.
"""

from twisted.internet import defer, task
from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti.confd import client as confd_client
from ganeti.confd import keys
from ganeti.confd import wire
from ganeti.mond import base

log = Logger()

DEFAULT_INTERVAL = constants.MOND_TIME_INTERVAL
#: collectors that wait for the cluster's settings before running
NEEDS_SETTINGS = frozenset([constants.DATA_COLLECTOR_DIAGNOSE])


def _interval(entry):
    value = entry.get("interval")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value / 1e6
    return DEFAULT_INTERVAL


def _without_interval(entry):
    return {k: v for k, v in (entry or {}).items() if k != "interval"}


class MonitoringDaemon(object):

    def __init__(self, clock, collectors, settings_source=None,
                 refresh=constants.MOND_CONFIG_REFRESH):
        self.clock = clock
        self.collectors = {}
        for c in collectors:
            if c.available():
                self.collectors[c.name] = c
            else:
                log.info("Data collector {name} does not apply to this node",
                         name=c.name)
        self.settings_source = settings_source
        self.refresh_interval = refresh
        #: the data_collectors answer in use (None: none yet)
        self.settings = None
        self.active = set()
        self._entries = {}
        self._loops = {}       # name -> (LoopingCall, interval)
        self._latest = {}      # name -> Report
        self._inflight = {}    # name -> [waiting Deferreds]
        #: name -> seconds the last collection took (the metrics)
        self.durations = {}
        self._refresher = None
        self._refresh_failed = False

    # --- life cycle ---------------------------------------------------------

    def start(self):
        self.apply(None)
        if self.settings_source is not None:
            self._refresher = task.LoopingCall(self.refresh)
            self._refresher.clock = self.clock
            self._refresher.start(self.refresh_interval, now=True)

    def stop(self):
        if self._refresher is not None and self._refresher.running:
            self._refresher.stop()
        for name in list(self._loops):
            self._stop_loop(name)

    # --- settings -----------------------------------------------------------

    async def _refresh(self):
        try:
            settings = await self.settings_source.data_collectors()
        except Exception as err:
            if not self._refresh_failed:
                log.warn("Cannot get the data collectors' settings: {err};"
                         " keeping the last known", err=err)
            self._refresh_failed = True
            return
        if self._refresh_failed:
            log.info("Got the data collectors' settings again")
        self._refresh_failed = False
        if not isinstance(settings, dict):
            log.warn("Ignoring data collectors' settings that are not an"
                     " object: {s!r}", s=settings)
            return
        self.apply(settings)

    def refresh(self):
        """Ask for the settings once; never fails."""
        return defer.Deferred.fromCoroutine(self._refresh())

    def apply(self, settings):
        """Use ``settings`` ({name: {"active", "interval", ...}}; None:
        the defaults, as before any answer)."""
        if settings is not None:
            self.settings = settings
        for name, collector in sorted(self.collectors.items()):
            if settings is None:
                entry = {"active": name not in NEEDS_SETTINGS}
            else:
                entry = settings.get(name)
                if not isinstance(entry, dict):
                    # a server that does not know the collector
                    entry = {"active": True}
            active = entry.get("active", True) is not False
            previous = self._entries.get(name)
            changed = entry != previous
            self._entries[name] = entry
            if not active:
                if name in self.active:
                    log.info("Data collector {name} is now inactive",
                             name=name)
                self.active.discard(name)
                self._stop_loop(name)
                self._latest.pop(name, None)
                continue
            if name not in self.active:
                log.info("Data collector {name} is now active", name=name)
            self.active.add(name)
            if changed:
                collector.configure(entry)
            if collector.sampled:
                interval = _interval(entry)
                running = self._loops.get(name)
                if running is None:
                    self._start_loop(name, interval, now=True)
                elif changed:
                    # a new interval alone waits for it; anything else
                    # (another diagnose command) is collected at once
                    self._stop_loop(name)
                    self._start_loop(name, interval, now=_without_interval(
                        entry) != _without_interval(previous))

    def _start_loop(self, name, interval, now):
        loop = task.LoopingCall(self._sample, name)
        loop.clock = self.clock
        self._loops[name] = (loop, interval)
        loop.start(interval, now=now)

    def _stop_loop(self, name):
        running = self._loops.pop(name, None)
        if running is not None and running[0].running:
            running[0].stop()

    def _sample(self, name):
        # a failed collection must not end the loop
        return self._collect(name).addErrback(lambda _: None)

    # --- collecting ---------------------------------------------------------

    def _collect(self, name):
        """Deferred Report of one collection (joining one under way)."""
        d = defer.Deferred()
        waiting = self._inflight.get(name)
        if waiting is not None:
            waiting.append(d)
            return d
        self._inflight[name] = [d]
        collector = self.collectors[name]
        started = self.clock.seconds()

        def done(result):
            self.durations[name] = self.clock.seconds() - started
            waiters = self._inflight.pop(name, [])
            if isinstance(result, base.Report) and name in self.active:
                self._latest[name] = result
            for w in waiters:
                w.callback(result)

        def failed(f):
            log.failure("Data collector {name} failed", f, name=name)
            message = "collection failed: %s" % f.getErrorMessage()
            data = ({"status": base.status(base.STATUS_UNKNOWN, message)}
                    if collector.kind == base.KIND_STATUS
                    else {"error": message})
            return base.Report.of(collector, started, data)

        defer.maybeDeferred(collector.collect).addCallback(
            lambda data: base.Report.of(collector, started, data)).addErrback(
            failed).addCallback(done)
        return d

    def listing(self):
        """[name, URL category, kind] of the active collectors."""
        return [[name, base.url_category(self.collectors[name]),
                 self.collectors[name].kind]
                for name in sorted(self.active)]

    def find(self, category, name):
        """The active collector ``name`` of URL ``category``, or None."""
        c = self.collectors.get(name)
        if c is None or name not in self.active or \
                base.url_category(c) != category:
            return None
        return c

    async def report(self, name):
        """The Report of active collector ``name`` (None if inactive)."""
        if name not in self.active:
            return None
        collector = self.collectors[name]
        if collector.sampled and name in self._latest:
            return self._latest[name]
        report = await self._collect(name)
        return report if name in self.active else None

    async def reports(self):
        names = sorted(self.active)
        found = await defer.gatherResults(
            [defer.Deferred.fromCoroutine(self.report(n)) for n in names])
        return [r for r in found if r is not None]


class ConfdSettings(object):
    """What the daemon needs from the configuration servers: the
    collectors' settings and this node's instances.  The servers are the
    master candidates of this node's ssconf, asked with the cluster key."""

    def __init__(self, reactor, hmac_key, paths, my_address,
                 port=wire.DEFAULT_PORT, timeout=3.0):
        from ganeti.maintd import vote
        self._ssconf = vote.read_ssconf
        self._this_node = vote.this_node
        self.reactor = reactor
        # the key, or keys.HmacKeys following the key files
        self.keys = keys.as_keys(hmac_key)
        self.paths = paths
        self.my_address = my_address
        self.port = port
        self.timeout = timeout
        self._client = None

    def _peers(self):
        peers = self._ssconf(self.paths, "master_candidates_ips")
        if not peers:
            raise errors.ConfdClientError(
                "no master candidates known (ssconf master_candidates_ips)")
        return peers

    async def _ask(self, req_type, query=None):
        peers = self._peers()
        key = self.keys.signing()
        if self._client is not None and self._client.hmac_key != key:
            # the cluster key was renewed: ask with the new one
            old, self._client = self._client, None
            old.close()
        if self._client is None:
            self._client = confd_client.ConfdClient(
                key, peers, port=self.port, reactor=self.reactor,
                timeout=self.timeout)
        else:
            self._client.update_peers(peers)
        result = await self._client.request(req_type, query)
        if not result.ok:
            raise errors.ConfdClientError(
                "the configuration server answered %r" % (result.answer,))
        return result.answer

    def data_collectors(self):
        return defer.Deferred.fromCoroutine(
            self._ask(wire.REQ_DATA_COLLECTORS))

    async def _node_instances(self):
        me = self._this_node(self.paths, self.my_address)
        if me is None:
            raise errors.ConfdClientError(
                "no node of this cluster has the address %s (ssconf"
                " node_primary_ips)" % self.my_address)
        primary, _ = await self._ask(wire.REQ_NODE_INSTANCES, me)
        return primary

    def node_instances(self):
        return defer.Deferred.fromCoroutine(self._node_instances())

    def close(self):
        client, self._client = self._client, None
        return client.close() if client is not None else defer.succeed(None)
