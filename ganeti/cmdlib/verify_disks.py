"""OP_CLUSTER_VERIFY_DISKS and OP_GROUP_VERIFY_DISKS: which instances'
disks are not where and how the configuration says
(``gnt-cluster verify-disks``).

The cluster opcode submits one group job per node group.  A group job asks
every node of the group, in one ``blockdev_status`` call per node, about
the disks it should hold of the instances whose disks are active, and
returns Ganeti's triple:

- ``{node name: error}`` for the nodes that could not be asked;
- the names of instances with a disk that exists but is not active (a
  mirror not set up, its local disk detached or its peer not connected,
  outside a resync): activating their disks again is the repair, which
  ``gnt-cluster verify-disks`` does with OP_INSTANCE_ACTIVATE_DISKS;
- ``{instance name: [[node name, volume], ...]}`` for the disks a node
  does not have at all (or a node that could not be asked should have).

The group opcode only reads: it changes neither the configuration nor a
node.  Offline nodes are not asked and their disks not reported.

With ``is_strict`` (``gnt-cluster verify-disks --strict``) the disks of
instances whose disks are not active are asked about too: they need not
be active, but a missing one is reported in the third list.
"""

from ganeti import constants
from ganeti import locking
from ganeti import opcodes
from ganeti import storage
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import node_calls
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance_migration import disk_for_node


class LUClusterVerifyDisks(LogicalUnit):
    """One OP_GROUP_VERIFY_DISKS job per node group (or the one named)."""
    OP_ID = "OP_CLUSTER_VERIFY_DISKS"

    def expand_names(self):
        self.share_all()
        if self.op.group_name:
            # an unknown group is refused here, not in a submitted job
            self.groups = [self.cfg.get_nodegroup(self.op.group_name).name]
        else:
            self.groups = sorted(g.name
                                 for g in self.cfg.nodegroups.values())

    async def exec_(self):
        extra = {"is_strict": True} if self.op.is_strict else {}
        jobs = [[opcodes.opcode_class("OP_GROUP_VERIFY_DISKS")(
            group_name=name, reason=list(self.op.reason or []),
            priority=self.op.priority, **extra)] for name in self.groups]
        return {"jobs": await self.submit_jobs(
            jobs, describe=lambda ops: "verify disks of group %s"
            % ops[0].group_name)}


def volume_name(disk):
    """How a volume is named in the missing list: ``vg/lv`` for logical
    volumes (the data volume of a mirror), the path of a file disk."""
    lid = disk.logical_id or []
    if disk.dev_type == constants.DT_DRBD8 and disk.children:
        return volume_name(disk.children[0])
    if disk.dev_type == constants.DT_PLAIN and len(lid) == 2:
        return "%s/%s" % (lid[0], lid[1])
    return instance_disks.disk_path(disk) or disk.iv_name


def needs_activation(status):
    """Whether a disk a node has is not (fully) active there: anything
    but ok, except a mirror busy resyncing (it heals by itself)."""
    if status.get("status") == storage.DISK_OK:
        return False
    return status.get("sync_percent") is None


class LUGroupVerifyDisks(LogicalUnit):
    OP_ID = "OP_GROUP_VERIFY_DISKS"

    def expand_names(self):
        self.group_uuid = self.expand_group(self.op.group_name)
        self.share_all()
        self.needed_locks[locking.LEVEL_NODEGROUP] = [self.group_uuid]
        self.needed_locks[locking.LEVEL_INSTANCE] = [
            inst.uuid for inst in self._instances()]

    def declare_locks(self, level):
        if level == locking.LEVEL_NODE:
            # mirrors may have their secondary in another group
            nodes = set(n.uuid for n in self._nodes())
            for inst in self._instances():
                nodes.update(inst.all_nodes)
            self.needed_locks[level] = sorted(nodes)

    def _nodes(self):
        return [n for n in self.cfg.nodes.values()
                if n.group == self.group_uuid]

    def _instances(self):
        uuids = set(n.uuid for n in self._nodes())
        return sorted((i for i in self.cfg.instances.values()
                       if i.primary_node in uuids),
                      key=lambda i: i.display_name)

    def _wanted(self):
        """{node uuid: [(instance, disk)]}: the disks each node should
        have active (strict: have at all, for instances whose disks are
        not active)."""
        cfg = self.cfg
        wanted = {}
        for inst in self._instances():
            if inst.forthcoming or not (inst.disks_active or
                                        self.op.is_strict):
                continue
            for disk in cfg.instance_disks(inst):
                if disk.dev_type == constants.DT_DISKLESS:
                    continue
                for node_uuid in instance_disks.disk_nodes(inst, disk):
                    wanted.setdefault(node_uuid, []).append((inst, disk))
        return wanted

    async def exec_(self):
        cfg = self.cfg
        node_errors = {}
        inactive = set()
        missing = {}
        for node_uuid, pairs in sorted(self._wanted().items()):
            node = cfg.nodes.get(node_uuid)
            if node is None or node.offline:
                continue
            name = node_calls.node_name(cfg, node_uuid)
            res = await node_calls.try_call_node(
                self, node_uuid, "blockdev_status",
                [[disk_for_node(cfg, inst, disk, node_uuid)
                  for inst, disk in pairs]])
            answers = res.payload if res.success else None
            if not isinstance(answers, list) or \
                    len(answers) != len(pairs):
                node_errors[name] = node_calls.strip_node_prefix(
                    res.fail_msg or "bad answer to blockdev_status", name)
                answers = [None] * len(pairs)
            for (inst, disk), status in zip(pairs, answers):
                if status is None:
                    missing.setdefault(inst.name, []).append(
                        [name, volume_name(disk)])
                elif inst.disks_active and needs_activation(status):
                    inactive.add(inst.name)
        for name, volumes in missing.items():
            volumes.sort()
        return [node_errors, sorted(inactive), missing]
