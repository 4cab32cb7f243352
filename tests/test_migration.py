"""Migrate and failover logical units, with a fake RPC and a Clock."""

from ganeti import errors
from ganeti import locking
from ganeti import cmdlib
from ganeti import mcpu
from ganeti import objects

from tests import allocator_fakes
from tests.fakes import NodeFailure
from tests.test_config import enable_templates
from tests.test_cmdlib_instance import (
    InstanceRpc, InstanceTestCase, NODE1, NODE2, create_op)

NODE3 = "node3.example.com"
SFD = "/srv/ganeti/shared-file-storage"


class MigrationRpc(InstanceRpc):
    """InstanceRpc plus the migration procedures: a migration hands the domain
    over between ``domains`` entries like the fake hypervisor does."""

    def __init__(self):
        InstanceRpc.__init__(self)
        self.hv_versions = {}
        #: status answers of instance_get_migration_status, in order (the
        #: last one repeats)
        self.statuses = [{"status": "completed", "transferred_ram": 1,
                          "total_ram": 1}]

    def _node_info(self, node, storage_units, hv_specs):
        result = InstanceRpc._node_info(self, node, storage_units, hv_specs)
        result["hypervisors"][0]["hv_version"] = \
            self.hv_versions.get(node, [7, 2])
        return result

    def _migration_info(self, node, name, hv):
        if self.domains.get((node, name)) not in ("running", "paused"):
            raise NodeFailure("instance %s is not running" % name)
        return {"spec": {"name": name, "uuid": "u", "hvparams": {},
                         "beparams": {"maxmem": 128}, "nics": [],
                         "disks": []},
                "started": 12.0, "hypervisor": hv}

    def _accept_instance(self, node, spec, info, address, port):
        key = (node, spec["name"])
        if self.domains.get(key) in ("running", "paused"):
            raise NodeFailure("instance %s is already running on this node"
                              % spec["name"])
        self.domains[key] = "paused"
        return {"address": address, "port": port or 8102}

    def _instance_migrate(self, node, name, hv, address, port, live):
        self.migrating = (node, name)
        return True

    def _instance_get_migration_status(self, node, name, hv):
        if len(self.statuses) > 1:
            return self.statuses.pop(0)
        return self.statuses[0]

    def _instance_finalize_migration_dst(self, node, name, hv, info,
                                         success):
        if success:
            self.domains[(node, name)] = "running"
        else:
            self.domains.pop((node, name), None)
        return True

    def _instance_finalize_migration_src(self, node, name, hv, success,
                                         live):
        if success:
            self.domains.pop((node, name), None)
        elif self.domains.get((node, name)) == "paused":
            self.domains[(node, name)] = "running"
        return True

    def _instance_list(self, node, hvs):
        return sorted(n for (nd, n) in self.domains if nd == node)

    def _blockdev_status(self, node, disks):
        return [{"path": d["logical_id"][1], "status": "ok",
                 "degraded": False, "ldisk": 1, "sync_percent": None}
                for d in disks]


def shared_create_op(name="inst1.example.com", **kw):
    return create_op(name, disk_template="sharedfile", **kw)


