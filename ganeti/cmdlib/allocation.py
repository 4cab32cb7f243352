"""Placement for logical units: which allocators, what the nodes report,
the answer, or an error that changed nothing.

A logical unit that needs nodes chosen builds a request
(:mod:`ganeti.iallocator.requests`) and awaits :func:`allocate` in its
``check_prereq``, with its locks held and before it changes anything.
The allocators tried are the one(s) named in the opcode (``iallocator``,
a name or ``a,b``), or else the cluster's defaults for the request type,
in order, until one gives a valid successful answer.  Its parameters are
the cluster's ``default_iallocator_params``, the request's own (e.g.
``--ignore-soft-errors``) and the opcode's ``iallocator_params``.

Errors: every allocator answering "no solution" is an OpPrereqError
(insufficient resources) quoting their ``info``; an allocator that could
not be run, failed, or answered something invalid is an OpExecError
quoting what it said.  Either way nothing was changed.

Opportunistic locking (``opportunistic_locking`` of the instance creation
opcodes): the logical unit holds only the node locks that were free, and
passes them as ``locked_nodes``; the allocator must choose among those.
The input document shows the whole cluster as the nodes report it, with
the nodes not locked marked drained: every allocator knows that nothing
new goes to a drained node, and an answer naming one is refused like any
invalid answer.  Ganeti marks them offline instead, but Ganeti 3.0's hail
then sees those nodes' instances as stranded and its capacity checks
(global N+1) refuse placements that are fine: a drbd instance with a node
among the busy ones is enough to fail every request ("FailN1").  Drained
nodes keep their data, so the checks judge the real cluster.  (The
``restrict-to-nodes`` field of allocate requests would do as well, but
hail ignores it in multi-allocate requests.)

"No solution" among a part of the cluster is a temporary lack of
resources (ECODE_TEMP_NORES: try again later), unless every node could be
locked.
"""

import json
import re

import attr
from twisted.logger import Logger

from ganeti import errors
from ganeti.cmdlib import node_calls
from ganeti.iallocator import AllocatorError, AllocatorNotFound
from ganeti.iallocator import allocators as ia_allocators
from ganeti.iallocator import cluster_data
from ganeti.iallocator import defaults as ia_defaults
from ganeti.iallocator import requests as ia_requests

__all__ = ["Allocation", "registry", "allocator_names", "has_allocator",
           "require_allocator", "allocator_params", "collect_live",
           "input_data", "allocate", "run_for_test", "no_allocator_error",
           "unlocked_note"]

log = Logger()

#: seconds the nodes have to report their resources
LIVE_TIMEOUT = 30

_PARAM_KEY_FIELD = "iallocator_params"


@attr.s(frozen=True)
class Allocation(object):
    """A valid, successful answer."""
    allocator = attr.ib()       # name of the allocator that answered
    result = attr.ib()          # the request's checked result
    info = attr.ib()            # the allocator's "info" text
    data = attr.ib()            # the input document it answered


def registry(lu):
    """The master's allocator registry (one is made for a context without
    one, with Ganeti's standard search path under the master's root)."""
    ctx = lu.ctx
    reg = getattr(ctx, "allocators", None)
    if reg is None:
        from twisted.internet import reactor
        root = ctx.paths.root if ctx.paths is not None else "/"
        reg = ia_allocators.AllocatorRegistry(reactor, root=root)
        ctx.allocators = reg
    return reg


def cluster_defaults(cfg):
    try:
        return ia_defaults.parse_spec(cfg.cluster.default_iallocator)
    except errors.OpPrereqError as err:
        # only a hand-edited config.data gets here; say where it is wrong
        raise errors.OpPrereqError(
            "the cluster's default allocators cannot be used: %s"
            % err.args[0], errors.ECODE_STATE)


def allocator_names(cfg, mode, iallocator=None, field="iallocator"):
    """The allocators to try, in order: those named, else the cluster's
    defaults for ``mode`` (possibly none)."""
    if iallocator:
        return ia_defaults.parse_names(iallocator, field)
    return cluster_defaults(cfg).for_mode(mode)


