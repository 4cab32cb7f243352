"""JSON text built once and sent many times.

A :class:`RawJSON` is a value already encoded as JSON (UTF-8 bytes); the
luxi server writes it into its answer as it is, so a large query answer
kept by the master is never encoded again.  :func:`encode` encodes one
value exactly as ``json.dumps`` with the luxi server's defaults would
inside a larger document, so answers spliced from pieces are byte for byte
what encoding the whole would give.
"""

import json
from json.encoder import encode_basestring_ascii


class RawJSON(object):
    """JSON text (bytes) standing for the value it encodes."""

    __slots__ = ("data",)

    def __init__(self, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.data = data

    def decode(self):
        """The value (a fresh copy: nothing is shared with the text)."""
        return json.loads(self.data)

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return "<RawJSON %d bytes>" % len(self.data)


def _default(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError("%r is not JSON serialisable" % (value,))


_encode_any = json.JSONEncoder(default=_default).encode


def encode(value, _any=_encode_any):
    """The JSON text (str) of ``value``; the common scalars without going
    through the general encoder (it costs several microseconds a call)."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    return _any(value)
