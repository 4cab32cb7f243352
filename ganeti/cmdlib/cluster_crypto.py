"""The cluster's secrets renewed without downtime; renaming the cluster.

``OP_CLUSTER_RENEW_CRYPTO`` (``gnt-cluster renew-crypto``) replaces, as
asked, the cluster certificate (what every node daemon presents and
accepts, and what the master calls them with), the HMAC key (confd, the
self-diagnosis reports), the remote API certificate and the cluster
domain secret.  Ganeti's own client does most of this over ssh with the
daemons stopped; here the opcode does it all while everything runs
(docs/crypto.rst):

* the certificate and the HMAC key are rolled out in three steps on every
  online node, the master included (:class:`Rollout`): **stage** (the new
  one is trusted beside the old), **switch** (the new one is used, the old
  one still trusted), **forget** (only the new one).  The master's RPC
  client presents the new certificate once every node staged it and trusts
  only the new one once they switched, so no call to a node fails on the
  way.  The daemons using the HMAC key follow its files within
  :data:`ganeti.confd.keys.CHECK_INTERVAL`; the renewal waits a little
  longer than that between its steps.
* the remote API certificate goes to the master candidates (ganeti-rapi
  serves it from the next connection on) and the domain secret to every
  node, as plain uploads.

A node that is offline or does not answer misses the renewal; the job
says which and what the admin does about it (:func:`report_missed`), and
carries on.  Only a failure on the master node itself stops it, after
putting back what it had changed of that secret.

``OP_CLUSTER_RENAME`` (``gnt-cluster rename``) renews the certificate
for the new name the same way, then changes the name in the
configuration (replication brings ``ssconf_cluster_name`` to every node).
The master IP stays: this project does no DNS lookups.
"""

import binascii
import datetime
import os

from twisted.internet import task

from ganeti import crypto
from ganeti import errors
from ganeti import locking
from ganeti import replication
from ganeti.backend import rotation
from ganeti.cmdlib.base import LogicalUnit
from ganeti.confd import keys as confd_keys

__all__ = ["LUClusterRenewCrypto", "LUClusterRename", "Rollout",
           "renew_cluster_certificate", "SETTLE_SECONDS"]

#: Seconds between the steps of a key renewal: every daemon following the
#: key files has looked at them meanwhile.
SETTLE_SECONDS = 2 * confd_keys.CHECK_INTERVAL

CLUSTER_CERTIFICATE = "cluster certificate"
HMAC_KEY = "HMAC key"
RAPI_CERTIFICATE = "RAPI certificate"
DOMAIN_SECRET = "cluster domain secret"


def _reason(result):
    msg = result.fail_msg or "unknown error"
    prefix = "node %s: " % result.node
    return msg[len(prefix):] if msg.startswith(prefix) else msg


class Missed(object):
    """Which node missed which secret, and why."""

    def __init__(self):
        self.nodes = {}

    def add(self, node, what, why):
        self.nodes.setdefault(node, {}).setdefault(what, why)


def _sleep(clock, seconds):
    return task.deferLater(clock, seconds, lambda: None)


