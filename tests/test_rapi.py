"""The RAPI Klein app, driven with treq's StubTreq.

The master behind it is :class:`FakeMaster`: luxi requests go through the
real luxi server code (argument checks, opcode validation, error encoding)
to a handler that answers queries from a real configuration with the real
query engine, and records jobs instead of running them.  Time (the
long-poll, the implemented-opcode cache) runs on a fake clock.
"""

import base64
import json
import os
import re
import tempfile
import time

from treq.testing import StubTreq
from twisted.internet import defer
from twisted.trial import unittest

from ganeti import constants
from ganeti import errors
from ganeti import luxi
from ganeti import objects
from ganeti import opcodes
from ganeti import query
from ganeti.cmdlib.cluster import cluster_info
from ganeti.config import ConfigStore
from ganeti.dev.demo import populate
from ganeti.rapi import app as rapi_app
from ganeti.rapi import auth
from ganeti.rapi import baserlib
from ganeti.rapi import openapi
from ganeti.rapi import resources

from tests import openapi_check
from tests.fakes import ClockTestCase

N1 = "node1.example.com"
N2 = "node2.example.com"
I1 = "inst1.example.com"
HA1_JACK = "54c12257ee9be413f2f3182435514aae"   # jack:Ganeti Remote API:abc123

USERS = """
# a comment, then an empty line

writer secret write
reader {cleartext}readpw read
jack {HA1}%s write
both {CLEARTEXT}bothpw read,write
nobody nopw
short
""" % HA1_JACK


def make_config():
    store = ConfigStore.create(None, "cluster.example.com", N1, "192.0.2.1")
    store.add_node(objects.Node(name=N2, primary_ip="192.0.2.2",
                                secondary_ip="192.0.2.2"))
    populate(store)
    store.add_nodegroup(objects.NodeGroup(name="group2"))
    store.add_network(objects.Network(name="net1", network="10.0.0.0/24"))
    store.add_tags(constants.TAG_CLUSTER, None, ["ctag"])
    store.add_tags(constants.TAG_INSTANCE, I1, ["itag"])
    return store


class FakeHandler(object):
    """The master's luxi handler, minus running jobs."""

    def __init__(self, cfg, clock):
        self.cfg = cfg
        self.clock = clock
        self.jobs = {}
        self.submitted = []
        self.implemented = set(opcodes.ALL_OP_IDS)
        self.results = {}        # OP_ID -> (status, opresult) on submit
        self.fail_next = None    # an exception for the next call
        self.calls = []
        self.waiters = []
        self.live = None         # a live data provider for queries

    def _job_rows(self, job_ids, fields):
        rows = self.query_jobs(job_ids, ["id"] + list(fields))
        return [dict(zip(["id"] + list(fields), r)) for r in rows if r]

    def _ctx(self):
        return query.QueryContext(self.cfg, live=self.live,
                                  jobs=self._job_rows)

    def submit_job(self, ops):
        job_id = len(self.jobs) + 1
        dicts = [op.to_dict() for op in ops]
        self.submitted.append(dicts)
        n = len(ops)
        job = {"id": job_id, "ops": dicts, "status": "queued",
               "summary": [op.summary() for op in ops],
               "opstatus": ["queued"] * n, "opresult": [None] * n,
               "oplog": [[] for _ in ops], "received_ts": [1, 0],
               "start_ts": None, "end_ts": None, "priority": 0,
               "oppriority": [0] * n, "opstart": [None] * n,
               "opexec": [None] * n, "opend": [None] * n,
               "archived": False}
        self.jobs[job_id] = job
        scripted = self.results.get(dicts[-1]["OP_ID"])
        if scripted is not None:
            self.finish(job_id, *scripted)
        return job_id

    def finish(self, job_id, status, result):
        job = self.jobs[job_id]
        job["status"] = status
        job["opstatus"] = [status] * len(job["ops"])
        job["opresult"] = [result] * len(job["ops"])
        job["end_ts"] = [2, 0]
        for d in list(self.waiters):
            d.callback(None)

    def query_jobs(self, job_ids, fields):
        ids = sorted(self.jobs) if job_ids is None else job_ids
        return [[self.jobs[i][f] for f in fields] if i in self.jobs
                else None for i in ids]

    def wait_for_job_change(self, job_id, fields, prev_job_info,
                            prev_log_serial, timeout):
        if job_id not in self.jobs:
            raise errors.JobLost("Job %s not found" % job_id)
        self.calls.append(("WaitForJobChange", timeout))

        def current():
            job = self.jobs[job_id]
            values = [job[f] for f in fields]
            logs = [e for entries in job["oplog"] for e in entries
                    if prev_log_serial is None or e[0] > prev_log_serial]
            if values != prev_job_info or logs:
                return [values, logs]
            return None

        now = current()
        if now is not None:
            return now
        d = defer.Deferred()
        self.waiters.append(d)
        call = self.clock.callLater(timeout, d.callback, None)

        def done(_):
            self.waiters.remove(d)
            if call.active():
                call.cancel()
            return current() or luxi.JOB_NOTCHANGED
        return d.addCallback(done)

    def cancel_job(self, job_id, kill):
        job = self.jobs.get(job_id)
        if job is None:
            return [False, "Job %s not found" % job_id]
        job["status"] = "canceled"
        return [True, "Job %s canceled" % job_id]

    def query(self, what, fields, qfilter):
        return self._ctx().query(what, fields, qfilter)

    def query_fields(self, what, fields):
        return self._ctx().query_fields(what, fields)

    def query_cluster_info(self):
        return cluster_info(self.cfg)

    def query_tags(self, kind, name):
        return sorted(self.cfg._tag_target(kind, name).tags)

    def query_implemented_opcodes(self):
        self.calls.append(("QueryImplementedOpcodes",))
        return sorted(self.implemented)


class FakeMaster(object):
    """``call()`` through the real luxi server code to a FakeHandler."""

    def __init__(self, handler):
        self.handler = handler
        self.factory = luxi.LuxiServerFactory(handler)

    def call(self, method, *args):
        if self.handler.fail_next is not None:
            err, self.handler.fail_next = self.handler.fail_next, None
            return defer.fail(err)
        raw = luxi.format_request(method, args)[:-1]
        d = defer.Deferred.fromCoroutine(self.factory.answer(raw))
        return d.addCallback(lambda resp: luxi.parse_response(resp[:-1]))


def basic(user, password):
    token = base64.b64encode(("%s:%s" % (user, password)).encode())
    return "Basic " + token.decode()


WRITER = basic("writer", "secret")
READER = basic("reader", "readpw")


class RapiTestCase(ClockTestCase):

    require_auth = False

    def setUp(self):
        ClockTestCase.setUp(self)
        # trial's directory for this test: removed with the run's others
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.users_path = os.path.join(self.dir, "users")
        with open(self.users_path, "w") as f:
            f.write(USERS)
        self.cfg = make_config()
        self.handler = FakeHandler(self.cfg, self.clock)
        self.master = FakeMaster(self.handler)
        self.users = auth.UsersFile(self.users_path)
        self.rapi = rapi_app.RapiApp(self.master, self.users, self.clock,
                                     require_auth=self.require_auth)
        self.stub = StubTreq(self.rapi.resource())

    def tearDown(self):
        import shutil
        shutil.rmtree(self.dir, True)
        ClockTestCase.tearDown(self)

    @defer.inlineCallbacks
    def request(self, method, path, body=None, auth=None, raw=None,
                content_type="application/json", headers=None):
        hdrs = {}
        if auth:
            hdrs["Authorization"] = [auth]
        if content_type:
            hdrs["Content-Type"] = [content_type]
        hdrs.update(headers or {})
        data = raw
        if body is not None:
            data = json.dumps(body).encode("utf-8")
        response = yield self.stub.request(method, "http://rapi.test" + path,
                                           headers=hdrs, data=data)
        text = yield response.content()
        self.last_headers = response.headers
        value = json.loads(text.decode("utf-8")) if text else None
        if self.openapi_checks and raw is None:
            self.check_openapi(method, path, body, response.code, value)
        return response.code, value

    #: every request a test makes is checked against the OpenAPI document:
    #: an accepted body against its request body schema, every answer
    #: against the schema of its status
    openapi_checks = True

    def check_openapi(self, method, path, body, code, value):
        checker = openapi_check.shared_checker()
        if checker is None or checker.operation(method, path) is None:
            return      # an undocumented path or method: 404/501 tests
        if body is not None and code == 200:
            self.assertEqual(checker.body_errors(method, path, body), [],
                             "%s %s: the accepted body %r does not match"
                             " the OpenAPI document" % (method, path, body))
        self.assertEqual(checker.answer_errors(method, path, code, value),
                         [], "%s %s: the answer %s does not match the"
                         " OpenAPI document" % (method, path, code))

    @defer.inlineCallbacks
    def ok(self, method, path, body=None, auth=WRITER, **kwargs):
        code, value = yield self.request(method, path, body, auth, **kwargs)
        self.assertEqual(code, 200, value)
        return value

    @defer.inlineCallbacks
    def error(self, code, method, path, body=None, auth=WRITER, **kwargs):
        got, value = yield self.request(method, path, body, auth, **kwargs)
        self.assertEqual(got, code, value)
        self.assertEqual(sorted(value), ["code", "explain", "message"])
        self.assertEqual(value["code"], code)
        return value

    def last_job(self):
        return self.handler.submitted[-1]


