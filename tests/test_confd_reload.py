"""confd reloads: built off the reactor thread and paced, coalesced, swapped
in whole; a stream of queries across reloads loses no answer and never
mixes two versions.  Also the per-source rate limit's default."""

import gc
import json
import threading
import weakref

from twisted.internet import defer, reactor
from twisted.internet.protocol import DatagramProtocol
from twisted.python import failure
from twisted.trial import unittest

from ganeti.confd import client as confd_client
from ganeti.confd import guards
from ganeti.confd import pacing
from ganeti.confd import queries
from ganeti.confd import reloader
from ganeti.confd import server
from ganeti.confd import wire
from ganeti.server import confd as confd_service

from tests.fakes import ClockTestCase
from tests.test_confd_fixtures import (KEY, MASTER, NODE3, T0, FakeUDPReactor,
                                       build_cluster, reply_of, request)

SERVER = ("127.0.0.2", 1814)
ROLES = [("offline", wire.NODE_ROLE_OFFLINE),
         ("drained", wire.NODE_ROLE_DRAINED),
         (None, wire.NODE_ROLE_REGULAR)]


class _ManualRunner(object):
    """Stands in for the worker thread: the test says when the work runs
    (it then reads the file) and, separately, when its result arrives."""

    def __init__(self):
        self.jobs = []  # [Deferred, f, args, result or None]

    def __call__(self, f, *args):
        d = defer.Deferred()
        self.jobs.append([d, f, args, None])
        return d

    def compute(self):
        job = self.jobs[0]
        try:
            job[3] = job[1](*job[2])
        except Exception:
            job[3] = failure.Failure()

    def deliver(self):
        d, _, _, result = self.jobs.pop(0)
        d.callback(result)

    def run(self):
        self.compute()
        self.deliver()


class _Client(DatagramProtocol):
    """Sends role queries for NODE3; keeps (rsalt, answer, serial) of every
    reply."""

    def __init__(self, clock):
        self.clock = clock
        self.sent = []
        self.replies = []

    def ask(self, count):
        for _ in range(count):
            rsalt = "q%d" % len(self.sent)
            self.sent.append(rsalt)
            self.transport.write(request(KEY, wire.REQ_NODE_ROLE_BYNAME, NODE3,
                                         rsalt=rsalt,
                                         stamp=int(self.clock.seconds())),
                                 SERVER)

    def datagramReceived(self, data, addr):
        salt, reply = reply_of(KEY, data)
        self.replies.append((salt, reply.answer, reply.serial))


