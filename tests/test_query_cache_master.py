"""The query cache in a real master (in this process): a change made by a
job shows in the very next query over luxi, with the cache warm and a
live data TTL far longer than the test; questions about named instances
ask the nodes at once."""

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from ganeti import objects
from ganeti.query import QueryCache
from ganeti.server import masterd
from ganeti.utils.rawjson import RawJSON

from tests.inprocess import start_master
from tests.test_cmdlib_instance import InstanceRpc

NODE1 = "node1.example.com"
INST = "cached1.example.com"
FIELDS = ["name", "admin_state", "status", "oper_state", "tags"]


def prepare(store):
    node = store.get_node(NODE1).uuid
    for name in (INST, "other.example.com"):
        store.add_instance(objects.Instance(
            name=name, primary_node=node, hypervisor="fake",
            os="busybox+default", admin_state="down",
            beparams={"maxmem": 128, "minmem": 128, "vcpus": 1}), [])


class MasterQueryCacheTests(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        self.master, self.client = yield start_master(self, "qcache",
                                                      prepare=prepare)
        self.rpc = self.master.ctx.rpc = InstanceRpc()
        # live data kept for an hour: only a configuration change can make
        # a query ask the nodes again during this test
        self.cache = self.master.query_cache = QueryCache(reactor,
                                                          live_ttl=3600)

    @defer.inlineCallbacks
    def run_job(self, op):
        job = yield self.client.call("SubmitJob", [op])
        for _ in range(400):
            [[status]] = yield self.client.call("QueryJobs", [job],
                                                ["status"])
            if status in ("success", "error", "canceled"):
                self.assertEqual(status, "success")
                return
            yield task.deferLater(reactor, 0.02, lambda: None)
        self.fail("job %s did not finish" % job)

    @defer.inlineCallbacks
    def row(self, qfilter=None, name=INST):
        answer = yield self.client.call("Query", "instance", FIELDS, qfilter)
        rows = {r[0][1]: dict(zip(FIELDS, (v for _, v in r)))
                for r in answer["data"]}
        return rows[name]

    def all_instances_info_calls(self):
        return len(self.rpc.calls_of("all_instances_info"))

    @defer.inlineCallbacks
    def test_a_job_s_change_shows_in_the_next_query(self):
        before = yield self.row()
        self.assertEqual(before["status"], "ADMIN_down")
        self.assertEqual(before["tags"], [])
        yield self.row()
        self.assertGreaterEqual(self.cache.hits, 1)
        yield self.run_job({"OP_ID": "OP_TAGS_SET", "kind": "instance",
                            "name": INST, "tags": ["cached"]})
        row = yield self.row()
        self.assertEqual(row["tags"], ["cached"])
        yield self.run_job({"OP_ID": "OP_INSTANCE_STARTUP",
                            "instance_name": INST})
        row = yield self.row()
        self.assertEqual((row["admin_state"], row["status"],
                          row["oper_state"]), ("up", "running", True))
        yield self.run_job({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                            "instance_name": INST})
        row = yield self.row()
        self.assertEqual((row["admin_state"], row["status"]),
                         ("down", "ADMIN_down"))
        # the old-style query of everything agrees
        rows = yield self.client.call("QueryInstances", [], ["name", "tags"],
                                      False)
        self.assertIn([INST, ["cached"]], rows)

    @defer.inlineCallbacks
    def test_named_instances_are_asked_about_at_once(self):
        yield self.run_job({"OP_ID": "OP_INSTANCE_STARTUP",
                            "instance_name": INST})
        row = yield self.row()
        self.assertEqual(row["status"], "running")
        calls = self.all_instances_info_calls()
        # the domain goes away with no job: within the TTL a list of every
        # instance shows the state asked last ...
        del self.rpc.domains[(NODE1, INST)]
        row = yield self.row()
        self.assertEqual(row["status"], "running")
        self.assertEqual(self.all_instances_info_calls(), calls)
        # ... a question about the instance itself asks its node
        row = yield self.row(["=", "name", INST])
        self.assertEqual(row["status"], "ERROR_down")
        rows = yield self.client.call("QueryInstances", [INST],
                                      ["name", "status"], False)
        self.assertEqual(rows, [[INST, "ERROR_down"]])
        # and so does QueryFresh (the watcher's), whatever it asks
        answer = yield self.client.call("QueryFresh", "instance",
                                        ["name", "status"], None)
        self.assertIn([[0, INST], [0, "ERROR_down"]], answer["data"])
        self.assertEqual(self.all_instances_info_calls(), calls + 3)

    @defer.inlineCallbacks
    def test_kept_answers_go_out_as_kept_text(self):
        handler = masterd.MasterLuxiHandler(self.master)
        first = yield handler.query("instance", FIELDS, None)
        self.assertIsInstance(first, RawJSON)
        again = yield handler.query("instance", FIELDS, None)
        self.assertIs(again.data, first.data)
        versioned = yield handler.query_versioned("instance", FIELDS, None,
                                                  None)
        version = versioned.decode()["version"]
        unchanged = yield handler.query_versioned("instance", FIELDS, None,
                                                  version)
        self.assertEqual(unchanged.decode(), {"version": version,
                                              "unchanged": True})
