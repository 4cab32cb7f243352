"""Job filter rules in config.data (``filters``, keyed by UUID).

They live in the configuration so that they are replicated with it and
survive a master failover; the queue applies them (docs/filters.rst).
Every change is checked first (:func:`ganeti.jobfilter.make_rule`): a bad
value names the field and changes nothing.
"""

import uuid as uuidlib

from ganeti import errors
from ganeti import jobfilter


class FilterMutators(object):
    """The ConfigStore's filter rule mutators."""

    def replace_filter(self, uuid, priority, predicates, action, reason,
                       watermark):
        """Add the rule ``uuid`` (None: a new UUID) or replace it; its
        watermark is ``watermark`` (the highest job id now).  Returns the
        UUID."""
        if uuid is None:
            uuid = str(uuidlib.uuid4())
        rule = jobfilter.make_rule(uuid, watermark, priority, predicates,
                                   action, reason)
        new = dict(self.filters)
        new[uuid] = rule
        self._set_filters(new, "replacing job filter %s" % uuid)
        return uuid

    def delete_filter(self, uuid):
        if uuid not in self.filters:
            raise errors.OpPrereqError("filter %s does not exist" % (uuid,),
                                       errors.ECODE_NOENT)
        new = dict(self.filters)
        del new[uuid]
        self._set_filters(new, "removing job filter %s" % uuid)

    def _set_filters(self, new, what):
        # the filters are written whole with every change: a refused
        # change only has to put the old map back
        old = self.filters
        try:
            with self._change(what):
                self.filters = new
        except BaseException:
            self.filters = old
            raise
