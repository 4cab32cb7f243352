"""The web console in a real browser against the demo cluster: log in as
the demo's write user, see the instances, shut one down through its
button and the confirmation dialog, and watch its status change without a
reload; a read-only user sees no action buttons."""

import json
import re

from twisted.internet import defer, reactor
from twisted.trial import unittest

from tests import browser
from tests.integration.demo_process import RunningDemo

RAPI_PORT = 5080


class WebConsoleTests(browser.BrowserTestMixin, unittest.TestCase):

    timeout = 600

    def setUp(self):
        browser.skip_unless_chromium()

    def start_demo(self):
        """The demo cluster (2 nodes, random loopback addresses); its
        output's text."""
        self.demo = RunningDemo(self, nodes=2, prefix="gnt-web-")
        return self.demo.text()

    def stop_demo(self):
        self.assertEqual(self.demo.stop(), 0, self.demo.text())

    @defer.inlineCallbacks
    def login(self, b, url, user, password):
        if url is not None:
            yield b.open(url)
        yield b.wait_until("document.querySelector('form#login') &&"
                           " !document.querySelector('#login-view').hidden",
                           what="the login form")
        yield b.fill("form#login input[name=username]", user)
        yield b.fill("form#login input[name=password]", password)
        yield b.click("form#login button[type=submit]")
        yield b.wait_until("!document.querySelector('#app').hidden",
                           what="the console after the login")

    @defer.inlineCallbacks
    def test_shutdown_from_the_console(self):
        out = self.start_demo()
        match = re.search(r"Web console \(docs/web.rst\): (https://\S+/ui/)"
                          r" \(log in as (\S+), password (\S+)\)", out)
        self.assertIsNotNone(match, out)
        url, user, password = match.groups()
        self.assertEqual(url.split(":")[-1], "%d/ui/" % RAPI_PORT)
        users_file = re.search(r"users in (\S+)\):", out).group(1)

        b = yield browser.Browser.launch(reactor)
        self.addCleanup(b.close)
        browser.keep_screenshot_on_failure(self, b, "console")
        yield self.login(b, url, user, password)
        session = yield b.evaluate(
            "JSON.parse(sessionStorage.getItem('ganeti.session'))")
        self.assertEqual(session["user"], user)
        self.assertIn("write", session["rights"])
        self.assertTrue(session["token"])

        yield b.open(url + "#/instances")
        yield b.wait_until(
            "document.querySelector('#live').textContent == 'live'",
            timeout=30, what="the live event stream")
        yield b.wait_until(
            "document.querySelectorAll('table#instances tr[data-name]')"
            ".length >= 2", timeout=30, what="the demo's instances")
        rows = yield b.evaluate(
            "[...document.querySelectorAll('table#instances tr[data-name]')]"
            ".map(r => [r.dataset.name, r.querySelector("
            "'td[data-field=status]').textContent])")
        statuses = dict(rows)
        for name in ("inst1.example.com", "inst2.example.com"):
            self.assertIn(name, statuses)
        running = [n for n, s in sorted(statuses.items()) if s == "running"]
        self.assertTrue(running, statuses)
        name = running[0]
        row = "table#instances tr[data-name=%s]" % json.dumps(name)
        # the demo's instances are fake ones: no serial console to link to
        # (a kvm instance's link is checked in test_console_web)
        links = yield b.evaluate(
            "document.querySelectorAll('table#instances"
            " a[data-action=console]').length")
        self.assertEqual(links, 0)
        # a reservation is shown as one, with nothing to click
        reserved = yield b.evaluate(
            "[...document.querySelectorAll('table#instances tr[data-name]')]"
            ".filter(r => r.querySelector('td[data-field=status]')"
            ".textContent.startsWith('forthcoming'))"
            ".map(r => r.querySelectorAll('button:not([disabled])').length)")
        self.assertEqual(reserved, [0])

        # a value set now is lost if the page reloads
        yield b.evaluate("window.__notReloaded = 'yes'")
        loaded_at = yield b.evaluate("window.ganetiConsole.loadedAt")
        yield b.click(row + " button[data-action=shutdown]")
        yield b.wait_until("document.querySelector('dialog#confirm').open",
                           what="the confirmation dialog")
        yield b.click('dialog#confirm button[data-confirm="ok"]')
        yield b.wait_until(
            "document.querySelector(%s).textContent == 'ADMIN_down'"
            % json.dumps(row + " td[data-field=status]"), timeout=120,
            what="the instance's status ADMIN_down")
        self.assertEqual((yield b.evaluate("window.__notReloaded")), "yes")
        self.assertEqual((yield b.evaluate("window.ganetiConsole.loadedAt")),
                         loaded_at)
        # the job is in the task log, followed to its end
        yield b.wait_until(
            "[...document.querySelectorAll('#tasklog td[data-field=status]')]"
            ".some(td => td.textContent == 'success')", timeout=60,
            what="the shutdown job's success in the task log")
        # and in the jobs table
        yield b.open(url + "#/jobs")
        yield b.wait_until(
            "document.querySelectorAll('table#jobs tr[data-id]').length > 0",
            what="the jobs table")

        # a read-only user sees no action buttons
        with open(users_file, "a") as f:
            f.write("webreader webreaderpw read\n")
        yield b.click("#logout")
        yield self.login(b, None, "webreader", "webreaderpw")
        session = yield b.evaluate(
            "JSON.parse(sessionStorage.getItem('ganeti.session'))")
        self.assertEqual(session["rights"], ["read"])
        yield b.open(url + "#/instances")
        yield b.wait_until(
            "document.querySelectorAll('table#instances tr[data-name]')"
            ".length >= 2", timeout=30, what="the instances, read only")
        buttons = yield b.evaluate(
            "document.querySelectorAll('#app button[data-action]').length")
        self.assertEqual(buttons, 0)
        yield b.open(url + "#/nodes")
        yield b.wait_until(
            "document.querySelectorAll('table#nodes tr[data-name]').length"
            " == 2", what="the nodes, read only")
        buttons = yield b.evaluate(
            "document.querySelectorAll('#app button[data-action]').length")
        self.assertEqual(buttons, 0)
        # rights given in the users file apply at the next page
        with open(users_file) as f:
            text = f.read()
        with open(users_file, "w") as f:
            f.write(text.replace("webreader webreaderpw read",
                                 "webreader webreaderpw read,write"))
        yield b.open(url + "#/instances")
        yield b.wait_until(
            "document.querySelectorAll('table#instances"
            " button[data-action=shutdown]').length >= 2", timeout=30,
            what="the action buttons once the user may write")
        errors = [str(m) for m in b.console_messages
                  if m.kind in ("error", "exception")]
        self.assertEqual(errors, [])
        yield b.close()
        self.stop_demo()
