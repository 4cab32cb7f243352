"""The master and RAPI daemons' service trees, in-process on a memory
reactor: built by makeService without touching the disk or the network,
listening once started, a failed listen raised (which stops the daemon)."""

import os

from twisted.internet import error, task
from twisted.internet.testing import MemoryReactorClock, RaisingMemoryReactor
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.python import usage
from twisted.trial import unittest
from twisted.web.server import Site

from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import luxi
from ganeti import opcodes
from ganeti.dev.vcluster import VirtualCluster
from ganeti.rapi.front import ConnectionLimiter
from ganeti.server import masterd
from ganeti.server import rapi
from ganeti.utils.writer import InlineWriter

from tests.places import random_ips, short_tmpdir, snapshot


class MasterdServiceTests(unittest.TestCase):

    def setUp(self):
        base = short_tmpdir(self, "gnt-ms-")
        vc = VirtualCluster(os.path.join(base, "vc"), node_count=1)
        vc.nodes[0].ip = random_ips()[0]
        vc.create(hypervisors=(constants.HT_FAKE,))
        self.paths = vc.master.paths

    def make(self, reactor):
        options = masterd.Options()
        options.parseOptions(["--root", self.paths.root])
        # a memory reactor has no threads: the files are written at once
        top = masterd.makeService(options, reactor=reactor,
                                  writer=InlineWriter())
        # in-process, the lock would outlive the test: it is the process's
        self.addCleanup(top.getServiceNamed("queue-lock").store.unlock)
        return top

    def test_built_then_started_in_order_and_stopped(self):
        before = snapshot(self.paths.root)
        reactor = MemoryReactorClock()
        top = self.make(reactor)
        self.assertEqual([child.name for child in top],
                         ["queue-lock", "config", "watcher-pause", "jobs",
                          "job-archive", "luxi", "config-audit",
                          "leases", "nodehealth"])
        self.assertEqual(snapshot(self.paths.root), before)
        self.assertEqual(reactor.unixServers, [])

        top.startService()
        [(path, factory, _, mode, want_pid)] = reactor.unixServers
        self.assertEqual((path, mode, want_pid),
                         (self.paths.master_socket, 0o660, False))
        self.assertIsInstance(factory, luxi.LuxiServerFactory)
        self.assertIs(factory.handler.master, top)
        self.assertEqual(top.queue.queue_dir, self.paths.queue_dir)
        self.assertEqual(top.cfg.cluster.cluster_name, "cluster.example.com")
        self.assertIs(top.ctx.queue, top.queue)
        with open(os.path.join(self.paths.queue_dir, "lock")) as f:
            self.assertEqual(f.read(), "%d\n" % os.getpid())

        self.successResultOf(top.stopService())
        self.assertEqual([child.running for child in top], [False] * 9)
        # the node checks, the audit and the archiving ran on the
        # master's clock and stopped with it
        self.assertEqual(reactor.getDelayedCalls(), [])

    def test_job_queue_copies_wired_and_free_without_candidates(self):
        reactor = MemoryReactorClock()
        top = self.make(reactor)
        top.startService()
        replicator = top.jobs.replicator
        self.assertIs(top.queue._journal, replicator)
        self.assertIs(top.ctx.queue_replicator, replicator)
        self.assertIn(replicator.config_written, top.cfg.write_listeners)
        self.assertTrue(replicator.started)
        # one node: no candidate to copy to, nothing waits for one
        self.assertEqual(replicator.status, {})
        job = top.queue.submit_job([opcodes.OpTestDelay(duration=0)])
        self.assertEqual(self.successResultOf(job), 1)
        self.assertEqual(reactor.tcpClients, [])
        self.successResultOf(top.stopService())
        self.assertTrue(replicator.stopped)

    def test_lease_ended_while_down_released_at_start(self):
        from ganeti import config, leases, objects
        cfg = config.ConfigStore.load(self.paths.config_file)
        ended = objects.Instance(name="res1.example.com", forthcoming=True,
                                 tags={leases.tag(1000)})
        running = objects.Instance(name="res2.example.com", forthcoming=True,
                                   tags={leases.tag(4000)})
        cfg.add_instance(ended, [])
        cfg.add_instance(running, [])
        reactor = MemoryReactorClock()
        reactor.advance(2000)
        top = self.make(reactor)
        top.startService()
        self.addCleanup(top.stopService)
        keeper = top.getServiceNamed("leases").keeper
        # the ended lease's removal was submitted at start; the other
        # waits for its end
        [[ops]] = top.queue.query_jobs(None, ["ops"])
        [op] = ops
        self.assertEqual((op["OP_ID"], op["instance_uuid"],
                          op["expired_lease"]),
                         ("OP_INSTANCE_REMOVE", ended.uuid, True))
        self.assertEqual(op["reason"][0][:2], [
            leases.REASON_SOURCE,
            "lease expired (res1.example.com, lease until"
            " 1970-01-01T00:16:40Z)"])
        # (already in its warning window: armed for its end)
        self.assertEqual(keeper.next_check, 4000)
        for _ in range(20):
            reactor.advance(0.1)
        self.assertEqual(top.queue.query_jobs(None, ["status"]),
                         [["success"]])
        self.assertEqual(sorted(i.name for i in top.cfg.instances.values()),
                         ["res2.example.com"])

    def test_queued_lease_removal_not_submitted_again_after_restart(self):
        from ganeti import config, leases, objects
        cfg = config.ConfigStore.load(self.paths.config_file)
        ended = objects.Instance(name="res1.example.com", forthcoming=True,
                                 tags={leases.tag(1000)})
        cfg.add_instance(ended, [])
        reactor = MemoryReactorClock()
        reactor.advance(2000)
        top = self.make(reactor)
        top.startService()
        # stopped before the removal job ran
        [[job_id, status]] = top.queue.query_jobs(None, ["id", "status"])
        self.assertNotIn(status, ("success", "error", "canceled"))
        self.successResultOf(top.stopService())
        top.getServiceNamed("queue-lock").store.unlock()
        # a new master: the queued removal is known, none is added
        again = self.make(reactor)
        again.startService()
        self.addCleanup(again.stopService)
        self.assertEqual(again.getServiceNamed("leases").keeper.jobs,
                         {ended.uuid: job_id})
        self.assertEqual([row[0] for row in again.queue.query_jobs(
            None, ["id"])], [job_id])

    def test_ssconf_files_once_per_burst_of_changes(self):
        from ganeti.backend import files
        written = []
        original = files.write_ssconf_files
        self.patch(files, "write_ssconf_files", lambda paths, values: (
            written.append(values["cluster_tags"]) or
            original(paths, values)))
        reactor = MemoryReactorClock()
        top = self.make(reactor)
        top.startService()
        self.addCleanup(top.stopService)
        self.assertEqual(written, [[]])
        for tag in ("a", "b", "c"):
            top.cfg.add_tags("cluster", None, [tag])
        self.assertEqual(written, [[]])
        reactor.advance(0)
        # one write, of the newest values
        self.assertEqual(written, [[], ["a", "b", "c"]])
        with open(self.paths.ssconf_file("cluster_tags")) as f:
            self.assertEqual(f.read(), "a\nb\nc\n")

    def test_node_checks_can_be_turned_off(self):
        options = masterd.Options()
        options.parseOptions(["--root", self.paths.root,
                              "--node-check-interval", "0"])
        top = masterd.makeService(options, reactor=MemoryReactorClock(),
                                  writer=InlineWriter())
        self.addCleanup(top.getServiceNamed("queue-lock").store.unlock)
        self.assertNotIn("nodehealth", [child.name for child in top])

    def test_job_queue_limits_and_archiving_options(self):
        """The query job budget and the archiving timer follow the
        options; --job-archive-interval 0 turns the timer off."""
        def build(*args):
            options = masterd.Options()
            options.parseOptions(["--root", self.paths.root] + list(args))
            top = masterd.makeService(options, reactor=MemoryReactorClock(),
                                      writer=InlineWriter())
            self.addCleanup(top.getServiceNamed("queue-lock").store.unlock)
            return top
        top = build()
        timer = top.getServiceNamed("job-archive")
        self.assertEqual((timer.step, timer.age), (300, 6 * 3600))
        self.assertEqual((top.jobs.query_budget.total,
                          top.jobs.query_budget.per_client), (200, 20))
        top.getServiceNamed("queue-lock").store.unlock()
        top = build("--job-archive-interval", "1m", "--job-archive-age",
                    "2d", "--max-query-jobs", "7",
                    "--max-query-jobs-per-client", "3")
        timer = top.getServiceNamed("job-archive")
        self.assertEqual((timer.step, timer.age), (60, 2 * 86400))
        self.assertEqual((top.jobs.query_budget.total,
                          top.jobs.query_budget.per_client), (7, 3))
        top.getServiceNamed("queue-lock").store.unlock()
        top = build("--job-archive-interval", "0")
        self.assertNotIn("job-archive", [child.name for child in top])

    def test_query_cache_options(self):
        """The query cache keeps live data 2 s by default, as long as
        --query-live-ttl says, and is off with --no-query-cache."""
        def build(*args):
            options = masterd.Options()
            options.parseOptions(["--root", self.paths.root] + list(args))
            top = masterd.makeService(options, reactor=MemoryReactorClock(),
                                      writer=InlineWriter())
            self.addCleanup(top.getServiceNamed("queue-lock").store.unlock)
            return top
        self.assertEqual(build().query_cache.live_ttl, 2.0)
        self.assertEqual(build("--query-live-ttl", "0.5")
                         .query_cache.live_ttl, 0.5)
        self.assertIsNone(build("--no-query-cache").query_cache)
        options = masterd.Options()
        err = self.assertRaises(
            usage.UsageError, options.parseOptions,
            ["--root", self.paths.root, "--query-live-ttl", "-1"])
        self.assertEqual(str(err), "--query-live-ttl: must not be negative,"
                         " got -1.0")

    def test_allocator_options(self):
        """The master finds allocators where --iallocator-search-path says,
        first, and kills them after --iallocator-timeout."""
        options = masterd.Options()
        options.parseOptions(["--root", self.paths.root,
                              "--iallocator-search-path", "/opt/a:/opt/b",
                              "--iallocator-search-path", "/opt/c",
                              "--iallocator-timeout", "7.5"])
        top = masterd.makeService(options, reactor=MemoryReactorClock(),
                                  writer=InlineWriter())
        self.addCleanup(top.getServiceNamed("queue-lock").store.unlock)
        top.startService()
        self.addCleanup(top.stopService)
        registry = top.ctx.allocators
        self.assertEqual(registry.search_path[:3],
                         ["/opt/a", "/opt/b", "/opt/c"])
        self.assertEqual(registry.search_path[3:], [
            os.path.join(self.paths.root, "usr/local/lib/ganeti/iallocators"),
            os.path.join(self.paths.root, "usr/lib/ganeti/iallocators")])
        self.assertEqual(registry.timeout, 7.5)

    def test_second_master_refused_before_reading_anything(self):
        first = self.make(MemoryReactorClock())
        first.startService()
        before = snapshot(self.paths.root)
        reactor = MemoryReactorClock()
        second = self.make(reactor)
        err = self.assertRaises(errors.JobQueueLocked, second.startService)
        self.assertIn("pid %d holds the lock file %s"
                      % (os.getpid(), os.path.join(self.paths.queue_dir,
                                                   "lock")), str(err))
        self.assertEqual(snapshot(self.paths.root), before)
        self.assertIsNone(second.cfg)
        self.assertIsNone(second.queue)
        self.assertEqual(reactor.unixServers, [])
        self.successResultOf(first.stopService())

    def test_socket_that_cannot_be_bound_is_raised(self):
        reactor = _RaisingReactorClock(
            listenException=error.CannotListenError(
                None, self.paths.master_socket,
                OSError(98, "Address in use")))
        top = self.make(reactor)
        err = self.assertRaises(masterd.MasterSocketError, top.startService)
        self.assertEqual(str(err), "Cannot listen on the master socket %s:"
                         " [Errno 98] Address in use"
                         % self.paths.master_socket)


