"""One pass of the watcher: look at the cluster, submit the jobs that heal it.

A pass on any node:

1. honours the pause (``gnt-cluster watcher pause``; ``--ignore-pause``
   overrides it);
2. asks this node's daemons whether they answer (:mod:`.probes`) and logs
   the ones that do not;
3. if the master daemon answers on this node's master socket, this node is
   the master and the pass goes on: old jobs are archived, and each node
   group is looked at (its instances by primary node, its nodes), with the
   group's state file (:mod:`.state`):

   * an instance that should run but does not (``ERROR_down``) is started
     (``OP_INSTANCE_STARTUP``), at most :data:`~.state.MAXTRIES` times;
     then the watcher gives up, says so in its log and in ``gnt-instance
     info``, until the instance runs again or the record expires;
   * an instance whose guest powered itself off while it should run
     (``USER_down`` with admin state ``up``) is recorded as shut down by its
     user: ``OP_INSTANCE_SHUTDOWN`` with ``admin_state_source=user``;
   * an instance that should not run but whose domain the hypervisor kept
     after the guest powered itself off (``oper_hvstate`` ``shutdown``) has
     that domain cleaned up: ``OP_INSTANCE_SHUTDOWN`` with
     ``admin_state_source=user`` and ``no_remember`` (checked again under
     the instance lock; the configuration is left as it is);
   * the disks of instances with a node that rebooted since the last pass
     (its boot id changed) and whose disks should be active are activated
     again (``OP_INSTANCE_ACTIVATE_DISKS``);
   * the group's disks are verified (``OP_GROUP_VERIFY_DISKS``, at low
     priority, as ``gnt-cluster verify-disks`` does; unless told not to):
     the disks of the instances it finds inactive are activated, except
     for instances in a helpless state, with an offline node, busy, or
     already handled in this pass;

   the pass then waits (at most ``job_wait`` seconds) for its jobs and
   logs how they ended, and auto-repair (:mod:`ganeti.watcher.autorepair`,
   docs/autorepair.rst) makes its pass, when the watcher is given one.

Every job carries the reason ``gnt:watcher``.  An instance named by an
unfinished job, on a node named by one, or whose lock is held or waited
for, is left alone in this pass; the logical units check the instance's
state again under its lock anyway.
"""

import os
import time

import attr
from twisted.internet import defer, task
from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti import luxi
from ganeti import opcodes
from ganeti import qlang
from ganeti.query import base as query_base
from ganeti.watcher import pause as wpause
from ganeti.watcher import state as wstate

__all__ = ["Watcher", "PassReport", "Action", "busy_from_jobs",
           "DEFAULT_JOB_AGE", "DEFAULT_JOB_WAIT", "HELPLESS_STATES"]

log = Logger(namespace="ganeti.watcher")

#: Jobs older than this many seconds are archived (Ganeti's: 6 hours).
DEFAULT_JOB_AGE = 6 * 3600
#: Seconds a pass waits for the jobs it submitted.
DEFAULT_JOB_WAIT = 300
#: Seconds between two looks at the jobs a pass waits for.
JOB_POLL_INTERVAL = 1.0

#: Seconds a pass waits for the disk verification of a group.
VERIFY_DISKS_WAIT = 300

#: Statuses the watcher can do nothing about (the primary node is away).
HELPLESS_STATES = frozenset([constants.INSTST_NODEDOWN,
                             constants.INSTST_NODEOFFLINE])
#: The hypervisor state of a domain kept after its guest powered itself
#: off; it holds the instance's memory until it is cleaned up.  (What a
#: crash leaves holds nothing; the next start cleans it up.)
KEPT_SHUTDOWN = "shutdown"

INSTANCE_FIELDS = ["name", "uuid", "status", "admin_state",
                   "admin_state_source", "disks_active", "pnode", "snodes",
                   "oper_hvstate"]
NODE_FIELDS = ["name", "uuid", "bootid", "offline"]

RESTART = "restart"
USER_SHUTDOWN = "user-shutdown"
CLEANUP = "cleanup"
ACTIVATE_DISKS = "activate-disks"

_UNFINISHED = sorted(opcodes.JOBS_PENDING | {opcodes.JOB_STATUS_RUNNING})


