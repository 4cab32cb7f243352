"""The query layer: fields, live data, status, filters, old-style queries."""

import time

from twisted.internet import defer
from twisted.trial import unittest
from zope.interface import implementer
from zope.interface.verify import verifyObject

from ganeti import constants
from ganeti import errors
from ganeti import locking
from ganeti import query
from ganeti import user_shutdown
from ganeti.config import ConfigStore
from ganeti.objects import (Cluster, Disk, Instance, NIC, Network, Node,
                            NodeGroup)
from ganeti.query import (RS_NORMAL, RS_UNKNOWN, RS_NODATA, RS_UNAVAIL,
                          RS_OFFLINE, QueryContext, ILiveData)
from ganeti.query import live as qlive

from tests.test_config import make_store

N1 = "node1.example.com"
N2 = "node2.example.com"
N3 = "node3.example.com"    # offline
N4 = "node4.example.com"    # drained, not vm_capable
N10 = "node10.example.com"  # in group2


@implementer(ILiveData)
class FakeLive(object):
    """Answers from tables; records who was asked about what."""

    def __init__(self, instances=None, nodes=None, down=(), deferred=False):
        self.instances = instances or {}   # node uuid -> {name: info}
        self.nodes = nodes or {}           # node uuid -> stats
        self.down = set(down)
        self.deferred = deferred
        self.pending = []
        self.calls = []

    def _answer(self, table, node_uuids, what):
        self.calls.append((what, sorted(node_uuids)))
        answer = dict((u, None if u in self.down else table.get(u, {}))
                      for u in node_uuids)
        if self.deferred:
            d = defer.Deferred()
            self.pending.append((d, answer))
            return d
        return answer

    def instances_runtime(self, node_uuids):
        return self._answer(self.instances, node_uuids, "instances")

    def nodes_runtime(self, node_uuids):
        return self._answer(self.nodes, node_uuids, "nodes")

    def fire(self):
        pending, self.pending = self.pending, []
        for d, answer in pending:
            d.callback(answer)


def running(memory=128, vcpus=1, state="running"):
    return {"state": state, "memory": memory, "vcpus": vcpus}


def build_cluster(testcase):
    """A small cluster with one of most things."""
    store = make_store(testcase)
    store.add_nodegroup(NodeGroup(name="group2"))
    store.add_node(Node(name=N2, primary_ip="127.0.0.2"))
    store.add_node(Node(name=N10, primary_ip="127.0.0.10", group="group2"))
    store.add_node(Node(name=N3, primary_ip="127.0.0.3"))
    store.add_node(Node(name=N4, primary_ip="127.0.0.4",
                        master_candidate=False))
    store.set_node_params(N3, offline=True, master_candidate=False)
    store.set_node_params(N4, drained=True, vm_capable=False)
    net = Network(name="net1", network="192.0.2.0/29", gateway="192.0.2.1",
                  reservations="00100000", ext_reservations="11000001",
                  mac_prefix="aa:bb:cc")
    store.add_network(net)
    store.set_nodegroup_params("default", networks={
        net.uuid: {"mode": "bridged", "link": "br-net1"}})

    def add(name, node, disks=(), template="plain", nics=None, **kw):
        kw.setdefault("os", "debootstrap+default")
        kw.setdefault("hypervisor", "fake")
        kw.setdefault("beparams", {"maxmem": 256, "minmem": 128,
                                   "vcpus": 1})
        inst = Instance(name=name, primary_node=node,
                        nics=nics if nics is not None
                        else [NIC(mac=store.generate_mac())], **kw)
        dobjs = [Disk(dev_type=template, size=s, name="%s-d%d" % (name, i),
                      logical_id=["xenvg", "%s-%d" % (name, i)])
                 for i, s in enumerate(disks)]
        store.add_instance(inst, dobjs)
        return inst

    add("web1.example.com", N1, disks=[1024, 2048],
        admin_state=constants.ADMINST_UP, tags={"web", "prod"},
        nics=[NIC(mac="aa:bb:cc:00:00:01", ip="192.0.2.2",
                  network=net.uuid, name="eth0"),
              NIC(mac="aa:00:00:00:00:02",
                  nicparams={"mode": "routed", "link": "rt1"},
                  ip="10.0.0.5")])
    add("web2.example.com", N2, disks=[512], template="drbd",
        secondary_nodes=[N1], admin_state=constants.ADMINST_UP)
    add("web10.example.com", N10, admin_state=constants.ADMINST_UP,
        hypervisor="kvm", hvparams={"user_shutdown": True})
    add("db1.example.com", N3, disks=[100],
        admin_state=constants.ADMINST_UP)
    add("db2.example.com", N2, disks=[100])
    store.add_instance(Instance(forthcoming=True, primary_node=N2,
                                beparams={"maxmem": 512}),
                       [Disk(dev_type="plain", size=300)])
    add("reserved1.example.com", N1, forthcoming=True)
    return store


def node_uuid(store, name):
    return store.get_node(name).uuid


def standard_live(store, **kw):
    u = lambda n: node_uuid(store, n)  # noqa: E731
    return FakeLive(instances={
        u(N1): {"web1.example.com": running(1024, 2)},
        u(N2): {"web2.example.com": running(512, 1),
                "db2.example.com": running(100, 1, "shutdown")},
        u(N10): {"web10.example.com": running(128, 1, "paused")},
    }, nodes={
        u(N1): {"mtotal": 8192, "mnode": 1024, "mfree": 4096,
                "dtotal": 10240, "dfree": 5000, "ctotal": 8, "cnos": 1,
                "cnodes": 1, "csockets": 1, "spfree": 0, "sptotal": 0,
                "bootid": "b1"},
        u(N2): {"mtotal": "4096", "mfree": 2048},  # partial answer
    }, **kw)


class Base(unittest.TestCase):

    def setUp(self):
        self.store = build_cluster(self)
        self.live = standard_live(self.store)
        self.ctx = QueryContext(self.store, live=self.live)

    def q(self, what, fields, qfilter=None, ctx=None):
        d = (ctx or self.ctx).query(what, fields, qfilter)
        return self.successResultOf(d)

    def rows(self, what, fields, qfilter=None, ctx=None):
        return self.q(what, fields, qfilter, ctx)["data"]

    def values(self, what, fields, qfilter=None, ctx=None):
        """Rows as {first column value: [values]} (statuses checked)."""
        result = {}
        for row in self.rows(what, fields, qfilter, ctx):
            result[row[0][1]] = row
        return result

    def column(self, what, field, qfilter=None, key="name"):
        rows = self.rows(what, [key, field], qfilter)
        return dict((r[0][1], r[1]) for r in rows)


