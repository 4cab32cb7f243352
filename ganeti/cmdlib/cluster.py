"""Cluster-level logical units: query, modify, verify the configuration,
destroy (the full verification is in :mod:`ganeti.cmdlib.verify`).

``OP_CLUSTER_DESTROY`` only checks and agrees: the cluster must be down to
its master node with no instance left (forthcoming ones included).  Its
result is the master node's UUID, as Ganeti 3.0 returns it; the client
(``gnt-cluster destroy --yes-do-it``) then stops the daemons and removes
the cluster's files.
"""

import platform

from ganeti import constants
from ganeti import diskparams
from ganeti import errors
from ganeti import ipolicy
from ganeti import objects
from ganeti import replication
from ganeti import uidpool
from ganeti.cmdlib.base import LogicalUnit
from ganeti.config import maintenance as maint_config
from ganeti.cmdlib.instance_params import update_params
from ganeti.cmdlib.node import (check_ndparams, maintain_candidate_pool,
                                ship_candidate_files, update_candidate_certs)
from ganeti.iallocator import AllocatorNotFound
from ganeti.iallocator import defaults as ia_defaults

# OP_CLUSTER_SET_PARAMS parameters that map one to one onto the cluster
# object (None means "not given").
_SIMPLE = {
    "candidate_pool_size": "candidate_pool_size",
    "max_running_jobs": "max_running_jobs",
    "max_tracked_jobs": "max_tracked_jobs",
    "maintain_node_health": "maintain_node_health",
    "prealloc_wipe_disks": "prealloc_wipe_disks",
    "default_iallocator_params": "default_iallocator_params",
    "mac_prefix": "mac_prefix",
    "master_netdev": "master_netdev",
    "master_netmask": "master_netmask",
    "reserved_lvs": "reserved_lvs",
    "use_external_mip_script": "use_external_mip_script",
    "modify_etc_hosts": "modify_etc_hosts",
    "file_storage_dir": "file_storage_dir",
    "shared_file_storage_dir": "shared_file_storage_dir",
    "gluster_storage_dir": "gluster_storage_dir",
    "install_image": "install_image",
    "zeroing_image": "zeroing_image",
    "instance_communication_network": "instance_communication_network",
    "compression_tools": "compression_tools",
    "enabled_user_shutdown": "enabled_user_shutdown",
    "vg_name": "volume_group_name",
    "drbd_helper": "drbd_usermode_helper",
}


#: OP_CLUSTER_SET_PARAMS's switches of the maintenance daemon
_MAINT_PARAMS = ("maint_round_delay", "maint_balance",
                 "maint_balance_threshold", "maint_harep",
                 "maint_balance_disk_moves", "maint_balance_load",
                 "maint_balance_hold_down", "maint_balance_max_moves")


#: a cluster attribute that does not exist
_UNSET = object()

def _default_allocators(cluster):
    """(Ganeti's one default allocator name, this project's per request
    type lists); a malformed stored value is shown as it is."""
    try:
        spec = ia_defaults.parse_spec(cluster.default_iallocator)
    except errors.OpPrereqError:
        return cluster.default_iallocator, {}
    return spec.first(), spec.as_dict()


def _check_diagnose_filename(name):
    """The self-diagnose command is a bare name the nodes look up in their
    whitelist directory ("" = the built-in diagnose)."""
    if name == "":
        return
    from ganeti.backend import restricted
    try:
        restricted.check_name(name)
    except restricted.CommandRefused as err:
        raise errors.OpPrereqError(
            "diagnose_data_collector_filename: %s; give a file name of the"
            " nodes' node-diagnose-commands directory, or '' for the built-in"
            " diagnose" % err, errors.ECODE_INVAL)


