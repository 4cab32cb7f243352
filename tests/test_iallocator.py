"""The iallocator protocol on the master's side: requests and the checks
of answers, the input document, the default allocators per request type,
finding allocators by name."""

import json
import os
import stat

from twisted.internet import task
from twisted.trial import unittest

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.iallocator import AllocatorNotFound
from ganeti.iallocator import cluster_data
from ganeti.iallocator import defaults
from ganeti.iallocator import requests as rq
from ganeti.iallocator.allocators import (
    AllocatorRegistry, BuiltinAllocator, ExternalAllocator, format_params)

from tests.test_config import make_store

NODE1 = "node1.example.com"
NODE2 = "node2.example.com"
NODE3 = "node3.example.com"
NODE4 = "node4.example.com"


def node_entry(group="g1", **kw):
    entry = {"group": group, "offline": False, "drained": False,
             "vm_capable": True}
    entry.update(kw)
    return entry


def document(**nodes):
    """A minimal input document: groups g1 (default) and g2 (other)."""
    return {"nodegroups": {"g1": {"name": "default"},
                           "g2": {"name": "other"}},
            "nodes": nodes or {NODE1: node_entry(), NODE2: node_entry(),
                               NODE3: node_entry(),
                               NODE4: node_entry("g2")},
            "instances": {}}


def alloc_request(name="new.example.com", template="file", **kw):
    params = dict(name=name, disk_template=template, memory=512, vcpus=2,
                  disks=[{"size": 1024, "mode": "rw"},
                         {"size": 2048, "mode": "ro"}],
                  hypervisor="fake", os="busybox", tags=["b", "a"],
                  nics=[{"mac": "auto", "ip": None}])
    params.update(kw)
    return rq.AllocateRequest(**params)


class RequestTests(unittest.TestCase):
    """The request object of each type, as Ganeti's protocol has it."""

    def test_allocate(self):
        req = alloc_request(template="drbd", restrict_to_nodes=[NODE1, NODE2])
        self.assertEqual(req.to_dict(), {
            "type": "allocate", "name": "new.example.com",
            "disk_template": "drbd", "group_name": None, "tags": ["a", "b"],
            "os": "busybox", "vcpus": 2, "memory": 512, "spindle_use": 1,
            "disks": [{"size": 1024, "mode": "rw", "dev_type": "drbd"},
                      {"size": 2048, "mode": "ro", "dev_type": "drbd"}],
            # drbd: metadata of 128 MiB per disk
            "disk_space_total": 1024 + 2048 + 2 * 128,
            "nics": [{"mac": "auto", "ip": None}],
            "required_nodes": 2, "hypervisor": "fake",
            "restrict-to-nodes": [NODE1, NODE2]})
        self.assertEqual(alloc_request().to_dict()["required_nodes"], 1)
        self.assertNotIn("restrict-to-nodes", alloc_request().to_dict())
        self.assertEqual(alloc_request(template="diskless")
                         .to_dict()["disk_space_total"], 0)

    def test_other_types(self):
        multi = rq.MultiAllocateRequest([alloc_request("a"),
                                         alloc_request("b")])
        d = multi.to_dict()
        self.assertEqual(d["type"], "multi-allocate")
        self.assertEqual([i["name"] for i in d["instances"]], ["a", "b"])
        self.assertNotIn("type", d["instances"][0])
        reloc = rq.RelocateRequest("i1", "sharedfile", 1024, [NODE1],
                                   [NODE1])
        self.assertEqual(reloc.to_dict(), {
            "type": "relocate", "name": "i1", "disk_space_total": 1024,
            "required_nodes": 1, "relocate_from": [NODE1]})
        evac = rq.NodeEvacuateRequest(["i1", "i2"], "secondary-only",
                                      ignore_soft_errors=True)
        self.assertEqual(evac.to_dict(), {
            "type": "node-evacuate", "instances": ["i1", "i2"],
            "evac_mode": "secondary-only"})
        self.assertEqual(evac.extra_params(), {"ignore-soft-errors": None})
        chg = rq.ChangeGroupRequest(["i1"], ["g2"])
        self.assertEqual(chg.to_dict(), {
            "type": "change-group", "instances": ["i1"],
            "target_groups": ["g2"]})
        self.assertEqual(rq.AllocateSecondaryRequest("i1", NODE1).to_dict(),
                         {"type": "allocate-secondary", "name": "i1"})

    def test_format_params(self):
        self.assertEqual(format_params({"b": "2", "ignore-soft-errors": None,
                                        "a": 1, "off": False, "on": True}),
                         ["--a=1", "--b=2", "--ignore-soft-errors", "--on"])


