"""``GET /2/events``: the master's event stream as Server-Sent Events.

One RAPI daemon holds one WatchEvents subscription to the master
(:class:`EventHub`), whatever the number of its clients: it keeps the
master's events, numbered by the master, in a ring buffer of its own
(:meth:`ganeti.events.EventBus.mirror`) and hands them to each client
(:class:`SseStream`) with that client's filter.  A client resuming
(``Last-Event-ID``, ``?since=N``) is served from that buffer; a client
whose buffer position is gone gets ``event: reset``.  When the
subscription to the master drops, the hub subscribes again from the last
event it has, so its clients miss nothing (or, if the master no longer has
those events, every client gets ``event: reset``).

Each client has a bounded queue; one that does not read fast enough gets a
final ``event: cut`` with the reason and its connection closes.  Comment
lines keep idle connections alive (every :attr:`SseStream.keepalive`
seconds, on the injected clock).  See docs/events.rst.
"""

import json

from twisted.internet import defer
from twisted.logger import Logger

from ganeti import events
from ganeti import luxi

log = Logger()

#: seconds between keep-alive comments on an idle stream
DEFAULT_KEEPALIVE = 15.0
#: seconds between two checks that a stream's client may still read
#: (before a batch of events or a keep-alive)
ACCESS_RECHECK = 5.0
#: events waiting for one SSE client before it is cut off
DEFAULT_CLIENT_QUEUE = 1000
#: seconds a new client waits for the subscription to the master
READY_TIMEOUT = 10.0
#: seconds between attempts to subscribe to the master (doubling)
RETRY_FIRST = 0.5
RETRY_MAX = 10.0

SSE_TYPE = b"text/event-stream; charset=utf-8"


def format_event(event):
    """One event in the text/event-stream format (bytes)."""
    lines = []
    if event.get("seq") is not None and event.get("kind") != events.KIND_CUT:
        lines.append(b"id: %d" % event["seq"])
    lines.append(b"event: " + str(event.get("kind")).encode("utf-8"))
    # compact JSON never holds a newline: one data line
    lines.append(b"data: " + json.dumps(event, sort_keys=True,
                                        separators=(",", ":")).encode("utf-8"))
    return b"\n".join(lines) + b"\n\n"


KEEPALIVE_LINE = b": keep-alive\n\n"


class EventHub(object):
    """The RAPI daemon's subscription to the master's event stream.

    ``connect(on_events, since)`` subscribes (a Deferred of an object with
    ``greeting``, ``closed`` and ``close()``, as
    :func:`ganeti.luxi.open_event_stream` gives); ``clock`` schedules the
    retries and the clients' deliveries."""

    def __init__(self, connect, clock, size=events.DEFAULT_BUFFER_SIZE,
                 client_queue=DEFAULT_CLIENT_QUEUE):
        self._connect = connect
        self.clock = clock
        self.bus = events.EventBus(clock, size=size, first_seq=0,
                                   queue_size=client_queue)
        # seq -> the event as text/event-stream, rendered once for every
        # client that gets it
        self._rendered = {}
        self._stream = None
        self._connecting = None
        self._ready = []
        self._synced = False
        # the master's newest event when the subscription started: the
        # hub follows once it has it
        self._target = 0
        self._stopped = False
        self._retry_call = None
        self._delay = RETRY_FIRST
        #: whether the hub has subscribed at least once (resumes after)
        self._subscribed = False
        #: subscriptions to the master made (first one and again after drops)
        self.subscriptions = 0

    def render(self, event):
        """``event`` in the text/event-stream format, rendered once."""
        seq = event.get("seq")
        if seq is None or event.get("kind") in (events.KIND_RESET,
                                                events.KIND_CUT):
            return format_event(event)
        text = self._rendered.get(seq)
        if text is None:
            if len(self._rendered) >= 2 * self.bus.size:
                oldest = self.bus.oldest or 0
                self._rendered = {k: v for k, v in self._rendered.items()
                                  if k >= oldest}
            text = self._rendered[seq] = format_event(event)
        return text

    @property
    def connected(self):
        return self._stream is not None and self._synced

    def ready(self, timeout=READY_TIMEOUT):
        """A Deferred firing once the hub follows the master (failing
        with the master's error, or LuxiTimeoutError after ``timeout``)."""
        if self.connected:
            return defer.succeed(self)
        d = defer.Deferred(lambda d: self._ready.remove(d)
                           if d in self._ready else None)
        self._ready.append(d)
        d.addTimeout(timeout, self.clock, onTimeoutCancel=self._timed_out)
        self._start_connect()
        return d

    @staticmethod
    def _timed_out(result, timeout):
        raise luxi.LuxiTimeoutError(
            "The master daemon's event stream did not answer within %s"
            " seconds" % timeout)

    def start(self):
        self._stopped = False
        self._start_connect()

    def stop(self):
        self._stopped = True
        if self._retry_call is not None and self._retry_call.active():
            self._retry_call.cancel()
        self._retry_call = None
        self.bus.close("the RAPI daemon is stopping")
        stream, self._stream = self._stream, None
        if stream is not None:
            return stream.close()
        return defer.succeed(None)

    def _start_connect(self):
        if self._stopped or self._stream is not None or \
                self._connecting is not None:
            return
        if self._retry_call is not None and self._retry_call.active():
            self._retry_call.cancel()
        self._retry_call = None
        since = self.bus.head if self._subscribed else -1
        self._synced = False
        try:
            d = self._connect(self._on_events, since)
        except Exception:
            d = defer.fail()
        self._connecting = d
        d.addCallbacks(self._connected, self._failed)

    def _connected(self, stream):
        self._connecting = None
        if self._stopped:
            stream.close()
            return
        self._stream = stream
        self.subscriptions += 1
        self._delay = RETRY_FIRST
        greeting = stream.greeting or {}
        head = greeting.get("head")
        oldest = greeting.get("oldest")
        if not self._subscribed:
            # everything kept comes first: resumes reach back to it
            start = (oldest - 1) if isinstance(oldest, int) else head
            if isinstance(start, int):
                self.bus.head = start
        self._subscribed = True
        self._target = head if isinstance(head, int) else self.bus.head
        stream.closed.addBoth(self._lost, stream)
        self._check_synced()

    def _check_synced(self):
        if self._synced or self._stream is None:
            return
        if self.bus.head >= self._target:
            self._synced = True
            ready, self._ready = self._ready, []
            for d in ready:
                d.callback(self)

    def _failed(self, failure):
        self._connecting = None
        log.warn("Cannot follow the master's event stream: {err}",
                 err=failure.getErrorMessage())
        ready, self._ready = self._ready, []
        for d in ready:
            d.errback(failure)
        self._retry()

    def _lost(self, reason, stream):
        if self._stream is stream:
            self._stream = None
            self._synced = False
            if not self._stopped:
                log.info("The master's event stream closed; subscribing"
                         " again from event {seq}", seq=self.bus.head)
                self._retry()

    def _retry(self):
        if self._stopped or (self._retry_call is not None
                             and self._retry_call.active()):
            return
        delay, self._delay = self._delay, min(self._delay * 2, RETRY_MAX)
        self._retry_call = self.clock.callLater(delay, self._start_connect)

    def _on_events(self, batch):
        for event in batch:
            kind = event.get("kind")
            if kind == events.KIND_RESET:
                # the master no longer has what followed our last event
                self.bus.restart(event.get("seq") or 0)
            elif kind == events.KIND_CUT:
                log.warn("The master cut this RAPI daemon's event stream"
                         " off: {reason}",
                         reason=(event.get("data") or {}).get("reason"))
            else:
                self.bus.mirror(event)
        self._check_synced()


