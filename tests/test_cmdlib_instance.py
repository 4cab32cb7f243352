"""Instance logical units and OS diagnose, with a fake RPC and a Clock."""

import copy
import os

from twisted.internet import defer

from ganeti import cmdlib
from ganeti import errors
from ganeti import locking
from ganeti import mcpu
from ganeti import objects
from ganeti import opcodes

from tests.fakes import ClockTestCase, FakeRpc, NodeFailure
from tests.test_config import make_store

NODE1 = "node1.example.com"
NODE2 = "node2.example.com"
FSD = "/srv/ganeti/file-storage"

BUSYBOX = {"name": "busybox", "path": "/etc/os/busybox", "valid": True,
           "status": "", "variants": ["default", "minimal"],
           "parameters": [["motd", "message"], ["fail_create", "fail"]],
           "api_versions": [15, 20]}


class InstanceRpc(FakeRpc):
    """Node daemons that keep the state instance LUs change.

    ``domains[(node, name)]`` is the hypervisor state of an instance there;
    ``files[node]`` the disk paths created; ``os_list[node]`` the OS
    definitions found.
    """

    def __init__(self):
        FakeRpc.__init__(self)
        self.domains = {}
        self.files = {}
        self.os_list = {NODE1: [dict(BUSYBOX)], NODE2: [dict(BUSYBOX)]}
        #: memory of a node not taken by its running instances (MiB)
        self.memory_free = 4096
        #: (node, name) -> MiB a started instance holds
        self.memory = {}
        #: MiB free in every storage unit a node is asked about
        self.disk_free = 100 * 1024

    # --- procedures ---------------------------------------------------------

    def _os_validate(self, node, required, name, checks, params,
                     force_variant):
        base, _, variant = name.partition("+")
        for os_data in self.os_list.get(node, []):
            if os_data["name"] == base:
                if variant and variant not in os_data["variants"]:
                    raise NodeFailure("name: OS %s has no variant %r (its"
                                      " variants: %s)"
                                      % (base, variant,
                                         ", ".join(os_data["variants"])))
                return True
        raise NodeFailure("OS %s not found in the OS search path" % base)

    def _os_diagnose(self, node):
        return copy.deepcopy(self.os_list.get(node, []))

    def _hypervisor_validate_params(self, node, hv, hvparams):
        return True

    def _node_info(self, node, storage_units, hv_specs):
        return {"boot_id": "x",
                "storage": [{"type": u[0], "name": u[1],
                             "storage_size": 200 * 1024,
                             "storage_free": self.disk_free}
                            for u in storage_units],
                "hypervisors": [{"memory_free": self.free_memory(node),
                                 "memory_total": 8192,
                                 "memory_dom0": 1024, "cpu_total": 4,
                                 "name": hv_specs[0][0]
                                 if isinstance(hv_specs[0], list)
                                 else hv_specs[0]}]}

    def free_memory(self, node):
        """What the node's hypervisor reports free: memory_free minus what
        its domains hold (kept ones too, until cleaned up)."""
        return self.memory_free - sum(
            self.memory.get(key, 128) for key, state in self.domains.items()
            if key[0] == node)

    def _all_instances_info(self, node, hvs):
        return {name: {"name": name, "state": state,
                       "memory": self.memory.get((where, name), 128),
                       "vcpus": 1}
                for (where, name), state in self.domains.items()
                if where == node}

    def _blockdev_create(self, node, disk, size, owner, on_primary, info):
        path = disk["logical_id"][1]
        self.files.setdefault(node, set()).add(path)
        return path

    def _blockdev_remove(self, node, disk):
        self.files.get(node, set()).discard(disk["logical_id"][1])
        return True

    def _file_storage_dir_rename(self, node, old_dir, new_dir):
        moved = set()
        for path in self.files.get(node, set()):
            if path.startswith(old_dir + "/"):
                moved.add(path)
        self.files[node] = ((self.files.get(node, set()) - moved)
                            | {new_dir + p[len(old_dir):] for p in moved})
        return bool(moved)

    def _blockdev_assemble(self, node, disk, owner, on_primary, idx):
        path = disk["logical_id"][1]
        if path not in self.files.get(node, set()):
            raise NodeFailure("file disk %s does not exist" % path)
        return {"path": path, "format": "raw", "mode": disk.get("mode")}

    def _blockdev_shutdown(self, node, disk):
        return True

    def _blockdev_grow(self, node, disk, amount, dryrun):
        return True

    def _blockdev_getdimensions(self, node, disks):
        return [{"size": d["size"] * 1048576, "spindles": None}
                if d["logical_id"][1] in self.files.get(node, set())
                else None for d in disks]

    def _blockdev_status(self, node, disks):
        return [{"path": d["logical_id"][1], "status": "ok",
                 "degraded": False, "sync_percent": None, "ldisk": 1}
                if d["logical_id"][1] in self.files.get(node, set())
                else None for d in disks]

    def _instance_os_add(self, node, instance, reinstall, debug):
        return "/var/log/ganeti/os/add.log"

    def _instance_run_rename(self, node, instance, old_name, debug):
        return "/var/log/ganeti/os/rename.log"

    def _instance_info(self, node, name, hv):
        state = self.domains.get((node, name))
        if state is None:
            return None
        return {"name": name, "state": state, "memory": 128, "vcpus": 1,
                "live": state in ("running", "paused")}

    def _instance_start(self, node, spec, paused):
        key = (node, spec["name"])
        if self.domains.get(key) in ("running", "paused"):
            raise NodeFailure("instance %s is already running"
                              % spec["name"])
        self.domains[key] = "running"
        self.memory[key] = spec["beparams"]["maxmem"]
        return True

    def _instance_shutdown(self, node, name, hv, timeout):
        self.domains.pop((node, name), None)
        return True

    def _instance_cleanup(self, node, name, hv):
        self.domains.pop((node, name), None)
        return True

    def _instance_reboot(self, node, instance, hv, reboot_type, timeout):
        return True


def create_op(name="inst1.example.com", **kw):
    op = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name,
          "mode": "create", "disk_template": "file",
          "disks": [{"size": 1024}], "nics": [{}],
          "os_type": "busybox+default", "pnode": NODE1,
          "beparams": {"memory": 256}}
    op.update(kw)
    return op


