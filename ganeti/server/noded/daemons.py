"""The node daemon keeps the node's other daemons in step with its role.

Every node runs ganeti-noded and ganeti-mond; a master candidate also
ganeti-confd; the master also ganeti-masterd, ganeti-rapi and
ganeti-maintd (docs/master-failover.rst).  The role comes from the
node's ssconf files, which the master rewrites on every node after each
change, so a promotion, a demotion or a master failover reaches the
node as a new ssconf and the daemons follow within a check.

How a daemon is started is a :class:`IDaemonLauncher`: as a child
process of the node daemon (a virtual cluster, or a system without
systemd), or through systemd units.

The master's daemons are guarded twice:

* ganeti-masterd asks the master candidates at start whether this node
  is the master, and exits with status 11 when they disagree with its
  configuration.  The node daemon then holds the master role: it starts
  neither masterd nor rapi nor maintd again until ssconf names another
  master or a master failover to this node asks for them
  (``node_start_master_daemons``).  A node that comes back after it lost
  the master role while it was down thus stays a non-master.
* ``node_stop_master`` (a failover elsewhere) stops them and holds the
  role the same way.  The hold is a file in the run directory, so a
  restart of the node daemon keeps it.

Ganeti-rapi and ganeti-maintd start only once ganeti-masterd answers:
a node whose master daemon lost its vote never serves the remote API.
"""

import json
import os
import shlex
import socket

import attrs
from twisted.application import service
from twisted.internet import defer, task
from twisted.internet.utils import getProcessOutputAndValue
from twisted.logger import Logger
from zope.interface import Interface, implementer

from ganeti import constants
from ganeti import daemon_util
from ganeti import errors
from ganeti import ht
from ganeti import luxi
from ganeti.backend import files
from ganeti.backend import master_ip as backend_master_ip
from ganeti.server.noded.procedure import Arg, procedure

log = Logger()

ROLE_MASTER = "master"
ROLE_CANDIDATE = "candidate"
ROLE_REGULAR = "regular"
#: not (or no longer) in the cluster's node list
ROLE_NONE = "none"

#: daemons by role; each role also runs those of the roles below it
EVERY_NODE = (daemon_util.MOND,)
CANDIDATE = (daemon_util.CONFD,)
#: in start order: rapi and maintd need masterd
MASTER = (daemon_util.MASTERD, daemon_util.RAPI, daemon_util.MAINTD)
#: the periodic watcher runs as a daemon only when given arguments
#: (--daemon-args 'ganeti-watcher=--interval 60'); systemd runs it from a
#: timer instead
OPTIONAL_EVERY_NODE = (daemon_util.WATCHER,)
MANAGED = EVERY_NODE + CANDIDATE + MASTER + OPTIONAL_EVERY_NODE

#: ganeti-masterd's (and ganeti-maintd's) exit status when the master
#: candidates say this node is not the master
EXIT_NOTMASTER = 11

#: seconds a master daemon may take until it answers
MASTER_START_TIMEOUT = 120.0
#: a daemon that dies sooner than this after its start is restarted
#: only after a growing pause
QUICK_DEATH = 30.0
MAX_BACKOFF = 300.0

HOLD_FILE = "master-role.held"


@attrs.frozen
class Role:
    node: str
    role: str
    master: str
    master_ip: str
    master_netmask: str
    master_netdev: str

    def daemons(self, extra_args):
        wanted = []
        if self.role == ROLE_NONE:
            return wanted
        wanted += EVERY_NODE
        wanted += [d for d in OPTIONAL_EVERY_NODE if d in extra_args]
        if self.role in (ROLE_CANDIDATE, ROLE_MASTER):
            wanted += CANDIDATE
        if self.role == ROLE_MASTER:
            wanted += MASTER
        return wanted


def _lines(paths, key):
    text = files.read_ssconf_value(paths, key, "") or ""
    return [line.strip() for line in text.splitlines() if line.strip()]


#: --bind values that say nothing about which node this is
WILDCARDS = ("", "0.0.0.0", "::")


def this_node_name():
    """This host's node name when the daemon listens on every address."""
    return os.environ.get("GANETI_HOSTNAME") or socket.getfqdn()


