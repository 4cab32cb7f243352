"""Node membership logical units (add, remove, modify, redist-conf) with a
fake RPC, a fake by-address RPC (the bootstrap join) and a Clock."""

import atexit
import copy
import os
import shutil

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import cmdlib
from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import locking
from ganeti import mcpu
from ganeti import objects
from ganeti import opcodes
from ganeti import pathutils
from ganeti import replication
from ganeti.rpc import RpcResult

from tests.fakes import ClockTestCase, FakeRpc
from tests.test_config import make_store
from tests.test_crypto import cluster_cert

MASTER = "node1.example.com"
NODE2 = "node2.example.com"
NODE3 = "node3.example.com"
IP2 = "127.0.0.2"
IP3 = "127.0.0.3"
ONE_TIME = "AB:" * 31 + "CD"   # a node's one-time certificate (digest)
OTHER = "EF:" * 31 + "01"


class FakeNodes(FakeRpc):
    """Node daemons by name (ganeti.rpc) and by address (pinned calls).

    ``daemons[ip]`` = {"digest": the certificate it serves, "files": {path:
    data}, "ssconf": {...}, "calls": [...]}; a missing ip is unreachable.
    ``fail`` fails calls as in FakeRpc.
    """

    def __init__(self, cfg, cert):
        FakeRpc.__init__(self)
        self.cfg = cfg
        self.cert = cert
        self.daemons = {}

    # --- the world -----------------------------------------------------------

    def bootstrap(self, ip, digest=ONE_TIME):
        self.daemons[ip] = {"digest": digest, "files": {}, "ssconf": None,
                            "joined": None}
        return self.daemons[ip]

    def member(self, ip):
        return self.bootstrap(ip, self.cert.digest())

    def _ip(self, node):
        try:
            return self.cfg.get_node(node).primary_ip
        except errors.OpPrereqError:
            return None

    def _result(self, node, procedure, payload=None, msg=None, seen=None):
        if msg is not None:
            return replication.PinnedResult(
                node=node, procedure=procedure, success=False,
                fail_msg="node %s: %s" % (node, msg), seen_digest=seen)
        return replication.PinnedResult(node=node, procedure=procedure,
                                        success=True, payload=payload,
                                        seen_digest=seen)

    def _run(self, ip, node, procedure, args):
        msg = self.failure(node, procedure, args)
        if msg:
            return self._result(node, procedure, msg=msg)
        daemon = self.daemons[ip]
        handler = getattr(self, "_" + procedure)
        return self._result(node, procedure, handler(daemon, *args))

    # --- ganeti.rpc.RpcClient ------------------------------------------------

    def answer(self, node, procedure, args):
        ip = self._ip(node)
        try:
            if self.cfg.get_node(node).offline:
                return RpcResult(node=node, procedure=procedure,
                                 success=False, offline=True,
                                 fail_msg="node %s is offline" % node)
        except errors.OpPrereqError:
            pass
        daemon = self.daemons.get(ip)
        if daemon is None:
            return RpcResult(node=node, procedure=procedure, success=False,
                             fail_msg="node %s: connection refused" % node)
        if daemon["digest"] != self.cert.digest():
            return RpcResult(node=node, procedure=procedure, success=False,
                             fail_msg="node %s: TLS handshake refused" % node)
        return self._run(ip, node, procedure, args)

    # --- replication.AddressRpc ----------------------------------------------

    def call_address(self, address, digest, procedure, args=(),
                     timeout=None):
        args = copy.deepcopy(list(args))
        self.calls.append((address, procedure, args, digest))
        daemon = self.daemons.get(address)
        if daemon is None:
            return defer.succeed(self._result(
                address, procedure, msg="connection refused (is"
                " ganeti-noded running there?)"))
        if daemon["digest"] != digest:
            return defer.succeed(self._result(
                address, procedure, seen=daemon["digest"],
                msg="TLS handshake refused"))
        if daemon["digest"] != self.cert.digest() and \
                procedure not in ("version", "join"):
            return defer.succeed(self._result(
                address, procedure, msg="unknown procedure %r" % procedure))
        result = self._run(address, address, procedure, args)
        return defer.succeed(attr_evolve(result, seen_digest=digest))

    # --- procedures ----------------------------------------------------------

    def _version(self, daemon):
        return constants.PROTOCOL_VERSION

    def _join(self, daemon, pem, hmac_key, cluster, node, ssconf, config):
        if daemon["digest"] == self.cert.digest():
            raise AssertionError("join on a member")
        daemon["digest"] = crypto.ClusterCertificate.from_pem(
            pem.encode()).digest()
        daemon["joined"] = (cluster, node)
        daemon["files"]["/var/lib/ganeti/hmac.key"] = hmac_key
        daemon["ssconf"] = ssconf
        return True

    def _upload_file(self, daemon, path, data, mode=0o600, *rest):
        daemon["files"][path] = replication.decode_data(data)
        return True

    def _write_ssconf_files(self, daemon, values):
        daemon["ssconf"] = values
        return True

    def _node_leave(self, daemon):
        daemon["files"] = {}
        daemon["ssconf"] = None
        daemon["digest"] = OTHER
        return []

    def _node_demote_from_mc(self, daemon):
        daemon["files"].pop("/var/lib/ganeti/config.data", None)
        return []

    # --- inspection ----------------------------------------------------------

    def config_serial(self, ip):
        data = self.daemons[ip]["files"].get("/var/lib/ganeti/config.data")
        if data is None:
            return None
        import json
        return json.loads(data)["serial_no"]


