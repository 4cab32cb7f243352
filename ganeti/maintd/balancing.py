"""The maintenance daemon's balancing (the ``maint_balance`` switch).

Each round it computes hbal's plan for every node group (the project's
htools: the same moves as ``hbal -L``) and offers the moves of the first
job set as tasks; the round takes those that touch no node under repair
(``rounds.plan``).  A move is made only for a score gain of at least
``balance_threshold``.  Beyond hbal, the daemon does not thrash:

* an instance it moved is not moved again within ``balance_hold_down``
  seconds (the plan is computed with it unmovable);
* it makes at most ``balance_max_moves`` moves in any hour (0: no
  limit).

Both are kept in the maintenance state's ``moves`` ([[instance uuid, unix
time], ...]); entries older than both windows are dropped.  With
``balance_load`` the nodes' CPU load (``load.ILoadSource``) weighs in, as
with ``hbal --mond=yes``.
"""

import math

from ganeti.htools import backends, balance, cluster, dynload
from ganeti.htools import moves as MV
from ganeti.maintd import rounds as R

#: the rolling window of the hourly cap
HOUR = 3600.0


def held(moves, now, hold_down):
    """Uuids of the instances moved less than ``hold_down`` seconds ago."""
    return {uuid for uuid, ts in moves if now - ts < hold_down}


def allowance(moves, now, max_moves):
    """How many moves the hourly cap still allows (None: no limit)."""
    if not max_moves:
        return None
    return max(0, max_moves - sum(1 for _, ts in moves if now - ts < HOUR))


def pruned(moves, now, hold_down):
    """``moves`` without the entries neither window needs any more."""
    keep = max(hold_down, HOUR)
    return [[uuid, ts] for uuid, ts in moves if now - ts < keep]


def options(m):
    """hbal's options from the switches: the threshold is the least
    gain a move must bring, whatever the score."""
    return balance.BalanceOptions(
        disk_moves=bool(m.get("balance_disk_moves", True)),
        min_gain=float(m.get("balance_threshold") or 0.0),
        min_gain_limit=math.inf)


def first_moves(cdata, opts, frozen=()):
    """The first job set of each node group's plan (Placements), the
    instances named in ``frozen`` left where they are."""
    for inst in cdata.instances:
        if inst.name in frozen:
            inst.movable = False
    result = []
    for _, gnodes, ginsts in cdata.split_groups():
        if not ginsts:
            continue
        placements = balance.Balancer(cdata.nodes, gnodes, ginsts,
                                      opts).run()
        if placements:
            result.extend(balance.split_jobs(placements)[0])
    return result


def tasks(cdata, placements, node_uuids, inst_uuids):
    """The rounds.Tasks of ``placements`` (one job each, hbal's opcodes);
    ``node_uuids``/``inst_uuids`` map names to uuids."""
    result = []
    for pl in placements:
        inst = pl.inst
        desc, _ = MV.move_commands(inst, pl.move, cdata.nodes)
        nodes = {node_uuids[cdata.nodes[i].name] for i in pl.involved()}
        result.append(R.Task(
            R.BALANCING, tuple(MV.move_opcodes(inst, pl.move, cdata.nodes)),
            nodes, {inst_uuids[inst.name]},
            what="balancing %s (%s, score %.8f)" % (inst.name, desc,
                                                    pl.score)))
    return result


class Balancing(object):
    """Plans the balancing moves of a look; ``call`` is the daemon's
    luxi call, ``load`` an ILoadSource (None: no load data)."""

    def __init__(self, call, load=None):
        self.call = call
        self.load = load
        #: the last plan's score and moves, for the log
        self.last = None

    async def read(self, info):
        """The htools model of the cluster now, from luxi (``info`` is
        the QueryClusterInfo answer the look already has)."""
        from ganeti import luxi
        answers = {}
        for what, fields in backends.LUXI_QUERIES:
            answers[what] = await self.call(luxi.REQ_QUERY, what, fields,
                                            None)
        return backends.from_luxi_answers(answers["node"],
                                          answers["instance"], info,
                                          answers["group"])

    async def plan(self, m, info, nodes, insts, now):
        """The balancing tasks of this look, and how many of them the
        hourly cap allows (None: all); ``nodes``/``insts`` are the
        daemon's rows ({uuid: row} and a list of rows)."""
        moves = m.get("moves") or []
        hold = held(moves, now, m.get("balance_hold_down") or 0)
        left = allowance(moves, now, m.get("balance_max_moves") or 0)
        if left == 0:
            return [], 0
        inst_uuids = {i["name"]: i["uuid"] for i in insts}
        node_uuids = {n["name"]: u for u, n in nodes.items()}
        cdata = await self.read(info)
        loads = None
        if m.get("balance_load") and self.load is not None:
            online = [n for n in nodes.values() if not n["offline"]]
            by_uuid = await self.load.fetch(online)
            loads = {nodes[u]["name"]: v for u, v in by_uuid.items()
                     if u in nodes}
        cluster.finalize(cdata)
        if loads:
            dynload.apply_node_cpu(cdata, loads)
        frozen = {name for name, uuid in inst_uuids.items() if uuid in hold}
        placements = first_moves(cdata, options(m), frozen)
        placements = [pl for pl in placements
                      if pl.inst.name in inst_uuids and all(
                          cdata.nodes[i].name in node_uuids
                          for i in pl.involved())]
        return tasks(cdata, placements, node_uuids, inst_uuids), left
