"""Getting the cluster's files onto its nodes (docs/membership.rst).

Three things live here, all on the master's side:

* **Fingerprints and pinned calls.**  A node not yet in the cluster runs
  ``ganeti-noded --bootstrap`` with a one-time self-signed certificate; the
  master calls it by address over TLS pinned to that certificate's SHA-256
  fingerprint (:class:`AddressRpc`), presenting the cluster certificate
  itself.  The same client, pinned to the cluster certificate, reaches a
  node by address before it is in the configuration (or after it left it).

* **Replication** (:class:`Replicator`, a config write listener in
  masterd): after every write of config.data the master sends config.data
  to every online master candidate and the ssconf files to every online
  node.  Writes in one burst are coalesced; each node has one send in
  flight at a time and only the newest snapshot waits behind it, so a node
  never gets an older serial after a newer one.  Failures are logged and
  kept per node (:meth:`Replicator.missed`); such a node gets the newest
  state with the next change or ``gnt-cluster redist-conf``.  A snapshot is
  encoded once for all nodes (the same bytes go to every candidate), at
  most ``max_parallel`` nodes are sent to at once, and a node gets only
  the ssconf values that changed since the ones it took last (none at all
  when the change left ssconf as it was: a change of a node's tags costs
  a call per master candidate, not one per node).

* **Ancillary files** (:func:`ancillary_files`, :func:`upload_files`): what
  ``gnt-cluster redist-conf`` and ``gnt-node add`` ship besides the config:
  the HMAC key, the RAPI certificate and users file (master candidates), the
  VNC password files in use (vm-capable nodes) and the files the admin lists
  in ``<data dir>/redist-extra-files`` (every node).
"""

import base64
import os
import zlib

import attr
from OpenSSL import SSL
from twisted.internet import defer
from twisted.logger import Logger
from twisted.web import client as web_client
from twisted.web.iweb import IPolicyForHTTPS
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator
from zope.interface import implementer

from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import rpc
from ganeti import ssconf

log = Logger()

#: Standard paths (as on a node installed at /)
DATA_DIR = "/var/lib/ganeti"
CONFIG_FILE = DATA_DIR + "/config.data"
HMAC_KEY_FILE = DATA_DIR + "/hmac.key"
RAPI_CERT_FILE = DATA_DIR + "/rapi.pem"
RAPI_USERS_FILE = DATA_DIR + "/rapi/users"
SPICE_CERT_FILE = DATA_DIR + "/spice.pem"
SPICE_CACERT_FILE = DATA_DIR + "/spice-ca.pem"
CLUSTER_DOMAIN_SECRET_FILE = DATA_DIR + "/cluster-domain-secret"
KNOWN_HOSTS_FILE = DATA_DIR + "/known_hosts"
#: The admin's list of extra files to ship, one absolute path a line.
EXTRA_FILES_LIST = DATA_DIR + "/redist-extra-files"
#: Never shipped by redistribution (the join carries the certificate).
NEVER_SHIPPED = frozenset([DATA_DIR + "/server.pem", CONFIG_FILE])

#: Hypervisors whose ``vnc_password_file`` parameter names a file in use.
VNC_HYPERVISORS = (constants.HT_KVM, constants.HT_XEN_HVM)
VNC_PASSWORD_FILE = "vnc_password_file"

# Who gets an ancillary file
TO_ALL = "all"
TO_CANDIDATES = "candidates"
TO_VM_CAPABLE = "vm_capable"


# --- calls by address, pinned to a certificate -------------------------------

@attr.s(frozen=True)
class PinnedResult(rpc.RpcResult):
    """An RpcResult that also tells which certificate the node presented
    (SHA-256 digest), when the TLS handshake got that far."""
    seen_digest = attr.ib(default=None)


@implementer(IOpenSSLClientConnectionCreator)
class _PinnedCreator(object):
    def __init__(self, context, digest, seen):
        self._context = context
        self._digest = digest
        self._seen = seen

    def clientConnectionForTLS(self, tlsProtocol):
        def verify(conn, x509cert, errno, depth, ok):
            if depth != 0:
                return True
            digest = crypto.certificate_digest(x509cert)
            self._seen.append(digest)
            return digest == self._digest
        conn = SSL.Connection(self._context, None)
        conn.set_app_data(tlsProtocol)
        conn.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT,
                        verify)
        return conn


