"""The node daemon's HTTP side: ``POST /<procedure>`` with a JSON body.

The reply is JSON ``[true, result]`` on success, ``[false, message]``
otherwise, with HTTP status 200 (success), 400 (bad arguments: the message
names the argument), 404 (unknown procedure), 413 (body too big) or 500 (the
operation failed).  Nothing a caller sends can stop the daemon: every error
is logged and answered.

Request bodies and replies bigger than :data:`INLINE_JSON_MAX` are decoded
and encoded in the daemon's thread pool (the procedures' ``run_blocking``):
a body twisted.web spooled to a temporary file is read from disk, and
parsing megabytes (an upload_file of config.data, a disk chunk) would hold
up every other call.  Small ones stay on the reactor: a thread hop costs
more than parsing a few bytes."""

import json
import os
from json.encoder import encode_basestring_ascii

from klein import Klein
from twisted.internet import defer
from twisted.logger import Logger
from twisted.web import server

from ganeti import errors
from ganeti.server.noded.procedure import error_message
from ganeti.utils import safejson

log = Logger()

#: Biggest request body accepted (config.data uploads are the big ones).
MAX_BODY = 256 * 1024 * 1024
#: Bodies and replies up to this size are decoded/encoded on the reactor,
#: bigger ones in the thread pool.
INLINE_JSON_MAX = 64 * 1024


#: Strings longer than this are escaped in slices (see _dumps).
SLICE = 1024 * 1024


def _dumps(value):
    """``json.dumps(value)``, with long strings escaped in slices: json's
    C encoder holds the interpreter (the GIL) for a whole string, which
    would hold up the reactor thread even when this runs in a worker."""
    if isinstance(value, str) and len(value) > SLICE:
        return '"%s"' % "".join(
            encode_basestring_ascii(value[start:start + SLICE])[1:-1]
            for start in range(0, len(value), SLICE))
    if isinstance(value, (list, tuple)) and not all(map(_flat, value)):
        return "[%s]" % ", ".join(_dumps(item) for item in value)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value) \
            and not all(map(_flat, value.values())):
        return "{%s}" % ", ".join("%s: %s" % (json.dumps(k), _dumps(v))
                                  for k, v in value.items())
    return json.dumps(value)


def _flat(value):
    """Whether json.dumps may encode ``value`` at once."""
    return not isinstance(value, (list, tuple, dict)) and \
        not (isinstance(value, str) and len(value) > SLICE)


def _encode(code, success, payload, dumps=json.dumps):
    """(HTTP status, body bytes) of a reply."""
    try:
        body = dumps([success, payload])
    except (TypeError, ValueError) as err:
        code, body = 500, json.dumps(
            [False, "the result cannot be encoded as JSON: %s" % err])
    return code, body.encode("utf-8")


def _send(request, code, body):
    request.setResponseCode(code)
    request.setHeader(b"content-type", b"application/json")
    return body


def _reply(request, code, success, payload):
    return _send(request, *_encode(code, success, payload))


def json_bigger_than(value, limit):
    """Whether ``value``'s JSON encoding probably exceeds ``limit`` bytes:
    counts string lengths and items, and stops as soon as it does (much
    cheaper than encoding)."""
    left = limit
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            left -= len(item) + 2
        elif isinstance(item, dict):
            left -= 4 * len(item) + 2
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            left -= len(item) + 2
            stack.extend(item)
        else:
            left -= 8
        if left < 0:
            return True
    return False


def _content_size(content):
    # a seek, not a read: cheap even for a body spooled to a file
    if content is None:
        return 0
    size = content.seek(0, os.SEEK_END)
    content.seek(0)
    return size


def _decode_body(content):
    """The request's JSON (file work when twisted.web spooled it to disk).

    ValueError for text that is not JSON or nests deeper than
    :data:`ganeti.utils.safejson.MAX_DEPTH` levels: a node not yet joined
    answers any certificate, and the parser (and every check after it)
    would recurse once per level."""
    raw = content.read() if content is not None else b""
    if not raw.strip():
        return []
    safejson.check_depth(raw)
    return json.loads(raw.decode("utf-8"))


