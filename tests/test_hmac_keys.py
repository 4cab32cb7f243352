"""The HMAC key followed on disk during a renewal (ganeti.confd.keys): confd
answers requests signed with the old and the new key while both are good,
each with the key the request came with, and only the new one after;
mond signs its self-diagnosis with the current key and asks confd with it;
maintd accepts reports signed with either while both are good."""

import os

from twisted.internet import defer, task
from twisted.trial import unittest

from ganeti.backend import rotation
from ganeti.confd import keys
from ganeti.confd import server
from ganeti.confd import wire
from ganeti.mond import diagnose

from tests.fakes import ClockTestCase
from tests.test_confd_fixtures import (KEY, T0, FakeUDPReactor, build_cluster,
                                       reply_of, request)

NEW = b"fedcba9876543210fedcba9876543210fedcba98\n"
STRANGER = b"1111111111111111111111111111111111111111\n"


class KeyFiles(object):
    """hmac.key and the three steps of a renewal on it."""

    def __init__(self, path):
        self.path = path

    def stage(self, key=NEW):
        rotation.stage(self.path, key)

    def switch(self, key=NEW):
        rotation.switch(self.path, rotation.key_digest,
                        rotation.key_digest(key))

    def forget(self, key=NEW):
        rotation.forget(self.path, rotation.key_digest,
                        rotation.key_digest(key))


class HmacKeysTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.dir = self.mktemp()
        os.makedirs(self.dir)
        self.path = os.path.join(self.dir, "hmac.key")
        with open(self.path, "wb") as f:
            f.write(KEY)
        self.files = KeyFiles(self.path)
        self.keys = keys.HmacKeys(self.path, self.clock)

    def test_follows_the_three_steps(self):
        self.assertEqual((self.keys.signing(), self.keys.accepted()),
                         (KEY, (KEY,)))
        self.files.stage()
        # looked at again only once the interval passed
        self.assertEqual(self.keys.accepted(), (KEY,))
        self.clock.advance(keys.CHECK_INTERVAL)
        self.assertEqual((self.keys.signing(), self.keys.accepted()),
                         (KEY, (KEY, NEW)))
        self.files.switch()
        self.clock.advance(keys.CHECK_INTERVAL)
        self.assertEqual((self.keys.signing(), self.keys.accepted()),
                         (NEW, (NEW, KEY)))
        self.files.forget()
        self.clock.advance(keys.CHECK_INTERVAL)
        self.assertEqual((self.keys.signing(), self.keys.accepted()),
                         (NEW, (NEW,)))
        reloads = self.keys.reloads
        self.clock.advance(keys.CHECK_INTERVAL)
        self.keys.signing()
        self.assertEqual(self.keys.reloads, reloads)   # unchanged: not read

    def test_a_vanished_key_keeps_the_last_one(self):
        os.chmod(self.path, 0o600)
        os.unlink(self.path)
        self.clock.advance(keys.CHECK_INTERVAL)
        self.assertEqual(self.keys.signing(), KEY)
        with open(self.path, "wb") as f:
            f.write(b"")
        self.clock.advance(keys.CHECK_INTERVAL)
        self.assertEqual(self.keys.accepted(), (KEY,))

    def test_missing_at_start(self):
        self.assertRaises(OSError, keys.HmacKeys,
                          os.path.join(self.dir, "nope"), self.clock)


class _Config(object):
    def __init__(self, snap):
        self.snapshot = snap


