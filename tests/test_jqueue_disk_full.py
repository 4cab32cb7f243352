"""A full (or failing) disk under the job queue: a job's final status is
told to nobody before it is on disk, and the write is tried again until
it is."""

import errno

from ganeti import jqueue
from ganeti.jqueue import queue as jq_queue

from tests.test_jqueue import QueueTestCase, op


class DiskFullTests(QueueTestCase):

    def setUp(self):
        QueueTestCase.setUp(self)
        self.full = False
        journal = self.queue._store.journal
        real = journal.commit

        def commit(files):
            if self.full:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(files)
        self.patch(journal, "commit", commit)

    def tearDown(self):
        self.flushLoggedErrors()
        QueueTestCase.tearDown(self)

    def run_until_final_write(self, *ops):
        """A job whose opcode finishes while the disk is full."""
        job_id = self.submit(*ops)
        self.turn()
        call = self.executor.pending()[0].start()
        self.assertEqual(self.status(job_id), jqueue.STATUS_RUNNING)
        self.full = True
        call.finish("done")
        return job_id

    def test_a_final_status_is_told_only_once_it_is_on_disk(self):
        job_id = self.run_until_final_write(op())
        # queries, waiting clients and the file agree: still running
        self.assertEqual(self.status(job_id), jqueue.STATUS_RUNNING)
        self.assertEqual(self.read_job(job_id)["ops"][0]["status"],
                         "running")
        waiting = self.queue.wait_for_job_change(job_id, ["status"],
                                                 ["running"], None, 60)
        self.clock.advance(jq_queue.FINAL_WRITE_RETRY)    # still full
        self.assertNoResult(waiting)
        self.assertEqual(self.status(job_id), jqueue.STATUS_RUNNING)
        # space comes back: the next attempt writes it, then it is told
        self.full = False
        self.clock.advance(2 * jq_queue.FINAL_WRITE_RETRY)
        self.assertEqual(self.successResultOf(waiting), [["success"], []])
        self.assertEqual(self.status(job_id), jqueue.STATUS_SUCCESS)
        self.assertEqual(self.read_job(job_id)["ops"][0]["status"],
                         "success")
        self.assertEqual(self.field(job_id, "opresult"), ["done"])

    def test_retries_back_off(self):
        self.run_until_final_write(op())
        delays = []
        for _ in range(10):
            delays.append(self.clock.getDelayedCalls()[0].getTime()
                          - self.clock.seconds())
            self.clock.advance(delays[-1])
        self.assertEqual(delays[:4], [1.0, 2.0, 4.0, 8.0])
        self.assertEqual(max(delays), jq_queue.FINAL_WRITE_RETRY_MAX)
        self.full = False
        self.clock.advance(jq_queue.FINAL_WRITE_RETRY_MAX)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_a_waiting_client_times_out_as_usual(self):
        job_id = self.run_until_final_write(op())
        waiting = self.queue.wait_for_job_change(job_id, ["status"],
                                                 ["running"], None, 5)
        self.clock.advance(5)
        self.assertEqual(self.successResultOf(waiting),
                         jqueue.JOB_NOTCHANGED)
        self.full = False
        self.clock.advance(jq_queue.FINAL_WRITE_RETRY_MAX)

    def test_a_dependent_job_waits_for_the_written_outcome(self):
        first = self.submit(op())
        second = self.submit(op(depends=[[first, ["success"]]]))
        self.turn()
        call = self.executor.pending()[0].start()
        self.full = True
        call.finish()
        self.turn()
        self.assertEqual(self.executor.pending(), [])
        self.assertEqual(self.status(second), jqueue.STATUS_WAITING)
        self.full = False
        self.clock.advance(jq_queue.FINAL_WRITE_RETRY)
        self.turn()
        self.assertEqual([c.job.id for c in self.executor.pending()],
                         [second])
        self.executor.pending()[0].start().finish()

    def test_a_failed_opcode_is_not_told_before_it_is_on_disk_either(self):
        job_id = self.submit(op())
        self.turn()
        call = self.executor.pending()[0].start()
        self.full = True
        call.fail(RuntimeError("boom"))
        self.assertEqual(self.status(job_id), jqueue.STATUS_RUNNING)
        self.full = False
        self.clock.advance(jq_queue.FINAL_WRITE_RETRY)
        self.assertEqual(self.status(job_id), jqueue.STATUS_ERROR)

    def test_a_stop_while_full_leaves_the_job_as_last_written(self):
        job_id = self.run_until_final_write(op())
        self.successResultOf(self.queue.shutdown())
        # no retry left behind (the clock check of tearDown), and the file
        # still says what was last written
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.read_job(job_id)["ops"][0]["status"],
                         "running")
        # the next master fails it, as after a crash
        self.full = False
        queue = self.make_queue()
        queue.load()
        self.assertEqual(queue.query_jobs([job_id], ["status"])[0][0],
                         jqueue.STATUS_ERROR)
