"""The query opcodes: OP_QUERY, OP_QUERY_FIELDS, OP_CLUSTER_CONFIG_QUERY
and OP_NODE_QUERYVOLS, run by the opcode processor against fake node
daemons (tests.test_cmdlib_instance)."""

import json

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import errors
from ganeti import objects
from ganeti import opcodes
from ganeti import query
from ganeti.server.noded import storage_units

from tests import ganeti_peer
from tests.inprocess import start_master
from tests.test_cmdlib_instance import (BUSYBOX, NODE1, NODE2,
                                       InstanceRpc, InstanceTestCase)


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

    def test_every_resource_of_the_opcode_is_answered(self):
        for what in sorted(opcodes.QUERY_KINDS):
            namefield = query.RESOURCES[what].namefield
            result = self.ok({"OP_ID": "OP_QUERY_FIELDS", "what": what,
                              "fields": [namefield]})
            self.assertEqual(result["fields"][0]["name"], namefield)
            self.assertNotEqual(result["fields"][0]["kind"], "unknown",
                                what)

    def test_exports_from_the_nodes(self):
        self.rpc.answers[(NODE1, "export_list")] = ["inst1.example.com"]
        self.rpc.answers[(NODE2, "export_list")] = []
        result = self.ok({"OP_ID": "OP_QUERY", "what": "export",
                          "fields": ["node", "export"]})
        self.assertEqual(result["data"], [[[0, NODE1],
                                           [0, "inst1.example.com"]]])
        self.assertEqual(sorted(c.node for c in self.rpc.calls),
                         [NODE1, NODE2])
        fields = self.ok({"OP_ID": "OP_QUERY_FIELDS", "what": "export"})
        self.assertEqual([f["name"] for f in fields["fields"]],
                         ["export", "node"])

    def test_locks_and_jobs_as_luxi_answers_them(self):
        result = self.ok({"OP_ID": "OP_QUERY", "what": "lock",
                          "fields": ["name"],
                          "qfilter": ["=", "name", "cluster/BGL"]})
        self.assertEqual(result["data"], [[[0, "cluster/BGL"]]])


OS_FIELDS = ["name", "valid", "hidden", "blacklisted", "variants",
             "api_versions", "parameters", "node_status", "os_hvp",
             "osparams", "trusted"]
BUSYBOX_PARAMS = [["fail_create", "fail"], ["motd", "message"]]


def node_entry(os_data, trusted=True):
    """The node_status entry of one OS a node found."""
    return [os_data["path"], os_data["valid"], os_data["status"],
            os_data["variants"], os_data["parameters"],
            os_data["api_versions"], trusted]