# --- Users file and authentication -------------------------------------------

class UsersFileTests(unittest.TestCase):

    def test_parse(self):
        users = auth.parse_users(USERS)
        self.assertEqual(sorted(users), ["both", "jack", "nobody", "reader",
                                         "writer"])
        self.assertEqual(users["writer"].options, {"write"})
        self.assertEqual(users["both"].options, {"read", "write"})
        self.assertEqual(users["nobody"].options, frozenset())

    def test_passwords(self):
        users = auth.parse_users(USERS)
        self.assertTrue(auth.check_password(users["writer"], "secret"))
        self.assertFalse(auth.check_password(users["writer"], "Secret"))
        self.assertTrue(auth.check_password(users["reader"], "readpw"))
        self.assertTrue(auth.check_password(users["both"], "bothpw"))
        self.assertTrue(auth.check_password(users["jack"], "abc123"))
        self.assertFalse(auth.check_password(users["jack"], HA1_JACK))
        self.assertEqual(auth.ha1("jack", "abc123"), HA1_JACK)
        odd = auth.User("x", "{SHA}abc", [])
        self.assertFalse(auth.check_password(odd, "abc"))
        self.assertFalse(auth.check_password(auth.User("x", "{abc", []),
                                             "{abc"))
        upper = auth.User("jack", "{ha1}" + HA1_JACK.upper(), [])
        self.assertTrue(auth.check_password(upper, "abc123"))

    def test_basic_header(self):
        self.assertEqual(auth.parse_basic(WRITER), ("writer", "secret"))
        self.assertEqual(auth.parse_basic(basic("a", "b:c")), ("a", "b:c"))
        self.assertIsNone(auth.parse_basic("Digest username=x"))
        self.assertIsNone(auth.parse_basic("Basic !!!"))
        self.assertIsNone(auth.parse_basic("Basic " + base64.b64encode(
            b"nocolon").decode()))
        self.assertIsNone(auth.parse_basic(None))

    def test_reload_on_change_and_missing_file(self):
        d = tempfile.mkdtemp()
        self.addCleanup(__import__("shutil").rmtree, d, True)
        path = os.path.join(d, "users")
        users = auth.UsersFile(path)
        self.assertEqual(users.users(), {})
        with open(path, "w") as f:
            f.write("a pw write\n")
        self.assertEqual(sorted(users.users()), ["a"])
        with open(path, "w") as f:
            f.write("a pw2 write\nb pw read\n")
        self.assertEqual(sorted(users.users()), ["a", "b"])
        self.assertIsNotNone(users.authenticate(basic("a", "pw2")))
        self.assertIsNone(users.authenticate(basic("a", "pw")))
        os.unlink(path)
        self.assertEqual(users.users(), {})


class AuthTests(RapiTestCase):

    @defer.inlineCallbacks
    def test_anonymous_get(self):
        self.assertEqual((yield self.ok("GET", "/2/info", auth=None))["name"],
                         "cluster.example.com")

    @defer.inlineCallbacks
    def test_write_needs_credentials(self):
        err = yield self.error(401, "PUT", "/2/tags?tag=x", auth=None)
        self.assertEqual(err["message"], "Unauthorized")
        self.assertEqual(err["explain"],
                         "No permission -- see authorization schemes")
        self.assertEqual(self.last_headers.getRawHeaders(
            "WWW-Authenticate"), ['Basic realm="Ganeti Remote API"'])
        self.assertEqual(self.handler.submitted, [])

    @defer.inlineCallbacks
    def test_bad_credentials_even_for_anonymous_resources(self):
        yield self.error(401, "GET", "/2/info", auth=basic("writer", "x"))
        yield self.error(401, "GET", "/2/info", auth=basic("ghost", "x"))
        yield self.error(401, "GET", "/version", auth="Digest username=a")

    @defer.inlineCallbacks
    def test_forbidden(self):
        for user in (READER, basic("nobody", "nopw")):
            err = yield self.error(403, "PUT", "/2/tags?tag=x", auth=user)
            self.assertEqual(err["message"], "Forbidden")
            self.assertEqual(err["explain"], "Request forbidden --"
                             " authorization will not help")
        yield self.error(403, "GET", "/2/jobs/1/wait", auth=READER,
                         body={"fields": ["status"]})
        self.assertEqual(self.handler.submitted, [])

    @defer.inlineCallbacks
    def test_rights(self):
        yield self.ok("PUT", "/2/tags?tag=x", auth=basic("jack", "abc123"))
        yield self.ok("PUT", "/2/tags?tag=y", auth=basic("both", "bothpw"))
        self.assertEqual(len(self.handler.submitted), 2)
        # /2/query needs read or write, even for GET
        yield self.error(401, "GET", "/2/query/node?fields=name", auth=None)
        yield self.ok("GET", "/2/query/node?fields=name", auth=READER)
        yield self.ok("GET", "/2/query/node?fields=name", auth=WRITER)
        yield self.error(403, "GET", "/2/query/node?fields=name",
                         auth=basic("nobody", "nopw"))
        # storage queries need write
        yield self.error(403, "GET", "/2/nodes/%s/storage?output_fields=name"
                         % N1, auth=READER)

    @defer.inlineCallbacks
    def test_users_file_reloaded(self):
        yield self.error(401, "PUT", "/2/tags?tag=x", auth=basic("new", "pw"))
        with open(self.users_path, "a") as f:
            f.write("new pw write\n")
        yield self.ok("PUT", "/2/tags?tag=x", auth=basic("new", "pw"))


class RequireAuthTests(RapiTestCase):

    require_auth = True

    @defer.inlineCallbacks
    def test_everything_needs_a_user(self):
        yield self.error(401, "GET", "/version", auth=None)
        yield self.error(401, "GET", "/2/instances", auth=None)
        self.assertEqual((yield self.ok("GET", "/version",
                                        auth=basic("nobody", "nopw"))), 2)
        # rights are unchanged
        yield self.error(403, "PUT", "/2/tags?tag=a",
                         auth=basic("nobody", "nopw"))


# --- HTTP basics -------------------------------------------------------------