class Rollout(object):
    """One secret replaced on the nodes in three steps (see
    :mod:`ganeti.backend.rotation`): the node procedures
    ``<kind>_stage``, ``<kind>_switch`` and ``<kind>_forget``.

    ``new``/``old`` are what ``<kind>_stage`` takes, ``new_digest``/
    ``old_digest`` how the other steps name them.  ``going_back()`` is
    called during a roll-back once the nodes use the old secret again,
    before they stop trusting the new one.
    """

    def __init__(self, lu, kind, what, new, new_digest, old, old_digest,
                 missed, going_back=None):
        self.lu = lu
        self.kind = kind
        self.what = what
        self.new, self.new_digest = new, new_digest
        self.old, self.old_digest = old, old_digest
        self.missed = missed
        self.going_back = going_back
        self.master = lu.cfg.master_node.name
        self.staged = []
        self.switched = []

    async def _call(self, nodes, step, args):
        if not nodes:
            return [], {}
        results = await self.lu.ctx.rpc.call_many(
            nodes, "%s_%s" % (self.kind, step), list(args))
        good = [n for n in nodes if results[n].success]
        bad = {n: _reason(results[n]) for n in nodes
               if not results[n].success}
        return good, bad

    async def stage(self, nodes):
        """Stage on ``nodes``; the master must take it, or nothing is
        changed (OpExecError)."""
        self.staged, bad = await self._call(nodes, "stage", [self.new])
        for name, why in sorted(bad.items()):
            self.lu.log_warning("Node %s could not stage the new %s: %s"
                                % (name, self.what, why))
            self.missed.add(name, self.what, why)
        if self.master not in self.staged:
            await self._call(self.staged, "forget", [self.old_digest])
            raise errors.OpExecError(
                "The master node %s could not stage the new %s (%s); the %s"
                " was not changed" % (self.master, self.what,
                                      bad.get(self.master, "not called"),
                                      self.what))

    async def switch(self):
        """Switch the nodes that staged; on a failure of the master, put
        the old secret back everywhere (OpExecError)."""
        self.switched, bad = await self._call(self.staged, "switch",
                                              [self.new_digest])
        for name, why in sorted(bad.items()):
            self.lu.log_warning("Node %s could not switch to the new %s: %s"
                                % (name, self.what, why))
            self.missed.add(name, self.what, why)
        if self.master not in self.switched:
            await self.roll_back()
            raise errors.OpExecError(
                "The master node %s could not switch to the new %s (%s); the"
                " old %s was put back" % (self.master, self.what,
                                          bad.get(self.master, "not called"),
                                          self.what))

    async def forget(self):
        """The nodes that switched stop trusting the old secret."""
        _, bad = await self._call(self.switched, "forget", [self.new_digest])
        for name, why in sorted(bad.items()):
            self.lu.log_warning(
                "Node %s still trusts the old %s as well: %s (it is dropped"
                " by the next renewal)" % (name, self.what, why))

    async def roll_back(self):
        """The nodes that switched go back to the old secret (staged and
        switched again); every node that staged drops the new one."""
        back, bad = await self._call(self.switched, "stage", [self.old])
        back, bad2 = await self._call(back, "switch", [self.old_digest])
        bad.update(bad2)
        if self.going_back is not None:
            self.going_back()
        _, bad3 = await self._call(self.staged, "forget", [self.old_digest])
        for failures in (bad, bad3):
            for name, why in sorted(failures.items()):
                self.lu.log_warning("Node %s could not go back to the old"
                                    " %s: %s" % (name, self.what, why))
        self.switched = []


def _use_master_certificate(ctx, cert, trusted):
    """The master's node clients present ``cert`` and accept nodes
    presenting any of ``trusted``."""
    ctx.rpc.use_certificate(cert, trusted)
    client = getattr(ctx, "address_rpc", None)
    if isinstance(client, replication.AddressRpc):
        client.cert = cert


def _online_nodes(lu, what, missed):
    """Names of the online nodes (the master first); the offline ones are
    noted as missing ``what``."""
    cfg = lu.cfg
    master = cfg.master_node
    nodes = sorted(cfg.nodes.values(),
                   key=lambda n: (n.uuid != master.uuid, n.name))
    for node in nodes:
        if node.offline:
            if node.name not in missed.nodes:   # said once per job
                lu.log_info("Skipping offline node %s", node.name)
            for item in what:
                missed.add(node.name, item, "offline")
    return [n.name for n in nodes if not n.offline]


