"""What a configuration change costs on a big cluster.

Every job that changes the cluster ends in one ConfigStore change: verify,
serialise, write atomically (fsync), notify listeners.  Measured on a
generated config of 40 nodes and 2,000 instances (each with a NIC and a file
disk), against the baseline of serialising that config once (``dumps``) in
the same run.
"""

import os
import shutil
import tempfile
import timeit

from twisted.internet import defer

from bench.table import table
from ganeti import config, objects


def build(path, nodes=40, instances=2000):
    store = config.ConfigStore.create(
        path, "bench.example.com", "node1.example.com", "127.0.0.1",
        enabled_hypervisors=["fake"],
        enabled_disk_templates=["file", "diskless"])
    uuids = [store.master_node.uuid]
    for i in range(2, nodes + 1):
        uuids.append(store.add_node(objects.Node(
            name="node%d.example.com" % i, primary_ip="127.0.1.%d" % i)))
    # Straight into the maps: building is not what is measured.
    for i in range(instances):
        node = uuids[i % nodes]
        disk = objects.Disk(dev_type="file", size=1024,
                            uuid=objects.new_uuid(), nodes=[node],
                            logical_id=["loop", "/srv/disk%d" % i], mode="rw")
        inst = objects.Instance(
            name="inst%d.example.com" % i, uuid=objects.new_uuid(),
            primary_node=node, os="busybox+default", hypervisor="fake",
            beparams={"maxmem": 512}, disks=[disk.uuid],
            nics=[objects.NIC(mac="aa:00:00:%02x:%02x:%02x"
                              % (i >> 16 & 255, i >> 8 & 255, i & 255),
                              uuid=objects.new_uuid(),
                              ip="10.0.%d.%d" % (i // 250, i % 250))])
        store.disks[disk.uuid] = disk
        store.instances[inst.uuid] = inst
    store.save()
    return store


def measure(number=20):
    tmp = tempfile.mkdtemp(prefix="gnt-bench-cfg-")
    try:
        store = build(os.path.join(tmp, "config.data"))
        counter = iter(range(10 ** 9))
        rows = []
        base = timeit.timeit(store.dumps, number=number) / number
        rows.append(("baseline: serialise once (dumps)", base))
        rows.append(("verify()",
                     timeit.timeit(store.verify, number=number) / number))
        rows.append(("change: add a cluster tag", timeit.timeit(
            lambda: store.add_tags("cluster", None,
                                   ["t%d" % next(counter)]),
            number=number) / number))
        inst = next(iter(store.instances.values()))
        rows.append(("change: set an instance's admin state",
                     timeit.timeit(lambda: store.set_instance_admin_state(
                         inst.uuid, "up" if next(counter) % 2 else "down"),
                         number=number) / number))
        return [(what, "%.1f" % (secs * 1000), "%.2fx" % (secs / base))
                for what, secs in rows]
    finally:
        shutil.rmtree(tmp, True)


def run(reactor):
    table(["operation (40 nodes, 2,000 instances)", "ms", "vs baseline"],
          measure())
    return defer.succeed(None)