class ProtocolTests(RapiTestCase):

    @defer.inlineCallbacks
    def test_version_root_features(self):
        self.assertEqual((yield self.ok("GET", "/version", auth=None)), 2)
        self.assertIsNone((yield self.ok("GET", "/", auth=None)))
        self.assertIsNone((yield self.ok("GET", "/2", auth=None)))
        self.assertEqual(set((yield self.ok("GET", "/2/features"))),
                         {"instance-create-reqv1", "instance-reinstall-reqv1",
                          "node-migrate-reqv1", "node-evac-res1",
                          "event-stream"})

    @defer.inlineCallbacks
    def test_headers_and_body_format(self):
        response = yield self.stub.get("http://rapi.test/version")
        self.assertEqual((yield response.content()), b"2\n")
        self.assertEqual(response.headers.getRawHeaders("Content-Type"),
                         ["application/json"])
        self.assertEqual(response.headers.getRawHeaders("Server"),
                         ["Ganeti 3.0.2"])
        # (Connection: close is checked on a real connection in
        # test_rapi_integration: the client side of StubTreq eats it)

    @defer.inlineCallbacks
    def test_not_found(self):
        for path in ("/nothing", "/2/instances/a/b/c", "/2/jobs/abc",
                     "/2/instances/bad%20name"):
            err = yield self.error(404, "GET", path)
            self.assertEqual(err["message"], "Not Found")
        err = yield self.error(404, "GET", "/2/instances/ghost")
        self.assertIn("ghost", err["explain"])
        yield self.error(404, "GET", "/2/nodes/ghost")
        yield self.error(404, "GET", "/2/groups/ghost")
        yield self.error(404, "GET", "/2/networks/ghost")

    @defer.inlineCallbacks
    def test_method_not_supported(self):
        err = yield self.error(501, "PATCH", "/version")
        self.assertEqual(err["message"],
                         "Method PATCH is unsupported for path /version")
        self.assertEqual(err["explain"],
                         "Server does not support this operation")
        yield self.error(501, "DELETE", "/2/instances")
        yield self.error(501, "POST", "/2/jobs/1")

    @defer.inlineCallbacks
    def test_media_type(self):
        for ctype in ("application/json; charset=utf-8", "text/plain",
                      None):
            err = yield self.error(415, "PUT", "/2/modify", raw=b"{}",
                                   content_type=ctype)
            self.assertEqual(err["message"], "Unsupported Media Type")
            self.assertIn("Entity body in unsupported format",
                          err["explain"])
        # case does not matter; no body needs no type
        yield self.ok("PUT", "/2/modify", raw=b"{}",
                      content_type="Application/JSON")
        yield self.ok("PUT", "/2/redistribute-config", content_type=None)
        self.assertEqual(len(self.handler.submitted), 2)

    @defer.inlineCallbacks
    def test_bad_json(self):
        err = yield self.error(400, "PUT", "/2/modify", raw=b"{nope")
        self.assertTrue(err["message"].startswith(
            "Unable to parse JSON data"), err)
        self.assertEqual(err["explain"],
                         "Bad request syntax or unsupported method")
        yield self.error(400, "PUT", "/2/modify", body=[1, 2])

    def watch_log(self):
        """Events of level error or critical logged from now on."""
        from twisted.logger import LogLevel, globalLogPublisher
        seen = []

        def observer(event):
            if event.get("log_level") in (LogLevel.error,
                                          LogLevel.critical):
                seen.append(event)
        globalLogPublisher.addObserver(observer)
        self.addCleanup(globalLogPublisher.removeObserver, observer)
        return seen

    @defer.inlineCallbacks
    def test_deeply_nested_bodies_400(self):
        logged = self.watch_log()
        err = yield self.error(400, "PUT", "/2/modify", raw=b"[" * 100000)
        self.assertEqual(err["message"], "Invalid body: the JSON text nests"
                         " lists and objects deeper than the limit of 64"
                         " levels")
        # a query filter 5000 levels deep, in a body
        qfilter = b'["!", ' * 5000 + b'["=", "name", "x"]' + b"]" * 5000
        err = yield self.error(400, "PUT", "/2/query/node", auth=READER,
                               raw=b'{"fields": ["name"], "qfilter": %s}'
                               % qfilter)
        self.assertIn("deeper than the limit of 64 levels", err["message"])
        # brackets in strings do not count; 64 levels are fine
        yield self.ok("PUT", "/2/modify", raw=b'{"default_iallocator_params":'
                      b' {"x": "%s\\"%s"}}' % (b"[" * 1000, b"{" * 100))
        yield self.ok("PUT", "/2/redistribute-config",
                      raw=b"[" * 64 + b"]" * 64)
        # ... and a filter gets its own limit
        deep = b'["!", ' * 20 + b'["=", "name", "x"]' + b"]" * 20
        err = yield self.error(400, "PUT", "/2/query/node", auth=READER,
                               raw=b'{"fields": ["name"], "qfilter": %s}'
                               % deep)
        self.assertIn("nested too deeply (at most 10 levels)",
                      err["message"])
        self.assertEqual(logged, [])
        self.assertEqual(len(self.handler.submitted), 2)

    @defer.inlineCallbacks
    def test_numbers_no_parameter_can_hold_400(self):
        logged = self.watch_log()
        body = (b'{"__version__": 1, "mode": "create", "name":'
                b' "i2.example.com", "disk_template": "plain", "disks":'
                b' [{"size": 1024}], "nics": [{}], "os_type": "busybox",'
                b' "pnode": "%s", "beparams": {"memory": %s}}')
        for number, text in ((b"1e400", "1e400 is not a finite number"),
                             (b"-1e400", "-1e400 is not a finite number"),
                             (b"NaN", "NaN is not a finite number"),
                             (b"Infinity", "Infinity is not a finite"
                              " number"),
                             (b"99999999999999999999", "99999999999999999999"
                              " is out of range (integers must fit in 64"
                              " bits)")):
            err = yield self.error(400, "POST", "/2/instances",
                                   raw=body % (N1.encode(), number))
            self.assertEqual(err["message"], "Invalid body: beparams/memory:"
                             " %s" % text)
        err = yield self.error(400, "PUT", "/2/instances/%s/modify" % I1,
                               raw=b'{"disks": [["add", {"size": 1e999}]]}')
        self.assertEqual(err["message"], "Invalid body: disks/0/1/size:"
                         " 1e999 is not a finite number")
        self.assertEqual(self.handler.submitted, [])
        self.assertEqual(logged, [])

    @defer.inlineCallbacks
    def test_bad_query_argument(self):
        err = yield self.error(400, "GET", "/2/instances?bulk=maybe")
        self.assertIn("'bulk'", err["message"])


# --- Master errors -----------------------------------------------------------

class MasterErrorTests(RapiTestCase):

    @defer.inlineCallbacks
    def check(self, err, code, text):
        self.handler.fail_next = err
        value = yield self.error(code, "GET", "/2/info", auth=None)
        self.assertIn(text, value["message"])

    @defer.inlineCallbacks
    def test_mapping(self):
        yield self.check(luxi.NoMasterError("no socket"), 502, "no socket")
        yield self.check(luxi.ConnectionClosedError("gone"), 502, "gone")
        yield self.check(luxi.LuxiTimeoutError("slow"), 504, "slow")
        yield self.check(errors.JobQueueDrainError("drained"), 503,
                         "drained")
        yield self.check(errors.JobQueueFull("full"), 503, "full")
        yield self.check(errors.OpPrereqError("bad x", "wrong_input"), 400,
                         "bad x")
        yield self.check(errors.OpCodeUnknown("OP_X"), 501, "OP_X")
        yield self.check(errors.ConfigurationError("boom"), 500, "boom")
        yield self.check(RuntimeError("bug"), 500, "Internal error")
        self.flushLoggedErrors(RuntimeError)

    @defer.inlineCallbacks
    def test_drained_queue_on_submit(self):
        # what the master says when it refuses the job
        def drained(ops):
            raise errors.JobQueueDrainError("The job queue is drained")
        self.handler.submit_job = drained
        err = yield self.error(503, "PUT", "/2/tags?tag=a")
        self.assertIn("drained", err["message"])


# --- Lists and objects -------------------------------------------------------

class ListTests(RapiTestCase):

    @defer.inlineCallbacks
    def test_instances(self):
        forthcoming = [i for i in self.cfg.instances.values()
                       if i.forthcoming][0]
        names = sorted(i.name or i.uuid for i in self.cfg.instances.values())
        value = yield self.ok("GET", "/2/instances", auth=None)
        self.assertEqual(sorted(v["id"] for v in value), names)
        self.assertIn({"id": I1, "uri": "/2/instances/" + I1}, value)
        bulk = yield self.ok("GET", "/2/instances?bulk=1", auth=None)
        self.assertEqual(len(bulk), len(names))
        one = [b for b in bulk if b["name"] == I1][0]
        for field in resources.I_FIELDS:
            self.assertIn(field, one)
        self.assertEqual(one["beparams"]["memory"], 512)
        self.assertEqual(one["admin_state"], "down")
        self.assertEqual(one["tags"], ["itag"])
        self.assertEqual(one["pnode"], N1)
        self.assertIsNone(one["oper_ram"])     # no live data: null
        # as in Ganeti's list, no "forthcoming": htools count a reservation
        # like a stopped instance holding its resources
        fc = [b for b in bulk if b["uuid"] == forthcoming.uuid][0]
        self.assertNotIn("forthcoming", fc)
        self.assertEqual(fc["status"], "ADMIN_down")
        single = yield self.ok("GET", "/2/instances/" + I1, auth=None)
        # one instance also says its hypervisor (the web console's serial
        # console link needs it)
        hypervisor = [i for i in self.cfg.instances.values()
                      if i.name == I1][0].hypervisor
        self.assertEqual(single, dict(one, forthcoming=False,
                                      hypervisor=hypervisor))
        # by UUID too (a forthcoming instance may have no name), saying it
        # is one
        by_uuid = yield self.ok("GET", "/2/instances/" + forthcoming.uuid)
        self.assertEqual(by_uuid["uuid"], forthcoming.uuid)
        self.assertTrue(by_uuid["forthcoming"])

    @defer.inlineCallbacks
    def test_nodes(self):
        value = yield self.ok("GET", "/2/nodes", auth=None)
        self.assertEqual(value, [{"id": N1, "uri": "/2/nodes/" + N1},
                                 {"id": N2, "uri": "/2/nodes/" + N2}])
        bulk = yield self.ok("GET", "/2/nodes?bulk=1", auth=None)
        self.assertEqual([n["role"] for n in bulk], ["M", "C"])
        for field in resources.N_FIELDS:
            self.assertIn(field, bulk[0])
        one = yield self.ok("GET", "/2/nodes/" + N2, auth=None)
        self.assertEqual(one["secondary_ip"], one["sip"])
        self.assertEqual(one["pip"], "192.0.2.2")
        self.assertEqual((yield self.ok("GET", "/2/nodes/%s/role" % N1)),
                         "master")
        self.assertEqual((yield self.ok("GET", "/2/nodes/%s/role" % N2)),
                         "master-candidate")
        yield self.error(404, "GET", "/2/nodes/ghost/role")

    @defer.inlineCallbacks
    def test_groups_and_networks(self):
        value = yield self.ok("GET", "/2/groups", auth=None)
        self.assertEqual(value, [{"name": "default",
                                  "uri": "/2/groups/default"},
                                 {"name": "group2",
                                  "uri": "/2/groups/group2"}])
        bulk = yield self.ok("GET", "/2/groups?bulk=1")
        self.assertEqual(sorted(bulk[0]), sorted(resources.G_FIELDS))
        self.assertEqual(bulk[0]["node_cnt"], 2)
        one = yield self.ok("GET", "/2/groups/group2")
        self.assertEqual(one["node_cnt"], 0)
        value = yield self.ok("GET", "/2/networks")
        self.assertEqual(value, [{"name": "net1",
                                  "uri": "/2/networks/net1"}])
        bulk = yield self.ok("GET", "/2/networks?bulk=1")
        self.assertEqual(sorted(bulk[0]), sorted(resources.NET_FIELDS))
        one = yield self.ok("GET", "/2/networks/net1")
        self.assertEqual(one["network"], "10.0.0.0/24")

    @defer.inlineCallbacks
    def test_info(self):
        self.cfg.set_cluster_params(volume_group_name="xenvg")
        info = yield self.ok("GET", "/2/info")
        self.assertEqual(info["master"], N1)
        self.assertEqual(info["vg_name"], "xenvg")
        self.assertEqual(info["vg_name"], info["volume_group_name"])
        self.assertEqual(info["drbd_helper"], info["drbd_usermode_helper"])
        self.assertIn("ipolicy", info)

    @defer.inlineCallbacks
    def test_os(self):
        self.handler.results["OP_OS_DIAGNOSE"] = (
            "success", [["busybox", ["default", "big"]], ["plain", []]])
        names = yield self.ok("GET", "/2/os", auth=None)
        self.assertEqual(names, ["busybox+default", "busybox+big", "plain"])
        self.assertEqual(self.last_job()[0]["output_fields"],
                         ["name", "variants"])
        self.handler.results["OP_OS_DIAGNOSE"] = ("error", ["OpExecError",
                                                            ["no nodes"]])
        err = yield self.error(502, "GET", "/2/os")
        self.assertIn("Can't get OS list", err["message"])


