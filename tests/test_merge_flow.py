"""The merge flow against simulated node daemons and a fake master:
the checks refuse before anything changes, each naming the cluster and the
item; a failure at any step takes every cluster back; a rollback step that
cannot be done says what the admin must do."""

import base64
import os
import zlib

import attrs
from twisted.internet import defer, task
from twisted.trial import unittest

from ganeti import constants
from ganeti import crypto
from ganeti import luxi
from ganeti import rpc
from ganeti import ssconf
from ganeti.config import ConfigStore
from ganeti.merge import flow
from ganeti.pathutils import Paths
from ganeti.utils import io

from tests.test_crypto import cluster_cert
from tests.test_merge_config import add_instance, make_cluster


def encode(data):
    return ["zlib+base64", base64.b64encode(zlib.compress(data)).decode(
        "ascii")]


@attrs.define
class FakeNode:
    name: str
    address: str
    cluster: str
    digest: str
    #: the digest it serves after a switch / a revert
    backup_digest: str = None
    backup: bool = False
    up: bool = True
    masterd: bool = False
    running: dict = attrs.Factory(dict)   # instance name -> hypervisor
    config: bytes = None
    unfinished: list = attrs.Factory(list)
    version: int = constants.PROTOCOL_VERSION
    #: procedure name -> failure message
    fail: dict = attrs.Factory(dict)
    paused: object = None
    no_voting: object = None
    backup_cluster: str = None


class FakeWorld(object):
    """Node daemons by address: each answers only a caller presenting
    the certificate it serves."""

    def __init__(self, luxi_client):
        self.nodes = {}
        self.calls = []
        self.luxi = luxi_client

    def add(self, node):
        self.nodes[node.address] = node

    def call(self, cert, address, procedure, args=(), timeout=None):
        args = list(args)
        self.calls.append((address, procedure, args))
        node = self.nodes.get(address)

        def failed(msg):
            return defer.succeed(rpc.RpcResult(address, procedure, False,
                                               fail_msg=msg))
        if node is None or not node.up:
            return failed("connection refused")
        if cert.digest() != node.digest:
            return failed("TLS handshake refused")
        if procedure in node.fail:
            return failed(node.fail[procedure])
        payload = getattr(self, "_" + procedure)(node, *args)
        return defer.succeed(rpc.RpcResult(address, procedure, True,
                                           payload=payload))

    def _version(self, node):
        return node.version

    def _daemons_status(self, node):
        return {"daemons": {}}

    def _merge_info(self, node, with_config=False):
        info = {"protocol_version": node.version,
                "release_version": constants.RELEASE_VERSION,
                "config_version": constants.CONFIG_VERSION,
                "cluster_name": node.cluster, "master_node": "",
                "masterd_running": node.masterd, "backup": node.backup,
                "config": None, "unfinished_jobs": []}
        if with_config:
            info["config"] = encode(node.config)
            info["unfinished_jobs"] = list(node.unfinished)
        return info

    def _set_watcher_pause(self, node, until):
        node.paused = until
        return True

    def _node_stop_master(self, node):
        stopped = ["ganeti-masterd"] if node.masterd else []
        node.masterd = False
        if node.name == self.luxi.master:
            self.luxi.up = False
        return {"stopped": stopped}

    def _node_start_master_daemons(self, node, no_voting=False):
        node.masterd = True
        node.no_voting = no_voting
        if node.name == self.luxi.master:
            self.luxi.up = True
        return {"daemons": {"ganeti-masterd": True}}

    def _all_instances_info(self, node, hvs):
        return {name: {"state": "running", "hypervisor": hv}
                for name, hv in node.running.items()}

    def _instance_shutdown(self, node, name, hv, timeout):
        node.running.pop(name)
        return True

    def _instance_start(self, node, spec, paused):
        node.running[spec["name"]] = spec["hypervisor"]
        return True

    def _merge_switch_cluster(self, node, pem, hmac, cluster, name, values,
                              config, from_cluster):
        cert = crypto.ClusterCertificate.from_pem(pem.encode("ascii"))
        node.backup = True
        node.backup_digest, node.digest = node.digest, cert.digest()
        node.backup_cluster, node.cluster = node.cluster, cluster
        return {"restart": True}

    def _merge_revert_switch(self, node):
        node.backup = False
        node.digest = node.backup_digest
        node.cluster = node.backup_cluster
        return {"restart": True}

    def _merge_forget_backup(self, node):
        node.backup = False
        return True

    def _daemons_reconcile(self, node):
        return {"daemons": {}}

    def _node_demote_from_mc(self, node):
        return []


