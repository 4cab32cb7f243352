"""Leases of forthcoming instances: reservations that end by themselves.

A forthcoming instance (a reservation) may carry a lease end, an absolute
time in seconds since the epoch.  It is kept as a tag of the instance,
``lease:until:<epoch seconds>``, so that config.data stays loadable by
Ganeti's own tools (whose objects module refuses unknown instance fields
but takes any valid tag).  The ``lease:`` tag namespace is reserved: the
lease tag is written only by ``gnt-instance add/modify --lease-until``
(the ``lease_until`` parameter of OP_INSTANCE_CREATE and
OP_INSTANCE_SET_PARAMS), and on the cluster ``lease:warning:<seconds>``
sets how long before its end a lease counts as expiring (default: one
hour, :data:`DEFAULT_WARNING_WINDOW`).

The master's :class:`LeaseKeeper` submits, when a lease ends, a job
removing the forthcoming instance (OP_INSTANCE_REMOVE with
``expired_lease``, which refuses to remove an instance that is no longer
forthcoming or whose lease was moved meanwhile).  Committing a
forthcoming instance drops its lease.
"""

import calendar
import re
import time

from twisted.logger import Logger

from ganeti import constants
from ganeti import events
from ganeti import errors

log = Logger()

#: the instance tag holding the lease end
TAG_PREFIX = "lease:until:"
#: the cluster tag holding the warning window (seconds)
WARNING_TAG_PREFIX = "lease:warning:"
#: the reserved tag namespace
NAMESPACE = "lease:"
#: seconds before its end a lease counts as expiring, unless the cluster
#: has a ``lease:warning:<seconds>`` tag
DEFAULT_WARNING_WINDOW = 3600

#: the reason trail source of the removal jobs
REASON_SOURCE = "gnt:daemon:masterd:leases"
#: the reason trail text of the removal jobs
REASON_TEXT = "lease expired"

#: values of the ``lease_state`` query field
STATE_NONE = ""
STATE_ACTIVE = "active"
STATE_EXPIRING = "expiring"
STATE_EXPIRED = "expired"

#: the word that makes a lease unlimited (modify only)
UNLIMITED = "none"

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_RELATIVE_RE = re.compile(r"^\+(\d+)([smhdw])$")
_ISO_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})"
                     r"(?::(\d{2}))?(?:Z|\+00:?00)$")

FORMS = ("an ISO 8601 UTC time like 2026-12-01T12:00:00Z, a duration from"
         " now like +30m, +2h or +3d")


def _bad(field, value, why):
    return errors.OpPrereqError("%s: %s" % (field, why % (value,)),
                                errors.ECODE_INVAL)


def parse(value, now, field="lease_until", allow_unlimited=True):
    """The lease end ``value`` means at ``now``: epoch seconds (int), or
    None for ``none`` (unlimited; only where ``allow_unlimited``).

    ``value`` is a number (epoch seconds), an ISO 8601 UTC time, a
    duration from now (``+2h``) or ``none``.  OpPrereqError naming
    ``field`` for anything else and for a time not in the future.
    """
    if isinstance(value, bool):
        raise _bad(field, value, "%r is not a time (" + FORMS + ")")
    if isinstance(value, (int, float)):
        until = value
    elif isinstance(value, str):
        text = value.strip()
        match = _RELATIVE_RE.match(text)
        iso = _ISO_RE.match(text)
        if text.lower() == UNLIMITED:
            if not allow_unlimited:
                raise _bad(field, value, "%r: a new reservation's lease"
                           " needs an end (leave the option out for an"
                           " unlimited one)")
            return None
        elif match:
            amount = int(match.group(1))
            if amount == 0:
                raise _bad(field, value, "%r: the duration must be positive")
            until = now + amount * _UNITS[match.group(2)]
        elif iso:
            parts = [int(p or 0) for p in iso.groups()]
            try:
                until = calendar.timegm(time.struct_time(
                    tuple(parts) + (0, 1, 0)))
                # timegm accepts day 31 of any month: check the round trip
                if tuple(time.gmtime(until)[:6]) != tuple(parts):
                    raise ValueError
            except (ValueError, OverflowError):
                raise _bad(field, value, "%r is not a valid date and time")
        else:
            try:
                until = float(text)
            except ValueError:
                raise _bad(field, value, "%r is not a time (" + FORMS +
                           (", or none for an unlimited lease"
                            if allow_unlimited else "") + ")")
    else:
        raise _bad(field, value, "%r is not a time (" + FORMS + ")")
    if until != until or until in (float("inf"), float("-inf")):
        raise _bad(field, value, "%r is not a time (" + FORMS + ")")
    until = int(until)
    if until <= now:
        raise errors.OpPrereqError(
            "%s: %s is in the past (now: %s); a lease must end in the future"
            % (field, format_time(until), format_time(now)),
            errors.ECODE_INVAL)
    return until


