"""Instance consoles through real daemons.

* A fake instance (one-node cluster, RAPI in front of the master): our
  ``gnt-instance console``, OP_INSTANCE_CONSOLE, RAPI
  ``/2/instances/NAME/console``; Ganeti 3.0's own ``gnt-instance console
  --show-cmd`` and RAPI client ``GetInstanceConsole`` against our master;
  a stopped and an unknown instance.
* The tiny real guest under kvm (skipped without qemu): ``gnt-instance
  console`` in a pseudo-terminal joins it to the guest's serial console;
  what is typed there is answered by the guest's shell, Ctrl-] ends the
  session.  Ganeti's ``--show-cmd`` prints the ssh command around the
  same socat command.
"""

import json
import os
import pty
import select
import subprocess
import sys
import textwrap
import time

from ganeti import constants
from ganeti.cmdlib import instance_console
from ganeti.hypervisor import state

from tests import ganeti_peer
from tests.integration import guest as test_guest
from tests.integration.daemons import (GntCommandsMixin,
                                       RunningClusterTestCase, command_env,
                                       wait_for)
from tests.integration.test_rapi import (PASSWORD, TLS_PORT, USER,
                                         RapiDaemonTestCase)

INSTANCE = "inst1.example.com"
FAKE_MESSAGE = "Console not available for fake hypervisor"

RAPI_SCRIPT = textwrap.dedent("""
    import json, sys
    from ganeti.rapi import client
    host, port, user, password, name = sys.argv[1:6]
    c = client.GanetiRapiClient(host, port=int(port), username=user,
                                password=password)
    try:
        print(json.dumps(["ok", c.GetInstanceConsole(name)]))
    except client.GanetiApiError as err:
        print(json.dumps(["error", err.code, str(err)]))
""")


class FakeInstanceConsoleTests(GntCommandsMixin, RapiDaemonTestCase):

    def setUp(self):
        RapiDaemonTestCase.setUp(self)
        self.gnt_root = self.vc.master.root
        self.run_job(self.create_op())

    def stop(self):
        self.run_job({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                      "instance_name": INSTANCE, "timeout": 10})

    def test_ours(self):
        out = self.ok("gnt-instance", "console", INSTANCE)
        self.assertEqual(out, FAKE_MESSAGE + "\n")
        result, _ = self.run_job({"OP_ID": "OP_INSTANCE_CONSOLE",
                                  "instance_name": INSTANCE})
        self.assertEqual((result["instance"], result["kind"],
                          result["message"]), (INSTANCE, "msg",
                                               FAKE_MESSAGE))
        resp, body = self.http("GET", "/2/instances/%s/console" % INSTANCE,
                               user=("reader", "rpw"))
        self.assertEqual(resp.status, 200, body)
        self.assertEqual(body, result)
        resp, body = self.http("GET", "/2/instances/nope/console",
                               user=("reader", "rpw"))
        self.assertEqual(resp.status, 404, body)
        # stopped: refused, nothing changed
        self.stop()
        before = self.client.call("Query", "instance",
                                  ["admin_state", "status"], None)
        code, out = self.gnt("gnt-instance", "console", INSTANCE)
        self.assertEqual(code, 1, out)
        self.assertIn("Instance %s is not running, can't get console"
                      % INSTANCE, out)
        result, _ = self.run_job({"OP_ID": "OP_INSTANCE_CONSOLE",
                                  "instance_name": INSTANCE},
                                 expect="error")
        self.assertIn("Instance %s is not running (state ADMIN_down)"
                      % INSTANCE, str(result))
        resp, body = self.http("GET", "/2/instances/%s/console" % INSTANCE,
                               user=("reader", "rpw"))
        self.assertEqual((resp.status, body["message"]),
                         (503, "Instance console unavailable"))
        self.assertEqual(self.client.call(
            "Query", "instance", ["admin_state", "status"], None), before)
        code, out = self.gnt("gnt-instance", "console", "nope")
        self.assertEqual(code, 1, out)
        self.assertIn("Instance not known: nope", out)

    def test_ganetis_clients(self):
        ganeti_peer.skip_unless_available()
        node = self.vc.master
        code, out = ganeti_peer.run_tool(
            "gnt-instance", ["console", "--show-cmd", INSTANCE], node.root,
            node.name)
        self.assertEqual((code, out.strip()), (0, FAKE_MESSAGE))
        self.assertEqual(self.ganeti_rapi(INSTANCE), [
            "ok", {"instance": INSTANCE, "kind": "msg",
                   "message": FAKE_MESSAGE, "host": None, "port": None,
                   "user": None, "command": None, "display": None}])
        self.stop()
        code, out = ganeti_peer.run_tool(
            "gnt-instance", ["console", "--show-cmd", INSTANCE], node.root,
            node.name)
        self.assertEqual(code, 1, out)
        self.assertIn("Instance %s is not running, can't get console"
                      % INSTANCE, out)
        answer = self.ganeti_rapi(INSTANCE)
        self.assertEqual(answer[:2], ["error", 503])
        self.assertIn("Instance console unavailable", answer[2])
        self.assertEqual(self.ganeti_rapi("nope")[:2], ["error", 404])

    def ganeti_rapi(self, name):
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ganeti_peer.GANETI_LIB,
               "LANG": "C.UTF-8"}
        proc = subprocess.run(
            [ganeti_peer.GANETI_PYTHON, "-c", RAPI_SCRIPT, self.vc.master.ip,
             str(TLS_PORT), USER, PASSWORD, name], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode())
        return json.loads(proc.stdout.decode())


