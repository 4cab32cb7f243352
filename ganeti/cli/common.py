"""What every gnt-* command shares: parsing, tables, jobs, errors.

Command-line tools are short-lived clients, so they talk to the master with
the blocking luxi client; the Twisted code lives in the daemons.
"""

import json
import os
import re
import sys
import time

from ganeti import errors

EXIT_SUCCESS = 0
EXIT_FAILURE = 1
EXIT_NOTCLUSTER = 5
EXIT_NOTMASTER = 11

_UNIT_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
_DIGITS_RE = re.compile(r"([0-9]+)")


def nice_sort(names):
    """Names sorted with their numbers compared as numbers (``node2``
    before ``node10``), as Ganeti's listings are."""
    def key(name):
        return [(0, int(part), "") if part.isdigit() else (1, 0, part)
                for part in _DIGITS_RE.split(str(name)) if part]
    return sorted(names, key=key)


def parse_unit(text):
    """A size in MiB from ``512``, ``512M``, ``1.5G``, ``2T``.

    No unit means MiB; the result is rounded up to a multiple of 4 MiB, as
    Ganeti does.
    """
    m = _UNIT_RE.match(str(text))
    if not m:
        raise errors.UnitParseError("invalid size '%s' (expected a number"
                                    " with an optional unit M, G or T)"
                                    % text)
    value = float(m.group(1))
    unit = m.group(2).lower() or "m"
    factor = {"m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024, "gib": 1024,
              "t": 1024 ** 2, "tb": 1024 ** 2, "tib": 1024 ** 2}.get(unit)
    if factor is None:
        raise errors.UnitParseError("unknown unit '%s' in size '%s'"
                                    % (m.group(2), text))
    value *= factor
    result = int(value) + (1 if int(value) < value else 0)
    if result % 4:
        result += 4 - result % 4
    return result


def format_unit(mib, units="h"):
    """MiB as text: ``h`` picks M/G/T; ``m``, ``g``, ``t`` force one."""
    if mib is None:
        return "?"
    if units == "h":
        for suffix, factor in (("T", 1024 ** 2), ("G", 1024)):
            if mib >= factor:
                return "%.1f%s" % (mib / float(factor), suffix)
        return "%dM" % mib
    factor = {"m": 1, "g": 1024, "t": 1024 ** 2}[units]
    return "%.1f" % (mib / float(factor)) if factor > 1 else "%d" % mib


def parse_keyval(text, option="option"):
    """``memory=512M,vcpus=2,no_acpi,-kernel_path`` as a dict.

    ``key`` alone means True, ``no_key`` False, ``-key`` None (go back to
    the default).  Values stay strings; the opcode's types decide.
    """
    result = {}
    if text is None or text == "":
        return result
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" in item:
            key, value = item.split("=", 1)
        elif item.startswith("no_"):
            key, value = item[3:], False
        elif item.startswith("-"):
            key, value = item[1:], None
        else:
            key, value = item, True
        key = key.strip()
        if not key:
            raise errors.ParameterError(
                option, "empty parameter name in '%s'" % text)
        if key in result:
            raise errors.ParameterError(
                option, "parameter '%s' given twice" % key)
        result[key] = value
    return result


def parse_ident_keyval(text, option="option"):
    """``0:size=1G,mode=rw`` as ``("0", {"size": "1G", "mode": "rw"})``."""
    if ":" in text:
        ident, rest = text.split(":", 1)
    else:
        ident, rest = text, ""
    if not ident:
        raise errors.ParameterError(option, "missing identifier in '%s'"
                                    % text)
    return ident, parse_keyval(rest, option)


def coerce_values(params, sizes=(), ints=(), bools=()):
    """Turn the string values of ``params`` into the types opcodes want."""
    result = dict(params)
    for key, value in params.items():
        if value is None or isinstance(value, bool):
            continue
        try:
            if key in sizes:
                result[key] = parse_unit(value)
            elif key in ints:
                result[key] = int(value)
            elif key in bools and isinstance(value, str):
                low = value.lower()
                if low not in ("true", "false", "yes", "no", "1", "0"):
                    raise ValueError(value)
                result[key] = low in ("true", "yes", "1")
        except (ValueError, errors.UnitParseError) as err:
            raise errors.ParameterError(key, "invalid value '%s' (%s)"
                                        % (value, err))
    return result


def format_table(headers, rows, separator=None, no_headers=False,
                 numeric=()):
    """Lines of a table: aligned columns, or joined by ``separator``.

    ``numeric`` columns (by index) are right-aligned.
    """
    text_rows = [["" if v is None else str(v) for v in row] for row in rows]
    if separator is not None:
        out = [] if no_headers else [separator.join(headers)]
        return out + [separator.join(r) for r in text_rows]
    all_rows = ([] if no_headers else [list(headers)]) + text_rows
    if not all_rows:
        return []
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(headers))]
    out = []
    for row in all_rows:
        cells = []
        for i, cell in enumerate(row):
            if i in numeric:
                cells.append(cell.rjust(widths[i]))
            elif i == len(row) - 1:
                cells.append(cell)
            else:
                cells.append(cell.ljust(widths[i]))
        out.append(" ".join(cells).rstrip())
    return out


def select_fields(default, spec):
    """The ``-o`` option: ``a,b`` replaces the defaults, ``+a,b`` adds."""
    if not spec:
        return list(default)
    if spec.startswith("+"):
        return list(default) + [f for f in spec[1:].split(",") if f]
    return [f for f in spec.split(",") if f]


def make_reason(program, subcommand):
    return [["gnt:client:%s" % program, subcommand, time.time_ns()]]


def format_error(err):
    """The message a user sees for an error, and the exit code."""
    if isinstance(err, errors.OpPrereqError):
        args = list(err.args)
        msg = "Failure: prerequisites not met for this operation:\n"
        if len(args) >= 2 and args[1] in errors.ECODE_ALL:
            msg += "error type: %s, error details:\n%s" % (args[1], args[0])
        else:
            msg += str(args[0] if args else err)
        return msg, EXIT_FAILURE
    if isinstance(err, errors.OpExecError):
        return ("Failure: command execution error:\n%s"
                % (err.args[0] if err.args else err)), EXIT_FAILURE
    if isinstance(err, errors.TagError):
        return "Failure: invalid tag(s) given:\n%s" % err, EXIT_FAILURE
    if isinstance(err, errors.JobQueueDrainError):
        return ("Failure: the job queue is marked for drain and doesn't"
                " accept new requests"), EXIT_FAILURE
    if isinstance(err, errors.ParameterError):
        if len(err.args) >= 2:
            return ("Failure: invalid value for %s: %s"
                    % (err.args[0], err.args[1])), EXIT_FAILURE
        return "Failure: %s" % err, EXIT_FAILURE
    if isinstance(err, errors.GenericError):
        return "Failure: %s" % (err.args[0] if err.args else
                                type(err).__name__), EXIT_FAILURE
    return "Unhandled error: %s" % (err,), EXIT_FAILURE


def print_json(value, stream=None):
    stream = stream or sys.stdout
    stream.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


def root_from_env(option_value=None):
    """--root, else GANETI_ROOTDIR, else / (a normal installation)."""
    return option_value or os.environ.get("GANETI_ROOTDIR") or "/"
