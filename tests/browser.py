"""Drive a real headless Chromium from trial tests.

The browser is Debian's ``chromium``, run headless with a throw-away
profile.  We speak the Chrome DevTools Protocol (CDP) to it over
``--remote-debugging-pipe``: Chromium reads commands on its fd 3 and writes
answers and events on its fd 4, one JSON message per NUL-terminated chunk,
so no websocket library is needed.

    class ConsoleTests(BrowserTestMixin, unittest.TestCase):
        async def test_login(self):
            browser = await Browser.launch(reactor)
            self.addCleanup(browser.close)
            keep_screenshot_on_failure(self, browser, "login")
            await browser.open("https://127.0.0.1:%d/" % port)
            await browser.fill("#user", "admin")
            await browser.click("button#login")
            await browser.wait_until("document.title == 'Cluster'",
                                     what="the page after the login")

Every method returns a Deferred.  Tests that use the browser call
:func:`skip_unless_chromium` first (Browser.launch does it too) so that they
skip with the reason where Chromium is not installed.

The browser resolves no host name but ``localhost`` (IP literals such as
127.0.0.1 work as usual) and uses no proxy, so a test cannot reach outside
the machine by accident; ``extra_args`` given to :meth:`Browser.launch`
come last on the command line and override these defaults.
"""

import base64
import functools
import json
import os
import shutil
import signal
import sys
import tempfile

import attr
from twisted.internet import defer, error, protocol, task
from twisted.logger import Logger
from twisted.python import components
from twisted.trial import itrial, unittest

log = Logger()

# Looked up in this order when no path is given.
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome",
                       "google-chrome-stable")

CHROMIUM_ARGS = (
    "--headless=new",
    "--no-sandbox",                 # the tests run as root
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--ignore-certificate-errors",  # the RAPI's certificate is self-signed
    "--window-size=1280,900",
    "--remote-debugging-pipe",
    # /dev/shm is small in containers; Chromium crashes when it runs out
    "--disable-dev-shm-usage",
    # no traffic to anything but the pages a test opens
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-breakpad",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--no-pings",
    "--no-proxy-server",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.*",
    "--password-store=basic",
    "--use-mock-keychain",
)

# Starts chromium as the leader of a new session and process group, so
# that close() can kill it with all its helper processes by one PID.
_SETSID_EXEC = ("import os, sys; os.setsid(); "
                "os.execv(sys.argv[1], sys.argv[1:])")

LAUNCH_TIMEOUT = 60      # seconds; chromium starts slowly on a loaded machine
COMMAND_TIMEOUT = 60     # a CDP command that gets no answer
LOAD_TIMEOUT = 60        # open(): navigation until the load event
CLOSE_TIMEOUT = 10       # Browser.close before we kill
STDERR_TAIL = 4000       # bytes of chromium's stderr kept for error messages
MAX_CONSOLE_MESSAGES = 1000


class BrowserError(Exception):
    """The browser could not do what was asked."""


class BrowserGone(BrowserError):
    """Chromium exited (or was never started properly)."""


class CDPError(BrowserError):
    """Chromium answered a DevTools command with an error."""


class JavaScriptError(BrowserError):
    """A JavaScript expression threw; carries the message and the stack."""

    def __init__(self, message, stack=None, expression=None):
        self.js_message = message
        self.stack = stack
        self.expression = expression
        text = "JavaScript error: %s" % message
        if stack and stack.strip() != message.strip():
            text += "\n%s" % stack
        if expression is not None:
            text += "\n(evaluating: %s)" % _shorten(expression)
        super().__init__(text)


class BrowserTimeout(BrowserError):
    """A wait on the page did not finish in time."""


@attr.s(frozen=True)
class ConsoleMessage:
    """One console API call or uncaught exception of the page."""
    kind = attr.ib()         # "log", "error", "warning", ..., "exception", "log-entry"
    text = attr.ib()
    url = attr.ib(default=None)
    line = attr.ib(default=None)

    def __str__(self):
        where = ""
        if self.url:
            where = " (%s:%s)" % (self.url, self.line)
        return "[%s] %s%s" % (self.kind, self.text, where)


