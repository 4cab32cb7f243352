"""Move, recreate-disks and replace-disks, with a fake RPC and a Clock."""

import base64

from ganeti import errors
from ganeti import locking
from ganeti import objects

from tests import allocator_fakes
from tests.fakes import NodeFailure
from tests.test_cmdlib_instance import NODE1, NODE2
from tests.test_migration import MigrationRpc, MigrationTestCase, NODE3

MiB = 1024 * 1024


class MoveRpc(MigrationRpc):
    """Disks have contents: ``data[(node, path)]`` bytes."""

    CHUNK_LIMIT = None

    def __init__(self):
        MigrationRpc.__init__(self)
        self.data = {}
        self.drbd = []

    def _blockdev_create(self, node, disk, size, owner, on_primary, info):
        path = MigrationRpc._blockdev_create(self, node, disk, size, owner,
                                             on_primary, info)
        if disk["dev_type"] in ("file", "plain", "sharedfile"):
            self.data[(node, path)] = bytearray(int(size) * 1024)
        return path

    def _blockdev_remove(self, node, disk):
        self.data.pop((node, disk["logical_id"][1]), None)
        return MigrationRpc._blockdev_remove(self, node, disk)

    def _blockdev_read_chunk(self, node, disk, offset, length):
        buf = self.data.get((node, disk["logical_id"][1]))
        if buf is None:
            raise NodeFailure("disk %s does not exist" % disk["iv_name"])
        if offset >= len(buf):
            return {"size": len(buf), "data": ""}
        piece = bytes(buf[offset:offset + length])
        if not piece.strip(b"\0"):
            return {"size": len(buf), "data": None, "length": len(piece)}
        return {"size": len(buf), "length": len(piece),
                "data": base64.b64encode(piece).decode()}

    def _blockdev_write_chunk(self, node, disk, offset, data, length):
        buf = self.data[(node, disk["logical_id"][1])]
        if data is not None:
            raw = base64.b64decode(data)
            buf[offset:offset + len(raw)] = raw
        return True

    def _blockdev_truncate(self, node, disk, size):
        buf = self.data[(node, disk["logical_id"][1])]
        del buf[size:]
        return True

    def _blockdev_status(self, node, disks):
        result = []
        for d in disks:
            if d["dev_type"] == "drbd":
                result.append(self.drbd_status.get(
                    (node, d["iv_name"]), {"status": "ok", "ldisk": 1}))
            elif d["logical_id"][1] in self.files.get(node, set()):
                result.append({"status": "ok", "ldisk": 1,
                               "path": d["logical_id"][1]})
            else:
                result.append(None)
        return result

    drbd_status = {}

    def _blockdev_replace_children(self, node, disk, new, old):
        self.drbd.append(("replace", node, disk["iv_name"],
                          [c["logical_id"][1] for c in new]))
        return True

    def _drbd_disconnect_net(self, node, disks):
        self.drbd.append(("disconnect", node))
        return True

    def _drbd_attach_net(self, node, disks, multimaster):
        self.drbd.append(("attach", node, disks[0]["dynamic_params"]
                          ["remote_ip"]))
        return True

    def _drbd_wait_sync(self, node, disks):
        return [True, None]


class MoveTestCase(MigrationTestCase):

    def setUp(self):
        MigrationTestCase.setUp(self)
        self.rpc = MoveRpc()
        self.rpc.drbd_status = {}
        self.ctx.rpc = self.rpc

    def move(self, **kw):
        op = {"OP_ID": "OP_INSTANCE_MOVE",
              "instance_name": "inst1.example.com", "target_node": NODE2}
        op.update(kw)
        return op

    def disk(self, idx=0):
        return self.cfg.instance_disks(self.inst())[idx]


