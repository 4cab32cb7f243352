"""The monitoring daemon: its collectors, running them as the cluster's
data_collectors setting says (on a Clock), its HTTP interface, and the
setting's way there (gnt-cluster modify -> config -> confd's answer)."""

import json
import os
import tempfile

from treq.testing import StubTreq
from twisted.internet import defer
from twisted.trial import unittest
from zope.interface.verify import verifyObject

from ganeti import errors
from ganeti import hypervisor as hv
from ganeti.confd import snapshot as snapshot_mod
from ganeti.mond import (base, cpuload, daemon as mdaemon, diskstats, drbd,
                         inststatus, lv, web)
from tests import ganeti_peer
from tests.fakes import ClockTestCase, FakeRunner
from tests.test_config import make_store
from tests.test_mcpu import ProcessorTestCase

STAT = """cpu  {u} 0 {s} 1000 0 0 0 0 0 0
cpu0 {u0} 0 {s0} 500 0 0 0 0 0 0
cpu1 {u1} 0 0 500 0 0 0 0 0 0
intr 12345
ctxt 999
"""

DISKSTATS = """\
   7       0 loop0 124637 0 12720872 8141 15264 0 827495 581 0 6516 8722 0 0 0 0 0 0
 259       0 nvme0n1 10 2 300 4 50 6 700 8 1 9 10
"""

# lvs --noheadings --units b --nosuffix --separator ';' -o <the columns>
LVS = ("  Xq3s-uuid;disk0;-wi-a-----;-1;-1;254;3;1073741824;1;;;"
       "vg-uuid;xenvg;linear;0;0;1073741824;;/dev/loop3:0-255;/dev/loop3(0)\n"
       "  Yq3s-uuid;meta;-wi-------;-1;-1;-1;-1;134217728;1;t1;;"
       "vg-uuid;xenvg;linear;0;0;134217728;;/dev/loop3:256-287;"
       "/dev/loop3(256)\n")


class CpuLoadTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        fd, self.path = tempfile.mkstemp(prefix="stat-")
        os.close(fd)
        self.addCleanup(os.unlink, self.path)
        self.collector = cpuload.CpuLoadCollector(self.clock, self.path,
                                                  ticks=100)

    def write(self, u, s, u0, s0, u1):
        with open(self.path, "w") as f:
            f.write(STAT.format(u=u, s=s, u0=u0, s0=s0, u1=u1))

    def test_the_average_over_the_window(self):
        verifyObject(base.ICollector, self.collector)
        self.write(100, 50, 80, 50, 20)
        first = self.successResultOf(self.collector.collect())
        self.assertIn("error", first)
        # 10 s later: cpu0 busy 500 more ticks (of 1000), cpu1 200 more
        self.clock.advance(10)
        self.write(800, 50, 580, 50, 220)
        data = self.successResultOf(self.collector.collect())
        self.assertEqual(data["cpu_number"], 2)
        self.assertEqual(data["cpus"], [0.5, 0.2])
        self.assertAlmostEqual(data["cpu_total"], 0.7)
        # samples older than the window no longer count
        self.clock.advance(cpuload.WINDOW)
        self.write(800, 50, 580, 50, 220)
        data = self.successResultOf(self.collector.collect())
        self.assertIn("not enough samples", data["error"])

    def test_busy_time_is_ganetis_sum(self):
        rows = cpuload.parse_stat("cpu 1 2 3 1000 5 6 7 8 9 10\n"
                                  "cpu0 1 2 3 1000 5 6 7 8 9 10\n")
        # everything but idle
        self.assertEqual(rows, [("cpu", 51), ("cpu0", 51)])
        self.assertRaises(ValueError, cpuload.parse_stat, "intr 1\n")


