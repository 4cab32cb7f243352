"""LUXI: the master daemon's local socket protocol (server and clients).

Wire format (Ganeti 3.0's): UTF-8 JSON messages, each ended by the byte 0x03.
A request is ``{"method": "SubmitJob", "args": [...], "version": 3000000}``
(``version`` optional); the answer is ``{"success": true, "result": ...}`` or,
on failure, ``{"success": false, "result": ["ErrorClass", [args...]]}``,
which Ganeti's clients re-raise as ``ganeti.errors.ErrorClass``.  Several
requests may use one connection; answers come strictly in request order.

The server side knows the protocol only: it checks and converts arguments
(opcodes become :class:`ganeti.opcodes.OpCode` objects) and calls one method
of a handler object per LUXI method (see :class:`ILuxiHandler`).  The master
daemon provides the handler.

Two clients: :class:`LuxiClient` (Twisted, for daemons) and
:class:`BlockingClient` (plain sockets, for command-line tools).
"""

import abc
import errno
import inspect
import json
import os
import random
import socket
import stat
import struct
import time
from collections import deque

import attr
from twisted.internet import defer, endpoints, protocol, task
from twisted.logger import Logger
from twisted.python.failure import Failure
import zope.interface

from ganeti import constants
from ganeti import errors
from ganeti import ht
from ganeti import opcodes
from ganeti.utils import safejson
from ganeti.utils.rawjson import RawJSON

EOM = b"\x03"

# Requests are a job or a query: 64 MiB is far beyond any real one, and
# keeps a broken client from filling the master's memory.
MAX_REQUEST_SIZE = 64 * 1024 * 1024
# Answers (query results of a big cluster) may be larger.
MAX_RESPONSE_SIZE = 512 * 1024 * 1024
# How deep a request may nest lists and objects: as a RAPI body, plus
# room for the request around what such a body becomes (arguments, a job,
# an opcode).
MAX_REQUEST_DEPTH = safejson.MAX_DEPTH + 8
# Requests read ahead on one connection while an earlier one is pending;
# beyond this the server stops reading from that client for a while.
MAX_QUEUED_REQUESTS = 64

CONNECT_TIMEOUT = 30       # seconds, as Ganeti's clients
# The master's queue of connections not yet accepted: many clients starting
# at once wait there.  When it is full a client's connect fails at once
# (EAGAIN: UNIX sockets do not wait), and it tries again a little later
# each time, with some randomness so that a crowd does not come back
# together, for up to its connect timeout.
LISTEN_BACKLOG = 1024
CONNECT_RETRY_FIRST = 0.01  # seconds
CONNECT_RETRY_MAX = 0.5
READ_WRITE_TIMEOUT = 180
WFJC_TIMEOUT = 89          # longest WaitForJobChange; must stay < rw timeout
JOB_NOTCHANGED = "nochange"

REQ_SUBMIT_JOB = "SubmitJob"
REQ_SUBMIT_JOB_TO_DRAINED_QUEUE = "SubmitJobToDrainedQueue"
REQ_SUBMIT_MANY_JOBS = "SubmitManyJobs"
REQ_WAIT_FOR_JOB_CHANGE = "WaitForJobChange"
REQ_PICKUP_JOB = "PickupJob"
REQ_CANCEL_JOB = "CancelJob"
REQ_ARCHIVE_JOB = "ArchiveJob"
REQ_CHANGE_JOB_PRIORITY = "ChangeJobPriority"
REQ_AUTO_ARCHIVE_JOBS = "AutoArchiveJobs"
REQ_QUERY = "Query"
REQ_QUERY_FIELDS = "QueryFields"
REQ_QUERY_JOBS = "QueryJobs"
REQ_QUERY_FILTERS = "QueryFilters"
REQ_REPLACE_FILTER = "ReplaceFilter"
REQ_DELETE_FILTER = "DeleteFilter"
REQ_QUERY_INSTANCES = "QueryInstances"
REQ_QUERY_NODES = "QueryNodes"
REQ_QUERY_GROUPS = "QueryGroups"
REQ_QUERY_NETWORKS = "QueryNetworks"
REQ_QUERY_EXPORTS = "QueryExports"
REQ_QUERY_CONFIG_VALUES = "QueryConfigValues"
REQ_QUERY_CLUSTER_INFO = "QueryClusterInfo"
REQ_QUERY_TAGS = "QueryTags"
REQ_SET_DRAIN_FLAG = "SetDrainFlag"
REQ_SET_WATCHER_PAUSE = "SetWatcherPause"
# Not in Ganeti: which opcodes this master can run (RAPI answers 501 for
# resources whose opcode is missing).
REQ_QUERY_IMPLEMENTED_OPCODES = "QueryImplementedOpcodes"
# Not in Ganeti: the maintenance daemon records its state in the
# configuration (docs/maintd.rst).
REQ_MAINTENANCE_UPDATE = "MaintenanceUpdate"
# Not in Ganeti: Query, answering "unchanged" to a client that already has
# the answer (RAPI keeps its rendered bulk lists with it, docs/query.rst).
REQ_QUERY_VERSIONED = "QueryVersioned"
# Not in Ganeti: Query with live data asked from the nodes now, not taken
# from the query cache (the watcher acts on what the nodes say).
REQ_QUERY_FRESH = "QueryFresh"
# Not in Ganeti: SubmitJob on behalf of a client of the caller's (RAPI
# names the user or address it submits for; docs/jobs.rst, "Query jobs").
REQ_SUBMIT_JOB_FOR = "SubmitJobFor"
# Not in Ganeti: the master daemon's Prometheus metrics, which RAPI serves
# on GET /metrics (docs/metrics.rst).
REQ_QUERY_METRICS = "QueryMetrics"
# Not in Ganeti: the master's event stream on the connection, which then
# carries nothing else (docs/events.rst).
REQ_WATCH_EVENTS = "WatchEvents"
# Not in Ganeti: serial console sessions relayed through the primary node
# (RAPI's browser console, docs/console.rst).
REQ_CONSOLE_OPEN = "ConsoleOpen"
REQ_CONSOLE_READ = "ConsoleRead"
REQ_CONSOLE_WRITE = "ConsoleWrite"
REQ_CONSOLE_CLOSE = "ConsoleClose"

log = Logger()


# --- Client-side errors ---------------------------------------------------
# They never travel on the wire, so they live here rather than in errors.py.

class ProtocolError(errors.LuxiError):
    """The peer broke the framing or sent something that is not LUXI."""


class MessageTooLarge(ProtocolError):
    """A message is longer than the receiver accepts.

    ``complete`` holds the messages that arrived whole before it.
    """

    def __init__(self, message, complete=()):
        ProtocolError.__init__(self, message)
        self.complete = list(complete)


class NoMasterError(errors.LuxiError):
    """The master daemon's socket is missing or nobody is listening."""


class LuxiTimeoutError(errors.LuxiError):
    """No answer in time; the connection was dropped."""


