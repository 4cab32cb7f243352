"""The auto-repair tags: what they say, and which of them applies.

Auto-repair keeps its policy and its state in tags, so that an admin (or
an external tool) can read and steer it with ``gnt-* add-tags``:

* ``ganeti:watcher:autorepair:<type>`` on an instance, its node group or
  the cluster allows repairs up to ``<type>``; the types, from the least
  to the most destructive, are fix-storage, migrate, failover and
  reinstall, and each allows what the ones before it allow.  Several on
  one object: the least destructive counts; on several objects: the
  nearest (instance, then group, then cluster).
* ``ganeti:watcher:autorepair:suspend`` (also with a trailing colon)
  suspends repairs for good, ``...:suspend:<unix time>`` until then.
  The permanent form beats timed ones on one object, the latest timed
  one counts, and a suspension that has passed counts for nothing (the
  watcher removes it).  Across objects the nearest tag (suspend or
  allow) wins, so an instance's allow tag re-enables repairs that its
  cluster suspends.
* ``ganeti:watcher:autorepair:pending:<type>:<id>:<time>:<jobs>`` on an
  instance: a repair of that type is under way (``jobs`` are job ids
  joined by ``+``, empty before the first one).
* ``ganeti:watcher:autorepair:result:<type>:<id>:<time>:<result>:<jobs>``
  on an instance: how a repair ended, ``success``, ``failure`` or
  ``enoperm`` (it needed more than its type allows).

Anything else after the prefix is malformed: it is reported and never
acted on.
"""

import re

import attrs

PREFIX = "ganeti:watcher:autorepair:"

FIX_STORAGE = "fix-storage"
MIGRATE = "migrate"
FAILOVER = "failover"
REINSTALL = "reinstall"
#: the repair types, least destructive first
TYPES = (FIX_STORAGE, MIGRATE, FAILOVER, REINSTALL)
_RANK = {t: n for n, t in enumerate(TYPES)}

SUCCESS = "success"
FAILURE = "failure"
ENOPERM = "enoperm"
RESULTS = (SUCCESS, FAILURE, ENOPERM)

SUSPEND = "suspend"
PENDING = "pending"
RESULT = "result"

