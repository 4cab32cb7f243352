"""The OpenAPI document's schemas: the translation of the ht type
language to JSON Schema, request bodies that cannot drift from what the
handlers read, and answers of the in-process RAPI that match the
documented shapes.

Every request the RAPI tests (tests/test_rapi.py and the modules using
its RapiTestCase) make is also checked against the document; this module
adds what those do not cover.
"""

import copy
import json
import re

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import errors
from ganeti import ht
from ganeti import opcodes
from ganeti.rapi import openapi
from ganeti.rapi import resources
from ganeti.rapi import schemas

from tests import ganeti_peer
from tests import openapi_check
from tests.test_rapi import CREATE_BODY, I1, N1, RapiTestCase, WRITER


def _checker():
    checker = openapi_check.shared_checker()
    if checker is None:
        raise unittest.SkipTest("OpenAPI validators not installed")
    return checker


# --- The ht type language as JSON Schema -----------------------------------------

#: (type, values it accepts, values it refuses)
_CASES = [
    (ht.ANY, [None, 1, "a", [1, {"a": None}], {"x": 1.5}], []),
    (ht.BOOL, [True, False], [0, 1, "true", None]),
    (ht.INT, [0, -5, 2 ** 62], [1.5, True, "1", None]),
    (ht.NONNEG_INT, [0, 7], [-1, 1.0]),
    (ht.integer(0, 15), [0, 15], [-1, 16]),
    (ht.NUMBER, [1, 1.5], [True, "1"]),
    (ht.NONNEG_NUMBER, [0, 2.5], [-0.5]),
    (ht.FLOAT, [1, 1.5], [None, "x"]),
    (ht.STR, ["", "a"], [1, None]),
    (ht.NESTR, ["a"], ["", 1]),
    (ht.one_of("a", "b"), ["a", "b"], ["c", None, 1]),
    (ht.one_of(1, 2), [1, 2], [True, 3, "1"]),
    (ht.maybe(ht.list_of(ht.NESTR)), [None, [], ["a"]], [[""], "a", [None]]),
    (ht.list_of(ht.INT, nonempty=True), [[1]], [[], [None]]),
    (ht.dict_of(ht.STR, ht.INT), [{}, {"a": 1}], [{"a": "1"}, []]),
    (opcodes.NIC_PARAMS, [{}, {"mac": "auto", "ip": None}],
     [{"colour": "red"}, {"mac": 1}]),
    (ht.tuple_of(ht.INT, ht.STR), [[1, "a"]], [[1], [1, "a", 2], "ab"]),
    (ht.either(ht.INT, ht.STR), [1, "a"], [None, 1.5, []]),
    (ht.maybe(ht.either(ht.INT, ht.STR)), [None, 1, "a"], [[], 1.5]),
    (ht.maybe(ht.one_of("x")), [None, "x"], ["y"]),
    (ht.private(ht.NESTR), ["a"], [""]),
    (ht.HOST_NAME, ["a.example.com", "A-1_b"],
     ["", ".a", "-a", "a..b", "a b", "a/b", "x" * 256]),
    (ht.INSTANCE_HOST_NAME, ["", "a.example.com"], ["a b"]),
    (ht.OBJECT_NAME, ["group 2"[:5], "net1", "a.b"],
     ["", ".", "..", "-x", "a/b", "a b", "x" * 256]),
    (ht.OS_NAME, ["debootstrap+default", "busybox"],
     ["", "+x", ".x", "a b"]),
    (ht.IPV4_ADDR, ["192.0.2.1"], [1]),
    (opcodes.DEPENDENCIES, [[], [[1, ["success"]], ["2", []]]],
     [[[1]], [[1, ["ok"]]]]),
    (opcodes.RECREATE_DISKS, [[0, 1], [[0, {"size": "1G"}]]], [[-1]]),
    # OpenAPI 3.0 has no per-position item types: a tuple's items are any
    # of its types, its length is fixed (x-ganeti-tuple tells the types)
    (opcodes.device_mods(opcodes.DISK_PARAMS),
     [[["add", -1, {"size": 1}]], [[0, {}]]], [[["add", 0, {}, 1]], [{}]]),
    (opcodes.opcode_class("OP_TEST_DELAY")._BY_NAME["reason"].type,
     [None, [], [["gnt:user", "why", 1]]], [[["a", "b"]]]),
]


