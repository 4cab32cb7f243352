"""A fake master for the maintenance daemon's duties: it answers every
luxi call the daemon, auto-repair and the htools reader make, keeps jobs
queued until ``finish_all``, and then makes their effects happen (tags,
migrations, failovers, new secondaries, node flags), with free memory
and disk following the instances."""

from twisted.internet import defer

from ganeti import query

from ganeti import objects

GROUP = "g1"


class FakeCluster(object):

    def __init__(self, nodes=("n1", "n2", "n3")):
        self.groups = {GROUP: {
            "uuid": GROUP, "name": "default", "alloc_policy": "preferred",
            "ipolicy": None, "tags": [],
            "ndparams": {"repair_max_parallel": 4,
                         "repair_min_healthy": 0.5}}}
        self.nodes = {}
        for pos, name in enumerate(nodes):
            self.nodes[name] = {
                "uuid": "u-" + name, "name": name,
                "primary_ip": "127.0.0.%d" % (pos + 1), "offline": False,
                "drained": False, "tags": [], "group.uuid": GROUP,
                "vm_capable": True, "powered": True, "ndparams": {},
                "mtotal": 32768, "mnode": 1024, "dtotal": 512000,
                "ctotal": 8, "cnos": 1}
        self.instances = {}
        self.cluster_tags = []
        self.jobs = {}
        self.maintenance = {"incidents": {}, "jobs": [], "evacuated": [],
                            "moves": [], "round_delay": 300,
                            "harep": False, "balance": False,
                            "balance_threshold": 0.1,
                            "balance_disk_moves": True,
                            "balance_load": False,
                            "balance_hold_down": 3600,
                            "balance_max_moves": 20}

    def add_instance(self, name, pnode, snode=None, dt="drbd", mem=1024,
                     disk=10240, vcpus=1, tags=()):
        self.instances[name] = {
            "uuid": "i-" + name, "name": name, "pnode": pnode,
            "snodes": [snode] if snode else [], "disk_template": dt,
            "admin_state": "up", "oper_state": True, "status": "running",
            "tags": list(tags), "mem": mem, "disk": disk, "vcpus": vcpus}

    # --- luxi --------------------------------------------------------------

    def call(self, method, *args):
        return defer.maybeDeferred(getattr(self, "_" + method), *args)

    def _QueryClusterInfo(self):
        m = self.maintenance
        view = {k: v for k, v in m.items() if k != "incidents"}
        view["moves"] = [list(mv) for mv in m["moves"]]
        view["incidents"] = [
            {"id": i["uuid"], "node": i["node"], "original": i["original"],
             "action": i["action"], "repair-status": i["repair_status"],
             "jobs": i["jobs"], "tag": i["tag"]}
            for i in m["incidents"].values()]
        return {"master": "n1", "tags": list(self.cluster_tags),
                "ipolicy": None, "default_hypervisor": "xen-pvm",
                "default_iallocator": "hail", "maintenance": view}

    def _node_value(self, n, f):
        insts = self.instances.values()
        if f == "pip":
            return n["primary_ip"]
        if f == "mfree":
            return n["mtotal"] - n["mnode"] - sum(
                i["mem"] for i in insts if i["pnode"] == n["name"])
        if f == "dfree":
            return n["dtotal"] - sum(
                i["disk"] for i in insts
                if n["name"] in [i["pnode"]] + i["snodes"])
        return {"ndp/spindle_count": 1, "ndp/exclusive_storage": False,
                "ndp/cpu_speed": 1.0, "sptotal": 0, "spfree": 0,
                "reserved.disk": 0}.get(f, n.get(f))

    def _inst_value(self, i, f):
        if f == "pnode.uuid":
            return self.nodes[i["pnode"]]["uuid"]
        if f == "snodes.uuid":
            return [self.nodes[s]["uuid"] for s in i["snodes"]]
        return {"pnode.group.uuid": GROUP, "disk_usage": i["disk"],
                "be/memory": i["mem"], "be/vcpus": i["vcpus"],
                "be/auto_balance": True, "be/spindle_use": 1,
                "disk.sizes": [i["disk"]], "disk.spindles": [],
                "forthcoming": False}.get(f, i.get(f))

    def _Query(self, what, fields, qfilter):
        # only fields the real master knows (an unknown one would come
        # back as "unknown" there, silently)
        for f in fields:
            assert f in query.RESOURCES[what].fields, (what, f)
        if what == "group":
            rows = [[g.get(f) for f in fields] for g in self.groups.values()]
        elif what == "node":
            rows = [[self._node_value(n, f) for f in fields]
                    for n in self.nodes.values()]
        else:
            rows = [[self._inst_value(i, f) for f in fields]
                    for i in self.instances.values()]
        return {"fields": fields,
                "data": [[[0, v] for v in row] for row in rows]}

    def _QueryJobs(self, ids, fields):
        if ids is None:
            ids = sorted(self.jobs)
        return [None if j not in self.jobs else
                [j if f == "id" else self.jobs[j].get(f) for f in fields]
                for j in ids]

    def _SubmitJob(self, ops):
        jid = len(self.jobs) + 1
        summary = ["%s(%s)" % (op["OP_ID"][3:], op.get("instance_name",
                                                        op.get("name")))
                   for op in ops]
        self.jobs[jid] = {"status": "queued", "ops": ops,
                          "summary": summary, "opresult": None,
                          "end_ts": None}
        return jid

    def _MaintenanceUpdate(self, incidents, removed, jobs, evacuated,
                           moves):
        m = self.maintenance
        for inc in incidents or []:
            m["incidents"][inc["uuid"]] = objects.Incident.from_dict(
                inc).to_dict()
        for uuid in removed or []:
            del m["incidents"][uuid]
        if jobs is not None:
            m["jobs"] = list(jobs)
        if evacuated is not None:
            m["evacuated"] = list(evacuated)
        if moves is not None:
            m["moves"] = [list(mv) for mv in moves]
        return True

    # --- jobs' effects -----------------------------------------------------

    def finish_all(self, status="success"):
        for jid in sorted(self.jobs):
            if self.jobs[jid]["status"] == "queued":
                self.finish(jid, status)

    def finish(self, jid, status="success"):
        job = self.jobs[jid]
        job["status"] = status
        job["end_ts"] = [0, 0]
        job["opresult"] = []
        if status == "success":
            for op in job["ops"]:
                self._effect(op)

    def _tags_of(self, kind, name):
        if kind == "instance":
            return self.instances[name]["tags"]
        if kind == "node":
            return self.nodes[name]["tags"]
        if kind == "cluster":
            return self.cluster_tags
        return next(g["tags"] for g in self.groups.values()
                    if g["name"] == name)

    def _effect(self, op):
        op_id = op["OP_ID"]
        inst = self.instances.get(op.get("instance_name"))
        if op_id == "OP_TAGS_SET":
            self._tags_of(op["kind"], op["name"]).extend(op["tags"])
        elif op_id == "OP_TAGS_DEL":
            tags = self._tags_of(op["kind"], op["name"])
            for tag in op["tags"]:
                tags.remove(tag)
        elif op_id == "OP_NODE_SET_PARAMS":
            node = self.nodes[op["node_name"]]
            for key in ("drained", "offline"):
                if key in op:
                    node[key] = op[key]
        elif op_id in ("OP_INSTANCE_MIGRATE", "OP_INSTANCE_FAILOVER"):
            if op.get("target_node"):
                inst["pnode"] = op["target_node"]
            elif inst["snodes"]:
                inst["pnode"], inst["snodes"] = \
                    inst["snodes"][0], [inst["pnode"]]
        elif op_id == "OP_INSTANCE_REPLACE_DISKS":
            target = op.get("remote_node") or next(
                n for n, v in sorted(self.nodes.items())
                if n != inst["pnode"] and n not in inst["snodes"] and
                not v["offline"] and not v["drained"])
            inst["snodes"] = [target]

    # --- what tests look at -----------------------------------------------

    def job_ops(self, jid):
        return [op["OP_ID"] for op in self.jobs[jid]["ops"]]

    def jobs_since(self, first):
        return [j for j in sorted(self.jobs) if j >= first]
