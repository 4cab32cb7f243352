"""Jobs and opcodes as the queue keeps them: state, status rules, file form.

A job is a list of opcodes run in order.  Each opcode carries its own status,
result, log and timestamps; the job's status is *derived* from its opcodes
(never stored), so the file on disk cannot disagree with itself.  The JSON
layout of a job file uses the same keys as Ganeti's queue files.

Opcodes are kept as :class:`ganeti.opcodes.OpCode` objects; they become
JSON only in the file form (``to_dict``) and in query answers, and are
loaded from it once, when a job file is read (``from_dict``).  The file
form never holds a secret value (secret OS parameters are written as
``"<redacted>"``: the running job keeps them in memory only), and no
answer holds a private one (see docs/security.rst).
"""

import copy

import attr

from ganeti import errors
from ganeti import opcodes

# Job and opcode statuses (the same names for both, as in Ganeti)
STATUS_QUEUED = "queued"
STATUS_WAITING = "waiting"
STATUS_CANCELING = "canceling"
STATUS_RUNNING = "running"
STATUS_CANCELED = "canceled"
STATUS_SUCCESS = "success"
STATUS_ERROR = "error"

STATUS_ALL = frozenset([STATUS_QUEUED, STATUS_WAITING, STATUS_CANCELING,
                        STATUS_RUNNING, STATUS_CANCELED, STATUS_SUCCESS,
                        STATUS_ERROR])
PENDING = frozenset([STATUS_QUEUED, STATUS_WAITING, STATUS_CANCELING])
FINALIZED = frozenset([STATUS_CANCELED, STATUS_SUCCESS, STATUS_ERROR])

# Priorities: a lower value runs first
PRIO_HIGHEST = -20
PRIO_HIGH = -10
PRIO_NORMAL = 0
PRIO_LOW = 10
PRIO_LOWEST = 19
PRIO_DEFAULT = PRIO_NORMAL

# Log entry types
ELOG_MESSAGE = "message"
ELOG_MESSAGE_LIST = "message-list"
ELOG_REMOTE_IMPORT = "remote-import"
ELOG_JQUEUE_TEST = "jqueue-test"
ELOG_DELAY_TEST = "delay-test"

#: Reason trail source the queue adds to each opcode at submit time
REASON_SRC_OPCODE = "gnt:opcode"


# Where an opcode's status may go from (docs/jobs.rst, "Statuses").
_OP_MOVES = {
    # picked up; canceled before it started; canceling with the rest of
    # its job; failed with an earlier opcode or after an unclean stop
    STATUS_QUEUED: frozenset([STATUS_WAITING, STATUS_CANCELING,
                              STATUS_CANCELED, STATUS_ERROR]),
    # queued again at load; locks held; canceled waiting for locks or
    # dependencies; an executor may end it without reporting "running";
    # a failed dependency
    STATUS_WAITING: frozenset([STATUS_QUEUED, STATUS_RUNNING,
                               STATUS_CANCELING, STATUS_CANCELED,
                               STATUS_SUCCESS, STATUS_ERROR]),
    # back to waiting for locks (a retry); killed; the outcome
    STATUS_RUNNING: frozenset([STATUS_WAITING, STATUS_CANCELING,
                               STATUS_SUCCESS, STATUS_ERROR]),
    # the cancel arrived; an executor may finish despite it; an unclean
    # stop at load
    STATUS_CANCELING: frozenset([STATUS_CANCELED, STATUS_SUCCESS,
                                 STATUS_ERROR]),
}


def check_op_move(old, new):
    """Refuse (ProgrammerError) a move of an opcode's status from ``old``
    to ``new`` that the queue never makes; final statuses are final."""
    if new not in _OP_MOVES.get(old, ()):
        raise errors.ProgrammerError("Opcode status cannot change from %s"
                                     " to %s" % (old, new))


def split_time(value):
    """Seconds as a float -> ``[sec, usec]`` (the wire form of timestamps)."""
    sec = int(value)
    usec = int(round((value - sec) * 1000000))
    if usec >= 1000000:  # rounding can carry into the next second
        sec, usec = sec + 1, usec - 1000000
    return [sec, usec]


def merge_time(ts):
    """``[sec, usec]`` -> seconds as a float."""
    return ts[0] + ts[1] / 1000000.0


def encode_error(err):
    """An exception as an opcode result: ``[ClassName, [args]]``.

    Anything that is not one of our errors becomes an OpExecError so that
    clients can always rebuild the exception by name.
    """
    if not isinstance(err, errors.GenericError):
        err = errors.OpExecError(str(err) or err.__class__.__name__)
    name, args = errors.encode_exception(err)
    return [name, list(args)]


