"""GET /metrics on the monitoring daemon (StubTreq, a fake clock, fake
hypervisor driver and recorded vgs output): instance states, memory, volume
groups and the collectors' durations, in Prometheus' text format."""

from prometheus_client.parser import text_string_to_metric_families
from treq.testing import StubTreq
from twisted.internet import defer

from ganeti import hypervisor as hv
from ganeti import metrics
from ganeti.mond import daemon as mdaemon
from ganeti.mond import inststatus
from ganeti.mond import metrics as mmetrics
from ganeti.mond import web

from tests.fakes import ClockTestCase, FakeRunner
from tests.test_mond import Counting, FakeNodeConfig, info

# vgs --noheadings --units b --nosuffix --separator ';' -o vg_name,...
VGS = b"  xenvg;10737418240;4294967296\n  other;1073741824;0\n"


class MemoryDriver(object):
    """A hypervisor driver with instances and the node's memory."""

    def __init__(self, infos):
        self.infos = infos

    def observe_instances(self):
        return defer.succeed(list(self.infos))

    def get_node_info(self):
        return defer.succeed(hv.NodeInfo(
            memory_total=4096, memory_free=1024, memory_dom0=512,
            memory_hv=2560, cpu_total=2, cpu_nodes=1, cpu_sockets=1,
            hv_version=(1,)))


class MondMetricsTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.clock.advance(1000)
        self.driver = MemoryDriver([info("web", hv.RUNNING, uptime=5)])
        self.node_config = FakeNodeConfig([
            {"name": "web", "uuid": "u1", "admin_state": "up",
             "hypervisor": "fake", "mtime": 1},
            {"name": "db", "uuid": "u2", "admin_state": "down",
             "hypervisor": "fake", "mtime": 1}])
        self.inst = inststatus.InstStatusCollector("fake", self.driver,
                                                   self.node_config)
        self.cpu = Counting("cpu-avg-load")
        self.cpu.held = []
        self.daemon = mdaemon.MonitoringDaemon(self.clock,
                                               [self.cpu, self.inst])
        self.daemon.start()
        self.runner = FakeRunner()
        self.runner.answer(["vgs"], stdout=VGS)
        self.metrics = mmetrics.MondMetrics(self.daemon, self.runner)
        self.stub = StubTreq(web.MondApp(self.daemon,
                                         self.metrics).resource())

    def tearDown(self):
        self.daemon.stop()
        ClockTestCase.tearDown(self)

    def scrape(self):
        response = self.successResultOf(
            self.stub.get("http://mond/metrics"))
        self.assertEqual(response.code, 200)
        self.assertEqual(response.headers.getRawHeaders(b"content-type"),
                         [metrics.CONTENT_TYPE.encode("ascii")])
        body = self.successResultOf(response.content()).decode("utf-8")
        found = {}
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                found[(sample.name, tuple(sorted(sample.labels.items())))] \
                    = sample.value
        return found

    def instances(self, found, state):
        return found[("ganeti_node_instances",
                      (("hypervisor", "fake"), ("state", state)))]

    def test_instance_states_follow_the_node(self):
        found = self.scrape()
        self.assertEqual(self.instances(found, "running"), 1)
        self.assertEqual(self.instances(found, "shutdown"), 1)
        self.assertEqual(self.instances(found, "crashed"), 0)
        # the instance crashes: the next scrape says so
        self.driver.infos = [info("web", hv.CRASHED)]
        found = self.scrape()
        self.assertEqual(self.instances(found, "running"), 0)
        self.assertEqual(self.instances(found, "crashed"), 1)

    def test_memory_and_volume_groups(self):
        found = self.scrape()
        self.assertEqual(found[("ganeti_node_memory_total_bytes", ())],
                         4096 * 1024 * 1024)
        self.assertEqual(found[("ganeti_node_memory_free_bytes", ())],
                         1024 * 1024 * 1024)
        self.assertEqual(found[("ganeti_node_disk_total_bytes",
                                (("vg", "xenvg"),))], 10737418240)
        self.assertEqual(found[("ganeti_node_disk_free_bytes",
                                (("vg", "xenvg"),))], 4294967296)
        self.assertEqual(found[("ganeti_node_disk_free_bytes",
                                (("vg", "other"),))], 0)
        self.assertEqual(self.runner.commands[-1], mmetrics.VGS_ARGV)

    def test_without_lvm_there_are_no_volume_groups(self):
        self.runner.answer(["vgs"], stderr=b"vgs: not found", code=127)
        found = self.scrape()
        self.assertFalse([k for k in found
                          if k[0].startswith("ganeti_node_disk")])
        self.assertIn(("ganeti_node_memory_total_bytes", ()), found)

    def test_collector_durations(self):
        # the sampled cpu collector started at 1000 and takes 2.5 s
        self.clock.advance(2.5)
        self.cpu.held.pop(0).callback({"n": 1})
        found = self.scrape()
        self.assertEqual(found[("ganeti_mond_collector_duration_seconds",
                                (("collector", "cpu-avg-load"),))], 2.5)
        # the instance collector ran for the scrape, at once
        self.assertEqual(found[("ganeti_mond_collector_duration_seconds",
                                (("collector", "inst-status-fake"),))], 0)
        self.cpu.held = None

    def test_bad_vgs_output_leaves_the_disk_out(self):
        self.runner.answer(["vgs"], stdout=b"  xenvg;1\n")
        found = self.scrape()
        self.assertNotIn(("ganeti_node_disk_total_bytes",
                          (("vg", "xenvg"),)), found)
        self.assertIn(("ganeti_node_instances",
                       (("hypervisor", "fake"), ("state", "running"))), found)

    def test_parse_vgs(self):
        self.assertEqual(mmetrics.parse_vgs(VGS.decode()), [
            ("xenvg", 10737418240, 4294967296), ("other", 1073741824, 0)])
        self.assertRaises(ValueError, mmetrics.parse_vgs, "a;b\n")
