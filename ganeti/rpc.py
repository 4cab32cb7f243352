"""The master's client for node daemons (``ganeti-noded``).

``RpcClient.call(node, procedure, args)`` POSTs the JSON argument list to
``https://<node address>:<port>/<procedure>`` over mutual TLS with the
cluster certificate (see :mod:`ganeti.crypto`) and fires an
:class:`RpcResult`.  It never fails: an offline node (not contacted), a
node that cannot be resolved or reached, a timeout, a TLS refusal, a bad
reply and an error reported by the node all become a failed result whose
``fail_msg`` names the node and says what happened.  ``call_many`` calls
several nodes in parallel, at most ``max_parallel`` of them at a time, and
encodes the arguments once for all of them; :class:`PreparedArgs` does the
same for a caller that sends one argument list to nodes one by one, and
:func:`fan_out` bounds any other per-node work the same way.

Nodes are resolved by a *resolver*: ``resolver(node) -> NodeAddress`` (or
an ``(address, port)`` / ``(address, port, offline)`` tuple); see
:func:`config_resolver` for one built on the configuration.
"""

import json

import attr
from OpenSSL import SSL
from twisted.internet import defer, error as net_error
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import client as web_client
from twisted.web.http_headers import Headers
from twisted.web.iweb import IBodyProducer
from zope.interface import implementer

from ganeti import constants
from ganeti import crypto
from ganeti import errors

__all__ = ["NodeAddress", "RpcResult", "RpcClient", "PreparedArgs",
           "fan_out", "DEFAULT_MAX_PARALLEL", "config_resolver",
           "PROCEDURE_TIMEOUTS", "TIMEOUT_URGENT", "TIMEOUT_FAST",
           "TIMEOUT_NORMAL", "TIMEOUT_SLOW", "TIMEOUT_1DAY"]

log = Logger()

# Ganeti's RPC timeout classes, in seconds.
TIMEOUT_URGENT = 60
TIMEOUT_FAST = 5 * 60
TIMEOUT_NORMAL = 15 * 60
TIMEOUT_SLOW = 3600
TIMEOUT_1DAY = 86400

#: Default timeout of each procedure; others get TIMEOUT_NORMAL.
PROCEDURE_TIMEOUTS = {
    "version": TIMEOUT_URGENT,
    "node_info": TIMEOUT_URGENT,
    "instance_info": TIMEOUT_URGENT,
    "all_instances_info": TIMEOUT_URGENT,
    "instance_list": TIMEOUT_URGENT,
    "os_diagnose": TIMEOUT_FAST,
    "os_validate": TIMEOUT_FAST,
    "upload_file": TIMEOUT_NORMAL,
    "write_ssconf_files": TIMEOUT_NORMAL,
    "instance_run_rename": TIMEOUT_SLOW,
    "restricted_command": TIMEOUT_SLOW,
    "repair_command": TIMEOUT_SLOW,
    "instance_os_add": TIMEOUT_1DAY,
    "instance_os_export": TIMEOUT_1DAY,
    "instance_os_import": TIMEOUT_1DAY,
    "remote_export_send": TIMEOUT_1DAY,
    "export_list": TIMEOUT_FAST,
    "export_info": TIMEOUT_FAST,
}


#: Requests of one fan-out in flight at once: enough to keep a cluster's
#: nodes busy, few enough that a call to thousands of nodes does not open
#: thousands of TLS connections (and handshakes) at the same moment.
DEFAULT_MAX_PARALLEL = 50


class PreparedArgs(tuple):
    """An argument list encoded once: the same ``PreparedArgs`` given to
    many calls (config.data to every master candidate, ssconf to every
    node) is serialised to JSON once, not once per node.  It is a tuple,
    so anything taking an argument list takes it."""

    def __new__(cls, args):
        self = tuple.__new__(cls, args)
        self.body = json.dumps(list(self)).encode("utf-8")
        return self


def _encode(args):
    if isinstance(args, PreparedArgs):
        return args.body
    if isinstance(args, dict):
        return json.dumps(args).encode("utf-8")
    return json.dumps(list(args)).encode("utf-8")


