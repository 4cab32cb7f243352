"""Promoting a node to master candidate ships the candidates' files.

Two nodes (a noded each and masterd, random loopback addresses); the
second is made a regular node, loses the RAPI files, and is promoted again
with ``gnt-node modify -C yes``: it then holds the master's RAPI
certificate and users file byte for byte.  ``gnt-cluster verify`` is
silent about them, and names the file once the node's copy differs.
"""

import os

from tests.integration.test_migration import ClusterTestCase

RAPI_PEM = "var/lib/ganeti/rapi.pem"
RAPI_USERS = "var/lib/ganeti/rapi/users"


class CandidateFilesTests(ClusterTestCase):

    NODES = 2

    def path(self, idx, rel):
        return os.path.join(self.node(idx).root, rel)

    def read(self, idx, rel):
        with open(self.path(idx, rel), "rb") as f:
            return f.read()

    def candidate(self, idx):
        out = self.ok("gnt-node", "list", "--no-headers", "-o",
                      "master_candidate", self.node(idx).name)
        return out.strip() == "Y"

    def test_promotion_ships_the_rapi_files(self):
        node2 = self.node(1).name
        users = self.path(0, RAPI_USERS)
        os.makedirs(os.path.dirname(users), exist_ok=True)
        with open(users, "w") as f:
            f.write("jack {HA1}0123456789abcdef0123456789abcdef write\n")
        self.ok("gnt-cluster", "modify", "--candidate-pool-size", "1")
        if self.candidate(1):
            self.ok("gnt-node", "modify", "-C", "no", node2)
        self.assertFalse(self.candidate(1))
        for rel in (RAPI_PEM, RAPI_USERS):
            if os.path.exists(self.path(1, rel)):
                os.unlink(self.path(1, rel))

        out = self.ok("gnt-node", "modify", "-C", "yes", node2)
        self.assertIn("master_candidate -> True", out)
        self.assertTrue(self.candidate(1))
        for rel in (RAPI_PEM, RAPI_USERS):
            self.assertEqual(self.read(1, rel), self.read(0, rel), rel)

        code, out = self.gnt("gnt-cluster", "verify")
        self.assertNotIn("rapi", out)
        with open(self.path(1, RAPI_USERS), "a") as f:
            f.write("mallory secret write\n")
        os.unlink(self.path(1, RAPI_PEM))
        code, out = self.gnt("gnt-cluster", "verify")
        self.assertNotEqual(code, 0, out)
        self.assertIn("node %s: file /var/lib/ganeti/rapi/users differs from"
                      " the master's" % node2, out)
        self.assertIn("node %s: file /var/lib/ganeti/rapi.pem is missing"
                      % node2, out)
        # redist-conf repairs it
        self.ok("gnt-cluster", "redist-conf")
        for rel in (RAPI_PEM, RAPI_USERS):
            self.assertEqual(self.read(1, rel), self.read(0, rel), rel)
        code, out = self.gnt("gnt-cluster", "verify")
        self.assertNotIn("rapi", out)