@implementer(IPolicyForHTTPS)
class _PinnedPolicy(object):
    """Presents the cluster certificate; accepts only a server whose
    certificate has ``digest`` (SHA-256)."""

    def __init__(self, cert, digest, seen):
        from twisted.internet import ssl as tssl
        private = cert.private_certificate()
        options = tssl.CertificateOptions(
            privateKey=private.privateKey.original,
            certificate=private.original,
            raiseMinimumTo=tssl.TLSVersion.TLSv1_2)
        self._creator = _PinnedCreator(options.getContext(), digest, seen)

    def creatorForNetloc(self, hostname, port):
        return self._creator


class _OneShotClient(rpc.RpcClient):
    """An RpcClient for one address and one pinned digest, no pooling."""

    def __init__(self, reactor, cert, address, port, digest, clock, seen):
        rpc.RpcClient.__init__(self, reactor, None,
                               lambda _node: rpc.NodeAddress(address, port),
                               clock=clock, cert=cert)
        self._pool = web_client.HTTPConnectionPool(reactor, persistent=False)
        self._agent = web_client.Agent(
            reactor, contextFactory=_PinnedPolicy(cert, digest, seen),
            connectTimeout=10, pool=self._pool)


class AddressRpc(object):
    """Calls node daemons by address, pinned to a certificate digest.

    ``call(address, digest, procedure, args)`` fires a :class:`PinnedResult`
    (never errbacks).  A node presenting another certificate gets a result
    saying which one, so callers can explain (a node still in bootstrap
    mode, a node of another cluster, a wrong fingerprint).
    """

    def __init__(self, reactor, cert, port=constants.DEFAULT_NODED_PORT,
                 clock=None):
        self.reactor = reactor
        self.cert = cert
        self.port = port
        self.clock = clock or reactor

    @defer.inlineCallbacks
    def call(self, address, digest, procedure, args=(), timeout=None):
        seen = []
        client = _OneShotClient(self.reactor, self.cert, address, self.port,
                                digest, self.clock, seen)
        try:
            result = yield client.call(address, procedure, args, timeout)
        finally:
            yield client.close()
        seen_digest = seen[-1] if seen else None
        fail_msg = result.fail_msg
        if not result.success and seen_digest and seen_digest != digest:
            fail_msg = ("node at %s presents the certificate %s, not the"
                        " expected %s" % (address,
                                          crypto.format_fingerprint(seen_digest),
                                          crypto.format_fingerprint(digest)))
        return PinnedResult(node=address, procedure=procedure,
                            success=result.success, payload=result.payload,
                            fail_msg=fail_msg, seen_digest=seen_digest)


def address_rpc(ctx):
    """The master context's AddressRpc (tests put a fake in
    ``ctx.address_rpc``)."""
    client = getattr(ctx, "address_rpc", None)
    if client is None:
        cert = cluster_certificate(ctx)
        client = AddressRpc(ctx.clock, cert)
        ctx.address_rpc = client
    return client


def cluster_certificate(ctx):
    """The cluster certificate the master uses (key included)."""
    cert = getattr(ctx.rpc, "cert", None)
    if isinstance(cert, crypto.ClusterCertificate):
        return cert
    if ctx.paths is None:
        raise errors.OpExecError("the master has no cluster certificate")
    return crypto.load_cluster_certificate(crypto.server_pem_path(ctx.paths))


# --- file data ---------------------------------------------------------------

def encode_data(data):
    """File content for upload_file: ``["zlib+base64", text]``.

    The fastest compression level: the master compresses config.data on
    its reactor after every change; level 1 takes 40% of the default's
    time on a 2,000-instance config.data, for 15% more bytes."""
    return ["zlib+base64", base64.b64encode(zlib.compress(data, 1)).decode(
        "ascii")]


def decode_data(data):
    if isinstance(data, str):
        return data.encode("utf-8")
    encoding, text = data
    if encoding == "zlib+base64":
        return zlib.decompress(base64.b64decode(text))
    if encoding == "base64":
        return base64.b64decode(text)
    return text.encode("utf-8")


def local_path(paths, standard):
    """Where the master keeps the file with this standard path."""
    return os.path.join(paths.root, standard.lstrip("/"))


def standard_path(paths, path):
    """The standard path of ``path``, which may be given inside the
    master's root (virtual cluster)."""
    path = os.path.normpath(path)
    root = paths.root.rstrip("/")
    if root and path.startswith(root + "/"):
        return path[len(root):]
    return path


# --- replication -------------------------------------------------------------

@attr.s
class _Snapshot(object):
    serial = attr.ib()
    # upload_file's arguments for config.data (rpc.PreparedArgs, shared by
    # every candidate), or None (not a candidate)
    config = attr.ib()
    ssconf = attr.ib()    # write_ssconf_files' arguments, shared by all
    force = attr.ib(default=False)   # send even what the node has


