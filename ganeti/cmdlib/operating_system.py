"""OP_OS_DIAGNOSE: the operating systems the nodes offer.

Every online vm_capable node is asked (``os_diagnose``); an OS is valid only
if it is valid on every node that answered, and its variants, parameters and
API versions are those all of them agree on.  An OS a node lacks counts as
invalid there, so an OS valid on one node and missing on another is
reported, as ``gnt-os diagnose`` expects.

The result is Ganeti's old-style query answer: one row per OS (sorted by
name), each the list of the values of ``output_fields``.  Fields: name,
valid, hidden, blacklisted, variants, parameters, api_versions, node_status
({node name: [(path, status, message, variants, parameters, api_versions,
trusted)]}), os_hvp, osparams, trusted.  Without "hidden", "blacklisted" or
"valid" among the fields, hidden, blacklisted or invalid OSes are left out,
as Ganeti does.
"""

from ganeti import errors
from ganeti.cmdlib import node_calls
from ganeti.cmdlib.base import LogicalUnit
from ganeti.query import oses

#: the fields of the ``os`` query resource
OS_FIELDS = tuple(oses.OsResource.fields.names())


#: OP_OS_DIAGNOSE's rows merge the nodes' answers as the ``os`` query
#: resource does
merge_diagnoses = oses.merge_os_diagnoses


class LUOsDiagnose(LogicalUnit):
    OP_ID = "OP_OS_DIAGNOSE"

    def check_arguments(self):
        unknown = [f for f in self.op.output_fields if f not in OS_FIELDS]
        if unknown:
            raise errors.OpPrereqError(
                "output_fields: unknown field%s %s (known: %s)"
                % ("s" if len(unknown) > 1 else "", ", ".join(unknown),
                   ", ".join(OS_FIELDS)), errors.ECODE_INVAL)

    async def exec_(self):
        cfg = self.cfg
        fields = self.op.output_fields
        nodes = oses.diagnosed_nodes(cfg)
        client = node_calls.rpc_client(self)
        answers = {}
        if nodes:
            results = await client.call_many([n.name for n in nodes],
                                             oses.OS_DIAGNOSE, [])
            for name, result in sorted(results.items()):
                if result.success and isinstance(result.payload, list):
                    answers[name] = result.payload
                else:
                    # A node that does not answer does not make every OS
                    # invalid (as in Ganeti): it is left out.
                    self.log_warning("Can't get the OS list of node %s: %s",
                                     name, result.fail_msg or "bad answer")
        merged = merge_diagnoses(answers, cfg.cluster)
        wanted = set(self.op.names or [])
        missing = sorted(wanted - set(merged))
        if missing:
            raise errors.OpPrereqError("names: OS %s not found on any node"
                                       % ", ".join(missing),
                                       errors.ECODE_NOENT)
        rows = []
        for name in sorted(merged):
            info = merged[name]
            if wanted and name not in wanted:
                continue
            if "hidden" not in fields and info["hidden"]:
                continue
            if "blacklisted" not in fields and info["blacklisted"]:
                continue
            if "valid" not in fields and not info["valid"]:
                continue
            rows.append([info[f] for f in fields])
        return rows


# --- checks other logical units use ---------------------------------------

async def check_os_on_node(lu, node_uuid, os_name, osparams,
                           force_variant=False, field="os_type"):
    """Ask the node whether ``os_name`` (os+variant) is valid and accepts
    the (filled) ``osparams``; OpPrereqError naming the node if not."""
    name = node_calls.node_name(lu.cfg, node_uuid)
    result = await node_calls.try_call_node(
        lu, node_uuid, "os_validate",
        [True, os_name, ["parameters"], osparams, force_variant])
    if not result.success:
        raise errors.OpPrereqError(
            "%s: OS '%s' cannot be used on node %s: %s"
            % (field, os_name, name,
               node_calls.strip_node_prefix(result.fail_msg, name)),
            errors.ECODE_INVAL)


def check_osparams_disjoint(**dicts):
    """Each OS parameter once: a key in several of the public, private
    and secret dicts (given by field name) is an OpPrereqError naming
    them."""
    seen = {}
    for field in sorted(dicts):
        for key in dicts[field] or {}:
            seen.setdefault(key, []).append(field)
    repeated = sorted(key for key, fields in seen.items() if len(fields) > 1)
    if repeated:
        raise errors.OpPrereqError(
            "%s: OS parameter%s given more than once: %s" % (
                ", ".join(sorted({f for k in repeated for f in seen[k]})),
                "s" if len(repeated) > 1 else "",
                ", ".join("%s (in %s)" % (k, " and ".join(seen[k]))
                          for k in repeated)),
            errors.ECODE_INVAL)


def check_os_name(os_name, field="os_type"):
    if not os_name or not isinstance(os_name, str):
        raise errors.OpPrereqError("%s: an OS (os or os+variant) is required"
                                   % field, errors.ECODE_INVAL)
    base, _, variant = os_name.partition("+")
    if not base or ("+" in os_name and not variant):
        raise errors.OpPrereqError("%s: '%s' is not an OS name (os or"
                                   " os+variant)" % (field, os_name),
                                   errors.ECODE_INVAL)


def check_os_allowed(cluster, os_name, field="os_type"):
    base = os_name.partition("+")[0]
    if base in (cluster.blacklisted_os or []) or \
            os_name in (cluster.blacklisted_os or []):
        raise errors.OpPrereqError("%s: guest OS '%s' is not allowed for"
                                   " installation (blacklisted)"
                                   % (field, os_name), errors.ECODE_STATE)
