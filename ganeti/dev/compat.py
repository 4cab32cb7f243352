"""Ganeti 3.0's own clients against a running cluster: which calls work.

    python -m ganeti.dev.compat --root DIR [--hostname NODE] [--writes]

Runs Ganeti's command line tools (``gnt-cluster``, ``gnt-node``, ...) as
the master node whose files are under ``--root`` (``GANETI_ROOTDIR``,
``GANETI_HOSTNAME``), and Ganeti's Python RAPI client against the remote
API at the cluster's master IP with the first user of its users file that
may write.  Every call is reported with its result; the last line counts
them, and the exit code is 0 only if all worked.

Without ``--writes`` only calls that change nothing run; with it, a
sequence of changes follows that undoes itself (tags, a network, a
filter, a node group, an instance shut down and started, an export and
an import, a new instance removed again).

It needs Debian's ganeti-3.0 package (``python3 dev.py`` installs it).
"""

import argparse
import json
import os
import subprocess
import sys
import time

GANETI_PYTHON = "/usr/bin/python3"
GANETI_LIB = "/usr/share/ganeti/3.0"

#: read-only command line calls: (tool, args); {master}, {node}, {other},
#: {inst}, {group} are filled from the cluster's ssconf files
READ_CALLS = [
    ("gnt-cluster", ["info"]),
    ("gnt-cluster", ["version"]),
    ("gnt-cluster", ["getmaster"]),
    ("gnt-cluster", ["list-tags"]),
    ("gnt-cluster", ["verify"]),
    ("gnt-cluster", ["verify-disks"]),
    ("gnt-cluster", ["show-ispecs-cmd"]),
    ("gnt-cluster", ["queue", "info"]),
    ("gnt-cluster", ["watcher", "info"]),
    ("gnt-node", ["list"]),
    ("gnt-node", ["list", "-o", "name,pinst_cnt,sinst_cnt,mtotal,mfree,"
                  "dtotal,dfree,ctotal,role,group,tags"]),
    ("gnt-node", ["list-fields"]),
    ("gnt-node", ["info", "{master}"]),
    ("gnt-node", ["volumes"]),
    ("gnt-node", ["list-storage", "-t", "file"]),
    ("gnt-node", ["list-tags", "{master}"]),
    ("gnt-instance", ["list"]),
    ("gnt-instance", ["list", "-o", "name,os,pnode,status,oper_state,"
                      "be/memory,disk.sizes,nic.ips,nic.modes,tags"]),
    ("gnt-instance", ["list-fields"]),
    ("gnt-instance", ["info", "{inst}"]),
    ("gnt-instance", ["console", "--show-cmd", "{inst}"]),
    ("gnt-instance", ["list-tags", "{inst}"]),
    ("gnt-group", ["list"]),
    ("gnt-group", ["list-fields"]),
    ("gnt-group", ["info", "{group}"]),
    ("gnt-group", ["list-tags", "{group}"]),
    ("gnt-job", ["list"]),
    ("gnt-job", ["info", "1"]),
    ("gnt-os", ["list"]),
    ("gnt-os", ["diagnose"]),
    ("gnt-os", ["info"]),
    ("gnt-network", ["list"]),
    ("gnt-filter", ["list"]),
    ("gnt-backup", ["list"]),
    # (gnt-storage diagnose is left out: with no ExtStorage provider
    # installed Ganeti's tool itself exits 1, whoever answers)
    ("gnt-debug", ["locks"]),
]

#: changes that undo themselves, in order
WRITE_CALLS = [
    ("gnt-cluster", ["add-tags", "compat-check"]),
    ("gnt-cluster", ["search-tags", "compat"]),
    ("gnt-cluster", ["remove-tags", "compat-check"]),
    ("gnt-node", ["add-tags", "{master}", "compat-check"]),
    ("gnt-node", ["remove-tags", "{master}", "compat-check"]),
    ("gnt-instance", ["add-tags", "{inst}", "compat-check"]),
    ("gnt-instance", ["remove-tags", "{inst}", "compat-check"]),
    ("gnt-debug", ["delay", "0.1"]),
    ("gnt-debug", ["test-jobqueue"]),
    ("gnt-cluster", ["modify", "--default-iallocator", "hail"]),
    ("gnt-group", ["add", "compatgrp"]),
    ("gnt-group", ["rename", "compatgrp", "compatgrp2"]),
    ("gnt-group", ["modify", "--alloc-policy", "last_resort",
                   "compatgrp2"]),
    ("gnt-group", ["remove", "compatgrp2"]),
    ("gnt-network", ["add", "--network", "198.51.100.0/28", "--gateway",
                     "198.51.100.1", "compatnet"]),
    ("gnt-network", ["connect", "--nic-parameters",
                     "mode=bridged,link=br-compat", "compatnet",
                     "{group}"]),
    ("gnt-network", ["info", "compatnet"]),
    ("gnt-network", ["disconnect", "compatnet", "{group}"]),
    ("gnt-network", ["remove", "compatnet"]),
    ("gnt-filter", ["add", "--predicates",
                    '[["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]',
                    "--action", "REJECT", "--priority", "10"]),
    ("gnt-filter", ["list", "--no-headers", "-o", "uuid"]),
    ("gnt-instance", ["shutdown", "--timeout", "0", "{inst}"]),
    ("gnt-instance", ["modify", "-B", "memory=256", "{inst}"]),
    ("gnt-instance", ["modify", "-B", "memory=512", "{inst}"]),
    ("gnt-instance", ["startup", "{inst}"]),
    ("gnt-instance", ["reboot", "{inst}"]),
    ("gnt-backup", ["export", "-n", "{other}", "{inst}"]),
    ("gnt-backup", ["list"]),
    ("gnt-backup", ["import", "-t", "file", "--src-node", "{other}",
                    "--src-dir", "/var/lib/ganeti/export/{inst}",
                    # the export's own MAC is still the original's
                    "--net", "0:mode=routed,link=100,ip=192.0.2.97",
                    "-n", "{master}", "--no-name-check", "--no-ip-check",
                    "compat-imported.example.com"]),
    ("gnt-instance", ["remove", "-f", "compat-imported.example.com"]),
    ("gnt-backup", ["remove", "{inst}"]),
    ("gnt-instance", ["add", "-t", "file", "-o", "busybox+default",
                      "--disk", "0:size=1G", "--net", "0:mode=routed,"
                      "link=100,ip=192.0.2.99", "-B", "memory=128",
                      "-H", "fake", "-n", "{master}", "--no-name-check",
                      "--no-ip-check", "compat-new.example.com"]),
    ("gnt-instance", ["remove", "-f", "compat-new.example.com"]),
]

