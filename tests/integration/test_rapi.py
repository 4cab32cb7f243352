"""ganeti-rapi as a real daemon, driven by Ganeti's own clients.

A one-node virtual cluster on a random loopback address (node daemon,
master daemon) and two RAPI daemons in front of the master: HTTPS on 5080
with the cluster's RAPI certificate, and plain HTTP on 5081 (``--no-ssl``).
Ganeti 3.0's Python RAPI client (under Debian's python3) creates, stops,
starts and removes an instance and waits on its jobs; ``hbal -m`` reads the
cluster over both; forthcoming instances go through their whole life.
"""

import base64
import http.client
import json
import os
import socket
import ssl
import subprocess
import textwrap

from twisted.trial import unittest

from ganeti.server.rapi import rapi_pem_path

from tests import ganeti_peer
from tests.integration.daemons import (PROJECT, port_open, prepare_rapi,
                                       wait_for)
from tests.integration.test_instance import DaemonsTestCase

HBAL = "/usr/lib/ganeti/3.0/usr/bin/hbal"
TLS_PORT = 5080
PLAIN_PORT = 5081
USER, PASSWORD = "admin", "s3cret"
INSTANCE = "inst1.example.com"

CLIENT_SCRIPT = textwrap.dedent("""
    import json, sys
    from ganeti.rapi import client

    host, port, node, user, password = sys.argv[1:6]
    port = int(port)
    c = client.GanetiRapiClient(host, port=port, username=user,
                                password=password)
    anon = client.GanetiRapiClient(host, port=port)
    out = {}

    def wait(job):
        # WaitForJobChange until the job is final (RAPI's long poll), then
        # WaitForJobCompletion (polls GET /2/jobs/ID)
        prev = None
        while True:
            change = c.WaitForJobChange(job, ["status"], prev, None)
            if change is not None:
                prev = change["job_info"]
                if prev[0] in ("success", "error", "canceled"):
                    break
        ok = c.WaitForJobCompletion(job, period=0.2, retries=600)
        status = c.GetJobStatus(job)
        return {"ok": ok, "status": status["status"],
                "opresult": status["opresult"], "summary": status["summary"],
                "log": [e[3] for ops in status["oplog"] for e in ops]}

    out["version"] = c.GetVersion()
    out["features"] = sorted(c.GetFeatures())
    out["info_name"] = c.GetInfo()["name"]
    try:
        anon.AddClusterTags(["x"])
    except client.GanetiApiError as err:
        out["anon_write"] = [err.code, str(err)]
    job = c.CreateInstance("create", "%INSTANCE%", "file", [{"size": 1024}],
                           [{}], os="busybox+default", pnode=node,
                           beparams={"memory": 128}, name_check=False,
                           ip_check=False)
    out["create_job_type"] = type(job).__name__
    out["create"] = wait(job)
    inst = c.GetInstance("%INSTANCE%")
    out["after_create"] = [inst["admin_state"], inst["status"],
                           inst["oper_state"], inst["disk.sizes"]]
    out["shutdown"] = wait(c.ShutdownInstance("%INSTANCE%", timeout=10))
    inst = c.GetInstance("%INSTANCE%")
    out["after_shutdown"] = [inst["admin_state"], inst["status"]]
    out["startup"] = wait(c.StartupInstance("%INSTANCE%"))
    inst = c.GetInstance("%INSTANCE%")
    out["after_startup"] = [inst["admin_state"], inst["status"]]
    out["instances"] = c.GetInstances()
    out["remove"] = wait(c.DeleteInstance("%INSTANCE%"))
    out["instances_after"] = c.GetInstances()
    try:
        c.GetInstance("%INSTANCE%")
    except client.GanetiApiError as err:
        out["gone"] = [err.code, str(err)]
    out["jobs"] = len(c.GetJobs())
    print(json.dumps(out))
""").replace("%INSTANCE%", INSTANCE)


