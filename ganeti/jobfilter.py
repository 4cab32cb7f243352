"""Job filter rules: their checked form and which rule decides a job.

A rule (config.data's ``filters``, keyed by UUID) has a ``watermark`` (the
highest job id when it was added or replaced: it applies only to later
jobs), a ``priority`` (lower first; then the watermark, then the UUID),
``predicates`` (all must match) and an ``action``:

* ``ACCEPT``: the job may run; no later rule is looked at;
* ``PAUSE``: the job stays queued until the rules change;
* ``REJECT``: the job is canceled when its turn comes;
* ``CONTINUE``: the next rule decides;
* ``["RATE_LIMIT", n]``: the job runs only while fewer than ``n`` running
  jobs match the rule, else it waits.

A predicate is ``[name, query filter]``: ``jobid`` (field ``id``; the
string ``"watermark"`` in a value stands for the rule's watermark),
``opcode`` (fields ``OP_ID`` and the opcode's parameters; true if one of
the job's opcodes matches) or ``reason`` (fields ``source``, ``reason``,
``timestamp`` of the reason trail entries; true if one entry matches).
See docs/filters.rst.
"""

import attr

from ganeti import errors
from ganeti import qlang

ACCEPT = "ACCEPT"
PAUSE = "PAUSE"
REJECT = "REJECT"
CONTINUE = "CONTINUE"
RATE_LIMIT = "RATE_LIMIT"

SIMPLE_ACTIONS = (ACCEPT, PAUSE, REJECT, CONTINUE)

#: the fields of a filter rule, in the order of Ganeti's list command
FIELDS = ("uuid", "watermark", "priority", "predicates", "action",
          "reason_trail")

PRED_JOBID = "jobid"
PRED_OPCODE = "opcode"
PRED_REASON = "reason"
PREDICATES = (PRED_JOBID, PRED_OPCODE, PRED_REASON)


@attr.s(frozen=True)
class _Field(object):
    """What the query filter compiler needs of a field."""
    name = attr.ib()
    kind = attr.ib()
    flags = attr.ib(default=frozenset())


_JOBID_FIELDS = {"id": _Field("id", qlang.QFT_NUMBER)}
_REASON_FIELDS = {
    "source": _Field("source", qlang.QFT_TEXT),
    "reason": _Field("reason", qlang.QFT_TEXT),
    "timestamp": _Field("timestamp", qlang.QFT_NUMBER),
}


def _opcode_field(name):
    # any parameter name may be asked for; an opcode without it does not
    # match
    return _Field(name, qlang.QFT_OTHER)


def _invalid(message):
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


def _is_count(value, minimum):
    return isinstance(value, int) and not isinstance(value, bool) and \
        value >= minimum


def _replace_watermark(part, watermark):
    """``part`` with every value ``"watermark"`` (not an operator or a
    field name) replaced by the rule's watermark."""
    if not isinstance(part, list) or not part:
        return part
    op = part[0]
    if op in qlang.LOGIC_OPS or op == qlang.OP_NOT:
        return [op] + [_replace_watermark(p, watermark) for p in part[1:]]
    if op in qlang.BINARY_OPS and len(part) == 3 and \
            part[2] == "watermark":
        return [op, part[1], watermark]
    return part


def _compile_predicate(index, predicate, watermark):
    where = "predicates[%d]" % index
    if not isinstance(predicate, list) or not predicate:
        raise _invalid("%s: expected [name, filter], got %r"
                       % (where, predicate))
    name = predicate[0]
    if name not in PREDICATES:
        raise _invalid("%s: unknown predicate %r (known: %s)"
                       % (where, name, ", ".join(PREDICATES)))
    if len(predicate) != 2:
        raise _invalid("%s: predicate %r takes one query filter, got %d"
                       " argument(s)" % (where, name, len(predicate) - 1))
    qfilter = predicate[1]
    if name == PRED_JOBID:
        qfilter = _replace_watermark(qfilter, watermark)
        lookup = _JOBID_FIELDS.get
    elif name == PRED_REASON:
        lookup = _REASON_FIELDS.get
    else:
        lookup = _opcode_field
    try:
        compiled = qlang.compile_filter(qfilter, lookup)
    except errors.QueryFilterParseError as err:
        raise _invalid("%s (%s): %s" % (where, name, err.args[0]))
    if compiled is None:
        raise _invalid("%s (%s): expected a query filter, got null"
                       % (where, name))
    return name, compiled


def check_action(action):
    """The action, or OpPrereqError naming the field."""
    if isinstance(action, str) and action in SIMPLE_ACTIONS:
        return action
    if isinstance(action, (list, tuple)) and len(action) == 2 and \
            action[0] == RATE_LIMIT:
        if not _is_count(action[1], 1):
            raise _invalid("action: RATE_LIMIT needs a positive number of"
                           " jobs, got %r" % (action[1],))
        return [RATE_LIMIT, action[1]]
    raise _invalid("action: expected one of %s or [\"RATE_LIMIT\", n], got"
                   " %r" % (", ".join(SIMPLE_ACTIONS), action))


