"""Instance procedures: start, stop, reboot, state, kept domains."""



from ganeti import hypervisor as hv
from ganeti.server.noded.procedure import (
    Arg, boolean, list_of, mapping, number, optional, procedure, string,
    string_or_mapping)



class InstanceProcedures(object):
    """Instances on this node's hypervisors."""

    @procedure(Arg("instance", mapping), Arg("startup_paused", boolean, False))
    async def instance_start(self, instance, startup_paused):
        """Start an instance specification (InstanceSpec fields +
        ``hypervisor``; disks as paths or disk config dicts)."""
        await self.instances.start(instance, startup_paused)
        return True

    @procedure(Arg("name", string), Arg("hv", string),
               Arg("timeout", number(0), hv.DEFAULT_STOP_TIMEOUT))
    async def instance_shutdown(self, name, hv, timeout):
        """Stop softly, killing after ``timeout`` seconds (0: at once)."""
        await self.instances.shutdown(name, hv, timeout)
        return True

    @procedure(Arg("instance", string_or_mapping),
               Arg("hv", optional(string), None),
               Arg("reboot_type", string),
               Arg("shutdown_timeout", number(0), hv.DEFAULT_STOP_TIMEOUT))
    async def instance_reboot(self, instance, hv, reboot_type,
                              shutdown_timeout):
        """soft: the hypervisor resets the guest; hard: stop and start again
        (needs the specification); full is the master's business."""
        await self.instances.reboot(instance, hv, reboot_type,
                                    shutdown_timeout)
        return True

    @procedure(Arg("name", string), Arg("hv", string))
    def instance_info(self, name, hv):
        """InstanceInfo fields + ``live``, or null if not on this node."""
        return self.instances.info(name, hv)

    @procedure(Arg("hvs", list_of(string)))
    def all_instances_info(self, hvs):
        """``{name: InstanceInfo fields + live + hypervisor}``."""
        return self.instances.all_info(hvs)

    @procedure(Arg("hvs", list_of(string)))
    def instance_list(self, hvs):
        """Sorted names of the instances of these hypervisors, any state."""
        return self.instances.list(hvs)

    @procedure(Arg("name", string), Arg("hv", string))
    async def instance_cleanup(self, name, hv):
        """Remove a kept (user-shutdown or crashed) domain (seed 004)."""
        await self.instances.cleanup(name, hv)
        return True
