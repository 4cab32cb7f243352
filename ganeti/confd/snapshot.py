"""One loaded config.data and the indexes confd answers from.

A snapshot is built once per configuration version and never changed
afterwards, so every answer computed from it carries the serial numbers of
that same version, and a reload simply swaps in a new snapshot.  Everything
that would otherwise need a scan of all nodes or instances per query (IP
lists per link, instance IP -> primary node, role lookups, DRBD minors, the
instances of a node) is computed here, once.
"""

import attr

from ganeti import constants
from ganeti import objects
from ganeti.confd import pacing
from ganeti.confd import wire
from ganeti.utils.memo import Memo

# Data collectors known to the monitoring daemons; the ones that only make
# sense for one hypervisor are reported active only while it is enabled.
DATA_COLLECTOR_NAMES = constants.DATA_COLLECTOR_NAMES
XEN_ONLY_COLLECTORS = frozenset(["inst-status-xen", "xen-cpu-avg-load"])
HYPERVISOR_COLLECTORS = {"inst-status-kvm": constants.HT_KVM,
                         "inst-status-fake": constants.HT_FAKE}
DEFAULT_COLLECTOR_INTERVAL = constants.DATA_COLLECTOR_INTERVAL
_XEN_HYPERVISORS = frozenset([constants.HT_XEN_PVM, constants.HT_XEN_HVM])

DRBD_ROLE_PRIMARY = "primary"
DRBD_ROLE_SECONDARY = "secondary"


@attr.s(frozen=True, slots=True)
class DrbdMinor(object):
    """One DRBD minor of a node: the 6-array of a node-drbd answer."""
    node = attr.ib()      # node name
    minor = attr.ib()
    instance = attr.ib()  # instance name
    disk = attr.ib()      # "disk/<index>"
    role = attr.ib()      # primary / secondary
    peer = attr.ib()      # peer node name

    def to_list(self):
        return [self.node, self.minor, self.instance, self.disk, self.role,
                self.peer]


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _drbd_ends(disk):
    """((node_a, minor_a), (node_b, minor_b)) of a DRBD disk, or None.

    Ganeti's DRBD logical_id is [node_a, node_b, port, minor_a, minor_b,
    secret] with node UUIDs.
    """
    lid = disk.logical_id
    if not isinstance(lid, (list, tuple)) or len(lid) != 6:
        return None
    node_a, node_b, _, minor_a, minor_b, _ = lid
    if not (isinstance(node_a, str) and isinstance(node_b, str)
            and _is_int(minor_a) and _is_int(minor_b)):
        return None
    return (node_a, minor_a), (node_b, minor_b)


def _nic_link(default_link, nic, group):
    """The link of a NIC: fill_nicparams's, without filling the rest."""
    link = default_link
    if group is not None and nic.network and nic.network in group.networks:
        link = (group.networks[nic.network] or {}).get(
            constants.NIC_LINK, link)
    return (nic.nicparams or {}).get(constants.NIC_LINK, link)


