"""The demo: a local virtual cluster, and where to look at it.

    python -m ganeti.dev.demo [--base DIR] [--nodes N] [--first-address ADDR]
                              [--once] [--kvm]

Builds a cluster of N nodes on consecutive loopback addresses from ADDR
(127.0.0.1..N by default; one root directory per node) the way an admin
does: the master's configuration, certificate and daemons
first, then every other node starts ``ganeti-noded --bootstrap`` and joins
through the master (``OP_NODE_ADD`` pinned to the fingerprint it logged;
the master replicates the configuration to it), then confd; it creates
one instance per node (fake hypervisor, a file disk installed by the busybox
OS definition in etc/os) and a forthcoming reservation, all through jobs as
an admin would, prints where to look, and keeps running until interrupted
(``--once``: do all that, print, stop the daemons and exit).

With ``--kvm`` the instances are real virtual machines: the kvm hypervisor
runs qemu with software emulation, booting the tiny guest of
:mod:`ganeti.dev.tinyguest` (built from Debian packages on first use,
then reused from its cache); their serial console logs are printed.
"""

import argparse
import copy
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

from twisted.application.service import IServiceMaker
from twisted.plugin import getPlugins

from ganeti import constants
from ganeti import objects
from ganeti import dev
from ganeti import daemon_util
from ganeti.dev.vcluster import (MANAGED_NODED_ARGS, VirtualCluster,
                                 node_addresses)
from ganeti.utils.io import atomic_write

OS_DIR = os.path.join(dev.CHECKOUT_DIR, "etc", "os")
#: where the demo's confd serves its counters to Prometheus
CONFD_METRICS_PORT = 1817

# daemon plugin -> (which nodes run it, extra arguments, how to see it is up)
DAEMONS = [
    ("ganeti-noded", "all", ["--os-search-path", OS_DIR],
     ("tcp", constants.DEFAULT_NODED_PORT)),
    ("ganeti-masterd", "master", [], ("luxi", None)),
    ("ganeti-confd", "candidates",
     ["--port", str(constants.DEFAULT_CONFD_PORT),
      "--metrics-port", str(CONFD_METRICS_PORT)],
     ("udp", constants.DEFAULT_CONFD_PORT)),
    ("ganeti-rapi", "master", [], ("tcp", constants.DEFAULT_RAPI_PORT)),
    # data collectors and the signed self-diagnosis, on every node
    ("ganeti-mond", "all", [], ("tcp", constants.DEFAULT_MOND_PORT)),
    # the maintenance daemon: confd's candidates vote it the master first
    ("ganeti-maintd", "master", ["--interval", "5"],
     ("tcp", constants.DEFAULT_MAINTD_PORT)),
    # a pass every 15 s: restarts, user shutdowns, and on the master
    # auto-repair (no port: "up" is still running after a moment)
    ("ganeti-watcher", "all", ["--interval", "15"], ("process", None)),
]


def available_plugins():
    import twisted.plugins
    return {p.tapname for p in getPlugins(IServiceMaker, twisted.plugins)}


def build_cluster(vc, noded_args):
    """The master first (its config, certificate and node daemon, which
    starts the master's other daemons), then every other node joins
    (bootstrap noded, OP_NODE_ADD pinned to its fingerprint) and its node
    daemon starts what its role needs.  Returns [(plugin, process, node,
    check)] of the daemons, for the summary."""
    store = vc.create_master(
        hypervisors=(constants.HT_FAKE, constants.HT_KVM))
    # kvm's default kernel for direct boot (/boot/vmlinuz-3-kvmU) is not
    # on this machine: the cluster boots kvm instances from their disks,
    # so that gnt-cluster verify passes (the --kvm demo gives its guests
    # a kernel of their own)
    kvm = dict(store.cluster.hvparams.get(constants.HT_KVM) or {})
    kvm.update(kernel_path="", initrd_path="")
    store.set_cluster_params(hvparams={constants.HT_KVM: kvm})
    # a user of the remote API who may write
    write_rapi_user(vc.master.paths.rapi_users_file)
    noded_args = (list(MANAGED_NODED_ARGS) + list(noded_args)
                  + ["--file-storage-dir", store.cluster.file_storage_dir])
    for plugin, _, extra, _ in DAEMONS:
        if extra and plugin not in ("ganeti-noded",):
            noded_args += ["--daemon-args", "%s=%s" % (plugin,
                                                       " ".join(extra))]
    print("Starting the master's node daemon; it starts the master's other"
          " daemons (ganeti-noded --daemons process):")
    vc.start_managed_master(noded_args)
    print("Joining nodes (ganeti-noded --bootstrap, then OP_NODE_ADD pinned"
          " to the fingerprint it logged):")
    jobs = vc.join_nodes(noded_args=noded_args)
    for node in vc.nodes[1:]:
        print("  job %s (%s): success" % (jobs[node.name], node.name))
    store = vc.load()
    procs = dict(vc.processes)
    started = []
    for plugin, where, _, check in DAEMONS:
        if plugin == "ganeti-noded":
            for node in vc.nodes:
                started.append((plugin, procs["noded@" + node.name], node,
                                check))
            continue
        targets = (vc.nodes if where == "all" else
                   [n for n in vc.nodes
                    if store.get_node(n.name).master_candidate]
                   if where == "candidates" else [vc.master])
        for node in targets:
            if check[0] == "luxi":
                check = ("luxi", node.paths.master_socket)
            started.append((plugin, SupervisedDaemon(node, plugin), node,
                            check))
    return started


