"""The event stream end to end: a one-node virtual cluster (node daemon,
master daemon) and ganeti-rapi over HTTPS; a user follows GET /2/events
while jobs run, drops the connection and resumes with Last-Event-ID
without missing an event; gnt-job watch follows a job through the
stream."""

import base64
import http.client
import json
import os
import ssl

from ganeti import crypto
from ganeti.server.rapi import rapi_pem_path

from tests.integration.daemons import (
    GntCommandsMixin, RunningClusterTestCase, port_open, wait_for)

PORT = 5080
USER, PASSWORD = "watcher", "w4tch"
FINAL = ("success", "error", "canceled")


class SseReader(object):
    """A GET /2/events over HTTPS, read event by event."""

    def __init__(self, host, query="", last_event_id=None, user=USER,
                 password=PASSWORD):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        self.conn = http.client.HTTPSConnection(host, PORT, context=ctx,
                                                timeout=60)
        headers = {"Authorization": "Basic " + base64.b64encode(
            ("%s:%s" % (user, password)).encode()).decode()}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self.conn.request("GET", "/2/events" + query, headers=headers)
        self.response = self.conn.getresponse()
        self.last_id = last_event_id

    def next(self):
        """The next event: (id or None, event name, data)."""
        fields = {}
        while True:
            line = self.response.readline()
            if not line:
                raise EOFError("the event stream ended")
            line = line.decode("utf-8").rstrip("\n")
            if not line:
                if "event" in fields:
                    break
                fields = {}
                continue
            if line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            fields[key] = value
        seq = int(fields["id"]) if "id" in fields else None
        if seq is not None:
            self.last_id = seq
        return seq, fields["event"], json.loads(fields["data"])

    def until(self, pred, limit=500):
        seen = []
        for _ in range(limit):
            event = self.next()
            seen.append(event)
            if pred(event[2]):
                return seen
        raise AssertionError("no matching event among %d: %r"
                             % (limit, seen[-5:]))

    def close(self):
        self.conn.close()


def finished(job_id):
    return lambda e: (e["kind"], e["type"], e["id"]) == ("job", "finished",
                                                         job_id)


class EventStreamTests(GntCommandsMixin, RunningClusterTestCase):

    timeout = 240
    BASE_PREFIX = "gnt-ev-"

    def setUp(self):
        RunningClusterTestCase.setUp(self)
        node = self.vc.master
        self.gnt_root = node.root
        crypto.generate_cluster_certificate(rapi_pem_path(node.paths),
                                            self.vc.cluster_name)
        users = node.paths.rapi_users_file
        os.makedirs(os.path.dirname(users), exist_ok=True)
        with open(users, "w") as f:
            f.write("%s {cleartext}%s read\nwriter wpw write\n"
                    % (USER, PASSWORD))
        self.rapi = self.vc.start("rapi", self.vc.twistd_command(
            "ganeti-rapi", node, "--port", str(PORT)))
        wait_for("RAPI on %d" % PORT, lambda: self.alive(self.rapi) and
                 port_open(node.ip, PORT))

    def stream(self, *args, **kwargs):
        reader = SseReader(self.vc.master.ip, *args, **kwargs)
        self.addCleanup(reader.close)
        return reader

    def add_tag(self, tag):
        return self.client.call("SubmitJob", [{
            "OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [tag]}])

    def wait_job(self, job_id):
        wait_for("job %s" % job_id, lambda: self.client.call(
            "QueryJobs", [job_id], ["status"])[0][0] in FINAL,
            timeout=self.JOB_TIMEOUT)

    def test_follow_drop_and_resume(self):
        reader = self.stream()
        self.assertEqual(reader.response.status, 200)
        self.assertEqual(reader.response.getheader("Content-Type"),
                         "text/event-stream; charset=utf-8")
        first = self.add_tag("ev-one")
        seen = reader.until(finished(first))
        mine = [(name, data["type"], data["data"].get("status"))
                for _, name, data in seen if data["id"] == first]
        self.assertEqual(mine[0][:2], ("job", "submitted"))
        self.assertIn(("job", "status", "running"), mine)
        self.assertEqual(mine[-1], ("job", "finished", "success"))
        tags = [data for _, name, data in seen if name == "tags"]
        self.assertEqual([t["data"]["added"] for t in tags], [["ev-one"]])
        ids = [seq for seq, _, _ in seen]
        self.assertEqual(ids, sorted(ids))
        # drop; two jobs run meanwhile
        last = reader.last_id
        reader.close()
        second = self.add_tag("ev-two")
        third = self.add_tag("ev-three")
        self.wait_job(second)
        self.wait_job(third)
        again = self.stream(last_event_id=last)
        resumed = again.until(finished(third))
        seqs = [seq for seq, _, _ in resumed]
        self.assertEqual(seqs, list(range(last + 1, last + 1 + len(seqs))))
        self.assertIn(("job", "finished", second),
                      [(n, d["type"], d["id"]) for _, n, d in resumed])
        self.assertEqual([d["data"]["added"] for _, n, d in resumed
                          if n == "tags"], [["ev-two"], ["ev-three"]])

    def test_filtered_stream_and_refusals(self):
        reader = self.stream("?kind=tags")
        job = self.add_tag("filtered")
        self.wait_job(job)
        seq, name, data = reader.next()
        self.assertEqual((name, data["data"]["added"]), ("tags",
                                                         ["filtered"]))
        bad = SseReader(self.vc.master.ip, "?kind=nope")
        self.addCleanup(bad.close)
        self.assertEqual(bad.response.status, 400)
        self.assertIn("kind", json.loads(bad.response.read())["message"])
        anon = SseReader(self.vc.master.ip, password="wrong")
        self.addCleanup(anon.close)
        self.assertEqual(anon.response.status, 401)

    def test_gnt_job_watch_follows_the_stream(self):
        job = self.client.call("SubmitJob", [{
            "OP_ID": "OP_TEST_DELAY", "duration": 0.3, "repeat": 3,
            "on_master": True}])
        out = self.ok("gnt-job", "watch", str(job))
        lines = out.splitlines()
        self.assertEqual(lines[0], "Output from job %s follows" % job)
        self.assertEqual(self.client.call("QueryJobs", [job],
                                          ["status"])[0][0], "success")
        _, oplog = self.client.call("QueryJobs", [job],
                                    ["status", "oplog"])[0]
        messages = [e[3] for op in oplog for e in op]
        self.assertTrue(messages)
        # ctime() is 24 characters, then a space
        printed = [line[25:] for line in lines[2:]]
        self.assertEqual(printed, messages)
