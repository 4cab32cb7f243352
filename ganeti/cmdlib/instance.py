"""Instance logical units: life cycle (start, stop, reboot, remove, rename,
reinstall) and the per-instance data query.

Every instance LU locks its instance (by UUID) and, where it touches them,
the instance's nodes.  Checks that need the node's answer (is the instance
running? was it shut down by its user?) run at the start of ``exec_``,
before anything changes, and fail with ``OpPrereqError`` like the checks of
``check_prereq``.

Creation is in :mod:`instance_create`, parameter changes in
:mod:`instance_set_params`, disk operations in :mod:`instance_storage`.
"""

import os

from ganeti import constants
from ganeti import errors
from ganeti import hypervisor
from ganeti import leases
from ganeti import locking
from ganeti import objects
from ganeti import user_shutdown
from ganeti.cmdlib import checks
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import kept_domains
from ganeti.cmdlib import locks
from ganeti.cmdlib import node_calls
from ganeti.cmdlib import operating_system
from ganeti.cmdlib import instance_params
from ganeti.cmdlib import payloads
from ganeti.cmdlib.base import LogicalUnit
from ganeti.watcher import state as watcher_state

ALL_NODES = "all"
PRIMARY_NODE = "primary"


class InstanceLU(LogicalUnit):
    """An LU working on one instance named by ``instance_name``."""

    #: which of the instance's nodes to lock at LEVEL_NODE / LEVEL_NODE_RES
    #: (ALL_NODES, PRIMARY_NODE or None)
    NODE_LOCKS = None
    NODE_RES_LOCKS = None

    def expand_names(self):
        name = self.op.instance_uuid or self.op.instance_name
        self.instance_uuid = self.expand_instance(name)
        self.needed_locks[locking.LEVEL_INSTANCE] = [self.instance_uuid]

    def _instance_nodes(self, which):
        inst = self.cfg.get_instance(self.instance_uuid)
        if which == PRIMARY_NODE:
            return [inst.primary_node] if inst.primary_node else []
        return list(inst.all_nodes)

    def declare_locks(self, level):
        if level == locking.LEVEL_NODE and self.NODE_LOCKS:
            self.needed_locks[level] = self._instance_nodes(self.NODE_LOCKS)
        elif level == locking.LEVEL_NODE_RES and self.NODE_RES_LOCKS:
            self.needed_locks[level] = self._instance_nodes(
                self.NODE_RES_LOCKS)

    @property
    def instance(self):
        """The instance as the configuration has it now."""
        return self.cfg.get_instance(self.instance_uuid)


# --- start / stop / reboot --------------------------------------------------

class LUInstanceStartup(InstanceLU):
    OP_ID = "OP_INSTANCE_STARTUP"
    NODE_RES_LOCKS = PRIMARY_NODE

    def check_arguments(self):
        self.beparams = instance_params.check_beparams(self.op.beparams)

    def check_prereq(self):
        op = self.op
        inst = self.instance
        cluster = self.cfg.cluster
        checks.check_not_forthcoming(inst, "start it")
        checks.check_instance_state(inst, checks.INSTANCE_ONLINE,
                                    "cannot start it (mark it online first)")
        if op.hvparams:
            instance_params.check_hvparams(
                cluster, inst, overrides=op.hvparams,
                log_warning=self.log_warning)
        if self.beparams:
            be = objects.fill_beparams(cluster, inst)
            be.update(self.beparams)
            instance_params.check_memory_range(be)
        self.primary_offline = self.cfg.get_node(inst.primary_node).offline
        if self.primary_offline and op.ignore_offline_nodes:
            self.log_warning("Ignoring offline primary node")
            if op.hvparams or op.beparams:
                self.log_warning("Overridden parameters are ignored")
        else:
            checks.check_node_online(self.cfg, inst.primary_node,
                                     "cannot start instance %s" % inst.name)

    async def exec_(self):
        op = self.op
        cfg = self.cfg
        inst = self.instance
        before = (inst.admin_state, inst.admin_state_source)
        if self.primary_offline:
            if not op.no_remember:
                cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP,
                                             constants.ADMIN_SOURCE)
            self.log_info("Primary node offline, marked instance as started")
            return None
        info = await node_calls.live_info(self, inst)
        running = checks.is_live(info)
        if not running:
            await kept_domains.clean_up(self, inst.primary_node,
                                        skip={inst.uuid})
            be = objects.fill_beparams(cfg.cluster, inst)
            be.update(self.beparams)
            await node_calls.check_free_memory(
                self, inst.primary_node, inst.hypervisor,
                be[constants.BE_MINMEM], "starting instance %s" % inst.name)
        if not op.no_remember:
            cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP,
                                         constants.ADMIN_SOURCE)
        if info and not running:
            # A domain kept after a user shutdown or a crash.
            self.log_info("Cleaning up the %s domain of instance %s first",
                          info.get("state"), inst.name)
            await node_calls.call_node(self, inst.primary_node,
                                       "instance_cleanup",
                                       [inst.name, inst.hypervisor],
                                       "Cleaning up instance %s" % inst.name)
        if running:
            self.log_info("Instance %s is already running", inst.name)
            return None
        try:
            await instance_disks.assemble_disks(self, self.instance)
            spec = payloads.instance_spec(cfg, self.instance,
                                          hvparams=op.hvparams,
                                          beparams=self.beparams)
            self.log_info("Starting instance %s on node %s", inst.name,
                          node_calls.node_name(cfg, inst.primary_node))
            await node_calls.call_node(
                self, inst.primary_node, "instance_start",
                [spec, op.startup_paused], "Starting instance %s" % inst.name)
        except BaseException:
            await instance_disks.shutdown_disks(self, self.instance,
                                                ignore_failures=True)
            if not op.no_remember and \
                    (self.instance.admin_state,
                     self.instance.admin_state_source) != before:
                cfg.set_instance_admin_state(inst.uuid, *before)
            raise
        return None


