"""Scaffolding of the tests that run real daemons.

Clusters live under a short /tmp directory (UNIX socket paths are limited
to 108 bytes) on random 127.x.y.z addresses (noded's port is fixed, so each
run gets addresses of its own).  :class:`VirtualClusterTestCase` lays out a
:class:`ganeti.dev.vcluster.VirtualCluster` and starts its daemons on demand;
:class:`RunningClusterTestCase` has them running.  Every process is stopped
by PID at the end, whatever the test did.
"""

import os
import socket
import ssl
import subprocess
import sys

from twisted.trial import unittest

from ganeti import constants
from ganeti import luxi
from ganeti.dev import vcluster
from ganeti.dev.vcluster import VirtualCluster, port_open

from tests.places import random_ips, short_tmpdir, snapshot
from tests.test_noded import kill_fake_instances

__all__ = ["PROJECT", "ETC_OS", "FINAL", "wait_for", "port_open",
           "random_ips", "short_tmpdir", "snapshot", "command_env",
           "noded_version",
           "GntCommandsMixin", "VirtualClusterTestCase",
           "RunningClusterTestCase"]

#: the checkout (tests/integration/ is two levels below it)
PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
#: the busybox OS definition
ETC_OS = os.path.join(PROJECT, "etc", "os")
#: the statuses of a job that is done
FINAL = ("success", "error", "canceled")


def wait_for(what, predicate, timeout=60.0, interval=0.05):
    """:func:`ganeti.dev.vcluster.wait_for`, failing the test on timeout."""
    return vcluster.wait_for(what, predicate, timeout, interval,
                             AssertionError)


def command_env(root):
    """The environment our gnt-* commands run in for the node at ``root``
    (this checkout first on the Python path)."""
    env = dict(os.environ, GANETI_ROOTDIR=root, LANG="C.UTF-8")
    env["PYTHONPATH"] = os.pathsep.join(
        [PROJECT] + [p for p in env.get("PYTHONPATH", "").split(
            os.pathsep) if p])
    return env


