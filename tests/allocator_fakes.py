"""Scripted instance allocators for the unit tests.

They are plugged in the way every built-in allocator is: by a
"module:function" entry in the registry's table (``fake`` and ``spare``
below), and run synchronously so that tests on a Clock see the answer at
once.  Each test scripts the answers and looks at the input documents the
allocator received.
"""

from twisted.internet import defer

from ganeti.iallocator.allocators import AllocatorRegistry

#: name -> ScriptedAllocator of the running test
ACTIVE = {}


class ScriptedAllocator(object):
    """Answers from a queue: a document, a function of the input
    document, or an exception to raise; the last one keeps answering."""

    def __init__(self, name):
        self.name = name
        self.inputs = []
        self.params = []   # the allocator parameters of each call
        self._answers = []

    def reply(self, result, success=True, info="scripted answer"):
        self._answers.append({"success": success, "info": info,
                              "result": result})
        return self

    def reply_with(self, function):
        """``function(input document)`` gives the answer."""
        self._answers.append(function)
        return self

    def fail_with(self, exc):
        self._answers.append(exc)
        return self

    @property
    def requests(self):
        return [doc["request"] for doc in self.inputs]

    def __call__(self, document, params=None):
        self.inputs.append(document)
        self.params.append(params or {})
        if not self._answers:
            raise AssertionError("allocator %s was asked but has no answer"
                                 % self.name)
        answer = self._answers[0] if len(self._answers) == 1 \
            else self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(document)
        return answer


def fake(document, params=None):
    return ACTIVE["fake"](document, params)


def spare(document, params=None):
    return ACTIVE["spare"](document, params)


def sync_runner(function, *args):
    """Runs "in a thread" at once: the test sees the answer without a
    reactor turn."""
    return defer.maybeDeferred(function, *args)


def install(testcase, ctx, names=("fake", "spare"), extra_path=()):
    """Give ``ctx`` a registry whose built-ins are the scripted allocators
    ``names``; returns {name: ScriptedAllocator}."""
    allocators = {}
    for name in names:
        allocators[name] = ScriptedAllocator(name)
        ACTIVE[name] = allocators[name]
        testcase.addCleanup(ACTIVE.pop, name, None)
    root = testcase.mktemp()
    ctx.allocators = AllocatorRegistry(
        ctx.clock, root=root, extra_path=extra_path,
        builtins={n: "tests.allocator_fakes:%s" % n for n in names},
        run_in_thread=sync_runner)
    return allocators
