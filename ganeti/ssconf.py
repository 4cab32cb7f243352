"""ssconf: the small read-only files every node keeps.

Each ``<data_dir>/ssconf_<key>`` holds one value per line (as Ganeti's),
so tools on any node can learn the master, the node list or the uid pool
without asking the master.  The master rewrites them after every change of
the configuration.
"""

from ganeti import constants
from ganeti import crypto
from ganeti import qlang
from ganeti import uidpool
from ganeti.backend import files as backend_files

SSCONF_HVPARAMS = ("chroot", "fake", "kvm", "lxc", "xen-hvm", "xen-pvm")


def _hvparam_text(value):
    if isinstance(value, bool):
        return bool_text(value)
    return "%s" % ("" if value is None else value)


def bool_text(value):
    return "True" if value else "False"


def ssconf_values(store):
    """``{key: text}`` of every ssconf file for the configuration ``store``.

    Format as Ganeti's: one value per line, node lists
    sorted "nicely" by name.
    """
    c = store.cluster
    nodes = qlang.nice_sort(store.nodes.values(), key=lambda n: n.name)
    master = store.nodes.get(c.master_node)
    candidates = [n for n in nodes if n.master_candidate]
    online = [n for n in nodes if not n.offline]
    offline = [n for n in nodes if n.offline]
    groups = sorted(store.nodegroups.values(), key=lambda g: g.name)
    networks = sorted(store.networks.values(), key=lambda n: n.name)
    instances = qlang.nice_sort(i.name for i in store.instances.values()
                                if i.name)
    netmask = c.master_netmask
    values = {
        "cluster_name": c.cluster_name,
        "cluster_tags": sorted(c.tags),
        "enabled_user_shutdown": bool_text(c.enabled_user_shutdown),
        "file_storage_dir": c.file_storage_dir or "",
        "shared_file_storage_dir": c.shared_file_storage_dir or "",
        "gluster_storage_dir": c.gluster_storage_dir or "",
        "hypervisor_list": list(c.enabled_hypervisors),
        "instance_list": instances,
        "maintain_node_health": bool_text(c.maintain_node_health),
        "master_candidates": [n.name for n in candidates],
        "master_candidates_ips": [n.primary_ip for n in candidates],
        "master_candidates_certs": crypto.format_candidate_certs(
            dict(c.candidate_certs or {})),
        "master_ip": c.master_ip or "",
        "master_netdev": c.master_netdev or "",
        "master_netmask": "" if netmask is None else "%d" % netmask,
        "master_node": master.name if master else "",
        "networks": ["%s %s" % (n.uuid, n.name) for n in networks],
        "node_list": [n.name for n in nodes],
        "node_primary_ips": ["%s %s" % (n.name, n.primary_ip)
                             for n in nodes],
        "node_secondary_ips": ["%s %s" % (n.name, n.secondary_ip or
                                          n.primary_ip) for n in nodes],
        "node_vm_capable": ["%s=%s" % (n.name, bool_text(n.vm_capable))
                            for n in nodes],
        "nodegroups": ["%s %s" % (g.uuid, g.name) for g in groups],
        "offline_nodes": [n.name for n in offline],
        "online_nodes": [n.name for n in online],
        "primary_ip_family": "%d" % (c.primary_ip_family or
                                     constants.IP4_FAMILY),
        "release_version": constants.RELEASE_VERSION,
        "ssh_ports": ["%s=%s" % (n.name, (n.ndparams or {}).get(
            constants.ND_SSH_PORT, (c.ndparams or {}).get(
                constants.ND_SSH_PORT, 22))) for n in nodes],
        "uid_pool": uidpool.format_uid_pool(
            [tuple(r) for r in c.uid_pool or []], separator="\n"),
    }
    for hv in SSCONF_HVPARAMS:
        params = dict(constants.HVC_DEFAULTS.get(hv, {}))
        params.update((c.hvparams or {}).get(hv, {}))
        values["hvparams_%s" % hv] = ["%s=%s" % (k, _hvparam_text(v))
                                      for k, v in sorted(params.items())]
    return values


def current_values(store):
    """:func:`ssconf_values` of ``store`` as of its serial number, computed
    once per serial: the master's own files and the replication to the
    nodes share it (it sorts every node and instance name).  The store
    must change only through its methods, which move the serial."""
    cached = getattr(store, "_ssconf_values_cache", None)
    if cached is not None and cached[0] == store.serial_no:
        return cached[1]
    values = ssconf_values(store)
    store._ssconf_values_cache = (store.serial_no, values)
    return values


def write_ssconf(paths, store):
    """Write every ssconf file of ``store`` under ``paths`` (mode 0444)."""
    return backend_files.write_ssconf_files(paths, ssconf_values(store))
