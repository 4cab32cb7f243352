"""The query filter language: list form (the wire form) and text form.

A filter is a JSON list whose first element is an operator::

    ["&", ["=", "name", "inst1"], ["!", ["?", "admin_up"]]]

Logic operators ``|`` and ``&`` take any number of sub-filters, ``!`` takes
one sub-filter, ``?`` takes one field name (true when the field's value is
truthy), and the binary operators take a field name and a value:

    ==  =   equal (``=`` is the older spelling); on host-name fields ``node1``
            also equals ``node1.example.com``
    !=      not equal
    <  <=  >  >=   ordering (numbers with numbers, strings with strings)
    =~      regular expression search (Python ``re`` syntax) in a string value
    =[]     "contains": the field (a list) has the value as an element; on a
            string field, the value is a substring

:func:`compile_filter` checks a filter against the fields of a resource and
turns it into a predicate.  Filter problems raise
:class:`errors.QueryFilterParseError` naming the operator, the field or the
value at fault.

The predicate works in three-valued logic so the query engine can run a
filter *before* it has fetched live data from the nodes: a field whose value
is not known yet yields :data:`UNDECIDED`, and an item is dropped early only
when the filter is false whatever that value turns out to be.

:func:`parse_filter` reads the text form used by the command line, e.g.
``name == "x" and not offline`` or ``"tag1" in tags or name =~ m/^web/i``.
"""

import re

from ganeti import errors

OP_OR = "|"
OP_AND = "&"
OP_NOT = "!"
OP_TRUE = "?"
OP_EQUAL = "=="
OP_EQUAL_LEGACY = "="
OP_NOT_EQUAL = "!="
OP_LT = "<"
OP_LE = "<="
OP_GT = ">"
OP_GE = ">="
OP_REGEXP = "=~"
OP_CONTAINS = "=[]"

LOGIC_OPS = frozenset([OP_OR, OP_AND])
UNARY_OPS = frozenset([OP_NOT, OP_TRUE])
BINARY_OPS = frozenset([OP_EQUAL, OP_EQUAL_LEGACY, OP_NOT_EQUAL, OP_LT,
                        OP_LE, OP_GT, OP_GE, OP_REGEXP, OP_CONTAINS])
ALL_OPS = LOGIC_OPS | UNARY_OPS | BINARY_OPS

#: Filters may nest this deep at most
MAX_DEPTH = 10

#: Characters that make a command line argument a filter, not a name
FILTER_DETECTION_CHARS = frozenset(" \t\n\v\f\r!\"'()/<=>\\~")
#: Characters that make a command line argument a glob pattern
GLOB_DETECTION_CHARS = frozenset("*?")

# Field kinds (the "kind" of a field definition, as on the wire)
QFT_UNKNOWN = "unknown"
QFT_TEXT = "text"
QFT_BOOL = "bool"
QFT_NUMBER = "number"
QFT_NUMBER_FLOAT = "float"
QFT_UNIT = "unit"
QFT_TIMESTAMP = "timestamp"
QFT_OTHER = "other"

# Field flags that change how values compare
FF_HOSTNAME = "hostname"        # "=" also matches the first name components
FF_SPLIT_TIMESTAMP = "split_ts"  # value is [sec, usec]; compare as seconds
FF_JOB_ID = "job_id"            # job ids may be given as numeric strings


class _Marker(object):
    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return self._name


#: What a value fetcher returns for a field whose value exists but is not
#: normal (offline node, no data, unavailable): every comparison is false.
NO_VALUE = _Marker("NO_VALUE")
#: What a value fetcher returns for a value not known yet (live data not
#: fetched); also what a predicate returns when the outcome depends on it.
UNDECIDED = _Marker("UNDECIDED")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_timestamp_value(value):
    return _is_number(value) or (
        isinstance(value, (list, tuple)) and len(value) == 2
        and all(_is_int(v) for v in value))


_VALUE_CHECKS = {
    QFT_TEXT: (lambda v: isinstance(v, str), "a string"),
    QFT_BOOL: (lambda v: isinstance(v, bool), "a boolean"),
    QFT_NUMBER: (_is_int, "an integer"),
    QFT_NUMBER_FLOAT: (_is_number, "a number"),
    QFT_UNIT: (_is_int, "an integer (MiB)"),
    QFT_TIMESTAMP: (_is_number, "a number (seconds since the epoch)"),
    QFT_OTHER: (lambda v: True, "any value"),
}


