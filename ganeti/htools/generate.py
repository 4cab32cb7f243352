"""Random clusters in the htools text format, for tests and benchmarks.

The clusters are consistent (free memory and disk agree with the
instances placed) and, by default, unbalanced: most primaries are put on
the first half of the nodes.  Options add the features the score has to
get right: offline nodes, several groups, forthcoming and stopped
instances, exclusion and location tags, exclusive storage.
"""

import random

import attrs

from ganeti.htools.text import show_double

STATUSES_DOWN = ("ADMIN_down", "ERROR_down", "USER_down", "ADMIN_offline")


@attrs.define
class GenSpec:
    nodes: int = 20
    inst_per_node: float = 8.0
    groups: int = 1
    #: share of instances using drbd; the others are plain (and a few
    #: diskless when ``diskless`` > 0)
    drbd: float = 0.5
    diskless: float = 0.0
    #: share of primaries placed on the first half of each group
    crowd: float = 0.8
    offline: float = 0.0
    down: float = 0.0
    forthcoming: float = 0.0
    #: exclusion tag prefixes (cluster tags htools:iextags:...) and the
    #: share of instances carrying one
    excl_tags: float = 0.0
    #: location tags on nodes (htools:nlocation:...)
    locations: int = 0
    excl_storage: bool = False
    #: with ``excl_storage``, only the groups of these indices have it
    #: (None: every group)
    excl_groups: tuple = None
    #: allocation policy of each group (None: all preferred)
    group_policies: tuple = None
    #: the instance policy's min/max ranges, as in the text format
    #: (``min;max[;min;max...]``; None: one default range)
    minmax: str = None
    #: instance sizes (memory, disk, vcpus, spindles) to choose from;
    #: None: small random sizes.  With sizes, an instance only goes
    #: where its memory, disk and spindles still fit.
    sizes: tuple = None
    node_mem: int = 65536
    node_disk: int = 2 * 1024 * 1024
    node_cpus: int = 32
    varied_nodes: bool = False
    cpu_speed: bool = False
    no_auto_balance: float = 0.0
    seed: int = 0
    name_suffix: str = ""


