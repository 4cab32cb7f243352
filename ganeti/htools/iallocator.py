"""The iallocator protocol: Ganeti's JSON request in, its JSON answer
out.  ``answer(request)`` is the built-in allocator (named "hail"): it
takes the parsed input document and returns the parsed answer, never
raising for bad input (``success`` false and an ``info`` naming the
field and the reason)."""

import contextlib
import gc

from ganeti.htools import alloc as A
from ganeti.htools import backends, cluster
from ganeti.htools import balance as B
from ganeti.htools import capplan as P
from ganeti.htools import dedicated as D
from ganeti.htools import evacuate as E
from ganeti.htools import score as S
from ganeti.htools import types as T
from ganeti.htools.model import Instance

MODES = ("allocate", "relocate", "change-group", "node-evacuate",
         "multi-allocate", "allocate-secondary", "balance", "capacity")


class BadRequest(Exception):
    pass


def _need(obj, key, owner, kinds, what):
    if not isinstance(obj, dict):
        raise BadRequest("%s: expected an object" % owner)
    if key not in obj:
        raise BadRequest("%s: missing field '%s'" % (owner, key))
    v = obj[key]
    if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
        raise BadRequest("%s: field '%s' must be %s, got %r"
                         % (owner, key, what, v))
    return v


def _int(obj, key, owner, minimum=0):
    v = _need(obj, key, owner, (int,), "an integer")
    if v < minimum:
        raise BadRequest("%s: field '%s' must be at least %d, got %d"
                         % (owner, key, minimum, v))
    return v


def _str(obj, key, owner):
    return _need(obj, key, owner, (str,), "a string")


def _strlist(obj, key, owner):
    v = _need(obj, key, owner, (list,), "a list of strings")
    if not all(isinstance(x, str) for x in v):
        raise BadRequest("%s: field '%s' must be a list of strings"
                         % (owner, key))
    return v


def _opt_bool(obj, key, owner, default):
    if obj.get(key) is None:
        return default
    return _need(obj, key, owner, (bool,), "true or false")


def new_instance(req, owner, extags_cdata):
    """The instance an allocate request describes."""
    name = _str(req, "name", owner)
    dt = _str(req, "disk_template", owner)
    if dt not in T.DISK_TEMPLATES:
        raise BadRequest("%s: unknown disk template '%s'" % (owner, dt))
    disks = _need(req, "disks", owner, (list,), "a list")
    sizes = []
    spindles = []
    for k, d in enumerate(disks):
        down = "%s/disks[%d]" % (owner, k)
        sizes.append(_int(d, "size", down))
        sp = d.get("spindles") if isinstance(d, dict) else None
        if sp is not None and (isinstance(sp, bool)
                               or not isinstance(sp, int)):
            raise BadRequest("%s: field 'spindles' must be an integer"
                             % down)
        spindles.append(sp)
    nics = _need(req, "nics", owner, (list,), "a list")
    for k, nic in enumerate(nics):
        if not isinstance(nic, dict):
            raise BadRequest("%s/nics[%d]: expected an object"
                             % (owner, k))
    inst = Instance(name, _int(req, "memory", owner),
                    _int(req, "disk_space_total", owner),
                    _int(req, "vcpus", owner), "running",
                    _strlist(req, "tags", owner), True, -1, -1, dt,
                    _int(req, "spindle_use", owner),
                    disk_spindles=spindles or None,
                    forthcoming=bool(req.get("forthcoming", False)),
                    disk_sizes=sizes)
    inst.nics = list(nics)
    allex = cluster.exclusion_prefixes(extags_cdata.tags)
    inst.excl_tags = [t for t in inst.tags
                      if any(t.startswith(p) for p in allex)]
    dprefixes = [t[len(T.DESIRED_LOCATION_PREFIX):] + ":"
                 for t in extags_cdata.tags
                 if t.startswith(T.DESIRED_LOCATION_PREFIX)]
    if dprefixes:
        inst.dsrd_loc_tags = frozenset(
            t for t in inst.tags if any(t.startswith(p) for p in dprefixes))
    return inst


def _required(req, owner):
    n = _int(req, "required_nodes", owner, 1)
    return n


