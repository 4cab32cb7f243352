"""Fakes the unit tests share.

* :class:`FakeRpc`: node daemons behind :class:`ganeti.rpc.RpcClient`,
  answering as the test says, per procedure and node;
* :class:`FakeRunner`: the command runner of storage, DRBD and OS code,
  answering from a table of command prefixes;
* :class:`ClockTestCase`: a test case on a :class:`~twisted.internet.task.
  Clock` that fails a test which leaves timers on it.
"""

import collections
import copy

from twisted.internet import defer, task
from twisted.python import reflect
from twisted.trial import unittest

from ganeti.backend import process
from ganeti.rpc import RpcResult

__all__ = ["RpcCall", "NodeFailure", "FakeRpc", "FakeRunner",
           "ClockTestCase"]

_NOTHING = object()


def _lookup(table, node, procedure, default):
    """The entry of ``table`` for a call of ``procedure`` on ``node``: by
    (node, procedure) first, then by procedure, then by node."""
    for key in ((node, procedure), procedure, node):
        if key in table:
            return table[key]
    return default


#: one call :class:`FakeRpc` received (``args`` a copy of the arguments)
RpcCall = collections.namedtuple("RpcCall", "node procedure args")


class NodeFailure(Exception):
    """Raised by a fake node's answer: the call fails with this message."""


class FakeRpc(object):
    """Node daemons as the test wants them, behind RpcClient's interface
    (``call``, ``call_many``); every call is recorded in ``calls``.

    ``answers`` and ``fail`` are keyed by a procedure, a node or a (node,
    procedure) pair; the most specific key applies.

    ``answers[key]`` is the payload, or ``callable(node, *args)`` returning
    it.  A call without an answer goes to the method ``_<procedure>(node,
    *args)`` (subclasses simulate node state that way); without one either,
    it fails as a node daemon fails an unknown procedure.  An answer raising
    :class:`NodeFailure` fails the call with its message.

    ``fail[key]`` is a message, or ``callable(node, args)`` returning one
    (or None: no failure): the call fails with ``node <node>: <message>``.

    :meth:`hold` makes calls wait until :meth:`release` answers them.
    """

    def __init__(self, answers=None):
        self.calls = []
        self.answers = dict(answers or {})
        self.fail = {}
        # key -> [(Deferred, node, procedure, args)] waiting for release()
        self._held = {}

    # --- ganeti.rpc.RpcClient ------------------------------------------------

    def call(self, node, procedure, args=(), timeout=None):
        args = copy.deepcopy(list(args))
        self.calls.append(RpcCall(node, procedure, args))
        waiting = _lookup(self._held, node, procedure, None)
        if waiting is not None:
            d = defer.Deferred()
            waiting.append((d, node, procedure, args))
            return d
        return defer.succeed(self.answer(node, procedure, args))

    def call_many(self, nodes, procedure, args=(), timeout=None):
        nodes = list(nodes)
        return defer.gatherResults(
            [self.call(n, procedure, args, timeout) for n in nodes]
        ).addCallback(lambda results: dict(zip(nodes, results)))

    # --- answering -----------------------------------------------------------

    def answer(self, node, procedure, args):
        """The RpcResult of a call (subclasses may answer otherwise, e.g.
        for nodes that are offline or unreachable)."""
        msg = self.failure(node, procedure, args)
        if msg:
            return self.failed(node, procedure, msg)
        try:
            payload = self.payload(node, procedure, args)
        except NodeFailure as err:
            return self.failed(node, procedure, str(err))
        return RpcResult(node=node, procedure=procedure, success=True,
                         payload=payload)

    def failure(self, node, procedure, args):
        """The message ``fail`` gives this call, or None."""
        msg = _lookup(self.fail, node, procedure, None)
        if callable(msg):
            msg = msg(node, args)
        return msg

    def payload(self, node, procedure, args):
        """What the node answers (raises NodeFailure when it fails)."""
        answer = _lookup(self.answers, node, procedure, _NOTHING)
        if answer is _NOTHING:
            method = getattr(self, "_" + procedure, None)
            if method is None:
                raise NodeFailure("unknown procedure %r" % procedure)
            return method(node, *args)
        if callable(answer):
            return answer(node, *args)
        return copy.deepcopy(answer)

    def failed(self, node, procedure, msg):
        return RpcResult(node=node, procedure=procedure, success=False,
                         fail_msg="node %s: %s" % (node, msg))

    # --- holding calls -------------------------------------------------------

    def hold(self, key):
        """From now on calls matching ``key`` (a procedure, a node or a
        (node, procedure) pair) wait for :meth:`release`."""
        self._held.setdefault(key, [])

    def release(self, key, keep=True):
        """Answer the calls waiting on ``key``, as things are now.  With
        ``keep`` the calls that follow wait again; otherwise they are
        answered at once."""
        waiting = self._held.pop(key)
        if keep:
            self._held[key] = []
        for d, node, procedure, args in waiting:
            d.callback(self.answer(node, procedure, args))

    # --- inspection ----------------------------------------------------------

    def procedures(self, node=None):
        """The procedures called (on ``node`` only, if given), in order."""
        return [c[1] for c in self.calls if node is None or c[0] == node]

    def calls_of(self, procedure):
        return [c for c in self.calls if c[1] == procedure]