class SupervisedDaemon(object):
    """A daemon a node daemon started, seen as the demo sees its own
    processes: a PID, and whether it still runs (its pidfile)."""

    #: seconds a daemon may take until its node daemon has started it
    START_TIMEOUT = 60.0

    def __init__(self, node, daemon):
        self.node = node
        self.daemon = daemon
        self._deadline = time.monotonic() + self.START_TIMEOUT

    @property
    def pid(self):
        return daemon_util.running_pid(self.node.paths, self.daemon) or 0

    def poll(self):
        if self.pid or time.monotonic() < self._deadline:
            return None
        return 1


#: the remote API user the demo creates (with a new password each time)
DEMO_RAPI_USER = "demo"


def write_rapi_user(path):
    """A users file (Ganeti's format) with the demo user, allowed to
    write; its password is random."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    password = secrets.token_urlsafe(12)
    atomic_write(path, ("# written by the demo: user password options\n"
                        "%s %s write\n" % (DEMO_RAPI_USER, password)
                        ).encode("ascii"), 0o600)
    return password


def rapi_users(path):
    """[(user, password, options)] of a plain users file."""
    users = []
    try:
        with open(path) as f:
            for line in f:
                fields = line.split()
                if fields and not fields[0].startswith("#"):
                    users.append((fields[0], fields[1] if len(fields) > 1
                                  else "", " ".join(fields[2:])))
    except OSError:
        pass            # no users file: nothing to print
    return users


def populate(store):
    """A few instances straight into the configuration, and a reservation
    (for tests that need a populated config without node daemons)."""
    nodes = sorted(store.nodes.values(), key=lambda n: n.name)
    for i, node in enumerate(nodes):
        inst = objects.Instance(
            name="inst%d.example.com" % (i + 1), primary_node=node.uuid,
            os="busybox+default", hypervisor=constants.HT_FAKE,
            beparams={"maxmem": 512, "minmem": 512, "vcpus": 1},
            nics=[objects.NIC(mac=store.generate_mac(),
                              ip="192.0.2.%d" % (10 + i),
                              nicparams={"mode": "routed", "link": "100"})])
        disk = objects.Disk(dev_type=constants.DT_FILE, size=1024,
                            logical_id=["loop", "/srv/ganeti/file-storage/"
                                        "%s/disk0" % inst.name],
                            iv_name="disk/0")
        store.add_instance(inst, [disk])
    store.add_instance(
        objects.Instance(forthcoming=True, primary_node=nodes[0].uuid,
                         beparams={"maxmem": 1024, "vcpus": 2}),
        [objects.Disk(dev_type=constants.DT_FILE, size=4096)])


def create_instances(vc, guest=None):
    """One instance per node and a reservation, submitted as jobs (kvm
    instances booting ``guest`` if given, else fake ones); their sizes meet
    the cluster's default instance policy (disks of at least 1 GiB, file
    disks are sparse)."""
    from ganeti import luxi
    jobs = []
    failures = []
    with luxi.BlockingClient(vc.master.paths.master_socket, 60) as c:

        def wait(what, job):
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                status, result = c.call("QueryJobs", [job],
                                        ["status", "opresult"])[0]
                if status in ("success", "error", "canceled"):
                    break
                c.call("WaitForJobChange", job, ["status"], None, -1, 5)
            print("  job %s (%s): %s" % (job, what, status))
            if status != "success":
                failures.append("%s: %s" % (what, result))
        if guest is not None:
            # the VMs have no NIC: an admin lets the policy allow that
            policy = copy.deepcopy(constants.IPOLICY_DEFAULTS["minmax"])
            policy[0]["min"]["nic-count"] = 0
            wait("the instance policy allowing VMs without NICs",
                 c.call("SubmitJob", [{"OP_ID": "OP_CLUSTER_SET_PARAMS",
                                       "ipolicy": {"minmax": policy}}]))
        for i, node in enumerate(vc.nodes):
            op = {
                "OP_ID": "OP_INSTANCE_CREATE", "mode": "create",
                "instance_name": "inst%d.example.com" % (i + 1),
                "pnode": node.name, "disk_template": "file",
                "disks": [{"size": 1024}],
                "nics": [{"mode": "routed", "link": "100",
                          "ip": "192.0.2.%d" % (10 + i)}],
                "os_type": "busybox+default",
                "hypervisor": constants.HT_FAKE,
                "beparams": {"memory": 512}, "name_check": False,
                "ip_check": False}
            if guest is not None:
                # a real VM; no NIC (a bridged or routed NIC would change the
                # host's own network: bridges, routes)
                op.update(hypervisor=constants.HT_KVM, nics=[],
                          beparams={"memory": 256},
                          hvparams=guest.kvm_hvparams("idle"))
            jobs.append(("inst%d.example.com" % (i + 1),
                         c.call("SubmitJob", [op])))
        jobs.append(("a forthcoming reservation", c.call("SubmitJob", [{
            "OP_ID": "OP_INSTANCE_CREATE", "mode": "create",
            "forthcoming": True, "instance_name": "reserved.example.com",
            "pnode": vc.master.name, "disk_template": "file",
            "disks": [{"size": 4096}], "nics": [],
            "os_type": "busybox+default", "hypervisor": constants.HT_FAKE,
            "beparams": {"memory": 1024, "vcpus": 2}, "name_check": False,
            "ip_check": False}])))
        for what, job in jobs:
            wait(what, job)
    return failures


def run_cli(vc, tool, *args):
    argv = [sys.executable, "-m", "ganeti.cli.%s" % tool.replace("-", "_"),
            "--root", vc.master.root] + list(args)
    out = subprocess.run(argv, env=dict(os.environ, PYTHONPATH=dev.CHECKOUT_DIR),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         timeout=60)
    return out.stdout.decode("utf-8", "replace").rstrip()


#: node query fields of the capacity table: what the node reports, what
#: is reserved, what the master still admits
CAPACITY_FIELDS = ["name", "mfree", "reserved.mem", "avail.mem", "dfree",
                   "avail.vcpus"]


def capacity_table(vc, store):
    """Each node's capacity as the master admits against it (a node query
    through luxi: the figures Ganeti's htools read too)."""
    from ganeti import luxi
    with luxi.BlockingClient(vc.master.paths.master_socket, 60) as c:
        answer = c.call("Query", "node", CAPACITY_FIELDS, None)
    live = {}
    for row in answer["data"]:
        values = [v if rs == 0 else None for rs, v in row]
        live[values[0]] = values[1:]
    fmt = "  %-20s %-15s %-9s %7s %9s %7s %8s %6s  %s"
    lines = [fmt % ("Node", "IP", "Role", "MFree", "Reserved", "Avail",
                    "DFree", "vCPUs", "Instances")]
    for node in vc.nodes:
        obj = store.get_node(node.name)
        role = ("master" if obj.uuid == store.cluster.master_node
                else "candidate" if obj.master_candidate else "regular")
        use = store.node_usage(obj.uuid)
        names = [store.instances[u].display_name
                 + (" (forthcoming)" if store.instances[u].forthcoming
                    else "") for u in use.instances]
        mfree, reserved, avail, dfree, vcpus = [
            "?" if v is None else v for v in live.get(node.name, [None] * 5)]
        lines.append(fmt % (node.name, node.ip, role, mfree, reserved, avail,
                            dfree, vcpus, ", ".join(names) or "-"))
    lines.append("  (MiB; Avail = MFree - Reserved: memory of stopped and"
                 " forthcoming instances; DFree counts forthcoming disks as"
                 " used)")
    return "\n".join(lines)


