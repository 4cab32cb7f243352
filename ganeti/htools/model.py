"""The htools cluster model: node groups, nodes and instances.

Nodes are mutable and keep every derived value (free memory fraction,
reserved memory for N+1, CPU ratio, loads, tag maps...) up to date when an
instance is added or removed, in O(1) (removing the secondary that held
the largest failover reservation rescans the node's peers).  The balancer
and the allocator try a candidate change by applying it to the 2-4 nodes
it touches, reading their new metrics, and undoing it (see
``Node.save``/``Node.restore`` and ``ganeti.htools.moves``).

The semantics are Ganeti's: "state of record" memory (``i_mem``, the
memory of the running instances) against the memory the node reports
(``f_mem``), unaccounted memory ``x_mem``, the ``*_forth`` values that
include forthcoming instances, and the same admission checks
(``add_pri``/``add_sec`` return a failure mode or None).
"""

from ganeti.htools import types as T

# failure modes, as Ganeti names them
FAIL_MEM = "FailMem"
FAIL_DISK = "FailDisk"
FAIL_CPU = "FailCPU"
FAIL_N1 = "FailN1"
FAIL_TAGS = "FailTags"
FAIL_SPINDLES = "FailSpindles"
FAIL_MIG = "FailMig"
FAIL_INTERNAL = "FailInternal"

NO_SECONDARY = -1


def _div(a, b):
    """Floating division with IEEE results for a zero divisor (as Ganeti's
    Doubles behave), so a degenerate node does not crash the tools."""
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0:
            return float("nan")
        return float("inf") if a > 0 else float("-inf")


class Group:
    """A node group."""

    __slots__ = ("name", "uuid", "alloc_policy", "tags", "networks",
                 "ipolicy", "idx")

    def __init__(self, name, uuid, alloc_policy="preferred", tags=(),
                 networks=(), ipolicy=T.DEFAULT_IPOLICY, idx=-1):
        self.name = name
        self.uuid = uuid
        self.alloc_policy = alloc_policy
        self.tags = list(tags)
        self.networks = list(networks)
        self.ipolicy = ipolicy
        self.idx = idx

    def __repr__(self):
        return "<Group %s %s>" % (self.name, self.uuid)


class Instance:
    """An instance as htools see it.

    ``pnode``/``snode`` are node indices (``NO_SECONDARY`` when none).
    ``forthcoming`` instances (reservations) occupy resources like real
    ones but only in the ``*_forth`` metrics; moving them is free.
    """

    __slots__ = ("name", "alias", "mem", "dsk", "vcpus", "status", "pnode",
                 "snode", "idx", "util", "movable", "auto_balance",
                 "disk_template", "spindle_use", "tags", "excl_tags",
                 "dsrd_loc_tags", "location_score", "disk_sizes",
                 "disk_spindles", "forthcoming", "nics",
                 # derived, fixed for the instance's life
                 "uses_memory", "not_offline", "uses_sec_mem",
                 "uses_local_storage", "has_secondary", "mirror",
                 "total_spindles")

    def __init__(self, name, mem, dsk, vcpus, status, tags, auto_balance,
                 pnode, snode, disk_template, spindle_use=1,
                 disk_spindles=None, forthcoming=False, disk_sizes=None,
                 util=T.BASE_UTIL, idx=-1):
        if status not in T.INSTANCE_STATUSES:
            raise T.HtoolsError("Invalid instance status '%s' for instance"
                                " %s" % (status, name))
        if disk_template not in T.DISK_TEMPLATES:
            raise T.HtoolsError("Invalid disk template '%s' for instance"
                                " %s" % (disk_template, name))
        self.name = name
        self.alias = name
        self.mem = mem
        self.dsk = dsk
        self.vcpus = vcpus
        self.status = status
        self.pnode = pnode
        self.snode = snode
        self.idx = idx
        self.util = util
        self.movable = disk_template in T.MOVABLE_TEMPLATES
        self.auto_balance = auto_balance
        self.disk_template = disk_template
        self.spindle_use = spindle_use
        self.tags = list(tags)
        self.excl_tags = []
        self.dsrd_loc_tags = frozenset()
        self.location_score = 0
        self.disk_sizes = list(disk_sizes) if disk_sizes is not None \
            else [dsk]
        # per-disk spindles (None entries when unknown)
        self.disk_spindles = list(disk_spindles) \
            if disk_spindles is not None else [None]
        self.forthcoming = forthcoming
        self.nics = []
        self._derive()

    def _derive(self):
        self.not_offline = self.status != T.OFFLINE_STATUS
        self.uses_memory = (not self.forthcoming
                            and self.status in T.RUNNING_STATUSES)
        self.has_secondary = self.disk_template == T.DT_DRBD
        self.uses_sec_mem = self.not_offline and self.auto_balance
        self.uses_local_storage = \
            self.disk_template in T.LOCAL_STORAGE_TEMPLATES
        self.mirror = T.mirror_type(self.disk_template)
        sp = self.disk_spindles
        if sp and all(s is not None for s in sp):
            self.total_spindles = sum(sp)
        else:
            self.total_spindles = None

    def set_status(self, status):
        self.status = status
        self._derive()

    def instance_down(self):
        return (self.status not in T.RUNNING_STATUSES
                and self.status != T.OFFLINE_STATUS)

    def is_running(self):
        return self.status in T.RUNNING_STATUSES

    def all_nodes(self):
        if self.has_secondary:
            return [self.pnode, self.snode]
        return [self.pnode]

    def __repr__(self):
        return "<Instance %s p=%d s=%d>" % (self.name, self.pnode,
                                            self.snode)


