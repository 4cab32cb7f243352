"""Build iallocator input documents (Ganeti's JSON) from htools text
clusters, so the same request can be given to our allocator and to
Ganeti's hail."""

from ganeti.htools import cluster, text
from ganeti.htools.model import NO_SECONDARY
from ganeti.htools.types import OFFLINE_STATUS


def ipolicy_json(pol):
    return {
        "minmax": [{"min": a.to_dict(), "max": b.to_dict()}
                   for a, b in pol.minmax],
        "std": pol.std.to_dict(),
        "disk-templates": list(pol.disk_templates),
        "vcpu-ratio": pol.vcpu_ratio,
        "spindle-ratio": pol.spindle_ratio,
    }


def _admin_state(status):
    if status == OFFLINE_STATUS:
        return "offline"
    if status in ("running", "ERROR_up", "ERROR_down", "ERROR_nodedown",
                  "ERROR_nodeoffline", "ERROR_wrongnode"):
        return "up"
    return "down"


def cluster_json(cdata):
    """The cluster part of an iallocator input (everything but
    ``request``) for a parsed, unfinalised or finalised cluster."""
    groups = {}
    for g in cdata.groups:
        groups[g.uuid] = {"name": g.name, "alloc_policy": g.alloc_policy,
                          "networks": list(g.networks),
                          "ipolicy": ipolicy_json(g.ipolicy),
                          "tags": list(g.tags)}
    nodes = {}
    for nd in cdata.nodes:
        d = {"tags": list(nd.tags), "primary_ip": "127.0.0.1",
             "secondary_ip": "127.0.0.1", "offline": nd.offline,
             "drained": False, "master_candidate": True,
             "group": cdata.groups[nd.group].uuid, "master_capable": True,
             "vm_capable": True,
             "ndparams": {"exclusive_storage": nd.excl_storage,
                          "spindle_count": nd.t_spindles}}
        if not nd.offline:
            d.update({"total_memory": int(nd.t_mem),
                      "reserved_memory": nd.n_mem,
                      "free_memory": nd.f_mem,
                      "total_disk": int(nd.t_dsk), "free_disk": nd.f_dsk,
                      "total_spindles": nd.t_spindles,
                      "free_spindles": nd.f_spindles,
                      "total_cpus": int(nd.t_cpu),
                      "reserved_cpus": nd.n_cpu,
                      "i_pri_memory": 0, "i_pri_up_memory": 0})
        nodes[nd.name] = d
    insts = {}
    for inst in cdata.instances:
        nnames = [cdata.nodes[inst.pnode].name]
        if inst.snode != NO_SECONDARY:
            nnames.append(cdata.nodes[inst.snode].name)
        sp = inst.disk_spindles[0] if inst.disk_spindles else None
        disk = {"size": inst.dsk, "mode": "rw", "dev_type": "plain"}
        if sp is not None:
            disk["spindles"] = sp
        insts[inst.name] = {
            "tags": list(inst.tags),
            "admin_state": _admin_state(inst.status),
            "vcpus": inst.vcpus, "memory": inst.mem,
            "spindle_use": inst.spindle_use, "os": "debian",
            "nodes": nnames, "nics": [], "disks": [disk],
            "disk_template": inst.disk_template,
            "disks_active": True, "hypervisor": "kvm",
            "disk_space_total": inst.dsk,
            "forthcoming": inst.forthcoming,
        }
    return {"version": 2, "cluster_name": "cluster.example.com",
            "cluster_tags": list(cdata.tags),
            "enabled_hypervisors": ["kvm"],
            "ipolicy": ipolicy_json(cdata.ipolicy),
            "nodegroups": groups, "nodes": nodes, "instances": insts}


def load_text(path):
    return text.load_text_file(path)


def alloc_request(name, mem, disk, vcpus, disk_template="drbd",
                  spindle_use=1, tags=(), group=None, restrict=None):
    req = {"type": "allocate", "name": name,
           "disk_template": disk_template, "group_name": group,
           "tags": list(tags), "os": "debian", "vcpus": vcpus,
           "memory": mem, "spindle_use": spindle_use,
           "disks": [{"size": disk, "mode": "rw", "dev_type": "plain"}],
           "disk_space_total": disk, "nics": [],
           "required_nodes": 2 if disk_template == "drbd" else 1,
           "hypervisor": "kvm"}
    if restrict is not None:
        req["restrict-to-nodes"] = list(restrict)
    return req


def request_for(cdata, req):
    doc = cluster_json(cdata)
    doc["request"] = req
    return doc


def finalized(cdata):
    return cluster.finalize(cdata)