class OsQueryTests(InstanceTestCase):
    """OP_QUERY of the "os" resource: the nodes' os_diagnose answers,
    merged as OP_OS_DIAGNOSE merges them."""

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.debian = dict(BUSYBOX, name="debian", path="/srv/os/debian",
                           variants=[], api_versions=[20])
        self.rpc.os_list[NODE1].append(dict(self.debian))
        self.rpc.os_list[NODE2].append(dict(self.debian))

    def rows(self, fields=OS_FIELDS, qfilter=None, what="os"):
        result = self.ok({"OP_ID": "OP_QUERY", "what": what,
                          "fields": list(fields), "qfilter": qfilter})
        self.assertEqual([f["name"] for f in result["fields"]],
                         list(fields))
        for row in result["data"]:
            self.assertEqual([status for status, _ in row],
                             [query.RS_NORMAL] * len(fields))
        return [dict(zip(fields, (value for _, value in row)))
                for row in result["data"]]

    def test_values_merged_from_every_node(self):
        # node2 has only one variant of busybox, and an untrusted one
        self.rpc.os_list[NODE2][0] = dict(BUSYBOX, variants=["default"],
                                          trusted=False)
        self.cfg.set_cluster_params(
            hidden_os=["debian"], blacklisted_os=["busybox"],
            os_hvp={"busybox+default": {"kvm": {"acpi": False}},
                    "busybox+minimal": {"kvm": {"acpi": True}}},
            osparams={"busybox+default": {"motd": "hello"}})
        busybox, debian = self.rows()
        self.assertEqual(busybox, {
            "name": "busybox", "valid": True, "hidden": False,
            "blacklisted": True, "variants": ["default"],
            "api_versions": [15, 20], "parameters": BUSYBOX_PARAMS,
            "node_status": {
                NODE1: [node_entry(BUSYBOX)],
                NODE2: [node_entry(dict(BUSYBOX, variants=["default"]),
                                   trusted=False)]},
            # only the variant every node has
            "os_hvp": {"busybox+default": {"kvm": {"acpi": False}}},
            "osparams": {"busybox+default": {"motd": "hello"}},
            "trusted": False})
        self.assertEqual((debian["name"], debian["hidden"],
                          debian["blacklisted"], debian["trusted"],
                          debian["variants"], debian["api_versions"]),
                         ("debian", True, False, True, [], [20]))
        self.assertEqual(sorted(c.node for c in self.rpc.calls
                                if c.procedure == "os_diagnose"),
                         [NODE1, NODE2])

    def test_private_parameters_not_shown(self):
        self.cfg.set_cluster_params(
            osparams={"busybox+default": {"motd": "hello"}},
            osparams_private_cluster={
                "busybox+default": {"root_password": "s3cret"}})
        result = self.ok({"OP_ID": "OP_QUERY", "what": "os",
                          "fields": OS_FIELDS})
        self.assertIn("hello", json.dumps(result))
        self.assertNotIn("s3cret", json.dumps(result, default=str))

    def test_same_values_as_os_diagnose(self):
        self.rpc.os_list[NODE2][0] = dict(BUSYBOX, variants=["minimal"])
        diagnose = self.ok({"OP_ID": "OP_OS_DIAGNOSE",
                            "output_fields": OS_FIELDS, "names": []})
        rows = self.rows()
        self.assertEqual([[r[f] for f in OS_FIELDS] for r in rows],
                         diagnose)
        self.assertEqual(rows[0]["variants"], ["minimal"])

    def test_missing_on_a_node_is_invalid_there(self):
        self.rpc.os_list[NODE2] = [dict(self.debian)]
        busybox, debian = self.rows(["name", "valid", "variants",
                                     "parameters", "node_status"])
        self.assertEqual(busybox["valid"], False)
        self.assertEqual(busybox["variants"], [])
        self.assertEqual(busybox["parameters"], [])
        self.assertEqual(busybox["node_status"][NODE2], [])
        self.assertEqual(debian["valid"], True)

    def test_filters(self):
        self.cfg.set_cluster_params(hidden_os=["debian"])
        rows = self.rows(["name", "valid"], ["=", "name", "busybox"])
        self.assertEqual(rows, [{"name": "busybox", "valid": True}])
        rows = self.rows(["name"], ["!", ["?", "hidden"]])
        self.assertEqual(rows, [{"name": "busybox"}])
        rows = self.rows(["name"], ["=[]", "variants", "minimal"])
        self.assertEqual(rows, [{"name": "busybox"}])
        err = self.fails({"OP_ID": "OP_QUERY", "what": "os",
                          "fields": ["name"],
                          "qfilter": ["=", "name", "nosuch"]})
        self.assertIn("nosuch", err.args[0])
        self.assertEqual(err.args[1], errors.ECODE_NOENT)

    def test_offline_and_unanswering_nodes_left_out(self):
        self.cfg.set_node_params(NODE2, offline=True,
                                 master_candidate=False)
        (busybox, _) = self.rows(["name", "node_status"])
        self.assertEqual(list(busybox["node_status"]), [NODE1])
        self.assertEqual([c.node for c in self.rpc.calls], [NODE1])
        self.cfg.set_node_params(NODE2, offline=False)
        self.rpc.os_list[NODE1][0] = dict(BUSYBOX, variants=["minimal"])
        self.rpc.fail[(NODE2, "os_diagnose")] = "connection refused"
        (busybox, _) = self.rows(["name", "valid", "variants",
                                  "node_status"])
        # the node that did not answer makes nothing invalid
        self.assertEqual((busybox["valid"], busybox["variants"],
                          list(busybox["node_status"])),
                         (True, ["minimal"], [NODE1]))

    def test_query_fields(self):
        result = self.ok({"OP_ID": "OP_QUERY_FIELDS", "what": "os"})
        defs = {f["name"]: f for f in result["fields"]}
        self.assertEqual(sorted(defs), sorted(OS_FIELDS))
        self.assertEqual(defs["api_versions"]["title"], "ApiVersions")
        self.assertEqual(defs["os_hvp"]["title"], "OsHypervisorParams")
        self.assertEqual({n for n, f in defs.items() if f["kind"] == "bool"},
                         {"valid", "hidden", "blacklisted", "trusted"})
        # nothing is asked for the definitions
        self.assertEqual(self.rpc.calls, [])

    def test_without_node_daemons_a_clear_error(self):
        err = self.failureResultOf(query.QueryContext(self.cfg).query(
            "os", ["name"]), errors.OpPrereqError).value
        self.assertIn("OS information is not available", err.args[0])
        self.assertEqual(err.args[1], errors.ECODE_ENVIRON)


def provider(name, valid=True, status="", params=(("pool", "p"),)):
    return {"name": name, "path": "/srv/ganeti/extstorage/" + name,
            "valid": valid, "status": status,
            "parameters": [list(p) for p in params]}


