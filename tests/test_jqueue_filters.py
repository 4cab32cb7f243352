"""The job queue applying job filter rules (ganeti.jobfilter): a real queue
directory, a fake clock and the fake executor of tests.test_jqueue."""

from ganeti import jobfilter
from ganeti.jqueue import model as jq_model

from tests.test_jqueue import QueueTestCase, op


def rule(uuid, action, predicates=(), priority=0, watermark=0):
    return jobfilter.make_rule(uuid, watermark, priority, list(predicates),
                               action, [])


def rules(*made):
    return {r["uuid"]: r for r in made}


DELAY = ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]
DUMMY = ["opcode", ["=", "OP_ID", "OP_TEST_DUMMY"]]


class FilterQueueTests(QueueTestCase):

    def started(self):
        return self.executor.job_ids()

    def test_no_rules_runs_everything(self):
        self.queue.set_filters({})
        self.submit(op())
        self.turn()
        self.assertEqual(self.started(), [1])

    def test_accept(self):
        self.queue.set_filters(rules(rule("a", "ACCEPT", [DELAY])))
        self.submit(op())
        self.turn()
        self.assertEqual(self.started(), [1])

    def test_pause_keeps_job_queued_until_rules_change(self):
        self.queue.set_filters(rules(rule("p", "PAUSE", [DELAY])))
        self.submit(op())
        self.submit(op("OP_TEST_DUMMY", result=1))
        self.turn()
        self.clock.advance(60)
        # only the job the rule does not match ran
        self.assertEqual(self.started(), [2])
        self.assertEqual(self.status(1), jq_model.STATUS_QUEUED)
        # a rule change looks at the paused job again
        self.queue.set_filters(rules(rule("p", "PAUSE", [DUMMY])))
        self.turn()
        self.assertEqual(self.started(), [2, 1])

    def test_pause_released_when_rule_deleted(self):
        self.queue.set_filters(rules(rule("p", "PAUSE")))
        self.submit(op())
        self.turn()
        self.assertEqual(self.started(), [])
        self.queue.set_filters({})
        self.turn()
        self.assertEqual(self.started(), [1])

    def test_paused_job_can_be_canceled(self):
        self.queue.set_filters(rules(rule("p", "PAUSE")))
        self.submit(op())
        self.turn()
        self.assertEqual(self.queue.cancel_job(1)[0], True)
        self.turn()
        self.assertEqual(self.status(1), jq_model.STATUS_CANCELED)
        self.queue.set_filters({})
        self.assertEqual(self.started(), [])

    def test_reject_cancels_the_job_naming_the_rule(self):
        self.queue.set_filters(rules(rule("r-uuid", "REJECT", [DELAY])))
        self.submit(op())
        self.turn()
        self.assertEqual(self.started(), [])
        self.assertEqual(self.status(1), jq_model.STATUS_CANCELED)
        self.assertIn("r-uuid", str(self.field(1, "opresult")))

    def test_continue_lets_the_next_rule_decide(self):
        self.queue.set_filters(rules(
            rule("c", "CONTINUE", [DELAY], priority=0),
            rule("r", "REJECT", [DELAY], priority=1)))
        self.submit(op())
        self.turn()
        self.assertEqual(self.status(1), jq_model.STATUS_CANCELED)

    def test_lower_priority_number_decides_first(self):
        self.queue.set_filters(rules(
            rule("z-reject", "REJECT", priority=5),
            rule("y-accept", "ACCEPT", priority=1)))
        self.submit(op())
        self.turn()
        self.assertEqual(self.started(), [1])

    def test_same_priority_ordered_by_watermark_then_uuid(self):
        self.queue.set_filters(rules(
            rule("b", "REJECT"), rule("a", "ACCEPT")))
        self.submit(op())
        self.turn()
        self.assertEqual(self.started(), [1])
        self.queue.set_filters(rules(
            rule("a", "ACCEPT", watermark=1), rule("b", "REJECT")))
        self.submit(op())
        self.turn()
        self.assertEqual(self.status(2), jq_model.STATUS_CANCELED)

    def test_watermark_spares_older_jobs(self):
        self.queue.set_filters(rules(rule("p", "PAUSE")))
        self.submit(op())
        self.turn()
        self.assertEqual(self.queue.highest_job_id, 1)
        # replaced with the watermark of now: job 1 is older
        self.queue.set_filters(rules(rule(
            "p", "PAUSE", watermark=self.queue.highest_job_id)))
        self.submit(op())
        self.turn()
        self.assertEqual(self.started(), [1])

    def test_jobid_predicate_with_watermark_value(self):
        self.submit(op())
        self.submit(op())
        self.queue.set_filters(rules(rule(
            "p", "PAUSE", [["jobid", [">", "id", "watermark"]]],
            watermark=0)))
        self.turn()
        self.assertEqual(self.started(), [])
        self.queue.set_filters(rules(rule(
            "p", "PAUSE", [["jobid", ["==", "id", 2]]])))
        self.turn()
        self.assertEqual(self.started(), [1])

    def test_reason_predicate(self):
        self.queue.set_filters(rules(rule(
            "r", "REJECT", [["reason", ["=~", "reason", "^batch"]]])))
        self.submit(op(reason=[["user", "batch run", 1]]))
        self.submit(op(reason=[["user", "urgent", 1]]))
        self.turn()
        self.assertEqual(self.status(1), jq_model.STATUS_CANCELED)
        self.assertEqual(self.started(), [2])

    def test_rate_limit(self):
        self.queue.set_filters(rules(rule("l", ["RATE_LIMIT", 2], [DELAY])))
        for _ in range(4):
            self.submit(op())
        self.submit(op("OP_TEST_DUMMY", result=1))
        self.turn()
        # two matching jobs at once; the other job is not limited
        self.assertEqual(sorted(self.started()), [1, 2, 5])
        self.assertEqual(self.status(3), jq_model.STATUS_QUEUED)
        self.executor.calls[0].finish()
        self.turn()
        self.assertEqual(sorted(self.started()), [1, 2, 3, 5])
        self.executor.calls[1].finish()
        self.turn()
        self.assertEqual(sorted(self.started()), [1, 2, 3, 4, 5])

    def test_rate_limit_raised_starts_waiting_jobs(self):
        self.queue.set_filters(rules(rule("l", ["RATE_LIMIT", 1])))
        self.submit(op())
        self.submit(op())
        self.turn()
        self.assertEqual(self.started(), [1])
        self.queue.set_filters(rules(rule("l", ["RATE_LIMIT", 2])))
        self.turn()
        self.assertEqual(self.started(), [1, 2])

    def test_rules_do_not_touch_running_jobs(self):
        self.submit(op())
        self.turn()
        self.queue.set_filters(rules(rule("r", "REJECT")))
        self.executor.calls[0].finish()
        self.turn()
        self.assertEqual(self.status(1), jq_model.STATUS_SUCCESS)

    def test_broken_rule_is_ignored_and_reported(self):
        broken = rule("x", "REJECT")
        broken["predicates"] = [["nonsense", 1]]
        problems = self.queue.set_filters({"x": broken})
        self.assertEqual(len(problems), 1)
        self.assertIn("nonsense", problems[0])
        self.submit(op())
        self.turn()
        self.assertEqual(self.started(), [1])

    def test_rules_apply_to_jobs_found_after_a_restart(self):
        self.queue.set_filters(rules(rule("p", "PAUSE")))
        self.submit(op())
        self.turn()
        # the master restarts: the rules come from config.data before the
        # queue loads its jobs
        queue = self.make_queue()
        queue.set_filters(rules(rule("p", "PAUSE")))
        queue.load()
        self.turn()
        self.assertEqual(self.started(), [])
        self.assertEqual(queue.query_jobs([1], ["status"]),
                         [[jq_model.STATUS_QUEUED]])
        queue.set_filters({})
        self.turn()
        self.assertEqual(self.started(), [1])