def generate_text(spec):
    """The text-format file of a random cluster built from ``spec``."""
    rnd = random.Random(spec.seed)
    groups = []
    for g in range(spec.groups):
        uuid = "%08x-0000-4000-8000-%012x" % (g + 1, g + 1)
        groups.append(("group%d" % (g + 1), uuid))
    sfx = spec.name_suffix

    def excl_group(g):
        return spec.excl_storage and (spec.excl_groups is None
                                      or g in spec.excl_groups)

    nodes = []
    for i in range(spec.nodes):
        g = i % spec.groups
        if spec.varied_nodes:
            tm = rnd.choice([spec.node_mem // 2, spec.node_mem,
                             spec.node_mem * 2])
            td = rnd.choice([spec.node_disk // 2, spec.node_disk])
            tc = rnd.choice([spec.node_cpus // 2, spec.node_cpus])
        else:
            tm, td, tc = spec.node_mem, spec.node_disk, spec.node_cpus
        nodes.append({
            "name": "node%04d%s" % (i + 1, sfx), "group": g, "tm": tm,
            "nm": 1024 + rnd.randrange(0, 1024, 128), "td": td, "tc": tc,
            "offline": rnd.random() < spec.offline,
            "spindles": rnd.choice([4, 8, 12]) if spec.excl_storage else 1,
            "tags": [], "speed": rnd.choice([1.0, 1.5, 2.0])
            if spec.cpu_speed else 1.0,
            "used_mem": 0, "used_dsk": 0, "used_sp": 0,
        })
    nodes[0]["master"] = True
    if spec.locations:
        for nd in nodes:
            nd["tags"].append("rack:r%d" % rnd.randrange(spec.locations))
            if rnd.random() < 0.5:
                nd["tags"].append("power:p%d"
                                  % rnd.randrange(spec.locations))
    by_group = {}
    for i, nd in enumerate(nodes):
        by_group.setdefault(nd["group"], []).append(i)
    ninst = int(spec.nodes * spec.inst_per_node)
    insts = []
    for k in range(ninst):
        g = k % spec.groups
        members = by_group.get(g, [])
        if len(members) < 2:
            continue
        half = members[:max(1, len(members) // 2)]
        if spec.sizes:
            mem, dsk, vcpus, size_spn = rnd.choice(spec.sizes)
        else:
            mem = rnd.choice([512, 1024, 2048, 4096])
            dsk = rnd.choice([5120, 10240, 20480, 51200])
            vcpus = rnd.choice([1, 1, 2, 4])
        r = rnd.random()
        if r < spec.diskless:
            dt = "diskless"
        elif r < spec.diskless + spec.drbd:
            dt = "drbd"
        else:
            dt = "plain"
        forth = rnd.random() < spec.forthcoming
        status = "running"
        if rnd.random() < spec.down:
            status = rnd.choice(STATUSES_DOWN)
        for _attempt in range(20):
            pool = half if rnd.random() < spec.crowd else members
            p = rnd.choice(pool)
            pn = nodes[p]
            need = mem if status == "running" and not forth else 0
            if pn["tm"] - pn["nm"] - pn["used_mem"] - need > 1024:
                s = -1
                if dt == "drbd":
                    others = [m for m in members if m != p]
                    s = rnd.choice(others)
                if not spec.sizes or _room(
                        [nodes[x] for x in (p, s) if x >= 0],
                        0 if forth or dt == "diskless" else dsk,
                        size_spn if excl_group(g) else 0):
                    break
        else:
            continue
        pn["used_mem"] += need
        if spec.sizes:
            spn = size_spn if spec.excl_storage else None
        else:
            spn = rnd.choice([1, 2]) if spec.excl_storage else None
        if dt in ("drbd", "plain") and not forth:
            pn["used_dsk"] += dsk
            if spn:
                pn["used_sp"] += spn
            if s >= 0:
                nodes[s]["used_dsk"] += dsk
                if spn:
                    nodes[s]["used_sp"] += spn
        tags = []
        if spec.excl_tags and rnd.random() < spec.excl_tags:
            tags.append("service:%s" % rnd.choice(["web", "db", "mail"]))
        insts.append({
            "name": ("%s%05d%s" % ("forth" if forth else "inst", k + 1,
                                   sfx)),
            "mem": mem, "dsk": dsk if dt != "diskless" else 0,
            "vcpus": vcpus, "status": status,
            "abal": "N" if rnd.random() < spec.no_auto_balance else "Y",
            "p": p, "s": s, "dt": dt, "tags": tags,
            "su": rnd.choice([1, 1, 2]), "sp": spn, "forth": forth,
        })
    out = []
    for g, (name, uuid) in enumerate(groups):
        pol = spec.group_policies[g] if spec.group_policies else "preferred"
        out.append("%s|%s|%s||\n" % (name, uuid, pol))
    out.append("\n")
    for nd in nodes:
        role = "Y" if nd["offline"] else ("M" if nd.get("master") else "N")
        fm = nd["tm"] - nd["nm"] - nd["used_mem"]
        fd = nd["td"] - nd["used_dsk"]
        excl = excl_group(nd["group"])
        fsp = max(0, nd["spindles"] - nd["used_sp"]) if excl else 0
        out.append("%s|%d|%d|%d|%d|%d|%d|%s|%s|%d|%s|%s|%d|%d|%s\n" % (
            nd["name"], nd["tm"], nd["nm"], fm, nd["td"], fd, nd["tc"],
            role, groups[nd["group"]][1], nd["spindles"],
            ",".join(nd["tags"]), "Y" if excl else "N", fsp,
            1, show_double(nd["speed"])))
    out.append("\n")
    for it in insts:
        out.append("%s|%d|%d|%d|%s|%s|%s|%s|%s|%s|%d|%s|%s\n" % (
            it["name"], it["mem"], it["dsk"], it["vcpus"], it["status"],
            it["abal"], nodes[it["p"]]["name"],
            nodes[it["s"]]["name"] if it["s"] >= 0 else "", it["dt"],
            ",".join(it["tags"]), it["su"],
            "-" if it["sp"] is None else "%d" % it["sp"],
            "Y" if it["forth"] else "N"))
    out.append("\n")
    if spec.excl_tags:
        out.append("htools:iextags:service\n")
    if spec.locations:
        out.append("htools:nlocation:rack\n")
        out.append("htools:nlocation:power\n")
    out.append("\n")
    minmax = spec.minmax or "128,1,1024,1,1,1;65536,16,1048576,16,8,12"
    pol = "|128,1,1024,1,1,1|%s|drbd,plain,diskless|8.0|32.0\n" % minmax
    out.append(pol)
    for name, _uuid in groups:
        out.append(name + pol)
    return "".join(out)


def _room(nds, dsk, spn):
    """Whether every node of ``nds`` has ``dsk`` disk and ``spn`` spindles
    left (exclusive storage)."""
    return all(nd["td"] - nd["used_dsk"] >= dsk
               and nd["spindles"] - nd["used_sp"] >= spn for nd in nds)
