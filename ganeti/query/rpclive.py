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
        answer = {}
        for node, res in _by_node(node_uuids, results).items():
            if res is None or not res.success:
                answer[node] = None
                continue
            answer[node] = {name: {"state": info.get("state"),
                                   "memory": info.get("memory"),
                                   "vcpus": info.get("vcpus")}
                            for name, info in (res.payload or {}).items()}
        return answer

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
        answer = {}
        for node, res in _by_node(node_uuids, results).items():
            if res is None or not res.success:
                answer[node] = None
                continue
            payload = res.payload or {}
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
            answer[node] = {k: v for k, v in data.items() if v is not None}
        return answer


def _by_node(node_uuids, results):
    """call_many's answer as {node uuid: RpcResult or None}."""
    if isinstance(results, dict):
        return {n: results.get(n) for n in node_uuids}
    return dict(zip(node_uuids, results))
