"""The balance and capacity request types: the built-in allocator's
answers (hbal's moves, hspace's standard allocation), the master's
requests and answer checks, OP_TEST_ALLOCATOR and gnt-debug, and an
allocator that does not know them (Ganeti's hail)."""

import io
import json
import os
import re

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti import errors
from ganeti.cli import gnt_debug
from ganeti.htools import hbal, hspace, iallocator, text
from ganeti.iallocator import requests as rq
from ganeti.iallocator.allocators import AllocatorRegistry

from tests import allocator_fakes
from tests import htools_requests as R
from tests.test_cli_fakes import FakeClient, run
from tests.test_iallocator_hail import HAIL_DIR, skip_without_hail
from tests.test_iallocator_lus import AllocatorLUTestCase

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "htools")
_TMP = os.environ.get("TMPDIR", "/tmp")


def fixture(name):
    return os.path.join(FIXTURES, name + ".txt")


def document(name, request):
    """The iallocator input for a text fixture (not kvm: the node memory
    is then the file's, as hbal -t and hspace -t see it)."""
    doc = R.request_for(text.load_text_file(fixture(name)), request)
    doc["enabled_hypervisors"] = ["xen-pvm"]
    return doc


def run_hbal(name, args=()):
    """hbal -C on the same cluster the request describes (its -I)."""
    path = os.path.join(_TMP, "%s-%d.json" % (name, os.getpid()))
    with open(path, "w") as f:
        json.dump(document(name, {"type": "balance"}), f)
    out, err = io.StringIO(), io.StringIO()
    try:
        code = hbal.main(["-I", path, "-C"] + list(args), stdout=out,
                         stderr=err)
    finally:
        os.unlink(path)
    assert code == 0, err.getvalue()
    s = out.getvalue()
    m = re.search(r"Cluster score improved from ([0-9.]+) to ([0-9.]+)", s)
    cmds = [ln.strip()[len("gnt-instance "):] for ln in s.splitlines()
            if ln.strip().startswith("gnt-instance ")]
    return (m.groups() if m else None), cmds


def answer_commands(result):
    """The jobs of a balance answer as hbal prints its commands."""
    cmds = []
    for job in result[2]:
        for op in job:
            cmds.append(gnt_debug._op_command(op)[len("gnt-instance "):])
    return cmds


def hbal_form(cmds):
    # hbal says failover for stopped instances; the opcode is the same
    return [c.replace("failover -f", "migrate -f") for c in cmds]


def info_scores(info):
    return re.findall(r"group (\S+): score ([0-9.]+) -> ([0-9.]+)", info)


class BuiltinBalanceTests(unittest.TestCase):

    def balance(self, name, **req):
        req["type"] = "balance"
        doc = document(name, req)
        ans = iallocator.answer(doc)
        self.assertTrue(ans["success"], ans["info"])
        # the master's checks accept it
        rq.BalanceRequest(max_moves=req.get("max_moves"),
                          group=req.get("group")).check_result(
            ans["result"], doc)
        return ans

    def test_jobs_are_hbals_moves_and_improve_the_score(self):
        for name in ("tiny", "gen_varied", "gen_plain"):
            ans = self.balance(name)
            scores, cmds = run_hbal(name)
            self.assertEqual(hbal_form(answer_commands(ans["result"])),
                             hbal_form(cmds), name)
            ((_g, ini, fin),) = info_scores(ans["info"])
            self.assertEqual((ini, fin), scores, name)
            self.assertLess(float(fin), float(ini))
            self.assertTrue(ans["result"][2])
        ans = self.balance("tiny")
        self.assertEqual(ans["result"][0], [
            ["inst1", "default", ["node2", "node3"]],
            ["inst3", "default", ["node3", "node1"]]])
        self.assertEqual(ans["result"][1], [])

    def test_max_moves_and_no_disk_moves(self):
        full = self.balance("gen_varied")
        for limit in (0, 1, 3):
            ans = self.balance("gen_varied", max_moves=limit)
            self.assertEqual(len(ans["result"][2]), limit)
            self.assertEqual(answer_commands(ans["result"]),
                             answer_commands(full["result"])[:len(
                                 answer_commands(ans["result"]))])
        ans = self.balance("gen_varied", disk_moves=False)
        ops = [op["OP_ID"] for job in ans["result"][2] for op in job]
        self.assertNotIn("OP_INSTANCE_REPLACE_DISKS", ops)
        _, cmds = run_hbal("gen_varied", ["--no-disk-moves"])
        self.assertEqual(hbal_form(answer_commands(ans["result"])),
                         hbal_form(cmds))

    def test_groups_one_after_the_other(self):
        ans = self.balance("gen_groups")
        groups = [g for g, _, _ in info_scores(ans["info"])]
        self.assertEqual(len(groups), 2)
        expected = []
        for group in groups:
            one = self.balance("gen_groups", group=group)
            scores, cmds = run_hbal("gen_groups", ["-G", group])
            self.assertEqual(hbal_form(answer_commands(one["result"])),
                             hbal_form(cmds))
            self.assertEqual(info_scores(one["info"])[0][1:], scores)
            self.assertEqual({g for _, g, _ in one["result"][0]}, {group})
            expected += cmds
        self.assertEqual(hbal_form(answer_commands(ans["result"])),
                         hbal_form(expected))
        # max_moves counts over all groups
        ans = self.balance("gen_groups", max_moves=2)
        self.assertEqual(len(ans["result"][2]), 2)