#: seconds a TCG boot may take on a busy machine
BOOT_DEADLINE = 90


class KvmGuestTestCase(RunningClusterTestCase):
    """One real VM (``vm1``, the tiny guest under kvm) whose serial console
    answers a shell; skipped without qemu."""

    timeout = 300
    HYPERVISORS = (constants.HT_KVM,)
    BASE_PREFIX = "gnt-kc-"

    def setUp(self):
        self.qemu, self.guest = test_guest.guest_or_skip()
        RunningClusterTestCase.setUp(self)
        self.rt = state.RuntimeDir(self.vc.master.root, constants.HT_KVM)
        self.run_job({
            "OP_ID": "OP_INSTANCE_CREATE", "instance_name": "vm1",
            "mode": "create", "hypervisor": constants.HT_KVM,
            "disk_template": "file", "disks": [{"size": 16}], "nics": [],
            "os_type": "busybox+default", "pnode": self.vc.master.name,
            "beparams": {"memory": 256, "vcpus": 1},
            "hvparams": self.guest.kvm_hvparams("idle"),
            "name_check": False, "ip_check": False, "ignore_ipolicy": True})
        self.addCleanup(self.remove_vm)
        wait_for("the guest to be idle", lambda: "ganeti-test: idle" in
                 self.console_log(), BOOT_DEADLINE, 0.25)

    def remove_vm(self):
        self.run_job({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "vm1",
                      "shutdown_timeout": 10})

    def console_log(self):
        try:
            with open(self.rt.ctrl_path("vm1", "serial.log"), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""


class KvmSerialConsoleTests(KvmGuestTestCase):
    """One real VM: its serial console through ``gnt-instance console``."""

    def test_type_into_the_serial_console(self):
        master = self.vc.master
        socket_path = instance_console.serial_socket(master.root, "vm1")
        self.assertEqual(socket_path, self.rt.ctrl_path("vm1", "serial"))
        env = dict(command_env(master.root), GANETI_HOSTNAME=master.name)
        out = subprocess.run(
            [sys.executable, "-m", "ganeti.cli.gnt_instance", "console",
             "--show-cmd", "vm1"], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=60).stdout.decode()
        self.assertIn(" root@%s '/usr/bin/socat STDIO,raw,echo=0,"
                      "escape=0x1d UNIX-CONNECT:%s'" % (master.name,
                                                        socket_path), out)

        # the console in a terminal, as a user has it
        primary, secondary = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "ganeti.cli.gnt_instance", "console",
             "vm1"], env=env, stdin=secondary, stdout=secondary,
            stderr=secondary, start_new_session=True)
        os.close(secondary)
        self.addCleanup(os.close, primary)
        self.addCleanup(self.kill, proc)
        seen = []

        def read_until(text, deadline):
            end = time.monotonic() + deadline
            while time.monotonic() < end:
                ready, _, _ = select.select([primary], [], [], 0.2)
                if ready:
                    try:
                        seen.append(os.read(primary, 4096).decode(
                            "utf-8", "replace"))
                    except OSError:     # the command ended
                        break
                if text in "".join(seen):
                    return
            self.fail("no %r on the console; seen: %r" % (text,
                                                            "".join(seen)))

        # the shell answers; its answer is not what was typed
        deadline = time.monotonic() + 60
        while True:
            os.write(primary, b"echo console-$((6*7))-answer\r")
            try:
                read_until("console-42-answer", 5)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
        # Ctrl-] ends the session; the instance keeps running
        os.write(primary, b"\x1d")
        self.assertEqual(proc.wait(30), 0, "".join(seen))
        self.assertIn("console-42-answer", self.console_log())
        self.assertEqual(self.client.call(
            "Query", "instance", ["status"], ["=", "name", "vm1"])["data"],
            [[[0, "running"]]])

        if ganeti_peer.unavailable_reason() is None:
            code, out = ganeti_peer.run_tool(
                "gnt-instance", ["console", "--show-cmd", "vm1"],
                master.root, master.name)
            self.assertEqual(code, 0, out)
            self.assertIn("root@%s" % master.name, out)
            self.assertIn("UNIX-CONNECT:%s" % socket_path, out)

    @staticmethod
    def kill(proc):
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
