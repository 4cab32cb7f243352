"""RAPI users and HTTP Basic authentication.

The users file (``<data_dir>/rapi/users``, Ganeti's format) has one user a
line: ``name password [options]``, where options is a comma-separated list
such as ``read,write``.  Empty lines, ``#`` comments and lines with fewer
than two fields are ignored.  A password is either plain text (not starting
with ``{``), ``{cleartext}text``, or ``{HA1}md5hex`` where the digest is
``md5("name:Ganeti Remote API:password")``; the scheme is case-insensitive.

:class:`UsersFile` reloads the file when it changes (checked by ``stat`` on
each lookup, so an edit counts from the next request on; a missing or
unreadable file means no users).
"""

import base64
import binascii
import hashlib
import hmac
import os

import attr
from twisted.logger import Logger

REALM = "Ganeti Remote API"

ACCESS_READ = "read"
ACCESS_WRITE = "write"

log = Logger()


@attr.s(frozen=True)
class User(object):
    name = attr.ib()
    password = attr.ib(repr=False)
    options = attr.ib(converter=frozenset)


def parse_users(text):
    """``{name: User}`` from the users file's text (later lines win)."""
    users = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) < 2:
            continue
        options = []
        if len(parts) > 2:
            options = [o.strip().lower() for o in parts[2].split(",")
                       if o.strip()]
        users[parts[0]] = User(parts[0], parts[1], options)
    return users


def ha1(username, password, realm=REALM):
    """The ``{HA1}`` digest of a password."""
    text = "%s:%s:%s" % (username, realm, password)
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def check_password(user, password, realm=REALM):
    """True if ``password`` is ``user``'s password (compared in constant
    time)."""
    stored = user.password
    scheme = None
    if stored.startswith("{"):
        end = stored.find("}")
        if end < 0:
            log.warn("RAPI user {user}: password starts with '{{' but has no"
                     " scheme; never matches", user=user.name)
            return False
        scheme = stored[1:end].lower()
        stored = stored[end + 1:]
    if scheme in (None, "cleartext"):
        expected, given = stored, password
    elif scheme == "ha1":
        expected = stored.lower()
        given = ha1(user.name, password, realm)
    else:
        log.warn("RAPI user {user}: unknown password scheme {scheme!r};"
                 " never matches", user=user.name, scheme=scheme)
        return False
    return hmac.compare_digest(expected.encode("utf-8"),
                               given.encode("utf-8"))


def credentials(header, scheme):
    """What follows the scheme in an ``Authorization`` header value of
    ``scheme`` (lower case: ``basic``, ``bearer``), or None when the
    header is missing or of another scheme."""
    if header is None:
        return None
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    parts = header.strip().split(None, 1)
    if len(parts) != 2 or parts[0].lower() != scheme:
        return None
    return parts[1].strip()


def parse_basic(header):
    """``(user, password)`` of an ``Authorization: Basic ...`` header, or
    None when the header is of another scheme or malformed."""
    encoded = credentials(header, "basic")
    if encoded is None:
        return None
    try:
        decoded = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None
    text = decoded.decode("utf-8", "replace")
    if ":" not in text:
        return None
    user, password = text.split(":", 1)
    return (user, password)


class UsersFile(object):
    """The users file, re-read whenever it changed on disk."""

    def __init__(self, path):
        self.path = path
        self._stamp = None
        self._users = {}

    def _current_stamp(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def users(self):
        """``{name: User}`` as the file says now."""
        stamp = self._current_stamp()
        if stamp != self._stamp:
            self._stamp = stamp
            self._users = self._load()
        return self._users

    def _load(self):
        if self._stamp is None:
            log.info("no RAPI users file at {path}; only anonymous access",
                     path=self.path)
            return {}
        try:
            with open(self.path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError as err:
            log.error("cannot read the RAPI users file {path}: {err}",
                      path=self.path, err=err)
            return {}
        users = parse_users(text)
        log.info("RAPI users file {path} loaded: {count} user(s)",
                 path=self.path, count=len(users))
        return users

    def get(self, name):
        return self.users().get(name)

    def authenticate(self, header):
        """The User an Authorization header proves, None if it proves
        nothing (unknown user, wrong password, not Basic)."""
        creds = parse_basic(header)
        if creds is None:
            return None
        user = self.get(creds[0])
        if user is None or not check_password(user, creds[1]):
            return None
        return user
