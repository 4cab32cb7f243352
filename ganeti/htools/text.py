"""Ganeti's htools text format (``-t FILE``, ``-S``, hscan): read and
write.

Sections are separated by one empty line: groups, nodes, instances,
cluster tags and (optionally) instance policies; columns by ``|``.
Writing what was read gives back Ganeti's own files byte for byte.
"""

import decimal
import math

from ganeti.htools import types as T
from ganeti.htools.cluster import ClusterData
from ganeti.htools.model import Group, Instance, Node, NO_SECONDARY


def show_double(x):
    """A float as Haskell's ``show`` prints it (``1.0``, ``0.1``,
    ``1.0e7``, ``1.0e-2``): used for CPU speed and policy ratios."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    ax = abs(x)
    # shortest round-trip digits and exponent
    digits, exp = _shortest_digits(ax)
    if 0.1 <= ax < 10 ** 7:
        if exp <= 0:
            return "%s0.%s%s" % (sign, "0" * (-exp), digits)
        if exp >= len(digits):
            return "%s%s%s.0" % (sign, digits, "0" * (exp - len(digits)))
        return "%s%s.%s" % (sign, digits[:exp], digits[exp:])
    frac = digits[1:] or "0"
    return "%s%s.%se%d" % (sign, digits[0], frac, exp - 1)


def fixed(x, prec):
    """``%.<prec>f`` as Haskell's printf renders it: the shortest decimal
    form of the float, rounded half to even (Python rounds the exact binary
    value: 0.95775 is just below the tie in binary)."""
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return "%.*f" % (prec, x)
    d = decimal.Decimal(repr(x)).quantize(decimal.Decimal(1).scaleb(-prec),
                                          rounding=decimal.ROUND_HALF_EVEN)
    res = "%.*f" % (prec, d)
    if res.startswith("-") and decimal.Decimal(res) == 0:
        res = res[1:] if x > -0.5 * 10 ** -prec else res
    return res


def _shortest_digits(ax):
    """(digits, e) with ax = 0.digits * 10**e, digits the shortest
    representation that reads back as ax."""
    r = repr(ax)
    if "e" in r:
        mant, e = r.split("e")
        e = int(e)
    else:
        mant, e = r, 0
    if "." in mant:
        ip, fp = mant.split(".")
    else:
        ip, fp = mant, ""
    if fp == "0":
        fp = ""
    digits = (ip + fp).lstrip("0")
    lead = len(ip.lstrip("0")) if ip.strip("0") else \
        -(len(fp) - len(fp.lstrip("0")))
    digits = digits.rstrip("0") or "0"
    return digits, lead + e


def _read_num(owner, value, kind=int):
    try:
        return kind(value)
    except ValueError:
        raise T.HtoolsError("%s: cannot parse '%s' as %s"
                            % (owner, value,
                               "integer" if kind is int else "number"))


def _read_float(owner, value):
    return _read_num(owner, value, float)


def _comma_split(s):
    return s.split(",") if s else []


def _load_group(fields):
    if len(fields) not in (4, 5):
        raise T.HtoolsError("Invalid/incomplete group data: '%s'"
                            % "|".join(fields))
    name, uuid, apol, tags = fields[:4]
    nets = fields[4] if len(fields) == 5 else ""
    if apol not in T.ALLOC_POLICIES:
        raise T.HtoolsError("Invalid alloc policy '%s' for group %s"
                            % (apol, name))
    return Group(name, uuid, apol, _comma_split(tags), _comma_split(nets))


def _load_node(fields, groups_by_uuid):
    if not 9 <= len(fields) <= 15:
        raise T.HtoolsError("Invalid/incomplete node data: '%s'"
                            % "|".join(fields))
    fields = fields + ["1", "", "N", "0", "1", "1.0"][len(fields) - 9:]
    (name, tm, nm, fm, td, fd, tc, fo, gu, spindles, tags, excl, fsp,
     nos, speed) = fields
    grp = groups_by_uuid.get(gu)
    if grp is None:
        raise T.HtoolsError("Unknown group '%s' for node %s" % (gu, name))
    if fo not in ("Y", "N", "M"):
        raise T.HtoolsError("Invalid offline/master status '%s' for node"
                            " %s" % (fo, name))
    if "?" in (tm, nm, fm, td, fd, tc):
        nd = Node(name, 0, 0, 0, 0, 0, 0, 0, True, 0, 0, grp.idx, False)
        return nd
    if excl not in ("Y", "N"):
        raise T.HtoolsError("Invalid exclusive_storage value '%s' for node"
                            " %s" % (excl, name))
    nd = Node(name, _read_float(name, tm), _read_num(name, nm),
              _read_num(name, fm), _read_float(name, td),
              _read_num(name, fd), _read_float(name, tc),
              _read_num(name, nos), fo == "Y", _read_num(name, spindles),
              _read_num(name, fsp), grp.idx, excl == "Y",
              _read_float(name, speed))
    nd.is_master = fo == "M"
    nd.tags = _comma_split(tags)
    return nd


def _load_instance(fields, nodes_by_name):
    if not 10 <= len(fields) <= 13:
        raise T.HtoolsError("Invalid/incomplete instance data: '%s'"
                            % "|".join(fields))
    fields = fields + ["1", "-", "N"][len(fields) - 10:]
    (name, mem, dsk, vcpus, status, abal, pnode, snode, dt, tags, su,
     spindles, forth) = fields
    pn = nodes_by_name.get(pnode)
    if pn is None:
        raise T.HtoolsError("Unknown node '%s' for instance %s"
                            % (pnode, name))
    if snode:
        sn = nodes_by_name.get(snode)
        if sn is None:
            raise T.HtoolsError("Unknown node '%s' for instance %s"
                                % (snode, name))
        sidx = sn.idx
    else:
        sidx = NO_SECONDARY
    if sidx == pn.idx:
        raise T.HtoolsError("Instance %s has same primary and secondary"
                            " node - %s" % (name, pnode))
    if abal not in ("Y", "N"):
        raise T.HtoolsError("Invalid auto_balance value '%s' for instance"
                            " %s" % (abal, name))
    if forth not in ("Y", "N"):
        raise T.HtoolsError("Invalid forthcoming value '%s' for instance"
                            " %s" % (forth, name))
    vdsk = _read_num(name, dsk)
    if spindles == "-":
        sp = None
    else:
        sp = _read_num(name, spindles)
    return Instance(name, _read_num(name, mem), vdsk,
                    _read_num(name, vcpus), status, _comma_split(tags),
                    abal == "Y", pn.idx, sidx, dt, _read_num(name, su),
                    disk_spindles=[sp], forthcoming=forth == "Y",
                    disk_sizes=[vdsk])


def _load_ispec(owner, text):
    parts = _comma_split(text)
    if len(parts) != 6:
        raise T.HtoolsError("Invalid ispec data for %s: %s"
                            % (owner, text))
    names = ("memsize", "cpucount", "disksize", "diskcount", "niccount",
             "spindleuse")
    vals = [_read_num("%s/%s" % (owner, n), v)
            for n, v in zip(names, parts)]
    return T.ISpec(*vals)


def _load_ipolicy(fields):
    if len(fields) != 6:
        raise T.HtoolsError("Invalid ipolicy data: '%s'" % "|".join(fields))
    owner, std, minmax, dts, vcpu, spindle = fields
    stdspec = _load_ispec(owner + "/stdspec", std)
    specs = minmax.split(";")
    if len(specs) % 2 or not specs:
        raise T.HtoolsError("Invalid minmax specification for %s: %s"
                            % (owner, minmax))
    mm = tuple((_load_ispec(owner + "/minspec", specs[i]),
                _load_ispec(owner + "/maxspec", specs[i + 1]))
               for i in range(0, len(specs), 2))
    templates = _comma_split(dts)
    for dt in templates:
        if dt not in T.DISK_TEMPLATES:
            raise T.HtoolsError("Invalid disk template '%s' in the policy"
                                " of %s" % (dt, owner or "the cluster"))
    return owner, T.IPolicy(mm, stdspec, tuple(templates),
                            _read_float(owner + "/vcpu_ratio", vcpu),
                            _read_float(owner + "/spindle_ratio", spindle))


def parse_text(data):
    """Parse the text format into an unfinalised ``ClusterData``."""
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    sections = [[]]
    for line in lines:
        if line == "":
            sections.append([])
        else:
            sections[-1].append(line)
    if len(sections) == 4:
        sections.append([])
    if len(sections) != 5:
        raise T.HtoolsError("Invalid format of the input file: %d sections"
                            " instead of 4 or 5" % len(sections))
    glines, nlines, ilines, ctags, plines = sections
    groups = [_load_group(line.split("|")) for line in glines]
    for i, g in enumerate(groups):
        g.idx = i
    by_uuid = {g.uuid: g for g in groups}
    nodes = []
    for line in nlines:
        nd = _load_node(line.split("|"), by_uuid)
        nd.idx = len(nodes)
        nodes.append(nd)
    by_name = {n.name: n for n in nodes}
    instances = []
    for line in ilines:
        inst = _load_instance(line.split("|"), by_name)
        inst.idx = len(instances)
        instances.append(inst)
    cpol = T.DEFAULT_IPOLICY
    gbyname = {g.name: g for g in groups}
    for line in plines:
        owner, pol = _load_ipolicy(line.split("|"))
        if owner == "":
            cpol = pol
        else:
            g = gbyname.get(owner)
            if g is None:
                raise T.HtoolsError("Unknown group '%s' in the instance"
                                    " policies" % owner)
            g.ipolicy = pol
    return ClusterData(groups, nodes, instances, ctags, cpol)


def load_text_file(path):
    return parse_text(T.read_input(path))


# -- writer ------------------------------------------------------------

def serialize_node(nd, groups):
    role = "Y" if nd.offline else ("M" if nd.is_master else "N")
    return "%s|%.0f|%d|%d|%.0f|%d|%.0f|%s|%s|%d|%s|%s|%d|%d|%s" % (
        nd.name, nd.t_mem, nd.n_mem, nd.f_mem, nd.t_dsk, nd.f_dsk,
        nd.t_cpu, role, groups[nd.group].uuid, nd.t_spindles,
        ",".join(nd.tags), "Y" if nd.excl_storage else "N",
        nd.f_spindles, nd.n_cpu, show_double(nd.cpu_speed))


def serialize_instance(inst, nodes):
    snode = nodes[inst.snode].name if inst.snode != NO_SECONDARY else ""
    sp = inst.total_spindles
    return "%s|%d|%d|%d|%s|%s|%s|%s|%s|%s|%d|%s|%s" % (
        inst.name, inst.mem, inst.dsk, inst.vcpus, inst.status,
        "Y" if inst.auto_balance else "N", nodes[inst.pnode].name, snode,
        inst.disk_template, ",".join(inst.tags), inst.spindle_use,
        "-" if sp is None else "%d" % sp,
        "Y" if inst.forthcoming else "N")


def serialize_ipolicy(owner, pol):
    mm = ";".join("%s;%s" % (a.serialize(), b.serialize())
                  for a, b in pol.minmax)
    return "|".join([owner, pol.std.serialize(), mm,
                     ",".join(pol.disk_templates),
                     show_double(pol.vcpu_ratio),
                     show_double(pol.spindle_ratio)])


def serialize_cluster(cdata):
    """The text format of a cluster (what ``hbal -S`` writes)."""
    out = []
    for g in cdata.groups:
        out.append("%s|%s|%s|%s|%s\n" % (g.name, g.uuid, g.alloc_policy,
                                         ",".join(g.tags),
                                         ",".join(g.networks)))
    out.append("\n")
    for nd in cdata.nodes:
        out.append(serialize_node(nd, cdata.groups) + "\n")
    out.append("\n")
    for inst in cdata.instances:
        out.append(serialize_instance(inst, cdata.nodes) + "\n")
    out.append("\n")
    for t in cdata.tags:
        out.append(t + "\n")
    out.append("\n")
    out.append(serialize_ipolicy("", cdata.ipolicy) + "\n")
    for g in cdata.groups:
        out.append(serialize_ipolicy(g.name, g.ipolicy) + "\n")
    return "".join(out)
