"""A real ``ganeti-noded`` process whose calls wait on FIFOs (an open FIFO
without data blocks its reader like a hung disk) answers a ping while they
wait, even when every thread of its pool is stuck; with
``--blocking-threads 0`` (the work on the reactor) it does not."""

import os
import shutil
import time

from twisted.internet import defer, reactor, task
from twisted.logger import Logger
from twisted.trial import unittest

from ganeti import crypto
from ganeti import rpc
from ganeti.backend import os_api
from ganeti.dev import vcluster
from ganeti.dev.stall import StalledFile, opened_by

from tests.test_crypto import cluster_cert
from tests.places import free_port
from tests.test_os import ETC_OS

log = Logger()

MiB = 1024 * 1024


def proc_status(pid):
    """kB of VmLck and VmRSS of process ``pid``."""
    with open("/proc/%d/status" % pid) as f:
        return {line.split(":")[0]: int(line.split()[1]) for line in f
                if line.startswith(("VmLck:", "VmRSS:"))}


class StallTests(unittest.TestCase):
    """A real ganeti-noded on 127.0.0.1 whose OS definitions and ssconf
    are FIFOs the test controls."""

    timeout = 120

    def setUp(self):
        self.base = os.path.abspath(self.mktemp())
        self.vc = vcluster.VirtualCluster(self.base, node_count=1)
        self.node = self.vc.nodes[0]
        self.node.paths.ensure_dirs()
        self.cert = cluster_cert(os.path.join(self.base, "certs"),
                                 self.vc.cluster_name)
        pem = crypto.server_pem_path(self.node.paths)
        shutil.copy(self.cert.path, pem)
        os.chmod(pem, 0o400)
        self.os_dir = os.path.join(self.base, "os")
        self.store = os.path.join(self.base, "store")
        os.makedirs(self.store)
        self.fifos = []
        self.client = None
        self.calls = []
        # cleanups run last-in first-out: release the readers, stop the
        # daemon, drop the client's connections, remove the files
        self.addCleanup(shutil.rmtree, self.base, True)
        self.addCleanup(self._close_client)
        self.addCleanup(self.vc.stop_all)
        self.addCleanup(self._release_all)

    def call(self, procedure, args, timeout):
        d = self.client.call("n", procedure, args, timeout=timeout)
        self.calls.append(d)
        return d

    @defer.inlineCallbacks
    def _close_client(self):
        if self.client is not None:
            # the daemon is gone: every call has its answer or error
            yield defer.DeferredList(self.calls)
            yield self.client.close()

    def _release_all(self):
        for fifo in self.fifos:
            fifo.release()

    def stalled_os(self, name):
        """An OS definition (busybox's) whose API version file blocks."""
        path = os.path.join(self.os_dir, name)
        shutil.copytree(os.path.join(ETC_OS, "busybox"), path)
        os.unlink(os.path.join(path, os_api.API_FILE))
        fifo = StalledFile(os.path.join(path, os_api.API_FILE))
        self.fifos.append(fifo)
        return fifo

    def stalled_ssconf(self):
        """ssconf_file_storage_dir (read by every file storage call)."""
        fifo = StalledFile(self.node.paths.ssconf_file("file_storage_dir"))
        self.fifos.append(fifo)
        return fifo

    async def start(self, threads):
        port = free_port(self.node.ip)
        argv = self.vc.twistd_command(
            "ganeti-noded", self.node, "--port", str(port),
            "--os-search-path", self.os_dir,
            "--blocking-threads", str(threads))
        self.proc = self.vc.start("noded", argv)
        self.client = rpc.RpcClient(
            reactor, None, lambda n: rpc.NodeAddress(self.node.ip, port),
            cert=self.cert)
        for _ in range(400):
            result = await self.client.call("n", "version", timeout=5)
            if result.success:
                return
            await task.deferLater(reactor, 0.05, lambda: None)
        self.fail("ganeti-noded did not answer: %s" % result.fail_msg)

    async def wait_opened(self, fifo):
        for _ in range(500):
            if opened_by(self.proc.pid, fifo.path):
                return
            self.assertIsNone(self.proc.poll(), "ganeti-noded exited")
            await task.deferLater(reactor, 0.02, lambda: None)
        self.fail("ganeti-noded never opened %s" % fifo.path)

    async def ping(self, timeout):
        started = time.monotonic()
        result = await self.call("version", [], timeout)
        return result, time.monotonic() - started

    @defer.inlineCallbacks
    def test_ping_answered_while_every_thread_waits(self):
        yield defer.Deferred.fromCoroutine(self._every_thread_waits())

    async def _every_thread_waits(self):
        api = [self.stalled_os("stalled%d" % i) for i in range(2)]
        ssconf = self.stalled_ssconf()
        await self.start(threads=2)
        memory = proc_status(self.proc.pid)
        disk_path = os.path.join(self.store, "inst/disk0")
        os.makedirs(os.path.dirname(disk_path))
        with open(disk_path, "wb") as f:
            f.truncate(3 * MiB)
        disk = {"dev_type": "file", "logical_id": ["loop", disk_path]}
        # one thread waits reading an OS definition
        validate = self.call("os_validate", [True, "stalled0"], 60)
        await self.wait_opened(api[0])
        result, latency = await self.ping(timeout=10)
        self.assertTrue(result.success, result.fail_msg)
        log.info("version answered in {ms:.1f} ms while one call waited on"
                 " a FIFO", ms=latency * 1000)
        # the other one the ssconf file naming the storage directory; a
        # third call finds no thread and queues
        dims = self.call("blockdev_getdimensions", [[disk]], 60)
        await self.wait_opened(ssconf)
        queued = self.call("os_validate", [True, "stalled1"], 60)
        result, latency = await self.ping(timeout=10)
        log.info("version answered in {ms:.1f} ms while two calls waited on"
                 " FIFOs (pool full) and one was queued",
                 ms=latency * 1000)
        self.assertTrue(result.success, result.fail_msg)
        self.assertEqual(result.payload, 3000000)
        if memory["VmLck"]:
            # locked memory (as root): the threads' stacks (8 MiB each) are
            # locked as they are used, not populated whole
            grown = proc_status(self.proc.pid)["VmRSS"] - memory["VmRSS"]
            self.assertLess(grown, 8 * 1024, "VmRSS grew by %d kB" % grown)
        # the hypervisor's procedures do not wait for the disk either
        listed = await self.call("instance_list", [["fake"]], 10)
        self.assertEqual((listed.success, listed.payload), (True, []))
        # the logical point: all of that while the blocked calls wait
        self.assertFalse(validate.called or dims.called or queued.called)
        self.assertFalse(opened_by(self.proc.pid, api[1].path))
        # unblock: each completes with what its file said
        ssconf.release(self.store.encode() + b"\n")
        # (later storage calls read a plain file again)
        with open(ssconf.path + ".new", "w") as f:
            f.write(self.store + "\n")
        os.rename(ssconf.path + ".new", ssconf.path)
        # the freed thread went to the queued call, which now waits on its
        # file; the disk's next piece of work queues behind it
        await self.wait_opened(api[1])
        self.assertFalse(dims.called or queued.called)
        api[0].release(b"20\n")
        result = await validate
        self.assertEqual((result.success, result.payload), (True, True),
                         result.fail_msg)
        result = await dims
        self.assertTrue(result.success, result.fail_msg)
        self.assertEqual(result.payload, [{"size": 3 * MiB,
                                           "spindles": None}])
        self.assertFalse(queued.called)
        api[1].release(b"15\n20\n")
        result = await queued
        self.assertEqual((result.success, result.payload), (True, True),
                         result.fail_msg)

    @defer.inlineCallbacks
    def test_without_threads_the_ping_waits(self):
        """The same wait on the reactor (``--blocking-threads 0``) stalls
        the whole daemon: what the test above would see without a pool."""
        yield defer.Deferred.fromCoroutine(self._inline_stalls())

    async def _inline_stalls(self):
        fifo = self.stalled_os("stalled0")
        await self.start(threads=0)
        validate = self.call("os_validate", [True, "stalled0"], 60)
        await self.wait_opened(fifo)
        result, _ = await self.ping(timeout=1.5)
        self.assertFalse(result.success)
        self.assertIn("no answer to version within 1.5s", result.fail_msg)
        self.assertFalse(validate.called)
        fifo.release(b"20\n")
        result = await validate
        self.assertEqual((result.success, result.payload), (True, True),
                         result.fail_msg)
        result, _ = await self.ping(timeout=10)
        self.assertTrue(result.success, result.fail_msg)
