"""Files the master distributes to nodes: an allow-list, and ssconf.

The master names a file by its standard path (``/var/lib/ganeti/config.data``)
and the node writes it under its own root.  Only the files in
:data:`ALLOWED_UPLOADS` (and ``ssconf_*``) can be written this way: even an
authenticated master must not be able to replace arbitrary files (binaries,
the node's own certificate) through this call.  Writes are atomic.
"""

import base64
import binascii
import grp
import os
import pwd
import re
import zlib

from ganeti import errors
from ganeti.utils import io

__all__ = ["ALLOWED_UPLOADS", "upload_file", "check_upload",
           "write_ssconf_files",
           "decode_data", "SSCONF_MODE", "SSCONF_MAX_SIZE", "b64decode",
           "b64encode"]

#: Standard paths (as on a node installed at /) the master may upload.
ALLOWED_UPLOADS = frozenset([
    "/var/lib/ganeti/config.data",
    "/var/lib/ganeti/hmac.key",
    "/var/lib/ganeti/cluster-domain-secret",
    "/var/lib/ganeti/known_hosts",
    "/var/lib/ganeti/rapi.pem",
    "/var/lib/ganeti/rapi/users",
    "/var/lib/ganeti/spice.pem",
    "/var/lib/ganeti/spice-ca.pem",
    "/etc/ganeti/vnc-cluster-password",
])
_SSCONF_RE = re.compile(r"^/var/lib/ganeti/ssconf_([a-z][a-z0-9_-]*)$")
_SSCONF_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]*$")
#: ssconf files are world-readable (Ganeti's SS_FILE_PERMS).
SSCONF_MODE = 0o444
#: Ganeti's limit on one ssconf value.
SSCONF_MAX_SIZE = 128 * 1024

ENCODING_NONE = "none"
ENCODING_BASE64 = "base64"
ENCODING_ZLIB_BASE64 = "zlib+base64"


#: base64 longer than this is converted in slices: binascii holds the
#: interpreter (the GIL) for a whole call, so even in a worker thread
#: converting megabytes at once would hold up the reactor thread.
SLICE = 1024 * 1024       # a multiple of 4
_B64_INNER = re.compile(rb"[A-Za-z0-9+/]*")
_B64_LAST = re.compile(rb"[A-Za-z0-9+/]*={0,2}")


def b64decode(text):
    """``base64.b64decode(text, validate=True)``, in slices: other threads
    run in between."""
    if len(text) <= SLICE:
        return base64.b64decode(text, validate=True)
    parts = []
    for start in range(0, len(text), SLICE):
        part = text[start:start + SLICE]
        if isinstance(part, str):
            part = part.encode("ascii")
        check = _B64_LAST if start + SLICE >= len(text) else _B64_INNER
        if not check.fullmatch(part):
            raise binascii.Error("Non-base64 digit found")
        parts.append(binascii.a2b_base64(part))
    return b"".join(parts)


def b64encode(data):
    """``base64.b64encode(data).decode("ascii")``, in slices."""
    step = SLICE // 4 * 3
    return "".join(binascii.b2a_base64(data[start:start + step],
                                       newline=False).decode("ascii")
                   for start in range(0, len(data), step))


def decode_data(data, field="data"):
    """File data from the wire: text, or ``[encoding, text]`` with encoding
    "none", "base64" or "zlib+base64" (binary files, big files)."""
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (list, tuple)) and len(data) == 2 and \
            isinstance(data[1], str):
        encoding, text = data
        try:
            if encoding == ENCODING_NONE:
                return text.encode("utf-8")
            if encoding == ENCODING_BASE64:
                return b64decode(text)
            if encoding == ENCODING_ZLIB_BASE64:
                return zlib.decompress(b64decode(text))
        except (binascii.Error, zlib.error, ValueError) as err:
            raise errors.ParameterError(
                field, "%s: cannot decode %s data: %s" % (field, encoding, err))
        raise errors.ParameterError(
            field, "%s: unknown encoding %r (known: none, base64, zlib+base64)"
            % (field, encoding))
    raise errors.ParameterError(
        field, "%s must be a string or [encoding, string], not %s"
        % (field, type(data).__name__))


def _target(root, path):
    if not isinstance(path, str) or not path.startswith("/") or \
            os.path.normpath(path) != path:
        raise errors.ParameterError(
            "path", "path must be an absolute, normalised file path, not %r"
            % (path,))
    if path not in ALLOWED_UPLOADS and not _SSCONF_RE.match(path):
        raise errors.ParameterError(
            "path", "path %s is not a file the master may upload (allowed:"
            " %s, /var/lib/ganeti/ssconf_*)" % (path,
                                                ", ".join(sorted(
                                                    ALLOWED_UPLOADS))))
    return os.path.join(root, path.lstrip("/"))


