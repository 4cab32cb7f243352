"""Procedures of membership: the cluster files the master uploads, leaving
the cluster, and what a node not yet joined serves (``--bootstrap``).

Writing and removing the cluster's files is ordered file work
(:meth:`ProcedureTable.run_ordered`): it runs in the daemon's thread pool,
one call at a time and in arrival order, so that an older upload never
lands after a newer one.  Checks that need no file system run on the
reactor first."""

import os

from twisted.logger import Logger

from ganeti import constants
from ganeti import crypto
from ganeti import errors
from ganeti import ht
from ganeti.backend import files
from ganeti.backend import rotation
from ganeti.utils import io
from ganeti.server.noded.procedure import Arg, procedure
from ganeti.server.noded.procedure import ProcedureTable

log = Logger()


DATA_DIR = "/var/lib/ganeti"
#: The admin's list of extra files (gnt-cluster redist-conf), also shipped.
REDIST_EXTRA_LIST = DATA_DIR + "/redist-extra-files"


def _resolve_existing(path):
    """realpath of the longest existing prefix of ``path``, plus the rest."""
    rest = []
    existing = path
    while not os.path.lexists(existing):
        existing, tail = os.path.split(existing)
        rest.insert(0, tail)
    return os.path.join(os.path.realpath(existing), *rest)


class MembershipProcedures(object):
    """Cluster files on this node, and leaving the cluster."""

    @procedure(Arg("path", ht.NESTR), Arg("data", ht.ANY),
               Arg("mode", ht.NONNEG_INT, 0o600), Arg("uid", ht.ANY, None),
               Arg("gid", ht.ANY, None),
               Arg("atime", ht.maybe(ht.NUMBER), None),
               Arg("mtime", ht.maybe(ht.NUMBER), None))
    async def upload_file(self, path, data, mode, uid, gid, atime, mtime):
        """Write an allow-listed file (standard path) under the node root,
        or an admin-listed extra file (below :attr:`extra_file_dirs`)."""
        if path not in files.ALLOWED_UPLOADS and \
                not str(path).startswith(DATA_DIR + "/ssconf_"):
            self._extra_file_parent(path)
            _check_mode(mode)
            await self.run_ordered(self._upload_extra_file, path, data, mode)
            log.info("Wrote extra file {path}", path=path)
            return True
        files.check_upload(path, mode, atime, mtime)
        await self.run_ordered(files.upload_file, self.paths.root, path,
                               data, mode, uid, gid, atime, mtime)
        return True

    @procedure(Arg("values", ht.DICT), blocking=True, ordered=True)
    def write_ssconf_files(self, values):
        """Write ``ssconf_<key>`` files."""
        files.write_ssconf_files(self.paths, values)
        if self.on_ssconf_written is not None:
            # the node's role may have changed (its daemons follow)
            self.reactor.callFromThread(self.on_ssconf_written)
        return True

    #: Called (from any thread) after ssconf files were written.
    on_ssconf_written = None

    #: Standard directories an admin-listed extra file may be written to
    #: (``gnt-cluster redist-conf``); ganeti-noded --extra-file-dir adds more.
    extra_file_dirs = ("/etc/ganeti", "/etc/xen")

    #: Called (by the daemon) once this node has left the cluster.
    on_leave = None

    def _extra_file_parent(self, path):
        """Which of :attr:`extra_file_dirs` an admin-listed extra file goes
        below (None: the redist-extra-files list itself), or
        ParameterError; needs no file system."""
        if not isinstance(path, str) or not path.startswith("/") or \
                os.path.normpath(path) != path:
            raise errors.ParameterError(
                "path", "path must be an absolute, normalised file path, not"
                " %r" % (path,))
        if path == REDIST_EXTRA_LIST:
            return None
        if path.startswith(DATA_DIR + "/") or path == DATA_DIR:
            raise errors.ParameterError(
                "path", "path %s is in the node's data directory; only the"
                " cluster files the master distributes go there" % path)
        dirs = [d.rstrip("/") for d in self.extra_file_dirs if d]
        parent = next((d for d in dirs if path.startswith(d + "/")), None)
        if parent is None:
            raise errors.ParameterError(
                "path", "path %s is not a file the master may upload: not"
                " a cluster file (%s, /var/lib/ganeti/ssconf_*) and not below"
                " a directory this node accepts extra files in (%s;"
                " ganeti-noded --extra-file-dir)"
                % (path, ", ".join(sorted(files.ALLOWED_UPLOADS)),
                   ", ".join(dirs) or "none"))
        return parent

    def _extra_file_target(self, path):
        """Where an admin-listed extra file goes under the root, or
        ParameterError: only below :attr:`extra_file_dirs`, never into the
        node's data directory (its certificate, config, keys)."""
        parent = self._extra_file_parent(path)
        target = os.path.join(self.paths.root, path.lstrip("/"))
        if parent is None:
            return target
        allowed = _resolve_existing(os.path.join(self.paths.root,
                                                 parent.lstrip("/")))
        # No symlink may lead out of the allowed directory: resolve what
        # exists of the target's directory (what does not exist yet will be
        # created as plain directories) and compare with the allowed one.
        real = _resolve_existing(os.path.dirname(target))
        if not (real + "/").startswith(allowed + "/"):
            raise errors.ParameterError(
                "path", "path %s leads outside %s (symbolic link)"
                % (path, parent))
        return target

    def _upload_extra_file(self, path, data, mode):
        """The file work of an extra file's upload (ordered work)."""
        target = self._extra_file_target(path)
        content = files.decode_data(data)
        _check_mode(mode)
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        self._extra_file_target(path)  # again, now that the dirs exist
        io.atomic_write(target, content, mode=mode)
        return target

    @procedure()
    async def node_leave(self):
        """Leave the cluster: remove the cluster's files (certificate,
        keys, config.data, ssconf, RAPI files); the daemon then stops, or
        goes back to bootstrap mode if it was started with --bootstrap."""
        removed = await self.run_ordered(remove_cluster_files, self.paths)
        log.info("Left the cluster; removed {count} files",
                 count=len(removed))
        if self.on_leave is not None:
            # after the answer has gone out
            self.reactor.callLater(0.5, self.on_leave)
        return removed

    @procedure(blocking=True, ordered=True)
    def node_demote_from_mc(self):
        """No longer a master candidate: config.data goes away (ssconf
        stays), so nothing on this node can serve a stale configuration."""
        removed = []
        for name in ("config.data", "config.data.bak"):
            path = os.path.join(self.paths.data_dir, name)
            if os.path.exists(path):
                os.unlink(path)
                removed.append(path)
        return removed


