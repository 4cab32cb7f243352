"""Redundancy through real daemons: a 3-node virtual cluster, fake hypervisor.

Every node runs its own ganeti-noded on its own loopback address (random
127.x.y.z, so parallel runs do not collide on port 1811); the master
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
import signal
import subprocess
import sys

from ganeti import config
from ganeti import constants
from ganeti.hypervisor import state

from tests.integration.daemons import (PROJECT, GntCommandsMixin,
                                       RunningClusterTestCase, wait_for)
from tests.test_noded import kill_fake_instances

INSTANCE = "inst1.example.com"


class ClusterTestCase(GntCommandsMixin, RunningClusterTestCase):
    """A multi-node virtual cluster with a noded per node and a masterd."""

    timeout = 300
    NODES = 3
    BASE_PREFIX = "gnt-m-"
    GNT_TIMEOUT = 240

    def setUp(self):
        RunningClusterTestCase.setUp(self)
        self.gnt_root = self.vc.master.root

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
        self.start_master()

    def node(self, idx):
        return self.vc.nodes[idx]

    def query(self, name=INSTANCE):
        result, _ = self.run_job({"OP_ID": "OP_INSTANCE_QUERY_DATA",
                                  "instances": [name]})
        return result[name]

    def create(self, name=INSTANCE, template="sharedfile", node=0, **kw):
        op = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
              "mode": "create", "disk_template": template,
              "disks": [{"size": 1024}] if template != "diskless" else [],
              "nics": [{}], "os_type": "busybox+default",
              "pnode": self.node(node).name, "beparams": {"memory": 128},
              "name_check": False, "ip_check": False}
        op.update(kw)
        return self.run_job(op)

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
            check=True, env=dict(os.environ, PYTHONPATH=PROJECT))

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