def read_role(paths, address):
    """This node's role from its ssconf files; ``address`` is its primary
    address (the node daemon's --bind; with a wildcard, the node is found
    by this host's name)."""
    name = None
    wildcard = address in WILDCARDS
    me = this_node_name() if wildcard else None
    for line in _lines(paths, "node_primary_ips"):
        node, _, ip = line.partition(" ")
        if (node == me) if wildcard else (ip == address):
            name = node
            break
    master = (_lines(paths, "master_node") or [""])[0]
    master_ip = (_lines(paths, "master_ip") or [""])[0]
    netmask = (_lines(paths, "master_netmask") or [""])[0]
    netdev = (_lines(paths, "master_netdev") or [""])[0]
    if name is None:
        role = ROLE_NONE
    elif name == master:
        role = ROLE_MASTER
    elif name in _lines(paths, "master_candidates"):
        role = ROLE_CANDIDATE
    else:
        role = ROLE_REGULAR
    return Role(name or "", role, master, master_ip, netmask, netdev)


def parse_daemon_args(values):
    """``["ganeti-maintd=--interval 5", ...]`` -> ``{daemon: [args]}``;
    ValueError naming the entry that is wrong."""
    result = {}
    for value in values:
        daemon, sep, args = value.partition("=")
        daemon = daemon.strip()
        if not sep or daemon not in MANAGED:
            raise ValueError("%r: expected DAEMON=ARGUMENTS with DAEMON one"
                             " of %s" % (value, ", ".join(MANAGED)))
        try:
            result.setdefault(daemon, []).extend(shlex.split(args))
        except ValueError as err:
            raise ValueError("%r: %s" % (value, err))
    return result


# --- launchers ---------------------------------------------------------------

class IDaemonLauncher(Interface):
    """Starts and stops this node's daemons."""

    def start(daemon, bind, args):
        """Deferred firing once ``daemon`` was started."""

    def stop(daemon):
        """Deferred firing once ``daemon`` has stopped (or was not
        running)."""

    def running(daemon):
        """Deferred[bool]: whether ``daemon`` runs."""

    def exit_status(daemon):
        """The exit status of ``daemon`` if it was started here and has
        ended since (once; None otherwise)."""


@implementer(IDaemonLauncher)
class ProcessLauncher(object):
    """Daemons as child processes in sessions of their own (they outlive
    the node daemon), with pidfiles under the run directory
    (:mod:`ganeti.daemon_util`): a restarted node daemon finds them."""

    def __init__(self, paths, run_blocking):
        self.paths = paths
        self._run = run_blocking
        self._children = {}

    def start(self, daemon, bind, args):
        d = self._run(daemon_util.start_daemon_process, self.paths, daemon,
                      bind, list(args))

        def started(proc):
            self._children[daemon] = proc
            return proc.pid
        return d.addCallback(started)

    def stop(self, daemon):
        self._children.pop(daemon, None)
        return self._run(daemon_util.stop_daemon, self.paths, daemon)

    def running(self, daemon):
        proc = self._children.get(daemon)
        if proc is not None:
            return defer.succeed(proc.poll() is None)
        return defer.succeed(
            daemon_util.running_pid(self.paths, daemon) is not None)

    def exit_status(self, daemon):
        proc = self._children.get(daemon)
        if proc is None or proc.poll() is None:
            return None
        del self._children[daemon]
        return proc.returncode


@implementer(IDaemonLauncher)
class SystemdLauncher(object):
    """Daemons as systemd units (``ganeti-<name>.service``, see
    etc/systemd); ``--root`` and ``--bind`` come from the units."""

    def __init__(self, reactor, systemctl="systemctl"):
        self.reactor = reactor
        self.systemctl = systemctl

    def _run(self, *args):
        d = getProcessOutputAndValue(self.systemctl, args,
                                     env=os.environ, reactor=self.reactor)

        def check(result):
            out, err, code = result
            return code, (out + err).decode("utf-8", "replace").strip()
        return d.addCallback(check)

    def start(self, daemon, bind, args):
        def done(result):
            code, text = result
            if code:
                raise errors.CommandError("systemctl start %s.service"
                                          " failed (%d): %s"
                                          % (daemon, code, text))
        return self._run("start", daemon + ".service").addCallback(done)

    def stop(self, daemon):
        return self._run("stop", daemon + ".service").addCallback(
            lambda _: None)

    def running(self, daemon):
        return self._run("is-active", "--quiet",
                         daemon + ".service").addCallback(
            lambda result: result[0] == 0)

    def exit_status(self, daemon):
        # systemd keeps it (RestartPreventExitStatus=11 in the unit)
        return None


