"""Job query rows, from the job queue's rows provider.

The context's ``jobs(job_ids, field_names)`` callable returns (or returns a
Deferred of) one dict per existing job with "id" and the named fields
(``job_ids`` None: every job; the queue includes archived jobs only when
"archived" is among the fields, as Ganeti does).  A job asked for by id
that does not exist gets a row with its id and RS_UNAVAIL elsewhere; so do
timestamps that are not set yet.
"""

from twisted.internet import defer

from ganeti import errors
from ganeti.query.base import (Field, FieldTable, Resource, QFT_TEXT,
                               QFT_BOOL, QFT_NUMBER, QFT_OTHER, FF_JOB_ID,
                               FF_SPLIT_TIMESTAMP, UNAVAIL)
from ganeti import qlang

# (name, title, kind, doc, flags)
_JOB_FIELDS = [
    ("id", "ID", QFT_NUMBER, "Job id", [FF_JOB_ID]),
    ("status", "Status", QFT_TEXT,
     "Job status: queued, waiting, canceling, running, canceled, success,"
     " error", []),
    ("priority", "Priority", QFT_NUMBER,
     "Job priority now (lower runs first, -20 to 19)", []),
    ("archived", "Archived", QFT_BOOL, "Whether the job is archived", []),
    ("ops", "OpCodes", QFT_OTHER, "The job's opcodes", []),
    ("opresult", "OpCode_result", QFT_OTHER, "Result of each opcode", []),
    ("opstatus", "OpCode_status", QFT_OTHER, "Status of each opcode", []),
    ("oplog", "OpCode_log", QFT_OTHER, "Log entries of each opcode", []),
    ("opstart", "OpCode_start", QFT_OTHER,
     "When each opcode started (before taking its locks)", []),
    ("opexec", "OpCode_exec", QFT_OTHER,
     "When each opcode started executing (locks held)", []),
    ("opend", "OpCode_end", QFT_OTHER, "When each opcode finished", []),
    ("oppriority", "OpCode_prio", QFT_OTHER, "Priority of each opcode", []),
    ("summary", "Summary", QFT_OTHER, "One-line summary of each opcode", []),
    ("received_ts", "Received", QFT_OTHER,
     "When the job was submitted, as [seconds, microseconds]",
     [FF_SPLIT_TIMESTAMP]),
    ("start_ts", "Start", QFT_OTHER,
     "When the job started, as [seconds, microseconds]",
     [FF_SPLIT_TIMESTAMP]),
    ("end_ts", "End", QFT_OTHER,
     "When the job ended, as [seconds, microseconds]",
     [FF_SPLIT_TIMESTAMP]),
]
_TIMESTAMPS = frozenset(["received_ts", "start_ts", "end_ts"])


def _getter(name):
    def get(_run, item):
        job_id, row = item
        if name == "id":
            return job_id
        if row is None or name not in row:
            return UNAVAIL
        value = row[name]
        if value is None and name in _TIMESTAMPS:
            return UNAVAIL
        return value
    return get


def build_fields():
    t = FieldTable()
    for name, title, kind, doc, flags in _JOB_FIELDS:
        t.add(Field(name, title, kind, doc, _getter(name), flags=flags))
    return t


class JobResource(Resource):
    name = "job"
    noun = "job"
    namefield = "id"
    provider = "jobs"
    fields = build_fields()

    def items(self, run, names):
        provider = self.rows_provider(run)
        ids = None
        if names is not None:
            ids = []
            for name in names:
                job_id = qlang._job_id(name)
                if job_id is None:
                    raise errors.OpPrereqError("Invalid job id %r" % (name,),
                                               errors.ECODE_INVAL)
                if job_id not in ids:
                    ids.append(job_id)
        wanted = [f for f in run.field_names if f != "id"]

        def rows(answer):
            by_id = {}
            for row in answer or ():
                by_id[row["id"]] = row
            if ids is None:
                return list(by_id.items())
            return [(job_id, by_id.get(job_id)) for job_id in ids]
        answer = provider(ids, wanted)
        if isinstance(answer, defer.Deferred):
            return answer.addCallback(rows)
        return rows(answer)

    def item_name(self, item):
        return str(item[0])

    def sort_key(self, item):
        return item[0]