_TIME = re.compile(r"^\d+(\.\d+)?$")
_JOB = re.compile(r"^\d+$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def rank(kind):
    """Position of a repair type (higher: more destructive)."""
    return _RANK[kind]


def allows(granted, needed):
    """Whether a repair of type ``granted`` may do what ``needed`` does."""
    return _RANK[granted] >= _RANK[needed]


@attrs.frozen
class Allow:
    kind: str

    @property
    def tag(self):
        return PREFIX + self.kind


@attrs.frozen
class Suspend:
    #: None: until the tag is removed
    until: float = None
    tag: str = None


@attrs.frozen
class Pending:
    kind: str
    id: str
    timestamp: float
    jobs: tuple = ()

    @property
    def tag(self):
        return "%s%s:%s:%s:%s:%s" % (PREFIX, PENDING, self.kind, self.id,
                                     _fmt_time(self.timestamp),
                                     "+".join(str(j) for j in self.jobs))

    def with_jobs(self, more):
        return attrs.evolve(self, jobs=tuple(self.jobs) + tuple(more))


@attrs.frozen
class Result:
    kind: str
    id: str
    timestamp: float
    result: str
    jobs: tuple = ()

    @property
    def tag(self):
        return "%s%s:%s:%s:%s:%s:%s" % (
            PREFIX, RESULT, self.kind, self.id, _fmt_time(self.timestamp),
            self.result, "+".join(str(j) for j in self.jobs))


@attrs.frozen
class Malformed:
    tag: str
    reason: str


def _fmt_time(ts):
    return "%d" % ts if float(ts).is_integer() else repr(float(ts))


def _time(text, what):
    if not _TIME.match(text):
        raise ValueError("%s %r is not a unix time" % (what, text))
    return float(text)


def _jobs(text):
    if not text:
        return ()
    parts = text.split("+")
    for p in parts:
        if not _JOB.match(p):
            raise ValueError("job list %r: %r is not a job id" % (text, p))
    return tuple(int(p) for p in parts)


def _kind(text):
    if text not in _RANK:
        raise ValueError("unknown repair type %r (expected one of %s)"
                         % (text, ", ".join(TYPES)))
    return text


def _repair_id(text):
    if not _ID.match(text):
        raise ValueError("repair id %r is not a plain identifier" % text)
    return text


def parse(tag):
    """What ``tag`` says: an Allow, Suspend, Pending, Result or Malformed
    (with the reason); None when it is not an auto-repair tag."""
    if not tag.startswith(PREFIX):
        return None
    rest = tag[len(PREFIX):]
    fields = rest.split(":")
    head = fields[0]
    try:
        if head in _RANK:
            if len(fields) != 1:
                raise ValueError("a permission tag has nothing after its"
                                 " type")
            return Allow(head)
        if head == SUSPEND:
            if len(fields) == 1 or (len(fields) == 2 and fields[1] == ""):
                return Suspend(None, tag)
            if len(fields) != 2:
                raise ValueError("expected suspend or suspend:<unix time>")
            return Suspend(_time(fields[1], "suspension end"), tag)
        if head == PENDING:
            if len(fields) != 5:
                raise ValueError("expected pending:<type>:<id>:<time>:<jobs>")
            return Pending(_kind(fields[1]), _repair_id(fields[2]),
                           _time(fields[3], "start"), _jobs(fields[4]))
        if head == RESULT:
            if len(fields) != 6:
                raise ValueError("expected result:<type>:<id>:<time>:"
                                 "<result>:<jobs>")
            if fields[4] not in RESULTS:
                raise ValueError("unknown result %r (expected one of %s)"
                                 % (fields[4], ", ".join(RESULTS)))
            return Result(_kind(fields[1]), _repair_id(fields[2]),
                          _time(fields[3], "end"), fields[4],
                          _jobs(fields[5]))
        raise ValueError("unknown auto-repair tag %r" % head)
    except ValueError as err:
        return Malformed(tag, str(err))


@attrs.frozen
class Policy:
    """What the tags allow for one instance."""
    #: "enabled", "suspended" or "not-enabled"
    state: str
    #: the allowed repair type (enabled)
    kind: str = None
    #: end of a timed suspension (suspended; None: until removed)
    until: float = None
    #: where the deciding tag is: "instance", "group" or "cluster"
    source: str = None


ENABLED = "enabled"
SUSPENDED = "suspended"
NOT_ENABLED = "not-enabled"

LEVELS = ("instance", "group", "cluster")


def policy(levels, now):
    """The policy from the tags of an instance, its group and the cluster
    (``levels``: three tag lists, nearest first) at time ``now``; and the
    timed suspend tags that have passed, as (level, tag) to remove."""
    expired = []
    found = None
    for level, tags in zip(LEVELS, levels):
        permanent = False
        until = None
        kinds = []
        for tag in tags:
            what = parse(tag)
            if isinstance(what, Suspend):
                if what.until is None:
                    permanent = True
                elif what.until > now:
                    until = what.until if until is None \
                        else max(until, what.until)
                else:
                    expired.append((level, tag))
            elif isinstance(what, Allow):
                kinds.append(what.kind)
        if found is not None:
            continue  # only collecting expired suspensions further out
        if permanent:
            found = Policy(SUSPENDED, source=level)
        elif until is not None:
            found = Policy(SUSPENDED, until=until, source=level)
        elif kinds:
            found = Policy(ENABLED, min(kinds, key=rank), source=level)
    return found or Policy(NOT_ENABLED), expired


def instance_tags(tags):
    """The instance's pending and result tags (each list oldest first) and
    its malformed auto-repair tags."""
    pending = []
    results = []
    bad = []
    for tag in tags:
        what = parse(tag)
        if isinstance(what, Pending):
            pending.append(what)
        elif isinstance(what, Result):
            results.append(what)
        elif isinstance(what, Malformed):
            bad.append(what)
    pending.sort(key=lambda p: (p.timestamp, p.id))
    results.sort(key=lambda r: (r.timestamp, r.id))
    return pending, results, bad