@attr.s
class Instance(object):
    name = attr.ib()
    uuid = attr.ib(default=None)
    status = attr.ib(default=None)
    admin_state = attr.ib(default=None)
    admin_state_source = attr.ib(default=None)
    disks_active = attr.ib(default=False)
    pnode = attr.ib(default=None)
    snodes = attr.ib(default=attr.Factory(list))
    hvstate = attr.ib(default=None)

    @property
    def nodes(self):
        return [n for n in [self.pnode] + list(self.snodes or []) if n]


@attr.s
class Node(object):
    name = attr.ib()
    uuid = attr.ib(default=None)
    bootid = attr.ib(default=None)
    offline = attr.ib(default=False)


@attr.s
class Action(object):
    """One job the pass submitted (``job_id`` None if it was refused)."""
    kind = attr.ib()
    instance = attr.ib()
    group = attr.ib()
    job_id = attr.ib(default=None)
    error = attr.ib(default=None)
    status = attr.ib(default=None)     # how the job ended, if waited for
    result = attr.ib(default=None)


@attr.s
class PassReport(object):
    """What a pass did: for the log, the tests and the caller."""
    paused_until = attr.ib(default=None)
    master = attr.ib(default=False)
    archived = attr.ib(default=None)      # (archived, left) or None
    autorepair = attr.ib(default=None)    # {state: instance count} or None
    actions = attr.ib(default=attr.Factory(list))
    messages = attr.ib(default=attr.Factory(list))   # (level, text)
    failed = attr.ib(default=False)
    skipped = attr.ib(default=False)      # another watcher was at work

    def texts(self, level=None):
        return [t for (lvl, t) in self.messages
                if level is None or lvl == level]

    def jobs(self, kind=None):
        return [a for a in self.actions if kind is None or a.kind == kind]


def _rows(result, fields):
    """Query answer -> list of {field: value}."""
    return query_base.rows_to_dicts(fields,
                                    (result or {}).get("data") or [])


def _op_targets(op, instances, instance_uuids, nodes):
    """Add the instances and nodes an opcode names to the sets."""
    if not isinstance(op, dict):
        return
    for key in ("instance_name", "instance_uuid"):
        value = op.get(key)
        if isinstance(value, str) and value:
            (instances if key == "instance_name" else instance_uuids).add(
                value)
    listed = op.get("instances")
    if isinstance(listed, list):
        for item in listed:
            if isinstance(item, str):
                instances.add(item)
            elif isinstance(item, dict):
                _op_targets(item, instances, instance_uuids, nodes)
    for key in ("node_name", "node_uuid", "pnode", "snode",
                "target_node", "remote_node"):
        value = op.get(key)
        if isinstance(value, str) and value:
            nodes.add(value)


def busy_from_jobs(job_rows):
    """(instance names, instance uuids, node names/uuids) that unfinished
    jobs (rows with ``ops``) name."""
    instances, uuids, nodes = set(), set(), set()
    for row in job_rows:
        for op in row.get("ops") or []:
            _op_targets(op, instances, uuids, nodes)
    return instances, uuids, nodes


@attr.s
class Busy(object):
    """What other jobs are working on right now."""
    instances = attr.ib(default=attr.Factory(set))   # names
    uuids = attr.ib(default=attr.Factory(set))       # instance uuids
    nodes = attr.ib(default=attr.Factory(set))       # names or uuids

    def why(self, inst, node_uuids=()):
        """Why ``inst`` is busy (a phrase), or None."""
        if inst.name in self.instances or inst.uuid in self.uuids:
            return "an unfinished job or a lock holds it"
        for node in list(inst.nodes) + list(node_uuids):
            if node in self.nodes:
                return "an unfinished job works on its node %s" % node
        return None


