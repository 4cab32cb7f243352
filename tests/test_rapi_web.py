"""The web console on the RAPI daemon: its files under /ui/, the redirect
of a browser's GET /, login sessions (POST/DELETE /2/sessions, Bearer
tokens) with their expiry on a fake clock, and the failed-login limit."""

import json
import os

from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.trial import unittest
from twisted.web.http_headers import Headers

from ganeti.rapi import sessions
from ganeti.rapi import web

from tests.test_rapi import WRITER, RapiTestCase, USERS
from tests.test_rapi_events import SseTestCase

BROWSER_ACCEPT = ("text/html,application/xhtml+xml,application/xml;q=0.9,"
                  "image/avif,image/webp,*/*;q=0.8")


def bearer(token):
    return "Bearer " + token


class WebFileTests(RapiTestCase):

    openapi_checks = False

    @defer.inlineCallbacks
    def get(self, path, headers=None):
        response = yield self.stub.get("http://rapi.test" + path,
                                       headers=headers or {},
                                       allow_redirects=False)
        body = yield response.content()
        return response, body

    @defer.inlineCallbacks
    def test_index_with_security_headers(self):
        response, body = yield self.get("/ui/")
        self.assertEqual(response.code, 200)
        self.assertIn(b'id="login"', body)
        headers = response.headers
        self.assertEqual(headers.getRawHeaders("content-type"),
                         ["text/html; charset=utf-8"])
        csp = headers.getRawHeaders("content-security-policy")[0]
        self.assertIn("default-src 'self'", csp)
        self.assertIn("script-src 'self'", csp)
        self.assertNotIn("unsafe-inline", csp)
        self.assertEqual(headers.getRawHeaders("x-frame-options"), ["DENY"])
        self.assertEqual(headers.getRawHeaders("x-content-type-options"),
                         ["nosniff"])
        self.assertEqual(headers.getRawHeaders("referrer-policy"),
                         ["no-referrer"])
        self.assertIsNone(headers.getRawHeaders("set-cookie"))

    @defer.inlineCallbacks
    def test_content_types(self):
        for name, ctype in (("app.js", "text/javascript; charset=utf-8"),
                            ("app.css", "text/css; charset=utf-8"),
                            ("vendor/xterm/xterm.mjs",
                             "text/javascript; charset=utf-8"),
                            ("vendor/xterm/xterm.css",
                             "text/css; charset=utf-8"),
                            ("index.html", "text/html; charset=utf-8")):
            response, body = yield self.get("/ui/" + name)
            self.assertEqual(response.code, 200, name)
            self.assertEqual(response.headers.getRawHeaders("content-type"),
                             [ctype], name)
            with open(os.path.join(web.WEB_DIR, *name.split("/")),
                      "rb") as f:
                self.assertEqual(body, f.read())

    @defer.inlineCallbacks
    def test_no_inline_script_in_html(self):
        for name in os.listdir(web.WEB_DIR):
            if not name.endswith(".html"):
                continue
            response, body = yield self.get("/ui/" + name)
            text = body.decode("utf-8")
            for start in range(len(text)):
                start = text.find("<script", start)
                if start < 0:
                    break
                tag = text[start:text.find(">", start)]
                self.assertIn("src=", tag, (name, tag))
            self.assertNotIn(" onclick=", text)

    @defer.inlineCallbacks
    def test_ui_redirects_to_ui_slash(self):
        response, _ = yield self.get("/ui")
        self.assertEqual(response.code, 302)
        self.assertEqual(response.headers.getRawHeaders("location"),
                         ["/ui/"])

    @defer.inlineCallbacks
    def test_unknown_file_is_404(self):
        for path in ("/ui/nope.js", "/ui/nope", "/ui/.hidden.js",
                     "/ui/sub/app.js", "/ui/vendor/xterm/LICENSE",
                     "/ui/vendor/README", "/ui/vendor/xterm/"):
            response, body = yield self.get(path)
            self.assertEqual(response.code, 404, path)
            self.assertEqual(json.loads(body)["code"], 404)

    @defer.inlineCallbacks
    def test_no_path_traversal(self):
        for path in ("/ui/../app.py", "/ui/..%2fapp.py", "/ui/%2e%2e/app.py",
                     "/ui/..%2f..%2fsetup.py", "/ui/%2e%2e%2fweb.py",
                     "/ui/..", "/ui/%2fetc%2fpasswd", "/ui/....//app.py",
                     "/ui/vendor/../index.html", "/ui/vendor/..%2f..%2fweb.py",
                     "/ui/vendor/%2e%2e/%2e%2e/web.py"):
            response, body = yield self.get(path)
            self.assertIn(response.code, (404, 308), path)
            if response.code == 308:
                # werkzeug merges slashes: still under /ui/
                self.assertTrue(response.headers.getRawHeaders(
                    "location")[0].startswith("http://rapi.test/ui/"))
            self.assertNotIn(b"import", body)

    def test_symlink_out_is_not_followed(self):
        import tempfile
        base = tempfile.mkdtemp(dir=self.dir)
        os.symlink(os.path.dirname(web.WEB_DIR), os.path.join(base, "up"))
        with open(os.path.join(base, "ok.js"), "w") as f:
            f.write("1")
        self.assertIsNone(web.file_path(base, "up/web/app.js"))
        self.assertEqual(web.file_path(base, "ok.js"),
                         os.path.join(base, "ok.js"))

    def test_file_path_refuses_outside_names(self):
        for name in ("../web.py", "..", "/etc/passwd", "a/../../x.js",
                     ".hidden.js", "web.py", "x\x00.js", "index.html/",
                     "vendor/../index.html", "vendor//xterm/xterm.mjs",
                     "vendor/.x/a.js", "vendor/xterm/LICENSE",
                     "a/b/c/d/e/f.js"):
            self.assertIsNone(web.file_path(web.WEB_DIR, name), name)
        self.assertEqual(web.file_path(web.WEB_DIR, "vendor/xterm/xterm.mjs"),
                         os.path.join(web.WEB_DIR, "vendor", "xterm",
                                      "xterm.mjs"))
        self.assertEqual(web.file_path(web.WEB_DIR, "index.html"),
                         os.path.join(web.WEB_DIR, "index.html"))

    @defer.inlineCallbacks
    def test_browser_get_root_redirects(self):
        response, _ = yield self.get("/", {"Accept": [BROWSER_ACCEPT]})
        self.assertEqual(response.code, 302)
        self.assertEqual(response.headers.getRawHeaders("location"),
                         ["/ui/"])

    @defer.inlineCallbacks
    def test_clients_get_root_as_json_null(self):
        for accept in (None, "*/*", "application/json",
                       "application/json, text/html;q=0.5",
                       "text/html;q=0, */*"):
            headers = {"Accept": [accept]} if accept else {}
            response, body = yield self.get("/", headers)
            self.assertEqual(response.code, 200, accept)
            self.assertEqual(json.loads(body), None)

    def test_wants_html(self):
        self.assertTrue(web.wants_html(BROWSER_ACCEPT))
        self.assertTrue(web.wants_html("text/html"))
        self.assertFalse(web.wants_html(None))
        self.assertFalse(web.wants_html("*/*"))
        self.assertFalse(web.wants_html("text/*"))
        self.assertFalse(web.wants_html("application/json,text/html"))
        self.assertFalse(web.wants_html("text/html;q=0.5,application/json"))

    def test_the_console_is_package_data(self):
        with open(os.path.join(os.path.dirname(web.WEB_DIR), "..", "..",
                               "setup.py")) as f:
            self.assertIn('"ganeti.rapi": ["web/*", "web/*/*", "web/*/*/*"]',
                          f.read())


