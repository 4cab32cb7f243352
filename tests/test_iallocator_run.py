"""Running allocators for real: external scripts as processes (answers,
failures, time limit) and built-in functions in threads."""

import json
import os
import stat
import sys
import threading

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti.cmdlib.allocation import parse_answer
from ganeti.iallocator import AllocatorError
from ganeti.iallocator.allocators import (
    AllocatorRegistry, BuiltinAllocator, ExternalAllocator, ThreadRunner)

INPUT = {"version": 2, "request": {"type": "allocate", "name": "x"}}

#: what the answering script does: the answer names the request type, the
#: parameters it got and where its input file was
ANSWER = """#!%s
import json, sys
data = json.load(open(sys.argv[1]))
print(json.dumps({"success": True, "info": "params " + " ".join(sys.argv[2:]),
                  "result": [data["request"]["type"], sys.argv[1]]}))
""" % sys.executable


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


class ExternalAllocatorTests(unittest.TestCase):

    timeout = 60

    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

    def script(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, stat.S_IRWXU)
        return ExternalAllocator(name, path, reactor, timeout=10)

    def run_it(self, allocator, params=None):
        return allocator.run(INPUT, json.dumps(INPUT), params or {})

    @defer.inlineCallbacks
    def test_answer_params_and_input_file(self):
        allocator = self.script("answer", ANSWER)
        text = yield self.run_it(allocator, {"ignore-soft-errors": None,
                                             "level": "3"})
        answer = parse_answer("answer", text)
        kind, input_file = answer["result"]
        self.assertEqual(kind, "allocate")
        self.assertEqual(answer["info"],
                         "params --ignore-soft-errors --level=3")
        self.assertTrue(os.path.basename(input_file).startswith(
            "ganeti-iallocator."))
        self.assertFalse(os.path.exists(input_file))   # removed afterwards

    @defer.inlineCallbacks
    def test_hang_is_killed_at_the_time_limit(self):
        pidfile = os.path.join(self.dir, "pid")
        allocator = self.script("hang", "#!/bin/sh\necho 'thinking' >&2\n"
                                "echo $$ > %s\nexec sleep 600\n" % pidfile)
        allocator.timeout = 0.5
        try:
            yield self.run_it(allocator)
        except AllocatorError as err:
            text = str(err)
        else:
            self.fail("a hanging allocator answered")
        self.assertIn("iallocator 'hang' (%s) did not answer within 0.5"
                      " seconds and was killed" % allocator.path, text)
        self.assertIn("stderr: thinking", text)
        with open(pidfile) as f:
            pid = int(f.read())
        self.assertFalse(pid_alive(pid), "the allocator still runs")

    @defer.inlineCallbacks
    def test_crash(self):
        allocator = self.script("crash", "#!/bin/sh\necho 'about to'\n"
                                "kill -SEGV $$\n")
        err = yield self.assertFailure(self.run_it(allocator), AllocatorError)
        self.assertIn("iallocator 'crash'", str(err))
        self.assertIn("was killed by signal 11", str(err))
        self.assertIn("stdout: about to", str(err))

    @defer.inlineCallbacks
    def test_exit_code_and_stderr(self):
        allocator = self.script("fails", "#!/bin/sh\necho 'Error: invalid"
                                " data for group' >&2\nexit 1\n")
        err = yield self.assertFailure(self.run_it(allocator), AllocatorError)
        self.assertIn("iallocator 'fails' (%s) failed with exit code 1;"
                      " stderr: Error: invalid data for group"
                      % allocator.path, str(err))
        silent = self.script("silent", "#!/bin/sh\nexit 3\n")
        err = yield self.assertFailure(self.run_it(silent), AllocatorError)
        self.assertIn("failed with exit code 3 (no output)", str(err))

    @defer.inlineCallbacks
    def test_garbage_output(self):
        allocator = self.script("garbage", "#!/bin/sh\necho 'all good!'\n")
        text = yield self.run_it(allocator)
        err = self.assertRaises(AllocatorError, parse_answer, "garbage", text)
        self.assertIn("iallocator 'garbage' printed something that is not"
                      " JSON", str(err))
        self.assertIn("all good!", str(err))
        for text, reason in (("[1, 2]", "answered list, not an object"),
                             ('{"success": true, "info": ""}',
                              "answered without 'result'"),
                             ('{"success": "yes", "info": "", "result": []}',
                              "'success' is 'yes', not a boolean")):
            err = self.assertRaises(AllocatorError, parse_answer, "x", text)
            self.assertIn(reason, str(err))
        # the older key "nodes" is read as "result"
        self.assertEqual(parse_answer("x", '{"success": true, "info": "",'
                                      ' "nodes": ["n1"]}')["result"], ["n1"])