class RapiDaemonTestCase(DaemonsTestCase):
    """The cluster of DaemonsTestCase plus two RAPI daemons."""

    def setUp(self):
        DaemonsTestCase.setUp(self)
        node = self.vc.master
        prepare_rapi(self.vc, ["%s %s write" % (USER, PASSWORD),
                               "reader {cleartext}rpw read"])
        self.tls = self.vc.start("rapi-tls", self.vc.twistd_command(
            "ganeti-rapi", node, "--port", str(TLS_PORT)))
        self.plain = self.vc.start("rapi-plain", self.vc.twistd_command(
            "ganeti-rapi", node, "--port", str(PLAIN_PORT), "--no-ssl"))
        for proc, port in ((self.tls, TLS_PORT), (self.plain, PLAIN_PORT)):
            wait_for("RAPI on %d" % port, lambda: self.alive(proc) and
                     port_open(node.ip, port))

    def http(self, method, path, body=None, tls=False, user=None):
        node = self.vc.master
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            conn = http.client.HTTPSConnection(node.ip, TLS_PORT,
                                               context=ctx, timeout=30)
        else:
            conn = http.client.HTTPConnection(node.ip, PLAIN_PORT,
                                              timeout=30)
        headers = {"Content-Type": "application/json"}
        if user:
            headers["Authorization"] = "Basic " + base64.b64encode(
                ("%s:%s" % user).encode()).decode()
        data = json.dumps(body) if body is not None else None
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        return resp, json.loads(raw) if raw else None

    def wait_job(self, job):
        wait_for("job %s" % job, lambda: self.http("GET", "/2/jobs/%s" % job)
                 [1]["status"] in ("success", "error", "canceled"),
                 timeout=120)
        return self.http("GET", "/2/jobs/%s" % job)[1]


class DaemonTests(RapiDaemonTestCase):

    def test_refuses_to_start_without_certificate(self):
        node = self.vc.master
        os.unlink(rapi_pem_path(node.paths))
        proc = subprocess.run(self.vc.twistd_command(
            "ganeti-rapi", node, "--port", "5082"), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=60,
            env=dict(os.environ, PYTHONPATH=PROJECT))
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn(b"rapi.pem does not exist", proc.stdout)

    def test_https_http_and_connection_close(self):
        resp, value = self.http("GET", "/version", tls=True)
        self.assertEqual((resp.status, value), (200, 2))
        self.assertEqual(resp.getheader("Connection"), "close")
        self.assertEqual(resp.getheader("Server"), "Ganeti 3.0.2")
        resp, value = self.http("GET", "/2/info")
        self.assertEqual(value["master"], self.vc.master.name)
        # plain HTTP to the TLS port fails; TLS to the plain one too
        with socket.create_connection((self.vc.master.ip, TLS_PORT)) as s:
            s.settimeout(10)
            s.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertNotIn(b"200 OK", s.recv(4096))
        resp, value = self.http("PUT", "/2/tags?tag=t1", tls=True)
        self.assertEqual(resp.status, 401)
        resp, value = self.http("PUT", "/2/tags?tag=t1", tls=True,
                                user=("reader", "rpw"))
        self.assertEqual(resp.status, 403)
        resp, job = self.http("PUT", "/2/tags?tag=t1", tls=True,
                              user=(USER, PASSWORD))
        self.assertEqual(resp.status, 200, job)
        self.assertEqual(self.wait_job(job)["status"], "success")
        self.assertEqual(self.http("GET", "/2/tags")[1], ["t1"])
        # the master says which opcodes exist: one nobody implemented
        # yet gets a 501 (whatever it is on this tree), real ones do not
        ops = set(self.client.call("QueryImplementedOpcodes"))
        self.assertIn("OP_TAGS_SET", ops)
        self.assertIn("OP_NODE_POWERCYCLE", ops)
        if "OP_NETWORK_ADD" not in ops:
            resp, value = self.http("POST", "/2/networks",
                                    body={"name": "net1",
                                          "network": "10.0.0.0/24"},
                                    user=(USER, PASSWORD))
            self.assertEqual(resp.status, 501, value)
            self.assertIn("OP_NETWORK_ADD", value["message"])

    def test_answers_match_the_openapi_document(self):
        """The real daemons' answers (live data from the node daemon, a
        job that ran) have the shapes /2/openapi.json documents."""
        from tests import openapi_check
        resp, doc = self.http("GET", "/2/openapi.json")
        self.assertEqual(resp.status, 200)
        openapi_check.validate_document(doc)
        checker = openapi_check.Checker(doc)
        resp, job = self.http("PUT", "/2/tags?tag=t3",
                              user=(USER, PASSWORD))
        self.assertEqual(resp.status, 200, job)
        self.wait_job(job)
        for path in ("/2/info", "/2/nodes?bulk=1", "/2/nodes",
                     "/2/groups?bulk=1", "/2/instances?bulk=1",
                     "/2/jobs/%s" % job, "/2/jobs?bulk=1", "/2/tags",
                     "/2/features", "/2/query/node?fields=name,mfree,ctotal",
                     "/2/nodes/%s" % self.vc.master.name):
            resp, value = self.http("GET", path, user=(USER, PASSWORD))
            self.assertEqual(resp.status, 200, (path, value))
            self.assertEqual(checker.answer_errors("GET", path, 200, value),
                             [], path)
        # live values came from the node daemon
        resp, nodes = self.http("GET", "/2/nodes?bulk=1")
        self.assertIsInstance(nodes[0]["mtotal"], int)

    def test_users_file_reloaded(self):
        resp, _ = self.http("PUT", "/2/tags?tag=t2", user=("late", "pw"))
        self.assertEqual(resp.status, 401)
        with open(self.vc.master.paths.rapi_users_file, "a") as f:
            f.write("late pw write\n")
        resp, job = self.http("PUT", "/2/tags?tag=t2", user=("late", "pw"))
        self.assertEqual(resp.status, 200, job)


