"""What a data collector is, and the report object the daemon serves.

A report is Ganeti's: ``name``, ``version`` ("B" for built-in
collectors), ``format_version``, ``timestamp`` (nanoseconds since the
epoch), ``category`` (null for collectors without one), ``kind`` (0
performance, 1 status) and ``data``.  Status collectors put
``{"status": {"code": C, "message": M}}`` in their data, with the codes
below (their bitwise OR over a node is 0 when all is well).
"""

import attr
from zope.interface import Attribute, Interface

BUILTIN_VERSION = "B"
FORMAT_VERSION = 1

KIND_PERFORMANCE = 0
KIND_STATUS = 1

#: the URL category of collectors whose category is null
DEFAULT_CATEGORY = "default"
CATEGORIES = frozenset(["instance", "storage", "daemon", "hypervisor",
                        "node"])

STATUS_OK = 0
STATUS_TEMPORARY = 1   # bad, but being fixed
STATUS_UNKNOWN = 2
STATUS_BAD = 4         # needs intervention


def status(code, message=""):
    """The ``status`` member of a status collector's data."""
    return {"code": code, "message": message}


def merge_status(statuses):
    """One status for several: the codes OR-ed, the messages joined."""
    code = 0
    messages = []
    for s in statuses:
        code |= s["code"]
        if s["message"]:
            messages.append(s["message"])
    return status(code, "\n".join(messages))


class ICollector(Interface):
    """One data collector of the monitoring daemon."""

    name = Attribute("The collector's name, e.g. 'cpu-avg-load'.")
    category = Attribute("Its category (one of CATEGORIES) or None.")
    kind = Attribute("KIND_PERFORMANCE or KIND_STATUS.")
    sampled = Attribute(
        "True: the daemon calls collect() on a timer at the collector's"
        " interval and serves the last result; False: collect() runs when a"
        " report is asked for.")

    def available():
        """Whether the collector can work on this node at all (a collector
        that cannot is never listed, whatever the configuration says)."""

    def configure(settings):
        """Take the collector's entry of the cluster's data_collectors
        setting (``active``, ``interval`` and any collector-specific
        keys)."""

    def collect():
        """Deferred firing the report's ``data`` (any JSON value)."""


class CollectorBase(object):
    """Defaults for the optional parts of ICollector."""

    category = None
    kind = KIND_PERFORMANCE
    sampled = False

    def available(self):
        return True

    def configure(self, settings):
        pass


@attr.s(frozen=True)
class Report(object):
    name = attr.ib()
    category = attr.ib()
    kind = attr.ib()
    timestamp = attr.ib()       # nanoseconds since the epoch
    data = attr.ib()
    version = attr.ib(default=BUILTIN_VERSION)
    format_version = attr.ib(default=FORMAT_VERSION)

    @classmethod
    def of(cls, collector, seconds, data):
        # microseconds times 1000, as Ganeti's built-in collectors stamp
        return cls(name=collector.name, category=collector.category,
                   kind=collector.kind, data=data,
                   timestamp=int(seconds * 1000000) * 1000,
                   format_version=getattr(collector, "format_version",
                                          FORMAT_VERSION))

    def to_dict(self):
        return {"name": self.name, "version": self.version,
                "format_version": self.format_version,
                "timestamp": self.timestamp, "category": self.category,
                "kind": self.kind, "data": self.data}


def url_category(collector):
    return collector.category or DEFAULT_CATEGORY
