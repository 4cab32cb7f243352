"""``ganeti-watcher``: the twistd plugin running watcher passes.

``twist ganeti-watcher --root DIR [--bind ADDR]`` runs a pass every
``--interval`` seconds (300 by default, the period Ganeti's cron job has);
``--once`` runs one pass and exits, for a cron job or a systemd timer
(etc/systemd/ganeti-watcher.timer), with status 1 if the pass could not be
done.  Passes never overlap: a pass that finds another watcher's lock
(``DIR/var/lock/ganeti-watcher.lock``, shared by every watcher process of
the node) does nothing.
"""

import atexit
import errno
import fcntl
import ipaddress
import os

from twisted.application import service
from twisted.internet import defer, task
from twisted.logger import Logger
from twisted.python import usage

from ganeti import luxi
from ganeti import pathutils
from ganeti.server.options import parse_duration
from ganeti.watcher import probes as wprobes
from ganeti.watcher import watcher as wwatcher

__all__ = ["Options", "makeService", "WatcherService", "PassLock",
           "DEFAULT_INTERVAL", "lock_path"]

log = Logger(namespace="ganeti.watcher")

#: Seconds between passes (Ganeti's watcher runs from cron every 5 minutes).
DEFAULT_INTERVAL = 300.0


def lock_path(paths):
    return os.path.join(paths.root, "var", "lock", "ganeti-watcher.lock")


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = ("The watcher: restarts instances that should run, records"
                " user shutdowns, cleans up kept domains, activates disks"
                " after node reboots and archives old jobs (docs/watcher.rst)."
                " Runs a pass every --interval seconds, or one with --once.")
    optFlags = [
        ["once", None, "Run one pass and exit (for cron or a systemd"
         " timer)."],
        ["ignore-pause", None, "Run even while the watcher is paused"
         " (gnt-cluster watcher pause)."],
        ["no-daemon-checks", None, "Do not check that this node's daemons"
         " answer."],
        ["no-verify-disks", None, "Do not verify the disks of each node"
         " group (OP_GROUP_VERIFY_DISKS) nor activate the inactive ones."],
        ["no-auto-repair", None, "Do not make an auto-repair pass on the"
         " master (docs/autorepair.rst; harep makes one too)."],
    ]
    optParameters = [
        ["root", None, "/", "Root directory: files are under"
         " ROOT/var/lib/ganeti (virtual cluster mode)."],
        ["bind", "b", "127.0.0.1", "Address this node's daemons listen on"
         " (where their answers are checked)."],
        ["interval", None, str(DEFAULT_INTERVAL), "Seconds between passes"
         " (s, m, h suffixes allowed)."],
        ["job-age", "A", str(wwatcher.DEFAULT_JOB_AGE), "Archive jobs older"
         " than this (seconds; s, m, h, d, w suffixes allowed)."],
        ["job-wait", None, str(wwatcher.DEFAULT_JOB_WAIT), "Seconds a pass"
         " waits for the jobs it submitted (0: do not wait)."],
        ["auto-repair-interval", None, "5", "On the master, an auto-repair"
         " pass every this many seconds between full passes (0: only with"
         " them)."],
    ]

    def postOptions(self):
        for name in ("interval", "job-age", "job-wait",
                     "auto-repair-interval"):
            self[name] = parse_duration("--" + name, self[name])
        if self["interval"] <= 0:
            raise usage.UsageError("--interval must be positive")
        try:
            ipaddress.ip_address(self["bind"])
        except ValueError:
            raise usage.UsageError("--bind: %r is not an IP address"
                                   % self["bind"])


