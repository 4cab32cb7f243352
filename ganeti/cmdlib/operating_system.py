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

OS_FIELDS = ("name", "valid", "hidden", "blacklisted", "variants",
             "parameters", "api_versions", "node_status", "os_hvp",
             "osparams", "trusted")


def _entry(os_data):
    """Ganeti's per-node tuple for one OS answer of ``os_diagnose``."""
    return [os_data.get("path"), bool(os_data.get("valid")),
            os_data.get("status") or "",
            list(os_data.get("variants") or []),
            [list(p) for p in os_data.get("parameters") or []],
            list(os_data.get("api_versions") or []),
            bool(os_data.get("trusted", True))]


def merge_diagnoses(answers, cluster):
    """{os name: info dict} from {node name: os_diagnose payload}."""
    all_os = {}
    for node, payload in answers.items():
        for os_data in payload or []:
            name = os_data.get("name")
            if not name:
                continue
            per_node = all_os.setdefault(name, {n: [] for n in answers})
            per_node[node].append(_entry(os_data))
    result = {}
    for name, per_node in all_os.items():
        valid = True
        trusted = True
        variants = parameters = api_versions = None
        for node in sorted(per_node):
            entries = per_node[node]
            if not entries or not entries[0][1]:
                valid = False
                continue
            _, _, _, n_var, n_par, n_api, n_trusted = entries[0]
            n_par = set(tuple(p) for p in n_par)
            if variants is None:
                variants, parameters, api_versions = \
                    set(n_var), n_par, set(n_api)
            else:
                variants &= set(n_var)
                parameters &= n_par
                api_versions &= set(n_api)
            trusted = trusted and n_trusted
        if not valid:
            variants, parameters, api_versions = set(), set(), set()
        variants = sorted(variants or [])
        os_hvp = {}
        osparams = {}
        for variant in variants:
            full = "%s+%s" % (name, variant)
            if full in cluster.os_hvp:
                os_hvp[full] = cluster.os_hvp[full]
            if full in cluster.osparams:
                osparams[full] = cluster.osparams[full]
        result[name] = {
            "name": name,
            "valid": valid,
            "hidden": name in (cluster.hidden_os or []),
            "blacklisted": name in (cluster.blacklisted_os or []),
            "variants": variants,
            "parameters": sorted([list(p) for p in parameters or []]),
            "api_versions": sorted(api_versions or []),
            "node_status": per_node,
            "os_hvp": os_hvp,
            "osparams": osparams,
            "trusted": trusted,
        }
    return result


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
        nodes = sorted((n for n in cfg.nodes.values()
                        if not n.offline and n.vm_capable),
                       key=lambda n: n.name)
        client = node_calls.rpc_client(self)
        answers = {}
        if nodes:
            results = await client.call_many([n.name for n in nodes],
                                             "os_diagnose", [])
            for name, result in sorted(results.items()):
                if result.success:
                    answers[name] = result.payload
                else:
                    # A node that does not answer does not make every OS
                    # invalid (as in Ganeti): it is left out.
                    self.log_warning("Can't get the OS list of node %s: %s",
                                     name, result.fail_msg)
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