#: Ganeti's RAPI client: each call is a line of Python run against ``c``
#: (the client); ``wait(job)`` fails unless the job succeeds
RAPI_READS = [
    "c.GetVersion()",
    "c.GetFeatures()",
    "c.GetInfo()",
    "c.GetOperatingSystems()",
    "c.GetClusterTags()",
    "c.GetNodes(bulk=True)",
    "c.GetNode(MASTER)",
    "c.GetNodeRole(MASTER)",
    "c.GetNodeTags(MASTER)",
    "c.GetNodeStorageUnits(MASTER, 'file', 'name,size,free')",
    "c.GetInstances(bulk=True)",
    "c.GetInstance(INST)",
    "c.GetInstanceTags(INST)",
    "wait(c.GetInstanceInfo(INST))",
    "c.GetInstanceConsole(INST)",
    "c.GetGroups(bulk=True)",
    "c.GetGroup(GROUP)",
    "c.GetGroupTags(GROUP)",
    "c.GetJobs(bulk=True)",
    "c.GetJobStatus(1)",
    "c.GetNetworks(bulk=True)",
    "c.GetFilters(bulk=True)",
    "c.Query('instance', ['name', 'status'])",
    "c.Query('export', ['node', 'export'])",
    "c.QueryFields('node')",
]

RAPI_WRITES = [
    "wait(c.AddClusterTags(['compat-rapi']))",
    "wait(c.DeleteClusterTags(['compat-rapi']))",
    "wait(c.AddInstanceTags(INST, ['compat-rapi']))",
    "wait(c.DeleteInstanceTags(INST, ['compat-rapi']))",
    "wait(c.ShutdownInstance(INST, timeout=0))",
    "wait(c.StartupInstance(INST))",
    "wait(c.RebootInstance(INST))",
    "wait(c.ModifyInstance(INST, beparams={'memory': 512}))",
    "wait(c.CreateGroup('compat-rapi-grp'))",
    "wait(c.DeleteGroup('compat-rapi-grp'))",
    "wait(c.CreateNetwork('compat-rapi-net', '203.0.113.0/28'))",
    "wait(c.DeleteNetwork('compat-rapi-net'))",
    "c.DeleteFilter(c.AddFilter(1, [['opcode', ['=', 'OP_ID',"
    " 'OP_TEST_DELAY']]], 'REJECT'))",
    "wait(c.PrepareExport(INST, 'local'))",
    "wait(c.PrepareExport(INST, 'remote'))",
    "wait(c.ExportInstance(INST, 'local', OTHER))",
    "wait(c.CreateInstance('create', 'compat-rapi.example.com', 'file',"
    " [{'size': 1024}], [{'mode': 'routed', 'link': '100',"
    " 'ip': '192.0.2.98'}], os='busybox+default', pnode=MASTER,"
    " hypervisor='fake', beparams={'memory': 128}, name_check=False,"
    " ip_check=False))",
    "wait(c.DeleteInstance('compat-rapi.example.com'))",
]

_RAPI_SCRIPT = """
import json, sys, traceback
from ganeti.rapi import client
args = json.loads(sys.argv[1])
c = client.GanetiRapiClient(args["host"], port=args["port"],
                            username=args["user"], password=args["password"])
MASTER, OTHER, INST, GROUP = (args["master"], args["other"], args["inst"],
                              args["group"])

def wait(job):
    c.WaitForJobCompletion(job, period=0.2, retries=1500)
    status = c.GetJobStatus(job)
    if status["status"] != "success":
        raise Exception("job %s: %s %s" % (job, status["status"],
                                           status["opresult"]))
    return status["opresult"]

for line in args["calls"]:
    try:
        eval(line)
        print(json.dumps([line, True, ""]))
    except Exception as err:
        print(json.dumps([line, False, "%s: %s" % (type(err).__name__, err)]))
    sys.stdout.flush()
"""


