"""Field definitions, result statuses and the table every resource fills.

A resource (instance, node, ...) is a :class:`Resource` subclass with a
*field table*: an ordered mapping of field name to :class:`Field`.  A field
knows its wire definition (name, title, kind, doc), the data it needs
(``needs``: config only, or live data from the nodes, or a provider), flags
that change how the filter compares it, and a getter ``getter(run, item)``
that returns the value or one of the status markers :data:`UNAVAIL`,
:data:`NODATA`, :data:`OFFLINE`.  A *volatile* field depends on something
besides the configuration and the live data (the clock, for example):
its values are never kept by the query cache (:mod:`ganeti.query.cache`).
"""

import abc

from ganeti import errors
from ganeti import qlang
from ganeti.qlang import (QFT_UNKNOWN, QFT_TEXT, QFT_BOOL, QFT_NUMBER,
                          QFT_NUMBER_FLOAT, QFT_UNIT, QFT_TIMESTAMP,
                          QFT_OTHER, nice_sort_key)

# Re-exported for the resource modules
FF_HOSTNAME = qlang.FF_HOSTNAME
FF_SPLIT_TIMESTAMP = qlang.FF_SPLIT_TIMESTAMP
FF_JOB_ID = qlang.FF_JOB_ID
nice_sort = qlang.nice_sort

# Result status of one value (the first element of each [status, value])
RS_NORMAL = 0
RS_UNKNOWN = 1
RS_NODATA = 2
RS_UNAVAIL = 3
RS_OFFLINE = 4
RS_ALL = frozenset([RS_NORMAL, RS_UNKNOWN, RS_NODATA, RS_UNAVAIL, RS_OFFLINE])

QFT_ALL = frozenset([QFT_UNKNOWN, QFT_TEXT, QFT_BOOL, QFT_NUMBER,
                     QFT_NUMBER_FLOAT, QFT_UNIT, QFT_TIMESTAMP, QFT_OTHER])

# What a field needs besides the configuration
NEED_CONFIG = "config"
NEED_LIVE_INST = "live-instances"   # instances_runtime of the nodes
NEED_LIVE_NODE = "live-nodes"       # nodes_runtime of the nodes


class Status(object):
    """A non-normal result, returned by getters instead of a value."""

    def __init__(self, rs, name):
        self.rs = rs
        self._name = name

    def __repr__(self):
        return self._name


UNKNOWN = Status(RS_UNKNOWN, "UNKNOWN")
NODATA = Status(RS_NODATA, "NODATA")
UNAVAIL = Status(RS_UNAVAIL, "UNAVAIL")
OFFLINE = Status(RS_OFFLINE, "OFFLINE")


def result(value):
    """``[status, value]`` for a getter's return value."""
    if isinstance(value, Status):
        return [value.rs, None]
    return [RS_NORMAL, value]


def plain(value):
    """The old-style value: the value itself, None for a non-normal one."""
    return None if isinstance(value, Status) else value


class Field(object):
    """One query field of a resource."""

    __slots__ = ("name", "title", "kind", "doc", "getter", "needs", "flags",
                 "volatile")

    def __init__(self, name, title, kind, doc, getter,
                 needs=NEED_CONFIG, flags=(), volatile=False):
        if kind not in QFT_ALL:
            raise errors.ProgrammerError("field %s: bad kind %r"
                                         % (name, kind))
        self.name = name
        self.title = title
        self.kind = kind
        self.doc = doc
        self.getter = getter
        self.needs = needs
        self.flags = frozenset(flags)
        self.volatile = volatile

    def definition(self):
        return {"name": self.name, "title": self.title, "kind": self.kind,
                "doc": self.doc}

    def alias(self, name):
        """The same field under another name (Ganeti keeps a few aliases)."""
        return Field(name, self.title, self.kind, self.doc, self.getter,
                     self.needs, self.flags, self.volatile)

    def __repr__(self):
        return "<Field %s>" % self.name


def unknown_field(name):
    """The placeholder column for a field name the resource lacks."""
    return Field(name, name, QFT_UNKNOWN, "Unknown field '%s'" % name,
                 lambda run, item: UNKNOWN)


class FieldTable(object):
    """An ordered set of fields, checked for duplicates as it is built."""

    def __init__(self):
        self._fields = {}

    def add(self, field):
        if field.name in self._fields:
            raise errors.ProgrammerError("duplicate query field %s"
                                         % field.name)
        self._fields[field.name] = field
        return field

    def extend(self, fields):
        for field in fields:
            self.add(field)

    def alias(self, name, target):
        self.add(self._fields[target].alias(name))

    def get(self, name):
        return self._fields.get(name)

    def __contains__(self, name):
        return name in self._fields

    def __iter__(self):
        return iter(self._fields.values())

    def __len__(self):
        return len(self._fields)

    def names(self):
        return list(self._fields)


# --- getter helpers --------------------------------------------------------