def cluster_info(cfg):
    """The QueryClusterInfo / OP_CLUSTER_QUERY answer (Ganeti's keys, plus
    ``default_iallocators``: the default allocators per request type)."""
    c = cfg.cluster
    default_ialloc, default_iallocs = _default_allocators(c)
    master = cfg.nodes.get(c.master_node)
    collectors = c.data_collectors or {}
    return {
        "software_version": constants.RELEASE_VERSION,
        "protocol_version": constants.PROTOCOL_VERSION,
        "config_version": constants.CONFIG_VERSION,
        "os_api_version": max(constants.OS_API_VERSIONS),
        "export_version": constants.EXPORT_VERSION,
        "vcs_version": "ganeti-twisted",
        "architecture": (platform.architecture()[0], platform.machine()),
        "name": c.cluster_name,
        "master": master.name if master else None,
        "default_hypervisor": c.default_hypervisor,
        "enabled_hypervisors": list(c.enabled_hypervisors),
        "hvparams": {hv: objects.fill_dict(constants.HVC_DEFAULTS.get(hv, {}),
                                           c.hvparams.get(hv, {}))
                     for hv in c.enabled_hypervisors},
        "os_hvp": c.os_hvp,
        "beparams": c.beparams,
        "osparams": c.osparams,
        "ipolicy": objects.fill_ipolicy(constants.IPOLICY_DEFAULTS,
                                        c.ipolicy),
        "nicparams": c.nicparams,
        "ndparams": objects.fill_dict(constants.NDC_DEFAULTS, c.ndparams),
        "diskparams": c.diskparams,
        "candidate_pool_size": c.candidate_pool_size,
        "max_running_jobs": c.max_running_jobs,
        "max_tracked_jobs": c.max_tracked_jobs,
        "mac_prefix": c.mac_prefix,
        "master_netdev": c.master_netdev,
        "master_netmask": c.master_netmask,
        "use_external_mip_script": c.use_external_mip_script,
        "volume_group_name": c.volume_group_name,
        "drbd_usermode_helper": c.drbd_usermode_helper,
        "file_storage_dir": c.file_storage_dir,
        "shared_file_storage_dir": c.shared_file_storage_dir,
        "gluster_storage_dir": c.gluster_storage_dir,
        "maintain_node_health": c.maintain_node_health,
        "ctime": c.ctime,
        "mtime": c.mtime,
        "uuid": c.uuid,
        "tags": sorted(c.tags),
        "uid_pool": [list(r) for r in c.uid_pool],
        "default_iallocator": default_ialloc,
        "default_iallocators": default_iallocs,
        "default_iallocator_params": c.default_iallocator_params,
        "reserved_lvs": c.reserved_lvs,
        "primary_ip_version": 4 if c.primary_ip_family == 2 else 6,
        "prealloc_wipe_disks": c.prealloc_wipe_disks,
        "hidden_os": c.hidden_os,
        "blacklisted_os": c.blacklisted_os,
        "enabled_disk_templates": list(c.enabled_disk_templates),
        "install_image": c.install_image,
        "instance_communication_network": c.instance_communication_network,
        "zeroing_image": c.zeroing_image,
        "compression_tools": c.compression_tools,
        "enabled_user_shutdown": c.enabled_user_shutdown,
        "enabled_data_collectors": {k: v.get("active", True)
                                    for k, v in collectors.items()},
        "data_collector_interval": {k: v.get("interval")
                                    for k, v in collectors.items()},
        "diagnose_data_collector_filename": (
            collectors.get(constants.DATA_COLLECTOR_DIAGNOSE) or {}).get(
                "filename") or "",
        "modify_ssh_setup": c.modify_ssh_setup,
        "ssh_key_type": c.ssh_key_type,
        "ssh_key_bits": c.ssh_key_bits,
        "maint_round_delay": cfg.maintenance.round_delay,
        "maint_balance": cfg.maintenance.balance,
        "maint_balance_threshold": cfg.maintenance.balance_threshold,
        "maintenance": maintenance_view(cfg),
    }


def maintenance_view(cfg):
    """The maintenance daemon's switches and incidents as clients see them
    (node names next to uuids; ``gnt-cluster info``/``repair-list``, RAPI
    ``/2/maintenance``)."""
    m = cfg.maintenance
    view = {key: getattr(m, key) for key in maint_config.PARAMETERS}

    def node_name(uuid):
        node = cfg.nodes.get(uuid)
        return node.name if node is not None else None
    view["incidents"] = [
        {"id": inc.uuid, "node": inc.node, "node_name": node_name(inc.node),
         "original": inc.original, "action": inc.action,
         "repair-status": inc.repair_status, "jobs": list(inc.jobs),
         "tag": inc.tag, "ctime": inc.ctime, "mtime": inc.mtime}
        for inc in sorted(m.incidents.values(),
                          key=lambda i: (i.ctime or 0, i.uuid))]
    view["jobs"] = list(m.jobs)
    # uuids (what the daemon records), and names for people
    view["evacuated"] = list(m.evacuated)
    view["evacuated_names"] = [node_name(u) or u for u in m.evacuated]
    # the balancing moves' hold-down and hourly cap are read from here
    view["moves"] = [list(mv) for mv in m.moves]
    return view