class FieldDefinitionTests(Base):

    def test_every_definition_is_well_formed(self):
        for what, resource in query.RESOURCES.items():
            names = set()
            for field in resource.fields:
                d = field.definition()
                self.assertEqual(sorted(d), ["doc", "kind", "name", "title"])
                self.assertIn(d["kind"], query.QFT_ALL - {query.QFT_UNKNOWN},
                              (what, field.name))
                self.assertTrue(d["title"] and d["doc"], (what, field.name))
                self.assertNotIn(field.name, names)
                names.add(field.name)

    def test_ganeti_field_names_present(self):
        want = {
            "instance": [
                "name", "uuid", "os", "pnode", "snodes", "pnode.group",
                "pnode.group.uuid", "admin_state", "admin_state_source",
                "admin_up", "oper_state", "status", "oper_ram", "oper_vcpus",
                "disk_template", "disk.count", "disk.sizes", "disk.size/0",
                "disk.size/15", "disk_usage", "disk.names", "disk.uuids",
                "disk.spindles", "nic.count", "nic.macs", "nic.ips",
                "nic.modes", "nic.links", "nic.networks", "nic.mac/0",
                "nic.ip/7", "nic.mode/0", "nic.link/0", "nic.uuids",
                "nic.names", "nic.bridges", "nic.networks.names",
                "hypervisor", "hvparams", "beparams", "osparams",
                "be/maxmem", "be/minmem", "be/vcpus", "be/auto_balance",
                "be/spindle_use", "be/always_failover", "be/memory",
                "hv/kernel_path", "hv/acpi", "hv/user_shutdown",
                "custom_hvparams", "custom_beparams", "custom_nicparams",
                "network_port", "tags", "ctime", "mtime", "serial_no",
                "forthcoming", "vcpus", "sda_size", "sdb_size", "ip", "mac",
                "bridge", "nic_mode", "nic_link", "nic_network"],
            "node": [
                "name", "uuid", "pip", "sip", "master", "master_candidate",
                "master_capable", "vm_capable", "offline", "drained", "role",
                "group", "group.uuid", "pinst_cnt", "sinst_cnt",
                "pinst_list", "sinst_list", "mtotal", "mnode", "mfree",
                "dtotal", "dfree", "ctotal", "cnos", "cnodes", "csockets",
                "spfree", "sptotal", "tags", "ctime", "mtime", "serial_no",
                "powered", "ndparams", "hv_state", "ndp/spindle_count",
                "ndp/exclusive_storage", "ndp/cpu_speed", "alloc.mem",
                "avail.mem", "forthcoming_cnt"],
            "group": [
                "name", "uuid", "alloc_policy", "node_cnt", "node_list",
                "pinst_cnt", "pinst_list", "ndparams", "diskparams",
                "ipolicy", "custom_ipolicy", "tags", "ctime", "mtime",
                "serial_no", "networks"],
            "network": [
                "name", "uuid", "network", "gateway", "network6", "gateway6",
                "mac_prefix", "free_count", "reserved_count", "map",
                "external_reservations", "group_list", "inst_list", "tags"],
            "lock": ["name", "mode", "owner", "pending"],
            "job": ["id", "status", "priority", "summary", "received_ts",
                    "start_ts", "end_ts", "ops", "opstatus", "opresult",
                    "oplog", "archived"],
            "cluster": ["name", "master_node", "software_version",
                        "drain_flag", "watcher_pause", "tags"],
        }
        for what, names in want.items():
            table = query.RESOURCES[what].fields
            missing = [n for n in names if n not in table]
            self.assertEqual(missing, [], what)

    def test_fields_rapi_and_htools_read(self):
        """Ganeti's RAPI bulk lists and htools (luxi) queries."""
        want = {
            "instance": (
                "name admin_state os pnode snodes disk_template nic.ips"
                " nic.macs nic.modes nic.uuids nic.names nic.links"
                " nic.networks nic.networks.names nic.bridges network_port"
                " disk.sizes disk.spindles disk_usage disk.uuids disk.names"
                " beparams hvparams oper_state oper_ram oper_vcpus status"
                " custom_hvparams custom_beparams custom_nicparams ctime"
                " mtime uuid serial_no tags be/memory be/vcpus"
                " be/auto_balance be/spindle_use forthcoming"),
            "node": (
                "name offline master_candidate drained dtotal dfree sptotal"
                " spfree mtotal mnode mfree pinst_cnt sinst_cnt ctotal cnos"
                " cnodes csockets pip sip role pinst_list sinst_list"
                " master_capable vm_capable ndparams group.uuid ctime mtime"
                " uuid serial_no tags ndp/spindle_count"
                " ndp/exclusive_storage ndp/cpu_speed"),
            "group": (
                "alloc_policy name node_cnt node_list ipolicy custom_ipolicy"
                " diskparams custom_diskparams ndparams custom_ndparams"
                " ctime mtime uuid serial_no tags"),
            "network": (
                "name network gateway network6 gateway6 mac_prefix"
                " free_count reserved_count map group_list inst_list"
                " external_reservations ctime mtime uuid serial_no tags"),
        }
        for what, names in want.items():
            table = query.RESOURCES[what].fields
            self.assertEqual([n for n in names.split() if n not in table],
                             [], what)

    def test_no_global_hypervisor_parameters(self):
        table = query.RESOURCES["instance"].fields
        for name in constants.HVC_GLOBALS:
            self.assertNotIn("hv/" + name, table)

    def test_aliases_keep_their_own_name(self):
        result = self.ctx.query_fields("instance", ["vcpus", "be/memory"])
        self.assertEqual([f["name"] for f in result["fields"]],
                         ["vcpus", "be/memory"])
        self.assertEqual(result["fields"][1]["kind"], "unit")

    def test_query_fields(self):
        result = self.ctx.query_fields("node", ["name", "mfree", "nosuch"])
        self.assertEqual(result["fields"], [
            {"name": "name", "title": "Node", "kind": "text",
             "doc": "Node name"},
            {"name": "mfree", "title": "MFree", "kind": "unit",
             "doc": "Memory free for instances (MiB)"},
            {"name": "nosuch", "title": "nosuch", "kind": "unknown",
             "doc": "Unknown field 'nosuch'"}])
        every = self.ctx.query_fields("node", None)["fields"]
        names = [f["name"] for f in every]
        self.assertEqual(len(names), len(query.RESOURCES["node"].fields))
        self.assertEqual(names, query.nice_sort(names))
        self.assertEqual(self.ctx.query_fields("node", [])["fields"], every)

    def test_unknown_resource(self):
        for what in ("nodes", "oses", None, 5):
            self.assertRaises(errors.OpPrereqError, self.ctx.query_fields,
                              what)
            f = self.failureResultOf(self.ctx.query(what, ["name"]),
                                     errors.OpPrereqError)
            self.assertIn("cannot be queried", str(f.value))

    def test_bad_field_lists(self):
        for fields in ("name", [1], None, ["name", None]):
            self.failureResultOf(self.ctx.query("node", fields),
                                 errors.OpPrereqError)


_KIND_CHECKS = {
    query.QFT_TEXT: lambda v: isinstance(v, str),
    query.QFT_BOOL: lambda v: isinstance(v, bool),
    query.QFT_NUMBER: lambda v: isinstance(v, int)
    and not isinstance(v, bool),
    query.QFT_UNIT: lambda v: isinstance(v, int) and not isinstance(v, bool),
    query.QFT_NUMBER_FLOAT: lambda v: isinstance(v, (int, float)),
    query.QFT_TIMESTAMP: lambda v: isinstance(v, (int, float)),
    query.QFT_OTHER: lambda v: True,
}


class FieldKindTests(Base):
    """Every field of every resource, queried: values fit their kind."""

    def all_fields(self, what, ctx=None):
        names = query.RESOURCES[what].fields.names()
        result = self.q(what, names, ctx=ctx)
        self.assertTrue(result["data"])
        seen = set()
        for row in result["data"]:
            self.assertEqual(len(row), len(names))
            for fdef, (status, value) in zip(result["fields"], row):
                self.assertIn(status, query.RS_ALL - {RS_UNKNOWN})
                if status == RS_NORMAL:
                    if value is not None:
                        self.assertTrue(_KIND_CHECKS[fdef["kind"]](value),
                                        (what, fdef["name"], value))
                    seen.add(fdef["kind"])
                else:
                    self.assertIsNone(value)
        return seen

    def test_instances(self):
        kinds = self.all_fields("instance")
        self.assertEqual(kinds, query.QFT_ALL - {query.QFT_UNKNOWN,
                                                 query.QFT_NUMBER_FLOAT})

    def test_nodes(self):
        kinds = self.all_fields("node")
        self.assertIn(query.QFT_NUMBER_FLOAT, kinds)
        self.assertIn(query.QFT_UNIT, kinds)

    def test_groups_networks_cluster(self):
        self.all_fields("group")
        self.all_fields("network")
        ctx = QueryContext(self.store, cluster_state=lambda: {
            "drain_flag": False, "watcher_pause": 1234.5})
        kinds = self.all_fields("cluster", ctx=ctx)
        self.assertIn(query.QFT_TIMESTAMP, kinds)
        self.assertIn(query.QFT_BOOL, kinds)

    def test_result_shape(self):
        result = self.q("node", ["name", "nosuch"])
        self.assertEqual(sorted(result), ["data", "fields"])
        self.assertEqual(result["data"][0],
                         [[RS_NORMAL, N1], [RS_UNKNOWN, None]])


