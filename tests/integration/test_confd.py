"""ganeti-confd as a real process on 127.0.0.1, queried over real UDP by our
client, our command, hostile datagrams, and Ganeti 3.0's own confd-client."""

import json
import os
import signal
import socket
import sys

from twisted.internet import defer, error, protocol, reactor, task, utils
from twisted.trial import unittest

from ganeti import constants
from ganeti.confd import client as confd_client
from ganeti.confd import wire

from tests.integration.daemons import PROJECT
from tests.test_confd_fixtures import (KEY, MASTER, NODE3, build_cluster,
                                       free_udp_port)

GANETI_PYTHON = "/usr/bin/python3"
GANETI_LIB = "/usr/share/ganeti/3.0"
GANETI_CONFD_CLIENT = os.path.join(GANETI_LIB, "confd-client")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [PROJECT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                     if p])
    return env


class _Daemon(protocol.ProcessProtocol):

    def __init__(self):
        self.output = []
        self.ended = defer.Deferred()

    def outReceived(self, data):
        self.output.append(data)

    errReceived = outReceived

    def processEnded(self, reason):
        self.ended.callback(reason.value)


def daemon_command(root, port, log_file, *extra):
    """The daemon in the foreground (``python -m twisted`` is ``twist``)."""
    return [sys.executable, "-m", "twisted", "--log-format", "text",
            "--log-file", log_file, "ganeti-confd", "--root", root,
            "--bind", "127.0.0.1", "--port", str(port)] + list(extra)


async def start_daemon(test, root, *extra):
    """Start ganeti-confd, wait until it answers; stopped on cleanup."""
    port = free_udp_port()
    log_file = os.path.abspath(test.mktemp() + ".log")
    proto = _Daemon()
    process = reactor.spawnProcess(
        proto, sys.executable, daemon_command(root, port, log_file, *extra),
        env=_env(), path=PROJECT)

    async def stop():
        if process.pid is not None:
            try:
                process.signalProcess("TERM")
            except error.ProcessExitedAlready:
                pass
            timer = reactor.callLater(10, _kill, process)
            await proto.ended
            if timer.active():
                timer.cancel()
    test.addCleanup(lambda: defer.Deferred.fromCoroutine(stop()))
    client = confd_client.ConfdClient(KEY, ["127.0.0.1"], port=port,
                                      timeout=0.3)
    test.addCleanup(client.close)
    for _ in range(100):
        if proto.ended.called:
            break
        try:
            await client.request(wire.REQ_PING)
            return port, log_file, process
        except confd_client.ConfdTimeoutError:
            pass
    output = b"".join(proto.output).decode("utf-8", "replace")
    log = open(log_file).read() if os.path.exists(log_file) else ""
    test.fail("ganeti-confd did not answer a ping:\n%s\n%s" % (output, log))


def _kill(process):
    try:
        process.signalProcess("KILL")
    except error.ProcessExitedAlready:
        pass


