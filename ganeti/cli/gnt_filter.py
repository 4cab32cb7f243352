"""gnt-filter: job filter rules (add, replace, delete, info, list,
list-fields); see docs/filters.rst."""

import json
import re

from ganeti import errors
from ganeti import jobfilter
from ganeti.cli import base
from ganeti.cli.base import Opt

PROGRAM = "gnt-filter"
commands = base.CommandTable(PROGRAM, "Job filter rule administration.")

LIST_FIELDS = list(jobfilter.FIELDS)


def _json(value):
    return json.dumps(value) if value is not None else "-"


FORMATTERS = {
    "predicates": _json,
    "action": lambda value: (value if isinstance(value, str)
                             else _json(value)),
    "reason_trail": _json,
}

base.list_command(commands, "filter", LIST_FIELDS, "list job filter rules",
                  "UUID", "rules to show (UUIDs, or one filter)",
                  namefield="uuid", formatters=FORMATTERS)


def parse_action(text):
    """``ACCEPT``, ``PAUSE``, ``REJECT``, ``CONTINUE``, ``RATE_LIMIT n`` or
    the JSON form ``["RATE_LIMIT", n]`` (the master checks the value)."""
    text = text.strip()
    match = re.match(r"^RATE_LIMIT\s+(\S+)$", text)
    if match:
        try:
            return [jobfilter.RATE_LIMIT, int(match.group(1))]
        except ValueError:
            raise errors.ParameterError(
                "--action", "RATE_LIMIT needs a number of jobs, got %r"
                % match.group(1))
    if text.startswith("["):
        try:
            return json.loads(text)
        except ValueError as err:
            raise errors.ParameterError("--action", "invalid JSON: %s"
                                        % err)
    return text


def parse_predicates(text):
    try:
        value = json.loads(text)
    except ValueError as err:
        raise errors.ParameterError("--predicates", "invalid JSON: %s" % err)
    if not isinstance(value, list):
        raise errors.ParameterError("--predicates", "expected a JSON list of"
                                    " predicates, got %s" % text)
    return value


RULE_OPTS = [
    Opt("--priority", type=int, default=0, metavar="N",
        help="rules apply in increasing priority (a non-negative integer;"
        " default 0)"),
    Opt("--predicates", default="[]", metavar="JSON",
        help="what a job must match, a JSON list of [\"jobid\", FILTER],"
        " [\"opcode\", FILTER] or [\"reason\", FILTER] (FILTER in the query"
        " language); default: every job"),
    Opt("--action", default=jobfilter.CONTINUE, metavar="ACTION",
        help="ACCEPT, PAUSE, REJECT, CONTINUE (default) or 'RATE_LIMIT n'"),
    base.REASON_OPT,
]


def _replace(ctx, opts, uuid):
    result = ctx.client.replace_filter(
        uuid, opts.priority, parse_predicates(opts.predicates),
        parse_action(opts.action), ctx.reason_trail())
    ctx.out(result)


@commands.command("add", opts=RULE_OPTS,
                  help="add a job filter rule (prints its UUID)")
def add(ctx, opts):
    _replace(ctx, opts, None)


@commands.command("replace", opts=RULE_OPTS,
                  args=[Opt("uuid", metavar="UUID",
                            help="the rule to replace (created if unknown)")],
                  help="replace a job filter rule, or add it under this"
                  " UUID")
def replace(ctx, opts):
    _replace(ctx, opts, opts.uuid)


@commands.command("delete", args=[Opt("uuid", metavar="UUID")],
                  help="remove a job filter rule")
def delete(ctx, opts):
    ctx.client.delete_filter(opts.uuid)


@commands.command("info", args=[Opt("uuids", nargs="*", metavar="UUID",
                                    help="rules to show (default: all)")],
                  help="show job filter rules")
def info(ctx, opts):
    rows = ctx.client.query_filters(opts.uuids or None, LIST_FIELDS)
    for (uuid, watermark, priority, predicates, action, reason) in rows:
        ctx.out("UUID: %s" % uuid)
        ctx.out("  Watermark: %s" % watermark)
        ctx.out("  Priority: %s" % priority)
        ctx.out("  Predicates: %s" % _json(predicates))
        ctx.out("  Action: %s" % FORMATTERS["action"](action))
        ctx.out("  Reason trail: %s" % _json(reason))


def main(argv=None):
    commands.main(argv)


if __name__ == "__main__":
    main()
