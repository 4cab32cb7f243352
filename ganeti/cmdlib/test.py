"""Logical units that exist for testing the job machinery."""

from twisted.internet import task

from ganeti import errors
from ganeti import locking
from ganeti.cmdlib.base import LogicalUnit


class LUTestDelay(LogicalUnit):
    """Sleep for ``duration`` seconds, ``repeat`` times (OP_TEST_DELAY).

    The sleep is a reactor delayed call, so other jobs run meanwhile; with
    ``no_locks`` false the named nodes are locked for the whole time, which is
    what lock tests use it for.
    """
    OP_ID = "OP_TEST_DELAY"

    def check_arguments(self):
        if self.op.duration < 0:
            raise errors.OpPrereqError("duration: must not be negative",
                                       errors.ECODE_INVAL)

    def expand_names(self):
        self.node_uuids = [self.expand_node(n) for n in self.op.on_nodes]
        if not self.op.no_locks and self.node_uuids:
            self.needed_locks[locking.LEVEL_NODE] = self.node_uuids

    async def exec_(self):
        rounds = max(1, self.op.repeat)
        for i in range(rounds):
            if self.op.repeat:
                self.log_info("Test delay iteration %d/%d", i + 1, rounds)
            if self.op.duration:
                await task.deferLater(self.ctx.clock, self.op.duration,
                                      lambda: None)
        return True