def _shorten(text, limit=300):
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "..."


def _deferred(f):
    """Make an ``async def`` method return a Deferred to its callers."""
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        return defer.Deferred.fromCoroutine(f(*args, **kwargs))
    return wrapper


def find_chromium(path=None):
    """The chromium binary to run: ``path`` or the first candidate on
    $PATH; None if there is none."""
    if path is not None:
        return path if os.access(path, os.X_OK) else None
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def skip_unless_chromium(path=None):
    """Skip the calling test (SkipTest with the reason) if no chromium
    binary can be found."""
    if find_chromium(path) is None:
        if path is not None:
            raise unittest.SkipTest("chromium binary %s is missing or not"
                                    " executable" % path)
        raise unittest.SkipTest(
            "no chromium binary found (looked for %s on $PATH); install"
            " Debian's chromium (python3 dev.py does it as root) to run the"
            " browser tests" % ", ".join(CHROMIUM_CANDIDATES))


def process_group_members(pgid):
    """PIDs of the live (not zombie) processes in process group ``pgid``,
    read from /proc; empty where /proc is not available."""
    members = []
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return members
    for pid in pids:
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
        except OSError:
            continue                 # exited meanwhile
        # "pid (comm) state ppid pgrp ..."; comm may contain spaces and ')'
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) >= 3 and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(pid))
    return members


class _ChromiumProcess(protocol.ProcessProtocol):
    """Feeds the browser what chromium writes on fd 4 and stderr."""

    def __init__(self, browser):
        self._browser = browser

    def connectionMade(self):
        self.transport.closeStdin()

    def childDataReceived(self, childFD, data):
        if childFD == 4:
            self._browser._pipe_received(data)
        else:
            self._browser._output_received(data)

    def processEnded(self, reason):
        self._browser._process_ended(reason)


