"""The command framework of the gnt-* tools.

A tool (``gnt-instance``, ...) is a :class:`CommandTable` of sub-commands.
Each sub-command is a function ``fn(ctx, opts)`` returning an exit code (or
None for success) plus the argparse options it takes.  :meth:`CommandTable.run`
parses the command line, builds a :class:`Context` (streams, root directory,
the master's luxi client, job submission and polling) and turns errors into
Ganeti-style messages and exit codes.

Tests drive a tool through ``run(argv, ...)`` with their own streams and a
fake luxi client, see ``tests/test_cli_*.py``.
"""

import argparse
import os
import sys
import time
import traceback

from ganeti import constants
from ganeti import errors
from ganeti import luxi
from ganeti import opcodes
from ganeti import pathutils
from ganeti import qlang
from ganeti.cli import common

EXIT_SUCCESS = common.EXIT_SUCCESS
EXIT_FAILURE = common.EXIT_FAILURE
EXIT_USAGE = 2
EXIT_CONFIRMATION = 13
EXIT_UNKNOWN_FIELD = 14

PRIORITIES = {"low": opcodes.OP_PRIO_LOW, "normal": opcodes.OP_PRIO_NORMAL,
              "high": opcodes.OP_PRIO_HIGH}

#: Reason trail source of a text given with --reason
REASON_SRC_USER = opcodes.REASON_SRC_USER

# How a non-normal query value is shown: (with -v, without)
RS_TEXT = {1: ("(unknown)", "??"), 2: ("(nodata)", "?"),
           3: ("(unavail)", "-"), 4: ("(offline)", "*")}

#: The query field kinds as list-fields names them
FIELD_KIND_NAMES = {
    qlang.QFT_UNKNOWN: "Unknown", qlang.QFT_TEXT: "Text",
    qlang.QFT_BOOL: "Boolean", qlang.QFT_NUMBER: "Number",
    qlang.QFT_NUMBER_FLOAT: "Floating-point number",
    qlang.QFT_UNIT: "Storage size", qlang.QFT_TIMESTAMP: "Timestamp",
    qlang.QFT_OTHER: "Custom",
}

_ALIGN_RIGHT = frozenset([qlang.QFT_NUMBER, qlang.QFT_NUMBER_FLOAT,
                          qlang.QFT_UNIT])


class UsageError(errors.GenericError):
    """The command line is wrong (exit code 2, like argparse's errors)."""


class CommandFailed(Exception):
    """Stop the command with a message (already formatted) and a code."""

    def __init__(self, message, code=EXIT_FAILURE):
        Exception.__init__(self, message)
        self.message = message
        self.code = code


# --- options -----------------------------------------------------------------

class Opt(object):
    """One argparse argument, added to each parser that uses it."""

    def __init__(self, *flags, **kwargs):
        self.flags = flags
        self.kwargs = kwargs

    def add_to(self, parser):
        parser.add_argument(*self.flags, **self.kwargs)


class Group(object):
    """Mutually exclusive options."""

    def __init__(self, *opts, **kwargs):
        self.opts = opts
        self.required = kwargs.get("required", False)

    def add_to(self, parser):
        group = parser.add_mutually_exclusive_group(required=self.required)
        for opt in self.opts:
            opt.add_to(group)


def select_opt(value, help_text):
    """``--VALUE`` among exclusive selections: ``opts.select`` is VALUE."""
    return Opt("--" + value, dest="select", action="store_const",
               const=value, help=help_text)


def _root_opt():
    return Opt("--root", default=argparse.SUPPRESS, metavar="DIR",
               help="root directory of this node's files (virtual cluster"
               " mode); default: $GANETI_ROOTDIR, else /")


DEBUG_OPT = Opt("-d", "--debug", action="count", default=0,
                help="show tracebacks of unexpected errors")
SUBMIT_OPT = Opt("--submit", dest="submit_only", action="store_true",
                 help="submit the job and print its ID instead of waiting"
                 " for it")
PRINT_JOBID_OPT = Opt("--print-jobid", action="store_true",
                      help="print the job ID as the first line of output")
PRIORITY_OPT = Opt("--priority", choices=sorted(PRIORITIES),
                   help="priority of the submitted job(s)")
REASON_OPT = Opt("--reason", metavar="TEXT",
                 help="why this is done (recorded in the reason trail)")
DRY_RUN_OPT = Opt("--dry-run", action="store_true",
                  help="check the prerequisites only; change nothing")
FORCE_OPT = Opt("-f", "--force", action="store_true",
                help="do not ask for confirmation")
NOHDR_OPT = Opt("--no-headers", action="store_true",
                help="do not print the header line")