def has_allocator(cfg, mode, iallocator=None):
    return bool(allocator_names(cfg, mode, iallocator))


def no_allocator_error(mode, instead):
    """The error when nothing says where to go."""
    return errors.OpPrereqError(
        "No instance allocator given and no default allocator for '%s'"
        " requests is configured: give %s, or an allocator (-I NAME /"
        " iallocator), or set a default with gnt-cluster modify"
        " --default-iallocator NAME" % (mode, instead), errors.ECODE_INVAL)


def require_allocator(cfg, mode, iallocator, instead):
    names = allocator_names(cfg, mode, iallocator)
    if not names:
        raise no_allocator_error(mode, instead)
    return names


def check_param(key, value, field):
    if not isinstance(key, str) or not ia_defaults.NAME_RE.match(key) or \
            key.startswith("-"):
        raise errors.OpPrereqError(
            "%s: '%s' is not a valid allocator parameter name (letters,"
            " digits, '_' and '-', not starting with '-')" % (field, key),
            errors.ECODE_INVAL)
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise errors.OpPrereqError(
            "%s: the value of '%s' must be a string, a number, a boolean or"
            " null, not %s" % (field, key, type(value).__name__),
            errors.ECODE_INVAL)


def allocator_params(cfg, request, op_params=None):
    """The allocator's parameters: cluster defaults < request < opcode."""
    result = {}
    for source, field in ((cfg.cluster.default_iallocator_params or {},
                           "default_iallocator_params"),
                          (request.extra_params(), "request"),
                          (op_params or {}, _PARAM_KEY_FIELD)):
        for key, value in source.items():
            check_param(key, value, field)
            result[key] = value
    return result


def check_op_params(op):
    """Refuse bad ``iallocator_params`` before anything else happens."""
    for key, value in (getattr(op, "iallocator_params", None) or {}).items():
        check_param(key, value, _PARAM_KEY_FIELD)


# --- what the nodes report -------------------------------------------------

async def collect_live(lu, disk_template, hypervisor=None):
    """:class:`~ganeti.iallocator.cluster_data.NodeLive` of every online
    vm_capable node (None for one that did not answer)."""
    cfg = lu.cfg
    cluster = cfg.cluster
    hv = hypervisor or cluster.default_hypervisor
    nodes = [n for n in cfg.nodes.values() if not n.offline and n.vm_capable]
    if not nodes:
        return {}
    unit = cluster_data.storage_unit(cluster, disk_template)
    rpc = node_calls.rpc_client(lu)
    names = [n.name for n in nodes]
    infos = await rpc.call_many(names, "node_info",
                                [[unit] if unit else [], [[hv, {}]]],
                                timeout=LIVE_TIMEOUT)
    running = await rpc.call_many(names, "all_instances_info",
                                  [list(cluster.enabled_hypervisors)],
                                  timeout=LIVE_TIMEOUT)
    infos = _by_name(names, infos)
    running = _by_name(names, running)
    result = {}
    for node in nodes:
        info = infos.get(node.name)
        if info is None or not info.success:
            result[node.uuid] = None
            continue
        payload = info.payload or {}
        hvs = payload.get("hypervisors") or []
        inst = running.get(node.name)
        result[node.uuid] = cluster_data.NodeLive(
            hv=hvs[0] if hvs else {},
            storage=payload.get("storage") or [],
            instances=(inst.payload or {}) if inst is not None and
            inst.success else None)
    return result


def _by_name(names, results):
    if isinstance(results, dict):
        return results
    return dict(zip(names, results))


async def input_data(lu, request, hypervisor=None, locked_nodes=None):
    """The input document for ``request``, with what the nodes report;
    nodes outside ``locked_nodes`` (if given) are shown drained."""
    # the nodes are asked about the storage the input document reports
    live = await collect_live(
        lu, cluster_data.data_template(lu.cfg.cluster, request), hypervisor)
    return cluster_data.build_input(lu.cfg, request, live,
                                    warn=lu.log_warning,
                                    only_nodes=locked_nodes)


