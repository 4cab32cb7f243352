"""The query opcodes: OP_QUERY, OP_QUERY_FIELDS, OP_CLUSTER_CONFIG_QUERY
and OP_NODE_QUERYVOLS, run by the opcode processor against fake node
daemons (tests.test_cmdlib_instance)."""

from ganeti import errors
from ganeti import query
from ganeti.server.noded import storage_units

from tests.test_cmdlib_instance import NODE1, NODE2, InstanceTestCase


class QueryTests(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.create()
        self.create("inst2.example.com", pnode=NODE2)

    def luxi(self, what, fields, qfilter=None):
        """What luxi's Query answers (the same query layer, no cache)."""
        return self.successResultOf(query.QueryContext(
            self.cfg, locks=self.glm).query(what, fields, qfilter))

    def test_query_answers_as_luxi(self):
        fields = ["name", "pnode", "disk_template", "nosuch"]
        qfilter = ["=", "pnode", NODE2]
        result = self.ok({"OP_ID": "OP_QUERY", "what": "instance",
                          "fields": fields, "qfilter": qfilter})
        self.assertEqual(result, self.luxi("instance", fields, qfilter))
        self.assertEqual(result["data"], [[[0, "inst2.example.com"],
                                           [0, NODE2], [0, "file"],
                                           [1, None]]])
        self.assertEqual([f["name"] for f in result["fields"]], fields)
        self.assertEqual(result["fields"][3]["kind"], "unknown")

    def test_query_of_nodes_without_filter(self):
        result = self.ok({"OP_ID": "OP_QUERY", "what": "node",
                          "fields": ["name", "pinst_cnt"]})
        self.assertEqual(result["data"], [[[0, NODE1], [0, 1]],
                                          [[0, NODE2], [0, 1]]])

    def test_bad_filter_and_resource_refused(self):
        err = self.fails({"OP_ID": "OP_QUERY", "what": "instance",
                          "fields": ["name"], "qfilter": ["~~", "name"]},
                         errors.GenericError)
        self.assertIn("~~", str(err))
        err = self.fails({"OP_ID": "OP_QUERY", "what": "nosuch",
                          "fields": ["name"]})
        self.assertIn("what", err.args[0])

    def test_query_fields(self):
        result = self.ok({"OP_ID": "OP_QUERY_FIELDS", "what": "instance",
                          "fields": ["name", "nosuch"]})
        self.assertEqual(result, query.QueryContext(self.cfg).query_fields(
            "instance", ["name", "nosuch"]))
        self.assertEqual(result["fields"][0], {
            "name": "name", "title": "Instance", "kind": "text",
            "doc": result["fields"][0]["doc"]})
        self.assertEqual(result["fields"][1]["kind"], "unknown")
        every = self.ok({"OP_ID": "OP_QUERY_FIELDS", "what": "node"})
        names = [f["name"] for f in every["fields"]]
        self.assertIn("pinst_cnt", names)
        self.assertIn("name", names)


class ClusterConfigQueryTests(InstanceTestCase):

    def test_values_in_order(self):
        result = self.ok({"OP_ID": "OP_CLUSTER_CONFIG_QUERY",
                          "output_fields": ["master_node", "cluster_name",
                                            "volume_group_name"]})
        self.assertEqual(result, [NODE1, self.cfg.cluster.cluster_name,
                                  "xenvg"])

    def test_unknown_field_named(self):
        err = self.fails({"OP_ID": "OP_CLUSTER_CONFIG_QUERY",
                          "output_fields": ["cluster_name", "bogus"]})
        self.assertIn("output_fields", err.args[0])
        self.assertIn("bogus", err.args[0])
        self.assertEqual(err.args[1], errors.ECODE_INVAL)


LVS_REPORT = [
    {"lv_name": "web-disk0", "lv_size": "1024.00", "vg_name": "xenvg",
     "devices": "/dev/loop7(0)"},
    {"lv_name": "spread", "lv_size": "300.00", "vg_name": "xenvg",
     "devices": "/dev/loop7(256),/dev/loop8(0)"},
]


class NodeQueryvolsTests(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.create()
        # inst1's disk as if it were an LV of xenvg
        disk = self.cfg.instance_disks(self.inst())[0]
        self.cfg.modify_disk(disk.uuid, dev_type="plain",
                             logical_id=["xenvg", "web-disk0"])
        self.rpc.answers["node_volumes"] = storage_units.volume_rows(
            LVS_REPORT)

    def test_rows_as_strings(self):
        result = self.ok({"OP_ID": "OP_NODE_QUERYVOLS", "nodes": [NODE1],
                          "output_fields": ["node", "phys", "vg", "name",
                                            "size", "instance"]})
        self.assertEqual(result, [
            [NODE1, "/dev/loop7", "xenvg", "spread", "300", "-"],
            [NODE1, "/dev/loop7", "xenvg", "web-disk0", "1024",
             "inst1.example.com"],
            [NODE1, "/dev/loop8", "xenvg", "spread", "300", "-"]])
        self.assertEqual(self.rpc.procedures(), ["node_volumes"])

    def test_all_nodes_and_a_failing_one(self):
        self.rpc.fail[(NODE2, "node_volumes")] = "lvs: not found"
        result = self.ok({"OP_ID": "OP_NODE_QUERYVOLS",
                          "output_fields": ["node", "name"]})
        self.assertEqual([r[0] for r in result], [NODE1] * 3)
        self.assertTrue(any("Can't compute volume data on node %s" % NODE2
                            in m for m in self.log))

    def test_unknown_field_and_node(self):
        err = self.fails({"OP_ID": "OP_NODE_QUERYVOLS",
                          "output_fields": ["name", "colour"]})
        self.assertIn("output_fields: unknown field colour", err.args[0])
        err = self.fails({"OP_ID": "OP_NODE_QUERYVOLS", "nodes": ["nosuch"],
                          "output_fields": ["name"]})
        self.assertIn("nosuch", err.args[0])
        self.assertEqual(self.rpc.calls, [])


class VolumeRowsTests(InstanceTestCase):

    def test_one_row_per_physical_volume(self):
        self.assertEqual(storage_units.volume_rows(LVS_REPORT[1:]), [
            {"name": "spread", "vg": "xenvg", "size": 300,
             "dev": "/dev/loop7"},
            {"name": "spread", "vg": "xenvg", "size": 300,
             "dev": "/dev/loop8"}])


class QueryResourcesTests(InstanceTestCase):

    def test_resources_not_answered_here(self):
        for what in ("os", "extstorage", "export"):
            err = self.fails({"OP_ID": "OP_QUERY", "what": what,
                              "fields": ["name"]})
            self.assertIn("Resource %r cannot be queried" % what,
                          err.args[0])
            self.assertEqual(err.args[1], errors.ECODE_INVAL)

    def test_locks_and_jobs_as_luxi_answers_them(self):
        result = self.ok({"OP_ID": "OP_QUERY", "what": "lock",
                          "fields": ["name"],
                          "qfilter": ["=", "name", "cluster/BGL"]})
        self.assertEqual(result["data"], [[[0, "cluster/BGL"]]])
