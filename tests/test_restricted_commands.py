"""Restricted and repair commands on a node: the whitelist checks, the
node's command lock, the delay before a refusal is answered (on a fake
clock), stdin of repair commands, the timeout, and the two procedures."""

import os
import time

from twisted.internet import defer, reactor, task

from ganeti import errors
from ganeti import pathutils
from ganeti.backend import restricted
from ganeti.server.noded import make_procedures
from ganeti.server.noded.commands import make_command_sets
from ganeti.server.noded.procedure import INLINE

from tests.fakes import ClockTestCase

NOBODY = 65534


def write_program(path, body, mode=0o755):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, mode)
    return path


class CommandTestCase(ClockTestCase):
    """A node root with both whitelist directories (mode 0755, ours)."""

    def setUp(self):
        ClockTestCase.setUp(self)
        self.paths = pathutils.Paths(os.path.abspath(self.mktemp()))
        for d in (self.paths.restricted_commands_dir,
                  self.paths.repair_commands_dir):
            os.makedirs(d)
            os.chmod(d, 0o755)
        self.sets = self.make_sets()

    def make_sets(self, clock=None, **kw):
        """The command sets of a node daemon on this root: the fake clock
        times lock waits and delays, the real reactor runs programs."""
        return make_command_sets(reactor, self.paths, INLINE,
                                 clock=clock or self.clock, **kw)

    def program(self, name, body, mode=0o755, kind=restricted.RESTRICTED):
        directory = (self.paths.restricted_commands_dir
                     if kind == restricted.RESTRICTED
                     else self.paths.repair_commands_dir)
        return write_program(os.path.join(directory, name), body, mode)

    def run_cmd(self, name, kind=restricted.RESTRICTED, stdin=None,
                sets=None):
        return (sets or self.sets)[kind].run(name, stdin=stdin)

    def assert_refused(self, d, name, delay=restricted.FAILURE_DELAY):
        """``d`` fails with the generic message, and only after the
        delay."""
        failures = []
        d.addErrback(failures.append)
        self.clock.advance(delay - 0.01)
        self.assertEqual(failures, [], "answered before the delay")
        self.clock.advance(0.01)
        self.assertEqual(len(failures), 1, "not answered after the delay")
        err = failures[0].value
        self.assertIsInstance(err, errors.OpExecError)
        self.assertEqual(str(err), "Executing command '%s' failed" % name)


class WhitelistTests(CommandTestCase):

    def test_bad_names_are_refused_after_the_delay(self):
        self.program("ok", "echo ran")
        for name in ("", " ", "../restricted-commands/ok", "a/ok", "ok ",
                     "o k", "ok;ls", "ok$", ".", ".."):
            self.assert_refused(self.run_cmd(name), name)

    def test_check_name(self):
        for good in ("reboot-now", "fix_disk.sh", "A9"):
            restricted.check_name(good)
        for bad in ("", "x/y", "/bin/ls", "..", "a\nb", "é"):
            self.assertRaises(restricted.CommandRefused,
                              restricted.check_name, bad)

    def test_missing_program(self):
        self.assert_refused(self.run_cmd("nosuch"), "nosuch")

    def test_missing_directory(self):
        os.rmdir(self.paths.repair_commands_dir)
        self.assert_refused(self.run_cmd("x", restricted.REPAIR), "x")

    def test_not_executable(self):
        self.program("plain", "echo ran", mode=0o644)
        self.assert_refused(self.run_cmd("plain"), "plain")

    def test_directory_writable_by_group_or_others(self):
        self.program("ok", "echo ran")
        for mode in (0o775, 0o757, 0o777):
            os.chmod(self.paths.restricted_commands_dir, mode)
            self.assert_refused(self.run_cmd("ok"), "ok")
            reason = self.assertRaises(
                restricted.CommandRefused, restricted.find_executable,
                self.paths.restricted_commands_dir, "ok",
                (os.geteuid(), os.getegid()))
            self.assertIn("mode %04o" % mode, str(reason))

    def test_program_writable_by_group_or_others(self):
        for mode in (0o775, 0o757, 0o4755):
            self.program("loose", "echo ran", mode=mode)
            self.assert_refused(self.run_cmd("loose"), "loose")

    def test_wrong_owner(self):
        self.program("ok", "echo ran")
        uid, gid = os.geteuid(), os.getegid()
        for owner in ((uid + 1, gid), (uid, gid + 1)):
            sets = self.make_sets()
            sets[restricted.RESTRICTED].owner = owner
            self.assert_refused(self.run_cmd("ok", sets=sets), "ok")

    def test_program_of_another_owner(self):
        if os.geteuid() != 0:
            self.skipTest("changing a file's owner needs root")
        path = self.program("theirs", "echo ran")
        os.chown(path, NOBODY, os.getegid())
        reason = self.assertRaises(
            restricted.CommandRefused, restricted.find_executable,
            self.paths.restricted_commands_dir, "theirs", (0, 0))
        self.assertIn("owned by %d:" % NOBODY, str(reason))
        self.assert_refused(self.run_cmd("theirs"), "theirs")

    def test_symlink_out_of_the_directory(self):
        outside = write_program(os.path.join(self.paths.root, "evil"),
                                "echo ran")
        os.symlink(outside, os.path.join(self.paths.restricted_commands_dir,
                                         "escape"))
        os.symlink("/bin/true", os.path.join(
            self.paths.restricted_commands_dir, "true"))
        self.assert_refused(self.run_cmd("escape"), "escape")
        self.assert_refused(self.run_cmd("true"), "true")

    def test_a_command_of_one_list_is_not_in_the_other(self):
        self.program("only-restricted", "echo ran")
        self.assert_refused(self.run_cmd("only-restricted",
                                         restricted.REPAIR),
                            "only-restricted")

    def test_disabled_node_refuses_without_running(self):
        marker = os.path.join(self.paths.root, "ran")
        self.program("ok", "touch %s" % marker)
        sets = self.make_sets(enabled=False)
        err = self.failureResultOf(self.run_cmd("ok", sets=sets),
                                   errors.OpExecError).value
        self.assertIn("disabled", str(err))
        self.assertFalse(os.path.exists(marker))


