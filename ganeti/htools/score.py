"""The cluster score (Ganeti's "CV"), computed in full or incrementally.

The score is a weighted sum of components over the nodes of a node
group: standard deviations of per-node fractions (free memory, free disk,
reserved memory, CPU ratio, loads, spindles, and the same including
forthcoming instances), and sums (N+1 failures, tag conflicts, location
scores, instances on offline nodes, total reserved memory).

``ScoreState`` keeps, per component, the running sum and sum of squares
of the per-node values (plus the exclusion/location pair counts), so the
score after a change touching a few nodes is computed from those nodes'
old and new values only: ``state.score_after([(node, old_vals,
new_vals), ...])`` without changing anything, ``state.commit(...)`` to
apply.
"""

import math

from ganeti.htools.model import _div

#: std-dev components: (name, weight); values from ``node_std_values``
STD_COMPONENTS = (
    ("free_mem_cv", 0.5),
    ("free_disk_cv", 0.5),
    ("reserved_mem_cv", 1.0),
    ("vcpu_ratio_cv", 0.5),
    ("cpu_load_cv", 1.0),
    ("mem_load_cv", 1.0),
    ("disk_load_cv", 1.0),
    ("net_load_cv", 1.0),
    ("spindles_cv", 0.5),
    ("free_mem_cv_forth", 0.5),
    ("free_disk_cv_forth", 0.5),
    ("vcpu_ratio_cv_forth", 0.5),
    ("spindles_cv_forth", 0.5),
)
#: sum components over online nodes; values from ``node_sum_values``
SUM_COMPONENTS = (
    ("n1_cnt", 1.0),
    ("pri_tags_score", 2.0),
    ("location_score", 1.0),
    ("reserved_mem_rtotal", 0.25),
)
#: sum components over offline nodes
OFFLINE_COMPONENTS = (
    ("offline_all_cnt", 4.0),
    ("offline_pri_cnt", 16.0),
)
MAP_COMPONENT = ("location_exclusion_score", 1.0)

#: the order in which Ganeti prints the components
DISPLAY_ORDER = (
    "free_mem_cv", "free_disk_cv", "n1_cnt", "reserved_mem_cv",
    "offline_all_cnt", "offline_pri_cnt", "vcpu_ratio_cv", "cpu_load_cv",
    "mem_load_cv", "disk_load_cv", "net_load_cv", "pri_tags_score",
    "spindles_cv", "free_mem_cv_forth", "free_disk_cv_forth",
    "vcpu_ratio_cv_forth", "spindles_cv_forth", "location_score",
    "location_exclusion_score", "reserved_mem_rtotal",
)
WEIGHTS = dict(STD_COMPONENTS + SUM_COMPONENTS + OFFLINE_COMPONENTS
               + (MAP_COMPONENT,))

_STD_W = tuple(w for _, w in STD_COMPONENTS)
_SUM_W = tuple(w for _, w in SUM_COMPONENTS)
_NSTD = len(STD_COMPONENTS)
_NSUM = len(SUM_COMPONENTS)


def node_std_values(nd):
    """Per-node values of the std-dev components (an online node)."""
    tm = nd.t_mem
    xm = nd.x_mem if nd.x_mem > 0 else 0
    unalloc = int(tm) - nd.n_mem - nd.i_mem - xm
    speed = nd.cpu_speed
    if nd.excl_storage:
        tot = float(nd.t_spindles)
        if tot == 0:
            pd = pdf = 1.0
        else:
            pd = nd.f_spindles / tot
            pdf = nd.f_spindles_forth / tot
    else:
        tot = nd.t_dsk
        if tot == 0:
            pd = pdf = 1.0
        else:
            pd = nd.f_dsk / tot
            pdf = nd.f_dsk_forth / tot
    hs = nd.hi_spindles
    try:
        return (
            unalloc / tm, pd, nd.r_mem / tm,
            nd.u_cpu / nd.t_cpu / speed,
            nd.load_c / nd.pool_c, nd.load_m / nd.pool_m,
            nd.load_d / nd.pool_d, nd.load_n / nd.pool_n,
            nd.inst_spindles / hs,
            nd.f_mem_forth / tm, pdf,
            nd.u_cpu_forth / nd.t_cpu / speed,
            nd.inst_spindles_forth / hs,
        )
    except ZeroDivisionError:
        return (
            _div(unalloc, tm), pd, _div(nd.r_mem, tm),
            _div(_div(nd.u_cpu, nd.t_cpu), speed),
            _div(nd.load_c, nd.pool_c), _div(nd.load_m, nd.pool_m),
            _div(nd.load_d, nd.pool_d), _div(nd.load_n, nd.pool_n),
            _div(nd.inst_spindles, hs),
            _div(nd.f_mem_forth, tm), pdf,
            _div(_div(nd.u_cpu_forth, nd.t_cpu), speed),
            _div(nd.inst_spindles_forth, hs),
        )


