"""What a configuration change costs on a big cluster.

Every job that changes the cluster ends in one ConfigStore change: verify
what the change can affect, encode again the objects it changed, and have
config.data written (atomically, fsync) with every change accepted until
the write starts.  Measured on a generated config of 40 nodes and 2,000
instances (each with a NIC and a file disk), against the baseline of
serialising that config once (``dumps``) in the same run.

The ``change:`` rows are set up as in the master daemon: the file is
written by the ordered writer thread, and each change waits until it is on
disk before the next starts; the time is what the change costs the caller
(the reactor thread), the write being the writer's.  ``written at once``
is a change whose caller also does the write (tools without a writer).
``concurrent`` has 20 callers each making 10 changes, each waiting for its
change to be on disk before its next: the time is wall clock per change,
writes included, and the writes column shows how many changes shared one.
"""

import os
import shutil
import tempfile
import time

from twisted.internet import defer

from bench.table import table
from ganeti import config, objects
from ganeti.utils.writer import OrderedWriter

N_CHANGES = 40
CALLERS = 20
PER_CALLER = 10


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
        disk, inst = _instance(i, uuids[i % nodes])
        store.disks[disk.uuid] = disk
        store.instances[inst.uuid] = inst
    store.save()
    return store


def _instance(i, node):
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
    return disk, inst


def _timed(fn, number):
    secs = 0.0
    for _ in range(number):
        start = time.perf_counter()
        fn()
        secs += time.perf_counter() - start
    return secs / number


class Changes(object):
    """One change of each kind, different every time."""

    def __init__(self, store):
        self.store = store
        self.n = 0
        self.inst = next(iter(store.instances.values())).uuid
        self.node = sorted(store.nodes.values(),
                           key=lambda n: n.name)[-1].uuid

    def _next(self):
        self.n += 1
        return self.n

    def cluster_tag(self):
        self.store.add_tags("cluster", None, ["t%d" % self._next()])

    def admin_state(self):
        self.store.set_instance_admin_state(
            self.inst, "up" if self._next() % 2 else "down")

    def add_instance(self):
        i = 100000 + self._next()
        disk, inst = _instance(i, self.store.master_node.uuid)
        inst.uuid = disk.uuid = None
        self.store.add_instance(inst, [disk])

    def node_change(self):
        self.store.set_node_params(self.node, drained=bool(self._next() % 2))


async def _measure(reactor):
    tmp = tempfile.mkdtemp(prefix="gnt-bench-cfg-")
    writer = OrderedWriter(reactor)
    writer.startService()
    try:
        store = build(os.path.join(tmp, "config.data"))
        rows = []
        base = _timed(store.dumps, 20)
        rows.append(("baseline: serialise once (dumps)", base, ""))
        rows.append(("verify() (full, as at load)",
                     _timed(store.verify, 10), ""))
        changes = Changes(store)
        store.writer = writer
        for what, fn in (("add a cluster tag", changes.cluster_tag),
                         ("set an instance's admin state",
                          changes.admin_state),
                         ("add an instance (with disk and NIC)",
                          changes.add_instance),
                         ("drain/undrain a node", changes.node_change)):
            fn()        # the first change sets up the per-object state
            await store.flushed()
            secs = 0.0
            for _ in range(N_CHANGES):
                start = time.perf_counter()
                fn()
                secs += time.perf_counter() - start
                await store.flushed()
            rows.append(("change: " + what, secs / N_CHANGES, "1 each"))
        store.writer = None
        rows.append(("change written at once: add a cluster tag",
                     _timed(changes.cluster_tag, N_CHANGES), "1 each"))
        store.writer = writer
        writes = store.writes

        async def caller():
            for _ in range(PER_CALLER):
                changes.cluster_tag()
                await store.flushed()
        start = time.perf_counter()
        await defer.gatherResults([defer.ensureDeferred(caller())
                                   for _ in range(CALLERS)])
        total = CALLERS * PER_CALLER
        rows.append(("concurrent: %d callers x %d tags, wall per change"
                     % (CALLERS, PER_CALLER),
                     (time.perf_counter() - start) / total,
                     "%d for %d" % (store.writes - writes, total)))
        with open(store.path, "rb") as f:
            assert f.read() == store.dumps(), "config.data is not complete"
        return [(what, "%.2f" % (secs * 1000), "%.3fx" % (secs / base),
                 writes) for what, secs, writes in rows]
    finally:
        await writer.stopService()
        shutil.rmtree(tmp, True)


def run(reactor):
    d = defer.ensureDeferred(_measure(reactor))

    def show(rows):
        table(["operation (40 nodes, 2,000 instances)", "ms", "vs baseline",
               "writes"], rows)
    return d.addCallback(show)