class FakeLuxi(object):
    """The master daemon of the cluster the merge runs on."""

    def __init__(self, master):
        self.master = master
        self.up = True
        self.jobs = []
        self.failing = []
        self.fail_ops = {}
        self.pause = None
        self.drain = False
        self.unfinished = []
        self.nodes = []
        self.instances = []
        self.closed = False

    def _check(self):
        if not self.up:
            raise luxi.NoMasterError("no master daemon")

    def query_config_values(self, fields):
        self._check()
        values = {"master_node": self.master, "watcher_pause": self.pause,
                  "drain_flag": self.drain}
        return [values[f] for f in fields]

    def query_jobs(self, ids, fields):
        self._check()
        if ids is None:
            return [[j, "running"] for j in self.unfinished]
        rows = []
        for job_id in ids:
            ops = self.jobs[job_id - 1]
            bad = [msg for msg in self.failing[job_id - 1] if msg]
            status = "error" if bad else "success"
            values = {"status": status, "opresult": bad or [None] * len(ops),
                      "oplog": [[] for _ in ops]}
            rows.append([values[f] for f in fields])
        return rows

    def submit_job_to_drained_queue(self, ops):
        self._check()
        self.jobs.append(ops)
        # a failure asked for happens once
        self.failing.append([self.fail_ops.pop(op["OP_ID"], None)
                             for op in ops])
        return len(self.jobs)

    def set_watcher_pause(self, until):
        self._check()
        self.pause = until

    def set_drain_flag(self, flag):
        self._check()
        self.drain = flag

    def query_instances(self, names, fields):
        self._check()
        return [list(row) for row in self.instances]

    def query_nodes(self, names, fields):
        self._check()
        return [[name] for name in self.nodes]

    def close(self):
        self.closed = True

    def op_ids(self):
        return [[op["OP_ID"] for op in ops] for ops in self.jobs]


class FlowTestCase(unittest.TestCase):
    """This cluster a.example.com (2 nodes, one instance each) on disk,
    the other b.example.com (2 nodes, one instance each) behind fake node
    daemons."""

    def setUp(self):
        base = os.path.abspath(self.mktemp())
        self.paths = Paths(os.path.join(base, "a-master"))
        self.paths.ensure_dirs()
        certs = os.path.join(base, "certs")
        self.a_cert = cluster_cert(certs, "a.example.com")
        self.b_cert = cluster_cert(certs, "b.example.com")
        pem = crypto.server_pem_path(self.paths)
        io.atomic_write(pem, self.a_cert.key_pem + self.a_cert.cert_pem,
                        mode=0o400)
        io.atomic_write(self.paths.hmac_key_file, b"a-key", mode=0o400)
        self.a = make_cluster("a.example.com", "a.example.com", "10.0.1")
        self.b = make_cluster("b.example.com", "b.example.com", "10.0.2")
        for store, letter in ((self.a, "a"), (self.b, "b")):
            for i in (1, 2):
                add_instance(store, "vm%d-%s" % (i, letter),
                             "node%d.%s.example.com" % (i, letter))
        io.atomic_write(self.paths.config_file, self.a.dumps())
        ssconf.write_ssconf(self.paths, self.a)
        self.original = self.a.dumps()
        self.luxi = FakeLuxi("node1.a.example.com")
        self.luxi.nodes = ["node1.a.example.com", "node2.a.example.com"]
        self.world = FakeWorld(self.luxi)
        for store, cert in ((self.a, self.a_cert), (self.b, self.b_cert)):
            for node in store.nodes.values():
                letter = store.cluster.cluster_name[0]
                index = node.name[4]
                self.world.add(FakeNode(
                    node.name, node.primary_ip,
                    store.cluster.cluster_name, cert.digest(),
                    masterd=index == "1",
                    running={"vm%s-%s" % (index, letter): "fake"},
                    config=store.dumps() if node.master_candidate
                    else None))
        self.luxi.instances = [("vm1-a", "node1.a.example.com", True),
                               ("vm2-a", "node2.a.example.com", True)]
        self.b_cert_file = self.b_cert.path
        self.reports = []
        self.clock = task.Clock()
        self.hooks = {}

    def node(self, name):
        return next(n for n in self.world.nodes.values() if n.name == name)

    def merger(self, **options):
        options.setdefault("groups", "merge")
        return flow.Merger(
            self.clock, self.paths,
            [flow.OtherSpec("10.0.2.1", self.b_cert_file)],
            flow.Options(**options), report=self.reports.append,
            luxi_client=self.luxi, caller=self.world,
            hooks=lambda step, **info: self.hooks.get(step, lambda: None)(),
            clock=self.clock, now=lambda: 1000000.0)

    def merged_view(self):
        """What the fake master answers once the merge wrote its
        configuration: every node and instance of both."""
        self.luxi.nodes = sorted(n.name for n in self.world.nodes.values())
        self.luxi.instances = [
            (inst.name, store.nodes[inst.primary_node].name, True)
            for store in (self.a, self.b)
            for inst in store.instances.values()]

    def run_merge(self, merger):
        d = defer.Deferred.fromCoroutine(merger.run())
        for _ in range(2000):
            if d.called:
                break
            self.clock.advance(0.5)
        self.assertTrue(d.called, "\n".join(self.reports))
        return d

    def merged(self, merger=None):
        self.hooks.setdefault("switch", lambda: None)
        original = self.hooks.get("redistribute")

        def redistributed():
            self.merged_view()
            if original:
                original()
        self.hooks["redistribute"] = redistributed
        return self.successResultOf(self.run_merge(merger or self.merger()))

    def refused(self, merger=None):
        failure = self.failureResultOf(self.run_merge(merger or
                                                      self.merger()),
                                       flow.MergeError)
        return failure.value

    def changing_calls(self):
        return [c for c in self.world.calls
                if c[1] not in ("version", "merge_info", "daemons_status",
                                "all_instances_info")]

    def assertNothingChanged(self):
        with open(self.paths.config_file, "rb") as f:
            self.assertEqual(f.read(), self.original)
        self.assertEqual(self.changing_calls(), [])
        self.assertEqual(self.luxi.jobs, [])
        self.assertIsNone(self.luxi.pause)
        self.assertFalse(self.luxi.drain)


