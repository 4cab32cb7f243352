"""CPU-bound work in a worker thread that leaves the reactor thread room.

In CPython a worker thread alone does not keep the reactor responsive: both
threads need the GIL, and the reactor thread gives it up at every system
call (each recvfrom, each sendto).  While a worker computes, the reactor
thread then waits up to the interpreter's switch interval (5 ms) to get it
back, again after every one of those calls -- a reload in a plain thread
slows answers down more than one in the reactor thread.

So the work calls a :class:`Pacer` often (after each object it builds);
after ``work`` seconds of running the pacer sleeps ``rest`` seconds, which
hands the GIL to the reactor thread for that long.  An answer then waits at
most about ``work`` for the worker, and the reactor keeps ``rest / (work +
rest)`` of its speed while a reload runs.

:func:`loads` is json.loads for such work: one C call parsing a 2 MB
config.data holds the GIL for 15 ms, so it parses the outer levels itself and
hands only single members (an instance, a disk) to the C scanner, pausing
in between.
"""

import json
import re
import time


def no_pause():
    """The pause of work that may run undisturbed."""


class Pacer(object):
    """Call often; sleeps ``rest`` s after each ``work`` s of running.

    ``clock`` and ``sleep`` are injectable for tests.  ``rests`` counts the
    sleeps, ``slept`` adds them up.
    """

    def __init__(self, work=0.001, rest=0.001, clock=time.perf_counter,
                 sleep=time.sleep):
        self.work = work
        self.rest = rest
        self._clock = clock
        self._sleep = sleep
        self._start = clock()
        self.rests = 0
        self.slept = 0.0

    def restart(self):
        """Begin a new slice of work (after waiting for something else)."""
        self._start = self._clock()

    def __call__(self):
        if self._clock() - self._start >= self.work:
            self._sleep(self.rest)
            self.rests += 1
            self.slept += self.rest
            self._start = self._clock()


_DECODER = json.JSONDecoder()
_SCAN = _DECODER.scan_once
_WS = re.compile(r"[ \t\n\r]*")
_STRING = json.decoder.scanstring


def loads(text, pause=no_pause, depth=2):
    """``json.loads(text)``, calling ``pause()`` between values.

    Objects and arrays of the outer ``depth`` levels are walked here, each
    value inside them is parsed by the C scanner in one go.  The result and
    the errors (json.JSONDecodeError) are json.loads's.
    """
    idx = _WS.match(text, 0).end()
    value, idx = _value(text, idx, depth, pause)
    idx = _WS.match(text, idx).end()
    if idx != len(text):
        raise json.JSONDecodeError("Extra data", text, idx)
    return value


def _value(text, idx, depth, pause):
    if depth > 0:
        char = text[idx:idx + 1]
        if char == "{":
            return _object(text, idx + 1, depth - 1, pause)
        if char == "[":
            return _array(text, idx + 1, depth - 1, pause)
    try:
        return _SCAN(text, idx)
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) \
            from None


def _object(text, idx, depth, pause):
    result = {}
    idx = _WS.match(text, idx).end()
    if text[idx:idx + 1] == "}":
        return result, idx + 1
    while True:
        if text[idx:idx + 1] != '"':
            raise json.JSONDecodeError("Expecting property name enclosed in"
                                       " double quotes", text, idx)
        key, idx = _STRING(text, idx + 1)
        idx = _WS.match(text, idx).end()
        if text[idx:idx + 1] != ":":
            raise json.JSONDecodeError("Expecting ':' delimiter", text, idx)
        idx = _WS.match(text, idx + 1).end()
        result[key], idx = _value(text, idx, depth, pause)
        pause()
        idx = _WS.match(text, idx).end()
        char = text[idx:idx + 1]
        if char == "}":
            return result, idx + 1
        if char != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, idx)
        idx = _WS.match(text, idx + 1).end()


def _array(text, idx, depth, pause):
    result = []
    idx = _WS.match(text, idx).end()
    if text[idx:idx + 1] == "]":
        return result, idx + 1
    while True:
        value, idx = _value(text, idx, depth, pause)
        result.append(value)
        pause()
        idx = _WS.match(text, idx).end()
        char = text[idx:idx + 1]
        if char == "]":
            return result, idx + 1
        if char != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, idx)
        idx = _WS.match(text, idx + 1).end()
