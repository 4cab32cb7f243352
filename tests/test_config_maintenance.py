"""The maintenance daemon's entry in config.data: its switches, its
incidents, what is written and what is refused."""

import json

from twisted.internet import defer
from twisted.trial import unittest

from ganeti import errors
from ganeti import objects
from ganeti.config import ConfigStore

from tests.test_config import make_store


def incident(uuid="i1", node=None, status="noted", **kw):
    data = {"uuid": uuid, "node": node, "repair_status": status,
            "original": {"status": "evacuate", "details": {"disk": "sda"}},
            "action": "evacuate", "jobs": [], "tag":
            "maintd:repairready:%s" % uuid}
    data.update(kw)
    return data


class MaintenanceConfigTests(unittest.TestCase):

    def setUp(self):
        self.store = make_store(self)
        self.node = self.store.get_node("node1.example.com").uuid

    def on_disk(self):
        with open(self.store.path) as f:
            return json.load(f)

    def reload(self):
        return ConfigStore.load(self.store.path)

    def test_left_out_while_unused(self):
        # Ganeti 3.0 refuses top-level keys it does not know
        self.store.save()
        self.assertNotIn("maintenance", self.on_disk())
        self.store.set_maintenance_params(balance=True, round_delay=60)
        data = self.on_disk()["maintenance"]
        self.assertEqual((data["balance"], data["round_delay"],
                          data["harep"]), (True, 60, False))
        again = self.reload()
        self.assertTrue(again.maintenance.balance)
        self.assertEqual(again.maintenance.round_delay, 60)
        self.store.set_maintenance_params(balance=False, round_delay=300)
        self.assertNotIn("maintenance", self.on_disk())

    def test_incidents_survive_a_reload(self):
        self.store.update_maintenance(
            incidents=[incident(node=self.node, status="pending",
                                jobs=[7, 8])], jobs=[7, 8],
            evacuated=[self.node], moves=[["inst-uuid", 1700000000.5]])
        again = self.reload().maintenance
        inc = again.incidents["i1"]
        self.assertEqual((inc.node, inc.repair_status, inc.jobs,
                          inc.original["details"]),
                         (self.node, "pending", [7, 8], {"disk": "sda"}))
        self.assertEqual((again.jobs, again.evacuated, again.moves),
                         ([7, 8], [self.node],
                          [["inst-uuid", 1700000000.5]]))
        self.assertTrue(self.store.cancel_incident("i1"))
        self.assertFalse(self.store.cancel_incident("i1"))
        self.assertEqual(self.reload().maintenance.incidents["i1"]
                         .repair_status, "canceled")
        self.store.update_maintenance(removed=["i1"], jobs=[])
        self.assertEqual(self.reload().maintenance.incidents, {})

    def test_bad_values_are_named_and_change_nothing(self):
        self.store.save()
        before = self.on_disk()
        for call, message in (
                (lambda: self.store.set_maintenance_params(round_delay=0),
                 "maintenance/round_delay: expected a positive number"),
                (lambda: self.store.set_maintenance_params(balance="yes"),
                 "maintenance/balance: expected true or false"),
                (lambda: self.store.set_maintenance_params(colour=1),
                 "unknown parameter 'colour'"),
                (lambda: self.store.update_maintenance(
                    incidents=[incident(status="fixed")]),
                 "incidents/i1/repair_status: 'fixed' is not one of"),
                (lambda: self.store.update_maintenance(
                    incidents=[incident(jobs=["x"])]),
                 "incidents/i1/jobs: expected job ids"),
                (lambda: self.store.update_maintenance(moves=[["a"]]),
                 "moves: expected [[instance uuid, unix time]"),
                (lambda: self.store.update_maintenance(removed=["nope"]),
                 "incident nope is not known"),
                (lambda: self.store.cancel_incident("nope"),
                 "incident_id: no incident 'nope'")):
            with self.assertRaises(errors.OpPrereqError) as ctx:
                call()
            self.assertIn(message, str(ctx.exception))
            self.assertEqual(self.on_disk(), before)

    def test_unknown_top_level_keys_are_kept(self):
        self.store.save()
        data = self.on_disk()
        data["future"] = {"x": 1}
        with open(self.store.path, "w") as f:
            json.dump(data, f)
        again = self.reload()
        again.set_maintenance_params(harep=True)
        self.assertEqual(self.on_disk()["future"], {"x": 1})

    def test_a_malformed_entry_is_refused_on_load(self):
        self.store.save()
        data = self.on_disk()
        data["maintenance"] = ["not", "an", "object"]
        with open(self.store.path, "w") as f:
            json.dump(data, f)
        with self.assertRaises(errors.ConfigurationError) as ctx:
            self.reload()
        self.assertIn("Maintenance: expected a JSON object", str(ctx.exception))

    def test_defaults(self):
        m = objects.Maintenance()
        self.assertTrue(m.is_default())
        self.assertEqual((m.round_delay, m.balance, m.balance_threshold,
                          m.harep), (300, False, 0.1, False))


class MaintenanceUpdateOverLuxiTests(unittest.TestCase):
    """The daemon's luxi call, on a real master in this process."""

    @defer.inlineCallbacks
    def test_recorded_on_disk_before_the_answer(self):
        from tests.inprocess import start_master
        master, client = yield start_master(self, "/tmp/gnt-mu-")
        node = next(iter(ConfigStore.load(self._config_path(master))
                         .nodes.values())).uuid
        ok = yield client.call("MaintenanceUpdate", [incident(node=node)],
                               None, [5], None, None)
        self.assertTrue(ok)
        # on disk as answered: what a restarted daemon reads back
        on_disk = ConfigStore.load(self._config_path(master)).maintenance
        self.assertEqual((list(on_disk.incidents), on_disk.jobs),
                         (["i1"], [5]))
        info = yield client.call("QueryClusterInfo")
        self.assertEqual(info["maintenance"]["incidents"][0]["id"], "i1")
        with self.assertRaises(errors.OpPrereqError) as ctx:
            yield client.call("MaintenanceUpdate",
                              [incident(status="bogus")], None, None, None,
                              None)
        self.assertIn("repair_status: 'bogus'", str(ctx.exception))

    @staticmethod
    def _config_path(master):
        return master.config.paths.config_file
