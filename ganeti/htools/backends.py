"""Cluster sources other than the text format: an iallocator input
(``-I FILE``), the remote API (``-m CLUSTER``) and luxi (``-L``).

Each returns an unfinalised ``ClusterData`` (see
``ganeti.htools.cluster.finalize``).  Bad data raises ``HtoolsError``
naming the object and the field.
"""

import json
import os
import ssl
import urllib.error
import urllib.request

from ganeti.htools import types as T
from ganeti.htools.cluster import ClusterData
from ganeti.htools.model import Group, Instance, Node, NO_SECONDARY

DEFAULT_GROUP_UUID = "00000000-0000-0000-0000-000000000000"
#: node memory htools assume with the kvm hypervisor
STATIC_KVM_NODE_MEMORY = 4096
RAPI_PORT = 5080
RAPI_CONNECT_TIMEOUT = 15
RAPI_TIMEOUT = 60

_MISSING = object()


def _get(obj, key, owner, default=_MISSING):
    if type(obj) is dict:
        v = obj.get(key, _MISSING)
        if v is not _MISSING:
            return v
    elif not isinstance(obj, dict):
        raise T.HtoolsError("%s: expected an object, got %r"
                            % (owner, type(obj).__name__))
    elif key in obj:
        return obj[key]
    if default is _MISSING:
        raise T.HtoolsError("%s: missing field '%s'" % (owner, key))
    return default


def _num(obj, key, owner, kind=int, default=_MISSING, live=True):
    """A numeric field; ``live`` False gives the default (offline nodes
    may report nothing)."""
    if not live:
        return kind(0)
    v = _get(obj, key, owner, default)
    if type(v) is int and kind is int:
        return v  # the common case, checked first
    if v is None and default is not _MISSING:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise T.HtoolsError("%s: field '%s' is not a number: %r"
                            % (owner, key, v))
    if kind is int:
        if isinstance(v, float) and v != int(v):
            raise T.HtoolsError("%s: field '%s' is not an integer: %r"
                                % (owner, key, v))
        return int(v)
    return float(v)


def _bool(obj, key, owner, default=_MISSING):
    v = _get(obj, key, owner, default)
    if not isinstance(v, bool):
        raise T.HtoolsError("%s: field '%s' is not a boolean: %r"
                            % (owner, key, v))
    return v


def _strlist(obj, key, owner, default=_MISSING):
    v = _get(obj, key, owner, default)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise T.HtoolsError("%s: field '%s' is not a list of strings"
                            % (owner, key))
    return list(v)


def parse_ispec(d, owner):
    return T.ISpec(*[_num(d, k, owner) for k in (
        "memory-size", "cpu-count", "disk-size", "disk-count",
        "nic-count", "spindle-use")])


def parse_ipolicy(d, owner):
    """An instance policy in Ganeti's JSON form."""
    if d is None:
        return T.DEFAULT_IPOLICY
    mm = _get(d, "minmax", owner)
    if not isinstance(mm, list) or not mm:
        raise T.HtoolsError("%s: 'minmax' must be a non-empty list" % owner)
    minmax = tuple((parse_ispec(_get(x, "min", owner), owner + "/min"),
                    parse_ispec(_get(x, "max", owner), owner + "/max"))
                   for x in mm)
    dts = _strlist(d, "disk-templates", owner)
    for dt in dts:
        if dt not in T.DISK_TEMPLATES:
            raise T.HtoolsError("%s: unknown disk template '%s'"
                                % (owner, dt))
    return T.IPolicy(minmax, parse_ispec(_get(d, "std", owner),
                                         owner + "/std"),
                     tuple(dts), _num(d, "vcpu-ratio", owner, float),
                     _num(d, "spindle-ratio", owner, float))


def ipolicy_to_json(pol):
    return {"minmax": [{"min": a.to_dict(), "max": b.to_dict()}
                       for a, b in pol.minmax],
            "std": pol.std.to_dict(),
            "disk-templates": list(pol.disk_templates),
            "vcpu-ratio": pol.vcpu_ratio,
            "spindle-ratio": pol.spindle_ratio}


