"""Live data for queries, asked from the node daemons over RPC."""

from twisted.internet import defer
from zope.interface import implementer

from ganeti import constants
from ganeti.query.live import ILiveData


@implementer(ILiveData)
class RpcLiveData(object):
    """Asks each node's noded; a node that fails to answer is unreachable."""

    def __init__(self, cfg, rpc, timeout=10):
        self.cfg = cfg
        self.rpc = rpc
        self.timeout = timeout

    def _hypervisors(self):
        return list(self.cfg.cluster.enabled_hypervisors)

    @defer.inlineCallbacks
    def instances_runtime(self, node_uuids):
        results = yield self.rpc.call_many(
            list(node_uuids), "all_instances_info", [self._hypervisors()],
            timeout=self.timeout)
        return _per_node(node_uuids, results, _instances_info)

    @defer.inlineCallbacks
    def nodes_runtime(self, node_uuids):
        c = self.cfg.cluster
        units = []
        if constants.DT_FILE in c.enabled_disk_templates and \
                c.file_storage_dir:
            units.append([constants.ST_FILE, c.file_storage_dir, []])
        if constants.DT_PLAIN in c.enabled_disk_templates and \
                c.volume_group_name:
            units.append([constants.ST_LVM_VG, c.volume_group_name, []])
        hv = c.default_hypervisor
        results = yield self.rpc.call_many(
            list(node_uuids), "node_info", [units, [hv]],
            timeout=self.timeout)
        return _per_node(node_uuids, results, _node_info)


def _per_node(node_uuids, results, convert):
    """call_many's answer as {node uuid: convert(payload)}.

    A node whose result is missing or failed maps to None (unreachable).
    """
    if isinstance(results, dict):
        by_node = {n: results.get(n) for n in node_uuids}
    else:
        by_node = dict(zip(node_uuids, results))
    return {node: None if res is None or not res.success
            else convert(res.payload or {})
            for node, res in by_node.items()}


def _instances_info(payload):
    """An all_instances_info payload as {instance name: runtime fields}."""
    return {name: {"state": info.get("state"),
                   "memory": info.get("memory"),
                   "vcpus": info.get("vcpus")}
            for name, info in payload.items()}


def _node_info(payload):
    """A node_info payload as the node fields it gives (None left out)."""
    data = {"bootid": payload.get("boot_id")}
    hvs = payload.get("hypervisors") or []
    if hvs:
        h = hvs[0]
        data.update({"mtotal": h.get("memory_total"),
                     "mnode": h.get("memory_dom0"),
                     "mfree": h.get("memory_free"),
                     "ctotal": h.get("cpu_total"),
                     # KVM and fake leave every CPU to the host OS
                     # too (htools need the field).
                     "cnos": h.get("cpu_total"),
                     "cnodes": h.get("cpu_nodes"),
                     "csockets": h.get("cpu_sockets")})
    storage = [u for u in payload.get("storage") or []
               if u.get("storage_size") is not None]
    if storage:
        data["dtotal"] = sum(u["storage_size"] for u in storage)
        data["dfree"] = sum(u["storage_free"] or 0 for u in storage)
    return {k: v for k, v in data.items() if v is not None}