@attr.s
class NodeReplication(object):
    """What one node got: the serial last delivered, the last error."""
    name = attr.ib()
    delivered = attr.ib(default=None)   # serial of the last full delivery
    failed = attr.ib(default=None)      # serial of the last failed one
    error = attr.ib(default=None)
    offline = attr.ib(default=False)

    @property
    def missed(self):
        return self.error is not None


class _NodeWorker(object):
    """One node's sends: one in flight, the newest snapshot waiting."""

    def __init__(self, replicator, uuid):
        self.replicator = replicator
        self.uuid = uuid
        self.busy = False
        self.pending = None
        self.sent_serial = None
        # the ssconf arguments (rpc.PreparedArgs) the node last took
        self.ssconf_delivered = None

    def submit(self, snapshot):
        if self.busy:
            if self.pending is None or snapshot.serial >= self.pending.serial:
                self.pending = snapshot
            return
        self._send(snapshot)

    def _send(self, snapshot):
        if self.sent_serial is not None and snapshot.serial < self.sent_serial:
            # never older after newer (cannot happen: serials only grow)
            log.warn("replication: not sending serial {old} after {new}",
                     old=snapshot.serial, new=self.sent_serial)
            self.replicator._worker_idle()
            return
        self.busy = True
        self.sent_serial = snapshot.serial
        d = self.replicator._limit.run(
            lambda: defer.Deferred.fromCoroutine(self._push(snapshot)))
        d.addErrback(lambda f: log.failure("replication to {uuid}", f,
                                           uuid=self.uuid))
        d.addBoth(self._done)

    async def _push(self, snapshot):
        rep = self.replicator
        node = rep.cfg.nodes.get(self.uuid)
        if node is None:
            return
        status = rep.status.setdefault(self.uuid, NodeReplication(node.name))
        status.name = node.name
        calls = []
        if snapshot.config is not None:
            calls.append(("upload_file", snapshot.config))
        if snapshot.force or snapshot.ssconf is not self.ssconf_delivered:
            changes = rep._ssconf_changes(self.ssconf_delivered, snapshot)
            if changes is None:
                self.ssconf_delivered = snapshot.ssconf
            else:
                calls.append(("write_ssconf_files", changes))
        for procedure, args in calls:
            result = await rep.rpc.call(node.name, procedure, args)
            if not result.success:
                if status.error is None:
                    log.warn("Replication of configuration serial {serial}"
                             " to node {node} failed: {msg}; the node gets the"
                             " newest configuration with the next change or"
                             " gnt-cluster redist-conf",
                             serial=snapshot.serial, node=node.name,
                             msg=result.fail_msg)
                status.failed = snapshot.serial
                status.error = result.fail_msg
                return
            if procedure == "write_ssconf_files":
                self.ssconf_delivered = snapshot.ssconf
        if status.error is not None:
            log.info("Node {node} is up to date again (configuration serial"
                     " {serial})", node=node.name, serial=snapshot.serial)
        status.delivered = snapshot.serial
        status.error = None
        status.failed = None

    def _done(self, _):
        self.busy = False
        if self.pending is not None:
            snapshot, self.pending = self.pending, None
            self._send(snapshot)
        else:
            self.replicator._worker_idle()


