"""Moving an instance between two clusters with Ganeti 3.0's own
``move-instance`` tool, through both clusters' remote API: two 1-node
virtual clusters (each with its own 127.x addresses and root), the same
cluster domain secret (set with ``gnt-cluster renew-crypto
--cluster-domain-secret``), a fake-hypervisor busybox instance with a file
disk of known content.

* the instance exists on the destination, its disk byte for byte the
  source's, running as it did; ``move-instance`` removes the source;
* the same steps with Ganeti's RAPI client (PrepareExport remote,
  CreateInstance remote-import, ExportInstance remote), keeping the source
  instance running and compressing with gzip: both instances exist, with
  the same data;
* with another domain secret on the destination the move fails with a
  clear error there and nothing is created; the source instance stays.
"""

import copy
import json
import os
import subprocess
import textwrap

from twisted.trial import unittest

from ganeti import constants
from ganeti import luxi
from ganeti.dev.vcluster import VirtualCluster, port_open

from tests import ganeti_peer
from tests.integration.daemons import (ETC_OS, FINAL, GntCommandsMixin,
                                       random_ips, short_tmpdir, wait_for)
from tests.test_noded import kill_fake_instances

NODED_ARGS = ("--os-search-path", ETC_OS)
INSTANCE = "vm1.example.com"
USER, PASSWORD = "mover", "m0ve-it"
SECRET = "5e1f0a4b2c3d4e5f60718293a4b5c6d7e8f90a1b"
RAPI_PORT = 5080


#: The same three steps as move-instance, with Ganeti's RAPI client, but
#: keeping the source instance (remove_instance false), running during
#: the export (shutdown false), with gzip compression.
KEEP_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from ganeti.rapi import client

    (src, dst, ca_src, ca_dst, user, password, instance, dest_name,
     pnode) = sys.argv[1:10]

    def rapi(host, ca):
        return client.GanetiRapiClient(
            host, username=user, password=password,
            curl_config_fn=client.GenericCurlConfig(cafile=ca))

    def wait(cl, job):
        cl.WaitForJobCompletion(job, period=0.2, retries=1500)
        st = cl.GetJobStatus(job)
        return st["status"], st["opresult"]

    s, d = rapi(src, ca_src), rapi(dst, ca_dst)
    status, result = wait(s, s.PrepareExport(instance, "remote"))
    assert status == "success", result
    exp = result[0]
    info = s.GetInstance(instance)
    job = d.CreateInstance(
        "remote-import", dest_name, "file",
        [{"size": size} for size in info["disk.sizes"]], [{}],
        os="busybox+default", pnode=pnode, ip_check=False,
        name_check=False, source_handshake=exp["handshake"],
        source_x509_ca=exp["x509_ca"], source_instance_name=instance,
        compress="gzip")
    serial, impinfo = -1, None
    for _ in range(600):
        change = d.WaitForJobChange(job, ["status"], None, serial)
        for (serial, _, kind, msg) in change["log_entries"] or []:
            if kind == "remote-import":
                impinfo = msg
        if impinfo or change["job_info"][0] in ("error", "success"):
            break
    assert impinfo, d.GetJobStatus(job)
    exported = wait(s, s.ExportInstance(
        instance, "remote", impinfo["disks"], shutdown=False,
        remove_instance=False, x509_key_name=exp["x509_key_name"],
        destination_x509_ca=impinfo["x509_ca"], compress="gzip"))
    print(json.dumps({"export": exported, "import": wait(d, job)}))
