"""The OS API backend, with the busybox OS of etc/os and broken OSes."""

import os

from twisted.internet import defer, reactor
from twisted.trial import unittest

from ganeti import errors
from ganeti import storage
from ganeti.backend import os_api
from ganeti.backend import process

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ETC_OS = os.path.join(HERE, "etc", "os")
MiB = 1024 * 1024


def read_install_record(path):
    """What the busybox create script wrote: (header lines, env dict)."""
    with open(path, "rb") as f:
        data = f.read(64 * 1024)
    text = data.split(b"\nEND\n", 1)[0].decode()
    header, _, env_text = text.partition("\n--- environment\n")
    env = {}
    for line in env_text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            env[key] = value
    return header.splitlines(), env


def make_os(base, name, api="20", variants="default\n", params="p1 doc\n",
            scripts=None, skip=()):
    """Write an OS definition; scripts default to ``exit 0``."""
    path = os.path.join(base, name)
    os.makedirs(path)
    files = {"ganeti_api_version": api, "variants.list": variants,
             "parameters.list": params}
    for fname, content in files.items():
        if fname not in skip and content is not None:
            with open(os.path.join(path, fname), "w") as f:
                f.write(content)
    for script in ("create", "export", "import", "rename", "verify"):
        if script in skip:
            continue
        with open(os.path.join(path, script), "w") as f:
            f.write((scripts or {}).get(script, "#!/bin/sh\nexit 0\n"))
        os.chmod(os.path.join(path, script), 0o755)
    return path


def instance_dict(disk_path, os_name="busybox+default", **kw):
    inst = {
        "name": "inst1.example.com",
        "uuid": "6a4b7c1e-0000-4000-8000-000000000001",
        "os": os_name,
        "hypervisor": "kvm",
        "primary_node": "node-uuid-1",
        "secondary_nodes": [],
        "hvparams": {"kernel_path": "/boot/vmlinuz", "acpi": True},
        "beparams": {"maxmem": 256, "vcpus": 2},
        "osparams": {"motd": "hello world"},
        "nics": [{"mac": "aa:00:00:11:22:33", "ip": "192.0.2.10",
                  "uuid": "nic-uuid", "name": "eth0",
                  "nicparams": {"mode": "bridged", "link": "br0",
                                "vlan": ""}}],
        "disks_info": [{"dev_type": "file", "logical_id": ["loop", disk_path],
                        "size": 8, "mode": "rw", "uuid": "disk-uuid",
                        "name": "root"}],
    }
    inst.update(kw)
    return inst