class Replicator(object):
    """Ships config.data and ssconf after every configuration write.

    Register :meth:`config_written` as a write listener of the config store.
    Writes are coalesced: the snapshot is taken ``delay`` seconds after the
    first write of a burst (0: at the next turn of the reactor), so a
    job's several writes usually go out once.  :meth:`flush` sends at once
    and fires when every node has its answer.  At most ``max_parallel``
    nodes (default: the RPC client's bound) are sent to at a time.
    """

    def __init__(self, cfg, rpc_client, clock, delay=0.0, max_parallel=None):
        self.cfg = cfg
        self.rpc = rpc_client
        self.clock = clock
        self.delay = delay
        if max_parallel is None:
            max_parallel = getattr(rpc_client, "max_parallel", None) or \
                rpc.DEFAULT_MAX_PARALLEL
        self._limit = defer.DeferredSemaphore(max_parallel)
        self.status = {}      # node uuid -> NodeReplication
        self._workers = {}
        self._timer = None
        self._idle = []
        self.snapshots = 0
        # the last ssconf values and their encoding, reused while the
        # values stay the same (the nodes that have them are skipped)
        self._ssconf = (None, None)
        # id(values a node has) -> (those, the newest, the changed ones)
        self._ssconf_deltas = {}

    def config_written(self, store=None):
        if self.rpc is None:
            return
        if self._timer is None or not self._timer.active():
            self._timer = self.clock.callLater(self.delay, self._snapshot)

    def flush(self, force=False):
        """Send the current state now (``force``: also to nodes that have
        it already); Deferred firing when every node has answered."""
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if self.rpc is not None:
            self._snapshot(force)
        return self._wait_idle()

    def _snapshot(self, force=False):
        self._timer = None
        cfg = self.cfg
        self.snapshots += 1
        serial = cfg.serial_no
        config = None
        # encoded once here, sent as they are to every node
        values = ssconf.current_values(cfg)
        if values == self._ssconf[0]:
            prepared = self._ssconf[1]
        else:
            prepared = rpc.PreparedArgs([values])
            self._ssconf = (values, prepared)
            self._ssconf_deltas = {}
        for uuid in list(self._workers):
            if uuid not in cfg.nodes:
                del self._workers[uuid]
                self.status.pop(uuid, None)
        # candidates first: with more nodes than max_parallel, the copies
        # of config.data (what confd answers from, what a master failover
        # starts from) do not wait behind ssconf files
        for node in sorted(cfg.nodes.values(),
                           key=lambda n: (not n.master_candidate, n.name)):
            if node.uuid == cfg.cluster.master_node:
                continue
            status = self.status.setdefault(node.uuid,
                                            NodeReplication(node.name))
            status.name = node.name
            status.offline = bool(node.offline)
            if node.offline:
                continue
            if node.master_candidate and config is None:
                config = rpc.PreparedArgs([
                    CONFIG_FILE, encode_data(cfg.written_bytes()), 0o600])
            worker = self._workers.get(node.uuid)
            if worker is None:
                worker = self._workers[node.uuid] = _NodeWorker(self,
                                                                node.uuid)
            if not force and not worker.busy and status.error is None:
                if status.delivered == serial:
                    continue
                if not node.master_candidate and \
                        worker.ssconf_delivered is prepared:
                    # nothing of this change concerns the node
                    status.delivered = serial
                    continue
            worker.submit(_Snapshot(serial, config if node.master_candidate
                                    else None, prepared, force))

    def _ssconf_changes(self, delivered, snapshot):
        """The write_ssconf_files arguments that bring a node holding
        ``delivered`` (the arguments it took last, None: unknown) to the
        snapshot's values: everything when forced or unknown, else the
        values that differ (the node leaves its other files alone), made
        once for every node holding the same; None when nothing differs."""
        if snapshot.force or delivered is None:
            return snapshot.ssconf
        cached = self._ssconf_deltas.get(id(delivered))
        if cached is not None and cached[0] is delivered and \
                cached[1] is snapshot.ssconf:
            return cached[2]
        old, new = delivered[0], snapshot.ssconf[0]
        changed = {key: value for key, value in new.items()
                   if old.get(key) != value}
        changes = rpc.PreparedArgs([changed]) if changed else None
        self._ssconf_deltas[id(delivered)] = (delivered, snapshot.ssconf,
                                              changes)
        return changes

    def busy(self):
        return any(w.busy for w in self._workers.values()) or (
            self._timer is not None and self._timer.active())

    def _wait_idle(self):
        d = defer.Deferred()
        self._idle.append(d)
        self._worker_idle()
        return d

    def _worker_idle(self):
        if any(w.busy for w in self._workers.values()):
            return
        waiting, self._idle = self._idle, []
        for d in waiting:
            d.callback(None)

    def missed(self):
        """``{node name: (last delivered serial, error)}`` of the online
        nodes whose last delivery failed."""
        return {s.name: (s.delivered, s.error) for s in self.status.values()
                if s.missed and not s.offline}


async def sync(lu, force=False):
    """Wait until the configuration reached every node (as far as it can);
    each node that missed it is a warning in the job.  Returns
    :meth:`Replicator.missed`."""
    replicator = getattr(lu.ctx, "replicator", None)
    if replicator is None:
        if lu.ctx.rpc is None:
            return {}
        replicator = Replicator(lu.cfg, lu.ctx.rpc, lu.ctx.clock)
        lu.ctx.replicator = replicator
    await replicator.flush(force)
    missed = replicator.missed()
    for name in sorted(missed):
        serial, error = missed[name]
        lu.log_warning("Node %s did not get configuration serial %s: %s"
                       % (name, lu.cfg.serial_no, error))
    return missed


# --- ancillary files ---------------------------------------------------------

