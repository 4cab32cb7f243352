"""The master daemon's Prometheus metrics: the job queue, the lock
manager and config.data writes report to a MasterMetrics of their own
registry; a scrape parses as Prometheus' text format, and its values move
with what happens (a fake clock, a fake executor)."""

from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import defer, task
from twisted.trial import unittest

from ganeti import events
from ganeti import locking
from ganeti import luxi
from ganeti import metrics
from ganeti.metrics import master as master_metrics
from ganeti.jqueue import model as jq_model

from tests import inprocess
from tests.test_config import make_store
from tests.test_jqueue import QueueTestCase, op


def scrape(*registries):
    """``{(name, sorted labels): value}`` of a scrape's samples, parsed as
    Prometheus would."""
    text = metrics.exposition(*registries).decode("utf-8")
    return samples_of(text)


def samples_of(text):
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = \
                sample.value
    return found


class _Source(object):
    queue = None
    cfg = None
    events = None


class QueueMetricsTests(QueueTestCase):

    def setUp(self):
        QueueTestCase.setUp(self)
        self.registry = metrics.new_registry()
        self.source = _Source()
        self.metrics = master_metrics.MasterMetrics(self.registry, self.source)
        self.source.queue = self.queue
        self.metrics.attach(queue=self.queue)

    def test_jobs_by_status_and_their_durations(self):
        before = scrape(self.registry)
        self.assertEqual(before[("ganeti_jobs", (("status", "queued"),))], 0)
        self.assertNotIn(("ganeti_job_duration_seconds_count",
                          (("opcode", "OP_TEST_DELAY"),)), before)
        first = self.submit(op())
        self.submit(op("OP_TEST_DUMMY", result=1))
        # no run slot yet: both queued
        self.assertEqual(scrape(self.registry)[
            ("ganeti_jobs", (("status", "queued"),))], 2)
        self.turn()
        running = [c for c in self.executor.pending()
                   if c.job.id == first][0].start()
        now = scrape(self.registry)
        self.assertEqual(now[("ganeti_jobs", (("status", "running"),))], 1)
        self.clock.advance(7)
        running.finish()
        self.turn()
        after = scrape(self.registry)
        self.assertEqual(after[("ganeti_jobs", (("status", "running"),))],
                         0)
        self.assertEqual(after[("ganeti_jobs_finished_total",
                                (("status", "success"),))], 1)
        key = (("opcode", "OP_TEST_DELAY"),)
        self.assertEqual(after[("ganeti_job_duration_seconds_count", key)],
                         1)
        self.assertEqual(after[("ganeti_job_duration_seconds_sum", key)], 7)
        # 7 s is above the 5 s bucket, within the 10 s one
        self.assertEqual(after[("ganeti_job_duration_seconds_bucket",
                                (("le", "5.0"),) + key)], 0)
        self.assertEqual(after[("ganeti_job_duration_seconds_bucket",
                                (("le", "10.0"),) + key)], 1)

    def test_a_canceled_job_counts_as_canceled(self):
        job_id = self.submit(op())
        self.assertEqual(self.queue.cancel_job(job_id)[0], True)
        self.turn()
        after = scrape(self.registry)
        self.assertEqual(after[("ganeti_jobs_finished_total",
                                (("status", jq_model.STATUS_CANCELED),))], 1)
        self.assertEqual(after[("ganeti_jobs", (("status", "queued"),))], 0)


class LockMetricsTests(unittest.TestCase):

    def setUp(self):
        from twisted.internet import task
        self.clock = task.Clock()
        self.glm = locking.LockManager(node_uuids=["n1"], clock=self.clock)
        self.registry = metrics.new_registry()
        self.metrics = master_metrics.MasterMetrics(self.registry, _Source())
        self.metrics.attach(glm=self.glm)

    def test_only_waits_count_by_level_with_their_seconds(self):
        self.successResultOf(self.glm.acquire(locking.LEVEL_CLUSTER,
                                              [locking.BGL], "a"))
        self.successResultOf(self.glm.acquire(locking.LEVEL_NODE, ["n1"],
                                              "a"))
        # granted at once: no wait
        self.assertNotIn(("ganeti_lock_waits_total", (("level", "node"),)),
                         scrape(self.registry))
        waiting = self.glm.acquire(locking.LEVEL_CLUSTER, [locking.BGL], "b",
                                   shared=True)
        self.assertNoResult(waiting)
        self.clock.advance(4)
        self.glm.release(locking.LEVEL_NODE, "a")
        self.glm.release(locking.LEVEL_CLUSTER, "a")
        self.successResultOf(waiting)
        now = scrape(self.registry)
        key = (("level", locking.LEVEL_NAMES[locking.LEVEL_CLUSTER]),)
        self.assertEqual(now[("ganeti_lock_waits_total", key)], 1)
        self.assertEqual(now[("ganeti_lock_wait_seconds_total", key)], 4)
        # a blocking retrying acquisition is timed as a whole
        d = self.glm.acquire_with_retries(locking.LEVEL_NODE, ["n1"], "b",
                                          timeouts=[])
        self.successResultOf(d)
        self.assertNotIn(("ganeti_lock_waits_total", (("level", "node"),)),
                         scrape(self.registry))


