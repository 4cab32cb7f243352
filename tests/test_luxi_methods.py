"""The LUXI method table, the handler interface made from it, the master's
handler and the client methods: they must agree."""

import inspect

from twisted.trial import unittest
from zope.interface.verify import verifyObject

from ganeti import luxi
from ganeti import opcodes
from ganeti.server import masterd


class Recorder(luxi._Methods):
    """A client that records what it would send."""

    def __init__(self):
        self.sent = []

    def call(self, method, *args):
        self.sent.append((method,) + args)
        return len(self.sent)


class TableTests(unittest.TestCase):

    def test_master_handler_provides_the_interface(self):
        verifyObject(luxi.ILuxiHandler, masterd.MasterLuxiHandler(None))

    def test_interface_is_the_table(self):
        required = {m.handler for m in luxi.METHODS.values()
                    if not m.optional}
        self.assertEqual(set(luxi.ILuxiHandler.names()), required)
        for method in luxi.METHODS.values():
            if method.optional:
                continue
            spec = luxi.ILuxiHandler[method.handler]
            self.assertEqual(spec.positional,
                             tuple(a.name for a in method.args))
            self.assertTrue(spec.getDoc().startswith(method.name), method)

    def test_master_handler_serves_only_table_methods(self):
        public = {name for (name, member)
                  in inspect.getmembers(masterd.MasterLuxiHandler)
                  if not name.startswith("_") and callable(member)}
        self.assertLessEqual(public, set(luxi.HANDLER_METHODS.values()))

    def test_client_methods_are_the_table(self):
        for method in luxi.METHODS.values():
            if method.name in luxi._STREAM_METHODS:
                # the connection becomes the stream's: no request/answer
                # method (BlockingClient.watch_events, open_event_stream)
                self.assertFalse(hasattr(luxi._Methods, method.handler))
                continue
            fn = getattr(luxi._Methods, method.handler)
            names = list(inspect.signature(fn).parameters)[1:]
            self.assertEqual(names, [a.name for a in method.args], method)
        # the clients have them all
        for cls in (luxi.LuxiClient, luxi.BlockingClient):
            for name, handler in luxi.HANDLER_METHODS.items():
                if name in luxi._STREAM_METHODS and cls is luxi.LuxiClient:
                    continue
                self.assertTrue(callable(getattr(cls, handler)))


class ClientMethodTests(unittest.TestCase):

    def setUp(self):
        self.client = Recorder()

    def sent(self):
        return self.client.sent[-1]

    def test_defaults(self):
        c = self.client
        c.cancel_job(3)
        self.assertEqual(self.sent(), ("CancelJob", 3, False))
        c.query("node", ["name"])
        self.assertEqual(self.sent(), ("Query", "node", ["name"], None))
        c.query_fields("node")
        self.assertEqual(self.sent(), ("QueryFields", "node", None))
        c.query_instances(None, ["name"])
        self.assertEqual(self.sent(), ("QueryInstances", None, ["name"],
                                       False))
        c.query_exports(["n1"])
        self.assertEqual(self.sent(), ("QueryExports", ["n1"], False))
        c.auto_archive_jobs(3600)
        self.assertEqual(self.sent(), ("AutoArchiveJobs", 3600,
                                       (luxi.READ_WRITE_TIMEOUT - 1) // 2))
        c.query_cluster_info()
        self.assertEqual(self.sent(), ("QueryClusterInfo",))
        c.replace_filter(None, 0, [], "ACCEPT", [])
        self.assertEqual(self.sent(), ("ReplaceFilter", None, 0, [],
                                       "ACCEPT", []))
        self.assertRaises(TypeError, c.cancel_job)
        self.assertRaises(TypeError, c.archive_job, 1, 2)

    def test_keyword_arguments(self):
        self.client.cancel_job(job_id=4, kill=True)
        self.assertEqual(self.sent(), ("CancelJob", 4, True))

    def test_wait_timeout_is_capped(self):
        self.client.wait_for_job_change(7, ["status"], None, None)
        self.assertEqual(self.sent()[-1], luxi.WFJC_TIMEOUT)
        self.client.wait_for_job_change(7, ["status"], None, None, 600)
        self.assertEqual(self.sent()[-1], luxi.WFJC_TIMEOUT)
        self.client.wait_for_job_change(7, ["status"], None, None, 5)
        self.assertEqual(self.sent()[-1], 5)

    def test_opcodes_are_sent_as_dicts(self):
        op = opcodes.OpClusterQuery()
        self.client.submit_job([op, {"OP_ID": "OP_CLUSTER_VERIFY"}])
        (method, *args) = self.sent()
        raw = luxi.format_request(method, args)[:-1]
        (ops,) = luxi.decode_message(raw)["args"]
        self.assertEqual(ops, [op.to_dict(), {"OP_ID": "OP_CLUSTER_VERIFY"}])