class SuccessTests(FlowTestCase):

    def test_the_steps_in_order(self):
        outcome = self.merged()
        self.assertEqual(outcome.nodes, (
            "node1.a.example.com", "node1.b.example.com",
            "node2.a.example.com", "node2.b.example.com"))
        self.assertEqual(len(outcome.instances), 4)
        steps = [(self.world.nodes[a].name, p)
                 for a, p, _ in self.changing_calls()
                 if p != "set_watcher_pause"]
        self.assertEqual(steps, [
            ("node1.b.example.com", "node_stop_master"),
            ("node1.a.example.com", "node_stop_master"),
            ("node1.b.example.com", "merge_switch_cluster"),
            ("node2.b.example.com", "merge_switch_cluster"),
            ("node1.a.example.com", "node_start_master_daemons"),
            ("node1.a.example.com", "node_stop_master"),
            ("node1.a.example.com", "node_start_master_daemons"),
            ("node1.b.example.com", "merge_forget_backup"),
            ("node2.b.example.com", "merge_forget_backup")])
        self.assertEqual(self.luxi.op_ids(), [
            ["OP_CLUSTER_REDIST_CONF"],
            ["OP_NODE_SET_PARAMS", "OP_NODE_SET_PARAMS"]])
        # the first start without the vote, the restart with it
        self.assertFalse(self.node("node1.a.example.com").no_voting)
        # the merged configuration is on disk, its backup beside it
        store = ConfigStore.load(self.paths.config_file)
        self.assertEqual(len(store.nodes), 4)
        with open(self.paths.config_file + ".bak", "rb") as f:
            self.assertEqual(f.read(), self.original)
        self.assertEqual(self.paths.root and open(
            self.paths.ssconf_file("node_list")).read().split(),
            list(outcome.nodes))
        # watchers paused on every node of theirs, then resumed here
        self.assertEqual(self.node("node2.b.example.com").paused,
                         1000000.0 + 1800)
        self.assertIsNone(self.luxi.pause)
        self.assertFalse(self.luxi.drain)
        self.assertTrue(all(n.cluster == "a.example.com" and not n.backup
                            for n in self.world.nodes.values()))

    def test_restart_none_leaves_the_master_as_started(self):
        self.merged(self.merger(restart="none"))
        self.assertTrue(self.node("node1.a.example.com").no_voting)

    def test_an_earlier_pause_and_drain_come_back(self):
        self.luxi.pause = 1000000.0 + 99999
        self.luxi.drain = True
        self.merged()
        self.assertEqual(self.luxi.pause, 1000000.0 + 99999)
        self.assertTrue(self.luxi.drain)

    def test_stop_instances(self):
        self.merged(self.merger(stop_instances=True))
        stopped = [c for c in self.world.calls
                   if c[1] == "instance_shutdown"]
        self.assertEqual(sorted(c[2][0] for c in stopped),
                         ["vm1-b", "vm2-b"])
        self.assertEqual(self.luxi.op_ids()[-1],
                         ["OP_INSTANCE_STARTUP", "OP_INSTANCE_STARTUP"])

    def test_dry_run_changes_nothing(self):
        outcome = self.merged(self.merger(dry_run=True))
        self.assertTrue(outcome.dry_run)
        self.assertNothingChanged()

    def test_confirmation_refused_changes_nothing(self):
        merger = self.merger()
        asked = []
        merger.confirm = lambda text: asked.append(text) or False
        err = self.refused(merger)
        self.assertEqual(err.message, "Aborted")
        self.assertTrue(err.refused)
        self.assertIn("cluster b.example.com (10.0.2.1): 2 node(s), 2"
                      " instance(s)", asked[0])
        self.assertNothingChanged()


