"""Type checks of JSON values ("ht", Ganeti's name for them).

One small language describes every value that arrives over the wire:
opcode parameters (:mod:`ganeti.opcodes`), luxi method arguments
(:mod:`ganeti.luxi`) and node daemon procedure arguments
(:mod:`ganeti.server.noded.procedure`).  A type is a :class:`Type` object::

    maybe(list_of(NESTR))          # null or a list of non-empty strings
    dict_of(STR, either(INT, STR))
    tuple_of(NONNEG_INT, one_of("add", "remove"))

``check(value)`` returns the value in its normal JSON form (tuples become
lists, integers given for a FLOAT become floats) or raises :class:`Invalid`
with a reason that says what was expected and what came.  The caller adds
the name of the parameter or argument, and decides which error the
protocol answers with.
"""

import copy
import ipaddress
import math

# What a redacting dump shows instead of a private or secret value.
REDACTED = "<redacted>"

#: ``redact`` of :meth:`Type.dump` hiding secret values only (what is
#: written to disk); ``True`` hides private and secret values (answers,
#: logs), ``False`` nothing.  A function ``redact(value, secret)`` is
#: given each private value instead and its result is shown.
HIDE_SECRETS = "secrets"

#: Every integer fits in 64 bits (signed), as in Ganeti's config and tools.
INT_MIN = -2 ** 63
INT_MAX = 2 ** 63 - 1


class Invalid(ValueError):
    """A value does not have the expected type.

    ``reason`` does not name the parameter; the caller prefixes it.
    ``depth`` counts the containers (items, keys) the problem is inside: a
    deep problem explains more than "expected X" when alternatives fail.
    """

    def __init__(self, reason, depth=0):
        ValueError.__init__(self, reason)
        self.reason = reason
        self.depth = depth


def show(value):
    """A value for a message: short, with its type unless obvious."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    if value is None or isinstance(value, (bool, str)):
        return text
    return "%s (%s)" % (text, type(value).__name__)


class Type(object):
    """A checker for one kind of JSON value.

    ``check`` returns the value normalised to its JSON form or raises
    Invalid; ``dump`` gives the JSON form of a checked value (a copy, with
    private or secret values hidden when asked: see :data:`HIDE_SECRETS`).
    """

    desc = "any value"

    def check(self, value):
        return value

    def fail(self, value):
        raise Invalid("expected %s, got %s" % (self.desc, show(value)))

    def dump(self, value, redact=False):
        return copy_value(value)

    def __repr__(self):
        return "<type %s>" % self.desc


#: values deepcopy would hand back as they are
_IMMUTABLE = frozenset([type(None), bool, int, float, str])


def copy_value(value):
    """``copy.deepcopy(value)``, without its cost for the JSON values
    (plain values, lists and string-keyed dicts of them) parameters
    hold."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is list:
        return [copy_value(item) for item in value]
    if kind is dict:
        return {key: copy_value(item) for key, item in value.items()}
    return copy.deepcopy(value)


