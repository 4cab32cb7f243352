"""gnt-cluster renew-crypto and rename, as logical units, against fake node
daemons that model the TLS trust of each end (what a node presents and
trusts, what the master's client presents and trusts) and the three steps
of a renewal; a Clock drives the waits between the steps of a key
renewal."""

import datetime

from ganeti import crypto
from ganeti import errors
from ganeti import replication
from ganeti.backend import rotation
from ganeti.rpc import RpcResult

from tests.test_crypto import cluster_cert
from tests.test_node_lus import (FakeNodes, IP2, IP3, MASTER, NODE2, NODE3,
                                 MembershipTestCase)

NODE4 = "node4.example.com"
IP4 = "127.0.0.4"
HMAC = "/var/lib/ganeti/hmac.key"
RAPI = "/var/lib/ganeti/rapi.pem"
CDS = "/var/lib/ganeti/cluster-domain-secret"


class CryptoNodes(FakeNodes):
    """FakeNodes whose TLS is modelled on both ends: a call gets through
    only if the node trusts the certificate the master presents and the
    master trusts the one the node presents.  After every call every
    online node that took the renewal so far is asked again (as the
    replication or a query would), so a window in which the master could
    not reach a node shows as a refusal in ``refused``."""

    def __init__(self, cfg, cert):
        FakeNodes.__init__(self, cfg, cert)
        self.client_trusted = {cert.digest()}
        self.refused = []
        self.steps = []      # (node, procedure, the master's cert digest)
        self._probing = False

    def bootstrap(self, ip, digest=None):
        daemon = FakeNodes.bootstrap(self, ip) if digest is None else \
            FakeNodes.bootstrap(self, ip, digest)
        daemon["trusted"] = {daemon["digest"]}
        daemon["staged"] = daemon["previous"] = None
        daemon["hmac_staged"] = daemon["hmac_previous"] = None
        return daemon

    def _join(self, daemon, *args):
        result = FakeNodes._join(self, daemon, *args)
        daemon["trusted"] = {daemon["digest"]}
        return result

    # --- the master's client ---------------------------------------------

    def use_certificate(self, cert, trusted=()):
        self.cert = cert
        self.client_trusted = {cert.digest()} | {t.digest()
                                                 for t in trusted}

    def answer(self, node, procedure, args):
        try:
            obj = self.cfg.get_node(node)
        except errors.OpPrereqError:
            obj = None
        if obj is not None and obj.offline:
            return RpcResult(node=node, procedure=procedure, success=False,
                             offline=True,
                             fail_msg="node %s is offline" % node)
        daemon = self.daemons.get(self._ip(node))
        if daemon is None:
            return RpcResult(node=node, procedure=procedure, success=False,
                             fail_msg="node %s: connection refused" % node)
        if self.cert.digest() not in daemon["trusted"] or \
                daemon["digest"] not in self.client_trusted:
            self.refused.append((node, procedure))
            return RpcResult(node=node, procedure=procedure, success=False,
                             fail_msg="node %s: TLS handshake refused" % node)
        self.steps.append((node, procedure, self.cert.digest()))
        result = self._run(self._ip(node), node, procedure, args)
        self._probe()
        return result

    def _probe(self):
        """Every node reachable before must still be reachable."""
        if self._probing:
            return
        self._probing = True
        try:
            for obj in self.cfg.nodes.values():
                daemon = self.daemons.get(obj.primary_ip)
                if obj.offline or daemon is None or daemon.get("lost"):
                    continue
                if self.cert.digest() not in daemon["trusted"] or \
                        daemon["digest"] not in self.client_trusted:
                    self.refused.append((obj.name, "probe"))
        finally:
            self._probing = False

    # --- the procedures of a renewal -------------------------------------

    def _cluster_cert_stage(self, daemon, pem):
        cert = crypto.ClusterCertificate.from_pem(pem.encode())
        daemon["staged"] = cert.digest()
        daemon["staged_name"] = cert.cluster_name
        daemon["trusted"] = daemon["trusted"] | {cert.digest()}
        return cert.digest()

    def _cluster_cert_switch(self, daemon, digest):
        if daemon["digest"] == digest and daemon["staged"] is None:
            return False
        assert daemon["staged"] == digest, "switch before stage"
        daemon["previous"] = daemon["digest"]
        daemon["digest"] = digest
        daemon["staged"] = None
        return True

    def _cluster_cert_forget(self, daemon, digest):
        assert daemon["digest"] == digest, "forget of the one presented"
        daemon["trusted"] = {digest}
        daemon["staged"] = daemon["previous"] = None
        return []

    def _hmac_key_stage(self, daemon, key):
        daemon["hmac_staged"] = key
        return rotation.key_digest(key.encode())

    def _hmac_key_switch(self, daemon, digest):
        staged = daemon["hmac_staged"]
        assert staged is not None and \
            rotation.key_digest(staged.encode()) == digest
        daemon["hmac_previous"] = daemon["files"].get(HMAC)
        daemon["files"][HMAC] = staged
        daemon["hmac_staged"] = None
        return True

    def _hmac_key_forget(self, daemon, digest):
        current = daemon["files"][HMAC]
        if isinstance(current, bytes):
            current = current.decode()
        assert rotation.key_digest(current.encode()) == digest
        daemon["hmac_previous"] = daemon["hmac_staged"] = None
        return []