class LUClusterQuery(LogicalUnit):
    OP_ID = "OP_CLUSTER_QUERY"

    async def exec_(self):
        return cluster_info(self.cfg)


class LUClusterVerifyConfig(LogicalUnit):
    """Report every inconsistency of the configuration; True if none."""
    OP_ID = "OP_CLUSTER_VERIFY_CONFIG"

    async def exec_(self):
        problems = self.cfg.verify()
        self.log_info("Verifying cluster config")
        for problem in problems:
            self.log_info("  - ERROR: %s", problem)
        return not problems


def _edit_os_list(current, mods, field):
    result = list(current or [])
    for action, name in mods or []:
        if action == "add":
            if name not in result:
                result.append(name)
        elif name in result:
            result.remove(name)
        else:
            raise errors.OpPrereqError("%s: OS '%s' is not in the list"
                                       % (field, name), errors.ECODE_INVAL)
    return result


class LUClusterSetParams(LogicalUnit):
    """gnt-cluster modify: every change is checked before any is made."""
    OP_ID = "OP_CLUSTER_SET_PARAMS"
    REQ_BGL = True

    def check_prereq(self):
        op = self.op
        c = self.cfg.cluster
        changes = {}
        for param, field in _SIMPLE.items():
            value = getattr(op, param)
            if value is not None:
                changes[field] = value
        if op.enabled_hypervisors is not None:
            if not op.enabled_hypervisors:
                raise errors.OpPrereqError(
                    "enabled_hypervisors: at least one is needed",
                    errors.ECODE_INVAL)
            used = {i.hypervisor for i in self.cfg.instances.values()
                    if i.hypervisor}
            dropped = sorted(used - set(op.enabled_hypervisors))
            if dropped:
                raise errors.OpPrereqError(
                    "enabled_hypervisors: %s still used by instances"
                    % ", ".join(dropped), errors.ECODE_STATE)
            changes["enabled_hypervisors"] = list(op.enabled_hypervisors)
            if c.default_hypervisor not in op.enabled_hypervisors:
                changes["default_hypervisor"] = op.enabled_hypervisors[0]
        if op.enabled_disk_templates is not None:
            if not op.enabled_disk_templates:
                raise errors.OpPrereqError(
                    "enabled_disk_templates: at least one is needed",
                    errors.ECODE_INVAL)
            self._check_disabled_templates_unused(op.enabled_disk_templates)
            changes["enabled_disk_templates"] = list(
                op.enabled_disk_templates)
        if op.ndparams:
            check_ndparams(op.ndparams, level="cluster")
            # merged as Ganeti does; "default" drops a key
            changes["ndparams"] = update_params(c.ndparams, op.ndparams)
        self.group_policies = {}
        self._check_ipolicy(changes)
        if op.diskparams is not None:
            op.diskparams = diskparams.check_diskparams(op.diskparams)
        for family in ("hvparams", "os_hvp", "osparams",
                       "osparams_private_cluster", "diskparams"):
            value = getattr(op, family)
            if value is not None:
                merged = {}
                for sub, params in value.items():
                    merged[sub] = objects.fill_dict(
                        getattr(c, family).get(sub, {}), params)
                changes[family] = merged
        if op.hvparams:
            for hv, params in op.hvparams.items():
                unknown = sorted(set(params) -
                                 set(constants.HVC_DEFAULTS.get(hv, {}))
                                 ) if hv in (constants.HT_FAKE,
                                             constants.HT_KVM) else []
                if unknown:
                    raise errors.OpPrereqError(
                        "hvparams: unknown %s parameter(s) %s"
                        % (hv, ", ".join(unknown)), errors.ECODE_INVAL)
        if op.beparams is not None:
            unknown = sorted(set(op.beparams) - set(constants.BEC_DEFAULTS)
                             - {constants.BE_MEMORY})
            if unknown:
                raise errors.OpPrereqError(
                    "beparams: unknown parameter(s) %s" % ", ".join(unknown),
                    errors.ECODE_INVAL)
            be = dict(op.beparams)
            if constants.BE_MEMORY in be:
                mem = be.pop(constants.BE_MEMORY)
                be.setdefault(constants.BE_MAXMEM, mem)
                be.setdefault(constants.BE_MINMEM, mem)
            changes["beparams"] = {constants.PP_DEFAULT: objects.fill_dict(
                c.beparams.get(constants.PP_DEFAULT, {}), be)}
        if op.nicparams is not None:
            nic = objects.fill_dict(
                c.nicparams.get(constants.PP_DEFAULT, {}),
                {k: v for k, v in op.nicparams.items() if v is not None})
            if nic.get(constants.NIC_MODE) not in constants.NIC_VALID_MODES:
                raise errors.OpPrereqError(
                    "nicparams: mode '%s' is not one of %s"
                    % (nic.get(constants.NIC_MODE),
                       ", ".join(sorted(constants.NIC_VALID_MODES))),
                    errors.ECODE_INVAL)
            changes["nicparams"] = {constants.PP_DEFAULT: nic}
        pool = [list(r) for r in c.uid_pool]
        try:
            if op.uid_pool is not None:
                pool = uidpool.normalize_uid_pool(op.uid_pool)
            if op.add_uids is not None:
                pool = uidpool.add_to_uid_pool(pool, op.add_uids)
            if op.remove_uids is not None:
                pool = uidpool.remove_from_uid_pool(pool, op.remove_uids)
        except errors.ParameterError as err:
            raise errors.OpPrereqError("uid_pool: %s" % err.args[-1],
                                       errors.ECODE_INVAL)
        if (op.uid_pool, op.add_uids, op.remove_uids) != (None, None, None):
            changes["uid_pool"] = [list(r) for r in pool]
        if op.hidden_os is not None:
            changes["hidden_os"] = _edit_os_list(c.hidden_os, op.hidden_os,
                                                 "hidden_os")
        if op.blacklisted_os is not None:
            changes["blacklisted_os"] = _edit_os_list(
                c.blacklisted_os, op.blacklisted_os, "blacklisted_os")
        diagnose_file = op.diagnose_data_collector_filename
        if op.enabled_data_collectors or op.data_collector_interval or \
                diagnose_file is not None:
            collectors = {k: dict(v) for k, v in
                          (c.data_collectors or {}).items()}
            for field, values in (("enabled_data_collectors",
                                   op.enabled_data_collectors),
                                  ("data_collector_interval",
                                   op.data_collector_interval)):
                unknown = sorted(set(values or ()) -
                                 set(constants.DATA_COLLECTOR_NAMES))
                if unknown:
                    raise errors.OpPrereqError(
                        "%s: unknown data collector(s) %s (known: %s)"
                        % (field, ", ".join(unknown),
                           ", ".join(constants.DATA_COLLECTOR_NAMES)),
                        errors.ECODE_INVAL)
            for name, active in (op.enabled_data_collectors or {}).items():
                collectors.setdefault(name, {})["active"] = active
            for name, interval in (op.data_collector_interval or {}).items():
                if interval <= 0:
                    raise errors.OpPrereqError(
                        "data_collector_interval: %s must be positive" % name,
                        errors.ECODE_INVAL)
                collectors.setdefault(name, {})["interval"] = interval
            if diagnose_file is not None:
                _check_diagnose_filename(diagnose_file)
                collectors.setdefault(constants.DATA_COLLECTOR_DIAGNOSE,
                                      {})["filename"] = diagnose_file
            changes["data_collectors"] = collectors
        spec = self._default_allocators()
        if spec is not None:
            changes["default_iallocator"] = spec
        if op.default_iallocator_params is not None:
            from ganeti.cmdlib import allocation
            for key, value in op.default_iallocator_params.items():
                allocation.check_param(key, value,
                                       "default_iallocator_params")
        self.maint_changes = {
            name[len("maint_"):]: getattr(op, name)
            for name in _MAINT_PARAMS if getattr(op, name) is not None}
        maint_config.check_parameters(self.maint_changes, prefix="maint")
        if not changes and not self.maint_changes:
            raise errors.OpPrereqError("Please give at least one of the"
                                       " parameters", errors.ECODE_INVAL)
        self.changes = changes

    def _check_disabled_templates_unused(self, enabled):
        """A disk template still used by an instance's disk (or, for
        diskless, by an instance without disks) cannot be disabled."""
        cfg = self.cfg
        for template in sorted(set(cfg.cluster.enabled_disk_templates)
                               - set(enabled)):
            users = sorted(i.display_name for i in cfg.instances.values()
                           if (template == constants.DT_DISKLESS
                               and not i.disks) or
                           any(d.dev_type == template
                               for d in cfg.instance_disks(i)))
            if users:
                raise errors.OpPrereqError(
                    "enabled_disk_templates: cannot disable disk template"
                    " '%s', instances use it: %s"
                    % (template, _listing(users)), errors.ECODE_STATE)

    def _check_ipolicy(self, changes):
        """The policy given, merged over the cluster's; its disk templates
        must be enabled (Ganeti's rule).  When the enabled templates change
        and no policy templates are given, disabled templates are cut from
        the cluster's policy and from the groups' (as Ganeti's init cuts
        them), and a cluster policy that allowed every enabled template
        allows the newly enabled ones too."""
        op = self.op
        c = self.cfg.cluster
        enabled = changes.get("enabled_disk_templates",
                              c.enabled_disk_templates)
        policy = c.ipolicy
        if op.ipolicy:
            ipolicy.check_policy(op.ipolicy)
            policy = objects.fill_ipolicy(
                constants.IPOLICY_DEFAULTS,
                ipolicy.update_policy(c.ipolicy, op.ipolicy))
            self._check_std(policy)
        given_dts = (op.ipolicy or {}).get(constants.IPOLICY_DTS)
        if given_dts is not None and given_dts != constants.VALUE_DEFAULT:
            ipolicy.check_templates_enabled(policy, enabled)
        elif "enabled_disk_templates" in changes:
            old_dts = policy[constants.IPOLICY_DTS]
            if set(old_dts) == set(c.enabled_disk_templates):
                # a policy allowing every enabled template keeps doing so
                cut = dict(policy)
                cut[constants.IPOLICY_DTS] = list(enabled)
            else:
                cut = ipolicy.restrict_templates(policy, enabled)
            new_dts = cut[constants.IPOLICY_DTS]
            for what, dts in (("no longer allows", set(old_dts)
                               - set(new_dts)),
                              ("now allows", set(new_dts) - set(old_dts))):
                if dts:
                    self.log_info("The cluster's instance policy %s disk"
                                  " template%s %s", what,
                                  "s" if len(dts) > 1 else "",
                                  ", ".join(sorted(dts)))
            policy = cut
            for group in self.cfg.nodegroups.values():
                custom = group.ipolicy or {}
                if constants.IPOLICY_DTS in custom:
                    cut = ipolicy.restrict_templates(custom, enabled)
                    if cut != custom:
                        self.group_policies[group.uuid] = cut
        else:
            ipolicy.check_templates_enabled(policy, enabled)
        if op.ipolicy or policy != c.ipolicy:
            changes["ipolicy"] = policy
            self._warn_new_violations(policy)

    def _check_std(self, policy):
        std = policy.get(constants.ISPECS_STD) or {}
        trial = dict(policy)
        trial[constants.IPOLICY_DTS] = list(constants.DISK_TEMPLATES)
        bad = ipolicy.spec_violations(
            trial, memory=std.get(constants.ISPEC_MEM_SIZE),
            vcpus=std.get(constants.ISPEC_CPU_COUNT),
            nic_count=std.get(constants.ISPEC_NIC_COUNT),
            spindle_use=std.get(constants.ISPEC_SPINDLE_USE),
            disk_sizes=[std.get(constants.ISPEC_DISK_SIZE)],
            disk_count=std.get(constants.ISPEC_DISK_COUNT))
        if bad:
            raise errors.OpPrereqError(
                "ipolicy/std: the standard specs must lie within the"
                " bounds: %s" % ", ".join(bad), errors.ECODE_INVAL)

    def _warn_new_violations(self, policy):
        cfg = self.cfg
        c = cfg.cluster

        def before(group):
            return objects.fill_group_ipolicy(c, group)

        def after(group):
            custom = (self.group_policies.get(group.uuid, group.ipolicy)
                      if group is not None else {})
            return objects.fill_ipolicy(
                objects.fill_ipolicy(constants.IPOLICY_DEFAULTS, policy),
                custom)
        new = sorted(set(ipolicy.violating_instances(cfg, after))
                     - set(ipolicy.violating_instances(cfg, before)))
        if new:
            self.log_warning("After the ipolicy change the following"
                             " instances violate it: %s", _listing(new))

    def _default_allocators(self):
        """The new default_iallocator text, or None if unchanged.

        ``default_iallocator`` replaces the whole setting (a name, a list,
        or lists per request type); ``default_iallocators`` changes the
        lists of some request types (None: back to the list for all)."""
        op = self.op
        if op.default_iallocator is None and not op.default_iallocators:
            return None
        if op.default_iallocator is not None:
            spec = ia_defaults.parse_spec(op.default_iallocator)
        else:
            spec = ia_defaults.parse_spec(self.cfg.cluster.default_iallocator)
        per_mode = {}
        for mode, names in (op.default_iallocators or {}).items():
            field = "default_iallocators/%s" % mode
            if names is not None:
                names = ia_defaults.parse_names(",".join(names), field) \
                    if names else ()
            per_mode[mode] = names
        spec = spec.replace(per_mode=per_mode)
        from ganeti.cmdlib import allocation
        registry = allocation.registry(self)
        wanted = set(spec.common)
        for names in spec.per_mode.values():
            wanted.update(names)
        for name in sorted(wanted):
            try:
                registry.lookup(name)
            except AllocatorNotFound as err:
                raise errors.OpPrereqError(
                    "default_iallocator: %s" % err.args[0],
                    errors.ECODE_INVAL)
        return spec.to_spec()

    async def exec_(self):
        # what a client sent again unchanged (Ganeti's gnt-cluster modify
        # sends its defaults) is neither written nor reported as changed
        cluster = self.cfg.cluster
        self.changes = {key: value for key, value in self.changes.items()
                        if getattr(cluster, key, _UNSET) != value}
        if self.changes:
            self.cfg.set_cluster_params(**self.changes)
        if self.maint_changes:
            self.cfg.set_maintenance_params(**self.maint_changes)
            for key in sorted(self.maint_changes):
                self.log_info("Changed maint_%s", key)
        for uuid, policy in sorted(self.group_policies.items()):
            self.cfg.set_nodegroup_params(uuid, ipolicy=policy)
            self.log_info("Changed the instance policy of node group %s",
                          self.cfg.nodegroups[uuid].name)
        for key in sorted(self.changes):
            self.log_info("Changed %s", key)
        if "max_running_jobs" in self.changes and self.ctx.queue is not None:
            self.ctx.queue.set_max_running(self.changes["max_running_jobs"])
        if "candidate_pool_size" in self.changes:
            # a bigger pool is filled at once (as Ganeti does); the new
            # candidates get their files in this job
            promoted = maintain_candidate_pool(self)
            if promoted:
                update_candidate_certs(self)
                await replication.sync(self)
                await ship_candidate_files(self, promoted)


