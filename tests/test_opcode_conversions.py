"""How often one submitted opcode is converted on its way through the master.

A real master daemon runs in process (luxi server, luxi handler, job queue,
opcode processor, logical unit; config and queue in a temporary root), and
one opcode is submitted over luxi, then over RAPI (the RAPI app in process,
talking luxi to that master).  Every conversion of the opcode is counted:

* ``from_dict`` and ``to_dict`` of :class:`ganeti.opcodes.OpCode`;
* ``validate``: a validation pass (each ``from_dict``, constructor call
  or ``validate()``);
* ``deepcopy``: a deep copy of a whole opcode (its dict, or its object,
  also by ``OpCode.copy``);
* ``json``: ``json.dumps`` of one opcode dict on its own (a check that it
  serialises; the wire and the job file encode whole messages and jobs).

The counts are asserted, so a conversion that creeps back in is noticed.
(When the queue kept opcodes as dicts, an opcode submitted over luxi cost
from_dict 3, to_dict 2, deepcopy 2 and one JSON check before it ran, and a
from_dict per query of its summary; over RAPI two more of each.)
"""

import collections
import copy
import json
import os
import sys

import treq
from twisted.internet import defer, reactor
from twisted.trial import unittest
from twisted.web.server import Site

from ganeti import luxi
from ganeti import opcodes
from ganeti.rapi import app as rapi_app
from ganeti.rapi import auth

from tests.inprocess import start_master


def _is_opcode_form(value):
    return (isinstance(value, opcodes.OpCode) or
            (isinstance(value, dict) and "OP_ID" in value))


def _caller():
    """``module.function`` that asked, outside the opcodes module."""
    frame = sys._getframe(2)
    while frame.f_globals.get("__name__") in (__name__, opcodes.__name__):
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "?")
    return "%s.%s" % (module.rsplit(".", 1)[-1], frame.f_code.co_name)


class ConversionCounter(object):
    """Counts conversions by kind and by the function that asked for them."""

    def __init__(self, testcase):
        self.counts = collections.Counter()
        self.where = collections.Counter()
        self._install(testcase)

    def _count(self, kind):
        self.counts[kind] += 1
        self.where[(kind, _caller())] += 1

    def reset(self):
        self.counts.clear()
        self.where.clear()

    def take(self):
        """The counts so far, and where they come from; starts again."""
        counts = {k: v for (k, v) in self.counts.items() if v}
        where = dict(self.where)
        self.reset()
        return counts, where

    def _install(self, testcase):
        counter = self
        from_dict = opcodes.OpCode.__dict__["from_dict"].__func__
        to_dict = opcodes.OpCode.to_dict
        load = opcodes.OpCode._load
        copy_op = opcodes.OpCode.copy
        deepcopy = copy.deepcopy
        dumps = json.dumps

        def counted_from_dict(cls, data, strict=True):
            counter._count("from_dict")
            return from_dict(cls, data, strict)

        def counted_to_dict(self, *args, **kwargs):
            counter._count("to_dict")
            return to_dict(self, *args, **kwargs)

        def counted_load(self, params, strict):
            counter._count("validate")
            return load(self, params, strict)

        def counted_copy(self):
            counter._count("deepcopy")
            return copy_op(self)

        def counted_deepcopy(value, memo=None, *args):
            # only whole opcodes, not the recursion into their parts
            if memo is None and _is_opcode_form(value) and \
                    not isinstance(value, opcodes.OpCode):   # counted_copy
                counter._count("deepcopy")
            return deepcopy(value, memo, *args)

        def counted_dumps(value, *args, **kwargs):
            if isinstance(value, dict) and "OP_ID" in value:
                counter._count("json")
            return dumps(value, *args, **kwargs)

        # patch() would put back a method bound to OpCode, not the
        # classmethod: its subclasses would load as OpCode
        original = opcodes.OpCode.__dict__["from_dict"]
        opcodes.OpCode.from_dict = classmethod(counted_from_dict)
        testcase.addCleanup(setattr, opcodes.OpCode, "from_dict", original)
        testcase.patch(opcodes.OpCode, "to_dict", counted_to_dict)
        testcase.patch(opcodes.OpCode, "_load", counted_load)
        testcase.patch(opcodes.OpCode, "copy", counted_copy)
        testcase.patch(copy, "deepcopy", counted_deepcopy)
        testcase.patch(json, "dumps", counted_dumps)


