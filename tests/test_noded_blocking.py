"""The node daemon's reactor stays free while procedures wait on the disk.

* ``ProcedureTableTests``: blocking procedures go through ``run_blocking``
  after their arguments were checked; ordered ones run one at a time.
* ``LogWriterTests``: a script's log file is written by pool work, in
  order, one write at a time.
* ``DaemonPoolTests``: ``--blocking-threads`` and the pool's life in the
  daemon's service tree.
* ``NoFileWorkOnTheReactorTests``: an in-process daemon with its thread
  pool; the file work of the procedures is seen happening in a worker
  thread, never in the reactor's.
* ``BigBodiesTests``: big request bodies and replies are decoded and
  encoded in the pool, small ones on the reactor; 413 as before.
  ``SlicedConversionTests``: base64 and reply strings converted in slices
  give the same results.
* A real ``ganeti-noded`` process whose calls wait on FIFOs:
  tests/integration/test_noded_stall.py.
"""

import base64
import json
import os
import shutil
import threading
from io import BytesIO

from twisted.internet import defer, reactor
from twisted.logger import Logger
from twisted.python import usage
from twisted.trial import unittest
from twisted.web import client as web_client, server
from twisted.web.http_headers import Headers

from ganeti import crypto
from ganeti import errors
from ganeti import ht
from ganeti import pathutils
from ganeti.backend import files, os_api, process
from ganeti.server import noded
from ganeti.server.noded import http
from ganeti.server.noded import procedure as proc_mod
from ganeti.server.noded.procedure import Arg, ProcedureTable, procedure
from ganeti.server.noded.procedures import NodeProcedures
from ganeti.utils import io
from tests.test_crypto import cluster_cert, listen_noded, rpc_client
from tests.places import free_port
from tests.test_noded import kill_fake_instances, spec
from tests.test_os import ETC_OS

log = Logger()

MiB = 1024 * 1024


# ---------------------------------------------------------------------------
# The declaration

class _Table(ProcedureTable):

    def __init__(self, run_blocking):
        self.done = []
        ProcedureTable.__init__(self, run_blocking)

    @procedure(Arg("n", ht.NONNEG_INT), blocking=True)
    def work(self, n):
        self.done.append(("work", n))
        return n * 2

    @procedure(Arg("n", ht.NONNEG_INT), blocking=True, ordered=True)
    def write(self, n):
        self.done.append(("write", n))
        return n

    @procedure()
    def ping(self):
        return "pong"


class _ManualRunner(object):
    """run_blocking whose work runs when the test says so."""

    def __init__(self):
        self.queue = []

    def __call__(self, fn, *args):
        d = defer.Deferred()
        self.queue.append((fn, args, d))
        return d

    def finish_next(self):
        fn, args, d = self.queue.pop(0)
        d.callback(fn(*args))


class ProcedureTableTests(unittest.TestCase):

    def test_blocking_work_goes_to_the_runner(self):
        runner = _ManualRunner()
        table = _Table(runner)
        d = table.call("work", [21])
        self.assertNoResult(d)
        self.assertEqual(table.done, [])      # not run on the caller's thread
        runner.finish_next()
        self.assertEqual(self.successResultOf(d), 42)
        # procedures not declared blocking do not use it
        self.assertEqual(self.successResultOf(table.call("ping", [])),
                         "pong")
        self.assertEqual(runner.queue, [])

    def test_bad_arguments_never_reach_the_runner(self):
        runner = _ManualRunner()
        table = _Table(runner)
        failure = self.failureResultOf(table.call("work", [-1]),
                                       errors.ParameterError)
        self.assertIn("argument 'n' of work", str(failure.value))
        self.failureResultOf(table.call("work", {"m": 1}),
                             errors.ParameterError)
        self.assertEqual(runner.queue, [])

    def test_ordered_work_runs_one_at_a_time_in_order(self):
        runner = _ManualRunner()
        table = _Table(runner)
        first = table.call("write", [1])
        second = table.call("write", [2])
        # only the first is handed to the pool; the second waits for it
        self.assertEqual(len(runner.queue), 1)
        # unordered blocking work does not wait for ordered work
        table.call("work", [3])
        self.assertEqual(len(runner.queue), 2)
        runner.finish_next()
        self.assertEqual(self.successResultOf(first), 1)
        self.assertEqual([f.__name__ for f, _, _ in runner.queue],
                         ["work", "write"])
        runner.finish_next()
        runner.finish_next()
        self.assertEqual(self.successResultOf(second), 2)
        self.assertEqual(table.done, [("write", 1), ("work", 3),
                                      ("write", 2)])

    def test_declaration_mistakes_are_refused(self):
        def declare_async():
            @procedure(blocking=True)
            async def f(self):
                pass

        def declare_ordered_only():
            @procedure(ordered=True)
            def g(self):
                pass
        self.assertRaises(TypeError, declare_async)
        self.assertRaises(TypeError, declare_ordered_only)

    def test_the_declared_blocking_procedures(self):
        # docs/noded.rst lists these; the others' file work goes through
        # run_blocking from inside them
        procs = NodeProcedures(None, None, None, None, None,
                               run_blocking=proc_mod.INLINE)
        self.assertEqual(procs.blocking_names(),
                         ["export_finalize", "export_info", "export_list",
                          "export_read_chunk", "export_remove",
                          "extstorage_diagnose", "jobqueue_set_drain_flag",
                          "master_vote_info",
                          "merge_forget_backup", "merge_info",
                          "node_demote_from_mc", "os_diagnose",
                          "set_watcher_pause", "transfer_finish",
                          "transfer_read_chunk", "transfer_remove",
                          "transfer_write_chunk", "write_ssconf_files"])


