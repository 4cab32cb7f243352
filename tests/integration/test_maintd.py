"""ganeti-maintd as a real process on a 2-node virtual cluster: it asks
the master candidates' confd whether its node is the master, exits 11 on
another node, and serves its status on the master."""

import json
import os
import urllib.request

from tests.integration.daemons import RunningClusterTestCase, port_open, \
    wait_for


class MaintdTests(RunningClusterTestCase):

    NODES = 2
    BASE_PREFIX = "gnt-md-"

    def setUp(self):
        RunningClusterTestCase.setUp(self)
        # ssconf and config.data on every node (both are candidates)
        self.run_job({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        # confd on every node: the master candidates vote
        for node in self.vc.nodes:
            self.vc.start("confd-%s" % node.name, self.vc.twistd_command(
                "ganeti-confd", node))
        for node in self.vc.nodes:
            wait_for("ssconf on %s" % node.name,
                     lambda: os.path.exists(node.paths.ssconf_file(
                         "master_candidates_ips")), 30)

    def maintd(self, node, *args):
        return self.vc.start("maintd-%s" % node.name, self.vc.twistd_command(
            "ganeti-maintd", node, "--interval", "1", *args))

    def get(self, node, path):
        with urllib.request.urlopen("http://%s:1816%s" % (node.ip, path),
                                    timeout=10) as r:
            return json.loads(r.read().decode("utf-8"))

    def test_exits_11_on_a_node_that_is_not_the_master(self):
        other = self.vc.nodes[1]
        proc = self.maintd(other)
        self.assertEqual(proc.wait(60), 11)
        log = open(os.path.join(other.paths.log_dir,
                                "ganeti-maintd.log")).read()
        self.assertIn("Not the master", log)
        self.assertFalse(port_open(other.ip, 1816))

    def test_serves_its_status_on_the_master(self):
        master = self.vc.master
        proc = self.maintd(master)
        wait_for("maintd's status page", lambda: self.alive(proc) and
                 port_open(master.ip, 1816))
        self.assertEqual(self.get(master, "/"), [1])
        self.assertEqual(self.get(master, "/1/status"), [])
        counters = self.get(master, "/1/counters")
        self.assertEqual(counters["rounds"], 0)
        with self.assertRaises(urllib.error.HTTPError) as ctx:
            self.get(master, "/1/nothing")
        self.assertEqual(ctx.exception.code, 404)