def noded_version(address, cert_path=None):
    """POST /version to a node daemon with Python's ssl module, presenting
    ``cert_path`` (or no client certificate): the reply bytes, or the
    exception that ended the attempt."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert_path:
        ctx.load_cert_chain(cert_path)
    try:
        with socket.create_connection(
                (address, constants.DEFAULT_NODED_PORT), 10) as sock:
            with ctx.wrap_socket(sock) as conn:
                conn.sendall(b"POST /version HTTP/1.1\r\nHost: x\r\n"
                             b"Content-Length: 2\r\nConnection: close\r\n"
                             b"\r\n[]")
                data = b""
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                return data
    except (OSError, ssl.SSLError) as err:
        return err


class GntCommandsMixin(object):
    """Our gnt-* commands as processes on the node rooted at
    ``self.gnt_root`` (set by the test)."""

    #: seconds a command may take
    GNT_TIMEOUT = 120

    def gnt(self, program, *args, cwd="/"):
        """Run ``program`` (gnt-cluster, ...); (exit code, output)."""
        module = "ganeti.cli." + program.replace("-", "_")
        proc = subprocess.run([sys.executable, "-m", module] + list(args),
                              env=command_env(self.gnt_root),
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT,
                              timeout=self.GNT_TIMEOUT, cwd=cwd)
        return proc.returncode, proc.stdout.decode("utf-8", "replace")

    def ok(self, program, *args):
        code, out = self.gnt(program, *args)
        self.assertEqual(code, 0, "%s %s failed:\n%s"
                         % (program, " ".join(args), out))
        return out


class VirtualClusterTestCase(unittest.TestCase):
    """A virtual cluster of ``NODES`` nodes with ``HYPERVISORS`` enabled
    (``self.vc``; its file storage directories ``self.fsd`` and
    ``self.shared``); no daemon runs yet."""

    NODES = 1
    HYPERVISORS = (constants.HT_FAKE,)
    BASE_PREFIX = "gnt-"

    def setUp(self):
        self.base = short_tmpdir(self, self.BASE_PREFIX)
        self.vc = VirtualCluster(os.path.join(self.base, "vc"),
                                 node_count=self.NODES)
        for node, ip in zip(self.vc.nodes, random_ips(self.NODES)):
            node.ip = ip
        store = self.vc.create(hypervisors=self.HYPERVISORS)
        self.fsd = store.cluster.file_storage_dir
        self.shared = store.cluster.shared_file_storage_dir
        # registered before anything starts, run after the test's own
        # cleanups: every daemon and instance goes, by PID
        self.addCleanup(self.vc.stop_all)
        for node in self.vc.nodes:
            self.addCleanup(kill_fake_instances, node.root)

    def alive(self, proc):
        """True while ``proc`` runs; fails the test once it has exited."""
        if proc.poll() is not None:
            raise AssertionError("daemon exited with %s; see %s"
                                 % (proc.returncode, self.vc.base))
        return True

    def start_noded(self, node, *args):
        """Start ``node``'s node daemon (``--no-mlock`` and ``args``);
        its process, once it listens."""
        proc = self.vc.start("noded-%s" % node.name, self.vc.twistd_command(
            "ganeti-noded", node, "--no-mlock", *args))
        wait_for("node daemon on %s" % node.name,
                 lambda: self.alive(proc) and port_open(
                     node.ip, constants.DEFAULT_NODED_PORT))
        return proc

    def start_masterd(self, *args):
        """Start the master daemon (with ``args``); its process, once it
        answers on its luxi socket."""
        master = self.vc.master
        proc = self.vc.start("masterd", self.vc.twistd_command(
            "ganeti-masterd", master, *args))
        wait_for("master socket", lambda: self.alive(proc) and
                 vcluster.master_answers(master))
        return proc


class RunningClusterTestCase(VirtualClusterTestCase):
    """The cluster with a node daemon on every node (the busybox OS, the
    file and shared file storage directories) and the master daemon,
    ``self.client`` a luxi client of it."""

    #: seconds a job may take
    JOB_TIMEOUT = 180

    def setUp(self):
        VirtualClusterTestCase.setUp(self)
        os.makedirs(self.shared, exist_ok=True)
        self.nodeds = {}
        for node in self.vc.nodes:
            self.nodeds[node.name] = self.start_noded(
                node, "--os-search-path", ETC_OS,
                "--file-storage-dir", self.fsd,
                "--file-storage-dir", self.shared)
        self.start_master()

    def start_master(self):
        """Start the master daemon and connect ``self.client`` to it."""
        self.masterd = self.start_masterd()
        self.socket = self.vc.master.paths.master_socket
        self.client = luxi.BlockingClient(self.socket, 60)
        self.addCleanup(self.client.close)

    def run_job(self, op, expect="success"):
        """Submit a job of ``op`` and wait for it to end as ``expect``;
        (the opcode's result, its log messages)."""
        job = self.client.call("SubmitJob", [op])
        wait_for("job %s" % job, lambda: self.client.call(
            "QueryJobs", [job], ["status"])[0][0] in FINAL,
            timeout=self.JOB_TIMEOUT)
        status, result, oplog = self.client.call(
            "QueryJobs", [job], ["status", "opresult", "oplog"])[0]
        messages = [entry[3] for entry in oplog[0]] if oplog else []
        self.assertEqual(status, expect, (result, messages))
        return (result[0] if result else None), messages

class WatcherMixin(object):
    """``ganeti-watcher --once`` as a process on a node of ``self.vc``."""

    def watcher(self, node=None, *args, checks=False):
        """Run ``ganeti-watcher --once`` on ``node`` (the master), checking
        its daemons if ``checks``; its exit status and what it logged this
        time."""
        if not checks:
            # a confd that does not run takes the probe's whole timeout
            args += ("--no-daemon-checks",)
        node = node or self.vc.master
        log_path = os.path.join(node.paths.log_dir, "ganeti-watcher.log")
        seen = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        proc = self.vc.start("watcher-%s" % node.name, self.vc.twistd_command(
            "ganeti-watcher", node, "--once", "--job-wait", "120", *args))
        try:
            code = proc.wait(180)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.fail("ganeti-watcher --once did not end; see %s" % log_path)
        with open(log_path, encoding="utf-8", errors="replace") as f:
            f.seek(seen)
            log = f.read()
        # no job of the watcher fails in these tests
        self.assertNotIn(" ended error", log)
        return code, log


def prepare_rapi(vc, users):
    """What ganeti-rapi needs on ``vc``'s master before it starts: the RAPI
    certificate and the users file with ``users`` (lines of
    ``name password rights``)."""
    from ganeti import crypto
    from ganeti.server.rapi import rapi_pem_path
    node = vc.master
    crypto.generate_cluster_certificate(rapi_pem_path(node.paths),
                                        vc.cluster_name)
    path = node.paths.rapi_users_file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in users))
