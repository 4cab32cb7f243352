"""An instance export's description: the ``config.ini`` of an export
directory, in Ganeti's export format (version 0).

Sections and keys (all values are text; Ganeti writes ``None`` for a
missing value):

``[export]``
    ``version``, ``timestamp`` (seconds), ``source`` (the node the instance
    was on), ``os``, ``compression`` (``none`` or ``gzip``: how the dump
    files are stored).
``[instance]``
    ``name``, ``maxmem``, ``minmem``, ``memory`` (= maxmem, for old
    readers), ``vcpus``, ``disk_template``, ``hypervisor``, ``tags``
    (space separated); per NIC ``nic<N>_mac``, ``nic<N>_ip``,
    ``nic<N>_network``, ``nic<N>_name`` and the NIC parameters
    ``nic<N>_mode``, ``nic<N>_link``, ``nic<N>_vlan``; ``nic_count``; per
    disk ``disk<N>_ivname``, ``disk<N>_dump`` (the dump file's name in the
    export directory), ``disk<N>_size`` (MiB), ``disk<N>_name``;
    ``disk_count``.
``[hypervisor]``, ``[backend]``, ``[os]``, ``[os_private]``
    the instance's own hypervisor, backend and OS parameters.

:func:`build` writes one, :func:`parse` reads one (also one written by
Ganeti) and checks what an import needs; a bad file raises
``OpPrereqError`` naming the key and the reason.
"""

import configparser
import io
import re

from ganeti import constants
from ganeti import errors

__all__ = ["ExportInfo", "build", "parse", "CONFIG_FILE", "COMPRESSIONS",
           "SECT_EXPORT", "SECT_INSTANCE", "SECT_HV", "SECT_BE", "SECT_OS",
           "SECT_OS_PRIVATE"]

#: the description's file name in an export directory
CONFIG_FILE = "config.ini"
SECT_EXPORT = "export"
SECT_INSTANCE = "instance"
SECT_HV = "hypervisor"
SECT_BE = "backend"
SECT_OS = "os"
SECT_OS_PRIVATE = "os_private"
#: how dump files may be stored
COMPRESSIONS = ("none", "gzip")
#: the NIC parameters written per NIC
NIC_PARAMS = (constants.NIC_MODE, constants.NIC_LINK, constants.NIC_VLAN)

_NONE = "None"


def _text(value):
    return _NONE if value is None else str(value)


def _parser():
    # keys keep their case (hypervisor parameters are lower case anyway,
    # but OS parameters need not be)
    p = configparser.RawConfigParser()
    p.optionxform = str
    return p


def build(instance, disks, nics, source, timestamp, compression,
          dump_names, tags=()):
    """The text of a config.ini.

    ``instance``: dict with ``name``, ``os``, ``hypervisor``,
    ``disk_template``, ``beparams`` (filled: maxmem, minmem, vcpus...),
    ``hvparams``, ``osparams``, ``osparams_private`` (the instance's own);
    ``disks``: dicts with ``iv_name``, ``size``, ``name``; ``nics``: dicts
    with ``mac``, ``ip``, ``network``, ``name`` and ``nicparams``;
    ``dump_names``: the dump file of each disk.
    """
    if compression not in COMPRESSIONS:
        raise errors.ProgrammerError("unknown compression %r" % compression)
    p = _parser()
    p.add_section(SECT_EXPORT)
    p.set(SECT_EXPORT, "version", str(constants.EXPORT_VERSION))
    p.set(SECT_EXPORT, "timestamp", "%d" % int(timestamp))
    p.set(SECT_EXPORT, "source", _text(source))
    p.set(SECT_EXPORT, "os", _text(instance.get("os")))
    p.set(SECT_EXPORT, "compression", compression)
    be = instance.get("beparams") or {}
    p.add_section(SECT_INSTANCE)
    s = SECT_INSTANCE
    p.set(s, "name", instance["name"])
    p.set(s, "maxmem", _text(be.get(constants.BE_MAXMEM)))
    p.set(s, "minmem", _text(be.get(constants.BE_MINMEM)))
    p.set(s, "memory", _text(be.get(constants.BE_MAXMEM)))
    p.set(s, "vcpus", _text(be.get(constants.BE_VCPUS)))
    p.set(s, "disk_template", _text(instance.get("disk_template")))
    p.set(s, "hypervisor", _text(instance.get("hypervisor")))
    p.set(s, "tags", " ".join(sorted(tags)))
    for idx, nic in enumerate(nics):
        p.set(s, "nic%d_mac" % idx, _text(nic.get("mac")))
        p.set(s, "nic%d_ip" % idx, _text(nic.get("ip")))
        p.set(s, "nic%d_network" % idx, _text(nic.get("network")))
        p.set(s, "nic%d_name" % idx, _text(nic.get("name")))
        params = nic.get("nicparams") or {}
        for key in NIC_PARAMS:
            p.set(s, "nic%d_%s" % (idx, key), _text(params.get(key)))
    p.set(s, "nic_count", "%d" % len(nics))
    for idx, (disk, dump) in enumerate(zip(disks, dump_names)):
        p.set(s, "disk%d_ivname" % idx, _text(disk.get("iv_name")))
        p.set(s, "disk%d_dump" % idx, dump)
        p.set(s, "disk%d_size" % idx, "%d" % disk["size"])
        p.set(s, "disk%d_name" % idx, _text(disk.get("name")))
    p.set(s, "disk_count", "%d" % len(disks))
    for section, key in ((SECT_HV, "hvparams"), (SECT_BE, "beparams"),
                         (SECT_OS, "osparams"),
                         (SECT_OS_PRIVATE, "osparams_private")):
        p.add_section(section)
        for name, value in sorted((instance.get(key) or {}).items()):
            p.set(section, name, _text(value))
    out = io.StringIO()
    p.write(out)
    return out.getvalue()


