"""Checking and merging configurations: other clusters' into this one's.

Pure work on :class:`ganeti.config.ConfigStore` objects (no files, no
network), so it is tested on stores built in memory.  :func:`check` says
what stands in the way (problems: the merge is refused) and what the admin
should know (warnings); :func:`merge` builds the merged configuration:

* nodes, instances, disks, networks and node groups keep their UUIDs;
* the other clusters' nodes are no master candidates (the candidate pool
  is refilled once they serve this cluster) and join this cluster's node
  group of the same name (``--groups merge``) or keep theirs under a new
  name (``--groups rename``); a node group whose name is not taken comes
  along as it is;
* every DRBD disk gets a new port from this cluster's pool (logical_id
  index 2), as does an instance whose console port is taken here; the
  other ports in use are taken out of the pool;
* an instance (and a node) keeps the parameters it had: where this
  cluster's defaults (or the node group's) differ from those it
  inherited, the old value is written into the instance's (node's, NIC's)
  own parameters;
* the serial number is above every cluster's, so that no master
  candidate of any of them holds a newer configuration.
"""

import time

import attrs

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.config import ConfigStore

__all__ = ["GROUPS_MERGE", "GROUPS_RENAME", "GROUPS_MODES", "MergeConflict",
           "MergeResult", "check", "merge", "copy_store"]

#: same-named node groups become one
GROUPS_MERGE = "merge"
#: the other cluster's same-named node group gets a new name
GROUPS_RENAME = "rename"
GROUPS_MODES = (GROUPS_MERGE, GROUPS_RENAME)

#: disk templates living in the cluster's volume group
LVM_TEMPLATES = frozenset([constants.DT_PLAIN, constants.DT_DRBD8])
#: disk templates living below a cluster-wide directory
DIR_TEMPLATES = {constants.DT_FILE: "file_storage_dir",
                 constants.DT_SHARED_FILE: "shared_file_storage_dir",
                 constants.DT_GLUSTER: "gluster_storage_dir"}

_MISSING = object()


class MergeConflict(errors.GenericError):
    """The configurations cannot be merged; ``problems`` says why, each
    naming the cluster and the item."""

    def __init__(self, problems):
        self.problems = list(problems)
        errors.GenericError.__init__(self, "; ".join(self.problems))


@attrs.define
class MergeResult:
    #: the merged configuration (path: this cluster's config.data)
    store: object
    #: what the merge did beyond copying, one line each
    notes: list = attrs.Factory(list)
    #: what the admin should know (nothing was refused for it)
    warnings: list = attrs.Factory(list)
    #: ``{disk uuid: (old port, new port)}`` of the DRBD disks
    ports: dict = attrs.Factory(dict)
    #: ``{(cluster name, old group name): new group name}``
    renamed_groups: dict = attrs.Factory(dict)


def copy_store(store, path=None, now=time.time):
    """An independent copy of ``store`` (nothing is shared)."""
    return ConfigStore.from_dict(store.to_dict(), path=path, now=now,
                                 copy_data=False)


def check(ours, others, groups=None):
    """``(problems, warnings)`` of merging the stores ``others`` into
    ``ours``; nothing is changed."""
    merger = _Merger(ours, others, groups, time.time)
    merger.run()
    return list(merger.problems), list(merger.warnings)


def merge(ours, others, groups=None, now=time.time):
    """The :class:`MergeResult` of merging ``others`` into ``ours``
    (neither is changed); :class:`MergeConflict` if they cannot be."""
    merger = _Merger(ours, others, groups, now)
    merger.run()
    if merger.problems:
        raise MergeConflict(merger.problems)
    return merger.result


def _short(name):
    return (name or "other").split(".", 1)[0]


def _describe(params, keys, private=False):
    if private:
        return ", ".join(sorted(keys))
    return ", ".join("%s=%s" % (k, params[k]) for k in sorted(keys))


def _changed(before, after):
    """Keys whose value ``after`` would differ from ``before`` (keys that
    ``before`` lacks cannot be pinned: returned apart)."""
    differ = {k for k, v in before.items() if after.get(k, _MISSING) != v}
    extra = {k for k in after if k not in before}
    return differ, extra


def _template(store, inst):
    return objects.disk_template_of(store.instance_disks(inst))


def _dev_types(store, inst):
    return {d.dev_type for d in store.instance_disks(inst) if d.dev_type}