class NodedHttpApi(object):
    """The Klein application: routes ``POST /<procedure>`` to procedures."""

    app = Klein()

    def __init__(self, reactor, procedures, max_body=MAX_BODY,
                 procedures_for=None):
        self._reactor = reactor
        self._procedures = procedures
        self._max_body = max_body
        # request -> the procedures this caller may use (bootstrap mode)
        self._procedures_for = procedures_for

    def resource(self):
        return self.app.resource()

    def _served(self, request):
        """The procedures this caller may use: a node not yet joined
        serves only ``version`` and ``join``."""
        if self._procedures_for is None:
            return self._procedures
        return self._procedures_for(request)

    @app.route("/", methods=["GET"])
    def index(self, request):
        """The names of the procedures this caller may use (handy when
        exploring with curl)."""
        return _reply(request, 200, True, self._served(request).names())

    @app.route("/<string:procedure>", methods=["POST", "PUT"])
    def call(self, request, procedure):
        return defer.Deferred.fromCoroutine(self._call(request, procedure))

    async def _call(self, request, name):
        started = self._reactor.seconds()
        peer = request.getClientAddress()
        peer = getattr(peer, "host", str(peer))
        procedures = self._served(request)
        if name not in procedures.table:
            log.warn("RPC from {peer}: unknown procedure {name!r}", peer=peer,
                     name=name)
            return _reply(request, 404, False,
                          "unknown procedure %r" % name)
        length = request.getHeader(b"content-length")
        if length is not None and length.isdigit() and \
                int(length) > self._max_body:
            return _reply(request, 413, False, "request body of %d bytes is"
                          " bigger than the %d allowed" % (int(length),
                                                           self._max_body))
        try:
            if _content_size(request.content) > INLINE_JSON_MAX:
                body = await self._procedures.run_blocking(
                    _decode_body, request.content)
            else:
                body = _decode_body(request.content)
        except (ValueError, UnicodeDecodeError) as err:
            return _reply(request, 400, False,
                          "%s: the request body is not JSON: %s" % (name, err))
        except OSError as err:
            log.warn("RPC {name} from {peer}: cannot read the request body:"
                     " {err}", name=name, peer=peer, err=err)
            return _reply(request, 500, False, "%s: cannot read the request"
                          " body: %s" % (name, error_message(err)))
        try:
            result = await procedures.call(name, body)
        except errors.ParameterError as err:
            msg = error_message(err)
            log.info("RPC {name} from {peer}: bad arguments: {msg}",
                     name=name, peer=peer, msg=msg)
            return _reply(request, 400, False, "%s: %s" % (name, msg))
        except (errors.GenericError, OSError) as err:
            msg = error_message(err)
            log.warn("RPC {name} from {peer} failed: {msg}", name=name,
                     peer=peer, msg=msg)
            return _reply(request, 500, False, "%s: %s" % (name, msg))
        except Exception as err:
            log.failure("RPC {name} from {peer}: unexpected error",
                        name=name, peer=peer)
            return _reply(request, 500, False,
                          "%s: internal error in the node daemon: %s: %s"
                          " (details in its log)" % (name,
                                                     type(err).__name__, err))
        log.debug("RPC {name} from {peer} done in {secs:.3f}s", name=name,
                  peer=peer, secs=self._reactor.seconds() - started)
        if json_bigger_than(result, INLINE_JSON_MAX):
            code, body = await self._procedures.run_blocking(
                _encode, 200, True, result, _dumps)
            return _send(request, code, body)
        return _reply(request, 200, True, result)


def make_site(reactor, procedures, procedures_for=None):
    site = server.Site(NodedHttpApi(reactor, procedures,
                                    procedures_for=procedures_for).resource(),
                       reactor=reactor)
    site.displayTracebacks = False
    return site