class _LogFile(BytesIO):
    name = "test.log"
    fail = False

    def write(self, data):
        if self.fail:
            raise OSError(28, "No space left on device")
        return BytesIO.write(self, data)

    def close(self):
        self.final = self.getvalue()
        BytesIO.close(self)


class LogWriterTests(unittest.TestCase):
    """A script's log: written by run_blocking work, one write at a time."""

    def test_writes_in_order_one_at_a_time(self):
        runner = _ManualRunner()
        f = _LogFile()
        writer = process._LogWriter(runner, f)
        writer.write(b"a")
        writer.write(b"b")
        writer.write(b"c")
        self.assertEqual(len(runner.queue), 1)      # one write in flight
        runner.finish_next()
        self.assertEqual(len(runner.queue), 1)      # the rest, gathered
        self.assertEqual(runner.queue[0][1][1], b"bc")
        closed = defer.Deferred.fromCoroutine(writer.close())
        runner.finish_next()
        self.assertNoResult(closed)                 # closing is file work
        runner.finish_next()
        self.successResultOf(closed)
        self.assertEqual(f.final, b"abc")

    def test_slow_disk_loses_old_output(self):
        self.patch(process, "OUTPUT_CAP", 4)
        runner = _ManualRunner()
        f = _LogFile()
        writer = process._LogWriter(runner, f)
        writer.write(b"a")
        writer.write(b"123")
        writer.write(b"456")
        runner.finish_next()
        runner.finish_next()
        closed = defer.Deferred.fromCoroutine(writer.close())
        runner.finish_next()
        self.successResultOf(closed)
        self.assertEqual(f.final, b"a[2 bytes of output not logged: the log"
                                  b" was written too slowly]\n3456")

    def test_write_error_ends_logging_not_the_command(self):
        f = _LogFile()
        writer = process._LogWriter(proc_mod.INLINE, f)
        writer.write(b"a")
        f.fail = True
        writer.write(b"b")
        f.fail = False
        writer.write(b"c")              # not logged any more
        self.successResultOf(defer.Deferred.fromCoroutine(writer.close()))
        self.assertEqual(f.final, b"a")


# ---------------------------------------------------------------------------
# The pool in the daemon's service tree

