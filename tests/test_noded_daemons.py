"""The node daemon's supervision of the node's other daemons by role
(ssconf), with a fake launcher and a fake clock."""

import os

from twisted.internet import defer, task
from twisted.trial import unittest
from zope.interface import implementer
from zope.interface.verify import verifyObject

from ganeti import daemon_util
from ganeti import errors
from ganeti import pathutils
from ganeti.backend import files
from ganeti.backend import master_ip
from ganeti.server.noded import daemons

ME = "127.0.0.21"
OTHER = "127.0.0.22"
MASTER_IP = "127.0.0.99"


@implementer(daemons.IDaemonLauncher)
class FakeLauncher(object):

    def __init__(self):
        self.live = set()
        self.log = []
        self.exits = {}
        #: daemons that die right after their start (with the exit status)
        self.dies = {}

    def start(self, daemon, bind, args):
        self.log.append(("start", daemon, tuple(args)))
        if daemon in self.dies:
            self.exits[daemon] = self.dies[daemon]
        else:
            self.live.add(daemon)
        return defer.succeed(1000 + len(self.log))

    def stop(self, daemon):
        self.log.append(("stop", daemon))
        self.live.discard(daemon)
        return defer.succeed(None)

    def running(self, daemon):
        return defer.succeed(daemon in self.live)

    def exit_status(self, daemon):
        return self.exits.pop(daemon, None)

    def crash(self, daemon, status=1):
        self.live.discard(daemon)
        self.exits[daemon] = status

    def started(self):
        return [entry[1] for entry in self.log if entry[0] == "start"]


