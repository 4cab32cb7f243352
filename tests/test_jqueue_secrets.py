"""Secret and private opcode parameters in the job queue: secret values
never reach the queue directory (job files, journal), private ones never
reach an answer (QueryJobs, WaitForJobChange), the running job still has
both, and a job that lost its secrets in a restart fails instead of
running without them."""

import json
import os

from ganeti import opcodes
from ganeti.jqueue import model as jq_model

from tests.test_jqueue import FakeExecutor, QueueTestCase, op

SECRET = "Tr0ub4dor-and-3-horses"
PRIVATE = "private-motd-9c1e"


def create_op(**params):
    """OP_INSTANCE_CREATE with a secret and a private OS parameter."""
    values = {"instance_name": "inst1", "mode": "create", "disks": [],
              "nics": [], "osparams": {"motd": "hello"},
              "osparams_private": {"motd_private": PRIVATE},
              "osparams_secret": {"root_password": SECRET}}
    values.update(params)
    return op("OP_INSTANCE_CREATE", **values)


def tree_holds(directory, text):
    """Paths of the files under ``directory`` holding ``text``."""
    found = []
    needle = text.encode("utf-8")
    for base, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                if needle in f.read():
                    found.append(os.path.relpath(path, directory))
    return found


class SecretsOnDiskTests(QueueTestCase):

    def test_the_running_job_has_its_secrets_the_disk_never_does(self):
        job_id = self.submit(create_op())
        self.assertEqual(tree_holds(self.dir, SECRET), [])
        self.turn()
        (call,) = self.executor.calls
        # the logical unit gets the real values
        self.assertEqual(call.op.osparams_secret, {"root_password": SECRET})
        self.assertEqual(call.op.osparams_private, {"motd_private": PRIVATE})
        call.start()
        call.ctx("installing")
        self.clock.advance(5)
        self.assertEqual(tree_holds(self.dir, SECRET), [])
        call.finish(["node1"])
        self.assertEqual(self.status(job_id), "success")
        self.successResultOf(self.queue.shutdown())
        self.assertEqual(tree_holds(self.dir, SECRET), [])
        stored = self.read_job(job_id)["ops"][0]["input"]
        self.assertEqual(stored["osparams_secret"],
                         {"root_password": "<redacted>"})
        # private values are kept (the job can run again after a restart)
        self.assertEqual(stored["osparams_private"],
                         {"motd_private": PRIVATE})
        self.assertEqual(stored["osparams"], {"motd": "hello"})

    def test_the_journal_never_holds_a_secret(self):
        self.submit(create_op())
        journal = os.path.join(self.dir, "journal")
        with open(journal, "rb") as f:
            raw = f.read()
        # the journal took the job's creation, without the secret
        self.assertIn(b"OP_INSTANCE_CREATE", raw)
        self.assertNotIn(SECRET.encode(), raw)
        self.turn()
        self.executor.calls[0].start().finish(True)

    def test_a_finished_job_forgets_its_secrets(self):
        job_id = self.submit(create_op())
        self.turn()
        self.executor.calls[0].start().finish(["node1"])
        job = self.queue.get_job(job_id)
        self.assertEqual(job.ops[0].input.osparams_secret,
                         {"root_password": "<redacted>"})
        self.assertEqual(job.ops[0].input.osparams_private,
                         {"motd_private": PRIVATE})

    def test_nested_creations_keep_their_secrets_off_disk(self):
        multi = op("OP_INSTANCE_MULTI_ALLOC", instances=[create_op()])
        self.submit(multi)
        self.turn()
        self.assertEqual(self.executor.calls[0].op.instances[0]
                         .osparams_secret, {"root_password": SECRET})
        self.assertEqual(tree_holds(self.dir, SECRET), [])


