"""The ``hspace`` command: cluster capacity planning with Ganeti's
output (human or ``--machine-readable`` ``HTS_*`` keys)."""

import re
import sys

from ganeti.htools import alloc as A
from ganeti.htools import capplan as P
from ganeti.htools import cli
from ganeti.htools import score as S
from ganeti.htools import types as T
from ganeti.htools.text import fixed, show_double


def _parse_spec(value, what):
    parts = value.split(",")
    if len(parts) not in (3, 4):
        raise T.HtoolsError("Invalid %s specification '%s': expected"
                            " disk,ram,cpu[,spindles]" % (what, value))
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        raise T.HtoolsError("Invalid %s specification '%s': not a number"
                            % (what, value))
    spn = nums[3] if len(nums) == 4 else 1
    return P.RSpec(mem=nums[1], dsk=nums[0], cpu=nums[2], spn=spn)


def _parser(err):
    p = cli.Parser(prog="hspace", err_stream=err,
                   description="Cluster capacity planning")
    cli.add_source_options(p)
    p.add_argument("-p", "--print-nodes", dest="print_nodes",
                   action="store_true")
    p.add_argument("--disk-template", dest="disk_template", default=None)
    p.add_argument("--spindle-use", dest="spindle_use", type=int,
                   default=None)
    p.add_argument("--standard-alloc", dest="std_spec", default=None,
                   metavar="DISK,RAM,CPU")
    p.add_argument("--tiered-alloc", dest="tiered_spec", default=None,
                   metavar="DISK,RAM,CPU")
    p.add_argument("--machine-readable", dest="machine", nargs="?",
                   const="yes", default=None)
    p.add_argument("--independent-groups", action="store_true")
    p.add_argument("--accept-existing-errors", dest="accept_existing",
                   action="store_true")
    p.add_argument("--no-capacity-checks", action="store_true")
    p.add_argument("-l", "--max-length", dest="max_length", type=int,
                   default=-1)
    p.add_argument("-S", "--save", dest="save", default=None)
    return p


_SAFE = re.compile(r"^[A-Za-z0-9._-]*$")


def _kv(out, key, value):
    if not _SAFE.match(value):
        value = "'%s'" % value
    out.write("HTS_%s=%s\n" % (key, value))


def _stats(cs):
    def eff(a, b):
        return a / b if b else float("nan")
    return [
        ("SCORE", fixed(cs.score, 8)), ("INST_CNT", "%d" % cs.ninst),
        ("MEM_FREE", "%d" % cs.fmem), ("MEM_AVAIL", "%d" % cs.amem),
        ("MEM_RESVD", "%d" % (cs.fmem - cs.amem)),
        ("MEM_INST", "%d" % cs.imem),
        ("MEM_OVERHEAD", "%d" % (cs.xmem + cs.nmem)),
        ("MEM_EFF", fixed(eff(cs.imem, cs.tmem), 8)),
        ("DSK_FREE", "%d" % cs.fdsk), ("DSK_AVAIL", "%d" % cs.adsk),
        ("DSK_RESVD", "%d" % (cs.fdsk - cs.adsk)),
        ("DSK_INST", "%d" % cs.idsk),
        ("DSK_EFF", fixed(eff(cs.idsk, cs.tdsk), 8)),
        ("SPN_FREE", "%d" % cs.fspn), ("SPN_INST", "%d" % cs.ispn),
        ("SPN_EFF", fixed(eff(cs.ispn, cs.tspn), 8)),
        ("CPU_INST", "%d" % cs.icpu),
        ("CPU_EFF", fixed(eff(cs.icpu, cs.vcpu), 8)),
        ("MNODE_MEM_AVAIL", "%d" % cs.mmem),
        ("MNODE_DSK_AVAIL", "%d" % cs.mdsk),
    ]


def _effs(cs, spn):
    def eff(a, b):
        return a / b if b else float("nan")
    res = [("memory", eff(cs.imem, cs.tmem)),
           ("disk", eff(cs.idsk, cs.tdsk)),
           ("vcpu", eff(cs.icpu, cs.vcpu))]
    if spn:
        res.append(("spindles", eff(cs.ispn, cs.tspn)))
    return res


def _resources(pairs):
    return ", ".join("%s %s" % (a, b) for a, b in pairs)


def _spec_pairs(spec, spn):
    res = [("MEM", "%d" % spec.mem), ("DSK", "%d" % spec.dsk),
           ("CPU", "%d" % spec.cpu)]
    if spn:
        res.append(("SPN", "%d" % spec.spn))
    return res


def _spec_map(placed):
    res = []
    for inst in placed:
        sp = P.spec_of(inst)
        if res and res[-1][0] == sp:
            res[-1][1] += 1
        else:
            res.append([sp, 1])
    return res


