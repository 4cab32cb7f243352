"""gnt-debug: looking into the master's machinery.

``gnt-debug iallocator`` (alias ``allocator``) submits OP_TEST_ALLOCATOR,
with Ganeti's options: ``--dir in`` prints the input document an
allocator would get for the request, ``--dir out`` what the allocator
(``-I NAME``, default the cluster's for the request type) answers, as it
answered it.  Nothing changes in the cluster either way.  For the
``balance`` and ``capacity`` request types, ``--dir out`` prints the
plan the allocator answered (the jobs of the moves, or where each
instance would go) instead of the raw document.

``gnt-debug delay`` submits OP_TEST_DELAY; ``submit-job`` submits jobs
read from JSON files (lists of opcodes); ``test-jobqueue`` checks the job
queue as Ganeti's does (refused priorities and dependencies, dependent
jobs' order, OP_TEST_JQUEUE jobs that succeed, fail or fail half-way, with
their notifications over UNIX sockets and their log messages);
``test-osparams`` sends secret OS parameters (OP_TEST_OS_PARAMS).
"""

import json
import socket
import time

from ganeti import constants
from ganeti import errors
from ganeti import opcodes
from ganeti.cli import base
from ganeti.cli import common
from ganeti.cli.base import Opt

PROGRAM = "gnt-debug"
commands = base.CommandTable(PROGRAM, "Debugging commands.")

_MODES = sorted(opcodes.IALLOCATOR_MODES)
_EVAC_MODES = sorted(opcodes.NODE_EVAC_MODES)


def _disks(text):
    result = []
    for value in text.split(","):
        try:
            size = common.parse_unit(value)
        except errors.UnitParseError as err:
            raise errors.ParameterError("--disks", "invalid disk size '%s':"
                                        " %s" % (value, err))
        result.append({"size": size, "mode": constants.DISK_RDWR})
    return result


def _nics(text):
    """``mac/ip/bridge,...``: missing or empty parts are left out."""
    result = []
    for spec in text.split(","):
        parts = spec.split("/")
        if len(parts) > 3:
            raise errors.ParameterError("--nics", "'%s' is not MAC/IP/BRIDGE"
                                        % spec)
        parts += [""] * (3 - len(parts))
        nic = {}
        for key, value in zip(("mac", "ip", "bridge"), parts):
            nic[key] = value or None
        result.append(nic)
    return result


def _memory(text):
    try:
        return common.parse_unit(text)
    except errors.UnitParseError as err:
        raise errors.ParameterError("--memory", str(err))


@commands.command(
    "iallocator", aliases=["allocator"],
    opts=[Opt("--dir", dest="direction", default="in", choices=["in", "out"],
              help="show the allocator's input (in) or its answer (out)"),
          Opt("-I", "--iallocator", metavar="NAME",
              help="the allocator to run for --dir out (default: the"
              " cluster's first for the request type)"),
          Opt("-m", "--mode", default="relocate", choices=_MODES,
              help="request type (one of %s)" % ", ".join(_MODES)),
          Opt("--memory", default="128", help="memory of the instance"
              " (MiB, or with a unit)"),
          Opt("--disks", default="4096,4096",
              help="comma-separated disk sizes (MiB, or with a unit)"),
          Opt("-t", "--disk-template", metavar="TEMPLATE",
              choices=sorted(constants.DISK_TEMPLATES),
              help="disk template of the instance"),
          Opt("--nics", default="00:11:22:33:44:55",
              help="comma-separated NICs, each MAC/IP/BRIDGE (missing parts"
              " are left out)"),
          Opt("-o", "--os-type", metavar="OS", help="OS of the instance"),
          Opt("-p", "--vcpus", type=int, default=1,
              help="virtual CPUs of the instance"),
          Opt("--tags", help="comma-separated tags"),
          Opt("--evac-mode", default=opcodes.NODE_EVAC_ALL,
              choices=_EVAC_MODES,
              help="node evacuation mode (one of %s)"
              % ", ".join(_EVAC_MODES)),
          Opt("--target-groups", action="append", default=[],
              help="target groups of a change-group request (repeatable)"),
          Opt("--spindle-use", type=int, default=1,
              help="spindles the instance uses"),
          Opt("--count", type=int, default=2,
              help="how many instances a multi-allocate request places"),
          Opt("-g", "--group", metavar="GROUP",
              help="node group (allocate's group, the group a balance"
              " request balances; default: all, one after the other)"),
          Opt("--max-moves", type=int, metavar="N",
              help="balance: at most N moves"),
          Opt("--no-disk-moves", dest="disk_moves", action="store_false",
              default=True, help="balance: no moves that copy disks"
              " (failovers and migrations only)"),
          Opt("--balance-evac", action="store_true", default=False,
              help="balance: only move instances off offline and drained"
              " nodes"),
          base.IALLOCATOR_PARAMS_OPT, base.DRY_RUN_OPT, base.PRIORITY_OPT],
    args=[Opt("names", nargs="*", metavar="INSTANCE",
              help="the instance (allocate, relocate, ...) or instances"
              " (node-evacuate, change-group); none for balance, optional"
              " for capacity")],
    help="run an OP_TEST_ALLOCATOR opcode: an allocator's input or answer")