class ConnectionClosedError(errors.LuxiError):
    """The connection ended before the answer arrived."""


class RequestError(errors.LuxiError):
    """A failure answer that is not an encoded error."""


class _SendFailed(ConnectionClosedError):
    """The request could not even be sent: the server never saw it."""


# --- Framing ----------------------------------------------------------------

def _json_default(value):
    # handlers may answer with opcodes or sets; everything else is a bug
    if isinstance(value, opcodes.OpCode):
        return value.to_dict()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError("%r is not JSON serialisable" % (value,))


def encode_message(value):
    """One framed message.  JSON escapes control characters, so the
    payload never contains the end-of-message byte."""
    return json.dumps(value, default=_json_default).encode("utf-8") + EOM


def _encode_answer(response):
    """An answer; a result that is already JSON text is not encoded
    again."""
    result = response.get("result")
    if isinstance(result, RawJSON):
        return (b'{"success": %s, "result": ' % (
            b"true" if response["success"] else b"false")
            + result.data + b"}" + EOM)
    return encode_message(response)


def decode_message(raw, max_depth=None):
    """The JSON value of one message (without its 0x03).

    Trailing whitespace is fine: Ganeti's Python client ends its JSON with a
    newline, the Haskell one does not.  With ``max_depth`` (the server's
    requests) the message may nest at most that deep and hold only finite
    numbers, integers within 64 bits (:mod:`ganeti.utils.safejson`).
    """
    try:
        if max_depth is None:
            return json.loads(raw.decode("utf-8"))
        return safejson.loads(raw, max_depth)
    except safejson.JsonLimitError as err:
        raise ProtocolError("Invalid LUXI request: %s" % err)
    except (UnicodeDecodeError, ValueError) as err:
        raise ProtocolError("Message is not valid UTF-8 JSON: %s" % err)


class MessageBuffer(object):
    """Cuts a byte stream into messages, refusing oversized ones."""

    def __init__(self, max_size):
        self.max_size = max_size
        # chunks of the unfinished message: joined once, when complete
        self._chunks = []
        self._size = 0

    def _add(self, chunk, complete):
        self._chunks.append(chunk)
        self._size += len(chunk)
        if self._size > self.max_size:
            size = self._size
            (self._chunks, self._size) = ([], 0)
            raise MessageTooLarge("Message is larger than the limit of %d"
                                  " bytes (got %d bytes so far)"
                                  % (self.max_size, size), complete)

    def feed(self, data):
        """Add bytes; return the complete messages (without 0x03)."""
        messages = []
        start = 0
        while True:
            end = data.find(EOM, start)
            if end < 0:
                break
            self._add(data[start:end], messages)
            messages.append(b"".join(self._chunks))
            (self._chunks, self._size) = ([], 0)
            start = end + 1
        if start < len(data):
            self._add(data[start:], messages)
        return messages


# --- The methods ------------------------------------------------------------
# One table, METHODS, describes every LUXI method: the server checks requests
# with it, and the handler interface (ILuxiHandler) and the clients' methods
# are made from it.

_NO_DEFAULT = object()


@attr.s(frozen=True)
class Arg(object):
    """One positional argument of a LUXI method.

    ``type`` (a :mod:`ganeti.ht` type) is its JSON form: a value outside it
    makes the request malformed (LuxiError).  ``valid`` narrows it to what
    the master accepts: a well-formed value outside that is wrong input
    (OpPrereqError).  A request may leave out an ``optional`` argument
    (``default`` is used).  The client methods send ``client_default`` (or
    the default of an optional argument) when their caller leaves the
    argument out, passed through ``send`` if given.
    """
    name = attr.ib()
    type = attr.ib()
    valid = attr.ib(default=None)
    optional = attr.ib(default=False)
    default = attr.ib(default=None)
    client_default = attr.ib(default=_NO_DEFAULT)
    send = attr.ib(default=None)

    def client_parameter(self):
        default = self.client_default
        if default is _NO_DEFAULT and self.optional:
            default = self.default
        if default is _NO_DEFAULT:
            default = inspect.Parameter.empty
        return inspect.Parameter(self.name,
                                 inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                 default=default)


@attr.s(frozen=True)
class Method(object):
    """A LUXI method: wire name, handler method, positional arguments.

    ``doc`` is the handler's contract.  A handler may lack an ``optional``
    method: it then answers "not supported".
    """
    name = attr.ib()
    handler = attr.ib()
    args = attr.ib(default=())
    doc = attr.ib(default="")
    optional = attr.ib(default=False)

    def convert(self, args):
        """Check the arity and every argument; return converted args."""
        if not isinstance(args, list):
            raise errors.LuxiError("%s: 'args' must be a list, got %r"
                                   % (self.name, args))
        required = sum(1 for a in self.args if not a.optional)
        if not required <= len(args) <= len(self.args):
            expected = ("%d" % required if required == len(self.args)
                        else "%d to %d" % (required, len(self.args)))
            raise errors.LuxiError(
                "%s: expected %s arguments (%s), got %d"
                % (self.name, expected,
                   ", ".join(a.name for a in self.args), len(args)))
        result = []
        for (idx, arg) in enumerate(self.args):
            if idx >= len(args):
                result.append(arg.default)
                continue
            try:
                value = arg.type.check(args[idx])
            except ht.Invalid as err:
                raise errors.LuxiError("%s: argument %d (%s): %s"
                                       % (self.name, idx, arg.name,
                                          err.reason))
            except errors.GenericError as err:
                raise _prefixed(err, self.name)
            if arg.valid is not None:
                try:
                    value = arg.valid.check(value)
                except ht.Invalid as err:
                    raise errors.OpPrereqError(
                        "%s: %s: %s" % (self.name, arg.name, err.reason),
                        errors.ECODE_INVAL)
            result.append(value)
        return result


def _prefixed(err, label):
    """The same error (class, error code) with ``label`` before its text."""
    args = list(err.args) or [""]
    args[0] = "%s: %s" % (label, args[0])
    return type(err)(*args)


class _Opcodes(ht.Type):
    """A job: a non-empty list of opcodes, loaded as OpCode objects.

    An opcode that does not load is wrong input, not a malformed request:
    its error keeps its class (OpPrereqError, OpCodeUnknown) and gets the
    opcode's position.
    """

    desc = "a non-empty list of opcodes"

    def __init__(self, where=""):
        self.where = where

    def check(self, value):
        if not isinstance(value, list) or not value:
            self.fail(value)
        result = []
        for (idx, data) in enumerate(value):
            try:
                result.append(opcodes.OpCode.from_dict(data))
            except errors.GenericError as err:
                label = "%sopcode %d" % (self.where, idx)
                if isinstance(data, dict) and \
                        isinstance(data.get("OP_ID"), str):
                    label += " (%s)" % data["OP_ID"]
                raise _prefixed(err, label)
        return result


