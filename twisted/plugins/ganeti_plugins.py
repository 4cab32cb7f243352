"""twistd plugins of this project: one IServiceMaker per daemon.

Kept tiny on purpose: twistd imports this file just to list plugins, so each
daemon's module is imported only when that daemon is actually run.  To add a
daemon, add one ``_ServiceMaker`` line below.
"""

import importlib

from twisted.application.service import IServiceMaker
from twisted.plugin import IPlugin
from zope.interface import implementer


@implementer(IPlugin, IServiceMaker)
class _ServiceMaker(object):
    """Lazily delegates to ``module.Options`` and ``module.makeService``."""

    def __init__(self, tapname, module, description):
        self.tapname = tapname
        self.module = module
        self.description = description

    @property
    def options(self):
        return importlib.import_module(self.module).Options

    def makeService(self, options):
        return importlib.import_module(self.module).makeService(options)


ganeti_confd = _ServiceMaker(
    "ganeti-confd", "ganeti.server.confd",
    "Ganeti configuration daemon (read-only config answers over UDP 1814)")

ganeti_noded = _ServiceMaker(
    "ganeti-noded", "ganeti.server.noded",
    "Ganeti node daemon (node-local work over mutual-TLS HTTPS on TCP 1811)")

ganeti_masterd = _ServiceMaker(
    "ganeti-masterd", "ganeti.server.masterd",
    "Ganeti master daemon (config, job queue, locks; luxi on the master"
    " socket)")

ganeti_rapi = _ServiceMaker(
    "ganeti-rapi", "ganeti.server.rapi",
    "Ganeti remote API daemon (RAPI v2 over HTTPS on TCP 5080)")
