"""gnt-cluster: init (without daemons), ssconf, modify, info and friends."""

import json
import os
import shutil
import stat
import tempfile

from twisted.trial import unittest

from ganeti import config
from ganeti import constants
from ganeti import errors
from ganeti import pathutils
from ganeti import ssconf
from ganeti.cli import gnt_cluster
from ganeti.cmdlib.cluster import cluster_info

from tests.test_cli_fakes import FakeClient, run, encoded


def gnt(client, *argv, **kwargs):
    return run(gnt_cluster.commands, argv, client, **kwargs)


class InitTests(unittest.TestCase):
    """``init --no-start``: the files, without any daemon."""

    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="gnt-", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.base, True)
        self.root = os.path.join(self.base, "node1.example.com")
        self.paths = pathutils.Paths(self.root)

    def init(self, *extra):
        return gnt(None, "init", "--root", self.root, "--no-start",
                   "--node-name", "node1.example.com", "--node-ip",
                   "127.0.0.1", *extra)

    def test_files_of_a_new_cluster(self):
        code, out, err = self.init(
            "--enabled-hypervisors", "fake,kvm", "--enabled-disk-templates",
            "file,diskless", "-H", "kvm:kernel_path=/boot/k,acpi=no",
            "-B", "memory=256M,vcpus=2", "-N", "link=br0", "--uid-pool",
            "1000-1009,2000", "--candidate-pool-size", "3", "--mac-prefix",
            "AA:11:22", "--master-netdev", "eth0", "--user-shutdown", "yes",
            "--ipolicy-std-specs", "memory-size=256M,disk-size=2G",
            "--ipolicy-vcpu-ratio", "2", "cluster.example.com")
        self.assertEqual(code, 0, err)
        self.assertIn("Initialised cluster cluster.example.com", out)
        self.assertIn("Daemons not started", out)
        store = config.ConfigStore.load(self.paths.config_file)
        c = store.cluster
        self.assertEqual(c.cluster_name, "cluster.example.com")
        self.assertEqual(store.master_node.name, "node1.example.com")
        self.assertEqual(store.master_node.primary_ip, "127.0.0.1")
        self.assertEqual(c.enabled_hypervisors, ["fake", "kvm"])
        self.assertEqual(c.default_hypervisor, "fake")
        self.assertEqual(c.enabled_disk_templates, ["file", "diskless"])
        # the policy allows only the enabled templates (as Ganeti's init)
        self.assertEqual(c.ipolicy["disk-templates"], ["file", "diskless"])
        self.assertEqual((c.ipolicy["std"]["memory-size"],
                          c.ipolicy["std"]["disk-size"],
                          c.ipolicy["std"]["cpu-count"],
                          c.ipolicy["vcpu-ratio"]), (256, 2048, 1, 2.0))
        self.assertEqual(c.hvparams["kvm"]["kernel_path"], "/boot/k")
        self.assertIs(c.hvparams["kvm"]["acpi"], False)
        self.assertEqual((c.beparams["default"]["maxmem"],
                          c.beparams["default"]["minmem"],
                          c.beparams["default"]["vcpus"]), (256, 256, 2))
        self.assertEqual(c.nicparams["default"]["link"], "br0")
        self.assertEqual(c.uid_pool, [[1000, 1009], [2000, 2000]])
        self.assertEqual(c.candidate_pool_size, 3)
        self.assertEqual(c.mac_prefix, "aa:11:22")
        self.assertEqual(c.master_netdev, "eth0")
        self.assertIs(c.enabled_user_shutdown, True)
        self.assertEqual(c.file_storage_dir, os.path.join(
            self.root, "srv/ganeti/file-storage"))
        self.assertTrue(os.path.isdir(c.file_storage_dir))
        self.assertEqual(list(c.candidate_certs), [store.master_node.uuid])
        # key, certificate
        with open(self.paths.hmac_key_file) as f:
            hmac_key = f.read()
            self.assertRegex(hmac_key, r"^[0-9a-f]{40}\n$")
        # a cluster domain secret of its own (remote export and import)
        with open(os.path.join(self.paths.data_dir,
                               "cluster-domain-secret")) as f:
            secret = f.read()
        self.assertRegex(secret, r"^[0-9a-f]{40}\n$")
        self.assertNotEqual(secret, hmac_key)
        self.assertTrue(os.path.exists(os.path.join(self.paths.data_dir,
                                                    "server.pem")))
        # ssconf, in Ganeti's format
        ss = self.ssconf
        self.assertEqual(ss("cluster_name"), "cluster.example.com\n")
        self.assertEqual(ss("master_node"), "node1.example.com\n")
        self.assertEqual(ss("master_ip"), "127.0.0.1\n")
        self.assertEqual(ss("node_list"), "node1.example.com\n")
        self.assertEqual(ss("node_primary_ips"),
                         "node1.example.com 127.0.0.1\n")
        self.assertEqual(ss("master_candidates"), "node1.example.com\n")
        self.assertEqual(ss("master_candidates_ips"), "127.0.0.1\n")
        self.assertEqual(ss("online_nodes"), "node1.example.com\n")
        self.assertEqual(ss("offline_nodes"), "")
        self.assertEqual(ss("release_version"), "3.0.2\n")
        self.assertEqual(ss("uid_pool"), "1000-1009\n2000\n")
        self.assertEqual(ss("hypervisor_list"), "fake\nkvm\n")
        self.assertEqual(ss("enabled_user_shutdown"), "True\n")
        self.assertEqual(ss("instance_list"), "")
        self.assertEqual(ss("file_storage_dir"), c.file_storage_dir + "\n")
        group = list(store.nodegroups.values())[0]
        self.assertEqual(ss("nodegroups"), "%s default\n" % group.uuid)
        self.assertIn("acpi=False\n", ss("hvparams_kvm"))
        self.assertIn("kernel_path=/boot/k\n", ss("hvparams_kvm"))
        for hv in ("chroot", "fake", "kvm", "lxc", "xen-hvm", "xen-pvm"):
            self.assertTrue(os.path.exists(self.paths.ssconf_file(
                "hvparams_%s" % hv)))
        mode = stat.S_IMODE(os.stat(self.paths.ssconf_file(
            "cluster_name")).st_mode)
        self.assertEqual(mode, 0o444)
        certs = ss("master_candidates_certs")
        self.assertRegex(certs, r"^%s=([0-9A-F]{2}:){19}[0-9A-F]{2}\n$"
                         % store.master_node.uuid)

    def ssconf(self, key):
        with open(self.paths.ssconf_file(key)) as f:
            return f.read()

    def test_ganeti_defaults(self):
        code, _, err = self.init("cluster.example.com")
        self.assertEqual(code, 0, err)
        c = config.ConfigStore.load(self.paths.config_file).cluster
        self.assertEqual(c.enabled_hypervisors, ["xen-pvm"])
        self.assertEqual(c.enabled_disk_templates, ["drbd", "plain"])
        self.assertEqual(c.volume_group_name, "xenvg")
        self.assertEqual(c.master_netmask, 32)
        self.assertEqual(c.mac_prefix, "aa:00:00")

    def test_refuses_an_existing_cluster(self):
        self.assertEqual(self.init("cluster.example.com")[0], 0)
        with open(self.paths.config_file, "rb") as f:
            before = f.read()
        code, out, err = self.init("other.example.com")
        self.assertEqual(code, 1)
        self.assertIn("already part of a cluster: %s exists"
                      % self.paths.config_file, err)
        with open(self.paths.config_file, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_bad_options_write_nothing(self):
        for args, message in [
                (["--enabled-hypervisors", "vmware"],
                 "unknown hypervisor(s) vmware"),
                (["--enabled-disk-templates", "tape"],
                 "unknown disk template(s) tape"),
                (["-B", "memory=lots"], "-B memory"),
                (["-B", "colour=red"], "unknown backend parameter"),
                (["-N", "mode=tunnel"], "not a NIC mode"),
                (["--uid-pool", "5-1"], "--uid-pool"),
                (["--node-ip", "localhost"], "not an IP address"),
                (["--mac-prefix", "zz"], "XX:XX:XX"),
                (["-H", "kvm:acpi=perhaps"], "acpi")]:
            code, out, err = self.init(*(args + ["cluster.example.com"]))
            self.assertEqual(code, 1, args)
            self.assertIn(message, err, args)
            self.assertFalse(os.path.exists(self.paths.data_dir)
                             and os.listdir(self.paths.data_dir), args)

    def test_bad_cluster_name_leaves_no_files(self):
        code, out, err = self.init("not a name")
        self.assertEqual(code, 1)
        self.assertIn("not a valid DNS name", err)
        self.assertFalse(os.path.exists(self.paths.data_dir))


class SsconfTests(unittest.TestCase):

    def test_lists_sorted_nicely_offline_nodes(self):
        from ganeti import objects
        store = config.ConfigStore.create(None, "c.example.com", "node10",
                                          "10.0.0.10")
        for name, ip, offline in (("node2", "10.0.0.2", True),
                                  ("node1", "10.0.0.1", False)):
            store.add_node(objects.Node(name=name, primary_ip=ip,
                                        secondary_ip=ip, offline=offline,
                                        master_candidate=False))
        values = ssconf.ssconf_values(store)
        self.assertEqual(values["node_list"], ["node1", "node2", "node10"])
        self.assertEqual(values["offline_nodes"], ["node2"])
        self.assertEqual(values["online_nodes"], ["node1", "node10"])
        self.assertEqual(values["master_candidates"], ["node10"])
        self.assertEqual(values["node_vm_capable"],
                         ["node1=True", "node2=True", "node10=True"])
        self.assertEqual(values["primary_ip_family"], "2")


def _cluster_info():
    store = config.ConfigStore.create(
        None, "cluster.example.com", "node1.example.com", "127.0.0.1",
        enabled_hypervisors=["fake"], uid_pool=[(1000, 1009)])
    store.cluster.tags.update(["b", "a"])
    return json.loads(json.dumps(cluster_info(store)))


class InfoTests(unittest.TestCase):

    def test_info(self):
        client = FakeClient()
        client.cluster_info = _cluster_info()
        code, out, err = gnt(client, "info")
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0], "Cluster name: cluster.example.com")
        for expected in [
                "Master node: node1.example.com",
                "Tags: a, b",
                "Default hypervisor: fake",
                "Enabled hypervisors: fake",
                "Hypervisor parameters: ",
                "  fake: ",
                "    migration_mode: live",
                "Cluster parameters: ",
                "  candidate pool size: 10",
                "  uid pool: 1000-1009",
                "  compression tools: ",
                "    - gzip",
                "Default instance parameters: ",
                "  default: ",
                "    maxmem: 128",
                "Instance policy - limits for instances: ",
                "  bounds specs: ",
                "    - max/0: ",
                "        cpu-count: 8",
                "      min/0: ",
                "  vcpu-ratio: 4.0"]:
            self.assertIn(expected, lines)

    def test_version_and_getmaster(self):
        client = FakeClient()
        client.cluster_info = _cluster_info()
        code, out, _ = gnt(client, "version")
        self.assertEqual(out.splitlines()[:2], ["Software version: 3.0.2",
                                                "Internode protocol:"
                                                " 3000000"])
        client.config_values["master_node"] = "node1.example.com"
        base = tempfile.mkdtemp(prefix="gnt-", dir="/tmp")
        self.addCleanup(shutil.rmtree, base, True)
        code, out, _ = gnt(client, "getmaster", "--root", base)
        self.assertEqual(out, "node1.example.com\n")
        # ssconf first, as Ganeti's tool does
        paths = pathutils.Paths(base)
        os.makedirs(paths.data_dir)
        with open(paths.ssconf_file("master_node"), "w") as f:
            f.write("node7\n")
        code, out, _ = gnt(client, "getmaster", "--root", base)
        self.assertEqual(out, "node7\n")

    def test_queue(self):
        client = FakeClient()
        gnt(client, "queue", "drain")
        gnt(client, "queue", "undrain")
        client.config_values["drain_flag"] = True
        code, out, _ = gnt(client, "queue", "info")
        self.assertEqual(out, "The drain flag is set\n")
        self.assertEqual([c for c in client.calls if c[0] == "SetDrainFlag"],
                         [("SetDrainFlag", [True]),
                          ("SetDrainFlag", [False])])

    def test_watcher(self):
        client = FakeClient()
        code, out, _ = gnt(client, "watcher", "pause", "1h")
        self.assertEqual(code, 0)
        self.assertIn("paused until", out)
        gnt(client, "watcher", "continue")
        self.assertEqual(client.calls[-1], ("SetWatcherPause", [None]))
        code, out, _ = gnt(client, "watcher", "info")
        self.assertEqual(out, "The watcher is not paused.\n")


