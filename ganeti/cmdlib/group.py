"""Node group logical units: add, remove, rename, set parameters, assign
nodes.

Groups are referred to by UUID everywhere in the configuration (nodes carry
their group's UUID), so a rename touches only the group itself.  Moving
nodes between groups is refused when it would split an instance -- one
whose nodes (primary and secondaries) end up in different groups -- that
was not split before, unless ``force`` is given (Ganeti's rule).
"""

from ganeti import constants
from ganeti import diskparams as diskparams_mod
from ganeti import errors
from ganeti import ipolicy
from ganeti import locking
from ganeti import objects
from ganeti import qlang
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance_params import update_params
from ganeti.cmdlib.node import check_ndparams, merge_state


def check_alloc_policy(policy):
    if policy is not None and policy not in constants.VALID_ALLOC_POLICIES:
        raise errors.OpPrereqError(
            "alloc_policy: '%s' is not one of %s"
            % (policy, ", ".join(constants.VALID_ALLOC_POLICIES)),
            errors.ECODE_INVAL)


def check_diskparams(diskparams, field="diskparams"):
    """The checked and typed diskparams of a group ("default" removes a
    parameter); OpPrereqError naming the parameter otherwise."""
    return diskparams_mod.check_diskparams(diskparams, field,
                                           allow_default=True)


def merge_diskparams(current, changes):
    result = {k: dict(v) for k, v in (current or {}).items()}
    for template, params in (changes or {}).items():
        merged = update_params(result.get(template, {}), params)
        if merged:
            result[template] = merged
        else:
            result.pop(template, None)
    return result


def _check_group_params(op):
    """The parameters a group is added or modified with."""
    check_alloc_policy(op.alloc_policy)
    if op.ndparams:
        check_ndparams(op.ndparams, level="group")
    op.diskparams = check_diskparams(op.diskparams)
    ipolicy.check_policy(op.ipolicy, group=True)


def _check_group_policy(lu, group, custom):
    """A group's new policy: its disk templates must be enabled on the
    cluster (Ganeti's rule); instances of the group that would newly break
    it are named in a warning."""
    cfg = lu.cfg
    full = objects.fill_group_ipolicy(
        cfg.cluster, objects.NodeGroup(ipolicy=custom))
    ipolicy.check_templates_enabled(full, cfg.cluster.enabled_disk_templates)
    if group is None:
        return
    members = [i for i in cfg.instances.values()
               if i.primary_node in cfg.nodes and
               cfg.nodes[i.primary_node].group == group.uuid]
    before = ipolicy.violating_instances(
        cfg, lambda g: objects.fill_group_ipolicy(cfg.cluster, g), members)
    after = ipolicy.violating_instances(cfg, lambda g: full, members)
    new = sorted(set(after) - set(before))
    if new:
        lu.log_warning("After the ipolicy change the following instances"
                       " violate it: %s", ", ".join(new))


class _GroupLU(LogicalUnit):
    """A unit on one existing group (``op.group_name``), which it locks."""

    def expand_names(self):
        group = self.cfg.get_nodegroup(self.op.group_name)
        self.group_uuid = group.uuid
        self.needed_locks[locking.LEVEL_NODEGROUP] = [group.uuid]


def _check_name_free(cfg, name, except_uuid=None):
    for group in cfg.nodegroups.values():
        if group.name == name and group.uuid != except_uuid:
            raise errors.OpPrereqError("Node group '%s' already exists"
                                       % name, errors.ECODE_EXISTS)


