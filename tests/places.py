"""Where tests put things: short temporary directories, random loopback
addresses, and snapshots of directories (to show nothing was written)."""

import os
import random
import re
import shutil
import socket
import tempfile

__all__ = ["free_port", "random_ips", "short_tmpdir", "snapshot"]


def random_ips(count=1):
    """``count`` consecutive random loopback addresses."""
    a, b = random.randint(1, 254), random.randint(0, 255)
    first = random.randint(1, 250 - count)
    return ["127.%d.%d.%d" % (a, b, first + i) for i in range(count)]


def free_port(address):
    """A TCP port nobody listens on at ``address`` (just now)."""
    s = socket.socket()
    s.bind((address, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def short_tmpdir(test, prefix):
    """A new directory right below /tmp (short: UNIX socket paths are
    limited to 108 bytes), removed when ``test`` ends."""
    base = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    test.addCleanup(shutil.rmtree, base, True)
    return base


#: atomic_write's temporary files: ".<name>.<8 random characters>"
_TEMP_FILE = re.compile(r"^\..+\.[a-z0-9_]{8}$")


def snapshot(directory):
    """``{relative path: (bytes, mtime_ns)}`` of the files below
    ``directory``, to show that something wrote nothing there (sockets and
    the like by their mtime only)."""
    files = {}
    for base, _, names in os.walk(directory):
        for name in names:
            if _TEMP_FILE.match(name):
                continue    # a write in progress (see ganeti.utils.io)
            path = os.path.join(base, name)
            content = None
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    content = f.read()
            files[os.path.relpath(path, directory)] = (
                content, os.lstat(path).st_mtime_ns)
    return files