def _id(field, value, lookup):
    if value is None or (isinstance(value, int) and not isinstance(value, bool)
                         and value >= 0):
        return value
    if isinstance(value, str):
        try:
            return lookup(value)
        except KeyError:
            raise errors.ParameterError(field, "%s: no such %s %r"
                                        % (field, field, value))
    raise errors.ParameterError(field, "%s must be a name or a number, not %r"
                                % (field, value))


def _time(field, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise errors.ParameterError(field, "%s must be a timestamp, not %r"
                                    % (field, value))
    return float(value)


def _check_mode(mode):
    if isinstance(mode, bool) or not isinstance(mode, int) or \
            not 0 <= mode <= 0o7777:
        raise errors.ParameterError("mode", "mode must be a permission number"
                                    " (0 to 0o7777), not %r" % (mode,))


def check_upload(path, mode=0o600, atime=None, mtime=None):
    """The checks of :func:`upload_file` that need no file system (a
    caller can refuse a bad call before any file work)."""
    _target("/", path)
    _check_mode(mode)
    _time("atime", atime)
    _time("mtime", mtime)


def upload_file(root, path, data, mode=0o600, uid=None, gid=None,
                atime=None, mtime=None):
    """Write an allow-listed file under ``root``; returns where it went."""
    target = _target(root, path)
    content = decode_data(data)
    _check_mode(mode)
    uid = _id("uid", uid, lambda n: pwd.getpwnam(n).pw_uid)
    gid = _id("gid", gid, lambda n: grp.getgrnam(n).gr_gid)
    atime, mtime = _time("atime", atime), _time("mtime", mtime)
    os.makedirs(os.path.dirname(target), mode=0o750, exist_ok=True)
    io.atomic_write(target, content, mode=mode)
    if uid is not None or gid is not None:
        os.chown(target, -1 if uid is None else uid, -1 if gid is None else gid)
    if atime is not None or mtime is not None:
        st = os.stat(target)
        os.utime(target, (st.st_atime if atime is None else atime,
                          st.st_mtime if mtime is None else mtime))
    return target


def _unchanged(path, data, mode):
    """Whether ``path`` already holds ``data`` with ``mode``."""
    try:
        if os.stat(path).st_mode & 0o7777 != mode:
            return False
        with open(path, "rb") as f:
            return f.read(len(data) + 1) == data
    except OSError:
        return False


def write_ssconf_files(paths, values):
    """Write ``ssconf_<key>`` for each key of ``values`` (str or list of
    lines); all are checked before any is written.  Files that already
    hold their value are left alone (a change of the configuration
    touches few of them), the others are written together, atomically,
    with one sync of the directory."""
    if not isinstance(values, dict):
        raise errors.ParameterError("values", "values must be a dict of"
                                    " ssconf key -> value")
    prepared = []
    for key in sorted(values):
        value = values[key]
        field = "values.%s" % key
        if not isinstance(key, str) or not _SSCONF_KEY_RE.match(key):
            raise errors.ParameterError(
                "values", "%r is not a valid ssconf key" % (key,))
        if isinstance(value, (list, tuple)):
            if not all(isinstance(v, str) for v in value):
                raise errors.ParameterError(field, "%s: list items must be"
                                            " strings" % field)
            value = "\n".join(value)
        elif not isinstance(value, str):
            raise errors.ParameterError(field, "%s must be a string or a list"
                                        " of strings, not %s"
                                        % (field, type(value).__name__))
        if value and not value.endswith("\n"):
            value += "\n"
        data = value.encode("utf-8")
        if len(data) > SSCONF_MAX_SIZE:
            raise errors.ParameterError(
                field, "%s is %d bytes, more than the %d allowed"
                % (field, len(data), SSCONF_MAX_SIZE))
        prepared.append((paths.ssconf_file(key), data))
    os.makedirs(paths.data_dir, mode=0o750, exist_ok=True)
    changed = {target: data for target, data in prepared
               if not _unchanged(target, data, SSCONF_MODE)}
    if changed:
        io.atomic_write_many(changed, mode=SSCONF_MODE)
    return [t for t, _ in prepared]


def read_ssconf_value(paths, key, default=None):
    """One ssconf value without its trailing newline, or ``default``."""
    try:
        with open(paths.ssconf_file(key)) as f:
            return f.read().rstrip("\n")
    except OSError:
        return default