class MigrationTestCase(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.rpc = MigrationRpc()
        self.ctx.rpc = self.rpc
        enable_templates(
            self.cfg, ["file", "sharedfile", "plain",
                                    "diskless", "drbd"],
            shared_file_storage_dir=SFD)
        self.cfg.add_node(objects.Node(name=NODE3, primary_ip="127.0.0.3"))
        self.glm = mcpu.make_lock_manager(self.cfg, self.clock)
        self.ctx = mcpu.MasterContext(cfg=self.cfg, glm=self.glm,
                                      clock=self.clock, rpc=self.rpc)
        self.proc = mcpu.Processor(self.ctx, cmdlib.LOGICAL_UNITS)
        self.rpc.os_list[NODE3] = list(self.rpc.os_list[NODE1])

    def set_offline(self, name, offline=True):
        if offline:
            self.cfg.set_node_params(name, master_candidate=False,
                                     offline=True)
        else:
            self.cfg.set_node_params(name, offline=False)

    def node(self, name):
        return self.cfg.get_node(name).uuid

    def create_shared(self, name="inst1.example.com", **kw):
        result = self.create(name, disk_template="sharedfile", **kw)
        # every node reaches the shared directory
        path = self.cfg.instance_disks(self.inst(name))[0].logical_id[1]
        for node in (NODE2, NODE3):
            self.rpc.files.setdefault(node, set()).add(path)
        return result

    def migrate(self, **kw):
        op = {"OP_ID": "OP_INSTANCE_MIGRATE",
              "instance_name": "inst1.example.com"}
        op.update(kw)
        return op

    def failover(self, **kw):
        op = {"OP_ID": "OP_INSTANCE_FAILOVER",
              "instance_name": "inst1.example.com"}
        op.update(kw)
        return op


class MigrateTests(MigrationTestCase):

    def test_live_migration_to_target(self):
        self.create_shared()
        before = self.inst().serial_no
        self.ok(self.migrate(target_node=NODE2))
        inst = self.inst()
        self.assertEqual(inst.primary_node, self.node(NODE2))
        self.assertGreater(inst.serial_no, before)
        self.assertEqual(self.rpc.domains, {(NODE2, inst.name): "running"})
        self.assertEqual(self.rpc.procedures(), [
            "instance_info", "all_instances_info", "node_info",
            "all_instances_info", "node_info", "node_info", "migration_info", "accept_instance",
            "instance_migrate",
            "instance_get_migration_status",
            "instance_finalize_migration_src",
            "instance_finalize_migration_dst"])
        # the target gets the source's spec with the config's disks, and
        # listens on its own address
        node, _, args = self.rpc.calls_of("accept_instance")[0]
        self.assertEqual(node, NODE2)
        self.assertEqual(args[0]["hypervisor"], "fake")
        self.assertEqual(args[0]["disks"][0]["dev_type"], "sharedfile")
        self.assertEqual(args[1]["started"], 12.0)
        self.assertEqual(args[2], "127.0.0.2")
        node, _, args = self.rpc.calls_of("instance_migrate")[0]
        self.assertEqual((node, args[2], args[3], args[4]),
                         (NODE1, "127.0.0.2", 8102, True))
        for line in ("Migrating instance inst1.example.com",
                     "* preparing node2.example.com to accept the instance",
                     "* memory transfer complete", "* done"):
            self.assertIn(line, self.log)
        self.assertEqual(self.cfg.verify(), [])

    def test_back_and_non_live(self):
        self.create_shared()
        self.ok(self.migrate(target_node=NODE2))
        self.rpc.calls = []
        self.ok(self.migrate(target_node=NODE1, mode="non-live"))
        self.assertEqual(self.inst().primary_node, self.node(NODE1))
        self.assertFalse(self.rpc.calls_of("instance_migrate")[0][2][4])

    def test_target_from_the_allocator(self):
        self.create_shared()
        err = self.fails(self.migrate())
        self.assertIn("no default allocator for 'relocate' requests",
                      str(err))
        fake = allocator_fakes.install(self, self.ctx)["fake"]
        fake.reply([NODE3])
        self.ok(self.migrate(iallocator="fake"))
        self.assertEqual(self.inst().primary_node, self.node(NODE3))
        self.assertEqual(fake.requests[0]["relocate_from"], [NODE1])
        self.assertIn("Selected nodes for instance inst1.example.com via"
                      " iallocator fake: %s" % NODE3, self.log)

    def test_progress_is_polled_and_logged(self):
        self.create_shared()
        self.rpc.statuses = [
            {"status": "setup"},
            {"status": "active", "transferred_ram": 25, "total_ram": 100},
            {"status": "active", "transferred_ram": 50, "total_ram": 100},
            {"status": "completed", "transferred_ram": 100,
             "total_ram": 100}]
        d = self.run_op(self.migrate(target_node=NODE2))
        for _ in range(10):
            self.clock.advance(1)
        self.successResultOf(d)
        self.assertEqual(len(self.rpc.calls_of(
            "instance_get_migration_status")), 4)
        self.assertIn("* memory transfer progress: 25.00 %", self.log)
        self.assertEqual(self.inst().primary_node, self.node(NODE2))

    def test_failed_transfer_is_cleaned_up(self):
        self.create_shared()
        self.rpc.statuses = [{"status": "failed", "error": "no route"}]
        err = self.fails(self.migrate(target_node=NODE2), errors.OpExecError)
        self.assertIn("hypervisor reported failed: no route", str(err))
        # the target copy went, the source runs, the config is unchanged
        self.assertEqual(self.rpc.domains,
                         {(NODE1, "inst1.example.com"): "running"})
        self.assertEqual(self.inst().primary_node, self.node(NODE1))
        self.assertIn("Migration failed, aborting", self.log)
        dst = self.rpc.calls_of("instance_finalize_migration_dst")[0]
        self.assertEqual((dst[0], dst[2][3]), (NODE2, False))
        src = self.rpc.calls_of("instance_finalize_migration_src")[0]
        self.assertEqual((src[0], src[2][2]), (NODE1, False))

    def test_accept_failure_aborts(self):
        self.create_shared()
        self.rpc.fail["accept_instance"] = "qemu failed to start"
        err = self.fails(self.migrate(target_node=NODE2), errors.OpExecError)
        self.assertIn("Could not pre-migrate", str(err))
        self.assertIn("qemu failed to start", str(err))
        self.assertNotIn("instance_migrate", self.rpc.procedures())
        self.assertEqual(self.inst().primary_node, self.node(NODE1))

    def test_finalize_failure_keeps_config(self):
        self.create_shared()
        self.rpc.fail["instance_finalize_migration_dst"] = "cont failed"
        err = self.fails(self.migrate(target_node=NODE2), errors.OpExecError)
        self.assertIn("Could not finalize instance migration", str(err))
        self.assertIn("cleanup", str(err))
        self.assertEqual(self.inst().primary_node, self.node(NODE1))

    def test_checks(self):
        self.create_shared()
        err = self.fails(self.migrate(target_node=NODE1))
        self.assertIn("already the primary node", str(err))
        err = self.fails(self.migrate(target_node="nosuchnode"))
        self.assertIn("nosuchnode", str(err))
        err = self.fails(self.migrate(target_node=NODE2, live=True,
                                      mode="live"))
        self.assertIn("only one of the 'live' and 'mode'", str(err))
        err = self.fails(self.migrate(iallocator="hail", target_node=NODE2))
        self.assertIn("give either an allocator or a node", str(err))
        self.cfg.set_node_params(NODE2, drained=True)
        err = self.fails(self.migrate(target_node=NODE2))
        self.assertIn("drained", str(err))
        self.cfg.set_node_params(NODE2, drained=False)
        self.set_offline(NODE2)
        err = self.fails(self.migrate(target_node=NODE2))
        self.assertIn("offline", str(err))
        self.assertEqual(self.inst().primary_node, self.node(NODE1))

    def test_not_mirrored_refused(self):
        self.create()   # a file disk
        err = self.fails(self.migrate(target_node=NODE2))
        self.assertIn("disk layout 'file' does not allow migrations",
                      str(err))
        err = self.fails(self.failover(target_node=NODE2))
        self.assertIn("does not allow failovers", str(err))

    def test_not_running_needs_failover(self):
        self.create_shared()
        self.rpc.domains.clear()   # crashed / gone
        err = self.fails(self.migrate(target_node=NODE2))
        self.assertIn("not running", str(err))
        self.assertIn("use failover", str(err))
        self.ok(self.migrate(target_node=NODE2, allow_failover=True))
        self.assertIn("Can't migrate, instance not running, fallback to"
                      " failover", self.log)
        self.assertEqual(self.inst().primary_node, self.node(NODE2))
        self.assertEqual(self.rpc.domains[(NODE2, "inst1.example.com")],
                         "running")

    def test_offline_primary_falls_back_to_failover(self):
        self.create_shared()
        self.set_offline(NODE1)
        err = self.fails(self.migrate(target_node=NODE2))
        self.assertIn("offline", str(err))
        self.ok(self.migrate(target_node=NODE2, allow_failover=True))
        self.assertEqual(self.inst().primary_node, self.node(NODE2))

    def test_not_enough_memory(self):
        self.create_shared()
        self.rpc.memory_free = 100
        err = self.fails(self.migrate(target_node=NODE2))
        self.assertIn("Not enough memory on node node2.example.com", str(err))

    def test_hypervisor_major_version_mismatch(self):
        self.create_shared()
        self.rpc.hv_versions[NODE2] = [8, 0]
        err = self.fails(self.migrate(target_node=NODE2), errors.OpExecError)
        self.assertIn("Unsupported migration between hypervisor versions",
                      str(err))
        self.rpc.calls = []
        self.ok(self.migrate(target_node=NODE2, ignore_hvversions=True))
        self.assertEqual(self.inst().primary_node, self.node(NODE2))


class CleanupTests(MigrationTestCase):

    def setUp(self):
        MigrationTestCase.setUp(self)
        self.create_shared()
        self.name = "inst1.example.com"

    def test_half_done_migration_is_undone(self):
        # target prepared, never switched over
        self.rpc.domains[(NODE2, self.name)] = "paused"
        self.ok(self.migrate(cleanup=True, target_node=NODE2))
        self.assertEqual(self.rpc.domains, {(NODE1, self.name): "running"})
        self.assertEqual(self.inst().primary_node, self.node(NODE1))
        self.assertIn("Trying to cleanup after failed migration", self.log)

    def test_completed_migration_is_finalized(self):
        self.rpc.domains[(NODE1, self.name)] = "paused"    # postmigrate
        self.rpc.domains[(NODE2, self.name)] = "running"
        self.ok(self.migrate(cleanup=True))
        self.assertEqual(self.rpc.domains, {(NODE2, self.name): "running"})
        self.assertEqual(self.inst().primary_node, self.node(NODE2))

    def test_running_on_target_only_updates_config(self):
        del self.rpc.domains[(NODE1, self.name)]
        self.rpc.domains[(NODE3, self.name)] = "running"
        self.ok(self.migrate(cleanup=True))
        self.assertEqual(self.inst().primary_node, self.node(NODE3))
        self.assertIn("* instance running on secondary node"
                      " (node3.example.com), updating config", self.log)

    def test_running_on_source_only(self):
        self.ok(self.migrate(cleanup=True, target_node=NODE2))
        self.assertEqual(self.inst().primary_node, self.node(NODE1))
        self.assertIn("* instance confirmed to be running on its primary"
                      " node (node1.example.com)", self.log)

    def test_running_nowhere(self):
        self.rpc.domains.clear()
        err = self.fails(self.migrate(cleanup=True), errors.OpExecError)
        self.assertIn("does not seem to be running at all", str(err))


class FailoverTests(MigrationTestCase):

    def test_failover_running_instance(self):
        self.create_shared()
        self.ok(self.failover(target_node=NODE2))
        self.assertEqual(self.inst().primary_node, self.node(NODE2))
        self.assertEqual(self.rpc.domains,
                         {(NODE2, "inst1.example.com"): "running"})
        self.assertEqual(self.rpc.procedures()[-4:], [
            "instance_shutdown", "blockdev_shutdown", "blockdev_assemble",
            "instance_start"])
        self.assertEqual(self.rpc.calls_of("instance_shutdown")[0][0], NODE1)
        self.assertEqual(self.rpc.calls_of("instance_start")[0][0], NODE2)
        self.assertIn("* starting the instance on the target node"
                      " node2.example.com", self.log)
        self.assertTrue(self.inst().disks_active)

    def test_failover_off_an_offline_node(self):
        self.create_shared()
        self.set_offline(NODE1)
        # the RPC layer does not contact offline nodes
        self.rpc.fail["instance_shutdown"] = \
            lambda node, args: "offline" if node == NODE1 else None
        self.rpc.fail["blockdev_shutdown"] = \
            lambda node, args: "offline" if node == NODE1 else None
        self.ok(self.failover(target_node=NODE2))
        self.assertEqual(self.inst().primary_node, self.node(NODE2))
        self.assertTrue(any("Could not shutdown instance" in l
                            and "please make sure node node1.example.com is"
                            " down" in l for l in self.log), self.log)
        self.assertEqual(self.rpc.domains[(NODE2, "inst1.example.com")],
                         "running")

    def test_shutdown_failure_stops_unless_ignored(self):
        self.create_shared()
        self.rpc.fail["instance_shutdown"] = "hypervisor hung"
        err = self.fails(self.failover(target_node=NODE2), errors.OpExecError)
        self.assertIn("Could not shutdown instance", str(err))
        self.assertEqual(self.inst().primary_node, self.node(NODE1))
        self.ok(self.failover(target_node=NODE2, ignore_consistency=True))
        self.assertEqual(self.inst().primary_node, self.node(NODE2))

    def test_stopped_instance_only_moves_in_config(self):
        self.create_shared(start=False)
        self.ok(self.failover(target_node=NODE3))
        self.assertEqual(self.inst().primary_node, self.node(NODE3))
        self.assertNotIn("instance_start", self.rpc.procedures())
        self.assertIn("Not checking memory on the target node as the"
                      " instance will not be started", self.log)

    def test_start_failure_on_target(self):
        self.create_shared()
        self.rpc.fail["instance_start"] = \
            lambda node, args: "no memory" if node == NODE2 else None
        err = self.fails(self.failover(target_node=NODE2), errors.OpExecError)
        self.assertIn("Could not start instance", str(err))
        self.assertIn("no memory", str(err))
        # the instance now belongs to the target, stopped, disks released
        self.assertEqual(self.inst().primary_node, self.node(NODE2))

    def test_cleanup_is_for_migrations(self):
        self.create_shared()
        err = self.fails(self.failover(cleanup=True))
        self.assertIn("cleanup", str(err))

    def test_diskless(self):
        self.create(disk_template="diskless", disks=[])
        self.ok(self.failover(target_node=NODE2))
        self.assertEqual(self.inst().primary_node, self.node(NODE2))


class DrbdMigrationTests(MigrationTestCase):
    """drbd instances go to their secondary; disks get annotated for the
    node they are sent to (no DRBD here: the RPC is fake)."""

    def setUp(self):
        MigrationTestCase.setUp(self)
        n1, n2 = self.node(NODE1), self.node(NODE2)
        inst = objects.Instance(
            name="inst1.example.com", primary_node=n1, secondary_nodes=[n2],
            os="busybox+default", hypervisor="fake",
            admin_state="up", beparams={"maxmem": 128, "minmem": 128})
        disk = objects.Disk(
            dev_type="drbd", size=1024, iv_name="disk/0", mode="rw",
            logical_id=[n1, n2, 11000, 0, 0, "secret"],
            children=[objects.Disk(dev_type="plain", size=1024,
                                   logical_id=["xenvg", "d.data"]),
                      objects.Disk(dev_type="plain", size=128,
                                   logical_id=["xenvg", "d.meta"])])
        self.cfg.add_instance(inst, [disk])
        self.glm.add(locking.LEVEL_INSTANCE, [inst.uuid])
        self.rpc.domains[(NODE1, "inst1.example.com")] = "running"
        self.rpc._drbd_disconnect_net = lambda node, disks: True
        self.rpc._drbd_attach_net = lambda node, disks, mm: True
        self.rpc._drbd_wait_sync = lambda node, disks: [True, None]

    def test_migrate_swaps_primary_and_secondary(self):
        self.ok(self.migrate())
        inst = self.inst()
        self.assertEqual(inst.primary_node, self.node(NODE2))
        self.assertEqual(inst.secondary_nodes, [self.node(NODE1)])
        accept = self.rpc.calls_of("accept_instance")[0][2][0]
        dyn = accept["disks"][0]["dynamic_params"]
        self.assertEqual((dyn["local_ip"], dyn["remote_ip"],
                          dyn["local_node_id"]), ("127.0.0.2", "127.0.0.1", 1))
        attach = self.rpc.calls_of("drbd_attach_net")
        # dual-master for the move, single-master afterwards
        self.assertEqual([c[2][1] for c in attach], [True, True, False, False])
        self.assertEqual(self.cfg.verify(), [])

    def test_other_target_refused(self):
        err = self.fails(self.migrate(target_node=NODE3))
        self.assertIn("only be migrated to their secondary node", str(err))

    def test_degraded_target_refuses_migration(self):
        self.rpc._blockdev_status = lambda node, disks: [
            {"status": "degraded", "ldisk": 4, "details": "local disk is"
             " Outdated"}]
        err = self.fails(self.migrate(), errors.OpExecError)
        self.assertIn("degraded or not fully synchronized", str(err))
        self.assertIn("Outdated", " ".join(self.log))
