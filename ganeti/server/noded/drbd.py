"""DRBD network and sync control for replace-disks."""

from ganeti import constants
from ganeti import errors
from ganeti import ht
from ganeti import storage
from ganeti.server.noded.procedure import Arg, procedure


class DrbdProcedures(object):
    """DRBD disks of this node (uses DiskProcedures._device)."""

    async def _drbd(self, disk, field="disk"):
        dev = await self._device(disk, field)
        if dev.dev_type != constants.DT_DRBD8:
            raise errors.ParameterError(
                field, "argument '%s': disk %s is %s, not drbd"
                % (field, disk.get("iv_name"), dev.dev_type))
        return dev

    @procedure(Arg("disks", ht.list_of(ht.DICT)))
    async def drbd_disconnect_net(self, disks):
        """Put the DRBD disks into standalone mode (no peer)."""
        for idx, disk in enumerate(disks):
            dev = await self._drbd(disk, "disks[%d]" % idx)
            await dev.disconnect_net()
        return True

    @procedure(Arg("disks", ht.list_of(ht.DICT)),
               Arg("multimaster", ht.BOOL, False))
    async def drbd_attach_net(self, disks, multimaster):
        """Connect the DRBD disks to the peers their config names."""
        for idx, disk in enumerate(disks):
            dev = await self._drbd(disk, "disks[%d]" % idx)
            await dev.attach_net(multimaster)
        return True

    @procedure(Arg("disks", ht.list_of(ht.DICT)))
    async def drbd_wait_sync(self, disks):
        """``[all done, lowest sync percent or null]`` (one look, the master
        polls)."""
        done, lowest = True, None
        for idx, disk in enumerate(disks):
            st = await storage.device_status(
                await self._drbd(disk, "disks[%d]" % idx))
            if st is None:
                raise errors.BlockDeviceError("DRBD disk %s does not exist"
                                              % disk.get("iv_name"))
            pct = st.get("sync_percent")
            if pct is not None:
                done = False
                lowest = pct if lowest is None else min(lowest, pct)
        return [done, lowest]

    @procedure(Arg("disk", ht.DICT), Arg("new_children", ht.list_of(ht.DICT)),
               Arg("old_children", ht.list_of(ht.DICT), []))
    async def blockdev_replace_children(self, disk, new_children,
                                        old_children):
        """Detach a DRBD disk's local storage and attach ``new_children``
        (data LV, metadata LV) instead; DRBD resyncs from the peer."""
        dev = await self._drbd(disk)
        await dev.replace_children(new_children)
        return True
