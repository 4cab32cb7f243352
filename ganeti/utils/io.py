"""Durable file writes: what survives a crash is the old or the new file.

Every persistent file of the project (config.data, job files, ssconf, keys,
certificates) is written through :func:`atomic_write`: a temporary file in
the same directory, fsync, rename over the target, fsync of the directory.
"""

import ctypes
import errno
import os
import tempfile

BACKUP_SUFFIX = ".bak"

try:
    _syncfs = ctypes.CDLL(None, use_errno=True).syncfs
except (AttributeError, OSError):      # not Linux, or an old libc
    _syncfs = None
else:
    _syncfs.argtypes = [ctypes.c_int]
    _syncfs.restype = ctypes.c_int


def syncfs(path):
    """Flush everything written to the file system holding ``path``
    (files, their data, directories) with one call (Linux's syncfs(2));
    cheaper than an fsync per file when many files were written.

    Raises OSError (ENOSYS where the call does not exist; the file
    system's write-back error otherwise)."""
    if _syncfs is None:
        raise OSError(errno.ENOSYS, "syncfs is not available", path)
    fd = os.open(path, os.O_RDONLY)
    try:
        if _syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
    finally:
        os.close(fd)


def fsync_dir(path):
    """Make a rename or unlink inside directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path, data, mode=0o600, backup=False):
    """Write ``data`` (bytes) to ``path`` so that readers see old or new.

    With ``backup``, the current file (if any) is kept as ``path + .bak``.
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory,
                               prefix=".%s." % os.path.basename(path))
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if backup and os.path.exists(path):
            bak = path + BACKUP_SUFFIX
            # A hard link is atomic and costs no copy; replace any old backup.
            bak_tmp = bak + ".new"
            if os.path.lexists(bak_tmp):
                os.unlink(bak_tmp)
            os.link(path, bak_tmp)
            os.rename(bak_tmp, bak)
        os.rename(tmp, path)
        tmp = None
        fsync_dir(directory)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_many(files, mode=0o600):
    """Write several files, each as :func:`atomic_write` would, sharing the
    directory syncs: ``files`` maps path -> bytes.

    Every file is written to a temporary file and fsync'ed, then all are
    renamed into place and each directory is fsync'ed once.  A crash in
    between leaves each file old or new (never torn); which of them are
    new is only known once this returns.
    """
    pending = []     # (temporary path, final path)
    try:
        for path, data in files.items():
            directory = os.path.dirname(os.path.abspath(path))
            fd, tmp = tempfile.mkstemp(
                dir=directory, prefix=".%s." % os.path.basename(path))
            pending.append((tmp, path))
            try:
                os.fchmod(fd, mode)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
        directories = set()
        while pending:
            tmp, path = pending.pop(0)
            os.rename(tmp, path)
            directories.add(os.path.dirname(os.path.abspath(path)))
        for directory in sorted(directories):
            fsync_dir(directory)
    finally:
        for tmp, _ in pending:
            try:
                os.unlink(tmp)
            except OSError:
                pass
