"""Redundancy through real daemons: a 3-node virtual cluster, fake hypervisor.

Every node runs its own ganeti-noded on its own loopback address (random
127.x.y.2-4, so parallel runs do not collide on port 1811); the master
daemon runs on the first.  The cluster's shared file storage directory is
one directory every node daemon is allowed to use (``--file-storage-dir``),
which is what ``sharedfile`` means: a directory every node reaches.

* a sharedfile instance is live-migrated node1 -> node2 and back: the
  fake guest's state (its process, its start time) moves between the
  nodes' runtime directories;
* a node marked offline in the configuration (its daemon and instances
  dead, as after a crash): its instance is failed over to another node;
* a drained node is evacuated (see test_node_evacuate_integration).
"""

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile

from twisted.trial import unittest

from ganeti import config
from ganeti import constants
from ganeti import luxi
from ganeti.hypervisor import state
from ganeti.vcluster import VirtualCluster

from tests.test_instance_integration import ETC_OS, FINAL, _port_open, \
    wait_for
from tests.test_noded import kill_fake_instances

INSTANCE = "inst1.example.com"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ClusterTestCase(unittest.TestCase):
    """A multi-node virtual cluster with a noded per node and a masterd."""

    timeout = 300
    NODES = 3
    HYPERVISORS = (constants.HT_FAKE,)

    def setUp(self):
        # short: UNIX socket paths must fit in 108 bytes
        self.base = tempfile.mkdtemp(prefix="gnt-m-", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.base, True)
        self.vc = VirtualCluster(os.path.join(self.base, "vc"),
                                 node_count=self.NODES)
        prefix = "127.%d.%d." % (random.randint(1, 254),
                                 random.randint(1, 254))
        for idx, node in enumerate(self.vc.nodes):
            node.ip = prefix + str(idx + 2)
        store = self.vc.create(hypervisors=self.HYPERVISORS)
        self.fsd = store.cluster.file_storage_dir
        self.shared = store.cluster.shared_file_storage_dir
        os.makedirs(self.shared, exist_ok=True)
        self.addCleanup(self.vc.stop_all)
        for node in self.vc.nodes:
            self.addCleanup(kill_fake_instances, node.root)
        self.nodeds = {}
        for node in self.vc.nodes:
            self.start_noded(node)
        self.start_masterd()

    def extra_noded_args(self, node):
        return []

    def start_noded(self, node):
        proc = self.vc.start("noded-%s" % node.name, self.vc.twistd_command(
            "ganeti-noded", node, "--no-mlock", "--os-search-path", ETC_OS,
            "--file-storage-dir", self.fsd,
            "--file-storage-dir", self.shared,
            *self.extra_noded_args(node)))
        wait_for("node daemon on %s" % node.name,
                 lambda: self._alive(proc) and _port_open(
                     node.ip, constants.DEFAULT_NODED_PORT))
        self.nodeds[node.name] = proc
        return proc

    def start_masterd(self):
        node = self.vc.master
        self.masterd = self.vc.start("masterd", self.vc.twistd_command(
            "ganeti-masterd", node))
        self.socket = node.paths.master_socket
        wait_for("master socket", lambda: self._answers(self.masterd))
        self.client = luxi.BlockingClient(self.socket, 60)
        self.addCleanup(self.client.close)

    def stop_process(self, proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def change_config(self, fn):
        """Change config.data with the master stopped (for what no opcode
        does yet, such as marking a node offline)."""
        self.client.close()
        self.stop_process(self.masterd)
        store = config.ConfigStore.load(self.vc.master.paths.config_file)
        fn(store)
        self.start_masterd()

    def _alive(self, proc):
        if proc.poll() is not None:
            raise AssertionError("daemon exited with %s; see %s"
                                 % (proc.returncode, self.vc.base))
        return True

    def _answers(self, proc):
        self._alive(proc)
        try:
            with luxi.BlockingClient(self.socket, 5) as c:
                c.call("QueryConfigValues", ["cluster_name"])
            return True
        except luxi.NoMasterError:
            return False

    def submit(self, op):
        return self.client.call("SubmitJob", [op])

    def wait_job(self, job, expect="success"):
        wait_for("job %s" % job, lambda: self.client.call(
            "QueryJobs", [job], ["status"])[0][0] in FINAL, timeout=180)
        status, result, oplog = self.client.call(
            "QueryJobs", [job], ["status", "opresult", "oplog"])[0]
        messages = [entry[3] for entry in oplog[0]] if oplog else []
        self.assertEqual(status, expect, (result, messages))
        return (result[0] if result else None), messages

    def run_job(self, op, expect="success"):
        return self.wait_job(self.submit(op), expect)

    def node(self, idx):
        return self.vc.nodes[idx]

    def query(self, name=INSTANCE):
        result, _ = self.run_job({"OP_ID": "OP_INSTANCE_QUERY_DATA",
                                  "instances": [name]})
        return result[name]

    def create(self, name=INSTANCE, template="sharedfile", node=0, **kw):
        op = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
              "mode": "create", "disk_template": template,
              "disks": [{"size": 16}] if template != "diskless" else [],
              "nics": [], "os_type": "busybox+default",
              "pnode": self.node(node).name, "beparams": {"memory": 32},
              "name_check": False, "ip_check": False}
        op.update(kw)
        return self.run_job(op)

    def gnt(self, program, *args):
        module = "ganeti.cli." + program.replace("-", "_")
        env = dict(os.environ, GANETI_ROOTDIR=self.vc.master.root,
                   LANG="C.UTF-8", PYTHONPATH=HERE)
        proc = subprocess.run([sys.executable, "-m", module] + list(args),
                              env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=240, cwd="/")
        return proc.returncode, proc.stdout.decode("utf-8", "replace")

    def ok(self, program, *args):
        code, out = self.gnt(program, *args)
        self.assertEqual(code, 0, "%s %s failed:\n%s"
                         % (program, " ".join(args), out))
        return out

    def fake_pid(self, node, name=INSTANCE):
        rt = state.RuntimeDir(node.root, constants.HT_FAKE)
        pid = state.read_pid_file(rt.pid_path(name))
        if pid is not None and state.process_alive(pid, marker=rt.base):
            return pid
        return None

    def fake_record(self, node, name=INSTANCE):
        return state.RuntimeDir(node.root, constants.HT_FAKE).read(name)