class AnswerCheckTests(unittest.TestCase):
    """A bad answer is refused with the reason; a good one is returned."""

    def bad(self, request, result, text, data=None):
        err = self.assertRaises(rq.InvalidAnswer, request.check_result,
                                result, data or document())
        self.assertIn(text, str(err))

    def test_allocate(self):
        req = alloc_request()
        self.assertEqual(req.check_result([NODE2], document()), [NODE2])
        self.bad(req, [NODE1, NODE2], "2 node(s) returned, 1 required")
        self.bad(req, ["nope.example.com"],
                 "node 'nope.example.com' does not exist")
        self.bad(req, NODE1, "expected a list of node names")
        self.bad(req, [3], "expected a node name, got 3")
        data = document()
        data["nodes"][NODE2]["drained"] = True
        data["nodes"][NODE3]["offline"] = True
        data["nodes"][NODE1]["vm_capable"] = False
        self.bad(req, [NODE2], "node '%s' is drained" % NODE2, data)
        self.bad(req, [NODE3], "node '%s' is offline" % NODE3, data)
        self.bad(req, [NODE1], "is not vm_capable", data)
        drbd = alloc_request(template="drbd")
        self.assertEqual(drbd.check_result([NODE1, NODE2], document()),
                         [NODE1, NODE2])
        self.bad(drbd, [NODE1, NODE1], "a node is returned twice")
        self.bad(drbd, [NODE1, NODE4], "are in different node groups")
        restricted = alloc_request(restrict_to_nodes=[NODE2])
        self.bad(restricted, [NODE3], "not among the nodes the request"
                 " allowed")
        grouped = alloc_request(group_name="other")
        self.bad(grouped, [NODE1], "not in the requested node group other")
        self.assertEqual(grouped.check_result([NODE4], document()), [NODE4])

    def test_multi_allocate(self):
        req = rq.MultiAllocateRequest([alloc_request("a"),
                                       alloc_request("b"),
                                       alloc_request("c")])
        self.assertEqual(
            req.check_result([[["a", [NODE1]], ["b", [NODE2]]], ["c"]],
                             document()),
            ([("a", [NODE1]), ("b", [NODE2])], ["c"]))
        self.bad(req, [[["a", [NODE1]]], []], "instances b, c are neither"
                 " allocated nor failed")
        self.bad(req, [[["x", [NODE1]]], ["a", "b", "c"]],
                 "instance 'x' was not part of the request")
        self.bad(req, [[["a", [NODE1]]], ["a", "b", "c"]],
                 "instance a is answered twice")
        self.bad(req, [[["a", [NODE1, NODE2]]], ["b", "c"]],
                 "2 node(s) returned, 1 required")
        self.bad(req, [[], [], []], "expected [allocated, failed]")

    def test_relocate(self):
        req = rq.RelocateRequest("i1", "sharedfile", 0, [NODE1], [NODE1])
        self.assertEqual(req.check_result([NODE2], document()), [NODE2])
        self.bad(req, [NODE1], "already holds the instance")
        self.bad(req, [NODE4], "differ from the instance's (default)")
        self.bad(req, [NODE2, NODE3], "2 node(s) returned, 1 required")
        drbd = rq.RelocateRequest("i1", "drbd", 0, [NODE2], [NODE1, NODE2])
        self.assertEqual(drbd.check_result([NODE3], document()), [NODE3])
        self.bad(drbd, [NODE2], "already holds the instance")

    def test_allocate_secondary(self):
        req = rq.AllocateSecondaryRequest("i1", NODE1)
        self.assertEqual(req.check_result(NODE2, document()), NODE2)
        self.bad(req, [NODE2], "expected one node name")
        self.bad(req, NODE1, "is the instance's primary")
        self.bad(req, NODE4, "different node groups")

    def evac_answer(self, ops=None, moved=None, failed=None):
        if ops is None:
            ops = [{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "i1",
                    "target_node": NODE2, "allow_failover": True}]
        return [moved if moved is not None else [["i1", "default", [NODE2]]],
                failed or [], [ops]]

    def test_node_evacuate(self):
        req = rq.NodeEvacuateRequest(["i1", "i2"], "all", leaving=[NODE1])
        plan = req.check_result(self.evac_answer(
            failed=[["i2", "no space"]]), document())
        self.assertEqual(plan.moved, [("i1", "default", [NODE2])])
        self.assertEqual(plan.failed, [("i2", "no space")])
        op = plan.jobs[0][0]
        self.assertEqual((op.OP_ID, op.instance_name, op.target_node,
                          op.allow_failover),
                         ("OP_INSTANCE_MIGRATE", "i1", NODE2, True))
        self.bad(req, self.evac_answer([{"OP_ID": "OP_INSTANCE_REMOVE",
                                         "instance_name": "i1"}]),
                 "jobs/0/0: opcode 'OP_INSTANCE_REMOVE' is not allowed in an"
                 " evacuation")
        self.bad(req, self.evac_answer([{"OP_ID": "OP_INSTANCE_MIGRATE",
                                         "instance_name": "i9"}]),
                 "instance 'i9' was not part of the request")
        self.bad(req, self.evac_answer([{"OP_ID": "OP_INSTANCE_MIGRATE",
                                         "instance_name": "i1",
                                         "target_node": NODE1}]),
                 "node '%s' is the node being evacuated" % NODE1)
        self.bad(req, self.evac_answer([{"OP_ID": "OP_INSTANCE_MIGRATE",
                                         "instance_name": "i1",
                                         "bogus": 1}]),
                 "bogus: unknown parameter")
        self.bad(req, self.evac_answer([{"OP_ID": "OP_INSTANCE_MIGRATE",
                                         "instance_name": "i1",
                                         "target_node": "gone"}]),
                 "jobs/0/0/target_node: node 'gone' does not exist")
        self.bad(req, self.evac_answer(moved=[["i7", "default", []]]),
                 "moved/0: instance i7 was not part of the request")
        self.bad(req, self.evac_answer(failed=[["i1"]]),
                 "failed/0: expected [instance, reason]")
        self.bad(req, [[], []], "expected [moved, failed, jobs]")
        self.bad(req, [[], [], [[]]], "jobs/0: expected a non-empty list")

    def test_change_group(self):
        req = rq.ChangeGroupRequest(["i1"], ["g2"])
        ops = [{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "i1",
                "target_node": NODE4}]
        plan = req.check_result([[["i1", "other", [NODE4]]], [], [ops]],
                                document())
        self.assertEqual(len(plan.jobs), 1)
        ops[0]["target_node"] = NODE2
        self.bad(req, [[["i1", "other", [NODE4]]], [], [ops]],
                 "node '%s' is not in a target group" % NODE2)
        self.bad(req, [[["i1", "default", [NODE2]]], [], []],
                 "group default is not a target group")


