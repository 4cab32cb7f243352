"""The iallocator request types and the checks of their answers.

Each request knows three things: the ``request`` object of the input
document (``to_dict``), the extra command-line parameters it gives an
external allocator (``extra_params``), and what a valid ``result`` looks
like (``check_result``).  The checks are strict because the master acts on
the answer: a node that does not exist, an offline or drained target, the
wrong number of nodes, an instance that was not asked about or an
evacuation opcode other than migrate, failover and replace-disks make the
whole answer invalid (:class:`InvalidAnswer`), and nothing is done with it.

Field names and shapes are those of Ganeti's iallocator protocol, version
2, so external allocators written for Ganeti (its ``hail``) answer these
requests.
"""

import attr

from ganeti import constants
from ganeti import errors
from ganeti import opcodes

__all__ = ["MODES", "MODE_ALLOC", "MODE_MULTI_ALLOC", "MODE_RELOC",
           "MODE_CHG_GROUP", "MODE_NODE_EVAC", "MODE_ALLOC_SECONDARY",
           "EVAC_JOB_OPS", "InvalidAnswer", "disk_space_total",
           "AllocateRequest", "MultiAllocateRequest", "RelocateRequest",
           "NodeEvacuateRequest", "ChangeGroupRequest",
           "AllocateSecondaryRequest", "EvacuationPlan", "MODE_BALANCE",
           "MODE_CAPACITY", "EXTENSION_MODES", "BalanceRequest",
           "CapacityRequest", "CapacityPlan"]

MODE_ALLOC = "allocate"
MODE_MULTI_ALLOC = "multi-allocate"
MODE_RELOC = "relocate"
MODE_CHG_GROUP = "change-group"
MODE_NODE_EVAC = "node-evacuate"
MODE_ALLOC_SECONDARY = "allocate-secondary"
MODE_BALANCE = "balance"
MODE_CAPACITY = "capacity"
#: every request type, in the order documentation lists them
MODES = (MODE_ALLOC, MODE_MULTI_ALLOC, MODE_RELOC, MODE_CHG_GROUP,
         MODE_NODE_EVAC, MODE_ALLOC_SECONDARY, MODE_BALANCE, MODE_CAPACITY)
#: the types Ganeti's own allocators do not know (its design named them,
#: it never shipped them)
EXTENSION_MODES = frozenset([MODE_BALANCE, MODE_CAPACITY])
assert frozenset(MODES) == opcodes.IALLOCATOR_MODES

#: the only opcodes an evacuation plan may contain
EVAC_JOB_OPS = frozenset(["OP_INSTANCE_MIGRATE", "OP_INSTANCE_FAILOVER",
                          "OP_INSTANCE_REPLACE_DISKS"])
#: opcode parameters of those that name a node
_OP_NODE_PARAMS = ("target_node", "remote_node")


class InvalidAnswer(errors.GenericError):
    """The allocator's ``result`` does not fit the request (the text says
    why)."""


def disk_space_total(disks):
    """Disk space a set of disks needs per node, as Ganeti counts it:
    ``[{"dev_type": ..., "size": MiB}, ...]``; drbd adds its metadata,
    diskless and blockdev take nothing."""
    total = 0
    for disk in disks:
        dev_type = disk.get("dev_type")
        if dev_type in (constants.DT_DISKLESS, constants.DT_BLOCK):
            continue
        total += int(disk.get("size") or 0)
        if dev_type == constants.DT_DRBD8:
            total += constants.DRBD_META_SIZE
    return total


# --- checks shared by the request types ----------------------------------