# --- the supervisor -----------------------------------------------------------

def _port_open(address, port):
    try:
        socket.create_connection((address, port), 1).close()
        return True
    except OSError:
        return False


def master_answers(paths):
    """Whether the master daemon under ``paths`` answers a luxi query
    (blocking; run off the reactor)."""
    try:
        with luxi.BlockingClient(paths.master_socket, 5) as c:
            c.call("QueryConfigValues", ["cluster_name"])
        return True
    except (luxi.NoMasterError, errors.GenericError, OSError):
        return False


class MasterStartError(errors.GenericError):
    """The master daemon did not come up."""


class DaemonSupervisor(service.Service):
    """Checks every ``interval`` seconds (and when ssconf changes) that
    the daemons of this node's role run, and only those."""

    name = "daemons"

    def __init__(self, reactor, paths, bind, launcher, run_blocking,
                 extra_args=None, interval=10.0):
        self.reactor = reactor
        self.paths = paths
        self.bind = bind
        self.launcher = launcher
        self._run = run_blocking
        self.extra_args = dict(extra_args or {})
        self.interval = interval
        self._lock = defer.DeferredLock()
        self._loop = None
        self._started_at = {}
        self._deaths = {}
        self._not_before = {}
        self._pending = None
        #: the role seen at the last check
        self.role = None

    # -- service
    def startService(self):
        service.Service.startService(self)
        self._loop = task.LoopingCall(self._tick)
        self._loop.clock = self.reactor
        self._loop.start(self.interval, now=True)

    def stopService(self):
        service.Service.stopService(self)
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        # the daemons stay: they outlive a restart of the node daemon

    def _tick(self):
        self.reconcile().addErrback(
            lambda f: log.failure("Checking this node's daemons failed", f))

    def ssconf_changed(self):
        """Check soon (once for a burst of ssconf writes)."""
        if self._pending is None or not self._pending.active():
            self._pending = self.reactor.callLater(0.1, self._tick)

    # -- the hold of the master role
    @property
    def hold_path(self):
        return os.path.join(self.paths.run_dir, HOLD_FILE)

    def held(self, role):
        """Why the master role is held for ``role``'s master (None: it
        is not)."""
        try:
            with open(self.hold_path) as f:
                hold = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(hold, dict) or hold.get("master") != role.master:
            return None
        return hold.get("reason") or "held"

    def hold(self, role, reason):
        os.makedirs(self.paths.run_dir, exist_ok=True)
        tmp = self.hold_path + ".new"
        with open(tmp, "w") as f:
            json.dump({"master": role.master, "reason": reason}, f)
        os.rename(tmp, self.hold_path)

    def release(self):
        try:
            os.unlink(self.hold_path)
        except FileNotFoundError:
            pass

    # -- checks
    def read_role(self):
        return read_role(self.paths, self.bind)

    def reconcile(self):
        """Deferred[status]: start what the role needs, stop the rest."""
        return self._lock.run(lambda: defer.Deferred.fromCoroutine(
            self._reconcile()))

    async def _reconcile(self, start_master=True):
        role = self.read_role()
        if self.role is None or role.role != self.role.role:
            log.info("This node's role: {role} (node {node}, master"
                     " {master})", role=role.role, node=role.node or "?",
                     master=role.master or "?")
        self.role = role
        wanted = role.daemons(self.extra_args)
        held = self.held(role) if role.role == ROLE_MASTER else None
        if held:
            wanted = [d for d in wanted if d not in MASTER]
        for daemon in reversed(MANAGED):
            if daemon not in wanted and await self.launcher.running(daemon):
                log.info("Stopping {daemon}: not needed on a {role} node",
                         daemon=daemon, role=role.role)
                await self._stop(daemon)
        if role.role != ROLE_MASTER or held:
            await self._release_master_ip(role)
        for daemon in wanted:
            if daemon in MASTER and not start_master:
                continue
            if await self.launcher.running(daemon):
                continue
            await self._revive(role, daemon)
            if self.held(role):
                break
        return await self.status()

    async def _revive(self, role, daemon):
        status = self.launcher.exit_status(daemon)
        now = self.reactor.seconds()
        if status == EXIT_NOTMASTER and daemon in (daemon_util.MASTERD,
                                                   daemon_util.MAINTD):
            reason = ("%s exited with status %d: the master candidates do"
                      " not agree that this node is the master"
                      % (daemon, status))
            log.error("{reason}; the master role stays stopped until"
                      " ssconf names another master or a master failover"
                      " to this node", reason=reason)
            await self._stop_master_daemons()
            self.hold(role, reason)
            return
        if status is not None or daemon in self._started_at:
            started = self._started_at.pop(daemon, None)
            if started is not None and now - started < QUICK_DEATH:
                self._deaths[daemon] = self._deaths.get(daemon, 0) + 1
            else:
                self._deaths[daemon] = 0
            pause = min(MAX_BACKOFF, 2 ** self._deaths[daemon]) \
                if self._deaths[daemon] else 0
            self._not_before[daemon] = now + pause
            log.warn("{daemon} is not running (exit status {status});"
                     " restarting{later}", daemon=daemon,
                     status="unknown" if status is None else status,
                     later=" in %d s" % pause if pause else "")
        if now < self._not_before.get(daemon, 0):
            return
        if daemon == daemon_util.MASTERD:
            await self._start_masterd(role, ())
        else:
            await self._start(role, daemon)

    async def _start(self, role, daemon, args=()):
        args = list(args) + list(self.extra_args.get(daemon, ()))
        if daemon == daemon_util.RAPI and role.master_ip and \
                role.master_ip != self.bind:
            # clients reach the remote API at the cluster's master address
            args = ["--also-bind", role.master_ip] + args
        log.info("Starting {daemon}", daemon=daemon)
        await self.launcher.start(daemon, self.bind, args)
        self._started_at[daemon] = self.reactor.seconds()
        if daemon == daemon_util.RAPI:
            # a failover is done when clients reach the remote API again
            await self._wait_listening(daemon, self.bind,
                                       constants.DEFAULT_RAPI_PORT)

    async def _wait_listening(self, daemon, address, port, timeout=30.0):
        deadline = self.reactor.seconds() + timeout
        while self.reactor.seconds() < deadline:
            if await self._run(_port_open, address, port):
                return True
            if not await self.launcher.running(daemon):
                return False
            await task.deferLater(self.reactor, 0.1, lambda: None)
        return False

    async def _start_masterd(self, role, args):
        await self._activate_master_ip(role)
        await self._start(role, daemon_util.MASTERD, args)
        deadline = self.reactor.seconds() + MASTER_START_TIMEOUT
        while self.reactor.seconds() < deadline:
            if await self._run(master_answers, self.paths):
                return
            if not await self.launcher.running(daemon_util.MASTERD):
                status = self.launcher.exit_status(daemon_util.MASTERD)
                self._started_at.pop(daemon_util.MASTERD, None)
                tail = daemon_util.stderr_tail(self.paths,
                                               daemon_util.MASTERD, 5)
                if status == EXIT_NOTMASTER:
                    reason = ("ganeti-masterd exited with status 11: the"
                              " master candidates do not agree that this"
                              " node is the master")
                    log.error("{reason}", reason=reason)
                    self.hold(role, reason)
                    await self._release_master_ip(role)
                raise MasterStartError(
                    "ganeti-masterd exited with status %s%s"
                    % (status, (": " + tail) if tail else ""))
            await task.deferLater(self.reactor, 0.2, lambda: None)
        raise MasterStartError("ganeti-masterd did not answer within %d s"
                               % MASTER_START_TIMEOUT)

    async def _stop(self, daemon):
        """Stop ``daemon`` on purpose: not a death to restart or count."""
        await self.launcher.stop(daemon)
        for memo in (self._started_at, self._deaths, self._not_before):
            memo.pop(daemon, None)

    async def _stop_master_daemons(self):
        stopped = {}
        for daemon in reversed(MASTER):
            if await self.launcher.running(daemon):
                await self._stop(daemon)
                stopped[daemon] = True
        return stopped

    async def _activate_master_ip(self, role):
        if not role.master_ip:
            return
        external = await self._run(
            backend_master_ip.external_script_wanted, self.paths)
        await self._run(backend_master_ip.activate, self.paths,
                        role.master_ip, role.master_netmask,
                        role.master_netdev, external)

    async def _release_master_ip(self, role):
        if backend_master_ip.held_address(self.paths) is None:
            return
        await self._run(backend_master_ip.deactivate, self.paths)


    # -- what the procedures ask
    async def status(self):
        role = self.role or self.read_role()
        daemons = {}
        for daemon in MANAGED:
            daemons[daemon] = bool(await self.launcher.running(daemon))
        return {"node": role.node, "role": role.role, "master": role.master,
                "held": self.held(role) if role.role == ROLE_MASTER
                else None,
                "master_ip": backend_master_ip.held_address(self.paths),
                "daemons": daemons}

    def start_master(self, no_voting=False):
        """Start this node's master daemons (a failover to this node):
        the hold ends; masterd first, then what else the role runs."""
        async def run():
            role = self.read_role()
            if role.role != ROLE_MASTER:
                raise errors.OpPrereqError(
                    "this node (%s) is not the master in its ssconf files"
                    " (master_node says %r): distribute the configuration"
                    " first" % (role.node or self.bind, role.master),
                    errors.ECODE_STATE)
            self.release()
            for daemon in MASTER:
                self._not_before.pop(daemon, None)
            if not await self.launcher.running(daemon_util.MASTERD):
                self.launcher.exit_status(daemon_util.MASTERD)
                self._started_at.pop(daemon_util.MASTERD, None)
                await self._start_masterd(
                    role, ["--no-voting", "--yes-do-it"] if no_voting
                    else [])
            return await self._reconcile()
        return self._lock.run(lambda: defer.Deferred.fromCoroutine(run()))

    def stop_master(self):
        """Stop this node's master daemons and hold the role (a failover
        away from this node)."""
        async def run():
            role = self.read_role()
            stopped = await self._stop_master_daemons()
            if role.role == ROLE_MASTER:
                self.hold(role, "stopped for a master failover")
            await self._release_master_ip(role)
            return {"stopped": sorted(stopped), "status": await self.status()}
        return self._lock.run(lambda: defer.Deferred.fromCoroutine(run()))


