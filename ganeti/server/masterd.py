"""ganeti-masterd: the configuration, the job queue and the lock manager.

The master daemon serves luxi on ``<root>/var/run/ganeti/socket/ganeti-query``
(the socket Ganeti's own clients use).  Jobs go into the persistent job queue;
each opcode runs through the opcode processor, which takes locks and calls
the logical units; logical units change config.data through the config store
and do node-local work through node daemons over RPC.
"""

import os

from twisted.application import service
from twisted.internet import defer
from twisted.logger import Logger
from twisted.python import usage
from zope.interface import implementer

from ganeti import cmdlib
from ganeti import config
from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import jqueue
from ganeti import luxi
from ganeti import mcpu
from ganeti import pathutils
from ganeti import query
from ganeti import replication
from ganeti import rpc
from ganeti import ssconf
from ganeti.cmdlib.cluster import cluster_info
from ganeti.query.rpclive import RpcLiveData

log = Logger()


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
    ]

    def postOptions(self):
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

    # jobs: luxi hands over OpCode objects, the queue keeps them
    def submit_job(self, ops):
        return self.queue.submit_job(ops)

    def submit_job_to_drained_queue(self, ops):
        return self.queue.submit_to_drained_queue(ops)

    def submit_many_jobs(self, jobs):
        return self.queue.submit_many_jobs(jobs)

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

    # queries
    def query(self, what, fields, qfilter):
        return self.master.query_context().query(what, fields, qfilter)

    def query_fields(self, what, fields):
        return self.master.query_context().query_fields(what, fields)

    def _old_style(self, method, names, fields):
        return self.master.query_context().old_style(
            query.OLD_STYLE[method], names, fields)

    def query_nodes(self, names, fields, use_locking):
        return self._old_style("QueryNodes", names, fields)

    def query_instances(self, names, fields, use_locking):
        return self._old_style("QueryInstances", names, fields)

    def query_groups(self, names, fields, use_locking):
        return self._old_style("QueryGroups", names, fields)

    def query_networks(self, names, fields, use_locking):
        return self._old_style("QueryNetworks", names, fields)

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
        self.master.watcher_pause = until
        return until

    def query_implemented_opcodes(self):
        return sorted(self.master.processor.logical_units)


class MasterService(service.Service):
    """Loads the cluster state, then serves luxi until stopped."""

    def __init__(self, root, reactor=None, max_running_jobs=None):
        if reactor is None:
            from twisted.internet import reactor
        self.reactor = reactor
        self.paths = pathutils.Paths(root)
        self.max_running_jobs = max_running_jobs
        self.cfg = None
        self.queue = None
        self.port = None
        self.watcher_pause = None

    def _rpc_client(self):
        pem = crypto.server_pem_path(self.paths)
        if not os.path.exists(pem):
            log.warn("no cluster certificate at {pem}; node RPC disabled",
                     pem=pem)
            return None
        return rpc.RpcClient(self.reactor, pem,
                             rpc.config_resolver(self.cfg))

    def startService(self):
        service.Service.startService(self)
        self.paths.ensure_dirs()
        self.cfg = config.ConfigStore.load(self.paths.config_file)
        if self.cfg.upgraded:
            log.info("configuration upgraded to version {v}",
                     v=constants.CONFIG_VERSION)
            self.cfg.save()
        # Keep the master's ssconf files in step with every change.
        # (Shipping them to the other nodes comes with replication.)
        self.cfg.write_listeners.append(self._write_ssconf)
        self._write_ssconf(self.cfg)
        glm = mcpu.make_lock_manager(self.cfg, self.reactor)
        ctx = mcpu.MasterContext(cfg=self.cfg, glm=glm, clock=self.reactor,
                                 rpc=self._rpc_client(), paths=self.paths)
        # config.data to master candidates, ssconf to every node, after
        # every write (docs/membership.rst)
        self.replicator = replication.Replicator(self.cfg, ctx.rpc,
                                                 self.reactor)
        self.cfg.write_listeners.append(self.replicator.config_written)
        ctx.replicator = self.replicator
        processor = self.processor = mcpu.Processor(ctx,
                                                    cmdlib.LOGICAL_UNITS)
        max_running = (self.max_running_jobs
                       or self.cfg.cluster.max_running_jobs)
        self.queue = jqueue.JobQueue(self.paths.queue_dir, processor,
                                     clock=self.reactor,
                                     max_running=max_running)
        ctx.queue = self.queue
        self.ctx = ctx
        report = self.queue.load()
        log.info("job queue loaded: {report}", report=report)
        d = luxi.listen(self.reactor, self.paths.master_socket,
                        MasterLuxiHandler(self))
        d.addCallback(self._listening)
        return d

    def _write_ssconf(self, store):
        try:
            ssconf.write_ssconf(self.paths, store)
        except (OSError, errors.GenericError):
            log.failure("writing the ssconf files failed")

    def query_context(self):
        live = (RpcLiveData(self.cfg, self.ctx.rpc)
                if self.ctx.rpc is not None else None)
        return query.QueryContext(self.cfg, live=live, jobs=self._job_rows,
                                  locks=self.ctx.glm,
                                  cluster_state=self._cluster_state)

    def _job_rows(self, job_ids, field_names):
        names = ["id"] + [f for f in field_names if f != "id"]
        rows = self.queue.query_jobs(job_ids, names)
        return [dict(zip(names, row)) for row in rows if row is not None]

    def _cluster_state(self):
        return {"drain_flag": self.queue.drained,
                "watcher_pause": self.watcher_pause}

    def _listening(self, port):
        self.port = port
        log.info("master daemon serving luxi on {path}",
                 path=self.paths.master_socket)

    @defer.inlineCallbacks
    def stopService(self):
        service.Service.stopService(self)
        if self.port is not None:
            self.port.factory.disconnect_all()
            yield self.port.stopListening()
        if self.queue is not None:
            yield defer.maybeDeferred(self.queue.shutdown)


def makeService(options):
    top = service.MultiService()
    MasterService(options["root"],
                  max_running_jobs=options["max-running-jobs"]
                  ).setServiceParent(top)
    return top
