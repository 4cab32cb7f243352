"""Cluster verification: OP_CLUSTER_VERIFY and OP_CLUSTER_VERIFY_GROUP.

As in Ganeti, ``OP_CLUSTER_VERIFY`` does no checking itself: it submits one
job verifying the configuration (``OP_CLUSTER_VERIFY_CONFIG``, unless a
group is named) and one ``OP_CLUSTER_VERIFY_GROUP`` job per node group (each
depending on the configuration job) and returns ``{"jobs": [[ok, job id or
error], ...]}``; ``gnt-cluster verify`` follows those jobs.

A group verification asks every online node of the group, in parallel,
what it has (:class:`NodeImage`: protocol version, hypervisor self-checks,
hypervisor parameters, the instances it runs, its OS definitions, the
dimensions of the disks it should hold), then compares that with the
configuration node by node and instance by instance.  Findings are job log
lines the way Ganeti writes them::

      - ERROR: node node1.example.com: hypervisor kvm verify failure: '...'
      - ERROR:ENODEHV:node:node1.example.com:hypervisor kvm verify ...

(the second form with ``error_codes``).  ``ignore_errors`` turns the named
error codes into warnings; the opcode's result is True only when no error
was reported.
"""

import datetime
import hashlib
import os
import re

from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import hypervisor
from ganeti import ipolicy
from ganeti import locking
from ganeti import objects
from ganeti import opcodes
from ganeti import replication
from ganeti import rpc
from ganeti import user_shutdown
from ganeti.backend import rotation
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib import node_calls
from ganeti.cmdlib.base import LogicalUnit

ETYPE_ERROR = "ERROR"
ETYPE_WARNING = "WARNING"

# (item type, error code) of each finding (Ganeti's CV_E* values)
CV_ECLUSTERCERT = ("cluster", "ECLUSTERCERT")
CV_ENODERPC = ("node", "ENODERPC")
CV_ENODEVERSION = ("node", "ENODEVERSION")
CV_ENODEHV = ("node", "ENODEHV")
CV_ENODEOS = ("node", "ENODEOS")
CV_ENODEORPHANINSTANCE = ("node", "ENODEORPHANINSTANCE")
CV_ENODEFILECHECK = ("node", "ENODEFILECHECK")
CV_ENODEORPHANLV = ("node", "ENODEORPHANLV")
CV_EINSTANCEWRONGNODE = ("instance", "EINSTANCEWRONGNODE")
CV_EINSTANCEDOWN = ("instance", "EINSTANCEDOWN")
CV_EINSTANCEBADNODE = ("instance", "EINSTANCEBADNODE")
CV_EINSTANCEMISSINGDISK = ("instance", "EINSTANCEMISSINGDISK")
CV_EINSTANCEFAULTYDISK = ("instance", "EINSTANCEFAULTYDISK")
CV_EINSTANCEPOLICY = ("instance", "EINSTANCEPOLICY")
#: this project's: a group below its repair_min_healthy share
CV_EGROUPHEALTH = ("group", "EGROUPHEALTH")

#: days of validity left below which the cluster certificate is a warning,
#: and an error (Ganeti's SSL_CERT_EXPIRATION_WARN / _ERROR)
CERT_WARN_DAYS = 30
CERT_ERROR_DAYS = 7

#: disk templates whose disks a node can measure (blockdev_getdimensions)
_MEASURED = frozenset([constants.DT_FILE, constants.DT_SHARED_FILE,
                       constants.DT_PLAIN])


def _verify_params(op):
    """The parameters every verify opcode passes on to its jobs."""
    return {"debug_simulate_errors": op.debug_simulate_errors,
            "error_codes": op.error_codes,
            "ignore_errors": list(op.ignore_errors),
            "verbose": op.verbose}