class MoveTests(MoveTestCase):

    def fill(self, node, disk, pattern_at):
        buf = self.rpc.data[(node, disk.logical_id[1])]
        for offset, text in pattern_at:
            buf[offset:offset + len(text)] = text

    def test_move_copies_data_and_switches(self):
        # small disks, quick to copy: below the policy's minimum
        self.create(disks=[{"size": 10}, {"size": 3}], ignore_ipolicy=True)
        d0, d1 = self.disk(0), self.disk(1)
        old0, old1 = d0.logical_id[1], d1.logical_id[1]
        # data at the start, in the middle (past a zero chunk), at the end
        self.fill(NODE1, d0, [(0, b"boot"), (10 * 1024 - 3, b"end")])
        self.fill(NODE1, d1, [(100, b"second disk")])
        self.ok(self.move())
        inst = self.inst()
        n2 = self.node(NODE2)
        self.assertEqual(inst.primary_node, n2)
        d0, d1 = self.disk(0), self.disk(1)
        self.assertEqual((d0.nodes, d1.nodes), ([n2], [n2]))
        # new names, same directory
        self.assertNotEqual(d0.logical_id[1], old0)
        self.assertEqual(d0.logical_id[1].rsplit("/", 1)[0],
                         old0.rsplit("/", 1)[0])
        new0 = self.rpc.data[(NODE2, d0.logical_id[1])]
        self.assertEqual(len(new0), 10 * 1024)
        self.assertEqual(bytes(new0[:4]), b"boot")
        self.assertEqual(bytes(new0[-3:]), b"end")
        self.assertEqual(bytes(self.rpc.data[(NODE2, d1.logical_id[1])]
                               [100:111]), b"second disk")
        # the old disks are gone, the instance runs on the target
        self.assertNotIn((NODE1, old0), self.rpc.data)
        self.assertNotIn((NODE1, old1), self.rpc.data)
        self.assertEqual(self.rpc.domains,
                         {(NODE2, "inst1.example.com"): "running"})
        self.assertTrue(any("disk disk/0: 100% copied" in line
                            for line in self.log), self.log)
        self.assertEqual(self.cfg.verify(), [])

    def test_zero_chunks_are_not_sent(self):
        from ganeti.cmdlib import instance_move
        self.patch(instance_move, "CHUNK_SIZE", 1024)
        self.create(disks=[{"size": 8}], ignore_ipolicy=True)
        self.fill(NODE1, self.disk(), [(5000, b"x")])
        self.ok(self.move())
        writes = self.rpc.calls_of("blockdev_write_chunk")
        self.assertEqual(len(writes), 8)
        self.assertEqual(sum(1 for w in writes if w[2][2] is not None), 1)

    def test_stopped_instance_stays_stopped(self):
        self.create(start=False)
        self.ok(self.move())
        self.assertEqual(self.inst().primary_node, self.node(NODE2))
        self.assertNotIn("instance_start", self.rpc.procedures())

    def test_copy_failure_undoes(self):
        self.create()
        old = self.disk().logical_id[1]
        self.rpc.fail["blockdev_write_chunk"] = "no space left on device"
        err = self.fails(self.move(), errors.OpExecError)
        self.assertIn("no space left", str(err))
        self.assertEqual(self.inst().primary_node, self.node(NODE1))
        self.assertEqual(self.disk().logical_id[1], old)
        # the new disk went, the instance runs again on the source
        self.assertEqual([k for k in self.rpc.data if k[0] == NODE2], [])
        self.assertIn((NODE1, old), self.rpc.data)
        self.assertEqual(self.rpc.domains,
                         {(NODE1, "inst1.example.com"): "running"})

    def test_shared_storage_only_changes_primary(self):
        self.create_shared()
        path = self.disk().logical_id[1]
        self.ok(self.move(target_node=NODE3))
        self.assertEqual(self.inst().primary_node, self.node(NODE3))
        self.assertEqual(self.disk().logical_id[1], path)
        self.assertNotIn("blockdev_read_chunk", self.rpc.procedures())

    def test_refusals(self):
        self.create()
        err = self.fails(self.move(target_node=NODE1))
        self.assertIn("already the primary node", str(err))
        self.cfg.set_node_params(NODE2, drained=True)
        err = self.fails(self.move())
        self.assertIn("drained", str(err))
        self.cfg.set_node_params(NODE2, drained=False)
        self.cfg.set_node_params(NODE1, master_candidate=False, offline=True)
        err = self.fails(self.move())
        self.assertIn("offline", str(err))
        self.assertIn("recreate-disks", str(err))

    def test_shutdown_failure(self):
        self.create()
        self.rpc.fail["instance_shutdown"] = "stuck"
        err = self.fails(self.move(), errors.OpExecError)
        self.assertIn("Could not shutdown", str(err))
        self.assertEqual(self.inst().primary_node, self.node(NODE1))
        self.ok(self.move(ignore_consistency=True))
        self.assertEqual(self.inst().primary_node, self.node(NODE2))


