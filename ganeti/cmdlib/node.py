"""Node membership logical units: add, remove, modify; redist-conf.

Joining (docs/membership.rst): the new node's ``ganeti-noded --bootstrap``
serves a one-time certificate whose SHA-256 fingerprint the admin gives as
``join_fingerprint`` (our extension of OP_NODE_ADD).  The master calls the
node by address over TLS pinned to that fingerprint, presenting the cluster
certificate, and hands it the cluster certificate (with its key), the HMAC
key and ssconf (``join``); the node then serves with the cluster
certificate only.  Then the node goes into the configuration, and the
replication (:mod:`ganeti.replication`) brings it config.data (master
candidates) and ssconf; the ancillary files follow.

A node that already holds the cluster certificate (``--readd`` of a node
that kept its files, or one prepared by hand) is added without a
fingerprint: the master then pins the cluster certificate itself.

The master candidate pool follows Ganeti's rules: a new or returning node
becomes a candidate while there are fewer than ``candidate_pool_size``; a
candidate is demoted (offline, drained, not master capable, or by request)
only if enough remain, unless ``auto_promote`` lets other nodes take its
place.
"""

import ipaddress

from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import locking
from ganeti import objects
from ganeti import qlang
from ganeti import replication
from ganeti import ssconf
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance_params import update_params

# --- the candidate pool ------------------------------------------------------


def candidate_stats(cfg, exceptions=()):
    """(candidates now, candidates wanted, nodes able to be one), leaving
    out the nodes in ``exceptions``."""
    now = able = 0
    for node in cfg.nodes.values():
        if node.uuid in exceptions:
            continue
        if node.master_capable and not (node.offline or node.drained):
            able += 1
        if node.master_candidate:
            now += 1
    pool = cfg.cluster.candidate_pool_size
    wanted = able if pool is None else min(able, pool)
    return now, wanted, able


def decide_self_promotion(cfg, exceptions=()):
    """Whether one more (master capable, online) node should become a
    candidate: the pool is not full even counting that node."""
    now, wanted, _ = candidate_stats(cfg, exceptions)
    return now < min(wanted + 1, cfg.cluster.candidate_pool_size)


def _candidate_digest(lu):
    """What ``candidate_certs`` records for a candidate: every node has
    the one cluster certificate, so its SHA-1 digest (as Ganeti's ssconf
    shows them)."""
    current = dict(lu.cfg.cluster.candidate_certs or {})
    if current:
        return next(iter(current.values()))
    try:
        cert = replication.cluster_certificate(lu.ctx)
    except errors.GenericError:
        return None
    return crypto.certificate_digest(cert.certificate, "sha1")


def update_candidate_certs(lu):
    """Make ``candidate_certs`` list exactly the master candidates."""
    cfg = lu.cfg
    current = dict(cfg.cluster.candidate_certs or {})
    digest = _candidate_digest(lu)
    wanted = {}
    for node in cfg.nodes.values():
        if node.master_candidate:
            wanted[node.uuid] = current.get(node.uuid, digest)
    wanted = {k: v for k, v in wanted.items() if v is not None}
    if wanted != current:
        cfg.set_cluster_params(candidate_certs=wanted)


async def ship_candidate_files(lu, node_names):
    """Give newly promoted master candidates the files redistribution ships
    to candidates (RAPI certificate and users file, with the other
    distributed files) in the job that promoted them; a failed copy is a
    warning naming the node and the file (``gnt-cluster verify`` reports
    the node's missing file until ``gnt-cluster redist-conf``)."""
    cfg = lu.cfg
    uuids = [cfg.get_node(name).uuid for name in node_names]
    uuids = [u for u in uuids if not cfg.nodes[u].offline]
    if not uuids or lu.ctx.rpc is None or lu.ctx.paths is None:
        return []
    lu.log_info("Copying the master candidate files to %s"
                % ", ".join(node_names))
    try:
        return await replication.upload_files(lu, uuids)
    except errors.ParameterError as err:
        lu.log_warning("Could not copy the master candidate files: %s"
                       % err.args[-1])
        return []


def maintain_candidate_pool(lu, exceptions=()):
    """Promote nodes until the pool has its size again; the names of the
    nodes promoted (in name order, so the choice is predictable)."""
    cfg = lu.cfg
    now, wanted, _ = candidate_stats(cfg, exceptions)
    promoted = []
    for node in qlang.nice_sort(cfg.nodes.values(), key=lambda n: n.name):
        if now >= wanted:
            break
        if (node.master_candidate or node.offline or node.drained or
                not node.master_capable or node.uuid in exceptions):
            continue
        cfg.set_node_params(node.uuid, master_candidate=True)
        lu.log_info("Promoted node %s to master candidate", node.name)
        promoted.append(node.name)
        now += 1
    if now < wanted:
        lu.log_warning("Could not fill the master candidate pool (%d of %d)"
                       % (now, wanted))
    return promoted