class CryptoTestCase(MembershipTestCase):

    NODES = CryptoNodes

    def setUp(self):
        MembershipTestCase.setUp(self)
        self.cfg.set_cluster_params(candidate_pool_size=2)
        self.add()                                # node2: a candidate
        self.add(NODE3, IP3)                      # node3: not one
        self.old = self.cert
        self.log[:] = []
        self.nodes.calls = []
        self.nodes.steps = []

    def run_pumped(self, op):
        """Run ``op``, advancing the clock while it waits."""
        d = self.run_op(op)
        done = []

        def finished(result):
            done.append(True)
            return result
        d.addBoth(finished)
        waited = 0
        while not done and waited < 60:
            self.clock.advance(0.5)
            waited += 0.5
        return d

    def renew(self, **params):
        params["OP_ID"] = "OP_CLUSTER_RENEW_CRYPTO"
        result = self.successResultOf(self.run_pumped(params))
        self.clock.advance(0)
        return result

    def renew_fails(self, kind=errors.OpPrereqError, **params):
        params["OP_ID"] = "OP_CLUSTER_RENEW_CRYPTO"
        return self.failureResultOf(self.run_pumped(params), kind).value

    def daemon(self, ip):
        return self.nodes.daemons[ip]

    def warnings(self):
        return [m for m in self.log if m.startswith("WARNING:")]

    def procedures_called(self):
        return [c[1] for c in self.nodes.calls]


