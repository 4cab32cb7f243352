"""Tags on every object kind (OP_TAGS_GET / SET / DEL / SEARCH)."""

import re

from ganeti import constants
from ganeti import errors
from ganeti import leases
from ganeti import locking
from ganeti.cmdlib.base import LogicalUnit

_LEVEL_OF_KIND = {
    constants.TAG_INSTANCE: locking.LEVEL_INSTANCE,
    constants.TAG_NODE: locking.LEVEL_NODE,
    constants.TAG_NODEGROUP: locking.LEVEL_NODEGROUP,
    constants.TAG_NETWORK: locking.LEVEL_NETWORK,
}


class _TagsLU(LogicalUnit):
    SHARED = False

    def expand_names(self):
        kind = self.op.kind
        if kind == constants.TAG_CLUSTER:
            self.target_name = None
            # Cluster tags change under the exclusive big lock.
            return
        if not self.op.name:
            raise errors.OpPrereqError("name: required for %s tags" % kind,
                                       errors.ECODE_INVAL)
        obj = self.cfg._tag_target(kind, self.op.name)
        self.target_name = obj.uuid
        self.needed_locks[_LEVEL_OF_KIND[kind]] = [obj.uuid]
        self.share_locks[_LEVEL_OF_KIND[kind]] = self.SHARED

    def target(self):
        return self.cfg._tag_target(self.op.kind, self.target_name)


class LUTagsGet(_TagsLU):
    OP_ID = "OP_TAGS_GET"
    SHARED = True

    async def exec_(self):
        return sorted(self.target().tags)


class LUTagsSet(_TagsLU):
    OP_ID = "OP_TAGS_SET"

    @property
    def REQ_BGL(self):
        return self.op.kind == constants.TAG_CLUSTER

    def check_prereq(self):
        # the reserved lease namespace (ganeti.leases)
        leases.check_tags(self.op.kind, self.op.tags,
                          current=self.target().tags)

    async def exec_(self):
        self.cfg.add_tags(self.op.kind, self.target_name, self.op.tags)


class LUTagsDel(_TagsLU):
    OP_ID = "OP_TAGS_DEL"

    @property
    def REQ_BGL(self):
        return self.op.kind == constants.TAG_CLUSTER

    async def exec_(self):
        self.cfg.remove_tags(self.op.kind, self.target_name, self.op.tags)


class LUTagsSearch(LogicalUnit):
    """Every (path, tag) whose tag matches a regular expression."""
    OP_ID = "OP_TAGS_SEARCH"

    def check_arguments(self):
        try:
            self.regex = re.compile(self.op.pattern)
        except re.error as err:
            raise errors.OpPrereqError("pattern: invalid regular expression"
                                       " (%s)" % err, errors.ECODE_INVAL)

    async def exec_(self):
        cfg = self.cfg
        found = []
        objs = [("/cluster", cfg.cluster)]
        objs += [("/instances/%s" % i.display_name, i)
                 for i in cfg.instances.values()]
        objs += [("/nodes/%s" % n.name, n) for n in cfg.nodes.values()]
        objs += [("/nodegroup/%s" % g.name, g)
                 for g in cfg.nodegroups.values()]
        objs += [("/networks/%s" % n.name, n) for n in cfg.networks.values()]
        for path, obj in objs:
            for tag in sorted(obj.tags):
                if self.regex.search(tag):
                    found.append((path, tag))
        return found