# --- parameter checks --------------------------------------------------------

def check_ip(value, field, version=None):
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        raise errors.OpPrereqError("%s: '%s' is not a valid IP address"
                                   % (field, value), errors.ECODE_INVAL)
    if version is not None and ip.version != version:
        raise errors.OpPrereqError("%s: '%s' must be an IPv%d address"
                                   % (field, value, version),
                                   errors.ECODE_INVAL)
    return str(ip)


_TYPE_CHECKS = {
    "string": (lambda v: isinstance(v, str), "a string"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool),
            "an integer"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "float": (lambda v: isinstance(v, (int, float)) and
              not isinstance(v, bool), "a number"),
}


def check_ndparams(params, field="ndparams", level="node"):
    """Node parameters as the node (or group) will have them; refuses
    unknown keys, wrong types and cluster-only ones at node level."""
    for key, value in sorted((params or {}).items()):
        if key not in constants.NDS_PARAMETER_TYPES:
            raise errors.OpPrereqError(
                "%s: unknown node parameter '%s' (known: %s)"
                % (field, key, ", ".join(sorted(
                    constants.NDS_PARAMETER_TYPES))), errors.ECODE_INVAL)
        if value == constants.VALUE_DEFAULT:
            continue
        check, what = _TYPE_CHECKS[constants.NDS_PARAMETER_TYPES[key]]
        if not check(value):
            raise errors.OpPrereqError("%s/%s: expected %s, got %r"
                                       % (field, key, what, value),
                                       errors.ECODE_INVAL)
        in_range, what = _RANGES.get(key, (None, None))
        if in_range is not None and not in_range(value):
            raise errors.OpPrereqError("%s/%s: expected %s, got %r"
                                       % (field, key, what, value),
                                       errors.ECODE_INVAL)
    if level == "node":
        bad = sorted(set(params or {}) & NDC_GLOBALS)
        if bad:
            raise errors.OpPrereqError(
                "%s: %s can only be set for the cluster or a node group"
                % (field, ", ".join(bad)), errors.ECODE_INVAL)


#: Node parameters only the cluster or a group may set (Ganeti's, then the
#: auto-repair budget: it is about a group's nodes together)
NDC_GLOBALS = frozenset([constants.ND_EXCLUSIVE_STORAGE,
                         constants.ND_REPAIR_MAX_PARALLEL,
                         constants.ND_REPAIR_MIN_HEALTHY])

#: value ranges of the node parameters that have one
_RANGES = {
    constants.ND_REPAIR_MAX_PARALLEL: (
        lambda v: v >= 0, "a number of repairs, 0 for no limit"),
    constants.ND_REPAIR_MIN_HEALTHY: (
        lambda v: 0 <= v <= 1, "a share of the nodes between 0 and 1"),
}


#: storage kinds a disk_state may name: Ganeti's "plain" (a volume group)
#: and this project's file storage, also under their storage type names
DISK_STATE_KINDS = frozenset([constants.DT_PLAIN, constants.DT_FILE,
                              constants.ST_LVM_VG])


def _check_state_values(values, known, where):
    if not isinstance(values, dict):
        raise errors.OpPrereqError("%s: expected a dictionary, got %r"
                                   % (where, values), errors.ECODE_INVAL)
    for key, value in sorted(values.items()):
        if key not in known:
            raise errors.OpPrereqError(
                "%s: unknown key '%s' (known: %s)"
                % (where, key, ", ".join(sorted(known))), errors.ECODE_INVAL)
        if value == constants.VALUE_DEFAULT:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or \
                value < 0:
            raise errors.OpPrereqError("%s/%s: expected a non-negative"
                                       " integer, got %r"
                                       % (where, key, value),
                                       errors.ECODE_INVAL)