class JobCommandTests(unittest.TestCase):

    def test_verify(self):
        # the master answers OP_CLUSTER_VERIFY with the jobs it submitted
        # (configuration, then one per group); the command follows them
        client = FakeClient()
        client.results["OP_CLUSTER_VERIFY_CONFIG"] = True
        client.logs["OP_CLUSTER_VERIFY_CONFIG"] = ["Verifying cluster"
                                                   " config"]
        client.results["OP_CLUSTER_VERIFY_GROUP"] = True
        client.logs["OP_CLUSTER_VERIFY_GROUP"] = ["* Verifying group"
                                                  " 'default'"]

        def submitted():
            jobs = [client._make_job([{"OP_ID": "OP_CLUSTER_VERIFY_CONFIG"}]),
                    client._make_job([{"OP_ID": "OP_CLUSTER_VERIFY_GROUP"}])]
            client.results["OP_CLUSTER_VERIFY"] = {
                "jobs": [[True, j] for j in jobs]}
        submitted()
        code, out, _ = gnt(client, "verify")
        self.assertEqual(code, 0)
        self.assertIn("Verifying cluster config", out)
        self.assertIn("* Verifying group 'default'", out)
        client.results["OP_CLUSTER_VERIFY_GROUP"] = False
        submitted()
        code, out, _ = gnt(client, "verify", "--error-codes", "-I",
                           "ENODEVERSION", "--no-nplus1-mem")
        self.assertEqual(code, 1)
        op = [ops[0] for ops in (j.ops for j in client.jobs.values())
              if ops[0]["OP_ID"] == "OP_CLUSTER_VERIFY"][-1]
        self.assertEqual((op["error_codes"], op["ignore_errors"],
                          op["skip_checks"]),
                         (True, ["ENODEVERSION"], ["nplusone_mem"]))

    def test_modify(self):
        client = FakeClient()
        code, out, err = gnt(
            client, "modify", "-H", "kvm:kernel_path=/k,serial_speed=9600",
            "-H", "fake:migration_mode=non-live", "-B", "maxmem=1G",
            "-N", "mode=routed,link=100", "--uid-pool", "1000-2000",
            "--add-uids", "3000", "--remove-uids", "1500-1600",
            "--candidate-pool-size", "5", "--max-running-jobs", "3",
            "--enabled-user-shutdown", "yes", "--default-iallocator",
            "hail", "--default-iallocator-params", "x=1",
            "--enabled-hypervisors", "kvm,fake", "--enabled-disk-templates",
            "file", "--maintain-node-health", "no", "--reserved-lvs",
            "xenvg/a,xenvg/b", "--enabled-data-collectors", "cpu-avg-load="
            "no", "--data-collector-interval", "cpu-avg-load=5",
            "--diagnose-data-collector-filename", "health",
            "--hidden-os", "add:debian,remove:lenny", "--master-netmask",
            "24", "--ipolicy-disk-templates", "file", "--ipolicy-bounds-specs",
            "min:memory-size=512,cpu-count=1,disk-size=1G,disk-count=1,"
            "nic-count=1,spindle-use=1/max:memory-size=8G,cpu-count=4,"
            "disk-size=100G,disk-count=2,nic-count=2,spindle-use=2//"
            "min:memory-size=16G,cpu-count=8,disk-size=1G,disk-count=1,"
            "nic-count=1,spindle-use=1/max:memory-size=64G,cpu-count=16,"
            "disk-size=1T,disk-count=4,nic-count=4,spindle-use=8",
            "--ipolicy-std-specs", "memory-size=1G", "--ipolicy-spindle-ratio",
            "8")
        self.assertEqual(code, 0, err)
        op = client.op()
        self.assertEqual(op["OP_ID"], "OP_CLUSTER_SET_PARAMS")
        self.assertEqual(op["hvparams"], {
            "kvm": {"kernel_path": "/k", "serial_speed": 9600},
            "fake": {"migration_mode": "non-live"}})
        self.assertEqual(op["beparams"], {"maxmem": 1024})
        self.assertEqual(op["nicparams"], {"mode": "routed", "link": "100"})
        self.assertEqual(op["uid_pool"], [[1000, 2000]])
        self.assertEqual(op["add_uids"], [[3000, 3000]])
        self.assertEqual(op["remove_uids"], [[1500, 1600]])
        self.assertEqual((op["candidate_pool_size"],
                          op["max_running_jobs"]), (5, 3))
        self.assertIs(op["enabled_user_shutdown"], True)
        self.assertIs(op["maintain_node_health"], False)
        self.assertEqual(op["default_iallocator"], "hail")
        self.assertEqual(op["default_iallocator_params"], {"x": "1"})
        self.assertEqual(op["enabled_hypervisors"], ["kvm", "fake"])
        self.assertEqual(op["enabled_disk_templates"], ["file"])
        self.assertEqual(op["reserved_lvs"], ["xenvg/a", "xenvg/b"])
        self.assertEqual(op["enabled_data_collectors"],
                         {"cpu-avg-load": False})
        self.assertEqual(op["data_collector_interval"],
                         {"cpu-avg-load": 5000000})
        self.assertEqual(op["diagnose_data_collector_filename"], "health")
        self.assertEqual(op["hidden_os"], [["add", "debian"],
                                           ["remove", "lenny"]])
        self.assertEqual(op["master_netmask"], 24)
        policy = op["ipolicy"]
        self.assertEqual(policy["disk-templates"], ["file"])
        self.assertEqual(policy["spindle-ratio"], 8.0)
        self.assertEqual(policy["std"], {"memory-size": 1024})
        self.assertEqual([(p["min"]["memory-size"], p["max"]["memory-size"],
                           p["max"]["disk-size"])
                          for p in policy["minmax"]],
                         [(512, 8192, 102400), (16384, 65536, 1048576)])
        # untouched parameters stay unset
        self.assertIsNone(op["vg_name"])
        self.assertIsNone(op["file_storage_dir"])

    def test_modify_errors(self):
        client = FakeClient()
        code, _, err = gnt(client, "modify")
        self.assertEqual((code, err), (1, "Please give at least one of the"
                                       " parameters.\n"))
        code, _, err = gnt(client, "modify", "-B", "memory=zz")
        self.assertEqual(code, 1)
        self.assertIn("Failure: invalid value for -B memory", err)
        code, _, err = gnt(client, "modify", "--enabled-user-shutdown",
                           "maybe")
        self.assertEqual(code, 2)
        self.assertIn("expected yes or no", err)
        code, _, err = gnt(client, "modify", "--add-uids", "x")
        self.assertEqual(code, 1)
        self.assertIn("--add-uids", err)
        for bounds, words in [
                ("min:memory-size=128/max:memory-size=256",
                 "min/0: missing cpu-count"),
                ("low:cpu-count=1", "'low:cpu-count=1' is not min:SPECS"),
                ("min:mem=1,cpu-count=1", "unknown spec 'mem'")]:
            code, _, err = gnt(client, "modify", "--ipolicy-bounds-specs",
                               bounds)
            self.assertEqual(code, 1, err)
            self.assertIn("--ipolicy-bounds-specs", err)
            self.assertIn(words, err)
        self.assertEqual(client.jobs, {})
        # the master's refusal is printed as Ganeti does
        client.errors["OP_CLUSTER_SET_PARAMS"] = encoded(
            errors.OpPrereqError("candidate_pool_size: too big",
                                 errors.ECODE_INVAL))
        code, _, err = gnt(client, "modify", "-C", "99")
        self.assertEqual(code, 1)
        self.assertIn("error type: wrong_input, error details:\n"
                      "candidate_pool_size: too big", err)

    def test_tags(self):
        client = FakeClient()
        gnt(client, "add-tags", "env:test", "web")
        op = client.op()
        self.assertEqual((op["OP_ID"], op["kind"], op["name"], op["tags"]),
                         ("OP_TAGS_SET", "cluster", None,
                          ["env:test", "web"]))
        client.tags[("cluster", "")] = ["web", "env:test"]
        code, out, _ = gnt(client, "list-tags")
        self.assertEqual(out, "env:test\nweb\n")
        client.results["OP_TAGS_SEARCH"] = [["/cluster", "web"],
                                            ["/nodes/node1", "webby"]]
        code, out, _ = gnt(client, "search-tags", "web")
        self.assertEqual((code, out), (0, "/cluster web\n/nodes/node1"
                                       " webby\n"))
        client.results["OP_TAGS_SEARCH"] = []
        code, out, _ = gnt(client, "search-tags", "nothing")
        self.assertEqual((code, out), (1, ""))

    def test_redist_conf(self):
        client = FakeClient()
        code, _, _ = gnt(client, "redist-conf")
        self.assertEqual((code, client.op()["OP_ID"]),
                         (0, "OP_CLUSTER_REDIST_CONF"))

    def test_destroy(self):
        client = FakeClient()
        code, _, err = gnt(client, "destroy")
        self.assertEqual(code, 1)
        self.assertIn("--yes-do-it", err)
        self.assertEqual(client.jobs, {})
        client.errors["OP_CLUSTER_DESTROY"] = encoded(errors.OpCodeUnknown(
            "opcode OP_CLUSTER_DESTROY is not implemented by this master"))
        code, _, err = gnt(client, "destroy", "--yes-do-it")
        self.assertEqual(code, 1)
        self.assertEqual(err, "Failure: this master daemon does not"
                         " implement cluster destruction"
                         " (OP_CLUSTER_DESTROY); nothing was changed\n")

    def test_destroy_when_the_master_agrees(self):
        base = tempfile.mkdtemp(prefix="gnt-", dir="/tmp")
        self.addCleanup(shutil.rmtree, base, True)
        root = os.path.join(base, "node1")
        code, _, err = gnt(None, "init", "--root", root, "--no-start",
                           "--node-name", "node1", "--enabled-hypervisors",
                           "fake", "c.example.com")
        self.assertEqual(code, 0, err)
        paths = pathutils.Paths(root)
        client = FakeClient()
        code, out, err = gnt(client, "destroy", "--yes-do-it", "--root",
                             root)
        self.assertEqual(code, 0, err)
        self.assertTrue(client.closed)
        self.assertEqual(sorted(os.listdir(paths.data_dir)), [])
        # and init works again
        code, _, err = gnt(None, "init", "--root", root, "--no-start",
                           "--node-name", "node1", "--enabled-hypervisors",
                           "fake", "c.example.com")
        self.assertEqual(code, 0, err)
        self.assertEqual(constants.RELEASE_VERSION, "3.0.2")


