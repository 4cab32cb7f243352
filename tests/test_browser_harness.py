"""The headless-Chromium driver of tests/browser.py against a real chromium.

A tiny twisted.web server on 127.0.0.1 (plain HTTP, and HTTPS with a
self-signed certificate like the RAPI's) serves a page with a button that
changes a text after a setTimeout; the tests open it, evaluate, click, fill
and wait, check that JS errors surface in Python, that screenshots are
PNGs, and that close() leaves no chromium process behind.  They skip where
chromium is not installed.
"""

import os
import signal
import struct

from twisted.internet import defer, reactor, task
from twisted.trial import reporter, unittest
from twisted.web import resource, server, static

from ganeti import crypto
from tests import browser as browser_mod
from tests.browser import (Browser, BrowserError, BrowserGone,
                           BrowserTestMixin, BrowserTimeout, JavaScriptError,
                           keep_screenshot_on_failure, process_group_members,
                           skip_unless_chromium)

PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>harness</title></head>
<body>
<p id="status">idle</p>
<input id="name" oninput="window.inputs = (window.inputs || 0) + 1"
       onchange="window.changes = (window.changes || 0) + 1">
<button id="go" onclick="later()">Go</button>
<a id="tab" href="/second" target="_blank" rel="opener">second</a>
<a id="tab-noopener" href="/second" target="_blank">second</a>
<script>
function later() {
    setTimeout(function () {
        document.getElementById("status").textContent =
            "done: " + document.getElementById("name").value;
    }, 300);
}
console.log("page loaded");
</script>
</body></html>
"""

SECOND = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>second</title></head>
<body><p id="seen"></p>
<script>
document.getElementById("seen").textContent =
    sessionStorage.getItem("token") || "nothing";
</script>
</body></html>
"""

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class _TrackingSite(server.Site):
    """A Site that remembers its connections so a test can drop them all:
    chromium keeps connections alive, and trial fails a test that leaves
    them (and their timers) in the reactor."""

    def __init__(self, root):
        super().__init__(root)
        self.channels = set()
        self._all_gone = []

    def buildProtocol(self, addr):
        channel = super().buildProtocol(addr)
        lost = channel.connectionLost

        def connection_lost(reason):
            lost(reason)
            self.channels.discard(channel)
            if not self.channels:
                waiters, self._all_gone = self._all_gone, []
                for d in waiters:
                    d.callback(None)
        channel.connectionLost = connection_lost
        self.channels.add(channel)
        return channel

    def drop_all(self):
        if not self.channels:
            return defer.succeed(None)
        d = defer.Deferred()
        self._all_gone.append(d)
        for channel in list(self.channels):
            channel.transport.abortConnection()
        return d


def _site():
    root = resource.Resource()
    root.putChild(b"", static.Data(PAGE, "text/html; charset=utf-8"))
    root.putChild(b"second", static.Data(SECOND, "text/html; charset=utf-8"))
    return _TrackingSite(root)


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


