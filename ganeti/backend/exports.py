"""Instance exports on a node: the export directory and transfer files.

An export of instance ``NAME`` is the directory
``<root>/var/lib/ganeti/export/NAME/`` holding ``config.ini``
(:mod:`ganeti.exportinfo`) and one dump file per disk.  While an export is
written, its files are in a hidden directory beside it, renamed into place
at the end (an older export of the same name is replaced only then), so a
failed export leaves nothing half-written where exports are listed.

Disk data moves between nodes as *transfer files*: a hidden file per
transfer under ``export/.transfer/``, named by a random id, written or read
in chunks through the master (over the node daemons' mutual-TLS channel).
The export script's output becomes a transfer file on the source node,
which is copied to a transfer file on the target node and then moved into
the export; an import copies a dump into a transfer file on the new
primary node, where the import script reads it.

Everything here is file work: the node daemon runs it in its thread pool.
"""

import gzip
import os
import re
import shutil
import uuid

from ganeti import errors
from ganeti import exportinfo
from ganeti.backend import files
from ganeti.utils import io

__all__ = ["export_dir", "transfer_path", "new_transfer_id", "list_exports",
           "read_info", "finalize", "remove", "compress", "decompress",
           "clean_transfers",
           "read_chunk", "write_chunk", "truncate", "remove_transfer",
           "dump_path"]

