"""Prerequisite checks on node and instance state shared by the logical
units.
"""


from ganeti import constants
from ganeti import errors
from ganeti import hypervisor
from ganeti.cmdlib import node_calls


#: Admin states in which an instance is "online" (Ganeti's INSTANCE_ONLINE)
INSTANCE_ONLINE = frozenset([constants.ADMINST_UP, constants.ADMINST_DOWN])


#: ... and not supposed to run
INSTANCE_NOT_RUNNING = frozenset([constants.ADMINST_DOWN,
                                  constants.ADMINST_OFFLINE])


def check_node_online(cfg, node_uuid, msg=None):
    node = cfg.get_node(node_uuid)
    if node.offline:
        raise errors.OpPrereqError(
            "Can't use offline node %s%s" % (node.name,
                                             (", " + msg) if msg else ""),
            errors.ECODE_STATE)


def check_node_vm_capable(cfg, node_uuid, role="primary"):
    node = cfg.get_node(node_uuid)
    if node.offline:
        raise errors.OpPrereqError("Cannot use offline %s node '%s'"
                                   % (role, node.name), errors.ECODE_STATE)
    if node.drained:
        raise errors.OpPrereqError("Cannot use drained %s node '%s'"
                                   % (role, node.name), errors.ECODE_STATE)
    if not node.vm_capable:
        raise errors.OpPrereqError("Cannot use non-vm_capable %s node '%s'"
                                   % (role, node.name), errors.ECODE_STATE)


def check_instance_state(instance, states, msg):
    if instance.admin_state not in states:
        raise errors.OpPrereqError(
            "Instance '%s' is marked to be %s, %s"
            % (instance.display_name, instance.admin_state, msg),
            errors.ECODE_STATE)


def check_not_forthcoming(instance, what):
    if instance.forthcoming:
        raise errors.OpPrereqError(
            "Instance '%s' is forthcoming (it exists only in the"
            " configuration), cannot %s" % (instance.display_name, what),
            errors.ECODE_STATE)


def is_live(info):
    return bool(info) and info.get("state") in hypervisor.LIVE_STATES


async def check_not_running(lu, instance, msg):
    """Refuse (OpPrereqError) if the primary node runs the instance."""
    if lu.cfg.get_node(instance.primary_node).offline:
        lu.log_warning("Primary node offline, ignoring check that instance"
                       " is down")
        return
    info = await node_calls.live_info(lu, instance)
    if is_live(info):
        raise errors.OpPrereqError("Instance %s is running, %s"
                                   % (instance.name, msg), errors.ECODE_STATE)