def _instance(cd, name, owner):
    inst = cd.instance_by_name.get(name)
    if inst is None:
        raise BadRequest("%s: unknown instance '%s'" % (owner, name))
    return inst


def _ok(info, result):
    return {"success": True, "info": "Request successful: " + info,
            "result": result}


def _fail(info):
    return {"success": False, "info": "Request failed: " + info,
            "result": []}


def load(document):
    """(cluster, request) from an input document; BadRequest names the
    field."""
    if not isinstance(document, dict):
        raise BadRequest("the iallocator input must be a JSON object")
    req = _need(document, "request", "iallocator input", (dict,),
                "an object")
    rtype = _str(req, "type", "request")
    if rtype not in MODES:
        raise BadRequest("request: invalid type '%s' (one of %s)"
                         % (rtype, ", ".join(MODES)))
    for key in ("nodegroups", "nodes", "instances"):
        _need(document, key, "iallocator input", (dict,), "an object")
    _need(document, "cluster_tags", "iallocator input", (list,), "a list")
    try:
        cd = backends.parse_ialloc(document)
        hvs = document.get("enabled_hypervisors") or []
        if hvs and hvs[0] == "kvm":
            # hail takes a fixed node memory with kvm (as for RAPI)
            for nd in cd.nodes:
                if not nd.offline:
                    nd.n_mem = backends.STATIC_KVM_NODE_MEMORY
        cluster.finalize(cd)
    except T.HtoolsError as e:
        raise BadRequest(str(e))
    return cd, req


def process(cd, req, opts):
    """The answer for a loaded request; BadRequest for a malformed one;
    the model is left in the state after the request."""
    ctx = A.Context(cd, opts)
    rtype = req["type"]
    if rtype == "allocate":
        inst = new_instance(req, "request", cd)
        count = _required(req, "request")
        group = req.get("group_name")
        rest = req.get("restrict-to-nodes")
        if rest is not None:
            rest = _strlist(req, "restrict-to-nodes", "request")
            if opts.restrict_to_nodes is None:
                opts.restrict_to_nodes = rest
        allocate = D.allocate if D.is_dedicated(cd, group) else A.allocate
        try:
            sol = allocate(ctx, inst, count, group)
        except A.AllocError as e:
            return _fail(str(e))
        if sol.best is None:
            return _fail(", ".join(sol.log))
        return _ok(", ".join(sol.log),
                   [cd.nodes[i].name for i in inst.all_nodes()])
    if rtype == "multi-allocate":
        reqs = _need(req, "instances", "request", (list,), "a list")
        group = req.get("group_name")
        items = []
        for k, r in enumerate(reqs):
            owner = "request/instances[%d]" % k
            if not isinstance(r, dict):
                raise BadRequest("%s: expected an object" % owner)
            items.append((new_instance(r, owner, cd), _required(r, owner)))
        done, failed = [], []
        try:
            # the group (one for all instances) decides the algorithm
            if D.is_dedicated(cd, group):
                ok, bad = D.multi_allocate(ctx, items, group)
                done = [[inst.name, nodes] for inst, nodes in ok]
                failed = [[inst.name, why] for inst, why in bad]
            else:
                for inst, count in items:
                    sol = A.allocate(ctx, inst, count, group)
                    if sol.best is None:
                        failed.append([inst.name, ", ".join(sol.log)])
                    else:
                        done.append([inst.name, [cd.nodes[i].name
                                                 for i in inst.all_nodes()]])
        except A.AllocError as e:
            return _fail(str(e))
        return _ok("%d instances failed to allocate and %d were allocated"
                   " successfully" % (len(failed), len(done)),
                   [done, failed])
    if rtype == "relocate":
        inst = _instance(cd, _str(req, "name", "request"), "request")
        count = _required(req, "request")
        names = _strlist(req, "relocate_from", "request")
        idxs = []
        for n in names:
            nd = cd.node_by_name.get(n)
            if nd is None:
                raise BadRequest("request: unknown node '%s' in"
                                 " relocate_from" % n)
            idxs.append(nd.idx)
        try:
            return _ok("success", E.relocate(ctx, inst, count, idxs))
        except E.EvacFailed as e:
            return _fail(str(e))
    if rtype == "node-evacuate":
        insts = [_instance(cd, n, "request") for n in
                 _strlist(req, "instances", "request")]
        mode = _str(req, "evac_mode", "request")
        if mode not in E.EVAC_MODES:
            raise BadRequest("request: invalid evac_mode '%s' (one of %s)"
                             % (mode, ", ".join(E.EVAC_MODES)))
        res = E.node_evacuate(ctx, insts, mode)
        return _ok(res.info(), res.to_json(ctx))
    if rtype == "change-group":
        insts = [_instance(cd, n, "request") for n in
                 _strlist(req, "instances", "request")]
        gidxs = []
        for g in _strlist(req, "target_groups", "request"):
            grp = cd.find_group(g)
            if grp is None:
                raise BadRequest("request: unknown group '%s' in"
                                 " target_groups" % g)
            gidxs.append(grp.idx)
        res = E.change_group(ctx, insts, gidxs)
        return _ok(res.info(), res.to_json(ctx))
    if rtype == "balance":
        return balance(cd, req, opts)
    if rtype == "capacity":
        return capacity(cd, req, opts)
    # allocate-secondary
    inst = _instance(cd, _str(req, "name", "request"), "request")
    try:
        sol = E.allocate_secondary(ctx, inst)
    except A.AllocError as e:
        return _fail(str(e))
    if sol.best is None:
        return _fail(", ".join(sol.log))
    _score, _pdx, sdx = sol.best
    return _ok(", ".join(sol.log), cd.nodes[sdx].name)


