"""What auto-repair thinks of an instance, from the configuration alone:
for ``gnt-instance info``, the instance query fields ``autorepair.*``
and RAPI.

It reads the same tags and node flags as the passes (``engine``), but
not the job queue: a pending repair is shown with its jobs, whatever
their state.
"""

import time

from ganeti import objects
from ganeti.cmdlib import node_oob
from ganeti.watcher.autorepair import detect, engine, tags as T


def view(cfg, inst):
    """The detect.Instance and node table of ``inst`` (a config object)."""
    disks = [cfg.disks[u] for u in inst.disks if u in cfg.disks]
    dt = objects.disk_template_of(disks) if disks else \
        (inst.disk_template or "diskless")
    names = {}
    nodes = {}
    for uuid in inst.all_nodes:
        node = cfg.nodes.get(uuid)
        if node is None:
            continue
        names[uuid] = node.name
        nodes[node.name] = detect.Node(
            node.name, bool(node.offline), bool(node.drained),
            detect.is_fenced(node.offline, node.powered,
                             node_oob.oob_program(cfg, node)))
    pnode = cfg.nodes.get(inst.primary_node)
    group = cfg.nodegroups.get(pnode.group) if pnode is not None else None
    v = detect.Instance(
        inst.name, dt, names.get(inst.primary_node),
        tuple(names[u] for u in inst.secondary_nodes if u in names),
        inst.admin_state == "up", tuple(inst.tags or ()),
        tuple(group.tags or ()) if group is not None else ())
    return v, nodes


def describe(cfg, inst, now=None):
    """A dict: ``state`` (healthy, needs-repair, pending, failed,
    suspended), ``policy`` (enabled, suspended, not-enabled), ``allowed``
    (the repair type, or None), ``source`` (instance, group or cluster),
    ``suspended_until``, ``needs`` (the repair it needs now and why, or
    None), ``pending`` and ``last_result`` (the tag's fields, or None),
    ``malformed`` (tags ignored, with the reason)."""
    now = time.time() if now is None else now
    v, nodes = view(cfg, inst)
    cluster_tags = tuple(cfg.cluster.tags or ())
    pol, _ = T.policy((v.tags, v.group_tags, cluster_tags), now)
    pending, results, bad = T.instance_tags(v.tags)
    step = detect.next_step(v, nodes, "hail") if v.pnode else None
    if any(r.result == T.FAILURE for r in results):
        state = engine.FAILED
    elif pol.state == T.SUSPENDED:
        state = engine.SUSPENDED
    elif pending:
        state = engine.PENDING
    elif step is not None:
        state = engine.NEEDS_REPAIR
    else:
        state = engine.HEALTHY
    cur = pending[0] if pending else None
    last = results[-1] if results else None
    return {
        "state": state,
        "policy": pol.state,
        "allowed": pol.kind,
        "source": pol.source,
        "suspended_until": pol.until,
        "needs": None if step is None else "%s (%s)%s" % (
            step.kind, step.why,
            "; waits: %s" % step.blocked if step.blocked else ""),
        "pending": None if cur is None else {
            "type": cur.kind, "id": cur.id, "since": cur.timestamp,
            "jobs": list(cur.jobs)},
        "last_result": None if last is None else {
            "type": last.kind, "id": last.id, "time": last.timestamp,
            "result": last.result, "jobs": list(last.jobs)},
        "malformed": [[m.tag, m.reason] for m in bad],
    }


def summary(desc):
    """One line, for listings: ``pending failover (jobs 12+13)``."""
    state = desc["state"]
    if state == engine.PENDING:
        p = desc["pending"]
        return "pending %s (jobs %s)" % (p["type"], "+".join(
            str(j) for j in p["jobs"]) or "none yet")
    if state == engine.FAILED:
        return "failed (until its failure result tag is removed)"
    if state == engine.NEEDS_REPAIR:
        return "needs %s" % desc["needs"].split(" ", 1)[0]
    return state