def _read_ssconf(root, key):
    path = os.path.join(root, "var/lib/ganeti", "ssconf_" + key)
    with open(path) as f:
        return f.read().strip()


def _rapi_writer(root):
    """(user, password) of the first users-file entry that may write."""
    path = os.path.join(root, "var/lib/ganeti/rapi/users")
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 3 and not fields[0].startswith("#") and \
                    "write" in fields[2].split(","):
                password = fields[1]
                if password.startswith("{cleartext}"):
                    password = password[len("{cleartext}"):]
                if not password.startswith("{"):
                    return fields[0], password
    return None


def cluster_names(root):
    """The names the calls are filled with, from the master's ssconf."""
    master = _read_ssconf(root, "master_node")
    nodes = _read_ssconf(root, "node_list").split()
    instances = sorted(_read_ssconf(root, "instance_list").split())
    group = _read_ssconf(root, "nodegroups").split("\n")[0].split()[-1]
    others = [n for n in nodes if n != master]
    return {"master": master, "other": others[0] if others else master,
            "inst": instances[0] if instances else "",
            "group": group, "master_ip": _read_ssconf(root, "master_ip")}


def run_tool(root, hostname, tool, args, timeout=300):
    env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
           "PYTHONPATH": GANETI_LIB, "GANETI_ROOTDIR": root,
           "GANETI_HOSTNAME": hostname, "LANG": "C.UTF-8"}
    try:
        out = subprocess.run(
            [GANETI_PYTHON, os.path.join(GANETI_LIB, tool)] + list(args),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, "timed out after %d s" % timeout
    text = out.stdout.decode("utf-8", "replace").strip()
    return out.returncode == 0, text


def run_rapi(root, names, calls, port=5080, timeout=900):
    """[(call, ok, detail)] of Ganeti's RAPI client running ``calls``."""
    writer = _rapi_writer(root)
    if writer is None:
        return [(call, False, "no user who may write in the RAPI users"
                 " file") for call in calls]
    args = dict(names, host=names["master_ip"], port=port, user=writer[0],
                password=writer[1], calls=calls)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": GANETI_LIB,
           "LANG": "C.UTF-8"}
    out = subprocess.run([GANETI_PYTHON, "-c", _RAPI_SCRIPT,
                          json.dumps(args)], env=env, cwd="/",
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=timeout)
    results = []
    for line in out.stdout.decode("utf-8", "replace").splitlines():
        try:
            call, ok, detail = json.loads(line)
        except ValueError:
            continue
        results.append((call, ok, detail))
    done = {r[0] for r in results}
    for call in calls:
        if call not in done:
            results.append((call, False, out.stderr.decode(
                "utf-8", "replace").strip()[-300:] or "not run"))
    return results


def sweep(root, hostname=None, writes=False, port=5080, report=print):
    """Run the calls; returns [(kind, call, ok, detail)]."""
    names = cluster_names(root)
    hostname = hostname or names["master"]
    results = []

    def record(kind, call, ok, detail):
        results.append((kind, call, ok, detail))
        first = detail.splitlines()[-1] if detail and not ok else ""
        report("%-4s %-5s %s%s" % (kind, "ok" if ok else "FAIL", call,
                                   ("\n           " + first) if first
                                   else ""))

    calls = READ_CALLS + (WRITE_CALLS if writes else [])
    for tool, args in calls:
        filled = [a.format(**names) for a in args]
        started = time.monotonic()
        ok, text = run_tool(root, hostname, tool, filled)
        record("cli", "%s %s" % (tool, " ".join(filled)), ok,
               text if not ok else "%.1f s" % (time.monotonic() - started))
    rapi_calls = RAPI_READS + (RAPI_WRITES if writes else [])
    for call, ok, detail in run_rapi(root, names, rapi_calls, port=port):
        record("rapi", call, ok, detail)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Run Ganeti 3.0's own clients against a running cluster"
        " and count the calls that work.")
    parser.add_argument("--root", required=True,
                        help="the master node's root directory")
    parser.add_argument("--hostname", help="the master's node name"
                        " (default: from its ssconf files)")
    parser.add_argument("--writes", action="store_true",
                        help="also run changes that undo themselves")
    parser.add_argument("--rapi-port", type=int, default=5080)
    opts = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(GANETI_LIB, "ganeti")):
        print("Ganeti 3.0 is not installed (%s is missing)" % GANETI_LIB,
              file=sys.stderr)
        return 2
    results = sweep(opts.root, opts.hostname, opts.writes, opts.rapi_port)
    passed = sum(1 for r in results if r[2])
    print("%d of %d calls of Ganeti's clients worked" % (passed,
                                                          len(results)))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
