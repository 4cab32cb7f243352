"""The confd request pipeline and its DatagramProtocol.

Every datagram goes through the checks below, cheapest first; the first one
that fails decides its fate, is counted under the name given, and is logged
(a few lines per reason and minute at most, see guards.LogThrottle):

======================  =======================================  ==========
check                   failure                                  outcome
======================  =======================================  ==========
size <= 4096 bytes      ``dropped_oversized``                    dropped
per-source rate limit   ``dropped_rate_limited``                 dropped
``plj0`` magic          ``dropped_bad_magic``                    dropped
JSON envelope           ``dropped_bad_envelope``                 dropped
HMAC-SHA1               ``dropped_bad_hmac``                     dropped
salt is a timestamp     ``dropped_bad_timestamp``                dropped
within 300 s of now     ``dropped_clock_skew``                   dropped
not seen before         ``dropped_replay``                       dropped
... or not too old      ``dropped_replay_floor`` (cache full)    dropped
inner JSON, ``rsalt``   ``dropped_bad_request``                  dropped
protocol 1              ``dropped_bad_protocol``                 dropped
``type`` an integer     ``error_bad_type``                       error reply
query shape/types       ``error_bad_query``                      error reply
known type              ``error_unknown_type``                   status 2
reply fits a datagram   ``error_reply_too_large``                error reply
======================  =======================================  ==========

Dropping is what Ganeti does for anything it cannot authenticate or parse
(there is no authenticated address to answer); once a request is
authenticated, fresh, and has an ``rsalt`` and protocol 1, it always gets a
signed reply.
"""

import collections
import re
import socket

from twisted.internet.protocol import DatagramProtocol
from twisted.logger import Logger

from ganeti import errors
from ganeti.confd import guards
from ganeti.confd import keys
from ganeti.confd import queries
from ganeti.confd import wire

log = Logger()

_TIMESTAMP = re.compile(r"^-?[0-9]{1,18}$").match
MAX_RSALT_LEN = 256  # a UUID is 36; anything much longer is not a client's
_BAD_RSALT = "rsalt missing or not a short string"
_MAX_REQUEST_SIZE = wire.MAX_REQUEST_SIZE
_MAX_REPLY_SIZE = wire.MAX_REPLY_SIZE
_MISSING = queries.MISSING
_REQUEST_COUNTERS = {t: "req_" + name
                     for t, name in wire.REQUEST_NAMES.items()}

DROP_REASONS = ("oversized", "rate_limited", "bad_magic", "bad_envelope",
                "bad_hmac", "bad_timestamp", "clock_skew", "replay",
                "replay_floor", "bad_request", "bad_protocol",
                "internal_error")
ERROR_REASONS = ("bad_type", "bad_query", "unknown_type", "reply_too_large")


class _Dropped(Exception):
    def __init__(self, reason, detail):
        Exception.__init__(self, reason, detail)
        self.reason = reason
        self.detail = detail


