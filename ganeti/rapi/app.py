"""The RAPI Klein application.

One Klein route per resource of :data:`ganeti.rapi.resources.RESOURCES`;
every route goes through :meth:`RapiApp.dispatch`, which, in this order:

1. finds the method (none: 501 "Method X is unsupported for path Y");
2. authenticates: an ``Authorization`` header is always checked (wrong
   credentials: 401), a method with an access list needs a user whose
   options meet it (no user: 401, user without the right: 403), and with
   ``require_auth`` every request needs a valid user;
3. reads the body (only ``application/json``: 415; bad JSON: 400);
4. checks that the master implements the method's opcodes (else 501,
   nothing submitted);
5. runs the handler and answers its value as JSON, or the error as
   ``{"code", "message", "explain"}``; identical concurrent pure reads
   share one run of the handler (:mod:`ganeti.rapi.coalesce`), and query
   answers rendered before are sent again while the master says they are
   unchanged (:mod:`ganeti.rapi.answers`).

Errors of the master map to HTTP: wrong input 400, unknown object 404,
unknown opcode 501, queue drained or full 503 (a client with too many
unfinished query jobs: 429), master unreachable 502, master too slow 504.

Jobs are submitted for a client (:meth:`RapiApp.client_of`: the user, or
the address of an anonymous request): each client may submit only so fast
(:mod:`ganeti.rapi.ratelimit`, 429 with ``Retry-After`` beyond), and the
master counts its query jobs on their own (luxi ``SubmitJobFor``).

Every answer closes the connection (as Ganeti's server does) and says
``Server: Ganeti <version>``.
"""

import re
import urllib.parse

from klein import Klein
from twisted.internet import defer
from twisted.logger import Logger
from werkzeug.exceptions import HTTPException
from werkzeug.exceptions import NotFound as WerkzeugNotFound
from werkzeug.routing import BaseConverter, RequestRedirect

from ganeti import errors
from ganeti import events
from ganeti import luxi
from ganeti.jqueue import budget
from ganeti.metrics import CONTENT_TYPE
from ganeti.rapi import answers
from ganeti.rapi import auth
from ganeti.rapi import baserlib
from ganeti.rapi import events as rapi_events
from ganeti.rapi import metrics as rapi_metrics
from ganeti.rapi import ratelimit
from ganeti.rapi import resources
from ganeti.rapi import sessions as rapi_sessions
from ganeti.rapi import web
from ganeti.rapi.baserlib import HttpError
from ganeti.rapi.coalesce import Coalescer
from ganeti.rapi.master import ImplementedOpcodes

log = Logger()

SERVER = baserlib.SERVER
AUTH_CHALLENGE = 'Basic realm="%s"' % auth.REALM
#: the challenge of a 401 for a request with a session token: no Basic,
#: so that a browser shows no password popup of its own
BEARER_CHALLENGE = 'Bearer realm="%s"' % auth.REALM
#: where the event stream is served
EVENTS_PATH = "/2/events"
METRICS_TYPE = CONTENT_TYPE.encode("ascii")

#: path parameters that are integers; every other one is a name
INT_PARAMS = frozenset(["job_id", "disk_index"])


class NameConverter(BaseConverter):
    """A Ganeti object name (or UUID) in a path."""
    regex = r"[\w._-]+"


def werkzeug_rule(path):
    """``/2/jobs/{job_id}`` -> ``/2/jobs/<int:job_id>``."""
    def repl(match):
        name = match.group(1)
        conv = "int" if name in INT_PARAMS else "gname"
        return "<%s:%s>" % (conv, name)
    return re.sub(r"\{(\w+)\}", repl, path)