class BrowserHarnessTests(BrowserTestMixin, unittest.TestCase):

    def setUp(self):
        skip_unless_chromium()

    async def _serve(self, tls=False):
        """Start the page server on 127.0.0.1; its base URL."""
        site = _site()
        if tls:
            cert = crypto.new_cluster_certificate("localhost")
            port = reactor.listenSSL(
                0, site, cert.private_certificate().options(),
                interface="127.0.0.1")
        else:
            port = reactor.listenTCP(0, site, interface="127.0.0.1")

        async def stop():
            await port.stopListening()
            await site.drop_all()
        self.addCleanup(lambda: defer.Deferred.fromCoroutine(stop()))
        return "%s://127.0.0.1:%d/" % ("https" if tls else "http",
                                       port.getHost().port)

    async def _browser(self):
        b = await Browser.launch(reactor)
        self.addCleanup(b.close)
        keep_screenshot_on_failure(self, b, "page")
        return b

    async def _wait_for_console(self, b, predicate, what):
        """Poll the browser's console messages (Python side) for one."""
        deadline = reactor.seconds() + 30
        while reactor.seconds() < deadline:
            for m in b.console_messages:
                if predicate(m):
                    return m
            await task.deferLater(reactor, 0.1, lambda: None)
        self.fail("no console message %s; %s" % (what, b.recent_console()))

    # -- tests --------------------------------------------------------------

    async def test_open_and_evaluate(self):
        url = await self._serve()
        b = await self._browser()
        await b.open(url)
        self.assertEqual(await b.evaluate("document.title"), "harness")
        self.assertEqual(await b.evaluate("1 + 2"), 3)
        self.assertIsNone(await b.evaluate("undefined"))
        # promises are awaited; values come back as JSON
        self.assertEqual(await b.evaluate(
            "new Promise(r => setTimeout(() => r({a: [1, 'x']}), 50))"),
            {"a": [1, "x"]})
        self.assertEqual(await b.text("#status"), "idle")
        await self._wait_for_console(
            b, lambda m: m.kind == "log" and m.text == "page loaded",
            "'page loaded'")

    async def test_fill_click_and_wait_until(self):
        url = await self._serve()
        b = await self._browser()
        await b.open(url)
        await b.fill("#name", "alice")
        self.assertEqual(
            await b.evaluate("document.getElementById('name').value"),
            "alice")
        self.assertEqual(await b.evaluate("[window.inputs, window.changes]"),
                         [1, 1])
        await b.click("#go")
        # the button changes the text only after a setTimeout
        value = await b.wait_until(
            "document.getElementById('status').textContent"
            ".startsWith('done') && document.getElementById('status')"
            ".textContent", what="the status after the click")
        self.assertEqual(value, "done: alice")
        self.assertEqual(await b.text("#status"), "done: alice")
        # an element is truthy, as in JavaScript (it arrives as {})
        self.assertEqual(await b.wait_until(
            "document.querySelector('#status')", what="an element"), {})
        # a promise is awaited
        self.assertEqual(await b.wait_until(
            "new Promise((ok) => setTimeout(() => ok(7), 50))",
            what="a promise"), 7)

    async def test_switch_to_new_page(self):
        url = await self._serve()
        b = await self._browser()
        await b.open(url)
        await b.evaluate("sessionStorage.setItem('token', 'abc'), 1")
        # a link to a new tab that keeps its opener gets a copy of the
        # page's sessionStorage (the web console's console link relies
        # on it) ...
        await b.click("#tab")
        self.assertEqual(await b.switch_to_new_page(), url + "second")
        self.assertEqual(await b.text("#seen"), "abc")
        # ... a plain target=_blank link (no opener) gets none
        await b.open(url)
        await b.click("#tab-noopener")
        await b.switch_to_new_page()
        self.assertEqual(await b.text("#seen"), "nothing")
        with self.assertRaises(BrowserTimeout):
            await b.switch_to_new_page(timeout=1)

    async def test_https_with_self_signed_certificate(self):
        url = await self._serve(tls=True)
        b = await self._browser()
        await b.open(url)
        self.assertEqual(await b.evaluate("location.protocol"), "https:")
        await b.click("#go")
        await b.wait_until(
            "document.getElementById('status').textContent == 'done: '",
            what="the status after the click")

    async def test_javascript_errors_surface(self):
        b = await self._browser()
        with self.assertRaises(JavaScriptError) as caught:
            await b.evaluate(
                "(function explode() { throw new Error('boom'); })()")
        self.assertIn("boom", caught.exception.js_message)
        self.assertIn("explode", caught.exception.stack)
        self.assertIn("boom", str(caught.exception))
        with self.assertRaises(JavaScriptError) as caught:
            await b.evaluate("Promise.reject(new Error('later boom'))")
        self.assertIn("later boom", str(caught.exception))
        # uncaught exceptions of the page land in console_messages
        await b.evaluate(
            "setTimeout(() => { throw new Error('uncaught one'); }, 0)")
        await self._wait_for_console(
            b, lambda m: m.kind == "exception" and "uncaught one" in m.text,
            "about the uncaught exception")

    async def test_missing_element_and_unreachable_page(self):
        url = await self._serve()
        b = await self._browser()
        await b.open(url)
        with self.assertRaises(JavaScriptError) as caught:
            await b.click("#nope")
        self.assertIn("no element matches #nope", str(caught.exception))
        with self.assertRaises(JavaScriptError):
            await b.fill("#nope", "x")
        with self.assertRaises(JavaScriptError):
            await b.text("#nope")
        # a port nobody listens on: a clear error naming the URL
        probe = reactor.listenTCP(0, _site(), interface="127.0.0.1")
        closed = "http://127.0.0.1:%d/" % probe.getHost().port
        await probe.stopListening()
        with self.assertRaises(BrowserError) as caught:
            await b.open(closed)
        self.assertIn(closed, str(caught.exception))
        self.assertIn("ERR_CONNECTION_REFUSED", str(caught.exception))
        # chromium's error page is up: a failed test can still screenshot
        path = os.path.join(self.mktemp(), "error.png")
        await b.screenshot(path)
        self.assertIsNotNone(_png_size(path))

    async def test_wait_until_timeout_says_what(self):
        b = await self._browser()
        await b.evaluate("console.error('something broke'), 1")
        with self.assertRaises(BrowserTimeout) as caught:
            await b.wait_until("window.neverSet", timeout=1,
                               what="the flag that never comes")
        message = str(caught.exception)
        self.assertIn("the flag that never comes", message)
        self.assertIn("window.neverSet", message)
        self.assertIn("something broke", message)

    async def test_screenshot_is_a_png(self):
        url = await self._serve()
        b = await self._browser()
        await b.open(url)
        path = os.path.join(self.mktemp(), "page.png")
        self.assertEqual(await b.screenshot(path), path)
        size = _png_size(path)
        self.assertIsNotNone(size, "not a PNG: %s" % path)
        self.assertEqual(size[0], 1280)       # --window-size
        self.assertGreater(os.path.getsize(path), 1000)

    async def test_close_leaves_no_process(self):
        b = await Browser.launch(reactor)
        self.addCleanup(b.close)
        pid, profile = b.pid, b.profile_dir
        self.assertTrue(os.path.isdir(profile))
        self.assertIn(pid, process_group_members(pid))
        await b.close()
        with self.assertRaises(ProcessLookupError):
            os.kill(pid, 0)
        self.assertEqual(process_group_members(pid), [])
        self.assertFalse(os.path.exists(profile))
        await b.close()                       # a second close is fine
        with self.assertRaises(BrowserGone):
            await b.evaluate("1")

    async def test_chromium_that_does_not_start(self):
        fake = os.path.join(self.mktemp())
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n")
        os.chmod(fake, 0o755)
        with self.assertRaises(BrowserGone) as caught:
            await Browser.launch(reactor, path=fake)
        message = str(caught.exception)
        self.assertIn("exited with status 3", message)
        self.assertIn("cannot open display", message)

    async def test_chromium_dying_fails_pending_calls(self):
        b = await self._browser()
        pending = b.evaluate("new Promise(() => {})")   # never settles
        os.killpg(b.pid, signal.SIGKILL)
        with self.assertRaises(BrowserGone) as caught:
            await pending
        self.assertIn("killed by signal 9", str(caught.exception))
        with self.assertRaises(BrowserGone):
            await b.open("about:blank")


