"""Durable file writes off the reactor, in the order they were asked for.

The master daemon writes config.data, job files and ssconf files with
fsync, which can take long on a busy or failing disk.  Serialising stays in
the reactor thread (it reads objects the reactor changes); the write itself
goes to :class:`OrderedWriter`: one thread that performs the writes one
after the other, in submission order, each answered by a Deferred fired in
the reactor thread.  A write asked for later never reaches the disk before
one asked for earlier, so "config.data changed, then the job recorded as
successful" keeps its order on disk.

Group commit: :meth:`IFileWriter.commit` hands over one item of a batch
(``fn(items)`` writes a dict of them, e.g. job files by path).  Items
committed while the newest call in the writer's line is a batch of the
same ``fn`` that has not started join that batch (a later item of the
same key replaces the earlier one), so many jobs' state changes share
the costs of one write, and order with every other call is kept: an
item never joins a batch that was asked for before some other call.

:class:`InlineWriter` does the same work at once, in the caller's thread:
for tools that write once and exit, and for tests.
"""

import functools
import threading

from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted.application import service
from twisted.internet import defer, threads
from twisted.python.threadpool import ThreadPool
from zope.interface import Interface, implementer

__all__ = ["IFileWriter", "OrderedWriter", "InlineWriter"]

_log = Logger()


class IFileWriter(Interface):
    """Runs file-writing functions in order."""

    def call(fn, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` after every call submitted before;
        a Deferred firing (in the reactor thread) with its result or its
        exception."""

    def commit(fn, key, item):
        """Have ``fn({key: item, ...})`` called, in order with the other
        calls, possibly together with items committed just before or
        after this one; a Deferred firing (with None or the failure of
        ``fn``) once the call that wrote ``item`` (or a later item of the
        same key) is done.  When ``fn`` returns a callable, that is called
        afterwards, as a call of its own (work that need not delay the
        answer, such as writing files behind a journal)."""

    def drain():
        """A Deferred firing once every call submitted so far is done
        (whether it succeeded or not)."""


@implementer(IFileWriter)
class InlineWriter(object):
    """Writes at once, in the calling thread."""

    def call(self, fn, *args, **kwargs):
        return defer.maybeDeferred(fn, *args, **kwargs)

    def commit(self, fn, key, item):
        def run():
            after = fn({key: item})
            if callable(after):
                after()
        return defer.maybeDeferred(run)

    def drain(self):
        return defer.succeed(None)


class _DaemonThreadPool(ThreadPool):
    """A thread pool whose threads never keep the process alive: a daemon
    that fails to start exits although its writer thread was started
    (stopping the service, as a normal stop does, waits for the writes)."""

    threadFactory = functools.partial(threading.Thread, daemon=True)


@implementer(IFileWriter)
class OrderedWriter(service.Service):
    """One writer thread, started and stopped as a service.

    Calls submitted before the service starts wait for it.  Stopping waits
    for the calls already submitted, then ends the thread.
    """

    name = "writer"

    def __init__(self, reactor, thread_name="ordered-writer"):
        self._reactor = reactor
        # one thread: its work queue is the order of the writes
        self._pool = _DaemonThreadPool(minthreads=1, maxthreads=1,
                                       name=thread_name)
        self._last = defer.succeed(None)
        self._pending = 0
        self._trigger = None
        # the newest call in line, when it is a batch: it may still grow
        self._tail = None
        # guards a batch's items against the writer thread taking them
        self._batch_lock = threading.Lock()
        #: batches written and items in them (group commit's effect)
        self.batches = 0
        self.batched_items = 0

    @property
    def pending(self):
        """Calls submitted and not done yet."""
        return self._pending

    def call(self, fn, *args, **kwargs):
        # whatever comes after this call may not join a batch before it
        self._tail = None
        return self._call(fn, *args, **kwargs)

    def commit(self, fn, key, item):
        done = defer.Deferred()
        with self._batch_lock:
            batch = self._tail
            if batch is not None and batch.fn == fn and not batch.taken:
                batch.items[key] = item
                batch.waiters.append(done)
                return done
        batch = _Batch(fn, self._batch_lock)
        batch.items[key] = item
        batch.waiters.append(done)
        self._call(batch.run).addBoth(self._batch_done, batch)
        self._tail = batch
        return done

    def _batch_done(self, result, batch):
        if self._tail is batch:
            self._tail = None
        after = None
        if not isinstance(result, Failure):
            count, after = result
            self.batches += 1
            self.batched_items += count
            result = None
        if callable(after):
            # work the batch left for later (e.g. files written behind a
            # journal): in line before whatever the answers lead to
            self._call(after).addErrback(
                lambda f: _log.failure("Deferred write failed", f))
        for waiter in batch.waiters:
            waiter.callback(result)
        # each waiter had the failure to handle; this chain is done with it

    def _call(self, fn, *args, **kwargs):
        self._pending += 1
        d = threads.deferToThreadPool(self._reactor, self._pool, fn, *args,
                                      **kwargs)

        def done(result):
            self._pending -= 1
            return result
        d.addBoth(done)
        # what drain() waits for: the end of the last call, failure or not
        # (one thread: the calls before it are done by then)
        self._last = _settled(d)
        return d

    def drain(self):
        return _settled(self._last)

    def startService(self):
        service.Service.startService(self)
        self._pool.start()
        # Also when the daemon ends without stopping its services (a failed
        # start): a thread left running would keep the process alive.
        self._trigger = self._reactor.addSystemEventTrigger(
            "during", "shutdown", self._stop_pool)

    @defer.inlineCallbacks
    def stopService(self):
        service.Service.stopService(self)
        yield self.drain()
        # the thread is idle: joining it does not block
        self._stop_pool()
        if self._trigger is not None:
            self._reactor.removeSystemEventTrigger(self._trigger)
            self._trigger = None

    def _stop_pool(self):
        if self._pool.started:
            self._pool.stop()


class _Batch(object):
    """Items waiting for one call of ``fn``; the writer thread takes them
    (under ``lock``) when the call starts, after which none joins."""

    def __init__(self, fn, lock):
        self.fn = fn
        self.lock = lock
        self.items = {}
        self.waiters = []
        self.taken = False

    def run(self):
        with self.lock:
            self.taken = True
            items = dict(self.items)
        return len(items), self.fn(items)


def _settled(d):
    """A Deferred firing with None once ``d`` has fired, without taking
    ``d``'s result away from its other callbacks."""
    settled = defer.Deferred()

    def fire(result):
        if not settled.called:
            settled.callback(None)
        return result
    d.addBoth(fire)
    return settled