""")


class RemoteMoveTests(GntCommandsMixin, unittest.TestCase):

    timeout = 900
    GNT_TIMEOUT = 300

    def setUp(self):
        ganeti_peer.skip_unless_available()
        self.base = short_tmpdir(self, "gnt-rm-")
        ips = random_ips(4)
        self.src = self.make_cluster("a", ips[0])
        self.dst = self.make_cluster("b", ips[2])
        self.secret_file = os.path.join(self.base, "domain-secret")
        with open(self.secret_file, "w") as f:
            f.write(SECRET + "\n")
        for vc in (self.src, self.dst):
            self.set_secret(vc, self.secret_file)
        self.create_instance()

    def make_cluster(self, letter, first):
        domain = "%s.example.com" % letter
        vc = VirtualCluster(os.path.join(self.base, letter), node_count=1,
                            cluster_name=domain, domain=domain,
                            first_address=first)
        self.addCleanup(vc.stop_all)
        for node in vc.nodes:
            self.addCleanup(kill_fake_instances, node.root)
        store = vc.create_master(hypervisors=(constants.HT_FAKE,))
        # small disks are allowed (move-instance creates without
        # ignore_ipolicy)
        policy = copy.deepcopy(store.cluster.ipolicy)
        for minmax in policy[constants.ISPECS_MINMAX]:
            minmax["min"][constants.ISPEC_DISK_SIZE] = 1
        store.set_cluster_params(ipolicy=policy)
        users = vc.master.paths.rapi_users_file
        os.makedirs(os.path.dirname(users), exist_ok=True)
        with open(users, "w") as f:
            f.write("%s %s write\n" % (USER, PASSWORD))
        vc.start_managed_master(noded_args=NODED_ARGS)
        wait_for("the remote API of %s" % domain,
                 lambda: port_open(vc.master.ip, RAPI_PORT), timeout=120)
        # the tool checks each side's RAPI certificate against a CA file
        with open(os.path.join(vc.master.paths.data_dir, "rapi.pem")) as f:
            pem = f.read()
        vc.ca_file = os.path.join(self.base, "%s-rapi-ca.pem" % letter)
        with open(vc.ca_file, "w") as f:
            f.write(pem[pem.index("-----BEGIN CERTIFICATE-----"):])
        return vc

    def set_secret(self, vc, path):
        self.gnt_root = vc.master.root
        self.ok("gnt-cluster", "renew-crypto", "--cluster-domain-secret",
                path, "-f")

    def run_job(self, vc, op):
        with luxi.BlockingClient(vc.master.paths.master_socket, 60) as c:
            job = c.submit_job([op])
            wait_for("job %s" % job, lambda: c.query_jobs(
                [job], ["status"])[0][0] in FINAL, timeout=240)
            status, result = c.query_jobs([job], ["status", "opresult"])[0]
        self.assertEqual(status, "success", result)
        return result[0]

    def instances(self, vc):
        result = self.run_job(vc, {"OP_ID": "OP_INSTANCE_QUERY_DATA",
                                   "instances": [], "static": False})
        return result

    def create_instance(self):
        self.run_job(self.src, {
            "OP_ID": "OP_INSTANCE_CREATE", "instance_name": INSTANCE,
            "mode": "create", "disk_template": "file",
            "disks": [{"size": 8}], "nics": [{}],
            "os_type": "busybox+default", "pnode": self.src.master.name,
            "beparams": {"memory": 128}, "ip_check": False,
            "name_check": False, "ignore_ipolicy": True})
        info = self.instances(self.src)[INSTANCE]
        self.src_disk = info["disks"][0]["logical_id"][1]
        # data beyond what the OS wrote, as a user would have
        with open(self.src_disk, "r+b") as f:
            f.seek(3 * 1024 * 1024)
            f.write(os.urandom(200 * 1024))
        with open(self.src_disk, "rb") as f:
            self.original = f.read()
        self.assertTrue(self.original.startswith(b"GANETI-BUSYBOX-OS v1"))

    def move_instance(self, *extra):
        """Ganeti's move-instance from the source's master to the
        destination's; (exit code, output)."""
        password = os.path.join(self.base, "password")
        with open(password, "w") as f:
            f.write(PASSWORD + "\n")
        args = ["--src-ca-file", self.src.ca_file,
                "--dest-ca-file", self.dst.ca_file,
                "--src-username", USER, "--src-password-file", password,
                "--dest-username", USER, "--dest-password-file", password,
                "--dest-primary-node", self.dst.master.name,
                "--dest-disk-template", "file", "-v",
                # without it the tool fails comparing None with 0
                "--opportunistic-tries", "0"] + list(extra) + [
                self.src.master.ip, self.dst.master.ip, INSTANCE]
        env = {"PATH": "/usr/bin:/bin",
               "PYTHONPATH": ganeti_peer.GANETI_LIB, "LANG": "C.UTF-8"}
        proc = subprocess.run(
            [ganeti_peer.GANETI_PYTHON,
             os.path.join(ganeti_peer.GANETI_LIB, "move-instance")] + args,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            timeout=600)
        return proc.returncode, proc.stdout.decode("utf-8", "replace")

    def test_move_instance(self):
        code, out = self.move_instance()
        self.assertEqual(code, 0, out)
        moved = self.instances(self.dst)
        self.assertIn(INSTANCE, moved, out)
        info = moved[INSTANCE]
        self.assertEqual(info["pnode"], self.dst.master.name)
        self.assertEqual(info["os"], "busybox+default")
        self.assertEqual(info["run_state"], "up")
        path = info["disks"][0]["logical_id"][1]
        self.assertTrue(path.startswith(self.dst.master.root), path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), self.original)
        # move-instance asks the source to remove the instance
        self.assertNotIn(INSTANCE, self.instances(self.src))
        self.assertFalse(os.path.exists(self.src_disk))

    def test_move_keeping_the_source(self):
        env = {"PATH": "/usr/bin:/bin",
               "PYTHONPATH": ganeti_peer.GANETI_LIB, "LANG": "C.UTF-8"}
        proc = subprocess.run(
            [ganeti_peer.GANETI_PYTHON, "-c", KEEP_SCRIPT,
             self.src.master.ip, self.dst.master.ip, self.src.ca_file,
             self.dst.ca_file, USER, PASSWORD, INSTANCE,
             "copy1.example.com", self.dst.master.name],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode())
        out = json.loads(proc.stdout.decode())
        self.assertEqual(out["export"], ["success", [[True, [True]]]])
        self.assertEqual(out["import"][0], "success", out)
        copy = self.instances(self.dst)["copy1.example.com"]
        with open(copy["disks"][0]["logical_id"][1], "rb") as f:
            self.assertEqual(f.read(), self.original)
        # the source instance stays, and kept running
        self.assertEqual(self.instances(self.src)[INSTANCE]["run_state"],
                         "up")

    def test_another_domain_secret_is_refused(self):
        other = os.path.join(self.base, "other-secret")
        with open(other, "w") as f:
            f.write("0" * 40 + "\n")
        self.set_secret(self.dst, other)
        code, out = self.move_instance()
        self.assertNotEqual(code, 0, out)
        self.assertIn("source_handshake: invalid: the HMAC does not match:"
                      " the two clusters do not share the same cluster"
                      " domain secret", out)
        self.assertEqual(self.instances(self.dst), {})
        # the source keeps its instance, and its data
        self.assertIn(INSTANCE, self.instances(self.src))
        with open(self.src_disk, "rb") as f:
            self.assertEqual(f.read(), self.original)