class GanetiRapiClientTests(RapiDaemonTestCase):

    def setUp(self):
        ganeti_peer.skip_unless_available()
        RapiDaemonTestCase.setUp(self)

    def test_instance_life_cycle(self):
        node = self.vc.master
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ganeti_peer.GANETI_LIB,
               "LANG": "C.UTF-8"}
        proc = subprocess.run(
            [ganeti_peer.GANETI_PYTHON, "-c", CLIENT_SCRIPT, node.ip,
             str(TLS_PORT), node.name, USER, PASSWORD], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode())
        out = json.loads(proc.stdout.decode())
        self.assertEqual(out["version"], 2)
        self.assertIn("instance-create-reqv1", out["features"])
        self.assertEqual(out["info_name"], self.vc.cluster_name)
        self.assertEqual(out["anon_write"][0], 401)
        self.assertIn("401 Unauthorized", out["anon_write"][1])
        self.assertEqual(out["create_job_type"], "int")
        for step in ("create", "shutdown", "startup", "remove"):
            self.assertEqual(out[step]["status"], "success",
                             (step, out[step]))
            self.assertTrue(out[step]["ok"], step)
        self.assertEqual(out["create"]["opresult"], [[node.name]])
        self.assertEqual(out["create"]["summary"],
                         ["INSTANCE_CREATE(%s)" % INSTANCE])
        self.assertIn("* running the instance OS create scripts...",
                      out["create"]["log"])
        self.assertEqual(out["after_create"],
                         ["up", "running", True, [1024]])
        self.assertEqual(out["after_shutdown"], ["down", "ADMIN_down"])
        self.assertEqual(out["after_startup"], ["up", "running"])
        self.assertEqual(out["instances"], [INSTANCE])
        self.assertEqual(out["instances_after"], [])
        self.assertEqual(out["gone"][0], 404)
        self.assertGreaterEqual(out["jobs"], 4)


class HtoolsTests(RapiDaemonTestCase):

    def setUp(self):
        if not os.access(HBAL, os.X_OK):
            raise unittest.SkipTest("%s is missing (apt-get install"
                                    " ganeti-htools-3.0)" % HBAL)
        RapiDaemonTestCase.setUp(self)
        self.run_job(self.create_op())

    def hbal(self, target, tool=HBAL, *extra):
        proc = subprocess.run([tool, "-m", target] + list(extra or ["-p"]),
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=120,
                              env={"PATH": "/usr/bin:/bin",
                                   "LANG": "C.UTF-8"})
        out = proc.stdout.decode("utf-8", "replace")
        self.assertEqual(proc.returncode, 0, out)
        return out

    def test_hbal_plain_and_https(self):
        ip = self.vc.master.ip
        for target in ("%s:%d" % (ip, PLAIN_PORT),
                       "https://%s:%d" % (ip, TLS_PORT)):
            out = self.hbal(target)
            self.assertIn("Loaded 1 nodes, 1 instances", out)
            self.assertRegex(out, r"Initial score: \d+\.\d+")
            self.assertIn(self.vc.master.name, out)

    def test_hspace_and_hscan(self):
        bindir = os.path.dirname(HBAL)
        target = "%s:%d" % (self.vc.master.ip, PLAIN_PORT)
        out = self.hbal(target, os.path.join(bindir, "hspace"),
                        "--machine-readable")
        self.assertIn("HTS_OK=1", out)
        self.assertIn("HTS_INI_INST_CNT=1", out)
        scan_dir = os.path.join(self.base, "scan")
        os.makedirs(scan_dir)
        proc = subprocess.run([os.path.join(bindir, "hscan"), "-d", scan_dir,
                               target], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout)
        (data,) = os.listdir(scan_dir)
        with open(os.path.join(scan_dir, data)) as f:
            text = f.read()
        self.assertIn(INSTANCE, text)
        self.assertIn(self.vc.master.name, text)


