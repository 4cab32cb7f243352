"""Moving a reservation: a forthcoming instance placed on other nodes.

A forthcoming instance exists only in the configuration: it has no data
and no disk on any node, yet what it declares is reserved on its nodes as
if it were real (docs/config.rst).  Moving it is therefore a change of the
configuration only.  The logical units that move instances (replace-disks
with a new secondary, move, recreate-disks with new nodes, failover and
migrate; and so the jobs of node and group evacuations and of ``hbal -X``)
ask no node daemon to do anything for it, and check what placing a
reservation checks:

* every new node is online, not drained and vm_capable;
* the nodes of a drbd reservation stay in one node group (group changes
  are one step: the evacuation LUs re-place it with recreate-disks);
* when the group changes, the new group's instance policy, against what
  the reservation declares (as when it was created);
* the new nodes' free resources as they report them minus what is
  reserved there, what the instance holds already counting as its own
  (:func:`ganeti.cmdlib.capacity.check_instance_fits`).
"""

from ganeti import constants
from ganeti import errors
from ganeti import ipolicy
from ganeti.cmdlib import capacity
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import node_calls

__all__ = ["check_placed", "check_node", "check_one_group",
           "check_placement", "place"]


def check_placed(instance, what):
    """Refuse (OpPrereqError) a forthcoming instance that has no node yet:
    there is nothing to move."""
    if not instance.primary_node:
        raise errors.OpPrereqError(
            "Instance '%s' is forthcoming and not placed on any node yet,"
            " cannot %s (recreate-disks with nodes or an allocator places"
            " it)" % (instance.display_name, what), errors.ECODE_STATE)


def check_node(cfg, instance, node_uuid, field, role, allow_current=False):
    """Refuse ``node_uuid`` as the reservation's new ``role`` node
    ("primary" or "secondary"), naming ``field``: it must be usable and,
    unless ``allow_current``, not hold that role already."""
    node = cfg.get_node(node_uuid)
    name = instance.display_name
    if not allow_current:
        if node.uuid == instance.primary_node:
            raise errors.OpPrereqError(
                "%s: node %s is already the primary node of instance %s"
                % (field, node.name, name), errors.ECODE_INVAL)
        if role == "secondary" and node.uuid in instance.secondary_nodes:
            raise errors.OpPrereqError(
                "%s: node %s is already the secondary node of instance %s"
                % (field, node.name, name), errors.ECODE_INVAL)
    for bad, why in ((node.offline, "offline"),
                     (node.drained, "drained (no new instances)"),
                     (not node.vm_capable, "not vm_capable")):
        if bad:
            raise errors.OpPrereqError(
                "%s: node %s is %s, the reservation of instance %s cannot"
                " move there" % (field, node.name, why, name),
                errors.ECODE_STATE)


def _group_name(cfg, group_uuid):
    group = cfg.nodegroups.get(group_uuid)
    return group.name if group is not None else group_uuid


def check_one_group(cfg, instance, node_uuids, field, keep_group):
    """Refuse nodes of different groups; with ``keep_group``, nodes outside
    the group of the instance's primary node."""
    groups = [cfg.get_node(n).group for n in node_uuids]
    if keep_group and instance.primary_node in cfg.nodes:
        current = cfg.nodes[instance.primary_node].group
        for node_uuid, group in zip(node_uuids, groups):
            if group != current:
                raise errors.OpPrereqError(
                    "%s: node %s is in node group %s, instance %s is in"
                    " group %s; the nodes of a drbd instance stay in one"
                    " group (gnt-instance change-group moves its"
                    " reservation to another group)"
                    % (field, node_calls.node_name(cfg, node_uuid),
                       _group_name(cfg, group), instance.display_name,
                       _group_name(cfg, current)), errors.ECODE_INVAL)
    if len(set(groups)) > 1:
        raise errors.OpPrereqError(
            "%s: the nodes %s are in different node groups (%s); the nodes"
            " of instance %s must be in one group"
            % (field, ", ".join(node_calls.node_name(cfg, n)
                                for n in node_uuids),
               ", ".join(_group_name(cfg, g) for g in groups),
               instance.display_name), errors.ECODE_INVAL)


def _placed(cfg, instance, node_uuids):
    """(instance, disks): copies of the reservation on ``node_uuids``
    (primary first), as :func:`place` would leave the configuration."""
    candidate = instance.copy()
    candidate.primary_node = node_uuids[0]
    candidate.secondary_nodes = list(node_uuids[1:])
    disks = []
    for disk in cfg.instance_disks(instance):
        disk = disk.copy()
        if disk.dev_type in constants.DTS_NODE_LOCAL:
            disk.nodes = list(candidate.all_nodes)
        disks.append(disk)
    return candidate, disks


async def check_placement(lu, instance, node_uuids, ignore_ipolicy=False):
    """Refuse (OpPrereqError) unless the reservation fits on
    ``node_uuids`` (primary first): the group's policy if the group
    changes, and the nodes' free resources (ECODE_NORES, naming the node
    and the resource)."""
    cfg = lu.cfg
    candidate, disks = _placed(cfg, instance, node_uuids)
    old = cfg.nodes.get(instance.primary_node)
    new = cfg.get_node(node_uuids[0])
    if old is None or old.group != new.group:
        ipolicy.check_allocation(
            lu, new.uuid, ignore_ipolicy,
            **ipolicy.declared_spec(cfg, candidate, disks))
    await capacity.check_instance_fits(lu, candidate, disks=disks)


def place(lu, instance, node_uuids):
    """Name ``node_uuids`` (primary first) as the reservation's nodes in
    the configuration; nothing else happens, no node is asked.

    Drbd disks that have a logical id already (a configuration written by
    Ganeti gives forthcoming disks one) keep their port and secret, and
    their minor on a node that stays; a new node gets a free minor.
    """
    cfg = lu.cfg
    old_nodes = list(instance.all_nodes)
    primary, secondaries = node_uuids[0], list(node_uuids[1:])
    lu.log_info("Instance %s is forthcoming: only the configuration changes,"
                " its reservation moves from %s to %s", instance.display_name,
                ", ".join(node_calls.node_name(cfg, n) for n in old_nodes)
                or "no node",
                ", ".join(node_calls.node_name(cfg, n) for n in node_uuids))
    if secondaries:
        for disk in cfg.instance_disks(instance):
            lid = disk.logical_id
            if disk.dev_type != constants.DT_DRBD8 or len(lid or []) != 6:
                continue
            kept = {lid[0]: lid[3], lid[1]: lid[4]}
            new = list(lid)
            for pos, node_uuid in ((0, primary), (1, secondaries[0])):
                new[pos] = node_uuid
                new[pos + 3] = kept[node_uuid] if node_uuid in kept else \
                    instance_disks.free_drbd_minor(cfg, node_uuid)
            if new != list(lid):
                cfg.modify_disk(disk.uuid, logical_id=new)
    cfg.modify_instance(instance.uuid, primary_node=primary,
                        secondary_nodes=secondaries)