class TranslatorTests(unittest.TestCase):

    def setUp(self):
        self.checker = _checker()

    def accepts(self, schema, value):
        return not self.checker.errors(schema, value)

    def test_schema_accepts_what_the_type_accepts(self):
        for typ, good, bad in _CASES:
            schema = schemas.ht_schema(typ)
            for value in good:
                typ.check(value)    # the case itself is right
                self.assertTrue(self.accepts(schema, value),
                                (typ, value, schema))

    def test_schema_refuses_what_the_type_refuses(self):
        # ht.where() predicates (IP addresses) are described in words
        # only; every other refusal is in the schema
        for typ, good, bad in _CASES:
            schema = schemas.ht_schema(typ)
            for value in bad:
                self.assertRaises(ht.Invalid, typ.check, value)
                self.assertFalse(self.accepts(schema, value),
                                 (typ, value, schema))

    def test_the_dialect(self):
        # OpenAPI 3.0: no "null" type, nullable instead
        schema = schemas.ht_schema(ht.maybe(ht.STR))
        self.assertEqual((schema["type"], schema["nullable"]),
                         ("string", True))
        types = set()

        def walk(value):
            if isinstance(value, dict):
                if isinstance(value.get("type"), str):
                    types.add(value["type"])
                for item in value.values():
                    walk(item)
            elif isinstance(value, list):
                for item in value:
                    walk(item)
        walk(openapi.document())
        self.assertEqual(types, {"array", "boolean", "integer", "number",
                                 "object", "string", "http"})
        schema = schemas.ht_schema(ht.secret(ht.NESTR))
        self.assertTrue(schema["x-ganeti-secret"])
        self.assertEqual(schemas.ht_schema(ht.NESTR)["description"],
                         "a non-empty string")

    def test_unknown_type_is_an_error(self):
        class Odd(ht.Type):
            desc = "something odd"
        self.assertRaises(errors.ProgrammerError, schemas.ht_schema, Odd())
        self.assertRaises(errors.ProgrammerError, schemas.ht_schema,
                          ht.list_of(Odd()))

    def test_every_opcode(self):
        doc = openapi.document()
        for op_id in sorted(opcodes.ALL_OP_IDS):
            klass = opcodes.opcode_class(op_id)
            schema = doc["components"]["schemas"][op_id]
            self.assertEqual(set(schema["properties"]),
                             set(p.name for p in klass.PARAMS) | {"OP_ID"},
                             op_id)
            self.assertEqual(set(schema.get("required", ())),
                             set(p.name for p in klass.PARAMS
                                 if p.required), op_id)
            self.assertFalse(schema["additionalProperties"])
            for param in klass.PARAMS:
                prop = schema["properties"][param.name]
                if "default" in prop:
                    self.assertEqual(prop["default"], param.default)
                    self.assertTrue(self.accepts(prop, prop["default"]),
                                    (op_id, param.name))

    def test_opcodes_validate_against_their_schema(self):
        op = opcodes.OpInstanceCreate(
            instance_name="x.example.com", mode="create", disks=[{"size": 1}],
            nics=[{"mac": "auto"}], disk_template="plain", os_type="busybox")
        data = op.to_dict()
        ref = {"$ref": "#/components/schemas/OP_INSTANCE_CREATE"}
        self.assertEqual(self.checker.errors(ref, data), [])
        data["disks"] = "big"
        self.assertNotEqual(self.checker.errors(ref, data), [])
        self.assertNotEqual(self.checker.errors(ref, dict(
            op.to_dict(), no_such_parameter=1)), [])


# --- Request bodies ----------------------------------------------------------------

