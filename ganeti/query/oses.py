"""OS and ExtStorage provider query rows (OP_QUERY ``os`` and
``extstorage``), and the merging of the nodes' diagnoses that
OP_OS_DIAGNOSE and OP_EXT_STORAGE_DIAGNOSE answer with too.

Every online vm_capable node is asked (``os_diagnose`` /
``extstorage_diagnose``, through the live-data provider's methods of the
same names; in the master: RPC).  A node that does not answer is left
out: it makes no OS invalid.  One row per OS (provider), sorted by name:

* an OS is ``valid`` when every node that answered has it valid (the
  first definition a node found counts); ``variants``, ``parameters`` and
  ``api_versions`` are those all of them agree on (empty for an invalid
  OS); ``trusted`` when no node reports it untrusted; ``hidden`` and
  ``blacklisted`` from the cluster's ``hidden_os`` / ``blacklisted_os``;
  ``os_hvp`` / ``osparams`` the cluster's per-OS hypervisor and OS
  parameters of its variants (``os+variant``);
* ``node_status`` is ``{node name: [entry, ...]}``, every definition the
  node found (``[]`` where it has none): for an OS ``[path, valid,
  message, variants, parameters, api_versions, trusted]``, for a provider
  ``[path, valid, message, parameters]``;
* a provider's ``nodegroup_status`` is ``{group name: valid}``, valid
  when valid on every node of the group that answered.
"""

import abc

from twisted.internet import defer
from twisted.logger import Logger

from ganeti import errors
from ganeti.query.base import (Field, FieldTable, Resource, QFT_TEXT,
                               QFT_BOOL, QFT_OTHER, lookup_by_name,
                               nice_sort)

log = Logger()

#: The live-data provider methods (and node procedures) asked
OS_DIAGNOSE = "os_diagnose"
EXTSTORAGE_DIAGNOSE = "extstorage_diagnose"


def diagnosed_nodes(cfg):
    """The nodes asked about their OSes and providers, sorted by name:
    online and vm_capable ones."""
    return sorted((n for n in cfg.nodes.values()
                   if not n.offline and n.vm_capable),
                  key=lambda n: n.name)


def node_groups(cfg, nodes):
    """{node name: group name} of ``nodes``."""
    result = {}
    for node in nodes:
        group = cfg.nodegroups.get(node.group)
        if group is not None:
            result[node.name] = group.name
    return result


def _by_provider(answers, entry):
    """{name: {node name: [entry, ...]}} from {node name: payload}; every
    answering node is in each map (``[]`` where it lacks the item)."""
    found = {}
    for node, payload in answers.items():
        for data in payload or []:
            name = data.get("name") if isinstance(data, dict) else None
            if not name or not isinstance(name, str):
                continue
            per_node = found.setdefault(name, {n: [] for n in answers})
            per_node[node].append(entry(data))
    return found


def _parameters(pairs):
    """Parameters as ``[[name, doc], ...]`` in the order of their names."""
    return nice_sort(sorted(list(p) for p in pairs), key=lambda p: p[0])


# --- operating systems -------------------------------------------------------

def _os_entry(data):
    return [data.get("path"), bool(data.get("valid")),
            data.get("status") or "",
            list(data.get("variants") or []),
            [list(p) for p in data.get("parameters") or []],
            list(data.get("api_versions") or []),
            bool(data.get("trusted", True))]


def merge_os_diagnoses(answers, cluster):
    """{os name: info dict (the os fields)} from {node name: os_diagnose
    payload} of the nodes that answered."""
    result = {}
    for name, per_node in _by_provider(answers, _os_entry).items():
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
        variants = nice_sort(variants or [])
        os_hvp = {}
        osparams = {}
        for variant in variants:
            full = "%s+%s" % (name, variant)
            if full in (cluster.os_hvp or {}):
                os_hvp[full] = cluster.os_hvp[full]
            if full in (cluster.osparams or {}):
                osparams[full] = cluster.osparams[full]
        result[name] = {
            "name": name,
            "valid": valid,
            "hidden": name in (cluster.hidden_os or []),
            "blacklisted": name in (cluster.blacklisted_os or []),
            "variants": variants,
            "parameters": _parameters(parameters or []),
            "api_versions": sorted(api_versions or []),
            "node_status": per_node,
            "os_hvp": os_hvp,
            "osparams": osparams,
            "trusted": trusted,
        }
    return result


# --- ExtStorage providers ----------------------------------------------------

def _es_entry(data):
    return [data.get("path"), bool(data.get("valid")),
            data.get("status") or "",
            [list(p) for p in data.get("parameters") or []]]


