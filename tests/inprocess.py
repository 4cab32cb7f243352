"""A real master daemon in the test's process, on the trial reactor: the
whole service tree (queue lock, writer thread, config, job queue, luxi
socket) over a fresh one-node configuration, with a luxi client."""

import shutil
import tempfile

from twisted.internet import defer, reactor

from ganeti import luxi
from ganeti import pathutils
from ganeti.server import masterd

from tests.test_config import make_store

__all__ = ["start_master"]


@defer.inlineCallbacks
def start_master(testcase, prefix, prepare=None):
    """``(master service, luxi client)``; both stopped when the test ends.

    The root is right below /tmp (``prefix``: a short name, since a UNIX
    socket path has at most 107 bytes).  ``prepare(store)``, if given,
    fills the configuration (nodes, instances) before the master loads it.
    """
    root = tempfile.mkdtemp(prefix=prefix)
    testcase.addCleanup(shutil.rmtree, root, True)
    paths = pathutils.Paths(root)
    paths.ensure_dirs()
    store = make_store(testcase, path=paths.config_file)
    if prepare is not None:
        prepare(store)
    options = masterd.Options()
    # no node checks: its nodes are fakes, replaced after the start
    options.parseOptions(["--root", root, "--node-check-interval", "0"])
    master = masterd.makeService(options, reactor=reactor)
    yield master.startService()
    testcase.addCleanup(master.stopService)
    client = luxi.LuxiClient(reactor, paths.master_socket)
    testcase.addCleanup(client.close)
    return master, client