class MaintenanceCommandTests(unittest.TestCase):

    def test_modify_sends_the_switches(self):
        client = FakeClient()
        code, _, err = gnt(client, "modify", "--maintenance-interval", "60",
                           "--auto-balance-cluster", "yes",
                           "--auto-balance-threshold", "0.5",
                           "--maintd-harep", "yes",
                           "--auto-balance-disk-moves", "no",
                           "--auto-balance-load", "yes",
                           "--auto-balance-hold-down", "1800",
                           "--auto-balance-max-moves", "5")
        self.assertEqual(code, 0, err)
        op = client.op()
        self.assertEqual(
            {k: v for k, v in op.items() if k.startswith("maint_")},
            {"maint_round_delay": 60, "maint_balance": True,
             "maint_balance_threshold": 0.5, "maint_harep": True,
             "maint_balance_disk_moves": False, "maint_balance_load": True,
             "maint_balance_hold_down": 1800, "maint_balance_max_moves": 5})
        code, _, err = gnt(client, "modify", "--auto-balance-cluster",
                           "maybe")
        self.assertEqual(code, 2)
        self.assertIn("expected yes or no", err)

    def test_repair_list_and_cancel(self):
        client = FakeClient()
        client.cluster_info = {"maintenance": {"incidents": [
            {"id": "6a3c", "node": "u2", "node_name": "node2.example.com",
             "action": "evacuate", "repair-status": "pending",
             "jobs": [12, 13], "tag": "maintd:repairready:6a3c"}]}}
        code, out, err = gnt(client, "repair-list")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.split("\n")[1].split(),
                         ["6a3c", "node2.example.com", "evacuate", "pending",
                          "12,13", "maintd:repairready:6a3c"])
        code, _, err = gnt(client, "repair-cancel", "6a3c")
        self.assertEqual(code, 0, err)
        self.assertEqual(client.op(), dict(client.op(),
                                           OP_ID="OP_CLUSTER_REPAIR_CANCEL",
                                           incident_id="6a3c"))

    def test_info_shows_the_daemon(self):
        client = FakeClient()
        client.cluster_info = dict(_cluster_info(), maintenance={
            "round_delay": 300, "harep": False, "balance": True,
            "balance_threshold": 0.1, "balance_disk_moves": True,
            "balance_load": False, "balance_hold_down": 3600,
            "balance_max_moves": 20, "incidents": [{}],
            "evacuated": ["u3"], "evacuated_names": ["node3.example.com"],
            "moves": [["i-1", 1700000000.0], ["i-2", 1700000300.0]]})
        code, out, err = gnt(client, "info")
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        for expected in ["Maintenance daemon: ", "  round delay: 300s",
                         "  balancing: True", "  incidents: 1",
                         "  evacuated nodes: node3.example.com",
                         "  recent balancing moves: 2"]:
            self.assertIn(expected, lines)