class DaemonPoolTests(unittest.TestCase):

    def setUp(self):
        self.root = os.path.abspath(self.mktemp())
        self.addCleanup(shutil.rmtree, self.root, True)
        paths = pathutils.Paths(self.root)
        paths.ensure_dirs()
        cert = cluster_cert(os.path.join(self.root, "certs"))
        shutil.copy(cert.path, crypto.server_pem_path(paths))

    def parse(self, *argv):
        options = noded.Options()
        options.parseOptions(["--root", self.root, "--bind", "127.0.0.1",
                              "--port", str(free_port("127.0.0.1")),
                              "--no-mlock", "--os-search-path", ETC_OS]
                             + list(argv))
        return options

    def test_option(self):
        self.assertEqual(self.parse()["blocking-threads"], 8)
        self.assertEqual(self.parse("--blocking-threads", "3")
                         ["blocking-threads"], 3)
        for bad in ("-1", "129"):
            err = self.assertRaises(usage.UsageError, self.parse,
                                    "--blocking-threads", bad)
            self.assertIn("--blocking-threads must be from 0 to 128",
                          str(err))

    @defer.inlineCallbacks
    def test_threads_live_with_the_service(self):
        top = noded.makeService(self.parse("--blocking-threads", "3"),
                                reactor)
        pool = top.getServiceNamed("blocking-pool")
        # started before the port opens, stopped after it closed
        self.assertIs(list(top)[0], pool)
        self.assertEqual((pool.pool.max, pool.pool.threads), (3, []))
        top.startService()
        stopped = []

        def stop():
            if not stopped:
                return top.stopService()
        self.addCleanup(stop)
        oses = yield top.procedures.call("os_diagnose", [])
        self.assertIn("busybox", [o["name"] for o in oses])
        threads = list(pool.pool.threads)
        self.assertEqual(len(threads), 1)
        self.assertIn("noded-blocking", threads[0].name)
        stopped.append(True)
        yield top.stopService()
        self.assertTrue(pool.pool.joined)
        self.assertFalse(threads[0].is_alive())


# ---------------------------------------------------------------------------
# Where the file work runs, in-process

class _ThreadWatchingTestCase(unittest.TestCase):
    """An in-process node daemon (its thread pool, a file storage
    directory, the cluster certificate) and a record of which thread ran
    the functions the test watches."""

    timeout = 60

    def setUp(self):
        self.root = os.path.abspath(self.mktemp())
        self.addCleanup(shutil.rmtree, self.root, True)
        self.store = os.path.join(self.root, "srv/ganeti/file-storage")
        os.makedirs(self.store)
        self.cert = cluster_cert(os.path.join(self.root, "certs"))
        self.seen = []      # (what, ran on the reactor thread)
        self.reactor_thread = threading.get_ident()   # tests run there

    def on_reactor(self):
        return threading.get_ident() == self.reactor_thread

    def watch(self, module, name):
        """Record each call of ``module.name`` and where it ran."""
        original = getattr(module, name)

        def watched(*args, **kwargs):
            self.seen.append((name, self.on_reactor()))
            return original(*args, **kwargs)
        self.patch(module, name, watched)