SEP_OPT = Opt("--separator", metavar="SEP",
              help="separate the columns with SEP instead of aligning them"
              " (sizes are then in MiB unless --units says otherwise)")
UNITS_OPT = Opt("--units", choices=["h", "m", "g", "t"],
                help="unit of sizes: h(uman), m(ebibytes), g(ibibytes),"
                " t(ebibytes)")
VERBOSE_OPT = Opt("-v", "--verbose", action="store_true",
                  help="describe missing values in words")
FILTER_OPT = Opt("-F", "--filter", dest="force_filter", action="store_true",
                 help="treat the argument as a query filter expression")
IGNORE_IPOLICY_OPT = Opt("--ignore-ipolicy", action="store_true",
                         help="ignore instance policy violations")
TAG_SRC_OPT = Opt("--from", dest="tags_source", metavar="FILE",
                  help="read more tags from FILE, one a line (- for stdin)")

#: What every job-submitting command takes
JOB_OPTS = [SUBMIT_OPT, PRINT_JOBID_OPT, PRIORITY_OPT, REASON_OPT]

IALLOCATOR_PARAMS_OPT = Opt(
    "--iallocator-params", metavar="KEY=VAL[,FLAG...]",
    help="parameters for the instance allocator, on top of the cluster's"
    " default ones (an external allocator gets --KEY=VAL and --FLAG)")


def parse_iallocator_params(text, option="--iallocator-params"):
    """``a=1,flag`` as ``{"a": "1", "flag": None}`` (None: give it without
    a value); None if not given."""
    if text is None:
        return None
    return {key: (None if value is True else value)
            for key, value in common.parse_keyval(text, option).items()}


def fields_opt(default):
    return Opt("-o", "--output", dest="output", metavar="FIELDS",
               help="comma-separated fields to show; a leading + adds them"
               " to the default (%s)" % ",".join(default))


LIST_OPTS = [NOHDR_OPT, SEP_OPT, UNITS_OPT, VERBOSE_OPT, FILTER_OPT]


# --- the command table -------------------------------------------------------

class Command(object):

    def __init__(self, name, fn, opts, args, help_text, aliases=(),
                 description=None):
        self.name = name
        self.fn = fn
        self.opts = opts
        self.args = args
        self.help = help_text
        self.aliases = aliases
        self.description = description or help_text


class _Parser(argparse.ArgumentParser):
    """argparse writing to the streams of the current run."""

    streams = (sys.stdout, sys.stderr)

    def _print_message(self, message, file=None):
        if not message:
            return
        out, err = self.streams
        (err if file is None or file is sys.stderr else out).write(message)


class CommandTable(object):

    def __init__(self, program, description):
        self.program = program
        self.description = description
        self.commands = []

    def command(self, name, opts=(), args=(), help="", aliases=(),
                description=None):
        """Decorator registering ``fn(ctx, opts)`` as sub-command ``name``.

        ``args`` are positional arguments as :class:`Opt` objects.
        """
        def register(fn):
            self.commands.append(Command(name, fn, list(opts), list(args),
                                         help, aliases, description))
            return fn
        return register

    def parser(self, streams):
        parser_class = type("Parser", (_Parser,), {"streams": streams})
        parser = parser_class(prog=self.program,
                              description=self.description)
        _root_opt().add_to(parser)
        sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                    parser_class=parser_class)
        sub.required = True
        for cmd in self.commands:
            p = sub.add_parser(cmd.name, help=cmd.help, aliases=cmd.aliases,
                               description=cmd.description)
            p.set_defaults(command_obj=cmd)
            _root_opt().add_to(p)
            DEBUG_OPT.add_to(p)
            for opt in cmd.opts + cmd.args:
                opt.add_to(p)
        return parser

    def run(self, argv=None, stdout=None, stderr=None, stdin=None,
            client_factory=None, env=None):
        """Run one command line; return the exit code."""
        stdout = stdout or sys.stdout
        stderr = stderr or sys.stderr
        if argv is None:
            argv = sys.argv[1:]
        parser = self.parser((stdout, stderr))
        try:
            opts = parser.parse_args(argv)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        ctx = Context(self.program, opts, stdout=stdout, stderr=stderr,
                      stdin=stdin, client_factory=client_factory, env=env)
        cmd = opts.command_obj
        try:
            code = cmd.fn(ctx, opts)
            return EXIT_SUCCESS if code is None else code
        except CommandFailed as err:
            if err.message:
                ctx.err(err.message)
            return err.code
        except UsageError as err:
            ctx.err("Usage error: %s" % (err.args[0] if err.args else err))
            return EXIT_USAGE
        except luxi.NoMasterError:
            ctx.err("Failure: cannot connect to the master daemon (is"
                    " ganeti-masterd running? socket %s)"
                    % ctx.paths.master_socket)
            return EXIT_FAILURE
        except luxi.LuxiTimeoutError as err:
            ctx.err("Failure: the master daemon did not answer in time: %s"
                    % err)
            return EXIT_FAILURE
        except errors.GenericError as err:
            msg, code = common.format_error(err)
            ctx.err(msg)
            if getattr(opts, "debug", 0):
                ctx.err(traceback.format_exc().rstrip())
            return code
        except KeyboardInterrupt:
            ctx.err("Aborted. Jobs already submitted keep running in the"
                    " background (see gnt-job list).")
            return EXIT_FAILURE
        except BrokenPipeError:
            return EXIT_FAILURE
        except Exception as err:  # a bug: say so, with the traceback on -d
            ctx.err("Unhandled error: %s: %s" % (type(err).__name__, err))
            if getattr(opts, "debug", 0):
                ctx.err(traceback.format_exc().rstrip())
            else:
                ctx.err("(run with -d for the traceback)")
            return EXIT_FAILURE

    def main(self, argv=None):
        """Console script entry point."""
        sys.exit(self.run(argv))


