"""Procedures of the cluster merger (``cluster-merge``, docs/merger.rst).

A cluster merged into another one is reached only through its node
daemons, with its own certificate (the admin hands the merger a copy).
Four procedures serve the merger:

* ``merge_info``: what the merger checks of a node before anything
  changes (versions, cluster name, whether a master daemon runs, an old
  merge backup) and, from a master candidate, its ``config.data`` and
  the job queue's unfinished jobs.
* ``merge_switch_cluster``: the node leaves its cluster for another one.
  Its cluster files (certificate, HMAC key, ssconf, config.data, the
  ancillary files, the job queue directory, the hold of the master role)
  move into a backup directory
  and the new cluster's certificate, HMAC key, ssconf and (for a master
  candidate) config.data are written.  Then the node daemon restarts in
  place (same PID: it executes itself again) to serve the new
  certificate; the daemons it manages keep running, except the monitoring
  and configuration daemons, which are restarted to take the new HMAC key.
* ``merge_revert_switch``: back to the files in the backup (a merge that
  failed), again with a restart in place.
* ``merge_forget_backup``: the merge is done; the backup (which holds the
  old cluster's private key) goes.

The file work is ordered work (:meth:`ProcedureTable.run_ordered`), so it
never interleaves with an upload of the cluster's files.
"""

import base64
import json
import os
import shutil
import time
import zlib

from twisted.logger import Logger

from ganeti import constants
from ganeti import crypto
from ganeti import daemon_util
from ganeti import errors
from ganeti import ht
from ganeti.backend import files
from ganeti.server.noded.daemons import HOLD_FILE
from ganeti.server.noded.membership import cluster_file_paths
from ganeti.server.noded import restart
from ganeti.server.noded.procedure import Arg, procedure
from ganeti.utils import io

log = Logger()

#: below the data directory: the files of the cluster this node left
BACKUP_DIR = "cluster-merge.backup"
MANIFEST = "manifest.json"
#: seconds between the answer to a switch and the restart in place
RESTART_DELAY = 0.5
#: the daemons restarted with a switch: they hold the HMAC key
RESTARTED_DAEMONS = (daemon_util.WATCHER, daemon_util.CONFD,
                     daemon_util.MOND)


def backup_path(paths):
    return os.path.join(paths.data_dir, BACKUP_DIR)


def _encode(data):
    return ["zlib+base64",
            base64.b64encode(zlib.compress(data, 1)).decode("ascii")]


def _ssconf_cluster_name(paths):
    return (files.read_ssconf_value(paths, "cluster_name", "") or "").strip()


def unfinished_jobs(queue_dir):
    """The ids of the jobs in ``queue_dir`` that are not finished (as
    their files say), sorted; unreadable job files count as unfinished
    (the merge cannot know what they were doing)."""
    from ganeti.jqueue.model import QueuedJob
    found = []
    try:
        names = os.listdir(queue_dir)
    except FileNotFoundError:
        return found
    for name in names:
        if not name.startswith("job-") or not name[4:].isdigit():
            continue
        try:
            with open(os.path.join(queue_dir, name), "rb") as f:
                job = QueuedJob.from_dict(json.loads(f.read()))
        except FileNotFoundError:
            continue          # archived meanwhile
        except Exception:
            found.append(int(name[4:]))
            continue
        if not job.finalized:
            found.append(job.id)
    return sorted(found)