def _check_number(value, desc):
    """``value`` (an int or a float) as a parameter can hold it: finite,
    integers within 64 bits; Invalid saying why not."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Invalid("expected %s, got %s: not a finite number"
                          % (desc, show(value)))
    elif not INT_MIN <= value <= INT_MAX:
        raise Invalid("expected %s, got %s: out of range (integers must fit"
                      " in 64 bits)" % (desc, show(value)))
    return value


def _item(idx, err):
    return Invalid("item %d: %s" % (idx, err.reason), err.depth + 1)


class _Any(Type):
    """Any JSON value: null, booleans, numbers, strings, lists and objects
    with string keys.  Anything else would not survive the job file."""

    desc = "a JSON value"

    def check(self, value):
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, float)):
            return _check_number(value, self.desc)
        if isinstance(value, (list, tuple)):
            result = []
            for (idx, item) in enumerate(value):
                try:
                    result.append(self.check(item))
                except Invalid as err:
                    raise _item(idx, err)
            return result
        if isinstance(value, dict):
            result = {}
            for (key, item) in value.items():
                if not isinstance(key, str):
                    raise Invalid("key %s: expected a string" % show(key), 1)
                try:
                    result[key] = self.check(item)
                except Invalid as err:
                    raise Invalid("%r: %s" % (key, err.reason),
                                  err.depth + 1)
            return result
        self.fail(value)


class _Bool(Type):
    desc = "a boolean"

    def check(self, value):
        if not isinstance(value, bool):
            self.fail(value)
        return value


def _bounds_desc(noun, low, high):
    if low is not None and high is not None:
        return "%s from %s to %s" % (noun, low, high)
    if low is not None:
        return "%s >= %s" % (noun, low)
    if high is not None:
        return "%s <= %s" % (noun, high)
    return noun


class _Int(Type):
    def __init__(self, low=None, high=None, desc=None):
        self.low, self.high = low, high
        self.desc = desc or _bounds_desc("an integer", low, high)

    def check(self, value):
        # bool is an int subclass in Python, but not in JSON
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(value)
        _check_number(value, self.desc)
        if ((self.low is not None and value < self.low) or
                (self.high is not None and value > self.high)):
            self.fail(value)
        return value


class _Number(Type):
    """An integer or a float, kept as given."""

    def __init__(self, low=None, desc=None):
        self.low = low
        self.desc = desc or _bounds_desc("a number", low, None)

    def check(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(value)
        _check_number(value, self.desc)
        if self.low is not None and value < self.low:
            self.fail(value)
        return value


class _Float(Type):
    desc = "a number"

    def check(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(value)
        return float(_check_number(value, self.desc))


class _Str(Type):
    def __init__(self, nonempty):
        self.nonempty = nonempty
        self.desc = "a non-empty string" if nonempty else "a string"

    def check(self, value):
        if not isinstance(value, str) or (self.nonempty and not value):
            self.fail(value)
        return value


class _OneOf(Type):
    def __init__(self, values):
        self.values = frozenset(values)
        self.desc = "one of %s" % ", ".join(
            repr(v) for v in sorted(self.values, key=repr))

    def check(self, value):
        # compare types too, so that True does not pass for 1
        if not any(type(value) is type(v) and value == v
                   for v in self.values):
            self.fail(value)
        return value


class _Maybe(Type):
    def __init__(self, inner):
        self.inner = inner
        self.desc = "null or %s" % inner.desc

    def check(self, value):
        if value is None:
            return None
        try:
            return self.inner.check(value)
        except Invalid as err:
            if err.depth:
                raise
            self.fail(value)

    def dump(self, value, redact=False):
        return None if value is None else self.inner.dump(value, redact)


class _ListOf(Type):
    def __init__(self, item, nonempty=False):
        self.item = item
        self.nonempty = nonempty
        self.desc = "a %slist of %s" % ("non-empty " if nonempty else "",
                                        _plural(item.desc))

    def check(self, value):
        if not isinstance(value, (list, tuple)) or \
                (self.nonempty and not value):
            self.fail(value)
        result = []
        for (idx, item) in enumerate(value):
            try:
                result.append(self.item.check(item))
            except Invalid as err:
                raise _item(idx, err)
        return result

    def dump(self, value, redact=False):
        return [self.item.dump(v, redact) for v in value]


class _DictOf(Type):
    def __init__(self, key, value, desc=None):
        self.key, self.value = key, value
        if desc is None:
            if isinstance(key, _Any) and isinstance(value, _Any):
                desc = "an object"
            else:
                desc = "an object mapping %s to %s" % (_plural(key.desc),
                                                       _plural(value.desc))
        self.desc = desc

    def check(self, value):
        if not isinstance(value, dict):
            self.fail(value)
        result = {}
        for (key, item) in value.items():
            try:
                key = self.key.check(key)
            except Invalid as err:
                raise Invalid("key %r: %s" % (key, err.reason),
                              err.depth + 1)
            try:
                result[key] = self.value.check(item)
            except Invalid as err:
                raise Invalid("%r: %s" % (key, err.reason), err.depth + 1)
        return result

    def dump(self, value, redact=False):
        return {k: self.value.dump(v, redact) for (k, v) in value.items()}


class _Private(Type):
    """A private value (``secret``: a secret one): checked like ``inner``,
    hidden by redacting dumps."""

    def __init__(self, inner, secret=False):
        self.inner = inner
        self.secret = secret
        self.desc = inner.desc

    def check(self, value):
        return self.inner.check(value)

    def dump(self, value, redact=False):
        if callable(redact):
            return redact(self.inner.dump(value), self.secret)
        if redact is True or (self.secret and redact == HIDE_SECRETS):
            return REDACTED
        return self.inner.dump(value)


class _Tuple(Type):
    def __init__(self, *items):
        self.items = items
        self.desc = "a list [%s]" % ", ".join(t.desc for t in items)

    def check(self, value):
        if not isinstance(value, (list, tuple)) or \
                len(value) != len(self.items):
            self.fail(value)
        result = []
        for (idx, (typ, item)) in enumerate(zip(self.items, value)):
            try:
                result.append(typ.check(item))
            except Invalid as err:
                raise _item(idx, err)
        return result

    def dump(self, value, redact=False):
        return [t.dump(v, redact) for (t, v) in zip(self.items, value)]


class _Either(Type):
    """The first alternative that accepts the value wins."""

    def __init__(self, *alternatives, desc=None):
        self.alternatives = alternatives
        self.desc = desc or " or ".join(t.desc for t in alternatives)

    def _pick(self, value):
        failures = []
        for typ in self.alternatives:
            try:
                return (typ, typ.check(value))
            except Invalid as err:
                failures.append(err)
        depth = max(err.depth for err in failures)
        if depth:
            # the value had the shape of some forms: say what is wrong deep
            # inside the closest ones rather than listing every form
            raise Invalid("; or ".join(err.reason for err in failures
                                       if err.depth == depth), depth)
        self.fail(value)

    def check(self, value):
        return self._pick(value)[1]

    def dump(self, value, redact=False):
        return self._pick(value)[0].dump(value, redact)


class _Where(Type):
    """``base`` plus a predicate, e.g. a string that parses as an address."""

    def __init__(self, base, predicate, desc):
        self.base, self.predicate, self.desc = base, predicate, desc

    def check(self, value):
        try:
            value = self.base.check(value)
        except Invalid:
            self.fail(value)
        try:
            ok = self.predicate(value)
        except ValueError:
            ok = False
        if not ok:
            self.fail(value)
        return value

    def dump(self, value, redact=False):
        return self.base.dump(value, redact)


class _Converted(Type):
    """``base``, then turned into another form by ``convert``."""

    def __init__(self, base, convert, desc=None):
        self.base, self.convert = base, convert
        self.desc = desc or base.desc

    def check(self, value):
        try:
            value = self.base.check(value)
        except Invalid as err:
            if err.depth:
                raise
            self.fail(value)
        return self.convert(value)


def _plural(desc):
    # "a boolean" -> "booleans", good enough for messages
    for article in ("a ", "an "):
        if desc.startswith(article):
            word, _, rest = desc[len(article):].partition(" ")
            return ("%ss %s" % (word, rest)).strip()
    return desc


def maybe(inner):
    """``inner`` or null."""
    return _Maybe(inner)


def list_of(item, nonempty=False):
    """A list whose every item is ``item`` (JSON arrays; tuples accepted)."""
    return _ListOf(item, nonempty)


def dict_of(key, value, desc=None):
    """An object whose keys are ``key`` and values are ``value``."""
    return _DictOf(key, value, desc)


def one_of(*values):
    """Exactly one of ``values``."""
    return _OneOf(values)


def tuple_of(*items):
    """A fixed-length list whose item i is of type ``items[i]``."""
    return _Tuple(*items)


def either(*alternatives, desc=None):
    """Any of the alternatives; the first that matches normalises."""
    return _Either(*alternatives, desc=desc)


def private(inner):
    """A private value: kept, but hidden from every answer and log (a
    dump with ``redact=True``)."""
    return _Private(inner)


def secret(inner):
    """A secret value: also hidden from what is written to disk (a dump
    with ``redact=HIDE_SECRETS``)."""
    return _Private(inner, secret=True)


def where(base, predicate, desc):
    """A value of ``base`` for which ``predicate`` is true (a ValueError
    from the predicate counts as false)."""
    return _Where(base, predicate, desc)


def converted(base, convert, desc=None):
    """A value of ``base``, handed on as ``convert(value)``."""
    return _Converted(base, convert, desc)


def integer(low=None, high=None, desc=None):
    """An integer within the bounds given."""
    return _Int(low, high, desc)


def number(low=None, desc=None):
    """An integer or a float (kept as given) of at least ``low``."""
    return _Number(low, desc)


def _valid_ip(cls):
    return lambda text: bool(cls(text))


ANY = _Any()
BOOL = _Bool()
INT = _Int()
NONNEG_INT = _Int(low=0, desc="a non-negative integer")
POS_INT = _Int(low=1, desc="a positive integer")
FLOAT = _Float()
NUMBER = _Number()
NONNEG_NUMBER = _Number(low=0, desc="a non-negative number")
STR = _Str(nonempty=False)
NESTR = _Str(nonempty=True)
DICT = _DictOf(ANY, ANY)

class _HostName(Type):
    """A host name as Ganeti takes them for instances, nodes and the
    cluster: letters, digits, ``.``, ``_`` and ``-``, at most 255
    characters, no empty label; checked case-insensitively and handed on
    in lower case without a trailing dot."""

    _CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-")

    def __init__(self, empty_ok=False):
        self.empty_ok = empty_ok
        self.desc = ("a host name (letters, digits, '.', '_', '-'; no empty"
                     " label; at most 255 characters)"
                     + (" or an empty string" if empty_ok else ""))

    def check(self, value):
        if not isinstance(value, str):
            self.fail(value)
        if not value and self.empty_ok:
            return value
        name = value.lower()
        if (not 0 < len(name) <= 255 or not self._CHARS.issuperset(name)
                or name.startswith((".", "-")) or ".." in name):
            self.fail(value)
        return name.rstrip(".")


class _ObjectName(Type):
    """A name of a node group or network: one path component a shell,
    a URL and a command line take as it is."""

    desc = ("a name of at most 255 characters without '/', spaces or"
            " control characters, not starting with '-' and not '.' or"
            " '..'")

    def check(self, value):
        if (not isinstance(value, str) or not 0 < len(value) <= 255
                or value in (".", "..") or value.startswith("-")
                or any(c == "/" or c.isspace() or not c.isprintable()
                       for c in value)):
            self.fail(value)
        return value


class _OsName(Type):
    """An OS name, with its variant: ``name`` or ``name+variant`` (the
    name is a directory of the OS search path)."""

    desc = ("an OS name (letters, digits, '.', '_', '-', '+', not starting"
            " with '.', '-' or '+'; at most 255 characters)")
    _CHARS = frozenset("abcdefghijklmnopqrstuvwxyz"
                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+")

    def check(self, value):
        if (not isinstance(value, str) or not 0 < len(value) <= 255
                or not self._CHARS.issuperset(value)
                or value.startswith((".", "-", "+"))):
            self.fail(value)
        return value


#: names given to new objects (checked before any job exists)
HOST_NAME = _HostName()
#: a new instance's name: a forthcoming instance may have none yet
INSTANCE_HOST_NAME = _HostName(empty_ok=True)
OBJECT_NAME = _ObjectName()
OS_NAME = _OsName()

IPV4_ADDR = where(STR, _valid_ip(ipaddress.IPv4Address), "an IPv4 address")
IPV4_NET = where(STR, _valid_ip(ipaddress.IPv4Network), "an IPv4 network")
IPV6_ADDR = where(STR, _valid_ip(ipaddress.IPv6Address), "an IPv6 address")
IPV6_NET = where(STR, _valid_ip(ipaddress.IPv6Network), "an IPv6 network")
