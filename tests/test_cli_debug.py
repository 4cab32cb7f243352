"""gnt-debug delay, submit-job and test-osparams: arguments -> opcodes,
bad input refused before anything is submitted.  (``iallocator``:
tests.test_cli_allocator; ``test-jobqueue`` against the real daemons,
ours and Ganeti's: tests.integration.test_debug_volumes.)"""

import json
import os
import shutil
import socket
import tempfile

from twisted.trial import unittest

from ganeti import errors
from ganeti.cli import gnt_debug

from tests.test_cli_fakes import FakeClient, encoded, run


def debug(client, *argv):
    return run(gnt_debug.commands, argv, client)


class DebugCommandTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()

    def test_delay(self):
        code, _, err = debug(self.client, "delay", "-n", "node2", "-r", "3",
                             "--no-master", "-l", "1.5")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["duration"], op["on_nodes"],
                          op["repeat"], op["on_master"], op["no_locks"]),
                         ("OP_TEST_DELAY", 1.5, ["node2"], 3, False, True))

    def test_delay_bad_duration(self):
        code, _, err = debug(self.client, "delay", "soon")
        self.assertNotEqual(code, 0)
        self.assertIn("duration", err)
        self.assertEqual(self.client.jobs, {})

    def test_submit_job(self):
        path = self.mktemp()
        with open(path, "w") as f:
            json.dump([{"OP_ID": "OP_TEST_DELAY", "duration": 0},
                       {"OP_ID": "OP_TEST_DUMMY", "result": 7}], f)
        self.client.results["OP_TEST_DUMMY"] = 7
        code, out, err = debug(self.client, "submit-job", "--op-repeat",
                               "2", "--job-repeat", "2", "-v", path)
        self.assertEqual(code, 0, err)
        self.assertEqual(len(self.client.jobs), 2)
        self.assertEqual([op["OP_ID"] for op in self.client.ops(1)],
                         ["OP_TEST_DELAY", "OP_TEST_DUMMY"] * 2)
        self.assertIn("Job 1: [null, 7, null, 7]", out)

    def test_submit_job_bad_file(self):
        path = self.mktemp()
        with open(path, "w") as f:
            json.dump([{"OP_ID": "OP_TEST_DELAY"}], f)
        code, _, err = debug(self.client, "submit-job", path)
        self.assertNotEqual(code, 0)
        self.assertIn("opcode 0", err)
        self.assertIn("duration", err)
        code, _, err = debug(self.client, "submit-job",
                             os.path.join(path, "nosuch"))
        self.assertNotEqual(code, 0)
        self.assertIn("cannot read it", err)
        self.assertEqual(self.client.jobs, {})

    def test_osparams(self):
        self.client.errors["OP_TEST_OS_PARAMS"] = encoded(
            errors.OpExecError("Opcode needs secret parameters"))
        code, _, err = debug(self.client, "test-osparams")
        self.assertNotEqual(code, 0)
        self.assertIn("Opcode needs secret parameters", err)
        self.assertIsNone(self.client.op()["osparams_secret"])
        del self.client.errors["OP_TEST_OS_PARAMS"]
        code, _, err = debug(self.client, "test-osparams",
                             "--os-parameters-secret", "pw=x,user=y")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.client.op()["osparams_secret"],
                         {"pw": "x", "user": "y"})


class _Ctx(object):
    def __init__(self, client):
        self.client = client


class JobQueueReporterTests(unittest.TestCase):
    """What test-jobqueue checks at each announcement of OP_TEST_JQUEUE."""

    def setUp(self):
        self.client = FakeClient()
        self.job = self.client._make_job([{"OP_ID": "OP_TEST_JQUEUE"}])
        d = tempfile.mkdtemp(prefix="jqt-", dir="/tmp")
        self.addCleanup(shutil.rmtree, d, True)
        self.path = os.path.join(d, "sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(self.sock.close)
        self.sock.bind(self.path)
        self.sock.listen(5)
        self.reporter = gnt_debug._JobQueueReporter(_Ctx(self.client),
                                                    self.job)

    def entry(self, test, arg=None):
        return [1, [0, 0], "jqueue-test", [self.path, test, arg]]

    def status(self, value):
        self.client.jobs[self.job].status = value

    def test_steps_checked_against_the_job_status(self):
        self.status("waiting")
        self.assertTrue(self.reporter(self.entry("expandnames")))
        self.status("running")
        self.assertTrue(self.reporter(self.entry("exec")))
        self.assertTrue(self.reporter(self.entry("startmsg", 1)))
        self.assertTrue(self.reporter([2, [0, 0], "message", "TESTMSG=hi"]))
        self.assertTrue(self.reporter(self.entry("logmsg", 1)))
        self.assertEqual(self.reporter.messages, ["hi"])
        # other messages are printed as usual
        self.assertFalse(self.reporter([3, [0, 0], "message", "Executing"]))

    def test_wrong_status_or_count_fails(self):
        self.status("running")
        self.assertRaises(gnt_debug.JobQueueTestFailed, self.reporter,
                          self.entry("expandnames"))
        self.assertRaises(gnt_debug.JobQueueTestFailed, self.reporter,
                          [2, [0, 0], "message", "TESTMSG=early"])
        self.reporter(self.entry("startmsg", 2))
        self.assertRaises(gnt_debug.JobQueueTestFailed, self.reporter,
                          self.entry("logmsg", 1))
        self.assertRaises(gnt_debug.JobQueueTestFailed, self.reporter,
                          self.entry("bogus"))