def attr_evolve(result, **changes):
    import attr
    return attr.evolve(result, **changes)


class FakeAddressRpc(object):
    def __init__(self, nodes):
        self.nodes = nodes

    def call(self, address, digest, procedure, args=(), timeout=None):
        return self.nodes.call_address(address, digest, procedure, args,
                                       timeout)


_CERT = []


def shared_cert(testcase):
    """One certificate for the whole run (making one takes a while); its
    directory goes when the test process ends."""
    if not _CERT:
        base = os.path.join("/tmp", "gnt-test-certs-%d" % os.getpid())
        atexit.register(shutil.rmtree, base, True)
        _CERT.append(cluster_cert(base))
    return _CERT[0]


class MembershipTestCase(ClockTestCase):

    #: the fake node daemons (subclasses simulate more procedures)
    NODES = FakeNodes

    def setUp(self):
        ClockTestCase.setUp(self)
        self.root = os.path.abspath(self.mktemp())
        self.paths = pathutils.Paths(self.root)
        self.paths.ensure_dirs()
        self.cert = shared_cert(self)
        self.cfg = make_store(self, path=self.paths.config_file)
        self.cfg.set_cluster_params(candidate_certs={
            self.cfg.master_node.uuid: crypto.certificate_digest(
                self.cert.certificate, "sha1")})
        with open(self.paths.hmac_key_file, "w") as f:
            f.write("0123456789abcdef0123456789abcdef01234567\n")
        self.glm = mcpu.make_lock_manager(self.cfg, self.clock)
        self.nodes = self.NODES(self.cfg, self.cert)
        self.nodes.member("127.0.0.1")
        self.ctx = mcpu.MasterContext(cfg=self.cfg, glm=self.glm,
                                      clock=self.clock, rpc=self.nodes,
                                      paths=self.paths)
        self.nodes.cert = self.cert
        self.ctx.address_rpc = FakeAddressRpc(self.nodes)
        self.replicator = replication.Replicator(self.cfg, self.nodes,
                                                 self.clock)
        self.cfg.write_listeners.append(self.replicator.config_written)
        self.ctx.replicator = self.replicator
        self.proc = mcpu.Processor(self.ctx, cmdlib.LOGICAL_UNITS)
        self.log = []
        self.job = 0

    def tearDown(self):
        self.clock.advance(0)
        for lock in self.glm.query_locks():
            self.assertEqual(lock["owners"], [], lock)
        ClockTestCase.tearDown(self)

    def run_op(self, op):
        self.job += 1
        # the processor gets OpCode objects, loaded where jobs come in
        return defer.maybeDeferred(opcodes.from_dict, op).addCallback(
            lambda op: self.proc.execute(self.job, 0, op, self.log.append))

    def ok(self, op):
        result = self.successResultOf(self.run_op(op))
        self.clock.advance(0)
        return result

    def fails(self, op, kind=errors.OpPrereqError):
        return self.failureResultOf(self.run_op(op), kind).value

    def add(self, name=NODE2, ip=IP2, fingerprint=ONE_TIME, bootstrap=True,
            **kw):
        if bootstrap:
            self.nodes.bootstrap(ip)
        op = {"OP_ID": "OP_NODE_ADD", "node_name": name, "primary_ip": ip}
        if fingerprint:
            op["join_fingerprint"] = "SHA256:" + fingerprint
        op.update(kw)
        result = self.ok(op)
        self.nodes.calls = []
        self.log[:] = []
        return result

    def node(self, name):
        return self.cfg.get_node(name)

    def candidates(self):
        return sorted(n.name for n in self.cfg.nodes.values()
                      if n.master_candidate)


