"""The monitoring daemon's HTTP interface, as Ganeti's (GET only, JSON):

* ``/`` -> ``[1]``, the API versions;
* ``/1`` -> ``null``;
* ``/1/list/collectors`` -> ``[name, category, kind]`` of every active
  collector (category ``"default"`` for collectors without one);
* ``/1/report/all`` -> the reports of all active collectors;
* ``/1/report/<category>/<collector>`` -> one report;
* ``/metrics`` -> Prometheus' text format (not in Ganeti;
  :mod:`ganeti.mond.metrics`).

Anything else is a 404 with a plain-text body.
"""

import json

from klein import Klein
from twisted.internet import defer
from werkzeug.exceptions import MethodNotAllowed, NotFound

from ganeti import constants
from ganeti.metrics import CONTENT_TYPE

NOT_FOUND = b"Resource not found"
NO_REPORT = b"Unable to produce a report for the requested resource"


class MondApp(object):

    app = Klein()

    def __init__(self, daemon, metrics=None):
        self.daemon = daemon
        #: a MondMetrics (None: no /metrics)
        self.metrics = metrics

    def resource(self):
        return self.app.resource()

    @staticmethod
    def _json(request, value):
        request.setHeader(b"content-type", b"application/json")
        return json.dumps(value).encode("utf-8")

    @staticmethod
    def _not_found(request, body):
        request.setResponseCode(404)
        request.setHeader(b"content-type", b"text/plain")
        return body

    @app.route("/", methods=["GET"])
    def root(self, request):
        return self._json(request, [constants.MOND_LATEST_API_VERSION])

    @app.route("/1", methods=["GET"])
    def version(self, request):
        return self._json(request, None)

    @app.route("/1/list/collectors", methods=["GET"])
    def collectors(self, request):
        return self._json(request, self.daemon.listing())

    @app.route("/1/report/all", methods=["GET"])
    def report_all(self, request):
        async def run():
            reports = await self.daemon.reports()
            return self._json(request, [r.to_dict() for r in reports])
        return defer.Deferred.fromCoroutine(run())

    @app.route("/1/report/<category>/<name>", methods=["GET"])
    def report_one(self, request, category, name):
        collector = self.daemon.find(category, name)
        if collector is None:
            return self._not_found(request, NO_REPORT)

        async def run():
            report = await self.daemon.report(collector.name)
            if report is None:
                return self._not_found(request, NO_REPORT)
            return self._json(request, report.to_dict())
        return defer.Deferred.fromCoroutine(run())

    @app.route("/metrics", methods=["GET"])
    def metrics_page(self, request):
        if self.metrics is None:
            return self._not_found(request, NOT_FOUND)

        def answer(data):
            request.setHeader(b"content-type", CONTENT_TYPE.encode("ascii"))
            return data
        return self.metrics.scrape().addCallback(answer)

    @app.handle_errors(NotFound)
    def not_found(self, request, failure):
        return self._not_found(request, NOT_FOUND)

    @app.handle_errors(MethodNotAllowed)
    def not_allowed(self, request, failure):
        request.setResponseCode(405)
        request.setHeader(b"content-type", b"text/plain")
        return b"Only GET is served"
