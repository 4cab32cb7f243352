"""Tests of ganeti-confd: wire format, every request type, hostile input,
replay protection, rate limiting, config reloads and the twistd service."""

import json
import os
import random
import signal

from twisted.internet import defer, task
from twisted.internet.testing import (EventLoggingObserver,
                                      FakeDatagramTransport)
from twisted.logger import globalLogPublisher
from twisted.python import usage
from twisted.trial import unittest

from ganeti import errors
from ganeti import objects
from ganeti.confd import guards
from ganeti.confd import queries
from ganeti.confd import reloader
from ganeti.confd import server
from ganeti.confd import snapshot as snapshot_mod
from ganeti.confd import wire
from ganeti.server import confd as confd_service

from tests.fakes import ClockTestCase
from tests.test_confd_fixtures import (DRAINED, KEY, MASTER, NODE2, NODE3,
                                       OFFLINE, T0, FakeUDPReactor,
                                       build_cluster, reply_of, request)


# Captured from Ganeti's confd-client.
CAPTURED_PING = (
    b'plj0{"msg": "{\\"protocol\\": 1, \\"type\\": 0, \\"rsalt\\":'
    b' \\"3c99533e-5219-42d0-8ede-eb89d0a29720\\"}\\n", "salt":'
    b' "1795259755", "hmac": "5033b9ca3070f9cef77b902ae7eddc25a060e04e"}\n')
CAPTURED_RSALT = "3c99533e-5219-42d0-8ede-eb89d0a29720"
CAPTURED_REPLY_MSG = ('{"protocol": 1, "status": 0, "answer": 3000000,'
                      ' "serial": 42}')
CAPTURED_REPLY_HMAC = "74d459eb91aacb0b7c27f0bfda914872f9284035"


class WireTests(unittest.TestCase):

    def test_captured_request_verifies(self):
        env = wire.unpack(CAPTURED_PING, KEY)
        self.assertEqual(env.salt, "1795259755")
        self.assertTrue(env.msg.endswith("\n"))
        self.assertEqual(json.loads(env.msg)["rsalt"], CAPTURED_RSALT)

    def test_captured_reply_signature_reproduced(self):
        self.assertEqual(wire.sign(KEY, CAPTURED_RSALT, CAPTURED_REPLY_MSG),
                         CAPTURED_REPLY_HMAC)
        datagram = wire.pack(KEY, CAPTURED_RSALT, CAPTURED_REPLY_MSG)
        self.assertTrue(datagram.startswith(b"plj0{"))
        salt, reply = reply_of(KEY, datagram)
        self.assertEqual((salt, reply.status, reply.answer, reply.serial),
                         (CAPTURED_RSALT, 0, 3000000, 42))

    def test_key_without_newline_does_not_verify(self):
        self.assertRaises(errors.SignatureError, wire.unpack, CAPTURED_PING,
                          KEY.rstrip(b"\n"))

    def test_key_file_read_verbatim(self):
        path = self.mktemp()
        with open(path, "wb") as f:
            f.write(KEY)
        self.assertEqual(wire.read_hmac_key(path), KEY)

    def test_hmac_compared_case_insensitively(self):
        digest = b"5033b9ca3070f9cef77b902ae7eddc25a060e04e"
        upper = CAPTURED_PING.replace(digest, digest.upper())
        self.assertEqual(wire.unpack(upper, KEY).hmac,
                         "5033b9ca3070f9cef77b902ae7eddc25a060e04e")

    def test_key_selector_is_part_of_the_salt(self):
        msg = wire.encode_request(0, "r")
        digest = wire.sign(KEY, "123" + "sel", msg)
        data = wire.MAGIC + json.dumps({"msg": msg, "salt": "123",
                                        "hmac": digest,
                                        "key_selector": "sel"}).encode()
        self.assertEqual(wire.unpack(data, KEY).salt, "123")

    def test_malformed_envelopes(self):
        good = json.loads(CAPTURED_PING[4:])
        cases = [
            (b"xyz0" + CAPTURED_PING[4:], errors.ConfdMagicError),
            (b"", errors.ConfdMagicError),
            (b"plj0", wire.EnvelopeError),
            (b"plj0{\"msg\": ", wire.EnvelopeError),
            (b"plj0\xff\xfe", wire.EnvelopeError),
            (b"plj0[1, 2]", wire.EnvelopeError),
            (b"plj0" + b"[" * 3000 + b"]" * 3000, wire.EnvelopeError),
            (b"plj0" + json.dumps(dict(good, msg=5)).encode(),
             wire.EnvelopeError),
            (b"plj0" + json.dumps({"msg": good["msg"],
                                   "salt": good["salt"]}).encode(),
             wire.EnvelopeError),
            (b"plj0" + json.dumps(dict(good, key_selector=1)).encode(),
             wire.EnvelopeError),
            (b"plj0" + json.dumps(dict(good, hmac="zz" * 20)).encode(),
             errors.SignatureError),
            (b"plj0" + json.dumps(dict(good, hmac="00" * 20)).encode(),
             errors.SignatureError),
            (b"plj0" + json.dumps(dict(good, salt="1795259756")).encode(),
             errors.SignatureError),
        ]
        for data, exc in cases:
            self.assertRaises(exc, wire.unpack, data, KEY)

    def test_request_encoding_omits_empty_query(self):
        self.assertNotIn("query", json.loads(wire.encode_request(0, "r")))
        self.assertEqual(json.loads(wire.encode_request(1, "r", "n"))["query"],
                         "n")

    def test_decode_reply_checks_types(self):
        self.assertEqual(wire.decode_reply(CAPTURED_REPLY_MSG).serial, 42)
        for bad in ["nope", "[]", '{"protocol": 1, "status": 0, "serial": 1}',
                    '{"protocol": 1, "status": "0", "answer": 1, "serial": 1}',
                    '{"protocol": 2, "status": 0, "answer": 1, "serial": 1}',
                    '{"protocol": 1, "status": 0, "answer": 1,'
                    ' "serial": true}']:
            self.assertRaises(wire.ReplyError, wire.decode_reply, bad)

    def test_pack_lays_out_the_envelope_like_json_dumps(self):
        msg = '{"answer": "caf\u00e9 \\"q\\"", "x": 1}\n'
        datagram = wire.pack(KEY, "r\u00e9", msg)
        expected = wire.MAGIC + json.dumps({
            "msg": msg, "salt": "r\u00e9",
            "hmac": wire.sign(KEY, "r\u00e9", msg)}).encode()
        self.assertEqual(datagram, expected)
        self.assertEqual(wire.pack(KEY, "r", wire.PreparedMsg(msg)),
                         wire.pack(KEY, "r", msg))


