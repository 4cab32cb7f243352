"""The master's part of the browser console (:mod:`ganeti.console_relay`)
and its luxi methods: the checks before a console opens, the node's
refusals as errors with codes, all through the real luxi server code to
the master's handler, the node's session logic behind a fake RPC."""

import base64

from twisted.internet import defer

from ganeti import constants
from ganeti import errors
from ganeti import luxi
from ganeti import objects
from ganeti.backend import console as backend_console
from ganeti.config import ConfigStore
from ganeti.console_relay import ConsoleRelay
from ganeti.rpc import RpcResult
from ganeti.server.masterd import MasterLuxiHandler

from tests.fakes import ClockTestCase, FakeRpc
from tests.test_console_node import FakeSockets

N1 = "node1.example.com"
N2 = "node2.example.com"


def make_config():
    store = ConfigStore.create(
        None, "cluster.example.com", N1, "192.0.2.1",
        enabled_hypervisors=(constants.HT_KVM, constants.HT_FAKE))
    store.add_node(objects.Node(name=N2, primary_ip="192.0.2.2",
                                secondary_ip="192.0.2.2"))
    n1 = store.get_node(N1).uuid
    for name, hv, state, hvparams in [
            ("vm1", constants.HT_KVM, constants.ADMINST_UP,
             {"serial_console": True}),
            ("vm-noserial", constants.HT_KVM, constants.ADMINST_UP,
             {"serial_console": False}),
            ("vm-down", constants.HT_KVM, constants.ADMINST_DOWN, {}),
            ("fake1", constants.HT_FAKE, constants.ADMINST_UP, {})]:
        store.add_instance(objects.Instance(
            name=name, primary_node=n1, os="busybox+default",
            hypervisor=hv, admin_state=state, hvparams=hvparams,
            beparams={"maxmem": 128, "minmem": 128, "vcpus": 1}), [])
    return store


class NodeConsoles(FakeRpc):
    """Node daemons whose console procedures are the real session logic
    (one ConsoleSessions per node) over fake sockets."""

    def __init__(self, clock):
        FakeRpc.__init__(self)
        self.sockets = FakeSockets()
        self.nodes = {}
        self.clock = clock

    def sessions(self, node):
        if node not in self.nodes:
            self.nodes[node] = backend_console.ConsoleSessions(
                self.clock, self.sockets.connect,
                new_id=lambda: "s%d" % (len(self.sockets.links)))
        return self.nodes[node]

    def call(self, node, procedure, args=(), timeout=None):
        if self.failure(node, procedure, args):
            return FakeRpc.call(self, node, procedure, args, timeout)
        if procedure == "console_open":
            return defer.Deferred.fromCoroutine(self._open(node, *args))
        if procedure == "console_read":
            d = self.sessions(node).read(args[0], args[1], args[2], args[3],
                                         args[4])
            return d.addCallback(self._ok, node, procedure)
        return FakeRpc.call(self, node, procedure, args, timeout)

    async def _open(self, node, instance, owner):
        answer = await self.sessions(node).open(instance, "/run/%s" % instance,
                                                owner)
        return self._ok(answer, node, "console_open")

    def _ok(self, payload, node, procedure):
        return RpcResult(node=node, procedure=procedure, success=True,
                         payload=payload)

    def _console_write(self, node, session, owner, data, instance):
        return self.sessions(node).write(session, owner,
                                         base64.b64decode(data), instance)

    def _console_close(self, node, session, owner, instance):
        return self.sessions(node).close(session, owner, instance)


class _Config(object):
    def __init__(self, rpc):
        self.node_rpc = rpc


class FakeMaster(object):
    """What the master's luxi handler needs of the master for consoles:
    its configuration and the node RPC."""

    def __init__(self, cfg, rpc):
        self.cfg = cfg
        self.config = _Config(rpc)


class RelayTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.cfg = make_config()
        self.rpc = NodeConsoles(self.clock)
        self.factory = luxi.LuxiServerFactory(MasterLuxiHandler(
            FakeMaster(self.cfg, self.rpc)))
        self.addCleanup(lambda: [s.close_all()
                                 for s in self.rpc.nodes.values()])

    def call(self, method, *args):
        raw = luxi.format_request(method, list(args))[:-1]
        d = defer.Deferred.fromCoroutine(self.factory.answer(raw))
        return d.addCallback(lambda resp: luxi.parse_response(resp[:-1]))

    def refused(self, method, *args):
        return self.failureResultOf(self.call(method, *args)).value

    def test_open_write_read_close(self):
        answer = self.successResultOf(self.call(luxi.REQ_CONSOLE_OPEN, "vm1",
                                                "user=alice"))
        sid = answer["session"]
        link = self.rpc.sockets.last("/run/vm1")
        self.successResultOf(self.call(
            luxi.REQ_CONSOLE_WRITE, "vm1", sid, "user=alice",
            base64.b64encode(b"echo hi\r").decode()))
        self.assertEqual(link.transport.value(), b"echo hi\r")
        d = self.call(luxi.REQ_CONSOLE_READ, "vm1", sid, "user=alice", 0, 10)
        self.assertNoResult(d)
        link.dataReceived(b"hi\r\n")
        got = self.successResultOf(d)
        self.assertEqual((base64.b64decode(got["data"]), got["next"]),
                         (b"hi\r\n", 4))
        self.successResultOf(self.call(luxi.REQ_CONSOLE_CLOSE, "vm1", sid,
                                       "user=alice"))
        err = self.refused(luxi.REQ_CONSOLE_READ, "vm1", sid, "user=alice",
                           0, 0)
        self.assertIsInstance(err, errors.OpPrereqError)
        self.assertEqual(err.args[1], errors.ECODE_NOENT)

    def test_checks_before_opening(self):
        for name, code, text in [
                ("nope", errors.ECODE_NOENT, "instance 'nope' is not known"),
                ("vm-down", errors.ECODE_STATE,
                 "Instance vm-down is not running (state ADMIN_down)"),
                ("vm-noserial", errors.ECODE_INVAL,
                 "Instance vm-noserial has no serial console (hypervisor"
                 " parameter serial_console is off)"),
                ("fake1", errors.ECODE_INVAL, "Instance fake1 runs under the"
                 " fake hypervisor: only kvm instances have a serial"
                 " console")]:
            err = self.refused(luxi.REQ_CONSOLE_OPEN, name, "user=alice")
            self.assertIsInstance(err, errors.OpPrereqError)
            self.assertEqual(err.args[1], code, err)
            self.assertIn(text, err.args[0])
        self.assertEqual(self.rpc.sockets.links, {})

    def test_offline_primary_node(self):
        self.cfg.get_node(N1).offline = True
        err = self.refused(luxi.REQ_CONSOLE_OPEN, "vm1", "user=alice")
        self.assertIn("primary node %s is offline" % N1, err.args[0])

    def test_node_refusals_keep_their_meaning(self):
        self.rpc.sockets.missing.add("/run/vm1")
        err = self.refused(luxi.REQ_CONSOLE_OPEN, "vm1", "user=alice")
        self.assertEqual(err.args[1], errors.ECODE_STATE)
        self.assertIn("cannot connect to the serial console of vm1",
                      err.args[0])
        self.rpc.sockets.missing.clear()
        sid = self.successResultOf(self.call(
            luxi.REQ_CONSOLE_OPEN, "vm1", "user=alice"))["session"]
        # another user's session is not found
        err = self.refused(luxi.REQ_CONSOLE_WRITE, "vm1", sid, "user=bob",
                           "eA==")
        self.assertEqual(err.args[1], errors.ECODE_NOENT)

    def test_unreachable_node(self):
        self.rpc.fail["console_open"] = "connection refused"
        err = self.refused(luxi.REQ_CONSOLE_OPEN, "vm1", "user=alice")
        self.assertIsInstance(err, errors.OpExecError)
        self.assertIn("Console of vm1: node", err.args[0])
        self.assertIn("connection refused", err.args[0])

    def test_bad_arguments(self):
        err = self.refused(luxi.REQ_CONSOLE_READ, "vm1", "s", "user=a", -1, 0)
        self.assertIsInstance(err, errors.LuxiError)
        self.assertIn("argument 3 (offset)", str(err))
        err = self.refused(luxi.REQ_CONSOLE_OPEN, "vm1", "two words")
        self.assertIn("owner", str(err))

    def test_no_node_rpc(self):
        relay = ConsoleRelay(self.cfg, None)
        err = self.failureResultOf(defer.Deferred.fromCoroutine(
            relay.open("vm1", "user=a"))).value
        self.assertIn("Node RPC is disabled", str(err))
