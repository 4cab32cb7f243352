"""The kvm driver's routed and openvswitch NICs, VNC password and security
models (user, pool), driven through a fake command runner: the runner
records every command, plays qemu (a dummy process plus a QMP server on the
instance's socket) and answers the network tools as told.  No real qemu,
no real network change here (tests/integration/test_kvm_features.py has
those)."""

import json
import os
import sys

from twisted.internet import defer, reactor
from twisted.internet.protocol import Factory
from twisted.trial import unittest

from ganeti import errors
from ganeti import hypervisor as hv
from ganeti import pathutils
from ganeti import uidpool
from ganeti.hypervisor import kvm, state
from tests.test_hypervisor_kvm import (
    FakeQMPServer, _Child, make_spec, option, short_root)

QEMU = "/bin/true"      # any executable: the fake runner plays qemu
MAC = "aa:00:00:00:00:01"


class OlderQMPServer(FakeQMPServer):
    """Answers the commands in ``factory.unknown`` as qemu does commands
    it does not have."""

    def lineReceived(self, line):
        cmd = json.loads(line)
        if cmd["execute"] in self.factory.unknown:
            self.factory.commands.append((cmd["execute"],
                                          cmd.get("arguments")))
            self.send({"error": {"class": "CommandNotFound",
                                 "desc": "The command %s has not been found"
                                 % cmd["execute"]}, "id": cmd["id"]})
            return
        super().lineReceived(line)


class FakeQemuProcess(Factory):
    """What a qemu started by the fake runner looks like to the driver."""
    protocol = OlderQMPServer
    #: QMP commands this qemu does not know
    unknown = ()

    def __init__(self, argv):
        self.argv = argv
        self.greet = True
        self.runstate = "running"
        self.obeys_powerdown = True
        self.commands = []
        self.clients = []
        qmp_opt = option(argv, "-qmp")[0]
        self.path = qmp_opt[len("unix:"):].split(",")[0]
        self.pidfile = option(argv, "-pidfile")[0]
        self.port = reactor.listenUNIX(self.path, self)
        self.child = _Child()
        self.process = reactor.spawnProcess(
            self.child, sys.executable,
            [sys.executable, "-c", "import time; time.sleep(120)",
             "unix:%s,server=on" % self.path], env=None)

    async def started(self):
        await state.wait_until(reactor, lambda: state.process_alive(
            self.process.pid, marker=self.path), 5, 0.01)
        with open(self.pidfile, "w") as f:
            f.write("%d\n" % self.process.pid)

    def guest_poweroff(self):
        self.runstate = "shutdown"

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
            open(self.path, "w").close()
        yield self.port.stopListening()


class FakeRunner(object):
    """Records commands; qemu (``QEMU``) becomes a FakeQemuProcess; a
    command whose words contain all of a ``failures`` key fails."""

    def __init__(self, testcase, tools=("ip", "sysctl", "ovs-vsctl")):
        self.testcase = testcase
        self.tools = set(tools)
        self.commands = []
        self.qemus = []
        self.failures = {}

    def which(self, tool):
        return "/usr/bin/" + tool if tool in self.tools else None

    def tool_commands(self):
        return [c for c in self.commands if c[0] != QEMU]

    async def _run(self, argv):
        self.commands.append(list(argv))
        if argv[0] == QEMU:
            qemu = FakeQemuProcess(argv)
            self.testcase.addCleanup(qemu.shutdown)
            self.qemus.append(qemu)
            await qemu.started()
            return b"", b"", 0
        for words, answer in self.failures.items():
            if set(words) <= set(argv):
                return answer
        return b"", b"", 0

    def run(self, argv):
        return defer.Deferred.fromCoroutine(self._run(argv))


class _Base(unittest.TestCase):

    timeout = 30

    def setUp(self):
        self.root = short_root(self)
        self.hyp = kvm.KvmHypervisor(self.root, reactor)
        self.hyp.MONITOR_TIMEOUT = 2.0
        self.hyp.QUIT_WAIT = 2.0
        self.runner = self.hyp.runner = FakeRunner(self)
        self.addCleanup(self.hyp.close)
        self.disk = os.path.join(self.root, "disk0")
        with open(self.disk, "w"):
            pass
        self.rt = state.RuntimeDir(self.root, "kvm")

    def spec(self, nics=(), **hvparams):
        params = {"kvm_path": QEMU, "kernel_path": ""}
        params.update(hvparams)
        return make_spec(params, [hv.DiskSpec(self.disk)], nics, name="vm1")

    def start(self, spec):
        return self.hyp.start_instance(spec)

    @defer.inlineCallbacks
    def assertStartFails(self, spec, *texts):
        err = yield self.assertFailure(self.start(spec),
                                       errors.HypervisorError)
        for text in texts:
            self.assertIn(text, str(err))
        self.assertEqual((yield self.hyp.list_instances()), [])
        return err

    def qemu_ran(self):
        return any(c[0] == QEMU for c in self.runner.commands)

    def tap(self, index=0):
        return kvm.tap_name(self.spec(), index)