def fan_out(items, function, limit=DEFAULT_MAX_PARALLEL):
    """``function(item)`` (a Deferred or a coroutine) for every item, at
    most ``limit`` running at once, started in order; a Deferred firing
    with the list of results in the order of ``items``, or failing with
    the first failure (:class:`twisted.internet.defer.FirstError`)."""
    if limit < 1:
        raise ValueError("limit must be at least 1, not %r" % (limit,))
    semaphore = defer.DeferredSemaphore(limit)
    return defer.gatherResults(
        [semaphore.run(defer.maybeDeferred, function, item)
         for item in items], consumeErrors=True)


@attr.s(frozen=True)
class NodeAddress(object):
    address = attr.ib()
    port = attr.ib(default=constants.DEFAULT_NODED_PORT)
    offline = attr.ib(default=False)


@attr.s(frozen=True)
class RpcResult(object):
    """The outcome of one call to one node."""
    node = attr.ib()
    procedure = attr.ib()
    success = attr.ib()
    payload = attr.ib(default=None)
    fail_msg = attr.ib(default=None)
    #: True if the node is offline and was not contacted
    offline = attr.ib(default=False)

    def raise_if_failed(self, prefix=None):
        """Raise RemoteError(fail_msg) for a failed call; else the payload."""
        if not self.success:
            msg = self.fail_msg
            if prefix:
                msg = "%s: %s" % (prefix, msg)
            raise errors.RemoteError(msg)
        return self.payload


def config_resolver(store, port=constants.DEFAULT_NODED_PORT):
    """A resolver for nodes of a :class:`ganeti.config.ConfigStore`, by
    name or UUID: their primary IP, offline flag from the config."""
    def resolve(node):
        obj = store.get_node(node)
        return NodeAddress(obj.primary_ip, port, bool(obj.offline))
    return resolve


def _as_address(value):
    if isinstance(value, NodeAddress):
        return value
    if isinstance(value, (tuple, list)) and len(value) in (2, 3):
        return NodeAddress(*value)
    raise TypeError("a resolver must return a NodeAddress or (address, port"
                    "[, offline]), not %r" % (value,))


def _url(address, port, procedure):
    host = "[%s]" % address if ":" in address else address
    return ("https://%s:%d/%s" % (host, port, procedure)).encode("ascii")


def _describe_failure(failure):
    """Words for why a request failed at the connection level."""
    exc = failure.value
    reasons = getattr(exc, "reasons", None)   # ResponseNeverReceived & co.
    if reasons:
        inner = [r.value for r in reasons]
        if any(isinstance(e, SSL.Error) for e in inner):
            return ("TLS handshake refused (the peer is not using this"
                    " cluster's certificate, or did not accept ours)")
        if any(isinstance(e, (net_error.ConnectionLost,
                              net_error.ConnectionDone)) for e in inner):
            return ("connection closed before an answer (TLS refused by the"
                    " peer, or the daemon stopped)")
        return "; ".join(str(e) or type(e).__name__ for e in inner)
    if isinstance(exc, SSL.Error):
        return "TLS error: %s" % exc
    if isinstance(exc, net_error.ConnectionRefusedError):
        return "connection refused (is ganeti-noded running there?)"
    if isinstance(exc, net_error.ConnectError):
        return "cannot connect: %s" % (exc.osError or exc)
    return "%s: %s" % (type(exc).__name__, exc)


