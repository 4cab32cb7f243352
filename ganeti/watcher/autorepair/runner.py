"""One auto-repair pass against a running master, over luxi.

The pass reads the cluster (instances, nodes, groups, cluster tags and
the jobs its pending tags name), decides per instance (``engine``) and
applies the decisions as ordinary jobs: a repair step is one job, and the
tag changes of an instance (the new pending tag naming that job, results)
are another, submitted right after it.  An instance with an unfinished
job that is not one of its repair's own is left alone for this pass, so
auto-repair never races a person or another tool; and since each step is
computed from the cluster as it is, a step that ran but was not recorded
is not repeated once its job is over.
"""

import time
import uuid

import attrs

from twisted.internet import task
from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti import luxi
from ganeti.jqueue import model as JQ
from ganeti.query import base as query_base
from ganeti.watcher.autorepair import detect, engine, tags as T

COMMENT = "automated repairs by harep"


class GroupBudget:
    """What a node group allows: ``max_parallel`` repairs running at once
    (0: no limit), and new ones only while at least ``min_healthy`` of
    its ``total`` nodes are ``online``."""

    def __init__(self, max_parallel, min_healthy, online=0, total=0):
        self.max_parallel = max_parallel
        self.min_healthy = min_healthy
        self.online = online
        self.total = total

    def too_few_healthy(self):
        return self.total > 0 and self.online < self.min_healthy * self.total

    def full(self, running):
        return bool(self.max_parallel) and running >= self.max_parallel


def _group_budget(ndparams):
    nd = ndparams if isinstance(ndparams, dict) else {}

    def get(key, kind):
        value = nd.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            value = constants.NDC_DEFAULTS[key]
        return value
    return GroupBudget(get(constants.ND_REPAIR_MAX_PARALLEL, int),
                       get(constants.ND_REPAIR_MIN_HEALTHY, (int, float)))

@attrs.frozen
class Pass:
    """One pass's decisions (``decisions``, one per instance of
    ``insts``), those to apply now (``todo``: (instance, decision)) and
    the passed suspensions of groups and the cluster (``expired``)."""
    insts: list
    decisions: list
    todo: list
    expired: frozenset


_INSTANCE_FIELDS = ["name", "disk_template", "pnode", "snodes",
                    "admin_state", "tags", "pnode.group.uuid"]


def _rows(answer, fields):
    """A luxi Query answer as rows of plain values, in ``fields`` order."""
    return [[row[f] for f in fields] for row in
            query_base.rows_to_dicts(fields, answer["data"])]


def _nores(opresult):
    """Whether a failed job's opcode results show a lack of resources."""
    for res in opresult or ():
        err = errors.decode_exception(res)
        if err is not None and len(err.args) > 1 and err.args[1] in (
                errors.ECODE_NORES, errors.ECODE_TEMP_NORES):
            return True
    return False


def _end(ts):
    if isinstance(ts, (list, tuple)) and len(ts) == 2:
        return ts[0] + ts[1] / 1e6
    return None