#: a body each method with one accepts; the path with its names filled in
SAMPLES = {
    ("PUT", "/2/modify"): {"candidate_pool_size": 5},
    ("POST", "/2/sessions"): {"username": "writer", "password": "secret"},
    ("PUT", "/2/redistribute-config"): {"depends": []},
    ("POST", "/2/instances"): CREATE_BODY,
    ("POST", "/2/instances-multi-alloc"): {"instances": [dict(
        CREATE_BODY, name="m1.example.com")], "iallocator": "hail"},
    ("DELETE", "/2/instances/{name}"): {"shutdown_timeout": 60},
    ("GET", "/2/instances/{name}/info"): {"depends": []},
    ("POST", "/2/instances/{name}/reboot"): {"shutdown_timeout": 30},
    ("PUT", "/2/instances/{name}/shutdown"): {"timeout": 30},
    ("PUT", "/2/instances/{name}/startup"): {"startup_paused": True},
    ("POST", "/2/instances/{name}/reinstall"): {"os": "busybox",
                                                "start": False},
    ("POST", "/2/instances/{name}/replace-disks"): {"disks": "0",
                                                    "mode": "replace_auto"},
    ("PUT", "/2/instances/{name}/activate-disks"): {"wait_for_sync": True},
    ("PUT", "/2/instances/{name}/deactivate-disks"): {"force": True},
    ("POST", "/2/instances/{name}/recreate-disks"): {"disks": [0]},
    ("POST", "/2/instances/{name}/disk/{disk_index}/grow"): {
        "amount": 1024, "wait_for_sync": False},
    ("PUT", "/2/instances/{name}/prepare-export"): {},
    ("PUT", "/2/instances/{name}/export"): {"destination": N1,
                                            "mode": "local"},
    ("PUT", "/2/instances/{name}/migrate"): {"mode": "live"},
    ("PUT", "/2/instances/{name}/failover"): {"ignore_consistency": True},
    ("PUT", "/2/instances/{name}/rename"): {"new_name": "ren.example.com",
                                            "name_check": False},
    ("PUT", "/2/instances/{name}/modify"): {"custom_beparams": {
        "maxmem": 256}},
    ("POST", "/2/instances/{name}/create"): {"__version__": 1},
    ("PUT", "/2/nodes/{name}/role"): "drained",
    ("POST", "/2/nodes/{name}/evacuate"): {"mode": "all",
                                           "iallocator": "hail"},
    ("POST", "/2/nodes/{name}/migrate"): {"mode": "live"},
    ("POST", "/2/nodes/{name}/modify"): {"drained": True},
    ("POST", "/2/nodes/{name}/powercycle"): {},
    ("GET", "/2/nodes/{name}/storage"): {},
    ("PUT", "/2/nodes/{name}/storage/modify"): {},
    ("PUT", "/2/nodes/{name}/storage/repair"): {},
    ("POST", "/2/groups"): {"name": "group3", "alloc_policy": "preferred"},
    ("DELETE", "/2/groups/{name}"): {},
    ("PUT", "/2/groups/{name}/modify"): {"alloc_policy": "unallocable"},
    ("PUT", "/2/groups/{name}/rename"): {"new_name": "group9"},
    ("PUT", "/2/groups/{name}/assign-nodes"): {"nodes": [N1]},
    ("POST", "/2/groups/{name}/evacuate"): {"early_release": True},
    ("POST", "/2/networks"): {"name": "net2", "network": "10.1.0.0/24"},
    ("DELETE", "/2/networks/{name}"): {},
    ("PUT", "/2/networks/{name}/connect"): {
        "group_name": "group2", "network_mode": "bridged",
        "network_link": "br0"},
    ("PUT", "/2/networks/{name}/disconnect"): {"group_name": "group2"},
    ("PUT", "/2/networks/{name}/modify"): {"gateway": "10.0.0.1"},
    ("GET", "/2/jobs/{job_id}/wait"): {"fields": ["status"],
                                       "previous_job_info": None,
                                       "previous_log_serial": None},
    ("PUT", "/2/query/{resource}"): {"fields": ["name"],
                                     "qfilter": ["=", "name", N1]},
    ("POST", "/2/filters"): {"priority": 1, "predicates": [],
                             "action": ["RATE_LIMIT", 2], "reason": []},
    ("PUT", "/2/filters/{uuid}"): {"action": "ACCEPT"},
    ("POST", "/2/instances/{name}/console/sessions/{session}/input"): {
        "data": "ls\r"},
}

#: query strings the methods need besides the body
_QUERY = {
    ("PUT", "/2/instances/{name}/prepare-export"): "?mode=local",
    ("GET", "/2/nodes/{name}/storage"): "?storage_type=lvm-vg&"
    "output_fields=name",
    ("PUT", "/2/nodes/{name}/storage/modify"): "?storage_type=lvm-vg&"
    "name=xenvg",
    ("PUT", "/2/nodes/{name}/storage/repair"): "?storage_type=lvm-vg&"
    "name=xenvg",
}

