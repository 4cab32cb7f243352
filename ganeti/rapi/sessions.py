"""Login sessions of the web console (``POST /2/sessions``).

A browser cannot send Basic credentials with every request without either
the browser's own password popup or keeping the password in the page, and
its ``EventSource`` sends no ``Authorization`` header at all.  So the
console logs in once with a user and password of the users file and
carries a random token afterwards (``Authorization: Bearer <token>``).

A session only names its user: the rights are those the users file gives
the user *now* (re-read on every request), and the session ends at once
when the user is removed from the file or their password entry changes.
A session also ends after :attr:`SessionStore.idle_timeout` seconds
without a request and :attr:`SessionStore.max_age` seconds after the
login, whatever happens.  Sessions are kept in memory only: restarting
the RAPI daemon (or a master failover) logs everyone out.

No cookies are set, so no other site can make a browser send a request
with a session (no cross-site request forgery).

Failed logins are counted per client address (a token bucket of
:mod:`ganeti.rapi.ratelimit`): beyond :data:`LOGIN_FAILURE_BURST`
failures, one more is allowed every ``1 / LOGIN_FAILURE_RATE`` seconds,
and a login in between is refused (429) without its password being
checked.
"""

import collections
import hashlib
import secrets

import attr
from twisted.logger import Logger

from ganeti.rapi import auth
from ganeti.rapi import ratelimit

log = Logger()

#: seconds without a request before a session ends
DEFAULT_IDLE_TIMEOUT = 30 * 60.0
#: seconds after the login before a session ends
DEFAULT_MAX_AGE = 12 * 3600.0
#: sessions kept at most (the least recently used go first beyond)
MAX_SESSIONS = 10000
#: failed logins from one address: at once, then per second
LOGIN_FAILURE_BURST = 5
LOGIN_FAILURE_RATE = 0.2


def _entry_digest(user):
    # what the session remembers of the password entry: a changed entry
    # (a new password) ends the session; the entry itself is not kept
    return hashlib.sha256(user.password.encode("utf-8")).hexdigest()


@attr.s
class Session(object):
    token = attr.ib(repr=False)
    user = attr.ib()
    entry = attr.ib(repr=False)
    created = attr.ib()
    last_used = attr.ib()


class SessionStore(object):
    """The sessions of one RAPI daemon, timed by ``clock``."""

    def __init__(self, clock, idle_timeout=DEFAULT_IDLE_TIMEOUT,
                 max_age=DEFAULT_MAX_AGE, max_sessions=MAX_SESSIONS,
                 failure_rate=LOGIN_FAILURE_RATE,
                 failure_burst=LOGIN_FAILURE_BURST):
        if idle_timeout <= 0 or max_age <= 0:
            raise ValueError("idle timeout and maximum age must be"
                             " positive, got %r and %r"
                             % (idle_timeout, max_age))
        self.clock = clock
        self.idle_timeout = float(idle_timeout)
        self.max_age = float(max_age)
        self.max_sessions = max_sessions
        self.failures = ratelimit.TokenBuckets(clock, failure_rate,
                                               failure_burst)
        self._sessions = collections.OrderedDict()

    def __len__(self):
        return len(self._sessions)

    # --- logging in -----------------------------------------------------

    def login_wait(self, address):
        """Seconds ``address`` must wait before its next login attempt
        (0: it may try now)."""
        return self.failures.wait(address)

    def failed(self, address, username):
        """Count a failed login from ``address``."""
        self.failures.take(address)
        log.warn("RAPI: failed login as {user!r} from {address}",
                 user=username, address=address)

    def create(self, user):
        """A new session of ``user`` (a :class:`ganeti.rapi.auth.User`
        whose password was just checked)."""
        self.prune()
        now = self.clock.seconds()
        token = secrets.token_urlsafe(32)
        self._sessions[token] = Session(token, user.name, _entry_digest(user),
                                        now, now)
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        log.info("RAPI: user {user} logged in", user=user.name)
        return self._sessions[token]

    def expires(self, session):
        """When ``session`` ends at the latest (seconds of the clock)."""
        return session.created + self.max_age

    # --- using a session ------------------------------------------------

    def user(self, token, users):
        """The users file's User (``users``: a
        :class:`ganeti.rapi.auth.UsersFile`) of the session ``token``, or
        None when there is no such session (any more).  Counts as a use.
        """
        session = self._sessions.get(token)
        if session is None:
            return None
        now = self.clock.seconds()
        if self._expired(session, now):
            self._end(session, "expired")
            return None
        user = users.get(session.user)
        if user is None or _entry_digest(user) != session.entry:
            self._end(session, "ended: the users file changed")
            return None
        session.last_used = now
        self._sessions.move_to_end(token)
        return user

    def get(self, token):
        """The :class:`Session` of ``token`` (None: no such session); no
        use, no checks (:meth:`user` does those)."""
        return self._sessions.get(token)

    def logout(self, token):
        """End the session ``token``; whether there was one."""
        session = self._sessions.get(token)
        if session is None:
            return False
        self._end(session, "logged out")
        return True

    def prune(self):
        """Forget every expired session; how many."""
        now = self.clock.seconds()
        old = [s for s in self._sessions.values() if self._expired(s, now)]
        for session in old:
            self._end(session, "expired")
        return len(old)

    def _expired(self, session, now):
        return (now - session.last_used >= self.idle_timeout or
                now - session.created >= self.max_age)

    def _end(self, session, why):
        self._sessions.pop(session.token, None)
        log.info("RAPI: session of {user} {why}", user=session.user, why=why)


def parse_bearer(header):
    """The token of an ``Authorization: Bearer <token>`` header, or None
    when it is of another scheme."""
    return auth.credentials(header, "bearer")