def print_summary(vc, store, started):
    print()
    print("Virtual cluster %s: %d nodes under %s"
          % (store.cluster.cluster_name, len(vc.nodes), vc.base))
    print()
    print(capacity_table(vc, store))
    print()
    print("Where to look:")
    print("  configuration     %s" % vc.master.paths.config_file)
    print("  (Ganeti's tools)  GANETI_ROOTDIR=%s GANETI_HOSTNAME=%s"
          % (vc.master.root, vc.master.name))
    for desc, proc, node, _ in started:
        print("  %-17s pid %d on %s, log %s"
              % (desc, proc.pid, node.ip,
                 os.path.join(node.paths.log_dir, "%s.log" % desc)))
    if any(d == "ganeti-confd" for d, _, _, _ in started):
        print()
        print("confd on %s says the master is: %s"
              % (vc.master.ip, confd_answer(vc)))
        print()
        print("Ask confd yourself (UDP %d, HMAC-signed):"
              % constants.DEFAULT_CONFD_PORT)
        print("  .tox/demo/bin/ganeti-confd-client --root %s -a %s master"
              % (vc.master.root, vc.master.ip))
        print("  .tox/demo/bin/ganeti-confd-client --root %s -a %s"
              " instance-ips" % (vc.master.root, vc.master.ip))
        print("Its counters for Prometheus (docs/metrics.rst):")
        for _, _, node, _ in [s for s in started if s[0] == "ganeti-confd"]:
            print("  curl http://%s:%d/metrics" % (node.ip,
                                                   CONFD_METRICS_PORT))
    if any(d == "ganeti-noded" for d, _, _, _ in started):
        print()
        print("Node daemons: HTTPS with mutual TLS on port %d; only callers"
              " holding the cluster certificate (%s) are answered."
              % (constants.DEFAULT_NODED_PORT,
                 os.path.join(vc.master.paths.data_dir, "server.pem")))
    if any(d == "ganeti-rapi" for d, _, _, _ in started):
        print()
        rapi_ip = vc.master_ip or vc.master.ip
        print("Remote API (HTTPS at the cluster's master IP %s, which moves"
              " with a master failover; anonymous reads; users in %s):"
              % (rapi_ip, vc.master.paths.rapi_users_file))
        print("  curl -k https://%s:%d/2/instances?bulk=1"
              % (rapi_ip, constants.DEFAULT_RAPI_PORT))
        for user, password, options in rapi_users(
                vc.master.paths.rapi_users_file):
            print("  user %s, password %s (%s):" % (
                user, password, options or "read only"))
            print("  curl -k -u %s:%s -X PUT 'https://%s:%d/2/tags?tag=hello'"
                  % (user, password, rapi_ip,
                     constants.DEFAULT_RAPI_PORT))
        users = rapi_users(vc.master.paths.rapi_users_file)
        writers = [u for u in users if "write" in u[2].split(",")]
        login = (writers or users or [(DEMO_RAPI_USER, "?", "")])[0]
        print("  Web console (docs/web.rst): https://%s:%d/ui/ (log in as"
              " %s, password %s)" % (rapi_ip, constants.DEFAULT_RAPI_PORT,
                                     login[0], login[1]))
        for tool in ("hbal", "hcheck", "hspace"):
            print("  /usr/lib/ganeti/3.0/usr/bin/%s -m https://%s:%d"
                  % (tool, rapi_ip, constants.DEFAULT_RAPI_PORT))
        print("  Prometheus metrics (RAPI's and the master daemon's;"
              " docs/metrics.rst):")
        print("  curl -k https://%s:%d/metrics"
              % (rapi_ip, constants.DEFAULT_RAPI_PORT))
    monds = [node for d, _, node, _ in started if d == "ganeti-mond"]
    if monds:
        print()
        print("Monitoring daemons (plain HTTP on port %d, every node; the"
              " diagnose report is signed with the cluster key):"
              % constants.DEFAULT_MOND_PORT)
        print("  curl http://%s:%d/1/list/collectors"
              % (monds[0].ip, constants.DEFAULT_MOND_PORT))
        for node in monds:
            print("  curl http://%s:%d/1/report/all"
                  % (node.ip, constants.DEFAULT_MOND_PORT))
        print("  Prometheus metrics of each node (docs/metrics.rst):")
        for node in monds:
            print("  curl http://%s:%d/metrics"
                  % (node.ip, constants.DEFAULT_MOND_PORT))
        print("  curl http://%s:%d/1/report/node/diagnose"
              % (monds[0].ip, constants.DEFAULT_MOND_PORT))
    if any(d == "ganeti-maintd" for d, _, _, _ in started):
        print()
        print("Maintenance daemon (master only; HTTP on port %d): its"
              " incidents, and counters of refused reports:"
              % constants.DEFAULT_MAINTD_PORT)
        print("  curl http://%s:%d/1/status"
              % (vc.master.ip, constants.DEFAULT_MAINTD_PORT))
        print("  curl http://%s:%d/1/counters"
              % (vc.master.ip, constants.DEFAULT_MAINTD_PORT))
    print()
    print("Drive it (our tools; Ganeti's own gnt-* work too with"
          " GANETI_ROOTDIR and GANETI_HOSTNAME set as above):")
    for cmd in ("gnt-instance list", "gnt-instance shutdown inst1.example.com",
                "gnt-node list", "gnt-job list", "gnt-cluster info"):
        tool, rest = cmd.split(" ", 1)
        print("  .tox/demo/bin/%s --root %s %s" % (tool, vc.master.root,
                                                   rest))
    if len(vc.nodes) > 1:
        other = vc.nodes[1]
        print()
        print("Fail the master over to %s (its node daemon then runs the"
              " master's daemons; the remote API follows the master IP):"
              % other.name)
        print("  GANETI_HOSTNAME=%s .tox/demo/bin/gnt-cluster --root %s"
              " master-failover" % (other.name, other.root))
    missing = [d for d, _, _, _ in DAEMONS if d not in available_plugins()]
    if missing:
        print()
        print("Not in this checkout yet: %s" % ", ".join(missing))