class InstanceFieldTests(Base):

    def test_config_fields(self):
        fields = ["name", "os", "pnode", "snodes", "pnode.group",
                  "snodes.group", "admin_state", "admin_up",
                  "admin_state_source", "disk_template", "disk.count",
                  "disk.sizes", "disk.size/0", "disk.size/1", "disk.size/2",
                  "sda_size", "sdb_size", "disk_usage", "disk.names",
                  "disk.name/0", "hypervisor", "be/maxmem", "be/memory",
                  "vcpus", "be/auto_balance", "tags", "forthcoming",
                  "hv/user_shutdown", "custom_hvparams"]
        rows = self.values("instance", fields)
        self.assertEqual(rows["web1.example.com"], [[RS_NORMAL, v] for v in [
            "web1.example.com", "debootstrap+default", N1, [], "default", [],
            "up", True, "admin", "plain", 2, [1024, 2048], 1024, 2048]] +
            [[RS_UNAVAIL, None]] + [[RS_NORMAL, v] for v in [
                1024, 2048, 3072,
                ["web1.example.com-d0", "web1.example.com-d1"],
                "web1.example.com-d0", "fake", 256, 256, 1, True,
                ["prod", "web"], False]] +
            [[RS_UNAVAIL, None], [RS_NORMAL, {}]])
        web2 = dict(zip(fields, rows["web2.example.com"]))
        self.assertEqual(web2["snodes"], [RS_NORMAL, [N1]])
        self.assertEqual(web2["snodes.group"], [RS_NORMAL, ["default"]])
        self.assertEqual(web2["disk_template"], [RS_NORMAL, "drbd"])
        # DRBD disks take 128 MiB of metadata on each node
        self.assertEqual(web2["disk_usage"], [RS_NORMAL, 512 + 128])
        web10 = dict(zip(fields, rows["web10.example.com"]))
        self.assertEqual(web10["pnode.group"], [RS_NORMAL, "group2"])
        self.assertEqual(web10["disk_template"], [RS_NORMAL, "diskless"])
        self.assertEqual(web10["disk.sizes"], [RS_NORMAL, []])
        self.assertEqual(web10["disk_usage"], [RS_NORMAL, 0])
        self.assertEqual(web10["hv/user_shutdown"], [RS_NORMAL, True])
        self.assertEqual(web10["custom_hvparams"],
                         [RS_NORMAL, {"user_shutdown": True}])
        db2 = dict(zip(fields, rows["db2.example.com"]))
        self.assertEqual(db2["admin_state"], [RS_NORMAL, "down"])
        self.assertEqual(db2["admin_up"], [RS_NORMAL, False])

    def test_nic_fields(self):
        fields = ["name", "nic.count", "nic.macs", "nic.ips", "nic.modes",
                  "nic.links", "nic.bridges", "nic.networks",
                  "nic.networks.names", "nic.names", "nic.mac/0",
                  "nic.ip/1", "nic.mode/1", "nic.link/0", "nic.bridge/1",
                  "nic.network.name/0", "nic.network/1", "nic.mac/2", "ip",
                  "mac", "bridge", "nic_mode", "nic_link", "custom_nicparams"]
        row = self.values("instance", fields)["web1.example.com"]
        net = self.store.get_network("net1").uuid
        self.assertEqual(dict(zip(fields, row)), {
            "name": [0, "web1.example.com"],
            "nic.count": [0, 2],
            "nic.macs": [0, ["aa:bb:cc:00:00:01", "aa:00:00:00:00:02"]],
            "nic.ips": [0, ["192.0.2.2", "10.0.0.5"]],
            "nic.modes": [0, ["bridged", "routed"]],
            "nic.links": [0, ["br-net1", "rt1"]],   # link from the group
            "nic.bridges": [0, ["br-net1", None]],
            "nic.networks": [0, [net, None]],
            "nic.networks.names": [0, ["net1", None]],
            "nic.names": [0, ["eth0", None]],
            "nic.mac/0": [0, "aa:bb:cc:00:00:01"],
            "nic.ip/1": [0, "10.0.0.5"],
            "nic.mode/1": [0, "routed"],
            "nic.link/0": [0, "br-net1"],
            "nic.bridge/1": [RS_UNAVAIL, None],
            "nic.network.name/0": [0, "net1"],
            "nic.network/1": [RS_UNAVAIL, None],
            "nic.mac/2": [RS_UNAVAIL, None],
            "ip": [0, "192.0.2.2"],
            "mac": [0, "aa:bb:cc:00:00:01"],
            "bridge": [0, "br-net1"],
            "nic_mode": [0, "bridged"],
            "nic_link": [0, "br-net1"],
            "custom_nicparams": [0, [{}, {"mode": "routed", "link": "rt1"}]],
        })

    def test_params_are_filled(self):
        row = self.values("instance", ["name", "beparams", "hvparams",
                                       "osparams"])["web10.example.com"]
        self.assertEqual(row[1][1], {"maxmem": 256, "minmem": 128,
                                     "vcpus": 1, "auto_balance": True,
                                     "always_failover": False,
                                     "spindle_use": 1})
        self.assertEqual(row[2][1]["kernel_path"], "/boot/vmlinuz-3-kvmU")
        self.assertTrue(row[2][1]["user_shutdown"])
        self.assertNotIn("migration_port", row[2][1])  # global parameter
        self.assertEqual(row[3], [RS_NORMAL, {}])

    def test_filled_params_match_the_config_objects(self):
        from ganeti import objects
        self.store.set_cluster_params(os_hvp={"debootstrap": {
            "kvm": {"kernel_args": "quiet"}, "fake": {"x": 1}}})
        self.store.set_cluster_params(beparams={"default": {
            "maxmem": 1024, "minmem": 1024, "vcpus": 2,
            "auto_balance": True, "always_failover": True,
            "spindle_use": 1}})
        rows = self.values("instance", ["uuid", "hvparams", "beparams",
                                        "hv/kernel_args", "be/maxmem"])
        for inst in self.store.instances.values():
            row = rows[inst.uuid]
            self.assertEqual(row[1][1],
                             objects.fill_hvparams(self.store.cluster, inst))
            self.assertEqual(row[2][1],
                             objects.fill_beparams(self.store.cluster, inst))
        web10 = self.store.get_instance("web10.example.com").uuid
        self.assertEqual(rows[web10][3], [RS_NORMAL, "quiet"])
        self.assertEqual(rows[web10][4], [RS_NORMAL, 256])

    def test_results_are_copies(self):
        row = self.values("instance", ["name", "custom_beparams",
                                       "beparams"])["web1.example.com"]
        row[1][1]["maxmem"] = 1
        row[2][1]["maxmem"] = 1
        inst = self.store.get_instance("web1.example.com")
        self.assertEqual(inst.beparams["maxmem"], 256)
        row = self.values("instance", ["name", "beparams"])
        self.assertEqual(row["web1.example.com"][1][1]["maxmem"], 256)


