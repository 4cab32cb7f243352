"""One look of the maintenance daemon at the cluster, over luxi.

Each look (every few seconds, ``MaintenanceLoop``):

1. reads the cluster (its ``maintenance`` state, nodes, instances) and
   the jobs of its incidents; a job of the daemon's that the state does
   not name yet (it died between submitting and recording) is adopted by
   its reason trail, so nothing is submitted twice;
2. an incident with a failed or canceled job is ``failed``: nothing more
   is done for it, and its node is tagged ``maintd:repairfailed:ID``;
3. while a job of the current round runs, it only records that;
4. otherwise it asks the nodes for their self-diagnosis, matches the
   reports against its incidents (``incidents.reconcile``), decides each
   node's next step, and, as the switches say, the auto-repairs of
   instances (harep's work, ``autorepair``) and the first balancing moves
   (``balancing``); it plans a round of jobs that do not conflict
   (``rounds.plan``), submits them all at once and records them.

It keeps its state in the configuration (luxi ``MaintenanceUpdate``), so
a restarted daemon (or one on a new master) goes on where it was.

Steps per incident (docs/maintd.rst):

* live-repair: the repair command of the report, if any, on the node
  (``OP_REPAIR_COMMAND``, the report as its input); then the node tag;
* evacuate / evacuate-failover: the node is drained (when several nodes
  are to be emptied, all of them before any instance moves, so none
  becomes a target), then its instances leave it one per round (migrated, or failed over for
  evacuate-failover and for instances not running; a DRBD secondary gets
  a new node), then the node is set offline and tagged.
"""

import json
import time
import uuid as uuid_mod

from twisted.logger import Logger

from ganeti import constants
from ganeti import luxi
from ganeti import objects
from ganeti.jqueue import model as JQ
from ganeti.htools import types as HT
from ganeti.maintd import autorepair as AR
from ganeti.maintd import balancing as B
from ganeti.maintd import incidents as I
from ganeti.maintd import rounds as R
from ganeti.query import base as query_base

REASON_SOURCE = "gnt:daemon:maintd"
_NODE_FIELDS = ["uuid", "name", "pip", "offline", "drained", "tags",
                "group.uuid", "vm_capable"]
_INSTANCE_FIELDS = ["uuid", "name", "pnode", "snodes", "disk_template",
                    "admin_state", "oper_state"]
#: disk templates whose instances move between nodes without copying
_MIRRORED = frozenset([constants.DT_DRBD8])
_SHARED = frozenset([constants.DT_SHARED_FILE, constants.DT_RBD,
                     constants.DT_EXT, constants.DT_GLUSTER,
                     constants.DT_BLOCK, constants.DT_DISKLESS])


def _rows(answer, fields):
    return query_base.rows_to_dicts(fields, answer["data"])


def _reason_incident(ops):
    """The incident id a job's reason trail names, if the daemon sent it."""
    for op in ops or ():
        for entry in (op or {}).get("reason") or ():
            if isinstance(entry, list) and len(entry) >= 2 and \
                    entry[0] == REASON_SOURCE and \
                    str(entry[1]).startswith("incident "):
                return str(entry[1])[len("incident "):]
    return None


