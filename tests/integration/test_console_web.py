"""The serial console of a real kvm guest through RAPI, as the browser
console uses it (skipped without qemu, like tests/integration/
test_console.py): a RAPI daemon in front of the master; a session opened
by one user, refused to a read-only user and unknown to another user; a
shell command typed through ``.../input`` is answered by the guest's shell
in the ``.../output`` event stream and in a long poll; the session ends and
the instance keeps running.  With chromium installed, a user logs in to
the web console the RAPI daemon serves, follows the instance's Console link
to a new tab, and its terminal shows the same shell."""

import base64
import http.client
import json
import random
import socket
import time

from twisted.internet import defer, reactor, task


from tests import browser as browser_mod
from tests.integration.daemons import port_open, prepare_rapi, wait_for
from tests.integration.test_console import KvmGuestTestCase

PORT = 5086
USERS = (("admin", "s3cret", "write"), ("other", "0ther", "write"),
         ("reader", "rpw", "read"))
SESSIONS = "/2/instances/vm1/console/sessions"


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password))
                                       .encode()).decode()


ADMIN = basic("admin", "s3cret")


class WebConsoleTests(browser_mod.BrowserTestMixin, KvmGuestTestCase):

    BASE_PREFIX = "gnt-kw-"

    def setUp(self):
        KvmGuestTestCase.setUp(self)
        node = self.vc.master
        prepare_rapi(self.vc, ["%s {cleartext}%s %s" % user
                               for user in USERS])
        proc = self.vc.start("rapi", self.vc.twistd_command(
            "ganeti-rapi", node, "--port", str(PORT), "--no-ssl"))
        wait_for("RAPI", lambda: self.alive(proc) and
                 port_open(node.ip, PORT))

    def http(self, method, path, body=None, auth=ADMIN):
        conn = http.client.HTTPConnection(self.vc.master.ip, PORT,
                                          timeout=60)
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = auth
        conn.request(method, path, body=None if body is None
                     else json.dumps(body), headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        return resp.status, json.loads(raw) if raw else None

    def events(self, path, offset=0):
        """An event stream's (kind, id, data) as they come."""
        sock = socket.create_connection((self.vc.master.ip, PORT), 60)
        self.addCleanup(sock.close)
        sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n"
                      "Accept: text/event-stream\r\nLast-Event-ID: %d\r\n\r\n"
                      % (path, ADMIN, offset)).encode())
        stream = sock.makefile("rb")
        status = stream.readline()
        self.assertIn(b" 200 ", status)
        while stream.readline().strip():
            pass                    # the head
        fields = {}
        for line in stream:
            line = line.rstrip(b"\r\n").decode()
            if not line:
                if fields:
                    yield fields.get("event"), fields.get("id"), \
                        fields.get("data")
                fields = {}
            elif not line.startswith(":") and ": " in line:
                key, value = line.split(": ", 1)
                fields[key] = value

    def test_shell_through_rapi(self):
        code, err = self.http("POST", SESSIONS, auth=basic("reader", "rpw"))
        self.assertEqual(code, 403, err)
        code, answer = self.http("POST", SESSIONS)
        self.assertEqual(code, 200, answer)
        sid = answer["session"]
        path = "%s/%s" % (SESSIONS, sid)
        code, err = self.http("GET", path + "/output?wait=0",
                              auth=basic("other", "0ther"))
        self.assertEqual(code, 404, err)
        # typed: a command whose answer is not what was typed
        marker = "web-%d" % random.randint(1000, 9999)
        seen = []
        deadline = time.monotonic() + 60
        stream = self.events(path + "/output")
        while marker + "-42" not in "".join(seen):
            self.assertLess(time.monotonic(), deadline,
                            "no answer; seen %r" % "".join(seen))
            code, _ = self.http("POST", path + "/input",
                                {"data": "echo %s-$((6*7))\r" % marker})
            self.assertEqual(code, 200)
            stop = time.monotonic() + 5
            while time.monotonic() < stop and \
                    marker + "-42" not in "".join(seen):
                kind, event_id, data = next(stream)
                if kind == "output":
                    seen.append(base64.b64decode(data).decode(
                        "utf-8", "replace"))
                    self.assertTrue(event_id.isdigit())
                else:
                    self.assertNotIn(kind, ("closed", "error"), data)
        # the same output in a long poll from the start
        code, answer = self.http("GET", path + "/output?offset=0&wait=0")
        self.assertEqual(code, 200, answer)
        self.assertIn(marker + "-42", base64.b64decode(answer["data"])
                      .decode("utf-8", "replace"))
        self.assertIsNone(answer["closed"])
        code, answer = self.http("DELETE", path)
        self.assertEqual((code, answer), (200, {"closed": sid}))
        code, _ = self.http("GET", path + "/output?wait=0")
        self.assertEqual(code, 404)
        self.assertIn(marker + "-42", self.console_log())
        self.assertEqual(self.client.call(
            "Query", "instance", ["status"], ["=", "name", "vm1"])["data"],
            [[[0, "running"]]])
        # a stopped instance has no console: a clear refusal
        self.run_job({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                      "instance_name": "vm1", "timeout": 10})
        code, err = self.http("POST", SESSIONS)
        self.assertEqual(code, 409, err)
        self.assertIn("Instance vm1 is not running (state ADMIN_down)",
                      err["message"])

    def test_console_page(self):
        browser_mod.skip_unless_chromium()
        return defer.Deferred.fromCoroutine(self._console_page())

    async def _console_page(self):
        # as a user: the web console served by the RAPI daemon, its login
        # form, the instance's Console link (a new tab), the shell
        base = "http://%s:%d/ui/" % (self.vc.master.ip, PORT)
        b = await browser_mod.Browser.launch(reactor)
        self.addCleanup(b.close)
        browser_mod.keep_screenshot_on_failure(self, b, "kvm-console")
        await b.open(base)
        await b.fill("form#login input[name=username]", "admin")
        await b.fill("form#login input[name=password]", "s3cret")
        await b.click("form#login button[type=submit]")
        await b.wait_until("!document.querySelector('#app').hidden",
                           what="the console after the login")
        await b.evaluate("location.hash = '#/instances'")
        link = "table#instances tr[data-name=vm1] a[data-action=console]"
        await b.wait_until("document.querySelector(%s)" % json.dumps(link),
                           timeout=30, what="vm1's Console link")
        self.assertEqual(await b.evaluate(
            "document.querySelector(%s).getAttribute('href')"
            % json.dumps(link)), "console.html?instance=vm1")
        await b.click(link)
        self.assertEqual(await b.switch_to_new_page(),
                         base + "console.html?instance=vm1")
        await b.wait_until("window.ganetiConsole && ganetiConsole.id",
                           what="the session", timeout=60)
        screen = ("(() => { const b = ganetiConsole.term.buffer.active;"
                  " let t = ''; for (let i = 0; i < b.length; i++)"
                  " t += b.getLine(i).translateToString(true) + '\\n';"
                  " return t; })()")
        deadline = reactor.seconds() + 60
        while True:
            await b.evaluate("ganetiConsole.term.input("
                             "'echo page-$((6*7))-ok\\r'), true")
            try:
                await b.wait_until(screen + ".includes('page-42-ok')",
                                   what="the shell's answer", timeout=5)
                break
            except browser_mod.BrowserTimeout:
                if reactor.seconds() > deadline:
                    raise
        await b.open("about:blank")
        await task.deferLater(reactor, 0.5, lambda: None)