def iallocator(ctx, opts):
    if not opts.names and opts.mode not in _NAMELESS:
        raise errors.ParameterError("INSTANCE", "%s requests need an"
                                    " instance name" % opts.mode)
    if opts.max_moves is not None and opts.max_moves < 0:
        raise errors.ParameterError("--max-moves", "must not be negative")
    name = opts.names[0] if opts.names else _NAMELESS[opts.mode]
    params = {
        "direction": opts.direction, "mode": opts.mode,
        "name": name, "instances": list(opts.names) or None,
        "memory": _memory(opts.memory), "disks": _disks(opts.disks),
        "disk_template": opts.disk_template, "nics": _nics(opts.nics),
        "os": opts.os_type, "vcpus": opts.vcpus,
        "tags": base.split_list(opts.tags) if opts.tags else [],
        "iallocator": opts.iallocator, "evac_mode": opts.evac_mode,
        "target_groups": list(opts.target_groups),
        "spindle_use": opts.spindle_use, "count": opts.count,
    }
    if opts.group is not None:
        params["group_name"] = opts.group
    if opts.mode == "balance":
        params.update(max_moves=opts.max_moves, disk_moves=opts.disk_moves,
                      balance_evac=opts.balance_evac)
    allocator_params = base.parse_iallocator_params(opts.iallocator_params)
    if allocator_params is not None:
        params["iallocator_params"] = allocator_params
    result = ctx.run_op(ctx.opcode("OP_TEST_ALLOCATOR", **params))
    if opts.direction == "out" and opts.mode in _NAMELESS:
        result = format_plan(opts.mode, result)
    ctx.out("%s" % (result,))


#: the request types without an instance, and the name they are sent with
_NAMELESS = {"balance": "balance", "capacity": "new-instance"}


def _op_command(op):
    """An opcode of a plan as the gnt-instance command doing it."""
    name = op.get("instance_name")
    kind = op.get("OP_ID")
    if kind == "OP_INSTANCE_REPLACE_DISKS":
        return "gnt-instance replace-disks -n %s %s" % (op.get("remote_node"),
                                                         name)
    verb = "migrate" if kind == "OP_INSTANCE_MIGRATE" else "failover"
    target = op.get("target_node")
    return "gnt-instance %s -f %s%s" % (
        verb, "-n %s " % target if target else "", name)


def format_plan(mode, text):
    """A balance or capacity answer as text for people; anything that is
    not a successful answer of that shape is shown as it came."""
    try:
        answer = json.loads(text)
        result = answer["result"]
        if not answer["success"]:
            return text
        lines = [str(answer.get("info", ""))]
        if mode == "balance":
            moved, failed, jobs = result
            lines.append("%d jobs, to run in order:" % len(jobs))
            for idx, job in enumerate(jobs, 1):
                for pos, op in enumerate(job):
                    lines.append("  %s %s" % (("%3d." % idx) if pos == 0
                                              else "    ", _op_command(op)))
            if moved:
                lines.append("Instances moved (group: nodes after):")
                for name, group, nodes in moved:
                    lines.append("  %s (%s): %s" % (name, group,
                                                    ", ".join(nodes)))
            for name, reason in failed:
                lines.append("  not moved: %s: %s" % (name, reason))
        else:
            lines.append("%d instances fit, in allocation order:"
                         % result["count"])
            for idx, nodes in enumerate(result["allocations"], 1):
                lines.append("  %3d. %s" % (idx, ", ".join(nodes)))
        return "\n".join(lines)
    except (ValueError, KeyError, TypeError, AttributeError):
        return text


