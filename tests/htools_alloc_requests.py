import json, sys
sys.path.insert(0, '.')
from tests.htools_requests import alloc_request as a
def mk(name, **kw):
    return dict(name=name, disk_template="plain", tags=[], os="x", vcpus=1, memory=512, spindle_use=1, disks=[{"size": 1024, "mode": "rw"}], disk_space_total=1024, nics=[], required_nodes=1, **kw)
REQS = {
 "tiny": {
  "alloc-drbd": a("new1", 1024, 10240, 1, "drbd"),
  "alloc-plain": a("new1", 1024, 10240, 1, "plain"),
  "alloc-toobig": a("new1", 1024000, 10240, 1, "drbd"),
  "alloc-restricted": a("new1", 1024, 10240, 1, "plain", restrict=["node2"]),
  "relocate": {"type": "relocate", "name": "inst1", "relocate_from": ["node2"], "required_nodes": 1, "disk_space_total": 10368},
  "evac-all": {"type": "node-evacuate", "instances": ["inst1", "inst3"], "evac_mode": "all"},
  "evac-primary": {"type": "node-evacuate", "instances": ["inst1", "inst2"], "evac_mode": "primary-only"},
  "evac-secondary": {"type": "node-evacuate", "instances": ["inst1", "inst3"], "evac_mode": "secondary-only"},
  "alloc-secondary": {"type": "allocate-secondary", "name": "inst2"},
  "multi": {"type": "multi-allocate", "instances": [mk("m1"), dict(mk("m2"), disk_template="drbd", required_nodes=2)]},
 },
 "gen50": {
  "alloc-drbd": a("new1", 2048, 20480, 2, "drbd"),
  "alloc-plain": a("new1", 2048, 20480, 2, "plain"),
  "evac-all": {"type": "node-evacuate", "instances": ["inst00001", "inst00002", "inst00003", "inst00004"], "evac_mode": "all"},
  "evac-secondary": {"type": "node-evacuate", "instances": ["inst00001", "inst00003"], "evac_mode": "secondary-only"},
  "relocate": {"type": "relocate", "name": "inst00004", "relocate_from": ["node0023"], "required_nodes": 1, "disk_space_total": 20480},
 },
}