def read_extra_files_list(paths):
    """The admin's ``redist-extra-files`` (standard paths); ParameterError
    naming the line for a bad entry."""
    try:
        with open(local_path(paths, EXTRA_FILES_LIST)) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    result = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not line.startswith("/") or os.path.normpath(line) != line:
            raise errors.ParameterError(
                EXTRA_FILES_LIST, "%s line %d: '%s' is not an absolute,"
                " normalised path" % (EXTRA_FILES_LIST, number, line))
        path = standard_path(paths, line)
        if path in NEVER_SHIPPED:
            raise errors.ParameterError(
                EXTRA_FILES_LIST, "%s line %d: %s is never redistributed"
                % (EXTRA_FILES_LIST, number, path))
        if path not in result:
            result.append(path)
    return result


def vnc_password_files(cfg, paths):
    """Standard paths of the VNC password files in use: the cluster's
    ``vnc_password_file`` of each enabled VNC hypervisor and the instances'
    own."""
    found = []
    cluster = cfg.cluster
    for hv in VNC_HYPERVISORS:
        if hv not in cluster.enabled_hypervisors:
            continue
        value = (cluster.hvparams or {}).get(hv, {}).get(VNC_PASSWORD_FILE)
        if value:
            found.append(value)
    for inst in cfg.instances.values():
        if inst.hypervisor in VNC_HYPERVISORS:
            value = (inst.hvparams or {}).get(VNC_PASSWORD_FILE)
            if value:
                found.append(value)
    result = []
    for value in found:
        path = standard_path(paths, value)
        if path.startswith("/") and path not in result:
            result.append(path)
    return result


def ancillary_files(cfg, paths):
    """``[(standard path, who gets it)]`` of what redistribution ships
    besides config.data and ssconf."""
    files = [(HMAC_KEY_FILE, TO_ALL), (CLUSTER_DOMAIN_SECRET_FILE, TO_ALL),
             (KNOWN_HOSTS_FILE, TO_ALL), (SPICE_CERT_FILE, TO_ALL),
             (SPICE_CACERT_FILE, TO_ALL),
             (RAPI_CERT_FILE, TO_CANDIDATES), (RAPI_USERS_FILE, TO_CANDIDATES)]
    for path in vnc_password_files(cfg, paths):
        files.append((path, TO_VM_CAPABLE))
    if os.path.exists(local_path(paths, EXTRA_FILES_LIST)):
        files.append((EXTRA_FILES_LIST, TO_ALL))
    for path in read_extra_files_list(paths):
        if path not in [f for f, _ in files]:
            files.append((path, TO_ALL))
    return files


def node_wants(node, who):
    """Whether ``node`` gets the files for ``who`` (TO_ALL, ...)."""
    if who == TO_CANDIDATES:
        return node.master_candidate
    if who == TO_VM_CAPABLE:
        return node.vm_capable
    return True


async def upload_files(lu, node_uuids=None):
    """Ship the ancillary files to the online nodes (all but the master,
    or ``node_uuids``); a file the master lacks is skipped (optional files)
    or a warning (ones the admin asked for).  Returns the list of
    ``(node name, path, error)`` failures, each also a job warning."""
    cfg = lu.cfg
    paths = lu.ctx.paths
    nodes = [n for n in cfg.nodes.values()
             if n.uuid != cfg.cluster.master_node and not n.offline and
             (node_uuids is None or n.uuid in node_uuids)]
    if not nodes:
        return []
    wanted_by_admin = set(read_extra_files_list(paths)) | set(
        vnc_password_files(cfg, paths))
    failures = []
    for path, who in ancillary_files(cfg, paths):
        source = local_path(paths, path)
        try:
            with open(source, "rb") as f:
                data = f.read()
            mode = os.stat(source).st_mode & 0o7777
        except FileNotFoundError:
            if path in wanted_by_admin:
                lu.log_warning("%s does not exist on the master; not"
                               " distributed" % path)
            continue
        except OSError as err:
            lu.log_warning("Cannot read %s: %s" % (source, err.strerror))
            continue
        targets = [n for n in nodes if node_wants(n, who)]
        if not targets:
            continue
        results = await lu.ctx.rpc.call_many(
            [n.name for n in targets], "upload_file",
            [path, encode_data(data), mode])
        for name in sorted(results):
            result = results[name]
            if not result.success:
                msg = result.fail_msg or "unknown error"
                if msg.startswith("node %s: " % name):
                    msg = msg[len("node %s: " % name):]
                lu.log_warning("Copy of file %s to node %s failed: %s"
                               % (path, name, msg))
                failures.append((name, path, msg))
    return failures


__all__ = ["AddressRpc",
           "PinnedResult", "Replicator", "NodeReplication", "sync",
           "ancillary_files", "upload_files", "vnc_password_files",
           "read_extra_files_list", "encode_data", "decode_data"]