class VerifyDisksCommandTests(unittest.TestCase):
    """gnt-cluster verify-disks follows the group jobs the master submits
    and activates the disks they found inactive."""

    def setUp(self):
        self.client = FakeClient()

    def groups(self, *results):
        """The master's answer: one finished group job per result."""
        jobs = []
        for result in results:
            self.client.results["OP_GROUP_VERIFY_DISKS"] = result
            jobs.append(self.client._make_job(
                [{"OP_ID": "OP_GROUP_VERIFY_DISKS"}]))
        self.client.results["OP_CLUSTER_VERIFY_DISKS"] = {
            "jobs": [[True, j] for j in jobs]}

    def submitted(self, op_id):
        return [ops[0] for ops in (j.ops for j in self.client.jobs.values())
                if ops[0]["OP_ID"] == op_id]

    def test_nothing_to_do(self):
        self.groups([{}, [], {}], [{}, [], {}])
        code, out, _ = gnt(self.client, "verify-disks")
        self.assertEqual(code, 0)
        self.assertEqual(out.count("No disks need to be activated."), 2)
        (op,) = self.submitted("OP_CLUSTER_VERIFY_DISKS")
        self.assertIsNone(op.get("group_name"))
        self.assertEqual(self.submitted("OP_INSTANCE_ACTIVATE_DISKS"), [])

    def test_one_group_activates_inactive_disks(self):
        self.groups([{}, ["inst1.example.com"], {}])
        code, out, _ = gnt(self.client, "verify-disks", "--node-group",
                           "rack2")
        self.assertEqual(code, 0)
        self.assertEqual(self.submitted("OP_CLUSTER_VERIFY_DISKS")[0]
                         ["group_name"], "rack2")
        self.assertIn("Activating disks for instance 'inst1.example.com'",
                      out)
        self.assertNotIn("No disks need", out)
        (op,) = self.submitted("OP_INSTANCE_ACTIVATE_DISKS")
        self.assertEqual(op["instance_name"], "inst1.example.com")

    def test_failed_activation_fails_the_command(self):
        self.groups([{}, ["inst1.example.com"], {}])
        self.client.errors["OP_INSTANCE_ACTIVATE_DISKS"] = encoded(
            errors.OpExecError("Cannot activate block device"))
        code, _, err = gnt(self.client, "verify-disks")
        self.assertEqual(code, 1)
        self.assertIn("Error activating disks for instance"
                      " inst1.example.com: ", err)
        self.assertIn("Cannot activate block device", err)

    def test_missing_volumes_and_broken_nodes(self):
        self.groups([
            {"node3.example.com": "connection refused"},
            ["inst1.example.com", "inst2.example.com"],
            {"inst1.example.com": [["node2.example.com", "xenvg/d1"],
                                   ["node3.example.com", "xenvg/d1"]],
             "inst3.example.com": [["node3.example.com", "/srv/f/d0"]]}])
        code, out, _ = gnt(self.client, "verify-disks")
        self.assertEqual(code, 1)
        self.assertEqual(out.splitlines(), [
            "Error gathering data on node node3.example.com: connection"
            " refused",
            "Activating disks for instance 'inst2.example.com'",
            "Instance inst1.example.com has missing logical volumes:",
            "\tnode2.example.com /dev/xenvg/d1",
            "\tbroken node node3.example.com /dev/xenvg/d1",
            "Instance inst3.example.com cannot be verified as it lives on"
            " broken nodes",
            "You need to replace or recreate disks for all the above"
            " instances if this message persists after fixing broken"
            " nodes."])
        # an instance with missing volumes is not activated
        self.assertEqual([op["instance_name"] for op in
                          self.submitted("OP_INSTANCE_ACTIVATE_DISKS")],
                         ["inst2.example.com"])

    def test_strict_fails_on_a_node_not_asked(self):
        self.groups([{"node3.example.com": "connection refused"}, [], {}])
        code, out, _ = gnt(self.client, "verify-disks")
        self.assertEqual(code, 0)
        self.assertNotIn("is_strict",
                         self.submitted("OP_CLUSTER_VERIFY_DISKS")[0])
        self.client.jobs.clear()
        self.groups([{"node3.example.com": "connection refused"}, [], {}])
        code, out, _ = gnt(self.client, "verify-disks", "--strict")
        self.assertEqual(code, 1)
        self.assertIn("Error gathering data on node node3.example.com", out)
        self.assertIs(self.submitted("OP_CLUSTER_VERIFY_DISKS")[0]
                      ["is_strict"], True)

    def test_failed_group_job(self):
        self.client.errors["OP_GROUP_VERIFY_DISKS"] = encoded(
            errors.OpPrereqError("Group 'x' not found", "unknown_entity"))
        self.groups(None)
        code, out, _ = gnt(self.client, "verify-disks")
        self.assertEqual(code, 1)
        self.assertIn("Job failed: ", out)
        self.assertIn("Group 'x' not found", out)
