"""A loaded cluster: groups, nodes, instances, tags and policy, and the
finalisation every loader shares (indices, exclusion and location tags,
placing instances on nodes, failover reservations, consistency check)."""

from ganeti.htools import types as T
from ganeti.htools.model import NO_SECONDARY


def tags_with_prefix(prefix, cluster_tags, tags):
    """Tags of an object selected by cluster tags ``<prefix><p>``: those
    starting with ``<p>:`` (Ganeti's rule for location and migration
    tags)."""
    prefixes = [t[len(prefix):] + ":" for t in cluster_tags
                if t.startswith(prefix)]
    if not prefixes:
        return frozenset()
    return frozenset(t for t in tags
                     if any(t.startswith(p) for p in prefixes))


def exclusion_prefixes(cluster_tags):
    return [t[len(T.EXTAGS_PREFIX):] for t in cluster_tags
            if t.startswith(T.EXTAGS_PREFIX)
            and len(t) > len(T.EXTAGS_PREFIX)]


def recv_migration_tags(cluster_tags, node_tags):
    """Migration tags a node accepts: its own plus the sources allowed by
    ``htools:allowmigration:SRC::DST`` for each of its tags DST."""
    own = tags_with_prefix(T.MIGRATION_PREFIX, cluster_tags, node_tags)
    pairs = []
    for t in cluster_tags:
        if not t.startswith(T.ALLOW_MIGRATION_PREFIX):
            continue
        rest = t[len(T.ALLOW_MIGRATION_PREFIX):]
        pos = rest.find("::")
        if pos < 0:
            continue
        src, dst = rest[:pos], rest[pos + 2:]
        if "::" in dst:
            continue
        pairs.append((src, dst))
    res = set(own)
    for tag in own:
        res.update(src for src, dst in pairs if dst == tag)
    return frozenset(res)


class ClusterData:
    """Everything a loader produces.

    ``groups``, ``nodes`` and ``instances`` are lists indexed by the
    objects' ``idx``; the ``*_by_name`` dicts map names (and group UUIDs)
    to objects.
    """

    def __init__(self, groups, nodes, instances, tags=(),
                 ipolicy=T.DEFAULT_IPOLICY):
        self.groups = list(groups)
        self.nodes = list(nodes)
        self.instances = list(instances)
        self.tags = list(tags)
        self.ipolicy = ipolicy
        self.warnings = []
        self.reindex()

    def reindex(self):
        for i, g in enumerate(self.groups):
            g.idx = i
        for i, n in enumerate(self.nodes):
            n.idx = i
        for i, inst in enumerate(self.instances):
            inst.idx = i
        self.group_by_uuid = {g.uuid: g for g in self.groups}
        self.group_by_name = {g.name: g for g in self.groups}
        self.node_by_name = {n.name: n for n in self.nodes}
        self.instance_by_name = {i.name: i for i in self.instances}

    def find_group(self, name_or_uuid):
        return (self.group_by_name.get(name_or_uuid)
                or self.group_by_uuid.get(name_or_uuid))

    def group_nodes(self, gidx):
        return [n for n in self.nodes if n.group == gidx]

    def group_instances(self, gidx):
        """Instances whose primary node is in the group."""
        nodes = self.nodes
        return [i for i in self.instances if nodes[i.pnode].group == gidx]

    def split_groups(self):
        """[(group idx, nodes, instances)] for the groups with nodes, in
        group index order."""
        res = []
        for g in sorted({n.group for n in self.nodes}):
            res.append((g, self.group_nodes(g), self.group_instances(g)))
        return res

    def instance_group_ok(self, inst):
        """Whether all nodes of the instance are in one group."""
        if inst.snode == NO_SECONDARY or not inst.has_secondary:
            return True
        return self.nodes[inst.pnode].group == self.nodes[inst.snode].group


def longest_domain(names):
    """The longest common suffix starting with a dot (Ganeti's rule for
    the names shown without their domain)."""
    names = list(names)
    if not names:
        return ""
    first, rest = names[0], names[1:]
    best = ""
    for i, ch in enumerate(first):
        if ch != ".":
            continue
        suffix = first[i:]
        if all(n.endswith(suffix) for n in rest):
            if len(suffix) > len(best):
                best = suffix
    return best