def is_lease_text(value):
    """Whether ``value`` has the form of a lease end (for the opcode's
    type check; whether it lies in the future is checked later)."""
    text = value.strip()
    if text.lower() == UNLIMITED or _RELATIVE_RE.match(text) or \
            _ISO_RE.match(text):
        return True
    float(text)   # ValueError: not a time
    return True


def format_time(epoch):
    """``epoch`` as ISO 8601 UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def tag(until):
    """The instance tag of a lease ending at ``until``."""
    return "%s%d" % (TAG_PREFIX, int(until))


def _int_suffix(text, prefix):
    rest = text[len(prefix):]
    if not rest.isdigit():
        return None
    return int(rest)


def lease_of(inst):
    """The lease end of ``inst`` (epoch seconds), or None: no lease, or
    the instance is not forthcoming (a committed instance has none)."""
    if not inst.forthcoming:
        return None
    ends = [_int_suffix(t, TAG_PREFIX) for t in (inst.tags or ())
            if t.startswith(TAG_PREFIX)]
    ends = [e for e in ends if e is not None]
    return min(ends) if ends else None


def lease_tags(inst):
    """The lease tags ``inst`` carries."""
    return {t for t in (inst.tags or ()) if t.startswith(TAG_PREFIX)}


def warning_window(cluster):
    """Seconds before its end a lease counts as expiring."""
    values = [_int_suffix(t, WARNING_TAG_PREFIX)
              for t in (cluster.tags or ())
              if t.startswith(WARNING_TAG_PREFIX)]
    values = [v for v in values if v is not None]
    return min(values) if values else DEFAULT_WARNING_WINDOW


def state(inst, now, window):
    """``lease_state``: "" (no lease), active, expiring (within ``window``
    of its end) or expired."""
    until = lease_of(inst)
    if until is None:
        return STATE_NONE
    if now >= until:
        return STATE_EXPIRED
    if now >= until - window:
        return STATE_EXPIRING
    return STATE_ACTIVE


def check_tags(kind, tags, current=()):
    """The tag rules of the reserved namespace, for tags added by the tag
    opcodes (and OP_INSTANCE_CREATE's ``tags``): an instance's lease is
    set with ``--lease-until`` only; the cluster takes one
    ``lease:warning:<seconds>``; other objects no ``lease:`` tag."""
    for name in tags:
        if not isinstance(name, str) or not name.startswith(NAMESPACE):
            continue
        if kind == constants.TAG_CLUSTER and \
                name.startswith(WARNING_TAG_PREFIX):
            if _int_suffix(name, WARNING_TAG_PREFIX) is None:
                raise errors.OpPrereqError(
                    "tags: '%s': the lease warning window must be whole"
                    " seconds (%s<seconds>)" % (name, WARNING_TAG_PREFIX),
                    errors.ECODE_INVAL)
            others = [t for t in list(current) + list(tags)
                      if t.startswith(WARNING_TAG_PREFIX) and t != name]
            if others:
                raise errors.OpPrereqError(
                    "tags: '%s': the cluster would have more than one lease"
                    " warning window (%s); remove the old one first"
                    % (name, ", ".join(sorted(set(others)))),
                    errors.ECODE_INVAL)
            continue
        if kind == constants.TAG_INSTANCE and name.startswith(TAG_PREFIX):
            raise errors.OpPrereqError(
                "tags: '%s': the lease of a forthcoming instance is set with"
                " gnt-instance add/modify --lease-until (lease_until), not"
                " as a tag" % name, errors.ECODE_INVAL)
        raise errors.OpPrereqError(
            "tags: '%s': the tag namespace '%s' is reserved for leases"
            % (name, NAMESPACE), errors.ECODE_INVAL)


def removal_op(inst, now):
    """The opcode (as a dict) releasing the expired reservation ``inst``."""
    return {"OP_ID": "OP_INSTANCE_REMOVE",
            "instance_name": inst.name or inst.uuid,
            "instance_uuid": inst.uuid,
            "expired_lease": True,
            "reason": [[REASON_SOURCE, "%s (%s, lease until %s)"
                        % (REASON_TEXT, inst.display_name,
                           format_time(lease_of(inst))),
                        int(now * 1e9)]]}


def pending_removals(rows):
    """{instance uuid: job id} of the unfinished lease removals among the
    job queue's ``rows`` (``id``, ``status``, ``ops``)."""
    found = {}
    for job_id, status, ops in rows:
        if status in ("success", "error", "canceled"):
            continue
        for op in ops or ():
            if op.get("OP_ID") == "OP_INSTANCE_REMOVE" and \
                    op.get("expired_lease") and op.get("instance_uuid"):
                found[op["instance_uuid"]] = job_id
    return found


class LeaseKeeper(object):
    """Releases expired reservations, in the master.

    Armed with ``clock.callLater`` for the next event (a lease entering
    its warning window, a lease ending), re-armed whenever the
    configuration changes (a lease added, moved or dropped; an instance
    committed or removed).  At start, leases that ended while no master
    ran are released at once.  ``submit(ops)`` submits a job (a Deferred
    of its id); each ended lease is submitted once (a failed submission is
    tried again after :attr:`RETRY` seconds).
    """

    #: seconds before a failed submission is tried again
    RETRY = 60.0

    def __init__(self, cfg, submit, clock, state_changed=None,
                 event_bus=None):
        self.cfg = cfg
        #: the master's event bus (:class:`ganeti.events.EventBus`) or None
        self.events = event_bus
        self.submit = submit
        self.clock = clock
        #: called when a lease entered its warning window or ended (the
        #: ``lease_state`` query field changed without a configuration
        #: change): the master's query cache forgets its answers
        self.state_changed = state_changed
        self._call = None
        self._pending_rearm = None
        #: instance uuid -> lease end whose removal was submitted (or is
        #: being submitted)
        self.released = {}
        #: instance uuid -> job id of the removal
        self.jobs = {}
        #: instance uuid -> lease end a warning was logged for
        self.warned = {}
        #: instance uuid -> when a failed submission may be tried again
        self._retry_at = {}
        self.running = False

    def start(self, pending=None):
        """Start watching the leases.  ``pending`` ({instance uuid: job
        id}): removal jobs for ended leases still in the queue (a master
        restarted before they ran): not submitted again."""
        self.running = True
        for uuid, job_id in (pending or {}).items():
            inst = self.cfg.instances.get(uuid)
            until = lease_of(inst) if inst is not None else None
            if until is not None:
                self.released[uuid] = until
                self.jobs[uuid] = job_id
        self.cfg.write_listeners.append(self.config_changed)
        self.check()

    def stop(self):
        self.running = False
        if self.config_changed in self.cfg.write_listeners:
            self.cfg.write_listeners.remove(self.config_changed)
        for call in (self._call, self._pending_rearm):
            if call is not None and call.active():
                call.cancel()
        self._call = self._pending_rearm = None

    def config_changed(self, _store=None):
        """A configuration write: look again (once per turn of the
        reactor, however many writes it had)."""
        if not self.running:
            return
        if self._pending_rearm is None or not self._pending_rearm.active():
            self._pending_rearm = self.clock.callLater(0, self.check)

    def check(self):
        """Release what has ended, warn about what ends soon, and arm the
        timer for the next of these events."""
        if not self.running:
            return
        now = self.clock.seconds()
        window = warning_window(self.cfg.cluster)
        wake = []
        leases = {}
        changed = False
        for inst in list(self.cfg.instances.values()):
            until = lease_of(inst)
            if until is None:
                continue
            leases[inst.uuid] = until
            if now >= until:
                retry = self._retry_at.get(inst.uuid)
                if retry is not None and now < retry:
                    wake.append(retry)
                elif self.released.get(inst.uuid) != until:
                    changed = True
                    self._release(inst, now)
                    if inst.uuid in self._retry_at:   # refused at once
                        wake.append(self._retry_at[inst.uuid])
                continue
            wake.append(until)
            if now >= until - window:
                if self.warned.get(inst.uuid) != until:
                    changed = True
                    self.warned[inst.uuid] = until
                    log.warn("The lease of forthcoming instance {name} ends"
                             " at {until} (in {left} s); it is then removed"
                             " and its resources released",
                             name=inst.display_name,
                             until=format_time(until), left=int(until - now))
                    self._publish(events.TYPE_EXPIRING, inst, until)
            else:
                wake.append(until - window)
        # forget instances gone or whose lease changed
        for table in (self.released, self.warned, self.jobs,
                      self._retry_at):
            for uuid in list(table):
                if uuid not in leases:
                    del table[uuid]
        self._arm(min(wake) - now if wake else None)
        if changed and self.state_changed is not None:
            self.state_changed()

    def _arm(self, delay):
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        if delay is not None:
            self._call = self.clock.callLater(max(delay, 0), self.check)

    @property
    def next_check(self):
        """When the timer fires next (None: nothing to wait for)."""
        if self._call is None or not self._call.active():
            return None
        return self._call.getTime()

    def _release(self, inst, now):
        uuid = inst.uuid
        until = lease_of(inst)
        self.released[uuid] = until
        self._retry_at.pop(uuid, None)
        op = removal_op(inst, now)
        log.info("The lease of forthcoming instance {name} ended at"
                 " {until}: submitting its removal",
                 name=inst.display_name, until=format_time(until))
        try:
            d = self.submit([op])
        except Exception as err:   # a synchronous refusal
            self._failed(uuid, until, err)
            return

        def submitted(job_id):
            self.jobs[uuid] = job_id
            self._publish(events.TYPE_EXPIRED, inst, until, job=job_id)
            log.info("Job {job} removes forthcoming instance {name} (lease"
                     " expired)", job=job_id, name=inst.display_name)
            return job_id

        def failed(failure):
            self._failed(uuid, until, failure.value)
        d.addCallbacks(submitted, failed)

    def _publish(self, type, inst, until, **data):
        if self.events is None:
            return
        data.update({"instance": inst.display_name, "instance_uuid":
                     inst.uuid, "until": until,
                     "until_text": format_time(until)})
        self.events.publish(events.KIND_LEASE, type,
                            name=inst.display_name, id=inst.uuid, data=data)

    def _failed(self, uuid, until, err):
        log.error("Could not submit the removal of forthcoming instance"
                  " {uuid} (lease expired): {err}; trying again in {retry}"
                  " s", uuid=uuid, err=err, retry=self.RETRY)
        if self.released.get(uuid) == until:
            del self.released[uuid]
        self._retry_at[uuid] = self.clock.seconds() + self.RETRY
        if self.running:
            self._arm_at(self._retry_at[uuid])

    def _arm_at(self, when):
        current = self.next_check
        if current is None or when < current:
            self._arm(when - self.clock.seconds())
