"""Dynamic load data: measured utilisation of the instances, which the
score's load components use instead of the default weight of 1 per
instance.  It comes from a file (``hbal -U FILE``) or from the nodes'
monitoring daemons (their ``cpu-avg-load`` collector, see
:func:`apply_node_cpu`).

The file has one line per instance, ``NAME CPU MEM DISK NET``, separated
by single spaces, the four values decimal numbers; instances not named
keep the default and names not in the cluster are ignored, the last line
of a name wins (Ganeti's format and rules).
"""

import re

import attrs

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


def cpu_total(report):
    """The node's CPU load from a ``cpu-avg-load`` report (the report
    object or its ``data``); HtoolsError when it has none."""
    data = report.get("data", report) if isinstance(report, dict) else None
    value = data.get("cpu_total") if isinstance(data, dict) else None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or \
            value < 0:
        raise T.HtoolsError("cpu-avg-load: expected a non-negative"
                            " cpu_total, got %r" % (value,))
    return float(value)


def apply_node_cpu(cdata, loads):
    """Give the nodes of a finalized ``cdata`` their measured CPU load,
    ``loads`` being {node name: cpu_total of its cpu-avg-load report},
    as hbal does with the monitoring daemons' data: the node's load is
    that figure, shared among the node's own CPUs and its running
    primary instances by their virtual CPUs, so that an instance takes
    its share along when it moves.  Nodes without a figure keep the
    default weights."""
    for nd in cdata.nodes:
        total = loads.get(nd.name)
        if total is None or nd.offline:
            continue
        share = total / nd.u_cpu if nd.u_cpu > 0 else 0.0
        delta = nd.n_cpu * share
        for idx in nd.plist:
            inst = cdata.instances[idx]
            if not inst.not_offline:
                continue
            new = attrs.evolve(inst.util, cpu=inst.vcpus * share)
            delta += new.cpu - inst.util.cpu
            inst.util = new
        # the node's own share stays with it, and is part of its load
        nd.load_c += delta
        nd.loadf_c += delta
        nd.metrics_cache = None
