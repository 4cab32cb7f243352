"""Configuration changes as events of the event stream (docs/events.rst).

The store reports each accepted change as the objects it added, changed
or removed, in their dict forms before and after
(:attr:`ConfigStore.change_listeners`); :func:`change_events` turns them
into ``(kind, type, name, id, data)`` tuples for
:meth:`ganeti.events.EventBus.publish`.
"""

from ganeti import events

#: config.data map -> event kind
_KIND = {
    "instances": events.KIND_INSTANCE,
    "nodes": events.KIND_NODE,
    "nodegroups": events.KIND_GROUP,
    "networks": events.KIND_NETWORK,
    "cluster": events.KIND_CLUSTER,
    "filters": events.KIND_FILTER,
}

#: fields every change moves: not worth an event on their own
_BOOKKEEPING = frozenset(["serial_no", "mtime", "ctime"])

#: per kind, the fields whose change is a "state" event
_STATE_FIELDS = {
    events.KIND_INSTANCE: ("admin_state", "admin_state_source"),
    events.KIND_NODE: ("offline", "drained", "master_candidate",
                       "powered"),
}

#: the tag kind (as gnt-*/RAPI name it) of each event kind
_TAG_KIND = {
    events.KIND_INSTANCE: "instance",
    events.KIND_NODE: "node",
    events.KIND_GROUP: "nodegroup",
    events.KIND_NETWORK: "network",
    events.KIND_CLUSTER: "cluster",
}


def _name(kind, obj):
    if kind == events.KIND_CLUSTER:
        return obj.get("cluster_name")
    return obj.get("name")


def _changed_fields(before, after):
    keys = set(before) | set(after)
    return sorted(k for k in keys if k not in _BOOKKEEPING
                  and before.get(k) != after.get(k))


def change_events(what, changes):
    """The events of one configuration change: ``what`` (the store's
    label) and its ``[(unit, before, after)]``."""
    found = []
    for (map_name, uuid), before, after in changes:
        if map_name == "maintenance":
            found.extend(_incident_events(before or {}, after or {}))
            continue
        kind = _KIND.get(map_name)
        if kind is None:
            continue            # disks: reported with their instance
        if before is None:
            found.append((kind, events.TYPE_CREATED, _name(kind, after),
                          uuid, {"change": what}))
            continue
        if after is None:
            found.append((kind, events.TYPE_REMOVED, _name(kind, before),
                          uuid, {"change": what}))
            continue
        fields = _changed_fields(before, after)
        if not fields:
            continue
        name = _name(kind, after)
        uuid = uuid or after.get("uuid")
        state = [f for f in _STATE_FIELDS.get(kind, ()) if f in fields]
        if state:
            found.append((kind, events.TYPE_STATE, name, uuid, dict(
                {f: after.get(f) for f in state},
                previous={f: before.get(f) for f in state})))
        if "tags" in fields and kind in _TAG_KIND:
            old = set(before.get("tags") or ())
            new = set(after.get("tags") or ())
            found.append((events.KIND_TAGS, events.TYPE_MODIFIED, name, uuid,
                          {"kind": _TAG_KIND[kind],
                           "added": sorted(new - old),
                           "removed": sorted(old - new),
                           "tags": sorted(new)}))
        rest = [f for f in fields if f != "tags" and f not in state]
        if rest:
            found.append((kind, events.TYPE_MODIFIED, name, uuid,
                          {"change": what, "fields": rest}))
    return found


def _incident_events(before, after):
    old = before.get("incidents") or {}
    new = after.get("incidents") or {}
    found = []
    for uuid in sorted(set(old) | set(new)):
        was, now = old.get(uuid), new.get(uuid)
        if was == now:
            continue
        incident = now if now is not None else was
        data = {"node": incident.get("node"),
                "repair_status": incident.get("repair_status"),
                "action": incident.get("action"),
                "tag": incident.get("tag"),
                "jobs": incident.get("jobs") or []}
        if was is None:
            type_ = events.TYPE_CREATED
        elif now is None:
            type_ = events.TYPE_REMOVED
        elif was.get("repair_status") != now.get("repair_status"):
            type_ = events.TYPE_STATE
            data["previous"] = {"repair_status": was.get("repair_status")}
        else:
            type_ = events.TYPE_MODIFIED
        found.append((events.KIND_MAINTENANCE, type_, incident.get("node"),
                      uuid, data))
    return found


def publisher(bus):
    """A change listener publishing on ``bus``."""
    def publish(what, changes):
        for kind, type_, name, uuid, data in change_events(what, changes):
            bus.publish(kind, type_, name=name, id=uuid, data=data)
    return publish
