"""The auto-repair state machine: one decision per instance and pass.

An instance is in one of these states (its tags say which, so the state
survives the tool and a master failover):

* healthy: nothing to do; pending repairs left over are closed with
  success;
* needs repair: a node of it is unusable, but the policy does not allow
  (enough of) a repair, or repairs are not enabled; a policy that allows
  too little records an ``enoperm`` result (once, not every pass);
* pending: a pending tag exists (added here, or by an external tool): its
  jobs are given time; when they are done the next step is submitted if
  the pending repair's type allows it, ``enoperm`` closes it if not, and
  ``success`` closes it when the instance is healthy; several pending
  tags are handled oldest first;
* failed: a job of a repair failed: a ``failure`` result is recorded and
  nothing more happens until a person removes that tag.  A job that
  failed only for lack of resources is not a failure: the step is tried
  again later (``retry_interval``);
* suspended: a suspend tag applies; jobs already submitted finish, no new
  step starts.

``decide`` is pure: it returns what to change; the runner applies it.
"""

import attrs

from ganeti.jqueue import model as JQ
from ganeti.watcher.autorepair import detect
from ganeti.watcher.autorepair import tags as T

HEALTHY = "healthy"
NEEDS_REPAIR = "needs-repair"
PENDING = "pending"
FAILED = "failed"
SUSPENDED = "suspended"


@attrs.frozen
class Job:
    """What auto-repair needs to know of one of its jobs."""
    status: str
    #: failed for lack of resources (worth trying again later)
    nores: bool = False
    #: when it ended (unix time), if it did
    end: float = None


@attrs.frozen
class Decision:
    instance: str
    state: str
    policy: T.Policy
    message: str
    add_tags: tuple = ()
    remove_tags: tuple = ()
    #: the step to submit as a job, for ``pending`` (the runner adds the
    #: job's id to it and replaces the old pending tag, ``replaces``)
    step: detect.Step = None
    pending: T.Pending = None
    replaces: str = None
    malformed: tuple = ()
    #: passed timed suspensions of the group or cluster: (level, tag)
    expired: tuple = ()


def _jobs_text(jobs):
    return ", ".join(str(j) for j in jobs) if jobs else "no jobs"


def decide(inst, nodes, cluster_tags, jobs, now, new_id, iallocator,
           retry_interval=300.0):
    """The decision for ``inst`` (a detect.Instance) at time ``now``:
    ``nodes`` maps node names to detect.Node, ``jobs`` job ids to Job
    (unknown ids: the job was archived, it is over), ``new_id`` makes
    the id of a new repair."""
    pol, expired = T.policy((inst.tags, inst.group_tags, cluster_tags), now)
    pending, results, bad = T.instance_tags(inst.tags)
    remove = tuple(tag for level, tag in expired if level == "instance")
    outer = tuple((level, tag) for level, tag in expired
                  if level != "instance")
    step = detect.next_step(inst, nodes, iallocator)

    def make(state, message, **kw):
        kw["remove_tags"] = remove + tuple(kw.get("remove_tags", ()))
        return Decision(inst.name, state, pol, message, malformed=tuple(bad),
                        expired=outer, **kw)

    failures = [r for r in results if r.result == T.FAILURE]
    if failures:
        last = failures[-1]
        return make(FAILED, "repair %s (%s) failed; remove the tag %s once"
                    " the instance is safe to repair automatically again"
                    % (last.id, _jobs_text(last.jobs), last.tag))
    if pol.state == T.SUSPENDED:
        until = "until removed" if pol.until is None else \
            "until %d" % pol.until
        return make(SUSPENDED, "repairs suspended (%s tag, %s)"
                    % (pol.source, until))
    if pending:
        return _pending(make, inst, pending, step, jobs, now,
                        retry_interval)
    if step is None:
        return make(HEALTHY, "healthy")
    if pol.state == T.NOT_ENABLED:
        return make(NEEDS_REPAIR, "needs %s (%s) but auto-repair is not"
                    " enabled for it" % (step.kind, step.why))
    if not T.allows(pol.kind, step.kind):
        msg = "needs %s (%s) but only %s is allowed" % (step.kind, step.why,
                                                      pol.kind)
        latest = results[-1] if results else None
        if latest is not None and latest.result == T.ENOPERM and \
                latest.kind == pol.kind:
            return make(NEEDS_REPAIR, msg)
        res = T.Result(pol.kind, new_id(), now, T.ENOPERM, ())
        return make(NEEDS_REPAIR, msg, add_tags=(res.tag,))
    if step.blocked:
        return make(NEEDS_REPAIR, "needs %s (%s) but waits: %s"
                    % (step.kind, step.why, step.blocked))
    new = T.Pending(pol.kind, new_id(), now, ())
    return make(PENDING, "repair %s started: %s (%s)"
                % (new.id, step.kind, step.why), step=step, pending=new)


def _pending(make, inst, pending, step, jobs, now, retry_interval):
    cur = pending[0]
    known = [(j, jobs.get(j)) for j in cur.jobs]
    running = [j for j, job in known
               if job is not None and job.status not in JQ.FINALIZED]
    if running:
        return make(PENDING, "repair %s waits for job %s"
                    % (cur.id, _jobs_text(running)), pending=cur)
    last = known[-1][1] if known else None
    if last is not None and last.status in (JQ.STATUS_ERROR,
                                            JQ.STATUS_CANCELED):
        if last.nores and step is not None:
            if step.blocked:
                return make(PENDING, "repair %s waits: %s"
                            % (cur.id, step.blocked), pending=cur)
            if last.end is not None and now - last.end < retry_interval:
                return make(PENDING, "repair %s waits for resources (job %s"
                            " found none)" % (cur.id, cur.jobs[-1]),
                            pending=cur)
            return make(PENDING, "repair %s tries %s again (%s)"
                        % (cur.id, step.kind, step.why), step=step,
                        pending=cur, replaces=cur.tag)
        res = T.Result(cur.kind, cur.id, now, T.FAILURE, cur.jobs)
        return make(FAILED, "repair %s failed (job %s %s)"
                    % (cur.id, cur.jobs[-1], last.status),
                    add_tags=(res.tag,), remove_tags=(cur.tag,))
    if step is None:
        # healthy: this repair is done, and so are any others waiting
        done = [T.Result(cur.kind, cur.id, now, T.SUCCESS, cur.jobs)]
        done += [T.Result(p.kind, p.id, now, T.SUCCESS, ())
                 for p in pending[1:]]
        return make(HEALTHY, "repair %s succeeded (%s)"
                    % (cur.id, _jobs_text(cur.jobs)),
                    add_tags=tuple(r.tag for r in done),
                    remove_tags=tuple(p.tag for p in pending))
    if not T.allows(cur.kind, step.kind):
        res = T.Result(cur.kind, cur.id, now, T.ENOPERM, cur.jobs)
        return make(NEEDS_REPAIR, "repair %s stopped: needs %s (%s), more"
                    " than its type %s allows"
                    % (cur.id, step.kind, step.why, cur.kind),
                    add_tags=(res.tag,), remove_tags=(cur.tag,))
    if step.blocked:
        return make(PENDING, "repair %s waits: %s" % (cur.id, step.blocked),
                    pending=cur)
    return make(PENDING, "repair %s: %s (%s)" % (cur.id, step.kind, step.why),
                step=step, pending=cur, replaces=cur.tag)
