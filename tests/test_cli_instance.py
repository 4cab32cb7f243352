"""gnt-instance: command line -> opcodes, and its output."""

import io

from twisted.trial import unittest

from ganeti import opcodes
from ganeti.cli import gnt_instance

from tests.test_cli_fakes import UNAVAIL, FakeClient, run, field


def gnt(client, *argv, **kwargs):
    return run(gnt_instance.commands, argv, client, **kwargs)


class AddTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()

    def add(self, *argv):
        code, out, err = gnt(self.client, "add", *argv)
        self.assertEqual(code, 0, err)
        return self.client.op()

    def refused(self, *argv):
        before = len(self.client.jobs)
        code, out, err = gnt(self.client, "add", *argv)
        self.assertEqual(code, 1, (out, err))
        self.assertEqual(len(self.client.jobs), before)
        return err

    def test_captured_ganeti_command(self):
        # the opcode Ganeti's gnt-instance add sends
        op = self.add("-t", "plain", "-o", "debootstrap+default", "-n",
                      "node1", "--disk", "0:size=1G", "-B", "memory=512M",
                      "--no-name-check", "--no-ip-check", "inst9")
        self.assertEqual(op["OP_ID"], "OP_INSTANCE_CREATE")
        self.assertEqual(op["instance_name"], "inst9")
        self.assertEqual(op["mode"], "create")
        self.assertEqual(op["disks"], [{"size": 1024}])
        self.assertEqual(op["nics"], [{}])
        self.assertEqual(op["disk_template"], "plain")
        self.assertEqual(op["beparams"], {"memory": 512})
        self.assertEqual(op["os_type"], "debootstrap+default")
        self.assertEqual(op["pnode"], "node1")
        self.assertIsNone(op["snode"])
        self.assertEqual((op["name_check"], op["ip_check"]), (False, False))
        self.assertEqual((op["start"], op["no_install"]), (True, None))
        self.assertEqual((op["forthcoming"], op["commit"]), (False, False))
        self.assertEqual(op["reason"][0][:2], ["gnt:client:gnt-instance",
                                               "add"])
        # and it is a valid opcode for the master
        opcodes.OpCode.from_dict(op)

    def test_checks_default_on(self):
        op = self.add("-t", "file", "-o", "busybox", "-s", "10G", "inst1")
        self.assertEqual((op["name_check"], op["ip_check"],
                          op["conflicts_check"]), (True, True, True))
        self.assertEqual(op["disks"], [{"size": 10240}])

    def test_disks(self):
        op = self.add("-t", "file", "-o", "busybox", "--disk",
                      "1:size=512,mode=ro,name=data", "--disk",
                      "0:size=1.5g,spindles=2", "inst1")
        self.assertEqual(op["disks"], [{"size": 1536, "spindles": 2},
                                       {"size": 512, "mode": "ro",
                                        "name": "data"}])
        op = self.add("-t", "diskless", "-o", "busybox", "inst1")
        self.assertEqual(op["disks"], [])

    def test_disk_errors(self):
        err = self.refused("-t", "plain", "-o", "x", "--disk", "0:size=1X",
                           "inst1")
        self.assertEqual(err, "Failure: invalid value for --disk 0 size:"
                         " unknown unit 'X' in size '1X'\n")
        err = self.refused("-t", "plain", "-o", "x", "--disk", "1:size=1G",
                           "inst1")
        self.assertIn("disk 0 is missing", err)
        err = self.refused("-t", "plain", "-o", "x", "--disk", "0:mode=rw",
                           "inst1")
        self.assertIn("a size (size=...) or an adoption source", err)
        err = self.refused("-t", "plain", "-o", "x", "-s", "1G", "--disk",
                           "0:size=1G", "inst1")
        self.assertIn("--disk and -s cannot be used together", err)
        err = self.refused("-t", "diskless", "-o", "x", "-s", "1G", "inst1")
        self.assertIn("diskless", err)
        err = self.refused("-t", "plain", "-o", "x", "inst1")
        self.assertIn("no disk information given", err)
        err = self.refused("-t", "plain", "-o", "x", "--disk", "a:size=1G",
                           "inst1")
        self.assertIn("'a' is not a device index", err)

    def test_bad_backend_parameter(self):
        err = self.refused("-t", "plain", "-o", "x", "-s", "1G", "-B",
                           "memory=zz", "inst1")
        self.assertEqual(err, "Failure: invalid value for -B memory: 'zz' is"
                         " not valid (invalid size 'zz' (expected a number"
                         " with an optional unit M, G or T))\n")
        err = self.refused("-t", "plain", "-o", "x", "-s", "1G", "-B",
                           "vcpus=two", "inst1")
        self.assertIn("-B vcpus", err)

    def test_nics(self):
        op = self.add("-t", "diskless", "-o", "x", "--net",
                      "0:mac=aa:00:00:11:22:33,ip=192.0.2.5,mode=routed,"
                      "link=rt1", "--net", "2:network=net1", "inst1")
        self.assertEqual(op["nics"], [
            {"mac": "aa:00:00:11:22:33", "ip": "192.0.2.5", "mode": "routed",
             "link": "rt1"}, {}, {"network": "net1"}])
        op = self.add("-t", "diskless", "-o", "x", "--no-nics", "inst1")
        self.assertEqual(op["nics"], [])
        err = self.refused("-t", "diskless", "-o", "x", "--no-nics",
                           "--net", "0:mode=routed", "inst1")
        self.assertIn("--net and --no-nics", err)
        err = self.refused("-t", "diskless", "-o", "x", "--net",
                           "0:colour=red", "inst1")
        self.assertIn("unknown NIC parameter 'colour'", err)

    def test_hypervisor_and_os_parameters(self):
        op = self.add("-t", "diskless", "-o", "x", "-H",
                      "kvm:acpi=no,kernel_path=/boot/k,serial_speed=9600",
                      "-O", "motd=hello", "inst1")
        self.assertEqual(op["hypervisor"], "kvm")
        self.assertEqual(op["hvparams"], {"acpi": False,
                                          "kernel_path": "/boot/k",
                                          "serial_speed": 9600})
        self.assertEqual(op["osparams"], {"motd": "hello"})
        op = self.add("-t", "diskless", "-o", "x", "-H", "fake", "inst1")
        self.assertEqual((op["hypervisor"], op["hvparams"]), ("fake", {}))

    def test_placement_and_flags(self):
        op = self.add("-t", "drbd", "-o", "x", "-s", "1G", "-n",
                      "node1:node2", "--no-start", "--no-install",
                      "--tags", "a,b", "--no-wait-for-sync",
                      "--ignore-ipolicy", "-g", "default", "inst1")
        self.assertEqual((op["pnode"], op["snode"]), ("node1", "node2"))
        self.assertEqual((op["start"], op["no_install"]), (False, True))
        self.assertEqual(op["tags"], ["a", "b"])
        self.assertEqual((op["wait_for_sync"], op["ignore_ipolicy"]),
                         (False, True))
        self.assertEqual(op["group_name"], "default")
        op = self.add("-t", "plain", "-o", "x", "-s", "1G", "-I", "hail",
                      "inst1")
        self.assertEqual((op["iallocator"], op["pnode"]), ("hail", None))
        err = self.refused("-t", "plain", "-o", "x", "-s", "1G", "-I",
                           "hail", "-n", "node1", "inst1")
        self.assertIn("either -n or -I", err)

    def test_opportunistic_locking(self):
        op = self.add("-t", "plain", "-o", "x", "-s", "1G", "-I", "hail",
                      "--opportunistic-locking", "inst1")
        self.assertIs(op["opportunistic_locking"], True)
        op = self.add("-t", "plain", "-o", "x", "-s", "1G", "inst1")
        self.assertIs(op["opportunistic_locking"], False)

    def test_forthcoming_and_commit(self):
        op = self.add("-t", "plain", "-o", "x", "-s", "1G", "--forthcoming",
                      "inst1")
        self.assertEqual((op["forthcoming"], op["commit"]), (True, False))
        op = self.add("-t", "plain", "-o", "x", "-s", "1G", "--commit",
                      "inst1")
        self.assertEqual((op["forthcoming"], op["commit"]), (False, True))
        code, _, err = gnt(self.client, "add", "-t", "plain", "-o", "x",
                           "-s", "1G", "--forthcoming", "--commit", "inst1")
        self.assertEqual(code, 2)
        self.assertIn("not allowed with argument", err)

    def test_lease_until(self):
        op = self.add("-t", "plain", "-s", "1G", "--forthcoming",
                      "--lease-until", "+2h", "res1")
        self.assertEqual(op["lease_until"], "+2h")
        op = self.add("-t", "plain", "-s", "1G", "--forthcoming",
                      "--lease-until", "2099-12-01T12:00:00Z", "res1")
        self.assertEqual(op["lease_until"], "2099-12-01T12:00:00Z")
        # without a lease the opcode is Ganeti's (no extension parameter)
        op = self.add("-t", "plain", "-s", "1G", "--forthcoming", "res1")
        self.assertNotIn("lease_until", op)
        for args, why in (
                (["--lease-until", "+2h"], "only a forthcoming instance"),
                (["--forthcoming", "--lease-until", "soon"],
                 "'soon' is not a time"),
                (["--forthcoming", "--lease-until", "2001-01-01T00:00:00Z"],
                 "in the past"),
                (["--forthcoming", "--lease-until", "none"],
                 "needs an end")):
            err = self.refused("-t", "plain", "-s", "1G", *(args + ["r1"]))
            self.assertIn("--lease-until", err)
            self.assertIn(why, err)

    def test_submit_and_dry_run(self):
        code, out, _ = gnt(self.client, "add", "--submit", "-t", "diskless",
                           "-o", "x", "inst1")
        self.assertEqual(out, "JobID: 1\n")
        self.add("--dry-run", "-t", "diskless", "-o", "x", "inst1")
        self.assertTrue(self.client.op()["dry_run"])


class LifecycleTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()
        self.client.tables["instance"] = (
            [field("name"), field("pnode"), field("snodes", kind="other"),
             field("tags", kind="other")],
            [["a", "node1", [], ["web"]], ["b", "node2", ["node1"], []],
             ["c", "node2", [], ["web"]]])

    def gnt(self, *argv, **kwargs):
        code, out, err = gnt(self.client, *argv, **kwargs)
        return code, out, err

    def test_remove(self):
        code, _, err = self.gnt("remove", "-f", "--ignore-failures",
                                "--shutdown-timeout", "30", "inst1")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["instance_name"],
                          op["ignore_failures"], op["shutdown_timeout"]),
                         ("OP_INSTANCE_REMOVE", "inst1", True, 30))

    def test_remove_asks_first(self):
        code, out, err = self.gnt("remove", "inst1")
        self.assertEqual(code, 13)
        self.assertIn("use --force", err)
        self.assertEqual(self.client.jobs, {})

        class Tty(io.StringIO):
            def isatty(self):
                return True
        code, out, err = self.gnt("remove", "inst1", stdin=Tty("y\n"))
        self.assertEqual(code, 0, err)
        self.assertIn("Continue? y/[n]:", out)
        code, out, err = self.gnt("remove", "inst1", stdin=Tty("\n"))
        self.assertEqual(code, 13)
        self.assertEqual(len(self.client.jobs), 1)

    def test_startup_with_overrides(self):
        code, _, err = self.gnt("start", "-H", "kernel_args=single,acpi=no",
                                "-B", "maxmem=1G", "--force",
                                "--no-remember", "--paused", "inst1")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual(op["OP_ID"], "OP_INSTANCE_STARTUP")
        self.assertEqual(op["hvparams"], {"kernel_args": "single",
                                          "acpi": False})
        self.assertEqual(op["beparams"], {"maxmem": 1024})
        self.assertEqual((op["force"], op["no_remember"],
                          op["startup_paused"]), (True, True, True))

    def test_shutdown_and_reboot(self):
        self.gnt("shutdown", "--timeout", "30", "--no-remember", "inst1")
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["timeout"], op["no_remember"]),
                         ("OP_INSTANCE_SHUTDOWN", 30, True))
        self.gnt("stop", "inst1")
        self.assertEqual(self.client.op()["timeout"], 120)
        self.gnt("reboot", "inst1")
        op = self.client.op()
        self.assertEqual((op["reboot_type"], op["shutdown_timeout"]),
                         ("hard", 120))
        self.gnt("reboot", "-t", "soft", "--shutdown-timeout", "10",
                 "--ignore-secondaries", "inst1")
        op = self.client.op()
        self.assertEqual((op["reboot_type"], op["shutdown_timeout"],
                          op["ignore_secondaries"]), ("soft", 10, True))

    def test_several_instances_need_confirmation(self):
        code, _, err = self.gnt("shutdown", "a", "b")
        self.assertEqual(code, 13)
        self.assertIn("will operate on 2 instances", err)
        # --force of startup/shutdown is not "do not ask"
        code, _, err = self.gnt("startup", "--force", "a", "b")
        self.assertEqual(code, 13)
        self.assertEqual(self.client.jobs, {})
        code, _, err = self.gnt("shutdown", "--force-multiple", "a", "b")
        self.assertEqual(code, 0, err)
        submitted = [c for c in self.client.calls
                     if c[0] == "SubmitManyJobs"][0][1]
        self.assertEqual([job[0]["instance_name"] for job in submitted],
                         ["a", "b"])
        self.assertIn("Submitted jobs 1, 2", err)
        self.assertIn("Waiting for job 2 for b ...", err)

    def test_selections(self):
        self.gnt("startup", "--primary", "--force-multiple", "node2")
        queries = [c for c in self.client.calls if c[0] == "Query"]
        self.assertEqual(queries[-1][1], [
            "instance", ["name"], ["|", ["=", "pnode", "node2"]]])
        self.gnt("startup", "--secondary", "node1")
        self.assertEqual([c for c in self.client.calls
                          if c[0] == "Query"][-1][1][2],
                         ["|", ["=[]", "snodes", "node1"]])
        self.gnt("startup", "--tags", "--force-multiple", "web")
        self.gnt("startup", "--all", "--force-multiple")
        code, _, err = self.gnt("startup", "--all", "x")
        self.assertEqual(code, 2)
        code, _, err = self.gnt("startup")
        self.assertEqual(code, 2)
        self.assertIn("no instance name given", err)

    def test_submit_several_prints_every_job(self):
        code, out, _ = self.gnt("reboot", "--submit", "--force-multiple",
                                "a", "b")
        self.assertEqual(out, "JobID: 1\nJobID: 2\n")

    def test_rename_and_reinstall(self):
        self.client.results["OP_INSTANCE_RENAME"] = "new"
        code, out, _ = self.gnt("rename", "--no-name-check", "--no-ip-check",
                                "old", "new")
        op = self.client.op()
        self.assertEqual((op["instance_name"], op["new_name"],
                          op["name_check"], op["ip_check"]),
                         ("old", "new", False, False))
        code, _, err = self.gnt("reinstall", "inst1")
        self.assertEqual(code, 13)
        code, _, err = self.gnt("reinstall", "-f", "-o", "busybox+minimal",
                                "-O", "motd=hi", "inst1")
        self.assertEqual(code, 0, err)
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["os_type"], op["osparams"]),
                         ("OP_INSTANCE_REINSTALL", "busybox+minimal",
                          {"motd": "hi"}))

    def test_disks_commands(self):
        self.client.results["OP_INSTANCE_ACTIVATE_DISKS"] = [
            ["node1", "disk/0", "/srv/inst1/disk0"]]
        code, out, _ = self.gnt("activate-disks", "inst1")
        self.assertEqual(out, "node1:disk/0:/srv/inst1/disk0\n")
        self.gnt("deactivate-disks", "-f", "inst1")
        self.assertTrue(self.client.op()["force"])
        self.gnt("grow-disk", "--absolute", "inst1", "1", "2G")
        op = self.client.op()
        self.assertEqual((op["disk"], op["amount"], op["absolute"]),
                         (1, 2048, True))
        code, _, err = self.gnt("grow-disk", "inst1", "0", "lots")
        self.assertEqual(code, 1)
        self.assertIn("invalid value for AMOUNT", err)

    def test_tags(self):
        self.gnt("add-tags", "inst1", "a", "b")
        op = self.client.op()
        self.assertEqual((op["OP_ID"], op["kind"], op["name"], op["tags"]),
                         ("OP_TAGS_SET", "instance", "inst1", ["a", "b"]))
        self.gnt("remove-tags", "inst1", "a")
        self.assertEqual(self.client.op()["OP_ID"], "OP_TAGS_DEL")
        self.client.tags[("instance", "inst1")] = ["z", "b"]
        code, out, _ = self.gnt("list-tags", "inst1")
        self.assertEqual(out, "b\nz\n")
        code, _, err = self.gnt("add-tags", "inst1")
        self.assertEqual(code, 2)
        self.assertIn("no tags given", err)

    def test_tags_from_a_file(self):
        code, _, err = self.gnt("add-tags", "--from", "-", "inst1", "x",
                                stdin=io.StringIO("a\n\nb\n"))
        self.assertEqual(code, 0, err)
        self.assertEqual(self.client.op()["tags"], ["x", "a", "b"])


class ModifyTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()

    def modify(self, *argv):
        code, out, err = gnt(self.client, "modify", *argv)
        self.assertEqual(code, 0, err)
        return self.client.op(), out

    def test_parameters(self):
        op, _ = self.modify("-B", "maxmem=1G,vcpus=2", "-H",
                            "kernel_args=single", "-O", "motd=x",
                            "--os-type", "busybox+minimal", "inst1")
        self.assertEqual(op["beparams"], {"maxmem": 1024, "vcpus": 2})
        self.assertEqual(op["hvparams"], {"kernel_args": "single"})
        self.assertEqual(op["osparams"], {"motd": "x"})
        self.assertEqual(op["os_name"], "busybox+minimal")

    def test_lease_until(self):
        op, _ = self.modify("--lease-until", "+3d", "res1")
        self.assertEqual(op["lease_until"], "+3d")
        op, _ = self.modify("--lease-until", "none", "res1")
        self.assertEqual(op["lease_until"], "none")
        before = len(self.client.jobs)
        code, _, err = gnt(self.client, "modify", "--lease-until",
                           "yesterday", "res1")
        self.assertEqual(code, 1)
        self.assertIn("--lease-until", err)
        self.assertEqual(len(self.client.jobs), before)

    def test_disk_and_nic_changes(self):
        op, _ = self.modify("--disk", "add:size=1G,mode=ro", "--disk",
                            "1:remove", "--disk", "0:modify,mode=ro",
                            "--net", "add", "--net", "0:remove", "--net",
                            "1:link=br1", "inst1")
        self.assertEqual(op["disks"], [["add", -1, {"size": 1024,
                                                     "mode": "ro"}],
                                       ["remove", 1, {}],
                                       ["modify", 0, {"mode": "ro"}]])
        self.assertEqual(op["nics"], [["add", -1, {}], ["remove", 0, {}],
                                      ["modify", 1, {"link": "br1"}]])
        op, _ = self.modify("--disk", "2:add,size=512", "--net",
                            "eth1:remove", "inst1")
        self.assertEqual(op["disks"], [["add", 2, {"size": 512}]])
        self.assertEqual(op["nics"], [["remove", "eth1", {}]])

    def test_offline_online(self):
        op, _ = self.modify("--offline", "inst1")
        self.assertIs(op["offline"], True)
        op, _ = self.modify("--online", "inst1")
        self.assertIs(op["offline"], False)
        code, _, _ = gnt(self.client, "modify", "--online", "--offline",
                         "inst1")
        self.assertEqual(code, 2)

    def test_nothing_to_do(self):
        code, out, err = gnt(self.client, "modify", "inst1")
        self.assertEqual((code, err), (1, "Please give at least one of the"
                                       " parameters.\n"))
        self.assertEqual(self.client.jobs, {})

    def test_bad_disk_change(self):
        code, _, err = gnt(self.client, "modify", "--disk", "0:remove,"
                           "size=1G", "inst1")
        self.assertEqual(code, 1)
        self.assertIn("'remove' takes no parameters", err)
        code, _, err = gnt(self.client, "modify", "--disk", "add:size=1Q",
                           "inst1")
        self.assertIn("unknown unit 'Q'", err)

    def test_changes_are_printed(self):
        self.client.results["OP_INSTANCE_SET_PARAMS"] = [
            ["be/maxmem", 1024], ["disk/1", "add:size=1024,mode=rw"]]
        _, out = self.modify("-B", "maxmem=1G", "inst1")
        self.assertEqual(out.splitlines()[:3], [
            "Modified instance inst1", " - be/maxmem -> 1024",
            " - disk/1 -> add:size=1024,mode=rw"])


