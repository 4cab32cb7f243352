"""The master daemon's Prometheus metrics (:class:`MasterMetrics`).

The job queue, the lock manager and the configuration report to it
through the hooks they offer (``JobQueue.metrics``,
``LockManager.wait_observer``, ``ConfigStore.write_observers``), which
cost nothing but a comparison with None when no metrics are kept.  Values
that exist anyway (the jobs by status, the configuration's serial number)
are read when scraped, not counted as they change.
"""

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ganeti.jqueue import model

#: statuses of unfinished jobs (ganeti_jobs); finished ones are counted
#: by ganeti_jobs_finished_total
UNFINISHED_STATUSES = (model.STATUS_QUEUED, model.STATUS_WAITING,
                       model.STATUS_RUNNING, model.STATUS_CANCELING)

#: seconds: from a short query job to a long instance import
JOB_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
               600.0, 1800.0, 3600.0, float("inf"))
#: seconds: an fsync'ed write of config.data
CONFIG_WRITE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                        0.5, 1.0, 2.5, 5.0, float("inf"))


class _ReadAtScrape(object):
    """A collector whose samples are read from ``read()`` when scraped:
    ``read`` returns a list of metric families."""

    def __init__(self, read):
        self._read = read

    def collect(self):
        return self._read()

    def describe(self):
        # no description: the registry must not call read() to find the
        # names (it would run before the master has its queue)
        return []


class MasterMetrics(object):
    """The master daemon's metrics, in ``registry``.

    ``source`` is read at scrape time: ``source.queue`` (the JobQueue or
    None before it is loaded) and ``source.cfg`` (the ConfigStore or
    None).
    """

    def __init__(self, registry, source):
        self.registry = registry
        self.source = source
        self.jobs_finished = Counter(
            "ganeti_jobs_finished", "Jobs finished since the master daemon"
            " started, by final status.", ["status"], registry=registry)
        self.job_duration = Histogram(
            "ganeti_job_duration_seconds", "Seconds from a job's submission"
            " to its end, by the OP_ID of its first opcode.", ["opcode"],
            buckets=JOB_BUCKETS, registry=registry)
        self.lock_waits = Counter(
            "ganeti_lock_waits", "Lock acquisitions that had to wait, by"
            " lock level.", ["level"], registry=registry)
        self.lock_wait_seconds = Counter(
            "ganeti_lock_wait_seconds", "Seconds waited for locks, by lock"
            " level.", ["level"], registry=registry)
        self.config_write = Histogram(
            "ganeti_config_write_duration_seconds", "Seconds each write of"
            " config.data took (written and synced).",
            buckets=CONFIG_WRITE_BUCKETS, registry=registry)
        registry.register(_ReadAtScrape(self._read))

    # --- hooks ----------------------------------------------------------

    def job_finished(self, job):
        """``job`` (a QueuedJob) has just ended."""
        self.jobs_finished.labels(job.status).inc()
        if job.received_timestamp and job.end_timestamp:
            seconds = (model.merge_time(job.end_timestamp) -
                       model.merge_time(job.received_timestamp))
            opcode = job.ops[0].input.OP_ID if job.ops else "none"
            self.job_duration.labels(opcode).observe(max(0.0, seconds))

    def lock_waited(self, level_name, seconds):
        """An acquisition at ``level_name`` waited ``seconds``."""
        self.lock_waits.labels(level_name).inc()
        self.lock_wait_seconds.labels(level_name).inc(max(0.0, seconds))

    def config_written(self, seconds):
        self.config_write.observe(max(0.0, seconds))

    def attach(self, queue=None, glm=None, cfg=None):
        """Hook into the parts given."""
        if queue is not None:
            queue.metrics = self
        if glm is not None:
            glm.wait_observer = self.lock_waited
        if cfg is not None and self.config_written not in \
                cfg.write_observers:
            cfg.write_observers.append(self.config_written)

    # --- read when scraped ----------------------------------------------

    def _read(self):
        families = []
        queue = getattr(self.source, "queue", None)
        jobs = GaugeMetricFamily(
            "ganeti_jobs", "Unfinished jobs in the queue, by status.",
            labels=["status"])
        counts = queue.status_counts() if queue is not None else {}
        for status in UNFINISHED_STATUSES:
            jobs.add_metric([status], counts.get(status, 0))
        families.append(jobs)
        bus = getattr(self.source, "events", None)
        if bus is not None:
            families.append(GaugeMetricFamily(
                "ganeti_event_subscribers", "Subscribers of the master's"
                " event stream now: one for each RAPI daemon, and each"
                " luxi WatchEvents client (gnt-job watch).",
                value=bus.subscriber_count))
            families.append(CounterMetricFamily(
                "ganeti_events_published", "Events the master published"
                " since it started.", value=bus.published))
            families.append(CounterMetricFamily(
                "ganeti_event_subscribers_cut", "Subscribers of the"
                " master's event stream cut off since it started (too"
                " slow, or the master stopping).", value=bus.cuts))
        cfg = getattr(self.source, "cfg", None)
        if cfg is not None:
            families.append(GaugeMetricFamily(
                "ganeti_config_serial", "The serial number of the"
                " configuration (config.data's serial_no).",
                value=cfg.serial_no))
        return families
