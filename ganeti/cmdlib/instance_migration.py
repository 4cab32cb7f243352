"""Moving running instances: migrate (live or not) and failover.

Both need an instance whose disks every candidate node reaches:

* externally mirrored templates (``sharedfile``, ``diskless``; Ganeti's
  DTS_EXT_MIRROR) go to any node of the primary's group: ``target_node``,
  or the node an instance allocator chooses (a relocate request: the
  opcode's ``iallocator``, else the cluster's defaults);
* ``drbd`` (internally mirrored) goes to its secondary, which becomes the
  primary (the old primary becomes the secondary);
* others (``file``, ``plain``) cannot: ``gnt-instance move`` copies them.

A migration follows Ganeti's sequence (see :mod:`ganeti.hypervisor.
migration`): the source says what the target must start with, the target
prepares an empty instance, the source sends the memory while the master
polls the progress, then both ends are finalized and only then does the
configuration name the new primary.  Any failure before that aborts on both
ends: the target copy goes, the source keeps running.  ``cleanup`` mode
repairs a migration that was interrupted (e.g. by a master crash): it looks
where the instance runs and completes or undoes accordingly.

A failover stops the instance on its primary (ignored if that node is
offline, or with ``ignore_consistency``), and starts it on the target if it
is marked up.  It is the way off an offline node.
"""

from twisted.internet import task

from ganeti import constants
from ganeti import errors
from ganeti import hypervisor
from ganeti import ipolicy
from ganeti import locking
from ganeti import objects
from ganeti.cmdlib import allocation
from ganeti.cmdlib import capacity
from ganeti.cmdlib import kept_domains
from ganeti.cmdlib import checks
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import node_calls
from ganeti.cmdlib import instance_params
from ganeti.cmdlib import payloads
from ganeti.cmdlib.base import LogicalUnit
from ganeti.hypervisor import migration

__all__ = ["LUInstanceMigrate", "LUInstanceFailover", "disk_for_node",
           "disks_for_node", "template_kind"]

#: seconds between two looks at a migration's progress
POLL_INTERVAL = 1.0
#: seconds between two progress lines in the job log
FEEDBACK_INTERVAL = 5.0

EXT = "ext"
INT = "int"


# --- helpers shared with instance_move / node_evacuate -----------------------

def template_kind(disks):
    """EXT (every disk externally mirrored), INT (every disk drbd), None
    (not mirrored: some disk lives on one node only) or "mixed"."""
    kinds = set()
    for disk in disks:
        if disk.dev_type in constants.DTS_EXT_MIRROR:
            kinds.add(EXT)
        elif disk.dev_type in constants.DTS_INT_MIRROR:
            kinds.add(INT)
        else:
            return None
    if not kinds:
        return EXT      # no disks at all: like diskless
    if len(kinds) > 1:
        return "mixed"
    return kinds.pop()


def check_target_node(cfg, node_uuid, instance, field="target_node",
                      allow_drained=False):
    node = cfg.get_node(node_uuid)
    if node.uuid == instance.primary_node:
        raise errors.OpPrereqError(
            "%s: node %s is already the primary node of instance %s"
            % (field, node.name, instance.display_name), errors.ECODE_INVAL)
    if node.offline:
        raise errors.OpPrereqError("%s: node %s is offline"
                                   % (field, node.name), errors.ECODE_STATE)
    if node.drained and not allow_drained:
        raise errors.OpPrereqError("%s: node %s is drained (no new"
                                   " instances)" % (field, node.name),
                                   errors.ECODE_STATE)
    if not node.vm_capable:
        raise errors.OpPrereqError("%s: node %s is not vm_capable"
                                   % (field, node.name), errors.ECODE_STATE)


def _ip(cfg, node_uuid):
    node = cfg.get_node(node_uuid)
    return node.secondary_ip or node.primary_ip


