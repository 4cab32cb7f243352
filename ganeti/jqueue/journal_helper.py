"""The job queue's journal, written by a helper process.

The master daemon is one Python process: a thread writing job files
competes with the reactor for the interpreter lock at every system call,
which makes each small file write cost many times its own time and delays
the jobs waiting for it.  The helper (``python -m
ganeti.jqueue.journal_helper QUEUE_DIR MODE``, started by
:class:`JournalProcess`) does the queue's journal work in a process of its
own (see :mod:`ganeti.jqueue.journal`): appending and flushing the
journal, writing the job files in place, checkpoints.  The master sends
journal records over the helper's stdin and hears on its stdout once they
are durable.

Frames, both ways: kind (one byte), request number, payload length
(unsigned 32-bit, big-endian), payload.

====  ============================================  ========================
kind  master -> helper                              helper -> master
====  ============================================  ========================
C     commit: journal records (name, content)       --
P     checkpoint                                    --
K     --                                            request done
E     --                                            request failed: message
====  ============================================  ========================

The master's end is :class:`ganeti.jqueue.journal_process.JournalProcess`.
This module imports neither Twisted nor the rest of the job queue (see
:mod:`ganeti.jqueue`): the master's first jobs wait for the helper to
start.

The helper answers requests in order.  Commits that arrive together share
one flush.  It holds the queue's lock with the master (the lock file's
descriptor is its fd 3), so no new master reads the queue while it still
writes; it ends when its stdin closes (the master stopped or died),
without starting more work.
"""

import os
import select
import struct
import sys

from ganeti.jqueue.journal import Journal, decode_records
from ganeti.utils.report import to_stderr

FRAME = struct.Struct(">cII")
COMMIT, CHECKPOINT, DONE, FAILED = b"C", b"P", b"K", b"E"
#: fd of the queue's lock file in the helper
LOCK_FD = 3
#: files written in place between two looks for commits
WRITE_SLICE = 8
#: files waiting to be written in place that stop commits being taken
#: first (a steady flood of commits still gets its files written)
MAX_BEHIND = 1024


def parse_frames(buf):
    """(kind, number, payload) of each complete frame at the start of
    ``buf`` (a bytearray), which loses them."""
    frames = []
    offset = 0
    while offset + FRAME.size <= len(buf):
        kind, number, length = FRAME.unpack_from(buf, offset)
        end = offset + FRAME.size + length
        if end > len(buf):
            break
        frames.append((kind, number, bytes(buf[offset + FRAME.size:end])))
        offset = end
    del buf[:offset]
    return frames


def parse_frames_ready(buf):
    """Whether ``buf`` starts with a complete frame."""
    if len(buf) < FRAME.size:
        return False
    return FRAME.size + FRAME.unpack_from(buf, 0)[2] <= len(buf)


def frame(kind, number, payload=b""):
    return FRAME.pack(kind, number, len(payload)) + payload


# ----------------------------------------------------------------------
# The helper

class _Helper(object):

    def __init__(self, journal, rfd, wfd):
        self.journal = journal
        self.rfd = rfd
        self.wfd = wfd
        self.buf = bytearray()
        self.eof = False
        #: the last try to write files in place failed
        self.behind_failed = False
        self._failure_reported = False

    def _read(self, block):
        while not self.eof:
            if not block and not select.select([self.rfd], [], [], 0)[0]:
                return
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                self.eof = True
                return
            self.buf += chunk
            block = False

    def serve(self):
        while True:
            frames = parse_frames(self.buf)
            if not frames:
                if self.eof:
                    return
                if self.journal.behind and not self.behind_failed:
                    # No commit waiting: catch up on the files in place, a
                    # few at a time, looking for commits in between (they
                    # come first: jobs wait for them, and a file committed
                    # again meanwhile is written once).
                    self._read(block=False)
                    if not parse_frames_ready(self.buf):
                        self._write_behind(WRITE_SLICE)
                    continue
                self._read(block=True)
                continue
            # whatever else has arrived joins this round (group commit)
            self._read(block=False)
            frames += parse_frames(self.buf)
            self._handle(frames)
            if self.eof:
                # the master is gone: no more work (its successor's
                # recovery replays the journal)
                return
            # after a failure, the files are tried again with each commit
            self.behind_failed = False
            if self.journal.behind >= MAX_BEHIND:
                # never busy enough to fall further behind than this
                self._write_behind()

    def _write_behind(self, limit=None):
        try:
            self.journal.write_behind(limit)
        except OSError as err:
            # A full or failing disk: the journal keeps every change (a
            # restart writes them), the files wait for the next commit.
            if not self._failure_reported:
                self.journal.report(
                    "error", "Job queue journal: job files could not be"
                    " written in place: %s (the journal has the changes;"
                    " trying again with each commit)" % (err,))
                self._failure_reported = True
            self.behind_failed = True
        else:
            if self._failure_reported:
                self.journal.report("info", "Job queue journal: job files"
                                    " written in place again")
            self._failure_reported = False

    def _handle(self, frames):
        replies = []
        index = 0
        while index < len(frames):
            kind, number, payload = frames[index]
            if kind == COMMIT:
                # consecutive commits share one flush
                group, files = [], {}
                while index < len(frames) and frames[index][0] == COMMIT:
                    number, payload = frames[index][1:]
                    index += 1
                    try:
                        files.update(self._files(payload))
                    except ValueError as err:
                        replies.append(frame(FAILED, number,
                                             str(err).encode("utf-8")))
                        continue
                    group.append(number)
                if group:
                    replies += self._answer(group, self.journal.commit,
                                            files)
                continue
            index += 1
            if kind == CHECKPOINT:
                replies += self._answer([number], self.journal.checkpoint)
            else:
                replies.append(frame(FAILED, number, b"unknown request %r"
                                     % kind))
        data = memoryview(b"".join(replies))
        while data:
            data = data[os.write(self.wfd, data):]

    def _files(self, payload):
        records, end = decode_records(payload)
        if end != len(payload):
            raise ValueError("garbled commit from the master")
        return {os.path.join(self.journal.directory, name): content
                for name, content in records}

    @staticmethod
    def _answer(numbers, fn, *args):
        try:
            fn(*args)
        except Exception as err:
            text = ("%s" % (err,)).encode("utf-8", "replace")
            return [frame(FAILED, n, text) for n in numbers]
        return [frame(DONE, n) for n in numbers]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        sys.stderr.write("usage: journal_helper QUEUE_DIR MODE(octal)\n")
        return 2
    directory, mode = argv[0], int(argv[1], 8)
    # the master daemon logs what the helper writes on stderr
    journal = Journal(directory, mode, report=to_stderr)
    # checkpoints in a thread: commits go on meanwhile
    journal.background = True
    # the spares a previous run left (the master recovered the journal)
    journal.adopt_spares()
    try:
        _Helper(journal, 0, 1).serve()
    except BrokenPipeError:
        pass            # the master is gone
    finally:
        journal.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
