"""The node daemon's procedures of the cluster merger: merge_info, the
switch to another cluster with its backup and restart in place, its
revert, and forgetting the backup."""

import base64
import json
import os
import signal
import subprocess
import sys
import zlib

from twisted.internet import task
from twisted.trial import unittest

from ganeti import constants
from ganeti import crypto
from ganeti import daemon_util
from ganeti import errors
from ganeti.backend import files
from ganeti.pathutils import Paths
from ganeti.server.noded import merge as noded_merge
from ganeti.server.noded import restart as noded_restart
from ganeti.server.noded import procedure as proc_mod
from ganeti.server.noded.procedures import NodeProcedures

from tests.places import snapshot
from tests.test_crypto import cluster_cert

OLD = "b.example.com"
NEW = "a.example.com"
NODE = "node2.b.example.com"


def job_file(queue_dir, job_id, status):
    data = {"id": job_id, "ops": [{
        "input": {"OP_ID": "OP_TEST_DELAY", "duration": 0},
        "status": status, "result": None, "log": [],
        "start_timestamp": None, "exec_timestamp": None,
        "end_timestamp": None, "priority": 0}],
        "received_timestamp": None, "start_timestamp": None,
        "end_timestamp": None}
    with open(os.path.join(queue_dir, "job-%d" % job_id), "w") as f:
        json.dump(data, f)


