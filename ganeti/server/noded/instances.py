"""Instance procedures: start, stop, reboot, state, kept domains."""

from ganeti import ht
from ganeti import hypervisor as hv
from ganeti.server.noded.procedure import Arg, procedure

_INSTANCE = ht.either(ht.NESTR, ht.DICT, desc="an instance name or an"
                      " instance specification (object)")


class InstanceProcedures(object):
    """Instances on this node's hypervisors."""

    @procedure(Arg("instance", ht.DICT),
               Arg("startup_paused", ht.BOOL, False))
    async def instance_start(self, instance, startup_paused):
        """Start an instance specification (InstanceSpec fields +
        ``hypervisor``; disks as paths or disk config dicts)."""
        await self.instances.start(instance, startup_paused)
        return True

    @procedure(Arg("name", ht.NESTR), Arg("hv", ht.NESTR),
               Arg("timeout", ht.NONNEG_NUMBER, hv.DEFAULT_STOP_TIMEOUT))
    async def instance_shutdown(self, name, hv, timeout):
        """Stop softly, killing after ``timeout`` seconds (0: at once)."""
        await self.instances.shutdown(name, hv, timeout)
        return True

    @procedure(Arg("instance", _INSTANCE),
               Arg("hv", ht.maybe(ht.NESTR), None),
               Arg("reboot_type", ht.NESTR),
               Arg("shutdown_timeout", ht.NONNEG_NUMBER,
                   hv.DEFAULT_STOP_TIMEOUT))
    async def instance_reboot(self, instance, hv, reboot_type,
                              shutdown_timeout):
        """soft: the hypervisor resets the guest; hard: stop and start again
        (needs the specification); full is the master's business."""
        await self.instances.reboot(instance, hv, reboot_type,
                                    shutdown_timeout)
        return True

    @procedure(Arg("name", ht.NESTR), Arg("hv", ht.NESTR))
    def instance_info(self, name, hv):
        """InstanceInfo fields + ``live``, or null if not on this node."""
        return self.instances.info(name, hv)

    @procedure(Arg("hvs", ht.list_of(ht.NESTR)))
    def all_instances_info(self, hvs):
        """``{name: InstanceInfo fields + live + hypervisor}``."""
        return self.instances.all_info(hvs)

    @procedure(Arg("hvs", ht.list_of(ht.NESTR)))
    def instance_list(self, hvs):
        """Sorted names of the instances of these hypervisors, any state."""
        return self.instances.list(hvs)

    @procedure(Arg("name", ht.NESTR), Arg("hv", ht.NESTR))
    async def instance_cleanup(self, name, hv):
        """Remove a kept (user-shutdown or crashed) domain."""
        await self.instances.cleanup(name, hv)
        return True