class ConfdProcessor(object):
    """Turns request datagrams into reply datagrams (or None: no reply).

    ``config`` is anything with a ``snapshot`` attribute (a
    :class:`ganeti.confd.reloader.ConfigWatcher`) holding the current
    :class:`ConfigSnapshot` or None.  ``clock`` provides ``seconds()``.
    """

    def __init__(self, hmac_key, config, clock, rate_limiter=None,
                 replay_cache=None, max_clock_skew=wire.MAX_CLOCK_SKEW,
                 log_throttle=None):
        # (replay_cache must use the same window as max_clock_skew)
        # hmac_key: the key, or keys.HmacKeys following the key files
        self.keys = keys.as_keys(hmac_key)
        self._signers = {}
        self.config = config
        self.clock = clock
        self.max_clock_skew = max_clock_skew
        self.rate_limiter = (rate_limiter if rate_limiter is not None
                             else guards.RateLimiter(clock))
        self.replay_cache = (replay_cache if replay_cache is not None
                             else guards.ReplayCache(clock, max_clock_skew))
        self.log_throttle = (log_throttle if log_throttle is not None
                             else guards.LogThrottle(clock))
        self.counters = collections.Counter()

    @property
    def hmac_key(self):
        return self.keys.signing()

    @property
    def signer(self):
        return self._signer(self.keys.signing())

    def _signer(self, key):
        signer = self._signers.get(key)
        if signer is None:
            if len(self._signers) > 8:   # keys of renewals long gone
                self._signers.clear()
            signer = self._signers[key] = wire.Signer(key)
        return signer

    def _verify(self, data):
        """(signer of the key that signed ``data``, msg, salt, digest).

        Every accepted key is tried, the current one first: during a key
        renewal a request may come signed with the old or the new key, and
        its answer is signed with the same key, which the asker has."""
        accepted = self.keys.accepted()
        signer = self._signer(accepted[0])
        try:
            return (signer,) + tuple(signer.verify(data))
        except errors.SignatureError as err:
            for key in accepted[1:]:
                other = self._signer(key)
                try:
                    return (other,) + tuple(other.verify(data))
                except errors.SignatureError:
                    continue
            raise err

    # --- entry point --------------------------------------------------------

    def handle(self, data, source):
        """The reply to ``data`` received from host ``source``, or None."""
        self.counters["received"] += 1
        try:
            reply = self._handle(data, source)
        except _Dropped as drop:
            self._note_drop(drop.reason, source, drop.detail)
            return None
        except Exception:
            # Never let one datagram take the daemon down; but say why.
            self.counters["dropped_internal_error"] += 1
            if self.log_throttle.allow("internal_error"):
                log.failure("confd: failure handling a datagram from"
                            " {source}", source=source)
            return None
        self.counters["answered"] += 1
        return reply

    def _note_drop(self, reason, source, detail):
        self.counters["dropped_" + reason] += 1
        if self.log_throttle.allow(reason):
            log.info("confd: dropped datagram from {source}: {reason}"
                     " ({detail})", source=source, reason=reason,
                     detail=detail)

    def _note_error(self, reason, source, detail):
        self.counters["error_" + reason] += 1
        if self.log_throttle.allow(reason):
            log.info("confd: error reply to {source}: {reason} ({detail})",
                     source=source, reason=reason, detail=detail)

    # --- the pipeline -------------------------------------------------------
    # Every datagram goes through here: the checks are written out, with one
    # clock reading, and the detailed messages are only built on failure.

    def _handle(self, data, source):
        if len(data) > _MAX_REQUEST_SIZE:
            raise _Dropped("oversized", "%d bytes" % len(data))
        now = self.clock.seconds()
        if not self.rate_limiter.allow(source, now):
            raise _Dropped("rate_limited", "over %g requests/s"
                           % self.rate_limiter.rate)
        try:
            signer, msg, salt, digest = self._verify(data)
        except errors.ConfdMagicError:
            raise _Dropped("bad_magic", "first bytes %r" % data[:4])
        except wire.EnvelopeError as err:
            raise _Dropped("bad_envelope", err)
        except errors.SignatureError as err:
            raise _Dropped("bad_hmac", err)

        # fresh: the salt is a timestamp near ours, the request not seen
        if not _TIMESTAMP(salt):
            raise _Dropped("bad_timestamp", "salt %r is not a Unix time"
                           % salt[:40])
        stamp = int(salt)
        if abs(stamp - now) > self.max_clock_skew:
            raise _Dropped("clock_skew", "request time %d is %+d s from ours"
                           % (stamp, stamp - int(now)))
        try:
            fresh = self.replay_cache.check_and_add(digest, stamp, now)
        except guards.BelowFloor as floor:
            raise _Dropped("replay_floor", "the full replay cache covers only"
                           " requests after %s" % floor.args[0])
        if not fresh:
            raise _Dropped("replay", "request %s was already answered"
                           % digest)

        try:
            inner = wire.decode_json(msg)
        except (ValueError, RecursionError) as err:
            raise _Dropped("bad_request", "message is not JSON: %s" % err)
        if type(inner) is not dict:
            raise _Dropped("bad_request", "message is not a JSON object")
        rsalt = inner.get("rsalt")
        if type(rsalt) is not str or not rsalt or len(rsalt) > MAX_RSALT_LEN:
            raise _Dropped("bad_request", _BAD_RSALT)
        try:
            rsalt.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate
            raise _Dropped("bad_request", _BAD_RSALT)
        protocol = inner.get("protocol")
        if protocol != wire.PROTOCOL_VERSION or protocol is True:
            raise _Dropped("bad_protocol", "protocol %r is not %d"
                           % (protocol, wire.PROTOCOL_VERSION))

        reply = signer.pack(rsalt, self._answer(inner, source))
        if len(reply) > _MAX_REPLY_SIZE:
            self._note_error("reply_too_large", source, "%d bytes"
                             % len(reply))
            reply = signer.pack(rsalt, wire.encode_reply(
                wire.STATUS_ERROR, "answer too large for one datagram"
                " (%d bytes, at most %d)" % (len(reply), _MAX_REPLY_SIZE),
                0))
        return reply

    def _answer(self, inner, source):
        req_type = inner.get("type")
        query = inner.get("query", _MISSING)
        if type(req_type) is not int:  # JSON gives int, bool, float...
            self._note_error("bad_type", source, "type %r" % (req_type,))
            return queries.ARGUMENT_ERROR
        if not (query is _MISSING or query is None
                or type(query) is str or type(query) is dict):
            self._note_error("bad_query", source, "query of type %s"
                             % type(query).__name__)
            return queries.ARGUMENT_ERROR
        counter = _REQUEST_COUNTERS.get(req_type)
        if counter is None:
            self._note_error("unknown_type", source, "type %d" % req_type)
        else:
            self.counters[counter] += 1
        try:
            return queries.answer(self.config.snapshot, req_type, query)
        except queries.BadQuery as err:
            self._note_error("bad_query", source, err)
            return queries.ARGUMENT_ERROR

    # --- reporting ----------------------------------------------------------

    def stats(self):
        """Counters and gauges; every documented key is present."""
        result = {"received": 0, "answered": 0}
        for reason in DROP_REASONS:
            result["dropped_" + reason] = 0
        for reason in ERROR_REASONS:
            result["error_" + reason] = 0
        for name in wire.REQUEST_NAMES.values():
            result["req_" + name] = 0
        result["send_failed"] = 0
        result.update(self.counters)
        result["replay_cache_entries"] = len(self.replay_cache)
        result["replay_cache_evicted"] = self.replay_cache.evicted
        result["rate_limit_sources"] = len(self.rate_limiter)
        result["log_lines_suppressed"] = sum(
            self.log_throttle.suppressed().values())
        stats = getattr(self.config, "stats", None)
        if stats is not None:
            result.update(stats())
        return result

    def log_stats(self):
        stats = self.stats()
        log.info("confd stats: {line}", line=" ".join(
            "%s=%s" % (k, stats[k]) for k in sorted(stats)), stats=stats)


