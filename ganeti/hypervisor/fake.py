"""The fake hypervisor: instances are small detached Python processes.

Each instance is a :mod:`ganeti.hypervisor.fake_guest` process in its own
session, so it survives the node daemon exactly like a qemu would, and it
fails the ways a real instance fails:

* killed (SIGKILL, OOM, ...): the process is gone while its status still says
  it was running -> ``crashed``;
* powered off by its user (SIGUSR1): the guest records ``shutdown`` and the
  process stays as a kept domain until ``cleanup_instance`` -> ``shutdown``.

Memory is simulated: an instance "uses" its maxmem, which the node info
subtracts from the host's available memory, and a start that does not fit
fails like it would on a real node.
"""

import json
import os
import signal
import sys

from twisted.internet import defer
from twisted.internet.utils import getProcessOutputAndValue
from twisted.logger import Logger
from zope.interface import implementer

import ganeti
from ganeti import errors
from ganeti import hypervisor as hv
from ganeti.hypervisor import base, migration, params, state

__all__ = ["FakeHypervisor"]

_log = Logger()

# Where the ganeti package lives, so the guest process can import it.
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(
    ganeti.__file__)))

_STATUS = "status"
#: ctrl file of an instance taking part in a migration (its role, status)
_MIGRATION = "migration"