class RoutedNicTests(_Base):

    @defer.inlineCallbacks
    def test_main_table(self):
        nic = hv.NicSpec(MAC, ip="192.0.2.10", mode="routed")
        yield self.start(self.spec([nic]))
        tap = self.tap()
        self.assertEqual(self.runner.tool_commands(), [
            ["ip", "link", "set", "dev", tap, "up"],
            ["ip", "-4", "route", "replace", "192.0.2.10/32", "proto",
             "static", "dev", tap],
            ["sysctl", "-q", "-w", "net/ipv4/conf/%s/proxy_arp=1" % tap],
            ["sysctl", "-q", "-w", "net/ipv4/conf/%s/forwarding=1" % tap]])
        # the tap is qemu's, without a bridge
        self.assertIn("tap,id=net0,ifname=%s,script=no,downscript=no,"
                      "vnet_hdr=on" % tap,
                      option(self.runner.commands[0], "-netdev"))
        del self.runner.commands[:]
        yield self.hyp.stop_instance("vm1", force=True)
        self.assertEqual(self.runner.tool_commands(), [
            ["ip", "-4", "route", "del", "192.0.2.10/32", "dev", tap]])
        self.assertEqual((yield self.hyp.list_instances()), [])

    @defer.inlineCallbacks
    def test_link_is_a_routing_table(self):
        nic = hv.NicSpec(MAC, ip="2001:db8::10", mode="routed", link="100")
        yield self.start(self.spec([nic]))
        tap = self.tap()
        self.assertEqual(self.runner.tool_commands()[1:3], [
            ["ip", "-6", "rule", "add", "dev", tap, "table", "100"],
            ["ip", "-6", "route", "replace", "2001:db8::10/128", "table",
             "100", "proto", "static", "dev", tap]])
        self.assertIn(
            ["sysctl", "-q", "-w", "net/ipv6/conf/%s/proxy_ndp=1" % tap],
            self.runner.tool_commands())
        del self.runner.commands[:]
        yield self.hyp.cleanup_instance("vm1")
        self.assertEqual(self.runner.tool_commands(), [
            ["ip", "-6", "route", "del", "2001:db8::10/128", "table", "100",
             "dev", tap],
            ["ip", "-6", "rule", "del", "dev", tap, "table", "100"]])

    @defer.inlineCallbacks
    def test_failed_route_undoes_the_start(self):
        nic = hv.NicSpec(MAC, ip="192.0.2.10", mode="routed", link="vms")
        self.runner.failures[("route", "replace")] = (
            b"", b"Error: argument \"vms\" is wrong: table id value is "
            b"invalid\n", 255)
        err = yield self.assertStartFails(
            self.spec([nic]), "NIC 0 (routed, link 'vms')",
            "table id value is invalid")
        self.assertIn("route replace 192.0.2.10/32", str(err))
        qemu = self.runner.qemus[0]
        self.assertFalse(state.process_alive(qemu.process.pid,
                                             marker=qemu.path))
        self.assertIn(["ip", "-4", "rule", "del", "dev", self.tap(), "table",
                       "vms"], self.runner.commands)
        self.assertEqual(os.listdir(self.rt.ctrl_dir), [])

    def test_refused_before_qemu(self):
        cases = [
            (hv.NicSpec(MAC, mode="routed"), "has no IP address"),
            (hv.NicSpec(MAC, ip="192.0.2.300", mode="routed"),
             "'192.0.2.300' is not an IP address"),
            (hv.NicSpec(MAC, ip="192.0.2.1", mode="routed", link="a b"),
             "routing table number or name"),
        ]
        d = defer.succeed(None)
        for nic, text in cases:
            d.addCallback(lambda _, n=nic, t=text: self.assertStartFails(
                self.spec([n]), "NIC 0", t))
        d.addCallback(lambda _: self.assertFalse(self.qemu_ran()))
        return d