class SecretsInAnswersTests(QueueTestCase):

    def test_query_jobs_shows_neither_private_nor_secret_values(self):
        job_id = self.submit(create_op(), op("OP_CLUSTER_SET_PARAMS",
                                             osparams_private_cluster={
                                                 "debian": {"k": PRIVATE}}))
        self.turn()
        for running in (True, False):
            (ops,) = self.queue.query_jobs([job_id], ["ops"])[0]
            text = json.dumps(ops)
            self.assertNotIn(SECRET, text)
            self.assertNotIn(PRIVATE, text)
            self.assertEqual(ops[0]["osparams_secret"],
                             {"root_password": "<redacted>"})
            self.assertEqual(ops[0]["osparams_private"],
                             {"motd_private": "<redacted>"})
            self.assertEqual(ops[0]["osparams"], {"motd": "hello"})
            self.assertEqual(ops[1]["osparams_private_cluster"],
                             {"debian": {"k": "<redacted>"}})
            if running:
                self.executor.calls[0].start().finish(True)
                self.executor.calls[1].start().finish(True)
        self.assertEqual(self.status(job_id), "success")
        # read back from its file (not in memory any more)
        self.queue._cache.clear()
        (ops,) = self.queue.query_jobs([job_id], ["ops"])[0]
        self.assertEqual(ops[0]["osparams_private"],
                         {"motd_private": "<redacted>"})

    def test_wait_for_job_change_shows_no_private_value(self):
        job_id = self.submit(create_op())
        answer = self.successResultOf(self.queue.wait_for_job_change(
            job_id, ["ops", "status"], None, None, 10))
        text = json.dumps(answer)
        self.assertIn("<redacted>", text)
        self.assertNotIn(SECRET, text)
        self.assertNotIn(PRIVATE, text)
        self.turn()
        self.executor.calls[0].start().finish(True)

    def test_unloadable_opcodes_are_redacted_by_parameter_name(self):
        self.successResultOf(self.queue.shutdown())
        data = {"id": 7, "received_timestamp": [1, 0], "ops": [{
            "input": {"OP_ID": "OP_FROM_A_NEWER_VERSION",
                      "osparams_private": {"k": PRIVATE},
                      "osparams_secret": {"pw": "<redacted>"}},
            "status": "success", "result": None, "log": [],
            "priority": 0}]}
        with open(self.job_file(7), "w") as f:
            json.dump(data, f)
        queue = self.make_queue()
        queue.load()
        (ops,) = queue.query_jobs([7], ["ops"])[0]
        self.assertEqual(ops[0]["osparams_private"], {"k": "<redacted>"})


class RestartTests(QueueTestCase):
    """A new queue on the directory is a master daemon started again."""

    def restart(self):
        self.successResultOf(self.queue.shutdown())
        self.executor = FakeExecutor()
        self.queue = self.make_queue()
        return self.queue.load()

    def test_a_waiting_job_with_secrets_fails_asking_to_resubmit(self):
        job_id = self.submit(create_op())
        self.turn()
        self.assertEqual(self.status(job_id), "waiting")
        report = self.restart()
        self.assertEqual(report.failed, (job_id,))
        self.assertEqual(report.requeued, ())
        self.turn()
        # it never runs with placeholders for values
        self.assertEqual(self.executor.calls, [])
        self.assertEqual(self.status(job_id), "error")
        (result,) = self.field(job_id, "opresult")
        self.assertEqual(result[0], "OpExecError")
        self.assertIn("secret parameters (osparams_secret)", result[1][0])
        self.assertIn("submit the job again", result[1][0])
        self.assertEqual(self.read_job(job_id)["ops"][0]["status"], "error")

    def test_a_queued_opcode_with_secrets_after_a_finished_one(self):
        first = self.submit(op("OP_TEST_DELAY", duration=60))
        job_id = self.submit(op("OP_TEST_DELAY", duration=0),
                             op("OP_TEST_OS_PARAMS",
                                osparams_secret={"pw": SECRET}),
                             op("OP_TEST_DELAY", duration=0))
        self.turn()
        self.executor.calls[0].start()
        self.executor.calls[1].start().finish(True)
        # the second opcode waits for its turn, the first one is done
        self.assertEqual(self.field(job_id, "opstatus")[:2],
                         ["success", "waiting"])
        self.assertEqual(tree_holds(self.dir, SECRET), [])
        self.restart()
        self.turn()
        self.assertEqual(self.status(first), "error")   # was running
        statuses, results = self.queue.query_jobs(
            [job_id], ["opstatus", "opresult"])[0]
        self.assertEqual(statuses, ["success", "error", "error"])
        self.assertIn("(osparams_secret)", results[1][1][0])
        self.assertIn("opcode 1 of this job lost its secret parameters",
                      results[2][1][0])
        self.assertEqual([c.job.id for c in self.executor.calls], [])

    def test_a_job_without_secrets_runs_again(self):
        job_id = self.submit(create_op(osparams_secret=None))
        self.turn()
        report = self.restart()
        self.assertEqual(report.requeued, (job_id,))
        self.turn()
        (call,) = self.executor.calls
        self.assertEqual(call.op.osparams_private, {"motd_private": PRIVATE})
        call.start().finish(True)

    def test_secrets_left_in_files_by_an_older_version_are_removed(self):
        self.successResultOf(self.queue.shutdown())
        older = {"input": create_op().to_dict(), "status": "queued",
                 "result": None, "log": [], "priority": 0}
        for job_id, status in ((1, "success"), (2, "queued")):
            entry = dict(older, status=status)
            with open(self.job_file(job_id), "w") as f:
                json.dump({"id": job_id, "ops": [entry],
                           "received_timestamp": [1, 0]}, f)
        # the spare files of the writer hold old contents of job files
        with open(os.path.join(self.dir, ".spare.40"), "w") as f:
            json.dump({"id": 2, "ops": [older]}, f)
        self.assertEqual(sorted(tree_holds(self.dir, SECRET)),
                         [".spare.40", "job-1", "job-2"])
        self.executor = FakeExecutor()
        self.queue = self.make_queue()
        report = self.queue.load()
        self.assertEqual(report.requeued, (2,))
        self.assertEqual(tree_holds(self.dir, SECRET), [])
        self.turn()
        # the queued one still runs with the value it was given
        (call,) = self.executor.calls
        self.assertEqual(call.op.osparams_secret, {"root_password": SECRET})
        call.start().finish(True)
        self.assertEqual(self.queue.get_job(1).ops[0].input.osparams_secret,
                         {"root_password": "<redacted>"})


