"""ganeti-masterd: the configuration, the job queue and the lock manager.

The master daemon serves luxi on ``<root>/var/run/ganeti/socket/ganeti-query``
(the socket Ganeti's own clients use).  Jobs go into the persistent job queue;
each opcode runs through the opcode processor, which takes locks and calls
the logical units; logical units change config.data through the config store
and do node-local work through node daemons over RPC.

One master daemon per job queue: the queue's lock (``queue/lock``) is taken
before anything else, and a second master exits at once, having changed
nothing, with an error naming the lock file and the holder's pid.  A socket
that cannot be bound stops the daemon likewise (non-zero exit, the error
names the path).
"""

import abc
import atexit
import gc
import os
import socket

from twisted.application.internet import TimerService
from twisted.application import service
from twisted.application.internet import StreamServerEndpointService
from twisted.internet import defer, endpoints, error
from twisted.logger import Logger
from twisted.python import usage
from zope.interface import implementer

from ganeti import cmdlib
from ganeti import config
from ganeti import console_relay
from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import events
from ganeti import jqueue
from ganeti import leases
from ganeti import locking
from ganeti import luxi
from ganeti import mastervote
from ganeti import mcpu
from ganeti import metrics
from ganeti.metrics import master as master_metrics
from ganeti import opcodes
from ganeti import pathutils
from ganeti import query
from ganeti import replication
from ganeti import runstate
from ganeti import rpc
from ganeti import ssconf
from ganeti.cmdlib.cluster import cluster_info
from ganeti.config import changes as config_changes
from ganeti.iallocator import allocators
from ganeti.backend import files as backend_files
from ganeti.jqueue import budget
from ganeti.jqueue.journal import WriterJournal
from ganeti.jqueue.journal_process import JournalProcess
from ganeti.jqueue.replication import QueueReplicator
from ganeti.jqueue.store import FILE_MODE as QUEUE_FILE_MODE, JobStore
from ganeti.query import livecache
from ganeti.query.cache import QueryCache
from ganeti.query.rpclive import RpcLiveData
from ganeti.server.options import parse_duration
from ganeti.utils.writer import OrderedWriter
from ganeti.watcher import nodehealth
from ganeti.watcher import pause as wpause

log = Logger()

#: Finished jobs older than this are archived (Ganeti's watcher archives
#: those older than 6 hours on each of its runs)
DEFAULT_JOB_ARCHIVE_AGE = 6 * 3600
#: Seconds between two archivings (Ganeti's watcher runs every 5 minutes)
DEFAULT_JOB_ARCHIVE_INTERVAL = 300


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = ("The master daemon: owns config.data, the job queue and the"
                " locks, and serves luxi on the master socket.")
    optParameters = [
        ["root", None, "/", "Root directory: files are under"
         " ROOT/var/lib/ganeti (virtual cluster mode)."],
        ["bind", "b", None, "Accepted for symmetry with the other daemons;"
         " the master listens only on its UNIX socket."],
        ["max-running-jobs", None, None, "Override the cluster's"
         " max_running_jobs.", int],
        ["iallocator-timeout", None, allocators.DEFAULT_TIMEOUT,
         "Seconds an external instance allocator may run before it is"
         " killed.", float],
        ["node-check-interval", None, 5.0, "Seconds between checks of"
         " every online node's daemon (0: no checks).", float],
        ["node-check-misses", None, 3, "Checks a node may miss in a row"
         " before it is lost (marked offline and fenced, if it has an"
         " out-of-band program).", int],
        ["query-live-ttl", None, livecache.DEFAULT_TTL, "Seconds queries"
         " reuse live data (instance and node state) asked from the nodes;"
         " 0: every query asks them.", float],
        ["max-query-jobs", None, budget.DEFAULT_MAX_QUERY_JOBS,
         "Unfinished query jobs (jobs of read-only opcodes) at most; more"
         " are refused, jobs that change the cluster never (0: no limit).",
         int],
        ["max-query-jobs-per-client", None,
         budget.DEFAULT_MAX_QUERY_JOBS_PER_CLIENT, "Unfinished query jobs"
         " of one client at most (a RAPI user or address, a local user;"
         " 0: no limit).", int],
        ["job-archive-age", None, str(DEFAULT_JOB_ARCHIVE_AGE), "Finished"
         " jobs older than this are archived by the master's timer"
         " (seconds; s, m, h, d, w suffixes allowed)."],
        ["vote-patience", None, 60.0, "While too few master candidates"
         " answer the start-up vote (the cluster is starting), ask again"
         " for up to this many seconds before exiting.", float],
        ["event-buffer", None, events.DEFAULT_BUFFER_SIZE, "Events the"
         " event stream keeps for clients resuming it (WatchEvents, RAPI"
         " /2/events).", int],
        ["event-queue", None, events.DEFAULT_QUEUE_SIZE, "Events that may"
         " wait for one slow event stream client before it is cut off.",
         int],
        ["job-archive-interval", None, str(DEFAULT_JOB_ARCHIVE_INTERVAL),
         "Seconds between the master's archivings of old finished jobs"
         " (s, m, h suffixes allowed; 0: none, archive with gnt-job"
         " autoarchive or the watcher)."],
    ]
    optFlags = [
        ["no-query-cache", None, "Compute every query from scratch (no"
         " cached values, rows or live data)."],
        ["no-voting", None, "Do not ask the master candidates whether this"
         " node is the master (with --yes-do-it; a two-node cluster whose"
         " other node is down)."],
        ["yes-do-it", None, "Confirm --no-voting."],
    ]

    def __init__(self):
        usage.Options.__init__(self)
        self["iallocator-search-path"] = []

    def opt_iallocator_search_path(self, value):
        """Directories (colon-separated, option repeatable) searched for
        instance allocator scripts before the built-in allocators and
        Ganeti's standard directories."""
        for directory in value.split(":"):
            if directory:
                self["iallocator-search-path"].append(
                    os.path.abspath(directory))

    def postOptions(self):
        if self["query-live-ttl"] < 0:
            raise usage.UsageError("--query-live-ttl: must not be negative,"
                                   " got %s" % self["query-live-ttl"])
        for name in ("max-query-jobs", "max-query-jobs-per-client"):
            if self[name] < 0:
                raise usage.UsageError("--%s: must not be negative (0: no"
                                       " limit), got %d" % (name, self[name]))
        for name in ("job-archive-age", "job-archive-interval"):
            self[name] = parse_duration("--" + name, self[name])
        if self["no-voting"] and not self["yes-do-it"]:
            raise usage.UsageError(
                "--no-voting needs --yes-do-it: without the vote a node"
                " that lost the master role while it was down would run a"
                " second master on a stale configuration")
        for name in ("event-buffer", "event-queue"):
            if self[name] < 1:
                raise usage.UsageError("--%s: must be at least 1, got %d"
                                       % (name, self[name]))
        if self["vote-patience"] < 0:
            raise usage.UsageError("--vote-patience must not be negative")
        paths = pathutils.Paths(self["root"])
        if not os.path.exists(paths.config_file):
            raise usage.UsageError(
                "%s does not exist: this node is not part of a cluster"
                " (run gnt-cluster init first)" % paths.config_file)