class ScreenshotOnFailureTests(unittest.SynchronousTestCase):
    """keep_screenshot_on_failure, on inner tests run here (an inner test
    spins the reactor itself, which only a synchronous test allows)."""

    def _inner(self, fail):
        skip_unless_chromium()
        class Inner(BrowserTestMixin, unittest.TestCase):
            def test_page(self):
                async def go():
                    b = await Browser.launch(reactor)
                    self.addCleanup(b.close)
                    keep_screenshot_on_failure(self, b, "inner")
                    await b.open("data:text/html,<h1>failing page</h1>")
                    await b.evaluate("console.log('inner log'), 1")
                    if fail:
                        self.fail("failing on purpose")
                return defer.Deferred.fromCoroutine(go())
        test = Inner("test_page")
        result = reporter.TestResult()
        test.run(result)
        base = os.path.join(os.path.abspath(browser_mod.SCREENSHOT_DIR),
                            "%s-inner" % test.id())
        self.addCleanup(lambda: [os.remove(p) for p in
                                 (base + ".png", base + ".console.txt")
                                 if os.path.exists(p)])
        return result, base

    def test_failed_test_leaves_screenshot(self):
        result, base = self._inner(fail=True)
        self.assertEqual(len(result.failures), 1, result.errors)
        self.assertEqual(result.errors, [])
        self.assertIsNotNone(_png_size(base + ".png"))
        with open(base + ".console.txt") as f:
            self.assertIn("inner log", f.read())

    def test_passed_test_leaves_none(self):
        result, base = self._inner(fail=False)
        self.assertTrue(result.wasSuccessful(), result.errors)
        self.assertFalse(os.path.exists(base + ".png"))

    def test_needs_the_mixin(self):
        self.assertRaises(TypeError, keep_screenshot_on_failure, self,
                          object(), "x")
