"""Is this node the master?  Asked of the master candidates, as Ganeti's
master-only daemons do: a daemon that only trusted its own files could
run on a node that lost the master role while it was cut off.

Every master candidate's confd (at the candidate's primary address, HMAC
signed) is asked for the cluster's master; this node is the master when
more than half of the candidates name it.  The candidates and this
node's name come from the local ssconf files.
"""

import attrs
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
    client = confd_client.ConfdClient(hmac_key, candidates, port=port,
                                      reactor=reactor, timeout=timeout,
                                      coverage=0)
    answers = {ip: None for ip in candidates}
    try:
        result = await client.request(wire.REQ_CLUSTER_MASTER)
        for (ip, _), reply in result.replies.items():
            if reply.status == wire.STATUS_OK:
                answers[ip] = reply.answer
    except confd_client.ConfdTimeoutError:
        pass
    finally:
        await client.close()
    votes = sum(1 for a in answers.values() if a == my_name)
    if votes >= needed:
        return Vote(True, answers, needed, "%d of %d master candidates name"
                    " this node" % (votes, len(candidates)))
    return Vote(False, answers, needed,
                "only %d of %d master candidates name this node (%s)"
                " the master; %d needed"
                % (votes, len(candidates), my_name, needed))