class LUClusterVerify(LogicalUnit):
    """Submit the jobs verifying the cluster; returns their ids."""
    OP_ID = "OP_CLUSTER_VERIFY"

    def expand_names(self):
        if self.op.group_name:
            # refuse an unknown group now, not in the submitted job
            self.groups = [self.cfg.get_nodegroup(self.op.group_name).name]
        else:
            self.groups = sorted(g.name for g in self.cfg.nodegroups.values())

    def _opcode(self, op_id, **params):
        params.update(_verify_params(self.op))
        params["reason"] = list(self.op.reason or [])
        params["priority"] = self.op.priority
        return opcodes.opcode_class(op_id)(**params)

    async def exec_(self):
        jobs = []
        if not self.op.group_name:
            jobs.append([self._opcode("OP_CLUSTER_VERIFY_CONFIG")])
        for name in self.groups:
            # every group job waits for the configuration check (a negative
            # id counts back from the job itself), whatever its outcome
            depends = [[-len(jobs), []]] if not self.op.group_name else None
            jobs.append([self._opcode(
                "OP_CLUSTER_VERIFY_GROUP", group_name=name, depends=depends,
                skip_checks=list(self.op.skip_checks),
                verify_clutter=self.op.verify_clutter)])
        return {"jobs": await self.submit_jobs(jobs)}


class NodeImage(object):
    """What one node reported, for the checks (runtime data)."""

    def __init__(self, node):
        self.node = node
        self.name = node.name
        self.uuid = node.uuid
        self.offline = node.offline
        self.vm_capable = node.vm_capable
        #: the node could not be asked at all (its RPC failed)
        self.rpc_fail = False
        #: {instance name: info dict} (None: the list could not be had)
        self.instances = None
        #: [os dicts] of os_diagnose (None: not available)
        self.oslist = None
        #: [(instance, disk index, disk, dims or None)] (None: RPC failed)
        self.disks = None
        self.disk_error = None
        #: the answer of verify_node_files (None: not asked or failed)
        self.files = None
        self.files_msg = None
        #: the answer of crypto_state (None: not asked or failed)
        self.crypto = None


class _Reporter(object):
    """Ganeti's error formatting and the ``bad`` flag of a verify LU."""

    def __init__(self, lu):
        self.lu = lu
        self.op = lu.op
        self.bad = False

    def error(self, kind, item, message, *args, **kwargs):
        """Report ``message`` about ``item`` (a name or None) as a finding
        of ``kind`` (item type, error code); ``code`` ETYPE_WARNING makes it
        a warning, as does the code being in ``ignore_errors``."""
        etype = kwargs.get("code", ETYPE_ERROR)
        if args:
            message = message % args
        item_type, ecode = kind
        if ecode in (self.op.ignore_errors or []):
            etype = ETYPE_WARNING
        if self.op.error_codes:
            line = "  - %s:%s:%s:%s:%s" % (etype, ecode, item_type, item,
                                           message)
        else:
            line = "  - %s: %s %s: %s" % (etype, item_type,
                                          "" if item is None else item,
                                          message)
        self.lu.log_info(line)
        if etype == ETYPE_ERROR:
            self.bad = True

    def error_if(self, condition, kind, item, message, *args, **kwargs):
        if condition or self.op.debug_simulate_errors:
            self.error(kind, item, message, *args, **kwargs)


def certificate_problem(path, now=None):
    """(etype, message) for the cluster certificate at ``path``, or
    (None, None) if it is fine: unreadable or expiring in less than
    CERT_ERROR_DAYS is an error, in less than CERT_WARN_DAYS a warning."""
    try:
        cert = crypto.load_cluster_certificate(path)
    except errors.GenericError as err:
        return ETYPE_ERROR, "Failed to load X509 certificate %s: %s" % (
            path, err)
    if now is None:
        now = datetime.datetime.now(datetime.timezone.utc)
    left = cert.not_valid_after - now
    days = left.days
    if left.total_seconds() <= 0:
        return ETYPE_ERROR, ("While verifying %s: the certificate expired"
                             " %d days ago (%s)" % (
                                 path, -days, cert.not_valid_after))
    if days < CERT_ERROR_DAYS:
        etype = ETYPE_ERROR
    elif days < CERT_WARN_DAYS:
        etype = ETYPE_WARNING
    else:
        return None, None
    return etype, ("While verifying %s: the certificate expires in %d days"
                   " (%s); renew it (gnt-cluster renew-crypto)"
                   % (path, days, cert.not_valid_after))


def _cluster_hvparams(cluster, hv_name):
    """The cluster-level filled parameters of a hypervisor (globals
    included), what the node checks its setup with."""
    result = objects.fill_dict(constants.HVC_DEFAULTS.get(hv_name, {}),
                               cluster.hvparams.get(hv_name, {}))
    return result


