"""The job queue: accept jobs, persist them, run them in order, report.

Life of a job::

    submit --(file written, id returned)--> queued
    queued --(a run slot is free, best priority first, then FIFO)--> waiting
    waiting --(executor holds the locks: OpContext.notify_running)--> running
    running --> success | error          (then the next opcode, or the end)
    queued/waiting --(cancel)--> canceled
    waiting --(cancel: the executor's Deferred is cancelled)--> canceling
        --> canceled

What is on disk, and when (every write is atomic and fsync'ed):

* a job before its id is returned (the job may start before, but
  does nothing until its "running" state is on disk); the ``serial``
  file on the next reactor turn (load() also takes the highest job id
  found on disk);
* "running" before the executor is told to go on (``notify_running``), and
  every final status before waiters or dependent jobs hear about it;
* "waiting" and log messages a little later, batched with the next write:
  after a crash a job found waiting runs again exactly like a queued one,
  and at most ``LOG_FLUSH_DELAY`` seconds of messages are lost.

Readers cannot crowd out writers: query jobs (jobs of read-only opcodes)
have a budget of their own and at most half the run slots
(:mod:`ganeti.jqueue.budget`), and the oldest finished jobs are archived
when the queue nears its limit, so only unfinished jobs can fill it
(``_room_for``; docs/jobs.rst, "Readers and the queue's limit").

The queue runs in the reactor thread and serialises jobs there; the writes
themselves go through a journal (:mod:`ganeti.jqueue.journal`), in the
master daemon written by a helper process
(:mod:`ganeti.jqueue.journal_helper`), so a slow disk delays the jobs that
wait for their files, never the reactor.
"""

import collections
import heapq
import json

import attr
from twisted.internet import defer
from twisted.python.failure import Failure
from twisted.logger import Logger

from ganeti import errors
from ganeti import events
from ganeti import jobfilter
from ganeti import opcodes
from ganeti.jqueue import model
from ganeti.jqueue.budget import QueryBudget
from ganeti.jqueue.model import (
    STATUS_QUEUED, STATUS_WAITING, STATUS_CANCELING, STATUS_RUNNING,
    STATUS_CANCELED, STATUS_SUCCESS, STATUS_ERROR, FINALIZED)
from ganeti.jqueue.journal import WriterJournal
from ganeti.jqueue.store import JobStore, encode_job
from ganeti.jqueue.waiters import ChangeWaiters, JOB_NOTCHANGED, WFJC_TIMEOUT
from ganeti.utils.writer import InlineWriter

log = Logger()

DEFAULT_MAX_RUNNING = 20
#: Most jobs kept in the queue directory (not archived), as Ganeti's limit
QUEUE_SIZE_LIMIT = 5000
#: Finalized jobs kept in memory for queries; older ones are re-read
FINALIZED_CACHE_SIZE = 1000
#: Log messages reach the disk at most this many seconds late
LOG_FLUSH_DELAY = 1.0

MSG_CANCELED = "Job canceled by request"
MSG_PREVIOUS_FAILED = "Error in previous opcode"
MSG_REJECTED = "Job canceled: rejected by job filter rule %s"
MSG_UNCLEAN = ("The master daemon stopped while this opcode was running;"
               " its outcome is unknown")
MSG_UNCLEAN_LATER = ("Not run: the master daemon stopped while an earlier"
                     " opcode of this job was running")
MSG_UNREADABLE = "Not run: the opcode in the job file cannot be loaded: %s"
MSG_UNREADABLE_LATER = ("Not run: opcode %d of this job cannot be loaded from"
                        " the job file")
MSG_SECRETS_LOST = ("Not run: the master daemon restarted before this opcode"
                    " ran, and its secret parameters (%s) are never written"
                    " to disk; submit the job again, giving the secret"
                    " parameters")
MSG_SECRETS_LOST_LATER = ("Not run: opcode %d of this job lost its secret"
                          " parameters when the master daemon restarted;"
                          " submit the job again, giving them")