class ConfdDuringRenewalTests(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.clock.advance(T0)
        self.cluster = build_cluster(os.path.abspath(self.mktemp()))
        from ganeti.confd import reloader
        snap = reloader.build_snapshot(self.cluster.paths.config_file)
        self.files = KeyFiles(self.cluster.paths.hmac_key_file)
        self.processor = server.ConfdProcessor(
            keys.HmacKeys(self.cluster.paths.hmac_key_file, self.clock),
            _Config(snap), self.clock)
        self.n = 0

    def ping(self, key):
        """The reply's salt and status, checked with ``key``; None if
        confd did not answer."""
        self.n += 1
        stamp = int(self.clock.seconds())
        datagram = self.processor.handle(
            request(key, wire.REQ_PING, rsalt="r%d" % self.n, stamp=stamp),
            "127.0.0.1")
        if datagram is None:
            return None
        salt, reply = reply_of(key, datagram)
        self.assertEqual(salt, "r%d" % self.n)
        return reply.status

    def who_gets_answers(self):
        return [self.ping(k) is not None for k in (KEY, NEW, STRANGER)]

    def settle(self):
        self.clock.advance(keys.CHECK_INTERVAL)

    def test_old_and_new_key_while_both_are_good(self):
        self.assertEqual(self.who_gets_answers(), [True, False, False])
        self.files.stage()
        self.settle()
        self.assertEqual(self.who_gets_answers(), [True, True, False])
        self.files.switch()
        self.settle()
        self.assertEqual(self.who_gets_answers(), [True, True, False])
        self.files.forget()
        self.settle()
        self.assertEqual(self.who_gets_answers(), [False, True, False])
        self.assertEqual(self.ping(NEW), wire.STATUS_OK)
        self.assertGreater(self.processor.counters["dropped_bad_hmac"], 0)


class MondAndMaintdTests(unittest.TestCase):

    def test_reports_signed_with_the_current_key_checked_with_both(self):
        clock = task.Clock()
        clock.advance(T0)
        path = self.mktemp()
        with open(path, "wb") as f:
            f.write(KEY)
        files = KeyFiles(path)
        hmac_keys = keys.HmacKeys(path, clock)
        collector = diagnose.DiagnoseCollector(
            clock, clock, hmac_keys, "/nonexistent",
            builtin=lambda reactor, bus: defer.succeed({"status": "Ok"}))
        report = self.successResultOf(collector.collect())
        self.assertEqual(diagnose.open_report(report, KEY, T0, 60)["status"],
                         "Ok")
        files.stage()
        files.switch()
        clock.advance(keys.CHECK_INTERVAL)
        report = self.successResultOf(collector.collect())
        self.assertRaises(diagnose.BadReport, diagnose.open_report, report,
                          KEY, clock.seconds(), 60)
        # maintd, while both keys are good, and after
        self.assertEqual(diagnose.open_report(
            report, [KEY, NEW], clock.seconds(), 60)["status"], "Ok")
        err = self.assertRaises(diagnose.BadReport, diagnose.open_report,
                                report, [KEY, STRANGER], clock.seconds(), 60)
        self.assertEqual(err.reason, diagnose.BAD_SIGNATURE)

    def test_confd_settings_ask_with_the_new_key(self):
        from ganeti.mond import daemon as mdaemon
        net = FakeUDPReactor()
        net.advance(T0)
        cluster = build_cluster(os.path.abspath(self.mktemp()))
        paths = cluster.paths
        with open(paths.ssconf_file("master_candidates_ips"), "w") as f:
            f.write("127.0.0.9\n")
        from ganeti.confd import reloader
        snap = reloader.build_snapshot(paths.config_file)
        processor = server.ConfdProcessor(
            keys.HmacKeys(paths.hmac_key_file, net), _Config(snap), net)
        net.attach(("127.0.0.9", wire.DEFAULT_PORT),
                   server.ConfdProtocol(processor))
        settings = mdaemon.ConfdSettings(
            net, keys.HmacKeys(paths.hmac_key_file, net), paths,
            "127.0.0.2", timeout=1.0)
        self.addCleanup(settings.close)
        self.assertIsInstance(self.successResultOf(
            settings.data_collectors()), dict)
        files = KeyFiles(paths.hmac_key_file)
        files.stage()
        files.switch()
        files.forget()
        net.advance(keys.CHECK_INTERVAL)
        # confd now takes only the new key; so does the settings' client
        self.assertIsInstance(self.successResultOf(
            settings.data_collectors()), dict)
