"""Build iallocator input documents (Ganeti's JSON) from htools text
clusters, so the same request can be given to our allocator and to
Ganeti's hail."""

from ganeti.htools import backends, cluster, text


def cluster_json(cdata):
    """The cluster part of an iallocator input (everything but
    ``request``) for a parsed, unfinalised or finalised cluster."""
    doc = backends.cluster_to_ialloc(cdata)
    del doc["request"]
    return doc


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