# --- the context of one run ----------------------------------------------------

class Context(object):
    """Streams, the root directory, the luxi client, job handling."""

    def __init__(self, program, opts, stdout=None, stderr=None, stdin=None,
                 client_factory=None, env=None, now=time.time,
                 sleep=time.sleep):
        self.program = program
        self.opts = opts
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.stdin = stdin or sys.stdin
        self.env = os.environ if env is None else env
        self.client_factory = client_factory or (
            lambda path: luxi.BlockingClient(path))
        self.now = now
        self.sleep = sleep
        self._client = None
        root = getattr(opts, "root", None) or self.env.get("GANETI_ROOTDIR")
        self.root = root or "/"
        self.paths = pathutils.Paths(self.root)

    @property
    def subcommand(self):
        return getattr(self.opts, "command", None) or ""

    # output
    def out(self, text=""):
        self.stdout.write("%s\n" % (text,))
        self.stdout.flush()

    def err(self, text=""):
        self.stderr.write("%s\n" % (text,))
        self.stderr.flush()

    # the master
    @property
    def client(self):
        if self._client is None:
            self._client = self.client_factory(self.paths.master_socket)
        return self._client

    # confirmation
    def confirm(self, question, skip=False, option="--force"):
        """Ask a yes/no question on a terminal (unless ``skip``, the value
        of the option that says not to ask, named ``option``); without a
        terminal, refuse."""
        if skip:
            return True
        isatty = getattr(self.stdin, "isatty", lambda: False)
        if not isatty():
            raise CommandFailed("%s\nNot a terminal, cannot ask: use"
                                " %s to go ahead." % (question, option),
                                EXIT_CONFIRMATION)
        self.stdout.write("%s y/[n]: " % question)
        self.stdout.flush()
        answer = self.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            raise CommandFailed("Aborted.", EXIT_CONFIRMATION)
        return True

    # opcodes and jobs
    def reason_trail(self):
        ts = time.time_ns()
        trail = [opcodes.make_reason("%s:%s" % (opcodes.REASON_SRC_CLIENT,
                                                self.program),
                                     self.subcommand, ts)]
        reason = getattr(self.opts, "reason", None)
        if reason:
            trail.append(opcodes.make_reason(REASON_SRC_USER, reason, ts))
        return trail

    def opcode(self, op_id, **params):
        """A validated opcode with the generic parameters of this run
        (--dry-run, --priority, --reason) filled in."""
        if getattr(self.opts, "dry_run", False):
            params.setdefault("dry_run", True)
        priority = getattr(self.opts, "priority", None)
        if priority:
            params.setdefault("priority", PRIORITIES[priority])
        params.setdefault("reason", self.reason_trail())
        return opcodes.opcode_class(op_id)(**params)

    def submit(self, ops):
        return self.client.submit_job([op.to_dict() for op in ops])

    def run_ops(self, ops):
        """Submit one job; with --submit print ``JobID: N`` and return None,
        else wait for it (printing its log) and return the opcode results."""
        job_id = self.submit(ops)
        if getattr(self.opts, "submit_only", False):
            self.out("JobID: %s" % job_id)
            return None
        if getattr(self.opts, "print_jobid", False):
            self.out("%s" % job_id)
        return self.poll_job(job_id)

    def run_op(self, op):
        """:meth:`run_ops` for one opcode: its result (None with --submit)."""
        results = self.run_ops([op])
        return None if results is None else results[0]

    def run_jobs(self, jobs):
        """Several jobs, ``[(label, [ops])]``, submitted together.

        Returns ``[(label, success, result or error)]`` (empty with
        --submit); failures are printed as they are found.
        """
        if len(jobs) == 1:
            label, ops = jobs[0]
            result = self.run_ops(ops)
            return [] if result is None else [(label, True, result)]
        answers = self.client.submit_many_jobs(
            [[op.to_dict() for op in ops] for _, ops in jobs])
        submitted = []
        failed = []
        for (label, _), (ok, value) in zip(jobs, answers):
            if ok:
                submitted.append((label, value))
            else:
                failed.append((label, False, errors.OpExecError(value)))
                self.err("Failed to submit job for %s: %s" % (label, value))
        if getattr(self.opts, "submit_only", False):
            for _, job_id in submitted:
                self.out("JobID: %s" % job_id)
            return failed
        if getattr(self.opts, "print_jobid", False):
            for _, job_id in submitted:
                self.out("%s" % job_id)
        self.err("Submitted jobs %s" % ", ".join(str(j) for _, j in
                                                 submitted))
        results = list(failed)
        for label, job_id in submitted:
            self.err("Waiting for job %s for %s ..." % (job_id, label))
            try:
                results.append((label, True, self.poll_job(job_id)))
            except errors.GenericError as err:
                msg, _ = common.format_error(err)
                self.err("%s: %s" % (label, msg))
                results.append((label, False, err))
        return results

    def poll_job(self, job_id, quiet=False, on_entry=None, prev_serial=None):
        """Wait for a job, printing its log messages (those after
        ``prev_serial``); return its opcode results or raise the error of
        the first failed opcode.  ``on_entry(entry)`` sees each log entry
        first; true: it handled it (it is not printed)."""
        prev_info = None
        reported = set()
        status = None
        while True:
            answer = self.client.wait_for_job_change(
                job_id, ["status"], prev_info, prev_serial,
                luxi.WFJC_TIMEOUT)
            if answer is None:
                raise errors.JobLost("Job %s not found" % job_id)
            if answer == luxi.JOB_NOTCHANGED:
                if not quiet and status not in reported:
                    note = {
                        opcodes.JOB_STATUS_QUEUED:
                            "Job %s is waiting in the queue" % job_id,
                        opcodes.JOB_STATUS_WAITING:
                            "Job %s is waiting for locks" % job_id,
                    }.get(status)
                    if note:
                        self.err(note)
                    reported.add(status)
                continue
            (info, log_entries) = answer
            status = info[0]
            for entry in log_entries or []:
                serial = entry[0]
                handled = on_entry is not None and on_entry(entry)
                if not quiet and not handled:
                    self.out(format_log_entry(entry))
                prev_serial = (serial if prev_serial is None
                               else max(prev_serial, serial))
            if status in opcodes.JOBS_FINALIZED:
                break
            prev_info = info
        return self.job_result(job_id)

    def follow_job(self, job_id):
        """:meth:`poll_job` through the master's event stream: the log
        messages printed as they come, no polling; a master without the
        stream (WatchEvents), or a stream that breaks off, is polled."""
        stream = self.client_factory(self.paths.master_socket)
        watch = getattr(stream, "watch_events", None)
        if watch is None or stream is self._client:
            return self.poll_job(job_id)
        try:
            try:
                _, batches = watch(None, ["job"], [str(job_id)])
            except errors.LuxiError as err:
                if not luxi.is_unsupported_method(err):
                    raise
                return self.poll_job(job_id)
            # what it logged before the stream started
            rows = self.client.query_jobs([job_id], ["status", "oplog"])
            if not rows or rows[0] is None:
                raise errors.JobLost("Job %s not found" % job_id)
            status, oplog = rows[0]
            printed = None
            entries = sorted((e for op in oplog or [] for e in op),
                             key=lambda e: e[0])
            for entry in entries:
                self.out(format_log_entry(entry))
                printed = entry[0]
            if status not in opcodes.JOBS_FINALIZED:
                finished = self._follow_events(batches, printed)
                if finished is not True:
                    # cut off or reset: the rest by polling
                    return self.poll_job(job_id, prev_serial=finished)
        finally:
            stream.close()
        return self.job_result(job_id)

    def _follow_events(self, batches, printed):
        """Print the log events; True once the job finished, else the
        serial of the last entry printed (the stream broke off)."""
        try:
            for batch in batches:
                for event in batch:
                    kind, type_ = event.get("kind"), event.get("type")
                    if kind in ("cut", "reset"):
                        return printed
                    data = event.get("data") or {}
                    if type_ == "log":
                        serial = data.get("serial")
                        if printed is not None and serial <= printed:
                            continue
                        self.out(format_log_entry(
                            [serial, data.get("timestamp"),
                             data.get("type"), data.get("message")]))
                        printed = serial
                    elif type_ == "finished":
                        return True
        except luxi.ConnectionClosedError:
            pass
        return printed

    def job_result(self, job_id):
        rows = self.client.query_jobs([job_id], ["status", "opstatus",
                                                 "opresult"])
        if not rows or rows[0] is None:
            raise errors.JobLost("Job %s not found" % job_id)
        status, opstatus, opresult = rows[0]
        return check_job_result(job_id, status, opstatus, opresult)