class LUGroupAdd(LogicalUnit):
    """gnt-group add"""
    OP_ID = "OP_GROUP_ADD"

    def check_arguments(self):
        _check_group_params(self.op)

    def check_prereq(self):
        _check_name_free(self.cfg, self.op.group_name)
        _check_group_policy(self, None, self.op.ipolicy)

    async def exec_(self):
        op = self.op
        group = objects.NodeGroup(
            name=op.group_name,
            alloc_policy=op.alloc_policy or constants.ALLOC_POLICY_PREFERRED,
            ndparams=dict(op.ndparams or {}),
            diskparams=merge_diskparams({}, op.diskparams),
            ipolicy=dict(op.ipolicy or {}),
            hv_state_static=merge_state({}, op.hv_state, "hv_state"),
            disk_state_static=merge_state({}, op.disk_state, "disk_state"))
        uuid = self.cfg.add_nodegroup(group)
        await self.ctx.glm.add(locking.LEVEL_NODEGROUP, [uuid])
        self.log_info("Added node group %s (%s)", op.group_name, uuid)
        return None


class LUGroupRemove(_GroupLU):
    """gnt-group remove: only an empty group, never the last one."""
    OP_ID = "OP_GROUP_REMOVE"

    def check_prereq(self):
        cfg = self.cfg
        group = cfg.nodegroups.get(self.group_uuid)
        if group is None:
            raise errors.OpPrereqError("Node group '%s' is not known"
                                       % self.op.group_name,
                                       errors.ECODE_NOENT)
        members = qlang.nice_sort(n.name for n in cfg.group_nodes(group.uuid))
        if members:
            raise errors.OpPrereqError(
                "Node group '%s' is not empty; it has the nodes %s (move"
                " them with gnt-group assign-nodes)"
                % (group.name, ", ".join(members)), errors.ECODE_STATE)
        if len(cfg.nodegroups) == 1:
            raise errors.OpPrereqError(
                "Node group '%s' is the only one; the last group cannot be"
                " removed" % group.name, errors.ECODE_STATE)
        self.group = group

    async def exec_(self):
        self.cfg.remove_nodegroup(self.group_uuid)
        await self.ctx.glm.remove(locking.LEVEL_NODEGROUP, [self.group_uuid],
                                  self.owner)
        return None


class LUGroupRename(_GroupLU):
    """gnt-group rename: the group keeps its UUID, nothing else changes."""
    OP_ID = "OP_GROUP_RENAME"

    def check_prereq(self):
        _check_name_free(self.cfg, self.op.new_name,
                         except_uuid=self.group_uuid)

    async def exec_(self):
        self.cfg.rename_nodegroup(self.group_uuid, self.op.new_name)
        return self.op.new_name


class LUGroupSetParams(_GroupLU):
    """gnt-group modify"""
    OP_ID = "OP_GROUP_SET_PARAMS"

    def check_arguments(self):
        op = self.op
        if all(v is None or v == {} for v in (
                op.alloc_policy, op.ndparams, op.diskparams, op.hv_state,
                op.disk_state, op.ipolicy)):
            raise errors.OpPrereqError("Please give at least one"
                                       " modification", errors.ECODE_INVAL)
        _check_group_params(op)

    def check_prereq(self):
        op = self.op
        group = self.cfg.nodegroups[self.group_uuid]
        changes = {}
        if op.alloc_policy is not None:
            changes["alloc_policy"] = op.alloc_policy
        if op.ndparams:
            changes["ndparams"] = update_params(group.ndparams, op.ndparams)
        if op.diskparams:
            changes["diskparams"] = merge_diskparams(group.diskparams,
                                                     op.diskparams)
        if op.hv_state:
            changes["hv_state_static"] = merge_state(
                group.hv_state_static, op.hv_state, "hv_state")
        if op.disk_state:
            changes["disk_state_static"] = merge_state(
                group.disk_state_static, op.disk_state, "disk_state")
        if op.ipolicy:
            changes["ipolicy"] = ipolicy.update_policy(group.ipolicy,
                                                       op.ipolicy)
            _check_group_policy(self, group, changes["ipolicy"])
        self.changes = changes

    async def exec_(self):
        if self.changes:
            self.cfg.set_nodegroup_params(self.group_uuid, **self.changes)
        result = []
        for key in sorted(self.changes):
            value = self.changes[key]
            result.append((key.replace("_static", ""), value
                           if isinstance(value, str) else
                           objects.fill_dict({}, value)))
        return result


