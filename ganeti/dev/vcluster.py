"""A virtual cluster on one machine: several nodes on consecutive loopback
addresses (127.0.0.1, .2, ... by default), one root each.

Used by the demo and by integration tests.  Each node gets its own directory
(``<base>/<node name>``) with Ganeti's standard layout below it, so every
daemon runs with ``--root <base>/<node>`` and ``--bind <node's address>``;
Ganeti's own tools find the same files with ``GANETI_ROOTDIR=<base>/<node>
GANETI_HOSTNAME=<node>``.  The node daemon's port is the same on every
node, so two clusters on one machine need addresses of their own.
"""

import ipaddress
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

import attr

from ganeti import config
from ganeti import constants
from ganeti import crypto
from ganeti import daemon_util
from ganeti import dev
from ganeti import objects
from ganeti import rie
from ganeti import ssconf
from ganeti.backend import files
from ganeti.hypervisor import state as hv_state
from ganeti.pathutils import Paths
from ganeti.utils import io


@attr.s
class VirtualNode(object):
    name = attr.ib()
    ip = attr.ib()
    root = attr.ib()

    @property
    def paths(self):
        return Paths(self.root)


#: where node addresses come from: loopback, without its network and
#: broadcast addresses
LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")


def node_addresses(first, count):
    """``count`` consecutive loopback IPv4 addresses from ``first`` (text);
    ValueError saying why when ``first`` is not a loopback IPv4 address or
    the addresses would run past the end of 127.0.0.0/8."""
    try:
        start = ipaddress.IPv4Address(first)
    except ipaddress.AddressValueError:
        raise ValueError("%r is not an IPv4 address" % (first,))
    lowest = LOOPBACK.network_address + 1
    highest = LOOPBACK.broadcast_address - 1
    if start not in LOOPBACK:
        raise ValueError("%s is not a loopback address (%s to %s)"
                         % (start, lowest, highest))
    if start < lowest or start > highest:
        raise ValueError("%s is the loopback network's %s address, not one"
                         " for a node (%s to %s)"
                         % (start, "own" if start < lowest else "broadcast",
                            lowest, highest))
    if int(start) + count - 1 > int(highest):
        raise ValueError("no room for %d nodes from %s: the last loopback"
                         " address for a node is %s" % (count, start, highest))
    return [str(start + i) for i in range(count)]


#: how the virtual cluster's node daemons start the other daemons: as
#: child processes, checked every second
MANAGED_NODED_ARGS = ("--daemons", "process", "--daemon-check-interval", "1")


