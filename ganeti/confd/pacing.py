"""CPU-bound work in a worker thread that leaves the reactor thread room.

In CPython a worker thread alone does not keep the reactor responsive: both
threads need the GIL, and the reactor thread gives it up at every system
call (each recvfrom, each sendto).  While a worker computes, the reactor
thread then waits up to the interpreter's switch interval (5 ms) to get it
back, again after every one of those calls -- a reload in a plain thread
slows answers down more than one in the reactor thread.

So the work calls a :class:`Pacer` often (after each object it builds);
after ``work`` seconds of running the pacer rests -- waits for the reactor
thread to go once through its loop (:class:`ReactorTurn`), serving what
arrived meanwhile -- which hands it the GIL.  An answer then waits at most
about ``work`` for the worker, and a reload takes little longer than its CPU
time when the daemon is idle.

:func:`loads` is json.loads for such work: one C call parsing a 2 MB
config.data holds the GIL for 15 ms, so it parses the outer levels itself and
hands only single members (an instance, a disk) to the C scanner, pausing
in between.
"""

import json
import re
import threading
import time


def no_pause():
    """The pause of work that may run undisturbed."""


class Pacer(object):
    """Call often; after each ``work`` s of running, rests.

    Resting is ``yield_to()`` when given (see :class:`ReactorTurn`), else
    sleeping ``rest`` s.  ``clock`` and ``sleep`` are injectable for tests.
    ``rests`` counts the rests, ``rested`` adds up their time.
    """

    def __init__(self, work=0.001, rest=0.001, yield_to=None,
                 clock=time.perf_counter, sleep=time.sleep):
        self.work = work
        self.rest = rest
        self._yield_to = yield_to
        self._clock = clock
        self._sleep = sleep
        self._start = clock()
        self.rests = 0
        self.rested = 0.0

    def restart(self):
        """Begin a new slice of work (after waiting for something else)."""
        self._start = self._clock()

    def __call__(self):
        now = self._clock()
        if now - self._start >= self.work:
            if self._yield_to is not None:
                self._yield_to()
            else:
                self._sleep(self.rest)
            self._start = self._clock()
            self.rests += 1
            self.rested += self._start - now


class ReactorTurn(object):
    """``turn()``, called in a worker thread, returns once the reactor
    thread has been once through its loop, polling its sockets.

    A fixed rest is too short when the machine is busy (the reactor thread
    may not even have been scheduled, and the worker takes the GIL back) and
    too long when the reactor is idle.  Waiting for the reactor itself
    gives it exactly the time to serve what arrived during the last slice
    of work.  ``timeout`` bounds the wait (a stopped reactor).
    """

    def __init__(self, reactor, timeout=0.1):
        self._reactor = reactor
        self._timeout = timeout

    def __call__(self):
        done = threading.Event()
        # callLater(0) from the reactor thread: set at the start of the loop
        # after the next poll of the sockets, whatever the loop was doing
        self._reactor.callFromThread(self._reactor.callLater, 0, done.set)
        done.wait(self._timeout)


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
