"""Running a query: fields, filter, data collection, rows.

``QueryContext`` is what the master builds once and hands to its luxi and
RAPI handlers; each call prepares a :class:`PreparedQuery` (which checks
everything the caller gave) and executes it.  Config-only queries run to
completion synchronously (their Deferred has already fired); queries that
need live data, job or lock rows return a Deferred that fires when the
providers have answered.

With a :class:`ganeti.query.cache.QueryCache` in the context, the ``*_wire``
methods (what the master's luxi server answers with) and the others too
answer from it where it applies (see that module).
"""

import time

from twisted.internet import defer

from ganeti import errors
from ganeti import qlang
from ganeti.query import base
from ganeti.query.base import NEED_CONFIG
from ganeti.utils.memo import Memo
from ganeti.utils.rawjson import RawJSON

#: Answer shapes of the query cache: luxi Query rows and old-style rows
FMT_QUERY = "query"
FMT_PLAIN = "plain"


def _then(value, fn):
    """Apply ``fn`` now, or when ``value`` (a Deferred) fires."""
    if isinstance(value, defer.Deferred):
        return value.addCallback(fn)
    return fn(value)


class Run(object):
    """State of one query execution: config snapshot, indexes, live data."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.cfg = ctx.cfg
        self.cluster = ctx.cfg.cluster if ctx.cfg is not None else None
        #: ``memo(key, compute)``: values computed once per query
        self.memo = Memo()
        # filled by Resource.collect
        self.unreachable = set()
        self.inst_runtime = {}   # node uuid -> {instance name: info}
        self.node_runtime = {}   # node uuid -> {key: value}
        self.collected = set()   # NEED_* kinds already collected
        self.field_names = []    # every field the query reads

    def now(self):
        """The time of this query (the same for every row)."""
        clock = getattr(self.ctx, "clock", None)
        return self.memo("now", clock.seconds if clock is not None
                         else time.time)

    def node_offline(self, uuid):
        node = self.cfg.nodes.get(uuid)
        return node is not None and bool(node.offline)


class PreparedQuery(object):
    """A checked query, ready to execute (possibly several times)."""

    def __init__(self, ctx, resource, fields, qfilter=None, names=None):
        self.ctx = ctx
        self.resource = resource
        if not isinstance(fields, (list, tuple)) or \
                not all(isinstance(f, str) for f in fields):
            raise errors.OpPrereqError(
                "Query fields must be a list of field names, got %r"
                % (fields,), errors.ECODE_INVAL)
        self.columns = [resource.fields.get(name) or base.unknown_field(name)
                        for name in fields]
        table = resource.fields
        self.qfilter = qfilter
        self.filter = qlang.compile_filter(qfilter, table.get)
        self.names = names
        if names is None and qfilter is not None:
            self.names = qlang.requested_names(qfilter, resource.namefield)
        readers = list(self.columns)
        if self.filter is not None:
            readers.extend(self.filter.fields)
        #: every field the query reads (columns and filter)
        self.readers = readers
        self.needs = set(f.needs for f in readers
                         if f.kind != base.QFT_UNKNOWN)
        self.needs.discard(NEED_CONFIG)
        self.field_names = []
        for field in readers:
            if field.kind != base.QFT_UNKNOWN and \
                    field.name not in self.field_names:
                self.field_names.append(field.name)

    @property
    def needs_live(self):
        """True if executing asks the nodes or another provider."""
        return bool(self.needs) or self.resource.from_provider

    def unknown_fields(self):
        return [c.name for c in self.columns if c.kind == base.QFT_UNKNOWN]

    def definitions(self):
        return [c.definition() for c in self.columns]

    # --- execution ------------------------------------------------------

    def _select(self):
        """The items, filtered and sorted; maybe a Deferred."""
        run = Run(self.ctx)
        run.field_names = self.field_names
        resource = self.resource
        qfilter = self.filter

        def prefilter(items):
            if qfilter is None or not self.needs:
                return items
            # Drop what fails the filter whatever the live data will say,
            # so no node is asked about items that cannot be in the result.
            return [item for item in items
                    if qfilter(self._fetcher(run, item, early=True))
                    is not False]

        def collect(items):
            if not self.needs:
                return items
            return _then(resource.collect(run, items, self.needs),
                         lambda _: items)

        def final(items):
            if qfilter is not None:
                items = [item for item in items
                         if qfilter(self._fetcher(run, item)) is True]
            items = list(resource.finish(run, items))
            items.sort(key=resource.sort_key)
            return run, items

        value = resource.items(run, self.names)
        value = _then(value, prefilter)
        value = _then(value, collect)
        return _then(value, final)

    def _fetcher(self, run, item, early=False):
        def fetch(field):
            if early and field.needs != NEED_CONFIG and \
                    field.needs not in run.collected:
                return qlang.UNDECIDED
            value = field.getter(run, item)
            return qlang.NO_VALUE if isinstance(value, base.Status) else value
        return fetch

    def _rows(self, convert):
        def build(selected):
            run, items = selected
            getters = [c.getter for c in self.columns]
            return [[convert(g(run, item)) for g in getters]
                    for item in items]
        return _then(self._select(), build)

    def execute(self):
        """Deferred of ``{"fields": [...], "data": [[[rs, value], ...]]}``."""
        def wrap(rows):
            return {"fields": self.definitions(), "data": rows}
        return defer.maybeDeferred(
            lambda: _then(self._rows(base.result), wrap))

    def execute_sync(self):
        """Like :meth:`execute` for queries that need no provider."""
        if self.needs_live:
            raise errors.ProgrammerError(
                "query of %s needs live data (%s); use execute()"
                % (self.resource.name, ", ".join(sorted(self.needs))))
        rows = self._rows(base.result)
        if isinstance(rows, defer.Deferred):
            raise errors.ProgrammerError("query did not complete "
                                         "synchronously")
        return {"fields": self.definitions(), "data": rows}

    def execute_old_style(self):
        """Deferred of rows of plain values (non-normal values are None)."""
        return defer.maybeDeferred(lambda: self._rows(base.plain))

    # --- through the query cache ------------------------------------------

    def cached(self, fresh=False):
        """Whether the context's cache answers this query (``fresh``: the
        caller wants live data asked now, so it does not)."""
        cache = self.ctx.cache
        return cache is not None and not fresh and cache.usable_for(self)

    def answer(self, fmt):
        """Deferred of the cache's Answer (see :meth:`cached`)."""
        return defer.Deferred.fromCoroutine(self.ctx.cache.answer(self, fmt))