class BuiltinCapacityTests(unittest.TestCase):

    def hspace_count(self, name, spec, template, extra=()):
        # a small tiered spec: hspace's tiered run is not what is compared
        out, err = io.StringIO(), io.StringIO()
        code = hspace.main(["-t", fixture(name), "--machine-readable",
                            "--standard-alloc", spec, "--tiered-alloc",
                            spec, "--disk-template", template] + list(extra),
                           out=out, err=err)
        self.assertEqual(code, 0, err.getvalue())
        return int(re.search(r"HTS_ALLOC_INSTANCES=(\d+)",
                             out.getvalue()).group(1))

    def test_count_is_hspaces_standard_allocation(self):
        for name, (dsk, mem, cpu), template, params in (
                ("tiny", (10240, 1024, 1), "drbd", None),
                ("tiny", (4096, 2048, 2), "plain", None),
                ("gen50", (20480, 2048, 2), "plain",
                 {"no-capacity-checks": None})):
            req = {"type": "capacity", "memory": mem, "vcpus": cpu,
                   "disks": [{"size": dsk}], "disk_template": template,
                   "spindle_use": 1}
            doc = document(name, req)
            ans = iallocator.answer(doc, params=params)
            self.assertTrue(ans["success"], ans["info"])
            count = self.hspace_count(
                name, "%d,%d,%d" % (dsk, mem, cpu), template,
                ["--no-capacity-checks"] if params else [])
            self.assertGreater(count, 0)
            self.assertEqual(ans["result"]["count"], count, name)
            plan = rq.CapacityRequest(
                disk_template=template, memory=mem, vcpus=cpu,
                disks=[{"size": dsk}]).check_result(ans["result"], doc)
            self.assertEqual(len(plan.allocations), count)
            self.assertEqual({len(a) for a in plan.allocations},
                             {2 if template == "drbd" else 1})
        # Ganeti's hspace, recorded, on the same file and spec
        self.assertEqual(count, 810)

    def test_bad_requests_name_the_field(self):
        for req, reason in (
                ({"type": "balance", "max_moves": "x"}, "'max_moves'"),
                ({"type": "balance", "max_moves": -1}, "'max_moves'"),
                ({"type": "balance", "group": "nogroup"}, "nogroup"),
                ({"type": "balance", "disk_moves": "yes"}, "'disk_moves'"),
                ({"type": "balance", "evac_mode": 1}, "'evac_mode'"),
                ({"type": "capacity", "vcpus": 1, "disks": [],
                  "disk_template": "plain"}, "'memory'"),
                ({"type": "capacity", "memory": 128, "vcpus": 1,
                  "disks": [], "disk_template": "floppy"}, "floppy"),
                ({"type": "capacity", "memory": 128, "vcpus": 1,
                  "disks": [{"mode": "rw"}], "disk_template": "plain"},
                 "disks[0]: missing field 'size'")):
            ans = iallocator.answer(document("tiny", req))
            self.assertFalse(ans["success"], req)
            self.assertIn(reason, ans["info"])
            self.assertEqual(ans["result"], [])


