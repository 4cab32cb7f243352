"""What the hypervisor drivers share: the runtime directory and the public
wrappers that turn a driver's coroutines into the Deferreds of
:class:`ganeti.hypervisor.IHypervisor`.

A subclass sets ``name`` and provides the coroutines ``_start``, ``_stop``,
``_reboot``, ``_resume``, ``_cleanup``, ``_accept``, ``_finalize_dst`` and
``_finalize_src``; the operations whose drivers differ in being synchronous
or not (info, verify, migration status...) stay in each driver.
"""

from twisted.internet import defer

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

    def stop_instance(self, name, force=False, timeout=hv.DEFAULT_STOP_TIMEOUT):
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