class _Jobs(ht.Type):
    """SubmitManyJobs: a list of jobs."""

    desc = "a list of jobs"

    def check(self, value):
        if not isinstance(value, list):
            self.fail(value)
        result = []
        for (idx, job) in enumerate(value):
            try:
                result.append(_Opcodes("job %d, " % idx).check(job))
            except ht.Invalid as err:
                raise ht.Invalid("job %d: %s" % (idx, err.reason),
                                 err.depth + 1)
        return result


# Ganeti's clients send ints; RAPI-style callers may send "123".
_JOB_ID = ht.converted(
    ht.either(ht.NONNEG_INT, ht.where(ht.STR, lambda s: s.isascii() and
                                      s.isdigit(), "a decimal string")),
    int, desc="a job id (non-negative integer)")
_NAMES = ht.list_of(ht.STR)
_FIELDS = ht.list_of(ht.STR)
#: who a SubmitJobFor is for: printable, short, no spaces
_CLIENT = ht.where(ht.STR, lambda text: 0 < len(text) <= 256 and
                   text.isprintable() and " " not in text,
                   "a printable text of 1 to 256 characters without spaces")
_WFJC_TIMEOUT = ht.converted(ht.NONNEG_NUMBER,
                             lambda timeout: min(timeout, WFJC_TIMEOUT))
_NO_LOCKING = ht.where(ht.BOOL, lambda flag: not flag,
                       "false (locking queries are not supported)")


def _names_query(name, handler, what):
    return Method(name, handler, (
        Arg("names", ht.maybe(_NAMES)), Arg("fields", _FIELDS),
        Arg("use_locking", ht.BOOL, valid=_NO_LOCKING, client_default=False)),
        "%s: old-style query of %s, rows of plain values (``names`` None:"
        " all).  The LUXI layer refuses ``use_locking=True``, so it is"
        " always False." % (name, what))