# --- delay, submit-job ---------------------------------------------------------

@commands.command(
    "delay",
    opts=[Opt("--no-master", dest="on_master", action="store_false",
              default=True, help="do not sleep in the master"),
          Opt("-n", dest="on_nodes", action="append", default=[],
              metavar="NODE", help="sleep on this node too (repeatable)"),
          Opt("-r", "--repeat", type=int, default=0,
              help="repeat the sleep this many times"),
          Opt("-i", "--interruptible", action="store_true",
              help="accepted for compatibility"),
          Opt("-l", "--no-locks", action="store_true",
              help="take no locks while sleeping"),
          base.DRY_RUN_OPT] + base.JOB_OPTS,
    args=[Opt("duration", metavar="SECONDS")],
    help="run an OP_TEST_DELAY opcode (sleep)")
def delay(ctx, opts):
    try:
        duration = float(opts.duration)
    except ValueError:
        raise errors.ParameterError("duration", "%r is not a number of"
                                    " seconds" % opts.duration)
    if opts.repeat < 0:
        raise errors.ParameterError("--repeat", "must not be negative")
    ctx.run_op(ctx.opcode("OP_TEST_DELAY", duration=duration,
                          on_master=opts.on_master,
                          on_nodes=list(opts.on_nodes), repeat=opts.repeat,
                          interruptible=opts.interruptible,
                          no_locks=opts.no_locks))


