"""Mixin of ConfigStore: the mutators of instances and their disks."""

import copy


from ganeti import constants
from ganeti import errors
from ganeti import leases
from ganeti import objects
from ganeti.objects import new_uuid


class InstanceMutators(object):
    """Instance and disk changes; each persists like every mutator."""

    # --- mutators: instances -------------------------------------------------

    def generate_mac(self):
        """A MAC with the cluster prefix that no NIC uses yet."""
        import random
        used = {nic.mac for inst in self.instances.values()
                for nic in inst.nics}
        prefix = self.cluster.mac_prefix or constants.DEFAULT_MAC_PREFIX
        for _ in range(1000):
            mac = "%s:%02x:%02x:%02x" % (prefix, random.randrange(256),
                                         random.randrange(256),
                                         random.randrange(256))
            if mac not in used:
                return mac
        raise errors.ReservationError("no free MAC address with prefix %s"
                                      % prefix)

    def allocate_port(self):
        """A TCP/UDP port for an instance (VNC, DRBD), recorded in the pool.

        It changes the cluster without a write of its own (the next change
        persists it); a change refused later does not take it back.
        """
        c = self.cluster
        if c.tcpudp_port_pool:
            port = c.tcpudp_port_pool.pop(0)
        else:
            port = c.highest_used_port + 1
            if port > constants.LAST_DRBD_PORT:
                raise errors.ReservationError(
                    "no free port between %d and %d"
                    % (constants.FIRST_DRBD_PORT, constants.LAST_DRBD_PORT))
            c.highest_used_port = port
        self._mark(c)
        return port

    def _check_instance_input(self, instance, disks):
        if instance.forthcoming:
            if not instance.uuid:
                raise errors.OpPrereqError(
                    "uuid: a forthcoming instance needs a uuid",
                    errors.ECODE_INVAL)
        else:
            for field in ("name", "primary_node", "os", "hypervisor"):
                if not getattr(instance, field):
                    raise errors.OpPrereqError(
                        "%s: required for instance %s"
                        % (field, instance.display_name), errors.ECODE_INVAL)
        if instance.name:
            self._check_name_free(self.instances, "instance", instance.name,
                                  except_uuid=instance.uuid)
        objects.check_instance_hvparams(instance.hvparams)
        for disk in disks:
            if disk.uuid in self.disks and \
                    disk.uuid not in instance.disks:
                raise errors.OpPrereqError("disk %s already exists"
                                           % disk.uuid, errors.ECODE_EXISTS)

    def add_instance(self, instance, disks=()):
        """Add an instance (real or forthcoming) with its disks.

        Forthcoming instances and disks need only a UUID; whatever resources
        they do declare are reserved from now on.  Whether they fit is the
        caller's check (against the nodes' live data, see
        :meth:`check_instance_fits`).
        """
        instance.uuid = instance.uuid or new_uuid()
        if instance.uuid in self.instances:
            raise errors.OpPrereqError("instance %s already exists"
                                       % instance.uuid, errors.ECODE_EXISTS)
        disks = list(disks)
        for disk in disks:
            disk.uuid = disk.uuid or new_uuid()
            if instance.forthcoming:
                disk.forthcoming = True
        instance.disks = [d.uuid for d in disks]
        if instance.primary_node:
            instance.primary_node = self.get_node(instance.primary_node).uuid
        instance.secondary_nodes = [self.get_node(n).uuid
                                    for n in instance.secondary_nodes]
        for disk in disks:
            if not disk.nodes and disk.dev_type in constants.DTS_NODE_LOCAL:
                disk.nodes = list(instance.all_nodes)
            if disk.mode is None and not disk.forthcoming:
                disk.mode = constants.DISK_RDWR
        for nic in instance.nics:
            nic.uuid = nic.uuid or new_uuid()
        self._check_instance_input(instance, disks)
        with self._change("adding instance %s" % instance.display_name):
            t = self._now()
            instance.ctime = instance.mtime = t
            for disk in disks:
                disk.ctime = disk.mtime = t
                self.disks[disk.uuid] = disk
                self._mark(disk)
            self.instances[instance.uuid] = instance
            self._mark(instance)
            self.cluster.mtime = self._now()
        return instance.uuid

    def remove_instance(self, name_or_uuid):
        inst = self.get_instance(name_or_uuid)
        with self._change("removing instance %s" % inst.display_name):
            for disk_uuid in inst.disks:
                disk = self.disks.pop(disk_uuid, None)
                if disk is not None:
                    self._mark(disk)
            if inst.network_port:
                self.cluster.tcpudp_port_pool.append(inst.network_port)
            del self.instances[inst.uuid]
            self._mark(inst)
            self.cluster.mtime = self._now()

    def rename_instance(self, name_or_uuid, new_name):
        inst = self.get_instance(name_or_uuid)
        if not new_name:
            raise errors.OpPrereqError("new_name: must not be empty",
                                       errors.ECODE_INVAL)
        self._check_name_free(self.instances, "instance", new_name,
                              except_uuid=inst.uuid)
        with self._change("renaming instance %s" % inst.display_name):
            inst.name = new_name
            self._touch(inst)

    def set_instance_admin_state(self, name_or_uuid, state,
                                 source=constants.ADMIN_SOURCE):
        inst = self.get_instance(name_or_uuid)
        if state not in constants.ADMINST_ALL:
            raise errors.OpPrereqError(
                "admin_state: '%s' is not one of %s"
                % (state, ", ".join(sorted(constants.ADMINST_ALL))),
                errors.ECODE_INVAL)
        if source not in constants.ADMIN_STATE_SOURCES:
            raise errors.OpPrereqError(
                "admin_state_source: '%s' is not one of %s"
                % (source, ", ".join(sorted(constants.ADMIN_STATE_SOURCES))),
                errors.ECODE_INVAL)
        if inst.forthcoming:
            raise errors.OpPrereqError(
                "instance %s is forthcoming; create it first"
                % inst.display_name, errors.ECODE_STATE)
        with self._change("setting instance %s %s"
                          % (inst.display_name, state)):
            inst.admin_state = state
            inst.admin_state_source = source
            self._touch(inst)

    def set_instance_disks_active(self, name_or_uuid, active):
        inst = self.get_instance(name_or_uuid)
        with self._change("marking disks of %s %s"
                          % (inst.display_name,
                             "active" if active else "inactive")):
            inst.disks_active = bool(active)
            self._touch(inst)

    _INSTANCE_MODIFIABLE = frozenset([
        "hvparams", "beparams", "osparams", "osparams_private", "os",
        "hypervisor", "nics", "primary_node", "secondary_nodes",
        "network_port"])

    def modify_instance(self, name_or_uuid, **changes):
        """Change instance fields."""
        inst = self.get_instance(name_or_uuid)
        for key in changes:
            if key not in self._INSTANCE_MODIFIABLE:
                raise errors.OpPrereqError(
                    "instance field '%s' cannot be modified" % key,
                    errors.ECODE_INVAL)
        if "hvparams" in changes:
            objects.check_instance_hvparams(changes["hvparams"])
        candidate = inst.copy()
        for key, value in changes.items():
            setattr(candidate, key, copy.deepcopy(value))
        if candidate.primary_node:
            candidate.primary_node = self.get_node(candidate.primary_node).uuid
        candidate.secondary_nodes = [self.get_node(n).uuid
                                     for n in candidate.secondary_nodes]
        with self._change("modifying instance %s" % inst.display_name):
            old_nodes = list(inst.all_nodes)
            for key in changes:
                setattr(inst, key, getattr(candidate, key))
            if inst.all_nodes != old_nodes:
                for d in self.instance_disks(inst):
                    if d.dev_type in constants.DTS_NODE_LOCAL:
                        d.nodes = list(inst.all_nodes)
                        self._touch(d)
            self._touch(inst)

    def set_instance_lease(self, name_or_uuid, until):
        """Set the lease end of a forthcoming instance (epoch seconds;
        None: unlimited), kept as its ``lease:until:`` tag."""
        inst = self.get_instance(name_or_uuid)
        if not inst.forthcoming:
            raise errors.OpPrereqError(
                "lease_until: instance %s is not forthcoming; only a"
                " reservation can have a lease" % inst.display_name,
                errors.ECODE_STATE)
        with self._change("setting the lease of instance %s"
                          % inst.display_name):
            inst.tags -= leases.lease_tags(inst)
            if until is not None:
                inst.tags.add(leases.tag(until))
            self._touch(inst)

    def add_instance_disk(self, name_or_uuid, disk, index=None):
        inst = self.get_instance(name_or_uuid)
        disk.uuid = disk.uuid or new_uuid()
        if disk.uuid in self.disks:
            raise errors.OpPrereqError("disk %s already exists" % disk.uuid,
                                       errors.ECODE_EXISTS)
        if inst.forthcoming:
            disk.forthcoming = True
        if not disk.nodes and disk.dev_type in constants.DTS_NODE_LOCAL:
            disk.nodes = list(inst.all_nodes)
        with self._change("adding a disk to %s" % inst.display_name):
            disk.ctime = disk.mtime = self._now()
            self.disks[disk.uuid] = disk
            self._mark(disk)
            if index is None:
                inst.disks.append(disk.uuid)
            else:
                inst.disks.insert(index, disk.uuid)
            self._touch(inst)
        return disk.uuid

    def remove_instance_disk(self, name_or_uuid, disk_uuid):
        inst = self.get_instance(name_or_uuid)
        if disk_uuid not in inst.disks:
            raise errors.OpPrereqError("disk %s does not belong to %s"
                                       % (disk_uuid, inst.display_name),
                                       errors.ECODE_NOENT)
        with self._change("removing a disk from %s" % inst.display_name):
            inst.disks.remove(disk_uuid)
            disk = self.disks.pop(disk_uuid, None)
            if disk is not None:
                self._mark(disk)
            self._touch(inst)

    _DISK_MODIFIABLE = frozenset(["size", "mode", "name", "params",
                                  "spindles", "logical_id", "nodes",
                                  "children", "iv_name", "dev_type"])

    def modify_disk(self, disk_uuid, **changes):
        disk = self.get_disk(disk_uuid)
        for key in changes:
            if key not in self._DISK_MODIFIABLE:
                raise errors.OpPrereqError("disk field '%s' cannot be modified"
                                           % key, errors.ECODE_INVAL)
        if "size" in changes and (not isinstance(changes["size"], int)
                                  or changes["size"] < 0):
            raise errors.OpPrereqError(
                "size: must be a non-negative number of MiB, got %r"
                % (changes["size"],), errors.ECODE_INVAL)
        owner = self._disk_owner(disk_uuid)
        with self._change("modifying disk %s" % disk_uuid):
            for key, value in changes.items():
                setattr(disk, key, copy.deepcopy(value))
            self._touch(disk)
            if owner is not None:
                self._touch(owner)

    def _disk_owner(self, disk_uuid):
        for inst in self.instances.values():
            if disk_uuid in inst.disks:
                return inst
        return None

    def commit_forthcoming(self, name_or_uuid):
        """Turn a forthcoming instance and its disks into real ones.

        Its resources were reserved when it was placed, so no capacity check
        can fail here; only missing mandatory fields can stop it.
        """
        inst = self.get_instance(name_or_uuid)
        if not inst.forthcoming:
            raise errors.OpPrereqError("instance %s is not forthcoming"
                                       % inst.display_name, errors.ECODE_STATE)
        missing = [f for f in ("name", "primary_node", "os", "hypervisor")
                   if not getattr(inst, f)]
        for disk in self.instance_disks(inst):
            if disk.size is None and disk.dev_type != constants.DT_DISKLESS:
                missing.append("disks/%s/size" % disk.uuid)
            if not disk.dev_type:
                missing.append("disks/%s/dev_type" % disk.uuid)
        if missing:
            raise errors.OpPrereqError(
                "forthcoming instance %s lacks mandatory fields: %s"
                % (inst.display_name, ", ".join(missing)), errors.ECODE_INVAL)
        with self._change("creating forthcoming instance %s"
                          % inst.display_name):
            inst.forthcoming = False
            # a real instance has no lease: it is never removed for one
            inst.tags -= leases.lease_tags(inst)
            for disk in self.instance_disks(inst):
                disk.forthcoming = False
                if disk.mode is None:
                    disk.mode = constants.DISK_RDWR
                self._touch(disk)
            self._touch(inst)