def node_sum_values(nd):
    """Per-node values of the sum components (an online node)."""
    n1 = len(nd.plist) + len(nd.slist) if nd.fail_n1 else 0
    return (n1, nd.n_ptags_conflicts, nd.location_score,
            _div(nd.r_mem, nd.t_mem))


def node_values(nd):
    """(std values, sum values) of an online node, cached on the node
    until it changes."""
    mc = nd.metrics_cache
    if mc is None:
        mc = nd.metrics_cache = (node_std_values(nd), node_sum_values(nd))
    return mc


def _stddev(values):
    # two passes, like Ganeti's full computation
    n = len(values)
    if n == 0:
        return float("nan")
    mean = sum(values) / n
    var = 0.0
    for v in values:
        d = v - mean
        var += d * d
    var /= n
    return math.sqrt(var) if var > 0 else 0.0


def components(nodes):
    """The components of the score of ``nodes`` (an iterable of Node),
    computed in full: a dict name -> value."""
    online = [nd for nd in nodes if not nd.offline]
    offline = [nd for nd in nodes if nd.offline]
    res = {}
    stds = [node_std_values(nd) for nd in online]
    for k, (name, _w) in enumerate(STD_COMPONENTS):
        res[name] = _stddev([v[k] for v in stds])
    sums = [node_sum_values(nd) for nd in online]
    for k, (name, _w) in enumerate(SUM_COMPONENTS):
        tot = 0.0
        for v in sums:
            tot += v[k]
        res[name] = tot
    res["offline_all_cnt"] = float(sum(len(nd.plist) + len(nd.slist)
                                       for nd in offline))
    res["offline_pri_cnt"] = float(sum(len(nd.plist) for nd in offline))
    counts = {}
    for nd in online:
        for k, v in nd.instance_map.items():
            counts[k] = counts.get(k, 0) + v
    res["location_exclusion_score"] = float(
        sum(counts.values()) - len(counts))
    return res


def score_of_components(comps):
    return sum(WEIGHTS[name] * comps[name] for name in DISPLAY_ORDER)


def compute_score(nodes):
    """The cluster score of ``nodes``, computed in full."""
    return score_of_components(components(nodes))


