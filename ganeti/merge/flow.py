"""The merge of other clusters into this one, step by step.

Run on this cluster's master, with its master daemon running.  Every other
cluster is reached through its node daemons, with a copy of its
certificate (:class:`OtherSpec`); this cluster through the master's luxi
socket and its node daemons.  docs/merger.rst describes the steps:

checks (nothing changes; every problem named, then refused) ->
pause the watchers, drain this cluster's job queue -> stop the other
clusters' master daemons -> read their configurations again -> stop
their instances (``--stop-instances`` only) -> stop this cluster's master
daemons -> write the merged configuration -> switch every node of the
other clusters to this cluster -> start this cluster's master daemon
without its vote -> redistribute the configuration -> refill the master
candidate pool -> restart the master daemon with its vote -> start the
stopped instances -> resume the watchers, undrain the queue -> compare
nodes, instances and their states with what they were -> remove the
backups the switched nodes kept.

Each step records its undo before it acts (:mod:`ganeti.merge.rollback`);
any failure up to the comparison takes every cluster back to where it was.
"""

import json
import time

import attrs
from twisted.internet import defer, task
from twisted.logger import Logger

from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import luxi
from ganeti import qlang
from ganeti import replication
from ganeti import ssconf
from ganeti.cmdlib import checks as cmd_checks
from ganeti.cmdlib import node as cmd_node
from ganeti.cmdlib import payloads
from ganeti.config import ConfigStore
from ganeti.merge import configmerge
from ganeti.merge.rollback import Journal
from ganeti.utils import io

log = Logger()

RESTART_ALL = "all"
RESTART_MASTER = "master"
RESTART_NONE = "none"
RESTART_MODES = (RESTART_ALL, RESTART_MASTER, RESTART_NONE)

#: job statuses that are final
FINAL_JOB_STATUSES = ("success", "error", "canceled")


@attrs.frozen
class OtherSpec:
    """A cluster to merge, as the admin names it: the address of a node
    daemon of it (its master's, or a master candidate's) and a copy of
    its certificate (its ``/var/lib/ganeti/server.pem``)."""
    address: str
    cert_file: str


@attrs.define
class Options:
    #: same-named node groups: None (refuse), "merge" or "rename"
    groups: object = None
    #: stop the other clusters' instances during the merge
    stop_instances: bool = False
    #: seconds the watchers stay paused at most
    watcher_pause_period: float = 1800.0
    #: which daemons restart at the end (RESTART_MODES)
    restart: str = RESTART_MASTER
    #: seconds a switched node has to serve this cluster's certificate
    switch_timeout: float = 120.0
    #: seconds a job of the merge may take
    job_timeout: float = 900.0
    #: seconds the master daemon has to answer after its start
    master_timeout: float = 180.0
    #: check and report only: change nothing
    dry_run: bool = False


class MergeError(errors.GenericError):
    """The merge did not happen.  ``rolled_back``: every cluster is back
    as it was; ``manual``: what the admin must still do by hand (a
    rollback step that failed)."""

    def __init__(self, message, rolled_back=True, manual=()):
        errors.GenericError.__init__(self, message)
        self.message = message
        self.rolled_back = rolled_back
        self.manual = list(manual)
        #: refused before anything was changed
        self.refused = False


@attrs.frozen
class MergeOutcome:
    cluster_name: str
    nodes: tuple
    instances: tuple
    #: things the admin should know (all steps succeeded)
    warnings: tuple
    dry_run: bool = False


@attrs.define(eq=False)
class _Other:
    """What the merge knows of one other cluster."""
    spec: OtherSpec
    cert: object
    store: object = None
    name: str = None
    master_name: str = None
    master_ip: str = None
    #: node name -> primary address
    nodes: dict = attrs.Factory(dict)
    #: instances this merge stopped: [(name, hypervisor)]
    stopped: list = attrs.Factory(list)

    @property
    def digest(self):
        return self.cert.digest()

    def label(self):
        return "cluster %s (%s)" % (self.name or "?", self.spec.address)


class AddressCaller(object):
    """Node daemon calls by address, presenting (and expecting) a
    cluster's certificate: ``call(cert, address, procedure, args,
    timeout)`` -> Deferred[RpcResult] that never fails."""

    def __init__(self, reactor, port=constants.DEFAULT_NODED_PORT):
        self.reactor = reactor
        self.port = port
        self._clients = {}

    def call(self, cert, address, procedure, args=(), timeout=None):
        digest = cert.digest()
        client = self._clients.get(digest)
        if client is None:
            client = self._clients[digest] = replication.AddressRpc(
                self.reactor, cert, port=self.port)
        return client.call(address, digest, procedure, list(args), timeout)


