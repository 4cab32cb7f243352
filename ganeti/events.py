"""The event stream: every change the master makes, as small JSON events.

An :class:`EventBus` numbers the events it is given (``seq``, increasing
by one), keeps the newest ones in a bounded ring buffer and hands them to
its subscribers.  A subscriber may start where it left off (``since``): it
gets every event after that number still in the buffer, or, when the
buffer no longer holds them all, one ``reset`` event ("re-list, then
follow") before the live ones.

Subscribers are slow consumers at worst: each has a bounded queue, filled
while its consumer pushes back (the transport paused it, as an
IPushProducer); a queue that overflows ends the subscription with a final
``cut`` event naming the reason, so the master never waits for anybody.

Events are delivered in batches, once per turn of the reactor, on the
injected clock.  The same class mirrors an upstream stream (``mirror``):
the RAPI daemon keeps the master's events, numbered by the master, for
its own clients (docs/events.rst).
"""

import collections

from twisted.logger import Logger
from zope.interface import implementer
from twisted.internet.interfaces import IPushProducer

log = Logger()

#: events kept by default (the ring buffer)
DEFAULT_BUFFER_SIZE = 10000
#: events waiting for one subscriber before it is cut off
DEFAULT_QUEUE_SIZE = 2000
#: the sequence numbers of one master daemon start at its start time in
#: seconds times this, so numbers keep increasing across restarts and
#: failovers while fewer events than this happen per second on average
SEQ_PER_SECOND = 1000000

#: kinds of events
KIND_JOB = "job"
KIND_INSTANCE = "instance"
KIND_NODE = "node"
KIND_GROUP = "group"
KIND_NETWORK = "network"
KIND_CLUSTER = "cluster"
KIND_TAGS = "tags"
KIND_LEASE = "lease"
KIND_MAINTENANCE = "maintenance"
KIND_FILTER = "filter"
#: the stream itself: "resume from there is not possible, re-list"
KIND_RESET = "reset"
#: the stream itself: "this subscription ends" (data: reason)
KIND_CUT = "cut"
KINDS = frozenset([KIND_JOB, KIND_INSTANCE, KIND_NODE, KIND_GROUP,
                   KIND_NETWORK, KIND_CLUSTER, KIND_TAGS, KIND_LEASE,
                   KIND_MAINTENANCE, KIND_FILTER, KIND_RESET, KIND_CUT])

#: why a subscriber was cut off (the ``cause`` of a cut, for metrics)
CUT_SLOW = "slow"               # its queue overflowed
CUT_STOPPING = "stopping"       # the daemon (or the bus) stops
CUT_ACCESS = "access"           # its user may no longer read
CUT_CAUSES = (CUT_SLOW, CUT_STOPPING, CUT_ACCESS)

#: kinds a subscriber always sees, whatever it filters on
_STREAM_KINDS = frozenset([KIND_RESET, KIND_CUT])

#: types of events
TYPE_CREATED = "created"
TYPE_MODIFIED = "modified"
TYPE_REMOVED = "removed"
TYPE_STATE = "state"
TYPE_SUBMITTED = "submitted"
TYPE_STATUS = "status"
TYPE_LOG = "log"
TYPE_FINISHED = "finished"
TYPE_ADDED = "added"
TYPE_EXPIRING = "expiring"
TYPE_EXPIRED = "expired"
TYPE_REQUEUED = "requeued"
TYPE_ARCHIVED = "archived"


class BadFilter(ValueError):
    """A subscription's filter or start is not valid."""


def check_filter(kinds, names):
    """``(kinds, names)`` as frozensets (None: any), or BadFilter naming
    the field and the reason."""
    if kinds is not None:
        kinds = frozenset(kinds)
        unknown = sorted(k for k in kinds if k not in KINDS)
        if unknown:
            raise BadFilter("kind: unknown event kind(s) %s (known: %s)"
                            % (", ".join(map(repr, unknown)),
                               ", ".join(sorted(KINDS))))
        if not kinds:
            kinds = None
    if names is not None:
        names = frozenset(str(n) for n in names)
        if not names:
            names = None
    return kinds, names


