"""Tests for the fake hypervisor: real detached processes, real reactor."""

import json
import os
import signal
import sys

from twisted.internet import defer, protocol, reactor
from twisted.trial import unittest
from zope.interface.verify import verifyObject

from ganeti import errors
from ganeti import hypervisor as hv
from ganeti.hypervisor import fake, state


def kill_leftovers(rt):
    """SIGKILL every instance process still recorded under ``rt``."""
    try:
        files = os.listdir(rt.pid_dir)
    except FileNotFoundError:
        return
    for f in files:
        pid = state.read_pid_file(os.path.join(rt.pid_dir, f))
        if state.process_alive(pid, marker=rt.base):
            os.kill(pid, signal.SIGKILL)


def spec(name="inst1.example.com", maxmem=256, vcpus=2, hvparams=None):
    return hv.InstanceSpec(
        name=name, uuid="0d5f1d6e-8a4c-4c8e-9a57-2d7c3f1b9e01",
        hvparams=hvparams if hvparams is not None else {"migration_mode": "live"},
        beparams={"maxmem": maxmem, "minmem": maxmem, "vcpus": vcpus},
        disks=[hv.DiskSpec("/dev/null", "rw", "raw")])


class FakeHypervisorTests(unittest.TestCase):

    timeout = 60

    def setUp(self):
        self.root = self.mktemp()
        os.makedirs(self.root)
        self.hv = hv.get_hypervisor("fake", self.root, reactor)
        self.rt = state.RuntimeDir(self.root, "fake")
        self.addCleanup(kill_leftovers, self.rt)

    async def wait_state(self, name, wanted, timeout=10, hyp=None):
        hyp = hyp or self.hv

        async def check():
            info = await hyp.get_instance_info(name)
            return info is not None and info.state == wanted
        await state.wait_until(reactor, check, timeout, interval=0.05)
        return await hyp.get_instance_info(name)

    def test_interface(self):
        self.assertTrue(verifyObject(hv.IHypervisor, self.hv))
        self.assertIsInstance(self.hv, fake.FakeHypervisor)
        self.assertRaises(errors.HypervisorError, hv.get_hypervisor,
                          "xen-pvm", self.root, reactor)

    @defer.inlineCallbacks
    def test_start_is_running_and_listed(self):
        yield self.hv.start_instance(spec())
        self.assertEqual((yield self.hv.list_instances()), ["inst1.example.com"])
        info = yield self.hv.get_instance_info("inst1.example.com")
        self.assertEqual(info.state, hv.RUNNING)
        self.assertTrue(info.live)
        self.assertEqual((info.memory, info.vcpus), (256, 2))
        self.assertTrue(state.process_alive(info.pid))
        self.assertGreaterEqual(info.uptime, 0)
        # the process is detached: its own session, not our child
        self.assertEqual(os.getsid(info.pid), info.pid)
        all_info = yield self.hv.get_all_instances_info()
        self.assertEqual([i.name for i in all_info], ["inst1.example.com"])
        self.assertIsNone((yield self.hv.get_instance_info("other")))
        node = yield self.hv.get_node_info()
        self.assertEqual(node.memory_hv, 256)
        self.assertGreater(node.memory_total, node.memory_free)
        self.assertGreaterEqual(node.cpu_total, 1)
        self.assertEqual((yield self.hv.verify()), [])

    @defer.inlineCallbacks
    def test_killed_process_is_crashed(self):
        yield self.hv.start_instance(spec())
        info = yield self.hv.get_instance_info("inst1.example.com")
        os.kill(info.pid, signal.SIGKILL)
        info = yield defer.Deferred.fromCoroutine(
            self.wait_state("inst1.example.com", hv.CRASHED))
        self.assertEqual(info.state, hv.CRASHED)
        self.assertEqual(info.reason, "process-exited")
        self.assertIsNone(info.pid)
        # kept for the watcher to see until cleaned up
        self.assertEqual((yield self.hv.list_instances()), ["inst1.example.com"])
        self.assertEqual((yield self.hv.get_node_info()).memory_hv, 0)
        yield self.hv.cleanup_instance("inst1.example.com")
        self.assertEqual((yield self.hv.list_instances()), [])
        self.assertEqual(os.listdir(self.rt.ctrl_dir), [])

    @defer.inlineCallbacks
    def test_guest_poweroff_is_user_shutdown_not_crash(self):
        yield self.hv.start_instance(spec())
        pid = (yield self.hv.get_instance_info("inst1.example.com")).pid
        os.kill(pid, signal.SIGUSR1)
        info = yield defer.Deferred.fromCoroutine(
            self.wait_state("inst1.example.com", hv.SHUTDOWN))
        self.assertEqual(info.state, hv.SHUTDOWN)
        self.assertEqual(info.reason, "guest-shutdown")
        self.assertFalse(info.live)
        # a kept domain: the process stays and holds its memory
        self.assertTrue(state.process_alive(pid))
        self.assertEqual((yield self.hv.get_node_info()).memory_hv, 256)
        # a driver created after a node daemon restart says the same
        other = hv.get_hypervisor("fake", self.root, reactor)
        self.assertEqual(
            (yield other.get_instance_info("inst1.example.com")).state,
            hv.SHUTDOWN)
        yield self.hv.cleanup_instance("inst1.example.com")
        self.assertFalse(state.process_alive(pid))
        self.assertEqual((yield self.hv.list_instances()), [])

    @defer.inlineCallbacks
    def test_start_after_user_shutdown_cleans_up_first(self):
        yield self.hv.start_instance(spec())
        old = (yield self.hv.get_instance_info("inst1.example.com")).pid
        os.kill(old, signal.SIGUSR1)
        yield defer.Deferred.fromCoroutine(
            self.wait_state("inst1.example.com", hv.SHUTDOWN))
        yield self.hv.start_instance(spec())
        info = yield self.hv.get_instance_info("inst1.example.com")
        self.assertEqual(info.state, hv.RUNNING)
        self.assertNotEqual(info.pid, old)
        self.assertFalse(state.process_alive(old))

    @defer.inlineCallbacks
    def test_start_twice_fails(self):
        yield self.hv.start_instance(spec())
        err = yield self.assertFailure(self.hv.start_instance(spec()),
                                       errors.HypervisorError)
        self.assertIn("already running", str(err))

    @defer.inlineCallbacks
    def test_stop_removes_everything(self):
        yield self.hv.start_instance(spec())
        pid = (yield self.hv.get_instance_info("inst1.example.com")).pid
        yield self.hv.stop_instance("inst1.example.com", timeout=10)
        self.assertFalse(state.process_alive(pid))
        self.assertEqual((yield self.hv.list_instances()), [])
        self.assertIsNone((yield self.hv.get_instance_info("inst1.example.com")))
        for d in (self.rt.conf_dir, self.rt.pid_dir, self.rt.ctrl_dir):
            self.assertEqual(os.listdir(d), [])
        # stopping a stopped instance is fine
        yield self.hv.stop_instance("inst1.example.com")
        yield self.hv.cleanup_instance("inst1.example.com")

    @defer.inlineCallbacks
    def test_force_stop(self):
        yield self.hv.start_instance(spec())
        pid = (yield self.hv.get_instance_info("inst1.example.com")).pid
        yield self.hv.stop_instance("inst1.example.com", force=True)
        self.assertFalse(state.process_alive(pid))
        self.assertEqual((yield self.hv.list_instances()), [])

    @defer.inlineCallbacks
    def test_new_driver_after_restart_sees_instances(self):
        yield self.hv.start_instance(spec("a"))
        yield self.hv.start_instance(spec("b"), startup_paused=True)
        pid_a = (yield self.hv.get_instance_info("a")).pid
        del self.hv  # the node daemon goes away; the instances stay
        other = hv.get_hypervisor("fake", self.root, reactor)
        self.assertEqual((yield other.list_instances()), ["a", "b"])
        infos = yield other.get_all_instances_info()
        self.assertEqual([(i.name, i.state) for i in infos],
                         [("a", hv.RUNNING), ("b", hv.PAUSED)])
        self.assertEqual(infos[0].pid, pid_a)
        yield other.stop_instance("a")
        yield other.stop_instance("b")
        self.assertEqual((yield other.list_instances()), [])

    @defer.inlineCallbacks
    def test_paused_resume_and_reboot(self):
        yield self.hv.start_instance(spec(), startup_paused=True)
        info = yield self.hv.get_instance_info("inst1.example.com")
        self.assertEqual(info.state, hv.PAUSED)
        self.assertTrue(info.live)
        yield self.assertFailure(self.hv.reboot_instance("inst1.example.com"),
                                 errors.HypervisorError)
        yield self.hv.resume_instance("inst1.example.com")
        self.assertEqual(
            (yield self.hv.get_instance_info("inst1.example.com")).state,
            hv.RUNNING)
        yield self.hv.reboot_instance("inst1.example.com")
        with open(self.rt.ctrl_path("inst1.example.com", "status")) as f:
            self.assertEqual(json.load(f)["boots"], 2)
        yield self.assertFailure(self.hv.reboot_instance("nosuch"),
                                 errors.HypervisorError)

    @defer.inlineCallbacks
    def test_bad_hvparams_are_rejected_clearly(self):
        err = yield self.assertFailure(
            self.hv.start_instance(spec(hvparams={"migration_mode": "teleport"})),
            errors.ParameterError)
        self.assertEqual(err.args[0], "migration_mode")
        self.assertIn("'live', 'non-live'", err.args[1])
        self.assertIn("teleport", err.args[1])
        err = yield self.assertFailure(
            self.hv.validate_parameters({"kernel_path": "/boot/x"}),
            errors.ParameterError)
        self.assertEqual(err.args[0], "kernel_path")
        self.assertIn("not known to the fake hypervisor", err.args[1])
        self.assertRaises(errors.ParameterError, hv.check_parameter_syntax,
                          "fake", {"migration_mode": 1})
        yield self.hv.validate_parameters({"migration_mode": "non-live"})
        self.assertEqual((yield self.hv.list_instances()), [])

    @defer.inlineCallbacks
    def test_bad_names_and_memory(self):
        yield self.assertFailure(self.hv.start_instance(spec("../evil")),
                                 errors.HypervisorError)
        err = yield self.assertFailure(
            self.hv.start_instance(spec(maxmem=1 << 40)), errors.HypervisorError)
        self.assertIn("not enough memory", str(err))
        self.assertEqual((yield self.hv.list_instances()), [])


