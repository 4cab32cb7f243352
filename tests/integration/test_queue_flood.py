"""Anonymous readers cannot stop writes: the real daemons under a flood.

The one-node cluster of tests.integration.test_rapi (node daemon, master
daemon, two RAPI daemons) with a master whose query job budget is small
(6 in all, 2 per client).  Sixteen threads, each from a loopback address
of its own (so that RAPI's per-address rate limit lets each of them
through a while), flood the plain-HTTP RAPI with anonymous requests, in
turn: instance details of names that do not exist (answered 404, no
job), and the OS list (a query job each, refused once the budget or the
address's rate is used up).
Meanwhile an authenticated user adds a cluster tag: the job is accepted
and finishes, and the queue holds no job the unknown names made.
"""

import http.client
import json
import threading
import time

from tests.integration.daemons import random_ips, wait_for
from tests.integration.test_rapi import (PASSWORD, PLAIN_PORT, USER,
                                         RapiDaemonTestCase)

from ganeti import luxi

FLOODERS = 16
#: seconds the flood lasts at least (the write happens inside it)
FLOOD_SECONDS = 8.0


class Flooder(threading.Thread):
    """Anonymous GETs from ``source`` until told to stop; counts the
    answers by path kind and status."""

    def __init__(self, host, source, index, stop):
        threading.Thread.__init__(self, daemon=True)
        self.host = host
        self.source = source
        self.index = index
        self.stop_event = stop
        self.statuses = {"unknown": {}, "os": {}}
        self.errors = []

    def get(self, path):
        conn = http.client.HTTPConnection(self.host, PLAIN_PORT, timeout=60,
                                          source_address=(self.source, 0))
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read()
            return resp.status, body
        finally:
            conn.close()

    def run(self):
        n = 0
        while not self.stop_event.is_set():
            n += 1
            # unknown names and query jobs in turn
            kind = "os" if n % 2 == 0 else "unknown"
            path = ("/2/os" if kind == "os" else
                    "/2/instances/nope-%d-%d/info" % (self.index, n))
            try:
                status, body = self.get(path)
            except (OSError, http.client.HTTPException) as err:
                self.errors.append(str(err))
                continue
            counts = self.statuses[kind]
            counts[status] = counts.get(status, 0) + 1
            if status >= 500 and status != 503:
                self.errors.append("%s: %s %r" % (path, status, body[:200]))


class FloodTests(RapiDaemonTestCase):

    timeout = 300

    def start_master(self):
        # as RunningClusterTestCase's, with a small query job budget
        self.masterd = self.start_masterd("--max-query-jobs", "6",
                                          "--max-query-jobs-per-client", "2")
        self.socket = self.vc.master.paths.master_socket
        self.client = luxi.BlockingClient(self.socket, 60)
        self.addCleanup(self.client.close)

    def job_ids(self):
        return [row[0] for row in self.client.call("QueryJobs", None,
                                                   ["id"])]

    def test_an_anonymous_flood_leaves_writes_accepted(self):
        host = self.vc.master.ip
        before = self.job_ids()
        stop = threading.Event()
        flooders = [Flooder(host, source, i, stop)
                    for i, source in enumerate(random_ips(FLOODERS))]
        for flooder in flooders:
            flooder.start()

        def stop_flood():
            stop.set()
            for flooder in flooders:
                flooder.join(90)
        self.addCleanup(stop_flood)
        started = time.monotonic()
        # the flood is on: every flooder has been answered already
        wait_for("the flood", lambda: all(
            sum(f.statuses["unknown"].values()) > 5 for f in flooders),
            timeout=60)
        resp, job = self.http("PUT", "/2/tags?tag=written-in-a-flood",
                              user=(USER, PASSWORD))
        self.assertEqual(resp.status, 200, job)
        self.assertIsInstance(job, int)
        result = self.wait_job(job)
        self.assertEqual(result["status"], "success", result)
        # still inside the flood
        self.assertFalse(stop.is_set())
        remaining = FLOOD_SECONDS - (time.monotonic() - started)
        if remaining > 0:
            time.sleep(remaining)

        def refused():
            return any(f.statuses["os"].get(code)
                       for f in flooders for code in (429, 503))
        # on a slow machine the limits may take longer to be reached
        wait_for("a query job refused", refused, timeout=90)
        stop_flood()
        self.assertEqual(self.http("GET", "/2/tags")[1],
                         ["written-in-a-flood"])

        unknown, os_list, errors = {}, {}, []
        for flooder in flooders:
            errors.extend(flooder.errors)
            for status, n in flooder.statuses["unknown"].items():
                unknown[status] = unknown.get(status, 0) + n
            for status, n in flooder.statuses["os"].items():
                os_list[status] = os_list.get(status, 0) + n
        self.assertEqual(errors, [])
        # every unknown name: 404, and no job
        self.assertEqual(list(unknown), [404], unknown)
        self.assertGreater(unknown[404], 200)
        # query jobs: served, or refused by the budget (503) or a rate
        # limit (429), never anything else
        self.assertLessEqual(set(os_list), {200, 429, 503}, os_list)
        self.assertGreater(os_list.get(200, 0), 0, os_list)
        self.assertGreater(os_list.get(503, 0) + os_list.get(429, 0), 0,
                           os_list)
        # the queue holds the tag job and one job per OS list served
        made = sorted(set(self.job_ids()) - set(before))
        self.assertEqual(len(made), os_list[200] + 1, (made, os_list))
        summaries = self.client.call("QueryJobs", made, ["summary"])
        self.assertEqual(sorted(json.dumps(s) for (s,) in summaries),
                         sorted([json.dumps(["TAGS_SET"])]
                                + [json.dumps(["OS_DIAGNOSE"])]
                                * os_list[200]))
