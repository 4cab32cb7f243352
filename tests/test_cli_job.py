"""gnt-job: list, info (Ganeti's format), cancel, archive, watch, wait."""

import os

from twisted.trial import unittest

from ganeti import errors
from ganeti.cli import gnt_job

from tests.test_cli_fakes import FakeClient, run, field, encoded

JOB_FIELDS = [field("id", "ID", "number"), field("status", "Status"),
              field("summary", "Summary", "other"),
              field("archived", "Archived", "bool")] + [
    field(n, n.upper(), "other") for n in
    ["ops", "received_ts", "start_ts", "end_ts", "opstatus", "oplog",
     "opresult", "opstart", "opexec", "opend"]]

JOB7 = [7, "error", ["TEST_DELAY(0.1)", "INSTANCE_STARTUP(i1)"], False,
        [{"OP_ID": "OP_TEST_DELAY", "duration": 0.1, "dry_run": False,
          "reason": [["gnt:client:gnt-debug", "delay",
                      1700000000000000000]]},
         {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "i1"}],
        [1700000000, 1], [1700000001, 2], [1700000003, 500000],
        ["success", "error"],
        [[[1, [1700000001, 5], "message", "Test delay iteration 1/1"]],
         [[2, [1700000002, 0], "message", "Starting i1"]]],
        [True, ["OpExecError", ["Could not start instance: boom"]]],
        [[1700000001, 3], [1700000002, 0]],
        [[1700000001, 4], [1700000002, 1]],
        [[1700000001, 900000], [1700000003, 400000]]]

# What Ganeti 3.0's own "gnt-job info 7" prints for this job (TZ=UTC).
GANETI_JOB_INFO = """\
- Job ID: 7
  Status: error
  Received:         2023-11-14 22:13:20.000001
  Processing start: 2023-11-14 22:13:21.000002 (delta 1.000001s)
  Processing end:   2023-11-14 22:13:23.500000 (delta 2.499998s)
  Total processing time: 3.499999 seconds
  Opcodes: 
    - Opcode: OP_TEST_DELAY
      Status: success
      Processing start: 2023-11-14 22:13:21.000003
      Execution start:  2023-11-14 22:13:21.000004
      Processing end:   2023-11-14 22:13:21.900000
      Input fields: 
        OP_ID: OP_TEST_DELAY
        dry_run: False
        duration: 0.1
        reason: 
          - - gnt:client:gnt-debug
            - delay
            - 1700000000000000000
      Result: True
      Execution log: 
        - Time: 2023-11-14 22:13:21.000005
          Content: [1, message, Test delay iteration 1/1]
    - Opcode: OP_INSTANCE_STARTUP
      Status: error
      Processing start: 2023-11-14 22:13:22.000000
      Execution start:  2023-11-14 22:13:22.000001
      Processing end:   2023-11-14 22:13:23.400000
      Input fields: 
        OP_ID: OP_INSTANCE_STARTUP
        instance_name: i1
      Result: 
        - OpExecError
        - - Could not start instance: boom
      Execution log: 
        - Time: 2023-11-14 22:13:22.000000
          Content: [2, message, Starting i1]
"""


class UtcTestCase(unittest.TestCase):

    def setUp(self):
        import time
        old = os.environ.get("TZ")
        os.environ["TZ"] = "UTC"
        time.tzset()

        def restore():
            if old is None:
                del os.environ["TZ"]
            else:
                os.environ["TZ"] = old
            time.tzset()
        self.addCleanup(restore)
        self.client = FakeClient()
        self.client.tables["job"] = (JOB_FIELDS, [
            JOB7, [8, "running", ["TEST_DELAY(60)"], False] + [None] * 10])

    def gnt(self, *argv):
        return run(gnt_job.commands, argv, self.client)


