"""What the watcher remembers between passes, one JSON file per node group.

``<root>/var/lib/ganeti/watcher.<group uuid>.data`` (on the master) holds::

    {"instance": {"<name>": {"restart_count": 2, "restart_when": 1700000000.5,
                             "restart_gave_up": 1700001500.0,
                             "cleanup_count": 1, "cleanup_when": ...}},
     "node": {"<name>": {"bootid": "<the node's boot id>"}}}

(the key names are Ganeti's; ``restart_gave_up`` is this project's: when the
watcher stopped trying).  Instances are known by name, as in Ganeti.  A
record is forgotten once its instance is gone or runs again, and when its
last event is older than :data:`RETRY_EXPIRATION`, so an instance the
watcher gave up on is tried again after that long.  Removing the file
resets every counter and makes every node look freshly rebooted.

A file that cannot be read or does not have this shape is reported (the
file and the reason) and replaced by a fresh state at the end of the pass;
it never stops the watcher.
"""

import json
import os

from ganeti.utils.io import atomic_write

__all__ = ["MAXTRIES", "RETRY_EXPIRATION", "StateError", "WatcherState",
           "state_path", "read_instance_record"]

#: Restart attempts before the watcher gives up on an instance (Ganeti's).
MAXTRIES = 5
#: Seconds after which a record is forgotten (Ganeti's: 8 hours, far more
#: than MAXTRIES passes of the usual 5 minute period).
RETRY_EXPIRATION = 8 * 3600

KEY_RESTART_COUNT = "restart_count"
KEY_RESTART_WHEN = "restart_when"
KEY_GAVE_UP = "restart_gave_up"
KEY_CLEANUP_COUNT = "cleanup_count"
KEY_CLEANUP_WHEN = "cleanup_when"
KEY_BOOT_ID = "bootid"

_COUNTS = (KEY_RESTART_COUNT, KEY_CLEANUP_COUNT)
_TIMES = (KEY_RESTART_WHEN, KEY_GAVE_UP, KEY_CLEANUP_WHEN)


class StateError(ValueError):
    """The state file's content is not a watcher state (says why)."""


def state_path(paths, group_uuid):
    """The state file of node group ``group_uuid`` under ``paths``."""
    return os.path.join(paths.data_dir, "watcher.%s.data" % group_uuid)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_instance(name, record):
    if not isinstance(record, dict):
        raise StateError("instance %r: expected an object, got %s"
                         % (name, type(record).__name__))
    for key, value in record.items():
        if key in _COUNTS:
            if not (isinstance(value, int) and not isinstance(value, bool)
                    and value >= 0):
                raise StateError("instance %r: %s must be a non-negative"
                                 " integer, not %r" % (name, key, value))
        elif key in _TIMES:
            if not _is_number(value):
                raise StateError("instance %r: %s must be a time (seconds),"
                                 " not %r" % (name, key, value))
        else:
            raise StateError("instance %r: unknown key %r" % (name, key))


def _check_node(name, record):
    if not isinstance(record, dict):
        raise StateError("node %r: expected an object, got %s"
                         % (name, type(record).__name__))
    for key, value in record.items():
        if key != KEY_BOOT_ID:
            raise StateError("node %r: unknown key %r" % (name, key))
        if not isinstance(value, str):
            raise StateError("node %r: bootid must be a string, not %r"
                             % (name, value))


