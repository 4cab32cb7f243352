"""The node daemon's thread pool for blocking work (file I/O).

A slow or failing disk must stall only the calls that need it: procedures
declared ``blocking`` and the file work of the others run here, never on the
reactor, so the daemon keeps answering everything else (a ping, a
powercycle).  The pool is bounded: when every thread waits on a dead disk,
further blocking work queues (and waits too) while calls that need no disk
are still answered.
"""

from twisted.application import service
from twisted.internet import threads
from twisted.python import threadpool

from ganeti.server.noded.procedure import INLINE

__all__ = ["BlockingPool", "DEFAULT_THREADS", "MAX_THREADS"]

#: Threads unless ``--blocking-threads`` says otherwise: enough for a few
#: disks stuck at once while others still work.
DEFAULT_THREADS = 8
#: More threads only hold more memory (locked by mlockall): refuse them.
MAX_THREADS = 128


class BlockingPool(service.Service):
    """A bounded :class:`ThreadPool` owned by the daemon's service tree:
    its threads exist from the start of the service (created on demand) to
    its stop, which waits for the work in progress.

    :meth:`run` is the procedures' ``run_blocking``.  ``size`` 0 runs the
    work inline on the reactor instead (what the daemon did before it had
    a pool; for comparisons only).
    """

    name = "blocking-pool"

    def __init__(self, reactor, size=DEFAULT_THREADS):
        self._reactor = reactor
        self.size = size
        self.pool = None
        if size:
            # no thread exists before startService (ThreadPool creates them
            # on demand once started)
            self.pool = threadpool.ThreadPool(
                minthreads=0, maxthreads=size, name="noded-blocking")

    def run(self, fn, *args, **kwargs):
        """Deferred of ``fn(*args, **kwargs)`` run in the pool."""
        if self.pool is None:
            return INLINE(fn, *args, **kwargs)
        return threads.deferToThreadPool(self._reactor, self.pool, fn,
                                         *args, **kwargs)

    def startService(self):
        service.Service.startService(self)
        if self.pool is not None:
            self.pool.start()

    def stopService(self):
        service.Service.stopService(self)
        if self.pool is not None:
            # joins the threads: work in progress finishes first
            self.pool.stop()