@implementer(luxi.ILuxiHandler)
class MasterLuxiHandler(object):
    """What the master answers on its luxi socket."""

    def __init__(self, master):
        self.master = master

    @property
    def queue(self):
        return self.master.queue

    @property
    def cfg(self):
        return self.master.cfg

    # jobs: luxi hands over OpCode objects, the queue keeps them; the
    # client (for the query job budget) is the connection's user, or the
    # one RAPI names (docs/jobs.rst, "Readers and the queue's limit")
    def submit_job(self, ops, caller=None):
        return self.queue.submit_job(ops, client=budget.luxi_client(caller))

    def submit_job_to_drained_queue(self, ops, caller=None):
        return self.queue.submit_to_drained_queue(
            ops, client=budget.luxi_client(caller))

    def submit_many_jobs(self, jobs, caller=None):
        return self.queue.submit_many_jobs(
            jobs, client=budget.luxi_client(caller))

    def submit_job_for(self, client, ops, caller=None):
        return self.queue.submit_job(ops, client=budget.rapi_client(client))

    def wait_for_job_change(self, job_id, fields, prev_job_info,
                            prev_log_serial, timeout):
        return self.queue.wait_for_job_change(job_id, fields, prev_job_info,
                                              prev_log_serial, timeout)

    def query_jobs(self, job_ids, fields):
        return self.queue.query_jobs(job_ids, fields)

    def cancel_job(self, job_id, kill=False):
        return self.queue.cancel_job(job_id, kill)

    def archive_job(self, job_id):
        return self.queue.archive_job(job_id)

    def auto_archive_jobs(self, age, timeout):
        return self.queue.auto_archive_jobs(age, timeout)

    def change_job_priority(self, job_id, priority):
        return self.queue.change_job_priority(job_id, priority)

    def set_drain_flag(self, flag):
        return self.queue.set_drain_flag(flag)

    # queries (answers the query cache keeps go out as kept JSON text)
    def query(self, what, fields, qfilter):
        return self.master.query_context().query_wire(what, fields, qfilter)

    def query_fresh(self, what, fields, qfilter):
        return self.master.query_context().query_wire(what, fields, qfilter,
                                                      fresh=True)

    def query_versioned(self, what, fields, qfilter, version):
        return self.master.query_context().query_versioned(
            what, fields, qfilter, version)

    def query_fields(self, what, fields):
        return self.master.query_context().query_fields(what, fields)

    def _old_style(self, method, names, fields, use_locking):
        # a locking query wants the nodes asked now, not cached data
        return self.master.query_context().old_style_wire(
            query.OLD_STYLE[method], names, fields, fresh=use_locking)

    def query_nodes(self, names, fields, use_locking):
        return self._old_style("QueryNodes", names, fields, use_locking)

    def query_instances(self, names, fields, use_locking):
        return self._old_style("QueryInstances", names, fields, use_locking)

    def query_groups(self, names, fields, use_locking):
        return self._old_style("QueryGroups", names, fields, use_locking)

    def query_networks(self, names, fields, use_locking):
        return self._old_style("QueryNetworks", names, fields, use_locking)

    def query_exports(self, nodes, use_locking):
        """Ganeti's QueryExports: {node name: [export names], or False
        for a node that did not answer (or is offline)}."""
        qfilter = None
        if nodes:
            qfilter = ["|"] + [["=", "node", n] for n in nodes]
        d = self.master.query_context().query(
            "export", ["node", "export"], qfilter, fresh=True)

        def convert(answer):
            # nodes without exports have no rows, yet are in the answer
            result = {node.name: [] for node in self.cfg.nodes.values()
                      if not nodes or node.name in nodes}
            for (_, node), (status, export) in answer["data"]:
                entry = result.setdefault(node, [])
                if status != query.RS_NORMAL:
                    result[node] = False
                elif entry is not False:
                    entry.append(export)
            return result
        return d.addCallback(convert)

    # configuration
    def query_cluster_info(self):
        return cluster_info(self.cfg)

    def query_tags(self, kind, name):
        return sorted(self.cfg._tag_target(kind, name).tags)

    def query_config_values(self, fields):
        c = self.cfg.cluster
        master = self.cfg.master_node
        values = {
            "cluster_name": c.cluster_name,
            "master_node": master.name if master else None,
            "drain_flag": self.queue.drained,
            "watcher_pause": self.master.watcher_pause,
            "modify_ssh_setup": c.modify_ssh_setup,
            "ssh_key_type": c.ssh_key_type,
            "ssh_key_bits": c.ssh_key_bits,
        }
        return [values.get(f) for f in fields]

    def set_watcher_pause(self, until):
        # kept in watcher.pause (a master restart keeps it) and handed to
        # every node's watcher
        return self.master.pause.set(until)

    def maintenance_update(self, incidents, removed, jobs, evacuated,
                           moves):
        self.cfg.update_maintenance(incidents=incidents,
                                    removed=removed or (), jobs=jobs,
                                    evacuated=evacuated, moves=moves)
        # the daemon relies on it across its own crashes
        return self.cfg.flushed().addCallback(lambda _: True)

    # job filter rules (docs/filters.rst): kept in config.data, applied
    # by the queue; answered once the change is on disk
    def query_filters(self, uuids, fields):
        return self.master.query_context().old_style_wire(
            "filter", uuids, fields)

    def replace_filter(self, uuid, priority, predicates, action, reason):
        uuid = self.cfg.replace_filter(uuid, priority, predicates, action,
                                       reason, self.queue.highest_job_id)
        return self._filters_changed(uuid)

    def delete_filter(self, uuid):
        self.cfg.delete_filter(uuid)
        return self._filters_changed(None)

    def _filters_changed(self, answer):
        self.queue.set_filters(self.cfg.filters)
        return self.cfg.flushed().addCallback(lambda _: answer)

    def watch_events(self, since, kinds, names):
        bus = self.master.events
        if bus is None:
            raise errors.LuxiError("WatchEvents is not supported by this"
                                   " master (no event stream)")
        try:
            events.check_filter(kinds, names)
        except events.BadFilter as err:
            raise errors.OpPrereqError(str(err), errors.ECODE_INVAL)
        return luxi.EventStream(bus, since, kinds, names)

    def query_implemented_opcodes(self):
        return sorted(self.master.processor.logical_units)

    # serial consoles through the primary nodes (docs/console.rst)
    def _consoles(self):
        return console_relay.ConsoleRelay(self.cfg,
                                          self.master.config.node_rpc)

    def console_open(self, instance, owner):
        return defer.Deferred.fromCoroutine(
            self._consoles().open(instance, owner))

    def console_read(self, instance, session, owner, offset, timeout):
        return defer.Deferred.fromCoroutine(
            self._consoles().read(instance, session, owner, offset, timeout))

    def console_write(self, instance, session, owner, data):
        return defer.Deferred.fromCoroutine(
            self._consoles().write(instance, session, owner, data))

    def console_close(self, instance, session, owner):
        return defer.Deferred.fromCoroutine(
            self._consoles().close(instance, session, owner))

    def query_metrics(self):
        return metrics.exposition(self.master.metrics.registry).decode(
            "utf-8")


