"""gnt-cluster renew-crypto and rename: options, confirmation, refusals and
what is sent to the master."""

import io
import os

from twisted.trial import unittest

from ganeti import errors
from ganeti.cli import base, gnt_cluster

from tests.test_cli_fakes import FakeClient, encoded, run
from tests.test_crypto import cluster_cert


def gnt(client, *argv, **kwargs):
    return run(gnt_cluster.commands, argv, client, **kwargs)


class Tty(io.StringIO):
    def isatty(self):
        return True


class RenewCryptoTests(unittest.TestCase):

    def test_every_part(self):
        client = FakeClient()
        base = self.mktemp()
        rapi = cluster_cert(base, "rapi.example.com")
        cds = os.path.join(base, "cds")
        with open(cds, "w") as f:
            f.write("domain-secret\n")
        code, out, err = gnt(client, "renew-crypto", "-f",
                             "--new-cluster-certificate",
                             "--rapi-certificate", rapi.path,
                             "--new-confd-hmac-key",
                             "--cluster-domain-secret", cds)
        self.assertEqual(code, 0, err)
        op = client.op()
        self.assertEqual(op["OP_ID"], "OP_CLUSTER_RENEW_CRYPTO")
        self.assertEqual((op["new_cluster_certificate"],
                          op["new_confd_hmac_key"], op["rapi_certificate"],
                          op["cluster_domain_secret"]),
                         (True, True, rapi.pem.decode(), "domain-secret\n"))
        self.assertNotIn("new_rapi_certificate", op)
        self.assertIn("Updating certificates now.", out)
        self.assertIn("All requested certificates and keys have been"
                      " replaced.", out)

    def test_new_node_certificates(self):
        client = FakeClient()
        code, out, _ = gnt(client, "renew-crypto", "-f",
                           "--new-node-certificates",
                           "--new-rapi-certificate",
                           "--new-cluster-domain-secret")
        self.assertEqual(code, 0)
        op = client.op()
        self.assertEqual((op["node_certificates"], op["new_rapi_certificate"],
                          op["new_cluster_domain_secret"]),
                         (True, True, True))
        self.assertIn("Nodes present the cluster certificate here:"
                      " --new-node-certificates renews it.", out)

    def test_confirmation(self):
        client = FakeClient()
        code, _, err = gnt(client, "renew-crypto", "--new-confd-hmac-key")
        self.assertEqual(code, base.EXIT_CONFIRMATION)
        self.assertIn("use --force to go ahead", err)
        self.assertEqual(client.jobs, {})
        code, out, err = gnt(client, "renew-crypto", "--new-confd-hmac-key",
                             stdin=Tty("n\n"))
        self.assertEqual(code, base.EXIT_CONFIRMATION)
        self.assertIn("Aborted.", err)
        self.assertEqual(client.jobs, {})
        code, out, _ = gnt(client, "renew-crypto", "--new-confd-hmac-key",
                           stdin=Tty("y\n"))
        self.assertEqual(code, 0)
        self.assertIn("daemons and instances keep running. Continue?", out)
        self.assertEqual(client.op()["new_confd_hmac_key"], True)

    def refused(self, text, *args):
        client = FakeClient()
        code, _, err = gnt(client, "renew-crypto", "-f", *args)
        self.assertEqual(code, 1, err)
        self.assertIn(text, err)
        self.assertEqual(client.jobs, {})

    def test_refusals(self):
        self.refused("Nothing to renew: give at least one of")
        self.refused("--new-spice-certificate: this cluster manager has no"
                     " SPICE consoles", "--new-spice-certificate")
        self.refused("--spice-certificate, --spice-ca-certificate: this"
                     " cluster manager has no SPICE consoles",
                     "--spice-certificate", "/x", "--spice-ca-certificate",
                     "/y")
        self.refused("--new-ssh-keys: this cluster manager keeps no SSH"
                     " keys", "--new-ssh-keys")
        self.refused("Only one of the --new-rapi-certificate and"
                     " --rapi-certificate options can be specified",
                     "--new-rapi-certificate", "--rapi-certificate", "/x")
        self.refused("Only one of the --new-cluster-domain-secret and"
                     " --cluster-domain-secret options",
                     "--new-cluster-domain-secret",
                     "--cluster-domain-secret", "/x")
        self.refused("invalid value for --rapi-certificate: cannot read"
                     " /nonexistent/rapi.pem", "--rapi-certificate",
                     "/nonexistent/rapi.pem")

    def test_master_refuses(self):
        client = FakeClient()
        client.errors["OP_CLUSTER_RENEW_CRYPTO"] = encoded(
            errors.OpPrereqError("rapi_certificate: no usable private key",
                                 errors.ECODE_INVAL))
        code, _, err = gnt(client, "renew-crypto", "-f",
                           "--new-rapi-certificate")
        self.assertEqual(code, 1)
        self.assertIn("rapi_certificate: no usable private key", err)


class RenameTests(unittest.TestCase):

    def test_rename(self):
        client = FakeClient()
        client.config_values["cluster_name"] = "cluster.example.com"
        client.results["OP_CLUSTER_RENAME"] = "new.example.com"
        code, out, err = gnt(client, "rename", "-f", "New.Example.com")
        self.assertEqual(code, 0, err)
        self.assertEqual(client.op()["name"], "new.example.com")
        self.assertIn("Cluster renamed from 'cluster.example.com' to"
                      " 'new.example.com'", out)

    def test_confirmation(self):
        client = FakeClient()
        client.config_values["cluster_name"] = "cluster.example.com"
        code, out, err = gnt(client, "rename", "new.example.com",
                             stdin=Tty("no\n"))
        self.assertIn("This will rename the cluster from"
                      " 'cluster.example.com' to 'new.example.com'", out)
        self.assertIn("Aborted.", err)
        self.assertEqual(client.jobs, {})

    def test_bad_name(self):
        client = FakeClient()
        code, _, err = gnt(client, "rename", "-f", "a/b")
        self.assertEqual(code, 1)
        self.assertIn("invalid value for NEW_NAME: name: expected a host"
                      " name", err)
        self.assertEqual(client.jobs, {})

    def test_same_name_refused_by_the_master(self):
        client = FakeClient()
        client.config_values["cluster_name"] = "cluster.example.com"
        client.errors["OP_CLUSTER_RENAME"] = encoded(errors.OpPrereqError(
            "Neither the name nor the IP address of the cluster has changed",
            errors.ECODE_INVAL))
        code, _, err = gnt(client, "rename", "-f", "cluster.example.com")
        self.assertEqual(code, 1)
        self.assertIn("Neither the name nor the IP address of the cluster has"
                      " changed", err)
