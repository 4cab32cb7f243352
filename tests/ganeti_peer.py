"""Run code of the real Ganeti 3.0 (Debian's package) as a test peer.

Ganeti's Python library needs Debian's own python3 (it imports simplejson,
OpenSSL and pycurl) and PYTHONPATH pointing at its installation.  Tests that
use it skip with the reason when it is not installed.
"""

import os
import subprocess

from twisted.internet import utils
from twisted.trial import unittest

GANETI_PYTHON = "/usr/bin/python3"
GANETI_LIB = "/usr/share/ganeti/3.0"


def unavailable_reason():
    """None if the real Ganeti can be used, else why not."""
    if not os.path.exists(GANETI_PYTHON):
        return "%s is missing (Debian's python3 runs Ganeti)" % GANETI_PYTHON
    if not os.path.isdir(os.path.join(GANETI_LIB, "ganeti")):
        return ("Ganeti 3.0 is not installed (apt-get install ganeti-3.0);"
                " %s is missing" % GANETI_LIB)
    return None


def skip_unless_available():
    """Skip the test (SkipTest with the reason) if the real Ganeti cannot
    be used."""
    reason = unavailable_reason()
    if reason:
        raise unittest.SkipTest(reason)


def run_python(script, args=(), env=None):
    """Run ``script`` (source text) under Ganeti's Python.

    Returns a Deferred firing (stdout, stderr, exit code) as text.
    """
    full_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": GANETI_LIB,
                "LANG": "C.UTF-8"}
    full_env.update(env or {})
    d = utils.getProcessOutputAndValue(
        GANETI_PYTHON, ["-c", script] + list(args), env=full_env)
    return d.addCallback(lambda r: (r[0].decode("utf-8", "replace"),
                                    r[1].decode("utf-8", "replace"), r[2]))


def run_tool(tool, args, root, hostname, timeout=120, env=None):
    """Run Ganeti's command ``tool`` (gnt-instance, ...) as the node
    ``hostname`` whose files are under ``root``.

    Returns (exit code, output and errors as text).
    """
    full_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": GANETI_LIB,
                "GANETI_ROOTDIR": root, "GANETI_HOSTNAME": hostname,
                "LANG": "C.UTF-8"}
    full_env.update(env or {})
    out = subprocess.run(
        [GANETI_PYTHON, os.path.join(GANETI_LIB, tool)] + list(args),
        env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        timeout=timeout)
    return out.returncode, out.stdout.decode("utf-8", "replace")