def _check_mode(mode):
    if isinstance(mode, bool) or not 0 <= mode <= 0o7777:
        raise errors.ParameterError("mode", "mode must be a permission"
                                    " number, not %r" % (mode,))


def cluster_file_paths(paths):
    """Every file that makes a node a member of its cluster."""
    result = [os.path.join(paths.root, p.lstrip("/"))
              for p in sorted(files.ALLOWED_UPLOADS)]
    result += [os.path.join(paths.data_dir, name) for name in
               ("server.pem", "config.data.bak", "redist-extra-files")]
    # what a renewal of the certificate or the HMAC key keeps beside them
    for path in (crypto.server_pem_path(paths), paths.hmac_key_file):
        result += [path + rotation.STAGED, path + rotation.PREVIOUS]
    try:
        names = sorted(os.listdir(paths.data_dir))
    except OSError:
        names = []
    result += [os.path.join(paths.data_dir, n) for n in names
               if n.startswith("ssconf_")]
    return result


def remove_cluster_files(paths):
    removed = []
    for path in cluster_file_paths(paths):
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


class BootstrapProcedures(ProcedureTable):
    """What a node daemon started with ``--bootstrap`` serves before it
    holds the cluster certificate: ``version`` and ``join``.

    ``peer_digest`` is the SHA-256 digest of the certificate the caller
    presented in the TLS handshake; ``joined(cert)`` is called once the
    cluster's files are written (the daemon then serves with the cluster
    certificate only).  ``run_blocking`` and ``ordered_lock`` are the node
    procedures' (one made per connection must keep their order: two joins
    never write at once).
    """

    def __init__(self, paths, peer_digest, joined, run_blocking,
                 ordered_lock):
        self.paths = paths
        self.peer_digest = peer_digest
        self._joined = joined
        ProcedureTable.__init__(self, run_blocking, ordered_lock)

    @procedure()
    def version(self):
        return constants.PROTOCOL_VERSION

    @procedure(Arg("cluster_pem", ht.NESTR), Arg("hmac_key", ht.NESTR),
               Arg("cluster_name", ht.NESTR), Arg("node_name", ht.NESTR),
               Arg("ssconf", ht.DICT, {}), Arg("config", ht.ANY, None))
    async def join(self, cluster_pem, hmac_key, cluster_name, node_name,
                   ssconf, config):
        """Become a member: write the cluster certificate (key included),
        the HMAC key, ssconf and (for a master candidate) config.data.

        The certificate must be the one the caller proved it holds in the
        TLS handshake and must be issued for ``cluster_name``.
        """
        try:
            cert = crypto.ClusterCertificate.from_pem(
                cluster_pem.encode("ascii"))
            cert.check_cluster_name(cluster_name)
        except (errors.X509CertError, UnicodeEncodeError) as err:
            raise errors.ParameterError("cluster_pem", "cluster_pem: %s"
                                        % err)
        if cert.digest() != self.peer_digest:
            raise errors.ParameterError(
                "cluster_pem", "cluster_pem: the certificate is not the one"
                " the caller presented; refusing to join")
        try:
            hmac_data = hmac_key.encode("ascii")
        except UnicodeEncodeError:
            raise errors.ParameterError("hmac_key", "hmac_key must be ASCII"
                                        " text")
        await self.run_ordered(_write_join_files, self.paths, cert,
                               hmac_data, ssconf, config)
        log.info("Joined cluster {cluster} as {node}", cluster=cluster_name,
                 node=node_name)
        self._joined(cert)
        return True


def _write_join_files(paths, cert, hmac_data, ssconf, config):
    """join's file work (ordered work: a second join finds the first's
    certificate)."""
    content = None
    if config is not None:
        content = files.decode_data(config, "config")
    pem_path = crypto.server_pem_path(paths)
    if os.path.exists(pem_path):
        raise errors.GenericError("this node already holds a cluster"
                                  " certificate (%s)" % pem_path)
    paths.ensure_dirs()
    files.write_ssconf_files(paths, ssconf)
    io.atomic_write(paths.hmac_key_file, hmac_data, mode=0o400)
    if content is not None:
        io.atomic_write(paths.config_file, content, mode=0o600)
    # last: the certificate decides whether this node is a member
    io.atomic_write(pem_path, cert.key_pem + cert.cert_pem, mode=0o400)
