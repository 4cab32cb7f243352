"""Private and secret OS parameters in the logical units: the OS (its
verify and create scripts, through the node) gets them; the configuration
keeps the private ones and never a secret one; no query of instances or
of the cluster shows a private value."""

import json
import os

from ganeti import query
from ganeti.cmdlib import cluster as cluster_lu

from tests.test_cmdlib_instance import BUSYBOX, InstanceTestCase, create_op

SECRET = "s3cret-root-pw-71d2"
PRIVATE = "private-motd-5be0"
CLUSTER_PRIVATE = "cluster-private-a913"


class OsParamsTestCase(InstanceTestCase):

    def setUp(self):
        InstanceTestCase.setUp(self)
        for node_os in self.rpc.os_list.values():
            node_os[0]["parameters"] = BUSYBOX["parameters"] + [
                ["root_password", "password"]]

    def config_text(self):
        with open(self.cfg.path) as f:
            return f.read()

    def os_calls(self, procedure):
        return [args for _, _, args in self.rpc.calls_of(procedure)]


class CreateTests(OsParamsTestCase):

    def test_the_os_gets_them_the_config_keeps_no_secret(self):
        self.ok(create_op(osparams={"fail_create": "no"},
                          osparams_private={"motd": PRIVATE},
                          osparams_secret={"root_password": SECRET}))
        # the node checks every parameter name against the OS
        (validate,) = self.os_calls("os_validate")
        self.assertEqual(validate[3], {"fail_create": "no", "motd": PRIVATE,
                                       "root_password": SECRET})
        (add,) = self.os_calls("instance_os_add")
        self.assertEqual(add[0]["osparams"], {"fail_create": "no"})
        self.assertEqual(add[0]["osparams_private"], {"motd": PRIVATE})
        self.assertEqual(add[0]["osparams_secret"], {"root_password": SECRET})
        inst = self.inst()
        self.assertEqual(inst.osparams_private, {"motd": PRIVATE})
        text = self.config_text()
        self.assertIn(PRIVATE, text)      # kept: reinstalls need it
        self.assertNotIn(SECRET, text)
        self.assertNotIn("root_password", text)

    def test_a_parameter_given_twice_is_refused(self):
        before = self.cfg.to_dict()
        err = self.fails(create_op(osparams={"motd": "a"},
                                   osparams_secret={"motd": SECRET}))
        self.assertIn("osparams, osparams_secret: OS parameter given more"
                      " than once: motd (in osparams and osparams_secret)",
                      str(err))
        self.assertNotIn(SECRET, str(err))
        self.assertEqual(self.cfg.to_dict(), before)
        self.assertEqual(self.rpc.calls, [])

    def test_a_forthcoming_instance_takes_them_at_commit(self):
        self.ok(create_op(forthcoming=True))
        self.ok(create_op(commit=True, osparams_private={"motd": PRIVATE},
                          osparams_secret={"root_password": SECRET}))
        (add,) = self.os_calls("instance_os_add")
        self.assertEqual(add[0]["osparams_private"], {"motd": PRIVATE})
        self.assertEqual(add[0]["osparams_secret"], {"root_password": SECRET})
        self.assertEqual(self.inst().osparams_private, {"motd": PRIVATE})
        self.assertNotIn(SECRET, self.config_text())


