"""console.html in a real headless Chromium (tests/browser.py).

An in-process RAPI (the real app, its master the real luxi server code
and console relay, the node's session logic over fake console sockets on
the real reactor) and the page's files are served on 127.0.0.1, the
files with the pages' ``Content-Security-Policy: default-src 'self'``.
Logins are bearer tokens the test's users object knows.  Skipped where
chromium is not installed.
"""

import json
import os

from twisted.internet import defer, reactor, task
from twisted.trial import unittest
from twisted.web import resource, server, static

from ganeti.rapi import app as rapi_app
from ganeti.rapi import auth
from ganeti.server.masterd import MasterLuxiHandler

from tests.browser import (Browser, BrowserTestMixin,
                           keep_screenshot_on_failure, skip_unless_chromium)
from tests.test_console_master import NodeConsoles, make_config
from tests.test_rapi import FakeHandler, FakeMaster
from tests.test_console_master import FakeMaster as _Master

WEB_DIR = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "ganeti", "rapi", "web")
CSP = b"default-src 'self'"


class TokenUsers(object):
    """The test's users, logged in with sessions (docs/web.rst) whose
    tokens the test calls tok-NAME."""

    USERS = {"Bearer tok-writer": auth.User("writer", "x",
                                            frozenset(["write"])),
             "Bearer tok-other": auth.User("other", "x",
                                           frozenset(["write"]))}

    def authenticate(self, header):
        return None

    def get(self, name):
        for user in self.USERS.values():
            if user.name == name:
                return user
        return None


class _Page(static.File):
    """The page's files, with the pages' security policy."""

    contentTypes = dict(static.File.contentTypes,
                        **{".mjs": "text/javascript",
                           ".js": "text/javascript"})

    def render(self, request):
        request.setHeader(b"content-security-policy", CSP)
        return static.File.render(self, request)


class _Root(resource.Resource):
    """``/ui/`` the files, everything else RAPI."""

    def __init__(self, rapi):
        resource.Resource.__init__(self)
        self.rapi = rapi
        self.ui = _Page(WEB_DIR)

    def getChildWithDefault(self, name, request):
        if name == b"ui":
            return self.ui
        # RAPI routes from the root: give the segment back
        request.postpath.insert(0, request.prepath.pop())
        return self.rapi


class _Site(server.Site):
    """Drops its connections when asked (chromium keeps them open)."""

    def __init__(self, root):
        server.Site.__init__(self, root)
        self.channels = set()

    def buildProtocol(self, addr):
        channel = server.Site.buildProtocol(self, addr)
        lost = channel.connectionLost

        def connection_lost(reason):
            self.channels.discard(channel)
            return lost(reason)
        channel.connectionLost = connection_lost
        self.channels.add(channel)
        return channel


async def sleep(seconds):
    await task.deferLater(reactor, seconds, lambda: None)