class LUClusterRepairCancel(LogicalUnit):
    """gnt-cluster repair-cancel: the maintenance daemon takes no more
    action for an incident and forgets it once no node reports it."""
    OP_ID = "OP_CLUSTER_REPAIR_CANCEL"
    REQ_BGL = False

    def check_prereq(self):
        if self.op.incident_id not in self.cfg.maintenance.incidents:
            raise errors.OpPrereqError(
                "incident_id: no incident '%s' (gnt-cluster repair-list"
                " lists them)" % self.op.incident_id, errors.ECODE_NOENT)

    async def exec_(self):
        if self.cfg.cancel_incident(self.op.incident_id):
            self.log_info("Canceled incident %s", self.op.incident_id)
        else:
            self.log_info("Incident %s was canceled already",
                          self.op.incident_id)


# --- destroy -----------------------------------------------------------------

#: at most this many names are listed in an error
_MAX_LISTED = 10


def _listing(names):
    names = sorted(names)
    text = ", ".join(names[:_MAX_LISTED])
    if len(names) > _MAX_LISTED:
        text += " and %d more" % (len(names) - _MAX_LISTED)
    return text


class LUClusterDestroy(LogicalUnit):
    """Agree to destroy an empty one-node cluster."""
    OP_ID = "OP_CLUSTER_DESTROY"
    # nothing else may run (or start) while we decide
    REQ_BGL = True

    def check_prereq(self):
        cfg = self.cfg
        master = cfg.cluster.master_node
        others = [n.name for n in cfg.nodes.values() if n.uuid != master]
        if others or master not in cfg.nodes:
            raise errors.OpPrereqError(
                "There are still %d node(s) in this cluster besides the"
                " master: %s; remove them first (gnt-node remove)"
                % (len(others), _listing(others)), errors.ECODE_INVAL)
        instances = [i.display_name + (" (forthcoming)" if i.forthcoming
                                       else "")
                     for i in cfg.instances.values()]
        if instances:
            raise errors.OpPrereqError(
                "There are still %d instance(s) in this cluster: %s; remove"
                " them first (gnt-instance remove)"
                % (len(instances), _listing(instances)), errors.ECODE_INVAL)

    async def exec_(self):
        master = self.cfg.nodes[self.cfg.cluster.master_node]
        self.log_info("The cluster can be destroyed; its master node is %s",
                      master.name)
        return master.uuid