class AddTests(MembershipTestCase):

    def test_join_with_fingerprint(self):
        self.nodes.bootstrap(IP2)
        serial = self.cfg.serial_no
        self.ok({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                 "primary_ip": IP2,
                 "join_fingerprint": "sha256:" + ONE_TIME.replace(":", "")
                 .lower()})
        node = self.node(NODE2)
        self.assertEqual((node.primary_ip, node.secondary_ip), (IP2, IP2))
        self.assertTrue(node.master_candidate)
        self.assertFalse(node.offline or node.drained)
        self.assertEqual(node.group, self.cfg.master_node.group)
        # the join: pinned to the one-time certificate, the cluster's files
        join = [c for c in self.nodes.calls if c[1] == "join"][0]
        self.assertEqual(join[0], IP2)
        self.assertEqual(join[3], ONE_TIME)
        pem, hmac_key, cluster, name, ssconf_values = join[2][:5]
        self.assertIn("PRIVATE KEY", pem)
        self.assertEqual((cluster, name), ("cluster.example.com", NODE2))
        self.assertEqual(hmac_key.strip(), "0123456789abcdef0123456789abcdef"
                         "01234567")
        self.assertEqual(ssconf_values["cluster_name"], "cluster.example.com")
        daemon = self.nodes.daemons[IP2]
        self.assertEqual(daemon["digest"], self.cert.digest())
        # replication brought config.data (a candidate) and the new ssconf
        self.assertEqual(self.nodes.config_serial(IP2), self.cfg.serial_no)
        self.assertGreater(self.cfg.serial_no, serial)
        self.assertIn(NODE2, daemon["ssconf"]["node_list"])
        self.assertIn(NODE2, daemon["ssconf"]["master_candidates"])
        # the node lock exists; the candidate certificate is recorded
        self.assertIn(node.uuid, self.glm.lockset(
            locking.LEVEL_NODE).list_names())
        self.assertIn(node.uuid, self.glm.lockset(
            locking.LEVEL_NODE_RES).list_names())
        self.assertIn(node.uuid, self.cfg.cluster.candidate_certs)
        self.assertIn("Node %s is a master candidate" % NODE2, self.log)

    def test_wrong_fingerprint_is_refused_and_changes_nothing(self):
        self.nodes.bootstrap(IP2, digest=OTHER)
        before = self.cfg.to_dict()
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                          "primary_ip": IP2,
                          "join_fingerprint": "SHA256:" + ONE_TIME})
        self.assertIn("presents the certificate SHA256:" + OTHER, str(err))
        self.assertIn("not SHA256:" + ONE_TIME, str(err))
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertNotIn("join", self.nodes.procedures())
        self.assertEqual(self.nodes.daemons[IP2]["digest"], OTHER)

    def test_unreachable_node(self):
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                          "primary_ip": IP2,
                          "join_fingerprint": "SHA256:" + ONE_TIME})
        self.assertIn("cannot reach the node daemon of %s at %s" % (NODE2,
                                                                    IP2),
                      str(err))
        self.assertEqual(err.args[1], errors.ECODE_ENVIRON)
        self.assertEqual(len(self.cfg.nodes), 1)

    def test_bad_fingerprint_text(self):
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                          "primary_ip": IP2, "join_fingerprint": "abc"})
        self.assertIn("is not a SHA-256 certificate fingerprint", str(err))
        self.assertEqual(err.args[1], errors.ECODE_INVAL)

    def test_name_and_ip_in_use(self):
        self.add()
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                          "primary_ip": IP3,
                          "join_fingerprint": "SHA256:" + ONE_TIME})
        self.assertIn("already in the cluster", str(err))
        self.assertEqual(err.args[1], errors.ECODE_EXISTS)
        self.nodes.bootstrap(IP3)
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE3,
                          "primary_ip": IP2,
                          "join_fingerprint": "SHA256:" + ONE_TIME})
        self.assertIn("conflict with node %s" % NODE2, str(err))
        self.assertEqual(err.args[1], errors.ECODE_NOTUNIQUE)
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE3,
                          "primary_ip": "not-an-ip"})
        self.assertIn("primary_ip: 'not-an-ip' is not a valid IP", str(err))
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE3})
        self.assertIn("primary_ip: the node's primary IP is required",
                      str(err))
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE3,
                          "primary_ip": IP3, "group": "nosuchgroup"})
        self.assertIn("node group 'nosuchgroup' is not known", str(err))

    def test_member_without_fingerprint_and_hints(self):
        # a bootstrap node without --join-fingerprint: say what to do
        self.nodes.bootstrap(IP2)
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                          "primary_ip": IP2})
        self.assertIn("does not hold this cluster's certificate (it presents"
                      " SHA256:%s)" % ONE_TIME, str(err))
        self.assertIn("--join-fingerprint", str(err))
        # a node holding the cluster certificate is added without a join
        self.nodes.member(IP2)
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                          "primary_ip": IP2,
                          "join_fingerprint": "SHA256:" + ONE_TIME})
        self.assertIn("already holds this cluster's certificate", str(err))
        self.add(fingerprint=None, bootstrap=False)
        self.assertIn(NODE2, [n.name for n in self.cfg.nodes.values()])
        self.assertNotIn("join", self.nodes.procedures())

    def test_candidate_pool(self):
        self.cfg.set_cluster_params(candidate_pool_size=2)
        self.add()
        self.add(NODE3, IP3)
        self.assertEqual(self.candidates(), [MASTER, NODE2])
        # the non-candidate got ssconf, not config.data
        self.assertIsNone(self.nodes.config_serial(IP3))
        self.assertEqual(self.nodes.daemons[IP3]["ssconf"]["node_list"],
                         [MASTER, NODE2, NODE3])
        self.assertEqual(sorted(self.cfg.cluster.candidate_certs),
                         sorted([self.node(MASTER).uuid,
                                 self.node(NODE2).uuid]))
        # not master capable: never a candidate
        self.nodes.bootstrap("127.0.0.4")
        self.ok({"OP_ID": "OP_NODE_ADD", "node_name": "node4.example.com",
                 "primary_ip": "127.0.0.4", "master_capable": False,
                 "vm_capable": False,
                 "join_fingerprint": "SHA256:" + ONE_TIME})
        node4 = self.node("node4.example.com")
        self.assertEqual((node4.master_candidate, node4.master_capable,
                          node4.vm_capable), (False, False, False))

    def test_group_and_parameters(self):
        self.cfg.add_nodegroup(objects.NodeGroup(name="rack2"))
        self.add(group="rack2", ndparams={"spindle_count": 4},
                 hv_state={"fake": {"mem_total": 1024}})
        node = self.node(NODE2)
        self.assertEqual(self.cfg.nodegroups[node.group].name, "rack2")
        self.assertEqual(node.ndparams, {"spindle_count": 4})
        self.assertEqual(node.hv_state_static, {"fake": {"mem_total": 1024}})
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE3,
                          "primary_ip": IP3,
                          "ndparams": {"exclusive_storage": True}})
        self.assertIn("exclusive_storage can only be set for the cluster or"
                      " a node group", str(err))
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE3,
                          "primary_ip": IP3, "ndparams": {"colour": 1}})
        self.assertIn("unknown node parameter 'colour'", str(err))

    def test_single_and_dual_homed(self):
        self.nodes.bootstrap(IP2)
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                          "primary_ip": IP2, "secondary_ip": "10.0.0.2",
                          "join_fingerprint": "SHA256:" + ONE_TIME})
        self.assertIn("The master has no secondary IP but node %s has one"
                      % NODE2, str(err))

    def test_readd(self):
        self.add()
        uuid = self.node(NODE2).uuid
        self.cfg.set_node_params(NODE2, offline=True, master_candidate=False)
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": MASTER,
                          "readd": True})
        self.assertIn("Cannot re-add the master node", str(err))
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                          "readd": True, "group": "default"})
        self.assertIn("a re-added node keeps its node group", str(err))
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE3,
                          "readd": True})
        self.assertIn("is not in the cluster", str(err))
        # the node kept its files: no fingerprint needed
        self.ok({"OP_ID": "OP_NODE_ADD", "node_name": NODE2, "readd": True})
        node = self.node(NODE2)
        self.assertEqual(node.uuid, uuid)
        self.assertEqual((node.offline, node.drained,
                          node.master_candidate), (False, False, True))
        self.assertEqual(self.nodes.config_serial(IP2), self.cfg.serial_no)
        # reinstalled (bootstrap mode again): re-added with a fingerprint
        self.nodes.bootstrap(IP2)
        self.ok({"OP_ID": "OP_NODE_ADD", "node_name": NODE2, "readd": True,
                 "join_fingerprint": "SHA256:" + ONE_TIME})
        self.assertEqual(self.nodes.daemons[IP2]["digest"],
                         self.cert.digest())
        self.assertEqual(self.node(NODE2).uuid, uuid)

    def test_join_failure_changes_no_config(self):
        self.nodes.bootstrap(IP2)
        self.nodes.fail["join"] = "cluster_pem: no"
        serial = self.cfg.serial_no
        err = self.fails({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                          "primary_ip": IP2,
                          "join_fingerprint": "SHA256:" + ONE_TIME},
                         errors.OpExecError)
        self.assertIn("Node %s did not join: cluster_pem: no" % NODE2,
                      str(err))
        self.assertEqual(self.cfg.serial_no, serial)

    def test_dry_run(self):
        self.nodes.bootstrap(IP2)
        serial = self.cfg.serial_no
        self.ok({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                 "primary_ip": IP2, "dry_run": True,
                 "join_fingerprint": "SHA256:" + ONE_TIME})
        self.assertEqual(self.cfg.serial_no, serial)
        self.assertNotIn("join", self.nodes.procedures())

    def test_replication_failure_is_a_warning(self):
        self.nodes.bootstrap(IP2)
        self.nodes.fail["write_ssconf_files"] = "disk full"
        self.ok({"OP_ID": "OP_NODE_ADD", "node_name": NODE2,
                 "primary_ip": IP2,
                 "join_fingerprint": "SHA256:" + ONE_TIME})
        self.assertTrue(any("did not get configuration serial" in m and
                            "disk full" in m for m in self.log), self.log)
        self.assertEqual(list(self.replicator.missed()), [NODE2])