def _show(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _node_entry(data, name, what):
    if not isinstance(name, str):
        raise InvalidAnswer("%s: expected a node name, got %s"
                            % (what, _show(name)))
    node = data["nodes"].get(name)
    if node is None:
        raise InvalidAnswer("%s: node '%s' does not exist in the cluster"
                            % (what, name))
    return node


def _check_target(data, name, what):
    """A node that may receive an instance: known, online, not drained,
    vm_capable."""
    node = _node_entry(data, name, what)
    for flag, text in (("offline", "offline"), ("drained", "drained")):
        if node.get(flag):
            raise InvalidAnswer("%s: node '%s' is %s" % (what, name, text))
    if not node.get("vm_capable", True):
        raise InvalidAnswer("%s: node '%s' is not vm_capable" % (what, name))
    return node


def _check_node_list(data, value, count, what, allowed=None):
    if not isinstance(value, list):
        raise InvalidAnswer("%s: expected a list of node names, got %s"
                            % (what, _show(value)))
    if len(value) != count:
        raise InvalidAnswer("%s: %d node(s) returned, %d required"
                            % (what, len(value), count))
    if len(set(map(str, value))) != len(value):
        raise InvalidAnswer("%s: a node is returned twice (%s)"
                            % (what, ", ".join(map(str, value))))
    for name in value:
        _check_target(data, name, what)
        if allowed is not None and name not in allowed:
            raise InvalidAnswer("%s: node '%s' is not among the nodes the"
                                " request allowed" % (what, name))
    return list(value)


def _group_names(data, node_names):
    result = set()
    for name in node_names:
        node = data["nodes"].get(name)
        if node is None:
            continue
        group = data["nodegroups"].get(node.get("group"))
        result.add(group["name"] if group else node.get("group"))
    return result


def _same_group(data, names, what):
    groups = _group_names(data, names)
    if len(groups) > 1:
        raise InvalidAnswer("%s: nodes %s are in different node groups (%s)"
                            % (what, ", ".join(names),
                               ", ".join(sorted(map(str, groups)))))


# --- allocate --------------------------------------------------------------

@attr.s(frozen=True)
class AllocateRequest(object):
    """A new instance (or an existing one's spec, for recreate-disks):
    ``required_nodes`` nodes, primary first."""
    MODE = MODE_ALLOC

    name = attr.ib()
    disk_template = attr.ib()
    memory = attr.ib()
    vcpus = attr.ib()
    disks = attr.ib()           # [{"size", "mode", "spindles"?}]
    hypervisor = attr.ib()
    os = attr.ib(default="")
    tags = attr.ib(default=())
    nics = attr.ib(default=())  # [{"mac", "ip", "mode", "link", ...}]
    spindle_use = attr.ib(default=1)
    group_name = attr.ib(default=None)
    #: node names the answer must stay within (None: any)
    restrict_to_nodes = attr.ib(default=None)

    @property
    def required_nodes(self):
        return 2 if self.disk_template in constants.DTS_INT_MIRROR else 1

    def _disks(self):
        result = []
        for disk in self.disks:
            entry = {"size": int(disk.get("size") or 0),
                     "mode": disk.get("mode") or constants.DISK_RDWR,
                     "dev_type": self.disk_template}
            if disk.get("spindles") is not None:
                entry["spindles"] = disk["spindles"]
            result.append(entry)
        return result

    def body(self):
        """The request without its type (as multi-allocate lists it)."""
        disks = self._disks()
        return {
            "name": self.name,
            "disk_template": self.disk_template,
            "group_name": self.group_name,
            "tags": sorted(self.tags),
            "os": self.os or "",
            "vcpus": int(self.vcpus),
            "memory": int(self.memory),
            "spindle_use": int(self.spindle_use),
            "disks": disks,
            "disk_space_total": disk_space_total(disks),
            "nics": [dict(n) for n in self.nics],
            "required_nodes": self.required_nodes,
            "hypervisor": self.hypervisor,
        }

    def to_dict(self):
        request = self.body()
        request["type"] = self.MODE
        if self.restrict_to_nodes is not None:
            request["restrict-to-nodes"] = list(self.restrict_to_nodes)
        return request

    def extra_params(self):
        return {}

    @property
    def template_for_data(self):
        return self.disk_template

    def check_result(self, result, data):
        """The node names (primary first)."""
        what = "nodes for instance %s" % self.name
        nodes = _check_node_list(data, result, self.required_nodes, what,
                                 self.restrict_to_nodes)
        _same_group(data, nodes, what)
        if self.group_name is not None:
            groups = _group_names(data, nodes)
            if groups != {self.group_name}:
                raise InvalidAnswer("%s: nodes %s are not in the requested"
                                    " node group %s"
                                    % (what, ", ".join(nodes),
                                       self.group_name))
        return nodes


# --- multi-allocate ----------------------------------------------------------

@attr.s(frozen=True)
class MultiAllocateRequest(object):
    """Several new instances placed together; the answer is
    ``[[[name, [nodes]], ...], [failed names]]``."""
    MODE = MODE_MULTI_ALLOC

    instances = attr.ib()       # AllocateRequest, in order

    def to_dict(self):
        return {"type": self.MODE,
                "instances": [r.body() for r in self.instances]}

    def extra_params(self):
        return {}

    @property
    def template_for_data(self):
        for req in self.instances:
            return req.disk_template
        return None

    def check_result(self, result, data):
        """``(allocated [(name, nodes)], failed [names])``."""
        if not (isinstance(result, list) and len(result) == 2 and
                all(isinstance(part, list) for part in result)):
            raise InvalidAnswer("expected [allocated, failed] (two lists),"
                                " got %s" % _show(result))
        by_name = {r.name: r for r in self.instances}
        seen = set()
        allocated = []
        for idx, item in enumerate(result[0]):
            if not (isinstance(item, list) and len(item) == 2):
                raise InvalidAnswer("allocated/%d: expected [instance,"
                                    " [nodes]], got %s" % (idx, _show(item)))
            name, nodes = item
            req = by_name.get(name)
            if req is None:
                raise InvalidAnswer("allocated/%d: instance %s was not part"
                                    " of the request" % (idx, _show(name)))
            if name in seen:
                raise InvalidAnswer("instance %s is answered twice" % name)
            seen.add(name)
            allocated.append((name, req.check_result(nodes, data)))
        failed = []
        for idx, name in enumerate(result[1]):
            if name not in by_name:
                raise InvalidAnswer("failed/%d: instance %s was not part of"
                                    " the request" % (idx, _show(name)))
            if name in seen:
                raise InvalidAnswer("instance %s is answered twice" % name)
            seen.add(name)
            failed.append(name)
        missing = [r.name for r in self.instances if r.name not in seen]
        if missing:
            raise InvalidAnswer("instances %s are neither allocated nor"
                                " failed" % ", ".join(missing))
        return allocated, failed


# --- relocate ----------------------------------------------------------------

@attr.s(frozen=True)
class RelocateRequest(object):
    """A new node for one instance in place of ``relocate_from``: a
    shared-storage instance's new primary, a drbd instance's new
    secondary."""
    MODE = MODE_RELOC

    name = attr.ib()
    disk_template = attr.ib()
    disk_space_total = attr.ib()
    relocate_from = attr.ib()   # node names
    instance_nodes = attr.ib()  # the instance's nodes, primary first
    required_nodes = attr.ib(default=1)

    def to_dict(self):
        return {"type": self.MODE, "name": self.name,
                "disk_space_total": int(self.disk_space_total),
                "required_nodes": self.required_nodes,
                "relocate_from": list(self.relocate_from)}

    def extra_params(self):
        return {}

    @property
    def template_for_data(self):
        return self.disk_template

    def check_result(self, result, data):
        what = "new node for instance %s" % self.name
        nodes = _check_node_list(data, result, self.required_nodes, what)
        for node in nodes:
            if node in self.instance_nodes:
                raise InvalidAnswer("%s: node '%s' already holds the"
                                    " instance" % (what, node))
        # Ganeti's rule: the instance does not change node group here
        primary = list(self.instance_nodes[:1])
        before = _group_names(data, list(self.relocate_from) + primary)
        after = _group_names(data, nodes + primary)
        if not after <= before:
            raise InvalidAnswer("%s: the node groups of the answer (%s)"
                                " differ from the instance's (%s)"
                                % (what, ", ".join(sorted(after)),
                                   ", ".join(sorted(before))))
        return nodes


# --- allocate-secondary ------------------------------------------------------

@attr.s(frozen=True)
class AllocateSecondaryRequest(object):
    """A secondary node for an instance being converted to drbd."""
    MODE = MODE_ALLOC_SECONDARY

    name = attr.ib()
    primary = attr.ib()         # node name

    def to_dict(self):
        return {"type": self.MODE, "name": self.name}

    def extra_params(self):
        return {}

    @property
    def template_for_data(self):
        return constants.DT_DRBD8

    def check_result(self, result, data):
        what = "secondary node for instance %s" % self.name
        if not isinstance(result, str):
            raise InvalidAnswer("%s: expected one node name, got %s"
                                % (what, _show(result)))
        _check_target(data, result, what)
        if result == self.primary:
            raise InvalidAnswer("%s: node '%s' is the instance's primary"
                                % (what, result))
        _same_group(data, [self.primary, result], what)
        return result


# --- node-evacuate and change-group ------------------------------------------

@attr.s(frozen=True)
class EvacuationPlan(object):
    """A checked node-evacuate or change-group answer."""
    #: [(instance, group name, [node names])]
    moved = attr.ib()
    #: [(instance, reason or None)]
    failed = attr.ib()
    #: [[OpCode, ...], ...]: one job per list
    jobs = attr.ib()


class _EvacuationRequest(object):

    def _wanted(self, data):
        """The instances the answer may name."""
        return set(self.instances)

    def _check_target_node(self, data, name, what):
        _check_target(data, name, what)

    def _check_moved_group(self, data, group, what):
        """Node evacuation may move to any group; change-group and balance
        narrow this."""

    def check_result(self, result, data):
        if not (isinstance(result, list) and len(result) == 3 and
                all(isinstance(part, list) for part in result)):
            raise InvalidAnswer("expected [moved, failed, jobs] (three"
                                " lists), got %s" % _show(result))
        wanted = self._wanted(data)
        moved = []
        for idx, item in enumerate(result[0]):
            what = "moved/%d" % idx
            if not (isinstance(item, list) and len(item) == 3 and
                    isinstance(item[0], str) and isinstance(item[1], str)
                    and isinstance(item[2], list)):
                raise InvalidAnswer("%s: expected [instance, group,"
                                    " [nodes]], got %s" % (what, _show(item)))
            name, group, nodes = item
            if name not in wanted:
                raise InvalidAnswer("%s: instance %s was not part of the"
                                    " request" % (what, name))
            for node in nodes:
                _node_entry(data, node, what)
            self._check_moved_group(data, group, what)
            moved.append((name, group, list(nodes)))
        failed = []
        for idx, item in enumerate(result[1]):
            what = "failed/%d" % idx
            if not (isinstance(item, list) and len(item) == 2 and
                    isinstance(item[0], str) and
                    (item[1] is None or isinstance(item[1], str))):
                raise InvalidAnswer("%s: expected [instance, reason], got %s"
                                    % (what, _show(item)))
            if item[0] not in wanted:
                raise InvalidAnswer("%s: instance %s was not part of the"
                                    " request" % (what, item[0]))
            failed.append((item[0], item[1]))
        jobs = []
        for jidx, job in enumerate(result[2]):
            if not isinstance(job, list) or not job:
                raise InvalidAnswer("jobs/%d: expected a non-empty list of"
                                    " opcodes, got %s" % (jidx, _show(job)))
            ops = []
            for oidx, op in enumerate(job):
                ops.append(self._check_op(data, op, "jobs/%d/%d"
                                          % (jidx, oidx)))
            jobs.append(ops)
        return EvacuationPlan(moved=moved, failed=failed, jobs=jobs)

    def _check_op(self, data, op, what):
        if not isinstance(op, dict):
            raise InvalidAnswer("%s: expected an opcode object, got %s"
                                % (what, _show(op)))
        op_id = op.get("OP_ID")
        if op_id not in EVAC_JOB_OPS:
            raise InvalidAnswer("%s: opcode %s is not allowed in an"
                                " evacuation (only %s)"
                                % (what, _show(op_id),
                                   ", ".join(sorted(EVAC_JOB_OPS))))
        name = op.get("instance_name")
        if name not in self._wanted(data):
            raise InvalidAnswer("%s: instance %s was not part of the request"
                                % (what, _show(name)))
        for param in _OP_NODE_PARAMS:
            if op.get(param) is not None:
                self._check_target_node(data, op[param],
                                        "%s/%s" % (what, param))
        try:
            return opcodes.from_dict(op)
        except errors.GenericError as err:
            raise InvalidAnswer("%s: %s" % (what, err.args[0]))


@attr.s(frozen=True)
class NodeEvacuateRequest(_EvacuationRequest):
    """Every listed instance off the node(s) ``leaving``: the answer is
    ``[moved, failed, jobs]``."""
    MODE = MODE_NODE_EVAC

    instances = attr.ib()       # names
    evac_mode = attr.ib()
    leaving = attr.ib(default=())   # node names being emptied
    ignore_soft_errors = attr.ib(default=False)

    def to_dict(self):
        return {"type": self.MODE, "instances": list(self.instances),
                "evac_mode": self.evac_mode}

    def extra_params(self):
        # Ganeti passes this one as a flag of the allocator
        return {"ignore-soft-errors": None} if self.ignore_soft_errors \
            else {}

    @property
    def template_for_data(self):
        return None

    def _check_target_node(self, data, name, what):
        _EvacuationRequest._check_target_node(self, data, name, what)
        if name in self.leaving:
            raise InvalidAnswer("%s: node '%s' is the node being evacuated"
                                % (what, name))


@attr.s(frozen=True)
class ChangeGroupRequest(_EvacuationRequest):
    """Every listed instance into one of ``target_groups`` (UUIDs; empty:
    any other group)."""
    MODE = MODE_CHG_GROUP

    instances = attr.ib()       # names
    target_groups = attr.ib()   # group uuids

    def to_dict(self):
        return {"type": self.MODE, "instances": list(self.instances),
                "target_groups": list(self.target_groups)}

    def extra_params(self):
        return {}

    @property
    def template_for_data(self):
        return None

    def _check_target_node(self, data, name, what):
        _EvacuationRequest._check_target_node(self, data, name, what)
        group = data["nodes"][name].get("group")
        if self.target_groups and group not in self.target_groups:
            raise InvalidAnswer("%s: node '%s' is not in a target group"
                                % (what, name))

    def _check_moved_group(self, data, group, what):
        names = set(data["nodegroups"][g]["name"] for g in self.target_groups
                    if g in data["nodegroups"])
        if self.target_groups and group not in names and \
                group not in self.target_groups:
            raise InvalidAnswer("%s: group %s is not a target group"
                                % (what, group))


# --- balance -----------------------------------------------------------------

@attr.s(frozen=True)
class BalanceRequest(_EvacuationRequest):
    """A better balanced cluster: the moves hbal would make (in ``group``,
    or in every group one after the other), at most ``max_moves``; the
    answer is node-evacuate's ``[moved, failed, jobs]``, one job per move,
    to run in order."""
    MODE = MODE_BALANCE

    max_moves = attr.ib(default=None)
    group = attr.ib(default=None)       # group name, None: every group
    disk_moves = attr.ib(default=True)
    evac_mode = attr.ib(default=False)

    def to_dict(self):
        request = {"type": self.MODE, "group": self.group,
                   "disk_moves": bool(self.disk_moves),
                   "evac_mode": bool(self.evac_mode)}
        if self.max_moves is not None:
            request["max_moves"] = int(self.max_moves)
        return request

    def extra_params(self):
        return {}

    @property
    def template_for_data(self):
        return None

    def _wanted(self, data):
        return set(data["instances"])

    def _check_target_node(self, data, name, what):
        _EvacuationRequest._check_target_node(self, data, name, what)
        if self.group is not None and \
                _group_names(data, [name]) != {self.group}:
            raise InvalidAnswer("%s: node '%s' is not in node group %s"
                                % (what, name, self.group))

    def _check_moved_group(self, data, group, what):
        if self.group is not None and group != self.group:
            raise InvalidAnswer("%s: group %s is not the requested group %s"
                                % (what, group, self.group))

    def check_result(self, result, data):
        plan = _EvacuationRequest.check_result(self, result, data)
        if self.max_moves is not None and len(plan.jobs) > self.max_moves:
            raise InvalidAnswer("%d moves (jobs) for at most %d asked"
                                % (len(plan.jobs), self.max_moves))
        moved = [name for name, _, _ in plan.moved]
        if len(set(moved)) != len(moved):
            raise InvalidAnswer("an instance is listed twice as moved")
        in_jobs = set(op.instance_name for job in plan.jobs for op in job)
        if in_jobs != set(moved):
            raise InvalidAnswer(
                "the jobs move %s but the answer lists %s as moved"
                % (", ".join(sorted(in_jobs)) or "nothing",
                   ", ".join(sorted(moved)) or "nothing"))
        for name, group, nodes in plan.moved:
            _same_group(data, nodes, "moved instance %s" % name)
            if _group_names(data, nodes) - {group}:
                raise InvalidAnswer("moved instance %s: nodes %s are not in"
                                    " group %s" % (name, ", ".join(nodes),
                                                   group))
        return plan


# --- capacity ----------------------------------------------------------------

@attr.s(frozen=True)
class CapacityPlan(object):
    """A checked capacity answer."""
    count = attr.ib()
    #: [[node names of the first instance], ...], in allocation order
    allocations = attr.ib()


@attr.s(frozen=True)
class CapacityRequest(object):
    """How many instances of one spec fit on the cluster, and where they
    would go in order (hspace's standard allocation)."""
    MODE = MODE_CAPACITY

    disk_template = attr.ib()
    memory = attr.ib()
    vcpus = attr.ib()
    disks = attr.ib()           # [{"size", "mode"?, "spindles"?}]
    spindle_use = attr.ib(default=1)
    name = attr.ib(default=None)
    hypervisor = attr.ib(default=None)

    @property
    def required_nodes(self):
        return 2 if self.disk_template in constants.DTS_INT_MIRROR else 1

    def to_dict(self):
        disks = []
        for disk in self.disks:
            entry = {"size": int(disk.get("size") or 0),
                     "mode": disk.get("mode") or constants.DISK_RDWR,
                     "dev_type": self.disk_template}
            if disk.get("spindles") is not None:
                entry["spindles"] = disk["spindles"]
            disks.append(entry)
        request = {"type": self.MODE, "disk_template": self.disk_template,
                   "memory": int(self.memory), "vcpus": int(self.vcpus),
                   "spindle_use": int(self.spindle_use), "disks": disks,
                   "disk_space_total": disk_space_total(disks),
                   "required_nodes": self.required_nodes}
        if self.name is not None:
            request["name"] = self.name
        if self.hypervisor is not None:
            request["hypervisor"] = self.hypervisor
        return request

    def extra_params(self):
        return {}

    @property
    def template_for_data(self):
        return self.disk_template

    def check_result(self, result, data):
        if not (isinstance(result, dict) and
                isinstance(result.get("count"), int) and
                not isinstance(result.get("count"), bool) and
                isinstance(result.get("allocations"), list)):
            raise InvalidAnswer("expected {\"count\": N, \"allocations\":"
                                " [[nodes], ...]}, got %s" % _show(result))
        count = result["count"]
        allocations = result["allocations"]
        if count < 0 or count != len(allocations):
            raise InvalidAnswer("count %d does not match the %d allocations"
                                " listed" % (count, len(allocations)))
        checked = []
        for idx, nodes in enumerate(allocations):
            what = "allocations/%d" % idx
            nodes = _check_node_list(data, nodes, self.required_nodes, what)
            _same_group(data, nodes, what)
            checked.append(nodes)
        return CapacityPlan(count=count, allocations=checked)
