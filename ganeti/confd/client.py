"""A confd client on Twisted: ask several servers, keep the best answer.

:meth:`ConfdClient.request` signs one request, sends it to ``coverage``
servers (by default min(#servers, 6), chosen at random, as Ganeti's client),
and returns a Deferred firing with a :class:`ConfdResult` once enough
servers replied (all of 1-2, n-1 of 3-4, a majority of more) or the timeout
passed with at least one reply; with none it fails with
:class:`ConfdTimeoutError`.

Replies are matched by their salt (our ``rsalt``), must come from a server we
asked, and must carry a valid HMAC; anything else is ignored and counted.
Among the replies an OK status beats an error and a higher serial beats a
lower one; two OK replies with the same serial but different answers mark
the result inconsistent (a server is mid-update or broken).
"""

import ipaddress
import random
import uuid

import attr
from twisted.internet import defer
from twisted.internet.protocol import DatagramProtocol
from twisted.logger import Logger

from ganeti import errors
from ganeti.confd import wire

log = Logger()


class ConfdTimeoutError(errors.ConfdClientError):
    """No server replied within the timeout."""


def needed_replies(peer_count):
    """How many replies settle a query sent to ``peer_count`` servers."""
    if peer_count < 3:
        return peer_count
    if peer_count < 5:
        return peer_count - 1
    return peer_count // 2 + 1


@attr.s
class ConfdResult(object):
    """The outcome of one query."""
    request_type = attr.ib()
    query = attr.ib()
    status = attr.ib()
    answer = attr.ib()
    serial = attr.ib()
    peer = attr.ib()                     # (host, port) whose reply was kept
    replies = attr.ib(factory=dict)      # (host, port) -> wire.Reply
    queried = attr.ib(factory=list)      # the (host, port) asked
    consistent = attr.ib(default=True)
    complete = attr.ib(default=True)     # enough replies before the timeout

    @property
    def ok(self):
        return self.status == wire.STATUS_OK


def _better(new, old):
    """True if reply ``new`` should replace the kept reply ``old``."""
    new_ok = new.status == wire.STATUS_OK
    old_ok = old.status == wire.STATUS_OK
    if new_ok != old_ok:
        return new_ok
    return new.serial > old.serial


class _Pending(object):

    def __init__(self, rsalt, req_type, query, peers, needed, deferred):
        self.rsalt = rsalt
        self.req_type = req_type
        self.query = query
        self.peers = peers
        self.needed = needed
        self.deferred = deferred
        self.replies = {}
        self.best = None  # (peer, reply)
        self.consistent = True
        self.timer = None
        self.timeout = None

    def add(self, peer, reply):
        self.replies[peer] = reply
        if self.best is None:
            self.best = (peer, reply)
            return
        kept = self.best[1]
        if (reply.status == kept.status == wire.STATUS_OK
                and reply.serial == kept.serial
                and reply.answer != kept.answer):
            self.consistent = False
        if _better(reply, kept):
            self.best = (peer, reply)

    def result(self, complete):
        peer, reply = self.best
        return ConfdResult(
            request_type=self.req_type, query=self.query,
            status=reply.status, answer=reply.answer, serial=reply.serial,
            peer=peer, replies=dict(self.replies), queried=list(self.peers),
            consistent=self.consistent, complete=complete)


class _ClientProtocol(DatagramProtocol):

    def __init__(self, client):
        self.client = client

    def datagramReceived(self, data, addr):
        self.client._received(data, addr)


def _normalise_peers(peers, port):
    """[(ip, port)] from "ip" strings or (ip, port) pairs; IP literals only."""
    result = []
    families = set()
    for peer in peers:
        host, peer_port = (peer, port) if isinstance(peer, str) else peer
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            raise errors.ConfdClientError(
                "confd server address %r is not an IP address" % (host,))
        families.add(address.version)
        result.append((str(address), int(peer_port)))
    if len(families) > 1:
        raise errors.ConfdClientError(
            "confd servers must all be IPv4 or all IPv6")
    return result


