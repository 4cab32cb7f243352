"""Unit tests for the kvm driver: command line, parameters, and the state
logic against a fake qemu (a QMP server in the test and a dummy process);
no real qemu runs here (see test_hypervisor_kvm_guest for that)."""

import json
import os
import shutil
import sys
import tempfile

from twisted.internet import defer, protocol, reactor
from twisted.internet.protocol import Factory
from twisted.protocols.basic import LineOnlyReceiver
from twisted.trial import unittest
from zope.interface.verify import verifyObject

from ganeti import errors
from ganeti import hypervisor as hv
from ganeti.hypervisor import kvm, state

UUID = "6f1c2e0a-3b7d-4d2a-9c1e-5a8b7c6d5e4f"


def make_spec(hvparams=None, disks=None, nics=(), maxmem=512, vcpus=2,
              name="web1.example.com", network_port=None):
    return hv.InstanceSpec(
        name=name, uuid=UUID, hvparams=dict(hvparams or {}),
        beparams={"maxmem": maxmem, "minmem": 256, "vcpus": vcpus},
        disks=disks if disks is not None else [
            hv.DiskSpec("/dev/vg/disk0", "rw", "raw")],
        nics=nics, network_port=network_port)


FILES = kvm.KvmFiles(pidfile="/run/x/pid/web1.pid", qmp="/run/x/ctrl/web1.qmp",
                     serial="/run/x/ctrl/web1.serial",
                     serial_log="/run/x/ctrl/web1.serial.log")


def short_root(testcase):
    """A node root short enough for UNIX socket paths (108 bytes), which
    trial's temp directories are not."""
    root = tempfile.mkdtemp(prefix="gnt-kvm-")
    testcase.addCleanup(shutil.rmtree, root, True)
    return root


def option(cmd, flag):
    """Values following every occurrence of ``flag`` in ``cmd``."""
    return [cmd[i + 1] for i, c in enumerate(cmd) if c == flag]


