"""Is this node the master?  Asked of the master candidates, as Ganeti's
master-only daemons do: a daemon that only trusted its own files could
run on a node that lost the master role while it was cut off.

Every master candidate's confd (at the candidate's primary address, HMAC
signed) is asked for the cluster's master; this node is the master when
more than half of the candidates name it.  The candidates and this
node's name come from the local ssconf files.

Candidates that do not answer are neither for nor against: when no node
has a majority (several candidates are still starting, as after a power
cut of the whole cluster), the vote is asked again for a while before
the daemon gives up.
"""

import time

import attrs
from twisted.internet import defer, task
from twisted.logger import Logger

from ganeti.confd import client as confd_client
from ganeti.confd import wire

log = Logger()

#: the exit status of a master-only daemon started on another node
EXIT_NOTMASTER = 11


@attrs.frozen
class Vote:
    master: bool
    #: {candidate address: the master it named (None: no answer)}
    answers: dict
    needed: int
    reason: str

    @property
    def decided(self):
        """True when some node (this one or another) has a majority: asking
        again would not change the answer."""
        if self.master:
            return True
        named = [a for a in self.answers.values() if a is not None]
        return any(named.count(n) >= self.needed for n in set(named))


def read_ssconf(paths, key):
    try:
        with open(paths.ssconf_file(key)) as f:
            return [line.strip() for line in f if line.strip()]
    except OSError:
        return []


def this_node(paths, address):
    """The name of the node whose primary address is ``address`` (the
    daemon's bind address), from ssconf's node_primary_ips."""
    for line in read_ssconf(paths, "node_primary_ips"):
        name, _, ip = line.partition(" ")
        if ip == address:
            return name
    return None


async def ask_until_decided(reactor, hmac_key, paths, my_name,
                            port=wire.DEFAULT_PORT, timeout=2.0,
                            patience=60.0, every=5.0, asker=None,
                            monotonic=None):
    """The Vote, asked again every ``every`` seconds for up to ``patience``
    seconds while no node has a majority (candidates still starting)."""
    asker = asker or ask
    monotonic = monotonic or getattr(reactor, "seconds", time.monotonic)
    deadline = monotonic() + patience
    while True:
        vote = await asker(reactor, hmac_key, paths, my_name, port=port,
                           timeout=timeout)
        if vote.decided or not vote.needed or monotonic() + every > deadline:
            return vote
        log.info("No majority yet ({reason}); asking again in {every} s",
                 reason=vote.reason, every=every)
        await task.deferLater(reactor, every, lambda: None)


async def ask(reactor, hmac_key, paths, my_name, port=wire.DEFAULT_PORT,
              timeout=2.0):
    """The Vote of the master candidates listed in this node's ssconf."""
    candidates = read_ssconf(paths, "master_candidates_ips")
    if my_name is None:
        return Vote(False, {}, 0, "this node is not in the cluster's node"
                    " list (ssconf node_primary_ips)")
    if not candidates:
        return Vote(False, {}, 0, "no master candidates known (ssconf"
                    " master_candidates_ips)")
    needed = len(candidates) // 2 + 1
    # one request per candidate: a client asking all at once would stop
    # at the first few replies, and a split would look undecided
    answers = {ip: None for ip in candidates}

    async def ask_one(ip):
        client = confd_client.ConfdClient(hmac_key, [ip], port=port,
                                          reactor=reactor, timeout=timeout)
        try:
            result = await client.request(wire.REQ_CLUSTER_MASTER)
        except confd_client.ConfdTimeoutError:
            return
        finally:
            await client.close()
        for reply in result.replies.values():
            if reply.status == wire.STATUS_OK:
                answers[ip] = reply.answer

    await defer.gatherResults([
        defer.Deferred.fromCoroutine(ask_one(ip)) for ip in candidates],
        consumeErrors=True)
    votes = sum(1 for a in answers.values() if a == my_name)
    if votes >= needed:
        return Vote(True, answers, needed, "%d of %d master candidates name"
                    " this node" % (votes, len(candidates)))
    named = [a for a in answers.values() if a is not None]
    for other in sorted(set(named)):
        if named.count(other) >= needed:
            return Vote(False, answers, needed, "%d of %d master candidates"
                        " name %s the master" % (named.count(other),
                                                 len(candidates), other))
    return Vote(False, answers, needed,
                "only %d of %d master candidates name this node (%s)"
                " the master; %d needed"
                % (votes, len(candidates), my_name, needed))