def balance(cd, req, opts):
    """The balance request: hbal's moves for each selected group (all
    groups, one after the other, when ``group`` is null), at most
    ``max_moves`` in all, as the jobs hbal -X submits, in its order."""
    max_moves = req.get("max_moves")
    if max_moves is not None:
        max_moves = _int(req, "max_moves", "request")
    bopts = B.BalanceOptions(
        disk_moves=_opt_bool(req, "disk_moves", "request", True),
        evac_mode=_opt_bool(req, "evac_mode", "request", False),
        ignore_soft_errors=opts.ignore_soft_errors)
    if req.get("group") is None:
        groups = [g for g, _, _ in cd.split_groups()]
    else:
        grp = cd.find_group(_str(req, "group", "request"))
        if grp is None:
            raise BadRequest("request: unknown node group '%s' in group"
                             % req["group"])
        groups = [grp.idx]
    moved = {}      # instance name -> [name, group, nodes], first move order
    jobs = []
    parts = []
    nmoves = nsets = 0
    for gidx in groups:
        gnodes = cd.group_nodes(gidx)
        gname = cd.groups[gidx].name
        left = -1 if max_moves is None else max_moves - nmoves
        if left == 0 or not gnodes:
            continue
        bopts.max_length = left
        bal = B.Balancer(cd.nodes, gnodes, cd.group_instances(gidx), bopts)
        placements = bal.run()
        final = S.compute_score(gnodes)
        parts.append("group %s: score %.8f -> %.8f, %d moves"
                     % (gname, bal.initial_score, final, len(placements)))
        nmoves += len(placements)
        for jobset in B.split_jobs(placements):
            nsets += 1
            for pl in jobset:
                jobs.append(E.move_opcodes(pl.inst, pl.move, cd.nodes))
        for pl in placements:
            moved[pl.inst.name] = [pl.inst.name, gname, None]
    for entry in moved.values():
        inst = cd.instance_by_name[entry[0]]
        entry[2] = [cd.nodes[i].name for i in inst.all_nodes()]
    info = "%d moves in %d job sets; %s" % (nmoves, nsets,
                                            "; ".join(parts) or "no groups")
    return _ok(info, [list(moved.values()), [], jobs])