def parse(text):
    """The state data in ``text``, or StateError saying what is wrong."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise StateError("not JSON: %s" % err)
    if not isinstance(data, dict):
        raise StateError("expected an object, got %s" % type(data).__name__)
    unknown = set(data) - {"instance", "node"}
    if unknown:
        raise StateError("unknown key(s) %s" % ", ".join(sorted(unknown)))
    for section, check in (("instance", _check_instance),
                           ("node", _check_node)):
        entries = data.setdefault(section, {})
        if not isinstance(entries, dict):
            raise StateError("%s: expected an object, got %s"
                             % (section, type(entries).__name__))
        for name, record in entries.items():
            check(name, record)
    return data


class WatcherState(object):
    """One group's state; :meth:`load` it, change it, :meth:`save` it.

    ``problem`` says why the file on disk was not usable (None if it was,
    or if there was none); such a file is always rewritten by :meth:`save`.
    """

    def __init__(self, data=None, problem=None):
        self._data = data if data is not None else {"instance": {},
                                                    "node": {}}
        self._data.setdefault("instance", {})
        self._data.setdefault("node", {})
        self.problem = problem
        self._saved = None if problem else self._dump()

    @classmethod
    def load(cls, path):
        """The state in ``path``; a missing file is an empty state, an
        unusable one an empty state with ``problem`` set."""
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return cls()
        except OSError as err:
            return cls(problem="cannot read it: %s" % (err.strerror or err))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            return cls(problem="not UTF-8 text: %s" % err)
        if not text.strip():
            return cls()
        try:
            return cls(parse(text))
        except StateError as err:
            return cls(problem=str(err))

    def _dump(self):
        return json.dumps(self._data, sort_keys=True, indent=1) + "\n"

    @property
    def changed(self):
        return self._dump() != self._saved

    def save(self, path):
        """Write the state if it changed (atomically); True if written."""
        if not self.changed:
            return False
        text = self._dump()
        atomic_write(path, text.encode("utf-8"), mode=0o644)
        self._saved = text
        self.problem = None
        return True

    def to_dict(self):
        return json.loads(self._dump())

    # -- instances -----------------------------------------------------------

    def _instance(self, name):
        return self._data["instance"].get(name, {})

    def restart_count(self, name):
        return self._instance(name).get(KEY_RESTART_COUNT, 0)

    def gave_up(self, name):
        """When the watcher gave up restarting ``name`` (None if not)."""
        return self._instance(name).get(KEY_GAVE_UP)

    def cleanup_count(self, name):
        return self._instance(name).get(KEY_CLEANUP_COUNT, 0)

    def record_restart(self, name, now):
        record = self._data["instance"].setdefault(name, {})
        record[KEY_RESTART_COUNT] = record.get(KEY_RESTART_COUNT, 0) + 1
        record[KEY_RESTART_WHEN] = now

    def record_give_up(self, name, now):
        record = self._data["instance"].setdefault(name, {})
        record[KEY_GAVE_UP] = now
        record[KEY_RESTART_WHEN] = now

    def record_cleanup(self, name, now):
        record = self._data["instance"].setdefault(name, {})
        record[KEY_CLEANUP_COUNT] = record.get(KEY_CLEANUP_COUNT, 0) + 1
        record[KEY_CLEANUP_WHEN] = now

    def forget(self, name):
        """Drop everything about ``name``; True if there was something."""
        return self._data["instance"].pop(name, None) is not None

    def instance_record(self, name):
        """A copy of ``name``'s record (empty if none)."""
        return dict(self._instance(name))

    def instance_names(self):
        return sorted(self._data["instance"])

    def maintain(self, names, now):
        """Forget instances not in ``names`` and records whose last event
        is older than RETRY_EXPIRATION; the names forgotten."""
        names = set(names)
        earliest = now - RETRY_EXPIRATION
        dropped = []
        for name, record in list(self._data["instance"].items()):
            last = max([record.get(k, 0) for k in _TIMES] or [0])
            if name not in names or last < earliest:
                del self._data["instance"][name]
                dropped.append(name)
        return sorted(dropped)

    # -- nodes ----------------------------------------------------------------

    def boot_id(self, node):
        return self._data["node"].get(node, {}).get(KEY_BOOT_ID)

    def set_boot_id(self, node, boot_id):
        self._data["node"].setdefault(node, {})[KEY_BOOT_ID] = boot_id

    def keep_nodes(self, names):
        """Forget nodes not in ``names`` (removed or moved to another
        group)."""
        names = set(names)
        for node in list(self._data["node"]):
            if node not in names:
                del self._data["node"][node]


def read_instance_record(paths, group_uuid, name):
    """What the watcher recorded about instance ``name`` of group
    ``group_uuid`` (a dict, empty if nothing or if the file is unusable):
    for ``gnt-instance info`` on the master."""
    if not group_uuid:
        return {}
    state = WatcherState.load(state_path(paths, group_uuid))
    return state.instance_record(name)