class ReloadUnderLoadTests(ClockTestCase):
    """A stream of queries while config.data changes and is reloaded."""

    def make_clock(self):
        return FakeUDPReactor()

    def setUp(self):
        ClockTestCase.setUp(self)
        self.clock.advance(T0)
        self.cluster = build_cluster(self.mktemp())
        self.store = self.cluster.store
        self.runner = _ManualRunner()
        self.watcher = reloader.ConfigWatcher(
            self.cluster.paths.config_file, self.clock, runner=self.runner)
        self.addCleanup(self.watcher.stop)
        self.processor = server.ConfdProcessor(KEY, self.watcher, self.clock)
        self.clock.attach(SERVER, server.ConfdProtocol(self.processor))
        self.client = _Client(self.clock)
        self.clock.listenUDP(0, self.client)
        # cluster serial -> the role NODE3 has in that version
        self.versions = {self.store.cluster.serial_no: wire.NODE_ROLE_REGULAR}

    def change(self, step):
        state, role = ROLES[step % len(ROLES)]
        self.store.set_node_params(NODE3, offline=state == "offline",
                                   drained=state == "drained")
        self.versions[self.store.cluster.serial_no] = role
        return self.store.cluster.serial_no

    def served(self):
        return [serial for _, _, serial in self.client.replies]

    def test_stream_across_reloads_loses_nothing_and_mixes_nothing(self):
        self.watcher.start()
        first = self.store.cluster.serial_no
        self.client.ask(10)
        # 1: a change, polled, built while queries keep coming
        s1 = self.change(0)
        self.clock.advance(1)
        self.assertEqual(len(self.runner.jobs), 1)
        self.client.ask(10)
        self.runner.compute()  # the worker reads and indexes s1
        self.client.ask(10)    # ... and the old version still answers
        self.assertEqual(set(self.served()), {first})
        self.runner.deliver()  # the swap
        self.client.ask(10)
        self.assertEqual(self.served()[-10:], [s1] * 10)
        # 2: while s2 is built, two more changes arrive and are polled
        s2 = self.change(1)
        self.clock.advance(1)
        self.runner.compute()
        s3 = self.change(2)
        self.clock.advance(1)
        self.client.ask(5)
        s4 = self.change(3)
        self.clock.advance(1)
        self.watcher.reload()  # asked for explicitly, too
        self.client.ask(5)
        self.assertEqual(len(self.runner.jobs), 1)  # no second build yet
        self.runner.deliver()
        self.client.ask(5)
        self.assertEqual(self.served()[-5:], [s2] * 5)
        # ... followed by one build of the newest file: s3 is skipped
        self.assertEqual(len(self.runner.jobs), 1)
        self.runner.run()
        self.assertEqual(self.runner.jobs, [])
        self.client.ask(5)
        self.assertEqual(self.served()[-5:], [s4] * 5)
        self.clock.advance(1)
        self.assertEqual(self.runner.jobs, [])

        # every query answered, once, in order
        self.assertEqual([salt for salt, _, _ in self.client.replies],
                         self.client.sent)
        # each answer belongs to the version whose serial it carries
        for salt, answer, serial in self.client.replies:
            self.assertEqual(answer, self.versions[serial], salt)
        # versions only move forward, and s3 was never served
        self.assertEqual(self.served(), sorted(self.served()))
        self.assertEqual(sorted(set(self.served())), [first, s1, s2, s4])
        self.assertNotIn(s3, self.served())
        self.assertEqual(self.watcher.reloads, 4)
        self.assertEqual(self.watcher.builds_coalesced, 2)
        self.assertEqual(self.processor.stats()["answered"],
                         len(self.client.sent))

    def test_failed_build_keeps_serving_and_is_not_retried(self):
        self.watcher.start()
        good = self.store.cluster.serial_no
        with open(self.cluster.paths.config_file, "w") as f:
            f.write('{"version": 3000000, "cluster": ')
        self.clock.advance(1)
        self.client.ask(3)
        self.runner.run()
        self.client.ask(3)
        self.assertEqual(self.served(), [good] * 6)
        self.assertEqual(self.watcher.reload_failures, 1)
        self.assertIn("not valid JSON", self.watcher.last_error)
        self.clock.advance(1)
        self.assertEqual(self.runner.jobs, [])
        # repaired: picked up
        self.store.save()
        self.clock.advance(1)
        self.runner.run()
        self.client.ask(1)
        self.assertEqual(self.served()[-1], self.store.cluster.serial_no)