class RenewCertificateTests(CryptoTestCase):

    def test_rolls_out_without_a_refused_call(self):
        self.assertIsNone(self.renew(new_cluster_certificate=True))
        new = self.nodes.cert
        self.assertNotEqual(new.digest(), self.old.digest())
        self.assertEqual(new.cluster_name, "cluster.example.com")
        self.assertIn("PRIVATE KEY", new.key_pem.decode())
        for ip in ("127.0.0.1", IP2, IP3):
            daemon = self.daemon(ip)
            self.assertEqual(daemon["digest"], new.digest(), ip)
            self.assertEqual(daemon["trusted"], {new.digest()}, ip)
        # the master's client presents and trusts only the new one
        self.assertEqual(self.nodes.client_trusted, {new.digest()})
        # no call, and no probe between the calls, was ever refused
        self.assertEqual(self.nodes.refused, [])
        # every node staged before the master presented the new one, and
        # every node switched before any forgot the old one
        steps = [(n, p.rsplit("_", 1)[1], d == new.digest())
                 for n, p, d in self.nodes.steps
                 if p.startswith("cluster_cert_")]
        self.assertEqual(steps[:3], [(MASTER, "stage", False),
                                     (NODE2, "stage", False),
                                     (NODE3, "stage", False)])
        self.assertEqual(sorted(steps[3:6]), [(MASTER, "switch", True),
                                              (NODE2, "switch", True),
                                              (NODE3, "switch", True)])
        self.assertEqual(sorted(steps[6:]), [(MASTER, "forget", True),
                                             (NODE2, "forget", True),
                                             (NODE3, "forget", True)])
        # candidate_certs and ssconf name the new certificate
        sha1 = crypto.certificate_digest(new.certificate, "sha1")
        certs = self.cfg.cluster.candidate_certs
        self.assertEqual(sorted(certs), sorted(
            n.uuid for n in self.cfg.nodes.values() if n.master_candidate))
        self.assertEqual(set(certs.values()), {sha1})
        lines = self.daemon(IP3)["ssconf"]["master_candidates_certs"]
        self.assertEqual(crypto.parse_candidate_certs(lines), certs)
        self.assertIn("Staging the new cluster certificate %s (for"
                      " cluster.example.com) on 3 node(s)"
                      % crypto.format_fingerprint(new.digest()), self.log)
        self.assertTrue(any(m.startswith("Cluster certificate renewed: %s"
                                         % crypto.format_fingerprint(
                                             new.digest()))
                            for m in self.log), self.log)
        self.assertEqual(self.warnings(), [])
        # a job running afterwards reaches every node
        self.nodes.refused = []
        self.assertIsNone(self.ok({"OP_ID": "OP_CLUSTER_REDIST_CONF"}))
        self.assertEqual(self.nodes.refused, [])

    def test_node_certificates_means_the_cluster_certificate(self):
        self.renew(node_certificates=True)
        self.assertNotEqual(self.nodes.cert.digest(), self.old.digest())
        self.assertIn("Nodes present the cluster certificate here: renewing"
                      " node certificates renews it", self.log)

    def test_offline_and_unreachable_nodes_are_reported(self):
        self.add(NODE4, IP4)
        self.cfg.set_node_params(NODE3, offline=True)
        self.clock.advance(0)
        self.daemon(IP4)["lost"] = True
        del self.nodes.daemons[IP4]
        self.log[:] = []
        self.renew(new_cluster_certificate=True, new_confd_hmac_key=True)
        new = self.nodes.cert
        self.assertEqual(self.daemon(IP2)["digest"], new.digest())
        self.assertEqual(self.daemon(IP3)["digest"], self.old.digest())
        self.assertEqual(self.nodes.refused, [])
        self.assertIn("Skipping offline node %s" % NODE3, self.log)
        self.assertIn("WARNING: Node %s could not stage the new cluster"
                      " certificate: connection refused" % NODE4, self.log)
        for name, why in ((NODE3, "offline"),
                          (NODE4, "connection refused")):
            text = [m for m in self.warnings()
                    if m.startswith("WARNING: Node %s could not be updated:"
                                    % name)]
            self.assertEqual(len(text), 1, self.warnings())
            self.assertIn("cluster certificate (%s)" % why, text[0])
            self.assertIn("HMAC key (%s)" % why, text[0])
            self.assertIn("gnt-node add --readd --join-fingerprint", text[0])
            self.assertIn("ganeti-noded --bootstrap", text[0])

    def test_node_failing_to_switch_is_reported(self):
        self.nodes.fail[(NODE3, "cluster_cert_switch")] = "disk full"
        self.daemon(IP3)["lost"] = True   # the master loses it: expected
        self.renew(new_cluster_certificate=True)
        new = self.nodes.cert
        self.assertEqual(self.daemon(IP2)["digest"], new.digest())
        self.assertIn("WARNING: Node %s could not switch to the new cluster"
                      " certificate: disk full" % NODE3, self.log)
        self.assertTrue(any("Node %s could not be updated: cluster"
                            " certificate (disk full)" % NODE3 in m
                            for m in self.log), self.log)
        # it was not asked to forget the old one it still presents
        self.assertNotIn((NODE3, "cluster_cert_forget", new.digest()),
                         self.nodes.steps)

    def test_master_failing_to_stage_changes_nothing(self):
        self.nodes.fail[(MASTER, "cluster_cert_stage")] = "read-only fs"
        before = self.cfg.to_dict()
        err = self.renew_fails(errors.OpExecError,
                               new_cluster_certificate=True)
        self.assertIn("The master node %s could not stage the new cluster"
                      " certificate (read-only fs); the cluster certificate"
                      " was not changed" % MASTER, str(err))
        self.assertIs(self.nodes.cert, self.old)
        self.assertEqual(self.nodes.client_trusted, {self.old.digest()})
        for ip in ("127.0.0.1", IP2, IP3):
            daemon = self.daemon(ip)
            self.assertEqual((daemon["digest"], daemon["trusted"],
                              daemon["staged"]),
                             (self.old.digest(), {self.old.digest()}, None))
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertEqual(self.nodes.refused, [])

    def test_master_failing_to_switch_puts_the_old_one_back(self):
        self.nodes.fail[(MASTER, "cluster_cert_switch")] = "I/O error"
        err = self.renew_fails(errors.OpExecError,
                               new_cluster_certificate=True)
        self.assertIn("could not switch to the new cluster certificate (I/O"
                      " error); the old cluster certificate was put back",
                      str(err))
        self.assertEqual(self.nodes.cert.digest(), self.old.digest())
        self.assertEqual(self.nodes.client_trusted, {self.old.digest()})
        for ip in ("127.0.0.1", IP2, IP3):
            daemon = self.daemon(ip)
            self.assertEqual((daemon["digest"], daemon["trusted"]),
                             (self.old.digest(), {self.old.digest()}), ip)
        self.assertEqual(self.nodes.refused, [])