class DaemonTests(unittest.TestCase):

    timeout = 60

    def setUp(self):
        self.cluster = build_cluster(os.path.join(self.mktemp(), MASTER))

    def test_client_gets_every_answer_over_udp(self):
        return defer.Deferred.fromCoroutine(self._every_answer())

    async def _every_answer(self):
        port, log_file, _ = await start_daemon(
            self, self.cluster.paths.root, "--poll-interval", "0.1")
        store = self.cluster.store
        client = confd_client.ConfdClient(KEY, ["127.0.0.1"], port=port,
                                          timeout=5)
        self.addCleanup(client.close)
        serial = store.cluster.serial_no
        node1 = store.get_node(MASTER)
        inst1 = store.get_instance("inst1.example.com")
        expected = [
            (wire.REQ_PING, None, 3000000, 0),
            (wire.REQ_NODE_ROLE_BYNAME, MASTER, 0, serial),
            (wire.REQ_NODE_PIP_BY_INSTANCE_IP, {"1": "10.0.0.3"},
             "192.0.2.3", serial),
            (wire.REQ_CLUSTER_MASTER, {"3": ["0", "1", "2"]},
             [MASTER, "192.0.2.254", "192.0.2.1"], serial),
            (wire.REQ_NODE_PIP_LIST, None,
             ["192.0.2.%d" % i for i in range(1, 6)], serial),
            (wire.REQ_MC_PIP_LIST, None, ["192.0.2.1", "192.0.2.2"], serial),
            (wire.REQ_INSTANCES_IPS_LIST, "br-storage", ["10.1.0.2"], serial),
            (wire.REQ_NODE_DRBD, MASTER,
             [[MASTER, 0, "inst1.example.com", "disk/0", "primary",
               "node2.example.com"],
              [MASTER, 3, "inst2.example.com", "disk/0", "secondary",
               "node2.example.com"]], node1.serial_no),
            (wire.REQ_INSTANCE_DISKS, inst1.name,
             [d.to_dict() for d in store.instance_disks(inst1)],
             inst1.serial_no),
            (wire.REQ_CONFIG_QUERY, "/cluster/cluster_name",
             "cluster.example.com", serial),
        ]
        for req_type, query, answer, reply_serial in expected:
            result = await client.request(req_type, query)
            self.assertEqual((result.status, result.answer, result.serial),
                             (0, answer, reply_serial), req_type)
        result = await client.request(wire.REQ_NODE_INSTANCES, MASTER)
        self.assertEqual([[i["name"] for i in part] for part in result.answer],
                         [["inst1.example.com"], ["inst2.example.com"]])
        result = await client.request(wire.REQ_DATA_COLLECTORS)
        # every collector Ganeti 3.0 knows, and this project's
        self.assertEqual(sorted(result.answer),
                         sorted(constants.DATA_COLLECTOR_NAMES))

        # The master changes the configuration: the daemon follows.
        store.set_node_params(NODE3, offline=True)
        store.set_cluster_params(master_ip="192.0.2.253")
        for _ in range(50):
            result = await client.request(wire.REQ_NODE_ROLE_BYNAME, NODE3)
            if result.serial == store.cluster.serial_no:
                break
            await task.deferLater(reactor, 0.1, lambda: None)
        self.assertEqual((result.answer, result.serial),
                         (wire.NODE_ROLE_OFFLINE, store.cluster.serial_no))

    def test_hostile_datagrams_do_not_hurt(self):
        return defer.Deferred.fromCoroutine(self._hostile())

    async def _hostile(self):
        port, log_file, process = await start_daemon(
            self, self.cluster.paths.root, "--rate-limit", "200",
            "--rate-burst", "50")
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(sock.close)
        sock.bind(("127.0.0.1", 0))
        good = wire.pack(KEY, str(int(reactor.seconds())),
                         wire.encode_request(0, "hostile-1"))
        junk = [b"", b"plj0", b"xxxx{}", b"plj0{", b"plj0" + b"[" * 4000,
                b"plj0" + b" " * 60000, wire.pack(b"bad key", "1", "{}"),
                wire.pack(KEY, "12", wire.encode_request(0, "stale")),
                good, good]
        for data in junk:
            sock.sendto(data, ("127.0.0.1", port))
        for _ in range(300):  # a flood from one source
            sock.sendto(b"plj0{}", ("127.0.0.1", port))
        await task.deferLater(reactor, 0.5, lambda: None)
        # exactly one reply (to the first copy of the good request)
        sock.setblocking(False)
        replies = []
        while True:
            try:
                replies.append(sock.recv(65536))
            except BlockingIOError:
                break
        self.assertEqual(len(replies), 1)
        self.assertEqual(wire.unpack(replies[0], KEY).salt, "hostile-1")
        # still serving others (another source address)
        client = confd_client.ConfdClient(KEY, ["127.0.0.1"], port=port,
                                          timeout=5, interface="127.0.0.2")
        self.addCleanup(client.close)
        result = await client.request(wire.REQ_CLUSTER_MASTER)
        self.assertEqual(result.answer, MASTER)
        # counters on SIGUSR1
        os.kill(process.pid, signal.SIGUSR1)
        stats = None
        for _ in range(50):
            await task.deferLater(reactor, 0.1, lambda: None)
            lines = [line for line in open(log_file)
                     if "confd stats:" in line]
            if lines:
                stats = dict(item.split("=", 1)
                             for item in lines[-1].split("confd stats: ")[1]
                             .split())
                break
        self.assertIsNotNone(stats, "no stats line after SIGUSR1")
        for key in ("dropped_bad_magic", "dropped_bad_envelope",
                    "dropped_bad_hmac", "dropped_clock_skew",
                    "dropped_replay", "dropped_rate_limited"):
            self.assertGreaterEqual(int(stats[key]), 1, key)

    def test_command_line_client(self):
        return defer.Deferred.fromCoroutine(self._command())

    async def _command(self):
        port, _, _ = await start_daemon(self, self.cluster.paths.root)
        base = [sys.executable, "-m", "ganeti.confd.cli", "--root",
                self.cluster.paths.root, "-a", "127.0.0.1", "--port",
                str(port), "--timeout", "5"]
        out, err, code = await utils.getProcessOutputAndValue(
            sys.executable, base[1:] + ["master", "name", "ip"], env=_env(),
            path=PROJECT)
        self.assertEqual(code, 0, err)
        result = json.loads(out)
        self.assertEqual(result["answer"], [MASTER, "192.0.2.254"])
        self.assertEqual(result["serial"],
                         self.cluster.store.cluster.serial_no)
        out, err, code = await utils.getProcessOutputAndValue(
            sys.executable, base[1:] + ["node-role", "nope"], env=_env(),
            path=PROJECT)
        self.assertEqual(code, 1)
        self.assertIn(b"not found", err)