def _hooks_noop(step, **info):
    return None


def _decode_config(payload, where):
    try:
        data = replication.decode_data(payload["config"])
        parsed = json.loads(data.decode("utf-8"))
    except (KeyError, TypeError, ValueError) as err:
        raise MergeError("%s sent a configuration that cannot be read: %s"
                         % (where, err))
    return data, parsed


class Merger(object):
    """One merge: :meth:`run` does it and returns a :class:`MergeOutcome`
    or raises :class:`MergeError`.

    ``luxi_client`` has the methods of :class:`ganeti.luxi.LuxiClient`
    (returning Deferreds or values); ``caller`` is an
    :class:`AddressCaller`; ``hooks(step, **info)`` is awaited before
    each step (tests stop a node there); ``report(text)`` prints a
    progress line.
    """

    def __init__(self, reactor, paths, specs, options, report=print,
                 luxi_client=None, caller=None, hooks=None, clock=None,
                 now=time.time, confirm=None):
        self.reactor = reactor
        self.clock = clock or reactor
        self.paths = paths
        self.specs = list(specs)
        self.options = options
        self.report = report
        self._own_luxi = luxi_client is None
        self.luxi = luxi_client or luxi.LuxiClient(reactor,
                                                   paths.master_socket)
        self.caller = caller or AddressCaller(reactor)
        self.hooks = hooks or _hooks_noop
        #: ``confirm(summary)`` -> bool, asked after the checks (None:
        #: go ahead)
        self.confirm = confirm
        self.now = now
        self.journal = Journal(report)
        self.others = []
        self.ours = None
        self.cert = None
        self.warnings = []
        self.before = None
        self.merged = None
        self.original_config = None
        self.master_restarted_merged = False
        self.switched = []
        self.paused = None

    # --- small helpers ------------------------------------------------------

    async def _hook(self, step, **info):
        result = self.hooks(step, **info)
        if result is not None:
            await defer.maybeDeferred(lambda: result)

    async def _luxi(self, method, *args):
        try:
            return await defer.maybeDeferred(getattr(self.luxi, method),
                                             *args)
        except luxi.NoMasterError as err:
            raise MergeError("this cluster's master daemon does not answer"
                             " (%s)" % err)

    async def _call(self, cert, address, procedure, args=(), timeout=None,
                    what=None):
        result = await self.caller.call(cert, address, procedure, args,
                                        timeout)
        if not result.success:
            raise MergeError("%s: %s" % (what or "%s on %s" % (procedure,
                                                                address),
                                         result.fail_msg))
        return result.payload

    async def _sleep(self, seconds):
        await task.deferLater(self.clock, seconds, lambda: None)

    @property
    def master_ip(self):
        return self.ours.master_node.primary_ip

    @property
    def master_name(self):
        return self.ours.master_node.name

    def _note(self, text):
        self.report("  " + text)

    # --- the whole merge ----------------------------------------------------

    async def run(self):
        try:
            return await self._run()
        finally:
            if self._own_luxi:
                await self.luxi.close()

    async def _run(self):
        try:
            await self._checks()
            if self.options.dry_run:
                self.report("Dry run: nothing was changed")
                return self._outcome(dry_run=True)
            if self.confirm is not None and not await defer.maybeDeferred(
                    self.confirm, self._summary()):
                raise MergeError("Aborted")
        except MergeError as err:
            err.refused = True
            raise
        try:
            await self._steps()
        except Exception as err:
            if isinstance(err, MergeError):
                message = err.message
            else:
                log.failure("the merge failed")
                message = "%s: %s" % (type(err).__name__, err)
            self.report("Failure: %s" % message)
            self.report("Rolling back")
            failures = await self.journal.roll_back()
            manual = ["%s: %s" % (f.what, f.manual) for f in failures]
            if any(f.critical for f in failures):
                raise MergeError("%s; the rollback did not finish" % message,
                                 rolled_back=False, manual=manual)
            raise MergeError(message, manual=manual)
        await self._forget_backups()
        return self._outcome()

    def _summary(self):
        return ("This merges %s into this cluster (%s: %d node(s), %d"
                " instance(s)).  Their master daemons stop for good, this"
                " cluster's for the merge (its clients wait); the instances"
                " keep running%s." % (
                    ", ".join("%s: %d node(s), %d instance(s)" % (
                        o.label(), len(o.store.nodes),
                        len(o.store.instances)) for o in self.others),
                    self.ours.cluster.cluster_name, len(self.ours.nodes),
                    len(self.ours.instances),
                    "" if not self.options.stop_instances else
                    " (theirs are stopped and started again:"
                    " --stop-instances)"))

    def _outcome(self, dry_run=False):
        store = self.merged or self.ours
        return MergeOutcome(
            store.cluster.cluster_name,
            tuple(qlang.nice_sort(n.name for n in store.nodes.values())),
            tuple(qlang.nice_sort(i.name for i in store.instances.values()
                                  if i.name)),
            tuple(self.warnings), dry_run)

    # --- checks: nothing changes -------------------------------------------

    async def _checks(self):
        self.report("Checking this cluster")
        try:
            self.ours = ConfigStore.load(self.paths.config_file)
        except errors.GenericError as err:
            raise MergeError("this node's configuration cannot be read (run"
                             " cluster-merge on this cluster's master): %s"
                             % err)
        try:
            self.cert = crypto.load_cluster_certificate(
                crypto.server_pem_path(self.paths))
        except errors.GenericError as err:
            raise MergeError("this cluster's certificate: %s" % err)
        master = (await self._luxi("query_config_values",
                                   ["master_node"]))[0]
        if master != self.master_name:
            raise MergeError("the master daemon here says the master is %s,"
                             " its configuration %s" % (master,
                                                        self.master_name))
        await self._check_no_jobs()
        await self._call(self.cert, self.master_ip, "daemons_status",
                         what="the node daemon of this cluster's master %s"
                         " must start and stop its master daemons"
                         " (ganeti-noded --daemons)" % self.master_name)
        for spec in self.specs:
            self.others.append(await self._check_other(spec))
        problems, warnings = configmerge.check(
            self.ours, [o.store for o in self.others], self.options.groups)
        for text in warnings:
            self.warnings.append(text)
            self.report("  Warning: %s" % text)
        if problems:
            raise MergeError("the clusters cannot be merged:\n  %s"
                             % "\n  ".join(problems))
        self.before = await self._state_before()
        self.report("Checks passed: %s" % "; ".join(
            "%s: %d node(s), %d instance(s)" % (
                o.label(), len(o.store.nodes), len(o.store.instances))
            for o in self.others))

    async def _check_no_jobs(self):
        unfinished = [row[0] for row in await self._luxi(
            "query_jobs", None, ["id", "status"])
            if row and row[1] not in FINAL_JOB_STATUSES]
        if unfinished:
            raise MergeError("this cluster has unfinished jobs (%s): wait"
                             " for them or cancel them first"
                             % ", ".join(str(j) for j in sorted(unfinished)))

    async def _check_other(self, spec):
        try:
            cert = crypto.load_cluster_certificate(spec.cert_file)
        except errors.GenericError as err:
            raise MergeError("certificate of the cluster at %s: %s"
                             % (spec.address, err))
        if cert.digest() == self.cert.digest():
            raise MergeError("%s is this cluster's own certificate"
                             % spec.cert_file)
        other = _Other(spec, cert)
        self.report("Checking the cluster at %s" % spec.address)
        await self._read_other(other, first=True)
        await self._call(cert, other.master_ip, "daemons_status",
                         what="the node daemon of %s's master %s must start"
                         " and stop its master daemons (ganeti-noded"
                         " --daemons)" % (other.label(), other.master_name))
        for name, address in sorted(other.nodes.items()):
            info = await self._call(
                cert, address, "merge_info", [False],
                what="node %s of %s" % (name, other.label()))
            self._check_versions(info, "node %s of %s" % (name,
                                                          other.label()))
            if info.get("cluster_name") != other.name:
                raise MergeError("node %s (%s) says it is in cluster %r, not"
                                 " %s" % (name, address,
                                          info.get("cluster_name"),
                                          other.name))
            if info.get("backup"):
                raise MergeError(
                    "node %s of %s keeps the backup of an earlier merge that"
                    " did not end (%s/cluster-merge.backup); remove it"
                    " first" % (name, other.label(), "/var/lib/ganeti"))
        return other

    def _check_versions(self, info, where):
        for key, mine in (("protocol_version", constants.PROTOCOL_VERSION),
                          ("release_version", constants.RELEASE_VERSION),
                          ("config_version", constants.CONFIG_VERSION)):
            if info.get(key) != mine:
                raise MergeError("%s runs %s %s, this node %s; both must run"
                                 " the same version" % (where,
                                                        key.replace("_", " "),
                                                        info.get(key), mine))

    async def _read_other(self, other, first=False):
        """Read the other cluster's configuration from its master (found
        through the node at the address given, the first time)."""
        address = other.master_ip or other.spec.address
        where = "the cluster at %s" % address
        info = await self._call(
            other.cert, address, "merge_info", [True],
            what="%s does not answer with the certificate %s" % (
                where, other.spec.cert_file) if first else
            "reading the configuration of %s" % other.label())
        self._check_versions(info, where)
        data, parsed = _decode_config(info, where)
        if not isinstance(parsed, dict) or \
                parsed.get("version") != constants.CONFIG_VERSION:
            raise MergeError("%s has configuration version %s, this cluster"
                             " %s; both must be the same"
                             % (where, isinstance(parsed, dict) and
                                parsed.get("version"),
                                constants.CONFIG_VERSION))
        try:
            store = ConfigStore.from_bytes(data, "config.data of %s"
                                           % address)
        except errors.GenericError as err:
            raise MergeError("the configuration of %s: %s" % (where, err))
        master = store.master_node
        if master is None:
            raise MergeError("the configuration of %s names no master"
                             % where)
        old_serial = other.store.serial_no if other.store else None
        other.store = store
        other.name = store.cluster.cluster_name
        other.master_name = master.name
        other.master_ip = master.primary_ip
        other.nodes = {n.name: n.primary_ip for n in store.nodes.values()}
        if first and address != other.master_ip:
            # a master candidate answered: the master's is the one
            return await self._read_other(other, first=True)
        if info.get("unfinished_jobs"):
            raise MergeError(
                "%s has unfinished jobs (%s): wait for them or cancel them"
                " first" % (other.label(), ", ".join(
                    str(j) for j in info["unfinished_jobs"])))
        if old_serial is not None and old_serial != store.serial_no:
            self._note("the configuration of %s changed since the checks"
                       " (serial %s, now %s)" % (other.label(), old_serial,
                                                 store.serial_no))
        return store

    async def _state_before(self):
        """``({node names}, {instance: (primary node, running)})`` of
        every cluster now."""
        nodes = {n.name for n in self.ours.nodes.values()}
        instances = {}
        for name, pnode, running in await self._luxi(
                "query_instances", None, ["name", "pnode", "oper_state"]):
            instances[name] = (pnode, bool(running))
        for other in self.others:
            nodes.update(other.nodes)
            instances.update(await self._other_instances(other))
        return nodes, instances

    async def _other_instances(self, other):
        hvs = list(other.store.cluster.enabled_hypervisors)
        live = {}
        for name, address in sorted(other.nodes.items()):
            payload = await self._call(
                other.cert, address, "all_instances_info", [hvs],
                what="the instances on node %s of %s" % (name,
                                                         other.label()))
            live[name] = payload or {}
        result = {}
        for inst in other.store.instances.values():
            if not inst.name:
                continue
            pnode = other.store.nodes.get(inst.primary_node)
            pname = pnode.name if pnode else None
            info = live.get(pname, {}).get(inst.name)
            result[inst.name] = (pname, cmd_checks.is_live(info))
        return result

    # --- the steps ------------------------------------------------------------

    async def _steps(self):
        await self._pause()
        for other in self.others:
            await self._stop_other_master(other)
        for other in self.others:
            await self._hook("reread", cluster=other.name)
            self.report("Reading the configuration of %s again"
                        % other.label())
            await self._read_other(other)
        # nothing changes any more (their masters are stopped, this
        # cluster's queue drained): what must be the same at the end
        await self._check_no_jobs()
        self.before = await self._state_before()
        if self.options.stop_instances:
            for other in self.others:
                await self._stop_instances(other)
        await self._stop_our_master()
        await self._write_merged()
        for other in self.others:
            await self._switch_nodes(other)
        await self._start_our_master(no_voting=True)
        await self._redistribute()
        await self._fill_candidates()
        if self.options.restart in (RESTART_MASTER, RESTART_ALL):
            await self._restart_master()
        if self.options.restart == RESTART_ALL:
            await self._reconcile_daemons()
        if self.options.stop_instances:
            await self._start_instances()
        await self._resume()
        await self._verify()

    # pause the watchers, drain the queue

    async def _pause(self):
        until = self.now() + self.options.watcher_pause_period
        await self._hook("pause")
        self.report("Pausing the watchers until %s and draining this"
                    " cluster's job queue" % time.strftime(
                        "%Y-%m-%d %H:%M:%S", time.localtime(until)))
        old_pause, old_drain = await self._luxi(
            "query_config_values", ["watcher_pause", "drain_flag"])
        if old_pause is not None and old_pause <= self.now():
            old_pause = None
        self.paused = (old_pause, bool(old_drain))

        async def resume_ours():
            await self._luxi("set_watcher_pause", old_pause)
            await self._luxi("set_drain_flag", bool(old_drain))
        self._ours_paused = self.journal.add(
            "this cluster's watcher pause and queue drain flag as they were",
            resume_ours,
            "gnt-cluster watcher continue; gnt-cluster queue undrain (if"
            " they were not paused and drained before)", critical=False)
        await self._luxi("set_drain_flag", True)
        await self._luxi("set_watcher_pause", until)
        for other in self.others:
            await self._pause_other(other, until)

    async def _pause_other(self, other, until):
        nodes = sorted(other.nodes.items())

        async def resume():
            failed = []
            for name, address in nodes:
                result = await self.caller.call(
                    other.cert, address, "set_watcher_pause", [None])
                if not result.success:
                    failed.append("%s (%s)" % (name, result.fail_msg))
            if failed:
                raise MergeError("the watcher pause stays on %s"
                                 % ", ".join(failed))
        self.journal.add("the watchers of %s resumed" % other.label(),
                         resume, "gnt-cluster watcher continue on %s (the"
                         " pause ends by itself at the time above)"
                         % other.name, critical=False)
        for name, address in nodes:
            await self._call(other.cert, address, "set_watcher_pause",
                             [until], what="pausing the watcher of node %s"
                             " of %s" % (name, other.label()))

    # the other clusters' master daemons

    async def _start_master_on(self, cert, address, name, no_voting,
                               where):
        payload = await self._call(
            cert, address, "node_start_master_daemons", [no_voting],
            timeout=self.options.master_timeout,
            what="starting the master daemons of %s on %s" % (where, name))
        daemons = (payload or {}).get("daemons") or {}
        return sorted(d for d, up in daemons.items() if up)

    async def _stop_other_master(self, other):
        await self._hook("stop-other-master", cluster=other.name)
        self.report("Stopping the master daemons of %s on %s"
                    % (other.label(), other.master_name))

        async def restart():
            # without the vote: this merge stopped them moments ago, no
            # other master can have been elected since (and a candidate
            # that is down must not keep the cluster without its master)
            running = await self._start_master_on(
                other.cert, other.master_ip, other.master_name, True,
                other.label())
            self._note("running on %s: %s" % (other.master_name,
                                              ", ".join(running)))
        self.journal.add(
            "the master daemons of %s started again on %s"
            % (other.label(), other.master_name), restart,
            "start them on %s: gnt-cluster master-failover there (or"
            " restart its ganeti-noded)" % other.master_name)
        payload = await self._call(
            other.cert, other.master_ip, "node_stop_master", [],
            timeout=self.options.master_timeout,
            what="stopping the master daemons of %s" % other.label())
        self._note("stopped on %s: %s" % (
            other.master_name,
            ", ".join((payload or {}).get("stopped") or []) or
            "nothing was running"))

    # the other clusters' instances (--stop-instances)

    async def _stop_instances(self, other):
        await self._hook("stop-instances", cluster=other.name)
        store = other.store
        running = [(name, pnode) for name, (pnode, up) in sorted(
            (await self._other_instances(other)).items()) if up]
        self.report("Stopping the %d running instance(s) of %s"
                    % (len(running), other.label()))

        async def start_again():
            failed = []
            for name, hv in list(other.stopped):
                inst = store.get_instance(name)
                pnode = store.nodes[inst.primary_node]
                spec = payloads.instance_spec(store, inst)
                result = await self.caller.call(
                    other.cert, pnode.primary_ip, "instance_start",
                    [spec, False])
                if not result.success:
                    failed.append("%s (%s)" % (name, result.fail_msg))
            if failed:
                raise MergeError("not started again: %s" % ", ".join(failed))
        self.journal.add("the stopped instances of %s started again"
                         % other.label(), start_again,
                         "gnt-instance startup the instances it lists, on"
                         " %s" % other.name)
        for name, pnode in running:
            inst = store.get_instance(name)
            self._note("stopping %s on %s" % (name, pnode))
            await self._call(other.cert, other.nodes[pnode],
                             "instance_shutdown",
                             [name, inst.hypervisor, 120],
                             what="stopping instance %s" % name)
            other.stopped.append((name, inst.hypervisor))

    # this cluster's master daemons

    async def _stop_our_master(self):
        await self._hook("stop-our-master")
        self.report("Stopping this cluster's master daemons on %s"
                    % self.master_name)

        async def restart():
            # without the vote, as the other clusters' masters
            running = await self._start_master_on(
                self.cert, self.master_ip, self.master_name, True,
                "this cluster")
            self._note("running on %s: %s" % (self.master_name,
                                              ", ".join(running)))
            await self._wait_master()
            if self.master_restarted_merged:
                # its nodes had the merged configuration
                await self._job([{"OP_ID": "OP_CLUSTER_REDIST_CONF"}],
                                "redistributing the configuration")
        self.journal.add(
            "this cluster's master daemons started again on %s"
            % self.master_name, restart,
            "start them: restart ganeti-noded on %s, then gnt-cluster"
            " redist-conf" % self.master_name)
        payload = await self._call(
            self.cert, self.master_ip, "node_stop_master", [],
            timeout=self.options.master_timeout,
            what="stopping this cluster's master daemons")
        self._note("stopped on %s: %s" % (
            self.master_name,
            ", ".join((payload or {}).get("stopped") or []) or
            "nothing was running"))

    async def _wait_master(self):
        deadline = self.clock.seconds() + self.options.master_timeout
        while True:
            try:
                await defer.maybeDeferred(self.luxi.query_config_values,
                                          ["master_node"])
                return
            except (luxi.NoMasterError, errors.LuxiError, OSError):
                if self.clock.seconds() >= deadline:
                    raise MergeError("this cluster's master daemon did not"
                                     " answer within %d s"
                                     % self.options.master_timeout)
            await self._sleep(0.5)

    async def _start_our_master(self, no_voting):
        await self._hook("start-our-master")
        self.report("Starting this cluster's master daemons on %s%s"
                    % (self.master_name, " (without the vote: the nodes"
                       " have not got the merged configuration yet)"
                       if no_voting else ""))
        self.master_restarted_merged = True
        running = await self._start_master_on(
            self.cert, self.master_ip, self.master_name, no_voting,
            "this cluster")
        self._note("running on %s: %s" % (self.master_name,
                                          ", ".join(running)))
        await self._wait_master()

    async def _restart_master(self):
        await self._hook("restart-master")
        self.report("Restarting this cluster's master daemons on %s with"
                    " the master candidates' vote" % self.master_name)
        await self._call(self.cert, self.master_ip, "node_stop_master", [],
                         timeout=self.options.master_timeout,
                         what="stopping this cluster's master daemons")
        running = await self._start_master_on(
            self.cert, self.master_ip, self.master_name, False,
            "this cluster")
        self._note("running on %s: %s" % (self.master_name,
                                          ", ".join(running)))
        await self._wait_master()

    async def _reconcile_daemons(self):
        self.report("Every node starts the daemons of its role now")
        for node in qlang.nice_sort(self.merged.nodes.values(),
                                    key=lambda n: n.name):
            result = await self.caller.call(self.cert, node.primary_ip,
                                            "daemons_reconcile", [])
            if result.success:
                running = sorted(d for d, up in ((result.payload or {}).get(
                    "daemons") or {}).items() if up)
                self._note("%s: %s" % (node.name, ", ".join(running)))
            else:
                self._warn("node %s did not check its daemons: %s"
                           % (node.name, result.fail_msg))

    def _warn(self, text):
        self.warnings.append(text)
        self.report("  Warning: %s" % text)

    # the configuration

    async def _write_merged(self):
        await self._hook("merge-config")
        self.report("Merging the configurations")
        path = self.paths.config_file
        with open(path, "rb") as f:
            original = f.read()
        # as the master daemon left it (it may have changed since the checks)
        ours = ConfigStore.from_bytes(original, path)
        try:
            result = configmerge.merge(ours, [o.store for o in self.others],
                                       self.options.groups, now=self.now)
        except configmerge.MergeConflict as err:
            raise MergeError("the clusters cannot be merged:\n  %s"
                             % "\n  ".join(err.problems))
        merged = result.store
        self.original_config = original
        self.merged = merged

        async def restore():
            # the master daemon must not hold the merged configuration
            await self._call(self.cert, self.master_ip, "node_stop_master",
                             [], timeout=self.options.master_timeout,
                             what="stopping this cluster's master daemons")
            store = ConfigStore.from_bytes(original, path)
            # above every serial a node may hold now
            store.serial_no = merged.serial_no + 1
            store.cluster.serial_no = merged.cluster.serial_no + 1
            io.atomic_write(path, store.dumps(), mode=0o600)
            ssconf.write_ssconf(self.paths, store)
        self.journal.add("this cluster's configuration as it was", restore,
                         "cp %s.bak %s on %s (the configuration before the"
                         " merge), then gnt-cluster redist-conf"
                         % (path, path, self.master_name))
        io.atomic_write(path, merged.dumps(), mode=0o600, backup=True)
        ssconf.write_ssconf(self.paths, merged)
        for text in result.notes:
            self._note(text)
        for disk, (old, new) in sorted(result.ports.items()):
            self._note("DRBD disk %s: port %s -> %s" % (disk, old, new))
        for text in result.warnings:
            if text not in self.warnings:
                self._warn(text)
        self._note("configuration serial %d: %d node(s), %d instance(s)"
                   % (merged.serial_no, len(merged.nodes),
                      len(merged.instances)))

    # the other clusters' nodes

    async def _switch_nodes(self, other):
        try:
            with open(self.paths.hmac_key_file) as f:
                hmac_key = f.read()
        except OSError as err:
            raise MergeError("cannot read this cluster's HMAC key %s: %s"
                             % (self.paths.hmac_key_file, err.strerror))
        pem = (self.cert.key_pem + self.cert.cert_pem).decode("ascii")
        values = ssconf.ssconf_values(self.merged)
        # the master first: its node daemon is the one that must not come
        # back as the other cluster's master
        order = [other.master_name] + sorted(
            n for n in other.nodes if n != other.master_name)
        for name in order:
            address = other.nodes[name]
            await self._hook("switch", cluster=other.name, node=name)
            self.report("Switching node %s (%s) from %s to this cluster"
                        % (name, address, other.label()))
            self.journal.add(
                "node %s back in %s" % (name, other.label()), lambda
                name=name, address=address: self._revert_node(
                    other, name, address),
                "on node %s, move the files of %s/cluster-merge.backup back"
                " into place and restart ganeti-noded there"
                % (name, "/var/lib/ganeti"))
            await self._call(
                other.cert, address, "merge_switch_cluster",
                [pem, hmac_key, self.ours.cluster.cluster_name, name, values,
                 None, other.name],
                what="switching node %s" % name)
            self.switched.append((name, address))
            await self._wait_serving(self.cert, address, name,
                                     "this cluster's")
            self._note("node %s serves this cluster's certificate" % name)

    async def _wait_serving(self, cert, address, name, whose):
        deadline = self.clock.seconds() + self.options.switch_timeout
        result = None
        while self.clock.seconds() < deadline:
            await self._sleep(0.5)
            result = await self.caller.call(cert, address, "version", [],
                                            10)
            if result.success:
                return
        raise MergeError("node %s (%s) did not serve %s certificate within"
                         " %d s: %s" % (name, address, whose,
                                        self.options.switch_timeout,
                                        result.fail_msg if result else
                                        "no answer"))

    async def _revert_node(self, other, name, address):
        """Back to the other cluster, whichever certificate the node
        serves now; a node that answers neither (restarting, or its
        daemon down) is asked again until the switch timeout."""
        deadline = self.clock.seconds() + self.options.switch_timeout
        while True:
            result = await self.caller.call(self.cert, address,
                                            "merge_revert_switch", [])
            if result.success:
                break
            # not switched, or its files switched but the daemon not yet
            # restarted: its own certificate tells
            info = await self.caller.call(other.cert, address, "merge_info",
                                          [False])
            if info.success and not (info.payload or {}).get("backup"):
                self._note("node %s was not switched" % name)
                return
            if info.success:
                await self._call(other.cert, address, "merge_revert_switch",
                                 [], what="reverting node %s" % name)
                break
            if self.clock.seconds() >= deadline:
                raise MergeError(
                    "node %s answers with neither certificate: %s; %s"
                    % (name, result.fail_msg, info.fail_msg))
            await self._sleep(1.0)
        await self._wait_serving(other.cert, address, name,
                                 "its old cluster's")
        self._note("node %s is back in %s" % (name, other.label()))

    # jobs on the merged cluster

    async def _job(self, ops, what):
        job_id = await self._luxi("submit_job_to_drained_queue", ops)
        self._note("%s: job %s" % (what, job_id))
        deadline = self.clock.seconds() + self.options.job_timeout
        while True:
            status = (await self._luxi("query_jobs", [job_id],
                                       ["status"]))[0][0]
            if status in FINAL_JOB_STATUSES:
                break
            if self.clock.seconds() >= deadline:
                raise MergeError("%s: job %s did not end within %d s"
                                 % (what, job_id, self.options.job_timeout))
            await self._sleep(0.5)
        status, result, oplog = (await self._luxi(
            "query_jobs", [job_id], ["status", "opresult", "oplog"]))[0]
        for entries in oplog or ():
            for entry in entries or ():
                self._note("  %s" % (entry[3],))
        if status != "success":
            raise MergeError("%s: job %s ended %s: %s"
                             % (what, job_id, status, result))
        return result

    async def _redistribute(self):
        await self._hook("redistribute")
        self.report("Distributing the merged configuration to every node")
        await self._job([{"OP_ID": "OP_CLUSTER_REDIST_CONF"}],
                        "redistribution")

    async def _fill_candidates(self):
        await self._hook("candidates")
        merged = self.merged
        now, wanted, _ = cmd_node.candidate_stats(merged)
        if now >= wanted:
            self.report("The master candidate pool is full (%d of %d)"
                        % (now, wanted))
            return
        chosen = []
        for node in qlang.nice_sort(merged.nodes.values(),
                                    key=lambda n: n.name):
            if now + len(chosen) >= wanted:
                break
            if node.master_candidate or node.offline or node.drained or \
                    not node.master_capable:
                continue
            chosen.append(node)
        self.report("Filling the master candidate pool (%d of %d): %s"
                    % (now, wanted, ", ".join(n.name for n in chosen)))
        ours = {n.uuid for n in self.ours.nodes.values()}
        for node in chosen:
            if node.uuid in ours:
                self.journal.add(
                    "node %s without its copy of the merged configuration"
                    % node.name, lambda node=node: self._call(
                        self.cert, node.primary_ip, "node_demote_from_mc",
                        [], what="node %s" % node.name),
                    "remove %s/config.data on node %s (it is no master"
                    " candidate)" % ("/var/lib/ganeti", node.name))
        await self._job([{"OP_ID": "OP_NODE_SET_PARAMS",
                          "node_name": node.name, "master_candidate": True}
                         for node in chosen], "promotion")

    async def _start_instances(self):
        names = [name for other in self.others for name, _ in other.stopped]
        if not names:
            return
        await self._hook("start-instances")
        self.report("Starting the %d instance(s) stopped for the merge"
                    % len(names))
        await self._job([{"OP_ID": "OP_INSTANCE_STARTUP",
                          "instance_name": name} for name in names],
                        "start-up")

    async def _resume(self):
        await self._hook("resume")
        old_pause, old_drain = self.paused
        self.report("Resuming the watchers%s" % (
            "" if old_drain else " and undraining the job queue"))
        await self._luxi("set_watcher_pause", old_pause)
        await self._luxi("set_drain_flag", old_drain)
        self.journal.drop(self._ours_paused)

    async def _verify(self):
        await self._hook("verify")
        self.report("Checking the merged cluster")
        nodes_before, instances_before = self.before
        nodes = {row[0] for row in await self._luxi("query_nodes", None,
                                                    ["name"])}
        instances = {}
        for name, pnode, running in await self._luxi(
                "query_instances", None, ["name", "pnode", "oper_state"]):
            instances[name] = (pnode, bool(running))
        problems = []
        if nodes != nodes_before:
            problems.append("nodes before %s, now %s" % (
                ", ".join(sorted(nodes_before)), ", ".join(sorted(nodes))))
        for name in sorted(set(instances_before) | set(instances)):
            was, now = instances_before.get(name), instances.get(name)
            if was != now:
                problems.append("instance %s: before %s, now %s"
                                % (name, _state_text(was), _state_text(now)))
        if problems:
            raise MergeError("the merged cluster differs from the clusters"
                             " before: %s" % "; ".join(problems))
        running = sum(1 for _, up in instances.values() if up)
        self._note("%d node(s), %d instance(s) (%d running), as before"
                   % (len(nodes), len(instances), running))

    async def _forget_backups(self):
        self.report("Removing the backups the switched nodes kept")
        for name, address in self.switched:
            result = await self.caller.call(self.cert, address,
                                            "merge_forget_backup", [])
            if not result.success:
                self._warn("node %s kept its backup (it holds its old"
                           " cluster's certificate): remove %s/%s there: %s"
                           % (name, "/var/lib/ganeti",
                              "cluster-merge.backup", result.fail_msg))


def _state_text(state):
    if state is None:
        return "absent"
    pnode, running = state
    return "%s on %s" % ("running" if running else "stopped", pnode)
