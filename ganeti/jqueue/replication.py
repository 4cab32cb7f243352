"""Copies of the job queue on the master candidates (docs/jobs.rst,
"Replication to master candidates").

When the master dies, a master candidate takes over (master failover) and
must find every job the old master acknowledged.  Its disk being out of
reach, each online master candidate keeps a copy of the queue directory,
written by its node daemon (:mod:`ganeti.server.noded.queue_replica`).

:class:`QueueReplicator` wraps the queue's journal (the same interface:
``commit``, ``checkpoint``, and ``archived`` and ``drain_flag_changed``,
which the queue calls after it moved jobs into the archive or changed the
drain flag):

* the files committed in one turn of the reactor go out as one
  ``jobqueue_update`` call per candidate, encoded once for all of them;
  a commit's Deferred fires once the local journal has the change and
  every candidate in step has answered, so a job is acknowledged (and an
  opcode starts, its "running" state on record) only once the copies
  have it;
* each candidate has one call in flight at a time; what comes meanwhile
  waits behind it, a newer content of a file replacing the older;
* a candidate whose call fails (an error, no answer within
  :data:`UPDATE_TIMEOUT`) is *missed*: the failure is logged and counted
  (:attr:`ReplicaStatus.failures`), nobody waits for it any more, and it
  gets a full copy -- the files the master does not have removed, every
  file of the queue directory read from the disk after a checkpoint, the
  archived jobs it missed, the drain flag -- before any further change; the copy is tried again after
  :data:`RETRY_MIN` seconds, then twice as long each time, up to
  :data:`RETRY_MAX`;
* candidates follow the configuration: a new one (promoted, back online,
  added) gets a full copy first, one that is no longer a candidate is no
  longer sent anything.  At the master's start every candidate gets a
  full copy (after a failover the others hold an older one); the queue
  does not wait for it.

A cluster without other master candidates costs nothing: commits go
straight to the journal.
"""

import os

import attr
from twisted.internet import defer
from twisted.logger import Logger

from ganeti import rpc
from ganeti.jqueue import layout
from ganeti.replication import encode_data

log = Logger()

#: seconds a candidate may take to answer a change; jobs wait that long
#: at most for a node that does not answer (then it is missed)
UPDATE_TIMEOUT = 10.0
#: seconds each call of a full copy may take (nobody waits for these)
RESYNC_TIMEOUT = 60.0
#: seconds before a missed node's full copy is tried again; doubled after
#: each failure, up to RETRY_MAX
RETRY_MIN = 1.0
RETRY_MAX = 30.0
#: a full copy is sent in calls of at most this many files or bytes
CHUNK_FILES = 200
CHUNK_BYTES = 2 * 1024 * 1024

# what a candidate's copy is
SYNCED = "synced"         # in step: jobs wait for it
RESYNCING = "resyncing"   # getting a full copy
MISSED = "missed"         # a call failed; a full copy is due

#: what a failed wait of ``resync`` says for a node no longer a candidate
MSG_DROPPED = "no longer a master candidate"


@attr.s
class ReplicaStatus(object):
    """One master candidate's copy of the queue."""
    name = attr.ib()
    state = attr.ib(default=RESYNCING)
    #: calls to this node that failed, since the master started
    failures = attr.ib(default=0)
    #: why the copy is not in step (None while it is)
    error = attr.ib(default=None)
    #: when the last full copy was complete (the clock's seconds)
    synced_at = attr.ib(default=None)


class _CallFailed(Exception):
    pass


class _Batch(object):
    """The files of one turn (name in the queue directory -> encoded
    content), encoded once for every node."""

    def __init__(self, files):
        self.files = files
        self._args = None

    @property
    def args(self):
        if self._args is None:
            self._args = _update_args(self.files)
        return self._args


def _update_args(files):
    return rpc.PreparedArgs([[[layout.standard_path(name), data]
                              for name, data in files.items()]])


