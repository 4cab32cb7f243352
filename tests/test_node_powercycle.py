"""gnt-node powercycle: the logical unit (fake node daemons), the node
procedure (a Clock), what a real node and a virtual node do, and the
command."""

import io
import os
import tempfile

from twisted.internet import defer, task
from twisted.trial import unittest

from ganeti import cmdlib
from ganeti import constants
from ganeti import errors
from ganeti import mcpu
from ganeti import objects
from ganeti import opcodes
from ganeti.backend import powercycle as backend_powercycle
from ganeti.cli import gnt_node
from ganeti.pathutils import Paths
from ganeti.server.noded import daemons
from ganeti.server.noded import powercycle as noded_powercycle
from ganeti.server.noded import procedure as proc_mod
from ganeti.server.noded import restart
from ganeti.server.noded.procedures import NodeProcedures

from tests.fakes import ClockTestCase, FakeRpc
from tests.test_cli_fakes import FakeClient, encoded, run
from tests.test_config import make_store

NODE2 = "node2.example.com"


class PowercycleLUTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.cfg = make_store(self)
        self.cfg.add_node(objects.Node(name=NODE2, primary_ip="127.0.0.2"))
        self.master = self.cfg.get_node(self.cfg.cluster.master_node).name
        self.glm = mcpu.make_lock_manager(self.cfg, self.clock)
        self.rpc = FakeRpc({"node_powercycle": "Reboot scheduled in 5"
                            " seconds"})
        ctx = mcpu.MasterContext(cfg=self.cfg, glm=self.glm,
                                 clock=self.clock, rpc=self.rpc)
        self.proc = mcpu.Processor(ctx, cmdlib.LOGICAL_UNITS)
        self.log = []

    def run_op(self, **params):
        return defer.maybeDeferred(
            opcodes.from_dict, dict(params, OP_ID="OP_NODE_POWERCYCLE")
        ).addCallback(lambda op: self.proc.execute(1, 0, op,
                                                   self.log.append))

    def test_asks_the_node(self):
        before = self.cfg.to_dict()
        result = self.successResultOf(self.run_op(node_name=NODE2))
        self.assertEqual(result, "Reboot scheduled in 5 seconds")
        ((node, procedure, args),) = self.rpc.calls
        hv = self.cfg.cluster.enabled_hypervisors[0]
        self.assertEqual((node, procedure, args[0]),
                         (NODE2, "node_powercycle", hv))
        self.assertEqual(args[1], self.cfg.cluster.hvparams.get(hv) or {})
        self.assertEqual(self.cfg.to_dict(), before)
        for lock in self.glm.query_locks():
            self.assertEqual(lock["owners"], [], lock)

    def test_master_only_with_force(self):
        err = self.failureResultOf(self.run_op(node_name=self.master),
                                   errors.OpPrereqError).value
        self.assertIn("node_name: the node is the master and the force"
                      " parameter was not set", str(err))
        self.assertEqual(err.args[1], errors.ECODE_INVAL)
        self.assertEqual(self.rpc.calls, [])
        self.successResultOf(self.run_op(node_name=self.master, force=True))
        self.assertEqual([c[0] for c in self.rpc.calls], [self.master])

    def test_unknown_node(self):
        err = self.failureResultOf(self.run_op(node_name="nosuch"),
                                   errors.OpPrereqError).value
        self.assertIn("nosuch", str(err))
        self.assertEqual(self.rpc.calls, [])

    def test_node_failure_names_node(self):
        self.rpc.fail["node_powercycle"] = "connection refused"
        err = self.failureResultOf(self.run_op(node_name=NODE2),
                                   errors.OpExecError).value
        self.assertIn("Scheduling the reboot failed on node %s" % NODE2,
                      str(err))
        self.assertIn("connection refused", str(err))


class ProcedureTests(unittest.TestCase):

    def setUp(self):
        self.clock = task.Clock()
        self.root = tempfile.mkdtemp(prefix="pc-")
        self.addCleanup(lambda: __import__("shutil").rmtree(self.root))
        self.procs = NodeProcedures(self.clock, Paths(self.root), None,
                                    None, None,
                                    run_blocking=proc_mod.INLINE)
        self.done = []
        self.procs.powercycle = (1, lambda hv, params:
                                 self.done.append((hv, params)))

    def call(self, *args):
        return self.procs.call("node_powercycle", list(args))

    def test_answers_then_acts(self):
        answer = self.successResultOf(self.call("kvm", {"a": 1}))
        self.assertEqual(answer, "Reboot scheduled in 1 seconds (virtual"
                         " node: its daemons restart)")
        self.assertEqual(self.done, [])
        # a second request while one is pending changes nothing
        self.successResultOf(self.call("kvm", {}))
        self.clock.advance(1)
        self.assertEqual(self.done, [("kvm", {"a": 1})])

    def test_real_node_message(self):
        procs = NodeProcedures(self.clock, Paths("/"), None, None, None,
                               run_blocking=proc_mod.INLINE)
        procs.powercycle = (5, lambda hv, params: self.done.append(hv))
        self.assertEqual(self.successResultOf(
            procs.call("node_powercycle", ["fake", {}])),
            "Reboot scheduled in 5 seconds")
        self.clock.advance(5)
        self.assertEqual(self.done, ["fake"])

    def test_bad_hypervisor_refused(self):
        err = self.failureResultOf(self.call("vmware", {})).value
        self.assertIn("hypervisor", str(err))
        self.clock.advance(10)
        self.assertEqual(self.done, [])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_daemon_that_cannot(self):
        self.procs.powercycle = None
        err = self.failureResultOf(self.call("kvm", {}),
                                   errors.OpPrereqError).value
        self.assertIn("cannot power-cycle", str(err))
        self.assertEqual(self.clock.getDelayedCalls(), [])