class PassLock(object):
    """The node's watcher lock (flock), held for one pass."""

    def __init__(self, path):
        self.path = path
        self._fd = None

    def acquire(self):
        """True if taken; False if another watcher holds it."""
        os.makedirs(os.path.dirname(self.path), mode=0o755, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EACCES):
                return False
            raise
        self._fd = fd
        return True

    def release(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class WatcherService(service.Service):
    """Runs passes: one then ``stop()`` (``once``), or every ``interval``
    seconds on ``clock``.  ``make_watcher()`` gives the
    :class:`~ganeti.watcher.watcher.Watcher` of a pass and ``close(w)``
    is called after it; ``exit_status(code)`` is told 1 when a ``once``
    pass failed."""

    name = "watcher"

    def __init__(self, make_watcher, clock, interval=DEFAULT_INTERVAL,
                 once=False, stop=None, lock=None, close=None,
                 exit_status=None):
        self.make_watcher = make_watcher
        self.clock = clock
        self.interval = interval
        self.once = once
        self.stop = stop
        self.lock = lock
        self.close = close
        self.exit_status = exit_status
        self.reports = []
        self._loop = None
        self._current = None

    def startService(self):
        service.Service.startService(self)
        if self.once:
            d = self.run_once()
            d.addBoth(self._stop_after_once)
        else:
            self._loop = task.LoopingCall(self.run_once)
            self._loop.clock = self.clock
            self._loop.start(self.interval, now=True).addErrback(
                lambda f: log.failure("watcher loop failed", f))

    def _stop_after_once(self, report):
        if (report is None or getattr(report, "failed", True)) and \
                self.exit_status is not None:
            self.exit_status(1)
        if self.stop is not None:
            self.stop()

    def stopService(self):
        service.Service.stopService(self)
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._current is not None:
            # let the pass end: its jobs are submitted, its state saved
            return self._current
        return None

    def run_once(self):
        """One pass; Deferred of its report (``skipped`` if another
        watcher held the lock, None if it failed unexpectedly).  Never
        fails."""
        d = defer.Deferred.fromCoroutine(self._pass())
        self._current = d

        def done(result):
            if self._current is d:
                self._current = None
            return result
        return d.addBoth(done)

    async def _pass(self):
        report = await self._locked_pass()
        if report is not None:
            self.reports.append(report)
            del self.reports[:-10]
        return report

    async def _locked_pass(self):
        if self.lock is not None:
            try:
                taken = self.lock.acquire()
            except OSError as err:
                log.error("Cannot take the watcher lock {path}: {err}",
                          path=self.lock.path, err=err.strerror or err)
                return None
            if not taken:
                # not a failure (as in Ganeti): the other one does the work
                log.info("Another watcher holds {path}; skipping this pass",
                         path=self.lock.path)
                return wwatcher.PassReport(skipped=True)
        watcher = None
        try:
            watcher = self.make_watcher()
            return await watcher.run_pass()
        except Exception:
            log.failure("Watcher pass failed")
            return None
        finally:
            if watcher is not None and self.close is not None:
                try:
                    await defer.maybeDeferred(self.close, watcher)
                except Exception:
                    log.failure("closing the watcher's connections failed")
            if self.lock is not None:
                self.lock.release()


class RepairLoop(service.Service):
    """On the master, an auto-repair pass every ``interval`` seconds
    between the watcher's full passes, so that repairs follow job ends
    and node state changes within seconds.  A pass is skipped while the
    watcher is paused, while this node has no master socket (it is not
    the master) and while another pass holds the watcher lock (a full
    pass, or another watcher): two passes never decide at once."""

    name = "auto-repair"

    def __init__(self, autorepair, paths, clock, interval, lock,
                 ignore_pause=False, make_client=None, now=None):
        self.autorepair = autorepair
        self.paths = paths
        self.clock = clock
        self.interval = interval
        self.lock = lock
        self.ignore_pause = ignore_pause
        self.make_client = make_client or (
            lambda: luxi.LuxiClient(clock, paths.master_socket))
        self.now = now or clock.seconds
        self.passes = 0
        self._loop = None

    def startService(self):
        service.Service.startService(self)
        self._loop = task.LoopingCall(self.run_once)
        self._loop.clock = self.clock
        self._loop.start(self.interval, now=False).addErrback(
            lambda f: log.failure("auto-repair loop failed", f))

    def stopService(self):
        service.Service.stopService(self)
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def run_once(self):
        return defer.Deferred.fromCoroutine(self._run())

    async def _run(self):
        if not os.path.exists(self.paths.master_socket):
            return None
        if not self.ignore_pause:
            from ganeti.watcher import pause as wpause
            until, _ = wpause.read_pause(wpause.pause_path(self.paths),
                                         self.now())
            if until is not None:
                return None
        try:
            if not self.lock.acquire():
                return None
        except OSError as err:
            log.error("Cannot take the watcher lock {path}: {err}",
                      path=self.lock.path, err=err.strerror or err)
            return None
        client = self.make_client()
        try:
            self.passes += 1
            return await defer.maybeDeferred(self.autorepair, client)
        except Exception as err:
            log.warn("Auto-repair pass failed: {err}", err=err)
            return None
        finally:
            self.lock.release()
            try:
                await defer.maybeDeferred(client.close)
            except Exception as err:
                log.warn("Closing the auto-repair pass's connection failed:"
                         " {err}", err=err)


def _autorepair_pass(reactor):
    """``autorepair(client)``: one auto-repair pass (docs/autorepair.rst);
    its budget is the node groups' (repair_max_parallel).  A pass does not
    wait for the repairs it submitted (the watcher lock is not held for a
    long repair): the next pass checks how their tag jobs ended."""
    unconfirmed = {}

    def autorepair(client):
        from ganeti.watcher.autorepair import runner
        return defer.Deferred.fromCoroutine(
            runner.AutoRepair(client, reactor, wait_tags=False,
                              unconfirmed=unconfirmed).run_once())
    return autorepair


def _exit_with(code):
    """Make the process exit with ``code`` once twist/twistd is done."""
    atexit.register(os._exit, code)


def makeService(options, reactor=None):
    if reactor is None:
        from twisted.internet import reactor
    paths = pathutils.Paths(options["root"])
    probes = None
    if not options["no-daemon-checks"]:
        probes = wprobes.DaemonProbes(reactor, paths, options["bind"])

    autorepair = (None if options["no-auto-repair"]
                  else _autorepair_pass(reactor))

    def make_watcher():
        client = luxi.LuxiClient(reactor, paths.master_socket)
        return wwatcher.Watcher(client, paths, reactor, probes=probes,
                                job_age=options["job-age"],
                                job_wait=options["job-wait"],
                                ignore_pause=options["ignore-pause"],
                                autorepair=autorepair,
                                verify_disks=not options["no-verify-disks"])

    def close(watcher):
        return watcher.client.close()

    def stop():
        # a pass with nothing to do (paused) ends before the reactor runs
        reactor.callWhenRunning(reactor.stop)

    watcher = WatcherService(make_watcher, reactor,
                             interval=options["interval"],
                             once=options["once"], stop=stop,
                             lock=PassLock(lock_path(paths)), close=close,
                             exit_status=_exit_with)
    fast = options["auto-repair-interval"]
    if autorepair is None or options["once"] or not fast:
        return watcher
    top = service.MultiService()
    watcher.setServiceParent(top)
    RepairLoop(autorepair, paths, reactor, fast, PassLock(lock_path(paths)),
               ignore_pause=options["ignore-pause"]).setServiceParent(top)
    return top
