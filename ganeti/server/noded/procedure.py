"""How node daemon procedures declare and check their arguments.

Each procedure declares its arguments (name, :mod:`ganeti.ht` type,
default); a call's JSON body is the argument list (Ganeti style) or an
object of named arguments.  Checks run before anything is done and fail
with a :class:`ganeti.errors.ParameterError` naming the argument, the
procedure and the reason, which the HTTP layer reports as a bad request."""

import inspect

import attr
from twisted.internet import defer

from ganeti import errors
from ganeti import ht

__all__ = ["Arg", "procedure", "ProcedureTable", "bind_arguments",
           "error_message"]

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


def procedure(*args):
    """Mark a method of :class:`NodeProcedures` as an RPC procedure named
    like the method, taking ``args`` (:class:`Arg`)."""
    def mark(fn):
        fn.rpc_args = tuple(args)
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
    :func:`procedure` and calls them with checked arguments."""

    def __init__(self):
        self.table = {}
        for attr_name, member in inspect.getmembers(type(self)):
            spec = getattr(member, "rpc_args", None)
            if spec is not None:
                self.table[attr_name] = (spec, getattr(self, attr_name))

    def names(self):
        return sorted(self.table)

    def call(self, name, body):
        """Deferred result of procedure ``name`` for the decoded JSON body.

        KeyError for an unknown procedure; ParameterError for bad
        arguments (before anything is done), other errors from the work.
        """
        spec, method = self.table[name]

        def run():
            result = method(*bind_arguments(name, spec, body))
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