class InstanceTests(OsParamsTestCase):

    def setUp(self):
        OsParamsTestCase.setUp(self)
        self.create(osparams_private={"motd": PRIVATE})

    def op(self, op_id, **kw):
        kw.update(OP_ID=op_id, instance_name="inst1.example.com")
        return kw

    def test_reinstall_with_new_private_and_secret_parameters(self):
        self.ok(self.op("OP_INSTANCE_SHUTDOWN"))
        self.rpc.calls = []
        self.ok(self.op("OP_INSTANCE_REINSTALL",
                        osparams_private={"motd": "new " + PRIVATE},
                        osparams_secret={"root_password": SECRET}))
        (validate,) = self.os_calls("os_validate")
        self.assertEqual(validate[3], {"motd": "new " + PRIVATE,
                                       "root_password": SECRET})
        (add,) = self.os_calls("instance_os_add")
        self.assertEqual(add[0]["osparams_private"], {"motd": "new " + PRIVATE})
        self.assertEqual(add[0]["osparams_secret"], {"root_password": SECRET})
        self.assertTrue(add[1])
        self.assertEqual(self.inst().osparams_private,
                         {"motd": "new " + PRIVATE})
        self.assertNotIn(SECRET, self.config_text())
        # a reinstall without them keeps the private ones, has no secret
        self.rpc.calls = []
        self.ok(self.op("OP_INSTANCE_REINSTALL"))
        (add,) = self.os_calls("instance_os_add")
        self.assertEqual(add[0]["osparams_private"], {"motd": "new " + PRIVATE})
        self.assertEqual(add[0]["osparams_secret"], {})

    def test_rename_runs_the_os_with_the_private_parameters(self):
        self.ok(self.op("OP_INSTANCE_SHUTDOWN"))
        self.ok({"OP_ID": "OP_INSTANCE_RENAME",
                 "instance_name": "inst1.example.com",
                 "new_name": "inst9.example.com", "name_check": False,
                 "ip_check": False})
        (rename,) = self.os_calls("instance_run_rename")
        self.assertEqual(rename[0]["osparams_private"], {"motd": PRIVATE})
        self.assertEqual(rename[0]["osparams_secret"], {})

    def test_set_params_checks_private_names_with_the_os(self):
        self.rpc.calls = []
        result = self.ok(self.op("OP_INSTANCE_SET_PARAMS",
                                 osparams_private={"root_password": SECRET}))
        self.assertEqual(result, [["os_private/root_password",
                                   "<redacted>"]])
        (validate,) = self.os_calls("os_validate")
        self.assertEqual(validate[3], {"motd": PRIVATE,
                                       "root_password": SECRET})
        self.assertEqual(self.inst().osparams_private,
                         {"motd": PRIVATE, "root_password": SECRET})
        err = self.fails(self.op("OP_INSTANCE_SET_PARAMS",
                                 osparams={"motd": "x"},
                                 osparams_private={"motd": "y"}))
        self.assertIn("motd (in osparams and osparams_private)", str(err))

    def test_no_query_shows_a_private_value(self):
        self.ok({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                 "osparams_private_cluster": {
                     "busybox": {"root_password": CLUSTER_PRIVATE}}})
        answers = [self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA"}),
                   self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA",
                            "static": True}),
                   cluster_lu.cluster_info(self.cfg)]
        ctx = query.QueryContext(self.cfg)
        for what in ("instance", "cluster"):
            fields = [f.name for f in query.RESOURCES[what].fields]
            answers.append(self.successResultOf(ctx.query(what, fields)))
        for answer in answers:
            text = json.dumps(answer, default=str)
            self.assertNotIn(PRIVATE, text)
            self.assertNotIn(CLUSTER_PRIVATE, text)


class ClusterTests(OsParamsTestCase):

    def test_cluster_private_parameters_are_kept_and_reach_the_os(self):
        self.ok({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                 "osparams_private_cluster": {
                     "busybox": {"root_password": CLUSTER_PRIVATE}}})
        self.assertEqual(self.cfg.cluster.osparams_private_cluster,
                         {"busybox": {"root_password": CLUSTER_PRIVATE}})
        self.assertIn(CLUSTER_PRIVATE, self.config_text())
        self.ok(create_op(osparams_private={"motd": PRIVATE}))
        (add,) = self.os_calls("instance_os_add")
        self.assertEqual(add[0]["osparams_private"],
                         {"motd": PRIVATE, "root_password": CLUSTER_PRIVATE})
        # an instance's own value wins
        self.ok(create_op("inst2.example.com", osparams_private={
            "root_password": "mine"}))
        add = self.os_calls("instance_os_add")[1]
        self.assertEqual(add[0]["osparams_private"], {"root_password": "mine"})

    def test_config_data_is_for_its_owner_only(self):
        self.ok({"OP_ID": "OP_CLUSTER_SET_PARAMS",
                 "osparams_private_cluster": {
                     "busybox": {"root_password": CLUSTER_PRIVATE}}})
        self.assertEqual(os.stat(self.cfg.path).st_mode & 0o777, 0o600)

