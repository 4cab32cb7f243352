"""OP_INSTANCE_CREATE: new instances, forthcoming ones, and commits.

Three ways through the same opcode (as in Ganeti 3.0):

* a normal create: check everything (parameters, the node's OS and
  hypervisor, resources), add the instance to the configuration (admin
  state down while installing), create its disks on its nodes, run the OS
  create script, then (``start``) mark it up and start it.  The result is
  the list of its node names.  Anything failing before the start removes
  what was created (disks, configuration entry, lock);
* ``forthcoming``: only the configuration entry, with whatever was given
  (even no name), its declared resources reserved; the result is its UUID
  (reservations, docs/config.rst);
* ``commit``: an existing forthcoming instance becomes real: missing
  mandatory fields are filled from the opcode, its disks are created and
  the OS installed, and only then is it marked real.

Without ``pnode``, the nodes come from an instance allocator (the one
named in ``iallocator``, else the cluster's defaults for allocate
requests; docs/allocator.rst): a new or forthcoming instance, or a
forthcoming one without nodes being committed.  Every node is locked
while the allocator chooses, then all but the chosen ones are released.
With ``opportunistic_locking`` only the nodes free at that moment are
locked (without waiting for the others) and the allocator chooses among
them; finding no room there is a temporary error (ECODE_TEMP_NORES).
The flag means nothing when the nodes are given.

``dry_run`` runs every check, including those the node answers, and
returns the placement without changing anything.
"""

import copy

from twisted.internet import task
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti import constants
from ganeti import errors
from ganeti import exportinfo
from ganeti import ipolicy
from ganeti import leases
from ganeti import locking
from ganeti import objects
from ganeti import rie
from ganeti.cmdlib import allocation
from ganeti.cmdlib import backup
from ganeti.cmdlib import capacity
from ganeti.cmdlib import kept_domains
from ganeti.cmdlib import checks
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import locks
from ganeti.cmdlib import instance_nics
from ganeti.cmdlib import node_calls
from ganeti.cmdlib import operating_system
from ganeti.cmdlib import instance_params
from ganeti.cmdlib import payloads
from ganeti.cmdlib.base import LogicalUnit

log = Logger()

#: hypervisors whose instances get a network port (VNC display)
_HTS_REQ_PORT = frozenset([constants.HT_KVM, constants.HT_XEN_HVM])

#: how long a remote import waits for the source cluster's data (the
#: source shuts the instance down and runs the export scripts first)
REMOTE_LISTEN_TIMEOUT = 6 * 3600
#: seconds between two looks at a remote import's progress
REMOTE_POLL_INTERVAL = 2


