"""Instance parameters: sizes with units, parameter dict updates, backend
and hypervisor parameter checks.
"""

import math
import re

from ganeti import constants
from ganeti import errors
from ganeti import ht
from ganeti import hypervisor
from ganeti import objects


_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


_SIZE_UNITS = {"": 1, "m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024,
               "gib": 1024, "t": 1024 ** 2, "tb": 1024 ** 2, "tib": 1024 ** 2}

#: The largest size in MiB: 8 EiB, as many bytes as a signed 64-bit count.
MAX_SIZE = 2 ** 43


def parse_size(value, field):
    """A size in MiB from an int or a string with an optional unit."""
    if isinstance(value, bool):
        raise errors.OpPrereqError("%s: expected a size, got %r"
                                   % (field, value), errors.ECODE_INVAL)
    if isinstance(value, float) and not math.isfinite(value):
        raise errors.OpPrereqError("%s: expected a size, got %r: not a finite"
                                   " number" % (field, value),
                                   errors.ECODE_INVAL)
    if isinstance(value, int):
        size = value
    elif isinstance(value, float) and value == int(value):
        size = int(value)
    else:
        m = _SIZE_RE.match(str(value))
        factor = _SIZE_UNITS.get(m.group(2).lower()) if m else None
        if m is None or factor is None:
            raise errors.OpPrereqError(
                "%s: invalid size %r (a number of MiB, or with a unit M, G"
                " or T)" % (field, value), errors.ECODE_INVAL)
        size = float(m.group(1)) * factor
        if not size <= MAX_SIZE:     # also a text too long for a float
            raise errors.OpPrereqError(
                "%s: the size %s is out of range (at most %d MiB)"
                % (field, ht.show(value), MAX_SIZE), errors.ECODE_INVAL)
        size = int(size) if size == int(size) else int(size) + 1
    if size <= 0:
        raise errors.OpPrereqError("%s: the size must be positive, got %r"
                                   % (field, value), errors.ECODE_INVAL)
    if size > MAX_SIZE:
        raise errors.OpPrereqError("%s: the size %s is out of range (at most"
                                   " %d MiB)" % (field, ht.show(value),
                                                 MAX_SIZE),
                                   errors.ECODE_INVAL)
    return size


def update_params(current, changes):
    """``current`` updated by ``changes``; "default" removes a key."""
    result = dict(current or {})
    for key, value in (changes or {}).items():
        if value == constants.VALUE_DEFAULT:
            result.pop(key, None)
        else:
            result[key] = value
    return result


_BE_INT = (constants.BE_MAXMEM, constants.BE_MINMEM, constants.BE_VCPUS,
           constants.BE_SPINDLE_USE)


_BE_BOOL = (constants.BE_AUTO_BALANCE, constants.BE_ALWAYS_FAILOVER)


def check_beparams(beparams, field="beparams"):
    """Normalised backend parameters (memory -> maxmem/minmem, sizes in
    MiB); OpPrereqError naming the parameter otherwise."""
    be = dict(beparams or {})
    unknown = sorted(set(be) - set(constants.BEC_DEFAULTS)
                     - {constants.BE_MEMORY})
    if unknown:
        raise errors.OpPrereqError(
            "%s: unknown parameter%s %s (known: %s)"
            % (field, "s" if len(unknown) > 1 else "", ", ".join(unknown),
               ", ".join(sorted(constants.BEC_DEFAULTS))), errors.ECODE_INVAL)
    if constants.BE_MEMORY in be:
        mem = be.pop(constants.BE_MEMORY)
        be.setdefault(constants.BE_MAXMEM, mem)
        be.setdefault(constants.BE_MINMEM, mem)
    for key, value in list(be.items()):
        if value == constants.VALUE_DEFAULT:
            continue
        if key in (constants.BE_MAXMEM, constants.BE_MINMEM):
            be[key] = parse_size(value, "%s/%s" % (field, key))
        elif key in _BE_INT:
            if isinstance(value, bool) or not isinstance(value, int) \
                    or value < 1:
                raise errors.OpPrereqError(
                    "%s/%s: expected a positive integer, got %r"
                    % (field, key, value), errors.ECODE_INVAL)
        elif key in _BE_BOOL and not isinstance(value, bool):
            raise errors.OpPrereqError("%s/%s: expected true or false, got %r"
                                       % (field, key, value),
                                       errors.ECODE_INVAL)
    return be


def check_memory_range(filled_be, field="beparams"):
    if filled_be[constants.BE_MINMEM] > filled_be[constants.BE_MAXMEM]:
        raise errors.OpPrereqError(
            "%s: minimum memory (%s MiB) is greater than maximum memory (%s"
            " MiB)" % (field, filled_be[constants.BE_MINMEM],
                       filled_be[constants.BE_MAXMEM]), errors.ECODE_INVAL)


def check_hypervisor_enabled(cluster, hv_name):
    if hv_name not in cluster.enabled_hypervisors:
        raise errors.OpPrereqError(
            "hypervisor: '%s' is not enabled in the cluster (enabled: %s)"
            % (hv_name, ", ".join(cluster.enabled_hypervisors)),
            errors.ECODE_STATE)


def full_hvparams(cluster, instance, overrides=None):
    """What the hypervisor gets: filled instance parameters, the cluster's
    global ones, then ``overrides`` (a start with other parameters)."""
    result = objects.fill_hvparams(cluster, instance)
    result.update(objects.cluster_global_hvparams(cluster,
                                                  instance.hypervisor))
    result.update(overrides or {})
    return result


def check_hvparams(cluster, instance, field="hvparams", overrides=None,
                   log_warning=None):
    """Check an instance's hypervisor parameters as its hypervisor would.

    Global parameters are refused (they belong to the cluster); the filled
    set goes through the driver's syntax check.
    """
    for params in (instance.hvparams, overrides):
        bad = sorted(set(params or {}) & constants.HVC_GLOBALS)
        if bad:
            raise errors.OpPrereqError(
                "%s: %s can only be set at cluster level (global hypervisor"
                " parameter%s)" % (field, ", ".join(bad),
                                   "s" if len(bad) > 1 else ""),
                errors.ECODE_INVAL)
    hv_name = instance.hypervisor
    filled = full_hvparams(cluster, instance, overrides)
    try:
        hypervisor.check_parameter_syntax(hv_name, filled)
    except errors.HypervisorError:
        if log_warning is not None:
            log_warning("No %s driver on the master; hypervisor parameters"
                        " are checked on the node only" % hv_name)
    except errors.ParameterError as err:
        raise errors.OpPrereqError("%s: %s" % (field, err.args[-1]),
                                   errors.ECODE_INVAL)
    return filled
