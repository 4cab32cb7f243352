"""Live data of every node, shared by the queries of a short while.

A :class:`LiveCache` keeps, per kind of live data (the hypervisors'
instances, the nodes' resources), one *snapshot*: the answer of every node
that can have such data, asked in one go.  A query may use a snapshot only
while

* it was taken at the configuration serial the query reads (a change of
  the configuration drops every snapshot: a started, stopped or moved
  instance is never shown with the state from before), and
* its fetch started less than ``ttl`` seconds ago (``ttl`` 0: every query
  asks the nodes itself, as without a cache).

Queries arriving while a fetch is under way wait for it (when it started
less than ``ttl`` seconds ago) instead of asking the nodes again.  A query
that uses a snapshot in the second half of its life starts the next fetch
without waiting for it: while queries keep coming, the nodes are asked
before the snapshot expires and no query waits for them.  Each
snapshot has a *generation*: equal data gets the generation of the
snapshot before it, so answers built from it can be reused; different
data gets a new one.  (Data is compared by its JSON text taken when it
arrived, so a provider that hands out the same objects again, changed,
still gets a new generation.)
"""

import json

import attr
from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti.query import live

log = Logger()

#: Kinds of live data
KIND_INSTANCES = "instances"    # ILiveData.instances_runtime
KIND_NODES = "nodes"            # ILiveData.nodes_runtime

#: How long live data is reused by default (seconds)
DEFAULT_TTL = 2.0

#: How often a query waits for a new snapshot while the configuration
#: keeps changing under it, before it takes the last one fetched
_ATTEMPTS = 3


@attr.s(frozen=True)
class Snapshot(object):
    """One kind of live data of every node that has it."""
    kind = attr.ib()
    generation = attr.ib()
    serial = attr.ib()          # configuration serial when the fetch began
    started = attr.ib()         # clock time when the fetch began
    data = attr.ib()            # {node uuid: answer}
    unreachable = attr.ib()     # frozenset of node uuids
    #: the data and unreachable nodes as JSON text when they arrived
    fingerprint = attr.ib()


def _fingerprint(data, unreachable):
    return json.dumps([data, sorted(unreachable)], sort_keys=True,
                      default=repr)


def nodes_for(kind, cfg):
    """The nodes a snapshot of ``kind`` asks: never offline ones; for
    instances the vm-capable nodes and every node of an instance (where a
    domain may run); for resources the vm-capable nodes."""
    online = {uuid for uuid, node in cfg.nodes.items() if not node.offline}
    wanted = {uuid for uuid in online if cfg.nodes[uuid].vm_capable}
    if kind == KIND_INSTANCES:
        for inst in cfg.instances.values():
            if not inst.forthcoming:
                wanted.update(u for u in inst.all_nodes if u in online)
    return sorted(wanted)


_METHODS = {KIND_INSTANCES: live.fetch_instances_runtime,
            KIND_NODES: live.fetch_nodes_runtime}


class _Fetch(object):
    """A fetch under way and the queries waiting for it."""

    def __init__(self, serial, started):
        self.serial = serial
        self.started = started
        self.waiters = []


class LiveCache(object):
    """Snapshots of live data, at most ``ttl`` seconds old, on ``clock``
    (an IReactorTime)."""

    def __init__(self, clock, ttl=DEFAULT_TTL):
        if ttl < 0:
            raise ValueError("live data TTL must not be negative, got %r"
                             % (ttl,))
        self.clock = clock
        self.ttl = ttl
        self._current = {}      # kind -> Snapshot
        self._fetching = {}     # kind -> _Fetch
        self._generations = 0
        #: fetches started (for tests and the benchmark)
        self.fetches = 0

    def invalidate(self):
        """Forget every snapshot: the next query asks the nodes."""
        self._current.clear()
        self._fetching.clear()

    def _young(self, started):
        return self.clock.seconds() - started < self.ttl

    def usable(self, snapshot, cfg):
        return (snapshot is not None and snapshot.serial == cfg.serial_no
                and self._young(snapshot.started))

    async def get(self, kind, cfg, provider):
        """A Snapshot of ``kind`` usable at ``cfg``'s serial, fetched
        through ``provider`` (an ILiveData) when there is none."""
        snapshot = None
        for _ in range(_ATTEMPTS):
            current = self._current.get(kind)
            if self.usable(current, cfg):
                age = self.clock.seconds() - current.started
                if kind not in self._fetching and age >= self.ttl / 2:
                    # refresh ahead; the answer goes to later queries
                    self._fetch(kind, cfg, provider).addErrback(
                        lambda f: log.failure("refreshing live data failed",
                                              f))
                return current
            snapshot = await self._fetch(kind, cfg, provider)
            if snapshot.serial == cfg.serial_no:
                return snapshot
        # The configuration changed during every fetch; the last one still
        # began after this query arrived.
        return snapshot

    def _fetch(self, kind, cfg, provider):
        serial = cfg.serial_no
        pending = self._fetching.get(kind)
        waiter = defer.Deferred()
        if pending is not None and pending.serial == serial and \
                self._young(pending.started):
            pending.waiters.append(waiter)
            return waiter
        pending = _Fetch(serial, self.clock.seconds())
        pending.waiters.append(waiter)
        self._fetching[kind] = pending
        self.fetches += 1
        d = _METHODS[kind](provider, nodes_for(kind, cfg))
        d.addCallback(self._fetched, kind, pending)
        d.addBoth(self._deliver, kind, pending)
        return waiter

    def _fetched(self, answer, kind, pending):
        data, unreachable = answer
        current = self._current.get(kind)
        fingerprint = _fingerprint(data, unreachable)
        if current is not None and current.fingerprint == fingerprint:
            generation = current.generation
        else:
            self._generations += 1
            generation = self._generations
        snapshot = Snapshot(kind, generation, pending.serial,
                            pending.started, data, frozenset(unreachable),
                            fingerprint)
        # a slower, older fetch never replaces a newer snapshot
        if current is None or current.started <= snapshot.started:
            self._current[kind] = snapshot
        return snapshot

    def _deliver(self, result, kind, pending):
        if self._fetching.get(kind) is pending:
            del self._fetching[kind]
        for waiter in pending.waiters:
            if isinstance(result, Failure):
                waiter.errback(result)
            else:
                waiter.callback(result)
        return None
