"""The self-diagnose collector: the whitelist of commands, the checks of
their output, the signed report and the consumer's check of it
(open_report), and the built-in diagnosis against a private D-Bus bus
exporting fake UDisks2 and systemd services."""

import json
import os
import shutil
import subprocess
import tempfile

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from ganeti.confd import wire
from ganeti.mond import builtin_diagnose, diagnose

KEY = b"0123456789abcdef0123456789abcdef01234567\n"
OTHER_KEY = b"fedcba9876543210fedcba9876543210fedcba98\n"


def signed(obj, at, key=KEY):
    return diagnose.sign(key, obj, at)


class OpenReportTests(unittest.TestCase):
    """What a consumer (the maintenance daemon) accepts."""

    def test_a_good_report_opens(self):
        d = {"status": "live-repair", "command": "fix-raid",
             "details": {"disk": "sdb"}}
        self.assertEqual(diagnose.open_report(signed(d, 1000), KEY, 1010, 60),
                         d)

    def test_the_envelope_is_confds(self):
        env = signed({"status": "Ok"}, 1234)
        self.assertEqual(env["salt"], "1234")
        self.assertEqual(env["hmac"], wire.sign(KEY, "1234", env["msg"]))
        # the key file is used verbatim: without its newline it is another
        self.assertNotEqual(env["hmac"], wire.sign(KEY.strip(), "1234",
                                                   env["msg"]))

    def reason(self, data, now=1000, max_age=60, key=KEY):
        with self.assertRaises(diagnose.BadReport) as ctx:
            diagnose.open_report(data, key, now, max_age)
        return ctx.exception.reason

    def test_unsigned(self):
        # what Ganeti 3.1's collector serves: the bare object
        self.assertEqual(self.reason({"status": "evacuate"}), "unsigned")
        self.assertEqual(self.reason(None), "unsigned")
        self.assertEqual(self.reason("Ok"), "unsigned")
        env = signed({"status": "Ok"}, 1000)
        del env["hmac"]
        self.assertEqual(self.reason(env), "unsigned")

    def test_forged(self):
        env = signed({"status": "Ok"}, 1000)
        # the message changed after signing (an attacker asking for an
        # evacuation)
        forged = dict(env, msg=json.dumps({"status": "evacuate"}))
        self.assertEqual(self.reason(forged), "bad-signature")
        # signed with another key
        self.assertEqual(self.reason(signed({"status": "evacuate"}, 1000,
                                            key=OTHER_KEY)), "bad-signature")
        # an old report's salt moved forward to look fresh
        old = signed({"status": "evacuate"}, 100)
        self.assertEqual(self.reason(dict(old, salt="1000")),
                         "bad-signature")
        self.assertEqual(self.reason(dict(env, hmac="x" * 40)),
                         "bad-signature")

    def test_stale(self):
        env = signed({"status": "evacuate"}, 1000)
        self.assertEqual(self.reason(env, now=1061), "stale")
        self.assertEqual(self.reason(env, now=939), "stale")   # from ahead
        self.assertEqual(diagnose.open_report(env, KEY, 1060, 60),
                         {"status": "evacuate"})

    def test_malformed(self):
        for bad in ([], {"status": "reboot"}, {"status": "Ok", "x": 1},
                    {"status": "live-repair", "command": "../bin/sh"},
                    {"status": "live-repair", "command": "a b"},
                    {"details": 1}):
            self.assertEqual(self.reason(signed(bad, 1000)), "malformed",
                             bad)
        env = {"msg": "{not json", "salt": "1000"}
        env["hmac"] = wire.sign(KEY, "1000", env["msg"])
        self.assertEqual(self.reason(env), "malformed")
        env = {"msg": "{}", "salt": "yesterday"}
        env["hmac"] = wire.sign(KEY, "yesterday", env["msg"])
        self.assertEqual(self.reason(env), "malformed")

    def test_a_node_that_could_not_diagnose_itself(self):
        env = signed(diagnose.unknown("command 'x' refused"), 1000)
        with self.assertRaises(diagnose.BadReport) as ctx:
            diagnose.open_report(env, KEY, 1000, 60)
        self.assertEqual(ctx.exception.reason, "unknown")
        self.assertIn("command 'x' refused", ctx.exception.message)


