"""The user-shutdown rule, one test per combination of its settings.

A guest that powered itself off (the node reports its domain "shutdown")
is a user shutdown only if the cluster enables user shutdown and, for KVM,
the instance's ``user_shutdown`` hypervisor parameter is on.  Every place
that shows or acts on it must agree: the rule itself, the query status,
instance information (run_state), ``gnt-cluster verify`` and
``OP_INSTANCE_SHUTDOWN`` with ``admin_state_source=user`` (what the watcher
submits).
"""

from ganeti import constants
from ganeti import errors
from ganeti import locking
from ganeti import objects
from ganeti import user_shutdown
from ganeti.query import live as qlive

from tests.test_cluster_verify import VerifyTestCase
from tests.test_cmdlib_instance import NODE1

NAME = "guest.example.com"

# (cluster enabled_user_shutdown, hypervisor, kvm user_shutdown, expected)
COMBINATIONS = [
    (False, constants.HT_FAKE, None, False),
    (True, constants.HT_FAKE, None, True),
    (False, constants.HT_KVM, False, False),
    (False, constants.HT_KVM, True, False),
    (True, constants.HT_KVM, False, False),
    (True, constants.HT_KVM, True, True),
]


class UserShutdownRuleTests(VerifyTestCase):

    def setUp(self):
        VerifyTestCase.setUp(self)
        self.cfg.set_cluster_params(
            enabled_hypervisors=[constants.HT_FAKE, constants.HT_KVM])

    def add_powered_off_instance(self, hv_name, kvm_user_shutdown):
        hvparams = {}
        if kvm_user_shutdown is not None:
            hvparams[constants.HV_KVM_USER_SHUTDOWN] = kvm_user_shutdown
        self.cfg.add_instance(objects.Instance(
            name=NAME, primary_node=self.cfg.get_node(NODE1).uuid,
            hypervisor=hv_name, hvparams=hvparams, os="busybox+default",
            disk_template=constants.DT_DISKLESS, admin_state="up",
            nics=[objects.NIC(mac=self.cfg.generate_mac())]))
        self.glm.add(locking.LEVEL_INSTANCE, [self.cfg.get_instance(NAME).uuid])
        # the guest powered itself off; its domain is kept
        self.rpc.domains[(NODE1, NAME)] = "shutdown"
        return self.cfg.get_instance(NAME)

    def check(self, enabled, hv_name, kvm_user_shutdown, expected):
        self.cfg.set_cluster_params(enabled_user_shutdown=enabled)
        inst = self.add_powered_off_instance(hv_name, kvm_user_shutdown)
        cluster = self.cfg.cluster
        info = {"state": "shutdown"}

        self.assertIs(user_shutdown.allowed(cluster, inst), expected)
        self.assertIs(user_shutdown.is_user_down(cluster, inst, info),
                      expected)
        self.assertFalse(user_shutdown.is_user_down(
            cluster, inst, {"state": "running"}))
        self.assertFalse(user_shutdown.is_user_down(cluster, inst, None))

        # gnt-instance list: the status column
        self.assertEqual(
            qlive.instance_status(cluster, inst, qlive.WHERE_PRIMARY, info),
            constants.INSTST_USERDOWN if expected
            else constants.INSTST_ERRORDOWN)

        # gnt-instance info: the run state
        data = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA",
                        "instances": [NAME]})
        self.assertEqual(data[NAME]["run_state"],
                         "user down" if expected else "down")

        # gnt-cluster verify: a warning for a user shutdown, else an error
        _, findings = self.verify_group()
        mine = [f for f in findings if NAME in f]
        if expected:
            self.assertEqual(mine, [
                "  - WARNING: instance %s: instance was shut down by its"
                " user on node %s (USER_down)" % (NAME, NODE1)])
        else:
            self.assertEqual(len(mine), 1, findings)
            self.assertTrue(mine[0].startswith("  - ERROR: instance %s:"
                                               " instance not running"
                                               % NAME), mine)

        # the watcher's OP_INSTANCE_SHUTDOWN admin_state_source=user
        op = {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": NAME,
              "admin_state_source": "user"}
        if expected:
            self.ok(op)
            inst = self.cfg.get_instance(NAME)
            self.assertEqual((inst.admin_state, inst.admin_state_source),
                             ("down", "user"))
        else:
            err = self.fails(op, errors.OpPrereqError)
            self.assertIn("admin_state_source", str(err))
            reason = ("disabled on the cluster" if not enabled
                      else "user_shutdown is off")
            self.assertIn(reason, str(err))
            # nothing changed
            inst = self.cfg.get_instance(NAME)
            self.assertEqual((inst.admin_state, inst.admin_state_source),
                             ("up", "admin"))
            self.assertEqual(self.rpc.domains[(NODE1, NAME)], "shutdown")


def _make_test(enabled, hv_name, kvm_user_shutdown, expected):
    def test(self):
        self.check(enabled, hv_name, kvm_user_shutdown, expected)
    test.__name__ = "test_%s_%s%s_%s" % (
        "enabled" if enabled else "disabled", hv_name,
        "" if kvm_user_shutdown is None
        else "_param_%s" % ("on" if kvm_user_shutdown else "off"),
        "user_down" if expected else "error_down")
    return test


for _combination in COMBINATIONS:
    _test = _make_test(*_combination)
    setattr(UserShutdownRuleTests, _test.__name__, _test)
del _combination, _test