def check_state(state, field):
    """hv_state ``{hypervisor: {mem_total, mem_node, mem_hv, cpu_total,
    cpu_node}}`` or disk_state ``{plain|file: {name: {disk_total,
    disk_reserved, disk_overhead}}}`` (Ganeti's keys, MiB and counts)."""
    for kind, values in sorted((state or {}).items()):
        where = "%s/%s" % (field, kind)
        if field == "hv_state":
            if kind not in constants.HYPER_TYPES:
                raise errors.OpPrereqError("%s: unknown hypervisor '%s'"
                                           % (field, kind),
                                           errors.ECODE_INVAL)
            _check_state_values(values, constants.HVSTS_PARAMETERS, where)
            continue
        if kind not in DISK_STATE_KINDS:
            raise errors.OpPrereqError(
                "%s: unknown storage kind '%s' (known: %s)"
                % (field, kind, ", ".join(sorted(DISK_STATE_KINDS))),
                errors.ECODE_INVAL)
        if not isinstance(values, dict):
            raise errors.OpPrereqError("%s: expected a dictionary, got %r"
                                       % (where, values), errors.ECODE_INVAL)
        for name, unit in sorted(values.items()):
            _check_state_values(unit, constants.DSS_PARAMETERS,
                                "%s/%s" % (where, name))


def merge_state(current, changes, field):
    """hv_state / disk_state: ``{kind: {name or key: ...}}`` merged one
    level down ("default" removes a key); checked first."""
    check_state(changes, field)
    result = {k: dict(v) for k, v in (current or {}).items()}
    for key, value in (changes or {}).items():
        merged = result.setdefault(key, {})
        merged.update(value)
        for sub, subvalue in list(merged.items()):
            if subvalue == constants.VALUE_DEFAULT:
                del merged[sub]
    return result


def _pinned_error(name, address, result, pin, cluster_digest):
    """The OpPrereqError for a failed pinned call, saying what we saw."""
    seen = result.seen_digest
    fmt = crypto.format_fingerprint
    if seen and seen == cluster_digest and pin != cluster_digest:
        text = ("node %s (%s) already holds this cluster's certificate: it"
                " is, or was, a member; add it without --join-fingerprint"
                " (with --readd if it is in the configuration)"
                % (name, address))
    elif seen and pin == cluster_digest:
        text = ("node %s (%s) does not hold this cluster's certificate (it"
                " presents %s); if that is the one-time certificate its"
                " ganeti-noded --bootstrap logged, give it as"
                " --join-fingerprint" % (name, address, fmt(seen)))
    elif seen and seen != pin:
        text = ("node %s (%s) presents the certificate %s, not %s as given;"
                " refusing to join it" % (name, address, fmt(seen), fmt(pin)))
    else:
        text = ("cannot reach the node daemon of %s at %s: %s"
                % (name, address, result.fail_msg))
    return errors.OpPrereqError(text, errors.ECODE_ENVIRON)


def _strip(msg, address):
    prefix = "node %s: " % address
    msg = msg or "unknown error"
    return msg[len(prefix):] if msg.startswith(prefix) else msg


# --- OP_NODE_ADD -------------------------------------------------------------

