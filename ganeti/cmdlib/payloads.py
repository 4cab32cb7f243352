"""What node daemons are sent about an instance: :func:`instance_spec`
(``instance_start`` / ``instance_reboot``: the InstanceSpec fields with
filled parameters) and :func:`os_instance` (``instance_os_add`` /
``instance_run_rename``: the instance's config dict with filled parameters
and its disks).
"""


from ganeti import constants
from ganeti import objects
from ganeti.cmdlib import node_calls
from ganeti.cmdlib import instance_params


def instance_spec(cfg, instance, hvparams=None, beparams=None, disks=None):
    """The ``instance_start``/``instance_reboot`` specification.

    InstanceSpec fields + ``hypervisor``: filled hvparams (with the cluster's
    global ones) and beparams, ``hvparams``/``beparams`` overriding them
    for this start only; disks as their config dicts (the node assembles
    them); NICs with their filled mode/link/vlan.
    """
    cluster = cfg.cluster
    group = None
    if instance.primary_node in cfg.nodes:
        group = cfg.nodegroups.get(cfg.nodes[instance.primary_node].group)
    be = objects.fill_beparams(cluster, instance)
    be.update(beparams or {})
    if disks is None:
        disks = cfg.instance_disks(instance)
    nics = []
    for nic in instance.nics:
        filled = objects.fill_nicparams(cluster, nic, group)
        nics.append({"mac": nic.mac, "ip": nic.ip,
                     "mode": filled.get(constants.NIC_MODE),
                     "link": filled.get(constants.NIC_LINK) or "",
                     "vlan": filled.get(constants.NIC_VLAN) or ""})
    return {
        "name": instance.name,
        "uuid": instance.uuid,
        "hypervisor": instance.hypervisor,
        "hvparams": instance_params.full_hvparams(cluster, instance, hvparams),
        "beparams": be,
        "disks": [d.to_dict() for d in disks
                  if d.dev_type != constants.DT_DISKLESS],
        "nics": nics,
        "network_port": instance.network_port,
    }


def all_osparams(cfg, instance, osparams_secret=None):
    """Every OS parameter of ``instance`` (public, private, the secret
    ones given): what the OS checks its parameter names against."""
    result = objects.fill_osparams(cfg.cluster, instance)
    result.update(objects.fill_osparams_private(cfg.cluster, instance))
    result.update(osparams_secret or {})
    return result


def os_instance(cfg, instance, os_name=None, osparams=None, disks=None,
                osparams_private=None, osparams_secret=None):
    """The instance dict of ``instance_os_add``/``instance_run_rename``:
    its config dict with filled parameters, node names and its disks.

    The OS scripts get the private OS parameters too, and for an install
    the secret ones (``osparams_secret``: the opcode's, never kept in the
    configuration)."""
    cluster = cfg.cluster
    group = None
    if instance.primary_node in cfg.nodes:
        group = cfg.nodegroups.get(cfg.nodes[instance.primary_node].group)
    data = instance.to_dict()
    if os_name is not None:
        data["os"] = os_name
    candidate = instance.copy()
    candidate.os = data.get("os")
    if osparams is not None:
        candidate.osparams = osparams
    if osparams_private is not None:
        candidate.osparams_private = osparams_private
    data["hvparams"] = instance_params.full_hvparams(cluster, instance)
    data["beparams"] = objects.fill_beparams(cluster, instance)
    data["osparams"] = objects.fill_osparams(cluster, candidate)
    data["osparams_private"] = objects.fill_osparams_private(cluster,
                                                             candidate)
    data["osparams_secret"] = dict(osparams_secret or {})
    nics = []
    for nic in instance.nics:
        entry = nic.to_dict()
        entry["nicparams"] = objects.fill_nicparams(cluster, nic, group)
        nics.append(entry)
    data["nics"] = nics
    data["primary_node"] = node_calls.node_name(cfg, instance.primary_node)
    data["secondary_nodes"] = [node_calls.node_name(cfg, n)
                               for n in instance.secondary_nodes]
    if disks is None:
        disks = cfg.instance_disks(instance)
    data["disks_info"] = [d.to_dict() for d in disks]
    data.pop("disks", None)
    data.pop("tags", None)
    return data
