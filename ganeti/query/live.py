"""Live data: what the nodes report, and the instance status built from it.

The query engine asks an :class:`ILiveData` provider (in the master: RPC to
the node daemons) only when a requested field or a filter field needs it,
and only about the nodes of the items still in the result.  Offline nodes
are never asked: their live fields are RS_OFFLINE.  A node whose answer is
missing, None, or an exception is *unreachable*: its live fields are
RS_NODATA and its instances' status is ``ERROR_nodedown``.
"""

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python import failure
from zope.interface import Interface

from ganeti import constants
from ganeti import user_shutdown

log = Logger()

# Hypervisor states an instance can be reported in
HV_RUNNING = "running"
HV_PAUSED = "paused"
HV_SHUTDOWN = "shutdown"   # the guest powered itself off; domain kept
HV_CRASHED = "crashed"
HV_STATES = frozenset([HV_RUNNING, HV_PAUSED, HV_SHUTDOWN, HV_CRASHED])
#: States in which the instance is alive and running
HV_LIVE = frozenset([HV_RUNNING, HV_PAUSED])

#: Keys of nodes_runtime answers (each also a node query field)
NODE_LIVE_KEYS = ("mtotal", "mnode", "mfree", "dtotal", "dfree", "ctotal",
                  "cnos", "cnodes", "csockets", "spfree", "sptotal", "bootid")


class ILiveData(Interface):
    """Where the query engine gets runtime data from.

    Both methods may return their answer directly or as a Deferred.  Each
    answer maps node UUID to that node's data; a node left out, or mapped
    to None or to an exception, is treated as unreachable.  A method that
    raises (or whose Deferred fails) makes every node it was asked about
    unreachable.
    """

    def instances_runtime(node_uuids):
        """Instances the hypervisors on ``node_uuids`` know about.

        ``{node_uuid: {instance_name: {"state": "running" | "paused" |
        "shutdown" | "crashed", "memory": MiB, "vcpus": count}}}``.
        "shutdown" means the guest powered itself off and the hypervisor
        kept the stopped domain; "crashed" counts as not running.
        """

    def nodes_runtime(node_uuids):
        """Resource figures of ``node_uuids``.

        ``{node_uuid: {"mtotal", "mnode", "mfree", "dtotal", "dfree",
        "ctotal", "cnos", "cnodes", "csockets", "spfree", "sptotal",
        "bootid"}}``, memory and disk in MiB; keys a node cannot report are
        left out (their fields are RS_UNAVAIL).
        """


def _fetch(method, node_uuids, what):
    """Call a provider method; Deferred of (answers, unreachable set)."""
    node_uuids = sorted(node_uuids)
    if not node_uuids:
        return defer.succeed(({}, set()))
    if method is None:
        return defer.succeed(({}, set(node_uuids)))

    def split(answer):
        data = {}
        unreachable = set()
        if not isinstance(answer, dict):
            log.warn("live data provider gave {what} answer of type {t};"
                     " treating all nodes as unreachable", what=what,
                     t=type(answer).__name__)
            answer = {}
        for uuid in node_uuids:
            value = answer.get(uuid)
            if value is None or isinstance(value, (Exception,
                                                   failure.Failure)):
                unreachable.add(uuid)
            elif not isinstance(value, dict):
                log.warn("node {uuid} gave a malformed {what} answer",
                         uuid=uuid, what=what)
                unreachable.add(uuid)
            else:
                data[uuid] = value
        return data, unreachable

    def failed(reason):
        log.failure("fetching {what} from {count} node(s) failed", reason,
                    what=what, count=len(node_uuids))
        return {}, set(node_uuids)

    d = defer.maybeDeferred(method, node_uuids)
    d.addCallbacks(split, failed)
    return d


def fetch_instances_runtime(provider, node_uuids):
    method = getattr(provider, "instances_runtime", None)
    return _fetch(method, node_uuids, "instance runtime")


def fetch_nodes_runtime(provider, node_uuids):
    method = getattr(provider, "nodes_runtime", None)
    return _fetch(method, node_uuids, "node runtime")


# --- where an instance runs ------------------------------------------------

WHERE_OFFLINE = "offline"        # primary node is marked offline
WHERE_NODATA = "nodata"          # primary node did not answer
WHERE_NOWHERE = "nowhere"        # forthcoming: on no hypervisor by design
WHERE_PRIMARY = "primary"        # the primary's hypervisor knows it
WHERE_WRONGNODE = "wrongnode"    # running on a node that is not its primary
WHERE_DEAD = "dead"              # nowhere (or crashed)


def locate_instance(inst, node_offline, unreachable, runtime):
    """Where ``inst`` is: ``(WHERE_*, hypervisor info or None)``.

    ``runtime`` is ``{node_uuid: {instance_name: info}}`` of the nodes that
    answered; ``node_offline(uuid)`` tells whether a node is offline.  A
    forthcoming instance exists only in the configuration: it is nowhere,
    whatever its primary node's state.
    """
    pnode = inst.primary_node
    if inst.forthcoming or not pnode:
        return WHERE_NOWHERE, None
    if node_offline(pnode):
        return WHERE_OFFLINE, None
    if pnode in unreachable or pnode not in runtime:
        return WHERE_NODATA, None
    name = inst.name
    if name is None:
        return WHERE_DEAD, None
    info = runtime[pnode].get(name)
    if isinstance(info, dict) and info.get("state") != HV_CRASHED:
        return WHERE_PRIMARY, info
    for node_uuid in sorted(runtime):
        if node_uuid == pnode:
            continue
        other = runtime[node_uuid].get(name)
        if isinstance(other, dict) and other.get("state") in HV_LIVE:
            return WHERE_WRONGNODE, other
    return WHERE_DEAD, None


def dead_status(cluster, inst):
    """Status of an instance no hypervisor runs (Ganeti's rules)."""
    state = inst.admin_state
    if state == constants.ADMINST_UP:
        return constants.INSTST_ERRORDOWN
    if state == constants.ADMINST_OFFLINE:
        return constants.INSTST_ADMINOFFLINE
    if (inst.admin_state_source == constants.USER_SOURCE
            and cluster.enabled_user_shutdown):
        return constants.INSTST_USERDOWN
    return constants.INSTST_ADMINDOWN


def instance_status(cluster, inst, where, info, hvparams=None):
    """The INSTST_* value of ``inst`` located by :func:`locate_instance`."""
    admin_up = inst.admin_state == constants.ADMINST_UP
    if where == WHERE_OFFLINE:
        return constants.INSTST_NODEOFFLINE
    if where == WHERE_NODATA:
        return constants.INSTST_NODEDOWN
    if where == WHERE_WRONGNODE:
        return constants.INSTST_WRONGNODE
    if where == WHERE_PRIMARY:
        state = info.get("state")
        if state == HV_SHUTDOWN:
            if admin_up and user_shutdown.allowed(cluster, inst, hvparams):
                return constants.INSTST_USERDOWN
            if admin_up:
                return constants.INSTST_ERRORDOWN
            return constants.INSTST_ADMINDOWN
        # running or paused (an unknown state reported is taken as alive)
        return constants.INSTST_RUNNING if admin_up else \
            constants.INSTST_ERRORUP
    return dead_status(cluster, inst)