class DiskstatsTests(unittest.TestCase):

    def test_ganetis_fields(self):
        devices = diskstats.parse_diskstats(DISKSTATS)
        self.assertEqual(devices[1], {
            "major": 259, "minor": 0, "name": "nvme0n1", "readsNum": 10,
            "mergedReads": 2, "secRead": 300, "timeRead": 4, "writes": 50,
            "mergedWrites": 6, "secWritten": 700, "timeWrite": 8, "ios": 1,
            "timeIO": 9, "wIOmillis": 10})
        self.assertEqual(devices[0]["name"], "loop0")
        self.assertRaises(ValueError, diskstats.parse_diskstats, "1 2 sda 3")


class LvTests(unittest.TestCase):

    def test_volumes(self):
        runner = FakeRunner()
        runner.answer(["lvs"], stdout=LVS.encode())
        data = self.successResultOf(lv.LvCollector(runner).collect())
        self.assertEqual(runner.commands[0][:2], ["lvs", "--noheadings"])
        self.assertEqual(len(data), 2)
        self.assertEqual(data[0]["name"], "disk0")
        self.assertEqual(data[0]["size"], 1073741824)
        self.assertEqual(data[0]["kernel_minor"], 3)
        self.assertEqual(data[0]["vg_name"], "xenvg")
        self.assertEqual(data[0]["devices"], "/dev/loop3(0)")
        self.assertIsNone(data[0]["instance"])
        self.assertEqual(data[1]["tags"], "t1")
        self.assertEqual(sorted(data[1]), sorted(
            [k for _, k, _ in lv.COLUMNS] + ["instance"]))

    def test_without_lvm_the_list_is_empty(self):
        runner = FakeRunner()
        runner.answer(["lvs"], stderr=b"setsid: failed to execute lvs",
                      code=127)
        self.assertEqual(
            self.successResultOf(lv.LvCollector(runner).collect()), [])
        runner.answer(["lvs"], stderr=b"  Permission denied", code=5)
        data = self.successResultOf(lv.LvCollector(runner).collect())
        self.assertIn("Permission denied", data["error"])


class DrbdTests(unittest.TestCase):

    FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "drbd")

    def collector(self, *fixtures):
        fd, path = tempfile.mkstemp(prefix="proc-drbd-")
        os.write(fd, b"version: 9.2.0 (api:2/proto:86-121)\n")
        os.close(fd)
        self.addCleanup(os.unlink, path)
        resources = []
        for name in fixtures:
            with open(os.path.join(self.FIXTURES, name)) as f:
                resources.extend(json.load(f))
        runner = FakeRunner()
        runner.answer(["drbdsetup", "status", "--json"],
                      stdout=json.dumps(resources).encode())
        return drbd.DrbdCollector(runner, proc_path=path)

    def test_only_where_the_kernel_has_drbd(self):
        self.assertFalse(drbd.DrbdCollector(
            FakeRunner(), proc_path="/nonexistent/drbd").available())

    def test_healthy_and_broken_resources(self):
        c = self.collector("connected_uptodate.json")
        data = self.successResultOf(c.collect())
        self.assertEqual(data["version"],
                         "version: 9.2.0 (api:2/proto:86-121)")
        self.assertEqual(data["status"], {"code": 0, "message": ""})
        self.assertEqual(data["resources"][0]["status"], "ok")
        data = self.successResultOf(self.collector(
            "connected_uptodate.json", "local_diskless.json",
            "sync_target.json").collect())
        # missing local data needs a hand; a resync fixes itself
        self.assertEqual(data["status"]["code"], base.STATUS_BAD |
                         base.STATUS_TEMPORARY)
        self.assertIn("Diskless", data["status"]["message"])


class FakeDriver(object):

    def __init__(self, infos):
        self.infos = infos

    def observe_instances(self):
        return defer.succeed(self.infos)


class FakeNodeConfig(object):

    def __init__(self, instances=None, error=None):
        self.instances = instances
        self.error = error

    def node_instances(self):
        if self.error:
            return defer.fail(errors.ConfdClientError(self.error))
        return defer.succeed(self.instances)


