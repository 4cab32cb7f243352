"""The master's event stream over luxi (WatchEvents), in a real master
daemon in the test's process: jobs, their log, tags, config objects;
resuming after a drop; refusals of bad filters."""

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti import errors
from ganeti import luxi

from tests.inprocess import start_master


class Follower(object):
    """Collects a stream's events; ``until(pred)`` fires once one
    matching event arrived."""

    def __init__(self):
        self.events = []
        self._waits = []

    def __call__(self, batch):
        self.events.extend(batch)
        for pred, d in list(self._waits):
            if any(pred(e) for e in self.events):
                self._waits.remove((pred, d))
                d.callback(self.events)

    def until(self, pred, timeout=30):
        if any(pred(e) for e in self.events):
            return defer.succeed(self.events)
        d = defer.Deferred()
        self._waits.append((pred, d))
        return d.addTimeout(timeout, reactor)


def job_finished(job_id):
    return lambda e: (e["kind"], e["type"], e["id"]) == ("job", "finished",
                                                         job_id)


class WatchEventsTests(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        self.master, self.client = yield start_master(self, "/tmp/gev")
        self.socket = self.master.config.paths.master_socket

    @defer.inlineCallbacks
    def watch(self, since=None, kinds=None, names=None):
        follower = Follower()
        stream = yield luxi.open_event_stream(reactor, self.socket, follower,
                                              since=since, kinds=kinds,
                                              names=names)
        self.addCleanup(stream.close)
        return follower, stream

    def add_tag(self, tag):
        return self.client.call("SubmitJob", [{
            "OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [tag]}])

    @defer.inlineCallbacks
    def test_job_and_tag_events(self):
        follower, stream = yield self.watch()
        self.assertEqual(stream.greeting["head"], self.master.events.head)
        job_id = yield self.add_tag("seen-by-stream")
        events = yield follower.until(job_finished(job_id))
        mine = [(e["kind"], e["type"], e["data"].get("status"))
                for e in events if e["id"] == job_id]
        # submitted first (it may have started already in the same write)
        self.assertEqual(mine[0][:2], ("job", "submitted"))
        self.assertIn(("job", "status", "running"), mine)
        self.assertEqual(mine[-2:], [("job", "status", "success"),
                                     ("job", "finished", "success")])
        tags = [e for e in events if e["kind"] == "tags"]
        self.assertEqual(len(tags), 1)
        self.assertEqual(tags[0]["data"]["kind"], "cluster")
        self.assertEqual(tags[0]["data"]["added"], ["seen-by-stream"])
        # the tag arrived while the job ran
        order = [e["seq"] for e in events]
        self.assertEqual(order, sorted(order))
        seq_of = {(e["kind"], e["type"], e["data"].get("status")): e["seq"]
                  for e in events if e["id"] in (job_id, tags[0]["id"])}
        self.assertLess(seq_of[("job", "status", "running")], tags[0]["seq"])
        self.assertLess(tags[0]["seq"], seq_of[("job", "finished",
                                                "success")])

    @defer.inlineCallbacks
    def test_log_messages_of_a_job(self):
        follower, _ = yield self.watch(kinds=["job"])
        job_id = yield self.client.call("SubmitJob", [{
            "OP_ID": "OP_TEST_DELAY", "duration": 0, "repeat": 2}])
        events = yield follower.until(job_finished(job_id))
        logs = [e["data"] for e in events
                if e["type"] == "log" and e["id"] == job_id]
        self.assertTrue(logs, "no log event for job %s" % job_id)
        self.assertEqual([entry["serial"] for entry in logs],
                         sorted(entry["serial"] for entry in logs))
        # the same entries as the job's own log
        rows = yield self.client.call("QueryJobs", [job_id], ["oplog"])
        oplog = [entry for op in rows[0][0] for entry in op]
        self.assertEqual([[d["serial"], d["timestamp"], d["type"],
                           d["message"]] for d in logs],
                         [list(e) for e in oplog])
        self.assertTrue(all(e["kind"] == "job" for e in events))

    @defer.inlineCallbacks
    def test_resume_after_a_drop_misses_nothing(self):
        follower, stream = yield self.watch()
        first = yield self.add_tag("one")
        yield follower.until(job_finished(first))
        last_seen = follower.events[-1]["seq"]
        yield stream.close()
        # while nobody listens
        second = yield self.add_tag("two")
        third = yield self.add_tag("three")
        again, _ = yield self.watch(since=last_seen)
        events = yield again.until(job_finished(third))
        yield again.until(job_finished(second))
        self.assertEqual(events[0]["seq"], last_seen + 1)
        seqs = [e["seq"] for e in events]
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))))
        added = [e["data"]["added"] for e in events if e["kind"] == "tags"]
        self.assertEqual(added, [["two"], ["three"]])

    @defer.inlineCallbacks
    def test_filter_on_one_object(self):
        follower, _ = yield self.watch(kinds=["job"], names=["999999"])
        job_id = yield self.add_tag("x")
        other, _ = yield self.watch(names=[str(job_id)])
        yield other.until(job_finished(job_id))
        self.assertEqual(follower.events, [])

    @defer.inlineCallbacks
    def test_unknown_kind_is_refused(self):
        err = yield self.assertFailure(
            luxi.open_event_stream(reactor, self.socket, lambda b: None,
                                   kinds=["jobs"]),
            errors.OpPrereqError)
        self.assertIn("kind", str(err))
        self.assertIn("'jobs'", str(err))
        self.assertEqual(self.master.events.subscriber_count, 0)

    @defer.inlineCallbacks
    def test_config_objects_created_and_modified(self):
        follower, _ = yield self.watch(kinds=["group"])
        job_id = yield self.client.call("SubmitJob", [{
            "OP_ID": "OP_GROUP_ADD", "group_name": "evgroup"}])
        yield self.client.call("WaitForJobChange", job_id, ["status"], None,
                               None, 20)
        yield follower.until(lambda e: e["type"] == "created")
        created = [e for e in follower.events if e["type"] == "created"]
        self.assertEqual(created[0]["name"], "evgroup")
        self.assertEqual(created[0]["id"],
                         self.master.cfg.get_nodegroup("evgroup").uuid)

    @defer.inlineCallbacks
    def test_archived_job(self):
        follower, _ = yield self.watch(kinds=["job"])
        job_id = yield self.add_tag("to-archive")
        yield follower.until(job_finished(job_id))
        archived = yield self.client.call("ArchiveJob", job_id)
        self.assertTrue(archived)
        events = yield follower.until(
            lambda e: (e["type"], e["id"]) == ("archived", job_id))
        mine = [e["type"] for e in events if e["id"] == job_id]
        self.assertEqual(mine[-2:], ["finished", "archived"])