class Watcher(object):
    """The pass logic.  ``client`` is a luxi client whose methods return
    Deferreds (:class:`ganeti.luxi.LuxiClient`); ``clock`` an IReactorTime;
    ``probes`` an object with ``check(master)`` returning (a Deferred of) a
    list of ``(daemon, problem or None)`` (None: no probing);
    ``autorepair(client)`` makes an auto-repair pass on the master and
    returns (a Deferred of) its decisions (objects with a ``state``)."""

    def __init__(self, client, paths, clock, probes=None,
                 job_age=DEFAULT_JOB_AGE, job_wait=DEFAULT_JOB_WAIT,
                 ignore_pause=False, time_ns=None, autorepair=None,
                 verify_disks=True):
        self.client = client
        self.verify_disks = verify_disks
        self.autorepair = autorepair
        self.paths = paths
        self.clock = clock
        self.probes = probes
        self.job_age = job_age
        self.job_wait = job_wait
        self.ignore_pause = ignore_pause
        self._time_ns = time_ns

    # -- helpers ----------------------------------------------------------------

    def _now(self):
        return self.clock.seconds()

    def _reason(self, text):
        ns = (self._time_ns() if self._time_ns is not None
              else int(self._now() * 1e9))
        return [[opcodes.REASON_SRC_WATCHER, text, ns]]

    def _say(self, report, level, fmt, **kw):
        text = fmt.format(**kw)
        report.messages.append((level, text))
        emit = {"debug": log.debug, "info": log.info, "warn": log.warn,
                "error": log.error}[level]
        emit("{text}", text=text)

    # -- the pass ---------------------------------------------------------------

    def run_pass(self):
        """Deferred of a :class:`PassReport`; never fails (problems are in
        the report, ``failed`` set when the pass could not be done)."""
        return defer.Deferred.fromCoroutine(self._run_pass())

    async def _run_pass(self):
        report = PassReport()
        until, problem = wpause.read_pause(wpause.pause_path(self.paths),
                                           self._now())
        if problem:
            self._say(report, "warn", "Watcher pause file: {p}", p=problem)
        if until is not None:
            report.paused_until = until
            if not self.ignore_pause:
                self._say(report, "info", "The watcher is paused until {t}"
                          " ({until}); nothing done", until=until,
                          t=time.strftime("%Y-%m-%d %H:%M:%S",
                                          time.localtime(until)))
                return report
            self._say(report, "info", "The watcher is paused until {until},"
                      " but told to ignore the pause", until=until)
        probing = None
        try:
            master = await self._master_check(report)
            # the daemons answer (or time out) while the pass goes on
            probing = defer.Deferred.fromCoroutine(
                self._probe(report, master))
            if master:
                await self._master_pass(report)
        except Exception as err:   # one bad pass must not stop the daemon
            report.failed = True
            self._say(report, "error", "Watcher pass failed: {err}",
                      err=_describe(err))
        if probing is not None:
            await probing
        return report

    async def _master_check(self, report):
        try:
            (master,) = await self.client.query_config_values(
                ["master_node"])
        except luxi.NoMasterError as err:
            if os.path.exists(self.paths.master_socket):
                # the master node, or one whose master daemon crashed:
                # nobody else will do the master's part of the pass
                report.failed = True
                self._say(report, "error", "The master daemon does not"
                          " answer ({err}); only this node's checks are"
                          " done", err=err)
            else:
                self._say(report, "debug", "No master daemon on this node;"
                          " node checks only")
            return False
        report.master = True
        self._say(report, "debug", "Master daemon answers (master node"
                  " {m})", m=master)
        return True

    async def _probe(self, report, master):
        if self.probes is None:
            return
        try:
            results = await defer.maybeDeferred(self.probes.check, master)
        except Exception as err:
            self._say(report, "warn", "Checking this node's daemons failed:"
                      " {err}", err=_describe(err))
            return
        for daemon, problem in results:
            if problem:
                self._say(report, "warn", "{d} does not answer: {p}",
                          d=daemon, p=problem)
            else:
                self._say(report, "debug", "{d} answers", d=daemon)

    async def _master_pass(self, report):
        await self._archive(report)
        busy = await self._busy(report)
        groups = _rows(await self.client.query(
            "group", ["name", "uuid"], None), ["name", "uuid"])
        for group in sorted(groups, key=lambda g: g["name"] or ""):
            if not group["uuid"]:
                continue
            await self._group_pass(report, group["uuid"], group["name"],
                                   busy)
        await self._wait_for_jobs(report)
        await self._autorepair(report)

    async def _autorepair(self, report):
        if self.autorepair is None:
            return
        try:
            decisions = await defer.maybeDeferred(self.autorepair,
                                                  self.client)
        except Exception as err:
            self._say(report, "warn", "Auto-repair pass failed: {err}",
                      err=_describe(err))
            return
        counts = {}
        for decision in decisions or ():
            state = getattr(decision, "state", None) or "?"
            counts[state] = counts.get(state, 0) + 1
        report.autorepair = counts
        if set(counts) - {"healthy"}:
            self._say(report, "info", "Auto-repair: {summary}",
                      summary=", ".join("%d %s" % (n, s) for (s, n)
                                        in sorted(counts.items())))

    async def _archive(self, report):
        try:
            archived, left = await self.client.auto_archive_jobs(
                self.job_age)
        except errors.GenericError as err:
            self._say(report, "warn", "Archiving old jobs failed: {err}",
                      err=_describe(err))
            return
        report.archived = (archived, left)
        if archived:
            self._say(report, "info", "Archived {n} job(s) older than {age}s,"
                      " {left} left", n=archived, age=self.job_age,
                      left=left)

    async def _busy(self, report):
        job_fields = ["id", "status", "ops"]
        qfilter = [qlang.OP_OR] + [[qlang.OP_EQUAL, "status", s]
                                   for s in _UNFINISHED]
        jobs = _rows(await self.client.query("job", job_fields, qfilter),
                     job_fields)
        names, uuids, nodes = busy_from_jobs(jobs)
        locks = _rows(await self.client.query(
            "lock", ["name", "mode", "pending"], None),
            ["name", "mode", "pending"])
        prefix = "instance/"
        for lock in locks:
            name = lock["name"] or ""
            if name.startswith(prefix) and (lock["mode"] or lock["pending"]):
                # instances are locked by UUID; a name is taken too
                key = name[len(prefix):]
                uuids.add(key)
                names.add(key)
        if jobs:
            self._say(report, "debug", "{n} unfinished job(s)", n=len(jobs))
        return Busy(names, uuids, nodes)

    # -- one node group -----------------------------------------------------------

    async def _query_fresh(self, what, fields, qfilter):
        """Query with live data the nodes give now (a crash or a reboot of
        the last seconds counts), not the master's cached data; a master
        without QueryFresh is asked with Query."""
        try:
            return await self.client.query_fresh(what, fields, qfilter)
        except errors.LuxiError as err:
            if not luxi.is_unsupported_method(err):
                raise
            return await self.client.query(what, fields, qfilter)

    async def _group_pass(self, report, group_uuid, group_name, busy):
        path = wstate.state_path(self.paths, group_uuid)
        notes = wstate.WatcherState.load(path)
        if notes.problem:
            self._say(report, "error", "Watcher state file {path} is not"
                      " usable ({p}); it is replaced by a fresh state (restart"
                      " counters start again)", path=path, p=notes.problem)
        instances = [Instance(
            name=r["name"], uuid=r["uuid"], status=r["status"],
            admin_state=r["admin_state"],
            admin_state_source=r["admin_state_source"],
            disks_active=bool(r["disks_active"]), pnode=r["pnode"],
            snodes=r["snodes"] or [], hvstate=r["oper_hvstate"])
            for r in _rows(await self._query_fresh(
                "instance", INSTANCE_FIELDS,
                [qlang.OP_EQUAL, "pnode.group.uuid", group_uuid]),
                INSTANCE_FIELDS) if r["name"]]
        nodes = [Node(name=r["name"], uuid=r["uuid"], bootid=r["bootid"],
                      offline=bool(r["offline"]))
                 for r in _rows(await self._query_fresh(
                     "node", NODE_FIELDS,
                     [qlang.OP_EQUAL, "group.uuid", group_uuid]),
                     NODE_FIELDS) if r["name"]]
        now = self._now()
        for name in notes.maintain([i.name for i in instances], now):
            self._say(report, "debug", "Forgot the watcher's record of"
                      " {name}", name=name)
        notes.keep_nodes([n.name for n in nodes])

        jobs = []      # (Action, opcode)
        started = set()
        for inst in sorted(instances, key=lambda i: i.name):
            job = self._check_instance(report, notes, inst, busy, group_name,
                                       now)
            if job is not None:
                jobs.append(job)
                if job[0].kind == RESTART:
                    started.add(inst.name)
        jobs.extend(self._check_reboots(report, notes, instances, nodes,
                                        started, busy, group_name))
        await self._submit(report, notes, jobs, now)
        if self.verify_disks:
            handled = set(action.instance for action, _ in jobs)
            jobs = await self._verify_disks(report, group_name, instances,
                                            nodes, handled, busy)
            await self._submit(report, notes, jobs, now)
        try:
            notes.save(path)
        except OSError as err:
            self._say(report, "error", "Cannot write the watcher state file"
                      " {path}: {err}", path=path,
                      err=err.strerror or err)

    def _check_instance(self, report, notes, inst, busy, group, now):
        """The (Action, opcode) ``inst`` needs, or None."""
        status = inst.status
        wants_up = inst.admin_state == constants.ADMINST_UP
        needs_restart = status == constants.INSTST_ERRORDOWN
        needs_user_record = (status == constants.INSTST_USERDOWN
                             and wants_up)
        needs_cleanup = (inst.admin_state == constants.ADMINST_DOWN
                         and inst.hvstate == KEPT_SHUTDOWN
                         and status not in HELPLESS_STATES)
        if not (needs_restart or needs_user_record or needs_cleanup):
            if status not in HELPLESS_STATES:
                self._reset(report, notes, inst)
            return None
        why = busy.why(inst)
        if why:
            self._say(report, "info", "Leaving instance {name} ({status})"
                      " alone in this pass: {why}", name=inst.name,
                      status=status, why=why)
            return None
        if needs_restart:
            return self._restart(report, notes, inst, group, now)
        kind = USER_SHUTDOWN if needs_user_record else CLEANUP
        tries = notes.cleanup_count(inst.name)
        if tries >= wstate.MAXTRIES:
            self._say(report, "warn", "Not cleaning up instance {name}"
                      " ({status}, domain {hv}): {n} attempts failed",
                      name=inst.name, status=status, hv=inst.hvstate,
                      n=tries)
            return None
        if kind == USER_SHUTDOWN:
            self._say(report, "info", "Instance {name} was shut down by its"
                      " user; recording it as down (attempt #{n})",
                      name=inst.name, n=tries + 1)
            op = {"OP_ID": "OP_INSTANCE_SHUTDOWN",
                  "instance_name": inst.name, "instance_uuid": inst.uuid,
                  "admin_state_source": constants.USER_SOURCE,
                  "reason": self._reason("Recording the user shutdown of"
                                         " instance %s" % inst.name)}
        else:
            self._say(report, "info", "Instance {name} is {status} but its"
                      " domain is kept ({hv}); cleaning it up (attempt #{n})",
                      name=inst.name, status=status, hv=inst.hvstate,
                      n=tries + 1)
            op = {"OP_ID": "OP_INSTANCE_SHUTDOWN",
                  "instance_name": inst.name, "instance_uuid": inst.uuid,
                  "admin_state_source": constants.USER_SOURCE,
                  "no_remember": True,
                  "reason": self._reason("Cleaning up the kept domain of"
                                         " instance %s" % inst.name)}
        return Action(kind, inst.name, group), _strip(op)

    def _restart(self, report, notes, inst, group, now):
        tries = notes.restart_count(inst.name)
        if notes.gave_up(inst.name) is not None:
            self._say(report, "warn", "Not restarting instance {name}: gave"
                      " up after {n} attempts", name=inst.name, n=tries)
            return None
        if tries >= wstate.MAXTRIES:
            notes.record_give_up(inst.name, now)
            self._say(report, "error", "Could not restart instance {name}"
                      " after {n} attempts, giving up", name=inst.name,
                      n=tries)
            return None
        self._say(report, "info", "Restarting instance {name} (attempt"
                  " #{n})", name=inst.name, n=tries + 1)
        op = {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": inst.name,
              "instance_uuid": inst.uuid, "force": False,
              "reason": self._reason("Restarting instance %s" % inst.name)}
        return Action(RESTART, inst.name, group), _strip(op)

    def _reset(self, report, notes, inst):
        record = notes.instance_record(inst.name)
        if not record:
            return
        notes.forget(inst.name)
        if record.get(wstate.KEY_RESTART_COUNT) and \
                inst.status == constants.INSTST_RUNNING:
            self._say(report, "info", "Instance {name} runs again; its"
                      " restart counter is reset", name=inst.name)

    def _check_reboots(self, report, notes, instances, nodes, started, busy,
                       group):
        """Disk activations for the instances of nodes whose boot id
        changed; a node's new boot id is remembered once all of them are
        submitted (a busy instance makes the next pass try again)."""
        jobs = []
        by_node = {}
        for inst in instances:
            for node in inst.nodes:
                by_node.setdefault(node, []).append(inst)
        queued = set()
        for node in sorted(nodes, key=lambda n: n.name):
            if node.offline:
                continue
            if not node.bootid:
                self._say(report, "debug", "Node {n} reports no boot id",
                          n=node.name)
                continue
            old = notes.boot_id(node.name)
            if old == node.bootid:
                continue
            complete = True
            for inst in sorted(by_node.get(node.name, []),
                               key=lambda i: i.name):
                if (not inst.disks_active or inst.name in started
                        or inst.name in queued
                        or inst.status in HELPLESS_STATES):
                    continue
                why = busy.why(inst, [node.uuid] if node.uuid else [])
                if why:
                    self._say(report, "info", "Not activating the disks of"
                              " {name} yet: {why}", name=inst.name, why=why)
                    complete = False
                    continue
                self._say(report, "info", "Node {node} rebooted; activating"
                          " the disks of instance {name}", node=node.name,
                          name=inst.name)
                queued.add(inst.name)
                op = {"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS",
                      "instance_name": inst.name,
                      "instance_uuid": inst.uuid,
                      "reason": self._reason("Activating the disks of"
                                             " instance %s" % inst.name)}
                jobs.append((Action(ACTIVATE_DISKS, inst.name, group),
                             _strip(op)))
            if complete:
                notes.set_boot_id(node.name, node.bootid)
                if old is not None:
                    self._say(report, "info", "Node {node} rebooted (boot id"
                              " {old} -> {new})", node=node.name, old=old,
                              new=node.bootid)
        return jobs

    async def _verify_disks(self, report, group, instances, nodes, handled,
                            busy):
        """Run OP_GROUP_VERIFY_DISKS for the group and wait for it (at most
        :data:`VERIFY_DISKS_WAIT` seconds); the (Action, opcode) pairs
        activating the disks it found inactive."""
        op = {"OP_ID": "OP_GROUP_VERIFY_DISKS", "group_name": group,
              "priority": opcodes.OP_PRIO_LOW,
              "reason": self._reason("Verifying the disks of group %s"
                                     % group)}
        try:
            ((ok, job_id),) = await self.client.submit_many_jobs([[op]])
        except errors.GenericError as err:
            ok, job_id = False, _describe(err)
        if not ok:
            self._say(report, "warn", "Submitting the disk verification of"
                      " group {g} failed: {err}", g=group, err=job_id)
            return []
        status, result = await self._wait_for_job(job_id, VERIFY_DISKS_WAIT)
        if status is None:
            self._say(report, "info", "Not waiting longer for the disk"
                      " verification of group {g} (job {job})", g=group,
                      job=job_id)
            return []
        if status != opcodes.JOB_STATUS_SUCCESS:
            self._say(report, "warn", "The disk verification of group {g}"
                      " (job {job}) ended {status}: {why}", g=group,
                      job=job_id, status=status, why=_job_error(result))
            return []
        try:
            await self.client.archive_job(job_id)
        except errors.GenericError as err:
            self._say(report, "debug", "Archiving job {job} failed: {err}",
                      job=job_id, err=_describe(err))
        try:
            ((bad_nodes, inactive, _),) = result
            inactive = [str(name) for name in inactive]
        except (TypeError, ValueError):
            self._say(report, "warn", "The disk verification of group {g}"
                      " gave an answer of another shape: {r!r}", g=group,
                      r=result)
            return []
        for node in sorted(bad_nodes or {}):
            self._say(report, "warn", "Verifying disks: node {node} could"
                      " not be asked: {err}", node=node, err=bad_nodes[node])
        if not inactive:
            self._say(report, "debug", "Group {g}: every disk is as it"
                      " should be", g=group)
            return []
        by_name = {inst.name: inst for inst in instances}
        offline = set(n.name for n in nodes if n.offline)
        jobs = []
        for name in sorted(inactive):
            inst = by_name.get(name)
            if inst is None or name in handled:
                continue
            if inst.status in HELPLESS_STATES or \
                    offline.intersection(inst.nodes):
                self._say(report, "info", "Not activating the disks of"
                          " {name}: it is {status} or has an offline node",
                          name=name, status=inst.status)
                continue
            why = busy.why(inst)
            if why:
                self._say(report, "info", "Not activating the disks of"
                          " {name} yet: {why}", name=name, why=why)
                continue
            self._say(report, "info", "Verify-disks found inactive disks;"
                      " activating the disks of instance {name}", name=name)
            op = {"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS",
                  "instance_name": inst.name, "instance_uuid": inst.uuid,
                  "reason": self._reason("Activating the disks of"
                                         " instance %s" % inst.name)}
            jobs.append((Action(ACTIVATE_DISKS, inst.name, group),
                         _strip(op)))
        return jobs

    async def _wait_for_job(self, job_id, limit):
        """(status, opresult) of a job once it ended; (None, None) if it
        did not end within ``limit`` seconds."""
        deadline = self._now() + limit
        while True:
            rows = await self.client.query_jobs([job_id],
                                                ["status", "opresult"])
            if not rows or rows[0] is None:
                return "unknown", None
            status, result = rows[0]
            if status in opcodes.JOBS_FINALIZED:
                return status, result
            if self._now() >= deadline:
                return None, None
            await task.deferLater(self.clock, JOB_POLL_INTERVAL,
                                  lambda: None)

    async def _submit(self, report, notes, jobs, now):
        if not jobs:
            return
        try:
            results = await self.client.submit_many_jobs(
                [[op] for (_, op) in jobs])
        except errors.GenericError as err:
            results = [[False, _describe(err)]] * len(jobs)
        for (action, _), result in zip(jobs, results):
            ok, value = (result if isinstance(result, (list, tuple))
                         and len(result) == 2 else (False, result))
            report.actions.append(action)
            if not ok:
                action.error = str(value)
                self._say(report, "error", "Submitting the {kind} job of"
                          " instance {name} failed: {err}",
                          kind=action.kind, name=action.instance,
                          err=value)
                continue
            action.job_id = value
            if action.kind == RESTART:
                notes.record_restart(action.instance, now)
            elif action.kind in (USER_SHUTDOWN, CLEANUP):
                notes.record_cleanup(action.instance, now)
            self._say(report, "debug", "Job {job}: {kind} of instance"
                      " {name}", job=value, kind=action.kind,
                      name=action.instance)

    async def _wait_for_jobs(self, report):
        waiting = {a.job_id: a for a in report.actions
                   if a.job_id is not None}
        if not waiting or self.job_wait <= 0:
            return
        deadline = self._now() + self.job_wait
        while waiting:
            ids = sorted(waiting)
            rows = await self.client.query_jobs(ids, ["status", "opresult"])
            for job_id, row in zip(ids, rows):
                if row is None:
                    waiting.pop(job_id).status = "unknown"
                    continue
                status, result = row
                if status not in opcodes.JOBS_FINALIZED:
                    continue
                action = waiting.pop(job_id)
                action.status = status
                action.result = result
                if status == opcodes.JOB_STATUS_SUCCESS:
                    self._say(report, "info", "Job {job} ({kind} of {name})"
                              " succeeded", job=job_id, kind=action.kind,
                              name=action.instance)
                else:
                    self._say(report, "warn", "Job {job} ({kind} of {name})"
                              " ended {status}: {why}", job=job_id,
                              kind=action.kind, name=action.instance,
                              status=status, why=_job_error(result))
            if not waiting:
                break
            if self._now() >= deadline:
                self._say(report, "info", "Not waiting longer for job(s)"
                          " {ids}; they go on without the watcher",
                          ids=", ".join(str(i) for i in sorted(waiting)))
                break
            await task.deferLater(self.clock, JOB_POLL_INTERVAL,
                                  lambda: None)


def _strip(op):
    """An opcode dict without the parameters that are None."""
    return {k: v for k, v in op.items() if v is not None}


def _job_error(result):
    """The error message of a failed job's ``opresult``."""
    for item in result or []:
        if isinstance(item, (list, tuple)) and len(item) == 2 and \
                isinstance(item[1], (list, tuple)) and item[1]:
            return str(item[1][0])
        if item:
            return str(item)
    return "no result"


def _describe(err):
    return "%s: %s" % (type(err).__name__, err)
