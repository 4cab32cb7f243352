"""What each confd request type answers (as Ganeti's confd).

:func:`answer` takes a snapshot, the request type and the raw ``query`` of a
request that already passed the signature, clock and replay checks, and
returns the inner reply message (JSON text in a wire.PreparedMsg).  Nothing
here raises on a bad query of a known shape: it is an error reply, as in
Ganeti (only wrongly typed dict members raise BadQuery, see answer()).

Replies whose answer depends only on the snapshot (and a link or node name)
are memoised in the snapshot, so a flood of "instance IPs on link X" costs
one JSON encoding per config version.
"""

import functools
import re

import attr

from ganeti import objects
from ganeti.confd import wire

_MISSING = object()
_ARRAY_INDEX = re.compile(r"^(0|[1-9][0-9]*)$")


class BadQuery(Exception):
    """The query has the wrong shape for its request type."""


@attr.s(frozen=True, slots=True)
class DictQuery(object):
    link = attr.ib(default=None)
    ip = attr.ib(default=None)
    ip_list = attr.ib(factory=list)
    fields = attr.ib(factory=list)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _field_code(value):
    """A field code; Ganeti's confd-client sends them as numeric strings."""
    if _is_int(value):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) < 4:
        return int(value)
    raise BadQuery("field %r is not an integer" % (value,))


def parse_dict_query(raw):
    """Validate a dict query; a ``null`` value means the key is absent."""
    link = raw.get(wire.REQQ_LINK)
    ip = raw.get(wire.REQQ_IP)
    ip_list = raw.get(wire.REQQ_IPLIST)
    fields = raw.get(wire.REQQ_FIELDS)
    if link is not None and not isinstance(link, str):
        raise BadQuery("link (key \"0\") must be a string")
    if ip is not None and not isinstance(ip, str):
        raise BadQuery("ip (key \"1\") must be a string")
    if ip_list is None:
        ip_list = []
    elif not (isinstance(ip_list, list)
              and all(isinstance(i, str) for i in ip_list)):
        raise BadQuery("ip list (key \"2\") must be a list of strings")
    if fields is None:
        fields = []
    elif not isinstance(fields, list):
        raise BadQuery("fields (key \"3\") must be a list")
    else:
        fields = [_field_code(f) for f in fields]
    return DictQuery(link=link, ip=ip, ip_list=ip_list, fields=fields)


def _reply(status, value, serial):
    return wire.PreparedMsg(wire.encode_reply(status, value, serial))


def _ok(value, serial):
    return _reply(wire.STATUS_OK, value, serial)


def _error(value):
    return _reply(wire.STATUS_ERROR, value, 0)


ARGUMENT_ERROR = _error(wire.ERROR_ARGUMENT)
UNKNOWN_ENTRY = _error(wire.ERROR_UNKNOWN_ENTRY)
NOT_LOADED = _error("configuration not loaded")


def _invalid_query_type(query):
    return _error("Invalid query type %s" % _describe(query))


def _describe(query):
    if query is _MISSING or query is None:
        return "(empty query)"
    if isinstance(query, str):
        return "(plain query)"
    if isinstance(query, dict):
        return "(dict query)"
    return "(%s)" % type(query).__name__


def _plain(query):
    """The string of a plain query, or None for any other shape."""
    return query if isinstance(query, str) else None


def _named(find, not_found):
    """A handler of a plain query naming a node or an instance.

    ``find`` is the snapshot's lookup method (``"find_node"``...); a name
    it does not know is the error reply ``not_found % name``.  The handler
    is called with ``(snap, name, found)``.
    """
    def decorate(handler):
        @functools.wraps(handler)
        def named_handler(snap, query):
            name = _plain(query)
            if name is None:
                return _invalid_query_type(query)
            found = getattr(snap, find)(name)
            if found is None:
                return _error(not_found % name)
            return handler(snap, name, found)
        return named_handler
    return decorate


# --- the request types ---------------------------------------------------

def _ping(snap, query):
    return snap.pong


@_named("find_node", "Node '%s' not found")
def _node_role(snap, name, node):
    # As in Ganeti: "master" only when asked by the master's *name*.
    if name == snap.master_name:
        role = wire.NODE_ROLE_MASTER
    elif node.drained:
        role = wire.NODE_ROLE_DRAINED
    elif node.offline:
        role = wire.NODE_ROLE_OFFLINE
    elif node.master_candidate:
        role = wire.NODE_ROLE_CANDIDATE
    else:
        role = wire.NODE_ROLE_REGULAR
    return _ok(role, snap.serial)


def _pip_by_ip(snap, link, ip):
    """[status, answer, serial] for one instance IP."""
    inst = snap.link_ip_map.get(link, {}).get(ip)
    node = snap.store.nodes.get(inst.primary_node) if inst else None
    if node is None or not node.primary_ip:
        return [wire.STATUS_ERROR, wire.ERROR_UNKNOWN_ENTRY, 0]
    return [wire.STATUS_OK, node.primary_ip, snap.serial]


