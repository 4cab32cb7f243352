"""One process per job queue: the flock on ``queue/lock``."""

import os
import subprocess
import sys

from twisted.internet import defer, task
from twisted.trial import unittest

from ganeti import errors
from ganeti import jqueue
from ganeti import opcodes
from ganeti.jqueue.store import JobStore

from tests.places import snapshot

def new_op():
    return opcodes.OpTestDelay(duration=0)


class Executor(object):
    """Starts every opcode (status running) and lets the test finish it."""

    def __init__(self):
        self.running = []

    def execute(self, job, op_index, op_input, feedback_fn):
        feedback_fn.notify_running()
        d = defer.Deferred()
        self.running.append(d)
        return d


# Holds the lock like another master would, until killed.
HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


class JobStoreLockTests(unittest.TestCase):

    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())

    def store(self):
        store = JobStore(self.dir)
        self.addCleanup(store.unlock)
        return store

    def test_second_store_refused_with_file_and_pid(self):
        first = self.store()
        first.lock()
        first.lock()    # idempotent
        self.assertTrue(first.locked)
        with open(os.path.join(self.dir, "lock")) as f:
            self.assertEqual(f.read(), "%d\n" % os.getpid())
        second = self.store()
        err = self.assertRaises(errors.JobQueueLocked, second.lock)
        self.assertIsInstance(err, errors.JobQueueError)
        self.assertIn(os.path.join(self.dir, "lock"), str(err))
        self.assertIn("pid %d" % os.getpid(), str(err))
        self.assertIn("only one master daemon", str(err))
        self.assertFalse(second.locked)
        first.unlock()
        self.assertFalse(first.locked)
        second.lock()
        self.assertTrue(second.locked)

    def test_lock_of_another_process_released_when_it_dies(self):
        os.makedirs(self.dir)
        lock_file = os.path.join(self.dir, "lock")
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, lock_file],
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        self.addCleanup(holder.wait)
        self.addCleanup(holder.kill)
        self.assertEqual(holder.stdout.readline(), b"locked\n")
        store = self.store()
        err = self.assertRaises(errors.JobQueueLocked, store.lock)
        # found through /proc/locks: this holder wrote no pid
        self.assertIn("pid %d holds the lock file %s" % (holder.pid,
                                                        lock_file), str(err))
        holder.kill()
        holder.wait()
        holder.stdout.close()
        holder.stdin.close()
        store.lock()
        self.assertTrue(store.locked)


class JobQueueLockTests(unittest.TestCase):

    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())
        self.clock = task.Clock()
        self.clock.advance(1000)

    def queue(self, executor=None, **kwargs):
        queue = jqueue.JobQueue(self.dir, executor or Executor(),
                                clock=self.clock, **kwargs)
        self.addCleanup(queue._store.unlock)
        return queue

    def test_second_queue_refused_before_touching_anything(self):
        executor = Executor()
        first = self.queue(executor)
        first.load()
        job_id = self.successResultOf(first.submit_job([new_op()]))
        self.clock.advance(0)    # the job starts: "running" on disk
        self.assertEqual(first.query_jobs([job_id], ["status"]),
                         [["running"]])
        before = snapshot(self.dir)
        err = self.assertRaises(errors.JobQueueLocked, self.queue().load)
        self.assertIn(os.path.join(self.dir, "lock"), str(err))
        # the running job was not failed, nor anything else rewritten
        self.assertEqual(snapshot(self.dir), before)
        executor.running[0].callback(True)
        self.assertEqual(first.query_jobs([job_id], ["status"]),
                         [["success"]])
        first.shutdown()

    def test_queue_uses_a_store_that_holds_the_lock(self):
        store = JobStore(self.dir)
        self.addCleanup(store.unlock)
        store.lock()
        queue = self.queue(store=store)
        queue.load()
        self.assertIs(queue._store, store)
        self.assertEqual(queue.queue_dir, self.dir)
        queue.shutdown()

    def test_lock_kept_after_shutdown(self):
        # an opcode still finishing after shutdown may write its job file
        first = self.queue()
        first.load()
        first.shutdown()
        self.assertRaises(errors.JobQueueLocked, self.queue().load)