class _StartStep(service.Service, metaclass=abc.ABCMeta):
    """One step of the daemon's start, done once: in privilegedStartService
    under twistd (which opens ports there, before any startService), else
    in startService (``twist`` calls only that).  An exception stops the
    daemon: twistd and twist exit non-zero with it."""

    _done = False

    def privilegedStartService(self):
        service.Service.privilegedStartService(self)
        self._start_once()

    def startService(self):
        service.Service.startService(self)
        self._start_once()

    def _start_once(self):
        if not self._done:
            self.start_step()
            self._done = True

    @abc.abstractmethod
    def start_step(self):
        """What this step does (once)."""


class QueueLockService(_StartStep):
    """One master per job queue: the queue's lock, taken first, so that a
    second master stops before it has read or written anything.  Held
    until the process ends (docs/jobs.rst)."""

    name = "queue-lock"

    def __init__(self, store):
        self.store = store

    def start_step(self):
        self.store.lock()


class ConfigService(_StartStep):
    """config.data (saved at once if it was upgraded), the ssconf files
    kept in step with it, replication to the other nodes, node RPC and the
    lock manager: ``ctx``, the context logical units run in.  Files are
    written by ``writer``, off the reactor."""

    name = "config"

    def __init__(self, paths, reactor, writer, allocator_path=(),
                 allocator_timeout=allocators.DEFAULT_TIMEOUT):
        self.paths = paths
        self.reactor = reactor
        self.writer = writer
        self.allocator_path = list(allocator_path)
        self.allocator_timeout = allocator_timeout
        self.cfg = None
        self.ctx = None
        #: the RPC client of the node daemons (None: no cluster certificate)
        self.node_rpc = None
        #: the event stream told of every configuration change (or None)
        self.events = None
        #: the instances' run state as the nodes' answers show it
        #: (:class:`ganeti.runstate.RunStateTracker`; None without events)
        self.run_state = None

    def start_step(self):
        self.paths.ensure_dirs()
        cfg = config.ConfigStore.load(self.paths.config_file)
        self.cfg = cfg
        cfg.writer = self.writer
        # The one full check; every change then checks what it affects.
        problems = cfg.track()
        if problems:
            log.warn("the configuration has {n} inconsistencies (gnt-cluster"
                     " verify lists them); a change that adds none is"
                     " accepted: {problems}", n=len(problems),
                     problems="; ".join(problems[:10]))
        if cfg.upgraded:
            log.info("configuration upgraded to version {v}",
                     v=constants.CONFIG_VERSION)
            cfg.save().addErrback(lambda f: log.failure(
                "saving the upgraded configuration failed", f))
        # Keep the master's ssconf files in step with every change (once
        # for the writes of one turn of the reactor: jobs running together
        # write often, and the values walk every node and instance).
        self._ssconf_call = None
        cfg.write_listeners.append(self._ssconf_changed)
        if self.events is not None:
            cfg.change_listeners.append(config_changes.publisher(
                self.events))
        self._write_ssconf(cfg)
        glm = mcpu.make_lock_manager(cfg, self.reactor)
        if self.events is not None:
            self.run_state = runstate.RunStateTracker(
                self.events, lambda: self.cfg,
                glm.lockset(locking.LEVEL_INSTANCE))
        node_rpc = self.node_rpc = self._rpc_client()
        ctx = mcpu.MasterContext(
            cfg=cfg, glm=glm, clock=self.reactor, paths=self.paths,
            rpc=None if node_rpc is None else mcpu.ConfigFirstRpc(node_rpc,
                                                                  cfg),
            allocators=allocators.AllocatorRegistry(
                self.reactor, root=self.paths.root,
                extra_path=self.allocator_path,
                timeout=self.allocator_timeout))
        # config.data to master candidates, ssconf to every node, after
        # every write (docs/membership.rst)
        ctx.replicator = replication.Replicator(cfg, node_rpc, self.reactor)
        cfg.write_listeners.append(ctx.replicator.config_written)
        self.ctx = ctx

    def _rpc_client(self):
        pem = crypto.server_pem_path(self.paths)
        if not os.path.exists(pem):
            log.warn("no cluster certificate at {pem}; node RPC disabled",
                     pem=pem)
            return None
        return rpc.RpcClient(self.reactor, pem,
                             rpc.config_resolver(self.cfg))

    def _ssconf_changed(self, store):
        if self._ssconf_call is None or not self._ssconf_call.active():
            self._ssconf_call = self.reactor.callLater(0, self._write_ssconf,
                                                       store)

    def _write_ssconf(self, store):
        # the values now (the store changes), the files in the writer
        try:
            values = ssconf.current_values(store)
        except errors.GenericError:
            log.failure("computing the ssconf files failed")
            return
        self.writer.call(backend_files.write_ssconf_files, self.paths,
                         values).addErrback(
            lambda f: log.failure("writing the ssconf files failed", f))


