"""Command-line checks the daemons share: where they listen."""

import ipaddress
import socket

from twisted.python import usage

__all__ = ["service_port", "check_listen", "parse_duration"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


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


def parse_duration(option, text):
    """Seconds in ``text`` (a number with an optional s/m/h/d/w suffix, as
    Ganeti's watcher accepts for ``--job-age``); UsageError naming
    ``option`` otherwise."""
    value = str(text).strip()
    factor = 1
    if value and value[-1].lower() in _UNITS:
        factor = _UNITS[value[-1].lower()]
        value = value[:-1]
    try:
        seconds = float(value) * factor
    except ValueError:
        raise usage.UsageError("%s: %r is not a duration (seconds, or a"
                               " number with s, m, h, d or w)"
                               % (option, text))
    if seconds < 0 or seconds != seconds:
        raise usage.UsageError("%s: %r must not be negative" % (option, text))
    return seconds