class DefinitionTests(unittest.TestCase):

    def setUp(self):
        self.base = os.path.abspath(self.mktemp())
        os.makedirs(self.base)

    def test_busybox_is_valid(self):
        osdef = os_api.find_os("busybox", [self.base, ETC_OS])
        self.assertEqual(osdef.api_versions, (20, 15))
        self.assertEqual(osdef.api_version, 20)
        self.assertEqual(osdef.variants, ("default", "minimal"))
        self.assertEqual(osdef.parameter_names,
                         {"motd", "fail_create", "root_password"})
        self.assertEqual(osdef.full_names(),
                         ["busybox+default", "busybox+minimal"])

    def test_diagnose(self):
        make_os(self.base, "good")
        make_os(self.base, "noscript", skip=("rename",))
        make_os(self.base, "oldapi", api="5\n")
        make_os(self.base, "badapi", api="twenty\n")
        make_os(self.base, "noparams", skip=("parameters.list",))
        make_os(self.base, "api10", api="10\n", variants=None, params=None,
                skip=("verify",))
        path = make_os(self.base, "notexec")
        os.chmod(os.path.join(path, "create"), 0o644)
        make_os(self.base, "busybox", skip=("create",))  # shadows etc/os's
        path = make_os(self.base, "untrusted")
        with open(os.path.join(path, "create_untrusted"), "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        result = {e["name"]: e for e in os_api.diagnose([self.base, ETC_OS])}
        self.assertTrue(result["good"]["valid"])
        self.assertEqual((result["good"]["trusted"],
                          result["untrusted"]["valid"],
                          result["untrusted"]["trusted"]),
                         (True, True, False))
        self.assertTrue(result["api10"]["valid"])
        self.assertEqual(result["api10"]["variants"], [])
        for name, words in [("noscript", "rename is missing"),
                            ("oldapi", "API version mismatch"),
                            ("badapi", "integers"),
                            ("noparams", "parameters.list"),
                            ("notexec", "not an executable"),
                            ("busybox", "create is missing")]:
            self.assertFalse(result[name]["valid"], name)
            self.assertIn(words, result[name]["status"], name)
        # the first directory that has a name wins
        self.assertEqual(result["busybox"]["path"],
                         os.path.join(self.base, "busybox"))

    def test_names(self):
        self.assertEqual(os_api.split_os_name("busybox+minimal"),
                         ("busybox", "minimal"))
        self.assertEqual(os_api.split_os_name("debootstrap"),
                         ("debootstrap", None))
        for bad in ("", "../etc", "a/b", ".hidden", "os+", "os+a/b", None):
            self.assertRaises(errors.ParameterError, os_api.split_os_name, bad)
        err = self.assertRaises(os_api.OsApiError, os_api.find_os, "nothere",
                                [self.base])
        self.assertIn("not found", str(err))

    def test_variant_checks(self):
        osdef = os_api.find_os("busybox", [ETC_OS])
        self.assertEqual(os_api.check_variant(osdef, None), "default")
        self.assertEqual(os_api.check_variant(osdef, "minimal"), "minimal")
        err = self.assertRaises(errors.ParameterError, os_api.check_variant,
                                osdef, "gigantic")
        self.assertIn("has no variant 'gigantic'", str(err))
        self.assertIn("default, minimal", str(err))
        self.assertEqual(os_api.check_variant(osdef, "gigantic", force=True),
                         "gigantic")

    def test_environment_depends_on_api_version(self):
        inst = instance_dict("/d0")
        v20 = os_api.find_os("busybox", [ETC_OS])
        env = os_api.build_env(v20, "default", inst, ["/d0"], debug=1)
        expected = {
            "OS_API_VERSION": "20", "OS_NAME": "busybox",
            "OS_VARIANT": "default", "DEBUG_LEVEL": "1",
            "INSTANCE_NAME": "inst1.example.com",
            "INSTANCE_OS": "busybox+default",
            "HYPERVISOR": "kvm", "INSTANCE_HYPERVISOR": "kvm",
            "INSTANCE_HV_kernel_path".upper(): "/boot/vmlinuz",
            "INSTANCE_HV_ACPI": "True", "INSTANCE_BE_MAXMEM": "256",
            "INSTANCE_BE_VCPUS": "2", "OSP_MOTD": "hello world",
            "DISK_COUNT": "1", "DISK_0_PATH": "/d0", "DISK_0_ACCESS": "rw",
            "DISK_0_SIZE": "8", "DISK_0_UUID": "disk-uuid",
            "DISK_0_NAME": "root", "DISK_0_BACKEND_TYPE": "file:loop",
            "NIC_COUNT": "1", "NIC_0_MAC": "aa:00:00:11:22:33",
            "NIC_0_IP": "192.0.2.10", "NIC_0_MODE": "bridged",
            "NIC_0_LINK": "br0", "NIC_0_BRIDGE": "br0",
            "NIC_0_NAME": "eth0", "NIC_0_UUID": "nic-uuid",
        }
        for key, value in expected.items():
            self.assertEqual(env.get(key), value, key)
        make_os(self.base, "v15", api="15\n", params=None, skip=("verify",))
        v15 = os_api.find_os("v15", [self.base])
        env = os_api.build_env(v15, "default", inst, ["/d0"])
        self.assertEqual(env["OS_API_VERSION"], "15")
        self.assertEqual(env["INSTANCE_HYPERVISOR"], "kvm")
        self.assertNotIn("OSP_MOTD", env)       # parameters are API 20
        make_os(self.base, "v10", api="10\n", variants=None, params=None,
                skip=("verify",))
        v10 = os_api.find_os("v10", [self.base])
        env = os_api.build_env(v10, "", inst, ["/d0"])
        self.assertEqual(env["OS_VARIANT"], "")
        self.assertEqual(env["HYPERVISOR"], "kvm")
        self.assertNotIn("INSTANCE_HYPERVISOR", env)  # new in API 15
        self.assertNotIn("INSTANCE_HV_ACPI", env)
        self.assertEqual(env["INSTANCE_BE_MAXMEM"], "256")


class ScriptTests(unittest.TestCase):

    timeout = 60

    def setUp(self):
        self.root = os.path.abspath(self.mktemp())
        self.store = os.path.join(self.root, "srv/ganeti/file-storage")
        self.extra = os.path.join(self.root, "extra-os")
        os.makedirs(self.store)
        os.makedirs(self.extra)
        self.disk = os.path.join(self.store, "inst1", "disk0")
        os.makedirs(os.path.dirname(self.disk))
        with open(self.disk, "wb") as f:
            f.truncate(8 * MiB)
        ctx = storage.StorageContext(runner=process.CommandRunner(reactor),
                                     file_storage_dirs=[self.store])
        self.log_dir = os.path.join(self.root, "var/log/ganeti")
        self.backend = os_api.OsBackend(
            reactor, os_api.default_search_path(self.root) +
            [self.extra, ETC_OS], ctx, self.log_dir, create_timeout=20)

    @defer.inlineCallbacks
    def test_create_default_variant_sees_the_api_environment(self):
        log_path = yield self.backend.create(instance_dict(self.disk),
                                             reinstall=True, debug=1)
        self.assertTrue(log_path.startswith(os.path.join(self.log_dir, "os")))
        with open(log_path) as f:
            self.assertIn("installed inst1.example.com", f.read())
        header, env = read_install_record(self.disk)
        self.assertEqual(header[:4], ["GANETI-BUSYBOX-OS v1",
                                      "variant=default", "reinstall=1",
                                      "motd=hello world"])
        self.assertEqual(env["OS_API_VERSION"], "20")
        self.assertEqual(env["INSTANCE_OS"], "busybox+default")
        self.assertEqual(env["INSTANCE_HYPERVISOR"], "kvm")
        self.assertEqual(env["INSTANCE_HV_KERNEL_PATH"], "/boot/vmlinuz")
        self.assertEqual(env["INSTANCE_BE_MAXMEM"], "256")
        self.assertEqual(env["OSP_MOTD"], "hello world")
        self.assertEqual(env["DISK_0_PATH"], self.disk)
        self.assertEqual(env["NIC_0_MAC"], "aa:00:00:11:22:33")
        self.assertEqual(env["DEBUG_LEVEL"], "1")
        # the daemon's own environment does not leak into scripts
        self.assertNotIn("PYTHONPATH", env)
        self.assertEqual(os.stat(self.disk).st_size, 8 * MiB)

    @defer.inlineCallbacks
    def test_private_and_secret_parameters_reach_the_script(self):
        yield self.backend.create(instance_dict(
            self.disk, osparams_private={"motd": "private motd"},
            osparams_secret={"root_password": "s3cr3t"}))
        header, env = read_install_record(self.disk)
        self.assertEqual(header[3], "motd=private motd")
        self.assertEqual(env["OSP_MOTD"], "private motd")
        self.assertEqual(env["OSP_ROOT_PASSWORD"], "s3cr3t")
        # the script's log does not get them
        (log_name,) = os.listdir(os.path.join(self.log_dir, "os"))
        with open(os.path.join(self.log_dir, "os", log_name)) as f:
            self.assertNotIn("s3cr3t", f.read())
        err = yield self.assertFailure(self.backend.create(instance_dict(
            self.disk, osparams_secret=["x"])), errors.ParameterError)
        self.assertIn("instance.osparams_secret must be a dict", str(err))

    @defer.inlineCallbacks
    def test_minimal_variant(self):
        yield self.backend.create(instance_dict(self.disk,
                                                os_name="busybox+minimal"))
        header, env = read_install_record(self.disk)
        self.assertEqual(header[1], "variant=minimal")
        self.assertEqual(env, {})

    @defer.inlineCallbacks
    def test_unknown_variant_is_refused_before_running(self):
        err = yield self.assertFailure(
            self.backend.create(instance_dict(self.disk, os_name="busybox+xl")),
            errors.ParameterError)
        self.assertEqual(err.args[0], "instance.os")
        self.assertIn("no variant 'xl'", str(err))
        with open(self.disk, "rb") as f:
            self.assertEqual(f.read(16), b"\0" * 16)

    @defer.inlineCallbacks
    def test_failure_reports_last_output_lines(self):
        inst = instance_dict(self.disk, osparams={"fail_create": "yes"})
        err = yield self.assertFailure(self.backend.create(inst),
                                       os_api.OsApiError)
        self.assertIn("exit code 1", str(err))
        self.assertIn("failing on purpose", str(err))

    @defer.inlineCallbacks
    def test_timeout(self):
        make_os(self.extra, "slow", scripts={
            "create": "#!/bin/sh\necho starting\nsleep 60\n"})
        self.backend.create_timeout = 0.5
        err = yield self.assertFailure(
            self.backend.create(instance_dict(self.disk, os_name="slow")),
            os_api.OsApiError)
        self.assertIn("timed out", str(err))
        self.assertIn("starting", str(err))

    @defer.inlineCallbacks
    def test_disk_outside_storage_refused(self):
        inst = instance_dict("/etc/passwd")
        err = yield self.assertFailure(self.backend.create(inst),
                                       errors.ParameterError)
        self.assertEqual(err.args[0], "instance.disks_info")

    @defer.inlineCallbacks
    def test_rename(self):
        yield self.backend.rename(instance_dict(self.disk,
                                                name="new.example.com"),
                                  "inst1.example.com")
        with open(self.disk, "rb") as f:
            f.seek(65536)
            self.assertEqual(f.readline(), b"GANETI-BUSYBOX-RENAME"
                             b" inst1.example.com -> new.example.com\n")

    @defer.inlineCallbacks
    def test_validate(self):
        ok = yield self.backend.validate(True, "busybox+default",
                                         ["parameters"], {"motd": "x"})
        self.assertTrue(ok)
        missing = yield self.backend.validate(False, "nothere", [], {})
        self.assertFalse(missing)
        yield self.assertFailure(
            self.backend.validate(True, "nothere", [], {}), os_api.OsApiError)
        err = yield self.assertFailure(
            self.backend.validate(True, "busybox", ["parameters"],
                                  {"colour": "red"}), errors.ParameterError)
        self.assertEqual(err.args[0], "osparams")
        self.assertIn("colour", str(err))
        # the OS's verify script rejects the value
        err = yield self.assertFailure(
            self.backend.validate(True, "busybox", ["parameters"],
                                  {"fail_create": "maybe"}),
            os_api.OsApiError)
        self.assertIn("must be yes or no", str(err))
        yield self.assertFailure(
            self.backend.validate(True, "busybox+xl", [], {}),
            errors.ParameterError)
        ok = yield self.backend.validate(True, "busybox+xl", [], {},
                                         force_variant=True)
        self.assertTrue(ok)
        yield self.assertFailure(
            self.backend.validate(True, "busybox", ["colours"], {}),
            errors.ParameterError)
