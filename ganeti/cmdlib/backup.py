"""Instance exports (``gnt-backup``): OP_BACKUP_PREPARE, OP_BACKUP_EXPORT,
OP_BACKUP_REMOVE; importing is OP_INSTANCE_CREATE's ``import`` mode
(:mod:`ganeti.cmdlib.instance_create`).

A local export writes ``<export dir>/<instance>/`` on the target node: a
``config.ini`` (:mod:`ganeti.exportinfo`) and one dump per disk, made by
the OS definition's ``export`` script on the primary node and copied to the
target in chunks through the master (the node daemons' mutual-TLS
channel).  The instance is shut down meanwhile (``shutdown``, the default)
and started again afterwards if it was running, unless it is removed
(``remove_instance``).  The export is assembled in a hidden directory and
renamed into place only when complete; older exports of the instance on
other nodes are removed afterwards, as Ganeti does.

A remote export (``mode=remote``) sends the disks to another cluster's
node, which listens for them (OP_INSTANCE_CREATE in ``remote-import``
mode there).  OP_BACKUP_PREPARE makes a key on the primary node and
answers the signed handshake, key name and certificate
(:mod:`ganeti.rie`); OP_BACKUP_EXPORT checks the destination's signed
certificate and per-disk ``[host, port, magic, hmac, salt]`` (in
``target_node``), runs the export script per disk into a transfer file
and sends it over TLS to the destination's listener
(:mod:`ganeti.backend.remote_transfer`).  Both clusters must share the
cluster domain secret.
"""

from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti import exportinfo
from ganeti import locking
from ganeti import objects
from ganeti import opcodes
from ganeti import rie
from ganeti.cmdlib import checks
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import locks
from ganeti.cmdlib import node_calls
from ganeti.cmdlib import payloads
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance import InstanceLU, ALL_NODES
from ganeti.cmdlib.instance_migration import (assemble_instance_disks,
                                              start_spec)

__all__ = ["LUBackupPrepare", "LUBackupExport", "LUBackupRemove",
           "copy_transfer", "CHUNK_SIZE"]

log = Logger()

#: bytes per copied chunk of a dump
CHUNK_SIZE = 4 * 1024 * 1024


async def copy_transfer(lu, src_node, read, dst_node, transfer_id, what):
    """Copy a file in chunks from ``src_node`` into transfer file
    ``transfer_id`` on ``dst_node``.  ``read`` is (procedure, leading
    arguments) of the source's chunk reader (it takes offset and length
    after them).  Chunks of zeros are not sent.  Returns the size."""
    procedure, lead = read
    offset = 0
    size = None
    last_pct = -1
    while True:
        data = await node_calls.call_node(
            lu, src_node, procedure, list(lead) + [offset, CHUNK_SIZE],
            "Reading %s" % what)
        if size is None:
            size = data.get("size") or 0
        if data.get("data") == "" or offset >= size:
            break
        length = data.get("length") or CHUNK_SIZE
        if data.get("data") is not None:
            await node_calls.call_node(
                lu, dst_node, "transfer_write_chunk",
                [transfer_id, offset, data["data"], length],
                "Writing %s" % what)
        offset += length
        pct = int(100 * min(offset, size) / size) // 25 * 25 if size else 100
        if pct != last_pct:
            lu.log_info("  - %s: %d%% copied (%d of %d KiB)", what, pct,
                        min(offset, size) >> 10, size >> 10)
            last_pct = pct
        if offset >= size:
            break
    await node_calls.call_node(lu, dst_node, "transfer_finish",
                               [transfer_id, size or 0],
                               "Finishing %s" % what)
    return size or 0


async def _remove_transfer(lu, node_uuid, transfer_id):
    result = await node_calls.try_call_node(lu, node_uuid, "transfer_remove",
                                            [transfer_id])
    if not result.success:
        lu.log_warning("Could not remove transfer file %s on node %s: %s",
                       transfer_id, node_calls.node_name(lu.cfg, node_uuid),
                       result.fail_msg)


