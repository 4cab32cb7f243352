"""``ganeti-confd-client``: ask confd servers one question, print the answer.

Examples::

    ganeti-confd-client -a 192.0.2.1 ping
    ganeti-confd-client --root /srv/vc/node1 node-role node2.example.com
    ganeti-confd-client -a 192.0.2.1 -a 192.0.2.2 node-pip-by-ip 10.0.0.5
    ganeti-confd-client -a 192.0.2.1 master name ip mnode-pip
    ganeti-confd-client -a 192.0.2.1 config-query /cluster/cluster_name

Without ``-a`` the servers are the master candidates listed in
``ROOT/var/lib/ganeti/ssconf_master_candidates_ips``.  The key is
``ROOT/var/lib/ganeti/hmac.key`` (or ``--hmac-file``), used verbatim.

The answer is printed as one JSON object with its serial, the status, which
server's reply was kept and whether the servers agreed.  Exit status: 0 for
an OK answer, 1 for an error answer, a timeout or an unreadable key, 2 for
wrong usage.
"""

import argparse
import json
import sys

from twisted.internet import defer, task

from ganeti import errors
from ganeti import pathutils
from ganeti.confd import client as confd_client
from ganeti.confd import wire

PROG = "ganeti-confd-client"

MASTER_FIELDS = {"name": wire.REQFIELD_NAME, "ip": wire.REQFIELD_IP,
                 "mnode-pip": wire.REQFIELD_MNODE_PIP}

ERROR_CODES = {wire.ERROR_UNKNOWN_ENTRY: "unknown entry",
               wire.ERROR_INTERNAL: "internal error",
               wire.ERROR_ARGUMENT: "argument error"}


class UsageError(Exception):
    pass


def _master_field(text):
    # (not "choices": argparse rejects an empty nargs="*" list with choices)
    if text not in MASTER_FIELDS:
        raise argparse.ArgumentTypeError(
            "%r is not one of %s" % (text, ", ".join(sorted(MASTER_FIELDS))))
    return text


def _parser():
    parser = argparse.ArgumentParser(
        prog=PROG, description="Query ganeti-confd servers (UDP, signed).",
        epilog="Run '%s REQUEST -h' for the arguments of a request." % PROG)
    parser.add_argument("--root", default="/",
                        help="root of the node's files [default: /]")
    parser.add_argument("-a", "--address", action="append", default=[],
                        metavar="IP", help="a confd server to ask (repeat"
                        " for several) [default: the master candidates from"
                        " ssconf]")
    parser.add_argument("--port", type=int, default=None,
                        help="UDP port of the servers [default: %d]"
                        % wire.DEFAULT_PORT)
    parser.add_argument("--hmac-file", default=None,
                        help="cluster HMAC key [default:"
                        " ROOT/var/lib/ganeti/hmac.key]")
    parser.add_argument("--timeout", type=float,
                        default=float(wire.CLIENT_EXPIRE_TIMEOUT),
                        help="seconds to wait for replies"
                        " [default: %(default)s]")
    parser.add_argument("--coverage", type=int,
                        default=wire.DEFAULT_REQ_COVERAGE,
                        help="how many of the servers to ask; 0 = all"
                        " [default: %(default)s]")
    sub = parser.add_subparsers(dest="request", metavar="REQUEST")
    sub.required = True

    def add(name, help, *args):
        p = sub.add_parser(name, help=help)
        for arg, kwargs in args:
            p.add_argument(arg, **kwargs)
        return p

    add("ping", "configuration format version (checks the server is up)")
    add("node-role", "role of a node: 0 master, 1 candidate, 2 offline,"
        " 3 drained, 4 regular", ("node", {"metavar": "NODE"}))
    p = add("node-pip-by-ip", "primary IP of the node running the instance"
            " that has IP", ("ips", {"metavar": "IP", "nargs": "+"}))
    p.add_argument("--link", default=None,
                   help="NIC link of the IPs [default: the cluster's]")
    add("master", "master node name, or the FIELDs asked for (name, ip,"
        " mnode-pip)",
        ("fields", {"metavar": "FIELD", "nargs": "*",
                    "type": _master_field}))
    add("node-pip-list", "primary IPs of all nodes")
    add("mc-pip-list", "primary IPs of the master candidates")
    add("instance-ips", "instance IPs on a NIC link",
        ("link", {"metavar": "LINK", "nargs": "?"}))
    add("node-drbd", "DRBD minors of a node", ("node", {"metavar": "NODE"}))
    add("node-instances", "primary and secondary instances of a node",
        ("node", {"metavar": "NODE"}))
    add("instance-disks", "disks of an instance",
        ("instance", {"metavar": "INSTANCE"}))
    add("config-query", "value at a JSON pointer into config.data",
        ("path", {"metavar": "PATH"}))
    add("data-collectors", "data collectors and their state")
    return parser


