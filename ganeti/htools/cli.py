"""What the htools commands share: the cluster source options (-t, -I,
-m, -L), loading with Ganeti's messages, node tables and saving the
cluster state (-S)."""

import argparse
import sys

from ganeti.htools import backends, cluster, dynload, text
from ganeti.htools.text import fixed
from ganeti.htools import types as T


class ToolExit(Exception):
    """Stop the tool with an exit code (the message is already out)."""

    def __init__(self, code):
        Exception.__init__(self, code)
        self.code = code


def add_source_options(parser):
    parser.add_argument("-t", "--text-data", dest="data_file",
                        metavar="FILE", help="the cluster in the htools"
                        " text format")
    parser.add_argument("-I", "--ialloc-src", dest="ialloc_src",
                        metavar="FILE", help="the cluster from an"
                        " iallocator request")
    parser.add_argument("-m", dest="rapi", metavar="CLUSTER",
                        help="read the cluster through the remote API"
                        " (or file://DIR)")
    parser.add_argument("-L", "--luxi", dest="luxi", nargs="?",
                        const="", default=None, metavar="SOCKET",
                        help="read the cluster from the master daemon")
    parser.add_argument("-O", "--offline", dest="offline", action="append",
                        default=[], metavar="NODE",
                        help="treat the node as offline")
    parser.add_argument("--exclusion-tags", dest="extags", default=None,
                        metavar="TAG,...", help="exclusion tag prefixes")
    parser.add_argument("--select-instances", dest="sel_inst",
                        default=None, metavar="INST,...")
    parser.add_argument("--exclude-instances", dest="ex_inst",
                        default=None, metavar="INST,...")
    parser.add_argument("--max-cpu", dest="max_cpu", type=float,
                        default=None, metavar="RATIO",
                        help="maximum virtual-to-physical cpu ratio")
    parser.add_argument("--min-disk", dest="min_disk", type=float,
                        default=None, metavar="RATIO",
                        help="minimum free disk space ratio")
    parser.add_argument("-v", "--verbose", dest="verbose",
                        action="count", default=1)
    parser.add_argument("-q", "--quiet", dest="quiet", action="count",
                        default=0)


def default_luxi_socket():
    from ganeti import pathutils
    return pathutils.Paths("/").master_socket


def load_raw(opts):
    """The unfinalised cluster from the selected source."""
    sources = [x for x in (opts.data_file, opts.ialloc_src, opts.rapi)
               if x is not None]
    if opts.luxi is not None:
        sources.append(opts.luxi)
    if len(sources) > 1:
        raise T.HtoolsError("Only one of the cluster sources -t, -I, -m"
                            " and -L may be given")
    if opts.data_file is not None:
        return text.load_text_file(opts.data_file)
    if opts.ialloc_src is not None:
        return backends.load_ialloc_file(opts.ialloc_src)
    if opts.rapi is not None:
        return backends.load_rapi(opts.rapi)
    sock = opts.luxi or default_luxi_socket()
    client = getattr(opts, "luxi_client", None)
    return backends.load_luxi(
        sock, (lambda _path: client) if client is not None else None)


def _split(v):
    return [x for x in v.split(",") if x] if v else []


def load_cluster(opts, err):
    """Load and finalise the cluster; ``Error: ...`` and exit 1 on bad
    data, the inconsistency warnings on ``err``."""
    try:
        cd = load_raw(opts)
        for name in opts.offline:
            nd = cd.node_by_name.get(name)
            if nd is None:
                raise T.HtoolsError("Unknown node(s): %s" % name)
            nd.offline = True
        util_file = getattr(opts, "util_file", None)
        if util_file is not None:
            try:
                dynload.apply(cd, dynload.load_file(util_file))
            except T.HtoolsError as e:
                err.write("Error: can't parse utilisation data: %s\n" % e)
                raise ToolExit(1)
        cluster.finalize(cd, extags=_split(opts.extags),
                         selected=_split(opts.sel_inst),
                         excluded=_split(opts.ex_inst),
                         mdsk=opts.min_disk, mcpu=opts.max_cpu)
    except T.HtoolsError as e:
        err.write("Error: failed to load data, aborting: %s\n" % e)
        raise ToolExit(1)
    if cd.warnings:
        err.write("Warning: cluster has inconsistent data:\n")
        for msg in cd.warnings:
            err.write("  - %s\n" % msg)
        err.write("\n")
    return cd


NODE_FIELDS = ["status", "name", "tmem", "nmem", "imem", "xmem", "fmem",
               "umem", "rmem", "tdsk", "fdsk", "tcpu", "ucpu", "pcnt",
               "scnt", "pfmem", "pfdsk", "rcpu", "cload", "mload", "dload",
               "nload"]
