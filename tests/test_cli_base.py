"""The gnt-* command framework: jobs, progress, errors, tables, info output."""

import io
import os
import re
import shutil
import tempfile

from twisted.trial import unittest

from ganeti import errors
from ganeti import luxi
from ganeti.cli import base
from ganeti.cli import gnt_cluster
from ganeti.cli import gnt_instance

from tests.test_cli_fakes import (FakeClient, NoMaster, run, field, encoded,
                                  NODATA, UNAVAIL, OFFLINE)

#: "Sat Nov 21 12:00:00 2026 message" (time.ctime then the message)
LOG_LINE = re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]\d "
                      r"\d\d:\d\d:\d\d \d{4} (.*)$")


class JobTests(unittest.TestCase):

    def test_submit_prints_job_id_and_does_not_wait(self):
        client = FakeClient()
        code, out, err = run(gnt_instance.commands,
                             ["startup", "--submit", "inst1"], client)
        self.assertEqual((code, out, err), (0, "JobID: 1\n", ""))
        self.assertEqual(client.methods(), ["SubmitJob"])

    def test_progress_messages_have_ganeti_timestamps(self):
        client = FakeClient()
        client.logs["OP_INSTANCE_STARTUP"] = ["Starting instance inst1",
                                              "Instance started"]
        client.events["OP_INSTANCE_STARTUP"] = [
            luxi.JOB_NOTCHANGED,
            [["running"], [[0, [1700000001, 0], "message", "first"]]],
            luxi.JOB_NOTCHANGED,
        ]
        code, out, err = run(gnt_instance.commands, ["startup", "inst1"],
                             client)
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        self.assertEqual([LOG_LINE.match(line).group(1) for line in lines],
                         ["first", "Starting instance inst1",
                          "Instance started"])
        # Ganeti's polling: WaitForJobChange on ["status"], then QueryJobs
        waits = [c for c in client.calls if c[0] == "WaitForJobChange"]
        self.assertEqual(waits[0][1][:4], [1, ["status"], None, None])
        # the log serial seen so far is passed on
        self.assertEqual(waits[-1][1][3], 0)
        self.assertEqual(client.calls[-1],
                         ("QueryJobs", [[1], ["status", "opstatus",
                                              "opresult"]]))

    def test_queued_job_is_reported_once_on_stderr(self):
        client = FakeClient()
        client.events["OP_INSTANCE_STARTUP"] = [
            [["queued"], []], luxi.JOB_NOTCHANGED, luxi.JOB_NOTCHANGED,
            [["waiting"], []], luxi.JOB_NOTCHANGED]
        code, out, err = run(gnt_instance.commands, ["startup", "inst1"],
                             client)
        self.assertEqual(code, 0)
        self.assertEqual(err.splitlines(),
                         ["Job 1 is waiting in the queue",
                          "Job 1 is waiting for locks"])

    def test_failed_job_prints_ganeti_failure_and_exits_1(self):
        client = FakeClient()
        client.errors["OP_INSTANCE_STARTUP"] = encoded(errors.OpPrereqError(
            "Instance 'inst1' not known", errors.ECODE_NOENT))
        code, out, err = run(gnt_instance.commands, ["startup", "inst1"],
                             client)
        self.assertEqual(code, 1)
        self.assertEqual(err, "Failure: prerequisites not met for this"
                         " operation:\nerror type: unknown_entity, error"
                         " details:\nInstance 'inst1' not known\n")

    def test_execution_error_and_unknown_opcode(self):
        client = FakeClient()
        client.errors["OP_INSTANCE_STARTUP"] = encoded(errors.OpExecError(
            "Could not start instance: boom"))
        code, _, err = run(gnt_instance.commands, ["startup", "inst1"],
                           client)
        self.assertEqual((code, err), (1, "Failure: command execution"
                                       " error:\nCould not start instance:"
                                       " boom\n"))
        client.errors["OP_INSTANCE_STARTUP"] = encoded(errors.OpCodeUnknown(
            "opcode OP_INSTANCE_STARTUP is not implemented by this master"))
        code, _, err = run(gnt_instance.commands, ["startup", "inst1"],
                           client)
        self.assertEqual(code, 1)
        self.assertIn("not implemented by this master", err)

    def test_canceled_job(self):
        client = FakeClient()
        client.events["OP_INSTANCE_STARTUP"] = [[["canceled"], []]]
        client.errors["OP_INSTANCE_STARTUP"] = ["OpExecError", ["x"]]

        def canceled(ops):
            job_id = FakeClient.submit_job(client, ops)
            client.jobs[job_id].status = "canceled"
            client.jobs[job_id].opstatus = ["canceled"]
            return job_id
        client.submit_job = canceled
        code, _, err = run(gnt_instance.commands, ["startup", "inst1"],
                           client)
        self.assertEqual(code, 1)
        self.assertIn("Job 1 was canceled", err)

    def test_refused_submission(self):
        client = FakeClient()
        client.submit_error = errors.JobQueueDrainError("drained")
        code, _, err = run(gnt_instance.commands, ["startup", "inst1"],
                           client)
        self.assertEqual(code, 1)
        self.assertIn("the job queue is marked for drain", err)

    def test_generic_parameters(self):
        client = FakeClient()
        code, _, err = run(gnt_instance.commands,
                           ["shutdown", "--dry-run", "--priority", "high",
                            "--reason", "maintenance", "inst1"], client)
        self.assertEqual(code, 0, err)
        op = client.op()
        self.assertEqual(op["dry_run"], True)
        self.assertEqual(op["priority"], -10)
        self.assertEqual([r[:2] for r in op["reason"]],
                         [["gnt:client:gnt-instance", "shutdown"],
                          ["gnt:user", "maintenance"]])
        self.assertIsInstance(op["reason"][0][2], int)
        run(gnt_instance.commands, ["stop", "inst1"], client)
        op = client.op()
        self.assertEqual(op["priority"], 0)
        self.assertIsNone(op["dry_run"])
        self.assertEqual(op["reason"][0][:2], ["gnt:client:gnt-instance",
                                               "stop"])

    def test_print_jobid(self):
        client = FakeClient()
        code, out, _ = run(gnt_instance.commands,
                           ["startup", "--print-jobid", "inst1"], client)
        self.assertEqual((code, out), (0, "1\n"))