def _describe(filter_part):
    text = repr(filter_part)
    return text if len(text) <= 80 else text[:77] + "..."


def _fail(message):
    raise errors.QueryFilterParseError(message)


# --- host names and sorting -------------------------------------------------

def match_hostname(name, key):
    """True if ``key`` names host ``name``: equal, or its leading components.

    ``node1`` names ``node1.example.com``; comparison ignores case.
    """
    if not isinstance(name, str) or not isinstance(key, str):
        return False
    name = name.lower()
    key = key.lower()
    return name == key or (name.startswith(key) and
                           name[len(key):len(key) + 1] == ".")


_NICE_RE = re.compile(r"(\d+)")


def nice_sort_key(value):
    """Sort key putting ``node2`` before ``node10`` (digit runs as numbers)."""
    parts = _NICE_RE.split(str(value))
    key = []
    for i, part in enumerate(parts):
        if i % 2:
            key.append((0, int(part), part))
        elif part:
            key.append((1, 0, part))
    return tuple(key)


def nice_sort(values, key=None):
    if key is None:
        return sorted(values, key=nice_sort_key)
    return sorted(values, key=lambda v: nice_sort_key(key(v)))


# --- compiling list filters --------------------------------------------------

def _merge_split_time(value):
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return value[0] + value[1] / 1000000.0
    return value


def _job_id(value):
    if _is_int(value):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _safe(fn):
    def wrapper(lhs, rhs):
        try:
            return bool(fn(lhs, rhs))
        except TypeError:
            return False
    return wrapper


def _contains(lhs, rhs):
    if isinstance(lhs, (list, tuple)):
        return rhs in lhs
    if isinstance(lhs, str):
        return isinstance(rhs, str) and rhs in lhs
    if isinstance(lhs, dict):
        return rhs in lhs
    return False


def _equal(lhs, rhs):
    if isinstance(lhs, bool) != isinstance(rhs, bool):
        return False  # 1 == True must not hold across kinds
    return lhs == rhs


_ORDERINGS = {
    OP_LT: lambda a, b: a < b,
    OP_LE: lambda a, b: a <= b,
    OP_GT: lambda a, b: a > b,
    OP_GE: lambda a, b: a >= b,
}


def _and(preds, fetch):
    undecided = False
    for pred in preds:
        result = pred(fetch)
        if result is False:
            return False
        if result is UNDECIDED:
            undecided = True
    return UNDECIDED if undecided else True


def _or(preds, fetch):
    undecided = False
    for pred in preds:
        result = pred(fetch)
        if result is True:
            return True
        if result is UNDECIDED:
            undecided = True
    return UNDECIDED if undecided else False


class Compiled(object):
    """A checked filter: call it with a fetcher to evaluate it for one item.

    ``fetch(field)`` must return the field's value, :data:`NO_VALUE` or
    :data:`UNDECIDED`; the call returns True, False or :data:`UNDECIDED`.
    ``fields`` are the fields the filter reads.
    """

    def __init__(self, pred, fields):
        self._pred = pred
        self.fields = fields

    def __call__(self, fetch):
        return self._pred(fetch)


def compile_filter(qfilter, lookup):
    """Check ``qfilter`` and return a :class:`Compiled` predicate, or None.

    ``lookup(name)`` returns the field (an object with ``name``, ``kind``
    and ``flags``) or None for an unknown name.  A None filter means "every
    item" and compiles to None.
    """
    if qfilter is None:
        return None
    used = []
    pred = _compile(qfilter, lookup, 0, used)
    return Compiled(pred, used)


