"""The node daemon's procedures through real HTTPS with mutual TLS.

``NodedInProcessTests`` serve an in-process daemon on 127.0.0.1 (random
port) with the fake hypervisor (``ganeti-noded`` as real processes:
tests/integration/test_noded.py).
"""

import json
import os
import signal

from twisted.internet import defer, reactor
from twisted.trial import unittest
from twisted.web import client as web_client
from twisted.web.http_headers import Headers

from ganeti import crypto
from ganeti import pathutils
from ganeti.hypervisor import state
from ganeti.server.noded import make_procedures
from ganeti.server.noded import node as noded_node
from ganeti.server.noded.procedure import INLINE
from tests.test_crypto import cluster_cert, listen_noded, rpc_client
from tests.test_os import ETC_OS, read_install_record

MiB = 1024 * 1024
UUID = "0d5f1d6e-8a4c-4c8e-9a57-2d7c3f1b9e01"


def kill_fake_instances(root):
    """SIGKILL fake-hypervisor instance processes left under ``root``."""
    rt = state.RuntimeDir(root, "fake")
    try:
        names = os.listdir(rt.pid_dir)
    except FileNotFoundError:
        return
    for name in names:
        pid = state.read_pid_file(os.path.join(rt.pid_dir, name))
        if state.process_alive(pid, marker=rt.base):
            os.kill(pid, signal.SIGKILL)


def spec(name="inst1.example.com", disks=(), maxmem=64):
    return {"hypervisor": "fake", "name": name, "uuid": UUID,
            "hvparams": {}, "beparams": {"maxmem": maxmem, "vcpus": 1},
            "disks": list(disks),
            "nics": [{"mac": "aa:00:00:00:00:01"}]}