def _no_user_shutdown(cluster, instance):
    """Why a guest poweroff of ``instance`` is not a user shutdown."""
    if not cluster.enabled_user_shutdown:
        return ("user shutdown is disabled on the cluster (gnt-cluster"
                " modify --user-shutdown yes)")
    return ("its hypervisor parameter user_shutdown is off (gnt-instance"
            " modify -H user_shutdown=true)")


class LUInstanceShutdown(InstanceLU):
    """Stop an instance; with admin_state_source "user", record a shutdown
    the guest's user did (user shutdown detection, docs/instances.rst).

    "user" with ``no_remember`` records nothing: it only cleans up the
    domain kept after the guest powered itself off, checked under the
    instance lock (the watcher does this for instances that should not
    run, docs/watcher.rst), whatever the user-shutdown settings."""
    OP_ID = "OP_INSTANCE_SHUTDOWN"

    def check_arguments(self):
        if self.op.no_remember and \
                self.op.admin_state_source == constants.ADMIN_SOURCE:
            self.log_warning("Parameter 'admin_state_source' has no effect if"
                             " used with parameter 'no_remember'")
        self.source = self.op.admin_state_source or constants.ADMIN_SOURCE
        # only a recorded user shutdown depends on the settings
        self.record_user = (self.source == constants.USER_SOURCE
                            and not self.op.no_remember)

    def check_prereq(self):
        op = self.op
        inst = self.instance
        checks.check_not_forthcoming(inst, "shut it down")
        if op.force:
            self.log_warning("Ignoring offline instance check")
        else:
            checks.check_instance_state(
                inst, checks.INSTANCE_ONLINE,
                "cannot shut it down (it is offline)")
        self.primary_offline = self.cfg.get_node(inst.primary_node).offline
        if self.primary_offline and op.ignore_offline_nodes:
            self.log_warning("Ignoring offline primary node")
        else:
            checks.check_node_online(self.cfg, inst.primary_node,
                                     "cannot shut down instance %s"
                                     % inst.name)
        if self.record_user and \
                not user_shutdown.allowed(self.cfg.cluster, inst):
            raise errors.OpPrereqError(
                "admin_state_source: instance '%s' cannot be marked as shut"
                " down by its user: %s" % (inst.name, _no_user_shutdown(
                    self.cfg.cluster, inst)), errors.ECODE_STATE)
        if self.source == constants.USER_SOURCE and self.primary_offline:
            raise errors.OpPrereqError(
                "Instance '%s': a user shutdown cannot be checked on its"
                " offline primary node" % inst.name, errors.ECODE_STATE)

    async def exec_(self):
        op = self.op
        cfg = self.cfg
        inst = self.instance
        user = self.source == constants.USER_SOURCE
        if user:
            info = await node_calls.live_info(self, inst)
            if self.record_user:
                powered_off = user_shutdown.is_user_down(cfg.cluster, inst,
                                                         info)
            else:
                powered_off = (bool(info) and
                               info.get("state") == hypervisor.SHUTDOWN)
            if not powered_off:
                state = info.get("state") if info else "not present"
                raise errors.OpPrereqError(
                    "Instance '%s' was not shutdown by the user (the node"
                    " reports it %s)" % (inst.name, state),
                    errors.ECODE_STATE)
        if not op.no_remember and inst.admin_state in checks.INSTANCE_ONLINE:
            cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_DOWN,
                                         self.source)
        if self.primary_offline:
            self.log_info("Primary node offline, marked instance as stopped")
            return None
        pname = node_calls.node_name(cfg, inst.primary_node)
        if user:
            # The guest powered itself off; its domain was kept so we could
            # tell.  Clean it up; the disks stay active.
            self.log_info("Cleaning up the domain of instance %s, shut down"
                          " by its user, on node %s", inst.name, pname)
            await node_calls.call_node(self, inst.primary_node,
                                       "instance_cleanup",
                                       [inst.name, inst.hypervisor],
                                       "Cleaning up instance %s" % inst.name)
            return None
        self.log_info("Shutting down instance %s on node %s", inst.name,
                      pname)
        await node_calls.call_node(
            self, inst.primary_node, "instance_shutdown",
            [inst.name, inst.hypervisor, op.timeout],
            "Shutting down instance %s" % inst.name)
        await instance_disks.shutdown_disks(
            self, self.instance, ignore_failures=True)
        return None


