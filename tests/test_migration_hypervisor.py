"""Migration in the hypervisor drivers.

* fake: two node roots, real detached fake guests; the instance's state
  (its record, its start time) is handed over and the source copy removed;
  a failed migration leaves the source running and the target empty;
* kvm, source side against a fake qemu (QMP server on the instance's
  socket): the QMP commands a live and a non-live migration send, the
  status mapping, finalizing on success and failure; the ``-incoming``
  option of the target's command line.

The real qemu-to-qemu migration is in test_migration_kvm.
"""

import json

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti import errors
from ganeti import hypervisor as hv
from ganeti.hypervisor import kvm, migration, state

from tests.test_hypervisor_fake import kill_leftovers, spec as fake_spec
from tests.test_hypervisor_kvm import (
    FakeQMPServer, FakeQemu, make_spec, option, short_root)


class FakeMigrationTests(unittest.TestCase):

    timeout = 60

    def setUp(self):
        self.roots = []
        self.hvs = []
        for _ in range(2):
            root = self.mktemp()
            self.hvs.append(hv.get_hypervisor("fake", root, reactor))
            rt = state.RuntimeDir(root, "fake")
            self.addCleanup(kill_leftovers, rt)
            self.roots.append(rt)
        self.src, self.dst = self.hvs

    @defer.inlineCallbacks
    def test_live_migration_hands_over(self):
        spec = fake_spec()
        yield self.src.start_instance(spec)
        before = yield self.src.get_instance_info(spec.name)
        started = self.roots[0].read(spec.name).started
        info = yield self.src.migration_info(spec.name)
        self.assertEqual(info["spec"]["name"], spec.name)
        json.dumps(info)                  # goes over the wire
        where = yield self.dst.accept_instance(
            hv.InstanceSpec.from_dict(info["spec"]), info, "127.0.0.2", None)
        self.assertEqual(where, {"address": "127.0.0.2", "port": 0})
        incoming = yield self.dst.get_instance_info(spec.name)
        self.assertEqual(incoming.state, hv.PAUSED)
        yield self.src.migrate_instance(spec.name, "127.0.0.2", 0, True)
        status = yield self.src.get_migration_status(spec.name)
        self.assertEqual(status.status, migration.COMPLETED)
        self.assertFalse(status.active)
        self.assertEqual(status.total_ram, 256 * 1024 * 1024)
        yield self.src.finalize_migration_src(spec.name, True, True)
        yield self.dst.finalize_migration_dst(spec.name, info, True)
        self.assertIsNone((yield self.src.get_instance_info(spec.name)))
        self.assertEqual((yield self.src.list_instances()), [])
        after = yield self.dst.get_instance_info(spec.name)
        self.assertEqual(after.state, hv.RUNNING)
        self.assertNotEqual(after.pid, before.pid)
        # the same guest: it keeps its start time
        self.assertEqual(self.roots[1].read(spec.name).started, started)
        self.assertGreaterEqual(after.uptime, before.uptime)

    @defer.inlineCallbacks
    def test_failed_migration_keeps_the_source(self):
        spec = fake_spec()
        yield self.src.start_instance(spec)
        info = yield self.src.migration_info(spec.name)
        yield self.dst.accept_instance(spec, info, "127.0.0.2")
        yield self.src.migrate_instance(spec.name, "127.0.0.2", 0, True)
        yield self.src.abort_migration(spec.name)
        status = yield self.src.get_migration_status(spec.name)
        self.assertEqual(status.status, migration.CANCELLED)
        self.assertTrue(status.failed)
        yield self.dst.finalize_migration_dst(spec.name, info, False)
        yield self.src.finalize_migration_src(spec.name, False, True)
        self.assertIsNone((yield self.dst.get_instance_info(spec.name)))
        info = yield self.src.get_instance_info(spec.name)
        self.assertEqual(info.state, hv.RUNNING)
        status = yield self.src.get_migration_status(spec.name)
        self.assertEqual(status.status, migration.NONE)

    @defer.inlineCallbacks
    def test_refusals(self):
        spec = fake_spec()
        yield self.assertFailure(self.src.migration_info(spec.name),
                                 errors.HypervisorError)
        yield self.src.start_instance(spec)
        yield self.dst.start_instance(spec)
        err = yield self.assertFailure(
            self.dst.accept_instance(spec, {}, "127.0.0.2"),
            errors.HypervisorError)
        self.assertIn("already running", str(err))


class MigratingQMPServer(FakeQMPServer):
    """Answers query-migrate like qemu during and after a migration."""

    def lineReceived(self, line):
        cmd = json.loads(line)
        fq = self.factory
        if cmd["execute"] == "query-migrate":
            fq.commands.append(("query-migrate", None))
            self.send({"return": fq.migrate_status.pop(0)
                       if len(fq.migrate_status) > 1
                       else fq.migrate_status[0], "id": cmd["id"]})
            return
        if cmd["execute"] == "stop":
            fq.runstate = "paused"
        if cmd["execute"] == "migrate" and fq.migrate_error:
            fq.commands.append(("migrate", cmd.get("arguments")))
            self.send({"error": {"class": "GenericError",
                                 "desc": fq.migrate_error},
                       "id": cmd["id"]})
            return
        FakeQMPServer.lineReceived(self, line)


