"""The queue directory: job files, archive, serial, version and drain flag.

Layout (Ganeti's)::

    queue/lock                     flock'ed by the one process using the queue
    queue/version                  "1\\n"
    queue/serial                   last job id handed out, "N\\n"
    queue/drain                    present = no new jobs accepted
    queue/journal                  recent job file changes (group commit)
    queue/job-<id>                 one JSON file per job not archived
    queue/archive/<id // 10000>/job-<id>

Every write goes through ``utils.io.atomic_write`` (temp file, fsync, rename,
fsync of the directory), and every batch of job file changes through the journal
(:mod:`ganeti.jqueue.journal`: one flush for the batch, the files written
behind it), so a reader or a crash sees the old or the new file, and a
crash loses no change that was acknowledged.

One process at a time uses a queue directory: :meth:`JobStore.lock` takes an
exclusive ``flock`` on ``queue/lock`` (Ganeti's lock file) before anything
is read, and the kernel drops it when the process ends, however it ends.

Only the master daemon's user may read the queue: its files are mode 0600
and its directories 0700 (job files hold the opcodes' private parameters);
files an older version left with a looser mode are tightened when the
queue is loaded (:meth:`JobStore.tighten_modes`).
"""

import fcntl
import json
import os
import stat
import time

from twisted.logger import Logger

from ganeti import errors
from ganeti.daemon_util import pid_alive
from ganeti.utils.io import atomic_write, fsync_dir
from ganeti.jqueue.journal import Journal
from ganeti.jqueue.layout import (DIR_MODE, FILE_MODE, JOB_FILE_RE,
                                  JOBS_PER_ARCHIVE_DIR, lock_holder,
                                  replica_writing)
from ganeti.jqueue.model import QueuedJob

log = Logger()

QUEUE_VERSION = 1
CORRUPT_SUFFIX = ".corrupt"

_JOB_FILE_RE = JOB_FILE_RE


def encode_job(job):
    return json.dumps(job.to_dict(), separators=(",", ":")).encode("utf-8")


#: seconds a new master waits for the journal helper of a master that
#: died to finish (it holds the queue's lock until then), or for a node
#: daemon writing its copy of the queue
HELPER_EXIT_WAIT = 10.0


def _flock_after_helpers(fd, wait=None, clock=time.monotonic,
                         sleep=time.sleep):
    """Lock ``fd``'s file; while the holder named in the lock is a process
    that no longer exists (the lock is held by the helper it left, which
    ends on its own) or a node daemon writing a copy of the queue, wait
    for it up to ``wait`` seconds.  Raises BlockingIOError if the lock
    stays taken."""
    deadline = clock() + (HELPER_EXIT_WAIT if wait is None else wait)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if clock() >= deadline:
                raise
            if not replica_writing(fd):
                holder = lock_holder(fd)
                if holder is None or pid_alive(holder):
                    raise
        sleep(0.05)


def _loose(path, mode):
    """Whether ``path`` (not followed if a link) allows more than
    ``mode``."""
    return bool(stat.S_IMODE(os.lstat(path).st_mode) & ~mode)


def _tighten(path, mode):
    """chmod ``path`` to ``mode`` if it allows more; 1 if it did."""
    if not _loose(path, mode):
        return 0
    os.chmod(path, mode)
    return 1


