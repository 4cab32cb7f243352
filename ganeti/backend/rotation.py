"""Replacing a secret file in three steps, so that nothing in use breaks.

The cluster certificate (``server.pem``) and the HMAC key (``hmac.key``)
are replaced this way during ``gnt-cluster renew-crypto`` (docs/crypto.rst):

1. **stage**: the new content goes to ``<file>.new``.  Readers trust it
   from now on but keep using the current one.
2. **switch**: the current content is kept as ``<file>.old`` and the staged
   one takes the file's place (a rename: readers see the old or the new
   file, never a mix).  Readers use the new one and still trust the old.
3. **forget**: ``<file>.old`` goes; only the new one is trusted.

Each step is idempotent and names the content it expects by a digest, so a
repeated call, or one arriving after a renewal that was given up, does no
harm.  These functions are file work (run in a node daemon's thread pool);
they do not log.
"""

import hashlib
import os

from ganeti import errors
from ganeti.utils import io

__all__ = ["STAGED", "PREVIOUS", "stage", "switch", "forget", "state",
           "key_digest"]

STAGED = ".new"
PREVIOUS = ".old"


def key_digest(data):
    """How a secret key file's content is named in the calls: the hex
    SHA-256 of its bytes (the key itself never travels twice)."""
    return hashlib.sha256(data).hexdigest()


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def stage(path, data, mode=0o400):
    """Step 1: write ``data`` as ``<path>.new``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o750,
                exist_ok=True)
    io.atomic_write(path + STAGED, data, mode=mode)


def switch(path, digest_of, expected):
    """Step 2: the staged content, whose ``digest_of(content)`` must be
    ``expected``, becomes ``path``; the current content is kept as
    ``<path>.old``.  Returns False if ``path`` already has it (a repeated
    call), True if it switched now."""
    staged = path + STAGED
    data = _read(staged)
    current = _read(path)
    if data is None:
        if current is not None and digest_of(current) == expected:
            return False
        raise errors.ParameterError(
            "digest", "nothing with digest %s is staged for %s (stage it"
            " first)" % (expected, path))
    if digest_of(data) != expected:
        raise errors.ParameterError(
            "digest", "%s holds %s, not the expected %s; stage it again"
            % (staged, digest_of(data), expected))
    directory = os.path.dirname(os.path.abspath(path))
    if current is not None:
        # a hard link keeps the current file as it is, atomically
        link = path + PREVIOUS + ".tmp"
        if os.path.lexists(link):
            os.unlink(link)
        os.link(path, link)
        os.rename(link, path + PREVIOUS)
    os.rename(staged, path)
    io.fsync_dir(directory)
    return True


def forget(path, digest_of, expected):
    """Step 3: ``path`` must hold the content with digest ``expected``;
    whatever else was kept beside it (``.old``, a stray ``.new``) goes.
    Returns the paths removed."""
    current = _read(path)
    if current is None or digest_of(current) != expected:
        raise errors.ParameterError(
            "digest", "%s does not hold %s (%s); refusing to forget the"
            " others" % (path, expected, "missing" if current is None
                         else "it holds %s" % digest_of(current)))
    removed = []
    for suffix in (PREVIOUS, STAGED):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            continue
        removed.append(path + suffix)
    if removed:
        io.fsync_dir(os.path.dirname(os.path.abspath(path)))
    return removed


def state(path, digest_of):
    """``{"current", "staged", "previous"}``: the digest of each file (None
    where there is none; "unreadable: ..." for a broken one)."""
    result = {}
    for name, suffix in (("current", ""), ("staged", STAGED),
                         ("previous", PREVIOUS)):
        data = _read(path + suffix)
        if data is None:
            result[name] = None
            continue
        try:
            result[name] = digest_of(data)
        except errors.GenericError as err:
            result[name] = "unreadable: %s" % err
    return result