class SupervisorTests(unittest.TestCase):

    def setUp(self):
        self.paths = pathutils.Paths(self.mktemp())
        self.paths.ensure_dirs()
        self.clock = task.Clock()
        self.launcher = FakeLauncher()
        self.master_up = True

        def run(fn, *args):
            if fn is daemons.master_answers:
                # masterd answers once started (unless it died)
                return defer.succeed(
                    self.master_up and
                    daemon_util.MASTERD in self.launcher.live)
            if fn is daemons._port_open:
                return defer.succeed(True)
            return defer.maybeDeferred(fn, *args)
        self.supervisor = daemons.DaemonSupervisor(
            self.clock, self.paths, ME, self.launcher, run,
            extra_args={"ganeti-maintd": ["--interval", "5"]}, interval=10)

    def ssconf(self, master, candidates=("me", "other")):
        files.write_ssconf_files(self.paths, {
            "node_primary_ips": "me %s\nother %s" % (ME, OTHER),
            "master_node": master, "master_candidates": "\n".join(candidates),
            "master_ip": MASTER_IP, "master_netmask": "32",
            "master_netdev": "lo"})

    def reconcile(self):
        return self.successResultOf(self.supervisor.reconcile())

    def test_launchers_provide_the_interface(self):
        verifyObject(daemons.IDaemonLauncher,
                     daemons.ProcessLauncher(self.paths, defer.succeed))
        verifyObject(daemons.IDaemonLauncher,
                     daemons.SystemdLauncher(self.clock))

    def test_master_runs_everything_in_order(self):
        self.ssconf("me")
        status = self.reconcile()
        self.assertEqual(self.launcher.started(), [
            "ganeti-mond", "ganeti-confd", "ganeti-masterd", "ganeti-rapi",
            "ganeti-maintd"])
        self.assertEqual(status["role"], "master")
        self.assertTrue(all(status["daemons"][d] for d in daemons.MASTER))
        # rapi also listens on the master IP; extra arguments are passed
        self.assertIn(("start", "ganeti-rapi", ("--also-bind", MASTER_IP)),
                      self.launcher.log)
        self.assertIn(("start", "ganeti-maintd", ("--interval", "5")),
                      self.launcher.log)
        self.assertEqual(master_ip.held_address(self.paths), MASTER_IP)
        # the watcher runs only when given arguments
        self.assertNotIn("ganeti-watcher", self.launcher.started())

    def test_roles(self):
        self.ssconf("other")
        self.reconcile()
        self.assertEqual(self.launcher.started(),
                         ["ganeti-mond", "ganeti-confd"])
        # demoted: confd goes
        self.ssconf("other", candidates=("other",))
        self.reconcile()
        self.assertEqual(self.launcher.live, {"ganeti-mond"})
        # not in the node list at all: nothing runs
        files.write_ssconf_files(self.paths, {"node_primary_ips":
                                              "other %s" % OTHER})
        self.reconcile()
        self.assertEqual(self.launcher.live, set())

    def test_losing_the_master_role_stops_its_daemons(self):
        self.ssconf("me")
        self.reconcile()
        self.ssconf("other")
        self.reconcile()
        self.assertEqual(self.launcher.live, {"ganeti-mond", "ganeti-confd"})
        self.assertIsNone(master_ip.held_address(self.paths))

    def test_lost_vote_holds_the_master_role(self):
        self.ssconf("me")
        self.launcher.dies["ganeti-masterd"] = daemons.EXIT_NOTMASTER
        self.assertFailure(self.supervisor.reconcile(),
                           daemons.MasterStartError)
        self.assertNotIn("ganeti-rapi", self.launcher.started())
        self.assertTrue(os.path.exists(self.supervisor.hold_path))
        self.assertIsNone(master_ip.held_address(self.paths))
        # later checks do not try again
        del self.launcher.dies["ganeti-masterd"]
        self.clock.advance(60)
        status = self.reconcile()
        self.assertEqual(self.launcher.started().count("ganeti-masterd"), 1)
        self.assertIn("status 11", status["held"])
        # a failover to this node does
        self.successResultOf(self.supervisor.start_master())
        self.assertIn("ganeti-rapi", self.launcher.live)
        self.assertFalse(os.path.exists(self.supervisor.hold_path))

    def test_stop_master_holds_until_ssconf_changes(self):
        self.ssconf("me")
        self.reconcile()
        result = self.successResultOf(self.supervisor.stop_master())
        self.assertEqual(result["stopped"], ["ganeti-maintd",
                                             "ganeti-masterd", "ganeti-rapi"])
        self.reconcile()
        self.assertEqual(self.launcher.live, {"ganeti-mond", "ganeti-confd"})
        # the new master's ssconf arrives: an ordinary candidate
        self.ssconf("other")
        status = self.reconcile()
        self.assertEqual(status["role"], "candidate")
        self.assertIsNone(status["held"])

    def test_start_master_needs_ssconf_naming_this_node(self):
        self.ssconf("other")
        self.failureResultOf(self.supervisor.start_master(),
                             errors.OpPrereqError)
        self.assertNotIn("ganeti-masterd", self.launcher.started())

    def test_start_master_without_voting(self):
        self.ssconf("me")
        self.successResultOf(self.supervisor.start_master(no_voting=True))
        self.assertIn(("start", "ganeti-masterd",
                       ("--no-voting", "--yes-do-it")), self.launcher.log)

    def test_crashed_daemon_restarted_with_growing_pauses(self):
        self.ssconf("other")
        self.reconcile()
        self.launcher.crash("ganeti-confd")
        self.reconcile()
        # died within seconds of its start: a pause first
        self.assertEqual(self.launcher.started().count("ganeti-confd"), 1)
        self.clock.advance(2)
        self.reconcile()
        self.assertEqual(self.launcher.started().count("ganeti-confd"), 2)
        # ran for long: restarted at once
        self.clock.advance(daemons.QUICK_DEATH + 1)
        self.launcher.crash("ganeti-confd")
        self.reconcile()
        self.assertEqual(self.launcher.started().count("ganeti-confd"), 3)

    def test_checks_every_interval(self):
        self.ssconf("other")
        self.supervisor.startService()
        self.addCleanup(self.supervisor.stopService)
        self.assertEqual(self.launcher.live, {"ganeti-mond", "ganeti-confd"})
        self.launcher.crash("ganeti-mond")
        self.clock.advance(daemons.QUICK_DEATH + 10)
        self.assertIn("ganeti-mond", self.launcher.live)

    def test_vote_info(self):
        self.ssconf("other")
        self.assertEqual(daemons.vote_info(self.paths),
                         {"master": "other", "serial": None})

    def test_parse_daemon_args(self):
        self.assertEqual(daemons.parse_daemon_args(
            ["ganeti-maintd=--interval 5", "ganeti-maintd=-v"]),
            {"ganeti-maintd": ["--interval", "5", "-v"]})
        for bad in ("ganeti-noded=-x", "maintd", "ganeti-rapi='x"):
            self.assertRaises(ValueError, daemons.parse_daemon_args, [bad])


