"""Job filter rules against real daemons: a one-node virtual cluster (node
daemon, master daemon) and a RAPI daemon in front of it, on a random
loopback address.  Our gnt-filter and, when Ganeti 3.0 is installed,
Ganeti's own gnt-filter and Python RAPI client manage the rules; jobs
submitted over luxi are paused, rejected and released by them."""

import json
import subprocess
import textwrap

from tests import ganeti_peer
from tests.integration.daemons import GntCommandsMixin, wait_for
from tests.integration.test_rapi import (RapiDaemonTestCase, TLS_PORT, USER,
                                         PASSWORD)

DELAY = {"OP_ID": "OP_TEST_DELAY", "duration": 0}

RAPI_SCRIPT = textwrap.dedent("""
    import json, sys
    from ganeti.rapi import client

    host, port, user, password = sys.argv[1:5]
    c = client.GanetiRapiClient(host, port=int(port), username=user,
                                password=password)
    out = {}
    uuid = c.AddFilter(2, [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]],
                       "PAUSE", [["user", "maintenance", 1]])
    out["uuid"] = uuid
    out["list"] = c.GetFilters()
    out["bulk"] = c.GetFilters(bulk=True)
    out["one"] = c.GetFilter(uuid)
    try:
        c.AddFilter(0, [], "DROP")
    except client.GanetiApiError as err:
        out["bad_action"] = [err.code, str(err)]
    try:
        c.AddFilter(-1, [], "ACCEPT")
    except client.GanetiApiError as err:
        out["bad_priority"] = [err.code, str(err)]
    out["replaced"] = c.ReplaceFilter(uuid, 1, [], ["RATE_LIMIT", 5])
    out["after_replace"] = c.GetFilter(uuid)
    print(json.dumps(out))
""")

DELETE_SCRIPT = textwrap.dedent("""
    import json, sys
    from ganeti.rapi import client

    host, port, user, password, uuid = sys.argv[1:6]
    c = client.GanetiRapiClient(host, port=int(port), username=user,
                                password=password)
    print(json.dumps([c.DeleteFilter(uuid), c.GetFilters()]))
""")


class FilterTests(GntCommandsMixin, RapiDaemonTestCase):

    def setUp(self):
        RapiDaemonTestCase.setUp(self)
        self.gnt_root = self.vc.master.root

    def submit(self):
        return self.client.call("SubmitJob", [DELAY])

    def status(self, job):
        return self.client.call("QueryJobs", [job], ["status"])[0][0]

    def wait_status(self, job, status):
        wait_for("job %s %s" % (job, status),
                 lambda: self.status(job) == status, timeout=60)

    def test_our_gnt_filter_pause_reject_release(self):
        uuid = self.ok("gnt-filter", "add", "--action", "PAUSE",
                       "--predicates",
                       '[["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]',
                       "--reason", "upgrade").strip()
        out = self.ok("gnt-filter", "list", "--no-headers", "-o",
                      "uuid,action")
        self.assertEqual(out.split(), [uuid, "PAUSE"])
        paused = self.submit()
        # still queued a while later: the rule holds it
        wait_for("job %s seen" % paused,
                 lambda: self.status(paused) is not None)
        self.run_job({"OP_ID": "OP_TAGS_GET", "kind": "cluster",
                      "name": None})
        self.assertEqual(self.status(paused), "queued")
        info = self.ok("gnt-filter", "info", uuid)
        self.assertIn("  Action: PAUSE", info)
        # bad input: named, nothing changed
        code, out = self.gnt("gnt-filter", "replace", uuid, "--action",
                             "STOP")
        self.assertNotEqual(code, 0)
        self.assertIn("action", out)
        self.assertIn("  Action: PAUSE", self.ok("gnt-filter", "info", uuid))
        # replaced by a REJECT: its watermark moves to now, so the paused
        # job (older) is released and runs; a new job is rejected
        self.ok("gnt-filter", "replace", uuid, "--action", "REJECT",
                "--predicates",
                '[["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]')
        self.wait_status(paused, "success")
        self.wait_status(self.submit(), "canceled")
        # deleted: jobs run again
        self.ok("gnt-filter", "delete", uuid)
        self.assertEqual(self.ok("gnt-filter", "list", "--no-headers"), "")
        self.wait_status(self.submit(), "success")

    def test_ganeti_gnt_filter(self):
        ganeti_peer.skip_unless_available()
        node = self.vc.master

        def theirs(*args):
            code, out = ganeti_peer.run_tool("gnt-filter", list(args),
                                             node.root, node.name)
            self.assertEqual(code, 0, out)
            return out
        uuid = theirs("add", "--action", "RATE_LIMIT 1", "--priority", "3",
                      "--predicates", '[["jobid", [">", "id", 0]]]').strip()
        self.assertIn(uuid, self.ok("gnt-filter", "list"))
        out = theirs("list", "--no-headers", "-o", "uuid,priority")
        self.assertEqual(out.split(), [uuid, "3"])
        out = theirs("info", uuid)
        self.assertIn("UUID: %s" % uuid, out)
        self.assertIn("Priority: 3", out)
        self.assertIn("RATE_LIMIT", out)
        self.assertIn("watermark", theirs("list-fields"))
        theirs("replace", "--action", "PAUSE", uuid)
        job = self.submit()
        wait_for("job %s seen" % job, lambda: self.status(job) is not None)
        self.assertEqual(self.status(job), "queued")
        theirs("delete", uuid)
        self.wait_status(job, "success")
        self.assertEqual(theirs("list", "--no-headers"), "")

    def test_ganeti_rapi_client(self):
        ganeti_peer.skip_unless_available()
        node = self.vc.master
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ganeti_peer.GANETI_LIB,
               "LANG": "C.UTF-8"}
        args = [node.ip, str(TLS_PORT), USER, PASSWORD]
        proc = subprocess.run(
            [ganeti_peer.GANETI_PYTHON, "-c", RAPI_SCRIPT] + args, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode())
        out = json.loads(proc.stdout.decode())
        uuid = out["uuid"]
        self.assertEqual(out["list"], [uuid])
        self.assertEqual(out["bulk"], [out["one"]])
        self.assertEqual((out["one"]["priority"], out["one"]["action"]),
                         (2, "PAUSE"))
        self.assertEqual(out["one"]["reason_trail"][0][:2],
                         ["user", "maintenance"])
        self.assertEqual(out["bad_action"][0], 400)
        self.assertIn("action", out["bad_action"][1])
        self.assertEqual(out["bad_priority"][0], 400)
        self.assertIn("priority", out["bad_priority"][1])
        self.assertEqual(out["replaced"], uuid)
        self.assertEqual(out["after_replace"]["action"], ["RATE_LIMIT", 5])
        # one rule only: the refused ones left nothing behind
        self.assertEqual(
            [r[0] for r in self.client.call("QueryFilters", None, ["uuid"])],
            [uuid])
        proc = subprocess.run(
            [ganeti_peer.GANETI_PYTHON, "-c", DELETE_SCRIPT] + args + [uuid],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode())
        self.assertEqual(json.loads(proc.stdout.decode()), [None, []])