class RenewOtherPartsTests(CryptoTestCase):

    def test_hmac_key_in_three_steps_with_pauses(self):
        old_key = self.daemon(IP2)["files"][HMAC]
        started = self.clock.seconds()
        times = {}
        original = self.nodes.answer

        def timed(node, procedure, args):
            times.setdefault(procedure, self.clock.seconds())
            return original(node, procedure, args)
        self.nodes.answer = timed
        self.renew(new_confd_hmac_key=True)
        keys = {self.daemon(ip)["files"][HMAC]
                for ip in ("127.0.0.1", IP2, IP3)}
        self.assertEqual(len(keys), 1)
        key = keys.pop()
        self.assertNotEqual(key, old_key)
        self.assertRegex(key, r"^[0-9a-f]{40}\n$")
        for ip in ("127.0.0.1", IP2, IP3):
            self.assertIsNone(self.daemon(ip)["hmac_previous"])
        # the daemons following the key files had time between the steps
        self.assertGreaterEqual(times["hmac_key_switch"] -
                                times["hmac_key_stage"], 2)
        self.assertGreaterEqual(times["hmac_key_forget"] -
                                times["hmac_key_switch"], 2)
        self.assertGreaterEqual(times["hmac_key_stage"], started)
        # the certificate was left alone
        self.assertIs(self.nodes.cert, self.old)
        self.assertNotIn("cluster_cert_stage", self.procedures_called())

    def test_rapi_certificate_to_the_master_and_candidates(self):
        self.renew(new_rapi_certificate=True)
        pem = self.daemon("127.0.0.1")["files"][RAPI]
        self.assertEqual(self.daemon(IP2)["files"][RAPI], pem)
        self.assertNotIn(RAPI, self.daemon(IP3)["files"])  # no candidate
        cert = crypto.ClusterCertificate.from_pem(pem)
        self.assertEqual(cert.cluster_name, "cluster.example.com")
        modes = {c[2][2] for c in self.nodes.calls
                 if c[1] == "upload_file" and c[2][0] == RAPI}
        self.assertEqual(modes, {0o400})

    def test_given_rapi_certificate_and_domain_secret(self):
        given = cluster_cert(self.mktemp(), "rapi.example.com")
        self.renew(rapi_certificate=given.pem.decode(),
                   cluster_domain_secret="s3cret-domain\n")
        self.assertEqual(self.daemon(IP2)["files"][RAPI], given.pem)
        for ip in ("127.0.0.1", IP2, IP3):
            self.assertEqual(self.daemon(ip)["files"][CDS],
                             b"s3cret-domain\n")

    def test_new_domain_secret(self):
        self.renew(new_cluster_domain_secret=True)
        secrets = {self.daemon(ip)["files"][CDS]
                   for ip in ("127.0.0.1", IP2, IP3)}
        self.assertEqual(len(secrets), 1)
        self.assertRegex(secrets.pop().decode(), r"^[0-9a-f]{40}\n$")

    def test_master_failing_to_take_the_rapi_certificate(self):
        self.nodes.fail[(MASTER, "upload_file")] = "no space"
        err = self.renew_fails(errors.OpExecError, new_rapi_certificate=True)
        self.assertIn("The master node could not write the new RAPI"
                      " certificate: no space", str(err))


