"""Dynamic load data (``hbal -U FILE``): measured utilisation of the
instances, which the score's load components use instead of the default
weight of 1 per instance.

The file has one line per instance, ``NAME CPU MEM DISK NET``, separated
by single spaces, the four values decimal numbers; instances not named
keep the default and names not in the cluster are ignored, the last line
of a name wins (Ganeti's format and rules).
"""

import re

from ganeti.htools import types as T

_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?\Z")


def parse(text):
    """{instance name: DynUtil} from the file's text; HtoolsError naming
    the line or the value that cannot be read."""
    loads = {}
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) != 5:
            raise T.HtoolsError("Cannot parse line %s" % line)
        name = fields[0]
        values = []
        for raw in fields[1:]:
            if not _NUMBER.match(raw):
                raise T.HtoolsError("%s: cannot parse string '%s'"
                                    % (name, raw))
            values.append(float(raw))
        loads[name] = T.DynUtil(*values)
    return loads


def apply(cdata, loads):
    """Give the instances of ``cdata`` (before ``cluster.finalize``
    places them) their loads."""
    for inst in cdata.instances:
        util = loads.get(inst.name)
        if util is not None:
            inst.util = util


def load_file(path):
    return parse(T.read_input(path))