class Browser:
    """A headless chromium with one page, driven over the DevTools pipe.

    Use :meth:`launch`; the constructor only prepares.
    """

    def __init__(self, reactor, path, extra_args=()):
        self._reactor = reactor
        self.path = path
        self._extra_args = tuple(extra_args)
        self.pid = None
        self.profile_dir = None
        self.console_messages = []
        self._process = None
        self._buffer = b""
        self._stderr = b""
        self._next_id = 1
        self._pending = {}        # id -> (Deferred, method, session id)
        self._waiters = []        # [(method, session id, predicate, Deferred)]
        self._session = None
        self._targets = set()     # ids of the pages attached to so far
        self._ended = None        # why chromium is gone, once it is
        self._exited = defer.Deferred()
        self._closed = False
        self._closing = None

    # -- starting ---------------------------------------------------------

    @classmethod
    def launch(cls, reactor, path=None, extra_args=()):
        """Start chromium and attach to its page.  Deferred -> Browser."""
        skip_unless_chromium(path)
        browser = cls(reactor, find_chromium(path), extra_args)
        return defer.Deferred.fromCoroutine(browser._launch())

    async def _launch(self):
        self.profile_dir = tempfile.mkdtemp(prefix="chromium-profile-")
        argv = [sys.executable, "-c", _SETSID_EXEC, self.path]
        argv += list(CHROMIUM_ARGS)
        argv += ["--user-data-dir=%s" % self.profile_dir]
        argv += list(self._extra_args)
        argv += ["about:blank"]
        env = dict(os.environ, HOME=self.profile_dir)
        try:
            self._process = self._reactor.spawnProcess(
                _ChromiumProcess(self), sys.executable, argv, env=env,
                childFDs={0: "w", 1: "r", 2: "r", 3: "w", 4: "r"})
        except BaseException:
            shutil.rmtree(self.profile_dir, ignore_errors=True)
            raise
        self.pid = self._process.pid
        log.debug("started chromium {path} (pid {pid})", path=self.path,
                  pid=self.pid)
        try:
            await self._attach()
        except BaseException:
            await self.close()
            raise
        return self

    async def _attach(self):
        deadline = self._reactor.seconds() + LAUNCH_TIMEOUT
        target_id = None
        # The about:blank page shows up shortly after the browser is ready.
        while target_id is None:
            answer = await self._send("Target.getTargets",
                                      timeout=LAUNCH_TIMEOUT)
            pages = [t for t in answer["targetInfos"] if t["type"] == "page"]
            if pages:
                target_id = pages[0]["targetId"]
            elif self._reactor.seconds() > deadline:
                answer = await self._send("Target.createTarget",
                                          {"url": "about:blank"})
                target_id = answer["targetId"]
            else:
                await task.deferLater(self._reactor, 0.1, lambda: None)
        await self._attach_to(target_id)

    async def _attach_to(self, target_id):
        answer = await self._send("Target.attachToTarget",
                                  {"targetId": target_id, "flatten": True})
        self._targets.add(target_id)
        self._session = answer["sessionId"]
        await self._send("Page.enable", session=self._session)
        await self._send("Runtime.enable", session=self._session)
        await self._send("Log.enable", session=self._session)

    @_deferred
    async def switch_to_new_page(self, timeout=30):
        """Follow the page the current one opened (a link with
        ``target=_blank``, ``window.open``): from now on every call acts
        on it.  Waits until it has loaded; its URL."""
        deadline = self._reactor.seconds() + timeout
        while True:
            answer = await self._send("Target.getTargets")
            new = [t for t in answer["targetInfos"] if t["type"] == "page"
                   and t["targetId"] not in self._targets]
            if new:
                break
            if self._reactor.seconds() > deadline:
                raise BrowserTimeout("no new page opened within %s s; %s"
                                     % (timeout, self.recent_console()))
            await task.deferLater(self._reactor, 0.1, lambda: None)
        await self._attach_to(new[0]["targetId"])
        await self.wait_until("document.readyState == 'complete'",
                              timeout=max(deadline - self._reactor.seconds(),
                                          5), what="the new page loaded")
        return await self.evaluate("location.href")

    # -- the pipe ---------------------------------------------------------

    def _send(self, method, params=None, session=None,
              timeout=COMMAND_TIMEOUT):
        """Send one CDP command; Deferred -> its result (a dict)."""
        if self._ended is not None:
            return defer.fail(BrowserGone(
                "cannot send %s: %s" % (method, self._ended)))
        msg_id = self._next_id
        self._next_id += 1
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        d = defer.Deferred()
        self._pending[msg_id] = (d, method, session)

        def timed_out(result, timeout):
            self._pending.pop(msg_id, None)
            raise BrowserTimeout("chromium did not answer %s within %s s"
                                 % (method, timeout))
        d.addTimeout(timeout, self._reactor, onTimeoutCancel=timed_out)
        try:
            self._process.writeToChild(3, json.dumps(msg).encode() + b"\0")
        except KeyError:
            # chromium closed its end; processEnded follows and fails d
            pass
        return d

    def _pipe_received(self, data):
        self._buffer += data
        *messages, self._buffer = self._buffer.split(b"\0")
        for raw in messages:
            try:
                msg = json.loads(raw)
            except ValueError:
                log.warn("chromium sent a message that is not JSON: {raw}",
                         raw=_shorten(raw))
                continue
            self._dispatch(msg)

    def _dispatch(self, msg):
        if "id" in msg:
            entry = self._pending.pop(msg["id"], None)
            if entry is None:
                return                # answered after its timeout
            d, method, _ = entry
            if "error" in msg:
                err = msg["error"]
                d.errback(CDPError("%s failed: %s%s" % (
                    method, err.get("message"),
                    " (%s)" % err["data"] if err.get("data") else "")))
            else:
                d.callback(msg.get("result", {}))
            return
        method = msg.get("method")
        params = msg.get("params", {})
        session = msg.get("sessionId")
        if session is not None and session == self._session:
            self._note_event(method, params)
        for waiter in list(self._waiters):
            w_method, w_session, predicate, d = waiter
            if w_method == method and w_session == session and \
                    predicate(params):
                self._waiters.remove(waiter)
                d.callback(params)

    def _note_event(self, method, params):
        if method == "Runtime.consoleAPICalled":
            frame = (params.get("stackTrace") or {}).get("callFrames") or [{}]
            self._add_console(ConsoleMessage(
                kind=params.get("type", "log"),
                text=" ".join(_remote_object_text(arg)
                              for arg in params.get("args", [])),
                url=frame[0].get("url") or None,
                line=frame[0].get("lineNumber")))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self._add_console(ConsoleMessage(
                kind="exception", text=_exception_text(details),
                url=details.get("url") or None,
                line=details.get("lineNumber")))
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self._add_console(ConsoleMessage(
                kind="log-%s" % entry.get("level", "info"),
                text=entry.get("text", ""),
                url=entry.get("url") or None,
                line=entry.get("lineNumber")))
        elif method in ("Inspector.targetCrashed", "Inspector.detached"):
            self._add_console(ConsoleMessage(
                kind="crash", text="the page %s" % (
                    "crashed" if method == "Inspector.targetCrashed"
                    else "was detached: %s" % params.get("reason"))))
            self._fail_session(BrowserError(
                "the page %s while waiting" % (
                    "crashed" if method == "Inspector.targetCrashed"
                    else "was detached")))

    def _add_console(self, message):
        log.debug("page console: {message}", message=str(message))
        self.console_messages.append(message)
        del self.console_messages[:-MAX_CONSOLE_MESSAGES]

    def _fail_session(self, exc):
        for msg_id, (d, _, session) in list(self._pending.items()):
            if session == self._session:
                del self._pending[msg_id]
                d.errback(exc)
        waiters, self._waiters = self._waiters, []
        for _, _, _, d in waiters:
            d.errback(exc)

    def _wait_event(self, method, predicate=lambda params: True,
                    timeout=LOAD_TIMEOUT):
        """Deferred -> the params of the next event ``method`` of our page
        that ``predicate`` accepts.  Register before causing the event."""
        if self._ended is not None:
            return defer.fail(BrowserGone(
                "cannot wait for %s: %s" % (method, self._ended)))
        d = defer.Deferred()
        waiter = (method, self._session, predicate, d)
        self._waiters.append(waiter)

        def timed_out(result, timeout):
            raise BrowserTimeout("no %s within %s s; %s" % (
                method, timeout, self.recent_console()))

        def forget(result):          # on timeout or cancel too
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            return result
        d.addTimeout(timeout, self._reactor, onTimeoutCancel=timed_out)
        d.addBoth(forget)
        return d

    def _output_received(self, data):
        self._stderr = (self._stderr + data)[-STDERR_TAIL:]

    def stderr_tail(self):
        """The last lines chromium wrote to stdout/stderr, as text."""
        return self._stderr.decode("utf-8", "replace")

    def _process_ended(self, reason):
        if isinstance(reason.value, error.ProcessDone):
            how = "exited with status 0"
        elif reason.value.signal is not None:
            how = "was killed by signal %d" % reason.value.signal
        else:
            how = "exited with status %s" % reason.value.exitCode
        self._ended = "chromium (pid %s) %s" % (self.pid, how)
        if not self._closed:
            tail = self.stderr_tail().strip()
            self._ended += "; its last output:\n%s" % (tail or "(none)")
            log.warn("{why}", why=self._ended)
        exc = BrowserGone(self._ended)
        pending, self._pending = self._pending, {}
        for d, _, _ in pending.values():
            d.errback(exc)
        waiters, self._waiters = self._waiters, []
        for _, _, _, d in waiters:
            d.errback(exc)
        self._exited.callback(None)

    # -- the page ---------------------------------------------------------

    def recent_console(self, count=20):
        """The last ``count`` console messages as one text, for errors."""
        if not self.console_messages:
            return "no console messages"
        return "recent console messages:\n" + "\n".join(
            "  %s" % m for m in self.console_messages[-count:])

    @_deferred
    async def open(self, url, timeout=LOAD_TIMEOUT):
        """Navigate the page to ``url`` and wait for its load event."""
        loaded = self._wait_event("Page.loadEventFired", timeout=timeout)
        try:
            answer = await self._send("Page.navigate", {"url": url},
                                      session=self._session)
        except BaseException:
            loaded.addErrback(lambda _: None)
            loaded.cancel()
            raise
        if answer.get("errorText"):
            # Chromium shows its error page now; until that has loaded the
            # page takes no commands (a screenshot of the failed test)
            try:
                await self._wait_briefly(loaded)
            except BrowserError:
                pass                 # the error below says more
            if not loaded.called:
                loaded.cancel()
            raise BrowserError("cannot open %s: %s" % (url,
                                                       answer["errorText"]))
        if not answer.get("loaderId"):
            # same-document navigation (only the #fragment changed)
            loaded.addErrback(lambda _: None)
            loaded.cancel()
            return
        await loaded

    async def _wait_briefly(self, d, timeout=10):
        """Wait for ``d`` at most ``timeout`` seconds more."""
        done = defer.Deferred()
        d.addBoth(lambda r: (done.called or done.callback(r), None)[1])
        done.addTimeout(timeout, self._reactor)
        try:
            await done
        except defer.TimeoutError:
            pass                # waited long enough: the caller goes on

    @_deferred
    async def evaluate(self, js, timeout=COMMAND_TIMEOUT):
        """The value of the JavaScript expression ``js`` (promises are
        awaited; the value comes back as JSON).  A JS exception raises
        :class:`JavaScriptError` with its message and stack."""
        answer = await self._send("Runtime.evaluate", {
            "expression": js,
            "awaitPromise": True,
            "returnByValue": True,
            "userGesture": True,
        }, session=self._session, timeout=timeout)
        details = answer.get("exceptionDetails")
        if details:
            exc = details.get("exception") or {}
            message = _exception_text(details)
            raise JavaScriptError(message, exc.get("description"), js)
        return answer.get("result", {}).get("value")

    @_deferred
    async def wait_until(self, js, timeout=30, what=None, interval=0.1):
        """Poll the expression ``js`` until it is truthy; its value.

        On timeout raise :class:`BrowserTimeout` naming ``what`` (what we
        waited for), the expression, its last value or JS error, and the
        page's recent console messages.  JS errors while polling count as
        "not yet" (the element may not exist yet).
        """
        deadline = self._reactor.seconds() + timeout
        last = "never evaluated"
        while True:
            remaining = deadline - self._reactor.seconds()
            try:
                # truthiness is JavaScript's: a DOM element arrives here as
                # {} (falsy in Python) but is what a test waits for
                truthy, value = await self.evaluate(
                    "Promise.resolve((%s)).then((v) => [!!v, v])" % js,
                    timeout=max(remaining, 1))
            except JavaScriptError as err:
                last = "last JS error: %s" % err.js_message
            except BrowserTimeout:
                last = "the expression did not finish"
            else:
                if truthy:
                    return value
                last = "last value: %s" % _shorten(json.dumps(value))
            if self._reactor.seconds() >= deadline:
                raise BrowserTimeout(
                    "timed out after %s s waiting for %s: %s (%s); %s"
                    % (timeout, what or "the page", _shorten(js), last,
                       self.recent_console()))
            await task.deferLater(self._reactor, interval, lambda: None)

    @_deferred
    async def click(self, selector):
        """Click the element ``selector`` with the mouse, at its centre.

        Like a user: the element is scrolled into view first, and clicking
        an invisible element or one covered by another raises an error.
        """
        where = await self.evaluate(_ELEMENT_JS % json.dumps(selector) + """
            el.scrollIntoView({block: "center", inline: "center"});
            const r = el.getBoundingClientRect();
            if (r.width == 0 || r.height == 0)
                throw new Error("element " + sel + " is not visible");
            const x = r.left + r.width / 2, y = r.top + r.height / 2;
            const top = document.elementFromPoint(x, y);
            if (top !== el && !el.contains(top))
                throw new Error("element " + sel + " is covered by " +
                                (top ? top.outerHTML.slice(0, 120) : "nothing"));
            return [x, y];
        })()""")
        x, y = where
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            params = {"type": kind, "x": x, "y": y}
            if kind != "mouseMoved":
                params.update(button="left", buttons=1 if kind ==
                              "mousePressed" else 0, clickCount=1)
            await self._send("Input.dispatchMouseEvent", params,
                             session=self._session)

    @_deferred
    async def fill(self, selector, text):
        """Set the value of the form field ``selector`` to ``text`` and
        dispatch ``input`` and ``change`` events, as typing would."""
        await self.evaluate(_ELEMENT_JS % json.dumps(selector) + """
            if (!("value" in el))
                throw new Error("element " + sel + " has no value to fill");
            el.focus();
            const proto = Object.getPrototypeOf(el);
            const setter = Object.getOwnPropertyDescriptor(proto, "value");
            if (setter && setter.set) setter.set.call(el, %s);
            else el.value = %s;
            el.dispatchEvent(new Event("input", {bubbles: true}));
            el.dispatchEvent(new Event("change", {bubbles: true}));
            return true;
        })()""" % (json.dumps(text), json.dumps(text)))

    @_deferred
    async def text(self, selector):
        """The text of the element ``selector`` as rendered (innerText)."""
        return await self.evaluate(_ELEMENT_JS % json.dumps(selector) + """
            return el.innerText !== undefined ? el.innerText : el.textContent;
        })()""")

    @_deferred
    async def screenshot(self, path):
        """Save a PNG of the page's viewport to ``path``; the path."""
        answer = await self._send("Page.captureScreenshot",
                                  {"format": "png"}, session=self._session)
        data = base64.b64decode(answer["data"])
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return path

    # -- ending -----------------------------------------------------------

    def close(self):
        """End chromium and remove its profile.  Deferred; safe to call
        more than once (later calls wait for the first)."""
        if self._closing is None:
            self._closing = defer.Deferred.fromCoroutine(self._close())
        d = defer.Deferred()
        # hand the outcome to this caller; the chain keeps None for the next
        self._closing.addBoth(lambda r: (d.callback(r), None)[1])
        return d

    async def _close(self):
        self._closed = True
        try:
            if self._process is not None and self._ended is None:
                try:
                    await self._send("Browser.close", timeout=CLOSE_TIMEOUT)
                except BrowserError:
                    pass             # gone already, or stuck: killed below
                await self._wait_exit(CLOSE_TIMEOUT)
            if self.pid is not None:
                # helpers of chromium may outlive it; they share its group
                if self._ended is None or process_group_members(self.pid):
                    try:
                        os.killpg(self.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass    # the group is gone already
                await self._wait_exit(CLOSE_TIMEOUT)
                if self._ended is None:
                    log.warn("chromium (pid {pid}) did not end after"
                             " SIGKILL", pid=self.pid)
        finally:
            if self.profile_dir is not None:
                shutil.rmtree(self.profile_dir, ignore_errors=True)

    async def _wait_exit(self, timeout):
        if self._ended is not None:
            return
        d = defer.Deferred()
        self._exited.addCallback(lambda r: (d.called or d.callback(None), r)[1])
        d.addTimeout(timeout, self._reactor)
        try:
            await d
        except defer.TimeoutError:
            pass                # still running: close() kills its group


# The start of a JS function body finding ``el`` for the selector (a JSON
# string), or throwing a clear error; callers close it with "})()".
_ELEMENT_JS = """(() => {
    const sel = %s;
    const el = document.querySelector(sel);
    if (!el) throw new Error("no element matches " + sel);
"""


def _remote_object_text(obj):
    if "value" in obj:
        value = obj["value"]
        return value if isinstance(value, str) else json.dumps(value)
    if "unserializableValue" in obj:
        return obj["unserializableValue"]
    return obj.get("description") or obj.get("type", "?")


def _exception_text(details):
    exc = details.get("exception") or {}
    description = exc.get("description")
    if description:
        return description.split("\n", 1)[0]
    if "value" in exc:
        return "Uncaught %s" % _remote_object_text(exc)
    return details.get("text", "unknown JavaScript error")


# -- screenshots of failed tests ----------------------------------------------

class _FailureRecorder(components.proxyForInterface(itrial.IReporter,
                                                   "_original")):
    """Passes everything to the real reporter, noting failures."""

    def __init__(self, original, testcase):
        self._original = original
        self._testcase = testcase

    def addError(self, test, error):
        self._testcase._browser_test_failed = True
        return self._original.addError(test, error)

    def addFailure(self, test, fail):
        self._testcase._browser_test_failed = True
        return self._original.addFailure(test, fail)


class BrowserTestMixin:
    """Mix into a trial TestCase to use :func:`keep_screenshot_on_failure`.

    Its ``run()`` hands trial a reporter that notes this test's failures
    and errors.  Trial reports a failed test method to the reporter before
    it runs the cleanups, so a cleanup can ask whether the test failed;
    this uses only trial's public reporter interface.
    """

    _browser_test_failed = False

    def run(self, result):
        self._browser_test_failed = False
        reporter = itrial.IReporter(result, None)
        if reporter is None:
            reporter = unittest.PyUnitResultAdapter(result)
        return super().run(_FailureRecorder(reporter, self))


SCREENSHOT_DIR = "browser-screenshots"


def keep_screenshot_on_failure(testcase, browser, name):
    """When ``testcase`` fails or errors, save a screenshot of ``browser``.

    The screenshot goes to ``<trial temp dir>/browser-screenshots/<test
    id>-<name>.png`` (trial runs tests inside its temp dir), the page's
    console messages beside it as ``.console.txt``; both paths are logged
    and printed.  Call it after ``addCleanup(browser.close)``: cleanups run
    last-registered first, so the screenshot is taken before the browser
    closes.  The test case must inherit :class:`BrowserTestMixin`.
    """
    if not isinstance(testcase, BrowserTestMixin):
        raise TypeError("keep_screenshot_on_failure needs a test case that"
                        " inherits tests.browser.BrowserTestMixin, not %r"
                        % (type(testcase).__name__,))

    async def take():
        if not testcase._browser_test_failed or browser._ended is not None:
            return
        base = os.path.join(os.path.abspath(SCREENSHOT_DIR),
                            "%s-%s" % (testcase.id(), name))
        try:
            await browser.screenshot(base + ".png")
        except Exception as err:
            print("\nscreenshot of failed test %s not taken: %s"
                  % (testcase.id(), err), file=sys.stderr)
            return
        with open(base + ".console.txt", "w") as f:
            f.write("".join("%s\n" % m for m in browser.console_messages))
        log.info("screenshot of failed test {test}: {path}",
                 test=testcase.id(), path=base + ".png")
        print("\nscreenshot of failed test %s: %s.png (console: %s"
              ".console.txt)" % (testcase.id(), base, base), file=sys.stderr)

    def screenshot_if_failed():
        return defer.Deferred.fromCoroutine(take())
    testcase.addCleanup(screenshot_if_failed)