def luxi_connector(reactor, path):
    """The ``connect`` of an :class:`EventHub` subscribing over the
    master's socket ``path``."""
    def connect(on_events, since):
        return luxi.open_event_stream(reactor, path, on_events, since=since)
    return connect


class SseStream(object):
    """One ``GET /2/events`` client: writes its events on ``request``
    until it is cut off (:attr:`done` fires then) or goes away
    (:meth:`stop`)."""

    def __init__(self, request, bus, clock, since=None, kinds=None,
                 names=None, keepalive=DEFAULT_KEEPALIVE, limit=None,
                 render=format_event, access=None):
        self.request = request
        #: None, or a callable saying why the client may no longer read
        #: (a string) or None while it may: asked before each batch and
        #: keep-alive, so that a user removed from the users file (or a
        #: session that ended) stops getting events
        self.access = access
        self._access_checked = clock.seconds()
        self.render = render
        self.bus = bus
        self.clock = clock
        self.keepalive = keepalive
        self.done = defer.Deferred(lambda d: self.stop())
        self._keepalive_call = None
        self.subscription = bus.subscribe(self._deliver, self._cut,
                                          since=since, kinds=kinds,
                                          names=names, limit=limit)
        request.registerProducer(self.subscription, True)
        self._arm()

    def _arm(self):
        if self.keepalive and self.keepalive > 0:
            self._keepalive_call = self.clock.callLater(self.keepalive,
                                                        self._ping)

    def _refused(self):
        """Cut the stream off if its client may no longer read (asked at
        most every :data:`ACCESS_RECHECK` seconds); whether it was."""
        if self.access is None:
            return False
        now = self.clock.seconds()
        if self._access_checked is not None and \
                now - self._access_checked < ACCESS_RECHECK:
            return False
        self._access_checked = now
        why = self.access()
        if why is None:
            return False
        self.subscription.cut_off("access ended: %s" % why,
                                  cause=events.CUT_ACCESS)
        return True

    def _ping(self):
        self._keepalive_call = None
        if self.subscription.closed or self._refused():
            return
        self.request.write(KEEPALIVE_LINE)
        self._arm()

    def _deliver(self, batch):
        if self._refused():
            return
        self.request.write(b"".join(self.render(e) for e in batch))
        if self._keepalive_call is not None and self._keepalive_call.active():
            self._keepalive_call.reset(self.keepalive)

    def _cut(self, event):
        self.request.write(format_event(event))
        self._end()
        if not self.done.called:
            self.done.callback(None)

    def _end(self):
        if self._keepalive_call is not None and self._keepalive_call.active():
            self._keepalive_call.cancel()
        self._keepalive_call = None
        self.subscription.close()
        # a connection already lost has no channel to unregister from
        if getattr(self.request, "channel", None) is not None:
            self.request.unregisterProducer()

    def stop(self):
        """The client went away."""
        self._end()