class QueryContext(object):
    """Everything queries read: the config and the data providers.

    ``cfg``: the ConfigStore.  ``live``: an :class:`ILiveData` provider
    (None: no node is asked; live fields are RS_NODATA).  ``jobs``: a
    callable ``jobs(job_ids or None, field_names)`` returning (or a
    Deferred of) an iterable of dicts, one per existing job, holding "id"
    and the named job fields.  ``locks``: a LockManager (anything with
    ``query_locks()``) or a callable returning the same list.
    ``cluster_state``: a callable returning a dict with "drain_flag" and
    "watcher_pause" (master-side state that is not in the config).
    ``cache``: a :class:`ganeti.query.cache.QueryCache` kept by the master
    across queries (None: every query computes everything).

    ``root``: the master's file root (node paths in answers, such as an
    instance's serial console socket, are under the same layout).

    ``fresh=True`` (luxi's ``use_locking``) answers without the cache.
    """

    def __init__(self, cfg, live=None, jobs=None, locks=None,
                 cluster_state=None, cache=None, root="/", clock=None):
        self.cfg = cfg
        #: IReactorTime of the fields that depend on the time (lease
        #: states); None: the system clock
        self.clock = clock
        self.root = root
        self.live = live
        self.jobs = jobs
        self.locks = locks
        self.cluster_state = cluster_state
        self.cache = cache

    @staticmethod
    def resource(what):
        from ganeti.query import RESOURCES
        if not isinstance(what, str) or what not in RESOURCES:
            raise errors.OpPrereqError(
                "Resource %r cannot be queried; known resources: %s"
                % (what, ", ".join(sorted(RESOURCES))), errors.ECODE_INVAL)
        return RESOURCES[what]

    def prepare(self, what, fields, qfilter=None, names=None):
        """Check a query; raises OpPrereqError / QueryFilterParseError."""
        return PreparedQuery(self, self.resource(what), fields, qfilter,
                             names=names)

    def query(self, what, fields, qfilter=None, fresh=False):
        """luxi ``Query``: Deferred of ``{"fields": ..., "data": ...}``."""
        def run():
            prepared = self.prepare(what, fields, qfilter)
            if prepared.cached(fresh):
                return prepared.answer(FMT_QUERY).addCallback(
                    lambda answer: answer.query_json().decode())
            return prepared.execute()
        return defer.maybeDeferred(run)

    def query_wire(self, what, fields, qfilter=None, fresh=False):
        """As :meth:`query`, for the luxi server: the answer may be JSON
        text (RawJSON) the cache kept."""
        def run():
            prepared = self.prepare(what, fields, qfilter)
            if prepared.cached(fresh):
                return prepared.answer(FMT_QUERY).addCallback(
                    lambda answer: answer.query_json())
            return prepared.execute()
        return defer.maybeDeferred(run)

    def query_versioned(self, what, fields, qfilter=None, version=None):
        """luxi ``QueryVersioned``: Deferred of ``{"version": v, "fields":
        ..., "data": ...}``, or of ``{"version": v, "unchanged": true}``
        when ``version`` is the version of the answer now.  ``v`` is None
        for an answer the cache does not keep (never unchanged)."""
        def run():
            prepared = self.prepare(what, fields, qfilter)
            if prepared.cached():
                return prepared.answer(FMT_QUERY).addCallback(
                    lambda answer: answer.versioned_json(version))

            def wrap(result):
                return dict(result, version=None)
            return prepared.execute().addCallback(wrap)
        return defer.maybeDeferred(run)

    def query_fields(self, what, fields=None):
        """luxi ``QueryFields``: definitions of ``fields`` (None: all)."""
        resource = self.resource(what)
        if fields:
            if not isinstance(fields, (list, tuple)) or \
                    not all(isinstance(f, str) for f in fields):
                raise errors.OpPrereqError(
                    "Query fields must be a list of field names, got %r"
                    % (fields,), errors.ECODE_INVAL)
            defs = [(resource.fields.get(n) or base.unknown_field(n))
                    for n in fields]
        else:
            defs = base.nice_sort(resource.fields, key=lambda f: f.name)
        return {"fields": [f.definition() for f in defs]}

    def old_style(self, what, names, fields, fresh=False):
        """luxi ``QueryNodes``/``QueryInstances``/...: rows of plain values.

        ``names`` empty or None means every item; a name that matches
        nothing, or an unknown field, raises OpPrereqError naming it.
        """
        d = self.old_style_wire(what, names, fields, fresh)
        return d.addCallback(lambda rows: rows.decode()
                             if isinstance(rows, RawJSON) else rows)

    def old_style_wire(self, what, names, fields, fresh=False):
        """As :meth:`old_style`, for the luxi server (maybe RawJSON)."""
        def run():
            if names is not None and (
                    not isinstance(names, (list, tuple))
                    or not all(isinstance(n, str) for n in names)):
                raise errors.OpPrereqError(
                    "Names must be a list of strings, got %r" % (names,),
                    errors.ECODE_INVAL)
            prepared = self.prepare(what, fields,
                                    names=list(names) if names else None)
            unknown = prepared.unknown_fields()
            if unknown:
                raise errors.OpPrereqError(
                    "Unknown output fields selected: %s" % ", ".join(unknown),
                    errors.ECODE_INVAL)
            if prepared.cached(fresh):
                return prepared.answer(FMT_PLAIN).addCallback(
                    lambda answer: answer.plain_json())
            return prepared.execute_old_style()
        return defer.maybeDeferred(run)