# --- Tags --------------------------------------------------------------------

class TagTests(RapiTestCase):

    @defer.inlineCallbacks
    def test_every_object(self):
        self.assertEqual((yield self.ok("GET", "/2/tags")), ["ctag"])
        self.assertEqual((yield self.ok("GET", "/2/instances/%s/tags" % I1)),
                         ["itag"])
        for path, kind, name in (
                ("/2/tags", "cluster", None),
                ("/2/instances/%s/tags" % I1, "instance", I1),
                ("/2/nodes/%s/tags" % N1, "node", N1),
                ("/2/groups/default/tags", "nodegroup", "default"),
                ("/2/networks/net1/tags", "network", "net1")):
            self.assertEqual((yield self.ok("GET", path, auth=None)),
                             ["ctag"] if kind == "cluster" else
                             ["itag"] if kind == "instance" else [])
            job = yield self.ok("PUT", path + "?tag=a&tag=b&dry-run=1")
            self.assertIsInstance(job, int)
            op = self.last_job()[0]
            self.assertEqual((op["OP_ID"], op["kind"], op["name"],
                              op["tags"], op["dry_run"]),
                             ("OP_TAGS_SET", kind, name, ["a", "b"], True))
            yield self.ok("DELETE", path + "?tag=a")
            op = self.last_job()[0]
            self.assertEqual((op["OP_ID"], op["tags"], op["dry_run"]),
                             ("OP_TAGS_DEL", ["a"], None))

    @defer.inlineCallbacks
    def test_errors(self):
        err = yield self.error(400, "PUT", "/2/tags")
        self.assertIn("'tag'", err["message"])
        yield self.error(404, "GET", "/2/instances/ghost/tags")
        yield self.error(404, "GET", "/2/nodes/ghost/tags")
        self.assertEqual(self.handler.submitted, [])


# --- Jobs --------------------------------------------------------------------

class JobTests(RapiTestCase):

    @defer.inlineCallbacks
    def setUp(self):
        RapiTestCase.setUp(self)
        self.job = yield self.ok("PUT", "/2/tags?tag=a")
        self.handler.jobs[self.job]["oplog"] = [[[1, [5, 0], "message",
                                                  "hello"]]]

    @defer.inlineCallbacks
    def test_list_and_get(self):
        yield self.ok("PUT", "/2/tags?tag=b")
        self.assertEqual((yield self.ok("GET", "/2/jobs")),
                         [{"id": 1, "uri": "/2/jobs/1"},
                          {"id": 2, "uri": "/2/jobs/2"}])
        bulk = yield self.ok("GET", "/2/jobs?bulk=1")
        self.assertEqual(sorted(bulk[0]), sorted(resources.J_FIELDS_BULK))
        job = yield self.ok("GET", "/2/jobs/1", auth=None)
        self.assertEqual(sorted(job), sorted(resources.J_FIELDS))
        self.assertEqual(job["id"], 1)
        self.assertEqual(job["status"], "queued")
        self.assertEqual(job["summary"], ["TAGS_SET"])
        self.assertEqual(job["oplog"], [[[1, [5, 0], "message", "hello"]]])
        yield self.error(404, "GET", "/2/jobs/99")

    @defer.inlineCallbacks
    def test_reason_trail(self):
        yield self.ok("PUT", "/2/tags?tag=a&reason=because")
        trail = self.last_job()[0]["reason"]
        self.assertEqual([r[:2] for r in trail],
                         [["gnt:user", "because"],
                          ["gnt:library:rlib2:tags", ""]])
        self.assertIsInstance(trail[0][2], int)
        yield self.ok("POST", "/2/instances/%s/reboot" % I1)
        self.assertEqual(self.last_job()[0]["reason"][-1][0],
                         "gnt:library:rlib2:instances_name_reboot")

    @defer.inlineCallbacks
    def test_cancel(self):
        self.assertEqual((yield self.ok("DELETE", "/2/jobs/1")),
                         [True, "Job 1 canceled"])
        yield self.error(404, "DELETE", "/2/jobs/99")
        yield self.error(401, "DELETE", "/2/jobs/1", auth=None)

    @defer.inlineCallbacks
    def test_wait_changed_at_once(self):
        value = yield self.ok("GET", "/2/jobs/1/wait", body={
            "fields": ["status"], "previous_job_info": None,
            "previous_log_serial": None})
        self.assertEqual(value, {"job_info": ["queued"], "log_entries": [
            [1, [5, 0], "message", "hello"]]})

    @defer.inlineCallbacks
    def test_wait_long_poll(self):
        body = {"fields": ["status"], "previous_job_info": ["queued"],
                "previous_log_serial": 1}
        d = self.request("GET", "/2/jobs/1/wait", body, WRITER)
        self.assertNoResult(d)
        self.assertEqual(self.handler.calls[-1], ("WaitForJobChange", 10))
        self.clock.advance(9)
        self.assertNoResult(d)
        self.clock.advance(1)
        self.stub.flush()
        self.assertEqual((yield d), (200, None))
        # a change ends the wait early
        d = self.request("GET", "/2/jobs/1/wait", body, WRITER)
        self.assertNoResult(d)
        self.handler.finish(1, "success", None)
        self.stub.flush()
        code, value = yield d
        self.assertEqual((code, value["job_info"]), (200, ["success"]))

    @defer.inlineCallbacks
    def test_wait_errors(self):
        for body, field in (({}, "fields"), ({"fields": "status"}, "fields"),
                            ({"fields": ["status"],
                              "previous_job_info": "x"},
                             "previous_job_info"),
                            ({"fields": ["status"],
                              "previous_log_serial": "1"},
                             "previous_log_serial")):
            err = yield self.error(400, "GET", "/2/jobs/1/wait", body=body)
            self.assertIn(field, err["message"])
        yield self.error(404, "GET", "/2/jobs/99/wait",
                         body={"fields": ["status"]})


# --- Opcodes the master lacks ------------------------------------------------

class NotImplementedTests(RapiTestCase):

    @defer.inlineCallbacks
    def test_follows_the_master(self):
        self.handler.implemented.discard("OP_NODE_EVACUATE")
        err = yield self.error(501, "POST", "/2/nodes/%s/evacuate" % N1,
                               body={"mode": "all"})
        self.assertIn("OP_NODE_EVACUATE", err["message"])
        self.assertIn("not implement", err["message"])
        self.assertEqual(self.handler.submitted, [])
        # the master learns it (after an upgrade): RAPI follows once its
        # short cache expires, without a restart
        self.handler.implemented.add("OP_NODE_EVACUATE")
        yield self.error(501, "POST", "/2/nodes/%s/evacuate" % N1,
                         body={"mode": "all"})
        self.clock.advance(11)
        yield self.ok("POST", "/2/nodes/%s/evacuate" % N1,
                      body={"mode": "all"})
        self.assertEqual(self.last_job()[0]["OP_ID"], "OP_NODE_EVACUATE")

    @defer.inlineCallbacks
    def test_cached(self):
        yield self.ok("PUT", "/2/tags?tag=a")
        yield self.ok("PUT", "/2/tags?tag=b")
        asked = [c for c in self.handler.calls
                 if c[0] == "QueryImplementedOpcodes"]
        self.assertEqual(len(asked), 1)

    @defer.inlineCallbacks
    def test_reinstall_needs_all_three(self):
        self.handler.implemented.discard("OP_INSTANCE_REINSTALL")
        err = yield self.error(501, "POST", "/2/instances/%s/reinstall" % I1)
        self.assertIn("OP_INSTANCE_REINSTALL", err["message"])

    @defer.inlineCallbacks
    def test_filters_and_query_kinds_the_master_lacks(self):
        err = yield self.error(501, "GET", "/2/filters")
        self.assertIn("filters", err["message"])
        yield self.error(501, "POST", "/2/filters", body={})
        # the query layer has the resource: no rules in this configuration
        answer = yield self.ok("GET", "/2/query/filter?fields=uuid")
        self.assertEqual(answer["data"], [])
        # every query resource of RAPI has its place in the query layer
        answer = yield self.ok("GET", "/2/query/export/fields")
        self.assertEqual(sorted(f["name"] for f in answer["fields"]),
                         ["export", "node"])

    @defer.inlineCallbacks
    def test_old_master_without_the_method(self):
        del FakeHandler.query_implemented_opcodes
        self.addCleanup(setattr, FakeHandler, "query_implemented_opcodes",
                        _query_implemented_opcodes)
        yield self.ok("PUT", "/2/tags?tag=a")


