"""The job queue's copies on the master candidates, with real daemons: a
3-node virtual cluster built the real way (the other two nodes join
through the master and are master candidates), jobs finished, running,
queued and archived, then a candidate's node daemon killed with SIGKILL
while jobs are submitted, started again, and caught up.

Every daemon is stopped by PID when the test ends (VirtualCluster.
stop_all), whatever happened."""

import os
import shutil
import signal
import time

from twisted.internet import task
from twisted.trial import unittest

from ganeti import constants
from ganeti import jqueue
from ganeti import luxi
from ganeti.dev.vcluster import VirtualCluster, port_open

from tests.integration.daemons import (FINAL, GntCommandsMixin,
                                       random_ips, short_tmpdir, wait_for)

#: a job that ends at once, and one that runs (or waits) for long
QUICK = {"OP_ID": "OP_TEST_DELAY", "duration": 0.0}
SLOW = {"OP_ID": "OP_TEST_DELAY", "duration": 600.0}
#: a submission waits for the candidates; this is far more than any may
#: take, and far less than the replication's timeout for a node that does
#: not answer
SUBMIT_BOUND = 5.0


def queue_files(queue_dir):
    """The job files of a queue directory (``job-N`` and
    ``archive/D/job-N``) and its serial file: {relative name: content}."""
    found = {}
    for dirpath, _, names in os.walk(queue_dir):
        for name in names:
            if not (name.startswith("job-") or name == "serial") or \
                    "." in name:
                continue
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, queue_dir)] = f.read()
    return found