class _ClusterMixin(object):

    def setUp(self):
        self.cluster = build_cluster(self.mktemp())
        self.store = self.cluster.store
        self.snap = snapshot_mod.ConfigSnapshot(self.store)

    def ask(self, req_type, query=queries.MISSING, snap=None):
        msg = queries.answer(snap or self.snap, req_type, query)
        body = json.loads(msg.text)
        self.assertEqual(body["protocol"], 1)
        return body["status"], body["answer"], body["serial"]

    @property
    def serial(self):
        return self.store.cluster.serial_no


class QueryTests(_ClusterMixin, unittest.TestCase):
    """Every request type, its answer and its serial (as Ganeti's)."""

    def test_ping(self):
        self.assertEqual(self.ask(wire.REQ_PING), (0, 3000000, 0))
        self.assertEqual(self.ask(wire.REQ_PING, "ignored"), (0, 3000000, 0))

    def test_node_role(self):
        roles = {MASTER: wire.NODE_ROLE_MASTER,
                 NODE2: wire.NODE_ROLE_CANDIDATE,
                 NODE3: wire.NODE_ROLE_REGULAR,
                 OFFLINE: wire.NODE_ROLE_OFFLINE,
                 DRAINED: wire.NODE_ROLE_DRAINED}
        for name, role in roles.items():
            self.assertEqual(self.ask(wire.REQ_NODE_ROLE_BYNAME, name),
                             (0, role, self.serial), name)
        self.assertGreater(self.serial, 1)

    def test_node_role_check_order(self):
        # drained before offline before candidate, as in Ganeti (a config
        # written by hand may have several flags set)
        node = self.store.get_node(NODE2)
        node.drained = node.offline = True
        snap = snapshot_mod.ConfigSnapshot(self.store)
        self.assertEqual(self.ask(1, NODE2, snap=snap)[1],
                         wire.NODE_ROLE_DRAINED)
        node.drained = False
        snap = snapshot_mod.ConfigSnapshot(self.store)
        self.assertEqual(self.ask(1, NODE2, snap=snap)[1],
                         wire.NODE_ROLE_OFFLINE)

    def test_node_role_by_uuid(self):
        # Lookup works by UUID, but "master" is only decided by name.
        master_uuid = self.store.get_node(MASTER).uuid
        self.assertEqual(self.ask(wire.REQ_NODE_ROLE_BYNAME, master_uuid),
                         (0, wire.NODE_ROLE_CANDIDATE, self.serial))
        self.assertEqual(self.ask(wire.REQ_NODE_ROLE_BYNAME,
                                  self.store.get_node(NODE3).uuid)[1],
                         wire.NODE_ROLE_REGULAR)

    def test_node_role_errors(self):
        status, answer, serial = self.ask(wire.REQ_NODE_ROLE_BYNAME, "nope")
        self.assertEqual((status, serial), (1, 0))
        self.assertIn("nope", answer)
        for query in (queries.MISSING, {"0": "x"}):
            status, answer, serial = self.ask(wire.REQ_NODE_ROLE_BYNAME, query)
            self.assertEqual((status, serial), (1, 0))
            self.assertIn("Invalid query type", answer)

    def test_node_pip_by_instance_ip_single(self):
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP,
                                  {"1": "10.0.0.2"}),
                         (0, "192.0.2.2", self.serial))
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP,
                                  {"1": "10.9.9.9"}),
                         (1, wire.ERROR_UNKNOWN_ENTRY, 0))
        # The IP is on another link than the default one.
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP,
                                  {"1": "10.1.0.2"}),
                         (1, wire.ERROR_UNKNOWN_ENTRY, 0))
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP,
                                  {"0": "br-storage", "1": "10.1.0.2"}),
                         (0, "192.0.2.2", self.serial))
        # The single form wins over the list form; null link = default link.
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP,
                                  {"0": None, "1": "10.0.0.1",
                                   "2": ["10.0.0.3"]}),
                         (0, "192.0.2.1", self.serial))

    def test_node_pip_by_instance_ip_list(self):
        s = self.serial
        self.assertEqual(
            self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP,
                     {"2": ["10.0.0.3", "10.9.9.9", "10.0.0.1"]}),
            (0, [[0, "192.0.2.3", s], [1, 0, 0], [0, "192.0.2.1", s]], s))
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP,
                                  {"0": "br-storage", "2": ["10.1.0.2"]}),
                         (0, [[0, "192.0.2.2", s]], s))

    def test_node_pip_by_instance_ip_confd_client_quirk(self):
        # Ganeti's confd-client sends {"2": null}: an empty list, answer [].
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP,
                                  {"2": None}), (0, [], self.serial))
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP, {}),
                         (0, [], self.serial))

    def test_node_pip_by_instance_ip_non_dict(self):
        for query in ("10.0.0.1", queries.MISSING, None):
            self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP, query),
                             (1, wire.ERROR_ARGUMENT, 0))

    def test_node_pip_by_instance_ip_wrong_types_raise(self):
        for query in ({"1": 5}, {"2": "10.0.0.1"}, {"2": [1]}, {"0": []},
                      {"3": "0"}):
            self.assertRaises(queries.BadQuery, queries.answer, self.snap,
                              wire.REQ_NODE_PIP_BY_INSTANCE_IP, query)

    def test_cluster_master(self):
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER),
                         (0, MASTER, self.serial))
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER, None),
                         (0, MASTER, self.serial))
        expected = (0, [MASTER, "192.0.2.254", "192.0.2.1"], self.serial)
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER, {"3": [0, 1, 2]}),
                         expected)
        # confd-client sends the field codes as strings
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER,
                                  {"3": ["0", "1", "2"]}), expected)
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER, {"3": [2, 0]}),
                         (0, ["192.0.2.1", MASTER], self.serial))
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER, {}),
                         (0, [], self.serial))

    def test_cluster_master_bad_queries(self):
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER, MASTER),
                         (1, wire.ERROR_ARGUMENT, 0))
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER, {"3": [7]}),
                         (1, wire.ERROR_ARGUMENT, 0))
        for fields in (["x"], [True], [[0]], "012"):
            self.assertRaises(queries.BadQuery, queries.answer, self.snap,
                              wire.REQ_CLUSTER_MASTER, {"3": fields})

    def test_node_pip_list(self):
        status, answer, serial = self.ask(wire.REQ_NODE_PIP_LIST)
        self.assertEqual((status, serial), (0, self.serial))
        self.assertEqual(sorted(answer),
                         ["192.0.2.%d" % i for i in range(1, 6)])

    def test_mc_pip_list(self):
        self.assertEqual(self.ask(wire.REQ_MC_PIP_LIST),
                         (0, ["192.0.2.1", "192.0.2.2"], self.serial))

    def test_instances_ips_list(self):
        self.assertEqual(self.ask(wire.REQ_INSTANCES_IPS_LIST),
                         (0, ["10.0.0.1", "10.0.0.2", "10.0.0.3"],
                          self.serial))
        self.assertEqual(self.ask(wire.REQ_INSTANCES_IPS_LIST, "xen-br0"),
                         self.ask(wire.REQ_INSTANCES_IPS_LIST, None))
        self.assertEqual(self.ask(wire.REQ_INSTANCES_IPS_LIST, "br-storage"),
                         (0, ["10.1.0.2"], self.serial))
        self.assertEqual(self.ask(wire.REQ_INSTANCES_IPS_LIST, "br-none"),
                         (0, [], self.serial))
        status, answer, serial = self.ask(wire.REQ_INSTANCES_IPS_LIST,
                                          {"0": "xen-br0"})
        self.assertEqual((status, serial), (1, 0))
        self.assertIn("Invalid query type", answer)

    def test_default_link_follows_cluster_nicparams(self):
        self.store.set_cluster_params(nicparams={"default": {
            "mode": "bridged", "link": "br-storage", "vlan": ""}})
        snap = snapshot_mod.ConfigSnapshot(self.store)
        # inst1/inst3 have no own link: they moved to the new default
        self.assertEqual(self.ask(wire.REQ_INSTANCES_IPS_LIST, snap=snap)[1],
                         ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.1.0.2"])

    def test_node_drbd(self):
        node1 = self.store.get_node(MASTER)
        self.assertEqual(self.ask(wire.REQ_NODE_DRBD, MASTER), (0, [
            [MASTER, 0, "inst1.example.com", "disk/0", "primary", NODE2],
            [MASTER, 3, "inst2.example.com", "disk/0", "secondary", NODE2],
        ], node1.serial_no))
        node2 = self.store.get_node(NODE2)
        self.assertEqual(self.ask(wire.REQ_NODE_DRBD, node2.uuid), (0, [
            [NODE2, 1, "inst1.example.com", "disk/0", "secondary", MASTER],
            [NODE2, 2, "inst2.example.com", "disk/0", "primary", MASTER],
        ], node2.serial_no))
        self.assertEqual(self.ask(wire.REQ_NODE_DRBD, NODE3),
                         (0, [], self.store.get_node(NODE3).serial_no))
        status, answer, serial = self.ask(wire.REQ_NODE_DRBD, "nope")
        self.assertEqual((status, serial), (1, 0))
        self.assertEqual(self.ask(wire.REQ_NODE_DRBD)[0], 1)

    def test_node_drbd_serial_is_the_nodes(self):
        self.store.set_node_params(NODE2, drained=False)
        self.store.set_node_params(NODE2, drained=False)
        snap = snapshot_mod.ConfigSnapshot(self.store)
        node2 = self.store.get_node(NODE2)
        self.assertEqual(node2.serial_no, 3)
        self.assertEqual(self.ask(wire.REQ_NODE_DRBD, NODE2, snap=snap)[2], 3)

    def test_node_drbd_malformed_logical_id_is_skipped_and_reported(self):
        disk = self.store.instance_disks(
            self.store.get_instance("inst1.example.com"))[0]
        disk.logical_id = ["only", "three", 1]
        snap = snapshot_mod.ConfigSnapshot(self.store)
        self.assertEqual(self.ask(wire.REQ_NODE_DRBD, MASTER, snap=snap)[1],
                         [[MASTER, 3, "inst2.example.com", "disk/0",
                           "secondary", NODE2]])
        self.assertEqual(len(snap.warnings), 1)
        self.assertIn(disk.uuid, snap.warnings[0])

    def test_node_instances(self):
        node1 = self.store.get_node(MASTER)
        status, answer, serial = self.ask(wire.REQ_NODE_INSTANCES, MASTER)
        self.assertEqual((status, serial), (0, node1.serial_no))
        primary, secondary = answer
        self.assertEqual([i["name"] for i in primary], ["inst1.example.com"])
        self.assertEqual([i["name"] for i in secondary], ["inst2.example.com"])
        # full config objects
        self.assertEqual(primary[0], self.store.get_instance(
            "inst1.example.com").to_dict())
        # but private OS parameters by name only
        self.store.modify_instance(
            self.store.get_instance("inst1.example.com").uuid,
            osparams_private={"pw": "hush-8e1f"})
        snap = snapshot_mod.ConfigSnapshot(self.store)
        primary = self.ask(wire.REQ_NODE_INSTANCES, MASTER, snap=snap)[1][0]
        self.assertEqual(primary[0]["osparams_private"], {"pw": "<redacted>"})
        self.assertEqual(self.ask(wire.REQ_NODE_INSTANCES, OFFLINE)[1],
                         [[], []])
        self.assertEqual(self.ask(wire.REQ_NODE_INSTANCES, "nope")[0], 1)

    def test_instance_disks(self):
        inst = self.store.get_instance("inst1.example.com")
        status, answer, serial = self.ask(wire.REQ_INSTANCE_DISKS, inst.name)
        self.assertEqual((status, serial), (0, inst.serial_no))
        self.assertEqual([d["uuid"] for d in answer], inst.disks)
        self.assertEqual(answer[0]["dev_type"], "drbd")
        self.assertEqual(len(answer[0]["children"]), 2)
        self.assertEqual(self.ask(wire.REQ_INSTANCE_DISKS, inst.uuid)[1],
                         answer)
        status, answer, serial = self.ask(wire.REQ_INSTANCE_DISKS, "nope")
        self.assertEqual((status, serial), (1, 0))
        self.assertIn("nope", answer)

    def test_config_query(self):
        s = self.serial
        self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY,
                                  "/cluster/cluster_name"),
                         (0, "cluster.example.com", s))
        node3 = self.store.get_node(NODE3)
        self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY,
                                  "/nodes/%s/primary_ip" % node3.uuid),
                         (0, "192.0.2.3", s))
        self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY,
                                  "/cluster/enabled_hypervisors/0"),
                         (0, "fake", s))
        self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY, "/version"),
                         (0, 3000000, s))
        whole = self.ask(wire.REQ_CONFIG_QUERY, "")
        self.assertEqual(whole[1]["cluster"]["cluster_name"],
                         "cluster.example.com")
        for bad in ("cluster", "/nope", "/cluster/enabled_hypervisors/9",
                    "/cluster/enabled_hypervisors/01",
                    "/cluster/enabled_hypervisors/-1",
                    "/cluster/cluster_name/x"):
            self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY, bad),
                             (1, wire.ERROR_ARGUMENT, 0), bad)
        self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY)[0], 1)

    def test_config_query_shows_no_private_value(self):
        inst = self.store.get_instance("inst1.example.com")
        self.store.modify_instance(inst.uuid,
                                   osparams_private={"pw": "hush-8e1f"})
        self.store.set_cluster_params(osparams_private_cluster={
            "debian": {"key": "hush-c0de"}})
        snap = snapshot_mod.ConfigSnapshot(self.store)
        whole = self.ask(wire.REQ_CONFIG_QUERY, "", snap=snap)[1]
        self.assertNotIn("hush", json.dumps(whole))
        self.assertEqual(self.ask(
            wire.REQ_CONFIG_QUERY, "/instances/%s/osparams_private"
            % inst.uuid, snap=snap)[1], {"pw": "<redacted>"})
        self.assertEqual(self.ask(
            wire.REQ_CONFIG_QUERY, "/cluster/osparams_private_cluster",
            snap=snap)[1], {"debian": {"key": "<redacted>"}})
        # the configuration itself keeps them
        self.assertEqual(self.store.get_instance(inst.uuid).osparams_private,
                         {"pw": "hush-8e1f"})

    def test_json_pointer_escapes(self):
        doc = {"a/b": {"m~n": [10, 20]}, "": 1}
        self.assertEqual(queries.resolve_pointer(doc, "/a~1b/m~0n/1"), 20)
        self.assertEqual(queries.resolve_pointer(doc, "/"), 1)
        self.assertIs(queries.resolve_pointer(doc, ""), doc)

    def test_data_collectors(self):
        status, answer, serial = self.ask(wire.REQ_DATA_COLLECTORS)
        self.assertEqual((status, serial), (0, self.serial))
        self.assertEqual(sorted(answer), sorted(
            snapshot_mod.DATA_COLLECTOR_NAMES))
        self.assertEqual(answer["drbd"], {"active": True,
                                          "interval": 5000000})
        # Xen-only collectors are inactive on a cluster without Xen
        self.assertFalse(answer["inst-status-xen"]["active"])

    def test_data_collectors_follow_the_config(self):
        self.store.cluster.data_collectors = {
            "drbd": {"active": False, "interval": 15000000},
            "lv": {"active": True, "interval": 1000000}}
        self.store.cluster.enabled_hypervisors = ["fake", "xen-pvm"]
        answer = self.ask(wire.REQ_DATA_COLLECTORS,
                          snap=snapshot_mod.ConfigSnapshot(self.store))[1]
        self.assertEqual(answer["drbd"], {"active": False,
                                          "interval": 15000000})
        self.assertEqual(answer["lv"]["interval"], 1000000)
        self.assertTrue(answer["inst-status-xen"]["active"])

    def test_unknown_type_not_implemented(self):
        status, answer, serial = self.ask(12)
        self.assertEqual((status, serial), (wire.STATUS_NOTIMPLEMENTED, 0))
        self.assertIn("12", answer)
        self.assertEqual(self.ask(-1)[0], wire.STATUS_NOTIMPLEMENTED)

    def test_no_configuration(self):
        body = json.loads(queries.answer(None, wire.REQ_PING).text)
        self.assertEqual((body["status"], body["serial"]), (1, 0))
        self.assertIn("not loaded", body["answer"])

    def test_list_answers_are_memoised_per_snapshot(self):
        first = queries.answer(self.snap, wire.REQ_INSTANCES_IPS_LIST)
        self.assertIs(queries.answer(self.snap, wire.REQ_INSTANCES_IPS_LIST),
                      first)
        self.assertIs(queries.answer(self.snap, wire.REQ_NODE_PIP_LIST),
                      queries.answer(self.snap, wire.REQ_NODE_PIP_LIST))
        # unknown links are not remembered (no growth from random names)
        queries.answer(self.snap, wire.REQ_INSTANCES_IPS_LIST, "random")
        self.assertNotIn(("link-ips", "random"), self.snap.memo)

    def test_answers_use_indexes_not_scans(self):
        # After the snapshot is built, answering touches no instance list.
        self.snap.store.instances = _Exploding()
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP,
                                  {"1": "10.0.0.3"})[1], "192.0.2.3")
        self.assertEqual(len(self.ask(wire.REQ_INSTANCES_IPS_LIST)[1]), 3)
        self.assertEqual(self.ask(wire.REQ_NODE_ROLE_BYNAME, NODE3)[1], 4)
        self.assertEqual(len(self.ask(wire.REQ_NODE_DRBD, MASTER)[1]), 2)
        self.assertEqual(len(self.ask(wire.REQ_NODE_INSTANCES, MASTER)[1]), 2)