def _bad(what, reason):
    return errors.OpPrereqError("export description (%s): %s: %s"
                                % (CONFIG_FILE, what, reason),
                                errors.ECODE_INVAL)


_DUMP_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


class ExportInfo(object):
    """A parsed config.ini; :func:`parse` makes one."""

    def __init__(self, parser):
        self._p = parser

    def get(self, section, key, default=None):
        """The value, None for Ganeti's ``None`` text, else ``default``."""
        if not self._p.has_option(section, key):
            return default
        value = self._p.get(section, key)
        return None if value == _NONE else value

    def _int(self, section, key, required=False, minimum=0):
        value = self.get(section, key)
        if value is None or value == "":
            if required:
                raise _bad("[%s] %s" % (section, key), "missing")
            return None
        try:
            number = int(value)
        except ValueError:
            raise _bad("[%s] %s" % (section, key),
                       "%r is not a whole number" % value)
        if number < minimum:
            raise _bad("[%s] %s" % (section, key),
                       "%d is less than %d" % (number, minimum))
        return number

    def section(self, name):
        """A parameter section as a dict (``None`` values kept as None)."""
        if not self._p.has_section(name):
            return {}
        return {k: (None if v == _NONE else v)
                for k, v in self._p.items(name)}

    @property
    def version(self):
        return self._int(SECT_EXPORT, "version", required=True)

    @property
    def name(self):
        return self.get(SECT_INSTANCE, "name")

    @property
    def os(self):
        return self.get(SECT_EXPORT, "os")

    @property
    def source(self):
        return self.get(SECT_EXPORT, "source")

    @property
    def timestamp(self):
        return self._int(SECT_EXPORT, "timestamp")

    @property
    def compression(self):
        return self.get(SECT_EXPORT, "compression") or "none"

    @property
    def disk_template(self):
        return self.get(SECT_INSTANCE, "disk_template")

    @property
    def hypervisor(self):
        return self.get(SECT_INSTANCE, "hypervisor")

    @property
    def tags(self):
        return (self.get(SECT_INSTANCE, "tags") or "").split()

    def disks(self):
        """``[{"size", "dump", "iv_name", "name"}]`` in index order."""
        count = self._int(SECT_INSTANCE, "disk_count", required=True)
        result = []
        for idx in range(count):
            size = self._int(SECT_INSTANCE, "disk%d_size" % idx,
                             required=True, minimum=1)
            dump = self.get(SECT_INSTANCE, "disk%d_dump" % idx)
            if not dump:
                raise _bad("[instance] disk%d_dump" % idx, "missing")
            if not _DUMP_RE.match(dump):
                raise _bad("[instance] disk%d_dump" % idx,
                           "%r is not a plain file name" % dump)
            result.append({"size": size, "dump": dump,
                           "iv_name": self.get(SECT_INSTANCE,
                                               "disk%d_ivname" % idx),
                           "name": self.get(SECT_INSTANCE,
                                            "disk%d_name" % idx)})
        return result

    def nics(self):
        """``[{"mac", "ip", "network", "name", "mode", "link", "vlan"}]``
        (values None where the export has none)."""
        count = self._int(SECT_INSTANCE, "nic_count", required=True)
        result = []
        for idx in range(count):
            nic = {}
            for key in ("mac", "ip", "network", "name") + NIC_PARAMS:
                nic[key] = self.get(SECT_INSTANCE, "nic%d_%s" % (idx, key))
            result.append(nic)
        return result

    def beparams(self):
        """The backend parameters; an old export's ``memory``/``vcpus``
        from [instance] where [backend] has none."""
        be = {k: v for k, v in self.section(SECT_BE).items()
              if v is not None}
        if constants.BE_MAXMEM not in be and \
                constants.BE_MEMORY not in be:
            for key in ("maxmem", "memory"):
                value = self.get(SECT_INSTANCE, key)
                if value:
                    be[constants.BE_MAXMEM] = value
                    break
        if constants.BE_MINMEM not in be and constants.BE_MEMORY not in be:
            value = self.get(SECT_INSTANCE, "minmem")
            if value:
                be[constants.BE_MINMEM] = value
        if constants.BE_VCPUS not in be:
            value = self.get(SECT_INSTANCE, "vcpus")
            if value:
                be[constants.BE_VCPUS] = value
        return be

    def check(self):
        """Everything an import reads must be there and make sense."""
        for section in (SECT_EXPORT, SECT_INSTANCE):
            if not self._p.has_section(section):
                raise _bad("[%s]" % section, "section missing")
        if self.version != constants.EXPORT_VERSION:
            raise _bad("[export] version", "version %s is not supported"
                       " (this cluster reads version %d)"
                       % (self.version, constants.EXPORT_VERSION))
        if not self.name:
            raise _bad("[instance] name", "missing")
        if self.compression not in COMPRESSIONS:
            raise _bad("[export] compression", "%r is not one of %s"
                       % (self.compression, ", ".join(COMPRESSIONS)))
        self.disks()
        self.nics()
        return self


def parse(text):
    """An :class:`ExportInfo` from config.ini text; OpPrereqError if it is
    not one."""
    p = _parser()
    try:
        p.read_string(text)
    except configparser.Error as err:
        raise _bad("file", "cannot be parsed: %s"
                   % str(err).splitlines()[0])
    return ExportInfo(p).check()
