"""The out-of-band program of the virtual cluster: "powering off" a
virtual node kills every process of it (its daemons and its instances:
each has the node's root directory on its command line), frozen ones
included.  Development tool, not installed.

    python -m ganeti.dev.oob --base BASE COMMAND NODE

BASE is the virtual cluster's directory (a node's root is BASE/NODE).
``VirtualCluster.install_oob`` writes a wrapper with BASE filled in into
the master's out-of-band directory, where the master runs programs from.
"""

import argparse
import json
import os
import signal
import sys


def node_processes(root):
    """PIDs of the processes whose command line names ``root``."""
    marker = os.path.abspath(root).encode() + b"/"
    bare = os.path.abspath(root).encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if any(a == bare or a.startswith(marker) or marker in a
               for a in args):
            pids.append(int(entry))
    return pids


def main(argv=None, out=sys.stdout, err=sys.stderr):
    p = argparse.ArgumentParser(prog="oob")
    p.add_argument("--base", required=True)
    p.add_argument("command", choices=["power-on", "power-off", "power-cycle",
                                       "power-status", "health"])
    p.add_argument("node")
    args = p.parse_args(argv)
    root = os.path.join(args.base, args.node)
    if not os.path.isdir(root):
        err.write("no virtual node %s under %s\n" % (args.node, args.base))
        return 1
    pids = node_processes(root)
    if args.command == "power-status":
        out.write(json.dumps({"powered": bool(pids)}) + "\n")
        return 0
    if args.command == "health":
        out.write(json.dumps([["processes", "OK" if pids else
                               "CRITICAL"]]) + "\n")
        return 0
    if args.command == "power-on":
        err.write("a virtual node is powered on by starting its daemons\n")
        return 1
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