class DefaultsTests(unittest.TestCase):

    def test_ganeti_value_means_every_type(self):
        spec = defaults.parse_spec("hail")
        for mode in rq.MODES:
            self.assertEqual(spec.for_mode(mode), ("hail",))
        self.assertEqual(spec.to_spec(), "hail")
        self.assertEqual(spec.first(), "hail")
        empty = defaults.parse_spec("")
        self.assertEqual(empty.for_mode("allocate"), ())
        self.assertEqual(empty.first(), "")
        self.assertEqual(empty.to_spec(), "")

    def test_lists_and_per_type(self):
        text = "hail,spare;relocate=spare;node-evacuate="
        spec = defaults.parse_spec(text)
        self.assertEqual(spec.for_mode("allocate"), ("hail", "spare"))
        self.assertEqual(spec.for_mode("relocate"), ("spare",))
        self.assertEqual(spec.for_mode("node-evacuate"), ())
        self.assertEqual(spec.to_spec(), text)
        self.assertEqual(defaults.parse_spec(spec.to_spec()), spec)
        self.assertEqual(spec.as_dict()["change-group"], ["hail", "spare"])
        changed = spec.replace(per_mode={"relocate": None,
                                         "allocate": ("x",)})
        self.assertEqual(changed.to_spec(),
                         "hail,spare;allocate=x;node-evacuate=")
        self.assertEqual(changed.first(), "x")
        only = defaults.parse_spec(";allocate=hail")
        self.assertEqual((only.for_mode("allocate"),
                          only.for_mode("relocate")), (("hail",), ()))

    def test_errors_name_the_problem(self):
        for text, reason in (
                ("hail;bogus=x", "'bogus' is not a request type"),
                ("hail;relocate=a;relocate=b", "given twice"),
                ("a;b", "must be TYPE=NAME"),
                ("../../bin/sh", "not a valid allocator name"),
                ("hail,hail", "listed twice"),
                ("a b", "not a valid allocator name")):
            err = self.assertRaises(errors.OpPrereqError, defaults.parse_spec,
                                    text)
            self.assertIn(reason, str(err))
            self.assertIn("default_iallocator", str(err))