def finalize(cdata, extags=(), selected=(), excluded=(), utils=None,
             mdsk=None, mcpu=None):
    """Turn freshly parsed data into a usable cluster (Ganeti's merge and
    consistency check): set exclusion, location and migration tags, place
    instances on their nodes, compute failover reservations, the
    unaccounted memory and the per-node policy.  Returns ``cdata``; the
    inconsistency messages are in ``cdata.warnings``."""
    ctags = cdata.tags
    instances = cdata.instances
    nodes = cdata.nodes
    if utils:
        for name, util in utils.items():
            inst = cdata.instance_by_name.get(name)
            if inst is not None:
                inst.util = util
    for name in list(selected) + list(excluded):
        if name not in cdata.instance_by_name:
            raise T.HtoolsError("Unknown instance(s): %s" % name)
    allex = list(extags) + exclusion_prefixes(ctags)
    dsrd_prefixes = [t[len(T.DESIRED_LOCATION_PREFIX):] + ":"
                     for t in ctags
                     if t.startswith(T.DESIRED_LOCATION_PREFIX)]
    for inst in instances:
        inst.excl_tags = [t for t in inst.tags
                          if any(t.startswith(p) for p in allex)]
        if dsrd_prefixes:
            inst.dsrd_loc_tags = frozenset(
                t for t in inst.tags
                if any(t.startswith(p) for p in dsrd_prefixes))
        if inst.name in excluded or (selected and
                                     inst.name not in selected):
            inst.movable = False
    for nd in nodes:
        nd.location_tags = tags_with_prefix(T.LOCATION_PREFIX, ctags,
                                            nd.tags)
    for inst in instances:
        if inst.has_secondary and inst.snode != NO_SECONDARY:
            inst.location_score = len(nodes[inst.pnode].location_tags
                                      & nodes[inst.snode].location_tags)
        else:
            inst.location_score = 0
    for inst in instances:
        nodes[inst.pnode].set_pri(inst)
        if inst.snode != NO_SECONDARY:
            nodes[inst.snode].set_sec(inst)
    for nd in nodes:
        nd.build_peers(instances)
        nd.set_policy(cdata.groups[nd.group].ipolicy)
        nd.mig_tags = tags_with_prefix(T.MIGRATION_PREFIX, ctags, nd.tags)
        nd.rmig_tags = recv_migration_tags(ctags, nd.tags)
        if mdsk is not None:
            nd.set_mdsk(mdsk)
        if mcpu is not None:
            nd.set_mcpu(mcpu)
    for inst in instances:
        if not cdata.instance_group_ok(inst):
            inst.movable = False
    suffix = longest_domain([n.name for n in nodes]
                            + [i.name for i in instances])
    cdata.common_suffix = suffix
    if suffix:
        for obj in list(nodes) + list(instances):
            if obj.name.endswith(suffix):
                obj.alias = obj.name[:-len(suffix)]
    cdata.warnings = check_data(cdata)
    return cdata


def check_data(cdata):
    """Set each node's state-of-record instance memory and unaccounted
    memory; return Ganeti's "missing memory/disk" messages."""
    msgs = []
    instances = cdata.instances
    for nd in cdata.nodes:
        imem = 0
        for i in nd.plist:
            inst = instances[i]
            if inst.uses_memory:
                imem += inst.mem
        idsk = 0
        for i in nd.plist:
            idsk += instances[i].dsk
        for i in nd.slist:
            idsk += instances[i].dsk
        delta_mem = int(nd.t_mem) - nd.n_mem - nd.f_mem - imem
        delta_dsk = int(nd.t_dsk) - nd.f_dsk - idsk
        nd.i_mem = imem
        nd.x_mem = delta_mem
        nd.metrics_cache = None
        if delta_mem > 512 or delta_dsk > 1024:
            msgs.append("node %s is missing %d MB ram and %d GB disk"
                        % (nd.name, delta_mem, delta_dsk // 1024))
    msgs.reverse()
    return msgs
