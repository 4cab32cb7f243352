"""The RAPI daemon's Prometheus metrics and ``GET /metrics``.

RAPI counts its requests by *path class*: the resource's path pattern
(``/2/instances/{name}``), never the path asked for, so that the number of
label values stays that of the resources; a path matching no resource is
``other``.  A scrape answers RAPI's own metrics followed by the master
daemon's, fetched over luxi (``QueryMetrics``); when the master cannot be
asked, RAPI's own are still answered, with
``ganeti_rapi_master_metrics_up`` 0.
"""

from prometheus_client import Counter, Gauge, Histogram
from twisted.logger import Logger

from ganeti import errors
from ganeti import events
from ganeti import luxi
from ganeti import metrics

log = Logger()

#: the path class of requests matching no resource
OTHER = "other"
#: the path class of the metrics themselves
METRICS_PATH = "/metrics"

#: seconds: RAPI answers from its cache in milliseconds, waits for the
#: master up to a minute
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0, 30.0, 60.0, float("inf"))


class RapiMetrics(object):
    """RAPI's own metrics, in ``registry`` (a new one by default)."""

    def __init__(self, registry=None):
        if registry is None:
            registry = metrics.new_registry()
        self.registry = registry
        self.requests = Counter(
            "ganeti_rapi_requests", "RAPI requests answered, by path class"
            " (the resource's pattern) and HTTP status code.",
            ["path", "code"], registry=registry)
        self.duration = Histogram(
            "ganeti_rapi_request_duration_seconds", "Seconds from the"
            " start of handling a RAPI request to its answer, by path"
            " class.", ["path"], buckets=REQUEST_BUCKETS, registry=registry)
        self.master_up = Gauge(
            "ganeti_rapi_master_metrics_up", "1 if the master daemon's"
            " metrics were part of the last scrape, 0 if it could not be"
            " asked for them.", registry=registry)

        self.event_subscribers = Gauge(
            "ganeti_rapi_event_subscribers", "Clients following GET"
            " /2/events now.", registry=registry)
        self.event_cuts = Counter(
            "ganeti_rapi_event_subscribers_cut", "GET /2/events clients"
            " cut off, by reason: slow (more events waited for the client"
            " than --event-queue), stopping (the daemon stopped).",
            ["reason"], registry=registry)
        for cause in events.CUT_CAUSES:
            self.event_cuts.labels(cause)

    def attach_events(self, bus):
        """Count the clients of ``bus`` (the event hub's, whose
        subscribers are the /2/events clients) and their cuts."""
        self.event_subscribers.set_function(lambda: bus.subscriber_count)
        bus.cut_listeners.append(
            lambda cause: self.event_cuts.labels(cause).inc())

    def observe(self, path_class, code, seconds=None):
        """A request of ``path_class`` was answered with ``code`` after
        ``seconds`` (None: refused before it was handled, not timed)."""
        self.requests.labels(path_class, str(code)).inc()
        if seconds is not None:
            self.duration.labels(path_class).observe(max(0.0, seconds))

    async def scrape(self, master):
        """The exposition (bytes) of RAPI's metrics and those of the master
        daemon, asked with ``master.call``."""
        try:
            text = await master.call(luxi.REQ_QUERY_METRICS)
            if not isinstance(text, str):
                raise errors.LuxiError("QueryMetrics answered %s, not text"
                                       % type(text).__name__)
            up = 1
        except errors.GenericError as err:
            log.warn("the master daemon's metrics are left out of this"
                     " scrape: {err}", err=err)
            text, up = "", 0
        self.master_up.set(up)
        own = metrics.exposition(self.registry)
        return own + text.encode("utf-8")