def check_reason(reason):
    if not isinstance(reason, (list, tuple)):
        raise _invalid("reason: expected a list of [source, reason,"
                       " timestamp], got %r" % (reason,))
    trail = []
    for index, entry in enumerate(reason):
        if not isinstance(entry, (list, tuple)) or len(entry) != 3 or \
                not isinstance(entry[0], str) or \
                not isinstance(entry[1], str) or \
                not _is_count(entry[2], 0):
            raise _invalid("reason[%d]: expected [source, reason,"
                           " timestamp in nanoseconds], got %r"
                           % (index, entry))
        trail.append(list(entry))
    return trail


def make_rule(uuid, watermark, priority, predicates, action, reason):
    """The config.data form of a rule, every argument checked: an
    OpPrereqError names the field at fault."""
    if not isinstance(uuid, str) or not uuid:
        raise _invalid("uuid: expected a non-empty string, got %r" % (uuid,))
    if priority is None:
        priority = 0
    if not _is_count(priority, 0):
        raise _invalid("priority: expected a non-negative integer, got %r"
                       % (priority,))
    if not isinstance(predicates, (list, tuple)):
        raise _invalid("predicates: expected a list, got %r"
                       % (predicates,))
    predicates = [list(p) if isinstance(p, tuple) else p
                  for p in predicates]
    for index, predicate in enumerate(predicates):
        _compile_predicate(index, predicate, watermark)
    return {
        "uuid": uuid,
        "watermark": watermark,
        "priority": priority,
        "predicates": predicates,
        "action": check_action(action),
        "reason_trail": check_reason(reason),
    }


class Rule(object):
    """A rule of config.data, its predicates compiled."""

    def __init__(self, data):
        self.uuid = data["uuid"]
        self.watermark = data["watermark"]
        self.priority = data["priority"]
        self.action = data["action"]
        self.predicates = [
            _compile_predicate(i, p, self.watermark)
            for i, p in enumerate(data["predicates"])]

    @property
    def order(self):
        return (self.priority, self.watermark, self.uuid)

    @property
    def rate_limit(self):
        """The number of jobs of a RATE_LIMIT rule, else None."""
        if isinstance(self.action, list):
            return self.action[1]
        return None

    def matches(self, job_id, ops):
        """Whether the job (its id, its OpCode objects) is one this rule
        applies to."""
        if job_id <= self.watermark:
            return False
        return all(_PREDICATE_TESTS[name](compiled, job_id, ops)
                   for name, compiled in self.predicates)


def _true(result):
    return result is True


def _test_jobid(compiled, job_id, _ops):
    return _true(compiled(lambda field: job_id))


def _test_opcode(compiled, _job_id, ops):
    for op in ops:
        data = op.to_dict()

        def fetch(field, data=data):
            return data.get(field.name, qlang.NO_VALUE)
        if _true(compiled(fetch)):
            return True
    return False


def _test_reason(compiled, _job_id, ops):
    for op in ops:
        for entry in op.reason or ():
            if len(entry) != 3:
                continue
            values = dict(zip(("source", "reason", "timestamp"), entry))
            if _true(compiled(lambda field: values[field.name])):
                return True
    return False


_PREDICATE_TESTS = {
    PRED_JOBID: _test_jobid,
    PRED_OPCODE: _test_opcode,
    PRED_REASON: _test_reason,
}


def compile_rules(filters):
    """config.data's ``filters`` as Rules, in the order they apply.  A
    rule that no longer compiles (edited by hand) is left out and named
    in the returned problems."""
    rules, problems = [], []
    for uuid, data in sorted(filters.items()):
        try:
            rules.append(Rule(data))
        except (errors.OpPrereqError, KeyError, TypeError) as err:
            problems.append("filter %s: %s" % (uuid, err))
    rules.sort(key=lambda r: r.order)
    return rules, problems


@attr.s(frozen=True)
class Verdict(object):
    """What the rules say of a job: ``action`` (ACCEPT when no rule
    decides, PAUSE for a rate limit reached) and the deciding rule."""
    action = attr.ib()
    rule = attr.ib(default=None)


RUN = Verdict(ACCEPT)


def decide(rules, job_id, ops, running):
    """The verdict of ``rules`` (in order) on a queued job; ``running(rule)``
    counts the running jobs a RATE_LIMIT rule matches."""
    for rule in rules:
        if rule.action == CONTINUE or not rule.matches(job_id, ops):
            continue
        limit = rule.rate_limit
        if limit is not None:
            if running(rule) < limit:
                return Verdict(ACCEPT, rule)
            return Verdict(RATE_LIMIT, rule)
        return Verdict(rule.action, rule)
    return RUN