class Report:
    def __init__(self, out, machine, excl):
        self.out = out
        self.machine = machine
        self.excl = excl

    def cluster(self, cs, nnodes):
        out = self.out
        if self.machine:
            for k, v in (("MEM", "%.0f" % cs.tmem),
                         ("DSK", "%.0f" % cs.tdsk),
                         ("CPU", "%.0f" % cs.tcpu), ("VCPU", "%d" % cs.vcpu),
                         ("SPN", "%.0f" % cs.tspn)):
                _kv(out, "CLUSTER_" + k, v)
            _kv(out, "CLUSTER_NODES", "%d" % nnodes)
            for k, v in _stats(cs):
                _kv(out, "INI_" + k, v)
            return
        pairs = [("MEM", "%.0f" % cs.tmem), ("DSK", "%.0f" % cs.tdsk),
                 ("CPU", "%.0f" % cs.tcpu), ("VCPU", "%d" % cs.vcpu)]
        if self.excl:
            pairs.append(("SPN", "%.0f" % cs.tspn))
        out.write("The cluster has %d nodes and the following resources:\n"
                  "  %s.\n" % (nnodes, _resources(pairs)))
        out.write("There are %s initial instances on the cluster.\n"
                  % (cs.ninst if cs.ninst > 0 else "no"))

    def ispec(self, spec, tiered, dt):
        out = self.out
        if self.machine:
            prefix = "TSPEC_INI" if tiered else "SPEC"
            for k, v in _spec_pairs(spec, True):
                _kv(out, "%s_%s" % (prefix, k), v)
            _kv(out, prefix + "_RQN", "%d" % A.required_nodes(dt))
            _kv(out, prefix + "_DISK_TEMPLATE", dt)
            return
        out.write("%s instance spec is:\n  %s, using disk template '%s'.\n"
                  % ("Tiered (initial size)" if tiered
                     else "Standard (fixed-size)",
                     _resources(_spec_pairs(spec, self.excl)), dt))

    def _scores(self, ini_score, fin_cs, reasons):
        out = self.out
        out.write("  - most likely failure reason: %s\n" % reasons[0][0])
        out.write("  - initial cluster score: %s\n" % fixed(ini_score, 8))
        out.write("  -   final cluster score: %s\n" % fixed(fin_cs.score, 8))
        effs = _effs(fin_cs, self.excl)
        width = max(len(n) for n, _ in effs)
        for name, v in effs:
            out.write("  - %*s usage efficiency: %5.2f%%\n"
                      % (width, name, float(fixed(v * 100, 2))))

    def tiered(self, ini_cs, trl_cs, spec_map, reasons):
        out = self.out
        if self.machine:
            for k, v in _stats(trl_cs):
                _kv(out, "TRL_" + k, v)
            _kv(out, "TSPEC", " ".join(
                "%d,%d,%d,%d=%d" % (s.mem, s.dsk, s.cpu, s.spn, c)
                for s, c in spec_map))
            for name, vals in (
                    ("USED", (ini_cs.icpu, ini_cs.ncpu, ini_cs.imem,
                              ini_cs.idsk, ini_cs.ispn)),
                    ("POOL", (trl_cs.icpu - ini_cs.icpu,
                              trl_cs.ncpu - ini_cs.ncpu,
                              trl_cs.imem - ini_cs.imem,
                              trl_cs.idsk - ini_cs.idsk,
                              trl_cs.ispn - ini_cs.ispn)),
                    ("UNAV", (trl_cs.vcpu - trl_cs.icpu,
                              trl_cs.tcpu - trl_cs.ncpu,
                              int(trl_cs.tmem) - trl_cs.imem,
                              int(trl_cs.tdsk) - trl_cs.idsk,
                              int(trl_cs.tspn) - trl_cs.ispn))):
                cpu, npu, mem, dsk, spn = vals
                _kv(out, "KM_%s_CPU" % name, "%d" % cpu)
                _kv(out, "KM_%s_NPU" % name, show_double(npu))
                _kv(out, "KM_%s_MEM" % name, "%d" % mem)
                _kv(out, "KM_%s_DSK" % name, "%d" % dsk)
                _kv(out, "KM_%s_SPN" % name, "%d" % spn)
            return
        out.write("Tiered allocation results:\n")
        if not spec_map:
            out.write("  - no instances allocated\n")
        for s, c in spec_map:
            out.write("  - %3d instances of spec %s\n"
                      % (c, _resources(_spec_pairs(s, self.excl))))
        self._scores(ini_cs.score, trl_cs, reasons)

    def standard(self, ini_cs, fin_cs, ninit, allocs, reasons):
        out = self.out
        if self.machine:
            for k, v in _stats(fin_cs):
                _kv(out, "FIN_" + k, v)
            _kv(out, "ALLOC_USAGE", fixed(ninit / (ninit + allocs)
                                          if ninit + allocs else 0, 8))
            _kv(out, "ALLOC_INSTANCES", "%d" % allocs)
            _kv(out, "ALLOC_FAIL_REASON", reasons[0][0].upper())
            for m, c in reasons:
                _kv(out, "ALLOC_%s_CNT" % m.upper(), "%d" % c)
            return
        out.write("Normal (fixed-size) allocation results:\n")
        out.write("  - %3d instances allocated\n" % allocs)
        self._scores(ini_cs.score, fin_cs, reasons)