def follow_jobs(ctx, result):
    """Wait for the jobs an opcode submitted (``{"jobs": [[ok, id or
    error], ...]}``), printing their logs; the number that failed."""
    failed = 0
    for ok, job_id in (result or {}).get("jobs", []):
        if not ok:
            ctx.err("Failed to submit a job: %s" % job_id)
            failed += 1
            continue
        ctx.err("Waiting for job %s ..." % job_id)
        try:
            ctx.poll_job(job_id)
        except errors.GenericError as err:
            msg, _ = common.format_error(err)
            ctx.err("Job %s failed: %s" % (job_id, msg))
            failed += 1
    return failed


def print_evacuation_plan(ctx, result):
    """What a dry run of an evacuation answered: the planned moves."""
    for name, target, how in result.get("moved") or []:
        if isinstance(target, list):
            target = ", ".join(target)
        if isinstance(how, list):
            how = ", ".join(how)
        ctx.out("%s: %s (%s)" % (name, target, how))
    for name, reason in result.get("failed") or []:
        ctx.out("%s: cannot be moved (%s)" % (name, reason))
    for ops in result.get("planned_jobs") or []:
        ctx.out("job: %s" % ", ".join(
            "%s(%s%s)" % (op.get("OP_ID"), op.get("instance_name"),
                          " -> %s" % (op.get("target_node") or
                                      op.get("remote_node"))
                          if op.get("target_node") or op.get("remote_node")
                          else "")
            for op in ops))


