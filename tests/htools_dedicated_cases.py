"""The clusters and requests of the dedicated-allocation fixtures
(``tests/fixtures/htools/dedicated``): exclusive-storage clusters with an
instance policy of three disjoint size ranges (a quarter, a half, a
whole node, roughly), and allocate / multi-allocate requests in and
around them.  ``record.py`` there writes the clusters and Ganeti's
answers; the tests read both."""

import copy
import os

from tests import htools_requests as R

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "htools",
                    "dedicated")

#: min;max of each range: small, medium, large
MINMAX = ";".join([
    "1024,1,1024,1,1,1", "16384,8,524288,4,4,3",
    "16385,8,524289,1,1,3", "32768,16,1048576,4,4,6",
    "32769,16,1048577,1,1,6", "65536,32,2097152,4,4,12"])

#: existing instances: (memory, disk, vcpus, spindles)
SIZES = ((4096, 262144, 2, 1), (8192, 409600, 4, 2), (20480, 786432, 8, 3),
         (40960, 1310720, 16, 6), (2048, 102400, 1, 1))

#: requested instances: (memory, disk, vcpus, spindles)
SMALL = (4096, 262144, 2, 1)
MEDIUM = (20480, 786432, 8, 3)
LARGE = (40960, 1310720, 16, 6)
TINY = (1024, 1024, 1, 1)
#: memory and vcpus of the small range, disk of the medium one
OFF_POLICY = (16384, 600000, 2, 1)

_BASE = dict(excl_storage=True, minmax=MINMAX, sizes=SIZES, drbd=0.5,
             crowd=0.5)

#: cluster name -> generator options (ganeti.htools.generate.GenSpec)
CLUSTERS = {
    "single": dict(_BASE, nodes=6, inst_per_node=1.5, seed=3),
    "crowded": dict(_BASE, nodes=8, inst_per_node=3, seed=5),
    "offline": dict(_BASE, nodes=7, inst_per_node=1, seed=9, offline=0.3),
    "two_groups": dict(_BASE, nodes=8, inst_per_node=1, seed=12, groups=2,
                       group_policies=("last_resort", "preferred")),
    # group2 (not exclusive) is unallocable: allocation without a group
    # is still dedicated
    "unallocable_mixed": dict(_BASE, nodes=6, inst_per_node=1, seed=11,
                              groups=2, excl_groups=(0,),
                              group_policies=("preferred", "unallocable")),
    # group2 has no exclusive storage: the normal path, unless group1 is
    # requested
    "mixed": dict(_BASE, nodes=6, inst_per_node=1, seed=11, groups=2,
                  excl_groups=(0,)),
    "larger": dict(_BASE, nodes=24, inst_per_node=1.5, seed=21),
}

#: ``quarters.txt`` (written by hand) is Ganeti's example: a quarter-, a
#: half- and a three-quarter-filled node and an empty one (64 GiB of
#: memory for instances: the iallocator input names kvm, whose nodes are
#: taken to use 4 GiB themselves; 1 TiB of disk, 8 spindles); the
#: policy's ranges are exactly a quarter, a half and a whole node,
#: listed smallest first

#: hspace on the larger cluster: plain, the small size as standard spec,
#: the large one as tiered spec (without the capacity checks, which
#: take Ganeti's hspace minutes here)
HSPACE_CLUSTER = "larger"
HSPACE_ARGS = ["--disk-template=plain", "--standard-alloc=262144,4096,2,1",
               "--tiered-alloc=1310720,40960,16,6", "--no-capacity-checks"]

QUARTER = (16000, 262000, 4, 2)
HALF = (32000, 524000, 8, 4)


def alloc(size, dt, name="new1", group=None, restrict=None):
    mem, dsk, cpu, sp = size
    req = R.alloc_request(name, mem, dsk, cpu, dt, group=group,
                          restrict=restrict)
    req["disks"][0]["spindles"] = sp
    return req