def answer_in_thread(document):
    return {"success": True, "info": threading.current_thread().name,
            "result": [document["request"]["name"]]}


def answer_raises(document):
    raise KeyError("nodes")


def answer_list(document):
    return ["n1"]


class BuiltinAllocatorTests(unittest.TestCase):

    def setUp(self):
        self.runner = ThreadRunner(reactor, size=1)
        self.addCleanup(self.runner.stop)

    def builtin(self, target):
        return BuiltinAllocator("hail", target, self.runner)

    @defer.inlineCallbacks
    def test_runs_in_a_thread(self):
        allocator = self.builtin("tests.test_iallocator_run:answer_in_thread")
        text = yield allocator.run(INPUT, json.dumps(INPUT), {})
        answer = parse_answer("hail", text)
        self.assertEqual(answer["result"], ["x"])
        self.assertNotEqual(answer["info"], threading.current_thread().name)

    @defer.inlineCallbacks
    def test_missing_module_is_a_clear_error(self):
        allocator = self.builtin("ganeti.no_such_engine.iallocator:answer")
        err = yield self.assertFailure(
            allocator.run(INPUT, json.dumps(INPUT), {}), AllocatorError)
        self.assertIn("built-in iallocator 'hail' is not available:"
                      " ganeti.no_such_engine.iallocator:answer cannot be"
                      " loaded", str(err))
        missing = self.builtin("tests.test_iallocator_run:no_function")
        err = yield self.assertFailure(
            missing.run(INPUT, json.dumps(INPUT), {}), AllocatorError)
        self.assertIn("cannot be loaded", str(err))

    @defer.inlineCallbacks
    def test_failures(self):
        err = yield self.assertFailure(
            self.builtin("tests.test_iallocator_run:answer_raises").run(
                INPUT, json.dumps(INPUT), {}), AllocatorError)
        self.assertIn("built-in iallocator 'hail' failed: KeyError: 'nodes'",
                      str(err))
        err = yield self.assertFailure(
            self.builtin("tests.test_iallocator_run:answer_list").run(
                INPUT, json.dumps(INPUT), {}), AllocatorError)
        self.assertIn("gave an unusable answer: the answer is list, not an"
                      " object", str(err))

    def test_registry_default_table_names_the_engine(self):
        reg = AllocatorRegistry(reactor, root=self.mktemp())
        hail = reg.lookup("hail")
        self.assertEqual(hail.where, "ganeti.htools.iallocator:answer")
        self.assertIsInstance(reg.run_in_thread, ThreadRunner)

    @defer.inlineCallbacks
    def test_builtin_hail_takes_hails_options(self):
        """The master's allocator parameters reach the built-in hail as
        Ganeti's hail takes them on its command line."""
        from tests import htools_requests as R
        from tests.test_htools_alloc import cluster_doc
        doc = cluster_doc("tiny", R.alloc_request("r", 512, 1024, 1, "plain"))
        allocator = self.builtin("ganeti.htools.iallocator:answer")
        free = parse_answer("hail", (yield allocator.run(
            doc, json.dumps(doc), {})))
        self.assertNotEqual(free["result"], ["node1"])
        pinned = parse_answer("hail", (yield allocator.run(
            doc, json.dumps(doc), {"restrict-allocation-to": "node1"})))
        self.assertEqual(pinned["result"], ["node1"])
        wrong = parse_answer("hail", (yield allocator.run(
            doc, json.dumps(doc), {"no-such-option": None})))
        self.assertFalse(wrong["success"])
        self.assertIn("allocator parameter 'no-such-option'", wrong["info"])