QUERY_DATA = {
    "inst1": {
        "name": "inst1", "config_state": "up", "run_state": "up",
        "pnode": "node1.example.com", "pnode_group_uuid": "g-uuid",
        "pnode_group_name": "default", "snodes": [],
        "snodes_group_uuids": [], "snodes_group_names": [],
        "os": "busybox", "network_port": None,
        "nics": [[None, "n-uuid", None, "aa:00:00:01:02:03", "bridged",
                  "br0", "", None, None]],
        "disk_template": "file",
        "disks": [{"iv_name": "disk/0", "dev_type": "file",
                   "logical_id": ["loop", "/srv/x.disk0"],
                   "pstatus": ["/srv/x.disk0", None, None, None, None,
                               False, 1],
                   "sstatus": None, "children": [], "mode": "rw",
                   "size": 1024, "spindles": None, "name": None,
                   "uuid": "d-uuid"}],
        "hypervisor": "fake", "hv_instance": {}, "hv_actual": {},
        "be_instance": {"maxmem": 256},
        "be_actual": {"maxmem": 256, "minmem": 128, "vcpus": 1},
        "os_instance": {}, "os_actual": {"motd": "hi"},
        "serial_no": 3, "mtime": 1700000000, "ctime": 1700000000,
        "uuid": "i-uuid", "forthcoming": False,
        "admin_state_source": "admin", "disks_active": True,
    }
}