class CheckOutputTests(unittest.TestCase):

    def test_valid_outputs(self):
        for value in ({"status": "Ok"},
                      {"status": "evacuate-failover", "details": [1, 2]},
                      {"status": "live-repair", "command": "fix.sh",
                       "details": None}):
            self.assertEqual(diagnose.parse_output(
                json.dumps(value).encode()), value)

    def test_bad_outputs_say_why(self):
        cases = [(b"", "not JSON"), (b"[1]", "not a JSON object"),
                 (b'{"status": "ok"}', "status 'ok' is not one of"),
                 (b'{"status": "Ok", "when": 1}', "unknown field(s) when"),
                 (b'{"status": "unknown"}', "is not one of"),
                 (b"\xff", "not JSON"),
                 (b'{"status": "Ok"}' + b" " * 70000, "longer than")]
        for output, message in cases:
            with self.assertRaises(ValueError) as ctx:
                diagnose.parse_output(output)
            self.assertIn(message, str(ctx.exception), output[:40])


class CommandTests(unittest.TestCase):
    """Real commands in a whitelist directory, run with the real reactor."""

    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="mond-diag-", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.base, True)
        self.dir = os.path.join(self.base, "node-diagnose-commands")
        os.mkdir(self.dir, 0o755)
        self.clock = task.Clock()
        self.clock.advance(5000)
        self.collector = diagnose.DiagnoseCollector(
            reactor, self.clock, KEY, self.dir, timeout=2.0,
            builtin=self.fail_builtin)

    def fail_builtin(self, *args):
        raise AssertionError("the built-in diagnose ran")

    def script(self, name, body, mode=0o755):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body + "\n")
        os.chmod(path, mode)
        return path

    @defer.inlineCallbacks
    def run_with(self, name):
        self.collector.configure({"active": True, "interval": 5000000,
                                  "filename": name})
        data = yield self.collector.collect()
        defer.returnValue(data)

    def opened(self, data):
        return diagnose.open_report(data, KEY, self.clock.seconds(), 60)

    def unknown_reason(self, data):
        with self.assertRaises(diagnose.BadReport) as ctx:
            self.opened(data)
        self.assertEqual(ctx.exception.reason, "unknown")
        return ctx.exception.message

    @defer.inlineCallbacks
    def test_a_whitelisted_command_reports_signed(self):
        self.script("health", "echo '{\"status\": \"evacuate\", "
                    "\"details\": {\"disk\": \"sdb\"}}'")
        data = yield self.run_with("health")
        self.assertEqual(data["salt"], "5000")
        self.assertEqual(self.opened(data),
                         {"status": "evacuate", "details": {"disk": "sdb"}})

    @defer.inlineCallbacks
    def test_the_command_gets_nothing_from_the_daemon(self):
        out = os.path.join(self.base, "seen")
        self.script("env", "env > %s; pwd >> %s; cat >> %s; echo "
                    "'{\"status\": \"Ok\"}'" % (out, out, out))
        data = yield self.run_with("env")
        self.assertEqual(self.opened(data), {"status": "Ok"})
        seen = open(out).read()
        self.assertNotIn("PYTHONPATH", seen)
        self.assertIn("\n/\n", "\n" + seen)

    @defer.inlineCallbacks
    def test_refused_commands_never_run(self):
        marker = os.path.join(self.base, "ran")
        body = "touch %s; echo '{\"status\": \"evacuate\"}'" % marker
        self.script("writable", body, mode=0o775)
        self.script("not-exec", body, mode=0o644)
        os.symlink("/bin/true", os.path.join(self.dir, "outside"))
        cases = [("writable", "more permissive"),
                 ("not-exec", "not executable"),
                 ("missing", "cannot stat"),
                 ("outside", "outside"),
                 ("../writable", "is a path"),
                 ("/bin/true", "is a path"),
                 ("a b", "characters other than")]
        for name, why in cases:
            data = yield self.run_with(name)
            message = self.unknown_reason(data)
            self.assertIn("refused", message, name)
            self.assertIn(why, message, name)
        self.assertFalse(os.path.exists(marker))

    @defer.inlineCallbacks
    def test_a_group_writable_directory_refuses_everything(self):
        self.script("health", "echo '{\"status\": \"Ok\"}'")
        os.chmod(self.dir, 0o775)
        data = yield self.run_with("health")
        self.assertIn("more permissive", self.unknown_reason(data))

    @defer.inlineCallbacks
    def test_failing_and_malformed_commands(self):
        self.script("fails", "echo broken >&2; exit 3")
        self.script("garbage", "echo 'all good'")
        self.script("wrong", "echo '{\"status\": \"panic\"}'")
        message = self.unknown_reason((yield self.run_with("fails")))
        self.assertIn("exited with status 3", message)
        self.assertIn("broken", message)
        message = self.unknown_reason((yield self.run_with("garbage")))
        self.assertIn("malformed diagnosis", message)
        self.assertIn("not JSON", message)
        message = self.unknown_reason((yield self.run_with("wrong")))
        self.assertIn("status 'panic'", message)

    @defer.inlineCallbacks
    def test_a_hanging_command_is_killed(self):
        self.collector.timeout = 0.3
        pidfile = os.path.join(self.base, "pid")
        self.script("hangs", "echo $$ > %s; sleep 30; echo '{\"status\":"
                    " \"Ok\"}'" % pidfile)
        data = yield self.run_with("hangs")
        self.assertIn("did not finish within 0.3s",
                      self.unknown_reason(data))
        pid = int(open(pidfile).read())
        with self.assertRaises(ProcessLookupError):
            os.kill(pid, 0)

    @defer.inlineCallbacks
    def test_the_empty_name_is_the_builtin(self):
        calls = []

        def builtin(reactor_, bus):
            calls.append(bus)
            return defer.succeed({"status": "live-repair",
                                  "details": {"failed_units": ["x"]}})
        self.collector.builtin = builtin
        self.collector.bus_address = "unix:path=/nowhere"
        data = yield self.run_with("")
        self.assertEqual(calls, ["unix:path=/nowhere"])
        self.assertEqual(self.opened(data)["status"], "live-repair")


BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC
 "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"""


def start_bus(test):
    """A private dbus-daemon for ``test``; its address.  The daemon is
    killed (by its pid) when the test ends."""
    if shutil.which("dbus-daemon") is None:
        raise unittest.SkipTest("no dbus-daemon (apt-get install dbus)")
    base = tempfile.mkdtemp(prefix="mond-bus-", dir="/tmp")
    test.addCleanup(shutil.rmtree, base, True)
    config = os.path.join(base, "bus.conf")
    with open(config, "w") as f:
        f.write(BUS_CONFIG % os.path.join(base, "bus"))
    out = subprocess.run(
        ["dbus-daemon", "--config-file=" + config, "--print-address=1",
         "--print-pid=1", "--fork", "--nopidfile"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10,
        check=True).stdout.decode().split()
    address, pid = out[0], int(out[1])

    def kill():
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass
    test.addCleanup(kill)
    return address


def drive(model, serial, failing):
    """A UDisks2 drive object's properties (interface -> {name: value})."""
    return {builtin_diagnose.UDISKS_DRIVE: {"Id": "%s-%s" % (model, serial),
                                            "Model": model,
                                            "Serial": serial},
            builtin_diagnose.UDISKS_ATA: {"SmartFailing": failing}}


def fake_services(drives=None, units=None):
    """txdbus objects for UDisks2 (its object manager with a drive object
    per entry of ``drives``, {object path: drive(...)}, or a block device
    for other entries) and for systemd's
    manager (``units``: [(name, active state)]); None leaves that service
    off the bus.  [(bus name, [objects])]."""
    from txdbus import objects
    from txdbus.interface import DBusInterface, Method, Property

    exported = []
    if drives is not None:
        class Drive(objects.DBusObject):
            dbusInterfaces = [
                DBusInterface(builtin_diagnose.UDISKS_DRIVE,
                              Property("Id", "s"), Property("Model", "s"),
                              Property("Serial", "s")),
                DBusInterface(builtin_diagnose.UDISKS_ATA,
                              Property("SmartFailing", "b"))]
            Id = objects.DBusProperty("Id")
            Model = objects.DBusProperty("Model")
            Serial = objects.DBusProperty("Serial")
            SmartFailing = objects.DBusProperty("SmartFailing")

            def __init__(self, path, props):
                objects.DBusObject.__init__(self, path)
                for values in props.values():
                    for name, value in values.items():
                        setattr(self, name, value)

        class Block(objects.DBusObject):
            dbusInterfaces = [DBusInterface("org.freedesktop.UDisks2.Block",
                                            Property("Size", "t"))]
            Size = objects.DBusProperty("Size")

            def __init__(self, path, props):
                objects.DBusObject.__init__(self, path)
                self.Size = props["org.freedesktop.UDisks2.Block"]["Size"]

        class Manager(objects.DBusObject):
            # txdbus answers GetManagedObjects with the objects below it
            dbusInterfaces = [DBusInterface(builtin_diagnose.OBJECT_MANAGER)]

        exported.append((builtin_diagnose.UDISKS_NAME,
                         [Manager(builtin_diagnose.UDISKS_PATH)] +
                         [(Drive if builtin_diagnose.UDISKS_DRIVE in props
                           else Block)(path, props)
                          for path, props in sorted(drives.items())]))
    if units is not None:
        class Systemd(objects.DBusObject):
            dbusInterfaces = [DBusInterface(
                builtin_diagnose.SYSTEMD_MANAGER,
                Method("ListUnits", returns="a(ssssssouso)"))]

            def dbus_ListUnits(self):
                return [(name, "a unit", "loaded", state, "x", "",
                         "/org/freedesktop/systemd1/unit/u", 0, "", "/")
                        for name, state in units]
        exported.append((builtin_diagnose.SYSTEMD_NAME,
                         [Systemd(builtin_diagnose.SYSTEMD_PATH)]))
    return exported


class BuiltinDiagnoseTests(unittest.TestCase):
    """The built-in diagnosis over a private bus with fake services."""

    def setUp(self):
        try:
            import txdbus  # noqa: F401
        except ImportError:
            raise unittest.SkipTest("txdbus is not installed")
        self.address = start_bus(self)

    @defer.inlineCallbacks
    def serve(self, drives=None, units=None):
        from txdbus import client
        for name, objs in fake_services(drives, units):
            conn = yield client.connect(reactor, self.address)
            self.addCleanup(conn.disconnect)
            for obj in objs:
                conn.exportObject(obj)
            yield conn.requestBusName(name)

    @defer.inlineCallbacks
    def test_a_failing_disk_asks_for_an_evacuation(self):
        yield self.serve(
            drives={"/org/freedesktop/UDisks2/drives/good":
                    drive("Good", "1", False),
                    "/org/freedesktop/UDisks2/drives/bad":
                    drive("Bad", "2", True),
                    "/org/freedesktop/UDisks2/block_devices/sda": {
                        "org.freedesktop.UDisks2.Block": {"Size": 1}}},
            units=[("ssh.service", "active"), ("raid.service", "failed")])
        result = yield builtin_diagnose.run(reactor, self.address)
        self.assertEqual(result["status"], "evacuate")
        self.assertEqual(result["details"]["failing_drives"], [
            {"object": "/org/freedesktop/UDisks2/drives/bad",
             "id": "Bad-2", "model": "Bad", "serial": "2"}])
        self.assertEqual(result["details"]["failed_units"],
                         ["raid.service"])
        # a valid diagnosis of the protocol, and stable
        diagnose.check_diagnosis(result)
        again = yield builtin_diagnose.run(reactor, self.address)
        self.assertEqual(again, result)

    @defer.inlineCallbacks
    def test_failed_units_ask_for_a_live_repair(self):
        yield self.serve(drives={"/org/freedesktop/UDisks2/drives/good":
                                 drive("Good", "1", False)},
                         units=[("b.service", "failed"),
                                ("a.mount", "failed"),
                                ("c.service", "inactive")])
        result = yield builtin_diagnose.run(reactor, self.address)
        self.assertEqual(result, {"status": "live-repair", "details": {
            "failed_units": ["a.mount", "b.service"]}})
        self.assertNotIn("command", result)

    @defer.inlineCallbacks
    def test_a_healthy_node_is_ok(self):
        yield self.serve(drives={}, units=[("ssh.service", "active")])
        result = yield builtin_diagnose.run(reactor, self.address)
        self.assertEqual(result, {"status": "Ok", "details": {}})

    @defer.inlineCallbacks
    def test_absent_services_are_ok_and_said(self):
        yield self.serve(units=[("ssh.service", "active")])
        result = yield builtin_diagnose.run(reactor, self.address)
        self.assertEqual(result["status"], "Ok")
        self.assertEqual(list(result["details"]["unavailable"]),
                         ["udisks2"])
        self.assertIn("ServiceUnknown",
                      result["details"]["unavailable"]["udisks2"])

    @defer.inlineCallbacks
    def test_no_bus_is_ok_and_said(self):
        result = yield builtin_diagnose.run(
            reactor, "unix:path=/nonexistent/mond-test-bus")
        self.assertEqual(result["status"], "Ok")
        self.assertIn("no system bus",
                      result["details"]["unavailable"]["dbus"])

    @defer.inlineCallbacks
    def test_the_collector_signs_the_builtin_diagnosis(self):
        yield self.serve(drives={"/org/freedesktop/UDisks2/drives/bad":
                                 drive("Bad", "2", True)}, units=[])
        clock = task.Clock()
        clock.advance(700)
        collector = diagnose.DiagnoseCollector(
            reactor, clock, KEY, "/nonexistent", bus_address=self.address)
        collector.configure({"active": True, "filename": ""})
        data = yield collector.collect()
        opened = diagnose.open_report(data, KEY, 700, 60)
        self.assertEqual(opened["status"], "evacuate")
