"""Declarative checks of hypervisor parameters (hvparams).

A driver describes each parameter it knows with a :class:`Param`: how to
check a value, its default, and whether the driver acts on it.  A parameter
the driver knows by name but does not implement is accepted only at its
default, so an admin setting it gets an error instead of silence.
"""

import ipaddress
import os

import attr

from ganeti import errors

__all__ = ["Param", "check_params", "filled", "boolean", "integer",
           "one_of", "string", "abs_path", "abs_path_or_empty",
           "ip_or_empty"]


@attr.s(frozen=True)
class Param(object):
    default = attr.ib()
    #: callable(value) -> None if fine, else a short "must be ..." text
    check = attr.ib()
    #: False: known name, only the default is accepted
    supported = attr.ib(default=True)


def check_params(hv_name, table, hvparams):
    """Raise ParameterError(name, message) for the first bad parameter."""
    if not isinstance(hvparams, dict):
        raise errors.ParameterError(
            "hvparams", "hypervisor parameters must be a dict, not %s" %
            type(hvparams).__name__)
    for key in sorted(hvparams):
        value = hvparams[key]
        param = table.get(key)
        if param is None:
            raise errors.ParameterError(
                key, "hypervisor parameter '%s' is not known to the %s "
                "hypervisor" % (key, hv_name))
        problem = param.check(value)
        if problem:
            raise errors.ParameterError(
                key, "hypervisor parameter '%s' %s, got %r" %
                (key, problem, value))
        if not param.supported and value != param.default:
            raise errors.ParameterError(
                key, "hypervisor parameter '%s' is not supported by this %s "
                "driver; only its default %r is accepted, got %r" %
                (key, hv_name, param.default, value))


def filled(table, hvparams):
    """``hvparams`` with defaults for missing keys."""
    result = dict((k, p.default) for k, p in table.items())
    result.update(hvparams)
    return result


def boolean(value):
    if not isinstance(value, bool):
        return "must be a boolean (true or false)"


def integer(minimum=None, maximum=None):
    def check(value):
        if not isinstance(value, int) or isinstance(value, bool):
            return "must be an integer"
        if minimum is not None and value < minimum:
            return "must be at least %d" % minimum
        if maximum is not None and value > maximum:
            return "must be at most %d" % maximum
    return check


def one_of(*values):
    def check(value):
        if value not in values:
            return "must be one of %s" % ", ".join(repr(v) for v in values)
    return check


def string(value):
    if not isinstance(value, str):
        return "must be a string"


def abs_path(value):
    if not isinstance(value, str) or not os.path.isabs(value):
        return "must be an absolute path"


def abs_path_or_empty(value):
    if not isinstance(value, str) or (value and not os.path.isabs(value)):
        return "must be an absolute path or empty"


def ip_or_empty(value):
    if not isinstance(value, str):
        return "must be an IP address or empty"
    if value:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return "must be an IP address or empty"