def node_merge_info(paths, with_config):
    """``merge_info``'s answer (file work)."""
    info = {
        "protocol_version": constants.PROTOCOL_VERSION,
        "release_version": constants.RELEASE_VERSION,
        "config_version": constants.CONFIG_VERSION,
        "cluster_name": _ssconf_cluster_name(paths),
        "master_node": (files.read_ssconf_value(paths, "master_node", "")
                        or "").strip(),
        "masterd_running": daemon_util.running_pid(
            paths, daemon_util.MASTERD) is not None,
        "backup": os.path.isdir(backup_path(paths)),
        "config": None,
        "unfinished_jobs": [],
    }
    if with_config:
        try:
            with open(paths.config_file, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise errors.OpPrereqError(
                "this node has no config.data (%s): it is not a master"
                " candidate; ask the master" % paths.config_file,
                errors.ECODE_STATE)
        info["config"] = _encode(data)
        info["unfinished_jobs"] = unfinished_jobs(paths.queue_dir)
    return info


def _relative(paths, path):
    return os.path.relpath(path, paths.root)


def _current_files(paths):
    """The cluster's files present on this node (absolute paths), the job
    queue directory and the hold of the master role included (both
    belong to the cluster the node is in)."""
    found = [p for p in cluster_file_paths(paths) if os.path.lexists(p)]
    if os.path.isdir(paths.queue_dir):
        found.append(paths.queue_dir)
    hold = os.path.join(paths.run_dir, HOLD_FILE)
    if os.path.lexists(hold):
        found.append(hold)
    return found


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def switch_files(paths, cert, hmac_data, ssconf, config, from_cluster,
                 to_cluster, now=time.time):
    """The file work of ``merge_switch_cluster``: the old cluster's files
    into the backup, the new cluster's in their place.  Anything failing
    half-way puts the old files back before the error goes up."""
    backup = backup_path(paths)
    if os.path.lexists(backup):
        raise errors.OpPrereqError(
            "a cluster merge backup exists already (%s): an earlier merge"
            " did not end; revert it (merge_revert_switch) or remove it"
            " first" % backup, errors.ECODE_STATE)
    content = None
    if config is not None:
        content = files.decode_data(config, "config")
    moving = _current_files(paths)
    os.makedirs(backup, mode=0o700)
    manifest = {"from_cluster": from_cluster, "to_cluster": to_cluster,
                "time": now(),
                "files": [_relative(paths, p) for p in moving]}
    io.atomic_write(os.path.join(backup, MANIFEST),
                    json.dumps(manifest, sort_keys=True).encode("utf-8"))
    moved = []
    written = []
    try:
        for path in moving:
            target = os.path.join(backup, _relative(paths, path))
            os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
            shutil.move(path, target)
            moved.append(path)
        paths.ensure_dirs()
        written += files.write_ssconf_files(paths, ssconf)
        io.atomic_write(paths.hmac_key_file, hmac_data, mode=0o400)
        written.append(paths.hmac_key_file)
        if content is not None:
            io.atomic_write(paths.config_file, content, mode=0o600)
            written.append(paths.config_file)
        # last: the certificate decides which cluster this node serves
        pem_path = crypto.server_pem_path(paths)
        io.atomic_write(pem_path, cert.key_pem + cert.cert_pem, mode=0o400)
        written.append(pem_path)
        io.fsync_dir(paths.data_dir)
    except BaseException:
        for path in written:
            _remove(path)
        _restore(paths, backup, [_relative(paths, p) for p in moved])
        shutil.rmtree(backup, ignore_errors=True)
        raise
    return {"backup": backup, "moved": manifest["files"]}


def _restore(paths, backup, relative_names):
    for name in relative_names:
        source = os.path.join(backup, name)
        target = os.path.join(paths.root, name)
        if not os.path.lexists(source):
            continue
        _remove(target)
        os.makedirs(os.path.dirname(target), mode=0o750, exist_ok=True)
        shutil.move(source, target)


def read_manifest(paths):
    backup = backup_path(paths)
    try:
        with open(os.path.join(backup, MANIFEST), "rb") as f:
            manifest = json.loads(f.read())
    except FileNotFoundError:
        raise errors.OpPrereqError(
            "there is no cluster merge backup on this node (%s)" % backup,
            errors.ECODE_NOENT)
    except (OSError, ValueError) as err:
        raise errors.OpExecError("the cluster merge backup's manifest in %s"
                                 " cannot be read: %s" % (backup, err))
    if not isinstance(manifest, dict) or \
            not isinstance(manifest.get("files"), list):
        raise errors.OpExecError("the cluster merge backup's manifest in %s"
                                 " is not one" % backup)
    return manifest


def revert_files(paths):
    """The file work of ``merge_revert_switch``: the new cluster's files
    go, the backup's come back; the backup directory is removed."""
    manifest = read_manifest(paths)
    backup = backup_path(paths)
    names = [n for n in manifest["files"] if isinstance(n, str) and
             not os.path.isabs(n) and ".." not in n.split(os.sep)]
    for path in _current_files(paths):
        _remove(path)
    _restore(paths, backup, names)
    shutil.rmtree(backup)
    io.fsync_dir(paths.data_dir)
    return {"restored": names, "cluster_name": manifest.get("from_cluster")}


def forget_backup(paths):
    backup = backup_path(paths)
    if not os.path.lexists(backup):
        return False
    shutil.rmtree(backup)
    return True


# --- restarting in place ------------------------------------------------------

def reexec_daemon(reactor, procedures):
    """Restart in place (the same PID) serving the new certificate; the
    daemons holding the old HMAC key stop first."""
    restart.reexec_daemon(reactor, procedures, RESTARTED_DAEMONS,
                          "to serve another cluster certificate")


class MergeProcedures(object):
    """The cluster merger's procedures (mixed into NodeProcedures)."""

    #: ``restart()``: how the daemon restarts in place to serve the new
    #: certificate (set by the daemon; None: this process cannot, and
    #: switching is refused)
    restart_in_place = None

    @procedure(Arg("with_config", ht.BOOL, False), blocking=True)
    def merge_info(self, with_config):
        """Versions, cluster name, master, whether a master daemon runs
        and whether a merge backup exists; with ``with_config`` (a master
        candidate) also config.data (``["zlib+base64", text]``) and the
        ids of the job queue's unfinished jobs."""
        return node_merge_info(self.paths, with_config)

    @procedure(Arg("cluster_pem", ht.NESTR), Arg("hmac_key", ht.NESTR),
               Arg("cluster_name", ht.NESTR), Arg("node_name", ht.NESTR),
               Arg("ssconf", ht.DICT), Arg("config", ht.ANY, None),
               Arg("from_cluster", ht.NESTR))
    async def merge_switch_cluster(self, cluster_pem, hmac_key,
                                   cluster_name, node_name, ssconf, config,
                                   from_cluster):
        """Leave cluster ``from_cluster`` (which this node must be in) for
        ``cluster_name``: its certificate (key included), HMAC key, ssconf
        and, for a master candidate, config.data; the old files are kept
        as a backup.  The daemon then restarts in place and serves the new
        certificate only."""
        if self.restart_in_place is None:
            raise errors.OpPrereqError(
                "this node daemon cannot restart itself to serve another"
                " certificate", errors.ECODE_ENVIRON)
        try:
            cert = crypto.ClusterCertificate.from_pem(
                cluster_pem.encode("ascii"))
            cert.check_cluster_name(cluster_name)
        except (errors.X509CertError, UnicodeEncodeError) as err:
            raise errors.ParameterError("cluster_pem", "cluster_pem: %s"
                                        % err)
        try:
            hmac_data = hmac_key.encode("ascii")
        except UnicodeEncodeError:
            raise errors.ParameterError("hmac_key", "hmac_key must be ASCII"
                                        " text")
        listed = ssconf.get("node_list")
        if isinstance(listed, str):
            listed = listed.splitlines()
        if not isinstance(listed, list) or node_name not in listed:
            raise errors.ParameterError(
                "ssconf", "ssconf: node_list does not name this node (%s)"
                % node_name)
        current = _ssconf_cluster_name(self.paths)
        if current != from_cluster:
            raise errors.OpPrereqError(
                "this node is in cluster %r, not %s; not switching"
                % (current, from_cluster), errors.ECODE_STATE)
        if daemon_util.running_pid(self.paths,
                                   daemon_util.MASTERD) is not None:
            raise errors.OpPrereqError(
                "the master daemon runs on this node; stop the master"
                " daemons first (node_stop_master)", errors.ECODE_STATE)
        result = await self.run_ordered(switch_files, self.paths, cert,
                                        hmac_data, ssconf, config,
                                        from_cluster, cluster_name)
        log.info("Switched from cluster {old} to {new} as node {node};"
                 " the old files are in {backup}", old=from_cluster,
                 new=cluster_name, node=node_name, backup=result["backup"])
        self._schedule_restart()
        result["restart"] = True
        return result

    @procedure()
    async def merge_revert_switch(self):
        """Undo ``merge_switch_cluster``: the backup's files come back and
        the daemon restarts in place, serving the old certificate."""
        if self.restart_in_place is None:
            raise errors.OpPrereqError(
                "this node daemon cannot restart itself to serve another"
                " certificate", errors.ECODE_ENVIRON)
        result = await self.run_ordered(revert_files, self.paths)
        log.info("Cluster merge reverted: back in cluster {name}",
                 name=result["cluster_name"])
        self._schedule_restart()
        result["restart"] = True
        return result

    @procedure(blocking=True, ordered=True)
    def merge_forget_backup(self):
        """The merge is done: remove its backup (True if there was one)."""
        return forget_backup(self.paths)

    def _schedule_restart(self):
        # after the answer has gone out
        self.reactor.callLater(RESTART_DELAY, self.restart_in_place)
