"""Whether this node's daemons answer, asked the way their clients ask.

* ``ganeti-noded`` (every node): the ``version`` procedure over mutual TLS
  with the cluster certificate;
* ``ganeti-rapi`` (master): ``GET /version`` over HTTPS; any HTTP answer
  counts (an unauthorised one too, as in Ganeti's watcher);
* ``ganeti-confd`` (master): a signed ``ping``.

The master daemon needs no probe: the watcher's own luxi queries are one.
The watcher only reports a daemon that does not answer; starting daemons is
left to the service manager (systemd units in etc/systemd) or
``gnt-cluster init``, which own them.
"""

import os

from twisted.internet import defer
from twisted.web import client as web_client
from zope.interface import Interface, implementer

from ganeti import constants
from ganeti import crypto
from ganeti import rpc
from ganeti.confd import client as confd_client
from ganeti.confd import wire as confd_wire

__all__ = ["IDaemonProbes", "DaemonProbes", "NODED", "RAPI", "CONFD"]

NODED = "ganeti-noded"
RAPI = "ganeti-rapi"
CONFD = "ganeti-confd"

#: Seconds a daemon has to answer.
PROBE_TIMEOUT = 10


class IDaemonProbes(Interface):
    """Checks of this node's daemons."""

    def check(master):
        """Deferred of ``[(daemon, problem or None)]``: the daemons this
        node should run (more on the master, ``master`` true) and why each
        did not answer (None: it did)."""


@implementer(IDaemonProbes)
class DaemonProbes(object):
    """Probes of the daemons listening on ``address`` of the node rooted
    at ``paths``."""

    def __init__(self, reactor, paths, address,
                 noded_port=constants.DEFAULT_NODED_PORT,
                 rapi_port=constants.DEFAULT_RAPI_PORT,
                 confd_port=constants.DEFAULT_CONFD_PORT,
                 timeout=PROBE_TIMEOUT):
        self.reactor = reactor
        self.paths = paths
        self.address = address
        self.noded_port = noded_port
        self.rapi_port = rapi_port
        self.confd_port = confd_port
        self.timeout = timeout

    def check(self, master):
        return defer.Deferred.fromCoroutine(self._check(master))

    async def _check(self, master):
        probes = [(NODED, self._noded)]
        if master:
            probes += [(RAPI, self._rapi), (CONFD, self._confd)]
        problems = await defer.gatherResults(
            [defer.Deferred.fromCoroutine(probe()) for (_, probe) in probes])
        return [(name, problem)
                for ((name, _), problem) in zip(probes, problems)]

    async def _noded(self):
        pem = crypto.server_pem_path(self.paths)
        if not os.path.exists(pem):
            return ("no cluster certificate at %s (not a cluster member?)"
                    % pem)
        address = rpc.NodeAddress(self.address, self.noded_port)
        client = rpc.RpcClient(self.reactor, pem, lambda _node: address,
                               connect_timeout=self.timeout)
        try:
            result = await client.call("self", "version",
                                       timeout=self.timeout)
        finally:
            await client.close()
        if result.success:
            return None
        return result.fail_msg or "no answer"

    async def _rapi(self):
        pool = web_client.HTTPConnectionPool(self.reactor, persistent=False)
        agent = web_client.Agent(self.reactor,
                                 contextFactory=crypto.AnyServerPolicy(),
                                 connectTimeout=self.timeout, pool=pool)
        url = "https://%s:%d/version" % (self.address, self.rapi_port)
        d = agent.request(b"GET", url.encode("ascii"))
        d.addTimeout(self.timeout, self.reactor)
        try:
            response = await d
            await web_client.readBody(response)
        except defer.TimeoutError:
            return "no answer from %s within %ss" % (url, self.timeout)
        except Exception as err:
            return "%s: %s" % (url, _reason(err))
        finally:
            await pool.closeCachedConnections()
        return None

    async def _confd(self):
        try:
            key = confd_wire.read_hmac_key(self.paths.hmac_key_file)
        except OSError as err:
            return "cannot read the confd key: %s" % (err.strerror or err)
        try:
            result = await confd_client.query_once(
                key, [self.address], confd_wire.REQ_PING,
                port=self.confd_port, reactor=self.reactor,
                timeout=self.timeout)
        except Exception as err:
            return _reason(err)
        if result.ok:
            return None
        return "ping answered with status %s" % (result.status,)


def _reason(err):
    """A short text for a connection failure (Twisted wraps them)."""
    reasons = getattr(err, "reasons", None)
    if reasons:
        return "; ".join(r.getErrorMessage() for r in reasons)
    return str(err) or type(err).__name__