class AutoRepair:
    """Auto-repair passes through the luxi client ``client`` (anything
    with ``call(method, *args)`` returning a Deferred)."""

    log = Logger()

    def __init__(self, client, clock, dry_run=False, job_delay=0.0,
                 reason_source="gnt:watcher", iallocator=None,
                 retry_interval=300.0, poll=0.5, wallclock=time.time,
                 max_parallel=None, wait_tags=True, unconfirmed=None,
                 new_id=lambda: str(uuid.uuid4())):
        self.client = client
        self.clock = clock
        self.dry_run = dry_run
        self.job_delay = job_delay
        self.reason_source = reason_source
        self.iallocator = iallocator
        self.retry_interval = retry_interval
        self.poll = poll
        self.wallclock = wallclock
        #: repairs with unfinished jobs at once per node group (0: no
        #: limit); a new repair waits for a later pass beyond it.  None:
        #: each group's repair_max_parallel node parameter
        self.max_parallel = max_parallel
        #: whether a pass waits for its tag jobs (which wait for the
        #: repairs they record); if not, they are kept in ``unconfirmed``
        #: ({job id: (kind, name)}, shared by the passes of a loop) and
        #: checked at the start of the next pass
        self.wait_tags = wait_tags
        self.unconfirmed = {} if unconfirmed is None else unconfirmed
        #: names a new repair (the id in its tags)
        self.new_id = new_id
        self.last_repair_job = None

    async def _call(self, method, *args):
        return await self.client.call(method, *args)

    async def snapshot(self):
        """(instances, nodes, cluster tags, iallocator, unfinished job
        summaries, {group uuid: GroupBudget}) of the cluster now."""
        c = self._call
        info = await c(luxi.REQ_QUERY_CLUSTER_INFO)
        cluster_tags = list(info.get("tags") or [])
        ialloc = self.iallocator or info.get("default_iallocator") or "hail"
        fields = ["uuid", "tags", "ndparams"]
        groups = {}
        budgets = {}
        for u, t, ndparams in _rows(await c(luxi.REQ_QUERY, "group", fields,
                                            None), fields):
            groups[u] = list(t or [])
            budgets[u] = _group_budget(ndparams)
            if self.max_parallel is not None:
                budgets[u].max_parallel = self.max_parallel
        nodes = {}
        fields = ["name", "offline", "drained", "powered", "ndparams",
                  "group.uuid"]
        for name, off, drained, powered, ndparams, guuid in _rows(await c(
                luxi.REQ_QUERY, "node", fields, None), fields):
            oob = (ndparams or {}).get(constants.ND_OOB_PROGRAM) \
                if isinstance(ndparams, dict) else None
            nodes[name] = detect.Node(name, bool(off), bool(drained),
                                      detect.is_fenced(off, powered, oob))
            if guuid in budgets:
                budgets[guuid].total += 1
                budgets[guuid].online += not off
        insts = []
        for (name, dt, pnode, snodes, admin, tags, guuid) in _rows(await c(
                luxi.REQ_QUERY, "instance", _INSTANCE_FIELDS, None),
                _INSTANCE_FIELDS):
            insts.append(detect.Instance(
                name, dt, pnode, tuple(snodes or ()), admin == "up",
                tuple(tags or ()), tuple(groups.get(guuid, ())), guuid))
        busy = []
        for row in await c(luxi.REQ_QUERY_JOBS, None,
                           ["id", "status", "summary"]):
            if row is not None and row[1] not in JQ.FINALIZED:
                busy.append((row[0], row[2] or []))
        return insts, nodes, cluster_tags, ialloc, busy, budgets

    async def _jobs(self, ids):
        if not ids:
            return {}
        ids = sorted(ids)
        rows = await self._call(luxi.REQ_QUERY_JOBS, ids,
                                ["id", "status", "opresult", "end_ts"])
        res = {}
        for jid, row in zip(ids, rows):
            if row is None:
                continue  # archived: it is over
            _, status, opresult, end = row
            res[jid] = engine.Job(status, status == JQ.STATUS_ERROR
                                  and _nores(opresult), _end(end))
        return res

    async def run_once(self):
        """One pass; returns the decisions (applied unless ``dry_run``)."""
        p = await self.decide_pass()
        tag_jobs = {}
        if not self.dry_run:
            for _, d in p.todo:
                tag_job = await self.apply(d)
                if tag_job is not None:
                    tag_jobs[tag_job] = ("instance", d.instance)
        # the repairs run in parallel (within the budget); their tag jobs
        # end with them
        if self.wait_tags:
            await self._wait_tags(tag_jobs)
        else:
            self.unconfirmed.update(tag_jobs)
        if p.expired and not self.dry_run:
            await self.remove_expired(p.expired)
        return p.decisions

    async def decide_pass(self):
        """Read the cluster and decide every instance, nothing applied:
        a Pass whose ``todo`` holds the decisions to apply now (those
        left alone, for a foreign job or the group's budget, are only
        logged)."""
        await self._check_unconfirmed()
        insts, nodes, cluster_tags, ialloc, busy, budgets = \
            await self.snapshot()
        wanted = set()
        for inst in insts:
            for p in T.instance_tags(inst.tags)[0]:
                wanted.update(p.jobs)
        jobs = await self._jobs(wanted)
        now = self.wallclock()
        decisions = []
        for inst in insts:
            d = engine.decide(inst, nodes, cluster_tags, jobs, now,
                              self.new_id, ialloc, self.retry_interval)
            decisions.append(d)
        running = self._running_repairs(insts, jobs)
        expired = set()
        todo = []
        for inst, d in zip(insts, decisions):
            for bad in d.malformed:
                self.log.warn("Instance {inst}: ignoring malformed"
                              " auto-repair tag {tag!r}: {reason}",
                              inst=inst.name, tag=bad.tag, reason=bad.reason)
            expired.update(d.expired)
            other = self._foreign_jobs(inst, d, busy)
            if other and (d.step is not None or d.add_tags or
                          d.remove_tags):
                self.log.info("Instance {inst}: {state}; left alone while"
                              " job {jobs} runs", inst=inst.name,
                              state=d.state, jobs=other)
                continue
            budget = budgets.get(inst.group) or _group_budget(None)
            if d.step is not None and d.replaces is None and \
                    budget.too_few_healthy():
                # a new repair in a group that lost too many nodes: the
                # survivors are not loaded further; a person decides
                self.log.warn("Instance {inst}: {state}; waits, only {n} of"
                              " the {total} nodes of its node group are"
                              " online (repair_min_healthy {share})",
                              inst=inst.name, state=d.state, n=budget.online,
                              total=budget.total, share=budget.min_healthy)
                continue
            if d.step is not None and d.replaces is None and \
                    budget.full(running.get(inst.group, 0)):
                # a new repair, over the group's budget: a later pass
                self.log.info("Instance {inst}: {state}; waits, {n} repairs"
                              " already run in its node group"
                              " (repair_max_parallel {max})",
                              inst=inst.name, state=d.state,
                              n=running.get(inst.group, 0),
                              max=budget.max_parallel)
                continue
            if d.step is not None and d.replaces is None:
                running[inst.group] = running.get(inst.group, 0) + 1
            if d.state != engine.HEALTHY or d.add_tags or d.remove_tags:
                self.log.info("Instance {inst}: {state}: {msg}",
                              inst=inst.name, state=d.state, msg=d.message)
            if d.step is not None or d.add_tags or d.remove_tags:
                todo.append((inst, d))
        return Pass(insts, decisions, todo, frozenset(expired))

    @staticmethod
    def _running_repairs(insts, jobs):
        """Per node group, the pending repairs with an unfinished job."""
        running = {}
        for inst in insts:
            pending = T.instance_tags(inst.tags)[0]
            if any(jobs.get(j) is not None and
                   jobs[j].status not in JQ.FINALIZED
                   for p in pending for j in p.jobs):
                running[inst.group] = running.get(inst.group, 0) + 1
        return running

    @staticmethod
    def _foreign_jobs(inst, d, busy):
        own = set(d.pending.jobs) if d.pending is not None else set()
        needle = "(%s)" % inst.name
        return [jid for jid, summaries in busy if jid not in own and
                any(needle in s for s in summaries)]

    def _reason(self):
        return [[self.reason_source, "auto-repair",
                 int(self.wallclock() * 1e9)]]

    def _ops(self, ops):
        res = []
        for op in ops:
            op = dict(op)
            op.setdefault("comment", COMMENT)
            op["reason"] = self._reason()
            res.append(op)
        return res

    async def apply(self, d):
        """Submit the decision's repair job and then its tag job; the id
        of the tag job (None if there is none), not waited for: it waits
        for the instance's lock, so for the repair job.  The repair job's
        id, if any, is in ``last_repair_job`` afterwards."""
        self.last_repair_job = None
        add = list(d.add_tags)
        remove = list(d.remove_tags)
        if d.step is not None:
            ops = list(d.step.ops)
            if self.job_delay > 0:
                ops.insert(0, {"OP_ID": "OP_TEST_DELAY",
                               "duration": float(self.job_delay)})
            jid = await self._call(luxi.REQ_SUBMIT_JOB, self._ops(ops))
            self.last_repair_job = int(jid)
            self.log.info("Instance {inst}: submitted job {job} ({kind}:"
                          " {why})", inst=d.instance, job=jid,
                          kind=d.step.kind, why=d.step.why)
            add.append(d.pending.with_jobs([int(jid)]).tag)
            if d.replaces:
                remove.append(d.replaces)
        if add or remove:
            return await self._submit_tags("instance", d.instance, add,
                                           remove)
        return None

    async def _submit_tags(self, kind, name, add, remove):
        ops = []
        if remove:
            ops.append({"OP_ID": "OP_TAGS_DEL", "kind": kind, "name": name,
                        "tags": list(remove)})
        if add:
            ops.append({"OP_ID": "OP_TAGS_SET", "kind": kind, "name": name,
                        "tags": list(add)})
        return await self._call(luxi.REQ_SUBMIT_JOB, self._ops(ops))

    async def _change_tags(self, kind, name, add, remove, wait=True):
        jid = await self._submit_tags(kind, name, add, remove)
        if not wait:
            self.unconfirmed[jid] = (kind, name)
            return None
        return (await self._wait_tags({jid: (kind, name)}))[jid]

    async def _wait_tags(self, jobs):
        """Wait for the tag jobs ``{job id: (kind, name)}``; logs those
        that did not succeed; {job id: final status}."""
        statuses = {}
        for jid in jobs:
            statuses[jid] = await self._wait(jid)
            if statuses[jid] != JQ.STATUS_SUCCESS:
                kind, name = jobs[jid]
                self.log.error("Changing the auto-repair tags of {kind}"
                               " {name} (job {job}) ended {status}",
                               kind=kind, name=name, job=jid,
                               status=statuses[jid])
        return statuses

    async def _check_unconfirmed(self):
        """Forget the earlier passes' tag jobs that are over, logging those
        that did not succeed."""
        if not self.unconfirmed:
            return
        ids = sorted(self.unconfirmed)
        rows = await self._call(luxi.REQ_QUERY_JOBS, ids, ["status"])
        for jid, row in zip(ids, rows):
            status = row[0] if row is not None else None
            if status is not None and status not in JQ.FINALIZED:
                continue
            kind, name = self.unconfirmed.pop(jid)
            if status not in (None, JQ.STATUS_SUCCESS):
                self.log.error("Changing the auto-repair tags of {kind}"
                               " {name} (job {job}) ended {status}",
                               kind=kind, name=name, job=jid, status=status)

    async def _wait(self, jid):
        while True:
            rows = await self._call(luxi.REQ_QUERY_JOBS, [int(jid)],
                                    ["status"])
            status = rows[0][0] if rows and rows[0] is not None else None
            if status is None or status in JQ.FINALIZED:
                return status
            await task.deferLater(self.clock, self.poll, lambda: None)

    async def remove_expired(self, expired, wait=True):
        """Remove passed timed suspensions of groups and the cluster
        (``expired``: (level, tag) pairs); with ``wait`` false the jobs
        are not waited for but kept in ``unconfirmed``."""
        by_group = {}
        cluster = []
        for level, tag in sorted(expired):
            if level == "cluster":
                cluster.append(tag)
            else:
                by_group.setdefault(tag, None)
        if cluster:
            await self._change_tags("cluster", None, [], cluster, wait)
        if by_group:
            fields = ["name", "tags"]
            rows = _rows(await self._call(luxi.REQ_QUERY, "group", fields,
                                          None), fields)
            for name, tags in rows:
                gone = [t for t in by_group if t in (tags or ())]
                if gone:
                    await self._change_tags("nodegroup", name, [], gone,
                                            wait)