class RemoveTests(MembershipTestCase):

    def test_remove(self):
        self.cfg.set_cluster_params(candidate_pool_size=2)
        self.add()
        self.add(NODE3, IP3)
        uuid = self.node(NODE2).uuid
        self.ok({"OP_ID": "OP_NODE_REMOVE", "node_name": NODE2})
        self.assertNotIn(uuid, self.cfg.nodes)
        # the pool got a new candidate
        self.assertEqual(self.candidates(), [MASTER, NODE3])
        self.assertEqual(self.nodes.config_serial(IP3), self.cfg.serial_no)
        self.assertNotIn(uuid, self.cfg.cluster.candidate_certs)
        # the node was told to leave, pinned to the cluster certificate
        leave = [c for c in self.nodes.calls if c[1] == "node_leave"][0]
        self.assertEqual((leave[0], leave[3]), (IP2, self.cert.digest()))
        self.assertEqual(self.nodes.daemons[IP2]["files"], {})
        for level in (locking.LEVEL_NODE, locking.LEVEL_NODE_RES):
            self.assertNotIn(uuid, self.glm.lockset(level).list_names())
        # nothing more is sent to it
        self.nodes.calls = []
        self.cfg.add_tags("cluster", None, ["x"])
        self.clock.advance(0)
        self.assertNotIn(NODE2, [c[0] for c in self.nodes.calls])

    def test_refusals(self):
        err = self.fails({"OP_ID": "OP_NODE_REMOVE", "node_name": MASTER})
        self.assertIn("is the master node", str(err))
        err = self.fails({"OP_ID": "OP_NODE_REMOVE", "node_name": "nope"})
        self.assertIn("node 'nope' is not known", str(err))
        self.add()
        inst = objects.Instance(name="inst1", primary_node=MASTER,
                                secondary_nodes=[NODE2], os="busybox",
                                hypervisor="fake",
                                nics=[objects.NIC(mac="aa:00:00:00:00:01")])
        self.cfg.add_instance(inst)
        err = self.fails({"OP_ID": "OP_NODE_REMOVE", "node_name": NODE2})
        self.assertIn("still has instances (inst1)", str(err))

    def test_offline_node_is_not_contacted(self):
        self.add()
        self.cfg.set_node_params(NODE2, offline=True, master_candidate=False)
        self.nodes.calls = []
        self.ok({"OP_ID": "OP_NODE_REMOVE", "node_name": NODE2})
        self.assertNotIn("node_leave", self.nodes.procedures())
        self.assertTrue(any("is offline; it was not told to leave" in m
                            for m in self.log))

    def test_leave_failure_is_a_warning(self):
        self.add()
        self.nodes.fail["node_leave"] = "permission denied"
        self.ok({"OP_ID": "OP_NODE_REMOVE", "node_name": NODE2})
        self.assertTrue(any("could not leave the cluster cleanly" in m and
                            "permission denied" in m for m in self.log))
        self.assertEqual(len(self.cfg.nodes), 1)