class ActionTests(unittest.TestCase):

    def test_virtual_node_restarts_its_daemons(self):
        restarts = []
        self.patch(restart, "reexec_daemon",
                   lambda reactor, procs, names, why:
                   restarts.append((reactor, procs, names)))
        procs = type("P", (), {"paths": Paths("/tmp/x")})()
        delay, action = noded_powercycle.make_powercycle("R", procs)
        self.assertEqual(delay, noded_powercycle.VIRTUAL_DELAY)
        action("fake", {})
        self.assertEqual(restarts, [("R", procs, daemons.MANAGED)])

    def test_real_node_reboots(self):
        procs = type("P", (), {"paths": Paths("/")})()
        delay, action = noded_powercycle.make_powercycle("R", procs)
        self.assertEqual((delay, action),
                         (noded_powercycle.REAL_DELAY,
                          backend_powercycle.powercycle_node))

    def test_linux_powercycle(self):
        # never the real trigger nor the real reboot: both are given
        ran = []
        fd, sysrq = tempfile.mkstemp()
        os.close(fd)
        self.addCleanup(os.unlink, sysrq)
        backend_powercycle.powercycle_node(
            constants.HT_KVM, {}, run=lambda argv, timeout: ran.append(argv),
            sysrq=sysrq)
        with open(sysrq) as f:
            self.assertEqual(f.read(), "b")
        self.assertEqual(ran, [["reboot", "-n", "-f"]])

    def test_xen_first_and_no_sysrq(self):
        ran = []
        backend_powercycle.powercycle_node(
            constants.HT_XEN_PVM, {"xen_cmd": "xm"},
            run=lambda argv, timeout: ran.append(argv),
            sysrq=os.path.join(tempfile.gettempdir(), "no", "such", "file"))
        self.assertEqual(ran, [["xm", "debug-keys", "R"],
                               ["reboot", "-n", "-f"]])


def gnt(client, *argv, **kw):
    return run(gnt_node.commands, argv, client, **kw)


class CommandTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()
        self.client.results["OP_NODE_POWERCYCLE"] = (
            "Reboot scheduled in 5 seconds")

    def test_with_yes(self):
        code, out, err = gnt(self.client, "powercycle", "--yes", NODE2)
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["node_name"], op["force"]),
                         ("OP_NODE_POWERCYCLE", NODE2, False))
        self.assertEqual(err.strip(), "Reboot scheduled in 5 seconds")

    def test_force_for_the_master(self):
        gnt(self.client, "powercycle", "--yes", "--force", NODE2)
        self.assertTrue(self.client.op()["force"])

    def test_asks_first(self):
        class Tty(io.StringIO):
            def isatty(self):
                return True
        code, out, _ = gnt(self.client, "powercycle", NODE2,
                           stdin=Tty("n\n"))
        self.assertEqual(code, 13)
        self.assertIn("Are you sure you want to hard powercycle node %s?"
                      % NODE2, out)
        self.assertEqual(self.client.jobs, {})
        code, _, _ = gnt(self.client, "powercycle", NODE2, stdin=Tty("y\n"))
        self.assertEqual(code, 0)
        self.assertEqual(self.client.op()["node_name"], NODE2)

    def test_no_terminal_names_the_option(self):
        code, out, err = gnt(self.client, "powercycle", NODE2)
        self.assertEqual(code, 13)
        self.assertIn("use --yes to go ahead", out + err)
        self.assertEqual(self.client.jobs, {})

    def test_refusal_is_shown(self):
        self.client.errors["OP_NODE_POWERCYCLE"] = encoded(
            errors.OpPrereqError("node_name: the node is the master and the"
                                 " force parameter was not set",
                                 errors.ECODE_INVAL))
        code, out, err = gnt(self.client, "powercycle", "--yes", NODE2)
        self.assertNotEqual(code, 0)
        self.assertIn("force parameter was not set", out + err)