class ErrorTests(unittest.TestCase):

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gnt-", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.root, True)

    def test_master_not_running_names_the_socket(self):
        code, out, err = run(gnt_cluster.commands,
                             ["info", "--root", self.root],
                             client_factory=NoMaster())
        socket = os.path.join(self.root, "var/run/ganeti/socket/"
                              "ganeti-query")
        self.assertEqual(code, 1)
        self.assertEqual(err, "Failure: cannot connect to the master daemon"
                         " (is ganeti-masterd running? socket %s)\n" % socket)

    def test_real_client_without_master(self):
        # the real luxi client, a root without any socket
        code, err = self.run_real(["gnt-cluster", "version", "--root",
                                   self.root])
        self.assertEqual(code, 1)
        self.assertIn("cannot connect to the master daemon", err)
        self.assertIn(self.root, err)

    def run_real(self, argv):
        out, err = io.StringIO(), io.StringIO()
        code = gnt_cluster.commands.run(argv[1:], stdout=out, stderr=err,
                                        env={})
        return code, err.getvalue()

    def test_root_from_environment(self):
        paths = []

        def factory(path):
            paths.append(path)
            return FakeClient()
        run(gnt_cluster.commands, ["queue", "info"], client_factory=factory,
            env={"GANETI_ROOTDIR": self.root})
        self.assertEqual(paths, [os.path.join(
            self.root, "var/run/ganeti/socket/ganeti-query")])
        # --root wins, before or after the sub-command
        paths[:] = []
        run(gnt_cluster.commands, ["--root", "/x", "queue", "info"],
            client_factory=factory, env={"GANETI_ROOTDIR": self.root})
        run(gnt_cluster.commands, ["queue", "info", "--root", "/y"],
            client_factory=factory, env={"GANETI_ROOTDIR": self.root})
        self.assertEqual(paths, ["/x/var/run/ganeti/socket/ganeti-query",
                                 "/y/var/run/ganeti/socket/ganeti-query"])

    def test_usage_errors_exit_2(self):
        code, out, err = run(gnt_instance.commands, ["frobnicate"],
                             FakeClient())
        self.assertEqual(code, 2)
        self.assertIn("invalid choice: 'frobnicate'", err)
        code, out, err = run(gnt_instance.commands, ["reboot", "-t", "warm",
                                                     "x"], FakeClient())
        self.assertEqual(code, 2)
        self.assertIn("argument -t/--type: invalid choice", err)

    def test_every_command_has_help(self):
        for module in ("gnt_cluster", "gnt_instance", "gnt_node", "gnt_job",
                       "gnt_os"):
            table = __import__("ganeti.cli." + module,
                               fromlist=["commands"]).commands
            code, out, _ = run(table, ["--help"], FakeClient())
            self.assertEqual(code, 0)
            for cmd in table.commands:
                self.assertTrue(cmd.help, "%s %s" % (module, cmd.name))
                code, out, _ = run(table, [cmd.name, "--help"], FakeClient())
                self.assertEqual(code, 0, (module, cmd.name))
                self.assertIn("usage: %s %s" % (table.program, cmd.name),
                              out)

    def test_unexpected_exception_is_reported_without_traceback(self):
        client = FakeClient()
        client.query_cluster_info = lambda: 1 / 0
        code, _, err = run(gnt_cluster.commands, ["version"], client)
        self.assertEqual(code, 1)
        self.assertIn("Unhandled error: ZeroDivisionError", err)
        self.assertNotIn("Traceback", err)
        code, _, err = run(gnt_cluster.commands, ["version", "-d"], client)
        self.assertIn("Traceback", err)