class MergeProcedureTests(unittest.TestCase):

    def setUp(self):
        base = os.path.abspath(self.mktemp())
        self.root = os.path.join(base, "node")
        self.paths = Paths(self.root)
        self.paths.ensure_dirs()
        certs = os.path.join(base, "certs")
        self.old_cert = cluster_cert(certs, OLD)
        self.new_cert = cluster_cert(certs, NEW)
        # a node of the cluster it leaves: certificate, key, ssconf,
        # config.data, the remote API's certificate, a job queue
        pem = crypto.server_pem_path(self.paths)
        with open(pem, "wb") as f:
            f.write(self.old_cert.key_pem + self.old_cert.cert_pem)
        os.chmod(pem, 0o400)
        with open(self.paths.hmac_key_file, "w") as f:
            f.write("old-key\n")
        files.write_ssconf_files(self.paths, {
            "cluster_name": OLD, "master_node": "node1.b.example.com",
            "node_list": ["node1.b.example.com", NODE]})
        with open(self.paths.config_file, "wb") as f:
            f.write(b'{"serial_no": 7}')
        with open(os.path.join(self.paths.data_dir, "rapi.pem"), "w") as f:
            f.write("old rapi certificate")
        job_file(self.paths.queue_dir, 3, "success")
        # its master role held (its master daemons were stopped)
        self.hold = os.path.join(self.paths.run_dir, "master-role.held")
        with open(self.hold, "w") as f:
            json.dump({"master": NODE, "reason": "stopped"}, f)
        self.clock = task.Clock()
        self.procs = NodeProcedures(self.clock, self.paths, None, None, None,
                                    run_blocking=proc_mod.INLINE)
        self.restarts = []
        self.procs.restart_in_place = lambda: self.restarts.append(True)
        self.before = snapshot(self.paths.data_dir)

    def call(self, name, *args, **kwargs):
        return self.successResultOf(self.procs.call(name, kwargs or
                                                    list(args)))

    def refused(self, name, *args, **kwargs):
        return self.failureResultOf(self.procs.call(name, kwargs or
                                                    list(args))).value

    def switch_args(self, **changes):
        args = {"cluster_pem": (self.new_cert.key_pem +
                                self.new_cert.cert_pem).decode("ascii"),
                "hmac_key": "new-key\n", "cluster_name": NEW,
                "node_name": NODE,
                "ssconf": {"cluster_name": NEW,
                           "master_node": "node1.a.example.com",
                           "node_list": ["node1.a.example.com", NODE]},
                "config": None, "from_cluster": OLD}
        args.update(changes)
        return args

    def assertUnchanged(self):
        self.assertEqual(snapshot(self.paths.data_dir), self.before)
        self.assertFalse(os.path.exists(noded_merge.backup_path(self.paths)))
        self.assertEqual(self.restarts, [])
        self.clock.advance(10)
        self.assertEqual(self.restarts, [])

    def served_digest(self):
        return crypto.load_cluster_certificate(
            crypto.server_pem_path(self.paths)).digest()

    # --- merge_info -------------------------------------------------------

    def test_info_of_a_node(self):
        info = self.call("merge_info")
        self.assertEqual(info["cluster_name"], OLD)
        self.assertEqual(info["master_node"], "node1.b.example.com")
        self.assertEqual((info["protocol_version"], info["config_version"],
                          info["release_version"]),
                         (constants.PROTOCOL_VERSION,
                          constants.CONFIG_VERSION,
                          constants.RELEASE_VERSION))
        self.assertFalse(info["masterd_running"])
        self.assertFalse(info["backup"])
        self.assertIsNone(info["config"])

    def test_info_with_the_configuration_and_unfinished_jobs(self):
        job_file(self.paths.queue_dir, 4, "running")
        job_file(self.paths.queue_dir, 5, "queued")
        with open(os.path.join(self.paths.queue_dir, "job-6"), "w") as f:
            f.write("{broken")
        info = self.call("merge_info", True)
        encoding, text = info["config"]
        self.assertEqual(encoding, "zlib+base64")
        self.assertEqual(zlib.decompress(base64.b64decode(text)),
                         b'{"serial_no": 7}')
        # a job file that cannot be read counts as unfinished
        self.assertEqual(info["unfinished_jobs"], [4, 5, 6])

    def test_info_with_configuration_of_a_node_without_one(self):
        os.unlink(self.paths.config_file)
        err = self.refused("merge_info", True)
        self.assertIsInstance(err, errors.OpPrereqError)
        self.assertIn("not a master candidate", str(err))

    def test_info_sees_a_running_master_daemon(self):
        proc = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)",
             daemon_util.MASTERD, "--root", self.root])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.send_signal, signal.SIGKILL)
        with open(daemon_util.pidfile_path(self.paths, daemon_util.MASTERD),
                  "w") as f:
            f.write("%d\n" % proc.pid)
        self.assertTrue(self.call("merge_info")["masterd_running"])
        err = self.refused("merge_switch_cluster", **self.switch_args())
        self.assertIn("the master daemon runs on this node", str(err))

    # --- switching -----------------------------------------------------------

    def test_switch_keeps_the_old_files_and_restarts(self):
        result = self.call("merge_switch_cluster", **self.switch_args())
        backup = noded_merge.backup_path(self.paths)
        self.assertEqual(result["backup"], backup)
        self.assertTrue(result["restart"])
        self.assertIn("var/lib/ganeti/server.pem", result["moved"])
        self.assertIn("var/lib/ganeti/queue", result["moved"])
        self.assertIn("var/run/ganeti/master-role.held", result["moved"])
        self.assertFalse(os.path.exists(self.hold))
        # the new cluster's files
        self.assertEqual(self.served_digest(), self.new_cert.digest())
        with open(self.paths.hmac_key_file) as f:
            self.assertEqual(f.read(), "new-key\n")
        self.assertEqual(files.read_ssconf_value(self.paths, "cluster_name"),
                         NEW)
        # not a candidate there: no config.data; and no old ancillary file
        self.assertFalse(os.path.exists(self.paths.config_file))
        self.assertFalse(os.path.exists(os.path.join(self.paths.data_dir,
                                                     "rapi.pem")))
        self.assertEqual(os.listdir(self.paths.queue_dir), [])
        # the old ones in the backup
        with open(os.path.join(backup, "var/lib/ganeti/config.data"),
                  "rb") as f:
            self.assertEqual(f.read(), b'{"serial_no": 7}')
        self.assertEqual(os.listdir(os.path.join(
            backup, "var/lib/ganeti/queue")), ["job-3"])
        with open(os.path.join(backup, noded_merge.MANIFEST)) as f:
            manifest = json.load(f)
        self.assertEqual((manifest["from_cluster"], manifest["to_cluster"]),
                         (OLD, NEW))
        self.assertEqual(sorted(manifest["files"]), sorted(result["moved"]))
        self.assertEqual(self.call("merge_info")["backup"], True)
        # the restart comes after the answer
        self.assertEqual(self.restarts, [])
        self.clock.advance(noded_merge.RESTART_DELAY)
        self.assertEqual(self.restarts, [True])

    def test_switch_of_a_master_candidate_writes_config(self):
        config = ["zlib+base64", base64.b64encode(zlib.compress(
            b'{"serial_no": 12}')).decode("ascii")]
        self.call("merge_switch_cluster", **self.switch_args(config=config))
        with open(self.paths.config_file, "rb") as f:
            self.assertEqual(f.read(), b'{"serial_no": 12}')

    def test_revert_brings_back_every_file(self):
        self.call("merge_switch_cluster", **self.switch_args())
        self.clock.advance(1)
        result = self.call("merge_revert_switch")
        self.assertEqual(result["cluster_name"], OLD)
        self.assertEqual(snapshot(self.paths.data_dir), self.before)
        self.assertFalse(os.path.exists(noded_merge.backup_path(self.paths)))
        self.assertEqual(self.served_digest(), self.old_cert.digest())
        with open(self.hold) as f:
            self.assertEqual(json.load(f)["master"], NODE)
        self.clock.advance(noded_merge.RESTART_DELAY)
        self.assertEqual(self.restarts, [True, True])

    def test_forget_removes_the_backup(self):
        self.call("merge_switch_cluster", **self.switch_args())
        self.assertTrue(self.call("merge_forget_backup"))
        self.assertFalse(os.path.exists(noded_merge.backup_path(self.paths)))
        self.assertFalse(self.call("merge_forget_backup"))
        # the new cluster's files stay
        self.assertEqual(self.served_digest(), self.new_cert.digest())
        err = self.refused("merge_revert_switch")
        self.assertIn("there is no cluster merge backup", str(err))

    def test_a_second_switch_is_refused(self):
        self.call("merge_switch_cluster", **self.switch_args())
        snap = snapshot(self.paths.data_dir)
        err = self.refused("merge_switch_cluster", **self.switch_args(
            from_cluster=NEW))
        self.assertIn("a cluster merge backup exists already", str(err))
        self.assertEqual(snapshot(self.paths.data_dir), snap)

    def test_refusals_change_nothing(self):
        other = cluster_cert(os.path.abspath(self.mktemp()),
                             "c.example.com")
        cases = [
            (self.switch_args(from_cluster="c.example.com"),
             "this node is in cluster 'b.example.com', not c.example.com"),
            (self.switch_args(cluster_pem=(other.key_pem + other.cert_pem)
                              .decode("ascii")),
             "cluster_pem: the cluster certificate  is not issued for"
             " cluster a.example.com"),
            (self.switch_args(cluster_pem="not a certificate"),
             "cluster_pem:"),
            (self.switch_args(ssconf={"cluster_name": NEW,
                                      "node_list": ["node1.a.example.com"]}),
             "ssconf: node_list does not name this node"),
            (self.switch_args(hmac_key="\u00e9"),
             "hmac_key must be ASCII text"),
        ]
        for args, text in cases:
            err = self.refused("merge_switch_cluster", **args)
            self.assertIn(text, str(err))
            self.assertUnchanged()

    def test_a_failure_half_way_puts_the_old_files_back(self):
        err = self.refused("merge_switch_cluster", **self.switch_args(
            ssconf={"cluster_name": NEW, "node_list": [NODE],
                    "Bad Key": "x"}))
        self.assertIsInstance(err, errors.ParameterError)
        self.assertUnchanged()

    def test_no_switch_without_a_way_to_restart(self):
        self.procs.restart_in_place = None
        err = self.refused("merge_switch_cluster", **self.switch_args())
        self.assertIn("cannot restart itself", str(err))
        self.assertUnchanged()


