"""The maintenance daemon's HTTP status (GET only, JSON):

* ``/`` -> ``[1]``, the protocol versions;
* ``/1/status`` -> the incidents not yet forgotten, each with ``id``,
  ``node`` (uuid), ``original``, ``repair-status``, ``jobs``, ``tag``
  (and, beyond that, ``node_name`` and ``action``);
* ``/1/counters`` -> rounds run, jobs submitted, and the diagnose reports
  refused by reason (unsigned, bad-signature, stale, malformed, ...).

Anything else is a 404 with a plain-text body.
"""

import json

from klein import Klein
from werkzeug.exceptions import MethodNotAllowed, NotFound


class StatusApp(object):
    """``daemon`` has ``status()`` (the incident list) and ``counters()``."""

    app = Klein()

    def __init__(self, daemon):
        self.daemon = daemon

    @staticmethod
    def _json(request, value):
        request.setHeader(b"content-type", b"application/json")
        return json.dumps(value, sort_keys=True).encode("utf-8")

    @app.route("/", methods=["GET"])
    def root(self, request):
        return self._json(request, [1])

    @app.route("/1/status", methods=["GET"])
    def status(self, request):
        return self._json(request, self.daemon.status())

    @app.route("/1/counters", methods=["GET"])
    def counters(self, request):
        return self._json(request, self.daemon.counters())

    @app.handle_errors(NotFound)
    def not_found(self, request, failure):
        request.setResponseCode(404)
        request.setHeader(b"content-type", b"text/plain")
        return b"Resource not found"

    @app.handle_errors(MethodNotAllowed)
    def not_allowed(self, request, failure):
        request.setResponseCode(405)
        request.setHeader(b"content-type", b"text/plain")
        return b"Only GET is served"