class CommandLineTests(unittest.TestCase):

    def build(self, paused=False, **kw):
        return kvm.build_command(make_spec(**kw), "/usr/bin/qemu-system-x86_64",
                                 FILES, startup_paused=paused)

    def test_defaults(self):
        cmd = self.build(hvparams={"kernel_path": "/boot/vmlinuz",
                                   "initrd_path": "/boot/initrd.img"})
        self.assertEqual(cmd[0], "/usr/bin/qemu-system-x86_64")
        self.assertEqual(option(cmd, "-name"), ["web1.example.com"])
        self.assertEqual(option(cmd, "-uuid"), [UUID])
        self.assertEqual(option(cmd, "-accel"), ["tcg"])
        self.assertEqual(option(cmd, "-m"), ["512"])
        self.assertEqual(option(cmd, "-smp"), ["2"])
        self.assertEqual(option(cmd, "-pidfile"), [FILES.pidfile])
        self.assertIn("-daemonize", cmd)
        self.assertEqual(option(cmd, "-qmp"),
                         ["unix:/run/x/ctrl/web1.qmp,server=on,wait=off"])
        # guest power-off keeps the domain; reboots are reboots
        self.assertIn("-no-shutdown", cmd)
        self.assertNotIn("-no-reboot", cmd)
        self.assertNotIn("-S", cmd)
        self.assertEqual(option(cmd, "-kernel"), ["/boot/vmlinuz"])
        self.assertEqual(option(cmd, "-initrd"), ["/boot/initrd.img"])
        self.assertEqual(option(cmd, "-append"),
                         ["root=/dev/vda1 ro console=ttyS0,38400"])
        self.assertNotIn("-boot", cmd)
        self.assertEqual(option(cmd, "-drive"),
                         ["file=/dev/vg/disk0,format=raw,if=virtio,aio=threads"])
        self.assertEqual(option(cmd, "-nic"), ["none"])
        self.assertEqual(option(cmd, "-serial"), ["chardev:serial0"])
        self.assertIn("logfile=/run/x/ctrl/web1.serial.log",
                      option(cmd, "-chardev")[0])
        self.assertEqual(option(cmd, "-display"), ["none"])

    def test_accel_choice(self):
        for flag, accel in (("", "tcg"), ("disabled", "tcg"),
                            ("enabled", "kvm")):
            cmd = self.build(hvparams={"kvm_flag": flag})
            self.assertEqual(option(cmd, "-accel"), [accel], flag)

    def test_reboot_behavior_exit_and_paused(self):
        cmd = self.build(paused=True, hvparams={"reboot_behavior": "exit"})
        self.assertIn("-no-reboot", cmd)
        self.assertIn("-no-shutdown", cmd)
        self.assertIn("-S", cmd)

    def test_disk_boot_without_kernel(self):
        cmd = self.build(hvparams={"kernel_path": "", "boot_order": "disk",
                                   "serial_console": False})
        self.assertNotIn("-kernel", cmd)
        self.assertNotIn("-append", cmd)
        self.assertEqual(option(cmd, "-boot"), ["c"])
        self.assertNotIn("-serial", cmd)

    def test_kernel_args_and_root(self):
        cmd = self.build(hvparams={"kernel_path": "/k", "root_path": "",
                                   "kernel_args": "quiet ganeti_test=idle",
                                   "serial_speed": 115200})
        self.assertEqual(option(cmd, "-append"),
                         ["quiet ganeti_test=idle console=ttyS0,115200"])

    def test_disks(self):
        cmd = self.build(
            hvparams={"disk_type": "ide", "disk_cache": "writeback",
                      "disk_discard": "unmap"},
            disks=[hv.DiskSpec("/srv/a,b.img", "ro", "qcow2"),
                   hv.DiskSpec("/dev/drbd1")])
        self.assertEqual(option(cmd, "-drive"), [
            "file=/srv/a,,b.img,format=qcow2,if=ide,readonly=on,"
            "cache=writeback,aio=threads,discard=unmap",
            "file=/dev/drbd1,format=raw,if=ide,cache=writeback,aio=threads,"
            "discard=unmap"])

    def test_nics(self):
        nics = [hv.NicSpec("aa:00:00:11:22:33", mode="bridged", link="br0"),
                hv.NicSpec("aa:00:00:11:22:34", mode="bridged", link="br1")]
        cmd = self.build(nics=nics, hvparams={"nic_type": "e1000",
                                              "vhost_net": True})
        self.assertNotIn("-nic", cmd)
        self.assertEqual(option(cmd, "-netdev"), [
            "tap,id=net0,ifname=gnt6f1c2e0a.0,script=no,downscript=no,"
            "vnet_hdr=on,vhost=on",
            "tap,id=net1,ifname=gnt6f1c2e0a.1,script=no,downscript=no,"
            "vnet_hdr=on,vhost=on"])
        self.assertEqual(option(cmd, "-device"), [
            "e1000,netdev=net0,mac=aa:00:00:11:22:33",
            "e1000,netdev=net1,mac=aa:00:00:11:22:34"])
        self.assertLessEqual(len(kvm.tap_name(make_spec(), 9)), 15)

    def test_vnc_cpu_machine_extra(self):
        cmd = self.build(network_port=5903, hvparams={
            "vnc_bind_address": "127.0.0.1", "keymap": "de",
            "acpi": False, "machine_version": "pc-i440fx-7.2",
            "cpu_type": "qemu64", "cpu_sockets": 1, "cpu_cores": 2,
            "kvm_extra": "-device 'virtio-rng-pci,id=rng0'"})
        self.assertEqual(option(cmd, "-vnc"), ["127.0.0.1:3"])
        self.assertEqual(option(cmd, "-k"), ["de"])
        self.assertNotIn("-display", cmd)
        self.assertEqual(option(cmd, "-machine"), ["pc-i440fx-7.2,acpi=off"])
        self.assertEqual(option(cmd, "-cpu"), ["qemu64"])
        self.assertEqual(option(cmd, "-smp"), ["2,sockets=1,cores=2"])
        self.assertEqual(cmd[-2:], ["-device", "virtio-rng-pci,id=rng0"])

    def test_misc_helpers(self):
        self.assertEqual(kvm.parse_version(
            "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7)\n"), (7, 2, 22))
        self.assertEqual(kvm.parse_version("QEMU emulator version 8.1\n"), (8, 1))
        self.assertEqual(kvm.parse_version("garbage"), ())
        self.assertIsNone(kvm.find_kvm_binary("/nonexistent/qemu"))
        self.assertEqual(kvm.find_kvm_binary(sys.executable), sys.executable)
        # the default path falls back to qemu-system-x86_64 on PATH
        self.patch(kvm, "DEFAULT_KVM_PATH", "/nonexistent/kvm")
        self.patch(kvm.shutil, "which", lambda name: "/opt/bin/" + name)
        self.assertEqual(kvm.find_kvm_binary("/nonexistent/kvm"),
                         "/opt/bin/qemu-system-x86_64")