class ConfigSnapshot(object):
    """An immutable view of one config.data version, with lookup indexes.

    ``pause`` is called after each instance indexed (see
    :mod:`ganeti.confd.pacing`).
    """

    def __init__(self, store, pause=pacing.no_pause):
        self._pause = pause
        self.store = store
        cluster = store.cluster
        self.version = store.version
        self.serial = cluster.serial_no or 0  # what replies carry (cluster's)
        self.file_serial = store.serial_no
        #: the ping reply, the most frequent one (serial 0, as Ganeti's)
        self.pong = wire.PreparedMsg(wire.encode_reply(
            wire.STATUS_OK, self.version, 0))
        #: problems found while indexing (malformed DRBD disks...), for logs
        self.warnings = []
        #: ``memo(key, compute)``: encoded replies kept for this version's life
        self.memo = Memo()
        self._config_dict = None

        self.nodes_by_name = {}
        for node in store.nodes.values():
            if node.name:
                self.nodes_by_name.setdefault(node.name, node)
        self.master = store.nodes.get(cluster.master_node)
        self.master_name = self.master.name if self.master else None

        by_name = sorted(store.nodes.values(),
                         key=lambda n: (n.name or "", n.uuid or ""))
        self.node_pips = [n.primary_ip for n in by_name if n.primary_ip]
        self.mc_pips = [n.primary_ip for n in by_name
                        if n.primary_ip and n.master_candidate]

        self.instances_by_name = {}
        for inst in store.instances.values():
            if inst.name:
                self.instances_by_name.setdefault(inst.name, inst)

        self.default_link = objects.fill_dict(
            constants.NICC_DEFAULTS,
            cluster.nicparams.get(constants.PP_DEFAULT, {}))[
                constants.NIC_LINK]
        self._index_instances()
        self.data_collectors = self._data_collectors()
        del self._pause  # only for building

    # --- building -------------------------------------------------------

    def _index_instances(self):
        store = self.store
        #: link -> {instance ip -> instance}
        self.link_ip_map = {}
        #: node uuid -> ([primary instances], [secondary instances])
        self.node_instances = {uuid: ([], []) for uuid in store.nodes}
        #: node uuid -> [DrbdMinor]
        self.drbd_minors = {uuid: [] for uuid in store.nodes}
        # Sorted, so that duplicates (an IP on two instances) resolve the same
        # way on every master candidate: the first name wins.
        for inst in sorted(store.instances.values(),
                           key=lambda i: (i.name or "", i.uuid or "")):
            pnode = store.nodes.get(inst.primary_node)
            if inst.primary_node in self.node_instances:
                self.node_instances[inst.primary_node][0].append(inst)
            for sec in inst.secondary_nodes or []:
                if sec in self.node_instances and sec != inst.primary_node:
                    self.node_instances[sec][1].append(inst)
            group = store.nodegroups.get(pnode.group) if pnode else None
            for nic in inst.nics:
                if not nic.ip or pnode is None:
                    continue
                link = _nic_link(self.default_link, nic, group)
                self.link_ip_map.setdefault(link, {}).setdefault(nic.ip, inst)
            for idx, disk_uuid in enumerate(inst.disks):
                disk = store.disks.get(disk_uuid)
                if disk is not None:
                    self._index_drbd(inst, idx, disk)
            self._pause()
        #: link -> sorted list of instance IPs
        self.link_ips = {link: sorted(ips)
                         for link, ips in self.link_ip_map.items()}

    def _index_drbd(self, inst, idx, disk):
        if disk.dev_type == constants.DT_DRBD8:
            ends = _drbd_ends(disk)
            if ends is None:
                self.warnings.append(
                    "disk %s of instance %s: DRBD logical_id %r is not"
                    " [node_a, node_b, port, minor_a, minor_b, secret]"
                    % (disk.uuid, inst.display_name, disk.logical_id))
            else:
                for (node, minor), (peer, _) in (ends, ends[::-1]):
                    if node not in self.drbd_minors:
                        continue
                    role = (DRBD_ROLE_PRIMARY if node == inst.primary_node
                            else DRBD_ROLE_SECONDARY)
                    self.drbd_minors[node].append(DrbdMinor(
                        node=self._node_name(node), minor=minor,
                        instance=inst.display_name, disk="disk/%d" % idx,
                        role=role, peer=self._node_name(peer)))
        for child in disk.children or []:
            self._index_drbd(inst, idx, child)

    def _node_name(self, uuid):
        node = self.store.nodes.get(uuid)
        return node.name if node is not None and node.name else uuid

    def _data_collectors(self):
        cluster = self.store.cluster
        hypervisors = set(cluster.enabled_hypervisors or ())
        xen = bool(_XEN_HYPERVISORS & hypervisors)
        configured = cluster.data_collectors or {}
        result = {}
        for name in DATA_COLLECTOR_NAMES:
            conf = configured.get(name) or {}
            active = conf.get("active", True) is not False
            if name in XEN_ONLY_COLLECTORS and not xen:
                active = False
            if name in HYPERVISOR_COLLECTORS and \
                    HYPERVISOR_COLLECTORS[name] not in hypervisors:
                active = False
            interval = conf.get("interval")
            if not _is_int(interval) or interval <= 0:
                interval = DEFAULT_COLLECTOR_INTERVAL
            result[name] = {"active": active, "interval": interval}
            if name == constants.DATA_COLLECTOR_DIAGNOSE:
                # the self-diagnose command rides along with its collector
                # (kept in a dict value, which Ganeti 3.0 tolerates)
                filename = conf.get("filename")
                result[name]["filename"] = \
                    filename if isinstance(filename, str) else ""
        return result

    # --- lookups ----------------------------------------------------------

    def find_node(self, name_or_uuid):
        """A node by UUID or by name (exact), or None."""
        node = self.store.nodes.get(name_or_uuid)
        if node is None:
            node = self.nodes_by_name.get(name_or_uuid)
        return node

    def find_instance(self, name_or_uuid):
        inst = self.store.instances.get(name_or_uuid)
        if inst is None:
            inst = self.instances_by_name.get(name_or_uuid)
        return inst

    def instance_disks(self, inst):
        return [self.store.disks[u] for u in inst.disks
                if u in self.store.disks]

    @property
    def config_dict(self):
        """config.data as JSON-ready data, built on first use only; the
        private OS parameters' values are not in it (answers travel in
        clear, only signed)."""
        if self._config_dict is None:
            self._config_dict = objects.redact_config(self.store.to_dict())
        return self._config_dict

    def release(self, pause=pacing.no_pause):
        """Take the snapshot apart, a piece at a time.

        For a snapshot that answers no more, in a worker thread: freeing
        the objects of a 2,000-instance config (and the config dict, if a
        query built it) in one go takes 5-15 ms, holding the GIL all along.
        """
        data, self._config_dict = self._config_dict, None
        while data:
            _, value = data.popitem()
            while isinstance(value, dict) and value:
                value.popitem()
                pause()
            pause()
        for index in (self.link_ip_map, self.link_ips, self.node_instances,
                      self.drbd_minors, self.instances_by_name,
                      self.nodes_by_name):
            index.clear()
        store = self.store
        for mapping in (store.instances, store.disks, store.nodes,
                        store.nodegroups, store.networks):
            while mapping:
                mapping.popitem()
                pause()