class OpenvswitchNicTests(_Base):

    def test_vlan_syntax(self):
        for vlan, settings in (
                ("", []),
                ("100", ["tag=100", "vlan_mode=access"]),
                (".100", ["tag=100", "vlan_mode=access"]),
                (":100:200", ["trunks=100,200", "vlan_mode=trunk"]),
                (".100:200:300", ["tag=100", "trunks=200,300",
                                  "vlan_mode=native-untagged"])):
            self.assertEqual(kvm.ovs_vlan_settings(vlan), settings, vlan)
        for bad, text in (("abc", "is not N or .N"), (".", "is not N"),
                          ("100:200", "is not N"), (".5000", "above 4095")):
            err = self.assertRaises(ValueError, kvm.ovs_vlan_settings, bad)
            self.assertIn(text, str(err))

    @defer.inlineCallbacks
    def test_port_on_switch_with_vlan(self):
        nics = [hv.NicSpec(MAC, mode="openvswitch", link="ovs0",
                           vlan=".100:200"),
                hv.NicSpec("aa:00:00:00:00:02", mode="openvswitch",
                           link="ovs1")]
        yield self.start(self.spec(nics))
        tap0, tap1 = self.tap(0), self.tap(1)
        self.assertEqual(self.runner.tool_commands(), [
            ["ovs-vsctl", "--may-exist", "add-port", "ovs0", tap0, "--",
             "set", "port", tap0, "tag=100", "trunks=200",
             "vlan_mode=native-untagged"],
            ["ip", "link", "set", "dev", tap0, "up"],
            ["ovs-vsctl", "--may-exist", "add-port", "ovs1", tap1],
            ["ip", "link", "set", "dev", tap1, "up"]])
        del self.runner.commands[:]
        yield self.hyp.stop_instance("vm1", force=True)
        self.assertEqual(self.runner.tool_commands(), [
            ["ovs-vsctl", "--if-exists", "del-port", "ovs0", tap0],
            ["ovs-vsctl", "--if-exists", "del-port", "ovs1", tap1]])

    @defer.inlineCallbacks
    def test_refused_before_qemu(self):
        yield self.assertStartFails(
            self.spec([hv.NicSpec(MAC, mode="openvswitch", link="ovs0",
                                  vlan="1-2")]), "NIC 0", "vlan '1-2'")
        yield self.assertStartFails(
            self.spec([hv.NicSpec(MAC, mode="openvswitch")]),
            "needs the switch's name as its link")
        self.runner.tools.discard("ovs-vsctl")
        yield self.assertStartFails(
            self.spec([hv.NicSpec(MAC, mode="openvswitch", link="ovs0")]),
            "ovs-vsctl is not installed")
        self.assertFalse(self.qemu_ran())


class VncPasswordTests(_Base):

    def vnc_spec(self, path):
        return make_spec({"kvm_path": QEMU, "kernel_path": "",
                          "vnc_bind_address": "127.0.0.1",
                          "vnc_password_file": path},
                         [hv.DiskSpec(self.disk)], name="vm1",
                         network_port=5901)

    def password_file(self, content):
        path = os.path.join(self.root, "vnc-pw")
        with open(path, "w") as f:
            f.write(content)
        return path

    @defer.inlineCallbacks
    def test_password_set_over_qmp(self):
        yield self.start(self.vnc_spec(self.password_file("s3cret\nx\n")))
        self.assertEqual(option(self.runner.commands[0], "-vnc"),
                         ["127.0.0.1:1,password=on"])
        self.assertIn(("change-vnc-password", {"password": "s3cret"}),
                      self.runner.qemus[0].commands)

    @defer.inlineCallbacks
    def test_older_qemu_uses_set_password(self):
        self.patch(FakeQemuProcess, "unknown", ("change-vnc-password",))
        yield self.start(self.vnc_spec(self.password_file("s3cret\n")))
        commands = self.runner.qemus[0].commands
        self.assertIn(("set_password", {"protocol": "vnc",
                                        "password": "s3cret"}), commands)

    def test_without_password_file(self):
        cmd = kvm.build_command(
            make_spec({"vnc_bind_address": "127.0.0.1"}, network_port=5902),
            QEMU, self.hyp.files("vm1"))
        self.assertEqual(option(cmd, "-vnc"), ["127.0.0.1:2"])
        # without VNC the file is not used
        cmd = kvm.build_command(
            make_spec({"vnc_password_file": "/nonexistent"}), QEMU,
            self.hyp.files("vm1"))
        self.assertEqual(option(cmd, "-vnc"), [])

    @defer.inlineCallbacks
    def test_missing_or_empty_file(self):
        yield self.assertStartFails(self.vnc_spec("/nonexistent/pw"),
                                    "vnc_password_file /nonexistent/pw",
                                    "cannot be read")
        yield self.assertStartFails(self.vnc_spec(self.password_file("\n")),
                                    "is empty")
        self.assertFalse(self.qemu_ran())