# --- running the allocators --------------------------------------------------

def parse_answer(name, text):
    """The output document of allocator ``name`` (AllocatorError unless it
    is an object with success, info and result)."""
    try:
        answer = json.loads(text)
    except ValueError as err:
        raise AllocatorError("iallocator '%s' printed something that is not"
                             " JSON (%s): %s" % (name, err,
                                                 ia_allocators._quote(text)
                                                 or "(nothing)"))
    if not isinstance(answer, dict):
        raise AllocatorError("iallocator '%s' answered %s, not an object"
                             % (name, type(answer).__name__))
    if "nodes" in answer and "result" not in answer:
        answer["result"] = answer.pop("nodes")     # older allocators
    for key in ("success", "info", "result"):
        if key not in answer:
            raise AllocatorError("iallocator '%s' answered without '%s'"
                                 % (name, key))
    if not isinstance(answer["success"], bool):
        raise AllocatorError("iallocator '%s': 'success' is %r, not a"
                             " boolean" % (name, answer["success"]))
    return answer


#: how allocators say they do not know a request type (Ganeti's hail:
#: "Invalid request type 'balance'")
_NO_SUCH_TYPE = re.compile(
    r"\b(invalid|unknown|unsupported|not supported)\b.*\btype\b|"
    r"\btype\b.*\b(invalid|unknown|unsupported|not supported)\b",
    re.IGNORECASE | re.DOTALL)


def unsupported_type(mode, name, message):
    """The clear refusal when allocator ``name`` does not know a request
    type this master added to the protocol (``message``, what it said,
    calls the type invalid or unknown); None otherwise."""
    if mode not in ia_requests.EXTENSION_MODES or not message:
        return None
    if mode not in message or not _NO_SUCH_TYPE.search(message):
        return None
    return ("iallocator '%s' does not support %s requests: %s"
            % (name, mode, message.strip()))


def _said(err):
    return getattr(err, "said", None) or err.args[0]


class _Outcome(object):

    def __init__(self):
        self.no_solution = []   # (name, info)
        self.errors = []        # (name, message)


async def _try_one(lu, name, request, data, text, params, outcome):
    try:
        allocator = registry(lu).lookup(name)
        out = await allocator.run(data, text, params)
        answer = parse_answer(name, out)
    except AllocatorNotFound as err:
        outcome.errors.append((name, err.args[0]))
        return None
    except AllocatorError as err:
        outcome.errors.append((name, unsupported_type(
            request.MODE, name, _said(err)) or err.args[0]))
        return None
    info = answer.get("info")
    if not answer["success"]:
        refusal = unsupported_type(request.MODE, name, str(info))
        if refusal:
            outcome.errors.append((name, refusal))
        else:
            outcome.no_solution.append((name, info))
        return None
    try:
        result = request.check_result(answer["result"], data)
    except ia_requests.InvalidAnswer as err:
        outcome.errors.append((name, "iallocator '%s' returned an invalid"
                               " answer: %s" % (name, err.args[0])))
        return None
    return Allocation(allocator=name, result=result, info=info, data=data)


def _failure(mode, outcome, partial=None):
    """The error; ``partial``: why only a part of the cluster was offered
    (opportunistic locking), making "no solution" temporary."""
    if not outcome.errors:
        code, note = errors.ECODE_NORES, ""
        if partial:
            code, note = errors.ECODE_TEMP_NORES, " (%s)" % partial
        if len(outcome.no_solution) == 1:
            name, info = outcome.no_solution[0]
            return errors.OpPrereqError(
                "Can't compute nodes using iallocator '%s': %s%s"
                % (name, info, note), code)
        return errors.OpPrereqError(
            "No allocator could answer the %s request: %s%s"
            % (mode, "; ".join("'%s': %s" % (n, i)
                               for n, i in outcome.no_solution), note),
            code)
    parts = [msg for _, msg in outcome.errors] + \
        ["iallocator '%s' found no solution: %s" % (n, i)
         for n, i in outcome.no_solution]
    return errors.OpExecError("; ".join(parts) + " (nothing was changed)")


