"""What the hypervisor drivers share: the runtime directory and the public
wrappers that turn a driver's coroutines into the Deferreds of
:class:`ganeti.hypervisor.IHypervisor`.

A subclass sets ``name`` and provides the coroutines ``_start``, ``_stop``,
``_reboot``, ``_resume``, ``_cleanup``, ``_accept``, ``_finalize_dst`` and
``_finalize_src``; the operations whose drivers differ in being synchronous
or not (info, verify, migration status...) stay in each driver, with the
checks they share here.
"""

from twisted.internet import defer
from twisted.logger import Logger

from ganeti import errors
from ganeti import hypervisor as hv
from ganeti.hypervisor import state

__all__ = ["HypervisorBase"]


class HypervisorBase(object):

    name = None

    def __init__(self, root="/", reactor=None):
        if reactor is None:
            from twisted.internet import reactor
        self._reactor = reactor
        self._rt = state.RuntimeDir(root, self.name)

    # -- instances -----------------------------------------------------------

    def start_instance(self, spec, startup_paused=False):
        return defer.Deferred.fromCoroutine(self._start(spec, startup_paused))

    def stop_instance(self, name, force=False,
                      timeout=hv.DEFAULT_STOP_TIMEOUT):
        return defer.Deferred.fromCoroutine(self._stop(name, force, timeout))

    def reboot_instance(self, name):
        return defer.Deferred.fromCoroutine(self._reboot(name))

    def resume_instance(self, name):
        return defer.Deferred.fromCoroutine(self._resume(name))

    def cleanup_instance(self, name):
        return defer.Deferred.fromCoroutine(self._cleanup(name))

    def list_instances(self):
        return defer.succeed(self._rt.names())

    # -- migration -----------------------------------------------------------

    def accept_instance(self, spec, info, address, port=None):
        return defer.Deferred.fromCoroutine(
            self._accept(spec, info, address, port))

    def finalize_migration_dst(self, name, info, success):
        return defer.Deferred.fromCoroutine(
            self._finalize_dst(name, info, success))

    def finalize_migration_src(self, name, success, live=True):
        return defer.Deferred.fromCoroutine(
            self._finalize_src(name, success, live))

    # -- shared by the drivers' operations -----------------------------------

    def observe_instances(self):
        """Deferred list of InstanceInfo as ``get_all_instances_info``, for
        readers beside the node daemon (the monitoring daemon): drivers
        whose instances take one control connection at a time answer
        without opening one."""
        return self.get_all_instances_info()

    def _instance_info(self, name, record, pid, current, reason=None):
        """The InstanceInfo of a recorded instance in state ``current``; an
        uptime only while its process (``pid``) lives."""
        uptime = None
        if pid is not None:
            uptime = max(0.0, self._reactor.seconds() - record.started)
        return hv.InstanceInfo(name=name, state=current,
                               memory=record.spec.memory,
                               vcpus=record.spec.vcpus, pid=pid,
                               uptime=uptime, reason=reason)

    async def _clean_up_kept(self, name, info):
        """Before a start: an instance of that name (``info``, None if
        none) must not be live; a kept shutdown/crashed domain is cleaned
        up first (user shutdown detection, docs/instances.rst)."""
        if info is None:
            return
        if info.live:
            raise errors.HypervisorError(
                "instance %s is already running" % name)
        # in the driver's namespace, like its own messages
        Logger(namespace=type(self).__module__).info(
            "Cleaning up {name} ({state}) before starting it",
            name=name, state=info.state)
        await self._cleanup(name)

    @staticmethod
    def _check_state(name, info, wanted):
        """HypervisorError unless the instance (``info``, None if unknown)
        is in one of the states ``wanted``."""
        if info is None:
            raise errors.HypervisorError("instance %s is not known" % name)
        if info.state not in wanted:
            raise errors.HypervisorError(
                "instance %s is %s, not %s" %
                (name, info.state, " or ".join(sorted(wanted))))