class MasterIpTests(unittest.TestCase):

    def setUp(self):
        self.paths = pathutils.Paths(self.mktemp())

    def test_loopback_needs_no_address_change(self):
        self.assertEqual(master_ip.activate(self.paths, "127.0.0.99", 32,
                                            "lo"), "loopback")
        self.assertEqual(master_ip.held_address(self.paths), "127.0.0.99")
        self.assertEqual(master_ip.deactivate(self.paths), "127.0.0.99")
        self.assertIsNone(master_ip.held(self.paths))
        self.assertIsNone(master_ip.deactivate(self.paths))

    def test_bad_parameters(self):
        for args, field in ((("1.2.3", 32, "lo"), "master_ip"),
                            (("127.0.0.9", 40, "lo"), "master_netmask"),
                            (("127.0.0.9", 32, "../x"), "master_netdev")):
            err = self.assertRaises(errors.ParameterError,
                                    master_ip.activate, self.paths, *args)
            self.assertIn(field, str(err))
        self.assertIsNone(master_ip.held(self.paths))

    def test_external_script(self):
        script = os.path.join(self.paths.root, master_ip.EXTERNAL_SCRIPT)
        os.makedirs(os.path.dirname(script))
        out = os.path.join(self.paths.root, "calls")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho \"$1 $MASTER_IP/$MASTER_NETMASK"
                    " $MASTER_NETDEV $CLUSTER_IP_VERSION\" >> %s\n" % out)
        os.chmod(script, 0o755)
        master_ip.activate(self.paths, "192.0.2.10", 24, "eth9",
                           external_script=True)
        master_ip.deactivate(self.paths)
        with open(out) as f:
            self.assertEqual(f.read().splitlines(), [
                "start 192.0.2.10/24 eth9 4", "stop 192.0.2.10/24 eth9 4"])


UNITS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "etc", "systemd")


class SystemdTests(unittest.TestCase):

    def unit(self, name):
        import configparser
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        with open(os.path.join(UNITS, name)) as f:
            parser.read_file(f)
        return parser

    def test_a_unit_for_every_managed_daemon(self):
        from twisted.application.service import IServiceMaker
        from twisted.plugin import getPlugins
        import twisted.plugins  # noqa: F401
        plugins = {p.tapname for p in getPlugins(IServiceMaker)}
        for daemon in daemons.MANAGED + (daemon_util.NODED,):
            unit = self.unit(daemon + ".service")
            command = unit["Service"]["ExecStart"]
            self.assertIn(daemon, command)
            self.assertIn(daemon, plugins)
            self.assertEqual(unit["Unit"].get("PartOf"), "ganeti.target",
                             daemon)
        # the vote's "not the master" is final
        for daemon in (daemon_util.MASTERD, daemon_util.MAINTD):
            self.assertEqual(self.unit(daemon + ".service")["Service"][
                "RestartPreventExitStatus"], "11")
        noded = self.unit("ganeti-noded.service")
        self.assertIn("--daemons systemd", noded["Service"]["ExecStart"])
        target = self.unit("ganeti.target")
        self.assertIn("ganeti-noded.service", target["Unit"]["Wants"])
        # the role units are started by the node daemon, not enabled
        for daemon in daemons.MANAGED:
            if daemon != daemon_util.WATCHER:
                self.assertNotIn("Install", self.unit(daemon + ".service"))

    def test_launcher_uses_systemctl(self):
        from twisted.internet import reactor
        bindir = self.mktemp()
        os.makedirs(bindir)
        calls = os.path.join(bindir, "calls")
        fake = os.path.join(bindir, "systemctl")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho \"$@\" >> %s\n"
                    "[ \"$1\" = is-active ] && exit 3\n"
                    "[ \"$2\" = bad.service ] && echo nope && exit 5\n"
                    "exit 0\n" % calls)
        os.chmod(fake, 0o755)
        launcher = daemons.SystemdLauncher(reactor, systemctl=fake)

        @defer.inlineCallbacks
        def run():
            yield launcher.start("ganeti-confd", ME, [])
            running = yield launcher.running("ganeti-confd")
            self.assertFalse(running)
            yield launcher.stop("ganeti-confd")
            try:
                yield launcher.start("bad", ME, [])
            except errors.CommandError as err:
                self.assertIn("nope", str(err))
            else:
                self.fail("no error")
            with open(calls) as f:
                self.assertEqual(f.read().splitlines(), [
                    "start ganeti-confd.service",
                    "is-active --quiet ganeti-confd.service",
                    "stop ganeti-confd.service", "start bad.service"])
        return run()

    def test_wildcard_bind_finds_the_node_by_name(self):
        paths = pathutils.Paths(self.mktemp())
        paths.ensure_dirs()
        files.write_ssconf_files(paths, {
            "node_primary_ips": "me %s\nother %s" % (ME, OTHER),
            "master_node": "other", "master_candidates": "me\nother"})
        self.patch(os, "environ", dict(os.environ, GANETI_HOSTNAME="me"))
        role = daemons.read_role(paths, "0.0.0.0")
        self.assertEqual((role.node, role.role), ("me", "candidate"))
