"""gnt-node and gnt-os: arguments -> opcodes/queries, and their output."""

from twisted.trial import unittest

from ganeti import errors
from ganeti.cli import gnt_node
from ganeti.cli import gnt_os

from tests.test_cli_fakes import FakeClient, run, field, encoded, NODATA


def node(client, *argv):
    return run(gnt_node.commands, argv, client)


def os_(client, *argv):
    return run(gnt_os.commands, argv, client)


NODE_FIELDS = [field("name", "Node"), field("dtotal", "DTotal", "unit"),
               field("dfree", "DFree", "unit"),
               field("mtotal", "MTotal", "unit"),
               field("mnode", "MNode", "unit"),
               field("mfree", "MFree", "unit"),
               field("pinst_cnt", "Pinst", "number"),
               field("sinst_cnt", "Sinst", "number"),
               field("pip", "PrimaryIP"), field("sip", "SecondaryIP"),
               field("master_candidate", "MasterC", "bool"),
               field("drained", "Drained", "bool"),
               field("offline", "Offline", "bool"),
               field("master_capable", "MasterCapable", "bool"),
               field("vm_capable", "VMCapable", "bool"),
               field("powered", "Powered", "bool"),
               field("group", "Group"),
               field("ndparams", "NodeParameters", "other"),
               field("custom_ndparams", "CustomNodeParameters", "other"),
               field("pinst_list", "PriInstances", "other"),
               field("sinst_list", "SecInstances", "other")]
NODE_ROWS = [
    ["node1.example.com", 258048, 81000, 24064, 812, 23244, 1, 0,
     "127.0.0.1", "127.0.0.1", True, False, False, True, True, True,
     "default", {"spindle_count": 1, "ssh_port": 2222}, {"ssh_port": 2222},
     ["inst1"], []],
    ["node2.example.com", NODATA, NODATA, NODATA, NODATA, NODATA, 0, 0,
     "127.0.0.2", "127.0.0.2", False, False, True, True, True, True,
     "default", {}, {}, [], []],
]


class NodeTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()
        self.client.tables["node"] = (NODE_FIELDS, NODE_ROWS)

    def test_list_defaults(self):
        code, out, _ = node(self.client, "list")
        self.assertEqual(self.client.calls[-1][1][1],
                         ["name", "dtotal", "dfree", "mtotal", "mnode",
                          "mfree", "pinst_cnt", "sinst_cnt"])
        self.assertEqual(out.splitlines(), [
            "Node              DTotal DFree MTotal MNode MFree Pinst Sinst",
            "node1.example.com 252.0G 79.1G  23.5G  812M 22.7G     1     0",
            "node2.example.com      ?     ?      ?     ?     ?     0     0"])
        code, out, _ = node(self.client, "list", "--separator", " ",
                            "--no-headers", "-o", "name,mfree")
        self.assertEqual(out, "node1.example.com 23244\nnode2.example.com"
                         " ?\n")

    def test_info(self):
        self.client.tables["node"] = (NODE_FIELDS, NODE_ROWS[:1])
        code, out, err = node(self.client, "info", "node1")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines(), [
            "Node name: node1.example.com",
            "  primary ip: 127.0.0.1",
            "  secondary ip: 127.0.0.1",
            "  master candidate: True",
            "  drained: False",
            "  offline: False",
            "  master_capable: True",
            "  vm_capable: True",
            "  powered: True",
            "  node group: default",
            "  primary for instances: ",
            "    - inst1",
            "  secondary for no instances",
            "  node parameters: ",
            "    spindle_count: default (1)",
            "    ssh_port: 2222"])
        self.assertEqual(self.client.calls[-1][1][2],
                         ["|", ["==", "name", "node1"]])

    def test_add_remove_modify(self):
        node(self.client, "add", "-p", "127.0.0.2", "-s", "10.0.0.2", "-g",
             "default", "--vm-capable", "no", "--node-parameters",
             "spindle_count=2", "node2")
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["node_name"], op["primary_ip"],
                          op["secondary_ip"], op["group"],
                          op["vm_capable"], op["ndparams"]),
                         ("OP_NODE_ADD", "node2", "127.0.0.2", "10.0.0.2",
                          "default", False, {"spindle_count": 2}))
        node(self.client, "remove", "node2")
        self.assertEqual((self.client.op()["OP_ID"],
                          self.client.op()["node_name"]),
                         ("OP_NODE_REMOVE", "node2"))
        self.client.results["OP_NODE_SET_PARAMS"] = [["offline", "True"]]
        code, out, _ = node(self.client, "modify", "--offline", "yes",
                            "--auto-promote", "node2")
        op = self.client.op()
        self.assertEqual((op["offline"], op["auto_promote"],
                          op["master_candidate"]), (True, True, None))
        self.assertEqual(out, "Modified node node2\n - offline -> True\n")
        code, _, err = node(self.client, "modify", "-C", "yes", "-O", "yes",
                            "node2")
        self.assertEqual(code, 1)
        self.assertIn("only one of", err)
        code, _, err = node(self.client, "modify", "node2")
        self.assertEqual((code, err), (1, "Please give at least one of the"
                                      " parameters.\n"))

    def test_master_not_implementing_an_opcode(self):
        self.client.errors["OP_NODE_ADD"] = encoded(errors.OpCodeUnknown(
            "opcode OP_NODE_ADD is not implemented by this master"))
        code, _, err = node(self.client, "add", "node3")
        self.assertEqual(code, 1)
        self.assertEqual(err, "Failure: opcode OP_NODE_ADD is not"
                         " implemented by this master\n")

    def test_list_storage(self):
        self.client.cluster_info = {"enabled_disk_templates": ["file",
                                                               "diskless"]}
        self.client.results["OP_NODE_QUERY_STORAGE"] = [
            ["node1", "file", "/srv/ganeti/file-storage", 258048, 1024,
             81000, True]]
        code, out, err = node(self.client, "list-storage")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["storage_type"], op["nodes"],
                          op["output_fields"]),
                         ("file", [], ["node", "type", "name", "size",
                                       "used", "free", "allocatable"]))
        self.assertEqual(out.splitlines(), [
            "Node  Type Name                       Size Used  Free"
            " Allocatable",
            "node1 file /srv/ganeti/file-storage 252.0G 1.0G 79.1G Y"])
        node(self.client, "list-storage", "-t", "lvm-vg", "node1")
        op = self.client.op()
        self.assertEqual((op["storage_type"], op["nodes"]),
                         ("lvm-vg", ["node1"]))

    def test_volumes(self):
        self.client.results["OP_NODE_QUERYVOLS"] = [
            ["node1", "/dev/loop7", "xenvg", "d0", "2048", "inst1"],
            ["node1", "/dev/loop7", "xenvg", "spare", "300", "-"]]
        code, out, err = node(self.client, "volumes")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["nodes"], op["output_fields"]),
                         ([], ["node", "phys", "vg", "name", "size",
                               "instance"]))
        self.assertEqual(out.splitlines(), [
            "Node  PhysDev    VG    Name  Size Instance",
            "node1 /dev/loop7 xenvg d0    2.0G inst1",
            "node1 /dev/loop7 xenvg spare 300M -"])
        self.client.results["OP_NODE_QUERYVOLS"] = [["d0", "2048"]]
        code, out, _ = node(self.client, "volumes", "--no-headers",
                            "--separator", "|", "-o", "name,size", "node1")
        op = self.client.op()
        self.assertEqual((op["nodes"], op["output_fields"]),
                         (["node1"], ["name", "size"]))
        self.assertEqual(out, "d0|2048\n")

    def test_volumes_unknown_field(self):
        code, _, err = node(self.client, "volumes", "-o", "name,colour")
        self.assertNotEqual(code, 0)
        self.assertIn("colour", err)
        self.assertEqual(self.client.jobs, {})

    def test_tags(self):
        node(self.client, "add-tags", "node1", "rack:1")
        op = self.client.op()
        self.assertEqual((op["kind"], op["name"], op["tags"]),
                         ("node", "node1", ["rack:1"]))