class ForthcomingTests(Base):

    def test_unnamed_forthcoming_shows_uuid(self):
        fth = [i for i in self.store.instances.values()
               if i.forthcoming and not i.name][0]
        rows = self.values("instance", ["name", "uuid", "forthcoming",
                                        "pnode", "os", "be/maxmem",
                                        "disk.sizes", "status", "oper_state",
                                        "oper_ram"])
        self.assertEqual(rows[fth.uuid], [
            [RS_NORMAL, fth.uuid], [RS_NORMAL, fth.uuid], [RS_NORMAL, True],
            [RS_NORMAL, N2], [RS_UNAVAIL, None], [RS_NORMAL, 512],
            [RS_NORMAL, [300]], [RS_NORMAL, "ADMIN_down"],
            [RS_NORMAL, False], [RS_UNAVAIL, None]])
        named = rows["reserved1.example.com"]
        self.assertEqual(named[2], [RS_NORMAL, True])
        # Filter on them as htools do
        rows = self.rows("instance", ["name"], ["?", "forthcoming"])
        self.assertEqual(sorted(r[0][1] for r in rows),
                         sorted([fth.uuid, "reserved1.example.com"]))
        # and look one up by its uuid-name
        rows = self.rows("instance", ["forthcoming"], ["=", "name", fth.uuid])
        self.assertEqual(rows, [[[RS_NORMAL, True]]])

    def test_forthcoming_on_unreachable_node_is_not_nodedown(self):
        self.live.down.add(node_uuid(self.store, N2))
        status = self.column("instance", "status")
        self.assertEqual(status["reserved1.example.com"],
                         [RS_NORMAL, "ADMIN_down"])
        self.assertEqual(status["db2.example.com"],
                         [RS_NORMAL, "ERROR_nodedown"])
        # Nodes are never asked about forthcoming instances alone
        self.live.calls[:] = []
        self.rows("instance", ["status"], ["?", "forthcoming"])
        self.assertEqual(self.live.calls, [])

    def test_reservations_are_visible_on_nodes(self):
        fth = [i for i in self.store.instances.values()
               if i.forthcoming and not i.name][0]
        rows = self.values("node", ["name", "alloc.mem", "alloc.disk",
                                    "alloc.vcpus", "alloc.spindles",
                                    "forthcoming_cnt", "forthcoming_list"])
        # node2: web2 (256) + db2 (256) + forthcoming (512)
        self.assertEqual([v for _, v in rows[N2][1:]], [
            1024, 512 + 128 + 100 + 300, 3, 3, 1, [fth.uuid]])
        self.assertEqual(rows[N1][5:], [[RS_NORMAL, 1],
                                        [RS_NORMAL,
                                         ["reserved1.example.com"]]])

    def test_available_is_reported_minus_reserved(self):
        fields = ["name", "mfree", "reserved.mem", "avail.mem", "dfree",
                  "reserved.disk", "avail.disk", "avail.vcpus"]
        rows = self.values("node", fields)
        # node1 reports 4096 MiB free; web1 runs (in that figure already),
        # reserved1 (forthcoming, 256) does not: 3840 left.  5000 MiB of
        # disk, 8 CPUs * 4.0 - 1 for the node - 2 vCPUs of its instances
        self.assertEqual([v for _, v in rows[N1][1:]],
                         [4096, 256, 3840, 5000, 0, 5000, 29])
        # node2: db2 is shut down (may start) and the forthcoming one: 768
        # reserved; its disks are not reported, neither are its CPUs
        self.assertEqual(rows[N2][1:], [
            [RS_NORMAL, 2048], [RS_NORMAL, 768], [RS_NORMAL, 1280],
            [RS_UNAVAIL, None], [RS_NORMAL, 300], [RS_UNAVAIL, None],
            [RS_UNAVAIL, None]])
        # offline and not vm_capable: nothing to admit against
        self.assertEqual(rows[N3][3], [RS_OFFLINE, None])
        self.assertEqual(rows[N4][3], [RS_UNAVAIL, None])
        # both the nodes and their hypervisors were asked
        self.assertEqual(sorted(what for what, _ in self.live.calls),
                         ["instances", "nodes"])

    def test_available_equals_what_the_master_admits(self):
        """The avail.* a node query reports is what an instance may take:
        that much fits, one MiB more does not."""
        n1 = self.store.get_node(N1).uuid
        avail = self.column("node", "avail.mem")[N1][1]
        res = {n1: self.store.node_resources(
            n1, live=self.live.nodes[n1],
            hv_instances=self.live.instances[n1])}
        for memory, fits in ((avail, True), (avail + 1, False)):
            inst = Instance(name="new", primary_node=n1,
                            beparams={"maxmem": memory, "vcpus": 1})
            if fits:
                self.store.check_instance_fits(inst, res)
            else:
                self.assertRaises(errors.OpPrereqError,
                                  self.store.check_instance_fits, inst, res)

    def test_allocation_agrees_with_config_node_usage(self):
        rows = self.values("node", ["uuid", "alloc.mem", "alloc.disk",
                                    "alloc.vcpus", "alloc.spindles",
                                    "forthcoming_cnt"])
        for uuid in self.store.nodes:
            usage = self.store.node_usage(uuid)
            self.assertEqual([v for _, v in rows[uuid][1:]],
                             [usage.memory, usage.disk, usage.vcpus,
                              usage.spindles, len(usage.forthcoming)])


