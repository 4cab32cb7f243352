"""OP_INSTANCE_SET_PARAMS: change an instance's parameters and devices.

Every requested change is checked first (parameters, NICs, disks, resources
of the resulting instance); only then is anything changed.  Supported:
beparams, hvparams, osparams, os_name, NICs (add, modify, remove), disks
(add: created on the node; modify: name and mode; remove: instance stopped),
offline/online.  The result is Ganeti's list of ``(what, new value)``.
"""

import copy

from ganeti import constants
from ganeti import errors
from ganeti import ipolicy
from ganeti import leases
from ganeti import locking
from ganeti import objects
from ganeti.cmdlib import capacity
from ganeti.cmdlib import checks
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import instance_nics
from ganeti.cmdlib import instance_params
from ganeti.cmdlib import operating_system
from ganeti.cmdlib import payloads
from ganeti.cmdlib.base import LogicalUnit

_ADD = "add"
_MODIFY = "modify"
_REMOVE = "remove"

#: parameters we do not implement yet, with why
_UNSUPPORTED = {
    "disk_template": "disk template conversion",
    "pnode": "changing the primary node (use migrate/failover)",
    "pnode_uuid": "changing the primary node (use migrate/failover)",
    "remote_node": "DRBD secondaries",
    "remote_node_uuid": "DRBD secondaries",
    "iallocator": "instance allocators",
    "runtime_mem": "ballooning",
    "instance_communication": "instance communication",
}


def _normalise_mods(mods, field):
    """[(action, index-or-name, params)] from both of Ganeti's forms."""
    result = []
    for item in mods:
        if len(item) == 3:
            action, ident, params = item
        else:
            first, params = item
            if isinstance(first, int):
                action, ident = _MODIFY, first
            else:
                action, ident = first, -1
        if action not in (_ADD, _MODIFY, _REMOVE):
            raise errors.OpPrereqError(
                "%s: action '%s' is not supported yet (supported: add,"
                " modify, remove)" % (field, action), errors.ECODE_INVAL)
        if isinstance(ident, str):
            try:
                ident = int(ident)
            except ValueError:
                pass
        result.append((action, ident, dict(params or {})))
    return result


def _find(items, ident, field, what):
    """Index in ``items`` (objects with .name) of an index or a name."""
    if isinstance(ident, int):
        idx = ident if ident >= 0 else len(items) + ident
        if not 0 <= idx < len(items):
            raise errors.OpPrereqError(
                "%s: %s index %s is out of range (the instance has %d)"
                % (field, what, ident, len(items)), errors.ECODE_INVAL)
        return idx
    for idx, item in enumerate(items):
        if item.name == ident or getattr(item, "uuid", None) == ident:
            return idx
    raise errors.OpPrereqError("%s: no %s named '%s'" % (field, what, ident),
                               errors.ECODE_NOENT)