def _error_from_ganeti(err):
    """The HttpError for an error the master (or luxi) raised."""
    text = str(err.args[0]) if err.args else str(err)
    if isinstance(err, errors.OpPrereqError):
        if len(err.args) > 1 and err.args[1] == errors.ECODE_NOENT:
            return baserlib.NotFound(explain="Nothing matches the given URI:"
                                     " %s" % text)
        return baserlib.BadRequest(text)
    if isinstance(err, (errors.ParseError, errors.TagError,
                        errors.ParameterError)):
        return baserlib.BadRequest(text)
    if isinstance(err, errors.OpCodeUnknown):
        return baserlib.NotImplementedHere(text)
    if isinstance(err, errors.JobQueueFull) and len(err.args) > 1 and \
            err.args[1] == budget.OVER_CLIENT:
        return baserlib.TooManyRequests(text)
    if isinstance(err, (errors.JobQueueDrainError, errors.JobQueueFull)):
        return baserlib.ServiceUnavailable(text)
    if isinstance(err, errors.JobLost):
        return baserlib.NotFound(explain="Nothing matches the given URI:"
                                 " %s" % text)
    if isinstance(err, luxi.LuxiTimeoutError):
        return baserlib.GatewayTimeout("The master daemon did not answer in"
                                       " time: %s" % text)
    if isinstance(err, (luxi.NoMasterError, luxi.ConnectionClosedError,
                        luxi.ProtocolError)):
        return baserlib.BadGateway("Cannot talk to the master daemon: %s"
                                   % text)
    if isinstance(err, errors.LuxiError):
        return baserlib.BadRequest(text)
    return baserlib.InternalError("%s: %s" % (type(err).__name__, text))