class ParameterTests(unittest.TestCase):

    def assertBad(self, hvparams, name, *texts):
        err = self.assertRaises(errors.ParameterError,
                                kvm.KvmHypervisor.check_parameter_syntax,
                                hvparams)
        self.assertEqual(err.args[0], name)
        for text in texts:
            self.assertIn(text, err.args[1])
        return err

    def test_good(self):
        kvm.KvmHypervisor.check_parameter_syntax({})
        defaults = dict((k, p.default) for k, p in kvm.PARAMETERS.items())
        kvm.KvmHypervisor.check_parameter_syntax(defaults)
        hv.check_parameter_syntax("kvm", {"kvm_flag": "disabled",
                                          "reboot_behavior": "exit",
                                          "kernel_path": ""})

    def test_project_defaults_are_accepted(self):
        from ganeti import constants
        kvm.KvmHypervisor.check_parameter_syntax(
            constants.HVC_DEFAULTS[constants.HT_KVM])

    def test_bad_values(self):
        self.assertBad({"kvm_flag": "yes"}, "kvm_flag",
                       "'', 'enabled', 'disabled'", "'yes'")
        self.assertBad({"reboot_behavior": "halt"}, "reboot_behavior",
                       "'reboot', 'exit'")
        self.assertBad({"acpi": "yes"}, "acpi", "boolean")
        self.assertBad({"serial_speed": "fast"}, "serial_speed", "integer")
        self.assertBad({"migration_port": 70000}, "migration_port", "65535")
        self.assertBad({"kernel_path": "vmlinuz"}, "kernel_path", "absolute")
        self.assertBad({"vnc_bind_address": "my-host"}, "vnc_bind_address",
                       "IP address")
        self.assertBad({"disk_type": "nvme"}, "disk_type", "paravirtual")

    def test_unknown_and_unsupported(self):
        self.assertBad({"kvm_turbo": True}, "kvm_turbo",
                       "not known to the kvm hypervisor")
        self.assertBad({"spice_bind": "0.0.0.0"}, "spice_bind",
                       "not supported", "''")
        self.assertBad({"use_chroot": True}, "use_chroot", "not supported")

    def test_combinations(self):
        self.assertBad({"kernel_path": "", "initrd_path": "/boot/initrd"},
                       "initrd_path", "kernel_path")
        self.assertBad({"keymap": "de"}, "keymap", "vnc_bind_address")
        self.assertBad({"kvm_extra": "-foo 'bar"}, "kvm_extra")

    @defer.inlineCallbacks
    def test_node_checks(self):
        hyp = kvm.KvmHypervisor(self.mktemp(), reactor)
        err = yield self.assertFailure(
            hyp.validate_parameters({"kernel_path": "/nonexistent/vmlinuz"}),
            errors.ParameterError)
        self.assertEqual(err.args[0], "kernel_path")
        self.assertIn("/nonexistent/vmlinuz", err.args[1])
        err = yield self.assertFailure(
            hyp.validate_parameters({"kernel_path": "",
                                     "kvm_path": "/nonexistent/kvm"}),
            errors.ParameterError)
        self.assertEqual(err.args[0], "kvm_path")
        yield self.assertFailure(hyp.validate_parameters({"kvm_flag": "x"}),
                                 errors.ParameterError)