class UnreadableOpCode(object):
    """An opcode of a job file that this master cannot load (an unknown
    OP_ID or parameter, e.g. written by another version).

    It is kept exactly as read, so queries show it and the file keeps it;
    it never runs (see ``JobQueue.load``).
    """

    def __init__(self, data, problem):
        self.data = data
        self.problem = problem

    @property
    def OP_ID(self):
        op_id = self.data.get("OP_ID")
        return op_id if isinstance(op_id, str) else "?"

    def to_dict(self, redact_private=False, redact_secret=False):
        if redact_private or redact_secret:
            # the types are unknown: the parameters are known by name
            return opcodes.redact_data(self.data,
                                       secret_only=not redact_private)
        return copy.deepcopy(self.data)

    def summary(self):
        return self.OP_ID[3:] if self.OP_ID.startswith("OP_") else self.OP_ID


def load_opcode(data):
    """The opcode of a job file entry: an OpCode, or an UnreadableOpCode
    saying why not."""
    try:
        return opcodes.OpCode.from_dict(data)
    except errors.GenericError as err:
        return UnreadableOpCode(data, str(err.args[0] if err.args else err))


@attr.s(eq=False)
class QueuedOpCode(object):
    """One opcode of a job and what happened to it so far."""
    input = attr.ib()                       # opcodes.OpCode
    priority = attr.ib(default=PRIO_DEFAULT)
    status = attr.ib(default=STATUS_QUEUED)
    result = attr.ib(default=None)
    log = attr.ib(factory=list)             # [serial, [sec, usec], type, msg]
    start_timestamp = attr.ib(default=None)  # picked up (before locks)
    exec_timestamp = attr.ib(default=None)   # locks held, really running
    end_timestamp = attr.ib(default=None)
    # the opcode's JSON form, made once: the queue changes an opcode only
    # before its job exists (reason trail, dependencies), and the executor
    # works on a copy; a job file is written several times
    _input_dict = attr.ib(default=None, init=False, repr=False, eq=False)

    @property
    def finalized(self):
        return self.status in FINALIZED

    def input_dict(self):
        """The opcode's file form, secret values hidden (shared: copy it
        before changing it)."""
        if self._input_dict is None:
            self._input_dict = self.input.to_dict(redact_secret=True)
        return self._input_dict

    def forget_secrets(self):
        """Drop the secret values this opcode holds in memory (it will
        not run again): its input becomes what its file holds."""
        if self.readable and self.input.secret_values():
            self.input = opcodes.OpCode.from_dict(self.input_dict())

    def holds_secrets(self):
        """Whether the input holds secret values themselves (not only
        their placeholders, as read from a job file)."""
        if not self.readable:
            return self.input.to_dict() != self.input_dict()
        return any(value != opcodes.REDACTED
                   for values in self.input.secret_values().values()
                   for value in values)

    def move_to(self, status):
        """Change the status; only the moves check_op_move allows."""
        check_op_move(self.status, status)
        self.status = status

    @property
    def readable(self):
        return not isinstance(self.input, UnreadableOpCode)

    def to_dict(self):
        return {
            "input": self.input_dict(),
            "status": self.status,
            "result": self.result,
            "log": self.log,
            "start_timestamp": self.start_timestamp,
            "exec_timestamp": self.exec_timestamp,
            "end_timestamp": self.end_timestamp,
            "priority": self.priority,
        }

    @classmethod
    def from_dict(cls, data):
        if not isinstance(data, dict) or not isinstance(data.get("input"),
                                                        dict):
            raise ValueError("opcode entry is not an object with an input")
        status = data.get("status")
        if status not in STATUS_ALL:
            raise ValueError("unknown opcode status %r" % (status,))
        log = data.get("log") or []
        if not all(isinstance(e, list) and len(e) == 4 for e in log):
            raise ValueError("malformed log entries")
        return cls(input=load_opcode(data["input"]),
                   priority=data.get("priority", PRIO_DEFAULT),
                   status=status, result=data.get("result"), log=log,
                   start_timestamp=data.get("start_timestamp"),
                   exec_timestamp=data.get("exec_timestamp"),
                   end_timestamp=data.get("end_timestamp"))