METHODS = {m.name: m for m in [
    Method(REQ_SUBMIT_JOB, "submit_job", (Arg("ops", _Opcodes()),),
           "SubmitJob: ``ops`` is a non-empty list of OpCode; return the new"
           " job id (int)."),
    Method(REQ_SUBMIT_JOB_TO_DRAINED_QUEUE, "submit_job_to_drained_queue",
           (Arg("ops", _Opcodes()),),
           "SubmitJobToDrainedQueue: as submit_job, even if drained."),
    Method(REQ_SUBMIT_MANY_JOBS, "submit_many_jobs", (Arg("jobs", _Jobs()),),
           "SubmitManyJobs: ``jobs`` is a list of lists of OpCode; return a"
           " list of ``[True, job_id]`` or ``[False, error_message]``."),
    Method(REQ_SUBMIT_JOB_FOR, "submit_job_for", (
        Arg("client", ht.STR, valid=_CLIENT), Arg("ops", _Opcodes())),
        "SubmitJobFor (not in Ganeti): as submit_job, for ``client``, a"
        " client of the caller's (``user=NAME`` or ``address=IP``) that"
        " the query job budget counts on its own.", optional=True),
    Method(REQ_WAIT_FOR_JOB_CHANGE, "wait_for_job_change", (
        Arg("job_id", _JOB_ID), Arg("fields", _FIELDS),
        Arg("prev_job_info", ht.maybe(ht.list_of(ht.ANY))),
        Arg("prev_log_serial", ht.maybe(ht.INT)),
        Arg("timeout", _WFJC_TIMEOUT, client_default=WFJC_TIMEOUT,
            send=lambda timeout: min(timeout, WFJC_TIMEOUT))),
           "WaitForJobChange: wait (at most ``timeout`` seconds, already capped"
           " to 89) until the job's ``fields`` differ from ``prev_job_info`` or"
           " it has log entries newer than ``prev_log_serial`` (None: any);"
           " return ``[field values, new log entries]``, or JOB_NOTCHANGED"
           " (\"nochange\") on timeout."),
    Method(REQ_QUERY_JOBS, "query_jobs", (
        Arg("job_ids", ht.maybe(ht.list_of(_JOB_ID))),
        Arg("fields", _FIELDS)),
        "QueryJobs: ``job_ids`` is a list of ints or None (all jobs); return"
        " one row (list of values) per job, None for unknown ids."),
    Method(REQ_CANCEL_JOB, "cancel_job", (
        Arg("job_id", _JOB_ID),
        Arg("kill", ht.BOOL, optional=True, default=False)),
        "CancelJob: return ``[success, message]``."),
    Method(REQ_ARCHIVE_JOB, "archive_job", (Arg("job_id", _JOB_ID),),
           "ArchiveJob: return a bool."),
    Method(REQ_AUTO_ARCHIVE_JOBS, "auto_archive_jobs", (
        Arg("age", ht.NUMBER),
        Arg("timeout", ht.NONNEG_NUMBER,
            client_default=(READ_WRITE_TIMEOUT - 1) // 2)),
           "AutoArchiveJobs: archive jobs older than ``age`` seconds (-1: all)"
           " working at most ``timeout`` seconds; return ``[archived_count,"
           " remaining_count]``."),
    Method(REQ_CHANGE_JOB_PRIORITY, "change_job_priority", (
        Arg("job_id", _JOB_ID),
        Arg("priority", ht.INT,
            valid=ht.one_of(*opcodes.OP_PRIO_SUBMIT_VALID))),
           "ChangeJobPriority: ``priority`` is one of -10, 0, 10; return"
           " ``[success, message]``."),
    Method(REQ_QUERY, "query", (
        Arg("what", ht.STR), Arg("fields", _FIELDS),
        Arg("qfilter", ht.maybe(ht.list_of(ht.ANY)), optional=True)),
        "Query: return ``{\"fields\": [fielddefs], \"data\": [rows]}``."),
    Method(REQ_QUERY_VERSIONED, "query_versioned", (
        Arg("what", ht.STR), Arg("fields", _FIELDS),
        Arg("qfilter", ht.maybe(ht.list_of(ht.ANY))),
        Arg("version", ht.maybe(ht.STR))),
        "QueryVersioned (not in Ganeti): Query, with the answer's version:"
        " ``{\"version\": v, \"fields\": [fielddefs], \"data\": [rows]}``,"
        " or ``{\"version\": v, \"unchanged\": true}`` when ``version`` is"
        " the version of the answer now.  ``v`` is null for answers that are"
        " never the same twice.", optional=True),
    Method(REQ_QUERY_FRESH, "query_fresh", (
        Arg("what", ht.STR), Arg("fields", _FIELDS),
        Arg("qfilter", ht.maybe(ht.list_of(ht.ANY)), optional=True)),
        "QueryFresh (not in Ganeti): Query answered with live data asked"
        " from the nodes now, not from the query cache.", optional=True),
    Method(REQ_QUERY_FIELDS, "query_fields", (
        Arg("what", ht.STR),
        Arg("fields", ht.maybe(_FIELDS), optional=True)),
        "QueryFields: ``fields`` may be None (all); return ``{\"fields\":"
        " [fielddefs]}``."),
    _names_query(REQ_QUERY_NODES, "query_nodes", "nodes"),
    _names_query(REQ_QUERY_INSTANCES, "query_instances", "instances"),
    _names_query(REQ_QUERY_GROUPS, "query_groups", "node groups"),
    _names_query(REQ_QUERY_NETWORKS, "query_networks", "networks"),
    Method(REQ_QUERY_EXPORTS, "query_exports", (
        Arg("nodes", ht.maybe(_NAMES)),
        Arg("use_locking", ht.BOOL, valid=_NO_LOCKING, client_default=False)),
        "QueryExports.", optional=True),
    Method(REQ_QUERY_CONFIG_VALUES, "query_config_values",
           (Arg("fields", _FIELDS),),
           "QueryConfigValues: one value per field name (None if unknown)."),
    Method(REQ_QUERY_CLUSTER_INFO, "query_cluster_info", (),
           "QueryClusterInfo: the cluster info dict."),
    Method(REQ_QUERY_TAGS, "query_tags", (
        Arg("kind", ht.STR, valid=ht.one_of(*constants.VALID_TAG_TYPES)),
        Arg("name", ht.maybe(ht.STR))),
        "QueryTags: ``kind`` is a tag kind (\"cluster\", \"node\", ...);"
        " return the list of tags."),
    Method(REQ_SET_DRAIN_FLAG, "set_drain_flag", (Arg("flag", ht.BOOL),),
           "SetDrainFlag: return True."),
    Method(REQ_SET_WATCHER_PAUSE, "set_watcher_pause",
           (Arg("until", ht.maybe(ht.NUMBER)),),
           "SetWatcherPause: ``until`` is an epoch (float) or None."),
    Method(REQ_QUERY_FILTERS, "query_filters", (
        Arg("uuids", ht.maybe(_NAMES)), Arg("fields", _FIELDS)),
        "QueryFilters.", optional=True),
    Method(REQ_REPLACE_FILTER, "replace_filter", (
        Arg("uuid", ht.maybe(ht.STR)), Arg("priority", ht.maybe(ht.INT)),
        Arg("predicates", ht.list_of(ht.ANY)), Arg("action", ht.ANY),
        Arg("reason", ht.list_of(ht.ANY))),
        "ReplaceFilter: return the filter's uuid.", optional=True),
    Method(REQ_DELETE_FILTER, "delete_filter", (Arg("uuid", ht.STR),),
           "DeleteFilter.", optional=True),
    Method(REQ_MAINTENANCE_UPDATE, "maintenance_update", (
        Arg("incidents", ht.maybe(ht.list_of(ht.DICT))),
        Arg("removed", ht.maybe(ht.list_of(ht.STR))),
        Arg("jobs", ht.maybe(ht.list_of(ht.ANY))),
        Arg("evacuated", ht.maybe(ht.list_of(ht.STR))),
        Arg("moves", ht.maybe(ht.list_of(ht.ANY)))),
        "MaintenanceUpdate (not in Ganeti): the maintenance daemon's"
        " incidents added or replaced, incident ids removed, the jobs of its"
        " round, the nodes it evacuated, its recent balancing moves (None:"
        " unchanged); answers once it is on disk.", optional=True),
    Method(REQ_QUERY_IMPLEMENTED_OPCODES, "query_implemented_opcodes", (),
           "QueryImplementedOpcodes (not in Ganeti): the sorted OP_IDs this"
           " master has a logical unit for."),
    Method(REQ_WATCH_EVENTS, "watch_events", (
        Arg("since", ht.maybe(ht.INT)),
        Arg("kinds", ht.maybe(ht.list_of(ht.STR)), optional=True),
        Arg("names", ht.maybe(ht.list_of(ht.STR)), optional=True)),
        "WatchEvents (not in Ganeti): the answer is ``{\"head\": seq,"
        " \"oldest\": seq}``; the connection then carries only messages"
        " ``{\"events\": [event, ...]}``: the events after ``since``"
        " (None: none; negative: all kept; a ``reset`` event when they are"
        " no longer kept), then the live ones, of ``kinds`` (None: all)"
        " about the objects ``names`` (names or ids; None: all).  A client"
        " too slow to read gets a final ``cut`` event and the connection"
        " closes.  The handler returns a :class:`Stream`.", optional=True),
    Method(REQ_CONSOLE_OPEN, "console_open", (
        Arg("instance", ht.NESTR), Arg("owner", _CLIENT)),
        "ConsoleOpen (not in Ganeti): open a session on the serial console"
        " of the running kvm instance ``instance`` for ``owner`` (who may"
        " use it: ``user=NAME``); a new one ends the instance's previous"
        " session.  Return ``{\"session\": id}``.", optional=True),
    Method(REQ_CONSOLE_READ, "console_read", (
        Arg("instance", ht.NESTR), Arg("session", ht.NESTR),
        Arg("owner", _CLIENT), Arg("offset", ht.NONNEG_INT),
        Arg("timeout", ht.NONNEG_NUMBER)),
        "ConsoleRead (not in Ganeti): the console output after byte"
        " ``offset``, waiting up to ``timeout`` seconds (at most 30) for"
        " some: ``{\"offset\", \"next\", \"data\" (base64), \"dropped\""
        " (bytes no longer kept), \"closed\" (why it ended, or null)}``.",
        optional=True),
    Method(REQ_CONSOLE_WRITE, "console_write", (
        Arg("instance", ht.NESTR), Arg("session", ht.NESTR),
        Arg("owner", _CLIENT), Arg("data", ht.STR)),
        "ConsoleWrite (not in Ganeti): send ``data`` (base64) to the"
        " console; ``{\"written\": bytes}``.", optional=True),
    Method(REQ_CONSOLE_CLOSE, "console_close", (
        Arg("instance", ht.NESTR), Arg("session", ht.NESTR),
        Arg("owner", _CLIENT)),
        "ConsoleClose (not in Ganeti): end the session.", optional=True),
    Method(REQ_QUERY_METRICS, "query_metrics", (),
           "QueryMetrics (not in Ganeti): the master daemon's metrics in"
           " Prometheus' text exposition format (a string).", optional=True),
]}

# Ganeti method name -> handler method name
HANDLER_METHODS = {name: m.handler for (name, m) in METHODS.items()}

# Known to Ganeti but never served to clients.
_INTERNAL_METHODS = frozenset([REQ_PICKUP_JOB])


def _interface_method(method):
    spec = zope.interface.interface.Method(method.handler, method.doc)
    spec.positional = spec.required = tuple(a.name for a in method.args)
    return spec


ILuxiHandler = zope.interface.interface.InterfaceClass(
    "ILuxiHandler", (zope.interface.Interface,),
    {m.handler: _interface_method(m) for m in METHODS.values()
     if not m.optional},
    __doc__="""What the master daemon implements to serve LUXI.

    Made from :data:`METHODS`: one method per LUXI method a handler must
    have (the optional ones, marked there, may be left out: they then answer
    "not supported"), documented there.  Arguments come already checked and
    converted (job ids are ints, opcodes are :class:`ganeti.opcodes.OpCode`).
    Each may return the result or a Deferred (or be a coroutine function).
    Raising an :class:`errors.GenericError` subclass sends that error to the
    client; anything else is logged and sent as GenericError.  When the
    client disconnects, the Deferred being waited on is cancelled, so a long
    poll should give its Deferred a canceller that forgets the waiter.
    """, __module__=__name__)


# --- Server -----------------------------------------------------------------

class Stream(abc.ABC):
    """What a handler returns to take over the connection (WatchEvents):
    the answer is :meth:`greeting`; then :meth:`start` is given the
    transport, which carries only what the stream writes; :meth:`stop`
    when the connection is lost."""

    @abc.abstractmethod
    def greeting(self):
        """The result of the request (JSON-serialisable)."""

    @abc.abstractmethod
    def start(self, transport):
        """Write on ``transport`` from now on."""

    @abc.abstractmethod
    def stop(self):
        """The connection is gone."""


class EventStream(Stream):
    """The master's event bus (:class:`ganeti.events.EventBus`) on a LUXI
    connection: one framed ``{"events": [...]}`` per batch; a subscriber
    that falls behind (the socket's buffer full while ``limit`` events
    wait) gets a final ``cut`` event and the connection closes."""

    def __init__(self, bus, since, kinds=None, names=None, limit=None):
        self.bus = bus
        self.since = since
        self.kinds = kinds
        self.names = names
        self.limit = limit
        self.subscription = None
        self.transport = None

    def greeting(self):
        return {"head": self.bus.head, "oldest": self.bus.oldest}

    def start(self, transport):
        self.transport = transport
        self.subscription = self.bus.subscribe(
            self._deliver, self._cut, since=self.since, kinds=self.kinds,
            names=self.names, limit=self.limit)
        transport.registerProducer(self.subscription, True)

    def _deliver(self, batch):
        self.transport.write(encode_message({"events": batch}))

    def _cut(self, event):
        self.transport.write(encode_message({"events": [event]}))
        self.transport.unregisterProducer()
        self.transport.loseConnection()

    def stop(self):
        if self.subscription is not None:
            self.subscription.close()

@attr.s(frozen=True)
class Caller(object):
    """Who is at the other end of a connection: the peer credentials of a
    UNIX socket (SO_PEERCRED), taken when it connected."""
    pid = attr.ib()
    uid = attr.ib()
    gid = attr.ib()


def peer_caller(transport):
    """The :class:`Caller` of a connected UNIX socket transport; None for
    any other transport or when the system does not say."""
    try:
        sock = transport.getHandle()
        if sock.family != socket.AF_UNIX:
            return None
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                              struct.calcsize("3i"))
    except (AttributeError, OSError):
        return None
    return Caller(*struct.unpack("3i", raw))


#: handler methods told who calls (``caller=``) when they accept it
_WITH_CALLER = frozenset(["submit_job", "submit_job_to_drained_queue",
                          "submit_many_jobs", "submit_job_for"])


#: handler function -> whether it takes ``caller`` (asked once each)
_TAKES_CALLER = {}


def _accepts_caller(fn):
    key = getattr(fn, "__func__", fn)
    known = _TAKES_CALLER.get(key)
    if known is None:
        try:
            known = "caller" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            known = False
        if len(_TAKES_CALLER) < 1024:
            _TAKES_CALLER[key] = known
    return known


@attr.s
class _Refusal(object):
    """A queued stand-in for a request that could not be read."""
    error = attr.ib()


class LuxiServerProtocol(protocol.Protocol):
    """One client connection: requests are answered one at a time, in
    order; requests arriving meanwhile wait in a queue."""

    def connectionMade(self):
        self._buffer = MessageBuffer(self.factory.max_request_size)
        self._queue = deque()
        self._worker = None
        self._paused = False
        self._refused = False
        self._lost = False
        self.caller = peer_caller(self.transport)
        #: the Stream the connection carries (WatchEvents), or None
        self.stream = None
        self.factory.connections.add(self)

    def dataReceived(self, data):
        if self._refused:
            return
        try:
            self._queue.extend(self._buffer.feed(data))
        except MessageTooLarge as err:
            log.warn("LUXI client sent an oversized request, closing: {err}",
                     err=err)
            # answered after the pending requests, then the connection ends
            self._refused = True
            self._queue.extend(err.complete)
            self._queue.append(_Refusal(err))
            self.transport.pauseProducing()
        if (not self._paused and not self._refused and
                len(self._queue) >= self.factory.max_queued_requests):
            self._paused = True
            self.transport.pauseProducing()
        if self._worker is None and self._queue:
            worker = defer.Deferred.fromCoroutine(self._work())
            # answers to synchronous handlers are done already
            if not worker.called:
                self._worker = worker
            worker.addBoth(self._work_done)
            worker.addErrback(self._work_failed)

    async def _work(self):
        while self._queue:
            item = self._queue.popleft()
            if self._paused and \
                    len(self._queue) < self.factory.max_queued_requests:
                self._paused = False
                self.transport.resumeProducing()
            if isinstance(item, _Refusal):
                self.transport.write(encode_message(
                    _failure(item.error)))
                self.transport.loseConnection()
                return
            try:
                response = await self.factory.answer(item, self.caller)
            except defer.CancelledError:
                if self._lost:
                    raise
                # the handler's own Deferred was cancelled
                response = encode_message(_failure(errors.GenericError(
                    "The request was cancelled by the master daemon")))
            if isinstance(response, Stream):
                self._start_stream(response)
                return
            self.transport.write(response)

    def _start_stream(self, stream):
        # the connection is the stream's: what the client sends is dropped
        # (read on, so that its going away is noticed)
        self._refused = True
        self._queue.clear()
        if self._paused:
            self._paused = False
            self.transport.resumeProducing()
        self.transport.write(encode_message(
            {"success": True, "result": stream.greeting()}))
        if self._lost:
            return
        self.stream = stream
        stream.start(self.transport)

    def _work_done(self, result):
        self._worker = None
        return result

    def _work_failed(self, failure):
        if not failure.check(defer.CancelledError):
            log.failure("LUXI connection handling failed", failure)
            self.transport.abortConnection()

    def connectionLost(self, reason=protocol.connectionDone):
        self._lost = True
        self.factory.connections.discard(self)
        if self.stream is not None:
            self.stream.stop()
            self.stream = None
        self._queue.clear()
        if self._worker is not None:
            # a pending long poll must not outlive its client
            self._worker.cancel()


def _failure(err):
    # Clients rebuild errors by class name, so a subclass defined outside
    # errors.py (like ProtocolError here) is sent as its closest known base.
    for cls in type(err).__mro__:
        if getattr(errors, cls.__name__, None) is cls:
            break
    (_, args) = errors.encode_exception(err)
    return {"success": False, "result": [cls.__name__, list(args)]}


class LuxiServerFactory(protocol.Factory):
    """Serves LUXI for ``handler`` (see :class:`ILuxiHandler`)."""

    protocol = LuxiServerProtocol

    def __init__(self, handler, max_request_size=MAX_REQUEST_SIZE,
                 max_queued_requests=MAX_QUEUED_REQUESTS,
                 max_request_depth=MAX_REQUEST_DEPTH):
        self.handler = handler
        self.max_request_size = max_request_size
        self.max_request_depth = max_request_depth
        self.max_queued_requests = max_queued_requests
        self.connections = set()

    def disconnect_all(self):
        """Drop every client connection (e.g. when the master stops)."""
        for conn in list(self.connections):
            conn.transport.loseConnection()

    async def answer(self, raw, caller=None):
        """The framed response to one framed request (without 0x03) of
        ``caller`` (a :class:`Caller`, or None if unknown)."""
        method = "?"
        try:
            request = decode_message(raw, self.max_request_depth)
            (method, args) = _parse_request(request)
            result = await self._dispatch(method, args, caller)
            if isinstance(result, Stream):
                return result
            response = {"success": True, "result": result}
        except defer.CancelledError:
            raise
        except errors.GenericError as err:
            response = _failure(err)
        except Exception as err:
            log.failure("LUXI {method} failed", method=method)
            response = _failure(errors.GenericError(
                "Internal error while handling %s: %s: %s"
                % (method, type(err).__name__, err)))
        try:
            return _encode_answer(response)
        except (TypeError, ValueError) as err:
            log.error("LUXI {method} returned a value that is not JSON:"
                      " {err}", method=method, err=err)
            return encode_message(_failure(errors.GenericError(
                "Internal error while handling %s: result is not"
                " serialisable: %s" % (method, err))))

    async def _dispatch(self, name, args, caller=None):
        if name in _INTERNAL_METHODS:
            raise errors.LuxiError("%s is internal to the master daemon"
                                   % name)
        method = METHODS.get(name)
        if method is None:
            raise errors.LuxiError("Unknown LUXI method %r" % (name,))
        args = method.convert(args)
        handler_fn = getattr(self.handler, method.handler, None)
        if handler_fn is None:
            raise errors.LuxiError("%s is not supported by this master"
                                   % name)
        if method.handler in _WITH_CALLER and _accepts_caller(handler_fn):
            return await defer.maybeDeferred(handler_fn, *args,
                                             caller=caller)
        return await defer.maybeDeferred(handler_fn, *args)


def _parse_request(request):
    if not isinstance(request, dict):
        raise errors.LuxiError("Invalid LUXI request: expected an object,"
                               " got %r" % (request,))
    method = request.get("method")
    args = request.get("args")
    if not isinstance(method, str) or args is None:
        raise errors.LuxiError("Invalid LUXI request: 'method' (string) and"
                               " 'args' (list) are required")
    version = request.get("version")
    if version is not None and version != constants.LUXI_VERSION:
        raise errors.LuxiError("LUXI version mismatch: server %s, request %r"
                               % (constants.LUXI_VERSION, version))
    return (method, args)


def server_endpoint(reactor, path, mode=0o660):
    """The endpoint the master listens on (with a long queue of clients
    waiting to be accepted, :data:`LISTEN_BACKLOG`).

    ``wantPID`` makes Twisted keep ``<path>.lock``: a socket left behind by
    a crashed master is replaced, a live master's is not.
    """
    return endpoints.UNIXServerEndpoint(reactor, path, mode=mode,
                                        backlog=LISTEN_BACKLOG, wantPID=True)


def _remove_dead_socket(path):
    """Remove a socket file nobody listens on any more.

    Twisted's lock file only covers sockets of a master that used it; this
    also clears one left without a lock (e.g. by another daemon).
    """
    try:
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            return
    except FileNotFoundError:
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # never waits: a live master with a full queue answers EAGAIN
        probe.setblocking(False)
        if probe.connect_ex(path) == errno.ECONNREFUSED:
            os.remove(path)
    except OSError:
        pass                   # let bind() report the real problem
    finally:
        probe.close()


def prepare_socket_path(path):
    """Create the socket's directory and remove a socket left there by a
    crashed process, so that ``path`` can be bound."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, mode=0o750, exist_ok=True)
    _remove_dead_socket(path)


def listen(reactor, path, handler, **factory_args):
    """Listen on ``path`` for ``handler``; Deferred of the IListeningPort
    (its ``factory`` attribute is the LuxiServerFactory)."""
    prepare_socket_path(path)
    factory = LuxiServerFactory(handler, **factory_args)
    return server_endpoint(reactor, path).listen(factory)


# --- Shared client logic -----------------------------------------------------

def format_request(method, args):
    return encode_message({"method": method, "args": list(args),
                           "version": constants.LUXI_VERSION})


def is_unsupported_method(err):
    """True for the error of a master that lacks a (newer or optional)
    method: its table does not know it, or its handler does not serve it."""
    if not isinstance(err, errors.LuxiError):
        return False
    text = str(err.args[0]) if err.args else ""
    return ("is not supported by this master" in text
            or "Unknown LUXI method" in text)


def parse_response(raw):
    """The result of a framed response, or raise the error it carries."""
    data = decode_message(raw)
    if not (isinstance(data, dict) and "success" in data
            and "result" in data):
        raise ProtocolError("Invalid LUXI response: %r" % (data,))
    version = data.get("version")
    if version is not None and version != constants.LUXI_VERSION:
        raise ProtocolError("LUXI version mismatch: client %s, server %r"
                            % (constants.LUXI_VERSION, version))
    result = data["result"]
    if data["success"]:
        return result
    err = errors.decode_exception(result)
    if err is not None:
        raise err
    raise RequestError(result)


def _client_method(method):
    """The client method for ``method``: the handler's name and arguments
    (with the client defaults), sending the request through ``call``."""
    signature = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [arg.client_parameter() for arg in method.args])

    def send(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        values = list(bound.arguments.values())[1:]
        return self.call(method.name, *[
            arg.send(value) if arg.send is not None else value
            for (arg, value) in zip(method.args, values)])

    send.__name__ = method.handler
    send.__qualname__ = "_Methods." + method.handler
    send.__signature__ = signature
    send.__doc__ = "Send %s (opcodes may be OpCode objects or dicts)." \
        % method.name
    return send


class _Methods(abc.ABC):
    """One method per LUXI method, named like the handler's (made from
    :data:`METHODS`), over ``call``."""

    @abc.abstractmethod
    def call(self, method, *args):
        """Send ``method`` with ``args``; the clients define how."""


#: methods that take over their connection: no request/answer client method
_STREAM_METHODS = frozenset([REQ_WATCH_EVENTS])

for _method in METHODS.values():
    if _method.name in _STREAM_METHODS:
        continue
    setattr(_Methods, _method.handler, _client_method(_method))
del _method


class _Busy(Exception):
    """The master's queue of connections waiting to be accepted is full."""


