"""The event bus: numbering, ring buffer, resume, reset, filters, slow
subscribers cut off; configuration changes and job changes as events."""

from twisted.internet import task
from twisted.trial import unittest

from ganeti import events
from ganeti.config import changes
from ganeti.config.encoding import CLUSTER, MAINTENANCE


class Collector(object):
    def __init__(self):
        self.batches = []
        self.cut = None

    def deliver(self, batch):
        self.batches.append(list(batch))

    def on_cut(self, event):
        self.cut = event

    @property
    def events(self):
        return [e for b in self.batches for e in b]

    def seqs(self):
        return [e["seq"] for e in self.events]


def make_bus(size=5, queue_size=3, first_seq=100):
    clock = task.Clock()
    clock.advance(1000)
    return clock, events.EventBus(clock, size=size, first_seq=first_seq,
                                  queue_size=queue_size)


def publish(bus, n, kind=events.KIND_JOB, name="x"):
    return [bus.publish(kind, events.TYPE_STATUS, name=name, id=name,
                        data={"i": i}) for i in range(n)]


class BusTests(unittest.TestCase):

    def test_seq_increases_and_stamps_time(self):
        clock, bus = make_bus()
        first, second = publish(bus, 2)
        self.assertEqual((first["seq"], second["seq"]), (101, 102))
        self.assertEqual(first["time"], 1000)
        self.assertEqual(bus.head, 102)
        self.assertEqual(sorted(first), ["data", "id", "kind", "name", "seq",
                                         "time", "type"])

    def test_default_start_follows_the_clock(self):
        # numbers of a later start are higher than those of an earlier one
        clock = task.Clock()
        clock.advance(50)
        early = events.EventBus(clock)
        for _ in range(1000):
            early.publish(events.KIND_JOB, events.TYPE_LOG)
        clock.advance(1)
        late = events.EventBus(clock)
        self.assertGreater(late.publish(events.KIND_JOB,
                                        events.TYPE_LOG)["seq"], early.head)

    def test_ring_buffer_keeps_the_newest(self):
        clock, bus = make_bus(size=5)
        publish(bus, 8)
        self.assertEqual(len(bus), 5)
        self.assertEqual(bus.oldest, 104)

    def test_live_subscriber_gets_batches_per_turn(self):
        clock, bus = make_bus(queue_size=100)
        got = Collector()
        bus.subscribe(got.deliver, got.on_cut)
        publish(bus, 3)
        self.assertEqual(got.batches, [])       # not before the turn ends
        clock.advance(0)
        self.assertEqual(len(got.batches), 1)
        self.assertEqual(got.seqs(), [101, 102, 103])

    def test_resume_gets_everything_after(self):
        clock, bus = make_bus(size=5, queue_size=100)
        publish(bus, 4)
        got = Collector()
        bus.subscribe(got.deliver, got.on_cut, since=102)
        publish(bus, 1)
        clock.advance(0)
        self.assertEqual(got.seqs(), [103, 104, 105])

    def test_resume_at_head_gets_only_live(self):
        clock, bus = make_bus(queue_size=100)
        publish(bus, 2)
        got = Collector()
        bus.subscribe(got.deliver, got.on_cut, since=bus.head)
        clock.advance(0)
        self.assertEqual(got.events, [])
        publish(bus, 1)
        clock.advance(0)
        self.assertEqual(got.seqs(), [103])

    def test_resume_too_old_gets_reset_then_live(self):
        clock, bus = make_bus(size=3, queue_size=100)
        publish(bus, 6)                  # 101..106, 104..106 kept
        got = Collector()
        bus.subscribe(got.deliver, got.on_cut, since=101)
        publish(bus, 1)
        clock.advance(0)
        kinds = [(e["kind"], e["seq"]) for e in got.events]
        self.assertEqual(kinds, [("reset", 106), ("job", 107)])
        self.assertIn("list the objects again",
                      got.events[0]["data"]["reason"])

    def test_resume_from_an_earlier_daemon_is_reset(self):
        clock, bus = make_bus(size=10, queue_size=100)
        publish(bus, 2)
        got = Collector()
        bus.subscribe(got.deliver, got.on_cut, since=7)
        clock.advance(0)
        self.assertEqual([e["kind"] for e in got.events], ["reset"])

    def test_negative_since_gets_all_kept(self):
        clock, bus = make_bus(size=3, queue_size=100)
        publish(bus, 5)
        got = Collector()
        bus.subscribe(got.deliver, got.on_cut, since=-1)
        clock.advance(0)
        self.assertEqual(got.seqs(), [103, 104, 105])

    def test_filters_by_kind_and_name(self):
        clock, bus = make_bus(queue_size=100)
        jobs, named = Collector(), Collector()
        bus.subscribe(jobs.deliver, jobs.on_cut, kinds=["job"])
        bus.subscribe(named.deliver, named.on_cut, names=["inst1"])
        bus.publish("job", "status", name="7", id=7)
        bus.publish("instance", "created", name="inst1", id="uuid-1")
        bus.publish("instance", "created", name="inst2", id="uuid-2")
        bus.publish("tags", "modified", name="other", id="uuid-1")
        clock.advance(0)
        self.assertEqual([e["kind"] for e in jobs.events], ["job"])
        self.assertEqual([e["name"] for e in named.events], ["inst1"])
        # by id too
        by_id = Collector()
        bus.subscribe(by_id.deliver, by_id.on_cut, since=100,
                      names=["uuid-1", "7"])
        clock.advance(0)
        self.assertEqual([e["seq"] for e in by_id.events], [101, 102, 104])

    def test_bad_filter_names_the_field(self):
        clock, bus = make_bus()
        err = self.assertRaises(events.BadFilter, bus.subscribe,
                                lambda b: None, lambda e: None,
                                kinds=["job", "bogus"])
        self.assertIn("kind", str(err))
        self.assertIn("bogus", str(err))
        err = self.assertRaises(events.BadFilter, bus.subscribe,
                                lambda b: None, lambda e: None, since="3")
        self.assertIn("since", str(err))
        self.assertEqual(bus.subscriber_count, 0)

    def test_paused_subscriber_waits_then_gets_all(self):
        clock, bus = make_bus(queue_size=10)
        got = Collector()
        sub = bus.subscribe(got.deliver, got.on_cut)
        sub.pauseProducing()
        publish(bus, 4)
        clock.advance(0)
        self.assertEqual(got.events, [])
        sub.resumeProducing()
        self.assertEqual(got.seqs(), [101, 102, 103, 104])

    def test_overflow_cuts_off_with_reason(self):
        clock, bus = make_bus(size=100, queue_size=3)
        slow, fast = Collector(), Collector()
        sub = bus.subscribe(slow.deliver, slow.on_cut)
        bus.subscribe(fast.deliver, fast.on_cut)
        publish(bus, 1)
        clock.advance(0)
        sub.pauseProducing()
        publish(bus, 4)
        clock.advance(0)
        self.assertEqual(slow.seqs(), [101])
        self.assertEqual(slow.cut["kind"], "cut")
        self.assertIn("too slow", slow.cut["data"]["reason"])
        self.assertEqual(slow.cut["data"]["last_seq"], 101)
        self.assertTrue(sub.closed)
        self.assertEqual(bus.subscriber_count, 1)
        self.assertEqual(bus.cuts, 1)
        # the others go on, the master never waited
        self.assertEqual(fast.seqs(), [101, 102, 103, 104, 105])
        # resuming from the last event it got misses nothing
        again = Collector()
        bus.subscribe(again.deliver, again.on_cut, since=101)
        clock.advance(0)
        self.assertEqual(again.seqs(), [102, 103, 104, 105])

    def test_closed_subscriber_gets_nothing(self):
        clock, bus = make_bus(queue_size=100)
        got = Collector()
        sub = bus.subscribe(got.deliver, got.on_cut)
        publish(bus, 1)
        sub.close()
        clock.advance(0)
        publish(bus, 1)
        clock.advance(0)
        self.assertEqual(got.events, [])

    def test_mirror_and_restart(self):
        clock, bus = make_bus(first_seq=0, queue_size=100)
        got = Collector()
        bus.subscribe(got.deliver, got.on_cut)
        bus.mirror({"seq": 500, "kind": "job", "type": "status"})
        bus.mirror({"seq": 499, "kind": "job", "type": "status"})  # old
        bus.restart(900)
        clock.advance(0)
        self.assertEqual([(e["kind"], e["seq"]) for e in got.events],
                         [("job", 500), ("reset", 900)])
        self.assertEqual(len(bus), 0)

    def test_close_cuts_everybody(self):
        clock, bus = make_bus()
        got = Collector()
        bus.subscribe(got.deliver, got.on_cut)
        bus.close()
        self.assertIn("stopping", got.cut["data"]["reason"])


