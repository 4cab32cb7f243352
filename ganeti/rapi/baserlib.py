"""Helpers shared by the RAPI resources.

* :class:`HttpError` and its subclasses: an error answer, rendered as
  ``{"code": ..., "message": ..., "explain": ...}`` (the body Ganeti's
  clients parse);
* :func:`parse_body`: the JSON request body, with Ganeti's strict
  ``Content-Type`` rule (415) and a 400 for undecodable JSON, JSON nested
  too deep and numbers no parameter can hold;
* :class:`QueryArgs`: the query string (``?bulk=1&tag=a&tag=b``) with typed
  getters whose errors name the parameter;
* :func:`build_opcode`: an opcode from URL, query and body parameters,
  validated completely before anything is submitted (every 400 names the
  parameter and the reason);
* the list and bulk formats (:func:`id_list`, :func:`rows_to_dicts`).
"""

import http
import json

from ganeti import constants
from ganeti import errors
from ganeti import opcodes
from ganeti.query import base as query_base
from ganeti.utils import safejson

JSON_TYPE = "application/json"
#: The ``Server`` header of every answer, as Ganeti's
SERVER = "Ganeti %s" % constants.RELEASE_VERSION


# --- Errors ---------------------------------------------------------------

class HttpError(Exception):
    """An error answer: HTTP status, message, explanation, extra headers."""

    code = 500

    def __init__(self, message=None, explain=None, headers=None, code=None):
        if code is not None:
            self.code = code
        status = http.HTTPStatus(self.code)
        self.message = message if message is not None else status.phrase
        self.explain = explain if explain is not None else status.description
        self.headers = dict(headers or {})
        Exception.__init__(self, self.code, self.message)

    def body(self):
        return {"code": self.code, "message": self.message,
                "explain": self.explain}


class BadRequest(HttpError):
    code = 400

    def __init__(self, message, **kwargs):
        HttpError.__init__(self, message, **kwargs)


class Unauthorized(HttpError):
    code = 401


class Forbidden(HttpError):
    code = 403


class NotFound(HttpError):
    code = 404


class UnsupportedMediaType(HttpError):
    code = 415


class TooManyRequests(HttpError):
    """429: the client submits jobs too fast, or has too many query jobs
    unfinished; ``Retry-After`` says when to try again, if known."""
    code = 429

    def __init__(self, message, **kwargs):
        HttpError.__init__(self, message, **kwargs)


class InternalError(HttpError):
    code = 500


class NotImplementedHere(HttpError):
    """501: a method the path does not have, or an opcode the master lacks."""
    code = 501


class BadGateway(HttpError):
    code = 502


class ServiceUnavailable(HttpError):
    code = 503


class GatewayTimeout(HttpError):
    code = 504


def render_json(value):
    """A response body: JSON and a newline, as Ganeti's server sends."""
    return (json.dumps(value, sort_keys=True) + "\n").encode("utf-8")