_WRAPPER = """
import runpy, sys
from ganeti import constants
constants.DAEMONS_PORTS["ganeti-confd"] = ("udp", int(sys.argv[1]))
sys.argv = ["confd-client"] + sys.argv[2:]
runpy.run_path(%r, run_name="__main__")
""" % GANETI_CONFD_CLIENT


class GanetiConfdClientTests(unittest.TestCase):
    """Ganeti 3.0's confd-client against our daemon."""

    timeout = 60

    def setUp(self):
        for path, why in ((GANETI_PYTHON, "Debian's python3 runs Ganeti"),
                          (GANETI_CONFD_CLIENT, "apt-get install ganeti-3.0")):
            if not os.path.exists(path):
                raise unittest.SkipTest("%s is missing (%s)" % (path, why))
        self.cluster = build_cluster(os.path.join(self.mktemp(), MASTER))

    def test_confd_client_gets_every_answer(self):
        return defer.Deferred.fromCoroutine(self._ganeti_client())

    async def _ganeti_client(self):
        port, log_file, _ = await start_daemon(self, self.cluster.paths.root)
        # The key is read from GANETI_ROOTDIR/var/lib/ganeti/hmac.key.
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
               "PYTHONPATH": GANETI_LIB,
               "GANETI_ROOTDIR": self.cluster.paths.root,
               "GANETI_HOSTNAME": MASTER}
        out, err, code = await utils.getProcessOutputAndValue(
            GANETI_PYTHON, ["-c", _WRAPPER, str(port), "-a", "127.0.0.1",
                            "-r", "20"], env=env)
        out = out.decode("utf-8", "replace")
        err = err.decode("utf-8", "replace")
        self.assertEqual(code, 0, "confd-client failed:\n%s\n%s" % (out, err))
        for line in ("Ping: OK", "Master: OK (%s)" % MASTER,
                     "Master: OK (['%s', '192.0.2.254', '192.0.2.1'])"
                     % MASTER,
                     "Node role for master: OK", "Node primary ip query: OK",
                     "Master candidates primary IP query: OK",
                     "Instance primary IP query: OK", "10.0.0.1",
                     "Instance IP to node IP query: OK",
                     "ms per ping request", "ms per instance ips request"):
            self.assertIn(line, out)
        self.assertNotIn("non-ok", out)