class StartCheckTests(unittest.TestCase):
    """Starts that must fail before any qemu runs, leaving nothing behind."""

    def setUp(self):
        self.root = self.mktemp()
        self.hyp = hv.get_hypervisor("kvm", self.root, reactor)
        # any executable will do: these starts never get to run it
        self.hvparams = {"kvm_path": "/bin/true", "kernel_path": ""}
        self.disk = os.path.abspath(self.mktemp())
        open(self.disk, "w").close()

    @defer.inlineCallbacks
    def assertStartFails(self, spec, *texts):
        err = yield self.assertFailure(self.hyp.start_instance(spec),
                                       errors.HypervisorError)
        for text in texts:
            self.assertIn(text, str(err))
        self.assertEqual((yield self.hyp.list_instances()), [])

    def test_interface(self):
        self.assertTrue(verifyObject(hv.IHypervisor, self.hyp))

    def test_bridge_missing(self):
        nic = hv.NicSpec("aa:00:00:00:00:01", mode="bridged", link="nosuchbr0")
        return self.assertStartFails(
            make_spec(self.hvparams, [hv.DiskSpec(self.disk)], [nic]),
            "nosuchbr0", "not a bridge")

    def test_routed_nic_without_ip(self):
        nic = hv.NicSpec("aa:00:00:00:00:01", mode="routed", link="100")
        return self.assertStartFails(
            make_spec(self.hvparams, [hv.DiskSpec(self.disk)], [nic]),
            "NIC 0 is routed but has no IP address")

    def test_unknown_nic_mode(self):
        nic = hv.NicSpec("aa:00:00:00:00:01", mode="macvtap", link="eth0")
        return self.assertStartFails(
            make_spec(self.hvparams, [hv.DiskSpec(self.disk)], [nic]),
            "'macvtap'", "bridged, routed, openvswitch")

    def test_missing_disk(self):
        return self.assertStartFails(
            make_spec(self.hvparams, [hv.DiskSpec("/nonexistent/disk")]),
            "/nonexistent/disk")

    def test_missing_kernel(self):
        return self.assertStartFails(
            make_spec(dict(self.hvparams, kernel_path="/nonexistent/vmlinuz"),
                      [hv.DiskSpec(self.disk)]),
            "kernel_path", "/nonexistent/vmlinuz")

    def test_bad_params_and_uuid(self):
        d = self.assertFailure(
            self.hyp.start_instance(make_spec({"kvm_flag": "on"})),
            errors.ParameterError)
        spec = hv.InstanceSpec(name="x", uuid="not-a-uuid",
                               hvparams=self.hvparams, beparams={})
        d.addCallback(lambda _: self.assertStartFails(spec, "not a valid UUID"))
        return d

    def test_binary_missing(self):
        return self.assertStartFails(
            make_spec({"kvm_path": "/nonexistent/kvm", "kernel_path": ""}),
            "/nonexistent/kvm")


# ---------------------------------------------------------------------------
# A fake qemu: a dummy process (for the pid checks) plus a QMP server on the
# instance's socket that behaves like qemu's.

class FakeQMPServer(LineOnlyReceiver):
    delimiter = b"\n"

    def connectionMade(self):
        self.factory.clients.append(self)
        if self.factory.greet:
            self.transport.write(
                b'{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, '
                b'"major": 7}, "package": ""}, "capabilities": ["oob"]}}\r\n')

    def connectionLost(self, reason):
        self.factory.clients.remove(self)

    def send(self, obj):
        self.transport.write(json.dumps(obj).encode() + b"\r\n")

    def event(self, name, data=None):
        self.send({"event": name, "data": data or {},
                   "timestamp": {"seconds": 1, "microseconds": 0}})

    def lineReceived(self, line):
        cmd = json.loads(line)
        name, fq = cmd["execute"], self.factory
        fq.commands.append((name, cmd.get("arguments")))
        result = {}
        if name == "query-status":
            result = {"status": fq.runstate, "running": fq.runstate == "running"}
        self.send({"return": result, "id": cmd["id"]})
        if name == "system_powerdown" and fq.obeys_powerdown:
            fq.guest_poweroff()
        elif name == "system_reset":
            self.event("RESET", {"guest": False,
                                 "reason": "host-qmp-system-reset"})
        elif name == "cont":
            fq.runstate = "running"
            self.event("RESUME")
        elif name == "quit":
            self.event("SHUTDOWN", {"guest": False, "reason": "host-qmp-quit"})
            fq.kill()


class _Child(protocol.ProcessProtocol):
    def __init__(self):
        self.ended = defer.Deferred()

    def processEnded(self, reason):
        self.ended.callback(None)