class LUInstanceReboot(InstanceLU):
    """soft/hard: the node reboots the running instance; full (or an
    instance that is not running): shutdown and start by the master."""
    OP_ID = "OP_INSTANCE_REBOOT"
    NODE_LOCKS = ALL_NODES

    def check_prereq(self):
        inst = self.instance
        checks.check_not_forthcoming(inst, "reboot it")
        checks.check_instance_state(inst, [constants.ADMINST_UP],
                                    "cannot reboot it (start it instead)")
        checks.check_node_online(self.cfg, inst.primary_node,
                                 "cannot reboot instance %s" % inst.name)

    async def exec_(self):
        op = self.op
        cfg = self.cfg
        inst = self.instance
        info = await node_calls.live_info(self, inst, prereq=False)
        running = checks.is_live(info)
        rtype = op.reboot_type
        if running and rtype in ("soft", "hard"):
            self.log_info("Rebooting instance %s (%s)", inst.name, rtype)
            await node_calls.call_node(
                self, inst.primary_node, "instance_reboot",
                [payloads.instance_spec(cfg, inst), inst.hypervisor, rtype,
                 op.shutdown_timeout],
                "Rebooting instance %s (%s)" % (inst.name, rtype))
        else:
            if running:
                self.log_info("Shutting down instance %s for a full reboot",
                              inst.name)
                await node_calls.call_node(
                    self, inst.primary_node, "instance_shutdown",
                    [inst.name, inst.hypervisor, op.shutdown_timeout],
                    "Shutting down instance %s for a full reboot" % inst.name)
                await instance_disks.shutdown_disks(self, self.instance,
                                                    ignore_failures=True)
            else:
                self.log_info("Instance %s was already stopped, starting now",
                              inst.name)
                if info:
                    await node_calls.call_node(
                        self, inst.primary_node, "instance_cleanup",
                        [inst.name, inst.hypervisor],
                        "Cleaning up instance %s" % inst.name)
            await instance_disks.assemble_disks(self, self.instance)
            result = await node_calls.try_call_node(
                self, inst.primary_node, "instance_start",
                [payloads.instance_spec(cfg, self.instance), False])
            if not result.success:
                await instance_disks.shutdown_disks(self, self.instance,
                                                    ignore_failures=True)
                raise errors.OpExecError(
                    "Could not start instance %s for full reboot: %s"
                    % (inst.name, node_calls.rpc_error(
                        result, "Starting",
                        node_calls.node_name(cfg, inst.primary_node))))
        if self.instance.admin_state != constants.ADMINST_UP:
            cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP,
                                         constants.ADMIN_SOURCE)
        return None


# --- remove / rename / reinstall --------------------------------------------