_NAMES = {"/2/instances/": I1, "/2/nodes/": N1, "/2/groups/": "group2",
          "/2/networks/": "net1"}


def url_of(verb, path):
    """The URL of a request of ``verb`` to ``path``."""
    return concrete(path) + _QUERY.get((verb, path), "")


def concrete(path):
    """``path`` with real objects of the test configuration."""
    for prefix, name in _NAMES.items():
        if path.startswith(prefix):
            path = path.replace("{name}", name)
    return (path.replace("{disk_index}", "0").replace("{job_id}", "1")
            .replace("{resource}", "node")
            .replace("{uuid}", "f0f0f0f0-0000-4000-8000-000000000001")
            .replace("{session}", "s1"))


def _body_methods():
    for res in resources.RESOURCES:
        for verb, method in sorted(res.methods.items()):
            if method.body_spec is not None:
                yield res, verb, method


class BodyDriftTests(RapiTestCase):
    """The request body schemas say what the handlers read: no more, no
    less."""

    # the probes send bodies the schemas refuse on purpose; a handler
    # reading the old name of a key only when the new one is absent
    # (qfilter, filter) may then still answer 200
    openapi_checks = False

    def setUp(self):
        RapiTestCase.setUp(self)
        self.checker = _openapi_checker_for(self)
        # a job for /2/jobs/1/wait; filters for /2/filters/{uuid}
        self.handler.submit_job([opcodes.OpTestDelay(duration=0)])

    def body_properties(self, verb, path):
        schema = self.checker.body_schema(verb, concrete(path))
        name = schema["$ref"].rsplit("/", 1)[1]
        return self.checker.doc["components"]["schemas"][name]

    def test_every_body_has_a_sample(self):
        documented = set((verb, res.path)
                         for res, verb, _ in _body_methods())
        self.assertEqual(documented, set(SAMPLES))

    def test_opcode_bodies_hold_the_opcodes_parameters(self):
        """Opcode parameters, less what the handler refuses, plus Ganeti's
        RAPI names and the keys it adds: checked against the opcode's own
        parameter list."""
        for res, verb, method in _body_methods():
            body = method.body_spec
            if body.op is None:
                continue
            schema = self.body_properties(verb, res.path)
            expected = set(p.name for p in
                           opcodes.opcode_class(body.op).PARAMS)
            expected = (expected | {"OP_ID"} | set(body.renames) |
                        set(body.extra)) - set(body.exclude)
            self.assertEqual(set(schema["properties"]), expected,
                             (verb, res.path))
            self.assertEqual(schema["x-ganeti-opcode"], body.op)

    @defer.inlineCallbacks
    def test_samples_validate_and_are_accepted(self):
        for (verb, path), body in sorted(SAMPLES.items()):
            url = url_of(verb, path)
            self.assertEqual(self.checker.body_errors(verb, url, body), [],
                             (verb, path))
            code, value = yield self.request(verb, url, body, WRITER)
            # the filter rules and consoles go to the master, which lacks
            # them here (tests/test_rapi_console.py has a master with them)
            self.assertIn(code, (200, 501) if "filters" in path or
                          "console" in path else (200,), (verb, path, value))

    @defer.inlineCallbacks
    def test_handlers_accept_every_documented_key(self):
        """A documented key is never refused as unknown (its value may be
        wrong: a probe no parameter takes)."""
        probe = {"probe": [[]]}
        for res, verb, method in _body_methods():
            if method.body_spec.whole is not None:
                continue
            schema = self.body_properties(verb, res.path)
            for key in sorted(schema["properties"]):
                body = dict(SAMPLES[(verb, res.path)], **{key: probe})
                code, value = yield self.request(
                    verb, url_of(verb, res.path), body, WRITER)
                if code == 400:
                    self.assertNotRegex(
                        value["message"], r"(^|\W)%s: unknown"
                        % re.escape(key), (verb, res.path, key))
                    self.assertNotIn("cannot be changed over RAPI",
                                     value["message"])

    @defer.inlineCallbacks
    def test_handlers_refuse_what_is_not_documented(self):
        for res, verb, method in _body_methods():
            body_spec = method.body_spec
            if body_spec.whole is not None:
                continue
            url = url_of(verb, res.path)
            body = dict(SAMPLES[(verb, res.path)], no_such_parameter=1)
            schema = self.body_properties(verb, res.path)
            code, value = yield self.request(verb, url, body, WRITER)
            if body_spec.lenient:
                # documented as ignoring other keys, and it does
                self.assertTrue(schema["additionalProperties"])
                self.assertIn(code, (200,), (verb, res.path, value))
            else:
                self.assertFalse(schema["additionalProperties"])
                self.assertEqual(code, 400, (verb, res.path, value))
                self.assertIn("no_such_parameter", value["message"])
            for name in body_spec.exclude:
                body = dict(SAMPLES[(verb, res.path)], **{name: []})
                code, value = yield self.request(verb, url, body, WRITER)
                self.assertEqual(code, 400, (verb, res.path, name))
                self.assertIn(name, value["message"])

    @defer.inlineCallbacks
    def test_the_role_body(self):
        url = concrete("/2/nodes/{name}/role")
        for role in self.body_properties("PUT", "/2/nodes/{name}/role")[
                "enum"]:
            yield self.ok("PUT", url, role)
        self.assertNotEqual(self.checker.body_errors("PUT", url, "master"),
                            [])
        yield self.error(400, "PUT", url, "master")

    def test_renamed_and_filled_parameters(self):
        create = self.body_properties("POST", "/2/instances")
        self.assertIn("name", create["properties"])
        self.assertIn("instance_name", create["properties"])
        self.assertEqual(create["required"], ["__version__"])
        nested = self.checker.doc["components"]["schemas"][
            "InstanceCreateNested"]
        self.assertEqual(nested["allOf"], [{"anyOf": [
            {"required": ["name"]}, {"required": ["instance_name"]}]}])
        url = "/2/instances-multi-alloc"
        self.assertNotEqual(self.checker.body_errors(
            "POST", url, {"instances": [{"mode": "create"}]}), [])
        grow = self.body_properties(
            "POST", "/2/instances/{name}/disk/{disk_index}/grow")
        self.assertEqual(grow["required"], ["amount"])
        self.assertIn("given by the URL", grow["properties"]["disk"][
            "description"])
        modify = self.body_properties("PUT", "/2/modify")
        self.assertNotIn("compression_tools", modify["properties"])