INSTANCE_FIELDS = [
    field("name", "Instance"), field("os", "OS"),
    field("oper_ram", "Memory", "unit"), field("admin_up", "Autostart",
                                               "bool"),
    field("snodes", "Secondary_Nodes", "other"),
    field("network_port", "Network_port", "number"),
    field("ctime", "CTime", "timestamp"), field("forthcoming",
                                                "Forthcoming", "bool"),
]
INSTANCE_ROWS = [
    ["inst1.example.com", "debootstrap+default", 512, True, ["n2", "n3"],
     11000, 1700000000.5, False],
    ["i2", "busybox", NODATA, False, [], OFFLINE, 1700000000, False],
    ["res1", UNAVAIL, UNAVAIL, False, [], None, None, True],
]


class ListTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()
        self.client.tables["instance"] = (INSTANCE_FIELDS, INSTANCE_ROWS)

    def list(self, *args):
        return run(gnt_instance.commands, ["list"] + list(args), self.client)

    def test_aligned_table_with_units_and_statuses(self):
        code, out, err = self.list("-o", "name,oper_ram,admin_up,snodes,"
                                   "network_port")
        self.assertEqual((code, err), (0, ""))
        self.assertEqual(out.splitlines(), [
            "Instance          Memory Autostart Secondary_Nodes Network_port",
            "inst1.example.com   512M Y         n2,n3                  11000",
            "i2                     ? N                                    *",
            "res1                   - N",
        ])

    def test_default_fields_and_request(self):
        self.list()
        # "forthcoming" is asked too, to mark such instances (not shown).
        self.assertEqual(self.client.calls[-1], (
            "Query", ["instance", ["name", "hypervisor", "os", "pnode",
                                   "status", "oper_ram", "forthcoming"],
                      None]))

    def test_separator_no_headers_and_units(self):
        code, out, _ = self.list("--separator=:", "--no-headers", "-o",
                                 "name,oper_ram")
        self.assertEqual(out, "inst1.example.com:512\ni2:?\nres1:-\n")
        code, out, _ = self.list("--units", "g", "-o", "name,oper_ram",
                                 "-v")
        self.assertEqual(out.splitlines()[1:], [
            "inst1.example.com       0.5", "i2                 (nodata)",
            "res1              (unavail)"])

    def test_plus_adds_to_the_defaults(self):
        self.list("-o", "+admin_up,forthcoming")
        self.assertEqual(self.client.calls[-1][1][1],
                         ["name", "hypervisor", "os", "pnode", "status",
                          "oper_ram", "admin_up", "forthcoming"])

    def test_unknown_field_warns_and_exits_14(self):
        code, out, err = self.list("-o", "name,nosuch")
        self.assertEqual(code, 14)
        self.assertEqual(err, "Warning: Queried for unknown fields nosuch\n")
        self.assertEqual(out.splitlines()[1], "inst1.example.com ??")

    def test_names_globs_and_filters(self):
        self.list("inst1", "web*")
        self.assertEqual(self.client.calls[-1][1][2],
                         ["|", ["==", "name", "inst1"],
                          ["=~", "name", r"^web[^.]*(\..*)?$"]])
        self.list('admin_state == "up" and name =~ /^w/')
        self.assertEqual(self.client.calls[-1][1][2],
                         ["&", ["==", "admin_state", "up"],
                          ["=~", "name", "^w"]])
        self.list("-F", "admin_up")
        self.assertEqual(self.client.calls[-1][1][2], ["?", "admin_up"])
        code, _, err = self.list("-F", "name ==")
        self.assertEqual(code, 1)
        self.assertIn("filter", err.lower())

    def test_timestamps(self):
        code, out, _ = self.list("-o", "name,ctime", "--separator", "|")
        value = out.splitlines()[1].split("|")[1]
        self.assertTrue(re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$", value),
                        value)

    def test_list_fields(self):
        code, out, _ = run(gnt_instance.commands, ["list-fields"],
                           self.client)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["Name", "Type", "Title",
                                            "Description"])
        self.assertIn("oper_ram     Storage size Memory", lines[3])
        code, out, _ = run(gnt_instance.commands,
                           ["list-fields", "--separator=|", "admin_up"],
                           self.client)
        self.assertEqual(out.splitlines()[1],
                         "admin_up|Boolean|Autostart|admin_up")
        self.assertEqual(self.client.calls[-1],
                         ("QueryFields", ["instance", ["admin_up"]]))