class ExtStorageQueryTests(InstanceTestCase):
    """OP_QUERY of the "extstorage" resource."""

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.cfg.add_nodegroup(objects.NodeGroup(name="rack2"))
        self.cfg.add_node(objects.Node(
            name="node3.example.com", primary_ip="127.0.0.3",
            group=self.cfg.get_nodegroup("rack2").uuid))
        self.rpc.answers["extstorage_diagnose"] = [
            provider("rbd", params=[("pool", "p"), ("extra", "e")]),
            provider("gluster")]

    def rows(self, fields, qfilter=None):
        result = self.ok({"OP_ID": "OP_QUERY", "what": "extstorage",
                          "fields": fields, "qfilter": qfilter})
        return [[value for _, value in row] for row in result["data"]]

    def test_values_merged_from_every_node(self):
        self.rpc.answers[(NODE2, "extstorage_diagnose")] = [
            provider("rbd", valid=False, status="script attach missing"),
            provider("gluster")]
        self.rpc.answers[("node3.example.com", "extstorage_diagnose")] = [
            provider("rbd")]
        rows = self.rows(["name", "node_status", "nodegroup_status",
                          "parameters"])
        self.assertEqual([r[0] for r in rows], ["gluster", "rbd"])
        gluster, rbd = rows
        self.assertEqual(rbd[1], {
            NODE1: [["/srv/ganeti/extstorage/rbd", True, "",
                     [["pool", "p"], ["extra", "e"]]]],
            NODE2: [["/srv/ganeti/extstorage/rbd", False,
                     "script attach missing", [["pool", "p"]]]],
            "node3.example.com": [["/srv/ganeti/extstorage/rbd", True, "",
                                   [["pool", "p"]]]]})
        self.assertEqual(rbd[2], {"default": False, "rack2": True})
        # what the valid nodes agree on
        self.assertEqual(rbd[3], [["pool", "p"]])
        self.assertEqual(gluster[1]["node3.example.com"], [])
        self.assertEqual(gluster[2], {"default": True, "rack2": False})

    def test_filter_and_fields(self):
        self.assertEqual(self.rows(["name"], ["=", "name", "rbd"]),
                         [["rbd"]])
        self.assertEqual(self.rows(["name", "parameters"],
                                   ["=~", "name", "^g"]),
                         [["gluster", [["pool", "p"]]]])
        result = self.ok({"OP_ID": "OP_QUERY_FIELDS", "what": "extstorage",
                          "fields": ["nodegroup_status", "colour"]})
        self.assertEqual([(f["name"], f["title"], f["kind"])
                          for f in result["fields"]],
                         [("nodegroup_status", "NodegroupStatus", "other"),
                          ("colour", "colour", "unknown")])

    def test_offline_node_not_asked(self):
        self.cfg.set_node_params("node3.example.com", offline=True,
                                 master_candidate=False)
        rows = self.rows(["name", "nodegroup_status"])
        self.assertEqual(rows, [["gluster", {"default": True}],
                                ["rbd", {"default": True}]])
        self.assertEqual(sorted(c.node for c in self.rpc.calls),
                         [NODE1, NODE2])


# Ganeti's own client: an OP_QUERY job of the os resource (as Ganeti's
# clients get OS rows), its result polled as gnt-* commands poll; then
# luxi's QueryFields and Query of the same resource.
_GANETI_OS_QUERY = """
import json, sys
from ganeti import cli, luxi, opcodes
client = luxi.Client(address=sys.argv[1])
op = opcodes.OpQuery(what="os", fields=["name", "valid", "variants",
                                        "trusted"],
                     qfilter=["=", "name", "busybox"])
out = {"job": cli.SubmitOpCode(op, cl=client, feedback_fn=lambda msg: None)}
out["fields"] = client.QueryFields("os", ["api_versions", "nosuch"]).ToDict()
out["luxi"] = client.Query("extstorage", ["name"], None).ToDict()
print(json.dumps(out))
"""


class GanetiClientOsQueryTests(unittest.TestCase):
    """Ganeti 3.0's luxi client and opcodes against a master in this
    process whose node daemons are fakes."""

    if ganeti_peer.unavailable_reason():
        skip = ganeti_peer.unavailable_reason()

    @defer.inlineCallbacks
    def test_os_rows_through_ganeti_client(self):
        master, _client = yield start_master(self, "osq")
        rpc = master.ctx.rpc = InstanceRpc()
        rpc.answers["extstorage_diagnose"] = [provider("rbd")]
        out, err, code = yield ganeti_peer.run_python(
            _GANETI_OS_QUERY, [master.ctx.paths.master_socket])
        self.assertEqual(code, 0, out + err)
        result = json.loads(out)
        self.assertEqual(result["job"]["data"], [[
            [0, "busybox"], [0, True], [0, ["default", "minimal"]],
            [0, True]]])
        self.assertEqual(
            [(f["name"], f["title"], f["kind"])
             for f in result["fields"]["fields"]],
            [("api_versions", "ApiVersions", "other"),
             ("nosuch", "nosuch", "unknown")])
        self.assertEqual(result["luxi"]["data"], [[[0, "rbd"]]])
        self.assertEqual(sorted({c.procedure for c in rpc.calls}),
                         ["extstorage_diagnose", "os_diagnose"])
