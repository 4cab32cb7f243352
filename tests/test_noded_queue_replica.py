"""A master candidate's copy of the job queue: the node daemon's
jobqueue_update, jobqueue_rename, jobqueue_purge and
jobqueue_set_drain_flag (ganeti.server.noded.queue_replica)."""

import os
import stat
import threading
import time

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import errors
from ganeti import pathutils
from ganeti.jqueue import layout
from ganeti.jqueue.store import JobStore
from ganeti.replication import encode_data
from ganeti.server.noded import queue_replica
from ganeti.server.noded.procedure import INLINE, ProcedureTable
from ganeti.utils import io

from tests.test_crypto import cluster_cert, listen_noded, rpc_client

Q = "/var/lib/ganeti/queue/"


class _Node(queue_replica.QueueReplicaProcedures, ProcedureTable):

    def __init__(self, root):
        self.paths = pathutils.Paths(root)
        ProcedureTable.__init__(self, INLINE)


def files_below(directory):
    found = {}
    for dirpath, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, directory)] = f.read()
    return found


class QueueReplicaTests(unittest.TestCase):

    def setUp(self):
        self.root = os.path.abspath(self.mktemp())
        os.makedirs(self.root)
        self.node = _Node(self.root)
        self.dir = self.node.paths.queue_dir

    def call(self, procedure, *args):
        return self.successResultOf(self.node.call(procedure, list(args)))

    def refused(self, procedure, *args, error=errors.ParameterError):
        failure = self.failureResultOf(self.node.call(procedure, list(args)),
                                       error)
        return failure.value

    def read(self, name):
        with open(os.path.join(self.dir, name), "rb") as f:
            return f.read()

    def test_update_writes_queue_files(self):
        self.assertTrue(self.call("jobqueue_update", [
            [Q + "job-1", encode_data(b'{"id":1}')],
            [Q + "serial", "1\n"],
            [Q + "version", ["base64", "MQo="]],
            [Q + "archive/1/job-10000", encode_data(b"old one")]]))
        self.assertEqual(files_below(self.dir), {
            "lock": b"queue-replica %d\n" % os.getpid(),
            "job-1": b'{"id":1}', "serial": b"1\n", "version": b"1\n",
            "archive/1/job-10000": b"old one"})
        for name in ("job-1", "serial", "archive/1/job-10000"):
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(
                self.dir, name)).st_mode), 0o600)
        for name in ("", "archive", "archive/1"):
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(
                self.dir, name)).st_mode), 0o700)
        # a newer content replaces the file
        self.call("jobqueue_update", [[Q + "job-1", "new"]])
        self.assertEqual(self.read("job-1"), b"new")

    def test_update_is_durable(self):
        synced_files = []
        synced_dirs = []
        real_fsync = os.fsync

        def fsync(fd):
            synced_files.append(os.readlink("/proc/self/fd/%d" % fd))
            return real_fsync(fd)
        self.patch(os, "fsync", fsync)
        self.patch(io, "fsync_dir", synced_dirs.append)
        self.call("jobqueue_update", [[Q + "job-1", "a"],
                                      [Q + "archive/0/job-2", "b"]])
        # each file flushed (as its temporary file, before the rename),
        # then each directory once, including the new ones' parents
        self.assertEqual(len(synced_files), 2)
        self.assertEqual(sorted(os.path.dirname(p) for p in synced_files),
                         [self.dir, os.path.join(self.dir, "archive/0")])
        self.assertEqual(sorted(synced_dirs), sorted([
            self.dir, os.path.join(self.dir, "archive"),
            os.path.join(self.dir, "archive/0"), self.dir]))
        # no temporary file left
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["archive", "job-1", "lock"])

    def test_names_are_checked_before_anything_is_written(self):
        bad = [
            ("/var/lib/ganeti/config.data", "not a file of the job queue"),
            (Q + "../config.data", "not a file of the job queue"),
            (Q + "lock", "not a file of the job queue a master candidate"
             " keeps"),
            (Q + "journal", "not a file of the job queue a master"),
            (Q + "drain", "jobqueue_set_drain_flag"),
            (Q + "job-007", "not a job file of the queue"),
            (Q + "job-1/x", "not a file of the job queue a master"),
            (Q + "archive/1/job-3", "not a file of the queue's archive"),
            (Q + "archive/0/job-3/../../../../x", "not a file of the job"),
            (Q + "archive/00/job-3", "not a file of the queue's archive"),
            ("job-1", "not a file of the job queue"),
        ]
        for path, reason in bad:
            err = self.refused("jobqueue_update",
                               [[Q + "job-1", "fine"], [path, "x"]])
            self.assertEqual(err.args[0], "files item 1")
            self.assertIn(reason, str(err.args[-1]), path)
            self.assertIn("files item 1: ", str(err.args[-1]))
        self.assertFalse(os.path.exists(self.dir))
        # the argument's shape
        err = self.refused("jobqueue_update", [[Q + "job-1"]])
        self.assertEqual(err.args[0], "files")
        err = self.failureResultOf(self.node.call(
            "jobqueue_update", {"file": []}), errors.ParameterError).value
        self.assertEqual(err.args[0], "file")

    def test_undecodable_data_changes_nothing(self):
        self.call("jobqueue_update", [[Q + "job-1", "old"]])
        err = self.refused("jobqueue_update", [
            [Q + "job-1", "new"], [Q + "job-2", ["zlib+base64", "!!"]]])
        self.assertEqual(err.args[0], "files item 1")
        self.assertIn("cannot decode", str(err.args[-1]))
        self.assertEqual(self.read("job-1"), b"old")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "job-2")))

    def test_rename_moves_into_the_archive(self):
        self.call("jobqueue_update", [[Q + "job-3", "3"],
                                      [Q + "job-10004", "10004"]])
        moves = [[Q + "job-3", Q + "archive/0/job-3"],
                 [Q + "job-10004", Q + "archive/1/job-10004"]]
        self.assertTrue(self.call("jobqueue_rename", moves))
        found = files_below(self.dir)
        self.assertEqual(found["archive/0/job-3"], b"3")
        self.assertEqual(found["archive/1/job-10004"], b"10004")
        self.assertNotIn("job-3", found)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(
            self.dir, "archive/1")).st_mode), 0o700)
        # done already: done
        self.assertTrue(self.call("jobqueue_rename", moves))
        # a job file neither here nor archived: the copy missed something
        err = self.refused("jobqueue_rename",
                           [[Q + "job-4", Q + "archive/0/job-4"]],
                           error=errors.JobQueueError)
        self.assertIn("job-4 not in the queue directory", str(err))
        self.assertIn("missed changes", str(err))

    def test_rename_names_are_checked(self):
        self.call("jobqueue_update", [[Q + "job-3", "3"]])
        for moves, reason in [
                ([[Q + "job-3", Q + "archive/0/job-4"]], "not the same job"),
                ([[Q + "job-3", Q + "job-4"]], "not a file of the queue's"
                 " archive"),
                ([[Q + "serial", Q + "archive/0/job-3"]], "not a job file"),
                ([[Q + "job-3", "/etc/passwd"]], "not a file of the job")]:
            err = self.refused("jobqueue_rename",
                               [[Q + "job-3", Q + "archive/0/job-3"]] + moves)
            self.assertEqual(err.args[0], "renames item 1")
            self.assertIn(reason, str(err.args[-1]))
        self.assertEqual(self.read("job-3"), b"3")

    def test_purge_keeps_the_lock_and_the_archive(self):
        self.call("jobqueue_update", [[Q + "job-1", "1"], [Q + "serial", "1"],
                                      [Q + "archive/0/job-0", "0"]])
        self.call("jobqueue_set_drain_flag", True)
        # what a master that ran here left
        for name in ("journal", "journal.old", ".spare.0", "job-2.corrupt"):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write("x")
        self.assertEqual(self.call("jobqueue_purge"), 7)
        self.assertEqual(sorted(files_below(self.dir)),
                         ["archive/0/job-0", "lock"])

    def test_purge_keeps_what_it_is_told_to(self):
        self.call("jobqueue_update", [[Q + "job-1", "1"], [Q + "job-2", "2"],
                                      [Q + "serial", "2"],
                                      [Q + "version", "1"]])
        self.assertEqual(self.call("jobqueue_purge",
                                   [Q + "job-2", Q + "version",
                                    Q + "job-3"]), 2)
        self.assertEqual(sorted(files_below(self.dir)),
                         ["job-2", "lock", "version"])
        for keep, reason in [
                ([Q + "archive/0/job-1"], "which a purge leaves alone"),
                ([Q + "lock"], "not a file of the job queue a master"),
                (["/etc/passwd"], "not a file of the job queue")]:
            err = self.refused("jobqueue_purge", [Q + "job-2"] + keep)
            self.assertEqual(err.args[0], "keep item 1")
            self.assertIn(reason, str(err.args[-1]))
        self.assertEqual(sorted(files_below(self.dir)),
                         ["job-2", "lock", "version"])

    def test_drain_flag(self):
        self.assertTrue(self.call("jobqueue_set_drain_flag", True))
        self.assertEqual(self.read("drain"), b"")
        self.call("jobqueue_set_drain_flag", True)
        self.call("jobqueue_set_drain_flag", False)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "drain")))
        self.call("jobqueue_set_drain_flag", False)
        err = self.refused("jobqueue_set_drain_flag", "yes")
        self.assertEqual(err.args[0], "flag")

    def test_refused_while_a_master_daemon_holds_the_queue(self):
        self.call("jobqueue_update", [[Q + "job-1", "mine"]])
        store = JobStore(self.dir)
        store.lock()
        self.addCleanup(store.unlock)
        for procedure, args in [
                ("jobqueue_update", [[[Q + "job-1", "theirs"]]]),
                ("jobqueue_rename", [[[Q + "job-1",
                                       Q + "archive/0/job-1"]]]),
                ("jobqueue_purge", []),
                ("jobqueue_set_drain_flag", [True])]:
            err = self.refused(procedure, *args, error=errors.JobQueueLocked)
            self.assertIn("in use by a master daemon on this node (pid %d"
                          " holds its lock file" % os.getpid(), str(err))
            self.assertIn("not overwritten by another master's copy",
                          str(err))
        self.assertEqual(self.read("job-1"), b"mine")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "drain")))
        with open(store.lock_file) as f:
            self.assertEqual(f.read(), "%d\n" % os.getpid())
        store.unlock()
        self.call("jobqueue_purge")

    def test_a_starting_master_waits_for_a_write(self):
        os.makedirs(self.dir)
        holding = queue_replica.queue_locked(self.dir)
        holding.__enter__()
        with open(os.path.join(self.dir, "lock"), "rb") as f:
            self.assertTrue(f.read().startswith(layout.REPLICA_MARK))
        timer = threading.Timer(0.3, holding.__exit__, (None, None, None))
        timer.start()
        self.addCleanup(timer.join)
        store = JobStore(self.dir)
        self.addCleanup(store.unlock)
        started = time.monotonic()
        store.lock()
        self.assertGreaterEqual(time.monotonic() - started, 0.2)
        self.assertTrue(store.locked)
        with open(store.lock_file) as f:
            self.assertEqual(f.read(), "%d\n" % os.getpid())


class QueueReplicaHttpsTests(unittest.TestCase):
    """The procedures as the master calls them: over HTTPS, file work in
    the daemon's thread pool."""

    timeout = 60

    def setUp(self):
        self.root = os.path.abspath(self.mktemp())
        os.makedirs(self.root)
        cert = cluster_cert(os.path.join(self.root, "certs"))
        port, _ = listen_noded(self, cert, root=self.root)
        self.client = rpc_client(self, cert, port)

    @defer.inlineCallbacks
    def test_update_and_refusal(self):
        result = yield self.client.call("n", "jobqueue_update", [[
            [Q + "job-1", encode_data(b"one")]]])
        self.assertTrue(result.success, result.fail_msg)
        with open(os.path.join(self.root, "var/lib/ganeti/queue/job-1"),
                  "rb") as f:
            self.assertEqual(f.read(), b"one")
        result = yield self.client.call("n", "jobqueue_update", [[
            ["/var/lib/ganeti/server.pem", "x"]]])
        self.assertFalse(result.success)
        self.assertEqual(result.fail_msg,
                         "node n: jobqueue_update: files item 0:"
                         " '/var/lib/ganeti/server.pem' is not a file of"
                         " the job queue (/var/lib/ganeti/queue/...)")