def attr_getter(name, none=UNAVAIL):
    """Getter of ``item.<name>``; a None value becomes ``none``."""
    def get(_run, item):
        value = getattr(item, name, None)
        return none if value is None else value
    return get


def timestamp_getter(name):
    return attr_getter(name)


def tags_getter(_run, item):
    return sorted(item.tags or ())


def common_fields(kind_title):
    """ctime, mtime, serial_no, uuid, tags of a config object."""
    return [
        Field("ctime", "CTime", QFT_TIMESTAMP, "When the object was created",
              timestamp_getter("ctime")),
        Field("mtime", "MTime", QFT_TIMESTAMP,
              "When the object was last modified", timestamp_getter("mtime")),
        Field("serial_no", "SerialNo", QFT_NUMBER,
              "%s serial number, bumped by every change" % kind_title,
              attr_getter("serial_no")),
        Field("uuid", "UUID", QFT_TEXT, "%s UUID" % kind_title,
              attr_getter("uuid")),
        Field("tags", "Tags", QFT_OTHER, "Tags (sorted list)", tags_getter),
    ]


def param_kind(value, size=False):
    """Field kind for a parameter, judged by its (default) value."""
    if isinstance(value, bool):
        return QFT_BOOL
    if isinstance(value, int):
        return QFT_UNIT if size else QFT_NUMBER
    if isinstance(value, float):
        return QFT_NUMBER_FLOAT
    return QFT_OTHER


class Resource(abc.ABC):
    """What can be queried: a field table plus how to find the items.

    Subclasses set ``name``, ``fields`` and ``namefield`` and implement
    :meth:`items` and :meth:`item_name`; those with live data override
    :meth:`collect`.
    """

    name = None
    namefield = "name"
    fields = None
    #: Item kind used in "not known" errors
    noun = "item"
    #: The attribute of the query context whose provider gives the rows
    #: ("jobs", "locks"); None: they come from the configuration
    provider = None
    #: Whether answers may come from the query cache: every field reads
    #: only the configuration, the live data or is marked volatile
    cacheable = False

    @property
    def from_provider(self):
        return self.provider is not None

    def rows_provider(self, run):
        """The context's provider of this resource's rows; OpPrereqError
        where this process has none."""
        source = getattr(run.ctx, self.provider)
        if source is None:
            raise errors.OpPrereqError("%s information is not available"
                                       " here" % self.noun.capitalize(),
                                       errors.ECODE_ENVIRON)
        return source

    @abc.abstractmethod
    def items(self, run, names):
        """Every item (``names`` None), or the items with these names.

        Unknown names raise OpPrereqError naming them.
        """

    @abc.abstractmethod
    def item_name(self, item):
        """The name rows are sorted and looked up by."""

    def sort_key(self, item):
        return nice_sort_key(self.item_name(item))

    def collect(self, run, items, needs):
        """Fetch the data ``needs`` asks for; may return a Deferred."""
        return None

    def finish(self, run, items):
        """Items the engine returns rows for (after filtering)."""
        return items

    def live_kinds(self, needs):
        """The kinds of live data (``ganeti.query.livecache.KIND_*``) the
        query cache fetches for fields needing ``needs``."""
        return frozenset()

    def load_snapshots(self, run, snapshots):
        """Fill ``run``'s live data from the query cache's snapshots (kind
        -> Snapshot, every node's data) as :meth:`collect` would have."""


def lookup_by_name(objects, names, noun, display=lambda o: o.name,
                   hostname=True):
    """The objects named by ``names`` (exact name, else short host name).

    Every name must match something; a short host name (``node1`` for
    ``node1.example.com``) that matches several objects gives all of them,
    as the filter ``name == "node1"`` would.
    """
    by_name = {}
    by_label = {}  # first name component, lower case -> objects
    for obj in objects:
        key = display(obj)
        by_name.setdefault(key, []).append(obj)
        if hostname and isinstance(key, str):
            by_label.setdefault(key.split(".", 1)[0].lower(), []).append(obj)
    found = []
    seen = set()
    missing = []
    for name in names:
        if not isinstance(name, str):
            missing.append(repr(name))
            continue
        matches = by_name.get(name)
        if not matches and hostname:
            label = name.split(".", 1)[0].lower()
            matches = [o for o in by_label.get(label, ())
                       if qlang.match_hostname(display(o), name)]
        if not matches:
            missing.append(name)
            continue
        for obj in matches:
            if id(obj) not in seen:
                seen.add(id(obj))
                found.append(obj)
    if missing:
        raise errors.OpPrereqError(
            "%s%s not known: %s" % (noun[0].upper() + noun[1:],
                                    "s" if len(missing) > 1 else "",
                                    ", ".join(missing)),
            errors.ECODE_NOENT)
    return found


def rows_to_dicts(fields, data):
    """Query rows (``[[status, value], ...]``, as luxi's Query answers) as
    dicts of plain values; anything not normal becomes None."""
    result = []
    for row in data:
        result.append(dict((name, value if status == RS_NORMAL else None)
                           for name, (status, value) in zip(fields, row)))
    return result