class PowerTests(unittest.TestCase):
    """gnt-node power / health: OP_OOB_COMMAND and its per-node rows."""

    def test_power_status_and_failures(self):
        client = FakeClient()
        client.results["OP_OOB_COMMAND"] = [
            [[0, "node2.example.com"], [0, {"powered": True}]],
            [[0, "node3.example.com"], [2, "ipmi failed with exit code 1"]]]
        code, out, err = node(client, "power", "status", "node2", "node3")
        self.assertEqual(code, 1, err)
        op = client.op()
        self.assertEqual((op["OP_ID"], op["command"], op["node_names"]),
                         ("OP_OOB_COMMAND", "power-status",
                          ["node2", "node3"]))
        self.assertIn("node2.example.com: power on", out)
        self.assertIn("node3.example.com: power-status failed: ipmi failed",
                      out)

    def test_power_off_and_health(self):
        client = FakeClient()
        client.results["OP_OOB_COMMAND"] = [
            [[0, "node2.example.com"], [0, True]]]
        code, out, err = node(client, "power", "--force", "--ignore-status",
                              "off", "node2")
        self.assertEqual(code, 0, err)
        op = client.op()
        self.assertEqual((op["command"], op["ignore_status"]),
                         ("power-off", True))
        self.assertIn("node2.example.com: power-off done", out)
        client.results["OP_OOB_COMMAND"] = [
            [[0, "node2.example.com"], [0, [["PSU", "OK"],
                                            ["fan", "WARNING"]]]]]
        code, out, err = node(client, "health", "node2")
        self.assertEqual(code, 0, err)
        self.assertIn("node2.example.com: PSU=OK, fan=WARNING", out)
        code, out, err = node(client, "power", "on")
        self.assertNotEqual(code, 0)


class OsTests(unittest.TestCase):

    def test_list(self):
        client = FakeClient()
        client.results["OP_OS_DIAGNOSE"] = [["busybox", ["minimal",
                                                         "default"]],
                                            ["plain", []]]
        code, out, err = os_(client, "list")
        self.assertEqual(code, 0, err)
        self.assertEqual(out, "Name\nbusybox+default\nbusybox+minimal\n"
                         "plain\n")
        self.assertEqual(client.op()["output_fields"], ["name", "variants"])
        code, out, err = os_(client, "list", "--no-headers")
        self.assertEqual(out.splitlines()[0], "busybox+default")

    def test_diagnose(self):
        client = FakeClient()
        client.results["OP_OS_DIAGNOSE"] = [
            ["busybox", True, ["default"], {
                "node1": [["/srv/os/busybox", True, "", ["default"], [],
                           [20], True]]}, False, False],
            ["broken", False, [], {
                "node1": [["/srv/os/broken", False,
                           "missing create script", [], [], [], True]],
                "node2": []}, False, True]]
        code, out, err = os_(client, "diagnose")
        self.assertEqual(code, 1)
        self.assertEqual(out.splitlines(), [
            "OS: busybox [global status: valid]",
            "  Variants: [default]",
            "  Node: node1, status: valid (path: /srv/os/busybox)",
            "",
            "OS: broken [global status: invalid] [blacklisted]",
            "  Node: node1, status: invalid - missing create script (path:"
            " /srv/os/broken)",
            "  Node: node2, status: not found",
            ""])

    def test_info(self):
        client = FakeClient()
        client.results["OP_OS_DIAGNOSE"] = [
            ["busybox", True, ["default", "minimal"],
             [["motd", "message of the day"]], [15, 20], False, False, {},
             {}, True]]
        code, out, err = os_(client, "info", "busybox+default")
        self.assertEqual(code, 0, err)
        self.assertEqual(client.op()["names"], ["busybox"])
        self.assertEqual(out.splitlines(), [
            "OS: busybox", "  valid: True", "  hidden: False",
            "  blacklisted: False", "  trusted: True",
            "  API versions: 15, 20", "  variants: default, minimal",
            "  parameters: ", "    motd: message of the day", ""])

    def test_modify(self):
        client = FakeClient()
        code, _, err = os_(client, "modify", "-H", "kvm:kernel_args=quiet",
                           "-O", "motd=hi", "--hidden", "yes",
                           "--blacklisted", "no", "busybox+default")
        self.assertEqual(code, 0, err)
        op = client.op()
        self.assertEqual(op["OP_ID"], "OP_CLUSTER_SET_PARAMS")
        self.assertEqual(op["os_hvp"], {"busybox+default": {
            "kvm": {"kernel_args": "quiet"}}})
        self.assertEqual(op["osparams"], {"busybox+default": {"motd": "hi"}})
        self.assertEqual(op["hidden_os"], [["add", "busybox+default"]])
        self.assertEqual(op["blacklisted_os"],
                         [["remove", "busybox+default"]])
        code, _, err = os_(client, "modify", "busybox")
        self.assertEqual(code, 1)
