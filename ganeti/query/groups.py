"""Node group query fields.

``networks`` (the networks connected to the group, with their NIC mode and
link) is this project's addition.
"""

import copy

from ganeti import constants
from ganeti import objects
from ganeti.query.base import (Field, FieldTable, Resource, QFT_TEXT,
                               QFT_NUMBER, QFT_OTHER, UNAVAIL, attr_getter,
                               common_fields, lookup_by_name, nice_sort)
from ganeti.query.nodes import ndp_fields


def _members(run):
    """{group uuid: ([nodes], [primary instances])}."""
    def compute():
        result = dict((u, ([], [])) for u in run.cfg.nodegroups)
        nodes = run.cfg.nodes
        for node in nodes.values():
            result.setdefault(node.group, ([], []))[0].append(node)
        for inst in run.cfg.instances.values():
            node = nodes.get(inst.primary_node)
            if node is not None:
                result.setdefault(node.group, ([], []))[1].append(inst)
        return result
    return run.memo("group_members", compute)


def _nodes(run, group):
    return _members(run).get(group.uuid, ([], []))[0]


def _instances(run, group):
    return _members(run).get(group.uuid, ([], []))[1]


def _ndparams(run, group):
    return run.memo(("group_nd", group.uuid), lambda: objects.fill_ndparams(
        run.cluster, group, None))


def _ndp(name):
    def get(run, group):
        params = _ndparams(run, group)
        return params[name] if name in params else UNAVAIL
    return get


def _diskparams(run, group):
    return dict((template, objects.fill_diskparams(run.cluster, group,
                                                   template))
                for template in sorted(constants.DISK_DT_DEFAULTS))


def _networks(run, group):
    result = []
    for uuid, params in sorted((group.networks or {}).items()):
        net = run.cfg.networks.get(uuid)
        params = params or {}
        result.append([net.name if net is not None else uuid,
                       params.get(constants.NIC_MODE),
                       params.get(constants.NIC_LINK)])
    return nice_sort(result, key=lambda entry: entry[0])


def build_fields():
    t = FieldTable()
    t.extend([
        Field("name", "Group", QFT_TEXT, "Group name", attr_getter("name")),
        Field("alloc_policy", "AllocPolicy", QFT_TEXT,
              "Allocation policy: preferred, last_resort or unallocable",
              attr_getter("alloc_policy")),
        Field("node_cnt", "Nodes", QFT_NUMBER, "Number of nodes",
              lambda run, group: len(_nodes(run, group))),
        Field("node_list", "NodeList", QFT_OTHER, "Names of the nodes",
              lambda run, group: nice_sort(n.name
                                           for n in _nodes(run, group))),
        Field("pinst_cnt", "Instances", QFT_NUMBER,
              "Number of instances whose primary node is in the group",
              lambda run, group: len(_instances(run, group))),
        Field("pinst_list", "InstanceList", QFT_OTHER,
              "Instances whose primary node is in the group",
              lambda run, group: nice_sort(i.display_name
                                           for i in _instances(run, group))),
        Field("ipolicy", "InstancePolicy", QFT_OTHER,
              "Instance policy in effect (cluster and group merged)",
              lambda run, group: objects.fill_group_ipolicy(run.cluster,
                                                            group)),
        Field("custom_ipolicy", "CustomInstancePolicy", QFT_OTHER,
              "Instance policy set on the group itself",
              lambda run, group: copy.deepcopy(group.ipolicy or {})),
        Field("ndparams", "NDParams", QFT_OTHER,
              "Node parameters in effect (cluster and group merged)",
              lambda run, group: copy.deepcopy(_ndparams(run, group))),
        Field("custom_ndparams", "CustomNDParams", QFT_OTHER,
              "Node parameters set on the group itself",
              lambda run, group: copy.deepcopy(group.ndparams or {})),
        Field("diskparams", "DiskParameters", QFT_OTHER,
              "Disk parameters in effect, per disk template", _diskparams),
        Field("custom_diskparams", "CustomDiskParameters", QFT_OTHER,
              "Disk parameters set on the group itself",
              lambda run, group: copy.deepcopy(group.diskparams or {})),
        Field("networks", "Networks", QFT_OTHER,
              "Connected networks as [name, NIC mode, NIC link]", _networks),
    ])
    t.extend(ndp_fields(_ndp))
    t.extend(common_fields("Group"))
    return t


class GroupResource(Resource):
    name = "group"
    noun = "node group"
    fields = build_fields()
    cacheable = True

    def items(self, run, names):
        groups = run.cfg.nodegroups.values()
        if names is None:
            return list(groups)
        return lookup_by_name(groups, names, self.noun, hostname=False)

    def item_name(self, group):
        return group.name