class ModifyTests(MembershipTestCase):

    def setUp(self):
        MembershipTestCase.setUp(self)
        self.cfg.set_cluster_params(candidate_pool_size=2)
        self.add()
        self.add(NODE3, IP3)

    def modify(self, name=NODE2, **params):
        op = {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": name}
        op.update(params)
        return op

    def test_offline_candidate_needs_auto_promote(self):
        err = self.fails(self.modify(offline=True))
        self.assertIn("Not enough master candidates would remain", str(err))
        self.assertIn("--auto-promote", str(err))
        self.assertTrue(self.node(NODE2).master_candidate)
        result = self.ok(self.modify(offline=True, auto_promote=True))
        self.assertEqual(result, [["master_candidate", "False"],
                                  ["offline", "True"]]
                         if isinstance(result[0], list) else
                         [("master_candidate", "False"), ("offline", "True")])
        node2 = self.node(NODE2)
        self.assertEqual((node2.offline, node2.master_candidate),
                         (True, False))
        self.assertEqual(self.candidates(), [MASTER, NODE3])
        self.assertEqual(self.nodes.config_serial(IP3), self.cfg.serial_no)
        self.assertNotIn(node2.uuid, self.cfg.cluster.candidate_certs)
        self.assertIn(self.node(NODE3).uuid,
                      self.cfg.cluster.candidate_certs)
        # an offline node is not contacted (no demotion call either)
        self.assertNotIn(NODE2, [c[0] for c in self.nodes.calls])

    def test_back_online(self):
        self.ok(self.modify(offline=True, auto_promote=True))
        self.nodes.calls = []
        self.ok(self.modify(offline=False))
        node2 = self.node(NODE2)
        self.assertFalse(node2.offline)
        # the pool is full: not promoted again
        self.assertFalse(node2.master_candidate)
        self.assertIn("version", self.nodes.procedures(IP2))
        self.assertTrue(any("comes back online without a re-add" in m
                            for m in self.log))
        # not answering: refused, nothing changed
        self.ok(self.modify(offline=True))
        del self.nodes.daemons[IP2]
        err = self.fails(self.modify(offline=False), errors.OpExecError)
        self.assertIn("does not answer", str(err))
        self.assertTrue(self.node(NODE2).offline)

    def test_drained_candidate_demotes_itself(self):
        self.ok(self.modify(drained=True, auto_promote=True))
        self.assertIn("node_demote_from_mc", self.nodes.procedures(NODE2))
        self.assertNotIn("/var/lib/ganeti/config.data",
                         self.nodes.daemons[IP2]["files"])
        # still gets ssconf
        self.cfg.add_tags("cluster", None, ["after"])
        self.clock.advance(0)
        self.assertEqual(self.nodes.daemons[IP2]["ssconf"]["cluster_tags"],
                         ["after"])
        # undrained: the pool wants it again only if there is room
        self.ok(self.modify(NODE3, master_candidate=False,
                            auto_promote=True))
        self.assertEqual(self.candidates(), [MASTER])
        self.ok(self.modify(drained=False))
        self.assertEqual(self.candidates(), [MASTER, NODE2])
        self.assertIn("Node %s will be promoted to master candidate" % NODE2,
                      self.log)

    def test_refusals(self):
        err = self.fails(self.modify())
        self.assertIn("at least one modification", str(err))
        err = self.fails(self.modify(offline=True, drained=True))
        self.assertIn("only one of master candidate, drained and offline",
                      str(err))
        err = self.fails(self.modify(MASTER, offline=True))
        self.assertIn("only be changed by a master failover", str(err))
        err = self.fails(self.modify(powered=False))
        self.assertIn("has no out-of-band program", str(err))
        err = self.fails(self.modify(ndparams={"exclusive_storage": True}))
        self.assertIn("exclusive_storage can only be set", str(err))
        err = self.fails(self.modify(ndparams={"repair_max_parallel": 2}))
        self.assertIn("repair_max_parallel can only be set for the cluster"
                      " or a node group", str(err))
        err = self.fails(self.modify(MASTER, master_capable=False))
        self.assertIn("The master must stay master capable", str(err))
        self.ok(self.modify(NODE3, master_capable=False))
        err = self.fails(self.modify(NODE3, master_candidate=True))
        self.assertIn("is not master capable", str(err))
        inst = objects.Instance(name="inst1", primary_node=NODE3, os="b",
                                hypervisor="fake",
                                nics=[objects.NIC(mac="aa:00:00:00:00:01")])
        self.cfg.add_instance(inst)
        err = self.fails(self.modify(NODE3, vm_capable=False))
        self.assertIn("has instances; vm_capable cannot be unset", str(err))
        err = self.fails(self.modify(secondary_ip="10.1.1.1"))
        self.assertIn("single-homed cluster needs --force", str(err))

    def test_master_capable_false_demotes(self):
        result = self.ok(self.modify(master_capable=False,
                                     auto_promote=True))
        self.assertIn(("master_capable", "False"), [tuple(r) for r in result])
        self.assertIn(("master_candidate", "False"),
                      [tuple(r) for r in result])
        self.assertEqual(self.candidates(), [MASTER, NODE3])

    def test_parameters(self):
        result = self.ok(self.modify(ndparams={"spindle_count": 3,
                                               "ssh_port": 2222},
                                     hv_state={"fake": {"mem_total": 512}}))
        self.assertEqual(result, [])
        node = self.node(NODE2)
        self.assertEqual(node.ndparams, {"spindle_count": 3,
                                         "ssh_port": 2222})
        self.assertEqual(node.hv_state_static, {"fake": {"mem_total": 512}})
        self.ok(self.modify(ndparams={"ssh_port": "default"}))
        self.assertEqual(self.node(NODE2).ndparams, {"spindle_count": 3})
        self.assertEqual(self.nodes.daemons[IP2]["ssconf"]["ssh_ports"],
                         ["%s=22" % MASTER, "%s=22" % NODE2,
                          "%s=22" % NODE3])

    def test_state_overrides_are_checked(self):
        before = self.cfg.to_dict()
        for state, words in [
                ({"hv_state": {"fake": {"mem_totl": 512}}},
                 ["hv_state/fake: unknown key 'mem_totl'", "mem_total"]),
                ({"hv_state": {"fake": {"mem_node": "lots"}}},
                 ["hv_state/fake/mem_node", "non-negative integer"]),
                ({"hv_state": {"vmware": {"mem_total": 1}}},
                 ["unknown hypervisor 'vmware'"]),
                ({"disk_state": {"plain": {"xenvg": {"total": 1}}}},
                 ["disk_state/plain/xenvg: unknown key 'total'",
                  "disk_reserved"]),
                ({"disk_state": {"tape": {"t0": {"disk_total": 1}}}},
                 ["unknown storage kind 'tape'"])]:
            err = self.fails(self.modify(**state))
            for word in words:
                self.assertIn(word, str(err))
            self.assertEqual(self.cfg.to_dict(), before)
        self.ok(self.modify(disk_state={"plain": {"xenvg": {
            "disk_reserved": 1024}}}, hv_state={"fake": {"mem_node": 512}}))
        node = self.node(NODE2)
        self.assertEqual(node.disk_state_static,
                         {"plain": {"xenvg": {"disk_reserved": 1024}}})
        self.assertEqual(node.hv_state_static, {"fake": {"mem_node": 512}})
        self.ok(self.modify(hv_state={"fake": {"mem_node": "default"}}))
        self.assertEqual(self.node(NODE2).hv_state_static, {"fake": {}})

    def test_ineffective_unset(self):
        self.ok(self.modify(NODE3, offline=False, drained=False))
        self.assertIn("Ignoring the request to unset offline: it is not set",
                      self.log)


class RedistConfTests(MembershipTestCase):

    def write(self, standard, data, mode=0o600):
        path = os.path.join(self.root, standard.lstrip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(data)
        os.chmod(path, mode)

    def test_redistribute(self):
        self.cfg.set_cluster_params(candidate_pool_size=2)
        self.add()
        self.add(NODE3, IP3, vm_capable=False)
        self.add("node4.example.com", "127.0.0.4")
        self.cfg.set_node_params("node4.example.com", offline=True)
        self.write("/var/lib/ganeti/rapi.pem", "RAPI", 0o400)
        self.write("/var/lib/ganeti/rapi/users", "jack secret write")
        self.write("/etc/ganeti/vnc-cluster-password", "vnc")
        self.cfg.set_cluster_params(hvparams={"kvm": {
            "vnc_password_file": "/etc/ganeti/vnc-cluster-password"}})
        self.write("/etc/xen/xend-config.sxp", "(xend)")
        self.write("/var/lib/ganeti/redist-extra-files",
                   "# extra\n/etc/xen/xend-config.sxp\n\n%s\n"
                   % os.path.join(self.root, "etc/ganeti/missing"))
        self.clock.advance(0)
        for ip in (IP2, IP3):
            self.nodes.daemons[ip]["files"] = {}
        self.nodes.calls = []
        self.ok({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        files2 = self.nodes.daemons[IP2]["files"]
        files3 = self.nodes.daemons[IP3]["files"]
        # node2: candidate, vm capable; node3: neither
        self.assertEqual(sorted(files2), sorted([
            "/etc/ganeti/vnc-cluster-password", "/etc/xen/xend-config.sxp",
            "/var/lib/ganeti/config.data", "/var/lib/ganeti/hmac.key",
            "/var/lib/ganeti/rapi.pem", "/var/lib/ganeti/rapi/users",
            "/var/lib/ganeti/redist-extra-files"]))
        self.assertEqual(sorted(files3), sorted([
            "/etc/xen/xend-config.sxp", "/var/lib/ganeti/hmac.key",
            "/var/lib/ganeti/redist-extra-files"]))
        self.assertEqual(files2["/var/lib/ganeti/rapi.pem"], b"RAPI")
        mode = [c[2][2] for c in self.nodes.calls
                if c[1] == "upload_file" and
                c[2][0] == "/var/lib/ganeti/rapi.pem"][0]
        self.assertEqual(mode, 0o400)
        self.assertEqual(self.nodes.config_serial(IP2), self.cfg.serial_no)
        self.assertNotIn("node4.example.com",
                         [c[0] for c in self.nodes.calls])
        self.assertIn("Skipping offline node node4.example.com", self.log)
        self.assertIn("WARNING: /etc/ganeti/missing does not exist on the"
                      " master; not distributed", self.log)
        # the master itself gets nothing
        self.assertNotIn(MASTER, [c[0] for c in self.nodes.calls])

    def test_failures_are_warnings(self):
        self.add()
        self.nodes.fail["upload_file"] = "no space"
        self.ok({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        self.assertTrue(any("did not get configuration serial" in m
                            for m in self.log), self.log)
        self.assertIn("WARNING: Copy of file /var/lib/ganeti/hmac.key to node"
                      " %s failed: no space" % NODE2, self.log)
        self.assertIn("WARNING: Not every node got every file: %s" % NODE2,
                      self.log)

    def test_the_job_queue_is_copied_too(self):
        self.add()
        asked = []

        class QueueCopies(object):
            # the master's QueueReplicator (tests/test_jqueue_replication.py)
            def resync(self):
                asked.append(True)
                return defer.succeed({NODE2: "node %s: refused" % NODE2})
        self.ok({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        self.assertNotIn("Copying the job queue to the master candidates",
                         self.log)
        self.ctx.queue_replicator = QueueCopies()
        self.ok({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        self.assertEqual(asked, [True])
        self.assertIn("Copying the job queue to the master candidates",
                      self.log)
        self.assertIn("WARNING: Node %s did not get a copy of the job queue:"
                      " node %s: refused" % (NODE2, NODE2), self.log)
        self.assertIn("WARNING: Not every node got every file: %s" % NODE2,
                      self.log)

    def test_bad_extra_files_list(self):
        self.write("/var/lib/ganeti/redist-extra-files", "relative/path\n")
        err = self.fails({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        self.assertIn("line 1: 'relative/path' is not an absolute", str(err))
        self.write("/var/lib/ganeti/redist-extra-files",
                   "/var/lib/ganeti/server.pem\n")
        err = self.fails({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        self.assertIn("is never redistributed", str(err))


class OpcodeTests(unittest.TestCase):

    def test_join_fingerprint_round_trip(self):
        from ganeti import opcodes
        op = opcodes.OpNodeAdd(node_name="n", join_fingerprint="SHA256:x")
        self.assertEqual(op.to_dict()["join_fingerprint"], "SHA256:x")
        self.assertNotIn("join_fingerprint",
                         opcodes.OpNodeAdd(node_name="n").to_dict())
        self.assertEqual(opcodes.from_dict(op.to_dict()), op)
