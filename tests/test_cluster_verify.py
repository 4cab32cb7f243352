"""Cluster verification: the LUs with a fake RPC.

The tests drive OP_CLUSTER_VERIFY / OP_CLUSTER_VERIFY_GROUP through the
opcode processor with :class:`VerifyRpc` (node daemons as the test wants
them) and a Clock (real daemons: tests/integration/test_cluster_verify.py).
"""

import datetime
import os

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import constants
from ganeti import crypto
from ganeti import locking
from ganeti import objects
from ganeti import opcodes
from ganeti.cmdlib import verify

from tests.fakes import FakeRunner
from tests.test_config import enable_templates
from tests.test_cmdlib_instance import (
    FSD, NODE1, NODE2, InstanceRpc, InstanceTestCase)

INST = "inst1.example.com"


class VerifyRpc(InstanceRpc):
    """InstanceRpc plus what verification asks nodes."""

    def __init__(self, cfg=None):
        InstanceRpc.__init__(self)
        self.cfg = cfg
        self.versions = {}
        self.hv_problems = {}
        self.extra_domains = {}
        #: node -> serial of its config.data (default: the master's on a
        #: candidate, none elsewhere)
        self.config_serials = {}
        #: node -> {dir: [paths]} beyond the disks it created
        self.stray_files = {}
        #: node -> {vg: ["vg/lv"]} beyond the LVs of its disks
        self.stray_lvs = {}
        self.volume_errors = {}

    def _verify_node_files(self, node, storage_dirs, vgs):
        node_obj = self.cfg.get_node(node)
        if node in self.config_serials:
            serial = self.config_serials[node]
        else:
            serial = self.cfg.serial_no if node_obj.master_candidate \
                else None
        found = {d: [] for d in storage_dirs}
        lvs = {vg: [] for vg in vgs}
        for path in self.files.get(node, ()):
            for d in storage_dirs:
                if path.startswith(d + "/"):
                    found[d].append(path)
        for d, paths in self.stray_files.get(node, {}).items():
            if d in found:
                found[d].extend(paths)
        for vg, names in self.stray_lvs.get(node, {}).items():
            if vg in lvs:
                lvs[vg].extend(names)
        return {"config_serial": serial, "config_error": None,
                "files": {d: sorted(p) for d, p in found.items()},
                "lvs": lvs, "errors": dict(self.volume_errors.get(node, {}))}

    def _version(self, node):
        return self.versions.get(node, constants.PROTOCOL_VERSION)

    def _hypervisor_verify(self, node, hvs, hvparams):
        return {hv: list(self.hv_problems.get((node, hv), [])) for hv in hvs}

    def _all_instances_info(self, node, hvs):
        result = {}
        for (n, name), st in self.domains.items():
            if n == node:
                result[name] = {"name": name, "state": st,
                                "live": st in ("running", "paused"),
                                "hypervisor": "fake", "reason": None}
        for (n, name), info in self.extra_domains.items():
            if n == node:
                result[name] = dict(info, name=name)
        return result


class FakeFeedback(object):
    """The job queue's feedback for one opcode: log lines and submitted
    jobs."""

    def __init__(self):
        self.lines = []
        self.submitted = []

    def __call__(self, msg):
        self.lines.append(msg)

    def submit_jobs(self, jobs):
        first = 100 + len(self.submitted)
        self.submitted.extend([op.to_dict() for op in job] for job in jobs)
        return defer.succeed([[True, first + i] for i in range(len(jobs))])