def _add_tags(tmap, keys):
    for k in keys:
        tmap[k] = tmap.get(k, 0) + 1


def _del_tags(tmap, keys):
    for k in keys:
        v = tmap.get(k)
        if v is None:
            continue
        if v > 1:
            tmap[k] = v - 1
        else:
            del tmap[k]


class Node:
    """A node with its resources and the instances placed on it."""

    __slots__ = (
        "name", "alias", "idx", "group", "t_mem", "n_mem", "i_mem",
        "f_mem", "f_mem_forth", "x_mem", "t_dsk", "f_dsk", "f_dsk_forth",
        "t_cpu", "cpu_speed", "n_cpu", "u_cpu", "u_cpu_forth",
        "t_spindles", "f_spindles", "f_spindles_forth", "plist",
        "plist_forth", "slist", "slist_forth", "peers", "fail_n1", "r_mem",
        "m_dsk", "lo_dsk", "hi_cpu", "hi_spindles", "inst_spindles",
        "inst_spindles_forth", "offline", "drained", "is_master",
        "vm_capable", "tags", "pool_c", "pool_m", "pool_d", "pool_n",
        "load_c", "load_m", "load_d", "load_n", "loadf_c", "loadf_m",
        "loadf_d", "loadf_n", "ptags", "n_ptags_conflicts", "ipolicy",
        "excl_storage", "mig_tags", "rmig_tags", "location_tags",
        "location_score", "instance_map", "hypervisor", "metrics_cache",
        "version",
    )

    def __init__(self, name, t_mem, n_mem, f_mem, t_dsk, f_dsk, t_cpu,
                 n_cpu, offline, t_spindles, f_spindles, group,
                 excl_storage, cpu_speed=1.0):
        self.name = name
        self.alias = name
        self.idx = -1
        self.group = group
        self.t_mem = float(t_mem)
        self.n_mem = n_mem
        self.i_mem = 0
        self.f_mem = f_mem
        self.f_mem_forth = f_mem
        self.x_mem = 0
        self.t_dsk = float(t_dsk)
        self.f_dsk = f_dsk
        self.f_dsk_forth = f_dsk
        self.t_cpu = float(t_cpu)
        self.cpu_speed = float(cpu_speed)
        self.n_cpu = n_cpu
        self.u_cpu = n_cpu
        self.u_cpu_forth = n_cpu
        self.t_spindles = t_spindles
        self.f_spindles = f_spindles
        self.f_spindles_forth = f_spindles
        self.plist = set()
        self.plist_forth = set()
        self.slist = set()
        self.slist_forth = set()
        self.peers = {}
        self.fail_n1 = True
        self.r_mem = 0
        self.m_dsk = T.DEFAULT_RESERVED_DISK_RATIO
        self.lo_dsk = int(self.m_dsk * self.t_dsk // 1)
        self.ipolicy = T.DEFAULT_IPOLICY
        self.hi_cpu = int(T.DEFAULT_IPOLICY.vcpu_ratio * self.t_cpu // 1)
        self.hi_spindles = T.DEFAULT_IPOLICY.spindle_ratio * t_spindles
        self.inst_spindles = 0.0
        self.inst_spindles_forth = 0.0
        self.offline = offline
        self.drained = False
        self.is_master = False
        self.vm_capable = True
        self.tags = []
        self.pool_c = self.pool_m = self.pool_d = self.pool_n = 1.0
        self.load_c = self.load_m = self.load_d = self.load_n = 0.0
        self.loadf_c = self.loadf_m = self.loadf_d = self.loadf_n = 0.0
        self.ptags = {}
        self.n_ptags_conflicts = 0
        self.excl_storage = excl_storage
        self.mig_tags = frozenset()
        self.rmig_tags = frozenset()
        self.location_tags = frozenset()
        self.location_score = 0
        self.instance_map = {}
        self.hypervisor = None
        self.metrics_cache = None
        #: bumped by the balancer whenever a move changes the node
        self.version = 0

    def __repr__(self):
        return "<Node %s>" % self.name

    # -- configuration ---------------------------------------------------

    def set_policy(self, ipolicy):
        self.ipolicy = ipolicy
        self.hi_cpu = int(ipolicy.vcpu_ratio * self.t_cpu // 1)
        self.hi_spindles = ipolicy.spindle_ratio * self.t_spindles
        self.metrics_cache = None

    def set_mdsk(self, ratio):
        self.m_dsk = ratio
        self.lo_dsk = int(ratio * self.t_dsk // 1)

    def set_mcpu(self, ratio):
        """Override the vcpu ratio of the node's policy (``--max-cpu``)."""
        import attrs
        self.set_policy(attrs.evolve(self.ipolicy, vcpu_ratio=ratio))

    # -- derived values --------------------------------------------------

    def unallocated_mem(self):
        """Free memory by the records, less unaccounted memory."""
        xm = self.x_mem if self.x_mem > 0 else 0
        return int(self.t_mem) - self.n_mem - self.i_mem - xm

    def avail_mem(self):
        v = self.unallocated_mem() - self.r_mem
        return v if v > 0 else 0

    def avail_disk(self):
        return self.f_dsk - self.lo_dsk if self.f_dsk >= self.lo_dsk else 0

    def avail_cpu(self):
        return self.hi_cpu - self.u_cpu if self.hi_cpu >= self.u_cpu else 0

    def p_mem(self):
        return _div(self.unallocated_mem(), self.t_mem)

    def p_mem_forth(self):
        return _div(self.f_mem_forth, self.t_mem)

    def _p_dsk(self, free_sp, free_dsk):
        if self.excl_storage:
            total, free = float(self.t_spindles), free_sp
        else:
            total, free = self.t_dsk, free_dsk
        if total == 0:
            return 1.0
        return free / total

    def p_dsk(self):
        return self._p_dsk(self.f_spindles, self.f_dsk)

    def p_dsk_forth(self):
        return self._p_dsk(self.f_spindles_forth, self.f_dsk_forth)

    def p_rem(self):
        return _div(self.r_mem, self.t_mem)

    def p_cpu(self):
        return _div(self.u_cpu, self.t_cpu)

    def p_cpu_forth(self):
        return _div(self.u_cpu_forth, self.t_cpu)

    def conflicting_primaries(self):
        return self.n_ptags_conflicts

    # -- load-time placement (the reported free values already include
    #    the instances, so these do not consume memory or disk) ----------

    def set_pri(self, inst):
        if not inst.forthcoming:
            self.plist.add(inst.idx)
            if inst.not_offline:
                self.u_cpu += inst.vcpus
            u = inst.util
            self.load_c += u.cpu
            self.load_m += u.mem
            self.load_d += u.dsk
            self.load_n += u.net
            if not self.excl_storage and inst.uses_local_storage:
                self.inst_spindles += inst.spindle_use
            elif self.excl_storage:
                self.inst_spindles = 0.0
            self.location_score += (inst.location_score
                                    + self.dsrd_loc_score(inst))
            self._add_excl_pairs(inst)
        else:
            self._forth_disk(inst, +1)
        self._add_ptags(inst)
        self.plist_forth.add(inst.idx)
        if inst.not_offline:
            self.u_cpu_forth += inst.vcpus
        u = inst.util
        self.loadf_c += u.cpu
        self.loadf_m += u.mem
        self.loadf_d += u.dsk
        self.loadf_n += u.net
        if not inst.uses_memory:
            self.f_mem_forth -= inst.mem
        self._forth_spindle_use(inst, +1)
        self.metrics_cache = None

    def set_sec(self, inst):
        if not inst.forthcoming:
            self.slist.add(inst.idx)
            self.load_d += inst.util.dsk
            if not self.excl_storage and inst.uses_local_storage:
                self.inst_spindles += inst.spindle_use
            elif self.excl_storage:
                self.inst_spindles = 0.0
        else:
            self._forth_disk(inst, +1)
        self.slist_forth.add(inst.idx)
        self.loadf_d += inst.util.dsk
        self._forth_spindle_use(inst, +1)
        self.metrics_cache = None

    def build_peers(self, instances):
        """Compute the failover reservations from the secondaries."""
        peers = {}
        for i in self.slist:
            inst = instances[i]
            mem = inst.mem if (inst.uses_sec_mem and inst.has_secondary
                               and not inst.forthcoming) else 0
            peers[inst.pnode] = peers.get(inst.pnode, 0) + mem
        self.peers = peers
        self.r_mem = max(peers.values()) if peers else 0
        self.fail_n1 = self.f_mem < self.r_mem
        self.metrics_cache = None

    # -- helpers ---------------------------------------------------------

    def dsrd_loc_score(self, inst):
        tags = inst.dsrd_loc_tags
        if not tags:
            return 0
        return len(tags) - len(tags & self.location_tags)

    def _excl_pairs(self, inst):
        return [(loc, ex) for loc in sorted(self.location_tags)
                for ex in inst.excl_tags]

    def _add_excl_pairs(self, inst):
        if self.location_tags and inst.excl_tags:
            _add_tags(self.instance_map, self._excl_pairs(inst))

    def _del_excl_pairs(self, inst):
        if self.location_tags and inst.excl_tags:
            _del_tags(self.instance_map, self._excl_pairs(inst))

    def _add_ptags(self, inst):
        pt = self.ptags
        for t in inst.excl_tags:
            v = pt.get(t, 0)
            if v:
                self.n_ptags_conflicts += 1
            pt[t] = v + 1

    def _del_ptags(self, inst):
        pt = self.ptags
        for t in inst.excl_tags:
            v = pt.get(t)
            if v is None:
                continue
            if v > 1:
                pt[t] = v - 1
                self.n_ptags_conflicts -= 1
            else:
                del pt[t]

    def _forth_disk(self, inst, sign):
        """Disk and free spindles including forthcoming instances, for a
        change that the real values do not see."""
        if inst.uses_local_storage:
            self.f_dsk_forth -= sign * inst.dsk
        self.f_spindles_forth = self._new_free_spindles(
            self.f_spindles_forth, inst, sign > 0)

    def _forth_spindle_use(self, inst, sign):
        if self.excl_storage:
            self.inst_spindles_forth = 0.0
        elif inst.uses_local_storage:
            self.inst_spindles_forth += sign * inst.spindle_use

    def _new_free_spindles(self, free, inst, adding):
        if not self.excl_storage:
            return 0
        ts = inst.total_spindles
        if ts is None:
            return -1 if adding else free
        return free - ts if adding else free + ts

    def _new_inst_spindles(self, cur, inst, adding):
        if self.excl_storage:
            return 0.0
        if inst.uses_local_storage:
            return cur + inst.spindle_use if adding \
                else cur - inst.spindle_use
        return cur

    # -- moves -----------------------------------------------------------

    def save(self):
        """A snapshot of everything a placement can change, for
        ``restore`` (copies of the small per-node containers)."""
        return (self.i_mem, self.f_mem_forth, self.f_dsk, self.f_dsk_forth,
                self.u_cpu, self.u_cpu_forth, self.f_spindles,
                self.f_spindles_forth, self.inst_spindles,
                self.inst_spindles_forth, self.fail_n1, self.r_mem,
                self.load_c, self.load_m, self.load_d, self.load_n,
                self.loadf_c, self.loadf_m, self.loadf_d, self.loadf_n,
                self.location_score, self.n_ptags_conflicts,
                self.metrics_cache, set(self.plist), set(self.plist_forth),
                set(self.slist), set(self.slist_forth), dict(self.peers),
                dict(self.ptags), dict(self.instance_map))

    def restore(self, st):
        (self.i_mem, self.f_mem_forth, self.f_dsk, self.f_dsk_forth,
         self.u_cpu, self.u_cpu_forth, self.f_spindles,
         self.f_spindles_forth, self.inst_spindles,
         self.inst_spindles_forth, self.fail_n1, self.r_mem,
         self.load_c, self.load_m, self.load_d, self.load_n,
         self.loadf_c, self.loadf_m, self.loadf_d, self.loadf_n,
         self.location_score, self.n_ptags_conflicts,
         self.metrics_cache, self.plist, self.plist_forth, self.slist,
         self.slist_forth, self.peers, self.ptags,
         self.instance_map) = st

    def save_for(self, inst):
        """A cheaper snapshot, enough to undo placing or removing ``inst``
        (and only it) on this node: see ``restore_for``."""
        iid = inst.idx
        return (self.i_mem, self.f_mem_forth, self.f_dsk, self.f_dsk_forth,
                self.u_cpu, self.u_cpu_forth, self.f_spindles,
                self.f_spindles_forth, self.inst_spindles,
                self.inst_spindles_forth, self.fail_n1, self.r_mem,
                self.load_c, self.load_m, self.load_d, self.load_n,
                self.loadf_c, self.loadf_m, self.loadf_d, self.loadf_n,
                self.location_score, self.n_ptags_conflicts,
                self.metrics_cache, iid in self.plist,
                iid in self.plist_forth, iid in self.slist,
                iid in self.slist_forth,
                dict(self.peers) if self.peers else None,
                dict(self.ptags) if inst.excl_tags else None,
                dict(self.instance_map) if inst.excl_tags and
                self.location_tags else None)

    def restore_for(self, inst, st):
        (self.i_mem, self.f_mem_forth, self.f_dsk, self.f_dsk_forth,
         self.u_cpu, self.u_cpu_forth, self.f_spindles,
         self.f_spindles_forth, self.inst_spindles,
         self.inst_spindles_forth, self.fail_n1, self.r_mem,
         self.load_c, self.load_m, self.load_d, self.load_n,
         self.loadf_c, self.loadf_m, self.loadf_d, self.loadf_n,
         self.location_score, self.n_ptags_conflicts,
         self.metrics_cache, inp, inpf, ins, insf, peers, ptags,
         imap) = st
        iid = inst.idx
        for flag, cont in ((inp, self.plist), (inpf, self.plist_forth),
                           (ins, self.slist), (insf, self.slist_forth)):
            if flag:
                cont.add(iid)
            else:
                cont.discard(iid)
        self.peers = peers if peers is not None else {}
        if ptags is not None:
            self.ptags = ptags
        if imap is not None:
            self.instance_map = imap

    def _forth_violation_pri(self, inst, new_mem_forth, new_dsk_forth,
                             new_free_sp_forth, new_inst_sp_forth,
                             new_ucpu_forth):
        uses_disk = inst.uses_local_storage
        if new_mem_forth <= 0:
            return FAIL_MEM
        if uses_disk and new_dsk_forth <= 0:
            return FAIL_DISK
        if uses_disk and new_dsk_forth < self.lo_dsk:
            return FAIL_DISK
        if uses_disk and self.excl_storage and new_free_sp_forth < 0:
            return FAIL_SPINDLES
        if uses_disk and new_inst_sp_forth > self.hi_spindles:
            return FAIL_DISK
        l_cpu = self.ipolicy.vcpu_ratio
        if l_cpu >= 0 and l_cpu < _div(new_ucpu_forth, self.t_cpu):
            return FAIL_CPU
        return None

    def add_pri(self, inst, force=False):
        """Place ``inst`` as primary; returns a failure mode (and changes
        nothing) or None.  ``force`` skips the soft checks (N+1, low disk,
        CPU ratio, tags, spindle ratio)."""
        strict = not force
        uses_disk = inst.uses_local_storage
        new_mem_forth = self.f_mem_forth - inst.mem
        new_dsk_forth = self.f_dsk_forth - inst.dsk if uses_disk \
            else self.f_dsk_forth
        new_free_sp_forth = self._new_free_spindles(
            self.f_spindles_forth, inst, True)
        new_inst_sp_forth = self._new_inst_spindles(
            self.inst_spindles_forth, inst, True)
        new_ucpu_forth = self.u_cpu_forth + inst.vcpus \
            if inst.not_offline else self.u_cpu_forth
        if inst.forthcoming:
            if strict:
                err = self._forth_violation_pri(
                    inst, new_mem_forth, new_dsk_forth, new_free_sp_forth,
                    new_inst_sp_forth, new_ucpu_forth)
                if err:
                    return err
        else:
            new_i_mem = self.i_mem + inst.mem if inst.uses_memory \
                else self.i_mem
            xm = self.x_mem if self.x_mem > 0 else 0
            new_free_mem = int(self.t_mem) - self.n_mem - new_i_mem - xm
            new_failn1 = new_free_mem <= self.r_mem
            new_dsk = self.f_dsk - inst.dsk if uses_disk else self.f_dsk
            new_free_sp = self._new_free_spindles(self.f_spindles, inst,
                                                  True)
            new_inst_sp = self._new_inst_spindles(self.inst_spindles,
                                                  inst, True)
            new_ucpu = self.u_cpu + inst.vcpus if inst.not_offline \
                else self.u_cpu
            if new_free_mem <= 0:
                return FAIL_MEM
            if uses_disk and new_dsk <= 0:
                return FAIL_DISK
            if strict and uses_disk and new_dsk < self.lo_dsk:
                return FAIL_DISK
            if uses_disk and self.excl_storage and new_free_sp < 0:
                return FAIL_SPINDLES
            if strict and uses_disk and new_inst_sp > self.hi_spindles:
                return FAIL_DISK
            if strict and new_failn1 and not self.fail_n1:
                return FAIL_MEM
            l_cpu = self.ipolicy.vcpu_ratio
            if strict and l_cpu >= 0 and \
                    l_cpu < _div(new_ucpu, self.t_cpu):
                return FAIL_CPU
            if strict and inst.excl_tags and \
                    any(t in self.ptags for t in inst.excl_tags):
                return FAIL_TAGS
            if strict:
                err = self._forth_violation_pri(
                    inst, new_mem_forth, new_dsk_forth, new_free_sp_forth,
                    new_inst_sp_forth, new_ucpu_forth)
                if err:
                    return err
            self.plist.add(inst.idx)
            self.i_mem = new_i_mem
            self.f_dsk = new_dsk
            self.fail_n1 = new_failn1
            self.u_cpu = new_ucpu
            u = inst.util
            self.load_c += u.cpu
            self.load_m += u.mem
            self.load_d += u.dsk
            self.load_n += u.net
            self.inst_spindles = new_inst_sp
            self.f_spindles = new_free_sp
            self.location_score += (inst.location_score
                                    + self.dsrd_loc_score(inst))
            self._add_excl_pairs(inst)
        # fields including forthcoming instances
        self._add_ptags(inst)
        self.plist_forth.add(inst.idx)
        self.f_mem_forth = new_mem_forth
        self.f_dsk_forth = new_dsk_forth
        self.u_cpu_forth = new_ucpu_forth
        u = inst.util
        self.loadf_c += u.cpu
        self.loadf_m += u.mem
        self.loadf_d += u.dsk
        self.loadf_n += u.net
        self.inst_spindles_forth = new_inst_sp_forth
        self.f_spindles_forth = new_free_sp_forth
        self.metrics_cache = None
        return None

    def remove_pri(self, inst):
        uses_disk = inst.uses_local_storage
        if not inst.forthcoming:
            self.plist.discard(inst.idx)
            if inst.uses_memory:
                self.i_mem -= inst.mem
            self.fail_n1 = self.unallocated_mem() <= self.r_mem
            if uses_disk:
                self.f_dsk += inst.dsk
            self.f_spindles = self._new_free_spindles(self.f_spindles,
                                                      inst, False)
            self.inst_spindles = self._new_inst_spindles(
                self.inst_spindles, inst, False)
            if inst.not_offline:
                self.u_cpu -= inst.vcpus
            u = inst.util
            self.load_c -= u.cpu
            self.load_m -= u.mem
            self.load_d -= u.dsk
            self.load_n -= u.net
            self.location_score -= (inst.location_score
                                    + self.dsrd_loc_score(inst))
            self._del_excl_pairs(inst)
        self._del_ptags(inst)
        self.plist_forth.discard(inst.idx)
        self.f_mem_forth += inst.mem
        if uses_disk:
            self.f_dsk_forth += inst.dsk
        self.f_spindles_forth = self._new_free_spindles(
            self.f_spindles_forth, inst, False)
        self.inst_spindles_forth = self._new_inst_spindles(
            self.inst_spindles_forth, inst, False)
        if inst.not_offline:
            self.u_cpu_forth -= inst.vcpus
        u = inst.util
        self.loadf_c -= u.cpu
        self.loadf_m -= u.mem
        self.loadf_d -= u.dsk
        self.loadf_n -= u.net
        self.metrics_cache = None

    def add_sec(self, inst, pdx, force=False, ignore_disks=False):
        """Place ``inst`` as secondary with primary node index ``pdx``;
        returns a failure mode (changing nothing) or None."""
        strict = not force
        sec_mem = inst.mem if inst.uses_sec_mem else 0
        new_dsk_forth = self.f_dsk_forth - inst.dsk
        new_free_sp_forth = self._new_free_spindles(
            self.f_spindles_forth, inst, True)
        new_inst_sp_forth = self._new_inst_spindles(
            self.inst_spindles_forth, inst, True)

        def forth_violation():
            if not inst.has_secondary:
                return FAIL_DISK
            if new_dsk_forth <= 0 or new_dsk_forth < self.lo_dsk:
                return FAIL_DISK
            if self.excl_storage and new_free_sp_forth < 0:
                return FAIL_SPINDLES
            if new_inst_sp_forth > self.hi_spindles:
                return FAIL_DISK
            if sec_mem >= self.f_mem_forth:
                return FAIL_MEM
            return None

        if inst.forthcoming:
            if strict:
                err = forth_violation()
                if err:
                    return err
        else:
            old_mem = self.unallocated_mem()
            new_dsk = self.f_dsk - inst.dsk
            new_free_sp = self._new_free_spindles(self.f_spindles, inst,
                                                  True)
            new_inst_sp = self._new_inst_spindles(self.inst_spindles,
                                                  inst, True)
            new_peem = self.peers.get(pdx, 0) + sec_mem
            new_rmem = self.r_mem if self.r_mem > new_peem else new_peem
            new_failn1 = old_mem <= new_rmem
            if not inst.has_secondary:
                return FAIL_DISK
            if not ignore_disks and new_dsk <= 0:
                return FAIL_DISK
            if strict and new_dsk < self.lo_dsk:
                return FAIL_DISK
            if self.excl_storage and new_free_sp < 0:
                return FAIL_SPINDLES
            if strict and new_inst_sp > self.hi_spindles:
                return FAIL_DISK
            if strict and sec_mem >= old_mem:
                return FAIL_MEM
            if strict and new_failn1 and not self.fail_n1:
                return FAIL_MEM
            if strict:
                err = forth_violation()
                if err:
                    return err
            self.slist.add(inst.idx)
            self.f_dsk = new_dsk
            self.peers[pdx] = new_peem
            self.fail_n1 = new_failn1
            self.r_mem = new_rmem
            self.load_d += inst.util.dsk
            self.inst_spindles = new_inst_sp
            self.f_spindles = new_free_sp
        self.slist_forth.add(inst.idx)
        self.f_dsk_forth = new_dsk_forth
        self.loadf_d += inst.util.dsk
        self.inst_spindles_forth = new_inst_sp_forth
        self.f_spindles_forth = new_free_sp_forth
        self.metrics_cache = None
        return None

    def remove_sec(self, inst):
        uses_disk = inst.uses_local_storage
        if not inst.forthcoming:
            self.slist.discard(inst.idx)
            if uses_disk:
                self.f_dsk += inst.dsk
            self.f_spindles = self._new_free_spindles(self.f_spindles,
                                                      inst, False)
            self.inst_spindles = self._new_inst_spindles(
                self.inst_spindles, inst, False)
            pnode = inst.pnode
            peers = self.peers
            old_peem = peers.get(pnode, 0)
            new_peem = old_peem - inst.mem if inst.uses_sec_mem \
                else old_peem
            if new_peem > 0:
                peers[pnode] = new_peem
            else:
                peers.pop(pnode, None)
            if old_peem >= self.r_mem:
                self.r_mem = max(peers.values()) if peers else 0
            self.fail_n1 = self.unallocated_mem() <= self.r_mem
            self.load_d -= inst.util.dsk
        self.slist_forth.discard(inst.idx)
        if uses_disk:
            self.f_dsk_forth += inst.dsk
        self.f_spindles_forth = self._new_free_spindles(
            self.f_spindles_forth, inst, False)
        self.inst_spindles_forth = self._new_inst_spindles(
            self.inst_spindles_forth, inst, False)
        self.loadf_d -= inst.util.dsk
        self.metrics_cache = None

    def check_migration(self, target):
        """Whether an instance may migrate from this node to ``target``
        (migration tags)."""
        return self.mig_tags <= target.rmig_tags
