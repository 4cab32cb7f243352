"""The ``hail`` command: Ganeti's iallocator as a program.

``hail FILE`` (``-`` for standard input) reads an iallocator input
document and prints the answer as one JSON line (exit 0); malformed
input gives a message on standard error and exit 1.
"""

import json
import sys

from ganeti.htools import alloc as A
from ganeti.htools import cli
from ganeti.htools import iallocator as IA
from ganeti.htools import types as T


def _parser(err):
    p = cli.Parser(prog="hail", err_stream=err,
                   description="Ganeti's iallocator (allocation,"
                   " relocation, evacuation, group change)")
    p.add_argument("input", nargs="?", help="the request file, - for"
                   " standard input")
    p.add_argument("-p", "--print-nodes", dest="print_nodes",
                   action="store_true", help="print the node tables"
                   " before and after (standard error)")
    p.add_argument("-t", "--text-data", dest="data_file", metavar="FILE",
                   help="take the cluster from a text file instead of"
                   " the request")
    p.add_argument("-S", "--save", dest="save", metavar="PREFIX",
                   help="save the cluster before and after as"
                   " PREFIX.pre-ialloc and PREFIX.post-ialloc")
    p.add_argument("--ignore-soft-errors", action="store_true",
                   help="ignore soft errors (N+1, cpu ratio, tags...)")
    p.add_argument("--no-capacity-checks", action="store_true",
                   help="do not require global N+1 redundancy")
    p.add_argument("--restrict-allocation-to", dest="restrict",
                   metavar="NODE,...", help="allocate only on these"
                   " nodes")
    p.add_argument("-v", "--verbose", action="count", default=0)
    return p


def main(argv=None, out=None, err=None, stdin=None):
    out = out or sys.stdout
    err = err or sys.stderr
    stdin = stdin or sys.stdin
    try:
        opts = _parser(err).parse_args(sys.argv[1:] if argv is None
                                       else argv)
    except cli.ToolExit as e:
        return e.code
    if opts.input is None:
        err.write("Error: This program needs an input file.\n")
        return 1
    try:
        if opts.input == "-":
            raw = stdin.read()
        else:
            with open(opts.input) as f:
                raw = f.read()
    except OSError as e:
        err.write("Error: cannot read %s: %s\n" % (opts.input, e.strerror))
        return 1
    try:
        doc = json.loads(raw)
    except ValueError as e:
        err.write("Error: Parsing input IAllocator message: %s\n" % e)
        return 1
    aopts = A.AllocOptions(
        ignore_soft_errors=opts.ignore_soft_errors,
        capacity=not opts.no_capacity_checks,
        restrict_to_nodes=[x for x in opts.restrict.split(",") if x]
        if opts.restrict else None)
    try:
        cd, req = IA.load(doc)
    except IA.BadRequest as e:
        err.write("Error: invalid iallocator input: %s\n" % e)
        return 1
    if opts.data_file:
        try:
            from ganeti.htools import cluster, text
            cd = cluster.finalize(text.load_text_file(opts.data_file))
        except T.HtoolsError as e:
            err.write("Error: %s\n" % e)
            return 1
    if cd.warnings:
        err.write("Warning: cluster has inconsistent data:\n")
        for msg in cd.warnings:
            err.write("  - %s\n" % msg)
        err.write("\n")
    if opts.print_nodes:
        err.write("Initial cluster status:\n")
        err.write(cli.print_nodes(cd.nodes))
    if opts.save:
        cli.save_cluster(cd, opts.save, "pre-ialloc",
                         "before iallocator run", err)
    try:
        ans = IA.process(cd, req, aopts)
    except IA.BadRequest as e:
        err.write("Error: invalid request: %s\n" % e)
        return 1
    out.write(json.dumps(ans, separators=(",", ":")) + "\n")
    if opts.print_nodes:
        err.write("Final cluster status:\n")
        err.write(cli.print_nodes(cd.nodes))
    if opts.save:
        cli.save_cluster(cd, opts.save, "post-ialloc",
                         "after iallocator run", err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
