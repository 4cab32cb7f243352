"""The cluster's default allocators: an ordered list per request type.

Ganeti keeps one name, ``default_iallocator``, in config.data.  This
project keeps the same field (a config.data written by Ganeti, where it is
``"hail"`` or empty, means exactly what it meant there) and lets it hold
more:

* ``hail`` — one allocator for every request type (Ganeti's meaning);
* ``hail,spare`` — for every type, ``hail`` first and ``spare`` when
  ``hail`` gives no answer;
* ``hail;relocate=spare,hail;node-evacuate=`` — after the list for every
  type, ``;``-separated overrides per request type; an empty override
  means "no default allocator for this type".

Allocator names follow Ganeti's rule for external scripts (letters, digits,
``_`` and ``-``), so the separators can never be part of a name.
"""

import re

import attr

from ganeti import errors
from ganeti.iallocator import requests

__all__ = ["NAME_RE", "DefaultAllocators", "check_name", "parse_names",
           "parse_spec"]

#: what an allocator name may be (Ganeti's mask for external scripts)
NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def check_name(name, field):
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise errors.OpPrereqError(
            "%s: '%s' is not a valid allocator name (letters, digits, '_'"
            " and '-' only)" % (field, name), errors.ECODE_INVAL)
    return name


def parse_names(text, field):
    """``"a,b"`` as ``("a", "b")``; ``""`` as ``()``."""
    if text is None:
        return ()
    names = [n.strip() for n in text.split(",")]
    if names == [""]:
        return ()
    result = []
    for name in names:
        check_name(name, field)
        if name in result:
            raise errors.OpPrereqError("%s: allocator '%s' is listed twice"
                                       % (field, name), errors.ECODE_INVAL)
        result.append(name)
    return tuple(result)


@attr.s(frozen=True)
class DefaultAllocators(object):
    """The list for every request type and the per-type overrides."""
    common = attr.ib(default=())
    #: request type -> tuple of names (an empty tuple: none for that type)
    per_mode = attr.ib(factory=dict)

    def for_mode(self, mode):
        """The allocators tried, in order, for a request of ``mode``."""
        if mode in self.per_mode:
            return self.per_mode[mode]
        return self.common

    def as_dict(self):
        """``{request type: [names]}`` for every type (cluster info)."""
        return {mode: list(self.for_mode(mode)) for mode in requests.MODES}

    def first(self):
        """The one name Ganeti's clients see as ``default_iallocator``:
        the first allocator for new instances."""
        names = self.for_mode(requests.MODE_ALLOC)
        return names[0] if names else ""

    def to_spec(self):
        """The text stored in config.data's ``default_iallocator``."""
        parts = [",".join(self.common)]
        for mode in requests.MODES:
            if mode in self.per_mode:
                parts.append("%s=%s" % (mode, ",".join(self.per_mode[mode])))
        text = ";".join(parts)
        return text

    def replace(self, common=None, per_mode=None):
        """A copy with ``common`` replaced (if given) and ``per_mode``
        applied: a mode mapped to None goes back to the common list."""
        new_common = self.common if common is None else tuple(common)
        new_per_mode = dict(self.per_mode)
        for mode, names in (per_mode or {}).items():
            if names is None:
                new_per_mode.pop(mode, None)
            else:
                new_per_mode[mode] = tuple(names)
        return DefaultAllocators(common=new_common, per_mode=new_per_mode)


def parse_spec(text, field="default_iallocator"):
    """The stored (or given) text as :class:`DefaultAllocators`; an
    OpPrereqError naming ``field`` if it is malformed."""
    if not text:
        return DefaultAllocators()
    if not isinstance(text, str):
        raise errors.OpPrereqError("%s: expected a string, got %r"
                                   % (field, text), errors.ECODE_INVAL)
    parts = text.split(";")
    common = ()
    per_mode = {}
    for idx, part in enumerate(parts):
        part = part.strip()
        if "=" in part:
            mode, _, names = part.partition("=")
            mode = mode.strip()
            if mode not in requests.MODES:
                raise errors.OpPrereqError(
                    "%s: '%s' is not a request type (one of %s)"
                    % (field, mode, ", ".join(requests.MODES)),
                    errors.ECODE_INVAL)
            if mode in per_mode:
                raise errors.OpPrereqError(
                    "%s: request type '%s' is given twice" % (field, mode),
                    errors.ECODE_INVAL)
            per_mode[mode] = parse_names(names, "%s (%s)" % (field, mode))
        elif idx == 0:
            common = parse_names(part, field)
        else:
            raise errors.OpPrereqError(
                "%s: '%s' must be TYPE=NAME[,NAME...] (only the first part"
                " may be a plain list)" % (field, part), errors.ECODE_INVAL)
    return DefaultAllocators(common=common, per_mode=per_mode)