class InfoTests(unittest.TestCase):

    def test_info(self):
        client = FakeClient()
        client.results["OP_INSTANCE_QUERY_DATA"] = QUERY_DATA
        code, out, err = gnt(client, "info", "inst1")
        self.assertEqual(code, 0, err)
        op = client.op()
        self.assertEqual((op["instances"], op["static"], op["use_locking"]),
                         (["inst1"], False, True))
        lines = out.splitlines()
        self.assertEqual(lines[0], "- Instance name: inst1")
        for expected in [
                "  State: configured to be up, actual state is up",
                "  Nodes: ",
                "    - primary: node1.example.com",
                "      group: default (UUID g-uuid)",
                "  Operating system: busybox",
                "    motd: default (hi)",
                "    maxmem: 256",
                "    minmem: default (128)",
                "    - nic/0: ",
                "        MAC: aa:00:00:01:02:03",
                "        link: br0",
                "  Disk template: file",
                "    - disk/0: file, size 1.0G",
                "      access mode: rw",
                "      on primary: /srv/x.disk0 in sync, status ok"]:
            self.assertIn(expected, lines)

    def test_info_shows_the_lease(self):
        import copy
        data = copy.deepcopy(QUERY_DATA)
        data["inst1"].update(forthcoming=True, lease_until=1700003600,
                             lease_state="expiring")
        client = FakeClient()
        client.results["OP_INSTANCE_QUERY_DATA"] = data
        code, out, err = gnt(client, "info", "inst1")
        self.assertEqual(code, 0, err)
        [line] = [l for l in out.splitlines() if l.startswith("  Lease:")]
        self.assertIn("(expiring); the reservation is then removed", line)
        # no lease, no line
        client.results["OP_INSTANCE_QUERY_DATA"] = QUERY_DATA
        code, out, err = gnt(client, "info", "inst1")
        self.assertNotIn("Lease", out)

    def test_info_needs_names_or_all(self):
        client = FakeClient()
        code, _, err = gnt(client, "info")
        self.assertEqual(code, 2)
        client.results["OP_INSTANCE_QUERY_DATA"] = {}
        code, _, err = gnt(client, "info", "--all", "-s")
        self.assertEqual(code, 0, err)
        op = client.op()
        self.assertEqual((op["instances"], op["static"], op["use_locking"]),
                         ([], True, False))

    def test_list_shows_forthcoming_instances(self):
        client = FakeClient()
        client.tables["instance"] = (
            [field("name", "Instance"), field("status", "Status"),
             field("forthcoming", "Forthcoming", "bool")],
            [["inst1", "running", False], ["inst2", "ADMIN_down", True]])
        code, out, _ = gnt(client, "list", "-o", "name,status,forthcoming")
        # Queries keep Ganeti's status (RAPI, htools); the listing says
        # what a forthcoming instance is.
        self.assertEqual(out.splitlines(), [
            "Instance Status      Forthcoming",
            "inst1    running     N",
            "inst2    forthcoming Y"])


