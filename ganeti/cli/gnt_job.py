"""gnt-job: look at and act on the job queue."""

from ganeti import errors
from ganeti import opcodes
from ganeti.cli import base
from ganeti.cli.base import Opt
from ganeti.cli.gnt_cluster import _parse_duration

PROGRAM = "gnt-job"
commands = base.CommandTable(PROGRAM, "Job queue commands.")

LIST_FIELDS = ["id", "status", "summary"]
INFO_FIELDS = ["id", "status", "ops", "opresult", "opstatus", "oplog",
               "opstart", "opexec", "opend", "received_ts", "start_ts",
               "end_ts"]

_STATUS_SETS = {
    "pending": sorted(opcodes.JOBS_PENDING),
    "queued": [opcodes.JOB_STATUS_QUEUED],
    "waiting": [opcodes.JOB_STATUS_WAITING],
    "running": [opcodes.JOB_STATUS_RUNNING],
    "error": [opcodes.JOB_STATUS_ERROR],
    "finished": sorted(opcodes.JOBS_FINALIZED),
}


def _job_id(text):
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise errors.ParameterError("job id", "'%s' is not a job id" % text)
    if value < 0:
        raise errors.ParameterError("job id", "'%s' is not a job id" % text)
    return value


def _status_filter(statuses):
    return ["|"] + [["=", "status", s] for s in statuses]


def _and(*parts):
    parts = [p for p in parts if p]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return ["&"] + parts


def _timestamp_list(value):
    return ",".join(base.format_timestamp(ts) if ts else "?"
                    for ts in value or [])


FORMATTERS = {
    "summary": lambda value: ",".join(str(v) for v in value or []),
    "opstart": _timestamp_list, "opexec": _timestamp_list,
    "opend": _timestamp_list,
    "received_ts": base.format_timestamp, "start_ts": base.format_timestamp,
    "end_ts": base.format_timestamp,
}

_SELECT_OPTS = [
    base.select_opt("pending", "only jobs waiting to run"),
    base.select_opt("running", "only running jobs"),
    base.select_opt("error", "only failed jobs"),
    base.select_opt("finished", "only finished jobs"),
]


@commands.command(
    "list", opts=[base.fields_opt(LIST_FIELDS)] + base.LIST_OPTS +
    _SELECT_OPTS + [Opt("--archived", action="store_true",
                        help="include archived jobs")],
    args=[Opt("names", nargs="*", metavar="JOB_ID",
              help="jobs to show (default: all)")],
    help="list jobs and their status")
def list_jobs(ctx, opts):
    fields = base.common.select_fields(LIST_FIELDS, opts.output)
    qfilter = base.make_query_filter(opts.names, opts.force_filter,
                                     namefield="id", isnumeric=True)
    if opts.select:
        qfilter = _and(qfilter, _status_filter(_STATUS_SETS[opts.select]))
    if opts.archived and "archived" not in fields:
        # the master includes archived jobs when this field is asked for
        fields.append("archived")
    response = ctx.client.query("job", fields, qfilter)
    return _print_table(ctx, opts, response)


def _print_table(ctx, opts, response):
    fielddefs = response["fields"]
    units = base.default_units(opts.separator, opts.units)
    for line in base.format_query_table(
            fielddefs, response["data"], units, separator=opts.separator,
            no_headers=opts.no_headers, verbose=opts.verbose,
            formatters=FORMATTERS):
        ctx.out(line)
    unknown = [f["name"] for f in fielddefs if f.get("kind") == "unknown"]
    if unknown:
        ctx.err("Warning: Queried for unknown fields %s" % ", ".join(unknown))
        return base.EXIT_UNKNOWN_FIELD
    return base.EXIT_SUCCESS


@commands.command("list-fields", opts=[base.NOHDR_OPT, base.SEP_OPT],
                  args=[Opt("fields", nargs="*", metavar="FIELD",
                            help="fields to describe (default: all)")],
                  help="list the fields gnt-job list can show")
def list_fields(ctx, opts):
    return base.generic_list_fields(ctx, "job", opts.fields, opts)


