"""The ``diskless`` template: a disk that has no storage at all."""

from twisted.internet import defer
from zope.interface import implementer

from ganeti import constants
from ganeti.storage import IBlockDevice

__all__ = ["DisklessDevice"]


@implementer(IBlockDevice)
class DisklessDevice(object):
    """Every operation succeeds and nothing is ever stored."""

    dev_type = constants.DT_DISKLESS
    path = None
    format = "raw"

    @classmethod
    def from_disk(cls, disk, ctx):
        return cls()

    def create(self, size):
        return defer.succeed(None)

    def remove(self):
        return defer.succeed(None)

    def assemble(self):
        return defer.succeed(None)

    def shutdown(self):
        return defer.succeed(None)

    def grow(self, amount, dryrun=False):
        return defer.succeed(None)

    def dimensions(self):
        return defer.succeed((0, None))
