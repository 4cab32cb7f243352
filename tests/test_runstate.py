"""Run-state events: an instance that stops running, or runs again, while
no job acts on it is an ``instance``/``state`` event with ``oper_state``
when the master next hears the nodes' hypervisors; what jobs do, and the
first sight of an instance, are no event.  The tracker fed by hand (the
cluster of tests.test_query), then in a real master (in this process)
whose node daemons are tests.test_cmdlib_instance's fakes."""

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from ganeti import constants
from ganeti import events
from ganeti import locking
from ganeti import objects
from ganeti import runstate
from ganeti.query.rpclive import RpcLiveData

from twisted.internet.task import Clock
from tests.test_query import N1, N2, N10, build_cluster, node_uuid, running

running_info = running

WEB1 = "web1.example.com"
WEB2 = "web2.example.com"      # drbd: primary N2, secondary N1
WEB10 = "web10.example.com"    # kvm with user_shutdown, in group2


class TrackerTests(unittest.TestCase):

    def setUp(self):
        self.clock = Clock()
        self.store = build_cluster(self)
        self.bus = events.EventBus(self.clock, first_seq=0)
        # instance locks are named by UUID (mcpu.make_lock_manager)
        self.locks = locking.LockSet(list(self.store.instances), "instance",
                                     self.clock)
        self.uuid = lambda n: self.store.get_instance(n).uuid  # noqa: E731
        self.tracker = runstate.RunStateTracker(self.bus, lambda: self.store,
                                                self.locks)
        u = self.u = lambda n: node_uuid(self.store, n)  # noqa: E731
        self.live = {
            u(N1): {WEB1: running()},
            u(N2): {WEB2: running()},
            u(N10): {WEB10: running()},
        }

    def observe(self, nodes=(N1, N2, N10), down=()):
        uuids = [self.u(n) for n in nodes]
        self.tracker.observe(uuids, {
            u: None if u in [self.u(d) for d in down]
            else dict(self.live.get(u, {})) for u in uuids})

    def published(self):
        return [(e["name"], e["data"]["oper_state"], e["data"]["status"],
                 e["data"]["previous"]["oper_state"])
                for e in self.bus.backlog(-1)[0]]

    def test_first_sight_is_no_event(self):
        self.observe()
        self.observe()
        self.assertEqual(self.published(), [])

    def test_crash_and_return(self):
        self.observe()
        del self.live[self.u(N1)][WEB1]          # the guest crashed
        self.observe()
        self.assertEqual(self.published(),
                         [(WEB1, False, constants.INSTST_ERRORDOWN, True)])
        (event,) = self.bus.backlog(-1)[0]
        self.assertEqual((event["kind"], event["type"], event["id"]),
                         ("instance", "state",
                          self.store.get_instance(WEB1).uuid))
        self.assertEqual(event["data"]["previous"]["status"],
                         constants.INSTST_RUNNING)
        self.assertIsNone(event["data"]["node"])
        self.observe()                           # no change: no event
        self.assertEqual(len(self.published()), 1)
        self.live[self.u(N1)][WEB1] = running()  # started from elsewhere
        self.observe()
        self.assertEqual(self.published()[-1],
                         (WEB1, True, constants.INSTST_RUNNING, False))
        self.assertEqual(self.bus.backlog(-1)[0][-1]["data"]["node"], N1)

    def test_guest_powering_itself_off(self):
        self.store.set_cluster_params(enabled_user_shutdown=True)
        self.observe()
        self.live[self.u(N10)][WEB10] = running(state="shutdown")
        self.observe()
        self.assertEqual(self.published(),
                         [(WEB10, False, constants.INSTST_USERDOWN, True)])

    def test_unanswered_nodes_are_not_observed(self):
        self.observe()
        del self.live[self.u(N1)][WEB1]
        # N1 did not answer: WEB1 (primary) and WEB2 (secondary) unseen
        self.observe(down=[N1])
        # only N2 asked: WEB2's secondary not asked, not seen either
        self.observe(nodes=[N2])
        self.assertEqual(self.published(), [])
        self.observe()
        self.assertEqual([e[0] for e in self.published()], [WEB1])

    def test_running_on_the_wrong_node_counts_as_running(self):
        self.observe()
        del self.live[self.u(N2)][WEB2]
        self.live[self.u(N1)][WEB2] = running()  # a failed migration
        self.observe()
        self.assertEqual(self.published(), [])
        del self.live[self.u(N1)][WEB2]
        self.observe()
        self.assertEqual(self.published(),
                         [(WEB2, False, constants.INSTST_ERRORDOWN, True)])

    def job(self, name, admin_state=None, running=None):
        """A job holding ``name``'s lock: it may set its admin state and
        start or stop it; looks while it runs see nothing."""
        owner = object()
        self.successResultOf(self.locks.acquire([self.uuid(name)], owner))
        if admin_state is not None:
            self.store.set_instance_admin_state(name, admin_state)
        node = self.u(self.store.get_node(
            self.store.get_instance(name).primary_node).name)
        if running is True:
            self.live[node][name] = running_info()
        elif running is False:
            self.live[node].pop(name, None)
        self.observe()                           # while it holds the lock
        self.locks.release(owner)

    def test_what_a_job_does_is_no_event(self):
        self.observe()
        self.job(WEB1, constants.ADMINST_DOWN, running=False)  # shutdown
        self.observe()
        self.job(WEB1, constants.ADMINST_UP, running=True)     # startup
        self.observe()
        self.job(WEB1, running=True)                           # reboot
        self.observe()
        self.assertEqual(self.published(), [])
        del self.live[self.u(N1)][WEB1]
        self.observe()                           # no job: an event
        self.assertEqual(self.published(),
                         [(WEB1, False, constants.INSTST_ERRORDOWN, True)])
        self.job(WEB1, running=True)             # the watcher's restart
        self.observe()
        self.assertEqual(len(self.published()), 1)

    def test_a_start_that_failed_is_no_event(self):
        self.store.set_instance_admin_state(WEB1, constants.ADMINST_DOWN)
        del self.live[self.u(N1)][WEB1]
        self.observe()
        self.job(WEB1, constants.ADMINST_UP)     # the guest did not start
        self.observe()
        self.assertEqual(self.published(), [])

    def test_a_crash_after_an_unrelated_job_is_an_event(self):
        self.observe()
        self.job(WEB1)                           # a tag change, say
        del self.live[self.u(N1)][WEB1]          # then the guest crashes
        self.observe()
        self.assertEqual(self.published(),
                         [(WEB1, False, constants.INSTST_ERRORDOWN, True)])

    def test_a_known_crash_is_not_told_again_after_a_job(self):
        self.observe()
        del self.live[self.u(N1)][WEB1]
        self.observe()
        self.job(WEB1)                           # a tag change
        self.observe()
        self.assertEqual(len(self.published()), 1)

    def test_shared_locks_do_not_hide_a_crash(self):
        self.observe()
        reader = object()
        self.successResultOf(self.locks.acquire([self.uuid(WEB1)], reader,
                                                shared=True))
        del self.live[self.u(N1)][WEB1]
        self.observe()
        self.locks.release(reader)
        self.assertEqual([e[0] for e in self.published()], [WEB1])

    def test_wanted_state_change_tells_what_was_meant(self):
        self.observe()
        self.store.set_instance_admin_state(WEB1, constants.ADMINST_DOWN)
        del self.live[self.u(N1)][WEB1]
        self.observe()
        self.assertEqual(self.published(), [])
        # wanted down, yet it runs again: an event
        self.live[self.u(N1)][WEB1] = running()
        self.observe()
        self.assertEqual(self.published(),
                         [(WEB1, True, constants.INSTST_ERRORUP, False)])

    def test_without_locks_only_the_wanted_state_tells(self):
        tracker = runstate.RunStateTracker(self.bus, lambda: self.store)
        tracker.observe([self.u(N1)], {self.u(N1): {WEB1: running()}})
        tracker.observe([self.u(N1)], {self.u(N1): {}})
        self.assertEqual([e[0] for e in self.published()], [WEB1])

    def test_removed_instances_are_forgotten(self):
        self.observe()
        uuid = self.uuid(WEB1)
        seen = set(self.tracker._seen)
        self.assertIn(uuid, seen)
        self.store.remove_instance(WEB1)
        self.observe()
        self.assertEqual(self.published(), [])
        self.assertEqual(set(self.tracker._seen), seen - {uuid})

    def test_a_failing_comparison_never_fails_the_query(self):
        self.tracker._get_cfg = lambda: 1 / 0
        self.observe()
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)