class LUNodeAdd(LogicalUnit):
    """gnt-node add: join a node (bootstrap mode) or take back one that
    holds the cluster certificate."""
    OP_ID = "OP_NODE_ADD"
    REQ_BGL = True

    _FLAGS = ("master_capable", "vm_capable")

    def check_arguments(self):
        op = self.op
        master = self.cfg.master_node
        if op.readd and master is not None and op.node_name in (
                master.name, master.uuid):
            raise errors.OpPrereqError("Cannot re-add the master node",
                                       errors.ECODE_STATE)
        if op.readd and op.group:
            raise errors.OpPrereqError(
                "group: a re-added node keeps its node group; do not give"
                " one", errors.ECODE_INVAL)
        self.pin = None
        if op.join_fingerprint is not None:
            try:
                self.pin = crypto.parse_fingerprint(op.join_fingerprint)
            except errors.ParameterError as err:
                raise errors.OpPrereqError(err.args[-1], errors.ECODE_INVAL)
        if op.primary_ip is not None:
            op.primary_ip = check_ip(op.primary_ip, "primary_ip")
        if op.secondary_ip is not None:
            op.secondary_ip = check_ip(op.secondary_ip, "secondary_ip", 4)
        if op.ndparams:
            check_ndparams(op.ndparams)

    def _existing(self):
        for node in self.cfg.nodes.values():
            if node.name == self.op.node_name:
                return node
        return None

    async def check_prereq(self):
        op = self.op
        cfg = self.cfg
        name = op.node_name
        existing = self._existing()
        if existing is not None and not op.readd:
            raise errors.OpPrereqError(
                "Node %s is already in the cluster (use --readd to add it"
                " back)" % name, errors.ECODE_EXISTS)
        if existing is None and op.readd:
            raise errors.OpPrereqError("Node %s is not in the cluster, it"
                                       " cannot be re-added" % name,
                                       errors.ECODE_NOENT)
        self.existing = existing
        primary_ip = op.primary_ip or (existing.primary_ip if existing
                                       else None)
        if not primary_ip:
            raise errors.OpPrereqError(
                "primary_ip: the node's primary IP is required (no DNS"
                " lookups here; gnt-node add --primary-ip)",
                errors.ECODE_INVAL)
        if existing is not None:
            secondary_ip = op.secondary_ip or existing.secondary_ip or \
                primary_ip
            if secondary_ip != (existing.secondary_ip or existing.primary_ip):
                raise errors.OpPrereqError(
                    "secondary_ip: a re-added node must keep its secondary"
                    " IP (%s)" % existing.secondary_ip, errors.ECODE_INVAL)
        else:
            secondary_ip = op.secondary_ip or primary_ip
        if ipaddress.ip_address(secondary_ip).version != 4:
            raise errors.OpPrereqError(
                "secondary_ip: '%s' must be an IPv4 address (give one with"
                " --secondary-ip for an IPv6 primary)" % secondary_ip,
                errors.ECODE_INVAL)
        for other in cfg.nodes.values():
            if existing is not None and other.uuid == existing.uuid:
                continue
            used = {other.primary_ip, other.secondary_ip or other.primary_ip}
            if used & {primary_ip, secondary_ip}:
                raise errors.OpPrereqError(
                    "IP address(es) of node %s conflict with node %s (%s)"
                    % (name, other.name, ", ".join(sorted(
                        used & {primary_ip, secondary_ip}))),
                    errors.ECODE_NOTUNIQUE)
        self.primary_ip, self.secondary_ip = primary_ip, secondary_ip
        self.flags = {}
        for flag in self._FLAGS:
            value = getattr(op, flag)
            if value is None:
                value = getattr(existing, flag) if existing else True
            self.flags[flag] = value
        if existing is not None and not self.flags["vm_capable"] and \
                cfg.node_instances(existing.uuid):
            raise errors.OpPrereqError(
                "Node %s holds instances; it cannot be re-added with"
                " vm_capable false" % name, errors.ECODE_STATE)
        master = cfg.master_node
        master_single = (master.secondary_ip or master.primary_ip) == \
            master.primary_ip
        new_single = secondary_ip == primary_ip
        if master_single != new_single:
            raise errors.OpPrereqError(
                "The master has %s secondary IP but node %s %s"
                % ("no" if master_single else "a",
                   name, "has one" if master_single else "has none"),
                errors.ECODE_INVAL)
        if existing is not None:
            self.group_uuid = existing.group
        elif op.group:
            self.group_uuid = cfg.get_nodegroup(op.group).uuid
        else:
            self.group_uuid = None  # the config's default group
        self.hv_state = (merge_state({}, op.hv_state, "hv_state")
                         if op.hv_state else None)
        self.disk_state = (merge_state({}, op.disk_state, "disk_state")
                           if op.disk_state else None)
        exceptions = [existing.uuid] if existing is not None else []
        self.master_candidate = bool(
            self.flags["master_capable"] and
            decide_self_promotion(cfg, exceptions))
        if op.node_setup:
            self.log_info("node_setup: there is no SSH setup to do here"
                          " (nodes trust each other by the cluster"
                          " certificate); ignored")
        # The node must answer, pinned to the fingerprint given or to the
        # cluster certificate, with our protocol version.
        cert = replication.cluster_certificate(self.ctx)
        self.cluster_digest = cert.digest()
        self.cert = cert
        pin = self.pin or self.cluster_digest
        result = await replication.address_rpc(self.ctx).call(
            primary_ip, pin, "version", [])
        if not result.success:
            raise _pinned_error(name, primary_ip, result, pin,
                                self.cluster_digest)
        if result.payload != constants.PROTOCOL_VERSION:
            raise errors.OpPrereqError(
                "Version mismatch: master protocol %s, node %s protocol %s"
                % (constants.PROTOCOL_VERSION, name, result.payload),
                errors.ECODE_ENVIRON)

    def dry_run_result(self):
        return None

    async def _join(self):
        cfg = self.cfg
        paths = self.ctx.paths
        try:
            with open(paths.hmac_key_file) as f:
                hmac_key = f.read()
        except OSError as err:
            raise errors.OpExecError("cannot read the cluster HMAC key %s:"
                                     " %s" % (paths.hmac_key_file,
                                              err.strerror))
        client = replication.address_rpc(self.ctx)
        args = [(self.cert.key_pem + self.cert.cert_pem).decode("ascii"),
                hmac_key, cfg.cluster.cluster_name, self.op.node_name,
                ssconf.ssconf_values(cfg), None]
        self.log_info("Joining node %s (%s), pinned to %s",
                      self.op.node_name, self.primary_ip,
                      crypto.format_fingerprint(self.pin))
        result = await client.call(self.primary_ip, self.pin, "join", args)
        if not result.success:
            raise errors.OpExecError(
                "Node %s did not join: %s"
                % (self.op.node_name, _strip(result.fail_msg,
                                             self.primary_ip)))
        check = await client.call(self.primary_ip, self.cluster_digest,
                                  "version", [])
        if not check.success:
            raise errors.OpExecError(
                "Node %s took the cluster's files but does not serve with"
                " the cluster certificate: %s"
                % (self.op.node_name, _strip(check.fail_msg,
                                             self.primary_ip)))

    async def exec_(self):
        op = self.op
        cfg = self.cfg
        if self.pin is not None:
            await self._join()
        if self.existing is not None:
            changes = {"offline": False, "drained": False, "powered": True,
                       "master_candidate": self.master_candidate,
                       "primary_ip": self.primary_ip}
            changes.update(self.flags)
            if op.ndparams:
                changes["ndparams"] = dict(op.ndparams)
            if self.hv_state is not None:
                changes["hv_state_static"] = self.hv_state
            if self.disk_state is not None:
                changes["disk_state_static"] = self.disk_state
            cfg.set_node_params(self.existing.uuid, **changes)
            uuid = self.existing.uuid
            self.log_info("Re-added node %s; its offline and drained flags"
                          " were reset", op.node_name)
        else:
            node = objects.Node(
                name=op.node_name, primary_ip=self.primary_ip,
                secondary_ip=self.secondary_ip,
                master_candidate=self.master_candidate, offline=False,
                drained=False, group=self.group_uuid, powered=True,
                ndparams=dict(op.ndparams or {}),
                hv_state_static=self.hv_state or {},
                disk_state_static=self.disk_state or {}, **self.flags)
            uuid = cfg.add_node(node)
            for level in (locking.LEVEL_NODE, locking.LEVEL_NODE_RES):
                await self.ctx.glm.add(level, [uuid])
        update_candidate_certs(self)
        if self.master_candidate:
            self.log_info("Node %s is a master candidate", op.node_name)
        await replication.sync(self)
        await replication.upload_files(self, [uuid])
        if self.existing is not None and not self.master_candidate:
            # a returning node must not keep an old config.data around
            result = await self.ctx.rpc.call(op.node_name,
                                             "node_demote_from_mc", [])
            if not result.success:
                self.log_warning("Node %s could not remove its old"
                                 " config.data: %s"
                                 % (op.node_name, result.fail_msg))
        return None


