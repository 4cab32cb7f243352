"""Run asynchronous work from a command-line tool and return its result.

Commands that talk to node daemons (``gnt-cluster master-failover``) use
the Twisted RPC client; they run the reactor once, for that work alone,
much as ``twisted.internet.task.react`` does, but hand the result (or the
exception) back instead of exiting.
"""

from twisted.internet import defer
from twisted.python.failure import Failure


def run_in_reactor(work, reactor=None):
    """``work(reactor)`` -> Deferred or coroutine; its result, or its
    exception raised here.  The reactor can run once per process."""
    if reactor is None:
        from twisted.internet import reactor
    outcome = []

    def start():
        d = defer.maybeDeferred(lambda: defer.ensureDeferred(work(reactor)))

        def done(result):
            outcome.append(result)
            reactor.stop()
        d.addBoth(done)
    reactor.callWhenRunning(start)
    reactor.run(installSignalHandlers=False)
    if not outcome:
        raise RuntimeError("the reactor stopped before the work ended")
    result = outcome[0]
    if isinstance(result, Failure):
        result.raiseException()
    return result
