"""The logical unit base class.

A logical unit (LU) executes one opcode.  Its life, driven by
``ganeti.mcpu.Processor``:

1. ``check_arguments()``: opcode parameters that need more than type checks;
2. ``expand_names()`` (may be a coroutine): turn names into UUIDs and fill ``needed_locks``
   (level -> list of UUIDs or ``locking.ALL_SET``) and ``share_locks``
   (level -> bool);
3. ``declare_locks(level)``: just before each level is acquired, for locks
   that depend on what was decided at earlier levels (e.g. the nodes of an
   instance).  A level listed in ``opportunistic_locks`` (level -> the
   least number of locks the LU can work with) is acquired
   opportunistically: only those of its locks that are free at that
   moment, without waiting; fewer than the minimum free fails the opcode
   with a temporary error (ECODE_TEMP_NORES: try again later).  Should the
   locks not be had, ``abandon()`` undoes what the steps so far did;
4. ``check_prereq()``: with the locks held; raise OpPrereqError to refuse
   (nothing has been changed yet); may be a coroutine when a check needs a
   node's answer;
5. ``exec_()``: do the work (async), return the opcode's result.
"""

from twisted.internet import defer

from ganeti import errors
from ganeti import locking


class LogicalUnit(object):
    OP_ID = None
    #: True: this LU needs the big ganeti lock exclusively (cluster-wide
    #: changes); False: shared, like almost every LU.
    REQ_BGL = False

    def __init__(self, ctx, op, feedback_fn):
        self.ctx = ctx
        self.cfg = ctx.cfg
        self.op = op
        self._feedback = feedback_fn
        self.needed_locks = {}
        self.share_locks = {}
        self.opportunistic_locks = {}
        self.owner = None  # set by the processor before expand_names

    # --- hooks for subclasses -------------------------------------------

    def check_arguments(self):
        pass

    def expand_names(self):
        pass

    def declare_locks(self, level):
        pass

    def check_prereq(self):
        pass

    def abandon(self):
        """The opcode ends before ``check_prereq`` (its locks could not
        be had, or the job was cancelled while waiting): undo what
        ``expand_names`` and ``declare_locks`` did."""

    async def exec_(self):
        raise errors.ProgrammerError("%s has no exec_" % type(self).__name__)

    def dry_run_result(self):
        """What a dry run returns once the prerequisites passed (may be a
        coroutine)."""
        return None

    # --- helpers ------------------------------------------------------------

    def log_info(self, msg, *args):
        self._feedback(msg % args if args else msg)

    def log_warning(self, msg, *args):
        self._feedback("WARNING: " + (msg % args if args else msg))

    def log_remote_import(self, info):
        """A job log entry of type ``remote-import`` (what Ganeti's
        move-instance waits for): ``info`` is a dict."""
        self._feedback(info, type="remote-import")

    async def submit_jobs(self, jobs, describe=lambda ops: ops[0].OP_ID):
        """Submit ``jobs`` (lists of OpCode) on behalf of this opcode; each
        outcome is logged, the job named by ``describe(ops)``.  Returns
        the queue's answer, ``[[ok, job id or error], ...]``."""
        if not jobs:
            return []
        submit = getattr(self._feedback, "submit_jobs", None)
        if submit is None and self.ctx.queue is not None:
            submit = self.ctx.queue.submit_many_jobs
        if submit is None:
            raise errors.OpExecError("this master cannot submit jobs from an"
                                     " opcode (no job queue)")
        results = await defer.maybeDeferred(submit, jobs)
        for (ok, value), ops in zip(results, jobs):
            what = describe(ops)
            if ok:
                self.log_info("Submitted job %s (%s)", value, what)
            else:
                self.log_warning("Could not submit the %s job: %s", what,
                                 value)
        return [list(r) for r in results]

    def share_all(self):
        """Take every level in shared mode (query-style LUs)."""
        for level in locking.LEVELS_MOD:
            self.share_locks[level] = True

    def expand_instance(self, name):
        """UUID of an instance named (or identified) by ``name``."""
        return self.cfg.get_instance(name).uuid

    def expand_node(self, name):
        return self.cfg.get_node(name).uuid

    def expand_group(self, name):
        return self.cfg.get_nodegroup(name).uuid