def merge_extstorage_diagnoses(answers, group_of):
    """{provider: info dict (the extstorage fields)} from {node name:
    extstorage_diagnose payload}; ``group_of`` maps node names to group
    names."""
    result = {}
    for name, per_node in _by_provider(answers, _es_entry).items():
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
            "parameters": _parameters(parameters or []),
        }
    return result


# --- the query resources -----------------------------------------------------

def _key(name):
    return lambda run, item: item[name]


def build_os_fields():
    t = FieldTable()
    t.extend([
        Field("name", "Name", QFT_TEXT, "Operating system name",
              _key("name")),
        Field("valid", "Valid", QFT_BOOL,
              "Whether operating system definition is valid",
              _key("valid")),
        Field("hidden", "Hidden", QFT_BOOL,
              "Whether operating system is hidden", _key("hidden")),
        Field("blacklisted", "Blacklisted", QFT_BOOL,
              "Whether operating system is blacklisted",
              _key("blacklisted")),
        Field("variants", "Variants", QFT_OTHER,
              "Operating system variants", _key("variants")),
        Field("api_versions", "ApiVersions", QFT_OTHER,
              "Operating system API versions", _key("api_versions")),
        Field("parameters", "Parameters", QFT_OTHER,
              "Operating system parameters", _key("parameters")),
        Field("node_status", "NodeStatus", QFT_OTHER, "Status from node",
              _key("node_status")),
        Field("os_hvp", "OsHypervisorParams", QFT_OTHER,
              "Operating system specific hypervisor parameters",
              _key("os_hvp")),
        Field("osparams", "OsParameters", QFT_OTHER,
              "Operating system specific parameters", _key("osparams")),
        Field("trusted", "Trusted", QFT_BOOL, "Whether this OS is trusted",
              _key("trusted")),
    ])
    return t


def build_extstorage_fields():
    t = FieldTable()
    t.extend([
        Field("name", "Name", QFT_TEXT, "ExtStorage provider name",
              _key("name")),
        Field("node_status", "NodeStatus", QFT_OTHER, "Status from node",
              _key("node_status")),
        Field("nodegroup_status", "NodegroupStatus", QFT_OTHER,
              "Overall Nodegroup status", _key("nodegroup_status")),
        Field("parameters", "Parameters", QFT_OTHER,
              "ExtStorage provider parameters", _key("parameters")),
    ])
    return t


class _DiagnoseResource(Resource):
    """Rows built from every asked node's diagnosis (see the module)."""

    #: the rows come from the live-data provider (the nodes)
    provider = "live"
    #: the provider's method (the node procedure) giving the diagnoses
    method = None

    @abc.abstractmethod
    def merge(self, run, nodes, answers):
        """{name: info dict} from {node name: diagnosis} of ``nodes``."""

    def items(self, run, names):
        live = run.ctx.live
        method = getattr(live, self.method, None) if live is not None \
            else None
        if method is None:
            raise errors.OpPrereqError(
                "%s information is not available here (no node daemons to"
                " ask)" % self.noun, errors.ECODE_ENVIRON)
        nodes = diagnosed_nodes(run.cfg)
        if nodes:
            d = defer.maybeDeferred(method, [n.uuid for n in nodes])
        else:
            d = defer.succeed({})

        def failed(reason):
            log.failure("asking {count} node(s) for {method} failed",
                        reason, count=len(nodes), method=self.method)
            return {}

        def rows(answer):
            if not isinstance(answer, dict):
                answer = {}
            by_name = {}
            for node in nodes:
                payload = answer.get(node.uuid)
                if isinstance(payload, list):
                    by_name[node.name] = payload
                else:
                    # as OP_OS_DIAGNOSE: left out, it invalidates nothing
                    log.warn("node {node} gave no {method} answer; left"
                             " out", node=node.name, method=self.method)
            items = list(self.merge(run, nodes, by_name).values())
            if names is not None:
                items = lookup_by_name(items, names, self.noun,
                                       display=lambda i: i["name"],
                                       hostname=False)
            return items
        d.addErrback(failed)
        d.addCallback(rows)
        return d

    def item_name(self, item):
        return item["name"]


class OsResource(_DiagnoseResource):
    name = "os"
    noun = "OS"
    method = OS_DIAGNOSE
    fields = build_os_fields()

    def merge(self, run, nodes, answers):
        return merge_os_diagnoses(answers, run.cluster)


class ExtStorageResource(_DiagnoseResource):
    name = "extstorage"
    noun = "ExtStorage provider"
    method = EXTSTORAGE_DIAGNOSE
    fields = build_extstorage_fields()

    def merge(self, run, nodes, answers):
        return merge_extstorage_diagnoses(answers,
                                          node_groups(run.cfg, nodes))
