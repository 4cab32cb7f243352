"""ExtStorage providers: what a node finds (real directories), the
``extstorage_diagnose`` procedure, OP_EXT_STORAGE_DIAGNOSE against fake
node daemons, and gnt-storage diagnose / info."""

import os
import tempfile
import shutil

from twisted.internet import defer, task
from twisted.trial import unittest

from ganeti import cmdlib
from ganeti import errors
from ganeti import mcpu
from ganeti import objects
from ganeti import opcodes
from ganeti.backend import extstorage
from ganeti.cli import gnt_storage
from ganeti.cmdlib.extstorage import merge_diagnoses
from ganeti.pathutils import Paths
from ganeti.server.noded import procedure as proc_mod
from ganeti.server.noded.procedures import NodeProcedures

from tests.fakes import ClockTestCase, FakeRpc
from tests.test_cli_fakes import FakeClient, encoded, run
from tests.test_config import make_store

NODE2 = "node2.example.com"
NODE3 = "node3.example.com"


def make_provider(top, name, params="pool the pool to use\n",
                  skip=(), mode=0o755):
    path = os.path.join(top, name)
    os.makedirs(path)
    for script in extstorage.REQUIRED_SCRIPTS:
        if script in skip:
            continue
        with open(os.path.join(path, script), "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(os.path.join(path, script), mode)
    if params is not None:
        with open(os.path.join(path, "parameters.list"), "w") as f:
            f.write(params)
    return path


class BackendTests(unittest.TestCase):

    def setUp(self):
        self.top = tempfile.mkdtemp(prefix="es-")
        self.addCleanup(shutil.rmtree, self.top)

    def test_valid_provider(self):
        path = make_provider(self.top, "rbd",
                             "pool the pool to use\n\nsize_mb\tin MiB\n")
        self.assertEqual(extstorage.diagnose([self.top]), [
            {"name": "rbd", "path": path, "valid": True, "status": "",
             "parameters": [["pool", "the pool to use"],
                            ["size_mb", "in MiB"]]}])

    def test_what_makes_a_provider_invalid(self):
        make_provider(self.top, "a-noattach", skip=("attach",))
        make_provider(self.top, "b-noexec", mode=0o644)
        make_provider(self.top, "c-noparams", params=None)
        make_provider(self.top, "d-badparam", params="bad/name x\n")
        path = make_provider(self.top, "e-badsnapshot")
        with open(os.path.join(path, "snapshot"), "w") as f:
            f.write("")
        with open(os.path.join(self.top, "not-a-dir"), "w") as f:
            f.write("")
        found = extstorage.diagnose([self.top])
        self.assertEqual([d["name"] for d in found],
                         ["a-noattach", "b-noexec", "c-noparams",
                          "d-badparam", "e-badsnapshot"])
        self.assertFalse(any(d["valid"] for d in found))
        status = [d["status"] for d in found]
        self.assertIn("script %s/a-noattach/attach is missing" % self.top,
                      status[0])
        self.assertIn("is not executable", status[1])
        self.assertIn("parameters file", status[2])
        self.assertIn("invalid parameter name 'bad/name'", status[3])
        self.assertIn("snapshot is not executable", status[4])

    def test_search_path_order_and_missing_directories(self):
        second = os.path.join(self.top, "second")
        first = os.path.join(self.top, "first")
        make_provider(first, "rbd")
        make_provider(second, "rbd", skip=("grow",))
        found = extstorage.diagnose([os.path.join(self.top, "nosuch"),
                                     first, second])
        self.assertEqual([(d["path"], d["valid"]) for d in found],
                         [(os.path.join(first, "rbd"), True),
                          (os.path.join(second, "rbd"), False)])

    def test_procedure_searches_root_then_extra_dirs(self):
        root = os.path.join(self.top, "root")
        std = extstorage.default_search_path(root)[0]
        self.assertEqual(std, os.path.join(root, "srv/ganeti/extstorage"))
        make_provider(std, "std")
        extra = os.path.join(self.top, "extra")
        make_provider(extra, "more")
        procs = NodeProcedures(task.Clock(), Paths(root), None, None, None,
                               run_blocking=proc_mod.INLINE)
        procs.extstorage_dirs = (extra,)
        found = self.successResultOf(procs.call("extstorage_diagnose", []))
        self.assertEqual([(d["name"], d["valid"]) for d in found],
                         [("std", True), ("more", True)])
        err = self.failureResultOf(procs.call("extstorage_diagnose",
                                              ["x"])).value
        self.assertIn("extstorage_diagnose", str(err))


def answer(name, valid=True, path=None, status="", params=None):
    return {"name": name, "path": path or "/srv/ganeti/extstorage/" + name,
            "valid": valid, "status": status,
            "parameters": params if params is not None else [["pool", "p"]]}


class LUTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.cfg = make_store(self)
        self.master = self.cfg.get_node(self.cfg.cluster.master_node).name
        self.cfg.add_node(objects.Node(name=NODE2, primary_ip="127.0.0.2"))
        self.cfg.add_nodegroup(objects.NodeGroup(name="rack2"))
        self.cfg.add_node(objects.Node(name=NODE3, primary_ip="127.0.0.3",
                                       group=self.cfg.get_nodegroup(
                                           "rack2").uuid))
        self.glm = mcpu.make_lock_manager(self.cfg, self.clock)
        self.rpc = FakeRpc()
        self.rpc.answers["extstorage_diagnose"] = [answer("rbd")]
        ctx = mcpu.MasterContext(cfg=self.cfg, glm=self.glm,
                                 clock=self.clock, rpc=self.rpc)
        self.proc = mcpu.Processor(ctx, cmdlib.LOGICAL_UNITS)
        self.log = []

    def run_op(self, fields=("name", "node_status", "nodegroup_status",
                             "parameters"), names=()):
        return defer.maybeDeferred(opcodes.from_dict, {
            "OP_ID": "OP_EXT_STORAGE_DIAGNOSE",
            "output_fields": list(fields), "names": list(names)}
        ).addCallback(lambda op: self.proc.execute(1, 0, op,
                                                   self.log.append))

    def test_valid_everywhere(self):
        ((name, nodes, groups, params),) = self.successResultOf(
            self.run_op())
        self.assertEqual(name, "rbd")
        self.assertEqual(sorted(nodes), sorted([self.master, NODE2, NODE3]))
        self.assertEqual(nodes[NODE2], [["/srv/ganeti/extstorage/rbd", True,
                                         "", [["pool", "p"]]]])
        self.assertEqual(groups, {"default": True, "rack2": True})
        self.assertEqual(params, [["pool", "p"]])
        self.assertEqual(sorted(c[0] for c in self.rpc.calls),
                         sorted([self.master, NODE2, NODE3]))

    def test_invalid_or_missing_on_a_node(self):
        self.rpc.answers[(NODE2, "extstorage_diagnose")] = [
            answer("rbd", False, status="script x is missing"),
            answer("rbd", True, path="/other/rbd")]
        self.rpc.answers[(NODE3, "extstorage_diagnose")] = []
        rows = self.successResultOf(self.run_op(
            ["name", "nodegroup_status", "node_status"]))
        ((name, groups, nodes),) = rows
        self.assertEqual(groups, {"default": False, "rack2": False})
        self.assertEqual(nodes[NODE3], [])
        self.assertEqual([e[:3] for e in nodes[NODE2]],
                         [["/srv/ganeti/extstorage/rbd", False,
                           "script x is missing"],
                          ["/other/rbd", True, ""]])

    def test_parameters_all_valid_nodes_agree_on(self):
        self.rpc.answers[(NODE2, "extstorage_diagnose")] = [
            answer("rbd", params=[["pool", "p"], ["extra", "e"]])]
        ((params,),) = self.successResultOf(self.run_op(["parameters"]))
        self.assertEqual(params, [["pool", "p"]])

    def test_unanswering_and_offline_nodes_left_out(self):
        self.rpc.fail[(NODE3, "extstorage_diagnose")] = "connection refused"
        self.cfg.set_node_params(NODE2, offline=True, master_candidate=False)
        ((nodes, groups),) = self.successResultOf(
            self.run_op(["node_status", "nodegroup_status"]))
        self.assertEqual(list(nodes), [self.master])
        self.assertEqual(groups, {"default": True})
        self.assertTrue(any("Can't get the ExtStorage providers of node %s"
                            % NODE3 in line for line in self.log))

    def test_names(self):
        self.rpc.answers["extstorage_diagnose"] = [answer("rbd"),
                                                   answer("gluster")]
        rows = self.successResultOf(self.run_op(["name"], names=["rbd"]))
        self.assertEqual(rows, [["rbd"]])
        rows = self.successResultOf(self.run_op(["name"]))
        self.assertEqual(rows, [["gluster"], ["rbd"]])

    def test_bad_input_names_the_field(self):
        err = self.failureResultOf(self.run_op(["name", "colour"]),
                                   errors.OpPrereqError).value
        self.assertIn("output_fields: unknown field colour", str(err))
        self.assertEqual(self.rpc.calls, [])
        err = self.failureResultOf(self.run_op(["name"], names=["nosuch"]),
                                   errors.OpPrereqError).value
        self.assertIn("names: ExtStorage provider nosuch not found",
                      str(err))

    def test_merge_ignores_bad_entries(self):
        merged = merge_diagnoses({"n1": [None, {"name": ""}, answer("x")]},
                                 {"n1": "g"})
        self.assertEqual(list(merged), ["x"])


def gnt(client, *argv):
    return run(gnt_storage.commands, argv, client)


class CommandTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()

    def test_diagnose(self):
        self.client.results["OP_EXT_STORAGE_DIAGNOSE"] = [
            ["gluster", {"node1": [["/es/gluster", True, "", []]],
                         "node10": [["/es/gluster", True, "", []]],
                         "node2": [["/es/gluster", True, "", []]]},
             {"default": True}],
            ["rbd", {"node1": [["/es/rbd", True, "", []],
                               ["/more/rbd", False, "script x is missing",
                                []]],
                     "node2": [["/es/rbd", False, "script grow is missing",
                                []]],
                     "node3": []},
             {"default": False, "rack2": False}]]
        code, out, err = gnt(self.client, "diagnose")
        self.assertEqual(code, 1, err)
        op = self.client.op()
        self.assertEqual(op["output_fields"],
                         ["name", "node_status", "nodegroup_status"])
        self.assertEqual(out.splitlines(), [
            "Provider: gluster: valid",
            "  For nodegroup: default --> valid",
            "  Node: node1, status: valid (path: /es/gluster)",
            "  Node: node2, status: valid (path: /es/gluster)",
            "  Node: node10, status: valid (path: /es/gluster)",
            "",
            "Provider: rbd: partial valid",
            "  For nodegroup: default --> invalid",
            "  For nodegroup: rack2 --> invalid",
            "  Node: node1, status: valid (path: /es/rbd)",
            "    [hidden] path: /more/rbd, status: invalid - script x is"
            " missing",
            "  Node: node2, status: invalid - script grow is missing (path:"
            " /es/rbd)",
            "  Node: node3, status: ExtStorage provider not found",
            ""])

    def test_diagnose_all_valid(self):
        self.client.results["OP_EXT_STORAGE_DIAGNOSE"] = [
            ["rbd", {"node1": [["/es/rbd", True, "", []]]},
             {"default": True}]]
        code, out, _ = gnt(self.client, "diagnose")
        self.assertEqual(code, 0)

    def test_no_provider(self):
        self.client.results["OP_EXT_STORAGE_DIAGNOSE"] = []
        code, out, err = gnt(self.client, "diagnose")
        self.assertEqual(code, 1)
        self.assertIn("Can't get the ExtStorage providers list", out + err)

    def test_info(self):
        self.client.results["OP_EXT_STORAGE_DIAGNOSE"] = [
            ["gluster", {"default": False}, []],
            ["rbd", {"rack2": True, "default": True, "rack3": False},
             [["pool", "the pool"], ["size", "in MiB"]]]]
        code, out, _ = gnt(self.client, "info", "rbd", "gluster", "nosuch")
        self.assertEqual(code, 0)
        self.assertEqual(self.client.op()["output_fields"],
                         ["name", "nodegroup_status", "parameters"])
        self.assertEqual(out.splitlines(), [
            "gluster:", "  - Invalid for all nodegroups", "",
            "rbd:", "  - Valid for nodegroups:", "      default",
            "      rack2", "  - Supported ExtStorage parameters:",
            "      pool: the pool", "      size: in MiB", "",
            "nosuch: Not Found", ""])

    def test_master_refusal_shown(self):
        self.client.errors["OP_EXT_STORAGE_DIAGNOSE"] = encoded(
            errors.OpPrereqError("output_fields: unknown field x",
                                 errors.ECODE_INVAL))
        code, out, err = gnt(self.client, "diagnose")
        self.assertNotEqual(code, 0)
        self.assertIn("unknown field x", out + err)