class StatusTests(unittest.TestCase):
    """Ganeti's instance status table, one instance per case."""

    # name, admin_state, source, hypervisor, hvparams, live answer,
    # enabled_user_shutdown, expected
    CASES = [
        ("run", "up", "admin", "fake", {}, ("p", "running"), False,
         "running"),
        ("paused", "up", "admin", "fake", {}, ("p", "paused"), False,
         "running"),
        ("errup", "down", "admin", "fake", {}, ("p", "running"), False,
         "ERROR_up"),
        ("errup-off", "offline", "admin", "fake", {}, ("p", "running"),
         False, "ERROR_up"),
        ("errdown", "up", "admin", "fake", {}, None, False, "ERROR_down"),
        ("crashed", "up", "admin", "fake", {}, ("p", "crashed"), False,
         "ERROR_down"),
        ("crashed-down", "down", "admin", "fake", {}, ("p", "crashed"),
         False, "ADMIN_down"),
        ("admindown", "down", "admin", "fake", {}, None, True, "ADMIN_down"),
        ("userdown", "down", "user", "fake", {}, None, True, "USER_down"),
        ("userdown-off", "down", "user", "fake", {}, None, False,
         "ADMIN_down"),
        ("adminoffline", "offline", "admin", "fake", {}, None, True,
         "ADMIN_offline"),
        ("sd-fake", "up", "admin", "fake", {}, ("p", "shutdown"), True,
         "USER_down"),
        ("sd-fake-off", "up", "admin", "fake", {}, ("p", "shutdown"), False,
         "ERROR_down"),
        ("sd-kvm", "up", "admin", "kvm", {}, ("p", "shutdown"), True,
         "USER_down"),
        ("sd-kvm-restart", "up", "admin", "kvm", {"user_shutdown": False},
         ("p", "shutdown"), True, "ERROR_down"),
        ("sd-kvm-us", "up", "admin", "kvm", {"user_shutdown": True},
         ("p", "shutdown"), True, "USER_down"),
        ("sd-kvm-us-off", "up", "admin", "kvm", {"user_shutdown": True},
         ("p", "shutdown"), False, "ERROR_down"),
        ("sd-down", "down", "admin", "fake", {}, ("p", "shutdown"), True,
         "ADMIN_down"),
        ("sd-offline", "offline", "admin", "fake", {}, ("p", "shutdown"),
         True, "ADMIN_down"),
        ("wrongnode", "up", "admin", "fake", {}, ("s", "running"), False,
         "ERROR_wrongnode"),
        ("wrong-paused", "down", "admin", "fake", {}, ("s", "paused"), False,
         "ERROR_wrongnode"),
        ("both", "up", "admin", "fake", {}, ("ps", "running"), False,
         "running"),
        ("crashed-wrong", "up", "admin", "fake", {}, ("crash+s", "running"),
         False, "ERROR_wrongnode"),
        ("secondary-shutdown", "up", "admin", "fake", {}, ("s", "shutdown"),
         False, "ERROR_down"),
        ("nodeoffline", "up", "admin", "fake", {}, "offline", False,
         "ERROR_nodeoffline"),
        ("nodeoffline-down", "down", "user", "fake", {}, "offline", True,
         "ERROR_nodeoffline"),
        ("nodedown", "up", "admin", "fake", {}, "down", False,
         "ERROR_nodedown"),
        ("nodedown-offline", "offline", "admin", "fake", {}, "down", False,
         "ERROR_nodedown"),
    ]

    def build(self):
        store = make_store(self)
        self.nodes = {}
        live = FakeLive()
        uuid_of = {}
        for case in self.CASES:
            name, admin, source, hv, hvp, answer, _eus, _exp = case
            # Every case gets its own primary and secondary node, so node
            # states do not interfere.
            pname = "p-%s.example.com" % name
            sname = "s-%s.example.com" % name
            ip = len(uuid_of) + 2
            puuid = store.add_node(Node(name=pname,
                                        primary_ip="127.0.1.%d" % ip))
            suuid = store.add_node(Node(name=sname,
                                        primary_ip="127.0.2.%d" % ip))
            uuid_of[name] = (puuid, suuid)
            inst = Instance(name=name, primary_node=puuid,
                            secondary_nodes=[suuid],
                            os="debootstrap+default", hypervisor=hv,
                            hvparams=hvp, admin_state=admin,
                            admin_state_source=source,
                            nics=[NIC(mac=store.generate_mac())])
            store.add_instance(inst)
            live.instances[puuid] = {}
            live.instances[suuid] = {}
            if answer == "offline":
                store.set_node_params(pname, offline=True,
                                      master_candidate=False)
            elif answer == "down":
                live.down.add(puuid)
            elif answer:
                where, state = answer
                if "p" in where:
                    live.instances[puuid][name] = running(state=state)
                if "crash" in where:
                    live.instances[puuid][name] = running(state="crashed")
                if "s" in where:
                    live.instances[suuid][name] = running(state=state)
        return store, live

    def test_status_table(self):
        store, live = self.build()
        covered = set()
        for eus in (False, True):
            store.set_cluster_params(enabled_user_shutdown=eus)
            ctx = QueryContext(store, live=live)
            result = self.successResultOf(ctx.query("instance",
                                                    ["name", "status"]))
            status = dict((r[0][1], r[1]) for r in result["data"])
            for name, _a, _s, _h, _p, _l, case_eus, expected in self.CASES:
                if case_eus != eus:
                    continue
                self.assertEqual(status[name], [RS_NORMAL, expected], name)
                covered.add(expected)
        self.assertEqual(covered, constants.INSTST_ALL)

    def test_oper_state_and_memory(self):
        store, live = self.build()
        ctx = QueryContext(store, live=live)
        result = self.successResultOf(ctx.query(
            "instance", ["name", "oper_state", "oper_ram", "oper_vcpus"]))
        rows = dict((r[0][1], r[1:]) for r in result["data"])
        normal = lambda *v: [[RS_NORMAL, x] for x in v]  # noqa: E731
        self.assertEqual(rows["run"], normal(True, 128, 1))
        self.assertEqual(rows["paused"], normal(True, 128, 1))
        self.assertEqual(rows["errdown"],
                         normal(False) + [[RS_UNAVAIL, None]] * 2)
        self.assertEqual(rows["crashed"],
                         normal(False) + [[RS_UNAVAIL, None]] * 2)
        # The domain is kept after a guest poweroff: not running, but its
        # figures are still reported.
        self.assertEqual(rows["sd-fake"], normal(False, 128, 1))
        self.assertEqual(rows["wrongnode"], normal(True, 128, 1))
        self.assertEqual(rows["nodeoffline"], [[RS_NODATA, None],
                                               [RS_OFFLINE, None],
                                               [RS_OFFLINE, None]])
        self.assertEqual(rows["nodedown"], [[RS_NODATA, None]] * 3)

    def test_oper_hvstate_shows_kept_domains(self):
        # what the watcher looks at to clean up a kept domain
        store, live = self.build()
        ctx = QueryContext(store, live=live)
        result = self.successResultOf(ctx.query(
            "instance", ["name", "oper_hvstate"]))
        rows = dict((r[0][1], r[1]) for r in result["data"])
        self.assertEqual(rows["run"], [RS_NORMAL, "running"])
        self.assertEqual(rows["paused"], [RS_NORMAL, "paused"])
        self.assertEqual(rows["crashed-down"], [RS_NORMAL, "crashed"])
        self.assertEqual(rows["sd-down"], [RS_NORMAL, "shutdown"])
        self.assertEqual(rows["sd-fake"], [RS_NORMAL, "shutdown"])
        self.assertEqual(rows["errdown"], [RS_NORMAL, None])
        # only the primary node's hypervisor counts
        self.assertEqual(rows["wrongnode"], [RS_NORMAL, None])
        self.assertEqual(rows["nodeoffline"], [RS_OFFLINE, None])
        self.assertEqual(rows["nodedown"], [RS_NODATA, None])

    def test_status_functions_directly(self):
        cluster = Cluster(enabled_user_shutdown=True,
                          default_hypervisor="kvm")
        inst = Instance(name="i", primary_node="p", hypervisor="kvm",
                        admin_state="up")
        # on by default: a poweroff follows the user's will
        self.assertTrue(user_shutdown.allowed(cluster, inst))
        inst.hvparams = {"user_shutdown": False}
        self.assertFalse(user_shutdown.allowed(cluster, inst))
        inst.hvparams = {"user_shutdown": True}
        self.assertTrue(user_shutdown.allowed(cluster, inst))
        self.assertEqual(qlive.instance_status(
            cluster, inst, qlive.WHERE_PRIMARY, {"state": "shutdown"}),
            constants.INSTST_USERDOWN)
        where = qlive.locate_instance(inst, lambda u: False, set(),
                                      {"p": {"i": {"state": "crashed"}},
                                       "q": {"i": {"state": "shutdown"}}})
        self.assertEqual(where, (qlive.WHERE_DEAD, None))


