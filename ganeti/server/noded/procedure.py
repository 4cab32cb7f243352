"""How node daemon procedures declare and check their arguments.

Each procedure declares its arguments (name, :mod:`ganeti.ht` type,
default); a call's JSON body is the argument list (Ganeti style) or an
object of named arguments.  Checks run before anything is done and fail
with a :class:`ganeti.errors.ParameterError` naming the argument, the
procedure and the reason, which the HTTP layer reports as a bad request.

A procedure whose work touches the disk is declared ``blocking``: it runs in
the daemon's thread pool, so that a slow or failing disk stalls that call
only, never the reactor (and with it every other call, such as a ping).
The arguments are still checked on the reactor, before the pool is asked
to do anything.  Procedures that mix waiting (commands, the reactor) with
file work run the file work through :meth:`ProcedureTable.run_blocking`."""

import inspect

import attr
from twisted.internet import defer

from ganeti import errors
from ganeti import ht

__all__ = ["Arg", "procedure", "ProcedureTable", "bind_arguments",
           "error_message", "INLINE"]

#: The runner of blocking work that runs it at once in the caller's thread:
#: for tests and tools that construct procedures without the daemon (the
#: daemon hands in its thread pool's runner).
INLINE = defer.maybeDeferred

_REQUIRED = object()


@attr.s(frozen=True)
class Arg(object):
    """One argument: its name, its type (:mod:`ganeti.ht`) and, unless it
    is required, its default."""
    name = attr.ib()
    type = attr.ib(default=ht.ANY)
    default = attr.ib(default=_REQUIRED)

    @property
    def required(self):
        return self.default is _REQUIRED


def procedure(*args, blocking=False, ordered=False):
    """Mark a method of :class:`NodeProcedures` as an RPC procedure named
    like the method, taking ``args`` (:class:`Arg`).

    ``blocking``: the method is synchronous file work and runs through the
    table's ``run_blocking`` (the daemon's thread pool).  It must neither
    touch the reactor nor log (neither is thread-safe).  ``ordered`` (with
    ``blocking``): it also runs one at a time, in arrival order, with the
    other ordered work (the cluster's files: an older upload must not land
    after a newer one, as none could when all of this ran on the reactor).
    """
    def mark(fn):
        if blocking and inspect.iscoroutinefunction(fn):
            raise TypeError("blocking procedure %s must be a plain function:"
                            " it runs in a worker thread" % fn.__name__)
        if ordered and not blocking:
            raise TypeError("procedure %s: ordered needs blocking"
                            % fn.__name__)
        fn.rpc_args = tuple(args)
        fn.rpc_blocking = bool(blocking)
        fn.rpc_ordered = bool(ordered)
        return fn
    return mark


def bind_arguments(name, spec, body):
    """Check a call's JSON body against ``spec``; the argument values."""
    if body is None:
        body = []
    if isinstance(body, dict):
        unknown = sorted(set(body) - set(a.name for a in spec))
        if unknown:
            raise errors.ParameterError(
                unknown[0], "procedure %s has no argument%s %s (its arguments:"
                " %s)" % (name, "s" if len(unknown) > 1 else "",
                          ", ".join(unknown),
                          ", ".join(a.name for a in spec) or "none"))
        given = body
    elif isinstance(body, list):
        if len(body) > len(spec):
            raise errors.ParameterError(
                "arguments", "procedure %s takes at most %d argument%s (%s),"
                " got %d" % (name, len(spec), "" if len(spec) == 1 else "s",
                             ", ".join(a.name for a in spec), len(body)))
        given = dict(zip((a.name for a in spec), body))
    else:
        raise errors.ParameterError(
            "arguments", "the request body must be a JSON list of arguments"
            " or an object of named arguments, not %s" % type(body).__name__)
    values = []
    for arg in spec:
        if arg.name in given:
            try:
                values.append(arg.type.check(given[arg.name]))
            except ht.Invalid as err:
                raise errors.ParameterError(
                    arg.name, "argument '%s' of %s: %s"
                    % (arg.name, name, err.reason))
        elif arg.required:
            raise errors.ParameterError(
                arg.name, "argument '%s' of %s is missing" % (arg.name, name))
        else:
            values.append(arg.default)
    return values


class ProcedureTable(object):
    """Base of the procedure classes: finds the methods marked with
    :func:`procedure` and calls them with checked arguments.

    ``run_blocking(f, *args)`` returns a Deferred of ``f(*args)`` run where
    blocking work may run: the daemon's thread pool, or :data:`INLINE`.
    ``ordered_lock`` (a DeferredLock) serialises ordered work; tables that
    must share the order (a node's and its bootstrap procedures) share it.
    """

    def __init__(self, run_blocking, ordered_lock=None):
        self.run_blocking = run_blocking
        self.ordered_lock = (defer.DeferredLock() if ordered_lock is None
                             else ordered_lock)
        self.table = {}
        for attr_name, member in inspect.getmembers(type(self)):
            spec = getattr(member, "rpc_args", None)
            if spec is not None:
                self.table[attr_name] = (spec, getattr(self, attr_name))

    def names(self):
        return sorted(self.table)

    def blocking_names(self):
        """The procedures declared blocking."""
        return sorted(name for name, (_, method) in self.table.items()
                      if getattr(method, "rpc_blocking", False))

    def run_ordered(self, fn, *args, **kwargs):
        """Run blocking ``fn`` after the ordered work that came before."""
        return self.ordered_lock.run(self.run_blocking, fn, *args, **kwargs)

    def call(self, name, body):
        """Deferred result of procedure ``name`` for the decoded JSON body.

        KeyError for an unknown procedure; ParameterError for bad
        arguments (before anything is done), other errors from the work.
        """
        spec, method = self.table[name]
        try:
            values = bind_arguments(name, spec, body)
        except Exception:
            return defer.fail()
        if getattr(method, "rpc_ordered", False):
            return self.run_ordered(method, *values)
        if getattr(method, "rpc_blocking", False):
            return self.run_blocking(method, *values)

        def run():
            result = method(*values)
            if inspect.iscoroutine(result):
                return defer.Deferred.fromCoroutine(result)
            return result
        return defer.maybeDeferred(run)


def error_message(err):
    if isinstance(err, errors.ParameterError) and len(err.args) > 1:
        return str(err.args[-1])
    if isinstance(err, OSError) and err.strerror:
        return "%s%s" % (err.strerror, (": %s" % err.filename)
                         if err.filename else "")
    return str(err) or err.__class__.__name__