class _Ended(protocol.ProcessProtocol):
    def __init__(self):
        self.ended = defer.Deferred()

    def processEnded(self, reason):
        self.ended.callback(None)


class StubbornGuestTests(unittest.TestCase):
    """A guest that ignores the host's stop request is killed after the
    timeout."""

    timeout = 30

    @defer.inlineCallbacks
    def test_soft_stop_times_out_then_kills(self):
        root = self.mktemp()
        hyp = hv.get_hypervisor("fake", root, reactor)
        rt = state.RuntimeDir(root, "fake")
        rt.write(state.InstanceRecord(spec=spec(), started=reactor.seconds()))
        status = rt.ctrl_path("inst1.example.com", "status")
        with open(status, "w") as f:
            json.dump({"state": "running"}, f)
        code = ("import signal, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('ready', flush=True)\n"
                "time.sleep(60)\n")
        proto = _Ended()
        ready = defer.Deferred()
        proto.outReceived = lambda data: ready.called or ready.callback(None)
        proc = reactor.spawnProcess(
            proto, sys.executable, [sys.executable, "-c", code, status],
            env=None)
        self.addCleanup(lambda: proto.ended)
        self.addCleanup(lambda: proc.pid and proc.signalProcess("KILL"))
        yield ready
        with open(rt.pid_path("inst1.example.com"), "w") as f:
            f.write("%d\n" % proc.pid)
        self.assertEqual(
            (yield hyp.get_instance_info("inst1.example.com")).state, hv.RUNNING)
        start = reactor.seconds()
        yield hyp.stop_instance("inst1.example.com", timeout=1)
        self.assertGreaterEqual(reactor.seconds() - start, 1)
        yield proto.ended
        self.assertEqual((yield hyp.list_instances()), [])