class CheckTests(FlowTestCase):

    def refused(self, merger=None):
        err = FlowTestCase.refused(self, merger)
        self.assertTrue(err.refused, err.message)
        return err

    def test_its_own_certificate(self):
        self.b_cert_file = self.a_cert.path
        err = self.refused()
        self.assertIn("is this cluster's own certificate", err.message)
        self.assertNothingChanged()

    def test_a_missing_certificate_file(self):
        self.b_cert_file = "/nonexistent/server.pem"
        err = self.refused()
        self.assertIn("certificate of the cluster at 10.0.2.1", err.message)
        self.assertIn("/nonexistent/server.pem", err.message)
        self.assertNothingChanged()

    def test_the_wrong_certificate(self):
        self.b_cert_file = cluster_cert(os.path.abspath(self.mktemp()),
                                        "c.example.com").path
        err = self.refused()
        self.assertIn("the cluster at 10.0.2.1 does not answer with the"
                      " certificate %s" % self.b_cert_file, err.message)
        self.assertNothingChanged()

    def test_unfinished_jobs_here(self):
        self.luxi.unfinished = [17]
        err = self.refused()
        self.assertIn("this cluster has unfinished jobs (17)", err.message)
        self.assertNothingChanged()

    def test_unfinished_jobs_there(self):
        self.node("node1.b.example.com").unfinished = [4, 5]
        err = self.refused()
        self.assertIn("cluster b.example.com (10.0.2.1) has unfinished jobs"
                      " (4, 5)", err.message)
        self.assertNothingChanged()

    def test_another_version_on_a_node(self):
        self.node("node2.b.example.com").version = 2160000
        err = self.refused()
        self.assertIn("node node2.b.example.com of cluster b.example.com"
                      " (10.0.2.1) runs protocol version 2160000", err.message)
        self.assertNothingChanged()

    def test_a_node_with_an_old_backup(self):
        self.node("node2.b.example.com").backup = True
        err = self.refused()
        self.assertIn("node node2.b.example.com of cluster b.example.com"
                      " (10.0.2.1) keeps the backup of an earlier merge",
                      err.message)
        self.assertNothingChanged()

    def test_a_candidate_leads_to_the_master(self):
        self.b.set_node_params("node2.b.example.com", master_candidate=True)
        self.node("node2.b.example.com").config = self.b.dumps()
        merger = flow.Merger(
            self.clock, self.paths,
            [flow.OtherSpec("10.0.2.2", self.b_cert_file)],
            flow.Options(groups="merge", dry_run=True),
            report=self.reports.append, luxi_client=self.luxi,
            caller=self.world, clock=self.clock)
        self.successResultOf(self.run_merge(merger))
        asked = [a for a, p, args in self.world.calls
                 if p == "merge_info" and args == [True]]
        self.assertEqual(asked, ["10.0.2.2", "10.0.2.1"])

    def test_clashes_are_listed(self):
        add_instance(self.b, "vm1-a", "node1.b.example.com")
        self.node("node1.b.example.com").config = self.b.dumps()
        err = self.refused(self.merger(groups=None))
        self.assertIn("the clusters cannot be merged", err.message)
        self.assertIn("instance name vm1-a of cluster b.example.com is in"
                      " use in this cluster", err.message)
        self.assertIn("--groups merge", err.message)
        self.assertNothingChanged()

    def test_no_master_daemon_here(self):
        self.luxi.up = False
        err = self.refused()
        self.assertIn("this cluster's master daemon does not answer",
                      err.message)
        self.assertNothingChanged()


