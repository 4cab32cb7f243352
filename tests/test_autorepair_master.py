"""Auto-repair passes against a real master (in this process): the tags
and the repair jobs go through luxi, the job queue and the logical
units, and the configuration shows the result."""

import io
import time

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from ganeti import objects
from ganeti.cli import base, gnt_instance
from ganeti.watcher.autorepair import engine, harep, runner, tags as T

from tests.inprocess import start_master
from tests.test_config import enable_templates
from tests.test_forthcoming_moves import PerNodeRpc

P = T.PREFIX
NODES = ["node%d.example.com" % i for i in range(1, 4)]
SFD = "/srv/ganeti/shared-file-storage"
SHARED_DISK = SFD + "/light/disk0"


def prepare(store):
    enable_templates(store, ["plain", "sharedfile", "drbd", "file"],
                     volume_group_name="xenvg", shared_file_storage_dir=SFD)
    for i, name in enumerate(NODES[1:], 2):
        store.add_node(objects.Node(name=name, primary_ip="127.0.0.%d" % i))
    n = {name: store.get_node(name).uuid for name in NODES}
    # a stopped instance on shared storage on node2, allowed to fail over
    store.add_instance(objects.Instance(
        name="light", primary_node=n[NODES[1]], hypervisor="fake",
        os="busybox+default", admin_state="down",
        beparams={"maxmem": 128, "minmem": 128, "vcpus": 1},
        tags=[P + "failover"]),
        [objects.Disk(dev_type="sharedfile", size=1024, iv_name="disk/0",
                      logical_id=["loop", SHARED_DISK])])
    # a plain instance on node3, allowed only to migrate
    store.add_instance(objects.Instance(
        name="heavy", primary_node=n[NODES[2]], hypervisor="fake",
        os="busybox+default", admin_state="down",
        beparams={"maxmem": 128, "minmem": 128, "vcpus": 1},
        tags=[P + "migrate"]),
        [objects.Disk(dev_type="plain", size=1024, iv_name="disk/0",
                      logical_id=["xenvg", "heavy.disk0"])])


class MasterTests(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        self.master, self.client = yield start_master(self, "arep",
                                                      prepare=prepare)
        rpc = self.master.ctx.rpc = PerNodeRpc()
        for node in NODES:
            rpc.files.setdefault(node, set()).add(SHARED_DISK)

    def cfg(self):
        return self.master.cfg

    def tags(self, name):
        return sorted(self.cfg().get_instance(name).tags)

    @defer.inlineCallbacks
    def run_pass(self):
        ar = runner.AutoRepair(self.client, reactor, poll=0.05)
        decisions = yield defer.Deferred.fromCoroutine(ar.run_once())
        return {d.instance: d for d in decisions}

    @defer.inlineCallbacks
    def info(self, name):
        jid = yield self.client.call("SubmitJob", [{
            "OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": [name],
            "static": True}])
        yield self.settle()
        [[result]] = yield self.client.call("QueryJobs", [jid], ["opresult"])
        lines = base.format_info(gnt_instance.instance_info_items(
            result[0][name]))
        return "\n".join(lines)

    @defer.inlineCallbacks
    def settle(self):
        # until the queue has nothing unfinished
        for _ in range(200):
            rows = yield self.client.call("QueryJobs", None, ["status"])
            if all(r[0] in ("success", "error", "canceled") for r in rows):
                return
            yield task.deferLater(reactor, 0.05, lambda: None)
        self.fail("jobs did not finish")

    @defer.inlineCallbacks
    def test_offline_and_drained_nodes_are_repaired_as_allowed(self):
        yield self.client.call("SubmitJob", [{
            "OP_ID": "OP_NODE_SET_PARAMS", "node_name": NODES[1],
            "drained": True}, ])
        yield self.settle()
        d = yield self.run_pass()
        self.assertEqual(d["light"].state, engine.PENDING)
        self.assertEqual(d["heavy"].state, engine.HEALTHY)
        yield self.settle()
        light = self.cfg().get_instance("light")
        self.assertNotEqual(self.cfg().get_node(light.primary_node).name,
                            NODES[1])
        [pending] = [t for t in self.tags("light") if ":pending:" in t]
        # what it thinks shows in queries and in gnt-instance info
        jid = int(pending.split(":")[-1])
        answer = yield self.client.call(
            "Query", "instance", ["name", "autorepair.state"], None)
        states = {row[0][1]: row[1][1] for row in answer["data"]}
        self.assertEqual(states, {"light": "pending failover (jobs %d)" % jid,
                                  "heavy": "healthy"})
        info = yield self.info("light")
        self.assertIn("Auto-repair:", info)
        self.assertIn("state: pending", info)
        self.assertIn("repairs allowed: up to failover (instance tag)", info)
        self.assertIn("pending repair: failover", info)
        d = yield self.run_pass()
        self.assertEqual(d["light"].state, engine.HEALTHY)
        [result] = [t for t in self.tags("light") if ":result:" in t]
        self.assertIn(":success:", result)
        self.assertEqual(result.split(":")[-1], pending.split(":")[-1])
        self.assertNotIn(pending, self.tags("light"))
        # a plain instance whose node is offline needs a reinstall: only
        # migrate is allowed, so it is recorded as enoperm, once
        yield self.client.call("SubmitJob", [{
            "OP_ID": "OP_NODE_SET_PARAMS", "node_name": NODES[2],
            "offline": True, "master_candidate": False}])
        yield self.settle()
        d = yield self.run_pass()
        self.assertEqual(d["heavy"].state, engine.NEEDS_REPAIR)
        yield self.run_pass()
        results = [t for t in self.tags("heavy") if ":result:" in t]
        self.assertEqual(len(results), 1)
        self.assertIn(":migrate:", results[0])
        self.assertIn(":enoperm:", results[0])
        info = yield self.info("heavy")
        self.assertIn("state: needs-repair", info)
        self.assertIn("needs: reinstall (primary node %s is offline"
                      % NODES[2], info)
        self.assertIn("last result: enoperm of migrate", info)
        self.assertEqual(self.cfg().verify(), [])

    @defer.inlineCallbacks
    def test_harep_dry_run_reports_and_changes_nothing(self):
        yield self.client.call("SubmitJob", [{
            "OP_ID": "OP_NODE_SET_PARAMS", "node_name": NODES[1],
            "drained": True}])
        yield self.settle()
        old = time.time() - 5
        yield self.client.call("SubmitJob", [{
            "OP_ID": "OP_TAGS_SET", "kind": "cluster",
            "tags": [P + "suspend:%d" % old]}])
        yield self.settle()
        out = io.StringIO()
        opts = harep.build_parser().parse_args(
            ["-L", self.master.config.paths.master_socket, "--dry-run"])
        yield defer.Deferred.fromCoroutine(harep._run(reactor, opts, out))
        text = out.getvalue()
        self.assertIn("light: pending: repair", text)
        self.assertIn("would submit: OP_INSTANCE_FAILOVER", text)
        self.assertIn("2 instances: 1 healthy, 1 pending", text)
        self.assertEqual(self.tags("light"), [P + "failover"])
        self.assertEqual(len(self.cfg().cluster.tags), 1)