class LUBackupPrepare(InstanceLU):
    """Preparing an export: nothing to do for a local one (as Ganeti:
    the result is null).  For a remote one, a new key on the primary node
    (valid :data:`ganeti.rie.CERT_VALIDITY` seconds) and
    ``{"handshake", "x509_key_name", "x509_ca"}`` signed with the cluster
    domain secret, for the destination cluster."""
    OP_ID = "OP_BACKUP_PREPARE"

    def check_prereq(self):
        inst = self.instance
        checks.check_not_forthcoming(inst, "export it")
        if self.op.mode == opcodes.EXPORT_MODE_REMOTE:
            self.cds = rie.read_domain_secret(self.ctx.paths)
            checks.check_node_online(self.cfg, inst.primary_node,
                                     "the export key is made there")

    async def exec_(self):
        if self.op.mode != opcodes.EXPORT_MODE_REMOTE:
            return None
        inst = self.instance
        pname = node_calls.node_name(self.cfg, inst.primary_node)
        self.log_info("Creating an export key on %s", pname)
        name, pem = await node_calls.call_node(
            self, inst.primary_node, "x509_cert_create",
            [rie.CERT_VALIDITY], "Creating an export key for %s" % inst.name)
        salt = rie.new_salt()
        return {
            "handshake": rie.compute_handshake(self.cds),
            "x509_key_name": [name, rie.sha1_hmac(self.cds, name, salt),
                              salt],
            "x509_ca": rie.sign_certificate(pem, self.cds, salt),
        }