class _Result(object):
    def __init__(self, payload):
        self.success = payload is not None
        self.payload = payload


class _Rpc(object):
    def __init__(self, answers):
        self.answers = answers

    def call_many(self, nodes, procedure, args, timeout=None):
        return defer.succeed({n: _Result(self.answers.get(n))
                              for n in nodes})


class RpcLiveDataTests(unittest.TestCase):

    def test_every_instance_answer_is_observed(self):
        store = build_cluster(self)
        seen = []
        rpc = _Rpc({N1: {WEB1: {"state": "running"}}})
        provider = RpcLiveData(store, rpc, observer=lambda *a: seen.append(a))
        uuids = [node_uuid(store, N1), node_uuid(store, N2)]
        answer = self.successResultOf(provider.instances_runtime(uuids))
        self.assertEqual(seen, [(uuids, answer)])
        self.assertIsNone(answer[node_uuid(store, N2)])


# --- in a real master -------------------------------------------------------

NODE1 = "node1.example.com"
INST = "runstate1.example.com"


def prepare(store):
    node = store.get_node(NODE1).uuid
    store.add_instance(objects.Instance(
        name=INST, primary_node=node, hypervisor="fake",
        os="busybox+default", admin_state="down",
        beparams={"maxmem": 128, "minmem": 128, "vcpus": 1}), [])


