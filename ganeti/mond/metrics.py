"""The monitoring daemon's Prometheus metrics (``GET /metrics``).

Read when scraped, from what the daemon runs anyway:

* the instances of this node by actual state, from the ``inst-status-*``
  collectors' reports (a report being collected is shared, as for
  ``/1/report``);
* the node's memory, from the hypervisor driver those collectors hold
  (the first enabled hypervisor's view);
* the LVM volume groups' size and free space, from ``vgs`` (run as a
  child process, as the ``lv`` collector runs ``lvs``; a node without
  LVM has none);
* how long each collector's last collection took.
"""

from prometheus_client.core import GaugeMetricFamily
from twisted.internet import defer
from twisted.logger import Logger

from ganeti import metrics
from ganeti.mond import inststatus

log = Logger()

MIB = 1024 * 1024
VGS_SEPARATOR = ";"
VGS_ARGV = ["vgs", "--noheadings", "--units", "b", "--nosuffix",
            "--separator", VGS_SEPARATOR, "-o", "vg_name,vg_size,vg_free"]
#: exit status of a program that could not be started (not installed)
_NOT_FOUND = 127
#: every state an instance is counted in (0 when none is in it)
INSTANCE_STATES = tuple(sorted(set(inststatus.ACTUAL_STATES.values()) |
                               {"unknown"}))


def parse_vgs(text):
    """``[(name, size bytes, free bytes)]`` of ``vgs``' output."""
    groups = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cols = line.strip().split(VGS_SEPARATOR)
        if len(cols) != 3:
            raise ValueError("vgs printed %d columns, not 3: %r"
                             % (len(cols), line))
        groups.append((cols[0], int(float(cols[1])), int(float(cols[2]))))
    return groups


class _Families(object):
    """The families of the scrape being answered."""

    def __init__(self):
        self.families = []

    def collect(self):
        return list(self.families)

    def describe(self):
        return []


class MondMetrics(object):
    """The metrics of ``daemon`` (a MonitoringDaemon), with ``runner``
    (``run(argv, env=..., timeout=...)``) for ``vgs``; a registry of its
    own."""

    def __init__(self, daemon, runner, registry=None, timeout=30.0):
        self.daemon = daemon
        self.runner = runner
        self.timeout = timeout
        self.registry = registry if registry is not None \
            else metrics.new_registry()
        self._current = _Families()
        self.registry.register(self._current)

    def _instance_collectors(self):
        return [c for name, c in sorted(self.daemon.collectors.items())
                if isinstance(c, inststatus.InstStatusCollector)
                and name in self.daemon.active]

    async def _instance_states(self):
        family = GaugeMetricFamily(
            "ganeti_node_instances", "Primary instances of this node, by"
            " hypervisor and actual state.", labels=["hypervisor", "state"])
        for collector in self._instance_collectors():
            report = await self.daemon.report(collector.name)
            counts = dict.fromkeys(INSTANCE_STATES, 0)
            entries = (report.data.get("instances") or []) \
                if report is not None and isinstance(report.data, dict) \
                else []
            for entry in entries:
                state = entry.get("actualState")
                state = state if state in counts else "unknown"
                counts[state] += 1
            for state in INSTANCE_STATES:
                family.add_metric([collector.hypervisor_name, state],
                                  counts[state])
        return [family]

    async def _memory(self):
        for collector in self._instance_collectors():
            try:
                info = await defer.maybeDeferred(
                    collector.driver.get_node_info)
            except Exception as err:
                log.warn("node memory for the metrics: {hv} failed: {err}",
                         hv=collector.hypervisor_name, err=err)
                continue
            return [
                GaugeMetricFamily("ganeti_node_memory_total_bytes",
                                  "The node's memory.",
                                  value=info.memory_total * MIB),
                GaugeMetricFamily("ganeti_node_memory_free_bytes",
                                  "The node's memory free for instances.",
                                  value=info.memory_free * MIB)]
        return []

    async def _volume_groups(self):
        result = await self.runner.run(
            VGS_ARGV, env={"LVM_SUPPRESS_FD_WARNINGS": "1"},
            timeout=self.timeout)
        if result.exit_code == _NOT_FOUND:
            return []
        if result.failed:
            log.warn("vgs failed: {what}", what=result.describe())
            return []
        try:
            groups = parse_vgs(result.stdout.decode("utf-8", "replace"))
        except ValueError as err:
            log.warn("vgs: {err}", err=err)
            return []
        size = GaugeMetricFamily(
            "ganeti_node_disk_total_bytes", "Size of the node's LVM volume"
            " groups.", labels=["vg"])
        free = GaugeMetricFamily(
            "ganeti_node_disk_free_bytes", "Free space of the node's LVM"
            " volume groups.", labels=["vg"])
        for name, total, available in groups:
            size.add_metric([name], total)
            free.add_metric([name], available)
        return [size, free]

    def _durations(self):
        family = GaugeMetricFamily(
            "ganeti_mond_collector_duration_seconds", "Seconds the last"
            " collection of each data collector took.",
            labels=["collector"])
        for name, seconds in sorted(self.daemon.durations.items()):
            family.add_metric([name], seconds)
        return [family]

    async def _scrape(self):
        families = []
        families += await self._instance_states()
        families += await self._memory()
        families += await self._volume_groups()
        families += self._durations()
        self._current.families = families
        try:
            return metrics.exposition(self.registry)
        finally:
            self._current.families = []

    def scrape(self):
        """Deferred exposition (bytes)."""
        return defer.Deferred.fromCoroutine(self._scrape())