class LUBackupExport(InstanceLU):
    OP_ID = "OP_BACKUP_EXPORT"
    NODE_LOCKS = ALL_NODES
    NODE_RES_LOCKS = ALL_NODES

    def check_arguments(self):
        op = self.op
        self.remote = op.mode == opcodes.EXPORT_MODE_REMOTE
        if self.remote:
            if not isinstance(op.target_node, list):
                raise errors.OpPrereqError(
                    "target_node: a remote export needs the destination's"
                    " per-disk information (a list), not %r"
                    % (op.target_node,), errors.ECODE_INVAL)
            if not op.x509_key_name:
                raise errors.OpPrereqError(
                    "x509_key_name: missing; a remote export needs the"
                    " key made by the remote prepare-export",
                    errors.ECODE_INVAL)
            if not op.destination_x509_ca:
                raise errors.OpPrereqError(
                    "destination_x509_ca: missing; a remote export needs"
                    " the destination's signed certificate",
                    errors.ECODE_INVAL)
        elif not isinstance(op.target_node, str):
            raise errors.OpPrereqError(
                "target_node: a local export needs a node name, not %r"
                % (op.target_node,), errors.ECODE_INVAL)
        if op.compress not in exportinfo.COMPRESSIONS:
            raise errors.OpPrereqError(
                "compress: '%s' is not supported; use one of %s"
                % (op.compress, ", ".join(exportinfo.COMPRESSIONS)),
                errors.ECODE_INVAL)
        if op.zero_free_space:
            raise errors.OpPrereqError(
                "zero_free_space: zeroing an instance's free space before"
                " export is not supported by this cluster",
                errors.ECODE_INVAL)
        if op.remove_instance and not op.shutdown:
            raise errors.OpPrereqError(
                "remove_instance: cannot remove the instance without"
                " shutting it down first (shutdown is false)",
                errors.ECODE_INVAL)

    def expand_names(self):
        InstanceLU.expand_names(self)
        op = self.op
        self.target_uuid = None
        if self.remote:
            return
        try:
            self.target_uuid = self.expand_node(op.target_node_uuid
                                                or op.target_node)
        except errors.OpPrereqError as err:
            raise errors.OpPrereqError("target_node: %s" % err.args[0],
                                       errors.ECODE_NOENT)

    def declare_locks(self, level):
        InstanceLU.declare_locks(self, level)
        if level == locking.LEVEL_NODE and not self.remote:
            # the target, and every other node an older export may be on
            self.needed_locks[level] = locking.ALL_SET
            self.share_locks[level] = True

    def check_prereq(self):
        cfg = self.cfg
        inst = self.instance
        checks.check_not_forthcoming(inst, "export it")
        if self.remote:
            self._check_remote()
        else:
            self._check_target()
        checks.check_node_online(cfg, inst.primary_node,
                                 "the data of instance %s is there"
                                 % inst.name)
        disks = cfg.instance_disks(inst)
        if not disks or all(d.dev_type == constants.DT_DISKLESS
                            for d in disks):
            raise errors.OpPrereqError(
                "Cannot export diskless instance %s" % inst.name,
                errors.ECODE_INVAL)
        self.disks = disks
        if self.remote:
            self._check_disk_info()

    def _check_remote(self):
        op = self.op
        self.cds = rie.read_domain_secret(self.ctx.paths)
        self.key_name = rie.check_key_name(self.cds, op.x509_key_name)
        self.dest_ca = rie.load_signed_certificate(
            op.destination_x509_ca, self.cds, "destination_x509_ca")

    def _check_disk_info(self):
        targets = self.op.target_node
        if len(targets) != len(self.disks):
            raise errors.OpPrereqError(
                "target_node: the destination gave information for %d"
                " disks, instance %s has %d" % (len(targets),
                                                self.instance.name,
                                                len(self.disks)),
                errors.ECODE_INVAL)
        self.destinations = [rie.check_disk_info(self.cds, idx, info)
                             for idx, info in enumerate(targets)]

    def _check_target(self):
        cfg = self.cfg
        target = cfg.get_node(self.target_uuid)
        if target.offline:
            raise errors.OpPrereqError(
                "target_node: node %s is offline, cannot export to it"
                % target.name, errors.ECODE_STATE)
        if target.drained:
            raise errors.OpPrereqError(
                "target_node: node %s is drained, cannot export to it"
                % target.name, errors.ECODE_STATE)

    async def exec_(self):
        op = self.op
        cfg = self.cfg
        inst = self.instance
        pnode = inst.primary_node
        pname = node_calls.node_name(cfg, pnode)
        info = await node_calls.live_info(self, inst)
        was_running = checks.is_live(info)
        if was_running and not op.shutdown:
            self.log_warning("Instance %s keeps running: its disks are"
                             " exported while in use, the copy may not be"
                             " consistent", inst.name)
        if was_running and op.shutdown:
            self.log_info("Shutting down instance %s", inst.name)
            await node_calls.call_node(
                self, pnode, "instance_shutdown",
                [inst.name, inst.hypervisor, op.shutdown_timeout],
                "Shutting down instance %s" % inst.name)
        restart = was_running and op.shutdown and not op.remove_instance
        # disks activated only for the export are deactivated afterwards
        deactivate = not inst.disks_active and not restart
        if self.remote:
            try:
                await instance_disks.assemble_disks(self, inst)
                await self._send_remote(inst, pname)
            finally:
                await self._after(inst, restart, deactivate)
            self.log_info("Exported instance %s to the remote cluster",
                          inst.name)
            res = await node_calls.try_call_node(
                self, pnode, "x509_cert_remove", [self.key_name])
            if not res.success:
                self.log_warning("Could not remove the export key %s on"
                                 " %s: %s", self.key_name, pname,
                                 res.fail_msg)
            if op.remove_instance:
                await self._remove_instance(inst)
            return [True, [True] * len(self.disks)]
        tname = node_calls.node_name(cfg, self.target_uuid)
        transfers = []   # transfer ids on the target
        dump_names = []
        try:
            await instance_disks.assemble_disks(self, inst)
            payload = payloads.os_instance(cfg, inst)
            for idx, disk in enumerate(self.disks):
                what = "disk %d of %s" % (idx, inst.name)
                self.log_info("Exporting disk/%d (%d MiB) on %s", idx,
                              disk.size, pname)
                made = await node_calls.call_node(
                    self, pnode, "instance_os_export",
                    [payload, idx, op.compress, op.debug_level or 0],
                    "Exporting %s" % what)
                src_tid = made["transfer_id"]
                dst_tid = objects.new_uuid().replace("-", "")
                transfers.append(dst_tid)
                try:
                    self.log_info("Copying disk/%d to %s", idx, tname)
                    await copy_transfer(
                        self, pnode, ("transfer_read_chunk", [src_tid]),
                        self.target_uuid, dst_tid, "dump of disk/%d" % idx)
                finally:
                    await _remove_transfer(self, pnode, src_tid)
                dump_names.append(disk.uuid)
        except BaseException:
            for tid in transfers:
                await _remove_transfer(self, self.target_uuid, tid)
            await self._after(inst, restart, deactivate)
            raise
        await self._after(inst, restart, deactivate)
        config = exportinfo.build(
            self._instance_dict(inst), [d.to_dict() for d in self.disks],
            [self._nic_dict(n) for n in inst.nics], source=pname,
            timestamp=self.ctx.clock.seconds(),
            compression=op.compress, dump_names=dump_names,
            tags=inst.tags)
        try:
            path = await node_calls.call_node(
                self, self.target_uuid, "export_finalize",
                [inst.name, config, dict(zip(dump_names, transfers))],
                "Finishing the export of %s" % inst.name)
        except BaseException:
            for tid in transfers:
                await _remove_transfer(self, self.target_uuid, tid)
            raise
        self.log_info("Exported instance %s to %s:%s", inst.name, tname,
                      path)
        await self._remove_older(inst.name)
        if op.remove_instance:
            await self._remove_instance(inst)
        # Ganeti's answer: (finalized, [per disk: exported])
        return [True, [True] * len(dump_names)]

    async def _send_remote(self, inst, pname):
        """Each disk's export script output, sent to the destination's
        listener for it."""
        op = self.op
        pnode = inst.primary_node
        payload = payloads.os_instance(self.cfg, inst)
        for idx, (disk, (host, port, magic)) in enumerate(
                zip(self.disks, self.destinations)):
            what = "disk %d of %s" % (idx, inst.name)
            self.log_info("Exporting disk/%d (%d MiB) on %s", idx,
                          disk.size, pname)
            made = await node_calls.call_node(
                self, pnode, "instance_os_export",
                [payload, idx, op.compress, op.debug_level or 0],
                "Exporting %s" % what)
            tid = made["transfer_id"]
            try:
                self.log_info("Sending disk/%d (%d KiB, compression %s) to"
                              " %s:%s", idx, made["size"] >> 10,
                              op.compress, host, port)
                sent = await node_calls.call_node(
                    self, pnode, "remote_export_send",
                    [self.key_name, self.dest_ca, host, port, magic, tid],
                    "Sending %s to %s:%s" % (what, host, port))
                self.log_info("  - disk/%d: %d bytes received by the"
                              " destination (sha256 %s)", idx,
                              sent["size"], sent["sha256"])
            finally:
                await _remove_transfer(self, pnode, tid)

    def _instance_dict(self, inst):
        cfg = self.cfg
        return {
            "name": inst.name, "os": inst.os, "hypervisor": inst.hypervisor,
            "disk_template": objects.disk_template_of(self.disks),
            "beparams": objects.fill_beparams(cfg.cluster, inst),
            "hvparams": {k: v for k, v in (inst.hvparams or {}).items()},
            "osparams": dict(inst.osparams or {}),
            "osparams_private": dict(inst.osparams_private or {}),
        }

    def _nic_dict(self, nic):
        cfg = self.cfg
        network = None
        if nic.network:
            net = cfg.networks.get(nic.network)
            network = net.name if net is not None else nic.network
        return {"mac": nic.mac, "ip": nic.ip, "network": network,
                "name": nic.name, "nicparams": dict(nic.nicparams or {})}

    async def _after(self, inst, restart, deactivate):
        if restart:
            await self._restart(inst)
        elif deactivate and not self.op.remove_instance:
            await instance_disks.shutdown_disks(self, self.instance,
                                                ignore_failures=True)

    async def _restart(self, inst):
        cfg = self.cfg
        self.log_info("Starting instance %s again", inst.name)
        try:
            await assemble_instance_disks(self, inst)
            await node_calls.call_node(
                self, inst.primary_node, "instance_start",
                [start_spec(cfg, inst), False],
                "Starting instance %s" % inst.name)
        except errors.GenericError as err:
            self.log_warning("Could not start instance %s again: %s",
                             inst.name, err)

    async def _remove_older(self, name):
        """Older exports of the instance on the other nodes go."""
        cfg = self.cfg
        for node in cfg.nodes.values():
            if node.uuid == self.target_uuid or node.offline:
                continue
            result = await node_calls.try_call_node(self, node.uuid,
                                                    "export_list", [])
            if not result.success:
                self.log_warning("Could not list the exports on %s (an"
                                 " older export of %s may remain): %s",
                                 node.name, name, result.fail_msg)
                continue
            if name not in (result.payload or []):
                continue
            self.log_info("Removing the older export of %s on %s", name,
                          node.name)
            res = await node_calls.try_call_node(self, node.uuid,
                                                 "export_remove", [name])
            if not res.success:
                self.log_warning("Could not remove the older export of %s"
                                 " on %s: %s", name, node.name, res.fail_msg)

    async def _remove_instance(self, inst):
        cfg = self.cfg
        op = self.op
        self.log_info("Removing instance %s", inst.name)
        ok = await instance_disks.remove_disks(
            self, inst, instance_disks.all_disk_pairs(cfg, inst),
            ignore_failures=True)
        if not ok and not op.ignore_remove_failures:
            raise errors.OpExecError(
                "The export of %s is done, but its disks could not all be"
                " removed (see the warnings); the instance stays in the"
                " configuration (use ignore_remove_failures)" % inst.name)
        cfg.remove_instance(inst.uuid)
        await locks.remove_instance_lock(self, inst.uuid)