class PublicFilesWithRequiredAuthTests(WebFileTests):
    """With --require-authentication the files stay public (data calls
    need a user as ever)."""

    require_auth = True

    def test_check_head_lets_files_through(self):
        for path in (b"/ui/", b"/ui/app.js", b"/ui"):
            self.assertIsNone(self.rapi.check_head(b"GET", path, Headers()))
        self.assertIsNone(self.rapi.check_head(
            b"GET", b"/", Headers({b"accept": [BROWSER_ACCEPT.encode()]})))
        self.assertEqual(self.rapi.check_head(
            b"GET", b"/", Headers()).code, 401)
        self.assertEqual(self.rapi.check_head(
            b"GET", b"/2/info", Headers()).code, 401)
        self.assertIsNone(self.rapi.check_head(
            b"POST", b"/2/sessions", Headers()))

    @defer.inlineCallbacks
    def test_clients_get_root_as_json_null(self):
        response, _ = yield self.get("/")
        self.assertEqual(response.code, 401)


class SessionTestCase(RapiTestCase):

    def setUp(self):
        RapiTestCase.setUp(self)
        self.rapi.sessions = sessions.SessionStore(
            self.clock, idle_timeout=100, max_age=1000)

    @defer.inlineCallbacks
    def login(self, username="writer", password="secret", code=200):
        got, value = yield self.request(
            "POST", "/2/sessions", {"username": username,
                                    "password": password})
        self.assertEqual(got, code, value)
        return value

    def write_users(self, text):
        with open(self.users_path, "w") as f:
            f.write(text)
        # the users file is re-read when its stamp changes
        st = os.stat(self.users_path)
        os.utime(self.users_path, ns=(st.st_atime_ns,
                                      st.st_mtime_ns + 10 ** 9))