def _compile(part, lookup, depth, used):
    if depth >= MAX_DEPTH:
        _fail("Query filter is nested too deeply (at most %d levels)"
              % MAX_DEPTH)
    if not isinstance(part, (list, tuple)) or not part:
        _fail("Query filter must be a non-empty list (operator first),"
              " got %s" % _describe(part))
    op = part[0]
    operands = list(part[1:])
    if not isinstance(op, str) or op not in ALL_OPS:
        _fail("Unknown query filter operator %s in %s; known operators: %s"
              % (_describe(op), _describe(part), " ".join(sorted(ALL_OPS))))
    if op in LOGIC_OPS:
        preds = [_compile(sub, lookup, depth + 1, used) for sub in operands]
        combine = _and if op == OP_AND else _or
        return lambda fetch: combine(preds, fetch)
    if op in UNARY_OPS:
        if len(operands) != 1:
            _fail("Operator '%s' takes exactly one operand, got %d in %s"
                  % (op, len(operands), _describe(part)))
        if op == OP_NOT:
            inner = _compile(operands[0], lookup, depth + 1, used)

            def negate(fetch):
                result = inner(fetch)
                return result if result is UNDECIDED else not result
            return negate
        field = _field(op, operands[0], lookup, used)

        def truth(fetch):
            value = fetch(field)
            if value is UNDECIDED:
                return UNDECIDED
            if value is NO_VALUE:
                return False
            return bool(value)
        return truth
    if len(operands) != 2:
        _fail("Operator '%s' takes a field name and a value, got %d"
              " operand(s) in %s" % (op, len(operands), _describe(part)))
    field = _field(op, operands[0], lookup, used)
    return _binary(op, field, operands[1])


def _field(op, name, lookup, used):
    if not isinstance(name, str):
        _fail("Operator '%s' needs a field name, got %s"
              % (op, _describe(name)))
    field = lookup(name)
    if field is None or field.kind == QFT_UNKNOWN:
        _fail("Unknown field '%s' in query filter (operator '%s')"
              % (name, op))
    if field not in used:
        used.append(field)
    return field


def _binary(op, field, value):
    flags = field.flags
    if op == OP_REGEXP:
        if not isinstance(value, str):
            _fail("Operator '=~' on field '%s' needs a regular expression"
                  " string, got %s" % (field.name, _describe(value)))
        try:
            regex = re.compile(value)
        except re.error as err:
            _fail("Invalid regular expression %r for field '%s': %s"
                  % (value, field.name, err))
        test = lambda lhs, rhs: isinstance(lhs, str) and \
            regex.search(lhs) is not None
    elif op == OP_CONTAINS:
        # The value is an element of a list field: no kind check applies.
        test = _safe(_contains)
    else:
        if FF_JOB_ID in flags:
            converted = _job_id(value)
            if converted is None:
                _fail("Field '%s' holds job ids; %s is not a job id"
                      % (field.name, _describe(value)))
            value = converted
        elif FF_SPLIT_TIMESTAMP in flags:
            if not _is_timestamp_value(value):
                _fail("Field '%s' holds timestamps; cannot compare it with %s"
                      % (field.name, _describe(value)))
            value = _merge_split_time(value)
        else:
            check, expected = _VALUE_CHECKS.get(field.kind,
                                                _VALUE_CHECKS[QFT_OTHER])
            if not check(value):
                _fail("Cannot compare field '%s' (kind '%s') with %s using"
                      " '%s': expected %s"
                      % (field.name, field.kind, _describe(value), op,
                         expected))
        if op in (OP_EQUAL, OP_EQUAL_LEGACY, OP_NOT_EQUAL):
            if FF_HOSTNAME in flags:
                base = lambda lhs, rhs: match_hostname(lhs, rhs)
            else:
                base = _equal
            if op == OP_NOT_EQUAL:
                test = lambda lhs, rhs, base=base: not base(lhs, rhs)
            else:
                test = base
        else:
            test = _safe(_ORDERINGS[op])
        if FF_SPLIT_TIMESTAMP in flags:
            inner_test = test
            test = lambda lhs, rhs: inner_test(_merge_split_time(lhs), rhs)

    def evaluate(fetch):
        lhs = fetch(field)
        if lhs is UNDECIDED:
            return UNDECIDED
        if lhs is NO_VALUE:
            return False
        return test(lhs, value)
    return evaluate


def requested_names(qfilter, namefield="name"):
    """Names a pure name filter asks for, or None for any other filter.

    A pure name filter is ``[OP_EQUAL, namefield, x]`` or an ``|`` of such
    (what :func:`make_simple_filter` builds); the engine then looks the
    names up instead of scanning every item.
    """
    if not isinstance(qfilter, (list, tuple)) or not qfilter:
        return None

    def one(part):
        if (isinstance(part, (list, tuple)) and len(part) == 3
                and part[0] in (OP_EQUAL, OP_EQUAL_LEGACY)
                and part[1] == namefield):
            return part[2]
        raise ValueError
    try:
        if qfilter[0] == OP_OR:
            names = [one(p) for p in qfilter[1:]]
        else:
            names = [one(qfilter)]
    except ValueError:
        return None
    result = []
    for name in names:
        if name not in result:
            result.append(name)
    return result