class ModelTests(QueueTestCase):

    def test_lost_secrets_of_a_file_form(self):
        entry = jq_model.QueuedOpCode(input=create_op())
        self.assertTrue(entry.holds_secrets())
        back = opcodes.OpCode.from_dict(entry.input_dict())
        self.assertEqual(back.lost_secrets(), ["osparams_secret"])
        self.assertFalse(jq_model.QueuedOpCode(input=back).holds_secrets())


def loose_modes(directory):
    """``{relative path: mode}`` of what under ``directory`` (itself
    included) allows more than 0600 for a file or 0700 for a directory."""
    found = {}
    for base, dirs, names in os.walk(directory):
        for name, limit in ([(None, 0o700)] + [(d, 0o700) for d in dirs]
                            + [(n, 0o600) for n in names]):
            path = base if name is None else os.path.join(base, name)
            mode = os.lstat(path).st_mode & 0o7777
            if mode & ~limit:
                found[os.path.relpath(path, directory)] = oct(mode)
    return found


class ModeTests(QueueTestCase):

    def test_every_queue_file_is_for_the_owner_only(self):
        old_umask = os.umask(0o022)
        self.addCleanup(os.umask, old_umask)
        ids = [self.submit(op("OP_TEST_DELAY", duration=0)) for _ in range(3)]
        self.turn()
        for call in self.executor.calls:
            call.start().finish(True)
        self.successResultOf(self.queue.set_drain_flag(True))
        self.assertEqual(self.successResultOf(self.queue.archive_job(ids[0])),
                         True)
        self.successResultOf(self.queue.shutdown())
        names = set(os.listdir(self.dir))
        for name in ("journal", "serial", "version", "lock", "drain",
                     "job-2", "job-3", "archive"):
            self.assertIn(name, names)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "archive", "0",
                                                    "job-1")))
        self.assertEqual(loose_modes(self.dir), {})

    def test_files_of_an_older_version_are_tightened_at_load(self):
        self.submit(op("OP_TEST_DELAY", duration=0))
        self.turn()
        self.executor.calls[0].start().finish(True)
        self.successResultOf(self.queue.archive_job(1))
        self.submit(op("OP_TEST_DELAY", duration=0))
        self.turn()
        self.executor.calls[1].start().finish(True)
        self.successResultOf(self.queue.shutdown())
        # as an older version left them: group-readable
        for base, dirs, names in os.walk(self.dir):
            os.chmod(base, 0o750)
            for name in names:
                os.chmod(os.path.join(base, name), 0o640)
        before = loose_modes(self.dir)
        for name in ("job-2", "journal", "serial", "lock",
                     os.path.join("archive", "0", "job-1"), "archive"):
            self.assertIn(name, before)
        self.queue = self.make_queue()
        self.queue.load()
        self.assertEqual(loose_modes(self.dir), {})
        self.assertEqual(self.status(2), "success")
        self.assertEqual(self.status(1), "success")
