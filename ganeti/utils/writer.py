"""Durable file writes off the reactor, in the order they were asked for.

The master daemon writes config.data, job files and ssconf files with
fsync, which can take long on a busy or failing disk.  Serialising stays in
the reactor thread (it reads objects the reactor changes); the write itself
goes to :class:`OrderedWriter`: one thread that performs the writes one
after the other, in submission order, each answered by a Deferred fired in
the reactor thread.  A write asked for later never reaches the disk before
one asked for earlier, so "config.data changed, then the job recorded as
successful" keeps its order on disk.

:class:`InlineWriter` does the same work at once, in the caller's thread:
for tools that write once and exit, and for tests.
"""

import functools
import threading

from twisted.application import service
from twisted.internet import defer, threads
from twisted.python.threadpool import ThreadPool
from zope.interface import Interface, implementer

__all__ = ["IFileWriter", "OrderedWriter", "InlineWriter"]


class IFileWriter(Interface):
    """Runs file-writing functions in order."""

    def call(fn, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` after every call submitted before;
        a Deferred firing (in the reactor thread) with its result or its
        exception."""

    def drain():
        """A Deferred firing once every call submitted so far is done
        (whether it succeeded or not)."""


@implementer(IFileWriter)
class InlineWriter(object):
    """Writes at once, in the calling thread."""

    def call(self, fn, *args, **kwargs):
        return defer.maybeDeferred(fn, *args, **kwargs)

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

    @property
    def pending(self):
        """Calls submitted and not done yet."""
        return self._pending

    def call(self, fn, *args, **kwargs):
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