class RecreateTests(MoveTestCase):

    def recreate(self, **kw):
        op = {"OP_ID": "OP_INSTANCE_RECREATE_DISKS",
              "instance_name": "inst1.example.com"}
        op.update(kw)
        return op

    def lose(self, node, disk):
        self.rpc.files[node].discard(disk.logical_id[1])
        self.rpc.data.pop((node, disk.logical_id[1]), None)

    def test_recreate_missing_disk_in_place(self):
        self.create(start=False, disks=[{"size": 10}, {"size": 20}],
                    ignore_ipolicy=True)
        self.lose(NODE1, self.disk(1))
        self.ok(self.recreate(disks=[1]))
        self.assertIn(self.disk(1).logical_id[1], self.rpc.files[NODE1])
        creates = self.rpc.calls_of("blockdev_create")
        self.assertEqual([c[2][0]["iv_name"] for c in creates], ["disk/1"])
        self.assertTrue(any("content is empty" in l for l in self.log))

    def test_existing_disk_refused(self):
        self.create(start=False)
        err = self.fails(self.recreate())
        self.assertIn("still exists", str(err))
        self.assertEqual(self.rpc.calls_of("blockdev_create"), [])

    def test_running_refused(self):
        self.create()
        err = self.fails(self.recreate())
        self.assertIn("cannot recreate disks", str(err))

    def test_new_size_and_mode(self):
        self.create(start=False)
        self.lose(NODE1, self.disk())
        self.ok(self.recreate(disks=[[0, {"size": 2048, "mode": "ro"}]]))
        self.assertEqual((self.disk().size, self.disk().mode), (2048, "ro"))
        self.assertEqual(self.rpc.calls_of("blockdev_create")[0][2][1], 2048)
        err = self.fails(self.recreate(disks=[[0, {"vg": "other"}]]))
        self.assertIn("only size and mode", str(err))

    def test_recreate_on_a_new_node_after_the_old_died(self):
        self.create(start=False)
        self.cfg.set_node_params(NODE1, master_candidate=False, offline=True)
        err = self.fails(self.recreate())
        self.assertIn("offline", str(err))
        self.assertIn("give nodes", str(err))
        self.ok(self.recreate(nodes=[NODE3]))
        inst = self.inst()
        self.assertEqual(inst.primary_node, self.node(NODE3))
        self.assertEqual(self.disk().nodes, [self.node(NODE3)])
        self.assertIn(self.disk().logical_id[1], self.rpc.files[NODE3])
        err = self.fails(self.recreate(nodes=[NODE2, NODE3]))
        self.assertIn("needs 1 node", str(err))

    def test_bad_index(self):
        self.create(start=False)
        err = self.fails(self.recreate(disks=[3]))
        self.assertIn("has no disk 3", str(err))

    def test_nodes_from_the_allocator(self):
        self.create(start=False, beparams={"memory": 512})
        self.cfg.set_node_params(NODE1, master_candidate=False, offline=True)
        fake = allocator_fakes.install(self, self.ctx)["fake"]
        fake.reply([NODE3])
        err = self.fails(self.recreate(iallocator="fake", nodes=[NODE2]))
        self.assertIn("give either an allocator or a node", str(err))
        # a dry run names the nodes and changes nothing
        self.assertEqual(self.ok(self.recreate(iallocator="fake",
                                               dry_run=True)), [NODE3])
        self.assertEqual(self.inst().primary_node, self.node(NODE1))
        self.ok(self.recreate(iallocator="fake"))
        self.assertEqual(self.inst().primary_node, self.node(NODE3))
        self.assertIn(self.disk().logical_id[1], self.rpc.files[NODE3])
        request = fake.requests[-1]
        # the instance's own spec
        self.assertEqual((request["type"], request["name"],
                          request["memory"], request["disk_template"],
                          request["disks"][0]["size"]),
                         ("allocate", "inst1.example.com", 512, "file",
                          1024))
        self.assertIn("Selected nodes for instance inst1.example.com via"
                      " iallocator fake: %s" % NODE3, self.log)