def _open_socket(path):
    """A non-blocking socket connected to the master's socket ``path``;
    _Busy when its queue is full, else the error a client raises."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        code = sock.connect_ex(path)
    except OSError as err:       # e.g. a path too long for a socket
        sock.close()
        raise _no_master(path, err)
    if code == 0:
        return sock
    sock.close()
    if code == errno.EAGAIN:
        raise _Busy()
    if code in (errno.EACCES, errno.EPERM):
        raise errors.LuxiError("Permission denied on the master daemon"
                               " socket %s (not in its group?)" % path)
    if code in (errno.ENOENT, errno.ECONNREFUSED):
        raise _no_master(path, os.strerror(code))
    raise _no_master(path, OSError(code, os.strerror(code)))


def _retry_delays(first=CONNECT_RETRY_FIRST, most=CONNECT_RETRY_MAX):
    """Seconds to wait before each new connection attempt: doubling up to
    ``most``, each shortened by up to half at random."""
    delay = first
    while True:
        yield delay * random.uniform(0.5, 1.0)
        delay = min(delay * 2, most)


def _busy(path, seconds):
    return LuxiTimeoutError(
        "Connecting to the master daemon on %s timed out: it accepted no"
        " connection for %s seconds (its socket's queue stayed full)"
        % (path, seconds))


def _no_master(path, err):
    if not os.path.exists(path):
        return NoMasterError(
            "Cannot reach the master daemon: socket %s does not exist (is"
            " ganeti-masterd running on this node?)" % path)
    return NoMasterError("Cannot reach the master daemon on %s: %s (is"
                         " ganeti-masterd running?)" % (path, err))


# --- Twisted client ----------------------------------------------------------

class _ClientProtocol(protocol.Protocol):
    """Sends framed requests and hands back answers in order."""

    def __init__(self, max_response_size):
        self._buffer = MessageBuffer(max_response_size)
        self._pending = deque()
        self.closed = defer.Deferred()
        self.connected = False

    def connectionMade(self):
        self.connected = True

    def request(self, payload):
        # Cancelling one request breaks the pairing of answers to
        # requests, so the whole connection goes.
        if not self.connected:
            return defer.fail(ConnectionClosedError(
                "Connection to the master daemon is closed"))
        d = defer.Deferred(lambda _: self.transport.abortConnection())
        self._pending.append(d)
        self.transport.write(payload)
        return d

    def dataReceived(self, data):
        try:
            messages = self._buffer.feed(data)
        except MessageTooLarge as err:
            self._deliver(err.complete)
            self._fail_all(err)
            self.transport.abortConnection()
            return
        self._deliver(messages)

    def _deliver(self, messages):
        for raw in messages:
            if not self._pending:
                self._fail_all(ProtocolError("Unexpected LUXI response"))
                self.transport.abortConnection()
                return
            d = self._pending.popleft()
            if not d.called:    # a cancelled request has its answer
                d.callback(raw)

    def _fail_all(self, err):
        while self._pending:
            d = self._pending.popleft()
            if not d.called:
                d.errback(err)

    def connectionLost(self, reason=protocol.connectionDone):
        self.connected = False
        self._fail_all(ConnectionClosedError(
            "Connection to the master daemon closed before the answer: %s"
            % reason.getErrorMessage()))
        self.closed.callback(None)


class _SocketClient(_Methods):
    """What both clients are given: the master's socket ``path``, seconds
    to wait for an answer (``timeout``) and for a connection
    (``connect_timeout``), the largest answer taken (``max_response_size``
    bytes)."""

    def __init__(self, path, timeout=READ_WRITE_TIMEOUT,
                 connect_timeout=CONNECT_TIMEOUT,
                 max_response_size=MAX_RESPONSE_SIZE):
        self.path = path
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_response_size = max_response_size


class LuxiClient(_SocketClient):
    """LUXI client for daemons (RAPI, maintd, watcher).

    ``call(method, *args)`` returns a Deferred of the result, failing with
    the ganeti error the master sent.  One connection is opened on first use
    and reopened on demand after it closes; requests sent together are
    answered in order over it.  While the master's queue of connections is
    full, connecting is tried again for up to ``connect_timeout`` seconds
    (then LuxiTimeoutError).  A call that gets no answer within
    ``timeout`` seconds fails with LuxiTimeoutError and drops the
    connection (and with it every other pending call).
    """

    def __init__(self, reactor, path, *args, **kwargs):
        super().__init__(path, *args, **kwargs)
        self._reactor = reactor
        self._protocol = None
        self._waiters = None

    def call(self, method, *args):
        return defer.Deferred.fromCoroutine(self._call(method, args))

    async def _call(self, method, args):
        payload = format_request(method, args)
        proto = await self._connection()
        answer = proto.request(payload)
        answer.addTimeout(self.timeout, self._reactor)
        try:
            raw = await answer
        except defer.TimeoutError:
            raise LuxiTimeoutError("No answer to %s from the master daemon"
                                   " within %s seconds" % (method,
                                                           self.timeout))
        return parse_response(raw)

    async def _connection(self):
        if self._protocol is not None and self._protocol.connected:
            return self._protocol
        waiter = defer.Deferred()
        if self._waiters is None:
            # the first caller connects; the others wait for that attempt
            self._waiters = [waiter]
            defer.Deferred.fromCoroutine(self._connect()).addBoth(
                self._connected)
        else:
            self._waiters.append(waiter)
        return await waiter

    async def _connect(self):
        deadline = self._reactor.seconds() + self.connect_timeout
        delays = _retry_delays()
        while True:
            try:
                sock = _open_socket(self.path)
                break
            except _Busy:
                delay = next(delays)
                if self._reactor.seconds() + delay > deadline:
                    raise _busy(self.path, self.connect_timeout)
                await task.deferLater(self._reactor, delay, lambda: None)
        proto = _ClientProtocol(self.max_response_size)
        try:
            # connected already: the reactor takes over the socket
            self._reactor.adoptStreamConnection(
                sock.fileno(), socket.AF_UNIX,
                protocol.Factory.forProtocol(lambda: proto))
        finally:
            sock.close()
        return proto

    def _connected(self, result):
        (waiters, self._waiters) = (self._waiters, None)
        if not isinstance(result, Failure):
            self._protocol = result
        for waiter in waiters:
            if isinstance(result, Failure):
                waiter.errback(result)
            else:
                waiter.callback(result)
        return None

    def close(self):
        """Close the connection; Deferred firing once it is closed."""
        proto, self._protocol = self._protocol, None
        if proto is None or not proto.connected:
            return defer.succeed(None)
        proto.transport.loseConnection()
        return proto.closed


# --- Event stream client (Twisted) ---------------------------------------------

class EventStreamProtocol(protocol.Protocol):
    """One WatchEvents connection: sends the request, then hands the
    greeting to ``greeted`` (a Deferred; fails with the master's error)
    and every batch of events to ``on_events(events)``.  ``closed`` fires
    once the connection is gone (``reason`` says why)."""

    def __init__(self, payload, on_events, max_message_size=MAX_RESPONSE_SIZE):
        self._payload = payload
        self._on_events = on_events
        self._buffer = MessageBuffer(max_message_size)
        self.greeted = defer.Deferred()
        self.closed = defer.Deferred()
        self.greeting = None
        self.reason = None

    def connectionMade(self):
        self.transport.write(self._payload)

    def dataReceived(self, data):
        try:
            messages = self._buffer.feed(data)
        except MessageTooLarge as err:
            messages = err.complete
            self.transport.abortConnection()
        for raw in messages:
            if self.greeting is None:
                try:
                    self.greeting = parse_response(raw)
                except Exception:
                    self.greeted.errback()
                    self.transport.abortConnection()
                    return
                self.greeted.callback(self.greeting)
                continue
            try:
                message = decode_message(raw)
                batch = message["events"]
            except (ProtocolError, KeyError, TypeError):
                log.error("Invalid event stream message from the master:"
                          " {raw!r}", raw=raw[:200])
                self.transport.abortConnection()
                return
            self._on_events(batch)

    def connectionLost(self, reason=protocol.connectionDone):
        if self.greeting is None and not self.greeted.called:
            self.greeted.errback(ConnectionClosedError(
                "The master daemon closed the event stream: %s"
                % reason.getErrorMessage()))
        self.reason = reason
        self.closed.callback(None)

    def close(self):
        self.transport.loseConnection()
        return self.closed


def open_event_stream(reactor, path, on_events, since=None, kinds=None,
                      names=None):
    """Connect to the master's socket ``path`` and send WatchEvents; a
    Deferred firing with the :class:`EventStreamProtocol` once the master
    answered (its ``greeting``), or failing with the master's error (a
    master without the method: see :func:`is_unsupported_method`)."""
    payload = format_request(REQ_WATCH_EVENTS, [since, kinds, names])
    proto = EventStreamProtocol(payload, on_events)
    try:
        sock = _open_socket(path)
    except _Busy:
        return defer.fail(LuxiTimeoutError(
            "The master daemon's socket %s accepts no connection now"
            % path))
    except errors.LuxiError:
        return defer.fail()
    try:
        reactor.adoptStreamConnection(
            sock.fileno(), socket.AF_UNIX,
            protocol.Factory.forProtocol(lambda: proto))
    finally:
        sock.close()
    return proto.greeted.addCallback(lambda _: proto)


# --- Blocking client ---------------------------------------------------------

class BlockingClient(_SocketClient):
    """LUXI client for command-line tools: plain socket, no reactor.

    Methods return the result or raise the ganeti error the master sent
    (e.g. errors.OpPrereqError); NoMasterError when the socket is missing
    or nobody listens; LuxiTimeoutError after ``timeout`` seconds without
    an answer, or when the master's queue of connections stayed full for
    ``connect_timeout`` seconds (connecting is tried again meanwhile).
    Usable as a context manager.
    """

    #: how the client waits between connection attempts, and its clock
    _sleep = staticmethod(time.sleep)
    _monotonic = staticmethod(time.monotonic)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._sock = None
        self._buffer = None
        self._queued = deque()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def _connect(self):
        deadline = self._monotonic() + self.connect_timeout
        delays = _retry_delays()
        while True:
            try:
                sock = _open_socket(self.path)
                break
            except _Busy:
                delay = next(delays)
                if self._monotonic() + delay > deadline:
                    raise _busy(self.path, self.connect_timeout)
                self._sleep(delay)
        sock.setblocking(True)
        self._sock = sock
        self._buffer = MessageBuffer(self.max_response_size)
        self._queued.clear()

    def call(self, method, *args):
        payload = format_request(method, args)
        reused = self._sock is not None
        try:
            return parse_response(self._exchange(payload))
        except _SendFailed:
            if not reused:
                raise
        # The server had closed the idle connection (a UNIX socket refuses
        # the write at once), so it never saw the request: send it again.
        return parse_response(self._exchange(payload))

    def watch_events(self, since=None, kinds=None, names=None):
        """WatchEvents on a connection of its own: ``(greeting, batches)``,
        ``batches`` an iterator of event lists, waiting as long as it takes
        for each (ConnectionClosedError once the master closes the
        stream).  The client is used up: close it when done."""
        self.close()
        greeting = parse_response(self._exchange(format_request(
            REQ_WATCH_EVENTS, [since, kinds, names])))
        return greeting, self._batches()

    def _batches(self):
        while True:
            while not self._queued:
                if self._sock is None:
                    raise ConnectionClosedError("The event stream is closed")
                self._sock.settimeout(None)
                try:
                    data = self._sock.recv(65536)
                except OSError as err:
                    self.close()
                    raise ConnectionClosedError(
                        "Connection to the master daemon lost: %s" % err)
                if not data:
                    self.close()
                    raise ConnectionClosedError(
                        "The master daemon closed the event stream")
                self._queued.extend(self._buffer.feed(data))
            message = decode_message(self._queued.popleft())
            if not isinstance(message, dict) or \
                    not isinstance(message.get("events"), list):
                raise ProtocolError("Invalid event stream message: %r"
                                    % (message,))
            yield message["events"]

    def _exchange(self, payload):
        if self._sock is None:
            self._connect()
        deadline = time.monotonic() + self.timeout
        try:
            self._sock.settimeout(self.timeout)
            try:
                self._sock.sendall(payload)
            except (BrokenPipeError, ConnectionResetError) as err:
                self.close()
                raise _SendFailed("Connection to the master daemon lost: %s"
                                  % err)
            while not self._queued:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise socket.timeout()
                self._sock.settimeout(remaining)
                data = self._sock.recv(65536)
                if not data:
                    raise ConnectionClosedError(
                        "The master daemon closed the connection without"
                        " answering")
                self._queued.extend(self._buffer.feed(data))
            return self._queued.popleft()
        except socket.timeout:
            self.close()
            raise LuxiTimeoutError("No answer from the master daemon on %s"
                                   " within %s seconds"
                                   % (self.path, self.timeout))
        except (BrokenPipeError, ConnectionResetError) as err:
            self.close()
            raise ConnectionClosedError("Connection to the master daemon"
                                        " lost: %s" % err)
        except errors.LuxiError:
            self.close()
            raise
        except OSError as err:
            if err.errno in (errno.EPIPE, errno.ECONNRESET):
                self.close()
                raise ConnectionClosedError("Connection to the master daemon"
                                            " lost: %s" % err)
            raise