class QueueReplicationTests(GntCommandsMixin, unittest.TestCase):

    timeout = 420

    def setUp(self):
        base = short_tmpdir(self, "gnt-q-")
        self.vc = VirtualCluster(os.path.join(base, "vc"), node_count=3)
        for node, ip in zip(self.vc.nodes, random_ips(3)):
            node.ip = ip
        self.addCleanup(self.vc.stop_all)
        self.vc.create_master()
        self.vc.start_master()
        self.vc.join_nodes()
        self.client = luxi.BlockingClient(
            self.vc.master.paths.master_socket, 60)
        self.gnt_root = self.vc.master.root
        self.addCleanup(self.client.close)

    # --- helpers -----------------------------------------------------------

    def submit(self, op):
        started = time.monotonic()
        job = self.client.call("SubmitJob", [dict(op)])
        took = time.monotonic() - started
        self.assertLess(took, SUBMIT_BOUND, "job %s took %.1f s to be"
                        " acknowledged" % (job, took))
        return job

    def statuses(self, jobs):
        return [row[0] for row in self.client.call("QueryJobs", jobs,
                                                   ["status"])]

    def wait_status(self, jobs, wanted):
        wait_for("jobs %s %s" % (jobs, wanted), lambda: all(
            status in wanted for status in self.statuses(jobs)),
            timeout=120)

    def wait_same_queue(self, node):
        """Until ``node``'s copy holds the master's job files and serial,
        byte for byte; what it holds."""
        master = self.vc.master.paths.queue_dir
        copy = node.paths.queue_dir
        state = {}

        def same():
            state["master"] = queue_files(master)
            state["copy"] = queue_files(copy)
            return state["master"] == state["copy"]
        try:
            wait_for("the queue's copy on %s" % node.name, same, timeout=90)
        except AssertionError:
            master_files, copy_files = state["master"], state["copy"]
            differ = sorted(n for n in set(master_files) | set(copy_files)
                            if master_files.get(n) != copy_files.get(n))
            raise AssertionError("the copy on %s differs from the master's"
                                 " queue in %s" % (node.name, differ))
        return state["copy"]

    def noded_process(self, node):
        for description, proc in self.vc.processes:
            if description == "noded@" + node.name and proc.poll() is None:
                return proc
        raise AssertionError("no node daemon runs on %s" % node.name)

    def master_log(self):
        with open(os.path.join(self.vc.master.paths.log_dir,
                               "ganeti-masterd.log"),
                  encoding="utf-8", errors="replace") as f:
            return f.read()

    # --- the scenario ------------------------------------------------------

    def test_candidates_hold_the_queue(self):
        rows = self.client.call("QueryNodes", [], ["name", "master_candidate"],
                                False)
        self.assertEqual(sorted(rows), [[n.name, True]
                                        for n in self.vc.nodes])
        candidates = self.vc.nodes[1:]
        # two jobs run at a time: the rest of the slow ones stay queued
        job = self.client.call("SubmitJob", [{
            "OP_ID": "OP_CLUSTER_SET_PARAMS", "max_running_jobs": 2}])
        self.wait_status([job], ("success",))
        finished = [self.submit(QUICK) for _ in range(3)]
        self.wait_status(finished, ("success",))
        running = [self.submit(SLOW) for _ in range(2)]
        self.wait_status(running, ("running",))
        queued = [self.submit(SLOW) for _ in range(2)]
        self.assertEqual(self.statuses(queued), ["queued", "queued"])
        self.assertTrue(self.client.call("ArchiveJob", finished[0]))

        for node in candidates:
            copy = self.wait_same_queue(node)
            self.assertIn("archive/0/job-%d" % finished[0], copy)
            self.assertNotIn("job-%d" % finished[0], copy)
            for job in finished[1:] + running + queued:
                self.assertIn("job-%d" % job, copy)
        # the copies hold each job as the master last wrote it
        self.assertIn(b'"status":"running"',
                      copy["job-%d" % running[0]])
        self.assertIn(b'"status":"queued"', copy["job-%d" % queued[0]])

        # what a new master would make of a copy (after a failover): the
        # queued jobs run, the running ones end as after an unclean stop
        taken_over = os.path.join(self.mktemp(), "queue")
        shutil.copytree(candidates[0].paths.queue_dir, taken_over)
        queue = jqueue.JobQueue(taken_over, executor=None,
                                clock=task.Clock())
        self.addCleanup(queue._store.unlock)
        report = queue.load()
        self.assertEqual(sorted(report.requeued), queued)
        self.assertEqual(sorted(report.failed), running)
        # (the jobs that added the nodes, set the parameters, and ran)
        rows = self.client.call("QueryJobs", None, ["status"])
        self.assertEqual(report.finalized, sum(row[0] in FINAL
                                               for row in rows))
        self.assertEqual(queue.query_jobs(finished[1:], ["status"]),
                         [["success"], ["success"]])
        self.assertEqual(queue._serial, queued[-1])

        # a run slot for the jobs to come: the queued jobs are canceled,
        # one running job is killed
        for job in queued:
            self.assertTrue(self.client.call("CancelJob", job)[0])
        self.assertTrue(self.client.call("CancelJob", running[1], True)[0])
        self.wait_status(queued + running[1:], FINAL)

        # node3's daemon dies while jobs are submitted: they are not held
        # up (the node is missed, not waited for) ...
        node3 = candidates[1]
        proc = self.noded_process(node3)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        during = [self.submit(QUICK) for _ in range(5)]
        self.wait_status(during, ("success",))
        self.assertTrue(self.client.call("ArchiveJob", finished[1]))
        during += [self.submit(QUICK) for _ in range(3)]
        self.wait_status(during, FINAL)
        self.assertNotIn("job-%d" % during[-1],
                         queue_files(node3.paths.queue_dir))
        # ... node2 kept in step meanwhile
        self.wait_same_queue(candidates[0])
        # node3 comes back and catches up, the archived job included
        self.vc.start("noded@" + node3.name, self.vc.twistd_command(
            "ganeti-noded", node3, "--no-mlock"))
        wait_for("the node daemon of %s" % node3.name, lambda: port_open(
            node3.ip, constants.DEFAULT_NODED_PORT))
        copy = self.wait_same_queue(node3)
        self.assertIn("archive/0/job-%d" % finished[1], copy)
        for job in during:
            self.assertIn("job-%d" % job, copy)
        self.assertIn("Job queue replication to node %s failed" % node3.name,
                      self.master_log())
        wait_for("the master's log", lambda: "Node %s holds a full copy of"
                 " the job queue again" % node3.name in self.master_log())
        # and is waited for again
        again = self.submit(QUICK)
        self.wait_status([again], ("success",))
        self.wait_same_queue(node3)

        # a copy that lost a file gets it back with gnt-cluster redist-conf
        node2 = candidates[0]
        lost = os.path.join(node2.paths.queue_dir, "job-%d" % again)
        os.unlink(lost)
        out = self.ok("gnt-cluster", "redist-conf")
        self.assertNotIn("did not get a copy of the job queue", out)
        self.assertTrue(os.path.exists(lost))
        self.wait_same_queue(node2)
