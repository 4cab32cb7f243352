"""Names given to new objects are checked in the opcode, before any job
exists: host names for instances, nodes and the cluster (as Ganeti takes
them), safe names for node groups and networks, OS names."""

from twisted.trial import unittest

from ganeti import errors
from ganeti import opcodes

HOSTILE = ["a/b.example.com", "x y", "-rf", "semi;colon",
           "../../../tmp/x", ".", "..", "a..b", ".lead", "tab\tname",
           "new\nline", "nul\x00", "ünï", "a" * 256, "$(reboot)", "`id`",
           "*", "a|b"]


def create(name, **params):
    data = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
            "mode": "create", "disk_template": "diskless", "disks": [],
            "nics": [], "os_type": "debootstrap+default"}
    data.update(params)
    return opcodes.from_dict(data)


class HostNameTests(unittest.TestCase):

    def test_hostile_instance_names_are_refused_naming_the_field(self):
        for name in HOSTILE:
            err = self.assertRaises(errors.OpPrereqError, create, name)
            self.assertIn("instance_name", str(err))
            self.assertIn("host name", str(err))

    def test_only_a_forthcoming_instance_may_lack_a_name(self):
        # the name may come when the reservation is committed
        self.assertEqual(create("", forthcoming=True).instance_name, "")

    def test_names_are_taken_in_lower_case_without_a_trailing_dot(self):
        self.assertEqual(create("Web1.Example.COM.").instance_name,
                         "web1.example.com")
        self.assertEqual(create("db_2-x").instance_name, "db_2-x")

    def test_new_names_of_nodes_and_clusters_and_renames(self):
        for op_id, field, extra in [
                ("OP_NODE_ADD", "node_name", {}),
                ("OP_CLUSTER_RENAME", "name", {}),
                ("OP_INSTANCE_RENAME", "new_name",
                 {"instance_name": "inst1"})]:
            for name in ("a/b", "x y", "-rf"):
                data = dict(extra, OP_ID=op_id)
                data[field] = name
                err = self.assertRaises(errors.OpPrereqError,
                                        opcodes.from_dict, data)
                self.assertIn(field, str(err))
            data = dict(extra, OP_ID=op_id)
            data[field] = "Node3.example.com"
            self.assertEqual(getattr(opcodes.from_dict(data), field),
                             "node3.example.com")

    def test_names_of_existing_objects_are_looked_up_not_checked(self):
        # a name that cannot exist is simply not found later
        op = opcodes.from_dict({"OP_ID": "OP_INSTANCE_STARTUP",
                                "instance_name": "x y"})
        self.assertEqual(op.instance_name, "x y")


class ObjectNameTests(unittest.TestCase):

    def test_hostile_group_and_network_names_are_refused(self):
        for op_id, field, extra in [
                ("OP_GROUP_ADD", "group_name", {}),
                ("OP_GROUP_RENAME", "new_name", {"group_name": "default"}),
                ("OP_NETWORK_ADD", "network_name",
                 {"network": "192.0.2.0/24"})]:
            for name in ["a/b", "x y", "-rf", ".", "..", "", "nul\x00",
                         "new\nline", "a" * 256]:
                data = dict(extra, OP_ID=op_id)
                data[field] = name
                err = self.assertRaises(errors.OpPrereqError,
                                        opcodes.from_dict, data)
                self.assertIn(field, str(err))

    def test_usual_names_pass_as_they_are(self):
        for name in ("default", "Rack-2_B", "dc1.row3", "grp:blue"):
            op = opcodes.from_dict({"OP_ID": "OP_GROUP_ADD",
                                    "group_name": name})
            self.assertEqual(op.group_name, name)


class OsNameTests(unittest.TestCase):

    def test_hostile_os_names_are_refused(self):
        for name in ["../../../tmp/x", "a/b", "x y", "-rf", ".hidden",
                     "+variant", "semi;colon", ""]:
            err = self.assertRaises(errors.OpPrereqError, create, "inst1",
                                    os_type=name)
            self.assertIn("os_type", str(err))
        for op_id, field in [("OP_INSTANCE_REINSTALL", "os_type"),
                             ("OP_INSTANCE_SET_PARAMS", "os_name")]:
            err = self.assertRaises(errors.OpPrereqError, opcodes.from_dict,
                                    {"OP_ID": op_id, "instance_name": "i1",
                                     field: "../x"})
            self.assertIn(field, str(err))

    def test_os_names_with_variants_pass(self):
        for name in ("debootstrap+default", "image+debian-12.5", "noop"):
            self.assertEqual(create("inst1", os_type=name).os_type, name)
