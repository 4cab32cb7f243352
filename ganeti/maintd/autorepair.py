"""The maintenance daemon's share of ``harep``'s work (the ``maint_harep``
switch).

The decisions are auto-repair's own (ganeti/watcher/autorepair: the
same tags read, the same steps, budgets and tags written, the same
opcodes), taken by the same runner with the daemon's reason trail.  What
changes is when they are applied: each decision becomes a round task
(its instance and the instance's nodes), and only those the round takes
(away from nodes under repair) are submitted, its repair job first and
then its tag job; the others are decided again in a later round.
"""

from ganeti.maintd import rounds as R
from ganeti.watcher.autorepair import runner


def _tag_ops(d):
    ops = []
    if d.remove_tags:
        ops.append({"OP_ID": "OP_TAGS_DEL", "kind": "instance",
                    "name": d.instance, "tags": list(d.remove_tags)})
    if d.add_tags:
        ops.append({"OP_ID": "OP_TAGS_SET", "kind": "instance",
                    "name": d.instance, "tags": list(d.add_tags)})
    return tuple(ops)


class AutoRepairDuty(object):
    """``client`` is the daemon's luxi client; ``reason_source`` the
    daemon's source for the reason trail."""

    def __init__(self, client, reason_source, wallclock, new_id):
        # the daemon never waits for a job (clock unused): its tag jobs
        # are checked in a later look
        self.runner = runner.AutoRepair(
            client, None, reason_source=reason_source, wallclock=wallclock,
            wait_tags=False, new_id=new_id)
        self._decisions = []

    async def tasks(self, insts):
        """The auto-repair tasks of this look; ``insts`` are the daemon's
        instance rows.  Passed suspensions of groups and the cluster are
        removed right away (their ids are returned too)."""
        p = await self.runner.decide_pass()
        rows = {i["name"]: i for i in insts}
        self._decisions = []
        result = []
        for inst, d in p.todo:
            row = rows.get(inst.name)
            if row is None:
                continue  # created since the daemon's own query
            ops = tuple(d.step.ops) if d.step is not None else _tag_ops(d)
            task = R.Task(R.AUTO_REPAIR, ops,
                          {row["pnode.uuid"]} | set(row["snodes.uuid"] or ()),
                          {row["uuid"]},
                          what="auto-repair of %s: %s" % (inst.name,
                                                          d.message))
            self._decisions.append((task, d))
            result.append(task)
        expired_jobs = []
        if p.expired:
            before = set(self.runner.unconfirmed)
            await self.runner.remove_expired(p.expired, wait=False)
            expired_jobs = sorted(set(self.runner.unconfirmed) - before)
        return result, expired_jobs

    async def submit(self, task):
        """Submit a task the round took: its repair job, then its tag
        job; their ids."""
        d = next(d for t, d in self._decisions if t is task)
        tag_job = await self.runner.apply(d)
        jobs = []
        if self.runner.last_repair_job is not None:
            jobs.append(self.runner.last_repair_job)
        if tag_job is not None:
            self.runner.unconfirmed[tag_job] = ("instance", d.instance)
            jobs.append(int(tag_job))
        return jobs
