"""The master's query cache: values, rows and whole answers, built once.

Listing 2,000 instances costs about 0.1 s of getters and 0.03 s of JSON
per query; monitoring clients ask for the same lists again and again while
the cluster stays as it is.  :class:`QueryCache` keeps

* per configuration serial, the value of every config field of every item
  asked for so far, with its JSON text (a change of the configuration
  drops all of them: nothing config-derived outlives the serial it was
  read at);
* per generation of live data (:mod:`ganeti.query.livecache`: at most
  ``live_ttl`` seconds old, never older than the last configuration
  change), the values of the live fields;
* whole answers (JSON text), keyed by their *version* (the configuration
  serial and the live data generations they were built from), resource,
  fields, filter and shape: a repeated query is answered with the bytes of
  the last one.

Different field lists and filters share the values: a new field list costs
one join of JSON pieces per item.  Only resources whose fields read
nothing but the configuration and the live data are cached (instances,
nodes, groups, networks); a query naming its items (old-style names, or a
filter on names or UUIDs), asking for a volatile field (one that depends
on the clock), or asking for fresh data (``use_locking``) is answered
without the cache, with live data asked from the nodes at once.

A version names exactly one answer: a client that remembers it can ask
"has it changed?" (luxi ``QueryVersioned``, which RAPI uses) and gets a
short "unchanged" when it has not.
"""

import collections
import json
import os

from ganeti import qlang
from ganeti.query import base
from ganeti.query.base import NEED_CONFIG
from ganeti.query import engine
from ganeti.query.engine import Run
from ganeti.query.livecache import DEFAULT_TTL, LiveCache
from ganeti.utils.rawjson import RawJSON, encode

# Answer shapes: luxi Query rows ([[status, value], ...]) and old-style
# rows of plain values (QueryInstances and the like)
FMT_QUERY = engine.FMT_QUERY
FMT_PLAIN = engine.FMT_PLAIN

DEFAULT_MAX_ANSWERS = 32
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

_ATTEMPTS = 3


class Answer(object):
    """A query answer as JSON text: ``fields`` (the definitions) and
    ``data`` (the rows); ``version`` None for one built without the
    cache (it is never "unchanged").  The texts of its shapes are made
    once and kept (a kept answer is sent many times)."""

    __slots__ = ("version", "fields", "data", "_texts")

    def __init__(self, version, fields, data):
        self.version = version
        self.fields = fields
        self.data = data
        self._texts = {}

    @property
    def size(self):
        # the parts and the text of the shape it is sent in
        return 2 * (len(self.fields) + len(self.data))

    def _text(self, shape, make):
        text = self._texts.get(shape)
        if text is None:
            text = self._texts[shape] = RawJSON(make())
        return text

    def query_json(self):
        """luxi Query's ``{"fields": ..., "data": ...}``."""
        return self._text("query", lambda: '{"fields": %s, "data": %s}'
                          % (self.fields, self.data))

    def plain_json(self):
        """The old-style answer: the rows alone."""
        return self._text("plain", lambda: self.data)

    def versioned_json(self, known=None):
        """QueryVersioned's answer: the version and, unless ``known`` is
        this answer's version, the fields and rows."""
        version = encode(self.version)
        if self.version is not None and known == self.version:
            return RawJSON('{"version": %s, "unchanged": true}' % version)
        return self._text("versioned", lambda: (
            '{"version": %s, "fields": %s, "data": %s}'
            % (version, self.fields, self.data)))


def names_items(qfilter, namefield):
    """True for a filter that only picks items by name or UUID (``=`` on
    one of them, or an ``|`` of such): an explicit question about those
    items, answered with fresh live data."""
    def one(part):
        return (isinstance(part, (list, tuple)) and len(part) == 3
                and part[0] in (qlang.OP_EQUAL, qlang.OP_EQUAL_LEGACY)
                and part[1] in (namefield, "uuid"))
    if not isinstance(qfilter, (list, tuple)) or not qfilter:
        return False
    if qfilter[0] == qlang.OP_OR:
        return len(qfilter) > 1 and all(one(p) for p in qfilter[1:])
    return one(qfilter)


class _Cells(object):
    """Values and JSON texts of fields, per item, computed with ``run``."""

    def __init__(self, run):
        self.run = run
        self.values = {}    # (resource, field) -> {item key: value}
        self.texts = {}     # (resource, field, fmt) -> {item key: text}


class _ConfigState(_Cells):
    """What is kept for one configuration serial."""

    def __init__(self, ctx):
        _Cells.__init__(self, Run(ctx))
        self.cfg = ctx.cfg
        self.serial = ctx.cfg.serial_no
        self.order = {}     # resource name -> every item, sorted
        self.views = {}     # (resource name, kinds) -> _LiveView

    def matches(self, cfg):
        return cfg is self.cfg and cfg.serial_no == self.serial

    def items(self, resource):
        items = self.order.get(resource.name)
        if items is None:
            items = list(resource.items(self.run, None))
            items.sort(key=resource.sort_key)
            self.order[resource.name] = items
        return items

    def view(self, ctx, resource, snapshots):
        """The live cells of ``resource`` for these snapshots (kind ->
        Snapshot); those of older generations are dropped."""
        kinds = tuple(sorted(snapshots))
        generations = tuple(snapshots[k].generation for k in kinds)
        key = (resource.name, kinds)
        view = self.views.get(key)
        if view is None or view.generations != generations:
            run = Run(ctx)
            resource.load_snapshots(run, snapshots)
            view = self.views[key] = _LiveView(run, generations)
        return view


class _LiveView(_Cells):
    def __init__(self, run, generations):
        _Cells.__init__(self, run)
        self.generations = generations


