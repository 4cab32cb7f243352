"""Serial console sessions of a node's kvm instances, relayed over RPC.

A session is one connection to an instance's serial console socket (the
kvm driver's ``<run>/kvm-hypervisor/ctrl/<name>.serial``).  What the
guest writes is kept in a bounded buffer numbered by byte offset since the
session opened: a reader asks for the output after an offset and waits
(a long poll, at most :data:`MAX_READ_WAIT` seconds) when there is none
yet.  Output older than the buffer holds is dropped; a reader asking for
it gets what is left and the number of bytes it missed.

The socket takes one client at a time, so a new session of an instance
ends the one open before (the later user takes the console over, as a
second ``gnt-instance console`` could not).  Sessions nobody reads or
writes for ``idle_timeout`` seconds are closed; at most ``max_sessions``
are open on the node.  Every call names the session's owner (the RAPI user
the master passes on); a session of another owner is as unknown as one
that never existed.

Expected refusals are answers, not failures, so that the master can tell
them apart: ``{"error": CODE, "message": TEXT}`` with CODE one of
:data:`ERRORS`.
"""

import base64
import secrets

import attr
from twisted.internet import defer, endpoints, protocol
from twisted.logger import Logger

__all__ = ["ConsoleSessions", "unix_connector", "ERRORS", "NOT_FOUND",
           "NOT_RUNNING", "LIMIT", "CLOSED", "DEFAULT_MAX_SESSIONS",
           "DEFAULT_BUFFER_SIZE", "DEFAULT_IDLE_TIMEOUT", "MAX_READ_WAIT",
           "MAX_READ_SIZE", "MAX_WRITE_SIZE"]

log = Logger()

#: the refusals (``{"error": code, "message": text}``)
NOT_FOUND = "not_found"
NOT_RUNNING = "not_running"
LIMIT = "limit"
CLOSED = "closed"
ERRORS = (NOT_FOUND, NOT_RUNNING, LIMIT, CLOSED)

DEFAULT_MAX_SESSIONS = 16
#: bytes of output kept per session
DEFAULT_BUFFER_SIZE = 256 * 1024
#: seconds without a read or write before a session is closed
DEFAULT_IDLE_TIMEOUT = 300.0
#: the longest a read waits for output (the RPC timeout stays above it)
MAX_READ_WAIT = 30.0
#: bytes one read answers at most (the rest comes with the next)
MAX_READ_SIZE = 64 * 1024
#: bytes one write may carry
MAX_WRITE_SIZE = 64 * 1024
#: seconds a session whose console went away is kept for its last reads
CLOSED_GRACE = 60.0
#: seconds to connect to the console socket
CONNECT_TIMEOUT = 5


def unix_connector(reactor, timeout=CONNECT_TIMEOUT):
    """``connect(path, protocol)`` -> Deferred: the protocol connected to
    the UNIX socket ``path``."""
    def connect(path, proto):
        endpoint = endpoints.UNIXClientEndpoint(reactor, path,
                                                timeout=timeout)
        return endpoints.connectProtocol(endpoint, proto)
    return connect


def refusal(code, message):
    return {"error": code, "message": message}


class _Link(protocol.Protocol):
    """The connection to the console socket, feeding its session."""

    def __init__(self, session):
        self.session = session

    def dataReceived(self, data):
        self.session.received(data)

    def connectionLost(self, reason=protocol.connectionDone):
        self.session.lost()


