"""JSON from clients that may be hostile: bounded nesting, sane numbers.

Python's json parser recurses once per nesting level: a text of a hundred
thousand ``[`` ends in a RecursionError deep inside it, and everything that
walks such a value later (checks, encoders) would recurse as deep again.
It also reads ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON at all) and
turns a number such as ``1e400`` into infinity, which no parameter means.

:func:`loads` refuses all of these with a :class:`JsonLimitError` (a
ValueError) that says what is wrong and where (``beparams/memory``): the
nesting depth is checked on the raw text before the parser runs, numbers
after it.  The RAPI daemon reads request bodies and the master daemon luxi
requests through it.
"""

import itertools
import json
import math
import re

from ganeti.ht import INT_MAX, INT_MIN

#: How deep a request may nest lists and objects.  Real ones (a job of
#: opcodes holding disks and their parameters) stay far below.
MAX_DEPTH = 64

# What is left of the structure once strings are gone: the brackets only.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# The depth change of each bracket byte.
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


class JsonLimitError(ValueError):
    """Text that is too deep, or a number no parameter can hold.

    ``path`` names where (``beparams/memory``, ``disks/0/size``; empty for
    the whole text).
    """

    def __init__(self, message, path=""):
        ValueError.__init__(self, message)
        self.path = path


def nesting_depth(data):
    """How deep ``data`` (JSON text, bytes or str) nests lists and objects.

    Brackets inside strings do not count.  Linear in the text and without
    recursion, whatever the depth.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    if b"\\" in data:
        # escaped backslashes first, so that the quote of ``"a\\"`` still
        # ends its string; an escaped quote never does
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    # between the quotes: strings; outside them: the structure
    structure = b"".join(data.split(b'"')[0::2]).translate(
        None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, structure)),
               default=0)


def check_depth(data, limit=MAX_DEPTH):
    """JsonLimitError if ``data`` nests deeper than ``limit`` levels."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    # the usual short request is settled by counting its brackets
    if data.count(b"[") + data.count(b"{") <= limit:
        return
    if nesting_depth(data) > limit:
        raise JsonLimitError("the JSON text nests lists and objects deeper"
                             " than the limit of %d levels" % limit)


class _Unusable(float):
    """A number read as infinity or NaN, remembering how it was written."""

    text = None


#: numbers read as infinity or NaN so far (see :func:`loads`)
_unusable_read = 0


def _number(text):
    global _unusable_read
    value = float(text)
    if math.isfinite(value):
        return value
    _unusable_read += 1
    marked = _Unusable(value)
    marked.text = text
    return marked


def _path(parts):
    return "/".join(str(p) for p in parts)


def check_numbers(value, where=()):
    """JsonLimitError naming the first number in ``value`` that is not
    finite or an integer beyond 64 bits; ``where`` is the path of
    ``value`` itself.  Iterative: any depth is fine."""
    stack = [(tuple(where), value)]
    while stack:
        (path, item) = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                raise JsonLimitError(
                    "%s: %s is not a finite number" % (
                        _path(path) or "value",
                        getattr(item, "text", None) or repr(item)),
                    _path(path))
        elif isinstance(item, int) and not isinstance(item, bool):
            if not INT_MIN <= item <= INT_MAX:
                raise JsonLimitError(
                    "%s: %d is out of range (integers must fit in 64 bits)"
                    % (_path(path) or "value", item), _path(path))
        elif isinstance(item, dict):
            stack.extend(reversed([(path + (key,), sub)
                                   for (key, sub) in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([(path + (idx,), sub)
                                   for (idx, sub) in enumerate(item)]))


# An integer that may not fit in 64 bits (19 digits or more).
_LONG_DIGITS = re.compile(rb"\d{19}")
# one decoder for every call (json.loads with hooks builds a new one each
# time); numbers that are not finite come out marked (_Unusable)
_DECODER = json.JSONDecoder(parse_float=_number, parse_constant=_number)


def loads(data, max_depth=MAX_DEPTH):
    """The value of JSON text ``data`` (UTF-8 bytes or str).

    ValueError if it is not JSON (UnicodeDecodeError for bytes that are not
    UTF-8); :class:`JsonLimitError` if it nests deeper than ``max_depth``
    or holds a number that is not finite or does not fit in 64 bits.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    check_depth(raw, max_depth)
    text = data if isinstance(data, str) else raw.decode("utf-8")
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM", text, 0)
    before = _unusable_read
    value = _DECODER.decode(text)
    # only a suspicious text is walked: a number read as infinity or NaN
    # (the count moved; another thread's reads can only make it walk
    # needlessly), or digits enough for an integer beyond 64 bits
    if _unusable_read != before or _LONG_DIGITS.search(raw):
        check_numbers(value)
    return value