def matches(event, kinds, names):
    """Whether a subscriber filtering on ``kinds`` and ``names`` (sets or
    None: any) sees ``event``."""
    kind = event.get("kind")
    if kind in _STREAM_KINDS:
        return True
    if kinds is not None and kind not in kinds:
        return False
    if names is not None:
        return (str(event.get("name")) in names
                or str(event.get("id")) in names)
    return True


@implementer(IPushProducer)
class Subscription(object):
    """One subscriber of a bus.  ``deliver(events)`` gets each batch;
    ``cut(event)`` the final event when the subscription ends because it
    fell behind (``close`` ends it quietly).  Register it as the
    consumer's push producer: while paused, events wait in its queue of
    at most ``limit`` events."""

    def __init__(self, bus, kinds, names, deliver, cut, limit):
        self._bus = bus
        self.kinds = kinds
        self.names = names
        self._deliver = deliver
        self._cut = cut
        self.limit = limit
        self.queue = []
        self.paused = False
        self.closed = False
        #: the seq of the last event handed over (None: none yet)
        self.last_seq = None

    def offer(self, event):
        """``event`` was published: queue it if it passes the filter."""
        if self.closed or not matches(event, self.kinds, self.names):
            return
        self.queue.append(event)
        if len(self.queue) >= self.limit and not self.paused:
            self.flush()        # a burst: hand it over now
            return
        if len(self.queue) > self.limit:
            self.cut_off("subscriber too slow: more than %d events waited"
                         " for it" % self.limit, cause=CUT_SLOW)
            return
        self._bus.dirty(self)

    def flush(self):
        """Hand over what waits, unless the consumer pushes back."""
        if self.closed or self.paused or not self.queue:
            return
        batch, self.queue = self.queue, []
        for event in reversed(batch):
            if event.get("seq") is not None and event.get("kind") != KIND_CUT:
                self.last_seq = event["seq"]
                break
        self._deliver(batch)

    def cut_off(self, reason, cause=CUT_SLOW):
        """End the subscription with a final ``cut`` event (the events
        queued are dropped: the client resumes from the last one it
        got); ``reason`` is told to the subscriber, ``cause`` (one of
        :data:`CUT_CAUSES`) to the bus's cut listeners."""
        if self.closed:
            return
        self.queue = []
        self.close()
        event = {"seq": None, "time": self._bus.clock.seconds(),
                 "kind": KIND_CUT, "type": KIND_CUT, "name": None,
                 "id": None, "data": {"reason": reason,
                                      "last_seq": self.last_seq}}
        self._bus.cuts += 1
        log.info("event subscriber cut off: {reason}", reason=reason)
        for listener in list(self._bus.cut_listeners):
            try:
                listener(cause)
            except Exception:
                log.failure("an event cut listener failed")
        self._cut(event)

    def close(self):
        if not self.closed:
            self.closed = True
            self._bus.unsubscribe(self)

    # IPushProducer: the consumer (a transport, an HTTP request) pushes back
    def pauseProducing(self):
        self.paused = True

    def resumeProducing(self):
        self.paused = False
        self.flush()

    def stopProducing(self):
        self.close()


