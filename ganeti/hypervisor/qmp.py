"""A QMP (QEMU Machine Protocol) client over a UNIX socket.

QMP is JSON, one object per line.  On connect qemu sends a greeting
(``{"QMP": {...}}``); the client must send ``qmp_capabilities`` before any
other command.  Every command we send carries an ``id`` that qemu copies
into its reply (``{"return": ...}`` or ``{"error": {"class", "desc"}}``), so
replies are matched by id; anything with an ``"event"`` key is an
asynchronous event and goes to the event listeners.

qemu's ``-qmp unix:PATH,server=on`` accepts one client at a time: a second
connection gets no greeting until the first closes.  Users of this module
therefore keep one connection per instance and share it.
"""

import json

from twisted.internet import defer
from twisted.internet.endpoints import UNIXClientEndpoint
from twisted.internet.protocol import Factory
from twisted.protocols.basic import LineOnlyReceiver
from twisted.logger import Logger

from ganeti import errors

__all__ = ["QMPError", "QMPConnectionLost", "QMPProtocol", "connect_qmp"]

_log = Logger()


class QMPError(errors.HypervisorError):
    """qemu answered a command with an error: (command, class, desc)."""

    def __init__(self, command, error_class, desc):
        super().__init__(command, error_class, desc)
        self.command = command
        self.error_class = error_class
        self.desc = desc

    def __str__(self):
        return "QMP command %s failed: %s: %s" % (
            self.command, self.error_class, self.desc)


class QMPConnectionLost(errors.HypervisorError):
    """The monitor connection closed (qemu exited?) before an answer."""


