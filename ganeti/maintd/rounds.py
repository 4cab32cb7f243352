"""Planning one round of the maintenance daemon: the jobs it submits at
once, chosen so that none of them gets in another's way.

Two tasks conflict when they touch a common node or a common instance:
such jobs would wait on each other's locks, or undo each other's
placement.  A round takes, in this order (docs/maintd.rst):

1. for every node to evacuate (or repair live), its first task, as long
   as it does not conflict with those already taken;
2. the auto-repairs of instances that touch no node of step 1;
3. the first balancing step's moves on the nodes still untouched and not
   part of a failed incident.

A task left out waits for a later round; the next round starts when all
jobs of this one have ended.
"""

import attrs

EVACUATION = "evacuation"
LIVE_REPAIR = "live-repair"
AUTO_REPAIR = "auto-repair"
BALANCING = "balancing"


@attrs.frozen
class Task:
    """One job to submit: its opcodes, what it touches, why."""
    kind: str
    ops: tuple
    nodes: frozenset = attrs.field(converter=frozenset)
    instances: frozenset = attrs.field(converter=frozenset, default=())
    #: the incident it serves (None: auto-repair or balancing)
    incident: str = None
    what: str = ""

    def conflicts(self, other):
        return bool(self.nodes & other.nodes or
                    self.instances & other.instances)


@attrs.define
class Round:
    tasks: list = attrs.field(factory=list)
    #: (task, why it waits)
    deferred: list = attrs.field(factory=list)

    def _take(self, task):
        for taken in self.tasks:
            if task.conflicts(taken):
                self.deferred.append((task, "conflicts with %s" % taken.what))
                return False
        self.tasks.append(task)
        return True

    @property
    def nodes(self):
        result = set()
        for t in self.tasks:
            result |= t.nodes
        return result


def plan(node_tasks, repairs=(), balancing=(), blocked_nodes=(),
         max_balancing=None):
    """The round: ``node_tasks`` is {node uuid: [tasks in order of
    preference]} for the nodes with an incident to act on (only the first
    that fits is taken per node); ``repairs`` the auto-repair tasks;
    ``balancing`` the moves of the first balancing step; ``blocked_nodes``
    nodes no balancing may touch (those of failed incidents);
    ``max_balancing`` how many balancing moves it may take at most (None:
    no limit)."""
    rnd = Round()
    affected = set(node_tasks)
    for node in sorted(node_tasks):
        for task in node_tasks[node]:
            if rnd._take(task):
                break
    affected |= rnd.nodes
    for task in repairs:
        if task.nodes & affected:
            rnd.deferred.append((task, "touches a node under repair"))
            continue
        rnd._take(task)
    untouchable = affected | rnd.nodes | set(blocked_nodes)
    moves = 0
    for task in balancing:
        if task.nodes & untouchable:
            rnd.deferred.append((task, "touches a node under repair"))
            continue
        if max_balancing is not None and moves >= max_balancing:
            rnd.deferred.append((task, "the hourly cap of balancing moves"
                                 " is reached"))
            continue
        moves += rnd._take(task)
    return rnd
