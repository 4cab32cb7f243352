"""confd's counters as Prometheus metrics, on ``ganeti-confd
--metrics-port`` (plain HTTP on confd's own address, ``GET /metrics``).

confd answers over UDP only, so a scrape needs a port of its own.  The
values are the processor's counters (:meth:`ConfdProcessor.stats`, the
ones logged every ``--stats-interval``), read when scraped: answering a
datagram costs nothing more than before.
"""

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from twisted.web import resource

from ganeti import metrics
from ganeti.confd import server
from ganeti.confd import wire


class ConfdCollector(object):
    """Families of ``processor``'s counters (a ConfdProcessor)."""

    def __init__(self, processor):
        self.processor = processor

    def describe(self):
        return []

    def collect(self):
        stats = self.processor.stats()

        def counter(name, doc, key):
            return CounterMetricFamily(name, doc, value=stats.get(key, 0))

        yield counter("ganeti_confd_received", "Datagrams received.",
                      "received")
        yield counter("ganeti_confd_answered", "Requests answered (a"
                      " signed reply sent, errors included).", "answered")
        queries = CounterMetricFamily(
            "ganeti_confd_queries", "Authenticated requests of a known"
            " type, by type.", labels=["type"])
        for name in sorted(wire.REQUEST_NAMES.values()):
            queries.add_metric([name], stats.get("req_" + name, 0))
        yield queries
        drops = CounterMetricFamily(
            "ganeti_confd_dropped", "Datagrams dropped without a reply, by"
            " reason.", labels=["reason"])
        for reason in server.DROP_REASONS:
            drops.add_metric([reason], stats.get("dropped_" + reason, 0))
        yield drops
        errors = CounterMetricFamily(
            "ganeti_confd_errors", "Requests answered with an error, by"
            " reason (unknown_type: a query type confd does not know).",
            labels=["reason"])
        for reason in server.ERROR_REASONS:
            errors.add_metric([reason], stats.get("error_" + reason, 0))
        yield errors
        yield counter("ganeti_confd_send_failed", "Replies the socket"
                      " refused to send.", "send_failed")
        yield GaugeMetricFamily(
            "ganeti_confd_replay_cache_entries", "Signed requests"
            " remembered against replays.",
            value=stats.get("replay_cache_entries", 0))
        yield counter("ganeti_confd_replay_cache_evicted", "Entries pushed"
                      " out of the full replay cache.",
                      "replay_cache_evicted")
        yield GaugeMetricFamily(
            "ganeti_confd_rate_limit_sources", "Source addresses the rate"
            " limit keeps track of.",
            value=stats.get("rate_limit_sources", 0))
        if stats.get("config_serial") is not None:
            yield GaugeMetricFamily(
                "ganeti_confd_config_serial", "Serial number of the"
                " configuration confd answers from.",
                value=stats["config_serial"])
        if "config_reloads" in stats:
            yield counter("ganeti_confd_config_reloads", "Reloads of"
                          " config.data.", "config_reloads")


class MetricsResource(resource.Resource):
    """The HTTP root of the metrics port: ``/metrics`` only."""

    def __init__(self, registry):
        resource.Resource.__init__(self)
        self.putChild(b"metrics", _Page(registry))


class _Page(resource.Resource):
    isLeaf = True

    def __init__(self, registry):
        resource.Resource.__init__(self)
        self.registry = registry

    def render_GET(self, request):
        request.setHeader(b"content-type",
                          metrics.CONTENT_TYPE.encode("ascii"))
        return metrics.exposition(self.registry)


def make_registry(processor):
    registry = metrics.new_registry()
    registry.register(ConfdCollector(processor))
    return registry
