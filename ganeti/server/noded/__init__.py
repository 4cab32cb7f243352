"""The node daemon, ``ganeti-noded``: HTTPS with mutual TLS on port 1811.

Run with ``twist ganeti-noded --root DIR --bind ADDR`` (or twistd).  A call
is ``POST /<procedure>`` (PUT, as Ganeti's own clients send, works too) with
a JSON body holding the argument list, or an object of named arguments.
The reply is JSON ``[true, result]`` on success, ``[false, message]``
otherwise, with HTTP status 200 (success), 400 (bad arguments: the message
names the argument), 404 (unknown procedure), 413 (body too big) or 500 (the
operation failed).  Nothing a caller sends can stop the daemon: every error
is logged and answered.

Only peers presenting the cluster certificate (``<data_dir>/server.pem``)
get past the TLS handshake; see :mod:`ganeti.crypto`.

At start the daemon locks its memory (``mlockall``), so that it keeps
answering -- for example a powercycle request -- on a node whose disks are
failing.  For the same reason the procedures' file work runs in a bounded
thread pool (:mod:`ganeti.server.noded.blocking`, ``--blocking-threads``),
not on the reactor; docs/noded.rst lists what runs where.
"""

import ctypes
import ctypes.util
import os

from twisted.application import internet, service
from twisted.internet import defer, endpoints
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.logger import Logger, globalLogPublisher
from twisted.python import usage

from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import hypervisor as hv
from ganeti import pathutils
from ganeti import storage
from ganeti.backend import console as backend_console
from ganeti.backend import instances as instance_backend
from ganeti.backend import os_api
from ganeti.backend import process
from ganeti.backend import restricted
from ganeti.server import fallbacklog
from ganeti.server.noded.blocking import (BlockingPool, DEFAULT_THREADS,
                                          MAX_THREADS)
from ganeti.server.noded.bootstrap import Membership
from ganeti.server.noded import daemons
from ganeti.server.noded import merge
from ganeti.server.noded import powercycle
from ganeti.server.noded.commands import make_command_sets
from ganeti.server.noded.http import make_site
from ganeti.server.noded.node import node_file_storage_dirs
from ganeti.server.noded.procedures import NodeProcedures
from ganeti.server.noded.renewal import ClusterTLS
from ganeti.server.options import check_listen, service_port

__all__ = ["Options", "makeService", "NodedService", "make_procedures",
           "mlock_all"]

log = Logger()

SERVICE_NAME = "ganeti-noded"
# From <sys/mman.h> on Linux.
MCL_CURRENT = 1
MCL_FUTURE = 2
MCL_ONFAULT = 4


def default_port():
    """The ``ganeti-noded/tcp`` service port if the system has one."""
    return service_port(SERVICE_NAME, "tcp", constants.DEFAULT_NODED_PORT)


