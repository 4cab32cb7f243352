"""twistd plugins of this project: one ServiceMaker per daemon.

Kept tiny on purpose: twistd imports this file just to list plugins, and
ServiceMaker imports a daemon's module only when that daemon is run.
"""

from twisted.application.service import ServiceMaker

ganeti_confd = ServiceMaker(
    "ganeti-confd", "ganeti.server.confd",
    "Ganeti configuration daemon (read-only config answers over UDP 1814)",
    "ganeti-confd")

ganeti_noded = ServiceMaker(
    "ganeti-noded", "ganeti.server.noded",
    "Ganeti node daemon (node-local work over mutual-TLS HTTPS on TCP 1811)",
    "ganeti-noded")

ganeti_masterd = ServiceMaker(
    "ganeti-masterd", "ganeti.server.masterd",
    "Ganeti master daemon (config, job queue, locks; luxi on the master"
    " socket)", "ganeti-masterd")

ganeti_rapi = ServiceMaker(
    "ganeti-rapi", "ganeti.server.rapi",
    "Ganeti remote API daemon (RAPI v2 over HTTPS on TCP 5080)",
    "ganeti-rapi")

ganeti_watcher = ServiceMaker(
    "ganeti-watcher", "ganeti.watcher.service",
    "Ganeti watcher (restarts crashed instances, records user shutdowns,"
    " cleans up kept domains; --once for a timer)", "ganeti-watcher")

ganeti_maintd = ServiceMaker(
    "ganeti-maintd", "ganeti.server.maintd",
    "Ganeti maintenance daemon (master only: acts on the nodes'"
    " self-diagnosis in rounds of jobs; status over HTTP on TCP 1816)",
    "ganeti-maintd")

ganeti_mond = ServiceMaker(
    "ganeti-mond", "ganeti.server.mond",
    "Ganeti monitoring daemon (data collectors and the signed"
    " self-diagnosis over HTTP on TCP 1815)", "ganeti-mond")