class InstanceTestCase(ClockTestCase):

    def setUp(self):
        ClockTestCase.setUp(self)
        self.cfg = make_store(self, file_storage_dir=FSD,
                              volume_group_name="xenvg")
        self.cfg.add_node(objects.Node(name=NODE2, primary_ip="127.0.0.2"))
        self.glm = mcpu.make_lock_manager(self.cfg, self.clock)
        self.rpc = InstanceRpc()
        self.ctx = mcpu.MasterContext(cfg=self.cfg, glm=self.glm,
                                      clock=self.clock, rpc=self.rpc)
        self.proc = mcpu.Processor(self.ctx, cmdlib.LOGICAL_UNITS)
        self.log = []
        self.job = 0

    def tearDown(self):
        self.assert_no_locks_held()
        ClockTestCase.tearDown(self)

    def assert_no_locks_held(self):
        for lock in self.glm.query_locks():
            self.assertEqual(lock["owners"], [], lock)

    def run_op(self, op):
        self.job += 1
        # the processor gets OpCode objects, loaded where jobs come in
        return defer.maybeDeferred(opcodes.from_dict, op).addCallback(
            lambda op: self.proc.execute(self.job, 0, op, self.log.append))

    def ok(self, op):
        return self.successResultOf(self.run_op(op))

    def fails(self, op, kind=errors.OpPrereqError):
        return self.failureResultOf(self.run_op(op), kind).value

    def instance_locks(self):
        return self.glm.lockset(locking.LEVEL_INSTANCE).list_names()

    def inst(self, name="inst1.example.com"):
        return self.cfg.get_instance(name)

    def create(self, name="inst1.example.com", **kw):
        result = self.ok(create_op(name, **kw))
        self.rpc.calls = []
        self.log[:] = []
        return result


class CreateTests(InstanceTestCase):

    def test_happy_path(self):
        result = self.ok(create_op())
        self.assertEqual(result, [NODE1])
        # kept domains on the node are looked for first
        self.assertEqual(self.rpc.procedures(), [
            "all_instances_info", "node_info", "all_instances_info",
            "os_validate", "hypervisor_validate_params", "blockdev_create",
            "instance_os_add", "instance_start"])
        self.assertTrue(all(c[0] == NODE1 for c in self.rpc.calls))
        inst = self.inst()
        self.assertEqual(inst.admin_state, "up")
        self.assertEqual(inst.admin_state_source, "admin")
        self.assertFalse(inst.forthcoming)
        self.assertTrue(inst.disks_active)
        self.assertEqual(inst.beparams, {"maxmem": 256, "minmem": 256})
        self.assertEqual(inst.os, "busybox+default")
        self.assertTrue(inst.nics[0].mac.startswith("aa:00:00:"))
        (disk,) = self.cfg.instance_disks(inst)
        self.assertEqual(disk.size, 1024)
        self.assertEqual(disk.iv_name, "disk/0")
        self.assertEqual(disk.mode, "rw")
        self.assertEqual(disk.nodes, [self.cfg.get_node(NODE1).uuid])
        self.assertEqual(disk.logical_id[0], "loop")
        self.assertTrue(disk.logical_id[1].startswith(
            FSD + "/inst1.example.com/" + disk.uuid))
        self.assertEqual(self.rpc.files[NODE1], {disk.logical_id[1]})
        # the create call: the disk's config dict and its size
        node, _, args = self.rpc.calls_of("blockdev_create")[0]
        self.assertEqual(args[0]["logical_id"], disk.logical_id)
        self.assertEqual(args[1], 1024)
        # the OS call gets the filled instance with its disks and node names
        os_inst = self.rpc.calls_of("instance_os_add")[0][2][0]
        self.assertEqual(os_inst["primary_node"], NODE1)
        self.assertEqual(os_inst["disks_info"][0]["uuid"], disk.uuid)
        self.assertEqual(os_inst["beparams"]["maxmem"], 256)
        self.assertEqual(os_inst["nics"][0]["nicparams"]["mode"], "bridged")
        spec = self.rpc.calls_of("instance_start")[0][2][0]
        self.assertEqual(spec["hypervisor"], "fake")
        self.assertEqual(spec["beparams"]["maxmem"], 256)
        self.assertEqual(spec["hvparams"]["migration_mode"], "live")
        self.assertEqual(spec["nics"][0]["mac"], inst.nics[0].mac)
        # the new instance has its lock, held by nobody now
        self.assertIn(inst.uuid, self.instance_locks())
        self.assertIn("* creating instance disks...", self.log)
        self.assertIn("* starting instance...", self.log)
        self.assertEqual(self.cfg.verify(), [])

    def test_sizes_no_instance_can_have_are_wrong_input(self):
        before = self.cfg.to_dict()
        for memory, words in ((float("inf"), "not a finite number"),
                              (1e300, "is out of range"),
                              ("9" * 400, "is out of range"),
                              (2 ** 44, "is out of range")):
            err = self.fails(create_op(beparams={"memory": memory}))
            self.assertIn("beparams", err.args[0])
            self.assertIn(words, err.args[0])
            self.assertEqual(err.args[1], errors.ECODE_INVAL)
        err = self.fails(create_op(disks=[{"size": "9" * 400}]))
        self.assertIn("disks/0/size: the size", err.args[0])
        self.assertEqual(self.rpc.calls, [])
        self.assertEqual(self.cfg.to_dict(), before)

    def test_no_start_and_no_install(self):
        self.ok(create_op(start=False))
        self.assertNotIn("instance_start", self.rpc.procedures())
        self.assertEqual(self.inst().admin_state, "down")
        self.rpc.calls = []
        self.ok(create_op("inst2.example.com", no_install=True))
        self.assertNotIn("instance_os_add", self.rpc.procedures())
        self.assertNotIn("instance_start", self.rpc.procedures())
        self.assertIn("No-installation mode selected, disabling startup",
                      self.log)

    def test_os_install_failure_removes_everything(self):
        before = self.cfg.to_dict()
        locks = self.instance_locks()
        self.rpc.fail["instance_os_add"] = "OS busybox create script failed"
        err = self.fails(create_op(), errors.OpExecError)
        self.assertIn("Installing OS busybox+default", str(err))
        self.assertIn("node %s" % NODE1, str(err))
        self.assertIn("create script failed", str(err))
        created = self.rpc.calls_of("blockdev_create")[0][2][0]
        removed = self.rpc.calls_of("blockdev_remove")[0][2][0]
        self.assertEqual(removed["logical_id"], created["logical_id"])
        self.assertEqual(self.rpc.files[NODE1], set())
        self.assertEqual(self.cfg.instances, {})
        self.assertEqual(self.cfg.disks, {})
        self.assertEqual(self.instance_locks(), locks)
        self.assertEqual(self.cfg.to_dict()["instances"],
                         before["instances"])

    def test_disk_creation_failure_undoes_created_disks(self):
        def second_fails(node, args):
            if args[0]["iv_name"] == "disk/1":
                return "no space left"
        self.rpc.fail["blockdev_create"] = second_fails
        err = self.fails(create_op(disks=[{"size": 1024}, {"size": 2048}]),
                         errors.OpExecError)
        self.assertIn("Creating disk disk/1", str(err))
        self.assertIn("no space left", str(err))
        self.assertEqual(len(self.rpc.calls_of("blockdev_remove")), 1)
        self.assertEqual(self.rpc.files[NODE1], set())
        self.assertEqual(self.cfg.instances, {})
        self.assertEqual(self.instance_locks(), [])

    def test_start_failure_keeps_the_installed_instance_stopped(self):
        self.rpc.fail["instance_start"] = "not enough memory"
        err = self.fails(create_op(), errors.OpExecError)
        self.assertIn("not enough memory", str(err))
        self.assertIn("stays stopped", str(err))
        self.assertEqual(self.inst().admin_state, "down")

    def test_dry_run_changes_nothing_and_returns_placement(self):
        before = self.cfg.to_dict()
        locks = self.instance_locks()
        result = self.ok(create_op(dry_run=True))
        self.assertEqual(result, [NODE1])
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertEqual(self.instance_locks(), locks)
        # the node was asked about its resources and the OS, nothing was
        # created
        self.assertEqual(self.rpc.procedures(),
                         ["node_info", "all_instances_info", "os_validate",
                          "hypervisor_validate_params"])
        # ... and a dry run still refuses what would fail
        self.rpc.memory_free = 128
        err = self.fails(create_op(dry_run=True))
        self.assertIn("Not enough memory on node %s" % NODE1, str(err))

    def test_resource_exhaustion_is_refused(self):
        self.rpc.memory_free = 1024
        self.create("inst1.example.com", beparams={"memory": 768})
        before = self.cfg.to_dict()
        err = self.fails(create_op("inst2.example.com",
                                   beparams={"memory": 512}))
        self.assertEqual(err.args[1], errors.ECODE_NORES)
        self.assertIn("Not enough memory on node %s for instance"
                      " inst2.example.com: needed 512 MiB, available 256 MiB"
                      % NODE1, str(err))
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertEqual(self.rpc.procedures(),
                         ["all_instances_info", "node_info",
                          "all_instances_info"])
        self.assertEqual(len(self.instance_locks()), 1)

    def assert_refused(self, op, *words, kind=errors.OpPrereqError):
        before = self.cfg.to_dict()
        locks = self.instance_locks()
        err = self.fails(op, kind)
        for word in words:
            self.assertIn(word, str(err))
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertEqual(self.instance_locks(), locks)
        self.assertEqual(self.rpc.calls_of("blockdev_create"), [])
        return err

    def test_bad_parameters_are_named(self):
        self.assert_refused(create_op(hvparams={"no_such_knob": 1}),
                            "hvparams", "no_such_knob")
        self.assert_refused(create_op(hvparams={"migration_mode": "live"}),
                            "hvparams", "migration_mode", "cluster level")
        self.assert_refused(create_op(nics=[{"mode": "routed"}]),
                            "nics/0", "routed")
        self.assert_refused(create_op(nics=[{"mac": "xx:yy"}]),
                            "nics/0", "xx:yy")
        self.assert_refused(create_op(nics=[{"ip": "10.0.0.300"}]),
                            "nics/0/ip", "10.0.0.300")
        self.assert_refused(create_op(pnode="ghost"),
                            "node 'ghost' is not known")
        self.assert_refused(create_op(beparams={"memroy": 128}),
                            "beparams", "memroy")
        self.assert_refused(create_op(beparams={"minmem": 512,
                                                "maxmem": 256}),
                            "minimum memory")
        self.assert_refused(create_op(disks=[{"size": "lots"}]),
                            "disks/0/size", "lots")
        self.assert_refused(create_op(disks=[{"size": 10, "mode": "rx"}]),
                            "disks/0/mode")
        self.assert_refused(create_op(disk_template="drbd"),
                            "drbd is not supported yet")
        self.assert_refused(create_op(disk_template="sharedfile"),
                            "sharedfile", "not enabled")
        self.assert_refused(create_op(hypervisor="xen-pvm"),
                            "hypervisor", "xen-pvm", "not enabled")
        self.assert_refused(create_op(pnode=None), "pnode",
                            "no default allocator for 'allocate' requests")
        self.assert_refused(create_op(pnode=None, iallocator="no-such"),
                            "iallocator module 'no-such' not found",
                            kind=errors.OpExecError)
        self.assert_refused(create_op(os_type=None), "os_type")
        self.assert_refused(create_op(mode="remote-import"),
                            "source_handshake", "missing")
        self.assert_refused(create_op(forthcoming=True, commit=True),
                            "mutually exclusive")

    def test_bad_os_variant_reported_by_the_node(self):
        err = self.assert_refused(create_op(os_type="busybox+nosuch"),
                                  "os_type", "busybox+nosuch", NODE1,
                                  "has no variant 'nosuch'")
        self.assertEqual(err.args[1], errors.ECODE_INVAL)
        self.assert_refused(create_op(os_type="debian"),
                            "os_type", "debian", "not found")

    def test_name_in_use(self):
        self.create()
        err = self.fails(create_op())
        self.assertIn("already in the cluster", str(err))
        self.assertEqual(err.args[1], errors.ECODE_EXISTS)

    def test_unit_sizes_and_nic_options(self):
        self.create(disks=[{"size": "2G", "name": "root"}, {"size": 1536,
                                                             "mode": "ro"}],
                    nics=[{"mac": "AA:00:00:11:22:33", "link": "br1"},
                          {"mode": "routed", "ip": "10.0.0.5",
                           "link": "100"}])
        disks = self.cfg.instance_disks(self.inst())
        self.assertEqual([(d.size, d.mode, d.name, d.iv_name)
                          for d in disks],
                         [(2048, "rw", "root", "disk/0"),
                          (1536, "ro", None, "disk/1")])
        nics = self.inst().nics
        self.assertEqual(nics[0].mac, "aa:00:00:11:22:33")
        self.assertEqual(nics[0].nicparams, {"link": "br1"})
        self.assertEqual((nics[1].ip, nics[1].nicparams["mode"]),
                         ("10.0.0.5", "routed"))
        err = self.fails(create_op("inst2.example.com",
                                   nics=[{"mac": "aa:00:00:11:22:33"}]))
        self.assertIn("already in use", str(err))

    def test_plain_and_diskless(self):
        self.create(disk_template="plain", disks=[{"size": 1024}])
        (disk,) = self.cfg.instance_disks(self.inst())
        self.assertEqual(disk.logical_id, ["xenvg", disk.uuid + ".disk0"])
        self.create("inst2.example.com", disk_template="diskless", disks=[])
        self.assertEqual(self.cfg.instance_disks(
            self.inst("inst2.example.com")), [])


