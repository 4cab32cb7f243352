"""Instance consoles: the description, OP_INSTANCE_CONSOLE and the
``console`` query field."""

import copy

from twisted.internet import defer

from ganeti import errors
from ganeti import objects
from ganeti import pathutils
from ganeti import query
from ganeti.cmdlib import instance_console

from tests.test_cmdlib_instance import NODE1, InstanceTestCase

INST = "inst1.example.com"


class DescriptionTests(InstanceTestCase):
    """console_description for each hypervisor and parameter set."""

    def describe(self, hypervisor, hvparams, network_port=None,
                 root="/srv/node1"):
        inst = objects.Instance(name=INST, hypervisor=hypervisor,
                                network_port=network_port)
        node = self.cfg.get_node(NODE1)
        group = self.cfg.nodegroups[node.group]
        return instance_console.console_description(
            self.cfg.cluster, inst, node, group, hvparams, root=root)

    def test_kvm_serial_console(self):
        got = self.describe("kvm", {"serial_console": True,
                                    "vnc_bind_address": "0.0.0.0"}, 11000)
        socket_path = ("/srv/node1/var/run/ganeti/kvm-hypervisor/ctrl/"
                       "%s.serial" % INST)
        self.assertEqual(got, {
            "instance": INST, "kind": "ssh", "message": None,
            "host": NODE1, "port": 22, "user": "root",
            "command": ["/usr/bin/socat", "STDIO,raw,echo=0,escape=0x1d",
                        "UNIX-CONNECT:" + socket_path],
            "display": None})
        self.assertEqual(socket_path,
                         instance_console.serial_socket("/srv/node1", INST))
        self.assertTrue(socket_path.startswith(
            pathutils.Paths("/srv/node1").run_dir))

    def test_ssh_port_is_the_nodes(self):
        self.cfg.set_node_params(NODE1, ndparams={"ssh_port": 2222})
        got = self.describe("kvm", {"serial_console": True})
        self.assertEqual(got["port"], 2222)

    def test_kvm_vnc(self):
        got = self.describe("kvm", {"serial_console": False,
                                    "vnc_bind_address": "192.0.2.1"}, 11003)
        self.assertEqual(got, {
            "instance": INST, "kind": "vnc", "message": None,
            "host": "192.0.2.1", "port": 11003, "user": None,
            "command": None, "display": 11003 - 5900})

    def test_kvm_without_either(self):
        for params, port in [({"serial_console": False,
                               "vnc_bind_address": ""}, 11003),
                             # a port below VNC's base has no display
                             ({"serial_console": False,
                               "vnc_bind_address": "192.0.2.1"}, 5900),
                             ({"serial_console": False,
                               "vnc_bind_address": "192.0.2.1"}, None)]:
            got = self.describe("kvm", params, port)
            self.assertEqual((got["kind"], got["message"]),
                             ("msg", "No serial shell for instance %s"
                              % INST))

    def test_fake(self):
        got = self.describe("fake", {})
        self.assertEqual(got, {
            "instance": INST, "kind": "msg",
            "message": "Console not available for fake hypervisor",
            "host": None, "port": None, "user": None, "command": None,
            "display": None})


class ConsoleOpTests(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.create()
        self.ctx.paths = pathutils.Paths("/srv/node1")

    def op(self, name=INST):
        return {"OP_ID": "OP_INSTANCE_CONSOLE", "instance_name": name}

    def test_running_fake_instance(self):
        got = self.ok(self.op())
        self.assertEqual((got["instance"], got["kind"], got["message"]),
                         (INST, "msg",
                          "Console not available for fake hypervisor"))
        self.assertEqual(self.rpc.procedures(), ["instance_info"])

    def test_running_kvm_instance(self):
        self.create("kvm1.example.com", hypervisor="kvm",
                    hvparams={"vnc_bind_address": "127.0.0.1"})
        got = self.ok(self.op("kvm1.example.com"))
        self.assertEqual((got["kind"], got["host"], got["user"]),
                         ("ssh", NODE1, "root"))
        self.assertEqual(got["command"][-1], "UNIX-CONNECT:" +
                         instance_console.serial_socket(
                             "/srv/node1", "kvm1.example.com"))
        # no serial console: the VNC display of the instance's port
        self.ok({"OP_ID": "OP_INSTANCE_SET_PARAMS",
                 "instance_name": "kvm1.example.com",
                 "hvparams": {"serial_console": False}})
        got = self.ok(self.op("kvm1.example.com"))
        port = self.inst("kvm1.example.com").network_port
        self.assertEqual((got["kind"], got["host"], got["port"],
                          got["display"]),
                         ("vnc", "127.0.0.1", port, port - 5900))

    def test_stopped_instance(self):
        self.ok({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": INST})
        before = copy.deepcopy(self.inst().to_dict())
        err = self.fails(self.op(), errors.OpExecError)
        self.assertEqual(str(err), "Instance %s is not running (state"
                         " ADMIN_down)" % INST)
        self.assertEqual(self.inst().to_dict(), before)

    def test_crashed_instance(self):
        self.rpc.domains[(NODE1, INST)] = "crashed"
        err = self.fails(self.op(), errors.OpExecError)
        self.assertEqual(str(err), "Instance %s is not running (state"
                         " ERROR_down)" % INST)

    def test_unknown_instance(self):
        err = self.fails(self.op("nope.example.com"))
        self.assertIn("nope.example.com", str(err))
        self.assertEqual(self.rpc.calls, [])

    def test_offline_primary_node(self):
        self.cfg.set_node_params(NODE1, offline=True,
                                 master_candidate=False)
        err = self.fails(self.op())
        self.assertIn("offline node %s" % NODE1, str(err))
        self.assertEqual(self.rpc.calls, [])


class _Live(object):
    def __init__(self, rpc, uuid):
        self.rpc = rpc
        self.uuid = uuid

    def instances_runtime(self, node_uuids):
        return dict((u, self.rpc._all_instances_info(NODE1, [])
                     if u == self.uuid else {}) for u in node_uuids)

    def nodes_runtime(self, node_uuids):
        return {}


class QueryFieldTests(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.create()
        self.create("kvm1.example.com", hypervisor="kvm")
        self.qctx = query.QueryContext(
            self.cfg, live=_Live(self.rpc, self.cfg.get_node(NODE1).uuid),
            root="/srv/node1")

    @defer.inlineCallbacks
    def rows(self):
        result = yield defer.maybeDeferred(
            query.query, self.qctx, "instance",
            ["name", "console", "oper_state"])
        return dict((row[0][1], row[1:]) for row in result["data"])

    def test_running_and_stopped(self):
        rows = self.successResultOf(self.rows())
        status, console = rows["kvm1.example.com"][0]
        self.assertEqual(status, 0)
        self.assertEqual(console["command"][-1], "UNIX-CONNECT:" +
                         instance_console.serial_socket(
                             "/srv/node1", "kvm1.example.com"))
        self.assertEqual(rows[INST][0][1]["kind"], "msg")
        self.ok({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": INST})
        rows = self.successResultOf(self.rows())
        # stopped: unavailable, like Ganeti's field
        self.assertEqual(rows[INST], [[3, None], [0, False]])   # RS_UNAVAIL

    def test_field_is_listed(self):
        fields = query.query_fields(self.qctx, "instance", ["console"])
        self.assertEqual(fields["fields"][0]["kind"], "other")