def parse_args(argv):
    return _parser().parse_args(argv)


def build_request(opts):
    """(request type, query) for parsed options."""
    name = opts.request
    if name == "ping":
        return wire.REQ_PING, None
    if name == "node-role":
        return wire.REQ_NODE_ROLE_BYNAME, opts.node
    if name == "node-pip-by-ip":
        query = {}
        if opts.link is not None:
            query[wire.REQQ_LINK] = opts.link
        if len(opts.ips) == 1:
            query[wire.REQQ_IP] = opts.ips[0]
        else:
            query[wire.REQQ_IPLIST] = list(opts.ips)
        return wire.REQ_NODE_PIP_BY_INSTANCE_IP, query
    if name == "master":
        if not opts.fields:
            return wire.REQ_CLUSTER_MASTER, None
        return wire.REQ_CLUSTER_MASTER, {
            wire.REQQ_FIELDS: [MASTER_FIELDS[f] for f in opts.fields]}
    if name == "node-pip-list":
        return wire.REQ_NODE_PIP_LIST, None
    if name == "mc-pip-list":
        return wire.REQ_MC_PIP_LIST, None
    if name == "instance-ips":
        return wire.REQ_INSTANCES_IPS_LIST, opts.link
    if name == "node-drbd":
        return wire.REQ_NODE_DRBD, opts.node
    if name == "node-instances":
        return wire.REQ_NODE_INSTANCES, opts.node
    if name == "instance-disks":
        return wire.REQ_INSTANCE_DISKS, opts.instance
    if name == "config-query":
        return wire.REQ_CONFIG_QUERY, opts.path
    if name == "data-collectors":
        return wire.REQ_DATA_COLLECTORS, None
    raise UsageError("unknown request %r" % name)


def _servers(opts, paths):
    if opts.address:
        return opts.address
    ssconf = paths.ssconf_file("master_candidates_ips")
    try:
        with open(ssconf) as f:
            found = [line.strip() for line in f if line.strip()]
    except OSError:
        found = []
    if not found:
        raise UsageError("no confd server to ask: give -a/--address IP (%s"
                         " lists none)" % ssconf)
    return found


def _describe_error(reply_status, answer):
    if isinstance(answer, int) and not isinstance(answer, bool):
        answer = ERROR_CODES.get(answer, "error code %d" % answer)
    if reply_status == wire.STATUS_NOTIMPLEMENTED:
        return "not implemented by the server: %s" % answer
    return str(answer)


async def run(reactor, opts, out, err):
    """Send the request of ``opts``; print; return the exit status."""
    def fail(message, code=1):
        err.write("%s: %s\n" % (PROG, message))
        return code

    paths = pathutils.Paths(opts.root)
    key_file = opts.hmac_file or paths.hmac_key_file
    try:
        key = wire.read_hmac_key(key_file)
    except OSError as exc:
        return fail("cannot read the cluster HMAC key %s: %s"
                    % (key_file, exc.strerror))
    try:
        servers = _servers(opts, paths)
        req_type, query = build_request(opts)
        client = confd_client.ConfdClient(
            key, servers, port=opts.port or wire.DEFAULT_PORT,
            reactor=reactor, timeout=opts.timeout, coverage=opts.coverage)
    except (UsageError, errors.ConfdClientError) as exc:
        return fail(str(exc), 2)
    try:
        result = await client.request(req_type, query)
    except confd_client.ConfdTimeoutError as exc:
        return fail(str(exc))
    except errors.GenericError as exc:
        return fail(str(exc))
    finally:
        await client.close()
    if not result.consistent:
        err.write("%s: warning: servers gave different answers with the same"
                  " serial %d; showing %s:%d's\n"
                  % ((PROG, result.serial) + result.peer))
    if not result.complete:
        err.write("%s: warning: only %d of %d servers replied\n"
                  % (PROG, len(result.replies), len(result.queried)))
    if not result.ok:
        return fail("%s: %s (serial %d)" % (
            opts.request, _describe_error(result.status, result.answer),
            result.serial))
    out.write(json.dumps({
        "request": opts.request,
        "answer": result.answer,
        "serial": result.serial,
        "status": result.status,
        "server": "%s:%d" % result.peer,
        "replies": len(result.replies),
        "queried": len(result.queried),
        "consistent": result.consistent,
    }, indent=2, sort_keys=True) + "\n")
    return 0


def main(argv=None):
    opts = parse_args(sys.argv[1:] if argv is None else argv)

    async def go(reactor):
        code = await run(reactor, opts, sys.stdout, sys.stderr)
        if code:
            raise SystemExit(code)

    task.react(lambda reactor: defer.Deferred.fromCoroutine(go(reactor)))


if __name__ == "__main__":
    main()