# --- info -----------------------------------------------------------------------

def _delta(later, earlier):
    if not later or not earlier:
        return None
    return (later[0] - earlier[0]) + (later[1] - earlier[1]) / 1e6


def _ts_line(label, ts, since=None):
    text = base.format_timestamp(ts) if ts else "N/A"
    delta = _delta(ts, since)
    if delta is not None:
        text += " (delta %.6fs)" % delta
    return (label, text)


def _op_result(result):
    if isinstance(result, (list, dict)):
        return result
    return "%s" % (result,)


def _log_items(log):
    items = []
    for entry in log or []:
        serial, ts, log_type, message = entry
        items.append([("Time", base.format_timestamp(ts)),
                      ("Content", "[%s, %s, %s]" % (serial, log_type,
                                                    base.format_log_message(
                                                        log_type, message)))])
    return items


def job_info_items(row):
    """The ``gnt-job info`` report of one job (a row of INFO_FIELDS)."""
    (job_id, status, ops, opresult, opstatus, oplog, opstart, opexec,
     opend, received, started, ended) = row
    items = [("Job ID", job_id), ("Status", status)]
    items.append(("Received", (" " * 8) + (base.format_timestamp(received)
                                           if received else "N/A")))
    label, text = _ts_line("Processing start", started, received)
    items.append((label, text))
    label, text = _ts_line("Processing end", ended, started)
    items.append((label, (" " * 2) + text))
    total = _delta(ended, received)
    if total is not None:
        items.append(("Total processing time", "%.6f seconds" % total))
    else:
        items.append(("Total processing time", "N/A"))
    op_items = []
    for idx, op in enumerate(ops or []):
        op = dict(op)
        entry = [("Opcode", op.get("OP_ID")),
                 ("Status", (opstatus or [None] * (idx + 1))[idx])]
        for label, values in (("Processing start", opstart),
                              ("Execution start", opexec),
                              ("Processing end", opend)):
            ts = values[idx] if values and idx < len(values) else None
            pad = " " * (len("Processing start") - len(label))
            entry.append((label, pad + (base.format_timestamp(ts)
                                        if ts else "N/A")))
        entry.append(("Input fields", dict(op)))
        result = opresult[idx] if opresult and idx < len(opresult) else None
        entry.append(("Result", _op_result(result)))
        log = oplog[idx] if oplog and idx < len(oplog) else []
        entry.append(("Execution log", _log_items(log)))
        op_items.append(entry)
    items.append(("Opcodes", op_items))
    return items


@commands.command("info", args=[Opt("job_ids", nargs="*", metavar="JOB_ID",
                                    help="jobs to show (default: all)")],
                  help="show everything about jobs")
def info(ctx, opts):
    rows = base.query_values(ctx, "job", INFO_FIELDS, opts.job_ids,
                             namefield="id", isnumeric=True)
    if opts.job_ids and not rows:
        raise base.CommandFailed("Failure: no such job: %s"
                                 % ", ".join(opts.job_ids))
    lines = []
    for row in rows:
        item_lines = base.format_info(job_info_items(row))
        # one list item per job, as the info commands show several objects
        lines.append("- " + item_lines[0])
        lines.extend("  " + line for line in item_lines[1:])
    for line in lines:
        ctx.out(line)
    found = set(r[0] for r in rows)
    missing = [j for j in opts.job_ids if _job_id(j) not in found]
    if missing:
        ctx.err("Warning: no such job: %s" % ", ".join(missing))
        return base.EXIT_FAILURE
    return base.EXIT_SUCCESS


# --- acting on jobs ---------------------------------------------------------------

def _selected_jobs(ctx, opts, select):
    response = ctx.client.query(
        "job", ["id"], _status_filter(_STATUS_SETS[select]))
    return [row[0][1] for row in response["data"] if row[0][0] == 0]


_CANCEL_SELECT = [
    base.select_opt("pending", "all jobs waiting to run (queued or waiting)"),
    base.select_opt("queued", "all queued jobs"),
    base.select_opt("waiting", "all jobs waiting for locks or dependencies"),
]


