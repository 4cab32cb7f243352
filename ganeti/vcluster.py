"""A virtual cluster on one machine: several nodes on 127.0.0.x, one root each.

Used by the demo and by integration tests.  Each node gets its own directory
(``<base>/<node name>``) with Ganeti's standard layout below it, so every
daemon runs with ``--root <base>/<node>`` and ``--bind 127.0.0.<n>``; Ganeti's
own tools find the same files with ``GANETI_ROOTDIR=<base>/<node>
GANETI_HOSTNAME=<node>``.
"""

import binascii
import os
import shutil
import signal
import subprocess
import sys
import time

import attr

from ganeti import config
from ganeti import constants
from ganeti import crypto
from ganeti import objects
from ganeti.pathutils import Paths


@attr.s
class VirtualNode(object):
    name = attr.ib()
    ip = attr.ib()
    root = attr.ib()

    @property
    def paths(self):
        return Paths(self.root)


def node_ip(index):
    """127.0.0.1 for the first node, then .2, .3, ... (all on loopback)."""
    return "127.0.0.%d" % (index + 1)


def write_hmac_key(path):
    """A new cluster HMAC key as Ganeti writes it: 40 hex chars + newline."""
    key = binascii.hexlify(os.urandom(20)) + b"\n"
    config.atomic_write(path, key, mode=0o400)
    return key


@attr.s
class VirtualCluster(object):
    base = attr.ib(converter=os.path.abspath)
    node_count = attr.ib(default=3)
    cluster_name = attr.ib(default="cluster.example.com")
    domain = attr.ib(default="example.com")
    nodes = attr.ib(factory=list)
    processes = attr.ib(factory=list)  # (description, Popen)

    def __attrs_post_init__(self):
        for i in range(self.node_count):
            name = "node%d.%s" % (i + 1, self.domain)
            self.nodes.append(VirtualNode(name, node_ip(i),
                                          os.path.join(self.base, name)))

    @property
    def master(self):
        return self.nodes[0]

    def create(self, hypervisors=(constants.HT_FAKE, constants.HT_KVM)):
        """Lay out every node's root and write the initial configuration."""
        if os.path.exists(self.base):
            shutil.rmtree(self.base)
        for node in self.nodes:
            node.paths.ensure_dirs()
        m = self.master
        store = config.ConfigStore.create(
            m.paths.config_file, self.cluster_name, m.name, m.ip,
            enabled_hypervisors=list(hypervisors),
            enabled_disk_templates=[constants.DT_FILE,
                                    constants.DT_SHARED_FILE,
                                    constants.DT_DISKLESS],
            file_storage_dir=os.path.join(m.root, "srv", "ganeti",
                                          "file-storage"),
            shared_file_storage_dir=os.path.join(self.base, "shared"),
            master_netdev="lo")
        for node in self.nodes[1:]:
            store.add_node(objects.Node(name=node.name, primary_ip=node.ip,
                                        secondary_ip=node.ip))
        write_hmac_key(m.paths.hmac_key_file)
        crypto.generate_cluster_certificate(
            crypto.server_pem_path(m.paths), self.cluster_name)
        self.distribute()
        return store

    def distribute(self):
        """Copy config.data, hmac.key and server.pem to every node.

        (What the master's replication does once it talks to node daemons.)
        """
        m = self.master.paths
        for node in self.nodes[1:]:
            for src, dst in ((m.config_file, node.paths.config_file),
                             (m.hmac_key_file, node.paths.hmac_key_file),
                             (crypto.server_pem_path(m),
                              crypto.server_pem_path(node.paths))):
                if not os.path.exists(src):
                    continue
                with open(src, "rb") as f:
                    data = f.read()
                mode = os.stat(src).st_mode & 0o777
                if os.path.exists(dst):
                    os.chmod(dst, 0o600)
                config.atomic_write(dst, data, mode=mode)

    def load(self):
        return config.ConfigStore.load(self.master.paths.config_file)

    # --- daemons ---------------------------------------------------------

    def twistd_command(self, plugin, node, *args):
        """Run a daemon plugin in the foreground with ``twist``.

        (``python -m twisted`` is twist: the same IServiceMaker plugins as
        twistd, without daemonizing, so we keep the PID to stop it.)
        """
        return [sys.executable, "-m", "twisted", "--log-format", "text",
                "--log-file",
                os.path.join(node.paths.log_dir, "%s.log" % plugin),
                plugin, "--root", node.root, "--bind", node.ip] + list(args)

    def start(self, description, argv, env=None):
        """Start a daemon process; it is stopped by :meth:`stop_all`."""
        full_env = dict(os.environ)
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        full_env["PYTHONPATH"] = os.pathsep.join(
            [here] + [p for p in full_env.get("PYTHONPATH", "").split(
                os.pathsep) if p])
        full_env.update(env or {})
        # stderr goes next to the logs: a daemon that dies before its
        # logging is set up says why there.
        err_path = os.path.join(self.base, "%s.stderr"
                                % description.replace("/", "_"))
        with open(err_path, "ab") as err:
            proc = subprocess.Popen(argv, env=full_env,
                                    stdin=subprocess.DEVNULL,
                                    stdout=err, stderr=err,
                                    start_new_session=True)
        self.processes.append((description, proc))
        return proc

    def instance_pids(self):
        """PIDs of instance processes (fake guests, qemu) on our nodes.

        They are detached from the node daemons on purpose (instances
        survive a daemon restart), so they are found through the
        hypervisors' pid files under each node's root.
        """
        pids = []
        for node in self.nodes:
            for hv in (constants.HT_FAKE, constants.HT_KVM):
                pid_dir = os.path.join(node.paths.run_dir,
                                       "%s-hypervisor" % hv, "pid")
                if not os.path.isdir(pid_dir):
                    continue
                for name in os.listdir(pid_dir):
                    try:
                        with open(os.path.join(pid_dir, name)) as f:
                            pids.append(int(f.read().strip()))
                    except (OSError, ValueError):
                        pass
        return pids

    def kill_instances(self):
        """SIGKILL every instance process of this virtual cluster."""
        for pid in self.instance_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def stop_all(self, timeout=10.0, instances=True):
        """Stop every process we started, by PID; SIGKILL stragglers.

        With ``instances`` the cluster's instance processes go too.
        """
        if instances:
            self.kill_instances()
        for _, proc in self.processes:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for _, proc in self.processes:
            remaining = max(0.0, deadline - time.monotonic())
            try:
                proc.wait(remaining)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.processes = []