class MigrationIntegrationTests(ClusterTestCase):

    def test_sharedfile_migrate_there_and_back(self):
        n1, n2 = self.node(0), self.node(1)
        self.create()
        info = self.query()
        self.assertEqual((info["pnode"], info["run_state"]), (n1.name, "up"))
        disk_file = info["disks"][0]["logical_id"][1]
        self.assertTrue(disk_file.startswith(self.shared + "/"), disk_file)
        pid1 = self.fake_pid(n1)
        started = self.fake_record(n1).started
        self.assertIsNotNone(pid1)

        _, log = self.run_job({"OP_ID": "OP_INSTANCE_MIGRATE",
                               "instance_name": INSTANCE,
                               "target_node": n2.name})
        self.assertIn("* memory transfer complete", log)
        info = self.query()
        self.assertEqual((info["pnode"], info["run_state"]), (n2.name, "up"))
        # the guest moved: gone from node1, running on node2, same guest
        # (its start time came along)
        wait_for("the old copy to go", lambda: self.fake_pid(n1) is None, 10)
        self.assertIsNone(self.fake_record(n1))
        pid2 = self.fake_pid(n2)
        self.assertIsNotNone(pid2)
        self.assertNotEqual(pid1, pid2)
        self.assertEqual(self.fake_record(n2).started, started)
        self.assertEqual(info["disks"][0]["pstatus"][0], disk_file)

        # and back, non-live this time
        self.run_job({"OP_ID": "OP_INSTANCE_MIGRATE",
                      "instance_name": INSTANCE, "target_node": n1.name,
                      "mode": "non-live"})
        info = self.query()
        self.assertEqual((info["pnode"], info["run_state"]), (n1.name, "up"))
        self.assertIsNone(self.fake_record(n2))
        self.assertIsNotNone(self.fake_pid(n1))

        # a migration interrupted after node2 accepted the instance (a
        # paused copy waits there): cleanup removes that copy
        self.accepted_copy(n2, self.fake_record(n1).spec)
        self.assertIsNotNone(self.fake_pid(n2))
        _, log = self.run_job({"OP_ID": "OP_INSTANCE_MIGRATE",
                               "instance_name": INSTANCE, "cleanup": True})
        self.assertIn("Trying to cleanup after failed migration", log)
        self.assertEqual(self.query()["pnode"], n1.name)
        wait_for("the copy on node2 to go",
                 lambda: self.fake_pid(n2) is None, 10)
        self.assertIsNone(self.fake_record(n2))
        self.assertIsNotNone(self.fake_pid(n1))

    def accepted_copy(self, node, spec):
        """What accept_instance leaves on a target: a paused guest."""
        rt = state.RuntimeDir(node.root, constants.HT_FAKE)
        rt.write(state.InstanceRecord(spec=spec, started=0.0))
        subprocess.run(
            [sys.executable, "-m", "ganeti.hypervisor.fake_guest",
             "--name", spec.name, "--paused",
             "--status", rt.ctrl_path(spec.name, "status"),
             "--pidfile", rt.pid_path(spec.name)],
            check=True, env=dict(os.environ, PYTHONPATH=HERE))

    def test_failover_off_an_offline_node(self):
        n1, n2, n3 = self.node(0), self.node(1), self.node(2)
        self.create(node=1)
        self.assertIsNotNone(self.fake_pid(n2))
        # node2 dies: its daemon and its instances are gone ...
        self.stop_process(self.nodeds[n2.name])
        kill_fake_instances(n2.root)
        # ... and the admin marks it offline
        self.change_config(lambda store: store.set_node_params(
            n2.name, master_candidate=False, offline=True))
        # a migration is impossible: the primary is offline
        _, log = self.run_job({"OP_ID": "OP_INSTANCE_MIGRATE",
                               "instance_name": INSTANCE,
                               "target_node": n3.name}, expect="error")
        _, log = self.run_job({"OP_ID": "OP_INSTANCE_FAILOVER",
                               "instance_name": INSTANCE,
                               "target_node": n3.name})
        self.assertTrue(any("please make sure node %s is down" % n2.name
                            in line for line in log), log)
        info = self.query()
        self.assertEqual((info["pnode"], info["run_state"],
                          info["config_state"]), (n3.name, "up", "up"))
        self.assertIsNotNone(self.fake_pid(n3))
        self.assertIsNone(self.fake_pid(n1))