@attr.s(eq=False)
class QueuedJob(object):
    """A job: its opcodes and timestamps.  Status and priority are derived.

    Executors receive this object; they may read ``id``, ``priority`` and
    ``ops`` but must not change it (the queue owns every field).
    """
    id = attr.ib()
    ops = attr.ib()                          # list of QueuedOpCode
    received_timestamp = attr.ib(default=None)
    start_timestamp = attr.ib(default=None)
    end_timestamp = attr.ib(default=None)
    archived = attr.ib(default=False)        # read from archive/, read-only
    log_serial = attr.ib(default=0)          # highest log serial used

    @property
    def status(self):
        """The job status as Ganeti derives it from its opcodes.

        The first failed, canceled or canceling opcode decides; otherwise
        the last waiting or running one; all successful means success.
        """
        status = STATUS_QUEUED
        all_success = True
        for op in self.ops:
            if op.status == STATUS_SUCCESS:
                continue
            all_success = False
            if op.status in (STATUS_ERROR, STATUS_CANCELED,
                             STATUS_CANCELING):
                return op.status
            if op.status in (STATUS_WAITING, STATUS_RUNNING):
                status = op.status
        return STATUS_SUCCESS if all_success else status

    @property
    def finalized(self):
        return self.status in FINALIZED

    @property
    def priority(self):
        """The most urgent priority among opcodes not yet finished."""
        prios = [op.priority for op in self.ops if not op.finalized]
        return min(prios) if prios else PRIO_DEFAULT

    def current_op_index(self):
        """Index of the first opcode not finalized, or None."""
        for index, op in enumerate(self.ops):
            if not op.finalized:
                return index
        return None

    def mark_unfinished(self, status, result):
        """Give every opcode not yet finalized ``status`` and ``result``."""
        for op in self.ops:
            if not op.finalized:
                op.move_to(status)
                op.result = result

    def add_log(self, op, timestamp, log_type, message):
        self.log_serial += 1
        entry = [self.log_serial, timestamp, log_type, message]
        op.log.append(entry)
        return entry

    def log_entries(self, newer_than):
        """Log entries of all opcodes with a serial above ``newer_than``."""
        floor = -1 if newer_than is None else newer_than
        return [entry for op in self.ops for entry in op.log
                if entry[0] > floor]

    def to_dict(self):
        return {
            "id": self.id,
            "ops": [op.to_dict() for op in self.ops],
            "received_timestamp": self.received_timestamp,
            "start_timestamp": self.start_timestamp,
            "end_timestamp": self.end_timestamp,
        }

    @classmethod
    def from_dict(cls, data, archived=False):
        """Rebuild a job from its file form; raises JobFileCorrupted."""
        try:
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            job_id = data["id"]
            if isinstance(job_id, str):
                job_id = int(job_id)
            if not isinstance(job_id, int) or isinstance(job_id, bool):
                raise ValueError("bad job id %r" % (job_id,))
            if not isinstance(data.get("ops"), list) or not data["ops"]:
                raise ValueError("no opcodes")
            ops = [QueuedOpCode.from_dict(op) for op in data["ops"]]
            serial = max([e[0] for op in ops for e in op.log] or [0])
            return cls(id=job_id, ops=ops,
                       received_timestamp=data.get("received_timestamp"),
                       start_timestamp=data.get("start_timestamp"),
                       end_timestamp=data.get("end_timestamp"),
                       archived=archived, log_serial=serial)
        except (KeyError, ValueError, TypeError) as err:
            raise errors.JobFileCorrupted("Job data is invalid: %s" % err)


# Query fields (Ganeti's).  Each takes the job and returns a JSON value;
# per-opcode fields return one value per opcode.
def _per_op(getter):
    return lambda job: [getter(op) for op in job.ops]


JOB_FIELDS = {
    "id": lambda job: job.id,
    "status": lambda job: job.status,
    "priority": lambda job: job.priority,
    "archived": lambda job: job.archived,
    # private and secret values are never shown, to anybody
    "ops": _per_op(lambda op: op.input.to_dict(redact_private=True)),
    "opresult": _per_op(lambda op: op.result),
    "opstatus": _per_op(lambda op: op.status),
    "oplog": _per_op(lambda op: op.log),
    "opstart": _per_op(lambda op: op.start_timestamp),
    "opexec": _per_op(lambda op: op.exec_timestamp),
    "opend": _per_op(lambda op: op.end_timestamp),
    "oppriority": _per_op(lambda op: op.priority),
    "summary": _per_op(lambda op: op.input.summary()),
    "received_ts": lambda job: job.received_timestamp,
    "start_ts": lambda job: job.start_timestamp,
    "end_ts": lambda job: job.end_timestamp,
}


def check_fields(fields):
    """Raise OpPrereqError naming any unknown job field."""
    if not isinstance(fields, (list, tuple)):
        raise errors.OpPrereqError("Fields must be a list, not %r"
                                   % (fields,), errors.ECODE_INVAL)
    unknown = [f for f in fields if f not in JOB_FIELDS]
    if unknown:
        raise errors.OpPrereqError("Unknown job field(s): %s"
                                   % ", ".join(map(str, unknown)),
                                   errors.ECODE_INVAL)


# Fields whose values are made anew for each query (the opcodes' JSON form)
_FRESH_FIELDS = frozenset(["ops"])


def job_row(job, fields):
    """Values of ``fields`` for ``job``, copied so callers can't alias ours."""
    return [JOB_FIELDS[f](job) if f in _FRESH_FIELDS
            else copy.deepcopy(JOB_FIELDS[f](job)) for f in fields]
