"""config.data's bytes from per-object cached JSON.

A full serialisation of a big cluster costs tens of milliseconds, while a
change touches one or a few objects.  :class:`EncodedConfig` keeps, for
every object of the store, the JSON it had at the last accepted change (a
fragment), re-encodes only the objects a change names, and puts the file
together from the fragments.  The result is byte for byte what
``json.dumps(store.to_dict(), sort_keys=True)`` gives: JSON without
indentation encodes a nested object the same wherever it stands, so the
file is the sorted top-level keys, each map its fragments in key order.

The fragments are also the rollback point: an object a refused change
touched is rebuilt from its fragment (:meth:`EncodedConfig.stored`).

A unit is ``(kind, key)``: ``("cluster", None)``, ``("maintenance", None)``
or ``(map name, key)`` for the objects of ``objects.CONFIG_MAPS``.
"""

import bisect
import json

import attr

from ganeti import objects

#: the kinds of units kept outside the maps
CLUSTER = ("cluster", None)
MAINTENANCE = ("maintenance", None)

_MAPS = tuple(name for name, _ in objects.CONFIG_MAPS)


def encode(obj):
    """One object's JSON, as the full serialisation writes it."""
    return json.dumps(obj.to_dict(copy_values=False), sort_keys=True)


@attr.s(frozen=True)
class Snapshot(object):
    """The file as of one accepted change: immutable pieces that another
    thread may join (the writer) while the store goes on changing."""

    #: counts accepted changes; a write of this snapshot covers them all
    generation = attr.ib()
    #: [(top-level key, bytes or a tuple of map item fragments)], sorted
    parts = attr.ib()

    def join(self):
        out = []
        for key, value in self.parts:
            out.append(b", " if out else b"{")
            out.append(json.dumps(key).encode("ascii") + b": ")
            if isinstance(value, tuple):
                out.append(b"{")
                out.append(b", ".join(value))
                out.append(b"}")
            else:
                out.append(value)
        out.append(b"}" if out else b"{}")
        return b"".join(out)


