"""The kvm driver's routed NICs, VNC password and security models against
real qemu.

* routed NIC: qemu runs inside a network namespace this test creates (the
  driver's commands go through ``ip netns exec``); the host route, the
  routing-table rule, proxy ARP and forwarding are read back there, and are
  gone after the stop.  No packet is sent anywhere.
* VNC password: qemu listens on a random 127.x address; the test speaks
  the start of RFB: with a password the server offers only VNC
  authentication (type 2) and accepts the password from the file (DES
  challenge-response), without one it offers "none" (type 1).
* security models: qemu's uid read from /proc/PID/status: ``user`` runs as
  ``nobody``; ``pool`` boots the tiny real guest as a uid from the cluster's
  uid pool, whose disk belongs to that uid while it runs; the uid is
  released and the disk handed back after the stop.

Skipped, with the reason, without qemu (or the guest for the pool test).
"""

import os
import random
import shutil
import signal
import socket
import struct
import tempfile

from twisted.internet import defer, reactor
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial import unittest

from ganeti import errors
from ganeti import hypervisor as hv
from ganeti import pathutils
from ganeti.hypervisor import kvm, state
from tests.integration import guest as test_guest

BOOT_DEADLINE = 60
UUID = "8a1f0c2e-7b3d-4e5f-9a6b-1c2d3e4f5a6b"


def _qemu_or_skip():
    binary = test_guest.qemu_binary()
    if binary is None:
        raise unittest.SkipTest("qemu-system-x86_64 is not installed "
                                "(apt-get install qemu-system-x86)")
    return binary


async def _run(*argv):
    out, err, code = await getProcessOutputAndValue(
        argv[0], argv[1:], env={"PATH": kvm.CommandRunner.PATH}, path="/",
        reactor=reactor)
    return out.decode(), err.decode(), code


class NetnsRunner(kvm.CommandRunner):
    """Runs every command (qemu included) inside network namespace ``ns``."""

    def __init__(self, reactor, ns):
        super().__init__(reactor)
        self.ns = ns

    def run(self, argv):
        binary = argv[0] if os.path.isabs(argv[0]) else self.which(argv[0])
        return super().run([self.which("ip"), "netns", "exec", self.ns,
                            binary] + list(argv[1:]))


class _QemuTest(unittest.TestCase):

    timeout = 120

    def setUp(self):
        self.qemu = _qemu_or_skip()
        # short: UNIX socket paths must fit in 108 bytes
        self.root = tempfile.mkdtemp(prefix="gnt-kvmf-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.hyp = kvm.KvmHypervisor(self.root, reactor)
        self.addCleanup(self._kill_leftovers)
        self.addCleanup(lambda: self.hyp.close())
        self.disk = os.path.join(self.root, "disk0")
        with open(self.disk, "wb") as f:
            f.truncate(1024 * 1024)

    def _kill_leftovers(self):
        """Whatever a failed test left running dies here, by its pid."""
        for name in state.RuntimeDir(self.root, "kvm").names():
            pid = self.hyp._pid(name)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)

    def spec(self, hvparams, nics=(), network_port=None, memory=64):
        # no kernel: the firmware finds nothing to boot and waits, which is
        # all these tests need from the guest
        params = {"kvm_path": self.qemu, "kvm_flag": "disabled",
                  "kernel_path": "", "serial_console": False}
        params.update(hvparams)
        return hv.InstanceSpec(
            name="vm1", uuid=UUID, hvparams=params,
            beparams={"maxmem": memory, "minmem": memory, "vcpus": 1},
            disks=[hv.DiskSpec(self.disk)],
            nics=nics, network_port=network_port)

    def uids(self, pid):
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Uid:"):
                    return [int(x) for x in line.split()[1:]]

    async def pid(self):
        info = await self.hyp.get_instance_info("vm1")
        self.assertIsNotNone(info.pid)
        return info.pid


