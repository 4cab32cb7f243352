"""The serial console of a kvm instance over RAPI (docs/console.rst).

RAPI holds no node credentials: it asks the master (luxi ``ConsoleOpen``,
``ConsoleRead``, ``ConsoleWrite``, ``ConsoleClose``), which asks the
instance's primary node.  A session belongs to the RAPI user who opened
it: the master and the node get the user's name with every call, and
another user's session is answered as unknown (404).

The output is numbered by byte offset since the session opened.  ``GET
.../output`` answers either a long poll (JSON, the default) or, for a
client asking ``Accept: text/event-stream``, Server-Sent Events: each
``output`` event carries base64 data and the offset after it as its id,
so a client reconnecting with ``Last-Event-ID`` (or ``?offset=``) resumes
where it stopped.  A ``gap`` event says how many bytes were dropped before
the client read them, ``closed`` why the session ended (the stream ends
with it); comment lines keep an idle stream alive.
"""

import base64
import binascii
import json

from twisted.internet import defer
from twisted.logger import Logger

from ganeti import errors
from ganeti import luxi
from ganeti.rapi import baserlib

log = Logger()

#: seconds one long poll waits for output
LONG_POLL_WAIT = 20
#: seconds one read of an event stream waits before a keep-alive line
SSE_WAIT = 15
SSE_TYPE = b"text/event-stream; charset=utf-8"
#: characters of input one request may carry
MAX_INPUT = 16 * 1024
ENCODINGS = ("utf-8", "base64")


class Conflict(baserlib.HttpError):
    code = 409


def _http_error(err):
    """The HTTP answer of a refusal only the console has."""
    code = err.args[1] if isinstance(err, errors.OpPrereqError) and \
        len(err.args) > 1 else None
    text = str(err.args[0]) if err.args else str(err)
    if code == errors.ECODE_TEMP_NORES:
        return baserlib.ServiceUnavailable(text)
    if code == errors.ECODE_STATE:
        return Conflict(text)
    if isinstance(err, errors.OpExecError):
        return baserlib.BadGateway(text)
    if isinstance(err, errors.LuxiError) and \
            luxi.is_unsupported_method(err):
        return baserlib.NotImplementedHere(
            "This cluster's master daemon does not relay consoles yet")
    return None


async def _call(poll, method, *args):
    try:
        return await poll.call(method, *args)
    except errors.GenericError as err:
        http = _http_error(err)
        if http is not None:
            raise http
        raise


def _owner(req):
    # the user's name: the methods need the write right, so a user
    return req.client


def _access_ended(req):
    """Why the client of ``req`` may no longer use the console (the users
    file or its session says so now), or None while it may."""
    header = req.http.getHeader(b"authorization")
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    try:
        req.app._user(header, req.method.required_access)
    except baserlib.HttpError as err:
        return "%d %s" % (err.code, err.message)
    return None


def _poll(req):
    return getattr(req.app, "console_poll", None) or req.app.long_poll


async def open_session(req):
    """POST /2/instances/NAME/console/sessions"""
    name = req.params["name"]
    answer = await _call(req.app.master, luxi.REQ_CONSOLE_OPEN, name,
                         _owner(req))
    return {"session": answer["session"], "instance": name}


def _output_args(req):
    offset = req.args.int("offset")
    last = req.http_header("last-event-id")
    if last:
        try:
            offset = int(last)
        except ValueError:
            raise baserlib.BadRequest("Last-Event-ID: %r is not an offset"
                                      % last)
    if offset is None:
        offset = 0
    if offset < 0:
        raise baserlib.BadRequest("Query parameter 'offset': must not be"
                                  " negative, got %d" % offset)
    return offset


def output_answer(answer):
    """A node's read answer as the long poll's JSON."""
    return {"offset": answer["offset"], "next": answer["next"],
            "data": answer["data"], "dropped": answer["dropped"],
            "closed": answer["closed"]}


async def read_output(req):
    """GET .../sessions/ID/output: a long poll, or an event stream."""
    name, sid = req.params["name"], req.params["session"]
    offset = _output_args(req)
    accept = req.http_header("accept") or ""
    if "text/event-stream" in accept:
        return await _stream(req, name, sid, offset)
    wait = req.args.int("wait", LONG_POLL_WAIT)
    if wait < 0:
        raise baserlib.BadRequest("Query parameter 'wait': must not be"
                                  " negative, got %d" % wait)
    answer = await _call(_poll(req), luxi.REQ_CONSOLE_READ, name, sid,
                         _owner(req), offset, min(wait, LONG_POLL_WAIT))
    return output_answer(answer)