def print_consoles(vc, timeout=60.0):
    """Where each kvm instance's serial console is, and its first words."""
    print()
    print("Serial consoles of the qemu instances (log; attach to the socket"
          " with: socat - UNIX-CONNECT:<socket>):")
    deadline = time.monotonic() + timeout
    for i, node in enumerate(vc.nodes):
        name = "inst%d.example.com" % (i + 1)
        ctrl = os.path.join(node.paths.run_dir, "kvm-hypervisor", "ctrl")
        log = os.path.join(ctrl, name + ".serial.log")
        print("  %-20s log    %s" % (name, log))
        print("  %-20s socket %s" % ("", os.path.join(ctrl,
                                                      name + ".serial")))
        booted = None
        while booted is None and time.monotonic() < deadline:
            try:
                with open(log, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                text = ""
            booted = next((line.strip() for line in text.splitlines()
                           if line.startswith("ganeti-test: booted")), None)
            if booted is None:
                time.sleep(0.5)
        print("  %-20s says   %s" % ("", booted or "(nothing yet)"))


def wait_until_up(proc, ip, check, timeout=20.0):
    """True once the daemon answers (TCP connect) or stays up (UDP)."""
    kind, port = check
    deadline = time.monotonic() + timeout
    alive_since = time.monotonic()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if kind == "luxi":
            from ganeti import luxi
            try:
                with luxi.BlockingClient(port, 5) as c:
                    c.call("QueryConfigValues", ["cluster_name"])
                return True
            except luxi.NoMasterError:
                pass
        elif kind == "tcp":
            try:
                socket.create_connection((ip, port), timeout=1).close()
                return True
            except OSError:
                pass
        elif time.monotonic() - alive_since > 2.0:
            return True
        time.sleep(0.1)
    return False


def confd_answer(vc):
    """Ask the master's confd who the master is, as an admin would."""
    argv = [sys.executable, "-m", "ganeti.confd.cli", "--root",
            vc.master.root, "-a", vc.master.ip, "master"]
    env = dict(os.environ, PYTHONPATH=dev.CHECKOUT_DIR)
    try:
        out = subprocess.run(argv, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=20)
    except subprocess.TimeoutExpired:
        return "(no answer within 20 s)"
    return out.stdout.decode("utf-8", "replace").strip()


def main(argv=None):
    # The demo keeps running: whoever reads its output through a pipe or a
    # file (tox, a log) must see "where to look" now, not at Ctrl-C.
    if hasattr(sys.stdout, "reconfigure"):      # a real stream
        sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # A short default: the master's UNIX socket path (under the base) must
    # fit in 108 bytes, which a deep checkout path could exceed.
    parser.add_argument("--base", default="/tmp/ganeti-demo",
                        help="directory for the nodes' roots"
                        " (default: /tmp/ganeti-demo; it is recreated)")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--first-address", default="127.0.0.1",
                        metavar="ADDR",
                        help="loopback IPv4 address of the first node; the"
                        " others get the addresses after it (default:"
                        " 127.0.0.1, so 127.0.0.1-3 for three nodes).  Each"
                        " node's daemons listen on its own address on fixed"
                        " ports: a second demo, or the tests, can run beside"
                        " this one on other addresses (and another --base)")
    parser.add_argument("--once", action="store_true",
                        help="start, check, print, stop and exit")
    parser.add_argument("--kvm", action="store_true",
                        help="real VMs: kvm instances (qemu, software"
                        " emulation) booting a tiny Linux guest")
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    try:
        node_addresses(args.first_address, args.nodes)
    except ValueError as err:
        parser.error("--first-address: %s" % err)
    try:
        node_addresses(args.first_address, args.nodes + 1)
    except ValueError:
        parser.error("--first-address: no room for the master IP (the"
                     " address after the %d nodes' ones) before the end of"
                     " 127.0.0.0/8" % args.nodes)
    guest = None
    if args.kvm:
        from ganeti.dev import tinyguest
        if tinyguest.qemu_binary() is None:
            print("--kvm needs qemu-system-x86_64 (apt-get install"
                  " qemu-system-x86)")
            return 1
        print("Building (or reusing) the tiny guest in %s ..."
              % tinyguest.cache_dir())
        try:
            guest = tinyguest.get_guest()
        except tinyguest.GuestUnavailable as err:
            print("FAILED: no guest for --kvm: %s" % err)
            return 1
        print("  kernel %s\n  initrd %s" % (guest.kernel, guest.initrd))

    # the master IP: the address after the nodes' (it moves to the new
    # master at a master failover)
    vc = VirtualCluster(args.base, node_count=args.nodes,
                        first_address=args.first_address,
                        master_ip=node_addresses(args.first_address,
                                                 args.nodes + 1)[-1])

    started = []
    failed = []
    try:
        noded_extra = next(extra for plugin, _, extra, _ in DAEMONS
                           if plugin == "ganeti-noded")
        try:
            started = build_cluster(vc, noded_extra)
        except RuntimeError as err:
            print("FAILED to build the cluster: %s (see the logs under %s)"
                  % (err, vc.base))
            return 1
        for desc, proc, node, check in started:
            # maintd listens after its vote, which waits (up to a minute)
            # for candidates' confd started alongside it
            if not wait_until_up(proc, node.ip, check,
                                 75.0 if desc == "ganeti-maintd" else 20.0):
                failed.append("%s on %s (exit %s; see its log and %s)"
                              % (desc, node.ip, proc.poll(),
                                 os.path.join(vc.base, "%s@%s.stderr"
                                              % (desc, node.ip))))
        if failed:
            print("FAILED to start: %s" % "; ".join(failed))
            return 1
        print("Creating instances through jobs:")
        job_failures = create_instances(vc, guest)
        store = vc.load()
        print_summary(vc, store, started)
        if guest is not None:
            print_consoles(vc)
        print()
        print("gnt-node list:")
        print(run_cli(vc, "gnt-node", "list"))
        print()
        print("gnt-instance list:")
        print(run_cli(vc, "gnt-instance", "list"))
        if job_failures:
            print()
            print("FAILED jobs: %s" % "; ".join(job_failures))
            return 1
        if args.once:
            return 0
        print()
        print("Running; press Ctrl-C to stop.")
        # Stop cleanly on SIGTERM, and on SIGINT even when a shell started
        # us in the background with SIGINT ignored.
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
        signal.signal(signal.SIGINT, lambda *a: sys.exit(0))
        try:
            # the node daemons keep the others running
            nodeds = [p for d, p, _, _ in started if d == "ganeti-noded"]
            while all(p.poll() is None for p in nodeds) or not started:
                time.sleep(1)
                if not started:
                    # Nothing to supervise: keep the files, exit.
                    return 0
        except KeyboardInterrupt:
            pass
        return 0
    finally:
        # A second Ctrl-C (or SIGTERM) must not cut the stop short: that
        # would leave daemons and guests running.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
        vc.stop_all()


if __name__ == "__main__":
    sys.exit(main())