class LUInstanceCreate(LogicalUnit):
    OP_ID = "OP_INSTANCE_CREATE"

    # --- arguments and locks ------------------------------------------------

    def check_arguments(self):
        op = self.op
        # Dry runs need the node's answers (OS, hypervisor parameters), which
        # only exec_ can ask for: the processor must not stop after
        # check_prereq.  The flag is put back when the LU ends.
        self.dry_run = bool(op.dry_run)
        self.orig_dry_run = op.dry_run
        if op.forthcoming and op.commit:
            raise errors.OpPrereqError(
                "forthcoming and commit: creating a forthcoming instance and"
                " committing one are mutually exclusive", errors.ECODE_INVAL)
        self.importing = op.mode == "import"
        self.remote_import = op.mode == "remote-import"
        if self.remote_import:
            self._check_remote_source()
        if (self.importing or self.remote_import) and \
                (op.forthcoming or op.commit):
            raise errors.OpPrereqError(
                "mode: an import makes a real instance; it cannot be"
                " forthcoming or a commit", errors.ECODE_INVAL)
        if not self.importing and (op.src_node or op.src_node_uuid or
                                   op.src_path):
            raise errors.OpPrereqError(
                "src_node, src_path: only for mode 'import'",
                errors.ECODE_INVAL)
        if not op.instance_name and not op.forthcoming:
            raise errors.OpPrereqError("instance_name: an instance needs a"
                                       " name", errors.ECODE_INVAL)
        self.start = op.start
        if op.no_install and op.start:
            self.log_info("No-installation mode selected, disabling startup")
            self.start = False
        if len(op.nics) > constants.MAX_NICS:
            raise errors.OpPrereqError("nics: at most %d network interfaces"
                                       " are allowed" % constants.MAX_NICS,
                                       errors.ECODE_INVAL)
        if len(op.disks) > constants.MAX_DISKS:
            raise errors.OpPrereqError("disks: at most %d disks are allowed"
                                       % constants.MAX_DISKS,
                                       errors.ECODE_INVAL)
        self.subdir = instance_disks.check_relative_dir(op.file_storage_dir)
        for tag in op.tags:
            try:
                objects.validate_tag(tag)
            except errors.TagError as err:
                raise errors.OpPrereqError("tags: %s" % err,
                                           errors.ECODE_INVAL)
        leases.check_tags(constants.TAG_INSTANCE, op.tags)
        self.lease_until = None
        if op.lease_until is not None:
            if not op.forthcoming:
                raise errors.OpPrereqError(
                    "lease_until: only a forthcoming instance (a"
                    " reservation, --forthcoming) can have a lease%s"
                    % ("; committing drops the lease" if op.commit else ""),
                    errors.ECODE_INVAL)
            self.lease_until = leases.parse(op.lease_until,
                                            self.ctx.clock.seconds())
        operating_system.check_osparams_disjoint(
            osparams=op.osparams, osparams_private=op.osparams_private,
            osparams_secret=op.osparams_secret)
        allocation.check_op_params(op)
        # last: a refusal above leaves the opcode as it came
        op.dry_run = False

    def _check_remote_source(self):
        """A remote import's handshake and source certificate, signed by
        a cluster sharing our cluster domain secret."""
        op = self.op
        if not op.source_handshake:
            raise errors.OpPrereqError(
                "source_handshake: missing; a remote import needs the"
                " source cluster's handshake (from its prepare-export)",
                errors.ECODE_INVAL)
        if not op.source_instance_name:
            raise errors.OpPrereqError(
                "source_instance_name: missing; a remote import needs the"
                " name of the instance on the source cluster",
                errors.ECODE_INVAL)
        if op.compress not in exportinfo.COMPRESSIONS:
            raise errors.OpPrereqError(
                "compress: '%s' is not supported; use one of %s"
                % (op.compress, ", ".join(exportinfo.COMPRESSIONS)),
                errors.ECODE_INVAL)
        self.cds = rie.read_domain_secret(self.ctx.paths)
        problem = rie.check_handshake(self.cds, op.source_handshake)
        if problem:
            raise errors.OpPrereqError("source_handshake: invalid: %s"
                                       % problem, errors.ECODE_INVAL)
        self.source_ca = rie.load_signed_certificate(
            op.source_x509_ca, self.cds, "source_x509_ca")

    def expand_names(self):
        try:
            self._expand_names()
        except BaseException:
            # the opcode as the job shows it keeps its dry-run flag
            self.op.dry_run = self.orig_dry_run
            raise

    def _expand_names(self):
        op = self.op
        cfg = self.cfg
        self.lock_added = False
        self.pending_add = None
        self.existing = None
        if op.commit:
            inst = cfg.get_instance(op.instance_name)
            if not inst.forthcoming:
                raise errors.OpPrereqError(
                    "Instance %s (with uuid %s) is not forthcoming, there is"
                    " nothing to commit" % (inst.display_name, inst.uuid),
                    errors.ECODE_STATE)
            self.instance_uuid = inst.uuid
            self.needed_locks[locking.LEVEL_INSTANCE] = [inst.uuid]
        else:
            self._check_name_free()
            self.instance_uuid = objects.new_uuid()
        self.pnode_uuid = None
        pnode = op.pnode_uuid or op.pnode
        if pnode:
            self.pnode_uuid = self.expand_node(pnode)
        self.src_node_uuid = None
        if self.importing and (op.src_node_uuid or op.src_node):
            try:
                self.src_node_uuid = self.expand_node(op.src_node_uuid or
                                                      op.src_node)
            except errors.OpPrereqError as err:
                raise errors.OpPrereqError("src_node: %s" % err.args[0],
                                           errors.ECODE_NOENT)
        snode = op.snode_uuid or op.snode
        self.snode_uuid = self.expand_node(snode) if snode else None
        self.allocators = self._allocators()
        if self.pnode_uuid is not None and op.iallocator:
            self.log_warning("iallocator '%s' ignored: the primary node was"
                             " given", op.iallocator)
        self.opportunistic = bool(self.allocators and
                                  op.opportunistic_locking)
        if self.allocators:
            # the allocator chooses among all: lock every node meanwhile
            # (or, opportunistically, every node free right now)
            self.needed_locks[locking.LEVEL_NODE] = locking.ALL_SET
            self.needed_locks[locking.LEVEL_NODE_RES] = locking.ALL_SET
            if self.opportunistic:
                need = self._nodes_needed()
                self.opportunistic_locks[locking.LEVEL_NODE] = need
                self.opportunistic_locks[locking.LEVEL_NODE_RES] = need
        elif not op.commit:
            nodes = [self.pnode_uuid] if self.pnode_uuid else []
            if self.src_node_uuid is not None and \
                    self.src_node_uuid not in nodes:
                self.needed_locks[locking.LEVEL_NODE] = nodes + [
                    self.src_node_uuid]
                self.needed_locks[locking.LEVEL_NODE_RES] = list(nodes)
                return
            self.needed_locks[locking.LEVEL_NODE] = nodes
            self.needed_locks[locking.LEVEL_NODE_RES] = list(nodes)

    def _allocators(self):
        """The allocators that place this instance; () if it needs none
        (a node is given, or a reservation stays without one)."""
        op = self.op
        if self.pnode_uuid is not None:
            return ()
        if op.commit:
            if self.cfg.get_instance(self.instance_uuid).primary_node:
                return ()
            # a reservation without nodes is placed when it is committed
            names = allocation.allocator_names(
                self.cfg, "allocate", allocation.explicit_allocator(op))
            if not names:
                raise allocation.no_allocator_error(
                    "allocate", "the primary node (pnode / -n) of forthcoming"
                    " instance %s" % op.instance_name)
            return names
        names = allocation.allocator_names(
            self.cfg, "allocate", allocation.explicit_allocator(op))
        if not names and not op.forthcoming:
            raise allocation.no_allocator_error(
                "allocate", "the primary node (pnode / -n)")
        return names

    def _nodes_needed(self):
        """How many nodes the instance needs (2 for drbd), as far as the
        opcode says before any check; at worst 1, the checks come later."""
        if self.op.commit:
            disks = self.cfg.instance_disks(
                self.cfg.get_instance(self.instance_uuid))
            fallback = objects.disk_template_of(disks) if any(
                d.dev_type for d in disks) else None
        else:
            fallback = None
        try:
            template = self._template(self.op.disks, fallback=(
                None if fallback == "mixed" else fallback))
        except errors.OpPrereqError:
            return 1
        return 2 if template in constants.DTS_INT_MIRROR else 1

    def _check_name_free(self):
        name = self.op.instance_name
        if not name:
            return
        for inst in self.cfg.instances.values():
            if inst.name == name:
                raise errors.OpPrereqError(
                    "Instance '%s' is already in the cluster" % name,
                    errors.ECODE_EXISTS)

    def declare_locks(self, level):
        if level == locking.LEVEL_INSTANCE and not self.op.commit \
                and not self.dry_run:
            # The new instance's lock, created before we take it, so that
            # nobody can use the instance while it is being built.
            outcome = []
            d = self.ctx.glm.add(locking.LEVEL_INSTANCE, [self.instance_uuid])
            d.addBoth(outcome.append)
            if outcome:
                if isinstance(outcome[0], Failure):
                    outcome[0].raiseException()
                self.lock_added = True
                self.needed_locks[locking.LEVEL_INSTANCE] = [
                    self.instance_uuid]
            else:
                # Somebody holds the whole instance lock set; the lock comes
                # later and nobody knows its name until the config has it.
                self.pending_add = d
        elif level == locking.LEVEL_NODE_RES and self.opportunistic:
            # the resources of the nodes we got, if free as well
            self.needed_locks[locking.LEVEL_NODE_RES] = sorted(
                self.ctx.glm.list_owned(locking.LEVEL_NODE, self.owner))
        elif level == locking.LEVEL_NODE and self.op.commit and \
                not self.allocators:
            inst = self.cfg.get_instance(self.instance_uuid)
            nodes = list(inst.all_nodes)
            if not nodes and self.pnode_uuid:
                nodes = [self.pnode_uuid]
            self.needed_locks[locking.LEVEL_NODE] = nodes
            self.needed_locks[locking.LEVEL_NODE_RES] = list(nodes)

    def _drop_lock(self):
        if not self.lock_added:
            return
        self.lock_added = False
        owner = locks.lock_owner(self.ctx.glm, locking.LEVEL_INSTANCE,
                                 self.instance_uuid)
        if owner is not None:
            d = self.ctx.glm.remove(locking.LEVEL_INSTANCE,
                                    [self.instance_uuid], owner)
            d.addErrback(lambda f: log.failure("removing the lock of a new"
                                               " instance", f))

    def abandon(self):
        self._drop_lock()
        self.op.dry_run = self.orig_dry_run

    # --- prerequisites ------------------------------------------------------

    async def check_prereq(self):
        try:
            if self.importing:
                await self._read_export()
            if self.allocators:
                await self._allocate()
            if self.op.commit:
                self._prereq_commit()
                await self._check_commit_capacity()
            else:
                self._prereq_new()
                await self._check_capacity()
        except BaseException:
            self._drop_lock()
            self.op.dry_run = self.orig_dry_run
            raise

    async def _read_export(self):
        """Find the export, read its config.ini and take from it what the
        opcode does not give (as Ganeti: OS, disks, NICs, tags,
        hypervisor and its parameters, backend and OS parameters)."""
        op = self.op
        cfg = self.cfg
        path = op.src_path or op.instance_name
        if self.src_node_uuid is None:
            self.src_node_uuid = await self._find_export(path)
        src = self.src_node_uuid
        checks.check_node_online(cfg, src, "the export is there")
        text = await node_calls.call_node(
            self, src, "export_info", [path],
            "Reading export %s" % path, prereq=True)
        einfo = exportinfo.parse(text)
        self.export_info = einfo
        self.export_path = path
        if op.os_type is None:
            op.os_type = einfo.os
        same_os = (op.os_type or "").split("+")[0] == \
            (einfo.os or "").split("+")[0]
        template = einfo.disk_template
        if op.disk_template is None and template and \
                not any(d.get("dev_type") for d in op.disks):
            op.disk_template = template
        exported = einfo.disks()
        if not op.disks:
            disks = []
            for disk in exported:
                params = {"size": disk["size"]}
                if disk.get("name"):
                    params["name"] = disk["name"]
                disks.append(params)
            op.disks = disks
        if not op.disks and op.disk_template != constants.DT_DISKLESS:
            raise errors.OpPrereqError(
                "No disk info specified and the export is missing the disk"
                " information", errors.ECODE_INVAL)
        if not op.nics:
            nics = []
            for nic in einfo.nics():
                params = {k: nic[k] for k in ("ip", "mac", "name")
                          if nic.get(k)}
                if nic.get("network"):
                    params["network"] = nic["network"]
                else:
                    params.update({k: nic[k] for k in exportinfo.NIC_PARAMS
                                   if nic.get(k)})
                nics.append(params)
            op.nics = nics
        if not op.tags:
            op.tags = einfo.tags
        if op.hypervisor is None and einfo.hypervisor:
            op.hypervisor = einfo.hypervisor
        hv_name = op.hypervisor or cfg.cluster.default_hypervisor
        if hv_name == einfo.hypervisor:
            # another hypervisor's parameters would not apply
            hv_defaults = cfg.cluster.hvparams.get(hv_name) or {}
            hvp = dict(op.hvparams or {})
            for name, value in einfo.section(exportinfo.SECT_HV).items():
                if name not in hvp and name not in constants.HVC_GLOBALS:
                    hvp[name] = _typed(value, hv_defaults.get(name))
            op.hvparams = hvp
        be = dict(op.beparams or {})
        given_memory = constants.BE_MEMORY in be
        for name, value in einfo.beparams().items():
            if name in be or (given_memory and name in (
                    constants.BE_MAXMEM, constants.BE_MINMEM)):
                continue
            be[name] = _typed(value, constants.BEC_DEFAULTS.get(name))
        op.beparams = be
        if not same_os:
            # another OS's parameters would not apply
            return
        osp = dict(op.osparams or {})
        for name, value in einfo.section(exportinfo.SECT_OS).items():
            osp.setdefault(name, value)
        op.osparams = osp
        private = einfo.section(exportinfo.SECT_OS_PRIVATE)
        if private:
            merged = dict(private)
            merged.update(op.osparams_private or {})
            op.osparams_private = merged

    async def _find_export(self, path):
        """The node holding export ``path`` (no src_node given): the first
        of the online nodes listing it."""
        name = path.rstrip("/").split("/")[-1]
        for node in sorted(self.cfg.nodes.values(), key=lambda n: n.name):
            if node.offline:
                continue
            result = await node_calls.try_call_node(self, node.uuid,
                                                    "export_list", [])
            if result.success and name in (result.payload or []):
                self.log_info("Found export %s on node %s", name, node.name)
                return node.uuid
        raise errors.OpPrereqError(
            "src_path: no export found for %s on any online node" % path,
            errors.ECODE_NOENT)

    async def _allocate(self):
        """Nodes from the allocators; the other node locks are released."""
        op = self.op
        cfg = self.cfg
        if op.commit:
            inst = cfg.get_instance(self.instance_uuid)
            request = self._commit_request(inst)
            name = inst.name
        else:
            template = self._template(op.disks)
            instance_disks.check_template(cfg.cluster, template)
            be = instance_params.check_beparams(op.beparams)
            name = op.instance_name or self.instance_uuid
            request = allocation.create_request(cfg, op, name, template, be)
        locked = None
        if self.opportunistic:
            glm = self.ctx.glm
            locked = (glm.list_owned(locking.LEVEL_NODE, self.owner) &
                      glm.list_owned(locking.LEVEL_NODE_RES, self.owner))
            self.log_info("Opportunistic locking: %d of %d nodes locked;"
                          " the allocator chooses among them",
                          len(locked), len(cfg.nodes))
        found = await allocation.allocate(
            self, request, self.allocators, op.iallocator_params,
            hypervisor=request.hypervisor, locked_nodes=locked)
        uuids = [cfg.get_node(n).uuid for n in found.result]
        self.pnode_uuid = uuids[0]
        if len(uuids) > 1:
            self.snode_uuid = uuids[1]
        self.log_info("Selected nodes for instance %s via iallocator %s: %s",
                      name, found.allocator, ", ".join(found.result))
        allocation.release_other_nodes(self, uuids)

    def _commit_request(self, inst):
        """A forthcoming instance's spec, completed from the opcode."""
        op = self.op
        cfg = self.cfg
        candidate = inst.copy()
        if not candidate.beparams and op.beparams:
            candidate.beparams = {
                k: v for k, v in instance_params.check_beparams(
                    op.beparams).items() if v != constants.VALUE_DEFAULT}
        if not candidate.hypervisor:
            candidate.hypervisor = op.hypervisor or \
                cfg.cluster.default_hypervisor
        disks = [d.copy() for d in cfg.instance_disks(inst)]
        if not disks:
            for idx, params in enumerate(op.disks):
                size, mode, _, spindles = instance_disks.check_disk_params(
                    params, idx)
                disks.append(objects.Disk(size=size, mode=mode,
                                          spindles=spindles))
        fallback = objects.disk_template_of(disks) if any(
            d.dev_type for d in disks) else None
        template = self._template(op.disks, fallback=(
            None if fallback == "mixed" else fallback))
        for idx, disk in enumerate(disks):
            if disk.size is None and idx < len(op.disks):
                disk.size = instance_disks.check_disk_params(
                    op.disks[idx], idx)[0]
            disk.dev_type = disk.dev_type or template
        return allocation.instance_spec_request(
            cfg, candidate, disks=disks, template=template,
            group_name=op.group_name)

    def _template(self, disks_params, fallback=None):
        op = self.op
        template = op.disk_template
        if template is None:
            kinds = set(d.get("dev_type") for d in disks_params)
            if disks_params and None not in kinds and len(kinds) == 1:
                template = kinds.pop()
            elif fallback is not None:
                template = fallback
            elif not disks_params:
                template = constants.DT_DISKLESS
            else:
                raise errors.OpPrereqError(
                    "disk_template: required unless every disk gives the"
                    " same dev_type", errors.ECODE_INVAL)
        return template

    def _check_hypervisor(self, hv_name):
        instance_params.check_hypervisor_enabled(self.cfg.cluster, hv_name)

    def _build_nics(self, group, except_instance=None):
        used = instance_nics.used_macs(self.cfg, except_instance)
        nics = []
        pool_taken = {}
        for idx, params in enumerate(self.op.nics):
            nic = instance_nics.build_nic(
                self.cfg, params, "nics/%d" % idx, group, used,
                pool_taken=pool_taken)
            used.add(nic.mac)
            nics.append(nic)
        instance_nics.check_unique_ips(self.cfg, nics, except_instance)
        return nics

    def _group(self, node_uuid):
        if node_uuid is None or node_uuid not in self.cfg.nodes:
            return None
        return self.cfg.nodegroups.get(self.cfg.nodes[node_uuid].group)

    def _check_os(self, os_name, required):
        cluster = self.cfg.cluster
        if os_name is None and not required:
            return
        operating_system.check_os_name(os_name)
        operating_system.check_os_allowed(cluster, os_name)

    def _prereq_new(self):
        op = self.op
        cfg = self.cfg
        cluster = cfg.cluster
        self._check_name_free()
        forthcoming = op.forthcoming
        if self.pnode_uuid is not None:
            checks.check_node_vm_capable(cfg, self.pnode_uuid)
        hv_name = op.hypervisor or cluster.default_hypervisor
        self._check_hypervisor(hv_name)
        template = self._template(op.disks)
        if op.disks or op.disk_template is not None:
            instance_disks.check_template(cluster, template)
        if template == constants.DT_DISKLESS and op.disks:
            raise errors.OpPrereqError(
                "disks: a diskless instance cannot have disks",
                errors.ECODE_INVAL)
        if self.snode_uuid is not None:
            if self.snode_uuid == self.pnode_uuid:
                raise errors.OpPrereqError("snode: the secondary node cannot"
                                           " be the primary node",
                                           errors.ECODE_INVAL)
            self.log_warning("Secondary node will be ignored on non-mirrored"
                             " disk template")
        self._check_os(op.os_type, required=not forthcoming)
        be = instance_params.check_beparams(op.beparams)
        be = {k: v for k, v in be.items() if v != constants.VALUE_DEFAULT}
        hvp = {k: v for k, v in (op.hvparams or {}).items()
               if v != constants.VALUE_DEFAULT}
        group = self._group(self.pnode_uuid)
        nics = self._build_nics(group)
        inst = objects.Instance(
            uuid=self.instance_uuid, name=op.instance_name or None,
            primary_node=self.pnode_uuid, os=op.os_type, hypervisor=hv_name,
            hvparams=hvp, beparams=be, osparams=dict(op.osparams or {}),
            osparams_private=dict(op.osparams_private or {}),
            admin_state=constants.ADMINST_DOWN,
            admin_state_source=constants.ADMIN_SOURCE,
            nics=nics, forthcoming=forthcoming, tags=set(op.tags))
        if self.lease_until is not None:
            inst.tags.add(leases.tag(self.lease_until))
            self.log_info("The reservation's lease ends at %s",
                          leases.format_time(self.lease_until))
        instance_params.check_memory_range(
            objects.fill_beparams(cluster, inst))
        self.hvparams = instance_params.check_hvparams(
            cluster, inst, log_warning=self.log_warning)
        dir_name = op.instance_name or self.instance_uuid
        disks = []
        for idx, params in enumerate(op.disks):
            disks.append(instance_disks.generate_disk(
                cfg, template, dir_name, idx, params, self.subdir,
                op.file_driver, forthcoming=forthcoming))
        for disk in disks:
            if disk.dev_type in constants.DTS_NODE_LOCAL and \
                    self.pnode_uuid is not None:
                disk.nodes = [self.pnode_uuid]
        if forthcoming:
            spec = ipolicy.declared_spec(
                cfg, inst, disks,
                template if op.disks or op.disk_template else None)
        else:
            spec = ipolicy.instance_spec(cfg, inst, disks=disks)
        ipolicy.check_allocation(self, self.pnode_uuid, op.ignore_ipolicy,
                                 **spec)
        self.new_instance = inst
        self.new_disks = disks

    async def _check_capacity(self):
        """The new instance (or reservation) must fit on its node: free
        resources as the node reports them, minus reservations."""
        if self.new_instance.primary_node:
            if not self.dry_run:
                await kept_domains.clean_up(self,
                                            self.new_instance.primary_node)
            await capacity.check_instance_fits(self, self.new_instance,
                                               disks=self.new_disks)

    def _prereq_commit(self):
        op = self.op
        cfg = self.cfg
        cluster = cfg.cluster
        inst = cfg.get_instance(self.instance_uuid)
        if not inst.forthcoming:
            raise errors.OpPrereqError("Instance %s (with uuid %s) is no"
                                       " longer forthcoming"
                                       % (inst.display_name, inst.uuid),
                                       errors.ECODE_STATE)
        locked = set(self.needed_locks.get(locking.LEVEL_NODE) or [])
        if not locked.issuperset(inst.all_nodes):
            raise errors.OpPrereqError(
                "Forthcoming instance %s nodes changed since locks were"
                " acquired; retry the operation" % inst.display_name,
                errors.ECODE_STATE)
        # What the forthcoming instance lacks comes from the opcode; what it
        # has is what was reserved and stays.
        changes = {}
        if not inst.primary_node:
            if self.pnode_uuid is None:
                raise errors.OpPrereqError(
                    "pnode: forthcoming instance %s has no primary node;"
                    " give one" % inst.display_name, errors.ECODE_INVAL)
            changes["primary_node"] = self.pnode_uuid
        elif self.pnode_uuid not in (None, inst.primary_node):
            raise errors.OpPrereqError(
                "pnode: forthcoming instance %s is placed on node %s, not %s"
                % (inst.display_name,
                   node_calls.node_name(cfg, inst.primary_node),
                   node_calls.node_name(cfg, self.pnode_uuid)),
                errors.ECODE_INVAL)
        pnode = changes.get("primary_node", inst.primary_node)
        checks.check_node_vm_capable(cfg, pnode)
        if not inst.name:
            raise errors.OpPrereqError(
                "Forthcoming instance %s has no name; rename it first"
                % inst.uuid, errors.ECODE_INVAL)
        if not inst.os:
            if not op.os_type:
                raise errors.OpPrereqError(
                    "os_type: forthcoming instance %s has no OS; give one"
                    % inst.display_name, errors.ECODE_INVAL)
            changes["os"] = op.os_type
        os_name = changes.get("os", inst.os)
        self._check_os(os_name, required=True)
        if not inst.hypervisor:
            changes["hypervisor"] = op.hypervisor or cluster.default_hypervisor
        self._check_hypervisor(changes.get("hypervisor", inst.hypervisor))
        if not inst.beparams and op.beparams:
            be = instance_params.check_beparams(op.beparams)
            changes["beparams"] = {k: v for k, v in be.items()
                                   if v != constants.VALUE_DEFAULT}
        if not inst.hvparams and op.hvparams:
            changes["hvparams"] = dict(op.hvparams)
        if not inst.osparams and op.osparams:
            changes["osparams"] = dict(op.osparams)
        if not inst.osparams_private and op.osparams_private:
            changes["osparams_private"] = dict(op.osparams_private)
        group = self._group(pnode)
        if not inst.nics and op.nics:
            changes["nics"] = self._build_nics(group, inst.uuid)
        nics = changes.get("nics", inst.nics)
        for idx, nic in enumerate(nics):
            if not nic.mac:
                raise errors.OpPrereqError("nics/%d: forthcoming NIC has no"
                                           " MAC address" % idx,
                                           errors.ECODE_INVAL)
            objects.check_nic(nic, objects.fill_nicparams(cluster, nic,
                                                          group),
                              where="nics/%d" % idx)
        candidate = inst.copy()
        for key, value in changes.items():
            setattr(candidate, key, copy.deepcopy(value))
        instance_params.check_memory_range(
            objects.fill_beparams(cluster, candidate))
        self.hvparams = instance_params.check_hvparams(
            cluster, candidate, log_warning=self.log_warning)
        # Disks: the reserved ones, completed; or new ones if none reserved.
        existing = cfg.instance_disks(inst)
        disk_changes = {}
        new_disks = []
        if existing:
            fallback = objects.disk_template_of(existing)
            template = self._template(op.disks, fallback=(
                None if fallback == "mixed" else fallback))
            for idx, disk in enumerate(existing):
                dchanges = {}
                dev_type = disk.dev_type or template
                if dev_type is None:
                    raise errors.OpPrereqError(
                        "disks/%d: the forthcoming disk has no type; give"
                        " disk_template" % idx, errors.ECODE_INVAL)
                instance_disks.check_template(
                    cluster, dev_type, "disks/%d" % idx)
                if not disk.dev_type:
                    dchanges["dev_type"] = dev_type
                if disk.size is None and dev_type != constants.DT_DISKLESS:
                    if idx >= len(op.disks):
                        raise errors.OpPrereqError(
                            "disks/%d: the forthcoming disk has no size;"
                            " give it in disks" % idx, errors.ECODE_INVAL)
                    dchanges["size"], _, _, _ = \
                        instance_disks.check_disk_params(op.disks[idx], idx)
                if not disk.logical_id and \
                        dev_type != constants.DT_DISKLESS:
                    dchanges["logical_id"] = instance_disks.disk_logical_id(
                        cluster, dev_type, inst.name, idx,
                        op.disks[idx] if idx < len(op.disks) else {},
                        self.subdir, op.file_driver)
                if not disk.iv_name:
                    dchanges["iv_name"] = "disk/%d" % idx
                if dev_type in constants.DTS_NODE_LOCAL and \
                        disk.nodes != [pnode]:
                    dchanges["nodes"] = [pnode]
                if dchanges:
                    disk_changes[disk.uuid] = dchanges
        elif op.disks:
            template = self._template(op.disks)
            instance_disks.check_template(cluster, template)
            for idx, params in enumerate(op.disks):
                disk = instance_disks.generate_disk(
                    cfg, template, inst.name, idx, params, self.subdir,
                    op.file_driver, forthcoming=True)
                if disk.dev_type in constants.DTS_NODE_LOCAL:
                    disk.nodes = [pnode]
                new_disks.append(disk)
        all_disks = []
        for disk in existing:
            d = disk.copy()
            for key, value in disk_changes.get(disk.uuid, {}).items():
                setattr(d, key, copy.deepcopy(value))
            all_disks.append(d)
        all_disks += new_disks
        # the reservation already holds the resources; the policy applies
        # to the complete instance now
        ipolicy.check_allocation(
            self, pnode, op.ignore_ipolicy,
            **ipolicy.instance_spec(cfg, candidate, disks=all_disks))
        self.instance_changes = changes
        self.disk_changes = disk_changes
        self.added_disks = new_disks
        self.commit_candidate = (candidate, all_disks)

    async def _check_commit_capacity(self):
        """What the reservation holds is the instance's; only what the
        commit adds (a size, a disk, more memory) must fit."""
        candidate, disks = self.commit_candidate
        grown = self.cfg.instance_growth(candidate, disks=disks)
        if grown:
            await capacity.check_instance_fits(self, candidate, disks=disks,
                                               only=grown)

    def dry_run_result(self):
        return self._placement()

    def _placement(self, inst=None):
        nodes = [self.pnode_uuid] if self.pnode_uuid else []
        if inst is not None:
            nodes = inst.all_nodes
        elif self.op.commit:
            cur = self.cfg.get_instance(self.instance_uuid)
            nodes = cur.all_nodes or nodes
        return [node_calls.node_name(self.cfg, n) for n in nodes]

    # --- execution ----------------------------------------------------------

    async def exec_(self):
        try:
            if self.op.commit:
                return await self._exec_commit()
            return await self._exec_new()
        except BaseException:
            if self.instance_uuid not in self.cfg.instances:
                self._drop_lock()
            raise
        finally:
            self.op.dry_run = self.orig_dry_run

    async def _node_checks(self, inst, pnode, os_name, osparams):
        """What only the primary node can say: OS and hypervisor params."""
        candidate = inst.copy()
        candidate.os = os_name
        candidate.osparams = osparams
        await operating_system.check_os_on_node(
            self, pnode, os_name, payloads.all_osparams(
                self.cfg, candidate, self.op.osparams_secret),
            self.op.force_variant)
        await node_calls.call_node(
            self, pnode, "hypervisor_validate_params",
            [inst.hypervisor, self.hvparams],
            "Checking hypervisor parameters", prereq=True)

    async def _exec_new(self):
        cfg = self.cfg
        inst = self.new_instance
        disks = self.new_disks
        if not inst.forthcoming:
            await self._node_checks(inst, inst.primary_node, inst.os,
                                    inst.osparams)
        if self.dry_run:
            self._drop_lock()
            return self._placement()
        if self.pending_add is not None:
            await self.pending_add
        if inst.hypervisor in _HTS_REQ_PORT and not inst.forthcoming:
            inst.network_port = cfg.allocate_port()
        self.log_info("adding instance %s to cluster config",
                      inst.display_name)
        cfg.add_instance(inst, disks)
        uuid = inst.uuid
        if inst.forthcoming:
            self.log_info("Instance is forthcoming; not creating the actual"
                          " instance")
            return uuid
        try:
            inst = cfg.get_instance(uuid)
            self.log_info("* creating instance disks...")
            await instance_disks.create_disks(
                self, inst, cfg.instance_disks(inst))
        except BaseException:
            self._remove_from_config(uuid)
            raise
        try:
            cfg.set_instance_disks_active(uuid, True)
            if self.importing:
                await self._import_disks(cfg.get_instance(uuid))
            elif self.remote_import:
                await self._remote_import(cfg.get_instance(uuid))
            else:
                await self._install_os(cfg.get_instance(uuid))
        except BaseException:
            inst = cfg.get_instance(uuid)
            self.log_warning("Removing the disks of instance %s",
                             inst.display_name)
            await instance_disks.remove_disks(
                self, inst, instance_disks.all_disk_pairs(cfg, inst))
            self._remove_from_config(uuid)
            raise
        if self.start:
            await self._start(cfg.get_instance(uuid))
        return self._placement(cfg.get_instance(uuid))

    def _remove_from_config(self, uuid):
        if uuid in self.cfg.instances:
            self.log_warning("Removing instance %s from the configuration",
                             self.cfg.instances[uuid].display_name)
            self.cfg.remove_instance(uuid)
        self._drop_lock()

    async def _install_os(self, inst, disks=None):
        if self.op.no_install:
            self.log_info("No-installation mode: the OS create scripts are"
                          " not run")
            return
        self.log_info("* running the instance OS create scripts...")
        await node_calls.call_node(
            self, inst.primary_node, "instance_os_add",
            [payloads.os_instance(self.cfg, inst, disks=disks,
                                  osparams_secret=self.op.osparams_secret),
             False, self.op.debug_level or 0],
            "Installing OS %s for instance %s" % (inst.os, inst.name))

    async def _import_disks(self, inst):
        """Each exported disk's dump, copied from the source node to the
        new primary node, goes through the OS import script there."""
        op = self.op
        cfg = self.cfg
        if op.no_install:
            self.log_info("No-installation mode: the disks are not"
                          " imported")
            return
        einfo = self.export_info
        exported = einfo.disks()
        pnode = inst.primary_node
        payload = payloads.os_instance(
            cfg, inst, osparams_secret=op.osparams_secret)
        disks = cfg.instance_disks(inst)
        if len(exported) > len(disks):
            self.log_warning("The export has %d disks, the instance %d:"
                             " disks %s are not imported", len(exported),
                             len(disks), ", ".join(
                                 "disk/%d" % i for i in range(
                                     len(disks), len(exported))))
        src_name = node_calls.node_name(cfg, self.src_node_uuid)
        for idx, dump in enumerate(exported[:len(disks)]):
            transfer_id = objects.new_uuid().replace("-", "")
            self.log_info("Importing disk/%d from %s:%s", idx, src_name,
                          dump["dump"])
            try:
                await backup.copy_transfer(
                    self, self.src_node_uuid,
                    ("export_read_chunk", [self.export_path, dump["dump"]]),
                    pnode, transfer_id, "dump of disk/%d" % idx)
            except BaseException:
                res = await node_calls.try_call_node(
                    self, pnode, "transfer_remove", [transfer_id])
                if not res.success:
                    self.log_warning("Could not remove transfer %s: %s",
                                     transfer_id, res.fail_msg)
                raise
            # the node removes the transfer file, whatever happens
            await node_calls.call_node(
                self, pnode, "instance_os_import",
                [payload, idx, transfer_id, einfo.compression,
                 op.debug_level or 0],
                "Importing disk/%d of instance %s" % (idx, inst.name))

    async def _remote_import(self, inst):
        """Listen on the new primary node for each disk's data from the
        source cluster's node, tell the source where (the job's
        ``remote-import`` log entry), wait for the data, then run the OS
        import script on each disk."""
        op = self.op
        cfg = self.cfg
        pnode = inst.primary_node
        node = cfg.get_node(pnode)
        disks = cfg.instance_disks(inst)
        self.log_info("Creating an import key on %s", node.name)
        key_name, pem = await node_calls.call_node(
            self, pnode, "x509_cert_create", [rie.CERT_VALIDITY],
            "Creating an import key for %s" % inst.name)
        tids = [objects.new_uuid().replace("-", "") for _ in disks]
        listening = []
        try:
            salt = rie.new_salt()
            infos = []
            for idx, tid in enumerate(tids):
                magic = rie.new_magic(idx)
                port = await node_calls.call_node(
                    self, pnode, "remote_import_listen",
                    [key_name, self.source_ca, node.primary_ip, magic, tid,
                     REMOTE_LISTEN_TIMEOUT],
                    "Listening for disk/%d of %s" % (idx, inst.name))
                listening.append(tid)
                infos.append(rie.compute_disk_info(
                    self.cds, salt, idx, node.primary_ip, port, magic))
                self.log_info("Listening for disk/%d on %s:%s", idx,
                              node.primary_ip, port)
            self.log_remote_import({
                "disks": infos,
                "x509_ca": rie.sign_certificate(pem, self.cds)})
            await self._wait_remote(inst, tids)
            payload = payloads.os_instance(
                cfg, inst, osparams_secret=op.osparams_secret)
            for idx, tid in enumerate(tids):
                await node_calls.call_node(self, pnode, "remote_import_end",
                                           [tid], "Ending the import")
                listening.remove(tid)
                self.log_info("Importing disk/%d of %s", idx, inst.name)
                # the node removes the transfer file, whatever happens
                await node_calls.call_node(
                    self, pnode, "instance_os_import",
                    [payload, idx, tid, op.compress, op.debug_level or 0],
                    "Importing disk/%d of instance %s" % (idx, inst.name))
        finally:
            for tid in listening:
                res = await node_calls.try_call_node(
                    self, pnode, "remote_import_end", [tid])
                if not res.success:
                    self.log_warning("Could not end the import %s on %s:"
                                     " %s", tid, node.name, res.fail_msg)
            res = await node_calls.try_call_node(
                self, pnode, "x509_cert_remove", [key_name])
            if not res.success:
                self.log_warning("Could not remove the import key %s on"
                                 " %s: %s", key_name, node.name,
                                 res.fail_msg)

    async def _wait_remote(self, inst, tids):
        pnode = inst.primary_node
        reported = set()
        while True:
            status = await node_calls.call_node(
                self, pnode, "remote_import_status", [tids],
                "Checking the import of %s" % inst.name)
            for idx, tid in enumerate(tids):
                st = status.get(tid)
                if st is None:
                    raise errors.OpExecError(
                        "The node stopped listening for disk/%d of %s (its"
                        " node daemon restarted?)" % (idx, inst.name))
                if st.get("error"):
                    raise errors.OpExecError(
                        "Disk/%d of %s was not received: %s"
                        % (idx, inst.name, st["error"]))
                if st.get("done") and tid not in reported:
                    reported.add(tid)
                    self.log_info("  - disk/%d received: %d bytes (sha256"
                                  " %s)", idx, st["size"], st["sha256"])
            if len(reported) == len(tids):
                return
            await task.deferLater(self.ctx.clock, REMOTE_POLL_INTERVAL,
                                  lambda: None)

    async def _start(self, inst):
        cfg = self.cfg
        cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP,
                                     constants.ADMIN_SOURCE)
        self.log_info("* starting instance...")
        result = await node_calls.try_call_node(
            self, inst.primary_node, "instance_start",
            [payloads.instance_spec(cfg, cfg.get_instance(inst.uuid)), False])
        if not result.success:
            cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_DOWN,
                                         constants.ADMIN_SOURCE)
            err = node_calls.rpc_error(
                result, "Starting instance %s" % inst.name,
                node_calls.node_name(cfg, inst.primary_node))
            raise errors.OpExecError(
                "%s (the instance was created and stays stopped)" % err)

    async def _exec_commit(self):
        cfg = self.cfg
        uuid = self.instance_uuid
        inst = cfg.get_instance(uuid)
        candidate = inst.copy()
        for key, value in self.instance_changes.items():
            setattr(candidate, key, copy.deepcopy(value))
        pnode = candidate.primary_node
        await self._node_checks(candidate, pnode, candidate.os,
                                candidate.osparams)
        if self.dry_run:
            return [node_calls.node_name(cfg, n) for n in candidate.all_nodes]
        self.log_info("Nodes of instance %s: %s", inst.name,
                      ", ".join(node_calls.node_name(cfg, n)
                                for n in candidate.all_nodes))
        undo = _Undo(cfg, uuid)
        try:
            undo.modify_instance(self.instance_changes)
            for disk_uuid, dchanges in self.disk_changes.items():
                undo.modify_disk(disk_uuid, dchanges)
            for idx, disk in enumerate(self.added_disks):
                undo.add_disk(disk)
            inst = cfg.get_instance(uuid)
            self.log_info("* creating instance disks...")
            created = await instance_disks.create_disks(
                self, inst, cfg.instance_disks(inst))
            try:
                await self._install_os(inst)
            except BaseException:
                await instance_disks.remove_disks(self, inst, created)
                raise
        except BaseException:
            undo.run(self)
            raise
        self.log_info("turning forthcoming instance %s into a real one",
                      inst.name)
        cfg.commit_forthcoming(uuid)
        if candidate.hypervisor in _HTS_REQ_PORT and \
                cfg.get_instance(uuid).network_port is None:
            cfg.modify_instance(uuid, network_port=cfg.allocate_port())
        cfg.set_instance_disks_active(uuid, True)
        if self.start:
            await self._start(cfg.get_instance(uuid))
        return self._placement(cfg.get_instance(uuid))