def check_job_result(job_id, status, opstatus, opresult):
    """The opcode results of a finished job, or raise why it failed."""
    if status == opcodes.JOB_STATUS_SUCCESS:
        return opresult
    if status == opcodes.JOB_STATUS_CANCELED:
        raise errors.OpExecError("Job %s was canceled" % job_id)
    for (op_status, result) in zip(opstatus or [], opresult or []):
        if op_status == opcodes.OP_STATUS_ERROR:
            err = errors.decode_exception(result)
            if err is not None:
                raise err
            raise errors.OpExecError(str(result))
    raise errors.OpExecError("Job %s finished with status %s"
                             % (job_id, status))


# --- formatting ----------------------------------------------------------------

def format_log_time(ts):
    """``[sec, usec]`` as ``Sat Nov 21 12:00:00 2026`` (local time)."""
    if isinstance(ts, (list, tuple)) and len(ts) == 2:
        value = ts[0] + ts[1] / 1e6
    else:
        value = float(ts)
    return time.ctime(value)


def format_log_message(log_type, message):
    if log_type == "message-list" and isinstance(message, (list, tuple)):
        return "\n".join(str(m) for m in message)
    if isinstance(message, str):
        return message
    return str(message)


def format_log_entry(entry):
    (_serial, ts, log_type, message) = entry
    return "%s %s" % (format_log_time(ts), format_log_message(log_type,
                                                              message))