class LUInstanceRemove(InstanceLU):
    OP_ID = "OP_INSTANCE_REMOVE"
    NODE_LOCKS = ALL_NODES
    NODE_RES_LOCKS = ALL_NODES

    def check_prereq(self):
        if self.op.expired_lease:
            self._check_lease_ended()

    def _check_lease_ended(self):
        """The master's removal of a reservation whose lease ended: the
        instance must still be forthcoming with a lease that has ended
        (committed meanwhile, or its lease moved: nothing is removed)."""
        inst = self.instance
        if not inst.forthcoming:
            raise errors.OpPrereqError(
                "expired_lease: instance %s is no longer forthcoming; a"
                " committed instance is not removed for its lease"
                % inst.display_name, errors.ECODE_STATE)
        until = leases.lease_of(inst)
        now = self.ctx.clock.seconds()
        if until is None or until > now:
            raise errors.OpPrereqError(
                "expired_lease: the lease of instance %s %s; it is not"
                " removed" % (inst.display_name, "was made unlimited"
                              if until is None else "now ends at %s"
                              % leases.format_time(until)),
                errors.ECODE_STATE)
        self.log_info("The lease of forthcoming instance %s ended at %s;"
                      " releasing its reservation", inst.display_name,
                      leases.format_time(until))

    async def exec_(self):
        op = self.op
        cfg = self.cfg
        inst = self.instance
        uuid = inst.uuid
        if inst.forthcoming:
            self.log_info("Instance %s is forthcoming; removing it from the"
                          " configuration only", inst.display_name)
        else:
            pname = node_calls.node_name(cfg, inst.primary_node)
            self.log_info("Shutting down instance %s on node %s", inst.name,
                          pname)
            result = await node_calls.try_call_node(
                self, inst.primary_node, "instance_shutdown",
                [inst.name, inst.hypervisor, op.shutdown_timeout])
            if not result.success:
                err = node_calls.rpc_error(result, "Shutting down instance %s"
                                           % inst.name, pname)
                if not op.ignore_failures:
                    raise err
                self.log_warning("Warning: can't shutdown instance: %s", err)
            self.log_info("Removing block devices for instance %s",
                          inst.name)
            ok = await instance_disks.remove_disks(
                self, inst, instance_disks.all_disk_pairs(cfg, inst),
                ignore_failures=True)
            if not ok and not op.ignore_failures:
                raise errors.OpExecError(
                    "Can't remove instance %s's disks (see the warnings);"
                    " use ignore_failures to remove it from the"
                    " configuration anyway" % inst.name)
        self.log_info("Removing instance %s out of cluster config",
                      inst.display_name)
        cfg.remove_instance(uuid)
        await locks.remove_instance_lock(self, uuid)
        return None