def _make_node(name, gidx, live, drained, excl, sptotal, spfree, mtotal,
               mnode, mfree, dtotal, dfree, ctotal, cnos, tags,
               cpu_speed=1.0):
    nd = Node(name, mtotal, mnode, mfree, dtotal, dfree, ctotal, cnos,
              (not live) or drained, sptotal, spfree, gidx, excl,
              cpu_speed)
    nd.drained = drained
    nd.tags = list(tags)
    return nd


# -- iallocator input ------------------------------------------------------

def parse_ialloc(data):
    """The cluster described by an iallocator request (Ganeti's JSON),
    e.g. the input the master gives to an allocator."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as e:
            raise T.HtoolsError("Invalid JSON in the iallocator input: %s"
                                % e)
    owner = "iallocator input"
    gdata = _get(data, "nodegroups", owner)
    groups = []
    for uuid, g in gdata.items():
        gown = "invalid data for group '%s'" % uuid
        apol = _get(g, "alloc_policy", gown)
        if apol not in T.ALLOC_POLICIES:
            raise T.HtoolsError("%s: unknown alloc_policy '%s'"
                                % (gown, apol))
        groups.append(Group(_get(g, "name", gown), uuid, apol,
                            _strlist(g, "tags", gown, []),
                            _strlist(g, "networks", gown, []),
                            parse_ipolicy(_get(g, "ipolicy", gown, None),
                                          gown)))
    gidx = {g.uuid: i for i, g in enumerate(groups)}
    nodes = []
    for name, n in _get(data, "nodes", owner).items():
        nown = "invalid data for node '%s'" % name
        offline = _bool(n, "offline", nown)
        drained = _bool(n, "drained", nown)
        guuid = _get(n, "group", nown)
        if guuid not in gidx:
            raise T.HtoolsError("Unknown group '%s' for node %s"
                                % (guuid, name))
        vm_cap = _bool(n, "vm_capable", nown, True)
        ndp = _get(n, "ndparams", nown)
        excl = _bool(ndp, "exclusive_storage", nown + "/ndparams")
        live = not offline and vm_cap
        if excl:
            sptotal = _num(n, "total_spindles", nown, live=live)
        else:
            sptotal = _num(ndp, "spindle_count", nown + "/ndparams")
        nd = _make_node(
            name, gidx[guuid], live, drained, excl, sptotal,
            _num(n, "free_spindles", nown, live=live),
            _num(n, "total_memory", nown, float, live=live),
            _num(n, "reserved_memory", nown, live=live),
            _num(n, "free_memory", nown, live=live),
            _num(n, "total_disk", nown, float, live=live),
            _num(n, "free_disk", nown, live=live),
            _num(n, "total_cpus", nown, float, live=live),
            _num(n, "reserved_cpus", nown, live=live),
            _strlist(n, "tags", nown, []),
            _num(ndp, "cpu_speed", nown + "/ndparams", float, 1.0))
        nd.is_master = bool(n.get("master", False))
        nd.vm_capable = vm_cap
        nodes.append(nd)
    for i, nd in enumerate(nodes):
        nd.idx = i
    nbyname = {nd.name: nd.idx for nd in nodes}
    instances = []
    for name, it in _get(data, "instances", owner).items():
        iown = "invalid data for instance '%s'" % name
        disks = _get(it, "disks", iown)
        if not isinstance(disks, list):
            raise T.HtoolsError("%s: 'disks' is not a list" % iown)
        sizes = [_num(d, "size", iown + "/disks") for d in disks]
        spindles = [_get(d, "spindles", iown + "/disks", None)
                    for d in disks]
        state = _get(it, "admin_state", iown, "up")
        status = {"up": "running", "down": "ADMIN_down",
                  "offline": "ADMIN_offline"}.get(state)
        if status is None:
            raise T.HtoolsError("%s: unknown admin_state '%s'"
                                % (iown, state))
        inodes = _strlist(it, "nodes", iown)
        if not inodes:
            raise T.HtoolsError("%s: empty node list" % iown)
        for nn in inodes[:2]:
            if nn not in nbyname:
                raise T.HtoolsError("Unknown node '%s' for instance %s"
                                    % (nn, name))
        pidx = nbyname[inodes[0]]
        sidx = nbyname[inodes[1]] if len(inodes) > 1 else NO_SECONDARY
        inst = Instance(
            name, _num(it, "memory", iown), _num(it, "disk_space_total",
                                                 iown),
            _num(it, "vcpus", iown), status, _strlist(it, "tags", iown),
            True, pidx, sidx, _get(it, "disk_template", iown),
            _num(it, "spindle_use", iown), disk_spindles=spindles or None,
            forthcoming=bool(it.get("forthcoming", False)),
            disk_sizes=sizes)
        inst.nics = list(_get(it, "nics", iown, []))
        instances.append(inst)
    cd = ClusterData(groups, nodes, instances,
                     _strlist(data, "cluster_tags", owner, []),
                     parse_ipolicy(data.get("ipolicy"), "cluster ipolicy"))
    cd.request = data.get("request")
    return cd


def load_ialloc_file(path):
    return parse_ialloc(T.read_input(path))


# -- RAPI ------------------------------------------------------------------

def rapi_url(spec):
    """Ganeti's rule: no colon -> https://SPEC:5080; otherwise as given
    (without a scheme: plain http)."""
    if ":" not in spec:
        return "https://%s:%d" % (spec, RAPI_PORT)
    if "://" not in spec:
        return "http://" + spec
    return spec.rstrip("/")


def _fetch_rapi(base):
    if base.startswith("file://"):
        d = base[len("file://"):]
        res = {}
        for key, fname in (("groups", "groups.json"),
                           ("nodes", "nodes.json"),
                           ("instances", "instances.json"),
                           ("info", "info.json")):
            path = os.path.join(d, fname)
            try:
                with open(path) as f:
                    res[key] = json.load(f)
            except OSError as e:
                raise T.HtoolsError("cannot read %s: %s"
                                    % (path, e.strerror))
            except ValueError as e:
                raise T.HtoolsError("invalid JSON in %s: %s" % (path, e))
        return res
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    res = {}
    for key, path in (("groups", "/2/groups?bulk=1"),
                      ("nodes", "/2/nodes?bulk=1"),
                      ("instances", "/2/instances?bulk=1"),
                      ("info", "/2/info")):
        req = urllib.request.Request(base + path,
                                     headers={"Accept": "*/*"})
        try:
            with urllib.request.urlopen(req, timeout=RAPI_TIMEOUT,
                                        context=ctx) as resp:
                body = resp.read()
        except urllib.error.HTTPError as e:
            raise T.HtoolsError("RAPI request %s failed: HTTP %d %s"
                                % (path, e.code, e.reason))
        except (urllib.error.URLError, OSError) as e:
            raise T.HtoolsError("RAPI request %s%s failed: %s"
                                % (base, path,
                                   getattr(e, "reason", e)))
        try:
            res[key] = json.loads(body)
        except ValueError as e:
            raise T.HtoolsError("invalid JSON from %s: %s" % (path, e))
    return res


def parse_rapi(groups_js, nodes_js, insts_js, info_js):
    """The cluster from the four RAPI answers (bulk lists and info)."""
    groups = []
    for g in groups_js:
        gown = "Group '%s'" % g.get("name") if isinstance(g, dict) \
            else "group"
        apol = _get(g, "alloc_policy", gown)
        if apol not in T.ALLOC_POLICIES:
            raise T.HtoolsError("%s: unknown alloc_policy '%s'"
                                % (gown, apol))
        groups.append(Group(_get(g, "name", gown), _get(g, "uuid", gown),
                            apol, _strlist(g, "tags", gown, []),
                            _strlist(g, "networks", gown, []),
                            parse_ipolicy(_get(g, "ipolicy", gown, None),
                                          gown)))
    gidx = {g.uuid: i for i, g in enumerate(groups)}
    hv = info_js.get("default_hypervisor") if isinstance(info_js, dict) \
        else None
    nodes = []
    for n in nodes_js:
        name = _get(n, "name", "node")
        nown = "Node '%s', error while parsing data" % name
        offline = _bool(n, "offline", nown)
        drained = _bool(n, "drained", nown)
        vm_cap = n.get("vm_capable")
        vm_cap = True if vm_cap is None else bool(vm_cap)
        ndp = _get(n, "ndparams", nown)
        excl = _bool(ndp, "exclusive_storage", nown)
        guuid = n.get("group.uuid") or DEFAULT_GROUP_UUID
        if guuid not in gidx:
            raise T.HtoolsError("Unknown group '%s' for node %s"
                                % (guuid, name))
        live = not offline and vm_cap
        if excl:
            sptotal = _num(n, "sptotal", nown, default=0, live=live)
        else:
            sptotal = _num(ndp, "spindle_count", nown)
        mnode = _num(n, "mnode", nown, live=live)
        if hv == "kvm" and live:
            mnode = STATIC_KVM_NODE_MEMORY
        nd = _make_node(
            name, gidx[guuid], live, drained, excl, sptotal,
            _num(n, "spfree", nown, default=0, live=live),
            _num(n, "mtotal", nown, float, live=live), mnode,
            _num(n, "mfree", nown, live=live),
            _num(n, "dtotal", nown, float, default=0.0, live=live),
            _num(n, "dfree", nown, default=0, live=live),
            _num(n, "ctotal", nown, float, live=live),
            _num(n, "cnos", nown, live=live),
            _strlist(n, "tags", nown, []),
            _num(ndp, "cpu_speed", nown, float, 1.0))
        nd.vm_capable = vm_cap
        nodes.append(nd)
    for i, nd in enumerate(nodes):
        nd.idx = i
    nbyname = {nd.name: nd.idx for nd in nodes}
    instances = []
    for it in insts_js:
        name = _get(it, "name", "instance")
        iown = "Instance '%s', error while parsing data" % name
        be = _get(it, "beparams", iown)
        omem = it.get("oper_ram")
        if isinstance(omem, (int, float)) and not isinstance(omem, bool):
            mem = int(omem)
        elif "memory" in be:
            mem = _num(be, "memory", iown)
        else:
            mem = _num(be, "maxmem", iown)
        pn = _get(it, "pnode", iown)
        if pn not in nbyname:
            raise T.HtoolsError("Unknown node '%s' for instance %s"
                                % (pn, name))
        sn = _strlist(it, "snodes", iown)
        if sn and sn[0] not in nbyname:
            raise T.HtoolsError("Unknown node '%s' for instance %s"
                                % (sn[0], name))
        sizes = _get(it, "disk.sizes", iown)
        spindles = _get(it, "disk.spindles", iown)
        instances.append(Instance(
            name, mem, _num(it, "disk_usage", iown), _num(be, "vcpus", iown),
            _get(it, "status", iown), _strlist(it, "tags", iown),
            _bool(be, "auto_balance", iown), nbyname[pn],
            nbyname[sn[0]] if sn else NO_SECONDARY,
            _get(it, "disk_template", iown), _num(be, "spindle_use", iown),
            disk_spindles=list(spindles) if spindles else None,
            forthcoming=bool(it.get("forthcoming") or False),
            disk_sizes=list(sizes or [])))
    ctags = _strlist(info_js, "tags", "cluster info", [])
    cd = ClusterData(groups, nodes, instances, ctags,
                     parse_ipolicy(info_js.get("ipolicy"), "cluster info"))
    master = info_js.get("master")
    if master is not None:
        if master not in nbyname:
            raise T.HtoolsError("Master node %s unknown" % master)
        nodes[nbyname[master]].is_master = True
    return cd


def load_rapi(spec):
    """Read a cluster through the remote API (or a directory of saved
    answers with ``file://DIR``)."""
    base = spec if spec.startswith("file://") else rapi_url(spec)
    js = _fetch_rapi(base)
    return parse_rapi(js["groups"], js["nodes"], js["instances"],
                      js["info"])


# -- luxi ------------------------------------------------------------------

LUXI_NODE_FIELDS = [
    "name", "mtotal", "mnode", "mfree", "dtotal", "dfree", "ctotal",
    "cnos", "offline", "drained", "vm_capable", "ndp/spindle_count",
    "group.uuid", "tags", "ndp/exclusive_storage", "sptotal", "spfree",
    "ndp/cpu_speed"]
#: asked after Ganeti's node fields: our master's disks reserved for
#: forthcoming instances, which its ``dfree`` already counts as used
#: (a Ganeti master answers "unknown field", and nothing changes)
LUXI_NODE_EXTRA_FIELDS = ["reserved.disk"]
LUXI_INSTANCE_FIELDS = [
    "name", "disk_usage", "be/memory", "be/vcpus", "status", "pnode",
    "snodes", "tags", "be/auto_balance", "disk_template", "be/spindle_use",
    "disk.sizes", "disk.spindles", "forthcoming"]
LUXI_GROUP_FIELDS = ["uuid", "name", "alloc_policy", "ipolicy", "tags"]


def _rows(answer, fields, what):
    """Query rows as dicts; a field without data (offline node...) is
    None."""
    try:
        data = answer["data"]
    except (TypeError, KeyError):
        raise T.HtoolsError("invalid answer to the %s query" % what)
    res = []
    for row in data:
        if len(row) != len(fields):
            raise T.HtoolsError("invalid row in the %s query" % what)
        d = {}
        for f, cell in zip(fields, row):
            status, value = cell
            d[f] = value if status == 0 else None
        res.append(d)
    return res


def parse_luxi(groups, nodes_rows, inst_rows, info):
    """The cluster from the luxi query results (lists of dicts)."""
    rapi_groups = [{"name": g["name"], "uuid": g["uuid"],
                    "alloc_policy": g["alloc_policy"],
                    "ipolicy": g["ipolicy"], "tags": g["tags"] or []}
                   for g in groups]
    rapi_nodes = []
    for n in nodes_rows:
        d = dict(n)
        # htools takes the forthcoming disks off dfree itself: give it
        # the node's own figure
        reserved = n.get("reserved.disk")
        if isinstance(reserved, (int, float)) and reserved and \
                isinstance(d.get("dfree"), (int, float)):
            d["dfree"] = d["dfree"] + reserved
        d["ndparams"] = {"spindle_count": n.get("ndp/spindle_count"),
                         "exclusive_storage":
                         bool(n.get("ndp/exclusive_storage")),
                         "cpu_speed": n.get("ndp/cpu_speed") or 1.0}
        if d["ndparams"]["spindle_count"] is None:
            d["ndparams"]["spindle_count"] = 1
        d["vm_capable"] = n.get("vm_capable")
        d["offline"] = bool(n.get("offline"))
        d["drained"] = bool(n.get("drained"))
        d["tags"] = n.get("tags") or []
        rapi_nodes.append(d)
    rapi_insts = []
    for it in inst_rows:
        d = dict(it)
        d["beparams"] = {"memory": it.get("be/memory"),
                         "vcpus": it.get("be/vcpus"),
                         "auto_balance": bool(it.get("be/auto_balance")),
                         "spindle_use": it.get("be/spindle_use")
                         if it.get("be/spindle_use") is not None else 1}
        d["oper_ram"] = None
        d["snodes"] = it.get("snodes") or []
        d["tags"] = it.get("tags") or []
        d["disk.sizes"] = it.get("disk.sizes") or []
        d["disk.spindles"] = it.get("disk.spindles") or []
        d["disk_usage"] = it.get("disk_usage") or 0
        rapi_insts.append(d)
    rinfo = {"master": info.get("master"), "tags": info.get("tags") or [],
             "ipolicy": info.get("ipolicy"),
             "default_hypervisor": info.get("default_hypervisor")}
    return parse_rapi(rapi_groups, rapi_nodes, rapi_insts, rinfo)


#: the queries a cluster is read with: (what, fields), then
#: QueryClusterInfo (see :func:`from_luxi_answers`)
LUXI_QUERIES = (("node", LUXI_NODE_FIELDS + LUXI_NODE_EXTRA_FIELDS),
                ("instance", LUXI_INSTANCE_FIELDS),
                ("group", LUXI_GROUP_FIELDS))


def from_luxi_answers(nodes, insts, info, groups):
    """The cluster from the raw answers to :data:`LUXI_QUERIES`
    (``Query`` results) and ``QueryClusterInfo``, however they were
    asked (a blocking client or the daemons' asynchronous one)."""
    return parse_luxi(_rows(groups, LUXI_GROUP_FIELDS, "group"),
                      _rows(nodes, LUXI_NODE_FIELDS + LUXI_NODE_EXTRA_FIELDS,
                            "node"),
                      _rows(insts, LUXI_INSTANCE_FIELDS, "instance"),
                      info or {})


def load_luxi(socket_path, client_factory=None):
    """Read a cluster from the master daemon over luxi, with Ganeti's
    queries (and :data:`LUXI_NODE_EXTRA_FIELDS`)."""
    from ganeti import errors, luxi
    factory = client_factory or luxi.BlockingClient
    try:
        client = factory(socket_path)
        try:
            nodes = client.query(
                "node", LUXI_NODE_FIELDS + LUXI_NODE_EXTRA_FIELDS, None)
            insts = client.query("instance", LUXI_INSTANCE_FIELDS, None)
            info = client.query_cluster_info()
            groups = client.query("group", LUXI_GROUP_FIELDS, None)
        finally:
            close = getattr(client, "close", None)
            if close is not None:
                close()
    except errors.GenericError as e:
        raise T.HtoolsError("luxi query on %s failed: %s"
                            % (socket_path, e))
    except OSError as e:
        raise T.HtoolsError("cannot talk to the master on %s: %s"
                            % (socket_path, e))
    return from_luxi_answers(nodes, insts, info, groups)


# -- writers (tests, tools that hand a cluster on) -------------------------

def _status_to_admin(status):
    if status == "ADMIN_offline":
        return "offline"
    if status in ("running", "ERROR_up", "ERROR_down", "ERROR_nodedown",
                  "ERROR_nodeoffline", "ERROR_wrongnode"):
        return "up"
    return "down"


def cluster_to_ialloc(cdata, request=None):
    """An iallocator input describing ``cdata`` (Ganeti's layout, with
    every field Ganeti's hail reads); the instances' run state is reduced
    to the admin state the format has."""
    groups = {g.uuid: {"name": g.name, "alloc_policy": g.alloc_policy,
                       "networks": list(g.networks),
                       "ipolicy": ipolicy_to_json(g.ipolicy),
                       "tags": list(g.tags)} for g in cdata.groups}
    nodes = {}
    for nd in cdata.nodes:
        d = {"tags": list(nd.tags), "primary_ip": "127.0.0.1",
             "secondary_ip": "127.0.0.1",
             "offline": nd.offline and not nd.drained,
             "drained": nd.drained,
             "master_candidate": True, "group": cdata.groups[nd.group].uuid,
             "master_capable": True, "vm_capable": nd.vm_capable,
             "ndparams": {"exclusive_storage": nd.excl_storage,
                          "spindle_count": nd.t_spindles,
                          "cpu_speed": nd.cpu_speed}}
        if not nd.offline:
            d.update({"total_memory": int(nd.t_mem),
                      "reserved_memory": nd.n_mem,
                      "free_memory": nd.f_mem,
                      "total_disk": int(nd.t_dsk), "free_disk": nd.f_dsk,
                      "total_spindles": nd.t_spindles,
                      "free_spindles": nd.f_spindles,
                      "total_cpus": int(nd.t_cpu),
                      "reserved_cpus": nd.n_cpu,
                      "i_pri_memory": 0, "i_pri_up_memory": 0})
        nodes[nd.name] = d
    insts = {}
    for inst in cdata.instances:
        nn = [cdata.nodes[inst.pnode].name]
        if inst.snode != NO_SECONDARY:
            nn.append(cdata.nodes[inst.snode].name)
        sizes = inst.disk_sizes or [inst.dsk]
        spindles = list(inst.disk_spindles or []) + [None] * len(sizes)
        disks = []
        for size, sp in zip(sizes, spindles):
            disk = {"size": size, "mode": "rw", "dev_type": "plain"}
            if sp is not None:
                disk["spindles"] = sp
            disks.append(disk)
        insts[inst.name] = {
            "tags": list(inst.tags),
            "admin_state": _status_to_admin(inst.status),
            "vcpus": inst.vcpus, "memory": inst.mem,
            "spindle_use": inst.spindle_use, "os": "debian",
            "nodes": nn, "nics": list(inst.nics), "disks": disks,
            "disk_template": inst.disk_template, "disks_active": True,
            "disk_space_total": inst.dsk, "hypervisor": "kvm",
            "forthcoming": inst.forthcoming}
    return {"version": 2, "cluster_name": "cluster.example.com",
            "cluster_tags": list(cdata.tags),
            "enabled_hypervisors": ["kvm"],
            "ipolicy": ipolicy_to_json(cdata.ipolicy),
            "nodegroups": groups, "nodes": nodes, "instances": insts,
            "request": request or {"type": "allocate", "name": "new",
                                   "disk_template": "plain", "tags": [],
                                   "os": "debian", "vcpus": 1,
                                   "memory": 128, "spindle_use": 1,
                                   "disks": [{"size": 1024, "mode": "rw"}],
                                   "disk_space_total": 1024, "nics": [],
                                   "required_nodes": 1,
                                   "hypervisor": "kvm"}}


def cluster_to_rapi(cdata):
    """The four RAPI answers (groups, nodes, instances, info) describing
    ``cdata`` with the fields htools read."""
    groups = [{"name": g.name, "uuid": g.uuid, "alloc_policy":
               g.alloc_policy, "ipolicy": ipolicy_to_json(g.ipolicy),
               "tags": list(g.tags), "networks": list(g.networks)}
              for g in cdata.groups]
    nodes = []
    for nd in cdata.nodes:
        live = not nd.offline

        def lv(v):
            return v if live else None
        nodes.append({
            "name": nd.name, "offline": nd.offline and not nd.drained,
            "drained": nd.drained, "vm_capable": nd.vm_capable,
            "ndparams": {"exclusive_storage": nd.excl_storage,
                         "spindle_count": nd.t_spindles,
                         "cpu_speed": nd.cpu_speed},
            "group.uuid": cdata.groups[nd.group].uuid,
            "mtotal": lv(int(nd.t_mem)), "mnode": lv(nd.n_mem),
            "mfree": lv(nd.f_mem), "dtotal": lv(int(nd.t_dsk)),
            "dfree": lv(nd.f_dsk), "ctotal": lv(int(nd.t_cpu)),
            "cnos": lv(nd.n_cpu), "sptotal": lv(nd.t_spindles),
            "spfree": lv(nd.f_spindles), "tags": list(nd.tags)})
    insts = []
    for inst in cdata.instances:
        insts.append({
            "name": inst.name, "disk_usage": inst.dsk,
            "disk.sizes": list(inst.disk_sizes),
            "disk.spindles": list(inst.disk_spindles),
            "beparams": {"vcpus": inst.vcpus, "memory": inst.mem,
                         "auto_balance": inst.auto_balance,
                         "spindle_use": inst.spindle_use},
            "oper_ram": None, "pnode": cdata.nodes[inst.pnode].name,
            "snodes": [] if inst.snode == NO_SECONDARY
            else [cdata.nodes[inst.snode].name],
            "status": inst.status, "tags": list(inst.tags),
            "disk_template": inst.disk_template,
            "forthcoming": inst.forthcoming})
    master = [nd.name for nd in cdata.nodes if nd.is_master]
    info = {"master": master[0] if master else None,
            "tags": list(cdata.tags),
            "ipolicy": ipolicy_to_json(cdata.ipolicy),
            "default_hypervisor": "xen-pvm"}
    return groups, nodes, insts, info