class NoFileWorkOnTheReactorTests(_ThreadWatchingTestCase):
    """Every file operation the procedures do (as seen through the helpers
    they use: the allowed storage directories, atomic writes, OS
    definitions, script logs, disk chunks) runs in a pool thread."""

    def setUp(self):
        _ThreadWatchingTestCase.setUp(self)
        self.watch(os_api, "load_os")
        self.watch(io, "atomic_write")
        self.watch(process, "_open_log")
        self.watch(process, "_write_log")
        self.watch(files, "write_ssconf_files")
        from ganeti.server.noded import disks, node
        self.watch(disks, "_read_chunk")
        self.watch(disks, "_write_chunk")
        self.watch(node, "_verify_files")
        self.port, self.procs = listen_noded(
            self, self.cert, root=self.root, os_search_path=[ETC_OS])
        self.addCleanup(kill_fake_instances, self.root)
        # the allowed file storage directories, read at each storage call
        dirs = self.procs.storage_ctx.file_storage_dirs

        def watched_dirs():
            self.seen.append(("file_storage_dirs", self.on_reactor()))
            return dirs()
        self.procs.storage_ctx.file_storage_dirs = watched_dirs
        self.client = rpc_client(self, self.cert, self.port)


    async def ok(self, procedure, *args):
        result = await self.client.call("n", procedure, list(args))
        self.assertTrue(result.success, (procedure, result.fail_msg))
        return result.payload

    @defer.inlineCallbacks
    def test_file_work_runs_in_the_pool(self):
        yield defer.Deferred.fromCoroutine(self._calls())
        on_reactor = sorted(set(what for what, reactor_thread in self.seen
                                if reactor_thread))
        self.assertEqual(on_reactor, [], "file work on the reactor")
        self.assertEqual(
            sorted(set(what for what, _ in self.seen)),
            ["_open_log", "_read_chunk", "_verify_files", "_write_chunk",
             "_write_log", "atomic_write", "file_storage_dirs", "load_os",
             "write_ssconf_files"])

    async def _calls(self):
        disk = {"dev_type": "file", "size": 4, "mode": "rw",
                "logical_id": ["loop", os.path.join(self.store, "i1/disk0")]}
        await self.ok("blockdev_create", disk, 4)
        await self.ok("blockdev_grow", disk, 1)
        self.assertEqual(await self.ok("blockdev_getdimensions", [disk]),
                         [{"size": 5 * MiB, "spindles": None}])
        await self.ok("blockdev_assemble", disk)
        await self.ok("blockdev_status", [disk])
        await self.ok("blockdev_write_chunk", disk, 0, "R0FORVRJ")
        chunk = await self.ok("blockdev_read_chunk", disk, 0, 6)
        self.assertEqual(chunk["data"], "R0FORVRJ")
        await self.ok("blockdev_truncate", disk, 5 * MiB)
        await self.ok("node_info", [["file", self.store, []]])
        await self.ok("storage_list", "file")
        await self.ok("storage_execute", "file", [], self.store,
                      "fix-consistency")
        await self.ok("verify_node_files", [self.store])
        await self.ok("upload_file", "/var/lib/ganeti/known_hosts", "x\n")
        await self.ok("write_ssconf_files", {"cluster_name": "c"})
        self.assertIn("busybox", [o["name"] for o in
                                  await self.ok("os_diagnose")])
        await self.ok("os_validate", True, "busybox+default")
        instance = {"name": "i1.example.com", "os": "busybox+minimal",
                    "hypervisor": "fake", "hvparams": {}, "beparams": {},
                    "osparams": {}, "nics": [], "disks_info": [disk]}
        await self.ok("instance_os_add", instance)
        await self.ok("instance_start", spec(disks=[disk]))
        await self.ok("instance_shutdown", "inst1.example.com", "fake", 10)
        await self.ok("file_storage_dir_rename",
                      os.path.join(self.store, "i1"),
                      os.path.join(self.store, "i2"))
        disk["logical_id"][1] = os.path.join(self.store, "i2/disk0")
        await self.ok("blockdev_remove", disk)
        await self.ok("node_demote_from_mc")


# ---------------------------------------------------------------------------
# Big request bodies and replies