class InputDocumentTests(unittest.TestCase):
    """The input document from a configuration and node reports."""

    def setUp(self):
        self.cfg = make_store(self, file_storage_dir="/srv/file",
                              volume_group_name="xenvg")
        cfg = self.cfg
        cfg.add_nodegroup(objects.NodeGroup(name="other"))
        cfg.add_node(objects.Node(name=NODE2, primary_ip="127.0.0.2"))
        cfg.add_node(objects.Node(name=NODE3, primary_ip="127.0.0.3",
                                  offline=True, master_candidate=False))
        cfg.add_node(objects.Node(name=NODE4, primary_ip="127.0.0.4",
                                  group=cfg.get_nodegroup("other").uuid))
        cfg.add_tags("cluster", None, ["htools:iextags:service"])
        cfg.set_cluster_params(ipolicy={"memory-ratio": 2.0})
        self.n1 = cfg.get_node(NODE1).uuid
        self.n2 = cfg.get_node(NODE2).uuid

    def live(self, **kw):
        hv = {"memory_total": 8192, "memory_free": 6000, "memory_dom0": 1024,
              "cpu_total": 8}
        hv.update(kw)
        return cluster_data.NodeLive(
            hv=hv, storage=[{"type": "file", "name": "/srv/file",
                             "storage_size": 50000, "storage_free": 40000}],
            instances={})

    def add(self, name, node, state="up", forthcoming=False, size=1000,
            maxmem=512):
        inst = objects.Instance(
            name=name, primary_node=node, os="busybox", hypervisor="fake",
            admin_state=state, forthcoming=forthcoming,
            beparams={"maxmem": maxmem, "minmem": maxmem, "vcpus": 2},
            nics=[objects.NIC(mac="aa:00:00:00:00:%02x"
                              % len(self.cfg.instances),
                              nicparams={"mode": "bridged", "link": "br0"})],
            tags={"t1"})
        disk = objects.Disk(dev_type="file", size=size, mode="rw",
                            forthcoming=forthcoming,
                            logical_id=["loop", "/srv/file/%s/d0" % name])
        self.cfg.add_instance(inst, [disk])

    def build(self, request=None, live=None, warnings=None):
        request = request or alloc_request()
        if live is None:
            live = {self.n1: self.live(), self.n2: self.live(),
                    self.cfg.get_node(NODE4).uuid: self.live()}
        return cluster_data.build_input(
            self.cfg, request, live,
            warn=(warnings.append if warnings is not None else None))

    def test_top_level_groups_and_static_nodes(self):
        data = self.build()
        self.assertEqual(data["version"], 2)
        self.assertEqual(data["cluster_name"], "cluster.example.com")
        self.assertEqual(data["cluster_tags"], ["htools:iextags:service"])
        self.assertEqual(data["enabled_hypervisors"], ["fake", "kvm"])
        self.assertEqual(data["request"], alloc_request().to_dict())
        # only the policy keys Ganeti's protocol has (hail refuses others)
        self.assertEqual(sorted(data["ipolicy"]), sorted(
            cluster_data.IPOLICY_KEYS))
        groups = data["nodegroups"]
        other = self.cfg.get_nodegroup("other")
        self.assertEqual(groups[other.uuid], {
            "name": "other", "alloc_policy": "preferred", "networks": [],
            "ipolicy": data["ipolicy"], "tags": []})
        node = data["nodes"][NODE4]
        for key, value in (("group", other.uuid), ("offline", False),
                           ("drained", False), ("vm_capable", True),
                           ("master_capable", True),
                           ("primary_ip", "127.0.0.4")):
            self.assertEqual(node[key], value, key)
        self.assertEqual(node["ndparams"]["spindle_count"], 1)
        self.assertIs(node["ndparams"]["exclusive_storage"], False)
        # an offline node: its configuration only
        self.assertTrue(data["nodes"][NODE3]["offline"])
        self.assertNotIn("free_memory", data["nodes"][NODE3])

    def test_live_data_and_running_instances(self):
        self.add("up.example.com", self.n1, maxmem=1024)
        self.add("down.example.com", self.n1, state="down", maxmem=256)
        live = {self.n1: self.live(), self.n2: self.live(),
                self.cfg.get_node(NODE4).uuid: self.live()}
        # the running one uses 1000 of its 1024 MiB today
        live[self.n1].instances = {"up.example.com": {"memory": 1000}}
        node = self.build(live=live)["nodes"][NODE1]
        self.assertEqual(node["total_memory"], 8192)
        self.assertEqual(node["reserved_memory"], 1024)
        # it may still grow by 24 MiB: not free
        self.assertEqual(node["free_memory"], 6000 - 24)
        self.assertEqual(node["i_pri_memory"], 1024 + 256)
        self.assertEqual(node["i_pri_up_memory"], 1024)
        self.assertEqual((node["total_disk"], node["free_disk"]),
                         (50000, 40000))
        self.assertEqual((node["total_cpus"], node["reserved_cpus"]), (8, 8))
        self.assertEqual((node["total_spindles"], node["free_spindles"]),
                         (0, 0))

    def test_admin_overrides_as_node_queries_report_them(self):
        self.cfg.set_node_params(self.n1, hv_state_static={"fake": {
            "mem_total": 4096, "cpu_node": 1}}, disk_state_static={
            "file": {"/srv/file": {"disk_reserved": 5000}}})
        node = self.build()["nodes"][NODE1]
        # 4096 MiB less total, so as much less free; 5000 MiB kept free
        self.assertEqual((node["total_memory"], node["free_memory"]),
                         (4096, 6000 - 4096))
        self.assertEqual((node["total_cpus"], node["reserved_cpus"]), (8, 1))
        self.assertEqual(node["free_disk"], 40000 - 5000)
        res = self.cfg.node_resources(self.n1, live={
            "mtotal": 8192, "mnode": 1024, "mfree": 6000, "ctotal": 8,
            "cnos": 8, "dtotal": 50000, "dfree": 40000})
        self.assertEqual((res.mtotal, res.mfree, res.cnos, res.dfree),
                         (4096, 6000 - 4096, 1, 40000 - 5000))

    def test_instances(self):
        self.add("up.example.com", self.n1)
        inst = self.build()["instances"]["up.example.com"]
        self.assertEqual(inst, {
            "tags": ["t1"], "admin_state": "up", "vcpus": 2, "memory": 512,
            "spindle_use": 1, "os": "busybox", "nodes": [NODE1],
            "nics": [{"mac": "aa:00:00:00:00:00", "ip": None,
                      "mode": "bridged", "link": "br0", "bridge": "br0"}],
            "disks": [{"dev_type": "file", "size": 1000, "mode": "rw",
                       "spindles": None}],
            "disk_template": "file", "disks_active": False,
            "hypervisor": "fake", "disk_space_total": 1000})

    def test_forthcoming_instances_reserve(self):
        self.add("soon.example.com", self.n2, state="down",
                 forthcoming=True, size=5000)
        uuid = self.cfg.get_instance("soon.example.com").uuid
        self.cfg.rename_instance(uuid, "renamed.example.com")
        nameless = objects.Instance(forthcoming=True, primary_node=self.n2,
                                    beparams={"maxmem": 128})
        self.cfg.add_instance(nameless, [])
        unplaced = objects.Instance(forthcoming=True,
                                    beparams={"maxmem": 128})
        self.cfg.add_instance(unplaced, [])
        data = self.build()
        inst = data["instances"]["renamed.example.com"]
        # stopped: the allocator counts its memory as taken
        self.assertEqual((inst["admin_state"], inst["memory"]),
                         ("down", 512))
        # its disk does not exist yet: the node's free disk is reduced
        self.assertEqual(data["nodes"][NODE2]["free_disk"], 40000 - 5000)
        self.assertEqual(data["nodes"][NODE1]["free_disk"], 40000)
        self.assertIn(nameless.uuid, data["instances"])   # by its UUID
        self.assertNotIn(unplaced.uuid, data["instances"])

    def test_unreachable_node_is_offline_and_bad_reports_are_errors(self):
        warnings = []
        data = self.build(live={self.n1: self.live(), self.n2: None},
                          warnings=warnings)
        self.assertTrue(data["nodes"][NODE2]["offline"])
        self.assertNotIn("free_memory", data["nodes"][NODE2])
        self.assertTrue(any(NODE2 in w and "offline" in w for w in warnings))
        live = self.live()
        del live.hv["memory_total"]
        err = self.assertRaises(errors.OpExecError, self.build,
                                live={self.n1: live, self.n2: self.live()})
        self.assertIn("Node '%s' returned an invalid value for"
                      " 'memory_total'" % NODE1, str(err))

    def test_storage_of_the_request_template(self):
        warnings = []
        plain = self.build(request=alloc_request(template="plain"),
                           warnings=warnings)
        # the nodes reported file storage only: none for plain disks
        self.assertEqual(plain["nodes"][NODE1]["free_disk"], 0)
        self.assertTrue(any("lvm-vg" in w for w in warnings))
        shared = self.build(request=alloc_request(template="sharedfile"))
        self.assertEqual(shared["nodes"][NODE1]["total_disk"], 0)
        self.assertEqual(cluster_data.storage_unit(self.cfg.cluster, "plain"),
                         ["lvm-vg", "xenvg", []])
        self.assertIsNone(cluster_data.storage_unit(self.cfg.cluster,
                                                    "diskless"))
        # the whole document is JSON
        json.dumps(self.build())