def wait_for(what, predicate, timeout, interval=0.05, error=RuntimeError):
    """Poll ``predicate`` until it returns something true, and return that;
    ``error`` (tests want AssertionError) once ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise error("timed out waiting for %s" % what)


def port_open(address, port):
    """Whether a TCP connection to ``address``:``port`` can be made."""
    try:
        socket.create_connection((address, port), 1).close()
        return True
    except OSError:
        return False


def master_answers(node):
    """Whether the master daemon of ``node`` answers a luxi query."""
    from ganeti import luxi
    try:
        with luxi.BlockingClient(node.paths.master_socket, 5) as c:
            c.call("QueryConfigValues", ["cluster_name"])
        return True
    except (luxi.NoMasterError, OSError):
        return False


@attr.s
class VirtualCluster(object):
    base = attr.ib(converter=os.path.abspath)
    node_count = attr.ib(default=3)
    cluster_name = attr.ib(default="cluster.example.com")
    domain = attr.ib(default="example.com")
    nodes = attr.ib(factory=list)
    processes = attr.ib(factory=list)  # (description, Popen)
    #: the first node's address; the others follow it (node_addresses)
    first_address = attr.ib(default="127.0.0.1")
    #: the cluster's master IP (None: the first node's address); an
    #: address of its own moves to the new master at a failover
    master_ip = attr.ib(default=None)

    def __attrs_post_init__(self):
        addresses = node_addresses(self.first_address, self.node_count)
        for i, address in enumerate(addresses):
            name = "node%d.%s" % (i + 1, self.domain)
            self.nodes.append(VirtualNode(name, address,
                                          os.path.join(self.base, name)))

    @property
    def master(self):
        return self.nodes[0]

    def install_oob(self, name="virtual-power"):
        """Write the virtual cluster's out-of-band program (``python -m
        ganeti.dev.oob``: powering a node off kills its processes) into
        the master's out-of-band directory; returns its path, for the
        ``oob_program`` node parameter."""
        directory = self.master.paths.oob_dir
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n"
                    "PYTHONPATH=%s exec %s -m ganeti.dev.oob --base %s"
                    ' "$@"\n' % (shlex.quote(dev.CHECKOUT_DIR),
                                 shlex.quote(sys.executable),
                                 shlex.quote(self.base)))
        os.chmod(path, 0o755)
        return path

    def _lay_out(self, hypervisors, **cluster_params):
        """Every node's root, empty, and the master's config.data, HMAC key
        and cluster certificate; (config store, certificate)."""
        if os.path.exists(self.base):
            shutil.rmtree(self.base)
        for node in self.nodes:
            node.paths.ensure_dirs()
        m = self.master
        params = dict(
            enabled_disk_templates=[constants.DT_FILE,
                                    constants.DT_SHARED_FILE,
                                    constants.DT_DISKLESS],
            file_storage_dir=os.path.join(m.root, "srv", "ganeti",
                                          "file-storage"),
            shared_file_storage_dir=os.path.join(self.base, "shared"),
            master_netdev="lo",
            # as gnt-cluster init: the built-in allocator by default
            default_iallocator=constants.DEFAULT_IALLOCATOR)
        params.update(cluster_params)
        store = config.ConfigStore.create(
            m.paths.config_file, self.cluster_name, m.name, m.ip,
            enabled_hypervisors=list(hypervisors), **params)
        if self.master_ip and self.master_ip != m.ip:
            store.set_cluster_params(master_ip=self.master_ip)
        crypto.write_hmac_key(m.paths.hmac_key_file)
        crypto.write_domain_secret(os.path.join(m.paths.data_dir,
                                                rie.DOMAIN_SECRET_FILE))
        cert = crypto.generate_cluster_certificate(
            crypto.server_pem_path(m.paths), self.cluster_name)
        return store, cert

    def create(self, hypervisors=(constants.HT_FAKE, constants.HT_KVM)):
        """Lay out every node's root and write the initial configuration."""
        store, _ = self._lay_out(hypervisors)
        for node in self.nodes[1:]:
            store.add_node(objects.Node(name=node.name, primary_ip=node.ip,
                                        secondary_ip=node.ip))
        # the remote API's certificate (ganeti-rapi on the master)
        crypto.generate_cluster_certificate(
            os.path.join(self.master.paths.data_dir, "rapi.pem"),
            self.cluster_name)
        self.distribute()
        return store

    def distribute(self):
        """Copy config.data, hmac.key, server.pem and the cluster domain
        secret to every node.

        (What the master's replication does once it talks to node daemons.)
        """
        m = self.master.paths
        for node in self.nodes[1:]:
            for src, dst in ((m.config_file, node.paths.config_file),
                             (m.hmac_key_file, node.paths.hmac_key_file),
                             (crypto.server_pem_path(m),
                              crypto.server_pem_path(node.paths)),
                             (os.path.join(m.data_dir, rie.DOMAIN_SECRET_FILE),
                              os.path.join(node.paths.data_dir,
                                           rie.DOMAIN_SECRET_FILE))):
                if not os.path.exists(src):
                    continue
                with open(src, "rb") as f:
                    data = f.read()
                mode = os.stat(src).st_mode & 0o777
                if os.path.exists(dst):
                    os.chmod(dst, 0o600)
                io.atomic_write(dst, data, mode=mode)

    def load(self):
        return config.ConfigStore.load(self.master.paths.config_file)

    # --- a cluster built the real way (docs/membership.rst) -------------

    def create_master(self, hypervisors=(constants.HT_FAKE,),
                      **cluster_params):
        """Lay out every node's root, but configure only the master: the
        other nodes join through :meth:`join_nodes`, so replication (not
        copying) fills their roots."""
        store, cert = self._lay_out(hypervisors, **cluster_params)
        store.set_cluster_params(candidate_certs={
            store.master_node.uuid: crypto.certificate_digest(
                cert.certificate, "sha1")})
        # as gnt-cluster init: the remote API's certificate, and the
        # master's ssconf saying it is the master
        # (its node daemon starts the master's daemons from that)
        rapi_pem = os.path.join(self.master.paths.data_dir, "rapi.pem")
        if not os.path.exists(rapi_pem):
            crypto.generate_cluster_certificate(rapi_pem, self.cluster_name)
        files.write_ssconf_files(self.master.paths,
                                 ssconf.current_values(store))
        return store

    def start_master(self, noded_args=(), timeout=60.0):
        """Start the master's noded and masterd; return once luxi answers."""
        m = self.master
        self.start("noded@" + m.name, self.twistd_command(
            "ganeti-noded", m, "--no-mlock", *noded_args))
        proc = self.start("masterd@" + m.name, self.twistd_command(
            "ganeti-masterd", m))

        def answers():
            if proc.poll() is not None:
                raise RuntimeError("ganeti-masterd exited with %s; see %s"
                                   % (proc.returncode, self.base))
            return master_answers(m)
        wait_for("the master daemon", answers, timeout)

    def start_managed_master(self, noded_args=(), timeout=120.0):
        """Start the master's noded managing the node's daemons
        (``--daemons process``): it starts masterd, rapi, maintd, confd
        and mond by the node's role; return once luxi answers."""
        m = self.master
        proc = self.start("noded@" + m.name, self.twistd_command(
            "ganeti-noded", m, "--no-mlock", *(MANAGED_NODED_ARGS
                                               + tuple(noded_args))))

        def answers():
            if proc.poll() is not None:
                raise RuntimeError("ganeti-noded exited with %s; see %s"
                                   % (proc.returncode, self.base))
            return master_answers(m)
        wait_for("the master daemon (started by the node daemon)", answers,
                 timeout)
        return proc

    def start_bootstrap_noded(self, node, noded_args=(), timeout=60.0):
        """Start ``ganeti-noded --bootstrap`` on a node that is not a
        member yet; return the fingerprint of its one-time certificate."""
        fp_file = os.path.join(node.paths.run_dir, "ganeti-noded.fingerprint")
        if os.path.exists(fp_file):
            os.unlink(fp_file)
        proc = self.start("noded@" + node.name, self.twistd_command(
            "ganeti-noded", node, "--no-mlock", "--bootstrap", *noded_args))

        def ready():
            if proc.poll() is not None:
                raise RuntimeError("ganeti-noded of %s exited with %s; see"
                                   " %s" % (node.name, proc.returncode,
                                            self.base))
            if not os.path.exists(fp_file) or not port_open(
                    node.ip, constants.DEFAULT_NODED_PORT):
                return False
            with open(fp_file) as f:
                return f.read().strip() or False
        return wait_for("the node daemon of %s" % node.name, ready, timeout)

    def join_nodes(self, nodes=None, noded_args=(), timeout=120.0, **op):
        """Start a bootstrap noded on each node (default: all but the
        master) and join it through the master with OP_NODE_ADD, pinned to
        the fingerprint it logged.  Returns ``{node name: job id}``."""
        from ganeti import luxi
        if nodes is None:
            nodes = self.nodes[1:]
        jobs = {}
        with luxi.BlockingClient(self.master.paths.master_socket, 60) as c:
            for node in nodes:
                fingerprint = self.start_bootstrap_noded(node, noded_args)
                params = {"OP_ID": "OP_NODE_ADD", "node_name": node.name,
                          "primary_ip": node.ip,
                          "join_fingerprint": fingerprint}
                params.update(op)
                job = c.submit_job([params])
                jobs[node.name] = job

                def done(job=job):
                    status = c.query_jobs([job], ["status"])[0][0]
                    return status if status in ("success", "error",
                                                "canceled") else False
                status = wait_for("job %s (adding %s)" % (job, node.name),
                                  done, timeout)
                if status != "success":
                    result = c.query_jobs([job], ["opresult"])[0][0]
                    raise RuntimeError("adding node %s failed: %s"
                                       % (node.name, result))
        return jobs

    # --- daemons ---------------------------------------------------------

    def daemon_pid(self, node, daemon):
        """The PID of a daemon the node daemon of ``node`` started (None:
        not running)."""
        return daemon_util.running_pid(node.paths, daemon)

    def kill_node(self, node, sig=signal.SIGKILL):
        """What a node failure does to the node's daemons: every daemon
        under its root is killed (its instances too with
        :meth:`kill_instances`)."""
        killed = []
        for desc, proc in self.processes:
            if desc.endswith("@" + node.name) and proc.poll() is None:
                proc.send_signal(sig)
                proc.wait()
                killed.append(proc.pid)
        for daemon in daemon_util.MANAGED_DAEMONS:
            pid = daemon_util.running_pid(node.paths, daemon)
            if pid is not None:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
                killed.append(pid)
        return killed

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
        here = dev.CHECKOUT_DIR
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
                    pid = hv_state.read_pid_file(os.path.join(pid_dir, name))
                    # a pid file outlives its process, and pids are
                    # reused: only a live process whose command line names
                    # this node's files is this cluster's instance
                    if hv_state.process_alive(pid, marker=node.paths.run_dir):
                        pids.append(pid)
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
        self._stop_processes(timeout)
        # then the daemons the node daemons started (they outlive them;
        # stopped once no node daemon is left to start them again)
        for node in self.nodes:
            daemon_util.stop_all(node.paths, daemon_util.MANAGED_DAEMONS,
                                 timeout=timeout)

    def _stop_processes(self, timeout):
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