class LUGroupAssignNodes(_GroupLU):
    """gnt-group assign-nodes: move nodes into a group."""
    OP_ID = "OP_GROUP_ASSIGN_NODES"

    def expand_names(self):
        cfg = self.cfg
        super().expand_names()
        names = list(self.op.nodes or []) + list(self.op.node_uuids or [])
        if not names:
            raise errors.OpPrereqError("nodes: give at least one node",
                                       errors.ECODE_INVAL)
        uuids = []
        for name in names:
            uuid = cfg.get_node(name).uuid
            if uuid not in uuids:
                uuids.append(uuid)
        self.node_uuids = uuids
        self.needed_locks[locking.LEVEL_NODE] = list(uuids)

    def declare_locks(self, level):
        if level == locking.LEVEL_NODEGROUP:
            # the groups the nodes come from, as they are now; checked again
            # once the locks are held
            groups = {self.cfg.nodes[u].group for u in self.node_uuids
                      if u in self.cfg.nodes}
            self.needed_locks[locking.LEVEL_NODEGROUP] = sorted(
                groups | {self.group_uuid})

    def split_instances(self, moves):
        """(newly split, still split) instance names for ``moves``
        ({node uuid: new group uuid})."""
        cfg = self.cfg
        new, old = [], []
        for inst in cfg.instances.values():
            nodes = list(inst.all_nodes)
            if len(nodes) < 2:
                continue
            before = {cfg.nodes[n].group for n in nodes if n in cfg.nodes}
            after = {moves.get(n, cfg.nodes[n].group) for n in nodes
                     if n in cfg.nodes}
            if len(after) > 1:
                (old if len(before) > 1 else new).append(inst.display_name)
        return qlang.nice_sort(new), qlang.nice_sort(old)

    def check_prereq(self):
        cfg = self.cfg
        if self.group_uuid not in cfg.nodegroups:
            raise errors.OpPrereqError("Node group '%s' is not known"
                                       % self.op.group_name,
                                       errors.ECODE_NOENT)
        wanted = {cfg.nodes[u].group for u in self.node_uuids
                  if u in cfg.nodes} | {self.group_uuid}
        held = set(self.needed_locks.get(locking.LEVEL_NODEGROUP) or [])
        if not wanted <= held:
            raise errors.OpPrereqError(
                "Nodes changed groups while their locks were taken; try"
                " again", errors.ECODE_STATE)
        moves = {u: self.group_uuid for u in self.node_uuids
                 if cfg.nodes[u].group != self.group_uuid}
        new, old = self.split_instances(moves)
        if new:
            if not self.op.force:
                raise errors.OpPrereqError(
                    "Moving the nodes would split these instances between"
                    " node groups: %s; give --force to do it anyway"
                    % ", ".join(new), errors.ECODE_STATE)
            self.log_warning("This splits these instances between node"
                             " groups: %s" % ", ".join(new))
            if old:
                self.log_warning("These instances stay split between node"
                                 " groups: %s" % ", ".join(old))
        movers = [i for i in cfg.instances.values()
                  if i.primary_node in moves]
        target = cfg.nodegroups[self.group_uuid]
        bad = ipolicy.violating_instances(
            cfg, lambda g: objects.fill_group_ipolicy(cfg.cluster, target),
            movers)
        if bad:
            self.log_warning("These instances do not meet the instance"
                             " policy of group %s: %s"
                             % (target.name, ", ".join(bad)))
        self.moves = moves

    async def exec_(self):
        cfg = self.cfg
        group = cfg.nodegroups[self.group_uuid]
        for uuid in sorted(self.moves, key=lambda u: cfg.nodes[u].name):
            node = cfg.nodes[uuid]
            old = cfg.nodegroups.get(node.group)
            cfg.assign_node_to_group(uuid, self.group_uuid)
            self.log_info("Moved node %s from group %s to %s", node.name,
                          old.name if old else node.group, group.name)
        return None