class _Exploding(dict):

    def values(self):
        raise AssertionError("an answer scanned all instances")

    items = keys = __iter__ = values

    def get(self, key, default=None):
        raise AssertionError("an answer looked up instances by uuid")


class _Config(object):
    """A stand-in for the ConfigWatcher: just a snapshot."""

    def __init__(self, snap):
        self.snapshot = snap


class ProcessorTests(_ClusterMixin, ClockTestCase):
    """The datagram pipeline against well-formed and hostile input."""

    def setUp(self):
        _ClusterMixin.setUp(self)
        ClockTestCase.setUp(self)
        self.clock.advance(T0)
        self.processor = server.ConfdProcessor(
            KEY, _Config(self.snap), self.clock,
            rate_limiter=guards.RateLimiter(self.clock, rate=0))
        self.proto = server.ConfdProtocol(self.processor)
        self.transport = FakeDatagramTransport()
        self.proto.makeConnection(self.transport)
        self.logged = EventLoggingObserver.createWithCleanup(
            self, globalLogPublisher)

    def send(self, data, source=("127.0.0.1", 5555)):
        before = len(self.transport.written)
        self.proto.datagramReceived(data, source)
        written = self.transport.written[before:]
        self.assertLessEqual(len(written), 1)
        if not written:
            return None
        packet, addr = written[0]
        self.assertEqual(addr, source)
        return packet

    def query(self, req_type, query=None, rsalt="rs-1", **kwargs):
        packet = self.send(request(KEY, req_type, query, rsalt=rsalt,
                                   **kwargs))
        self.assertIsNotNone(packet, "no reply")
        salt, reply = reply_of(KEY, packet)
        self.assertEqual(salt, rsalt)
        return reply

    def assertDropped(self, data, reason):
        answered = self.processor.stats()["answered"]
        self.assertIsNone(self.send(data))
        self.assertEqual(self.processor.stats()["dropped_" + reason], 1,
                         self.processor.stats())
        self.assertEqual(self.processor.stats()["answered"], answered)
        lines = [e for e in self.logged if e.get("reason") == reason]
        self.assertEqual(len(lines), 1)

    # --- good requests ----------------------------------------------------

    def test_reply_signed_with_rsalt(self):
        reply = self.query(wire.REQ_PING, rsalt=CAPTURED_RSALT)
        self.assertEqual((reply.status, reply.answer, reply.serial),
                         (0, 3000000, 0))
        stats = self.processor.stats()
        self.assertEqual((stats["received"], stats["answered"],
                          stats["req_ping"]), (1, 1, 1))

    def test_captured_request_from_ganeti_client(self):
        packet = self.send(CAPTURED_PING)
        salt, reply = reply_of(KEY, packet)
        self.assertEqual((salt, reply.answer), (CAPTURED_RSALT, 3000000))

    def test_every_type_answers_over_the_pipeline(self):
        queries_by_type = {
            0: None, 1: MASTER, 2: {"1": "10.0.0.1"}, 3: {"3": ["0"]},
            4: None, 5: None, 6: None, 7: MASTER, 8: MASTER,
            9: "inst1.example.com", 10: "/cluster/cluster_name", 11: None}
        for req_type, query in queries_by_type.items():
            reply = self.query(req_type, query, rsalt="r%d" % req_type)
            self.assertEqual(reply.status, 0, (req_type, reply))
        stats = self.processor.stats()
        self.assertEqual(stats["answered"], 12)
        for name in wire.REQUEST_NAMES.values():
            self.assertEqual(stats["req_" + name], 1, name)

    def test_clock_window_edges_accepted(self):
        self.assertEqual(self.query(0, stamp=T0 - 300, rsalt="a").status, 0)
        self.assertEqual(self.query(0, stamp=T0 + 300, rsalt="b").status, 0)

    # --- dropped ------------------------------------------------------------

    def test_bad_magic(self):
        self.assertDropped(b"PLJ0" + request(KEY, 0)[4:], "bad_magic")

    def test_bad_json(self):
        self.assertDropped(b"plj0{not json", "bad_envelope")

    def test_deeply_nested_json(self):
        self.assertDropped(b"plj0" + b"[" * 2000 + b"]" * 2000,
                           "bad_envelope")

    def test_missing_hmac(self):
        env = json.loads(request(KEY, 0)[4:])
        del env["hmac"]
        self.assertDropped(b"plj0" + json.dumps(env).encode(),
                           "bad_envelope")

    def test_wrong_hmac(self):
        self.assertDropped(request(b"another key\n", 0), "bad_hmac")

    def test_tampered_message(self):
        data = request(KEY, 0, rsalt="abc")
        self.assertDropped(data.replace(b"abc", b"abd"), "bad_hmac")

    def test_stale_timestamp(self):
        self.assertDropped(request(KEY, 0, stamp=T0 - 301), "clock_skew")

    def test_future_timestamp(self):
        self.assertDropped(request(KEY, 0, stamp=T0 + 301), "clock_skew")

    def test_timestamp_not_a_number(self):
        for salt in ("", "now", "1795259755.0", " 1795259755", "1_795"):
            self.assertIsNone(self.send(request(KEY, 0, salt=salt)))
        self.assertEqual(self.processor.stats()["dropped_bad_timestamp"], 5)

    def test_oversized(self):
        data = request(KEY, 0, rsalt="x" * 5000)
        self.assertGreater(len(data), wire.MAX_REQUEST_SIZE)
        unpacked = []
        self.patch(wire, "unpack", lambda *a: unpacked.append(a))
        self.assertDropped(data, "oversized")
        self.assertEqual(unpacked, [], "oversized datagram was parsed")

    def test_inner_message_not_json(self):
        self.assertDropped(request(KEY, 0, msg="{nope"), "bad_request")

    def test_inner_message_not_an_object(self):
        self.assertDropped(request(KEY, 0, msg="[1]"), "bad_request")

    def test_lone_surrogate_in_envelope(self):
        data = (b'plj0{"msg": "\\ud800", "salt": "1", "hmac": "'
                + b"0" * 40 + b'"}')
        self.assertDropped(data, "bad_envelope")

    def test_missing_or_bad_rsalt(self):
        for rsalt in (None, 5, "", "r" * 300, "\ud800"):
            msg = json.dumps({"protocol": 1, "type": 0, "rsalt": rsalt})
            self.assertIsNone(self.send(request(KEY, 0, msg=msg)))
        self.assertIsNone(self.send(request(KEY, 0, msg='{"type": 0}')))
        self.assertEqual(self.processor.stats()["dropped_bad_request"], 6)
        self.assertEqual(self.processor.stats()["dropped_internal_error"], 0)

    def test_wrong_protocol(self):
        for protocol in (2, "1", True, None):
            msg = json.dumps({"protocol": protocol, "type": 0, "rsalt": "r"})
            self.assertIsNone(self.send(request(KEY, 0, msg=msg)))
        self.assertEqual(self.processor.stats()["dropped_bad_protocol"], 4)

    # --- replay -------------------------------------------------------------

    def test_replay_not_answered_again(self):
        data = request(KEY, 0, rsalt="once")
        self.assertIsNotNone(self.send(data))
        self.assertIsNone(self.send(data))
        self.assertIsNone(self.send(data, source=("127.0.0.2", 1)))
        stats = self.processor.stats()
        self.assertEqual((stats["answered"], stats["dropped_replay"]), (1, 2))

    def test_same_query_new_request_is_answered(self):
        self.assertIsNotNone(self.send(request(KEY, 0, rsalt="a")))
        self.assertIsNotNone(self.send(request(KEY, 0, rsalt="b")))
        self.clock.advance(1)
        self.assertIsNotNone(self.send(request(KEY, 0, rsalt="a",
                                               stamp=T0 + 1)))

    def test_replay_memory_expires_with_the_window(self):
        data = request(KEY, 0, rsalt="old")
        self.assertIsNotNone(self.send(data))
        self.assertEqual(len(self.processor.replay_cache), 1)
        self.clock.advance(299)
        self.assertIsNone(self.send(data))  # still remembered: replay
        self.clock.advance(2)
        self.assertIsNotNone(self.send(request(KEY, 0, stamp=T0 + 301)))
        # the old entry is gone, and the old datagram fails the clock check
        self.assertEqual(len(self.processor.replay_cache), 1)
        self.assertIsNone(self.send(data))
        stats = self.processor.stats()
        self.assertEqual(
            (stats["dropped_replay"], stats["dropped_clock_skew"]), (1, 1))

    def test_replay_cache_is_bounded(self):
        self.processor.replay_cache = guards.ReplayCache(
            self.clock, 300, max_entries=3)
        for i in range(3):
            self.assertIsNotNone(self.send(request(
                KEY, 0, rsalt="r%d" % i, stamp=T0 - 10 + i)))
        # full: the oldest timestamp (T0 - 10) is forgotten and refused
        self.assertIsNotNone(self.send(request(KEY, 0, rsalt="r3")))
        self.assertEqual(len(self.processor.replay_cache), 3)
        self.assertEqual(self.processor.replay_cache.floor, T0 - 10)
        self.assertDropped(request(KEY, 0, rsalt="r0", stamp=T0 - 10),
                           "replay_floor")
        # the others are still known replays
        self.assertIsNone(self.send(request(KEY, 0, rsalt="r1",
                                            stamp=T0 - 9)))
        self.assertEqual(self.processor.stats()["dropped_replay"], 1)
        self.assertEqual(self.processor.stats()["replay_cache_evicted"], 1)

    # --- error replies ----------------------------------------------------

    def test_unknown_type(self):
        reply = self.query(99)
        self.assertEqual((reply.status, reply.serial),
                         (wire.STATUS_NOTIMPLEMENTED, 0))
        self.assertEqual(self.processor.stats()["error_unknown_type"], 1)

    def test_type_not_an_integer(self):
        for req_type in ("0", 1.0, True, None, [0]):
            msg = json.dumps({"protocol": 1, "type": req_type, "rsalt": "r%s"
                              % json.dumps(req_type)})
            packet = self.send(request(KEY, 0, msg=msg))
            reply = reply_of(KEY, packet)[1]
            self.assertEqual((reply.status, reply.answer, reply.serial),
                             (1, wire.ERROR_ARGUMENT, 0))
        self.assertEqual(self.processor.stats()["error_bad_type"], 5)

    def test_query_of_wrong_json_type(self):
        for i, query in enumerate(([MASTER], 5, True, 1.5)):
            reply = self.query(wire.REQ_NODE_ROLE_BYNAME, query,
                               rsalt="q%d" % i)
            self.assertEqual((reply.status, reply.answer), (1, 2))
        self.assertEqual(self.processor.stats()["error_bad_query"], 4)

    def test_dict_query_with_wrong_member_types(self):
        reply = self.query(wire.REQ_NODE_PIP_BY_INSTANCE_IP, {"1": ["x"]})
        self.assertEqual((reply.status, reply.answer, reply.serial),
                         (1, wire.ERROR_ARGUMENT, 0))
        self.assertEqual(self.processor.stats()["error_bad_query"], 1)

    def test_reply_too_large_becomes_an_error(self):
        self.patch(queries, "answer", lambda *a: wire.encode_reply(
            0, "x" * 70000, 1))
        reply = self.query(wire.REQ_PING)
        self.assertEqual(reply.status, 1)
        self.assertIn("too large", reply.answer)
        self.assertEqual(self.processor.stats()["error_reply_too_large"], 1)

    def test_internal_failure_is_counted_not_raised(self):
        def boom(*args):
            raise ZeroDivisionError("bug")
        self.patch(queries, "answer", boom)
        self.assertIsNone(self.send(request(KEY, 0)))
        self.assertEqual(self.processor.stats()["dropped_internal_error"], 1)
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)
        # still serving
        self.patch(queries, "answer", lambda *a: wire.encode_reply(0, 1, 0))
        self.assertIsNotNone(self.send(request(KEY, 0, rsalt="next")))

    def test_send_failure_is_counted(self):
        def fail(packet, addr):
            raise OSError(105, "No buffer space available")
        self.transport.write = fail
        self.proto.datagramReceived(request(KEY, 0), ("127.0.0.1", 1))
        self.assertEqual(self.processor.stats()["send_failed"], 1)

    # --- floods -----------------------------------------------------------

    def test_flood_from_one_source_is_rate_limited(self):
        self.processor.rate_limiter = guards.RateLimiter(self.clock, rate=10,
                                                         burst=20)
        flood = [request(KEY, 0, rsalt="f%d" % i) for i in range(25)]
        answered = [self.send(d, ("127.0.0.9", 1)) for d in flood]
        self.assertEqual(sum(1 for a in answered if a), 20)
        self.assertEqual(self.processor.stats()["dropped_rate_limited"], 5)
        # another source is not affected
        self.assertIsNotNone(self.send(request(KEY, 0, rsalt="other"),
                                       ("127.0.0.8", 1)))
        # tokens come back with time: 10 per second
        self.clock.advance(1)
        more = [self.send(request(KEY, 0, rsalt="g%d" % i, stamp=T0 + 1),
                          ("127.0.0.9", 1)) for i in range(12)]
        self.assertEqual(sum(1 for a in more if a), 10)

    def test_rate_limited_datagrams_are_not_parsed(self):
        self.processor.rate_limiter = guards.RateLimiter(self.clock, rate=1,
                                                         burst=1)
        self.send(request(KEY, 0))
        calls = []
        self.patch(wire, "unpack", lambda *a: calls.append(a))
        for _ in range(100):
            self.send(request(KEY, 0))
        self.assertEqual(calls, [])
        self.assertEqual(self.processor.stats()["dropped_rate_limited"], 100)

    def test_flood_logging_is_throttled(self):
        for _ in range(100):
            self.send(b"junk")
        lines = [e for e in self.logged if e.get("reason") == "bad_magic"]
        self.assertEqual(len(lines), 10)
        stats = self.processor.stats()
        self.assertEqual(stats["dropped_bad_magic"], 100)
        self.assertEqual(stats["log_lines_suppressed"], 90)
        self.clock.advance(60)
        self.send(b"junk")
        self.assertEqual(len([e for e in self.logged
                              if e.get("reason") == "bad_magic"]), 11)

    def test_fuzzed_datagrams_never_break_the_pipeline(self):
        rng = random.Random(5)
        values = [None, True, 0, -1, 2 ** 70, 1.5, "", "x", "0", [], [1],
                  {}, {"0": 1}, {"1": None, "2": [None]}, {"3": ["9"]},
                  "\ud800", MASTER, "/cluster"]
        seeds = [request(KEY, t, q, rsalt="seed%d" % t)
                 for t, q in ((0, None), (2, {"1": "10.0.0.1"}),
                              (3, {"3": [0]}), (10, "/cluster"))]
        for n in range(3000):
            kind = n % 3
            if kind == 0:  # bytes mutated anywhere (mostly bad HMAC)
                data = bytearray(rng.choice(seeds))
                for _ in range(rng.randint(1, 4)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
                data = bytes(data[:rng.randint(0, len(data))])
            elif kind == 1:  # authenticated, random inner objects
                inner = {k: rng.choice(values) for k in
                         ("protocol", "type", "query", "rsalt", "extra")
                         if rng.random() < 0.8}
                if rng.random() < 0.7:
                    inner["protocol"] = 1
                if rng.random() < 0.7:
                    inner["rsalt"] = "f%d" % n
                if rng.random() < 0.5:
                    inner["type"] = rng.randrange(-2, 14)
                data = request(KEY, 0, msg=json.dumps(inner))
            else:  # authenticated, random inner text
                text = "".join(rng.choice('{}[]":,01ab\\ ') for _ in
                               range(rng.randint(0, 40)))
                data = request(KEY, 0, msg=text)
            reply = self.send(data)
            if reply is not None:
                salt, body = reply_of(KEY, reply)
                self.assertIn(body.status, (0, 1, 2))
        stats = self.processor.stats()
        self.assertEqual(stats["dropped_internal_error"], 0)
        self.assertEqual(stats["received"], 3000)
        dropped = sum(v for k, v in stats.items() if k.startswith("dropped_"))
        self.assertEqual(stats["answered"] + dropped, 3000)
        self.assertGreater(stats["answered"], 300)
        self.assertEqual(self.flushLoggedErrors(), [])

    def test_stats_has_every_counter(self):
        stats = self.processor.stats()
        for reason in server.DROP_REASONS:
            self.assertEqual(stats["dropped_" + reason], 0)
        for reason in server.ERROR_REASONS:
            self.assertEqual(stats["error_" + reason], 0)
        self.processor.log_stats()
        line = [e for e in self.logged if "stats" in e][-1]
        self.assertEqual(line["stats"]["received"], 0)


class GuardTests(unittest.TestCase):

    def test_rate_limiter_disabled(self):
        limiter = guards.RateLimiter(task.Clock(), rate=0)
        self.assertTrue(all(limiter.allow("a") for _ in range(10000)))
        self.assertEqual(len(limiter), 0)

    def test_rate_limiter_forgets_least_recent_sources(self):
        clock = task.Clock()
        limiter = guards.RateLimiter(clock, rate=1, burst=1, max_sources=3)
        for source in "abcd":
            self.assertTrue(limiter.allow(source))
        self.assertEqual(len(limiter), 3)
        self.assertFalse(limiter.allow("d"))
        self.assertTrue(limiter.allow("a"))  # "a" was forgotten: full again

    def test_replay_cache_expiry(self):
        clock = task.Clock()
        cache = guards.ReplayCache(clock, 300)
        self.assertTrue(cache.check_and_add("ab" * 20, 0))
        self.assertFalse(cache.check_and_add("ab" * 20, 0))
        # same digest, other timestamp: another request
        self.assertTrue(cache.check_and_add("ab" * 20, 1))
        clock.advance(300)
        self.assertFalse(cache.check_and_add("ab" * 20, 0))  # 0+300 not past
        clock.advance(0.5)
        self.assertTrue(cache.check_and_add("cd" * 20, 200))
        self.assertEqual(len(cache), 2)  # bucket 0 expired as a whole
        self.assertIsNone(cache.floor)

    def test_replay_cache_floor_only_rises(self):
        cache = guards.ReplayCache(task.Clock(), 300, max_entries=2)
        cache.check_and_add("01" * 20, 50)
        cache.check_and_add("02" * 20, 40)
        cache.check_and_add("03" * 20, 60)  # evicts bucket 40
        self.assertEqual((cache.floor, len(cache), cache.evicted), (40, 2, 1))
        self.assertRaises(guards.BelowFloor, cache.check_and_add,
                          "04" * 20, 40)
        cache.check_and_add("05" * 20, 70)  # evicts bucket 50
        self.assertEqual(cache.floor, 50)
        # full again: 51 would be the oldest entry, so it is refused
        # without forgetting anything
        self.assertRaises(guards.BelowFloor, cache.check_and_add,
                          "06" * 20, 51)
        self.assertEqual((cache.floor, len(cache)), (50, 2))
        self.assertTrue(cache.check_and_add("07" * 20, 61))  # evicts 60
        self.assertEqual((cache.floor, len(cache), cache.evicted), (60, 2, 3))


class ReloadTests(_ClusterMixin, ClockTestCase):

    def setUp(self):
        _ClusterMixin.setUp(self)
        ClockTestCase.setUp(self)
        self.clock.advance(T0)
        self.watcher = reloader.ConfigWatcher(self.cluster.paths.config_file,
                                              self.clock, interval=1.0)
        self.addCleanup(self.watcher.stop)
        self.processor = server.ConfdProcessor(KEY, self.watcher, self.clock)
        self.logged = EventLoggingObserver.createWithCleanup(
            self, globalLogPublisher)
        self.n = 0

    def ask_role(self, name):
        self.n += 1
        packet = self.processor.handle(
            request(KEY, 1, name, rsalt="r%d" % self.n,
                    stamp=int(self.clock.seconds())), "127.0.0.1")
        return reply_of(KEY, packet)[1]

    def test_initial_load(self):
        self.watcher.start()
        self.assertEqual(self.watcher.snapshot.serial, self.serial)
        reply = self.ask_role(NODE3)
        self.assertEqual((reply.answer, reply.serial), (4, self.serial))
        self.assertEqual(self.processor.stats()["config_reloads"], 1)

    def test_change_is_picked_up_by_polling(self):
        self.watcher.start()
        old = self.watcher.snapshot
        self.store.set_node_params(NODE3, offline=True)
        self.store.set_cluster_params(master_ip="192.0.2.253")
        # until the next poll the old snapshot answers, consistently
        self.assertEqual(self.ask_role(NODE3).answer, 4)
        self.clock.advance(1)
        self.assertIsNot(self.watcher.snapshot, old)
        reply = self.ask_role(NODE3)
        self.assertEqual((reply.answer, reply.serial),
                         (wire.NODE_ROLE_OFFLINE, self.serial))
        self.assertGreater(self.serial, old.serial)
        self.assertEqual(self.watcher.reloads, 2)

    def test_unchanged_file_is_not_reloaded(self):
        self.watcher.start()
        snap = self.watcher.snapshot
        self.clock.pump([1] * 5)
        self.assertIs(self.watcher.snapshot, snap)
        self.assertEqual(self.watcher.reloads, 1)

    def test_broken_file_keeps_old_config(self):
        self.watcher.start()
        good = self.watcher.snapshot
        path = self.cluster.paths.config_file
        with open(path + ".tmp", "w") as f:
            f.write('{"version": 3000000, "cluster": ')
        os.rename(path + ".tmp", path)
        self.clock.advance(1)
        self.assertIs(self.watcher.snapshot, good)
        self.assertEqual(self.watcher.reload_failures, 1)
        self.assertEqual(self.ask_role(MASTER).serial, good.serial)
        errors_logged = [e for e in self.logged if e.get("log_level") and
                         e["log_level"].name == "error"]
        self.assertEqual(len(errors_logged), 1)
        self.assertIn("still serving serial", errors_logged[0]["what"])
        # not retried every second while it stays broken
        self.clock.pump([1] * 3)
        self.assertEqual(self.watcher.reload_failures, 1)
        # fixed: picked up
        self.store.save()
        self.clock.advance(1)
        self.assertIsNot(self.watcher.snapshot, good)
        self.assertEqual(self.watcher.snapshot.file_serial,
                         self.store.serial_no)

    def test_missing_file_then_created(self):
        path = self.cluster.paths.config_file
        os.rename(path, path + ".away")
        self.watcher.start()
        self.assertIsNone(self.watcher.snapshot)
        reply = self.ask_role(MASTER)
        self.assertEqual((reply.status, reply.serial), (1, 0))
        self.assertIn("not loaded", reply.answer)
        os.rename(path + ".away", path)
        self.clock.advance(1)
        self.assertEqual(self.ask_role(MASTER).answer, wire.NODE_ROLE_MASTER)

    def test_reload_method(self):
        self.assertIsNone(self.watcher.snapshot)
        self.assertTrue(self.successResultOf(self.watcher.reload()))
        first = self.watcher.snapshot
        self.assertTrue(self.successResultOf(self.watcher.reload()))
        self.assertIsNot(self.watcher.snapshot, first)
        os.unlink(self.cluster.paths.config_file)
        self.assertFalse(self.successResultOf(self.watcher.reload()))
        self.assertIsNotNone(self.watcher.snapshot)
        self.assertIn("cannot read", self.watcher.last_error)

    def test_reload_in_a_worker_keeps_serving_the_old_config(self):
        pending = []

        def runner(f, *args):
            # stands in for the worker thread: the work is done when we say
            d = defer.Deferred()
            pending.append((d, f, args))
            return d
        watcher = reloader.ConfigWatcher(self.cluster.paths.config_file,
                                         self.clock, runner=runner)
        self.addCleanup(watcher.stop)
        self.processor.config = watcher
        watcher.start()  # the first load is synchronous
        self.assertEqual(pending, [])
        old = watcher.snapshot
        self.store.set_node_params(NODE3, offline=True)
        self.clock.advance(1)
        self.assertEqual(len(pending), 1)
        # a second change while loading: the poller waits for the load
        self.store.set_node_params(NODE3, offline=False, drained=True)
        self.clock.advance(1)
        self.assertEqual(len(pending), 1)
        self.assertEqual(self.ask_role(NODE3).answer, wire.NODE_ROLE_REGULAR)
        d, f, args = pending.pop()
        d.callback(f(*args))  # the worker finishes (it read the newest file)
        self.assertIsNot(watcher.snapshot, old)
        self.assertEqual(self.ask_role(NODE3).answer, wire.NODE_ROLE_DRAINED)
        self.assertEqual(watcher.reloads, 2)
        # it knows which file it read: no build of the same file again
        self.assertEqual(pending, [])
        self.clock.advance(1)
        self.assertEqual(pending, [])
        # a failure in the worker keeps the current snapshot
        current = watcher.snapshot
        with open(self.cluster.paths.config_file, "w") as fh:
            fh.write("{")
        self.clock.advance(1)
        d, f, args = pending.pop()
        d.errback(ValueError("broken"))
        self.assertIs(watcher.snapshot, current)
        self.assertEqual((watcher.reload_failures, watcher.last_error),
                         (1, "broken"))
        self.clock.advance(1)  # and that file is not tried again
        self.assertEqual(pending, [])

    def test_snapshot_built_once_per_version(self):
        built = []
        real = reloader.ConfigSnapshot

        def counting(store, **kwargs):
            built.append(store.serial_no)
            return real(store, **kwargs)
        self.patch(reloader, "ConfigSnapshot", counting)
        self.watcher.start()
        for _ in range(20):
            self.ask_role(MASTER)
            self.clock.advance(1)
        self.store.set_node_params(NODE3, drained=True)
        for _ in range(5):
            self.clock.advance(1)
            self.ask_role(MASTER)
        self.assertEqual(len(built), 2)

    def test_answer_serial_matches_the_snapshot_used(self):
        self.watcher.start()
        snaps = []
        real_answer = queries.answer

        def spying(snap, *args):
            snaps.append(snap)
            return real_answer(snap, *args)
        self.patch(queries, "answer", spying)
        for _ in range(3):
            self.store.set_cluster_params(master_ip="192.0.2.%d" % (200 + _))
            self.clock.advance(1)
            reply = self.ask_role(MASTER)
            self.assertEqual(reply.serial, snaps[-1].serial)
            self.assertEqual(reply.serial, self.store.cluster.serial_no)


class ServiceTests(unittest.TestCase):

    def setUp(self):
        self.cluster = build_cluster(self.mktemp())
        self.root = self.cluster.paths.root

    def options(self, *args):
        opts = confd_service.Options()
        opts.parseOptions(["--root", self.root] + list(args))
        return opts

    def test_defaults(self):
        opts = self.options()
        self.assertEqual(opts["bind"], "0.0.0.0")
        self.assertEqual(opts["port"], confd_service.default_port())
        self.assertEqual(opts["hmac-key"], KEY)
        self.assertEqual(opts["config-file"], self.cluster.paths.config_file)

    def test_bad_options(self):
        for args in (["--port", "70000"], ["--bind", "localhost"],
                     ["--poll-interval", "0"], ["--rate-burst", "0"],
                     ["--port", "x"]):
            self.assertRaises(usage.UsageError, self.options, *args)

    def test_missing_key_is_a_clear_error(self):
        os.chmod(self.cluster.paths.hmac_key_file, 0o600)
        os.unlink(self.cluster.paths.hmac_key_file)
        err = self.assertRaises(usage.UsageError, self.options)
        self.assertIn("hmac.key", str(err))

    def test_make_service_listens_only_when_started(self):
        reactor = FakeUDPReactor()
        svc = confd_service.makeService(
            self.options("--bind", "127.0.0.1", "--port", "18140",
                         "--stats-interval", "10"), reactor=reactor)
        self.assertEqual(reactor.network, {})
        svc.startService()
        self.addCleanup(svc.stopService)
        self.assertEqual(list(reactor.network), [("127.0.0.1", 18140)])
        self.assertEqual(svc.watcher.snapshot.serial,
                         self.cluster.store.cluster.serial_no)
        logged = EventLoggingObserver.createWithCleanup(self,
                                                        globalLogPublisher)
        reactor.advance(10)
        self.assertTrue([e for e in logged if "stats" in e])

    def test_sigusr1_logs_stats(self):
        reactor = FakeUDPReactor()
        svc = confd_service.makeService(
            self.options("--bind", "127.0.0.1", "--port", "18141",
                         "--stats-interval", "0"), reactor=reactor)
        before = signal.getsignal(signal.SIGUSR1)
        svc.startService()
        logged = EventLoggingObserver.createWithCleanup(self,
                                                        globalLogPublisher)
        try:
            reactor.advance(1000)
            self.assertEqual([e for e in logged if "stats" in e], [])
            os.kill(os.getpid(), signal.SIGUSR1)
            reactor.advance(0)
            stats = [e["stats"] for e in logged if "stats" in e]
            self.assertEqual(len(stats), 1)
            self.assertEqual(stats[0]["config_reloads"], 1)
        finally:
            svc.stopService()
        self.assertEqual(signal.getsignal(signal.SIGUSR1), before)

    def test_plugin_is_found(self):
        from twisted.application.service import IServiceMaker
        from twisted.plugin import getPlugins
        makers = {p.tapname: p for p in getPlugins(IServiceMaker)}
        self.assertIn("ganeti-confd", makers)
        opts = makers["ganeti-confd"].options()
        self.assertIsInstance(opts, confd_service.Options)


class SnapshotObjectTests(unittest.TestCase):

    def test_drbd_children_are_indexed(self):
        # A DRBD disk nested under another device still counts.
        cluster = build_cluster(self.mktemp())
        store = cluster.store
        inst = store.get_instance("inst3.example.com")
        disk = store.instance_disks(inst)[0]
        n1 = store.get_node(MASTER).uuid
        n3 = store.get_node(NODE3).uuid
        disk.children = [objects.Disk(dev_type="drbd",
                                      logical_id=[n3, n1, 11005, 7, 8, "x"])]
        snap = snapshot_mod.ConfigSnapshot(store)
        self.assertEqual([m.to_list() for m in snap.drbd_minors[n3]],
                         [[NODE3, 7, "inst3.example.com", "disk/0", "primary",
                           MASTER]])