class _NodeWorker(object):
    """What one candidate is sent: one call in flight, the rest waiting
    (see the module's docstring)."""

    def __init__(self, replicator, uuid, status):
        self.rep = replicator
        self.uuid = uuid
        self.status = status
        status.state = RESYNCING
        self.batches = []        # pending _Batch, oldest first
        self.renames = []        # pending job ids to move into the archive
        self.drain = None        # pending drain flag
        self.waiters = []        # Deferreds of what is pending
        self.sending = []        # those of what is in flight
        # job ids archived while this node missed changes: their archived
        # files are part of its next full copy
        self.missed_archive = {}
        self.busy = False
        self.dropped = False
        self.resync_wanted = False
        self.resync_waiters = []    # for the next full copy
        self._copy_waiters = []     # for the one under way
        self.idle_waiters = []
        self.retry_call = None
        self.retry_delay = 0.0

    @property
    def state(self):
        return self.status.state

    # -- what the queue hands over
    def offer(self, batch):
        """Send ``batch``: a Deferred firing once it was (or failed) if
        this node is in step, else None."""
        if self.state == MISSED:
            return None         # its full copy reads the disk
        self.batches.append(batch)
        return self._pending_waiter()

    def offer_archive(self, job_ids):
        if self.state == MISSED:
            self.missed_archive.update(dict.fromkeys(job_ids))
            return None
        self.renames.extend(job_ids)
        return self._pending_waiter()

    def offer_drain(self, flag):
        if self.state == MISSED:
            return None         # its full copy sends the flag
        self.drain = flag
        return self._pending_waiter()

    def _pending_waiter(self):
        if self.state != SYNCED:
            return None         # sent after the full copy; nobody waits
        d = defer.Deferred()
        self.waiters.append(d)
        self.kick()
        return d

    def request_resync(self):
        """A full copy now; a Deferred firing with None once one that
        started after this call succeeded, or with the error."""
        d = defer.Deferred()
        self.resync_waiters.append(d)
        if self.state == MISSED:
            self._cancel_retry()
            self.status.state = RESYNCING
        else:
            self.resync_wanted = True
        self.kick()
        return d

    def wait_idle(self):
        if not self.busy:
            return defer.succeed(None)
        d = defer.Deferred()
        self.idle_waiters.append(d)
        return d

    # -- sending
    def kick(self):
        if self.busy or self.dropped or self.rep.stopped:
            return
        if self.state == MISSED:
            return              # the retry timer brings it back
        if self.state == SYNCED and not self._pending() and \
                not self.resync_wanted:
            return
        self.busy = True
        d = defer.Deferred.fromCoroutine(self._run())
        d.addErrback(lambda f: log.failure(
            "Job queue replication to {node}: internal error", f,
            node=self.status.name))
        d.addBoth(self._idle)

    def _idle(self, _):
        self.busy = False
        waiting, self.idle_waiters = self.idle_waiters, []
        for d in waiting:
            d.callback(None)
        # what arrived while the last call ended
        self.kick()

    def _pending(self):
        return bool(self.batches or self.renames or self.drain is not None)

    async def _run(self):
        try:
            while not self.dropped and not self.rep.stopped:
                if self.state == SYNCED and self._pending():
                    await self._send_pending()
                elif self.state == RESYNCING or self.resync_wanted:
                    await self._full_copy()
                else:
                    return
        except _CallFailed as err:
            self._failed(str(err))
        except Exception as err:
            # a bug: the node is treated as missed (its copy tried again
            # later) rather than left half-sent
            log.failure("Job queue replication to {node}: internal error",
                        node=self.status.name)
            self._failed("internal error: %s" % (err,))

    async def _send_pending(self):
        batches, self.batches = self.batches, []
        renames, self.renames = self.renames, []
        drain, self.drain = self.drain, None
        waiters = self.sending = self.waiters
        self.waiters = []
        try:
            if batches:
                if len(batches) == 1:
                    args = batches[0].args
                else:
                    merged = {}
                    for batch in batches:
                        merged.update(batch.files)
                    args = _update_args(merged)
                await self._call("jobqueue_update", args, UPDATE_TIMEOUT)
            if renames:
                await self._call("jobqueue_rename", [_rename_args(renames)],
                                 UPDATE_TIMEOUT)
            if drain is not None:
                await self._call("jobqueue_set_drain_flag", [drain],
                                 UPDATE_TIMEOUT)
        except _CallFailed:
            # the archived files go with the full copy
            self.missed_archive.update(dict.fromkeys(renames))
            raise
        finally:
            self.sending = []
            _fire(waiters)

    async def _full_copy(self):
        rep = self.rep
        self.status.state = RESYNCING
        self.resync_wanted = False
        self._copy_waiters, self.resync_waiters = self.resync_waiters, []
        try:
            # every change committed so far is in its file
            await rep.journal.checkpoint()
            names = await rep.run_blocking(list_queue_files, rep.queue_dir)
        except Exception as err:
            raise _CallFailed("the master's queue cannot be read: %s"
                              % (err,))
        # What the master does not have goes first (a journal or spare
        # files a master on that node left, jobs archived meanwhile); the
        # rest is replaced file by file: should the master die during the
        # copy, the node still holds every job, some of them older.
        await self._call("jobqueue_purge",
                         [[layout.standard_path(n) for n in names]],
                         RESYNC_TIMEOUT)
        # Jobs archived since this node last had the queue: their archived
        # files, and those of moves still to be sent (which then find them
        # there).  Taken after the listing: archiving runs in the same
        # thread, so a job missing from the listing is known here.
        archived = list(self.missed_archive) + [
            i for i in self.renames if i not in self.missed_archive]
        names += [layout.archived_job_file(i) for i in archived]
        index = sent = 0
        while index < len(names):
            try:
                chunk, index = await rep.run_blocking(
                    read_files, rep.queue_dir, names, index)
            except Exception as err:
                raise _CallFailed("the master's queue files cannot be read:"
                                  " %s" % (err,))
            if self.dropped:
                return
            if chunk:
                await self._call("jobqueue_update", [chunk], RESYNC_TIMEOUT)
                sent += len(chunk)
        await self._call("jobqueue_set_drain_flag", [rep.drained],
                         RESYNC_TIMEOUT)
        for job_id in archived:
            self.missed_archive.pop(job_id, None)
        self._cancel_retry()
        status = self.status
        if status.error is not None:
            log.info("Node {node} holds a full copy of the job queue again"
                     " ({n} files)", node=status.name, n=sent)
        else:
            log.info("Node {node} holds a full copy of the job queue ({n}"
                     " files)", node=status.name, n=sent)
        status.state = SYNCED
        status.error = None
        status.synced_at = rep.clock.seconds()
        self.retry_delay = 0.0
        waiting, self._copy_waiters = self._copy_waiters, []
        for d in waiting:
            d.callback(None)

    async def _call(self, procedure, args, timeout):
        node = self.rep.cfg.nodes.get(self.uuid)
        if node is None or self.dropped:
            raise _CallFailed(MSG_DROPPED)
        result = await self.rep.rpc.call(node.name, procedure, args,
                                         timeout=timeout)
        if not result.success:
            raise _CallFailed(result.fail_msg or "%s failed" % procedure)
        return result.payload

    def _failed(self, msg):
        status = self.status
        status.failures += 1
        if self.dropped:
            return
        was = status.state
        first = status.error is None
        status.state = MISSED
        status.error = msg
        self.missed_archive.update(dict.fromkeys(self.renames))
        self.renames = []
        self.batches = []
        self.drain = None
        self.retry_delay = (RETRY_MIN if not self.retry_delay
                            else min(self.retry_delay * 2, RETRY_MAX))
        if was == SYNCED:
            log.warn("Job queue replication to node {node} failed: {msg};"
                     " jobs no longer wait for it, and it gets a full copy"
                     " of the queue once it answers (next attempt in"
                     " {delay:g} s)", node=status.name, msg=msg,
                     delay=self.retry_delay)
        elif first:
            log.warn("Copying the job queue to node {node} failed: {msg};"
                     " trying again in {delay:g} s (then less often)",
                     node=status.name, msg=msg, delay=self.retry_delay)
        waiting = self.waiters + self._copy_waiters + self.resync_waiters
        self.waiters, self._copy_waiters, self.resync_waiters = [], [], []
        _fire(waiting, msg)
        if not self.rep.stopped:
            self.retry_call = self.rep.clock.callLater(self.retry_delay,
                                                       self._retry)

    def _retry(self):
        self.retry_call = None
        if self.state == MISSED and not self.dropped:
            self.status.state = RESYNCING
            self.kick()

    def _cancel_retry(self):
        if self.retry_call is not None and self.retry_call.active():
            self.retry_call.cancel()
        self.retry_call = None

    def drop(self, msg=MSG_DROPPED):
        """No longer sent anything (an answer still coming is ignored)."""
        self.dropped = True
        self._cancel_retry()
        waiting = (self.sending + self.waiters + self._copy_waiters +
                   self.resync_waiters)
        self.waiters, self._copy_waiters, self.resync_waiters = [], [], []
        self.batches, self.renames, self.drain = [], [], None
        _fire(waiting, msg)