class ConsolePageTests(BrowserTestMixin, unittest.TestCase):

    timeout = 120

    def setUp(self):
        skip_unless_chromium()
        self.cfg = make_config()
        self.rpc = NodeConsoles(reactor)
        handler = FakeHandler(self.cfg, reactor)
        relay = MasterLuxiHandler(_Master(self.cfg, self.rpc))
        for name in ("console_open", "console_read", "console_write",
                     "console_close"):
            setattr(handler, name, getattr(relay, name))
        self.rapi = rapi_app.RapiApp(FakeMaster(handler), TokenUsers(),
                                     reactor, answer_cache=False)
        #: tok-NAME -> the token of a session of NAME
        self.tokens = dict(
            (header.split()[1], self.rapi.sessions.create(user).token)
            for header, user in TokenUsers.USERS.items())
        self.site = _Site(_Root(self.rapi.resource()))
        self.port = reactor.listenTCP(0, self.site, interface="127.0.0.1")
        self.addCleanup(self.stop_serving)
        self.base = "http://127.0.0.1:%d/ui/" % self.port.getHost().port

    async def _stop_serving(self):
        for sessions in self.rpc.nodes.values():
            sessions.close_all()
        await self.port.stopListening()
        for channel in list(self.site.channels):
            channel.transport.abortConnection()
        await sleep(0.1)

    def stop_serving(self):
        return defer.Deferred.fromCoroutine(self._stop_serving())

    async def browser(self):
        b = await Browser.launch(reactor)
        self.addCleanup(b.close)
        keep_screenshot_on_failure(self, b, "console")
        return b

    async def login(self, b, token, rights=("write",)):
        await b.open(self.base + "console.html")
        await b.evaluate("sessionStorage.setItem('ganeti.session', %s)"
                         % json.dumps(json.dumps({
                             "token": self.tokens.get(token, token),
                             "user": token[4:],
                             "rights": list(rights)})))

    async def until(self, what, predicate, timeout=20):
        deadline = reactor.seconds() + timeout
        while not predicate():
            if reactor.seconds() > deadline:
                self.fail("timed out waiting for %s" % what)
            await sleep(0.05)

    def sessions(self):
        node = self.cfg.get_instance("vm1").primary_node
        return self.rpc.sessions(node).sessions

    async def test_not_logged_in(self):
        b = await self.browser()
        await b.open(self.base + "console.html?instance=vm1")
        text = await b.wait_until(
            "document.getElementById('console-message').hidden ? null :"
            " document.getElementById('console-message').textContent",
            what="the message")
        self.assertIn("You are not logged in", text)
        self.assertEqual(await b.evaluate(
            "document.querySelector('#console-message a')"
            ".getAttribute('href')"), "./")
        await self.login(b, "tok-reader", rights=("read",))
        await b.open(self.base + "console.html?instance=vm1")
        text = await b.wait_until(
            "document.getElementById('console-message').hidden ? null :"
            " document.getElementById('console-message').textContent",
            what="the message")
        self.assertIn("needs the write right", text)
        self.assertEqual(self.sessions(), {})

    async def test_terminal(self):
        b = await self.browser()
        await self.login(b, "tok-writer")
        await b.open(self.base + "console.html?instance=vm1")
        await b.wait_until("window.ganetiConsole && ganetiConsole.id",
                           what="the session")
        [sid] = list(self.sessions())
        self.assertEqual(self.sessions()[sid].owner, "user=writer")
        link = self.rpc.sockets.last("/run/vm1")
        # output, escape sequences included, shows in the terminal
        link.dataReceived(b"\x1b[1mweb-console-ok\x1b[0m\r\n# ")
        screen = ("(() => { const b = ganetiConsole.term.buffer.active;"
                  " let t = ''; for (let i = 0; i < b.length; i++)"
                  " t += b.getLine(i).translateToString(true) + '\\n';"
                  " return t; })()")
        await b.wait_until(screen + ".includes('web-console-ok')",
                           what="the output on the screen")
        self.assertTrue(await b.evaluate(
            "ganetiConsole.term.buffer.active.getLine(0).getCell(0)"
            ".isBold() !== 0"))
        # the policy stops xterm's own <style> elements; the page copies
        # them into a constructed sheet, so rows have their height
        self.assertTrue(await b.evaluate(
            "document.adoptedStyleSheets.some(s => Array.from(s.cssRules)"
            ".some(r => r.cssText.includes('xterm-dom-renderer-owner')))"))
        self.assertTrue(await b.evaluate(
            "document.querySelector('.xterm-rows > div')"
            ".getBoundingClientRect().height > 5"))
        # typing goes to the console, in order
        await b.click("#console-terminal")
        await b.evaluate("ganetiConsole.term.input('echo h\u00e9'),"
                         " ganetiConsole.term.input('\\r'), true")
        await self.until("the input", lambda: link.transport.value() ==
                         "echo h\u00e9\r".encode("utf-8"))
        # the console goes away: the page says why and offers a reconnect
        link.connectionLost(None)
        status = await b.wait_until(
            "document.getElementById('console-status').textContent"
            ".includes('ended') && document.getElementById("
            "'console-status').textContent", what="the end")
        self.assertIn("went away", status)
        self.assertFalse(await b.evaluate(
            "document.getElementById('console-reconnect').hidden"))
        await b.click("#console-reconnect")
        await b.wait_until("ganetiConsole.id && ganetiConsole.id !== %s"
                           % json.dumps(sid), what="a new session")
        self.assertEqual(len([s for s in self.sessions().values()
                              if s.closed is None]), 1)
        # leaving the page ends the session
        await b.open("about:blank")
        await self.until("the session to end", lambda: not any(
            s.closed is None for s in self.sessions().values()))

    async def test_other_users_session(self):
        # a session id of someone else's is unknown to this user
        b = await self.browser()
        await self.login(b, "tok-writer")
        await b.open(self.base + "console.html?instance=vm1")
        sid = await b.wait_until("window.ganetiConsole && ganetiConsole.id",
                                 what="the session")
        code = await b.evaluate(
            "fetch('/2/instances/vm1/console/sessions/' + %s + '/output"
            "?wait=0', {headers: {Authorization: %s}})"
            ".then(r => r.status)" % (json.dumps(sid), json.dumps(
                "Bearer " + self.tokens["tok-other"])))
        self.assertEqual(code, 404)
