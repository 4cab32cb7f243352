"""Node failure detection on the master: every few seconds each online
node's daemon is asked for its version over the cluster's mutual TLS
channel; a node that misses ``misses`` checks in a row is lost.

A lost node that has an out-of-band program is powered off (fenced) and
then marked offline, in one job; auto-repair then repairs its instances
as their tags allow, and starts none elsewhere while the node is not
known to be off (see docs/autorepair.rst).  A node whose fencing fails
stays offline and powered: nothing is failed over, and the log says so.
A lost node without an out-of-band program cannot be fenced: it is only
reported, and stays as it is until an administrator, sure it is down,
marks it offline.

If more of a node group's nodes are lost at once than its node parameter
``repair_min_healthy`` allows (the share of its online nodes that must
still answer, the master counting as answering), the master assumes that
it is the one cut off: it marks nothing offline and only reports, until
enough nodes answer again.
"""

import attrs
from twisted.internet import defer, task
from twisted.logger import Logger

from ganeti import constants
from ganeti import objects
from ganeti.cmdlib import node_oob

REASON_SOURCE = "gnt:watcher:nodehealth"


@attrs.define
class NodeHealthOptions:
    #: seconds between checks
    interval: float = 2.0
    #: checks missed in a row before a node is lost
    misses: int = 3
    #: share of a group's online nodes that must answer for the master to
    #: act on the others; None: the group's repair_min_healthy parameter
    min_healthy: float = None
    #: seconds a check may take
    timeout: float = 2.0


class NodeHealth:
    """The checks; ``rpc`` calls nodes (``call(node, procedure, args,
    timeout)`` -> Deferred[RpcResult]), ``cfg`` is the config store,
    ``submit(ops)`` submits a job (-> Deferred[job id])."""

    log = Logger()

    def __init__(self, cfg, rpc, submit, clock, opts=None):
        self.cfg = cfg
        self.rpc = rpc
        self.submit = submit
        self.clock = clock
        self.opts = opts or NodeHealthOptions()
        #: node uuid -> checks missed in a row
        self.missed = {}
        #: node uuids for which a job was submitted (until they answer
        #: again or are back online)
        self.handled = set()
        #: groups in which too many nodes were lost at once
        self.partitioned = set()
        self._loop = None

    def start(self):
        self._loop = task.LoopingCall(self.check)
        self._loop.clock = self.clock
        return self._loop.start(self.opts.interval, now=False)

    def stop(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def _watched(self):
        cfg = self.cfg
        master = cfg.master_node
        return [n for n in cfg.nodes.values()
                if not n.offline and (master is None or
                                      n.uuid != master.uuid)]

    @defer.inlineCallbacks
    def check(self):
        """One round of checks, then act on lost nodes."""
        nodes = self._watched()
        calls = [self.rpc.call(n.name, "version", [], self.opts.timeout)
                 for n in nodes]
        results = yield defer.gatherResults(calls, consumeErrors=True)
        for node, res in zip(nodes, results):
            if res.success:
                if self.missed.pop(node.uuid, 0) >= self.opts.misses:
                    self.log.info("Node {node} answers again", node=node.name)
                self.handled.discard(node.uuid)
            else:
                self.missed[node.uuid] = self.missed.get(node.uuid, 0) + 1
        # offline nodes are no longer watched; forget them
        watched = {n.uuid for n in nodes}
        for uuid in list(self.missed):
            if uuid not in watched:
                del self.missed[uuid]
        yield self._act()

    def lost(self):
        return [uuid for uuid, n in self.missed.items()
                if n >= self.opts.misses]

    @defer.inlineCallbacks
    def _act(self):
        cfg = self.cfg
        master = cfg.master_node
        by_group = {}
        for uuid in self.lost():
            node = cfg.nodes.get(uuid)
            if node is not None and not node.offline:
                by_group.setdefault(node.group, []).append(node)
        for group, lost in sorted(by_group.items()):
            online = [n for n in cfg.nodes.values()
                      if n.group == group and not n.offline]
            answering = len(online) - len(lost)
            if answering < self._min_healthy(group) * len(online):
                if group not in self.partitioned:
                    self.partitioned.add(group)
                    self.log.error(
                        "{lost} of the {n} online nodes of group {group}"
                        " stopped answering at once ({names}): this master"
                        " may be the one cut off; no node is marked offline"
                        " or fenced", lost=len(lost), n=len(online),
                        group=self._group_name(group),
                        names=", ".join(sorted(n.name for n in lost)))
                continue
            self.partitioned.discard(group)
            for node in lost:
                if node.uuid in self.handled:
                    continue
                if master is not None and node.uuid == master.uuid:
                    continue
                self.handled.add(node.uuid)
                yield self._retire(node)

    def _min_healthy(self, group_uuid):
        if self.opts.min_healthy is not None:
            return self.opts.min_healthy
        cfg = self.cfg
        return objects.fill_ndparams(
            cfg.cluster, cfg.nodegroups.get(group_uuid),
            None)[constants.ND_REPAIR_MIN_HEALTHY]

    def _group_name(self, uuid):
        group = self.cfg.nodegroups.get(uuid)
        return group.name if group is not None else uuid

    @defer.inlineCallbacks
    def _retire(self, node):
        """Mark ``node`` offline and fence it (one job)."""
        if not node_oob.oob_program(self.cfg, node):
            self.log.error(
                "Node {node} missed {n} checks; it has no out-of-band"
                " program, so it cannot be fenced: nothing is done until"
                " it answers again or an administrator marks it offline",
                node=node.name, n=self.missed.get(node.uuid))
            return
        reason = [[REASON_SOURCE, "node stopped answering",
                   int(self.clock.seconds() * 1e9)]]
        # fenced first, then marked offline: a frozen node that still
        # accepts connections would hold up the configuration change's
        # calls to it (and the power-off is what must happen first)
        ops = [{"OP_ID": "OP_OOB_COMMAND", "command": "power-off",
                "node_names": [node.name], "ignore_status": True,
                "reason": reason},
               {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node.name,
                "offline": True, "auto_promote": True, "reason": reason}]
        try:
            jid = yield self.submit(ops)
        except Exception as err:  # the queue refused: try again later
            self.handled.discard(node.uuid)
            self.log.error("Could not submit the job retiring node {node}:"
                           " {err}", node=node.name, err=err)
            return
        self.log.warn("Node {node} missed {n} checks: job {job} powers it"
                      " off and marks it offline", node=node.name,
                      n=self.missed.get(node.uuid), job=jid)
