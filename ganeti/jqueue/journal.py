"""Group commit of the job queue's files through a journal.

Every state change of a job must be on disk before anyone hears of it (a
job id is answered, an opcode told to go on, a waiter told the job ended).
Writing each job file with its own fsync costs two flushes per change;
jobs changing at about the same time (a batch, see
:meth:`ganeti.utils.writer.IFileWriter.commit`) instead share one:

1. the batch's files are appended to ``queue/journal`` as records (name,
   length, CRC-32, content) and the journal is flushed once (fdatasync):
   from here on the changes survive a crash, and are acknowledged;
2. right after the batch's callers were answered, the job files
   themselves are written, each replaced as a whole (readers such as
   Ganeti's tools see old or new, see :mod:`ganeti.utils.recycled`), but
   without a flush of their own.  The master answers queries from memory;
   a reader of the queue directory may find a file a moment older than
   the journal, or a new job's file a moment after its id was answered;
3. a checkpoint, once the journal has grown past a limit (and before jobs
   are archived, and when the queue stops), flushes the files written
   since the last one and their directory, then empties the journal.  A
   few files are flushed each on its own (all at once, so the file system
   commits them together); from :data:`SYNCFS_FILES` files on, where the
   system has it (Linux), one ``syncfs`` of the queue's file system
   replaces their thousands of flushes.

After a crash, :meth:`Journal.recover` (before the queue directory is
read) writes every file named in the journal with its last complete
record, durably, and empties the journal; a record cut short by the
crash was never acknowledged and is ignored.  The job files stay in
Ganeti's format throughout; only a file changed since the last
checkpoint may be older on disk than its journal record until the next
start of the master daemon.
"""

import errno
import os
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor, wait as futures_wait

from ganeti.utils.io import atomic_write_many, fsync_dir, syncfs
from ganeti.utils.recycled import RecyclingWriter
from ganeti.utils.report import to_twisted_log

JOURNAL_NAME = "journal"
#: a journal whose checkpoint is under way (see Journal.rotate)
OLD_SUFFIX = ".old"
#: a checkpoint once the journal is this long
CHECKPOINT_BYTES = 4 * 1024 * 1024
#: threads flushing files at a checkpoint: flushes issued together are
#: committed together by the file system
FLUSH_THREADS = 16
#: from this many files on, a checkpoint flushes the whole file system at
#: once (syncfs) instead of each file: the cost of a flush per file (and
#: of the threads making them) grows with the job rate, a syncfs's only
#: with what else is waiting to be written on that file system
SYNCFS_FILES = 64

_MAGIC = b"GJ1"
# magic, name length, data length, CRC-32 of name and data
_HEADER = struct.Struct(">3sHII")


def encode_record(name, data):
    name_b = name.encode("utf-8")
    crc = zlib.crc32(data, zlib.crc32(name_b))
    return _HEADER.pack(_MAGIC, len(name_b), len(data), crc) + name_b + data


def decode_records(raw):
    """(name, data) of each complete record in order, and the offset where
    the complete records end (a torn or garbled tail is not returned)."""
    records = []
    offset = 0
    while offset + _HEADER.size <= len(raw):
        magic, name_len, data_len, crc = _HEADER.unpack_from(raw, offset)
        start = offset + _HEADER.size
        end = start + name_len + data_len
        if magic != _MAGIC or end > len(raw):
            break
        name_b = bytes(raw[start:start + name_len])
        data = bytes(raw[start + name_len:end])
        if zlib.crc32(data, zlib.crc32(name_b)) != crc:
            break
        try:
            name = name_b.decode("utf-8")
        except UnicodeDecodeError:
            break
        records.append((name, data))
        offset = end
    return records, offset


