"""The kvm driver against real qemu running a tiny real guest (TCG).

Three guests, one at a time: one that powers itself off (a user shutdown),
one that stays up, is reset in place and then has its qemu killed (a crash),
and one stopped softly through the ACPI power button.  Skipped with the reason when
qemu or the guest (tests/guest.py) is not available.
"""

import os
import shutil
import signal
import tempfile

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti import hypervisor as hv
from ganeti.hypervisor import kvm, state
from tests.integration import guest as test_guest

# Boot takes 2-6 s of TCG; leave room for a busy machine.
BOOT_DEADLINE = 60


class RealGuestTests(unittest.TestCase):

    timeout = 180

    def setUp(self):
        self.qemu, self.guest = test_guest.guest_or_skip()
        # short: UNIX socket paths must fit in 108 bytes
        self.root = tempfile.mkdtemp(prefix="gnt-guest-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.hyp = kvm.KvmHypervisor(self.root, reactor)
        self.addCleanup(self._kill_leftovers)
        self.addCleanup(lambda: self.hyp.close())

    def _kill_leftovers(self):
        """Whatever a failed test left running dies here."""
        rt = state.RuntimeDir(self.root, "kvm")
        for name in rt.names():
            pid = self.hyp._pid(name)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)

    def spec(self, mode, name="guest1"):
        return hv.InstanceSpec(
            name=name, uuid="3e0b9c0a-5d7e-4b8f-a1c2-0d9e8f7a6b5c",
            hvparams={"kvm_path": self.qemu, "kvm_flag": "disabled",
                      "kernel_path": self.guest.kernel,
                      "initrd_path": self.guest.initrd, "root_path": "",
                      "kernel_args": "quiet ganeti_test=%s" % mode,
                      "serial_console": True, "serial_speed": 115200},
            beparams={"maxmem": 256, "minmem": 256, "vcpus": 1})

    def console(self, name="guest1"):
        try:
            with open(self.hyp.files(name).serial_log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    async def wait_for(self, what, check, deadline=BOOT_DEADLINE):
        ok = await state.wait_until(reactor, check, deadline, interval=0.25)
        if not ok:
            self.fail("%s did not happen within %ss; console:\n%s" %
                      (what, deadline, self.console()))
        return ok

    async def state_is(self, wanted, hyp=None):
        info = await (hyp or self.hyp).get_instance_info("guest1")
        return info is not None and info.state == wanted

    def run_async(self, coro):
        return defer.Deferred.fromCoroutine(coro)

    def test_guest_poweroff_is_user_shutdown(self):
        return self.run_async(self._poweroff())

    async def _poweroff(self):
        await self.hyp.start_instance(self.spec("poweroff"))
        self.assertEqual(await self.hyp.list_instances(), ["guest1"])
        await self.wait_for("guest power-off",
                            lambda: self.state_is(hv.SHUTDOWN))
        info = await self.hyp.get_instance_info("guest1")
        self.assertEqual((info.state, info.reason),
                         (hv.SHUTDOWN, "guest-shutdown"))
        self.assertFalse(info.live)
        self.assertIn("ganeti-test: booted, mode=poweroff", self.console())
        # a kept domain: qemu is still there, holding its memory
        self.assertIsNotNone(info.pid)
        self.assertEqual((await self.hyp.get_node_info()).memory_hv, 256)
        record = state.RuntimeDir(self.root, "kvm").read("guest1")
        self.assertEqual(record.shutdown["guest"], True)
        # the node daemon restarts: a new driver still sees a user shutdown
        await self.hyp.close()
        self.hyp = kvm.KvmHypervisor(self.root, reactor)
        info = await self.hyp.get_instance_info("guest1")
        self.assertEqual(info.state, hv.SHUTDOWN)
        pid = info.pid
        await self.hyp.cleanup_instance("guest1")
        self.assertFalse(state.process_alive(pid))
        self.assertEqual(await self.hyp.list_instances(), [])
        rt = state.RuntimeDir(self.root, "kvm")
        for d in (rt.conf_dir, rt.pid_dir, rt.ctrl_dir):
            self.assertEqual(os.listdir(d), [])

    def test_running_guest_then_qemu_killed_is_crashed(self):
        return self.run_async(self._crash())

    async def _crash(self):
        await self.hyp.start_instance(self.spec("idle"))
        await self.wait_for("boot", lambda: "ganeti-test: idle" in self.console())
        info = await self.hyp.get_instance_info("guest1")
        self.assertEqual((info.state, info.memory, info.vcpus),
                         (hv.RUNNING, 256, 1))
        self.assertTrue(info.live)
        # a new driver (node daemon restart) sees it running
        await self.hyp.close()
        self.hyp = kvm.KvmHypervisor(self.root, reactor)
        self.assertEqual(
            [(i.name, i.state) for i in await self.hyp.get_all_instances_info()],
            [("guest1", hv.RUNNING)])
        await self.hyp.reboot_instance("guest1")
        await self.wait_for("reboot", lambda: self.console().count(
            "ganeti-test: idle") >= 2)
        self.assertTrue(await self.state_is(hv.RUNNING))
        os.kill(info.pid, signal.SIGKILL)
        await self.wait_for("crash detection",
                            lambda: self.state_is(hv.CRASHED), 10)
        info = await self.hyp.get_instance_info("guest1")
        self.assertEqual((info.reason, info.pid), ("process-exited", None))
        self.assertEqual(await self.hyp.list_instances(), ["guest1"])
        await self.hyp.cleanup_instance("guest1")
        self.assertEqual(await self.hyp.list_instances(), [])
        self.assertEqual(os.listdir(state.RuntimeDir(self.root, "kvm").ctrl_dir),
                         [])

    def test_soft_stop_powers_guest_off(self):
        return self.run_async(self._stop())

    async def _stop(self):
        await self.hyp.start_instance(self.spec("idle"))
        await self.wait_for("boot", lambda: "ganeti-test: idle" in self.console())
        self.assertIn("ganeti-test: power button armed=yes", self.console())
        pid = (await self.hyp.get_instance_info("guest1")).pid
        start = reactor.seconds()
        await self.hyp.stop_instance("guest1", timeout=60)
        # the guest obeyed the power button: no need to wait the timeout
        self.assertLess(reactor.seconds() - start, 30, self.console())
        self.assertFalse(state.process_alive(pid))
        self.assertEqual(await self.hyp.list_instances(), [])
        self.assertIsNone(await self.hyp.get_instance_info("guest1"))