class MaintenanceDaemon(object):
    """The looks; ``client`` is a luxi client (``call(method, *args)``),
    ``diagnose`` fetches the nodes' reports (``fetch(nodes)`` ->
    Deferred of {node uuid: checked report}, refusals counted by it),
    ``load`` the nodes' CPU load for balancing (a load.ILoadSource, None:
    balancing without load data); ``new_id`` names incidents,
    ``repair_id`` auto-repairs (default: ``new_id``)."""

    log = Logger()

    def __init__(self, client, diagnose, wallclock=time.time,
                 new_id=lambda: str(uuid_mod.uuid4()), load=None,
                 repair_id=None):
        self.client = client
        self.diagnose = diagnose
        self.wallclock = wallclock
        self.new_id = new_id
        self.harep = AR.AutoRepairDuty(client, REASON_SOURCE, wallclock,
                                       repair_id or new_id)
        self.balancing = B.Balancing(self._call, load)
        self.rounds = 0
        self.submitted = 0
        #: the cluster's default allocator (targets of moves) and round
        #: delay, as last read
        self.iallocator = "hail"
        self.round_delay = constants.MAINTD_DEFAULT_ROUND_DELAY
        #: the last incidents seen, for /1/status
        self._status = []

    # --- what the status page shows -------------------------------------

    def status(self):
        return list(self._status)

    def counters(self):
        refused = dict(getattr(self.diagnose, "refused", {}) or {})
        return {"rounds": self.rounds, "jobs": self.submitted,
                "refused": refused}

    # --- one look --------------------------------------------------------

    async def _call(self, method, *args):
        return await self.client.call(method, *args)

    async def _read(self):
        info = await self._call(luxi.REQ_QUERY_CLUSTER_INFO)
        m = info.get("maintenance") or {}
        self.iallocator = info.get("default_iallocator") or "hail"
        self.round_delay = m.get("round_delay") or \
            constants.MAINTD_DEFAULT_ROUND_DELAY
        nodes = {r["uuid"]: r for r in _rows(await self._call(
            luxi.REQ_QUERY, "node", _NODE_FIELDS, None), _NODE_FIELDS)}
        by_name = {}
        for row in nodes.values():
            row["primary_ip"] = row["pip"]
            by_name[row["name"]] = row["uuid"]
        insts = _rows(await self._call(
            luxi.REQ_QUERY, "instance", _INSTANCE_FIELDS, None),
            _INSTANCE_FIELDS)
        # the rows name nodes; the daemon works with their uuids
        for row in insts:
            row["pnode.uuid"] = by_name.get(row["pnode"])
            row["snodes.uuid"] = [by_name.get(n) for n in row["snodes"] or ()]
        incidents = {}
        for view in m.get("incidents") or []:
            incidents[view["id"]] = objects.Incident(
                uuid=view["id"], node=view.get("node"),
                original=view.get("original") or {},
                action=view.get("action"),
                repair_status=view.get("repair-status"),
                jobs=list(view.get("jobs") or []), tag=view.get("tag"))
        return info, m, nodes, insts, incidents

    async def _jobs(self):
        """{job id: (status, incident id or None)} of the daemon's jobs
        in the queue (archived ones are over)."""
        rows = await self._call(luxi.REQ_QUERY_JOBS, None,
                                ["id", "status", "ops"])
        result = {}
        for row in rows:
            if row is None:
                continue
            jid, status, ops = row
            inc = _reason_incident(ops)
            if inc is not None or any(
                    e[0] == REASON_SOURCE for op in ops or ()
                    for e in (op or {}).get("reason") or ()
                    if isinstance(e, list) and e):
                result[jid] = (status, inc)
        return result

    async def run_once(self):
        info, m, nodes, insts, incidents = await self._read()
        jobs = await self._jobs()
        changed = set()
        # adopt the daemon's jobs its state does not name yet
        for jid, (_, inc_id) in sorted(jobs.items()):
            inc = incidents.get(inc_id)
            if inc is not None and jid not in inc.jobs:
                inc.jobs.append(jid)
                changed.add(inc.uuid)
        statuses = {jid: st for jid, (st, _) in jobs.items()}
        round_jobs = list(m.get("jobs") or [])
        # failures end an incident's repair at once
        fail_tags = []
        for inc in incidents.values():
            if inc.repair_status not in I.ACTIVE:
                continue
            if I.after_jobs(inc, statuses) == objects.INCIDENT_FAILED:
                inc.repair_status = objects.INCIDENT_FAILED
                inc.tag = I.failed_tag(inc.uuid)
                changed.add(inc.uuid)
                fail_tags.append(inc)
                self.log.warn("Incident {id} on {node}: a job failed; no"
                              " more action is taken for it",
                              id=inc.uuid, node=self._name(nodes, inc.node))
        tagged = [await self._submit(self._tag_ops(nodes, inc), inc.uuid)
                  for inc in fail_tags if inc.node in nodes]
        # the round goes on while any job of the daemon's runs (those of
        # the recorded round, and any it sent but could not record)
        running = sorted(set(tagged) | {
            j for j, st in statuses.items() if st not in JQ.FINALIZED})
        if running:
            await self._record(incidents, changed, [],
                               running if running != sorted(round_jobs)
                               else None)
            self._publish(incidents, nodes)
            return None
        reports = await self.diagnose.fetch(
            [n for n in nodes.values() if not n["offline"]])
        node_tags = {u: set(n["tags"] or ()) for u, n in nodes.items()}
        rec = I.reconcile(incidents, reports, node_tags, self.new_id)
        for uuid in rec.forget:
            self.log.info("Incident {id} forgotten", id=uuid)
            del incidents[uuid]
        for inc in rec.new:
            self.log.info("Incident {id} on {node}: {action} ({report})",
                          id=inc.uuid, node=self._name(nodes, inc.node),
                          action=inc.action, report=inc.original)
            incidents[inc.uuid] = inc
            changed.add(inc.uuid)
        node_tasks = {}
        # a node stays "evacuated" while an incident of it is remembered
        evacuated = [u for u in m.get("evacuated") or []
                     if u in nodes and
                     any(i.node == u for i in incidents.values())]
        actions = {u: I.node_action(incidents, u)
                   for u in sorted({i.node for i in incidents.values()})
                   if u in nodes}
        # several nodes to empty: the allocator would pick one not drained
        # yet as a target (and the instance would move again), so every
        # one is drained before any instance moves
        emptying = [u for u, (a, _) in actions.items()
                    if a in (I.EVACUATE, I.EVACUATE_FAILOVER)]
        hold_moves = len(emptying) > 1 and any(
            not nodes[u]["drained"] and not nodes[u]["offline"]
            for u in emptying)
        for node_uuid, (action, mine) in actions.items():
            if action == I.OK:
                continue
            tasks = self._node_tasks(nodes, insts, node_uuid, action, mine,
                                     statuses, changed, hold_moves)
            if action in (I.EVACUATE, I.EVACUATE_FAILOVER) and \
                    node_uuid not in evacuated:
                evacuated.append(node_uuid)
            if tasks:
                node_tasks[node_uuid] = tasks
        now = self.wallclock()
        repairs, new_jobs = [], []
        if m.get("harep"):
            repairs, new_jobs = await self.harep.tasks(insts)
            self.submitted += len(new_jobs)
        balancing, cap = [], None
        if m.get("balance"):
            try:
                balancing, cap = await self.balancing.plan(
                    m, info, nodes, insts, now)
            except HT.HtoolsError as err:
                self.log.error("No balancing this round: {err}", err=err)
        # balancing keeps off the nodes of failed incidents: a person
        # looks at them
        blocked = {i.node for i in incidents.values()
                   if i.repair_status == objects.INCIDENT_FAILED}
        rnd = R.plan(node_tasks, repairs, balancing, blocked, cap)
        for task, why in rnd.deferred:
            self.log.info("Waits for a later round: {what} ({why})",
                          what=task.what, why=why)
        old_moves = [list(mv) for mv in m.get("moves") or []]
        moves = list(old_moves)
        for task in rnd.tasks:
            if task.kind == R.AUTO_REPAIR:
                jids = await self.harep.submit(task)
                self.submitted += len(jids)
                new_jobs.extend(jids)
                continue
            jid = await self._submit(
                task.ops, task.incident,
                "balancing" if task.kind == R.BALANCING else None)
            new_jobs.append(jid)
            if task.kind == R.BALANCING:
                moves.extend([uuid, now] for uuid in sorted(task.instances))
            target = incidents.get(task.incident)
            if target is not None:
                target.jobs.append(jid)
                if target.repair_status == objects.INCIDENT_NOTED:
                    target.repair_status = objects.INCIDENT_PENDING
                changed.add(target.uuid)
        if rnd.tasks:
            self.rounds += 1
            self.log.info("Round {n}: {jobs} jobs ({what})", n=self.rounds,
                          jobs=len(rnd.tasks),
                          what="; ".join(t.what for t in rnd.tasks))
        moves = B.pruned(moves, now, m.get("balance_hold_down") or 0)
        await self._record(incidents, changed, rec.forget,
                           new_jobs if (new_jobs or round_jobs) else None,
                           evacuated if evacuated != list(
                               m.get("evacuated") or []) else None,
                           moves if moves != old_moves else None)
        self._publish(incidents, nodes)
        return rnd

    # --- steps -------------------------------------------------------------

    def _node_tasks(self, nodes, insts, node_uuid, action, mine, statuses,
                    changed, hold_moves=False):
        """The node's next task, for the most invasive incident (the
        others of the node are completed with it)."""
        node = nodes[node_uuid]
        lead = max(mine, key=lambda i: (I.invasiveness(i.action), i.uuid))
        if all(statuses.get(j) in (None, JQ.STATUS_SUCCESS)
               for j in lead.jobs) and \
                I.ready_tag(lead.uuid) in (node["tags"] or ()):
            for inc in mine:
                if inc.repair_status != objects.INCIDENT_COMPLETED:
                    inc.repair_status = objects.INCIDENT_COMPLETED
                    changed.add(inc.uuid)
            return []
        if action == I.LIVE_REPAIR:
            command = lead.original.get("command")
            if command and not lead.jobs:
                return [R.Task(R.LIVE_REPAIR, (
                    {"OP_ID": "OP_REPAIR_COMMAND", "node_name": node["name"],
                     "command": command,
                     "input": json.dumps(lead.original, sort_keys=True)},),
                    {node_uuid}, incident=lead.uuid,
                    what="repair command %s on %s" % (command,
                                                      node["name"]))]
            return [self._tag_task(nodes, lead)]
        return self._evacuation_tasks(nodes, insts, node, action, lead,
                                      hold_moves)

    def _evacuation_tasks(self, nodes, insts, node, action, lead,
                          hold_moves=False):
        """The node's evacuation steps; with ``hold_moves`` (another node
        to empty is not drained yet) only its drain, if it needs one."""
        uuid = node["uuid"]
        failover = action == I.EVACUATE_FAILOVER
        pre = []
        if not node["drained"] and not node["offline"]:
            pre = [{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node["name"],
                    "drained": True}]
        tasks = []
        for inst in sorted(insts, key=lambda i: i["name"]):
            snodes = list(inst["snodes.uuid"] or [])
            if inst["pnode.uuid"] == uuid:
                op, touched = self._move_primary(inst, failover, nodes,
                                                 snodes)
            elif uuid in snodes:
                op = {"OP_ID": "OP_INSTANCE_REPLACE_DISKS",
                      "instance_name": inst["name"],
                      "mode": "replace_new_secondary",
                      "iallocator": self.iallocator}
                touched = [uuid, inst["pnode.uuid"]]
            else:
                continue
            if op is None:
                continue
            tasks.append(R.Task(R.EVACUATION, tuple(pre + [op]),
                                set(touched), {inst["uuid"]},
                                incident=lead.uuid,
                                what="%s of %s off %s" % (
                                    op["OP_ID"][3:].lower(), inst["name"],
                                    node["name"])))
        if tasks and hold_moves:
            if not pre:
                self.log.info("Waits for a later round: the instances of"
                              " {node} (other nodes to empty are being"
                              " drained)", node=node["name"])
                return []
            return [R.Task(R.EVACUATION, tuple(pre), {uuid},
                           incident=lead.uuid,
                           what="drain %s" % node["name"])]
        if tasks:
            return tasks
        # empty: offline and tagged (one job)
        ops = []
        if not node["offline"]:
            ops.append({"OP_ID": "OP_NODE_SET_PARAMS",
                        "node_name": node["name"], "offline": True,
                        "auto_promote": True})
        ops.extend(self._tag_ops({uuid: node}, lead))
        return [R.Task(R.EVACUATION, tuple(ops), {uuid}, incident=lead.uuid,
                       what="offline and tag %s" % node["name"])]

    def _move_primary(self, inst, failover, nodes, snodes):
        """The opcode moving an instance off its primary, and the nodes
        it touches."""
        dt = inst["disk_template"]
        running = bool(inst["oper_state"])
        op_id = "OP_INSTANCE_FAILOVER" if failover or not running else \
            "OP_INSTANCE_MIGRATE"
        op = {"OP_ID": op_id, "instance_name": inst["name"]}
        if dt in _MIRRORED:
            return op, [inst["pnode.uuid"]] + snodes
        if dt in _SHARED:
            op["iallocator"] = self.iallocator
            if op_id == "OP_INSTANCE_FAILOVER":
                op["ignore_consistency"] = False
            return op, [inst["pnode.uuid"]]
        # disks only on the node: copied to the best other node
        target = _target_node(nodes, inst["pnode.uuid"])
        if target is None:
            return None, []
        return ({"OP_ID": "OP_INSTANCE_MOVE", "instance_name": inst["name"],
                 "target_node": nodes[target]["name"]},
                [inst["pnode.uuid"], target])

    def _tag_ops(self, nodes, inc):
        return [{"OP_ID": "OP_TAGS_SET", "kind": constants.TAG_NODE,
                 "name": nodes[inc.node]["name"], "tags": [inc.tag]}]

    def _tag_task(self, nodes, inc):
        return R.Task(R.LIVE_REPAIR, tuple(self._tag_ops(nodes, inc)),
                      {inc.node}, incident=inc.uuid,
                      what="tag %s" % nodes[inc.node]["name"])

    # --- submitting and recording -----------------------------------------

    def _reason(self, incident, what=None):
        what = "incident %s" % incident if incident else \
            what or "maintenance"
        return [[REASON_SOURCE, what, int(self.wallclock() * 1e9)]]

    async def _submit(self, ops, incident, what=None):
        ops = [dict(op, reason=self._reason(incident, what)) for op in ops]
        jid = await self._call(luxi.REQ_SUBMIT_JOB, ops)
        self.submitted += 1
        self.log.info("Submitted job {job} ({ops}) for {what}", job=jid,
                      ops=", ".join(op["OP_ID"] for op in ops),
                      what=incident or what or "maintenance")
        return int(jid)

    async def _record(self, incidents, changed, removed, jobs,
                      evacuated=None, moves=None):
        if not changed and not removed and jobs is None and \
                evacuated is None and moves is None:
            return
        await self._call(
            luxi.REQ_MAINTENANCE_UPDATE,
            [incidents[u].to_dict() for u in sorted(changed)
             if u in incidents], list(removed), jobs, evacuated, moves)

    def _publish(self, incidents, nodes):
        self._status = [
            {"id": inc.uuid, "node": inc.node,
             "node_name": self._name(nodes, inc.node),
             "original": inc.original, "action": inc.action,
             "repair-status": inc.repair_status, "jobs": list(inc.jobs),
             "tag": inc.tag}
            for inc in sorted(incidents.values(), key=lambda i: i.uuid)]

    @staticmethod
    def _name(nodes, uuid):
        node = nodes.get(uuid)
        return node["name"] if node else uuid


def _target_node(nodes, source):
    """An online, undrained, vm-capable node of the source's group."""
    group = nodes[source]["group.uuid"]
    for uuid, n in sorted(nodes.items(), key=lambda kv: kv[1]["name"]):
        if uuid != source and n["group.uuid"] == group and \
                not n["offline"] and not n["drained"] and n["vm_capable"]:
            return uuid
    return None