class MasterRunStateTests(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        from tests.inprocess import start_master
        from tests.test_cmdlib_instance import InstanceRpc
        self.master, self.client = yield start_master(self, "runstate",
                                                      prepare=prepare)
        self.rpc = self.master.ctx.rpc = InstanceRpc()

    @defer.inlineCallbacks
    def run_job(self, op):
        job = yield self.client.call("SubmitJob", [op])
        for _ in range(400):
            [[status]] = yield self.client.call("QueryJobs", [job],
                                                ["status"])
            if status in ("success", "error", "canceled"):
                self.assertEqual(status, "success")
                return
            yield task.deferLater(reactor, 0.02, lambda: None)
        self.fail("job %s did not finish" % job)

    @defer.inlineCallbacks
    def look(self):
        """What the watcher does each pass: a query of fresh live data."""
        answer = yield self.client.call("QueryFresh", "instance",
                                        ["name", "oper_state"], None)
        return {r[0][1]: r[1][1] for r in answer["data"]}

    def run_state_events(self):
        return [(e["name"], e["data"]["oper_state"], e["data"]["status"])
                for e in self.master.events.backlog(-1)[0]
                if (e["kind"], e["type"]) == ("instance", "state")
                and "oper_state" in e["data"]]

    @defer.inlineCallbacks
    def test_crash_seen_by_the_next_look_and_restart_by_a_job(self):
        self.assertEqual((yield self.look())[INST], False)
        yield self.run_job({"OP_ID": "OP_INSTANCE_STARTUP",
                            "instance_name": INST})
        self.assertEqual((yield self.look())[INST], True)
        self.assertEqual(self.run_state_events(), [])
        # the guest crashes: the node no longer runs it
        self.rpc.domains.pop((NODE1, INST))
        self.assertEqual((yield self.look())[INST], False)
        self.assertEqual(self.run_state_events(),
                         [(INST, False, constants.INSTST_ERRORDOWN)])
        # the watcher's restart is a job: no event
        yield self.run_job({"OP_ID": "OP_INSTANCE_STARTUP",
                            "instance_name": INST})
        self.assertEqual((yield self.look())[INST], True)
        self.assertEqual(len(self.run_state_events()), 1)
        # a job stopping it is no event either
        yield self.run_job({"OP_ID": "OP_INSTANCE_SHUTDOWN",
                            "instance_name": INST})
        self.assertEqual((yield self.look())[INST], False)
        self.assertEqual(len(self.run_state_events()), 1)