# --- building filters for the command line ----------------------------------

def make_simple_filter(namefield, values):
    """``["|", ["=", namefield, v1], ...]``, or None without values."""
    if values:
        return [OP_OR] + [[OP_EQUAL, namefield, v] for v in values]
    return None


def dns_glob_to_regex(pattern):
    """Regular expression for a host name glob such as ``*.site``.

    ``*`` matches any run of characters within one name component, ``?`` one
    character other than a dot; the pattern also matches a longer name with
    more components after it.
    """
    out = []
    for char in pattern:
        if char == "*":
            out.append("[^.]*")
        elif char == "?":
            out.append("[^.]")
        else:
            out.append(re.escape(char))
    return r"^%s(\..*)?$" % "".join(out)


def is_filter_text(text):
    return bool(set(text) & FILTER_DETECTION_CHARS)


def is_glob(text):
    return bool(set(text) & GLOB_DETECTION_CHARS)


def make_filter(args, force_filter=False, namefield="name", isnumeric=False):
    """Turn a list command's arguments into a filter (or None).

    One argument that looks like a filter expression (or any argument with
    ``force_filter``) is parsed with :func:`parse_filter`; otherwise every
    argument is a name, a glob pattern, or (``isnumeric``) a number.
    """
    args = list(args or [])
    if force_filter or (len(args) == 1 and is_filter_text(args[0])):
        if len(args) != 1:
            raise errors.OpPrereqError(
                "Exactly one argument must be given as a filter",
                errors.ECODE_INVAL)
        return parse_filter(args[0])
    if not args:
        return None
    parts = []
    for arg in args:
        if isnumeric:
            try:
                parts.append([OP_EQUAL, namefield, int(arg)])
            except ValueError:
                raise errors.OpPrereqError("Invalid job ID passed: %r" % arg,
                                           errors.ECODE_INVAL)
        elif is_glob(arg):
            parts.append([OP_REGEXP, namefield, dns_glob_to_regex(arg)])
        else:
            parts.append([OP_EQUAL, namefield, arg])
    return [OP_OR] + parts


# --- the text form ----------------------------------------------------------

_FIELD_RE = re.compile(r"[A-Za-z][A-Za-z0-9_/.]*")
_NUMBER_RE = re.compile(r"[-+]?[0-9]+(?![A-Za-z0-9_])")
_KEYWORDS = frozenset(["and", "or", "not", "in"])
_BINOPS = [  # longest first
    ("==", OP_EQUAL), ("!=", OP_NOT_EQUAL), ("<=", OP_LE), (">=", OP_GE),
    ("=", OP_EQUAL), ("<", OP_LT), (">", OP_GT),
]
_REGEX_DELIMS = "/#^|"
_REGEX_FLAGS = frozenset("si")