class ForthcomingTests(RapiDaemonTestCase):

    def test_reserve_modify_name_create_remove(self):
        node = self.vc.master.name
        auth = (USER, PASSWORD)
        before = self.http("PUT", "/2/query/node", {
            "fields": ["alloc.mem", "forthcoming_cnt"]}, user=auth)[1]
        self.assertEqual(before["data"], [[[0, 0], [0, 0]]])
        # every parameter optional; the job's result is the new UUID
        resp, job = self.http("POST", "/2/instances", {
            "__version__": 1, "forthcoming": True, "pnode": node,
            "beparams": {"memory": 128}, "disk_template": "file",
            "disks": [{"size": 1024}], "hypervisor": "fake"}, user=auth)
        self.assertEqual(resp.status, 200, job)
        result = self.wait_job(job)
        self.assertEqual(result["status"], "success", result)
        uuid = result["opresult"][0]
        self.assertEqual(len(uuid), 36)
        # reserved: counted as used from now on
        after = self.http("PUT", "/2/query/node", {
            "fields": ["alloc.mem", "forthcoming_cnt"]}, user=auth)[1]
        self.assertEqual(after["data"], [[[0, 128], [0, 1]]])
        inst = self.http("GET", "/2/instances/%s" % uuid)[1]
        self.assertTrue(inst["forthcoming"])
        code, out = self.gnt_instance_list()
        self.assertEqual(code, 0, out)
        self.assertIn(uuid, out)
        for path, body in (("/2/instances/%s/modify" % uuid,
                            {"custom_beparams": {"vcpus": 1}}),
                           ("/2/instances/%s/rename" % uuid,
                            {"new_name": INSTANCE, "name_check": False,
                             "ip_check": False})):
            resp, job = self.http("PUT", path, body, user=auth)
            self.assertEqual(resp.status, 200, job)
            result = self.wait_job(job)
            self.assertEqual(result["status"], "success", (path, result))
        self.assertEqual(self.http("GET", "/2/instances/" + INSTANCE)[1]
                         ["uuid"], uuid)
        resp, job = self.http("POST", "/2/instances/%s/create" % INSTANCE,
                              {"os": "busybox+default", "nics": [{}]},
                              user=auth)
        self.assertEqual(resp.status, 200, job)
        result = self.wait_job(job)
        self.assertEqual(result["status"], "success", result)
        inst = self.http("GET", "/2/instances/" + INSTANCE)[1]
        self.assertEqual((inst["forthcoming"], inst["uuid"], inst["status"]),
                         (False, uuid, "running"))
        resp, job = self.http("DELETE", "/2/instances/" + INSTANCE,
                              user=auth)
        self.assertEqual(self.wait_job(job)["status"], "success")

    def test_reservation_with_a_lease(self):
        """A lease set and moved over RAPI; the master releases the
        reservation when it ends."""
        node = self.vc.master.name
        auth = (USER, PASSWORD)
        resp, job = self.http("POST", "/2/instances", {
            "__version__": 1, "forthcoming": True, "pnode": node,
            "beparams": {"memory": 128}, "disk_template": "file",
            "disks": [{"size": 1024}], "hypervisor": "fake",
            "lease_until": "+1d"}, user=auth)
        self.assertEqual(resp.status, 200, job)
        result = self.wait_job(job)
        self.assertEqual(result["status"], "success", result)
        uuid = result["opresult"][0]
        inst = self.http("GET", "/2/instances/%s" % uuid)[1]
        self.assertEqual(inst["lease_state"], "active")
        [row] = [i for i in self.http("GET", "/2/instances?bulk=1")[1]
                 if i["uuid"] == uuid]
        self.assertEqual(row["lease_until"], inst["lease_until"])
        # a bad value: 400 naming the field, no job
        resp, err = self.http("PUT", "/2/instances/%s/modify" % uuid,
                              {"lease_until": "someday"}, user=auth)
        self.assertEqual(resp.status, 400, err)
        self.assertIn("lease_until", err["message"])
        # shortened to seconds: released by the master
        resp, job = self.http("PUT", "/2/instances/%s/modify" % uuid,
                              {"lease_until": "+2s"}, user=auth)
        self.assertEqual(self.wait_job(job)["status"], "success")
        wait_for("the reservation released", lambda: uuid not in [
            i["uuid"] for i in self.http("GET", "/2/instances?bulk=1")[1]],
            timeout=60)
        alloc = self.http("PUT", "/2/query/node", {
            "fields": ["alloc.mem", "forthcoming_cnt"]}, user=auth)[1]
        self.assertEqual(alloc["data"], [[[0, 0], [0, 0]]])

    def gnt_instance_list(self):
        import sys
        node = self.vc.master
        proc = subprocess.run(
            [sys.executable, "-m", "ganeti.cli.gnt_instance", "--root",
             node.root, "list"], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=60,
            env=dict(os.environ, PYTHONPATH=PROJECT))
        return proc.returncode, proc.stdout.decode("utf-8", "replace")