_query_implemented_opcodes = FakeHandler.query_implemented_opcodes


# --- Generic queries ---------------------------------------------------------

class AutoRepairTests(RapiTestCase):

    @defer.inlineCallbacks
    def test_repair_states(self):
        self.cfg.add_tags("instance", I1,
                          ["ganeti:watcher:autorepair:failover"])
        value = yield self.ok("GET", "/2/autorepair", auth=READER)
        names = sorted(v["name"] for v in value)
        self.assertIn(I1, names)
        one = next(v for v in value if v["name"] == I1)
        self.assertEqual((one["state"], one["policy"], one["allowed"],
                          one["source"]),
                         ("healthy", "enabled", "failover", "instance"))
        value = yield self.ok("GET", "/2/instances/%s/autorepair" % I1,
                              auth=READER)
        self.assertEqual((value["name"], value["state"]), (I1, "healthy"))
        yield self.error(404, "GET", "/2/instances/nosuch/autorepair",
                         auth=READER)


class QueryTests(RapiTestCase):

    @defer.inlineCallbacks
    def test_get_put_fields(self):
        value = yield self.ok("GET", "/2/query/instance?fields=name,pnode",
                              auth=READER)
        self.assertEqual([f["name"] for f in value["fields"]],
                         ["name", "pnode"])
        self.assertIn([[0, I1], [0, N1]], value["data"])
        value = yield self.ok("PUT", "/2/query/instance", auth=READER,
                              body={"fields": ["name"],
                                    "qfilter": ["=", "name", I1]})
        self.assertEqual(value["data"], [[[0, I1]]])
        value = yield self.ok("PUT", "/2/query/node", auth=READER,
                              body={"fields": ["name"],
                                    "filter": ["=", "name", N2]})
        self.assertEqual(value["data"], [[[0, N2]]])
        value = yield self.ok("GET", "/2/query/node/fields", auth=None)
        self.assertIn("mtotal", [f["name"] for f in value["fields"]])
        value = yield self.ok("GET", "/2/query/node/fields?fields=name,x")
        self.assertEqual([f["kind"] for f in value["fields"]],
                         ["text", "unknown"])

    @defer.inlineCallbacks
    def test_errors(self):
        err = yield self.error(400, "GET", "/2/query/node", auth=READER)
        self.assertIn("'fields'", err["message"])
        yield self.error(404, "GET", "/2/query/nothing?fields=name",
                         auth=READER)
        for body, field in (({"fields": []}, "fields"),
                            ({"fields": ["name"], "qfilter": "x"},
                             "qfilter"),
                            ({"fields": ["name"], "other": 1}, "other")):
            err = yield self.error(400, "PUT", "/2/query/node", body=body,
                                   auth=READER)
            self.assertIn(field, err["message"])
        err = yield self.error(400, "PUT", "/2/query/node", auth=READER,
                               body={"fields": ["name"],
                                     "qfilter": ["~", "name"]})
        self.assertTrue(err["message"])


# --- Write resources: the opcodes they submit --------------------------------

CREATE_BODY = {"__version__": 1, "beparams": {"memory": 512},
               "disk_template": "file", "disks": [{"size": 1024}],
               "mode": "create", "name": "new.example.com", "nics": [{}],
               "os": "busybox+default", "pnode": N1}


class WriteTestCase(RapiTestCase):

    @defer.inlineCallbacks
    def submitted(self, method, path, body=None, **expected):
        job = yield self.ok(method, path, body)
        self.assertIsInstance(job, int)
        ops = self.last_job()
        for key, value in expected.items():
            self.assertEqual(ops[-1][key], value, key)
        return ops