def _node_pip_by_instance_ip(snap, query):
    if not isinstance(query, dict):
        return ARGUMENT_ERROR
    dq = parse_dict_query(query)
    link = dq.link if dq.link is not None else snap.default_link
    if dq.ip is not None:
        return _reply(*_pip_by_ip(snap, link, dq.ip))
    return _ok([_pip_by_ip(snap, link, ip) for ip in dq.ip_list], snap.serial)


def _cluster_master(snap, query):
    if query is _MISSING or query is None:
        if snap.master_name is None:
            return _error("the master node is not in the configuration")
        return snap.memo("master", lambda: _ok(snap.master_name, snap.serial))
    if not isinstance(query, dict):
        return ARGUMENT_ERROR
    dq = parse_dict_query(query)
    if snap.master is None:
        return _error("the master node is not in the configuration")
    values = []
    for field in dq.fields:
        if field == wire.REQFIELD_NAME:
            values.append(snap.master_name)
        elif field == wire.REQFIELD_IP:
            values.append(snap.store.cluster.master_ip)
        elif field == wire.REQFIELD_MNODE_PIP:
            values.append(snap.master.primary_ip)
        else:
            return ARGUMENT_ERROR
    return _ok(values, snap.serial)


def _node_pip_list(snap, query):
    return snap.memo("node-pips", lambda: _ok(snap.node_pips, snap.serial))


def _mc_pip_list(snap, query):
    return snap.memo("mc-pips", lambda: _ok(snap.mc_pips, snap.serial))


def _instances_ips_list(snap, query):
    if query is _MISSING or query is None:
        link = snap.default_link
    elif isinstance(query, str):
        link = query
    else:
        return _invalid_query_type(query)
    if link not in snap.link_ips:
        return _ok([], snap.serial)
    return snap.memo(("link-ips", link),
                     lambda: _ok(snap.link_ips[link], snap.serial))


@_named("find_node", "Node '%s' not found")
def _node_drbd(snap, name, node):
    return snap.memo(("drbd", node.uuid), lambda: _ok(
        [m.to_list() for m in snap.drbd_minors.get(node.uuid, ())],
        node.serial_no or 0))


@_named("find_node", "Node not found in the configuration: %s")
def _node_instances(snap, name, node):
    def compute():
        primary, secondary = snap.node_instances.get(node.uuid, ([], []))
        return _ok([[_shown(i) for i in primary],
                    [_shown(i) for i in secondary]], node.serial_no or 0)
    return snap.memo(("node-instances", node.uuid), compute)


def _shown(inst):
    # an instance as answered: its private OS parameters by name only
    return objects.redact_config(inst.to_dict())


@_named("find_instance", "Instance not found in the configuration: %s")
def _instance_disks(snap, name, inst):
    return snap.memo(("disks", inst.uuid), lambda: _ok(
        [d.to_dict() for d in snap.instance_disks(inst)],
        inst.serial_no or 0))


def resolve_pointer(document, pointer):
    """The value at an RFC 6901 JSON pointer; KeyError if there is none."""
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise KeyError(pointer)
    value = document
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            value = value[token]
        elif isinstance(value, list):
            if not _ARRAY_INDEX.match(token) or int(token) >= len(value):
                raise KeyError(token)
            value = value[int(token)]
        else:
            raise KeyError(token)
    return value


def _config_query(snap, query):
    path = _plain(query)
    if path is None:
        return _invalid_query_type(query)
    try:
        value = resolve_pointer(snap.config_dict, path)
    except KeyError:
        return ARGUMENT_ERROR
    return _ok(value, snap.serial)


def _data_collectors(snap, query):
    return snap.memo("collectors",
                     lambda: _ok(snap.data_collectors, snap.serial))


HANDLERS = {
    wire.REQ_PING: _ping,
    wire.REQ_NODE_ROLE_BYNAME: _node_role,
    wire.REQ_NODE_PIP_BY_INSTANCE_IP: _node_pip_by_instance_ip,
    wire.REQ_CLUSTER_MASTER: _cluster_master,
    wire.REQ_NODE_PIP_LIST: _node_pip_list,
    wire.REQ_MC_PIP_LIST: _mc_pip_list,
    wire.REQ_INSTANCES_IPS_LIST: _instances_ips_list,
    wire.REQ_NODE_DRBD: _node_drbd,
    wire.REQ_NODE_INSTANCES: _node_instances,
    wire.REQ_INSTANCE_DISKS: _instance_disks,
    wire.REQ_CONFIG_QUERY: _config_query,
    wire.REQ_DATA_COLLECTORS: _data_collectors,
}
assert set(HANDLERS) == wire.REQUEST_TYPES


def answer(snap, req_type, query=_MISSING):
    """The inner reply message (a wire.PreparedMsg) for one request.

    ``req_type`` must already be an int; ``snap`` may be None when no
    configuration could be loaded yet.  Raises BadQuery for a dict query
    with wrongly typed members (the caller counts it and sends
    ARGUMENT_ERROR).
    """
    handler = HANDLERS.get(req_type)
    if handler is None:
        return _reply(wire.STATUS_NOTIMPLEMENTED,
                      "unknown request type %d" % req_type, 0)
    if snap is None:
        return NOT_LOADED
    return handler(snap, query)


MISSING = _MISSING