def mlock_all():
    """Lock the daemon's memory, present and future; False (and a warning)
    if that is not possible here."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                           use_errno=True)
        mlockall = libc.mlockall
    except (OSError, AttributeError) as err:
        log.warn("Cannot lock memory: libc's mlockall is unavailable ({err});"
                 " continuing unlocked", err=err)
        return False
    # What is mapped now is read in and locked; what is mapped later is
    # locked as it is touched (MCL_ONFAULT): populated at once, the stack
    # of every thread (8 MiB each; the blocking pool has several) would be.
    # Kernels before 4.4 lack MCL_ONFAULT: then everything at once.
    if mlockall(MCL_CURRENT) != 0 or \
            mlockall(MCL_FUTURE | MCL_ONFAULT) != 0 and \
            mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
        err = ctypes.get_errno()
        log.warn("Cannot lock memory: mlockall failed: {err}; continuing"
                 " unlocked (the daemon may be swapped out)",
                 err=errno_text(err))
        return False
    log.info("Memory locked (mlockall)")
    return True


def errno_text(err):
    return "%s (errno %d)" % (os.strerror(err), err)


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = ("The node daemon: does the node-local work (hypervisor,"
                " storage, OS installs, files) the master asks for over"
                " mutually authenticated HTTPS.")
    optFlags = [
        ["no-mlock", None, "Do not lock the daemon's memory (mlockall)."],
        ["no-restricted-commands", None, "Refuse restricted and repair"
         " commands (gnt-node restricted-command, repair-command) even when"
         " their directories hold programs."],
        ["bootstrap", None, "Run even without the cluster certificate: serve"
         " a one-time certificate (fingerprint in the log) until the master"
         " joins this node (gnt-node add --join-fingerprint)."],
    ]
    optParameters = [
        ["log-file", None, None, "Also log to this file, falling back to"
         " the console when it cannot be written (a failing system disk)."],
        ["console", None, fallbacklog.DEFAULT_CONSOLE, "Where log messages"
         " go when the log file cannot be written."],
        ["root", None, "/", "Root directory: files are under"
         " ROOT/var/lib/ganeti (virtual cluster mode)."],
        ["bind", "b", "0.0.0.0", "Address to listen on."],
        ["port", "p", None, "TCP port [default: the ganeti-noded/tcp"
         " service, else %d]." % constants.DEFAULT_NODED_PORT, int],
        ["cert-file", None, None, "The cluster certificate (key and"
         " certificate) [default: ROOT/var/lib/ganeti/server.pem]."],
        ["os-create-timeout", None, 24 * 3600.0, "Seconds an OS create"
         " script may run.", float],
        ["restricted-command-timeout", None, restricted.DEFAULT_TIMEOUT,
         "Seconds a restricted or repair command may run.", float],
        ["blocking-threads", None, DEFAULT_THREADS, "Threads doing the file"
         " work of procedures (so that a slow disk stalls only the calls"
         " that need it); 0 does it on the reactor, for comparisons only"
         " (at most %d)." % MAX_THREADS, int],
        ["daemons", None, "none", "Start and stop this node's other daemons"
         " by its role (mond everywhere, confd on master candidates,"
         " masterd, rapi and maintd on the master): 'process' as child"
         " processes, 'systemd' through their units, 'none' not at all."],
        ["daemon-check-interval", None, 10.0, "With --daemons: seconds"
         " between checks that the role's daemons run.", float],
        ["console-sessions", None, backend_console.DEFAULT_MAX_SESSIONS,
         "Serial console sessions (the browser console) open at once at"
         " most.", int],
        ["console-idle-timeout", None, backend_console.DEFAULT_IDLE_TIMEOUT,
         "Seconds without a read or write before a console session is"
         " closed.", float],
        ["console-buffer", None, backend_console.DEFAULT_BUFFER_SIZE,
         "Bytes of console output kept per session (older output is"
         " dropped).", int],
        ["master-fingerprint", None, None, "With --bootstrap: accept a join"
         " only from a master presenting the cluster certificate with this"
         " SHA-256 fingerprint (on the master: openssl x509 -noout"
         " -fingerprint -sha256 -in /var/lib/ganeti/server.pem)."],
    ]

    def __init__(self):
        usage.Options.__init__(self)
        self["os-search-path"] = []
        self["extstorage-search-path"] = []
        self["file-storage-dir"] = []
        self["extra-file-dir"] = []
        self["daemon-args"] = []

    def opt_daemon_args(self, value):
        """With --daemons process: extra arguments of one daemon, as
        DAEMON=ARGUMENTS (repeatable; e.g. 'ganeti-maintd=--interval 5').
        ganeti-watcher runs as a daemon only when given arguments."""
        self["daemon-args"].append(value)

    def opt_extra_file_dir(self, directory):
        """Also accept admin-listed extra files (gnt-cluster redist-conf)
        below this standard directory (repeatable; default /etc/ganeti and
        /etc/xen)."""
        self["extra-file-dir"].append(directory)

    def opt_os_search_path(self, directory):
        """Also look for OS definitions in this directory (repeatable; after
        ROOT/srv/ganeti/os and Ganeti's other standard directories)."""
        self["os-search-path"].append(directory)

    def opt_extstorage_search_path(self, directory):
        """Also look for ExtStorage providers in this directory (repeatable;
        after ROOT/srv/ganeti/extstorage)."""
        self["extstorage-search-path"].append(directory)

    def opt_file_storage_dir(self, directory):
        """Also allow file disks in this directory (repeatable)."""
        self["file-storage-dir"].append(directory)

    def postOptions(self):
        check_listen(self, default_port)
        if self["os-create-timeout"] <= 0:
            raise usage.UsageError("--os-create-timeout must be positive")
        if self["restricted-command-timeout"] <= 0:
            raise usage.UsageError("--restricted-command-timeout must be"
                                   " positive")
        if not 0 <= self["blocking-threads"] <= MAX_THREADS:
            raise usage.UsageError("--blocking-threads must be from 0 to %d,"
                                   " not %d" % (MAX_THREADS,
                                                self["blocking-threads"]))
        if self["daemons"] not in ("none", "process", "systemd"):
            raise usage.UsageError("--daemons: %r is not one of none,"
                                   " process, systemd" % self["daemons"])
        for name in ("console-sessions", "console-idle-timeout",
                     "console-buffer"):
            if self[name] <= 0:
                raise usage.UsageError("--%s must be positive, not %s"
                                       % (name, self[name]))
        if self["daemon-check-interval"] <= 0:
            raise usage.UsageError("--daemon-check-interval must be"
                                   " positive")
        try:
            self["daemon-args"] = daemons.parse_daemon_args(
                self["daemon-args"])
        except ValueError as err:
            raise usage.UsageError("--daemon-args: %s" % err)
        paths = pathutils.Paths(self["root"])
        cert_file = self["cert-file"] or crypto.server_pem_path(paths)
        if self["master-fingerprint"] is not None:
            try:
                self["master-fingerprint"] = crypto.parse_fingerprint(
                    self["master-fingerprint"])
            except errors.ParameterError as err:
                raise usage.UsageError("--master-fingerprint: %s"
                                       % err.args[-1])
        for directory in self["extra-file-dir"]:
            if not directory.startswith("/"):
                raise usage.UsageError("--extra-file-dir: %r is not an"
                                       " absolute path" % directory)
        self["cert-file"] = cert_file
        try:
            # with what a certificate renewal under way left beside it
            self["credentials"] = crypto.load_node_credentials(cert_file)
            self["certificate"] = self["credentials"].cert
        except errors.X509CertError as err:
            if self["bootstrap"] and not os.path.exists(cert_file):
                self["certificate"] = None  # not a member yet
                self["credentials"] = None
            else:
                raise usage.UsageError("ganeti-noded cannot start: %s" % err)


# ---------------------------------------------------------------------------
# Assembly

def make_procedures(reactor, root="/", os_search_path=(),
                    file_storage_dirs=(), get_hypervisor=hv.get_hypervisor,
                    os_create_timeout=24 * 3600.0, device_mapper=None, *,
                    run_blocking, restricted_commands=True,
                    restricted_command_timeout=restricted.DEFAULT_TIMEOUT):
    """The node's :class:`NodeProcedures` (no network involved).

    ``run_blocking(f, *args)`` -> Deferred runs the file work: the daemon's
    :meth:`BlockingPool.run`, or ``procedure.INLINE`` where no daemon runs.
    """
    paths = pathutils.Paths(root)
    storage_ctx = storage.StorageContext(
        runner=process.CommandRunner(reactor),
        file_storage_dirs=node_file_storage_dirs(
            paths, list(file_storage_dirs)),
        device_mapper=device_mapper, run_blocking=run_blocking)
    search_path = os_api.default_search_path(paths.root) + list(os_search_path)
    os_backend = os_api.OsBackend(reactor, search_path, storage_ctx,
                                  paths.log_dir,
                                  create_timeout=os_create_timeout,
                                  run_blocking=run_blocking)
    inst = instance_backend.InstanceBackend(reactor, paths.root, storage_ctx,
                                            get_hypervisor=get_hypervisor)
    procs = NodeProcedures(reactor, paths, storage_ctx, inst, os_backend,
                           run_blocking=run_blocking)
    procs.command_sets = make_command_sets(
        reactor, paths, run_blocking, enabled=restricted_commands,
        timeout=restricted_command_timeout)
    return procs


class NodedService(service.MultiService):

    def __init__(self, procedures, bind, port, mlock=True, log_file=None,
                 console=fallbacklog.DEFAULT_CONSOLE):
        service.MultiService.__init__(self)
        self.procedures = procedures
        self.bind = bind
        self.port = port
        self.mlock = mlock
        self.log_observer = None
        if log_file:
            self.log_observer = fallbacklog.ConsoleFallbackObserver(
                log_file, console)

    def startService(self):
        if self.log_observer is not None:
            globalLogPublisher.addObserver(self.log_observer)
        if self.mlock:
            mlock_all()
        log.info("ganeti-noded starting: HTTPS {bind}:{port}, root {root},"
                 " {count} procedures ({blocking} declared blocking)",
                 bind=self.bind, port=self.port,
                 root=self.procedures.paths.root,
                 count=len(self.procedures.names()),
                 blocking=len(self.procedures.blocking_names()))
        service.MultiService.startService(self)

    def stopService(self):
        d = defer.maybeDeferred(service.MultiService.stopService, self)
        d.addBoth(self._close_consoles)
        d.addBoth(lambda r: self.procedures.instances.close())
        d.addBoth(self._stop_logging)
        return d

    def _close_consoles(self, result):
        consoles = getattr(self.procedures, "_consoles", None)
        if consoles is not None:
            consoles.close_all()
        return result

    def _stop_logging(self, result):
        if self.log_observer is not None:
            globalLogPublisher.removeObserver(self.log_observer)
            self.log_observer.close()
        return result


def makeService(options, reactor=None):
    if reactor is None:
        from twisted.internet import reactor
    pool = BlockingPool(reactor, options["blocking-threads"])
    procedures = make_procedures(
        reactor, options["root"], os_search_path=options["os-search-path"],
        file_storage_dirs=options["file-storage-dir"],
        os_create_timeout=options["os-create-timeout"],
        run_blocking=pool.run,
        restricted_commands=not options["no-restricted-commands"],
        restricted_command_timeout=options["restricted-command-timeout"])
    procedures.extstorage_dirs = tuple(options["extstorage-search-path"])
    procedures.console_settings = {
        "max_sessions": options["console-sessions"],
        "idle_timeout": options["console-idle-timeout"],
        "buffer_size": options["console-buffer"]}
    if options["extra-file-dir"]:
        procedures.extra_file_dirs = (tuple(procedures.extra_file_dirs)
                                      + tuple(options["extra-file-dir"]))
    top = NodedService(procedures, options["bind"], options["port"],
                       mlock=not options["no-mlock"],
                       log_file=options["log-file"],
                       console=options["console"])
    # first child: started before the port opens, stopped (its threads
    # joined) after it closed
    pool.setServiceParent(top)
    endpoint = endpoints.TCP4ServerEndpoint(
        reactor, options["port"], interface=options["bind"])
    if options["bootstrap"]:
        membership = Membership(procedures.paths, procedures,
                                options["certificate"],
                                options["master-fingerprint"],
                                credentials=options["credentials"])
        membership.tls.path = options["cert-file"]
        factory = TLSMemoryBIOFactory(
            membership, False,
            make_site(reactor, procedures, membership.procedures_for))
    else:
        # a node that leaves the cluster stops its daemon (as Ganeti's)
        procedures.on_leave = reactor.stop
        # the TLS context is chosen per connection: a certificate renewal
        # changes what is presented and trusted (docs/crypto.rst)
        tls = ClusterTLS(options["cert-file"], options["credentials"])
        procedures.cluster_tls = tls
        factory = TLSMemoryBIOFactory(tls, False,
                                      make_site(reactor, procedures))
    # the cluster merger switches a node to another certificate this way
    procedures.restart_in_place = lambda: merge.reexec_daemon(reactor,
                                                              procedures)
    procedures.powercycle = powercycle.make_powercycle(reactor, procedures)
    if options["daemons"] != "none":
        if options["daemons"] == "systemd":
            launcher = daemons.SystemdLauncher(reactor)
        else:
            launcher = daemons.ProcessLauncher(procedures.paths, pool.run)
        supervisor = daemons.DaemonSupervisor(
            reactor, procedures.paths, options["bind"], launcher, pool.run,
            extra_args=options["daemon-args"],
            interval=options["daemon-check-interval"])
        procedures.supervisor = supervisor
        procedures.on_ssconf_written = supervisor.ssconf_changed
        supervisor.setServiceParent(top)
    https = internet.StreamServerEndpointService(endpoint, factory)
    # As strports.service: a port that cannot be bound stops the daemon
    # instead of being only logged.
    https._raiseSynchronously = True
    https.setName("https")
    https.setServiceParent(top)
    return top