class RoutedNicInNamespaceTests(_QemuTest):

    def setUp(self):
        super().setUp()
        if shutil.which("ip", path=kvm.CommandRunner.PATH) is None:
            raise unittest.SkipTest("the ip command is not installed")
        self.ns = "gntkvm%d-%d" % (os.getpid(), random.randrange(10000))
        return defer.Deferred.fromCoroutine(self._make_ns())

    async def _make_ns(self):
        out, err, code = await _run("/usr/sbin/ip", "netns", "add", self.ns)
        if code != 0:
            raise unittest.SkipTest("cannot create a network namespace: %s"
                                    % err.strip())
        # runs after the leftovers are killed (LIFO): nothing holds it
        self.addCleanup(lambda: defer.Deferred.fromCoroutine(
            _run("/usr/sbin/ip", "netns", "del", self.ns)))
        self.hyp.runner = NetnsRunner(reactor, self.ns)

    async def in_ns(self, *argv):
        out, err, code = await _run("/usr/sbin/ip", "netns", "exec", self.ns,
                                    *argv)
        self.assertEqual(code, 0, err)
        return out

    def test_routed_nics(self):
        return defer.Deferred.fromCoroutine(self._routed())

    async def _routed(self):
        nics = [hv.NicSpec("aa:00:00:00:00:01", ip="192.0.2.10",
                           mode="routed"),
                hv.NicSpec("aa:00:00:00:00:02", ip="198.51.100.7",
                           mode="routed", link="100")]
        spec = self.spec({}, nics)
        tap0, tap1 = kvm.tap_name(spec, 0), kvm.tap_name(spec, 1)
        await self.hyp.start_instance(spec)
        main = await self.in_ns("ip", "-4", "route", "show", "table", "main")
        self.assertIn("192.0.2.10 dev %s proto static" % tap0, main)
        self.assertNotIn("198.51.100.7", main)
        table = await self.in_ns("ip", "-4", "route", "show", "table", "100")
        self.assertIn("198.51.100.7 dev %s proto static" % tap1, table)
        rules = await self.in_ns("ip", "-4", "rule", "show")
        self.assertIn("iif %s lookup 100" % tap1, rules)
        for tap in (tap0, tap1):
            for key in ("proxy_arp", "forwarding"):
                value = await self.in_ns(
                    "cat", "/proc/sys/net/ipv4/conf/%s/%s" % (tap, key))
                self.assertEqual(value.strip(), "1", (tap, key))
            link = await self.in_ns("ip", "-o", "link", "show", "dev", tap)
            self.assertNotIn("master", link)    # no bridge
            self.assertIn("UP", link)
        await self.hyp.stop_instance("vm1", force=True)
        self.assertNotIn("192.0.2.10",
                         await self.in_ns("ip", "-4", "route", "show"))
        self.assertEqual(
            (await self.in_ns("ip", "-4", "route", "show", "table", "100"))
            .strip(), "")
        self.assertNotIn(tap1, await self.in_ns("ip", "-4", "rule", "show"))
        links = await self.in_ns("ip", "-o", "link", "show")
        self.assertNotIn(tap0, links)
        self.assertEqual(await self.hyp.list_instances(), [])


def _random_vnc_endpoint():
    address = "127.%d.%d.%d" % (random.randrange(1, 255),
                                random.randrange(0, 255),
                                random.randrange(2, 255))
    for _ in range(50):
        port = random.randrange(5910, 6900)
        if kvm._port_free(address, port):
            return address, port
    raise unittest.SkipTest("no free VNC port on %s" % address)


def _vnc_response(password, challenge):
    """VNC authentication: DES of the challenge, key = the password (8
    bytes, zero padded) with the bits of each byte mirrored."""
    try:
        from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    except ImportError:
        from cryptography.hazmat.primitives.ciphers.algorithms import \
            TripleDES
    from cryptography.hazmat.primitives.ciphers import Cipher, modes
    key = bytes(int("{:08b}".format(b)[::-1], 2)
                for b in password.encode()[:8].ljust(8, b"\0"))
    enc = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()
    return enc.update(challenge) + enc.finalize()