class RapiApp(object):
    """The remote API, answering from ``master`` (a luxi caller: ``call(
    method, *args)`` returning a Deferred) for the users of ``users``.

    ``long_poll`` (default: ``master``) carries the ``/2/jobs/ID/wait``
    long polls, so that many waiting clients never use up the connections
    other requests need.  ``answer_cache`` False: no rendered answers are
    kept (:mod:`ganeti.rapi.answers`)."""

    app = Klein()
    app.url_map.converters["gname"] = NameConverter

    #: seconds before a master without SubmitJobFor is asked again
    SUBMIT_FOR_RETRY = 60.0

    def __init__(self, master, users, clock, require_auth=False,
                 opcode_ttl=10.0, long_poll=None, answer_cache=True,
                 user_rate=(ratelimit.DEFAULT_USER_RATE,
                            ratelimit.DEFAULT_USER_BURST),
                 anonymous_rate=(ratelimit.DEFAULT_ANONYMOUS_RATE,
                                 ratelimit.DEFAULT_ANONYMOUS_BURST),
                 metrics=None, event_hub=None,
                 event_keepalive=rapi_events.DEFAULT_KEEPALIVE,
                 console_poll=None, sessions=None, web_dir=None):
        self.master = master
        #: carries the console output reads, long polls that a browser
        #: console keeps going as long as it is open (default: long_poll)
        self.console_poll = console_poll
        #: the web console's login sessions (POST /2/sessions)
        self.sessions = sessions if sessions is not None \
            else rapi_sessions.SessionStore(clock)
        #: the web console's files (served under /ui/)
        self.web_dir = web_dir if web_dir is not None else web.WEB_DIR
        #: the subscription to the master's event stream (GET /2/events;
        #: None: not served)
        self.event_hub = event_hub
        self.event_keepalive = event_keepalive
        self.long_poll = long_poll if long_poll is not None else master
        self.users = users
        self.clock = clock
        self.require_auth = require_auth
        self.implemented = ImplementedOpcodes(master, clock, opcode_ttl)
        self.coalescer = Coalescer()
        #: rendered query answers, reused while the master's is unchanged
        #: (None: every answer is rendered anew)
        self.answers = answers.AnswerCache(master, clock) \
            if answer_cache else None
        #: job submissions per client: (rate, burst) of users, of
        #: anonymous addresses
        self.user_limit = ratelimit.TokenBuckets(clock, *user_rate)
        self.anonymous_limit = ratelimit.TokenBuckets(clock, *anonymous_rate)
        # until when the master is taken not to know SubmitJobFor
        self._no_submit_for_until = None
        #: the Prometheus metrics (GET /metrics; a registry of their own)
        self.metrics = metrics if metrics is not None \
            else rapi_metrics.RapiMetrics()
        if event_hub is not None:
            self.metrics.attach_events(event_hub.bus)

    def resource(self):
        return self.app.resource()

    @app.handle_errors(WerkzeugNotFound)
    def _not_found(self, request, failure):
        data = self._answer_error(request, baserlib.NotFound())
        self.metrics.observe(rapi_metrics.OTHER, request.code, 0.0)
        return data

    # --- metrics --------------------------------------------------------

    @app.route(rapi_metrics.METRICS_PATH, branch=False)
    def metrics_page(self, request):
        """GET /metrics: Prometheus' text format; readable as the other
        reads are (anonymously, unless ``require_auth``)."""
        return self._timed(request, rapi_metrics.METRICS_PATH,
                           self._metrics_page(request))

    async def _metrics_page(self, request):
        verb = _text(request.method).upper()
        try:
            if verb != "GET":
                raise baserlib.NotImplementedHere(
                    "Method %s is unsupported for path %s"
                    % (verb, rapi_metrics.METRICS_PATH))
            self._user(_header(request, b"authorization"), resources.ANON)
        except HttpError as err:
            return self._answer_error(request, err)
        try:
            data = await self.metrics.scrape(self.master)
        except Exception:
            log.failure("GET {path} failed", path=rapi_metrics.METRICS_PATH)
            return self._answer_error(request, baserlib.InternalError(
                "Internal error; see the RAPI daemon's log"))
        request.setResponseCode(200)
        request.setHeader(b"content-type", METRICS_TYPE)
        request.setHeader(b"server", SERVER)
        request.setHeader(b"content-length", b"%d" % len(data))
        request.setHeader(b"connection", b"close")
        return data

    # --- the web console's files ----------------------------------------

    @app.route("/ui", branch=False, methods=["GET", "HEAD"])
    def ui_redirect(self, request):
        return web.redirect(request, web.UI_PATH)

    @app.route(web.UI_PATH, branch=False, methods=["GET", "HEAD"])
    def ui_index(self, request):
        return self._ui_file(request, "index.html")

    @app.route(web.UI_PATH + "<path:name>", branch=False,
               methods=["GET", "HEAD"])
    def ui_file(self, request, name):
        return self._ui_file(request, name)

    def _ui_file(self, request, name):
        """A file of the console (docs/web.rst), to anyone: 404 for a
        name that is not one."""
        data = web.serve(request, self.web_dir, name)
        if data is None:
            data = self._answer_error(request, baserlib.NotFound())
        self.metrics.observe(rapi_metrics.OTHER, request.code, 0.0)
        return data

    # --- event stream ---------------------------------------------------

    @app.route(EVENTS_PATH, branch=False)
    def events_page(self, request):
        """GET /2/events: the event stream as Server-Sent Events
        (:mod:`ganeti.rapi.events`); needs the ``read`` or ``write``
        right, as /2/query does."""
        return defer.Deferred.fromCoroutine(self._events_page(request))

    async def _events_page(self, request):
        verb = _text(request.method).upper()
        started = self.clock.seconds()
        try:
            if verb != "GET":
                raise baserlib.NotImplementedHere(
                    "Method %s is unsupported for path %s"
                    % (verb, EVENTS_PATH))
            self._user(_header(request, b"authorization"),
                       resources.READ_WRITE)
            since, kinds, names = _event_args(
                request.args, _header(request, b"last-event-id"))
            if self.event_hub is None:
                raise baserlib.NotImplementedHere(
                    "This RAPI daemon does not serve the event stream")
            try:
                await self.event_hub.ready()
            except errors.GenericError as err:
                raise _error_from_ganeti(err)
        except HttpError as err:
            data = self._answer_error(request, err)
            self.metrics.observe(EVENTS_PATH, request.code,
                                 self.clock.seconds() - started)
            return data
        self.metrics.observe(EVENTS_PATH, 200, self.clock.seconds() - started)
        request.setResponseCode(200)
        request.setHeader(b"content-type", rapi_events.SSE_TYPE)
        request.setHeader(b"cache-control", b"no-cache")
        request.setHeader(b"server", SERVER)
        request.setHeader(b"connection", b"close")
        channel = getattr(request, "channel", None)
        if channel is not None and hasattr(channel, "persistent"):
            channel.persistent = False
        # the head goes out now, not with the first event
        request.write(b": event stream of %s\n\n"
                      % str(self.event_hub.bus.head).encode("ascii"))
        header = _header(request, b"authorization")

        def access():
            # the users file and the sessions say now what they said at
            # the start (a user removed, a session ended: the stream ends)
            try:
                self._user(header, resources.READ_WRITE)
            except HttpError as err:
                return "%d %s" % (err.code, err.message)
            return None
        stream = rapi_events.SseStream(
            request, self.event_hub.bus, self.clock, since=since,
            kinds=kinds, names=names, keepalive=self.event_keepalive,
            render=self.event_hub.render, access=access)
        await stream.done
        return b""

    def _timed(self, request, path_class, coroutine):
        """The Deferred of ``coroutine`` (a request's handling), counted
        under ``path_class`` with its code and duration."""
        started = self.clock.seconds()

        def count(result):
            self.metrics.observe(path_class, request.code,
                                 self.clock.seconds() - started)
            return result
        return defer.Deferred.fromCoroutine(coroutine).addBoth(count)

    # --- dispatch -------------------------------------------------------

    def dispatch(self, request, res, params):
        return self._timed(request, res.path,
                           self._dispatch(request, res, params))

    async def _dispatch(self, request, res, params):
        if res.path == "/" and _text(request.method).upper() == "GET" and \
                web.wants_html(_header(request, b"accept")):
            # a browser asking for the entry point gets the web console;
            # Ganeti's clients (asking for JSON, or anything) get null
            return web.redirect(request, web.UI_PATH)
        try:
            value = await self._handle(request, res, params)
        except HttpError as err:
            return self._answer_error(request, err)
        except errors.GenericError as err:
            http_err = _error_from_ganeti(err)
            if http_err.code >= 500:
                log.warn("{method} {path}: {err}", method=_text(
                    request.method), path=_text(request.path), err=err)
            return self._answer_error(request, http_err)
        except Exception:
            log.failure("{method} {path} failed", method=_text(
                request.method), path=_text(request.path))
            return self._answer_error(request, baserlib.InternalError(
                "Internal error; see the RAPI daemon's log"))
        if value is baserlib.STREAMED:
            # the handler wrote its answer (an event stream)
            return b""
        return self._answer(request, 200, value)

    async def _handle(self, request, res, params):
        verb = _text(request.method).upper()
        method = res.methods.get(verb)
        if method is None:
            raise baserlib.NotImplementedHere(
                "Method %s is unsupported for path %s"
                % (verb, _text(request.path)))
        user = self._authenticate(request, method)
        raw = request.content.read() if request.content is not None else b""
        body = baserlib.parse_body(_header(request, b"content-type"), raw)
        if method.opcodes:
            missing = await self.implemented.missing(method.opcodes)
            if missing:
                raise baserlib.NotImplementedHere(
                    "%s %s needs %s, which this cluster's master daemon does"
                    " not implement yet" % (verb, res.path,
                                            ", ".join(missing)))
        args = baserlib.QueryArgs(request.args)
        req = resources.Request(self, res, method, args, body, params, user,
                                self.client_of(request, user), http=request,
                                address=self.address_of(request),
                                token=rapi_sessions.parse_bearer(
                                    _header(request, b"authorization")))
        if method.shared and body is None:
            key = (res.path, tuple(sorted(params.items())),
                   tuple(sorted((k, tuple(v)) for k, v in args.args.items())))

            async def render():
                value = await method.handler(req)
                if isinstance(value, baserlib.Rendered):
                    return value
                return baserlib.Rendered(baserlib.render_json(value))
            return await self.coalescer.run(key, render)
        return await method.handler(req)

    def check_head(self, verb, uri, headers):
        """The error answering a request from its head alone (401, 403),
        before its body is read; None when it may go on.

        ``verb`` and ``uri`` are the bytes of the request line,
        ``headers`` its Headers.  A path or method that does not exist
        only has its credentials checked here (the app answers the
        rest).  An early gate only: :meth:`dispatch` checks every request
        again, as it always did.
        """
        header = headers.getRawHeaders(b"authorization")
        header = _text(header[-1]) if header else None
        if self._public(verb, uri, headers):
            # the console's files, and the redirect to them: no secrets
            return None
        res = self._resource_for(uri)
        method = res.methods.get(_text(verb).upper()) \
            if res is not None else None
        try:
            if method is None:
                if header is not None or self.require_auth:
                    self._user(header, ())
            else:
                self._user(header, method.required_access,
                           public=method.public)
        except HttpError as err:
            # answered before it is handled: counted, not timed
            self.metrics.observe(self._path_class(uri, res), err.code)
            return err
        return None

    @staticmethod
    def _public(verb, uri, headers):
        """Whether a request is for the web console's files (or the
        browser's redirect to them): served to anyone."""
        if _text(verb).upper() not in ("GET", "HEAD"):
            return False
        path = urllib.parse.unquote(_text(uri).split("?", 1)[0])
        if path == web.UI_PATH.rstrip("/") or path.startswith(web.UI_PATH):
            return True
        accept = headers.getRawHeaders(b"accept")
        return path == "/" and web.wants_html(
            _text(accept[-1]) if accept else None)

    def _resource_for(self, uri):
        """The resource a request line's URI names, or None."""
        path = urllib.parse.unquote(_text(uri).split("?", 1)[0])
        try:
            endpoint, _ = self.app.url_map.bind("rapi").match(path)
        except (HTTPException, RequestRedirect):
            return None
        return _RESOURCES.get(endpoint)

    @staticmethod
    def _path_class(uri, res):
        if res is not None:
            return res.path
        path = urllib.parse.unquote(_text(uri).split("?", 1)[0])
        if path == rapi_metrics.METRICS_PATH:
            return path
        return rapi_metrics.OTHER

    def _authenticate(self, request, method):
        return self._user(_header(request, b"authorization"),
                          method.required_access, public=method.public)

    def _user(self, header, access, public=False):
        """The user an Authorization header value proves (Basic
        credentials, or a session's Bearer token), if the access list
        ``access`` lets them in (401, 403 otherwise).  ``public``: no
        credentials needed even with ``require_auth``."""
        user = None
        token = rapi_sessions.parse_bearer(header)
        if token is not None:
            user = self.sessions.user(token, self.users)
            if user is None:
                raise baserlib.Unauthorized(
                    message="Session ended",
                    explain="The session is unknown or has ended (logged"
                    " out, idle or too old, the RAPI daemon restarted, or"
                    " the user's entry in the users file changed); log in"
                    " again",
                    headers={"WWW-Authenticate": BEARER_CHALLENGE})
        elif header is not None:
            user = self.users.authenticate(header)
            if user is None:
                raise baserlib.Unauthorized(
                    headers={"WWW-Authenticate": AUTH_CHALLENGE})
        elif access or (self.require_auth and not public):
            raise baserlib.Unauthorized(
                headers={"WWW-Authenticate": AUTH_CHALLENGE})
        if access and not (user.options & frozenset(access)):
            raise baserlib.Forbidden()
        return user

    # --- jobs -----------------------------------------------------------

    @staticmethod
    def client_of(request, user):
        """Who submits a job: ``user=NAME``, or for an anonymous request
        ``address=IP`` (IPv6: its /64).  Behind a proxy every anonymous
        client is the proxy."""
        if user is not None:
            return "user=" + _printable(user.name)
        address = request.getClientAddress()
        host = getattr(address, "host", None) or "unknown"
        return "address=" + _printable(ratelimit.address_key(host))

    @staticmethod
    def address_of(request):
        """The client address of a request (IPv6: its /64)."""
        address = request.getClientAddress()
        host = getattr(address, "host", None) or "unknown"
        return ratelimit.address_key(host)

    def take_submit_token(self, client):
        """Refuse (429, with Retry-After) a job ``client`` submits faster
        than its rate allows."""
        if client.startswith("user="):
            limit, option = self.user_limit, "job"
        else:
            limit, option = self.anonymous_limit, "anonymous-job"
        wait = limit.take(client)
        if wait:
            retry = ratelimit.retry_after(wait)
            raise baserlib.TooManyRequests(
                "Too many jobs submitted by %s: at most %g a second on"
                " average, %d at once (ganeti-rapi --%s-rate and --%s-burst);"
                " retry in %s s" % (client, limit.rate, limit.burst, option,
                                    option, retry),
                headers={"Retry-After": retry})

    async def submit_job(self, client, ops):
        """Submit a job of ``ops`` for ``client``; its id.  A master that
        does not know SubmitJobFor gets SubmitJob (and is asked again a
        minute later)."""
        now = self.clock.seconds()
        if self._no_submit_for_until is None or \
                now >= self._no_submit_for_until:
            try:
                return await self.master.call(luxi.REQ_SUBMIT_JOB_FOR,
                                              client, ops)
            except errors.LuxiError as err:
                if not luxi.is_unsupported_method(err):
                    raise
                self._no_submit_for_until = now + self.SUBMIT_FOR_RETRY
        return await self.master.call(luxi.REQ_SUBMIT_JOB, ops)

    # --- answers --------------------------------------------------------

    def _answer(self, request, code, value, headers=None):
        if isinstance(value, baserlib.Rendered):
            data = value.data
        else:
            data = baserlib.render_json(value)
        request.setResponseCode(code)
        request.setHeader(b"content-type", baserlib.JSON_TYPE)
        request.setHeader(b"server", SERVER)
        request.setHeader(b"content-length", b"%d" % len(data))
        for name, text in (headers or {}).items():
            request.setHeader(name, text)
        # no keep-alive, as Ganeti's server
        request.setHeader(b"connection", b"close")
        channel = getattr(request, "channel", None)
        if channel is not None and hasattr(channel, "persistent"):
            channel.persistent = False
        return data

    def wait_job_end(self, job_id, timeout):
        return defer.Deferred.fromCoroutine(
            self._wait_job_end(job_id, timeout))

    async def _wait_job_end(self, job_id, timeout):
        """``(status, opresult)`` once the job is finished."""
        deadline = self.clock.seconds() + timeout
        prev = None
        while True:
            rows = await self.master.call(luxi.REQ_QUERY_JOBS, [job_id],
                                          ["status", "opresult"])
            if not rows or rows[0] is None:
                raise baserlib.NotFound(explain="job %s vanished" % job_id)
            status, result = rows[0]
            if status in ("success", "error", "canceled"):
                return status, result
            remaining = deadline - self.clock.seconds()
            if remaining <= 0:
                raise baserlib.GatewayTimeout(
                    "Job %s did not finish within %d seconds" % (job_id,
                                                                 timeout))
            changed = await self.master.call(
                luxi.REQ_WAIT_FOR_JOB_CHANGE, job_id, ["status"], prev,
                None, min(remaining, resources.WAIT_TIMEOUT))
            if changed != luxi.JOB_NOTCHANGED and changed:
                prev = changed[0]

    def _answer_error(self, request, err):
        return self._answer(request, err.code, err.body(), err.headers)