class ConfdProtocol(DatagramProtocol):
    """Feeds datagrams to a :class:`ConfdProcessor` and sends its replies.

    The socket's receive buffer is enlarged (``receive_buffer`` bytes, if the
    kernel allows) so that a burst arriving while the reactor is busy waits
    instead of being dropped.  Replies go straight to the socket: Twisted's
    ``write`` would parse the address three times to check what ``recvfrom``
    just gave us.
    """

    def __init__(self, processor, receive_buffer=4 * 1024 * 1024):
        self.processor = processor
        self.receive_buffer = receive_buffer
        self._sendto = None  # the socket's own, when there is a real one

    def startProtocol(self):
        sock = getattr(self.transport, "socket", None)
        if isinstance(sock, socket.socket):
            self._sendto = sock.sendto
        if sock is None or not self.receive_buffer:
            return
        # SO_RCVBUFFORCE passes rmem_max when we may (root); else best effort
        for option in ("SO_RCVBUFFORCE", "SO_RCVBUF"):
            try:
                sock.setsockopt(socket.SOL_SOCKET, getattr(socket, option),
                                self.receive_buffer)
                return
            except (AttributeError, OSError):
                continue

    def datagramReceived(self, data, addr):
        reply = self.processor.handle(data, addr[0])
        if reply is None:
            return
        try:
            if self._sendto is not None:
                self._sendto(reply, addr)
            else:
                self.transport.write(reply, addr)
        except ConnectionRefusedError:
            pass  # an ICMP error of an earlier datagram (Twisted ignores it)
        except Exception as err:  # full socket buffer, unreachable peer
            self.processor.counters["send_failed"] += 1
            if self.processor.log_throttle.allow("send_failed"):
                log.warn("confd: cannot send reply to {addr}: {error}",
                         addr=addr, error=err)