def format_time(value):
    """Epoch seconds as ``2026-11-21 12:00:00`` (local time)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "N/A"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))


def format_timestamp(ts):
    """``[sec, usec]`` as ``2026-11-21 12:00:00.000123``."""
    if not isinstance(ts, (list, tuple)) or len(ts) != 2:
        return "?"
    return "%s.%06d" % (time.strftime("%Y-%m-%d %H:%M:%S",
                                      time.localtime(ts[0])), ts[1])


def format_bool(value):
    return "Y" if value else "N"


def _scalar_text(value):
    if isinstance(value, bool):
        return str(value)
    return "%s" % (value,)


def format_query_value(kind, value, units, fmt=None):
    """Text of one normal query value of field ``kind``."""
    if fmt is not None:
        return fmt(value)
    if kind == qlang.QFT_BOOL:
        return format_bool(value)
    if kind == qlang.QFT_UNIT:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return common.format_unit(value, units)
        return _scalar_text(value)
    if kind == qlang.QFT_TIMESTAMP:
        if isinstance(value, (list, tuple)) and len(value) == 2:
            return format_timestamp(value)
        return format_time(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_scalar_text(v) for v in value)
    if value is None:
        return ""
    return _scalar_text(value)


def default_units(separator, units):
    if units:
        return units
    return "m" if separator is not None else "h"


def format_query_table(fielddefs, rows, units, separator=None,
                       no_headers=False, verbose=False, formatters=None):
    """Lines of a query result table.

    ``rows`` are lists of ``[status, value]``; ``formatters`` maps field
    names to functions formatting a normal value.
    """
    formatters = formatters or {}
    headers = [f.get("title") or f["name"] for f in fielddefs]
    numeric = set(i for i, f in enumerate(fielddefs)
                  if f.get("kind") in _ALIGN_RIGHT)
    text_rows = []
    for row in rows:
        cells = []
        for fdef, (rs, value) in zip(fielddefs, row):
            if rs == 0:
                cells.append(format_query_value(
                    fdef.get("kind"), value, units,
                    formatters.get(fdef["name"])))
            else:
                verbose_text, short = RS_TEXT.get(rs, ("(?)", "?"))
                cells.append(verbose_text if verbose else short)
        text_rows.append(cells)
    return common.format_table(headers, text_rows, separator=separator,
                               no_headers=no_headers, numeric=numeric)


# --- list and list-fields --------------------------------------------------

def make_query_filter(names, force_filter=False, namefield="name",
                      isnumeric=False):
    try:
        return qlang.make_filter(names, force_filter=force_filter,
                                 namefield=namefield, isnumeric=isnumeric)
    except errors.QueryFilterParseError as err:
        raise errors.OpPrereqError("Invalid query filter: %s" % err,
                                   errors.ECODE_INVAL)


def query_values(ctx, resource, fields, names, **filter_args):
    """The rows of ``resource`` named by ``names`` (all when empty), each a
    list of the values of ``fields`` (None where a value is not normal);
    ``filter_args`` as :func:`make_query_filter`'s."""
    qfilter = make_query_filter(names, **filter_args)
    response = ctx.client.query(resource, fields, qfilter)
    return [[value if status == 0 else None for status, value in row]
            for row in response["data"]]


def generic_list(ctx, resource, default_fields, names, opts,
                 namefield="name", isnumeric=False, formatters=None,
                 hidden_fields=(), row_hook=None):
    """The ``list`` command of a query resource; returns the exit code.

    ``hidden_fields`` are queried too but not shown; ``row_hook(fields,
    row, hidden)`` may adjust each shown row (a list of [status, value])
    using the hidden values (a dict field -> [status, value]).
    """
    fields = common.select_fields(default_fields, getattr(opts, "output",
                                                          None))
    qfilter = make_query_filter(names, getattr(opts, "force_filter", False),
                                namefield, isnumeric)
    hidden = [f for f in hidden_fields if f not in fields]
    response = ctx.client.query(resource, fields + hidden, qfilter)
    if hidden or row_hook is not None:
        shown = len(fields)
        rows = []
        for row in response["data"]:
            extra = dict(zip(fields + hidden, row))
            row = list(row[:shown])
            if row_hook is not None:
                row_hook(fields, row, extra)
            rows.append(row)
        response = {"fields": response["fields"][:shown], "data": rows}
    fielddefs = response["fields"]
    separator = getattr(opts, "separator", None)
    units = default_units(separator, getattr(opts, "units", None))
    for line in format_query_table(
            fielddefs, response["data"], units, separator=separator,
            no_headers=getattr(opts, "no_headers", False),
            verbose=getattr(opts, "verbose", False), formatters=formatters):
        ctx.out(line)
    return _exit_for_fields(ctx, fielddefs)


def _exit_for_fields(ctx, fielddefs):
    """A listing's exit code: Ganeti's warning and EXIT_UNKNOWN_FIELD if a
    queried field is unknown."""
    unknown = [f["name"] for f in fielddefs
               if f.get("kind") == qlang.QFT_UNKNOWN]
    if unknown:
        ctx.err("Warning: Queried for unknown fields %s"
                % ", ".join(unknown))
        return EXIT_UNKNOWN_FIELD
    return EXIT_SUCCESS


def generic_list_fields(ctx, resource, fields, opts):
    response = ctx.client.query_fields(resource, fields or None)
    fielddefs = response["fields"]
    rows = [[f["name"], FIELD_KIND_NAMES.get(f.get("kind"), f.get("kind")),
             f.get("title", ""), f.get("doc", "")] for f in fielddefs]
    for line in common.format_table(
            ["Name", "Type", "Title", "Description"], rows,
            separator=getattr(opts, "separator", None),
            no_headers=getattr(opts, "no_headers", False)):
        ctx.out(line)
    return _exit_for_fields(ctx, fielddefs)


