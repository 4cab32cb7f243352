"""Live migration procedures (Ganeti's names); the sequence is described
in :mod:`ganeti.hypervisor.migration`."""

from ganeti import ht
from ganeti.server.noded.procedure import Arg, procedure


class MigrationProcedures(object):
    """Both ends of a live migration."""

    @procedure(Arg("name", ht.NESTR), Arg("hv", ht.NESTR))
    async def migration_info(self, name, hv):
        """What the target needs to accept the instance (source side)."""
        return await self.instances.hypervisor(hv).migration_info(name)

    @procedure(Arg("instance", ht.DICT), Arg("info", ht.DICT),
               Arg("address", ht.NESTR),
               Arg("port", ht.maybe(ht.NONNEG_INT), None))
    async def accept_instance(self, instance, info, address, port):
        """Prepare to receive the instance (target side); its disks are
        assembled here.  ``{"address", "port"}`` to migrate to."""
        driver, spec = await self.instances.parse_spec(instance)
        return await driver.accept_instance(spec, info, address, port)

    @procedure(Arg("name", ht.NESTR), Arg("hv", ht.NESTR),
               Arg("address", ht.NESTR), Arg("port", ht.NONNEG_INT),
               Arg("live", ht.BOOL, True))
    async def instance_migrate(self, name, hv, address, port, live):
        """Start sending the instance to ``address``:``port``."""
        await self.instances.hypervisor(hv).migrate_instance(
            name, address, port, live)
        return True

    @procedure(Arg("name", ht.NESTR), Arg("hv", ht.NESTR))
    async def instance_get_migration_status(self, name, hv):
        status = await self.instances.hypervisor(hv).get_migration_status(
            name)
        return status.to_dict()

    @procedure(Arg("name", ht.NESTR), Arg("hv", ht.NESTR))
    async def instance_abort_migration(self, name, hv):
        await self.instances.hypervisor(hv).abort_migration(name)
        return True

    @procedure(Arg("name", ht.NESTR), Arg("hv", ht.NESTR),
               Arg("info", ht.maybe(ht.DICT), None),
               Arg("success", ht.BOOL, True))
    async def instance_finalize_migration_dst(self, name, hv, info,
                                              success):
        await self.instances.hypervisor(hv).finalize_migration_dst(
            name, info, success)
        return True

    @procedure(Arg("name", ht.NESTR), Arg("hv", ht.NESTR),
               Arg("success", ht.BOOL, True), Arg("live", ht.BOOL, True))
    async def instance_finalize_migration_src(self, name, hv, success, live):
        await self.instances.hypervisor(hv).finalize_migration_src(
            name, success, live)
        return True