def _high_water(limit):
    """Past this many jobs in the queue directory (a tenth below the
    limit) the oldest finished ones are archived, without waiting for
    anyone to ask, down to :func:`_low_water` (see ``_room_for``)."""
    return limit - max(1, limit // 10)


def _low_water(limit):
    return limit - max(1, limit // 5)


# Scheduling states of a job that is not finalized
_READY = "ready"        # in the run heap (status queued, or waiting after deps)
_DEPWAIT = "depwait"    # parked until a dependency finishes
_ACTIVE = "active"      # holds a run slot (its coroutine is running)
_HELD = "held"          # kept back by a filter rule (PAUSE, RATE_LIMIT)

# Outcomes of a dependency check
_DEP_OK, _DEP_WAIT, _DEP_ERROR, _DEP_CANCEL = range(4)


@attr.s(frozen=True)
class LoadReport(object):
    """What ``JobQueue.load`` found in the queue directory."""
    requeued = attr.ib(default=())    # ids that will run (again)
    failed = attr.ib(default=())      # ids that were running: now error
    corrupt = attr.ib(default=())     # ids whose file was moved aside
    finalized = attr.ib(default=0)    # count of finished jobs found
    # ids of jobs holding an opcode this master cannot load (if it had not
    # run yet, the job failed)
    unreadable = attr.ib(default=())


@attr.s(eq=False)
class _Run(object):
    """What the queue knows about a job that is not finalized."""
    state = attr.ib(default=_READY)
    deferred = attr.ib(default=None)   # the executor's pending Deferred
    flush_call = attr.ib(default=None)  # pending write of new log entries
    # its file could not be written when it was submitted (the submitter
    # was told so): it must not do anything
    abandoned = attr.ib(default=False)


#: seconds before the first retry of a job's final write that failed (a
#: full or failing disk); each retry waits twice as long, up to the last
FINAL_WRITE_RETRY = 1.0
FINAL_WRITE_RETRY_MAX = 60.0


class _Finalizing(object):
    """A finished job whose final status is being written."""

    def __init__(self, previous):
        self.waiters = []        # WaitForJobChange answers waiting for it
        self._previous = previous  # serialised form written before, or None
        self._job = None
        self.retry_call = None   # the next attempt after a failed write
        self.failures = 0

    def previous_job(self, job):
        """The job as written before its final status (``job`` itself if
        this process never wrote it)."""
        if self._previous is None:
            return job
        if self._job is None:
            self._job = model.QueuedJob.from_dict(
                json.loads(self._previous.decode("utf-8")))
        return self._job


class OpContext(object):
    """The ``feedback_fn`` given to the executor for one opcode.

    Call it as ``feedback_fn(msg, type="message")`` to add a log entry.  It
    also carries the hooks the executor uses to report progress:

    * ``notify_running()``: locks are held, the opcode really starts now
      (status waiting -> running, ``exec`` timestamp); returns a Deferred
      that fires once that is on disk.  Wait for it before doing anything
      with side effects: a job
      whose file still says "waiting" is simply run again after a crash,
      one that says "running" is failed.  Raises JobCanceled if the job is
      being canceled.
    * ``notify_waiting()``: back to waiting for locks (a retry).
    * ``priority``: the opcode's current priority (ChangeJobPriority may
      change it while the opcode waits for locks).
    * ``submit_jobs(jobs)``: SubmitManyJobs on behalf of the opcode.
    """

    def __init__(self, queue, job, op_index):
        self._queue = queue
        self.job = job
        self.job_id = job.id
        self.op_index = op_index
        self.closed = False

    @property
    def _op(self):
        return self.job.ops[self.op_index]

    @property
    def priority(self):
        return self._op.priority

    def __call__(self, msg, type=model.ELOG_MESSAGE):
        if self.closed:
            log.warn("Job {job} opcode {idx}: feedback after the opcode"
                     " ended, dropped: {msg!r}", job=self.job_id,
                     idx=self.op_index, msg=msg)
            return
        self._queue._add_feedback(self.job, self._op, type, msg)

    feedback = __call__

    def notify_running(self):
        if self.closed:
            raise errors.ProgrammerError("notify_running after the opcode"
                                         " ended")
        return self._queue._op_running(self.job, self._op)

    def notify_waiting(self):
        if not self.closed:
            self._queue._op_waiting_again(self.job, self._op)

    def submit_jobs(self, jobs):
        return self._queue.submit_many_jobs(jobs)


class JobQueue(object):
    """Persisted jobs, run through an executor with a concurrency limit.

    Jobs are lists of :class:`ganeti.opcodes.OpCode` objects, already
    checked (luxi and RAPI load them from their requests); the queue takes
    them over: it adds to their reason trail and resolves their
    dependencies.

    ``executor.execute(job, op_index, op_input, feedback_fn)`` runs one
    opcode and returns a Deferred (or a value).  ``job`` is the queue's
    :class:`~ganeti.jqueue.model.QueuedJob` (read it, never change it),
    ``op_input`` a private copy of the OpCode (logical units may change
    their opcode's attributes) and ``feedback_fn`` an :class:`OpContext`.
    Its result becomes the opcode result (must be JSON-serialisable); a
    failure with a GenericError is stored encoded, any other exception as
    an OpExecError (and logged with its traceback).
    Cancelling the Deferred must abandon the opcode (e.g. leave the lock
    queue).

    ``writer`` (:class:`ganeti.utils.writer.IFileWriter`) does the writes;
    by default at once, in the reactor thread.

    ``query_budget`` (:class:`ganeti.jqueue.budget.QueryBudget`) limits the
    unfinished query jobs, in all and per client (the ``client`` argument
    of the submit methods); query jobs also hold at most half the run
    slots (rounded up), so jobs that change the cluster always find one.
    """

    def __init__(self, queue_dir, executor, clock=None,
                 max_running=DEFAULT_MAX_RUNNING,
                 size_limit=QUEUE_SIZE_LIMIT,
                 cache_size=FINALIZED_CACHE_SIZE,
                 log_flush_delay=LOG_FLUSH_DELAY, store=None, writer=None,
                 journal=None, query_budget=None):
        if clock is None:
            from twisted.internet import reactor as clock
        self._clock = clock
        # ``store``: a JobStore of queue_dir that may already hold the lock
        self._store = store if store is not None else JobStore(queue_dir)
        self._writer = writer if writer is not None else InlineWriter()
        # job files: through the journal, in this process by the writer or
        # by a helper process (JournalProcess)
        self._journal = (journal if journal is not None
                         else WriterJournal(self._store, self._writer))
        self._executor = executor
        self.max_running = max_running
        self._size_limit = size_limit
        self._budget = (query_budget if query_budget is not None
                        else QueryBudget())
        self._cache_size = cache_size
        self._log_flush_delay = log_flush_delay
        self._waiters = ChangeWaiters(clock)

        self._loaded = False
        self._stopped = False
        self._serial = 0
        self._serial_on_disk = 0
        self._drained = False
        self._ids = set()               # every job in the queue directory
        self._end_times = {}            # finalized id -> end (for archiving)
        self._jobs = {}                 # id -> QueuedJob, not finalized
        self._runs = {}                 # id -> _Run, not finalized
        self._cache = collections.OrderedDict()  # finalized, LRU
        self._ready = []                # heap of (priority, id)
        self._ready_query = []          # the same, of query jobs
        self._active = set()            # ids holding a run slot
        self._dep_waiters = collections.defaultdict(set)
        # finished jobs whose final status is not on disk yet -> _Finalizing;
        # they count as unfinished for the jobs that depend on them, and
        # queries show them as last written
        self._finalizing = {}
        # id -> the serialised form last handed to the writer (unfinished)
        self._last_written = {}
        # ids answered once their creation is on disk: not shown before
        self._unwritten = set()
        self._scheduling = False
        self._reschedule = False
        self._kick_call = None
        # finished jobs being moved to the archive: id -> the Deferreds of
        # ArchiveJob calls waiting for that batch (fired with its moved ids)
        self._archiving = {}
        # room taken by submissions waiting for an archive to end
        self._reserved = 0
        # the archive started past the high-water mark, while it runs
        self._background_archive = None
        # job filter rules, in the order they apply (docs/filters.rst)
        self._rules = []
        # queued jobs a rule keeps back: id -> the action (PAUSE waits
        # for the rules to change, RATE_LIMIT for a matching job to end)
        self._held = {}
        #: told of every job that ends (``job_finished(job)``), or None
        #: (:class:`ganeti.metrics.master.MasterMetrics`)
        self.metrics = None
        #: the event stream (:class:`ganeti.events.EventBus`), or None
        self.events = None
        # id -> the status last published for a job not finished yet
        self._published = {}

    @property
    def query_budget(self):
        return self._budget

    @property
    def queue_dir(self):
        return self._store.queue_dir

    # ------------------------------------------------------------------
    # Startup and shutdown

    def load(self):
        """Read the queue directory; recover what a crash left behind.

        Jobs that were queued or waiting are queued again and will run,
        unless one of their opcodes still to run had secret parameters:
        those are never written to disk, so such a job fails, asking to be
        submitted again.  Jobs that were running (or being canceled)
        cannot be resumed: their unfinished opcodes become errors.  A job
        file holding secret values (written by an older version) is
        written again without them.  An unparseable job file is
        renamed ``job-<id>.corrupt`` and logged.  A job holding an opcode
        this master cannot load (written by another version) stays as it
        is; if that opcode had not run yet, the job fails.

        First of all the queue's lock is taken (JobQueueLocked if another
        process holds it): then nothing was read or written.
        """
        if self._loaded:
            raise errors.ProgrammerError("JobQueue.load called twice")
        self._store.lock()
        self._store.initialize()
        self._serial = self._serial_on_disk = self._store.read_serial()
        self._drained = self._store.read_drain_flag()
        requeued, failed, corrupt, finalized = [], [], [], 0
        unreadable = []
        for job_id in self._store.list_job_ids():
            try:
                job = self._store.read_job(job_id, try_archive=False)
            except errors.JobFileCorrupted as err:
                path = self._store.move_aside(job_id)
                log.error("Job {job}: unreadable file moved to {path}:"
                          " {err}", job=job_id, path=path, err=err)
                corrupt.append(job_id)
                continue
            if job is None:
                continue
            self._ids.add(job_id)
            status = job.status
            bad = [(i, op.input.problem) for (i, op) in enumerate(job.ops)
                   if not op.readable]
            if bad:
                unreadable.append(job_id)
                log.warn("Job {job}: opcode {index} cannot be loaded: {err}",
                         job=job_id, index=bad[0][0], err=bad[0][1])
            if status in FINALIZED:
                if self._scrub_file(job):
                    self._store.write_job(job)
                self._end_times[job_id] = self._end_time(job)
                finalized += 1
            elif status in (STATUS_QUEUED, STATUS_WAITING) and \
                    not all(op.readable for op in job.ops
                            if not op.finalized):
                self._fail_unreadable(job)
                self._store.write_job(job)
                self._end_times[job_id] = self._end_time(job)
                failed.append(job_id)
            elif status in (STATUS_QUEUED, STATUS_WAITING) and \
                    self._fail_lost_secrets(job):
                self._store.write_job(job)
                self._end_times[job_id] = self._end_time(job)
                failed.append(job_id)
                log.warn("Job {job} was {status} when the master stopped and"
                         " its secret parameters are gone; marked as failed"
                         " (to be submitted again)", job=job_id,
                         status=status)
            elif status in (STATUS_QUEUED, STATUS_WAITING):
                # nothing ran yet for the current opcode: run it again
                for op in job.ops:
                    if op.status == STATUS_WAITING:
                        op.move_to(STATUS_QUEUED)
                scrub = self._scrub_file(job)
                if status == STATUS_WAITING or scrub:
                    self._store.write_job(job)
                # its client is not known any more: counted, not refused
                self._budget.admit(job_id, [op.input for op in job.ops],
                                   None)
                self._track(job)
                requeued.append(job_id)
                self._publish_requeued(job)
            else:
                self._fail_unclean(job)
                self._store.write_job(job)
                self._end_times[job_id] = self._end_time(job)
                failed.append(job_id)
                log.warn("Job {job} was {status} when the master stopped;"
                         " marked as failed", job=job_id, status=status)
        self._loaded = True
        if requeued or failed or corrupt:
            log.info("Job queue loaded: {n} requeued, {f} failed after an"
                     " unclean stop, {c} corrupt", n=len(requeued),
                     f=len(failed), c=len(corrupt))
        if requeued:
            self._kick()
        return LoadReport(tuple(requeued), tuple(failed), tuple(corrupt),
                          finalized, tuple(unreadable))

    def _fail_unclean(self, job):
        now = self._now()
        first = True
        for op in job.ops:
            if op.finalized:
                continue
            message = MSG_UNCLEAN if first else MSG_UNCLEAN_LATER
            op.move_to(STATUS_ERROR)
            op.result = model.encode_error(errors.OpExecError(message))
            if first:
                op.end_timestamp = now
            first = False
        job.end_timestamp = now

    def _fail_lost_secrets(self, job):
        """Fail ``job`` (True) if an opcode still to run lost its secret
        parameters: read back from its file, they are placeholders."""
        lost = [(index, op.input.lost_secrets())
                for index, op in enumerate(job.ops)
                if not op.finalized and op.readable]
        lost = [(index, names) for index, names in lost if names]
        if not lost:
            return False
        now = self._now()
        first_index = lost[0][0]
        names = dict(lost)
        for index, op in enumerate(job.ops):
            if op.finalized:
                continue
            if index in names:
                message = MSG_SECRETS_LOST % ", ".join(names[index])
            else:
                message = MSG_SECRETS_LOST_LATER % first_index
            op.move_to(STATUS_ERROR)
            op.result = model.encode_error(errors.OpExecError(message))
            op.end_timestamp = now
        job.end_timestamp = now
        return True

    def _scrub_file(self, job):
        """True if ``job``'s file holds secret values (an older version
        wrote them): it must be written again.  A finished job forgets
        them (a job still to run needs them)."""
        scrub = any(op.holds_secrets() for op in job.ops)
        if scrub and job.finalized:
            for op in job.ops:
                op.forget_secrets()
        if scrub:
            log.info("Job {job}: its file held secret parameters; written"
                     " again without them", job=job.id)
        return scrub

    def _fail_unreadable(self, job):
        # not started, and never can be: fail it without running anything
        now = self._now()
        index = next(i for (i, op) in enumerate(job.ops)
                     if not op.finalized and not op.readable)
        for op in job.ops:
            if op.finalized:
                continue
            if op.readable:
                message = MSG_UNREADABLE_LATER % index
            else:
                message = MSG_UNREADABLE % op.input.problem
            op.move_to(STATUS_ERROR)
            op.result = model.encode_error(errors.OpExecError(message))
            op.end_timestamp = now
        job.end_timestamp = now

    def shutdown(self):
        """Stop starting jobs, write pending log entries, release waiters;
        a Deferred firing once every write asked for is done.

        Jobs still executing stay "running" on disk; the next ``load``
        fails them, as after a crash.  The queue's lock stays held until
        the process ends: an opcode still finishing may write its job.
        """
        self._stopped = True
        if self._kick_call is not None and self._kick_call.active():
            self._kick_call.cancel()
        self._kick_call = None
        for job_id, finalizing in self._finalizing.items():
            if finalizing.retry_call is not None:
                # its file still says what was last written
                finalizing.retry_call.cancel()
                finalizing.retry_call = None
                log.error("Job {job}: its final status was never written;"
                          " the next start of the master fails it",
                          job=job_id)
        self._write_serial()
        for job_id, run in list(self._runs.items()):
            if run.flush_call is not None:
                self._persist_in_background(self._jobs[job_id])
        self._waiters.shutdown()
        # a clean stop leaves the files complete and the journal empty
        checkpoint = self._journal.checkpoint().addErrback(
            lambda f: log.failure("The job queue's journal could not be"
                                  " checkpointed", f))
        return defer.gatherResults([checkpoint, self._writer.drain()])

    # ------------------------------------------------------------------
    # Submitting

    def submit_job(self, ops, client=None):
        """SubmitJob: Deferred firing with the new job id once on disk.

        ``client`` names who asks, for the query job budget
        (:mod:`ganeti.jqueue.budget`); None is the master itself."""
        return self._submit_one(ops, False, client)

    def submit_to_drained_queue(self, ops, client=None):
        """SubmitJobToDrainedQueue: like submit_job, ignoring the drain."""
        return self._submit_one(ops, True, client)

    def submit_many_jobs(self, jobs, ignore_drain=False, client=None):
        """SubmitManyJobs: Deferred firing with ``[[True, id] or [False,
        error text], ...]``.  Negative ids in ``depends`` refer to earlier
        jobs of the same call (-1 = the one just before)."""
        return defer.Deferred.fromCoroutine(
            self._submit_many(jobs, ignore_drain, client))

    def _submit_one(self, ops, ignore_drain, client):
        """A Deferred of the new job's id (see :meth:`submit_job`)."""
        try:
            self._check_accepting(ignore_drain)
            prepared = self._prepare(ops)
            self._resolve_dependencies(prepared, [])
            # a query job over its budget archives nothing
            self._budget.check(prepared, client)
            waiting = self._room_for(1)
        except Exception:
            return defer.fail()
        if waiting is None:
            # the usual case, without a coroutine: there is room
            return self._create_checked(prepared, client)
        return defer.Deferred.fromCoroutine(
            self._submit_after_room(waiting, prepared, ignore_drain, client))

    async def _submit_after_room(self, waiting, prepared, ignore_drain,
                                 client):
        # as _make_room: a second archive at most, then no waiting
        for _ in range(2):
            await waiting
            self._check_accepting(ignore_drain)
            waiting = self._room_for(1)
            if waiting is None:
                break
        else:
            self._room_for(1, may_wait=False)
        return await self._create_checked(prepared, client)

    def _create_checked(self, prepared, client):
        job_id = self._serial + 1
        try:
            self._budget.admit(job_id, prepared, client)
        except Exception:
            return defer.fail()
        self._serial = job_id
        return self._create(job_id, prepared)

    async def _submit_many(self, jobs, ignore_drain, client):
        if not isinstance(jobs, list):
            raise errors.OpPrereqError("SubmitManyJobs needs a list of jobs",
                                       errors.ECODE_INVAL)
        self._check_accepting(ignore_drain)
        await self._make_room(len(jobs), ignore_drain)
        results = []
        accepted = []            # (id, prepared ops)
        previous = []            # id or None per earlier job of this call
        next_id = self._serial + 1
        for ops in jobs:
            try:
                prepared = self._prepare(ops)
                self._resolve_dependencies(prepared, previous)
                self._budget.admit(next_id, prepared, client)
            except errors.GenericError as err:
                results.append([False, _error_text(err)])
                previous.append(None)
                continue
            accepted.append((next_id, prepared))
            results.append([True, next_id])
            previous.append(next_id)
            next_id += 1
        if accepted:
            self._serial = accepted[-1][0]
        created = [self._create(job_id, prepared)
                   for job_id, prepared in accepted]
        outcomes = await defer.DeferredList(created, consumeErrors=True)
        # a job whose file could not be written is not accepted
        by_id = dict(zip([job_id for job_id, _ in accepted], outcomes))
        for entry in results:
            if entry[0] and not by_id[entry[1]][0]:
                entry[:] = [False, _error_text(by_id[entry[1]][1].value)]
        return results

    def _check_accepting(self, ignore_drain):
        if not self._loaded:
            raise errors.ProgrammerError("JobQueue used before load()")
        if self._drained and not ignore_drain:
            raise errors.JobQueueDrainError("The job queue is drained; new"
                                            " jobs are refused")

    async def _make_room(self, count, ignore_drain):
        """Return once ``count`` more jobs fit in the queue directory,
        archiving the oldest finished jobs if need be (twice at most: an
        archive that fails is not retried for ever)."""
        for _ in range(2):
            waiting = self._room_for(count)
            if waiting is None:
                return
            await waiting
            self._check_accepting(ignore_drain)
        self._room_for(count, may_wait=False)

    def _room_for(self, count, may_wait=True):
        """None if ``count`` more jobs fit now, else a Deferred firing once
        an archive started here (the oldest finished jobs first) has ended;
        JobQueueFull if the unfinished jobs alone leave no room.

        Past the high-water mark the oldest finished jobs are archived down
        to the low-water mark, in the background while there is room, so
        that a queue full of finished jobs never refuses a new one.
        """
        limit = self._size_limit
        held = len(self._ids) - len(self._archiving) + self._reserved
        wanted = held + count
        if wanted <= _high_water(limit):
            return None
        over = wanted - limit
        excess = wanted - _low_water(limit)
        if over <= 0:
            if self._background_archive is None:
                batch = self._oldest_finished(excess)
                if batch:
                    self._background_archive = self._archive(batch)
                    self._background_archive.addBoth(
                        self._background_archive_done)
            return None
        batch = self._oldest_finished(max(over, excess)) if may_wait else []
        if len(batch) < over:
            unfinished = len(self._jobs) + len(self._finalizing)
            raise errors.JobQueueFull(
                "The job queue holds %d jobs (limit %d), %d of them"
                " unfinished%s; new jobs are refused until some finish"
                % (len(self._ids), limit, unfinished,
                   "" if may_wait else
                   ", and finished ones could not be archived"))
        self._reserved += count

        def ended(result):
            self._reserved -= count
            return result
        archived = self._archive(batch).addBoth(ended)
        # the submitter's wait: cancelling it must not cancel the archive
        waiting = defer.Deferred()

        def wake(result):
            if isinstance(result, Failure):
                log.failure("Archiving finished jobs to make room in the"
                            " job queue failed", result)
            if not waiting.called:
                waiting.callback(None)
        archived.addBoth(wake)
        return waiting

    def _background_archive_done(self, result):
        self._background_archive = None
        if isinstance(result, Failure):
            log.failure("Archiving the oldest finished jobs failed", result)
        elif result:
            log.info("The job queue neared its limit of {limit} jobs: the"
                     " {n} oldest finished job(s) were archived",
                     limit=self._size_limit, n=len(result))

    def _oldest_finished(self, count):
        """Up to ``count`` ids of finished jobs not being archived, those
        that ended first first."""
        if count <= 0:
            return []
        candidates = (job_id for job_id in self._ids
                      if job_id not in self._jobs
                      and job_id not in self._finalizing
                      and job_id not in self._archiving)
        return heapq.nsmallest(
            count, candidates,
            key=lambda job_id: (self._end_times.get(job_id) or 0, job_id))

    def _prepare(self, ops):
        """A job's opcodes, as a new list; raises if they cannot be a job.

        The opcodes were checked when they were made; what the queue adds
        is that dependencies name jobs by number.
        """
        if not isinstance(ops, list) or not ops:
            raise errors.OpPrereqError("A job needs a non-empty list of"
                                       " opcodes", errors.ECODE_INVAL)
        for index, op in enumerate(ops):
            if not isinstance(op, opcodes.OpCode):
                raise errors.ProgrammerError(
                    "Opcode %d of a job is a %s, not an OpCode"
                    % (index, type(op).__name__))
            _check_depends(op.depends, index)
        return list(ops)

    @staticmethod
    def _resolve_dependencies(ops, previous):
        # all or nothing: the opcodes change only if every id resolves
        changes = []
        for op in ops:
            if not op.depends:
                continue
            resolved = []
            for dep_id, statuses in op.depends:
                if dep_id < 0:
                    if -dep_id > len(previous):
                        raise errors.OpPrereqError(
                            "Unable to resolve relative job id %d: only %d"
                            " job(s) submitted before it in this call"
                            % (dep_id, len(previous)), errors.ECODE_INVAL)
                    dep_id_abs = previous[dep_id]
                    if dep_id_abs is None:
                        raise errors.OpPrereqError(
                            "Relative job id %d refers to a job that was"
                            " rejected" % dep_id, errors.ECODE_INVAL)
                    dep_id = dep_id_abs
                resolved.append([dep_id, list(statuses)])
            changes.append((op, resolved))
        for (op, resolved) in changes:
            op.depends = resolved

    def _create(self, job_id, prepared):
        now = self._now()
        epoch_ns = int(self._clock.seconds() * 1000000000)
        ops = []
        for index, op in enumerate(prepared):
            # the reason trail records which job ran the opcode
            op.reason = list(op.reason) + [[
                "%s:%s" % (model.REASON_SRC_OPCODE, op.OP_ID.lower()),
                "job=%d;index=%d" % (job_id, index), epoch_ns]]
            ops.append(model.QueuedOpCode(input=op, priority=op.priority))
        job = model.QueuedJob(id=job_id, ops=ops, received_timestamp=now)
        self._ids.add(job_id)
        # The job may start before its id is answered (once its file is on
        # disk): its "running" state is written (and waited for) before its
        # opcode does anything, in the same group commit as its creation
        # when that has not started yet (the kick, asked for first, comes
        # before the journal's flush of this turn).  Queries do not show
        # the job until its creation is on disk.
        self._unwritten.add(job_id)
        self._track(job)
        self._kick()
        written = self._write(job)

        def done(_):
            self._unwritten.discard(job_id)
            self._publish_status(job)
            log.debug("Job {job} submitted", job=job_id)
            return job_id

        def failed(failure):
            self._unwritten.discard(job_id)
            run = self._runs.get(job_id)
            if run is not None and run.state != _ACTIVE:
                # never acknowledged and not started: forgotten, and the
                # id is not used again
                del self._jobs[job_id]
                del self._runs[job_id]
                self._ids.discard(job_id)
                self._last_written.pop(job_id, None)
                self._budget.release(job_id)
            elif run is not None:
                # started: it fails before its opcode does anything
                run.abandoned = True
            log.failure("Job {job}: its file could not be written", failure,
                        job=job_id)
            return Failure(errors.JobQueueError(
                "Job %d could not be written: %s"
                % (job_id, failure.getErrorMessage())))
        return written.addCallbacks(done, failed)

    def _write_serial(self):
        # The serial file is written after the job files and coalesced per
        # reactor turn: load() also takes the highest job id found on disk,
        # so a crash before this write cannot make an id be reused.
        if self._serial > self._serial_on_disk:
            self._serial_on_disk = self._serial
            self._journal.commit(self._store.serial_file,
                                 b"%d\n" % self._serial).addErrback(
                lambda f: log.failure("The queue's serial file could not be"
                                      " written", f))

    def _track(self, job):
        self._jobs[job.id] = job
        self._runs[job.id] = _Run()
        self._push_ready(job)

    def _push_ready(self, job):
        heap = (self._ready_query if self._budget.is_query(job.id)
                else self._ready)
        heapq.heappush(heap, (job.priority, job.id))

    # ------------------------------------------------------------------
    # Scheduling

    def set_max_running(self, max_running):
        """Change the limit of concurrently running jobs (cluster param)."""
        self.max_running = max_running
        self._schedule()

    def _kick(self):
        # start jobs on the next reactor turn, so submit answers first
        if self._kick_call is None and not self._stopped:
            self._kick_call = self._clock.callLater(0, self._kicked)

    def _kicked(self):
        self._kick_call = None
        self._write_serial()
        self._schedule()

    def _schedule(self):
        """Start ready jobs, best priority then lowest id, up to the limit."""
        if self._stopped or not self._loaded:
            return
        if self._scheduling:
            # a job finished synchronously inside this loop: loop again
            # instead of recursing
            self._reschedule = True
            return
        self._scheduling = True
        try:
            again = True
            while again:
                self._reschedule = False
                while len(self._active) < self.max_running:
                    entry = self._next_ready()
                    if entry is None:
                        break
                    prio, job_id = entry
                    job = self._jobs.get(job_id)
                    run = self._runs.get(job_id)
                    if (job is None or run.state != _READY
                            or prio != job.priority):
                        continue  # stale heap entry
                    if not self._apply_filters(job, run):
                        continue
                    run.state = _ACTIVE
                    self._active.add(job_id)
                    d = defer.Deferred.fromCoroutine(self._run_job(job, run))
                    d.addErrback(self._job_crashed, job)
                again = self._reschedule
        finally:
            self._scheduling = False

    @property
    def highest_job_id(self):
        """The highest job id handed out (a new filter rule's watermark)."""
        return self._serial

    def set_filters(self, filters):
        """Apply config.data's job filter rules (``{uuid: rule}``) from now
        on; jobs they kept back are looked at again.  Returns the problems
        of rules that could not be used."""
        self._rules, problems = jobfilter.compile_rules(filters)
        for problem in problems:
            log.error("Job filter rule ignored: {problem}", problem=problem)
        self._release_held()
        self._schedule()
        return problems

    def _release_held(self, action=None):
        """Put the held jobs (of ``action``, or all) back in the run heaps."""
        for job_id, held in list(self._held.items()):
            if action is not None and held != action:
                continue
            del self._held[job_id]
            run = self._runs.get(job_id)
            if run is not None and run.state == _HELD:
                run.state = _READY
                self._push_ready(self._jobs[job_id])

    def _filter_verdict(self, job):
        """What the filter rules say of a job about to start."""
        if not self._rules or any(op.status != STATUS_QUEUED
                                  for op in job.ops):
            # rules apply only to jobs not started yet
            return jobfilter.RUN
        ops = [op.input for op in job.ops]

        def running(rule):
            return sum(1 for job_id in self._active
                       if job_id in self._jobs and rule.matches(
                           job_id, [o.input for o in self._jobs[job_id].ops]))
        return jobfilter.decide(self._rules, job.id, ops, running)

    def _apply_filters(self, job, run):
        """True if the job may start now; otherwise it is held back or (a
        REJECT) canceled."""
        verdict = self._filter_verdict(job)
        if verdict.action == jobfilter.ACCEPT:
            return True
        if verdict.action == jobfilter.REJECT:
            run.state = None
            log.info("Job {job} rejected by filter rule {rule}", job=job.id,
                     rule=verdict.rule.uuid)
            self._finish_canceled(job, MSG_REJECTED % verdict.rule.uuid)
            return False
        run.state = _HELD
        self._held[job.id] = verdict.action
        return False

    def query_slots(self):
        """Run slots query jobs may hold at once: half of them, rounded
        up; the others are kept for jobs that change the cluster."""
        return (self.max_running + 1) // 2

    def _next_ready(self):
        """The best ``(priority, id)`` of the two run heaps (a query job
        only while query jobs hold fewer than their slots), popped; None
        when nothing may start."""
        queries_may_run = self._ready_query and sum(
            1 for job_id in self._active
            if self._budget.is_query(job_id)) < self.query_slots()
        if self._ready and not (queries_may_run and
                                self._ready_query[0] < self._ready[0]):
            return heapq.heappop(self._ready)
        if queries_may_run:
            return heapq.heappop(self._ready_query)
        return None

    def _job_crashed(self, failure, job):
        # a bug in the queue itself (or an I/O error writing the job)
        log.failure("Job {job}: internal error in the job queue", failure,
                    job=job.id)

    async def _run_job(self, job, run):
        try:
            await self._run_ops(job, run)
        finally:
            self._active.discard(job.id)
            # a rate limit may allow another job now
            self._release_held(jobfilter.RATE_LIMIT)
            self._schedule()

    async def _run_ops(self, job, run):
        while True:
            index = job.current_op_index()
            if index is None:
                self._finalize(job)
                return
            op = job.ops[index]
            if op.status == STATUS_CANCELING:
                self._finish_canceled(job)
                return
            verdict, message = self._check_dependencies(job, op)
            if verdict == _DEP_WAIT:
                self._mark_waiting(job, op)
                run.state = _DEPWAIT
                self._persist_in_background(job)
                self._changed(job)
                log.debug("Job {job}: {msg}", job=job.id, msg=message)
                return
            if verdict == _DEP_ERROR:
                self._mark_waiting(job, op)
                self._fail(job, op, errors.OpExecError(message))
                return
            if verdict == _DEP_CANCEL:
                log.info("Job {job}: {msg}", job=job.id, msg=message)
                self._finish_canceled(job)
                return

            self._mark_waiting(job, op)
            # "waiting" is written on the next turn at the latest, usually
            # together with "running": after a crash, a job found waiting
            # is queued again, exactly like one found queued
            self._persist_soon(job)
            self._changed(job)
            ctx = OpContext(self, job, index)
            try:
                d = defer.maybeDeferred(self._executor.execute, job, index,
                                        op.input.copy(), ctx)
                run.deferred = d
                result = await d
            except Exception:
                failure = Failure()
                ctx.closed = True
                run.deferred = None
                if op.status == STATUS_CANCELING:
                    op.end_timestamp = self._now()
                    self._finish_canceled(job)
                    return
                self._fail(job, op, failure.value, failure)
                return
            ctx.closed = True
            run.deferred = None
            try:
                json.dumps(result)
            except (TypeError, ValueError) as err:
                self._fail(job, op, errors.OpExecError(
                    "Opcode result cannot be serialised: %s" % err))
                return
            op.move_to(STATUS_SUCCESS)
            op.result = result
            op.end_timestamp = self._now()
            # the next round writes the job (next opcode waiting, or done)

    def _mark_waiting(self, job, op):
        op.result = None
        if op.status == STATUS_QUEUED:
            op.move_to(STATUS_WAITING)
        if op.start_timestamp is None:
            op.start_timestamp = self._now()
        if job.start_timestamp is None:
            job.start_timestamp = op.start_timestamp

    def _fail(self, job, op, err, failure=None):
        """The opcode failed with ``err``; so does the rest of the job."""
        if isinstance(err, errors.GenericError):
            log.info("Job {job} opcode {op}: {err!r}", job=job.id,
                     op=op.input.OP_ID, err=err)
        else:
            log.failure("Job {job} opcode {op}: unexpected error",
                        failure, job=job.id, op=op.input.OP_ID)
        op.move_to(STATUS_ERROR)
        op.result = model.encode_error(err)
        op.end_timestamp = self._now()
        job.mark_unfinished(STATUS_ERROR, model.encode_error(
            errors.OpExecError(MSG_PREVIOUS_FAILED)))
        self._finalize(job)

    def _finish_canceled(self, job, message=MSG_CANCELED):
        now = self._now()
        for op in job.ops:
            if not op.finalized and op.start_timestamp is not None \
                    and op.end_timestamp is None:
                op.end_timestamp = now
        job.mark_unfinished(STATUS_CANCELED, message)
        self._finalize(job)

    def _finalize(self, job):
        """Write the finished job, then (once it is on disk) tell waiters
        and dependent jobs."""
        job.end_timestamp = self._now()
        finalizing = _Finalizing(self._last_written.pop(job.id, None))
        written = self._persist(job)
        # no opcode of it runs again: its secrets are not kept any longer
        for op in job.ops:
            op.forget_secrets()
        self._last_written.pop(job.id, None)
        del self._jobs[job.id]
        del self._runs[job.id]
        self._budget.release(job.id)
        self._end_times[job.id] = self._end_time(job)
        self._remember(job)
        self._finalizing[job.id] = finalizing
        if self.metrics is not None:
            self.metrics.job_finished(job)
        written.addBoth(self._finalized, job)

    def _finalized(self, result, job):
        if isinstance(result, Failure):
            # Nobody hears of the final status before it is on disk (a
            # full disk must not turn into a success that a restart takes
            # back): queries show the job as last written, waiters and
            # dependent jobs wait, and the write is tried again until it
            # succeeds or the master stops.
            self._final_write_failed(result, job)
            return
        finalizing = self._finalizing.pop(job.id)
        for waiting in finalizing.waiters:
            if not waiting.called:     # else the client went away
                waiting.callback(None)
        if finalizing.failures:
            log.info("Job {job} finished: {status} (written after {n}"
                     " failed attempt(s))", job=job.id, status=job.status,
                     n=finalizing.failures)
        else:
            log.info("Job {job} finished: {status}", job=job.id,
                     status=job.status)
        self._changed(job)
        for waiting_id in sorted(self._dep_waiters.pop(job.id, ())):
            run = self._runs.get(waiting_id)
            if run is not None and run.state == _DEPWAIT:
                run.state = _READY
                self._push_ready(self._jobs[waiting_id])
        self._schedule()

    def _final_write_failed(self, failure, job):
        finalizing = self._finalizing[job.id]
        finalizing.failures += 1
        if self._stopped:
            log.error("Job {job} finished ({status}) but its file could not"
                      " be written: {err}; it stays as last written (the"
                      " next start of the master fails it)", job=job.id,
                      status=job.status, err=failure.getErrorMessage())
            return
        delay = min(FINAL_WRITE_RETRY * 2 ** (finalizing.failures - 1),
                    FINAL_WRITE_RETRY_MAX)
        log.error("Job {job} finished ({status}) but its file could not be"
                  " written: {err}; trying again in {delay:g} s (attempt"
                  " {n})", job=job.id, status=job.status,
                  err=failure.getErrorMessage(), delay=delay,
                  n=finalizing.failures)
        finalizing.retry_call = self._clock.callLater(
            delay, self._retry_final_write, job)

    def _retry_final_write(self, job):
        self._finalizing[job.id].retry_call = None
        self._journal.commit(self._store.job_path(job.id),
                             encode_job(job)).addBoth(self._finalized, job)

    # ------------------------------------------------------------------
    # Dependencies

    def _check_dependencies(self, job, op):
        """Decide whether ``op`` may run given its ``depends`` list.

        As in Ganeti: an unfinished dependency makes the job wait; a
        canceled one cancels this job unless "canceled" is accepted; a
        status outside the list fails this job (an empty list accepts any
        final status); an unknown job (or a corrupt file) fails this job.
        Archived dependencies are read from the archive.
        """
        for dep_id, wanted in op.input.depends or ():
            if dep_id == job.id:
                return _DEP_ERROR, "Job %s cannot depend on itself" % job.id
            status = self._status_of(dep_id)
            if status is None:
                return (_DEP_ERROR, "Dependency error: job %s not found"
                        % dep_id)
            if status not in FINALIZED or dep_id in self._finalizing:
                self._dep_waiters[dep_id].add(job.id)
                return (_DEP_WAIT, "Waiting for job %s to finish (wanted"
                        " status: %s)" % (dep_id, ", ".join(wanted)
                                          or "any"))
            if status == STATUS_CANCELED and STATUS_CANCELED not in wanted:
                return (_DEP_CANCEL, "Dependency job %s was canceled"
                        % dep_id)
            if wanted and status not in wanted:
                return (_DEP_ERROR, "Dependency job %s finished with status"
                        " '%s', not one of '%s' as required"
                        % (dep_id, status, ", ".join(wanted)))
        return _DEP_OK, None

    def _status_of(self, job_id):
        job = self._lookup(job_id)
        return None if job is None else job.status

    # ------------------------------------------------------------------
    # Hooks called by OpContext

    def _op_running(self, job, op):
        if op.status == STATUS_CANCELING:
            raise errors.JobCanceled("Job %s is being canceled" % job.id)
        if op.status == STATUS_RUNNING:
            return defer.succeed(None)
        if op.status != STATUS_WAITING:
            raise errors.ProgrammerError("Opcode of job %s is %s, cannot"
                                         " start running" % (job.id,
                                                             op.status))
        self._check_not_abandoned(job)
        op.move_to(STATUS_RUNNING)
        op.exec_timestamp = self._now()
        written = self._persist(job)

        def on_disk(_):
            # told once a crash can no longer take it back
            self._changed(job)
            self._check_not_abandoned(job)
        # the executor waits for this before the opcode does anything
        return written.addCallback(on_disk)

    def _check_not_abandoned(self, job):
        run = self._runs.get(job.id)
        if run is not None and run.abandoned:
            raise errors.JobQueueError(
                "Job %d: not run, its file could not be written when it was"
                " submitted" % job.id)

    def _op_waiting_again(self, job, op):
        if op.status == STATUS_RUNNING:
            op.move_to(STATUS_WAITING)
            self._persist_in_background(job)
            self._changed(job)

    def _add_feedback(self, job, op, log_type, msg):
        timestamp = self._now()
        if log_type == model.ELOG_MESSAGE_LIST:
            messages = [_jsonable(m) for m in msg]
            log_type = model.ELOG_MESSAGE
        else:
            messages = [_jsonable(msg)]
        for message in messages:
            entry = job.add_log(op, timestamp, log_type, message)
            if self.events is not None:
                self._publish_status(job)
                self.events.publish(
                    events.KIND_JOB, events.TYPE_LOG, name=str(job.id),
                    id=job.id, data={"serial": entry[0], "timestamp":
                                     entry[1], "type": entry[2],
                                     "message": entry[3],
                                     "op_index": job.ops.index(op)})
        self._changed(job)
        run = self._runs.get(job.id)
        if run is None:
            return
        if self._log_flush_delay <= 0:
            self._persist_in_background(job)
        elif run.flush_call is None:
            run.flush_call = self._clock.callLater(
                self._log_flush_delay, self._flush, job)

    def _persist_soon(self, job):
        run = self._runs[job.id]
        if run.flush_call is None:
            run.flush_call = self._clock.callLater(0, self._flush, job)
        else:
            run.flush_call.reset(0)

    def _flush(self, job):
        run = self._runs.get(job.id)
        if run is not None:
            run.flush_call = None
            self._persist_in_background(job)

    # ------------------------------------------------------------------
    # Cancel, priority

    def cancel_job(self, job_id, kill=False):
        """CancelJob: ``[success, message]``.

        Queued jobs and jobs waiting (for dependencies or locks) are
        canceled; for one waiting for locks the executor's Deferred is
        cancelled.  A running opcode is not interrupted unless ``kill``
        is true, in which case its Deferred is cancelled too and the
        executor decides whether that stops it.
        """
        job_id = _job_id(job_id)
        job = self._jobs.get(job_id)
        if job is None:
            if job_id in self._ids:
                return [False, "Job %s is no longer waiting in the queue"
                        % job_id]
            return [False, "Job %s not found" % job_id]
        run = self._runs[job_id]
        if run.state != _ACTIVE:
            for dep_id, waiting in list(self._dep_waiters.items()):
                waiting.discard(job_id)
                if not waiting:
                    del self._dep_waiters[dep_id]
            run.state = None  # drops any heap entry
            log.info("Job {job} canceled", job=job_id)
            self._finish_canceled(job)
            return [True, "Job %s canceled" % job_id]
        status = job.status
        if status == STATUS_CANCELING:
            return [False, "Job %s is already being canceled" % job_id]
        if status == STATUS_RUNNING and not kill:
            return [False, "Job %s is no longer waiting in the queue"
                    % job_id]
        job.mark_unfinished(STATUS_CANCELING, None)
        self._persist_in_background(job)
        self._changed(job)
        log.info("Job {job} canceling", job=job_id)
        if run.deferred is not None:
            run.deferred.cancel()
        if job_id not in self._jobs:
            return [True, "Job %s canceled" % job_id]
        return [True, "Job %s will be canceled" % job_id]

    def change_job_priority(self, job_id, priority):
        """ChangeJobPriority: ``[success, message]``.

        Changes the priority of the opcodes not yet running; a queued job
        moves in the run order accordingly.
        """
        job_id = _job_id(job_id)
        try:
            _check_priority(priority, "Priority")
        except errors.OpPrereqError as err:
            raise errors.GenericError(err.args[0])
        job = self._jobs.get(job_id)
        if job is None:
            if job_id in self._ids:
                return [False, "Job %s is finished" % job_id]
            return [False, "Job %s not found" % job_id]
        if job.status == STATUS_CANCELING:
            return [False, "Job %s is being canceled" % job_id]
        changed = False
        for op in job.ops:
            if op.status in (STATUS_QUEUED, STATUS_WAITING):
                op.priority = priority
                changed = True
        if not changed:
            return [False, "Job %s has no pending opcodes" % job_id]
        self._persist_in_background(job)
        self._changed(job)
        if self._runs[job_id].state == _READY:
            self._push_ready(job)
            self._schedule()
        return [True, "Priority of the pending opcodes of job %s changed to"
                " %s" % (job_id, priority)]

    # ------------------------------------------------------------------
    # Archive

    def archive_job(self, job_id):
        """ArchiveJob: move a finalized job into the archive; a Deferred
        firing with a bool once it is moved."""
        job_id = _job_id(job_id)
        if job_id in self._jobs or job_id in self._finalizing:
            log.info("Job {job} is not finalized, not archiving it",
                     job=job_id)
            return defer.succeed(False)
        if job_id in self._archiving:
            # already on its way: the answer of that archive
            moved = defer.Deferred()
            self._archiving[job_id].append(moved)
            return moved.addCallback(lambda ids: job_id in ids)
        if job_id not in self._ids:
            return defer.succeed(False)
        return self._archive([job_id]).addCallback(bool)

    def auto_archive_jobs(self, age, timeout):
        """AutoArchiveJobs: archive finalized jobs that ended at least
        ``age`` seconds ago (-1: all of them), working for at most
        ``timeout`` seconds.  A Deferred firing with ``[archived,
        remaining]``, remaining being the jobs not examined because the
        time ran out."""
        start = self._clock.seconds()
        candidates = sorted(i for i in self._ids if i not in self._jobs
                            and i not in self._finalizing
                            and i not in self._archiving)
        chosen = []
        examined = 0
        for job_id in candidates:
            if timeout is not None and self._clock.seconds() - start > timeout:
                break
            examined += 1
            ended = self._end_times.get(job_id)
            if age == -1 or (ended is not None and start - ended >= age):
                chosen.append(job_id)
        remaining = len(candidates) - examined
        return self._archive(chosen).addCallback(
            lambda archived: [len(archived), remaining])

    def _archive(self, job_ids):
        """Move job files into the archive (in the writer's order, after
        their last writes); a Deferred firing with the ids moved.  Until
        then the jobs count as gone for the queue's limit and are not
        chosen again."""
        job_ids = [job_id for job_id in job_ids
                   if job_id not in self._archiving]
        if not job_ids:
            # nothing to move: no checkpoint either (the timer asks often)
            return defer.succeed([])
        # ArchiveJob calls for these jobs meanwhile wait here
        others = []
        for job_id in job_ids:
            self._archiving[job_id] = others

        def moved(ids):
            for job_id in ids:
                self._ids.discard(job_id)
                ended = self._end_times.pop(job_id, None)
                self._cache.pop(job_id, None)
                if self.events is not None:
                    # a client's job list drops it (queries without ids
                    # no longer show it)
                    self.events.publish(
                        events.KIND_JOB, events.TYPE_ARCHIVED,
                        name=str(job_id), id=job_id,
                        data={"end_ts": ended})
            if ids:
                log.info("Archived {n} job(s)", n=len(ids))
            return ids

        def ended(result):
            for job_id in job_ids:
                self._archiving.pop(job_id, None)
            for waiting in others:
                waiting.callback([] if isinstance(result, Failure)
                                 else result)
            return result
        def copied(ids):
            # the master candidates' copies of the queue move them too
            if not ids:
                return ids
            return self._journal.archived(ids).addCallback(lambda _: ids)
        # the journal must not bring an archived file back after a crash
        d = self._journal.checkpoint()
        d.addCallback(lambda _: self._writer.call(self._store.archive_jobs,
                                                  job_ids))
        return d.addCallback(moved).addCallback(copied).addBoth(ended)

    # ------------------------------------------------------------------
    # Drain flag

    @property
    def drained(self):
        return self._drained

    def set_drain_flag(self, drain_flag):
        """SetDrainFlag: persisted as the ``drain`` file; a Deferred firing
        with True once it is.  New jobs are refused (or accepted) at once."""
        self._drained = drained = bool(drain_flag)
        d = self._writer.call(self._store.write_drain_flag, drained)
        # and the master candidates' copies of the queue
        d.addCallback(lambda _: self._journal.drain_flag_changed(drained))
        return d.addCallback(lambda _: True)

    # ------------------------------------------------------------------
    # Queries

    def status_counts(self):
        """``{status: number}`` of the unfinished jobs."""
        return collections.Counter(job.status for job in self._jobs.values())

    def query_jobs(self, job_ids, fields):
        """QueryJobs: one row per id (None for unknown ids).

        With no ids, every job in the queue directory (not the archive) in
        id order; explicitly named archived jobs are found in the archive
        (their ``archived`` field is true).
        """
        model.check_fields(fields)
        if not job_ids:
            ids = sorted(self._ids)
        else:
            ids = [_job_id(i) for i in job_ids]
        rows = []
        for job_id in ids:
            job = self._as_written(self._visible(job_id))
            rows.append(None if job is None else model.job_row(job, fields))
        return rows

    def get_job(self, job_id):
        """The job object (live for unfinished jobs) or None; read only."""
        return self._as_written(self._visible(_job_id(job_id)))

    def _visible(self, job_id):
        # what clients may see: not a job whose creation is not on disk
        if job_id in self._unwritten:
            return None
        return self._lookup(job_id)

    def _as_written(self, job):
        """``job``, or while its final status waits for the disk, the job
        as last written: no query tells a status a crash could still take
        back (as Ganeti's queries, which read the job files)."""
        if job is None or job.id not in self._finalizing:
            return job
        return self._finalizing[job.id].previous_job(job)

    def wait_for_job_change(self, job_id, fields, prev_job_info,
                            prev_log_serial, timeout):
        """WaitForJobChange: Deferred firing with ``[[values], [log
        entries]]`` or ``"nochange"`` after ``timeout`` (at most 89 s)."""
        try:
            model.check_fields(fields)
            job = self._lookup(_job_id(job_id))
        except errors.GenericError as err:
            return defer.fail(err)
        if job is None:
            return defer.fail(errors.JobLost("Job %s not found" % job_id))
        if job.id in self._finalizing:
            # its final status is told once it is on disk; a disk that
            # stays full makes the call time out as usual meanwhile
            written = defer.Deferred()
            self._finalizing[job.id].waiters.append(written)
            written.addTimeout(
                min(WFJC_TIMEOUT, timeout if timeout is not None
                    else WFJC_TIMEOUT), self._clock,
                onTimeoutCancel=lambda result, after: JOB_NOTCHANGED)
            return written.addCallback(
                lambda result: result if result == JOB_NOTCHANGED else
                self._waiters.wait(job, fields, prev_job_info,
                                   prev_log_serial, timeout))
        return self._waiters.wait(job, fields, prev_job_info,
                                  prev_log_serial, timeout)

    def waiter_count(self, job_id=None):
        return self._waiters.count(job_id)

    def _lookup(self, job_id):
        job = self._jobs.get(job_id)
        if job is not None:
            return job
        job = self._cache.get(job_id)
        if job is not None:
            self._cache.move_to_end(job_id)
            return job
        try:
            job = self._store.read_job(job_id)
        except errors.JobFileCorrupted as err:
            log.error("Job {job}: {err}", job=job_id, err=err)
            return None
        if job is not None:
            self._remember(job)
        return job

    def _remember(self, job):
        self._cache[job.id] = job
        self._cache.move_to_end(job.id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    # ------------------------------------------------------------------
    # Helpers

    def _now(self):
        return model.split_time(self._clock.seconds())

    @staticmethod
    def _end_time(job):
        ts = job.end_timestamp or job.received_timestamp
        return model.merge_time(ts) if ts else None

    def _write(self, job):
        """Serialise ``job`` now; a Deferred firing once it is on disk."""
        data = encode_job(job)
        self._last_written[job.id] = data
        # group commit: jobs changing at about the same time share a write
        # (and a newer state of this job replaces one not written yet)
        return self._journal.commit(self._store.job_path(job.id), data)

    def _persist(self, job):
        """Write ``job`` (with any log entries waiting for a flush)."""
        run = self._runs.get(job.id)
        if run is not None and run.flush_call is not None:
            if run.flush_call.active():
                run.flush_call.cancel()
            run.flush_call = None
        return self._write(job)

    def _persist_in_background(self, job):
        """Write ``job``; nobody waits for it (a failure is logged)."""
        self._persist(job).addErrback(
            lambda f: log.failure("Job {job}: its file could not be written",
                                  f, job=job.id))

    def _changed(self, job):
        self._waiters.notify(job)
        self._publish_status(job)

    def _submitted_data(self, job):
        return {"status": job.status, "priority": job.priority,
                "ops": [op.input.summary() for op in job.ops],
                "received_ts": job.received_timestamp}

    def _publish_requeued(self, job):
        """A job found queued on disk at load was announced by an earlier
        master daemon: it is ``requeued``, not submitted again."""
        if self.events is None:
            return
        self.events.publish(events.KIND_JOB, events.TYPE_REQUEUED,
                            name=str(job.id), id=job.id,
                            data=self._submitted_data(job))
        self._published[job.id] = job.status

    def _publish_status(self, job):
        """Publish what the event stream has not seen of ``job``: that it
        was submitted, its status, that it finished."""
        if self.events is None or job.id in self._unwritten:
            return
        status = job.status
        known = self._published.get(job.id)
        if known == status:
            return
        if job.finalized and job.id in self._finalizing:
            return              # told once its final state is on disk
        name = str(job.id)
        if known is None:
            self.events.publish(
                events.KIND_JOB, events.TYPE_SUBMITTED, name=name, id=job.id,
                data=self._submitted_data(job))
            if status == STATUS_QUEUED:
                self._published[job.id] = status
                return
        self.events.publish(events.KIND_JOB, events.TYPE_STATUS, name=name,
                            id=job.id, data={"status": status,
                                             "previous": known})
        if job.finalized:
            self._published.pop(job.id, None)
            self.events.publish(
                events.KIND_JOB, events.TYPE_FINISHED, name=name, id=job.id,
                data={"status": status,
                      "opstatus": [op.status for op in job.ops],
                      "end_ts": job.end_timestamp})
        else:
            self._published[job.id] = status


def _job_id(value):
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(value)
    except (TypeError, ValueError):
        raise errors.OpPrereqError("Invalid job id %r" % (value,),
                                   errors.ECODE_INVAL)


def _check_priority(value, what):
    if (not isinstance(value, int) or isinstance(value, bool)
            or not model.PRIO_HIGHEST <= value <= model.PRIO_LOWEST):
        raise errors.OpPrereqError("%s must be an integer from %d to %d,"
                                   " not %r" % (what, model.PRIO_HIGHEST,
                                                model.PRIO_LOWEST, value),
                                   errors.ECODE_INVAL)


def _check_depends(depends, index):
    # the opcode allows job ids as decimal strings too; the queue takes
    # numbers only, as it always did
    for entry in depends or ():
        if not isinstance(entry[0], int):
            raise errors.OpPrereqError(
                "Opcode %d: parameter 'depends': each entry must be [job id,"
                " [final statuses]], not %r" % (index, entry),
                errors.ECODE_INVAL)


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def _error_text(err):
    if err.args and isinstance(err.args[0], str):
        return err.args[0]
    return str(err)