class ThreadedReloadTests(unittest.TestCase):
    """The daemon's set-up: a real worker thread, the real reactor."""

    def setUp(self):
        self.cluster = build_cluster(self.mktemp())
        self.store = self.cluster.store
        self.threads = {"build": set(), "install": set()}
        threads = self.threads
        reactor_thread = threading.get_ident()  # trial runs tests in it

        def in_reactor_thread():
            return threading.get_ident() == reactor_thread

        # set by a test once queries were answered while a build ran
        self.answered = threading.Event()
        answered = self.answered

        def slow_loader(path, pause):
            threads["build"].add(in_reactor_thread())
            snap = reloader.load_snapshot(path, pause)
            # a build of a big config takes a while (pausing as it goes)
            for _ in range(1000):
                if answered.wait(0.005):
                    break
                pause()
            return snap

        class Watcher(reloader.ConfigWatcher):
            def _install(self, snapshot, signature):
                threads["install"].add(in_reactor_thread())
                return reloader.ConfigWatcher._install(self, snapshot,
                                                       signature)

        self.watcher = Watcher(self.cluster.paths.config_file, reactor,
                               runner=reloader.ThreadRunner(reactor),
                               pace=pacing.Pacer, loader=slow_loader)
        self.addCleanup(self.watcher.stop)

    def test_build_runs_off_the_reactor_thread(self):
        return defer.Deferred.fromCoroutine(self._off_thread())

    async def _off_thread(self):
        self.answered.set()
        self.watcher.load_now()  # synchronous, before the port opens
        self.assertEqual(self.threads, {"build": {True}, "install": {True}})
        for state in self.threads.values():
            state.clear()
        self.store.set_node_params(NODE3, offline=True)
        self.assertTrue(await self.watcher.reload())
        self.assertEqual(self.threads, {"build": {False}, "install": {True}})
        self.assertEqual(self.watcher.snapshot.serial,
                         self.store.cluster.serial_no)

    def test_queries_answered_over_udp_while_building(self):
        return defer.Deferred.fromCoroutine(self._over_udp())

    async def _over_udp(self):
        self.answered.set()
        self.watcher.load_now()
        self.threads["build"].clear()
        processor = server.ConfdProcessor(KEY, self.watcher, reactor)
        port = reactor.listenUDP(0, server.ConfdProtocol(processor),
                                 interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        client = confd_client.ConfdClient(
            KEY, ["127.0.0.1"], port=port.getHost().port, reactor=reactor,
            timeout=5)
        self.addCleanup(client.close)
        versions = {self.store.cluster.serial_no: wire.NODE_ROLE_REGULAR}
        seen = []
        during = []
        for step in range(3):
            state, role = ROLES[step]
            self.store.set_node_params(NODE3, offline=state == "offline",
                                       drained=state == "drained")
            versions[self.store.cluster.serial_no] = role
            self.answered.clear()
            built = self.watcher.reload()
            count = 0
            while not built.called:
                result = await client.request(wire.REQ_NODE_ROLE_BYNAME,
                                              NODE3)
                seen.append((result.answer, result.serial))
                if not built.called:
                    count += 1  # answered while the build is under way
                if count == 3:
                    self.answered.set()  # enough: the build may end
            during.append(count)
            self.assertTrue(built.result)
            result = await client.request(wire.REQ_NODE_ROLE_BYNAME, NODE3)
            self.assertEqual((result.answer, result.serial),
                             (role, self.store.cluster.serial_no))
        # the reactor kept answering while every build ran
        self.assertTrue(all(count >= 3 for count in during), during)
        for answer, serial in seen:
            self.assertEqual(answer, versions[serial])
        serials = [serial for _, serial in seen]
        self.assertEqual(serials, sorted(serials))
        self.assertEqual(processor.stats()["answered"], len(seen) + 3)
        self.assertEqual(self.threads["build"], {False})


class _TriggerReactor(object):
    """Enough of a reactor for a ThreadRunner: system event triggers and
    callFromThread (queued until the test drains it)."""

    def __init__(self):
        self.triggers = {}
        self.calls = []
        self._lock = threading.Lock()

    def addSystemEventTrigger(self, phase, event, f, *args):
        handle = object()
        self.triggers[handle] = (phase, event, f)
        return handle

    def removeSystemEventTrigger(self, handle):
        del self.triggers[handle]  # KeyError if not registered

    def callFromThread(self, f, *args, **kwargs):
        with self._lock:
            self.calls.append((f, args, kwargs))

    def drain(self):
        with self._lock:
            calls, self.calls = self.calls, []
        for f, args, kwargs in calls:
            f(*args, **kwargs)


class StopTests(unittest.TestCase):

    def test_runner_thread_is_stopped_at_shutdown(self):
        fake = _TriggerReactor()
        runner = reloader.ThreadRunner(fake)
        self.addCleanup(runner.stop)
        self.assertEqual(fake.triggers, {})  # no thread before first use
        ran_in = []
        d = runner(lambda: ran_in.append(threading.get_ident()) or 42)
        (phase, event, shutdown), = fake.triggers.values()
        self.assertEqual((phase, event), ("during", "shutdown"))
        pool = runner._pool
        # the reactor fires the trigger (and forgets it): the thread ends
        # after the work under way, without error
        del fake.triggers[next(iter(fake.triggers))]
        shutdown()
        self.assertFalse(pool.started)
        self.assertFalse([t for t in pool.threads if t.is_alive()])
        fake.drain()
        self.assertEqual(self.successResultOf(d), 42)
        self.assertNotEqual(ran_in, [threading.get_ident()])
        # used again, then stopped by the service: the trigger goes away
        d = runner(lambda: 7)
        self.assertEqual(len(fake.triggers), 1)
        runner.stop()
        self.assertEqual(fake.triggers, {})
        fake.drain()
        self.assertEqual(self.successResultOf(d), 7)

    def test_stop_ends_a_build_under_way(self):
        cluster = build_cluster(self.mktemp())
        started = threading.Event()
        paused = []

        def endless_loader(path, pause):
            started.set()
            for _ in range(100000):
                pause()
                paused.append(1)
            return reloader.load_snapshot(path, pause)

        # each pause waits for the reactor thread, which is busy stopping
        watcher = reloader.ConfigWatcher(
            cluster.paths.config_file, reactor,
            runner=reloader.ThreadRunner(reactor),
            pace=lambda: pacing.Pacer(work=0, yield_to=pacing.ReactorTurn(
                reactor, timeout=0.01)),
            loader=endless_loader)
        watcher.load_now()
        old = watcher.snapshot
        del paused[:]
        built = watcher.reload()
        self.assertTrue(started.wait(10))
        after = watcher.reload()  # would follow the first
        watcher.stop()  # returns: the build ended at a pause
        self.assertLess(len(paused), 100000)
        return defer.gatherResults([built, after]).addCallback(
            self._stopped, watcher, old)

    def _stopped(self, installed, watcher, old):
        self.assertEqual(installed, [False, False])
        self.assertIs(watcher.snapshot, old)
        self.assertEqual(watcher.reload_failures, 0)
        self.assertIsNone(watcher._runner._pool)  # no build after the stop


class PacingTests(unittest.TestCase):

    def test_pacer_rests_after_each_slice_of_work(self):
        now = [0.0]
        slept = []

        def sleep(seconds):
            slept.append((now[0], seconds))
            now[0] += seconds
        # (in units that floats add up exactly)
        pacer = pacing.Pacer(work=2, rest=1, clock=lambda: now[0],
                             sleep=sleep)
        for _ in range(10):
            now[0] += 0.5
            pacer()
        # a rest after every 2 units of work, the slice starting after it
        self.assertEqual(slept, [(2.0, 1), (5.0, 1)])
        self.assertEqual((pacer.rests, pacer.rested), (2, 2))
        now[0] += 10  # waiting for something else is not work
        pacer.restart()
        pacer()
        self.assertEqual(pacer.rests, 2)

    def test_paced_json_is_json(self):
        cluster = build_cluster(self.mktemp())
        with open(cluster.paths.config_file) as f:
            text = f.read()
        calls = []
        self.assertEqual(pacing.loads(text, lambda: calls.append(1)),
                         json.loads(text))
        # a pause after each member of the top level and of its objects
        data = json.loads(text)
        members = sum(1 + (len(v) if isinstance(v, (dict, list)) else 0)
                      for v in data.values())
        self.assertEqual(len(calls), members)
        for doc in ['', '  ', '{', '{"a" 1}', '{"a": 1,}', '[1,]', '[1 2]',
                    '{"a": 1} x', '{1: 2}', '{"a": [1, }', '[{"a": 1}, {]',
                    ' {"a": {"b": [1, 2, {"c": null}]}} ', '"\\ud800"',
                    '{"a": "\x01"}', '[[[[1]]]]', '{"a": NaN}']:
            try:
                expected = ("ok", json.loads(doc))
            except json.JSONDecodeError as err:
                expected = ("error", err.msg, err.pos)
            try:
                got = ("ok", pacing.loads(doc))
            except json.JSONDecodeError as err:
                got = ("error", err.msg, err.pos)
            if doc == '{"a": NaN}':  # NaN != NaN
                self.assertEqual(repr(got), repr(expected))
            else:
                self.assertEqual(got, expected, doc)

    def test_build_pauses_after_every_object(self):
        cluster = build_cluster(self.mktemp())
        store = cluster.store
        calls = []
        snap, signature = reloader.load_snapshot(
            cluster.paths.config_file, lambda: calls.append(1))
        objects = (len(store.instances) + len(store.disks) + len(store.nodes)
                   + len(store.nodegroups))
        # JSON members, upgrade, objects, index: each pauses per object
        self.assertGreaterEqual(len(calls), 4 * objects)
        plain = reloader.build_snapshot(cluster.paths.config_file)
        for req_type, query in [(wire.REQ_PING, None),
                                (wire.REQ_NODE_ROLE_BYNAME, NODE3),
                                (wire.REQ_NODE_PIP_LIST, None),
                                (wire.REQ_INSTANCES_IPS_LIST, None),
                                (wire.REQ_NODE_DRBD, MASTER),
                                (wire.REQ_CONFIG_QUERY, "/cluster")]:
            self.assertEqual(queries.answer(snap, req_type, query).text,
                             queries.answer(plain, req_type, query).text)
        self.assertEqual(signature, reloader._file_signature(
            cluster.paths.config_file))

    def test_snapshots_are_freed_by_reference_counting(self):
        # CollectorFreeze relies on it: snapshots hold no cycles
        cluster = build_cluster(self.mktemp())
        snap = reloader.build_snapshot(cluster.paths.config_file)
        for req_type, query in [(wire.REQ_PING, None),
                                (wire.REQ_INSTANCES_IPS_LIST, None),
                                (wire.REQ_NODE_INSTANCES, MASTER),
                                (wire.REQ_CONFIG_QUERY, "/nodes")]:
            queries.answer(snap, req_type, query)
        refs = [weakref.ref(snap), weakref.ref(snap.store),
                weakref.ref(snap.master)]
        gc.collect()
        gc.disable()
        try:
            del snap
            self.assertEqual([r() for r in refs], [None] * len(refs))
        finally:
            gc.enable()

    def test_release_takes_the_old_snapshot_apart(self):
        cluster = build_cluster(self.mktemp())
        snap = reloader.build_snapshot(cluster.paths.config_file)
        self.assertIn("nodes", snap.config_dict)
        calls = []
        snap.release(lambda: calls.append(1))
        self.assertIsNone(snap._config_dict)
        self.assertEqual((snap.store.instances, snap.instances_by_name),
                         ({}, {}))
        self.assertGreater(len(calls), len(cluster.store.instances))


class _FakeGC(object):
    def __init__(self):
        self.enabled = True
        self.frozen = 0

    def isenabled(self):
        return self.enabled

    def disable(self):
        self.enabled = False

    def enable(self):
        self.enabled = True

    def freeze(self):
        self.frozen += 1


class CollectorFreezeTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.gc = _FakeGC()
        self.patch(reloader, "gc", self.gc)

    def test_collector_is_off_during_builds_then_skips_snapshots(self):
        policy = reloader.CollectorFreeze()
        policy.building()
        self.assertFalse(self.gc.enabled)
        policy.done(True)
        self.assertEqual((self.gc.enabled, self.gc.frozen), (True, 1))
        # a failed build: collector back on, nothing frozen
        policy.building()
        policy.done(False)
        self.assertEqual((self.gc.enabled, self.gc.frozen), (True, 1))
        # a process that runs without the collector keeps it off
        self.gc.enabled = False
        policy.building()
        policy.done(True)
        self.assertEqual((self.gc.enabled, self.gc.frozen), (False, 2))

    def test_watcher_freezes_after_every_swap(self):
        cluster = build_cluster(self.mktemp())
        runner = _ManualRunner()
        watcher = reloader.ConfigWatcher(
            cluster.paths.config_file, self.clock, runner=runner,
            collector=reloader.CollectorFreeze())
        self.addCleanup(watcher.stop)
        watcher.start()
        self.assertEqual(self.gc.frozen, 1)
        cluster.store.set_node_params(NODE3, drained=True)
        self.clock.advance(1)
        self.assertFalse(self.gc.enabled)  # building
        runner.run()
        self.assertEqual((self.gc.enabled, self.gc.frozen), (True, 2))


class NoCyclesTests(unittest.TestCase):
    """What CollectorFreeze relies on: answering queries, good or bad,
    leaves no garbage that only the collector could free."""

    def test_answering_makes_no_reference_cycles(self):
        cluster = build_cluster(self.mktemp())
        processor = server.ConfdProcessor(
            KEY, type("C", (), {"snapshot": reloader.build_snapshot(
                cluster.paths.config_file)})(), _Clock(T0))
        datagrams = []
        for i in range(12):
            datagrams += [
                request(KEY, i, rsalt="a%d" % i),
                request(KEY, wire.REQ_NODE_ROLE_BYNAME, NODE3,
                        rsalt="b%d" % i),
                request(KEY, wire.REQ_NODE_PIP_BY_INSTANCE_IP, {"1": 5},
                        rsalt="c%d" % i),
                request(KEY, wire.REQ_CONFIG_QUERY, "/cluster/cluster_name",
                        rsalt="d%d" % i),
                request(KEY, "x", rsalt="e%d" % i),
                request(b"another key\n", 0, rsalt="f%d" % i),
                request(KEY, 0, rsalt="g%d" % i, stamp=1),
                b"plj0{not json", b"junk"]
        datagrams.append(datagrams[0])  # a replay
        gc.collect()
        gc.disable()
        try:
            for data in datagrams:
                processor.handle(data, "192.0.2.9")
            self.assertEqual(gc.collect(), 0)
        finally:
            gc.enable()
        stats = processor.stats()
        self.assertEqual((stats["answered"], stats["dropped_bad_hmac"],
                          stats["dropped_replay"]), (60, 12, 1))


class _Clock(object):
    def __init__(self, now):
        self.now = now

    def seconds(self):
        return self.now


class RateLimitDefaultTests(unittest.TestCase):

    def test_default_lets_one_busy_node_through(self):
        # Ganeti's confd answers one client about 40,000 pings/s; a node
        # asking that fast for a while is never limited.
        self.assertGreaterEqual(guards.DEFAULT_RATE, 40000)
        opts = confd_service.Options()
        self.assertEqual((opts["rate-limit"], opts["rate-burst"]),
                         (guards.DEFAULT_RATE, guards.DEFAULT_BURST))
        now = [T0]
        clock = type("C", (), {"seconds": lambda self: now[0]})()
        limiter = guards.RateLimiter(clock)
        self.assertEqual(limiter.rate, guards.DEFAULT_RATE)
        refused = 0
        for _ in range(60000):  # 1.5 s at 40,000/s
            now[0] += 1.0 / 40000
            refused += not limiter.allow("192.0.2.7")
        self.assertEqual(refused, 0)
        # a flood far above it is cut to the rate
        for _ in range(300000):  # 1 s at 300,000/s
            now[0] += 1.0 / 300000
            refused += not limiter.allow("192.0.2.7")
        self.assertGreater(refused, 50000)

    def test_option_sets_the_limit(self):
        cluster = build_cluster(self.mktemp())
        opts = confd_service.Options()
        opts.parseOptions(["--root", cluster.paths.root, "--rate-limit",
                           "500", "--rate-burst", "50"])
        svc = confd_service.makeService(opts, reactor=FakeUDPReactor())
        limiter = svc.processor.rate_limiter
        self.assertEqual((limiter.rate, limiter.burst), (500.0, 50.0))
        self.assertEqual(
            [limiter.allow("192.0.2.7") for _ in range(51)].count(False), 1)
        # and the daemon builds reloads in a paced worker thread
        self.assertIsInstance(svc.watcher._runner, reloader.ThreadRunner)
        pacer = svc.watcher._pace()
        self.assertIsInstance(pacer, pacing.Pacer)
        self.assertIsInstance(pacer._yield_to, pacing.ReactorTurn)
        self.assertIsInstance(svc.watcher._collector,
                              reloader.CollectorFreeze)

    def test_help_names_the_default(self):
        text = str(confd_service.Options())
        self.assertIn("40,000 pings/s", text)
        self.assertIn("[default: %s]" % guards.DEFAULT_RATE, text)

