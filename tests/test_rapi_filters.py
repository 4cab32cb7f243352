"""RAPI /2/filters and /2/filters/{uuid} against the master's real luxi
filter methods (over the FakeHandler of tests.test_rapi, whose
configuration keeps the rules)."""

from twisted.internet import defer

from ganeti.server import masterd

from tests.test_rapi import FakeHandler, RapiTestCase, READER


class _Queue(object):
    """What the filter methods ask of the queue."""

    def __init__(self):
        self.highest_job_id = 0
        self.applied = []

    def set_filters(self, filters):
        self.applied.append(sorted(filters))


class FilterHandler(FakeHandler):
    """FakeHandler with the master's filter methods."""

    def __init__(self, cfg, clock):
        FakeHandler.__init__(self, cfg, clock)
        self.master = self
        self.queue = _Queue()

    def query_context(self):
        return self._ctx()

    query_filters = masterd.MasterLuxiHandler.query_filters
    replace_filter = masterd.MasterLuxiHandler.replace_filter
    delete_filter = masterd.MasterLuxiHandler.delete_filter
    _filters_changed = masterd.MasterLuxiHandler._filters_changed


class FilterResourceTests(RapiTestCase):

    def setUp(self):
        RapiTestCase.setUp(self)
        self.handler = FilterHandler(self.cfg, self.clock)
        self.master.handler = self.handler
        self.master.factory.handler = self.handler

    @defer.inlineCallbacks
    def test_add_list_get_replace_delete(self):
        self.assertEqual((yield self.ok("GET", "/2/filters")), [])
        self.handler.queue.highest_job_id = 7
        uuid = yield self.ok("POST", "/2/filters?reason=upgrade", body={
            "priority": 4, "action": ["RATE_LIMIT", 3],
            "predicates": [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]],
            "reason": [["gnt:client", "", 12]]})
        self.assertEqual(self.handler.queue.applied, [[uuid]])
        listed = yield self.ok("GET", "/2/filters", auth=READER)
        self.assertEqual(listed, [{"uuid": uuid,
                                   "uri": "/2/filters/%s" % uuid}])
        rule = yield self.ok("GET", "/2/filters/%s" % uuid)
        self.assertEqual((rule["uuid"], rule["watermark"], rule["priority"],
                          rule["action"], rule["predicates"]),
                         (uuid, 7, 4, ["RATE_LIMIT", 3],
                          [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]))
        self.assertEqual([r[:2] for r in rule["reason_trail"]],
                         [["gnt:client", ""], ["gnt:user", "upgrade"],
                          ["gnt:library:rlib2:filters", ""]])
        bulk = yield self.ok("GET", "/2/filters?bulk=1")
        self.assertEqual(bulk, [rule])
        # replace: defaults for what the body leaves out
        again = yield self.ok("PUT", "/2/filters/%s" % uuid, body={})
        self.assertEqual(again, uuid)
        rule = yield self.ok("GET", "/2/filters/%s" % uuid)
        self.assertEqual((rule["priority"], rule["action"],
                          rule["predicates"]), (0, "CONTINUE", []))
        # PUT of an unknown uuid creates it
        yield self.ok("PUT", "/2/filters/my-rule", body={"action": "PAUSE"})
        query = yield self.ok("GET", "/2/query/filter?fields=uuid,action")
        self.assertEqual(sorted(query["data"]),
                         sorted([[[0, uuid], [0, "CONTINUE"]],
                                 [[0, "my-rule"], [0, "PAUSE"]]]))
        self.assertIsNone((yield self.ok("DELETE", "/2/filters/%s" % uuid)))
        listed = yield self.ok("GET", "/2/filters")
        self.assertEqual([f["uuid"] for f in listed], ["my-rule"])
        yield self.error(404, "GET", "/2/filters/%s" % uuid)
        yield self.error(404, "DELETE", "/2/filters/%s" % uuid)

    @defer.inlineCallbacks
    def test_bad_input_names_the_field_and_changes_nothing(self):
        yield self.ok("PUT", "/2/filters/f1", body={"action": "ACCEPT"})
        before = dict(self.cfg.filters)
        serial = self.cfg.serial_no
        for body, field in (
                ({"priority": -1}, "priority"),
                ({"action": "DROP"}, "action"),
                ({"action": ["RATE_LIMIT", 0]}, "action"),
                ({"predicates": [["nosuch", ["=", "id", 1]]]},
                 "predicates[0]"),
                ({"predicates": [["jobid", ["=", "name", 1]]]},
                 "predicates[0] (jobid)"),
                ({"predicates": "x"}, "predicates"),
                ({"colour": "red"}, "colour"),
                ({"reason": [["x"]]}, "reason")):
            err = yield self.error(400, "PUT", "/2/filters/f1", body=body)
            self.assertIn(field, err["message"] + err["explain"])
            yield self.error(400, "POST", "/2/filters", body=body)
        self.assertEqual(self.cfg.filters, before)
        self.assertEqual(self.cfg.serial_no, serial)

    @defer.inlineCallbacks
    def test_writes_need_write_access(self):
        yield self.error(401, "POST", "/2/filters", body={}, auth=None)
        yield self.error(403, "DELETE", "/2/filters/x", auth=READER)