class RunTests(CommandTestCase):

    timeout = 30

    async def test_output_of_a_whitelisted_program(self):
        self.program("hello", "echo out; echo err >&2; echo \"[$PWD]\"")
        out = await self.run_cmd("hello")
        self.assertEqual(sorted(out.splitlines()), ["[/]", "err", "out"])

    async def test_symlink_inside_the_directory(self):
        self.program("real", "echo real")
        os.symlink("real", os.path.join(self.paths.restricted_commands_dir,
                                        "alias"))
        self.assertEqual(await self.run_cmd("alias"), "real\n")

    async def test_no_arguments_and_a_minimal_environment(self):
        os.environ["RCMD_TEST_SECRET"] = "leak"
        self.addCleanup(os.environ.pop, "RCMD_TEST_SECRET", None)
        self.program("env", 'echo "$#:${RCMD_TEST_SECRET:-none}"')
        self.assertEqual(await self.run_cmd("env"), "0:none\n")

    async def test_failure_reports_status_and_output_at_once(self):
        self.program("broken", "echo disk sdb gone; exit 3")
        try:
            await self.run_cmd("broken")
        except errors.OpExecError as err:
            self.assertEqual(str(err), "Restricted command 'broken' exited"
                             " with status 3; output: disk sdb gone\n")
        else:
            self.fail("a failing command succeeded")

    async def test_repair_command_reads_its_input_on_stdin(self):
        self.program("echo-input", "cat; echo; echo done",
                     kind=restricted.REPAIR)
        text = '{"status": "live-repair", "command": "echo-input"}'
        out = await self.run_cmd("echo-input", restricted.REPAIR,
                                 stdin=text)
        self.assertEqual(out, text + "\ndone\n")

    async def test_restricted_command_stdin_is_empty(self):
        self.program("reads", "wc -c")
        self.assertEqual((await self.run_cmd("reads")).strip(), "0")

    async def test_timeout_kills_the_command(self):
        self.program("hangs", "echo started; sleep 60")
        sets = self.make_sets(timeout=0.5)
        started = time.monotonic()
        try:
            await self.run_cmd("hangs", sets=sets)
        except errors.OpExecError as err:
            self.assertIn("Restricted command 'hangs' timed out after 0.5s",
                          str(err))
            self.assertIn("started", str(err))
        else:
            self.fail("a command outliving its timeout succeeded")
        self.assertLess(time.monotonic() - started, 10)