class Journal(object):
    """The journal of one queue directory; used by one thread at a time:
    the journal helper's, or a writer thread (and by :meth:`recover`
    before the queue runs)."""

    def __init__(self, directory, mode, checkpoint_bytes=CHECKPOINT_BYTES,
                 report=to_twisted_log):
        self.directory = directory
        #: where messages go (see :mod:`ganeti.utils.report`)
        self.report = report
        self.path = os.path.join(directory, JOURNAL_NAME)
        self.old_path = self.path + OLD_SUFFIX
        self.mode = mode
        self.checkpoint_bytes = checkpoint_bytes
        self._fd = None
        self._size = 0
        self._dirty = set()    # files written since the last checkpoint
        self._behind = {}      # committed, not yet written in place
        self._flushing = set()  # being flushed by a rotation
        self._rotation = None   # its Future
        #: checkpoint by rotation (see :meth:`rotate`): the journal helper
        self.background = False
        self._pool = None
        self._can_syncfs = True
        # files are replaced by swapping in a spare: no inode churn
        self._files = RecyclingWriter(directory, mode, report=report)
        #: counters for the benchmark and tests
        self.commits = 0
        self.checkpoints = 0
        self.syncfs_calls = 0

    # -- the writer thread
    def commit(self, files):
        """Make ``files`` (path in the queue directory -> bytes) durable
        with one flush; returns the function that writes them in place
        (the writer calls it after answering, see
        :meth:`ganeti.utils.writer.IFileWriter.commit`)."""
        for path in files:
            if os.path.dirname(path) != self.directory:
                raise ValueError("%s is not in the queue directory %s"
                                 % (path, self.directory))
        fd = self._open()
        data = b"".join(encode_record(os.path.basename(path), content)
                        for path, content in files.items())
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
            os.fdatasync(fd)
        except BaseException:
            # no torn records in the middle of the journal: the next
            # commit's would be lost behind them at recovery
            try:
                os.ftruncate(fd, self._size)
            except OSError:
                pass
            raise
        self._size += len(data)
        self.commits += 1
        # written in place after the callers were answered (a later
        # commit's content of a file wins): the journal has them already
        self._behind.update(files)
        return self.write_behind

    def write_behind(self, limit=None):
        """Write the files committed since the last call in place (no
        flush of their own: the journal has them), or only the ``limit``
        oldest of them; once all are written, checkpoint if the journal
        has grown past its limit (with ``background``, while further
        commits go on: see :meth:`rotate`).  Returns how many files are
        still to be written."""
        self._write_pending(limit)
        if not self._behind and self._size >= self.checkpoint_bytes:
            if self.background:
                self.rotate()
            else:
                self.checkpoint()
        return len(self._behind)

    @property
    def behind(self):
        """How many committed files are not written in place yet."""
        return len(self._behind)

    def rotate(self):
        """Start a checkpoint that does not hold up commits: the journal
        becomes ``journal.old`` and a new one takes the next commits; a
        thread flushes the files written so far, then removes the old
        journal.  Nothing happens while an earlier one still runs."""
        if self._rotation is not None:
            if not self._rotation.done():
                return
            self._rotation_done()
        if os.path.exists(self.old_path):
            # an earlier one failed: the next full checkpoint repairs it
            return
        self._write_pending()
        os.close(self._open())
        self._fd = None
        os.rename(self.path, self.old_path)
        self._open()            # new, and the renames made durable
        self._flushing, self._dirty = self._dirty, set()
        self._rotation = self._flush_pool().submit(
            self._finish_rotation, sorted(self._flushing))

    def _finish_rotation(self, paths):
        # a thread of its own: flushes what the old journal holds, then
        # drops it
        self._flush_files(paths)
        os.unlink(self.old_path)
        fsync_dir(self.directory)

    def _flush_files(self, paths):
        """Make ``paths`` (files written in place) and the directory
        durable."""
        if len(paths) >= SYNCFS_FILES and self._can_syncfs:
            try:
                syncfs(self.directory)
                self.syncfs_calls += 1
                return
            except OSError as err:
                if err.errno != errno.ENOSYS:
                    raise
                self._can_syncfs = False
        for error in self._flush_pool().map(_flush_file, paths):
            if error is not None:
                raise error
        fsync_dir(self.directory)

    def _rotation_done(self):
        rotation, self._rotation = self._rotation, None
        if rotation.exception() is None:
            self._flushing = set()
            self.checkpoints += 1
        else:
            self.report("error", "Job queue journal: a checkpoint failed:"
                        " %s" % (rotation.exception(),))

    def checkpoint(self):
        """Flush the files written since the last checkpoint, then empty
        the journal: afterwards the files alone hold every change."""
        if self._rotation is not None:
            futures_wait([self._rotation])
            self._rotation_done()
        self._write_pending()
        paths = self._dirty | self._flushing
        if paths:
            self._flush_files(sorted(paths))
            self._dirty.clear()
            self._flushing = set()
        if self._size:
            os.ftruncate(self._open(), 0)
            os.fsync(self._fd)
            self._size = 0
            self.checkpoints += 1
        if os.path.exists(self.old_path):
            os.unlink(self.old_path)
            fsync_dir(self.directory)

    def _flush_pool(self):
        if self._pool is None:
            # one more than the flushes: a rotation's thread waits on them
            self._pool = ThreadPoolExecutor(
                FLUSH_THREADS + 1, thread_name_prefix="queue-flush")
        return self._pool

    def _write_pending(self, limit=None):
        if limit is None or limit >= len(self._behind):
            items, self._behind = list(self._behind.items()), {}
        else:
            # the oldest first; the rest stay (a newer commit's content of
            # one of them still replaces it)
            items = []
            for path in self._behind:
                items.append((path, self._behind[path]))
                if len(items) == limit:
                    break
            for path, _ in items:
                del self._behind[path]
        for index, (path, content) in enumerate(items):
            try:
                self._files.write(path, content)
            except BaseException:
                # still owed: the journal must not be emptied before these
                # files are in place (a newer commit's content wins)
                rest = dict(items[index:])
                rest.update(self._behind)
                self._behind = rest
                raise
            self._dirty.add(path)

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def adopt_spares(self):
        """Reuse the spare files a previous run left (see
        :mod:`ganeti.utils.recycled`)."""
        return self._files.adopt()

    # -- before the queue runs
    def recover(self):
        """Write what the journal holds into the files, durably; empty it.

        Returns the names of the files written."""
        self.adopt_spares()
        records = []
        found_any = False
        # a checkpoint's journal the crash cut off first, then the newer
        for path in (self.old_path, self.path):
            try:
                with open(path, "rb") as f:
                    raw = f.read()
            except FileNotFoundError:
                continue
            found_any = True
            found, end = decode_records(raw)
            records += found
            if end < len(raw):
                self.report("warn", "Job queue journal: ignoring %d bytes"
                            " of an incomplete last write" % (len(raw) - end))
        if not found_any:
            return []
        latest = {}
        for name, data in records:
            if "/" in name or name.startswith("."):
                self.report("warn", "Job queue journal: ignoring a record"
                            " for %s" % (name,))
                continue
            latest[name] = data
        if latest:
            atomic_write_many({os.path.join(self.directory, name): data
                               for name, data in latest.items()}, self.mode)
        fd = self._open()
        os.ftruncate(fd, 0)
        os.fsync(fd)
        self._size = 0
        if os.path.exists(self.old_path):
            os.unlink(self.old_path)
            fsync_dir(self.directory)
        if latest:
            self.report("info", "Job queue journal: %d file(s) restored"
                        " after an unclean stop" % len(latest))
        return sorted(latest)

    # -- helpers
    def _open(self):
        if self._fd is None:
            new = not os.path.exists(self.path)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT |
                               os.O_APPEND, self.mode)
            st = os.fstat(self._fd)
            if st.st_mode & 0o7777 != self.mode:
                # the umask, or an older version's mode
                os.fchmod(self._fd, self.mode)
            self._size = st.st_size
            if new:
                fsync_dir(self.directory)
        return self._fd

class WriterJournal(object):
    """A job store's journal written in this process by ``writer`` (see
    :mod:`ganeti.utils.writer`): what the job queue commits through."""

    def __init__(self, store, writer):
        self._store = store
        self._writer = writer

    def commit(self, path, data):
        """A Deferred firing once ``data`` for ``path`` is durable (group
        commit: items committed together share a flush)."""
        return self._writer.commit(self._store.write_files, path, data)

    def checkpoint(self):
        """A Deferred firing once every file is in place and flushed and
        the journal empty."""
        return self._writer.call(self._store.checkpoint)

    def archived(self, job_ids):
        """The queue moved ``job_ids`` into the archive: nothing to do here
        (a wrapper copying the queue elsewhere does more, see
        :mod:`ganeti.jqueue.replication`)."""
        return _done()

    def drain_flag_changed(self, flag):
        """The queue's drain flag file changed: nothing to do here."""
        return _done()


def _done():
    # Twisted only where the master uses this: the journal helper imports
    # this module without it
    from twisted.internet import defer
    return defer.succeed(None)


def _flush_file(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None      # archived or removed since: nothing to flush
    except OSError as err:
        return err
    try:
        os.fsync(fd)
    except OSError as err:
        return err
    finally:
        os.close(fd)
    return None