SERIAL = {"instance": "inst1", "kind": "ssh", "message": None,
          "host": "node1.example.com", "port": 22, "user": "root",
          "command": ["/usr/bin/socat", "STDIO,raw,echo=0,escape=0x1d",
                      "UNIX-CONNECT:/var/run/ganeti/kvm-hypervisor/ctrl/"
                      "inst1.serial"],
          "display": None}


class ConsoleTests(unittest.TestCase):

    def setUp(self):
        self.client = FakeClient()
        self.client.config_values = {"cluster_name": "cluster.example.com"}
        self.ran = []
        self.exit_code = 0
        self.patch(gnt_instance, "RUN_CONSOLE_COMMAND", self.run_command)

    def run_command(self, argv):
        self.ran.append(argv)
        return self.exit_code

    def instance(self, console, running=True):
        self.client.tables["instance"] = (
            [field("name"), field("console", kind="other"),
             field("oper_state", kind="bool")],
            [["inst1", console, running]])

    def console(self, *argv, **kw):
        return gnt(self.client, "console", *argv, **kw)

    def test_show_cmd_prints_ganetis_ssh_command(self):
        self.instance(SERIAL)
        code, out, err = self.console("--show-cmd", "inst1")
        self.assertEqual(code, 0, err)
        self.assertEqual(out, (
            "ssh -oEscapeChar=none -oHashKnownHosts=no"
            " -oGlobalKnownHostsFile=/var/lib/ganeti/known_hosts"
            " -oUserKnownHostsFile=/dev/null -oCheckHostIp=no"
            " -oConnectTimeout=10 -oHostKeyAlias=cluster.example.com"
            " -oPort=22 -oBatchMode=yes -oStrictHostKeyChecking=yes -t -t"
            " root@node1.example.com '/usr/bin/socat"
            " STDIO,raw,echo=0,escape=0x1d UNIX-CONNECT:/var/run/ganeti/"
            "kvm-hypervisor/ctrl/inst1.serial'\n"))
        self.assertEqual(self.client.calls[0],
                         ("Query", ["instance", ["console", "oper_state"],
                                    ["=", "name", "inst1"]]))
        self.assertEqual(self.ran, [])

    def test_connects_on_the_primary_node(self):
        self.instance(SERIAL)
        code, out, err = self.console(
            "inst1", env={"GANETI_HOSTNAME": "node1.example.com"})
        self.assertEqual(code, 0, err)
        self.assertEqual(self.ran, [SERIAL["command"]])

    def test_failing_console_command(self):
        self.instance(SERIAL)
        self.exit_code = 1
        code, _, err = self.console(
            "inst1", env={"GANETI_HOSTNAME": "node1.example.com"})
        self.assertEqual(code, 1)
        self.assertIn("Connection to console of instance inst1 failed",
                      err)

    def test_other_node_says_where_to_run_it(self):
        self.instance(SERIAL)
        code, _, err = self.console(
            "inst1", env={"GANETI_HOSTNAME": "node2.example.com"})
        self.assertEqual(code, 1)
        self.assertIn("The console of instance inst1 is on node"
                      " node1.example.com, this is node2.example.com", err)
        self.assertIn("/usr/bin/socat", err)
        self.assertEqual(self.ran, [])

    def test_message_and_vnc(self):
        self.instance({"instance": "inst1", "kind": "msg",
                       "message": "Console not available for fake"
                       " hypervisor"})
        code, out, _ = self.console("inst1")
        self.assertEqual((code, out), (
            0, "Console not available for fake hypervisor\n"))
        self.instance({"instance": "inst1", "kind": "vnc",
                       "host": "192.0.2.1", "port": 5901, "display": 1})
        code, out, _ = self.console("--show-cmd", "inst1")
        self.assertEqual((code, out), (
            0, "Instance inst1 has VNC listening on 192.0.2.1:5901"
            " (display 1), URL <vnc://192.0.2.1:5901/>\n"))
        self.assertEqual(self.ran, [])

    def test_refusals(self):
        self.instance(UNAVAIL, running=False)
        code, _, err = self.console("inst1")
        self.assertEqual(code, 1)
        self.assertIn("Instance inst1 is not running, can't get console",
                      err)
        self.instance(UNAVAIL, running=True)
        code, _, err = self.console("inst1")
        self.assertIn("Console information for instance inst1 is"
                      " unavailable", err)
        self.client.tables["instance"] = (
            self.client.tables["instance"][0], [])
        code, _, err = self.console("nope")
        self.assertEqual(code, 1)
        self.assertIn("Instance 'nope' does not exist", err)
        self.assertFalse(any(c[0] == "SubmitJob" for c in self.client.calls))