class BigBodiesTests(_ThreadWatchingTestCase):
    """Bodies and replies over INLINE_JSON_MAX are decoded and encoded in
    the pool; small ones on the reactor."""

    def setUp(self):
        _ThreadWatchingTestCase.setUp(self)
        self.watch(http, "_decode_body")
        self.watch(http, "_encode")
        self.port, self.procs = listen_noded(self, self.cert, root=self.root)
        self.client = rpc_client(self, self.cert, self.port)
        pool = web_client.HTTPConnectionPool(reactor, persistent=False)
        self.agent = web_client.Agent(
            reactor, contextFactory=crypto.ClientPolicy(self.cert),
            pool=pool)

    async def post(self, path, body, port=None):
        response = await self.agent.request(
            b"POST", ("https://127.0.0.1:%d%s"
                      % (port or self.port, path)).encode(),
            Headers({b"content-type": [b"application/json"]}),
            web_client.FileBodyProducer(BytesIO(body)))
        raw = await web_client.readBody(response)
        return response.code, json.loads(raw)

    def where(self, name):
        """For each call of ``name``: True if on the reactor thread."""
        return [on_reactor for what, on_reactor in self.seen if what == name]

    @defer.inlineCallbacks
    def test_upload_of_a_big_file(self):
        data = os.urandom(MiB)
        result = yield self.client.call("n", "upload_file", [
            "/var/lib/ganeti/config.data",
            ["base64", base64.b64encode(data).decode()]])
        self.assertTrue(result.success, result.fail_msg)
        with open(os.path.join(self.root,
                               "var/lib/ganeti/config.data"), "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(self.where("_decode_body"), [False])
        self.assertEqual(self.where("_encode"), [True])   # [true, true]
        result = yield self.client.call("n", "version")
        self.assertEqual(self.where("_decode_body"), [False, True])

    @defer.inlineCallbacks
    def test_big_body_that_is_not_json(self):
        code, reply = yield defer.Deferred.fromCoroutine(self.post(
            "/version", b"[" + b"1," * (http.INLINE_JSON_MAX // 2) + b"x]"))
        self.assertEqual(code, 400)
        self.assertIn("version: the request body is not JSON", reply[1])
        self.assertEqual(self.where("_decode_body"), [False])

    @defer.inlineCallbacks
    def test_big_reply(self):
        path = os.path.join(self.store, "i/disk0")
        os.makedirs(os.path.dirname(path))
        data = os.urandom(MiB)
        with open(path, "wb") as f:
            f.write(data)
        disk = {"dev_type": "file", "logical_id": ["loop", path]}
        result = yield self.client.call("n", "blockdev_read_chunk",
                                        [disk, 0, MiB])
        self.assertTrue(result.success, result.fail_msg)
        self.assertEqual(base64.b64decode(result.payload["data"]), data)
        self.assertEqual(self.where("_encode"), [False])
        # a zero chunk is a small reply
        with open(path, "r+b") as f:
            f.write(bytes(MiB))
        result = yield self.client.call("n", "blockdev_read_chunk",
                                        [disk, 0, MiB])
        self.assertEqual(result.payload["data"], None)
        self.assertEqual(self.where("_encode"), [False, True])

    @defer.inlineCallbacks
    def test_too_big(self):
        site = server.Site(http.NodedHttpApi(reactor, self.procs,
                                             max_body=1000).resource())
        port = reactor.listenSSL(0, site,
                                 crypto.server_context_factory(self.cert),
                                 interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        code, reply = yield defer.Deferred.fromCoroutine(self.post(
            "/version", b"[" + b" " * 1000 + b"]", port.getHost().port))
        self.assertEqual(code, 413)
        self.assertIn("request body of 1002 bytes is bigger than the 1000"
                      " allowed", reply[1])
        self.assertEqual(self.where("_decode_body"), [])

    def test_size_estimate(self):
        limit = 1000
        self.assertFalse(http.json_bigger_than("x" * 900, limit))
        self.assertTrue(http.json_bigger_than("x" * 1000, limit))
        self.assertTrue(http.json_bigger_than({"a": ["x" * 600] * 2},
                                              limit))
        self.assertTrue(http.json_bigger_than(list(range(1000)), limit))
        self.assertFalse(http.json_bigger_than(
            {"size": 1, "data": None, "names": ["a", "b"]}, limit))
        # it may overestimate (a thread hop too many), not by much
        for value in ("x" * 2000, list(range(300)), [{"k": 1}] * 100,
                      [{"k": 1}] * 40, {"k%d" % i: "v" for i in range(50)}):
            size = len(json.dumps(value))
            if size > limit:
                self.assertTrue(http.json_bigger_than(value, limit), size)
            elif size < limit / 2:
                self.assertFalse(http.json_bigger_than(value, limit), size)


class SlicedConversionTests(unittest.TestCase):
    """Big base64 and JSON strings are converted in slices (so that the
    reactor thread gets the interpreter in between), to the same result."""

    def test_json(self):
        self.patch(http, "SLICE", 7)
        values = ["x" * 20, "\xe9\u2028\ud800\"\\\n" * 5 + "a" * 30,
                  [1, "y" * 30, {"a": "z" * 40, "b": [None, 1.5, True]}],
                  {"k": [1, 2, 3]}, {1: "x" * 50}, (1, "w" * 9), [], {},
                  "short", float("nan"), {"size": 3, "data": "q" * 50}]
        for value in values:
            self.assertEqual(http._dumps(value), json.dumps(value))

    def test_base64(self):
        self.patch(files, "SLICE", 8)
        for data in (b"", b"a", os.urandom(5), os.urandom(6),
                     os.urandom(17), os.urandom(100)):
            text = base64.b64encode(data).decode()
            self.assertEqual(files.b64encode(data), text)
            self.assertEqual(files.b64decode(text), data)
            self.assertEqual(files.b64decode(text.encode()), data)
        for bad in ("QUJD=EFG" + "QUJD" * 3, "QUJDRE!QQ==",
                    "QUJDREVGR0hJQ", "QUJDREVG\xe9", "QUJDREVG QUJD"):
            self.assertRaises(ValueError, base64.b64decode, bad,
                              validate=True)
            self.assertRaises(ValueError, files.b64decode, bad)


# ---------------------------------------------------------------------------
# A real daemon whose calls wait on FIFOs
