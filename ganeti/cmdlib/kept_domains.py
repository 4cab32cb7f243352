"""Kept domains on a node, cleaned up before a job uses its resources.

A guest that powers itself off, or whose hypervisor process crashes,
leaves its domain behind (still holding its memory) so that the watcher
can tell a user shutdown from a failure.  The watcher cleans such domains
up on its next pass; a job that is about to need a node's memory (start,
create, migrate, fail over or move an instance there) does that work for
the node first, so the new allocation starts from a clean state
(docs/instances.rst, "User shutdown").

Each domain is cleaned up under its instance's lock, taken only if it is
free at that moment: the job already holds node locks, and an instance
that another job is working on is that job's business.  A user shutdown
is recorded first (the instance becomes ``USER_down``), exactly as the
watcher's ``OP_INSTANCE_SHUTDOWN`` would; a crashed domain is only
removed (the instance stays ``ERROR_down`` for the watcher to restart).
Domains of instances the configuration does not place on the node are
left alone: cluster verify reports those.
"""

from ganeti import constants
from ganeti import hypervisor
from ganeti import locking
from ganeti import user_shutdown
from ganeti.cmdlib import node_calls


#: the states of a domain left behind by its hypervisor
_KEPT_STATES = frozenset([hypervisor.SHUTDOWN, hypervisor.CRASHED])


class _Token(object):
    """The lock owner of one clean-up (not the job's own owner: the job
    holds its instance locks already)."""

    def __init__(self, what):
        self.what = what

    def __repr__(self):
        return "<clean-up of %s>" % self.what


async def clean_up(lu, node_uuid, skip=()):
    """Clean up the kept domains on ``node_uuid`` of instances other than
    those in ``skip`` (uuids); returns the names of those cleaned up.

    Best effort: a node that cannot be asked, or a clean-up that fails,
    is logged and left to the checks that follow and to the watcher.
    """
    cfg = lu.cfg
    node = cfg.get_node(node_uuid)
    if node.offline:
        return []
    cluster = cfg.cluster
    listing = await node_calls.try_call_node(
        lu, node_uuid, "all_instances_info",
        [list(cluster.enabled_hypervisors)])
    if not listing.success or not isinstance(listing.payload, dict):
        return []
    here = {i.name: i for i in cfg.instances.values()
            if i.primary_node == node_uuid and i.uuid not in skip}
    kept = sorted(name for name, info in listing.payload.items()
                  if isinstance(info, dict) and name in here and
                  info.get("state") in _KEPT_STATES)
    lockset = lu.ctx.glm.lockset(locking.LEVEL_INSTANCE)
    done = []
    for name in kept:
        inst = here[name]
        token = _Token(name)
        if not lockset.acquire_opportunistic([inst.uuid], token):
            lu.log_info("Instance %s has a kept domain on node %s, but"
                        " another job holds it; left alone", name, node.name)
            continue
        try:
            if await _clean_up_one(lu, node, inst.uuid,
                                   listing.payload[name]):
                done.append(name)
        finally:
            lockset.release(token)
    return done


async def _clean_up_one(lu, node, inst_uuid, info):
    cfg = lu.cfg
    inst = cfg.instances.get(inst_uuid)
    if inst is None or inst.primary_node != node.uuid:
        return False    # removed or moved while we asked
    state = info.get("state")
    user_down = (inst.admin_state == constants.ADMINST_UP and
                 user_shutdown.is_user_down(cfg.cluster, inst, info))
    if user_down:
        # what the watcher's OP_INSTANCE_SHUTDOWN (source "user") records
        cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_DOWN,
                                     constants.USER_SOURCE)
        lu.log_info("Instance %s was shut down by its user: recorded as"
                    " stopped", inst.name)
    lu.log_info("Cleaning up the kept (%s) domain of instance %s on node %s"
                " before using its resources", state, inst.name, node.name)
    result = await node_calls.try_call_node(
        lu, node.uuid, "instance_cleanup", [inst.name, inst.hypervisor])
    if not result.success:
        lu.log_warning("Could not clean up the domain of instance %s on node"
                       " %s: %s", inst.name, node.name, result.fail_msg)
        return False
    return True
