"""Live data for queries, asked from the node daemons over RPC."""

from twisted.internet import defer
from zope.interface import implementer

from ganeti import constants
from ganeti.query.live import ILiveData


@implementer(ILiveData)
class RpcLiveData(object):
    """Asks each node's noded; a node that fails to answer is unreachable."""

    def __init__(self, cfg, rpc, timeout=10, observer=None):
        self.cfg = cfg
        self.rpc = rpc
        self.timeout = timeout
        #: told ``(node uuids, answers)`` of every instances_runtime
        #: answer (:meth:`ganeti.runstate.RunStateTracker.observe`), or None
        self.observer = observer

    def _hypervisors(self):
        return list(self.cfg.cluster.enabled_hypervisors)

    def _call(self, node_uuids, procedure, args):
        """call_many by node name (as every caller of the node daemons
        names nodes); the answers keyed by UUID again."""
        names = {}
        for uuid in node_uuids:
            node = self.cfg.nodes.get(uuid)
            names[uuid] = node.name if node is not None else uuid
        d = self.rpc.call_many(list(names.values()), procedure, args,
                               timeout=self.timeout)

        def by_uuid(results):
            if isinstance(results, dict):
                return {uuid: results.get(name)
                        for uuid, name in names.items()}
            return dict(zip(names, results))
        return d.addCallback(by_uuid)

    @defer.inlineCallbacks
    def instances_runtime(self, node_uuids):
        results = yield self._call(
            node_uuids, "all_instances_info", [self._hypervisors()])
        answers = _per_node(node_uuids, results, _instances_info)
        if self.observer is not None:
            self.observer(node_uuids, answers)
        return answers

    def _storage_units(self):
        """The storage unit of the cluster's default disk template (the
        first enabled one with storage on the nodes), as Ganeti reports
        ``dtotal``/``dfree``: one pool, which htools plan with."""
        c = self.cfg.cluster
        for template in c.enabled_disk_templates:
            if template == constants.DT_FILE:
                if c.file_storage_dir:
                    return [[constants.ST_FILE, c.file_storage_dir, []]]
                return []
            if template in (constants.DT_PLAIN, constants.DT_DRBD8):
                if c.volume_group_name:
                    return [[constants.ST_LVM_VG, c.volume_group_name, []]]
                return []
        return []

    @defer.inlineCallbacks
    def nodes_runtime(self, node_uuids):
        hv = self.cfg.cluster.default_hypervisor
        results = yield self._call(node_uuids, "node_info",
                                   [self._storage_units(), [hv]])
        return _per_node(node_uuids, results, _node_info)


    @defer.inlineCallbacks
    def exports(self, node_uuids):
        """{node uuid: [export names] or None (no answer)}."""
        results = yield self._call(node_uuids, "export_list", [])
        return _per_node(node_uuids, results,
                         lambda payload: list(payload or []))

    def os_diagnose(self, node_uuids):
        """{node uuid: the node's ``os_diagnose`` list, or None (no
        answer)}: the OSes each node found (the ``os`` resource)."""
        return self._lists(node_uuids, "os_diagnose")

    def extstorage_diagnose(self, node_uuids):
        """{node uuid: the node's ``extstorage_diagnose`` list, or None}:
        the ExtStorage providers each node found (``extstorage``)."""
        return self._lists(node_uuids, "extstorage_diagnose")

    def _lists(self, node_uuids, procedure):
        def convert(results):
            if not isinstance(results, dict):
                results = dict(zip(node_uuids, results))
            answers = {}
            for uuid in node_uuids:
                res = results.get(uuid)
                ok = res is not None and res.success and \
                    isinstance(res.payload, list)
                answers[uuid] = list(res.payload) if ok else None
            return answers
        return self._call(node_uuids, procedure, []).addCallback(convert)


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