def capacity(cd, req, opts):
    """The capacity request: how many instances of the spec hspace's
    standard allocation places, and where, in allocation order."""
    dt = _str(req, "disk_template", "request")
    if dt not in T.DISK_TEMPLATES:
        raise BadRequest("request: unknown disk template '%s'" % dt)
    mem = _int(req, "memory", "request", 1)
    vcpus = _int(req, "vcpus", "request", 1)
    disks = _need(req, "disks", "request", (list,), "a list")
    dsk = 0
    spn = None
    for k, d in enumerate(disks):
        down = "request/disks[%d]" % k
        dsk += _int(d, "size", down)
        if d.get("spindles") is not None:
            spn = (spn or 0) + _int(d, "spindles", down)
    su = cd.ipolicy.std.spindle_use if req.get("spindle_use") is None \
        else _int(req, "spindle_use", "request")
    if req.get("name") is not None:
        _str(req, "name", "request")
    spec = P.RSpec(mem=mem, dsk=dsk, cpu=vcpus,
                   spn=1 if spn is None else spn)
    # hspace's rules: unallocable groups and groups that already fail
    # N+1 get nothing, and existing N+1 failures stop the planning
    bad = [nd for nd in cd.nodes if not nd.offline and nd.fail_n1]
    unalloc = {g.idx for g in cd.groups if g.alloc_policy == "unallocable"}
    unalloc.update(nd.group for nd in bad)
    placed = []
    if bad:
        reason = "the cluster is not N+1 happy (%s)" % ", ".join(
            nd.name for nd in bad)
    else:
        planner = P.Planner(cd, opts, dt, {g.idx for g in cd.groups
                                           if g.idx not in unalloc})
        try:
            stats = planner.iterate(P.make_instance(spec, dt, su), None,
                                    placed)
        except A.AllocError as e:
            return _fail(str(e))
        stats = sorted(stats, key=lambda mc: -mc[1])
        reason = "most likely failure reason: %s" % stats[0][0]
    allocs = [[cd.nodes[i].name for i in inst.all_nodes()]
              for inst in placed]
    return _ok("%d instances of %d MiB memory, %d MiB disk, %d vcpus"
               " (%s) fit; %s" % (len(placed), mem, dsk, vcpus, dt, reason),
               {"count": len(placed), "allocations": allocs})


def run(document, opts=None):
    """(answer, cluster or None, warnings): the cluster in its state
    after the request, for the command's -p/-S."""
    opts = opts or A.AllocOptions()
    try:
        cd, req = load(document)
    except BadRequest as e:
        return _fail("invalid iallocator input: %s" % e), None, []
    try:
        return process(cd, req, opts), cd, cd.warnings
    except BadRequest as e:
        return _fail("invalid request: %s" % e), cd, cd.warnings


#: the allocator parameters the built-in takes: Ganeti's hail options
PARAMS = ("ignore-soft-errors", "no-capacity-checks", "restrict-allocation-to")


def options_from_params(params):
    """AllocOptions from the master's allocator parameters (``{"key":
    value}``, value None or True for a flag), as hail takes them on its
    command line; BadRequest names an unknown one."""
    opts = A.AllocOptions()
    for key, value in sorted((params or {}).items()):
        flag = value is None or value is True
        if key == "ignore-soft-errors" and flag:
            opts.ignore_soft_errors = True
        elif key == "no-capacity-checks" and flag:
            opts.capacity = False
        elif key == "restrict-allocation-to" and isinstance(value, str):
            opts.restrict_to_nodes = [x for x in value.split(",") if x]
        elif value is False:
            continue
        else:
            raise BadRequest(
                "allocator parameter '%s': not one of the built-in"
                " allocator's (%s), or a wrong value %r"
                % (key, ", ".join(PARAMS), value))
    return opts


@contextlib.contextmanager
def _no_collector_passes():
    """An answer builds the cluster model, many small objects at once:
    the cyclic garbage collector's passes over them took a fifth of the
    time of an answer on 1,000 nodes and free nothing.  Paused for the
    answer (a fraction of a second), resumed after; what became garbage
    is collected then."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def answer(request, opts=None, params=None):
    """The built-in allocator: the answer document for an iallocator
    input document (both parsed JSON).  ``params`` are the master's
    allocator parameters (Ganeti's hail options); ``opts`` AllocOptions
    for callers in this package."""
    if params:
        try:
            opts = options_from_params(params)
        except BadRequest as e:
            return _fail(str(e))
    try:
        with _no_collector_passes():
            return run(request, opts)[0]
    except Exception as e:  # an internal error must not kill the caller
        return _fail("internal error in the allocator: %s: %s"
                     % (type(e).__name__, e))