def unlocked_note(cfg, locked_nodes):
    """Why "no solution" may be temporary: the usable nodes that could
    not be locked, said for the error; None if there are none."""
    if locked_nodes is None:
        return None
    usable = [n for n in cfg.nodes.values() if not n.offline and
              n.vm_capable]
    left_out = [n for n in usable if n.uuid not in locked_nodes]
    if not left_out:
        return None
    return ("opportunistic locking: not all nodes could be locked, only"
            " %d of %d were offered to the allocator; try again later"
            % (len(usable) - len(left_out), len(usable)))


async def allocate(lu, request, names, op_params=None, hypervisor=None,
                   data=None, locked_nodes=None):
    """Ask ``names`` in order; the first valid successful
    :class:`Allocation`.  Raises (see the module) if none answers.
    ``locked_nodes`` (UUIDs): opportunistic locking, only those nodes
    may be chosen."""
    mode = request.MODE
    if not names:
        raise no_allocator_error(mode, "a node")
    params = allocator_params(lu.cfg, request, op_params)
    if locked_nodes is not None:
        locked_nodes = frozenset(locked_nodes)
    if data is None:
        data = await input_data(lu, request, hypervisor, locked_nodes)
    else:
        # the cluster as already gathered (and updated by the caller for
        # what it planned so far), asked something new
        data = dict(data, request=request.to_dict())
    text = json.dumps(data)
    outcome = _Outcome()
    for idx, name in enumerate(names):
        lu.log_info("Asking iallocator '%s' (%s request)", name, mode)
        found = await _try_one(lu, name, request, data, text, params,
                               outcome)
        if found is not None:
            if found.info:
                lu.log_info("iallocator '%s': %s", name, found.info)
            return found
        if idx + 1 < len(names):
            last = (outcome.errors + outcome.no_solution)[-1]
            lu.log_warning("iallocator '%s' gave no usable answer (%s);"
                           " trying '%s'", name, last[1], names[idx + 1])
    raise _failure(mode, outcome, unlocked_note(lu.cfg, locked_nodes))


async def run_for_test(lu, request, name, op_params=None, hypervisor=None):
    """OP_TEST_ALLOCATOR's "out": the allocator's output text, unchecked
    (as Ganeti shows it); an error if it could not be run."""
    params = allocator_params(lu.cfg, request, op_params)
    data = await input_data(lu, request, hypervisor)
    try:
        allocator = registry(lu).lookup(name)
        text = await allocator.run(data, json.dumps(data), params)
    except AllocatorError as err:
        raise errors.OpExecError(unsupported_type(
            request.MODE, name, _said(err)) or err.args[0])
    try:
        answer = parse_answer(name, text)
    except AllocatorError:
        return text
    if not answer["success"]:
        refusal = unsupported_type(request.MODE, name,
                                   str(answer.get("info")))
        if refusal:
            raise errors.OpExecError(refusal)
    return text


# --- requests built from the configuration -----------------------------------

#: Ganeti's shortcut for "the cluster's default allocator"
DEFAULT_SHORTCUT = "."


def explicit_allocator(op):
    """The opcode's ``iallocator``, None when it asks for the defaults
    (unset, or Ganeti's shortcut ".")."""
    name = getattr(op, "iallocator", None)
    if not name or name == DEFAULT_SHORTCUT:
        return None
    return name


def check_not_both(op, node_field, node_value):
    """Ganeti's rule: an allocator and a node are not given together."""
    if explicit_allocator(op) and node_value:
        raise errors.OpPrereqError(
            "iallocator, %s: give either an allocator or a node, not both"
            % node_field, errors.ECODE_INVAL)


def node_names(cfg, uuids):
    return [node_calls.node_name(cfg, u) for u in uuids]


def _nics_of(cluster, instance):
    from ganeti import constants, objects
    result = []
    for nic in instance.nics:
        filled = objects.fill_nicparams(cluster, nic)
        result.append({"mac": nic.mac, "ip": nic.ip,
                       "mode": filled.get(constants.NIC_MODE),
                       "link": filled.get(constants.NIC_LINK)})
    return result


