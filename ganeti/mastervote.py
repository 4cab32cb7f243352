"""Master voting: which node do the master candidates take for the master?

Asked of every other online master candidate's node daemon (mutual TLS,
procedure ``master_vote_info``): the master it believes in and the serial
number of its configuration.  Two questions are answered from the
ballots (see docs/master-failover.rst):

* at the start of ganeti-masterd (:func:`startup_verdict`): is this node
  the master?  More than half of the candidates, this node included, must
  name it; a candidate holding a newer configuration than this node's is
  a refusal too (this node's would overwrite it).
* at ``gnt-cluster master-failover`` (:func:`failover_verdict`): may this
  candidate take over?  More than half of the candidates must answer
  (a partitioned minority can never elect a master of its own), they
  must agree with this node's configuration about the current master,
  and none may hold a newer configuration.

Candidates that do not answer count neither for nor against.
"""

import collections
import json
import time

import attrs
from twisted.internet import defer, task
from twisted.logger import Logger

from ganeti import constants
from ganeti import rpc

log = Logger()

#: seconds a candidate has to answer
VOTE_TIMEOUT = 5.0


@attrs.frozen
class Ballot:
    node: str
    #: the master it named (None: no answer)
    master: object = None
    serial: object = None
    error: object = None


@attrs.frozen
class Verdict:
    ok: bool
    #: False while asking again could change the answer (too few answers)
    decided: bool
    reason: str
    ballots: tuple = ()


@attrs.frozen
class LocalView:
    """What this node's config.data says: its name, the master, the
    serial and the other online master candidates ``{name: ip}``."""
    me: object
    master: object
    serial: object
    voters: dict
    is_candidate: bool


def local_view(config_file, my_address=None, my_name=None):
    """The :class:`LocalView` of ``config_file``; this node is the one
    whose primary address is ``my_address`` (or else whose name is
    ``my_name``)."""
    with open(config_file) as f:
        data = json.load(f)
    nodes = data.get("nodes") or {}
    cluster = data.get("cluster") or {}
    master = nodes.get(cluster.get("master_node"), {}).get("name")
    me = None
    for node in nodes.values():
        if (node.get("primary_ip") == my_address if my_address
                else node.get("name") == my_name):
            me = node
            break
    voters = {n["name"]: n["primary_ip"] for n in nodes.values()
              if n.get("master_candidate") and not n.get("offline")
              and n is not me}
    return LocalView(me=me and me.get("name"), master=master,
                     serial=data.get("serial_no"), voters=voters,
                     is_candidate=bool(me and me.get("master_candidate")))


def needed(total):
    return total // 2 + 1


async def gather(call, voters, timeout=VOTE_TIMEOUT):
    """Ask every voter; ``call(name, timeout)`` -> Deferred[RpcResult]
    of ``master_vote_info``.  Returns [Ballot] in voter order."""
    voters = list(voters)
    results = await defer.gatherResults(
        [defer.maybeDeferred(call, name, timeout) for name in voters])
    ballots = []
    for name, result in zip(voters, results):
        payload = result.payload if result.success else None
        if isinstance(payload, dict) and payload.get("master"):
            serial = payload.get("serial")
            ballots.append(Ballot(name, payload["master"],
                                  serial if isinstance(serial, int)
                                  else None))
        else:
            ballots.append(Ballot(name, error=result.fail_msg
                                  or "no master named"))
    return ballots


def _newer(my_serial, ballots):
    if not isinstance(my_serial, int):
        return []
    return [b for b in ballots if b.serial is not None
            and b.serial > my_serial]


def _describe(ballots):
    parts = []
    for b in ballots:
        if b.master is None:
            parts.append("%s: no answer" % b.node)
        else:
            parts.append("%s: %s (serial %s)" % (b.node, b.master, b.serial))
    return "; ".join(parts)