class WatcherPauseService(_StartStep):
    """The watcher pause (``gnt-cluster watcher pause``): read back from
    ``watcher.pause`` at start, written there by the writer on change and
    handed to the other online nodes (docs/watcher.rst)."""

    name = "watcher-pause"

    def __init__(self, paths, config_service, reactor, writer):
        self.config = config_service
        self.pause = wpause.MasterPause(
            wpause.pause_path(paths), reactor, write=writer.call,
            distribute=self._distribute)

    def start_step(self):
        self.pause.load()

    async def _distribute(self, until):
        ctx = self.config.ctx
        cfg = self.config.cfg
        if ctx is None or ctx.rpc is None:
            return {}
        master = cfg.cluster.master_node
        nodes = sorted(n.name for n in cfg.nodes.values()
                       if not n.offline and n.uuid != master)
        if not nodes:
            return {}
        results = await ctx.rpc.call_many(nodes, "set_watcher_pause",
                                          [until], timeout=rpc.TIMEOUT_URGENT)
        return {name: result.fail_msg or "failed"
                for name, result in results.items() if not result.success}


class JobQueueService(_StartStep):
    """The opcode processor and the job queue, loaded with what an unclean
    stop left (docs/jobs.rst), its changes copied to the master candidates
    (:mod:`ganeti.jqueue.replication`); shut down when the daemon stops."""

    name = "jobs"

    def __init__(self, store, config_service, reactor, writer,
                 max_running_jobs=None, journal=None, query_budget=None):
        self.store = store
        self.config = config_service
        self.reactor = reactor
        self.writer = writer
        self.journal = journal
        self.max_running_jobs = max_running_jobs
        self.query_budget = query_budget
        self.processor = None
        self.queue = None
        self.replicator = None
        #: the event stream told of every job change (or None)
        self.events = None

    def start_step(self):
        ctx = self.config.ctx
        cfg = self.config.cfg
        self.processor = mcpu.Processor(ctx, cmdlib.LOGICAL_UNITS)
        max_running = (self.max_running_jobs
                       or cfg.cluster.max_running_jobs)
        journal = self.journal
        if self.config.node_rpc is not None:
            # while there is no other master candidate, commits go
            # straight to the journal
            if journal is None:
                journal = WriterJournal(self.store, self.writer)
            journal = self.replicator = QueueReplicator(
                journal, self.store.queue_dir, cfg, self.config.node_rpc,
                self.reactor, self.writer.call)
        self.queue = jqueue.JobQueue(self.store.queue_dir, self.processor,
                                     clock=self.reactor,
                                     max_running=max_running,
                                     store=self.store, writer=self.writer,
                                     journal=journal,
                                     query_budget=self.query_budget)
        ctx.queue = self.queue
        self.queue.events = self.events
        self.queue.set_filters(cfg.filters)
        report = self.queue.load()
        log.info("job queue loaded: {report}", report=report)
        if self.replicator is not None:
            # full copies to the candidates, in the background
            self.replicator.start(self.queue.drained)
            cfg.write_listeners.append(self.replicator.config_written)
            ctx.queue_replicator = self.replicator

    def stopService(self):
        service.Service.stopService(self)
        if self.queue is None:
            return None
        d = defer.maybeDeferred(self.queue.shutdown)
        if self.replicator is not None:
            # the last changes to the candidates too
            d.addBoth(lambda result: self.replicator.stop().addCallback(
                lambda _: result))
        return d


