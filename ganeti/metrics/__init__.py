"""Prometheus metrics of the daemons (docs/metrics.rst).

Every daemon keeps its own :class:`prometheus_client.CollectorRegistry`,
handed to whatever fills it; the library's global default registry is
never used, so that several daemons (or tests) in one process never see
each other's numbers.  Here: what is common, the exposition of several
registries in one answer.  The master daemon's metrics are in
:mod:`ganeti.metrics.master`, the other daemons' beside their code
(``ganeti/rapi/metrics.py``, ``ganeti/mond/metrics.py``,
``ganeti/confd/metrics.py``).
"""

from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry,
                               generate_latest)

#: the Content-Type of a scrape's answer
CONTENT_TYPE = CONTENT_TYPE_LATEST


def new_registry():
    """A registry of one daemon (never the global default)."""
    return CollectorRegistry(auto_describe=True)


def exposition(*registries):
    """The text exposition format (bytes) of ``registries``, one after
    the other (their metric names must differ)."""
    return b"".join(generate_latest(r) for r in registries)