def startup_verdict(me, my_serial, ballots):
    """May a master daemon start on ``me``?"""
    ballots = tuple(ballots)
    total = len(ballots) + 1
    want = needed(total)
    for_me = 1 + sum(1 for b in ballots if b.master == me)
    newer = _newer(my_serial, ballots)
    if for_me >= want:
        if newer:
            b = max(newer, key=lambda b: b.serial)
            return Verdict(False, True, "master candidate %s holds a newer"
                           " configuration (serial %d) than this node's"
                           " (serial %d)" % (b.node, b.serial, my_serial),
                           ballots)
        return Verdict(True, True, "%d of %d master candidates (this node"
                       " included) name this node the master"
                       % (for_me, total), ballots)
    named = collections.Counter(b.master for b in ballots
                                if b.master is not None)
    for other, count in named.most_common():
        if other != me and count >= want:
            return Verdict(False, True, "%d of %d master candidates name %s"
                           " the master, not this node (%s); this node's"
                           " configuration is out of date"
                           % (count, total, other, me), ballots)
    return Verdict(False, False, "only %d of %d master candidates (this node"
                   " included) name this node (%s) the master, %d needed"
                   " [%s]" % (for_me, total, me, want, _describe(ballots)),
                   ballots)


def failover_verdict(me, my_serial, old_master, ballots):
    """May the candidate ``me`` take over from ``old_master``?"""
    ballots = tuple(ballots)
    total = len(ballots) + 1
    want = needed(total)
    answered = [b for b in ballots if b.master is not None]
    if 1 + len(answered) < want:
        return Verdict(False, True, "only %d of %d master candidates"
                       " answered (this node included), %d needed: the"
                       " cluster may be split, and the other part could"
                       " elect a master too [%s]"
                       % (1 + len(answered), total, want,
                          _describe(ballots)), ballots)
    newer = _newer(my_serial, answered)
    if newer:
        b = max(newer, key=lambda b: b.serial)
        return Verdict(False, True, "master candidate %s holds a newer"
                       " configuration (serial %d) than this node's (serial"
                       " %d): run the failover on %s, or bring this node's"
                       " configuration up to date (gnt-cluster redist-conf"
                       " on the master)" % (b.node, b.serial, my_serial,
                                            b.node), ballots)
    agree = 1 + sum(1 for b in answered if b.master == old_master)
    if agree < want:
        return Verdict(False, True, "this node's configuration names %s the"
                       " master, but only %d of %d master candidates agree"
                       " [%s]: this node's configuration is out of date"
                       % (old_master, agree, total, _describe(ballots)),
                       ballots)
    return Verdict(True, True, "%d of %d master candidates answered and"
                   " agree that %s was the master" % (1 + len(answered),
                                                      total, old_master),
                   ballots)


def rpc_caller(client):
    """``call(name, timeout)`` for :func:`gather` over an RpcClient."""
    def call(name, timeout):
        return client.call(name, "master_vote_info", [], timeout=timeout)
    return call


def address_client(reactor, cert_path, addresses):
    """An RpcClient that reaches the nodes ``{name: ip}``."""
    def resolve(name):
        return rpc.NodeAddress(addresses[name], constants.DEFAULT_NODED_PORT,
                               False)
    return rpc.RpcClient(reactor, cert_path, resolve)


async def startup_vote(reactor, view, call, patience=60.0, every=2.0,
                       monotonic=None):
    """:func:`startup_verdict`, asked again every ``every`` seconds for
    up to ``patience`` seconds while it is undecided (candidates still
    starting, as after a power cut of the whole cluster)."""
    monotonic = monotonic or getattr(reactor, "seconds", time.monotonic)
    deadline = monotonic() + patience
    while True:
        ballots = await gather(call, sorted(view.voters))
        verdict = startup_verdict(view.me, view.serial, ballots)
        if verdict.decided or monotonic() + every > deadline:
            return verdict
        log.info("No majority yet ({reason}); asking again in {every} s",
                 reason=verdict.reason, every=every)
        await task.deferLater(reactor, every, lambda: None)
