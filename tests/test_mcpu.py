"""The opcode processor and the first logical units, on a fake clock."""

from twisted.internet import defer

from ganeti import cmdlib
from ganeti import errors
from ganeti import locking
from ganeti import mcpu
from ganeti import objects
from ganeti import opcodes

from tests.fakes import ClockTestCase
from tests.test_config import make_store, real_instance


class ProcessorTestCase(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.cfg = make_store(self)
        self.cfg.add_node(objects.Node(name="node2.example.com",
                                       primary_ip="127.0.0.2"))
        self.glm = mcpu.make_lock_manager(self.cfg, self.clock)
        self.ctx = mcpu.MasterContext(cfg=self.cfg, glm=self.glm,
                                      clock=self.clock)
        self.proc = mcpu.Processor(self.ctx, cmdlib.LOGICAL_UNITS)
        self.log = []

    def run_op(self, op, job=1, running=None):
        notify = (None if running is None
                  else (lambda: running.append(None)))
        # the processor gets OpCode objects, loaded where jobs come in
        return defer.maybeDeferred(opcodes.from_dict, op).addCallback(
            lambda op: self.proc.execute(job, 0, op, self.log.append, notify))

    def result(self, d):
        return self.successResultOf(d)

    def failure(self, d, *kinds):
        return self.failureResultOf(d, *kinds).value

    def assert_no_locks_held(self):
        for lock in self.glm.query_locks():
            self.assertEqual(lock["owners"], [], lock)


class TestDelayTests(ProcessorTestCase):

    def test_delay_runs_on_the_clock(self):
        running = []
        d = self.run_op({"OP_ID": "OP_TEST_DELAY", "duration": 5.0},
                        running=running)
        self.assertEqual(running, [None])
        self.assertNoResult(d)
        self.clock.advance(5)
        self.assertTrue(self.result(d))
        self.assert_no_locks_held()

    def test_repeat_logs_progress(self):
        d = self.run_op({"OP_ID": "OP_TEST_DELAY", "duration": 1.0,
                         "repeat": 3})
        self.clock.pump([1, 1, 1])
        self.result(d)
        self.assertEqual(self.log, ["Test delay iteration 1/3",
                                    "Test delay iteration 2/3",
                                    "Test delay iteration 3/3"])

    def test_jobs_locking_the_same_node_run_one_after_the_other(self):
        op = {"OP_ID": "OP_TEST_DELAY", "duration": 10.0,
              "on_nodes": ["node2.example.com"], "no_locks": False}
        run1, run2 = [], []
        d1 = self.run_op(op, job=1, running=run1)
        d2 = self.run_op(op, job=2, running=run2)
        self.assertEqual((len(run1), len(run2)), (1, 0))
        self.clock.advance(10)
        self.result(d1)
        # Job 2 got the node lock when job 1 released it.
        self.assertEqual(len(run2), 1)
        self.assertNoResult(d2)
        self.clock.advance(10)
        self.result(d2)

    def test_jobs_on_different_nodes_run_together(self):
        base = {"OP_ID": "OP_TEST_DELAY", "duration": 10.0,
                "no_locks": False}
        run1, run2 = [], []
        d1 = self.run_op(dict(base, on_nodes=["node1.example.com"]), 1, run1)
        d2 = self.run_op(dict(base, on_nodes=["node2.example.com"]), 2, run2)
        self.assertEqual((len(run1), len(run2)), (1, 1))
        self.clock.advance(10)
        self.result(d1)
        self.result(d2)

    def test_unknown_node_fails_clearly_and_holds_nothing(self):
        err = self.failure(self.run_op({"OP_ID": "OP_TEST_DELAY",
                                        "duration": 1.0,
                                        "on_nodes": ["ghost"]}),
                           errors.OpPrereqError)
        self.assertIn("node 'ghost' is not known", str(err))
        self.assert_no_locks_held()


class GenericTests(ProcessorTestCase):

    def test_opcode_without_logical_unit(self):
        # every opcode has one in the master's table: a processor given a
        # table without OP_NODE_QUERYVOLS stands for a master lacking it
        table = dict(cmdlib.LOGICAL_UNITS)
        del table["OP_NODE_QUERYVOLS"]
        self.proc = mcpu.Processor(self.ctx, table)
        err = self.failure(self.run_op({"OP_ID": "OP_NODE_QUERYVOLS",
                                        "output_fields": ["name"]}),
                           errors.OpCodeUnknown)
        self.assertIn("not implemented", str(err))

    def test_every_opcode_has_a_logical_unit(self):
        from ganeti import opcodes
        self.assertEqual(
            sorted(set(opcodes._CLASSES) - set(cmdlib.LOGICAL_UNITS)), [])

    def test_invalid_opcode_names_the_parameter(self):
        err = self.failure(self.run_op({"OP_ID": "OP_TEST_DELAY",
                                        "duration": "soon"}),
                           errors.OpPrereqError)
        self.assertIn("duration", str(err))

    def test_runs_opcode_objects_only(self):
        d = self.proc.execute(1, 0, {"OP_ID": "OP_TEST_DELAY",
                                     "duration": 1.0}, self.log.append)
        self.assertIn("OpCode", str(self.failure(d, errors.ProgrammerError)))
        self.assert_no_locks_held()

    def test_dry_run_changes_nothing(self):
        d = self.run_op({"OP_ID": "OP_TAGS_SET", "kind": "cluster",
                         "tags": ["x"], "dry_run": True})
        self.assertIsNone(self.result(d))
        self.assertEqual(self.cfg.cluster.tags, set())

    def test_exclusive_bgl_waits_for_shared_holders(self):
        delay = self.run_op({"OP_ID": "OP_TEST_DELAY", "duration": 5.0}, 1)
        running = []
        tags = self.run_op({"OP_ID": "OP_TAGS_SET", "kind": "cluster",
                            "tags": ["x"]}, 2, running)
        self.assertEqual(running, [])  # cluster tags need the BGL exclusive
        self.clock.advance(5)
        self.result(delay)
        self.result(tags)
        self.assertEqual(running, [None])
        self.assertEqual(self.cfg.cluster.tags, {"x"})


class TagTests(ProcessorTestCase):

    def test_set_get_search_delete(self):
        inst, _ = real_instance(self.cfg, "inst1")
        self.cfg.add_instance(inst)
        self.glm.add(locking.LEVEL_INSTANCE, [inst.uuid])
        self.result(self.run_op({"OP_ID": "OP_TAGS_SET", "kind": "instance",
                                 "name": "inst1", "tags": ["web", "prod"]}))
        self.assertEqual(self.result(self.run_op(
            {"OP_ID": "OP_TAGS_GET", "kind": "instance", "name": "inst1"})),
            ["prod", "web"])
        self.result(self.run_op({"OP_ID": "OP_TAGS_SET", "kind": "node",
                                 "name": "node2.example.com",
                                 "tags": ["rack:7"]}))
        found = self.result(self.run_op({"OP_ID": "OP_TAGS_SEARCH",
                                         "pattern": "^(prod|rack)"}))
        self.assertEqual(found, [("/instances/inst1", "prod"),
                                 ("/nodes/node2.example.com", "rack:7")])
        self.result(self.run_op({"OP_ID": "OP_TAGS_DEL", "kind": "instance",
                                 "name": "inst1", "tags": ["web"]}))
        self.assertEqual(self.cfg.get_instance("inst1").tags, {"prod"})

    def test_bad_tags_change_nothing(self):
        err = self.failure(self.run_op({"OP_ID": "OP_TAGS_SET",
                                        "kind": "cluster",
                                        "tags": ["good", "b a d"]}),
                           errors.TagError)
        self.assertIn("b a d", str(err))
        self.assertEqual(self.cfg.cluster.tags, set())
        err = self.failure(self.run_op({"OP_ID": "OP_TAGS_SEARCH",
                                        "pattern": "("}),
                           errors.OpPrereqError)
        self.assertIn("pattern", str(err))
        self.assert_no_locks_held()


class ClusterTests(ProcessorTestCase):

    def test_query_has_ganeti_keys(self):
        info = self.result(self.run_op({"OP_ID": "OP_CLUSTER_QUERY"}))
        self.assertEqual(info["name"], "cluster.example.com")
        self.assertEqual(info["master"], "node1.example.com")
        self.assertEqual(info["config_version"], 3000000)
        self.assertEqual(info["hvparams"]["kvm"]["kernel_args"], "ro")
        self.assertNotIn("xen-pvm", info["hvparams"])

    def test_uid_pool_set_add_remove(self):
        self.result(self.run_op({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                                 "uid_pool": [[1000, 1999]]}))
        self.result(self.run_op({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                                 "add_uids": [[3000, 3000]],
                                 "remove_uids": [[1500, 1599]]}))
        self.assertEqual(self.cfg.cluster.uid_pool,
                         [[1000, 1499], [1600, 1999], [3000, 3000]])
        err = self.failure(self.run_op({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                                        "remove_uids": [[5000, 5000]]}),
                           errors.OpPrereqError)
        self.assertIn("uid_pool", str(err))

    def test_maintenance_switches_and_incident_cancel(self):
        self.result(self.run_op({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                                 "maint_balance": True,
                                 "maint_round_delay": 60}))
        m = self.cfg.maintenance
        self.assertEqual((m.balance, m.round_delay), (True, 60))
        info = self.result(self.run_op({"OP_ID": "OP_CLUSTER_QUERY"}))
        self.assertEqual((info["maint_balance"], info["maint_round_delay"],
                          info["maintenance"]["incidents"]), (True, 60, []))
        before = self.cfg.to_dict()
        err = self.failure(self.run_op(
            {"OP_ID": "OP_CLUSTER_SET_PARAMS",
             "maint_balance_threshold": -1.0}), errors.OpPrereqError)
        self.assertIn("maint/balance_threshold: expected a non-negative"
                      " number", str(err))
        self.assertEqual(self.cfg.to_dict(), before)
        node = self.cfg.get_node("node1.example.com").uuid
        self.cfg.update_maintenance(incidents=[{
            "uuid": "i1", "node": node, "repair_status": "pending",
            "original": {"status": "evacuate"}, "jobs": [3]}])
        self.result(self.run_op({"OP_ID": "OP_CLUSTER_REPAIR_CANCEL",
                                 "incident_id": "i1"}))
        self.assertEqual(m.incidents["i1"].repair_status, "canceled")
        self.cfg.update_maintenance(evacuated=[node])
        info = self.result(self.run_op({"OP_ID": "OP_CLUSTER_QUERY"}))
        [inc] = info["maintenance"]["incidents"]
        # the daemon reads back the uuids it recorded; people get names
        self.assertEqual((info["maintenance"]["evacuated"],
                          info["maintenance"]["evacuated_names"]),
                         ([node], ["node1.example.com"]))
        self.assertEqual((inc["id"], inc["node_name"], inc["repair-status"]),
                         ("i1", "node1.example.com", "canceled"))
        err = self.failure(self.run_op({"OP_ID": "OP_CLUSTER_REPAIR_CANCEL",
                                        "incident_id": "nope"}),
                           errors.OpPrereqError)
        self.assertIn("incident_id: no incident 'nope'", str(err))

    def test_node_parameters_are_merged_and_checked(self):
        self.result(self.run_op({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                                 "ndparams": {"oob_program": "/bin/oob"}}))
        self.result(self.run_op({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                                 "ndparams": {"repair_max_parallel": 1}}))
        nd = self.cfg.cluster.ndparams
        self.assertEqual((nd["oob_program"], nd["repair_max_parallel"]),
                         ("/bin/oob", 1))
        for params, message in (
                ({"repair_min_healthy": 1.5}, "ndparams/repair_min_healthy:"
                 " expected a share of the nodes between 0 and 1, got 1.5"),
                ({"repair_max_parallel": -1}, "ndparams/repair_max_parallel:"
                 " expected a number of repairs, 0 for no limit, got -1"),
                ({"repair_max_parallel": "two"}, "ndparams/"
                 "repair_max_parallel: expected an integer"),
                ({"colour": 1}, "unknown node parameter 'colour'")):
            before = self.cfg.to_dict()
            err = self.failure(self.run_op(
                {"OP_ID": "OP_CLUSTER_SET_PARAMS", "ndparams": params}),
                errors.OpPrereqError)
            self.assertIn(message, str(err))
            self.assertEqual(self.cfg.to_dict(), before)
        self.result(self.run_op({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                                 "ndparams": {"oob_program": "default"}}))
        self.assertNotIn("oob_program", self.cfg.cluster.ndparams)

    def test_parameters_and_their_errors(self):
        self.result(self.run_op({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                                 "hvparams": {"kvm": {"kernel_args": "quiet"}},
                                 "beparams": {"memory": 256},
                                 "candidate_pool_size": 3}))
        c = self.cfg.cluster
        self.assertEqual(c.hvparams["kvm"]["kernel_args"], "quiet")
        self.assertEqual(c.hvparams["kvm"]["serial_speed"], 38400)
        self.assertEqual(c.beparams["default"]["maxmem"], 256)
        self.assertEqual(c.candidate_pool_size, 3)
        before = self.cfg.to_dict()
        err = self.failure(self.run_op(
            {"OP_ID": "OP_CLUSTER_SET_PARAMS", "candidate_pool_size": 5,
             "hvparams": {"kvm": {"no_such_knob": 1}}}),
            errors.OpPrereqError)
        self.assertIn("no_such_knob", str(err))
        self.assertEqual(self.cfg.to_dict(), before)
        err = self.failure(self.run_op({"OP_ID": "OP_CLUSTER_SET_PARAMS"}),
                           errors.OpPrereqError)
        self.assertIn("at least one", str(err))

    def test_cannot_disable_a_hypervisor_in_use(self):
        inst, _ = real_instance(self.cfg, "inst1")
        self.cfg.add_instance(inst)
        err = self.failure(self.run_op({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                                        "enabled_hypervisors": ["kvm"]}),
                           errors.OpPrereqError)
        self.assertIn("fake still used", str(err))

    def test_verify_config_reports_problems(self):
        self.assertTrue(self.result(self.run_op(
            {"OP_ID": "OP_CLUSTER_VERIFY_CONFIG"})))
        self.cfg.master_node.offline = True  # behind the store's back
        self.assertFalse(self.result(self.run_op(
            {"OP_ID": "OP_CLUSTER_VERIFY_CONFIG"})))
        self.assertTrue(any("master_candidate" in m for m in self.log))
