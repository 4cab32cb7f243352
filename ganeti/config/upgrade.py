"""Bringing older config.data layouts (Ganeti 2.x) to 3.0's."""

import json


from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.objects import (Cluster, new_uuid)


_OLD_DEV_TYPES = {"lvm": constants.DT_PLAIN, "drbd8": constants.DT_DRBD8,
                  "file": constants.DT_FILE, "blockdev": constants.DT_BLOCK,
                  "rbd": constants.DT_RBD, "ext": constants.DT_EXT}


class Upgrader(object):
    """Bring an older config.data dict to 3.0's layout, in place.

    Handles: objects without UUIDs, maps keyed
    by name, nodes referred to by name, disks embedded in instances (2.x),
    ``admin_up`` booleans, missing ``admin_state_source``, global hypervisor
    parameters set on instances, nodes without a group, and parameter
    families missing from the cluster.
    """

    def __init__(self, data, pause=None):
        self.data = data
        self.changed = False
        # called after each object (see ConfigStore.from_dict)
        self._pause = pause or (lambda: None)

    def run(self):
        d = self.data
        if d.get("version") != constants.CONFIG_VERSION:
            self.changed = True
        for key, _ in objects.CONFIG_MAPS:
            d.setdefault(key, {})
        d.setdefault("filters", {})
        cluster = d["cluster"]
        if not isinstance(cluster, dict):
            raise errors.ConfigurationError("config.data: 'cluster' must be"
                                            " an object")
        if not cluster.get("uuid"):
            cluster["uuid"] = new_uuid()
            self.changed = True
        for key in ("nodegroups", "nodes", "networks", "instances", "disks"):
            self._rekey(key)
        self._groups()
        node_by_name = {n.get("name"): u for u, n in d["nodes"].items()}
        if cluster.get("master_node") in node_by_name:
            cluster["master_node"] = node_by_name[cluster["master_node"]]
            self.changed = True
        self._memory_param(cluster.get("beparams", {}).get(
            constants.PP_DEFAULT))
        for inst in d["instances"].values():
            self._instance(inst, node_by_name)
            self._memory_param(inst.get("beparams"))
            self._pause()
        for disk in d["disks"].values():
            self._disk(disk, node_by_name)
            self._pause()
        # Parameter families a 2.x file may lack.
        cobj = Cluster.from_dict(cluster)
        before = json.dumps(cluster, sort_keys=True)
        cobj.fill_defaults()
        new = cobj.to_dict()
        if json.dumps(new, sort_keys=True) != before:
            d["cluster"] = new
            self.changed = True

    def _memory_param(self, beparams):
        """Ganeti < 2.6 had one "memory"; it became maxmem and minmem."""
        if beparams and constants.BE_MEMORY in beparams:
            mem = beparams.pop(constants.BE_MEMORY)
            beparams.setdefault(constants.BE_MAXMEM, mem)
            beparams.setdefault(constants.BE_MINMEM, mem)
            self.changed = True

    def _rekey(self, key):
        """Re-key a map by UUID, giving objects without one a new UUID."""
        old = self.data[key]
        if not isinstance(old, dict):
            raise errors.ConfigurationError(
                "config.data: '%s' must be an object, got %s"
                % (key, type(old).__name__))
        new = {}
        for k, obj in old.items():
            if not isinstance(obj, dict):
                raise errors.ConfigurationError(
                    "config.data: %s/%s must be an object" % (key, k))
            if not obj.get("uuid"):
                obj["uuid"] = k if constants.UUID_RE.match(k) else new_uuid()
                self.changed = True
            if obj["uuid"] != k:
                self.changed = True
            new[obj["uuid"]] = obj
            self._pause()
        self.data[key] = new

    def _groups(self):
        d = self.data
        groups = d["nodegroups"]
        by_name = {g.get("name"): u for u, g in groups.items()}
        for node in d["nodes"].values():
            grp = node.get("group")
            if grp in groups:
                continue
            if grp in by_name:
                node["group"] = by_name[grp]
            else:
                if not groups:
                    u = new_uuid()
                    groups[u] = {"name": constants.INITIAL_NODE_GROUP_NAME,
                                 "uuid": u, "serial_no": 1,
                                 "alloc_policy":
                                     constants.ALLOC_POLICY_PREFERRED}
                    by_name[constants.INITIAL_NODE_GROUP_NAME] = u
                node["group"] = sorted(groups)[0] if grp is None or \
                    grp not in by_name else by_name[grp]
            self.changed = True
        for g in groups.values():
            if "members" in g:
                del g["members"]  # recomputed, never stored

    def _node_ref(self, value, node_by_name):
        if value in node_by_name and value not in self.data["nodes"]:
            self.changed = True
            return node_by_name[value]
        return value

    def _instance(self, inst, node_by_name):
        inst["primary_node"] = self._node_ref(inst.get("primary_node"),
                                              node_by_name)
        inst["secondary_nodes"] = [self._node_ref(n, node_by_name)
                                   for n in inst.get("secondary_nodes") or []]
        if "admin_up" in inst:
            up = inst.pop("admin_up")
            inst.setdefault("admin_state", constants.ADMINST_UP if up
                            else constants.ADMINST_DOWN)
            self.changed = True
        if inst.get("admin_state") is None and not inst.get("forthcoming"):
            inst["admin_state"] = constants.ADMINST_DOWN
            self.changed = True
        if "admin_state_source" not in inst:
            inst["admin_state_source"] = constants.ADMIN_SOURCE
            self.changed = True
        hvp = inst.get("hvparams") or {}
        for key in list(hvp):
            if key in constants.HVC_GLOBALS:
                del hvp[key]
                self.changed = True
        template = inst.pop("disk_template", None)
        nodes = [inst["primary_node"]] if inst.get("primary_node") else []
        nodes += [n for n in inst["secondary_nodes"] if n not in nodes]
        disk_uuids = []
        for disk in inst.get("disks") or []:
            if isinstance(disk, dict):  # 2.x: disks embedded in the instance
                self.changed = True
                disk.setdefault("uuid", new_uuid())
                if not disk.get("dev_type") and template:
                    disk["dev_type"] = template
                if not disk.get("nodes") and \
                        _OLD_DEV_TYPES.get(disk.get("dev_type"),
                                           disk.get("dev_type")) \
                        in constants.DTS_NODE_LOCAL:
                    disk["nodes"] = list(nodes)
                self.data["disks"][disk["uuid"]] = disk
                disk_uuids.append(disk["uuid"])
            else:
                disk_uuids.append(disk)
        inst["disks"] = disk_uuids
        for nic in inst.get("nics") or []:
            if isinstance(nic, dict) and not nic.get("uuid"):
                nic["uuid"] = new_uuid()
                self.changed = True
            if isinstance(nic, dict) and "nicparams" not in nic:
                # Ganeti 2.0 kept bridge on the NIC itself.
                bridge = nic.pop("bridge", None)
                nic["nicparams"] = ({constants.NIC_LINK: bridge}
                                    if bridge else {})
                self.changed = True

    def _disk(self, disk, node_by_name):
        if disk.get("dev_type") in _OLD_DEV_TYPES and \
                _OLD_DEV_TYPES[disk["dev_type"]] != disk["dev_type"]:
            disk["dev_type"] = _OLD_DEV_TYPES[disk["dev_type"]]
            self.changed = True
        if disk.get("nodes"):
            disk["nodes"] = [self._node_ref(n, node_by_name)
                             for n in disk["nodes"]]
        for child in disk.get("children") or []:
            if isinstance(child, dict):
                self._disk(child, node_by_name)
