"""The RAPI daemon's HTTP front: what a request must pass before it is read.

twisted.web reads a whole request body (into a temporary file beyond
100 kB) before the application sees the request, so a client without any
right could fill the disk or the memory with it.  Here, as soon as the head
of a request (request line and headers) has arrived, and before a byte of
its body is taken:

1. the credentials and the right the method needs are checked
   (:meth:`ganeti.rapi.app.RapiApp.check_head`): 401 or 403;
2. a ``Content-Length`` over :attr:`Limits.max_body` is a 413; a chunked
   body is counted as it arrives, and is a 413 once it passes the limit.

A refused request gets its answer at once (no ``100 Continue``: a client
that waits for one never sends its body); whatever the client sends after
it is dropped unread, for :data:`LINGER` seconds at most (so that the
client reads the answer rather than a reset), then the connection closes.

Also: a request line longer than :attr:`Limits.max_request_line` is a 414,
more header bytes or lines than allowed a 431; the head must arrive within
:attr:`Limits.head_timeout` seconds of the connection, the body within
:attr:`Limits.body_timeout` seconds of the head (else 408).  Every
connection carries one request, as with Ganeti's server.

:class:`ConnectionLimiter` wraps the whole listening side (TLS included):
beyond :attr:`Limits.max_client_connections` connections from one address,
or :attr:`Limits.max_connections` in all, a new connection is closed as
soon as it is accepted, before any TLS work.
"""

import http
import io

import attr
from twisted.logger import Logger
from twisted.protocols import policies
from twisted.web import http as twhttp
from twisted.web import server

from ganeti.rapi import baserlib

log = Logger()

#: Seconds a refused request's connection stays open, its input dropped,
#: so that the client gets to read the answer.
LINGER = 2.0
#: Bytes dropped after a refusal before the connection is cut at once.
LINGER_BYTES = 1024 * 1024
#: Seconds between two log lines about refused connections.
REFUSAL_LOG_INTERVAL = 60.0


@attr.s(frozen=True)
class Limits(object):
    """What one request and the connections may take (``ganeti-rapi``
    options of the same names)."""

    #: bytes of a request body (Ganeti's largest are a few kB)
    max_body = attr.ib(default=4 * 1024 * 1024)
    #: simultaneous connections, in all and from one client address
    max_connections = attr.ib(default=256)
    max_client_connections = attr.ib(default=32)
    #: seconds for the head, from the connection on (TLS handshake too)
    head_timeout = attr.ib(default=30.0)
    #: seconds for the body, from the end of the head on
    body_timeout = attr.ib(default=60.0)
    #: bytes of the request line, of all header lines, header lines
    max_request_line = attr.ib(default=8192)
    max_header_bytes = attr.ib(default=16384)
    max_headers = attr.ib(default=100)


#: the limits a daemon has unless told otherwise
DEFAULTS = Limits()


class PayloadTooLarge(baserlib.HttpError):
    code = 413


class UriTooLong(baserlib.HttpError):
    code = 414


class HeadersTooLarge(baserlib.HttpError):
    code = 431


class RequestTimeout(baserlib.HttpError):
    code = 408


def render_error(err):
    """A whole HTTP response for ``err`` (JSON body as the app's)."""
    body = baserlib.render_json(err.body())
    lines = ["HTTP/1.1 %d %s" % (err.code, http.HTTPStatus(err.code).phrase),
             "Content-Type: %s" % baserlib.JSON_TYPE,
             "Server: %s" % baserlib.SERVER,
             "Content-Length: %d" % len(body),
             "Connection: close"]
    lines.extend("%s: %s" % item for item in sorted(err.headers.items()))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _peer(transport):
    peer = transport.getPeer()
    return getattr(peer, "host", str(peer))


class RapiRequest(server.Request):
    """A request whose body is kept in memory (never in a temporary file;
    its size is bounded) and counted as it arrives."""

    _body_size = 0

    def gotLength(self, length):
        self.content = io.BytesIO()

    def handleContentChunk(self, data):
        channel = self.channel
        if channel is None or channel.refused:
            return
        self._body_size += len(data)
        limit = channel.site.limits.max_body
        if self._body_size > limit:
            channel.refuse(PayloadTooLarge(
                message="Request Entity Too Large",
                explain="The request body is larger than the limit of %d"
                " bytes" % limit), "chunked body over %d bytes" % limit)
            return
        self.content.write(data)