def _read_ops(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as err:
        raise errors.ParameterError(path, "cannot read it: %s"
                                    % err.strerror)
    except ValueError as err:
        raise errors.ParameterError(path, "not JSON: %s" % err)
    if not isinstance(data, list) or not data:
        raise errors.ParameterError(path, "expected a non-empty list of"
                                    " opcodes")
    ops = []
    for idx, item in enumerate(data):
        try:
            ops.append(opcodes.OpCode.from_dict(item))
        except errors.GenericError as err:
            raise errors.ParameterError("%s" % path, "opcode %d: %s"
                                        % (idx, err.args[0]))
    return ops


@commands.command(
    "submit-job",
    opts=[base.VERBOSE_OPT,
          Opt("--op-repeat", dest="rep_op", type=int, default=1,
              help="repeat the opcodes of each file this many times"),
          Opt("--job-repeat", dest="rep_job", type=int, default=1,
              help="submit each job this many times"),
          Opt("--timing-stats", action="store_true",
              help="show how long submitting and running took"),
          Opt("--each", action="store_true",
              help="submit each job separately"),
          base.DRY_RUN_OPT, base.PRIORITY_OPT],
    args=[Opt("files", nargs="+", metavar="FILE",
              help="JSON files, each a list of opcodes")],
    help="submit jobs made of the opcodes of JSON files")
def submit_job(ctx, opts):
    if opts.rep_op < 1 or opts.rep_job < 1:
        raise errors.ParameterError("--op-repeat/--job-repeat",
                                    "must be at least 1")
    jobs = []
    for path in opts.files:
        ops = _read_ops(path)
        for op in ops:
            if opts.dry_run:
                op.dry_run = True
            if opts.priority:
                op.priority = base.PRIORITIES[opts.priority]
        jobs.extend([ops * opts.rep_op] * opts.rep_job)
    started = time.time()
    if opts.each:
        ids = [ctx.submit(ops) for ops in jobs]
    else:
        answers = ctx.client.submit_many_jobs(
            [[op.to_dict() for op in ops] for ops in jobs])
        ids = []
        for ok, value in answers:
            if not ok:
                raise base.CommandFailed("Failed to submit a job: %s"
                                         % value)
            ids.append(value)
    submitted = time.time()
    for job_id in ids:
        ctx.err("Waiting for job %s ..." % job_id)
        result = ctx.poll_job(job_id, quiet=not opts.verbose)
        if opts.verbose:
            ctx.out("Job %s: %s" % (job_id, json.dumps(result)))
    if opts.timing_stats:
        done = time.time()
        ctx.out("Submitted %d jobs in %.3f s, all finished after %.3f s"
                % (len(ids), submitted - started, done - started))


# --- test-jobqueue, test-osparams --------------------------------------------

_JQT_ALL = frozenset(["expandnames", "exec", "startmsg", "logmsg"])
_JQT_MSGPREFIX = "TESTMSG="


class JobQueueTestFailed(errors.OpExecError):
    """What test-jobqueue found wrong."""


class _JobQueueReporter(object):
    """Answers a job's "jqueue-test" log entries as the test expects:
    checks the job's status at each step, connects to the socket named
    and closes it; collects the test messages."""

    def __init__(self, ctx, job_id):
        self.ctx = ctx
        self.job_id = job_id
        self.messages = []
        self._since_start = None

    def __call__(self, entry):
        _, _, kind, msg = entry
        if kind == "jqueue-test":
            self._test_entry(*msg)
            return True
        if kind == "message" and isinstance(msg, str) and \
                msg.startswith(_JQT_MSGPREFIX):
            if self._since_start is None:
                raise JobQueueTestFailed("Received test message without a"
                                         " preceding start message")
            text = msg[len(_JQT_MSGPREFIX):]
            self._since_start.append(text)
            self.messages.append(text)
            return True
        return False

    def _test_entry(self, path, test, arg):
        if test not in _JQT_ALL:
            raise JobQueueTestFailed("Received invalid test message %s"
                                     % test)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(30.0)
            sock.connect(path)
            rows = self.ctx.client.query_jobs([self.job_id], ["status"])
            if not rows or rows[0] is None:
                raise JobQueueTestFailed("Can't find job %s" % self.job_id)
            status = rows[0][0]
            expected = {"expandnames": opcodes.JOB_STATUS_WAITING,
                        "exec": opcodes.JOB_STATUS_RUNNING,
                        "logmsg": opcodes.JOB_STATUS_RUNNING}.get(test)
            if expected is not None and status != expected:
                raise JobQueueTestFailed(
                    "Job status at step %s is '%s', not '%s' as expected"
                    % (test, status, expected))
            if test == "startmsg":
                self._since_start = []
            elif test == "logmsg" and len(self._since_start or []) != arg:
                raise JobQueueTestFailed(
                    "Received %s test messages when %s are expected"
                    % (len(self._since_start or []), arg))
        except OSError as err:
            raise JobQueueTestFailed("Cannot connect to %s: %s"
                                     % (path, err))
        finally:
            sock.close()


def _expect_refused(what, call):
    try:
        call()
    except errors.GenericError:
        return
    raise JobQueueTestFailed("%s was accepted when it should be refused"
                             % what)


def _delay_op(**params):
    return dict(OP_ID="OP_TEST_DELAY", duration=0, **params)


def _test_submission(ctx):
    ctx.out("Testing job submission")
    delay = _delay_op
    bad = sorted(set(p + d for p in (list(opcodes.OP_PRIO_SUBMIT_VALID) +
                                     [opcodes.OP_PRIO_LOWEST,
                                      opcodes.OP_PRIO_HIGHEST])
                     for d in (-1, 1))
                 - opcodes.OP_PRIO_SUBMIT_VALID)
    for priority in bad:
        for before, after in ((0, 0), (3, 0), (0, 3), (4, 2)):
            ops = ([delay() for _ in range(before)] +
                   [delay(priority=priority)] +
                   [delay() for _ in range(after)])
            _expect_refused("A job with priority %s" % priority,
                            lambda: ctx.client.submit_job(ops))
            _expect_refused("Several jobs, one with priority %s"
                            % priority,
                            lambda: ctx.client.submit_many_jobs(
                                [[delay(), delay(dry_run=True)], ops]))
    ctx.out("Job submission tests were successful")


def _test_dependencies(ctx):
    ctx.out("Testing job dependencies")
    _expect_refused("A single job with a relative dependency",
                    lambda: ctx.client.submit_job(
                        [{"OP_ID": "OP_TEST_DELAY", "duration": 0,
                          "depends": [[-1, None]]}]))

    def job(depends=None):
        op = {"OP_ID": "OP_TEST_DELAY", "duration": 1}
        if depends is not None:
            op["depends"] = depends
        return [op]
    jobs = [job(), job([[-1, []]]), job([[-2, ["success"]]]), job([]),
            job([[-2, ["success"]]])]
    answers = ctx.client.submit_many_jobs(jobs)
    if not all(ok for ok, _ in answers):
        raise JobQueueTestFailed("Submitting dependent jobs failed: %s"
                                 % answers)
    ids = [value for _, value in answers]
    for job_id in ids:
        ctx.poll_job(job_id, quiet=True)
    rows = ctx.client.query_jobs(ids, ["id", "opexec", "ops"])
    opexec = [row[1][0] for row in rows]
    deps = [row[2][0].get("depends") for row in rows]
    for idx, target in ((1, 0), (2, 0), (4, 2)):
        if not deps[idx] or deps[idx][0][0] != ids[target]:
            raise JobQueueTestFailed("Job %s's opcode doesn't depend on job"
                                     " %s" % (ids[idx], ids[target]))
    if not (opexec[0] <= opexec[1] and opexec[0] <= opexec[2] and
            opexec[2] <= opexec[4]):
        raise JobQueueTestFailed("Jobs did not run in the right order: %s"
                                 % rows)
    ctx.out("Job dependency tests were successful")


def _test_modes(ctx):
    modes = (("Testing job success", [False], ["success"]),
             ("Testing multiple successful opcodes", [False, False],
              ["success", "success"]),
             ("Testing job failure", [True], ["error"]),
             ("Testing partial job failure", [False, False, True, False],
              ["success", "success", "error", "error"]))
    for idx, (title, fails, expect_status) in enumerate(modes):
        ctx.out(title)
        messages = ["Testing mode %s" % idx, "Hello World", "A", "", "B",
                    "Foo|bar|baz", time.strftime("%Y-%m-%d_%H_%M_%S")]
        ops = [ctx.opcode("OP_TEST_JQUEUE", notify_waitlock=True,
                          notify_exec=True, log_messages=messages,
                          fail=fail) for fail in fails]
        job_id = ctx.submit(ops)
        reporter = _JobQueueReporter(ctx, job_id)
        failed = any(fails)
        try:
            results = ctx.poll_job(job_id, on_entry=reporter)
        except JobQueueTestFailed:
            raise
        except errors.OpExecError as err:
            if not failed:
                raise
            ctx.out("Ignoring error for 'job fail' test: %s" % err)
            results = None
        else:
            if failed:
                raise JobQueueTestFailed("Job %s didn't fail when it should"
                                         % job_id)
        ran = fails.index(True) + 1 if failed else len(fails)
        if not failed and len(results) != len(fails):
            raise JobQueueTestFailed("Received %d results, expected %d"
                                     % (len(results), len(fails)))
        if reporter.messages != messages * ran:
            raise JobQueueTestFailed(
                "Received test messages don't match input (input %r,"
                " received %r)" % (messages * ran, reporter.messages))
        status, opstatus = ctx.client.query_jobs(
            [job_id], ["status", "opstatus"])[0]
        want = "error" if failed else "success"
        if status != want or opstatus != expect_status:
            raise JobQueueTestFailed(
                "Job %s ended %s %s, expected %s %s"
                % (job_id, status, opstatus, want, expect_status))


@commands.command("test-jobqueue", opts=[base.PRIORITY_OPT],
                  help="test the job queue: refused submissions, dependent"
                  " jobs, and OP_TEST_JQUEUE jobs talking to this command")
def test_jobqueue(ctx, opts):
    _test_submission(ctx)
    _test_dependencies(ctx)
    _test_modes(ctx)
    ctx.out("Job queue test successful")


@commands.command(
    "test-osparams",
    opts=[Opt("--os-parameters-secret", dest="osparams_secret",
              metavar="KEY=VAL", help="the secret OS parameters to send")]
    + base.JOB_OPTS,
    help="send secret OS parameters to the master (OP_TEST_OS_PARAMS);"
    " their values show nowhere")
def test_osparams(ctx, opts):
    params = None
    if opts.osparams_secret is not None:
        params = common.parse_keyval(opts.osparams_secret,
                                     "--os-parameters-secret")
    ctx.run_op(ctx.opcode("OP_TEST_OS_PARAMS", osparams_secret=params))


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