class CreateLockTests(InstanceTestCase):

    def test_new_instance_is_locked_while_being_built(self):
        self.rpc.hold("instance_os_add")
        create = self.run_op(create_op())
        self.assertNoResult(create)
        inst = self.inst()           # in the config already, admin down
        self.assertEqual(inst.admin_state, "down")
        owners = [lock["owners"] for lock in self.glm.query_locks()
                  if lock["name"] == "instance/%s" % inst.uuid]
        self.assertEqual(owners, [["job-1/op-0"]])
        tags = self.run_op({"OP_ID": "OP_TAGS_SET", "kind": "instance",
                            "name": "inst1.example.com", "tags": ["web"]})
        self.assertNoResult(tags)    # waits for the instance lock
        self.rpc.release("instance_os_add", keep=False)
        self.assertEqual(self.successResultOf(create), [NODE1])
        self.successResultOf(tags)
        self.assertEqual(self.inst().tags, {"web"})

    def test_lock_set_held_by_another_job(self):
        # Somebody holds every instance lock: the new lock is added once
        # they are done, and the creation goes on then.
        self.glm.acquire(locking.LEVEL_CLUSTER, [locking.BGL], "other",
                         shared=True)
        self.glm.acquire(locking.LEVEL_INSTANCE, locking.ALL_SET, "other",
                         shared=True)
        create = self.run_op(create_op())
        self.assertNoResult(create)
        self.assertEqual(self.cfg.instances, {})
        self.glm.release_all("other")
        self.assertEqual(self.successResultOf(create), [NODE1])
        self.assertIn(self.inst().uuid, self.instance_locks())

    def test_two_creates_on_one_node_run_one_after_the_other(self):
        self.rpc.hold("blockdev_create")
        first = self.run_op(create_op())
        second = self.run_op(create_op("inst2.example.com"))
        self.assertNoResult(second)
        self.assertEqual(len(self.cfg.instances), 1)
        self.rpc.release("blockdev_create", keep=False)
        self.successResultOf(first)
        self.successResultOf(second)
        self.assertEqual(len(self.cfg.instances), 2)


