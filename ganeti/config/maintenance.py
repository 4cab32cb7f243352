"""The maintenance daemon's switches and state in config.data.

They live in the configuration (its top-level ``maintenance`` entry) so
that they are replicated with it to the master candidates and survive a
master failover; the daemon changes them only through the master
(docs/maintd.rst).  Every change is checked here: a bad value names the
field and changes nothing.
"""

import copy
import numbers

from ganeti import errors
from ganeti import objects


def _bool(value):
    return isinstance(value, bool)


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and \
        value >= 0


def _positive(value):
    return _count(value) and value > 0


def _share(value):
    return isinstance(value, numbers.Real) and \
        not isinstance(value, bool) and value >= 0


#: the switches: field -> (check, what it must be)
PARAMETERS = {
    "round_delay": (_positive, "a positive number of seconds"),
    "balance": (_bool, "true or false"),
    "balance_threshold": (_share, "a non-negative number"),
    "harep": (_bool, "true or false"),
    "balance_disk_moves": (_bool, "true or false"),
    "balance_load": (_bool, "true or false"),
    "balance_hold_down": (_count, "a non-negative number of seconds"),
    "balance_max_moves": (_count, "a non-negative number of moves (0: no"
                          " limit)"),
}


def check_parameters(changes, prefix="maintenance"):
    """OpPrereqError naming the first bad switch in ``changes``."""
    for key, value in sorted(changes.items()):
        if key not in PARAMETERS:
            raise errors.OpPrereqError(
                "%s: unknown parameter '%s' (known: %s)"
                % (prefix, key, ", ".join(sorted(PARAMETERS))),
                errors.ECODE_INVAL)
        check, what = PARAMETERS[key]
        if not check(value):
            raise errors.OpPrereqError("%s/%s: expected %s, got %r"
                                       % (prefix, key, what, value),
                                       errors.ECODE_INVAL)


def _check_incident(data):
    if not isinstance(data, dict):
        raise errors.OpPrereqError("incidents: expected objects, got %r"
                                   % (data,), errors.ECODE_INVAL)
    inc = objects.Incident.from_dict(data)
    if not inc.uuid or not isinstance(inc.uuid, str):
        raise errors.OpPrereqError("incidents: an incident needs a uuid",
                                   errors.ECODE_INVAL)
    if inc.repair_status not in objects.INCIDENT_STATES:
        raise errors.OpPrereqError(
            "incidents/%s/repair_status: '%s' is not one of %s"
            % (inc.uuid, inc.repair_status,
               ", ".join(sorted(objects.INCIDENT_STATES))),
            errors.ECODE_INVAL)
    if not isinstance(inc.original, dict):
        raise errors.OpPrereqError(
            "incidents/%s/original: expected the report's JSON object"
            % inc.uuid, errors.ECODE_INVAL)
    if not isinstance(inc.jobs, list) or \
            not all(_count(j) for j in inc.jobs):
        raise errors.OpPrereqError("incidents/%s/jobs: expected job ids"
                                   % inc.uuid, errors.ECODE_INVAL)
    return inc


class MaintenanceMutators(object):
    """ConfigStore's changes of ``self.maintenance``."""

    def set_maintenance_params(self, **changes):
        """Change the daemon's switches (see PARAMETERS)."""
        check_parameters(changes)
        with self._change("changing the maintenance parameters"):
            m = self.maintenance
            for key, value in changes.items():
                setattr(m, key, value)
            self._touch(m)

    def update_maintenance(self, incidents=None, removed=(), jobs=None,
                           evacuated=None, moves=None):
        """What the daemon records: incidents added or replaced (dicts in
        config.data's form), incident uuids ``removed``, the jobs of its
        round, the nodes it evacuated and its recent balancing moves."""
        new = [_check_incident(d) for d in (incidents or [])]
        for key, value in (("jobs", jobs), ("evacuated", evacuated)):
            if value is not None and (not isinstance(value, list) or
                                      not all(isinstance(v, (int, str)) and
                                              not isinstance(v, bool)
                                              for v in value)):
                raise errors.OpPrereqError("%s: expected a list, got %r"
                                           % (key, value), errors.ECODE_INVAL)
        if moves is not None and (
                not isinstance(moves, list) or
                not all(isinstance(m, list) and len(m) == 2 and
                        isinstance(m[0], str) and _share(m[1])
                        for m in moves)):
            raise errors.OpPrereqError(
                "moves: expected [[instance uuid, unix time], ...], got %r"
                % (moves,), errors.ECODE_INVAL)
        for uuid in removed:
            if uuid not in self.maintenance.incidents:
                raise errors.OpPrereqError("incident %s is not known" % uuid,
                                           errors.ECODE_NOENT)
        with self._change("recording the maintenance state"):
            m = self.maintenance
            now = self._now()
            for inc in new:
                old = m.incidents.get(inc.uuid)
                inc.ctime = old.ctime if old is not None else now
                inc.mtime = now
                inc.serial_no = (old.serial_no + 1) if old is not None else 1
                m.incidents[inc.uuid] = inc
            for uuid in removed:
                del m.incidents[uuid]
            if jobs is not None:
                m.jobs = list(jobs)
            if evacuated is not None:
                m.evacuated = list(evacuated)
            if moves is not None:
                m.moves = copy.deepcopy(moves)
            self._touch(m)

    def cancel_incident(self, uuid):
        """Mark an incident canceled: the daemon takes no more action for
        it and forgets it once no node reports it."""
        inc = self.maintenance.incidents.get(uuid)
        if inc is None:
            raise errors.OpPrereqError(
                "incident_id: no incident '%s' (gnt-cluster repair-list"
                " lists them)" % uuid, errors.ECODE_NOENT)
        if inc.repair_status == objects.INCIDENT_CANCELED:
            return False
        with self._change("canceling incident %s" % uuid):
            inc.repair_status = objects.INCIDENT_CANCELED
            self._touch(inc)
            self._touch(self.maintenance)
        return True