def _event_args(args, last_event_id):
    """``(since, kinds, names)`` of a GET /2/events (HttpError 400 naming
    the parameter when one is wrong)."""
    def values(name):
        return [_text(v) for v in args.get(name.encode("ascii"), [])]
    since = None
    for label, raw in (("Last-Event-ID", [last_event_id]
                        if last_event_id else []),
                       ("since", values("since"))):
        if not raw:
            continue
        try:
            since = int(raw[-1])
        except ValueError:
            raise baserlib.BadRequest("%s: %r is not an event number"
                                      % (label, raw[-1]))
        if since < 0:
            raise baserlib.BadRequest("%s: %d is not an event number (must"
                                      " not be negative)" % (label, since))
        break
    kinds = []
    for value in values("kind"):
        kinds.extend(k for k in value.split(",") if k)
    names = values("name") + values("id")
    try:
        kinds, names = events.check_filter(kinds or None, names or None)
    except events.BadFilter as err:
        raise baserlib.BadRequest(str(err))
    return since, kinds, names


def _printable(text):
    # what luxi accepts as a client name: printable, no spaces, 256 at most
    return "".join(c if c.isprintable() and not c.isspace() else "?"
                   for c in text)[:200]


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) \
        else value


def _header(request, name):
    value = request.getHeader(name)
    return _text(value) if value is not None else None


#: Klein endpoint name -> resource
_RESOURCES = {}


def _register(res):
    def endpoint(self, request, **params):
        return self.dispatch(request, res, params)
    name = "rapi:%s" % res.path
    _RESOURCES[name] = res
    endpoint.__name__ = name
    RapiApp.app.route(werkzeug_rule(res.path), endpoint=name)(endpoint)


for _res in resources.RESOURCES:
    _register(_res)
del _res


def served_paths():
    """``{werkzeug rule: methods}`` of every route Klein serves (for the
    OpenAPI test)."""
    return dict((rule.rule, rule.endpoint)
                for rule in RapiApp.app.url_map.iter_rules())