class JobTests(UtcTestCase):

    def test_list(self):
        code, out, _ = self.gnt("list")
        self.assertEqual(out.splitlines(), [
            "ID Status  Summary",
            " 7 error   TEST_DELAY(0.1),INSTANCE_STARTUP(i1)",
            " 8 running TEST_DELAY(60)"])
        # the request Ganeti's gnt-job list sends
        self.assertEqual(self.client.calls[-1], (
            "Query", ["job", ["id", "status", "summary"], None]))

    def test_list_selections(self):
        self.gnt("list", "--running", "7", "8")
        self.assertEqual(self.client.calls[-1][1][2], [
            "&", ["|", ["==", "id", 7], ["==", "id", 8]],
            ["|", ["=", "status", "running"]]])
        self.gnt("list", "--archived")
        self.assertEqual(self.client.calls[-1][1][1],
                         ["id", "status", "summary", "archived"])
        code, _, err = self.gnt("list", "seven")
        self.assertEqual(code, 1)
        self.assertIn("Invalid job ID", err)

    def test_info_is_ganeti_format(self):
        self.client.tables["job"] = (JOB_FIELDS, [JOB7])
        code, out, err = self.gnt("info", "7")
        self.assertEqual(code, 0, err)
        self.assertEqual(out, GANETI_JOB_INFO)
        self.assertEqual(self.client.calls[-1][1][2],
                         ["|", ["==", "id", 7]])

    def test_info_of_unknown_job(self):
        self.client.tables["job"] = (JOB_FIELDS, [])
        code, _, err = self.gnt("info", "99")
        self.assertEqual(code, 1)
        self.assertIn("no such job: 99", err)

    def test_cancel_archive_autoarchive_priority(self):
        self.client.cancel_answers[8] = [False, "Job 8 is no longer waiting"
                                         " in the queue"]
        code, out, _ = self.gnt("cancel", "7", "8")
        self.assertEqual(code, 1)
        self.assertEqual(out, "Job 7 canceled\nJob 8 is no longer waiting"
                         " in the queue\n")
        code, out, _ = self.gnt("cancel", "--kill", "7")
        self.assertEqual(self.client.calls[-1], ("CancelJob", [7, True]))
        self.client.archive_answers[8] = False
        code, _, err = self.gnt("archive", "7", "8")
        self.assertEqual(code, 1)
        self.assertIn("Failed to archive job 8", err)
        code, out, _ = self.gnt("autoarchive", "2h")
        self.assertEqual(self.client.calls[-1][1][0], 7200)
        self.assertEqual(out, "Archived 3 jobs, 0 unchecked left\n")
        self.gnt("autoarchive", "all")
        self.assertEqual(self.client.calls[-1][1][0], -1)
        code, out, _ = self.gnt("change-priority", "--priority", "low", "8")
        self.assertEqual(self.client.calls[-1],
                         ("ChangeJobPriority", [8, 10]))

    def test_cancel_pending_asks(self):
        self.client.tables["job"] = ([field("id", "ID", "number"),
                                      field("status")],
                                     [[3, "queued"], [4, "waiting"]])
        code, out, err = self.gnt("cancel", "--pending")
        self.assertEqual(code, 13)
        self.assertIn("3, 4", err)
        code, out, err = self.gnt("cancel", "--pending", "--force")
        self.assertEqual(code, 0)
        self.assertEqual([c[1] for c in self.client.calls
                          if c[0] == "CancelJob"], [[3, False],
                                                    [4, False]])


class StreamClient(object):
    """A luxi client whose WatchEvents answers ``batches``."""

    def __init__(self, batches, refuse=None):
        self.batches = batches
        self.refuse = refuse
        self.asked = []
        self.closed = False

    def watch_events(self, since=None, kinds=None, names=None):
        self.asked.append((since, kinds, names))
        if self.refuse is not None:
            raise self.refuse
        return {"head": 1, "oldest": None}, iter(self.batches)

    def close(self):
        self.closed = True


