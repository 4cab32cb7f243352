"""Replace files atomically without freeing and allocating inodes.

Replacing a file the usual way (write a new temporary file, rename it over
the old one) allocates an inode and frees one per write.  For the job queue,
which rewrites small files thousands of times a second, that churn is most
of the cost: on ext4 without a journal each allocation scans past every
inode freed in the last half minute, so the cost grows with the write rate.

:class:`RecyclingWriter` keeps a few spare files in the directory instead.
A write fills the oldest spare (overwriting it in place, no allocation) and
swaps it with the target in one ``renameat2(RENAME_EXCHANGE)``: readers
opening the target see the old or the new content, never a mixture, and
the old inode becomes the newest spare.  A spare is filled again only
after ``reserve`` other writes, so a reader that opened the old file just
before the swap has that long to read it.  Where the kernel or the file
system cannot exchange names, the spare is renamed over the target (the
usual way).

Nothing is flushed here: callers that need durability (the job queue's
journal) flush the files and the directory themselves.
"""

import collections
import ctypes
import errno
import os

from ganeti.utils.report import to_twisted_log

__all__ = ["RecyclingWriter", "exchange", "SPARE_PREFIX"]

#: the spare files' names: ``.spare.N`` (hidden, like temporary files)
SPARE_PREFIX = ".spare."
#: spares kept before the oldest one is reused
DEFAULT_RESERVE = 16

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2

try:
    _renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
except (AttributeError, OSError):     # libc without renameat2 (glibc < 2.28)
    _renameat2 = None
else:
    _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                           ctypes.c_char_p, ctypes.c_uint]
    _renameat2.restype = ctypes.c_int


def exchange(a, b):
    """Swap the names ``a`` and ``b`` atomically (both must exist).

    Raises OSError: ENOENT if one is missing; ENOSYS, EINVAL or ENOTSUP
    where the kernel, libc or file system cannot exchange names."""
    if _renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available", a)
    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b),
                  _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), a, None, b)


#: what opening a spare that is not a regular file fails with
_NOT_A_FILE = (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.ENOENT)

#: errors meaning "no exchange here": use rename from then on
_NO_EXCHANGE = (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EPERM)


def _empty(path):
    """Truncate ``path`` if it is a regular file (never through a link)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        if err.errno in _NOT_A_FILE:
            return
        raise
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


class RecyclingWriter(object):
    """Writes whole files in ``directory`` through a pool of spare files.

    Not thread-safe: one thread (the job queue's writer) uses it.
    """

    def __init__(self, directory, mode, reserve=DEFAULT_RESERVE,
                 report=to_twisted_log):
        self.directory = directory
        #: where warnings go (see :mod:`ganeti.utils.report`)
        self.report = report
        self.mode = mode
        self.reserve = reserve
        self._spares = collections.deque()   # oldest first
        self._next = 0
        self._can_exchange = _renameat2 is not None
        #: writes done by exchanging names (no inode freed or allocated)
        self.exchanged = 0

    def adopt(self):
        """Take the spares a previous run left in the directory, emptied:
        what they held (old contents of files) is of no use to anybody,
        and was perhaps written by a version that kept more in them."""
        numbers = []
        for name in os.listdir(self.directory):
            if name.startswith(SPARE_PREFIX):
                suffix = name[len(SPARE_PREFIX):]
                if suffix.isdigit():
                    numbers.append(int(suffix))
        for number in sorted(numbers):
            spare = self._spare_path(number)
            _empty(spare)
            self._spares.append(spare)
        self._next = max(numbers, default=-1) + 1
        return len(numbers)

    def write(self, path, content, new=False):
        """Replace ``path`` with ``content`` (bytes); ``new``: the caller
        knows ``path`` does not exist (it is created)."""
        spare = self._fill_spare(content)
        if self._can_exchange and not new:
            try:
                exchange(spare, path)
            except OSError as err:
                if err.errno in _NO_EXCHANGE:
                    self._can_exchange = False
                elif err.errno != errno.ENOENT:
                    self._spares.appendleft(spare)
                    raise
                # ENOENT: a new file after all; the spare becomes it
            else:
                # the old inode, with the old content, is a spare now
                self.exchanged += 1
                self._spares.append(spare)
                return
        try:
            os.rename(spare, path)
        except BaseException:
            self._spares.appendleft(spare)
            raise

    def _fill_spare(self, content):
        """A spare holding ``content``."""
        spare, fd = self._open_spare()
        try:
            view = memoryview(content)
            offset = 0
            while offset < len(view):
                offset += os.pwrite(fd, view[offset:], offset)
            os.ftruncate(fd, len(view))
        except BaseException:
            # its content is unknown now: no matter for a spare
            self._spares.appendleft(spare)
            raise
        finally:
            os.close(fd)
        return spare

    def _open_spare(self):
        """(path, fd open for writing) of the oldest spare, or of a new
        one while the pool is below its reserve."""
        while len(self._spares) > self.reserve:
            spare = self._spares.popleft()
            try:
                # never through a link: a spare is what a target was
                return spare, os.open(spare, os.O_WRONLY | os.O_NOFOLLOW |
                                      os.O_NONBLOCK)
            except OSError as err:
                if err.errno not in _NOT_A_FILE:
                    self._spares.appendleft(spare)
                    raise
                # Not a regular file: what a target was when something
                # else put a directory or a link in its place.  Never
                # written through; the next spare is taken.
                self.report("warn", "Not using %s again: %s" % (spare, err))
        # allocate: the pool grows to its reserve, then stays there
        number = self._next
        self._next += 1
        spare = self._spare_path(number)
        fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                     os.O_NOFOLLOW, self.mode)
        try:
            os.fchmod(fd, self.mode)      # whatever the umask
        except BaseException:
            os.close(fd)
            raise
        return spare, fd

    def _spare_path(self, number):
        return os.path.join(self.directory, "%s%d" % (SPARE_PREFIX, number))
