"""The master daemon as RAPI sees it.

:class:`LuxiPool` spreads calls over several luxi connections: the master
answers the requests of one connection strictly in order, so a long poll
(``/2/jobs/ID/wait`` waits up to 10 s) on a shared connection would hold up
every other request.  Each call borrows an idle connection (opening one if
fewer than ``size`` are open) and returns it afterwards.

:class:`ImplementedOpcodes` remembers which opcodes the master has a
logical unit for (luxi ``QueryImplementedOpcodes``), for a short while, so a
resource whose opcode is missing answers 501 without submitting anything;
the set follows the running master (which learns new opcodes when it is
upgraded and restarted), never a list kept here.
"""

from collections import deque

from twisted.internet import defer
from twisted.python.failure import Failure

from ganeti import errors
from ganeti import luxi


class LuxiPool(luxi._Methods):
    """``call(method, *args)`` over at most ``size`` luxi connections."""

    def __init__(self, reactor, path, size=16, timeout=luxi.READ_WRITE_TIMEOUT,
                 client_factory=None):
        self._reactor = reactor
        self.path = path
        self.size = size
        self.timeout = timeout
        self._make = client_factory or (
            lambda: luxi.LuxiClient(reactor, path, timeout=timeout))
        self._idle = []
        self._all = []
        self._waiting = deque()

    def _acquire(self):
        if self._idle:
            return defer.succeed(self._idle.pop())
        if len(self._all) < self.size:
            client = self._make()
            self._all.append(client)
            return defer.succeed(client)
        d = defer.Deferred(lambda d: self._waiting.remove(d))
        self._waiting.append(d)
        return d

    def _release(self, client):
        if self._waiting:
            self._waiting.popleft().callback(client)
        else:
            self._idle.append(client)

    def call(self, method, *args):
        return defer.Deferred.fromCoroutine(self._call(method, args))

    async def _call(self, method, args):
        client = await self._acquire()
        try:
            return await client.call(method, *args)
        finally:
            self._release(client)

    def close(self):
        clients, self._all, self._idle = self._all, [], []
        return defer.gatherResults([defer.maybeDeferred(c.close)
                                    for c in clients])


class ImplementedOpcodes(object):
    """The master's implemented opcodes, cached for ``ttl`` seconds."""

    def __init__(self, master, clock, ttl=10.0):
        self.master = master
        self.clock = clock
        self.ttl = ttl
        self._known = None
        self._when = None
        self._pending = None

    def invalidate(self):
        self._when = None

    async def get(self):
        """The frozenset of OP_IDs; None if the master cannot say (an older
        master without QueryImplementedOpcodes): then every opcode is
        assumed to exist and the master's job result tells."""
        now = self.clock.seconds()
        if self._when is not None and now - self._when < self.ttl:
            return self._known
        # several requests at once share one luxi call
        waiter = defer.Deferred()
        if self._pending is None:
            self._pending = [waiter]
            defer.Deferred.fromCoroutine(self._fetch()).addBoth(self._done)
        else:
            self._pending.append(waiter)
        return await waiter

    def _done(self, result):
        waiters, self._pending = self._pending, None
        for waiter in waiters:
            if isinstance(result, Failure):
                waiter.errback(result)
            else:
                waiter.callback(result)

    async def _fetch(self):
        try:
            ops = await self.master.call(luxi.REQ_QUERY_IMPLEMENTED_OPCODES)
        except errors.LuxiError as err:
            if not luxi.is_unsupported_method(err):
                raise
            ops = None
        self._known = None if ops is None else frozenset(ops)
        self._when = self.clock.seconds()
        return self._known

    async def missing(self, op_ids):
        """The OP_IDs among ``op_ids`` the master does not implement."""
        known = await self.get()
        if known is None:
            return []
        return [op for op in op_ids if op not in known]


def is_unsupported_method(err):
    """True for the luxi error of a method the master does not serve."""
    return luxi.is_unsupported_method(err)