class ConfdClient(object):
    """Sends signed confd queries to a set of servers over one UDP port."""

    def __init__(self, hmac_key, peers, port=wire.DEFAULT_PORT, reactor=None,
                 timeout=wire.CLIENT_EXPIRE_TIMEOUT,
                 coverage=wire.DEFAULT_REQ_COVERAGE, interface=None,
                 rng=None, new_rsalt=None):
        if reactor is None:
            from twisted.internet import reactor
        self.reactor = reactor
        self.hmac_key = hmac_key
        self.port = port
        self.timeout = timeout
        self.coverage = coverage
        self.interface = interface
        self._rng = rng or random.Random()
        self._new_rsalt = new_rsalt or (lambda: str(uuid.uuid4()))
        self._pending = {}
        self._listening = None
        self.peers = []
        self.counters = {"sent": 0, "replies": 0, "bad_signature": 0,
                         "unknown_salt": 0, "wrong_peer": 0, "bad_reply": 0,
                         "duplicate": 0}
        self.update_peers(peers)

    def update_peers(self, peers):
        peers = _normalise_peers(peers, self.port)
        if not peers:
            raise errors.ConfdClientError("no confd server to ask")
        if self._listening is not None and self._family(peers) != \
                self._family(self.peers):
            raise errors.ConfdClientError("cannot switch address family")
        self.peers = peers

    @staticmethod
    def _family(peers):
        return ipaddress.ip_address(peers[0][0]).version

    def _listen(self):
        if self._listening is None:
            interface = self.interface
            if interface is None:
                addresses = [ipaddress.ip_address(h) for h, _ in self.peers]
                v6 = addresses[0].version == 6
                # Talking only to this host: do not open a port to the world.
                if all(a.is_loopback for a in addresses):
                    interface = "::1" if v6 else "127.0.0.1"
                else:
                    interface = "::" if v6 else ""
            # a reply may be as long as a server sends (Twisted would cut
            # it at 8192 bytes, leaving a datagram whose signature fails)
            self._listening = self.reactor.listenUDP(
                0, _ClientProtocol(self), interface=interface,
                maxPacketSize=wire.MAX_REPLY_SIZE)
        return self._listening

    def close(self):
        """Stop listening; outstanding queries fail with CancelledError."""
        for pending in list(self._pending.values()):
            pending.deferred.cancel()
        listening, self._listening = self._listening, None
        if listening is not None:
            return defer.maybeDeferred(listening.stopListening)
        return defer.succeed(None)

    # --- sending ------------------------------------------------------------

    def request(self, req_type, query=None, coverage=None, timeout=None):
        """Query the servers; a Deferred firing with a ConfdResult."""
        if not isinstance(req_type, int) or isinstance(req_type, bool):
            raise errors.ConfdClientError("request type %r is not an integer"
                                          % (req_type,))
        coverage = self.coverage if coverage is None else coverage
        timeout = self.timeout if timeout is None else timeout
        count = len(self.peers) if coverage <= 0 else min(coverage,
                                                          len(self.peers))
        peers = (list(self.peers) if count >= len(self.peers)
                 else self._rng.sample(self.peers, count))
        rsalt = self._new_rsalt()
        if rsalt in self._pending:
            raise errors.ConfdClientError("duplicate rsalt %s" % rsalt)
        msg = wire.encode_request(req_type, rsalt, query)
        # The salt is our clock, in whole seconds, as servers check it.
        datagram = wire.pack(self.hmac_key, str(int(self.reactor.seconds())),
                             msg)
        if len(datagram) > wire.MAX_REQUEST_SIZE:
            raise errors.UdpDataSizeError(
                "request of %d bytes exceeds confd's %d" %
                (len(datagram), wire.MAX_REQUEST_SIZE))

        d = defer.Deferred(lambda _: self._forget(rsalt))
        pending = _Pending(rsalt, req_type, query, peers,
                           needed_replies(len(peers)), d)
        self._pending[rsalt] = pending
        pending.timeout = timeout
        pending.timer = self.reactor.callLater(timeout, self._expire, rsalt)
        transport = self._listen()
        for peer in peers:
            try:
                transport.write(datagram, peer)
                self.counters["sent"] += 1
            except Exception as err:
                log.warn("confd client: cannot send to {peer}: {error}",
                         peer=peer, error=err)
        return d

    def _forget(self, rsalt):
        pending = self._pending.pop(rsalt, None)
        if pending is not None and pending.timer is not None \
                and pending.timer.active():
            pending.timer.cancel()
        return pending

    def _expire(self, rsalt):
        pending = self._pending.pop(rsalt, None)
        if pending is None:
            return
        if pending.best is None:
            pending.deferred.errback(ConfdTimeoutError(
                "no reply from %s within %g s" % (
                    ", ".join("%s:%d" % p for p in pending.peers),
                    pending.timeout)))
        else:
            pending.deferred.callback(pending.result(complete=False))

    # --- receiving ----------------------------------------------------------

    def _received(self, data, addr):
        try:
            env = wire.unpack(data, self.hmac_key)
        except errors.GenericError as err:
            self.counters["bad_signature"] += 1
            log.debug("confd client: ignoring datagram from {addr}: {error}",
                      addr=addr, error=err)
            return
        pending = self._pending.get(env.salt)
        if pending is None:
            self.counters["unknown_salt"] += 1
            return
        peer = (str(ipaddress.ip_address(addr[0])), addr[1])
        if peer not in pending.peers:
            self.counters["wrong_peer"] += 1
            return
        if peer in pending.replies:
            self.counters["duplicate"] += 1
            return
        try:
            reply = wire.decode_reply(env.msg)
        except wire.ReplyError as err:
            self.counters["bad_reply"] += 1
            log.warn("confd client: bad reply from {peer}: {error}",
                     peer=peer, error=err)
            return
        self.counters["replies"] += 1
        pending.add(peer, reply)
        if len(pending.replies) >= pending.needed:
            self._forget(env.salt)
            pending.deferred.callback(pending.result(complete=True))


def query_once(hmac_key, peers, req_type, query=None, **kwargs):
    """One query with a throw-away client; the port is closed afterwards."""
    client = ConfdClient(hmac_key, peers, **kwargs)

    async def run():
        try:
            return await client.request(req_type, query)
        finally:
            await client.close()
    return defer.Deferred.fromCoroutine(run())