def info(name, state, uptime=None):
    return hv.InstanceInfo(name=name, state=state, memory=128, vcpus=1,
                           pid=1 if state in hv.LIVE_STATES else None,
                           uptime=uptime)


class InstStatusTests(unittest.TestCase):

    def test_ganetis_report(self):
        instances = [
            {"name": "up-ok", "uuid": "u1", "admin_state": "up",
             "hypervisor": "kvm", "mtime": 12.5},
            {"name": "up-gone", "uuid": "u2", "admin_state": "up",
             "hypervisor": "kvm", "mtime": 1},
            {"name": "down-ok", "uuid": "u3", "admin_state": "down",
             "hypervisor": "kvm", "mtime": 1},
            {"name": "down-running", "uuid": "u4", "admin_state": "down",
             "hypervisor": "kvm", "mtime": 1},
            {"name": "other-hv", "uuid": "u5", "admin_state": "up",
             "hypervisor": "fake", "mtime": 1}]
        c = inststatus.InstStatusCollector("kvm", FakeDriver([
            info("up-ok", hv.RUNNING, uptime=90061),
            info("down-running", hv.RUNNING, uptime=5)]),
            FakeNodeConfig(instances))
        verifyObject(base.ICollector, c)
        self.assertEqual((c.name, c.category, c.kind),
                         ("inst-status-kvm", "instance", 1))
        data = self.successResultOf(c.collect())
        by_name = {i["name"]: i for i in data["instances"]}
        self.assertEqual(sorted(by_name), ["down-ok", "down-running",
                                           "up-gone", "up-ok"])
        self.assertEqual(by_name["up-ok"], {
            "name": "up-ok", "uuid": "u1", "adminState": "up",
            "actualState": "running", "uptime": "1 day, 1:01:01",
            "mtime": 12.5, "state_reason": [],
            "status": {"code": 0, "message": ""}})
        self.assertEqual(by_name["up-gone"]["actualState"], "unknown")
        self.assertEqual(by_name["up-gone"]["status"]["code"], 4)
        self.assertEqual(by_name["down-ok"]["actualState"], "shutdown")
        self.assertEqual(by_name["down-ok"]["status"]["code"], 0)
        self.assertEqual(by_name["down-running"]["status"]["message"],
                         "The instance is not stopped as it should be")
        self.assertEqual(data["status"]["code"], 4)

    def test_without_the_configuration_the_state_is_unknown(self):
        c = inststatus.InstStatusCollector(
            "fake", FakeDriver([]), FakeNodeConfig(error="no answer"))
        data = self.successResultOf(c.collect())
        self.assertEqual(data["instances"], [])
        self.assertEqual(data["status"]["code"], base.STATUS_UNKNOWN)
        self.assertIn("no answer", data["status"]["message"])


class Counting(base.CollectorBase):
    """A collector counting its collections; ``hold`` makes them wait."""

    def __init__(self, name, category=None, kind=base.KIND_PERFORMANCE,
                 sampled=True, available=True):
        self.name = name
        self.category = category
        self.kind = kind
        self.sampled = sampled
        self._available = available
        self.calls = 0
        self.settings = []
        self.held = None

    def available(self):
        return self._available

    def configure(self, settings):
        self.settings.append(settings)

    def collect(self):
        self.calls += 1
        if self.held is not None:
            d = defer.Deferred()
            self.held.append(d)
            return d
        return defer.succeed({"n": self.calls})


class FakeSettings(object):

    def __init__(self, answer=None):
        self.answer = answer
        self.asked = 0

    def data_collectors(self):
        self.asked += 1
        if self.answer is None:
            return defer.fail(errors.ConfdClientError("no confd"))
        return defer.succeed(self.answer)


def entry(active=True, seconds=5, **extra):
    e = {"active": active, "interval": int(seconds * 1000000)}
    e.update(extra)
    return e


class DaemonTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.clock.advance(1000)
        self.cpu = Counting("cpu-avg-load")
        self.inst = Counting("inst-status-fake", "instance", base.KIND_STATUS,
                             sampled=False)
        self.diag = Counting("diagnose", "node", base.KIND_STATUS)
        self.drbd = Counting("drbd", "storage", available=False)
        self.settings = FakeSettings()
        self.daemon = mdaemon.MonitoringDaemon(
            self.clock, [self.cpu, self.inst, self.diag, self.drbd],
            self.settings, refresh=15)
        self.addCleanup(self.daemon.stop)

    def tearDown(self):
        self.daemon.stop()
        ClockTestCase.tearDown(self)

    def listing(self):
        return [n for n, _, _ in self.daemon.listing()]

    def test_before_any_settings(self):
        self.daemon.start()
        self.assertEqual(self.settings.asked, 1)
        # defaults: all active but the diagnosis, which needs its command;
        # a collector that does not apply to the node is never there
        self.assertEqual(self.listing(), ["cpu-avg-load",
                                          "inst-status-fake"])
        self.assertEqual(self.cpu.calls, 1)
        self.clock.advance(5)
        self.assertEqual(self.cpu.calls, 2)
        self.assertEqual(self.diag.calls, 0)
        self.assertIsNone(self.daemon.find("node", "diagnose"))
        self.assertIsNone(self.daemon.find("storage", "drbd"))

    def test_settings_switch_collectors_and_intervals(self):
        self.settings.answer = {
            "cpu-avg-load": entry(seconds=2),
            "inst-status-fake": entry(active=False),
            "diagnose": entry(seconds=10, filename="health"),
            "drbd": entry()}
        self.daemon.start()
        self.assertEqual(self.listing(), ["cpu-avg-load", "diagnose"])
        self.assertEqual(self.daemon.listing()[1], ["diagnose", "node", 1])
        self.assertEqual(self.diag.settings[-1]["filename"], "health")
        self.assertEqual((self.cpu.calls, self.diag.calls), (1, 1))
        self.clock.advance(2)
        self.assertEqual((self.cpu.calls, self.diag.calls), (2, 1))
        for _ in range(4):
            self.clock.advance(2)
        self.assertEqual((self.cpu.calls, self.diag.calls), (6, 2))
        # an inactive collector has no report, even asked directly
        self.assertIsNone(self.daemon.find("instance", "inst-status-fake"))
        self.assertIsNone(self.successResultOf(defer.Deferred.fromCoroutine(
            self.daemon.report("inst-status-fake"))))
        # the next refresh switches the cpu off and the instances on
        self.settings.answer = dict(self.settings.answer, **{
            "cpu-avg-load": entry(active=False),
            "inst-status-fake": entry()})
        self.clock.advance(5)    # 15 s after the start
        self.assertEqual(self.listing(), ["diagnose", "inst-status-fake"])
        calls = self.cpu.calls
        self.clock.advance(30)
        self.assertEqual(self.cpu.calls, calls)

    def test_a_new_diagnose_command_runs_at_once(self):
        self.settings.answer = {"diagnose": entry(seconds=60, filename="a")}
        self.daemon.start()
        self.assertEqual(self.diag.calls, 1)
        self.settings.answer = {"diagnose": entry(seconds=60, filename="b")}
        self.clock.advance(15)
        self.assertEqual(self.diag.calls, 2)
        self.assertEqual(self.diag.settings[-1]["filename"], "b")
        # the same settings again change nothing
        self.clock.advance(15)
        self.assertEqual(self.diag.calls, 2)

    def test_unreachable_servers_keep_the_last_settings(self):
        self.settings.answer = {"cpu-avg-load": entry(active=False),
                                "diagnose": entry(filename="")}
        self.daemon.start()
        self.settings.answer = None
        self.clock.advance(15)
        self.assertEqual(self.settings.asked, 2)
        self.assertEqual(self.listing(), ["diagnose", "inst-status-fake"])

    def test_sampled_reports_are_the_last_sample(self):
        self.daemon.start()
        report = self.successResultOf(defer.Deferred.fromCoroutine(
            self.daemon.report("cpu-avg-load")))
        self.assertEqual(report.data, {"n": 1})
        self.assertEqual(report.timestamp, 1000 * 10 ** 9)
        self.assertEqual(self.cpu.calls, 1)
        self.clock.advance(5)
        report = self.successResultOf(defer.Deferred.fromCoroutine(
            self.daemon.report("cpu-avg-load")))
        self.assertEqual((report.data, report.timestamp),
                         ({"n": 2}, 1005 * 10 ** 9))

    def test_on_demand_collections_are_shared(self):
        self.daemon.start()
        self.inst.held = []
        d1 = defer.Deferred.fromCoroutine(
            self.daemon.report("inst-status-fake"))
        d2 = defer.Deferred.fromCoroutine(
            self.daemon.report("inst-status-fake"))
        self.assertEqual(self.inst.calls, 1)
        self.inst.held[0].callback({"instances": []})
        first = self.successResultOf(d1)
        self.assertEqual(first.data, {"instances": []})
        self.assertIs(self.successResultOf(d2), first)

    def test_a_failing_collector_reports_the_failure(self):
        self.daemon.start()
        self.inst.held = []
        d = defer.Deferred.fromCoroutine(
            self.daemon.report("inst-status-fake"))
        self.inst.held[0].errback(RuntimeError("boom"))
        report = self.successResultOf(d)
        self.assertEqual(report.data["status"]["code"], base.STATUS_UNKNOWN)
        self.assertIn("boom", report.data["status"]["message"])
        self.flushLoggedErrors(RuntimeError)


class WebTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.clock.advance(1000)
        self.cpu = Counting("cpu-avg-load")
        self.inst = Counting("inst-status-fake", "instance", base.KIND_STATUS,
                             sampled=False)
        self.daemon = mdaemon.MonitoringDaemon(self.clock, [self.cpu,
                                                            self.inst])
        self.daemon.start()
        self.stub = StubTreq(web.MondApp(self.daemon).resource())

    def tearDown(self):
        self.daemon.stop()
        ClockTestCase.tearDown(self)

    def get(self, path, method="GET"):
        response = self.successResultOf(
            self.stub.request(method, "http://mond" + path))
        body = self.successResultOf(response.content())
        return response.code, body

    def test_resources(self):
        self.assertEqual(self.get("/"), (200, b"[1]"))
        self.assertEqual(self.get("/1"), (200, b"null"))
        code, body = self.get("/1/list/collectors")
        self.assertEqual(json.loads(body), [["cpu-avg-load", "default", 0],
                                            ["inst-status-fake", "instance",
                                             1]])
        code, body = self.get("/1/report/all")
        reports = json.loads(body)
        self.assertEqual([r["name"] for r in reports],
                         ["cpu-avg-load", "inst-status-fake"])
        self.assertEqual(reports[0], {
            "name": "cpu-avg-load", "version": "B", "format_version": 1,
            "timestamp": 1000 * 10 ** 9, "category": None, "kind": 0,
            "data": {"n": 1}})
        code, body = self.get("/1/report/instance/inst-status-fake")
        self.assertEqual(code, 200)
        self.assertEqual(json.loads(body)["category"], "instance")
        code, body = self.get("/1/report/default/cpu-avg-load")
        self.assertEqual(json.loads(body)["data"], {"n": 1})

    def test_not_found_as_ganeti(self):
        for path in ("/1/report/storage/cpu-avg-load",
                     "/1/report/default/nope",
                     "/1/report/instance/inst-status-kvm"):
            self.assertEqual(self.get(path), (404, web.NO_REPORT), path)
        for path in ("/2", "/1/report", "/1/list"):
            self.assertEqual(self.get(path), (404, web.NOT_FOUND), path)
        self.assertEqual(self.get("/1/report/all", "POST")[0], 405)

    def test_inactive_collectors_are_gone(self):
        self.daemon.apply({"inst-status-fake": entry(active=False)})
        self.assertEqual(self.get("/1/report/instance/inst-status-fake"),
                         (404, web.NO_REPORT))
        code, body = self.get("/1/report/all")
        self.assertEqual([r["name"] for r in json.loads(body)],
                         ["cpu-avg-load"])


