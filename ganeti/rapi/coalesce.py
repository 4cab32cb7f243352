"""Identical concurrent reads share one computation.

Twenty monitoring clients asking for ``/2/instances?bulk=1`` at once need
one answer, not twenty queries of the master.  :class:`Coalescer` runs a
read for a key at most once at a time; requests for the same key arriving
while it runs wait and are then served together by ONE new run that starts
after they all arrived.  So every answer reflects the cluster as it was
after its request came in (a client that saw a job finish and then lists
instances sees that job's effect), while the work per key is bounded by
two runs however many clients ask.
"""

from twisted.internet import defer
from twisted.python.failure import Failure


class _Batch(object):
    def __init__(self):
        self.waiters = []


class Coalescer(object):

    def __init__(self):
        self._running = {}   # key -> True while a run is in progress
        self._next = {}      # key -> _Batch waiting for the current run

    def run(self, key, fn):
        """Deferred of ``fn()`` (a coroutine function), shared with every
        identical request whose batch it serves."""
        waiter = defer.Deferred()
        if key in self._running:
            batch = self._next.setdefault(key, _Batch())
            batch.waiters.append(waiter)
        else:
            batch = _Batch()
            batch.waiters.append(waiter)
            self._start(key, fn, batch)
        return waiter

    def _start(self, key, fn, batch):
        self._running[key] = True
        d = defer.Deferred.fromCoroutine(fn())
        d.addBoth(self._done, key, fn, batch)

    def _done(self, result, key, fn, batch):
        del self._running[key]
        following = self._next.pop(key, None)
        if following is not None:
            self._start(key, fn, following)
        for waiter in batch.waiters:
            if isinstance(result, Failure):
                waiter.errback(result)
            else:
                waiter.callback(result)
        return None

    def pending(self):
        return len(self._running)
