"""OP_OOB_COMMAND (gnt-node power/health): the node's out-of-band
program, run on the master from the allowed directory only, with
Ganeti's refusals and output checks."""

import os
import stat

from ganeti import cmdlib, errors, mcpu, pathutils

from tests.fakes import FakeRunner
from tests.test_cmdlib_instance import InstanceTestCase, NODE2


class OobTests(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        root = self.mktemp()
        self.paths = pathutils.Paths(root)
        os.makedirs(self.paths.oob_dir)
        self.program = os.path.join(self.paths.oob_dir, "ipmi")
        with open(self.program, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(self.program, stat.S_IRWXU)
        self.runner = FakeRunner()
        self.ctx = mcpu.MasterContext(cfg=self.cfg, glm=self.glm,
                                      clock=self.clock, rpc=self.rpc,
                                      paths=self.paths, runner=self.runner)
        self.proc = mcpu.Processor(self.ctx, cmdlib.LOGICAL_UNITS)
        self.cfg.set_cluster_params(ndparams=dict(
            self.cfg.cluster.ndparams, oob_program=self.program))

    def oob(self, command, *nodes, **kw):
        op = {"OP_ID": "OP_OOB_COMMAND", "command": command,
              "node_names": list(nodes)}
        op.update(kw)
        return op

    def node(self, name=NODE2):
        return self.cfg.get_node(name)

    def test_power_off_needs_an_offline_node_and_never_the_master(self):
        err = self.fails(self.oob("power-off", NODE2))
        self.assertIn("not marked offline", str(err))
        master = self.cfg.master_node.name
        err = self.fails(self.oob("power-cycle", master))
        self.assertIn("master node", str(err))
        self.assertEqual(self.runner.commands, [])
        self.cfg.set_node_params(self.node().uuid, offline=True,
                                 master_candidate=False)
        result = self.ok(self.oob("power-off", NODE2))
        self.assertEqual(result, [[[0, NODE2], [0, True]]])
        self.assertEqual(self.runner.commands[-1],
                         [self.program, "power-off", NODE2])
        self.assertFalse(self.node().powered)
        self.ok(self.oob("power-on", NODE2))
        self.assertTrue(self.node().powered)

    def test_status_and_health_output_checked(self):
        self.runner.answer([self.program, "power-status"],
                           stdout=b'{"powered": false}')
        result = self.ok(self.oob("power-status", NODE2))
        self.assertEqual(result[0][1], [0, {"powered": False}])
        self.assertFalse(self.node().powered)
        self.runner.answer([self.program, "health"],
                           stdout=b'[["PSU", "OK"], ["fan2", "CRITICAL"]]')
        result = self.ok(self.oob("health", NODE2))
        self.assertEqual(result[0][1], [0, [["PSU", "OK"],
                                            ["fan2", "CRITICAL"]]])
        # garbage and failures are per-node errors, not a crash
        self.runner.answer([self.program, "health"], stdout=b"all good")
        result = self.ok(self.oob("health", NODE2))
        self.assertEqual(result[0][1][0], 2)
        self.assertIn("printed no JSON", result[0][1][1])
        self.runner.answer([self.program, "power-status"], code=3,
                           stdout=b"BMC unreachable")
        result = self.ok(self.oob("power-status", NODE2))
        self.assertIn("exit code 3", result[0][1][1])
        self.assertTrue(any("BMC unreachable" in line for line in self.log))

    def test_only_programs_in_the_oob_directory_run(self):
        self.cfg.set_cluster_params(ndparams=dict(
            self.cfg.cluster.ndparams, oob_program="/bin/true"))
        err = self.fails(self.oob("power-status", NODE2))
        self.assertIn("not inside", str(err))
        self.assertIn(self.paths.oob_dir, str(err))
        # a way out through a symbolic link is no way out
        link = os.path.join(self.paths.oob_dir, "escape")
        os.symlink("/bin/true", link)
        self.cfg.set_cluster_params(ndparams=dict(
            self.cfg.cluster.ndparams, oob_program=link))
        self.fails(self.oob("power-status", NODE2))
        self.assertEqual(self.runner.commands, [])

    def test_node_without_a_program(self):
        self.cfg.set_cluster_params(ndparams=dict(
            self.cfg.cluster.ndparams, oob_program=""))
        err = self.fails(self.oob("health", NODE2))
        self.assertIn("no out-of-band program", str(err))
        # "every node": only those that have one
        self.assertEqual(self.ok(self.oob("health")), [])
        self.assertIsInstance(err, errors.OpPrereqError)