# --- OP_NODE_REMOVE ----------------------------------------------------------

class LUNodeRemove(LogicalUnit):
    """gnt-node remove: out of the configuration, then the node leaves
    (removes the cluster's files; its daemon stops or goes back to
    bootstrap mode)."""
    OP_ID = "OP_NODE_REMOVE"
    REQ_BGL = True

    def check_prereq(self):
        cfg = self.cfg
        node = cfg.get_node(self.op.node_uuid or self.op.node_name)
        if node.uuid == cfg.cluster.master_node:
            raise errors.OpPrereqError(
                "Node %s is the master node; fail over to another node"
                " first" % node.name, errors.ECODE_INVAL)
        users = sorted(i.display_name for i in cfg.instances.values()
                       if node.uuid in i.all_nodes or any(
                           node.uuid in (d.nodes or [])
                           for d in cfg.instance_disks(i)))
        if users:
            raise errors.OpPrereqError(
                "Node %s still has instances (%s); remove or move them"
                " first" % (node.name, ", ".join(users)),
                errors.ECODE_INVAL)
        self.node = node

    async def exec_(self):
        cfg = self.cfg
        node = self.node
        was_candidate = node.master_candidate
        cfg.remove_node(node.uuid)
        self.log_info("Removed node %s from the configuration", node.name)
        promoted = []
        if was_candidate:
            promoted = maintain_candidate_pool(self)
        update_candidate_certs(self)
        for level in (locking.LEVEL_NODE_RES, locking.LEVEL_NODE):
            await self.ctx.glm.remove(level, [node.uuid], self.owner)
        await replication.sync(self)
        await ship_candidate_files(self, promoted)
        if node.offline:
            self.log_warning(
                "Node %s is offline; it was not told to leave. On it, stop"
                " ganeti-noded and remove the cluster files (server.pem,"
                " hmac.key, config.data, ssconf_*)" % node.name)
            return None
        digest = replication.cluster_certificate(self.ctx).digest()
        result = await replication.address_rpc(self.ctx).call(
            node.primary_ip, digest, "node_leave", [])
        if not result.success:
            self.log_warning("Node %s could not leave the cluster cleanly:"
                             " %s" % (node.name, _strip(result.fail_msg,
                                                        node.primary_ip)))
        else:
            self.log_info("Node %s removed the cluster's files", node.name)
        return None


