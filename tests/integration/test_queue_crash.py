"""kill -9 of the master daemon at random moments under a flood of jobs:
no acknowledged job is lost, no id is handed out twice, and no job goes
back on a status a client has seen."""

import os
import random
import signal
import threading
import time

from ganeti import luxi

from tests.integration.daemons import wait_for
from tests.integration.test_masterd import MasterdTestCase

OP = {"OP_ID": "OP_TEST_DELAY", "duration": 0.0}
FINAL = ("success", "error", "canceled")


class _Flood(threading.Thread):
    """One client submitting jobs (and looking at some) until its master
    dies; what it was told is kept."""

    def __init__(self, socket, rng):
        threading.Thread.__init__(self, daemon=True)
        self.socket = socket
        self.rng = rng
        self.acknowledged = []   # ids, in the order answered
        self.seen = {}           # id -> last status a query answered

    def run(self):
        try:
            client = luxi.BlockingClient(self.socket, 10)
        except Exception:
            return
        try:
            while True:
                job_id = client.call("SubmitJob", [dict(OP)])
                self.acknowledged.append(job_id)
                if self.rng.random() < 0.3:
                    pick = self.rng.choice(self.acknowledged)
                    row = client.call("QueryJobs", [pick], ["status"])[0]
                    if row is not None:
                        self.seen[pick] = row[0]
        except Exception:
            pass        # the master was killed: expected
        finally:
            client.close()


class FloodKillTests(MasterdTestCase):

    HYPERVISORS = ("fake",)
    KILLS = 20
    CLIENTS = 4

    def kill_master(self, proc):
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        self.vc.processes = [(d, p) for d, p in self.vc.processes
                             if p is not proc]

    def test_kill_9_under_a_flood_loses_no_acknowledged_job(self):
        seed = int(time.time())
        rng = random.Random(seed)
        acknowledged = {}        # id -> round it was answered in
        seen = {}
        for round_no in range(self.KILLS):
            proc = self.start_masterd()
            floods = [_Flood(self.socket, random.Random(rng.random()))
                      for _ in range(self.CLIENTS)]
            for flood in floods:
                flood.start()
            time.sleep(rng.uniform(0.05, 0.8))
            self.kill_master(proc)
            for flood in floods:
                flood.join(30)
                self.assertFalse(flood.is_alive())
                for job_id in flood.acknowledged:
                    self.assertNotIn(job_id, acknowledged,
                                     "id %d handed out twice (seed %d)"
                                     % (job_id, seed))
                    acknowledged[job_id] = round_no
                seen.update(flood.seen)
                # a client is answered ids in increasing order
                self.assertEqual(flood.acknowledged,
                                 sorted(flood.acknowledged))
            # ids of a later master are above those of every earlier one
            earlier = [j for j, r in acknowledged.items() if r < round_no]
            now = [j for j, r in acknowledged.items() if r == round_no]
            if earlier and now:
                self.assertGreater(min(now), max(earlier), "seed %d" % seed)
        self.assertGreater(len(acknowledged), self.KILLS,
                           "the flood hardly ran (seed %d)" % seed)
        self.start_masterd()
        c = self.client()
        ids = sorted(acknowledged)

        def all_final():
            rows = c.call("QueryJobs", ids, ["status"])
            return all(row is not None and row[0] in FINAL for row in rows)
        wait_for("every job finished", all_final, timeout=120)
        rows = c.call("QueryJobs", ids, ["id", "status", "opresult"])
        lost = [j for j, row in zip(ids, rows) if row is None]
        self.assertEqual(lost, [], "acknowledged jobs lost (seed %d)" % seed)
        by_id = {row[0]: row for row in rows}
        for job_id, status in seen.items():
            now = by_id[job_id][1]
            if status == "success":
                self.assertEqual(now, "success", "job %d (seed %d)"
                                 % (job_id, seed))
            elif status == "running":
                self.assertIn(now, ("success", "error"))
        for job_id, status, result in rows:
            if status == "error":
                # only a job the crash interrupted while it ran
                self.assertIn("master daemon stopped", str(result).lower(),
                              "job %d (seed %d)" % (job_id, seed))
            else:
                self.assertEqual(status, "success")
        # the queue directory holds the acknowledged jobs (and any a
        # client sent whose answer the crash cut off); past 4,500 jobs the
        # oldest finished ones are in the archive
        queue_dir = self.vc.master.paths.queue_dir
        on_disk = set()
        for directory, _, names in os.walk(queue_dir):
            if directory in (queue_dir, os.path.join(queue_dir, "archive")) \
                    or os.path.dirname(directory) == os.path.join(
                        queue_dir, "archive"):
                on_disk.update(int(n[4:]) for n in names
                               if n.startswith("job-") and n[4:].isdigit())
        self.assertEqual(sorted(set(ids) - on_disk), [],
                         "seed %d" % seed)
        print("%d kills, %d acknowledged jobs, none lost (seed %d)"
              % (self.KILLS, len(ids), seed))