def _openapi_checker_for(_case):
    checker = openapi_check.shared_checker()
    if checker is None:
        raise unittest.SkipTest("OpenAPI validators not installed")
    return checker


# --- Ganeti's own RAPI client ---------------------------------------------------------

#: calls of Ganeti 3.0's RAPI client; its requests are recorded instead of
#: sent, and each body must validate
_CLIENT_SCRIPT = r'''
import json, sys
from ganeti.rapi import client

sent = []


class Recorder(client.GanetiRapiClient):
    def _SendRequest(self, method, path, query, content):
        sent.append([method, path, content])
        if path.endswith("/features"):
            return ["instance-create-reqv1", "instance-reinstall-reqv1",
                    "node-migrate-reqv1", "node-evac-res1"]
        return 1


c = Recorder("rapi.test")
I, N = "inst1.example.com", "node1.example.com"
c.ModifyCluster(candidate_pool_size=4)
c.RedistributeConfig()
c.CreateInstance("create", "new.example.com", "plain", [{"size": 1024}],
                 [{}], os="busybox", pnode=N, beparams={"memory": 256})
c.InstancesMultiAlloc([c.InstanceAllocation(
    "create", "m1.example.com", "plain", [{"size": 1}], [{}],
    os="busybox")], iallocator="hail")
c.DeleteInstance(I)
c.ModifyInstance(I, custom_beparams={"maxmem": 256})
c.ActivateInstanceDisks(I, ignore_size=True)
c.DeactivateInstanceDisks(I, force=True)
c.RecreateInstanceDisks(I, disks=[0], nodes=[N])
c.GrowInstanceDisk(I, 0, 1024, wait_for_sync=True)
c.RebootInstance(I, reboot_type="soft", ignore_secondaries=True)
c.ShutdownInstance(I, timeout=30)
c.StartupInstance(I)
c.ReinstallInstance(I, os="busybox", no_startup=True,
                    osparams={"a": "b"})
c.ReplaceInstanceDisks(I, disks=[0], mode="replace_on_primary")
c.ExportInstance(I, "local", N, shutdown=True, remove_instance=False)
c.MigrateInstance(I, mode="live", cleanup=False, target_node=N)
c.FailoverInstance(I, iallocator="hail", ignore_consistency=True)
c.RenameInstance(I, "ren.example.com", ip_check=False, name_check=False)
c.EvacuateNode(N, iallocator="hail", mode="all")
c.MigrateNode(N, mode="live", iallocator="hail")
c.SetNodeRole(N, "drained")
c.ModifyNode(N, drained=True)
c.CreateGroup("g3", alloc_policy="preferred")
c.ModifyGroup("group2", alloc_policy="unallocable")
c.RenameGroup("group2", "g9")
c.AssignGroupNodes("group2", [N])
c.CreateNetwork("net2", "10.1.0.0/24", gateway="10.1.0.1")
c.ConnectNetwork("net1", "group2", "bridged", "br0")
c.DisconnectNetwork("net1", "group2")
c.ModifyNetwork("net1", gateway="10.0.0.1")
c.Query("node", ["name"], qfilter=["=", "name", N])
c.WaitForJobChange(1, ["status"], None, None)
json.dump(sent, sys.stdout)
'''