class LUInstanceRename(InstanceLU):
    OP_ID = "OP_INSTANCE_RENAME"

    def check_prereq(self):
        inst = self.instance
        new_name = self.op.new_name
        for other in self.cfg.instances.values():
            if other.name == new_name and other.uuid != inst.uuid:
                raise errors.OpPrereqError(
                    "new_name: instance '%s' is already in the cluster"
                    % new_name, errors.ECODE_EXISTS)
        if not inst.forthcoming:
            try:
                hypervisor.check_instance_name(new_name)
            except errors.HypervisorError as err:
                raise errors.OpPrereqError("new_name: %s" % err,
                                           errors.ECODE_INVAL)
            checks.check_node_online(self.cfg, inst.primary_node,
                                     "cannot rename instance %s" % inst.name)
            checks.check_instance_state(inst, checks.INSTANCE_NOT_RUNNING,
                                        "cannot rename")

    def _file_dir_move(self, inst, old_name, new_name):
        """(old dir, new dir, {disk uuid: new logical_id}) when the
        instance's file disks live in a directory named after it."""
        moves = {}
        old_dir = None
        for disk in self.cfg.instance_disks(inst):
            if disk.dev_type not in (constants.DT_FILE,
                                     constants.DT_SHARED_FILE):
                continue
            lid = list(disk.logical_id or [])
            if len(lid) != 2:
                continue
            directory = os.path.dirname(lid[1])
            if os.path.basename(directory) != old_name:
                continue
            old_dir = directory
            new_dir = os.path.join(os.path.dirname(directory), new_name)
            moves[disk.uuid] = [lid[0], os.path.join(
                new_dir, os.path.basename(lid[1]))]
        if old_dir is None:
            return None
        return old_dir, os.path.join(os.path.dirname(old_dir),
                                     new_name), moves

    async def exec_(self):
        cfg = self.cfg
        inst = self.instance
        old_name = inst.name
        if not inst.forthcoming:
            await checks.check_not_running(self, inst, "cannot rename")
        move = None
        if not inst.forthcoming and old_name and \
                old_name != self.op.new_name:
            move = self._file_dir_move(inst, old_name, self.op.new_name)
        if move is not None:
            # The directory first: if the node cannot rename it, nothing
            # has changed yet.
            old_dir, new_dir, _ = move
            self.log_info("Renaming the disks' directory %s to %s",
                          old_dir, new_dir)
            result = await node_calls.try_call_node(
                self, inst.primary_node, "file_storage_dir_rename",
                [old_dir, new_dir])
            if not result.success:
                raise errors.OpExecError(
                    "Could not rename the file storage directory %s to %s"
                    " on node %s: %s" % (old_dir, new_dir,
                                         node_calls.node_name(
                                             cfg, inst.primary_node),
                                         result.fail_msg))
        cfg.rename_instance(inst.uuid, self.op.new_name)
        if move is not None:
            for disk_uuid, lid in move[2].items():
                cfg.modify_disk(disk_uuid, logical_id=lid)
        inst = self.instance
        self.log_info("Instance %s renamed to %s", old_name or inst.uuid,
                      inst.name)
        if inst.forthcoming or not old_name or old_name == inst.name:
            return inst.name
        pname = node_calls.node_name(cfg, inst.primary_node)
        self.log_info("Running the OS rename script for %s on node %s",
                      inst.name, pname)
        result = await node_calls.try_call_node(
            self, inst.primary_node, "instance_run_rename",
            [payloads.os_instance(cfg, inst), old_name,
             self.op.debug_level or 0])
        if not result.success:
            self.log_warning(
                "Could not run OS rename script for instance %s on node %s"
                " (but the instance has been renamed in Ganeti): %s",
                inst.name, pname, result.fail_msg)
        return inst.name


class LUInstanceReinstall(InstanceLU):
    OP_ID = "OP_INSTANCE_REINSTALL"
    NODE_LOCKS = PRIMARY_NODE

    def check_prereq(self):
        op = self.op
        cluster = self.cfg.cluster
        inst = self.instance
        checks.check_not_forthcoming(inst, "reinstall it")
        checks.check_node_online(self.cfg, inst.primary_node,
                                 "Instance primary node offline, cannot"
                                 " reinstall")
        if not inst.disks:
            raise errors.OpPrereqError("Instance '%s' has no disks"
                                       % inst.name, errors.ECODE_INVAL)
        checks.check_instance_state(inst, [constants.ADMINST_DOWN],
                                    "cannot reinstall")
        self.os_name = op.os_type or inst.os
        if op.os_type:
            operating_system.check_os_name(op.os_type)
            operating_system.check_os_allowed(cluster, op.os_type)
        operating_system.check_osparams_disjoint(
            osparams=op.osparams, osparams_private=op.osparams_private,
            osparams_secret=op.osparams_secret)
        self.osparams = instance_params.update_params(
            inst.osparams, op.osparams)
        self.osparams_private = instance_params.update_params(
            inst.osparams_private, op.osparams_private)

    async def exec_(self):
        op = self.op
        cfg = self.cfg
        inst = self.instance
        await checks.check_not_running(self, inst, "cannot reinstall")
        candidate = inst.copy()
        candidate.os = self.os_name
        candidate.osparams = self.osparams
        candidate.osparams_private = self.osparams_private
        await operating_system.check_os_on_node(
            self, inst.primary_node, self.os_name,
            payloads.all_osparams(cfg, candidate, op.osparams_secret),
            op.force_variant)
        if op.os_type:
            self.log_info("Changing OS scripts to '%s'...", op.os_type)
        self.log_info("Running instance OS create scripts...")
        await node_calls.call_node(
            self, inst.primary_node, "instance_os_add",
            [payloads.os_instance(cfg, inst, os_name=self.os_name,
                                  osparams=self.osparams,
                                  osparams_private=self.osparams_private,
                                  osparams_secret=op.osparams_secret), True,
             op.debug_level or 0],
            "Reinstalling OS %s for instance %s" % (self.os_name, inst.name))
        changes = {}
        if self.os_name != inst.os:
            changes["os"] = self.os_name
        if self.osparams != (inst.osparams or {}):
            changes["osparams"] = self.osparams
        if self.osparams_private != (inst.osparams_private or {}):
            changes["osparams_private"] = self.osparams_private
        if changes:
            cfg.modify_instance(inst.uuid, **changes)
        return None