def list_command(table, resource, default_fields, help_text, arg_name,
                 arg_help, namefield="name", isnumeric=False,
                 formatters=None, extra_opts=(), hidden_fields=(),
                 row_hook=None):
    """Register ``list`` and ``list-fields`` for a query resource."""

    @table.command("list", opts=[fields_opt(default_fields)] + LIST_OPTS +
                   list(extra_opts),
                   args=[Opt("names", nargs="*", metavar=arg_name,
                             help=arg_help)],
                   help=help_text)
    def list_cmd(ctx, opts):
        return generic_list(ctx, resource, default_fields, opts.names, opts,
                            namefield=namefield, isnumeric=isnumeric,
                            formatters=formatters,
                            hidden_fields=hidden_fields, row_hook=row_hook)

    @table.command("list-fields", opts=[NOHDR_OPT, SEP_OPT],
                   args=[Opt("fields", nargs="*", metavar="FIELD",
                             help="fields to describe (default: all)")],
                   help="list the fields the list command can show")
    def list_fields_cmd(ctx, opts):
        return generic_list_fields(ctx, resource, opts.fields, opts)

    return list_cmd, list_fields_cmd


# --- nested "info" output ------------------------------------------------------

class Items(list):
    """A list that ``info`` output always shows one ``- item`` a line."""


def _is_pairs(value):
    return (isinstance(value, list) and value and
            all(isinstance(p, tuple) and len(p) == 2 and
                isinstance(p[0], str) for p in value))


def format_info(data, indent=0):
    """Lines of nested information, as the ``info`` commands print it.

    ``data`` is a list of ``(key, value)`` tuples or a dict (sorted by key);
    values that are such mappings or lists nest below their key, list items
    start with ``- ``.
    """
    lines = []
    _format_mapping(lines, data, indent)
    return lines


def _items(mapping):
    if isinstance(mapping, dict):
        return sorted(mapping.items(), key=lambda kv: str(kv[0]))
    return list(mapping)


def _nested(value):
    return isinstance(value, (dict, Items)) or _is_pairs(value) or (
        isinstance(value, list) and any(isinstance(v, (list, dict, tuple))
                                        for v in value))


def _format_mapping(lines, mapping, indent, first_prefix=None):
    pad = " " * indent
    for idx, (key, value) in enumerate(_items(mapping)):
        prefix = pad if first_prefix is None or idx else first_prefix
        if _nested(value) or (isinstance(value, (list, dict)) and
                              not value):
            lines.append("%s%s: " % (prefix, key))
            if isinstance(value, dict) or _is_pairs(value):
                _format_mapping(lines, value, indent + 2)
            else:
                _format_list(lines, value, indent + 2)
        elif isinstance(value, list):
            lines.append("%s%s: %s" % (prefix, key,
                                       ", ".join(_scalar_text(v)
                                                 for v in value)))
        else:
            lines.append("%s%s: %s" % (prefix, key, _info_scalar(value)))


def _format_list(lines, items, indent):
    pad = " " * indent
    for item in items:
        if isinstance(item, dict) or _is_pairs(item):
            _format_mapping(lines, item, indent + 2, first_prefix=pad + "- ")
        elif isinstance(item, (list, tuple)):
            start = len(lines)
            _format_list(lines, list(item), indent + 2)
            if len(lines) > start:
                lines[start] = pad + "- " + lines[start][indent + 2:]
            else:
                lines.append(pad + "- ")
        else:
            lines.append("%s- %s" % (pad, _info_scalar(item)))


def _info_scalar(value):
    if value is None:
        return "None"
    return _scalar_text(value)


def print_info(ctx, data):
    for line in format_info(data):
        ctx.out(line)


# --- parameters from the command line ------------------------------------------

#: Types of backend parameters as the client converts them
BE_TYPES = dict(constants.BES_PARAMETER_TYPES)
BE_TYPES[constants.BE_MEMORY] = "size"
ND_TYPES = dict(constants.NDS_PARAMETER_TYPES)

VALUE_DEFAULT = "default"


def _typed(params, types, option):
    """Convert string values by a ``{key: "size"|"int"|"bool"|"float"|
    "string"}`` table; unknown keys stay as they are (the master decides)."""
    result = {}
    for key, value in params.items():
        kind = types.get(key)
        if value is None or value == VALUE_DEFAULT or kind is None:
            result[key] = value
            continue
        try:
            if kind == "size":
                if isinstance(value, bool):
                    raise ValueError("a size is needed")
                result[key] = common.parse_unit(value)
            elif kind == "int":
                if isinstance(value, bool):
                    raise ValueError("an integer is needed")
                result[key] = int(value)
            elif kind == "float":
                if isinstance(value, bool):
                    raise ValueError("a number is needed")
                result[key] = float(value)
            elif kind == "bool":
                result[key] = parse_bool(value, key)
            else:
                result[key] = value if isinstance(value, str) else value
        except (ValueError, errors.UnitParseError) as err:
            raise errors.ParameterError(
                "%s %s" % (option, key),
                "'%s' is not valid (%s)" % (value, err))
    return result