class RapiChannel(twhttp.HTTPChannel):
    """An HTTP connection that checks a request's head before its body
    (see the module's description).  ``self.site`` is a :class:`RapiSite`.
    """

    refused = False
    _head_done = False
    _deadline = None
    _lines = 0
    _header_bytes = 0
    _linger_left = 0

    def connectionMade(self):
        limits = self.site.limits
        # our own checks come first; these only back them up
        self.MAX_LENGTH = max(limits.max_request_line,
                              limits.max_header_bytes)
        self.totalHeadersSize = (limits.max_request_line +
                                 limits.max_header_bytes + 2)
        self.maxHeaders = limits.max_headers + 1
        twhttp.HTTPChannel.connectionMade(self)
        self._arm(limits.head_timeout, "the request head")

    # --- deadlines ------------------------------------------------------

    def _arm(self, seconds, what):
        self._disarm()
        self._deadline = self.callLater(seconds, self._too_slow, seconds,
                                        what)

    def _disarm(self):
        if self._deadline is not None and self._deadline.active():
            self._deadline.cancel()
        self._deadline = None

    def _too_slow(self, seconds, what):
        self._deadline = None
        self.refuse(RequestTimeout(
            message="Request Timeout",
            explain="%s did not arrive within %s seconds"
            % (what[0].upper() + what[1:], _seconds(seconds))),
            "%s not complete after %s s" % (what, _seconds(seconds)))

    # --- the head -------------------------------------------------------

    def lineReceived(self, line):
        if self.refused:
            return
        limits = self.site.limits
        if self._lines == 0:
            if not line:
                # an empty line before the request line is tolerated
                return twhttp.HTTPChannel.lineReceived(self, line)
            if len(line) > limits.max_request_line:
                return self._uri_too_long()
        elif line:
            if self._lines > limits.max_headers:
                return self._headers_too_large(
                    "more than %d header lines" % limits.max_headers)
            if self._header_bytes + len(line) > limits.max_header_bytes:
                return self._headers_too_large(
                    "more than %d bytes of headers"
                    % limits.max_header_bytes)
            self._header_bytes += len(line)
        self._lines += 1
        return twhttp.HTTPChannel.lineReceived(self, line)

    def lineLengthExceeded(self, line):
        # one line longer than any may be: the request line or a header
        if self._lines == 0:
            return self._uri_too_long()
        return self._headers_too_large(
            "a header line longer than %d bytes" % self.MAX_LENGTH)

    def _uri_too_long(self):
        limit = self.site.limits.max_request_line
        self.refuse(UriTooLong(
            message="Request-URI Too Long",
            explain="The request line is longer than the limit of %d bytes"
            % limit), "request line over %d bytes" % limit)

    def _headers_too_large(self, what):
        self.refuse(HeadersTooLarge(
            message="Request Header Fields Too Large",
            explain="The request has %s" % what), what)

    def allHeadersReceived(self):
        self._head_done = True
        err = self._check_head()
        if err is not None:
            self.refuse(err, None if err.code in (401, 403) else
                        err.explain)
            return
        self._arm(self.site.limits.body_timeout, "the request body")
        twhttp.HTTPChannel.allHeadersReceived(self)

    def _check_head(self):
        """The error answering this request before its body, or None."""
        request = self.requests[-1]
        err = self.site.check_head(self._command, self._path,
                                   request.requestHeaders)
        if err is not None:
            return err
        limit = self.site.limits.max_body
        if self.length is not None and self.length > limit:
            return PayloadTooLarge(
                message="Request Entity Too Large",
                explain="The request body of %d bytes is larger than the"
                " limit of %d bytes" % (self.length, limit))
        return None

    def allContentReceived(self):
        if self.refused:
            return
        self._disarm()
        twhttp.HTTPChannel.allContentReceived(self)

    def rawDataReceived(self, data):
        if self.refused:
            return
        twhttp.HTTPChannel.rawDataReceived(self, data)

    def checkPersistence(self, request, version):
        # one request a connection, as Ganeti's server
        request.responseHeaders.setRawHeaders(b"connection", [b"close"])
        return False

    # --- refusing -------------------------------------------------------

    def refuse(self, err, reason=None):
        """Answer ``err`` now, drop the rest of the request unread and
        close soon; ``reason`` (if any) is logged."""
        if self.refused:
            return
        self.refused = True
        self._disarm()
        self.setTimeout(None)
        self.clearLineBuffer()
        if reason:
            log.info("RAPI request from {peer} refused ({code}): {reason}",
                     peer=_peer(self.transport), code=err.code,
                     reason=reason)
        self.transport.write(render_error(err))
        self._linger_left = LINGER_BYTES
        self._deadline = self.callLater(LINGER, self._cut)

    def dataReceived(self, data):
        if self.refused:
            self._linger_left -= len(data)
            if self._linger_left < 0:
                self._cut()
            return
        twhttp.HTTPChannel.dataReceived(self, data)
        if not self.refused and not self._head_done and self.line_mode:
            # a line still arriving counts as well
            self._check_partial_line(len(self._buffer))

    def _check_partial_line(self, pending):
        limits = self.site.limits
        if self._lines == 0:
            if pending > limits.max_request_line:
                self._uri_too_long()
        elif self._header_bytes + pending > limits.max_header_bytes:
            self._headers_too_large("more than %d bytes of headers"
                                    % limits.max_header_bytes)

    def _cut(self):
        self._disarm()
        self.transport.abortConnection()

    def connectionLost(self, reason):
        self._disarm()
        twhttp.HTTPChannel.connectionLost(self, reason)