class _TextParser(object):
    """Recursive descent over the text form.

    expr      := and_expr ("or" and_expr)*
    and_expr  := not_expr ("and" not_expr)*
    not_expr  := "not" not_expr | "(" expr ")" | condition
    condition := field binop value | field ("=~"|"!~") regex
               | field ("=*"|"!*") string | value ["not"] "in" field | field
    value     := integer | "string" | 'string'
    regex     := [m]/.../[flags] (delimiters / # ^ |; flags i, s)
    """

    def __init__(self, text):
        self.text = text
        self.pos = 0

    def error(self, message, pos=None):
        pos = self.pos if pos is None else pos
        raise errors.QueryFilterParseError(
            "Failed to parse query filter '%s': %s at position %d"
            % (self.text, message, pos + 1))

    def skip_ws(self):
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def at_end(self):
        self.skip_ws()
        return self.pos >= len(self.text)

    def peek_word(self):
        self.skip_ws()
        m = _FIELD_RE.match(self.text, self.pos)
        return m.group(0) if m else None

    def keyword(self, word):
        """Consume ``word`` if it is next as a whole word."""
        self.skip_ws()
        m = _FIELD_RE.match(self.text, self.pos)
        if m and m.group(0) == word:
            self.pos = m.end()
            return True
        return False

    def literal(self, token):
        self.skip_ws()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def parse(self):
        if self.at_end():
            self.error("empty filter")
        result = self.expr()
        if not self.at_end():
            self.error("unexpected text %r"
                       % self.text[self.pos:self.pos + 20])
        return result

    def expr(self):
        parts = [self.and_expr()]
        while self.keyword("or"):
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else [OP_OR] + parts

    def and_expr(self):
        parts = [self.not_expr()]
        while self.keyword("and"):
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else [OP_AND] + parts

    def not_expr(self):
        if self.keyword("not"):
            return [OP_NOT, self.not_expr()]
        if self.literal("("):
            inner = self.expr()
            if not self.literal(")"):
                self.error("missing ')'")
            return inner
        return self.condition()

    def value(self):
        """A quoted string or an integer, or None if neither is next."""
        self.skip_ws()
        if self.pos >= len(self.text):
            return None
        char = self.text[self.pos]
        if char in "\"'":
            return self.quoted()
        m = _NUMBER_RE.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return int(m.group(0))
        return None

    def quoted(self):
        quote = self.text[self.pos]
        start = self.pos
        self.pos += 1
        out = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "\\" and self.pos + 1 < len(self.text):
                out.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            if char == quote:
                self.pos += 1
                return "".join(out)
            out.append(char)
            self.pos += 1
        self.error("unterminated string", start)

    def field_name(self):
        self.skip_ws()
        m = _FIELD_RE.match(self.text, self.pos)
        if not m or m.group(0) in _KEYWORDS:
            self.error("expected a field name")
        self.pos = m.end()
        return m.group(0)

    def regex(self):
        self.skip_ws()
        start = self.pos
        if self.text.startswith("m", self.pos) and \
                self.text[self.pos + 1:self.pos + 2] in tuple(_REGEX_DELIMS):
            self.pos += 1
        if self.pos >= len(self.text) or \
                self.text[self.pos] not in _REGEX_DELIMS:
            self.error("expected a regular expression such as /pattern/"
                       " (delimiters: %s)" % " ".join(_REGEX_DELIMS))
        delim = self.text[self.pos]
        self.pos += 1
        out = []
        while True:
            if self.pos >= len(self.text):
                self.error("unterminated regular expression", start)
            char = self.text[self.pos]
            if char == "\\" and self.text[self.pos + 1:self.pos + 2] == delim:
                out.append(delim)
                self.pos += 2
                continue
            if char == delim:
                self.pos += 1
                break
            out.append(char)
            self.pos += 1
        m = re.compile(r"[A-Za-z]*").match(self.text, self.pos)
        flags = m.group(0)
        self.pos = m.end()
        unknown = set(flags) - _REGEX_FLAGS
        if unknown:
            self.error("unknown regular expression flag(s) '%s' (known: i, s)"
                       % "".join(sorted(unknown)))
        pattern = "".join(out)
        if flags:
            pattern = "(?%s)%s" % ("".join(sorted(set(flags))), pattern)
        try:
            re.compile(pattern)
        except re.error as err:
            self.error("invalid regular expression (%s)" % err, start)
        return pattern

    def condition(self):
        self.skip_ws()
        start = self.pos
        value = self.value()
        if value is not None:
            negate = self.keyword("not")
            if not self.keyword("in"):
                self.error("expected 'in' after the value %r" % (value,))
            cond = [OP_CONTAINS, self.field_name(), value]
            return [OP_NOT, cond] if negate else cond
        name = self.field_name()
        self.skip_ws()
        for token, negate in (("=~", False), ("!~", True)):
            if self.literal(token):
                cond = [OP_REGEXP, name, self.regex()]
                return [OP_NOT, cond] if negate else cond
        for token, negate in (("=*", False), ("!*", True)):
            if self.literal(token):
                self.skip_ws()
                if self.pos >= len(self.text) or \
                        self.text[self.pos] not in "\"'":
                    self.error("expected a quoted glob pattern")
                cond = [OP_REGEXP, name, dns_glob_to_regex(self.quoted())]
                return [OP_NOT, cond] if negate else cond
        for token, op in _BINOPS:
            if self.literal(token):
                rhs = self.value()
                if rhs is None:
                    self.error("expected a number or a quoted string after"
                               " '%s'" % token)
                return [op, name, rhs]
        if start == self.pos:
            self.error("expected a condition")
        return [OP_TRUE, name]


def parse_filter(text):
    """Parse the text form of a filter into the list form."""
    if not isinstance(text, str):
        raise errors.QueryFilterParseError(
            "Query filter text must be a string, got %s"
            % type(text).__name__)
    return _TextParser(text).parse()