class ConfigChangeEventTests(unittest.TestCase):

    def test_created_removed_modified(self):
        found = changes.change_events("a change", [
            (("instances", "u1"), None, {"name": "i1", "uuid": "u1"}),
            (("nodes", "n1"), {"name": "node1", "uuid": "n1"}, None),
            (("nodegroups", "g1"), {"name": "g", "serial_no": 1,
                                    "ndparams": {}},
             {"name": "g", "serial_no": 2, "ndparams": {"a": 1}}),
        ])
        self.assertEqual([(k, t, n) for k, t, n, _, _ in found],
                         [("instance", "created", "i1"),
                          ("node", "removed", "node1"),
                          ("group", "modified", "g")])
        self.assertEqual(found[2][4]["fields"], ["ndparams"])

    def test_bookkeeping_only_is_no_event(self):
        self.assertEqual(changes.change_events("x", [
            (CLUSTER, {"cluster_name": "c", "serial_no": 1, "mtime": 1},
             {"cluster_name": "c", "serial_no": 2, "mtime": 2})]), [])

    def test_admin_state_and_tags(self):
        before = {"name": "i1", "admin_state": "down", "tags": ["a"],
                  "admin_state_source": "admin"}
        after = dict(before, admin_state="up", tags=["a", "b"])
        found = changes.change_events("x", [(("instances", "u1"), before,
                                             after)])
        self.assertEqual([(k, t) for k, t, _, _, _ in found],
                         [("instance", "state"), ("tags", "modified")])
        self.assertEqual(found[0][4]["admin_state"], "up")
        self.assertEqual(found[0][4]["previous"]["admin_state"], "down")
        self.assertEqual(found[1][4], {"kind": "instance", "added": ["b"],
                                       "removed": [], "tags": ["a", "b"]})

    def test_cluster_tags(self):
        found = changes.change_events("x", [(
            CLUSTER, {"cluster_name": "c", "tags": []},
            {"cluster_name": "c", "tags": ["t"]})])
        self.assertEqual(found, [("tags", "modified", "c", None,
                                  {"kind": "cluster", "added": ["t"],
                                   "removed": [], "tags": ["t"]})])

    def test_incident_repair_states(self):
        inc = {"node": "node2", "repair_status": "noted", "action": "ok"}
        found = changes.change_events("x", [
            (MAINTENANCE, {"incidents": {}}, {"incidents": {"i1": inc}})])
        self.assertEqual(found[0][:4], ("maintenance", "created", "node2",
                                        "i1"))
        moved = dict(inc, repair_status="pending")
        found = changes.change_events("x", [
            (MAINTENANCE, {"incidents": {"i1": inc}},
             {"incidents": {"i1": moved}})])
        self.assertEqual(found[0][1], "state")
        self.assertEqual(found[0][4]["repair_status"], "pending")
        self.assertEqual(found[0][4]["previous"],
                         {"repair_status": "noted"})