class FakeQemu(Factory):
    protocol = FakeQMPServer

    def __init__(self, testcase, root, hyp, spec):
        self.greet = True
        self.runstate = "running"
        self.obeys_powerdown = True
        self.commands = []
        self.clients = []
        files = hyp.files(spec.name)
        rt = state.RuntimeDir(root, "kvm")
        rt.ensure()
        rt.write(state.InstanceRecord(spec=spec, started=reactor.seconds()))
        self.path = files.qmp
        self.port = reactor.listenUNIX(files.qmp, self)
        self.child = _Child()
        # the socket path on its command line, like qemu's -qmp option
        self.process = reactor.spawnProcess(
            self.child, sys.executable,
            [sys.executable, "-c", "import time; time.sleep(120)",
             "unix:%s,server=on" % files.qmp], env=None)
        self.pidfile = files.pidfile
        testcase.addCleanup(self.shutdown)

    async def started(self):
        """Like qemu, write the pid file only once the process runs."""
        await state.wait_until(reactor, lambda: state.process_alive(
            self.process.pid, marker=self.path), 5, 0.01)
        with open(self.pidfile, "w") as f:
            f.write("%d\n" % self.process.pid)

    def guest_poweroff(self):
        self.runstate = "shutdown"
        for c in self.clients:
            c.event("SHUTDOWN", {"guest": True, "reason": "guest-shutdown"})
            c.event("STOP")

    def kill(self):
        if self.process.pid:
            self.process.signalProcess("KILL")

    @defer.inlineCallbacks
    def shutdown(self):
        self.kill()
        yield self.child.ended
        for c in list(self.clients):
            c.transport.loseConnection()
        if not os.path.exists(self.path):
            # the driver removed the socket, as it should; Twisted's port
            # insists on unlinking it itself
            open(self.path, "w").close()
        yield self.port.stopListening()


