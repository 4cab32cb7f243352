"""OP_EXT_STORAGE_DIAGNOSE: the ExtStorage providers the nodes offer
(``gnt-storage diagnose`` and ``info``).

Every online vm_capable node is asked (``extstorage_diagnose``); a node
that does not answer is left out (a warning), as for OSes.  The result is
Ganeti's old-style query answer: one row per provider (sorted by name),
each the list of the values of ``output_fields``:

``name``
    the provider's name;
``node_status``
    ``{node name: [[path, valid, message, parameters], ...]}``: what each
    node found, the entry it uses first (a provider found in several
    search path directories has several); ``[]`` where the node has none;
``nodegroup_status``
    ``{group name: valid}``: valid when it is valid on every node of the
    group that answered (groups with no such node are not listed);
``parameters``
    ``[[name, description], ...]`` the valid nodes all agree on.

Nothing depends on the ``ext`` disk template being enabled: the
providers are listed whatever templates the cluster uses.
"""

from ganeti import errors
from ganeti.cmdlib import node_calls
from ganeti.cmdlib.base import LogicalUnit

ES_FIELDS = ("name", "node_status", "nodegroup_status", "parameters")


def _entry(data):
    return [data.get("path"), bool(data.get("valid")),
            data.get("status") or "",
            [list(p) for p in data.get("parameters") or []]]


def merge_diagnoses(answers, group_of):
    """{provider: info dict} from {node name: extstorage_diagnose payload};
    ``group_of`` maps node names to group names."""
    providers = {}
    for node, payload in answers.items():
        for data in payload or []:
            name = data.get("name") if isinstance(data, dict) else None
            if not name:
                continue
            per_node = providers.setdefault(name, {n: [] for n in answers})
            per_node[node].append(_entry(data))
    result = {}
    for name, per_node in providers.items():
        groups = {}
        parameters = None
        for node in sorted(per_node):
            entries = per_node[node]
            valid = bool(entries) and entries[0][1]
            group = group_of.get(node)
            if group is not None:
                groups[group] = groups.get(group, True) and valid
            if valid:
                mine = set(tuple(p) for p in entries[0][3])
                parameters = mine if parameters is None \
                    else parameters & mine
        result[name] = {
            "name": name,
            "node_status": per_node,
            "nodegroup_status": groups,
            "parameters": sorted(list(p) for p in parameters or []),
        }
    return result


class LUExtStorageDiagnose(LogicalUnit):
    OP_ID = "OP_EXT_STORAGE_DIAGNOSE"

    def check_arguments(self):
        unknown = [f for f in self.op.output_fields if f not in ES_FIELDS]
        if unknown:
            raise errors.OpPrereqError(
                "output_fields: unknown field%s %s (known: %s)"
                % ("s" if len(unknown) > 1 else "", ", ".join(unknown),
                   ", ".join(ES_FIELDS)), errors.ECODE_INVAL)

    async def exec_(self):
        cfg = self.cfg
        nodes = sorted((n for n in cfg.nodes.values()
                        if not n.offline and n.vm_capable),
                       key=lambda n: n.name)
        answers = {}
        if nodes:
            results = await node_calls.rpc_client(self).call_many(
                [n.name for n in nodes], "extstorage_diagnose", [])
            for name, result in sorted(results.items()):
                if result.success and isinstance(result.payload, list):
                    answers[name] = result.payload
                else:
                    self.log_warning("Can't get the ExtStorage providers of"
                                     " node %s: %s", name,
                                     result.fail_msg or "bad answer")
        group_of = {}
        for node in nodes:
            group = cfg.nodegroups.get(node.group)
            if group is not None:
                group_of[node.name] = group.name
        merged = merge_diagnoses(answers, group_of)
        wanted = list(self.op.names or [])
        missing = sorted(set(wanted) - set(merged))
        if missing:
            raise errors.OpPrereqError(
                "names: ExtStorage provider%s %s not found on any node"
                % ("s" if len(missing) > 1 else "", ", ".join(missing)),
                errors.ECODE_NOENT)
        fields = self.op.output_fields
        return [[merged[name][f] for f in fields]
                for name in sorted(merged)
                if not wanted or name in wanted]
