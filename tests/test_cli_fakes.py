"""A fake luxi client and helpers for the command-line tests (no tests here).

:class:`FakeClient` answers like the master daemon: submitted jobs run
"instantly" (success, with configurable results, errors and log messages),
``Query`` answers come from canned tables.  It records every call.
"""

import io

from ganeti import errors
from ganeti import luxi
from ganeti import opcodes


def field(name, title=None, kind="text", doc=None):
    return {"name": name, "title": title or name, "kind": kind,
            "doc": doc or name}


class FakeJob(object):

    def __init__(self, job_id, ops, status="success", results=None,
                 opstatus=None, logs=(), events=None):
        self.id = job_id
        self.ops = ops
        self.status = status
        self.results = results if results is not None else [None] * len(ops)
        self.opstatus = opstatus or [status] * len(ops)
        self.logs = list(logs)
        # answers to WaitForJobChange before the final one
        self.events = list(events or [])


class FakeClient(object):
    """Records calls; answers from what the test configured."""

    def __init__(self):
        self.calls = []
        self.jobs = {}
        self.next_id = 1
        #: OP_ID -> result of that opcode
        self.results = {}
        #: OP_ID -> encoded error ([class, [args]]) making the job fail
        self.errors = {}
        #: OP_ID -> [messages] logged while it runs
        self.logs = {}
        #: OP_ID -> WaitForJobChange answers before the final one
        self.events = {}
        #: resource -> (fielddefs, rows of plain values or [rs, value])
        self.tables = {}
        self.cluster_info = {}
        self.config_values = {}
        self.tags = {}
        self.cancel_answers = {}
        self.archive_answers = {}
        self.submit_error = None
        self.closed = False

    # helpers for tests
    def ops(self, job_id=None):
        """The opcode dicts of a job (default: the last one)."""
        if job_id is None:
            job_id = self.next_id - 1
        return self.jobs[job_id].ops

    def op(self, job_id=None):
        return self.ops(job_id)[0]

    def methods(self):
        return [c[0] for c in self.calls]

    # the luxi methods
    def close(self):
        self.closed = True

    def _make_job(self, ops):
        job_id = self.next_id
        self.next_id += 1
        status = "success"
        results = []
        opstatus = []
        logs = []
        serial = 0
        events = []
        failed = False
        for op in ops:
            op_id = op["OP_ID"]
            for msg in self.logs.get(op_id, []):
                serial += 1
                logs.append([serial, [1700000000 + serial, 0], "message",
                             msg])
            events.extend(self.events.get(op_id, []))
            if failed:
                opstatus.append("error")
                results.append(["OpExecError",
                                ["Previous opcode failed"]])
            elif op_id in self.errors:
                failed = True
                status = "error"
                opstatus.append("error")
                results.append(self.errors[op_id])
            else:
                opstatus.append("success")
                results.append(self.results.get(op_id))
        job = FakeJob(job_id, ops, status, results, opstatus, logs, events)
        self.jobs[job_id] = job
        return job_id

    def submit_job(self, ops):
        self.calls.append(("SubmitJob", ops))
        if self.submit_error is not None:
            raise self.submit_error
        for op in ops:
            opcodes.OpCode.from_dict(op)  # what the master checks too
        return self._make_job(ops)

    def submit_many_jobs(self, jobs):
        self.calls.append(("SubmitManyJobs", jobs))
        return [[True, self._make_job(ops)] for ops in jobs]

    def wait_for_job_change(self, job_id, fields, prev_job_info,
                            prev_log_serial, timeout):
        self.calls.append(("WaitForJobChange", [job_id, fields,
                                                prev_job_info,
                                                prev_log_serial, timeout]))
        job = self.jobs.get(job_id)
        if job is None:
            return None
        if job.events:
            return job.events.pop(0)
        newer = [e for e in job.logs
                 if prev_log_serial is None or e[0] > prev_log_serial]
        return [[job.status], newer]

    def query_jobs(self, job_ids, fields):
        self.calls.append(("QueryJobs", [job_ids, fields]))
        rows = []
        for job_id in job_ids or sorted(self.jobs):
            job = self.jobs.get(job_id)
            if job is None:
                rows.append(None)
                continue
            values = {"id": job.id, "status": job.status,
                      "opstatus": job.opstatus, "opresult": job.results}
            rows.append([values.get(f) for f in fields])
        return rows

    def query(self, what, fields, qfilter=None):
        self.calls.append(("Query", [what, fields, qfilter]))
        fielddefs, rows = self.tables.get(what, ([], []))
        by_name = dict((f["name"], f) for f in fielddefs)
        defs = [by_name.get(f, field(f, f, "unknown")) for f in fields]
        data = []
        for row in rows:
            values = dict(zip([f["name"] for f in fielddefs], row))
            out = []
            for f in fields:
                if f not in by_name:
                    out.append([1, None])
                    continue
                value = values.get(f)
                if isinstance(value, Status):
                    out.append([value.rs, None])
                else:
                    out.append([0, value])
            data.append(out)
        return {"fields": defs, "data": data}

    def query_fields(self, what, fields=None):
        self.calls.append(("QueryFields", [what, fields]))
        fielddefs, _ = self.tables.get(what, ([], []))
        if fields:
            by_name = dict((f["name"], f) for f in fielddefs)
            return {"fields": [by_name.get(f, field(f, f, "unknown"))
                               for f in fields]}
        return {"fields": fielddefs}

    def query_cluster_info(self):
        self.calls.append(("QueryClusterInfo", []))
        return self.cluster_info

    def query_config_values(self, fields):
        self.calls.append(("QueryConfigValues", [fields]))
        return [self.config_values.get(f) for f in fields]

    def query_tags(self, kind, name):
        self.calls.append(("QueryTags", [kind, name]))
        return self.tags.get((kind, name), [])

    def set_drain_flag(self, flag):
        self.calls.append(("SetDrainFlag", [flag]))
        return True

    def set_watcher_pause(self, until):
        self.calls.append(("SetWatcherPause", [until]))
        return until

    def cancel_job(self, job_id, kill=False):
        self.calls.append(("CancelJob", [job_id, kill]))
        return self.cancel_answers.get(job_id,
                                       [True, "Job %s canceled" % job_id])

    def change_job_priority(self, job_id, priority):
        self.calls.append(("ChangeJobPriority", [job_id, priority]))
        return [True, "Priority of job %s changed" % job_id]

    def archive_job(self, job_id):
        self.calls.append(("ArchiveJob", [job_id]))
        return self.archive_answers.get(job_id, True)

    def auto_archive_jobs(self, age, timeout):
        self.calls.append(("AutoArchiveJobs", [age, timeout]))
        return [3, 0]


class Status(object):
    """A non-normal query value in a FakeClient table."""

    def __init__(self, rs):
        self.rs = rs


UNKNOWN, NODATA, UNAVAIL, OFFLINE = (Status(1), Status(2), Status(3),
                                     Status(4))


class NoMaster(object):
    """A client factory whose client raises NoMasterError like luxi's."""

    def __call__(self, path):
        return _NoMasterClient(path)


class _NoMasterClient(object):

    def __init__(self, path):
        self.path = path

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise luxi.NoMasterError("socket %s does not exist" % self.path)
        return fail


def run(table, argv, client=None, stdin=None, env=None,
        client_factory=None):
    """Run a tool; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    if client_factory is None:
        client_factory = (lambda path: client)
    code = table.run(list(argv), stdout=out, stderr=err,
                     stdin=stdin or io.StringIO(""),
                     client_factory=client_factory,
                     env={} if env is None else env)
    return code, out.getvalue(), err.getvalue()


def encoded(err):
    name, args = errors.encode_exception(err)
    return [name, list(args)]
