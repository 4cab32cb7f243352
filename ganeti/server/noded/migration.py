"""Live migration procedures (Ganeti's names); the sequence is described
in :mod:`ganeti.hypervisor.migration`."""



from ganeti.server.noded.procedure import (
    Arg, boolean, integer, mapping, optional, procedure, string)



def _port(name, value):
    if value is None:
        return None
    return integer(0)(name, value)


class MigrationProcedures(object):
    """Both ends of a live migration."""

    @procedure(Arg("name", string), Arg("hv", string))
    async def migration_info(self, name, hv):
        """What the target needs to accept the instance (source side)."""
        return await self.instances.hypervisor(hv).migration_info(name)

    @procedure(Arg("instance", mapping), Arg("info", mapping),
               Arg("address", string), Arg("port", _port, None))
    async def accept_instance(self, instance, info, address, port):
        """Prepare to receive the instance (target side); its disks are
        assembled here.  ``{"address", "port"}`` to migrate to."""
        driver, spec = await self.instances.parse_spec(instance)
        return await driver.accept_instance(spec, info, address, port)

    @procedure(Arg("name", string), Arg("hv", string), Arg("address", string),
               Arg("port", integer(0)), Arg("live", boolean, True))
    async def instance_migrate(self, name, hv, address, port, live):
        """Start sending the instance to ``address``:``port``."""
        await self.instances.hypervisor(hv).migrate_instance(
            name, address, port, live)
        return True

    @procedure(Arg("name", string), Arg("hv", string))
    async def instance_get_migration_status(self, name, hv):
        status = await self.instances.hypervisor(hv).get_migration_status(
            name)
        return status.to_dict()

    @procedure(Arg("name", string), Arg("hv", string))
    async def instance_abort_migration(self, name, hv):
        await self.instances.hypervisor(hv).abort_migration(name)
        return True

    @procedure(Arg("name", string), Arg("hv", string),
               Arg("info", optional(mapping), None),
               Arg("success", boolean, True))
    async def instance_finalize_migration_dst(self, name, hv, info,
                                              success):
        await self.instances.hypervisor(hv).finalize_migration_dst(
            name, info, success)
        return True

    @procedure(Arg("name", string), Arg("hv", string),
               Arg("success", boolean, True), Arg("live", boolean, True))
    async def instance_finalize_migration_src(self, name, hv, success, live):
        await self.instances.hypervisor(hv).finalize_migration_src(
            name, success, live)
        return True
