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

from twisted.application import service
from twisted.internet import defer, error, protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti import errors
from ganeti.jqueue.journal import Journal, decode_records, encode_record

log = Logger()

FRAME = struct.Struct(">cII")
COMMIT, CHECKPOINT, DONE, FAILED = b"C", b"P", b"K", b"E"
#: fd of the queue's lock file in the helper
LOCK_FD = 3
#: seconds the master waits for the helper to end when it stops
STOP_TIMEOUT = 60.0


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
            self.journal.write_behind()

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
    journal = Journal(directory, mode)
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


# ----------------------------------------------------------------------
# The master's side

class _HelperProtocol(protocol.ProcessProtocol):

    def __init__(self, owner):
        self.owner = owner
        self.buf = bytearray()
        self.ended = defer.Deferred()

    def outReceived(self, data):
        self.buf += data
        for kind, number, payload in parse_frames(self.buf):
            self.owner._answered(kind, number, payload)

    def errReceived(self, data):
        for line in data.decode("utf-8", "replace").splitlines():
            if line.strip():
                log.warn("job queue journal helper: {line}", line=line)

    def processEnded(self, reason):
        self.owner._ended(self, reason)
        self.ended.callback(None)


class JournalProcess(service.Service):
    """The master's end of the helper: :meth:`commit` and
    :meth:`checkpoint` as the job queue's journal (see
    :class:`ganeti.jqueue.queue.JobQueue`)."""

    name = "journal"

    def __init__(self, reactor, store, mode, executable=None):
        self._reactor = reactor
        self._store = store
        self._mode = mode
        self._executable = executable or sys.executable
        self._proto = None
        self._next = 0
        self._waiting = {}       # request number -> [Deferred]
        self._pending = {}       # name -> content, for the next commit
        self._pending_waiters = []
        self._flush_call = None
        self._stopped = False
        #: helper processes started (one, unless one ended early)
        self.started_helpers = 0

    def startService(self):
        service.Service.startService(self)
        # ready before the first job arrives (the queue's lock is held by
        # now: the lock's start step comes first)
        if self._proto is None and self._store.lock_fd is not None:
            try:
                self._spawn()
            except Exception:
                log.failure("The job queue's journal helper cannot start")

    # -- the journal
    def commit(self, path, data):
        """A Deferred firing once ``data`` for ``path`` (a file of the
        queue directory) is durable; commits made in the same reactor
        turn share a request, and requests arriving together a flush."""
        if os.path.dirname(path) != self._store.queue_dir:
            return defer.fail(ValueError("%s is not in the queue directory"
                                         " %s" % (path,
                                                  self._store.queue_dir)))
        d = defer.Deferred()
        self._pending[os.path.basename(path)] = data
        self._pending_waiters.append(d)
        if self._flush_call is None:
            self._flush_call = self._reactor.callLater(0, self._flush)
        return d

    def checkpoint(self):
        """A Deferred firing once every file is in place and flushed and
        the journal empty."""
        self._flush()
        return self._request(CHECKPOINT, b"")

    def _flush(self):
        if self._flush_call is not None:
            if self._flush_call.active():
                self._flush_call.cancel()
            self._flush_call = None
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        waiters, self._pending_waiters = self._pending_waiters, []
        payload = b"".join(encode_record(name, data)
                           for name, data in pending.items())
        done = self._request(COMMIT, payload)

        def tell(result):
            for d in waiters:
                if isinstance(result, Failure):
                    d.errback(result)
                else:
                    d.callback(None)
        done.addBoth(tell)

    def _request(self, kind, payload):
        if self._proto is None:
            if self._stopped:
                return defer.fail(errors.JobQueueError(
                    "The job queue's journal is closed (the master daemon"
                    " is stopping)"))
            try:
                self._spawn()
            except Exception as err:
                return defer.fail(errors.JobQueueError(
                    "The job queue's journal helper cannot start: %s" % err))
        number = self._next
        self._next = (self._next + 1) % (1 << 32)
        d = defer.Deferred()
        self._waiting[number] = (self._proto, d)
        self._proto.transport.write(frame(kind, number, payload))
        return d

    def _answered(self, kind, number, payload):
        entry = self._waiting.pop(number, None)
        if entry is None:
            log.error("job queue journal helper: answer to unknown request"
                      " {n}", n=number)
            return
        d = entry[1]
        if kind == DONE:
            d.callback(None)
        else:
            d.errback(errors.JobQueueError(
                "The job queue's journal could not be written: %s"
                % payload.decode("utf-8", "replace")))

    # -- the process
    def _spawn(self):
        lock_fd = self._store.lock_fd
        if lock_fd is None:
            raise errors.ProgrammerError("the job queue is not locked")
        proto = _HelperProtocol(self)
        self._reactor.spawnProcess(
            proto, self._executable,
            [self._executable, "-m", "ganeti.jqueue.journal_helper",
             self._store.queue_dir, "%o" % self._mode],
            env=dict(os.environ),
            childFDs={0: "w", 1: "r", 2: "r", LOCK_FD: lock_fd})
        self._proto = proto
        self.started_helpers += 1

    def _ended(self, proto, reason):
        if self._proto is proto:
            self._proto = None
        lost = [n for n, (p, _) in self._waiting.items() if p is proto]
        if lost or not self._stopped:
            log.error("The job queue's journal helper ended: {reason}",
                      reason=reason.getErrorMessage())
        err = errors.JobQueueError("The job queue's journal helper ended"
                                   " (%s)" % reason.getErrorMessage())
        for number in lost:
            self._waiting.pop(number)[1].errback(err)

    def stopService(self):
        service.Service.stopService(self)
        self._flush()
        if self._proto is not None:
            # a clean stop leaves the files complete and the journal empty
            self._request(CHECKPOINT, b"").addErrback(
                lambda f: log.failure("The job queue's journal could not be"
                                      " checkpointed", f))
        self._stopped = True
        proto = self._proto
        if proto is None:
            return defer.succeed(None)
        # the last answers first, then the end of the helper
        waiting = [d for p, d in self._waiting.values() if p is proto]
        d = defer.DeferredList(waiting, consumeErrors=True)

        def close(_):
            proto.transport.closeStdin()
            timer = self._reactor.callLater(STOP_TIMEOUT, _kill, proto)
            return proto.ended.addBoth(
                lambda r: timer.cancel() if timer.active() else None)
        return d.addCallback(close)


def _kill(proto):
    try:
        proto.transport.signalProcess("KILL")
    except error.ProcessExitedAlready:
        pass


if __name__ == "__main__":
    sys.exit(main())