def _typed(value, like):
    """A config.ini value (text) as the type of ``like`` (the default of
    the parameter), so the usual parameter checks apply."""
    if value is None or not isinstance(value, str):
        return value
    if isinstance(like, bool):
        if value.lower() in ("true", "yes", "1"):
            return True
        if value.lower() in ("false", "no", "0"):
            return False
        return value
    if isinstance(like, int):
        try:
            return int(value)
        except ValueError:
            return value
    if isinstance(like, float):
        try:
            return float(value)
        except ValueError:
            return value
    return value


class _Undo(object):
    """Changes made to a forthcoming instance, undone if the commit fails."""

    def __init__(self, cfg, uuid):
        self.cfg = cfg
        self.uuid = uuid
        self.steps = []

    def modify_instance(self, changes):
        if not changes:
            return
        inst = self.cfg.get_instance(self.uuid)
        before = {k: copy.deepcopy(getattr(inst, k)) for k in changes}
        self.cfg.modify_instance(self.uuid, **changes)
        self.steps.append(lambda: self.cfg.modify_instance(
            self.uuid, **before))

    def modify_disk(self, disk_uuid, changes):
        disk = self.cfg.get_disk(disk_uuid)
        before = {k: copy.deepcopy(getattr(disk, k)) for k in changes}
        if before.get("size", 0) is None:
            del before["size"]   # a reservation without size keeps the size
        self.cfg.modify_disk(disk_uuid, **changes)
        self.steps.append(lambda: self.cfg.modify_disk(
            disk_uuid, **before))

    def add_disk(self, disk):
        disk_uuid = self.cfg.add_instance_disk(self.uuid, disk)
        self.steps.append(lambda: self.cfg.remove_instance_disk(self.uuid,
                                                                disk_uuid))

    def run(self, lu):
        for step in reversed(self.steps):
            try:
                step()
            except errors.GenericError as err:
                lu.log_warning("Could not undo a change of the forthcoming"
                               " instance: %s", err)
        self.steps = []