async def renew_cluster_certificate(lu, cluster_name, missed):
    """Roll out a new cluster certificate issued for ``cluster_name``;
    returns it."""
    ctx = lu.ctx
    old = replication.cluster_certificate(ctx)
    new = crypto.new_cluster_certificate(cluster_name)
    fingerprint = crypto.format_fingerprint(new.digest())
    nodes = _online_nodes(lu, [CLUSTER_CERTIFICATE], missed)
    rollout = Rollout(lu, "cluster_cert", CLUSTER_CERTIFICATE,
                      new.pem.decode("ascii"), new.digest(),
                      old.pem.decode("ascii"), old.digest(), missed,
                      going_back=lambda: _use_master_certificate(
                          ctx, old, [new]))
    lu.log_info("Staging the new cluster certificate %s (for %s) on %d"
                " node(s)", fingerprint, cluster_name, len(nodes))
    await rollout.stage(nodes)
    # every node that answers accepts both now: the master presents the
    # new one and accepts either from the nodes
    _use_master_certificate(ctx, new, [old])
    lu.log_info("The master presents the new certificate; switching %d"
                " node(s) to it", len(rollout.staged))
    try:
        await rollout.switch()
    except errors.OpExecError:
        _use_master_certificate(ctx, old, [])
        raise
    _use_master_certificate(ctx, new, [])
    _record_candidate_certs(lu, new)
    lu.log_info("Every node reached presents the new certificate; dropping"
                " the old one")
    await rollout.forget()
    lu.log_info("Cluster certificate renewed: %s, valid until %s",
                fingerprint, new.not_valid_after.strftime("%Y-%m-%d"))
    return new


def _record_candidate_certs(lu, cert):
    """``candidate_certs`` (and so ssconf master_candidates_certs) name the
    new certificate for every master candidate."""
    digest = crypto.certificate_digest(cert.certificate, "sha1")
    wanted = {n.uuid: digest for n in lu.cfg.nodes.values()
              if n.master_candidate}
    if wanted != (lu.cfg.cluster.candidate_certs or {}):
        lu.cfg.set_cluster_params(candidate_certs=wanted)


def new_secret():
    """A new HMAC key or domain secret as Ganeti writes one: 40 hex
    digits and a newline."""
    return binascii.hexlify(os.urandom(20)).decode("ascii") + "\n"


async def renew_hmac_key(lu, missed, settle=SETTLE_SECONDS):
    ctx = lu.ctx
    path = ctx.paths.hmac_key_file
    try:
        with open(path, "rb") as f:
            old = f.read().decode("ascii")
    except (OSError, UnicodeDecodeError) as err:
        raise errors.OpExecError("cannot read the cluster HMAC key %s: %s"
                                 % (path, getattr(err, "strerror", err)))
    new = new_secret()
    nodes = _online_nodes(lu, [HMAC_KEY], missed)
    rollout = Rollout(lu, "hmac_key", HMAC_KEY, new,
                      rotation.key_digest(new.encode("ascii")), old,
                      rotation.key_digest(old.encode("ascii")), missed)
    lu.log_info("Staging the new HMAC key on %d node(s)", len(nodes))
    await rollout.stage(nodes)
    # confd, mond and maintd look at the key files at least once a second
    await _sleep(ctx.clock, settle)
    lu.log_info("Switching %d node(s) to the new HMAC key",
                len(rollout.staged))
    await rollout.switch()
    await _sleep(ctx.clock, settle)
    lu.log_info("Dropping the old HMAC key")
    await rollout.forget()
    lu.log_info("HMAC key renewed")


async def _upload(lu, nodes, path, data, what, missed):
    """``upload_file`` to ``nodes`` (names, master first); failures are
    missed; the master's is an OpExecError."""
    master = lu.cfg.master_node.name
    results = await lu.ctx.rpc.call_many(
        nodes, "upload_file",
        [path, replication.encode_data(data.encode("ascii")), 0o400])
    for name in nodes:
        result = results[name]
        if result.success:
            continue
        why = _reason(result)
        if name == master:
            raise errors.OpExecError("The master node could not write the"
                                     " new %s: %s" % (what, why))
        lu.log_warning("Node %s did not get the new %s: %s"
                       % (name, what, why))
        missed.add(name, what, why)


