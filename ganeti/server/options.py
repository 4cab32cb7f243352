"""Command-line checks the daemons share: where they listen."""

import ipaddress
import socket

from twisted.python import usage

__all__ = ["service_port", "check_listen"]


def service_port(name, protocol, fallback):
    """The port of the system's ``name/protocol`` service, else ``fallback``.

    Ganeti's daemons and clients look the name up first, so we do too.
    """
    try:
        return socket.getservbyname(name, protocol)
    except OSError:
        return fallback


def check_listen(options, default_port):
    """Check a daemon's ``--port`` and ``--bind``; an unset port becomes
    ``default_port()`` (called only then: it may ask /etc/services)."""
    if options["port"] is None:
        options["port"] = default_port()
    if not 0 <= options["port"] <= 65535:
        raise usage.UsageError("--port: %d is not a port number (0-65535)"
                               % options["port"])
    try:
        ipaddress.ip_address(options["bind"])
    except ValueError:
        raise usage.UsageError("--bind: %r is not an IP address"
                               % options["bind"])