class LockTests(CommandTestCase):

    timeout = 30

    def setUp(self):
        CommandTestCase.setUp(self)
        self.go = os.path.join(self.paths.root, "go")
        self.marker = os.path.join(self.paths.root, "second-ran")
        self.program("waits", "while [ ! -e %s ]; do sleep 0.02; done;"
                     " echo first" % self.go)
        self.program("second", "touch %s; echo second" % self.marker)

    async def wait_for_lock_holder(self):
        lock = restricted.FileLock(self.paths.restricted_commands_lock_file,
                                   reactor, poll=0.01)
        # the first command holds the lock once a probe cannot have it
        for _ in range(500):
            if os.path.exists(self.paths.restricted_commands_lock_file) \
                    and not await lock.acquire(0):
                return
            lock.release()
            await task.deferLater(reactor, 0.01, lambda: None)
        self.fail("the first command never took the lock")

    async def test_second_daemon_on_the_root_waits_then_is_refused(self):
        # two node daemons on one root: separate command sets, one lock file
        first = self.make_sets(clock=reactor)
        running = self.run_cmd("waits", sets=first)
        await self.wait_for_lock_holder()
        second = self.make_sets()       # on the fake clock
        d = self.run_cmd("second", sets=second)
        self.clock.advance(restricted.LOCK_TIMEOUT - 0.1)
        self.assertNoResult(d)
        self.clock.advance(0.1)
        # lock not had: refused after the delay, never run
        self.assert_refused(d, "second")
        self.assertFalse(os.path.exists(self.marker))
        open(self.go, "w").close()
        self.assertEqual(await running, "first\n")
        # free again: runs at once
        self.assertEqual(await self.run_cmd("second", sets=second),
                         "second\n")

    async def test_waiting_command_runs_once_the_lock_is_free(self):
        holder = restricted.FileLock(self.paths.restricted_commands_lock_file,
                                     self.clock)
        self.assertTrue(self.successResultOf(
            defer.ensureDeferred(holder.acquire(0))))
        d = self.run_cmd("second", restricted.RESTRICTED)
        self.clock.advance(3)
        self.assertNoResult(d)
        self.assertFalse(os.path.exists(self.marker))
        holder.release()
        self.clock.advance(restricted.LOCK_POLL)
        self.assertEqual(await d, "second\n")

    async def test_repair_and_restricted_commands_share_the_lock(self):
        self.program("fix", "touch %s; echo fixed" % self.marker,
                     kind=restricted.REPAIR)
        first = self.make_sets(clock=reactor)
        running = self.run_cmd("waits", sets=first)
        await self.wait_for_lock_holder()
        d = self.run_cmd("fix", restricted.REPAIR, stdin="x")
        self.clock.advance(restricted.LOCK_TIMEOUT)
        self.assert_refused(d, "fix")
        self.assertFalse(os.path.exists(self.marker))
        open(self.go, "w").close()
        await running

    async def test_commands_of_one_daemon_run_one_at_a_time(self):
        log = os.path.join(self.paths.root, "log")
        self.program("span", "echo start >> %s; sleep 0.2;"
                     " echo end >> %s" % (log, log))
        sets = self.make_sets(clock=reactor)
        await defer.gatherResults([self.run_cmd("span", sets=sets)
                                   for _ in range(3)])
        with open(log) as f:
            self.assertEqual(f.read().split(), ["start", "end"] * 3)


class ProcedureTests(CommandTestCase):
    """The node daemon's procedures, as the HTTP layer calls them."""

    timeout = 30

    def setUp(self):
        CommandTestCase.setUp(self)
        self.procs = make_procedures(reactor, self.paths.root,
                                     run_blocking=INLINE)

    async def test_procedures_run_each_list(self):
        self.program("uptime", "echo up 3 days")
        self.program("fix", "tr a-z A-Z", kind=restricted.REPAIR)
        self.assertEqual(await self.procs.call("restricted_command",
                                               ["uptime"]),
                         "up 3 days\n")
        self.assertEqual(await self.procs.call(
            "repair_command", {"cmd": "fix", "inp": "swap disk"}),
            "SWAP DISK")

    def test_bad_argument_type_is_named(self):
        err = self.failureResultOf(
            self.procs.call("restricted_command", [["ls"]]),
            errors.ParameterError).value
        self.assertIn("argument 'cmd' of restricted_command", str(err))
        err = self.failureResultOf(
            self.procs.call("repair_command", ["fix", 7]),
            errors.ParameterError).value
        self.assertIn("argument 'inp' of repair_command", str(err))

    def test_disabled_by_the_daemon_option(self):
        procs = make_procedures(reactor, self.paths.root,
                                run_blocking=INLINE,
                                restricted_commands=False)
        self.program("uptime", "echo up")
        for name, args in (("restricted_command", ["uptime"]),
                           ("repair_command", ["uptime", "x"])):
            err = self.failureResultOf(procs.call(name, args),
                                       errors.OpExecError).value
            self.assertIn("disabled on this node", str(err))