@attr.s(eq=False)
class _Session(object):
    id = attr.ib()
    instance = attr.ib()
    owner = attr.ib()
    buffer_size = attr.ib()
    opened = attr.ib()
    #: offset of the first byte ``data`` holds
    start = attr.ib(default=0)
    data = attr.ib(default=attr.Factory(bytearray))
    #: why the session ended (None: open)
    closed = attr.ib(default=None)
    link = attr.ib(default=None)
    last_used = attr.ib(default=0.0)
    #: pending reads: Deferreds fired (None) when output or the end comes
    waiters = attr.ib(default=attr.Factory(list))
    timer = attr.ib(default=None)
    on_change = attr.ib(default=None)

    @property
    def end(self):
        return self.start + len(self.data)

    def received(self, chunk):
        self.data.extend(chunk)
        excess = len(self.data) - self.buffer_size
        if excess > 0:
            del self.data[:excess]
            self.start += excess
        self.wake()

    def lost(self):
        if self.closed is None:
            self.closed = ("the console of %s went away (the instance"
                           " stopped, or its console was taken over)"
                           % self.instance)
            if self.on_change is not None:
                self.on_change(self)
        self.link = None
        self.wake()

    def wake(self):
        waiters, self.waiters = self.waiters, []
        for d in waiters:
            if not d.called:
                d.callback(None)


