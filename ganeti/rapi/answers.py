"""Rendered query answers, kept while the master's answer is unchanged.

A bulk list of 2,000 instances is 2 MB of JSON: decoding the master's
answer and rendering RAPI's takes about 0.1 s, for every request.
:class:`AnswerCache` keeps the rendered body of each query it served with
the *version* the master gave that answer (luxi ``QueryVersioned``,
docs/query.rst) and asks the master, on every request, whether its answer
is still that version: "unchanged" (a few bytes) lets it send the same
body again.  So every answer is as current as a query of the master made
after the request arrived, and the work of decoding and rendering is done
once per change of the cluster rather than once per request.

Requests for the same query share its check with the master the way
identical requests share a run (:mod:`ganeti.rapi.coalesce`).  A master
without ``QueryVersioned`` is asked with a plain ``Query`` (no caching),
and asked again whether it has it after a while (it may be upgraded).
"""

import collections
import json

from ganeti import errors
from ganeti import luxi
from ganeti.rapi import baserlib
from ganeti.rapi.coalesce import Coalescer
from ganeti.rapi.master import is_unsupported_method

DEFAULT_MAX_ENTRIES = 32
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: seconds before a master without QueryVersioned is asked again
RETRY_UNSUPPORTED = 60.0


class _Entry(object):
    __slots__ = ("version", "rendered")

    def __init__(self, version, rendered):
        self.version = version
        self.rendered = rendered


class AnswerCache(object):
    """``rendered(what, fields, qfilter, shape)`` over ``master`` (a luxi
    caller: ``call(method, *args)`` returning a Deferred); ``clock`` an
    IReactorTime."""

    def __init__(self, master, clock, max_entries=DEFAULT_MAX_ENTRIES,
                 max_bytes=DEFAULT_MAX_BYTES):
        self.master = master
        self.clock = clock
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries = collections.OrderedDict()
        self._bytes = 0
        self._coalescer = Coalescer()
        self._unsupported_until = None
        #: bodies sent again / rendered (tests, benchmark)
        self.reused = 0
        self.rendered_count = 0

    def rendered(self, what, fields, qfilter, shape):
        """Deferred of a :class:`baserlib.Rendered` body: ``shape(result)``
        of the master's Query answer ``result`` (``{"fields", "data"}``).
        ``shape`` must be the same function for the same query (it is part
        of the key) and may change the result it is given."""
        key = (what, tuple(fields), json.dumps(qfilter, sort_keys=True),
               shape)
        return self._coalescer.run(
            key, lambda: self._fetch(key, what, fields, qfilter, shape))

    def _versioned(self):
        until = self._unsupported_until
        return until is None or self.clock.seconds() >= until

    async def _fetch(self, key, what, fields, qfilter, shape):
        entry = self._entries.get(key)
        if self._versioned():
            try:
                result = await self.master.call(
                    luxi.REQ_QUERY_VERSIONED, what, list(fields), qfilter,
                    entry.version if entry is not None else None)
            except errors.LuxiError as err:
                if not is_unsupported_method(err):
                    raise
                self._unsupported_until = \
                    self.clock.seconds() + RETRY_UNSUPPORTED
                self._forget_all()
                return await self._plain(what, fields, qfilter, shape)
        else:
            return await self._plain(what, fields, qfilter, shape)
        version = result.get("version")
        if result.get("unchanged"):
            if entry is not None and version == entry.version:
                if key in self._entries:
                    self._entries.move_to_end(key)
                else:
                    self._remember(key, entry)
                self.reused += 1
                return entry.rendered
            raise errors.LuxiError(
                "The master daemon answered %s unchanged for a version this"
                " RAPI daemon does not have" % luxi.REQ_QUERY_VERSIONED)
        rendered = self._render(shape, result)
        self._forget(key)
        if version is not None:
            self._remember(key, _Entry(version, rendered))
        return rendered

    async def _plain(self, what, fields, qfilter, shape):
        result = await self.master.call(luxi.REQ_QUERY, what, list(fields),
                                        qfilter)
        return self._render(shape, result)

    def _render(self, shape, result):
        self.rendered_count += 1
        return baserlib.Rendered(baserlib.render_json(shape(result)))

    def _remember(self, key, entry):
        self._entries[key] = entry
        self._bytes += len(entry.rendered.data)
        while self._entries and (len(self._entries) > self.max_entries or
                                 self._bytes > self.max_bytes):
            _, old = self._entries.popitem(last=False)
            self._bytes -= len(old.rendered.data)

    def _forget(self, key):
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= len(old.rendered.data)

    def _forget_all(self):
        self._entries.clear()
        self._bytes = 0