class EncodedConfig(object):
    """The fragments of one ConfigStore; see the module docstring."""

    def __init__(self, store):
        self._store = store
        # map name -> {key: b'"key": {...}'}; its keys sorted, and the
        # fragments in that order; those as a tuple (None: to be made)
        self._items = {}
        self._keys = {}
        self._ordered = {}
        self._tuples = {}
        for name in _MAPS:
            mapping = getattr(store, name)
            items = self._items[name] = {k: self._item(k, o)
                                         for k, o in mapping.items()}
            keys = self._keys[name] = sorted(mapping)
            self._ordered[name] = [items[k] for k in keys]
            self._tuples[name] = None
        self._cluster = encode(store.cluster).encode("ascii")
        self._maintenance = None
        self._maintenance_default = True
        self._encode_maintenance()

    @staticmethod
    def _item(key, obj):
        return ("%s: %s" % (json.dumps(key), encode(obj))).encode("ascii")

    def _encode_maintenance(self):
        m = self._store.maintenance
        self._maintenance = encode(m).encode("ascii")
        self._maintenance_default = m.is_default()

    # --- what changed -------------------------------------------------

    def membership_changes(self, known=(), thorough=False):
        """Units added to or removed from the maps since the fragments
        were taken and not among the units ``known`` (recorded by the
        mutator).  A map whose size is what ``known`` explains is taken
        as it is (cheap); else, or if ``thorough``, its keys are
        compared."""
        explained = dict.fromkeys(_MAPS, 0)
        for kind, key in known:
            if kind in explained:
                present = key in getattr(self._store, kind)
                stored = key in self._items[kind]
                explained[kind] += present - stored
        found = set()
        for name in _MAPS:
            mapping = getattr(self._store, name)
            items = self._items[name]
            if thorough or len(mapping) != len(items) + explained[name]:
                found.update((name, k) for k in mapping.keys() ^ items.keys())
        return found

    # --- changing the fragments ---------------------------------------

    def update(self, units):
        """Re-encode ``units`` from the store's objects (dropping those
        gone); returns what :meth:`undo` needs to put the old ones back."""
        undo = []
        for unit in units:
            undo.append((unit, self._get(unit)))
            self._set(unit, self._encode(unit))
        return undo

    def undo(self, token):
        for unit, old in reversed(token):
            self._set(unit, old)

    def _encode(self, unit):
        kind, key = unit
        if unit == CLUSTER:
            return encode(self._store.cluster).encode("ascii")
        if unit == MAINTENANCE:
            m = self._store.maintenance
            return (encode(m).encode("ascii"), m.is_default())
        obj = getattr(self._store, kind).get(key)
        return None if obj is None else self._item(key, obj)

    def _get(self, unit):
        kind, key = unit
        if unit == CLUSTER:
            return self._cluster
        if unit == MAINTENANCE:
            return (self._maintenance, self._maintenance_default)
        return self._items[kind].get(key)

    def _set(self, unit, value):
        kind, key = unit
        if unit == CLUSTER:
            self._cluster = value
            return
        if unit == MAINTENANCE:
            self._maintenance, self._maintenance_default = value
            return
        items = self._items[kind]
        keys = self._keys[kind]
        ordered = self._ordered[kind]
        if value is None:
            if key not in items:
                return
            del items[key]
            at = bisect.bisect_left(keys, key)
            del keys[at]
            del ordered[at]
        else:
            at = bisect.bisect_left(keys, key)
            if key in items:
                ordered[at] = value
            else:
                keys.insert(at, key)
                ordered.insert(at, value)
            items[key] = value
        self._tuples[kind] = None

    # --- reading ----------------------------------------------------------

    def stored_dict(self, unit):
        """The dict form ``unit`` had at the last accepted change; None if
        it did not exist then."""
        kind, key = unit
        if unit == CLUSTER:
            return json.loads(self._cluster)
        if unit == MAINTENANCE:
            return json.loads(self._maintenance)
        item = self._items[kind].get(key)
        if item is None:
            return None
        prefix = len(json.dumps(key)) + 2
        return json.loads(item[prefix:])

    def stored(self, unit):
        """The object ``unit`` had at the last accepted change, rebuilt
        from its fragment; None if it did not exist then."""
        kind, key = unit
        if unit == CLUSTER:
            return objects.Cluster.from_dict(json.loads(self._cluster))
        if unit == MAINTENANCE:
            return objects.Maintenance.from_dict(
                json.loads(self._maintenance))
        item = self._items[kind].get(key)
        if item is None:
            return None
        klass = dict(objects.CONFIG_MAPS)[kind]
        prefix = len(json.dumps(key)) + 2
        return klass.from_dict(json.loads(item[prefix:]))

    def snapshot(self, generation):
        """The file now: the fragments, and the top-level values (small:
        encoded afresh every time)."""
        s = self._store
        parts = {
            "version": json.dumps(s.version),
            "serial_no": json.dumps(s.serial_no),
            "ctime": json.dumps(s.ctime),
            "mtime": json.dumps(s.mtime),
            "filters": json.dumps(s.filters, sort_keys=True),
        }
        parts = {k: v.encode("ascii") for k, v in parts.items()}
        parts["cluster"] = self._cluster
        for name in _MAPS:
            value = self._tuples[name]
            if value is None:
                value = self._tuples[name] = tuple(self._ordered[name])
            parts[name] = value
        if not self._maintenance_default:
            parts["maintenance"] = self._maintenance
        for key, value in s.unknown.items():
            if key not in parts:
                parts[key] = json.dumps(value, sort_keys=True).encode("ascii")
        return Snapshot(generation, tuple(sorted(parts.items())))

    def stale(self):
        """Units whose fragment differs from their object now (a change
        made without telling the store): for the self-check."""
        found = sorted(self.membership_changes(thorough=True), key=repr)
        s = self._store
        for name in _MAPS:
            items = self._items[name]
            for key, obj in getattr(s, name).items():
                if key in items and items[key] != self._item(key, obj):
                    found.append((name, key))
        if self._cluster != encode(s.cluster).encode("ascii"):
            found.append(CLUSTER)
        if (self._maintenance, self._maintenance_default) != \
                self._encode(MAINTENANCE):
            found.append(MAINTENANCE)
        return found