class EventBus(object):
    """The events of one master daemon (or their mirror, see module doc).

    ``clock`` (IReactorTime) stamps events and schedules delivery;
    ``size`` is how many events the ring buffer keeps; ``first_seq`` the
    number before the first event (default: from the clock, see
    :data:`SEQ_PER_SECOND`)."""

    def __init__(self, clock, size=DEFAULT_BUFFER_SIZE, first_seq=None,
                 queue_size=DEFAULT_QUEUE_SIZE):
        if size < 1:
            raise ValueError("size: the event buffer must hold at least one"
                             " event")
        self.clock = clock
        self.size = size
        self.queue_size = queue_size
        self._buffer = collections.deque(maxlen=size)
        if first_seq is None:
            first_seq = int(clock.seconds()) * SEQ_PER_SECOND
        #: the seq of the newest event (or the start when none yet)
        self.head = first_seq
        self._subscribers = set()
        self._dirty = []
        self._flush_call = None
        #: events published since the start
        self.published = 0
        #: subscribers cut off since the start
        self.cuts = 0
        #: called with the cause (:data:`CUT_CAUSES`) of every cut
        self.cut_listeners = []

    def __len__(self):
        return len(self._buffer)

    @property
    def oldest(self):
        """The seq of the oldest event kept (None: none)."""
        return self._buffer[0]["seq"] if self._buffer else None

    @property
    def subscriber_count(self):
        return len(self._subscribers)

    def publish(self, kind, type, name=None, id=None, data=None):
        """Number, keep and hand out one event; the event is returned."""
        self.head += 1
        event = {"seq": self.head, "time": self.clock.seconds(),
                 "kind": kind, "type": type, "name": name, "id": id,
                 "data": data if data is not None else {}}
        self._keep(event)
        return event

    def mirror(self, event):
        """Keep and hand out an event numbered elsewhere (its seq must be
        newer than :attr:`head`; older ones are ignored)."""
        seq = event.get("seq")
        if not isinstance(seq, int) or seq <= self.head:
            return
        self.head = seq
        self._keep(event)

    def restart(self, head):
        """The upstream stream restarted (its events could not be resumed):
        forget every event kept and tell every subscriber to re-list."""
        self._buffer.clear()
        self.head = head
        reset = self._reset_event("the event stream restarted")
        for sub in list(self._subscribers):
            sub.offer(reset)

    def _keep(self, event):
        self._buffer.append(event)
        self.published += 1
        for sub in list(self._subscribers):
            sub.offer(event)

    def _reset_event(self, reason):
        return {"seq": self.head, "time": self.clock.seconds(),
                "kind": KIND_RESET, "type": KIND_RESET, "name": None,
                "id": None, "data": {"reason": reason,
                                     "oldest": self.oldest}}

    def backlog(self, since):
        """``(events after since, reset)``: the events kept after ``since``
        (all kept when ``since`` is negative); ``reset`` is a reset event
        when some after ``since`` are no longer kept (or never were, here),
        else None.  ``since`` None: none."""
        if since is None or since >= self.head:
            return [], None
        if since < 0:
            return list(self._buffer), None
        oldest = self.oldest
        if oldest is None or since + 1 < oldest:
            return [], self._reset_event(
                "events after %d are no longer kept (the oldest kept is %s);"
                " list the objects again, then follow"
                % (since, oldest if oldest is not None else "none"))
        skip = since + 1 - oldest
        return [self._buffer[i] for i in range(skip, len(self._buffer))], None

    def subscribe(self, deliver, cut, since=None, kinds=None, names=None,
                  limit=None):
        """A new :class:`Subscription`: its backlog (see :meth:`backlog`)
        first, then the live events, filtered on ``kinds`` and ``names``
        (iterables or None: any; BadFilter if not valid)."""
        kinds, names = check_filter(kinds, names)
        if since is not None and not isinstance(since, int):
            raise BadFilter("since: must be an event number, not %r"
                            % (since,))
        sub = Subscription(self, kinds, names, deliver, cut,
                           limit if limit is not None else self.queue_size)
        events, reset = self.backlog(since)
        self._subscribers.add(sub)
        if reset is not None:
            sub.offer(reset)
        # the backlog itself is not cut off: it is what the buffer holds
        sub.queue.extend(e for e in events if matches(e, kinds, names))
        if sub.queue:
            self.dirty(sub)
        return sub

    def unsubscribe(self, sub):
        self._subscribers.discard(sub)

    def dirty(self, sub):
        """``sub`` has events to hand over: at the end of this turn."""
        self._dirty.append(sub)
        if self._flush_call is None:
            self._flush_call = self.clock.callLater(0, self._flush)

    def _flush(self):
        self._flush_call = None
        dirty, self._dirty = self._dirty, []
        seen = set()
        for sub in dirty:
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            try:
                sub.flush()
            except Exception:
                log.failure("delivering events to a subscriber failed")
                sub.close()

    def close(self, reason="the master daemon is stopping"):
        """Cut off every subscriber (the daemon stops)."""
        for sub in list(self._subscribers):
            sub.cut_off(reason, cause=CUT_STOPPING)
        if self._flush_call is not None and self._flush_call.active():
            self._flush_call.cancel()
        self._flush_call = None
