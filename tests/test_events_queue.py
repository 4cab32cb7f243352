"""The job queue's events around a restart and the archive: a job found
queued on disk by a restarted master is ``requeued`` (it was announced
as submitted by the master before), never submitted again; an archived
job is announced so that a client's job list drops it.  A real queue
directory, a fake clock and the fake executor of tests.test_jqueue."""

from ganeti import events

from tests.test_jqueue import QueueTestCase, op
from tests.test_jqueue_archive import finish_everything


class QueueEventTests(QueueTestCase):

    def setUp(self):
        QueueTestCase.setUp(self)
        self.bus = self.queue.events = events.EventBus(self.clock,
                                                       first_seq=0)

    def tearDown(self):
        finish_everything(self)
        QueueTestCase.tearDown(self)

    def of(self, job_id, bus=None):
        return [(e["type"], e["data"].get("status"))
                for e in (bus or self.bus).backlog(-1)[0]
                if e["kind"] == "job" and e["id"] == job_id]

    def restart(self):
        """A new master daemon on the same queue directory: a new bus."""
        self.successResultOf(self.queue.shutdown())
        self.queue = self.make_queue()
        self.bus = self.queue.events = events.EventBus(
            self.clock, first_seq=1000)
        return self.queue.load()

    def test_queued_job_is_requeued_not_submitted_again(self):
        job_id = self.submit(op())
        self.assertEqual(self.of(job_id), [("submitted", "queued")])
        # the master stops before the job started
        report = self.restart()
        self.assertEqual(report.requeued, (job_id,))
        self.turn()
        self.assertEqual(self.of(job_id)[:2], [("requeued", "queued"),
                                               ("status", "waiting")])
        requeued = self.bus.backlog(-1)[0][0]
        self.assertEqual(len(requeued["data"]["ops"]), 1)
        self.assertTrue(requeued["data"]["ops"][0].startswith("TEST_DELAY"))
        self.assertIn("received_ts", requeued["data"])
        self.executor.calls[-1].finish()
        self.turn()
        self.assertEqual(self.of(job_id)[-2:], [("status", "success"),
                                                ("finished", "success")])
        types = [t for t, _ in self.of(job_id)]
        self.assertNotIn("submitted", types)

    def test_new_job_after_a_restart_is_submitted(self):
        self.restart()
        job_id = self.submit(op())
        self.assertEqual(self.of(job_id), [("submitted", "queued")])

    def test_archived_job_is_announced(self):
        job_id = self.submit(op())
        finish_everything(self)
        self.assertTrue(self.successResultOf(self.queue.archive_job(job_id)))
        archived = [e for e in self.bus.backlog(-1)[0]
                    if e["type"] == "archived"]
        self.assertEqual(len(archived), 1)
        self.assertEqual((archived[0]["kind"], archived[0]["id"],
                          archived[0]["name"]), ("job", job_id, str(job_id)))
        self.assertIsNotNone(archived[0]["data"]["end_ts"])
        # once, also when asked again
        self.assertFalse(self.successResultOf(
            self.queue.archive_job(job_id)))
        self.assertEqual(len([e for e in self.bus.backlog(-1)[0]
                              if e["type"] == "archived"]), 1)

    def test_auto_archive_announces_each_job(self):
        ids = [self.submit(op()) for _ in range(3)]
        finish_everything(self)
        self.clock.advance(100)
        result = self.successResultOf(self.queue.auto_archive_jobs(50, None))
        self.assertEqual(result, [3, 0])
        archived = [e["id"] for e in self.bus.backlog(-1)[0]
                    if e["type"] == "archived"]
        self.assertEqual(sorted(archived), ids)

    def test_unfinished_job_is_not_archived_nor_announced(self):
        job_id = self.submit(op())
        self.assertFalse(self.successResultOf(self.queue.archive_job(job_id)))
        self.assertEqual([e for e in self.bus.backlog(-1)[0]
                          if e["type"] == "archived"], [])