class WatchTests(UtcTestCase):

    def test_watch_prints_the_log(self):
        self.client.logs["OP_TEST_DELAY"] = ["iteration 1", "iteration 2"]
        job_id = self.client.submit_job([{"OP_ID": "OP_TEST_DELAY",
                                          "duration": 1.0}])
        code, out, err = self.gnt("watch", str(job_id))
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[:2], ["Output from job 1 follows",
                                     "-------------------------"])
        self.assertEqual(lines[2:], [
            "Tue Nov 14 22:13:21 2023 iteration 1",
            "Tue Nov 14 22:13:22 2023 iteration 2"])

    def watch_with_stream(self, job_id, batches, oplog, status="running",
                          refuse=None):
        """gnt-job watch with a master streaming ``batches`` of events
        after the job had logged ``oplog`` (one list per opcode)."""
        client = self.client
        stream = StreamClient(batches, refuse)
        made = []

        def factory(path):
            made.append(path)
            return client if len(made) == 1 else stream
        real_query = client.query_jobs

        def query_jobs(job_ids, fields):
            if fields == ["status", "oplog"]:
                client.calls.append(("QueryJobs", [job_ids, fields]))
                return [[status, oplog]]
            return real_query(job_ids, fields)
        client.query_jobs = query_jobs
        result = run(gnt_job.commands, ["watch", str(job_id)],
                     client_factory=factory)
        return result, stream

    def test_watch_follows_the_event_stream(self):
        job_id = self.client.submit_job([{"OP_ID": "OP_TEST_DELAY",
                                          "duration": 1.0}])
        early = [1, [1700000001, 0], "message", "before the stream"]

        def log(serial, text):
            return {"seq": 10 + serial, "kind": "job", "type": "log",
                    "id": job_id, "name": str(job_id),
                    "data": {"serial": serial, "timestamp":
                             [1700000000 + serial, 0], "type": "message",
                             "message": text}}
        finished = {"seq": 20, "kind": "job", "type": "finished",
                    "id": job_id, "data": {"status": "success"}}
        (code, out, err), stream = self.watch_with_stream(
            job_id, [[log(1, "before the stream"), log(2, "step two")],
                     [log(3, "step three"), finished]], [[early]])
        self.assertEqual(code, 0, err)
        self.assertEqual(stream.asked, [(None, ["job"], [str(job_id)])])
        self.assertTrue(stream.closed)
        self.assertEqual(out.splitlines()[2:], [
            "Tue Nov 14 22:13:21 2023 before the stream",
            "Tue Nov 14 22:13:22 2023 step two",
            "Tue Nov 14 22:13:23 2023 step three"])
        # no polling
        self.assertNotIn("WaitForJobChange", self.client.methods())

    def test_watch_polls_the_rest_when_cut_off(self):
        self.client.logs["OP_TEST_DELAY"] = ["one", "two"]
        job_id = self.client.submit_job([{"OP_ID": "OP_TEST_DELAY",
                                          "duration": 1.0}])
        cut = {"seq": None, "kind": "cut", "type": "cut",
               "data": {"reason": "subscriber too slow"}}
        first = [1, [1700000001, 0], "message", "one"]
        (code, out, err), _ = self.watch_with_stream(
            job_id, [[cut]], [[first]])
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines()[2:], [
            "Tue Nov 14 22:13:21 2023 one",
            "Tue Nov 14 22:13:22 2023 two"])
        waits = [c[1] for c in self.client.calls
                 if c[0] == "WaitForJobChange"]
        self.assertEqual(waits[0][3], 1)        # after the one printed

    def test_watch_polls_an_older_master(self):
        self.client.logs["OP_TEST_DELAY"] = ["one"]
        job_id = self.client.submit_job([{"OP_ID": "OP_TEST_DELAY",
                                          "duration": 1.0}])
        (code, out, err), _ = self.watch_with_stream(
            job_id, [], [], refuse=errors.LuxiError(
                "Unknown LUXI method 'WatchEvents'"))
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines()[2:],
                         ["Tue Nov 14 22:13:21 2023 one"])

    def test_wait_is_quiet_and_fails_with_the_job(self):
        self.client.errors["OP_TEST_DELAY"] = encoded(
            errors.OpExecError("interrupted"))
        self.client.logs["OP_TEST_DELAY"] = ["iteration 1"]
        job_id = self.client.submit_job([{"OP_ID": "OP_TEST_DELAY",
                                          "duration": 1.0}])
        code, out, err = self.gnt("wait", str(job_id))
        self.assertEqual((code, out), (1, ""))
        self.assertEqual(err, "Failure: command execution error:\n"
                         "interrupted\n")
        code, _, err = self.gnt("wait", "42")
        self.assertEqual(code, 1)
        self.assertIn("no such job: 42", err)
