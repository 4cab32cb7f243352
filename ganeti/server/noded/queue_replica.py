"""Procedures of the copy of the job queue a master candidate keeps.

The master sends every change of its queue directory to the online master
candidates (:mod:`ganeti.jqueue.replication`), so that the candidate that
becomes master in a failover finds the queue as the old master
acknowledged it.  A candidate keeps the copy in its own queue directory,
``<root>/var/lib/ganeti/queue``, in the layout a master daemon reads.

Files are named by their standard paths (``/var/lib/ganeti/queue/job-12``)
and only the queue's own files are accepted: ``job-<id>``, ``serial``,
``version`` and ``archive/<id // 10000>/job-<id>`` (the drain flag has a
procedure of its own).  Anything else is refused, naming the argument,
before any file is touched.

Every call is ordered file work (one at a time, in arrival order, in the
daemon's thread pool) and durable once answered: files are written
atomically and flushed, then their directories.  While it writes, the
node daemon holds the queue's lock file, marked as such
(:data:`ganeti.jqueue.layout.REPLICA_MARK`: a master daemon starting at
that moment waits for it); a node whose own master daemon holds the lock
refuses every call, so a running master's queue is never overwritten by
another master's copy.
"""

import contextlib
import fcntl
import os
import re

from ganeti import errors
from ganeti import ht
from ganeti.backend import files
from ganeti.jqueue import layout
from ganeti.server.noded.procedure import Arg, procedure
from ganeti.utils import io

QUEUE_DIR = layout.STANDARD_DIR

_TOP_FILES = (layout.SERIAL_FILE, layout.VERSION_FILE)
_ARCHIVED_RE = re.compile(r"^%s/(\d+)/job-(\d+)$" % layout.ARCHIVE_DIR)

_FILES = ht.list_of(ht.tuple_of(ht.NESTR, ht.ANY))
_RENAMES = ht.list_of(ht.tuple_of(ht.NESTR, ht.NESTR))


def _canonical(digits):
    # "job-007" would be a second file of job 7
    return digits == str(int(digits))


def _relative(path, field):
    """The name inside the queue directory of the file with standard path
    ``path``; ParameterError naming ``field`` if it is not one."""
    if not isinstance(path, str) or not path.startswith(QUEUE_DIR + "/") \
            or os.path.normpath(path) != path:
        raise errors.ParameterError(
            field, "%s: %r is not a file of the job queue (%s/...)"
            % (field, path, QUEUE_DIR))
    return path[len(QUEUE_DIR) + 1:]


def job_file_id(path, field):
    """The job id of ``QUEUE_DIR/job-<id>``, or ParameterError."""
    name = _relative(path, field)
    match = layout.JOB_FILE_RE.match(name)
    if match is None or not _canonical(match.group(1)):
        raise errors.ParameterError(
            field, "%s: %s is not a job file of the queue (%s/job-<id>)"
            % (field, path, QUEUE_DIR))
    return int(match.group(1))


def archived_file_id(path, field):
    """The job id of ``QUEUE_DIR/archive/<id // 10000>/job-<id>``, or
    ParameterError."""
    name = _relative(path, field)
    match = _ARCHIVED_RE.match(name)
    if match is None or not _canonical(match.group(2)) or \
            name != layout.archived_job_file(int(match.group(2))):
        raise errors.ParameterError(
            field, "%s: %s is not a file of the queue's archive (%s/%s/"
            "<id // %d>/job-<id>)" % (field, path, QUEUE_DIR,
                                      layout.ARCHIVE_DIR,
                                      layout.JOBS_PER_ARCHIVE_DIR))
    return int(match.group(2))


def check_update_name(path, field):
    """The name inside the queue directory of a file ``jobqueue_update``
    may write, or ParameterError."""
    name = _relative(path, field)
    if name in _TOP_FILES:
        return name
    if layout.JOB_FILE_RE.match(name):
        job_file_id(path, field)
        return name
    if name.startswith(layout.ARCHIVE_DIR + "/"):
        archived_file_id(path, field)
        return name
    raise errors.ParameterError(
        field, "%s: %s is not a file of the job queue a master candidate"
        " keeps (job-<id>, serial, version, archive/<id // %d>/job-<id>;"
        " the drain flag through jobqueue_set_drain_flag)"
        % (field, path, layout.JOBS_PER_ARCHIVE_DIR))