class NodedInProcessTests(unittest.TestCase):

    timeout = 60

    def setUp(self):
        self.root = os.path.abspath(self.mktemp())
        self.store = os.path.join(self.root, "srv/ganeti/file-storage")
        os.makedirs(self.store)
        self.cert = cluster_cert(os.path.join(self.root, "certs"))
        self.port, self.procs = listen_noded(
            self, self.cert, root=self.root, os_search_path=[ETC_OS])
        self.addCleanup(kill_fake_instances, self.root)
        self.client = rpc_client(self, self.cert, self.port)
        self.pool = web_client.HTTPConnectionPool(reactor, persistent=False)
        self.agent = web_client.Agent(
            reactor, contextFactory=crypto.ClientPolicy(self.cert),
            pool=self.pool)

    async def ok(self, procedure, *args):
        result = await self.client.call("node1", procedure, list(args))
        self.assertTrue(result.success, result.fail_msg)
        return result.payload

    async def fails(self, procedure, *args):
        result = await self.client.call("node1", procedure, list(args))
        self.assertFalse(result.success, result.payload)
        return result.fail_msg

    async def http(self, method, path, body=b""):
        """A raw request: (status, decoded JSON reply)."""
        response = await self.agent.request(
            method, ("https://127.0.0.1:%d%s" % (self.port, path)).encode(),
            Headers({b"content-type": [b"application/json"]}),
            web_client.FileBodyProducer(_io(body)) if body else None)
        raw = await web_client.readBody(response)
        return response.code, json.loads(raw)

    def disk(self, rel="inst1/disk0"):
        return {"dev_type": "file", "size": 16, "mode": "rw",
                "logical_id": ["loop", os.path.join(self.store, rel)]}

    # -- instances ---------------------------------------------------------

    @defer.inlineCallbacks
    def test_instance_life_cycle_with_fake_hypervisor(self):
        yield defer.Deferred.fromCoroutine(self._life_cycle())

    async def _life_cycle(self):
        disk = self.disk()
        path = await self.ok("blockdev_create", disk, 16, "inst1.example.com",
                             True, "")
        await self.ok("instance_start", spec(disks=[disk]), False)
        info = await self.ok("instance_info", "inst1.example.com", "fake")
        self.assertEqual((info["state"], info["live"], info["memory"]),
                         ("running", True, 64))
        pid = info["pid"]
        self.assertTrue(state.process_alive(pid))
        self.assertEqual(await self.ok("instance_list", ["fake"]),
                         ["inst1.example.com"])
        everything = await self.ok("all_instances_info", ["fake"])
        self.assertEqual(everything["inst1.example.com"]["hypervisor"], "fake")
        # the disk dict was resolved on the node to its path
        record = state.RuntimeDir(self.root, "fake").read("inst1.example.com")
        self.assertEqual([d.path for d in record.spec.disks], [path])
        # starting again is refused, with the hypervisor's reason
        msg = await self.fails("instance_start", spec(disks=[disk]), False)
        self.assertIn("already running", msg)
        await self.ok("instance_reboot", "inst1.example.com", "fake", "soft",
                      30)
        msg = await self.fails("instance_reboot", "inst1.example.com", "fake",
                               "hard", 30)
        self.assertIn("needs the instance specification", msg)
        await self.ok("instance_reboot", spec(disks=[disk]), None, "hard", 30)
        info = await self.ok("instance_info", "inst1.example.com", "fake")
        self.assertEqual(info["state"], "running")
        self.assertNotEqual(info["pid"], pid)
        msg = await self.fails("instance_reboot", "inst1.example.com", "fake",
                               "full", 30)
        self.assertIn("'full' is done by the master", msg)
        await self.ok("instance_shutdown", "inst1.example.com", "fake", 10)
        self.assertIsNone(await self.ok("instance_info", "inst1.example.com",
                                        "fake"))
        self.assertEqual(await self.ok("instance_list", ["fake"]), [])
        self.assertFalse(state.process_alive(info["pid"]))
        # cleanup of an instance that is gone is fine
        await self.ok("instance_cleanup", "inst1.example.com", "fake")

    @defer.inlineCallbacks
    def test_user_shutdown_cleanup(self):
        yield self.client.call("n", "instance_start", [spec(), True])
        info = (yield self.client.call(
            "n", "instance_info", ["inst1.example.com", "fake"])).payload
        self.assertEqual(info["state"], "paused")
        os.kill(info["pid"], signal.SIGUSR1)     # the user powers it off

        async def shut():
            r = await self.client.call("n", "instance_info",
                                       ["inst1.example.com", "fake"])
            return r.payload["state"] == "shutdown"
        self.assertTrue((yield defer.Deferred.fromCoroutine(
            state.wait_until(reactor, shut, 10, interval=0.05))))
        result = yield self.client.call("n", "instance_cleanup",
                                        ["inst1.example.com", "fake"])
        self.assertTrue(result.success, result.fail_msg)
        self.assertEqual((yield self.client.call(
            "n", "instance_list", [["fake"]])).payload, [])

    # -- argument errors -----------------------------------------------------

    @defer.inlineCallbacks
    def test_bad_arguments_name_the_argument(self):
        cases = [
            ("instance_shutdown", ["inst1"], "argument 'hv' of"
             " instance_shutdown is missing"),
            ("instance_shutdown", ["inst1", "fake", -1], "argument 'timeout'"),
            ("instance_shutdown", ["inst1", "xen-hvm"], "hv: unknown"
             " hypervisor 'xen-hvm'"),
            ("instance_info", ["a", "fake", "extra"], "at most 2 arguments"),
            ("instance_list", ["fake"], "argument 'hvs' of instance_list:"
             " expected a list"),
            ("instance_start", [{"hypervisor": "fake", "name": "x"}],
             "instance.uuid"),
            ("instance_start", [dict(spec(), colour="red")],
             "unknown fields colour"),
            ("instance_start", [dict(spec(), disks=[{"path": "rel"}])],
             "instance.disks[0]: path must be an absolute path"),
            ("instance_start", [spec(), "yes"], "argument 'startup_paused'"),
            ("instance_reboot", ["i", "fake", "sideways"], "reboot_type"),
            ("blockdev_create", [self.disk(), 0], "argument 'size'"),
            ("blockdev_create", [{"dev_type": "file",
                                  "logical_id": ["loop", "/etc/x"]}, 1],
             "outside the allowed file storage directories"),
            ("blockdev_grow", [self.disk(), "lots"], "argument 'amount'"),
            ("storage_list", ["tape"], "su_name"),
            ("storage_list", ["file", [], None, ["colour"]],
             "unknown storage field"),
            ("upload_file", ["/etc/shadow", "x"], "not a file the master may"
             " upload"),
            ("upload_file", ["/var/lib/ganeti/config.data", 42],
             "data must be a string"),
            ("write_ssconf_files", [{"bad/key": "x"}], "not a valid ssconf"
             " key"),
            ("os_validate", [True, "../../etc"], "not a valid OS name"),
            ("instance_os_add", [{"name": "i"}], "instance.os"),
        ]
        for procedure, args, words in cases:
            result = yield self.client.call("node1", procedure, args)
            self.assertFalse(result.success, (procedure, args))
            self.assertIn(words, result.fail_msg, (procedure, args))
        # named arguments are checked the same way
        result = yield self.client.call("node1", "instance_info",
                                        {"name": "x", "hvv": "fake"})
        self.assertIn("has no argument hvv", result.fail_msg)
        # and the daemon still serves
        self.assertEqual((yield self.client.call("n", "version")).payload,
                         3000000)

    @defer.inlineCallbacks
    def test_http_level(self):
        code, reply = yield defer.Deferred.fromCoroutine(
            self.http(b"POST", "/version"))
        self.assertEqual((code, reply), (200, [True, 3000000]))
        code, reply = yield defer.Deferred.fromCoroutine(
            self.http(b"PUT", "/version", b"[]"))
        self.assertEqual((code, reply), (200, [True, 3000000]))
        code, reply = yield defer.Deferred.fromCoroutine(
            self.http(b"POST", "/instance_list", b"{not json"))
        self.assertEqual(code, 400)
        self.assertFalse(reply[0])
        self.assertIn("not JSON", reply[1])
        code, reply = yield defer.Deferred.fromCoroutine(
            self.http(b"POST", "/instance_list", b'"fake"'))
        self.assertEqual(code, 400)
        self.assertIn("JSON list of arguments", reply[1])
        code, reply = yield defer.Deferred.fromCoroutine(
            self.http(b"POST", "/nothing"))
        self.assertEqual((code, reply[0]), (404, False))
        code, reply = yield defer.Deferred.fromCoroutine(
            self.http(b"GET", "/"))
        self.assertEqual(code, 200)
        self.assertIn("instance_start", reply[1])

    @defer.inlineCallbacks
    def test_deeply_nested_bodies_are_refused_before_parsing(self):
        for body in (b"[" * 100000, b"[" * 2000 + b"]" * 2000,
                     b'[{"a":' * 500 + b"1" + b"}]" * 500):
            code, reply = yield defer.Deferred.fromCoroutine(
                self.http(b"POST", "/instance_list", body))
            self.assertEqual(code, 400)
            self.assertIn("deeper than the limit of 64 levels", reply[1])
        # the daemon answers as before, and nothing was logged as a failure
        code, reply = yield defer.Deferred.fromCoroutine(
            self.http(b"POST", "/version"))
        self.assertEqual((code, reply), (200, [True, 3000000]))

    @defer.inlineCallbacks
    def test_unexpected_error_is_reported_and_logged(self):
        def broken():
            return 1 / 0
        spec_, _ = self.procs.table["version"]
        self.procs.table["version"] = (spec_, broken)
        result = yield self.client.call("n", "version")
        self.assertFalse(result.success)
        self.assertIn("internal error in the node daemon: ZeroDivisionError",
                      result.fail_msg)
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)
        result = yield self.client.call("n", "instance_list", [["fake"]])
        self.assertTrue(result.success)

    # -- storage ------------------------------------------------------------

    @defer.inlineCallbacks
    def test_block_devices(self):
        disk = self.disk("inst2/disk0")
        path = (yield self.client.call("n", "blockdev_create",
                                       [disk, 32, "inst2", True, ""])).payload
        self.assertEqual(os.stat(path).st_size, 32 * MiB)
        result = yield self.client.call("n", "blockdev_create", [disk, 32])
        self.assertIn("already exists", result.fail_msg)
        result = yield self.client.call("n", "blockdev_grow", [disk, 16])
        self.assertTrue(result.success, result.fail_msg)
        dims = (yield self.client.call(
            "n", "blockdev_getdimensions",
            [[disk, self.disk("inst2/none")]])).payload
        self.assertEqual(dims, [{"size": 48 * MiB, "spindles": None}, None])
        assembled = (yield self.client.call("n", "blockdev_assemble",
                                            [disk])).payload
        self.assertEqual(assembled, {"path": path, "format": "raw",
                                     "mode": "rw"})
        self.assertTrue((yield self.client.call("n", "blockdev_shutdown",
                                                [disk])).success)
        self.assertTrue((yield self.client.call("n", "blockdev_remove",
                                                [disk])).success)
        self.assertFalse(os.path.exists(path))

    @defer.inlineCallbacks
    def test_node_info_and_storage_list(self):
        info = (yield self.client.call("n", "node_info", [
            [["file", self.store, []], ["lvm-vg", "no-such-vg-here", [False]]],
            [["fake", {}]]])).payload
        self.assertEqual(set(info), {"boot_id", "storage", "hypervisors"})
        file_unit, vg_unit = info["storage"]
        self.assertEqual(file_unit["name"], self.store)
        self.assertGreater(file_unit["storage_free"], 0)
        self.assertIsNone(vg_unit["storage_free"])
        self.assertIn("error", vg_unit)
        hv_info = info["hypervisors"][0]
        self.assertEqual(hv_info["name"], "fake")
        self.assertGreater(hv_info["memory_total"], 0)
        rows = (yield self.client.call("n", "storage_list", [
            "file", [], None, ["name", "allocatable"]])).payload
        self.assertIn([self.store, True], rows)

    @defer.inlineCallbacks
    def test_boot_id_of_a_virtual_node_changes_with_each_start(self):
        # several node daemons share this kernel: the kernel's boot id
        # alone could not tell one "rebooted" virtual node from another
        info = (yield self.client.call("n", "node_info", [[], []])).payload
        again = (yield self.client.call("n", "node_info", [[], []])).payload
        self.assertEqual(info["boot_id"], again["boot_id"])
        with open("/proc/sys/kernel/random/boot_id") as f:
            kernel = f.read().strip()
        self.assertEqual(info["boot_id"],
                         "%s/%s" % (kernel, self.procs.start_id))
        other = make_procedures(reactor, self.root, run_blocking=INLINE)
        self.assertNotEqual(other.start_id, self.procs.start_id)
        # a normal node (root /) reports the kernel's
        self.assertEqual(noded_node.boot_id(pathutils.Paths("/"), "x"),
                         kernel)

    @defer.inlineCallbacks
    def test_watcher_pause(self):
        path = os.path.join(self.root, "var/lib/ganeti/watcher.pause")
        self.assertTrue((yield self.client.call(
            "n", "set_watcher_pause", [1700000000.9])).success)
        with open(path) as f:
            self.assertEqual(f.read(), "1700000000\n")
        self.assertTrue((yield self.client.call(
            "n", "set_watcher_pause", [None])).success)
        self.assertFalse(os.path.exists(path))
        result = yield self.client.call("n", "set_watcher_pause", ["soon"])
        self.assertFalse(result.success)
        self.assertIn("until", result.fail_msg)
        self.assertFalse(os.path.exists(path))

    # -- files --------------------------------------------------------------

    @defer.inlineCallbacks
    def test_upload_and_ssconf(self):
        result = yield self.client.call("n", "upload_file", [
            "/var/lib/ganeti/config.data", ["zlib+base64", _zb64(b"{}\n")],
            0o640, None, None, None, 1000000000])
        self.assertTrue(result.success, result.fail_msg)
        target = os.path.join(self.root, "var/lib/ganeti/config.data")
        with open(target, "rb") as f:
            self.assertEqual(f.read(), b"{}\n")
        self.assertEqual(os.stat(target).st_mode & 0o777, 0o640)
        self.assertEqual(os.stat(target).st_mtime, 1000000000)
        # a file storage dir published in ssconf becomes usable at once
        other = os.path.join(self.root, "other-storage")
        os.makedirs(other)
        disk = {"dev_type": "file", "logical_id": ["loop",
                                                   other + "/i/disk0"]}
        result = yield self.client.call("n", "blockdev_create", [disk, 1])
        self.assertIn("outside", result.fail_msg)
        result = yield self.client.call("n", "write_ssconf_files", [
            {"file_storage_dir": other, "node_list": ["a", "b"]}])
        self.assertTrue(result.success, result.fail_msg)
        with open(os.path.join(self.root,
                               "var/lib/ganeti/ssconf_node_list")) as f:
            self.assertEqual(f.read(), "a\nb\n")
        result = yield self.client.call("n", "blockdev_create", [disk, 1])
        self.assertTrue(result.success, result.fail_msg)

    # -- OS -------------------------------------------------------------------

    @defer.inlineCallbacks
    def test_os_install_through_rpc(self):
        oses = (yield self.client.call("n", "os_diagnose")).payload
        busybox = [o for o in oses if o["name"] == "busybox"][0]
        self.assertTrue(busybox["valid"])
        self.assertEqual(busybox["variants"], ["default", "minimal"])
        disk = self.disk("inst3/disk0")
        path = (yield self.client.call("n", "blockdev_create",
                                       [disk, 4])).payload
        instance = {"name": "inst3.example.com", "uuid": UUID,
                    "os": "busybox+default", "hypervisor": "fake",
                    "hvparams": {"migration_mode": "live"},
                    "beparams": {"maxmem": 128}, "osparams": {"motd": "hi"},
                    "nics": [], "disks_info": [dict(disk, uuid="d-1")]}
        result = yield self.client.call("n", "instance_os_add",
                                        [instance, False, 0])
        self.assertTrue(result.success, result.fail_msg)
        self.assertTrue(result.payload.startswith(
            os.path.join(self.root, "var/log/ganeti/os/add-busybox+default")))
        header, env = read_install_record(path)
        self.assertEqual(header[0], "GANETI-BUSYBOX-OS v1")
        self.assertEqual(env["INSTANCE_HYPERVISOR"], "fake")
        self.assertEqual(env["INSTANCE_HV_MIGRATION_MODE"], "live")
        self.assertEqual(env["OSP_MOTD"], "hi")
        self.assertEqual(env["DISK_0_PATH"], path)
        result = yield self.client.call(
            "n", "instance_os_add", [dict(instance, os="busybox+huge")])
        self.assertIn("has no variant 'huge'", result.fail_msg)
        result = yield self.client.call(
            "n", "instance_run_rename",
            [dict(instance, name="inst4.example.com"), "inst3.example.com"])
        self.assertTrue(result.success, result.fail_msg)
        result = yield self.client.call(
            "n", "os_validate", [True, "busybox+default", ["parameters"],
                                 {"fail_create": "no"}])
        self.assertEqual(result.payload, True)


def _io(data):
    import io
    return io.BytesIO(data)


def _zb64(data):
    import base64
    import zlib
    return base64.b64encode(zlib.compress(data)).decode()