class SessionTests(SessionTestCase):

    @defer.inlineCallbacks
    def test_login_answers_token_user_rights(self):
        value = yield self.login("both", "bothpw")
        self.assertEqual(value["user"], "both")
        self.assertEqual(value["rights"], ["read", "write"])
        self.assertEqual(value["expires"], self.clock.seconds() + 1000)
        self.assertEqual(value["idle_timeout"], 100)
        self.assertGreaterEqual(len(value["token"]), 40)
        self.assertIsNone(self.last_headers.getRawHeaders("set-cookie"))

    @defer.inlineCallbacks
    def test_wrong_password_401_without_basic_challenge(self):
        for user, password in (("writer", "nope"), ("ghost", "x")):
            value = yield self.login(user, password, code=401)
            self.assertEqual(value["message"], "Wrong user name or password")
            self.assertIsNone(
                self.last_headers.getRawHeaders("www-authenticate"))

    @defer.inlineCallbacks
    def test_bad_bodies_name_the_field(self):
        for body, field in (({"password": "x"}, "username"),
                            ({"username": "", "password": "x"}, "username"),
                            ({"username": "writer", "password": 1},
                             "password"),
                            ({"username": "a", "password": "b", "x": 1},
                             "x")):
            value = yield self.error(400, "POST", "/2/sessions", body,
                                     auth=None)
            self.assertIn(field, value["message"])

    @defer.inlineCallbacks
    def test_failed_logins_are_limited_per_address(self):
        for _ in range(sessions.LOGIN_FAILURE_BURST):
            yield self.login(password="wrong", code=401)
        # now even the right password waits
        value = yield self.login(code=429)
        self.assertIn("Too many failed logins", value["message"])
        retry = int(self.last_headers.getRawHeaders("retry-after")[0])
        self.assertGreaterEqual(retry, 1)
        self.clock.advance(retry)
        yield self.login()

    @defer.inlineCallbacks
    def test_bearer_reads_and_writes_as_the_user(self):
        writer = (yield self.login())["token"]
        reader = (yield self.login("reader", "readpw"))["token"]
        yield self.ok("GET", "/2/info", auth=bearer(reader))
        yield self.error(403, "PUT", "/2/tags?tag=a", auth=bearer(reader))
        job = yield self.ok("PUT", "/2/tags?tag=a", auth=bearer(writer))
        self.assertIsInstance(job, int)
        self.assertEqual(len(self.handler.submitted), 1)

    @defer.inlineCallbacks
    def test_unknown_token_401_with_bearer_challenge(self):
        value = yield self.error(401, "GET", "/2/info",
                                 auth=bearer("forged"))
        self.assertIn("log in again", value["explain"])
        self.assertEqual(self.last_headers.getRawHeaders("www-authenticate"),
                         ['Bearer realm="Ganeti Remote API"'])
        self.assertIsNotNone(self.rapi.check_head(
            b"GET", b"/2/info",
            Headers({b"authorization": [b"Bearer forged"]})))

    @defer.inlineCallbacks
    def test_check_head_accepts_a_session(self):
        token = (yield self.login())["token"]
        head = Headers({b"authorization": [bearer(token).encode()]})
        self.assertIsNone(self.rapi.check_head(b"PUT", b"/2/tags?tag=a",
                                               head))

    @defer.inlineCallbacks
    def test_rights_follow_the_users_file(self):
        token = (yield self.login())["token"]
        self.write_users(USERS.replace("writer secret write",
                                       "writer secret read"))
        yield self.error(403, "PUT", "/2/tags?tag=a", auth=bearer(token))
        yield self.ok("GET", "/2/info", auth=bearer(token))

    @defer.inlineCallbacks
    def test_removed_user_loses_the_session(self):
        token = (yield self.login())["token"]
        self.write_users(USERS.replace("writer secret write", ""))
        yield self.error(401, "GET", "/2/info", auth=bearer(token))
        self.assertEqual(len(self.rapi.sessions), 0)

    @defer.inlineCallbacks
    def test_changed_password_ends_the_session(self):
        token = (yield self.login())["token"]
        self.write_users(USERS.replace("writer secret write",
                                       "writer other write"))
        yield self.error(401, "GET", "/2/info", auth=bearer(token))
        # even with the old entry back: the session is gone
        self.write_users(USERS)
        yield self.error(401, "GET", "/2/info", auth=bearer(token))

    @defer.inlineCallbacks
    def test_idle_timeout(self):
        token = (yield self.login())["token"]
        for _ in range(3):
            self.clock.advance(99)
            yield self.ok("GET", "/2/info", auth=bearer(token))
        self.clock.advance(100)
        yield self.error(401, "GET", "/2/info", auth=bearer(token))

    @defer.inlineCallbacks
    def test_max_age_ends_a_busy_session(self):
        token = (yield self.login())["token"]
        for _ in range(10):
            self.clock.advance(99)
            yield self.ok("GET", "/2/info", auth=bearer(token))
        self.clock.advance(10)
        yield self.error(401, "GET", "/2/info", auth=bearer(token))

    @defer.inlineCallbacks
    def test_expired_sessions_are_pruned(self):
        yield self.login()
        yield self.login("reader", "readpw")
        self.assertEqual(len(self.rapi.sessions), 2)
        self.clock.advance(100)
        # a new login prunes the old ones
        yield self.login()
        self.assertEqual(len(self.rapi.sessions), 1)

    @defer.inlineCallbacks
    def test_logout(self):
        token = (yield self.login())["token"]
        other = (yield self.login())["token"]
        yield self.ok("DELETE", "/2/sessions", auth=bearer(token))
        yield self.error(401, "GET", "/2/info", auth=bearer(token))
        yield self.error(401, "DELETE", "/2/sessions", auth=bearer(token))
        yield self.ok("GET", "/2/info", auth=bearer(other))
        value = yield self.error(400, "DELETE", "/2/sessions", auth=WRITER)
        self.assertIn("Bearer", value["message"])

    @defer.inlineCallbacks
    def test_get_tells_the_rights_now(self):
        token = (yield self.login())["token"]
        value = yield self.ok("GET", "/2/sessions", auth=bearer(token))
        self.assertEqual(value, {"user": "writer", "rights": ["write"],
                                 "expires": self.clock.seconds() + 1000,
                                 "idle_timeout": 100})
        self.write_users(USERS.replace("writer secret write",
                                       "writer secret read"))
        value = yield self.ok("GET", "/2/sessions", auth=bearer(token))
        self.assertEqual(value["rights"], ["read"])
        value = yield self.error(400, "GET", "/2/sessions", auth=WRITER)
        self.assertIn("Bearer", value["message"])
        yield self.error(401, "GET", "/2/sessions", auth=bearer("forged"))

    def test_session_answers_are_never_shared(self):
        from ganeti.rapi import resources
        res = [r for r in resources.RESOURCES if r.path == "/2/sessions"][0]
        self.assertFalse(res.methods["GET"].shared)

    @defer.inlineCallbacks
    def test_basic_credentials_still_work(self):
        yield self.ok("PUT", "/2/tags?tag=a", auth=WRITER)
        yield self.error(401, "GET", "/2/info", auth="Basic eDp5")
        self.assertEqual(self.last_headers.getRawHeaders("www-authenticate"),
                         ['Basic realm="Ganeti Remote API"'])

    def test_not_a_feature(self):
        from ganeti.rapi import resources
        self.assertFalse([f for f in resources.FEATURES if "session" in f])