class ForthcomingTests(InstanceTestCase):

    def test_forthcoming_then_commit(self):
        self.rpc.memory_free = 1024
        uuid = self.ok(create_op("", forthcoming=True, os_type=None,
                                 nics=[], disks=[{"size": 1536}]))
        # only the node's domains and capacity were asked for
        self.assertEqual(self.rpc.procedures(),
                         ["all_instances_info", "node_info",
                          "all_instances_info"])
        inst = self.cfg.get_instance(uuid)
        self.assertTrue(inst.forthcoming)
        self.assertIsNone(inst.name)
        self.assertEqual(inst.admin_state, "down")
        (disk,) = self.cfg.instance_disks(inst)
        self.assertTrue(disk.forthcoming)
        self.assertEqual(disk.size, 1536)
        self.assertIn(uuid, self.instance_locks())
        # its memory (256 MiB) is reserved
        err = self.fails(create_op("other.example.com",
                                   beparams={"memory": 1000}))
        self.assertIn("needed 1000 MiB, available 768 MiB (free 1024 MiB,"
                      " 256 MiB reserved for stopped and forthcoming"
                      " instances)", str(err))
        # a commit needs a name: give it one (config only)
        self.rpc.calls = []
        err = self.fails(create_op(uuid, commit=True))
        self.assertIn("has no name", str(err))
        self.assertEqual(self.ok({"OP_ID": "OP_INSTANCE_RENAME",
                                  "instance_name": uuid,
                                  "new_name": "inst1.example.com"}),
                         "inst1.example.com")
        self.assertEqual(self.rpc.calls, [])
        # the commit creates the disk, installs and starts
        result = self.ok(create_op(commit=True, disks=[], nics=[{}]))
        self.assertEqual(result, [NODE1])
        self.assertEqual(self.rpc.procedures(), [
            "os_validate", "hypervisor_validate_params", "blockdev_create",
            "instance_os_add", "instance_start"])
        inst = self.inst()
        self.assertEqual(inst.uuid, uuid)
        self.assertFalse(inst.forthcoming)
        self.assertEqual(inst.os, "busybox+default")
        self.assertEqual(inst.admin_state, "up")
        self.assertEqual(len(inst.nics), 1)
        (disk,) = self.cfg.instance_disks(inst)
        self.assertFalse(disk.forthcoming)
        self.assertEqual(disk.logical_id[1].rsplit("/", 2)[1],
                         "inst1.example.com")
        self.assertEqual(self.cfg.verify(), [])

    def test_failed_commit_stays_forthcoming(self):
        uuid = self.ok(create_op(forthcoming=True, os_type=None, nics=[]))
        self.rpc.fail["instance_os_add"] = "script failed"
        err = self.fails(create_op(commit=True), errors.OpExecError)
        self.assertIn("script failed", str(err))
        inst = self.cfg.get_instance(uuid)
        self.assertTrue(inst.forthcoming)
        self.assertIsNone(inst.os)
        self.assertEqual(inst.nics, [])
        self.assertEqual(self.rpc.files[NODE1], set())
        self.assertIn(uuid, self.instance_locks())

    def test_commit_needs_a_forthcoming_instance(self):
        self.create()
        err = self.fails(create_op(commit=True))
        self.assertIn("not forthcoming", str(err))

    def test_remove_forthcoming_is_config_only(self):
        uuid = self.ok(create_op(forthcoming=True))
        self.rpc.calls = []
        self.ok({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": uuid})
        self.assertEqual(self.rpc.calls, [])
        self.assertEqual(self.cfg.instances, {})
        self.assertNotIn(uuid, self.instance_locks())


class LifeCycleTests(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.create()

    def op(self, op_id, **kw):
        kw.update(OP_ID=op_id)
        kw.setdefault("instance_name", "inst1.example.com")
        return kw

    def test_shutdown_and_startup(self):
        self.ok(self.op("OP_INSTANCE_SHUTDOWN", timeout=30))
        self.assertEqual(self.rpc.calls[0],
                         (NODE1, "instance_shutdown",
                          ["inst1.example.com", "fake", 30]))
        inst = self.inst()
        self.assertEqual((inst.admin_state, inst.admin_state_source),
                         ("down", "admin"))
        self.assertFalse(inst.disks_active)
        self.rpc.calls = []
        self.ok(self.op("OP_INSTANCE_STARTUP", beparams={"memory": 512}))
        self.assertEqual(self.rpc.procedures(), [
            "instance_info", "all_instances_info", "node_info",
            "blockdev_assemble", "instance_start"])
        spec = self.rpc.calls_of("instance_start")[0][2][0]
        self.assertEqual(spec["beparams"]["maxmem"], 512)
        # ... for this start only
        self.assertEqual(self.inst().beparams["maxmem"], 256)
        self.assertEqual(self.inst().admin_state, "up")
        self.assertTrue(self.inst().disks_active)
        # starting a running instance is fine and does nothing
        self.rpc.calls = []
        self.ok(self.op("OP_INSTANCE_STARTUP"))
        self.assertEqual(self.rpc.procedures(), ["instance_info"])
        self.assertIn("Instance inst1.example.com is already running",
                      self.log)

    def test_shutdown_no_remember(self):
        self.ok(self.op("OP_INSTANCE_SHUTDOWN", no_remember=True))
        self.assertEqual(self.inst().admin_state, "up")

    def test_startup_refusals(self):
        self.ok(self.op("OP_INSTANCE_SHUTDOWN"))
        self.rpc.memory_free = 100
        err = self.fails(self.op("OP_INSTANCE_STARTUP"))
        self.assertIn("Not enough memory on node %s" % NODE1, str(err))
        self.assertEqual(self.inst().admin_state, "down")
        self.rpc.memory_free = 4096
        err = self.fails(self.op("OP_INSTANCE_STARTUP",
                                 hvparams={"migration_mode": "live"}))
        self.assertIn("cluster level", str(err))
        self.ok(self.op("OP_INSTANCE_SET_PARAMS", offline=True))
        err = self.fails(self.op("OP_INSTANCE_STARTUP"))
        self.assertIn("marked to be offline", str(err))
        self.ok(self.op("OP_INSTANCE_SET_PARAMS", offline=False))
        self.cfg.set_node_params(NODE1, offline=True,
                                 master_candidate=False)
        err = self.fails(self.op("OP_INSTANCE_STARTUP"))
        self.assertIn("offline node %s" % NODE1, str(err))

    def test_failed_start_restores_the_admin_state(self):
        self.ok(self.op("OP_INSTANCE_SHUTDOWN"))
        self.rpc.fail["instance_start"] = "qemu died"
        err = self.fails(self.op("OP_INSTANCE_STARTUP"), errors.OpExecError)
        self.assertIn("Starting instance inst1.example.com failed on node"
                      " %s: qemu died" % NODE1, str(err))
        self.assertEqual(self.inst().admin_state, "down")
        self.assertFalse(self.inst().disks_active)

    def test_startup_cleans_up_a_kept_domain(self):
        self.rpc.domains[(NODE1, "inst1.example.com")] = "crashed"
        self.ok(self.op("OP_INSTANCE_STARTUP"))
        procs = self.rpc.procedures()
        self.assertLess(procs.index("instance_cleanup"),
                        procs.index("instance_start"))

    def test_user_shutdown_refused_when_running(self):
        self.cfg.set_cluster_params(enabled_user_shutdown=True)
        err = self.fails(self.op("OP_INSTANCE_SHUTDOWN",
                                 admin_state_source="user"))
        self.assertIn("was not shutdown by the user", str(err))
        self.assertIn("running", str(err))
        self.assertEqual(self.inst().admin_state, "up")
        self.assertEqual(self.rpc.procedures(), ["instance_info"])

    def test_user_shutdown_recorded_and_cleaned_up(self):
        self.cfg.set_cluster_params(enabled_user_shutdown=True)
        self.rpc.domains[(NODE1, "inst1.example.com")] = "shutdown"
        self.ok(self.op("OP_INSTANCE_SHUTDOWN", admin_state_source="user"))
        inst = self.inst()
        self.assertEqual((inst.admin_state, inst.admin_state_source),
                         ("down", "user"))
        self.assertTrue(inst.disks_active)   # as in Ganeti
        self.assertEqual(self.rpc.procedures(),
                         ["instance_info", "instance_cleanup"])
        self.assertNotIn((NODE1, "inst1.example.com"), self.rpc.domains)
        # query data: not live, admin down by the user
        data = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA"})
        self.assertEqual(data["inst1.example.com"]["run_state"], "user down")

    def test_kept_domain_of_a_down_instance_cleaned_up_without_recording(
            self):
        # what the watcher submits for an instance that should not run but
        # whose guest powered itself off: the domain goes, the configuration
        # stays, whatever the user-shutdown settings (off here)
        self.ok(self.op("OP_INSTANCE_SHUTDOWN"))
        self.rpc.domains[(NODE1, "inst1.example.com")] = "shutdown"
        disks_before = self.inst().disks_active
        self.rpc.calls = []
        self.log[:] = []
        self.ok(self.op("OP_INSTANCE_SHUTDOWN", admin_state_source="user",
                        no_remember=True))
        inst = self.inst()
        self.assertEqual((inst.admin_state, inst.admin_state_source),
                         ("down", "admin"))
        self.assertEqual(inst.disks_active, disks_before)
        self.assertEqual(self.rpc.procedures(),
                         ["instance_info", "instance_cleanup"])
        self.assertNotIn((NODE1, "inst1.example.com"), self.rpc.domains)
        self.assertFalse(any("has no effect" in str(m) for m in self.log),
                         self.log)
        # (unlike "admin" with no_remember, which indeed does nothing more)
        self.ok(self.op("OP_INSTANCE_SHUTDOWN", admin_state_source="admin",
                        no_remember=True))
        self.assertTrue(any("has no effect" in str(m) for m in self.log),
                        self.log)

    def test_kept_domain_cleanup_rechecks_under_the_lock(self):
        # started meanwhile: the watcher's cleanup must not stop it
        self.rpc.calls = []
        err = self.fails(self.op("OP_INSTANCE_SHUTDOWN",
                                 admin_state_source="user",
                                 no_remember=True))
        self.assertIn("was not shutdown by the user (the node reports it"
                      " running)", str(err))
        self.assertEqual(self.rpc.procedures(), ["instance_info"])
        self.assertEqual(self.rpc.domains[(NODE1, "inst1.example.com")],
                         "running")
        self.assertEqual(self.inst().admin_state, "up")
        # a crashed domain is no guest poweroff either
        self.rpc.domains[(NODE1, "inst1.example.com")] = "crashed"
        self.fails(self.op("OP_INSTANCE_SHUTDOWN", admin_state_source="user",
                           no_remember=True))
        self.assertEqual(self.rpc.domains[(NODE1, "inst1.example.com")],
                         "crashed")

    def test_crashed_instance_is_not_shown_up(self):
        # The admin wants it up, the node reports a crashed domain.
        self.rpc.domains[(NODE1, "inst1.example.com")] = "crashed"
        data = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA"})
        self.assertEqual(data["inst1.example.com"]["config_state"], "up")
        self.assertEqual(data["inst1.example.com"]["run_state"], "down")

    def test_reboot_types(self):
        for rtype in ("soft", "hard"):
            self.rpc.calls = []
            self.ok(self.op("OP_INSTANCE_REBOOT", reboot_type=rtype))
            self.assertEqual(self.rpc.procedures(),
                             ["instance_info", "instance_reboot"])
            args = self.rpc.calls[1][2]
            self.assertEqual(args[0]["name"], "inst1.example.com")
            self.assertEqual(args[1:3], ["fake", rtype])
        self.rpc.calls = []
        self.ok(self.op("OP_INSTANCE_REBOOT", reboot_type="full"))
        self.assertEqual(self.rpc.procedures(), [
            "instance_info", "instance_shutdown", "blockdev_shutdown",
            "blockdev_assemble", "instance_start"])
        # an instance that should run but does not is started
        self.rpc.domains.clear()
        self.rpc.calls = []
        self.ok(self.op("OP_INSTANCE_REBOOT", reboot_type="soft"))
        self.assertEqual(self.rpc.procedures(), [
            "instance_info", "blockdev_assemble", "instance_start"])
        self.assertIn("Instance inst1.example.com was already stopped,"
                      " starting now", self.log)
        self.ok(self.op("OP_INSTANCE_SHUTDOWN"))
        err = self.fails(self.op("OP_INSTANCE_REBOOT", reboot_type="soft"))
        self.assertIn("marked to be down, cannot reboot", str(err))

    def test_rename(self):
        err = self.fails(self.op("OP_INSTANCE_RENAME",
                                 new_name="inst9.example.com"))
        self.assertIn("marked to be up, cannot rename", str(err))
        self.ok(self.op("OP_INSTANCE_SHUTDOWN"))
        self.rpc.calls = []
        (disk,) = self.cfg.instance_disks(self.inst())
        old_path = disk.logical_id[1]
        result = self.ok(self.op("OP_INSTANCE_RENAME",
                                 new_name="inst9.example.com"))
        self.assertEqual(result, "inst9.example.com")
        self.assertEqual(self.rpc.procedures(),
                         ["instance_info", "file_storage_dir_rename",
                          "instance_run_rename"])
        # The disks' directory follows the name, on the node and in config.
        old_dir, new_dir = self.rpc.calls[1][2]
        self.assertEqual(os.path.basename(old_dir), "inst1.example.com")
        self.assertEqual(os.path.basename(new_dir), "inst9.example.com")
        new_path = self.cfg.get_disk(disk.uuid).logical_id[1]
        self.assertEqual(new_path, os.path.join(
            new_dir, os.path.basename(old_path)))
        self.assertEqual(self.rpc.files[NODE1], {new_path})
        args = self.rpc.calls[2][2]
        self.assertEqual(args[0]["name"], "inst9.example.com")
        self.assertEqual(args[1], "inst1.example.com")
        self.assertEqual(self.inst("inst9.example.com").name,
                         "inst9.example.com")
        self.create("inst2.example.com")
        err = self.fails({"OP_ID": "OP_INSTANCE_RENAME",
                          "instance_name": "inst9.example.com",
                          "new_name": "inst2.example.com"})
        self.assertIn("already in the cluster", str(err))

    def test_rename_changes_nothing_when_the_directory_cannot_move(self):
        self.ok(self.op("OP_INSTANCE_SHUTDOWN"))
        (disk,) = self.cfg.instance_disks(self.inst())
        old_lid = list(disk.logical_id)
        self.rpc.fail["file_storage_dir_rename"] = "new_dir: exists"
        err = self.fails(self.op("OP_INSTANCE_RENAME",
                                 new_name="inst9.example.com"),
                         errors.OpExecError)
        self.assertIn("Could not rename the file storage directory",
                      str(err))
        self.assertEqual(self.inst().name, "inst1.example.com")
        self.assertEqual(self.cfg.get_disk(disk.uuid).logical_id, old_lid)
        self.assertNotIn("instance_run_rename", self.rpc.procedures())

    def test_rename_refused_when_running_on_the_node(self):
        self.ok(self.op("OP_INSTANCE_SHUTDOWN", no_remember=False))
        self.rpc.domains[(NODE1, "inst1.example.com")] = "running"
        err = self.fails(self.op("OP_INSTANCE_RENAME",
                                 new_name="inst9.example.com"))
        self.assertIn("is running, cannot rename", str(err))
        self.assertEqual(self.inst().name, "inst1.example.com")

    def test_remove(self):
        inst = self.inst()
        (disk,) = self.cfg.instance_disks(inst)
        self.ok(self.op("OP_INSTANCE_REMOVE", shutdown_timeout=10))
        self.assertEqual(self.rpc.procedures(),
                         ["instance_shutdown", "blockdev_remove"])
        self.assertEqual(self.rpc.calls[1][2][0]["uuid"], disk.uuid)
        self.assertEqual(self.cfg.instances, {})
        self.assertEqual(self.cfg.disks, {})
        self.assertNotIn(inst.uuid, self.instance_locks())
        self.assertEqual(self.rpc.files[NODE1], set())

    def test_remove_failures(self):
        self.rpc.fail["blockdev_remove"] = "device busy"
        err = self.fails(self.op("OP_INSTANCE_REMOVE"), errors.OpExecError)
        self.assertIn("disks", str(err))
        self.assertIn("device busy", " ".join(self.log))
        self.assertIn("inst1.example.com", [i.name for i in
                                            self.cfg.instances.values()])
        self.ok(self.op("OP_INSTANCE_REMOVE", ignore_failures=True))
        self.assertEqual(self.cfg.instances, {})

    def test_reinstall(self):
        err = self.fails(self.op("OP_INSTANCE_REINSTALL"))
        self.assertIn("cannot reinstall", str(err))
        self.ok(self.op("OP_INSTANCE_SHUTDOWN"))
        self.rpc.calls = []
        self.ok(self.op("OP_INSTANCE_REINSTALL", os_type="busybox+minimal",
                        osparams={"motd": "hi"}))
        self.assertEqual(self.rpc.procedures(),
                         ["instance_info", "os_validate", "instance_os_add"])
        args = self.rpc.calls_of("instance_os_add")[0][2]
        self.assertEqual(args[0]["os"], "busybox+minimal")
        self.assertEqual(args[0]["osparams"], {"motd": "hi"})
        self.assertTrue(args[1])
        self.assertEqual(self.inst().os, "busybox+minimal")
        self.assertEqual(self.inst().osparams, {"motd": "hi"})
        self.rpc.fail["instance_os_add"] = "boom"
        self.fails(self.op("OP_INSTANCE_REINSTALL", os_type="busybox"),
                   errors.OpExecError)
        self.assertEqual(self.inst().os, "busybox+minimal")

    def test_query_data(self):
        data = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA"})
        self.assertIn("Non-static data requested, locks need to be acquired",
                      " ".join(self.log))
        info = data["inst1.example.com"]
        inst = self.inst()
        self.assertEqual(info["name"], "inst1.example.com")
        self.assertEqual(info["config_state"], "up")
        self.assertEqual(info["run_state"], "up")
        self.assertEqual(info["pnode"], NODE1)
        self.assertEqual(info["pnode_group_name"], "default")
        self.assertEqual(info["snodes"], [])
        self.assertEqual(info["os"], "busybox+default")
        self.assertEqual(info["hypervisor"], "fake")
        self.assertEqual(info["disk_template"], "file")
        self.assertEqual(info["uuid"], inst.uuid)
        self.assertEqual(info["be_instance"], {"maxmem": 256, "minmem": 256})
        self.assertEqual(info["be_actual"]["vcpus"], 1)
        self.assertEqual(info["hv_actual"], {})
        nic = info["nics"][0]
        self.assertEqual(nic[3], inst.nics[0].mac)
        self.assertEqual(nic[4:6], ["bridged", "xen-br0"])
        disk = info["disks"][0]
        self.assertEqual(disk["iv_name"], "disk/0")
        self.assertEqual(disk["size"], 1024)
        self.assertEqual(disk["pstatus"][0], disk["logical_id"][1])
        self.assertIsNone(disk["sstatus"])
        # static: no node asked
        self.rpc.calls = []
        data = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA", "static": True,
                        "instances": ["inst1.example.com"]})
        self.assertIsNone(data["inst1.example.com"]["run_state"])
        self.assertIsNone(data["inst1.example.com"]["disks"][0]["pstatus"])
        self.assertEqual(self.rpc.calls, [])
        self.ok(self.op("OP_INSTANCE_SHUTDOWN"))
        data = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA"})
        self.assertEqual(data["inst1.example.com"]["run_state"], "down")
        err = self.fails({"OP_ID": "OP_INSTANCE_QUERY_DATA",
                          "instances": ["ghost"]})
        self.assertIn("instance 'ghost' is not known", str(err))

    def test_activate_and_deactivate_disks(self):
        err = self.fails(self.op("OP_INSTANCE_DEACTIVATE_DISKS"))
        self.assertIn("cannot shutdown disks", str(err))
        self.ok(self.op("OP_INSTANCE_SHUTDOWN"))
        self.assertFalse(self.inst().disks_active)
        (disk,) = self.cfg.instance_disks(self.inst())
        result = self.ok(self.op("OP_INSTANCE_ACTIVATE_DISKS"))
        self.assertEqual(result, [[NODE1, "disk/0", disk.logical_id[1]]])
        self.assertTrue(self.inst().disks_active)
        self.rpc.calls = []
        self.ok(self.op("OP_INSTANCE_DEACTIVATE_DISKS"))
        self.assertEqual(self.rpc.procedures(),
                         ["instance_info", "blockdev_shutdown"])
        self.assertFalse(self.inst().disks_active)
        self.rpc.files[NODE1].clear()
        err = self.fails(self.op("OP_INSTANCE_ACTIVATE_DISKS"),
                         errors.OpExecError)
        self.assertIn("does not exist", str(err))
        self.assertFalse(self.inst().disks_active)

    def test_grow_disk(self):
        (disk,) = self.cfg.instance_disks(self.inst())
        self.ok(self.op("OP_INSTANCE_GROW_DISK", disk=0, amount=512))
        self.assertEqual([c[2][1:] for c in
                          self.rpc.calls_of("blockdev_grow")],
                         [[512, True], [512, False]])
        self.assertEqual(self.cfg.get_disk(disk.uuid).size, 1536)
        self.rpc.calls = []
        self.ok(self.op("OP_INSTANCE_GROW_DISK", disk=0, amount=2048,
                        absolute=True))
        self.assertEqual(self.rpc.calls_of("blockdev_grow")[0][2][1], 512)
        self.assertEqual(self.cfg.get_disk(disk.uuid).size, 2048)
        err = self.fails(self.op("OP_INSTANCE_GROW_DISK", disk=0,
                                 amount=1024, absolute=True))
        self.assertIn("smaller than the current disk size", str(err))
        err = self.fails(self.op("OP_INSTANCE_GROW_DISK", disk=3,
                                 amount=1))
        self.assertIn("has no disk 3", str(err))
        # what the node reports free is what it may grow by
        self.rpc.disk_free = 1999
        self.rpc.calls = []
        err = self.fails(self.op("OP_INSTANCE_GROW_DISK", disk=0,
                                 amount=2000))
        self.assertIn("Not enough disk on node %s for instance"
                      " inst1.example.com: needed 2000 MiB, available 1999"
                      " MiB" % NODE1, str(err))
        self.assertEqual(self.rpc.procedures(),
                         ["node_info", "all_instances_info"])
        self.ok(self.op("OP_INSTANCE_GROW_DISK", disk=0, amount=1999))
        self.rpc.disk_free = 100 * 1024
        self.rpc.fail["blockdev_grow"] = "no space"
        err = self.fails(self.op("OP_INSTANCE_GROW_DISK", disk=0, amount=10),
                         errors.OpExecError)
        self.assertIn("no space", str(err))
        self.assertEqual(self.cfg.get_disk(disk.uuid).size, 4047)


class SetParamsTests(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.create()

    def modify(self, **kw):
        kw.update(OP_ID="OP_INSTANCE_SET_PARAMS",
                  instance_name="inst1.example.com")
        return kw

    def test_parameters(self):
        result = self.ok(self.modify(beparams={"memory": 512, "vcpus": 2},
                                     osparams={"motd": "hello"}))
        self.assertIn(["be/maxmem", 512], result)
        self.assertIn(["be/vcpus", 2], result)
        self.assertIn(["os/motd", "hello"], result)
        inst = self.inst()
        self.assertEqual(inst.beparams, {"maxmem": 512, "minmem": 512,
                                         "vcpus": 2})
        self.assertEqual(inst.osparams, {"motd": "hello"})
        # more memory: the node is asked whether it has room
        self.assertEqual(self.rpc.procedures(),
                         ["node_info", "all_instances_info", "os_validate"])
        self.ok(self.modify(beparams={"vcpus": "default"}))
        self.assertNotIn("vcpus", self.inst().beparams)

    def test_refusals_change_nothing(self):
        before = self.cfg.to_dict()
        for op, words in [
                (self.modify(beparams={"memroy": 1}), ["memroy"]),
                (self.modify(hvparams={"migration_mode": "live"}),
                 ["cluster level"]),
                (self.modify(nics=[["add", -1, {"mode": "routed"}]]),
                 ["nics/1", "routed"]),
                (self.modify(disks=[["remove", 0, {}]]),
                 ["cannot remove disks"]),
                (self.modify(disks=[["modify", 0, {"size": 5}]]),
                 ["only name and mode"]),
                (self.modify(nics=[["modify", 4, {}]]),
                 ["out of range"]),
                (self.modify(disk_template="plain"),
                 ["disk_template", "not supported yet"]),
                (self.modify(offline=True), ["without being down first"]),
                (self.modify(), ["No changes"]),
                (self.modify(os_name="busybox+nosuch"),
                 ["has no variant 'nosuch'"])]:
            err = self.fails(op)
            for word in words:
                self.assertIn(word, str(err))
            self.assertEqual(self.cfg.to_dict(), before)
        # the running instance holds 256 MiB: it needs 1744 more
        self.rpc.memory_free = 1000
        err = self.fails(self.modify(beparams={"memory": 2000}))
        self.assertIn("Not enough memory on node %s for instance"
                      " inst1.example.com: needed 1744 MiB, available 744"
                      " MiB" % NODE1, str(err))
        self.assertEqual(self.cfg.to_dict(), before)
        self.ok(self.modify(beparams={"memory": 1000}))

    def test_nics(self):
        old_mac = self.inst().nics[0].mac
        result = self.ok(self.modify(nics=[
            ["add", -1, {"link": "br9"}],
            ["modify", 0, {"ip": "10.1.1.1"}]]))
        nics = self.inst().nics
        self.assertEqual(len(nics), 2)
        self.assertEqual(nics[0].ip, "10.1.1.1")
        self.assertEqual(nics[0].mac, old_mac)
        self.assertEqual(nics[1].nicparams, {"link": "br9"})
        self.assertEqual(result[0][0], "nic.1")
        self.assertTrue(result[0][1].startswith("add:mac=aa:00:00:"))
        self.assertIn(["nic.ip/0", "10.1.1.1"], result)
        self.ok(self.modify(nics=[["remove", 0, {}]]))
        self.assertEqual([n.nicparams for n in self.inst().nics],
                         [{"link": "br9"}])
        # the old form: [index, params]
        self.ok(self.modify(nics=[[0, {"name": "eth0"}]]))
        self.assertEqual(self.inst().nics[0].name, "eth0")

    def test_disks(self):
        self.rpc.calls = []
        result = self.ok(self.modify(disks=[["add", -1, {"size": 1536}],
                                            ["modify", 0, {"name": "root"}]]))
        self.assertEqual(result[:2], [["disk/1", "add:size=1536,mode=rw"],
                                      ["disk.name/0", "root"]])
        disks = self.cfg.instance_disks(self.inst())
        self.assertEqual([(d.size, d.name, d.iv_name) for d in disks],
                         [(1024, "root", "disk/0"), (1536, None, "disk/1")])
        self.assertEqual(self.rpc.procedures(),
                         ["node_info", "all_instances_info",
                          "blockdev_create", "blockdev_assemble"])
        self.assertIn(disks[1].logical_id[1], self.rpc.files[NODE1])
        self.ok({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                 "instance_name": "inst1.example.com"})
        self.rpc.calls = []
        self.ok(self.modify(disks=[["remove", "root", {}]]))
        self.assertEqual(self.rpc.procedures(),
                         ["instance_info", "blockdev_remove"])
        self.assertEqual([d.size for d in self.cfg.instance_disks(
            self.inst())], [1536])
        self.assertEqual(self.cfg.verify(), [])

    def test_disk_add_failure_changes_nothing(self):
        before = self.cfg.to_dict()
        self.rpc.fail["blockdev_create"] = "disk full"
        err = self.fails(self.modify(disks=[["add", -1, {"size": 1024}]]),
                         errors.OpExecError)
        self.assertIn("disk full", str(err))
        self.assertEqual(self.cfg.to_dict(), before)

    def test_offline_online(self):
        self.ok({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                 "instance_name": "inst1.example.com"})
        self.assertEqual(self.ok(self.modify(offline=True)),
                         [["admin_state", "offline"]])
        self.assertEqual(self.inst().admin_state, "offline")
        err = self.fails({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                          "instance_name": "inst1.example.com"})
        self.assertIn("offline", str(err))
        self.assertEqual(self.ok(self.modify(offline=False)),
                         [["admin_state", "down"]])


class OsDiagnoseTests(InstanceTestCase):

    def diagnose(self, fields=("name", "valid", "variants", "node_status",
                               "hidden", "blacklisted"), names=()):
        return self.ok({"OP_ID": "OP_OS_DIAGNOSE",
                        "output_fields": list(fields), "names": list(names)})

    def test_consistent_across_nodes(self):
        rows = self.diagnose(("name", "valid", "variants", "api_versions",
                              "parameters"))
        self.assertEqual(rows, [["busybox", True, ["default", "minimal"],
                                 [15, 20], [["fail_create", "fail"],
                                            ["motd", "message"]]]])
        self.assertEqual(sorted(c[0] for c in self.rpc.calls), [NODE1, NODE2])

    def test_missing_on_one_node_is_reported(self):
        self.rpc.os_list[NODE2] = []
        self.rpc.os_list[NODE1].append(dict(BUSYBOX, name="debian",
                                            variants=[]))
        rows = self.diagnose()
        by_name = {r[0]: r for r in rows}
        name, valid, variants, node_status, hidden, blk = by_name["busybox"]
        self.assertFalse(valid)
        self.assertEqual(node_status[NODE2], [])
        self.assertEqual(node_status[NODE1][0][:3],
                         ["/etc/os/busybox", True, ""])
        self.assertEqual(len(node_status[NODE1][0]), 7)
        # without "valid" among the fields, invalid OSes are left out
        self.assertEqual(self.diagnose(("name",)), [])

    def test_variants_are_intersected_and_bad_nodes_skipped(self):
        self.rpc.os_list[NODE2] = [dict(BUSYBOX, variants=["default"])]
        self.assertEqual(self.diagnose(("name", "variants")),
                         [["busybox", ["default"]]])
        self.rpc.fail["os_diagnose"] = (
            lambda node, args: "down" if node == NODE2 else None)
        self.assertEqual(self.diagnose(("name", "variants")),
                         [["busybox", ["default", "minimal"]]])
        self.assertIn("Can't get the OS list of node %s" % NODE2,
                      " ".join(self.log))

    def test_offline_nodes_not_asked_and_bad_fields(self):
        self.cfg.set_node_params(NODE2, offline=True, master_candidate=False)
        self.diagnose()
        self.assertEqual([c[0] for c in self.rpc.calls], [NODE1])
        err = self.fails({"OP_ID": "OP_OS_DIAGNOSE",
                          "output_fields": ["name", "colour"]})
        self.assertIn("colour", str(err))


class KeptDomainCleanupTests(InstanceTestCase):
    """A job about to use a node's memory first cleans up the domains
    other instances left behind there (user shutdown detection)."""

    OTHER = "inst1.example.com"

    def setUp(self):
        InstanceTestCase.setUp(self)
        self.cfg.set_cluster_params(enabled_user_shutdown=True)
        self.rpc.memory_free = 2048
        self.create(self.OTHER, beparams={"memory": 768})

    def other(self):
        return self.cfg.get_instance(self.OTHER)

    def test_a_user_shutdown_is_recorded_before_a_create(self):
        # the guest powered itself off: its domain still holds 768 MiB,
        # which the stopped instance's reservation counts once more
        self.rpc.domains[(NODE1, self.OTHER)] = "shutdown"
        self.create("inst2.example.com", beparams={"memory": 1024})
        other = self.other()
        self.assertEqual((other.admin_state, other.admin_state_source),
                         ("down", "user"))
        self.assertNotIn((NODE1, self.OTHER), self.rpc.domains)
        self.assertEqual(self.rpc.domains[(NODE1, "inst2.example.com")],
                         "running")

    def test_a_crashed_domain_is_only_removed_before_a_start(self):
        self.create("inst2.example.com", beparams={"memory": 128},
                    start=False)
        self.rpc.domains[(NODE1, self.OTHER)] = "crashed"
        self.ok({"OP_ID": "OP_INSTANCE_STARTUP",
                 "instance_name": "inst2.example.com"})
        self.assertEqual(self.rpc.procedures()[:3],
                         ["instance_info", "all_instances_info",
                          "instance_cleanup"])
        self.assertEqual(self.rpc.calls_of("instance_cleanup")[0][2][0],
                         self.OTHER)
        # not a user shutdown: it stays up, for the watcher to restart
        self.assertEqual(self.other().admin_state, "up")
        self.assertTrue(any("kept (crashed) domain of instance %s"
                            % self.OTHER in m for m in self.log), self.log)

    def test_an_instance_another_job_holds_is_left_alone(self):
        self.rpc.domains[(NODE1, self.OTHER)] = "shutdown"
        lockset = self.glm.lockset(locking.LEVEL_INSTANCE)
        lockset.acquire([self.other().uuid], "other job")
        self.addCleanup(lockset.release, "other job")
        err = self.fails(create_op("inst2.example.com",
                                   beparams={"memory": 1024}))
        self.assertEqual(err.args[1], errors.ECODE_NORES)
        self.assertEqual(self.rpc.calls_of("instance_cleanup"), [])
        self.assertEqual(self.other().admin_state, "up")
        self.assertTrue(any("another job holds it" in m for m in self.log))

    def test_a_dry_run_cleans_nothing(self):
        self.rpc.domains[(NODE1, self.OTHER)] = "shutdown"
        self.ok(create_op("inst2.example.com", beparams={"memory": 128},
                          dry_run=True))
        self.assertEqual(self.rpc.calls_of("instance_cleanup"), [])
        self.assertEqual(self.other().admin_state, "up")