def _recv(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError("VNC server closed the connection")
        data += chunk
    return data


def rfb_handshake(address, port, password=None):
    """The security types a VNC server offers; with ``password``, also the
    result of VNC authentication with it (True: accepted)."""
    with socket.create_connection((address, port), timeout=10) as sock:
        version = _recv(sock, 12)
        assert version.startswith(b"RFB "), version
        sock.sendall(b"RFB 003.008\n")
        count = _recv(sock, 1)[0]
        types = list(_recv(sock, count))
        if password is None:
            return types, None
        sock.sendall(b"\x02")
        challenge = _recv(sock, 16)
        sock.sendall(_vnc_response(password, challenge))
        (result,) = struct.unpack(">I", _recv(sock, 4))
        return types, result == 0


class VncPasswordTests(_QemuTest):

    def test_password_from_file(self):
        return defer.Deferred.fromCoroutine(self._password())

    async def _password(self):
        address, port = _random_vnc_endpoint()
        pwfile = os.path.join(self.root, "vnc-password")
        with open(pwfile, "w") as f:
            f.write("Pa55word\n")
        spec = self.spec({"vnc_bind_address": address,
                          "vnc_password_file": pwfile}, network_port=port)
        await self.hyp.start_instance(spec)
        types, ok = await reactor_call(rfb_handshake, address, port,
                                       "Pa55word")
        self.assertEqual(types, [2])        # VNC authentication only
        self.assertTrue(ok)
        types, ok = await reactor_call(rfb_handshake, address, port, "wrong")
        self.assertFalse(ok)
        await self.hyp.stop_instance("vm1", force=True)

        # without a password file: no authentication
        spec = self.spec({"vnc_bind_address": address}, network_port=port)
        await self.hyp.start_instance(spec)
        types, _ = await reactor_call(rfb_handshake, address, port)
        self.assertEqual(types, [1])
        await self.hyp.stop_instance("vm1", force=True)


def reactor_call(fn, *args):
    """``fn`` in a thread: the handshake blocks on its socket."""
    from twisted.internet import threads
    return threads.deferToThread(fn, *args)


class SecurityModelTests(_QemuTest):

    def test_user_nobody(self):
        return defer.Deferred.fromCoroutine(self._user())

    async def _user(self):
        import pwd
        nobody = pwd.getpwnam("nobody")
        await self.hyp.start_instance(self.spec(
            {"security_model": "user", "security_domain": "nobody"}))
        self.assertEqual(self.uids(await self.pid()), [nobody.pw_uid] * 4)
        await self.hyp.stop_instance("vm1", force=True)

    def test_pool_with_real_guest(self):
        return defer.Deferred.fromCoroutine(self._pool())

    async def _pool(self):
        _, guest = test_guest.guest_or_skip()
        paths = pathutils.Paths(self.root)
        os.makedirs(paths.data_dir, exist_ok=True)
        low = random.randrange(3000000, 4000000)
        with open(paths.ssconf_file("uid_pool"), "w") as f:
            f.write("%d-%d\n" % (low, low + 2))
        hvparams = guest.kvm_hvparams("idle")
        hvparams.update({"security_model": "pool", "serial_console": True})
        await self.hyp.start_instance(self.spec(hvparams, memory=256))
        pid = await self.pid()
        uid = state.RuntimeDir(self.root, "kvm").read("vm1").extra["uid"]
        self.assertIn(uid, range(low, low + 3))
        self.assertEqual(self.uids(pid), [uid] * 4)
        self.assertEqual(os.stat(self.disk).st_uid, uid)
        self.assertEqual(os.listdir(paths.uid_pool_lock_dir), [str(uid)])
        serial_log = self.hyp.files("vm1").serial_log

        def console():
            try:
                with open(serial_log, "rb") as f:
                    return f.read().decode("utf-8", "replace")
            except FileNotFoundError:
                return ""
        ok = await state.wait_until(
            reactor, lambda: "ganeti-test: idle" in console(), BOOT_DEADLINE,
            interval=0.25)
        self.assertTrue(ok, "the guest did not boot as uid %d; console:\n%s"
                        % (uid, console()))
        await self.hyp.stop_instance("vm1", force=True)
        self.assertFalse(state.process_alive(pid))
        self.assertEqual(os.listdir(paths.uid_pool_lock_dir), [])
        self.assertEqual(os.stat(self.disk).st_uid, os.getuid())

    def test_pool_without_free_uid(self):
        return defer.Deferred.fromCoroutine(self._no_uid())

    async def _no_uid(self):
        paths = pathutils.Paths(self.root)
        os.makedirs(paths.data_dir, exist_ok=True)
        # uid 0 is in use by this very test process
        with open(paths.ssconf_file("uid_pool"), "w") as f:
            f.write("%d\n" % os.getuid())
        try:
            await self.hyp.start_instance(self.spec({"security_model":
                                                     "pool"}))
        except errors.HypervisorError as err:
            self.assertIn("uid pool has no free uid", str(err))
        else:
            self.fail("started without a free uid")
        self.assertEqual(await self.hyp.list_instances(), [])
