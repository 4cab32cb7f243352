"""The opcode processor: runs one opcode through its logical unit.

For each opcode the processor builds the logical unit (LU) its table has for
the OP_ID, lets it expand names and declare the locks it needs per level, takes
those locks level by level through the lock manager (with
release-and-retry, so a job waiting for one busy lock does not sit on the
others; or, for a level the LU wants opportunistically, only the locks
free at that moment), tells the job queue when the opcode really starts
running, checks prerequisites and executes.  Locks are always released at the end, whatever
happened.
"""

import inspect

import attr
from twisted.internet import defer
from twisted.logger import Logger

from ganeti import errors
from ganeti import locking
from ganeti import opcodes

log = Logger()

@attr.s
class MasterContext(object):
    """What logical units work with; one per master daemon."""
    cfg = attr.ib()                 # config.ConfigStore
    glm = attr.ib()                 # locking.LockManager
    clock = attr.ib()               # IReactorTime
    rpc = attr.ib(default=None)     # rpc.RpcClient (None in unit tests)
    paths = attr.ib(default=None)   # pathutils.Paths
    queue = attr.ib(default=None)   # the job queue, for LUs that submit jobs
    # iallocator.allocators.AllocatorRegistry: the instance allocators
    # (None: one with Ganeti's standard search path, made when first used)
    allocators = attr.ib(default=None)
    # Timeouts of the lock acquisition attempts before a blocking one; None
    # means locking.DEFAULT_RETRY_TIMEOUTS.
    lock_retry_timeouts = attr.ib(default=None)
    # runs programs on the master (out-of-band programs); None: a
    # backend.process.CommandRunner on ``clock`` (the reactor)
    runner = attr.ib(default=None)


class ConfigFirstRpc(object):
    """The RPC client logical units use in the master daemon.

    Every call to a node first waits until the configuration changes made
    so far are on disk (they are written by another thread): a node never
    acts on a change that a crash of the master could still undo.  Calls
    made while nothing is pending go out at once.
    """

    def __init__(self, rpc, cfg):
        self._rpc = rpc
        self._cfg = cfg

    def call(self, node, procedure, args=(), timeout=None):
        return self._after_flush(self._rpc.call, node, procedure, args,
                                 timeout)

    def call_many(self, nodes, procedure, args=(), timeout=None):
        return self._after_flush(self._rpc.call_many, nodes, procedure, args,
                                 timeout)

    def _after_flush(self, method, *args):
        return self._cfg.flushed().addCallback(lambda _: method(*args))

    def __getattr__(self, name):
        return getattr(self._rpc, name)


def make_lock_manager(cfg, clock):
    """A LockManager with one lock per object of ``cfg`` (by UUID)."""
    return locking.LockManager(
        node_uuids=list(cfg.nodes), nodegroup_uuids=list(cfg.nodegroups),
        instance_names=list(cfg.instances), network_uuids=list(cfg.networks),
        clock=clock)


async def _maybe_await(value):
    if inspect.isawaitable(value):
        return await value
    return value


class Processor(object):
    """Runs opcodes for the job queue (its ``executor``).

    ``logical_units`` maps OP_IDs to logical unit classes (the master's is
    :data:`ganeti.cmdlib.LOGICAL_UNITS`).
    """

    def __init__(self, context, logical_units):
        self.ctx = context
        self.logical_units = logical_units

    def execute(self, job, op_index, op_input, feedback_fn,
                notify_running=None):
        """Run one opcode; returns a Deferred firing with its result.

        This is the job queue's executor.  ``op_input`` is the
        :class:`~ganeti.opcodes.OpCode`, already checked, and the logical
        unit's own (it may change it); ``feedback_fn(msg)`` logs into the
        job; ``notify_running()`` (by default the queue's
        ``feedback_fn.notify_running``) is called once every lock is held,
        and waited for (it may return a Deferred: the job's "running"
        written to disk) before anything changes.  The result is given only
        once the opcode's configuration changes are on disk.  Cancelling
        the Deferred while locks are awaited leaves the lock queues.
        """
        if not isinstance(op_input, opcodes.OpCode):
            return defer.fail(errors.ProgrammerError(
                "the processor runs OpCode objects, not %s"
                % type(op_input).__name__))
        if notify_running is None:
            notify_running = getattr(feedback_fn, "notify_running", None)
        owner = "job-%s/op-%s" % (getattr(job, "id", job), op_index)
        return defer.Deferred.fromCoroutine(
            self._run(owner, op_input, feedback_fn, notify_running))

    async def _run(self, owner, op, feedback_fn, notify_running):
        lu_class = self.logical_units.get(op.OP_ID)
        if lu_class is None:
            raise errors.OpCodeUnknown(
                "opcode %s is not implemented by this master" % op.OP_ID)
        lu = lu_class(self.ctx, op, feedback_fn)
        # The lock owner, for LUs that add or delete locks themselves.
        lu.owner = owner
        try:
            lu.check_arguments()
            # may be a coroutine (a test opcode talks to its client there)
            await _maybe_await(lu.expand_names())
            try:
                await self._acquire_locks(lu, owner)
            except BaseException:
                lu.abandon()
                raise
            if notify_running is not None:
                await _maybe_await(notify_running())
            # check_prereq and dry_run_result may be coroutines: some checks
            # need a node's answer.
            await _maybe_await(lu.check_prereq())
            if op.dry_run:
                return await _maybe_await(lu.dry_run_result())
            result = await lu.exec_()
            # A success is reported (and written into the job) only once
            # what the opcode changed in the configuration is on disk.
            await self.ctx.cfg.flushed()
            return result
        finally:
            self.ctx.glm.release_all(owner)

    async def _acquire_locks(self, lu, owner):
        glm = self.ctx.glm
        timeouts = self.ctx.lock_retry_timeouts
        # The big ganeti lock first: exclusive for LUs that change the
        # cluster as a whole, shared for everybody else.
        await glm.acquire_with_retries(
            locking.LEVEL_CLUSTER, [locking.BGL], owner,
            shared=not lu.REQ_BGL, timeouts=timeouts)
        for level in locking.LEVELS_MOD:
            lu.declare_locks(level)
            if level not in lu.needed_locks:
                continue
            names = lu.needed_locks[level]
            if names is not locking.ALL_SET:
                names = sorted(set(names))
                if not names:
                    continue
            shared = lu.share_locks.get(level, False)
            minimum = lu.opportunistic_locks.get(level)
            if minimum is None:
                await glm.acquire_with_retries(
                    level, names, owner, shared=shared, timeouts=timeouts)
                continue
            # Opportunistic: whatever is free now, without waiting; the LU
            # works with what it got (e.g. an allocator choosing among the
            # nodes locked).
            got = glm.acquire_opportunistic(level, names, owner,
                                            shared=shared)
            if len(got) < minimum:
                asked = len(glm.lockset(level).list_names()) \
                    if names is locking.ALL_SET else len(names)
                what = "nodes" if level in (locking.LEVEL_NODE,
                                            locking.LEVEL_NODE_RES) \
                    else "%s objects" % locking.LEVEL_NAMES[level]
                raise errors.OpPrereqError(
                    "Opportunistic locking: not all %s could be locked"
                    " (%d of %d %s locks free, at least %d needed); other"
                    " jobs hold them, try again later"
                    % (what, len(got), asked, locking.LEVEL_NAMES[level],
                       minimum), errors.ECODE_TEMP_NORES)