class VerifyTestCase(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.rpc = VerifyRpc(self.cfg)
        self.ctx.rpc = self.rpc

    def verify_group(self, **kw):
        """(result, finding lines) of OP_CLUSTER_VERIFY_GROUP default."""
        op = {"OP_ID": "OP_CLUSTER_VERIFY_GROUP", "group_name": "default"}
        op.update(kw)
        self.log[:] = []
        result = self.ok(op)
        return result, [line for line in self.log if line.startswith("  - ")]


class ClusterVerifyTests(VerifyTestCase):

    def test_submits_config_then_group_jobs(self):
        fb = FakeFeedback()
        d = self.proc.execute(1, 0, opcodes.OpClusterVerify(
            error_codes=True, verbose=True, ignore_errors=["ENODEHV"],
            skip_checks=["nplusone_mem"]), fb)
        result = self.successResultOf(d)
        self.assertEqual(result, {"jobs": [[True, 100], [True, 101]]})
        (config_op,), (group_op,) = fb.submitted
        self.assertEqual(config_op["OP_ID"], "OP_CLUSTER_VERIFY_CONFIG")
        self.assertEqual(group_op["OP_ID"], "OP_CLUSTER_VERIFY_GROUP")
        self.assertEqual(group_op["group_name"], "default")
        # the group job waits for the configuration job, whatever its end
        self.assertEqual(group_op["depends"], [[-1, []]])
        for op in (config_op, group_op):
            self.assertEqual((op["error_codes"], op["verbose"],
                              op["ignore_errors"]),
                             (True, True, ["ENODEHV"]))
        self.assertEqual(group_op["skip_checks"], ["nplusone_mem"])

    def test_one_group_only(self):
        fb = FakeFeedback()
        d = self.proc.execute(1, 0, opcodes.OpClusterVerify(
            group_name="default"), fb)
        self.assertEqual(self.successResultOf(d), {"jobs": [[True, 100]]})
        ((op,),) = fb.submitted
        self.assertEqual((op["OP_ID"], op.get("depends")),
                         ("OP_CLUSTER_VERIFY_GROUP", None))
        d = self.proc.execute(2, 0, opcodes.OpClusterVerify(
            group_name="nosuch"), fb)
        self.failureResultOf(d)


class GroupVerifyTests(VerifyTestCase):

    def setUp(self):
        VerifyTestCase.setUp(self)
        self.create(INST)

    def test_healthy_cluster(self):
        result, findings = self.verify_group()
        self.assertEqual(findings, [])
        self.assertTrue(result)
        self.assertIn("* Verifying group 'default'", self.log)
        self.assertIn("* Verifying instance status", self.log)
        # every node asked, each once per procedure
        self.assertEqual(sorted(set(c[0] for c in self.rpc.calls)),
                         [NODE1, NODE2])
        self.assertEqual(len(self.rpc.calls_of("blockdev_getdimensions")), 1)

    def test_verbose_names_nodes_and_instances(self):
        self.verify_group(verbose=True)
        self.assertIn("* Verifying node %s (master)" % NODE1, self.log)
        self.assertIn("* Verifying node %s (master candidate)" % NODE2,
                      self.log)
        self.assertIn("* Verifying instance %s" % INST, self.log)

    def test_missing_disk(self):
        self.rpc.files[NODE1].clear()
        result, findings = self.verify_group()
        self.assertFalse(result)
        (line,) = findings
        self.assertRegex(line, r"^  - ERROR: instance %s: disk/0 \(.*\.disk0\)"
                         r" missing on node %s$" % (INST, NODE1))

    def test_instance_down_and_error_codes(self):
        self.rpc.domains[(NODE1, INST)] = "crashed"
        result, findings = self.verify_group(error_codes=True)
        self.assertFalse(result)
        self.assertEqual(findings, [
            "  - ERROR:EINSTANCEDOWN:instance:%s:instance not running on its"
            " primary node %s (crashed)" % (INST, NODE1)])
        del self.rpc.domains[(NODE1, INST)]
        _, findings = self.verify_group()
        self.assertEqual(findings, [
            "  - ERROR: instance %s: instance not running on its primary node"
            " %s" % (INST, NODE1)])

    def test_ignore_errors_demotes_to_warning(self):
        self.rpc.domains.pop((NODE1, INST))
        result, findings = self.verify_group(ignore_errors=["EINSTANCEDOWN"])
        self.assertTrue(result)
        self.assertTrue(findings[0].startswith("  - WARNING: instance"))

    def test_user_shutdown_is_not_an_error(self):
        self.rpc.domains[(NODE1, INST)] = "shutdown"
        result, findings = self.verify_group()
        self.assertFalse(result)     # enabled_user_shutdown is off
        self.cfg.set_cluster_params(enabled_user_shutdown=True)
        result, findings = self.verify_group()
        self.assertTrue(result)
        self.assertEqual(findings, [
            "  - WARNING: instance %s: instance was shut down by its user on"
            " node %s (USER_down)" % (INST, NODE1)])

    def test_stopped_instance_may_be_down(self):
        self.ok({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": INST})
        result, findings = self.verify_group()
        self.assertEqual(findings, [])
        self.assertTrue(result)

    def test_instance_breaking_the_policy_is_a_warning(self):
        self.ok({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": INST,
                 "beparams": {"vcpus": 9}, "ignore_ipolicy": True})
        result, findings = self.verify_group()
        self.assertTrue(result)
        self.assertEqual(findings, [
            "  - WARNING: instance %s: instance does not meet the instance"
            " policy: cpu-count value 9 is not in range [1, 8]" % INST])
        result, findings = self.verify_group(error_codes=True)
        self.assertEqual(findings, [
            "  - WARNING:EINSTANCEPOLICY:instance:%s:instance does not meet"
            " the instance policy: cpu-count value 9 is not in range [1, 8]"
            % INST])

    def test_extra_and_wrong_node_instances(self):
        self.rpc.domains[(NODE2, "ghost.example.com")] = "running"
        self.rpc.domains[(NODE2, INST)] = "running"
        self.rpc.extra_domains[(NODE1, "old.example.com")] = {
            "state": "crashed", "live": False}
        result, findings = self.verify_group()
        self.assertFalse(result)
        self.assertEqual(sorted(findings), sorted([
            "  - ERROR: instance %s: instance should not run on node %s"
            % (INST, NODE2),
            "  - ERROR: node %s: node is running unknown instance"
            " ghost.example.com" % NODE2,
            "  - ERROR: node %s: node is running unknown instance"
            " old.example.com (kept, crashed)" % NODE1]))

    def test_unreachable_node(self):
        self.rpc.fail["version"] = (lambda node, args: "connection refused"
                                    if node == NODE2 else None)
        result, findings = self.verify_group(error_codes=True)
        self.assertFalse(result)
        self.assertEqual(findings, [
            "  - ERROR:ENODERPC:node:%s:while contacting node: node %s:"
            " connection refused" % (NODE2, NODE2)])
        # nothing else is asked of a node that did not answer
        self.assertEqual([c[1] for c in self.rpc.calls if c[0] == NODE2],
                         ["version"])

    def test_protocol_mismatch(self):
        self.rpc.versions[NODE2] = 2160000
        _, findings = self.verify_group()
        self.assertEqual(findings, [
            "  - ERROR: node %s: incompatible protocol versions: master %s,"
            " node 2160000" % (NODE2, constants.PROTOCOL_VERSION)])

    def test_hypervisor_problems(self):
        self.rpc.hv_problems[(NODE1, "kvm")] = ["qemu binary not found"]
        self.rpc.fail["hypervisor_validate_params"] = (
            lambda node, args: "kvm_path: /usr/bin/kvm is missing"
            if node == NODE1 and args[0] == "kvm" else None)
        _, findings = self.verify_group(error_codes=True)
        self.assertEqual(findings, [
            "  - ERROR:ENODEHV:node:%s:hypervisor kvm verify failure: 'qemu"
            " binary not found'" % NODE1,
            "  - ERROR:ENODEHV:node:%s:hypervisor kvm parameter verify"
            " failure (source cluster): kvm_path: /usr/bin/kvm is missing"
            % NODE1])

    def test_os_missing_and_invalid(self):
        self.rpc.os_list[NODE1] = []
        self.rpc.os_list[NODE2] = [dict(self.rpc.os_list[NODE2][0],
                                        valid=False, status="no create"
                                        " script")]
        _, findings = self.verify_group()
        self.assertEqual(findings, [
            "  - ERROR: node %s: OS 'busybox' of instance(s) %s is missing"
            " from the OS search path" % (NODE1, INST),
            "  - ERROR: node %s: Invalid OS busybox (located at"
            " /etc/os/busybox): no create script" % NODE2])

    def test_offline_node(self):
        self.cfg.set_node_params(NODE2, offline=True, master_candidate=False)
        _, findings = self.verify_group(verbose=True)
        self.assertEqual(findings, [])
        self.assertIn("* Skipping offline node %s" % NODE2, self.log)
        self.assertNotIn(NODE2, [c[0] for c in self.rpc.calls])

    def test_auto_repair_findings_are_warnings(self):
        tag = "ganeti:watcher:autorepair:"
        self.ok({"OP_ID": "OP_TAGS_SET", "kind": "instance", "name": INST,
                 "tags": [tag + "pending:failover:x:tomorrow:",
                          tag + "result:failover:r1:1700000000:failure:7"]})
        result, findings = self.verify_group()
        self.assertTrue(result)
        self.assertEqual(sorted(findings), sorted([
            "  - WARNING: instance %s: auto-repair failed (failover); it does"
            " nothing more until its failure result tag is removed" % INST,
            "  - WARNING: instance %s: ignoring malformed auto-repair tag"
            " %spending:failover:x:tomorrow:: start 'tomorrow' is not a unix"
            " time" % (INST, tag)]))

    def test_a_group_below_its_repair_share_is_a_warning(self):
        self.cfg.set_node_params(NODE2, offline=True, master_candidate=False)
        self.ok({"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": "default",
                 "ndparams": {"repair_min_healthy": 0.9}})
        online = sum(not n.offline for n in self.cfg.nodes.values())
        result, findings = self.verify_group()
        self.assertTrue(result)
        self.assertEqual(findings, [
            "  - WARNING: group default: only %d of the group's %d nodes are"
            " online, below its repair_min_healthy share 0.9: auto-repair"
            " starts no new repair in it" % (online, len(self.cfg.nodes))])

    def test_debug_simulate_errors(self):
        result, findings = self.verify_group(debug_simulate_errors=True)
        self.assertFalse(result)
        self.assertTrue(findings)


class FakeReplicator(object):
    """ctx.replicator as verification uses it: flush() and missed()."""

    def __init__(self, cfg, missed=None):
        self.cfg = cfg
        self.flushed_at = []
        self._missed = missed or {}

    def flush(self, force=False):
        self.flushed_at.append(self.cfg.serial_no)
        return defer.succeed(None)

    def missed(self):
        return dict(self._missed)


class ConfigCopyVerifyTests(VerifyTestCase):
    """Each master candidate's copy of config.data, the replication."""

    def test_candidate_copy_matches(self):
        result, findings = self.verify_group()
        self.assertEqual((result, findings), (True, []))
        (call,) = [c for c in self.rpc.calls_of("verify_node_files")
                   if c[0] == NODE2]
        self.assertEqual(call[2], [[FSD], ["xenvg"]])

    def test_serial_mismatch_names_node_and_serials(self):
        master = self.cfg.serial_no
        self.rpc.config_serials[NODE2] = master - 2
        result, findings = self.verify_group(error_codes=True)
        self.assertFalse(result)
        self.assertEqual(findings, [
            "  - ERROR:ENODEFILECHECK:node:%s:configuration serial of the"
            " node's copy is %d, the master's is %d" % (NODE2, master - 2,
                                                        master)])

    def test_missing_copy_on_a_candidate(self):
        self.rpc.config_serials[NODE2] = None
        result, findings = self.verify_group()
        self.assertFalse(result)
        self.assertEqual(findings, [
            "  - ERROR: node %s: the node's copy of the configuration is"
            " missing (master candidate; the master's serial is %d)"
            % (NODE2, self.cfg.serial_no)])

    def test_copy_on_a_non_candidate_is_a_warning(self):
        self.cfg.set_node_params(NODE2, master_candidate=False)
        self.rpc.config_serials[NODE2] = 3
        result, findings = self.verify_group()
        self.assertTrue(result)
        self.assertEqual(findings, [
            "  - WARNING: node %s: the node holds a copy of the configuration"
            " (serial 3) but is not a master candidate" % NODE2])

    def test_replication_settles_first_and_misses_are_errors(self):
        replicator = FakeReplicator(self.cfg, missed={
            NODE2: (7, "node %s: connection refused" % NODE2)})
        self.ctx.replicator = replicator
        result, findings = self.verify_group()
        self.assertEqual(replicator.flushed_at, [self.cfg.serial_no])
        self.assertFalse(result)
        self.assertEqual(findings, [
            "  - ERROR: node %s: replication of configuration serial %d"
            " failed: node %s: connection refused (last serial delivered: 7)"
            % (NODE2, self.cfg.serial_no, NODE2)])

    def test_a_write_during_verification_is_no_mismatch(self):
        self.ctx.replicator = FakeReplicator(self.cfg)
        settled = self.cfg.serial_no
        answer = self.rpc._verify_node_files

        def write_meanwhile(node, dirs, vgs):
            # the node has what the flush sent; the master moves on
            self.rpc.config_serials[NODE2] = settled
            if self.cfg.serial_no == settled:
                self.cfg.set_cluster_params(reserved_lvs=["xenvg/spare"])
            return answer(node, dirs, vgs)
        self.rpc._verify_node_files = write_meanwhile
        result, findings = self.verify_group()
        self.assertGreater(self.cfg.serial_no, settled)
        self.assertEqual((result, findings), (True, []))

    def test_unreachable_node_is_not_checked_twice(self):
        self.ctx.replicator = FakeReplicator(self.cfg, missed={
            NODE2: (None, "connection refused")})
        self.rpc.fail["version"] = (lambda node, args: "connection refused"
                                    if node == NODE2 else None)
        _, findings = self.verify_group()
        self.assertEqual(findings, [
            "  - ERROR: node %s: while contacting node: node %s: connection"
            " refused" % (NODE2, NODE2)])

    def test_node_without_the_procedure(self):
        self.rpc.fail["verify_node_files"] = "unknown procedure"
        result, findings = self.verify_group()
        self.assertTrue(result)
        self.assertEqual(sorted(findings), [
            "  - WARNING: node %s: cannot check the node's configuration copy"
            " and volumes: node %s: unknown procedure" % (n, n)
            for n in (NODE2,)])


class OrphanVolumeTests(VerifyTestCase):
    """Disk files and LVs no instance owns."""

    def setUp(self):
        VerifyTestCase.setUp(self)
        self.create(INST)

    def test_instance_disks_are_not_orphans(self):
        self.assertTrue(self.rpc.files[NODE1])
        result, findings = self.verify_group()
        self.assertEqual((result, findings), (True, []))

    def test_unknown_file_is_a_warning(self):
        stray = FSD + "/old.example.com/disk0"
        self.rpc.stray_files[NODE1] = {FSD: [stray]}
        result, findings = self.verify_group(error_codes=True)
        self.assertTrue(result)
        self.assertEqual(findings, [
            "  - WARNING:ENODEORPHANLV:node:%s:volume %s is unknown"
            % (NODE1, stray)])

    def test_unknown_lvs_but_not_reserved_ones(self):
        self.cfg.set_cluster_params(reserved_lvs=["xenvg/root.*"])
        self.rpc.stray_lvs[NODE2] = {"xenvg": ["xenvg/leftover",
                                               "xenvg/rootfs"]}
        result, findings = self.verify_group()
        self.assertTrue(result)
        self.assertEqual(findings, [
            "  - WARNING: node %s: volume xenvg/leftover is unknown" % NODE2])

    def test_drbd_children_and_files_are_owned(self):
        from ganeti import objects

        class Cfg(object):
            instances = {"u1": "inst"}

            def instance_disks(self, inst):
                return [
                    objects.Disk(dev_type="drbd", logical_id=[
                        "n1", "n2", 11000, 0, 0, "secret"], children=[
                            objects.Disk(dev_type="plain",
                                         logical_id=["xenvg", "d.data"]),
                            objects.Disk(dev_type="plain",
                                         logical_id=["xenvg", "d.meta"])]),
                    objects.Disk(dev_type="sharedfile",
                                 logical_id=["loop", "/s/i//disk1"]),
                    objects.Disk(dev_type="diskless")]
        lu = verify.LUClusterVerifyGroup.__new__(verify.LUClusterVerifyGroup)
        lu.cfg = Cfg()
        self.assertEqual(lu._owned_volumes(), (
            {"/s/i/disk1"}, {"xenvg/d.data", "xenvg/d.meta"}))

    def test_shared_directory_is_reported_once(self):
        shared = "/srv/ganeti/shared-file-storage"
        enable_templates(
            self.cfg, ["file", "sharedfile", "plain", "drbd",
                                    "diskless"],
            shared_file_storage_dir=shared)
        stray = shared + "/lost.img"
        self.rpc.stray_files[NODE1] = {shared: [stray]}
        self.rpc.stray_files[NODE2] = {shared: [stray]}
        result, findings = self.verify_group()
        self.assertTrue(result)
        self.assertEqual(findings, [
            "  - WARNING: node %s: volume %s is unknown" % (NODE1, stray)])

    def test_listing_errors_are_warnings(self):
        self.rpc.volume_errors[NODE2] = {"xenvg": "lvs: command not found"}
        result, findings = self.verify_group()
        self.assertTrue(result)
        self.assertEqual(findings, [
            "  - WARNING: node %s: cannot list the volumes in xenvg: lvs:"
            " command not found" % NODE2])

    def test_offline_and_unreachable_nodes_are_skipped(self):
        self.rpc.stray_files[NODE2] = {FSD: [FSD + "/x"]}
        self.rpc.fail["version"] = (lambda node, args: "down"
                                    if node == NODE2 else None)
        _, findings = self.verify_group()
        self.assertEqual(len(findings), 1)
        self.assertIn("while contacting node", findings[0])


#: what ``lvs`` reports to the node side
LVS_REPORT = (b'{"report": [{"lv": [{"lv_name": "b", "vg_name": "xenvg"},'
              b' {"lv_name": "a", "vg_name": "xenvg"}]}]}')


class VerifyNodeFilesProcedureTests(unittest.TestCase):
    """The node side: noded's verify_node_files."""

    def setUp(self):
        from ganeti import pathutils
        from ganeti.server.noded import procedures
        from ganeti.server.noded.procedure import INLINE
        from ganeti import storage
        self.root = os.path.abspath(self.mktemp())
        self.paths = pathutils.Paths(self.root)
        self.paths.ensure_dirs()
        self.store = os.path.join(self.root, "srv/ganeti/file-storage")
        os.makedirs(os.path.join(self.store, "inst1"))
        self.runner = FakeRunner()
        self.runner.answer(["lvs"], stdout=LVS_REPORT)
        ctx = storage.StorageContext(runner=self.runner,
                                     file_storage_dirs=[self.store])
        self.procs = procedures.NodeProcedures(None, self.paths, ctx,
                                               None, None,
                                               run_blocking=INLINE)

    def call(self, *args):
        return self.successResultOf(self.procs.call("verify_node_files",
                                                    list(args)))

    def test_no_config_no_dirs(self):
        self.assertEqual(self.call(), {
            "config_serial": None, "config_error": None, "files": {},
            "lvs": {}, "errors": {}, "checksums": {}})

    def test_checksums_of_distributed_files(self):
        import hashlib
        os.makedirs(os.path.join(self.root, "var/lib/ganeti/rapi"),
                    exist_ok=True)
        with open(os.path.join(self.root, "var/lib/ganeti/rapi/users"),
                  "wb") as f:
            f.write(b"jack secret write\n")
        answer = self.call([], [], ["/var/lib/ganeti/rapi/users",
                                    "/var/lib/ganeti/rapi.pem"])
        self.assertEqual(answer["checksums"], {
            "/var/lib/ganeti/rapi/users":
            hashlib.sha1(b"jack secret write\n").hexdigest(),
            "/var/lib/ganeti/rapi.pem": None})
        failure = self.failureResultOf(self.procs.call(
            "verify_node_files", [[], [], ["../etc/passwd"]]))
        self.assertIn("checksums", str(failure.value))

    def test_config_serial_and_files(self):
        with open(self.paths.config_file, "w") as f:
            f.write('{"serial_no": 42, "cluster": {}}')
        disk = os.path.join(self.store, "inst1", "disk0")
        open(disk, "w").close()
        answer = self.call([self.store, "/etc"], [])
        self.assertEqual(answer["config_serial"], 42)
        self.assertEqual(answer["files"], {self.store: [disk]})
        self.assertEqual(list(answer["errors"]), ["/etc"])
        self.assertIn("not a file storage directory", answer["errors"]["/etc"])

    def test_unreadable_config(self):
        with open(self.paths.config_file, "w") as f:
            f.write("{not json")
        answer = self.call()
        self.assertIsNone(answer["config_serial"])
        self.assertTrue(answer["config_error"])

    def test_lvs(self):
        answer = self.call([], ["xenvg", "bad vg"])
        self.assertEqual(answer["lvs"], {"xenvg": ["xenvg/a", "xenvg/b"]})
        self.assertIn("bad vg", answer["errors"])
        self.assertEqual(self.runner.commands[0][0], "lvs")
        self.assertEqual(self.runner.commands[0][-1], "xenvg")


class CertificateTests(unittest.TestCase):

    def check(self, days):
        path = os.path.join(self.mktemp(), "server.pem")
        crypto.generate_cluster_certificate(path, "cluster.example.com",
                                            validity_days=days)
        return verify.certificate_problem(path)

    def test_valid_long_enough(self):
        self.assertEqual(self.check(365), (None, None))

    def test_expiring_soon_is_a_warning_then_an_error(self):
        etype, msg = self.check(20)
        self.assertEqual(etype, "WARNING")
        self.assertIn("expires in 19 days", msg)
        self.assertEqual(self.check(3)[0], "ERROR")

    def test_expired_and_unreadable(self):
        path = os.path.join(self.mktemp(), "server.pem")
        crypto.generate_cluster_certificate(path, "cluster.example.com",
                                            validity_days=1)
        later = datetime.datetime.now(datetime.timezone.utc) + \
            datetime.timedelta(days=3)
        etype, msg = verify.certificate_problem(path, now=later)
        self.assertEqual(etype, "ERROR")
        self.assertIn("expired", msg)
        etype, msg = verify.certificate_problem("/nonexistent/server.pem")
        self.assertEqual(etype, "ERROR")
        self.assertIn("Failed to load X509 certificate", msg)


class ManyNodesVerifyTests(VerifyTestCase):
    """Twelve nodes, asked no more than the RPC client's bound at once."""

    def setUp(self):
        VerifyTestCase.setUp(self)
        for i in range(3, 13):
            uuid = self.cfg.add_node(objects.Node(
                name="node%d.example.com" % i,
                primary_ip="127.0.0.%d" % i))
            for level in (locking.LEVEL_NODE, locking.LEVEL_NODE_RES):
                self.successResultOf(self.glm.add(level, [uuid]))
        self.create(INST)

    def test_nodes_asked_within_the_bound(self):
        self.rpc.max_parallel = 3
        self.rpc.hold("version")
        d = self.run_op({"OP_ID": "OP_CLUSTER_VERIFY_GROUP",
                         "group_name": "default"})
        most = 0
        while self.rpc._held["version"]:
            most = max(most, len(self.rpc._held["version"]))
            self.assertNoResult(d)
            self.rpc.release("version")
        self.rpc.release("version", keep=False)
        self.assertTrue(self.successResultOf(d))
        self.assertEqual(most, 3)
        self.assertEqual(sorted(c.node for c in self.rpc.calls_of("version")),
                         sorted(n.name for n in self.cfg.nodes.values()))
        # every node was asked everything, not just its version
        self.assertEqual(len(self.rpc.calls_of("os_diagnose")), 12)


class CryptoStateVerifyTests(VerifyTestCase):
    """What a renewal of the cluster's secrets left on the nodes."""

    KEY = b"0123456789abcdef0123456789abcdef01234567\n"

    def setUp(self):
        VerifyTestCase.setUp(self)
        from ganeti import pathutils
        from ganeti.backend import rotation
        from ganeti.utils import io
        from tests.test_crypto import cluster_cert
        paths = pathutils.Paths(os.path.abspath(self.mktemp()))
        paths.ensure_dirs()
        io.atomic_write(paths.hmac_key_file, self.KEY, mode=0o400)
        cert = cluster_cert(self.mktemp())
        io.atomic_write(crypto.server_pem_path(paths), cert.pem, mode=0o400)
        self.ctx.paths = paths
        self.digest = rotation.key_digest(self.KEY)
        self.states = {}
        self.rpc.answers["crypto_state"] = lambda node: self.states.get(
            node, {"cluster_certificate": {"current": "C", "staged": None,
                                           "previous": None},
                   "hmac_key": {"current": self.digest, "staged": None,
                                "previous": None}})

    def test_nothing_left(self):
        self.assertEqual(self.verify_group(), (True, []))
        self.assertEqual(sorted(c[0] for c in
                                self.rpc.calls_of("crypto_state")),
                         [NODE1, NODE2])

    def test_an_unfinished_renewal_and_another_key(self):
        self.states[NODE2] = {
            "cluster_certificate": {"current": "C", "staged": "N",
                                    "previous": None},
            "hmac_key": {"current": "other", "staged": None,
                         "previous": None}}
        self.states[NODE1] = {
            "cluster_certificate": {"current": "C", "staged": None,
                                    "previous": "O"},
            "hmac_key": {"current": self.digest, "staged": None,
                         "previous": "old"}}
        result, findings = self.verify_group()
        self.assertFalse(result)
        self.assertEqual(sorted(findings), sorted([
            "  - WARNING: node %s: the node still trusts a staged cluster"
            " certificate beside its own: a renewal did not finish; run"
            " 'gnt-cluster renew-crypto --new-cluster-certificate' again"
            % NODE2,
            "  - ERROR: node %s: the node's HMAC key is not the master's"
            " ('gnt-cluster redist-conf' copies it)" % NODE2,
            "  - WARNING: node %s: the node still trusts a previous cluster"
            " certificate beside its own: a renewal did not finish; run"
            " 'gnt-cluster renew-crypto --new-cluster-certificate' again"
            % NODE1,
            "  - WARNING: node %s: the node still accepts a second HMAC"
            " key: a renewal did not finish; run 'gnt-cluster renew-crypto"
            " --new-confd-hmac-key' again" % NODE1]))

    def test_node_without_the_procedure(self):
        del self.rpc.answers["crypto_state"]
        self.assertEqual(self.verify_group(), (True, []))