def _seconds(value):
    return "%g" % value


class RapiSite(server.Site):
    """The RAPI's twisted.web site: ``resource`` behind :class:`RapiChannel`
    connections; ``check_head(method, path, headers)`` returns the error
    answering a request before its body (or None)."""

    protocol = RapiChannel
    requestFactory = RapiRequest
    displayTracebacks = False

    def __init__(self, resource, check_head, limits=DEFAULTS, reactor=None):
        server.Site.__init__(self, resource, reactor=reactor)
        self.check_head = check_head
        self.limits = limits


class _Counted(policies.ProtocolWrapper):
    """A connection :class:`ConnectionLimiter` counts."""

    client = None


class ConnectionLimiter(policies.WrappingFactory):
    """Wraps the listening factory: at most ``limits.max_connections``
    connections at once, ``limits.max_client_connections`` of them from
    one address.  A connection beyond is closed when accepted; refusals are
    logged at most once every :data:`REFUSAL_LOG_INTERVAL` seconds."""

    protocol = _Counted

    def __init__(self, wrapped, limits, clock):
        policies.WrappingFactory.__init__(self, wrapped)
        self.limits = limits
        self.clock = clock
        self.count = 0
        self.per_client = {}
        self._refused = 0
        self._logged_at = None

    def buildProtocol(self, addr):
        client = getattr(addr, "host", None)
        if self.count >= self.limits.max_connections:
            return self._refuse(client, "%d connections in all"
                                % self.limits.max_connections)
        if self.per_client.get(client, 0) >= \
                self.limits.max_client_connections:
            return self._refuse(client, "%d connections from %s"
                                % (self.limits.max_client_connections,
                                   client))
        wrapped = self.wrappedFactory.buildProtocol(addr)
        if wrapped is None:
            return None
        self.count += 1
        self.per_client[client] = self.per_client.get(client, 0) + 1
        proto = self.protocol(self, wrapped)
        proto.client = client
        return proto

    def unregisterProtocol(self, proto):
        policies.WrappingFactory.unregisterProtocol(self, proto)
        self.count -= 1
        left = self.per_client.get(proto.client, 0) - 1
        if left > 0:
            self.per_client[proto.client] = left
        else:
            self.per_client.pop(proto.client, None)

    def _refuse(self, client, limit):
        self._refused += 1
        now = self.clock.seconds()
        if self._logged_at is None or \
                now - self._logged_at >= REFUSAL_LOG_INTERVAL:
            log.warn("RAPI: refused {count} connection(s) (the last from"
                     " {client}): at most {limit}", count=self._refused,
                     client=client, limit=limit)
            self._refused = 0
            self._logged_at = now
        return None