class MigratingQemu(FakeQemu):
    protocol = MigratingQMPServer

    def __init__(self, *args):
        FakeQemu.__init__(self, *args)
        self.migrate_status = [{"status": "completed",
                                "ram": {"transferred": 10, "total": 10}}]
        self.migrate_error = None


class KvmSourceTests(unittest.TestCase):

    timeout = 30

    def setUp(self):
        self.root = short_root(self)
        self.hyp = kvm.KvmHypervisor(self.root, reactor)
        self.hyp.MONITOR_TIMEOUT = 1.0
        self.hyp.QUIT_WAIT = 2.0
        self.spec = make_spec(name="vm1", hvparams={
            "migration_bandwidth": 64, "migration_downtime": 50})
        self.qemu = MigratingQemu(self, self.root, self.hyp, self.spec)
        self.addCleanup(self.hyp.close)
        return defer.Deferred.fromCoroutine(self.qemu.started())

    def sent(self):
        return [c for c in self.qemu.commands if c[0] != "query-status"]

    @defer.inlineCallbacks
    def test_live(self):
        info = yield self.hyp.migration_info("vm1")
        self.assertEqual(info["spec"]["name"], "vm1")
        yield self.hyp.migrate_instance("vm1", "192.0.2.7", 8102, True)
        self.assertEqual(self.sent(), [
            ("qmp_capabilities", None),
            ("migrate-set-parameters", {"max-bandwidth": 64 * 1024 * 1024,
                                        "downtime-limit": 50}),
            ("migrate", {"uri": "tcp:192.0.2.7:8102"})])
        self.qemu.migrate_status = [
            {"status": "active", "ram": {"transferred": 5, "total": 10}},
            {"status": "completed", "ram": {"transferred": 10,
                                            "total": 10}}]
        status = yield self.hyp.get_migration_status("vm1")
        self.assertEqual((status.status, status.transferred_ram,
                          status.total_ram, status.active),
                         ("active", 5, 10, True))
        status = yield self.hyp.get_migration_status("vm1")
        self.assertEqual(status.status, "completed")
        # success: the source copy (qemu in postmigrate) goes away
        self.qemu.runstate = "postmigrate"
        yield self.hyp.finalize_migration_src("vm1", True, True)
        self.assertIn(("quit", None), self.qemu.commands)
        self.assertEqual((yield self.hyp.list_instances()), [])

    @defer.inlineCallbacks
    def test_non_live_failure_resumes_the_source(self):
        self.qemu.migrate_status = [{"status": "failed",
                                     "error-desc": "Connection refused"}]
        yield self.hyp.migrate_instance("vm1", "192.0.2.7", 8102, False)
        self.assertIn(("stop", None), self.qemu.commands)
        status = yield self.hyp.get_migration_status("vm1")
        self.assertEqual((status.status, status.error, status.failed),
                         ("failed", "Connection refused", True))
        yield self.hyp.finalize_migration_src("vm1", False, False)
        self.assertEqual(self.qemu.commands[-1], ("cont", None))
        info = yield self.hyp.get_instance_info("vm1")
        self.assertEqual(info.state, hv.RUNNING)

    @defer.inlineCallbacks
    def test_refused_migrate_command(self):
        self.qemu.migrate_error = "no such host"
        err = yield self.assertFailure(
            self.hyp.migrate_instance("vm1", "192.0.2.7", 8102, False),
            errors.HypervisorError)
        self.assertIn("no such host", str(err))
        # the guest was paused for the non-live copy: it runs again
        self.assertEqual(self.qemu.commands[-1], ("cont", None))
        yield self.hyp.abort_migration("vm1")
        self.assertIn(("migrate_cancel", None), self.qemu.commands)


class KvmTargetTests(unittest.TestCase):

    def test_incoming_option(self):
        cmd = kvm.build_command(make_spec(), "/usr/bin/qemu-system-x86_64",
                                kvm.KvmFiles("p", "q", "s", "l"),
                                incoming=kvm.incoming_uri("192.0.2.7", 8102))
        self.assertEqual(option(cmd, "-incoming"), ["tcp:192.0.2.7:8102"])
        self.assertEqual(kvm.incoming_uri("2001:db8::1", 8102),
                         "tcp:[2001:db8::1]:8102")
        cmd = kvm.build_command(make_spec(), "/usr/bin/qemu-system-x86_64",
                                kvm.KvmFiles("p", "q", "s", "l"))
        self.assertEqual(option(cmd, "-incoming"), [])

    @defer.inlineCallbacks
    def test_accept_refuses_a_running_instance(self):
        root = short_root(self)
        hyp = kvm.KvmHypervisor(root, reactor)
        hyp.MONITOR_TIMEOUT = 1.0
        spec = make_spec(name="vm1")
        qemu = FakeQemu(self, root, hyp, spec)
        self.addCleanup(hyp.close)
        yield defer.Deferred.fromCoroutine(qemu.started())
        err = yield self.assertFailure(
            hyp.accept_instance(spec, {}, "127.0.0.1"),
            errors.HypervisorError)
        self.assertIn("already running", str(err))