class SecurityModelTests(_Base):

    def assertBad(self, hvparams, name, *texts):
        err = self.assertRaises(errors.ParameterError,
                                kvm.KvmHypervisor.check_parameter_syntax,
                                hvparams)
        self.assertEqual(err.args[0], name)
        for text in texts:
            self.assertIn(text, err.args[1])

    def test_syntax(self):
        kvm.KvmHypervisor.check_parameter_syntax(
            {"security_model": "user", "security_domain": "nobody"})
        kvm.KvmHypervisor.check_parameter_syntax({"security_model": "pool"})
        self.assertBad({"security_model": "user"}, "security_domain",
                       "needs 'security_domain'")
        self.assertBad({"security_model": "pool", "security_domain": "x"},
                       "security_domain", "only used with security_model "
                       "'user', not 'pool'")
        self.assertBad({"security_model": "chroot"}, "security_model")

    @defer.inlineCallbacks
    def test_user(self):
        err = yield self.assertFailure(self.hyp.validate_parameters(
            {"kvm_path": QEMU, "kernel_path": "", "security_model": "user",
             "security_domain": "no-such-user-here"}), errors.ParameterError)
        self.assertEqual(err.args[0], "security_domain")
        self.assertIn("'no-such-user-here' does not exist", err.args[1])
        yield self.assertStartFails(
            self.spec(security_model="user",
                      security_domain="no-such-user-here"),
            "security_domain user 'no-such-user-here' does not exist")
        self.assertFalse(self.qemu_ran())
        yield self.start(self.spec(security_model="user",
                                   security_domain="nobody"))
        self.assertEqual(option(self.runner.commands[0], "-runas"),
                         ["nobody"])

    def write_pool(self, text):
        path = pathutils.Paths(self.root).ssconf_file("uid_pool")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def lock_dir(self):
        return pathutils.Paths(self.root).uid_pool_lock_dir

    @defer.inlineCallbacks
    def test_pool(self):
        self.write_pool("64000-64001\n")
        yield self.start(self.spec(security_model="pool"))
        runas = option(self.runner.commands[0], "-runas")
        self.assertEqual(len(runas), 1)
        uid = int(runas[0].split(":")[0])
        self.assertEqual(runas[0], "%d:%d" % (uid, uid))
        self.assertIn(uid, (64000, 64001))
        self.assertEqual(self.rt.read("vm1").extra["uid"], uid)
        self.assertEqual(os.listdir(self.lock_dir()), [str(uid)])
        st = os.stat(self.disk)
        self.assertEqual((st.st_uid, st.st_gid), (uid, uid))
        yield self.hyp.stop_instance("vm1", force=True)
        self.assertEqual(os.listdir(self.lock_dir()), [])
        st = os.stat(self.disk)
        self.assertEqual((st.st_uid, st.st_gid), (os.getuid(), os.getgid()))

    @defer.inlineCallbacks
    def test_pool_exhausted_or_empty(self):
        yield self.assertStartFails(self.spec(security_model="pool"),
                                    "uid pool is empty",
                                    "gnt-cluster modify --uid-pool")
        self.write_pool("64000\n")
        os.makedirs(self.lock_dir(), exist_ok=True)
        held = uidpool.UidAllocator(self.lock_dir()).request([64000])
        self.addCleanup(held.unlock)
        yield self.assertStartFails(self.spec(security_model="pool"),
                                    "uid pool has no free uid")
        self.assertFalse(self.qemu_ran())

    @defer.inlineCallbacks
    def test_pool_uid_released_when_qemu_fails(self):
        self.write_pool("64000\n")
        nic = hv.NicSpec(MAC, ip="192.0.2.10", mode="routed")
        self.runner.failures[("link", "up")] = (b"", b"no such device", 1)
        yield self.assertStartFails(self.spec([nic], security_model="pool"),
                                    "no such device")
        self.assertEqual(os.listdir(self.lock_dir()), [])
        self.assertEqual(os.stat(self.disk).st_uid, os.getuid())
