"""Prometheus scrapes of the real daemons on a one-node virtual cluster:
RAPI's /metrics (its own and the master daemon's, over luxi), mond's
/metrics (the node's instances by state) and confd's --metrics-port (its
drop counters), each parsed as Prometheus would."""

import socket
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from ganeti import constants
from ganeti import metrics
from ganeti.confd import wire
from ganeti.server import confd as confd_service

from tests.integration.daemons import (RunningClusterTestCase, port_open,
                                       wait_for)

RAPI_PORT = 5081
CONFD_METRICS_PORT = 5089
INSTANCE = "metrics1.example.com"


class MetricsTests(RunningClusterTestCase):

    NODES = 1
    BASE_PREFIX = "gnt-metrics-"

    def setUp(self):
        RunningClusterTestCase.setUp(self)
        self.node = self.vc.master
        self.run_job({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        confd = self.vc.start("confd", self.vc.twistd_command(
            "ganeti-confd", self.node, "--metrics-port",
            str(CONFD_METRICS_PORT)))
        self.mond = self.vc.start("mond", self.vc.twistd_command(
            "ganeti-mond", self.node, "--refresh", "0.5"))
        self.rapi = self.vc.start("rapi", self.vc.twistd_command(
            "ganeti-rapi", self.node, "--port", str(RAPI_PORT), "--no-ssl"))
        for proc, port in ((confd, CONFD_METRICS_PORT),
                           (self.mond, constants.DEFAULT_MOND_PORT),
                           (self.rapi, RAPI_PORT)):
            wait_for("port %d" % port, lambda: self.alive(proc) and
                     port_open(self.node.ip, port))

    def scrape(self, port):
        """``{(name, sorted labels): value}`` of the daemon's /metrics."""
        url = "http://%s:%d/metrics" % (self.node.ip, port)
        with urllib.request.urlopen(url, timeout=30) as r:
            self.assertEqual(r.headers["Content-Type"], metrics.CONTENT_TYPE)
            text = r.read().decode("utf-8")
        found = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                found[(sample.name, tuple(sorted(sample.labels.items())))] \
                    = sample.value
        return found

    def test_rapi_mond_and_confd(self):
        before = self.scrape(RAPI_PORT)
        self.assertEqual(before[("ganeti_rapi_master_metrics_up", ())], 1)
        serial = before[("ganeti_config_serial", ())]
        # a job: the master's metrics move (RAPI's own counted the scrape)
        self.run_job({"OP_ID": "OP_INSTANCE_CREATE",
                      "instance_name": INSTANCE, "mode": "create",
                      "disk_template": "file", "disks": [{"size": 1024}],
                      "nics": [{}], "os_type": "busybox+default",
                      "pnode": self.node.name,
                      "beparams": {"memory": 128}, "name_check": False,
                      "ip_check": False})
        after = self.scrape(RAPI_PORT)
        self.assertGreater(after[("ganeti_config_serial", ())], serial)
        key = (("opcode", "OP_INSTANCE_CREATE"),)
        self.assertEqual(after[("ganeti_job_duration_seconds_count", key)],
                         1)
        self.assertGreater(after[("ganeti_job_duration_seconds_sum", key)],
                           0)
        self.assertGreaterEqual(
            after[("ganeti_config_write_duration_seconds_count", ())], 1)
        self.assertEqual(after[("ganeti_rapi_requests_total",
                                (("code", "200"), ("path", "/metrics")))],
                         1)

        # mond: the instance runs on this node (confd tells mond about it)
        def running():
            found = self.scrape(constants.DEFAULT_MOND_PORT)
            return found.get(("ganeti_node_instances", (
                ("hypervisor", "fake"), ("state", "running")))) == 1
        wait_for("instance running in mond's metrics", running)
        found = self.scrape(constants.DEFAULT_MOND_PORT)
        self.assertGreater(found[("ganeti_node_memory_total_bytes", ())], 0)
        self.assertIn(("ganeti_mond_collector_duration_seconds",
                       (("collector", "inst-status-fake"),)), found)

        # confd: a datagram signed with another key is dropped, counted
        drops = ("ganeti_confd_dropped_total", (("reason", "bad_hmac"),))
        self.assertEqual(self.scrape(CONFD_METRICS_PORT)[drops], 0)
        bad = wire.pack(b"not the cluster key\n", "1",
                        wire.encode_request(wire.REQ_PING, "r1", None))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(bad, (self.node.ip, confd_service.default_port()))
        wait_for("bad hmac counted", lambda: self.scrape(
            CONFD_METRICS_PORT)[drops] == 1)