class InstanceWriteTests(WriteTestCase):

    @defer.inlineCallbacks
    def test_create(self):
        ops = yield self.submitted("POST", "/2/instances?dry-run=1",
                                   CREATE_BODY, OP_ID="OP_INSTANCE_CREATE",
                                   instance_name="new.example.com",
                                   os_type="busybox+default", dry_run=True,
                                   forthcoming=False, pnode=N1)
        self.assertEqual(ops[0]["disks"], [{"size": 1024}])

    @defer.inlineCallbacks
    def test_create_errors(self):
        body = dict(CREATE_BODY)
        del body["__version__"]
        err = yield self.error(400, "POST", "/2/instances", body)
        self.assertIn("version 0 is no longer supported", err["message"])
        err = yield self.error(400, "POST", "/2/instances",
                               dict(CREATE_BODY, __version__=2))
        self.assertIn("__version__", err["message"])
        err = yield self.error(400, "POST", "/2/instances",
                               dict(CREATE_BODY, os_type="x"))
        self.assertIn("'os'", err["message"])
        self.assertIn("'os_type'", err["message"])
        err = yield self.error(400, "POST", "/2/instances",
                               dict(CREATE_BODY, beparams="big"))
        self.assertIn("beparams", err["message"])
        err = yield self.error(400, "POST", "/2/instances",
                               dict(CREATE_BODY, colour="red"))
        self.assertIn("colour", err["message"])
        self.assertIn("unknown parameter", err["message"])
        body = dict(CREATE_BODY)
        del body["disks"]
        err = yield self.error(400, "POST", "/2/instances", body)
        self.assertIn("disks", err["message"])
        self.assertEqual(self.handler.submitted, [])

    @defer.inlineCallbacks
    def test_hostile_names_are_refused_before_any_job(self):
        for name in ("a/b.example.com", "x y", "-rf", "semi;colon",
                     "../../../tmp/x"):
            err = yield self.error(400, "POST", "/2/instances",
                                   dict(CREATE_BODY, name=name))
            self.assertIn("instance_name", err["message"])
            self.assertIn("host name", err["message"])
        err = yield self.error(400, "POST", "/2/groups",
                               {"name": "x/y"})
        self.assertIn("group_name", err["message"])
        err = yield self.error(400, "PUT", "/2/instances/%s/rename"
                               % "inst1.example.com", {"new_name": "a b"})
        self.assertIn("new_name", err["message"])
        self.assertEqual(self.handler.submitted, [])

    @defer.inlineCallbacks
    def test_opportunistic_locking_reaches_the_opcodes(self):
        body = dict(CREATE_BODY, opportunistic_locking=True,
                    iallocator="hail")
        del body["pnode"]
        yield self.submitted("POST", "/2/instances", body,
                             OP_ID="OP_INSTANCE_CREATE",
                             opportunistic_locking=True, iallocator="hail")
        yield self.submitted("POST", "/2/instances", CREATE_BODY,
                             opportunistic_locking=False)
        inst = dict((k, v) for k, v in body.items() if k != "__version__"
                    and k != "opportunistic_locking")
        yield self.submitted("POST", "/2/instances-multi-alloc",
                             {"instances": [inst], "iallocator": "hail",
                              "opportunistic_locking": True},
                             OP_ID="OP_INSTANCE_MULTI_ALLOC",
                             opportunistic_locking=True)
        submitted = len(self.handler.submitted)
        err = yield self.error(400, "POST", "/2/instances",
                               dict(body, opportunistic_locking="yes"))
        self.assertIn("opportunistic_locking", err["message"])
        self.assertEqual(len(self.handler.submitted), submitted)

    @defer.inlineCallbacks
    def test_ignore_ipolicy_reaches_the_opcodes(self):
        """Wherever Ganeti's RAPI takes ignore_ipolicy, ours passes it on."""
        path = "/2/instances/%s" % I1
        for method, where, body, op_id in [
                ("POST", "/2/instances", dict(CREATE_BODY),
                 "OP_INSTANCE_CREATE"),
                ("PUT", path + "/modify", {"custom_beparams": {"vcpus": 9}},
                 "OP_INSTANCE_SET_PARAMS"),
                ("POST", path + "/disk/0/grow", {"amount": 512},
                 "OP_INSTANCE_GROW_DISK"),
                ("PUT", path + "/migrate", {}, "OP_INSTANCE_MIGRATE"),
                ("PUT", path + "/failover", {}, "OP_INSTANCE_FAILOVER"),
                ("POST", path + "/replace-disks?mode=replace_new_secondary"
                 "&remote_node=" + N2, {}, "OP_INSTANCE_REPLACE_DISKS"),
                ("POST", "/2/nodes/%s/migrate" % N1, {},
                 "OP_NODE_MIGRATE")]:
            body["ignore_ipolicy"] = True
            yield self.submitted(method, where, body, OP_ID=op_id,
                                 ignore_ipolicy=True)

    @defer.inlineCallbacks
    def test_lease_until(self):
        yield self.submitted("POST", "/2/instances", {
            "__version__": 1, "forthcoming": True, "lease_until": "+2h"},
            OP_ID="OP_INSTANCE_CREATE", forthcoming=True, lease_until="+2h")
        uuid = [i for i in self.cfg.instances.values()
                if i.forthcoming][0].uuid
        yield self.submitted("PUT", "/2/instances/%s/modify" % uuid,
                             {"lease_until": "2099-01-01T00:00:00Z"},
                             OP_ID="OP_INSTANCE_SET_PARAMS",
                             instance_name=uuid,
                             lease_until="2099-01-01T00:00:00Z")
        yield self.submitted("PUT", "/2/instances/%s/modify" % uuid,
                             {"lease_until": "none"},
                             OP_ID="OP_INSTANCE_SET_PARAMS",
                             lease_until="none")
        submitted = len(self.handler.submitted)
        for where, method, body in (
                ("/2/instances", "POST", {"__version__": 1,
                                          "forthcoming": True,
                                          "lease_until": "next week"}),
                ("/2/instances/%s/modify" % uuid, "PUT",
                 {"lease_until": [1]})):
            err = yield self.error(400, method, where, body)
            self.assertIn("lease_until", err["message"])
        self.assertEqual(len(self.handler.submitted), submitted)

    @defer.inlineCallbacks
    def test_lease_fields_in_bulk_answers(self):
        forthcoming = [i for i in self.cfg.instances.values()
                       if i.forthcoming][0]
        until = int(time.time()) + 86400
        self.cfg.set_instance_lease(forthcoming.uuid, until)
        bulk = yield self.ok("GET", "/2/instances?bulk=1", auth=None)
        rows = {b["uuid"]: b for b in bulk}
        self.assertEqual(
            (rows[forthcoming.uuid]["lease_until"],
             rows[forthcoming.uuid]["lease_state"]), (until, "active"))
        real = [b for b in bulk if b["uuid"] != forthcoming.uuid][0]
        self.assertEqual((real["lease_until"], real["lease_state"]),
                         (None, ""))

    @defer.inlineCallbacks
    def test_forthcoming(self):
        ops = yield self.submitted("POST", "/2/instances",
                                   {"__version__": 1, "forthcoming": True},
                                   forthcoming=True, instance_name="",
                                   disks=[], nics=[], mode="create")
        self.assertEqual(len(ops), 1)
        yield self.submitted("POST", "/2/instances", {
            "__version__": 1, "forthcoming": True, "pnode": N1,
            "beparams": {"memory": 1024}, "disks": [{"size": 2048}]},
            forthcoming=True, pnode=N1, disks=[{"size": 2048}])
        uuid = [i for i in self.cfg.instances.values()
                if i.forthcoming][0].uuid
        yield self.submitted("PUT", "/2/instances/%s/modify" % uuid,
                             {"custom_beparams": {"vcpus": 2}},
                             OP_ID="OP_INSTANCE_SET_PARAMS",
                             instance_name=uuid, beparams={"vcpus": 2})
        yield self.submitted("PUT", "/2/instances/%s/rename" % uuid,
                             {"new_name": "named.example.com",
                              "name_check": False},
                             OP_ID="OP_INSTANCE_RENAME", instance_name=uuid,
                             new_name="named.example.com")
        yield self.submitted("POST", "/2/instances/named.example.com/create",
                             {"os": "busybox+default",
                              "disk_template": "file"},
                             OP_ID="OP_INSTANCE_CREATE", commit=True,
                             instance_name="named.example.com",
                             os_type="busybox+default", forthcoming=False)
        yield self.submitted("POST", "/2/instances/named.example.com/create",
                             None, commit=True)
        err = yield self.error(400, "POST", "/2/instances/x/create",
                               {"forthcoming": True})
        self.assertIn("forthcoming", err["message"])

    @defer.inlineCallbacks
    def test_instance_actions(self):
        path = "/2/instances/" + I1
        yield self.submitted("DELETE", path + "?dry-run=1",
                             OP_ID="OP_INSTANCE_REMOVE", instance_name=I1,
                             dry_run=True)
        yield self.submitted("DELETE", path, {"shutdown_timeout": 5},
                             shutdown_timeout=5)
        yield self.submitted("GET", path + "/info?static=1",
                             OP_ID="OP_INSTANCE_QUERY_DATA",
                             instances=[I1], static=True)
        yield self.submitted("POST", path + "/reboot",
                             OP_ID="OP_INSTANCE_REBOOT", reboot_type="hard")
        yield self.submitted("POST", path + "/reboot?type=soft&"
                             "ignore_secondaries=1", reboot_type="soft",
                             ignore_secondaries=True)
        yield self.submitted("PUT", path + "/shutdown?no_remember=1",
                             {"timeout": 7}, OP_ID="OP_INSTANCE_SHUTDOWN",
                             timeout=7, no_remember=True)
        yield self.submitted("PUT", path + "/startup?force=1",
                             OP_ID="OP_INSTANCE_STARTUP", force=True)
        yield self.submitted("PUT", path + "/activate-disks?ignore_size=1",
                             OP_ID="OP_INSTANCE_ACTIVATE_DISKS",
                             ignore_size=True)
        yield self.submitted("PUT", path + "/deactivate-disks?force=1",
                             OP_ID="OP_INSTANCE_DEACTIVATE_DISKS",
                             force=True)
        yield self.submitted("POST", path + "/recreate-disks",
                             {"disks": [0]},
                             OP_ID="OP_INSTANCE_RECREATE_DISKS", disks=[0])
        yield self.submitted("POST", path + "/disk/0/grow",
                             {"amount": 512, "absolute": False},
                             OP_ID="OP_INSTANCE_GROW_DISK", disk=0,
                             amount=512)
        yield self.submitted("PUT", path + "/prepare-export?mode=local",
                             OP_ID="OP_BACKUP_PREPARE", mode="local")
        yield self.submitted("PUT", path + "/export",
                             {"destination": N2, "mode": "local"},
                             OP_ID="OP_BACKUP_EXPORT", target_node=N2)
        yield self.submitted("PUT", path + "/migrate", {"mode": "live"},
                             OP_ID="OP_INSTANCE_MIGRATE", mode="live")
        yield self.submitted("PUT", path + "/failover",
                             {"target_node": N2},
                             OP_ID="OP_INSTANCE_FAILOVER", target_node=N2)
        yield self.submitted("PUT", path + "/rename",
                             {"new_name": "x.example.com"},
                             OP_ID="OP_INSTANCE_RENAME")
        yield self.submitted("PUT", path + "/modify",
                             {"custom_hvparams": {"kernel_args": "ro"},
                              "depends": [[1, ["success"]]]},
                             OP_ID="OP_INSTANCE_SET_PARAMS",
                             hvparams={"kernel_args": "ro"},
                             depends=[[1, ["success"]]])
        yield self.submitted("POST", "/2/instances-multi-alloc", {
            "instances": [dict((k, v) for k, v in CREATE_BODY.items()
                               if k != "__version__")]},
            OP_ID="OP_INSTANCE_MULTI_ALLOC")
        self.assertEqual(self.last_job()[0]["instances"][0]["instance_name"],
                         "new.example.com")

    @defer.inlineCallbacks
    def test_replace_disks(self):
        path = "/2/instances/%s/replace-disks" % I1
        yield self.submitted("POST", path + "?mode=replace_on_primary&"
                             "disks=0,1&early_release=1",
                             OP_ID="OP_INSTANCE_REPLACE_DISKS",
                             mode="replace_on_primary", disks=[0, 1],
                             early_release=True)
        yield self.submitted("POST", path, {"disks": "1",
                                            "remote_node": N2},
                             disks=[1], remote_node=N2, mode="replace_auto")
        err = yield self.error(400, "POST", path + "?disks=a,b")
        self.assertIn("disks", err["message"])
        err = yield self.error(400, "POST", path + "?mode=replace_auto",
                               {"mode": "replace_auto"})
        self.assertIn("mode", err["message"])

    @defer.inlineCallbacks
    def test_reinstall(self):
        path = "/2/instances/%s/reinstall" % I1
        ops = yield self.submitted("POST", path, {"os": "busybox+big",
                                                  "osparams": {"a": "b"}})
        self.assertEqual([o["OP_ID"] for o in ops],
                         ["OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL",
                          "OP_INSTANCE_STARTUP"])
        self.assertEqual(ops[1]["os_type"], "busybox+big")
        self.assertEqual(ops[1]["osparams"], {"a": "b"})
        ops = yield self.submitted("POST", path, {"start": False})
        self.assertEqual(len(ops), 2)
        ops = yield self.submitted("POST", path + "?os=plain&nostartup=1")
        self.assertEqual(len(ops), 2)
        self.assertEqual(ops[1]["os_type"], "plain")
        err = yield self.error(400, "POST", path, {"start": "yes"})
        self.assertIn("start", err["message"])
        err = yield self.error(400, "POST", path, {"colour": 1})
        self.assertIn("colour", err["message"])

    @defer.inlineCallbacks
    def test_bad_input_names_the_field(self):
        path = "/2/instances/" + I1
        for method, sub, body, field in (
                ("POST", "/reboot?type=gentle", None, "'type'"),
                ("PUT", "/shutdown", {"timeout": "soon"}, "timeout"),
                ("PUT", "/shutdown", {"instance_name": "other"},
                 "instance_name"),
                ("POST", "/disk/0/grow", {"amount": -1}, "amount"),
                ("POST", "/disk/0/grow", {}, "amount"),
                ("PUT", "/modify", {"beparams": [1]}, "beparams"),
                ("PUT", "/modify", {"beparams": {}, "custom_beparams": {}},
                 "custom_beparams"),
                ("PUT", "/startup?force=perhaps", None, "'force'"),
                ("PUT", "/rename", {}, "new_name"),
                ("PUT", "/modify", {"OP_ID": "OP_CLUSTER_DESTROY"}, "OP_ID"),
                ("PUT", "/modify?reason=x", {"reason": "text"}, "reason")):
            err = yield self.error(400, method, path + sub, body)
            self.assertIn(field, err["message"], (sub, body))
        self.assertEqual(self.handler.submitted, [])