class LUClusterVerifyGroup(LogicalUnit):
    """Verify the nodes of one group and the instances on them."""
    OP_ID = "OP_CLUSTER_VERIFY_GROUP"
    #: the distributed files the master has (set when verification runs)
    file_sums = {}

    def expand_names(self):
        self.group_uuid = self.expand_group(self.op.group_name)
        self.share_all()
        self.needed_locks[locking.LEVEL_NODEGROUP] = [self.group_uuid]
        self.needed_locks[locking.LEVEL_INSTANCE] = [
            inst.uuid for inst in self._group_instances()]

    def declare_locks(self, level):
        if level == locking.LEVEL_NODE:
            self.needed_locks[level] = [n.uuid for n in self._group_nodes()]

    def _group_nodes(self):
        return sorted((n for n in self.cfg.nodes.values()
                       if n.group == self.group_uuid), key=lambda n: n.name)

    def _group_instances(self):
        uuids = set(n.uuid for n in self._group_nodes())
        return sorted((i for i in self.cfg.instances.values()
                       if i.primary_node in uuids),
                      key=lambda i: i.display_name)

    def check_prereq(self):
        self.group = self.cfg.nodegroups[self.group_uuid]
        self.nodes = self._group_nodes()
        self.instances = self._group_instances()

    # --- gathering --------------------------------------------------------

    async def _call(self, image, procedure, args):
        return await node_calls.try_call_node(
            self, image.uuid, procedure, args)

    async def _gather(self, image, hvs, hvparams, disks):
        """Ask one node everything the checks need (sequentially: one
        node's calls are cheap; nodes are asked in parallel)."""
        result = await self._call(image, "version", [])
        if not result.success:
            image.rpc_fail = True
            image.rpc_msg = result.fail_msg
            return
        image.version = result.payload
        if image.version != constants.PROTOCOL_VERSION:
            return
        storage_dirs, vgs = self._volume_sources()
        if not image.vm_capable:
            storage_dirs, vgs = [], []
        args = [storage_dirs, vgs]
        wanted = self._files_for(image.node)
        if wanted:
            args.append(wanted)
        files = await self._call(image, "verify_node_files", args)
        if files.success and isinstance(files.payload, dict):
            image.files = files.payload
        else:
            image.files_msg = files.fail_msg or "invalid answer %r" % (
                files.payload,)
        state = await self._call(image, "crypto_state", [])
        if state.success and isinstance(state.payload, dict):
            image.crypto = state.payload
        if not image.vm_capable:
            return
        image.hv_verify = await self._call(image, "hypervisor_verify",
                                           [hvs, hvparams])
        image.hv_params = []
        for hv_name in hvs:
            image.hv_params.append((hv_name, await self._call(
                image, "hypervisor_validate_params",
                [hv_name, hvparams[hv_name]])))
        listing = await self._call(image, "all_instances_info", [hvs])
        if listing.success and isinstance(listing.payload, dict):
            image.instances = listing.payload
        else:
            image.instances_msg = listing.fail_msg or "invalid answer %r" % (
                listing.payload,)
        oslist = await self._call(image, "os_diagnose", [])
        if oslist.success and isinstance(oslist.payload, list):
            image.oslist = oslist.payload
        else:
            image.os_msg = oslist.fail_msg or "invalid answer"
        if disks:
            dims = await self._call(image, "blockdev_getdimensions",
                                    [[d.to_dict() for _, _, d in disks]])
            if dims.success and isinstance(dims.payload, list) and \
                    len(dims.payload) == len(disks):
                image.disks = [entry + (dim,) for entry, dim
                               in zip(disks, dims.payload)]
            else:
                image.disk_error = dims.fail_msg or "invalid answer %r" % (
                    dims.payload,)

    def _volume_sources(self):
        """([file storage directories], [volume groups]) of the enabled
        disk templates: where a node's disks live."""
        cluster = self.cfg.cluster
        enabled = cluster.enabled_disk_templates or []
        dirs = []
        for template, directory in (
                (constants.DT_FILE, cluster.file_storage_dir),
                (constants.DT_SHARED_FILE, cluster.shared_file_storage_dir)):
            if template in enabled and directory and \
                    os.path.isabs(directory) and directory not in dirs:
                dirs.append(os.path.normpath(directory))
        vgs = []
        if cluster.volume_group_name and (
                constants.DT_PLAIN in enabled or
                constants.DT_DRBD8 in enabled):
            vgs.append(cluster.volume_group_name)
        return dirs, vgs

    def _owned_volumes(self):
        """(file paths, "vg/lv" names) of every disk of every instance of
        the cluster (any group: shared directories are shared), children
        included (DRBD's data and metadata volumes)."""
        paths, lvs = set(), set()

        def walk(disk):
            lid = disk.logical_id or ()
            if disk.dev_type in (constants.DT_FILE, constants.DT_SHARED_FILE,
                                 constants.DT_GLUSTER) and len(lid) == 2 \
                    and isinstance(lid[1], str):
                paths.add(os.path.normpath(lid[1]))
            elif disk.dev_type == constants.DT_PLAIN and len(lid) == 2:
                lvs.add("%s/%s" % tuple(lid))
            for child in disk.children or []:
                walk(child)
        for inst in self.cfg.instances.values():
            for disk in self.cfg.instance_disks(inst):
                walk(disk)
        return paths, lvs

    def _disks_by_node(self):
        """{node uuid: [(instance, index, disk)]} of measurable disks."""
        result = {}
        for inst in self.instances:
            if inst.forthcoming:
                continue
            for idx, disk in enumerate(self.cfg.instance_disks(inst)):
                if disk.dev_type not in _MEASURED or disk.forthcoming:
                    continue
                for node_uuid in instance_disks.disk_nodes(inst, disk):
                    result.setdefault(node_uuid, []).append((inst, idx, disk))
        return result

    # --- checks -----------------------------------------------------------

    def _verify_node(self, rep, image):
        """The node's own state: RPC, version, hypervisors, OS
        definitions.  False if nothing more can be checked on it."""
        name = image.name
        if image.rpc_fail:
            rep.error(CV_ENODERPC, name, "while contacting node: %s",
                      image.rpc_msg)
            return False
        remote = image.version
        if not isinstance(remote, int) or isinstance(remote, bool):
            rep.error(CV_ENODERPC, name, "connection to node returned invalid"
                      " data (protocol version %r)", remote)
            return False
        if remote != constants.PROTOCOL_VERSION:
            rep.error(CV_ENODEVERSION, name, "incompatible protocol versions:"
                      " master %s, node %s", constants.PROTOCOL_VERSION,
                      remote)
            return False
        if not image.vm_capable:
            return True
        hv_verify = image.hv_verify
        if not hv_verify.success:
            rep.error(CV_ENODEHV, name, "cannot verify the hypervisors: %s",
                      hv_verify.fail_msg)
        else:
            for hv_name in sorted(hv_verify.payload or {}):
                problems = hv_verify.payload[hv_name]
                rep.error_if(problems, CV_ENODEHV, name,
                             "hypervisor %s verify failure: '%s'", hv_name,
                             "; ".join(problems or []))
        for hv_name, result in image.hv_params:
            rep.error_if(not result.success, CV_ENODEHV, name,
                         "hypervisor %s parameter verify failure (source"
                         " cluster): %s", hv_name,
                         node_calls.strip_node_prefix(result.fail_msg, name))
        if image.instances is None:
            rep.error(CV_ENODEHV, name, "node hypervisor returned no instance"
                      " list: %s", image.instances_msg)
        self._verify_node_os(rep, image)
        return True

    def _verify_node_os(self, rep, image):
        name = image.name
        if image.oslist is None:
            rep.error(CV_ENODEOS, name, "node hasn't returned valid OS data:"
                      " %s", image.os_msg)
            return
        found = {}
        for os_data in image.oslist:
            found.setdefault(os_data.get("name"), []).append(os_data)
        for os_name in sorted(n for n in found if n):
            first = found[os_name][0]
            rep.error_if(not first.get("valid"), CV_ENODEOS, name,
                         "Invalid OS %s (located at %s): %s", os_name,
                         first.get("path"), first.get("status"))
            rep.error_if(len(found[os_name]) > 1, CV_ENODEOS, name,
                         "OS '%s' has multiple entries (first one shadows the"
                         " rest): %s", os_name,
                         ", ".join(str(o.get("path"))
                                   for o in found[os_name]),
                         code=ETYPE_WARNING)
        # the OS definitions the node's instances need
        needed = self._needed_oses().get(image.uuid, {})
        for os_name in sorted(needed):
            entry = found.get(os_name)
            rep.error_if(not entry, CV_ENODEOS, name,
                         "OS '%s' of instance(s) %s is missing from the OS"
                         " search path", os_name,
                         ", ".join(sorted(needed[os_name])))

    def _needed_oses(self):
        """{node uuid: {OS name: [instance names]}} of the group's
        instances, made once (not a walk of every instance per node)."""
        if getattr(self, "_oses_by_node", None) is None:
            by_node = {}
            for inst in self.instances:
                if inst.os and not inst.forthcoming:
                    by_node.setdefault(inst.primary_node, {}).setdefault(
                        inst.os.split("+", 1)[0], []).append(inst.name)
            self._oses_by_node = by_node
        return self._oses_by_node

    def _verify_node_instances(self, rep, image, by_name):
        """Instances the node runs that are not its primaries."""
        if image.instances is None:
            return
        for iname in sorted(image.instances):
            info = image.instances[iname] or {}
            inst = by_name.get(iname)
            if inst is not None and inst.primary_node == image.uuid:
                continue
            state = info.get("state")
            if inst is not None:
                rep.error_if(info.get("live") or state in
                             hypervisor.LIVE_STATES,
                             CV_EINSTANCEWRONGNODE, iname,
                             "instance should not run on node %s",
                             image.name)
            else:
                rep.error(CV_ENODEORPHANINSTANCE, image.name,
                          "node is running unknown instance %s%s", iname,
                          "" if state in hypervisor.LIVE_STATES or not state
                          else " (kept, %s)" % state)

    def _verify_autorepair(self, rep, inst):
        """What auto-repair thinks of the instance, where a person should
        look: a failed repair, a repair that waits for fencing, a repair
        not allowed, ignored auto-repair tags (docs/autorepair.rst)."""
        from ganeti.watcher.autorepair import report
        ar = report.describe(self.cfg, inst)
        state = ar["state"]
        if state == "failed":
            rep.error(CV_EINSTANCEBADNODE, inst.name,
                      "auto-repair failed (%s); it does nothing more until"
                      " its failure result tag is removed",
                      (ar["last_result"] or {}).get("type"),
                      code=ETYPE_WARNING)
        elif ar["needs"] and "waits:" in ar["needs"]:
            rep.error(CV_EINSTANCEBADNODE, inst.name,
                      "auto-repair needs %s", ar["needs"],
                      code=ETYPE_WARNING)
        elif state == "needs-repair":
            rep.error(CV_EINSTANCEBADNODE, inst.name,
                      "needs %s; auto-repair %s", ar["needs"],
                      "is not enabled for it" if ar["policy"] ==
                      "not-enabled" else "allows only %s" % ar["allowed"]
                      if ar["policy"] == "enabled" else "is suspended",
                      code=ETYPE_WARNING)
        for tag, reason in ar["malformed"]:
            rep.error(CV_EINSTANCEBADNODE, inst.name,
                      "ignoring malformed auto-repair tag %s: %s", tag,
                      reason, code=ETYPE_WARNING)

    def _group_policy(self, node_uuid):
        """The filled instance policy of the node's group, made once per
        group (filling copies the whole policy)."""
        node = self.cfg.nodes.get(node_uuid)
        key = node.group if node is not None else None
        policies = self.__dict__.setdefault("_policies", {})
        if key not in policies:
            policies[key] = ipolicy.group_policy(self.cfg, node_uuid)[1]
        return policies[key]

    def _verify_instance(self, rep, inst, images):
        """One instance: running where it should, disks present."""
        cluster = self.cfg.cluster
        pimg = images.get(inst.primary_node)
        pname = node_calls.node_name(self.cfg, inst.primary_node)
        if pimg is None:
            return      # dangling: OP_CLUSTER_VERIFY_CONFIG reports it
        policy = self._group_policy(inst.primary_node)
        violations = ipolicy.spec_violations(
            policy, **ipolicy.instance_spec(self.cfg, inst))
        rep.error_if(violations, CV_EINSTANCEPOLICY, inst.name,
                     "instance does not meet the instance policy: %s",
                     ", ".join(violations), code=ETYPE_WARNING)
        self._verify_autorepair(rep, inst)
        if inst.admin_state == constants.ADMINST_UP:
            rep.error_if(pimg.offline, CV_EINSTANCEBADNODE, inst.name,
                         "instance is marked as running and lives on offline"
                         " node %s", pname)
            if not pimg.offline and pimg.instances is not None:
                info = pimg.instances.get(inst.name)
                state = (info or {}).get("state")
                if state in hypervisor.LIVE_STATES:
                    pass
                elif user_shutdown.is_user_down(cluster, inst, info):
                    # USER_down: the watcher records it, no error
                    rep.error(CV_EINSTANCEDOWN, inst.name,
                              "instance was shut down by its user on node %s"
                              " (USER_down)", pname, code=ETYPE_WARNING)
                else:
                    why = ""
                    if state:
                        why = " (%s%s)" % (state, ", %s" % info["reason"]
                                           if info.get("reason") else "")
                    rep.error(CV_EINSTANCEDOWN, inst.name,
                              "instance not running on its primary node"
                              " %s%s", pname, why)
        for node_uuid in inst.all_nodes:
            img = images.get(node_uuid)
            if img is None or img.offline or img.rpc_fail:
                continue
            nname = img.name
            if img.disk_error is not None:
                rep.error_if(inst.disks_active, CV_EINSTANCEFAULTYDISK,
                             inst.name, "couldn't retrieve status for disks"
                             " on %s: %s", nname, img.disk_error)
                continue
            for owner, idx, disk, dims in img.disks or []:
                if owner.uuid != inst.uuid:
                    continue
                rep.error_if(dims is None, CV_EINSTANCEMISSINGDISK,
                             inst.name, "disk/%d (%s) missing on node %s",
                             idx, instance_disks.disk_path(
                                 disk) or disk.dev_type,
                             nname)

    def _verify_node_config(self, rep, image, settled, missed):
        """The node's copy of config.data (master candidates hold one, no
        other node should) and the replication to it."""
        if image.uuid == self.cfg.cluster.master_node or image.rpc_fail or \
                image.version != constants.PROTOCOL_VERSION:
            return
        name = image.name
        if name in missed:
            delivered, error = missed[name]
            rep.error(CV_ENODEFILECHECK, name, "replication of configuration"
                      " serial %s failed: %s (last serial delivered: %s)",
                      self.cfg.serial_no, error,
                      "none" if delivered is None else delivered)
        if image.files is None:
            rep.error(CV_ENODEFILECHECK, name, "cannot check the node's"
                      " configuration copy and volumes: %s", image.files_msg,
                      code=ETYPE_WARNING)
            return
        serial = image.files.get("config_serial")
        problem = image.files.get("config_error")
        current = self.cfg.serial_no
        if image.node.master_candidate:
            if problem:
                rep.error(CV_ENODEFILECHECK, name, "cannot read the node's"
                          " copy of the configuration: %s", problem)
            elif serial is None:
                rep.error(CV_ENODEFILECHECK, name, "the node's copy of the"
                          " configuration is missing (master candidate; the"
                          " master's serial is %s)", current)
            elif not settled <= serial <= current:
                rep.error(CV_ENODEFILECHECK, name, "configuration serial of"
                          " the node's copy is %s, the master's is %s",
                          serial, current)
        elif serial is not None:
            rep.error(CV_ENODEFILECHECK, name, "the node holds a copy of the"
                      " configuration (serial %s) but is not a master"
                      " candidate", serial, code=ETYPE_WARNING)

    def _master_file_sums(self):
        """``{standard path: (who gets it, SHA-1)}`` of the files
        redistribution ships (``gnt-cluster redist-conf``) that the master
        has; empty without the master's paths."""
        paths = self.ctx.paths
        if paths is None:
            return {}
        try:
            shipped = replication.ancillary_files(self.cfg, paths)
        except errors.ParameterError as err:
            self.log_warning("Not comparing the distributed files: %s"
                             % err.args[-1])
            return {}
        result = {}
        for path, who in shipped:
            try:
                with open(replication.local_path(paths, path), "rb") as f:
                    result[path] = (who, hashlib.sha1(f.read()).hexdigest())
            except OSError:
                continue
        return result

    def _files_for(self, node):
        """The distributed files ``node`` should hold, by standard path."""
        if node.uuid == self.cfg.cluster.master_node:
            return []
        return sorted(path for path, (who, _) in self.file_sums.items()
                      if replication.node_wants(node, who) and
                      # the HMAC key has its own check (crypto state)
                      path != replication.HMAC_KEY_FILE)

    def _verify_node_file_copies(self, rep, image):
        """Each distributed file the node should hold (the RAPI
        certificate and users file on master candidates, the HMAC key and
        the admin's extra files everywhere, ...) is there and the same as
        the master's."""
        if image.files is None or image.rpc_fail:
            return
        sums = image.files.get("checksums") or {}
        for path in self._files_for(image.node):
            if path not in sums:
                continue
            theirs = sums[path]
            rep.error_if(theirs is None, CV_ENODEFILECHECK, image.name,
                         "file %s is missing ('gnt-cluster redist-conf'"
                         " copies it)", path)
            rep.error_if(theirs is not None and
                         theirs != self.file_sums[path][1],
                         CV_ENODEFILECHECK, image.name, "file %s differs"
                         " from the master's ('gnt-cluster redist-conf'"
                         " copies it)", path)

    def _verify_node_crypto(self, rep, image, hmac_digest):
        """What a renewal of the cluster's secrets left on the node
        (docs/crypto.rst): a renewal that did not finish, an HMAC key that
        is not the master's.  (A node holding another cluster certificate
        cannot be asked at all.)"""
        state = image.crypto
        if state is None:
            return
        name = image.name
        cert = state.get("cluster_certificate") or {}
        extra = [what for what, key in (("staged", "staged"),
                                         ("previous", "previous"))
                 if cert.get(key)]
        rep.error_if(extra, CV_ENODEFILECHECK, name, "the node still trusts"
                     " a %s cluster certificate beside its own: a renewal"
                     " did not finish; run 'gnt-cluster renew-crypto"
                     " --new-cluster-certificate' again", " and a ".join(
                         extra), code=ETYPE_WARNING)
        key = state.get("hmac_key") or {}
        if hmac_digest is not None and key.get("current") != hmac_digest:
            rep.error(CV_ENODEFILECHECK, name, "the node's HMAC key is not"
                      " the master's ('gnt-cluster redist-conf' copies it)")
        elif key.get("staged") or key.get("previous"):
            rep.error(CV_ENODEFILECHECK, name, "the node still accepts a"
                      " second HMAC key: a renewal did not finish; run"
                      " 'gnt-cluster renew-crypto --new-confd-hmac-key'"
                      " again", code=ETYPE_WARNING)

    def _master_hmac_digest(self):
        paths = self.ctx.paths
        if paths is None:
            return None
        try:
            with open(paths.hmac_key_file, "rb") as f:
                return rotation.key_digest(f.read())
        except OSError:
            return None

    def _verify_orphan_volumes(self, rep, images):
        """Disk files and LVs in the nodes' storage that no disk of any
        instance owns: warnings, as Ganeti's orphan volumes.  A file of the
        shared file storage directory is named once (every node sees it)."""
        paths, lvs = self._owned_volumes()
        reserved = [re.compile("^(%s)$" % pattern) for pattern in
                    self.cfg.cluster.reserved_lvs or []]
        shared = self.cfg.cluster.shared_file_storage_dir
        shared = os.path.normpath(shared) if shared else None
        seen_shared = set()
        for image in sorted(images, key=lambda i: i.name):
            if image.files is None or not image.vm_capable:
                continue
            name = image.name
            for where, message in sorted(
                    (image.files.get("errors") or {}).items()):
                rep.error(CV_ENODEORPHANLV, name, "cannot list the volumes in"
                          " %s: %s", where, message, code=ETYPE_WARNING)
            for directory, found in sorted(
                    (image.files.get("files") or {}).items()):
                for path in found:
                    path = os.path.normpath(path)
                    if path in paths:
                        continue
                    if os.path.normpath(directory) == shared:
                        if path in seen_shared:
                            continue
                        seen_shared.add(path)
                    rep.error(CV_ENODEORPHANLV, name, "volume %s is unknown",
                              path, code=ETYPE_WARNING)
            for _, found in sorted((image.files.get("lvs") or {}).items()):
                for volume in found:
                    if volume in lvs or \
                            any(r.match(volume) for r in reserved):
                        continue
                    rep.error(CV_ENODEORPHANLV, name, "volume %s is unknown",
                              volume, code=ETYPE_WARNING)

    def _verify_certificate(self, rep):
        paths = self.ctx.paths
        if paths is None:
            return
        self.log_info("* Verifying cluster certificate files")
        path = crypto.server_pem_path(paths)
        etype, message = certificate_problem(path)
        rep.error_if(etype is not None, CV_ECLUSTERCERT, None,
                     message or "certificate %s is fine" % path,
                     code=etype or ETYPE_ERROR)

    def _verify_repair_share(self, rep):
        """Auto-repair starts nothing in a group with fewer online nodes
        than its repair_min_healthy share (docs/autorepair.rst)."""
        share = objects.fill_ndparams(
            self.cfg.cluster, self.group,
            None)[constants.ND_REPAIR_MIN_HEALTHY]
        online = sum(1 for n in self.nodes if not n.offline)
        rep.error_if(online < share * len(self.nodes), CV_EGROUPHEALTH,
                     self.group.name, "only %d of the group's %d nodes are"
                     " online, below its repair_min_healthy share %s:"
                     " auto-repair starts no new repair in it", online,
                     len(self.nodes), share, code=ETYPE_WARNING)

    async def exec_(self):
        rep = _Reporter(self)
        cfg = self.cfg
        cluster = cfg.cluster
        verbose = self.op.verbose
        self.log_info("* Verifying group '%s'", self.group.name)
        if not self.nodes:
            self.log_info("* Empty node group, skipping verification")
            return True
        if any(n.uuid == cluster.master_node for n in self.nodes):
            # checked on the master: every node holds the same cluster
            # certificate
            self._verify_certificate(rep)
        hvs = list(cluster.enabled_hypervisors)
        hvparams = {hv: _cluster_hvparams(cluster, hv) for hv in hvs}
        disks = self._disks_by_node()
        images = {n.uuid: NodeImage(n) for n in self.nodes}
        # nodes of other groups holding disks of our instances: ask them too
        for inst in self.instances:
            for node_uuid in inst.all_nodes:
                if node_uuid not in images and node_uuid in cfg.nodes:
                    images[node_uuid] = NodeImage(cfg.nodes[node_uuid])
        online = [img for img in images.values() if not img.offline]
        # the master candidates' copies are compared once the replication
        # settled: what was written before this job has been sent
        replicator = getattr(self.ctx, "replicator", None)
        missed = {}
        if replicator is not None:
            await replicator.flush()
            missed = replicator.missed()
        settled = cfg.serial_no
        self.file_sums = self._master_file_sums()
        self.log_info("* Gathering data (%d nodes)", len(online))
        # at most the RPC client's bound of nodes asked at once
        await rpc.fan_out(
            online, lambda img: self._gather(img, hvs, hvparams,
                                             disks.get(img.uuid, [])),
            getattr(self.ctx.rpc, "max_parallel", None) or
            rpc.DEFAULT_MAX_PARALLEL)

        self.log_info("* Verifying node status")
        hmac_digest = self._master_hmac_digest()
        by_name = {i.name: i for i in cfg.instances.values() if i.name}
        group_uuids = set(n.uuid for n in self.nodes)
        for node in self.nodes:
            image = images[node.uuid]
            if image.offline:
                if verbose:
                    self.log_info("* Skipping offline node %s", node.name)
                continue
            if verbose:
                role = ("master" if node.uuid == cluster.master_node else
                        "master candidate" if node.master_candidate else
                        "drained" if node.drained else "regular")
                self.log_info("* Verifying node %s (%s)", node.name, role)
            if self._verify_node(rep, image) and image.vm_capable:
                self._verify_node_instances(rep, image, by_name)
            self._verify_node_config(rep, image, settled, missed)
            self._verify_node_file_copies(rep, image)
            self._verify_node_crypto(rep, image, hmac_digest)
        for uuid, image in images.items():
            if uuid not in group_uuids and image.rpc_fail:
                rep.error(CV_ENODERPC, image.name, "while contacting node:"
                          " %s", image.rpc_msg)
        self._verify_repair_share(rep)

        self.log_info("* Verifying orphan volumes")
        self._verify_orphan_volumes(rep, [
            images[n.uuid] for n in self.nodes
            if not images[n.uuid].offline and not images[n.uuid].rpc_fail])

        self.log_info("* Verifying instance status")
        for inst in self.instances:
            if inst.forthcoming:
                continue
            if verbose:
                self.log_info("* Verifying instance %s", inst.name)
            self._verify_instance(rep, inst, images)
        return not rep.bad