_HEADERS = {"status": "F", "name": "Name", "tmem": "t_mem",
            "nmem": "n_mem", "imem": "i_mem", "xmem": "x_mem",
            "fmem": "f_mem", "umem": "u_mem", "rmem": "r_mem",
            "tdsk": "t_dsk", "fdsk": "f_dsk", "tcpu": "pcpu",
            "ucpu": "vcpu", "pcnt": "pcnt", "scnt": "scnt",
            "pfmem": "p_fmem", "pfdsk": "p_fdsk", "rcpu": "r_cpu",
            "cload": "lCpu", "mload": "lMem", "dload": "lDsk",
            "nload": "lNet"}


def _node_field(nd, f):
    if f == "status":
        return "-" if nd.offline else ("*" if nd.fail_n1 else " ")
    if f == "name":
        return nd.alias
    if f == "tmem":
        return "%5.0f" % nd.t_mem
    if f == "nmem":
        return "%5d" % nd.n_mem
    if f == "imem":
        return "%5d" % nd.i_mem
    if f == "xmem":
        return "%5d" % nd.x_mem
    if f == "fmem":
        return "%5d" % nd.f_mem
    if f == "umem":
        return "%5d" % nd.unallocated_mem()
    if f == "rmem":
        return "%5d" % nd.r_mem
    if f == "tdsk":
        return "%5.0f" % (nd.t_dsk / 1024)
    if f == "fdsk":
        return "%5d" % (nd.f_dsk // 1024)
    if f == "tcpu":
        return "%4.0f" % nd.t_cpu
    if f == "ucpu":
        return "%4d" % nd.u_cpu
    if f == "pcnt":
        return "%3d" % len(nd.plist)
    if f == "scnt":
        return "%3d" % len(nd.slist)
    if f == "pfmem":
        return fixed(nd.p_mem(), 4).rjust(6)
    if f == "pfdsk":
        return fixed(nd.p_dsk(), 4).rjust(6)
    if f == "rcpu":
        return fixed(nd.p_cpu(), 2).rjust(5)
    if f in ("cload", "mload", "dload", "nload"):
        return fixed(getattr(nd, "load_" + f[0]), 3).rjust(5)
    raise T.HtoolsError("Unknown field '%s'" % f)


def format_table(header, rows, numeric):
    widths = [max([len(h)] + [len(r[i]) for r in rows])
              for i, h in enumerate(header)]
    out = []
    for row in [header] + rows:
        cells = []
        for i, c in enumerate(row):
            if numeric[i]:
                cells.append(c.rjust(widths[i]))
            else:
                cells.append(c.ljust(widths[i]))
        out.append(" " + " ".join(cells).rstrip())
    return "\n".join(out) + "\n"


def print_nodes(nodes, fields=None):
    fields = fields or NODE_FIELDS
    rows = [[_node_field(nd, f) for f in fields]
            for nd in sorted(nodes, key=lambda n: n.idx)]
    numeric = [f not in ("status", "name") for f in fields]
    return format_table([_HEADERS.get(f, f) for f in fields], rows,
                        numeric)


def print_instances(nodes, instances):
    """Ganeti's instance map table."""
    header = ["F", "Name", "Pri_node", "Sec_node", "Auto_bal", "vcpu",
              "mem", "dsk", "lCpu", "lMem", "lDsk", "lNet"]
    rows = []
    for inst in sorted(instances, key=lambda i: i.idx):
        u = inst.util
        rows.append([
            "R" if inst.is_running() else " ", inst.name,
            nodes[inst.pnode].name,
            nodes[inst.snode].name if inst.snode >= 0 else "",
            "Y" if inst.auto_balance else "N", "%3d" % inst.vcpus,
            "%5d" % inst.mem, "%5d" % (inst.dsk // 1024),
            fixed(u.cpu, 3), fixed(u.mem, 3), fixed(u.dsk, 3),
            fixed(u.net, 3)])
    return format_table(header, rows, [False] * 5 + [True] * 7)


def save_cluster(cdata, prefix, suffix, what, err):
    path = "%s.%s" % (prefix, suffix)
    with open(path, "w") as f:
        f.write(text.serialize_cluster(cdata))
    err.write("The cluster state %s has been written to file '%s'\n"
              % (what, path))


class Parser(argparse.ArgumentParser):
    """argparse with Ganeti-style errors (exit 1... 2 for usage)."""

    def __init__(self, *args, **kwargs):
        self.err_stream = kwargs.pop("err_stream", sys.stderr)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.err_stream.write("Error: %s\n" % message)
        raise ToolExit(2)