class LUInstanceSetParams(LogicalUnit):
    OP_ID = "OP_INSTANCE_SET_PARAMS"

    def check_arguments(self):
        op = self.op
        for param, what in sorted(_UNSUPPORTED.items()):
            if getattr(op, param) is not None:
                raise errors.OpPrereqError("%s: %s is not supported yet"
                                           % (param, what),
                                           errors.ECODE_INVAL)
        if op.ext_params:
            raise errors.OpPrereqError("ext_params: ext disks are not"
                                       " supported", errors.ECODE_INVAL)
        if op.file_driver or op.file_storage_dir:
            raise errors.OpPrereqError(
                "file_driver/file_storage_dir: only used with disk template"
                " conversion, which is not supported yet",
                errors.ECODE_INVAL)
        if op.hotplug:
            self.log_warning("Hotplug is not supported; device changes take"
                             " effect at the instance's next start")
        self.nic_mods = _normalise_mods(op.nics, "nics")
        self.disk_mods = _normalise_mods(op.disks, "disks")
        self.beparams = instance_params.check_beparams(op.beparams)
        if not (self.nic_mods or self.disk_mods or op.beparams or
                op.hvparams or op.os_name or op.osparams or
                op.osparams_private or op.offline is not None or
                op.lease_until is not None):
            raise errors.OpPrereqError("No changes submitted",
                                       errors.ECODE_INVAL)
        operating_system.check_osparams_disjoint(
            osparams=op.osparams, osparams_private=op.osparams_private)

    def expand_names(self):
        name = self.op.instance_uuid or self.op.instance_name
        self.instance_uuid = self.expand_instance(name)
        self.needed_locks[locking.LEVEL_INSTANCE] = [self.instance_uuid]

    def declare_locks(self, level):
        if level in (locking.LEVEL_NODE, locking.LEVEL_NODE_RES):
            inst = self.cfg.get_instance(self.instance_uuid)
            self.needed_locks[level] = list(inst.all_nodes)

    @property
    def instance(self):
        return self.cfg.get_instance(self.instance_uuid)

    # --- checks -------------------------------------------------------------

    async def check_prereq(self):
        op = self.op
        cfg = self.cfg
        cluster = cfg.cluster
        inst = self.instance
        changes = {}
        if op.offline is not None:
            if op.offline:
                checks.check_instance_state(
                    inst, [constants.ADMINST_DOWN],
                    "can't change to offline without being down first")
            else:
                checks.check_instance_state(
                    inst, [constants.ADMINST_OFFLINE],
                    "can't change to online (down) without being offline"
                    " first")
        if self.beparams:
            changes["beparams"] = {
                k: v for k, v in instance_params.update_params(
                    inst.beparams, self.beparams).items()}
        if op.hvparams:
            changes["hvparams"] = instance_params.update_params(inst.hvparams,
                                                                op.hvparams)
        if op.os_name:
            operating_system.check_os_name(op.os_name, "os_name")
            operating_system.check_os_allowed(cluster, op.os_name, "os_name")
            changes["os"] = op.os_name
        if op.osparams:
            changes["osparams"] = instance_params.update_params(inst.osparams,
                                                                op.osparams)
        if op.osparams_private:
            changes["osparams_private"] = instance_params.update_params(
                inst.osparams_private, op.osparams_private)
        self.lease = None
        if op.lease_until is not None:
            if not inst.forthcoming:
                raise errors.OpPrereqError(
                    "lease_until: instance %s is not forthcoming; only a"
                    " reservation can have a lease" % inst.display_name,
                    errors.ECODE_STATE)
            # (None,): unlimited
            self.lease = (leases.parse(op.lease_until,
                                       self.ctx.clock.seconds()),)
        candidate = inst.copy()
        for key, value in changes.items():
            setattr(candidate, key, copy.deepcopy(value))
        if "beparams" in changes:
            instance_params.check_memory_range(
                objects.fill_beparams(cluster, candidate))
        if "hvparams" in changes or "os" in changes:
            instance_params.check_hvparams(cluster, candidate,
                                           log_warning=self.log_warning)
        # NICs
        self.nic_desc = []
        if self.nic_mods:
            changes["nics"] = self._plan_nics(inst)
            candidate.nics = changes["nics"]
        # Disks
        self.disk_plan = []
        final_disks = self._plan_disks(inst)
        if "beparams" in changes or "nics" in changes or any(
                action != _MODIFY for action, _, _, _ in self.disk_plan):
            self._check_ipolicy(candidate, final_disks)
        await self._check_capacity(inst, candidate, final_disks)
        self.changes = changes
        self.candidate = candidate

    async def _check_capacity(self, inst, candidate, disks):
        """What the change adds (more memory, vCPUs or spindles, new disks)
        must fit on the instance's nodes; with ``force``, memory is not
        checked (as in Ganeti)."""
        grown = self.cfg.instance_growth(candidate, disks=disks)
        if self.op.force:
            grown.discard("memory")
        if grown:
            await capacity.check_instance_fits(self, candidate, disks=disks,
                                               only=grown)

    def _check_ipolicy(self, candidate, disks):
        """The instance as it would be must meet its group's policy, with
        its maximum and its minimum memory (Ganeti's rule); a forthcoming
        one only in what it declares."""
        cfg = self.cfg
        if candidate.forthcoming:
            specs = [ipolicy.declared_spec(cfg, candidate, disks)]
        else:
            specs = [ipolicy.instance_spec(cfg, candidate, disks=disks)]
        be = objects.fill_beparams(cfg.cluster, candidate)
        if specs[0]["memory"] is not None and \
                be[constants.BE_MINMEM] != be[constants.BE_MAXMEM]:
            specs.append(dict(specs[0], memory=be[constants.BE_MINMEM]))
        group, policy = ipolicy.group_policy(cfg, candidate.primary_node)
        violations = []
        for spec in specs:
            for msg in ipolicy.spec_violations(policy, **spec):
                if msg not in violations:
                    violations.append(msg)
        if violations:
            ipolicy.enforce(self, ipolicy.allocation_message(group,
                                                             violations),
                            self.op.ignore_ipolicy)

    def _plan_nics(self, inst):
        cfg = self.cfg
        group = None
        if inst.primary_node in cfg.nodes:
            group = cfg.nodegroups.get(cfg.nodes[inst.primary_node].group)
        nics = [n.copy() for n in inst.nics]
        others = instance_nics.used_macs(cfg, inst.uuid)
        pool_taken = {}
        for action, ident, params in self.nic_mods:
            where = "nics"
            if action == _ADD:
                if len(nics) >= constants.MAX_NICS:
                    raise errors.OpPrereqError(
                        "nics: instance %s would have more than %d network"
                        " interfaces" % (inst.display_name,
                                         constants.MAX_NICS),
                        errors.ECODE_STATE)
                idx = len(nics) if ident == -1 else ident
                if not isinstance(idx, int) or not 0 <= idx <= len(nics):
                    raise errors.OpPrereqError(
                        "nics: cannot add a NIC at index %s" % (ident,),
                        errors.ECODE_INVAL)
                used = others | {n.mac for n in nics}
                nic = instance_nics.build_nic(
                    cfg, params, "nics/%d" % idx, group, used,
                    pool_taken=pool_taken)
                nics.insert(idx, nic)
                filled = objects.fill_nicparams(cfg.cluster, nic, group)
                self.nic_desc.append((
                    "nic.%d" % idx,
                    "add:mac=%s,ip=%s,mode=%s,link=%s,network=%s"
                    % (nic.mac, nic.ip, filled.get(constants.NIC_MODE),
                       filled.get(constants.NIC_LINK), params.get("network"))))
            elif action == _MODIFY:
                idx = _find(nics, ident, where, "NIC")
                old = nics[idx]
                used = others | {n.mac for i, n in enumerate(nics)
                                 if i != idx}
                nic = instance_nics.build_nic(
                    cfg, params, "nics/%d" % idx, group, used, old=old,
                    pool_taken=pool_taken)
                nics[idx] = nic
                for key in ("mac", "ip", "name"):
                    if key in params:
                        self.nic_desc.append(("nic.%s/%d" % (key, idx),
                                              getattr(nic, key)))
                if "network" in params:
                    self.nic_desc.append(("nic.network/%d" % idx,
                                          params["network"]))
                for key in ("mode", "link", "vlan", "bridge"):
                    if key in params:
                        real = "link" if key == "bridge" else key
                        self.nic_desc.append((
                            "nic.%s/%d" % (real, idx),
                            nic.nicparams.get(real)))
            else:
                idx = _find(nics, ident, where, "NIC")
                nics.pop(idx)
                self.nic_desc.append(("nic.%d" % idx, "remove"))
        instance_nics.check_unique_ips(cfg, nics, inst.uuid)
        return nics

    def _plan_disks(self, inst):
        """Simulate the disk changes; the resulting disk list."""
        cfg = self.cfg
        current = [d.copy() for d in cfg.instance_disks(inst)]
        if not self.disk_mods:
            return current
        template = objects.disk_template_of(current)
        for action, ident, params in self.disk_mods:
            if action == _ADD:
                if template == constants.DT_DISKLESS:
                    raise errors.OpPrereqError(
                        "disks: disk operations are not supported for"
                        " diskless instances", errors.ECODE_INVAL)
                if template == "mixed":
                    raise errors.OpPrereqError(
                        "disks: the instance's disks are of mixed types; give"
                        " dev_type", errors.ECODE_INVAL)
                if len(current) >= constants.MAX_DISKS:
                    raise errors.OpPrereqError(
                        "disks: instance %s would have more than %d disks"
                        % (inst.display_name, constants.MAX_DISKS),
                        errors.ECODE_STATE)
                if ident not in (-1, len(current)):
                    raise errors.OpPrereqError(
                        "disks: new disks can only be added at the end"
                        " (index -1 or %d)" % len(current),
                        errors.ECODE_INVAL)
                idx = len(current)
                instance_disks.check_template(
                    cfg.cluster, template, "disks/%d" % idx)
                disk = instance_disks.generate_disk(
                    cfg, template, inst.name or inst.uuid, idx, params,
                    forthcoming=inst.forthcoming)
                if disk.dev_type in constants.DTS_NODE_LOCAL:
                    disk.nodes = list(inst.all_nodes)
                current.append(disk)
                self.disk_plan.append((_ADD, idx, disk, params))
            elif action == _MODIFY:
                idx = _find(current, ident, "disks", "disk")
                bad = sorted(set(params) - {"name", "mode"})
                if bad:
                    raise errors.OpPrereqError(
                        "disks/%d: only name and mode can be modified, not %s"
                        % (idx, ", ".join(bad)), errors.ECODE_INVAL)
                mode = params.get("mode")
                if mode is not None and \
                        mode not in constants.DISK_ACCESS_SET:
                    raise errors.OpPrereqError(
                        "disks/%d/mode: '%s' is not one of ro, rw"
                        % (idx, mode), errors.ECODE_INVAL)
                for key in ("name", "mode"):
                    if key in params:
                        setattr(current[idx], key, params[key] or None)
                self.disk_plan.append((_MODIFY, idx, current[idx], params))
            else:
                idx = _find(current, ident, "disks", "disk")
                if not inst.forthcoming:
                    checks.check_instance_state(
                        inst, checks.INSTANCE_NOT_RUNNING,
                        "cannot remove disks")
                disk = current.pop(idx)
                self.disk_plan.append((_REMOVE, idx, disk, params))
        return current

    # --- execution ----------------------------------------------------------

    async def exec_(self):
        op = self.op
        cfg = self.cfg
        inst = self.instance
        uuid = inst.uuid
        result = []
        if any(a == _REMOVE for a, _, _, _ in self.disk_plan) and \
                not inst.forthcoming:
            await checks.check_not_running(self, inst, "cannot remove disks")
        if not inst.forthcoming and ({"os", "osparams", "osparams_private"}
                                     & set(self.changes)):
            await operating_system.check_os_on_node(
                self, inst.primary_node, self.candidate.os,
                payloads.all_osparams(cfg, self.candidate),
                op.force_variant, "os_name" if op.os_name else
                "osparams" if op.osparams else "osparams_private")
        for action, idx, disk, params in self.disk_plan:
            result.extend(await self._apply_disk(action, idx, disk, params))
        if self.changes:
            cfg.modify_instance(uuid, **self.changes)
            result.extend(self.nic_desc)
            for key, val in sorted(self.beparams.items()):
                result.append(("be/%s" % key, val))
            for key, val in sorted((op.hvparams or {}).items()):
                result.append(("hv/%s" % key, val))
            if op.os_name:
                result.append(("os", op.os_name))
            for key, val in sorted((op.osparams or {}).items()):
                result.append(("os/%s" % key, val))
            for key in sorted(op.osparams_private or {}):
                result.append(("os_private/%s" % key, "<redacted>"))
        if self.lease is not None:
            until = self.lease[0]
            cfg.set_instance_lease(uuid, until)
            result.append(("lease_until", "none" if until is None
                           else leases.format_time(until)))
        if op.offline is not None:
            state = (constants.ADMINST_OFFLINE if op.offline
                     else constants.ADMINST_DOWN)
            cfg.set_instance_admin_state(uuid, state, constants.ADMIN_SOURCE)
            result.append(("admin_state", state))
        for what, value in result:
            self.log_info("Modified %s: %s", what, value)
        return [list(r) for r in result]

    async def _apply_disk(self, action, idx, disk, params):
        cfg = self.cfg
        inst = self.instance
        if action == _ADD:
            created = []
            if not inst.forthcoming:
                self.log_info("Creating disk %d (%s, %d MiB) of instance %s",
                              idx, disk.dev_type, disk.size, inst.name)
                created = await instance_disks.create_disks(self, inst, [disk])
            try:
                cfg.add_instance_disk(inst.uuid, disk)
            except BaseException:
                await instance_disks.remove_disks(self, inst, created)
                raise
            if inst.disks_active and not inst.forthcoming:
                await instance_disks.assemble_disks(
                    self, self.instance, [disk], ignore_failures=True)
            return [("disk/%d" % idx,
                     "add:size=%s,mode=%s" % (disk.size, disk.mode))]
        if action == _MODIFY:
            out = []
            changes = {}
            for key in ("mode", "name"):
                if key in params:
                    changes[key] = params[key] or None
                    out.append(("disk.%s/%d" % (key, idx), changes[key]))
            cfg.modify_disk(disk.uuid, **changes)
            return out
        # remove
        if not inst.forthcoming:
            pairs = [(disk, n) for n in instance_disks.disk_nodes(inst, disk)]
            if inst.disks_active:
                await instance_disks.shutdown_disks(self, inst, pairs,
                                                    ignore_failures=True)
            await instance_disks.remove_disks(self, inst, pairs)
        cfg.remove_instance_disk(inst.uuid, disk.uuid)
        return [("disk/%d" % idx, "remove")]