class RollbackTests(FlowTestCase):

    def assertBackAsBefore(self, err):
        self.assertTrue(err.rolled_back, (err.message, err.manual))
        self.assertFalse(err.refused)
        store = ConfigStore.load(self.paths.config_file)
        self.assertEqual(sorted(n.name for n in store.nodes.values()),
                         ["node1.a.example.com", "node2.a.example.com"])
        self.assertEqual(store.to_dict()["instances"],
                         self.a.to_dict()["instances"])
        with open(self.paths.ssconf_file("node_list")) as f:
            self.assertEqual(f.read().split(), ["node1.a.example.com",
                                                "node2.a.example.com"])
        for node in self.world.nodes.values():
            self.assertEqual(node.cluster, node.name.split(".", 1)[1])
            self.assertFalse(node.backup)
        self.assertTrue(self.node("node1.a.example.com").masterd)
        self.assertTrue(self.node("node1.b.example.com").masterd)
        self.assertIsNone(self.node("node2.b.example.com").paused)
        self.assertIsNone(self.luxi.pause)
        self.assertFalse(self.luxi.drain)

    def test_failure_at_the_switch(self):
        self.node("node2.b.example.com").fail["merge_switch_cluster"] = \
            "disk full"
        err = self.refused()
        self.assertEqual(err.message,
                         "switching node node2.b.example.com: disk full")
        self.assertBackAsBefore(err)
        self.assertIn("  node node2.b.example.com was not switched",
                      self.reports)
        self.assertIn("  node node1.b.example.com is back in cluster"
                      " b.example.com (10.0.2.1)", self.reports)
        # the master was not started with the merged configuration: no
        # redistribution
        self.assertEqual(self.luxi.jobs, [])

    def test_failure_after_the_merged_master_ran(self):
        self.luxi.fail_ops["OP_CLUSTER_REDIST_CONF"] = "boom"
        err = self.refused()
        self.assertIn("redistribution: job 1 ended error", err.message)
        self.assertBackAsBefore(err)
        # the restored configuration is above the merged one, and reached
        # this cluster's nodes again
        store = ConfigStore.load(self.paths.config_file)
        self.assertGreater(store.serial_no, max(self.a.serial_no,
                                                self.b.serial_no) + 1)
        self.assertEqual(len(self.luxi.jobs), 2)

    def test_failure_in_the_comparison(self):
        def lost_one():
            self.merged_view()
            self.luxi.instances = self.luxi.instances[1:]
        self.hooks["verify"] = lost_one
        err = self.refused()
        self.assertIn("the merged cluster differs from the clusters before",
                      err.message)
        self.assertIn("now absent", err.message)
        self.assertBackAsBefore(err)

    def test_the_stopped_instances_start_again(self):
        self.luxi.fail_ops["OP_CLUSTER_REDIST_CONF"] = "boom"
        err = self.refused(self.merger(stop_instances=True))
        self.assertBackAsBefore(err)
        self.assertEqual(self.node("node1.b.example.com").running,
                         {"vm1-b": "fake"})
        self.assertEqual(self.node("node2.b.example.com").running,
                         {"vm2-b": "fake"})

    def test_a_node_lost_for_good(self):
        def gone():
            self.node("node1.b.example.com").up = False
        self.hooks["start-our-master"] = gone
        err = self.refused(self.merger(switch_timeout=5))
        self.assertFalse(err.rolled_back)
        self.assertIn("the rollback did not finish", err.message)
        self.assertTrue(any(
            "node node1.b.example.com back in cluster b.example.com" in text
            and "cluster-merge.backup" in text for text in err.manual),
            err.manual)
        # the rest was still rolled back
        store = ConfigStore.load(self.paths.config_file)
        self.assertEqual(len(store.nodes), 2)
        self.assertEqual(self.node("node2.b.example.com").cluster,
                         "b.example.com")

    def test_a_watcher_that_stays_paused_is_no_failed_rollback(self):
        node = self.node("node2.b.example.com")

        def fail_later():
            node.fail["merge_switch_cluster"] = "disk full"
            node.fail["set_watcher_pause"] = "read-only file system"
        self.hooks["switch"] = fail_later
        err = self.refused()
        self.assertTrue(err.rolled_back)
        self.assertEqual(len(err.manual), 1)
        self.assertIn("gnt-cluster watcher continue on b.example.com",
                      err.manual[0])



    def test_a_job_started_after_the_checks(self):
        def submitted():
            self.luxi.unfinished = [21]
        self.hooks["reread"] = submitted
        err = self.refused()
        self.assertIn("this cluster has unfinished jobs (21)", err.message)
        self.luxi.unfinished = []
        self.assertBackAsBefore(err)
        self.assertEqual([p for _, p, _ in self.changing_calls()
                          if p.startswith("merge_")], [])