def _job_args(ctx, opts):
    if opts.select:
        if opts.job_ids:
            raise base.UsageError("give job IDs or a job selection, not"
                                  " both")
        ids = _selected_jobs(ctx, opts, opts.select)
        if not ids:
            ctx.out("No jobs selected.")
            return []
        ctx.confirm("The following jobs are selected: %s. Continue?"
                    % ", ".join(str(i) for i in ids), skip=opts.force)
        return ids
    if not opts.job_ids:
        raise base.UsageError("no job ID given")
    return [_job_id(j) for j in opts.job_ids]


@commands.command(
    "cancel", opts=[base.FORCE_OPT,
                    Opt("--kill", action="store_true",
                        help="also stop running jobs (dangerous)")]
    + _CANCEL_SELECT,
    args=[Opt("job_ids", nargs="*", metavar="JOB_ID", help="jobs to cancel")],
    help="cancel jobs that have not started yet")
def cancel(ctx, opts):
    code = base.EXIT_SUCCESS
    for job_id in _job_args(ctx, opts):
        success, message = ctx.client.cancel_job(job_id, opts.kill)
        ctx.out(message)
        if not success:
            code = base.EXIT_FAILURE
    return code


@commands.command(
    "change-priority",
    opts=[Opt("--priority", required=True, choices=sorted(base.PRIORITIES),
              help="the new priority"), base.FORCE_OPT] + _CANCEL_SELECT,
    args=[Opt("job_ids", nargs="*", metavar="JOB_ID", help="jobs to change")],
    help="change the priority of pending jobs")
def change_priority(ctx, opts):
    code = base.EXIT_SUCCESS
    priority = base.PRIORITIES[opts.priority]
    for job_id in _job_args(ctx, opts):
        success, message = ctx.client.change_job_priority(job_id, priority)
        ctx.out(message)
        if not success:
            code = base.EXIT_FAILURE
    return code


@commands.command("archive", args=[Opt("job_ids", nargs="+",
                                       metavar="JOB_ID",
                                       help="finished jobs to archive")],
                  help="move finished jobs into the archive")
def archive(ctx, opts):
    code = base.EXIT_SUCCESS
    for text in opts.job_ids:
        job_id = _job_id(text)
        if not ctx.client.archive_job(job_id):
            ctx.err("Failed to archive job %s (unknown or not finished)"
                    % job_id)
            code = base.EXIT_FAILURE
    return code


@commands.command("autoarchive",
                  args=[Opt("age", metavar="AGE|all",
                            help="archive finished jobs older than AGE"
                            " seconds (s, m, h, d, w suffixes), or all")],
                  help="archive finished jobs by age")
def autoarchive(ctx, opts):
    age = -1 if opts.age == "all" else _parse_duration(opts.age)
    archived, remaining = ctx.client.auto_archive_jobs(age, 60)
    ctx.out("Archived %s jobs, %s unchecked left" % (archived, remaining))


@commands.command("watch", args=[Opt("job_id", metavar="JOB_ID",
                                     help="the job to follow")],
                  help="print the log of a job as it runs, until it ends")
def watch(ctx, opts):
    job_id = _job_id(opts.job_id)
    _check_exists(ctx, job_id)
    ctx.out("Output from job %s follows" % job_id)
    ctx.out("-" * len("Output from job %s follows" % job_id))
    ctx.follow_job(job_id)


@commands.command("wait", args=[Opt("job_id", metavar="JOB_ID",
                                    help="the job to wait for")],
                  help="wait silently for a job to end; exit 1 if it"
                  " failed")
def wait(ctx, opts):
    job_id = _job_id(opts.job_id)
    _check_exists(ctx, job_id)
    ctx.poll_job(job_id, quiet=True)


def _check_exists(ctx, job_id):
    rows = ctx.client.query_jobs([job_id], ["id"])
    if not rows or rows[0] is None:
        raise base.CommandFailed("Failure: no such job: %s" % job_id)


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