async def renew_rapi_certificate(lu, pem, missed):
    cfg = lu.cfg
    if pem is None:
        cert = crypto.new_cluster_certificate(cfg.cluster.cluster_name)
        pem = cert.pem.decode("ascii")
        lu.log_info("Generated a new RAPI certificate %s",
                    crypto.format_fingerprint(cert.digest()))
    master = cfg.master_node
    for node in sorted(cfg.nodes.values(), key=lambda n: n.name):
        if node.master_candidate and node.offline:
            missed.add(node.name, RAPI_CERTIFICATE, "offline")
    nodes = [master.name] + sorted(
        n.name for n in cfg.nodes.values()
        if n.master_candidate and not n.offline and n.uuid != master.uuid)
    lu.log_info("Copying the RAPI certificate to the master and %d master"
                " candidate(s)", len(nodes) - 1)
    await _upload(lu, nodes, replication.RAPI_CERT_FILE, pem,
                  RAPI_CERTIFICATE, missed)
    lu.log_info("ganeti-rapi serves the new certificate from its next"
                " connection on")


async def renew_domain_secret(lu, secret, missed):
    if secret is None:
        secret = new_secret()
    nodes = _online_nodes(lu, [DOMAIN_SECRET], missed)
    lu.log_info("Copying the cluster domain secret to %d node(s)",
                len(nodes))
    await _upload(lu, nodes, replication.CLUSTER_DOMAIN_SECRET_FILE, secret,
                  DOMAIN_SECRET, missed)


def report_missed(lu, missed):
    """One warning per node that missed something: what, why and what to
    do about it."""
    for name in sorted(missed.nodes):
        parts = missed.nodes[name]
        what = ", ".join("%s (%s)" % (item, why)
                         for item, why in sorted(parts.items()))
        if CLUSTER_CERTIFICATE in parts:
            lu.log_warning(
                "Node %s could not be updated: %s. It holds the old cluster"
                " certificate, so the master cannot reach it any more. To"
                " bring it back: on %s stop ganeti-noded, remove"
                " /var/lib/ganeti/server.pem and start 'ganeti-noded"
                " --bootstrap'; then on the master run 'gnt-node add --readd"
                " --join-fingerprint <the fingerprint it logs> %s'"
                % (name, what, name, name))
        else:
            lu.log_warning(
                "Node %s could not be updated: %s. Once it is online and"
                " reachable, run 'gnt-cluster redist-conf' to give it the"
                " current files" % (name, what))


def _check_pem(pem, field):
    """A certificate with its key, valid now (OpPrereqError naming
    ``field`` otherwise)."""
    try:
        cert = crypto.ClusterCertificate.from_pem(pem.encode("ascii"))
    except (errors.X509CertError, UnicodeEncodeError) as err:
        raise errors.OpPrereqError("%s: %s" % (field, err),
                                   errors.ECODE_INVAL)
    now = datetime.datetime.now(datetime.timezone.utc)
    if cert.not_valid_after < now:
        raise errors.OpPrereqError(
            "%s: the certificate expired on %s" % (field,
                                                   cert.not_valid_after),
            errors.ECODE_INVAL)
    return cert


def _lock_every_node(lu):
    # as Ganeti: every node, exclusively (two renewals never mix)
    lu.needed_locks[locking.LEVEL_NODE] = locking.ALL_SET
    lu.share_locks[locking.LEVEL_NODE] = False


def _check_rollout(lu, cluster_cert):
    """What a roll-out to every node needs: node RPC and (to renew the
    cluster certificate) the master's own certificate."""
    if lu.ctx.rpc is None or lu.ctx.paths is None:
        raise errors.OpPrereqError("this master cannot reach its nodes"
                                   " (no node RPC)", errors.ECODE_STATE)
    if cluster_cert:
        try:
            replication.cluster_certificate(lu.ctx)
        except errors.GenericError as err:
            raise errors.OpPrereqError(
                "the master's cluster certificate: %s" % err,
                errors.ECODE_ENVIRON)


