"""The master daemon's end of the job queue's journal helper (see
:mod:`ganeti.jqueue.journal_helper`): starts the helper, sends it the
journal records of each reactor turn, and fires their Deferreds when it
says they are durable."""

import os
import sys

from twisted.application import service
from twisted.internet import defer, error, protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti import errors
from ganeti.jqueue.journal import encode_record
from ganeti.jqueue.journal_helper import (CHECKPOINT, COMMIT, DONE, LOCK_FD,
                                          frame, parse_frames)

log = Logger()

#: seconds the master waits for the helper to end when it stops
STOP_TIMEOUT = 60.0

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

    def archived(self, job_ids):
        """Nothing to do when jobs were archived (the queue's journal
        interface, see :mod:`ganeti.jqueue.replication`)."""
        return defer.succeed(None)

    def drain_flag_changed(self, flag):
        return defer.succeed(None)

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