def format_event(kind, data, event_id=None):
    lines = []
    if event_id is not None:
        lines.append(b"id: %d" % event_id)
    lines.append(b"event: " + kind.encode("ascii"))
    lines.append(b"data: " + data.encode("utf-8"))
    return b"\n".join(lines) + b"\n\n"


KEEPALIVE = b": keep-alive\n\n"


async def _stream(req, name, sid, offset):
    """Server-Sent Events until the session ends or the client leaves."""
    poll = _poll(req)
    owner = _owner(req)
    # the first read answers errors (unknown session) as errors
    answer = await _call(poll, luxi.REQ_CONSOLE_READ, name, sid, owner,
                         offset, 0)
    request = req.http
    request.setResponseCode(200)
    request.setHeader(b"content-type", SSE_TYPE)
    request.setHeader(b"cache-control", b"no-cache")
    request.setHeader(b"server", baserlib.SERVER)
    request.setHeader(b"connection", b"close")
    request.setHeader(b"x-accel-buffering", b"no")
    channel = getattr(request, "channel", None)
    if channel is not None and hasattr(channel, "persistent"):
        channel.persistent = False
    gone = []
    pending = []

    def left(_):
        gone.append(True)
        for d in pending:
            d.cancel()
    request.notifyFinish().addBoth(left)
    request.write(b": console of %s\n\n" % name.encode("utf-8"))
    while not gone:
        if answer["dropped"]:
            request.write(format_event("gap", json.dumps(
                {"dropped": answer["dropped"], "offset": answer["offset"]})))
        if answer["data"]:
            request.write(format_event("output", answer["data"],
                                       answer["next"]))
        elif answer["closed"] is not None:
            request.write(format_event("closed", json.dumps(
                {"reason": answer["closed"]})))
            break
        else:
            request.write(KEEPALIVE)
        offset = answer["next"]
        # a user removed from the users file, a session that ended: the
        # console ends too (the page must log in again)
        why = _access_ended(req)
        if why is not None:
            request.write(format_event("error", json.dumps(
                {"message": "access ended: %s" % why})))
            try:
                await poll.call(luxi.REQ_CONSOLE_CLOSE, name, sid, owner)
            except errors.GenericError:
                pass            # gone already
            break
        d = poll.call(luxi.REQ_CONSOLE_READ, name, sid, owner, offset,
                      SSE_WAIT)
        pending[:] = [d]
        try:
            answer = await d
        except defer.CancelledError:
            break
        except errors.GenericError as err:
            if not gone:
                request.write(format_event("error", json.dumps(
                    {"message": str(err.args[0]) if err.args
                     else str(err)})))
            break
        finally:
            pending[:] = []
    return baserlib.STREAMED


async def write_input(req):
    """POST .../sessions/ID/input ``{"data", "encoding"}``"""
    name, sid = req.params["name"], req.params["session"]
    body = req.body_dict()
    unknown = sorted(set(body) - {"data", "encoding"})
    if unknown:
        raise baserlib.BadRequest("Invalid body parameters: %s: unknown"
                                  " (the body has data and encoding)"
                                  % ", ".join(unknown))
    data = body.get("data")
    encoding = body.get("encoding", "utf-8")
    if encoding not in ENCODINGS:
        raise baserlib.BadRequest("Invalid body parameters: encoding: %r is"
                                  " not one of %s" % (encoding,
                                                      ", ".join(ENCODINGS)))
    if not isinstance(data, str) or not data:
        raise baserlib.BadRequest("Invalid body parameters: data: expected"
                                  " a non-empty string, got %r"
                                  % (type(data).__name__ if data is not None
                                     else None,))
    if len(data) > MAX_INPUT:
        raise baserlib.BadRequest("Invalid body parameters: data: at most"
                                  " %d characters at once, got %d"
                                  % (MAX_INPUT, len(data)))
    if encoding == "utf-8":
        raw = data.encode("utf-8", "surrogatepass")
    else:
        try:
            raw = base64.b64decode(data.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise baserlib.BadRequest("Invalid body parameters: data: not"
                                      " base64")
    answer = await _call(req.app.master, luxi.REQ_CONSOLE_WRITE, name, sid,
                         _owner(req), base64.b64encode(raw).decode("ascii"))
    return {"written": answer.get("written", len(raw))}


async def close_session(req):
    """DELETE .../sessions/ID"""
    name, sid = req.params["name"], req.params["session"]
    await _call(req.app.master, luxi.REQ_CONSOLE_CLOSE, name, sid,
                _owner(req))
    return {"closed": sid}