def _sort_reasons(stats):
    return sorted(stats, key=lambda mc: -mc[1])


def main(argv=None, out=None, err=None):
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        opts = _parser(err).parse_args(sys.argv[1:] if argv is None
                                       else argv)
        return run(opts, out, err)
    except cli.ToolExit as e:
        return e.code
    except T.HtoolsError as e:
        err.write("Error: %s\n" % e)
        return 1


def run(opts, out, err):
    cd = cli.load_cluster(opts, err)
    machine = opts.machine not in (None, "no")
    cpol = cd.ipolicy
    if not cpol.disk_templates:
        raise T.HtoolsError("null list of disk templates received from"
                            " cluster")
    dt = opts.disk_template or cpol.disk_templates[0]
    if dt not in T.DISK_TEMPLATES:
        raise T.HtoolsError("Invalid disk template '%s'" % dt)
    su = opts.spindle_use if opts.spindle_use is not None \
        else cpol.std.spindle_use
    nodes = cd.nodes
    excl = any(nd.excl_storage for nd in nodes)
    ninit = len(cd.instances)
    report = Report(out, machine, excl)
    if opts.print_nodes:
        err.write("Initial cluster status:\n" + cli.print_nodes(nodes))
    ini_cs = P.total_resources(nodes)
    report.cluster(ini_cs, len(nodes))
    aopts = A.AllocOptions(capacity=not opts.no_capacity_checks,
                           accept_existing=opts.accept_existing)
    ctx = A.Context(cd, aopts)
    bad_nodes = [nd for nd in nodes if not nd.offline and nd.fail_n1]
    unalloc = {g.idx for g in cd.groups if g.alloc_policy == "unallocable"}
    if not opts.accept_existing:
        unalloc.update(nd.group for nd in bad_nodes)
    stop = bool(bad_nodes) and not opts.accept_existing
    if opts.independent_groups:
        from ganeti.htools import capacity
        bad_groups = []
        for g in cd.groups:
            idxs = [nd.idx for nd in nodes if nd.group == g.idx]
            if not capacity.redundant(ctx, idxs):
                bad_groups.append(g.idx)
        unalloc.update(bad_groups)
        aopts.capacity_ignore_groups = tuple(bad_groups)
        if any(g.idx not in unalloc for g in cd.groups):
            stop = False
    limit = None if opts.max_length == -1 else opts.max_length
    planner = P.Planner(cd, aopts, dt, {g.idx for g in cd.groups
                                        if g.idx not in unalloc})
    # tiered allocation
    if opts.tiered_spec:
        tspecs = [_parse_spec(opts.tiered_spec, "tiered")]
    else:
        tspecs = [P.rspec_from_ispec(mx) for _mn, mx in cpol.minmax]
    if not tspecs:
        raise T.HtoolsError("Empty list of specs received from the cluster")
    placed = []
    if stop:
        treasons = [(A.FAIL_MODES[3], 1)]
    else:
        stats = []
        for ts in tspecs:
            if limit is not None and limit <= len(placed):
                break
            stats = planner.tiered(
                P.make_instance(ts, dt, su), None if limit is None
                else limit - len(placed), placed)
        treasons = _sort_reasons(stats)
    report.ispec(tspecs[0], True, dt)
    trl_cs = P.total_resources(nodes)
    _save(opts, cd, "tiered", "after tiered allocation", err)
    report.tiered(ini_cs, trl_cs, _spec_map(placed), treasons)
    planner.reset()
    # standard allocation
    spec = _parse_spec(opts.std_spec, "standard") if opts.std_spec \
        else P.rspec_from_ispec(cpol.std)
    placed = []
    if stop:
        sreasons = [(A.FAIL_MODES[3], 1)]
    else:
        sreasons = _sort_reasons(planner.iterate(
            P.make_instance(spec, dt, su), limit, placed))
    report.ispec(spec, False, dt)
    fin_cs = P.total_resources(nodes)
    _save(opts, cd, "standard", "after standard allocation", err)
    if opts.print_nodes:
        err.write("Final cluster status:\n" + cli.print_nodes(nodes))
    report.standard(ini_cs, fin_cs, ninit, len(placed), sreasons)
    if machine:
        out.write("HTS_OK=1\n")
    return 0


def _save(opts, cd, suffix, what, err):
    if opts.save:
        cli.save_cluster(cd, opts.save, suffix, what, err)


if __name__ == "__main__":
    sys.exit(main())