class FakeRunner(object):
    """:class:`ganeti.backend.process.CommandRunner` for tests: records the
    argv of every command in ``commands`` and answers from a table of argv
    prefixes (the newest matching entry applies); a command matching none
    succeeds without output."""

    def __init__(self):
        self.commands = []
        self._answers = []      # (prefix, (code, stdout, stderr) or callable)

    def answer(self, prefix, stdout=b"", stderr=b"", code=0):
        """Commands starting with ``prefix`` print ``stdout`` and
        ``stderr`` and exit with ``code``."""
        self._answers.insert(0, (list(prefix), (code, stdout, stderr)))

    def handle(self, prefix, function):
        """Commands starting with ``prefix`` are answered by
        ``function(argv)`` returning (exit code, stdout, stderr)."""
        self._answers.insert(0, (list(prefix), function))

    def run(self, argv, env=None, cwd=None, timeout=None, log_path=None,
            stdin_data=None):
        argv = list(argv)
        self.commands.append(argv)
        code, stdout, stderr = 0, b"", b""
        for prefix, answer in self._answers:
            if argv[:len(prefix)] == prefix:
                code, stdout, stderr = (answer(argv) if callable(answer)
                                        else answer)
                break
        return defer.succeed(process.CommandResult(
            argv=argv, exit_code=code, stdout=stdout, stderr=stderr,
            output=stdout + stderr))


def describe_delayed_call(call):
    """What a DelayedCall will run and when, in words."""
    args = ", ".join([reflect.safe_repr(a) for a in call.args] +
                     ["%s=%s" % (k, reflect.safe_repr(v))
                      for k, v in sorted(call.kw.items())])
    if len(args) > 60:
        args = args[:57] + "..."
    return "%s(%s) at %.3f" % (reflect.fullyQualifiedName(call.func), args,
                               call.getTime())


class ClockTestCase(unittest.TestCase):
    """A test case whose ``self.clock`` is a Clock (:meth:`make_clock`).

    A test that leaves timers (DelayedCalls) on the clock fails, naming
    them: a forgotten timeout or retry is a leak, in the test or in the
    code.  Subclasses call :meth:`setUp`, and :meth:`tearDown` last in a
    tearDown of their own.
    """

    def make_clock(self):
        return task.Clock()

    def setUp(self):
        self.clock = self.make_clock()

    def tearDown(self):
        pending = self.clock.getDelayedCalls()
        if pending:
            self.fail("%d timer(s) left on the clock (now %.3f): %s"
                      % (len(pending), self.clock.seconds(),
                         "; ".join(describe_delayed_call(c)
                                   for c in pending)))
