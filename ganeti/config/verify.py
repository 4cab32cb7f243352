"""Consistency checks of a config store: every problem names the
object, the field and the reason."""

from ganeti import constants
from ganeti import errors
from ganeti import objects


class Verifier(object):
    """Collect every inconsistency of a ConfigStore."""

    def __init__(self, store):
        self.s = store
        self.problems = []

    def bad(self, what, field, reason):
        self.problems.append("%s %s: %s" % (what, field, reason))

    def run(self):
        self._check_maps()
        self._check_cluster()
        self._check_nodegroups()
        self._check_nodes()
        self._check_instances()
        self._check_disks()
        self._check_networks()
        return self.problems

    def _check_maps(self):
        s = self.s
        for key, _ in objects.CONFIG_MAPS:
            names = {}
            for ukey, obj in getattr(s, key).items():
                what = "%s %s" % (key[:-1], ukey)
                if not obj.uuid:
                    self.bad(what, "uuid", "missing")
                elif obj.uuid != ukey:
                    self.bad(what, "uuid", "object's uuid %s differs from its"
                             " key" % obj.uuid)
                name = getattr(obj, "name", None)
                if name and key != "disks":
                    if name in names:
                        self.bad(what, "name", "'%s' is also used by %s"
                                 % (name, names[name]))
                    names[name] = ukey
                for tag in getattr(obj, "tags", ()):
                    try:
                        objects.validate_tag(tag)
                    except errors.TagError as err:
                        self.bad(what, "tags", str(err))

    def _check_cluster(self):
        c = self.s.cluster
        what = "cluster"
        if not c.cluster_name:
            self.bad(what, "cluster_name", "missing")
        if not c.uuid:
            self.bad(what, "uuid", "missing")
        if c.master_node not in self.s.nodes:
            self.bad(what, "master_node", "node %s is not in the configuration"
                     % c.master_node)
        bad_hv = sorted(set(c.enabled_hypervisors) - constants.HYPER_TYPES)
        if bad_hv:
            self.bad(what, "enabled_hypervisors", "unknown hypervisors %s"
                     % ", ".join(bad_hv))
        if not c.enabled_hypervisors:
            self.bad(what, "enabled_hypervisors", "empty")
        if c.default_hypervisor and \
                c.default_hypervisor not in c.enabled_hypervisors:
            self.bad(what, "default_hypervisor", "'%s' is not enabled"
                     % c.default_hypervisor)
        bad_dt = sorted(set(c.enabled_disk_templates)
                        - constants.DISK_TEMPLATES)
        if bad_dt:
            self.bad(what, "enabled_disk_templates", "unknown templates %s"
                     % ", ".join(bad_dt))
        if not isinstance(c.candidate_pool_size, int) or \
                c.candidate_pool_size < 1:
            self.bad(what, "candidate_pool_size", "must be a positive integer")
        for rng in c.uid_pool or []:
            if (not isinstance(rng, (list, tuple)) or len(rng) != 2
                    or not all(isinstance(x, int) for x in rng)
                    or rng[0] > rng[1] or rng[0] < constants.UIDPOOL_UID_MIN
                    or rng[1] > constants.UIDPOOL_UID_MAX):
                self.bad(what, "uid_pool", "invalid range %r" % (rng,))
        for hv, params in (c.hvparams or {}).items():
            if not isinstance(params, dict):
                self.bad(what, "hvparams/%s" % hv, "must be a dictionary")
        for key in (c.beparams or {}).get(constants.PP_DEFAULT, {}):
            if key not in constants.BEC_DEFAULTS:
                self.bad(what, "beparams/default", "unknown parameter '%s'"
                         % key)
        nic_mode = (c.nicparams or {}).get(constants.PP_DEFAULT, {}).get(
            constants.NIC_MODE)
        if nic_mode is not None and nic_mode not in constants.NIC_VALID_MODES:
            self.bad(what, "nicparams/default/mode", "'%s' is not a valid mode"
                     % nic_mode)
        if not (constants.FIRST_DRBD_PORT - 1 <= c.highest_used_port
                <= constants.LAST_DRBD_PORT):
            self.bad(what, "highest_used_port", "%s is outside %d-%d"
                     % (c.highest_used_port, constants.FIRST_DRBD_PORT,
                        constants.LAST_DRBD_PORT))

    def _check_nodegroups(self):
        if not self.s.nodegroups:
            self.bad("cluster", "nodegroups", "there is no node group")
        for g in self.s.nodegroups.values():
            what = "node group %s" % (g.name or g.uuid)
            if not g.name:
                self.bad(what, "name", "missing")
            if g.alloc_policy not in constants.VALID_ALLOC_POLICIES:
                self.bad(what, "alloc_policy", "'%s' is not one of %s"
                         % (g.alloc_policy,
                            ", ".join(constants.VALID_ALLOC_POLICIES)))
            for net in g.networks or {}:
                if net not in self.s.networks:
                    self.bad(what, "networks", "unknown network %s" % net)

    def _check_nodes(self):
        ips = {}
        for n in self.s.nodes.values():
            what = "node %s" % (n.name or n.uuid)
            if not n.name:
                self.bad(what, "name", "missing")
            if n.group not in self.s.nodegroups:
                self.bad(what, "group", "node group %s does not exist"
                         % n.group)
            if not n.primary_ip:
                self.bad(what, "primary_ip", "missing")
            elif n.primary_ip in ips:
                self.bad(what, "primary_ip", "%s is also used by node %s"
                         % (n.primary_ip, ips[n.primary_ip]))
            else:
                ips[n.primary_ip] = n.name
            if n.master_candidate and n.offline:
                self.bad(what, "master_candidate",
                         "an offline node cannot be a master candidate")
            if n.drained and n.offline:
                self.bad(what, "drained", "a node cannot be both drained and"
                         " offline")

    def _check_instances(self):
        s = self.s
        macs = {}
        ports = {}
        disk_owner = {}
        for inst in s.instances.values():
            what = "instance %s" % inst.display_name
            real = not inst.forthcoming
            for field in ("name", "primary_node", "os", "hypervisor"):
                if real and not getattr(inst, field):
                    self.bad(what, field, "missing")
            if inst.primary_node and inst.primary_node not in s.nodes:
                self.bad(what, "primary_node", "node %s does not exist"
                         % inst.primary_node)
            for sec in inst.secondary_nodes or []:
                if sec not in s.nodes:
                    self.bad(what, "secondary_nodes", "node %s does not exist"
                             % sec)
                if sec == inst.primary_node:
                    self.bad(what, "secondary_nodes", "the primary node is"
                             " also listed as secondary")
            if inst.hypervisor and \
                    inst.hypervisor not in s.cluster.enabled_hypervisors:
                self.bad(what, "hypervisor", "'%s' is not enabled in the"
                         " cluster" % inst.hypervisor)
            if inst.admin_state not in constants.ADMINST_ALL:
                self.bad(what, "admin_state", "'%s' is not one of %s"
                         % (inst.admin_state,
                            ", ".join(sorted(constants.ADMINST_ALL))))
            if inst.admin_state_source not in constants.ADMIN_STATE_SOURCES:
                self.bad(what, "admin_state_source", "'%s' is not one of %s"
                         % (inst.admin_state_source,
                            ", ".join(sorted(constants.ADMIN_STATE_SOURCES))))
            if inst.forthcoming and inst.admin_state == constants.ADMINST_UP:
                self.bad(what, "admin_state", "a forthcoming instance cannot"
                         " be up")
            glob = sorted(set(inst.hvparams or {}) & constants.HVC_GLOBALS)
            if glob:
                self.bad(what, "hvparams", "global parameters %s can only be"
                         " set at cluster level" % ", ".join(glob))
            for key in inst.beparams or {}:
                if key not in constants.BEC_DEFAULTS:
                    self.bad(what, "beparams", "unknown parameter '%s'" % key)
            if inst.network_port is not None:
                if inst.network_port in ports:
                    self.bad(what, "network_port", "%s is also used by %s"
                             % (inst.network_port, ports[inst.network_port]))
                ports[inst.network_port] = inst.display_name
            group = None
            if inst.primary_node in s.nodes:
                group = s.nodegroups.get(s.nodes[inst.primary_node].group)
            for idx, nic in enumerate(inst.nics):
                nwhat = "nic/%d" % idx
                if nic.mac:
                    if nic.mac in macs:
                        self.bad(what, nwhat + "/mac", "%s is also used by %s"
                                 % (nic.mac, macs[nic.mac]))
                    macs[nic.mac] = inst.display_name
                elif real:
                    self.bad(what, nwhat + "/mac", "missing")
                if nic.network and nic.network not in s.networks:
                    self.bad(what, nwhat + "/network", "network %s does not"
                             " exist" % nic.network)
                filled = objects.fill_nicparams(s.cluster, nic, group)
                try:
                    objects.check_nic(nic, filled, where=nwhat)
                except errors.OpPrereqError as err:
                    self.bad(what, nwhat, err.args[0].split(": ", 1)[-1])
            for idx, disk_uuid in enumerate(inst.disks):
                if disk_uuid not in s.disks:
                    self.bad(what, "disks/%d" % idx, "disk %s does not exist"
                             % disk_uuid)
                    continue
                if disk_uuid in disk_owner:
                    self.bad(what, "disks/%d" % idx, "disk %s also belongs to"
                             " %s" % (disk_uuid, disk_owner[disk_uuid]))
                disk_owner[disk_uuid] = inst.display_name
                disk = s.disks[disk_uuid]
                if real and disk.forthcoming:
                    self.bad(what, "disks/%d" % idx, "a real instance has the"
                             " forthcoming disk %s" % disk_uuid)
                for node in disk.nodes or []:
                    if inst.all_nodes and node not in inst.all_nodes:
                        self.bad(what, "disks/%d/nodes" % idx,
                                 "node %s is not a node of the instance"
                                 % node)
        self._disk_owner = disk_owner

    def _check_disks(self):
        for disk in self.s.disks.values():
            what = "disk %s" % disk.uuid
            if disk.uuid not in self._disk_owner:
                self.bad(what, "instance", "belongs to no instance")
            real = not disk.forthcoming
            if disk.dev_type is not None and \
                    disk.dev_type not in constants.DISK_TEMPLATES:
                self.bad(what, "dev_type", "'%s' is not a disk template"
                         % disk.dev_type)
            elif real and disk.dev_type is None:
                self.bad(what, "dev_type", "missing")
            if disk.size is not None:
                if not isinstance(disk.size, int) or disk.size < 0:
                    self.bad(what, "size", "must be a non-negative integer"
                             " (MiB), got %r" % (disk.size,))
            elif real and disk.dev_type != constants.DT_DISKLESS:
                self.bad(what, "size", "missing")
            if disk.mode is not None and \
                    disk.mode not in constants.DISK_ACCESS_SET:
                self.bad(what, "mode", "'%s' is not ro or rw" % disk.mode)
            for node in disk.nodes or []:
                if node not in self.s.nodes:
                    self.bad(what, "nodes", "node %s does not exist" % node)

    def _check_networks(self):
        for net in self.s.networks.values():
            if not net.network:
                self.bad("network %s" % (net.name or net.uuid), "network",
                         "missing (an IPv4 range is required)")