class LUClusterRenewCrypto(LogicalUnit):
    """gnt-cluster renew-crypto: see the module docstring."""
    OP_ID = "OP_CLUSTER_RENEW_CRYPTO"

    def check_arguments(self):
        op = self.op
        if op.renew_ssh_keys:
            raise errors.OpPrereqError(
                "renew_ssh_keys: this cluster manager keeps no SSH keys (its"
                " nodes trust each other by the cluster certificate); there"
                " is nothing to renew", errors.ECODE_INVAL)
        if op.new_rapi_certificate and op.rapi_certificate is not None:
            raise errors.OpPrereqError(
                "new_rapi_certificate, rapi_certificate: give one of them,"
                " not both", errors.ECODE_INVAL)
        if op.new_cluster_domain_secret and \
                op.cluster_domain_secret is not None:
            raise errors.OpPrereqError(
                "new_cluster_domain_secret, cluster_domain_secret: give one"
                " of them, not both", errors.ECODE_INVAL)
        if op.rapi_certificate is not None:
            _check_pem(op.rapi_certificate, "rapi_certificate")
        if op.cluster_domain_secret is not None:
            try:
                op.cluster_domain_secret.encode("ascii")
            except UnicodeEncodeError:
                raise errors.OpPrereqError(
                    "cluster_domain_secret: must be ASCII text",
                    errors.ECODE_INVAL)
            if not op.cluster_domain_secret.strip():
                raise errors.OpPrereqError(
                    "cluster_domain_secret: must not be empty",
                    errors.ECODE_INVAL)
        # nodes present the cluster certificate here: renewing "the node
        # certificates" (what Ganeti's client asks) is renewing it
        self.cluster_cert = bool(op.new_cluster_certificate or
                                 op.node_certificates)
        self.hmac_key = bool(op.new_confd_hmac_key)
        self.rapi = bool(op.new_rapi_certificate or
                         op.rapi_certificate is not None)
        self.cds = bool(op.new_cluster_domain_secret or
                        op.cluster_domain_secret is not None)
        if not (self.cluster_cert or self.hmac_key or self.rapi or
                self.cds):
            raise errors.OpPrereqError(
                "Nothing to renew: ask for at least one of"
                " new_cluster_certificate (or node_certificates),"
                " new_confd_hmac_key, new_rapi_certificate or"
                " rapi_certificate, new_cluster_domain_secret or"
                " cluster_domain_secret", errors.ECODE_INVAL)

    def expand_names(self):
        _lock_every_node(self)

    def check_prereq(self):
        _check_rollout(self, self.cluster_cert)

    async def exec_(self):
        op = self.op
        missed = Missed()
        if op.node_certificates and not op.new_cluster_certificate:
            self.log_info("Nodes present the cluster certificate here:"
                          " renewing node certificates renews it")
        if self.cluster_cert:
            await renew_cluster_certificate(
                self, self.cfg.cluster.cluster_name, missed)
        if self.hmac_key:
            await renew_hmac_key(self, missed)
        if self.rapi:
            await renew_rapi_certificate(self, op.rapi_certificate, missed)
        if self.cds:
            await renew_domain_secret(self, op.cluster_domain_secret,
                                      missed)
        if self.cluster_cert:
            # ssconf master_candidates_certs name the new certificate
            await replication.sync(self)
        report_missed(self, missed)
        return None


class LUClusterRename(LogicalUnit):
    """gnt-cluster rename: a certificate for the new name on every node
    (rolled out as by renew-crypto), then the name in the configuration."""
    OP_ID = "OP_CLUSTER_RENAME"
    REQ_BGL = True

    def check_arguments(self):
        # the opcode's host name check lowered the case
        name = self.op.name
        try:
            crypto._check_cluster_name(name)
        except errors.X509CertError as err:
            raise errors.OpPrereqError(
                "name: %s" % str(err).replace("cluster_name",
                                              "the cluster name"),
                errors.ECODE_INVAL)
        if name == self.cfg.cluster.cluster_name.lower():
            raise errors.OpPrereqError("Neither the name nor the IP address"
                                       " of the cluster has changed",
                                       errors.ECODE_INVAL)

    def expand_names(self):
        _lock_every_node(self)

    def check_prereq(self):
        _check_rollout(self, True)

    async def exec_(self):
        old_name = self.cfg.cluster.cluster_name
        new_name = self.op.name
        missed = Missed()
        self.log_info("Renaming the cluster from %s to %s", old_name,
                      new_name)
        await renew_cluster_certificate(self, new_name, missed)
        self.cfg.set_cluster_params(cluster_name=new_name)
        self.log_info("Cluster name set to %s; distributing it", new_name)
        await replication.sync(self)
        report_missed(self, missed)
        return new_name