class Rendered(object):
    """An answer already rendered (shared by coalesced requests)."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data


#: a handler's answer when it wrote the response itself (an event stream)
STREAMED = object()


# --- Request bodies -------------------------------------------------------

def parse_body(content_type, raw):
    """The decoded JSON body, or None when there is none.

    A body is only accepted as ``application/json`` exactly (no
    parameters): anything else is a 415, as in Ganeti.  It may nest at
    most :data:`ganeti.utils.safejson.MAX_DEPTH` levels and hold only
    finite numbers (integers within 64 bits): else a 400 naming where.
    """
    if not raw:
        return None
    if content_type is None or \
            content_type.strip().lower() != JSON_TYPE:
        raise UnsupportedMediaType(
            explain="Entity body in unsupported format: Content-Type must"
            " be exactly %s, got %s" % (JSON_TYPE, "none"
                                        if content_type is None
                                        else repr(content_type)))
    try:
        return safejson.loads(raw)
    except safejson.JsonLimitError as err:
        raise BadRequest("Invalid body: %s" % err)
    except (UnicodeDecodeError, ValueError) as err:
        raise BadRequest("Unable to parse JSON data: %s" % err)


def body_dict(body, what="body"):
    """``body`` as a dict (None: empty); 400 for anything else."""
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise BadRequest("Invalid %s: expected a JSON object, got %s"
                         % (what, type(body).__name__))
    return dict(body)


# --- Query arguments ------------------------------------------------------

_TRUE = frozenset(["1", "true", "yes"])
_FALSE = frozenset(["0", "false", "no"])


class QueryArgs(object):
    """The query string: name -> list of text values."""

    def __init__(self, args):
        self.args = {}
        for key, values in (args or {}).items():
            if isinstance(key, bytes):
                key = key.decode("utf-8", "replace")
            self.args[key] = [v.decode("utf-8", "replace")
                              if isinstance(v, bytes) else v for v in values]

    def __contains__(self, name):
        return name in self.args

    def get(self, name, default=None):
        """The last value of ``name`` (text), or ``default``."""
        values = self.args.get(name)
        if not values:
            return default
        return values[-1]

    def getlist(self, name):
        return list(self.args.get(name, []))

    def bool(self, name, default=False):
        """``0``/``1`` (also ``true``/``false``); 400 naming it if not."""
        value = self.get(name)
        if value is None:
            return default
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise BadRequest("Query parameter '%s': expected 0 or 1, got %r"
                         % (name, value))

    def maybe_bool(self, name):
        """Like :meth:`bool` but None when absent."""
        return self.bool(name, None) if name in self.args else None

    def int(self, name, default=None):
        value = self.get(name)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise BadRequest("Query parameter '%s': expected an integer,"
                             " got %r" % (name, value))

    def required(self, name):
        value = self.get(name)
        if value is None or value == "":
            raise BadRequest("Query parameter '%s' is required" % name)
        return value


# --- Opcodes ----------------------------------------------------------------

def rename_keys(data, renames, where="body"):
    """Rename old parameter names (``name`` -> ``instance_name``); 400 when
    both the old and the new name are given."""
    data = dict(data)
    for old, new in renames.items():
        if old in data:
            if new in data:
                raise BadRequest("Invalid %s: parameter '%s' is an old name"
                                 " of '%s'; give only one of them"
                                 % (where, old, new))
            data[new] = data.pop(old)
    return data


def build_opcode(op_id, body=None, static=None, defaults=None,
                 where="body"):
    """The opcode ``op_id`` (an OpCode), validated.

    ``static`` parameters come from the URL and the query string and may
    not also be given in ``body``; ``defaults`` fill in what neither gives.
    Any problem is a 400 that names the parameter and the reason (checked
    here, before anything is submitted, so nothing is half-applied).
    """
    params = dict(defaults or {})
    body = dict(body or {})
    if "OP_ID" in body:
        if body["OP_ID"] != op_id:
            raise BadRequest("Invalid %s: parameter 'OP_ID': this resource"
                             " runs %s, not %r" % (where, op_id,
                                                   body["OP_ID"]))
        del body["OP_ID"]
    for name, value in (static or {}).items():
        if name in body and body[name] != value:
            raise BadRequest("Invalid %s: parameter '%s' is given by the URL"
                             " or query string (%r) and must not differ in"
                             " the body (%r)" % (where, name, value,
                                                 body[name]))
    params.update(body)
    params.update(static or {})
    try:
        op = opcodes.opcode_class(op_id).from_dict(params)
    except errors.OpPrereqError as err:
        raise BadRequest("Invalid %s parameters: %s" % (where, err.args[0]))
    except errors.GenericError as err:
        raise BadRequest("Invalid %s parameters: %s" % (where, err))
    return op


# --- List and bulk formats --------------------------------------------------

def id_list(names, key, uri_fmt):
    """``[{key: name, "uri": uri}]``, in the order given."""
    return [{key: name, "uri": uri_fmt % (name,)} for name in names]


#: query rows as dicts (shared with the watcher and auto-repair)
rows_to_dicts = query_base.rows_to_dicts