def _fire(waiters, result=None):
    for d in waiters:
        if not d.called:
            d.callback(result)


def _rename_args(job_ids):
    return [[layout.standard_path(layout.job_file(i)),
             layout.standard_path(layout.archived_job_file(i))]
            for i in job_ids]


class QueueReplicator(object):
    """The queue's journal, with the queue copied to the master candidates.

    ``journal`` is the local journal (``commit``, ``checkpoint``);
    ``cfg`` the configuration (its online master candidates but the master
    get copies; register :meth:`config_written` as a write listener);
    ``rpc_client`` an :class:`ganeti.rpc.RpcClient`; ``run_blocking(fn,
    *args)`` runs file reads off the reactor (the master's writer).
    :meth:`start` once the queue is loaded.
    """

    def __init__(self, journal, queue_dir, cfg, rpc_client, clock,
                 run_blocking):
        self.journal = journal
        self.queue_dir = os.path.abspath(queue_dir)
        self.cfg = cfg
        self.rpc = rpc_client
        self.clock = clock
        self.run_blocking = run_blocking
        #: the drain flag as the queue last set it (sent with full copies)
        self.drained = False
        self.started = False
        self.stopped = False
        #: node uuid -> ReplicaStatus of every master candidate
        self.status = {}
        self._workers = {}
        self._files = {}          # this turn's commits: name -> bytes
        self._waiters = []
        self._flush_call = None
        self._targets_call = None

    # -- the journal's interface
    def commit(self, path, data):
        """A Deferred firing once ``data`` for ``path`` is in the local
        journal and every candidate in step has it (a candidate's failure
        is logged, not the commit's)."""
        local = self.journal.commit(path, data)
        if not self._workers or os.path.dirname(path) != self.queue_dir:
            return local
        self._files[os.path.basename(path)] = data
        remote = defer.Deferred()
        self._waiters.append(remote)
        if self._flush_call is None:
            self._flush_call = self.clock.callLater(0, self._flush)
        return local.addCallback(lambda _: remote)

    def checkpoint(self):
        return self.journal.checkpoint()

    def archived(self, job_ids):
        """The queue moved ``job_ids`` into its archive: a Deferred firing
        once the candidates in step moved them too."""
        self._flush()           # their last contents go first
        return self._offer(lambda w: w.offer_archive(list(job_ids)))

    def drain_flag_changed(self, flag):
        """The queue's drain flag is now ``flag`` (its file written): a
        Deferred firing once the candidates in step have it too."""
        self.drained = bool(flag)
        self._flush()
        return self._offer(lambda w: w.offer_drain(self.drained))

    def _flush(self):
        if self._flush_call is not None:
            if self._flush_call.active():
                self._flush_call.cancel()
            self._flush_call = None
        if not self._files and not self._waiters:
            return
        files, self._files = self._files, {}
        waiters, self._waiters = self._waiters, []
        batch = None
        if any(w.state != MISSED for w in self._workers.values()):
            # compressed once, on the reactor: job files are small
            batch = _Batch({name: encode_data(data)
                            for name, data in files.items()})
        sent = self._offer(lambda w: w.offer(batch) if batch else None)
        sent.addCallback(lambda _: _fire(waiters))

    def _offer(self, give):
        pending = [d for d in (give(w) for w in list(self._workers.values()))
                   if d is not None]
        if not pending:
            return defer.succeed(None)
        return defer.DeferredList(pending).addCallback(lambda _: None)

    # -- the candidates
    def start(self, drained):
        """The queue is loaded (with the drain flag ``drained``): every
        candidate gets a full copy, in the background."""
        self.drained = bool(drained)
        self.started = True
        # once the reactor runs (the daemon's start may not be over)
        if self._targets_call is None:
            self._targets_call = self.clock.callLater(0,
                                                      self._update_targets)

    def config_written(self, store=None):
        """A configuration write listener: candidates may have changed
        (looked at once per turn of the reactor)."""
        if not self.started or self.stopped:
            return
        if self._targets_call is None:
            self._targets_call = self.clock.callLater(0,
                                                      self._update_targets)

    def _update_targets(self):
        self._targets_call = None
        if self.stopped:
            return
        cfg = self.cfg
        master = cfg.cluster.master_node
        wanted = {node.uuid: node for node in cfg.nodes.values()
                  if node.master_candidate and not node.offline
                  and node.uuid != master}
        for uuid in list(self._workers):
            if uuid not in wanted:
                worker = self._workers.pop(uuid)
                self.status.pop(uuid, None)
                worker.drop()
                log.info("Node {node} no longer gets a copy of the job"
                         " queue", node=worker.status.name)
        for uuid in sorted(wanted, key=lambda u: wanted[u].name):
            status = self.status.setdefault(uuid,
                                            ReplicaStatus(wanted[uuid].name))
            status.name = wanted[uuid].name
            if uuid not in self._workers:
                # what this turn committed so far is in its full copy
                self._flush()
                worker = self._workers[uuid] = _NodeWorker(self, uuid, status)
                worker.kick()

    def resync(self):
        """A full copy to every candidate now (``gnt-cluster
        redist-conf``): a Deferred firing once each has answered, with
        ``{node name: error}`` of those whose copy failed."""
        self._flush()
        workers = list(self._workers.values())
        waits = [w.request_resync() for w in workers]
        d = defer.gatherResults(waits)
        return d.addCallback(lambda results: {
            w.status.name: error for w, error in zip(workers, results)
            if error is not None})

    def status_of(self, name):
        """The ReplicaStatus of the candidate named ``name``, or None."""
        for status in self.status.values():
            if status.name == name:
                return status
        return None

    def missed(self):
        """``{node name: error}`` of the candidates whose copy is not in
        step because a call failed."""
        return {s.name: s.error for s in self.status.values()
                if s.error is not None}

    def stop(self):
        """Send what is pending to the candidates in step (each within
        its timeout), then nothing more; a Deferred."""
        self._flush()
        if self._targets_call is not None and self._targets_call.active():
            self._targets_call.cancel()
        self._targets_call = None
        waits = [w.wait_idle() for w in self._workers.values()
                 if w.state == SYNCED]
        d = defer.DeferredList(waits)

        def done(_):
            self.stopped = True
            workers, self._workers = self._workers, {}
            for worker in workers.values():
                worker.drop("the master daemon is stopping")
            # anything committed from now on goes to the journal alone
            self._flush()
        return d.addCallback(done)