class _Merger(object):

    def __init__(self, ours, others, groups, now):
        if groups is not None and groups not in GROUPS_MODES:
            raise errors.ParameterError(
                "groups", "groups must be one of %s, not %r"
                % (", ".join(GROUPS_MODES), groups))
        self.ours = ours
        self.others = list(others)
        self.groups = groups
        self.now = now
        self.problems = []
        self.merged = copy_store(ours, ours.path, now)
        self.result = MergeResult(self.merged)
        self.warnings = self.result.warnings
        self.here = "this cluster (%s)" % ours.cluster.cluster_name
        # what is taken, and by whom (for messages)
        self.node_names = {n.name: self.here for n in ours.nodes.values()}
        self.instance_names = {i.name: self.here
                               for i in ours.instances.values() if i.name}
        self.network_names = {n.name: self.here
                              for n in ours.networks.values()}
        self.clusters = {ours.cluster.uuid: self.here}
        self.addresses = {}
        for node in ours.nodes.values():
            self._take_addresses(node, self.here)
        if ours.cluster.master_ip:
            self.addresses.setdefault(
                ours.cluster.master_ip, "the master IP of %s" % self.here)
        self.macs = {}
        for inst in ours.instances.values():
            for nic in inst.nics:
                if nic.mac:
                    self.macs[nic.mac] = "instance %s of %s" % (
                        inst.display_name, self.here)

    def _take_addresses(self, node, owner):
        for ip in {node.primary_ip, node.secondary_ip or node.primary_ip}:
            if ip:
                self.addresses[ip] = "node %s of %s" % (node.name, owner)

    # --- the whole run ------------------------------------------------------

    def run(self):
        serials = [self.ours.serial_no]
        cluster_serials = [self.ours.cluster.serial_no or 0]
        for other in self.others:
            theirs = copy_store(other, None, self.now)
            serials.append(theirs.serial_no)
            cluster_serials.append(theirs.cluster.serial_no or 0)
            self._one(theirs)
        if self.problems:
            return
        merged = self.merged
        merged.serial_no = max(serials) + 1
        merged.cluster.serial_no = max(cluster_serials) + 1
        merged.mtime = merged.cluster.mtime = self.now()
        for problem in merged.verify():
            self.problems.append("the merged configuration would not be"
                                 " valid: %s" % problem)

    def _one(self, theirs):
        name = theirs.cluster.cluster_name
        where = "cluster %s" % name
        same = self.clusters.get(theirs.cluster.uuid)
        if same is not None:
            self.problems.append(
                "%s is the same cluster as %s (cluster UUID %s)"
                % (where, same, theirs.cluster.uuid))
            return
        before = len(self.problems)
        self._check_cluster(theirs, where)
        self._check_nodes(theirs, where)
        self._check_instances(theirs, where)
        self._check_networks(theirs, where)
        group_map, new_groups = self._plan_groups(theirs, where)
        self._check_uuids(theirs, where)
        if len(self.problems) > before:
            return
        self.clusters[theirs.cluster.uuid] = where
        self._add(theirs, where, group_map, new_groups)

    # --- checks -------------------------------------------------------------

    def _check_cluster(self, theirs, where):
        ours = self.merged.cluster
        c = theirs.cluster
        if (c.primary_ip_family or constants.IP4_FAMILY) != \
                (ours.primary_ip_family or constants.IP4_FAMILY):
            self.problems.append(
                "%s uses IP family %s for its nodes, this cluster %s"
                % (where, c.primary_ip_family, ours.primary_ip_family))
        hvs, templates, dev_types = {}, {}, set()
        for inst in theirs.instances.values():
            if inst.forthcoming and not inst.hypervisor:
                continue
            hvs.setdefault(inst.hypervisor, []).append(inst.display_name)
            for kind in _dev_types(theirs, inst) or {constants.DT_DISKLESS}:
                templates.setdefault(kind, []).append(inst.display_name)
                dev_types.add(kind)
        for hv in sorted(hvs):
            if hv not in ours.enabled_hypervisors:
                self.problems.append(
                    "hypervisor %s of %s (instances %s) is not enabled in"
                    " this cluster (enabled: %s); enable it first"
                    " (gnt-cluster modify --enabled-hypervisors)"
                    % (hv, where, ", ".join(sorted(hvs[hv])),
                       ", ".join(ours.enabled_hypervisors)))
        for kind in sorted(templates):
            if kind not in ours.enabled_disk_templates:
                self.problems.append(
                    "disk template %s of %s (instances %s) is not enabled in"
                    " this cluster (enabled: %s); enable it first"
                    " (gnt-cluster modify --enabled-disk-templates)"
                    % (kind, where, ", ".join(sorted(templates[kind])),
                       ", ".join(ours.enabled_disk_templates)))
        if dev_types & LVM_TEMPLATES and \
                c.volume_group_name != ours.volume_group_name:
            self.problems.append(
                "%s keeps its instances' disks in volume group %s, this"
                " cluster uses %s; make them the same first"
                " (gnt-cluster modify --vg-name)"
                % (where, c.volume_group_name, ours.volume_group_name))
        for kind, field in sorted(DIR_TEMPLATES.items()):
            if kind in dev_types and getattr(c, field) != \
                    getattr(ours, field):
                self.problems.append(
                    "%s keeps its %s disks below %s=%s, this cluster's is"
                    " %s; the nodes accept disks only below this cluster's"
                    % (where, kind, field, getattr(c, field),
                       getattr(ours, field)))
        for hv in sorted(h for h in hvs if h in ours.enabled_hypervisors):
            theirs_g = objects.cluster_global_hvparams(c, hv)
            ours_g = objects.cluster_global_hvparams(ours, hv)
            differ = sorted(k for k in theirs_g
                            if ours_g.get(k, _MISSING) != theirs_g[k])
            if differ:
                self.warnings.append(
                    "the global %s parameters %s of %s differ from this"
                    " cluster's (%s); its instances use this cluster's"
                    " from now on" % (hv, _describe(theirs_g, differ), where,
                                      _describe(ours_g, differ)))
        for kind in sorted(k for k in dev_types
                           if k in ours.enabled_disk_templates):
            theirs_d = objects.fill_diskparams(c, None, kind)
            ours_d = objects.fill_diskparams(ours, None, kind)
            differ = sorted(k for k in theirs_d
                            if ours_d.get(k, _MISSING) != theirs_d[k])
            if differ:
                self.warnings.append(
                    "the %s disk parameters %s of %s differ from this"
                    " cluster's: new disks of its instances follow this"
                    " cluster's" % (kind, ", ".join(differ), where))
        if c.tags:
            self.warnings.append("the cluster tags of %s are not kept: %s"
                                 % (where, ", ".join(sorted(c.tags))))
        if theirs.filters:
            self.warnings.append("the %d job filter(s) of %s are not kept"
                                 % (len(theirs.filters), where))
        incidents = getattr(theirs.maintenance, "incidents", None) or {}
        if incidents:
            self.warnings.append(
                "the %d maintenance incident(s) of %s are not kept"
                % (len(incidents), where))
        if c.uid_pool and c.uid_pool != ours.uid_pool:
            self.warnings.append(
                "the user-id pool of %s differs from this cluster's; its"
                " running instances keep the user ids they have" % where)

    def _check_nodes(self, theirs, where):
        master = self.merged.master_node
        master_single = master is not None and (
            master.secondary_ip or master.primary_ip) == master.primary_ip
        for node in sorted(theirs.nodes.values(), key=lambda n: n.name):
            owner = self.node_names.get(node.name)
            if owner is not None:
                self.problems.append("node name %s of %s is in use in %s"
                                     % (node.name, where, owner))
            if node.offline:
                self.problems.append(
                    "node %s of %s is offline: it cannot be switched over;"
                    " bring it online or remove it from its cluster first"
                    % (node.name, where))
            for ip in sorted({node.primary_ip,
                              node.secondary_ip or node.primary_ip}):
                taken = self.addresses.get(ip)
                if taken is not None:
                    self.problems.append(
                        "IP address %s of node %s of %s is that of %s"
                        % (ip, node.name, where, taken))
            single = (node.secondary_ip or node.primary_ip) == \
                node.primary_ip
            if master is not None and single != master_single:
                self.problems.append(
                    "node %s of %s has %s secondary IP, but this cluster's"
                    " master has %s" % (node.name, where,
                                        "no" if single else "a",
                                        "none" if master_single else "one"))

    def _check_instances(self, theirs, where):
        for inst in sorted(theirs.instances.values(),
                           key=lambda i: i.display_name):
            if inst.name:
                owner = self.instance_names.get(inst.name)
                if owner is not None:
                    self.problems.append(
                        "instance name %s of %s is in use in %s"
                        % (inst.name, where, owner))
            for nic in inst.nics:
                owner = self.macs.get(nic.mac) if nic.mac else None
                if owner is not None:
                    self.problems.append(
                        "MAC address %s of instance %s of %s is that of %s"
                        % (nic.mac, inst.display_name, where, owner))

    def _check_networks(self, theirs, where):
        for net in sorted(theirs.networks.values(), key=lambda n: n.name):
            owner = self.network_names.get(net.name)
            if owner is not None:
                self.problems.append("network name %s of %s is in use in %s"
                                     % (net.name, where, owner))

    def _check_uuids(self, theirs, where):
        merged = self.merged
        for kind, label in (("nodes", "node"), ("instances", "instance"),
                            ("disks", "disk"), ("networks", "network"),
                            ("nodegroups", "node group")):
            mine = getattr(merged, kind)
            for uuid, obj in sorted(getattr(theirs, kind).items()):
                if uuid in mine:
                    self.problems.append(
                        "%s %s of %s has the UUID %s, which this merge"
                        " already holds" % (label, getattr(obj, "name", None)
                                            or uuid, where, uuid))

    def _plan_groups(self, theirs, where):
        """``({their group uuid: merged group uuid}, {their uuid: name it
        gets})``; problems for same-named groups without --groups."""
        merged = self.merged
        by_name = {g.name: g for g in merged.nodegroups.values()}
        group_map, new_groups = {}, {}
        taken = set(by_name)
        for group in sorted(theirs.nodegroups.values(),
                            key=lambda g: g.name):
            existing = by_name.get(group.name)
            if existing is None:
                group_map[group.uuid] = group.uuid
                new_groups[group.uuid] = group.name
                taken.add(group.name)
                continue
            if self.groups is None:
                self.problems.append(
                    "node group %s of %s has the name of a node group of"
                    " this cluster; say what to do with --groups merge (its"
                    " nodes join this cluster's %s) or --groups rename (it"
                    " becomes %s)" % (group.name, where, group.name,
                                      self._new_name(group.name, theirs,
                                                     taken)))
                continue
            if self.groups == GROUPS_MERGE:
                group_map[group.uuid] = existing.uuid
                self._compare_groups(group, existing, where)
                continue
            name = self._new_name(group.name, theirs, taken)
            taken.add(name)
            group_map[group.uuid] = group.uuid
            new_groups[group.uuid] = name
        return group_map, new_groups

    @staticmethod
    def _new_name(name, theirs, taken):
        base = "%s-%s" % (name, _short(theirs.cluster.cluster_name))
        candidate, n = base, 2
        while candidate in taken:
            candidate = "%s-%d" % (base, n)
            n += 1
        return candidate

    def _compare_groups(self, group, existing, where):
        differ = [field for field in ("ndparams", "diskparams", "ipolicy",
                                      "alloc_policy")
                  if getattr(group, field) != getattr(existing, field)]
        if differ:
            self.warnings.append(
                "node group %s of %s is merged into this cluster's, whose"
                " %s differ: its nodes take this cluster's (node parameters"
                " the nodes had are kept on the nodes)"
                % (group.name, where, ", ".join(differ)))

    # --- the merge ----------------------------------------------------------

    def _add(self, theirs, where, group_map, new_groups):
        merged = self.merged
        notes = self.result.notes
        cname = theirs.cluster.cluster_name
        old_groups = dict(theirs.nodegroups)
        t = self.now()
        for uuid, name in sorted(new_groups.items()):
            group = theirs.nodegroups[uuid]
            if name != group.name:
                notes.append("node group %s of %s is renamed %s"
                             % (group.name, where, name))
                self.result.renamed_groups[(cname, group.name)] = name
                group.name = name
                group.touch(t)
            merged.nodegroups[uuid] = group
        for uuid, target in sorted(group_map.items()):
            if uuid == target:
                continue
            group = theirs.nodegroups[uuid]
            existing = merged.nodegroups[target]
            notes.append("node group %s of %s is merged into this"
                         " cluster's" % (group.name, where))
            if group.networks:
                for net_uuid, params in group.networks.items():
                    existing.networks.setdefault(net_uuid, params)
                existing.touch(t)
        for net in theirs.networks.values():
            merged.networks[net.uuid] = net
            self.network_names[net.name] = where
        for node in sorted(theirs.nodes.values(), key=lambda n: n.name):
            old_group = old_groups.get(node.group)
            new_group = merged.nodegroups.get(group_map.get(node.group))
            self._pin(where, "node %s" % node.name, "ndparams", node.ndparams,
                      objects.fill_ndparams(theirs.cluster, old_group, node),
                      objects.fill_ndparams(merged.cluster, new_group, node))
            node.group = new_group.uuid if new_group else node.group
            if node.master_candidate:
                node.master_candidate = False
            node.touch(t)
            merged.nodes[node.uuid] = node
            self.node_names[node.name] = where
            self._take_addresses(node, where)
        for disk in theirs.disks.values():
            merged.disks[disk.uuid] = disk
        self._ports(theirs, where)
        for inst in sorted(theirs.instances.values(),
                           key=lambda i: i.display_name):
            self._pin_instance(theirs, where, inst, old_groups)
            merged.instances[inst.uuid] = inst
            if inst.name:
                self.instance_names[inst.name] = where
            for nic in inst.nics:
                if nic.mac:
                    self.macs[nic.mac] = "instance %s of %s" % (
                        inst.display_name, where)
        merged.cluster.mtime = t

    def _ports(self, theirs, where):
        """Console ports kept where free (and taken out of the pool), new
        ones where taken; a new port for every DRBD disk."""
        merged = self.merged
        cluster = merged.cluster
        used = set()
        for inst in merged.instances.values():
            if inst.network_port is not None:
                used.add(inst.network_port)
        for disk in merged.disks.values():
            if disk.uuid not in theirs.disks:
                used.update(_drbd_ports(disk))
        clashing = []
        for inst in sorted(theirs.instances.values(),
                           key=lambda i: i.display_name):
            port = inst.network_port
            if port is None:
                continue
            if port in used:
                clashing.append(inst)
                continue
            used.add(port)
            if port in cluster.tcpudp_port_pool:
                cluster.tcpudp_port_pool.remove(port)
            if constants.FIRST_DRBD_PORT <= port <= \
                    constants.LAST_DRBD_PORT and \
                    port > cluster.highest_used_port:
                # the ports between stay unused; simpler than a pool of
                # every one of them
                cluster.highest_used_port = port
        for inst in clashing:
            old = inst.network_port
            inst.network_port = self._allocate(used)
            self.result.notes.append(
                "instance %s of %s: console port %d is taken here, it gets"
                " %d (from its next start)" % (inst.display_name, where,
                                                old, inst.network_port))
        for disk in sorted(theirs.disks.values(), key=lambda d: d.uuid):
            self._drbd(disk, used, where)

    def _allocate(self, used):
        while True:
            port = self.merged.allocate_port()
            if port not in used:
                used.add(port)
                return port

    def _drbd(self, disk, used, where):
        if disk.dev_type == constants.DT_DRBD8 and \
                isinstance(disk.logical_id, (list, tuple)) and \
                len(disk.logical_id) > 2:
            logical_id = list(disk.logical_id)
            old = logical_id[2]
            logical_id[2] = self._allocate(used)
            disk.logical_id = logical_id
            self.result.ports[disk.uuid] = (old, logical_id[2])
        for child in disk.children or ():
            self._drbd(child, used, where)

    def _pin_instance(self, theirs, where, inst, old_groups):
        merged = self.merged
        label = "instance %s" % inst.display_name
        old_c, new_c = theirs.cluster, merged.cluster
        if inst.hypervisor:
            self._pin(where, label, "hvparams", inst.hvparams,
                      objects.fill_hvparams(old_c, inst),
                      objects.fill_hvparams(new_c, inst))
        self._pin(where, label, "beparams", inst.beparams,
                  objects.fill_beparams(old_c, inst),
                  objects.fill_beparams(new_c, inst))
        self._pin(where, label, "osparams", inst.osparams,
                  objects.fill_osparams(old_c, inst),
                  objects.fill_osparams(new_c, inst))
        self._pin(where, label, "osparams_private", inst.osparams_private,
                  objects.fill_osparams_private(old_c, inst),
                  objects.fill_osparams_private(new_c, inst), private=True)
        node = theirs.nodes.get(inst.primary_node)
        old_group = old_groups.get(node.group) if node else None
        new_node = merged.nodes.get(inst.primary_node)
        new_group = merged.nodegroups.get(new_node.group) if new_node \
            else None
        for index, nic in enumerate(inst.nics):
            self._pin(where, "%s NIC %d" % (label, index), "nicparams",
                      nic.nicparams,
                      objects.fill_nicparams(old_c, nic, old_group),
                      objects.fill_nicparams(new_c, nic, new_group))

    def _pin(self, where, label, field, own, before, after, private=False):
        """Write into ``own`` (the object's own ``field``) the values of
        ``before`` that ``after`` would change."""
        differ, extra = _changed(before, after)
        if differ:
            for key in differ:
                own[key] = before[key]
            self.result.notes.append(
                "%s of %s keeps %s %s (this cluster's defaults differ)"
                % (label, where, field, _describe(before, differ, private)))
        if extra:
            self.warnings.append(
                "%s of %s gets %s %s from this cluster's defaults"
                % (label, where, field, _describe(after, extra, private)))


def _drbd_ports(disk):
    ports = []
    if disk.dev_type == constants.DT_DRBD8 and \
            isinstance(disk.logical_id, (list, tuple)) and \
            len(disk.logical_id) > 2:
        ports.append(disk.logical_id[2])
    for child in disk.children or ():
        ports.extend(_drbd_ports(child))
    return ports