# --- query ------------------------------------------------------------------

def _nic_tuple(cfg, nic, group):
    filled = objects.fill_nicparams(cfg.cluster, nic, group)
    netinfo = None
    if nic.network and nic.network in cfg.networks:
        netinfo = cfg.networks[nic.network].to_dict()
    return [nic.name, nic.uuid, nic.ip, nic.mac,
            filled.get(constants.NIC_MODE), filled.get(constants.NIC_LINK),
            filled.get(constants.NIC_VLAN), nic.network, netinfo]


def run_state(cluster, instance, info):
    """Ganeti's run_state of OP_INSTANCE_QUERY_DATA for a live answer."""
    state = (info or {}).get("state")
    if state == hypervisor.SHUTDOWN:
        if user_shutdown.allowed(cluster, instance):
            return "user down"
        return "down"
    if state in (hypervisor.RUNNING, hypervisor.PAUSED):
        return "up"
    # Not live (unknown to the node, or crashed): what the admin wanted
    # decides how it is shown.
    if instance.admin_state == constants.ADMINST_UP:
        return "down"
    if instance.admin_state == constants.ADMINST_DOWN:
        if instance.admin_state_source == constants.USER_SOURCE:
            return "user down"
        return "down"
    return "offline"


class LUInstanceQueryData(LogicalUnit):
    """Static and live data per instance (gnt-instance info)."""
    OP_ID = "OP_INSTANCE_QUERY_DATA"

    def expand_names(self):
        op = self.op
        self.use_locking = op.use_locking
        if not (op.static or op.use_locking):
            self.log_warning("Non-static data requested, locks need to be"
                             " acquired")
            self.use_locking = True
        self.wanted = None
        if op.instances:
            self.wanted = []
            for name in op.instances:
                uuid = self.expand_instance(name)
                if uuid not in self.wanted:
                    self.wanted.append(uuid)
        if self.use_locking:
            self.share_all()
            self.needed_locks[locking.LEVEL_INSTANCE] = (
                locking.ALL_SET if self.wanted is None else list(self.wanted))

    def _wanted_uuids(self):
        if self.wanted is not None:
            return self.wanted
        return sorted(self.cfg.instances,
                      key=lambda u: self.cfg.instances[u].display_name)

    def declare_locks(self, level):
        if level == locking.LEVEL_NODE and self.use_locking:
            nodes = set()
            for uuid in self._wanted_uuids():
                inst = self.cfg.instances.get(uuid)
                if inst is not None:
                    nodes.update(inst.all_nodes)
            self.needed_locks[level] = sorted(nodes)

    def check_prereq(self):
        self.instances = []
        for uuid in self._wanted_uuids():
            self.instances.append(self.cfg.get_instance(uuid))

    async def exec_(self):
        result = {}
        for inst in self.instances:
            data = await self._instance_data(inst)
            result[inst.display_name] = data
        return result

    async def _disk_status(self, inst, disks):
        """(pstatus, sstatus, per-node status) per disk; pstatus/sstatus as
        Ganeti's [path, major, minor, sync %, eta, degraded, ldisk] (None
        when static or unknown), per-node status {node: ok|degraded|
        missing} (what automated repairs use)."""
        from ganeti.cmdlib.storage import instance_disk_status
        empty = [(None, None, {}) for _ in disks]
        if self.op.static or inst.forthcoming:
            return empty
        entries = await instance_disk_status(self, inst)
        result = [[None, None, {}] for _ in disks]
        secondary = inst.secondary_nodes[0] if inst.secondary_nodes \
            else None
        for entry in entries:
            slot = result[entry["index"]]
            slot[2][entry["node"]] = entry["status"]
            if entry["status"] == "missing" and entry["path"] is None:
                continue
            tup = [entry["path"] or instance_disks.disk_path(
                disks[entry["index"]]), None, None, entry["sync_percent"],
                None, entry["status"] != "ok",
                entry["ldisk"] or instance_disks.LDS_OKAY]
            if entry["node_uuid"] == inst.primary_node:
                slot[0] = tup
            elif entry["node_uuid"] == secondary:
                slot[1] = tup
        return [tuple(s) for s in result]

    async def _instance_data(self, inst):
        cfg = self.cfg
        cluster = cfg.cluster
        pnode = cfg.nodes.get(inst.primary_node)
        remote_state = None
        if pnode is not None and not self.op.static and \
                not inst.forthcoming:
            if pnode.offline:
                self.log_warning("Primary node %s is marked offline,"
                                 " returning static information only for"
                                 " instance %s", pnode.name, inst.name)
            else:
                info = await node_calls.call_node(
                    self, inst.primary_node, "instance_info",
                    [inst.name, inst.hypervisor],
                    "Checking instance %s" % inst.name)
                remote_state = run_state(cluster, inst, info)
        from ganeti.watcher.autorepair import report
        autorepair = report.describe(cfg, inst)
        disks = cfg.instance_disks(inst)
        statuses = await self._disk_status(inst, disks)
        out_disks = []
        for disk, (pstatus, sstatus, per_node) in zip(disks, statuses):
            out_disks.append({
                "iv_name": disk.iv_name, "dev_type": disk.dev_type,
                "logical_id": disk.logical_id, "drbd_info": None,
                "pstatus": pstatus, "sstatus": sstatus,
                "node_status": per_node, "children": [],
                "mode": disk.mode, "size": disk.size,
                "spindles": disk.spindles, "name": disk.name,
                "uuid": disk.uuid,
            })

        def group_of(node_uuid):
            node = cfg.nodes.get(node_uuid)
            return cfg.nodegroups.get(node.group) if node else None
        pgroup = group_of(inst.primary_node)
        sgroups = [group_of(n) for n in inst.secondary_nodes]
        return {
            "name": inst.display_name,
            "config_state": inst.admin_state,
            "run_state": remote_state,
            "pnode": pnode.name if pnode else None,
            "pnode_group_uuid": pgroup.uuid if pgroup else None,
            "pnode_group_name": pgroup.name if pgroup else None,
            "snodes": [node_calls.node_name(cfg, n)
                       for n in inst.secondary_nodes],
            "snodes_group_uuids": [g.uuid if g else None for g in sgroups],
            "snodes_group_names": [g.name if g else None for g in sgroups],
            "os": inst.os,
            "nics": [_nic_tuple(cfg, nic, pgroup) for nic in inst.nics],
            "disk_template": objects.disk_template_of(disks),
            "disks": out_disks,
            "hypervisor": inst.hypervisor,
            "network_port": inst.network_port,
            "hv_instance": dict(inst.hvparams or {}),
            "hv_actual": objects.fill_hvparams(cluster, inst),
            "be_instance": dict(inst.beparams or {}),
            "be_actual": objects.fill_beparams(cluster, inst),
            "os_instance": dict(inst.osparams or {}),
            "os_actual": objects.fill_osparams(cluster, inst),
            "serial_no": inst.serial_no,
            "mtime": inst.mtime,
            "ctime": inst.ctime,
            "uuid": inst.uuid,
            "forthcoming": inst.forthcoming,
            # a reservation's lease (docs/leases.rst): end and state
            "lease_until": leases.lease_of(inst),
            "lease_state": leases.state(
                inst, self.ctx.clock.seconds(),
                leases.warning_window(cluster)),
            "admin_state_source": inst.admin_state_source,
            "disks_active": inst.disks_active,
            "autorepair": autorepair,
            "watcher_restarts": self._watcher_restarts(
                inst, pgroup.uuid if pgroup else None),
        }

    def _watcher_restarts(self, inst, group_uuid):
        """What the watcher's state file on this (the master) node says of
        its restarts of ``inst``: ``{"attempts", "last_attempt",
        "gave_up"}`` (times in seconds, ``gave_up`` None while it still
        tries), or None if it is not restarting it (docs/watcher.rst)."""
        paths = self.ctx.paths
        if paths is None or not inst.name:
            return None
        record = watcher_state.read_instance_record(paths, group_uuid,
                                                    inst.name)
        attempts = record.get(watcher_state.KEY_RESTART_COUNT, 0)
        if not attempts:
            return None
        return {"attempts": attempts,
                "last_attempt": record.get(watcher_state.KEY_RESTART_WHEN),
                "gave_up": record.get(watcher_state.KEY_GAVE_UP)}
