"""What the master daemon keeps for the watcher, in a real master daemon in
the test's process: the pause (``SetWatcherPause``) survives a restart of
the master and is handed to the other nodes; ``gnt-instance info`` shows
the watcher's restarts of an instance.
"""

import os
import shutil
import tempfile

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti import luxi
from ganeti import objects
from ganeti import pathutils
from ganeti.cli import gnt_instance
from ganeti.server import masterd
from ganeti.watcher import pause as wpause
from ganeti.watcher import state as wstate

from tests.fakes import FakeRpc
from tests.test_config import make_store

NAME = "web1.example.com"


class MasterPauseTests(unittest.TestCase):

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gnt-wm-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.paths = pathutils.Paths(self.root)
        self.paths.ensure_dirs()
        store = make_store(self, path=self.paths.config_file)
        node = store.cluster.master_node
        store.add_instance(objects.Instance(
            name=NAME, primary_node=node, os="busybox+default",
            hypervisor="fake", disk_template="diskless", admin_state="up",
            nics=[objects.NIC(mac=store.generate_mac())]))
        self.group = store.nodes[node].group

    @defer.inlineCallbacks
    def start(self):
        options = masterd.Options()
        options.parseOptions(["--root", self.root])
        master = masterd.makeService(options, reactor=reactor)
        yield master.startService()
        client = luxi.LuxiClient(reactor, self.paths.master_socket)
        return master, client

    @defer.inlineCallbacks
    def stop(self, master, client):
        yield client.close()
        yield master.stopService()

    @defer.inlineCallbacks
    def test_pause_is_written_and_read_back_at_start(self):
        # (one master daemon per process and job queue: the restart itself
        # is in tests/integration/test_watcher.py)
        path = wpause.pause_path(self.paths)
        until = int(reactor.seconds()) + 3600
        with open(path, "w") as f:
            f.write("%d\n" % until)
        master, client = yield self.start()
        try:
            self.assertEqual((yield client.query_config_values(
                ["watcher_pause"])), [until])
            # the cluster query (gnt-cluster info, RAPI) has it too
            result = yield client.query("cluster", ["watcher_pause"], None)
            self.assertEqual(result["data"][0][0][1], until)
            yield client.set_watcher_pause(None)
            self.assertFalse(os.path.exists(path))
            self.assertEqual((yield client.query_config_values(
                ["watcher_pause"])), [None])
            yield client.set_watcher_pause(until + 60.5)
            with open(path) as f:
                self.assertEqual(f.read(), "%d\n" % (until + 60))
            self.assertEqual((yield client.query_config_values(
                ["watcher_pause"])), [until + 60.5])
        finally:
            yield self.stop(master, client)

    @defer.inlineCallbacks
    def test_ended_pause_file_at_start(self):
        path = wpause.pause_path(self.paths)
        with open(path, "w") as f:
            f.write("%d\n" % (reactor.seconds() - 10))
        master, client = yield self.start()
        try:
            self.assertEqual((yield client.query_config_values(
                ["watcher_pause"])), [None])
        finally:
            yield self.stop(master, client)

    def test_unreadable_pause_file_at_start_is_removed(self):
        path = wpause.pause_path(self.paths)
        with open(path, "w") as f:
            f.write("garbage\n")
        pause = wpause.MasterPause(path, reactor)
        pause.load()
        self.assertIsNone(pause.until)
        self.assertFalse(os.path.exists(path))

    @defer.inlineCallbacks
    def test_instance_info_shows_the_watchers_restarts(self):
        path = wstate.state_path(self.paths, self.group)
        notes = wstate.WatcherState()
        for when in (1000.0, 1300.0):
            notes.record_restart(NAME, when)
        notes.save(path)
        master, client = yield self.start()
        try:
            op = {"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": [NAME],
                  "static": True}
            data = yield self.query_data(client, op)
            self.assertEqual(data["watcher_restarts"],
                             {"attempts": 2, "last_attempt": 1300.0,
                              "gave_up": None})
            self.assertIn("2 attempts so far by the watcher",
                          dict(gnt_instance.instance_info_items(data))[
                              "Watcher restarts"])
            for when in (1600.0, 1900.0, 2200.0):
                notes.record_restart(NAME, when)
            notes.record_give_up(NAME, 2500.0)
            notes.save(path)
            data = yield self.query_data(client, op)
            self.assertEqual(data["watcher_restarts"]["gave_up"], 2500.0)
            line = dict(gnt_instance.instance_info_items(data))[
                "Watcher restarts"]
            self.assertTrue(line.startswith("the watcher gave up restarting"
                                            " it after 5 attempts"), line)
            # a corrupt file or none: nothing to show, no failure
            with open(path, "w") as f:
                f.write("{broken")
            data = yield self.query_data(client, op)
            self.assertIsNone(data["watcher_restarts"])
            self.assertNotIn("Watcher restarts",
                             dict(gnt_instance.instance_info_items(data)))
        finally:
            yield self.stop(master, client)

    @defer.inlineCallbacks
    def query_data(self, client, op):
        job = yield client.submit_job([op])
        while True:
            (status, result) = (yield client.query_jobs(
                [job], ["status", "opresult"]))[0]
            if status in ("success", "error", "canceled"):
                break
            yield deferLater(0.01)
        self.assertEqual(status, "success", result)
        return result[0][NAME]


def deferLater(delay):
    from twisted.internet import task
    return task.deferLater(reactor, delay, lambda: None)


class _Config(object):
    """What WatcherPauseService reads of the config service."""

    def __init__(self, cfg, rpc):
        self.cfg = cfg
        self.ctx = type("Ctx", (), {"rpc": rpc})()


class _InlineWriter(object):

    def call(self, fn, *args):
        return defer.maybeDeferred(fn, *args)


class PauseDistributionTests(unittest.TestCase):

    def test_every_other_online_node_gets_its_copy(self):
        root = os.path.abspath(self.mktemp())
        paths = pathutils.Paths(root)
        paths.ensure_dirs()
        store = make_store(self, path=paths.config_file)
        for name, ip, offline in (("node2.example.com", "127.0.0.2", False),
                                  ("node3.example.com", "127.0.0.3", False),
                                  ("node4.example.com", "127.0.0.4", True)):
            store.add_node(objects.Node(name=name, primary_ip=ip,
                                        offline=offline,
                                        master_candidate=False))
        rpc = FakeRpc({"set_watcher_pause": True})
        rpc.fail["node3.example.com"] = "connection refused"
        svc = masterd.WatcherPauseService(paths, _Config(store, rpc),
                                          reactor, _InlineWriter())
        svc.start_step()
        until = reactor.seconds() + 60
        self.assertEqual(self.successResultOf(svc.pause.set(until)), until)
        self.assertEqual(sorted((c.node, c.args) for c in rpc.calls),
                         [("node2.example.com", [until]),
                          ("node3.example.com", [until])])
        # the failure is logged; the master's own copy is written anyway
        self.assertEqual(svc.pause.until, until)
        with open(wpause.pause_path(paths)) as f:
            self.assertEqual(f.read(), "%d\n" % until)
