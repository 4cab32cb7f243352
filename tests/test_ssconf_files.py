"""The ssconf files: a node rewrites only those whose value changed (all
of them or none when a value is bad); the master computes the values once
per configuration serial."""

import os

from twisted.trial import unittest

from ganeti import errors
from ganeti import pathutils
from ganeti.backend import files
from ganeti.utils import io


class WriteSsconfTests(unittest.TestCase):

    def setUp(self):
        self.paths = pathutils.Paths(self.mktemp())
        self.writes = []
        original = io.atomic_write_many
        self.patch(io, "atomic_write_many", lambda f, **kw: (
            self.writes.append(sorted(os.path.basename(p) for p in f))
            or original(f, **kw)))

    def read(self, key):
        with open(self.paths.ssconf_file(key)) as f:
            return f.read()

    def test_only_changed_files_are_written(self):
        values = {"cluster_name": "cluster.example.com",
                  "node_list": ["node1", "node2"], "offline_nodes": []}
        files.write_ssconf_files(self.paths, values)
        self.assertEqual(self.writes, [["ssconf_cluster_name",
                                        "ssconf_node_list",
                                        "ssconf_offline_nodes"]])
        inode = os.stat(self.paths.ssconf_file("cluster_name")).st_ino
        # a node joins: one file changes
        values["node_list"] = ["node1", "node2", "node3"]
        targets = files.write_ssconf_files(self.paths, values)
        self.assertEqual(self.writes[1:], [["ssconf_node_list"]])
        self.assertEqual(len(targets), 3)
        self.assertEqual(self.read("node_list"), "node1\nnode2\nnode3\n")
        self.assertEqual(os.stat(self.paths.ssconf_file(
            "cluster_name")).st_ino, inode)
        # nothing changed: nothing written
        files.write_ssconf_files(self.paths, values)
        self.assertEqual(len(self.writes), 2)

    def test_changed_mode_or_damaged_file_is_rewritten(self):
        values = {"cluster_name": "cluster.example.com", "master_node": "n1"}
        files.write_ssconf_files(self.paths, values)
        os.chmod(self.paths.ssconf_file("cluster_name"), 0o644)
        path = self.paths.ssconf_file("master_node")
        os.chmod(path, 0o644)
        with open(path, "w") as f:
            f.write("n1\nextra\n")
        os.chmod(path, files.SSCONF_MODE)
        files.write_ssconf_files(self.paths, values)
        self.assertEqual(self.writes[1:], [["ssconf_cluster_name",
                                            "ssconf_master_node"]])
        self.assertEqual(self.read("master_node"), "n1\n")
        self.assertEqual(os.stat(self.paths.ssconf_file(
            "cluster_name")).st_mode & 0o777, files.SSCONF_MODE)

    def test_bad_value_writes_nothing(self):
        files.write_ssconf_files(self.paths, {"node_list": ["a"]})
        err = self.assertRaises(
            errors.ParameterError, files.write_ssconf_files, self.paths,
            {"node_list": ["a", "b"], "offline_nodes": [1]})
        self.assertIn("values.offline_nodes", str(err))
        self.assertEqual(self.read("node_list"), "a\n")
        self.assertEqual(len(self.writes), 1)


class CurrentValuesTests(unittest.TestCase):

    def test_computed_once_per_serial(self):
        from ganeti import objects, ssconf
        from tests.test_config import make_store
        store = make_store(self)
        calls = []
        original = ssconf.ssconf_values
        self.patch(ssconf, "ssconf_values",
                   lambda s: calls.append(s.serial_no) or original(s))
        first = ssconf.current_values(store)
        self.assertIs(ssconf.current_values(store), first)
        self.assertEqual(len(calls), 1)
        store.add_node(objects.Node(name="node2.example.com",
                                    primary_ip="127.0.0.2"))
        second = ssconf.current_values(store)
        self.assertEqual(len(calls), 2)
        self.assertIn("node2.example.com", second["node_list"])
        self.assertNotIn("node2.example.com", first["node_list"])
        self.assertEqual(second, original(store))