class QueryCache(object):
    """Values, rows and answers of queries (see the module's doc).

    ``clock``: an IReactorTime; ``live_ttl``: seconds live data is reused
    (0: every query asks the nodes, the config values are still kept).
    """

    def __init__(self, clock, live_ttl=DEFAULT_TTL,
                 max_answers=DEFAULT_MAX_ANSWERS, max_bytes=DEFAULT_MAX_BYTES):
        self.live = LiveCache(clock, live_ttl)
        self.max_answers = max_answers
        self.max_bytes = max_bytes
        # tells this master's versions from another's (or a restarted one)
        self.epoch = os.urandom(4).hex()
        #: moved by :meth:`time_changed`: part of every version
        self.time_generation = 0
        self._state = None
        self._answers = collections.OrderedDict()
        self._bytes = 0
        #: answers served from the cache / built (tests, benchmark)
        self.hits = 0
        self.builds = 0

    @property
    def live_ttl(self):
        return self.live.ttl

    def invalidate(self):
        """Forget everything (the next queries rebuild)."""
        self._state = None
        self._answers.clear()
        self._bytes = 0
        self.live.invalidate()

    def time_changed(self):
        """A value that follows the clock changed without a configuration
        change (a lease entered its warning window or ended; the lease
        service says when): the kept values and answers are dropped and
        the next answers have new versions."""
        self.time_generation += 1
        self._state = None
        self._answers.clear()
        self._bytes = 0

    # --- answering ------------------------------------------------------

    def usable_for(self, prepared):
        """Whether ``prepared`` (a PreparedQuery) may be answered here."""
        resource = prepared.resource
        if not resource.cacheable or prepared.names is not None:
            return False
        if names_items(prepared.qfilter, resource.namefield):
            return False
        if any(f.volatile for f in prepared.readers):
            return False
        if prepared.needs and not resource.live_kinds(prepared.needs):
            return False
        try:
            _filter_key(prepared.qfilter)
        except (TypeError, ValueError):
            return False
        return True

    async def answer(self, prepared, fmt):
        """The Answer to ``prepared`` in shape ``fmt``."""
        ctx = prepared.ctx
        cfg = ctx.cfg
        resource = prepared.resource
        kinds = sorted(resource.live_kinds(prepared.needs))
        snapshots = {}
        for _ in range(_ATTEMPTS):
            snapshots = {}
            for kind in kinds:
                snapshots[kind] = await self.live.get(kind, cfg, ctx.live)
            if all(s.serial == cfg.serial_no for s in snapshots.values()):
                break
        live = "".join("-%s%d" % (kind[0], snapshots[kind].generation)
                       for kind in kinds)
        version = "%s.%d-%d%s" % (self.epoch, self.time_generation,
                                  cfg.serial_no, live)
        key = (version, resource.name, tuple(c.name for c in prepared.columns),
               _filter_key(prepared.qfilter), fmt)
        answer = self._answers.get(key)
        if answer is not None:
            self._answers.move_to_end(key)
            self.hits += 1
            return answer
        answer = self._build(prepared, fmt, version, snapshots)
        self._remember(key, answer)
        return answer

    def _config_state(self, ctx):
        state = self._state
        if state is None or not state.matches(ctx.cfg):
            # a new serial: nothing kept from the old one is valid
            state = self._state = _ConfigState(ctx)
            self._answers.clear()
            self._bytes = 0
        return state

    def _remember(self, key, answer):
        self._answers[key] = answer
        self._bytes += answer.size
        while self._answers and (len(self._answers) > self.max_answers or
                                 self._bytes > self.max_bytes):
            _, old = self._answers.popitem(last=False)
            self._bytes -= old.size

    def _build(self, prepared, fmt, version, snapshots):
        self.builds += 1
        ctx = prepared.ctx
        resource = prepared.resource
        state = self._config_state(ctx)
        view = state.view(ctx, resource, snapshots) if snapshots else None
        items = state.items(resource)
        name = resource.name

        def store_of(field):
            return state if field.needs == NEED_CONFIG else view

        if prepared.filter is not None:
            qfilter = prepared.filter

            def fetcher(item):
                def fetch(field):
                    value = _value(store_of(field), name, field, item)
                    return qlang.NO_VALUE if isinstance(value, base.Status) \
                        else value
                return fetch
            items = [item for item in items if qfilter(fetcher(item)) is True]
        items = list(resource.finish((view or state).run, items))
        columns = [_texts(store_of(c), name, c, fmt, items)
                   for c in prepared.columns]
        rows = []
        for item in items:
            key = item.uuid
            rows.append("[%s]" % ", ".join([col[key] for col in columns]))
        data = "[%s]" % ", ".join(rows)
        fields = json.dumps(prepared.definitions())
        return Answer(version, fields, data)


def _filter_key(qfilter):
    return json.dumps(qfilter, sort_keys=True)


def _value(store, resource_name, field, item):
    values = store.values.get((resource_name, field.name))
    if values is None:
        values = store.values[(resource_name, field.name)] = {}
    key = item.uuid
    try:
        return values[key]
    except KeyError:
        value = values[key] = field.getter(store.run, item)
        return value


def _texts(store, resource_name, field, fmt, items):
    """``{item key: JSON text}`` of ``field`` covering ``items``."""
    tkey = (resource_name, field.name, fmt)
    texts = store.texts.get(tkey)
    if texts is None:
        texts = store.texts[tkey] = {}
    for item in items:
        key = item.uuid
        if key in texts:
            continue
        value = _value(store, resource_name, field, item)
        if fmt == FMT_QUERY:
            if isinstance(value, base.Status):
                texts[key] = "[%d, null]" % value.rs
            else:
                texts[key] = "[0, %s]" % encode(value)
        else:
            texts[key] = "null" if isinstance(value, base.Status) \
                else encode(value)
    return texts
