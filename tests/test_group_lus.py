"""Node group logical units with a fake RPC and a Clock."""

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import cmdlib
from ganeti import errors
from ganeti import locking
from ganeti import mcpu
from ganeti import objects
from ganeti import opcodes

from tests.fakes import ClockTestCase
from tests.test_config import make_store

MASTER = "node1.example.com"
NODE2 = "node2.example.com"
NODE3 = "node3.example.com"


class GroupTestCase(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.cfg = make_store(self)
        for name, ip in ((NODE2, "127.0.0.2"), (NODE3, "127.0.0.3")):
            self.cfg.add_node(objects.Node(name=name, primary_ip=ip))
        self.glm = mcpu.make_lock_manager(self.cfg, self.clock)
        self.ctx = mcpu.MasterContext(cfg=self.cfg, glm=self.glm,
                                      clock=self.clock)
        self.proc = mcpu.Processor(self.ctx, cmdlib.LOGICAL_UNITS)
        self.log = []
        self.job = 0
        self.default = self.cfg.get_nodegroup("default").uuid

    def tearDown(self):
        for lock in self.glm.query_locks():
            self.assertEqual(lock["owners"], [], lock)
        ClockTestCase.tearDown(self)

    def run_op(self, op):
        self.job += 1
        # the processor gets OpCode objects, loaded where jobs come in
        return defer.maybeDeferred(opcodes.from_dict, op).addCallback(
            lambda op: self.proc.execute(self.job, 0, op, self.log.append))

    def ok(self, op_id, **params):
        params["OP_ID"] = op_id
        return self.successResultOf(self.run_op(params))

    def fails(self, op_id, kind=errors.OpPrereqError, **params):
        params["OP_ID"] = op_id
        return self.failureResultOf(self.run_op(params), kind).value

    def group_of(self, node):
        return self.cfg.nodegroups[self.cfg.get_node(node).group].name

    def group_locks(self):
        return self.glm.lockset(locking.LEVEL_NODEGROUP).list_names()


class GroupTests(GroupTestCase):

    def test_add(self):
        self.ok("OP_GROUP_ADD", group_name="rack2",
                alloc_policy="last_resort", ndparams={"spindle_count": 2},
                diskparams={"plain": {"stripes": 2}},
                ipolicy={"vcpu-ratio": 2.0},
                hv_state={"fake": {"mem_total": 1}})
        group = self.cfg.get_nodegroup("rack2")
        self.assertEqual(group.alloc_policy, "last_resort")
        self.assertEqual(group.ndparams, {"spindle_count": 2})
        self.assertEqual(group.diskparams, {"plain": {"stripes": 2}})
        self.assertEqual(group.ipolicy, {"vcpu-ratio": 2.0})
        self.assertEqual(group.hv_state_static, {"fake": {"mem_total": 1}})
        self.assertIn(group.uuid, self.group_locks())

    def test_add_refusals(self):
        err = self.fails("OP_GROUP_ADD", group_name="default")
        self.assertIn("Node group 'default' already exists", str(err))
        self.assertEqual(err.args[1], errors.ECODE_EXISTS)
        err = self.fails("OP_GROUP_ADD", group_name="g",
                         ndparams={"colour": 1})
        self.assertIn("unknown node parameter 'colour'", str(err))
        err = self.fails("OP_GROUP_ADD", group_name="g",
                         diskparams={"plain": {"colour": 1}})
        self.assertIn("diskparams/plain: unknown parameter colour", str(err))
        err = self.fails("OP_GROUP_ADD", group_name="g",
                         ipolicy={"std": {}})
        self.assertIn("std (the standard instance specs) can only be set for"
                      " the cluster", str(err))
        err = self.fails("OP_GROUP_ADD", group_name="g",
                         ipolicy={"vcpu-ratio": -1})
        self.assertIn("ipolicy/vcpu-ratio: expected a positive number",
                      str(err))
        self.assertEqual(len(self.cfg.nodegroups), 1)
        # exclusive_storage is fine for a group
        self.ok("OP_GROUP_ADD", group_name="g",
                ndparams={"exclusive_storage": True})

    def test_rename_keeps_the_uuid(self):
        self.ok("OP_GROUP_ADD", group_name="rack2")
        uuid = self.cfg.get_nodegroup("rack2").uuid
        self.ok("OP_GROUP_ASSIGN_NODES", group_name="rack2", nodes=[NODE3])
        self.assertEqual(self.ok("OP_GROUP_RENAME", group_name="rack2",
                                 new_name="rack9"), "rack9")
        self.assertEqual(self.cfg.get_nodegroup("rack9").uuid, uuid)
        self.assertEqual(self.cfg.get_node(NODE3).group, uuid)
        self.assertEqual(self.group_of(NODE3), "rack9")
        err = self.fails("OP_GROUP_RENAME", group_name="rack9",
                         new_name="default")
        self.assertIn("already exists", str(err))
        err = self.fails("OP_GROUP_RENAME", group_name="nope",
                         new_name="x")
        self.assertIn("node group 'nope' is not known", str(err))

    def test_remove(self):
        self.ok("OP_GROUP_ADD", group_name="rack2")
        uuid = self.cfg.get_nodegroup("rack2").uuid
        self.ok("OP_GROUP_ASSIGN_NODES", group_name="rack2",
                nodes=[NODE2, NODE3])
        err = self.fails("OP_GROUP_REMOVE", group_name="rack2")
        self.assertIn("Node group 'rack2' is not empty; it has the nodes"
                      " %s, %s" % (NODE2, NODE3), str(err))
        self.ok("OP_GROUP_ASSIGN_NODES", group_name="default",
                nodes=[NODE2, NODE3])
        self.ok("OP_GROUP_REMOVE", group_name="rack2")
        self.assertNotIn(uuid, self.cfg.nodegroups)
        self.assertNotIn(uuid, self.group_locks())
        self.ok("OP_GROUP_ASSIGN_NODES", group_name="default",
                nodes=[MASTER])
        self.ok("OP_GROUP_RENAME", group_name="default", new_name="only")
        # the last group stays (it still has nodes, too)
        err = self.fails("OP_GROUP_REMOVE", group_name="only")
        self.assertIn("is not empty", str(err))

    def test_remove_last_group(self):
        self.ok("OP_GROUP_ADD", group_name="rack2")
        self.ok("OP_GROUP_ASSIGN_NODES", group_name="rack2",
                nodes=[MASTER, NODE2, NODE3])
        self.ok("OP_GROUP_REMOVE", group_name="default")
        err = self.fails("OP_GROUP_ASSIGN_NODES", group_name="default",
                         nodes=[NODE2])
        self.assertIn("node group 'default' is not known", str(err))
        self.cfg.remove_node(NODE2)
        self.cfg.remove_node(NODE3)
        # the group still has the master; a group never empties by itself
        err = self.fails("OP_GROUP_REMOVE", group_name="rack2")
        self.assertIn("not empty", str(err))

    def test_set_params(self):
        self.ok("OP_GROUP_ADD", group_name="rack2",
                ndparams={"spindle_count": 2, "ssh_port": 2222})
        result = self.ok("OP_GROUP_SET_PARAMS", group_name="rack2",
                         alloc_policy="unallocable",
                         ndparams={"ssh_port": "default"},
                         diskparams={"plain": {"stripes": 3}},
                         ipolicy={"spindle-ratio": 8.0})
        group = self.cfg.get_nodegroup("rack2")
        self.assertEqual(group.alloc_policy, "unallocable")
        self.assertEqual(group.ndparams, {"spindle_count": 2})
        self.assertEqual(group.diskparams, {"plain": {"stripes": 3}})
        self.assertEqual(group.ipolicy, {"spindle-ratio": 8.0})
        self.assertEqual([r[0] for r in result],
                         ["alloc_policy", "diskparams", "ipolicy",
                          "ndparams"])
        err = self.fails("OP_GROUP_SET_PARAMS", group_name="rack2")
        self.assertIn("at least one modification", str(err))
        err = self.fails("OP_GROUP_SET_PARAMS", group_name="rack2",
                         alloc_policy="sometimes")
        self.assertIn("alloc_policy", str(err))

    def test_assign_nodes_and_split_instances(self):
        self.ok("OP_GROUP_ADD", group_name="rack2")
        inst = objects.Instance(name="inst1", primary_node=NODE2,
                                secondary_nodes=[NODE3], os="b",
                                hypervisor="fake",
                                nics=[objects.NIC(mac="aa:00:00:00:00:01")])
        self.cfg.add_instance(inst)
        err = self.fails("OP_GROUP_ASSIGN_NODES", group_name="rack2",
                         nodes=[NODE3])
        self.assertIn("would split these instances between node groups:"
                      " inst1; give --force", str(err))
        self.assertEqual(self.group_of(NODE3), "default")
        # moving both keeps it whole
        self.ok("OP_GROUP_ASSIGN_NODES", group_name="rack2",
                nodes=[NODE2, NODE3])
        self.assertEqual((self.group_of(NODE2), self.group_of(NODE3)),
                         ("rack2", "rack2"))
        self.assertIn("Moved node %s from group default to rack2" % NODE2,
                      self.log)
        # force: split, with a warning; again: it stays split
        self.ok("OP_GROUP_ASSIGN_NODES", group_name="default",
                nodes=[NODE3], force=True)
        self.assertIn("WARNING: This splits these instances between node"
                      " groups: inst1", self.log)
        self.ok("OP_GROUP_ADD", group_name="rack3")
        self.log[:] = []
        self.ok("OP_GROUP_ASSIGN_NODES", group_name="rack3",
                nodes=[NODE3], force=False)
        self.assertEqual(self.group_of(NODE3), "rack3")
        # an unknown node, no nodes
        err = self.fails("OP_GROUP_ASSIGN_NODES", group_name="rack2",
                         nodes=["nope"])
        self.assertIn("node 'nope' is not known", str(err))
        err = self.fails("OP_GROUP_ASSIGN_NODES", group_name="rack2",
                         nodes=[])
        self.assertIn("give at least one node", str(err))
        # a node already there: nothing to do
        serial = self.cfg.serial_no
        self.ok("OP_GROUP_ASSIGN_NODES", group_name="rack2", nodes=[NODE2])
        self.assertEqual(self.cfg.serial_no, serial)


class CommandLineTests(unittest.TestCase):
    """gnt-group (and gnt-node add --join-fingerprint) -> opcodes, with a
    fake master."""

    def setUp(self):
        from tests.test_cli_fakes import FakeClient, field
        self.client = FakeClient()
        self.client.tables["group"] = (
            [field("name", "Group"), field("node_cnt", "Nodes", "number"),
             field("pinst_cnt", "Instances", "number"),
             field("alloc_policy", "AllocPolicy"),
             field("ndparams", "NDParams", "other")],
            [["default", 2, 1, "preferred", {"spindle_count": 1}],
             ["rack2", 1, 0, "last_resort", {}]])

    def group(self, *argv):
        from ganeti.cli import gnt_group
        from tests.test_cli_fakes import run
        return run(gnt_group.commands, argv, self.client)

    def test_add_and_modify(self):
        code, out, err = self.group(
            "add", "--alloc-policy", "last_resort", "--node-parameters",
            "spindle_count=2,exclusive_storage=yes", "-D",
            "plain:stripes=2", "--hypervisor-state", "fake:mem_total=1024",
            "--disk-state", "plain/xenvg:disk_reserved=4096",
            "--ipolicy-vcpu-ratio", "3", "--ipolicy-disk-templates",
            "plain,file", "--ipolicy-bounds-specs",
            "min:memory-size=256M,cpu-count=1,disk-size=2G,disk-count=1,"
            "nic-count=0,spindle-use=1/max:memory-size=64G,cpu-count=32,"
            "disk-size=2T,disk-count=4,nic-count=2,spindle-use=4", "rack2")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual(op["OP_ID"], "OP_GROUP_ADD")
        self.assertEqual(op["group_name"], "rack2")
        self.assertEqual(op["alloc_policy"], "last_resort")
        self.assertEqual(op["ndparams"], {"spindle_count": 2,
                                          "exclusive_storage": True})
        self.assertEqual(op["diskparams"], {"plain": {"stripes": 2}})
        self.assertEqual(op["hv_state"], {"fake": {"mem_total": 1024}})
        self.assertEqual(op["disk_state"],
                         {"plain": {"xenvg": {"disk_reserved": 4096}}})
        self.assertEqual(op["ipolicy"], {
            "vcpu-ratio": 3.0, "disk-templates": ["plain", "file"],
            "minmax": [{"min": {"memory-size": 256, "cpu-count": 1,
                                "disk-size": 2048, "disk-count": 1,
                                "nic-count": 0, "spindle-use": 1},
                        "max": {"memory-size": 65536, "cpu-count": 32,
                                "disk-size": 2 * 1024 * 1024,
                                "disk-count": 4, "nic-count": 2,
                                "spindle-use": 4}}]})
        self.client.results["OP_GROUP_SET_PARAMS"] = [
            ["alloc_policy", "preferred"]]
        code, out, err = self.group("modify", "--alloc-policy", "preferred",
                                    "rack2")
        self.assertEqual(code, 0, err)
        self.assertEqual(out, "Modified node group rack2\n"
                         " - alloc_policy -> preferred\n")
        code, out, err = self.group("modify", "rack2")
        self.assertEqual(code, 1)
        self.assertIn("at least one of the parameters", err)
        code, out, err = self.group("add", "-D", "nosuch:x=1", "g")
        self.assertNotEqual(code, 0)
        self.assertIn("unknown disk template 'nosuch'", err)

    def test_other_commands(self):
        for argv, expected in (
                (("assign-nodes", "rack2", "n2", "n3"),
                 {"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "rack2",
                  "nodes": ["n2", "n3"], "force": False}),
                (("assign-nodes", "--force", "rack2", "n2"),
                 {"OP_ID": "OP_GROUP_ASSIGN_NODES", "nodes": ["n2"],
                  "force": True}),
                (("rename", "rack2", "rack9"),
                 {"OP_ID": "OP_GROUP_RENAME", "group_name": "rack2",
                  "new_name": "rack9"}),
                (("remove", "rack9"),
                 {"OP_ID": "OP_GROUP_REMOVE", "group_name": "rack9"}),
                (("add-tags", "rack2", "a", "b"),
                 {"OP_ID": "OP_TAGS_SET", "kind": "nodegroup",
                  "name": "rack2", "tags": ["a", "b"]})):
            code, out, err = self.group(*argv)
            self.assertEqual(code, 0, (argv, err))
            op = self.client.op()
            for key, value in expected.items():
                self.assertEqual(op[key], value, argv)

    def test_list(self):
        code, out, err = self.group("list")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines(), [
            "Group   Nodes Instances AllocPolicy NDParams",
            "default     2         1 preferred   spindle_count=1",
            "rack2       1         0 last_resort (empty)"])

    def test_node_add_join_fingerprint(self):
        from ganeti.cli import gnt_node
        from tests.test_cli_fakes import run
        fp = "SHA256:" + ":".join(["AB"] * 32)
        code, out, err = run(gnt_node.commands,
                             ["add", "-p", "127.0.0.2", "--join-fingerprint",
                              fp, "node2"], self.client)
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["node_name"], op["primary_ip"],
                          op["join_fingerprint"]),
                         ("OP_NODE_ADD", "node2", "127.0.0.2", fp))
        # without a terminal nobody is asked: the master explains
        code, out, err = run(gnt_node.commands,
                             ["add", "-p", "127.0.0.3", "node3"], self.client)
        self.assertEqual(code, 0, err)
        self.assertNotIn("join_fingerprint", self.client.op())


class GroupInfoTests(unittest.TestCase):

    def test_info(self):
        from ganeti.cli import gnt_group
        from tests.test_cli_fakes import FakeClient, field, run
        client = FakeClient()
        client.tables["group"] = (
            [field(name) for name in gnt_group.INFO_FIELDS],
            [["rack2", {"spindle_count": 2, "ssh_port": 22},
              {"spindle_count": 2}, {"plain": {"stripes": 1}}, {},
              {"vcpu-ratio": 4.0, "spindle-ratio": 32.0},
              {"vcpu-ratio": 4.0}]])
        code, out, err = run(gnt_group.commands, ["info", "rack2"], client)
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines(), [
            "Node group: rack2",
            "  Node parameters: ",
            "    spindle_count: 2",
            "    ssh_port: default (22)",
            "  Disk parameters: ",
            "    plain: ",
            "      stripes: default (1)",
            "  Instance policy: ",
            "    spindle-ratio: default (32.0)",
            "    vcpu-ratio: 4.0"])