class RegistryTests(unittest.TestCase):
    """Finding allocators: the master's extra directories, then the
    built-ins, then Ganeti's standard directories under the root."""

    def script(self, directory, name):
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(path, stat.S_IRWXU)
        return path

    def test_lookup_order(self):
        root = os.path.abspath(self.mktemp())
        extra = os.path.abspath(self.mktemp())
        standard = os.path.join(root, "usr/lib/ganeti/iallocators")
        local = os.path.join(root, "usr/local/lib/ganeti/iallocators")
        reg = AllocatorRegistry(task.Clock(), root=root, extra_path=[extra],
                                builtins={"hail": "no.such.module:answer"})
        self.assertEqual(reg.search_path, [extra, local, standard])
        found = reg.lookup("hail")
        self.assertIsInstance(found, BuiltinAllocator)
        self.assertEqual((found.kind, found.where),
                         ("built-in", "no.such.module:answer"))
        # a standard directory does not shadow a built-in ...
        self.script(standard, "hail")
        self.assertIsInstance(reg.lookup("hail"), BuiltinAllocator)
        # ... a directory the admin gave does
        path = self.script(extra, "hail")
        found = reg.lookup("hail")
        self.assertIsInstance(found, ExternalAllocator)
        self.assertEqual(found.path, path)
        # local before the packaged one
        self.script(standard, "other")
        self.assertEqual(reg.lookup("other").path,
                         os.path.join(standard, "other"))
        self.script(local, "other")
        self.assertEqual(reg.lookup("other").path,
                         os.path.join(local, "other"))

    def test_unknown_and_invalid_names(self):
        root = os.path.abspath(self.mktemp())
        reg = AllocatorRegistry(task.Clock(), root=root, builtins={})
        err = self.assertRaises(AllocatorNotFound, reg.lookup, "nope")
        self.assertIn("iallocator module 'nope' not found in the search path",
                      str(err))
        self.assertIn(os.path.join(root, "usr/lib/ganeti/iallocators"),
                      str(err))
        # a path is never a name: nothing outside the search path runs
        self.script(os.path.join(root, "usr/lib/ganeti/iallocators"), "x")
        for name in ("../iallocators/x", "/bin/true", "x.py", ""):
            err = self.assertRaises(AllocatorNotFound, reg.lookup, name)
            self.assertIn("not a valid allocator name", str(err))
        # a file that cannot be run is not an allocator
        directory = os.path.join(root, "usr/lib/ganeti/iallocators")
        with open(os.path.join(directory, "plain"), "w") as f:
            f.write("data")
        self.assertRaises(AllocatorNotFound, reg.lookup, "plain")

    def test_constants_match_ganeti(self):
        self.assertEqual(set(rq.MODES) - rq.EXTENSION_MODES, {
            "allocate", "multi-allocate", "relocate", "change-group",
            "node-evacuate", "allocate-secondary"})
        self.assertEqual(rq.EXTENSION_MODES, {"balance", "capacity"})
        self.assertEqual(constants.DRBD_META_SIZE, 128)