class QueueReplicaProcedures(object):
    """This node's copy of the master's job queue (``self.paths``)."""

    @procedure(Arg("files", _FILES))
    async def jobqueue_update(self, files):
        """Write queue files, ``[[standard path, data], ...]`` (``data``
        as for upload_file: text or ``[encoding, text]``), atomically and
        durably, flushed together; True."""
        names = [check_update_name(path, "files item %d" % index)
                 for index, (path, _) in enumerate(files)]
        await self.run_ordered(_update, self.paths.queue_dir,
                               [(name, data) for name, (_, data)
                                in zip(names, files)])
        return True

    @procedure(Arg("renames", _RENAMES))
    async def jobqueue_rename(self, renames):
        """Move job files into the archive, ``[[old, new], ...]``
        (``QUEUE_DIR/job-<id>`` to ``QUEUE_DIR/archive/<id // 10000>/
        job-<id>``), creating the archive's directories; a move already
        done counts as done.  True."""
        moves = []
        for index, (old, new) in enumerate(renames):
            field = "renames item %d" % index
            job_id = job_file_id(old, field)
            if archived_file_id(new, field) != job_id:
                raise errors.ParameterError(
                    field, "%s: %s and %s are not the same job" % (field,
                                                                   old, new))
            moves.append(job_id)
        await self.run_ordered(_rename, self.paths.queue_dir, moves)
        return True

    @procedure(Arg("keep", ht.list_of(ht.NESTR), []))
    async def jobqueue_purge(self, keep):
        """Remove every file of the queue directory but the lock file and
        those named in ``keep`` (standard paths of job files, ``serial``,
        ``version``: a full copy keeps what it is about to replace, so the
        copy is never emptier than before); the archive stays.  The
        number of files removed."""
        names = set()
        for index, path in enumerate(keep):
            name = check_update_name(path, "keep item %d" % index)
            if "/" in name:
                raise errors.ParameterError(
                    "keep item %d" % index, "keep item %d: %s is in the"
                    " archive, which a purge leaves alone" % (index, path))
            names.add(name)
        return await self.run_ordered(_purge, self.paths.queue_dir, names)

    @procedure(Arg("flag", ht.BOOL), blocking=True, ordered=True)
    def jobqueue_set_drain_flag(self, flag):
        """Create (true) or remove (false) the queue's drain flag file;
        True."""
        _set_drain_flag(self.paths.queue_dir, flag)
        return True


@contextlib.contextmanager
def queue_locked(queue_dir):
    """Hold the queue directory's lock while writing the copy; a clear
    JobQueueLocked if a master daemon of this node holds it."""
    os.makedirs(queue_dir, mode=layout.DIR_MODE, exist_ok=True)
    lock_path = os.path.join(queue_dir, layout.LOCK_FILE)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, layout.FILE_MODE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = layout.lock_holder(fd)
            raise errors.JobQueueLocked(
                "the job queue %s is in use by a master daemon on this node"
                " (%s holds its lock file %s); its queue is not overwritten"
                " by another master's copy" % (
                    queue_dir, "pid %d" % holder if holder else "a process",
                    lock_path))
        os.ftruncate(fd, 0)
        os.pwrite(fd, layout.REPLICA_MARK + b" %d\n" % os.getpid(), 0)
        yield
    finally:
        # closing the only descriptor releases the lock
        os.close(fd)


def _make_dirs(queue_dir, relative_dirs):
    """Create the archive's directories (mode 0700) that do not exist;
    their parents are flushed so that the new entries last."""
    flush = set()
    for rel in sorted(relative_dirs):
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):
            path = os.path.join(queue_dir, *parts[:depth])
            if not os.path.isdir(path):
                os.mkdir(path, layout.DIR_MODE)
                flush.add(os.path.dirname(path))
    for directory in sorted(flush):
        io.fsync_dir(directory)


def _update(queue_dir, items):
    # decoded first: a bad item changes nothing
    content = {}
    for index, (name, data) in enumerate(items):
        content[name] = files.decode_data(data, "files item %d" % index)
    with queue_locked(queue_dir):
        _make_dirs(queue_dir, {os.path.dirname(name) for name in content
                               if os.path.dirname(name)})
        io.atomic_write_many({os.path.join(queue_dir, name): data
                              for name, data in content.items()},
                             mode=layout.FILE_MODE)


def _rename(queue_dir, job_ids):
    with queue_locked(queue_dir):
        targets = {job_id: layout.archived_job_file(job_id)
                   for job_id in job_ids}
        _make_dirs(queue_dir, {os.path.dirname(t) for t in targets.values()})
        missing = []
        touched = set()
        for job_id in job_ids:
            old = os.path.join(queue_dir, layout.job_file(job_id))
            new = os.path.join(queue_dir, targets[job_id])
            try:
                os.rename(old, new)
            except FileNotFoundError:
                if not os.path.exists(new):
                    missing.append(layout.job_file(job_id))
                continue
            touched.add(os.path.dirname(new))
        if touched:
            for directory in sorted(touched | {queue_dir}):
                io.fsync_dir(directory)
    if missing:
        raise errors.JobQueueError(
            "job file%s %s not in the queue directory %s nor in its archive:"
            " this copy of the queue missed changes"
            % ("s" if len(missing) > 1 else "", ", ".join(missing),
               queue_dir))


def _purge(queue_dir, keep=frozenset()):
    removed = 0
    with queue_locked(queue_dir):
        for entry in os.scandir(queue_dir):
            if entry.name == layout.LOCK_FILE or entry.name in keep or \
                    entry.is_dir(follow_symlinks=False):
                continue
            os.unlink(entry.path)
            removed += 1
        if removed:
            io.fsync_dir(queue_dir)
    return removed


def _set_drain_flag(queue_dir, flag):
    path = os.path.join(queue_dir, layout.DRAIN_FILE)
    with queue_locked(queue_dir):
        if flag:
            io.atomic_write(path, b"", mode=layout.FILE_MODE)
        elif os.path.lexists(path):
            os.unlink(path)
            io.fsync_dir(queue_dir)