def disk_for_node(cfg, instance, disk, node_uuid):
    """A disk's config dict as ``node_uuid`` gets it: for drbd, with the
    dynamic parameters naming this node's side (Ganeti's annotation); the
    disk parameters in effect are in its ``params``."""
    data = instance_disks.rpc_disk(cfg, instance, disk)
    if disk.dev_type != constants.DT_DRBD8:
        return data
    lid = list(disk.logical_id or [])
    if len(lid) != 6:
        raise errors.OpExecError("drbd disk %s has a bad logical_id %r"
                                 % (disk.iv_name, lid))
    if node_uuid == lid[0]:
        local, remote, lminor, rminor, node_id = lid[0], lid[1], lid[3], \
            lid[4], 0
    elif node_uuid == lid[1]:
        local, remote, lminor, rminor, node_id = lid[1], lid[0], lid[4], \
            lid[3], 1
    else:
        raise errors.OpExecError("node %s is not a node of drbd disk %s"
                                 % (node_calls.node_name(cfg, node_uuid),
                                    disk.iv_name))
    data["dynamic_params"] = {
        "local_ip": _ip(cfg, local), "remote_ip": _ip(cfg, remote),
        "local_minor": lminor, "remote_minor": rminor,
        "local_node_id": node_id,
        "local_name": node_calls.node_name(cfg, local),
        "remote_name": node_calls.node_name(cfg, remote),
        "primary": node_uuid == instance.primary_node}
    return data


def disks_for_node(cfg, instance, node_uuid, disks=None):
    if disks is None:
        disks = cfg.instance_disks(instance)
    return [disk_for_node(cfg, instance, d, node_uuid) for d in disks
            if d.dev_type != constants.DT_DISKLESS]


async def assemble_instance_disks(lu, instance):
    """Activate the disks on their nodes (drbd ones with their dynamic
    parameters); instance_disks.assemble_disks for the others."""
    cfg = lu.cfg
    disks = cfg.instance_disks(instance)
    if not any(d.dev_type == constants.DT_DRBD8 for d in disks):
        return await instance_disks.assemble_disks(lu, instance)
    # secondaries first, so the primary finds its peer
    nodes = list(instance.secondary_nodes) + [instance.primary_node]
    for node_uuid in nodes:
        for idx, disk in enumerate(disks):
            if node_uuid not in instance_disks.disk_nodes(instance, disk):
                continue
            await node_calls.call_node(
                lu, node_uuid, "blockdev_assemble",
                [disk_for_node(cfg, instance, disk, node_uuid), instance.name,
                 node_uuid == instance.primary_node, idx],
                "Activating disk %s of instance %s" % (disk.iv_name,
                                                       instance.name))
    if not cfg.get_instance(instance.uuid).disks_active:
        cfg.set_instance_disks_active(instance.uuid, True)


def start_spec(cfg, instance):
    """instance_start's specification, drbd disks annotated for the
    primary."""
    spec = payloads.instance_spec(cfg, instance)
    spec["disks"] = disks_for_node(cfg, instance, instance.primary_node)
    return spec


def sleep(clock, seconds):
    return task.deferLater(clock, seconds, lambda: None)


# --- the logical units -------------------------------------------------------

