"""Disk parameters (``diskparams``): checking what an admin sets.

Disk parameters are set per disk template at cluster level
(``gnt-cluster modify -D plain:stripes=2``) and per node group
(``gnt-group modify -D ...``); the effective ones of a disk are the
template's defaults, then the cluster's, then its group's, then the disk's
own (see :func:`ganeti.objects.disk_params`).  The storage drivers on the
nodes apply them (docs/storage.rst).

:func:`check_diskparams` normalises what a client sent -- the command line
sends every value as a string, as Ganeti's does -- to the parameter's type
(Ganeti's ``DISK_DT_TYPES``) and checks the values the drivers need, so a
bad value is refused by the opcode, before anything changes, with an error
naming the parameter.
"""

from ganeti import constants
from ganeti import errors

__all__ = ["check_diskparams"]

_TRUE = frozenset(["true", "yes", "y", "on", "1"])
_FALSE = frozenset(["false", "no", "n", "off", "0"])

#: integer parameters and their smallest value
_MINIMUM = {
    "stripes": 1, "data-stripes": 1, "meta-stripes": 1,
    "resync-rate": 1, "c-plan-ahead": 0, "c-fill-target": 0,
    "c-delay-target": 0, "c-max-rate": 0, "c-min-rate": 0,
    "port": 1,
}


def _fail(where, msg):
    raise errors.OpPrereqError("%s: %s" % (where, msg), errors.ECODE_INVAL)


def _typed(where, kind, value):
    if kind == "int":
        if isinstance(value, bool):
            _fail(where, "%r is not an integer" % (value,))
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value == int(value):
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        _fail(where, "%r is not an integer" % (value,))
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        _fail(where, "%r is not a boolean (true or false)" % (value,))
    if not isinstance(value, str):
        _fail(where, "%r is not a string" % (value,))
    return value


def _check_value(where, key, value):
    minimum = _MINIMUM.get(key)
    if minimum is not None and value < minimum:
        _fail(where, "%d is below the smallest value, %d" % (value, minimum))
    if key == constants.DRBD_PROTOCOL and \
            value not in constants.DRBD_VALID_PROTOCOLS:
        _fail(where, "'%s' is not a DRBD replication protocol (one of %s)"
              % (value, ", ".join(sorted(constants.DRBD_VALID_PROTOCOLS))))
    if key == constants.DRBD_DISK_BARRIERS:
        letters = set(value)
        if not value or not letters <= set("bdfn") or \
                ("n" in letters and len(letters) > 1):
            _fail(where, "'%s' is not 'n' or a combination of b (disk"
                  " barriers), d (drain) and f (flushes)" % value)
    if key == "access" and value not in constants.DISK_VALID_ACCESS_MODES:
        _fail(where, "'%s' is not an access mode (one of %s)"
              % (value, ", ".join(sorted(
                  constants.DISK_VALID_ACCESS_MODES))))
    if key == constants.DRBD_DEFAULT_METAVG and value:
        from ganeti.storage import lvm
        try:
            lvm.check_lvm_name(where, value)
        except errors.ParameterError as err:
            _fail(where, "'%s' is not a volume group name (%s)"
                  % (value, err.args[-1].split(": ", 1)[-1]))
    if key in (constants.DRBD_DISK_CUSTOM, constants.DRBD_NET_CUSTOM):
        import shlex
        try:
            shlex.split(value)
        except ValueError as err:
            _fail(where, "cannot split '%s' into options: %s"
                  % (value, err))
    return value


def check_diskparams(diskparams, field="diskparams", allow_default=False):
    """``{template: {name: value}}`` with every value converted to its
    parameter's type and checked; OpPrereqError (ECODE_INVAL) naming the
    template and parameter for an unknown template or parameter, a value
    of the wrong type or out of range.  With ``allow_default`` the value
    "default" (remove the parameter, for node groups) is kept as is."""
    if diskparams is None:
        return None
    if not isinstance(diskparams, dict):
        _fail(field, "must be a dictionary of disk templates, not %r"
              % (diskparams,))
    result = {}
    for template, params in sorted(diskparams.items()):
        known = constants.DISK_DT_DEFAULTS.get(template)
        if known is None:
            _fail(field, "'%s' is not a disk template" % template)
        if params is None:
            params = {}
        if not isinstance(params, dict):
            _fail("%s/%s" % (field, template), "must be a dictionary of"
                  " parameters, not %r" % (params,))
        unknown = sorted(set(params) - set(known))
        if unknown:
            _fail("%s/%s" % (field, template), "unknown parameter%s %s"
                  " (known: %s)" % ("s" if len(unknown) > 1 else "",
                                    ", ".join(unknown),
                                    ", ".join(sorted(known)) or "none"))
        checked = {}
        for key, value in sorted(params.items()):
            where = "%s/%s/%s" % (field, template, key)
            if allow_default and value == constants.VALUE_DEFAULT:
                checked[key] = value
                continue
            kind = constants.DISK_DT_TYPES.get(key, "string")
            checked[key] = _check_value(where, key,
                                        _typed(where, kind, value))
        if checked.get(constants.DRBD_DYNAMIC_RESYNC) is True and \
                checked.get(constants.DRBD_PLAN_AHEAD) == 0:
            _fail("%s/%s/%s" % (field, template, constants.DRBD_PLAN_AHEAD),
                  "0 switches the dynamic resync speed controller off; set"
                  " dynamic-resync to false instead")
        result[template] = checked
    return result