class InfoFormatTests(unittest.TestCase):

    def test_nesting(self):
        lines = base.format_info([
            ("Name", "x"), ("Empty", []), ("Flat list", ["a", "b"]),
            ("Mapping", {"b": 2, "a": {"c": True}}),
            ("Items", base.Items(["p", "q"])),
            ("Records", [[("first", 1), ("second", 2)]]),
            ("Lists", [["gnt:client:x", "add", 5]]),
        ])
        self.assertEqual(lines, [
            "Name: x",
            "Empty: ",
            "Flat list: a, b",
            "Mapping: ",
            "  a: ",
            "    c: True",
            "  b: 2",
            "Items: ",
            "  - p",
            "  - q",
            "Records: ",
            "  - first: 1",
            "    second: 2",
            "Lists: ",
            "  - - gnt:client:x",
            "    - add",
            "    - 5",
        ])


class ParameterTests(unittest.TestCase):

    def test_backend_parameters_are_typed(self):
        self.assertEqual(base.parse_beparams("memory=512M,vcpus=2,"
                                             "auto_balance=no"),
                         {"memory": 512, "vcpus": 2, "auto_balance": False})
        self.assertEqual(base.parse_beparams("maxmem=default,-vcpus"),
                         {"maxmem": "default", "vcpus": None})

    def test_bad_backend_parameter_names_it(self):
        err = self.assertRaises(errors.ParameterError, base.parse_beparams,
                                "memory=zz")
        self.assertEqual(err.args[0], "-B memory")
        self.assertIn("'zz' is not valid", err.args[1])

    def test_hypervisor_spec(self):
        self.assertEqual(base.parse_hv_spec("kvm:acpi=no,kernel_path=,"
                                            "serial_speed=9600"),
                         ("kvm", {"acpi": False, "kernel_path": "",
                                  "serial_speed": 9600}))
        self.assertEqual(base.parse_hv_spec("fake"), ("fake", {}))
        err = self.assertRaises(errors.ParameterError, base.parse_hv_spec,
                                "vmware:x=1")
        self.assertIn("unknown hypervisor 'vmware'", err.args[1])