class RequiredAuthSessionTests(SessionTestCase):

    require_auth = True

    @defer.inlineCallbacks
    def test_login_needs_no_credentials(self):
        token = (yield self.login("reader", "readpw"))["token"]
        yield self.ok("GET", "/2/info", auth=bearer(token))
        yield self.error(401, "GET", "/2/info", auth=None)


class SessionEventsTests(SseTestCase):

    @defer.inlineCallbacks
    def test_events_with_a_session(self):
        self.rapi.sessions = sessions.SessionStore(self.clock)
        code, value = yield self.request(
            "POST", "/2/sessions", {"username": "reader",
                                    "password": "readpw"})
        self.assertEqual(code, 200)
        response, chunks = yield self.open(auth=bearer(value["token"]))
        self.assertEqual(response.code, 200)
        response, _ = yield self.open(auth=bearer("forged"))
        self.assertEqual(response.code, 401)


class SessionStoreTests(unittest.TestCase):

    def setUp(self):
        from ganeti.rapi import auth
        self.clock = Clock()
        self.store = sessions.SessionStore(self.clock, idle_timeout=10,
                                           max_age=100, max_sessions=3)
        self.user = auth.User("u", "pw", ["read"])

        class Users(object):
            def get(inner, name):
                return self.user if name == "u" else None
        self.users = Users()

    def test_bounded(self):
        tokens = [self.store.create(self.user).token for _ in range(5)]
        self.assertEqual(len(self.store), 3)
        self.assertIsNone(self.store.user(tokens[0], self.users))
        self.assertEqual(self.store.user(tokens[-1], self.users), self.user)

    def test_prune(self):
        self.store.create(self.user)
        self.clock.advance(5)
        kept = self.store.create(self.user)
        self.clock.advance(6)
        self.assertEqual(self.store.prune(), 1)
        self.assertEqual(self.store.user(kept.token, self.users), self.user)

    def test_bad_settings(self):
        self.assertRaises(ValueError, sessions.SessionStore, self.clock,
                          idle_timeout=0)

    def test_parse_bearer(self):
        self.assertEqual(sessions.parse_bearer("Bearer abc"), "abc")
        self.assertEqual(sessions.parse_bearer(b"bearer  abc "), "abc")
        self.assertIsNone(sessions.parse_bearer("Basic abc"))
        self.assertIsNone(sessions.parse_bearer(None))
        self.assertIsNone(sessions.parse_bearer("Bearer"))


class ServerOptionsTests(unittest.TestCase):

    def test_session_options(self):
        from twisted.python import usage
        from ganeti.server import rapi as server_rapi
        opts = server_rapi.Options()
        opts.parseOptions(["--no-ssl", "--session-idle-timeout", "60",
                           "--session-max-age", "3600"])
        self.assertEqual(opts["session-idle-timeout"], 60.0)
        self.assertEqual(opts["session-max-age"], 3600.0)
        self.assertRaises(usage.UsageError, server_rapi.Options()
                          .parseOptions, ["--no-ssl",
                                          "--session-max-age", "0"])