class SettingTests(ProcessorTestCase):
    """gnt-cluster modify's collector settings, and what confd says."""

    def modify(self, **kw):
        op = {"OP_ID": "OP_CLUSTER_SET_PARAMS"}
        op.update(kw)
        return self.run_op(op)

    def answer(self):
        return snapshot_mod.ConfigSnapshot(self.cfg).data_collectors

    def test_the_diagnose_command_reaches_confds_answer(self):
        self.assertEqual(self.answer()["diagnose"],
                         {"active": True, "interval": 5000000,
                          "filename": ""})
        self.result(self.modify(diagnose_data_collector_filename="health",
                                data_collector_interval={"diagnose":
                                                         30000000}))
        self.assertEqual(self.answer()["diagnose"],
                         {"active": True, "interval": 30000000,
                          "filename": "health"})
        info = self.result(self.run_op({"OP_ID": "OP_CLUSTER_QUERY"}))
        self.assertEqual(info["diagnose_data_collector_filename"], "health")
        self.result(self.modify(enabled_data_collectors={"diagnose": False}))
        self.assertEqual(self.answer()["diagnose"]["filename"], "health")
        self.assertFalse(self.answer()["diagnose"]["active"])
        self.result(self.modify(diagnose_data_collector_filename=""))
        self.assertEqual(self.answer()["diagnose"]["filename"], "")

    def test_hypervisor_collectors_follow_the_enabled_hypervisors(self):
        answer = self.answer()
        enabled = set(self.cfg.cluster.enabled_hypervisors)
        for name in ("kvm", "fake"):
            self.assertEqual(answer["inst-status-" + name]["active"],
                             name in enabled)

    def test_bad_settings_change_nothing(self):
        before = dict(self.cfg.cluster.data_collectors or {})
        for kw, message in [
                ({"diagnose_data_collector_filename": "../bin/sh"},
                 "diagnose_data_collector_filename: command name"),
                ({"diagnose_data_collector_filename": "a b"},
                 "diagnose_data_collector_filename"),
                ({"enabled_data_collectors": {"cpu-load": True}},
                 "enabled_data_collectors: unknown data collector(s)"
                 " cpu-load"),
                ({"data_collector_interval": {"nope": 5}},
                 "data_collector_interval: unknown")]:
            err = self.failure(self.modify(**kw), errors.OpPrereqError)
            self.assertIn(message, str(err))
        self.assertEqual(self.cfg.cluster.data_collectors or {}, before)


class GanetiCompatibilityTests(unittest.TestCase):
    """The diagnose command's place in config.data (a key of the diagnose
    collector's dict) does not stop Ganeti 3.0 from loading the file."""

    _LOAD = r"""
import json, sys
from ganeti import objects
cd = objects.ConfigData.FromDict(json.load(open(sys.argv[1])))
cd.UpgradeConfig()
print(json.dumps(cd.cluster.data_collectors))
"""

    def setUp(self):
        ganeti_peer.skip_unless_available()

    def test_ganeti_loads_our_setting(self):
        store = make_store(self)
        store.set_cluster_params(data_collectors={
            "diagnose": {"active": True, "interval": 5000000,
                         "filename": "health"},
            "cpu-avg-load": {"active": False}})
        d = ganeti_peer.run_python(self._LOAD, [store.path])

        def check(result):
            out, err, code = result
            self.assertEqual(code, 0, err)
            loaded = json.loads(out)
            self.assertEqual(loaded["diagnose"]["filename"], "health")
            self.assertIs(loaded["cpu-avg-load"]["active"], False)
        return d.addCallback(check)