class BadInputTests(CryptoTestCase):
    """Refused before anything is done: no node is called, the
    configuration stays as it was."""

    def refused(self, text, **params):
        before = self.cfg.to_dict()
        err = self.renew_fails(**params)
        self.assertIn(text, str(err))
        self.assertEqual(err.args[1], errors.ECODE_INVAL)
        self.assertEqual(self.nodes.calls, [])
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertIs(self.nodes.cert, self.old)

    def test_nothing_asked(self):
        self.refused("Nothing to renew: ask for at least one of"
                     " new_cluster_certificate")

    def test_ssh_keys(self):
        self.refused("renew_ssh_keys: this cluster manager keeps no SSH"
                     " keys", renew_ssh_keys=True,
                     new_cluster_certificate=True)

    def test_both_ways_of_one_part(self):
        self.refused("new_rapi_certificate, rapi_certificate: give one of"
                     " them, not both", new_rapi_certificate=True,
                     rapi_certificate=self.old.pem.decode())
        self.refused("new_cluster_domain_secret, cluster_domain_secret:"
                     " give one", new_cluster_domain_secret=True,
                     cluster_domain_secret="x")

    def test_bad_rapi_certificates(self):
        self.refused("rapi_certificate: ", rapi_certificate="not a PEM")
        # a certificate without its key
        self.refused("rapi_certificate: ",
                     rapi_certificate=self.old.cert_pem.decode())
        long_ago = datetime.datetime.now(datetime.timezone.utc) - \
            datetime.timedelta(days=30)
        expired = cluster_cert(self.mktemp(), validity_days=2, now=long_ago)
        self.refused("rapi_certificate: the certificate expired on",
                     rapi_certificate=expired.pem.decode())

    def test_empty_domain_secret(self):
        self.refused("cluster_domain_secret: must not be empty",
                     cluster_domain_secret=" \n")


class RenameTests(CryptoTestCase):

    def rename(self, name):
        return self.run_pumped({"OP_ID": "OP_CLUSTER_RENAME", "name": name})

    def test_rename(self):
        master_ip = self.cfg.cluster.master_ip
        result = self.successResultOf(self.rename("New-Name.Example.com"))
        self.clock.advance(0)
        self.assertEqual(result, "new-name.example.com")
        self.assertEqual(self.cfg.cluster.cluster_name,
                         "new-name.example.com")
        self.assertEqual(self.cfg.cluster.master_ip, master_ip)
        new = self.nodes.cert
        self.assertEqual(new.cluster_name, "new-name.example.com")
        new.check_cluster_name("new-name.example.com")
        for ip in ("127.0.0.1", IP2, IP3):
            self.assertEqual(self.daemon(ip)["digest"], new.digest())
        # (the master writes its own ssconf files)
        for ip in (IP2, IP3):
            self.assertEqual(self.daemon(ip)["ssconf"]["cluster_name"],
                             "new-name.example.com")
        self.assertEqual(self.nodes.refused, [])
        self.assertIn("Renaming the cluster from cluster.example.com to"
                      " new-name.example.com", self.log)

    def test_same_name(self):
        for name in ("cluster.example.com", "Cluster.Example.COM."):
            before = self.cfg.to_dict()
            err = self.failureResultOf(self.rename(name),
                                       errors.OpPrereqError).value
            self.assertEqual(err.args, ("Neither the name nor the IP address"
                                        " of the cluster has changed",
                                        errors.ECODE_INVAL))
            self.assertEqual(self.cfg.to_dict(), before)
            self.assertEqual(self.nodes.calls, [])

    def test_bad_names(self):
        before = self.cfg.to_dict()
        for name, text in (("10.1.2.3", "not an IP address"),
                           ("a/b", "expected a host name"),
                           ("", "expected a host name")):
            err = self.failureResultOf(self.rename(name),
                                       errors.OpPrereqError).value
            self.assertIn("name: ", str(err))
            self.assertIn(text, str(err))
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertEqual(self.nodes.calls, [])
        self.assertIs(self.nodes.cert, self.old)


class MasterClientTests(CryptoTestCase):
    """The by-address client (joins) follows the master's certificate."""

    def test_address_rpc_follows(self):
        from ganeti.cmdlib import cluster_crypto
        client = replication.AddressRpc(None, self.old)
        self.ctx.address_rpc = client
        new = cluster_cert(self.mktemp())
        cluster_crypto._use_master_certificate(self.ctx, new, [self.old])
        self.assertIs(client.cert, new)
        self.assertIs(replication.cluster_certificate(self.ctx), new)