class LiveDataTests(Base):

    def test_config_only_queries_ask_nobody_and_complete_now(self):
        live = standard_live(self.store, deferred=True)
        ctx = QueryContext(self.store, live=live)
        for what, fields in [("instance", ["name", "pnode", "be/maxmem",
                                           "disk.sizes", "tags"]),
                             ("node", ["name", "pinst_cnt", "role",
                                       "alloc.mem"]),
                             ("group", ["name", "node_list"]),
                             ("network", ["name", "free_count"])]:
            prepared = ctx.prepare(what, fields, ["!", ["?", "tags"]])
            self.assertFalse(prepared.needs_live)
            d = prepared.execute()
            self.assertTrue(d.called, what)
            self.successResultOf(d)
            prepared.execute_sync()
        self.assertEqual(live.calls, [])

    def test_live_query_waits_for_the_provider(self):
        live = standard_live(self.store, deferred=True)
        ctx = QueryContext(self.store, live=live)
        prepared = ctx.prepare("instance", ["name", "status"])
        self.assertTrue(prepared.needs_live)
        self.assertRaises(errors.ProgrammerError, prepared.execute_sync)
        d = prepared.execute()
        self.assertNoResult(d)
        live.fire()
        status = dict((r[0][1], r[1][1]) for r in self.successResultOf(d)
                      ["data"])
        self.assertEqual(status["web1.example.com"], "running")
        self.assertEqual(status["web2.example.com"], "running")
        self.assertEqual(status["web10.example.com"], "running")
        self.assertEqual(status["db1.example.com"], "ERROR_nodeoffline")
        self.assertEqual(status["db2.example.com"], "ADMIN_down")

    def test_only_needed_nodes_are_asked(self):
        u = lambda n: node_uuid(self.store, n)  # noqa: E731
        self.rows("instance", ["status"])
        # every node with a (non-forthcoming) instance, offline node3 not
        self.assertEqual(self.live.calls, [
            ("instances", sorted([u(N1), u(N2), u(N10)]))])
        del self.live.calls[:]
        self.rows("instance", ["name", "oper_ram"],
                  ["=", "name", "web10.example.com"])
        self.assertEqual(self.live.calls, [("instances", [u(N10)])])
        del self.live.calls[:]
        # A filter on config fields narrows the nodes before asking ...
        rows = self.rows("instance", ["name"],
                         ["&", ["=", "pnode", N10],
                          ["=", "status", "running"]])
        self.assertEqual(rows, [[[RS_NORMAL, "web10.example.com"]]])
        self.assertEqual(self.live.calls, [("instances", [u(N10)])])
        del self.live.calls[:]
        # ... and a filter on a live field is enough to ask.
        rows = self.rows("instance", ["name"], ["=", "status", "ADMIN_down"])
        self.assertEqual(len(self.live.calls), 1)
        self.assertEqual(sorted(r[0][1] for r in rows), sorted(
            ["db2.example.com", "reserved1.example.com",
             [i.uuid for i in self.store.instances.values()
              if not i.name][0]]))
        # Nodes: offline and non-vm-capable ones are not asked
        del self.live.calls[:]
        self.rows("node", ["mfree"])
        self.assertEqual(self.live.calls, [
            ("nodes", sorted([u(N1), u(N2), u(N10)]))])

    def test_node_live_fields(self):
        self.live.down.add(node_uuid(self.store, N10))
        fields = ["name", "mtotal", "mnode", "mfree", "dtotal", "dfree",
                  "ctotal", "cnos", "bootid"]
        rows = self.values("node", fields)
        self.assertEqual(rows[N1][1:], [[RS_NORMAL, v] for v in [
            8192, 1024, 4096, 10240, 5000, 8, 1, "b1"]])
        # partial answer; strings of digits become numbers
        self.assertEqual(rows[N2][1:4], [[RS_NORMAL, 4096],
                                         [RS_UNAVAIL, None],
                                         [RS_NORMAL, 2048]])
        self.assertEqual(rows[N10][1:], [[RS_NODATA, None]] * 8)
        self.assertEqual(rows[N3][1:], [[RS_OFFLINE, None]] * 8)
        self.assertEqual(rows[N4][1:], [[RS_UNAVAIL, None]] * 8)
        # old style: all of these are None
        old = self.successResultOf(self.ctx.old_style("node", [N3, N10],
                                                      ["name", "mfree"]))
        self.assertEqual(old, [[N3, None], [N10, None]])

    def test_instance_live_fields_propagate_node_state(self):
        self.live.down.add(node_uuid(self.store, N2))
        rows = self.values("instance", ["name", "oper_state", "oper_ram",
                                        "oper_vcpus", "status"])
        self.assertEqual(rows["web2.example.com"][1:], [
            [RS_NODATA, None], [RS_NODATA, None], [RS_NODATA, None],
            [RS_NORMAL, "ERROR_nodedown"]])
        self.assertEqual(rows["db1.example.com"][1:], [
            [RS_NODATA, None], [RS_OFFLINE, None], [RS_OFFLINE, None],
            [RS_NORMAL, "ERROR_nodeoffline"]])
        self.assertEqual(rows["web1.example.com"][1:], [
            [RS_NORMAL, True], [RS_NORMAL, 1024], [RS_NORMAL, 2],
            [RS_NORMAL, "running"]])

    def test_no_provider_means_no_data(self):
        ctx = QueryContext(self.store)
        rows = self.values("instance", ["name", "status", "oper_ram"],
                           ctx=ctx)
        self.assertEqual(rows["web1.example.com"][1:],
                         [[RS_NORMAL, "ERROR_nodedown"], [RS_NODATA, None]])
        rows = self.values("node", ["name", "mfree"], ctx=ctx)
        self.assertEqual(rows[N1][1], [RS_NODATA, None])
        self.assertEqual(rows[N3][1], [RS_OFFLINE, None])

    def test_failing_provider_means_nodes_down(self):
        class Broken(FakeLive):
            def instances_runtime(self, node_uuids):
                raise RuntimeError("rpc layer exploded")

            def nodes_runtime(self, node_uuids):
                return defer.fail(RuntimeError("no answer"))
        ctx = QueryContext(self.store, live=Broken())
        rows = self.values("instance", ["name", "status"], ctx=ctx)
        self.assertEqual(rows["web1.example.com"][1],
                         [RS_NORMAL, "ERROR_nodedown"])
        rows = self.values("node", ["name", "mfree"], ctx=ctx)
        self.assertEqual(rows[N1][1], [RS_NODATA, None])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 2)

    def test_malformed_answers(self):
        u = lambda n: node_uuid(self.store, n)  # noqa: E731
        live = FakeLive(instances={u(N1): "garbage"},
                        nodes={u(N1): ValueError("x")})
        ctx = QueryContext(self.store, live=live)
        rows = self.values("instance", ["name", "status"], ctx=ctx)
        self.assertEqual(rows["web1.example.com"][1],
                         [RS_NORMAL, "ERROR_nodedown"])
        rows = self.values("node", ["name", "mfree"], ctx=ctx)
        self.assertEqual(rows[N1][1], [RS_NODATA, None])

    def test_fake_provider_provides_the_interface(self):
        self.assertTrue(verifyObject(ILiveData, FakeLive()))


class FilterTests(Base):

    def names(self, what, qfilter):
        return [r[0][1] for r in self.rows(what, ["name"], qfilter)]

    def test_regex(self):
        self.assertEqual(self.names("instance", ["=~", "name", "^web"]),
                         ["web1.example.com", "web2.example.com",
                          "web10.example.com"])
        self.assertEqual(self.names("node", ["=~", "name", "^node1"]),
                         [N1, N10])

    def test_negation_and_truth(self):
        self.assertEqual(self.names("node", ["!", ["?", "vm_capable"]]), [N4])
        self.assertEqual(self.names("node", ["&", ["?", "master_candidate"],
                                             ["!", ["?", "master"]]]),
                         [N2, N10])

    def test_contains(self):
        self.assertEqual(self.names("instance", ["=[]", "tags", "web"]),
                         ["web1.example.com"])
        self.assertEqual(self.names("node", ["=[]", "pinst_list",
                                             "web2.example.com"]), [N2])
        self.assertEqual(self.names("node", ["=[]", "sinst_list",
                                             "web2.example.com"]), [N1])

    def test_comparisons(self):
        self.assertEqual(self.names("instance", [">", "disk_usage", 500]),
                         ["web1.example.com", "web2.example.com"])
        self.assertEqual(self.names("node", ["<", "pinst_cnt", 1]),
                         [N4])
        self.assertEqual(self.names("node", [">=", "mfree", 2048]), [N1, N2])
        self.assertEqual(self.names("group", ["<=", "node_cnt", 1]),
                         ["group2"])

    def test_short_host_names(self):
        self.assertEqual(self.names("node", ["=", "name", "node1"]), [N1])
        self.assertEqual(self.names("instance", ["|", ["=", "name", "web2"],
                                                 ["=", "name", "db1"]]),
                         ["db1.example.com", "web2.example.com"])

    def test_bad_filters(self):
        for qfilter, words in [
                (["=", "nosuch", 1], ["nosuch"]),
                (["=", "pinst_cnt", "x"], ["pinst_cnt", "integer"]),
                (["=~", "name", "("], ["regular expression"]),
                (["xx", "name", "a"], ["xx"]),
                ("name", ["list"])]:
            f = self.failureResultOf(self.ctx.query("node", ["name"],
                                                    qfilter),
                                     errors.QueryFilterParseError)
            for word in words:
                self.assertIn(word, str(f.value))

    def test_name_filter_looks_names_up(self):
        prepared = self.ctx.prepare("instance", ["name"],
                                    ["|", ["=", "name", "web2"],
                                     ["=", "name", "db1.example.com"]])
        self.assertEqual(prepared.names, ["web2", "db1.example.com"])
        # unknown names are an error naming them, as in Ganeti
        f = self.failureResultOf(self.ctx.query(
            "instance", ["name"], ["|", ["=", "name", "web2"],
                                   ["=", "name", "nosuch"],
                                   ["=", "name", "nope"]]),
            errors.OpPrereqError)
        self.assertIn("nosuch, nope", str(f.value))
        self.assertEqual(f.value.args[1], errors.ECODE_NOENT)

    def test_text_filter_end_to_end(self):
        from ganeti import qlang
        qfilter = qlang.parse_filter(
            'name =~ /^web/ and not "prod" in tags and status == "running"')
        self.assertEqual(self.names("instance", qfilter),
                         ["web2.example.com", "web10.example.com"])

    def test_sorting_is_natural(self):
        self.assertEqual(self.names("node", None), [N1, N2, N3, N4, N10])
        names = [r[0][1] for r in self.rows("instance", ["name"],
                                            ["?", "admin_up"])]
        self.assertEqual(names, ["db1.example.com", "web1.example.com",
                                 "web2.example.com", "web10.example.com"])
        # rows asked for by name still come sorted
        self.assertEqual(self.names("node", ["|", ["=", "name", N10],
                                             ["=", "name", N2]]), [N2, N10])