class JobStore(object):
    """Reads and writes the files of one queue directory."""

    def __init__(self, queue_dir):
        self.queue_dir = os.path.abspath(queue_dir)
        self.archive_dir = os.path.join(self.queue_dir, "archive")
        self.serial_file = os.path.join(self.queue_dir, "serial")
        self.version_file = os.path.join(self.queue_dir, "version")
        self.drain_file = os.path.join(self.queue_dir, "drain")
        self.lock_file = os.path.join(self.queue_dir, "lock")
        self._lock_fd = None
        self.journal = Journal(self.queue_dir, FILE_MODE)

    # -- paths
    def job_path(self, job_id):
        return os.path.join(self.queue_dir, "job-%d" % job_id)

    def archived_job_path(self, job_id):
        return os.path.join(self.archive_dir,
                            str(job_id // JOBS_PER_ARCHIVE_DIR),
                            "job-%d" % job_id)

    # -- one process per queue
    @property
    def lock_fd(self):
        """The lock file's descriptor while locked (helpers that write the
        queue hold the lock with this process), else None."""
        return self._lock_fd

    @property
    def locked(self):
        """True while this store holds the queue's lock."""
        return self._lock_fd is not None

    def lock(self):
        """Take the queue's lock, or raise JobQueueLocked naming the lock
        file and, when it can be found, the holder's pid.

        Idempotent.  Held until :meth:`unlock` or the end of the process;
        the holder writes its pid into the file for the message above.
        """
        if self._lock_fd is not None:
            return
        os.makedirs(self.queue_dir, mode=DIR_MODE, exist_ok=True)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            _flock_after_helpers(fd)
        except BlockingIOError:
            holder = lock_holder(fd)
            os.close(fd)
            raise errors.JobQueueLocked(
                "The job queue %s is in use by another process (%s holds"
                " the lock file %s); only one master daemon may use a job"
                " queue" % (self.queue_dir, "pid %d" % holder if holder
                            else "a process", self.lock_file))
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"%d\n" % os.getpid(), 0)
        self._lock_fd = fd

    def unlock(self):
        """Release the queue's lock (ending the process does as well)."""
        self.journal.close()
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)

    # -- setup
    def initialize(self):
        """Create the directory and version file, refuse unknown versions."""
        os.makedirs(self.archive_dir, mode=DIR_MODE, exist_ok=True)
        tightened = self.tighten_modes()
        if tightened:
            log.info("Job queue: {n} file(s) and directories made readable"
                     " by their owner only", n=tightened)
        version = self._read_number(self.version_file)
        if version is None:
            atomic_write(self.version_file, b"%d\n" % QUEUE_VERSION,
                         FILE_MODE)
        elif version != QUEUE_VERSION:
            raise errors.JobQueueError("Job queue version %s found, this"
                                       " code knows version %s"
                                       % (version, QUEUE_VERSION))
        self._remove_temp_files()
        # what the last run acknowledged but had not flushed in place
        self.journal.recover()

    def tighten_modes(self):
        """Give the queue's files mode 0600 and its directories 0700 where
        they allow more (an older version made them readable by the
        group); returns how many changed.

        The archive is walked only while its own directory allows more:
        it is tightened last, so a walk cut short is done again."""
        count = _tighten(self.queue_dir, DIR_MODE)
        for entry in os.scandir(self.queue_dir):
            if entry.is_file(follow_symlinks=False):
                count += _tighten(entry.path, FILE_MODE)
        if not _loose(self.archive_dir, DIR_MODE):
            return count
        for sub in os.scandir(self.archive_dir):
            if not sub.is_dir(follow_symlinks=False):
                continue
            for entry in os.scandir(sub.path):
                if entry.is_file(follow_symlinks=False):
                    count += _tighten(entry.path, FILE_MODE)
            count += _tighten(sub.path, DIR_MODE)
        return count + _tighten(self.archive_dir, DIR_MODE)

    def _remove_temp_files(self):
        # atomic_write's temp files (".job-N.xxxx") left by a crash mid-write
        prefixes = (".job-", ".serial.", ".drain.", ".version.")
        for name in os.listdir(self.queue_dir):
            if name.startswith(prefixes):
                try:
                    os.unlink(os.path.join(self.queue_dir, name))
                except OSError:
                    pass

    def _read_number(self, path):
        try:
            with open(path) as f:
                text = f.read().strip()
        except FileNotFoundError:
            return None
        try:
            return int(text)
        except ValueError:
            raise errors.JobQueueError("Content of %s is not a number: %r"
                                       % (path, text[:40]))

    # -- serial
    def read_serial(self):
        """The last job id handed out (0 for a new queue).

        Also looks at the job files present, so a lost or stale serial file
        can never make an id be handed out twice.
        """
        serial = self._read_number(self.serial_file) or 0
        ids = self.list_job_ids()
        if ids:
            serial = max(serial, ids[-1])
        return max(serial, self._max_archived_id())

    def write_serial(self, serial):
        atomic_write(self.serial_file, b"%d\n" % serial, FILE_MODE)

    def _max_archived_id(self):
        try:
            subdirs = [int(d) for d in os.listdir(self.archive_dir)
                       if d.isdigit()]
        except FileNotFoundError:
            return 0
        # ids only grow, so the highest sub-directory holds the highest id
        for sub in sorted(subdirs, reverse=True):
            ids = self._ids_in(os.path.join(self.archive_dir, str(sub)))
            if ids:
                return max(ids)
        return 0

    # -- jobs
    @staticmethod
    def _ids_in(directory):
        ids = []
        for name in os.listdir(directory):
            m = _JOB_FILE_RE.match(name)
            if m:
                ids.append(int(m.group(1)))
        return ids

    def list_job_ids(self):
        """Ids of the jobs in the queue directory (not archived), sorted."""
        return sorted(self._ids_in(self.queue_dir))

    def write_job(self, job):
        self.write_job_data(job.id, encode_job(job))

    def write_job_data(self, job_id, data):
        """Write a job's file from its serialised form (``encode_job``)."""
        atomic_write(self.job_path(job_id), data, FILE_MODE)

    def write_files(self, files):
        """Write several queue files (path -> bytes, e.g. from
        :meth:`job_path`) with one flush (the writer's group commit);
        returns what writes them in place afterwards."""
        return self.journal.commit(files)

    def checkpoint(self):
        """Flush the files written through the journal; empty it."""
        self.journal.checkpoint()

    def read_job(self, job_id, try_archive=True):
        """Load a job from its file, or None if there is none.

        Raises JobFileCorrupted when the file cannot be parsed.
        """
        candidates = [(self.job_path(job_id), False)]
        if try_archive:
            candidates.append((self.archived_job_path(job_id), True))
        for path, archived in candidates:
            try:
                with open(path, "rb") as f:
                    raw = f.read()
            except FileNotFoundError:
                continue
            try:
                data = json.loads(raw.decode("utf-8"))
            except ValueError as err:
                raise errors.JobFileCorrupted("Cannot parse %s: %s"
                                              % (path, err))
            job = QueuedJob.from_dict(data, archived=archived)
            if job.id != job_id:
                raise errors.JobFileCorrupted("%s holds job %s"
                                              % (path, job.id))
            return job
        return None

    def move_aside(self, job_id):
        """Rename an unreadable job file out of the way; return its path."""
        src = self.job_path(job_id)
        dst = src + CORRUPT_SUFFIX
        os.rename(src, dst)
        fsync_dir(self.queue_dir)
        return dst

    def archive_jobs(self, job_ids):
        """Move job files into the archive; return the ids moved.

        The directories are synced once for the whole batch.
        """
        # a job file must be flushed in place before it leaves: the
        # journal would otherwise bring it back after a crash
        self.journal.checkpoint()
        moved = []
        touched = set()
        for job_id in job_ids:
            dst = self.archived_job_path(job_id)
            target_dir = os.path.dirname(dst)
            if target_dir not in touched:
                os.makedirs(target_dir, mode=DIR_MODE, exist_ok=True)
                touched.add(target_dir)
            try:
                os.rename(self.job_path(job_id), dst)
            except FileNotFoundError:
                continue
            moved.append(job_id)
        if moved:
            for directory in touched | {self.queue_dir}:
                fsync_dir(directory)
        return moved

    # -- drain flag
    def read_drain_flag(self):
        return os.path.exists(self.drain_file)

    def write_drain_flag(self, drained):
        if drained:
            atomic_write(self.drain_file, b"", FILE_MODE)
        else:
            try:
                os.unlink(self.drain_file)
            except FileNotFoundError:
                return
            fsync_dir(self.queue_dir)