class LUBackupRemove(LogicalUnit):
    """Remove every export of an instance, on every node; the instance
    need not exist any more (then ``instance_name`` is the export's
    name, as Ganeti allows)."""
    OP_ID = "OP_BACKUP_REMOVE"

    def expand_names(self):
        op = self.op
        self.name = op.instance_name
        try:
            inst = self.cfg.get_instance(op.instance_uuid or
                                         op.instance_name)
        except errors.OpPrereqError:
            inst = None
        if inst is not None:
            self.name = inst.name
        self.needed_locks[locking.LEVEL_NODE] = locking.ALL_SET
        self.share_locks[locking.LEVEL_NODE] = True

    async def exec_(self):
        cfg = self.cfg
        found = False
        failed = []
        for node in sorted(cfg.nodes.values(), key=lambda n: n.name):
            if node.offline:
                continue
            result = await node_calls.try_call_node(self, node.uuid,
                                                    "export_list", [])
            if not result.success:
                failed.append(node.name)
                self.log_warning("Failed to query node %s (continuing): %s",
                                 node.name, result.fail_msg)
                continue
            if self.name not in (result.payload or []):
                continue
            found = True
            res = await node_calls.try_call_node(self, node.uuid,
                                                 "export_remove", [self.name])
            if res.success:
                self.log_info("Removed the export of %s on %s", self.name,
                              node.name)
            else:
                raise errors.OpExecError(
                    "Could not remove the export of %s on node %s: %s"
                    % (self.name, node.name, res.fail_msg))
        if not found and not failed:
            raise errors.OpExecError(
                "No export found for instance %s on any node" % self.name)
        if not found:
            self.log_warning("No export of %s found on the nodes that"
                             " answered; nodes not answering: %s",
                             self.name, ", ".join(failed))
        return None
