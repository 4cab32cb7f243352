"""``gnt-cluster master-failover``: this master candidate becomes the master.

Run on the candidate that is to take over (docs/master-failover.rst):

1. the vote (:mod:`ganeti.mastervote`), unless ``--no-voting``;
2. the old master is asked to stop its master daemons and give up the
   master IP (it may be dead: then its own start-up vote keeps it from
   coming back as a master);
3. this node's configuration names it the master, with a higher serial
   number than any candidate holds; it goes to the other master
   candidates and ssconf to every node, as the master's replication
   does;
4. this node's node daemon takes the master IP and starts the master
   daemons (masterd, which loads the job queue replicated to this node,
   then rapi and maintd).

Every step says what it does through ``report``; a step that cannot be
done stops the failover with :class:`FailoverError` saying why, before
anything was changed where the vote fails.
"""

import attrs
from twisted.logger import Logger

from ganeti import config
from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import mastervote
from ganeti import replication
from ganeti import rpc
from ganeti import ssconf
from ganeti.backend import files

log = Logger()

#: seconds the old master has to stop its daemons
STOP_TIMEOUT = 60.0
#: seconds the new master's daemons have to start
START_TIMEOUT = 180.0


class FailoverError(errors.GenericError):
    """The failover cannot go on; nothing more was changed."""


@attrs.frozen
class FailoverResult:
    old_master: str
    new_master: str
    serial: int
    #: warnings the admin must read (nodes not reached, old master alive?)
    warnings: tuple
    verdict: object


def _resolver(store):
    def resolve(name):
        node = store.get_node(name)
        return rpc.NodeAddress(node.primary_ip, constants.DEFAULT_NODED_PORT,
                               bool(node.offline))
    return resolve


async def master_failover(reactor, paths, my_address=None, my_name=None,
                          no_voting=False, report=print, client=None):
    """Make this node (primary address ``my_address``, or else the node
    named ``my_name``) the master.  Returns a :class:`FailoverResult`;
    raises :class:`FailoverError`."""
    try:
        view = mastervote.local_view(paths.config_file, my_address, my_name)
    except FileNotFoundError:
        raise FailoverError("this node (%s) is not a master candidate: it"
                            " holds no copy of the configuration (%s); only"
                            " a master candidate can become the master"
                            % (my_address or my_name, paths.config_file))
    except (OSError, ValueError) as err:
        raise FailoverError("cannot read this node's configuration %s: %s"
                            " (is this node a master candidate?)"
                            % (paths.config_file, err))
    if view.me is None:
        raise FailoverError("this node (%s) is not in its own"
                            " configuration %s" % (my_address or my_name,
                                                   paths.config_file))
    if not view.is_candidate:
        raise FailoverError("this node (%s) is not a master candidate; only"
                            " a master candidate can become the master"
                            " (gnt-node modify -C yes %s)"
                            % (view.me, view.me))
    store = config.ConfigStore.load(paths.config_file)
    own_client = client is None
    if own_client:
        client = rpc.RpcClient(reactor, crypto.server_pem_path(paths),
                               _resolver(store))
    try:
        return await _failover(reactor, paths, view, store, client,
                               no_voting, report)
    finally:
        if own_client:
            await client.close()


async def _failover(reactor, paths, view, store, client, no_voting, report):
    warnings = []
    old = view.master
    me = view.me
    if old == me:
        report("This node (%s) is already the master; making sure its"
               " master daemons run" % me)
        await _start_here(client, me, no_voting, report)
        return FailoverResult(old, me, store.serial_no, (), None)
    verdict = None
    if no_voting:
        report("Not asking the master candidates (--no-voting)")
    else:
        report("Asking the %d other master candidate(s) who the master is"
               % len(view.voters))
        ballots = await mastervote.gather(
            mastervote.rpc_caller(client), sorted(view.voters))
        for b in ballots:
            report("  %s: %s" % (b.node, "no answer (%s)" % b.error
                                 if b.master is None else "master %s,"
                                 " configuration serial %s"
                                 % (b.master, b.serial)))
        verdict = mastervote.failover_verdict(me, view.serial, old, ballots)
        if not verdict.ok:
            raise FailoverError("the master candidates do not agree to a"
                                " failover to %s: %s" % (me, verdict.reason))
        report("Vote: %s" % verdict.reason)
    # 2. the old master steps down, if it can hear us
    report("Stopping the master daemons on %s" % old)
    result = await client.call(old, "node_stop_master", [],
                               timeout=STOP_TIMEOUT)
    if result.success:
        stopped = (result.payload or {}).get("stopped") or []
        report("  stopped on %s: %s" % (old, ", ".join(stopped) or
                                        "nothing was running"))
    else:
        msg = ("could not stop the master daemons on %s (%s); if it comes"
               " back, its master daemon will find it is no longer the"
               " master and not start" % (old, result.fail_msg))
        warnings.append(msg)
        report("  Warning: " + msg)
    # 3. the configuration: this node is the master
    store.set_cluster_params(master_node=store.get_node(me).uuid)
    report("Configuration serial %d names %s the master" % (store.serial_no,
                                                             me))
    files.write_ssconf_files(paths, ssconf.current_values(store))
    replicator = replication.Replicator(store, client, reactor)
    await replicator.flush(force=True)
    missed = replicator.missed()
    for name in sorted(missed):
        msg = ("node %s did not get the new configuration: %s; it gets it"
               " with the next change or gnt-cluster redist-conf"
               % (name, missed[name][1]))
        warnings.append(msg)
        report("  Warning: " + msg)
    # 4. the master's daemons here
    await _start_here(client, me, no_voting, report)
    return FailoverResult(old, me, store.serial_no, tuple(warnings), verdict)


async def _start_here(client, me, no_voting, report):
    report("Starting the master daemons on %s" % me)
    result = await client.call(me, "node_start_master_daemons", [no_voting],
                               timeout=START_TIMEOUT)
    if not result.success:
        raise FailoverError("the node daemon of %s could not start the"
                            " master daemons: %s" % (me, result.fail_msg))
    running = [d for d, up in sorted(
        ((result.payload or {}).get("daemons") or {}).items()) if up]
    report("  running on %s: %s" % (me, ", ".join(running)))