@implementer(hv.IHypervisor)
class FakeHypervisor(base.HypervisorBase):

    name = "fake"

    PARAMETERS = {
        "migration_mode": params.Param("live", params.one_of("live", "non-live")),
    }

    #: seconds to wait for a killed process to disappear
    KILL_WAIT = 10.0
    #: seconds to wait for the guest to act on a signal
    SIGNAL_WAIT = 10.0

    # -- parameters ---------------------------------------------------------

    @classmethod
    def check_parameter_syntax(cls, hvparams):
        params.check_params(cls.name, cls.PARAMETERS, hvparams)

    def validate_parameters(self, hvparams):
        return defer.maybeDeferred(self.check_parameter_syntax, hvparams)

    # -- public API ----------------------------------------------------------

    # (starting, stopping and the like: base.HypervisorBase)

    def get_instance_info(self, name):
        return defer.maybeDeferred(self._info, name)

    def get_all_instances_info(self):
        return defer.maybeDeferred(
            lambda: [i for i in map(self._info, self._rt.names()) if i])

    def get_node_info(self):
        return defer.maybeDeferred(self._node_info)

    def verify(self, hvparams=None):
        return defer.maybeDeferred(self._verify)

    def close(self):
        return defer.succeed(None)

    # -- migration: the state is handed over through the runtime files -----

    def migration_info(self, name):
        return defer.maybeDeferred(self._migration_info, name)

    def migrate_instance(self, name, address, port, live=True):
        return defer.maybeDeferred(self._migrate, name, address, port, live)

    def get_migration_status(self, name):
        return defer.maybeDeferred(self._migration_status, name)

    def abort_migration(self, name):
        return defer.maybeDeferred(self._abort_migration, name)

    # -- state ---------------------------------------------------------------

    def _migration_path(self, name):
        return self._rt.ctrl_path(name, _MIGRATION)

    def _read_migration(self, name):
        try:
            with open(self._migration_path(name)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def _write_migration(self, name, data):
        state.write_atomic(self._migration_path(name), json.dumps(data))

    def _drop_migration(self, name):
        try:
            os.unlink(self._migration_path(name))
        except FileNotFoundError:
            pass

    def _status_path(self, name):
        return self._rt.ctrl_path(name, _STATUS)

    def _read_status(self, name):
        try:
            with open(self._status_path(name)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def _pid(self, name):
        """The pid of the instance's live process, or None."""
        pid = state.read_pid_file(self._rt.pid_path(name))
        # the status path is on the guest's command line: no pid reuse
        if state.process_alive(pid, marker=self._status_path(name)):
            return pid
        return None

    def _info(self, name):
        record = self._rt.read(name)
        if record is None:
            return None
        pid = self._pid(name)
        status = self._read_status(name)
        reason = None
        if status.get("state") == hv.SHUTDOWN:
            # powered off by its user; stays so even if the process is
            # gone later (the user's intent is what the master needs)
            current, reason = hv.SHUTDOWN, status.get("reason")
        elif pid is None:
            current, reason = hv.CRASHED, "process-exited"
        elif status.get("state") == hv.PAUSED:
            current = hv.PAUSED
        else:
            current = hv.RUNNING
        return self._instance_info(name, record, pid, current, reason)

    def _used_memory(self):
        """MiB held by instances whose process still exists."""
        return sum(r.spec.memory for r in map(self._rt.read, self._rt.names())
                   if r is not None and self._pid(r.name) is not None)

    def _node_info(self):
        total, avail = hv.read_meminfo()
        used = self._used_memory()
        cpus, nodes, sockets = hv.host_cpu_info()
        return hv.NodeInfo(memory_total=total,
                           memory_free=max(0, avail - used),
                           memory_dom0=max(0, total - avail),
                           memory_hv=used, cpu_total=cpus, cpu_nodes=nodes,
                           cpu_sockets=sockets,
                           hv_version=tuple(int(x) for x in
                                            ganeti.__version__.split(".")))

    def _verify(self):
        problems = []
        try:
            self._rt.ensure()
        except OSError as err:
            problems.append("cannot create runtime directory %s: %s" %
                            (self._rt.base, err))
        else:
            if not os.access(self._rt.conf_dir, os.W_OK):
                problems.append("runtime directory %s is not writable" %
                                self._rt.conf_dir)
        return problems

    # -- operations ----------------------------------------------------------

    async def _start(self, spec, startup_paused):
        hv.check_instance_name(spec.name)
        self.check_parameter_syntax(spec.hvparams)
        await self._clean_up_kept(spec.name, self._info(spec.name))
        free = self._node_info().memory_free
        if spec.memory > free:
            raise errors.HypervisorError(
                "not enough memory to start instance %s: needs %d MiB, "
                "%d MiB free" % (spec.name, spec.memory, free))
        self._rt.write(state.InstanceRecord(spec=spec,
                                            started=self._reactor.seconds()))
        args = ["-m", "ganeti.hypervisor.fake_guest",
                "--name", spec.name,
                "--status", self._status_path(spec.name),
                "--pidfile", self._rt.pid_path(spec.name)]
        if startup_paused:
            args.append("--paused")
        env = {"PYTHONPATH": _PACKAGE_ROOT, "PATH": os.environ.get("PATH", "")}
        out, err, code = await getProcessOutputAndValue(
            sys.executable, args, env=env, path="/", reactor=self._reactor)
        pid = state.read_pid_file(self._rt.pid_path(spec.name))
        if code != 0 or pid is None:
            self._rt.remove(spec.name, (_STATUS, _MIGRATION))
            raise errors.HypervisorError(
                "fake instance %s failed to start (exit %s): %s" %
                (spec.name, code, err.decode("utf-8", "replace").strip()))
        self._rt.update(spec.name, pid=pid)
        _log.info("Started fake instance {name} (pid {pid})",
                  name=spec.name, pid=pid)

    async def _kill(self, name, sig, wait):
        """Send ``sig`` to the instance; True once its process is gone."""
        pid = self._pid(name)
        if pid is None:
            return True
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        return await state.wait_until(
            self._reactor, lambda: self._pid(name) is None, wait)

    async def _stop(self, name, force, timeout):
        if self._rt.update(name, intent=state.INTENT_STOP) is None:
            _log.info("Instance {name} is already stopped", name=name)
            return
        gone = False
        if not force:
            gone = await self._kill(name, signal.SIGTERM, timeout)
        if not gone:
            if not force:
                _log.warn("Instance {name} did not stop within {timeout}s, "
                          "killing it", name=name, timeout=timeout)
            gone = await self._kill(name, signal.SIGKILL, self.KILL_WAIT)
        if not gone:
            raise errors.HypervisorError(
                "could not kill instance %s (pid %s)" % (name, self._pid(name)))
        self._rt.remove(name, (_STATUS, _MIGRATION))
        _log.info("Stopped fake instance {name}", name=name)

    async def _cleanup(self, name):
        if self._rt.read(name) is None:
            return
        if not await self._kill(name, signal.SIGKILL, self.KILL_WAIT):
            raise errors.HypervisorError(
                "could not kill instance %s (pid %s)" % (name, self._pid(name)))
        self._rt.remove(name, (_STATUS, _MIGRATION))
        _log.info("Cleaned up fake instance {name}", name=name)

    def _live_pid(self, name, wanted):
        info = self._info(name)
        self._check_state(name, info, wanted)
        return info.pid

    async def _signal_and_wait(self, name, pid, sig, done, what):
        os.kill(pid, sig)
        if not await state.wait_until(self._reactor, done, self.SIGNAL_WAIT):
            raise errors.HypervisorError(
                "instance %s did not %s within %ss" %
                (name, what, self.SIGNAL_WAIT))

    # -- migration -------------------------------------------------------------

    def _migration_info(self, name):
        info = self._info(name)
        if info is None or not info.live:
            raise errors.HypervisorError(
                "instance %s is not running on this node (%s), cannot"
                " migrate it" % (name, info.state if info else "unknown"))
        record = self._rt.read(name)
        return {"spec": record.spec.to_dict(), "started": record.started,
                "hypervisor": self.name}

    async def _accept(self, spec, info, address, port):
        current = self._info(spec.name)
        if current is not None and current.live:
            raise errors.HypervisorError(
                "instance %s is already running on this node, cannot accept"
                " it" % spec.name)
        # an empty instance waiting for the state: a paused guest
        await self._start(spec, True)
        started = (info or {}).get("started")
        if isinstance(started, (int, float)):
            # the guest keeps its uptime: it is the same guest
            self._rt.update(spec.name, started=started)
        self._write_migration(spec.name, {
            "role": "target", "status": migration.SETUP,
            "address": address, "port": port or 0})
        return {"address": address, "port": port or 0}

    def _migrate(self, name, address, port, live):
        self._migration_info(name)     # live here, or an error
        record = self._rt.read(name)
        self._write_migration(name, {
            "role": "source", "status": migration.COMPLETED,
            "address": address, "port": port, "live": bool(live),
            "ram": record.spec.memory * 1024 * 1024})

    def _migration_status(self, name):
        data = self._read_migration(name)
        if data is None or data.get("role") != "source":
            return migration.MigrationStatus(migration.NONE)
        return migration.MigrationStatus(
            data["status"], transferred_ram=data.get("ram"),
            total_ram=data.get("ram"))

    def _abort_migration(self, name):
        data = self._read_migration(name)
        if data is not None and data.get("role") == "source":
            data["status"] = migration.CANCELLED
            self._write_migration(name, data)

    async def _finalize_dst(self, name, info, success):
        if not success:
            await self._cleanup(name)
            return
        current = self._info(name)
        if current is None:
            raise errors.HypervisorError(
                "instance %s was not received on this node" % name)
        if current.state == hv.PAUSED:
            await self._resume(name)
        self._drop_migration(name)

    async def _finalize_src(self, name, success, live):
        if success:
            await self._stop(name, True, 0)
        else:
            self._drop_migration(name)

    async def _reboot(self, name):
        pid = self._live_pid(name, {hv.RUNNING})
        boots = self._read_status(name).get("boots", 0)
        await self._signal_and_wait(
            name, pid, signal.SIGHUP,
            lambda: self._read_status(name).get("boots", 0) > boots, "reboot")

    async def _resume(self, name):
        pid = self._live_pid(name, {hv.PAUSED, hv.RUNNING})
        await self._signal_and_wait(
            name, pid, signal.SIGUSR2,
            lambda: self._read_status(name).get("state") == hv.RUNNING,
            "resume")