class ConversionTests(unittest.TestCase):

    # Per submitted opcode (a job of one OP_TAGS_SET), by phase.  The first
    # write of the job file makes the opcode's JSON form (a to_dict), the
    # later ones reuse it; sending an OpCode over luxi (RAPI) is a to_dict.
    LUXI_SUBMIT = {"from_dict": 1, "validate": 1, "to_dict": 1}
    LUXI_RUN = {"deepcopy": 1}
    RAPI_SUBMIT = {"from_dict": 2, "validate": 2, "to_dict": 2}
    # QueryJobs with the "ops" and "summary" fields (also RAPI /2/jobs/ID)
    QUERY = {"to_dict": 1}

    @defer.inlineCallbacks
    def setUp(self):
        # short: a UNIX socket path has at most 107 bytes
        self.master, self.client = yield start_master(self, "conv")
        self.counter = ConversionCounter(self)

    def assertCounts(self, expected):
        (counts, where) = self.counter.take()
        self.assertEqual(counts, expected, where)

    def hold_jobs(self):
        # submitting and running are measured apart
        self.master.queue.set_max_running(0)

    def release_jobs(self):
        self.master.queue.set_max_running(1)

    @defer.inlineCallbacks
    def wait_until_final(self, job_id):
        prev = None
        while True:
            answer = yield self.client.wait_for_job_change(
                job_id, ["status"], prev, None, 5)
            if answer != luxi.JOB_NOTCHANGED:
                prev = answer[0]
                if prev[0] in ("success", "error", "canceled"):
                    return prev[0]

    @defer.inlineCallbacks
    def test_luxi(self):
        self.hold_jobs()
        job_id = yield self.client.submit_job([
            {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": ["luxi"]}])
        self.assertCounts(self.LUXI_SUBMIT)
        self.release_jobs()
        self.assertEqual((yield self.wait_until_final(job_id)), "success")
        self.assertCounts(self.LUXI_RUN)
        (ops, summary), = yield self.client.query_jobs([job_id],
                                                       ["ops", "summary"])
        self.assertEqual(summary, ["TAGS_SET"])
        self.assertEqual(ops[0]["tags"], ["luxi"])
        self.assertCounts(self.QUERY)

    @defer.inlineCallbacks
    def rapi(self, method, path):
        response = yield treq.request(
            method, "http://127.0.0.1:%d%s" % (self.rapi_port, path),
            headers={"Authorization": ["Basic d3JpdGVyOnNlY3JldA=="]})
        body = json.loads((yield response.content()))
        self.assertEqual(response.code, 200, body)
        return body

    @defer.inlineCallbacks
    def test_rapi(self):
        users = os.path.abspath(self.mktemp())
        with open(users, "w") as f:
            f.write("writer secret write\n")
        app = rapi_app.RapiApp(self.client, auth.UsersFile(users), reactor)
        port = reactor.listenTCP(0, Site(app.resource()),
                                 interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.rapi_port = port.getHost().port
        # the list of implemented opcodes is fetched before counting
        yield app.implemented.get()
        self.counter.reset()
        self.hold_jobs()
        job_id = yield self.rapi("PUT", "/2/tags?tag=rapi")
        self.assertCounts(self.RAPI_SUBMIT)
        self.release_jobs()
        self.assertEqual((yield self.wait_until_final(job_id)), "success")
        self.assertCounts(self.LUXI_RUN)
        job = yield self.rapi("GET", "/2/jobs/%d" % job_id)
        self.assertEqual(job["summary"], ["TAGS_SET"])
        self.assertEqual(job["ops"][0]["tags"], ["rapi"])
        self.assertCounts(self.QUERY)