class ConfigMetricsTests(unittest.TestCase):

    def test_serial_and_write_durations(self):
        store = make_store(self)
        source = _Source()
        source.cfg = store
        registry = metrics.new_registry()
        master = master_metrics.MasterMetrics(registry, source)
        master.attach(cfg=store)
        ticks = iter([10.0, 10.25])
        store.write_timer = lambda: next(ticks)
        serial = store.serial_no
        self.assertEqual(scrape(registry)[("ganeti_config_serial", ())],
                         serial)
        store.add_tags("cluster", None, ["metrics-test"])
        now = scrape(registry)
        self.assertEqual(now[("ganeti_config_serial", ())], serial + 1)
        self.assertEqual(
            now[("ganeti_config_write_duration_seconds_count", ())], 1)
        self.assertEqual(
            now[("ganeti_config_write_duration_seconds_sum", ())], 0.25)
        self.assertEqual(
            now[("ganeti_config_write_duration_seconds_bucket",
                 (("le", "0.1"),))], 0)


class EventMetricsTests(unittest.TestCase):

    def test_subscribers_published_and_cut(self):
        clock = task.Clock()
        bus = events.EventBus(clock, first_seq=0)
        source = _Source()
        registry = metrics.new_registry()
        master_metrics.MasterMetrics(registry, source)
        self.assertNotIn(("ganeti_event_subscribers", ()), scrape(registry))
        source.events = bus
        self.assertEqual(scrape(registry)[("ganeti_event_subscribers", ())],
                         0)
        got, cuts = [], []
        bus.subscribe(got.extend, cuts.append)
        bus.subscribe(got.extend, cuts.append)
        bus.publish("tags", "added", name="cluster")
        clock.advance(0)
        now = scrape(registry)
        self.assertEqual(now[("ganeti_event_subscribers", ())], 2)
        self.assertEqual(now[("ganeti_events_published_total", ())], 1)
        self.assertEqual(now[("ganeti_event_subscribers_cut_total", ())], 0)
        bus.close()
        now = scrape(registry)
        self.assertEqual(len(cuts), 2)
        self.assertEqual(now[("ganeti_event_subscribers", ())], 0)
        self.assertEqual(now[("ganeti_event_subscribers_cut_total", ())], 2)


class MasterDaemonTests(unittest.TestCase):
    """The real master daemon answers QueryMetrics over luxi."""

    @defer.inlineCallbacks
    def test_query_metrics_after_a_job(self):
        master, client = yield inprocess.start_master(self, "gtmet")
        text = yield client.call(luxi.REQ_QUERY_METRICS)
        before = samples_of(text)
        self.assertIn(("ganeti_config_serial", ()), before)
        job_id = yield client.call(luxi.REQ_SUBMIT_JOB, [
            {"OP_ID": "OP_TEST_DELAY", "duration": 0}])
        while True:
            rows = yield client.call(luxi.REQ_QUERY_JOBS, [job_id],
                                     ["status"])
            if rows[0][0] in ("success", "error", "canceled"):
                break
            yield client.call(luxi.REQ_WAIT_FOR_JOB_CHANGE, job_id,
                              ["status"], [rows[0][0]], None, 5)
        self.assertEqual(rows[0][0], "success")
        after = samples_of((yield client.call(luxi.REQ_QUERY_METRICS)))
        key = (("opcode", "OP_TEST_DELAY"),)
        self.assertEqual(after[("ganeti_job_duration_seconds_count", key)],
                         1)
        self.assertEqual(after[("ganeti_jobs_finished_total",
                                (("status", "success"),))], 1)
