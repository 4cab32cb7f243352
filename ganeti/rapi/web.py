"""The web console's files, served by the RAPI daemon under ``/ui/``.

The files (:data:`WEB_DIR`, plain HTML, JavaScript modules and CSS; no
build step, nothing fetched from elsewhere) are public: they hold no
secrets, and every call they make to the API needs the usual rights
(docs/web.rst).  Only paths of plain names (no ``..``, no hidden files)
of files with a known type under the directory are served, so no path
can lead out of it.

Every file goes out with headers that keep the page to itself: a
``Content-Security-Policy`` allowing only this origin's scripts, styles
and connections (no inline script), no framing, no content type
sniffing, no referrer.
"""

import os
import re

from ganeti.rapi import baserlib

#: where the console's files are
WEB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web")
#: where they are served
UI_PATH = "/ui/"

#: file name extension -> content type
TYPES = {
    ".html": b"text/html; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".mjs": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".svg": b"image/svg+xml",
    ".png": b"image/png",
    ".ico": b"image/x-icon",
    ".json": b"application/json",
    ".txt": b"text/plain; charset=utf-8",
}

CSP = (b"default-src 'self'; script-src 'self'; style-src 'self';"
       b" img-src 'self' data:; connect-src 'self'; object-src 'none';"
       b" base-uri 'none'; form-action 'self'; frame-ancestors 'none'")

#: headers of every console file
HEADERS = {
    b"content-security-policy": CSP,
    b"x-frame-options": b"DENY",
    b"x-content-type-options": b"nosniff",
    b"referrer-policy": b"no-referrer",
    # a new version of the console is used from the next load on
    b"cache-control": b"no-cache",
}

_NAME = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")


#: directory levels below the console's directory at most
MAX_DEPTH = 4


def file_path(web_dir, name):
    """The path of the console file ``name`` (as in the URL after /ui/,
    e.g. ``app.js`` or ``vendor/xterm/xterm.mjs``), or None when there is
    no such file to serve: every segment a plain name (no ``..``, not
    hidden), a type of :data:`TYPES`, a file under ``web_dir``."""
    parts = name.split("/")
    if len(parts) > MAX_DEPTH + 1:
        return None
    for part in parts:
        if not _NAME.match(part) or ".." in part:
            return None
    if os.path.splitext(name)[1].lower() not in TYPES:
        return None
    path = os.path.join(web_dir, *parts)
    # no symbolic link leads out either
    root = os.path.realpath(web_dir)
    if not os.path.realpath(path).startswith(root + os.sep):
        return None
    if not os.path.isfile(path):
        return None
    return path


def serve(request, web_dir, name):
    """The body of the console file ``name`` with its headers; None (and
    nothing set) when there is no such file."""
    path = file_path(web_dir, name)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    request.setResponseCode(200)
    request.setHeader(b"content-type",
                      TYPES[os.path.splitext(name)[1].lower()])
    _common(request, len(data))
    return data


def redirect(request, location):
    """A 302 to ``location`` (a path of this server)."""
    data = baserlib.render_json(None)
    request.setResponseCode(302)
    request.setHeader(b"location", location.encode("ascii"))
    request.setHeader(b"content-type", baserlib.JSON_TYPE.encode("ascii"))
    _common(request, len(data))
    return data


def _common(request, length):
    for name, value in HEADERS.items():
        request.setHeader(name, value)
    request.setHeader(b"server", baserlib.SERVER.encode("utf-8"))
    request.setHeader(b"content-length", b"%d" % length)
    request.setHeader(b"connection", b"close")
    channel = getattr(request, "channel", None)
    if channel is not None and hasattr(channel, "persistent"):
        channel.persistent = False


def _quality(accept, wanted):
    """The q value ``accept`` gives the media type ``wanted``
    (``type/subtype``): the most specific range matching it; None when
    it is not named explicitly (only through wildcards), and ``(q,
    explicit)`` otherwise."""
    best = None
    kind = wanted.split("/")[0]
    for part in accept.split(","):
        fields = [f.strip() for f in part.split(";")]
        media = fields[0].lower()
        if not media:
            continue
        q = 1.0
        for param in fields[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if media == wanted:
            rank = 2
        elif media == kind + "/*":
            rank = 1
        elif media == "*/*":
            rank = 0
        else:
            continue
        if best is None or rank > best[0]:
            best = (rank, q)
    return best


def wants_html(accept):
    """Whether an ``Accept`` header prefers HTML (a browser) to JSON:
    ``text/html`` is named in it and ranks above ``application/json``.
    No header, ``*/*`` alone or JSON first: not HTML."""
    if not accept:
        return False
    html = _quality(accept, "text/html")
    if html is None or html[0] != 2 or html[1] <= 0:
        return False
    json_ = _quality(accept, "application/json")
    return json_ is None or html[1] > json_[1]