def instance_spec_request(cfg, instance, disks=None, template=None,
                          name=None, restrict_to_nodes=None,
                          group_name=None):
    """An allocate request with an existing (or forthcoming) instance's
    spec: recreate-disks, moves, commits."""
    from ganeti import constants, objects
    cluster = cfg.cluster
    disks = cfg.instance_disks(instance) if disks is None else disks
    be = objects.fill_beparams(cluster, instance)
    if template is None:
        template = objects.disk_template_of(disks)
    return ia_requests.AllocateRequest(
        name=name or instance.name or instance.uuid,
        disk_template=template,
        memory=int(be[constants.BE_MAXMEM]),
        vcpus=int(be[constants.BE_VCPUS]),
        spindle_use=int(be[constants.BE_SPINDLE_USE]),
        disks=[{"size": d.size or 0, "mode": d.mode or constants.DISK_RDWR,
                "spindles": d.spindles} for d in disks],
        nics=_nics_of(cluster, instance),
        hypervisor=instance.hypervisor or cluster.default_hypervisor,
        os=instance.os or "", tags=sorted(instance.tags),
        group_name=group_name, restrict_to_nodes=restrict_to_nodes)


def relocate_request(cfg, instance, relocate_from):
    """A relocate request: a new node for ``instance`` in place of the
    node UUIDs ``relocate_from``."""
    disks = cfg.instance_disks(instance)
    template = _template(disks)
    sizes = [{"dev_type": d.dev_type, "size": d.size or 0} for d in disks]
    return ia_requests.RelocateRequest(
        name=instance.name or instance.uuid, disk_template=template,
        disk_space_total=ia_requests.disk_space_total(sizes),
        relocate_from=node_names(cfg, relocate_from),
        instance_nodes=node_names(cfg, instance.all_nodes))


def _template(disks):
    from ganeti import objects
    template = objects.disk_template_of(disks)
    return None if template == "mixed" else template


def create_request(cfg, op, name, template, beparams, restrict=None):
    """The allocate request of an OP_INSTANCE_CREATE (checked
    ``beparams``, ``template`` decided by the caller)."""
    from ganeti import constants, objects
    from ganeti.cmdlib import instance_disks
    cluster = cfg.cluster
    be = objects.fill_dict(objects.fill_dict(
        constants.BEC_DEFAULTS, cluster.beparams.get(constants.PP_DEFAULT,
                                                     {})),
        {k: v for k, v in (beparams or {}).items()
         if v != constants.VALUE_DEFAULT})
    disks = []
    for idx, params in enumerate(op.disks):
        size, mode, _, spindles = instance_disks.check_disk_params(params,
                                                                   idx)
        disks.append({"size": size, "mode": mode, "spindles": spindles})
    nics = []
    for params in op.nics:
        nic = {"mac": params.get("mac") or constants.VALUE_AUTO,
               "ip": params.get("ip")}
        for key in ("mode", "link", "network"):
            if params.get(key) is not None:
                nic[key] = params[key]
        nics.append(nic)
    return ia_requests.AllocateRequest(
        name=name, disk_template=template,
        memory=int(be[constants.BE_MAXMEM]), vcpus=int(be[constants.BE_VCPUS]),
        spindle_use=int(be[constants.BE_SPINDLE_USE]), disks=disks,
        nics=nics, hypervisor=op.hypervisor or cluster.default_hypervisor,
        os=op.os_type or "", tags=sorted(op.tags or []),
        group_name=op.group_name, restrict_to_nodes=restrict)


def release_other_nodes(lu, keep):
    """After a placement: give back the node locks the LU took to choose,
    except those of ``keep`` (UUIDs)."""
    from ganeti import locking
    glm = lu.ctx.glm
    keep = set(keep)
    for level in (locking.LEVEL_NODE, locking.LEVEL_NODE_RES):
        owned = glm.list_owned(level, lu.owner) if lu.owner else []
        drop = sorted(set(owned) - keep)
        if drop:
            glm.release(level, lu.owner, drop)