TRANSFER_DIR = ".transfer"
_TRANSFER_RE = re.compile(r"^[0-9a-f]{8,64}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_COPY_BUFFER = 1024 * 1024
#: seconds after which an untouched transfer file is left over from an
#: export or import that ended without removing it
STALE_TRANSFER_AGE = 2 * 24 * 3600


def export_dir(paths):
    return os.path.join(paths.data_dir, "export")


def check_name(name, field="name"):
    """An export's (instance's) name: a plain directory name."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise errors.ParameterError(
            field, "%s: %r is not a valid export name (an instance name:"
            " letters, digits, '._-')" % (field, name))
    return name


def new_transfer_id():
    return uuid.uuid4().hex


def transfer_path(paths, transfer_id, field="transfer_id"):
    if not isinstance(transfer_id, str) or \
            not _TRANSFER_RE.match(transfer_id):
        raise errors.ParameterError(
            field, "%s: %r is not a transfer id (hexadecimal)"
            % (field, transfer_id))
    return os.path.join(export_dir(paths), TRANSFER_DIR, transfer_id)


def ensure_transfer_dir(paths):
    os.makedirs(os.path.join(export_dir(paths), TRANSFER_DIR), mode=0o700,
                exist_ok=True)


def export_path(paths, path, field="path"):
    """The directory of an export given by name or by absolute path; it
    must be inside this node's export directory."""
    base = os.path.realpath(export_dir(paths))
    if isinstance(path, str) and path and "/" not in path:
        check_name(path, field)
        return os.path.join(base, path)
    if not isinstance(path, str) or not os.path.isabs(path):
        raise errors.ParameterError(
            field, "%s: %r is neither an export name nor an absolute path"
            % (field, path))
    root = paths.root.rstrip("/")
    if root and not path.startswith(root + "/"):
        # a standard path (/var/lib/ganeti/export/NAME), as an admin of a
        # virtual cluster's node gives it: inside this node's root
        path = os.path.join(root, path.lstrip("/"))
    real = os.path.realpath(path)
    if os.path.dirname(real) != base or \
            os.path.basename(real).startswith("."):
        raise errors.ParameterError(
            field, "%s: %s is not an export of this node (exports are in"
            " %s)" % (field, path, base))
    return real


def dump_path(paths, path, dump, field="dump"):
    directory = export_path(paths, path)
    if not isinstance(dump, str) or "/" in dump or dump.startswith(".") \
            or not dump:
        raise errors.ParameterError(field, "%s: %r is not a dump file name"
                                    % (field, dump))
    return os.path.join(directory, dump)


def list_exports(paths):
    """The names of the exports on this node, sorted."""
    base = export_dir(paths)
    if not os.path.isdir(base):
        return []
    return sorted(n for n in os.listdir(base)
                  if not n.startswith(".") and
                  os.path.isdir(os.path.join(base, n)))


def read_info(paths, path):
    """The text of an export's config.ini (checked to be one)."""
    directory = export_path(paths, path)
    name = os.path.join(directory, exportinfo.CONFIG_FILE)
    try:
        with open(name, "r", encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise errors.ExportError(
            "there is no export %s on this node (%s not found)"
            % (path, name))
    except (OSError, UnicodeDecodeError) as err:
        raise errors.ExportError("cannot read %s: %s" % (name, err))
    try:
        exportinfo.parse(text)
    except errors.OpPrereqError as err:
        raise errors.ExportError("%s: %s" % (name, err.args[0]))
    return text


def finalize(paths, name, config_text, dumps):
    """Make export ``name`` from transfer files: ``dumps`` maps each dump
    file name to its transfer id.  The new export replaces an older one of
    the same name only once it is complete."""
    check_name(name)
    base = export_dir(paths)
    moves = []
    for dump, transfer_id in sorted(dumps.items()):
        if not isinstance(dump, str) or "/" in dump or dump.startswith(".") \
                or dump == exportinfo.CONFIG_FILE:
            raise errors.ParameterError("dumps", "dumps: %r is not a dump"
                                        " file name" % (dump,))
        src = transfer_path(paths, transfer_id, "dumps")
        if not os.path.isfile(src):
            raise errors.ParameterError(
                "dumps", "dumps: transfer %s (for %s) does not exist"
                % (transfer_id, dump))
        moves.append((src, dump))
    exportinfo.parse(config_text)
    os.makedirs(base, mode=0o750, exist_ok=True)
    tmp = os.path.join(base, ".%s.new-%s" % (name, uuid.uuid4().hex[:8]))
    os.mkdir(tmp, 0o750)
    final = os.path.join(base, name)
    old = None
    try:
        for src, dump in moves:
            os.rename(src, os.path.join(tmp, dump))
        io.atomic_write(os.path.join(tmp, exportinfo.CONFIG_FILE),
                        config_text.encode("utf-8"))
        if os.path.lexists(final):
            old = os.path.join(base, ".%s.old-%s"
                               % (name, uuid.uuid4().hex[:8]))
            os.rename(final, old)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not os.path.lexists(final):
            os.rename(old, final)     # the older export stays
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return final


def remove(paths, name):
    """Remove export ``name``; False if there was none."""
    check_name(name)
    target = os.path.join(export_dir(paths), name)
    if not os.path.lexists(target):
        return False
    shutil.rmtree(target)
    return True


def remove_transfer(paths, transfer_id):
    path = transfer_path(paths, transfer_id)
    for name in (path, path + ".raw"):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass
    return True


def clean_transfers(paths, now, max_age=STALE_TRANSFER_AGE):
    """Remove transfer files not written to for ``max_age`` seconds (left
    by an export or import whose master went away); their names."""
    directory = os.path.join(export_dir(paths), TRANSFER_DIR)
    removed = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return removed
    for name in sorted(names):
        path = os.path.join(directory, name)
        try:
            if now - os.stat(path).st_mtime > max_age:
                os.unlink(path)
                removed.append(name)
        except FileNotFoundError:
            pass
    return removed


def compress(path, compression):
    """Compress a finished transfer file in place (``gzip``); its size."""
    if compression == "gzip":
        tmp = path + ".gz-tmp"
        with open(path, "rb") as src, gzip.open(tmp, "wb", 6) as dst:
            shutil.copyfileobj(src, dst, _COPY_BUFFER)
        os.rename(tmp, path)
    return os.path.getsize(path)


def decompress(path, compression):
    """The path of the raw data of a transfer file (decompressed beside
    it if it is compressed)."""
    if compression != "gzip":
        return path
    raw = path + ".raw"
    try:
        with gzip.open(path, "rb") as src, open(raw, "wb") as dst:
            shutil.copyfileobj(src, dst, _COPY_BUFFER)
    except (OSError, EOFError) as err:
        raise errors.ExportError("the dump is not valid gzip data: %s"
                                 % err)
    return raw


def read_chunk(path, offset, length):
    """``{"size", "data", "length"}`` as ``blockdev_read_chunk`` answers:
    data null for a chunk of zeros, ``""`` past the end."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if offset >= size:
            return {"size": size, "data": ""}
        f.seek(offset)
        data = f.read(length)
    if not data.strip(b"\0"):
        return {"size": size, "data": None, "length": len(data)}
    return {"size": size, "data": files.b64encode(data),
            "length": len(data)}


def write_chunk(path, offset, data, length):
    """Write base64 ``data`` at ``offset`` of a transfer file (made if
    new); null data: ``length`` zeros, left as a hole."""
    data = files.b64decode(data) if data else None
    mode = "r+b" if os.path.exists(path) else "w+b"
    with open(path, mode) as f:
        if data is None:
            return
        f.seek(offset)
        f.write(data)


def truncate(path, size):
    """The transfer file is complete: exactly ``size`` bytes."""
    mode = "r+b" if os.path.exists(path) else "w+b"
    with open(path, mode) as f:
        f.truncate(size)