class StateTests(unittest.TestCase):
    """What the driver reports, decided from pid, QMP and recorded events."""

    timeout = 30

    def setUp(self):
        self.root = short_root(self)
        self.hyp = kvm.KvmHypervisor(self.root, reactor)
        self.hyp.MONITOR_TIMEOUT = 1.0
        self.hyp.QUIT_WAIT = 2.0
        self.spec = make_spec(name="vm1")
        self.qemu = FakeQemu(self, self.root, self.hyp, self.spec)
        # LIFO: the driver lets go of its monitors before qemu goes away
        self.addCleanup(self.hyp.close)
        return defer.Deferred.fromCoroutine(self.qemu.started())

    def info(self, hyp=None):
        return (hyp or self.hyp).get_instance_info("vm1")

    async def wait_dead(self):
        await state.wait_until(reactor, lambda: self.hyp._pid("vm1") is None,
                               5, 0.02)

    @defer.inlineCallbacks
    def test_runstates(self):
        for runstate, expected, reason in (
                ("running", hv.RUNNING, None),
                ("paused", hv.PAUSED, None),
                ("prelaunch", hv.PAUSED, "prelaunch"),
                ("io-error", hv.PAUSED, "io-error"),
                ("shutdown", hv.SHUTDOWN, "guest-shutdown"),
                ("guest-panicked", hv.CRASHED, "guest-panicked")):
            self.qemu.runstate = runstate
            info = yield self.info()
            self.assertEqual((info.state, info.reason), (expected, reason),
                             runstate)
            self.assertEqual(info.pid, self.qemu.process.pid)
            self.assertEqual((info.memory, info.vcpus), (512, 2))
        self.assertEqual(len(self.qemu.clients), 1)  # one shared connection
        self.assertEqual((yield self.hyp.list_instances()), ["vm1"])

    @defer.inlineCallbacks
    def test_user_poweroff_then_process_gone_is_shutdown(self):
        yield self.info()       # the driver now watches the monitor
        self.qemu.guest_poweroff()
        info = yield self.info()
        self.assertEqual(info.state, hv.SHUTDOWN)
        record = state.RuntimeDir(self.root, "kvm").read("vm1")
        self.assertEqual(record.shutdown["reason"], "guest-shutdown")
        # even when qemu is gone afterwards (and a host quit was seen), the
        # user's power-off is what counts
        for c in self.qemu.clients:
            c.event("SHUTDOWN", {"guest": False, "reason": "host-signal"})
        self.qemu.kill()
        yield defer.Deferred.fromCoroutine(self.wait_dead())
        info = yield self.info()
        self.assertEqual((info.state, info.reason, info.pid),
                         (hv.SHUTDOWN, "guest-shutdown", None))

    @defer.inlineCallbacks
    def test_process_gone_without_poweroff_is_crashed(self):
        yield self.info()
        self.qemu.kill()
        yield defer.Deferred.fromCoroutine(self.wait_dead())
        info = yield self.info()
        self.assertEqual((info.state, info.reason, info.pid),
                         (hv.CRASHED, "process-exited", None))
        self.assertFalse(info.live)
        yield self.hyp.cleanup_instance("vm1")
        self.assertEqual((yield self.hyp.list_instances()), [])
        self.assertEqual(os.listdir(self.hyp._rt.ctrl_dir), [])

    @defer.inlineCallbacks
    def test_new_driver_after_restart(self):
        self.qemu.runstate = "shutdown"
        self.assertEqual((yield self.info()).state, hv.SHUTDOWN)
        yield self.hyp.close()   # node daemon stops; qemu serves one client
        other = kvm.KvmHypervisor(self.root, reactor)
        self.addCleanup(other.close)
        infos = yield other.get_all_instances_info()
        self.assertEqual([(i.name, i.state) for i in infos],
                         [("vm1", hv.SHUTDOWN)])

    @defer.inlineCallbacks
    def test_mute_monitor_is_running_not_down(self):
        self.qemu.greet = False
        info = yield self.info()
        self.assertEqual((info.state, info.reason),
                         (hv.RUNNING, "monitor-unresponsive"))

    @defer.inlineCallbacks
    def test_soft_stop(self):
        yield self.hyp.stop_instance("vm1", timeout=10)
        names = [c for c, _ in self.qemu.commands]
        self.assertEqual(names[-3:], ["query-status", "system_powerdown", "quit"])
        yield self.qemu.child.ended
        self.assertEqual((yield self.hyp.list_instances()), [])
        self.assertIsNone((yield self.info()))

    @defer.inlineCallbacks
    def test_soft_stop_guest_ignores_powerdown(self):
        self.qemu.obeys_powerdown = False
        start = reactor.seconds()
        yield self.hyp.stop_instance("vm1", timeout=0.5)
        self.assertGreaterEqual(reactor.seconds() - start, 0.5)
        self.assertEqual([c for c, _ in self.qemu.commands][-2:],
                         ["system_powerdown", "quit"])
        self.assertEqual((yield self.hyp.list_instances()), [])

    @defer.inlineCallbacks
    def test_force_stop_and_stop_unknown(self):
        yield self.hyp.stop_instance("vm1", force=True)
        names = [c for c, _ in self.qemu.commands]
        self.assertNotIn("system_powerdown", names)
        self.assertEqual(names[-1], "quit")
        self.assertEqual((yield self.hyp.list_instances()), [])
        yield self.hyp.stop_instance("vm1")
        yield self.hyp.cleanup_instance("vm1")

    @defer.inlineCallbacks
    def test_reboot(self):
        yield self.hyp.reboot_instance("vm1")
        self.assertEqual(self.qemu.commands[-1], ("system_reset", None))

    @defer.inlineCallbacks
    def test_reboot_when_reboots_exit_restarts_qemu(self):
        # with -no-reboot an in-place reset would end as a shutdown (the
        # firmware resets once more), so the driver restarts qemu instead
        rt = state.RuntimeDir(self.root, "kvm")
        spec = make_spec(name="vm1", hvparams={"reboot_behavior": "exit"})
        rt.update("vm1", spec=spec)
        started = []

        async def fake_start(spec, paused):
            started.append((spec, paused))
        self.patch(self.hyp, "_start", fake_start)
        yield self.hyp.reboot_instance("vm1")
        self.assertEqual([c for c, _ in self.qemu.commands][-1], "quit")
        self.assertNotIn("system_reset", [c for c, _ in self.qemu.commands])
        self.assertEqual(started, [(spec, False)])
        yield self.qemu.child.ended

    @defer.inlineCallbacks
    def test_reboot_and_resume_need_the_right_state(self):
        self.qemu.runstate = "shutdown"
        err = yield self.assertFailure(self.hyp.reboot_instance("vm1"),
                                       errors.HypervisorError)
        self.assertIn("is shutdown", str(err))
        self.qemu.runstate = "prelaunch"
        yield self.hyp.resume_instance("vm1")
        self.assertEqual((yield self.info()).state, hv.RUNNING)
        yield self.assertFailure(self.hyp.resume_instance("nosuch"),
                                 errors.HypervisorError)

    @defer.inlineCallbacks
    def test_start_refuses_live_instance(self):
        err = yield self.assertFailure(self.hyp.start_instance(self.spec),
                                       errors.HypervisorError)
        self.assertIn("already running", str(err))

    @defer.inlineCallbacks
    def test_node_info_counts_instances(self):
        node = yield self.hyp.get_node_info()
        self.assertEqual(node.memory_hv, 512)
        self.assertGreater(node.memory_total, 0)
        self.assertLessEqual(node.memory_free, node.memory_total)
        self.assertGreaterEqual(node.cpu_total, 1)