# --- OP_NODE_SET_PARAMS ------------------------------------------------------

_ROLE_CANDIDATE, _ROLE_DRAINED, _ROLE_OFFLINE, _ROLE_REGULAR = range(4)
_FLAGS_TO_ROLE = {
    (True, False, False): _ROLE_CANDIDATE,
    (False, True, False): _ROLE_DRAINED,
    (False, False, True): _ROLE_OFFLINE,
    (False, False, False): _ROLE_REGULAR,
}
_ROLE_TO_FLAGS = {v: k for k, v in _FLAGS_TO_ROLE.items()}
_ROLE_FLAGS = ("master_candidate", "drained", "offline")


class LUNodeSetParams(LogicalUnit):
    """gnt-node modify: roles (candidate, drained, offline), capabilities,
    parameters; keeps the master candidate pool."""
    OP_ID = "OP_NODE_SET_PARAMS"

    def check_arguments(self):
        op = self.op
        mods = [op.offline, op.master_candidate, op.drained,
                op.master_capable, op.vm_capable, op.secondary_ip,
                op.ndparams, op.hv_state, op.disk_state, op.powered]
        if all(m is None for m in mods):
            raise errors.OpPrereqError("Please give at least one"
                                       " modification", errors.ECODE_INVAL)
        if [op.offline, op.master_candidate, op.drained].count(True) > 1:
            raise errors.OpPrereqError(
                "A node can be only one of master candidate, drained and"
                " offline at a time", errors.ECODE_INVAL)
        if op.secondary_ip is not None:
            op.secondary_ip = check_ip(op.secondary_ip, "secondary_ip", 4)
        if op.ndparams:
            check_ndparams(op.ndparams)
        self.might_demote = (op.master_candidate is False or
                             op.offline is True or op.drained is True or
                             op.master_capable is False)
        self.lock_all = bool(op.auto_promote and self.might_demote)

    def expand_names(self):
        node = self.cfg.get_node(self.op.node_uuid or self.op.node_name)
        self.node_uuid = node.uuid
        nodes = locking.ALL_SET if self.lock_all else [node.uuid]
        self.needed_locks[locking.LEVEL_NODE] = nodes
        self.needed_locks[locking.LEVEL_NODE_RES] = nodes

    def check_prereq(self):
        op = self.op
        cfg = self.cfg
        node = cfg.get_node(self.node_uuid)
        self.node = node
        is_master = node.uuid == cfg.cluster.master_node
        if is_master and (op.master_candidate is not None or
                          op.drained is not None or op.offline is not None):
            raise errors.OpPrereqError(
                "The master node's role can only be changed by a master"
                " failover", errors.ECODE_INVAL)
        if op.master_capable is False and is_master:
            raise errors.OpPrereqError("The master must stay master capable",
                                       errors.ECODE_STATE)
        if op.master_candidate and not node.master_capable and \
                op.master_capable is not True:
            raise errors.OpPrereqError(
                "Node %s is not master capable; it cannot become a master"
                " candidate" % node.name, errors.ECODE_STATE)
        if op.vm_capable is False and cfg.node_instances(node.uuid):
            raise errors.OpPrereqError(
                "Node %s has instances; vm_capable cannot be unset"
                % node.name, errors.ECODE_STATE)
        if node.master_candidate and self.might_demote and not self.lock_all:
            remaining, wanted, _ = candidate_stats(cfg, [node.uuid])
            if remaining < wanted:
                raise errors.OpPrereqError(
                    "Not enough master candidates would remain (%d, the pool"
                    " wants %d); allow promoting another node with"
                    " --auto-promote (RAPI: auto_promote=true)"
                    % (remaining, wanted), errors.ECODE_STATE)
        self.old_flags = (node.master_candidate, node.drained, node.offline)
        old_role = _FLAGS_TO_ROLE[self.old_flags]
        self.old_role = old_role
        for flag in _ROLE_FLAGS:
            if getattr(op, flag) is False and getattr(node, flag) is False:
                self.log_info("Ignoring the request to unset %s: it is not"
                              " set", flag)
                setattr(op, flag, None)
        oob = (objects.fill_ndparams(cfg.cluster,
                                     cfg.nodegroups.get(node.group), node)
               .get(constants.ND_OOB_PROGRAM))
        if op.powered is not None and not oob:
            raise errors.OpPrereqError(
                "Cannot change the powered state of node %s: it has no"
                " out-of-band program (ndparams oob_program)" % node.name,
                errors.ECODE_STATE)
        promote_self = False
        if (op.drained is False or op.offline is False or
                (op.master_capable and not node.master_capable)):
            if decide_self_promotion(cfg):
                promote_self = True
                self.log_info("Node %s will be promoted to master candidate",
                              node.name)
        if op.master_capable is False and node.master_candidate:
            self.log_info("Node %s is no longer master capable; demoting it"
                          " from master candidate", node.name)
            op.master_candidate = False
        if op.master_candidate or (promote_self and not op.drained and
                                   not op.offline):
            new_role = _ROLE_CANDIDATE
        elif op.drained:
            new_role = _ROLE_DRAINED
        elif op.offline:
            new_role = _ROLE_OFFLINE
        elif False in (op.master_candidate, op.drained, op.offline):
            new_role = _ROLE_REGULAR
        else:
            new_role = old_role
        self.new_role = new_role
        self.need_version_check = (old_role == _ROLE_OFFLINE and
                                   new_role != old_role)
        if op.secondary_ip is not None and op.secondary_ip != \
                node.secondary_ip:
            master = cfg.master_node
            master_single = (master.secondary_ip or master.primary_ip) == \
                master.primary_ip
            if master_single and op.secondary_ip != node.primary_ip and \
                    not (op.force and is_master):
                raise errors.OpPrereqError(
                    "Changing the secondary IP on a single-homed cluster"
                    " needs --force and the master as the node",
                    errors.ECODE_INVAL)
            if not master_single and op.secondary_ip == node.primary_ip and \
                    not (op.force and is_master):
                raise errors.OpPrereqError(
                    "The secondary IP cannot equal the primary IP on a"
                    " multi-homed cluster (unless --force on the master)",
                    errors.ECODE_INVAL)
            for other in cfg.nodes.values():
                if other.uuid != node.uuid and op.secondary_ip in (
                        other.primary_ip, other.secondary_ip):
                    raise errors.OpPrereqError(
                        "secondary_ip: %s is used by node %s"
                        % (op.secondary_ip, other.name),
                        errors.ECODE_NOTUNIQUE)
        if op.ndparams:
            self.new_ndparams = update_params(node.ndparams, op.ndparams)
        if op.hv_state:
            self.new_hv_state = merge_state(node.hv_state_static,
                                            op.hv_state, "hv_state")
        if op.disk_state:
            self.new_disk_state = merge_state(node.disk_state_static,
                                              op.disk_state, "disk_state")

    async def _check_node_answers(self):
        node = self.node
        result = await replication.address_rpc(self.ctx).call(
            node.primary_ip,
            replication.cluster_certificate(self.ctx).digest(), "version",
            [])
        if not result.success:
            raise errors.OpExecError(
                "Node %s is being brought back online but does not answer:"
                " %s (re-add it with gnt-node add --readd)"
                % (node.name, _strip(result.fail_msg, node.primary_ip)))
        self.log_warning("Node %s comes back online without a re-add;"
                         " make sure it is healthy" % node.name)

    async def exec_(self):
        op = self.op
        cfg = self.cfg
        node = self.node
        if self.need_version_check:
            await self._check_node_answers()
        changes = {}
        result = []
        if op.ndparams:
            changes["ndparams"] = self.new_ndparams
        if op.powered is not None:
            changes["powered"] = op.powered
        if op.hv_state:
            changes["hv_state_static"] = self.new_hv_state
        if op.disk_state:
            changes["disk_state_static"] = self.new_disk_state
        for flag in ("master_capable", "vm_capable"):
            value = getattr(op, flag)
            if value is not None:
                changes[flag] = value
                result.append((flag, str(value)))
        if op.secondary_ip is not None:
            changes["secondary_ip"] = op.secondary_ip
            result.append(("secondary_ip", op.secondary_ip))
        if self.new_role != self.old_role:
            new_flags = _ROLE_TO_FLAGS[self.new_role]
            for old, new, flag in zip(self.old_flags, new_flags, _ROLE_FLAGS):
                if old != new:
                    changes[flag] = new
                    result.append((flag, str(new)))
        if changes:
            cfg.set_node_params(node.uuid, **changes)
        promoted = []
        if self.new_role == _ROLE_CANDIDATE and \
                self.old_role != _ROLE_CANDIDATE:
            promoted.append(node.name)
        if self.new_role != self.old_role and self.lock_all:
            promoted += maintain_candidate_pool(self, exceptions=[node.uuid])
        update_candidate_certs(self)
        await replication.sync(self)
        await ship_candidate_files(self, promoted)
        if self.old_role == _ROLE_CANDIDATE and \
                self.new_role not in (_ROLE_CANDIDATE, _ROLE_OFFLINE):
            demoted = await self.ctx.rpc.call(node.name,
                                              "node_demote_from_mc", [])
            if not demoted.success:
                self.log_warning("Node %s failed to demote itself: %s"
                                 % (node.name, demoted.fail_msg))
        return result