class RequestTests(unittest.TestCase):

    def setUp(self):
        self.doc = document("tiny", {"type": "balance"})

    def test_documents(self):
        self.assertEqual(rq.BalanceRequest().to_dict(), {
            "type": "balance", "group": None, "disk_moves": True,
            "evac_mode": False})
        self.assertEqual(rq.BalanceRequest(
            max_moves=3, group="default", disk_moves=False,
            evac_mode=True).to_dict(), {
            "type": "balance", "group": "default", "disk_moves": False,
            "evac_mode": True, "max_moves": 3})
        self.assertEqual(rq.CapacityRequest(
            disk_template="drbd", memory=512, vcpus=2,
            disks=[{"size": 1024}], name="probe",
            hypervisor="kvm").to_dict(), {
            "type": "capacity", "name": "probe", "disk_template": "drbd",
            "memory": 512, "vcpus": 2, "spindle_use": 1,
            "disks": [{"size": 1024, "mode": "rw", "dev_type": "drbd"}],
            "disk_space_total": 1024 + 128, "required_nodes": 2,
            "hypervisor": "kvm"})

    def test_bad_balance_answers(self):
        good = iallocator.answer(self.doc)["result"]
        req = rq.BalanceRequest()
        req.check_result(good, self.doc)

        def bad(result, reason, request=req):
            err = self.assertRaises(rq.InvalidAnswer, request.check_result,
                                    result, self.doc)
            self.assertIn(reason, str(err))
        moved, failed, jobs = good
        bad([moved, failed, [[{"OP_ID": "OP_INSTANCE_REMOVE",
                               "instance_name": "inst1"}]] + jobs[1:]],
            "not allowed")
        op = dict(jobs[0][1], remote_node="node9")
        bad([moved, failed, [[jobs[0][0], op]] + jobs[1:]], "node9")
        bad([moved[1:], failed, jobs], "as moved")
        bad([moved, failed, jobs[:1]], "as moved")
        bad(good, "2 moves (jobs) for at most 1",
            rq.BalanceRequest(max_moves=1))
        bad([[["inst1", "default", ["node2", "node7"]]] + moved[1:],
             failed, jobs], "node7")
        bad({"moved": moved}, "three lists")

    def test_bad_capacity_answers(self):
        req = rq.CapacityRequest(disk_template="drbd", memory=512, vcpus=1,
                                 disks=[{"size": 1024}])
        req.check_result({"count": 1, "allocations": [["node1", "node2"]]},
                         self.doc)
        for result, reason in (
                ({"count": 2, "allocations": [["node1", "node2"]]},
                 "count 2 does not match the 1"),
                ({"count": 1, "allocations": [["node1"]]},
                 "1 node(s) returned, 2 required"),
                ({"count": 1, "allocations": [["node1", "ghost"]]},
                 "ghost"),
                ({"count": True, "allocations": []}, "expected"),
                ([], "expected")):
            err = self.assertRaises(rq.InvalidAnswer, req.check_result,
                                    result, self.doc)
            self.assertIn(reason, str(err))


class TestAllocatorModesTests(AllocatorLUTestCase):
    """OP_TEST_ALLOCATOR for both types, with a scripted allocator and
    with the built-in one."""

    def setUp(self):
        AllocatorLUTestCase.setUp(self)
        self.create_shared("s.example.com")

    def op(self, mode, **kw):
        op = {"OP_ID": "OP_TEST_ALLOCATOR", "direction": "in",
              "mode": mode, "name": mode}
        op.update(kw)
        return op

    def test_in(self):
        data = json.loads(self.ok(self.op(
            "balance", max_moves=2, group_name="other", disk_moves=False)))
        self.assertEqual(data["request"], {
            "type": "balance", "max_moves": 2, "group": "other",
            "disk_moves": False, "evac_mode": False})
        self.assertIn("s.example.com", data["instances"])
        data = json.loads(self.ok(self.op(
            "capacity", name="probe", memory=256, vcpus=2,
            disk_template="plain", disks=[{"size": 1024, "mode": "rw"}])))
        req = data["request"]
        self.assertEqual((req["type"], req["memory"], req["vcpus"],
                          req["disk_space_total"], req["required_nodes"]),
                         ("capacity", 256, 2, 1024, 1))
        self.assertEqual(self.fake.inputs, [])
        err = self.fails(self.op("balance", group_name="nogroup"))
        self.assertIn("nogroup", str(err))
        err = self.fails(self.op("capacity", vcpus=1, disk_template="plain"))
        self.assertIn("memory: required", str(err))

    def test_out_with_scripted_and_builtin_allocators(self):
        self.fake.reply({"count": 0, "allocations": []})
        text = self.ok(self.op("capacity", direction="out",
                               iallocator="fake", memory=256, vcpus=1,
                               disk_template="file", disks=[]))
        self.assertEqual(json.loads(text)["result"],
                         {"count": 0, "allocations": []})
        self.assertEqual(self.fake.requests[-1]["type"], "capacity")
        # the built-in allocator answers both on this cluster
        self.ctx.allocators = AllocatorRegistry(
            self.clock, root=self.mktemp(),
            builtins={"hail": "ganeti.htools.iallocator:answer"},
            run_in_thread=allocator_fakes.sync_runner)
        answer = json.loads(self.ok(self.op(
            "balance", direction="out", iallocator="hail")))
        self.assertTrue(answer["success"], answer["info"])
        self.assertIn("score", answer["info"])
        answer = json.loads(self.ok(self.op(
            "capacity", direction="out", iallocator="hail", memory=2048,
            vcpus=1, disk_template="file",
            disks=[{"size": 1024, "mode": "rw"}])))
        self.assertTrue(answer["success"], answer["info"])
        self.assertGreater(answer["result"]["count"], 0)
        self.assertEqual(len(answer["result"]["allocations"]),
                         answer["result"]["count"])

    def test_an_allocator_that_does_not_know_the_type(self):
        self.fake.reply([], success=False,
                        info="Invalid request type 'balance'")
        err = self.fails(self.op("balance", direction="out",
                                 iallocator="fake"), errors.OpExecError)
        self.assertEqual(str(err), "iallocator 'fake' does not support"
                         " balance requests: Invalid request type 'balance'")
        # a plain "no solution" stays what it was
        self.fake.reply({"count": 0, "allocations": []}, success=False,
                        info="no node has memory")
        text = self.ok(self.op("capacity", direction="out",
                               iallocator="fake", memory=256, vcpus=1,
                               disk_template="file", disks=[]))
        self.assertFalse(json.loads(text)["success"])