class LuxiEventStreamTests(unittest.TestCase):
    """WatchEvents' stream on a connection: batches as framed messages,
    a reader too slow (the transport paused it) cut off."""

    def setUp(self):
        from twisted.internet.testing import StringTransport
        from ganeti import luxi
        self.luxi = luxi
        self.clock, self.bus = make_bus(size=100, queue_size=3)
        self.transport = StringTransport()
        self.stream = luxi.EventStream(self.bus, since=None)
        self.assertEqual(self.stream.greeting(), {"head": 100,
                                                  "oldest": None})
        self.stream.start(self.transport)

    def messages(self):
        raw = self.transport.value().split(b"\x03")
        return [self.luxi.decode_message(m) for m in raw if m.strip()]

    def test_batches_framed(self):
        publish(self.bus, 2)
        self.clock.advance(0)
        (message,) = self.messages()
        self.assertEqual([e["seq"] for e in message["events"]], [101, 102])
        self.assertIs(self.transport.producer, self.stream.subscription)

    def test_slow_reader_cut_and_disconnected(self):
        self.transport.producer.pauseProducing()   # its buffer is full
        publish(self.bus, 4)
        self.clock.advance(0)
        (message,) = self.messages()
        (cut,) = message["events"]
        self.assertEqual(cut["kind"], "cut")
        self.assertIn("too slow", cut["data"]["reason"])
        self.assertTrue(self.transport.disconnecting)
        self.assertEqual(self.bus.subscriber_count, 0)

    def test_connection_lost_unsubscribes(self):
        self.stream.stop()
        self.assertEqual(self.bus.subscriber_count, 0)


class StoreChangeTests(unittest.TestCase):
    """The configuration store reports what each change did."""

    def setUp(self):
        from tests.test_config import make_store
        self.store = make_store(self)
        self.clock, self.bus = make_bus(size=100, queue_size=100)
        self.store.change_listeners.append(changes.publisher(self.bus))

    def test_tags_and_node_state(self):
        self.store.add_tags("cluster", None, ["owner:ops"])
        node = self.store.master_node
        self.store.set_node_params(node.name, drained=True)
        found = [(e["kind"], e["type"], e["name"]) for e in
                 self.bus.backlog(-1)[0]]
        self.assertEqual(found, [
            ("tags", "modified", "cluster.example.com"),
            ("node", "state", node.name)])
        self.assertEqual(self.bus.backlog(-1)[0][1]["data"],
                         {"drained": True, "previous": {"drained": False}})

    def test_refused_change_is_no_event(self):
        from ganeti import errors
        self.assertRaises(errors.GenericError, self.store.remove_tags,
                          "cluster", None, ["not-there"])
        self.assertEqual(len(self.bus), 0)