class ScoreState:
    """Running per-component sums over a fixed set of nodes, for the
    incremental score of candidate changes.

    A change is described as a list of ``(node, old, new)`` where ``old``
    and ``new`` are ``node_values`` tuples before and after the change
    (for offline nodes pass ``None`` for both: their contribution is
    tracked through ``offline_delta``).
    """

    def __init__(self, nodes):
        self.nodes = list(nodes)
        self.recompute()

    def recompute(self):
        online = [nd for nd in self.nodes if not nd.offline]
        self.n = float(len(online))
        if online:
            vals = [node_values(nd) for nd in online]
            # per component, in node order (Python 3.12's sum() rounds
            # more exactly than a loop would: the last bits may differ)
            cols = list(zip(*[sv for sv, _su in vals]))
            self.s1 = [sum(col, 0.0) for col in cols]
            self.s2 = [sum([v * v for v in col], 0.0) for col in cols]
            self.sm = [sum(col, 0.0)
                       for col in zip(*[su for _sv, su in vals])]
        else:
            self.s1 = [0.0] * _NSTD
            self.s2 = [0.0] * _NSTD
            self.sm = [0.0] * _NSUM
        self.off_all = 0
        self.off_pri = 0
        for nd in self.nodes:
            if nd.offline:
                self.off_all += len(nd.plist) + len(nd.slist)
                self.off_pri += len(nd.plist)
        counts = {}
        for nd in online:
            for k, v in nd.instance_map.items():
                counts[k] = counts.get(k, 0) + v
        self.pair_counts = counts
        self.map_value = sum(counts.values()) - len(counts)

    def score(self):
        return self.score_after(())

    def score_after(self, changes, off_delta=(0, 0), map_delta=0):
        """Score after replacing, for each ``(old, new)`` pair of
        ``node_values`` tuples in ``changes``, the old contribution by
        the new one; nothing is changed."""
        n = self.n
        s1 = self.s1
        s2 = self.s2
        total = 0.0
        if changes:
            for k in range(_NSTD):
                a = s1[k]
                b = s2[k]
                for old, new in changes:
                    o = old[0][k]
                    v = new[0][k]
                    a += v - o
                    b += v * v - o * o
                m = a / n
                var = b / n - m * m
                if var > 0:
                    total += _STD_W[k] * math.sqrt(var)
            sm = self.sm
            for k in range(_NSUM):
                a = sm[k]
                for old, new in changes:
                    a += new[1][k] - old[1][k]
                total += _SUM_W[k] * a
        else:
            for k in range(_NSTD):
                m = s1[k] / n
                var = s2[k] / n - m * m
                if var > 0:
                    total += _STD_W[k] * math.sqrt(var)
            for k in range(_NSUM):
                total += _SUM_W[k] * self.sm[k]
        total += 4.0 * (self.off_all + off_delta[0])
        total += 16.0 * (self.off_pri + off_delta[1])
        total += self.map_value + map_delta
        return total

    def base_terms(self):
        """Per std component, its current weighted std-dev, and the
        total score (used by ``score_delta``)."""
        n = self.n
        terms = []
        for k in range(_NSTD):
            m = self.s1[k] / n
            var = self.s2[k] / n - m * m
            terms.append(_STD_W[k] * math.sqrt(var) if var > 0 else 0.0)
        return terms

    def score_delta(self, base_total, terms, std_items, sum_delta,
                    off_all, off_pri, pairs):
        """Score after a change given as deltas: ``std_items`` is a list
        of (component, delta of sum, delta of sum of squares) for the
        std components that change, ``sum_delta`` the weighted change of
        the sum components, ``pairs`` the exclusion/location pair count
        changes (or None).  ``base_total`` and ``terms`` come from
        ``score()`` and ``base_terms()`` of the current state."""
        n = self.n
        s1 = self.s1
        s2 = self.s2
        total = base_total + sum_delta + 4.0 * off_all + 16.0 * off_pri
        for k, d1, d2 in std_items:
            m = (s1[k] + d1) / n
            var = (s2[k] + d2) / n - m * m
            total -= terms[k]
            if var > 0:
                total += _STD_W[k] * math.sqrt(var)
        if pairs:
            for key, d in pairs.items():
                total += self.pair_map_delta(key, d)
        return total

    def commit(self, changes, off_delta=(0, 0), pair_changes=()):
        """Apply a change: ``changes`` as for ``score_after``;
        ``pair_changes`` are (key, delta) of exclusion/location pairs."""
        s1 = self.s1
        s2 = self.s2
        sm = self.sm
        for old, new in changes:
            ov, os_ = old
            nv, ns = new
            for k in range(_NSTD):
                o = ov[k]
                v = nv[k]
                s1[k] += v - o
                s2[k] += v * v - o * o
            for k in range(_NSUM):
                sm[k] += ns[k] - os_[k]
        self.off_all += off_delta[0]
        self.off_pri += off_delta[1]
        for key, d in pair_changes:
            self.map_value += self.pair_map_delta(key, d)
            c = self.pair_counts.get(key, 0) + d
            if c:
                self.pair_counts[key] = c
            else:
                self.pair_counts.pop(key, None)

    def pair_map_delta(self, key, d):
        """Change of the location exclusion score if the count of the
        (location, exclusion tag) pair ``key`` changes by ``d``."""
        c = self.pair_counts.get(key, 0)
        c2 = c + d
        return d - ((c2 > 0) - (c > 0))
