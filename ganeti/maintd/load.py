"""The nodes' CPU load, for balancing with load data (the
``maint_balance_load`` switch).

The figure is ``cpu_total`` of each node's ``cpu-avg-load`` report, as
``hbal --mond=yes`` reads it: ``/1/report/default/cpu-avg-load`` of the
node's monitoring daemon (plain HTTP, port ``--mond-port``).  The daemon
asks through :class:`ILoadSource`, so another source (or a test's fake)
can stand in; a node that gives no figure keeps hbal's default weights.
"""

import json

from twisted.internet import defer
from twisted.logger import Logger
from twisted.web.client import Agent, readBody
from zope.interface import Interface, implementer

from ganeti.htools import dynload
from ganeti.htools import types as HT

log = Logger()

#: the collector's path on a monitoring daemon (category none: default)
REPORT_PATH = "/1/report/default/cpu-avg-load"


class ILoadSource(Interface):
    """Where the maintenance daemon gets the nodes' CPU load."""

    def fetch(nodes):
        """Deferred of {node uuid: cpu_total (float)} of the nodes (dicts
        with ``uuid``, ``name``, ``primary_ip``) that gave a figure."""


@implementer(ILoadSource)
class MondLoadSource(object):
    """The ``cpu-avg-load`` reports of the nodes' monitoring daemons."""

    def __init__(self, reactor, port, agent=None, timeout=5.0):
        self.reactor = reactor
        self.port = port
        self.agent = agent or Agent(reactor, connectTimeout=timeout)
        self.timeout = timeout
        #: nodes that gave no figure, by reason (unreachable, malformed)
        self.missing = {}

    async def _one(self, node):
        url = "http://%s:%d%s" % (node["primary_ip"], self.port,
                                  REPORT_PATH)
        try:
            d = self.agent.request(b"GET", url.encode("ascii"))
            d.addTimeout(self.timeout, self.reactor)
            response = await d
            body = await readBody(response)
            if response.code != 200:
                raise ValueError("HTTP %d" % response.code)
        except Exception as err:
            self._miss("unreachable", node, err)
            return None
        try:
            return dynload.cpu_total(json.loads(body.decode("utf-8")))
        except (ValueError, HT.HtoolsError) as err:
            self._miss("malformed", node, err)
            return None

    def _miss(self, reason, node, err):
        self.missing[reason] = self.missing.get(reason, 0) + 1
        log.debug("No CPU load from {node} ({reason}): {err}",
                  node=node["name"], reason=reason, err=err)

    def fetch(self, nodes):
        nodes = list(nodes)
        d = defer.gatherResults(
            [defer.Deferred.fromCoroutine(self._one(n)) for n in nodes],
            consumeErrors=True)
        return d.addCallback(lambda loads: {
            n["uuid"]: v for n, v in zip(nodes, loads) if v is not None})