class MasterSocketError(Exception):
    """The master socket cannot be bound."""


class LuxiService(StreamServerEndpointService):
    """The master socket.  Like ``strports.service``, a failed listen is
    raised from (privileged)startService, which stops the daemon, instead
    of being logged only; stopping drops the connected clients too."""

    name = "luxi"
    _raiseSynchronously = True

    def __init__(self, reactor, path, handler):
        # No lock file of Twisted's next to the socket: the queue lock,
        # taken before, already keeps a second master away, and a pid in a
        # lock file left by a killed master could have been reused.
        # A long queue of connections waiting to be accepted: hundreds of
        # clients starting at once are queued, not refused.
        endpoint = endpoints.serverFromString(
            reactor, "unix:%s:mode=660:lockfile=0:backlog=%d"
            % (endpoints.quoteStringArgument(path), luxi.LISTEN_BACKLOG))
        StreamServerEndpointService.__init__(
            self, endpoint, luxi.LuxiServerFactory(handler))
        self.path = path

    def privilegedStartService(self):
        luxi.prepare_socket_path(self.path)
        try:
            StreamServerEndpointService.privilegedStartService(self)
        except error.CannotListenError as err:
            # Twisted's text ("any:b'<path>'") is not meant for UNIX paths
            raise MasterSocketError("Cannot listen on the master socket %s:"
                                    " %s" % (self.path, err.socketError))
        log.info("master daemon serving luxi on {path}", path=self.path)

    def stopService(self):
        self.factory.disconnect_all()
        return StreamServerEndpointService.stopService(self)