# --- OP_CLUSTER_REDIST_CONF --------------------------------------------------

class LUClusterRedistConf(LogicalUnit):
    """gnt-cluster redist-conf: config.data to the master candidates,
    ssconf to every node, then the ancillary files (HMAC key, RAPI
    certificate and users, VNC password files in use, the admin's extra
    files), and a full copy of the job queue to the master candidates."""
    OP_ID = "OP_CLUSTER_REDIST_CONF"

    def expand_names(self):
        self.needed_locks[locking.LEVEL_NODE] = locking.ALL_SET
        self.share_locks[locking.LEVEL_NODE] = True

    def check_prereq(self):
        try:
            replication.read_extra_files_list(self.ctx.paths)
        except errors.ParameterError as err:
            raise errors.OpPrereqError(err.args[-1], errors.ECODE_INVAL)

    async def exec_(self):
        cfg = self.cfg
        targets = [n for n in cfg.nodes.values()
                   if n.uuid != cfg.cluster.master_node]
        offline = sorted(n.name for n in targets if n.offline)
        for name in offline:
            self.log_info("Skipping offline node %s", name)
        self.log_info("Redistributing configuration serial %s",
                      cfg.serial_no)
        missed = await replication.sync(self, force=True)
        failures = await replication.upload_files(self)
        for path, _ in replication.ancillary_files(cfg, self.ctx.paths):
            self.log_info("  %s", path)
        queue_missed = await self._copy_queue()
        bad = sorted(set(missed) | {name for name, _, _ in failures} |
                     set(queue_missed))
        if bad:
            self.log_warning("Not every node got every file: %s"
                             % ", ".join(bad))
        return None

    async def _copy_queue(self):
        """A full copy of the job queue to every master candidate; the
        names of those it failed on."""
        replicator = getattr(self.ctx, "queue_replicator", None)
        if replicator is None:
            return {}
        self.log_info("Copying the job queue to the master candidates")
        failed = await replicator.resync()
        for name in sorted(failed):
            self.log_warning("Node %s did not get a copy of the job queue:"
                             " %s" % (name, failed[name]))
        return failed


