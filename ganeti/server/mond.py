"""The ganeti-mond twistd service: ``twistd -n ganeti-mond [options]``.

The monitoring daemon of every node: runs the data collectors the
cluster's ``data_collectors`` setting makes active (asked of the master
candidates' confd, see :mod:`ganeti.mond.daemon`) and serves their
reports over plain HTTP on ``--bind``:``--port`` (default 1815), as
Ganeti's ``ganeti-mond`` does (see docs/mond.rst).  Nothing listens or
runs at import time.
"""

from twisted.application import service, strports
from twisted.python import usage
from twisted.web import server as web_server

from ganeti import constants
from ganeti import hypervisor
from ganeti import pathutils
from ganeti.backend import process
from ganeti.confd import keys
from ganeti.confd import wire
from ganeti.server.options import check_listen, service_port


def default_port():
    return service_port("ganeti-mond", "tcp", constants.DEFAULT_MOND_PORT)


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = ("The monitoring daemon: runs this node's data collectors"
                " (including the signed self-diagnosis) and serves their"
                " reports over HTTP.")
    optParameters = [
        ["root", None, "/", "Root directory: files are under"
         " ROOT/var/lib/ganeti (virtual cluster mode)."],
        ["bind", "b", "0.0.0.0", "Address to listen on; also how this node"
         " is found in ssconf's node_primary_ips (the instance status"
         " collectors need its name)."],
        ["port", "p", None, "TCP port [default: the ganeti-mond/tcp"
         " service, else %d]." % constants.DEFAULT_MOND_PORT, int],
        ["hmac-key-file", None, None, "The cluster HMAC key, which signs"
         " the self-diagnosis [default: ROOT/var/lib/ganeti/hmac.key]."],
        ["confd-port", None, wire.DEFAULT_PORT, "Port of the master"
         " candidates' confd.", int],
        ["refresh", None, float(constants.MOND_CONFIG_REFRESH), "Seconds"
         " between questions for the collectors' settings.", float],
        ["diagnose-timeout", None, float(constants.DIAGNOSE_TIMEOUT),
         "Seconds the self-diagnose command may run before it is killed.",
         float],
        ["dbus-address", None, "system", "The bus the built-in diagnosis"
         " reads: 'system' or a D-Bus address."],
    ]

    def postOptions(self):
        check_listen(self, default_port)
        for name in ("refresh", "diagnose-timeout"):
            if self[name] <= 0:
                raise usage.UsageError("--%s must be positive" % name)
        paths = pathutils.Paths(self["root"])
        key_file = self["hmac-key-file"] or paths.hmac_key_file
        try:
            self["hmac-key"] = wire.read_hmac_key(key_file)
        except OSError as err:
            raise usage.UsageError("cannot read the cluster HMAC key %s (it"
                                   " signs the self-diagnosis): %s"
                                   % (key_file, err.strerror))
        self["hmac-key-file"] = key_file


class _DaemonService(service.Service):
    name = "data-collectors"

    def __init__(self, daemon, settings):
        self.daemon = daemon
        self.settings = settings

    def startService(self):
        service.Service.startService(self)
        self.daemon.start()

    def stopService(self):
        service.Service.stopService(self)
        self.daemon.stop()
        return self.settings.close()


def make_collectors(reactor, options, paths, settings):
    from ganeti.mond import (cpuload, diagnose, diskstats, drbd, inststatus,
                             lv)
    runner = process.CommandRunner(reactor)
    collectors = [
        cpuload.CpuLoadCollector(reactor),
        diskstats.DiskstatsCollector(),
        lv.LvCollector(runner),
        drbd.DrbdCollector(runner),
        diagnose.DiagnoseCollector(
            reactor, reactor, settings.keys,
            paths.diagnose_commands_dir,
            timeout=options["diagnose-timeout"],
            bus_address=options["dbus-address"]),
    ]
    for name in hypervisor.hypervisor_names():
        collectors.append(inststatus.InstStatusCollector(
            name, hypervisor.get_hypervisor(name, paths.root, reactor),
            settings))
    return collectors


def makeService(options, reactor=None):
    if reactor is None:
        from twisted.internet import reactor
    from ganeti.mond import daemon as mdaemon
    from ganeti.mond import web
    paths = pathutils.Paths(options["root"])
    # the key files are followed: a key renewal needs no restart
    hmac_keys = keys.HmacKeys(options["hmac-key-file"], reactor)
    settings = mdaemon.ConfdSettings(reactor, hmac_keys, paths,
                                     options["bind"],
                                     port=options["confd-port"])
    daemon = mdaemon.MonitoringDaemon(
        reactor, make_collectors(reactor, options, paths, settings),
        settings, refresh=options["refresh"])
    top = service.MultiService()
    _DaemonService(daemon, settings).setServiceParent(top)
    from ganeti.mond import metrics as mmetrics
    site = web_server.Site(web.MondApp(
        daemon, mmetrics.MondMetrics(daemon, process.CommandRunner(reactor))
    ).resource())
    site.noisy = False
    strports.service("tcp:%d:interface=%s" % (options["port"],
                                              options["bind"]),
                     site).setServiceParent(top)
    return top