# -- reading the master's queue directory (in the writer's thread)

def list_queue_files(queue_dir):
    """What a full copy holds of the queue directory: the job files (by
    id), the serial and version files."""
    ids = []
    for name in os.listdir(queue_dir):
        match = layout.JOB_FILE_RE.match(name)
        if match:
            ids.append(int(match.group(1)))
    return ([layout.job_file(i) for i in sorted(ids)]
            + [layout.SERIAL_FILE, layout.VERSION_FILE])


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def read_files(queue_dir, names, start, max_files=None, max_bytes=None):
    """``([[standard path, encoded content], ...], next index)``: the
    files ``names[start:]`` up to ``max_files`` or ``max_bytes`` (default
    :data:`CHUNK_FILES`, :data:`CHUNK_BYTES`).  A job file archived since
    it was listed is taken from the archive; a file gone is left out."""
    max_files = CHUNK_FILES if max_files is None else max_files
    max_bytes = CHUNK_BYTES if max_bytes is None else max_bytes
    files = []
    size = 0
    index = start
    while index < len(names) and len(files) < max_files and \
            size < max_bytes:
        name = names[index]
        index += 1
        data = _read(os.path.join(queue_dir, name))
        if data is None:
            match = layout.JOB_FILE_RE.match(name)
            if match is None:
                continue
            name = layout.archived_job_file(int(match.group(1)))
            data = _read(os.path.join(queue_dir, name))
            if data is None:
                continue
        files.append([layout.standard_path(name), encode_data(data)])
        size += len(data)
    return files, index