# --- OP_CLUSTER_ACTIVATE_MASTER_IP / OP_CLUSTER_DEACTIVATE_MASTER_IP --------

class _LUMasterIp(LogicalUnit):
    """The cluster's master IP on the master node (docs/master-failover.rst):
    its node daemon adds or removes the address (or runs the external
    master IP script)."""
    PROCEDURE = "node_activate_master_ip"
    WHAT = "Activation"

    def expand_names(self):
        self.needed_locks[locking.LEVEL_NODE] = [self.cfg.cluster.master_node]
        self.share_locks[locking.LEVEL_NODE] = True

    def args(self, cluster):
        return [cluster.master_ip, cluster.master_netmask,
                cluster.master_netdev,
                bool(cluster.use_external_mip_script)]

    async def exec_(self):
        cluster = self.cfg.cluster
        master = self.cfg.get_node(cluster.master_node)
        result = await self.ctx.rpc.call(master.name, self.PROCEDURE,
                                         self.args(cluster))
        if not result.success:
            raise errors.OpExecError("%s of %s on %s failed: %s"
                                     % (self.WHAT, cluster.master_ip,
                                        master.name, result.fail_msg))
        self.log_info("%s: master IP %s on %s", self.WHAT,
                      cluster.master_ip, master.name)
        return None


class LUClusterActivateMasterIp(_LUMasterIp):
    """gnt-cluster activate-master-ip"""
    OP_ID = "OP_CLUSTER_ACTIVATE_MASTER_IP"


class LUClusterDeactivateMasterIp(_LUMasterIp):
    """gnt-cluster deactivate-master-ip"""
    OP_ID = "OP_CLUSTER_DEACTIVATE_MASTER_IP"
    PROCEDURE = "node_deactivate_master_ip"
    WHAT = "Deactivation"

    def args(self, cluster):
        return [bool(cluster.use_external_mip_script)]