class RestartInPlaceTests(unittest.TestCase):
    """reexec_daemon: the reactor stops, the daemons holding the old key
    stop, then the same program is executed again."""

    class Reactor(object):
        def __init__(self):
            self.triggers = []
            self.stopped = False

        def addSystemEventTrigger(self, phase, event, fn):
            self.triggers.append((phase, event, fn))

        def stop(self):
            self.stopped = True

    def test_stops_then_executes_itself_again(self):
        executed = []
        self.patch(noded_restart.os, "execv",
                   lambda path, argv: executed.append((path, argv)))
        stopped = []
        self.patch(noded_restart.daemon_util, "stop_daemon",
                   lambda paths, daemon: stopped.append(daemon))
        self.patch(noded_restart.sys, "orig_argv",
                   ["python3", "-m", "twisted", "ganeti-noded", "--root",
                    "/x"])

        class Supervisor(object):
            launcher = object()
        procs = type("P", (), {"paths": Paths("/x"),
                               "supervisor": Supervisor()})()
        reactor = self.Reactor()
        noded_merge.reexec_daemon(reactor, procs)
        self.assertTrue(reactor.stopped)
        self.assertEqual(executed, [])
        [(phase, event, fn)] = reactor.triggers
        self.assertEqual((phase, event), ("after", "shutdown"))
        fn()
        self.assertEqual(stopped, list(noded_merge.RESTARTED_DAEMONS))
        self.assertEqual(executed, [(sys.executable, [
            sys.executable, "-m", "twisted", "ganeti-noded", "--root",
            "/x"])])

    def test_without_a_supervisor_no_daemon_is_touched(self):
        self.patch(noded_restart.os, "execv", lambda path, argv: None)
        stopped = []
        self.patch(noded_restart.daemon_util, "stop_daemon",
                   lambda paths, daemon: stopped.append(daemon))
        procs = type("P", (), {"paths": Paths("/x"), "supervisor": None})()
        reactor = self.Reactor()
        noded_merge.reexec_daemon(reactor, procs)
        reactor.triggers[0][2]()
        self.assertEqual(stopped, [])