def _no_supervisor():
    raise errors.OpPrereqError(
        "this node daemon does not start the node's other daemons"
        " (started without --daemons)", errors.ECODE_ENVIRON)


class DaemonProcedures(object):
    """The procedures of :class:`DaemonSupervisor` (mixed into
    :class:`~ganeti.server.noded.procedures.NodeProcedures`)."""

    #: set by the daemon when it manages daemons (--daemons)
    supervisor = None

    def _supervisor(self):
        if self.supervisor is None:
            _no_supervisor()
        return self.supervisor

    @procedure()
    async def daemons_status(self):
        """This node's role and which of its daemons run."""
        return await self._supervisor().status()

    @procedure()
    async def daemons_reconcile(self):
        """Start what this node's role needs, stop the rest; the status."""
        return await self._supervisor().reconcile()

    @procedure(Arg("no_voting", ht.BOOL, False))
    async def node_start_master_daemons(self, no_voting):
        """Start the master daemons here (ssconf must name this node the
        master); with ``no_voting`` masterd skips its start-up vote."""
        return await self._supervisor().start_master(no_voting)

    @procedure()
    async def node_stop_master(self):
        """Stop the master daemons here and keep them stopped while
        ssconf still names this node the master."""
        return await self._supervisor().stop_master()

    @procedure(Arg("master_ip", ht.NESTR), Arg("netmask", ht.ANY, None),
               Arg("netdev", ht.NESTR), Arg("use_external_script", ht.BOOL,
                                            False))
    async def node_activate_master_ip(self, master_ip, netmask, netdev,
                                      use_external_script):
        """Take the cluster's master IP on this node."""
        return await self.run_blocking(backend_master_ip.activate,
                                       self.paths, master_ip, netmask,
                                       netdev, use_external_script)

    @procedure(Arg("use_external_script", ht.BOOL, False))
    async def node_deactivate_master_ip(self, use_external_script):
        """Give the cluster's master IP up on this node (if it held it)."""
        return await self.run_blocking(backend_master_ip.deactivate,
                                       self.paths, use_external_script)

    @procedure(blocking=True)
    def master_vote_info(self):
        """Who this node believes is the master, and its configuration's
        serial number (master candidates; None elsewhere)."""
        return vote_info(self.paths)


def vote_info(paths):
    """``{"master": name, "serial": int or None}`` from this node's
    config.data (a master candidate) or else its ssconf."""
    master = (_lines(paths, "master_node") or [None])[0]
    serial = None
    try:
        with open(paths.config_file) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict):
        serial = data.get("serial_no")
        cluster = data.get("cluster") or {}
        node = (data.get("nodes") or {}).get(cluster.get("master_node"))
        if isinstance(node, dict) and node.get("name"):
            master = node["name"]
    return {"master": master, "serial": serial}