class RpcClient(object):
    """Calls node daemons; one persistent connection pool for all nodes.

    ``clock`` (IReactorTime, default ``reactor``) drives the timeouts, so
    tests can use a Clock.  ``max_parallel`` bounds each :meth:`call_many`
    (a call's timeout starts when its request does).  Call :meth:`close`
    when done.
    """

    def __init__(self, reactor, cert_path, resolver, clock=None,
                 cert=None, connect_timeout=10,
                 max_parallel=DEFAULT_MAX_PARALLEL, trusted=()):
        if max_parallel < 1:
            raise ValueError("max_parallel must be at least 1, not %r"
                             % (max_parallel,))
        self._reactor = reactor
        self._clock = clock or reactor
        self._resolver = resolver
        self._connect_timeout = connect_timeout
        self.max_parallel = max_parallel
        if cert is None:
            # a renewal under way leaves the next certificate (or the
            # previous one) beside server.pem: nodes may present either
            creds = crypto.load_node_credentials(cert_path)
            cert, trusted = creds.cert, creds.trusted
        self._pool = None
        self._old_pools = []
        self.use_certificate(cert, trusted)

    def use_certificate(self, cert, trusted=()):
        """Present ``cert`` from now on and accept node daemons presenting
        it or one of ``trusted`` (a certificate renewal).  Requests under
        way finish on their connections; new ones get new connections."""
        if self._pool is not None:
            self._pool.closeCachedConnections()
            self._old_pools.append(self._pool)
        self.cert = cert
        self.trusted = tuple(t for t in trusted
                             if t.digest() != cert.digest())
        self._pool = web_client.HTTPConnectionPool(self._reactor,
                                                   persistent=True)
        self._pool.maxPersistentPerHost = 4
        self._agent = web_client.Agent(
            self._reactor, contextFactory=crypto.ClientPolicy(
                cert, trusted=self.trusted),
            connectTimeout=self._connect_timeout, pool=self._pool)

    def close(self):
        """Drop pooled connections; Deferred."""
        pools, self._old_pools = [self._pool] + self._old_pools, []
        return defer.gatherResults([p.closeCachedConnections()
                                    for p in pools])

    def call(self, node, procedure, args=(), timeout=None):
        """Deferred[RpcResult]; never errbacks (except on cancel)."""
        return defer.Deferred.fromCoroutine(
            self._call(node, procedure, args, timeout))

    def call_many(self, nodes, procedure, args=(), timeout=None):
        """Call every node, ``max_parallel`` at a time, the arguments
        encoded once: Deferred[{node: RpcResult}]."""
        nodes = list(nodes)
        if not isinstance(args, (PreparedArgs, dict)):
            args = PreparedArgs(args)
        d = fan_out(nodes, lambda node: self._call(node, procedure, args,
                                                    timeout),
                    self.max_parallel)
        return d.addCallback(lambda results: dict(zip(nodes, results)))

    async def _call(self, node, procedure, args, timeout):
        def failed(msg, offline=False):
            return RpcResult(node=node, procedure=procedure, success=False,
                             fail_msg=msg, offline=offline)
        try:
            addr = _as_address(self._resolver(node))
        except Exception as err:
            return failed("node %s: cannot resolve its address: %s"
                          % (node, err))
        if addr.offline:
            return failed("node %s is offline (not contacted)" % node,
                          offline=True)
        body = _encode(args)
        if timeout is None:
            timeout = PROCEDURE_TIMEOUTS.get(procedure, TIMEOUT_NORMAL)
        where = "node %s (%s:%d)" % (node, addr.address, addr.port)
        request = self._request(addr, procedure, body)
        # Our own timer rather than addTimeout: a cancelled request fails
        # with various wrapped errors depending on how far it got.
        timed_out = []

        def expire():
            timed_out.append(True)
            request.cancel()
        timer = self._clock.callLater(timeout, expire)
        try:
            code, raw = await request
        except Exception:
            if timed_out:
                return failed("%s: no answer to %s within %ss"
                              % (where, procedure, timeout))
            return failed("%s: %s failed: %s" % (where, procedure,
                                                 _describe_failure(Failure())))
        finally:
            if timer.active():
                timer.cancel()
        try:
            reply = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            reply = None
        if not (isinstance(reply, list) and len(reply) == 2 and
                isinstance(reply[0], bool)):
            return failed("%s: invalid reply to %s (HTTP %d): %r"
                          % (where, procedure, code, raw[:200]))
        success, payload = reply
        if success and code == 200:
            return RpcResult(node=node, procedure=procedure, success=True,
                             payload=payload)
        return failed("node %s: %s" % (node, payload))

    def _request(self, addr, procedure, body):
        d = self._agent.request(
            b"POST", _url(addr.address, addr.port, procedure),
            Headers({b"content-type": [b"application/json"]}),
            _Body(body))

        def read(response):
            return web_client.readBody(response).addCallback(
                lambda raw: (response.code, raw))
        return d.addCallback(read)


@implementer(IBodyProducer)
class _Body(object):
    """A request body written in one go (no cooperator involved)."""

    def __init__(self, data):
        self._data = data
        self.length = len(data)

    def startProducing(self, consumer):
        consumer.write(self._data)
        return defer.succeed(None)

    def pauseProducing(self):
        pass

    def resumeProducing(self):
        pass

    def stopProducing(self):
        pass