class GanetiHailRefusesTests(AllocatorLUTestCase):

    timeout = 60

    @defer.inlineCallbacks
    def test_clear_error(self):
        skip_without_hail()
        self.ctx.allocators = AllocatorRegistry(
            reactor, root=os.path.abspath(self.mktemp()),
            extra_path=[HAIL_DIR], builtins={})
        for mode, extra in (("balance", {}),
                            ("capacity", {"memory": 128, "vcpus": 1,
                                          "disk_template": "file",
                                          "disks": []})):
            op = {"OP_ID": "OP_TEST_ALLOCATOR", "direction": "out",
                  "mode": mode, "name": mode, "iallocator": "hail"}
            op.update(extra)
            try:
                yield self.run_op(op)
            except errors.OpExecError as err:
                self.assertEqual(
                    str(err), "iallocator 'hail' does not support %s"
                    " requests: Error: Invalid request type '%s'"
                    % (mode, mode))
            else:
                self.fail("hail answered a %s request" % mode)


class GntDebugTests(unittest.TestCase):

    def test_balance_options_and_the_plan(self):
        doc = document("tiny", {"type": "balance"})
        client = FakeClient()
        client.results["OP_TEST_ALLOCATOR"] = json.dumps(
            iallocator.answer(doc))
        code, out, err = run(gnt_debug.commands, [
            "iallocator", "--dir", "out", "-m", "balance", "--max-moves",
            "5", "--no-disk-moves", "-g", "default"], client)
        self.assertEqual(code, 0, err)
        op = client.op()
        for key, value in (("mode", "balance"), ("max_moves", 5),
                           ("disk_moves", False), ("balance_evac", False),
                           ("group_name", "default")):
            self.assertEqual(op[key], value, key)
        self.assertIn("2 jobs, to run in order:\n"
                      "    1. gnt-instance migrate -f inst1\n"
                      "       gnt-instance replace-disks -n node3 inst1\n"
                      "    2. gnt-instance migrate -f inst3\n", out)
        self.assertIn("inst1 (default): node2, node3", out)
        # other types still need an instance
        code, _, err = run(gnt_debug.commands, ["iallocator", "-m",
                                                "relocate"], client)
        self.assertNotEqual(code, 0)
        self.assertIn("need an instance name", err)

    def test_capacity_plan(self):
        client = FakeClient()
        client.results["OP_TEST_ALLOCATOR"] = json.dumps(
            {"success": True, "info": "2 fit",
             "result": {"count": 2, "allocations": [["n1", "n2"],
                                                    ["n2", "n1"]]}})
        code, out, err = run(gnt_debug.commands, [
            "iallocator", "--dir", "out", "-m", "capacity", "-t", "drbd",
            "--disks", "1G"], client)
        self.assertEqual(code, 0, err)
        self.assertEqual(client.op()["disk_template"], "drbd")
        self.assertEqual(out, "2 fit\n2 instances fit, in allocation"
                         " order:\n    1. n1, n2\n    2. n2, n1\n")
