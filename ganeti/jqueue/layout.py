"""The queue directory's names, modes and lock file, shared by the master
daemon's :mod:`ganeti.jqueue.store` and the copy of the queue a master
candidate keeps (:mod:`ganeti.server.noded.queue_replica`).

Imports nothing of the job queue itself: the node daemon loads it without
the opcodes.
"""

import os
import re

#: the queue directory's standard path (as on a node installed at /)
STANDARD_DIR = "/var/lib/ganeti/queue"

#: every file of the queue directory (the journal helper is given it too)
FILE_MODE = 0o600
#: the queue directory and the archive's directories
DIR_MODE = 0o700
JOBS_PER_ARCHIVE_DIR = 10000

LOCK_FILE = "lock"
VERSION_FILE = "version"
SERIAL_FILE = "serial"
DRAIN_FILE = "drain"
ARCHIVE_DIR = "archive"

JOB_FILE_RE = re.compile(r"^job-(\d+)$")

#: what the lock file starts with while a node daemon writes its copy of
#: another master's queue into this directory (it holds the lock for the
#: moments of one write); a master daemon starting then waits for it
REPLICA_MARK = b"queue-replica"


def job_file(job_id):
    """A job's file name in the queue directory."""
    return "job-%d" % job_id


def archived_job_file(job_id):
    """A job's file in the archive, relative to the queue directory."""
    return os.path.join(ARCHIVE_DIR, str(job_id // JOBS_PER_ARCHIVE_DIR),
                        job_file(job_id))


def standard_path(name):
    """The standard path of ``name`` (relative to the queue directory): how
    the master names a queue file to a node."""
    return "%s/%s" % (STANDARD_DIR, name)


def lock_holder(fd):
    """The pid holding the flock on ``fd``'s file, or None if unknown.

    Linux's /proc/locks names it; the pid the holder wrote into the file
    covers the cases where /proc/locks cannot (no /proc, a device number
    that stat reports differently, a holder in another pid namespace).
    """
    st = os.fstat(fd)
    wanted = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev),
                               st.st_ino)
    try:
        with open("/proc/locks") as f:
            for line in f:
                # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF";
                # processes waiting for a lock have "->" after the number
                fields = line.split()
                if (len(fields) > 5 and fields[1] == "FLOCK"
                        and fields[5] == wanted and fields[4].isdigit()
                        and int(fields[4]) > 0):
                    return int(fields[4])
    except OSError:
        pass
    try:
        pid = int(os.pread(fd, 32, 0).strip() or 0)
    except (OSError, ValueError):
        return None
    return pid if pid > 0 else None


def replica_writing(fd):
    """Whether the lock file ``fd`` says a node daemon writing a copy of
    the queue holds it."""
    try:
        return os.pread(fd, len(REPLICA_MARK), 0) == REPLICA_MARK
    except OSError:
        return False