class ReplaceDisksTests(MoveTestCase):

    def setUp(self):
        MoveTestCase.setUp(self)
        n1, n2 = self.node(NODE1), self.node(NODE2)
        inst = objects.Instance(
            name="inst1.example.com", primary_node=n1, secondary_nodes=[n2],
            os="busybox+default", hypervisor="fake", admin_state="up",
            beparams={"maxmem": 128, "minmem": 128})
        disk = objects.Disk(
            dev_type="drbd", size=1024, iv_name="disk/0", mode="rw",
            logical_id=[n1, n2, 11000, 0, 0, "secret"],
            children=[objects.Disk(dev_type="plain", size=1024,
                                   logical_id=["xenvg", "old.disk_data"]),
                      objects.Disk(dev_type="plain", size=128,
                                   logical_id=["xenvg", "old.disk_meta"])])
        self.cfg.add_instance(inst, [disk])
        self.glm.add(locking.LEVEL_INSTANCE, [inst.uuid])

    def replace(self, mode, **kw):
        op = {"OP_ID": "OP_INSTANCE_REPLACE_DISKS",
              "instance_name": "inst1.example.com", "mode": mode}
        op.update(kw)
        return op

    def test_replace_on_secondary(self):
        self.ok(self.replace("replace_on_secondary"))
        (step,) = [s for s in self.rpc.drbd if s[0] == "replace"]
        self.assertEqual(step[1], NODE2)
        new_data = self.disk().children[0].logical_id[1]
        self.assertEqual(step[3][0], new_data)
        self.assertTrue(new_data.endswith(".disk_data"))
        removed = [c[2][0]["logical_id"][1]
                   for c in self.rpc.calls_of("blockdev_remove")]
        self.assertEqual(sorted(removed), ["old.disk_data", "old.disk_meta"])
        self.assertIn("STEP 5/5 Removing old storage", self.log)

    def test_peer_must_be_good(self):
        self.rpc.drbd_status[(NODE1, "disk/0")] = {
            "status": "degraded", "ldisk": 4, "details": "Outdated"}
        err = self.fails(self.replace("replace_on_secondary"),
                         errors.OpExecError)
        self.assertIn("would lose the data", str(err))
        self.assertEqual(self.disk().children[0].logical_id[1],
                         "old.disk_data")

    def test_auto_finds_the_faulty_node(self):
        self.ok(self.replace("replace_auto"))
        self.assertIn("No disks need replacement for instance"
                      " 'inst1.example.com'", self.log)
        self.rpc.drbd_status[(NODE1, "disk/0")] = {
            "status": "missing", "ldisk": 4, "details": "local disk is"
            " Diskless"}
        self.ok(self.replace("replace_auto"))
        self.assertEqual([s[1] for s in self.rpc.drbd if s[0] == "replace"],
                         [NODE1])

    def test_new_secondary(self):
        self.ok(self.replace("replace_new_secondary", remote_node=NODE3))
        inst = self.inst()
        n3 = self.node(NODE3)
        self.assertEqual(inst.secondary_nodes, [n3])
        lid = self.disk().logical_id
        self.assertEqual((lid[1], lid[4]), (n3, 0))
        create = self.rpc.calls_of("blockdev_create")[0]
        self.assertEqual(create[0], NODE3)
        self.assertEqual(create[2][0]["dynamic_params"]["remote_ip"],
                         "127.0.0.1")
        # the primary reconnects to the new secondary's address
        self.assertIn(("attach", NODE1, "127.0.0.3"), self.rpc.drbd)
        removed = self.rpc.calls_of("blockdev_remove")[0]
        self.assertEqual(removed[0], NODE2)
        self.assertEqual(removed[2][0]["logical_id"][1], self.node(NODE2))
        self.assertEqual(self.cfg.verify(), [])

    def test_new_secondary_from_the_allocator(self):
        fake = allocator_fakes.install(self, self.ctx)["fake"]
        fake.reply([NODE1])     # the primary: refused, nothing changes
        err = self.fails(self.replace("replace_new_secondary",
                                      iallocator="fake"), errors.OpExecError)
        self.assertIn("already holds the instance", str(err))
        self.assertEqual(self.inst().secondary_nodes, [self.node(NODE2)])
        fake._answers = []
        fake.reply([NODE3])
        self.assertEqual(self.ok(self.replace("replace_new_secondary",
                                              iallocator="fake",
                                              dry_run=True)), NODE3)
        self.assertEqual(self.inst().secondary_nodes, [self.node(NODE2)])
        # the cluster's default for relocate requests, without -I
        self.cfg.set_cluster_params(default_iallocator="fake")
        self.ok(self.replace("replace_new_secondary"))
        self.assertEqual(self.inst().secondary_nodes, [self.node(NODE3)])
        request = fake.requests[-1]
        self.assertEqual((request["type"], request["relocate_from"],
                          request["disk_space_total"]),
                         ("relocate", [NODE2], 1024 + 128))
        self.assertIn("Selected new secondary for instance"
                      " 'inst1.example.com': %s (via iallocator fake)"
                      % NODE3, self.log)

    def test_refusals(self):
        err = self.fails(self.replace("replace_new_secondary"))
        self.assertIn("remote_node", str(err))
        err = self.fails(self.replace("replace_on_primary",
                                      iallocator="hail"))
        self.assertIn("iallocator: only with mode replace_new_secondary",
                      str(err))
        err = self.fails(self.replace("replace_on_primary",
                                      remote_node=NODE3))
        self.assertIn("remote_node", str(err))
        err = self.fails(self.replace("replace_new_secondary",
                                      remote_node=NODE2))
        self.assertIn("already a node of instance", str(err))
        err = self.fails(self.replace("replace_on_primary", disks=[4]))
        self.assertIn("no disk 4", str(err))

    def test_not_drbd(self):
        self.cfg.remove_instance("inst1.example.com")
        self.create()
        err = self.fails(self.replace("replace_on_primary"))
        self.assertIn("Can only run replace disks for DRBD8-based"
                      " instances", str(err))