class GanetiClientBodyTests(unittest.TestCase):

    @defer.inlineCallbacks
    def test_bodies_of_ganetis_client_validate(self):
        ganeti_peer.skip_unless_available()
        out, err, code = yield ganeti_peer.run_python(_CLIENT_SCRIPT)
        self.assertEqual(code, 0, err)
        checker = _checker()
        sent = json.loads(out)
        with_body = [(m, p, b) for m, p, b in sent if b is not None]
        self.assertGreater(len(with_body), 25)
        for method, path, body in with_body:
            self.assertNotEqual(checker.operation(method, path), None,
                                (method, path))
            self.assertEqual(checker.body_errors(method, path, body), [],
                             (method, path, body))


# --- Answers ----------------------------------------------------------------------

class AnswerTests(RapiTestCase):
    """Real answers of the in-process RAPI match the answer schemas (every
    RAPI test checks its answers too; these make sure the checks have
    something to bite on)."""

    openapi_checks = False

    def setUp(self):
        RapiTestCase.setUp(self)
        self.checker = _openapi_checker_for(self)

    @defer.inlineCallbacks
    def answer(self, path, auth=WRITER, nonempty=True):
        value = yield self.ok("GET", path, auth=auth)
        self.assertEqual(self.checker.answer_errors("GET", path, 200, value),
                         [], path)
        if nonempty:
            self.assertTrue(value, path)
        return value

    def refused(self, path, value):
        self.assertNotEqual(
            self.checker.answer_errors("GET", path, 200, value), [],
            (path, value))

    @defer.inlineCallbacks
    def test_instances_bulk(self):
        value = yield self.answer("/2/instances?bulk=1")
        self.assertIn("disk.sizes", value[0])
        wrong = copy.deepcopy(value)
        wrong[0]["admin_state"] = 1
        self.refused("/2/instances", wrong)
        wrong = copy.deepcopy(value)
        del wrong[0]["name"]
        self.refused("/2/instances", wrong)
        plain = yield self.answer("/2/instances")
        self.assertEqual(sorted(plain[0]), ["id", "uri"])
        yield self.answer("/2/instances/" + I1)

    @defer.inlineCallbacks
    def test_nodes_bulk(self):
        value = yield self.answer("/2/nodes?bulk=1")
        wrong = copy.deepcopy(value)
        wrong[0]["mtotal"] = "much"
        self.refused("/2/nodes", wrong)
        node = yield self.answer("/2/nodes/" + N1)
        self.assertEqual(node["secondary_ip"], node["sip"])
        self.refused("/2/nodes/" + N1, dict(node, unknown_key=1))
        yield self.answer("/2/groups?bulk=1")
        yield self.answer("/2/networks?bulk=1")

    @defer.inlineCallbacks
    def test_live_fields(self):
        """With live data from the nodes the live fields have values, of
        the documented types."""
        self.handler.live = _Live(self.cfg)
        nodes = yield self.answer("/2/nodes?bulk=1")
        self.assertEqual(nodes[0]["mtotal"], 8192)
        self.assertEqual(nodes[0]["ctotal"], 4)
        instances = yield self.answer("/2/instances?bulk=1")
        running = [i for i in instances if i["oper_state"]]
        self.assertTrue(running)
        self.assertEqual(running[0]["oper_ram"], 128)
        self.assertIsInstance(running[0]["status"], str)
        self.refused("/2/instances", [dict(running[0], oper_ram=128.5)])

    @defer.inlineCallbacks
    def test_a_job(self):
        job_id = yield self.ok("PUT", "/2/instances/%s/startup" % I1)
        self.assertEqual(self.checker.answer_errors(
            "PUT", "/2/instances/x/startup", 200, job_id), [])
        job = yield self.answer("/2/jobs/%d" % job_id)
        self.assertEqual(job["ops"][0]["OP_ID"], "OP_INSTANCE_STARTUP")
        self.refused("/2/jobs/1", dict(job, opstatus=["sleeping"]))
        self.refused("/2/jobs/1", dict(job, received_ts=[1]))
        yield self.answer("/2/jobs?bulk=1")
        yield self.answer("/2/jobs")
        # the job's opcodes validate against their own schemas
        ref = {"$ref": "#/components/schemas/OP_INSTANCE_STARTUP"}
        self.assertEqual(self.checker.errors(ref, job["ops"][0]), [])

    @defer.inlineCallbacks
    def test_info_and_the_rest(self):
        info = yield self.answer("/2/info")
        wrong = dict(info)
        del wrong["name"]
        self.refused("/2/info", wrong)
        self.refused("/2/info", dict(info, protocol_version="x"))
        yield self.answer("/2/features")
        yield self.answer("/version")
        yield self.answer("/2/tags")
        yield self.answer("/2/query/node?fields=name,mtotal")
        yield self.answer("/2/query/node/fields?fields=name")
        yield self.answer("/2/nodes/%s/role" % N1)
        yield self.answer("/2/maintenance", nonempty=False)
        yield self.answer("/2/autorepair")
        yield self.answer("/2/openapi.json")
        self.refused("/2/nodes/%s/role" % N1, "boss")

    def test_errors_are_documented(self):
        for res in resources.RESOURCES:
            for verb in res.methods:
                for code in ("400", "404", "500", "501", "503"):
                    self.assertEqual(self.checker.answer_errors(
                        verb, concrete(res.path), code,
                        {"code": int(code), "message": "m",
                         "explain": "e"}), [])