class QMPProtocol(LineOnlyReceiver):

    delimiter = b"\n"
    # query-qmp-schema and friends answer with long lines
    MAX_LENGTH = 16 * 1024 * 1024

    def __init__(self):
        self.greeting = None
        self._ready = []         # waiters for the capabilities negotiation
        self._negotiated = False
        self._lost_reason = None
        self._pending = {}       # id -> (command, Deferred)
        self._next_id = 0
        self._listeners = []
        self._lost_waiters = []
        self._event_waiters = []

    # -- public API ----------------------------------------------------------

    def when_ready(self):
        """Deferred firing with the greeting once commands may be sent."""
        if self._negotiated:
            return defer.succeed(self.greeting)
        if self._lost_reason is not None:
            return defer.fail(QMPConnectionLost(self._lost_reason))
        d = defer.Deferred()
        self._ready.append(d)
        return d

    def when_lost(self):
        """Deferred firing (None) when the connection closes."""
        if self._lost_reason is not None:
            return defer.succeed(None)
        d = defer.Deferred()
        self._lost_waiters.append(d)
        return d

    @property
    def lost(self):
        return self._lost_reason is not None

    def execute(self, command, arguments=None):
        """Run ``command``; Deferred firing with its ``return`` value."""
        return defer.Deferred.fromCoroutine(self._execute(command, arguments))

    def add_event_listener(self, listener):
        """``listener(name, data, timestamp)`` is called for every event;
        ``timestamp`` is in seconds (float)."""
        self._listeners.append(listener)

    def remove_event_listener(self, listener):
        self._listeners.remove(listener)

    def wait_for_event(self, name, predicate=None):
        """Deferred firing with the data of the next event ``name`` (for
        which ``predicate(data)`` is true); fails if the connection closes
        first; cancellable."""
        def listener(event, data, timestamp):
            if event == name and (predicate is None or predicate(data)):
                forget()
                d.callback(data)

        def forget(_=None):
            if listener in self._listeners:
                self._listeners.remove(listener)
            if d in self._event_waiters:
                self._event_waiters.remove(d)
        d = defer.Deferred(forget)
        if self._lost_reason is not None:
            d.errback(QMPConnectionLost(self._lost_reason))
            return d
        self._listeners.append(listener)
        self._event_waiters.append(d)
        return d

    # -- protocol ------------------------------------------------------------

    async def _execute(self, command, arguments):
        if not self._negotiated and command != "qmp_capabilities":
            await self.when_ready()
        return await self._send(command, arguments)

    def _send(self, command, arguments):
        if self._lost_reason is not None:
            return defer.fail(QMPConnectionLost(self._lost_reason))
        self._next_id += 1
        ident = "gnt-%d" % self._next_id
        msg = {"execute": command, "id": ident}
        if arguments:
            msg["arguments"] = arguments
        d = defer.Deferred()
        self._pending[ident] = (command, d)
        self.sendLine(json.dumps(msg).encode("utf-8"))
        return d

    def lineReceived(self, line):
        line = line.strip()
        if not line:
            return
        try:
            msg = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            _log.warn("Dropping QMP connection: unparsable line {line!r}",
                      line=line[:200])
            self.transport.loseConnection()
            return
        if not isinstance(msg, dict):
            _log.warn("Ignoring QMP message that is not an object: {msg!r}",
                      msg=msg)
        elif "QMP" in msg:
            self._greeted(msg["QMP"])
        elif "event" in msg:
            self._event(msg)
        elif "return" in msg or "error" in msg:
            self._reply(msg)
        else:
            _log.warn("Ignoring unknown QMP message {msg!r}", msg=msg)

    def _greeted(self, greeting):
        self.greeting = greeting
        d = self._send("qmp_capabilities", None)
        d.addCallbacks(self._negotiation_done, self._negotiation_failed)

    def _negotiation_done(self, _):
        self._negotiated = True
        waiters, self._ready = self._ready, []
        for d in waiters:
            d.callback(self.greeting)

    def _negotiation_failed(self, failure):
        waiters, self._ready = self._ready, []
        for d in waiters:
            d.errback(failure)
        self.transport.loseConnection()

    def _event(self, msg):
        ts = msg.get("timestamp") or {}
        timestamp = ts.get("seconds", 0) + ts.get("microseconds", 0) / 1e6
        for listener in list(self._listeners):
            try:
                listener(msg["event"], msg.get("data") or {}, timestamp)
            except Exception:
                _log.failure("QMP event listener failed on {event}",
                             event=msg["event"])

    def _reply(self, msg):
        ident = msg.get("id")
        if ident not in self._pending:
            # qemu answers an unparsable command without our id
            _log.warn("QMP reply for no pending command: {msg!r}", msg=msg)
            return
        command, d = self._pending.pop(ident)
        if "error" in msg:
            err = msg["error"] if isinstance(msg["error"], dict) else {}
            d.errback(QMPError(command, err.get("class", "GenericError"),
                               err.get("desc", repr(msg["error"]))))
        else:
            d.callback(msg["return"])

    def connectionLost(self, reason):
        self._lost_reason = reason.getErrorMessage() or "connection closed"
        exc = QMPConnectionLost(self._lost_reason)
        pending, self._pending = self._pending, {}
        for command, d in pending.values():
            d.errback(QMPConnectionLost("%s (waiting for %s)" %
                                        (self._lost_reason, command)))
        waiters, self._ready = self._ready, []
        for d in waiters:
            d.errback(exc)
        self._listeners = []
        waiting, self._event_waiters = self._event_waiters, []
        for d in waiting:
            d.errback(QMPConnectionLost(self._lost_reason))
        lost, self._lost_waiters = self._lost_waiters, []
        for d in lost:
            d.callback(None)


class _QMPFactory(Factory):
    protocol = QMPProtocol
    noisy = False   # one connection per instance start is not news


async def _connect(reactor, path, timeout):
    endpoint = UNIXClientEndpoint(reactor, path, timeout=max(1, int(timeout)))
    try:
        proto = await endpoint.connect(_QMPFactory())
    except Exception as err:
        raise errors.HypervisorError(
            "cannot connect to QMP socket %s: %s" % (path, err))
    ready = proto.when_ready()
    ready.addTimeout(timeout, reactor)
    try:
        await ready
    except defer.TimeoutError:
        proto.transport.loseConnection()
        raise errors.HypervisorError(
            "no QMP greeting on %s within %ss (is another client connected?)"
            % (path, timeout))
    except Exception:
        proto.transport.loseConnection()
        raise
    return proto


def connect_qmp(reactor, path, timeout=5.0):
    """Connect to qemu's QMP socket at ``path`` and negotiate capabilities.

    Deferred firing with a ready :class:`QMPProtocol`.
    """
    return defer.Deferred.fromCoroutine(_connect(reactor, path, timeout))