class OtherResourceTests(Base):

    def test_groups(self):
        rows = self.values("group", ["name", "node_cnt", "node_list",
                                     "pinst_cnt", "pinst_list",
                                     "alloc_policy", "networks",
                                     "ndp/spindle_count", "diskparams"])
        fth = [i.uuid for i in self.store.instances.values()
               if not i.name][0]
        default = rows["default"]
        self.assertEqual(default[1:7], [[RS_NORMAL, v] for v in [
            4, [N1, N2, N3, N4], 6,
            query.nice_sort(["web1.example.com", "web2.example.com",
                             "db1.example.com", "db2.example.com",
                             "reserved1.example.com", fth]),
            "preferred", [["net1", "bridged", "br-net1"]]]])
        self.assertEqual(default[7], [RS_NORMAL, 1])
        self.assertEqual(default[8][1]["drbd"]["protocol"], "C")
        self.assertEqual(rows["group2"][1:3], [[RS_NORMAL, 1],
                                               [RS_NORMAL, [N10]]])

    def test_networks(self):
        rows = self.values("network", ["name", "network", "gateway",
                                       "free_count", "reserved_count", "map",
                                       "external_reservations", "group_list",
                                       "inst_list", "inst_cnt", "network6"])
        self.assertEqual(rows["net1"][1:], [[RS_NORMAL, v] for v in [
            "192.0.2.0/29", "192.0.2.1", 4, 4, "XXX....X",
            "192.0.2.0, 192.0.2.1, 192.0.2.7",
            [["default", "bridged", "br-net1", ""]], ["web1.example.com"], 1,
            None]])

    def test_cluster(self):
        ctx = QueryContext(self.store, cluster_state=lambda: {
            "drain_flag": True, "watcher_pause": None})
        rows = self.rows("cluster", ["name", "master_node", "drain_flag",
                                     "watcher_pause", "config_version"],
                         ctx=ctx)
        self.assertEqual(rows, [[[RS_NORMAL, "cluster.example.com"],
                                 [RS_NORMAL, N1], [RS_NORMAL, True],
                                 [RS_UNAVAIL, None],
                                 [RS_NORMAL, constants.CONFIG_VERSION]]])
        rows = self.rows("cluster", ["drain_flag"])
        self.assertEqual(rows, [[[RS_UNAVAIL, None]]])

    def test_locks_from_a_lock_manager(self):
        lm = locking.LockManager(
            node_uuids=[node_uuid(self.store, N1)],
            instance_names=["web1.example.com", "web2.example.com",
                            "web10.example.com"])
        self.successResultOf(lm.acquire(locking.LEVEL_CLUSTER, ["BGL"],
                                        "job/12", shared=True))
        self.successResultOf(lm.acquire(locking.LEVEL_CLUSTER, ["BGL"],
                                        "job/3", shared=True))
        self.successResultOf(lm.acquire(locking.LEVEL_INSTANCE,
                                        ["web2.example.com"], "job/12"))
        waiting = lm.acquire(locking.LEVEL_INSTANCE, ["web2.example.com"],
                             "job/3", shared=True)
        self.assertNoResult(waiting)
        ctx = QueryContext(self.store, locks=lm)
        self.assertTrue(ctx.prepare("lock", ["name"]).needs_live)
        result = self.q("lock", ["name", "mode", "owner", "pending"],
                        ctx=ctx)
        rows = dict((r[0][1], [v for _, v in r[1:]]) for r in result["data"])
        self.assertEqual(rows["cluster/BGL"],
                         ["shared", ["job/3", "job/12"], None])
        self.assertEqual(rows["instance/web2.example.com"],
                         ["exclusive", ["job/12"], [["shared", ["job/3"]]]])
        self.assertEqual(rows["instance/web10.example.com"],
                         [None, None, None])
        names = [r[0][1] for r in result["data"]]
        self.assertEqual(names, query.nice_sort(names))
        self.assertIn("instance/web2.example.com", names)
        # filters work on lock rows too
        rows = self.rows("lock", ["name"], ["=", "mode", "exclusive"],
                         ctx=ctx)
        self.assertEqual(rows, [[[RS_NORMAL, "instance/web2.example.com"]]])
        # a callable works as well as the manager itself
        ctx = QueryContext(self.store, locks=lm.query_locks)
        self.assertEqual(len(self.rows("lock", ["name"], ctx=ctx)),
                         len(names))
        lm.release_all("job/12")
        self.successResultOf(waiting)
        lm.release_all("job/3")

    def test_locks_unavailable(self):
        self.failureResultOf(self.ctx.query("lock", ["name"]),
                             errors.OpPrereqError)

    def test_jobs_from_a_rows_provider(self):
        jobs = {
            2: {"id": 2, "status": "success", "priority": 0,
                "summary": ["TEST_DELAY(1)"], "received_ts": [100, 0],
                "start_ts": [101, 5], "end_ts": [102, 0],
                "opstatus": ["success"]},
            10: {"id": 10, "status": "queued", "priority": -10,
                 "summary": ["INSTANCE_STARTUP(web1)"],
                 "received_ts": [200, 0], "start_ts": None, "end_ts": None,
                 "opstatus": ["queued"]},
        }
        calls = []

        def provider(ids, fields):
            calls.append((ids, sorted(fields)))
            return [dict((k, v) for k, v in jobs[i].items()
                         if k == "id" or k in fields)
                    for i in (ids if ids is not None else jobs) if i in jobs]
        ctx = QueryContext(self.store, jobs=provider)
        self.assertTrue(ctx.prepare("job", ["id"]).needs_live)
        rows = self.rows("job", ["id", "status", "start_ts"], ctx=ctx)
        self.assertEqual(rows, [
            [[RS_NORMAL, 2], [RS_NORMAL, "success"], [RS_NORMAL, [101, 5]]],
            [[RS_NORMAL, 10], [RS_NORMAL, "queued"], [RS_UNAVAIL, None]]])
        self.assertEqual(calls, [(None, ["start_ts", "status"])])
        # by id: unknown ids give a row of unavailable values
        del calls[:]
        rows = self.rows("job", ["id", "status"],
                         ["|", ["=", "id", 10], ["=", "id", "7"]], ctx=ctx)
        self.assertEqual(rows, [[[RS_NORMAL, 7], [RS_UNAVAIL, None]],
                                [[RS_NORMAL, 10], [RS_NORMAL, "queued"]]])
        self.assertEqual(calls, [([10, 7], ["status"])])
        # timestamps compare as seconds; filter fields are fetched too
        del calls[:]
        rows = self.rows("job", ["id"], [">", "received_ts", 150], ctx=ctx)
        self.assertEqual(rows, [[[RS_NORMAL, 10]]])
        self.assertEqual(calls, [(None, ["received_ts"])])
        # a Deferred answer is fine
        d = defer.Deferred()
        ctx = QueryContext(self.store, jobs=lambda ids, fields: d)
        result = ctx.query("job", ["id", "status"])
        self.assertNoResult(result)
        d.callback([jobs[2]])
        self.assertEqual(self.successResultOf(result)["data"],
                         [[[RS_NORMAL, 2], [RS_NORMAL, "success"]]])

    def test_jobs_unavailable(self):
        self.failureResultOf(self.ctx.query("job", ["id"]),
                             errors.OpPrereqError)