class DocumentTests(unittest.TestCase):

    def test_valid_document(self):
        openapi_check.validate_document(openapi.document())

    def test_request_bodies_refer_to_components(self):
        doc = openapi.document()
        names = set()
        for item in doc["paths"].values():
            for verb in ("get", "put", "post", "delete"):
                body = item.get(verb, {}).get("requestBody")
                if body:
                    ref = body["content"]["application/json"]["schema"][
                        "$ref"]
                    names.add(ref.rsplit("/", 1)[1])
        self.assertLessEqual(names, set(doc["components"]["schemas"]))
        self.assertIn("InstanceCreate", names)
        # a body with required keys must be given
        paths = doc["paths"]
        self.assertTrue(paths["/2/instances"]["post"]["requestBody"][
            "required"])
        self.assertFalse(paths["/2/instances/{name}/startup"]["put"][
            "requestBody"]["required"])
        self.assertTrue(paths["/2/nodes/{name}/role"]["put"]["requestBody"][
            "required"])


class _Live(object):
    """Live data: every node has the same stats and runs its primary
    instances."""

    def __init__(self, cfg):
        self.cfg = cfg

    def instances_runtime(self, node_uuids):
        result = dict((u, {}) for u in node_uuids)
        for inst in self.cfg.instances.values():
            if inst.primary_node in result:
                result[inst.primary_node][inst.name] = {
                    "state": "running", "memory": 128, "vcpus": 1}
        return result

    def nodes_runtime(self, node_uuids):
        return dict((u, {"mtotal": 8192, "mnode": 1024, "mfree": 4096,
                         "dtotal": 10240, "dfree": 5000, "ctotal": 4,
                         "cnos": 1, "cnodes": 1, "csockets": 1,
                         "spfree": 0, "sptotal": 0, "bootid": "b1"})
                    for u in node_uuids)