class OtherWriteTests(WriteTestCase):

    @defer.inlineCallbacks
    def test_cluster(self):
        yield self.submitted("PUT", "/2/modify", {"candidate_pool_size": 5},
                             OP_ID="OP_CLUSTER_SET_PARAMS",
                             candidate_pool_size=5)
        err = yield self.error(400, "PUT", "/2/modify",
                               {"compression_tools": ["gzip"]})
        self.assertIn("compression_tools", err["message"])
        err = yield self.error(400, "PUT", "/2/modify",
                               {"candidate_pool_size": "many"})
        self.assertIn("candidate_pool_size", err["message"])
        yield self.submitted("PUT", "/2/redistribute-config",
                             OP_ID="OP_CLUSTER_REDIST_CONF")

    @defer.inlineCallbacks
    def test_maintenance(self):
        yield self.submitted("PUT", "/2/modify", {"maint_balance": True},
                             OP_ID="OP_CLUSTER_SET_PARAMS",
                             maint_balance=True)
        node = self.cfg.get_node(self.cfg.master_node.name).uuid
        self.cfg.update_maintenance(incidents=[{
            "uuid": "i1", "node": node, "repair_status": "noted",
            "original": {"status": "live-repair", "command": "fix"},
            "action": "live-repair"}])
        value = yield self.ok("GET", "/2/maintenance", auth=READER)
        [inc] = value["incidents"]
        self.assertEqual((inc["id"], inc["repair-status"], inc["original"],
                          value["round_delay"]),
                         ("i1", "noted", {"status": "live-repair",
                                          "command": "fix"}, 300))
        yield self.submitted("PUT", "/2/maintenance/incidents/i1/cancel",
                             OP_ID="OP_CLUSTER_REPAIR_CANCEL",
                             incident_id="i1")
        yield self.error(401, "PUT", "/2/maintenance/incidents/i1/cancel",
                         auth=None)

    @defer.inlineCallbacks
    def test_nodes(self):
        path = "/2/nodes/" + N2
        yield self.submitted("PUT", path + "/role?force=1", "drained",
                             OP_ID="OP_NODE_SET_PARAMS", drained=True,
                             force=True, node_name=N2)
        yield self.submitted("PUT", path + "/role", "regular",
                             master_candidate=False, drained=False,
                             offline=False)
        yield self.submitted("PUT", path + "/role?auto-promote=1",
                             "offline", offline=True, auto_promote=True)
        err = yield self.error(400, "PUT", path + "/role", "master")
        self.assertIn("master", err["message"])
        err = yield self.error(400, "PUT", path + "/role", "boss")
        self.assertIn("role", err["message"])
        yield self.submitted("POST", path + "/evacuate",
                             {"mode": "primary-only", "early_release": True},
                             OP_ID="OP_NODE_EVACUATE", mode="primary-only")
        yield self.submitted("POST", path + "/migrate", {"mode": "live"},
                             OP_ID="OP_NODE_MIGRATE", mode="live")
        yield self.submitted("POST", path + "/migrate?live=0",
                             OP_ID="OP_NODE_MIGRATE", mode="non-live")
        yield self.submitted("POST", path + "/modify",
                             {"vm_capable": False},
                             OP_ID="OP_NODE_SET_PARAMS", vm_capable=False)
        yield self.submitted("POST", path + "/powercycle?force=1",
                             OP_ID="OP_NODE_POWERCYCLE", force=True)
        yield self.submitted("GET", path + "/storage?storage_type=file&"
                             "output_fields=name,size",
                             OP_ID="OP_NODE_QUERY_STORAGE", nodes=[N2],
                             output_fields=["name", "size"])
        err = yield self.error(400, "GET", path + "/storage")
        self.assertIn("output_fields", err["message"])
        yield self.submitted("PUT", path + "/storage/modify?storage_type="
                             "lvm-pv&name=/dev/sda&allocatable=0",
                             OP_ID="OP_NODE_MODIFY_STORAGE",
                             changes={"allocatable": False})
        yield self.submitted("PUT", path + "/storage/repair?storage_type="
                             "lvm-vg&name=xenvg",
                             OP_ID="OP_REPAIR_NODE_STORAGE", name="xenvg")
        err = yield self.error(400, "PUT", path + "/storage/repair")
        self.assertIn("storage_type", err["message"])

    @defer.inlineCallbacks
    def test_allocator_fields(self):
        """iallocator and iallocator_params wherever an allocator places;
        a group evacuation."""
        yield self.submitted("POST", "/2/groups/group2/evacuate?dry-run=1",
                             {"iallocator": "hail", "target_groups": ["g9"],
                              "sequential": True,
                              "iallocator_params": {"x": "1"}},
                             OP_ID="OP_GROUP_EVACUATE", group_name="group2",
                             iallocator="hail", target_groups=["g9"],
                             sequential=True, dry_run=True,
                             iallocator_params={"x": "1"})
        yield self.submitted("POST", "/2/nodes/%s/evacuate" % N1,
                             {"mode": "all", "iallocator": "hail",
                              "iallocator_params": {"ignore-dynu": None}},
                             OP_ID="OP_NODE_EVACUATE", iallocator="hail",
                             iallocator_params={"ignore-dynu": None})
        yield self.submitted("PUT", "/2/instances/%s/migrate" % I1,
                             {"iallocator": "hail"},
                             OP_ID="OP_INSTANCE_MIGRATE", iallocator="hail")
        err = yield self.error(400, "POST", "/2/groups/group2/evacuate",
                               {"iallocator_params": ["x"]})
        self.assertIn("iallocator_params", err["message"])

    @defer.inlineCallbacks
    def test_groups(self):
        yield self.submitted("POST", "/2/groups",
                             {"name": "g3", "alloc_policy": "last_resort"},
                             OP_ID="OP_GROUP_ADD", group_name="g3")
        yield self.submitted("DELETE", "/2/groups/g3",
                             OP_ID="OP_GROUP_REMOVE", group_name="g3")
        yield self.submitted("PUT", "/2/groups/group2/modify",
                             {"custom_ndparams": {"spindle_count": 2}},
                             OP_ID="OP_GROUP_SET_PARAMS",
                             ndparams={"spindle_count": 2})
        yield self.submitted("PUT", "/2/groups/group2/rename",
                             {"new_name": "g4"}, OP_ID="OP_GROUP_RENAME",
                             new_name="g4")
        yield self.submitted("PUT", "/2/groups/group2/assign-nodes?force=1",
                             {"nodes": [N2]}, OP_ID="OP_GROUP_ASSIGN_NODES",
                             nodes=[N2], force=True)
        err = yield self.error(400, "POST", "/2/groups", {})
        self.assertIn("group_name", err["message"])

    @defer.inlineCallbacks
    def test_networks(self):
        yield self.submitted("POST", "/2/networks",
                             {"name": "net2", "network": "10.1.0.0/24"},
                             OP_ID="OP_NETWORK_ADD", network_name="net2")
        yield self.submitted("DELETE", "/2/networks/net1",
                             OP_ID="OP_NETWORK_REMOVE")
        yield self.submitted("PUT", "/2/networks/net1/connect",
                             {"group_name": "default",
                              "network_mode": "bridged",
                              "network_link": "br0"},
                             OP_ID="OP_NETWORK_CONNECT")
        yield self.submitted("PUT", "/2/networks/net1/disconnect",
                             {"group_name": "default"},
                             OP_ID="OP_NETWORK_DISCONNECT")
        yield self.submitted("PUT", "/2/networks/net1/modify",
                             {"gateway": "10.0.0.1"},
                             OP_ID="OP_NETWORK_SET_PARAMS",
                             gateway="10.0.0.1")
        err = yield self.error(400, "POST", "/2/networks",
                               {"name": "n", "network": "not-a-net"})
        self.assertIn("network", err["message"])

    @defer.inlineCallbacks
    def test_console(self):
        inst = self.cfg.get_instance(I1)
        self.handler.live = _OneInstanceLive(inst, "running")
        yield self.error(401, "GET", "/2/instances/%s/console" % I1,
                         auth=None)
        answer = yield self.ok("GET", "/2/instances/%s/console" % I1,
                               auth=READER)
        self.assertEqual(answer, {
            "instance": I1, "kind": "msg",
            "message": "Console not available for fake hypervisor",
            "host": None, "port": None, "user": None, "command": None,
            "display": None})
        # a read: no job
        self.assertEqual(self.handler.submitted, [])

    @defer.inlineCallbacks
    def test_console_of_a_stopped_instance_is_unavailable(self):
        inst = self.cfg.get_instance(I1)
        for live in (None, _OneInstanceLive(inst, "shutdown")):
            self.handler.live = live
            err = yield self.error(503, "GET",
                                   "/2/instances/%s/console" % I1)
            self.assertEqual(err["message"], "Instance console unavailable")
        self.assertEqual(self.handler.submitted, [])