class _MoveInstanceLU(LogicalUnit):
    """Common part of migrate and failover (Ganeti's TLMigrateInstance)."""

    FAILOVER = False

    def check_arguments(self):
        op = self.op
        allocation.check_op_params(op)
        allocation.check_not_both(op, "target_node",
                                  op.target_node or op.target_node_uuid)

    def expand_names(self):
        op = self.op
        self.instance_uuid = self.expand_instance(op.instance_uuid
                                                  or op.instance_name)
        self.needed_locks[locking.LEVEL_INSTANCE] = [self.instance_uuid]
        target = op.target_node_uuid or op.target_node
        self.target_uuid = self.expand_node(target) if target else None

    def _lock_nodes(self):
        inst = self.cfg.get_instance(self.instance_uuid)
        disks = self.cfg.instance_disks(inst)
        kind = template_kind(disks)
        nodes = set(inst.all_nodes)
        if kind == EXT:
            if self.target_uuid is not None:
                nodes.add(self.target_uuid)
            else:
                # the target is chosen among the group with the locks held
                pnode = self.cfg.nodes.get(inst.primary_node)
                if pnode is not None:
                    nodes.update(n.uuid for n in
                                 self.cfg.group_nodes(pnode.group))
        return sorted(nodes)

    def declare_locks(self, level):
        if level in (locking.LEVEL_NODE, locking.LEVEL_NODE_RES):
            self.needed_locks[level] = self._lock_nodes()

    @property
    def instance(self):
        return self.cfg.get_instance(self.instance_uuid)

    # --- checks --------------------------------------------------------------

    async def check_prereq(self):
        op = self.op
        cfg = self.cfg
        inst = self.instance
        self.failover = self.FAILOVER
        self.cleanup = bool(getattr(op, "cleanup", False)) and \
            not self.FAILOVER
        fallback = bool(getattr(op, "allow_failover", False))
        if self.cleanup and inst.forthcoming:
            raise errors.OpPrereqError(
                "Instance '%s' is forthcoming; there is no migration to clean"
                " up" % inst.display_name, errors.ECODE_STATE)
        if not self.failover and not self.cleanup and \
                inst.admin_state != constants.ADMINST_UP:
            if fallback:
                self.log_info("Instance is marked down or offline, fallback"
                              " allowed, switching to failover")
                self.failover = True
            else:
                raise errors.OpPrereqError(
                    "Instance '%s' is marked %s, cannot migrate it (use"
                    " failover, or allow_failover)"
                    % (inst.display_name, inst.admin_state),
                    errors.ECODE_STATE)
        what = "failovers" if self.failover else "migrations"
        disks = cfg.instance_disks(inst)
        self.kind = template_kind(disks)
        if self.kind is None:
            bad = sorted(set(d.dev_type for d in disks
                             if d.dev_type not in constants.DTS_MIRRORED))
            raise errors.OpPrereqError(
                "Instance's disk layout '%s' does not allow %s (use"
                " gnt-instance move to copy its disks)"
                % (", ".join(bad), what), errors.ECODE_STATE)
        if self.kind == "mixed":
            raise errors.OpPrereqError(
                "Instance '%s' mixes internally (drbd) and externally"
                " mirrored disks; this is not supported" % inst.display_name,
                errors.ECODE_STATE)
        if self.kind == INT:
            if not inst.secondary_nodes:
                raise errors.OpPrereqError(
                    "Instance '%s' has drbd disks but no secondary node"
                    % inst.display_name, errors.ECODE_STATE)
            secondary = inst.secondary_nodes[0]
            if self.target_uuid not in (None, secondary):
                raise errors.OpPrereqError(
                    "target_node: instances with drbd disks can only be %s"
                    " to their secondary node (%s)"
                    % ("failed over" if self.failover else "migrated",
                       node_calls.node_name(cfg, secondary)),
                    errors.ECODE_INVAL)
            if allocation.explicit_allocator(op):
                raise errors.OpPrereqError(
                    "iallocator: instances with drbd disks can only be %s"
                    " to their secondary node (%s); no allocator chooses"
                    % ("failed over" if self.failover else "migrated",
                       node_calls.node_name(cfg, secondary)),
                    errors.ECODE_INVAL)
            self.target_uuid = secondary
        elif self.target_uuid is None and not self.cleanup:
            self.target_uuid = await self._allocate_target(inst)
        if self.target_uuid is not None and not self.cleanup:
            check_target_node(cfg, self.target_uuid, inst)
            ipolicy.check_target_group(self, inst, self.target_uuid,
                                       op.ignore_ipolicy)
        self.source_uuid = inst.primary_node
        be = objects.fill_beparams(cfg.cluster, inst)
        source_offline = cfg.get_node(self.source_uuid).offline
        if not self.failover and not self.cleanup:
            if be.get(constants.BE_ALWAYS_FAILOVER):
                self.log_info("Instance configured to always failover;"
                              " fallback to failover")
                self.failover = True
            elif source_offline:
                if fallback:
                    self.log_info("Primary node %s is offline, fallback to"
                                  " failover",
                                  node_calls.node_name(cfg, self.source_uuid))
                    self.failover = True
                else:
                    raise errors.OpPrereqError(
                        "Instance '%s': its primary node %s is offline, it"
                        " cannot be migrated (use failover)"
                        % (inst.display_name,
                           node_calls.node_name(cfg, self.source_uuid)),
                        errors.ECODE_STATE)
        if not self.failover and not self.cleanup:
            info = await node_calls.live_info(self, inst)
            if not checks.is_live(info):
                if fallback:
                    self.log_info("Can't migrate, instance not running,"
                                  " fallback to failover")
                    self.failover = True
                else:
                    raise errors.OpPrereqError(
                        "Instance '%s' is not running on node %s, cannot"
                        " migrate it (use failover)"
                        % (inst.display_name,
                           node_calls.node_name(cfg, self.source_uuid)),
                        errors.ECODE_STATE)
            else:
                self.current_mem = int(info.get("memory") or 0)
        if not self.cleanup and not inst.forthcoming and (
                not self.failover or
                inst.admin_state == constants.ADMINST_UP):
            await kept_domains.clean_up(self, self.target_uuid,
                                        skip={inst.uuid})
            await capacity.check_free_memory(
                self, self.target_uuid, be[constants.BE_MINMEM],
                "%s instance %s" % ("failing over" if self.failover
                                    else "migrating", inst.name))
        elif not self.cleanup:
            self.log_info("Not checking memory on the target node as the"
                          " instance will not be started")
        self.live = False
        if not self.failover and not self.cleanup:
            mode = op.mode
            if op.live is not None and op.mode is not None:
                raise errors.OpPrereqError(
                    "live, mode: only one of the 'live' and 'mode'"
                    " parameters can be given", errors.ECODE_INVAL)
            if op.live is not None:
                mode = constants.HT_MIGRATION_LIVE if op.live \
                    else constants.HT_MIGRATION_NONLIVE
            elif mode is None:
                hvp = instance_params.full_hvparams(cfg.cluster, inst)
                mode = hvp.get(constants.HV_MIGRATION_MODE,
                               constants.HT_MIGRATION_LIVE)
            self.live = mode == constants.HT_MIGRATION_LIVE

    async def _allocate_target(self, inst):
        """The node a relocate request gives (the primary's group is
        locked: the allocator keeps the instance in its group)."""
        names = allocation.allocator_names(
            self.cfg, "relocate", allocation.explicit_allocator(self.op))
        if not names:
            raise allocation.no_allocator_error("relocate",
                                                "a target node (-n)")
        request = allocation.relocate_request(self.cfg, inst,
                                              [inst.primary_node])
        found = await allocation.allocate(
            self, request, names, self.op.iallocator_params,
            hypervisor=inst.hypervisor)
        self.log_info("Selected nodes for instance %s via iallocator %s: %s",
                      inst.name, found.allocator, ", ".join(found.result))
        return self.cfg.get_node(found.result[0]).uuid

    def dry_run_result(self):
        """The node the instance would go to."""
        if self.target_uuid is None:
            return None
        return node_calls.node_name(self.cfg, self.target_uuid)

    # --- execution -----------------------------------------------------------

    async def exec_(self):
        inst = self.instance
        if self.failover:
            self.log_info("Failover instance %s", inst.name)
            return await self._failover()
        self.log_info("Migrating instance %s", inst.name)
        if self.cleanup:
            return await self._cleanup()
        return await self._migrate()

    # drbd: the disks must be in sync on the target before it takes over
    async def _check_consistency(self, node_uuid, ignore_offline_source=False):
        if self.kind != INT:
            return True
        inst = self.instance
        result = await node_calls.try_call_node(
            self, node_uuid, "blockdev_status",
            [disks_for_node(self.cfg, inst, node_uuid)])
        if not result.success:
            self.log_warning("Cannot check the disks on node %s: %s",
                             node_calls.node_name(self.cfg, node_uuid),
                             result.fail_msg)
            return False
        good = True
        for disk, st in zip(self.cfg.instance_disks(inst),
                            result.payload or []):
            if st is None or st.get("ldisk") != 1:
                self.log_warning("Disk %s on node %s is %s", disk.iv_name,
                                 node_calls.node_name(self.cfg, node_uuid),
                                 "missing" if st is None else
                                 (st.get("details") or "not usable"))
                good = False
        return good

    async def _drbd_network(self, node_uuids, multimaster):
        """Reconnect the drbd disks (dual-primary for a migration), and
        wait for the resync."""
        inst = self.instance
        for node_uuid in node_uuids:
            await node_calls.call_node(
                self, node_uuid, "drbd_disconnect_net",
                [disks_for_node(self.cfg, inst, node_uuid)],
                "Disconnecting the drbd disks of %s" % inst.name)
        self.log_info("* changing disks into %s mode",
                      "dual-master" if multimaster else "single-master")
        for node_uuid in node_uuids:
            await node_calls.call_node(
                self, node_uuid, "drbd_attach_net",
                [disks_for_node(self.cfg, inst, node_uuid), multimaster],
                "Reconnecting the drbd disks of %s" % inst.name)
        await wait_for_sync(self, inst, node_uuids)

    async def _abort(self, info):
        """Undo a migration in progress: drop the target copy, let the
        source run (Ganeti's _AbortMigration)."""
        inst = self.instance
        dst = await node_calls.try_call_node(
            self, self.target_uuid, "instance_finalize_migration_dst",
            [inst.name, inst.hypervisor, info, False])
        if not dst.success:
            self.log_warning("Aborting the migration failed on target node"
                             " %s: %s", node_calls.node_name(self.cfg,
                                                             self.target_uuid),
                             dst.fail_msg)
        src = await node_calls.try_call_node(
            self, self.source_uuid, "instance_finalize_migration_src",
            [inst.name, inst.hypervisor, False, self.live])
        if not src.success:
            self.log_warning("Aborting the migration failed on source node"
                             " %s: %s", node_calls.node_name(self.cfg,
                                                             self.source_uuid),
                             src.fail_msg)
        if self.kind == INT:
            try:
                await self._drbd_network([self.source_uuid,
                                          self.target_uuid], False)
            except errors.GenericError as err:
                self.log_warning("Migration failed and the drbd disks could"
                                 " not be reconnected, please repair them"
                                 " manually: %s", err)
        return dst.success and src.success

    async def _migrate(self):
        cfg = self.cfg
        inst = self.instance
        src, dst = self.source_uuid, self.target_uuid
        src_name, dst_name = node_calls.node_name(cfg, src), \
            node_calls.node_name(cfg, dst)
        free = await self._check_versions()
        self.log_info("* checking disk consistency between source and target")
        if not await self._check_consistency(dst):
            raise errors.OpExecError("Disks are degraded or not fully"
                                     " synchronized on target node %s,"
                                     " aborting migration" % dst_name)
        if free is not None and getattr(self, "current_mem", 0) > free:
            raise errors.OpExecError(
                "Not enough free memory to fit instance %s on target node %s"
                " (have %d MiB, need %d MiB; memory ballooning is not"
                " supported)" % (inst.name, dst_name, free,
                                 self.current_mem))
        result = await node_calls.try_call_node(
            self, src, "migration_info", [inst.name, inst.hypervisor])
        if not result.success:
            raise node_calls.rpc_error(result, "Fetching the migration"
                                       " information of %s" % inst.name,
                                       src_name)
        info = result.payload or {}
        if self.kind == INT:
            await self._drbd_network([src, dst], True)
        spec = dict(info.get("spec") or payloads.instance_spec(cfg, inst))
        spec["hypervisor"] = inst.hypervisor
        spec["disks"] = disks_for_node(cfg, inst, dst)
        self.log_info("* preparing %s to accept the instance", dst_name)
        result = await node_calls.try_call_node(
            self, dst, "accept_instance",
            [spec, info, _ip(cfg, dst), None])
        if not result.success:
            self.log_info("Pre-migration failed, aborting")
            await self._abort(info)
            raise errors.OpExecError("Could not pre-migrate instance %s: %s"
                                     % (inst.name, node_calls.rpc_error(
                                         result, "Accepting",
                                         dst_name).args[0]))
        where = result.payload or {}
        self.log_info("* migrating instance to %s (%s)", dst_name,
                      "live" if self.live else "non-live")
        result = await node_calls.try_call_node(
            self, src, "instance_migrate",
            [inst.name, inst.hypervisor, where.get("address", _ip(cfg, dst)),
             int(where.get("port") or 0), self.live])
        if not result.success:
            self.log_info("Migration failed, aborting")
            await self._abort(info)
            raise errors.OpExecError("Could not migrate instance %s: %s"
                                     % (inst.name, node_calls.rpc_error(
                                         result, "Migrating",
                                         src_name).args[0]))
        self.log_info("* starting memory transfer")
        await self._wait_transfer(info)
        self.log_info("* memory transfer complete")
        await self._finalize(info, True)
        cfg_changes = {"primary_node": dst}
        if self.kind == INT:
            cfg_changes["secondary_nodes"] = [src]
        cfg.modify_instance(inst.uuid, **cfg_changes)
        if self.kind == INT:
            await self._drbd_network([src, dst], False)
        self.log_info("* done")
        return None

    async def _check_versions(self):
        """Warn about (or refuse) different hypervisor versions; returns
        the target's free memory (None if unknown)."""
        inst = self.instance
        versions = {}
        free = None
        for node_uuid in (self.source_uuid, self.target_uuid):
            result = await node_calls.try_call_node(
                self, node_uuid, "node_info",
                [[], [[inst.hypervisor, {}]]])
            if not result.success:
                raise node_calls.rpc_error(
                    result, "Retrieving node information",
                    node_calls.node_name(self.cfg, node_uuid))
            hvs = (result.payload or {}).get("hypervisors") or [{}]
            versions[node_uuid] = tuple(hvs[0].get("hv_version") or ())
            if node_uuid == self.target_uuid and \
                    isinstance(hvs[0].get("memory_free"), int):
                free = hvs[0]["memory_free"]
        src, dst = versions[self.source_uuid], versions[self.target_uuid]
        if src and dst and src != dst:
            self.log_info("* warning: hypervisor version mismatch between"
                          " source (%s) and target (%s) node",
                          ".".join(map(str, src)), ".".join(map(str, dst)))
            if src[:1] != dst[:1]:
                if not self.op.ignore_hvversions:
                    raise errors.OpExecError(
                        "Unsupported migration between hypervisor versions"
                        " (%s to %s); ignore_hvversions to try anyway"
                        % (".".join(map(str, src)),
                           ".".join(map(str, dst))))
                self.log_info("  continuing anyway (told to ignore version"
                              " mismatch)")
        return free

    async def _wait_transfer(self, info):
        inst = self.instance
        clock = self.ctx.clock
        last = None
        while True:
            result = await node_calls.try_call_node(
                self, self.source_uuid, "instance_get_migration_status",
                [inst.name, inst.hypervisor])
            status = (migration.MigrationStatus.from_dict(result.payload)
                      if result.success and isinstance(result.payload, dict)
                      else None)
            if status is None or status.failed:
                self.log_info("Migration failed, aborting")
                await self._abort(info)
                if status is None:
                    msg = result.fail_msg
                else:
                    msg = "hypervisor reported %s%s" % (
                        status.status, (": %s" % status.error)
                        if status.error else "")
                raise errors.OpExecError("Could not migrate instance %s: %s"
                                         % (inst.name, msg))
            if not status.active:
                return
            now = clock.seconds()
            if (last is None or now - last >= FEEDBACK_INTERVAL) and \
                    status.total_ram:
                self.log_info("* memory transfer progress: %.2f %%",
                              100.0 * (status.transferred_ram or 0)
                              / status.total_ram)
                last = now
            await sleep(clock, POLL_INTERVAL)

    async def _finalize(self, info, success):
        inst = self.instance
        errs = []
        for node_uuid, proc, args in (
                (self.source_uuid, "instance_finalize_migration_src",
                 [inst.name, inst.hypervisor, success, self.live]),
                (self.target_uuid, "instance_finalize_migration_dst",
                 [inst.name, inst.hypervisor, info, success])):
            result = await node_calls.try_call_node(
                self, node_uuid, proc, args)
            if not result.success:
                name = node_calls.node_name(self.cfg, node_uuid)
                errs.append("%s: %s" % (name, node_calls.rpc_error(
                    result, "Finalizing", name).args[0]))
        if errs:
            raise errors.OpExecError(
                "Could not finalize instance migration (the configuration"
                " still names %s as primary; run the migration with cleanup"
                " after fixing): %s"
                % (node_calls.node_name(self.cfg, self.source_uuid),
                   "; ".join(errs)))

    # --- cleanup of an interrupted migration ---------------------------------

    async def _where_running(self):
        """{node uuid: InstanceInfo dict} of online nodes that have the
        instance (any state but crashed)."""
        inst = self.instance
        self.log_info("* checking where the instance actually runs (if this"
                      " hangs, the hypervisor might be in a bad state)")
        found = {}
        for node in sorted(self.cfg.nodes.values(), key=lambda n: n.name):
            if node.offline:
                continue
            result = await node_calls.try_call_node(
                self, node.uuid, "instance_info",
                [inst.name, inst.hypervisor])
            if not result.success:
                raise node_calls.rpc_error(result, "Looking for instance %s"
                                           % inst.name, node.name)
            if result.payload and result.payload.get("state") in \
                    hypervisor.LIVE_STATES:
                found[node.uuid] = result.payload
        self.log_info("* instance running on: %s",
                      ", ".join(node_calls.node_name(self.cfg, n)
                                for n in found) or "no node")
        return found

    async def _cleanup(self):
        cfg = self.cfg
        inst = self.instance
        src = self.source_uuid
        found = await self._where_running()
        others = [n for n in found if n != src]
        if self.target_uuid is None and len(others) == 1:
            self.target_uuid = others[0]
        dst = self.target_uuid
        on_src = src in found
        on_dst = dst is not None and dst in found
        if on_src and on_dst:
            src_state = found[src].get("state")
            dst_state = found[dst].get("state")
            if dst_state == hypervisor.RUNNING and \
                    src_state == hypervisor.PAUSED:
                # the memory got across and the target already runs: finish
                self.log_info("* the migration to %s had completed,"
                              " finalizing it", node_calls.node_name(cfg, dst))
                await self._finalize(None, True)
                on_src = False
            else:
                self.log_info("Trying to cleanup after failed migration")
                if not await self._abort(None):
                    raise errors.OpExecError(
                        "Instance migration cleanup failed (see the"
                        " warnings)")
                found = await self._where_running()
                on_src, on_dst = src in found, dst in found
                if on_src and on_dst:
                    raise errors.OpExecError(
                        "Instance seems to be running on two nodes, or the"
                        " hypervisor is confused; you will have to ensure"
                        " manually that it runs only on one and restart"
                        " this operation")
        if not on_src and not on_dst:
            raise errors.OpExecError(
                "Instance does not seem to be running at all; in this"
                " case it's safer to repair by running 'gnt-instance"
                " stop' to ensure disk shutdown, and then restarting it")
        if on_dst:
            self.log_info("* instance running on secondary node (%s),"
                          " updating config", node_calls.node_name(cfg, dst))
            changes = {"primary_node": dst}
            if self.kind == INT:
                changes["secondary_nodes"] = [src]
            cfg.modify_instance(inst.uuid, **changes)
            demoted = src
        else:
            self.log_info("* instance confirmed to be running on its primary"
                          " node (%s)", node_calls.node_name(cfg, src))
            demoted = dst
        if self.kind == INT and demoted is not None:
            nodes = [self.instance.primary_node, demoted]
            try:
                await self._drbd_network(nodes, False)
            except errors.GenericError as err:
                self.log_warning("Could not reconnect the drbd disks: %s",
                                 err)
        self.log_info("* done")
        return None

    # --- failover ------------------------------------------------------------

    async def _failover(self):
        cfg = self.cfg
        op = self.op
        inst = self.instance
        src, dst = self.source_uuid, self.target_uuid
        src_node = cfg.get_node(src)
        dst_name = node_calls.node_name(cfg, dst)
        if inst.forthcoming:
            self.log_info("Instance is forthcoming, just updating the"
                          " configuration")
            self._set_primary(dst)
            return None
        ignore = bool(getattr(op, "ignore_consistency", False))
        if inst.disks_active or inst.admin_state == constants.ADMINST_UP:
            self.log_info("* checking disk consistency between source and"
                          " target")
            if not await self._check_consistency(dst):
                if src_node.offline:
                    self.log_info("Node %s is offline, ignoring degraded"
                                  " disks on target node %s", src_node.name,
                                  dst_name)
                elif not ignore:
                    raise errors.OpExecError("Disks are degraded on target"
                                             " node %s, aborting failover"
                                             % dst_name)
        else:
            self.log_info("* not checking disk consistency as instance is"
                          " not running")
        self.log_info("* shutting down instance on source node")
        timeout = getattr(op, "shutdown_timeout", 120)
        result = await node_calls.try_call_node(
            self, src, "instance_shutdown",
            [inst.name, inst.hypervisor, timeout])
        if not result.success:
            err = node_calls.rpc_error(result, "Shutting down instance %s"
                                       % inst.name, src_node.name)
            if ignore or src_node.offline:
                self.log_warning("Could not shutdown instance %s on node %s,"
                                 " proceeding anyway; please make sure node"
                                 " %s is down; error details: %s", inst.name,
                                 src_node.name, src_node.name, err)
            else:
                raise errors.OpExecError("Could not shutdown instance %s on"
                                         " node %s: %s" % (inst.name,
                                                           src_node.name,
                                                           err))
        self.log_info("* deactivating the instance's disks on source node")
        pairs = [(d, n) for d, n in instance_disks.all_disk_pairs(cfg, inst)]
        ok = await instance_disks.shutdown_disks(self, inst, pairs,
                                                 ignore_failures=True)
        if not ok and not (ignore or src_node.offline):
            raise errors.OpExecError("Can't shut down the instance's disks")
        if inst.disks_active:
            cfg.set_instance_disks_active(inst.uuid, False)
        self._set_primary(dst)
        inst = self.instance
        if inst.admin_state != constants.ADMINST_UP:
            self.log_info("* instance is marked down, not starting it on %s",
                          dst_name)
            return None
        self.log_info("* activating the instance's disks on target node %s",
                      dst_name)
        await assemble_instance_disks(self, inst)
        self.log_info("* starting the instance on the target node %s",
                      dst_name)
        result = await node_calls.try_call_node(
            self, dst, "instance_start", [start_spec(cfg, inst), False])
        if not result.success:
            await instance_disks.shutdown_disks(self, self.instance,
                                                ignore_failures=True)
            raise errors.OpExecError("Could not start instance %s on node"
                                     " %s: %s" % (inst.name, dst_name,
                                                  node_calls.rpc_error(
                                                      result, "Starting",
                                                      dst_name).args[0]))
        return None

    def _set_primary(self, dst):
        changes = {"primary_node": dst}
        if self.kind == INT:
            changes["secondary_nodes"] = [self.source_uuid]
        self.cfg.modify_instance(self.instance_uuid, **changes)


