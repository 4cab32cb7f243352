"""A file that blocks its reader like a hung disk, without FUSE.

A FIFO that we hold open for reading and writing: a reader's ``open()``
returns (so the reader shows it among its open files, see
:func:`opened_by`) and its ``read()`` waits until :meth:`StalledFile.release`.
Used by the node daemon's stall test and benchmark.
"""

import os

__all__ = ["StalledFile", "opened_by"]


class StalledFile(object):
    """A FIFO at ``path`` that stalls its readers until released."""

    def __init__(self, path, hold=True):
        self.path = path
        os.mkfifo(path)
        self.fd = None
        if hold:
            self.hold()

    def hold(self):
        """From now on a reader's open() returns and its read() waits."""
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)

    def release(self, data=b""):
        """Give the reader ``data`` and end of file."""
        if self.fd is not None:
            if data:
                os.write(self.fd, data)
            os.close(self.fd)
            self.fd = None
        # a reader still in open() (it came after the close): unblock it
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return      # ENXIO: nobody waits in open()
        os.close(fd)


def opened_by(pid, path):
    """Whether process ``pid`` has ``path`` open (Linux /proc)."""
    fd_dir = "/proc/%d/fd" % pid
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(os.path.join(fd_dir, fd)) == path:
                return True
        except OSError:
            continue        # closed while we looked
    return False