def multi(n, size, dt, group=None):
    insts = []
    for i in range(n):
        r = alloc(size, dt, name="multi%d" % (i + 1))
        del r["type"]
        insts.append(r)
    return {"type": "multi-allocate", "instances": insts,
            "group_name": group}


def _case(cluster, req, params=(), networks=None, deviation=None):
    return {"cluster": cluster, "request": req, "params": list(params),
            "networks": networks, "deviation": deviation}


def cases():
    """{case name: case}: cluster, request, hail options (``params``),
    group networks to set (``networks``: {group name: [network]}) and,
    for the requests where our answer deliberately differs from
    Ganeti's, why (``deviation``)."""
    out = {}
    sizes = {"small": SMALL, "medium": MEDIUM, "large": LARGE,
             "tiny": TINY, "offpolicy": OFF_POLICY}
    for cl in ("single", "crowded", "offline", "larger"):
        for dt in ("plain", "drbd"):
            for sname, size in sizes.items():
                out["%s/%s-%s" % (cl, dt, sname)] = _case(cl,
                                                          alloc(size, dt))
            out["%s/multi-%s" % (cl, dt)] = _case(cl, multi(4, MEDIUM, dt))
            out["%s/multi-small-%s" % (cl, dt)] = _case(
                cl, multi(6, SMALL, dt))
    for cl in ("two_groups", "unallocable_mixed", "mixed"):
        for dt in ("plain", "drbd"):
            for g in (None, "group1", "group2"):
                for sname in ("small", "medium"):
                    out["%s/%s-%s-%s" % (cl, dt, sname, g)] = _case(
                        cl, alloc(sizes[sname], dt, group=g))
            out["%s/multi-%s" % (cl, dt)] = _case(cl, multi(5, MEDIUM, dt))
            out["%s/multi-small-%s" % (cl, dt)] = _case(
                cl, multi(6, SMALL, dt))
            out["%s/multi-%s-group1" % (cl, dt)] = _case(
                cl, multi(4, SMALL, dt, group="group1"),
                deviation="multi-allocate with a group")
    out["mixed/plain-small-uuid2"] = _case(
        "mixed", alloc(SMALL, "plain",
                       group="00000002-0000-4000-8000-000000000002"))
    out["mixed/plain-small-nosuch"] = _case(
        "mixed", alloc(SMALL, "plain", group="nosuch"))
    out["single/plain-restricted"] = _case(
        "single", alloc(SMALL, "plain", restrict=["node0002", "node0005"]))
    out["crowded/drbd-soft"] = _case("crowded", alloc(SMALL, "drbd"),
                                     params=["ignore-soft-errors"])
    out["crowded/plain-soft"] = _case("crowded", alloc(SMALL, "plain"),
                                      params=["ignore-soft-errors"])
    out["single/drbd-3nodes"] = _case(
        "single", dict(alloc(SMALL, "drbd"), required_nodes=3))
    nic = {"mac": "aa:00:00:00:00:01", "ip": None, "mode": "bridged",
           "link": "br0", "network": "net1"}
    for g in (None, "group1"):
        out["two_groups/plain-net-%s" % g] = _case(
            "two_groups", dict(alloc(SMALL, "plain", group=g), nics=[nic]),
            networks={"group2": ["net1"]})
    for name, size in (("quarter", QUARTER), ("half", HALF)):
        out["quarters/plain-%s" % name] = _case("quarters",
                                                alloc(size, "plain"))
        out["quarters/plain-%s-no-node4" % name] = _case(
            "quarters", alloc(size, "plain",
                              restrict=["node1", "node2", "node3"]))
    return out


def cluster_path(name):
    return os.path.join(HERE, name + ".txt")


def document(case):
    """The iallocator input of a case, from its recorded cluster file."""
    doc = R.request_for(R.load_text(cluster_path(case["cluster"])),
                        copy.deepcopy(case["request"]))
    for gname, nets in (case.get("networks") or {}).items():
        for g in doc["nodegroups"].values():
            if g["name"] == gname:
                g["networks"] = list(nets)
    return doc


def params(case):
    return {p: None for p in case["params"]} or None