class _OneInstanceLive(object):
    """Live data: the primary node of ``inst`` has it in ``state``."""

    def __init__(self, inst, state):
        self.inst = inst
        self.state = state

    def instances_runtime(self, node_uuids):
        return dict((u, {self.inst.name: {"state": self.state,
                                          "memory": 128, "vcpus": 1}}
                     if u == self.inst.primary_node else {})
                    for u in node_uuids)

    def nodes_runtime(self, node_uuids):
        return dict((u, {}) for u in node_uuids)


class UnknownObjectTests(RapiTestCase):
    """Reads that would submit a job answer 404 for an unknown name before
    any job is submitted: a flood of them cannot fill the job queue."""

    @defer.inlineCallbacks
    def test_a_flood_of_unknown_instance_infos_submits_no_job(self):
        for i in range(300):
            err = yield self.error(404, "GET",
                                   "/2/instances/nope%d/info?static=1" % i,
                                   auth=None)
            self.assertEqual(err["message"], "Not Found")
            self.assertEqual(err["explain"], "Nothing matches the given URI:"
                             " Instance 'nope%d' not known" % i)
        self.assertEqual(self.handler.submitted, [])
        # a known one (by name or by UUID) still gets its job
        self.assertEqual((yield self.ok("GET", "/2/instances/%s/info" % I1,
                                        auth=None)), 1)
        self.assertEqual(self.last_job()[0]["OP_ID"],
                         "OP_INSTANCE_QUERY_DATA")
        self.assertEqual(self.last_job()[0]["instances"], [I1])
        uuid = self.cfg.get_instance(I1).uuid
        yield self.ok("GET", "/2/instances/%s/info" % uuid, auth=None)
        self.assertEqual(len(self.handler.submitted), 2)

    @defer.inlineCallbacks
    def test_console_and_storage_of_unknown_names(self):
        err = yield self.error(404, "GET", "/2/instances/nope/console",
                               auth=READER)
        self.assertEqual(err["explain"], "Nothing matches the given URI:"
                         " Instance 'nope' not known")
        err = yield self.error(404, "GET", "/2/nodes/nope/storage?"
                               "output_fields=name")
        self.assertEqual(err["explain"], "Nothing matches the given URI:"
                         " Node 'nope' not known")
        self.assertEqual(self.handler.submitted, [])


# --- The OpenAPI document ----------------------------------------------------

class OpenApiTests(RapiTestCase):

    def test_matches_the_routes_klein_serves(self):
        doc = openapi.document()
        served = set(rule.rule for rule in
                     rapi_app.RapiApp.app.url_map.iter_rules())
        # Prometheus' text format, not a JSON resource of RAPI v2
        # (docs/metrics.rst)
        served.discard("/metrics")
        # the web console's files, not JSON (docs/web.rst)
        served -= set(["/ui", "/ui/", "/ui/<path:name>"])
        documented = set(rapi_app.werkzeug_rule(p) for p in doc["paths"])
        self.assertEqual(served, documented)
        self.assertIn("/2/openapi.json", doc["paths"])

    @defer.inlineCallbacks
    def test_every_documented_method_is_served(self):
        doc = yield self.ok("GET", "/2/openapi.json", auth=None)
        self.assertEqual(doc["openapi"], "3.0.3")
        self.handler.implemented = set()   # nothing may be submitted
        verbs = ("get", "put", "post", "delete")
        for path, item in sorted(doc["paths"].items()):
            concrete = re.sub(r"\{(job_id|disk_index)\}", "1", path)
            concrete = re.sub(r"\{\w+\}", "x", concrete)
            for verb in verbs:
                code, value = yield self.request(verb.upper(), concrete,
                                                 auth="Basic " + base64.
                                                 b64encode(b"both:bothpw")
                                                 .decode())
                unsupported = (code == 501 and value["message"] ==
                               "Method %s is unsupported for path %s"
                               % (verb.upper(), concrete))
                self.assertEqual(verb in item, not unsupported,
                                 (verb, path, code, value))
                if verb in item:
                    op = item[verb]
                    self.assertNotEqual(code, 404 if "{" not in path
                                        else 0, (verb, path))
                    if path == rapi_app.EVENTS_PATH:
                        # served by the app itself, not a resource
                        self.assertEqual(op["x-ganeti-access"],
                                         list(resources.READ_WRITE))
                        continue
                    self.assertEqual(op["x-ganeti-access"],
                                     list(resources.RESOURCES[
                                         [r.path for r in
                                          resources.RESOURCES].index(path)]
                                         .methods[verb.upper()]
                                         .required_access))
                    if op["x-ganeti-opcodes"]:
                        self.assertEqual(code, 501, (verb, path, value))
        self.assertEqual(self.handler.submitted, [])

    def test_structure(self):
        doc = openapi.document()
        for path, item in doc["paths"].items():
            names = re.findall(r"\{(\w+)\}", path)
            self.assertEqual([p["name"] for p in item.get("parameters", [])],
                             names, path)
            for verb in ("get", "put", "post", "delete"):
                if verb in item:
                    self.assertIn("200", item[verb]["responses"])
        ids = [op["operationId"] for item in doc["paths"].values()
               for key, op in item.items() if key in ("get", "put", "post",
                                                       "delete")]
        self.assertEqual(len(ids), len(set(ids)))
        json.dumps(doc)

    def test_valid_openapi(self):
        # a missing validator fails (tox.ini installs it), unless
        # GANETI_SKIP_OPENAPI_CHECKS is set
        openapi_check.validate_document(openapi.document())


class BaserlibTests(unittest.TestCase):

    def test_build_opcode(self):
        op = baserlib.build_opcode("OP_TAGS_SET", {"tags": ["a"]},
                                   {"kind": "cluster"})
        self.assertEqual((op.OP_ID, op.tags), ("OP_TAGS_SET", ["a"]))
        self.assertRaises(baserlib.BadRequest, baserlib.build_opcode,
                          "OP_TAGS_SET", {"kind": "node"},
                          {"kind": "cluster", "tags": []})

    def test_rows(self):
        self.assertEqual(baserlib.rows_to_dicts(
            ["a", "b"], [[[0, 1], [3, None]]]), [{"a": 1, "b": None}])

    def test_query_args(self):
        args = baserlib.QueryArgs({b"bulk": [b"1"], b"tag": [b"a", b"b"]})
        self.assertTrue(args.bool("bulk"))
        self.assertEqual(args.getlist("tag"), ["a", "b"])
        self.assertFalse(args.bool("dry-run"))
        self.assertRaises(baserlib.BadRequest, baserlib.QueryArgs(
            {"x": ["2"]}).bool, "x")
        self.assertRaises(baserlib.BadRequest, baserlib.QueryArgs(
            {"x": ["a"]}).int, "x")


class CoalesceTests(RapiTestCase):

    def test_next_batch_semantics(self):
        from ganeti.rapi.coalesce import Coalescer
        c = Coalescer()
        runs = []

        async def fn():
            d = defer.Deferred()
            runs.append(d)
            return await d
        first = c.run("k", fn)
        second = c.run("k", fn)
        third = c.run("k", fn)
        other = c.run("other", fn)
        self.assertEqual(len(runs), 2)       # "k" once, "other" once
        runs[0].callback("old")
        self.assertEqual(self.successResultOf(first), "old")
        # the waiters arrived during the first run: a new run serves them
        self.assertNoResult(second)
        self.assertEqual(len(runs), 3)
        runs[2].callback("new")
        self.assertEqual(self.successResultOf(second), "new")
        self.assertEqual(self.successResultOf(third), "new")
        runs[1].errback(RuntimeError("x"))
        self.failureResultOf(other, RuntimeError)
        self.assertEqual(c.pending(), 0)

    @defer.inlineCallbacks
    def test_concurrent_bulk_reads_share_one_query(self):
        queries = []
        real = self.handler.query

        def slow_query(what, fields, qfilter):
            queries.append(what)
            d = defer.Deferred()
            self.clock.callLater(1, lambda: real(what, fields, qfilter)
                                 .chainDeferred(d))
            return d
        self.handler.query = slow_query
        requests = [self.request("GET", "/2/instances?bulk=1")
                    for _ in range(5)]
        self.clock.advance(1)
        self.stub.flush()
        self.clock.advance(1)
        self.stub.flush()
        results = []
        for d in requests:
            results.append((yield d))
        self.assertEqual(len(queries), 2)
        self.assertTrue(all(r == results[0] for r in results))
        self.assertEqual(results[0][0], 200)
        # different arguments are not shared
        d1 = self.request("GET", "/2/instances")
        d2 = self.request("GET", "/2/instances?bulk=1")
        self.clock.advance(1)
        self.stub.flush()
        yield d1
        yield d2
        self.assertEqual(len(queries), 4)


class DaemonOptionTests(unittest.TestCase):
    """--bind and --port are checked with and without TLS."""

    def test_bad_listen_address_refused_in_both_modes(self):
        from twisted.python import usage
        from ganeti.server import rapi as rapi_server
        for extra in ([], ["--no-ssl"]):
            opts = rapi_server.Options()
            err = self.assertRaises(usage.UsageError, opts.parseOptions,
                                    ["--root", self.mktemp(), "--bind",
                                     "not-an-ip"] + extra)
            self.assertIn("--bind", str(err))
            opts = rapi_server.Options()
            err = self.assertRaises(usage.UsageError, opts.parseOptions,
                                    ["--root", self.mktemp(), "--port",
                                     "70000"] + extra)
            self.assertIn("--port", str(err))
