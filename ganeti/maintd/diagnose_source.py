"""The nodes' self-diagnosis, as the maintenance daemon reads it: the
``diagnose`` report of each node's monitoring daemon, over HTTP, its
signature checked with the cluster HMAC key.

A report that is unsigned, badly signed, stale or malformed is refused
and counted by reason (``refused``); a node whose monitoring daemon does
not answer is counted as ``unreachable``.  Neither becomes an incident.
"""

import json

from twisted.internet import defer
from twisted.logger import Logger
from twisted.web.client import Agent, readBody

from ganeti.confd import keys

log = Logger()

#: the collector's name (Ganeti 3.1's)
COLLECTOR = "diagnose"


class MondDiagnoseSource(object):

    def __init__(self, reactor, hmac_key, port, max_age=60.0, agent=None,
                 timeout=5.0):
        self.reactor = reactor
        # the key, or keys.HmacKeys following the key files
        self.keys = keys.as_keys(hmac_key)
        self.port = port
        self.max_age = max_age
        self.agent = agent or Agent(reactor, connectTimeout=timeout)
        self.timeout = timeout
        #: reason -> reports refused for it
        self.refused = {}

    def _count(self, reason):
        self.refused[reason] = self.refused.get(reason, 0) + 1

    async def _get(self, node):
        url = "http://%s:%d/1/report/all" % (node["primary_ip"], self.port)
        d = self.agent.request(b"GET", url.encode("ascii"))
        d.addTimeout(self.timeout, self.reactor)
        response = await d
        body = await readBody(response)
        if response.code != 200:
            raise ValueError("HTTP %d" % response.code)
        return json.loads(body.decode("utf-8"))

    async def _one(self, node):
        from ganeti.mond import diagnose
        try:
            reports = await self._get(node)
        except Exception as err:
            self._count("unreachable")
            log.debug("No report from {node}: {err}", node=node["name"],
                      err=err)
            return None
        found = [r for r in reports if isinstance(r, dict) and
                 r.get("name") == COLLECTOR] \
            if isinstance(reports, list) else []
        if not found:
            self._count("missing")
            return None
        try:
            return diagnose.open_report(found[0].get("data"),
                                        list(self.keys.accepted()),
                                        self.reactor.seconds(), self.max_age)
        except diagnose.BadReport as err:
            self._count(err.reason)
            log.warn("Refused the diagnose report of {node}: {reason}",
                     node=node["name"], reason=err.reason)
            return None

    def fetch(self, nodes):
        """Deferred of {node uuid: checked report} of the nodes that gave
        a valid one."""
        nodes = list(nodes)
        d = defer.gatherResults(
            [defer.Deferred.fromCoroutine(self._one(n)) for n in nodes],
            consumeErrors=True)
        return d.addCallback(lambda reports: {
            n["uuid"]: r for n, r in zip(nodes, reports) if r is not None})