class ConsoleSessions(object):
    """The console sessions of one node.

    ``connect(path, protocol)`` connects a protocol to a UNIX socket
    (:func:`unix_connector`); ``clock`` drives the idle timeouts and the
    read waits; ``new_id()`` names sessions (unguessable by default).
    """

    def __init__(self, clock, connect, max_sessions=DEFAULT_MAX_SESSIONS,
                 buffer_size=DEFAULT_BUFFER_SIZE,
                 idle_timeout=DEFAULT_IDLE_TIMEOUT, new_id=None):
        self.clock = clock
        self.connect = connect
        self.max_sessions = max_sessions
        self.buffer_size = buffer_size
        self.idle_timeout = idle_timeout
        self.new_id = new_id or (lambda: secrets.token_urlsafe(18))
        self.sessions = {}

    def open_count(self):
        return sum(1 for s in self.sessions.values() if s.closed is None)

    async def open(self, instance, path, owner):
        """A new session on the console socket ``path`` of ``instance``:
        ``{"session": id}``, or a refusal."""
        replaced = [s for s in self.sessions.values()
                    if s.instance == instance and s.closed is None]
        if not replaced and self.open_count() >= self.max_sessions:
            return refusal(LIMIT, "this node has %d console sessions open,"
                           " the most it allows; close one or wait until"
                           " one is idle for %g seconds"
                           % (self.max_sessions, self.idle_timeout))
        for old in replaced:
            log.info("Console session of {instance} ({owner}) taken over by"
                     " {new}", instance=instance, owner=old.owner, new=owner)
            self._end(old, "the console of %s was taken over by a new"
                      " session of %s" % (instance, owner))
        session = _Session(id=self.new_id(), instance=instance, owner=owner,
                           buffer_size=self.buffer_size,
                           opened=self.clock.seconds(),
                           last_used=self.clock.seconds())
        session.on_change = self._closed_by_peer
        link = _Link(session)
        try:
            await self.connect(path, link)
        except Exception as err:
            log.info("Cannot open the console of {instance}: {err}",
                     instance=instance, err=err)
            return refusal(NOT_RUNNING, "cannot connect to the serial"
                           " console of %s at %s (is it running on this"
                           " node?): %s" % (instance, path, err))
        if session.closed is None:
            session.link = link
        self.sessions[session.id] = session
        self._arm(session, self.idle_timeout)
        log.info("Console session {id} of {instance} opened for {owner}",
                 id=session.id[:6], instance=instance, owner=owner)
        return {"session": session.id}

    def _find(self, session_id, owner, instance=None):
        session = self.sessions.get(session_id)
        if session is None or session.owner != owner or (
                instance is not None and session.instance != instance):
            return None
        return session

    @staticmethod
    def _unknown(session_id):
        return refusal(NOT_FOUND, "no console session %s (it ended, was"
                       " closed when idle, or is not yours)" % session_id)

    def read(self, session_id, owner, offset, timeout, instance=None):
        """Deferred: the output after ``offset`` (waiting up to ``timeout``
        seconds for some): ``{"offset", "next", "data" (base64),
        "dropped", "closed"}`` or a refusal."""
        session = self._find(session_id, owner, instance)
        if session is None:
            return defer.succeed(self._unknown(session_id))
        if offset > session.end:
            return defer.succeed(refusal(
                "offset", "offset %d is beyond the output of session %s"
                " (%d bytes so far)" % (offset, session_id, session.end)))
        session.last_used = self.clock.seconds()
        timeout = max(0.0, min(float(timeout), MAX_READ_WAIT))
        if offset < session.end or session.closed is not None or \
                timeout == 0:
            return defer.succeed(self._answer(session, offset))
        d = defer.Deferred(lambda d: session.waiters.remove(d)
                           if d in session.waiters else None)
        session.waiters.append(d)
        call = self.clock.callLater(timeout, session.wake)

        def answer(_):
            if call.active():
                call.cancel()
            session.last_used = self.clock.seconds()
            return self._answer(session, offset)

        def cancelled(failure):
            if call.active():
                call.cancel()
            return failure
        return d.addCallbacks(answer, cancelled)

    def _answer(self, session, offset):
        dropped = max(0, session.start - offset)
        offset = max(offset, session.start)
        first = offset - session.start
        chunk = bytes(session.data[first:first + MAX_READ_SIZE])
        return {"offset": offset, "next": offset + len(chunk),
                "data": base64.b64encode(chunk).decode("ascii"),
                "dropped": dropped, "closed": session.closed}

    def write(self, session_id, owner, data, instance=None):
        """Send ``data`` (bytes) to the console: ``{"written": n}`` or a
        refusal."""
        session = self._find(session_id, owner, instance)
        if session is None:
            return self._unknown(session_id)
        if session.closed is not None or session.link is None:
            return refusal(CLOSED, "console session %s has ended: %s"
                           % (session_id, session.closed))
        if len(data) > MAX_WRITE_SIZE:
            return refusal("data", "at most %d bytes may be sent at once,"
                           " not %d" % (MAX_WRITE_SIZE, len(data)))
        session.last_used = self.clock.seconds()
        session.link.transport.write(data)
        return {"written": len(data)}

    def close(self, session_id, owner, instance=None):
        """End the session: ``{"closed": id}`` or a refusal."""
        session = self._find(session_id, owner, instance)
        if session is None:
            return self._unknown(session_id)
        self._end(session, "closed by %s" % owner)
        self._forget(session)
        return {"closed": session_id}

    def close_all(self, reason="the node daemon is stopping"):
        for session in list(self.sessions.values()):
            self._end(session, reason)
            self._forget(session)

    # --- lifetime -------------------------------------------------------

    def _end(self, session, reason):
        if session.closed is None:
            session.closed = reason
        link, session.link = session.link, None
        if link is not None and link.transport is not None:
            link.transport.loseConnection()
        session.wake()

    def _forget(self, session):
        if session.timer is not None and session.timer.active():
            session.timer.cancel()
        session.timer = None
        self.sessions.pop(session.id, None)

    def _closed_by_peer(self, session):
        log.info("Console session {id} of {instance}: {reason}",
                 id=session.id[:6], instance=session.instance,
                 reason=session.closed)
        # kept a while for the reader to get the last output and why
        self._arm(session, CLOSED_GRACE)

    def _arm(self, session, delay):
        if session.timer is not None and session.timer.active():
            session.timer.cancel()
        session.timer = self.clock.callLater(delay, self._check, session)

    def _check(self, session):
        session.timer = None
        if self.sessions.get(session.id) is not session:
            return
        now = self.clock.seconds()
        if session.closed is not None:
            if session.waiters:
                self._arm(session, CLOSED_GRACE)
            else:
                self._forget(session)
            return
        if session.waiters:
            # a reader waiting is using it
            self._arm(session, self.idle_timeout)
            return
        idle = now - session.last_used
        if idle >= self.idle_timeout:
            log.info("Console session {id} of {instance} ({owner}) idle for"
                     " {idle:.0f} s: closed", id=session.id[:6],
                     instance=session.instance, owner=session.owner,
                     idle=idle)
            self._end(session, "closed after %g seconds without use"
                      % self.idle_timeout)
            self._forget(session)
            return
        self._arm(session, self.idle_timeout - idle)
