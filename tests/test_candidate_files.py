"""A node that becomes master candidate gets the candidates' files (RAPI
certificate and users file, with the other distributed files) in the job
that promoted it: gnt-node modify -C yes, the promotion of a node coming
back from drained, and the pool refill after a candidate is removed or
demoted.  Node daemons are fakes; the master's files are real files under
a test root."""

import os

from tests.test_node_lus import (IP2, IP3, MASTER, NODE2, NODE3,
                                 MembershipTestCase)

RAPI_PEM = "/var/lib/ganeti/rapi.pem"
RAPI_USERS = "/var/lib/ganeti/rapi/users"


class PromotionTests(MembershipTestCase):

    def setUp(self):
        MembershipTestCase.setUp(self)
        self.cfg.set_cluster_params(candidate_pool_size=2)
        self.write(RAPI_PEM, b"-----RAPI CERT-----\n", 0o400)
        self.write(RAPI_USERS, b"jack {HA1}0123 write\n", 0o640)
        self.add()                    # candidate (the pool wants 2)
        self.add(NODE3, IP3)          # regular
        for ip in (IP2, IP3):
            for path in (RAPI_PEM, RAPI_USERS):
                self.nodes.daemons[ip]["files"].pop(path, None)

    def write(self, standard, data, mode):
        path = os.path.join(self.root, standard.lstrip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)

    def files(self, ip):
        return self.nodes.daemons[ip]["files"]

    def assert_has_rapi_files(self, ip):
        self.assertEqual(self.files(ip).get(RAPI_PEM),
                         b"-----RAPI CERT-----\n")
        self.assertEqual(self.files(ip).get(RAPI_USERS),
                         b"jack {HA1}0123 write\n")

    def modify(self, name, **params):
        op = {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": name}
        op.update(params)
        return self.ok(op)

    def test_modify_candidate_yes(self):
        self.cfg.set_cluster_params(candidate_pool_size=3)
        self.modify(NODE3, master_candidate=True)
        self.assertEqual(self.candidates(), [MASTER, NODE2, NODE3])
        self.assert_has_rapi_files(IP3)
        modes = {c[2][0]: c[2][2] for c in self.nodes.calls
                 if c[0] == NODE3 and c[1] == "upload_file"}
        self.assertEqual((modes[RAPI_PEM], modes[RAPI_USERS]),
                         (0o400, 0o640))
        self.assertIn("Copying the master candidate files to %s" % NODE3,
                      self.log)
        # node2, already a candidate, was not sent them again
        self.assertNotIn(RAPI_PEM, self.files(IP2))

    def test_no_copies_without_a_promotion(self):
        self.modify(NODE3, drained=True)
        self.assertNotIn(RAPI_PEM, self.files(IP3))
        self.assertFalse(any("master candidate files" in m
                             for m in self.log))

    def test_auto_promotion_when_a_candidate_is_demoted(self):
        self.modify(NODE2, master_candidate=False, auto_promote=True)
        self.assertEqual(self.candidates(), [MASTER, NODE3])
        self.assert_has_rapi_files(IP3)
        self.assertNotIn(RAPI_PEM, self.files(IP2))

    def test_auto_promotion_when_a_candidate_is_removed(self):
        self.ok({"OP_ID": "OP_NODE_REMOVE", "node_name": NODE2})
        self.assertEqual(self.candidates(), [MASTER, NODE3])
        self.assert_has_rapi_files(IP3)

    def test_promotion_back_from_drained(self):
        self.modify(NODE2, drained=True, auto_promote=True)
        self.assertEqual(self.candidates(), [MASTER, NODE3])
        self.assert_has_rapi_files(IP3)
        self.cfg.set_cluster_params(candidate_pool_size=3)
        self.modify(NODE2, drained=False)
        self.assertEqual(self.candidates(), [MASTER, NODE2, NODE3])
        self.assert_has_rapi_files(IP2)

    def test_failed_copy_is_a_warning_naming_node_and_file(self):
        self.cfg.set_cluster_params(candidate_pool_size=3)

        def rapi_fails(node, args):
            if args[0] == RAPI_PEM:
                return "disk full"
            return None
        self.nodes.fail["upload_file"] = rapi_fails
        self.modify(NODE3, master_candidate=True)
        # promoted anyway; the file that did not arrive is named
        self.assertEqual(self.candidates(), [MASTER, NODE2, NODE3])
        self.assertIn("WARNING: Copy of file %s to node %s failed: disk full"
                      % (RAPI_PEM, NODE3), self.log)
        self.assertNotIn(RAPI_PEM, self.files(IP3))
        self.assertEqual(self.files(IP3).get(RAPI_USERS),
                         b"jack {HA1}0123 write\n")

    def test_bigger_pool_promotes_and_ships(self):
        self.ok({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                 "candidate_pool_size": 5})
        self.assertEqual(self.candidates(), [MASTER, NODE2, NODE3])
        self.assertIn("Promoted node %s to master candidate" % NODE3,
                      self.log)
        self.assert_has_rapi_files(IP3)
        self.assertIn(self.node(NODE3).uuid,
                      self.cfg.cluster.candidate_certs)
        # a smaller pool demotes nobody
        self.ok({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                 "candidate_pool_size": 1})
        self.assertEqual(self.candidates(), [MASTER, NODE2, NODE3])