class _RaisingReactorClock(RaisingMemoryReactor, task.Clock):
    """Refuses to listen; tells the time (the master reads its files'
    timestamps against it at start)."""

    def __init__(self, *args, **kwargs):
        RaisingMemoryReactor.__init__(self, *args, **kwargs)
        task.Clock.__init__(self)


class RapiServiceTests(unittest.TestCase):

    def options(self, *args):
        options = rapi.Options()
        options.parseOptions(["--root", self.mktemp(), "--bind", "127.0.0.1",
                              "--port", "5080"] + list(args))
        return options

    def test_plain_http(self):
        reactor = MemoryReactorClock()
        top = rapi.makeService(self.options("--no-ssl"), reactor=reactor)
        self.assertEqual(reactor.tcpServers, [])
        top.startService()
        [(port, factory, _, interface)] = reactor.tcpServers
        self.assertEqual((port, interface), (5080, "127.0.0.1"))
        # the connection limits come first, then the site
        self.assertIsInstance(factory, ConnectionLimiter)
        self.assertIsInstance(factory.wrappedFactory, Site)
        self.assertEqual(reactor.sslServers, [])
        self.successResultOf(top.stopService())

    def test_https_with_the_rapi_certificate(self):
        pem = os.path.abspath(self.mktemp())
        crypto.generate_cluster_certificate(pem, "cluster.example.com")
        options = self.options("-C", pem)
        self.assertEqual(rapi.listen_description(options),
                         "tcp:port=5080:interface=127.0.0.1")
        reactor = MemoryReactorClock()
        top = rapi.makeService(options, reactor=reactor)
        top.startService()
        # TLS inside the connection limits: a connection over them costs
        # no TLS work
        [(port, factory, _, interface)] = reactor.tcpServers
        self.assertEqual((port, interface), (5080, "127.0.0.1"))
        self.assertIsInstance(factory, ConnectionLimiter)
        tls = factory.wrappedFactory
        self.assertIsInstance(tls, TLSMemoryBIOFactory)
        self.assertIsInstance(tls.wrappedFactory, Site)
        # it serves the certificate given
        conn = tls._creatorCallable(tls.buildProtocol(None))
        self.assertEqual(crypto.certificate_digest(conn.get_certificate()),
                         crypto.load_cluster_certificate(pem).digest())
        self.successResultOf(top.stopService())

    def test_ipv6_address_quoted(self):
        options = self.options("--no-ssl")
        options["bind"] = "::1"
        self.assertEqual(rapi.listen_description(options),
                         "tcp:port=5080:interface=\\:\\:1")

    def test_port_that_cannot_be_bound_is_raised(self):
        reactor = RaisingMemoryReactor(listenException=error.CannotListenError(
            "127.0.0.1", 5080, OSError(98, "Address in use")))
        top = rapi.makeService(self.options("--no-ssl"), reactor=reactor)
        err = self.assertRaises(error.CannotListenError, top.startService)
        self.assertIn("127.0.0.1:5080", str(err))