def parse_bool(value, name="value"):
    if isinstance(value, bool):
        return value
    low = str(value).strip().lower()
    if low in ("true", "yes", "y", "1", "on"):
        return True
    if low in ("false", "no", "n", "0", "off"):
        return False
    raise errors.ParameterError(name, "'%s' is not a boolean (use yes or"
                                " no)" % value)


def yes_no(name):
    """argparse type for ``{yes|no}`` options."""
    def convert(text):
        try:
            return parse_bool(text, name)
        except errors.ParameterError:
            raise argparse.ArgumentTypeError("expected yes or no, got %r"
                                             % text)
    return convert


def parse_beparams(text, option="-B"):
    if text is None:
        return None
    return _typed(common.parse_keyval(text, option), BE_TYPES, option)


def parse_ndparams(text, option="--node-parameters"):
    if text is None:
        return None
    return _typed(common.parse_keyval(text, option), ND_TYPES, option)


def hv_types(hv):
    """Types of a hypervisor's parameters, from the types of its defaults."""
    types = {}
    for key, default in constants.HVC_DEFAULTS.get(hv, {}).items():
        if isinstance(default, bool):
            types[key] = "bool"
        elif isinstance(default, int):
            types[key] = "int"
        elif isinstance(default, float):
            types[key] = "float"
        else:
            types[key] = "string"
    return types


def parse_hvparams(hv, text, option="-H"):
    return _typed(common.parse_keyval(text, option), hv_types(hv), option)


def parse_hv_spec(text, option="-H"):
    """``kvm:acpi=no,kernel_path=`` -> ``("kvm", {...})``."""
    hv, params = common.parse_ident_keyval(text, option)
    if hv not in constants.HYPER_TYPES:
        raise errors.ParameterError(
            option, "unknown hypervisor '%s' (one of %s)"
            % (hv, ", ".join(sorted(constants.HYPER_TYPES))))
    return hv, _typed(params, hv_types(hv), option)


def parse_hv_list(specs, option="-H"):
    """Repeated ``-H hv:k=v`` options as ``{hv: {k: v}}``."""
    result = {}
    for spec in specs or []:
        hv, params = parse_hv_spec(spec, option)
        if hv in result:
            raise errors.ParameterError(option, "hypervisor '%s' given twice"
                                        % hv)
        result[hv] = params
    return result


def split_list(text):
    """``a,b,,c`` -> ``["a", "b", "c"]``; None stays None."""
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


def read_tags(ctx, opts):
    tags = list(getattr(opts, "tags", []) or [])
    source = getattr(opts, "tags_source", None)
    if source:
        if source == "-":
            data = ctx.stdin.read()
        else:
            try:
                with open(source) as f:
                    data = f.read()
            except OSError as err:
                raise CommandFailed("Failure: cannot read tags from %s: %s"
                                    % (source, err.strerror or err))
        tags.extend(line.strip() for line in data.splitlines()
                    if line.strip())
    if not tags:
        raise UsageError("no tags given")
    return tags


# --- tags ---------------------------------------------------------------------

def tag_commands(table, kind, what=None):
    """Register add-tags, list-tags, remove-tags for one tag kind.

    ``what`` is the metavar of the object name (None for the cluster).
    """
    name_args = [] if what is None else [
        Opt("name", metavar=what, help="the %s" % what.lower())]
    target = "the cluster" if what is None else "an object"

    def object_name(opts):
        return getattr(opts, "name", None) or None

    @table.command("add-tags", opts=[TAG_SRC_OPT] + JOB_OPTS,
                   args=name_args + [Opt("tags", nargs="*", metavar="TAG",
                                         help="tags to add")],
                   help="add tags to %s" % target)
    def add_tags(ctx, opts):
        tags = read_tags(ctx, opts)
        ctx.run_op(ctx.opcode("OP_TAGS_SET", kind=kind, tags=tags,
                              name=object_name(opts)))

    @table.command("remove-tags", opts=[TAG_SRC_OPT] + JOB_OPTS,
                   args=name_args + [Opt("tags", nargs="*", metavar="TAG",
                                         help="tags to remove")],
                   help="remove tags from %s" % target)
    def remove_tags(ctx, opts):
        tags = read_tags(ctx, opts)
        ctx.run_op(ctx.opcode("OP_TAGS_DEL", kind=kind, tags=tags,
                              name=object_name(opts)))

    @table.command("list-tags", args=name_args,
                   help="list the tags of %s" % target)
    def list_tags(ctx, opts):
        name = object_name(opts)
        tags = ctx.client.query_tags(kind, name if name is not None else "")
        for tag in sorted(tags):
            ctx.out(tag)