class OldStyleTests(Base):

    def old(self, what, names, fields):
        return self.successResultOf(self.ctx.old_style(what, names, fields))

    def test_all_and_named(self):
        self.assertEqual(self.old("node", [], ["name", "pinst_cnt"]),
                         [[N1, 2], [N2, 3], [N3, 1], [N4, 0], [N10, 1]])
        self.assertEqual(self.old("node", None, ["name"]),
                         [[N1], [N2], [N3], [N4], [N10]])
        self.assertEqual(self.old("instance", ["web1.example.com"],
                                  ["name", "admin_state", "oper_ram",
                                   "nic.ip/5"]),
                         [["web1.example.com", "up", 1024, None]])
        self.assertEqual(self.old("group", ["group2"], ["name", "node_cnt"]),
                         [["group2", 1]])
        self.assertEqual(self.old("network", ["net1"], ["name", "inst_cnt"]),
                         [["net1", 1]])
        # short names resolve
        self.assertEqual(self.old("node", ["node10"], ["name"]), [[N10]])

    def test_unknown_fields(self):
        f = self.failureResultOf(self.ctx.old_style("node", [],
                                                    ["name", "bad1", "bad2"]),
                                 errors.OpPrereqError)
        self.assertEqual(f.value.args, ("Unknown output fields selected:"
                                        " bad1, bad2", errors.ECODE_INVAL))

    def test_unknown_names(self):
        for what, names, word in [
                ("node", ["node99"], "Node not known: node99"),
                ("instance", ["web1", "x", "y"], "Instances not known: x, y"),
                ("group", ["default", "g3"], "Node group not known: g3"),
                ("network", ["net2"], "Network not known: net2")]:
            f = self.failureResultOf(self.ctx.old_style(what, names,
                                                        ["name"]),
                                     errors.OpPrereqError)
            self.assertIn(word, str(f.value))
            self.assertEqual(f.value.args[1], errors.ECODE_NOENT)

    def test_group_names_are_not_host_names(self):
        self.failureResultOf(self.ctx.old_style("group", ["group"], ["name"]),
                             errors.OpPrereqError)

    def test_bad_names(self):
        self.failureResultOf(self.ctx.old_style("node", "node1", ["name"]),
                             errors.OpPrereqError)
        self.failureResultOf(self.ctx.old_style("nodes", [], ["name"]),
                             errors.OpPrereqError)

    def test_old_style_map(self):
        self.assertEqual(query.OLD_STYLE["QueryInstances"], "instance")
        self.assertEqual(sorted(query.OLD_STYLE.values()),
                         ["group", "instance", "network", "node"])


def big_config(instances=2000, nodes=40):
    """An in-memory config with many instances (no writes, no checks)."""
    from ganeti.objects import new_uuid
    cluster = Cluster(cluster_name="big.example.com", uuid=new_uuid(),
                      enabled_hypervisors=["fake", "kvm"],
                      default_hypervisor="fake")
    cluster.fill_defaults()
    group = NodeGroup(name="default", uuid=new_uuid())
    node_objs = {}
    for i in range(nodes):
        n = Node(name="node%d.example.com" % (i + 1), uuid=new_uuid(),
                 primary_ip="10.0.%d.%d" % (i // 250, i % 250 + 1),
                 group=group.uuid)
        node_objs[n.uuid] = n
    cluster.master_node = sorted(node_objs)[0]
    uuids = sorted(node_objs)
    insts = {}
    disks = {}
    for i in range(instances):
        d = Disk(uuid=new_uuid(), dev_type="drbd", size=1024 + i,
                 name="disk0", logical_id=[])
        disks[d.uuid] = d
        inst = Instance(
            name="inst%d.example.com" % i, uuid=new_uuid(),
            primary_node=uuids[i % nodes],
            secondary_nodes=[uuids[(i + 1) % nodes]],
            os="debootstrap+default", hypervisor="fake",
            admin_state="up" if i % 3 else "down",
            beparams={"maxmem": 512, "vcpus": 2}, disks=[d.uuid],
            nics=[NIC(mac="aa:00:00:%02x:%02x:%02x"
                      % (i >> 16, (i >> 8) & 255, i & 255),
                      uuid=new_uuid())], tags={"t%d" % (i % 7)},
            ctime=1000.0, mtime=1000.0)
        insts[inst.uuid] = inst
    return ConfigStore(None, cluster, nodes=node_objs,
                       nodegroups={group.uuid: group}, instances=insts,
                       disks=disks)


class ScaleTests(unittest.TestCase):
    """A 2000-instance config: the queries run (timings are logged only)."""

    FIELDS = ["name", "os", "pnode", "snodes", "admin_state",
              "disk_template", "disk.sizes", "disk_usage", "be/maxmem",
              "be/vcpus", "nic.macs", "tags", "ctime"]

    def test_config_only_query(self):
        store = big_config()
        ctx = QueryContext(store)
        start = time.time()
        result = ctx.prepare("instance", self.FIELDS).execute_sync()
        elapsed = time.time() - start
        self.assertEqual(len(result["data"]), 2000)
        self.assertEqual(result["data"][0][0], [RS_NORMAL,
                                                "inst0.example.com"])
        self.assertEqual(result["data"][1][0], [RS_NORMAL,
                                                "inst1.example.com"])
        self.assertEqual(result["data"][10][0], [RS_NORMAL,
                                                 "inst10.example.com"])
        # filtered, and by name
        start2 = time.time()
        result = ctx.prepare("instance", self.FIELDS,
                             ["&", ["=~", "name", "7"],
                              ["=[]", "tags", "t3"]]).execute_sync()
        self.assertTrue(result["data"])
        start3 = time.time()
        result = ctx.prepare("instance", self.FIELDS,
                             ["|", ["=", "name", "inst5.example.com"],
                              ["=", "name", "inst1999"]]).execute_sync()
        self.assertEqual(len(result["data"]), 2)
        start4 = time.time()
        nodes = ctx.prepare("node", ["name", "pinst_cnt", "sinst_list",
                                     "alloc.mem", "alloc.disk"]
                            ).execute_sync()
        self.assertEqual(nodes["data"][0][1], [RS_NORMAL, 50])
        end = time.time()
        print("\n2000 instances: all %.1f ms, filtered %.1f ms, by name"
              " %.1f ms, 40 nodes with allocation %.1f ms"
              % (elapsed * 1000, (start3 - start2) * 1000,
                 (start4 - start3) * 1000, (end - start4) * 1000))

    def test_live_query(self):
        store = big_config()
        live = FakeLive(instances=dict(
            (u, dict((i.name, running()) for i in store.instances.values()
                     if i.primary_node == u)) for u in store.nodes))
        ctx = QueryContext(store, live=live)
        start = time.time()
        result = self.successResultOf(ctx.query(
            "instance", ["name", "status", "oper_ram", "pnode"]))
        elapsed = time.time() - start
        statuses = set(r[1][1] for r in result["data"])
        self.assertEqual(statuses, {"running", "ERROR_up"})
        print("\n2000 instances with status: %.1f ms" % (elapsed * 1000))