class MasterService(service.MultiService):
    """The master daemon: what its luxi handler sees.  The children (see
    :func:`makeService`) start in order; they stop the other way round, each
    once the one after it has stopped (no client left when the queue shuts
    down)."""

    def __init__(self, config_service, jobs, pause=None, query_cache=None,
                 freeze_start_objects=False, vote=None):
        service.MultiService.__init__(self)
        self.config = config_service
        self.jobs = jobs
        self.pause = pause
        #: kept across queries (None: every query computes everything)
        self.query_cache = query_cache
        self.freeze_start_objects = freeze_start_objects
        #: ``async vote() -> Verdict`` asked before anything starts (None:
        #: no start-up vote)
        self.vote = vote
        #: the event stream (:class:`ganeti.events.EventBus`; None: none)
        self.events = None
        #: the Prometheus metrics (luxi QueryMetrics; its own registry)
        self.metrics = master_metrics.MasterMetrics(metrics.new_registry(),
                                                    self)

    def privilegedStartService(self):
        if self.vote is None:
            service.MultiService.privilegedStartService(self)
        # else nothing opens or reads before the vote (startService)

    def startService(self):
        if self.vote is None:
            service.MultiService.startService(self)
            self._started()
            return
        service.Service.startService(self)
        from twisted.internet import reactor

        def start():
            d = defer.Deferred.fromCoroutine(self._start_after_vote())
            d.addErrback(self._start_failed)
        # a failure stops the reactor: it must be running by then
        reactor.callWhenRunning(start)

    async def _start_after_vote(self):
        verdict = await self.vote()
        if not verdict.ok:
            log.error("Not starting: this node is not the master ({reason})."
                      " If the other master candidates are down for good,"
                      " start it with --no-voting --yes-do-it",
                      reason=verdict.reason)
            _to_stderr("ganeti-masterd: not the master: %s" % verdict.reason)
            _exit_when_stopped(EXIT_NOTMASTER)
            return
        log.info("Start-up vote: {reason}", reason=verdict.reason)
        for child in list(self):
            child.privilegedStartService()
            child.startService()
        self._started()

    def _start_failed(self, failure):
        log.failure("The master daemon could not start", failure)
        # as when the start fails before the reactor runs: the reason on
        # stderr too, for whoever started it by hand
        _to_stderr("ganeti-masterd could not start: %s: %s"
                   % (failure.type.__name__, failure.value))
        _exit_when_stopped(1)

    def _started(self):
        # the query opcodes (OP_QUERY, ...) read what luxi's Query reads
        if self.config.ctx is not None:
            self.config.ctx.query_context = self.query_context
            self.metrics.attach(queue=self.jobs.queue,
                                glm=self.config.ctx.glm,
                                cfg=self.config.cfg)
        if self.freeze_start_objects:
            # What the start loaded (modules, the configuration, the jobs
            # found on disk) lives as long as the daemon.  Kept out of the
            # garbage collector's way, its full collections, which walk
            # every object they track, stop pausing every client for tens
            # of milliseconds on a loaded master.
            gc.collect()
            gc.freeze()

    @property
    def watcher_pause(self):
        """Until when the watcher is paused (None: it is not)."""
        return self.pause.until if self.pause is not None else None

    @property
    def cfg(self):
        return self.config.cfg

    @property
    def ctx(self):
        return self.config.ctx

    @property
    def queue(self):
        return self.jobs.queue

    @property
    def processor(self):
        return self.jobs.processor

    def query_context(self):
        tracker = self.config.run_state
        live = (RpcLiveData(self.cfg, self.ctx.rpc, observer=tracker.observe
                            if tracker is not None else None)
                if self.ctx.rpc is not None else None)
        paths = self.ctx.paths
        return query.QueryContext(self.cfg, live=live, jobs=self._job_rows,
                                  locks=self.ctx.glm,
                                  cluster_state=self._cluster_state,
                                  cache=self.query_cache,
                                  root=paths.root if paths else "/",
                                  clock=self.ctx.clock)

    def _job_rows(self, job_ids, field_names):
        names = ["id"] + [f for f in field_names if f != "id"]
        rows = self.queue.query_jobs(job_ids, names)
        return [dict(zip(names, row)) for row in rows if row is not None]

    def _cluster_state(self):
        return {"drain_flag": self.queue.drained,
                "watcher_pause": self.watcher_pause}

    def stopService(self):
        service.Service.stopService(self)
        return defer.Deferred.fromCoroutine(self._stop_children())

    async def _stop_children(self):
        if self.events is not None:
            # stream clients hear why their stream ends
            self.events.close()
        for child in reversed(list(self)):
            if not child.running:
                continue
            try:
                await defer.maybeDeferred(child.stopService)
            except Exception:
                log.failure("stopping {name} failed", name=child.name)


#: exit status of a master daemon on a node that is not the master (as
#: Ganeti's)
EXIT_NOTMASTER = 11