async def wait_for_sync(lu, instance, node_uuids, clock=None):
    """Poll drbd_wait_sync on ``node_uuids`` until every disk is in sync,
    logging the progress (Ganeti's WaitForSync)."""
    clock = clock or lu.ctx.clock
    lu.log_info("* wait until resync is done")
    last = None
    while True:
        done_all = True
        lowest = None
        for node_uuid in node_uuids:
            payload = await node_calls.call_node(
                lu, node_uuid, "drbd_wait_sync",
                [disks_for_node(lu.cfg, instance, node_uuid)],
                "Checking the resync of the disks of %s" % instance.name)
            done, pct = (payload or [True, None])[:2]
            done_all = done_all and bool(done)
            if pct is not None:
                lowest = pct if lowest is None else min(lowest, pct)
        if done_all:
            return
        if lowest is not None and lowest != last:
            lu.log_info("   - progress: %.1f%%", lowest)
            last = lowest
        await sleep(clock, POLL_INTERVAL)


class LUInstanceMigrate(_MoveInstanceLU):
    OP_ID = "OP_INSTANCE_MIGRATE"


class LUInstanceFailover(_MoveInstanceLU):
    OP_ID = "OP_INSTANCE_FAILOVER"
    FAILOVER = True

    def check_arguments(self):
        super().check_arguments()
        if self.op.cleanup:
            raise errors.OpPrereqError(
                "cleanup: only a migration can be cleaned up, not a"
                " failover", errors.ECODE_INVAL)
