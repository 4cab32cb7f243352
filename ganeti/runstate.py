"""The instances' run state as the master observes it, as events.

Whether an instance runs (``oper_state``) is not in the configuration: the
master learns it each time it asks the nodes' hypervisors
(``all_instances_info``) for a query with live fields -- the watcher's
pass (``QueryFresh`` of every node group's instances), the maintenance
daemon's, ``gnt-instance list``, RAPI's bulk lists.  A
:class:`RunStateTracker` is told of every such answer
(:meth:`RunStateTracker.observe`) and compares it with what it saw the time
before: an instance that stopped running (a guest that crashed or powered
itself off) or runs again, while no job of the master acted on it,
becomes an ``instance``/``state`` event with ``oper_state``
(docs/events.rst).

"No job acted on it": an instance whose lock a job holds exclusively is
not looked at.  Once a job took that lock (or the instance's wanted state,
``admin_state`` and its source, or its primary node changed), the jobs
since the last observation may have started or stopped it: a change is
then announced only if the instance neither runs as it did before nor as
its ``admin_state`` wants it (a crash after a tag change is an event; a
start, a shutdown, the watcher's restart, a start that failed are not).
The first observation of an instance (after the master's start) is a
starting point.  An instance whose nodes did not all answer (or whose
primary node is offline) is not observed.
"""

import attr
from twisted.logger import Logger

from ganeti import constants
from ganeti import events
from ganeti.query import live

log = Logger()


@attr.s(frozen=True)
class Seen(object):
    """One observation of an instance."""
    running = attr.ib()
    status = attr.ib()          # INSTST_*, as the query's ``status``
    node = attr.ib()            # uuid of the node running it, or None
    #: what a job changes: another value means a fresh starting point
    admin = attr.ib()           # (admin_state, admin_state_source, pnode)


def _admin(inst):
    return (inst.admin_state, inst.admin_state_source, inst.primary_node)


def _wanted_running(inst):
    return inst.admin_state == constants.ADMINST_UP


class RunStateTracker(object):
    """Publishes on ``bus`` the run-state changes no job made.

    ``get_cfg()`` gives the current configuration (a ConfigStore);
    ``locks`` is the instance level's LockSet (None: no job is ever
    known to act, only the wanted state tells)."""

    def __init__(self, bus, get_cfg, locks=None):
        self._bus = bus
        self._get_cfg = get_cfg
        self._locks = locks
        self._seen = {}         # instance uuid -> Seen
        # instances (their locks: by UUID) a job locked exclusively since
        # they were seen
        self._touched = set()
        if locks is not None:
            locks.exclusive_listeners.append(self._touched.add)
        #: run-state events published since the start
        self.published = 0

    def observe(self, node_uuids, answers):
        """The nodes ``node_uuids`` were asked which instances they run;
        ``answers`` maps each to ``{instance name: {"state": ...}}``, or
        to None (or an exception) when it did not answer."""
        try:
            self._observe(set(node_uuids), answers or {})
        except Exception:
            # the query goes on whatever happens here
            log.failure("comparing the instances' run state failed")

    def _observe(self, asked, answers):
        cfg = self._get_cfg()
        if cfg is None:
            return
        runtime = {u: a for u, a in answers.items()
                   if u in asked and isinstance(a, dict)}
        gone = [u for u in self._seen if u not in cfg.instances]
        for uuid in gone:
            del self._seen[uuid]
        if self._touched:
            self._touched &= set(cfg.instances)     # removed since

        def offline(uuid):
            node = cfg.nodes.get(uuid)
            return node is None or node.offline
        for uuid, inst in cfg.instances.items():
            if inst.forthcoming or not inst.primary_node or not inst.name:
                continue
            nodes = [u for u in inst.all_nodes if not offline(u)]
            if inst.primary_node not in nodes or \
                    any(u not in runtime for u in nodes):
                continue        # not (wholly) seen by this answer
            if self._locks is not None and \
                    self._locks.held_exclusively(uuid):
                continue        # a job acts on it now
            where, info = live.locate_instance(inst, offline, set(),
                                               runtime)
            running = (where == live.WHERE_WRONGNODE
                       or (where == live.WHERE_PRIMARY
                           and info.get("state") != live.HV_SHUTDOWN))
            node = None
            if running:
                node = inst.primary_node if where == live.WHERE_PRIMARY \
                    else self._running_on(inst, runtime)
            seen = Seen(running, live.instance_status(cfg.cluster, inst,
                                                      where, info),
                        node, _admin(inst))
            before = self._seen.get(uuid)
            self._seen[uuid] = seen
            touched = uuid in self._touched
            self._touched.discard(uuid)
            if before is None or before.running == seen.running:
                continue        # a starting point, or no change
            if (touched or before.admin != seen.admin) and \
                    seen.running == _wanted_running(inst):
                continue        # what the job was to do
            self._publish(cfg, uuid, inst, before, seen)

    @staticmethod
    def _running_on(inst, runtime):
        for node_uuid in sorted(runtime):
            info = runtime[node_uuid].get(inst.name)
            if isinstance(info, dict) and info.get("state") in live.HV_LIVE:
                return node_uuid
        return None

    def _publish(self, cfg, uuid, inst, before, seen):
        node = cfg.nodes.get(seen.node) if seen.node else None
        self.published += 1
        log.info("Instance {name} {what} (not by a job): {status}",
                 name=inst.name,
                 what="runs again" if seen.running else "stopped running",
                 status=seen.status)
        self._bus.publish(
            events.KIND_INSTANCE, events.TYPE_STATE, name=inst.name, id=uuid,
            data={"oper_state": seen.running, "status": seen.status,
                  "node": node.name if node is not None else None,
                  "previous": {"oper_state": before.running,
                               "status": before.status}})