def _to_stderr(message):
    # the process's own stderr (the log has taken over sys.stderr)
    try:
        os.write(2, (message + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _exit_when_stopped(status):
    from twisted.internet import reactor
    atexit.register(os._exit, status)
    reactor.stop()


def startup_vote(options, paths, reactor):
    """The start-up vote of ``options`` (None: --no-voting)."""
    if options.get("no-voting"):
        log.warn("Starting without asking the master candidates"
                 " (--no-voting): make sure no other node runs a master"
                 " daemon")
        return None

    async def vote():
        try:
            view = mastervote.local_view(
                paths.config_file, my_address=options.get("bind"),
                my_name=None if options.get("bind") else
                os.environ.get("GANETI_HOSTNAME") or socket.getfqdn())
        except (OSError, ValueError) as err:
            return mastervote.Verdict(False, True, "cannot read %s: %s"
                                      % (paths.config_file, err))
        if view.me is None:
            return mastervote.Verdict(
                False, True, "this node (%s) is not in the configuration"
                % (options.get("bind") or socket.getfqdn()))
        if view.master != view.me:
            return mastervote.Verdict(
                False, True, "the configuration names %s the master, not"
                " this node (%s)" % (view.master, view.me))
        if not view.voters:
            return mastervote.Verdict(True, True, "the only master"
                                      " candidate")
        client = mastervote.address_client(
            reactor, crypto.server_pem_path(paths), view.voters)
        try:
            return await mastervote.startup_vote(
                reactor, view, mastervote.rpc_caller(client),
                patience=_option(options, "vote-patience", 60.0))
        finally:
            await client.close()
    return vote


def makeService(options, reactor=None, writer=None):
    """The master daemon's service tree.  ``writer`` writes config.data,
    job files and ssconf (default: one thread, in the order asked; a test
    on a memory reactor, which has no threads, gives an InlineWriter)."""
    daemon = reactor is None
    if daemon:
        from twisted.internet import reactor
    paths = pathutils.Paths(options["root"])
    store = JobStore(paths.queue_dir)
    journal = None
    if writer is None:
        writer = OrderedWriter(reactor)
        # job files: a helper process, not a thread fighting the reactor
        # for the interpreter (docs/jobs.rst)
        journal = JournalProcess(reactor, store, QUEUE_FILE_MODE)
    config_service = ConfigService(
        paths, reactor, writer,
        allocator_path=options.get("iallocator-search-path") or (),
        allocator_timeout=options.get("iallocator-timeout")
        or allocators.DEFAULT_TIMEOUT)
    jobs = JobQueueService(
        store, config_service, reactor, writer, options["max-running-jobs"],
        journal=journal, query_budget=budget.QueryBudget(
            _option(options, "max-query-jobs",
                    budget.DEFAULT_MAX_QUERY_JOBS),
            _option(options, "max-query-jobs-per-client",
                    budget.DEFAULT_MAX_QUERY_JOBS_PER_CLIENT)))
    bus = events.EventBus(
        reactor, size=_option(options, "event-buffer",
                              events.DEFAULT_BUFFER_SIZE),
        queue_size=_option(options, "event-queue",
                           events.DEFAULT_QUEUE_SIZE))
    config_service.events = bus
    jobs.events = bus
    pause = WatcherPauseService(paths, config_service, reactor, writer)
    cache = None
    if not options.get("no-query-cache"):
        ttl = options.get("query-live-ttl")
        cache = QueryCache(reactor, live_ttl=livecache.DEFAULT_TTL
                           if ttl is None else ttl)
    # freezing the start's objects is for the daemon's process, not for
    # a test's (which passes its reactor)
    top = MasterService(config_service, jobs, pause.pause, cache,
                        freeze_start_objects=daemon,
                        vote=startup_vote(options, paths, reactor)
                        if daemon else None)
    top.events = bus
    # Started in this order, stopped the other way round: a second master
    # stops at the queue lock, before it has read or written anything;
    # the queue is loaded before the socket opens; the writer stops last,
    # once everything asked of it is on disk.
    QueueLockService(store).setServiceParent(top)
    if service.IService.providedBy(writer):
        writer.setServiceParent(top)
    config_service.setServiceParent(top)
    pause.setServiceParent(top)
    if journal is not None:
        journal.setServiceParent(top)
    jobs.setServiceParent(top)
    archive_interval = _option(options, "job-archive-interval",
                               DEFAULT_JOB_ARCHIVE_INTERVAL)
    if archive_interval > 0:
        JobArchiveService(jobs, reactor, archive_interval,
                          _option(options, "job-archive-age",
                                  DEFAULT_JOB_ARCHIVE_AGE)
                          ).setServiceParent(top)
    LuxiService(reactor, paths.master_socket,
                MasterLuxiHandler(top)).setServiceParent(top)
    ConfigAuditService(config_service, reactor).setServiceParent(top)
    LeaseService(config_service, jobs, reactor,
                 state_changed=cache.time_changed if cache is not None
                 else None, event_bus=bus).setServiceParent(top)
    interval = options.get("node-check-interval")
    if interval is None:
        interval = 5.0
    if interval > 0:
        NodeHealthService(config_service, jobs, reactor,
                          nodehealth.NodeHealthOptions(
                              interval=interval,
                              misses=options.get("node-check-misses") or 3,
                              timeout=min(interval, 5.0))
                          ).setServiceParent(top)
    return top


def _option(options, name, default):
    # tests may hand over a plain dict of the options they care about
    value = options.get(name)
    return default if value is None else value


class JobArchiveService(TimerService):
    """Every ``interval`` seconds (and at start), archive the finished jobs
    that ended at least ``age`` seconds ago, as Ganeti's watcher does on
    each run: nobody has to for the queue to stay below its limit."""

    name = "job-archive"
    #: seconds one archiving may spend choosing jobs
    TIMEOUT = 60

    def __init__(self, jobs, reactor, interval, age):
        TimerService.__init__(self, interval, self.archive)
        self.clock = reactor
        self.jobs = jobs
        self.age = age

    def archive(self):
        queue = self.jobs.queue
        if queue is None:
            return None
        d = queue.auto_archive_jobs(self.age, self.TIMEOUT)

        def done(result):
            archived, left = result
            if archived:
                log.info("archived {n} job(s) that ended more than {age} s"
                         " ago", n=archived, age=self.age)
            return result
        # a failure is logged; the timer goes on
        return d.addCallbacks(done, lambda f: log.failure(
            "archiving old jobs failed", f))


class ConfigAuditService(TimerService):
    """Now and then, compare what config.data is written from (each
    object's encoded form, kept up to date by the mutators) with the
    objects themselves: a difference is a change no mutator recorded,
    which would never reach the disk.  It is logged as an error and
    written."""

    name = "config-audit"
    #: seconds between audits (each costs one full serialisation)
    INTERVAL = 600.0

    def __init__(self, config_service, reactor, interval=INTERVAL):
        TimerService.__init__(self, interval, self.audit)
        self.clock = reactor
        self.config = config_service

    def audit(self):
        cfg = self.config.cfg
        if cfg is None:
            return []
        stale = cfg.audit()
        if stale:
            log.error("configuration objects changed without being"
                      " recorded, now written: {units}",
                      units=", ".join(str(u) for u in stale))
        return stale


class NodeHealthService(service.Service):
    """The node checks (docs/autorepair.rst), once the queue runs."""

    name = "nodehealth"

    def __init__(self, config_service, jobs, reactor, opts):
        self.config = config_service
        self.jobs = jobs
        self.reactor = reactor
        self.opts = opts
        self.health = None

    def startService(self):
        service.Service.startService(self)
        ctx = self.config.ctx
        if ctx is None or ctx.rpc is None or self.jobs.queue is None:
            log.warn("no node checks: this master cannot reach its nodes")
            return
        queue = self.jobs.queue

        def submit(ops):
            return queue.submit_job([opcodes.from_dict(op) for op in ops])
        self.health = nodehealth.NodeHealth(ctx.cfg, ctx.rpc, submit,
                                            self.reactor, self.opts)
        self.health.start().addErrback(
            lambda f: log.failure("node checks stopped", f))

    def stopService(self):
        service.Service.stopService(self)
        if self.health is not None:
            self.health.stop()


class LeaseService(service.Service):
    """Releases the reservations whose lease ended (docs/leases.rst): a
    removal job when a lease ends, armed on the reactor's clock and again
    on every configuration change; at start (also after a failover) the
    leases that ended meanwhile are released at once."""

    name = "leases"

    def __init__(self, config_service, jobs, reactor, state_changed=None,
                 event_bus=None):
        self.config = config_service
        self.event_bus = event_bus
        self.jobs = jobs
        self.reactor = reactor
        #: told when lease states change with the time (the query cache)
        self.state_changed = state_changed
        self.keeper = None

    def startService(self):
        service.Service.startService(self)
        cfg = self.config.cfg
        queue = self.jobs.queue
        if cfg is None or queue is None:
            log.warn("no lease expiry: this master has no job queue")
            return

        def submit(ops):
            return queue.submit_job([opcodes.from_dict(op) for op in ops])
        self.keeper = leases.LeaseKeeper(cfg, submit, self.reactor,
                                         state_changed=self.state_changed,
                                         event_bus=self.event_bus)
        # removals submitted before a restart and still queued (the queue
        # is read only when some lease has ended)
        pending = None
        now = self.reactor.seconds()
        if any(until is not None and until <= now
               for until in map(leases.lease_of, cfg.instances.values())):
            pending = leases.pending_removals(
                row for row in queue.query_jobs(None,
                                                ["id", "status", "ops"])
                if row is not None)
        self.keeper.start(pending)

    def stopService(self):
        service.Service.stopService(self)
        if self.keeper is not None:
            self.keeper.stop()
