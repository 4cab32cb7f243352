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
from ganeti.query import oses

#: the fields of the ``extstorage`` query resource
ES_FIELDS = tuple(oses.ExtStorageResource.fields.names())


#: OP_EXT_STORAGE_DIAGNOSE's rows merge the nodes' answers as the
#: ``extstorage`` query resource does
merge_diagnoses = oses.merge_extstorage_diagnoses


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
        nodes = oses.diagnosed_nodes(cfg)
        answers = {}
        if nodes:
            results = await node_calls.rpc_client(self).call_many(
                [n.name for n in nodes], oses.EXTSTORAGE_DIAGNOSE, [])
            for name, result in sorted(results.items()):
                if result.success and isinstance(result.payload, list):
                    answers[name] = result.payload
                else:
                    self.log_warning("Can't get the ExtStorage providers of"
                                     " node %s: %s", name,
                                     result.fail_msg or "bad answer")
        merged = merge_diagnoses(answers, oses.node_groups(cfg, nodes))
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
